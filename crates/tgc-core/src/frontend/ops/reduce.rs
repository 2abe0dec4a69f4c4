//! Reductions: `sum`, `prod`, `max`, `min`, `mean` with `keepdim` and
//! `acc`; the cumulative ops `cumsum`, `cumprod`, `cummax`, `cummin`.
//!
//! `REDUCE{op}` over the axes accumulating in `acc` (default: f32 for float
//! inputs, i32 for i32, i32 for a bool `sum`, bool for a bool `prod`, `max`,
//! `min`),
//! then `CAST` back to a float input's dtype; `keepdim` reshapes the 1s back.
//! `mean = sum · (1/n)` (a `CONST` for a known `n`, else `FDIV` by the
//! count of [`super::count`]); max error one rounding of `1/n` and one of
//! the product, relative 2^-23 beyond the accumulation itself.

use crate::diag;
use crate::diag::DResult;
use crate::frontend::ir::{AxisRef, ReduceFn};
use crate::sym::Dim;
use crate::tiny::{BinaryOp, Graph, NodeId, ReduceOp, UnaryOp};
use crate::DType;

use super::{broadcast_to, cast_to, count, fail, keep_dims};

/// Resolves reduce axes (decision 4): an integer index (negative from the
/// end) or a symbol name that must size exactly one axis; `None` is every
/// axis. `dim_of` gives the size a symbol name stands for here (inside an
/// inlined subgraph, its value at the call site). Sorted.
///
/// Errors: `InvalidAxis` for an index out of range, a repeated axis, or a
/// name that sizes no axis or several.
pub fn resolve_axes(
    g: &Graph,
    x: NodeId,
    axes: Option<&[AxisRef]>,
    dim_of: &dyn Fn(&str) -> DResult<Dim>,
) -> DResult<Vec<usize>> {
    let shape = g.shape(x).to_vec();
    let Some(axes) = axes else {
        return Ok((0..shape.len()).collect());
    };
    let mut out = Vec::new();
    for a in axes {
        let k = match a {
            AxisRef::Index(i) => super::axis(g, *i, shape.len())?,
            AxisRef::Name(n) => {
                let d = dim_of(n)?;
                let hits: Vec<usize> = (0..shape.len()).filter(|&k| shape[k] == d).collect();
                match hits.as_slice() {
                    [k] => *k,
                    [] => {
                        return Err(fail(
                            g,
                            diag!(InvalidAxis, "no axis has size `{n}` in {}", crate::tiny::infer::fmt_shape(&shape)),
                        ))
                    }
                    _ => {
                        return Err(fail(
                            g,
                            diag!(
                                InvalidAxis,
                                "several axes have size `{n}` in {}; use an index",
                                crate::tiny::infer::fmt_shape(&shape)
                            ),
                        ))
                    }
                }
            }
        };
        if out.contains(&k) {
            return Err(fail(g, diag!(InvalidAxis, "axis {k} is reduced twice")));
        }
        out.push(k);
    }
    out.sort_unstable();
    Ok(out)
}

/// The default accumulator of `f` on `dt` (see the module doc).
pub fn default_acc(f: ReduceFn, dt: DType) -> DType {
    match (dt, f) {
        (DType::I32, _) | (DType::Bool, ReduceFn::Sum) => DType::I32,
        (DType::Bool, _) => DType::Bool,
        _ => DType::F32,
    }
}

/// Reduces `axes` (normalised, e.g. by [`resolve_axes`]) of `x`.
///
/// Result: the input shape without `axes` (with 1s there if `keepdim`), the
/// input's dtype for float inputs, else the accumulator's.
///
/// Errors: `DTypeMismatch` for `mean` of a non-float input or an
/// accumulator that does not fit the input (`REDUCE` rules).
pub fn reduce(
    g: &mut Graph,
    f: ReduceFn,
    x: NodeId,
    axes: &[usize],
    keepdim: bool,
    acc: Option<DType>,
) -> DResult<NodeId> {
    let dt = g.dtype(x);
    let full = g.shape(x).to_vec();
    let acc = acc.unwrap_or_else(|| default_acc(f, dt));
    if f == ReduceFn::Mean {
        super::require_float(g, x, "mean")?;
    }
    let mut r = g.reduce(reduce_op(f), x, axes, acc)?;
    if f == ReduceFn::Mean {
        let dims: Vec<Dim> = axes.iter().map(|&k| full[k].clone()).collect();
        r = divide_by_count(g, r, &dims)?;
    }
    if dt.is_float() {
        r = cast_to(g, r, dt)?;
    }
    if keepdim {
        r = keep_dims(g, r, &full, axes)?;
    }
    Ok(r)
}

/// The Tiny op of a reduction (`mean` sums).
fn reduce_op(f: ReduceFn) -> ReduceOp {
    match f {
        ReduceFn::Sum | ReduceFn::Mean => ReduceOp::Sum,
        ReduceFn::Prod => ReduceOp::Prod,
        ReduceFn::Max => ReduceOp::Max,
        ReduceFn::Min => ReduceOp::Min,
    }
}

/// `cumsum`/`cumprod`/`cummax`/`cummin(x, axis, exclusive, reverse)`
/// (PyTorch's `torch.cumsum`, ONNX `CumSum` with its `exclusive` and
/// `reverse` attributes; `cummax`/`cummin` give the values, not
/// PyTorch's indices): one `SCAN` along the axis (negative from the end)
/// in the input's dtype, a bool input counted in i32; `reverse` scans from
/// the end, `exclusive` leaves each point out of its own prefix, so the
/// first is the identity (0, 1, -inf, +inf; the i32 extremes).
///
/// Errors: `InvalidAxis` for an axis out of range; `DTypeMismatch` for a
/// `mean` (not a cumulative op).
pub fn scan(g: &mut Graph, f: ReduceFn, x: NodeId, axis: i64, exclusive: bool, reverse: bool) -> DResult<NodeId> {
    if f == ReduceFn::Mean {
        return Err(fail(g, diag!(DTypeMismatch, "there is no cumulative mean")));
    }
    let k = super::axis(g, axis, g.shape(x).len())?;
    let x = if g.dtype(x) == DType::Bool { cast_to(g, x, DType::I32)? } else { x };
    g.scan(x, reduce_op(f), k, exclusive, reverse)
}

/// `x / Π dims` for a float `x`: `MUL` by the constant `1/n` when `n` is
/// known, else `MUL` by `RECIP` of the count broadcast to `x`.
pub fn divide_by_count(g: &mut Graph, x: NodeId, dims: &[Dim]) -> DResult<NodeId> {
    let dt = g.dtype(x);
    let shape = g.shape(x).to_vec();
    let inv = match Dim::product(dims).as_int() {
        Some(n) => g.constant(1.0 / n as f64, dt)?,
        None => {
            let n = count(g, dims)?;
            let n = cast_to(g, n, dt)?;
            g.unary(UnaryOp::Recip, n)?
        }
    };
    let inv = broadcast_to(g, inv, &shape)?;
    g.binary(BinaryOp::Mul, x, inv)
}

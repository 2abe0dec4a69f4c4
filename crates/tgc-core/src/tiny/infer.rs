//! The shape and dtype rules of Tiny IR (`spec/002` §3–4, `000` §13): one
//! function, used by the builder when a node is added and by the verifier.

use crate::affine::{AffAtom, AffExpr};
use crate::diag;
use crate::diag::{DResult, Diagnostic};
use crate::sym::Dim;
use crate::DType;

use super::op::{BinaryOp, Op, UnaryOp};

/// Relation of a [`Constraint`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rel {
    Eq,
    Le,
}

/// A shape fact that could not be decided symbolically (e.g. `Cin_total =
/// G*Cin` for a `RESHAPE`); it is checked when the symbols get values.
#[derive(Clone, Debug, PartialEq)]
pub struct Constraint {
    pub lhs: Dim,
    pub rel: Rel,
    pub rhs: Dim,
    /// What the fact is about, for the error message.
    pub what: String,
}

/// A node's result type.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorType {
    pub dtype: DType,
    pub shape: Vec<Dim>,
}

fn shape_str(s: &[Dim]) -> String {
    let v: Vec<String> = s.iter().map(|d| d.to_string()).collect();
    format!("[{}]", v.join(", "))
}

fn check_axes(axes: &[usize], rank: usize, what: &str) -> DResult<()> {
    let mut seen = vec![false; rank];
    for &a in axes {
        if a >= rank {
            return Err(diag!(InvalidAxis, "{what} axis {a} is out of range for rank {rank}"));
        }
        if seen[a] {
            return Err(diag!(InvalidAxis, "{what} axis {a} is listed twice"));
        }
        seen[a] = true;
    }
    Ok(())
}

/// Pushes `a == b` as a constraint unless it is decided; a decided falsehood
/// is an error built by `err`.
fn require_eq(a: &Dim, b: &Dim, what: String, out: &mut Vec<Constraint>, err: impl Fn() -> Diagnostic) -> DResult<()> {
    if a == b {
        return Ok(());
    }
    if a.as_int().is_some() && b.as_int().is_some() {
        return Err(err());
    }
    out.push(Constraint { lhs: a.clone(), rel: Rel::Eq, rhs: b.clone(), what });
    Ok(())
}

fn require_le(a: &Dim, b: &Dim, what: String, out: &mut Vec<Constraint>, err: impl Fn() -> Diagnostic) -> DResult<()> {
    match (a.as_int(), b.as_int()) {
        (Some(x), Some(y)) if x <= y => Ok(()),
        (Some(_), Some(_)) => Err(err()),
        _ => {
            if (b - a).as_int().is_some_and(|d| d >= 0) {
                return Ok(());
            }
            out.push(Constraint { lhs: a.clone(), rel: Rel::Le, rhs: b.clone(), what });
            Ok(())
        }
    }
}

/// True when `a = c·b` or `b = c·a` for an integer `c ≠ 1`: such sizes can
/// never be equal (all sizes are ≥ 1).
fn differ_by_constant_factor(a: &Dim, b: &Dim) -> bool {
    let factor =
        |x: &Dim, y: &Dim| x.floordiv(y).and_then(|q| q.as_int()).filter(|&c| &(y * &Dim::int(c)) == x && c != 1);
    factor(a, b).is_some() || factor(b, a).is_some()
}

/// A size computed with [`Dim`]'s exact arithmetic, or `AxisSizeMismatch`
/// naming `what` when a coefficient leaves `i64` (a saturated value could
/// come back in range and be taken for a real size).
fn exact(d: Option<Dim>, what: impl FnOnce() -> String) -> DResult<Dim> {
    d.ok_or_else(|| diag!(AxisSizeMismatch, "{}: the size overflows 64-bit integers", what()))
}

/// Checks that every known dimension of a declared shape is ≥ 1.
pub fn check_shape(shape: &[Dim]) -> DResult<()> {
    for d in shape {
        if let Some(v) = d.as_int() {
            if v < 1 {
                return Err(diag!(AxisSizeMismatch, "dimension {v} in {}: sizes must be at least 1", shape_str(shape)));
            }
        }
    }
    Ok(())
}

/// Checks a result shape against the element-count limit
/// ([`MAX_ELEMENTS`](crate::sym::MAX_ELEMENTS)): every coefficient of its
/// element count, which for a concrete shape is the count itself. Symbolic
/// counts are checked again once the symbols are bound ([`Graph::bind`](super::Graph::bind)
/// re-infers every node).
fn check_size(shape: &[Dim]) -> DResult<()> {
    let numel = shape.iter().try_fold(Dim::int(1), |a, b| a.checked_mul(b));
    let over = |n: &Dim| n.monomials().any(|(_, c)| c.unsigned_abs() > crate::sym::MAX_ELEMENTS as u64);
    if numel.as_ref().is_none_or(over) {
        return Err(diag!(
            Unsupported,
            "shape {} has more than {} elements, the limit for one tensor",
            shape_str(shape),
            crate::sym::MAX_ELEMENTS
        ));
    }
    Ok(())
}

/// Infers the result of `op` applied to sources of type `srcs`.
///
/// `dtype` is the requested result dtype for `INPUT`, `CONST`, `CAST` and the
/// accumulator of `REDUCE` (`None` there is `AccDtypeMissing`); `shape` is the
/// requested result shape for `INPUT`, `RESHAPE`, `EXPAND` and `VIEW`.
/// Undecidable symbolic facts are returned as constraints.
pub fn infer(
    op: &Op,
    srcs: &[&TensorType],
    dtype: Option<DType>,
    shape: Option<&[Dim]>,
) -> DResult<(TensorType, Vec<Constraint>)> {
    if srcs.len() != op.arity() {
        return Err(diag!(ArityMismatch, "{} takes {} operand(s), got {}", op.name(), op.arity(), srcs.len()));
    }
    let mut cons = Vec::new();
    let need_shape = || shape.map(|s| s.to_vec()).ok_or_else(|| diag!(Internal, "{} needs a result shape", op.name()));
    let ty = match op {
        Op::Input { name } => {
            let shape = need_shape()?;
            check_shape(&shape)?;
            let dtype = dtype.ok_or_else(|| diag!(Internal, "INPUT `{name}` needs a dtype"))?;
            TensorType { dtype, shape }
        }
        Op::Const { value } => {
            let dtype = dtype.ok_or_else(|| diag!(Internal, "CONST needs a dtype"))?;
            if !dtype.is_float() && value.fract() != 0.0 {
                return Err(diag!(DTypeMismatch, "constant {value} is not a whole number but meets {dtype}"));
            }
            TensorType { dtype, shape: vec![] }
        }
        Op::Unary(u) => {
            let x = srcs[0];
            let ok = match u {
                UnaryOp::Neg | UnaryOp::Relu => x.dtype.is_float() || x.dtype == DType::I32,
                _ => x.dtype.is_float(),
            };
            if !ok {
                return Err(diag!(DTypeMismatch, "{} is not defined on {}", op.name(), x.dtype));
            }
            x.clone()
        }
        Op::Cast => TensorType {
            dtype: dtype.ok_or_else(|| diag!(Internal, "CAST needs a target dtype"))?,
            shape: srcs[0].shape.clone(),
        },
        Op::Binary(b) => {
            let (x, y) = (srcs[0], srcs[1]);
            same_shape(op, &x.shape, &y.shape)?;
            if x.dtype != y.dtype {
                return Err(diag!(
                    DTypeMismatch,
                    "{} operands have dtypes {} and {}; insert an explicit cast",
                    op.name(),
                    x.dtype,
                    y.dtype
                ));
            }
            let ok = match b {
                BinaryOp::Fdiv => x.dtype.is_float(),
                BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul => x.dtype != DType::Bool,
                _ => true,
            };
            if !ok {
                return Err(diag!(DTypeMismatch, "{} is not defined on {}", op.name(), x.dtype));
            }
            let dtype = if matches!(b, BinaryOp::Cmplt | BinaryOp::Cmpeq) { DType::Bool } else { x.dtype };
            TensorType { dtype, shape: x.shape.clone() }
        }
        Op::Where => {
            let (c, a, b) = (srcs[0], srcs[1], srcs[2]);
            if c.dtype != DType::Bool {
                return Err(diag!(DTypeMismatch, "WHERE condition must be bool, got {}", c.dtype));
            }
            same_shape(op, &c.shape, &a.shape)?;
            same_shape(op, &a.shape, &b.shape)?;
            if a.dtype != b.dtype {
                return Err(diag!(DTypeMismatch, "WHERE branches have dtypes {} and {}", a.dtype, b.dtype));
            }
            a.clone()
        }
        Op::Reduce { axes, .. } => {
            let x = srcs[0];
            check_axes(axes, x.shape.len(), "REDUCE")?;
            let acc = dtype.ok_or_else(|| {
                diag!(AccDtypeMissing, "REDUCE needs an accumulator dtype (e.g. \"dtype\": \"fp32\")")
            })?;
            let ok = match x.dtype {
                DType::F16 | DType::BF16 | DType::F32 => acc.is_float(),
                DType::I32 => acc == DType::I32,
                DType::Bool => matches!(acc, DType::I32 | DType::Bool),
            };
            if !ok {
                return Err(diag!(DTypeMismatch, "REDUCE of {} cannot accumulate in {}", x.dtype, acc));
            }
            let shape = x.shape.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, d)| d.clone()).collect();
            TensorType { dtype: acc, shape }
        }
        Op::Scan { axis, .. } => {
            let x = srcs[0];
            check_axes(&[*axis], x.shape.len(), "SCAN")?;
            if x.dtype == DType::Bool {
                return Err(diag!(DTypeMismatch, "SCAN of bool: cast to i32 first"));
            }
            x.clone()
        }
        Op::Reshape => {
            let x = srcs[0];
            let to = need_shape()?;
            check_shape(&to)?;
            let (a, b) = (Dim::product(&x.shape), Dim::product(&to));
            let msg = || {
                diag!(
                    AxisSizeMismatch,
                    "RESHAPE from {} ({} elements) to {} ({} elements)",
                    shape_str(&x.shape),
                    a,
                    shape_str(&to),
                    b
                )
            };
            if differ_by_constant_factor(&a, &b) {
                return Err(msg());
            }
            require_eq(
                &a,
                &b,
                format!("RESHAPE {} -> {} keeps the element count", shape_str(&x.shape), shape_str(&to)),
                &mut cons,
                msg,
            )?;
            TensorType { dtype: x.dtype, shape: to }
        }
        Op::Permute { perm } => {
            let x = srcs[0];
            let mut sorted = perm.clone();
            sorted.sort_unstable();
            if sorted != (0..x.shape.len()).collect::<Vec<_>>() {
                return Err(diag!(
                    InvalidPermutation,
                    "{perm:?} is not a permutation of the {} axes of {}",
                    x.shape.len(),
                    shape_str(&x.shape)
                ));
            }
            TensorType { dtype: x.dtype, shape: perm.iter().map(|&p| x.shape[p].clone()).collect() }
        }
        Op::Expand => {
            let x = srcs[0];
            let to = need_shape()?;
            check_shape(&to)?;
            if to.len() != x.shape.len() {
                return Err(diag!(
                    BroadcastMismatch,
                    "EXPAND keeps the rank: {} to {}",
                    shape_str(&x.shape),
                    shape_str(&to)
                ));
            }
            for (a, b) in x.shape.iter().zip(&to) {
                if a != b && !a.is_one() {
                    return Err(diag!(
                        BroadcastMismatch,
                        "EXPAND {} to {}: size {a} is neither 1 nor {b}",
                        shape_str(&x.shape),
                        shape_str(&to)
                    ));
                }
            }
            TensorType { dtype: x.dtype, shape: to }
        }
        Op::Pad { pads, value } => {
            let x = srcs[0];
            if pads.len() != x.shape.len() {
                return Err(diag!(ArityMismatch, "PAD needs {} [lo, hi] pairs, got {}", x.shape.len(), pads.len()));
            }
            if !x.dtype.is_float() && value.fract() != 0.0 {
                return Err(diag!(DTypeMismatch, "pad value {value} does not fit {}", x.dtype));
            }
            let mut shape = Vec::new();
            for ((lo, hi), d) in pads.iter().zip(&x.shape) {
                for p in [lo, hi] {
                    if p.as_int().is_some_and(|v| v < 0) {
                        return Err(diag!(Unsupported, "negative padding {p}; use shrink to cut"));
                    }
                }
                let padded = d.checked_add(lo).and_then(|s| s.checked_add(hi));
                shape.push(exact(padded, || format!("PAD of size {d} by [{lo}, {hi}]"))?);
            }
            TensorType { dtype: x.dtype, shape }
        }
        Op::Shrink { lo, hi, step } => {
            let x = srcs[0];
            let r = x.shape.len();
            if lo.len() != r || hi.len() != r || step.len() != r {
                return Err(diag!(ArityMismatch, "SHRINK needs lo, hi and step for each of the {r} axes"));
            }
            let mut shape = Vec::new();
            for k in 0..r {
                if step[k].as_int().is_some_and(|s| s <= 0) {
                    return Err(diag!(NegativeStride, "SHRINK step {} on axis {k} must be positive", step[k]));
                }
                let bad = || {
                    diag!(
                        AxisSizeMismatch,
                        "SHRINK bounds [{}, {}) on axis {k} do not fit size {}",
                        lo[k],
                        hi[k],
                        x.shape[k]
                    )
                };
                require_le(&Dim::int(0), &lo[k], format!("SHRINK lo ≥ 0 on axis {k}"), &mut cons, bad)?;
                require_le(&(&lo[k] + &Dim::int(1)), &hi[k], format!("SHRINK lo < hi on axis {k}"), &mut cons, bad)?;
                require_le(&hi[k], &x.shape[k], format!("SHRINK hi ≤ size on axis {k}"), &mut cons, bad)?;
                shape.push(shrink_size(&lo[k], &hi[k], &step[k], k)?);
            }
            TensorType { dtype: x.dtype, shape }
        }
        Op::Flip { axes } => {
            let x = srcs[0];
            check_axes(axes, x.shape.len(), "FLIP")?;
            x.clone()
        }
        Op::Gather { axis } => {
            let (x, index) = (srcs[0], srcs[1]);
            check_axes(&[*axis], x.shape.len(), "GATHER")?;
            if index.dtype != DType::I32 {
                return Err(diag!(DTypeMismatch, "GATHER index must be i32, got {}", index.dtype));
            }
            if index.shape.len() != x.shape.len() {
                return Err(diag!(
                    AxisSizeMismatch,
                    "GATHER index {} must have the rank of x {}",
                    shape_str(&index.shape),
                    shape_str(&x.shape)
                ));
            }
            for (k, (a, b)) in x.shape.iter().zip(&index.shape).enumerate().filter(|(k, _)| k != axis) {
                let bad = || {
                    diag!(
                        AxisSizeMismatch,
                        "GATHER index {} and x {} differ on axis {k}, which is not the gathered axis {axis}",
                        shape_str(&index.shape),
                        shape_str(&x.shape)
                    )
                };
                require_eq(a, b, format!("GATHER index and x agree on axis {k}"), &mut cons, bad)?;
            }
            TensorType { dtype: x.dtype, shape: index.shape.clone() }
        }
        Op::View { map } => {
            let x = srcs[0];
            let to = need_shape()?;
            check_shape(&to)?;
            if map.len() != x.shape.len() {
                return Err(diag!(
                    ArityMismatch,
                    "VIEW index_map needs {} expressions (one per input axis), got {}",
                    x.shape.len(),
                    map.len()
                ));
            }
            for (k, e) in map.iter().enumerate() {
                if e.arity() as usize > to.len() {
                    return Err(diag!(
                        InvalidAxis,
                        "VIEW index_map[{k}] = {e} uses an axis beyond the {} output axes",
                        to.len()
                    ));
                }
                check_view_monotone(e, k)?;
                let (lo, hi) = (view_corner(e, k, &to, false)?, view_corner(e, k, &to, true)?);
                let (lo, hi) = (&lo, &hi);
                let bad = || {
                    diag!(
                        AxisSizeMismatch,
                        "VIEW index_map[{k}] = {e} reads [{lo}, {hi}] outside axis {k} of size {}",
                        x.shape[k]
                    )
                };
                require_le(&Dim::int(0), lo, format!("VIEW index_map[{k}] ≥ 0"), &mut cons, bad)?;
                let end = exact(hi.checked_add(&Dim::int(1)), || format!("VIEW index_map[{k}] = {e}"))?;
                require_le(&end, &x.shape[k], format!("VIEW index_map[{k}] < size"), &mut cons, bad)?;
            }
            TensorType { dtype: x.dtype, shape: to }
        }
    };
    check_size(&ty.shape)?;
    Ok((ty, cons))
}

/// The size `⌈(hi − lo) / step⌉` of axis `k` of a `SHRINK`: for known
/// bounds `⌊(hi − lo − 1) / step⌋ + 1`, which no step overflows once `lo <
/// hi` is checked; for symbolic ones `⌊(hi − lo + step − 1) / step⌋`, the
/// canonical form that equal declared shapes must match, computed exactly.
fn shrink_size(lo: &Dim, hi: &Dim, step: &Dim, k: usize) -> DResult<Dim> {
    let overflow = || format!("SHRINK [{lo}, {hi}) step {step} on axis {k}");
    if let (Some(l), Some(h), Some(s)) = (lo.as_int(), hi.as_int(), step.as_int()) {
        let n = h.checked_sub(l).and_then(|d| d.checked_sub(1)).map(|d| d.div_euclid(s)).and_then(|q| q.checked_add(1));
        return exact(n.map(Dim::int), overflow);
    }
    let span = hi.checked_sub(lo).and_then(|d| d.checked_add(step)).and_then(|d| d.checked_sub(&Dim::int(1)));
    exact(span, overflow)?.floordiv(step).ok_or_else(|| diag!(NegativeStride, "SHRINK step {step} must be positive"))
}

/// The value of a non-decreasing VIEW map `e` (`index_map[k]`) at the first
/// (`last` false) or the last point of the output shape `to`: its least or
/// greatest value. With a concrete shape and map it is evaluated exactly,
/// so every value the map takes — floor divisions' operands included —
/// fits `i64` once both corners do; a symbolic one is substituted (and
/// checked exactly when [`Graph::bind`](super::Graph::bind) re-infers the node).
fn view_corner(e: &AffExpr, k: usize, to: &[Dim], last: bool) -> DResult<Dim> {
    let at = |d: &Dim| if last { d.checked_sub(&Dim::int(1)) } else { Some(Dim::int(0)) };
    let concrete: Option<Vec<i64>> = to.iter().map(|d| at(d)?.as_int()).collect();
    if let (Some(point), true) = (&concrete, e.symbols().is_empty()) {
        return e
            .eval(point, &|_| None)
            .map(Dim::int)
            .map_err(|m| diag!(AxisSizeMismatch, "VIEW index_map[{k}] = {e} at {point:?}: {m}"));
    }
    let point: Vec<AffExpr> = to
        .iter()
        .map(|d| exact(at(d), || format!("VIEW output size {d}")).map(AffExpr::constant))
        .collect::<DResult<_>>()?;
    let v = e.substitute(&point).map_err(|m| diag!(InvalidAxis, "{m}"))?;
    v.as_constant().cloned().ok_or_else(|| diag!(Internal, "VIEW bound did not fold to a constant"))
}

/// VIEW maps must be non-decreasing in every output index: a negative step is
/// `NegativeStride` (decision 5; `FLIP` is the way to reverse); a floor
/// division subtracted, as in the expansion of a remainder `e % q` into
/// `e − q·floor(e / q)`, is `Unsupported` (the map wraps around).
fn check_view_monotone(e: &AffExpr, k: usize) -> DResult<()> {
    for (atom, c) in e.terms() {
        if c.as_int().is_some_and(|v| v < 0) {
            return Err(match atom {
                AffAtom::Var(j) => diag!(
                    NegativeStride,
                    "VIEW index_map[{k}] = {e} has the negative step {c} along i{j}; use FLIP to reverse an axis"
                ),
                AffAtom::FloorDiv(..) => diag!(
                    Unsupported,
                    "VIEW index_map[{k}] = {e} subtracts a floor division (a remainder `%` does), so it wraps \
                     around where a VIEW map must never decrease; write the wrap as a RESHAPE and EXPAND (as `tile` does)"
                ),
            });
        }
        if let AffAtom::FloorDiv(inner, _) = atom {
            check_view_monotone(inner, k)?;
        }
    }
    Ok(())
}

fn same_shape(op: &Op, a: &[Dim], b: &[Dim]) -> DResult<()> {
    if a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y) {
        return Ok(());
    }
    Err(diag!(
        BroadcastMismatch,
        "{} operands have shapes {} and {}; Tiny IR needs identical shapes (insert EXPAND)",
        op.name(),
        shape_str(a),
        shape_str(b)
    ))
}

/// `[d0, d1, …]` as text.
pub fn fmt_shape(s: &[Dim]) -> String {
    shape_str(s)
}

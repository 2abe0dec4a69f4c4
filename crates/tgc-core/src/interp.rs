//! The reference interpreter (`spec/000` §9): evaluates a Tiny IR graph on
//! concrete tensors straight from the op definitions. It is the oracle that
//! generated code, the GPU-dialect emulator and real kernels are compared
//! with, so it shares nothing with the lowerings: movement ops are explicit
//! index arithmetic here, never IndexBook maps.
//!
//! Rules:
//! - [`run`] binds the graph's symbols (given `dims`, then the input shapes,
//!   then defaults: [`Graph::resolve_dims`]), specialises it with
//!   [`Graph::bind`] (which re-checks every shape rule), checks the inputs
//!   and evaluates every node once, in arena order; results are the nodes of
//!   `g.outputs`, in that order.
//! - Values are f64. A result is rounded to its node's dtype
//!   ([`DType::round`]) only at `INPUT`, `CONST`, `CAST` and `REDUCE` (to the
//!   accumulator dtype); every other node keeps the exact f64 value, which
//!   makes the interpreter the FP32-or-better reference of `000` §9 on inputs
//!   already rounded to their dtype (decision 8).
//! - i32 arithmetic is exact in f64 (no wrap-around; exact while values stay
//!   below 2^53); `CAST` to i32 truncates toward zero and wraps. `FDIV` is
//!   float-only (the shape/dtype rules reject it on i32).
//! - `CMPLT`/`CMPEQ` give 1.0 or 0.0; `WHERE` takes its second operand where
//!   the condition is non-zero. `MAX`, `MIN` and `REDUCE` MAX/MIN propagate NaN.
//! - `REDUCE` starts from the op's identity ([`ReduceOp::identity`]) and
//!   accumulates in f64 in row-major order of the input.
//! - Movement: `RESHAPE` keeps the row-major data; `PERMUTE`, `EXPAND`,
//!   `SHRINK`, `FLIP` and affine `VIEW`s are strided gathers (offset
//!   `base + Σ i_k·stride_k` over the output index); `PAD` and `VIEW`s with
//!   floor divisions evaluate the index per element. Every read is
//!   bounds-checked: a read outside the source is an `Internal` error (a
//!   shape rule let a bad node through), never a panic.
//!
//! Errors: `Io` for a wrong number of inputs or a data length that is not
//! the product of the shape, `DTypeMismatch` for an input of the wrong dtype,
//! `Unsupported` for a tensor of more than [`MAX_ELEMENTS`] elements, and the
//! errors of `resolve_dims`/`bind` (`AxisSizeMismatch`, `UnboundSymbol`, …).

use std::collections::BTreeMap;

use crate::affine::AffExpr;
use crate::diag;
use crate::diag::DResult;
use crate::tiny::{BinaryOp, Graph, Node, Op, ReduceOp, UnaryOp};
use crate::DType;

/// The most elements one tensor may have in the interpreter (8 GiB of f64).
pub const MAX_ELEMENTS: usize = 1 << 30;

/// The element count of `shape`, if it is at most [`MAX_ELEMENTS`].
fn checked_numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).filter(|&n| n <= MAX_ELEMENTS)
}

/// A concrete tensor: row-major `data` of `shape`, each value one the dtype
/// can hold (`DType::round(v) == v`; the interpreter rounds inputs anyway).
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub data: Vec<f64>,
}

impl Tensor {
    /// A tensor whose values are `data` rounded to `dtype`.
    ///
    /// Errors: `Io` when `data.len()` is not the product of `shape` or that
    /// exceeds [`MAX_ELEMENTS`].
    pub fn new(dtype: DType, shape: &[usize], data: Vec<f64>) -> DResult<Tensor> {
        let n = checked_numel(shape)
            .ok_or_else(|| diag!(Io, "a tensor of shape {shape:?} has more than {MAX_ELEMENTS} elements"))?;
        if data.len() != n {
            return Err(diag!(Io, "a tensor of shape {shape:?} has {n} elements, got {}", data.len()));
        }
        Ok(Tensor { dtype, shape: shape.to_vec(), data: data.into_iter().map(|v| dtype.round(v)).collect() })
    }

    /// Number of elements (saturating at `usize::MAX`).
    pub fn numel(&self) -> usize {
        self.shape.iter().fold(1usize, |a, &d| a.saturating_mul(d))
    }
}

/// Evaluates `g` on `inputs` (one per `INPUT` node, in arena order) with the
/// symbol values `dims` (more may be inferred from the input shapes) and
/// returns the outputs in `g.outputs` order. See the module doc for the
/// numerics and errors.
pub fn run(g: &Graph, dims: &BTreeMap<String, i64>, inputs: &[Tensor]) -> DResult<Vec<Tensor>> {
    let ins = g.inputs();
    if inputs.len() != ins.len() {
        return Err(diag!(Io, "graph `{}` takes {} input(s), got {}", g.name, ins.len(), inputs.len()));
    }
    for (&id, t) in ins.iter().zip(inputs) {
        let node = g.node(id);
        let label = &node.label;
        if t.dtype != g.dtype(id) {
            return Err(
                diag!(DTypeMismatch, "input `{label}` is {} but got a {} tensor", g.dtype(id), t.dtype).at_node(node)
            );
        }
        if checked_numel(&t.shape).is_none_or(|n| n != t.data.len()) {
            return Err(diag!(Io, "input `{label}` of shape {:?} has {} values", t.shape, t.data.len()).at_node(node));
        }
    }
    let shapes: Vec<Vec<usize>> = inputs.iter().map(|t| t.shape.clone()).collect();
    let values = g.resolve_dims(dims, Some(&shapes))?;
    let g = g.bind(&values)?;
    let shape_of = |n: &Node| -> DResult<Vec<usize>> {
        let shape =
            n.ty.shape
                .iter()
                .map(|d| d.as_int().and_then(|v| usize::try_from(v).ok()))
                .collect::<Option<Vec<usize>>>()
                .ok_or_else(|| {
                    diag!(
                        UnboundSymbol,
                        "shape {} is not concrete after binding",
                        crate::tiny::infer::fmt_shape(&n.ty.shape)
                    )
                    .on_node(n.label.clone())
                })?;
        match checked_numel(&shape) {
            Some(_) => Ok(shape),
            None => Err(diag!(
                Unsupported,
                "shape {shape:?} has more than {MAX_ELEMENTS} elements, too many for the interpreter"
            )
            .on_node(n.label.clone())),
        }
    };
    let shapes: Vec<Vec<usize>> = g.nodes().iter().map(shape_of).collect::<DResult<_>>()?;
    // The last node that reads each node; outputs live to the end.
    let mut last_use: Vec<usize> = (0..g.len()).collect();
    for id in g.ids() {
        for s in &g.node(id).src {
            last_use[s.index()] = id.index();
        }
    }
    for o in &g.outputs {
        last_use[o.node.index()] = usize::MAX;
    }
    let mut data: Vec<Option<Vec<f64>>> = vec![None; g.len()];
    let mut next_input = inputs.iter();
    for id in g.ids() {
        let n = g.node(id);
        let mut srcs = Vec::with_capacity(n.src.len());
        for s in &n.src {
            let d = data[s.index()]
                .as_deref()
                .ok_or_else(|| diag!(Internal, "source `{}` was freed or not computed", g.node(*s).label))?;
            srcs.push(Src { data: d, shape: &shapes[s.index()] });
        }
        let input = if matches!(n.op, Op::Input { .. }) { next_input.next() } else { None };
        let v = eval(n, &shapes[id.index()], &srcs, input).map_err(|e| e.at_node(n))?;
        data[id.index()] = Some(v);
        for s in &n.src {
            if last_use[s.index()] == id.index() {
                data[s.index()] = None;
            }
        }
    }
    g.outputs
        .iter()
        .map(|o| {
            let v =
                data[o.node.index()].clone().ok_or_else(|| diag!(Internal, "output `{}` was not computed", o.name))?;
            Ok(Tensor { dtype: g.dtype(o.node), shape: shapes[o.node.index()].clone(), data: v })
        })
        .collect()
}

/// A source value and its shape.
struct Src<'a> {
    data: &'a [f64],
    shape: &'a [usize],
}

/// Row-major strides of `shape`, in elements.
fn strides(shape: &[usize]) -> Vec<i64> {
    let mut st = vec![1i64; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        st[k] = st[k + 1] * shape[k + 1] as i64;
    }
    st
}

/// Calls `f(index, offset)` for every index of `shape` in row-major order,
/// where `offset = base + Σ index[k]·strides[k]`.
fn for_each_index(
    shape: &[usize],
    strides: &[i64],
    base: i64,
    mut f: impl FnMut(&[usize], i64) -> DResult<()>,
) -> DResult<()> {
    if shape.contains(&0) {
        return Ok(());
    }
    let mut idx = vec![0usize; shape.len()];
    let mut off = base;
    loop {
        f(&idx, off)?;
        let mut k = shape.len();
        loop {
            if k == 0 {
                return Ok(());
            }
            k -= 1;
            idx[k] += 1;
            off += strides[k];
            if idx[k] < shape[k] {
                break;
            }
            off -= strides[k] * shape[k] as i64;
            idx[k] = 0;
        }
    }
}

fn read(x: &[f64], off: i64) -> DResult<f64> {
    usize::try_from(off)
        .ok()
        .and_then(|o| x.get(o))
        .copied()
        .ok_or_else(|| diag!(Internal, "read at offset {off} outside a source of {} elements", x.len()))
}

/// `out[i] = x[base + Σ i_k·strides_k]` over the output shape.
fn gather(x: &[f64], out: &[usize], strides: &[i64], base: i64) -> DResult<Vec<f64>> {
    let mut v = Vec::with_capacity(out.iter().product());
    for_each_index(out, strides, base, |_, off| {
        v.push(read(x, off)?);
        Ok(())
    })?;
    Ok(v)
}

fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

fn nan_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

fn unary(u: UnaryOp, x: f64) -> f64 {
    match u {
        UnaryOp::Neg => -x,
        UnaryOp::Relu => {
            if x < 0.0 {
                0.0
            } else {
                x
            }
        }
        UnaryOp::Exp2 => x.exp2(),
        UnaryOp::Log2 => x.log2(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Rsqrt => 1.0 / x.sqrt(),
        UnaryOp::Recip => 1.0 / x,
    }
}

fn binary(b: BinaryOp, x: f64, y: f64) -> f64 {
    let flag = |c: bool| if c { 1.0 } else { 0.0 };
    match b {
        BinaryOp::Add => x + y,
        BinaryOp::Sub => x - y,
        BinaryOp::Mul => x * y,
        BinaryOp::Fdiv => x / y,
        BinaryOp::Max => nan_max(x, y),
        BinaryOp::Min => nan_min(x, y),
        BinaryOp::Cmplt => flag(x < y),
        BinaryOp::Cmpeq => flag(x == y),
    }
}

/// Evaluates one node of a bound graph whose result has shape `out`.
fn eval(n: &Node, out: &[usize], srcs: &[Src], input: Option<&Tensor>) -> DResult<Vec<f64>> {
    let dtype = n.ty.dtype;
    let x = srcs.first();
    let x = || x.ok_or_else(|| diag!(Internal, "{} has no source", n.op.name()));
    Ok(match &n.op {
        Op::Input { name } => {
            let t = input.ok_or_else(|| diag!(Internal, "no tensor for input `{name}`"))?;
            t.data.iter().map(|&v| dtype.round(v)).collect()
        }
        Op::Const { value } => vec![dtype.round(*value)],
        Op::Unary(u) => x()?.data.iter().map(|&v| unary(*u, v)).collect(),
        Op::Cast => x()?.data.iter().map(|&v| dtype.cast(v)).collect(),
        Op::Binary(b) => srcs[0].data.iter().zip(srcs[1].data).map(|(&a, &c)| binary(*b, a, c)).collect(),
        Op::Where => {
            let (c, a, b) = (srcs[0].data, srcs[1].data, srcs[2].data);
            c.iter().zip(a.iter().zip(b)).map(|(&c, (&a, &b))| if c != 0.0 { a } else { b }).collect()
        }
        Op::Reduce { op, axes } => reduce(*op, dtype, axes, x()?, out)?,
        Op::Scan { op, axis, exclusive, reverse } => scan(*op, dtype, *axis, (*exclusive, *reverse), x()?)?,
        Op::Gather { axis } => {
            let (x, index) = (x()?, srcs.get(1).ok_or_else(|| diag!(Internal, "GATHER has no index"))?);
            let mut st = strides(x.shape);
            let along = std::mem::replace(&mut st[*axis], 0);
            let d = x.shape[*axis] as i64;
            let mut v = Vec::with_capacity(index.data.len());
            let mut k = 0;
            for_each_index(out, &st, 0, |_, off| {
                let at = crate::tiny::op::gather_position(index.data[k] as i64, d);
                k += 1;
                v.push(read(x.data, off + at * along)?);
                Ok(())
            })?;
            v
        }
        Op::Reshape => x()?.data.to_vec(),
        Op::Permute { perm } => {
            let x = x()?;
            let st = strides(x.shape);
            gather(x.data, out, &perm.iter().map(|&p| st[p]).collect::<Vec<_>>(), 0)?
        }
        Op::Expand => {
            let x = x()?;
            let st: Vec<i64> =
                strides(x.shape).iter().zip(x.shape).map(|(&s, &d)| if d == 1 { 0 } else { s }).collect();
            gather(x.data, out, &st, 0)?
        }
        Op::Shrink { lo, hi: _, step } => {
            let x = x()?;
            let (lo, step) = (ints(lo)?, ints(step)?);
            let st = strides(x.shape);
            let base = lo.iter().zip(&st).map(|(l, s)| l * s).sum();
            gather(x.data, out, &step.iter().zip(&st).map(|(p, s)| p * s).collect::<Vec<_>>(), base)?
        }
        Op::Flip { axes } => {
            let x = x()?;
            let mut st = strides(x.shape);
            let mut base = 0;
            for &a in axes {
                base += (x.shape[a] as i64 - 1) * st[a];
                st[a] = -st[a];
            }
            gather(x.data, out, &st, base)?
        }
        Op::Pad { pads, value } => {
            let x = x()?;
            let lo: Vec<i64> = pads.iter().map(|(l, _)| int(l)).collect::<DResult<_>>()?;
            let st = strides(x.shape);
            let mut v = Vec::with_capacity(out.iter().product());
            for_each_index(out, &vec![0; out.len()], 0, |idx, _| {
                let mut off = 0;
                for k in 0..idx.len() {
                    let i = idx[k] as i64 - lo[k];
                    if i < 0 || i >= x.shape[k] as i64 {
                        v.push(*value);
                        return Ok(());
                    }
                    off += i * st[k];
                }
                v.push(read(x.data, off)?);
                Ok(())
            })?;
            v
        }
        Op::View { map } => view(map, x()?, out)?,
    })
}

fn int(d: &crate::sym::Dim) -> DResult<i64> {
    d.as_int().ok_or_else(|| diag!(UnboundSymbol, "{d} is not concrete after binding"))
}

fn ints(ds: &[crate::sym::Dim]) -> DResult<Vec<i64>> {
    ds.iter().map(int).collect()
}

/// `REDUCE`: accumulates in f64 from the identity, then rounds to `acc`.
fn reduce(op: ReduceOp, acc: DType, axes: &[usize], x: &Src, out: &[usize]) -> DResult<Vec<f64>> {
    let ost = strides(out);
    // Stride of each input axis in the output: 0 for reduced axes.
    let mut in_to_out = vec![0i64; x.shape.len()];
    let mut j = 0;
    for (k, s) in in_to_out.iter_mut().enumerate() {
        if !axes.contains(&k) {
            *s = *ost.get(j).ok_or_else(|| diag!(Internal, "REDUCE output rank disagrees with its axes"))?;
            j += 1;
        }
    }
    let mut r = vec![op.identity(acc); out.iter().product()];
    let mut src = x.data.iter();
    for_each_index(x.shape, &in_to_out, 0, |_, off| {
        let v = *src.next().ok_or_else(|| diag!(Internal, "REDUCE source is shorter than its shape"))?;
        let a = usize::try_from(off)
            .ok()
            .and_then(|o| r.get_mut(o))
            .ok_or_else(|| diag!(Internal, "REDUCE writes outside its result"))?;
        *a = binary(op.combine(), *a, v);
        Ok(())
    })?;
    Ok(r.into_iter().map(|v| acc.round(v)).collect())
}

/// `SCAN`: along `axis`, in scan order (from the end when `reverse`),
/// each output is the running combination in f64 from the identity —
/// before its own point is folded in when `exclusive` — rounded to `acc`
/// (as [`reduce`]'s result is).
fn scan(op: ReduceOp, acc: DType, axis: usize, (exclusive, reverse): (bool, bool), x: &Src) -> DResult<Vec<f64>> {
    let d = *x.shape.get(axis).ok_or_else(|| diag!(Internal, "SCAN axis {axis} is out of range"))?;
    let inner: usize = x.shape[axis + 1..].iter().product();
    let mut r = vec![0.0; x.data.len()];
    if x.data.is_empty() {
        return Ok(r);
    }
    // One block per point of the axes before `axis`: `d` rows of `inner`.
    for (b, block) in x.data.chunks(d * inner).enumerate() {
        for k in 0..inner {
            let mut a = op.identity(acc);
            for j in 0..d {
                let at = if reverse { d - 1 - j } else { j } * inner + k;
                let before = a;
                a = binary(op.combine(), a, block[at]);
                r[b * d * inner + at] = acc.round(if exclusive { before } else { a });
            }
        }
    }
    Ok(r)
}

/// `VIEW`: input index `k` is `map[k]` at the output index. A map without
/// floor divisions is a strided gather; otherwise each index is evaluated.
fn view(map: &[AffExpr], x: &Src, out: &[usize]) -> DResult<Vec<f64>> {
    let st = strides(x.shape);
    let none = |_: &str| None;
    let linear =
        map.iter().all(|e| e.terms().all(|(a, c)| matches!(a, crate::affine::AffAtom::Var(_)) && c.as_int().is_some()));
    if linear {
        let mut ost = vec![0i64; out.len()];
        let mut base = 0;
        for (k, e) in map.iter().enumerate() {
            base += int(e.constant_part())? * st[k];
            for (v, c) in e.var_coeffs() {
                *ost.get_mut(v as usize)
                    .ok_or_else(|| diag!(Internal, "VIEW map uses i{v} beyond the output rank"))? += int(c)? * st[k];
            }
        }
        return gather(x.data, out, &ost, base);
    }
    let mut v = Vec::with_capacity(out.iter().product());
    let mut vars = vec![0i64; out.len()];
    for_each_index(out, &vec![0; out.len()], 0, |idx, _| {
        for (a, &i) in vars.iter_mut().zip(idx) {
            *a = i as i64;
        }
        let mut off = 0;
        for (k, e) in map.iter().enumerate() {
            let i = e.eval(&vars, &none).map_err(|m| diag!(Internal, "VIEW map: {m}"))?;
            if i < 0 || i >= x.shape[k] as i64 {
                return Err(diag!(Internal, "VIEW reads index {i} of axis {k} of size {}", x.shape[k]));
            }
            off += i * st[k];
        }
        v.push(read(x.data, off)?);
        Ok(())
    })?;
    Ok(v)
}

#[cfg(test)]
mod tests;

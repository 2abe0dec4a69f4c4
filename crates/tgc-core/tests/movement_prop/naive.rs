//! The naive evaluator: every element of every node computed straight from
//! the op definitions (`tiny/op.rs`, `spec/002` §2) by mapping the output
//! index back through the op. It shares no code with `interp.rs` or the
//! IndexBook: it reads only the graph's nodes, and evaluates `VIEW` maps from
//! their terms itself.
//!
//! Values are f64, rounded to the node's dtype only at `CONST` and `REDUCE`
//! (inputs arrive representable; the generator's values keep every result
//! exact in f32, so no rounding happens).
//!
//! `poly_core_prop` includes this file too, for [`source_index`].

use tgc_core::affine::{AffAtom, AffExpr};
use tgc_core::sym::Dim;
use tgc_core::tiny::{BinaryOp, Graph, Node, Op, ReduceOp};
use tgc_core::DType;

/// A node's value, row-major.
#[derive(Clone, Debug)]
pub struct Value {
    pub shape: Vec<usize>,
    pub data: Vec<f64>,
}

impl Value {
    fn at(&self, idx: &[usize]) -> f64 {
        self.data[linear(idx, &self.shape)]
    }
}

/// The row-major position of `idx` in `shape`.
pub fn linear(idx: &[usize], shape: &[usize]) -> usize {
    idx.iter().zip(shape).fold(0, |acc, (&i, &d)| acc * d + i)
}

/// The index at row-major position `l` of `shape`.
pub fn unravel(mut l: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for k in (0..shape.len()).rev() {
        idx[k] = l % shape[k];
        l /= shape[k];
    }
    idx
}

/// Evaluates every node of `g` on `inputs` (row-major, in `Graph::inputs`
/// order) and returns the values of `g.outputs`.
///
/// Errors: an op the generator does not make, a symbolic shape, or a read
/// outside a source (the shape rules let a bad node through), with the node.
pub fn evaluate(g: &Graph, inputs: &[Vec<f64>]) -> Result<Vec<Value>, String> {
    let mut vals: Vec<Value> = Vec::with_capacity(g.len());
    let mut inputs = inputs.iter();
    for id in g.ids() {
        let n = g.node(id);
        let shape = n.ty.shape.iter().map(int).collect::<Result<Vec<i64>, _>>()?;
        let shape: Vec<usize> = shape.into_iter().map(|d| d as usize).collect();
        let count: usize = shape.iter().product();
        let input = match n.op {
            Op::Input { .. } => Some(inputs.next().ok_or("fewer inputs than INPUT nodes")?),
            _ => None,
        };
        let mut data = Vec::with_capacity(count);
        for l in 0..count {
            let idx = unravel(l, &shape);
            data.push(match input {
                Some(x) => x[l],
                None => element(n, &vals, &idx, &shape).map_err(|e| format!("node {}: {e}", n.label))?,
            });
        }
        vals.push(Value { shape, data });
    }
    Ok(g.outputs.iter().map(|o| vals[o.node.index()].clone()).collect())
}

fn int(d: &Dim) -> Result<i64, String> {
    d.as_int().ok_or_else(|| format!("`{d}` is not a concrete size"))
}

/// `v` rounded to `dt`, as `CAST`/`REDUCE` define it for the dtypes the
/// generator uses.
fn round(v: f64, dt: DType) -> Result<f64, String> {
    match dt {
        DType::F32 => Ok(v as f32 as f64),
        // i32 arithmetic wraps (two's complement): a sum of the i32 extremes
        // (an exclusive scan's identity) leaves the range.
        DType::I32 => Ok(v as i64 as i32 as f64),
        DType::Bool => Ok(v),
        _ => Err(format!("dtype {dt} is not generated")),
    }
}

/// Element `idx` of node `n` (not an `INPUT`).
fn element(n: &Node, vals: &[Value], idx: &[usize], shape: &[usize]) -> Result<f64, String> {
    let src = |k: usize| &vals[n.src[k].index()];
    Ok(match &n.op {
        Op::Const { value } => round(*value, n.ty.dtype)?,
        Op::Binary(op) => {
            let (a, b) = (src(0).at(idx), src(1).at(idx));
            match op {
                BinaryOp::Add => a + b,
                BinaryOp::Sub => a - b,
                BinaryOp::Mul => a * b,
                BinaryOp::Max => a.max(b),
                BinaryOp::Min => a.min(b),
                BinaryOp::Cmplt => f64::from(u8::from(a < b)),
                BinaryOp::Cmpeq => f64::from(u8::from(a == b)),
                BinaryOp::Fdiv => return Err("FDIV is not generated".into()),
            }
        }
        Op::Where => {
            if src(0).at(idx) != 0.0 {
                src(1).at(idx)
            } else {
                src(2).at(idx)
            }
        }
        Op::Reduce { op, axes } => round(reduce(*op, axes, src(0), idx, n.ty.dtype), n.ty.dtype)?,
        Op::Scan { op, axis, exclusive, reverse } => {
            round(scan(*op, *axis, (*exclusive, *reverse), src(0), idx, n.ty.dtype), n.ty.dtype)?
        }
        // `x` at `idx` with axis `axis` replaced by the index value: a
        // negative one counts from the end, then it is clamped into the axis.
        Op::Gather { axis } => {
            let (x, d) = (src(0), src(0).shape[*axis] as i64);
            let v = src(1).at(idx) as i64;
            let mut j = idx.to_vec();
            j[*axis] = (if v < 0 { v + d } else { v }).clamp(0, d - 1) as usize;
            x.at(&j)
        }
        op if op.is_movement() => {
            let x = src(0);
            match source_index(op, idx, shape, &x.shape)? {
                Some(j) => x.at(&j),
                None => match op {
                    Op::Pad { value, .. } => *value,
                    _ => unreachable!("only PAD reads padding"),
                },
            }
        }
        op => return Err(format!("{} is not generated", op.name())),
    })
}

/// `REDUCE` at output index `idx`: the kept source axes take `idx` in order,
/// the reduced axes run over their whole extent.
fn reduce(op: ReduceOp, axes: &[usize], x: &Value, idx: &[usize], dt: DType) -> f64 {
    let rank = x.shape.len();
    let mut j = vec![0; rank];
    for (o, k) in (0..rank).filter(|k| !axes.contains(k)).enumerate() {
        j[k] = idx[o];
    }
    let extents: Vec<usize> = axes.iter().map(|&k| x.shape[k]).collect();
    let mut acc = identity(op, dt);
    for r in 0..extents.iter().product() {
        for (&k, t) in axes.iter().zip(unravel(r, &extents)) {
            j[k] = t;
        }
        acc = fold(op, acc, x.at(&j));
    }
    acc
}

/// The value a fold starts from: the extremes of i32 for its MAX and MIN.
fn identity(op: ReduceOp, dt: DType) -> f64 {
    match (op, dt) {
        (ReduceOp::Sum, _) => 0.0,
        (ReduceOp::Prod, _) => 1.0,
        (ReduceOp::Max, DType::I32) => i32::MIN as f64,
        (ReduceOp::Min, DType::I32) => i32::MAX as f64,
        (ReduceOp::Max, _) => f64::NEG_INFINITY,
        (ReduceOp::Min, _) => f64::INFINITY,
    }
}

fn fold(op: ReduceOp, acc: f64, v: f64) -> f64 {
    match op {
        ReduceOp::Sum => acc + v,
        ReduceOp::Prod => acc * v,
        ReduceOp::Max => acc.max(v),
        ReduceOp::Min => acc.min(v),
    }
}

/// `SCAN` at `idx`: the points of the axis up to `idx[axis]` in scan order
/// (from the end when `reverse`; without `idx` itself when `exclusive`)
/// folded in that order.
fn scan(op: ReduceOp, axis: usize, (exclusive, reverse): (bool, bool), x: &Value, idx: &[usize], dt: DType) -> f64 {
    let (at, d) = (idx[axis], x.shape[axis]);
    let order: Vec<usize> = if reverse { (at..d).rev().collect() } else { (0..=at).collect() };
    let mut j = idx.to_vec();
    let mut acc = identity(op, dt);
    for t in order.into_iter().filter(|&t| !(exclusive && t == at)) {
        j[axis] = t;
        acc = fold(op, acc, x.at(&j));
    }
    acc
}

/// The source index that output index `idx` of a movement op reads, by the
/// op's definition; `None` where `PAD` fills in its value.
///
/// Errors: the index falls outside the source of shape `src`.
pub fn source_index(op: &Op, idx: &[usize], out: &[usize], src: &[usize]) -> Result<Option<Vec<usize>>, String> {
    let at = |k: usize| idx[k] as i64;
    let j: Vec<i64> = match op {
        Op::Reshape => {
            if out.iter().product::<usize>() != src.iter().product::<usize>() {
                return Err(format!("RESHAPE {src:?} -> {out:?} changes the element count"));
            }
            unravel(linear(idx, out), src).into_iter().map(|v| v as i64).collect()
        }
        Op::Permute { perm } => {
            let mut j = vec![0; src.len()];
            for (k, &p) in perm.iter().enumerate() {
                j[p] = at(k);
            }
            j
        }
        Op::Expand => (0..src.len()).map(|k| if src[k] == 1 { 0 } else { at(k) }).collect(),
        Op::Pad { pads, .. } => {
            let mut j = Vec::new();
            for (k, (lo, _)) in pads.iter().enumerate() {
                let v = at(k) - int(lo)?;
                if v < 0 || v >= src[k] as i64 {
                    return Ok(None);
                }
                j.push(v);
            }
            j
        }
        Op::Shrink { lo, hi, step } => {
            let mut j = Vec::new();
            for k in 0..src.len() {
                let v = int(&lo[k])? + at(k) * int(&step[k])?;
                if v >= int(&hi[k])? {
                    return Err(format!("SHRINK output index {idx:?} reads {v} ≥ hi on axis {k}"));
                }
                j.push(v);
            }
            j
        }
        Op::Flip { axes } => {
            (0..src.len()).map(|k| if axes.contains(&k) { src[k] as i64 - 1 - at(k) } else { at(k) }).collect()
        }
        Op::View { map } => map.iter().map(|e| affine(e, idx)).collect::<Result<_, _>>()?,
        _ => return Err(format!("{} is not a movement op", op.name())),
    };
    if j.len() != src.len() || j.iter().zip(src).any(|(&v, &d)| v < 0 || v >= d as i64) {
        return Err(format!("{} output index {idx:?} reads {j:?}, outside the source {src:?}", op.name()));
    }
    Ok(Some(j.into_iter().map(|v| v as usize).collect()))
}

/// An index expression at `idx`: `Σ coeff·atom + constant`, an atom being a
/// variable or `floor(e / q)` (`affine.rs` module doc).
fn affine(e: &AffExpr, idx: &[usize]) -> Result<i64, String> {
    let mut acc = int(e.constant_part())?;
    for (atom, c) in e.terms() {
        let v = match atom {
            AffAtom::Var(k) => {
                *idx.get(*k as usize).ok_or_else(|| format!("`{e}` uses i{k}, beyond the output"))? as i64
            }
            AffAtom::FloorDiv(inner, q) => {
                let q = int(q)?;
                if q <= 0 {
                    return Err(format!("`{e}` divides by {q}"));
                }
                affine(inner, idx)?.div_euclid(q)
            }
        };
        acc += int(c)? * v;
    }
    Ok(acc)
}

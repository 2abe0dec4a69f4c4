//! Decompositions of the Frontend IR ops into the Tiny IR vocabulary
//! (`spec/README.md` decision 6), as plain functions on a [`Graph`].
//!
//! Conventions shared by every family:
//! - nodes are added at `g.cur_span`, which the caller sets to the source
//!   expression; errors raised here carry that span too;
//! - binary operands broadcast right-aligned (decision 3) through explicit
//!   `RESHAPE` (leading 1s) + `EXPAND`; a size pair that is neither equal nor
//!   1 is `BroadcastMismatch` (symbols count as sizes > 1);
//! - reductions accumulate in f32 for float inputs and cast back;
//!   transcendental and normalising decompositions of f16/bf16 inputs compute
//!   in f32 and cast back at the end, so their constants (log2 e, …) keep f32
//!   precision;
//! - error bounds stated in doc comments assume each Tiny op is computed
//!   exactly and rounded to f32 (the reference interpreter's model); the
//!   tests in `frontend/tests/numeric.rs` measure them on grids of inputs.

use crate::diag;
use crate::diag::{DResult, Diagnostic};
use crate::sym::Dim;
use crate::tiny::{Graph, NodeId, ReduceOp};
use crate::DType;

pub mod contraction;
pub mod conv;
pub mod elementwise;
pub mod movement;
pub mod nn;
pub mod recognise;
pub mod reduce;
pub mod trig;

/// log2(e), the factor of `exp(x) = exp2(x·log2 e)`.
pub const LOG2_E: f64 = std::f64::consts::LOG2_E;
/// ln(2), the factor of `log(x) = log2(x)·ln 2`.
pub const LN_2: f64 = std::f64::consts::LN_2;

/// Attaches the current span to an error raised by a decomposition.
pub(crate) fn fail(g: &Graph, d: Diagnostic) -> Diagnostic {
    d.or_at(g.cur_span)
}

/// A constant of `dtype` broadcast to `shape`: `CONST` (shape `[]`), then
/// `RESHAPE` to all-ones and `EXPAND`.
pub fn splat(g: &mut Graph, value: f64, dtype: DType, shape: &[Dim]) -> DResult<NodeId> {
    let c = g.constant(value, dtype)?;
    broadcast_to(g, c, shape)
}

/// A constant with the dtype and shape of `x`.
pub fn const_like(g: &mut Graph, x: NodeId, value: f64) -> DResult<NodeId> {
    let (dt, shape) = (g.dtype(x), g.shape(x).to_vec());
    splat(g, value, dt, &shape)
}

/// The right-aligned broadcast of two shapes (decision 3).
///
/// Errors: `BroadcastMismatch` when a pair of sizes is neither equal nor 1.
pub fn broadcast_shape(g: &Graph, a: &[Dim], b: &[Dim]) -> DResult<Vec<Dim>> {
    let n = a.len().max(b.len());
    let at = |s: &[Dim], k: usize| if k + s.len() < n { Dim::int(1) } else { s[k + s.len() - n].clone() };
    let mut out = Vec::with_capacity(n);
    for k in 0..n {
        let (x, y) = (at(a, k), at(b, k));
        out.push(if x == y || y.is_one() {
            x
        } else if x.is_one() {
            y
        } else {
            let (sa, sb) = (crate::tiny::infer::fmt_shape(a), crate::tiny::infer::fmt_shape(b));
            return Err(fail(g, diag!(BroadcastMismatch, "cannot broadcast {sa} with {sb}: sizes {x} and {y} differ")));
        });
    }
    Ok(out)
}

/// Broadcasts `x` to `shape` right-aligned: `RESHAPE` adding leading 1s, then
/// `EXPAND`; returns `x` itself when it already has that shape.
///
/// Errors: `BroadcastMismatch` when `x` does not broadcast to `shape`.
pub fn broadcast_to(g: &mut Graph, x: NodeId, shape: &[Dim]) -> DResult<NodeId> {
    let s = g.shape(x).to_vec();
    if s == shape {
        return Ok(x);
    }
    let mismatch = || {
        let (a, b) = (crate::tiny::infer::fmt_shape(&s), crate::tiny::infer::fmt_shape(shape));
        diag!(BroadcastMismatch, "cannot broadcast {a} to {b}")
    };
    if s.len() > shape.len() {
        return Err(fail(g, mismatch()));
    }
    let mut padded = vec![Dim::int(1); shape.len() - s.len()];
    padded.extend(s.iter().cloned());
    if padded.iter().zip(shape).any(|(a, b)| a != b && !a.is_one()) {
        return Err(fail(g, mismatch()));
    }
    let r = if padded != s { g.reshape(x, &padded)? } else { x };
    if padded == shape {
        return Ok(r);
    }
    g.expand(r, shape)
}

/// Normalises an axis (negative counts from the end) of a rank-`rank` value.
///
/// Errors: `InvalidAxis` when out of range.
pub fn axis(g: &Graph, axis: i64, rank: usize) -> DResult<usize> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(fail(g, diag!(InvalidAxis, "axis {axis} is out of range for rank {rank}")));
    }
    Ok(if axis < 0 { (axis + r) as usize } else { axis as usize })
}

/// Normalises a list of axes, rejecting repeats (`InvalidAxis`); sorted.
pub fn axes(g: &Graph, list: &[i64], rank: usize) -> DResult<Vec<usize>> {
    let mut out = Vec::new();
    for &a in list {
        let k = axis(g, a, rank)?;
        if out.contains(&k) {
            return Err(fail(g, diag!(InvalidAxis, "axis {a} is listed twice")));
        }
        out.push(k);
    }
    out.sort_unstable();
    Ok(out)
}

/// Errors with `DTypeMismatch` unless `x` is f16, bf16 or f32.
pub fn require_float(g: &Graph, x: NodeId, what: &str) -> DResult<()> {
    let dt = g.dtype(x);
    if dt.is_float() {
        return Ok(());
    }
    Err(fail(g, diag!(DTypeMismatch, "{what} needs a floating-point operand, got {dt}; cast it first")))
}

/// `x` in f32: a `CAST` for f16/bf16, `x` itself otherwise.
pub fn upcast(g: &mut Graph, x: NodeId) -> DResult<NodeId> {
    match g.dtype(x) {
        DType::F16 | DType::BF16 => g.cast(x, DType::F32),
        _ => Ok(x),
    }
}

/// `x` cast to `to` unless it already has that dtype.
pub fn cast_to(g: &mut Graph, x: NodeId, to: DType) -> DResult<NodeId> {
    if g.dtype(x) == to {
        return Ok(x);
    }
    g.cast(x, to)
}

/// The element count `Π dims` as an f32 scalar node: a `CONST` when the
/// count is a known integer, else `REDUCE SUM` of an expanded constant 1 (a
/// symbolic size cannot be a `CONST`); exact up to 2^24.
pub fn count(g: &mut Graph, dims: &[Dim]) -> DResult<NodeId> {
    if let Some(n) = Dim::product(dims).as_int() {
        return g.constant(n as f64, DType::F32);
    }
    let ones = splat(g, 1.0, DType::F32, dims)?;
    let all: Vec<usize> = (0..dims.len()).collect();
    g.reduce(ReduceOp::Sum, ones, &all, DType::F32)
}

/// `x` (reduced over `axes` of `full`) reshaped to `full` with 1s at `axes`.
pub fn keep_dims(g: &mut Graph, x: NodeId, full: &[Dim], axes: &[usize]) -> DResult<NodeId> {
    let shape: Vec<Dim> =
        full.iter().enumerate().map(|(k, d)| if axes.contains(&k) { Dim::int(1) } else { d.clone() }).collect();
    if g.shape(x) == shape.as_slice() {
        return Ok(x);
    }
    g.reshape(x, &shape)
}

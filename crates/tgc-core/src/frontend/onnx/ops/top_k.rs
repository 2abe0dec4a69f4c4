//! `TopK` by ranking: element `i` along the axis has rank `#{j : x_j
//! beats x_i} + #{j < i : x_j == x_i}` (`beats` is `>` for the largest,
//! `<` for the smallest), so equal elements keep their order as ONNX
//! requires; output `k` is the element of rank `k`, picked by comparing
//! the ranks with an iota. Every step is a comparison or a sum of one
//! value with zeros, so the values and indices are exact. The pairwise
//! comparison takes `D²` elements for an axis of size `D`.

use crate::diag;
use crate::diag::DResult;
use crate::frontend::ir::*;
use crate::sym::Dim;
use crate::DType;

use super::super::{Builder, Val};
use super::{bin, iota, need_known, norm_axis, val, N};

/// `TopK`: the `k` largest (smallest with `largest=0`) elements along
/// `axis` (default -1) in order, and their indices; `sorted=0` gets them
/// sorted too, which ONNX allows. `k` is attribute `k` before opset 10,
/// input 1 from then on.
///
/// Errors: `Unsupported` for a `k` not known at import; `AxisSizeMismatch`
/// for a `k` outside `[0, D]` over a concrete size `D`.
pub(super) fn top_k(b: &mut Builder, n: &N) -> DResult<Vec<Val>> {
    let x = b.run(n.required(0)?)?;
    let xs = b.shape(x)?;
    let a = norm_axis(n.a.int_or("axis", -1)?, xs.len())?;
    let k = if n.opset < 10 {
        n.a.int("k")?.ok_or_else(|| diag!(SyntaxError, "TopK needs attribute `k`"))?
    } else {
        need_known(b, n, 1, "k")?.int_values("TopK's k")?.first().copied().unwrap_or(-1)
    };
    if k < 0 || xs[a].as_int().is_some_and(|d| k > d) || k > i32::MAX as i64 {
        return Err(diag!(AxisSizeMismatch, "TopK k={k} along an axis of size {}", xs[a]));
    }
    let beats = if n.a.int_or("largest", 1)? != 0 { BinaryFn::Gt } else { BinaryFn::Lt };
    let unsqueeze = |b: &mut Builder, v: ValueId, at: usize| {
        b.emit(FOp::Movement(Movement::Unsqueeze { axes: vec![at as i64] }), vec![val(v)])
    };
    // Positions along axis `at` of a tensor of rank `xs.len() + 1`.
    let positions = |b: &mut Builder, len: &Dim, at: usize| -> DResult<ValueId> {
        let mut shape = vec![Dim::int(1); xs.len() + 1];
        shape[at] = len.clone();
        let p = iota(b, len)?;
        b.emit(FOp::Movement(Movement::Reshape { shape }), vec![val(p)])
    };
    // [.., i, j, ..]: x_i at axis `a`, x_j at `a + 1`.
    let xi = unsqueeze(b, x, a + 1)?;
    let xj = unsqueeze(b, x, a)?;
    let (pi, pj) = (positions(b, &xs[a], a)?, positions(b, &xs[a], a + 1)?);
    let wins = bin(b, beats, val(xj), val(xi))?;
    let tie = bin(b, BinaryFn::Eq, val(xj), val(xi))?;
    let earlier = bin(b, BinaryFn::Lt, val(pj), val(pi))?;
    let before = b.emit(FOp::Where, vec![val(tie), val(earlier), b.lit(0.0, LitKind::Bool)])?;
    let ahead = b.emit(FOp::Where, vec![val(wins), b.lit(1.0, LitKind::Bool), val(before)])?;
    let over_j = Some(vec![AxisRef::Index(a as i64 + 1)]);
    let rank = b.emit(FOp::Reduce { op: ReduceFn::Sum, axes: over_j, keepdim: true, acc: None }, vec![val(ahead)])?;
    // [.., i, k, ..]: element i is output k.
    let outs = positions(b, &Dim::int(k), a + 1)?;
    let sel = bin(b, BinaryFn::Eq, val(rank), val(outs))?;
    let over_i = Some(vec![AxisRef::Index(a as i64)]);
    let pick = |b: &mut Builder, v: ValueId, dt: DType| -> DResult<ValueId> {
        let p = b.emit(FOp::Where, vec![val(sel), val(v), b.lit_for(0.0, dt)])?;
        b.emit(FOp::Reduce { op: ReduceFn::Sum, axes: over_i.clone(), keepdim: false, acc: None }, vec![val(p)])
    };
    let dt = b.dtype(x)?;
    let values = pick(b, xi, dt)?;
    let indices = pick(b, pi, DType::I32)?;
    Ok(vec![Val::Run(values), Val::Run(indices)])
}

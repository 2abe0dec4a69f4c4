//! The loss operators `NegativeLogLikelihoodLoss` and
//! `SoftmaxCrossEntropyLoss` (ONNX opset 12 on).
//!
//! Both take scores `x: [N, C, d1, …, dk]` (log-probabilities for the
//! first, logits for the second), a target `t: [N, d1, …, dk]` of class
//! indices and an optional weight `w: [C]`. The loss of sample `(n, d…)` is
//! `-x[n, t[n, d…], d…] · w[t[n, d…]]`, and 0 where the target equals
//! `ignore_index`. The class is picked exactly by a comparison with an
//! iota along the class axis: `where(c == t, x, 0)` summed over `c` adds
//! one value to zeros. Reduction `mean` divides the sum of the losses by
//! the sum of the weights applied (the count of samples not ignored,
//! without a weight), as `Operators.md` defines it; a mean over no sample
//! is 0/0, NaN. A target outside `[0, C)` that is not `ignore_index`
//! (which ONNX does not allow) picks no class: a loss and weight of 0.

use crate::diag;
use crate::diag::DResult;
use crate::frontend::ir::*;
use crate::sym::Dim;
use crate::DType;

use super::super::{proto, Builder, Val};
use super::{bin, iota, val, N};

/// `NegativeLogLikelihoodLoss`: the loss of log-probabilities input 0.
pub(super) fn negative_log_likelihood(b: &mut Builder, n: &N) -> DResult<Vec<Val>> {
    let x = b.run(n.required(0)?)?;
    Ok(vec![Val::Run(nll(b, n, x)?)])
}

/// `SoftmaxCrossEntropyLoss`: the loss of `log_softmax` of input 0 over
/// the class axis, and those log-probabilities as output 1 when wanted.
pub(super) fn softmax_cross_entropy(b: &mut Builder, n: &N) -> DResult<Vec<Val>> {
    let x = b.run(n.required(0)?)?;
    let log_prob = b.emit(FOp::LogSoftmax { axis: 1 }, vec![val(x)])?;
    let loss = nll(b, n, log_prob)?;
    let mut out = vec![Val::Run(loss)];
    if n.wants(1) {
        out.push(Val::Run(log_prob));
    }
    Ok(out)
}

/// `reduce(v)` over every axis, or over `axes`, dropping them.
fn reduce(b: &mut Builder, op: ReduceFn, axes: Option<Vec<AxisRef>>, v: ValueId) -> DResult<ValueId> {
    b.emit(FOp::Reduce { op, axes, keepdim: false, acc: None }, vec![val(v)])
}

/// The negative log-likelihood loss of log-probabilities `x` with the
/// node's target (input 1), weight (input 2), `ignore_index` and
/// `reduction` (the module doc's rule).
///
/// Errors: `Unsupported` for a reduction other than none, sum and mean or
/// a target not of an integer type; `AxisSizeMismatch` for an `x` of rank
/// below 2, or a target or weight whose shape does not fit `x`'s.
fn nll(b: &mut Builder, n: &N, x: ValueId) -> DResult<ValueId> {
    let op = &n.node.op_type;
    let reduction = n.a.string("reduction")?.unwrap_or_else(|| "mean".into());
    if !matches!(reduction.as_str(), "none" | "sum" | "mean") {
        return Err(diag!(Unsupported, "{op} reduction=`{reduction}` (none, sum or mean)"));
    }
    let xs = b.shape(x)?;
    let r = xs.len();
    if r < 2 {
        return Err(diag!(AxisSizeMismatch, "{op} of scores of rank {r} (they are [N, C, d1, ...])"));
    }
    let t = b.run(n.required(1)?)?;
    if b.dtype(t)? != DType::I32 {
        return Err(diag!(Unsupported, "{op} target of type {} (int32 or int64 only)", b.dtype(t)?));
    }
    let ts = b.shape(t)?;
    let want: Vec<Dim> = std::iter::once(xs[0].clone()).chain(xs[2..].iter().cloned()).collect();
    if ts != want {
        return Err(diag!(
            AxisSizeMismatch,
            "{op} target of shape {ts:?} for scores of shape {xs:?} (it must be {want:?})"
        ));
    }
    let dt = b.dtype(x)?;
    let zero = b.lit_for(0.0, dt);
    let class_axis = Some(vec![AxisRef::Index(1)]);
    // `c`, as `[1, C, 1, …]`.
    let mut across = vec![Dim::int(1); r];
    across[1] = xs[1].clone();
    let classes = iota(b, &xs[1])?;
    let classes = b.emit(FOp::Movement(Movement::Reshape { shape: across.clone() }), vec![val(classes)])?;
    let target = b.emit(FOp::Movement(Movement::Unsqueeze { axes: vec![1] }), vec![val(t)])?;
    // hit[n, c, d…]: class `c` is sample (n, d…)'s target, not ignored.
    let mut hit = bin(b, BinaryFn::Eq, val(target), val(classes))?;
    let kept = match n.a.int("ignore_index")? {
        Some(ii) => {
            let ii = proto::narrow(ii, &format!("{op}'s ignore_index"))?;
            let keep = bin(b, BinaryFn::Ne, val(t), b.lit(ii as f64, LitKind::Int))?;
            let k1 = b.emit(FOp::Movement(Movement::Unsqueeze { axes: vec![1] }), vec![val(keep)])?;
            hit = b.emit(FOp::Where, vec![val(hit), val(k1), b.lit(0.0, LitKind::Bool)])?;
            Some(keep)
        }
        None => None,
    };
    let picked = b.emit(FOp::Where, vec![val(hit), val(x), zero])?;
    let picked = reduce(b, ReduceFn::Sum, class_axis.clone(), picked)?;
    let mut loss = b.emit(FOp::Unary(UnaryFn::Neg), vec![val(picked)])?;
    let weights = match n.input(2) {
        Some(name) => {
            let w = b.run(name)?;
            let wsh = b.shape(w)?;
            if wsh.len() != 1 || wsh[0] != xs[1] {
                return Err(diag!(AxisSizeMismatch, "{op} weight of shape {wsh:?} for {} classes", xs[1]));
            }
            let w = b.emit(FOp::Movement(Movement::Reshape { shape: across }), vec![val(w)])?;
            let applied = b.emit(FOp::Where, vec![val(hit), val(w), zero])?;
            let applied = reduce(b, ReduceFn::Sum, class_axis, applied)?;
            loss = bin(b, BinaryFn::Mul, val(loss), val(applied))?;
            Some(applied)
        }
        None => None,
    };
    match reduction.as_str() {
        "none" => Ok(loss),
        "sum" => reduce(b, ReduceFn::Sum, None, loss),
        _ => {
            let count = match (weights, kept) {
                (Some(applied), _) => applied,
                (None, Some(keep)) => b.emit(FOp::Cast { to: dt }, vec![val(keep)])?,
                (None, None) => return reduce(b, ReduceFn::Mean, None, loss),
            };
            let total = reduce(b, ReduceFn::Sum, None, loss)?;
            let count = reduce(b, ReduceFn::Sum, None, count)?;
            bin(b, BinaryFn::Div, val(total), val(count))
        }
    }
}

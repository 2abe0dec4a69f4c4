//! Normalisations and attention: `softmax`, `log_softmax`, `layernorm`,
//! `attention`, decomposed into reductions and element-wise ops computed in
//! f32 (f16/bf16 inputs are cast up first and the result cast back).

use crate::diag;
use crate::diag::DResult;
use crate::sym::Dim;
use crate::tiny::infer::fmt_shape;
use crate::tiny::{BinaryOp, Graph, NodeId, ReduceOp, UnaryOp};
use crate::DType;

use super::contraction::matmul_acc;
use super::reduce::divide_by_count;
use super::{
    axes as norm_axes, axis as norm_axis, broadcast_to, cast_to, const_like, fail, keep_dims, require_float, upcast,
    LN_2, LOG2_E,
};

/// `REDUCE op` of f32 `x` over `axes`, reshaped with 1s and expanded back to
/// the shape of `x`.
fn reduce_back(g: &mut Graph, op: ReduceOp, x: NodeId, axes: &[usize]) -> DResult<NodeId> {
    let full = g.shape(x).to_vec();
    let r = g.reduce(op, x, axes, DType::F32)?;
    let r = keep_dims(g, r, &full, axes)?;
    broadcast_to(g, r, &full)
}

/// The shifted row and its exponentials: `d = x − max(x)`, `e = EXP2(d·log2 e)`.
fn shifted_exp(g: &mut Graph, x: NodeId, a: usize) -> DResult<(NodeId, NodeId)> {
    let m = reduce_back(g, ReduceOp::Max, x, &[a])?;
    let d = g.binary(BinaryOp::Sub, x, m)?;
    let k = const_like(g, d, LOG2_E)?;
    let s = g.binary(BinaryOp::Mul, d, k)?;
    let e = g.unary(UnaryOp::Exp2, s)?;
    Ok((d, e))
}

/// `softmax(x, axis)`: max-shift, `EXP2((x − max)·log2 e)`, `REDUCE SUM`,
/// `FDIV` (`spec/002` §5.3), all in f32; same shape as `x`.
///
/// Max error (f32): relative `(4·(max − x) + 4)·2^-24` per element (the
/// exponent's rounding grows with the distance from the row maximum),
/// measured on rows of 1024 values spread over ±30.
///
/// Errors: `DTypeMismatch` for a non-float input; `InvalidAxis`.
pub fn softmax(g: &mut Graph, x: NodeId, axis: i64) -> DResult<NodeId> {
    require_float(g, x, "softmax")?;
    let dt = g.dtype(x);
    let a = norm_axis(g, axis, g.shape(x).len())?;
    let x = upcast(g, x)?;
    let (_, e) = shifted_exp(g, x, a)?;
    let s = reduce_back(g, ReduceOp::Sum, e, &[a])?;
    let y = g.binary(BinaryOp::Fdiv, e, s)?;
    cast_to(g, y, dt)
}

/// `log_softmax(x, axis) = (x − max) − LOG2(Σ EXP2((x − max)·log2 e))·ln 2`,
/// in f32; same shape as `x`.
///
/// Max error (f32): absolute `(2·|y| + 2)·2^-24` for a result `y`, measured
/// on rows of 1024 values spread over ±30.
///
/// Errors: `DTypeMismatch` for a non-float input; `InvalidAxis`.
pub fn log_softmax(g: &mut Graph, x: NodeId, axis: i64) -> DResult<NodeId> {
    require_float(g, x, "log_softmax")?;
    let dt = g.dtype(x);
    let a = norm_axis(g, axis, g.shape(x).len())?;
    let x = upcast(g, x)?;
    let (d, e) = shifted_exp(g, x, a)?;
    let s = reduce_back(g, ReduceOp::Sum, e, &[a])?;
    let l = g.unary(UnaryOp::Log2, s)?;
    let k = const_like(g, l, LN_2)?;
    let l = g.binary(BinaryOp::Mul, l, k)?;
    let y = g.binary(BinaryOp::Sub, d, l)?;
    cast_to(g, y, dt)
}

/// `layernorm(x, gamma, beta, axes, eps)`, two-pass in f32: `mean = Σx/n`,
/// `d = x − mean`, `var = Σd²/n`, `y = d·RSQRT(var + eps)·gamma + beta`,
/// gamma and beta broadcast right-aligned to `x`; same shape as `x`.
///
/// Max error (f32): absolute `(2·|μ|/σ + 8)·2^-24` on the normalised value
/// `(x − μ)/σ` (the f32 rounding of μ shifts every deviation; the two-pass
/// variance itself does not cancel, where a one-pass `E[x²] − μ²` would lose
/// `(μ/σ)²·2^-24`), then the roundings of `·gamma + beta`; measured on rows
/// of 1024 values.
///
/// Errors: `DTypeMismatch` for a non-float `x` or gamma/beta of another
/// dtype; `InvalidAxis`; `BroadcastMismatch` for gamma/beta that do not
/// broadcast to `x`.
pub fn layernorm(g: &mut Graph, x: NodeId, gamma: NodeId, beta: NodeId, axes: &[i64], eps: f64) -> DResult<NodeId> {
    require_float(g, x, "layernorm")?;
    let dt = g.dtype(x);
    for p in [gamma, beta] {
        if g.dtype(p) != dt {
            return Err(fail(g, diag!(DTypeMismatch, "layernorm gamma/beta are {} but x is {dt}", g.dtype(p))));
        }
    }
    let full = g.shape(x).to_vec();
    let ax = norm_axes(g, axes, full.len())?;
    let mut y = normalize(g, x, &ax, eps)?;
    let gm = upcast(g, gamma)?;
    let gm = broadcast_to(g, gm, &full)?;
    y = g.binary(BinaryOp::Mul, y, gm)?;
    let bt = upcast(g, beta)?;
    let bt = broadcast_to(g, bt, &full)?;
    y = g.binary(BinaryOp::Add, y, bt)?;
    cast_to(g, y, dt)
}

/// `(x − mean) · RSQRT(var + eps)` over the axes `ax` of `x` (mean and
/// biased variance of those axes), in f32: layernorm's and instance norm's
/// common part.
fn normalize(g: &mut Graph, x: NodeId, ax: &[usize], eps: f64) -> DResult<NodeId> {
    let full = g.shape(x).to_vec();
    let dims: Vec<Dim> = ax.iter().map(|&k| full[k].clone()).collect();
    let x = upcast(g, x)?;
    let s = g.reduce(ReduceOp::Sum, x, ax, DType::F32)?;
    let mean = divide_by_count(g, s, &dims)?;
    let mean = keep_dims(g, mean, &full, ax)?;
    let mean = broadcast_to(g, mean, &full)?;
    let d = g.binary(BinaryOp::Sub, x, mean)?;
    let d2 = g.binary(BinaryOp::Mul, d, d)?;
    let v = g.reduce(ReduceOp::Sum, d2, ax, DType::F32)?;
    let var = divide_by_count(g, v, &dims)?;
    let e = const_like(g, var, eps)?;
    let ve = g.binary(BinaryOp::Add, var, e)?;
    let r = g.unary(UnaryOp::Rsqrt, ve)?;
    let r = keep_dims(g, r, &full, ax)?;
    let r = broadcast_to(g, r, &full)?;
    g.binary(BinaryOp::Mul, d, r)
}

/// A per-channel parameter `p` of shape `[C]` (`C` = axis 1 of `full`) as
/// f32, broadcast over `full` (reshaped to `[C, 1, …, 1]`).
fn per_channel(g: &mut Graph, op: &str, what: &str, p: NodeId, full: &[Dim], dt: DType) -> DResult<NodeId> {
    let p = channel_param(g, op, what, p, full, dt)?;
    over_channels(g, p, full)
}

/// A per-channel parameter `p` checked to be of shape `[C]` (`C` = axis 1
/// of `full`) and dtype `dt`, as f32.
fn channel_param(g: &mut Graph, op: &str, what: &str, p: NodeId, full: &[Dim], dt: DType) -> DResult<NodeId> {
    if g.dtype(p) != dt {
        return Err(fail(g, diag!(DTypeMismatch, "{op} {what} is {} but x is {dt}", g.dtype(p))));
    }
    if g.shape(p) != std::slice::from_ref(&full[1]) {
        let got = crate::tiny::infer::fmt_shape(g.shape(p));
        return Err(fail(
            g,
            diag!(AxisSizeMismatch, "{op} {what} has shape {got}, not [{}] (the channels of x)", full[1]),
        ));
    }
    upcast(g, p)
}

/// A `[C]` value broadcast over `full` (reshaped to `[C, 1, …, 1]`).
fn over_channels(g: &mut Graph, p: NodeId, full: &[Dim]) -> DResult<NodeId> {
    let shape: Vec<Dim> =
        full.iter().skip(1).enumerate().map(|(k, d)| if k == 0 { d.clone() } else { Dim::int(1) }).collect();
    let p = g.reshape(p, &shape)?;
    broadcast_to(g, p, full)
}

/// The shape of `x` for a channel op: rank at least `min_rank`, NCHW-like.
fn channel_shape(g: &Graph, x: NodeId, op: &str, min_rank: usize) -> DResult<Vec<Dim>> {
    let full = g.shape(x).to_vec();
    if full.len() < min_rank {
        let got = crate::tiny::infer::fmt_shape(&full);
        return Err(fail(
            g,
            diag!(AxisSizeMismatch, "{op} needs x of rank {min_rank} or more ([N, C, ...]), got {got}"),
        ));
    }
    Ok(full)
}

/// `batch_norm(x, scale, bias, mean, var, eps)`, inference form (ONNX
/// `BatchNormalization`, PyTorch `batch_norm` with `training=False`):
/// `(x − mean) · (RSQRT(var + eps) · scale) + bias`, each parameter `[C]`
/// over axis 1 of `x` (`[N, C, …]`), in f32; same shape and dtype as `x`.
/// The factor in parentheses is a `[C]` value of the parameters alone,
/// broadcast afterwards: region formation stores it once per channel
/// (`region::grouping`) instead of a square root per element.
///
/// Max error (f32): relative 3·2^-24 of each of the two terms (four
/// roundings and the RSQRT's).
///
/// Errors: `DTypeMismatch` for a non-float `x` or a parameter of another
/// dtype; `AxisSizeMismatch` for `x` of rank below 2 or a parameter not
/// `[C]`.
pub fn batch_norm(g: &mut Graph, x: NodeId, params: [NodeId; 4], eps: f64) -> DResult<NodeId> {
    require_float(g, x, "batch_norm")?;
    let dt = g.dtype(x);
    let full = channel_shape(g, x, "batch_norm", 2)?;
    let mut p = params;
    for (slot, what) in p.iter_mut().zip(["scale", "bias", "mean", "var"]) {
        *slot = channel_param(g, "batch_norm", what, *slot, &full, dt)?;
    }
    let [scale, bias, mean, var] = p;
    let e = const_like(g, var, eps)?;
    let ve = g.binary(BinaryOp::Add, var, e)?;
    let r = g.unary(UnaryOp::Rsqrt, ve)?;
    let factor = g.binary(BinaryOp::Mul, r, scale)?;
    let [factor, bias, mean] = [factor, bias, mean].map(|p| over_channels(g, p, &full));
    let x = upcast(g, x)?;
    let d = g.binary(BinaryOp::Sub, x, mean?)?;
    let y = g.binary(BinaryOp::Mul, d, factor?)?;
    let y = g.binary(BinaryOp::Add, y, bias?)?;
    cast_to(g, y, dt)
}

/// `instance_norm(x, scale, bias, eps)` (ONNX `InstanceNormalization`,
/// PyTorch `instance_norm` without running statistics): each `(n, c)`
/// plane of `x` (`[N, C, …]`, rank 3 or more) normalised over its spatial
/// axes as layernorm does (mean, biased variance, `RSQRT(var + eps)`), then
/// `· scale + bias` with `[C]` parameters; in f32, same shape and dtype as
/// `x`.
///
/// Max error (f32): as layernorm's over the spatial axes.
///
/// Errors: `DTypeMismatch` for a non-float `x` or a parameter of another
/// dtype; `AxisSizeMismatch` for `x` of rank below 3 or a parameter not
/// `[C]`.
pub fn instance_norm(g: &mut Graph, x: NodeId, scale: NodeId, bias: NodeId, eps: f64) -> DResult<NodeId> {
    require_float(g, x, "instance_norm")?;
    let dt = g.dtype(x);
    let full = channel_shape(g, x, "instance_norm", 3)?;
    let scale = per_channel(g, "instance_norm", "scale", scale, &full, dt)?;
    let bias = per_channel(g, "instance_norm", "bias", bias, &full, dt)?;
    let ax: Vec<usize> = (2..full.len()).collect();
    let y = normalize(g, x, &ax, eps)?;
    let y = g.binary(BinaryOp::Mul, y, scale)?;
    let y = g.binary(BinaryOp::Add, y, bias)?;
    cast_to(g, y, dt)
}

/// The causal additive bias `[M, N]`: 0 where `j ≤ i`, −inf elsewhere (top-left
/// aligned, as PyTorch's `is_causal`), built from a constant by movement only:
/// `PAD(0[M], [0, N−1], −inf)` is `v[k] = 0 for k < M`; `VIEW [M, N]` with
/// map `i0 + i1` gives `v[i' + j]`, which is 0 iff `j ≤ M−1−i'`; `FLIP` of
/// axis 0 turns `i'` into `M−1−i`. No iota and no new vocabulary.
pub fn causal_bias(g: &mut Graph, m: &Dim, n: &Dim) -> DResult<NodeId> {
    let z = super::splat(g, 0.0, DType::F32, std::slice::from_ref(m))?;
    let v = g.pad(z, &[(Dim::int(0), n - &Dim::int(1))], f64::NEG_INFINITY)?;
    let map = [&crate::affine::AffExpr::var(0) + &crate::affine::AffExpr::var(1)];
    let w = g.view(v, &[m.clone(), n.clone()], &map)?;
    g.flip(w, &[0])
}

/// `attention(q, k, v, mask, causal, scale)`: q `[.., M, D]`, k `[.., N, D]`,
/// v `[.., N, Dv]` → `[.., M, Dv]` (the DSL's `[B, H, M, D]` case):
/// `S = matmul(q, transpose(k))` kept in f32 (the matmul path without its
/// cast), `S·scale` (default `1/sqrt(D)`: a constant, or `RSQRT` of the
/// count for a symbolic D), `+ mask` (float: cast to f32; bool: true keeps,
/// false adds −inf) broadcast to S, `+` [`causal_bias`] when causal,
/// [`softmax`] over N, then `matmul(P, CAST(v, f32))` and `CAST` back.
///
/// Max error (f32): that of its parts (f32 sums of D and of N products and
/// the [`softmax`] bound); within `1e-5·(1 + |o|)` of an f64 reference on
/// the tested shapes (up to N = 128, D = 64).
///
/// Errors: `AxisSizeMismatch` for D or N that differ or ranks < 2;
/// `BroadcastMismatch` for batch axes or a mask that do not broadcast;
/// `DTypeMismatch` for non-float or mixed dtypes.
pub fn attention(
    g: &mut Graph,
    q: NodeId,
    k: NodeId,
    v: NodeId,
    mask: Option<NodeId>,
    causal: bool,
    scale: Option<f64>,
) -> DResult<NodeId> {
    require_float(g, q, "attention")?;
    let dt = g.dtype(q);
    for (name, t) in [("k", k), ("v", v)] {
        if g.dtype(t) != dt {
            return Err(fail(g, diag!(DTypeMismatch, "attention {name} is {} but q is {dt}", g.dtype(t))));
        }
    }
    for t in [q, k, v] {
        if g.shape(t).len() < 2 {
            return Err(fail(
                g,
                diag!(AxisSizeMismatch, "attention operands need rank ≥ 2, got {}", fmt_shape(g.shape(t))),
            ));
        }
    }
    let rk = g.shape(k).len();
    let mut perm: Vec<usize> = (0..rk).collect();
    perm.swap(rk - 1, rk - 2);
    let kt = g.permute(k, &perm)?;
    let s = matmul_acc(g, q, kt)?;
    let ss = g.shape(s).to_vec();
    let r = ss.len();
    let d = g.shape(q)[g.shape(q).len() - 1].clone();
    let sc = match (scale, d.as_int()) {
        (Some(c), _) => g.constant(c, DType::F32)?,
        (None, Some(dv)) => g.constant(1.0 / (dv as f64).sqrt(), DType::F32)?,
        (None, None) => {
            let n = super::count(g, std::slice::from_ref(&d))?;
            g.unary(UnaryOp::Rsqrt, n)?
        }
    };
    let sc = broadcast_to(g, sc, &ss)?;
    let mut s = g.binary(BinaryOp::Mul, s, sc)?;
    if let Some(m) = mask {
        let bias = if g.dtype(m) == DType::Bool {
            let shape = g.shape(m).to_vec();
            let zero = super::splat(g, 0.0, DType::F32, &shape)?;
            let ninf = super::splat(g, f64::NEG_INFINITY, DType::F32, &shape)?;
            g.where_(m, zero, ninf)?
        } else {
            cast_to(g, m, DType::F32)?
        };
        let bias = broadcast_to(g, bias, &ss)?;
        s = g.binary(BinaryOp::Add, s, bias)?;
    }
    if causal {
        let bias = causal_bias(g, &ss[r - 2], &ss[r - 1])?;
        let bias = broadcast_to(g, bias, &ss)?;
        s = g.binary(BinaryOp::Add, s, bias)?;
    }
    let p = softmax(g, s, -1)?;
    let v32 = cast_to(g, v, DType::F32)?;
    let o = matmul_acc(g, p, v32)?;
    cast_to(g, o, dt)
}

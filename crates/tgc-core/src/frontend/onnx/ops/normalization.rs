//! Normalisations and norms of ONNX without an op of their own in the
//! Frontend IR: `LpNormalization`, `LpPool`, `MeanVarianceNormalization`
//! and `GroupNormalization`, each as the reductions and element-wise ops
//! of its definition in `Operators.md`.

use crate::diag;
use crate::diag::DResult;
use crate::frontend::ir::*;
use crate::sym::Dim;
use crate::DType;

use super::super::Builder;
use super::{bin, norm_axis, pool_window, unary, val, PoolWindow, N};

fn mean(b: &mut Builder, axes: &[i64], v: ValueId) -> DResult<ValueId> {
    let axes = Some(axes.iter().map(|&a| AxisRef::Index(a)).collect());
    b.emit(FOp::Reduce { op: ReduceFn::Mean, axes, keepdim: true, acc: None }, vec![val(v)])
}

/// `|x|^p` for `p` of 1, 2 or another value (`pow`).
fn abs_pow(b: &mut Builder, x: ValueId, p: f64) -> DResult<ValueId> {
    if p == 1.0 {
        unary(b, UnaryFn::Abs, x)
    } else if p == 2.0 {
        bin(b, BinaryFn::Mul, val(x), val(x))
    } else {
        let a = unary(b, UnaryFn::Abs, x)?;
        bin(b, BinaryFn::Pow, val(a), b.lit(p, LitKind::Float))
    }
}

/// `s^(1/p)` for `p` of 1, 2 or another value (`pow`).
fn root(b: &mut Builder, s: ValueId, p: f64) -> DResult<ValueId> {
    if p == 1.0 {
        Ok(s)
    } else if p == 2.0 {
        unary(b, UnaryFn::Sqrt, s)
    } else {
        bin(b, BinaryFn::Pow, val(s), b.lit(1.0 / p, LitKind::Float))
    }
}

/// `LpNormalization`: `x / ‖x‖_p` along `axis` (default -1) for `p` of 1
/// or 2 (default 2), and 0 where the norm is 0 (the reference's rule).
///
/// Errors: `Unsupported` for another `p`.
pub(super) fn lp_normalization(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let x = b.run(n.required(0)?)?;
    let r = b.shape(x)?.len();
    let axis = norm_axis(n.a.int_or("axis", -1)?, r)? as i64;
    let p = n.a.int_or("p", 2)?;
    if p != 1 && p != 2 {
        return Err(diag!(Unsupported, "LpNormalization p={p} (ONNX defines 1 and 2)"));
    }
    let powered = abs_pow(b, x, p as f64)?;
    let axes = Some(vec![AxisRef::Index(axis)]);
    let s = b.emit(FOp::Reduce { op: ReduceFn::Sum, axes, keepdim: true, acc: None }, vec![val(powered)])?;
    let norm = root(b, s, p as f64)?;
    let q = bin(b, BinaryFn::Div, val(x), val(norm))?;
    let zero = b.lit_for(0.0, b.dtype(x)?);
    let none = bin(b, BinaryFn::Eq, val(norm), zero)?;
    b.emit(FOp::Where, vec![val(none), zero, val(q)])
}

/// `LpPool`: `(Σ |x|^p)^(1/p)` over each window (padding counts as 0), the
/// sum an average pool of the padded input, times the kernel's size.
///
/// Errors: those of the pool's window (`auto_pad`, `ceil_mode`).
pub(super) fn lp_pool(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let x = b.run(n.required(0)?)?;
    // An int from opset 11 on, a float before.
    let p = match n.a.int("p") {
        Ok(p) => p.map_or(2.0, |p| p as f64),
        Err(_) => n.a.float_or("p", 2.0)?,
    };
    if !(p.is_finite() && p > 0.0) {
        return Err(diag!(Unsupported, "LpPool p={p} (a positive power)"));
    }
    let powered = abs_pow(b, x, p)?;
    // Without `count_include_pad` the window takes a partial last window
    // under `ceil_mode` by padding it; all padding counts as 0 below.
    let PoolWindow { kernel, mut window, .. } = pool_window(n, &b.shape(powered)?)?;
    // The padding as zeros of its own, so the pool has none (and none of
    // the limits on padding an average pool has).
    let pads: Vec<(Dim, Dim)> = [(Dim::int(0), Dim::int(0)), (Dim::int(0), Dim::int(0))]
        .into_iter()
        .chain(window.pad.iter().cloned())
        .collect();
    window.pad = vec![(Dim::int(0), Dim::int(0)); kernel.len()];
    let padded =
        b.emit(FOp::Movement(Movement::Pad { pads, value: 0.0, mode: PadMode::Constant }), vec![val(powered)])?;
    let avg = b.emit(FOp::AvgPool { kernel, window, count_include_pad: true }, vec![val(padded)])?;
    let size: i64 = n.a.ints("kernel_shape")?.unwrap_or_default().iter().product();
    let s = bin(b, BinaryFn::Mul, val(avg), b.lit(size as f64, LitKind::Float))?;
    root(b, s, p)
}

/// `MeanVarianceNormalization`: `(x - E[x]) / (sqrt(E[x²] - E[x]²) +
/// 1e-9)` over `axes` (default `[0, 2, 3]`), as the operator's function
/// body computes it.
pub(super) fn mean_variance(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let x = b.run(n.required(0)?)?;
    let axes = n.a.ints("axes")?.unwrap_or_else(|| vec![0, 2, 3]);
    let m = mean(b, &axes, x)?;
    let m2 = bin(b, BinaryFn::Mul, val(m), val(m))?;
    let sq = bin(b, BinaryFn::Mul, val(x), val(x))?;
    let e2 = mean(b, &axes, sq)?;
    let var = bin(b, BinaryFn::Sub, val(e2), val(m2))?;
    let std = unary(b, UnaryFn::Sqrt, var)?;
    let std = bin(b, BinaryFn::Add, val(std), b.lit(1e-9, LitKind::Float))?;
    let c = bin(b, BinaryFn::Sub, val(x), val(m))?;
    bin(b, BinaryFn::Div, val(c), val(std))
}

/// `GroupNormalization`: each of `num_groups` consecutive groups of
/// channels normalised over its channels and spatial axes (mean and
/// variance in f32), then scaled and shifted: per channel (`[C]`) from
/// opset 21, per group (`[G]`) before.
///
/// Errors: `AxisSizeMismatch` for an input of rank below 2, or a group
/// count that does not divide the channels.
pub(super) fn group_norm(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let x = b.run(n.required(0)?)?;
    let scale = b.run(n.required(1)?)?;
    let bias = b.run(n.required(2)?)?;
    let xs = b.shape(x)?;
    let groups = n.a.int("num_groups")?.ok_or_else(|| diag!(SyntaxError, "GroupNormalization needs num_groups"))?;
    let g = Dim::int(groups);
    let per = match xs.get(1).map(|c| (c.floordiv(&g), c)) {
        Some((Some(per), c)) if groups >= 1 && &(&per * &g) == c => per,
        _ => {
            return Err(diag!(AxisSizeMismatch, "GroupNormalization of {groups} groups over an input of shape {xs:?}"))
        }
    };
    let dt = b.dtype(x)?;
    let xf = if dt == DType::F32 { x } else { b.emit(FOp::Cast { to: DType::F32 }, vec![val(x)])? };
    let rest = Dim::product(&[vec![per], xs[2..].to_vec()].concat());
    let grouped = vec![xs[0].clone(), g.clone(), rest];
    let v = b.emit(FOp::Movement(Movement::Reshape { shape: grouped }), vec![val(xf)])?;
    let m = mean(b, &[2], v)?;
    let c = bin(b, BinaryFn::Sub, val(v), val(m))?;
    let sq = bin(b, BinaryFn::Mul, val(c), val(c))?;
    let var = mean(b, &[2], sq)?;
    let var = bin(b, BinaryFn::Add, val(var), b.lit(n.a.float_or("epsilon", 1e-5)?, LitKind::Float))?;
    let inv = unary(b, UnaryFn::Rsqrt, var)?;
    let mut y = bin(b, BinaryFn::Mul, val(c), val(inv))?;
    if dt != DType::F32 {
        y = b.emit(FOp::Cast { to: dt }, vec![val(y)])?;
    }
    // The affine part on `[N, G, rest]` (per group) or on `x`'s shape (per
    // channel), the parameters as `[K, 1, …]`.
    let (shape, ones) = if n.opset < 21 { (None, 1) } else { (Some(xs.clone()), xs.len() - 2) };
    if let Some(s) = shape {
        y = b.emit(FOp::Movement(Movement::Reshape { shape: s }), vec![val(y)])?;
    }
    let axes: Vec<i64> = (1..=ones as i64).collect();
    let scale = b.emit(FOp::Movement(Movement::Unsqueeze { axes: axes.clone() }), vec![val(scale)])?;
    let bias = b.emit(FOp::Movement(Movement::Unsqueeze { axes }), vec![val(bias)])?;
    y = bin(b, BinaryFn::Mul, val(y), val(scale))?;
    y = bin(b, BinaryFn::Add, val(y), val(bias))?;
    if n.opset < 21 {
        y = b.emit(FOp::Movement(Movement::Reshape { shape: xs }), vec![val(y)])?;
    }
    Ok(y)
}

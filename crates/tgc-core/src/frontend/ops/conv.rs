//! Sliding-window ops on NCHW tensors: `conv2d`, `maxpool2d`, `avgpool2d`.
//!
//! The window is a movement (decision 2): `PAD` (asymmetric `[t, b, l, r]`)
//! then an affine `VIEW` adding the kernel axes,
//! `out[.., oy, ox, ky, kx] = in[.., oy·Sh + ky·Dh, ox·Sw + kx·Dw]`
//! (`spec/003`, `spec/002` §5.2). Nothing is materialised: no im2col.

use crate::affine::AffExpr;
use crate::diag;
use crate::diag::DResult;
use crate::frontend::ir::Window;
use crate::sym::Dim;
use crate::tiny::infer::fmt_shape;
use crate::tiny::{BinaryOp, Graph, NodeId, ReduceOp};
use crate::DType;

use super::{broadcast_to, cast_to, fail, reduce::divide_by_count, require_float, splat};

/// The sliding window over the last two axes of `x`: `[.., H, W]` →
/// `[.., Oy, Ox, Kh, Kw]` with `Oy = (H + t + b − Dh·(Kh−1) − 1) / Sh + 1`
/// (floor division), padding with `pad_value`.
///
/// Errors: `AxisSizeMismatch` for rank < 2, a kernel size < 1 or a window
/// larger than the padded input; `NegativeStride` for a stride or dilation
/// ≤ 0.
pub fn window(g: &mut Graph, x: NodeId, kernel: &[Dim; 2], w: &Window, pad_value: f64) -> DResult<NodeId> {
    let s = g.shape(x).to_vec();
    let r = s.len();
    if r < 2 {
        return Err(fail(g, diag!(AxisSizeMismatch, "a 2-D window needs rank ≥ 2, got {}", fmt_shape(&s))));
    }
    for d in w.stride.iter().chain(&w.dilation) {
        if d.as_int().is_some_and(|v| v <= 0) {
            return Err(fail(g, diag!(NegativeStride, "window stride and dilation must be positive, got {d}")));
        }
    }
    if let Some(k) = kernel.iter().find(|k| k.as_int().is_some_and(|v| v < 1)) {
        return Err(fail(g, diag!(AxisSizeMismatch, "kernel size {k} must be at least 1")));
    }
    let [t, b, l, rr] = &w.pad;
    let zero = Dim::int(0);
    let mut pads = vec![(zero.clone(), zero.clone()); r - 2];
    pads.push((t.clone(), b.clone()));
    pads.push((l.clone(), rr.clone()));
    let xp = if w.pad.iter().all(|p| p == &zero) { x } else { g.pad(x, &pads, pad_value)? };
    let padded = g.shape(xp).to_vec();
    let mut out: Vec<Dim> = s[..r - 2].to_vec();
    for k in 0..2 {
        let span = &(&padded[r - 2 + k] - &(&w.dilation[k] * &(&kernel[k] - &Dim::int(1)))) - &Dim::int(1);
        let o = span.floordiv(&w.stride[k]).map(|q| &q + &Dim::int(1));
        match o {
            Some(o) if o.as_int().is_none_or(|v| v >= 1) => out.push(o),
            _ => {
                return Err(fail(
                    g,
                    diag!(
                        AxisSizeMismatch,
                        "a {}x{} window (dilation {}) does not fit the padded input {}",
                        kernel[0],
                        kernel[1],
                        w.dilation[k],
                        fmt_shape(&padded)
                    ),
                ))
            }
        }
    }
    out.extend(kernel.iter().cloned());
    let mut map: Vec<AffExpr> = (0..r as u32 - 2).map(AffExpr::var).collect();
    for k in 0..2u32 {
        let oy = AffExpr::var(r as u32 - 2 + k).scale(&w.stride[k as usize]);
        let ky = AffExpr::var(r as u32 + k).scale(&w.dilation[k as usize]);
        map.push(&oy + &ky);
    }
    g.view(xp, &out, &map)
}

/// `conv2d(x, w, bias)`: x `[N, Cin, H, W]`, w `[Cout, Cin/G, Kh, Kw]`,
/// bias `[Cout]` → `[N, Cout, Oy, Ox]`, tinygrad's formulation (`spec/002`
/// §5.2): [`window`] → `RESHAPE [N, G, Cin/G, 1, Oy, Ox, Kh, Kw]` →
/// `EXPAND` over Cout/G → `PERMUTE` to `[N, G, Cout/G, Oy, Ox, Cin/G, Kh,
/// Kw]`; the weight `RESHAPE [1, G, Cout/G, 1, 1, Cin/G, Kh, Kw]` +
/// `EXPAND`; `MUL`; `REDUCE SUM` over the last three axes in f32 (i32 for
/// i32); `RESHAPE [N, Cout, Oy, Ox]`; bias cast to the accumulator and
/// added; `CAST` back. Products are exact; the error is that of an f32 sum
/// of Cin/G·Kh·Kw terms.
///
/// Errors: `AxisSizeMismatch` for ranks other than 4, channels not divisible
/// by `groups`, or a weight/bias whose channels do not match;
/// `DTypeMismatch` for operands of different dtypes; the errors of [`window`].
pub fn conv2d(g: &mut Graph, x: NodeId, w: NodeId, bias: Option<NodeId>, win: &Window, groups: i64) -> DResult<NodeId> {
    let (sx, sw) = (g.shape(x).to_vec(), g.shape(w).to_vec());
    if sx.len() != 4 || sw.len() != 4 {
        return Err(fail(
            g,
            diag!(
                AxisSizeMismatch,
                "conv2d needs x [N, Cin, H, W] and w [Cout, Cin/groups, Kh, Kw], got {} and {}",
                fmt_shape(&sx),
                fmt_shape(&sw)
            ),
        ));
    }
    let dt = g.dtype(x);
    for o in [Some(w), bias].into_iter().flatten() {
        if g.dtype(o) != dt || dt == DType::Bool {
            return Err(fail(
                g,
                diag!(
                    DTypeMismatch,
                    "conv2d operands have dtypes {dt} and {}; they must be the same numeric dtype",
                    g.dtype(o)
                ),
            ));
        }
    }
    if groups < 1 {
        return Err(fail(g, diag!(AxisSizeMismatch, "groups = {groups} must be at least 1")));
    }
    let gd = Dim::int(groups);
    let (n, cin, cout) = (&sx[0], &sx[1], &sw[0]);
    for (what, c) in [("input", cin), ("output", cout)] {
        if c.as_int().is_some_and(|v| v % groups != 0) {
            return Err(fail(g, diag!(AxisSizeMismatch, "{what} channels {c} are not divisible by groups = {groups}")));
        }
    }
    let cin_g =
        cin.floordiv(&gd).ok_or_else(|| fail(g, diag!(AxisSizeMismatch, "groups = {groups} must be positive")))?;
    let rcout =
        cout.floordiv(&gd).ok_or_else(|| fail(g, diag!(AxisSizeMismatch, "groups = {groups} must be positive")))?;
    if cin_g != sw[1] && cin_g.as_int().is_some() && sw[1].as_int().is_some() {
        return Err(fail(
            g,
            diag!(
                AxisSizeMismatch,
                "weight {} has {} input channels per group but x {} has {cin} / {groups} = {cin_g}",
                fmt_shape(&sw),
                sw[1],
                fmt_shape(&sx)
            ),
        ));
    }
    let kernel = [sw[2].clone(), sw[3].clone()];
    let xw = window(g, x, &kernel, win, 0.0)?;
    let (oy, ox) = (g.shape(xw)[2].clone(), g.shape(xw)[3].clone());
    let (kh, kw) = (kernel[0].clone(), kernel[1].clone());
    let one = Dim::int(1);
    let x1 = g.reshape(
        xw,
        &[n.clone(), gd.clone(), cin_g.clone(), one.clone(), oy.clone(), ox.clone(), kh.clone(), kw.clone()],
    )?;
    let x2 = g.expand(
        x1,
        &[n.clone(), gd.clone(), cin_g.clone(), rcout.clone(), oy.clone(), ox.clone(), kh.clone(), kw.clone()],
    )?;
    let x3 = g.permute(x2, &[0, 1, 3, 4, 5, 2, 6, 7])?;
    let full = g.shape(x3).to_vec();
    let w1 = g.reshape(
        w,
        &[one.clone(), gd.clone(), rcout.clone(), one.clone(), one.clone(), cin_g.clone(), kh.clone(), kw.clone()],
    )?;
    let w2 = g.expand(w1, &full)?;
    let p = g.binary(BinaryOp::Mul, x3, w2)?;
    let acc = if dt.is_float() { DType::F32 } else { DType::I32 };
    let s = g.reduce(ReduceOp::Sum, p, &[5, 6, 7], acc)?;
    let mut y = g.reshape(s, &[n.clone(), cout.clone(), oy.clone(), ox.clone()])?;
    if let Some(b) = bias {
        let sb = g.shape(b).to_vec();
        if sb.len() != 1 || (&sb[0] != cout && sb[0].as_int().is_some() && cout.as_int().is_some()) {
            return Err(fail(g, diag!(AxisSizeMismatch, "conv2d bias must be [{cout}], got {}", fmt_shape(&sb))));
        }
        let b = cast_to(g, b, acc)?;
        let b = g.reshape(b, &[one.clone(), cout.clone(), one.clone(), one])?;
        let b = g.expand(b, &[n.clone(), cout.clone(), oy, ox])?;
        y = g.binary(BinaryOp::Add, y, b)?;
    }
    cast_to(g, y, dt)
}

/// Rejects pads of more than half the kernel (as PyTorch does): such a
/// window could see only padding.
fn check_pool_pad(g: &Graph, kernel: &[Dim; 2], w: &Window) -> DResult<()> {
    for (k, p) in [(0, &w.pad[0]), (0, &w.pad[1]), (1, &w.pad[2]), (1, &w.pad[3])] {
        if let (Some(pv), Some(kv)) = (p.as_int(), kernel[k].as_int()) {
            if 2 * pv > kv {
                return Err(fail(g, diag!(Unsupported, "pool padding {pv} is more than half the kernel size {kv}")));
            }
        }
    }
    Ok(())
}

/// `maxpool2d(x)`: [`window`] padded with the dtype's lowest value (−inf for
/// floats, so padding never wins), then `REDUCE MAX` over the kernel axes in
/// the input dtype. Exact. `[.., H, W]` → `[.., Oy, Ox]`.
///
/// Errors: those of [`window`]; `Unsupported` for a pad over half the kernel.
pub fn maxpool2d(g: &mut Graph, x: NodeId, kernel: &[Dim; 2], w: &Window) -> DResult<NodeId> {
    check_pool_pad(g, kernel, w)?;
    let dt = g.dtype(x);
    let xw = window(g, x, kernel, w, ReduceOp::Max.identity(dt))?;
    let r = g.shape(xw).len();
    g.reduce(ReduceOp::Max, xw, &[r - 2, r - 1], dt)
}

/// `avgpool2d(x)`: [`window`] padded with 0, `REDUCE SUM` over the kernel
/// axes in f32, divided by the window size (`count_include_pad`) or by the
/// number of real elements: the same window-sum applied to a padded tensor
/// of ones `[H, W]` (movement of a `CONST`, never materialised), broadcast
/// and `FDIV`; `CAST` back. Error: that of the f32 sum plus one rounding.
///
/// Errors: `DTypeMismatch` for a non-float input; those of [`window`];
/// `Unsupported` for a pad over half the kernel.
pub fn avgpool2d(g: &mut Graph, x: NodeId, kernel: &[Dim; 2], w: &Window, count_include_pad: bool) -> DResult<NodeId> {
    require_float(g, x, "avgpool2d")?;
    check_pool_pad(g, kernel, w)?;
    let dt = g.dtype(x);
    let xw = window(g, x, kernel, w, 0.0)?;
    let r = g.shape(xw).len();
    let s = g.reduce(ReduceOp::Sum, xw, &[r - 2, r - 1], DType::F32)?;
    let y = if count_include_pad {
        divide_by_count(g, s, kernel)?
    } else {
        let hw = g.shape(x)[r - 4..r - 2].to_vec();
        let ones = splat(g, 1.0, DType::F32, &hw)?;
        let cw = window(g, ones, kernel, w, 0.0)?;
        let c = g.reduce(ReduceOp::Sum, cw, &[2, 3], DType::F32)?;
        let shape = g.shape(s).to_vec();
        let c = broadcast_to(g, c, &shape)?;
        g.binary(BinaryOp::Fdiv, s, c)?
    };
    cast_to(g, y, dt)
}

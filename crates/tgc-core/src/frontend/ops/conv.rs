//! Sliding-window ops on channels-first tensors in one to three spatial
//! dimensions (`004`'s `conv_nd`): `conv{1,2,3}d`, `conv_transpose{1,2,3}d`,
//! `maxpool{1,2,3}d`, `avgpool{1,2,3}d`, `im2col` and `col2im`.
//!
//! The window is a movement (decision 2): `PAD` (asymmetric, before and
//! after each spatial axis) then an affine `VIEW` adding the kernel axes,
//! `out[.., o_k.., q_k..] = in[.., o_k·S_k + q_k·D_k ..]` (`spec/003`,
//! `spec/002` §5.2). Nothing is materialised: no im2col. A transposed
//! convolution is the convolution of the input dilated by its stride (zeros
//! between the elements, by `RESHAPE` + `PAD`) with the flipped weight: no
//! scatter.

use crate::affine::AffExpr;
use crate::diag;
use crate::diag::DResult;
use crate::frontend::ir::Window;
use crate::sym::Dim;
use crate::tiny::infer::fmt_shape;
use crate::tiny::{BinaryOp, Graph, NodeId, ReduceOp};
use crate::DType;

use super::{broadcast_to, cast_to, fail, reduce::divide_by_count, require_float, splat};

/// The sliding window over the last `n = kernel.len()` axes of `x`:
/// `[.., S_1..S_n]` → `[.., O_1..O_n, K_1..K_n]` with
/// `O_k = (S_k + before_k + after_k − D_k·(K_k−1) − 1) / S_k + 1` (floor
/// division), padding with `pad_value`.
///
/// Errors: `AxisSizeMismatch` for a rank below `n`, a kernel size < 1 or a
/// window larger than the padded input; `NegativeStride` for a stride or
/// dilation ≤ 0; `Internal` when `w` is not of rank `n`.
pub fn window(g: &mut Graph, x: NodeId, kernel: &[Dim], w: &Window, pad_value: f64) -> DResult<NodeId> {
    let s = g.shape(x).to_vec();
    let (r, n) = (s.len(), kernel.len());
    if w.rank() != n || w.pad.len() != n || w.dilation.len() != n {
        return Err(fail(g, diag!(Internal, "a {n}-d kernel with a window of rank {}", w.rank())));
    }
    if r < n {
        return Err(fail(g, diag!(AxisSizeMismatch, "a {n}-d window needs rank ≥ {n}, got {}", fmt_shape(&s))));
    }
    // The kernel first: a pool's stride defaults to it.
    if let Some(k) = kernel.iter().find(|k| k.as_int().is_some_and(|v| v < 1)) {
        return Err(fail(g, diag!(AxisSizeMismatch, "kernel size {k} must be at least 1")));
    }
    for d in w.stride.iter().chain(&w.dilation) {
        if d.as_int().is_some_and(|v| v <= 0) {
            return Err(fail(g, diag!(NegativeStride, "window stride and dilation must be positive, got {d}")));
        }
    }
    let zero = Dim::int(0);
    let mut pads = vec![(zero.clone(), zero.clone()); r - n];
    pads.extend(w.pad.iter().cloned());
    let xp = if w.pad.iter().all(|(a, b)| a == &zero && b == &zero) { x } else { g.pad(x, &pads, pad_value)? };
    let padded = g.shape(xp).to_vec();
    let mut out: Vec<Dim> = s[..r - n].to_vec();
    for k in 0..n {
        let span = &(&padded[r - n + k] - &(&w.dilation[k] * &(&kernel[k] - &Dim::int(1)))) - &Dim::int(1);
        let o = span.floordiv(&w.stride[k]).map(|q| &q + &Dim::int(1));
        match o {
            Some(o) if o.as_int().is_none_or(|v| v >= 1) => out.push(o),
            _ => {
                let ks: Vec<String> = kernel.iter().map(|k| k.to_string()).collect();
                return Err(fail(
                    g,
                    diag!(
                        AxisSizeMismatch,
                        "a {} window (dilation {}) does not fit the padded input {}",
                        ks.join("x"),
                        w.dilation[k],
                        fmt_shape(&padded)
                    ),
                ));
            }
        }
    }
    out.extend(kernel.iter().cloned());
    let mut map: Vec<AffExpr> = (0..(r - n) as u32).map(AffExpr::var).collect();
    for k in 0..n {
        let o = AffExpr::var((r - n + k) as u32).scale(&w.stride[k]);
        let q = AffExpr::var((r + k) as u32).scale(&w.dilation[k]);
        map.push(&o + &q);
    }
    g.view(xp, &out, &map)
}

/// The operand checks shared by `conv` and `conv_transpose`: ranks `n + 2`,
/// one numeric dtype, and `groups ≥ 1`.
fn check_operands(
    g: &Graph,
    op: &str,
    x: NodeId,
    w: NodeId,
    bias: Option<NodeId>,
    n: usize,
    groups: i64,
) -> DResult<()> {
    let (sx, sw) = (g.shape(x), g.shape(w));
    if sx.len() != n + 2 || sw.len() != n + 2 {
        return Err(fail(
            g,
            diag!(
                AxisSizeMismatch,
                "{op} needs x and w of rank {} (batch, channels and {n} spatial axes), got {} and {}",
                n + 2,
                fmt_shape(sx),
                fmt_shape(sw)
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
                    "{op} operands have dtypes {dt} and {}; they must be the same numeric dtype",
                    g.dtype(o)
                ),
            ));
        }
    }
    if groups < 1 {
        return Err(fail(g, diag!(AxisSizeMismatch, "groups = {groups} must be at least 1")));
    }
    Ok(())
}

/// `c / groups`, refusing channels that are not divisible.
fn per_group(g: &Graph, what: &str, c: &Dim, groups: i64) -> DResult<Dim> {
    if c.as_int().is_some_and(|v| v % groups != 0) {
        return Err(fail(g, diag!(AxisSizeMismatch, "{what} channels {c} are not divisible by groups = {groups}")));
    }
    c.floordiv(&Dim::int(groups)).ok_or_else(|| fail(g, diag!(AxisSizeMismatch, "groups = {groups} must be positive")))
}

/// `conv{n}d(x, w, bias)`: x `[N, Cin, *S]`, w `[Cout, Cin/G, *K]`, bias
/// `[Cout]` → `[N, Cout, *O]` with `n = win.rank()` spatial axes,
/// tinygrad's formulation (`spec/002` §5.2): [`window`] → `RESHAPE [N, G,
/// Cin/G, 1, *O, *K]` → `EXPAND` over Cout/G → `PERMUTE` to `[N, G, Cout/G,
/// *O, Cin/G, *K]`; the weight `RESHAPE [1, G, Cout/G, 1.., Cin/G, *K]` +
/// `EXPAND`; `MUL`; `REDUCE SUM` over the last `n + 1` axes in f32 (i32 for
/// i32); `RESHAPE [N, Cout, *O]`; bias cast to the accumulator and added;
/// `CAST` back. Products are exact; the error is that of an f32 sum of
/// Cin/G·ΠK terms.
///
/// Errors: `AxisSizeMismatch` for ranks other than `n + 2`, channels not
/// divisible by `groups`, or a weight/bias whose channels do not match;
/// `DTypeMismatch` for operands of different dtypes; the errors of [`window`].
pub fn conv(g: &mut Graph, x: NodeId, w: NodeId, bias: Option<NodeId>, win: &Window, groups: i64) -> DResult<NodeId> {
    let n = win.rank();
    let op = format!("conv{n}d");
    check_operands(g, &op, x, w, bias, n, groups)?;
    let (sx, sw) = (g.shape(x).to_vec(), g.shape(w).to_vec());
    let dt = g.dtype(x);
    let gd = Dim::int(groups);
    let (batch, cin, cout) = (&sx[0], &sx[1], &sw[0]);
    let cin_g = per_group(g, "input", cin, groups)?;
    let rcout = per_group(g, "output", cout, groups)?;
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
    let kernel = sw[2..].to_vec();
    let xw = window(g, x, &kernel, win, 0.0)?;
    let outs = g.shape(xw)[2..2 + n].to_vec();
    let one = Dim::int(1);
    let cat = |parts: &[&[Dim]]| -> Vec<Dim> { parts.concat() };
    let head = [batch.clone(), gd.clone(), cin_g.clone()];
    let x1 = g.reshape(xw, &cat(&[&head, std::slice::from_ref(&one), &outs, &kernel]))?;
    let x2 = g.expand(x1, &cat(&[&head, std::slice::from_ref(&rcout), &outs, &kernel]))?;
    // [N, G, Cin/G, Cout/G, *O, *K] → [N, G, Cout/G, *O, Cin/G, *K].
    let perm: Vec<usize> = [0, 1, 3].into_iter().chain(4..4 + n).chain([2]).chain(4 + n..4 + 2 * n).collect();
    let x3 = g.permute(x2, &perm)?;
    let full = g.shape(x3).to_vec();
    let ones = vec![one.clone(); n];
    let w1 =
        g.reshape(w, &cat(&[&[one.clone(), gd.clone(), rcout.clone()], &ones, std::slice::from_ref(&cin_g), &kernel]))?;
    let w2 = g.expand(w1, &full)?;
    let p = g.binary(BinaryOp::Mul, x3, w2)?;
    let acc = if dt.is_float() { DType::F32 } else { DType::I32 };
    let axes: Vec<usize> = (3 + n..=3 + 2 * n).collect();
    let s = g.reduce(ReduceOp::Sum, p, &axes, acc)?;
    let out_shape = cat(&[&[batch.clone(), cout.clone()], &outs]);
    let mut y = g.reshape(s, &out_shape)?;
    if let Some(b) = bias {
        let sb = g.shape(b).to_vec();
        if sb.len() != 1 || (&sb[0] != cout && sb[0].as_int().is_some() && cout.as_int().is_some()) {
            return Err(fail(g, diag!(AxisSizeMismatch, "{op} bias must be [{cout}], got {}", fmt_shape(&sb))));
        }
        let b = cast_to(g, b, acc)?;
        let b = g.reshape(b, &cat(&[&[one.clone(), cout.clone()], &ones]))?;
        let b = g.expand(b, &out_shape)?;
        y = g.binary(BinaryOp::Add, y, b)?;
    }
    cast_to(g, y, dt)
}

/// `x` with `strides[k] − 1` zeros between the elements of each of its
/// last `n = strides.len()` axes: `[.., S] → [.., S, 1]` (`RESHAPE`) `→
/// [.., S, s]` (`PAD`) `→ [.., S·s]` (`RESHAPE`) `→ [.., (S − 1)·s + 1]`
/// (`SHRINK`). Exact; `x` itself when every stride is 1.
fn dilate(g: &mut Graph, x: NodeId, strides: &[i64]) -> DResult<NodeId> {
    if strides.iter().all(|&st| st == 1) {
        return Ok(x);
    }
    let shape = g.shape(x).to_vec();
    let (r, n) = (shape.len(), strides.len());
    let (lead, spatial) = shape.split_at(r - n);
    let paired: Vec<Dim> = spatial.iter().flat_map(|d| [d.clone(), Dim::int(1)]).collect();
    let y = g.reshape(x, &[lead, &paired].concat())?;
    let mut pads = vec![(Dim::int(0), Dim::int(0)); r - n + 2 * n];
    for (k, &st) in strides.iter().enumerate() {
        pads[r - n + 2 * k + 1].1 = Dim::int(st - 1);
    }
    let y = g.pad(y, &pads, 0.0)?;
    let wide: Vec<Dim> = spatial.iter().zip(strides).map(|(d, &st)| d * &Dim::int(st)).collect();
    let y = g.reshape(y, &[lead, &wide].concat())?;
    let mut top = lead.to_vec();
    top.extend(spatial.iter().zip(strides).map(|(d, &st)| &(&(d - &Dim::int(1)) * &Dim::int(st)) + &Dim::int(1)));
    g.shrink(y, &vec![Dim::int(0); r], &top, &vec![Dim::int(1); r])
}

/// `x` with `lo[k]` zeros before and `hi[k]` after each of its last `n =
/// lo.len()` axes: `PAD` of the positive amounts, `SHRINK` of the
/// negative ones.
///
/// Errors: `AxisSizeMismatch` when a `SHRINK` leaves nothing of an axis.
fn grow(g: &mut Graph, x: NodeId, lo: &[i64], hi: &[i64]) -> DResult<NodeId> {
    let r = g.shape(x).len();
    let lead = r - lo.len();
    let mut y = x;
    if lo.iter().chain(hi).any(|&v| v > 0) {
        let mut pads = vec![(Dim::int(0), Dim::int(0)); r];
        for (k, (&a, &b)) in lo.iter().zip(hi).enumerate() {
            pads[lead + k] = (Dim::int(a.max(0)), Dim::int(b.max(0)));
        }
        y = g.pad(y, &pads, 0.0)?;
    }
    if lo.iter().chain(hi).any(|&v| v < 0) {
        let shape = g.shape(y).to_vec();
        let mut from = vec![Dim::int(0); r];
        let mut to = shape.clone();
        for (k, (&a, &b)) in lo.iter().zip(hi).enumerate() {
            from[lead + k] = Dim::int((-a).max(0));
            to[lead + k] = &shape[lead + k] - &Dim::int((-b).max(0));
            if to[lead + k].as_int().zip(from[lead + k].as_int()).is_some_and(|(t, f)| t <= f) {
                return Err(fail(g, diag!(AxisSizeMismatch, "the padding leaves nothing of spatial axis {k}")));
            }
        }
        y = g.shrink(y, &from, &to, &vec![Dim::int(1); r])?;
    }
    Ok(y)
}

/// `v` as an i64 within the element limit ([`crate::sym::MAX_ELEMENTS`]):
/// an edge or size of a window computation, else `ResourceExceeded`.
fn fit(g: &Graph, op: &str, v: i128) -> DResult<i64> {
    match i64::try_from(v) {
        Ok(x) if x.unsigned_abs() <= crate::sym::MAX_ELEMENTS as u64 => Ok(x),
        _ => Err(fail(
            g,
            diag!(ResourceExceeded, "{op}: a window size of {v} elements is beyond the limit for one tensor"),
        )),
    }
}

/// `v` as a known integer, or `Unsupported` naming `what` for `op`.
fn known(g: &Graph, op: &str, what: &str, v: &Dim) -> DResult<i64> {
    v.as_int().ok_or_else(|| fail(g, diag!(Unsupported, "{op} needs a known {what}, got {v}")))
}

/// `conv_transpose{n}d(x, w, bias)` (PyTorch's `ConvTranspose`): x `[N,
/// Cin, *S]`, w `[Cin, Cout/G, *K]`, bias `[Cout]` → `[N, Cout, *O]` with
/// `O_k = (S_k − 1)·stride_k − before_k − after_k + D_k·(K_k − 1) +
/// output_padding_k + 1`. Without scatter: the input dilated by the stride
/// (`RESHAPE [.., S_k, 1]`, `PAD` to `[.., S_k, stride_k]`, `RESHAPE`,
/// `SHRINK` to `(S_k − 1)·stride_k + 1`), padded by `D_k·(K_k − 1) −
/// before_k` and `D_k·(K_k − 1) − after_k + output_padding_k` (a negative
/// amount is a `SHRINK`), then [`conv`] at stride 1 and dilation `D` with
/// the weight regrouped to `[Cout, Cin/G, *K]` and `FLIP`ped along its
/// spatial axes. The error is that of [`conv`] (the dilation zeros add
/// exact zeros).
///
/// Errors: those of [`conv`]; `AxisSizeMismatch` for a weight whose first
/// axis is not Cin, an output padding not below the stride or the dilation
/// (PyTorch's rule) or an empty output; `Unsupported` for a symbolic stride,
/// dilation, padding or kernel size (the edge amounts must be known).
pub fn conv_transpose(
    g: &mut Graph,
    x: NodeId,
    w: NodeId,
    bias: Option<NodeId>,
    win: &Window,
    output_padding: &[Dim],
    groups: i64,
) -> DResult<NodeId> {
    let n = win.rank();
    let op = format!("conv_transpose{n}d");
    check_operands(g, &op, x, w, bias, n, groups)?;
    let (sx, sw) = (g.shape(x).to_vec(), g.shape(w).to_vec());
    if output_padding.len() != n {
        return Err(fail(g, diag!(Internal, "{op}: {} output paddings", output_padding.len())));
    }
    if sw[0] != sx[1] && sw[0].as_int().is_some() && sx[1].as_int().is_some() {
        return Err(fail(
            g,
            diag!(
                AxisSizeMismatch,
                "{op} weight {} must start with the {} input channels of x {}",
                fmt_shape(&sw),
                sx[1],
                fmt_shape(&sx)
            ),
        ));
    }
    let cin_g = per_group(g, "input", &sx[1], groups)?;
    let mut lo = Vec::with_capacity(n);
    let mut hi = Vec::with_capacity(n);
    let mut strides = Vec::with_capacity(n);
    for k in 0..n {
        let (st, dl) = (known(g, &op, "stride", &win.stride[k])?, known(g, &op, "dilation", &win.dilation[k])?);
        let kk = known(g, &op, "kernel size", &sw[2 + k])?;
        let (pb, pa) = (known(g, &op, "padding", &win.pad[k].0)?, known(g, &op, "padding", &win.pad[k].1)?);
        let opad = known(g, &op, "output padding", &output_padding[k])?;
        if st < 1 || dl < 1 {
            return Err(fail(g, diag!(NegativeStride, "{op} stride and dilation must be positive, got {st} and {dl}")));
        }
        if pb < 0 || pa < 0 || opad < 0 || opad >= st.max(dl) {
            return Err(fail(
                g,
                diag!(
                    AxisSizeMismatch,
                    "{op} padding ({pb}, {pa}) must be ≥ 0 and output padding {opad} in 0..max(stride {st}, \
                     dilation {dl})"
                ),
            ));
        }
        // In i128: no product of two i64 attributes overflows.
        let wide = |v: i64| v as i128;
        let reach = wide(dl) * (wide(kk) - 1);
        if let Some(size) = sx[2 + k].as_int() {
            let o = (wide(size) - 1) * wide(st) - wide(pb) - wide(pa) + reach + wide(opad) + 1;
            if o < 1 {
                return Err(fail(
                    g,
                    diag!(AxisSizeMismatch, "{op} leaves no output along spatial axis {k}: its size would be {o}"),
                ));
            }
        }
        lo.push(fit(g, &op, reach - wide(pb))?);
        hi.push(fit(g, &op, reach - wide(pa) + wide(opad))?);
        strides.push(st);
    }
    let xd = dilate(g, x, &strides)?;
    let xd = grow(g, xd, &lo, &hi)?;
    // [Cin, Cout/G, *K] → [G, Cin/G, Cout/G, *K] → [G, Cout/G, Cin/G, *K] → [Cout, Cin/G, *K], flipped.
    let (gd, rcout) = (Dim::int(groups), sw[1].clone());
    let kernel = sw[2..].to_vec();
    let w1 = g.reshape(w, &[vec![gd.clone(), cin_g.clone(), rcout.clone()], kernel.clone()].concat())?;
    let perm: Vec<usize> = [0, 2, 1].into_iter().chain(3..3 + n).collect();
    let w2 = g.permute(w1, &perm)?;
    let w3 = g.reshape(w2, &[vec![&gd * &rcout, cin_g], kernel].concat())?;
    let w4 = g.flip(w3, &(2..2 + n).collect::<Vec<_>>())?;
    let unit = Window {
        stride: vec![Dim::int(1); n],
        pad: vec![(Dim::int(0), Dim::int(0)); n],
        dilation: win.dilation.clone(),
    };
    conv(g, xd, w4, bias, &unit, groups)
}

/// Rejects pads of more than half the kernel (as PyTorch does): such a
/// window could see only padding. A kernel size below 1 is left to
/// [`window`]'s error, which names it.
fn check_pool_pad(g: &Graph, kernel: &[Dim], w: &Window) -> DResult<()> {
    for (k, (b, a)) in kernel.iter().zip(&w.pad) {
        for p in [b, a] {
            if let (Some(pv), Some(kv)) = (p.as_int(), k.as_int().filter(|&kv| kv >= 1)) {
                // 2·pv > kv without overflow.
                if pv > kv / 2 {
                    return Err(fail(
                        g,
                        diag!(Unsupported, "pool padding {pv} is more than half the kernel size {kv}"),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// `maxpool{n}d(x)`: [`window`] padded with the dtype's lowest value (−inf
/// for floats, so padding never wins), then `REDUCE MAX` over the kernel
/// axes in the input dtype. Exact. `[.., *S]` → `[.., *O]`.
///
/// Errors: those of [`window`]; `Unsupported` for a pad over half the kernel.
pub fn maxpool(g: &mut Graph, x: NodeId, kernel: &[Dim], w: &Window) -> DResult<NodeId> {
    check_pool_pad(g, kernel, w)?;
    let dt = g.dtype(x);
    let xw = window(g, x, kernel, w, ReduceOp::Max.identity(dt))?;
    let r = g.shape(xw).len();
    let axes: Vec<usize> = (r - kernel.len()..r).collect();
    g.reduce(ReduceOp::Max, xw, &axes, dt)
}

/// `avgpool{n}d(x)`: [`window`] padded with 0, `REDUCE SUM` over the kernel
/// axes in f32, divided by the window size (`count_include_pad`) or by the
/// number of real elements: the same window-sum applied to a padded tensor
/// of ones `[*S]` (movement of a `CONST`, never materialised), broadcast
/// and `FDIV`; `CAST` back. Error: that of the f32 sum plus one rounding.
///
/// Errors: `DTypeMismatch` for a non-float input; those of [`window`];
/// `Unsupported` for a pad over half the kernel.
pub fn avgpool(g: &mut Graph, x: NodeId, kernel: &[Dim], w: &Window, count_include_pad: bool) -> DResult<NodeId> {
    require_float(g, x, &format!("avgpool{}d", kernel.len()))?;
    check_pool_pad(g, kernel, w)?;
    let dt = g.dtype(x);
    let n = kernel.len();
    let xw = window(g, x, kernel, w, 0.0)?;
    let r = g.shape(xw).len();
    let s = g.reduce(ReduceOp::Sum, xw, &(r - n..r).collect::<Vec<_>>(), DType::F32)?;
    let y = if count_include_pad {
        divide_by_count(g, s, kernel)?
    } else {
        let rx = g.shape(x).len();
        let spatial = g.shape(x)[rx - n..].to_vec();
        let ones = splat(g, 1.0, DType::F32, &spatial)?;
        let cw = window(g, ones, kernel, w, 0.0)?;
        let c = g.reduce(ReduceOp::Sum, cw, &(n..2 * n).collect::<Vec<_>>(), DType::F32)?;
        let shape = g.shape(s).to_vec();
        let c = broadcast_to(g, c, &shape)?;
        g.binary(BinaryOp::Fdiv, s, c)?
    };
    cast_to(g, y, dt)
}

/// `im2col(x)` (PyTorch's `F.unfold`, in 1 to 3 spatial dimensions): x `[N,
/// C, *S]` → `[N, C·ΠK, ΠO]`, each column one window position's `C·ΠK`
/// values in `(c, q_1, .., q_n)` order, the columns in row-major `O` order.
/// [`window`] (zero padding), `PERMUTE` to `[N, C, *K, *O]`, `RESHAPE`.
/// Exact.
///
/// Errors: `AxisSizeMismatch` for an input not of rank `n + 2`; those of
/// [`window`].
pub fn im2col(g: &mut Graph, x: NodeId, kernel: &[Dim], w: &Window) -> DResult<NodeId> {
    let n = kernel.len();
    let s = g.shape(x).to_vec();
    if s.len() != n + 2 {
        let msg = format!("im2col with a {n}-d kernel needs x [N, C, {n} spatial axes], got {}", fmt_shape(&s));
        return Err(fail(g, diag!(AxisSizeMismatch, "{msg}")));
    }
    let xw = window(g, x, kernel, w, 0.0)?;
    let outs = g.shape(xw)[2..2 + n].to_vec();
    let perm: Vec<usize> = [0, 1].into_iter().chain(2 + n..2 + 2 * n).chain(2..2 + n).collect();
    let y = g.permute(xw, &perm)?;
    g.reshape(y, &[s[0].clone(), &s[1] * &Dim::product(kernel), Dim::product(&outs)])
}

/// `col2im(cols)` (PyTorch's `F.fold`, ONNX `Col2Im`): cols `[N, C·ΠK, L]`
/// → `[N, C, *S]` (`S = output`), every column added back at its window's
/// place, overlaps summed: `y[n, c, p] = Σ` over the window points `q` and
/// positions `o` with `o·s − before + q·d = p` of `cols[n, (c, q), o]`.
/// Without scatter, per spatial axis as in [`conv_transpose`]: `RESHAPE` to
/// `[N, C, *K, *O]`, the `O` axes [`dilate`]d by the stride, `FLIP` of the
/// `K` axes, [`grow`] by `d·(K − 1) − before` in front, then a `VIEW`
/// `[N, C, *S, *K]` reading `(q', p + q'·d)` and `REDUCE SUM` over the
/// `K` axes (f32 for floats); `CAST` back. The error is that of an f32 sum
/// of at most ΠK terms (exact where windows do not overlap).
///
/// Errors: `AxisSizeMismatch` for cols not of rank 3, a second axis not
/// divisible by ΠK, or `L` not the number of window positions ΠO;
/// `Unsupported` for a symbolic kernel size, stride, dilation or padding.
pub fn col2im(g: &mut Graph, cols: NodeId, output: &[Dim], kernel: &[Dim], w: &Window) -> DResult<NodeId> {
    let n = kernel.len();
    let op = "col2im";
    let s = g.shape(cols).to_vec();
    if s.len() != 3 || output.len() != n {
        let msg = format!("col2im needs cols [N, C·ΠK, L] and {n} output sizes, got {}", fmt_shape(&s));
        return Err(fail(g, diag!(AxisSizeMismatch, "{msg}")));
    }
    let taps = Dim::product(kernel);
    let c = s[1].floordiv(&taps).filter(|c| c * &taps == s[1]).ok_or_else(|| {
        fail(g, diag!(AxisSizeMismatch, "col2im: axis 1 of {} is not divisible by ΠK = {taps}", fmt_shape(&s)))
    })?;
    let (mut outs, mut strides, mut lo, mut hi, mut dil) = (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for k in 0..n {
        let kk = known(g, op, "kernel size", &kernel[k])?;
        let (st, d) = (known(g, op, "stride", &w.stride[k])?, known(g, op, "dilation", &w.dilation[k])?);
        let (pb, pa) = (known(g, op, "padding", &w.pad[k].0)?, known(g, op, "padding", &w.pad[k].1)?);
        let size = known(g, op, "output size", &output[k])?;
        if kk < 1 || st < 1 || d < 1 || pb < 0 || pa < 0 || size < 1 {
            let msg = format!("col2im: kernel {kk}, stride {st}, dilation {d} and output size {size} must be positive, padding ({pb}, {pa}) ≥ 0");
            return Err(fail(g, diag!(AxisSizeMismatch, "{msg}")));
        }
        // In i128: no product of two i64 attributes overflows.
        let wide = |v: i64| v as i128;
        let reach = wide(d) * (wide(kk) - 1);
        let o = (wide(size) + wide(pb) + wide(pa) - reach - 1).div_euclid(wide(st)) + 1;
        if o < 1 {
            return Err(fail(
                g,
                diag!(AxisSizeMismatch, "col2im: the {kk}-wide window does not fit output size {size}"),
            ));
        }
        // The dilated positions, shifted so that window point q' reads p + q'·d.
        let front = reach - wide(pb);
        let len = (o - 1) * wide(st) + 1 + front;
        lo.push(fit(g, op, front)?);
        hi.push(fit(g, op, (wide(size) + reach - len).max(0))?);
        outs.push(Dim::int(fit(g, op, o)?));
        strides.push(st);
        dil.push(d);
    }
    let positions = Dim::product(&outs);
    if positions != s[2] {
        let msg = format!(
            "col2im: cols {} hold {} positions, but the windows over {} take {positions}",
            fmt_shape(&s),
            s[2],
            fmt_shape(output)
        );
        return Err(fail(g, diag!(AxisSizeMismatch, "{msg}")));
    }
    let lead = [s[0].clone(), c];
    let y = g.reshape(cols, &[&lead[..], kernel, &outs].concat())?;
    let y = dilate(g, y, &strides)?;
    let y = g.flip(y, &(2..2 + n).collect::<Vec<_>>())?;
    let y = grow(g, y, &lo, &hi)?;
    // [N, C, *S, *K]: (n, c, q', p + q'·d).
    let mut map: Vec<AffExpr> = vec![AffExpr::var(0), AffExpr::var(1)];
    map.extend((0..n).map(|k| AffExpr::var((2 + n + k) as u32)));
    map.extend(
        (0..n).map(|k| &AffExpr::var((2 + k) as u32) + &AffExpr::var((2 + n + k) as u32).scale(&Dim::int(dil[k]))),
    );
    let y = g.view(y, &[&lead[..], output, kernel].concat(), &map)?;
    let dt = g.dtype(cols);
    let acc = if dt.is_float() { DType::F32 } else { DType::I32 };
    let y = g.reduce(ReduceOp::Sum, y, &(2 + n..2 + 2 * n).collect::<Vec<_>>(), acc)?;
    cast_to(g, y, dt)
}

//! Signal-processing operators: the windows `BlackmanWindow`,
//! `HammingWindow` and `HannWindow`, computed at import time (their size
//! must be known), and `DFT` and `STFT` as matmuls against import-time
//! cos/sin matrices.

use std::f64::consts::PI;
use std::rc::Rc;

use crate::diag;
use crate::diag::DResult;
use crate::frontend::ir::*;
use crate::sym::Dim;

use super::super::known::{self, KData, Known};
use super::super::proto::{self, code};
use super::recurrent::{at, cut, mv, stack};
use super::{bin, need_known, val, Builder, Val, N};

/// `w[n]` for `n` in `0..size`, by ONNX's definitions with `N = size`
/// (`periodic=1`, the default) or `size − 1`: Hann `sin²(πn/N)`, Hamming
/// `α − (1 − α)·cos(2πn/N)` with α = 25/46, Blackman `0.42 − 0.5·cos(2πn/N)
/// + 0.08·cos(4πn/N)`; computed in f64 and rounded once to
/// `output_datatype`.
///
/// Errors: `Unsupported` when `size` is not known at import, or its type
/// is not a float type; `AxisSizeMismatch` for a size that is not a
/// scalar in `1..=65536`.
pub(super) fn window(b: &mut Builder, n: &N) -> DResult<Vec<Val>> {
    let op = n.node.op_type.as_str();
    let size = need_known(b, n, 0, "size")?.int_values("size")?;
    let size = match size[..] {
        [s] if (1..=known::MAX_KNOWN_ELEMENTS as i64).contains(&s) => s as usize,
        _ => {
            return Err(diag!(
                AxisSizeMismatch,
                "{op}'s size must be one integer in 1..={}, not {size:?}",
                known::MAX_KNOWN_ELEMENTS
            ))
        }
    };
    let dtype = n.a.int_or("output_datatype", code::FLOAT as i64)? as i32;
    if !proto::is_float(dtype) {
        return Err(diag!(Unsupported, "{op} output_datatype {}", proto::type_name(dtype)));
    }
    let periodic = n.a.int_or("periodic", 1)? != 0;
    let len = if periodic { size as f64 } else { size as f64 - 1.0 };
    let w: Vec<f64> = (0..size)
        .map(|i| {
            let t = 2.0 * PI * i as f64 / len;
            match op {
                "HannWindow" => (PI * i as f64 / len).sin().powi(2),
                "HammingWindow" => 25.0 / 46.0 - (21.0 / 46.0) * t.cos(),
                _ => 0.42 - 0.5 * t.cos() + 0.08 * (2.0 * t).cos(),
            }
        })
        .collect();
    Ok(vec![Val::Known(Rc::new(Known { code: dtype, shape: vec![size], data: KData::Float(w) }))])
}

/// Most elements of one import-time DFT matrix (`[rows, columns]`).
const MAX_DFT_MATRIX: usize = 1 << 20;

/// A `[rows, cols]` matrix of `f(θ, n)` at row `n` and column `k`, with
/// `θ = 2π·(k·n mod len)/len` (the reduction is exact, so each entry is
/// the f64 value rounded once to f32), as a run-time weight named after
/// `name`.
fn dft_matrix(
    b: &mut Builder,
    name: &str,
    rows: usize,
    cols: usize,
    len: usize,
    f: impl Fn(f64, usize) -> f64,
) -> DResult<ValueId> {
    if rows.checked_mul(cols).is_none_or(|e| e > MAX_DFT_MATRIX) {
        return Err(diag!(
            Unsupported,
            "a DFT of {rows} by {cols} points (its import-time matrices hold at most {MAX_DFT_MATRIX} elements)"
        ));
    }
    let mut v = Vec::with_capacity(rows * cols);
    for n in 0..rows {
        for k in 0..cols {
            let theta = 2.0 * PI * ((k * n) % len) as f64 / len as f64;
            v.push(f(theta, n));
        }
    }
    let k = Known { code: code::FLOAT, shape: vec![rows, cols], data: KData::Float(v) };
    b.materialize(&k, name)
}

/// The DFT along the last axis of `re` (and `im`; `None` is a real
/// signal), whose size is at most `len` (shorter is zero-padded):
/// `cols` output points of the `len`-point transform, by matmuls against
/// import-time cos/sin matrices. `inverse` uses `e^{+iθ}` and divides by
/// `len`; `half` (an inverse one-sided transform, numpy's `irfft`) reads
/// the input as the first half of a Hermitian spectrum and gives only
/// the real part.
///
/// Max error: each matrix entry is rounded once to f32 (2^-24 relative),
/// and each output point is a sum of `2·rows` products: absolute
/// `(2·rows + 1)·2^-24·Σ|x|` (Higham's bound for the sum) over the `rows`
/// input points.
#[allow(clippy::too_many_arguments)]
fn dft_last(
    b: &mut Builder,
    name: &str,
    re: ValueId,
    im: Option<ValueId>,
    len: usize,
    cols: usize,
    inverse: bool,
    half: bool,
) -> DResult<(ValueId, Option<ValueId>)> {
    let rows = b.shape(re)?.last().and_then(|d| d.as_int()).unwrap_or(0) as usize;
    let scale = if inverse { 1.0 / len as f64 } else { 1.0 };
    // Hermitian weights of an inverse one-sided transform, by input
    // (frequency) row: k = 0 and the Nyquist point once, the others twice.
    let w = |k: usize| if !half || k == 0 || 2 * k == len { 1.0 } else { 2.0 };
    let sign = if inverse { 1.0 } else { -1.0 };
    let matmul = |b: &mut Builder, x: ValueId, m: ValueId| b.emit(FOp::Matmul, vec![val(x), val(m)]);
    if half {
        // Re x_n = Σ_k w_k·(Re X_k·cos θ − Im X_k·sin θ)/len.
        let c = dft_matrix(b, &format!("{name}_cos"), rows, cols, len, |t, k| w(k) * scale * t.cos())?;
        let mut y = matmul(b, re, c)?;
        if let Some(im) = im {
            let s = dft_matrix(b, &format!("{name}_sin"), rows, cols, len, |t, k| -w(k) * scale * t.sin())?;
            let p = matmul(b, im, s)?;
            y = bin(b, BinaryFn::Add, val(y), val(p))?;
        }
        return Ok((y, None));
    }
    let c = dft_matrix(b, &format!("{name}_cos"), rows, cols, len, |t, _| scale * t.cos())?;
    let s = dft_matrix(b, &format!("{name}_sin"), rows, cols, len, |t, _| sign * scale * t.sin())?;
    // (a + ib)·(cos θ + i·sign·sin θ).
    let mut yr = matmul(b, re, c)?;
    let mut yi = matmul(b, re, s)?;
    if let Some(im) = im {
        let bs = matmul(b, im, s)?;
        yr = bin(b, BinaryFn::Sub, val(yr), val(bs))?;
        let bc = matmul(b, im, c)?;
        yi = bin(b, BinaryFn::Add, val(yi), val(bc))?;
    }
    Ok((yr, Some(yi)))
}

/// The real and imaginary parts of `x`, whose last axis has size 1 (real)
/// or 2; `what` names the operator.
fn complex_parts(b: &mut Builder, x: ValueId, what: &str) -> DResult<(ValueId, Option<ValueId>)> {
    let shape = b.shape(x)?;
    let r = shape.len();
    match shape.last().and_then(|d| d.as_int()) {
        Some(1) if r >= 2 => Ok((at(b, x, r - 1, 0)?, None)),
        Some(2) if r >= 2 => Ok((at(b, x, r - 1, 0)?, Some(at(b, x, r - 1, 1)?))),
        _ => Err(diag!(
            AxisSizeMismatch,
            "{what}'s input must end in an axis of size 1 or 2, not {}",
            crate::tiny::infer::fmt_shape(&shape)
        )),
    }
}

/// `[re, im]` on a new last axis, or `re` with a last axis of 1.
fn join_parts(b: &mut Builder, re: ValueId, im: Option<ValueId>) -> DResult<ValueId> {
    match im {
        Some(im) => stack(b, &[re, im], -1),
        None => stack(b, &[re], -1),
    }
}

/// `DFT`: the transform along `axis` (opset 20: input 2, default −2;
/// before: the attribute, default 1), `dft_length` points (input 1,
/// default the axis's size; `2·(size − 1)` for an inverse one-sided
/// transform), `inverse`, `onesided`; see [`dft_last`] for the bound.
///
/// Errors: `Unsupported` for `dft_length` or `axis` not known at import,
/// or a symbolic size on the axis; `InvalidAxis` for the complex axis.
pub(super) fn dft(b: &mut Builder, n: &N) -> DResult<Vec<Val>> {
    let x = b.run(n.required(0)?)?;
    let shape = b.shape(x)?;
    let r = shape.len() as i64;
    let axis = if n.opset >= 20 {
        if n.a.has("axis") {
            return Err(diag!(Unsupported, "DFT's attribute `axis` at opset {} (an input from opset 20)", n.opset));
        }
        match n.input(2) {
            Some(_) => need_known(b, n, 2, "axis")?.scalar_value("DFT's axis")? as i64,
            None => -2,
        }
    } else {
        n.a.int_or("axis", 1)?
    };
    let ax = axis.rem_euclid(r.max(1));
    if axis < -r || axis >= r || ax == r - 1 {
        return Err(diag!(InvalidAxis, "DFT axis {axis} of a rank-{r} input (its last axis is the complex one)"));
    }
    let ax = ax as usize;
    let inverse = n.a.int_or("inverse", 0)? != 0;
    let onesided = n.a.int_or("onesided", 0)? != 0;
    let size = shape[ax].as_int().ok_or_else(|| diag!(Unsupported, "DFT over the symbolic size `{}`", shape[ax]))?;
    let len = match n.input(1) {
        Some(_) => need_known(b, n, 1, "dft_length")?.scalar_value("dft_length")? as i64,
        None if inverse && onesided => 2 * (size - 1),
        None => size,
    };
    if len < 1 {
        return Err(diag!(AxisSizeMismatch, "DFT length {len}"));
    }
    let len = len as usize;
    let half = inverse && onesided;
    let (rows, cols) = match (inverse, onesided) {
        (true, true) => ((size as usize).min(len / 2 + 1), len),
        (false, true) => ((size as usize).min(len), len / 2 + 1),
        _ => ((size as usize).min(len), len),
    };
    let (mut re, mut im) = complex_parts(b, x, "DFT")?;
    let last = r as usize - 2;
    let swap = |b: &mut Builder, v: ValueId| {
        if ax == last {
            Ok(v)
        } else {
            mv(b, Movement::Transpose { a: ax as i64, b: last as i64 }, v)
        }
    };
    re = swap(b, re)?;
    im = im.map(|v| swap(b, v)).transpose()?;
    if rows < size as usize {
        re = cut(b, re, last, 0, rows as i64)?;
        im = im.map(|v| cut(b, v, last, 0, rows as i64)).transpose()?;
    }
    let name = n.node.output.first().map_or("dft", String::as_str).to_string();
    let (yr, yi) = dft_last(b, &name, re, im, len, cols, inverse, half)?;
    let yr = swap(b, yr)?;
    let yi = yi.map(|v| swap(b, v)).transpose()?;
    Ok(vec![Val::Run(join_parts(b, yr, yi)?)])
}

/// `STFT`: frames of `frame_length` (input 3, else the window's size)
/// every `frame_step` (input 1) along axis 1 of `[batch, L, 1 or 2]`,
/// each times `window` (input 2, optional), and the DFT of each
/// (`onesided`, default 1, keeps `frame_length/2 + 1` points); output
/// `[batch, frames, points, 2]`. Bound as [`dft_last`]'s.
///
/// Errors: `Unsupported` for a step or length not known at import, or
/// a symbolic signal length; `AxisSizeMismatch` for frames longer than
/// the signal or a window of another length.
pub(super) fn stft(b: &mut Builder, n: &N) -> DResult<Vec<Val>> {
    let x = b.run(n.required(0)?)?;
    let step = need_known(b, n, 1, "frame_step")?.scalar_value("frame_step")? as i64;
    let window = n.input(2).map(|w| b.run(w)).transpose()?;
    let length = match (n.input(3), window) {
        (Some(_), _) => need_known(b, n, 3, "frame_length")?.scalar_value("frame_length")? as i64,
        (None, Some(w)) => b.shape(w)?[0].as_int().unwrap_or(0),
        (None, None) => return Err(diag!(ArityMismatch, "STFT needs a window or a frame_length")),
    };
    let shape = b.shape(x)?;
    let total = match &shape[..] {
        [_, l, _] => l.as_int().ok_or_else(|| diag!(Unsupported, "STFT over the symbolic length `{l}`"))?,
        _ => {
            let s = crate::tiny::infer::fmt_shape(&shape);
            return Err(diag!(AxisSizeMismatch, "STFT's signal must be [batch, length, 1 or 2], not {s}"));
        }
    };
    if step < 1 || length < 1 || length > total {
        return Err(diag!(AxisSizeMismatch, "STFT frames of {length} every {step} over a signal of {total}"));
    }
    if let Some(w) = window {
        if b.shape(w)?.iter().map(|d| d.as_int()).collect::<Vec<_>>() != [Some(length)] {
            return Err(diag!(AxisSizeMismatch, "STFT's window is not [{length}]"));
        }
    }
    let onesided = n.a.int_or("onesided", 1)? != 0;
    let (re, im) = complex_parts(b, x, "STFT")?;
    let frames = |b: &mut Builder, v: ValueId| -> DResult<ValueId> {
        let f = mv(b, Movement::Unfold { axis: 1, size: Dim::int(length), step: Dim::int(step) }, v)?;
        match window {
            Some(w) => bin(b, BinaryFn::Mul, val(f), val(w)),
            None => Ok(f),
        }
    };
    let re = frames(b, re)?;
    let im = im.map(|v| frames(b, v)).transpose()?;
    let len = length as usize;
    let cols = if onesided { len / 2 + 1 } else { len };
    let name = n.node.output.first().map_or("stft", String::as_str).to_string();
    let (yr, yi) = dft_last(b, &name, re, im, len, cols, false, false)?;
    Ok(vec![Val::Run(join_parts(b, yr, yi)?)])
}

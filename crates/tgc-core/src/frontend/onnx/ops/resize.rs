//! ONNX `Resize` (and the older `Upsample`) as gathers with import-time
//! indices and weights.
//!
//! Resize is separable: each resized axis is resampled on its own, and
//! output position `o` of an axis reads a fixed set of input positions
//! (`taps`) with fixed weights, all computable from the sizes alone. The
//! rules are those of ONNX's reference implementation
//! (`onnx/reference/ops/op_resize.py`, `_interpolate_1d_along_axis`),
//! computed here in f64: the source coordinate of each mode, the
//! neighbours of the edge-padded input, `exclude_outside`, the antialias
//! filters and `tf_crop_and_resize`'s extrapolation. An axis becomes a
//! repeat (`RepeatInterleave`) when every output reads one input
//! `o / factor`, a `take` of one index per output when each reads one
//! input, and otherwise a `take` of `[out, taps]` indices, a product with
//! the `[out, taps]` weights and a sum over the taps; the only error beyond
//! the f64 rules is f32 rounding of the weights and of the sum.

use crate::diag;
use crate::diag::DResult;
use crate::frontend::ir::*;
use crate::sym::Dim;

use super::super::known::{self, Known};
use super::super::proto::{self, code};
use super::super::Builder;
use super::{bin, need_known, norm_axis, val, N};

/// How the weights of one output position are computed from its
/// fractional source offset `ratio` (in `(0, 1]`) and the axis's scale.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Filter {
    /// One of the two neighbours, by ONNX's `nearest_mode`.
    Nearest(Round),
    Linear {
        antialias: bool,
    },
    /// Keys' cubic with coefficient `a` (ONNX's `cubic_coeff_a`).
    Cubic {
        a: f64,
        antialias: bool,
    },
}

/// ONNX's `nearest_mode`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Round {
    PreferFloor,
    PreferCeil,
    Floor,
    Ceil,
}

impl Filter {
    /// How many taps [`Filter::coeffs`] gives at `scale` (as f64: an
    /// antialias filter of a tiny scale is wider than any table).
    fn width(self, scale: f64) -> f64 {
        let reach = match self {
            Filter::Linear { antialias: true } => 1.0,
            Filter::Cubic { antialias: true, .. } => 2.0,
            Filter::Cubic { .. } => return 4.0,
            _ => return 2.0,
        };
        2.0 - 2.0 * ((-reach / scale.min(1.0)).floor() + 1.0)
    }

    /// The weights of the taps (ONNX's `_nearest_coeffs`, `_linear_coeffs`,
    /// `_cubic_coeffs` and their antialias forms, which widen the filter
    /// by `1/scale` when down-scaling and normalise it).
    fn coeffs(self, ratio: f64, scale: f64) -> Vec<f64> {
        match self {
            Filter::Nearest(round) => {
                let ceil = ratio == 1.0
                    || match round {
                        Round::PreferFloor => ratio > 0.5,
                        Round::PreferCeil => ratio >= 0.5,
                        Round::Floor => false,
                        Round::Ceil => true,
                    };
                if ceil {
                    vec![0.0, 1.0]
                } else {
                    vec![1.0, 0.0]
                }
            }
            Filter::Linear { antialias: false } => vec![1.0 - ratio, ratio],
            Filter::Linear { antialias: true } => {
                let scale = scale.min(1.0);
                let start = (-1.0 / scale).floor() as i64 + 1;
                let footprint = 2 - 2 * start;
                let c: Vec<f64> = (start..start + footprint)
                    .map(|i| (1.0 - ((i as f64 - ratio) * scale).abs()).clamp(0.0, 1.0))
                    .collect();
                normalised(c)
            }
            Filter::Cubic { a, antialias: false } => {
                let (r, s) = (ratio, 1.0 - ratio);
                vec![
                    ((a * (r + 1.0) - 5.0 * a) * (r + 1.0) + 8.0 * a) * (r + 1.0) - 4.0 * a,
                    ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0,
                    ((a + 2.0) * s - (a + 3.0)) * s * s + 1.0,
                    ((a * (s + 1.0) - 5.0 * a) * (s + 1.0) + 8.0 * a) * (s + 1.0) - 4.0 * a,
                ]
            }
            Filter::Cubic { a, antialias: true } => {
                let scale = scale.min(1.0);
                let keys = |x: f64| {
                    let x = x.abs();
                    let (x2, x3) = (x * x, x * x * x);
                    if x <= 1.0 {
                        (a + 2.0) * x3 - (a + 3.0) * x2 + 1.0
                    } else if x < 2.0 {
                        a * x3 - 5.0 * a * x2 + 8.0 * a * x - 4.0 * a
                    } else {
                        0.0
                    }
                };
                let start = (-2.0 / scale).floor() as i64 + 1;
                normalised((start..2 - start).map(|i| keys(scale * (i as f64 - ratio))).collect())
            }
        }
    }
}

fn normalised(c: Vec<f64>) -> Vec<f64> {
    let sum: f64 = c.iter().sum();
    c.into_iter().map(|v| v / sum).collect()
}

/// ONNX's `coordinate_transformation_mode`.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Coords {
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    TfHalfPixelForNn,
    /// With the axis's `roi` start and end (fractions of the input).
    TfCropAndResize,
}

/// The taps of one axis: `out` rows of `n` input indices and weights, and
/// which rows take `extrapolation_value` instead.
struct Taps {
    n: usize,
    index: Vec<i64>,
    weight: Vec<f64>,
    outside: Vec<bool>,
}

/// The taps of an axis of `input` elements resized to `out` by `scale`
/// (`roi` is `tf_crop_and_resize`'s start and end).
///
/// Errors: `ResourceExceeded` when the tables would pass
/// [`known::MAX_KNOWN_ELEMENTS`] taps.
fn taps(
    filter: Filter,
    coords: Coords,
    input: i64,
    out: i64,
    scale: f64,
    roi: (f64, f64),
    exclude_outside: bool,
) -> DResult<Taps> {
    let width = scale * input as f64;
    let cells = filter.width(scale) * out as f64;
    if cells > known::MAX_KNOWN_ELEMENTS as f64 {
        return Err(diag!(
            ResourceExceeded,
            "Resize's interpolation table would hold {cells} taps, more than {}",
            known::MAX_KNOWN_ELEMENTS
        ));
    }
    let n = filter.width(scale) as usize;
    let last = (input - 1) as f64;
    let mut t = Taps { n, index: Vec::new(), weight: Vec::new(), outside: Vec::new() };
    for y in 0..out {
        let y = y as f64;
        let x = match coords {
            Coords::AlignCorners if width == 1.0 => 0.0,
            Coords::AlignCorners => y * last / (width - 1.0),
            Coords::Asymmetric => y / scale,
            Coords::TfCropAndResize if width == 1.0 => (roi.1 - roi.0) * last / 2.0 + roi.0 * last,
            Coords::TfCropAndResize => y * (roi.1 - roi.0) * last / (width - 1.0) + roi.0 * last,
            Coords::PytorchHalfPixel if width == 1.0 => -0.5,
            Coords::PytorchHalfPixel | Coords::HalfPixel => (y + 0.5) / scale - 0.5,
            Coords::HalfPixelSymmetric => {
                let offset = input as f64 / 2.0 * (1.0 - out as f64 / width);
                offset + (y + 0.5) / scale - 0.5
            }
            Coords::TfHalfPixelForNn => (y + 0.5) / scale,
        };
        t.outside.push(coords == Coords::TfCropAndResize && (x < 0.0 || x > last));
        // The ratio is in (0, 1]: the left neighbour is preferred.
        let ratio = if x == x.floor() { 1.0 } else { x - x.floor() };
        let mut c = filter.coeffs(ratio, scale);
        // The `n` neighbours of `x` in the input edge-padded by
        // `ceil(n/2)`, ties going to the smaller index.
        let pad = n.div_ceil(2) as f64;
        let (xp, p) = (x + pad, (x + pad).floor());
        let frac = xp - p;
        let half = (n / 2) as i64;
        let offset = if n.is_multiple_of(2) {
            if frac == 0.0 {
                -half
            } else {
                1 - half
            }
        } else if frac <= 0.5 {
            -((n as i64 - 1) / 2)
        } else {
            1 - (n as i64 - 1) / 2
        };
        let first = p as i64 + offset - pad as i64;
        if exclude_outside {
            for (k, w) in c.iter_mut().enumerate() {
                let i = first + k as i64;
                if i < 0 || i >= input {
                    *w = 0.0;
                }
            }
            let sum: f64 = c.iter().sum();
            if sum != 0.0 {
                c.iter_mut().for_each(|w| *w /= sum);
            }
        }
        t.index.extend((0..n as i64).map(|k| (first + k).clamp(0, input - 1)));
        t.weight.extend(c);
    }
    Ok(t)
}

impl Taps {
    /// The single input each output reads, when every row has one weight
    /// 1 and the rest 0 (nearest, or linear at whole positions).
    fn single(&self) -> Option<Vec<i64>> {
        let rows = self.index.chunks(self.n).zip(self.weight.chunks(self.n));
        rows.map(|(i, w)| {
            let one = w.iter().position(|&v| v == 1.0)?;
            w.iter().enumerate().all(|(k, &v)| k == one || v == 0.0).then_some(i[one])
        })
        .collect()
    }
}

/// The options of one `Resize` node.
struct Options {
    filter: Filter,
    coords: Coords,
    exclude_outside: bool,
    extrapolation: f64,
    /// The node's output name, which its tables are named after.
    output: String,
}

impl Options {
    fn name(&self, ax: usize, what: &str) -> String {
        format!("{}_{what}{ax}", self.output)
    }
}

/// `Resize` (opset 10 on) and `Upsample` (opsets 7–9, asymmetric
/// coordinates): each listed axis in turn by [`resize_axis`].
///
/// Errors: `Unsupported` for a mode or attribute value it does not take,
/// scales, sizes or roi computed at run time, or a size it cannot compute;
/// `AxisSizeMismatch` for scales, sizes or roi not matching the axes.
pub(super) fn resize(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let x = b.run(n.required(0)?)?;
    let xs = b.shape(x)?;
    let r = xs.len();
    let op = n.node.op_type.as_str();
    let upsample = op == "Upsample";
    let old = upsample || n.opset < 11;
    let antialias = n.a.int_or("antialias", 0)? != 0;
    let filter = match n.a.string("mode")?.as_deref().unwrap_or("nearest") {
        "nearest" if antialias => return Err(diag!(Unsupported, "{op} mode `nearest` with antialias")),
        "nearest" => Filter::Nearest(match n.a.string("nearest_mode")?.as_deref() {
            _ if old => Round::Floor,
            None | Some("round_prefer_floor") => Round::PreferFloor,
            Some("round_prefer_ceil") => Round::PreferCeil,
            Some("floor") => Round::Floor,
            Some("ceil") => Round::Ceil,
            Some(m) => return Err(diag!(Unsupported, "{op} nearest_mode `{m}`")),
        }),
        "linear" | "bilinear" => Filter::Linear { antialias },
        "cubic" if !old => Filter::Cubic { a: n.a.float_or("cubic_coeff_a", -0.75)?, antialias },
        m => return Err(diag!(Unsupported, "{op} mode `{m}`")),
    };
    let coords = match n.a.string("coordinate_transformation_mode")?.as_deref() {
        _ if old => Coords::Asymmetric,
        None | Some("half_pixel") => Coords::HalfPixel,
        Some("half_pixel_symmetric") => Coords::HalfPixelSymmetric,
        Some("pytorch_half_pixel") => Coords::PytorchHalfPixel,
        Some("align_corners") => Coords::AlignCorners,
        Some("asymmetric") => Coords::Asymmetric,
        Some("tf_half_pixel_for_nn") => Coords::TfHalfPixelForNn,
        Some("tf_crop_and_resize") => Coords::TfCropAndResize,
        Some(m) => return Err(diag!(Unsupported, "{op} coordinate_transformation_mode `{m}`")),
    };
    let opts = Options {
        filter,
        coords,
        exclude_outside: n.a.int_or("exclude_outside", 0)? != 0,
        extrapolation: n.a.float_or("extrapolation_value", 0.0)?,
        output: n.node.output.first().cloned().unwrap_or_default(),
    };
    let axes: Vec<usize> = match n.a.ints("axes")? {
        Some(a) => a.iter().map(|&v| norm_axis(v, r)).collect::<DResult<_>>()?,
        None => (0..r).collect(),
    };
    let (scales_at, sizes_at) = match (upsample, n.opset) {
        (true, o) if o < 9 => (None, None),
        (true, _) | (false, 10) => (Some(1), None),
        _ => (Some(2), Some(3)),
    };
    let present = |k: Option<usize>| k.filter(|&k| n.input(k).is_some());
    let scales = match present(scales_at) {
        Some(k) => Some(need_known(b, n, k, "scales")?.float_values("scales")?).filter(|s| !s.is_empty()),
        None if upsample => n.a.floats("scales")?,
        None => None,
    };
    let sizes = match present(sizes_at) {
        Some(k) => Some(need_known(b, n, k, "sizes")?.int_values("sizes")?),
        None => None,
    };
    let roi = match present((!old).then_some(1)) {
        Some(k) if coords == Coords::TfCropAndResize => need_known(b, n, k, "roi")?.float_values("roi")?,
        _ => Vec::new(),
    };
    let count = axes.len();
    if !roi.is_empty() && roi.len() != 2 * count {
        return Err(diag!(AxisSizeMismatch, "{op} has {} roi values for {count} axes", roi.len()));
    }
    if coords == Coords::TfCropAndResize && roi.is_empty() {
        return Err(diag!(SyntaxError, "{op} with tf_crop_and_resize needs roi"));
    }
    let roi_of = |i: usize| if roi.is_empty() { (0.0, 1.0) } else { (roi[i], roi[count + i]) };
    // The (scale, output size) of each listed axis.
    let plan: Vec<(f64, Dim)> = match (scales, sizes) {
        (Some(s), _) => {
            if s.len() != count {
                return Err(diag!(AxisSizeMismatch, "{op} has {} scales for {count} axes", s.len()));
            }
            s.iter()
                .zip(&axes)
                .map(|(&f, &ax)| {
                    if !(f > 0.0 && f.is_finite()) {
                        return Err(diag!(Unsupported, "{op} by the scale {f}"));
                    }
                    let out = match xs[ax].as_int() {
                        Some(d) => Dim::int((f * d as f64) as i64),
                        None if f == f.trunc() => &xs[ax] * &Dim::int(f as i64),
                        None => return Err(diag!(Unsupported, "{op} of the symbolic size `{}` by {f}", xs[ax])),
                    };
                    Ok((f, out))
                })
                .collect::<DResult<_>>()?
        }
        (None, Some(sizes)) => {
            if sizes.len() != count {
                return Err(diag!(AxisSizeMismatch, "{op} has {} sizes for {count} axes", sizes.len()));
            }
            let mut ins = Vec::new();
            for &ax in &axes {
                let d = xs[ax].as_int().filter(|&d| d > 0).ok_or_else(|| {
                    diag!(Unsupported, "{op} to given sizes of the symbolic or empty size `{}`", xs[ax])
                })?;
                ins.push(d);
            }
            let mut plan: Vec<(f64, Dim)> =
                sizes.iter().zip(&ins).map(|(&s, &d)| (s as f64 / d as f64, Dim::int(s))).collect();
            match n.a.string("keep_aspect_ratio_policy")?.as_deref().unwrap_or("stretch") {
                "stretch" => {}
                p @ ("not_larger" | "not_smaller") => {
                    let fs = plan.iter().map(|(f, _)| *f);
                    let f = if p == "not_larger" { fs.fold(f64::INFINITY, f64::min) } else { fs.fold(0.0, f64::max) };
                    plan = ins.iter().map(|&d| (f, Dim::int((f * d as f64 + 0.5) as i64))).collect();
                }
                p => return Err(diag!(Unsupported, "{op} keep_aspect_ratio_policy `{p}`")),
            }
            plan
        }
        (None, None) => return Err(diag!(SyntaxError, "{op} needs scales or sizes")),
    };
    let mut v = x;
    for (i, (&ax, (scale, out))) in axes.iter().zip(plan).enumerate() {
        v = resize_axis(b, v, ax, scale, &out, roi_of(i), &opts)?;
    }
    if v == x {
        v = b.emit(FOp::Movement(Movement::Reshape { shape: xs }), vec![val(x)])?;
    }
    Ok(v)
}

/// Resizes axis `ax` of `x` to `out` elements by `scale`.
fn resize_axis(
    b: &mut Builder,
    x: ValueId,
    ax: usize,
    scale: f64,
    out: &Dim,
    roi: (f64, f64),
    o: &Options,
) -> DResult<ValueId> {
    let xs = b.shape(x)?;
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs());
    // ONNX's reference skips an axis that stays as it is.
    if close(scale, 1.0) && *out == xs[ax] && close(roi.0, 0.0) && close(roi.1, 1.0) {
        return Ok(x);
    }
    let (Some(input), Some(out)) = (xs[ax].as_int(), out.as_int()) else {
        return symbolic_repeat(b, x, ax, scale, o);
    };
    if input < 1 || out < 1 {
        return Err(diag!(Unsupported, "Resize of an axis of size {input} to {out}"));
    }
    let t = taps(o.filter, o.coords, input, out, scale, roi, o.exclude_outside)?;
    let dtype = b.dtype(x)?;
    let mut y = match t.single() {
        Some(idx) if out % input == 0 && idx.iter().enumerate().all(|(k, &i)| i == k as i64 / (out / input)) => {
            let m = Movement::RepeatInterleave { repeats: Dim::int(out / input), axis: ax as i64 };
            b.emit(FOp::Movement(m), vec![val(x)])?
        }
        Some(idx) => {
            let i =
                table(b, idx.iter().map(|&i| i as f64).collect(), vec![idx.len()], code::INT32, &o.name(ax, "index"))?;
            b.emit(FOp::Take { axis: ax as i64 }, vec![val(x), val(i)])?
        }
        None => {
            if !dtype.is_float() {
                return Err(diag!(Unsupported, "Resize by interpolation of a tensor of type {dtype}"));
            }
            let wcode = proto::code_of(dtype);
            let index = t.index.iter().map(|&i| i as f64).collect();
            let i = table(b, index, vec![out as usize, t.n], code::INT32, &o.name(ax, "index"))?;
            let g = b.emit(FOp::Take { axis: ax as i64 }, vec![val(x), val(i)])?;
            let mut wshape = vec![out as usize, t.n];
            wshape.extend(std::iter::repeat_n(1, xs.len() - ax - 1));
            let w = table(b, t.weight, wshape, wcode, &o.name(ax, "weight"))?;
            let p = bin(b, BinaryFn::Mul, val(g), val(w))?;
            let sum = FOp::Reduce {
                op: ReduceFn::Sum,
                axes: Some(vec![AxisRef::Index(ax as i64 + 1)]),
                keepdim: false,
                acc: None,
            };
            let s = b.emit(sum, vec![val(p)])?;
            if b.dtype(s)? == dtype {
                s
            } else {
                b.emit(FOp::Cast { to: dtype }, vec![val(s)])?
            }
        }
    };
    if t.outside.iter().any(|&o| o) {
        let mut mshape = vec![out as usize];
        mshape.extend(std::iter::repeat_n(1, xs.len() - ax - 1));
        let flags = t.outside.iter().map(|&f| f as u8 as f64).collect();
        let m = table(b, flags, mshape, code::BOOL, &o.name(ax, "outside"))?;
        let e = b.lit_for(o.extrapolation, dtype);
        y = b.emit(FOp::Where, vec![val(m), e, val(y)])?;
    }
    Ok(y)
}

/// A symbolic axis size: only a nearest resize by a whole factor under the
/// modes where every output `o` reads input `o / factor` (a repeat, for
/// every size; checked against the tap rules for sizes 1 to 8).
fn symbolic_repeat(b: &mut Builder, x: ValueId, ax: usize, scale: f64, o: &Options) -> DResult<ValueId> {
    let repeat = matches!(
        (o.coords, o.filter),
        (Coords::Asymmetric | Coords::TfHalfPixelForNn, Filter::Nearest(Round::Floor))
            | (Coords::HalfPixel | Coords::PytorchHalfPixel, Filter::Nearest(Round::PreferFloor | Round::PreferCeil))
    );
    let xs = b.shape(x)?;
    if !repeat || scale != scale.trunc() || scale < 1.0 {
        return Err(diag!(
            Unsupported,
            "Resize of the symbolic size `{}` by {scale} (only a nearest repeat by a whole factor)",
            xs[ax]
        ));
    }
    let m = Movement::RepeatInterleave { repeats: Dim::int(scale as i64), axis: ax as i64 };
    b.emit(FOp::Movement(m), vec![val(x)])
}

/// A run-time tensor of `shape` holding `values` as ONNX type `code`,
/// named `name`.
fn table(b: &mut Builder, values: Vec<f64>, shape: Vec<usize>, code: i32, name: &str) -> DResult<ValueId> {
    b.materialize(&Known { code, shape, data: super::super::kdata_of(code, values) }, name)
}

/// `CenterCropPad`: each listed axis cropped or zero-padded to its size in
/// `shape`, centred (an odd difference puts the extra element at the end).
pub(super) fn center_crop_pad(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let x = b.run(n.required(0)?)?;
    let xs = b.shape(x)?;
    let r = xs.len();
    let want = need_known(b, n, 1, "shape")?.int_values("CenterCropPad's shape")?;
    let axes: Vec<usize> = match n.a.ints("axes")? {
        Some(a) => a.iter().map(|&v| norm_axis(v, r)).collect::<DResult<_>>()?,
        None => (0..r).collect(),
    };
    if want.len() != axes.len() {
        return Err(diag!(AxisSizeMismatch, "CenterCropPad has {} sizes for {} axes", want.len(), axes.len()));
    }
    let mut crop: Vec<(Dim, Dim)> = xs.iter().map(|d| (Dim::int(0), d.clone())).collect();
    let mut pad = vec![(Dim::int(0), Dim::int(0)); r];
    for (&ax, &w) in axes.iter().zip(&want) {
        let d = xs[ax].as_int().ok_or_else(|| diag!(Unsupported, "CenterCropPad of the symbolic size `{}`", xs[ax]))?;
        if w < 0 {
            return Err(diag!(AxisSizeMismatch, "CenterCropPad to the size {w}"));
        }
        if w < d {
            let lo = (d - w) / 2;
            crop[ax] = (Dim::int(lo), Dim::int(lo + w));
        } else {
            let lo = (w - d) / 2;
            pad[ax] = (Dim::int(lo), Dim::int(w - d - lo));
        }
    }
    let mut v = b.emit(FOp::Movement(Movement::Shrink { bounds: crop }), vec![val(x)])?;
    if pad.iter().any(|(lo, hi)| lo.as_int() != Some(0) || hi.as_int() != Some(0)) {
        let m = Movement::Pad { pads: pad, value: 0.0, mode: PadMode::Constant };
        v = b.emit(FOp::Movement(m), vec![val(v)])?;
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The modes [`symbolic_repeat`] takes give a repeat by the tap rules
    /// (and the others do not), for whole factors 1 to 5 and sizes 1 to 8.
    #[test]
    fn symbolic_repeat_modes_are_repeats() {
        use Coords::*;
        use Round::*;
        let taken = [
            (Asymmetric, Floor),
            (TfHalfPixelForNn, Floor),
            (HalfPixel, PreferFloor),
            (HalfPixel, PreferCeil),
            (PytorchHalfPixel, PreferFloor),
            (PytorchHalfPixel, PreferCeil),
        ];
        for coords in [HalfPixel, PytorchHalfPixel, AlignCorners, Asymmetric, TfHalfPixelForNn] {
            for round in [PreferFloor, PreferCeil, Floor, Ceil] {
                let repeats = (1..=5).all(|f| {
                    (1..=8).all(|d| {
                        let t = taps(Filter::Nearest(round), coords, d, d * f, f as f64, (0.0, 1.0), false).unwrap();
                        t.single() == Some((0..d * f).map(|o| o / f).collect())
                    })
                });
                assert_eq!(repeats, taken.contains(&(coords, round)), "{coords:?} {round:?}");
            }
        }
    }

    /// [`Filter::width`] is the number of coefficients each filter gives.
    #[test]
    fn filter_widths_match_their_coefficients() {
        for antialias in [false, true] {
            for f in [Filter::Nearest(Round::Floor), Filter::Linear { antialias }, Filter::Cubic { a: -0.5, antialias }]
            {
                for scale in [0.1, 0.3, 0.6, 1.0, 2.5] {
                    assert_eq!(f.width(scale), f.coeffs(0.4, scale).len() as f64, "{f:?} at {scale}");
                }
            }
        }
    }
}

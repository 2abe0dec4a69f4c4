//! ONNX operators that move values between image positions and columns
//! or sample at run-time places: `Col2Im`, `AffineGrid`, `GridSample`,
//! `DeformConv`.

use crate::diag;
use crate::diag::DResult;
use crate::frontend::ir::*;
use crate::sym::Dim;
use crate::DType;

use super::super::known::{self, Known};
use super::super::proto;
use super::super::Builder;
use super::{need_known, rounding, val, window, N};

/// `Col2Im`: columns `[N, C·Πblock, L]` summed back into images `[N, C,
/// *image_shape]` (the Frontend IR's `col2im`).
pub(super) fn col2im(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let x = b.run(n.required(0)?)?;
    let image: Vec<Dim> = need_known(b, n, 1, "image_shape")?.dims("Col2Im's image_shape")?.to_vec();
    let kernel: Vec<Dim> = need_known(b, n, 2, "block_shape")?.dims("Col2Im's block_shape")?.to_vec();
    if image.len() != kernel.len() {
        return Err(diag!(AxisSizeMismatch, "Col2Im has {} image sizes and {} block sizes", image.len(), kernel.len()));
    }
    let window = window(n, &image, &kernel, false)?;
    b.emit(FOp::Col2Im { output: image, kernel, window }, vec![val(x)])
}

/// `AffineGrid`: the sampling grid `[N, *S, r]` of the affine maps `theta`
/// `[N, r, r + 1]` (`r` = 2 or 3 spatial axes of `size` `[N, C, *S]`), as a
/// `matmul` of `theta` by the known homogeneous coordinates `[r + 1, ΠS]`
/// of the output positions (x first; `align_corners` puts −1 and 1 at the
/// centres of the edge elements, else at their outer edges).
pub(super) fn affine_grid(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let theta = b.run(n.required(0)?)?;
    let size = need_known(b, n, 1, "size")?.int_values("AffineGrid's size")?;
    let align = n.a.int_or("align_corners", 0)? != 0;
    let spatial: Vec<i64> = size.get(2..).map(<[i64]>::to_vec).unwrap_or_default();
    let r = spatial.len();
    if !(2..=3).contains(&r) || spatial.iter().any(|&d| d < 1) {
        return Err(diag!(AxisSizeMismatch, "AffineGrid's size {size:?} is not [N, C, *2 or 3 positive sizes]"));
    }
    let count: i64 = spatial.iter().product();
    known::check_size(count as usize * (r + 1), "AffineGrid's base grid")?;
    // Coordinate `i` of `d` positions in [-1, 1].
    let at = |i: i64, d: i64| match (align, d) {
        (true, 1) => -1.0,
        (true, _) => -1.0 + 2.0 * i as f64 / (d - 1) as f64,
        (false, _) => -1.0 + (2 * i + 1) as f64 / d as f64,
    };
    // Row k of the base is the coordinate along spatial axis r-1-k (x
    // first), then a row of ones.
    let mut base = Vec::with_capacity(count as usize * (r + 1));
    for k in 0..r {
        let ax = r - 1 - k;
        let inner: i64 = spatial[ax + 1..].iter().product();
        base.extend((0..count).map(|p| at(p / inner % spatial[ax], spatial[ax])));
    }
    base.extend(std::iter::repeat_n(1.0, count as usize));
    let c = proto::code_of(b.dtype(theta)?);
    let known = Known { code: c, shape: vec![r + 1, count as usize], data: super::super::kdata_of(c, base) };
    let name = format!("{}_base", n.node.output.first().map_or("affine_grid", String::as_str));
    let g = b.materialize(&known, &name)?;
    let m = b.emit(FOp::Matmul, vec![val(theta), val(g)])?;
    let t = b.emit(FOp::Movement(Movement::Permute { perm: vec![0, 2, 1] }), vec![val(m)])?;
    let mut shape = vec![b.shape(theta)?[0].clone()];
    shape.extend(spatial.iter().map(|&d| Dim::int(d)));
    shape.push(Dim::int(r as i64));
    b.emit(FOp::Movement(Movement::Reshape { shape }), vec![val(t)])
}

/// Coordinates beyond this magnitude (and NaN, taken as its negative)
/// are held to it before any cast to i32: every such coordinate is far
/// outside any input, and the casts stay in range.
const FAR: f64 = (1 << 23) as f64;

/// ONNX `GridSample`'s `padding_mode`.
#[derive(Clone, Copy, PartialEq)]
enum Padding {
    Zeros,
    Border,
    Reflection,
}

/// ONNX `GridSample`'s `mode`.
#[derive(Clone, Copy, PartialEq)]
enum Sampling {
    Nearest,
    Linear,
    Cubic,
}

/// Run-time arithmetic on float tensors for [`grid_sample`].
struct Ops<'b, 'm> {
    b: &'b mut Builder<'m>,
}

impl Ops<'_, '_> {
    fn lit(&self, v: f64) -> Operand {
        self.b.lit(v, LitKind::Float)
    }

    fn bin(&mut self, f: BinaryFn, x: Operand, y: Operand) -> DResult<ValueId> {
        self.b.emit(FOp::Binary(f), vec![x, y])
    }

    fn where_(&mut self, c: ValueId, x: Operand, y: Operand) -> DResult<ValueId> {
        self.b.emit(FOp::Where, vec![val(c), x, y])
    }

    /// `x` held to `[lo, hi]`, NaN to `lo` (comparisons with NaN are false).
    fn hold(&mut self, x: ValueId, lo: f64, hi: f64) -> DResult<ValueId> {
        let ge = self.bin(BinaryFn::Ge, val(x), self.lit(lo))?;
        let x = self.where_(ge, val(x), self.lit(lo))?;
        let le = self.bin(BinaryFn::Le, val(x), self.lit(hi))?;
        self.where_(le, val(x), self.lit(hi))
    }

    /// `floor(x)` of `x` in `[-FAR, FAR]` ([`rounding::floor_small`]).
    fn floor(&mut self, x: ValueId) -> DResult<ValueId> {
        rounding::floor_small(self.b, x)
    }

    /// Whether the whole number `n` is even.
    fn even(&mut self, n: ValueId) -> DResult<ValueId> {
        let h = self.bin(BinaryFn::Mul, val(n), self.lit(0.5))?;
        let f = self.floor(h)?;
        self.bin(BinaryFn::Eq, val(f), val(h))
    }

    /// NumPy's `rint` (halves to even) of `x` in `[-FAR, FAR]`
    /// ([`rounding::half_even_small`]).
    fn rint(&mut self, x: ValueId) -> DResult<ValueId> {
        rounding::half_even_small(self.b, x)
    }

    /// ONNX's `_gs_reflect`: `x` outside `[lo, hi]` reflected by the near
    /// border until inside (`hi > lo`).
    fn reflect(&mut self, x: ValueId, lo: f64, hi: f64) -> DResult<ValueId> {
        let range = hi - lo;
        // Below: dx = lo - x; above: dx = x - hi; n = floor(dx / range),
        // r = dx - n·range; an even n lands at the near border plus r.
        let side = |o: &mut Self, below: bool| -> DResult<ValueId> {
            let dx =
                if below { o.bin(BinaryFn::Sub, o.lit(lo), val(x))? } else { o.bin(BinaryFn::Sub, val(x), o.lit(hi))? };
            let q = o.bin(BinaryFn::Div, val(dx), o.lit(range))?;
            let k = o.floor(q)?;
            let kr = o.bin(BinaryFn::Mul, val(k), o.lit(range))?;
            let r = o.bin(BinaryFn::Sub, val(dx), val(kr))?;
            let from_lo = o.bin(BinaryFn::Add, o.lit(lo), val(r))?;
            let from_hi = o.bin(BinaryFn::Sub, o.lit(hi), val(r))?;
            let even = o.even(k)?;
            let (near, far) = if below { (from_lo, from_hi) } else { (from_hi, from_lo) };
            o.where_(even, val(near), val(far))
        };
        let below = side(self, true)?;
        let above = side(self, false)?;
        let is_below = self.bin(BinaryFn::Lt, val(x), self.lit(lo))?;
        let is_above = self.bin(BinaryFn::Gt, val(x), self.lit(hi))?;
        let y = self.where_(is_above, val(above), val(x))?;
        self.where_(is_below, val(below), val(y))
    }
}

/// The taps of one spatial axis: per tap, the input index (i32, in range)
/// and the weight (`None` for 1), each `[N, 1, ΠO]`.
type AxisTaps = Vec<(ValueId, Option<ValueId>)>;

/// The taps along one spatial axis of `len` elements, from its grid
/// component `g` (ONNX's `GridSample`: denormalise, then [`pixel_taps`]).
fn axis_taps(o: &mut Ops, g: ValueId, len: i64, mode: Sampling, pad: Padding, align: bool) -> DResult<AxisTaps> {
    let l = len as f64;
    let t = o.bin(BinaryFn::Add, val(g), o.lit(1.0))?;
    let x = if align {
        let h = o.bin(BinaryFn::Div, val(t), o.lit(2.0))?;
        o.bin(BinaryFn::Mul, val(h), o.lit(l - 1.0))?
    } else {
        let s = o.bin(BinaryFn::Mul, val(t), o.lit(l))?;
        let s = o.bin(BinaryFn::Sub, val(s), o.lit(1.0))?;
        o.bin(BinaryFn::Div, val(s), o.lit(2.0))?
    };
    pixel_taps(o, x, len, mode, pad, align)
}

/// The taps along one spatial axis of `len` elements at the pixel
/// coordinate `x` (ONNX's `GridSample` after denormalising: round for
/// nearest, fold into the borders by `padding_mode`, then the neighbours
/// and their weights, each neighbour index folded again).
fn pixel_taps(o: &mut Ops, x: ValueId, len: i64, mode: Sampling, pad: Padding, align: bool) -> DResult<AxisTaps> {
    let l = len as f64;
    let mut x = o.hold(x, -FAR, FAR)?;
    if mode == Sampling::Nearest {
        x = o.rint(x)?;
    }
    let (lo, hi) = if align { (0.0, l - 1.0) } else { (-0.5, l - 0.5) };
    // Reflection of a single element (align_corners) is that element.
    let reflect = pad == Padding::Reflection && hi > lo;
    match pad {
        Padding::Border => {
            let c = o.hold(x, 0.0, l - 1.0)?;
            let below = o.bin(BinaryFn::Lt, val(x), o.lit(lo))?;
            let above = o.bin(BinaryFn::Gt, val(x), o.lit(hi))?;
            let y = o.where_(above, val(c), val(x))?;
            x = o.where_(below, val(c), val(y))?;
        }
        Padding::Reflection if reflect => x = o.reflect(x, lo, hi)?,
        _ => {}
    }
    let taps: Vec<(ValueId, Option<ValueId>)> = match mode {
        Sampling::Nearest => vec![(x, None)],
        Sampling::Linear | Sampling::Cubic => {
            let x0 = o.floor(x)?;
            let f = o.bin(BinaryFn::Sub, val(x), val(x0))?;
            let weights = if mode == Sampling::Linear {
                vec![o.bin(BinaryFn::Sub, o.lit(1.0), val(f))?, f]
            } else {
                cubic_weights(o, f)?
            };
            let first = if mode == Sampling::Linear { 0.0 } else { -1.0 };
            let mut taps = Vec::new();
            for (k, w) in weights.into_iter().enumerate() {
                let i = o.bin(BinaryFn::Add, val(x0), o.lit(first + k as f64))?;
                taps.push((i, Some(w)));
            }
            taps
        }
    };
    let mut out = Vec::new();
    for (i, w) in taps {
        let (i, w) = match pad {
            Padding::Zeros => {
                // Weight 0 outside the input (a nearest tap gets one).
                let inside_lo = o.bin(BinaryFn::Ge, val(i), o.lit(0.0))?;
                let inside_hi = o.bin(BinaryFn::Le, val(i), o.lit(l - 1.0))?;
                let w1 = match w {
                    Some(w) => val(w),
                    None => o.lit(1.0),
                };
                let w2 = o.where_(inside_lo, w1, o.lit(0.0))?;
                (i, Some(o.where_(inside_hi, val(w2), o.lit(0.0))?))
            }
            Padding::Reflection if reflect => (o.reflect(i, lo, hi)?, w),
            _ => (i, w),
        };
        let i = o.hold(i, 0.0, l - 1.0)?;
        let i = o.b.emit(FOp::Cast { to: DType::I32 }, vec![val(i)])?;
        out.push((i, w));
    }
    Ok(out)
}

/// Keys' cubic weights (a = −0.75) of the four neighbours at offsets −1,
/// 0, 1, 2 from the floor, for the fraction `f` (ONNX's
/// `_gs_get_cubic_coeffs`).
fn cubic_weights(o: &mut Ops, f: ValueId) -> DResult<Vec<ValueId>> {
    let a = -0.75;
    // d = f + 1, f, 1 − f, 2 − f; |d| ≤ 1 takes the inner piece.
    let mut out = Vec::new();
    for k in 0..4 {
        let d = match k {
            0 => o.bin(BinaryFn::Add, val(f), o.lit(1.0))?,
            1 => f,
            2 => o.bin(BinaryFn::Sub, o.lit(1.0), val(f))?,
            _ => o.bin(BinaryFn::Sub, o.lit(2.0), val(f))?,
        };
        let w = if k == 1 || k == 2 {
            // ((a + 2)·d − (a + 3))·d·d + 1
            let p = o.bin(BinaryFn::Mul, val(d), o.lit(a + 2.0))?;
            let p = o.bin(BinaryFn::Sub, val(p), o.lit(a + 3.0))?;
            let p = o.bin(BinaryFn::Mul, val(p), val(d))?;
            let p = o.bin(BinaryFn::Mul, val(p), val(d))?;
            o.bin(BinaryFn::Add, val(p), o.lit(1.0))?
        } else {
            // ((a·d − 5a)·d + 8a)·d − 4a
            let p = o.bin(BinaryFn::Mul, val(d), o.lit(a))?;
            let p = o.bin(BinaryFn::Sub, val(p), o.lit(5.0 * a))?;
            let p = o.bin(BinaryFn::Mul, val(p), val(d))?;
            let p = o.bin(BinaryFn::Add, val(p), o.lit(8.0 * a))?;
            let p = o.bin(BinaryFn::Mul, val(p), val(d))?;
            o.bin(BinaryFn::Sub, val(p), o.lit(4.0 * a))?
        };
        out.push(w);
    }
    Ok(out)
}

/// `GridSample`: `X` `[N, C, *S]` (2 or 3 spatial axes; cubic only 2)
/// sampled at the run-time grid `[N, *O, r]` (x first). Per spatial axis
/// the taps and weights are computed at run time from the grid
/// ([`axis_taps`]); every combination of taps is a `gather` of the
/// flattened input at the combined index, times the product of the
/// weights, summed in tap order. Coordinates are computed in the grid's
/// type; a NaN coordinate reads as one far below the input.
pub(super) fn grid_sample(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let x = b.run(n.required(0)?)?;
    let grid = b.run(n.required(1)?)?;
    let (xs, gs) = (b.shape(x)?, b.shape(grid)?);
    let r = xs.len().saturating_sub(2);
    if !(2..=3).contains(&r) || gs.len() != r + 2 || gs[r + 1].as_int() != Some(r as i64) {
        return Err(diag!(
            AxisSizeMismatch,
            "GridSample needs X [N, C, 2 or 3 sizes] and a grid [N, *out, that many], got ranks {} and {}",
            xs.len(),
            gs.len()
        ));
    }
    let mode = match n.a.string("mode")?.as_deref() {
        None if n.opset < 20 => Sampling::Linear,
        None | Some("linear" | "bilinear") => Sampling::Linear,
        Some("nearest") => Sampling::Nearest,
        Some("cubic" | "bicubic") if r == 2 => Sampling::Cubic,
        Some(m) => return Err(diag!(Unsupported, "GridSample mode `{m}` over {r} spatial axes")),
    };
    let pad = match n.a.string("padding_mode")?.as_deref().unwrap_or("zeros") {
        "zeros" => Padding::Zeros,
        "border" => Padding::Border,
        "reflection" => Padding::Reflection,
        p => return Err(diag!(Unsupported, "GridSample padding_mode `{p}`")),
    };
    let align = n.a.int_or("align_corners", 0)? != 0;
    let dtype = b.dtype(x)?;
    if !dtype.is_float() || !b.dtype(grid)?.is_float() {
        return Err(diag!(Unsupported, "GridSample of a non-float tensor or grid"));
    }
    let sizes: Vec<i64> = xs[2..]
        .iter()
        .map(|d| d.as_int().ok_or_else(|| diag!(Unsupported, "GridSample of the symbolic size `{d}`")))
        .collect::<DResult<_>>()?;
    let (batch, chans) = (xs[0].clone(), xs[1].clone());
    let outs: Vec<Dim> = gs[1..=r].to_vec();
    let points = Dim::product(&outs);
    let mut o = Ops { b };
    let mut per_axis = Vec::new();
    for (a, &len) in sizes.iter().enumerate() {
        // Spatial axis a is grid component r − 1 − a.
        let comp = (r - 1 - a) as i64;
        let mut bounds: Vec<(Dim, Dim)> = gs.iter().map(|d| (Dim::int(0), d.clone())).collect();
        bounds[r + 1] = (Dim::int(comp), Dim::int(comp + 1));
        let g = o.b.emit(FOp::Movement(Movement::Shrink { bounds }), vec![val(grid)])?;
        let g = o.b.emit(
            FOp::Movement(Movement::Reshape { shape: vec![batch.clone(), Dim::int(1), points.clone()] }),
            vec![val(g)],
        )?;
        per_axis.push(axis_taps(&mut o, g, len, mode, pad, align)?);
    }
    let flat = o.b.emit(
        FOp::Movement(Movement::Reshape {
            shape: vec![batch.clone(), chans.clone(), Dim::int(sizes.iter().product())],
        }),
        vec![val(x)],
    )?;
    let shape = vec![batch.clone(), chans.clone(), points];
    let sum = gather_taps(&mut o, flat, &per_axis, &sizes, shape, dtype)?;
    let mut shape = vec![batch, chans];
    shape.extend(outs);
    o.b.emit(FOp::Movement(Movement::Reshape { shape }), vec![val(sum)])
}

/// The sum over every combination of one tap per spatial axis (axis 0
/// slowest) of the product of their weights and `flat` (the input, its
/// spatial axes flattened into the last, of sizes `sizes`) gathered along
/// its last axis at the combined index, broadcast to `shape`.
fn gather_taps(
    o: &mut Ops,
    flat: ValueId,
    per_axis: &[AxisTaps],
    sizes: &[i64],
    shape: Vec<Dim>,
    dtype: DType,
) -> DResult<ValueId> {
    let axis = shape.len() as i64 - 1;
    // Every combination of one tap per axis, axis 0 slowest.
    let mut combos: Vec<(Option<ValueId>, Option<ValueId>)> = vec![(None, None)];
    for (a, taps) in per_axis.iter().enumerate() {
        let stride: i64 = sizes[a + 1..].iter().product();
        let mut next = Vec::new();
        for &(idx, w) in &combos {
            for &(i, tw) in taps {
                let i =
                    if stride == 1 { i } else { o.bin(BinaryFn::Mul, val(i), o.b.lit(stride as f64, LitKind::Int))? };
                let i = match idx {
                    Some(p) => o.bin(BinaryFn::Add, val(p), val(i))?,
                    None => i,
                };
                let w = match (w, tw) {
                    (Some(p), Some(q)) => Some(o.bin(BinaryFn::Mul, val(p), val(q))?),
                    (p, q) => p.or(q),
                };
                next.push((Some(i), w));
            }
        }
        combos = next;
    }
    let mut sum: Option<ValueId> = None;
    for (idx, w) in combos {
        let idx = idx.ok_or_else(|| diag!(Internal, "a sampling without taps"))?;
        let idx = o.b.emit(FOp::Movement(Movement::Expand { shape: shape.clone() }), vec![val(idx)])?;
        let mut v = o.b.emit(FOp::Gather { axis }, vec![val(flat), val(idx)])?;
        if let Some(w) = w {
            let w = if o.b.dtype(w)? == dtype { w } else { o.b.emit(FOp::Cast { to: dtype }, vec![val(w)])? };
            v = o.bin(BinaryFn::Mul, val(v), val(w))?;
        }
        sum = Some(match sum {
            Some(s) => o.bin(BinaryFn::Add, val(s), val(v))?,
            None => v,
        });
    }
    sum.ok_or_else(|| diag!(Internal, "a sampling without taps"))
}

/// `DeformConv` over two spatial axes: each kernel tap of each output
/// position reads the input at its place moved by the run-time `offset`
/// (bilinear, zeros outside: ONNX's reference samples with `GridSample`),
/// scaled by `mask` when given; the sampled columns `[N, C·ΠK, ΠO]` then
/// meet the weight in one grouped `matmul`, and the bias is added.
///
/// Errors: `Unsupported` for another number of spatial axes or a symbolic
/// size other than the batch; `AxisSizeMismatch` for channels, groups or
/// offsets that do not fit together.
pub(super) fn deform_conv(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let x = b.run(n.required(0)?)?;
    let w = b.run(n.required(1)?)?;
    let off = b.run(n.required(2)?)?;
    let (xs, ws, os) = (b.shape(x)?, b.shape(w)?, b.shape(off)?);
    if xs.len() != 4 || ws.len() != 4 || os.len() != 4 {
        return Err(diag!(
            Unsupported,
            "DeformConv over other than 2 spatial axes (ranks {}, {}, {})",
            xs.len(),
            ws.len(),
            os.len()
        ));
    }
    let int = |d: &Dim| d.as_int().ok_or_else(|| diag!(Unsupported, "DeformConv over the symbolic size `{d}`"));
    let (c, h, wd) = (int(&xs[1])?, int(&xs[2])?, int(&xs[3])?);
    let (oc, cg, kh, kw) = (int(&ws[0])?, int(&ws[1])?, int(&ws[2])?, int(&ws[3])?);
    let (oh, ow) = (int(&os[2])?, int(&os[3])?);
    let group = n.a.int_or("group", 1)?;
    let og = n.a.int_or("offset_group", 1)?;
    let k = kh * kw;
    let fits = group >= 1 && og >= 1 && cg * group == c && oc % group == 0 && c % og == 0;
    if !fits || int(&os[1])? != og * k * 2 || n.a.ints("kernel_shape")?.is_some_and(|s| s != [kh, kw]) {
        return Err(diag!(
            AxisSizeMismatch,
            "DeformConv of {c} channels, a weight [{oc}, {cg}, {kh}, {kw}], group {group}, offset_group {og} and \
             offsets of {} channels",
            os[1]
        ));
    }
    let win = window(n, &xs[2..], &ws[2..], false)?;
    let at = |v: &Dim| v.as_int().unwrap_or(0);
    let batch = xs[0].clone();
    let p = oh * ow;
    let dtype = b.dtype(x)?;
    let d = |v: i64| Dim::int(v);
    let reshape =
        |b: &mut Builder, v: ValueId, shape: Vec<Dim>| b.emit(FOp::Movement(Movement::Reshape { shape }), vec![val(v)]);
    let off = reshape(b, off, vec![batch.clone(), d(og), d(k), d(2), d(p)])?;
    let code = proto::code_of(b.dtype(off)?);
    let mut per_axis = Vec::new();
    for axis in 0..2 {
        let mut bounds: Vec<(Dim, Dim)> =
            [batch.clone(), d(og), d(k), d(2), d(p)].into_iter().map(|e| (d(0), e)).collect();
        bounds[3] = (d(axis as i64), d(axis as i64 + 1));
        let comp = b.emit(FOp::Movement(Movement::Shrink { bounds }), vec![val(off)])?;
        let comp = reshape(b, comp, vec![batch.clone(), d(og), d(1), d(k * p)])?;
        // The tap's place before the offset: −pad + stride·out + dilation·tap.
        let (stride, dil, pad) = (at(&win.stride[axis]), at(&win.dilation[axis]), at(&win.pad[axis].0));
        let base: Vec<f64> = (0..k * p)
            .map(|e| {
                let (tap, out) = (e / p, e % p);
                let (t, o) = if axis == 0 { (tap / kw, out / ow) } else { (tap % kw, out % ow) };
                (-pad + stride * o + dil * t) as f64
            })
            .collect();
        let base = b.materialize(
            &Known { code, shape: vec![(k * p) as usize], data: super::super::kdata_of(code, base) },
            &format!("{}_place{axis}", n.node.output.first().map_or("deform_conv", String::as_str)),
        )?;
        let at_place = b.emit(FOp::Binary(BinaryFn::Add), vec![val(comp), val(base)])?;
        let len = if axis == 0 { h } else { wd };
        per_axis.push(pixel_taps(&mut Ops { b: &mut *b }, at_place, len, Sampling::Linear, Padding::Zeros, true)?);
    }
    let flat = reshape(b, x, vec![batch.clone(), d(og), d(c / og), d(h * wd)])?;
    let shape = vec![batch.clone(), d(og), d(c / og), d(k * p)];
    let mut cols = gather_taps(&mut Ops { b: &mut *b }, flat, &per_axis, &[h, wd], shape, dtype)?;
    if let Some(mask) = n.input(4) {
        let m = b.run(mask)?;
        let m = reshape(b, m, vec![batch.clone(), d(og), d(1), d(k * p)])?;
        cols = b.emit(FOp::Binary(BinaryFn::Mul), vec![val(cols), val(m)])?;
    }
    let cols = reshape(b, cols, vec![batch.clone(), d(group), d(cg * k), d(p)])?;
    let wm = reshape(b, w, vec![d(group), d(oc / group), d(cg * k)])?;
    let y = b.emit(FOp::Matmul, vec![val(wm), val(cols)])?;
    let mut y = reshape(b, y, vec![batch, d(oc), d(oh), d(ow)])?;
    if let Some(bias) = n.input(3) {
        let bv = b.run(bias)?;
        let bv = reshape(b, bv, vec![d(oc), d(1), d(1)])?;
        y = b.emit(FOp::Binary(BinaryFn::Add), vec![val(y), val(bv)])?;
    }
    Ok(y)
}

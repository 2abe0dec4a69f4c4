//! Pooling windows the Frontend IR's pools do not take as they are: pads
//! over half the kernel (the IR follows PyTorch, which refuses them) and
//! `AveragePool`'s `ceil_mode` with `count_include_pad` over a partial
//! last window (whose divisor counts the pads but not the part of the
//! window past them); and `MaxUnpool`.

use crate::diag;
use crate::diag::DResult;
use crate::frontend::ir::*;
use crate::sym::Dim;

use super::super::known::{self, Known};
use super::super::proto::{self, code};
use super::super::Builder;
use super::{bin, need_known, val, N};

/// `MaxPool`/`AveragePool` of `x` with the model's pads `real` made
/// explicit: `x` padded by them (with −inf, or the lowest integer, for a
/// max; with 0 for an average), then pooled with only `ceil_mode`'s extra
/// end padding left in `window`, which no divisor counts. An average that
/// does not count the pads is then scaled, per output position, by the
/// number of padded-input elements its window covers over the number of
/// input elements (a known table), one f32 rounding more.
///
/// Errors: `Unsupported` for a symbolic spatial size, or an average
/// window that covers no input element.
pub(super) fn padded(
    b: &mut Builder,
    x: ValueId,
    kernel: Vec<Dim>,
    mut window: Window,
    real: &[(Dim, Dim)],
    max: bool,
    count_include_pad: bool,
) -> DResult<ValueId> {
    let xs = b.shape(x)?;
    let dtype = b.dtype(x)?;
    let k = kernel.len();
    let lead = xs.len() - k;
    let concrete =
        |d: &Dim, what: &str| d.as_int().ok_or_else(|| diag!(Unsupported, "pooling over the symbolic {what} `{d}`"));
    let mut pads = vec![(Dim::int(0), Dim::int(0)); lead];
    pads.extend(real.iter().cloned());
    let fill = match (max, dtype.is_float()) {
        (false, _) => 0.0,
        (true, true) => f64::NEG_INFINITY,
        (true, false) => i32::MIN as f64,
    };
    let xp = b.emit(FOp::Movement(Movement::Pad { pads, value: fill, mode: PadMode::Constant }), vec![val(x)])?;
    for (p, (_, extra)) in window.pad.iter_mut().zip(real) {
        let end = concrete(&p.1, "padding")? - concrete(extra, "padding")?;
        *p = (Dim::int(0), Dim::int(end));
    }
    let y = if max {
        b.emit(FOp::MaxPool { kernel: kernel.clone(), window: window.clone() }, vec![val(xp)])?
    } else {
        let op = FOp::AvgPool { kernel: kernel.clone(), window: window.clone(), count_include_pad: false };
        b.emit(op, vec![val(xp)])?
    };
    if max || count_include_pad {
        return Ok(y);
    }
    // Per axis, how many points of each window lie in the padded input and
    // how many in the input; the table is their ratio's product over axes.
    let ys = b.shape(y)?;
    let mut table = vec![1.0f64];
    let mut shape = Vec::new();
    for i in 0..k {
        let size = concrete(&xs[lead + i], "size")?;
        let outs = concrete(&ys[lead + i], "size")?;
        let (lo, hi) = (concrete(&real[i].0, "padding")?, concrete(&real[i].1, "padding")?);
        let (kk, s, d) = (
            concrete(&kernel[i], "kernel size")?,
            concrete(&window.stride[i], "stride")?,
            concrete(&window.dilation[i], "dilation")?,
        );
        let mut ratio = Vec::new();
        for o in 0..outs {
            let points = (0..kk).map(|q| o * s - lo + q * d);
            let covered = points.clone().filter(|p| (-lo..size + hi).contains(p)).count();
            let inside = points.filter(|p| (0..size).contains(p)).count();
            if inside == 0 {
                return Err(diag!(Unsupported, "an AveragePool window that covers only padding"));
            }
            ratio.push(covered as f64 / inside as f64);
        }
        table = table.iter().flat_map(|t| ratio.iter().map(move |r| t * r)).collect();
        shape.push(outs as usize);
    }
    let c = proto::code_of(dtype);
    let known = Known { code: c, shape, data: super::super::kdata_of(c, table) };
    let f = b.materialize(&known, "pool_count")?;
    bin(b, BinaryFn::Mul, val(y), val(f))
}

/// `MaxUnpool` with its `indices` known at import (ONNX's backend cases
/// hold them as constants; a model that computes them with `MaxPool` at
/// run time is refused): each output element is the input element whose
/// index names it (the last, where several do) or 0, a `take` of the
/// flattened input by a known table and a `where` by a known mask; an
/// `output_shape` larger than the inferred one pads zeros at the end.
///
/// Errors: `Unsupported` for run-time indices or symbolic sizes;
/// `AxisSizeMismatch` for an index outside the output or an
/// `output_shape` smaller than the inferred one; `ResourceExceeded` for an
/// output of more than [`known::MAX_KNOWN_ELEMENTS`] elements.
pub(super) fn max_unpool(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let x = b.run(n.required(0)?)?;
    let xs = b.shape(x)?;
    let dims: Vec<i64> = xs
        .iter()
        .map(|d| d.as_int().ok_or_else(|| diag!(Unsupported, "MaxUnpool over the symbolic size `{d}`")))
        .collect::<DResult<_>>()?;
    let k = dims.len().saturating_sub(2);
    let kernel =
        n.a.ints("kernel_shape")?.ok_or_else(|| diag!(SyntaxError, "MaxUnpool needs attribute `kernel_shape`"))?;
    let strides = n.a.ints("strides")?.unwrap_or_else(|| vec![1; k]);
    let pads = n.a.ints("pads")?.unwrap_or_else(|| vec![0; 2 * k]);
    if k == 0 || kernel.len() != k || strides.len() != k || pads.len() != 2 * k {
        return Err(diag!(AxisSizeMismatch, "MaxUnpool of rank {} with a {}-d kernel", dims.len(), kernel.len()));
    }
    let mut inferred = dims[..2].to_vec();
    for i in 0..k {
        inferred.push((dims[2 + i] - 1) * strides[i] - (pads[i] + pads[k + i]) + kernel[i]);
    }
    if inferred.iter().any(|&d| d < 1) {
        return Err(diag!(AxisSizeMismatch, "MaxUnpool's output shape {inferred:?} is empty"));
    }
    let total: i64 = inferred.iter().product();
    known::check_size(total as usize, "MaxUnpool's output table")?;
    let indices = need_known(b, n, 1, "indices")?.int_values("MaxUnpool's indices")?;
    let count: i64 = dims.iter().product();
    if indices.len() as i64 != count {
        return Err(diag!(AxisSizeMismatch, "MaxUnpool has {} indices for {count} elements", indices.len()));
    }
    let mut source = vec![-1i64; total as usize];
    for (e, &i) in indices.iter().enumerate() {
        let slot = usize::try_from(i)
            .ok()
            .filter(|&s| s < source.len())
            .ok_or_else(|| diag!(AxisSizeMismatch, "MaxUnpool index {i} is outside the output of {total} elements"))?;
        source[slot] = e as i64;
    }
    let out = n.node.output.first().map_or("max_unpool", String::as_str).to_string();
    let table = |b: &mut Builder, c: i32, v: Vec<f64>, what: &str| {
        b.materialize(
            &Known { code: c, shape: vec![total as usize], data: super::super::kdata_of(c, v) },
            &format!("{out}_{what}"),
        )
    };
    let flat = b.emit(FOp::Movement(Movement::Reshape { shape: vec![Dim::int(count)] }), vec![val(x)])?;
    let idx = table(b, code::INT32, source.iter().map(|&s| s.max(0) as f64).collect(), "source")?;
    let mut y = b.emit(FOp::Take { axis: 0 }, vec![val(flat), val(idx)])?;
    if source.iter().any(|&s| s < 0) {
        let written = table(b, code::BOOL, source.iter().map(|&s| (s >= 0) as u8 as f64).collect(), "written")?;
        let zero = b.lit_for(0.0, b.dtype(x)?);
        y = b.emit(FOp::Where, vec![val(written), val(y), zero])?;
    }
    let shape: Vec<Dim> = inferred.iter().map(|&d| Dim::int(d)).collect();
    y = b.emit(FOp::Movement(Movement::Reshape { shape }), vec![val(y)])?;
    if let Some(want) = super::opt_known(b, n, 2, "output_shape")?.map(|k| k.int_values("output_shape")).transpose()? {
        if want.len() != inferred.len() || want.iter().zip(&inferred).any(|(w, i)| w < i) {
            return Err(diag!(AxisSizeMismatch, "MaxUnpool's output_shape {want:?} is smaller than {inferred:?}"));
        }
        if want != inferred {
            let pads = want.iter().zip(&inferred).map(|(w, i)| (Dim::int(0), Dim::int(w - i))).collect();
            y = b.emit(FOp::Movement(Movement::Pad { pads, value: 0.0, mode: PadMode::Constant }), vec![val(y)])?;
        }
    }
    Ok(y)
}

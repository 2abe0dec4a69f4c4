//! Pooling windows the Frontend IR's pools do not take as they are: pads
//! over half the kernel (the IR follows PyTorch, which refuses them) and
//! `AveragePool`'s `ceil_mode` with `count_include_pad` over a partial
//! last window (whose divisor counts the pads but not the part of the
//! window past them).

use crate::diag;
use crate::diag::DResult;
use crate::frontend::ir::*;
use crate::sym::Dim;

use super::super::known::Known;
use super::super::proto;
use super::super::Builder;
use super::{bin, val};

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

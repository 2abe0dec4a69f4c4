//! Operators whose result marks positions by a comparison with an iota:
//! `OneHot`, `Hardmax` and `EyeLike` (exact: no arithmetic on the data).

use crate::diag;
use crate::diag::DResult;
use crate::frontend::ir::*;
use crate::sym::Dim;
use crate::DType;

use super::super::{proto, Builder};
use super::{bin, extreme_index, iota, need_known, norm_axis, val, N};

/// `OneHot`: `values[1]` where an index (negative ones count from `depth`)
/// equals the position along the new axis `axis`, `values[0]` elsewhere;
/// an index outside `[-depth, depth)` marks nothing. Float indices are cast
/// to int32 (toward zero), as ONNX casts them to an integer.
///
/// Errors: `Unsupported` for a `depth` not known at import, not a whole
/// number in `[1, 2^31)`, or indices of type bool; `AxisSizeMismatch` for
/// `values` that are not two.
pub(super) fn one_hot(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let mut idx = b.run(n.required(0)?)?;
    let depth = need_known(b, n, 1, "depth")?.scalar_value("OneHot's depth")?;
    if !(depth >= 1.0 && depth.fract() == 0.0 && depth <= i32::MAX as f64) {
        return Err(diag!(Unsupported, "OneHot depth {depth} (a whole number from 1 to 2^31 - 1)"));
    }
    let values = b.run(n.required(2)?)?;
    if b.shape(values)? != [Dim::int(2)] {
        return Err(diag!(AxisSizeMismatch, "OneHot values of shape {:?} (they are [off, on])", b.shape(values)?));
    }
    let r = b.shape(idx)?.len();
    let axis = norm_axis(n.a.int_or("axis", -1)?, r + 1)?;
    match b.dtype(idx)? {
        DType::I32 => {}
        DType::Bool => return Err(diag!(Unsupported, "OneHot of bool indices")),
        _ => idx = b.emit(FOp::Cast { to: DType::I32 }, vec![val(idx)])?,
    }
    let neg = bin(b, BinaryFn::Lt, val(idx), b.lit(0.0, LitKind::Int))?;
    let wrapped = bin(b, BinaryFn::Add, val(idx), b.lit(depth, LitKind::Int))?;
    let idx = b.emit(FOp::Where, vec![val(neg), val(wrapped), val(idx)])?;
    let idx = b.emit(FOp::Movement(Movement::Unsqueeze { axes: vec![axis as i64] }), vec![val(idx)])?;
    let mut along = vec![Dim::int(1); r + 1];
    along[axis] = Dim::int(depth as i64);
    let pos = iota(b, &Dim::int(depth as i64))?;
    let pos = b.emit(FOp::Movement(Movement::Reshape { shape: along }), vec![val(pos)])?;
    let hit = bin(b, BinaryFn::Eq, val(idx), val(pos))?;
    let sizes = vec![Dim::int(1), Dim::int(1)];
    let v = b.emit_n(FOp::Pieces(Pieces::Split { sizes, axis: 0 }), vec![val(values)], 2)?;
    b.emit(FOp::Where, vec![val(hit), val(v[1]), val(v[0])])
}

/// `Hardmax`: 1 at the first maximum along `axis`, 0 elsewhere; before
/// opset 13 along the second axis of the input seen as 2-D
/// `[prod(:axis), prod(axis:)]` (as `Softmax` then).
pub(super) fn hardmax(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let x = b.run(n.required(0)?)?;
    let shape = b.shape(x)?;
    let r = shape.len();
    if n.opset >= 13 {
        let axis = norm_axis(n.a.int_or("axis", -1)?, r)?;
        return first_max(b, x, axis);
    }
    let axis = norm_axis(n.a.int_or("axis", 1)?, r.max(1))?;
    let flat = vec![Dim::product(&shape[..axis]), Dim::product(&shape[axis..])];
    let f = b.emit(FOp::Movement(Movement::Reshape { shape: flat }), vec![val(x)])?;
    let h = first_max(b, f, 1)?;
    b.emit(FOp::Movement(Movement::Reshape { shape }), vec![val(h)])
}

/// 1 at the first maximum of `x` along `axis`, 0 elsewhere, in `x`'s dtype.
fn first_max(b: &mut Builder, x: ValueId, axis: usize) -> DResult<ValueId> {
    let (pos, first) = extreme_index(b, x, axis, ReduceFn::Max, false, true)?;
    let hit = bin(b, BinaryFn::Eq, val(pos), val(first))?;
    let dt = b.dtype(x)?;
    b.emit(FOp::Cast { to: dt }, vec![val(hit)])
}

/// `EyeLike`: a matrix of input 0's shape with ones on diagonal `k` (above
/// the main one for `k > 0`), of type `dtype` (default the input's).
///
/// Errors: `AxisSizeMismatch` for an input not of rank 2; `Unsupported`
/// for a `dtype` tgc does not compute in.
pub(super) fn eye_like(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let x = b.run(n.required(0)?)?;
    let xs = b.shape(x)?;
    if xs.len() != 2 {
        return Err(diag!(AxisSizeMismatch, "EyeLike of a rank-{} tensor (rank 2 only)", xs.len()));
    }
    let dt = match n.a.int("dtype")? {
        Some(c) => proto::runtime_dtype(c as i32).ok_or_else(|| {
            diag!(Unsupported, "EyeLike of {}, a type tgc does not compute in", proto::type_name(c as i32))
        })?,
        None => b.dtype(x)?,
    };
    let k = n.a.int_or("k", 0)?;
    let k = proto::narrow(k, "EyeLike's k")?;
    let rows = iota(b, &xs[0])?;
    let rows = b.emit(FOp::Movement(Movement::Unsqueeze { axes: vec![1] }), vec![val(rows)])?;
    let cols = iota(b, &xs[1])?;
    let diff = bin(b, BinaryFn::Sub, val(cols), val(rows))?;
    let on = bin(b, BinaryFn::Eq, val(diff), b.lit(k as f64, LitKind::Int))?;
    if dt == DType::Bool {
        return Ok(on);
    }
    b.emit(FOp::Cast { to: dt }, vec![val(on)])
}

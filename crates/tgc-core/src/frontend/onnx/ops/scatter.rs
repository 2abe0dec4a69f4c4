//! Gathers and scatters by index tensors without an op of their own in the
//! Frontend IR: `GatherND` (a `take` along the flattened indexed axes),
//! and `ScatterElements`, its opset-9 name `Scatter`, and `ScatterND` by
//! compare-and-select: each update is laid beside every position of its
//! axis, `hit` marks the position its index names, and a reduction over
//! the updates' axis gives each position its value. That is exact: `none`
//! keeps the last update of a position (the reference's order), `add` and
//! `mul` reduce the updates of a position and then meet the data once,
//! `max` and `min` meet the data with the extreme of the updates. The
//! indices may be known at import or computed at run time; a negative
//! index counts from the end of its axis, one outside the axis writes
//! nothing (ONNX does not allow it).

use crate::diag;
use crate::diag::DResult;
use crate::frontend::ir::*;
use crate::sym::Dim;
use crate::DType;

use super::super::Builder;
use super::{bin, iota, norm_axis, val, N};

/// The concrete size of `d`, naming `what` when it is symbolic.
fn concrete(d: &Dim, what: &str) -> DResult<i64> {
    d.as_int().ok_or_else(|| diag!(Unsupported, "{what} over the symbolic size `{d}`"))
}

/// `idx` (i32) with a negative entry counted from `size`.
fn wrap(b: &mut Builder, idx: ValueId, size: i64) -> DResult<ValueId> {
    let neg = bin(b, BinaryFn::Lt, val(idx), b.lit(0.0, LitKind::Int))?;
    let up = bin(b, BinaryFn::Add, val(idx), b.lit(size as f64, LitKind::Int))?;
    b.emit(FOp::Where, vec![val(neg), val(up), val(idx)])
}

/// Index input `k` of `n` as i32.
///
/// Errors: `Unsupported` for indices of another type.
fn indices(b: &mut Builder, n: &N, k: usize) -> DResult<ValueId> {
    let idx = b.run(n.required(k)?)?;
    if b.dtype(idx)? != DType::I32 {
        return Err(diag!(Unsupported, "{} indices of type {} (int32 or int64 only)", n.node.op_type, b.dtype(idx)?));
    }
    Ok(idx)
}

/// The row-major position in an array of sizes `dims` of each index tuple
/// along the last axis of `idx` (`[..., k]`, i32, `k = dims.len()`), its
/// negative entries counted from their axis's size: `idx`'s shape without
/// the last axis.
///
/// Errors: `Unsupported` for a symbolic size in `dims`.
fn position(b: &mut Builder, idx: ValueId, dims: &[Dim], what: &str) -> DResult<ValueId> {
    let is = b.shape(idx)?;
    let r = is.len();
    let sizes: Vec<i64> = dims.iter().map(|d| concrete(d, what)).collect::<DResult<_>>()?;
    let mut acc: Option<ValueId> = None;
    for (j, &size) in sizes.iter().enumerate() {
        let mut bounds: Vec<(Dim, Dim, Dim)> = is.iter().map(|d| (Dim::int(0), d.clone(), Dim::int(1))).collect();
        bounds[r - 1] = (Dim::int(j as i64), Dim::int(j as i64 + 1), Dim::int(1));
        let col = b.emit(FOp::Movement(Movement::Slice { bounds }), vec![val(idx)])?;
        let mut term = wrap(b, col, size)?;
        let stride: i64 = sizes[j + 1..].iter().product();
        if stride != 1 {
            term = bin(b, BinaryFn::Mul, val(term), b.lit(stride as f64, LitKind::Int))?;
        }
        acc = Some(match acc {
            Some(a) => bin(b, BinaryFn::Add, val(a), val(term))?,
            None => term,
        });
    }
    let acc = acc.ok_or_else(|| diag!(Unsupported, "{what} with index tuples of length 0"))?;
    b.emit(FOp::Movement(Movement::Squeeze { axes: vec![r as i64 - 1] }), vec![val(acc)])
}

/// The last axis of `indices`' shape, the length of its index tuples.
fn tuple_len(is: &[Dim], what: &str) -> DResult<usize> {
    let k = is.last().ok_or_else(|| diag!(AxisSizeMismatch, "{what} of rank-0 indices"))?;
    Ok(concrete(k, what)? as usize)
}

/// `GatherND`: for each index tuple (the last axis of `indices`) the slice
/// of `data` it names, after `batch_dims` leading axes the two share.
///
/// Errors: `AxisSizeMismatch` for shapes that do not fit; `Unsupported`
/// for a symbolic indexed size.
pub(super) fn gather_nd(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let data = b.run(n.required(0)?)?;
    let idx = indices(b, n, 1)?;
    let (ds, is) = (b.shape(data)?, b.shape(idx)?);
    let k = tuple_len(&is, "GatherND")?;
    let bd = usize::try_from(n.a.int_or("batch_dims", 0)?).unwrap_or(usize::MAX);
    if bd >= is.len() || bd + k > ds.len() || is[..bd] != ds[..bd] {
        return Err(diag!(
            AxisSizeMismatch,
            "GatherND of data of shape {ds:?} by indices of shape {is:?} with batch_dims {bd}"
        ));
    }
    let mut at = position(b, idx, &ds[bd..bd + k], "GatherND")?;
    let count: i64 = ds[bd..bd + k].iter().map(|d| concrete(d, "GatherND")).product::<DResult<i64>>()?;
    let batch = Dim::product(&ds[..bd]);
    if bd > 0 {
        // Batch `t` reads rows `t · count ..` of the flattened data.
        let mut shape = ds[..bd].to_vec();
        shape.extend(vec![Dim::int(1); is.len() - 1 - bd]);
        let off = iota(b, &batch)?;
        let off = bin(b, BinaryFn::Mul, val(off), b.lit(count as f64, LitKind::Int))?;
        let off = b.emit(FOp::Movement(Movement::Reshape { shape }), vec![val(off)])?;
        at = bin(b, BinaryFn::Add, val(at), val(off))?;
    }
    let mut flat = vec![&batch * &Dim::int(count)];
    flat.extend(ds[bd + k..].iter().cloned());
    let rows = b.emit(FOp::Movement(Movement::Reshape { shape: flat }), vec![val(data)])?;
    b.emit(FOp::Take { axis: 0 }, vec![val(rows), val(at)])
}

/// The `reduction` attribute (`none` for `Scatter`, which has none).
fn reduction(n: &N) -> DResult<String> {
    let r = n.a.string("reduction")?.unwrap_or_else(|| "none".into());
    if !matches!(r.as_str(), "none" | "add" | "mul" | "max" | "min") {
        return Err(diag!(Unsupported, "{} reduction=`{r}`", n.node.op_type));
    }
    Ok(r)
}

/// `ScatterElements` (and `Scatter`): `data` with `data[…, indices[p], …]
/// = updates[p]` along `axis` for each position `p` of `indices`.
///
/// Errors: `AxisSizeMismatch` for shapes that do not fit; `Unsupported`
/// for a symbolic size along `axis`.
pub(super) fn scatter_elements(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let data = b.run(n.required(0)?)?;
    let idx = indices(b, n, 1)?;
    let upd = b.run(n.required(2)?)?;
    let how = reduction(n)?;
    let (ds, is, us) = (b.shape(data)?, b.shape(idx)?, b.shape(upd)?);
    let r = ds.len();
    let fits =
        is.len() == r && is == us && (0..r).all(|i| is[i].as_int().zip(ds[i].as_int()).is_none_or(|(u, d)| u <= d));
    if !fits {
        return Err(diag!(
            AxisSizeMismatch,
            "{} of data of shape {ds:?} by indices of shape {is:?} with updates of shape {us:?}",
            n.node.op_type
        ));
    }
    let a = norm_axis(n.a.int_or("axis", 0)?, r)?;
    let size = concrete(&ds[a], &n.node.op_type)?;
    let idx = wrap(b, idx, size)?;
    // Indices and updates over `data`'s sizes off the axis (the new
    // indices -1, which names no position).
    let mut pads = vec![(Dim::int(0), Dim::int(0)); r];
    for i in (0..r).filter(|&i| i != a && is[i] != ds[i]) {
        pads[i].1 = &ds[i] - &is[i];
    }
    let (mut idx, mut upd) = (idx, upd);
    if pads.iter().any(|p| p.1.as_int() != Some(0)) {
        let pad = |value| FOp::Movement(Movement::Pad { pads: pads.clone(), value, mode: PadMode::Constant });
        idx = b.emit(pad(-1.0), vec![val(idx)])?;
        upd = b.emit(pad(0.0), vec![val(upd)])?;
    }
    // hit[…, j, c, …]: update j along the axis goes to position c.
    let idx = b.emit(FOp::Movement(Movement::Unsqueeze { axes: vec![a as i64 + 1] }), vec![val(idx)])?;
    let upd = b.emit(FOp::Movement(Movement::Unsqueeze { axes: vec![a as i64 + 1] }), vec![val(upd)])?;
    let mut along = vec![Dim::int(1); r + 1];
    along[a + 1] = ds[a].clone();
    let pos = iota(b, &ds[a])?;
    let pos = b.emit(FOp::Movement(Movement::Reshape { shape: along }), vec![val(pos)])?;
    let hit = bin(b, BinaryFn::Eq, val(idx), val(pos))?;
    combine(b, data, hit, upd, a, &how)
}

/// `ScatterND`: `data` with the slice each index tuple (the last axis of
/// `indices`) names replaced by (or reduced with) its update.
///
/// Errors: `AxisSizeMismatch` for shapes that do not fit; `Unsupported`
/// for a symbolic indexed size.
pub(super) fn scatter_nd(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let data = b.run(n.required(0)?)?;
    let idx = indices(b, n, 1)?;
    let upd = b.run(n.required(2)?)?;
    let how = reduction(n)?;
    let (ds, is, us) = (b.shape(data)?, b.shape(idx)?, b.shape(upd)?);
    let k = tuple_len(&is, "ScatterND")?;
    let want: Vec<Dim> = is[..is.len() - 1].iter().chain(ds.get(k..).unwrap_or(&[])).cloned().collect();
    if k > ds.len() || us != want {
        return Err(diag!(
            AxisSizeMismatch,
            "ScatterND of data of shape {ds:?} by indices of shape {is:?} with updates of shape {us:?}"
        ));
    }
    let at = position(b, idx, &ds[..k], "ScatterND")?;
    let rest = &ds[k..];
    let count = Dim::product(&ds[..k]);
    let m = Dim::product(&is[..is.len() - 1]);
    // hit[j, c, 1…]: update j goes to row c of the flattened data.
    let mut col = vec![m.clone(), Dim::int(1)];
    col.extend(vec![Dim::int(1); rest.len()]);
    let at = b.emit(FOp::Movement(Movement::Reshape { shape: col }), vec![val(at)])?;
    let mut row = vec![Dim::int(1), count.clone()];
    row.extend(vec![Dim::int(1); rest.len()]);
    let pos = iota(b, &count)?;
    let pos = b.emit(FOp::Movement(Movement::Reshape { shape: row }), vec![val(pos)])?;
    let hit = bin(b, BinaryFn::Eq, val(at), val(pos))?;
    let mut ushape = vec![m, Dim::int(1)];
    ushape.extend(rest.iter().cloned());
    let upd = b.emit(FOp::Movement(Movement::Reshape { shape: ushape }), vec![val(upd)])?;
    let mut dshape = vec![count];
    dshape.extend(rest.iter().cloned());
    let flat = b.emit(FOp::Movement(Movement::Reshape { shape: dshape }), vec![val(data)])?;
    let y = combine(b, flat, hit, upd, 0, &how)?;
    b.emit(FOp::Movement(Movement::Reshape { shape: ds }), vec![val(y)])
}

/// `data` with the updates `upd` where `hit` marks their positions: both
/// have `data`'s axes with the updates' axis inserted at `j` (the module
/// doc's rule for each reduction `how`).
fn combine(b: &mut Builder, data: ValueId, hit: ValueId, upd: ValueId, j: usize, how: &str) -> DResult<ValueId> {
    let dt = b.dtype(data)?;
    let over = |op, keepdim| FOp::Reduce { op, axes: Some(vec![AxisRef::Index(j as i64)]), keepdim, acc: None };
    let (neutral, op, f) = match how {
        "add" => (0.0, ReduceFn::Sum, BinaryFn::Add),
        "mul" => (1.0, ReduceFn::Prod, BinaryFn::Mul),
        "max" if dt.is_float() => (f64::NEG_INFINITY, ReduceFn::Max, BinaryFn::Maximum),
        "max" => (i32::MIN as f64, ReduceFn::Max, BinaryFn::Maximum),
        "min" if dt.is_float() => (f64::INFINITY, ReduceFn::Min, BinaryFn::Minimum),
        "min" => (i32::MAX as f64, ReduceFn::Min, BinaryFn::Minimum),
        _ => {
            // The last update of each position: the largest j that hits.
            let hs = b.shape(hit)?;
            let mut along = vec![Dim::int(1); hs.len()];
            along[j] = hs[j].clone();
            let jpos = iota(b, &hs[j])?;
            let jpos = b.emit(FOp::Movement(Movement::Reshape { shape: along }), vec![val(jpos)])?;
            let cand = b.emit(FOp::Where, vec![val(hit), val(jpos), b.lit(-1.0, LitKind::Int)])?;
            let last = b.emit(over(ReduceFn::Max, true), vec![val(cand)])?;
            let is_last = bin(b, BinaryFn::Eq, val(jpos), val(last))?;
            let sel = b.emit(FOp::Where, vec![val(hit), val(is_last), b.lit(0.0, LitKind::Bool)])?;
            let picked = b.emit(FOp::Where, vec![val(sel), val(upd), b.lit_for(0.0, dt)])?;
            let value = b.emit(over(ReduceFn::Sum, false), vec![val(picked)])?;
            let last = b.emit(FOp::Movement(Movement::Squeeze { axes: vec![j as i64] }), vec![val(last)])?;
            let any = bin(b, BinaryFn::Ge, val(last), b.lit(0.0, LitKind::Int))?;
            return b.emit(FOp::Where, vec![val(any), val(value), val(data)]);
        }
    };
    let picked = b.emit(FOp::Where, vec![val(hit), val(upd), b.lit_for(neutral, dt)])?;
    let r = b.emit(over(op, false), vec![val(picked)])?;
    bin(b, f, val(data), val(r))
}

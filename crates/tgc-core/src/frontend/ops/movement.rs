//! Movement ops of the DSL on top of the Tiny movement vocabulary; all are
//! exact re-indexings (no arithmetic, no copies).
//!
//! `reshape` (one `-1` inferred) → RESHAPE; `permute`/`transpose` → PERMUTE;
//! `expand` (right-aligned, `-1` keeps) → RESHAPE + EXPAND; `unsqueeze`/
//! `squeeze` → RESHAPE; `pad` → PAD (`reflect`/`edge`: `concat` of SHRINKed,
//! FLIPped or EXPANDed border pieces); `shrink`/`slice` → SHRINK; `flip` → FLIP;
//! `tile`/`repeat_interleave` → RESHAPE + EXPAND + RESHAPE; `unfold` → VIEW; `split` → one
//! SHRINK per piece (`chunk`: equal ones); `concat` → PAD per piece and
//! WHERE of padded masks; `gather` → GATHER, `take` → RESHAPE + EXPAND of
//! the index, GATHER, RESHAPE (the one data-dependent read).

use crate::affine::AffExpr;
use crate::diag;
use crate::diag::DResult;
use crate::frontend::ir::{Movement, PadMode};
use crate::sym::Dim;
use crate::tiny::infer::fmt_shape;
use crate::tiny::{Graph, NodeId};

use super::{axes, axis, broadcast_to, fail};

/// Applies a movement op to `x` (its dimensions already substituted).
///
/// Errors: `AxisSizeMismatch` (reshape counts, squeeze of a size ≠ 1, shrink
/// bounds), `InvalidPermutation`, `BroadcastMismatch` (expand),
/// `InvalidAxis`, `NegativeStride` (slice step ≤ 0), `ArityMismatch` (one
/// pad/bound entry per axis).
pub fn movement(g: &mut Graph, x: NodeId, m: &Movement) -> DResult<NodeId> {
    let shape = g.shape(x).to_vec();
    let rank = shape.len();
    match m {
        Movement::Reshape { shape: to } => reshape(g, x, to),
        Movement::Permute { perm } => {
            let r = rank as i64;
            let mut p = Vec::with_capacity(perm.len());
            for &a in perm {
                if a < -r || a >= r {
                    return Err(fail(
                        g,
                        diag!(
                            InvalidPermutation,
                            "{perm:?} is not a permutation of the {rank} axes of {}",
                            fmt_shape(&shape)
                        ),
                    ));
                }
                p.push(if a < 0 { (a + r) as usize } else { a as usize });
            }
            g.permute(x, &p)
        }
        Movement::Transpose { a, b } => {
            let (a, b) = (axis(g, *a, rank)?, axis(g, *b, rank)?);
            let mut p: Vec<usize> = (0..rank).collect();
            p.swap(a, b);
            g.permute(x, &p)
        }
        Movement::Expand { shape: to } => {
            if to.len() < rank {
                return Err(fail(
                    g,
                    diag!(BroadcastMismatch, "cannot expand {} to the lower rank {}", fmt_shape(&shape), to.len()),
                ));
            }
            let lead = to.len() - rank;
            let target: Vec<Dim> = to
                .iter()
                .enumerate()
                .map(|(k, d)| if d.as_int() == Some(-1) && k >= lead { shape[k - lead].clone() } else { d.clone() })
                .collect();
            broadcast_to(g, x, &target)
        }
        Movement::Unsqueeze { axes: list } => {
            // Positions of the result, sorted: inserting in that order puts
            // each 1 where it is asked for.
            let mut to = shape.clone();
            for k in axes(g, list, rank + list.len())? {
                to.insert(k, Dim::int(1));
            }
            g.reshape(x, &to)
        }
        Movement::Squeeze { axes: list } => {
            let gone = axes(g, list, rank)?;
            if let Some(&k) = gone.iter().find(|&&k| !shape[k].is_one()) {
                return Err(fail(
                    g,
                    diag!(AxisSizeMismatch, "cannot squeeze axis {k} of {}: its size is not 1", fmt_shape(&shape)),
                ));
            }
            let to: Vec<Dim> =
                shape.iter().enumerate().filter(|(k, _)| !gone.contains(k)).map(|(_, d)| d.clone()).collect();
            g.reshape(x, &to)
        }
        Movement::Tile { reps } => tile(g, x, reps),
        Movement::RepeatInterleave { repeats, axis: a } => {
            let k = axis(g, *a, rank)?;
            positive(g, "repeat_interleave", repeats)?;
            // [.., d, ..] → [.., d, 1, ..] → [.., d, r, ..] → [.., d·r, ..].
            let mut one = shape.clone();
            one.insert(k + 1, Dim::int(1));
            let mut wide = shape.clone();
            wide.insert(k + 1, repeats.clone());
            let mut to = shape.clone();
            to[k] = &shape[k] * repeats;
            let y = g.reshape(x, &one)?;
            let y = g.expand(y, &wide)?;
            g.reshape(y, &to)
        }
        Movement::Pad { pads, value, mode: PadMode::Constant } => g.pad(x, pads, *value),
        Movement::Pad { pads, mode: mode @ (PadMode::Reflect | PadMode::Edge), .. } => border_pad(g, x, pads, *mode),
        Movement::Shrink { bounds } => {
            let lo: Vec<Dim> = bounds.iter().map(|b| b.0.clone()).collect();
            let hi: Vec<Dim> = bounds.iter().map(|b| b.1.clone()).collect();
            g.shrink(x, &lo, &hi, &vec![Dim::int(1); bounds.len()])
        }
        Movement::Slice { bounds } => {
            let lo: Vec<Dim> = bounds.iter().map(|b| b.0.clone()).collect();
            let hi: Vec<Dim> = bounds.iter().map(|b| b.1.clone()).collect();
            let step: Vec<Dim> = bounds.iter().map(|b| b.2.clone()).collect();
            g.shrink(x, &lo, &hi, &step)
        }
        Movement::Flip { axes: list } => {
            let ax = axes(g, list, rank)?;
            g.flip(x, &ax)
        }
        Movement::Unfold { axis: a, size, step } => unfold(g, x, *a, size, step),
    }
}

/// PyTorch's `Tensor.unfold(axis, size, step)`: `[.., d, ..]` → `[..,
/// (d − size) / step + 1, .., size]`, element `(.., o, .., q)` reading `(..,
/// o·step + q, ..)`. A `VIEW`; exact.
///
/// Errors: `AxisSizeMismatch` for a size or step below 1 or a window
/// longer than the axis; the errors of [`axis`].
fn unfold(g: &mut Graph, x: NodeId, axis_: i64, size: &Dim, step: &Dim) -> DResult<NodeId> {
    let shape = g.shape(x).to_vec();
    let k = axis(g, axis_, shape.len())?;
    positive(g, "unfold's size", size)?;
    positive(g, "unfold's step", step)?;
    let count = (&shape[k] - size).floordiv(step).map(|q| &q + &Dim::int(1));
    let Some(count) = count.filter(|c| c.as_int().is_none_or(|v| v >= 1)) else {
        let msg = format!("unfold: a window of {size} does not fit axis {k} of {}", fmt_shape(&shape));
        return Err(fail(g, diag!(AxisSizeMismatch, "{msg}")));
    };
    let r = shape.len() as u32;
    let mut out = shape.clone();
    out[k] = count;
    out.push(size.clone());
    let map: Vec<AffExpr> = (0..r)
        .map(|j| if j as usize == k { &AffExpr::var(j).scale(step) + &AffExpr::var(r) } else { AffExpr::var(j) })
        .collect();
    g.view(x, &out, &map)
}

/// `pad(x, pads, mode=reflect|edge)`, one axis after the other (as NumPy's
/// `pad` does, so corners are the padding of the padding): along axis `k`
/// of size `L`, `concat` of the border pieces and `x`. `edge` repeats the
/// end elements (`SHRINK` to one, `EXPAND`); `reflect` mirrors without
/// them (`SHRINK [1, lo + 1)` and `[L − 1 − hi, L − 1)`, `FLIP`). Exact.
///
/// Errors: `ArityMismatch` for other than one `[lo, hi]` per axis;
/// `AxisSizeMismatch` for a negative or symbolic pad, or a `reflect` pad
/// not below the axis size (which must then be known: a mirror longer
/// than the axis would read outside it).
fn border_pad(g: &mut Graph, x: NodeId, pads: &[(Dim, Dim)], mode: PadMode) -> DResult<NodeId> {
    let rank = g.shape(x).len();
    if pads.len() != rank {
        let msg = format!("pad takes one [lo, hi] per axis: {} for rank {rank}", pads.len());
        return Err(fail(g, diag!(ArityMismatch, "{msg}")));
    }
    let mut y = x;
    for (k, (lo, hi)) in pads.iter().enumerate() {
        let (Some(lo), Some(hi)) = (lo.as_int().filter(|v| *v >= 0), hi.as_int().filter(|v| *v >= 0)) else {
            let msg = format!("{} padding takes known pads ≥ 0, got [{lo}, {hi}] on axis {k}", mode.name());
            return Err(fail(g, diag!(AxisSizeMismatch, "{msg}")));
        };
        if lo == 0 && hi == 0 {
            continue;
        }
        let shape = g.shape(y).to_vec();
        let len = shape[k].clone();
        if mode == PadMode::Reflect && len.as_int().is_none_or(|l| lo.max(hi) >= l) {
            let msg = format!("reflect padding [{lo}, {hi}] must be below the size {len} of axis {k}");
            return Err(fail(g, diag!(AxisSizeMismatch, "{msg}")));
        }
        // The piece `[from, to)` of axis `k`, then mirrored or widened to `n`.
        let border = |g: &mut Graph, from: Dim, to: Dim, n: i64| -> DResult<NodeId> {
            let mut a = vec![Dim::int(0); rank];
            let mut b = shape.clone();
            a[k] = from;
            b[k] = to;
            let piece = g.shrink(y, &a, &b, &vec![Dim::int(1); rank])?;
            match mode {
                PadMode::Reflect => g.flip(piece, &[k]),
                _ => {
                    let mut wide = shape.clone();
                    wide[k] = Dim::int(n);
                    g.expand(piece, &wide)
                }
            }
        };
        let last = &len - &Dim::int(1);
        let mut parts = Vec::with_capacity(3);
        if lo > 0 {
            parts.push(match mode {
                PadMode::Reflect => border(g, Dim::int(1), Dim::int(lo + 1), lo)?,
                _ => border(g, Dim::int(0), Dim::int(1), lo)?,
            });
        }
        parts.push(y);
        if hi > 0 {
            parts.push(match mode {
                PadMode::Reflect => border(g, &last - &Dim::int(hi), last.clone(), hi)?,
                _ => border(g, last.clone(), len.clone(), hi)?,
            });
        }
        y = concat(g, &parts, k as i64)?;
    }
    Ok(y)
}

/// `gather(x, axis, index)` (`torch.gather`): `GATHER`, `out[i] = x[i
/// with i_axis ← index[i]]`, a negative index counting from the end, out
/// of range ones clamped ([`crate::tiny::op::gather_position`]). Exact.
///
/// Errors: `DTypeMismatch` for an index that is not i32;
/// `AxisSizeMismatch` for an index of another rank or other sizes on the
/// axes but `axis`; the errors of [`axis`].
pub fn gather(g: &mut Graph, x: NodeId, index: NodeId, axis_: i64) -> DResult<NodeId> {
    let k = axis(g, axis_, g.shape(x).len())?;
    require_index(g, index, "gather")?;
    g.gather(x, index, k)
}

/// `take(x, index, axis)` (NumPy's `take`; PyTorch's `index_select` for a
/// 1-D index): `x`'s `axis` replaced by `index`'s axes, `out[.., j, ..] =
/// x[.., index[j], ..]`, indices as [`gather`]'s. The index `RESHAPE`d to
/// one axis of `M = Π index.shape` elements and `EXPAND`ed to `x`'s other
/// axes, one `GATHER` (so `x` is read in place, not copied), `RESHAPE` to
/// the result. Exact.
///
/// Errors: `DTypeMismatch` for an index that is not i32; the errors of
/// [`axis`].
pub fn take(g: &mut Graph, x: NodeId, index: NodeId, axis_: i64) -> DResult<NodeId> {
    let shape = g.shape(x).to_vec();
    let k = axis(g, axis_, shape.len())?;
    require_index(g, index, "take")?;
    let picks = g.shape(index).to_vec();
    let m = Dim::product(&picks);
    let mut line = vec![Dim::int(1); shape.len()];
    line[k] = m.clone();
    let mut wide = shape.clone();
    wide[k] = m;
    let i = g.reshape(index, &line)?;
    let i = broadcast_to(g, i, &wide)?;
    let y = g.gather(x, i, k)?;
    let out: Vec<Dim> = shape[..k].iter().chain(&picks).chain(&shape[k + 1..]).cloned().collect();
    reshape(g, y, &out)
}

/// Refuses an index tensor that is not i32.
fn require_index(g: &Graph, index: NodeId, op: &str) -> DResult<()> {
    match g.dtype(index) {
        crate::DType::I32 => Ok(()),
        dt => Err(fail(g, diag!(DTypeMismatch, "{op} takes an i32 index, got {dt}: cast it"))),
    }
}

/// `concat(xs, axis)`: the tensors of `xs` one after the other along
/// `axis`, every other axis equal. Exact, by movement and selects only:
/// each piece `PAD`ded to the joined size at its offset, and `WHERE` of a
/// mask (a `PAD`ded, `EXPAND`ed `bool` constant, true on the piece's
/// range) picks it over the pieces before it.
///
/// Errors: `DTypeMismatch` for pieces of different dtypes;
/// `AxisSizeMismatch` for pieces of different ranks or other axes; the
/// errors of [`axis`].
pub fn concat(g: &mut Graph, xs: &[NodeId], axis_: i64) -> DResult<NodeId> {
    let Some((&first, rest)) = xs.split_first() else {
        return Err(fail(g, diag!(ArityMismatch, "concat needs at least one tensor")));
    };
    let shape = g.shape(first).to_vec();
    let k = axis(g, axis_, shape.len())?;
    let dt = g.dtype(first);
    for &x in rest {
        let s = g.shape(x);
        let same = s.len() == shape.len() && s.iter().zip(&shape).enumerate().all(|(j, (a, b))| j == k || a == b);
        if !same {
            let msg = format!("concat along axis {k}: {} does not fit {}", fmt_shape(s), fmt_shape(&shape));
            return Err(fail(g, diag!(AxisSizeMismatch, "{msg}")));
        }
        if g.dtype(x) != dt {
            return Err(fail(g, diag!(DTypeMismatch, "concat of {dt} and {}: cast one of them", g.dtype(x))));
        }
    }
    let lens: Vec<Dim> = xs.iter().map(|&x| g.shape(x)[k].clone()).collect();
    let total = lens.iter().fold(Dim::int(0), |a, l| &a + l);
    let mut full = shape.clone();
    full[k] = total.clone();
    // Piece `x` of length `len` at offset `off`, padded to `total`, and the
    // padding after it.
    let place = |g: &mut Graph, x: NodeId, off: &Dim, len: &Dim| -> DResult<(NodeId, Dim)> {
        let after = &(&total - off) - len;
        let mut pads = vec![(Dim::int(0), Dim::int(0)); shape.len()];
        pads[k] = (off.clone(), after.clone());
        Ok((g.pad(x, &pads, 0.0)?, after))
    };
    let (mut out, _) = place(g, first, &Dim::int(0), &lens[0])?;
    let mut off = lens[0].clone();
    for (&x, len) in rest.iter().zip(&lens[1..]) {
        let (piece, after) = place(g, x, &off, len)?;
        let on = super::splat(g, 1.0, crate::DType::Bool, std::slice::from_ref(len))?;
        let on = g.pad(on, &[(off.clone(), after)], 0.0)?;
        let mut line = vec![Dim::int(1); shape.len()];
        line[k] = total.clone();
        let on = g.reshape(on, &line)?;
        let on = broadcast_to(g, on, &full)?;
        out = g.where_(on, piece, out)?;
        off = &off + len;
    }
    Ok(out)
}

/// `split(x, sizes, axis)`: consecutive pieces of `x` along `axis`, one per
/// size, as `SHRINK`s. Exact.
///
/// Errors: `AxisSizeMismatch` when the sizes do not add up to the axis (or
/// cannot be shown to, for symbolic sizes) or one is below 1; the errors of
/// [`axis`].
pub fn split(g: &mut Graph, x: NodeId, sizes: &[Dim], axis_: i64) -> DResult<Vec<NodeId>> {
    let shape = g.shape(x).to_vec();
    let k = axis(g, axis_, shape.len())?;
    for s in sizes {
        positive(g, "split", s)?;
    }
    let total = sizes.iter().fold(Dim::int(0), |a, s| &a + s);
    if total != shape[k] {
        let msg = format!("split sizes add up to {total}, but axis {k} of {} has {}", fmt_shape(&shape), shape[k]);
        return Err(fail(g, diag!(AxisSizeMismatch, "{msg}")));
    }
    let mut off = Dim::int(0);
    let mut out = Vec::with_capacity(sizes.len());
    for s in sizes {
        let mut lo = vec![Dim::int(0); shape.len()];
        let mut hi = shape.clone();
        lo[k] = off.clone();
        off = &off + s;
        hi[k] = off.clone();
        out.push(g.shrink(x, &lo, &hi, &vec![Dim::int(1); shape.len()])?);
    }
    Ok(out)
}

/// `chunk(x, chunks, axis)`: [`split`] into `chunks` equal pieces.
///
/// Errors: `AxisSizeMismatch` when `chunks` does not divide the axis (for a
/// symbolic size: when the quotient is not a whole expression); the errors
/// of [`axis`].
pub fn chunk(g: &mut Graph, x: NodeId, chunks: usize, axis_: i64) -> DResult<Vec<NodeId>> {
    let shape = g.shape(x).to_vec();
    let k = axis(g, axis_, shape.len())?;
    let c = Dim::int(chunks as i64);
    let piece = shape[k].floordiv(&c).filter(|p| p * &c == shape[k]).ok_or_else(|| {
        let msg =
            format!("chunk: axis {k} of {} is not divisible into {chunks} equal pieces; use split", fmt_shape(&shape));
        fail(g, diag!(AxisSizeMismatch, "{msg}"))
    })?;
    split(g, x, &vec![piece; chunks], axis_)
}

/// Refuses a repeat count known to be below 1.
fn positive(g: &Graph, op: &str, r: &Dim) -> DResult<()> {
    match r.as_int() {
        Some(v) if v < 1 => Err(fail(g, diag!(AxisSizeMismatch, "{op} takes {v}: must be at least 1"))),
        _ => Ok(()),
    }
}

/// NumPy's `tile(x, reps)`, by movement alone: with `s` and `r` the shape
/// and `reps` right-aligned (1s prepended to the shorter), `RESHAPE` to
/// `[1, s0, 1, s1, …]`, `EXPAND` to `[r0, s0, r1, s1, …]`, `RESHAPE` to
/// `[r0·s0, r1·s1, …]`: element `i` of axis `k` reads `i mod s_k`. Exact.
///
/// Errors: `AxisSizeMismatch` for a repeat count below 1.
fn tile(g: &mut Graph, x: NodeId, reps: &[Dim]) -> DResult<NodeId> {
    for r in reps {
        positive(g, "tile", r)?;
    }
    let shape = g.shape(x).to_vec();
    let n = shape.len().max(reps.len());
    let pad =
        |v: &[Dim]| -> Vec<Dim> { std::iter::repeat_n(Dim::int(1), n - v.len()).chain(v.iter().cloned()).collect() };
    let (s, r) = (pad(&shape), pad(reps));
    let one: Vec<Dim> = s.iter().flat_map(|d| [Dim::int(1), d.clone()]).collect();
    let wide: Vec<Dim> = s.iter().zip(&r).flat_map(|(d, r)| [r.clone(), d.clone()]).collect();
    let to: Vec<Dim> = s.iter().zip(&r).map(|(d, r)| r * d).collect();
    let y = g.reshape(x, &one)?;
    let y = g.expand(y, &wide)?;
    g.reshape(y, &to)
}

/// `RESHAPE` to `to`, where one entry may be `-1`: it becomes the element
/// count divided by the product of the others.
///
/// Errors: `AxisSizeMismatch` for counts that differ, a second `-1`, or
/// another non-positive size.
pub fn reshape(g: &mut Graph, x: NodeId, to: &[Dim]) -> DResult<NodeId> {
    let holes: Vec<usize> = (0..to.len()).filter(|&k| to[k].as_int() == Some(-1)).collect();
    let mut to = to.to_vec();
    match holes.as_slice() {
        [] => {}
        [k] => {
            let rest: Vec<Dim> = to.iter().enumerate().filter(|(j, _)| j != k).map(|(_, d)| d.clone()).collect();
            let total = Dim::product(g.shape(x));
            let known = Dim::product(&rest);
            let bad = || diag!(AxisSizeMismatch, "cannot infer -1 in {}: {total} elements", fmt_shape(&to));
            if known.as_int().is_some_and(|v| v < 1) {
                return Err(fail(g, bad()));
            }
            let q = total.floordiv(&known).ok_or_else(|| fail(g, bad()))?;
            to[*k] = q;
        }
        _ => return Err(fail(g, diag!(AxisSizeMismatch, "reshape to {} has more than one -1", fmt_shape(&to)))),
    }
    if g.shape(x) == to.as_slice() {
        return Ok(x);
    }
    g.reshape(x, &to)
}

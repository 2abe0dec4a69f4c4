//! Poly Core (`000` §1.6): the polyhedral questions region formation asks
//! of a [`PolyView`], each answered with isl operations on the view's
//! domains, reads, writes and dependences — never by looking at op names.
//!
//! - [`analyze`]: per block its parallel and reduction axes (from the
//!   deltas of its self-dependences), whether it is in the SCoP (affine
//!   closure), its tail axes for a tile, and the barrier hints (edges whose
//!   dependence is not elementwise).
//! - [`can_compute_at`]: compute-at legality and halo of a producer inside
//!   one tile of a consumer (`003` "ルール1: 逆像（Pre-image）の特定").
//! - [`min_buffer_for_edge`]: the smallest buffer that can carry the
//!   producer's values to the consumer (`003` §4's pattern table).
//! - [`make_fusable_groups`]: a greedy grouping along edges where compute-at
//!   is legal. **Extension point:** the cost-model-driven region formation
//!   of `000` §4 (thresholds, `algo_choice`, register and smem budgets)
//!   replaces this rule; it calls the three functions above.
//!
//! Terms. A *tile* of block `c` is one entry per statement axis of `S_c`
//! (`i0, i1, …`, output axes then reduce axes): a size `t > 0`, or
//! [`WHOLE`] (also every axis past the end of the slice) for the whole
//! axis. The tile at position `p` is `{ S_c[i] : p_k·t_k <= i_k < (p_k+1)·t_k }`
//! intersected with the domain. The *access relation* of a producer `P` from
//! a consumer `C` maps each instance of `S_C` to the elements of the tensor
//! `P` it needs: the reads of `C` composed with every block on the way back
//! to `P` (`read ∘ write⁻¹ ∘ read …`, `000` §3.2 "逐次合成"), the union over
//! all paths. Bounds are isl's `dim_min_val`/`dim_max_val`, taken over every
//! parameter value: a symbolic extent that a tile does not cover is
//! unbounded, and a tile on a symbolic axis is measured as a full tile.
//!
//! Invariants of the answers:
//! - a halo is measured against the tile's *share* of the producer axis,
//!   `[p·step, (p+1)·step − 1]` for the interior position `p` and the
//!   `step` the needed range moves by from one tile to the next; it is
//!   `(0, 0)` on an axis the tiles do not move along. It is negative when
//!   the needed box ends inside the share: a strided read (`x[2·i]`: the tile
//!   `i ∈ [4, 7]` needs the box `[8, 14]` of its share `[8, 15]`, halo
//!   `(0, -1)`) or a coarsening one
//!   (`x[i / 2]` with an odd tile). `bytes` is the element count of the
//!   needed box times the producer's dtype size;
//! - `Buffer::Reg` is given only when every producer element feeds at most
//!   one consumer element (so it can stay in the register it was computed
//!   in); `SmemRing` only when the needed box of a tile is bounded.

use std::fmt;

use crate::diag::DResult;
use crate::tiny::NodeId;

use super::isl::{IslResult, Map, Set};
use super::{internal, Block, BlockKind, PolyView};

/// A tile entry meaning "the whole axis".
pub const WHOLE: i64 = 0;

/// Why `can_compute_at` says no (or cannot say).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    /// A block on the way (named) is not in the SCoP.
    NotInScop(String),
    /// The consumer does not read the producer, directly or through others.
    NoDependence,
    /// The tile cuts reduction axis `axis` of the consumer (`tile` of
    /// `extent`, `None` when symbolic): a tile does not finish its outputs.
    SplitsReduction { axis: usize, tile: i64, extent: Option<i64> },
    /// The producer elements one tile needs are unbounded along `axis` (a
    /// symbolic extent the tile does not cover).
    Unbounded { axis: usize },
    /// The tile at `position` needs no producer element (it reads only a
    /// `PAD`'s fill), so the halo cannot be measured there.
    NothingNeeded { position: Vec<i64> },
    /// More tile entries than consumer axes, or a negative one.
    BadTile(String),
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::NotInScop(b) => write!(f, "block {b} is not in the SCoP"),
            Reason::NoDependence => write!(f, "the consumer does not read the producer"),
            Reason::SplitsReduction { axis, tile, extent } => {
                let e = extent.map_or_else(|| "a symbolic extent".to_string(), |e| e.to_string());
                write!(f, "the tile splits reduction axis i{axis} ({tile} of {e})")
            }
            Reason::Unbounded { axis } => write!(f, "the needed producer elements are unbounded along axis {axis}"),
            Reason::NothingNeeded { position } => {
                write!(f, "the tile at {position:?} needs no producer element (it reads only padding)")
            }
            Reason::BadTile(why) => write!(f, "bad tile: {why}"),
        }
    }
}

/// How far the producer box one tile needs reaches beyond the tile's share
/// (`000` §1.6 `halo`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Halo {
    /// Needed-box element count × producer dtype size, in bytes (the larger
    /// of the tile at the origin and an interior tile).
    pub bytes: u64,
    /// Per producer tensor axis `(lo, hi)`: elements needed below the share
    /// and above it (negative: the needed box ends inside the share; see
    /// the module doc); `(0, 0)` on an axis the tiles do not partition.
    pub per_axis: Vec<(i64, i64)>,
}

/// A legal compute-at (`000` §1.6 `ComputeAt` with `ok: true`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ComputeAt {
    /// Per producer tensor axis, the inclusive range of an interior tile
    /// (the tile at the origin when the axis has no interior tile).
    pub needed: Vec<(i64, i64)>,
    /// Per producer tensor axis, how far the needed range moves from one
    /// tile to the next (0: every tile needs the same range).
    pub step: Vec<i64>,
    pub halo: Halo,
}

impl ComputeAt {
    /// The needed extent per producer axis (`hi - lo + 1`).
    pub fn extents(&self) -> Vec<i64> {
        self.needed.iter().map(|(lo, hi)| hi - lo + 1).collect()
    }
}

/// The producer elements one consumer tile needs, and compute-at legality
/// (`000` §1.6 `can_compute_at`; `003` rule 1: the pre-image
/// `S_P(j) = { i ∈ D_P | (i, j) ∈ M_{P→C} }`, here at the tensor level).
///
/// `tile` is per statement axis of the consumer (see the module doc). The
/// needed set is the tile pushed through the access relation; its box is
/// measured (`dim_min`/`dim_max`) at the origin and at an interior tile
/// (position 1 on every axis with three full tiles or a symbolic extent).
/// The *step* of a producer axis is how far its needed range moves when the
/// tile moves by one along the first consumer axis that moves it; the
/// tile's *share* is `[q·step, (q+1)·step)` with `q` that axis's tile
/// position, and the halo is what the needed range has beyond the share.
///
/// Not ok: a tile that cuts a reduction axis of the consumer (axes that
/// carry its self-dependence, [`analyze`]), a block on the way outside the
/// SCoP, no dependence (also when every read on the way lands in a `PAD`'s
/// fill), an unbounded needed range, a measured tile that needs nothing. Errors: `Internal` when
/// isl fails on the view's own objects.
pub fn can_compute_at(
    view: &PolyView<'_>,
    producer: NodeId,
    consumer: NodeId,
    tile: &[i64],
) -> DResult<Result<ComputeAt, Reason>> {
    compute_at(view, producer, consumer, tile).map_err(internal)
}

/// [`can_compute_at`] and, when it is legal, [`min_buffer_for_edge`] for
/// the same tile, with the access relation composed once (what region
/// formation asks of each candidate).
///
/// Errors: `Internal` when isl fails on the view's own objects.
pub fn compute_at_with_buffer(
    view: &PolyView<'_>,
    producer: NodeId,
    consumer: NodeId,
    tile: &[i64],
) -> DResult<Result<(ComputeAt, Buffer), Reason>> {
    let both = || -> IslResult<Result<(ComputeAt, Buffer), Reason>> {
        let access = match access(view, producer, consumer)? {
            Ok(a) => a,
            Err(r) => return Ok(Err(r)),
        };
        let at = match compute_at_on(view, &access, producer, consumer, tile)? {
            Ok(at) => at,
            Err(r) => return Ok(Err(r)),
        };
        let buffer = buffer_for(view, &access, producer, consumer, &at)?;
        Ok(Ok((at, buffer)))
    };
    both().map_err(internal)
}

fn compute_at(
    view: &PolyView<'_>,
    producer: NodeId,
    consumer: NodeId,
    tile: &[i64],
) -> IslResult<Result<ComputeAt, Reason>> {
    match access(view, producer, consumer)? {
        Ok(access) => compute_at_on(view, &access, producer, consumer, tile),
        Err(r) => Ok(Err(r)),
    }
}

/// [`compute_at`] given the access relation of `consumer` to `producer`.
fn compute_at_on(
    view: &PolyView<'_>,
    access: &Map<'_>,
    producer: NodeId,
    consumer: NodeId,
    tile: &[i64],
) -> IslResult<Result<ComputeAt, Reason>> {
    let (Some(c), Some(p)) = (view.block(consumer), view.block(producer)) else { return Ok(Err(Reason::NoDependence)) };
    let Some(cs) = c.scop() else { return Ok(Err(Reason::NotInScop(c.name.clone()))) };
    let rank = cs.domain.n_dim()?;
    if tile.len() > rank || tile.iter().any(|&t| t < 0) {
        return Ok(Err(Reason::BadTile(format!("{tile:?} for the {rank} axes of S_{}", c.name))));
    }
    let tile: Vec<i64> = (0..rank).map(|k| tile.get(k).copied().unwrap_or(WHOLE)).collect();
    let extents = extents(&cs.domain)?;
    let reduction = reduction_axes(view, c)?;
    for &k in &reduction {
        if tile[k] != WHOLE && extents[k].is_none_or(|e| tile[k] < e) {
            return Ok(Err(Reason::SplitsReduction { axis: k, tile: tile[k], extent: extents[k] }));
        }
    }
    // Interior position: 1 where the axis has three full tiles (or is
    // symbolic), so that tiles 1 and 2 are both full and away from edges.
    let interior: Vec<i64> =
        (0..rank).map(|k| i64::from(tile[k] != WHOLE && extents[k].is_none_or(|e| e >= 3 * tile[k]))).collect();
    let origin = vec![0; rank];
    let at = |pos: &[i64]| -> IslResult<Result<Vec<(i64, i64)>, Reason>> {
        let needed = tile_set(c, &cs.domain, &tile, pos)?.apply(access)?;
        // isl bounds an empty set by NaN: say so rather than "unbounded".
        if needed.is_empty()? {
            return Ok(Err(Reason::NothingNeeded { position: pos.to_vec() }));
        }
        bounds(&needed)
    };
    let inner = match at(&interior)? {
        Ok(b) => b,
        Err(r) => return Ok(Err(r)),
    };
    let first = match at(&origin)? {
        Ok(b) => b,
        Err(r) => return Ok(Err(r)),
    };
    let n_axes = inner.len();
    let mut step = vec![0; n_axes];
    let mut share_at = vec![0; n_axes];
    for k in (0..rank).filter(|&k| interior[k] == 1) {
        let mut next = interior.clone();
        next[k] += 1;
        let moved = match at(&next)? {
            Ok(b) => b,
            Err(r) => return Ok(Err(r)),
        };
        for d in 0..n_axes {
            let delta = moved[d].0 - inner[d].0;
            if step[d] == 0 && delta != 0 {
                step[d] = delta;
                share_at[d] = interior[k];
            }
        }
    }
    let per_axis = (0..n_axes)
        .map(|d| match step[d] {
            0 => (0, 0),
            s => (share_at[d] * s - inner[d].0, inner[d].1 - ((share_at[d] + 1) * s - 1)),
        })
        .collect();
    let count = |b: &[(i64, i64)]| b.iter().map(|(lo, hi)| (hi - lo + 1).max(0) as u64).product::<u64>();
    let bytes = count(&inner).max(count(&first)) * p.dtype.size_bytes() as u64;
    Ok(Ok(ComputeAt { needed: inner, step, halo: Halo { bytes, per_axis } }))
}

/// The producer elements the tile of `consumer` at position `pos` needs
/// (the tile pushed through the access relation, module doc): the set whose
/// box [`can_compute_at`] measures. `tile` and `pos` are per statement axis
/// of the consumer; missing entries are [`WHOLE`] and 0.
///
/// Not ok: no dependence, a block on the way outside the SCoP, a bad tile.
/// Errors: `Internal` when isl fails on the view's own objects.
pub fn footprint<'c>(
    view: &PolyView<'c>,
    producer: NodeId,
    consumer: NodeId,
    tile: &[i64],
    pos: &[i64],
) -> DResult<Result<Set<'c>, Reason>> {
    needed_set(view, producer, consumer, tile, pos).map_err(internal)
}

fn needed_set<'c>(
    view: &PolyView<'c>,
    producer: NodeId,
    consumer: NodeId,
    tile: &[i64],
    pos: &[i64],
) -> IslResult<Result<Set<'c>, Reason>> {
    let access = match access(view, producer, consumer)? {
        Ok(a) => a,
        Err(r) => return Ok(Err(r)),
    };
    let Some(c) = view.block(consumer) else { return Ok(Err(Reason::NoDependence)) };
    let Some(cs) = c.scop() else { return Ok(Err(Reason::NotInScop(c.name.clone()))) };
    let rank = cs.domain.n_dim()?;
    if tile.len() > rank || pos.len() > rank || tile.iter().chain(pos).any(|&t| t < 0) {
        return Ok(Err(Reason::BadTile(format!("{tile:?} at {pos:?} for the {rank} axes of S_{}", c.name))));
    }
    let tile: Vec<i64> = (0..rank).map(|k| tile.get(k).copied().unwrap_or(WHOLE)).collect();
    let pos: Vec<i64> = (0..rank).map(|k| pos.get(k).copied().unwrap_or(0)).collect();
    Ok(Ok(tile_set(c, &cs.domain, &tile, &pos)?.apply(&access)?))
}

/// Where a producer's values live between producer and consumer (`000`
/// §1.6 `MinBuffer`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufferKind {
    /// In the registers of the thread that computed them.
    Reg,
    /// A ring of `depth` slices along the streaming (outermost haloed) axis.
    SmemRing { depth: u32 },
    /// Global memory: materialised.
    Gmem,
}

/// The answer of [`min_buffer_for_edge`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Buffer {
    pub kind: BufferKind,
    /// Per consumer tile, in bytes (`Reg`: the needed box; `SmemRing`:
    /// `depth` slices of the needed box; `Gmem`: the producer tensor), `None`
    /// when unknown (a symbolic extent).
    pub bytes: Option<u64>,
    /// Why this kind, in words.
    pub why: &'static str,
}

/// The smallest buffer that carries `producer`'s values to `consumer` for
/// one consumer `tile` (`000` §1.6 `min_buffer_for_edge`), by `003`'s table
/// of producer → consumer relations, each decided by isl on the element
/// relation `E = access⁻¹ ∘ write_C` (producer element → consumer elements
/// that need it):
/// - `E` single-valued (One-to-One, or a non-overlapping window such as
///   pool 2×2 stride 2): every producer element is used by one consumer
///   element — `Reg`, the bytes of the needed box;
/// - else, when the producer is a reduction (its axes carry a
///   self-dependence) and a consumer element needs one producer element: a
///   reduce-to-broadcast, every consumer tile waits for the whole reduction
///   (`003` Many-to-Many, "Barrier が必要") — `Gmem`;
/// - else, a bounded window that overlaps between tiles (conv 3×3, pool 3×3
///   stride 2; `003` Many-to-One, "Buffer が必要") — `SmemRing` with
///   `depth = lo + hi + 1` along the outermost producer axis whose halo is
///   not zero, bytes = `depth` slices of the needed box; a reuse with no
///   halo (a broadcast of a non-reduction) is a ring of depth 1;
/// - `Gmem` for a leaf producer (already in global memory), a non-SCoP
///   block on the way, an unbounded needed box, or a tile compute-at
///   rejects.
pub fn min_buffer_for_edge(view: &PolyView<'_>, producer: NodeId, consumer: NodeId, tile: &[i64]) -> DResult<Buffer> {
    min_buffer(view, producer, consumer, tile).map_err(internal)
}

fn min_buffer(view: &PolyView<'_>, producer: NodeId, consumer: NodeId, tile: &[i64]) -> IslResult<Buffer> {
    let Some(p) = view.block(producer) else {
        return Ok(Buffer { kind: BufferKind::Gmem, bytes: None, why: "no such producer" });
    };
    let Ok(access) = access(view, producer, consumer)? else {
        return Ok(gmem(p, "not in the SCoP or no dependence"));
    };
    match compute_at_on(view, &access, producer, consumer, tile)? {
        Ok(at) => buffer_for(view, &access, producer, consumer, &at),
        Err(_) => Ok(gmem(p, "compute-at is not legal for this tile")),
    }
}

/// `Gmem` for producer `p`: its whole tensor's bytes, when bounded.
fn gmem(p: &Block<'_>, why: &'static str) -> Buffer {
    let whole = p
        .scop()
        .and_then(|s| extents(&s.write.range().ok()?).ok())
        .and_then(|e| e.iter().try_fold(p.dtype.size_bytes() as u64, |acc, x| x.map(|x| acc * x as u64)));
    Buffer { kind: BufferKind::Gmem, bytes: whole, why }
}

/// [`min_buffer`] given the access relation and a legal compute-at.
fn buffer_for(
    view: &PolyView<'_>,
    access: &Map<'_>,
    producer: NodeId,
    consumer: NodeId,
    at: &ComputeAt,
) -> IslResult<Buffer> {
    let Some(p) = view.block(producer) else {
        return Ok(Buffer { kind: BufferKind::Gmem, bytes: None, why: "no such producer" });
    };
    if p.kind == BlockKind::Leaf {
        return Ok(gmem(p, "a leaf is a kernel argument in global memory"));
    }
    let gmem = |why| gmem(p, why);
    let Some(cs) = view.block(consumer).and_then(Block::scop) else { return Ok(gmem("not in the SCoP")) };
    // Producer element -> consumer elements that need it.
    let elements = access.reverse()?.apply_range(&cs.write)?;
    if elements.is_single_valued()? {
        return Ok(Buffer {
            kind: BufferKind::Reg,
            bytes: Some(at.halo.bytes),
            why: "each producer element feeds one consumer element",
        });
    }
    let needs_one = cs.write.reverse()?.apply_range(access)?.is_single_valued()?;
    if needs_one && !reduction_axes(view, p)?.is_empty() {
        return Ok(gmem("a reduction broadcast to its consumers: every tile waits for all of it"));
    }
    let stream = at.halo.per_axis.iter().position(|&(lo, hi)| lo + hi != 0);
    let depth = stream.map_or(1, |d| at.halo.per_axis[d].0 + at.halo.per_axis[d].1 + 1);
    let ext = at.extents();
    // Saturating: a symbolic extent is bounded by a huge sentinel, and a
    // buffer that large is as good as unbounded.
    let slice: u64 = ext
        .iter()
        .enumerate()
        .filter(|&(d, _)| Some(d) != stream)
        .fold(1u64, |acc, (_, &e)| acc.saturating_mul(e as u64));
    let bytes = (depth as u64).saturating_mul(slice).saturating_mul(p.dtype.size_bytes() as u64);
    Ok(Buffer {
        kind: BufferKind::SmemRing { depth: depth as u32 },
        bytes: Some(bytes),
        why: "a sliding window shared by neighbouring tiles",
    })
}

/// One axis whose extent a tile does not divide.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TailAxis {
    pub axis: usize,
    /// `None`: a symbolic extent (a tail is possible for any tile).
    pub extent: Option<i64>,
}

/// What [`analyze`] says of one block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockAnalysis {
    pub block: NodeId,
    /// In the SCoP (its accesses are quasi-affine; `000` §1.6 "アフィン閉性").
    pub affine: bool,
    /// Statement axes no self-dependence crosses (every delta is 0 there).
    pub parallel: Vec<usize>,
    /// Statement axes some self-dependence crosses (the accumulator's).
    pub reduction: Vec<usize>,
    /// Axes with a symbolic extent, or (given a tile) an extent the tile
    /// size does not divide.
    pub tail: Vec<TailAxis>,
}

/// How a dependence is not elementwise (`003`'s table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Relation {
    /// A producer element feeds several consumer elements (broadcast).
    OneToMany,
    /// A consumer element needs several producer elements (window, reduce).
    ManyToOne,
    ManyToMany,
}

/// An edge whose consumer cannot simply read the element the same thread
/// produced: a synchronisation (`commit/wait`, `mbarrier`) is needed if the
/// two share a kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BarrierHint {
    pub from: NodeId,
    pub to: NodeId,
    pub relation: Relation,
}

/// The answer of [`analyze`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Analysis {
    /// One per block, in node order.
    pub blocks: Vec<BlockAnalysis>,
    /// One per non-self SCoP edge whose element relation is not a bijection.
    pub barriers: Vec<BarrierHint>,
}

/// Per-block and per-edge facts (`000` §1.6 解析項目), computed from isl:
/// - parallel / reduction axes: the deltas of the block's self-edges (its
///   accumulator, `{ S[i, r] -> S[i, r'] : r <lex r' }`); an axis is
///   parallel when `dim_min = dim_max = 0` over the deltas, else it carries
///   a dependence (reduction). A block without a self-edge is all parallel;
///   a non-SCoP block has neither list;
/// - affine: the block is in the SCoP;
/// - tail: per axis, `dim_max` of the domain (over every parameter value):
///   unbounded is symbolic; with `tile` (a size per axis, [`WHOLE`] or
///   missing for none) an extent the size does not divide;
/// - barriers: for each edge between SCoP blocks, the element relation
///   consumer element → producer elements read (`write⁻¹ ∘ read`); not a
///   bijection (single-valued and injective) means a barrier hint.
pub fn analyze(view: &PolyView<'_>, tile: &[i64]) -> DResult<Analysis> {
    analysis(view, tile).map_err(internal)
}

fn analysis(view: &PolyView<'_>, tile: &[i64]) -> IslResult<Analysis> {
    let mut blocks = Vec::new();
    for b in &view.blocks {
        let Some(s) = b.scop() else {
            blocks.push(BlockAnalysis {
                block: b.node,
                affine: false,
                parallel: vec![],
                reduction: vec![],
                tail: vec![],
            });
            continue;
        };
        let reduction = reduction_axes(view, b)?;
        let ext = extents(&s.domain)?;
        let parallel = (0..ext.len()).filter(|k| !reduction.contains(k)).collect();
        let tail = ext
            .iter()
            .enumerate()
            .filter(|&(k, e)| match (e, tile.get(k)) {
                (None, _) => true,
                (Some(e), Some(&t)) if t > 0 => e % t != 0,
                _ => false,
            })
            .map(|(axis, &extent)| TailAxis { axis, extent })
            .collect();
        blocks.push(BlockAnalysis { block: b.node, affine: true, parallel, reduction, tail });
    }
    let mut barriers = Vec::new();
    for e in view.edges.iter().filter(|e| e.from != e.to && e.deps.is_some()) {
        let (Some(_), Some(c)) = (view.block(e.from).and_then(Block::scop), view.block(e.to).and_then(Block::scop))
        else {
            continue;
        };
        let mut rel: Option<Map<'_>> = None;
        for r in c.reads.iter().filter(|r| r.src == e.from) {
            rel = Some(match rel {
                None => r.map.try_clone()?,
                Some(a) => a.union(&r.map)?,
            });
        }
        let Some(rel) = rel else { continue };
        // Consumer element -> producer elements.
        let rel = c.write.reverse()?.apply_range(&rel)?;
        let (single, injective) = (rel.is_single_valued()?, rel.is_injective()?);
        let relation = match (single, injective) {
            (true, true) => continue,
            (true, false) => Relation::OneToMany,
            (false, true) => Relation::ManyToOne,
            (false, false) => Relation::ManyToMany,
        };
        barriers.push(BarrierHint { from: e.from, to: e.to, relation });
    }
    Ok(Analysis { blocks, barriers })
}

/// Fusable groups (`000` §1.6 `make_fusable_groups`): a producer joins its
/// consumer's group when it has exactly one consumer block, neither is a
/// leaf, and [`can_compute_at`] is ok for the consumer tile that has `tile`
/// on every parallel axis and the whole of every reduction axis. Groups are
/// the connected components of those edges, each in node order, ordered by
/// their first block; leaves are in no group.
///
/// **Extension point:** this greedy rule ignores profitability (register
/// and smem budgets, recompute cost); the region formation of `000` §4
/// replaces it.
pub fn make_fusable_groups(view: &PolyView<'_>, tile: i64) -> DResult<Vec<Vec<NodeId>>> {
    let n = view.blocks.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut k: usize) -> usize {
        while parent[k] != k {
            parent[k] = parent[parent[k]];
            k = parent[k];
        }
        k
    }
    let consumers = |id: NodeId| {
        let mut to: Vec<NodeId> = view.edges.iter().filter(|e| e.from == id && e.to != id).map(|e| e.to).collect();
        to.dedup();
        to
    };
    for b in view.blocks.iter().filter(|b| b.kind != BlockKind::Leaf && b.scop().is_some()) {
        let [c] = consumers(b.node)[..] else { continue };
        let Some(cb) = view.block(c).filter(|cb| cb.scop().is_some()) else { continue };
        let red = reduction_axes(view, cb).map_err(internal)?;
        let t: Vec<i64> = (0..cb.axes.len()).map(|k| if red.contains(&k) { WHOLE } else { tile }).collect();
        if can_compute_at(view, b.node, c, &t)?.is_ok() {
            let (x, y) = (root(&mut parent, b.node.index()), root(&mut parent, c.index()));
            parent[x] = y;
        }
    }
    let mut groups: Vec<(usize, Vec<NodeId>)> = Vec::new();
    for b in view.blocks.iter().filter(|b| b.kind != BlockKind::Leaf) {
        let r = root(&mut parent, b.node.index());
        match groups.iter_mut().find(|(g, _)| *g == r) {
            Some((_, members)) => members.push(b.node),
            None => groups.push((r, vec![b.node])),
        }
    }
    Ok(groups.into_iter().map(|(_, m)| m).collect())
}

/// Statement axes of `b` that a self-dependence crosses: where the deltas
/// of its self-edges are not identically 0.
pub fn reduction_axes(view: &PolyView<'_>, b: &Block<'_>) -> IslResult<Vec<usize>> {
    let mut out = Vec::new();
    for e in view.edges.iter().filter(|e| e.from == b.node && e.to == b.node) {
        for m in e.deps.iter().flat_map(|d| &d.flow) {
            let d = m.deltas()?;
            for k in 0..d.n_dim()? {
                if (d.dim_min(k)?, d.dim_max(k)?) != (Some(0), Some(0)) && !d.is_empty()? && !out.contains(&k) {
                    out.push(k);
                }
            }
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// Per set dimension, `dim_max + 1` when `dim_min` is 0 and the maximum is
/// bounded over every parameter value; `None` otherwise.
fn extents(s: &Set<'_>) -> IslResult<Vec<Option<i64>>> {
    (0..s.n_dim()?).map(|k| Ok(s.dim_max(k)?.map(|m| m + 1))).collect()
}

/// Inclusive per-dimension bounds of `s`, or the first unbounded axis.
fn bounds(s: &Set<'_>) -> IslResult<Result<Vec<(i64, i64)>, Reason>> {
    let mut out = Vec::new();
    for k in 0..s.n_dim()? {
        match (s.dim_min(k)?, s.dim_max(k)?) {
            (Some(lo), Some(hi)) => out.push((lo, hi)),
            _ => return Ok(Err(Reason::Unbounded { axis: k })),
        }
    }
    Ok(Ok(out))
}

/// The tile of `c` at position `pos` (module doc), on its domain.
fn tile_set<'c>(c: &Block<'_>, domain: &Set<'c>, tile: &[i64], pos: &[i64]) -> IslResult<Set<'c>> {
    let params = domain.param_names()?.join(", ");
    let vars: Vec<String> = (0..tile.len()).map(|k| format!("i{k}")).collect();
    let cons: Vec<String> = (0..tile.len())
        .filter(|&k| tile[k] != WHOLE)
        .map(|k| format!("{} <= i{k} < {}", pos[k] * tile[k], (pos[k] + 1) * tile[k]))
        .collect();
    let cond = if cons.is_empty() { String::new() } else { format!(" : {}", cons.join(" and ")) };
    let t = domain.ctx().set(&format!("[{params}] -> {{ S_{}[{}]{cond} }}", c.name, vars.join(", ")))?;
    t.intersect(domain)
}

/// The access relation `S_consumer -> producer` tensor elements (module
/// doc), or why there is none.
fn access<'c>(view: &PolyView<'c>, producer: NodeId, consumer: NodeId) -> IslResult<Result<Map<'c>, Reason>> {
    if producer.index() >= consumer.index() || consumer.index() >= view.blocks.len() {
        return Ok(Err(Reason::NoDependence));
    }
    // The blocks on a path: descendants of the producer up to the consumer.
    let mut on_path = vec![false; view.blocks.len()];
    on_path[producer.index()] = true;
    for e in &view.edges {
        if e.from != e.to && on_path[e.from.index()] && e.to.index() <= consumer.index() {
            on_path[e.to.index()] = true; // edges are in node order
        }
    }
    if !on_path[consumer.index()] {
        return Ok(Err(Reason::NoDependence));
    }
    for b in &view.blocks[producer.index()..=consumer.index()] {
        if on_path[b.node.index()] && b.scop().is_none() {
            return Ok(Err(Reason::NotInScop(b.name.clone())));
        }
    }
    // rel[b]: S_consumer -> S_b instances needed, walking back in node order.
    let c = view.blocks[consumer.index()].scop().ok_or_else(|| super::IslError("consumer left the SCoP".into()))?;
    let mut rel: Vec<Option<Map<'c>>> = (0..view.blocks.len()).map(|_| None).collect();
    rel[consumer.index()] = Some(c.domain.identity()?);
    let mut to_producer: Option<Map<'c>> = None;
    for k in (producer.index() + 1..=consumer.index()).rev() {
        let (Some(here), Some(s)) = (rel[k].take(), view.blocks[k].scop()) else { continue };
        for r in s.reads.iter().filter(|r| on_path[r.src.index()]) {
            let elems = here.apply_range(&r.map)?;
            if r.src == producer {
                to_producer = Some(match to_producer {
                    None => elems,
                    Some(a) => a.union(&elems)?,
                });
                continue;
            }
            let Some(src) = view.blocks[r.src.index()].scop() else { continue };
            let inst = elems.apply_range(&src.write.reverse()?)?;
            let slot = &mut rel[r.src.index()];
            *slot = Some(match slot.take() {
                None => inst,
                Some(a) => a.union(&inst)?,
            });
        }
        rel[k] = Some(here);
    }
    match to_producer {
        // Paths whose reads all land in a `PAD`'s fill carry no dependence.
        Some(m) if !m.is_empty()? => Ok(Ok(m.coalesce()?)),
        _ => Ok(Err(Reason::NoDependence)),
    }
}

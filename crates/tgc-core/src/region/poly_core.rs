//! The compute-at fusions of region formation v1, decided by Poly Core
//! (`000` §1.6, §4.1 steps 3 and 5; `003` "Consumer の反復空間を主軸とし…").
//!
//! A candidate is a stored `REDUCE` `p` (a group of its own) whose unique
//! reader chain (element-wise and movement nodes, none stored) ends at a
//! `REDUCE` `c` that is another group's accumulator. The consumer point is
//! the tile with 1 on every output axis of `c` and the whole of its reduce
//! axes. `p` is fused into `c`'s region when
//! - [`poly::core::can_compute_at`] accepts that tile (the pre-image of one
//!   consumer point is a bounded box of `p`; legality, `003` rule 1), and
//! - [`poly::core::min_buffer_for_edge`] for that tile is `reg` or
//!   `smem_ring`, not `gmem` (a reduce-to-broadcast such as softmax's sum
//!   feeding every column of the next GEMM would re-run the whole reduction
//!   per consumer point).
//!
//! Then, for each legal candidate (`000` §4.1 steps 4–5):
//! - the §4.2 threshold on the local edge buffer and the differential cost
//!   `Δtime` of [`super::cost`] (recompute factor from Poly Core's box);
//!   a candidate over the threshold or with `Δtime ≥ 0` is a stop;
//! - [`super::select`] chooses among the rest (exact ILP on windows of up
//!   to 30 nodes, backward greedy with one-step rollback beyond), so that
//!   no region computes two producers at its reads and no fused producer
//!   has one of its own (one compute-at level per region in v1).
//!
//! A block outside the SCoP on the way is a region boundary
//! ([`StopReason::NonScop`]).
//!
//! Poly Core is asked on the view of the part between `p` and `c` alone
//! ([`poly::Parts`]), once per distinct part: candidates whose parts have
//! the same key share the answer unless it names a block.

use std::collections::HashMap;

use crate::diag::DResult;
use crate::index_book::IndexBook;
use crate::poly::{self, core::BufferKind, core::Reason};
use crate::sym::Dim;
use crate::tiny::{Graph, NodeId, Op};

use super::cost::{self, EdgeFacts, Machine};
use super::from_tiny::Fusion;
use super::grouping::{is_bijective_movement, Formation};
use super::select::{self, Candidate, Left};
use super::{EdgeBuffer, LocalEdge, Stop, StopReason};

/// The fusions to take on machine `m`, in node order of the producers;
/// rejected candidates are pushed to `stops`.
///
/// Errors: `Internal` when isl fails on the view's own objects.
pub(super) fn compute_at_fusions(
    g: &Graph,
    book: &IndexBook,
    f: &Formation,
    m: &Machine,
    stops: &mut Vec<Stop>,
) -> DResult<Vec<Fusion>> {
    let consumers = g.consumers();
    let mut asks = Vec::new();
    for p in candidates(g, f) {
        let readers = f.readers[p.index()];
        if readers != 1 {
            stops.push(Stop { producer: p, consumer: None, reason: StopReason::NotUcc(readers) });
            continue;
        }
        let Some(c) = chain_end(g, f, &consumers, p) else { continue };
        let reason = if !matches!(g.node(c).op, Op::Reduce { .. }) {
            Some(if f.materialised[c.index()] {
                epilogue_stop(g, f, &consumers, p, c)
            } else {
                StopReason::NotAtAReduction
            })
        } else if !f.kernels.iter().any(|kp| kp.reduce == Some(c)) {
            Some(StopReason::NotAtAReduction)
        } else {
            None
        };
        match reason {
            Some(reason) => stops.push(Stop { producer: p, consumer: Some(c), reason }),
            None => asks.push((p, c)),
        }
    }
    if asks.is_empty() {
        return Ok(Vec::new());
    }
    let ctx = poly::Ctx::new();
    let mut parts = match poly::Parts::new(&ctx, g, book, &poly::Options::default()) {
        Ok(p) => p,
        Err(e) => {
            for (p, c) in asks {
                let reason = StopReason::NoPolyView(e.message.clone());
                stops.push(Stop { producer: p, consumer: Some(c), reason });
            }
            return Ok(Vec::new());
        }
    };
    let mut asked: HashMap<String, Answer> = HashMap::new();
    let mut legal: Vec<(Candidate, Fusion)> = Vec::new();
    for (p, c) in asks {
        let stop = |reason| Stop { producer: p, consumer: Some(c), reason };
        let part = parts.between(p, c);
        let key = parts.key(&part)?;
        let answer = match asked.get(&key) {
            Some(a) => a.clone(),
            None => {
                let a = ask(&mut parts, &part, p, c, &vec![1; g.shape(c).len()])?;
                if a.nameless() {
                    asked.insert(key, a.clone());
                }
                a
            }
        };
        let (halo_bytes, buffer, buffer_bytes) = match answer {
            Answer::Fuse { halo_bytes, buffer, buffer_bytes } => (halo_bytes, buffer, buffer_bytes),
            Answer::Refused(Reason::NotInScop(block)) => {
                stops.push(stop(StopReason::NonScop(block)));
                continue;
            }
            Answer::Refused(why) => {
                stops.push(stop(StopReason::ComputeAt(why.to_string())));
                continue;
            }
            Answer::NeedsGmem(why) => {
                stops.push(stop(StopReason::NeedsGmem(why.to_string())));
                continue;
            }
            Answer::NoPolyView(why) => {
                stops.push(stop(StopReason::NoPolyView(why)));
                continue;
            }
        };
        let facts = edge_facts(g, p, c, halo_bytes, buffer_bytes);
        if let Err(over) = cost::check_thresholds(m, &facts) {
            stops.push(stop(StopReason::OverThreshold { bytes: over.bytes, limit: over.limit, machine: m.name }));
            continue;
        }
        let d = cost::delta(m, &facts);
        if d.time() >= 0.0 {
            let reason = StopReason::Cost { delta: d.time(), benefit: d.benefit, cost: d.cost, recompute: d.recompute };
            stops.push(stop(reason));
            continue;
        }
        let edge = LocalEdge { producer: p, consumer: c, buffer, bytes: buffer_bytes };
        legal
            .push((Candidate { producer: p, consumer: c, delta: d.time() }, Fusion { producer: p, consumer: c, edge }));
    }
    let cands: Vec<Candidate> = legal.iter().map(|(x, _)| *x).collect();
    let mut fusions = Vec::new();
    for ((x, fusion), chosen) in legal.into_iter().zip(select::select(&cands)) {
        let reason = match chosen {
            Ok(()) => {
                fusions.push(fusion);
                continue;
            }
            Err(Left::Conflict(v)) => StopReason::Conflict(v),
            Err(Left::RolledBack(v)) => StopReason::Rollback(v),
            Err(Left::NotChosen(n)) => StopReason::NotChosen(n),
        };
        stops.push(Stop { producer: x.producer, consumer: Some(x.consumer), reason });
    }
    Ok(fusions)
}

/// What Poly Core says of fusing `p` into `c` for one consumer point.
#[derive(Clone, Debug)]
enum Answer {
    /// Legal: the needed box's bytes, and the smallest buffer (not `gmem`)
    /// with its bytes.
    Fuse { halo_bytes: u64, buffer: EdgeBuffer, buffer_bytes: Option<u64> },
    /// `can_compute_at` says no.
    Refused(Reason),
    /// `min_buffer_for_edge` says `gmem`, for this reason.
    NeedsGmem(&'static str),
    /// The part's view failed to build (the error's message).
    NoPolyView(String),
}

impl Answer {
    /// True when the answer names no block, so that it holds for every
    /// part with the same [`poly::Parts::key`].
    fn nameless(&self) -> bool {
        match self {
            Answer::Fuse { .. } | Answer::NeedsGmem(_) => true,
            Answer::Refused(r) => match r {
                Reason::NotInScop(_) | Reason::BadTile(_) => false,
                Reason::NoDependence
                | Reason::SplitsReduction { .. }
                | Reason::Unbounded { .. }
                | Reason::NothingNeeded { .. } => true,
            },
            Answer::NoPolyView(_) => false,
        }
    }
}

/// Asks Poly Core, on the view of `part` (the nodes from `p` to `c`),
/// whether `p` can be computed at `tile` of `c` and in which buffer.
///
/// Errors: `Internal` when isl fails on the view's own objects.
fn ask(parts: &mut poly::Parts<'_, '_>, part: &[NodeId], p: NodeId, c: NodeId, tile: &[i64]) -> DResult<Answer> {
    let view = match parts.view(part) {
        Ok(v) => v,
        Err(e) => return Ok(Answer::NoPolyView(e.message)),
    };
    let (at, b) = match poly::core::compute_at_with_buffer(&view, p, c, tile)? {
        Ok(both) => both,
        Err(why) => return Ok(Answer::Refused(why)),
    };
    Ok(match b.kind {
        BufferKind::Reg => Answer::Fuse { halo_bytes: at.halo.bytes, buffer: EdgeBuffer::Reg, buffer_bytes: b.bytes },
        BufferKind::SmemRing { depth } => {
            Answer::Fuse { halo_bytes: at.halo.bytes, buffer: EdgeBuffer::SmemRing { depth }, buffer_bytes: b.bytes }
        }
        BufferKind::Gmem => Answer::NeedsGmem(b.why),
    })
}

/// The cost model's view of edge `p → c` (`needed_bytes`: Poly Core's box
/// for one consumer point; `buffer_bytes`: its `min_buffer_for_edge`).
/// Symbolic extents count as [`cost::SYMBOLIC_EXTENT`].
fn edge_facts(g: &Graph, p: NodeId, c: NodeId, needed_bytes: u64, buffer_bytes: Option<u64>) -> EdgeFacts {
    let count = |v: NodeId| {
        let n = Dim::product(g.shape(v)).eval(&|_| Some(cost::SYMBOLIC_EXTENT)).unwrap_or(cost::SYMBOLIC_EXTENT);
        n.max(1) as f64
    };
    let producer_elems = count(p);
    let reduced = g.node(p).src.first().map_or(1.0, |&s| count(s) / producer_elems);
    let elem_bytes = g.dtype(p).size_bytes() as f64;
    EdgeFacts {
        producer_elems,
        flops_per_elem: 2.0 * reduced,
        elem_bytes,
        consumer_points: count(c),
        needed_per_point: needed_bytes as f64 / elem_bytes,
        buffer_bytes,
    }
}

/// The live reader chain of `p` up to the first node that is stored or is
/// neither element-wise nor movement: that node, when `p`'s readers form a
/// unique chain (`readers[p] == 1`, so every node on the way has one live
/// reader).
fn chain_end(g: &Graph, f: &Formation, consumers: &[Vec<NodeId>], p: NodeId) -> Option<NodeId> {
    let reader = |v: NodeId| consumers[v.index()].iter().copied().find(|c| f.live[c.index()]);
    let mut c = reader(p)?;
    loop {
        let op = &g.node(c).op;
        if f.materialised[c.index()] || !(op.is_elementwise() || op.is_movement()) || matches!(op, Op::Reduce { .. }) {
            return Some(c);
        }
        c = reader(c)?;
    }
}

/// Why the grouping did not make `p` the accumulator of the stored
/// consumer `c` at the end of its unique reader chain.
fn epilogue_stop(g: &Graph, f: &Formation, consumers: &[Vec<NodeId>], p: NodeId, c: NodeId) -> StopReason {
    if !g.node(c).op.is_elementwise() {
        return StopReason::StoredMovement;
    }
    let mut v = p;
    while let Some(r) = consumers[v.index()].iter().copied().find(|r| f.live[r.index()]) {
        if r == c {
            break;
        }
        if g.node(r).op.is_movement() && !is_bijective_movement(&g.node(r).op) {
            return StopReason::EpilogueMovement(r);
        }
        v = r;
    }
    match f.kernels.iter().find(|kp| kp.root == c).and_then(|kp| kp.reduce) {
        Some(other) => StopReason::SecondAccumulator(other),
        None => StopReason::NotAtAReduction,
    }
}

/// The stops and fusions every graph gets regardless of Poly Core: `p` is
/// a candidate producer when it is a group's stored `REDUCE` root.
fn candidates(g: &Graph, f: &Formation) -> Vec<NodeId> {
    f.kernels
        .iter()
        .filter(|kp| kp.reduce == Some(kp.root) && f.live[kp.root.index()])
        .filter(|kp| !g.outputs.iter().any(|o| o.node == kp.root) && f.readers[kp.root.index()] > 0)
        .map(|kp| kp.root)
        .collect()
}

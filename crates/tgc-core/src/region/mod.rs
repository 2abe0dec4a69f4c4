//! Region Buffer SSA (`000` §1.5, §12.4): the graph cut into regions, one
//! kernel each. A region's outputs are the only values it writes to memory
//! (each a [`MemRef`]); everything else in its body is a value in SSA form —
//! a Tiny node computed where it is read, never stored.
//!
//! A region is one of two kinds:
//! - **compute**: a body of [`Let`]s, each naming a Tiny node, in node
//!   (topological) order. The last let is the region's *root*, the one value
//!   with `materialize: gmem`; it is stored to the region's one output. At
//!   most one `REDUCE` of the body is the *accumulator* ([`How::Accumulate`]):
//!   its reduction runs in a register over its reduce loops, inside the
//!   root's loop nest, and the lets after it are its epilogue (`000` §1.5
//!   "`mul+reduce + epilogue` は同一 Region"). Any other `REDUCE` of the body
//!   is *computed at* the accumulator's reads ([`How::ComputeAt`], `003`'s
//!   consumer-driven nest): its reduction is re-run, in its own register, at
//!   every point where the accumulator's value reads it; a [`LocalEdge`]
//!   records the edge, its Poly Core buffer and halo for the plan
//!   (`000` §4.1 step 6). A `SCAN` root is the region's running fold
//!   ([`How::Scan`]; such a region has no accumulator). Every other let is
//!   inlined ([`How::Inline`]).
//!
//!   Trade-off of compute-at by recompute: the producer's buffer and its
//!   write-back and read-back are gone, but every read re-runs its
//!   reduction — a 2×2 stride-2 pool re-runs each conv point once (each
//!   feeds one window), a 3×3 stride-2 pool up to 4 times, a stride-1 pool
//!   k_h·k_w times. A tiled plan could keep the overlap in the `smem_ring`
//!   the local edge names instead; the CPU back end recomputes.
//! - **copy**: no body; copies a value already in memory (a graph input, or
//!   a value another region stored) to a graph output.
//!
//! Invariants (checked by [`verify::verify`]):
//! - regions are in execution order; every input of a region is a graph
//!   `INPUT` or the output of an earlier region;
//! - a compute region's lets name distinct nodes in increasing node order;
//!   exactly the last is `gmem` (its root) and it is the region's one
//!   output; every other let is `deferred`;
//! - every source of a non-`INPUT` let is a let of the same region or one of
//!   its inputs; a let is never an `INPUT`;
//! - at most one let is [`How::Accumulate`], a `REDUCE`; a [`How::ComputeAt`]
//!   let is a `REDUCE` other than the root, the region has an accumulator,
//!   and one local edge runs from it to the accumulator;
//! - a node is the output of at most one compute region; graph output `k` is
//!   the output of exactly one region (compute or copy);
//! - a [`MemRef`] has its node's shape, row-major strides, an alignment that
//!   is a power of two and at least the element size, and `noalias`.

#[cfg(feature = "poly")]
pub mod cost;
pub mod from_tiny;
pub mod grouping;
pub mod json;
#[cfg(feature = "poly")]
mod poly_core;
#[cfg(feature = "poly")]
pub mod select;
#[cfg(all(test, feature = "poly"))]
mod tests;
pub mod text;
pub mod verify;

use std::fmt;

use crate::sym::Dim;
use crate::tiny::{Graph, NodeId};

pub use from_tiny::{form, form_with, front, Front};
pub use grouping::Grouping;
pub use text::dump;

/// A region's index in [`Regions::regions`] (its execution position).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RegionId(pub u32);

/// A dense tensor in memory (`000` §12.4 `memref`).
#[derive(Clone, Debug, PartialEq)]
pub struct MemRef {
    pub shape: Vec<Dim>,
    /// In elements, row-major.
    pub strides: Vec<Dim>,
    /// In bytes: what generated code may assume of the address. The CPU
    /// backend assumes element alignment only; a GPU plan raises it.
    pub alignment: u32,
    /// No other memref of the kernel overlaps it (`restrict`).
    pub noalias: bool,
}

impl MemRef {
    /// The row-major memref of node `v`.
    pub fn of(g: &Graph, v: NodeId) -> MemRef {
        let t = g.ty(v);
        let mut strides = vec![Dim::int(1); t.shape.len()];
        for k in (0..t.shape.len().saturating_sub(1)).rev() {
            strides[k] = &strides[k + 1] * &t.shape[k + 1];
        }
        MemRef { shape: t.shape.clone(), strides, alignment: t.dtype.size_bytes() as u32, noalias: true }
    }
}

/// Whether a value of a region's body is stored (`000` §1.5 `materialize`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Materialize {
    /// A value in SSA form: computed where it is read, never stored.
    Deferred,
    /// Stored to the region's output memref in global memory.
    Gmem,
}

/// How a let is computed inside its region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    /// Inlined into its reader's expression (recomputed per read).
    Inline,
    /// The region's register accumulator (a `REDUCE`).
    Accumulate,
    /// A `REDUCE` re-run at each read of it by the accumulator's value.
    ComputeAt,
    /// The region's running fold (its `SCAN` root): one accumulator per
    /// row along the scanned axis, stored at every point.
    Scan,
}

/// `let v = op(...)` of a region's body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Let {
    pub node: NodeId,
    pub materialize: Materialize,
    pub how: How,
}

/// A value a region reads from memory.
#[derive(Clone, Debug, PartialEq)]
pub struct Operand {
    pub node: NodeId,
    pub memref: MemRef,
}

/// Where a region's output goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dest {
    /// `outputs[k]` of the generated function.
    GraphOutput(usize),
    /// A buffer of the generated function, read by later regions.
    Temp,
}

/// A value a region stores.
#[derive(Clone, Debug, PartialEq)]
pub struct RegionOutput {
    pub node: NodeId,
    pub dest: Dest,
    pub memref: MemRef,
    pub materialize: Materialize,
}

/// Where a producer's values live on the way to their consumer inside one
/// region (`000` §1.6 `MinBuffer`, answered by Poly Core when it decided).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EdgeBuffer {
    Reg,
    SmemRing { depth: u32 },
}

/// An edge inside a region, for the plan (`000` §4.1 step 6 `local_edges`).
#[derive(Clone, Debug, PartialEq)]
pub struct LocalEdge {
    pub producer: NodeId,
    pub consumer: NodeId,
    /// The smallest buffer a tiled kernel needs for it (the CPU backend
    /// recomputes instead: one register per read).
    pub buffer: EdgeBuffer,
    /// Bytes of that buffer per consumer point, when known.
    pub bytes: Option<u64>,
}

/// A region: one kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct Region {
    /// `r<k>`.
    pub name: String,
    pub inputs: Vec<Operand>,
    pub outputs: Vec<RegionOutput>,
    /// Empty for a copy region.
    pub body: Vec<Let>,
    pub local_edges: Vec<LocalEdge>,
}

impl Region {
    /// True for a copy region (no body).
    pub fn is_copy(&self) -> bool {
        self.body.is_empty()
    }

    /// The stored value.
    pub fn root(&self) -> NodeId {
        self.outputs[0].node
    }

    /// The accumulator, if any.
    pub fn accumulator(&self) -> Option<NodeId> {
        self.body.iter().find(|l| l.how == How::Accumulate).map(|l| l.node)
    }

    /// True when `v` is computed at the accumulator's reads.
    pub fn computes_at(&self, v: NodeId) -> bool {
        self.body.iter().any(|l| l.node == v && l.how == How::ComputeAt)
    }
}

/// Why region formation did not fuse a producer into a consumer (`000`
/// §4.1 step 5 STOP conditions, §4.2 thresholds).
#[derive(Clone, Debug, PartialEq)]
pub enum StopReason {
    /// The producer is a graph output: it is stored anyway.
    GraphOutput,
    /// ① not a unique consumer chain: the producer has this many readers.
    NotUcc(usize),
    /// The stored, element-wise consumer reads the producer through this
    /// movement, which is not one to one (`EXPAND`, `PAD`, …): the grouping
    /// fuses a `REDUCE` into an epilogue only through element-wise nodes,
    /// `RESHAPE` and `PERMUTE` (`grouping`'s rule).
    EpilogueMovement(NodeId),
    /// The consumer's kernel already accumulates this other `REDUCE` (one
    /// accumulator per kernel).
    SecondAccumulator(NodeId),
    /// The chain ends at a stored value that is neither a reduction nor
    /// element-wise (a movement that is a graph output).
    StoredMovement,
    /// The consumer is not a region's accumulator: the CPU backend computes
    /// a producer only at the reads of a reduction.
    NotAtAReduction,
    /// A block on the way (named) is outside the SCoP (Poly-View
    /// `non_scop`): a region boundary (`000` §4.1 step 1).
    NonScop(String),
    /// ② `can_compute_at` says no (Poly Core's reason).
    ComputeAt(String),
    /// ② the smallest buffer is global memory (Poly Core's reason).
    NeedsGmem(String),
    /// Poly Core could not be asked (the Poly-View failed to build).
    NoPolyView(String),
    /// §4.2: the local edge buffer (`bytes`) is over `limit`, 80% of the
    /// machine's per-kernel fast memory (`machine` names the row).
    OverThreshold { bytes: u64, limit: u64, machine: &'static str },
    /// ③ `Δtime = cost − benefit ≥ 0` (seconds; `000` §4.1 step 4, §6) with
    /// the producer recomputed `recompute` times per element.
    Cost { delta: f64, benefit: f64, cost: f64, recompute: f64 },
    /// Backward greedy: taken, then undone (one-step rollback, §4.1 step 5)
    /// for the better fusion of this producer.
    Rollback(NodeId),
    /// Backward greedy: the fusion of this producer, already taken,
    /// conflicts (one compute-at level and one producer per region).
    Conflict(NodeId),
    /// The exact choice (ILP) over a window of this many nodes left it out.
    NotChosen(usize),
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StopReason::GraphOutput => write!(f, "the producer is a graph output"),
            StopReason::NotUcc(n) => write!(f, "not a unique consumer chain ({n} readers)"),
            StopReason::EpilogueMovement(_) => write!(
                f,
                "the epilogue reads it through a movement that is not one to one (fused only through \
                 element-wise nodes, RESHAPE and PERMUTE)"
            ),
            StopReason::SecondAccumulator(_) => write!(f, "the consumer's kernel already accumulates another REDUCE"),
            StopReason::StoredMovement => write!(f, "the consumer is a stored movement"),
            StopReason::NotAtAReduction => write!(f, "the consumer is not a reduction's accumulator"),
            StopReason::ComputeAt(why) => write!(f, "can_compute_at: {why}"),
            StopReason::NeedsGmem(why) => write!(f, "min_buffer_for_edge: gmem ({why})"),
            StopReason::NoPolyView(why) => write!(f, "no Poly-View: {why}"),
            StopReason::NonScop(b) => write!(f, "non_scop: block {b} is outside the SCoP (a region boundary)"),
            StopReason::OverThreshold { bytes, limit, machine } => {
                write!(f, "threshold: local buffer {bytes} bytes > {limit} (80% of {machine}'s per-kernel fast memory)")
            }
            StopReason::Cost { delta, benefit, cost, recompute } => write!(
                f,
                "cost: Δtime {delta:+.3e} s >= 0 (benefit {benefit:.3e} s, cost {cost:.3e} s, recompute x{recompute:.2})"
            ),
            StopReason::Rollback(_) => write!(f, "rollback: undone for the next step's better fusion"),
            StopReason::Conflict(_) => write!(f, "conflict: a fusion already taken nests with it"),
            StopReason::NotChosen(n) => write!(f, "not chosen: the exact choice over a window of {n} nodes"),
        }
    }
}

/// A fusion region formation considered and rejected.
#[derive(Clone, Debug, PartialEq)]
pub struct Stop {
    pub producer: NodeId,
    /// The consumer the producer's chain reaches, when there is one.
    pub consumer: Option<NodeId>,
    pub reason: StopReason,
}

/// Which rule formed the regions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Former {
    /// [`grouping`] alone (tgc-core without feature `poly`).
    Grouping,
    /// [`grouping`], then compute-at fusions decided by Poly Core.
    PolyCore,
}

/// The regions of one graph.
#[derive(Clone, Debug, PartialEq)]
pub struct Regions {
    pub graph: String,
    pub former: Former,
    /// In execution order.
    pub regions: Vec<Region>,
    pub stops: Vec<Stop>,
}

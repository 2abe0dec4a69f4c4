//! Poly-View (`spec/000` §1.4, §3, §12.3; notation of `003`): the analysis-only
//! IR that states, in isl, what every Tiny IR value computes over which
//! index points and which points of which values it reads. It is built from
//! the IndexBook ([`from_index_book::build`]) and is the input of the Poly
//! Core analyses (`000` §1.6: dependences, compute-at legality, halo, minimal
//! buffers) and of region formation (`000` §4).
//!
//! One [`Block`] per value, in node order. Its statement is the tuple
//! `S_<name>` over the IndexBook's variables `i0, i1, …` (output axes, then a
//! `REDUCE`'s reduce axes, `003`'s `S_conv[n, k, h, w, c, rh, rw]`); the value
//! itself is the tensor tuple `<name>[i0, …, i{r-1}]`. Parameters are the
//! graph's symbols. A block is one of:
//! - `leaf` (`INPUT`, `CONST`: a tensor, no reads — an extension of §12.3's
//!   kinds so that every value has a block),
//! - `ewise` (unary, `CAST`, binary, `WHERE`), `movement_affine` (the movement
//!   ops), `reduce`,
//! - `contraction_pattern`: a `REDUCE(SUM)` of a `MUL` (`000` §3.5), with the
//!   two operands traced through their movement chains ([`Contraction`]).
//!
//! Invariants (checked by [`verify::verify`], with the node of each
//! violation):
//! - one block per node, in node order; block names are distinct isl
//!   identifiers; the kind follows the node's op as listed above, and a
//!   block carries a [`Contraction`] exactly when it is `contraction_pattern`;
//! - every isl object has exactly the view's parameters, in the order of the
//!   graph's symbols (aligned by name, `000` §3.1), so that objects of
//!   different blocks combine without `align_params`;
//! - a SCoP block's domain is a set in the space `S_<name>` whose dimensions
//!   are named `i0, i1, …` (one per IndexBook variable), so no renaming or
//!   pullback is ever needed; its write maps the domain onto the tensor
//!   `<name>[i0, …, i{r-1}]`;
//! - reads: one per IndexBook access, in its order; each is single-valued (a
//!   `pw_multi_aff`), its domain lies in the block's domain, and every point
//!   it reads lies in the source's tensor domain (for the valid parameter
//!   values of [`PolyView::context`]) — so a `%` or a floor division whose
//!   div guard was lost (`000` §13) is caught here;
//! - the read domains and the [`Fill`] pieces (`PAD`'s constant region)
//!   partition the domain: pieces are disjoint and nothing is left over;
//! - no block has more than [`Options::max_pieces`] pieces (read pieces plus
//!   fill pieces after `coalesce`), else `ExcessivePiecewise` at build time;
//! - edges: one per (consumer, distinct source), in node then access order,
//!   each with the true (flow) dependence `S_src → S_consumer`, plus one
//!   self-edge per SCoP `reduce`/`contraction_pattern` block for its
//!   accumulator.
//!
//! Dependences. Tiny IR is an SSA value graph: each value is written once, by
//! its own statement, into its own tensor, and is never overwritten. Between
//! two blocks only true (read-after-write) dependences exist, so the `anti`
//! and `output` lists of those edges are empty; they become non-empty only
//! when a later stage lets two values share storage (`min_buffer_for_edge`'s
//! ring buffers), which is then that stage's to compute. Inside a `REDUCE`,
//! the accumulator is read and rewritten at every reduce point: its self-edge
//! carries `{ S[i, r] -> S[i, r'] : r <lex r' }` as true, anti and output
//! dependence alike (the edge that marks the reduce axes as carrying a
//! dependence and the output axes as parallel).
//!
//! Non-SCoP. What isl cannot represent exactly — a symbolic stride
//! (`Sh*i2`), a product of symbols (`M*K`), a division by a symbol — leaves
//! the block outside the SCoP ([`Body::NonScop`] with the reason; `000` §1.4
//! "非アフィンは SCoP から除外"), a natural region boundary. Binding those
//! symbols (`--dim`) makes the block affine again. Edges touching such a block
//! have no dependence relation.
//!
//! Pieces (`000` §3.3). `PAD` reads its source only inside the source's box;
//! the read's domain is that piece and the rest of the domain is a fill piece
//! with the pad value. `SHRINK` reads one strided box of its source: an
//! affine read whose range is the kept piece. Every object is simplified with
//! `remove_redundancies` and `coalesce`; printed reads and fills are gisted
//! against the block's domain.

pub mod contraction;
pub mod core;
pub mod from_index_book;
pub mod isl;
pub mod json;
pub mod text;
mod to_isl;
pub mod verify;

use crate::diag;
use crate::diag::Diagnostic;
use crate::index_book::AxisVar;
use crate::tiny::NodeId;
use crate::DType;

pub use contraction::{Contraction, Operand, Pattern, PatternInfo, Window};
pub use from_index_book::{build, build_with, Parts};
pub use isl::{Ctx, IslError, Map, Set, UnionMap, UnionSet};
pub use text::dump;

/// The most pieces one block may have (`000` §13, "piecewise explosion"); the
/// same bound as the IndexBook's [`crate::index_book::MAX_PIECES`].
pub const MAX_PIECES: usize = 64;

/// Knobs of [`build_with`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// More pieces than this in one block is `ExcessivePiecewise`.
    pub max_pieces: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options { max_pieces: MAX_PIECES }
    }
}

/// What a block computes (`000` §1.4 `PolyBlock.kind`, plus `leaf`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BlockKind {
    Leaf,
    Ewise,
    Reduce,
    MovementAffine,
    ContractionPattern,
    /// A `SCAN`: each point folds its source's point into the scan's own
    /// previous point along the axis.
    Scan,
}

impl BlockKind {
    /// The spelling of `000` §12.3.
    pub fn name(self) -> &'static str {
        match self {
            BlockKind::Leaf => "leaf",
            BlockKind::Ewise => "ewise",
            BlockKind::Reduce => "reduce",
            BlockKind::MovementAffine => "movement_affine",
            BlockKind::ContractionPattern => "contraction_pattern",
            BlockKind::Scan => "scan",
        }
    }

    /// The inverse of [`BlockKind::name`].
    pub fn from_name(s: &str) -> Option<BlockKind> {
        [
            BlockKind::Leaf,
            BlockKind::Ewise,
            BlockKind::Reduce,
            BlockKind::MovementAffine,
            BlockKind::ContractionPattern,
            BlockKind::Scan,
        ]
        .into_iter()
        .find(|k| k.name() == s)
    }
}

/// The whole view of one graph.
pub struct PolyView<'c> {
    /// The graph's name.
    pub name: String,
    /// `(symbol, isl parameter name)` in the graph's symbol order; the isl
    /// name differs only where the symbol would read as an isl keyword.
    pub params: Vec<(String, String)>,
    /// The parameter values the graph admits, as far as isl can say: every
    /// symbol ≥ 1 (`Graph::resolve_dims`) and the graph's open constraints
    /// that are affine. A parameter-only set.
    pub context: Set<'c>,
    /// One per node, in node order.
    pub blocks: Vec<Block<'c>>,
    pub edges: Vec<Edge<'c>>,
}

/// One value (`000` §1.4 `PolyBlock`).
pub struct Block<'c> {
    pub node: NodeId,
    /// The tensor tuple name (the node's label made an isl identifier); the
    /// statement is `S_<name>`.
    pub name: String,
    pub kind: BlockKind,
    /// The value's element type (its size gives halo and buffer bytes).
    pub dtype: DType,
    /// The IndexBook variables: output axes, then reduce axes.
    pub axes: Vec<AxisVar>,
    pub body: Body<'c>,
    /// The contraction, for `contraction_pattern` blocks.
    pub contraction: Option<Contraction<'c>>,
}

impl<'c> Block<'c> {
    /// The statement tuple name.
    pub fn statement(&self) -> String {
        format!("S_{}", self.name)
    }

    /// The isl objects, when the block is in the SCoP.
    pub fn scop(&self) -> Option<&Scop<'c>> {
        match &self.body {
            Body::Scop(s) => Some(s),
            Body::NonScop(_) => None,
        }
    }
}

/// A block's polyhedral content, or why it has none.
pub enum Body<'c> {
    Scop(Scop<'c>),
    /// Not quasi-affine (see the module doc); the reason names the term.
    NonScop(String),
}

/// Domain and accesses of a SCoP block.
pub struct Scop<'c> {
    /// `[P] -> { S_v[i0, …] : 0 <= ik < size_k }`.
    pub domain: Set<'c>,
    /// `S_v[i0, …] -> v[i0, …, i{r-1}]` on the domain.
    pub write: Map<'c>,
    /// One per IndexBook access, in order.
    pub reads: Vec<Read<'c>>,
    /// Where the value is a constant instead of a read (`PAD`).
    pub fills: Vec<Fill<'c>>,
}

/// A read of a source value: `S_v[i…] -> src[e…]`, defined exactly on the
/// points that read it.
pub struct Read<'c> {
    pub src: NodeId,
    pub map: Map<'c>,
}

/// A piece of the domain where the value is the constant `value`.
pub struct Fill<'c> {
    pub set: Set<'c>,
    pub value: f64,
}

/// A producer → consumer edge (`000` §1.4 `Edge`).
pub struct Edge<'c> {
    pub from: NodeId,
    pub to: NodeId,
    /// `None` when either end is not in the SCoP.
    pub deps: Option<Deps<'c>>,
}

/// Dependence relations `S_from[…] -> S_to[…]` of an edge.
pub struct Deps<'c> {
    /// Read after write (flow).
    pub flow: Vec<Map<'c>>,
    /// Write after read.
    pub anti: Vec<Map<'c>>,
    /// Write after write.
    pub output: Vec<Map<'c>>,
}

impl<'c> PolyView<'c> {
    /// The block of `id`.
    pub fn block(&self, id: NodeId) -> Option<&Block<'c>> {
        self.blocks.get(id.index())
    }

    /// The block named `name`.
    pub fn find(&self, name: &str) -> Option<&Block<'c>> {
        self.blocks.iter().find(|b| b.name == name)
    }

    /// Every SCoP block's domain (`003`'s "Combined Domain").
    pub fn domains(&self) -> Result<Option<UnionSet<'c>>, IslError> {
        self.union(|s| Ok(vec![s.domain.to_union_set()?]), |a: UnionSet<'c>, b| a.union(&b))
    }

    /// Every read of every SCoP block, as one union map.
    pub fn reads(&self) -> Result<Option<UnionMap<'c>>, IslError> {
        self.union(|s| s.reads.iter().map(|r| r.map.to_union_map()).collect(), |a: UnionMap<'c>, b| a.union(&b))
    }

    /// Every write, as one union map.
    pub fn writes(&self) -> Result<Option<UnionMap<'c>>, IslError> {
        self.union(|s| Ok(vec![s.write.to_union_map()?]), |a: UnionMap<'c>, b| a.union(&b))
    }

    fn union<U>(
        &self,
        parts: impl Fn(&Scop<'c>) -> Result<Vec<U>, IslError>,
        join: impl Fn(U, U) -> Result<U, IslError>,
    ) -> Result<Option<U>, IslError> {
        let mut acc: Option<U> = None;
        for s in self.blocks.iter().filter_map(Block::scop) {
            for p in parts(s)? {
                acc = Some(match acc {
                    None => p,
                    Some(a) => join(a, p)?,
                });
            }
        }
        Ok(acc)
    }
}

/// An isl failure on text tgc generated: a bug, reported as `Internal`.
pub(crate) fn internal(e: IslError) -> Diagnostic {
    diag!(Internal, "Poly-View: {e}")
}

#[cfg(test)]
mod core_tests;
#[cfg(test)]
mod pattern_tests;
#[cfg(test)]
mod tests;

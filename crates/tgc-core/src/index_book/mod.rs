//! The IndexBook (`spec/000` §1.3, §12.2; `001` §1): a side table that gives
//! every Tiny IR value its index space — named axes, a domain, and for each
//! source an affine (+ floordiv) map from the value's index to the source's.
//!
//! Tiny IR stays untouched; passes that need indices (Poly-View, CPU code
//! generation) read them here, and collapse chains of movement nodes with
//! [`compose::compose`] / [`compose::chase`].
//!
//! Invariants (checked by [`verify::verify`], with the node of each violation):
//! - one [`IndexInfo`] per node; its output axes are named `i0, i1, …` in
//!   order, with `id` = position and `size` = the node's shape; a `REDUCE`
//!   numbers its reduce axes after them (`i{r}, i{r+1}, …`, kind `reduce`);
//! - every map is affine + floordiv only (remainders are expanded to
//!   `e - q·floor(e/q)`, `000` §3.2), has one component per source axis and
//!   uses no variable beyond the value's axes and reduce axes; divisors are
//!   positive;
//! - every floordiv in a map has its div guard `0 ≤ e - q·floor(e/q) ≤ q-1`
//!   in the domain's constraints (`000` §13, "div guard missing"), and the
//!   domain bounds every variable: `0 ≤ ik ≤ size_k - 1`;
//! - an axis is `broadcast` exactly when the value does not depend on it: no
//!   guard mentions it and every map component that mentions it reads a
//!   source axis that is itself `broadcast`. Broadcasting is thereby a
//!   constant-0 component (`EXPAND` of a size-1 axis, a unit axis inserted by
//!   `RESHAPE`), never a condition;
//! - `REDUCE` records one reduce axis per reduced source axis, each used by
//!   exactly the map component of that axis;
//! - there is exactly one access per distinct indexed source
//!   ([`indexed_sources`]), in order of first use;
//! - the domain's pieces are the guards of the accesses (only `PAD` makes
//!   them), each access has at most [`MAX_PIECES`] pieces.
//!
//! The one non-affine read of the vocabulary is a `GATHER`'s read of its
//! `x` ([`crate::tiny::Op::Gather`]): its position is a value, so it has no
//! access here. Region formation materialises that `x`, the code reads it
//! at the gathered position, and Poly-View marks the `GATHER` non-SCoP
//! (`000` §13).

pub mod compose;
pub mod contraction;
pub mod from_tiny;
mod reshape;
pub mod simplify;
pub mod text;
pub mod verify;

use std::fmt;

use crate::affine::AffExpr;
use crate::sym::Dim;
use crate::tiny::NodeId;

pub use compose::{chase, compose, Chased, Composed};
pub use from_tiny::build;
pub use text::dump;

/// The sources `n` reads at an index expression, which its [`IndexInfo`]
/// holds one access each for: all of them but a `GATHER`'s `x`, read at a
/// data-dependent position.
pub fn indexed_sources(n: &crate::tiny::Node) -> &[NodeId] {
    match n.op {
        crate::tiny::Op::Gather { .. } => n.src.get(1..).unwrap_or_default(),
        _ => &n.src,
    }
}

/// The most pieces one access may carry after composition; more is
/// `ExcessivePiecewise` (`002` §4, `000` §13).
pub const MAX_PIECES: usize = 64;

/// The most atoms ([`AffExpr::atom_count`]) the index of one read may have
/// after composing a chain of movements; more is `ResourceExceeded`.
///
/// A reshape-permute-reshape link that [`simplify`] cannot fold mentions
/// its variable twice, so each such link can double the composed index
/// (`000` §3.2 asks that composition keep expressions small). 1024 atoms
/// is far above any chain seen in the spec graphs and the models (a few
/// dozen) and keeps the printed C of one subscript within some tens of KiB.
pub const MAX_INDEX_ATOMS: usize = 1024;

/// What an axis means for the value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AxisKind {
    /// An ordinary axis the value varies along.
    Iter,
    /// An axis reduced by a `REDUCE` (only in [`IndexInfo::reduce_axes`]).
    Reduce,
    /// An axis the value does not depend on (see the module doc).
    Broadcast,
}

impl AxisKind {
    /// `iter`, `reduce` or `broadcast`, as in `000` §12.2.
    pub fn name(self) -> &'static str {
        match self {
            AxisKind::Iter => "iter",
            AxisKind::Reduce => "reduce",
            AxisKind::Broadcast => "broadcast",
        }
    }
}

/// An index variable `i<id>` of a value's space.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AxisVar {
    /// The variable number: `AffExpr::var(id)` in maps and constraints.
    pub id: u32,
    /// `i<id>`.
    pub name: String,
    /// The extent: the variable ranges over `0 ≤ i < size`.
    pub size: Dim,
    pub kind: AxisKind,
}

impl AxisVar {
    /// The variable `i<id>` of extent `size`.
    pub fn new(id: u32, size: Dim, kind: AxisKind) -> AxisVar {
        AxisVar { id, name: format!("i{id}"), size, kind }
    }
}

/// An affine constraint `expr ≥ 0` over a space's index variables.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Constr {
    pub expr: AffExpr,
}

impl Constr {
    /// `expr ≥ 0`.
    pub fn ge0(expr: AffExpr) -> Constr {
        Constr { expr }
    }

    /// `lo ≤ e ≤ hi`, as two constraints.
    pub fn between(e: &AffExpr, lo: &Dim, hi: &Dim) -> [Constr; 2] {
        [Constr::ge0(e - &AffExpr::constant(lo.clone())), Constr::ge0(&AffExpr::constant(hi.clone()) - e)]
    }
}

impl fmt::Display for Constr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} >= 0", self.expr)
    }
}

/// A guarded piece of a piecewise value (`PAD`): where every constraint of
/// `valid` holds the value is read from the source; elsewhere it is the
/// constant `otherwise`.
///
/// A list of pieces nests outermost first: the first piece whose `valid`
/// fails decides the value.
#[derive(Clone, Debug, PartialEq)]
pub struct Piece {
    /// A conjunction of constraints over the reading space's variables.
    pub valid: Vec<Constr>,
    /// The value outside `valid` (in the value's dtype).
    pub otherwise: f64,
}

/// The index domain of a value (`000` §12.2 `Domain`).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Domain {
    /// Conjunction: the bounds of every variable, then div guards.
    pub constraints: Vec<Constr>,
    /// The value's pieces (the guards of its accesses).
    pub pieces: Vec<Piece>,
}

/// How a value reads one of its sources.
#[derive(Clone, Debug, PartialEq)]
pub struct Access {
    pub src: NodeId,
    /// One expression per source axis over the value's variables (output
    /// axes, then reduce axes).
    pub map: Vec<AffExpr>,
    /// Where the source is read at all (see [`Piece`]); empty: everywhere.
    pub guard: Vec<Piece>,
}

/// The index information of one value (`000` §12.2 `IndexInfo`).
#[derive(Clone, Debug, PartialEq)]
pub struct IndexInfo {
    /// Output axes `i0, i1, …`.
    pub axes: Vec<AxisVar>,
    pub domain: Domain,
    /// One access per distinct source, in order of first use.
    pub inputs: Vec<Access>,
    /// For `REDUCE`: the reduced axes, numbered after the output axes.
    pub reduce_axes: Vec<AxisVar>,
}

impl IndexInfo {
    /// The access to `src`, if the value reads it.
    pub fn access(&self, src: NodeId) -> Option<&Access> {
        self.inputs.iter().find(|a| a.src == src)
    }

    /// Extents of all variables: output axes, then reduce axes.
    pub fn extents(&self) -> Vec<Dim> {
        self.axes.iter().chain(&self.reduce_axes).map(|a| a.size.clone()).collect()
    }
}

/// `NodeId → IndexInfo` for a whole graph (`000` §12.2 `IndexBook`).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct IndexBook {
    infos: Vec<IndexInfo>,
}

impl IndexBook {
    /// Wraps per-node infos (index = node id).
    pub fn from_infos(infos: Vec<IndexInfo>) -> IndexBook {
        IndexBook { infos }
    }

    /// The info of `id`, if the book has one.
    pub fn get(&self, id: NodeId) -> Option<&IndexInfo> {
        self.infos.get(id.index())
    }

    /// Mutable access, for passes (and tests) that rewrite entries.
    pub fn get_mut(&mut self, id: NodeId) -> Option<&mut IndexInfo> {
        self.infos.get_mut(id.index())
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.infos.len()
    }

    /// True when the book has no entry.
    pub fn is_empty(&self) -> bool {
        self.infos.is_empty()
    }
}

#[cfg(test)]
mod tests;

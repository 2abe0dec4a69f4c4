//! Composition of accesses (`000` §3.2 "Movement chains are composed one
//! step at a time"): a consumer's index, given over some loop variables,
//! pulled back through an [`Access`] to the source's index, with the access's
//! guards restated over the same variables.
//!
//! [`chase`] repeats this through a chain of movement nodes, so that the chain
//! collapses to one affine access into the first non-movement value — a
//! materialised buffer or a value computed in place.

use crate::affine::AffExpr;
use crate::diag;
use crate::diag::DResult;
use crate::sym::Dim;
use crate::tiny::{Graph, NodeId, Op};

use super::simplify::{always_holds, simplify};
use super::{reshape, Access, Constr, IndexBook, Piece, MAX_INDEX_ATOMS, MAX_PIECES};

/// A source index and the guards under which the source is read.
#[derive(Clone, Debug, PartialEq)]
pub struct Composed {
    /// One expression per source axis, over the caller's variables.
    pub index: Vec<AffExpr>,
    /// The access's pieces over the caller's variables, outermost first;
    /// constraints that always hold are dropped, and so are pieces left empty.
    pub guard: Vec<Piece>,
}

/// The result of [`chase`]: the first non-movement value on the chain.
#[derive(Clone, Debug, PartialEq)]
pub struct Chased {
    pub src: NodeId,
    pub index: Vec<AffExpr>,
    /// Every guard met on the way, consumer side first.
    pub guard: Vec<Piece>,
}

/// Pulls `index` (a point of the reading value's space, as expressions over
/// variables of extents `extents`) back through `access`.
///
/// Errors: `Internal` when the access uses a variable `index` does not give.
pub fn compose(index: &[AffExpr], access: &Access, extents: &[Dim]) -> DResult<Composed> {
    let pull = |e: &AffExpr| -> DResult<AffExpr> {
        let s = e.substitute(index).map_err(|m| diag!(Internal, "composing an access: {m}"))?;
        Ok(simplify(&s, extents))
    };
    let index = access.map.iter().map(pull).collect::<DResult<Vec<_>>>()?;
    let mut guard = Vec::new();
    for p in &access.guard {
        let mut valid = Vec::new();
        for c in &p.valid {
            let c = Constr::ge0(pull(&c.expr)?);
            if !always_holds(&c, extents) && !valid.contains(&c) {
                valid.push(c);
            }
        }
        if !valid.is_empty() {
            guard.push(Piece { valid, otherwise: p.otherwise });
        }
    }
    Ok(Composed { index, guard })
}

/// Follows the movement nodes from `node`, read at `index`, down to the first
/// value that is not a movement, composing maps and accumulating guards.
///
/// A run of consecutive `RESHAPE`s is crossed in one step, through the
/// reshape from the run's first source to its last value: both linearise
/// row-major, so the map is the same, and it stays as small as one reshape
/// however many shapes lie between (composing them one at a time nests a
/// floor division per step, which [`simplify`] cannot always fold).
///
/// Errors: `ResourceExceeded` when the composed index grows past
/// [`MAX_INDEX_ATOMS`] (a chain that [`simplify`] cannot fold);
/// `ExcessivePiecewise` when more than [`MAX_PIECES`] guards pile up,
/// reported at `node` (the value whose access is too fragmented); `Internal` when the
/// book lacks a node or a movement node has no access.
pub fn chase(g: &Graph, book: &IndexBook, node: NodeId, index: Vec<AffExpr>, extents: &[Dim]) -> DResult<Chased> {
    let mut cur = Chased { src: node, index, guard: Vec::new() };
    while cur.src.index() < g.len() && g.node(cur.src).op.is_movement() {
        let n = g.node(cur.src);
        let access = book
            .get(cur.src)
            .and_then(|i| i.inputs.first())
            .ok_or_else(|| diag!(Internal, "the IndexBook has no access for movement node {}", n.label))?;
        let run;
        let access = match reshape_run(g, cur.src) {
            Some(first) => {
                run = Access {
                    src: first,
                    map: reshape::reshape_map(g.shape(first), &n.ty.shape)
                        .ok_or_else(|| diag!(Internal, "RESHAPE `{}` has a size ≤ 0", n.label))?,
                    guard: Vec::new(),
                };
                &run
            }
            None => access,
        };
        let step = compose(&cur.index, access, extents)?;
        cur.guard.extend(step.guard);
        if cur.guard.len() > MAX_PIECES {
            return Err(diag!(
                ExcessivePiecewise,
                "reading this {} needs more than {MAX_PIECES} guarded pieces (the limit), through the {} `{}`",
                g.node(node).op.name(),
                n.op.name(),
                n.label
            )
            .at_node(g.node(node)));
        }
        let atoms: usize = step.index.iter().map(AffExpr::atom_count).sum();
        if atoms > MAX_INDEX_ATOMS {
            return Err(diag!(
                ResourceExceeded,
                "reading this {} through the {} `{}` needs an index of {atoms} terms (the limit is \
                 {MAX_INDEX_ATOMS}): the movements of this chain do not fold into a smaller index",
                g.node(node).op.name(),
                n.op.name(),
                n.label
            )
            .at_node(g.node(node)));
        }
        cur.src = access.src;
        cur.index = step.index;
    }
    Ok(cur)
}

/// When `node` is a `RESHAPE` of a `RESHAPE`, the source of the run's first
/// `RESHAPE`; `None` otherwise (the book's one-step access is then the map).
fn reshape_run(g: &Graph, node: NodeId) -> Option<NodeId> {
    let src_of_reshape = |id: NodeId| match g.node(id).op {
        Op::Reshape => g.node(id).src.first().copied(),
        _ => None,
    };
    let mut first = src_of_reshape(node)?;
    let mut steps = 0;
    while let Some(s) = src_of_reshape(first) {
        first = s;
        steps += 1;
    }
    (steps > 0).then_some(first)
}

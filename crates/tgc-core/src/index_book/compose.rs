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
/// value that is not a movement or is `stored` (has a buffer of its own),
/// composing maps and accumulating guards. `node` itself is stepped through
/// even when stored: a kernel storing a movement reads through it.
///
/// A run of consecutive `RESHAPE`s is crossed in one step, through the
/// reshape from the run's first source to its last value: both linearise
/// row-major, so the map is the same, and it stays as small as one reshape
/// however many shapes lie between (composing them one at a time nests a
/// floor division per step, which [`simplify`] cannot always fold).
///
/// Errors: `ResourceExceeded` when the composed index grows past
/// [`MAX_INDEX_ATOMS`] (a chain that [`simplify`] cannot fold; region
/// formation stores such chains part way, [`fold`]);
/// `ExcessivePiecewise` when more than [`MAX_PIECES`] guards pile up,
/// reported at `node` (the value whose access is too fragmented); `Internal` when the
/// book lacks a node or a movement node has no access.
pub fn chase(
    g: &Graph,
    book: &IndexBook,
    node: NodeId,
    index: Vec<AffExpr>,
    extents: &[Dim],
    stored: &dyn Fn(NodeId) -> bool,
) -> DResult<Chased> {
    let mut cur = Chased { src: node, index, guard: Vec::new() };
    while cur.src.index() < g.len() && g.node(cur.src).op.is_movement() {
        let n = g.node(cur.src);
        let access = step(g, book, cur.src, stored)?;
        let composed = compose(&cur.index, &access, extents)?;
        cur.guard.extend(composed.guard);
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
        let atoms = atom_count(&composed.index);
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
        cur.index = composed.index;
        if stored(cur.src) {
            break;
        }
    }
    Ok(cur)
}

/// The atoms of an index, summed over its axes.
pub fn atom_count(index: &[AffExpr]) -> usize {
    index.iter().map(AffExpr::atom_count).sum()
}

/// The movement `node`'s access as [`chase`] crosses it: the book's, or for
/// a `RESHAPE` of a `RESHAPE`, the one reshape from the first source of the
/// run (which stops at a `stored` value).
fn step(g: &Graph, book: &IndexBook, node: NodeId, stored: &dyn Fn(NodeId) -> bool) -> DResult<Access> {
    let n = g.node(node);
    let access = book
        .get(node)
        .and_then(|i| i.inputs.first())
        .ok_or_else(|| diag!(Internal, "the IndexBook has no access for movement node {}", n.label))?;
    let Some(first) = reshape_run(g, node, stored) else { return Ok(access.clone()) };
    let map = reshape::reshape_map(g.shape(first), &n.ty.shape)
        .ok_or_else(|| diag!(Internal, "RESHAPE `{}` has a size ≤ 0", n.label))?;
    Ok(Access { src: first, map, guard: Vec::new() })
}

/// When `node` is a `RESHAPE` of an unstored `RESHAPE`, the source of the
/// run's first `RESHAPE`; `None` otherwise.
fn reshape_run(g: &Graph, node: NodeId, stored: &dyn Fn(NodeId) -> bool) -> Option<NodeId> {
    let src_of_reshape = |id: NodeId| match g.node(id).op {
        Op::Reshape if !stored(id) => g.node(id).src.first().copied(),
        _ => None,
    };
    let Op::Reshape = g.node(node).op else { return None };
    let src = *g.node(node).src.first()?;
    let mut first = src;
    while let Some(s) = src_of_reshape(first) {
        first = s;
    }
    (first != src).then_some(first)
}

/// One step of a bottom-up fold of movement chains: `node`'s access through
/// the chain below it, given `folded`, the same for earlier nodes (`None`
/// where a node is not an unstored movement). The map is over `node`'s
/// variables, its guards consumer side first.
///
/// Region formation folds every movement in node order, in time linear in
/// the graph, to find the chains whose composed index grows (and stores
/// them part way) before any kernel chases them.
///
/// Errors: `Internal` when the book lacks `node`.
pub fn fold(
    g: &Graph,
    book: &IndexBook,
    node: NodeId,
    folded: &[Option<Access>],
    stored: &dyn Fn(NodeId) -> bool,
) -> DResult<Access> {
    let own = step(g, book, node, stored)?;
    let below = if stored(own.src) { None } else { folded.get(own.src.index()).and_then(Option::as_ref) };
    let Some(below) = below else { return Ok(own) };
    let composed = compose(&own.map, below, g.shape(node))?;
    let mut guard = own.guard;
    guard.extend(composed.guard);
    Ok(Access { src: below.src, map: composed.index, guard })
}

//! Tiny IR → IndexBook: the update rule of every node kind (`000` §1.3,
//! `001` §1.3), applied in topological order.
//!
//! | node | map to its source (over the node's variables `i0..`) |
//! | --- | --- |
//! | `INPUT`, `CONST` | none: fresh `iter` axes |
//! | unary, `CAST`, binary, `WHERE` | identity (Tiny operands have identical shapes) |
//! | `GATHER` | identity to its index; none to its `x` (a data-dependent read) |
//! | `SCAN` | identity: the point it folds in (the fold along the axis is the op's) |
//! | `PERMUTE perm` | component `perm[k]` is `i_k` |
//! | `RESHAPE` | linearise → re-decompose per group of equal products (`reshape.rs`) |
//! | `EXPAND` | `0` on size-1 source axes, `i_k` elsewhere |
//! | `PAD` | `i_k - lo_k`, guarded by `lo_k ≤ i_k ≤ lo_k + D_k - 1`, else the pad value |
//! | `SHRINK` | `lo_k + step_k·i_k` |
//! | `FLIP` | `D_k - 1 - i_k` on flipped axes |
//! | `VIEW` | its `index_map` |
//! | `REDUCE` | kept axes `i0..i{r-1}` in order, reduced axes `i{r}..` in order |

use crate::affine::AffExpr;
use crate::diag;
use crate::diag::DResult;
use crate::sym::Dim;
use crate::tiny::{Graph, NodeId, Op};

use super::simplify::{always_holds, div_guards, mentions};
use super::{reshape, Access, AxisKind, AxisVar, Constr, Domain, IndexBook, IndexInfo, Piece};

/// Builds the IndexBook of a verified graph.
///
/// Errors: `Internal` when the graph breaks a Tiny IR invariant (run
/// [`crate::tiny::verify::verify`] first); the node is named.
pub fn build(g: &Graph) -> DResult<IndexBook> {
    let mut infos: Vec<IndexInfo> = Vec::with_capacity(g.len());
    for id in g.ids() {
        let info = node_info(g, &infos, id).map_err(|e| e.on_node(g.node(id).label.clone()))?;
        infos.push(info);
    }
    Ok(IndexBook::from_infos(infos))
}

fn node_info(g: &Graph, done: &[IndexInfo], id: NodeId) -> DResult<IndexInfo> {
    let n = g.node(id);
    let shape = &n.ty.shape;
    let r = shape.len();
    let var = |k: usize| AffExpr::var(k as u32);
    let identity: Vec<AffExpr> = (0..r).map(var).collect();
    let src_shape = |k: usize| -> DResult<&[Dim]> {
        let s = n.src.get(k).ok_or_else(|| diag!(Internal, "{} has no source {k}", n.op.name()))?;
        if s.index() >= done.len() {
            return Err(diag!(Internal, "source {} does not precede the node", s.0));
        }
        Ok(g.shape(*s))
    };
    let one = |map: Vec<AffExpr>, guard: Vec<Piece>| -> DResult<Vec<Access>> {
        let src = *n.src.first().ok_or_else(|| diag!(Internal, "{} has no source", n.op.name()))?;
        Ok(vec![Access { src, map, guard }])
    };
    let mut reduce_axes = Vec::new();
    let inputs: Vec<Access> = match &n.op {
        Op::Input { .. } | Op::Const { .. } => Vec::new(),
        Op::Unary(_) | Op::Cast | Op::Binary(_) | Op::Where | Op::Gather { .. } | Op::Scan { .. } => {
            let mut out: Vec<Access> = Vec::new();
            for &s in super::indexed_sources(n) {
                if !out.iter().any(|a| a.src == s) {
                    out.push(Access { src: s, map: identity.clone(), guard: Vec::new() });
                }
            }
            out
        }
        Op::Reduce { axes, .. } => {
            let src = src_shape(0)?;
            let mut map = Vec::with_capacity(src.len());
            let (mut kept, mut red) = (0, r);
            for (k, d) in src.iter().enumerate() {
                if axes.contains(&k) {
                    reduce_axes.push(AxisVar::new(red as u32, d.clone(), AxisKind::Reduce));
                    map.push(var(red));
                    red += 1;
                } else {
                    map.push(var(kept));
                    kept += 1;
                }
            }
            one(map, Vec::new())?
        }
        Op::Reshape => {
            let src = src_shape(0)?;
            let map = reshape::reshape_map(src, shape).ok_or_else(|| diag!(Internal, "RESHAPE has a size ≤ 0"))?;
            one(map, Vec::new())?
        }
        Op::Permute { perm } => {
            let mut map = vec![AffExpr::int(0); src_shape(0)?.len()];
            for (k, &p) in perm.iter().enumerate() {
                *map.get_mut(p).ok_or_else(|| diag!(Internal, "PERMUTE axis {p} is out of range"))? = var(k);
            }
            one(map, Vec::new())?
        }
        Op::Expand => {
            let map = src_shape(0)?
                .iter()
                .enumerate()
                .map(|(k, d)| if d.is_one() { AffExpr::int(0) } else { var(k) })
                .collect();
            one(map, Vec::new())?
        }
        Op::Pad { pads, value } => {
            let src = src_shape(0)?;
            let mut map = Vec::with_capacity(r);
            let mut valid = Vec::new();
            for (k, ((lo, _), d)) in pads.iter().zip(src).enumerate() {
                map.push(&var(k) - &AffExpr::constant(lo.clone()));
                let last = &(lo + d) - &Dim::int(1);
                valid.extend(Constr::between(&var(k), lo, &last).into_iter().filter(|c| !always_holds(c, shape)));
            }
            let guard = if valid.is_empty() { Vec::new() } else { vec![Piece { valid, otherwise: *value }] };
            one(map, guard)?
        }
        Op::Shrink { lo, step, .. } => {
            let map = lo
                .iter()
                .zip(step)
                .enumerate()
                .map(|(k, (l, s))| &AffExpr::constant(l.clone()) + &var(k).scale(s))
                .collect();
            one(map, Vec::new())?
        }
        Op::Flip { axes } => {
            let map = shape
                .iter()
                .enumerate()
                .map(|(k, d)| if axes.contains(&k) { &AffExpr::constant(d - &Dim::int(1)) - &var(k) } else { var(k) })
                .collect();
            one(map, Vec::new())?
        }
        Op::View { map } => one(map.clone(), Vec::new())?,
    };
    let src_kind = |s: NodeId, j: usize| done.get(s.index()).and_then(|i| i.axes.get(j)).map(|a| a.kind);
    let kinds = axis_kinds(matches!(n.op, Op::Input { .. } | Op::Const { .. }), r, &inputs, &src_kind);
    let axes: Vec<AxisVar> =
        shape.iter().zip(kinds).enumerate().map(|(k, (d, kind))| AxisVar::new(k as u32, d.clone(), kind)).collect();
    let mut constraints = Vec::new();
    for a in axes.iter().chain(&reduce_axes) {
        constraints.extend(Constr::between(&AffExpr::var(a.id), &Dim::int(0), &(&a.size - &Dim::int(1))));
    }
    for e in inputs.iter().flat_map(|a| &a.map) {
        for c in div_guards(e) {
            if !constraints.contains(&c) {
                constraints.push(c);
            }
        }
    }
    let pieces = inputs.iter().flat_map(|a| a.guard.iter().cloned()).collect();
    Ok(IndexInfo { axes, domain: Domain { constraints, pieces }, inputs, reduce_axes })
}

/// The kind of each of the `rank` output axes (see the module doc of
/// [`crate::index_book`]): `iter` for leaves, else `broadcast` exactly when no
/// guard mentions the axis and every map component that does reads a
/// `broadcast` source axis.
///
/// `src_kind(s, j)` is the kind of axis `j` of source `s`.
pub(crate) fn axis_kinds(
    leaf: bool,
    rank: usize,
    inputs: &[Access],
    src_kind: &dyn Fn(NodeId, usize) -> Option<AxisKind>,
) -> Vec<AxisKind> {
    (0..rank as u32)
        .map(|k| {
            let independent = !leaf
                && inputs.iter().all(|a| {
                    let guarded = a.guard.iter().flat_map(|p| &p.valid).any(|c| mentions(&c.expr, k));
                    !guarded
                        && a.map
                            .iter()
                            .enumerate()
                            .all(|(j, e)| !mentions(e, k) || src_kind(a.src, j) == Some(AxisKind::Broadcast))
                });
            if independent {
                AxisKind::Broadcast
            } else {
                AxisKind::Iter
            }
        })
        .collect()
}

//! The IndexBook verifier: checks exactly the invariants listed in the module
//! doc of [`crate::index_book`] against the graph, and reports every
//! violation (an `Internal` diagnostic) with its node.

use crate::affine::{AffAtom, AffExpr};
use crate::diag;
use crate::diag::{DResult, Diagnostic};
use crate::sym::Dim;
use crate::tiny::{Graph, NodeId, Op};

use super::from_tiny::axis_kinds;
use super::simplify::div_guards;
use super::{AxisKind, Constr, IndexBook, IndexInfo, MAX_PIECES};

/// [`verify`] as a pass result: the first violation as an `Internal`
/// error naming the verifier.
pub fn check(g: &Graph, book: &IndexBook) -> DResult<()> {
    match verify(g, book).into_iter().next() {
        None => Ok(()),
        Some(e) => Err(diag!(Internal, "IndexBook verifier: {e}")),
    }
}

/// Returns every violated invariant (empty when the book fits the graph).
pub fn verify(g: &Graph, book: &IndexBook) -> Vec<Diagnostic> {
    let mut errs = Vec::new();
    if book.len() != g.len() {
        errs.push(diag!(Internal, "the IndexBook has {} entries for {} nodes", book.len(), g.len()));
        return errs;
    }
    let infos: Vec<&IndexInfo> = g.ids().filter_map(|id| book.get(id)).collect();
    for id in g.ids() {
        let (n, info) = (g.node(id), infos[id.index()]);
        let mut err = |e: Diagnostic| errs.push(e.on_node(n.label.clone()));
        let shape = &n.ty.shape;
        let nvars = (info.axes.len() + info.reduce_axes.len()) as u32;

        // Axes: names, sizes, kinds.
        if info.axes.len() != shape.len() {
            err(diag!(Internal, "{} axes for a value of rank {}", info.axes.len(), shape.len()));
            continue;
        }
        for (k, (a, d)) in info.axes.iter().zip(shape).enumerate() {
            if a.id != k as u32 || a.name != format!("i{k}") {
                err(diag!(Internal, "output axis {k} is {} (id {}), not i{k}", a.name, a.id));
            }
            if &a.size != d {
                err(diag!(Internal, "axis {} has size {} but the value has {d}", a.name, a.size));
            }
        }
        let kinds: Vec<AxisKind> = info.axes.iter().map(|a| a.kind).collect();
        let src_kind = |s: NodeId, j: usize| if s < id { infos[s.index()].axes.get(j).map(|a| a.kind) } else { None };
        let want =
            axis_kinds(matches!(n.op, Op::Input { .. } | Op::Const { .. }), shape.len(), &info.inputs, &src_kind);
        if kinds != want {
            err(diag!(Internal, "axis kinds {:?} should be {:?}", kinds, want));
        }

        // Reduce axes.
        let reduced: Vec<usize> = match &n.op {
            Op::Reduce { axes, .. } => {
                let mut a = axes.clone();
                a.sort_unstable();
                a
            }
            _ => Vec::new(),
        };
        if info.reduce_axes.len() != reduced.len() {
            err(diag!(Internal, "{} reduce axes recorded for {} reduced axes", info.reduce_axes.len(), reduced.len()));
        }
        for (p, (a, &pos)) in info.reduce_axes.iter().zip(&reduced).enumerate() {
            let id_want = (shape.len() + p) as u32;
            if a.id != id_want || a.name != format!("i{id_want}") || a.kind != AxisKind::Reduce {
                err(diag!(
                    Internal,
                    "reduce axis {p} is {} (id {}, {}), not reduce axis i{id_want}",
                    a.name,
                    a.id,
                    a.kind.name()
                ));
            }
            let src_size = n.src.first().and_then(|s| g.shape(*s).get(pos));
            if src_size != Some(&a.size) {
                err(diag!(Internal, "reduce axis {} has size {} but source axis {pos} differs", a.name, a.size));
            }
            if info.inputs.first().and_then(|acc| acc.map.get(pos)).and_then(|e| e.as_var()) != Some(a.id) {
                err(diag!(Internal, "reduce axis {} is not read exactly by source axis {pos}", a.name));
            }
        }

        // One access per distinct source, in order of first use.
        let mut srcs = Vec::new();
        for s in super::indexed_sources(n) {
            if !srcs.contains(s) {
                srcs.push(*s);
            }
        }
        let got: Vec<_> = info.inputs.iter().map(|a| a.src).collect();
        if got != srcs {
            err(diag!(Internal, "accesses read {:?} but the node's distinct sources are {:?}", got, srcs));
        }

        // Maps and guards.
        for a in &info.inputs {
            let rank = g.ty(a.src).shape.len();
            if a.map.len() != rank {
                err(diag!(
                    Internal,
                    "the map to {} has {} components for rank {rank}",
                    g.node(a.src).label,
                    a.map.len()
                ));
            }
            for e in a.map.iter().chain(a.guard.iter().flat_map(|p| p.valid.iter().map(|c| &c.expr))) {
                if e.arity() > nvars {
                    err(diag!(Internal, "{e} uses a variable beyond the {nvars} of the value"));
                }
                if let Some(q) = bad_divisor(e) {
                    err(diag!(Internal, "{e} divides by {q}"));
                }
            }
            for e in &a.map {
                for c in div_guards(e) {
                    if !info.domain.constraints.contains(&c) {
                        err(diag!(Internal, "the div guard {c} of {e} is missing from the domain"));
                    }
                }
            }
            if a.guard.len() > MAX_PIECES {
                err(diag!(
                    ExcessivePiecewise,
                    "the access to {} has {} pieces (limit {MAX_PIECES})",
                    g.node(a.src).label,
                    a.guard.len()
                ));
            }
        }
        if matches!(n.op, Op::Expand) {
            if let (Some(a), Some(s)) = (info.inputs.first(), n.src.first()) {
                for (k, (e, d)) in a.map.iter().zip(g.shape(*s)).enumerate() {
                    if d.is_one() && e != &AffExpr::int(0) {
                        err(diag!(Internal, "broadcast axis {k} of EXPAND maps to {e}, not the constant 0"));
                    }
                }
            }
        }

        // Domain.
        for a in info.axes.iter().chain(&info.reduce_axes) {
            for c in Constr::between(&AffExpr::var(a.id), &Dim::int(0), &(&a.size - &Dim::int(1))) {
                if !info.domain.constraints.contains(&c) {
                    err(diag!(Internal, "the domain lacks the bound {c} of {}", a.name));
                }
            }
        }
        let pieces: Vec<_> = info.inputs.iter().flat_map(|a| a.guard.iter().cloned()).collect();
        if info.domain.pieces != pieces {
            err(diag!(Internal, "the domain's pieces are not the guards of the accesses"));
        }
    }
    errs
}

/// A divisor that is a known integer ≤ 0, anywhere in `e`.
fn bad_divisor(e: &AffExpr) -> Option<Dim> {
    e.terms().find_map(|(a, _)| match a {
        AffAtom::Var(_) => None,
        AffAtom::FloorDiv(_, q) if q.as_int().is_some_and(|v| v <= 0) => Some(q.clone()),
        AffAtom::FloorDiv(inner, _) => bad_divisor(inner),
    })
}

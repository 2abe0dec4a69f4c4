//! The Poly-View verifier: checks exactly the invariants listed in the module
//! doc of [`crate::poly`] against the graph and its IndexBook, and reports
//! every violation (an `Internal` diagnostic) with its node. The checks are
//! semantic — isl decides inclusion and equality — not textual.

use crate::diag;
use crate::diag::Diagnostic;
use crate::index_book::IndexBook;
use crate::tiny::{BinaryOp, Graph, NodeId, Op, ReduceOp};

use super::from_index_book::count_pieces;
use super::isl::{IslResult, Map, Set};
use super::{Block, BlockKind, Options, PolyView};

/// Returns every violated invariant (empty when the view fits the graph).
pub fn verify(g: &Graph, book: &IndexBook, view: &PolyView<'_>, opts: &Options) -> Vec<Diagnostic> {
    let mut errs = Vec::new();
    if view.blocks.len() != g.len() || book.len() != g.len() {
        errs.push(diag!(
            Internal,
            "{} blocks and {} IndexBook entries for {} nodes",
            view.blocks.len(),
            book.len(),
            g.len()
        ));
        return errs;
    }
    let params: Vec<String> = view.params.iter().map(|(_, n)| n.clone()).collect();
    check(&mut errs, None, params_of(&view.context).map(|p| p == params), || "the context has other parameters".into());
    for id in g.ids() {
        let b = &view.blocks[id.index()];
        let label = g.node(id).label.clone();
        let mut errs_b = Vec::new();
        block(g, book, view, b, id, &params, opts, &mut errs_b);
        errs.extend(errs_b.into_iter().map(|e| e.on_node(label.clone())));
    }
    edges(g, book, view, &mut errs);
    errs
}

/// Records `what()` when `ok` is false, and isl's error when it failed.
fn check(errs: &mut Vec<Diagnostic>, node: Option<&str>, ok: IslResult<bool>, what: impl FnOnce() -> String) {
    let e = match ok {
        Ok(true) => return,
        Ok(false) => diag!(Internal, "{}", what()),
        Err(e) => diag!(Internal, "{}: {e}", what()),
    };
    errs.push(match node {
        Some(n) => e.on_node(n),
        None => e,
    });
}

fn params_of(s: &Set<'_>) -> IslResult<Vec<String>> {
    s.param_names()
}

fn map_params(m: &Map<'_>) -> IslResult<Vec<String>> {
    m.domain()?.param_names()
}

#[allow(clippy::too_many_arguments)]
fn block(
    g: &Graph,
    book: &IndexBook,
    view: &PolyView<'_>,
    b: &Block<'_>,
    id: NodeId,
    params: &[String],
    opts: &Options,
    errs: &mut Vec<Diagnostic>,
) {
    let n = g.node(id);
    if b.node != id {
        errs.push(diag!(Internal, "block {} is at position {}", b.node.0, id.0));
    }
    if view.blocks.iter().filter(|o| o.name == b.name).count() > 1 {
        errs.push(diag!(Internal, "the block name `{}` is not unique", b.name));
    }
    let contraction_op = matches!(n.op, Op::Reduce { op: ReduceOp::Sum, .. })
        && n.src.first().is_some_and(|&s| g.node(s).op == Op::Binary(BinaryOp::Mul));
    let want = match &n.op {
        Op::Input { .. } | Op::Const { .. } => vec![BlockKind::Leaf],
        Op::Reduce { .. } if contraction_op => vec![BlockKind::Reduce, BlockKind::ContractionPattern],
        Op::Reduce { .. } => vec![BlockKind::Reduce],
        Op::Scan { .. } => vec![BlockKind::Scan],
        op if op.is_movement() => vec![BlockKind::MovementAffine],
        _ => vec![BlockKind::Ewise],
    };
    if !want.contains(&b.kind) {
        errs.push(diag!(Internal, "a {} block is `{}`", n.op.name(), b.kind.name()));
    }
    if (b.kind == BlockKind::ContractionPattern) != b.contraction.is_some() {
        errs.push(diag!(Internal, "kind `{}` with contraction attrs: {}", b.kind.name(), b.contraction.is_some()));
    }
    let Some(s) = b.scop() else { return };
    let Some(info) = book.get(id) else { return };
    let nvars = info.axes.len() + info.reduce_axes.len();
    let vars: Vec<String> = (0..nvars).map(|k| format!("i{k}")).collect();
    check(errs, None, s.domain.dim_names().map(|d| d == vars), || format!("domain dimensions are not {vars:?}"));
    let mut objects: Vec<(&str, IslResult<Vec<String>>)> = vec![("domain", params_of(&s.domain))];
    objects.push(("write", map_params(&s.write)));
    objects.extend(s.reads.iter().map(|r| ("read", map_params(&r.map))));
    objects.extend(s.fills.iter().map(|f| ("fill", params_of(&f.set))));
    for (what, p) in objects {
        check(errs, None, p.map(|p| p == params), || format!("the {what} does not have the view's parameters"));
    }
    check(errs, None, s.write.domain().and_then(|d| d.is_equal(&s.domain)), || "the write is not on the domain".into());
    check(errs, None, s.write.is_single_valued(), || "the write is not a function".into());

    if s.reads.len() != info.inputs.len() || s.reads.iter().zip(&info.inputs).any(|(r, a)| r.src != a.src) {
        errs.push(diag!(Internal, "the reads do not follow the IndexBook's accesses"));
        return;
    }
    for r in &s.reads {
        let src = g.node(r.src).label.clone();
        check(errs, None, r.map.is_single_valued(), || format!("the read of {src} is not a function"));
        check(errs, None, r.map.domain().and_then(|d| d.is_subset(&s.domain)), || {
            format!("the read of {src} reaches outside the domain")
        });
        if let Some(t) = view.block(r.src).and_then(Block::scop) {
            let inside = in_tensor(&r.map, &t.write, &view.context);
            check(errs, None, inside, || format!("the read of {src} leaves {src}'s domain (a lost div guard?)"));
        }
        check(errs, None, partitions(&s.domain, &r.map, &s.fills), || {
            format!("the read of {src} and the fills do not partition the domain")
        });
    }
    if let Some(c) = &b.contraction {
        for (side, op) in [("lhs", &c.lhs), ("rhs", &c.rhs)] {
            check(errs, None, op.map.is_single_valued(), || format!("the {side} map is not a function"));
            check(errs, None, op.map.domain().and_then(|d| d.is_subset(&s.domain)), || {
                format!("the {side} map reaches outside the domain")
            });
            if let Some(t) = view.block(op.src).and_then(Block::scop) {
                check(errs, None, in_tensor(&op.map, &t.write, &view.context), || {
                    format!("the {side} map leaves its tensor")
                });
            }
        }
    }
    match count_pieces(s) {
        Ok(p) if p > opts.max_pieces => errs.push(diag!(Internal, "{p} pieces, over the limit {}", opts.max_pieces)),
        Ok(_) => {}
        Err(e) => errs.push(e),
    }
}

/// Every point `map` reads lies in the tensor `write` produces, for the
/// parameter values of `context`.
fn in_tensor(map: &Map<'_>, write: &Map<'_>, context: &Set<'_>) -> IslResult<bool> {
    let reads = map.range()?.intersect_params(context)?;
    reads.is_subset(&write.range()?)
}

/// The read's domain and the fills are pairwise disjoint and cover `domain`.
fn partitions(domain: &Set<'_>, read: &Map<'_>, fills: &[super::Fill<'_>]) -> IslResult<bool> {
    let mut covered = read.domain()?;
    for f in fills {
        if !covered.intersect(&f.set)?.is_empty()? {
            return Ok(false);
        }
        covered = covered.union(&f.set)?;
    }
    covered.is_equal(domain)
}

fn edges(g: &Graph, book: &IndexBook, view: &PolyView<'_>, errs: &mut Vec<Diagnostic>) {
    let mut want = Vec::new();
    for id in g.ids() {
        let Some(info) = book.get(id) else { continue };
        want.extend(info.inputs.iter().map(|a| (a.src, id)));
        if !info.reduce_axes.is_empty() && view.blocks[id.index()].scop().is_some() {
            want.push((id, id));
        }
    }
    let got: Vec<(NodeId, NodeId)> = view.edges.iter().map(|e| (e.from, e.to)).collect();
    if got != want {
        errs.push(diag!(Internal, "the edges {got:?} should be {want:?}"));
        return;
    }
    for e in &view.edges {
        let label = g.node(e.to).label.clone();
        let (from, to) = (view.blocks[e.from.index()].scop(), view.blocks[e.to.index()].scop());
        let (Some(f), Some(t)) = (from, to) else {
            if e.deps.is_some() {
                errs.push(diag!(Internal, "an edge to a non-SCoP block has dependences").on_node(label));
            }
            continue;
        };
        let Some(d) = &e.deps else {
            errs.push(diag!(Internal, "an edge between SCoP blocks has no dependences").on_node(label));
            continue;
        };
        if e.from != e.to && (d.flow.len() != 1 || !d.anti.is_empty() || !d.output.is_empty()) {
            errs.push(diag!(Internal, "an edge between two values has other than one flow dependence").on_node(&label));
        }
        for m in d.flow.iter().chain(&d.anti).chain(&d.output) {
            let ok = m.domain().and_then(|x| x.is_subset(&f.domain)).and_then(|a| {
                let b = m.range()?.is_subset(&t.domain)?;
                Ok(a && b)
            });
            check(errs, Some(&label), ok, || "a dependence leaves the domains of its edge".into());
        }
    }
}

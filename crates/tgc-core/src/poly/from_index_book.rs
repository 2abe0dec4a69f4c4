//! IndexBook → Poly-View (`000` §3): each value's domain, write and reads as
//! isl text, parsed, simplified and counted; then contractions (§3.5) and
//! edges with their dependences.
//!
//! | IndexBook | Poly-View |
//! | --- | --- |
//! | `domain.constraints` (bounds, div guards) | the statement's domain set |
//! | `Access.map` | a read map `S_v[i…] -> src[map]` on the domain |
//! | `Access.guard` (`PAD` pieces) | the read's domain restricted to every `valid`; each `otherwise` a [`Fill`] |

use std::collections::{HashMap, HashSet};

use crate::diag;
use crate::diag::DResult;
use crate::index_book::{IndexBook, IndexInfo};
use crate::tiny::{Graph, NodeId, Op, Rel};

use super::isl::{Ctx, Map, Set};
use super::to_isl::{self, isl_name, such_that, vars, NonAffine, Params};
use super::{contraction, internal, Block, BlockKind, Body, Deps, Edge, Fill, Options, PolyView, Read, Scop};

/// Builds the Poly-View of a graph and its verified IndexBook with the
/// default [`Options`].
///
/// Errors: `ExcessivePiecewise` (on the node) when a block has more than
/// [`super::MAX_PIECES`] pieces; `Internal` when the book does not fit the
/// graph or isl rejects text this module wrote.
pub fn build<'c>(ctx: &'c Ctx, g: &Graph, book: &IndexBook) -> DResult<PolyView<'c>> {
    build_with(ctx, g, book, &Options::default())
}

/// [`build`] with explicit options.
pub fn build_with<'c>(ctx: &'c Ctx, g: &Graph, book: &IndexBook, opts: &Options) -> DResult<PolyView<'c>> {
    let mut b = Builder::new(ctx, g, book, *opts)?;
    let blocks = g.ids().map(|id| b.block(id)).collect::<DResult<Vec<_>>>()?;
    let mut view = b.view(blocks)?;
    for id in g.ids() {
        if let Some(c) = contraction::detect(g, book, &view, id)? {
            let b = &mut view.blocks[id.index()];
            b.kind = BlockKind::ContractionPattern;
            b.contraction = Some(c);
        }
    }
    view.edges = edges(g, book, &view, &|_| true, true)?;
    Ok(view)
}

/// Poly-Views of parts of one graph: the blocks a question of Poly Core
/// between two nodes needs ([`Parts::between`]), built alone, so that
/// region formation asks about a producer and a consumer without building
/// the view of the whole graph, and asks once for parts that are the same
/// but for their names ([`Parts::key`]: ResNet's repeated blocks).
///
/// A part's view has a block per node, like [`build`]'s: those of the part
/// as there (without contraction detection: every part block keeps the
/// kind of its op), every other one outside the SCoP and without axes;
/// its edges are those into the part's blocks, and only the self-edges
/// (the accumulators') carry a dependence relation: the view answers Poly
/// Core's questions about a producer and a consumer ([`super::core`]'s
/// `can_compute_at`, `min_buffer_for_edge`, `compute_at_with_buffer`,
/// `footprint`), not `analyze`'s.
pub struct Parts<'g, 'c> {
    builder: Builder<'g, 'c>,
}

impl<'g, 'c> Parts<'g, 'c> {
    /// Errors: `Internal` when the book does not fit the graph.
    pub fn new(ctx: &'c Ctx, g: &'g Graph, book: &'g IndexBook, opts: &Options) -> DResult<Parts<'g, 'c>> {
        Ok(Parts { builder: Builder::new(ctx, g, book, *opts)? })
    }

    /// The nodes on a path from `producer` to `consumer` (both included),
    /// in node order: the descendants of `producer` that `consumer`
    /// depends on. Empty when `consumer` does not depend on `producer`.
    pub fn between(&self, producer: NodeId, consumer: NodeId) -> Vec<NodeId> {
        let (g, book) = (self.builder.g, self.builder.book);
        if producer.index() >= consumer.index() || consumer.index() >= g.len() {
            return Vec::new();
        }
        let span = producer.index()..=consumer.index();
        let sources = |id: NodeId| book.get(id).into_iter().flat_map(|info| info.inputs.iter().map(|a| a.src));
        let mut below = vec![false; g.len()];
        below[producer.index()] = true;
        for k in producer.index() + 1..=consumer.index() {
            below[k] = sources(NodeId(k as u32)).any(|s| below[s.index()]);
        }
        let mut above = vec![false; g.len()];
        above[consumer.index()] = true;
        for k in span.clone().rev() {
            if above[k] && below[k] {
                for s in sources(NodeId(k as u32)).filter(|s| span.contains(&s.index())) {
                    above[s.index()] = true;
                }
            }
        }
        span.filter(|&k| above[k] && below[k]).map(|k| NodeId(k as u32)).collect()
    }

    /// The isl text of `part`'s blocks (sorted node ids) without their
    /// names: each block's kind, dtype, domain, write, reads (each source
    /// by its position in `part`, or `*` outside it) and fills, or why it
    /// is outside the SCoP. Two parts with the same key get the same
    /// answers from Poly Core, but for the names in them.
    ///
    /// Errors: `Internal` when the book has no entry for a node.
    pub fn key(&self, part: &[NodeId]) -> DResult<String> {
        let mut key = String::new();
        for &id in part {
            let n = self.builder.g.node(id);
            key.push_str(&format!("{} {}\n", kind_of(&n.op).name(), self.builder.g.dtype(id)));
            match self.builder.text(id)? {
                Ok(t) => {
                    for s in [&t.domain, &t.write] {
                        key.push_str(s);
                        key.push('\n');
                    }
                    for (src, _, map) in &t.reads {
                        match part.binary_search(src) {
                            Ok(k) => key.push_str(&format!("{k} {map}\n")),
                            Err(_) => key.push_str(&format!("* {map}\n")),
                        }
                    }
                    for (before, valid, value) in &t.fills {
                        key.push_str(&format!("fill {before} {valid} {value}\n"));
                    }
                }
                Err(reason) => key.push_str(&format!("non_scop {reason}\n")),
            }
        }
        Ok(key)
    }

    /// The view of `part` (sorted node ids).
    ///
    /// Errors: as [`build`]'s, for the part's blocks.
    pub fn view(&mut self, part: &[NodeId]) -> DResult<PolyView<'c>> {
        let g = self.builder.g;
        let mut blocks = Vec::with_capacity(g.len());
        for id in g.ids() {
            blocks.push(match part.binary_search(&id) {
                Ok(_) => self.builder.block(id)?,
                Err(_) => self.builder.outside(id),
            });
        }
        let mut view = self.builder.view(blocks)?;
        view.edges = edges(g, self.builder.book, &view, &|id| part.binary_search(&id).is_ok(), false)?;
        Ok(view)
    }
}

/// What every block of one graph's view is built with: the names, the
/// parameters, and the isl objects parsed so far.
struct Builder<'g, 'c> {
    ctx: &'c Ctx,
    g: &'g Graph,
    book: &'g IndexBook,
    opts: Options,
    params: Params,
    names: Vec<String>,
    parsed: Parsed<'c>,
}

impl<'g, 'c> Builder<'g, 'c> {
    fn new(ctx: &'c Ctx, g: &'g Graph, book: &'g IndexBook, opts: Options) -> DResult<Builder<'g, 'c>> {
        if book.len() != g.len() {
            return Err(diag!(Internal, "the IndexBook has {} entries for {} nodes", book.len(), g.len()));
        }
        let params = Params::new(&symbols(g));
        let mut names: Vec<String> = Vec::with_capacity(g.len());
        let mut taken: HashSet<String> = HashSet::with_capacity(g.len());
        for id in g.ids() {
            // `S_…` names statements: a tensor must not look like one.
            let label = &g.node(id).label;
            let base = if label.starts_with("S_") { format!("T{label}") } else { label.clone() };
            let name = isl_name(&base, &|n| taken.contains(n));
            taken.insert(name.clone());
            names.push(name);
        }
        Ok(Builder { ctx, g, book, opts, params, names, parsed: Parsed::default() })
    }

    fn info(&self, id: NodeId) -> DResult<&'g IndexInfo> {
        let book: &'g IndexBook = self.book;
        book.get(id).ok_or_else(|| diag!(Internal, "the IndexBook has no entry for {}", self.g.node(id).label))
    }

    /// The block's isl text, or why it is outside the SCoP.
    fn text(&self, id: NodeId) -> DResult<Result<ScopText, NonAffine>> {
        let info = self.info(id)?;
        // `000` §1.3 invariant 5: a data-dependent read is Non-SCoP.
        Ok(match self.g.node(id).op {
            Op::Gather { .. } => Err("GATHER reads its x at a data-dependent position (not affine)".to_string()),
            Op::Scan { axis, .. } => {
                Err(format!("SCAN reads its own previous point along axis {axis} (a recurrence, not modelled)"))
            }
            _ => ScopText::new(info, &self.names[id.index()], &self.names, &self.params),
        })
    }

    fn block(&mut self, id: NodeId) -> DResult<Block<'c>> {
        let n = self.g.node(id);
        let body = match self.text(id)? {
            Ok(t) => Body::Scop(t.parse(self.ctx, &mut self.parsed)?),
            Err(reason) => Body::NonScop(shorten(reason)),
        };
        if let Body::Scop(s) = &body {
            let pieces = count_pieces(s)?;
            if pieces > self.opts.max_pieces {
                return Err(diag!(
                    ExcessivePiecewise,
                    "this {} has {pieces} pieces after simplification, more than the limit of {}",
                    n.op.name(),
                    self.opts.max_pieces
                )
                .on_node(n.label.clone())
                .or_at(n.span));
            }
        }
        let info = self.info(id)?;
        Ok(Block {
            node: id,
            name: self.names[id.index()].clone(),
            kind: kind_of(&n.op),
            dtype: self.g.dtype(id),
            axes: info.axes.iter().chain(&info.reduce_axes).cloned().collect(),
            body,
            contraction: None,
        })
    }

    /// A block left out of a part's view: no axes, outside the SCoP.
    fn outside(&self, id: NodeId) -> Block<'c> {
        Block {
            node: id,
            name: self.names[id.index()].clone(),
            kind: kind_of(&self.g.node(id).op),
            dtype: self.g.dtype(id),
            axes: Vec::new(),
            body: Body::NonScop("outside this part of the view".to_string()),
            contraction: None,
        }
    }

    /// The view of `blocks`, without edges.
    fn view(&self, blocks: Vec<Block<'c>>) -> DResult<PolyView<'c>> {
        let context = self.ctx.set(&context_text(self.g, &self.params)).map_err(internal)?;
        Ok(PolyView {
            name: self.g.name.clone(),
            params: self.params.names.clone(),
            context,
            blocks,
            edges: Vec::new(),
        })
    }
}

/// A reason cut to a readable length (symbolic reshapes print long terms).
fn shorten(reason: String) -> String {
    const MAX: usize = 160;
    match reason.char_indices().nth(MAX) {
        Some((at, _)) => format!("{}…", &reason[..at]),
        None => reason,
    }
}

/// The graph's symbols in declaration order, then any symbol a shape or an
/// argument uses without a declaration.
fn symbols(g: &Graph) -> Vec<String> {
    let mut out: Vec<String> = g.symbols.iter().map(|s| s.name.clone()).collect();
    for id in g.ids() {
        for d in &g.node(id).ty.shape {
            for s in d.symbols() {
                if !out.contains(&s) {
                    out.push(s);
                }
            }
        }
    }
    out
}

/// `[P] -> { : P_k >= 1 and <affine open constraints> }`.
///
/// A constraint whose difference `lhs - rhs` is a product `c*m*a` of a
/// positive integer, symbols and an affine `a` is carried as `a = 0` (or
/// `a <= 0`): every symbol is at least 1, so the two are equivalent. That
/// is how a `RESHAPE` of `[N, J]` to `[N, K]` (`N*J = N*K`) reaches the
/// domain as `J = K`.
fn context_text(g: &Graph, p: &Params) -> String {
    let mut cs: Vec<String> = p.names.iter().map(|(_, n)| format!("{n} >= 1")).collect();
    for nc in &g.constraints {
        let c = &nc.constraint;
        let sides = match (to_isl::dim(&c.lhs, p), to_isl::dim(&c.rhs, p)) {
            (Ok(l), Ok(r)) => Some((l, r)),
            _ => {
                let diff = &c.lhs - &c.rhs;
                diff.floordiv(&diff.common_factor()).and_then(|a| to_isl::dim(&a, p).ok()).map(|a| (a, "0".into()))
            }
        };
        if let Some((l, r)) = sides {
            cs.push(match c.rel {
                Rel::Eq => format!("{l} = {r}"),
                Rel::Le => format!("{l} <= {r}"),
            });
        }
    }
    format!("{}{{ :{} }}", p.prefix(), such_that(&cs).trim_start().trim_start_matches(':'))
}

/// The block kind of an op (before contraction detection).
fn kind_of(op: &Op) -> BlockKind {
    match op {
        Op::Input { .. } | Op::Const { .. } => BlockKind::Leaf,
        Op::Reduce { .. } => BlockKind::Reduce,
        Op::Scan { .. } => BlockKind::Scan,
        op if op.is_movement() => BlockKind::MovementAffine,
        _ => BlockKind::Ewise,
    }
}

/// The isl text of one block, before parsing, with the statement's tuple
/// named [`STMT`] and every array's [`ARRAY`]: blocks of the same shape and
/// access pattern then have the same text, which [`Parsed`] parses once
/// (`000` §3.3's simplification included); the names are set afterwards.
struct ScopText {
    /// `S_<name>`, the statement's tuple name.
    stmt: String,
    /// The block's array name (`<name>`).
    array: String,
    domain: String,
    write: String,
    /// `(source, source array name, map)`.
    reads: Vec<(NodeId, String, String)>,
    /// `(where the pieces before hold, where this piece's guard holds, value)`.
    fills: Vec<(String, String, f64)>,
}

/// The placeholder statement tuple name of a [`ScopText`] (and of the
/// dumps' gist cache, `text::Gists`).
pub(super) const STMT: &str = "S";
/// The placeholder array tuple name of a [`ScopText`] (and of `text::Gists`).
pub(super) const ARRAY: &str = "A";

/// Parsed and simplified isl objects by text: a graph of a thousand
/// identical element-wise nodes parses its block texts once, not a
/// thousand times (parsing would dominate compile time).
#[derive(Default)]
struct Parsed<'c> {
    sets: HashMap<String, Set<'c>>,
    maps: HashMap<String, Map<'c>>,
}

impl<'c> Parsed<'c> {
    fn set(&mut self, ctx: &'c Ctx, text: &str) -> DResult<Set<'c>> {
        if let Some(s) = self.sets.get(text) {
            return s.try_clone().map_err(internal);
        }
        let s = simplify_set(&ctx.set(text).map_err(internal)?)?;
        self.sets.insert(text.to_string(), s.try_clone().map_err(internal)?);
        Ok(s)
    }

    fn map(&mut self, ctx: &'c Ctx, text: &str) -> DResult<Map<'c>> {
        if let Some(m) = self.maps.get(text) {
            return m.try_clone().map_err(internal);
        }
        let m = simplify_map(&ctx.map(text).map_err(internal)?)?;
        self.maps.insert(text.to_string(), m.try_clone().map_err(internal)?);
        Ok(m)
    }
}

impl ScopText {
    fn new(info: &IndexInfo, name: &str, names: &[String], p: &Params) -> Result<ScopText, NonAffine> {
        let n = info.axes.len() + info.reduce_axes.len();
        for a in info.axes.iter().chain(&info.reduce_axes) {
            to_isl::dim(&a.size, p).map_err(|r| format!("the extent of {}: {r}", a.name))?;
        }
        let dom: Vec<String> =
            info.domain.constraints.iter().map(|c| to_isl::constr(c, p)).collect::<Result<_, _>>()?;
        let (pre, stmt) = (p.prefix(), format!("{STMT}[{}]", vars(n)));
        let domain = format!("{pre}{{ {stmt}{} }}", such_that(&dom));
        let write = format!("{pre}{{ {stmt} -> {ARRAY}[{}]{} }}", vars(info.axes.len()), such_that(&dom));
        let mut reads = Vec::new();
        let mut fills = Vec::new();
        for a in &info.inputs {
            let idx: Vec<String> = a.map.iter().map(|e| to_isl::expr(e, p)).collect::<Result<_, _>>()?;
            let src = names.get(a.src.index()).ok_or_else(|| format!("source n{} has no block", a.src.0))?;
            let mut before = dom.clone();
            for piece in &a.guard {
                let valid: Vec<String> = piece.valid.iter().map(|c| to_isl::constr(c, p)).collect::<Result<_, _>>()?;
                fills.push((
                    format!("{pre}{{ {stmt}{} }}", such_that(&before)),
                    format!("{pre}{{ {stmt}{} }}", such_that(&valid)),
                    piece.otherwise,
                ));
                before.extend(valid);
            }
            let text = format!("{pre}{{ {stmt} -> {ARRAY}[{}]{} }}", idx.join(", "), such_that(&before));
            reads.push((a.src, src.clone(), text));
        }
        Ok(ScopText { stmt: format!("S_{name}"), array: name.to_string(), domain, write, reads, fills })
    }

    fn parse<'c>(self, ctx: &'c Ctx, parsed: &mut Parsed<'c>) -> DResult<Scop<'c>> {
        let stmt = self.stmt.as_str();
        let domain = parsed.set(ctx, &self.domain)?.with_tuple_name(stmt).map_err(internal)?;
        let write = parsed.map(ctx, &self.write)?.with_tuple_names(stmt, &self.array).map_err(internal)?;
        let mut reads = Vec::with_capacity(self.reads.len());
        for (src, array, text) in &self.reads {
            let map = parsed.map(ctx, text)?.with_tuple_names(stmt, array).map_err(internal)?;
            reads.push(Read { src: *src, map });
        }
        let mut fills = Vec::new();
        for (before, valid, value) in &self.fills {
            let piece = parsed.set(ctx, before)?.subtract(&parsed.set(ctx, valid)?).map_err(internal)?;
            let piece = simplify_set(&piece)?;
            if !piece.is_empty().map_err(internal)? {
                fills.push(Fill { set: piece.with_tuple_name(stmt).map_err(internal)?, value: *value });
            }
        }
        Ok(Scop { domain, write, reads, fills })
    }
}

/// `remove_redundancies`, then `coalesce` (`000` §3.3).
pub(crate) fn simplify_set<'c>(s: &Set<'c>) -> DResult<Set<'c>> {
    s.remove_redundancies().and_then(|s| s.coalesce()).map_err(internal)
}

/// `remove_redundancies`, then `coalesce`.
pub(crate) fn simplify_map<'c>(m: &Map<'c>) -> DResult<Map<'c>> {
    m.remove_redundancies().and_then(|m| m.coalesce()).map_err(internal)
}

/// Pieces of a block: those of each read as a `pw_multi_aff`, plus the basic
/// sets of each fill.
pub(crate) fn count_pieces(s: &Scop<'_>) -> DResult<usize> {
    let mut n = 0;
    for r in &s.reads {
        n += r.map.to_pw_multi_aff().and_then(|f| f.n_piece()).map_err(internal)?;
    }
    for f in &s.fills {
        n += f.set.n_basic_set().map_err(internal)?;
    }
    Ok(n)
}

/// One edge per (consumer, distinct source) with its flow dependence
/// `write_src ; read⁻¹`, and one self-edge per SCoP reduction for its
/// accumulator (see the module doc of [`super`]), for the consumers `keep`
/// accepts; without `flow`, the edges between blocks carry no relation.
fn edges<'c>(
    g: &Graph,
    book: &IndexBook,
    view: &PolyView<'c>,
    keep: &dyn Fn(NodeId) -> bool,
    flow: bool,
) -> DResult<Vec<Edge<'c>>> {
    let mut out = Vec::new();
    for id in g.ids().filter(|&id| keep(id)) {
        let Some(info) = book.get(id) else { continue };
        let to = &view.blocks[id.index()];
        for (k, a) in info.inputs.iter().enumerate() {
            let from = view.blocks.get(a.src.index()).ok_or_else(|| diag!(Internal, "no block for a source"))?;
            let deps = match (from.scop(), to.scop()) {
                (Some(f), Some(t)) if flow => {
                    let read = &t.reads.get(k).ok_or_else(|| diag!(Internal, "block {} lacks read {k}", to.name))?.map;
                    let flow = f.write.apply_range(&read.reverse().map_err(internal)?).map_err(internal)?;
                    Some(Deps { flow: vec![simplify_map(&flow)?], anti: Vec::new(), output: Vec::new() })
                }
                _ => None,
            };
            out.push(Edge { from: a.src, to: id, deps });
        }
        if let (Some(s), false) = (to.scop(), info.reduce_axes.is_empty()) {
            let acc = accumulator_deps(s, info.axes.len(), info.reduce_axes.len(), &to.statement(), view)?;
            out.push(Edge { from: id, to: id, deps: Some(acc) });
        }
    }
    Ok(out)
}

/// `{ S[i, r] -> S[i, r'] : r <lex r' }` on the domain: the accumulator's
/// dependences, the same relation as flow, anti and output dependence.
fn accumulator_deps<'c>(
    s: &Scop<'c>,
    n_out: usize,
    n_red: usize,
    stmt: &str,
    view: &PolyView<'c>,
) -> DResult<Deps<'c>> {
    let ctx = s.domain.ctx();
    let pre = Params::from_names(&view.params).prefix();
    let all = vars(n_out + n_red);
    let red: Vec<String> = (n_out..n_out + n_red).map(|k| format!("i{k}")).collect();
    let proj = ctx.map(&format!("{pre}{{ {stmt}[{all}] -> [{}] }}", red.join(", "))).map_err(internal)?;
    let same_cell = s.write.apply_range(&s.write.reverse().map_err(internal)?).map_err(internal)?;
    let later = proj.lex_lt_map(&proj).map_err(internal)?;
    let dep = same_cell
        .intersect(&later)
        .and_then(|m| m.intersect_domain(&s.domain))
        .and_then(|m| m.intersect_range(&s.domain))
        .map_err(internal)?;
    let dep = simplify_map(&dep)?;
    let copy = |m: &Map<'c>| m.try_clone().map_err(internal);
    Ok(Deps { flow: vec![copy(&dep)?], anti: vec![copy(&dep)?], output: vec![dep] })
}

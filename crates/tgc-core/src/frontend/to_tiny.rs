//! Lowering: Frontend IR → Tiny IR (`spec/000` §2).
//!
//! The entry graph becomes one [`Graph`]: its symbols (with defaults) are
//! `Graph::symbols`, its parameters `INPUT` nodes in parameter order, its
//! results `Graph::outputs` under the declared result names. Subgraph calls
//! are inlined at the call site, at most [`MAX_DEPTH`] deep; the callee's
//! symbols are bound to the caller's sizes by matching its parameter shapes
//! against the arguments (then to their defaults). Each statement's nodes
//! carry its source span (`Graph::cur_span`), and so do its errors.
//!
//! Checks made here (the shape and dtype rules themselves are those of the
//! Tiny builder and of the decompositions in [`super::ops`]):
//! - a literal takes the dtype of the tensor it meets; a float literal
//!   meeting an integer tensor (or any literal meeting the wrong kind) is
//!   `DTypeMismatch` at the literal;
//! - call arguments match the callee's parameter dtypes (`DTypeMismatch`)
//!   and shapes (`AxisSizeMismatch`) at the argument; a callee symbol that no
//!   argument fixes and that has no default is `UnboundSymbol`;
//! - returned values match the declared result dtypes (`DTypeMismatch`) and
//!   shapes (`AxisSizeMismatch`) at the returned name;
//! - a call nested deeper than [`MAX_DEPTH`] is `RecursionLimit` at the call;
//!   an entry graph that would inline more than [`MAX_INLINED_STATEMENTS`]
//!   statements is `Unsupported`, before anything is built, at its first call
//!   that alone is too big (else at the `graph` keyword).
//!
//! Sizes that can only be compared once symbols have values (a declared
//! `OH` against a computed `(H - 3)/2 + 1`) become `Graph::constraints`,
//! checked by `Graph::bind`.

use std::collections::BTreeMap;

use crate::diag;
use crate::diag::{DResult, Span};
use crate::frontend::ast;
use crate::frontend::ir::*;
use crate::frontend::ops::{contraction, conv, elementwise, movement, nn, reduce};
use crate::sym::Dim;
use crate::tiny::{Constraint, Graph, NodeConstraint, NodeId, Output, Rel, Symbol};
use crate::DType;

/// Deepest subgraph nesting allowed (`DSL.md`): the entry graph is depth 0.
pub const MAX_DEPTH: usize = 10;

/// Most statements one lowering may inline: subgraphs that call others
/// several times grow exponentially with depth, and this rejects such a
/// program (`Unsupported`) before building anything, instead of exhausting
/// time and memory. Each statement makes at least one Tiny IR node, so the
/// bound is the graph's, [`crate::tiny::graph::MAX_NODES`].
pub const MAX_INLINED_STATEMENTS: usize = crate::tiny::graph::MAX_NODES;

/// Resolves and lowers `program`; `entry` picks the entry graph, else the
/// only graph, else the one named `main`.
///
/// Errors: those of [`super::resolve::resolve`] and of [`lower_program`].
pub fn lower(program: &ast::Program, entry: Option<&str>) -> DResult<Graph> {
    let p = super::resolve::resolve(program)?;
    lower_program(&p, entry)
}

/// [`lower`] that also returns the `frontend` dump stage ([`super::ir::dump`]
/// of the resolved program), for the pipeline driver.
///
/// Errors: those of [`lower`].
pub fn lower_with_dump(program: &ast::Program, entry: Option<&str>) -> DResult<(Graph, String)> {
    let p = super::resolve::resolve(program)?;
    let g = lower_program(&p, entry)?;
    Ok((g, dump(&p)))
}

/// The index of the entry graph: `entry` if given, else the only graph, else
/// `main`.
///
/// Errors: `UnknownName` when there is no such graph.
pub fn entry_index(p: &FProgram, entry: Option<&str>) -> DResult<usize> {
    let names: Vec<&str> = p.graphs.iter().map(|g| g.name.as_str()).collect();
    let find = |n: &str| p.graphs.iter().position(|g| g.name == n);
    match (entry, p.graphs.len()) {
        (Some(e), _) => {
            find(e).ok_or_else(|| diag!(UnknownName, "no graph named `{e}` (graphs: {})", names.join(", ")))
        }
        (None, 0) => Err(diag!(UnknownName, "the program defines no graph")),
        (None, 1) => Ok(0),
        (None, _) => find("main").ok_or_else(|| {
            diag!(
                UnknownName,
                "several graphs ({}) and none is named `main`; pick one with --entry NAME",
                names.join(", ")
            )
        }),
    }
}

/// Lowers the entry graph of a resolved program, inlining its calls.
///
/// Errors: see the module doc, plus every error of the op decompositions
/// (`BroadcastMismatch`, `AxisSizeMismatch`, `InvalidPermutation`,
/// `InvalidAxis`, `DTypeMismatch`, `NegativeStride`, …) at the statement.
pub fn lower_program(p: &FProgram, entry: Option<&str>) -> DResult<Graph> {
    let ei = entry_index(p, entry)?;
    let fg = &p.graphs[ei];
    let mut g = Graph::new(&fg.name);
    g.symbols = fg
        .syms
        .iter()
        .map(|(name, default)| Symbol { name: name.clone(), default: *default, padded: fg.padded.contains(name) })
        .collect();
    let mut args = Vec::new();
    for prm in &fg.params {
        g.cur_span = Some(prm.span);
        let id = g.input(&prm.name, prm.dtype, &prm.shape)?;
        label(&mut g, id, &prm.name);
        args.push(id);
    }
    let sizes = inlined_sizes(p);
    if sizes[ei][0] > MAX_INLINED_STATEMENTS {
        let big = |st: &&FStmt| matches!(st.op, FOp::Call { graph, .. } if sizes.get(graph).map_or(0, |s| s[1]) > MAX_INLINED_STATEMENTS);
        let at = fg.body.iter().find(big).map_or(fg.span, |st| st.span);
        return Err(diag!(
            Unsupported,
            "lowering `{}` would inline more than {MAX_INLINED_STATEMENTS} statements (subgraph calls multiply)",
            fg.name
        )
        .at(at));
    }
    let mut lw = Lowerer { p, g };
    let outs = lw.inline(ei, args, &BTreeMap::new(), 0)?;
    let mut g = lw.g;
    for (r, node) in fg.results.iter().zip(outs) {
        g.outputs.push(Output { name: r.name.clone(), node });
    }
    g.cur_span = None;
    Ok(g)
}

/// Statement-by-statement lowering of one graph without subgraph calls, for
/// a frontend that needs each value's shape and dtype while it builds the
/// graph (the ONNX importer, [`crate::frontend::onnx`]): the same shape and
/// dtype rules as [`lower_program`], one statement at a time.
///
/// Values are numbered by the caller (any dense numbering; a
/// [`FStmt`]'s operands and results use it).
pub(crate) struct Incremental {
    lw: Lowerer<'static>,
    vals: Vec<Option<NodeId>>,
}

/// The program of [`Incremental`]: it has no graph, so a call fails.
static NO_GRAPHS: FProgram = FProgram { graphs: Vec::new() };

impl Incremental {
    pub(crate) fn new(name: &str) -> Incremental {
        Incremental { lw: Lowerer { p: &NO_GRAPHS, g: Graph::new(name) }, vals: Vec::new() }
    }

    /// The graph's name.
    pub(crate) fn name(&self) -> &str {
        &self.lw.g.name
    }

    /// Declares symbol `name` (no default) if it is not declared yet.
    pub(crate) fn symbol(&mut self, name: &str) {
        if !self.lw.g.symbols.iter().any(|s| s.name == name) {
            self.lw.g.symbols.push(Symbol { name: name.to_string(), default: None, padded: false });
        }
    }

    /// Defines value `v` as an `INPUT` of `prm`'s name, dtype and shape.
    pub(crate) fn param(&mut self, v: ValueId, prm: &FTensor) -> DResult<()> {
        self.lw.g.cur_span = Some(prm.span);
        let id = self.lw.g.input(&prm.name, prm.dtype, &prm.shape)?;
        self.set(v, id);
        Ok(())
    }

    /// Lowers `st`, defining its results.
    pub(crate) fn stmt(&mut self, st: &FStmt) -> DResult<()> {
        self.lw.g.cur_span = Some(st.span);
        let outs = self.lw.stmt(st, &self.vals, &Subst::new(), 0)?;
        for (v, n) in st.results.iter().zip(outs) {
            self.set(*v, n);
        }
        Ok(())
    }

    fn set(&mut self, v: ValueId, n: NodeId) {
        let k = v.0 as usize;
        if self.vals.len() <= k {
            self.vals.resize(k + 1, None);
        }
        self.vals[k] = Some(n);
    }

    fn node(&self, v: ValueId) -> DResult<NodeId> {
        self.vals.get(v.0 as usize).copied().flatten().ok_or_else(|| diag!(Internal, "value %{} is not defined", v.0))
    }

    /// The shape of a defined value.
    pub(crate) fn shape(&self, v: ValueId) -> DResult<&[Dim]> {
        Ok(self.lw.g.shape(self.node(v)?))
    }

    /// The dtype of a defined value.
    pub(crate) fn dtype(&self, v: ValueId) -> DResult<DType> {
        Ok(self.lw.g.dtype(self.node(v)?))
    }
}

/// Names a node after its source value when the label is free.
fn label(g: &mut Graph, id: NodeId, name: &str) {
    if g.find(name).is_none() {
        // The label is free, so renaming cannot fail.
        let _ = g.set_label(id, name);
    }
}

/// Symbol values of an inlined graph (empty for the entry graph, whose
/// symbols stay symbolic).
type Subst = BTreeMap<String, Dim>;

/// `sizes[g][d]`: how many statements inlining graph `g` at depth `d`
/// executes, counting nested calls down to [`MAX_DEPTH`] (deeper ones fail
/// with `RecursionLimit` anyway); saturating.
fn inlined_sizes(p: &FProgram) -> Vec<Vec<usize>> {
    let mut sizes = vec![vec![0usize; MAX_DEPTH + 2]; p.graphs.len()];
    for d in (0..=MAX_DEPTH).rev() {
        for (gi, fg) in p.graphs.iter().enumerate() {
            let mut n = 0usize;
            for st in &fg.body {
                let inner = match st.op {
                    FOp::Call { graph, .. } => sizes.get(graph).map_or(0, |s| s[d + 1]),
                    _ => 0,
                };
                n = n.saturating_add(1).saturating_add(inner);
            }
            sizes[gi][d] = n;
        }
    }
    sizes
}

struct Lowerer<'p> {
    p: &'p FProgram,
    g: Graph,
}

impl Lowerer<'_> {
    /// Lowers graph `gi` with parameter `k` bound to `args[k]`; returns the
    /// nodes of its results.
    fn inline(&mut self, gi: usize, args: Vec<NodeId>, subst: &Subst, depth: usize) -> DResult<Vec<NodeId>> {
        let fg = self.p.graphs.get(gi).ok_or_else(|| diag!(Internal, "call of graph {gi}, which does not exist"))?;
        if args.len() > fg.values.len() {
            return Err(diag!(
                Internal,
                "graph `{}` gets {} arguments but has {} values",
                fg.name,
                args.len(),
                fg.values.len()
            ));
        }
        let mut vals: Vec<Option<NodeId>> = vec![None; fg.values.len()];
        for (k, a) in args.into_iter().enumerate() {
            vals[k] = Some(a);
        }
        for st in &fg.body {
            self.g.cur_span = Some(st.span);
            let before = self.g.len();
            let outs = self.stmt(st, &vals, subst, depth)?;
            for (v, n) in st.results.iter().zip(outs) {
                let k = v.0 as usize;
                let slot = vals
                    .get_mut(k)
                    .ok_or_else(|| diag!(Internal, "statement result %{k} is not a value of `{}`", fg.name))?;
                *slot = Some(n);
                let name = fg.values[k].name.as_deref();
                if let (0, Some(name), true) = (depth, name, n.index() >= before) {
                    label(&mut self.g, n, name);
                }
            }
        }
        let mut out = Vec::new();
        for ((o, sp), decl) in fg.ret.iter().zip(&fg.results) {
            self.g.cur_span = Some(*sp);
            let want: Vec<Dim> = decl.shape.iter().map(|d| dim(d, subst, *sp)).collect::<DResult<_>>()?;
            let node = match o {
                Operand::Value(_) => self.node(o, &vals)?,
                Operand::Lit(l) => {
                    let c = self.meet(l, decl.dtype)?;
                    crate::frontend::ops::broadcast_to(&mut self.g, c, &want)?
                }
            };
            let got = self.g.dtype(node);
            if got != decl.dtype {
                return Err(diag!(
                    DTypeMismatch,
                    "result `{}` is declared {} but the returned value is {got}",
                    decl.name,
                    decl.dtype
                )
                .at(*sp));
            }
            let what = format!("result `{}` of graph `{}`", decl.name, fg.name);
            self.require_shape(node, &want, &what, *sp)?;
            out.push(node);
        }
        Ok(out)
    }

    /// Checks that `node` has shape `want`: decided differences are
    /// `AxisSizeMismatch` at `span`, undecided ones become constraints.
    fn require_shape(&mut self, node: NodeId, want: &[Dim], what: &str, span: Span) -> DResult<()> {
        let got = self.g.shape(node).to_vec();
        let fmt = crate::tiny::infer::fmt_shape;
        if got.len() != want.len() {
            return Err(
                diag!(AxisSizeMismatch, "{what} has shape {} but {} is declared", fmt(&got), fmt(want)).at(span)
            );
        }
        for (a, b) in got.iter().zip(want) {
            if a == b {
                continue;
            }
            if a.as_int().is_some() && b.as_int().is_some() {
                return Err(
                    diag!(AxisSizeMismatch, "{what} has shape {} but {} is declared", fmt(&got), fmt(want)).at(span)
                );
            }
            let constraint =
                Constraint { lhs: a.clone(), rel: Rel::Eq, rhs: b.clone(), what: format!("{what}: {a} == {b}") };
            self.g.constraints.push(NodeConstraint { node, constraint });
        }
        Ok(())
    }

    /// The node of an operand; a literal alone takes its default dtype.
    fn node(&mut self, o: &Operand, vals: &[Option<NodeId>]) -> DResult<NodeId> {
        match o {
            Operand::Value(v) => vals
                .get(v.0 as usize)
                .copied()
                .flatten()
                .ok_or_else(|| diag!(Internal, "value %{} is used before it is defined", v.0)),
            Operand::Lit(l) => self.meet(l, l.default_dtype()),
        }
    }

    /// A literal as a `CONST` of `dtype` (shape `[]`).
    ///
    /// Errors: `DTypeMismatch` at the literal when it does not fit `dtype`.
    fn meet(&mut self, l: &Literal, dtype: DType) -> DResult<NodeId> {
        if !l.fits(dtype) {
            let kind = match l.kind {
                LitKind::Int => "an integer",
                LitKind::Float => "a float",
                LitKind::Bool => "a bool",
            };
            return Err(diag!(
                DTypeMismatch,
                "{kind} literal cannot meet a {dtype} tensor; cast the tensor or change the literal"
            )
            .at(l.span));
        }
        let saved = self.g.cur_span.replace(l.span);
        let c = self.g.constant(l.value, dtype);
        self.g.cur_span = saved;
        c
    }

    /// Operands that meet each other: tensors as they are, literals in the
    /// dtype of the first tensor operand (of `f32` if a float literal and no
    /// tensor, else of the first literal's default).
    fn meet_all(&mut self, ops: &[Operand], vals: &[Option<NodeId>]) -> DResult<Vec<NodeId>> {
        let mut dt = None;
        for o in ops {
            if let Operand::Value(_) = o {
                let n = self.node(o, vals)?;
                dt = Some(self.g.dtype(n));
                break;
            }
        }
        let dt = dt.unwrap_or_else(|| {
            let float = ops.iter().any(|o| matches!(o, Operand::Lit(l) if l.kind == LitKind::Float));
            match ops.first() {
                Some(Operand::Lit(l)) if !float => l.default_dtype(),
                _ => DType::F32,
            }
        });
        ops.iter()
            .map(|o| match o {
                Operand::Lit(l) => self.meet(l, dt),
                Operand::Value(_) => self.node(o, vals),
            })
            .collect()
    }

    fn stmt(&mut self, st: &FStmt, vals: &[Option<NodeId>], subst: &Subst, depth: usize) -> DResult<Vec<NodeId>> {
        let sp = st.span;
        if let FOp::Call { graph, name } = &st.op {
            return self.call(*graph, name, st, vals, depth);
        }
        let arg = |k: usize| st.args.get(k).ok_or_else(|| diag!(Internal, "`{}` is missing operand {k}", st.op.name()));
        let out = match &st.op {
            FOp::Pieces(Pieces::Concat { axis }) => {
                let xs = st.args.iter().map(|o| self.node(o, vals)).collect::<DResult<Vec<_>>>()?;
                movement::concat(&mut self.g, &xs, *axis)?
            }
            FOp::Pieces(Pieces::Split { sizes, axis }) => {
                let x = self.node(arg(0)?, vals)?;
                let sizes = sizes.iter().map(|d| dim(d, subst, sp)).collect::<DResult<Vec<_>>>()?;
                return movement::split(&mut self.g, x, &sizes, *axis);
            }
            FOp::Pieces(Pieces::Chunk { chunks, axis }) => {
                let x = self.node(arg(0)?, vals)?;
                return movement::chunk(&mut self.g, x, *chunks, *axis);
            }
            FOp::Binary(f) => match self.meet_all(&st.args, vals)?[..] {
                [a, b] => elementwise::binary(&mut self.g, *f, a, b)?,
                _ => return Err(diag!(Internal, "`{}` needs two operands", f.name())),
            },
            FOp::Where => {
                let c = match arg(0)? {
                    Operand::Lit(l) => self.meet(l, DType::Bool)?,
                    o => self.node(o, vals)?,
                };
                match self.meet_all(st.args.get(1..).unwrap_or_default(), vals)?[..] {
                    [a, b] => elementwise::where_(&mut self.g, c, a, b)?,
                    _ => return Err(diag!(Internal, "`where` needs three operands")),
                }
            }
            _ => {
                let x = self.node(arg(0)?, vals)?;
                let mut rest = Vec::new();
                for o in st.args.iter().skip(1) {
                    rest.push(self.node(o, vals)?);
                }
                self.simple(&st.op, x, &rest, subst, sp)?
            }
        };
        Ok(vec![out])
    }

    /// Ops whose operands are all tensors (literals take their default dtype).
    fn simple(&mut self, op: &FOp, x: NodeId, rest: &[NodeId], subst: &Subst, sp: Span) -> DResult<NodeId> {
        let g = &mut self.g;
        let more = |k: usize| rest.get(k).copied().ok_or_else(|| diag!(Internal, "missing operand {}", k + 1));
        match op {
            FOp::Unary(f) => elementwise::unary(g, *f, x),
            FOp::Cast { to } => crate::frontend::ops::cast_to(g, x, *to),
            FOp::Reduce { op, axes, keepdim, acc } => {
                let dim_of = |n: &str| dim(&Dim::sym(n), subst, sp);
                let ax = reduce::resolve_axes(g, x, axes.as_deref(), &dim_of)?;
                reduce::reduce(g, *op, x, &ax, *keepdim, *acc)
            }
            FOp::Scan { op, axis, exclusive, reverse } => reduce::scan(g, *op, x, *axis, *exclusive, *reverse),
            FOp::Movement(m) => movement::movement(g, x, &subst_movement(m, subst, sp)?),
            FOp::Matmul => contraction::matmul(g, x, more(0)?),
            FOp::Gather { axis } => movement::gather(g, x, more(0)?, *axis),
            FOp::Take { axis } => movement::take(g, x, more(0)?, *axis),
            FOp::Conv { window, groups, bias } => {
                let b = if *bias { Some(more(1)?) } else { None };
                conv::conv(g, x, more(0)?, b, &subst_window(window, subst, sp)?, *groups)
            }
            FOp::ConvTranspose { window, output_padding, groups, bias } => {
                let b = if *bias { Some(more(1)?) } else { None };
                let op = subst_list(output_padding, subst, sp)?;
                conv::conv_transpose(g, x, more(0)?, b, &subst_window(window, subst, sp)?, &op, *groups)
            }
            FOp::Im2Col { kernel, window } => {
                conv::im2col(g, x, &subst_list(kernel, subst, sp)?, &subst_window(window, subst, sp)?)
            }
            FOp::Col2Im { output, kernel, window } => conv::col2im(
                g,
                x,
                &subst_list(output, subst, sp)?,
                &subst_list(kernel, subst, sp)?,
                &subst_window(window, subst, sp)?,
            ),
            FOp::MaxPool { kernel, window } => {
                conv::maxpool(g, x, &subst_list(kernel, subst, sp)?, &subst_window(window, subst, sp)?)
            }
            FOp::AvgPool { kernel, window, count_include_pad } => conv::avgpool(
                g,
                x,
                &subst_list(kernel, subst, sp)?,
                &subst_window(window, subst, sp)?,
                *count_include_pad,
            ),
            FOp::Softmax { axis } => nn::softmax(g, x, *axis),
            FOp::LogSoftmax { axis } => nn::log_softmax(g, x, *axis),
            FOp::Clamp { min, max } => elementwise::clamp(g, x, *min, *max),
            FOp::BatchNorm { eps } => nn::batch_norm(g, x, [more(0)?, more(1)?, more(2)?, more(3)?], *eps),
            FOp::InstanceNorm { eps } => nn::instance_norm(g, x, more(0)?, more(1)?, *eps),
            FOp::LayerNorm { axes, eps } => nn::layernorm(g, x, more(0)?, more(1)?, axes, *eps),
            FOp::Attention { mask, causal, scale } => {
                let m = if *mask { Some(more(2)?) } else { None };
                nn::attention(g, x, more(0)?, more(1)?, m, *causal, *scale)
            }
            FOp::Binary(_) | FOp::Where | FOp::Pieces(_) | FOp::Call { .. } => {
                Err(diag!(Internal, "`{}` is not a simple op", op.name()))
            }
        }
    }

    /// Inlines a call of graph `gi`.
    fn call(
        &mut self,
        gi: usize,
        name: &str,
        st: &FStmt,
        vals: &[Option<NodeId>],
        depth: usize,
    ) -> DResult<Vec<NodeId>> {
        if depth + 1 > MAX_DEPTH {
            return Err(diag!(
                RecursionLimit,
                "calling `{name}` would nest subgraphs deeper than {MAX_DEPTH}; is the recursion unbounded?"
            )
            .at(st.span));
        }
        let callee =
            self.p.graphs.get(gi).ok_or_else(|| diag!(Internal, "call of graph {gi}, which does not exist"))?;
        let mut map = Subst::new();
        let mut args: Vec<Option<NodeId>> = vec![None; callee.params.len()];
        for (k, (o, prm)) in st.args.iter().zip(&callee.params).enumerate() {
            let Operand::Value(_) = o else { continue };
            let asp = st.arg_spans.get(k).copied().unwrap_or(st.span);
            let n = self.node(o, vals)?;
            let got = self.g.dtype(n);
            if got != prm.dtype {
                return Err(diag!(
                    DTypeMismatch,
                    "argument `{}` of `{name}` is declared {} but {got} is passed",
                    prm.name,
                    prm.dtype
                )
                .at(asp));
            }
            let shape = self.g.shape(n).to_vec();
            let what = format!("argument `{}` of `{name}`", prm.name);
            if shape.len() != prm.shape.len() {
                let fmt = crate::tiny::infer::fmt_shape;
                return Err(diag!(
                    AxisSizeMismatch,
                    "{what} is declared {} but {} is passed",
                    fmt(&prm.shape),
                    fmt(&shape)
                )
                .at(asp));
            }
            let mut want = Vec::new();
            for (pd, ad) in prm.shape.iter().zip(&shape) {
                match pd.as_sym() {
                    Some(s) if !map.contains_key(s) => {
                        map.insert(s.to_string(), ad.clone());
                        want.push(ad.clone());
                    }
                    _ => want.push(dim(pd, &map, asp)?),
                }
            }
            self.require_shape(n, &want, &what, asp)?;
            args[k] = Some(n);
        }
        for (s, d) in &callee.syms {
            if map.contains_key(s) {
                continue;
            }
            match d {
                Some(v) => {
                    map.insert(s.clone(), Dim::int(*v));
                }
                None => {
                    return Err(diag!(
                        UnboundSymbol,
                        "symbol `{s}` of `{name}` is not fixed by the arguments and has no default"
                    )
                    .at(st.span))
                }
            }
        }
        for (k, (o, prm)) in st.args.iter().zip(&callee.params).enumerate() {
            if let Operand::Lit(l) = o {
                let shape: Vec<Dim> = prm.shape.iter().map(|d| dim(d, &map, st.span)).collect::<DResult<_>>()?;
                let c = self.meet(l, prm.dtype)?;
                args[k] = Some(crate::frontend::ops::broadcast_to(&mut self.g, c, &shape)?);
            }
        }
        let args: Vec<NodeId> = args
            .into_iter()
            .collect::<Option<_>>()
            .ok_or_else(|| diag!(Internal, "call of `{name}` misses an argument"))?;
        let outs = self.inline(gi, args, &map, depth + 1)?;
        self.g.cur_span = Some(st.span);
        Ok(outs)
    }
}

/// `d` with the callee's symbols replaced by their values.
fn dim(d: &Dim, subst: &Subst, sp: Span) -> DResult<Dim> {
    if subst.is_empty() {
        return Ok(d.clone());
    }
    d.substitute(subst).map_err(|m| diag!(AxisSizeMismatch, "{m}").at(sp))
}

fn subst_list(v: &[Dim], subst: &Subst, sp: Span) -> DResult<Vec<Dim>> {
    v.iter().map(|x| dim(x, subst, sp)).collect()
}

fn subst_pairs(v: &[(Dim, Dim)], subst: &Subst, sp: Span) -> DResult<Vec<(Dim, Dim)>> {
    v.iter().map(|(a, b)| Ok((dim(a, subst, sp)?, dim(b, subst, sp)?))).collect()
}

fn subst_window(w: &Window, subst: &Subst, sp: Span) -> DResult<Window> {
    Ok(Window {
        stride: subst_list(&w.stride, subst, sp)?,
        pad: subst_pairs(&w.pad, subst, sp)?,
        dilation: subst_list(&w.dilation, subst, sp)?,
    })
}

fn subst_movement(m: &Movement, subst: &Subst, sp: Span) -> DResult<Movement> {
    if subst.is_empty() {
        return Ok(m.clone());
    }
    let d = |x: &Dim| dim(x, subst, sp);
    Ok(match m {
        Movement::Reshape { shape } => Movement::Reshape { shape: subst_list(shape, subst, sp)? },
        Movement::Expand { shape } => Movement::Expand { shape: subst_list(shape, subst, sp)? },
        Movement::Pad { pads, value, mode } => {
            Movement::Pad { pads: subst_pairs(pads, subst, sp)?, value: *value, mode: *mode }
        }
        Movement::Shrink { bounds } => Movement::Shrink { bounds: subst_pairs(bounds, subst, sp)? },
        Movement::Slice { bounds } => Movement::Slice {
            bounds: bounds.iter().map(|(a, b, c)| Ok((d(a)?, d(b)?, d(c)?))).collect::<DResult<_>>()?,
        },
        Movement::Tile { reps } => Movement::Tile { reps: subst_list(reps, subst, sp)? },
        Movement::RepeatInterleave { repeats, axis } => {
            Movement::RepeatInterleave { repeats: d(repeats)?, axis: *axis }
        }
        Movement::Unfold { axis, size, step } => Movement::Unfold { axis: *axis, size: d(size)?, step: d(step)? },
        Movement::Permute { .. }
        | Movement::Transpose { .. }
        | Movement::Unsqueeze { .. }
        | Movement::Squeeze { .. }
        | Movement::Flip { .. } => m.clone(),
    })
}

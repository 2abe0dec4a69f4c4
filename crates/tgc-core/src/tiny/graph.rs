//! The Tiny IR graph: an arena of nodes in topological order, and the builder
//! that checks every node as it is added.

use std::collections::{BTreeMap, HashMap};

use crate::affine::AffExpr;
use crate::diag;
use crate::diag::{DResult, Span};
use crate::sym::Dim;
use crate::DType;

use super::infer::{infer, Constraint, TensorType};
use super::op::{BinaryOp, Op, ReduceOp, UnaryOp};

/// Nodes of one graph, inlined subgraphs and op decompositions included
/// (2^18 = 262,144). Every pass is linear or close to it in the node count
/// (`scripts/bench_compile.sh`); the bound keeps a hostile graph from
/// holding the compiler for minutes. [`Graph::push`] refuses the node past
/// it with `ResourceExceeded` at that node's statement.
pub const MAX_NODES: usize = 1 << 18;

/// Axes of one tensor. Generated code indexes with one loop per axis and
/// the Poly-View gives each axis an isl dimension; no model needs more
/// (ONNX models use at most 6). [`Graph::push`] refuses a node of a larger
/// rank with `ResourceExceeded` at its statement.
pub const MAX_RANK: usize = 16;

/// Symbolic dimensions of one graph: each is an isl parameter of every
/// Poly-View set and an entry of `dims` in generated code. The DSL parser,
/// the JSON `symbols` list and [`Graph::declare_input_symbols`] refuse the
/// symbol past it with `ResourceExceeded`.
pub const MAX_SYMBOLS: usize = 64;

/// Index of a node in its [`Graph`]; sources always have smaller ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

impl NodeId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// One node: an op, its sources, and its result type.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub op: Op,
    pub src: Vec<NodeId>,
    pub ty: TensorType,
    /// The node's name in JSON (`"id"`) and dumps; unique in the graph.
    pub label: String,
    /// Where the node came from in the source text, if anywhere.
    pub span: Option<Span>,
}

/// A declared symbolic dimension.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    pub name: String,
    pub default: Option<i64>,
    /// Declared `padded`: a call whose value of this symbol is smaller
    /// than a ShapeSet point's may run that point's body, its inputs
    /// zero-filled along the symbol's axes and its outputs cut back
    /// ([`crate::emit::api`]'s bucket dispatch). The graph's author
    /// states that zeros there do not change the real rows (a mask, a
    /// padding token), as the DSL page says.
    pub padded: bool,
}

impl std::fmt::Display for Symbol {
    /// As declared: `S`, `S=16`, `S=16 padded`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)?;
        if let Some(d) = self.default {
            write!(f, "={d}")?;
        }
        if self.padded {
            f.write_str(" padded")?;
        }
        Ok(())
    }
}

/// A named graph output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    pub name: String,
    pub node: NodeId,
}

/// A [`Constraint`] and the node that raised it.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeConstraint {
    pub node: NodeId,
    pub constraint: Constraint,
}

/// A Tiny IR graph (see the module doc of [`crate::tiny`] for its invariants).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Graph {
    pub name: String,
    /// Symbols in declaration order: the order of `dims` in generated code.
    pub symbols: Vec<Symbol>,
    nodes: Vec<Node>,
    pub outputs: Vec<Output>,
    /// Shape facts to check when symbols are bound.
    pub constraints: Vec<NodeConstraint>,
    /// Span given to nodes added from now on (set by the frontend).
    pub cur_span: Option<Span>,
    /// Label → node, kept in step with the nodes' labels.
    by_label: HashMap<String, NodeId>,
}

impl Graph {
    pub fn new(name: &str) -> Graph {
        Graph { name: name.to_string(), ..Graph::default() }
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }

    pub fn ids(&self) -> impl Iterator<Item = NodeId> {
        (0..self.nodes.len() as u32).map(NodeId)
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    pub fn ty(&self, id: NodeId) -> &TensorType {
        &self.nodes[id.index()].ty
    }

    pub fn shape(&self, id: NodeId) -> &[Dim] {
        &self.nodes[id.index()].ty.shape
    }

    pub fn dtype(&self, id: NodeId) -> DType {
        self.nodes[id.index()].ty.dtype
    }

    /// `INPUT` nodes in arena order: the order of inputs in generated code.
    pub fn inputs(&self) -> Vec<NodeId> {
        self.ids().filter(|&i| matches!(self.node(i).op, Op::Input { .. })).collect()
    }

    /// The name an `INPUT` node was declared with (its label for another node).
    fn input_name(&self, id: NodeId) -> &str {
        match &self.node(id).op {
            Op::Input { name } => name,
            _ => &self.node(id).label,
        }
    }

    /// The node ids that read each node.
    pub fn consumers(&self) -> Vec<Vec<NodeId>> {
        let mut out = vec![Vec::new(); self.nodes.len()];
        for id in self.ids() {
            for &s in &self.node(id).src {
                // Ids are visited in order, so a repeat is the list's last.
                if out[s.index()].last() != Some(&id) {
                    out[s.index()].push(id);
                }
            }
        }
        out
    }

    /// Finds a node by label.
    pub fn find(&self, label: &str) -> Option<NodeId> {
        self.by_label.get(label).copied()
    }

    /// Renames a node; the label must not be in use.
    pub fn set_label(&mut self, id: NodeId, label: &str) -> DResult<()> {
        if let Some(other) = self.find(label) {
            if other != id {
                return Err(diag!(SyntaxError, "node id `{label}` is used twice"));
            }
        }
        let old = std::mem::replace(&mut self.nodes[id.index()].label, label.to_string());
        self.by_label.remove(&old);
        self.by_label.insert(label.to_string(), id);
        Ok(())
    }

    /// Adds a node after checking it with the rules of [`infer`]; errors carry
    /// the new node's label and the current span.
    ///
    /// Errors: those of [`infer`]; `ResourceExceeded` past [`MAX_NODES`]
    /// nodes or [`MAX_RANK`] axes.
    pub fn push(&mut self, op: Op, src: Vec<NodeId>, dtype: Option<DType>, shape: Option<&[Dim]>) -> DResult<NodeId> {
        let label = format!("n{}", self.nodes.len());
        if self.nodes.len() >= MAX_NODES {
            return Err(diag!(
                ResourceExceeded,
                "the graph needs more than {MAX_NODES} Tiny IR nodes (tiny::graph::MAX_NODES): split it into graphs \
                 run one after another"
            )
            .or_at(self.cur_span)
            .on_node(label));
        }
        for s in &src {
            if s.index() >= self.nodes.len() {
                return Err(diag!(Internal, "source {} of a new node does not exist", s.0).on_node(label));
            }
        }
        let tys: Vec<&TensorType> = src.iter().map(|s| &self.nodes[s.index()].ty).collect();
        let (ty, cons) = infer(&op, &tys, dtype, shape).map_err(|e| e.or_at(self.cur_span).on_node(label.clone()))?;
        if ty.shape.len() > MAX_RANK {
            return Err(diag!(
                ResourceExceeded,
                "a {} of rank {} has more than {MAX_RANK} axes (tiny::graph::MAX_RANK)",
                op.name(),
                ty.shape.len()
            )
            .or_at(self.cur_span)
            .on_node(label));
        }
        let op = one_element_shrinks_step_by_one(op, &ty.shape);
        let id = NodeId(self.nodes.len() as u32);
        let mut label = label;
        while self.find(&label).is_some() {
            label.push('_');
        }
        self.by_label.insert(label.clone(), id);
        self.constraints.extend(cons.into_iter().map(|constraint| NodeConstraint { node: id, constraint }));
        self.nodes.push(Node { op, src, ty, label, span: self.cur_span });
        Ok(id)
    }

    // --- typed constructors, one per op -------------------------------------

    pub fn input(&mut self, name: &str, dtype: DType, shape: &[Dim]) -> DResult<NodeId> {
        self.push(Op::Input { name: name.to_string() }, vec![], Some(dtype), Some(shape))
    }

    pub fn constant(&mut self, value: f64, dtype: DType) -> DResult<NodeId> {
        self.push(Op::Const { value }, vec![], Some(dtype), None)
    }

    pub fn unary(&mut self, op: UnaryOp, x: NodeId) -> DResult<NodeId> {
        self.push(Op::Unary(op), vec![x], None, None)
    }

    pub fn cast(&mut self, x: NodeId, to: DType) -> DResult<NodeId> {
        self.push(Op::Cast, vec![x], Some(to), None)
    }

    pub fn binary(&mut self, op: BinaryOp, a: NodeId, b: NodeId) -> DResult<NodeId> {
        self.push(Op::Binary(op), vec![a, b], None, None)
    }

    pub fn where_(&mut self, cond: NodeId, a: NodeId, b: NodeId) -> DResult<NodeId> {
        self.push(Op::Where, vec![cond, a, b], None, None)
    }

    /// `REDUCE` of `axes` (removed) accumulating in `acc`.
    pub fn reduce(&mut self, op: ReduceOp, x: NodeId, axes: &[usize], acc: DType) -> DResult<NodeId> {
        self.push(Op::Reduce { op, axes: axes.to_vec() }, vec![x], Some(acc), None)
    }

    pub fn reshape(&mut self, x: NodeId, shape: &[Dim]) -> DResult<NodeId> {
        self.push(Op::Reshape, vec![x], None, Some(shape))
    }

    pub fn permute(&mut self, x: NodeId, perm: &[usize]) -> DResult<NodeId> {
        self.push(Op::Permute { perm: perm.to_vec() }, vec![x], None, None)
    }

    pub fn expand(&mut self, x: NodeId, shape: &[Dim]) -> DResult<NodeId> {
        self.push(Op::Expand, vec![x], None, Some(shape))
    }

    pub fn pad(&mut self, x: NodeId, pads: &[(Dim, Dim)], value: f64) -> DResult<NodeId> {
        self.push(Op::Pad { pads: pads.to_vec(), value }, vec![x], None, None)
    }

    pub fn shrink(&mut self, x: NodeId, lo: &[Dim], hi: &[Dim], step: &[Dim]) -> DResult<NodeId> {
        self.push(Op::Shrink { lo: lo.to_vec(), hi: hi.to_vec(), step: step.to_vec() }, vec![x], None, None)
    }

    pub fn flip(&mut self, x: NodeId, axes: &[usize]) -> DResult<NodeId> {
        self.push(Op::Flip { axes: axes.to_vec() }, vec![x], None, None)
    }

    /// `GATHER` ([`Op::Gather`]) of `x` along `axis` at `index`.
    pub fn gather(&mut self, x: NodeId, index: NodeId, axis: usize) -> DResult<NodeId> {
        self.push(Op::Gather { axis }, vec![x, index], None, None)
    }

    /// `SCAN` ([`Op::Scan`]): the prefix of `op` along `axis`.
    pub fn scan(&mut self, x: NodeId, op: ReduceOp, axis: usize, exclusive: bool, reverse: bool) -> DResult<NodeId> {
        self.push(Op::Scan { op, axis, exclusive, reverse }, vec![x], None, None)
    }

    pub fn view(&mut self, x: NodeId, shape: &[Dim], map: &[AffExpr]) -> DResult<NodeId> {
        self.push(Op::View { map: map.to_vec() }, vec![x], None, Some(shape))
    }

    /// Declares every symbol that is not declared yet, in order of first use:
    /// input shapes first, then every node's shape, then the symbols that
    /// appear only in op arguments (`PAD` widths, `SHRINK` bounds, `VIEW` maps).
    ///
    /// Errors: `ResourceExceeded` at the node that brings the count of
    /// symbols past [`MAX_SYMBOLS`].
    pub fn declare_input_symbols(&mut self) -> DResult<()> {
        let uses =
            self.inputs().into_iter().flat_map(|id| self.shape(id).iter().flat_map(Dim::symbols).map(move |s| (id, s)));
        let shapes =
            self.ids().flat_map(|id| self.node(id).ty.shape.iter().flat_map(Dim::symbols).map(move |s| (id, s)));
        let args = self.ids().flat_map(|id| op_arg_symbols(&self.node(id).op).into_iter().map(move |s| (id, s)));
        let mut names: Vec<String> = self.symbols.iter().map(|s| s.name.clone()).collect();
        let mut seen: std::collections::HashSet<String> = names.iter().cloned().collect();
        for (id, s) in uses.chain(shapes).chain(args) {
            if seen.contains(&s) {
                continue;
            }
            if names.len() == MAX_SYMBOLS {
                let n = self.node(id);
                return Err(diag!(
                    ResourceExceeded,
                    "symbol `{s}` is one more than the {MAX_SYMBOLS} symbols a graph may have \
                     (tiny::graph::MAX_SYMBOLS)"
                )
                .or_at(n.span)
                .on_node(n.label.clone()));
            }
            seen.insert(s.clone());
            names.push(s);
        }
        for n in names.into_iter().skip(self.symbols.len()) {
            self.symbols.push(Symbol { name: n, default: None, padded: false });
        }
        Ok(())
    }

    /// Values for the symbols: `given` first, then inferred from the shapes of
    /// the inputs (`inputs[k]` is the shape of the k-th `INPUT`), then
    /// defaults. Every symbol must end up with a value ≥ 1.
    ///
    /// Errors: `AxisSizeMismatch` when an input's rank or a size disagrees
    /// with the graph, `UnboundSymbol` when a symbol has no value.
    pub fn resolve_dims(
        &self,
        given: &BTreeMap<String, i64>,
        inputs: Option<&[Vec<usize>]>,
    ) -> DResult<BTreeMap<String, i64>> {
        let mut out: BTreeMap<String, i64> = BTreeMap::new();
        for (k, v) in given {
            if !self.symbols.iter().any(|s| &s.name == k) {
                let names: Vec<&str> = self.symbols.iter().map(|s| s.name.as_str()).collect();
                return Err(diag!(
                    UnknownName,
                    "graph `{}` has no symbol `{k}` (symbols: {})",
                    self.name,
                    names.join(", ")
                ));
            }
            if *v < 1 {
                return Err(diag!(AxisSizeMismatch, "symbol `{k}` = {v}: sizes must be at least 1"));
            }
            out.insert(k.clone(), *v);
        }
        if let Some(shapes) = inputs {
            let ins = self.inputs();
            for (id, got) in ins.iter().zip(shapes) {
                let want = self.shape(*id);
                let name = self.input_name(*id);
                if want.len() != got.len() {
                    return Err(diag!(
                        AxisSizeMismatch,
                        "input `{name}` has rank {} but the graph declares {}",
                        got.len(),
                        super::infer::fmt_shape(want)
                    )
                    .at_node(self.node(*id)));
                }
                for (d, &g) in want.iter().zip(got) {
                    if let Some(s) = d.as_sym() {
                        match out.get(s) {
                            Some(&v) if v != g as i64 => {
                                return Err(diag!(
                                    AxisSizeMismatch,
                                    "input `{name}` has size {g} where symbol `{s}` = {v}"
                                )
                                .at_node(self.node(*id)));
                            }
                            _ => {
                                out.insert(s.to_string(), g as i64);
                            }
                        }
                    }
                }
            }
        }
        for s in &self.symbols {
            if !out.contains_key(&s.name) {
                match s.default {
                    Some(v) => {
                        out.insert(s.name.clone(), v);
                    }
                    None => {
                        let e =
                            diag!(UnboundSymbol, "symbol `{}` has no value: give it with --dim {}=N", s.name, s.name);
                        // Point at the first node whose shape needs the symbol.
                        let user = self.nodes.iter().find(|n| n.ty.shape.iter().any(|d| d.symbols().contains(&s.name)));
                        return Err(match user {
                            Some(n) => e.at_node(n),
                            None => e,
                        });
                    }
                }
            }
        }
        if let Some(shapes) = inputs {
            for (id, got) in self.inputs().iter().zip(shapes) {
                let want = self.shape(*id);
                for (k, (d, &g)) in want.iter().zip(got).enumerate() {
                    let v = d.eval(&|s| out.get(s).copied()).map_err(|m| diag!(UnboundSymbol, "{m}"))?;
                    if v != g as i64 {
                        // The value of a symbolic size too: `(N + 1 = 5)`.
                        let value = if d.as_int().is_some() { String::new() } else { format!(" ({d} = {v})") };
                        return Err(diag!(
                            AxisSizeMismatch,
                            "input `{}` has size {g} on axis {k} where the graph declares {}{value}",
                            self.input_name(*id),
                            super::infer::fmt_shape(want)
                        )
                        .at_node(self.node(*id)));
                    }
                }
            }
        }
        Ok(out)
    }

    /// Substitutes values for symbols and re-checks every node, returning the
    /// specialised graph (bound symbols are removed from `symbols`).
    ///
    /// Errors: the node's own error when a bound size breaks a rule (a
    /// violated [`Constraint`] of a `RESHAPE` is `AxisSizeMismatch`).
    pub fn bind(&self, values: &BTreeMap<String, i64>) -> DResult<Graph> {
        let map: BTreeMap<String, Dim> = values.iter().map(|(k, v)| (k.clone(), Dim::int(*v))).collect();
        let sub = |d: &Dim| d.substitute(&map);
        let mut g = Graph::new(&self.name);
        g.symbols = self.symbols.iter().filter(|s| !values.contains_key(&s.name)).cloned().collect();
        for id in self.ids() {
            let n = self.node(id);
            let err = |m: String| diag!(AxisSizeMismatch, "{m}").at_node(n);
            let shape: Vec<Dim> = n.ty.shape.iter().map(sub).collect::<Result<_, _>>().map_err(err)?;
            let op = match &n.op {
                Op::Pad { pads, value } => Op::Pad {
                    pads: pads
                        .iter()
                        .map(|(a, b)| Ok((sub(a)?, sub(b)?)))
                        .collect::<Result<_, String>>()
                        .map_err(err)?,
                    value: *value,
                },
                Op::Shrink { lo, hi, step } => Op::Shrink {
                    lo: lo.iter().map(sub).collect::<Result<_, _>>().map_err(err)?,
                    hi: hi.iter().map(sub).collect::<Result<_, _>>().map_err(err)?,
                    step: step.iter().map(sub).collect::<Result<_, _>>().map_err(err)?,
                },
                Op::View { map: m } => {
                    Op::View { map: m.iter().map(|e| e.map_dims(&sub)).collect::<Result<_, _>>().map_err(err)? }
                }
                other => other.clone(),
            };
            g.cur_span = n.span;
            let src = n.src.clone();
            let dtype = Some(n.ty.dtype);
            let needs_shape = matches!(op, Op::Input { .. } | Op::Reshape | Op::Expand | Op::View { .. });
            let nid = g.push(op, src, dtype, needs_shape.then_some(shape.as_slice())).map_err(|e| {
                let mut e = e;
                e.node = Some(n.label.clone());
                e
            })?;
            g.set_label(nid, &n.label)?;
        }
        g.cur_span = None;
        g.outputs = self.outputs.clone();
        // Rebuilding through `push` re-derived the constraints: decided ones
        // were checked there, the rest are still open.
        Ok(g)
    }
}

/// Symbols mentioned by an op's own arguments (not its result shape).
fn op_arg_symbols(op: &Op) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    match op {
        Op::Pad { pads, .. } => pads.iter().for_each(|(a, b)| out.extend(a.symbols().into_iter().chain(b.symbols()))),
        Op::Shrink { lo, hi, step } => lo.iter().chain(hi).chain(step).for_each(|d| out.extend(d.symbols())),
        Op::View { map } => map.iter().for_each(|e| out.extend(e.symbols())),
        _ => {}
    }
    out
}

/// `op` with every `SHRINK` axis of one element written `[lo, lo + 1)`
/// step 1: the same element, whatever the step was, so that no backend
/// multiplies an index by a step it never takes (`slice(x, [[0, 10,
/// 2^63 − 1]])` would overflow the first index past the end).
fn one_element_shrinks_step_by_one(op: Op, shape: &[Dim]) -> Op {
    let Op::Shrink { lo, mut hi, mut step } = op else { return op };
    for k in 0..shape.len() {
        if shape[k].is_one() && !step[k].is_one() {
            hi[k] = &lo[k] + &Dim::int(1);
            step[k] = Dim::int(1);
        }
    }
    Op::Shrink { lo, hi, step }
}

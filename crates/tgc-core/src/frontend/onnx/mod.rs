//! The ONNX frontend: an exported model (`.onnx`, ONNX `IR.md`) as the same
//! Frontend IR the graph language produces ([`crate::frontend::ir`]), so
//! nothing downstream knows where a graph came from.
//!
//! Phases, in order ([`import`]):
//! 1. decode the `ModelProto` ([`proto::decode_model`]) and check the
//!    opsets: the default domain (`""`, `ai.onnx`) from opset
//!    [`MIN_OPSET`] to [`MAX_OPSET`]; a node of another domain is refused;
//! 2. keep only the nodes the graph outputs depend on (dead nodes are
//!    dropped before anything is converted);
//! 3. declare the run-time inputs: each graph input without an
//!    initializer, its `dim_param` dims as graph symbols (a dim with neither
//!    value nor name gets the symbol `<input>_d<axis>`);
//! 4. convert the nodes in order ([`ops`]): a node whose inputs are all
//!    known at import time ([`known`]: initializers read as constants,
//!    `Constant`, shapes) is evaluated there, symbolically where a dim is a
//!    symbol — so PyTorch's `Shape → Gather → Unsqueeze → Concat →
//!    Reshape` chains, `ConstantOfShape`, `Range` and `Expand` with computed
//!    shapes reach no kernel; every other node becomes Frontend IR
//!    statements, lowered one at a time
//!    ([`crate::frontend::to_tiny::Incremental`]) so each value's shape and
//!    dtype come from the one set of shape rules;
//! 5. initializers read as run-time tensors become graph parameters after
//!    the inputs, with their values in [`Imported::weights`].
//!
//! Invariants of an [`Imported`]:
//! - its program has one graph; parameters are the run-time inputs in the
//!   model's order, then the weights in order of first use;
//! - every name is a graph-language identifier (ONNX names are made so:
//!   characters other than letters, digits and `_` become `_`, a leading
//!   digit gets `v_`, repeats get `_2`, `_3`); [`Imported::onnx_names`]
//!   maps them back;
//! - statement `k` of the body carries the span of line `n + 1` for the
//!   model's node `n` that made it, so [`Imported::locate`] can name the node.
//!
//! Errors name the node (`#index `name` (OpType, opset N)`) or the tensor:
//! an operator or attribute the importer does not take is `Unsupported`,
//! never a silent approximation.

mod fold;
pub mod known;
pub mod ops;
pub mod proto;

#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::rc::Rc;

use onnx_protobuf::{GraphProto, ModelProto, NodeProto, TensorProto};
use tgc_runtime::HostTensor;

use crate::diag;
use crate::diag::{DResult, Diagnostic, Span};
use crate::frontend::ir::*;
use crate::frontend::to_tiny::Incremental;
use crate::sym::Dim;
use crate::DType;

use known::{KData, Known};

/// The oldest default-domain opset the importer takes (ONNX 1.1's; the
/// `pytorch-converted` test suite is of opset 6). Opset 7 made binary ops
/// broadcast like NumPy; before it they broadcast only under the
/// `broadcast`/`axis` attributes, which the importer refuses, so an opset-6
/// binary op it takes has operands of one shape and means the same.
pub const MIN_OPSET: i64 = 6;
/// The newest default-domain opset the importer knows (that of the `onnx`
/// 1.23 wheel, whose operator tests `tests/onnx_node.rs` runs).
pub const MAX_OPSET: i64 = 28;

/// An imported model (see the module doc for its invariants).
#[derive(Clone, Debug)]
pub struct Imported {
    pub program: FProgram,
    /// The values of the weight parameters, by parameter name.
    pub weights: Vec<(String, HostTensor)>,
    /// `(tgc name, ONNX name)` of each input, weight and output whose ONNX
    /// name is not an identifier.
    pub onnx_names: Vec<(String, String)>,
    /// The model's default-domain opset.
    pub opset: i64,
    /// The description of each converted node, by its index in the model.
    nodes: Vec<String>,
}

impl Imported {
    /// Names the node a diagnostic's span points at (the span's line is the
    /// node index + 1, the module doc's invariant) and drops the span.
    pub fn locate(&self, mut d: Diagnostic) -> Diagnostic {
        if let Some(sp) = d.span.take() {
            if let Some(n) = (sp.line as usize).checked_sub(1).and_then(|k| self.nodes.get(k)) {
                if d.node.is_none() {
                    d.node = Some(n.clone());
                }
            }
        }
        d
    }

    /// The description of each converted node, by its index in the model
    /// (what [`Imported::locate`] names).
    pub fn node_descriptions(&self) -> &[String] {
        &self.nodes
    }

    /// The tgc name of an input, weight or output given by its ONNX name
    /// (or by its tgc name).
    pub fn tgc_name<'a>(&'a self, name: &'a str) -> &'a str {
        self.onnx_names.iter().find(|(_, o)| o == name).map_or(name, |(t, _)| t.as_str())
    }
}

/// Reads and imports the model at `path`; external data is read from its
/// folder. `fixed` gives values to graph inputs at import time (by name):
/// such an input is imported as if it were an initializer, so an input
/// that feeds a shape (`Reshape`'s, a reduction's axes) is folded.
///
/// Errors: `Io` when the file cannot be read or is not a regular file,
/// `ResourceExceeded` past [`proto::MAX_MODEL_BYTES`], and [`import`]'s.
pub fn read_model(path: &Path, fixed: &[TensorProto]) -> DResult<Imported> {
    use std::io::Read;
    let io = |e: std::io::Error| diag!(Io, "cannot read {}: {e}", path.display());
    let file = std::fs::File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(diag!(Io, "{} is not a regular file", path.display()));
    }
    if meta.len() > proto::MAX_MODEL_BYTES {
        return Err(diag!(
            ResourceExceeded,
            "{} has {} bytes, more than a protobuf message may (2 GiB); keep the weights as external data",
            path.display(),
            meta.len()
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(proto::MAX_MODEL_BYTES).read_to_end(&mut bytes).map_err(io)?;
    let dir = path.parent().map(|p| if p.as_os_str().is_empty() { Path::new(".") } else { p });
    import(&bytes, dir, fixed)
}

/// Imports a model from its bytes; `dir` is the folder external data is
/// read from (`None`: a model with external data is refused); `fixed` as
/// for [`read_model`].
///
/// Errors: `SyntaxError` for bytes that are not a model, `Unsupported` for
/// an opset, domain, operator, attribute or element type the importer does
/// not take, `UnknownName` for a node input no earlier node or input
/// defines (which is also how a cycle shows), and the shape and dtype
/// errors of the Frontend IR's lowering, each naming the node.
pub fn import(bytes: &[u8], dir: Option<&Path>, fixed: &[TensorProto]) -> DResult<Imported> {
    let model = proto::decode_model(bytes)?;
    let opset = default_opset(&model)?;
    let graph = model.graph.as_ref().ok_or_else(|| diag!(SyntaxError, "the model has no graph"))?;
    let mut b = Builder::new(graph, dir, opset);
    for t in fixed {
        if !graph.input.iter().any(|i| i.name == t.name) {
            return Err(diag!(UnknownName, "the model has no input `{}` to fix", t.name));
        }
        b.inits.insert(&t.name, t);
    }
    b.declare_inputs(graph)?;
    let live = live_nodes(graph);
    for (k, node) in graph.node.iter().enumerate() {
        b.nodes.push(describe(k, node, opset));
        if !live[k] {
            continue;
        }
        b.span = Span { line: k as u32 + 1, col: 1, ..Span::default() };
        b.convert(node).map_err(|mut d| {
            d.span = None;
            let at = b.nodes[k].clone();
            d.on_node(at)
        })?;
    }
    b.finish(graph)
}

/// `#k `name` (Op, opset N)`.
fn describe(k: usize, node: &NodeProto, opset: i64) -> String {
    let name = if node.name.is_empty() { String::new() } else { format!(" `{}`", node.name) };
    format!("#{k}{name} ({}, opset {opset})", node.op_type)
}

/// The model's default-domain opset.
fn default_opset(model: &ModelProto) -> DResult<i64> {
    if model.ir_version < 3 {
        return Err(diag!(
            Unsupported,
            "ONNX IR version {} is older than 3, the oldest the importer takes",
            model.ir_version
        ));
    }
    let opset = model
        .opset_import
        .iter()
        .find(|o| o.domain.is_empty() || o.domain == "ai.onnx")
        .map(|o| o.version)
        .ok_or_else(|| diag!(Unsupported, "the model imports no opset of the default ONNX domain"))?;
    if !(MIN_OPSET..=MAX_OPSET).contains(&opset) {
        return Err(diag!(
            Unsupported,
            "the model uses opset {opset} of the default domain; the importer takes opsets {MIN_OPSET} to {MAX_OPSET}"
        ));
    }
    Ok(opset)
}

/// Which nodes the graph outputs depend on.
fn live_nodes(graph: &GraphProto) -> Vec<bool> {
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (k, n) in graph.node.iter().enumerate() {
        for o in &n.output {
            producer.entry(o.as_str()).or_insert(k);
        }
    }
    let mut live = vec![false; graph.node.len()];
    let mut stack: Vec<&str> = graph.output.iter().map(|o| o.name.as_str()).collect();
    while let Some(name) = stack.pop() {
        if let Some(&k) = producer.get(name) {
            if !live[k] {
                live[k] = true;
                stack.extend(graph.node[k].input.iter().map(String::as_str).filter(|s| !s.is_empty()));
                subgraph_inputs(&graph.node[k], &mut stack);
            }
        }
    }
    live
}

/// The inputs of the nodes of `node`'s graph attributes (`Scan`'s body),
/// at every depth: a body may read any value of the enclosing graph.
fn subgraph_inputs<'g>(node: &'g NodeProto, out: &mut Vec<&'g str>) {
    for g in node.attribute.iter().filter_map(|a| a.g.as_ref()) {
        for n in &g.node {
            out.extend(n.input.iter().map(String::as_str).filter(|s| !s.is_empty()));
            subgraph_inputs(n, out);
        }
    }
}

/// A value of the model during import.
#[derive(Clone, Debug)]
enum Val {
    /// A tensor computed at run time.
    Run(ValueId),
    /// A tensor known at import time.
    Known(Rc<Known>),
}

/// The graph under construction.
struct Builder<'m> {
    dir: Option<&'m Path>,
    opset: i64,
    inc: Incremental,
    values: Vec<FValue>,
    body: Vec<FStmt>,
    /// Inputs, then weights, as they are declared.
    params: Vec<(ValueId, FTensor)>,
    weights: Vec<(String, HostTensor)>,
    env: HashMap<String, Val>,
    inits: HashMap<&'m str, &'m TensorProto>,
    /// Initializers read as run-time tensors, and known ones materialised.
    run_of: HashMap<String, ValueId>,
    syms: Vec<String>,
    taken: HashSet<String>,
    /// The identifier each ONNX value name was given.
    named: HashMap<String, String>,
    onnx_names: Vec<(String, String)>,
    nodes: Vec<String>,
    span: Span,
}

impl<'m> Builder<'m> {
    fn new(graph: &'m GraphProto, dir: Option<&'m Path>, opset: i64) -> Builder<'m> {
        let name = ident(if graph.name.is_empty() { "main" } else { &graph.name });
        Builder {
            dir,
            opset,
            inc: Incremental::new(&name),
            values: Vec::new(),
            body: Vec::new(),
            params: Vec::new(),
            weights: Vec::new(),
            env: HashMap::new(),
            inits: graph.initializer.iter().map(|t| (t.name.as_str(), t)).collect(),
            run_of: HashMap::new(),
            syms: Vec::new(),
            taken: HashSet::from([name]),
            named: HashMap::new(),
            onnx_names: Vec::new(),
            nodes: Vec::new(),
            span: Span::default(),
        }
    }

    /// A fresh identifier for ONNX name `name`, recorded in `onnx_names`
    /// when it differs.
    fn fresh(&mut self, name: &str) -> String {
        let id = self.unique(name);
        if id != name {
            self.onnx_names.push((id.clone(), name.to_string()));
        }
        id
    }

    fn declare_inputs(&mut self, graph: &GraphProto) -> DResult<()> {
        for input in &graph.input {
            if self.inits.contains_key(input.name.as_str()) {
                continue;
            }
            let what = format!("input `{}`", input.name);
            let tensor = match input.type_.as_ref().and_then(|t| t.value.as_ref()) {
                Some(onnx_protobuf::type_proto::Value::TensorType(t)) => t,
                _ => {
                    return Err(diag!(
                        Unsupported,
                        "{what} is not a tensor (sequences, maps and optionals are not taken)"
                    ))
                }
            };
            let dtype = proto::runtime_dtype(tensor.elem_type).ok_or_else(|| {
                diag!(
                    Unsupported,
                    "{what} is of type {}, which tgc does not compute in",
                    proto::type_name(tensor.elem_type)
                )
            })?;
            let dims = tensor
                .shape
                .as_ref()
                .ok_or_else(|| diag!(Unsupported, "{what} has no shape (its rank must be known)"))?;
            let name = self.fresh(&input.name);
            let mut shape = Vec::new();
            for (k, d) in dims.dim.iter().enumerate() {
                use onnx_protobuf::tensor_shape_proto::dimension::Value as V;
                shape.push(match &d.value {
                    Some(V::DimValue(v)) if *v >= 0 => Dim::int(*v),
                    Some(V::DimValue(v)) => {
                        return Err(diag!(AxisSizeMismatch, "{what} has dimension {v} at axis {k}"))
                    }
                    Some(V::DimParam(p)) if !p.is_empty() => self.symbol(p),
                    _ => self.symbol(&format!("{}_d{k}", input.name)),
                });
            }
            let prm = FTensor { name: name.clone(), dtype, shape, span: Span::default() };
            let v = self.new_value(Some(name));
            self.inc.param(v, &prm)?;
            self.params.push((v, prm));
            self.env.insert(input.name.clone(), Val::Run(v));
        }
        Ok(())
    }

    /// The graph symbol of ONNX dim name `p`.
    fn symbol(&mut self, p: &str) -> Dim {
        let name = ident(p);
        if !self.syms.contains(&name) {
            self.syms.push(name.clone());
            self.inc.symbol(&name);
        }
        Dim::sym(&name)
    }

    fn new_value(&mut self, name: Option<String>) -> ValueId {
        self.values.push(FValue { name, span: self.span });
        ValueId(self.values.len() as u32 - 1)
    }

    /// Emits `op(args)` with one result.
    fn emit(&mut self, op: FOp, args: Vec<Operand>) -> DResult<ValueId> {
        Ok(self.emit_n(op, args, 1)?[0])
    }

    /// Emits `op(args)` with `n` results.
    fn emit_n(&mut self, op: FOp, args: Vec<Operand>, n: usize) -> DResult<Vec<ValueId>> {
        let results: Vec<ValueId> = (0..n).map(|_| self.new_value(None)).collect();
        let st = FStmt { results: results.clone(), op, arg_spans: vec![self.span; args.len()], args, span: self.span };
        self.inc.stmt(&st)?;
        self.body.push(st);
        Ok(results)
    }

    fn shape(&self, v: ValueId) -> DResult<Vec<Dim>> {
        Ok(self.inc.shape(v)?.to_vec())
    }

    fn dtype(&self, v: ValueId) -> DResult<DType> {
        self.inc.dtype(v)
    }

    fn lit(&self, value: f64, kind: LitKind) -> Operand {
        Operand::Lit(Literal { value, kind, span: self.span })
    }

    /// A literal of the kind that meets `dtype`.
    fn lit_for(&self, value: f64, dtype: DType) -> Operand {
        let kind = match dtype {
            DType::Bool => LitKind::Bool,
            DType::I32 => LitKind::Int,
            _ => LitKind::Float,
        };
        self.lit(value, kind)
    }

    /// The value named `name`, if any node, input or initializer defines it.
    fn lookup(&mut self, name: &str) -> DResult<Val> {
        if let Some(v) = self.env.get(name) {
            return Ok(v.clone());
        }
        if let Some(t) = self.inits.get(name).copied() {
            let (_, n) = proto::tensor_shape(t)?;
            if n <= known::MAX_KNOWN_ELEMENTS {
                let k = Rc::new(Known::from_values(proto::read_values(t, self.dir)?));
                self.env.insert(name.to_string(), Val::Known(k.clone()));
                return Ok(Val::Known(k));
            }
            return Ok(Val::Run(self.weight_param(t)?));
        }
        Err(diag!(
            UnknownName,
            "`{name}` is not defined by an earlier node, an input or an initializer (are the nodes out of order, or in a cycle?)"
        ))
    }

    /// The value of `name` as a run-time tensor.
    fn run(&mut self, name: &str) -> DResult<ValueId> {
        if let Some(&v) = self.run_of.get(name) {
            return Ok(v);
        }
        match self.lookup(name)? {
            Val::Run(v) => Ok(v),
            Val::Known(k) => {
                let v = match self.inits.get(name).copied() {
                    Some(t) => self.weight_param(t)?,
                    None => self.materialize(&k, name)?,
                };
                self.run_of.insert(name.to_string(), v);
                Ok(v)
            }
        }
    }

    /// The value of `name` if it is known at import time.
    fn known(&mut self, name: &str) -> DResult<Option<Rc<Known>>> {
        Ok(match self.lookup(name)? {
            Val::Known(k) => Some(k),
            Val::Run(_) => None,
        })
    }

    /// Initializer `t` as a weight parameter.
    fn weight_param(&mut self, t: &TensorProto) -> DResult<ValueId> {
        if let Some(&v) = self.run_of.get(&t.name) {
            return Ok(v);
        }
        let host = host_tensor(t, self.dir)?;
        let v = self.declare_weight(&t.name.clone(), host)?;
        self.run_of.insert(t.name.clone(), v);
        Ok(v)
    }

    /// Declares a weight parameter named after `onnx`, holding `host`.
    fn declare_weight(&mut self, onnx: &str, host: HostTensor) -> DResult<ValueId> {
        let name = self.fresh(onnx);
        let shape = host.shape().iter().map(|&d| Dim::int(d as i64)).collect();
        let prm = FTensor { name: name.clone(), dtype: host.dtype(), shape, span: self.span };
        let v = self.new_value(Some(name.clone()));
        self.inc.param(v, &prm)?;
        self.params.push((v, prm));
        self.weights.push((name, host));
        Ok(v)
    }

    /// A known tensor as a run-time one: a literal broadcast to its shape
    /// when every element is the same, else a weight.
    ///
    /// Errors: `Unsupported` for a type tgc does not compute in;
    /// `UnboundSymbol` for elements that depend on a symbol.
    fn materialize(&mut self, k: &Known, name: &str) -> DResult<ValueId> {
        let dtype = proto::runtime_dtype(k.code).ok_or_else(|| {
            diag!(
                Unsupported,
                "`{name}` of type {} is used as a tensor, and tgc does not compute in that type",
                proto::type_name(k.code)
            )
        })?;
        let values = k.float_values(&format!("`{name}`, used as a tensor,"))?;
        if let Some(&first) = values.first().filter(|&&f| values.iter().all(|&v| v.to_bits() == f.to_bits())) {
            if dtype == DType::I32 {
                proto::narrow(first as i64, &format!("`{name}`"))?;
            }
            return self.splat(first, dtype, &k.shape.iter().map(|&d| Dim::int(d as i64)).collect::<Vec<_>>());
        }
        if dtype == DType::I32 {
            for &v in &values {
                proto::narrow(v as i64, &format!("`{name}`"))?;
            }
        }
        let host = HostTensor::from_f64(dtype, &k.shape, &values).map_err(|e| diag!(Internal, "{e}"))?;
        self.declare_weight(name, host)
    }

    /// `value` of `dtype` broadcast to `shape`.
    fn splat(&mut self, value: f64, dtype: DType, shape: &[Dim]) -> DResult<ValueId> {
        let lit = self.lit_for(value, dtype);
        let ones = vec![Dim::int(1); shape.len()];
        let mut v = self.emit(FOp::Movement(Movement::Reshape { shape: ones.clone() }), vec![lit])?;
        if shape != ones.as_slice() {
            v = self.emit(FOp::Movement(Movement::Expand { shape: shape.to_vec() }), vec![Operand::Value(v)])?;
        }
        if self.dtype(v)? != dtype {
            v = self.emit(FOp::Cast { to: dtype }, vec![Operand::Value(v)])?;
        }
        Ok(v)
    }

    /// Converts one node and binds its outputs.
    fn convert(&mut self, node: &NodeProto) -> DResult<()> {
        if !(node.domain.is_empty() || node.domain == "ai.onnx") {
            return Err(diag!(
                Unsupported,
                "operator domain `{}` is not taken (only the default ONNX domain)",
                node.domain
            ));
        }
        let outs = ops::convert(self, node)?;
        for (name, v) in node.output.iter().zip(outs) {
            if name.is_empty() {
                continue;
            }
            if let Val::Run(id) = &v {
                if self.values[id.0 as usize].name.is_none() {
                    let fresh = self.unique(name);
                    self.named.insert(name.clone(), fresh.clone());
                    self.values[id.0 as usize].name = Some(fresh);
                }
            }
            self.env.insert(name.clone(), v);
        }
        Ok(())
    }

    /// A fresh identifier for ONNX name `name` (the module doc's rule).
    fn unique(&mut self, name: &str) -> String {
        let base = ident(name);
        let mut id = base.clone();
        let mut k = 2;
        while !self.taken.insert(id.clone()) {
            id = format!("{base}_{k}");
            k += 1;
        }
        id
    }

    /// The graph outputs, then the program with parameters first.
    fn finish(mut self, graph: &GraphProto) -> DResult<Imported> {
        self.span = Span::default();
        let mut results = Vec::new();
        let mut ret = Vec::new();
        for o in &graph.output {
            let v = self.run(&o.name)?;
            let shared =
                self.params.iter().any(|(p, _)| *p == v) || results.iter().any(|r: &(ValueId, FTensor)| r.0 == v);
            let (v, name) = if shared {
                // An output that is an input or another output: a copy, so
                // each result is its own value.
                let copy =
                    self.emit(FOp::Movement(Movement::Reshape { shape: self.shape(v)? }), vec![Operand::Value(v)])?;
                (copy, self.fresh(&o.name))
            } else {
                // The value took the output's name when its node made it,
                // unless it was a known value materialised here.
                let name = match (self.named.get(&o.name), &self.values[v.0 as usize].name) {
                    (Some(n), Some(m)) if n == m => n.clone(),
                    _ => self.fresh(&o.name),
                };
                if name != o.name && !self.onnx_names.iter().any(|(t, _)| *t == name) {
                    self.onnx_names.push((name.clone(), o.name.clone()));
                }
                (v, name)
            };
            let t = FTensor { name, dtype: self.dtype(v)?, shape: self.shape(v)?, span: Span::default() };
            results.push((v, t));
        }
        // Renumber: parameters first, then the rest in order.
        let mut order: Vec<ValueId> = self.params.iter().map(|(v, _)| *v).collect();
        let is_param: HashSet<ValueId> = order.iter().copied().collect();
        order.extend((0..self.values.len() as u32).map(ValueId).filter(|v| !is_param.contains(v)));
        let mut new_id = vec![ValueId(0); self.values.len()];
        for (k, v) in order.iter().enumerate() {
            new_id[v.0 as usize] = ValueId(k as u32);
        }
        let remap = |o: &Operand| match o {
            Operand::Value(v) => Operand::Value(new_id[v.0 as usize]),
            l => *l,
        };
        let values: Vec<FValue> = order.iter().map(|v| self.values[v.0 as usize].clone()).collect();
        let body: Vec<FStmt> = self
            .body
            .iter()
            .map(|st| FStmt {
                results: st.results.iter().map(|v| new_id[v.0 as usize]).collect(),
                op: st.op.clone(),
                args: st.args.iter().map(remap).collect(),
                arg_spans: st.arg_spans.clone(),
                span: st.span,
            })
            .collect();
        for (v, t) in &results {
            ret.push((Operand::Value(new_id[v.0 as usize]), t.span));
        }
        let mut values = values;
        for (v, t) in &results {
            // A result's value takes the output's name (the names differ
            // only where the output is also an intermediate's name).
            let slot = &mut values[new_id[v.0 as usize].0 as usize];
            if slot.name.as_deref() != Some(t.name.as_str()) {
                slot.name = Some(t.name.clone());
            }
        }
        let fg = FGraph {
            name: self.inc.name().to_string(),
            span: Span::default(),
            syms: self.syms.iter().map(|s| (s.clone(), None)).collect(),
            padded: Vec::new(),
            params: self.params.into_iter().map(|(_, t)| t).collect(),
            results: results.into_iter().map(|(_, t)| t).collect(),
            values,
            body,
            ret,
        };
        Ok(Imported {
            program: FProgram { graphs: vec![fg] },
            weights: self.weights,
            onnx_names: self.onnx_names,
            opset: self.opset,
            nodes: self.nodes,
        })
    }
}

/// A tensor's values as a [`HostTensor`] of its run-time dtype
/// ([`proto::runtime_dtype`]): raw bytes copied for the float types, `i32`
/// and `bool`, `INT64` narrowed (each value checked).
///
/// Errors: `Unsupported` for a type tgc does not compute in, and those of
/// [`proto::read_values`].
pub fn host_tensor(t: &TensorProto, dir: Option<&Path>) -> DResult<HostTensor> {
    let dtype = proto::runtime_dtype(t.data_type).ok_or_else(|| {
        diag!(
            Unsupported,
            "tensor `{}` is of type {}, which tgc does not compute in",
            t.name,
            proto::type_name(t.data_type)
        )
    })?;
    let (shape, _) = proto::tensor_shape(t)?;
    let fail = |e: tgc_runtime::Error| diag!(AxisSizeMismatch, "tensor `{}`: {e}", t.name);
    let raw = proto::raw_bytes(t, dir)?;
    match (t.data_type, raw) {
        (
            proto::code::FLOAT | proto::code::FLOAT16 | proto::code::BFLOAT16 | proto::code::INT32 | proto::code::BOOL,
            Some(raw),
        ) => HostTensor::from_bytes(dtype, &shape, raw).map_err(fail),
        _ => {
            let values = proto::read_values(t, dir)?;
            let floats: Vec<f64> = match values.data {
                proto::Data::Float(f) => f,
                proto::Data::Int(i) => i
                    .into_iter()
                    .map(|v| proto::narrow(v, &format!("tensor `{}`", t.name)).map(|v| v as f64))
                    .collect::<DResult<_>>()?,
            };
            HostTensor::from_f64(dtype, &shape, &floats).map_err(fail)
        }
    }
}

/// `name` as a graph-language identifier (the module doc's rule), at most
/// [`crate::frontend::lexer::MAX_NAME_BYTES`] less 8 bytes (room for a
/// `_N` suffix): a longer name keeps its end, where an exporter's names
/// differ (`/encoder/layer.0/attention/self/query/MatMul_output_0`).
pub fn ident(name: &str) -> String {
    let mut s: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    let most = crate::frontend::lexer::MAX_NAME_BYTES - 8;
    if s.len() > most {
        // Every character is ASCII here, so any byte index is a boundary.
        s = s.split_off(s.len() - most);
    }
    if s.is_empty()
        || s.starts_with(|c: char| c.is_ascii_digit())
        || crate::frontend::parser::RESERVED_WORDS.contains(&s.as_str())
    {
        s.insert_str(0, "v_");
    }
    s
}

/// The known data of a tensor as a [`KData`] of `code`'s kind.
fn kdata_of(code: i32, values: Vec<f64>) -> KData {
    if proto::is_float(code) {
        KData::Float(values)
    } else {
        KData::Int(values.into_iter().map(|v| Dim::int(v as i64)).collect())
    }
}

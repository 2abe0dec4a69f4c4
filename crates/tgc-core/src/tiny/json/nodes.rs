//! The node format of `spec/002` §1.1 (canonical, decision 1).

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use crate::affine::AffExpr;
use crate::diag;
use crate::diag::{DResult, Span};
use crate::sym::Dim;

use super::super::graph::{Graph, NodeId, Output, Symbol, MAX_SYMBOLS};
use super::super::op::{BinaryOp, Op, ReduceOp, UnaryOp};
use super::build::{resolve_axes, Builder, Operand};
use super::fields::Fields;
use super::source::KeySpans;

/// One entry of `uops` as written.
struct RawNode<'a> {
    id: String,
    /// `uops[k]`, the start of the JSON paths of its fields.
    path: String,
    uop: &'a str,
    src: Vec<Src>,
    arg: Option<&'a Map<String, Value>>,
    span: Option<Span>,
}

enum Src {
    Ref(String),
    Imm(f64),
}

/// Loads `{"uops": [...], "outputs"?, "symbols"?, "name"?}`.
pub(super) fn load(root: &Fields, spans: &KeySpans) -> DResult<Graph> {
    let name = root.opt_str("name")?.unwrap_or(super::DEFAULT_NAME);
    let uops = root.req("uops")?.as_array().ok_or_else(|| diag!(SyntaxError, "`uops` must be a list of nodes"))?;
    let mut raw = Vec::with_capacity(uops.len());
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (k, v) in uops.iter().enumerate() {
        let n = read_node(v, k, spans, &seen)?;
        *seen.entry(n.id.clone()).or_insert(0) += 1;
        if seen[&n.id] > 1 {
            return Err(diag!(SyntaxError, "node id `{}` is used twice", n.id).on_node(n.id.clone()).or_at(n.span));
        }
        raw.push(n);
    }
    let mut b = Builder::new(name, raw.iter().map(|n| n.id.clone()));
    let mut env: HashMap<&str, NodeId> = HashMap::new();
    for n in &raw {
        b.g.cur_span = n.span;
        let id = build(&mut b, n, &env).map_err(|e| e.on_node(n.id.clone()).or_at(n.span))?;
        env.insert(&n.id, id);
    }
    b.g.cur_span = None;
    let mut g = b.g;
    symbols(&mut g, root)?;
    g.outputs = outputs(&g, root, &env)?;
    Ok(g)
}

fn read_node<'a>(v: &'a Value, k: usize, spans: &KeySpans, seen: &HashMap<String, usize>) -> DResult<RawNode<'a>> {
    let f = Fields::of(v, format!("uops[{k}]"))?;
    let id = f.str("id")?.to_string();
    let span = spans.get("id", &id, seen.get(&id).copied().unwrap_or(0));
    let at = |e: crate::Diagnostic| e.on_node(id.clone()).or_at(span);
    let uop = f.str("uop").map_err(at)?;
    let mut src = Vec::new();
    if let Some(s) = f.get("src") {
        let list =
            s.as_array().ok_or_else(|| at(diag!(SyntaxError, "`src` must be a list of node ids and numbers")))?;
        for (i, x) in list.iter().enumerate() {
            src.push(match x {
                Value::String(r) => Src::Ref(r.clone()),
                Value::Number(n) => {
                    Src::Imm(n.as_f64().ok_or_else(|| at(diag!(SyntaxError, "`src[{i}]` is not a finite number")))?)
                }
                _ => return Err(at(diag!(SyntaxError, "`src[{i}]` must be a node id or a number, got {x}"))),
            });
        }
    }
    let arg = match f.get("arg") {
        None => None,
        Some(Value::Object(m)) => Some(m),
        Some(other) => return Err(at(diag!(SyntaxError, "`arg` must be an object, got {other}"))),
    };
    // `tag` is a hint that never affects compilation (002 §1.1); it is not kept.
    f.opt_str("tag").map_err(at)?;
    f.finish("a node").map_err(at)?;
    Ok(RawNode { id, path: format!("uops[{k}]"), uop, src, arg, span })
}

/// What a `uop` name stands for.
enum Kind {
    Elementwise(Op),
    /// Takes node sources only.
    Other(usize),
}

fn kind(uop: &str) -> Option<Kind> {
    use BinaryOp::*;
    use UnaryOp::*;
    let un = |u| Kind::Elementwise(Op::Unary(u));
    let bin = |b| Kind::Elementwise(Op::Binary(b));
    Some(match uop {
        "NEG" => un(Neg),
        "RELU" => un(Relu),
        "EXP2" => un(Exp2),
        "LOG2" => un(Log2),
        "SQRT" => un(Sqrt),
        "RSQRT" => un(Rsqrt),
        "RECIP" => un(Recip),
        "ADD" => bin(Add),
        "SUB" => bin(Sub),
        "MUL" => bin(Mul),
        "FDIV" => bin(Fdiv),
        "MAX" => bin(Max),
        "MIN" => bin(Min),
        "CMPLT" => bin(Cmplt),
        "CMPEQ" => bin(Cmpeq),
        "WHERE" => Kind::Elementwise(Op::Where),
        "INPUT" | "CONST" => Kind::Other(0),
        "GATHER" => Kind::Other(2),
        "CAST" | "REDUCE" | "SCAN" | "RESHAPE" | "EXPAND" | "PERMUTE" | "PAD" | "SHRINK" | "FLIP" | "VIEW" | "POOL" => {
            Kind::Other(1)
        }
        _ => return None,
    })
}

/// The axis of a rank-`rank` operand that the JSON number `axis` names
/// (negative from the end).
fn one_axis(axis: f64, rank: usize, what: &str) -> DResult<usize> {
    let r = rank as f64;
    if axis.fract() != 0.0 || axis < -r || axis >= r {
        return Err(diag!(InvalidAxis, "{what} axis {axis} is not an axis of rank {rank}"));
    }
    Ok(if axis < 0.0 { axis + r } else { axis } as usize)
}

/// A `REDUCE` or `SCAN` op by name.
fn reduce_op(name: &str) -> DResult<ReduceOp> {
    ReduceOp::parse(name).ok_or_else(|| diag!(UnknownOp, "unknown reduce op `{name}` (SUM, PROD, MAX, MIN)"))
}

fn build(b: &mut Builder, n: &RawNode, env: &HashMap<&str, NodeId>) -> DResult<NodeId> {
    let kind = kind(n.uop).ok_or_else(|| diag!(UnknownOp, "unknown uop `{}`", n.uop))?;
    let arity = match &kind {
        Kind::Elementwise(op) => op.arity(),
        Kind::Other(a) => *a,
    };
    if n.src.len() != arity {
        return Err(diag!(ArityMismatch, "{} takes {arity} source(s), got {}", n.uop, n.src.len()));
    }
    let mut operands = Vec::with_capacity(arity);
    for s in &n.src {
        operands.push(match s {
            Src::Ref(r) => Operand::Node(*env.get(r.as_str()).ok_or_else(|| {
                diag!(
                    UnknownName,
                    "source `{r}` is not the id of an earlier node (nodes are listed in topological order)"
                )
            })?),
            Src::Imm(v) => Operand::Imm(*v),
        });
    }
    let empty = Map::new();
    let a = Fields::new(n.arg.unwrap_or(&empty), format!("{}.arg", n.path));
    let id = n.id.as_str();
    if let Kind::Elementwise(op) = kind {
        a.finish(n.uop)?;
        return b.elementwise(id, op, &operands);
    }
    let x = match operands.first() {
        Some(Operand::Node(x)) => Some(*x),
        Some(Operand::Imm(_)) => return Err(diag!(SyntaxError, "{} takes a node source, not an immediate", n.uop)),
        None => None,
    };
    let x = || x.ok_or_else(|| diag!(Internal, "{} has no source", n.uop));
    match n.uop {
        "INPUT" => {
            let (name, dtype, shape) = (a.str("tensor_id")?, a.dtype("dtype")?, a.dims("shape")?);
            a.finish(n.uop)?;
            b.add(id, Op::Input { name: name.to_string() }, vec![], Some(dtype), Some(&shape))
        }
        "CONST" => {
            let (value, dtype) = (a.number("value")?, a.dtype("dtype")?);
            a.finish(n.uop)?;
            b.add(id, Op::Const { value }, vec![], Some(dtype), None)
        }
        "CAST" => {
            let to = a.dtype("to")?;
            a.finish(n.uop)?;
            b.add(id, Op::Cast, vec![x()?], Some(to), None)
        }
        "REDUCE" => {
            let op = reduce_op(a.str("op")?)?;
            let (axes, acc) = (a.axes("axes")?, a.opt_dtype("dtype")?);
            if a.get("init").is_some() {
                return Err(diag!(
                    Unsupported,
                    "REDUCE `init` is not supported: the identity of the op is the initial value"
                ));
            }
            a.finish(n.uop)?;
            b.reduce(id, op, x()?, &axes, acc)
        }
        "RESHAPE" => {
            let to = a.dims("result_shape")?;
            a.finish(n.uop)?;
            b.add(id, Op::Reshape, vec![x()?], None, Some(&to))
        }
        "EXPAND" => {
            let (to, bd) = (a.dims("result_shape")?, a.opt_ints("broadcast_dimensions")?);
            a.finish(n.uop)?;
            b.expand(id, x()?, &to, bd.as_deref())
        }
        "PERMUTE" => {
            let perm = a.ints("perm")?;
            a.finish(n.uop)?;
            let perm = perm
                .iter()
                .map(|&p| {
                    usize::try_from(p).map_err(|_| diag!(InvalidPermutation, "permutation entry {p} is negative"))
                })
                .collect::<DResult<Vec<_>>>()?;
            b.add(id, Op::Permute { perm }, vec![x()?], None, None)
        }
        "PAD" => {
            let (pads, value) = (a.dim_pairs("pad")?, a.opt_number("value")?.unwrap_or(0.0));
            a.finish(n.uop)?;
            b.add(id, Op::Pad { pads, value }, vec![x()?], None, None)
        }
        "SHRINK" => {
            let (lo, hi, step) = (a.dims("lo")?, a.dims("hi")?, a.opt_dims("step")?);
            a.finish(n.uop)?;
            let step = step.unwrap_or_else(|| vec![Dim::int(1); lo.len()]);
            b.add(id, Op::Shrink { lo, hi, step }, vec![x()?], None, None)
        }
        "SCAN" => {
            let (op, axis) = (reduce_op(a.str("op")?)?, a.number("axis")?);
            let (exclusive, reverse) = (a.opt_bool("exclusive")?, a.opt_bool("reverse")?);
            a.finish(n.uop)?;
            let x = x()?;
            let axis = one_axis(axis, b.g.shape(x).len(), "SCAN")?;
            let op = Op::Scan { op, axis, exclusive: exclusive.unwrap_or(false), reverse: reverse.unwrap_or(false) };
            b.add(id, op, vec![x], None, None)
        }
        "GATHER" => {
            let axis = a.number("axis")?;
            a.finish(n.uop)?;
            let (Some(Operand::Node(x)), Some(Operand::Node(index))) = (operands.first(), operands.get(1)) else {
                return Err(diag!(SyntaxError, "GATHER takes two node sources, [x, index]"));
            };
            let axis = one_axis(axis, b.g.shape(*x).len(), "GATHER")?;
            b.add(id, Op::Gather { axis }, vec![*x, *index], None, None)
        }
        "FLIP" => {
            let axes = a.axes("axes")?;
            a.finish(n.uop)?;
            let x = x()?;
            let axes = resolve_axes(b.g.shape(x), &axes, "FLIP")?;
            b.add(id, Op::Flip { axes }, vec![x], None, None)
        }
        "VIEW" => {
            let (to, exprs) = (a.dims("result_shape")?, a.strs("index_map")?);
            a.finish(n.uop)?;
            let map = exprs
                .iter()
                .enumerate()
                .map(|(k, e)| AffExpr::parse(e).map_err(|m| diag!(SyntaxError, "`{}[{k}]`: {m}", a.path("index_map"))))
                .collect::<DResult<Vec<_>>>()?;
            b.add(id, Op::View { map }, vec![x()?], None, Some(&to))
        }
        "POOL" => {
            let kernel = a.dims("kernel")?;
            let ones = || vec![Dim::int(1); kernel.len()];
            let stride = a.opt_dims("stride")?.unwrap_or_else(ones);
            let dilation = a.opt_dims("dilation")?.unwrap_or_else(ones);
            a.finish(n.uop)?;
            b.pool(id, x()?, &kernel, &stride, &dilation)
        }
        other => Err(diag!(Internal, "uop `{other}` has no builder")),
    }
}

/// Declares the symbols: the `symbols` list when given (every symbol the
/// graph uses must be in it), else every symbol in order of first use.
fn symbols(g: &mut Graph, root: &Fields) -> DResult<()> {
    if let Some(list) = root.get("symbols") {
        let list = list
            .as_array()
            .ok_or_else(|| diag!(SyntaxError, "`symbols` must be a list of {{\"name\", \"default\"?, \"padded\"?}}"))?;
        for (k, v) in list.iter().enumerate() {
            let f = Fields::of(v, format!("symbols[{k}]"))?;
            let name = f.str("name")?;
            if Dim::parse(name).ok().as_ref().and_then(|d| d.as_sym()) != Some(name) {
                return Err(diag!(SyntaxError, "`symbols[{k}].name`: `{name}` is not a symbol name"));
            }
            let default = match f.get("default") {
                None => None,
                Some(d) => Some(
                    d.as_i64()
                        .filter(|&v| v >= 1)
                        .ok_or_else(|| diag!(SyntaxError, "`symbols[{k}].default` must be an integer ≥ 1, got {d}"))?,
                ),
            };
            let padded = match f.get("padded") {
                None => false,
                Some(p) => p
                    .as_bool()
                    .ok_or_else(|| diag!(SyntaxError, "`symbols[{k}].padded` must be true or false, got {p}"))?,
            };
            f.finish("a symbol")?;
            if g.symbols.iter().any(|s| s.name == name) {
                return Err(diag!(SyntaxError, "symbol `{name}` is declared twice"));
            }
            if g.symbols.len() == MAX_SYMBOLS {
                return Err(diag!(
                    ResourceExceeded,
                    "`symbols[{k}]`: a graph may have at most {MAX_SYMBOLS} symbols (tiny::graph::MAX_SYMBOLS)"
                ));
            }
            g.symbols.push(Symbol { name: name.to_string(), default, padded });
        }
        let declared = g.symbols.len();
        g.declare_input_symbols()?;
        if let Some(s) = g.symbols.get(declared) {
            return Err(diag!(UnknownName, "symbol `{}` is used but not declared in `symbols`", s.name));
        }
    } else {
        g.declare_input_symbols()?;
    }
    Ok(())
}

/// The `outputs` list when given, else every node no other node reads, named
/// by its id.
fn outputs(g: &Graph, root: &Fields, env: &HashMap<&str, NodeId>) -> DResult<Vec<Output>> {
    let Some(list) = root.get("outputs") else {
        let consumers = g.consumers();
        return Ok(g
            .ids()
            .filter(|i| consumers[i.index()].is_empty())
            .map(|node| Output { name: g.node(node).label.clone(), node })
            .collect());
    };
    let list = list.as_array().ok_or_else(|| diag!(SyntaxError, "`outputs` must be a list of {{\"name\", \"id\"}}"))?;
    let mut names = HashSet::new();
    let mut out = Vec::new();
    for (k, v) in list.iter().enumerate() {
        let f = Fields::of(v, format!("outputs[{k}]"))?;
        let (name, id) = (f.str("name")?, f.str("id")?);
        f.finish("an output")?;
        let node = *env
            .get(id)
            .ok_or_else(|| diag!(UnknownName, "output `{name}` names node `{id}`, which does not exist").on_node(id))?;
        if !names.insert(name) {
            return Err(diag!(SyntaxError, "output name `{name}` is used twice"));
        }
        out.push(Output { name: name.to_string(), node });
    }
    Ok(out)
}

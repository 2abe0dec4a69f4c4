//! The op-list import format of `spec/000` §1.2 and §12.1 (decision 1):
//! `{"ops": [{"op", "name", "kind"|"fn", "inputs", "outputs", "attrs"?, "axes"?}],
//! "values": {name: {"dtype", "shape"}}}`, converted on load to the node format.
//!
//! - Values no op produces are `INPUT`s (tensor id = value name), in the order
//!   of `values`; the other values are the ops' results, and a node is
//!   labelled by the value it computes. Ops must come after the ops they read.
//! - `Movement` kinds and their `attrs`: `reshape`/`expand` `{new_shape}`
//!   (or `result_shape`; `expand` right-aligns a lower-rank input), `permute`
//!   `{perm}`, `pad` `{pad, value?}`, `shrink` `{lo, hi, step?}`, `flip`
//!   `{axes}`, `view` `{new_shape, index_map}` — the node format's arguments.
//! - `Unary` fns: relu, neg, sqrt, recip, exp2, log2, rsqrt; `exp(x)` is
//!   `EXP2(x·log2 e)` and `log(x)` is `LOG2(x)·ln 2`. gelu, silu, sigmoid,
//!   tanh and erf are `Unsupported` here (the DSL frontend decomposes them).
//! - `Binary` fns: add, sub, mul, div (`FDIV`), max, min, and `where` with
//!   three inputs; operands are normalised as in the node format.
//! - `Reduce` fns sum, max, min over `axes` (indices or dimension names). The
//!   format has no accumulator dtype, so floating inputs accumulate in fp32
//!   and the result is cast back to the input dtype, as tinygrad's `sum` of
//!   half returns half with an f32 accumulator; i32 accumulates in i32; bool
//!   sums count in i32 and max/min stay bool.
//! - A `values` entry of a computed value must agree with the inferred type
//!   (`DTypeMismatch`, `AxisSizeMismatch`; undecidable symbolic sizes become
//!   graph constraints checked at bind).
//! - Outputs are the computed values no op reads, in op order.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::affine::AffExpr;
use crate::diag;
use crate::diag::{DResult, Span};
use crate::sym::Dim;
use crate::DType;

use super::super::graph::{Graph, NodeConstraint, NodeId, Output};
use super::super::infer::{fmt_shape, Constraint, Rel};
use super::super::op::{BinaryOp, Op, ReduceOp, UnaryOp};
use super::build::{resolve_axes, Builder, Operand};
use super::fields::Fields;
use super::source::KeySpans;

/// One entry of `ops` as written.
struct RawOp<'a> {
    name: String,
    f: Fields<'a>,
    op: &'a str,
    inputs: Vec<&'a str>,
    output: &'a str,
    span: Option<Span>,
}

/// Loads `{"ops": [...], "values": {...}}`.
pub(super) fn load(root: &Fields, spans: &KeySpans) -> DResult<Graph> {
    let name = root.opt_str("name")?.unwrap_or(super::DEFAULT_NAME);
    let values = read_values(root)?;
    let ops_v = root.req("ops")?.as_array().ok_or_else(|| diag!(SyntaxError, "`ops` must be a list of ops"))?;
    let mut ops = Vec::with_capacity(ops_v.len());
    let mut produced: HashMap<&str, usize> = HashMap::new();
    for (k, v) in ops_v.iter().enumerate() {
        let f = Fields::of(v, format!("ops[{k}]"))?;
        let name = f.str("name")?.to_string();
        let span = spans.get("name", &name, 0);
        let at = |e: crate::Diagnostic| e.on_node(name.clone()).or_at(span);
        let op = f.str("op").map_err(at)?;
        let inputs = f.strs("inputs").map_err(at)?;
        let outputs = f.strs("outputs").map_err(at)?;
        let [output] = outputs.as_slice() else {
            return Err(at(diag!(ArityMismatch, "an op has exactly one output, `{name}` lists {}", outputs.len())));
        };
        if produced.insert(output, k).is_some() {
            return Err(at(diag!(SyntaxError, "value `{output}` is the output of two ops")));
        }
        ops.push(RawOp { name, f, op, inputs, output, span });
    }
    let reserved = values.iter().map(|(n, _, _)| n.to_string()).chain(produced.keys().map(|s| s.to_string()));
    let mut b = Builder::new(name, reserved.collect::<Vec<_>>());
    let mut env: HashMap<&str, NodeId> = HashMap::new();
    for (v, dtype, shape) in &values {
        if !produced.contains_key(v) {
            let id = b
                .add(v, Op::Input { name: v.to_string() }, vec![], Some(*dtype), Some(shape))
                .map_err(|e| e.on_node(*v))?;
            env.insert(v, id);
        }
    }
    let mut consumed = HashSet::new();
    for o in &ops {
        b.g.cur_span = o.span;
        let at = |e: crate::Diagnostic| e.on_node(o.name.clone()).or_at(o.span);
        let mut xs = Vec::with_capacity(o.inputs.len());
        for i in &o.inputs {
            let id = env.get(i).copied().ok_or_else(|| {
                at(match produced.get(i) {
                    Some(_) => diag!(UnknownName, "`{}` reads `{i}` before the op that computes it", o.name),
                    None => {
                        diag!(UnknownName, "`{}` reads `{i}`, which is neither an op output nor in `values`", o.name)
                    }
                })
            })?;
            consumed.insert(*i);
            xs.push(id);
        }
        let id = build(&mut b, o, &xs).map_err(at)?;
        if let Some((_, dtype, shape)) = values.iter().find(|(v, _, _)| *v == o.output) {
            check_value(&mut b.g, id, o.output, *dtype, shape).map_err(at)?;
        }
        env.insert(o.output, id);
    }
    b.g.cur_span = None;
    let mut g = b.g;
    g.outputs = ops
        .iter()
        .filter(|o| !consumed.contains(o.output))
        .map(|o| Output { name: o.output.to_string(), node: env[o.output] })
        .collect();
    g.declare_input_symbols()?;
    Ok(g)
}

fn read_values<'a>(root: &Fields<'a>) -> DResult<Vec<(&'a str, DType, Vec<Dim>)>> {
    let Some(Value::Object(m)) = root.get("values") else {
        return Err(diag!(SyntaxError, "`values` must be an object of {{\"dtype\", \"shape\"}} entries"));
    };
    m.iter()
        .map(|(name, v)| {
            let f = Fields::of(v, format!("values.{name}"))?;
            let t = (name.as_str(), f.dtype("dtype")?, f.dims("shape")?);
            f.finish("a value")?;
            Ok(t)
        })
        .collect()
}

fn check_value(g: &mut Graph, id: NodeId, name: &str, dtype: DType, shape: &[Dim]) -> DResult<()> {
    let ty = g.ty(id).clone();
    if ty.dtype != dtype {
        return Err(diag!(
            DTypeMismatch,
            "`values.{name}` declares {} but the op computes {}",
            dtype.json_name(),
            ty.dtype.json_name()
        ));
    }
    let mismatch = || {
        diag!(
            AxisSizeMismatch,
            "`values.{name}` declares {} but the op computes {}",
            fmt_shape(shape),
            fmt_shape(&ty.shape)
        )
    };
    if ty.shape.len() != shape.len() {
        return Err(mismatch());
    }
    for (a, b) in ty.shape.iter().zip(shape) {
        if a != b {
            if a.as_int().is_some() && b.as_int().is_some() {
                return Err(mismatch());
            }
            let what = format!("`values.{name}` declares {}", fmt_shape(shape));
            g.constraints.push(NodeConstraint {
                node: id,
                constraint: Constraint { lhs: a.clone(), rel: Rel::Eq, rhs: b.clone(), what },
            });
        }
    }
    Ok(())
}

fn build(b: &mut Builder, o: &RawOp, xs: &[NodeId]) -> DResult<NodeId> {
    let f = &o.f;
    let label = o.output;
    let want = match (o.op, f.opt_str("fn")?) {
        ("Binary", Some("where")) => 3,
        ("Binary", _) => 2,
        _ => 1,
    };
    if xs.len() != want {
        return Err(diag!(ArityMismatch, "{} `{}` takes {want} input(s), got {}", o.op, o.name, xs.len()));
    }
    let x = xs[0];
    let empty = serde_json::Map::new();
    let attrs = match f.get("attrs") {
        None => Fields::new(&empty, f.path("attrs")),
        Some(v) => Fields::of(v, f.path("attrs"))?,
    };
    let id = match o.op {
        "Movement" => movement(b, label, f.str("kind")?, x, &attrs)?,
        "Unary" => unary(b, label, f.str("fn")?, x)?,
        "Binary" => {
            let op = match f.str("fn")? {
                "add" => Op::Binary(BinaryOp::Add),
                "sub" => Op::Binary(BinaryOp::Sub),
                "mul" => Op::Binary(BinaryOp::Mul),
                "div" => Op::Binary(BinaryOp::Fdiv),
                "max" => Op::Binary(BinaryOp::Max),
                "min" => Op::Binary(BinaryOp::Min),
                "where" => Op::Where,
                other => {
                    return Err(diag!(UnknownOp, "unknown Binary fn `{other}` (add, sub, mul, div, max, min, where)"))
                }
            };
            let operands: Vec<Operand> = xs.iter().map(|&x| Operand::Node(x)).collect();
            b.elementwise(label, op, &operands)?
        }
        "Reduce" => {
            let op = match f.str("fn")? {
                "sum" => ReduceOp::Sum,
                "max" => ReduceOp::Max,
                "min" => ReduceOp::Min,
                other => return Err(diag!(UnknownOp, "unknown Reduce fn `{other}` (sum, max, min)")),
            };
            let axes = if f.get("axes").is_some() { f.axes("axes")? } else { attrs.axes("axes")? };
            let dtype = b.g.dtype(x);
            let acc = match (dtype, op) {
                (d, _) if d.is_float() => DType::F32,
                (DType::Bool, ReduceOp::Sum) => DType::I32,
                (d, _) => d,
            };
            if acc == dtype || !dtype.is_float() {
                b.reduce(label, op, x, &axes, Some(acc))?
            } else {
                let acc_label = b.fresh(label, "acc");
                let r = b.reduce(&acc_label, op, x, &axes, Some(acc))?;
                b.add(label, Op::Cast, vec![r], Some(dtype), None)?
            }
        }
        other => return Err(diag!(UnknownOp, "unknown op `{other}` (Movement, Unary, Binary, Reduce)")),
    };
    attrs.finish(&format!("{} `{}`", o.op, o.name))?;
    f.finish("an op")?;
    Ok(id)
}

/// The result shape of `reshape`, `expand` and `view`: `new_shape` or `result_shape`.
fn new_shape(a: &Fields) -> DResult<Vec<Dim>> {
    match a.opt_dims("new_shape")? {
        Some(s) => Ok(s),
        None => a.dims("result_shape"),
    }
}

fn movement(b: &mut Builder, label: &str, kind: &str, x: NodeId, a: &Fields) -> DResult<NodeId> {
    match kind {
        "reshape" => b.add(label, Op::Reshape, vec![x], None, Some(&new_shape(a)?)),
        "expand" => b.expand(label, x, &new_shape(a)?, None),
        "permute" => {
            let perm = a.ints("perm")?;
            let perm = perm
                .iter()
                .map(|&p| {
                    usize::try_from(p).map_err(|_| diag!(InvalidPermutation, "permutation entry {p} is negative"))
                })
                .collect::<DResult<Vec<_>>>()?;
            b.add(label, Op::Permute { perm }, vec![x], None, None)
        }
        "pad" => {
            let (pads, value) = (a.dim_pairs("pad")?, a.opt_number("value")?.unwrap_or(0.0));
            b.add(label, Op::Pad { pads, value }, vec![x], None, None)
        }
        "shrink" => {
            let (lo, hi) = (a.dims("lo")?, a.dims("hi")?);
            let step = a.opt_dims("step")?.unwrap_or_else(|| vec![Dim::int(1); lo.len()]);
            b.add(label, Op::Shrink { lo, hi, step }, vec![x], None, None)
        }
        "flip" => {
            let axes = resolve_axes(b.g.shape(x), &a.axes("axes")?, "flip")?;
            b.add(label, Op::Flip { axes }, vec![x], None, None)
        }
        "view" => {
            let to = new_shape(a)?;
            let map = a
                .strs("index_map")?
                .iter()
                .enumerate()
                .map(|(k, e)| AffExpr::parse(e).map_err(|m| diag!(SyntaxError, "`{}[{k}]`: {m}", a.path("index_map"))))
                .collect::<DResult<Vec<_>>>()?;
            b.add(label, Op::View { map }, vec![x], None, Some(&to))
        }
        other => {
            Err(diag!(UnknownOp, "unknown Movement kind `{other}` (reshape, expand, permute, pad, shrink, flip, view)"))
        }
    }
}

fn unary(b: &mut Builder, label: &str, fn_name: &str, x: NodeId) -> DResult<NodeId> {
    let direct = |u| Ok(Some(Op::Unary(u)));
    let op: DResult<Option<Op>> = match fn_name {
        "relu" => direct(UnaryOp::Relu),
        "neg" => direct(UnaryOp::Neg),
        "sqrt" => direct(UnaryOp::Sqrt),
        "recip" => direct(UnaryOp::Recip),
        "exp2" => direct(UnaryOp::Exp2),
        "log2" => direct(UnaryOp::Log2),
        "rsqrt" => direct(UnaryOp::Rsqrt),
        "exp" | "log" => Ok(None),
        "gelu" | "silu" | "sigmoid" | "tanh" | "erf" => {
            Err(diag!(Unsupported, "Unary fn `{fn_name}` is not supported by the op-list import; write it with exp/mul/add or use the DSL, which decomposes it"))
        }
        other => Err(diag!(UnknownOp, "unknown Unary fn `{other}` (relu, neg, exp, log, sqrt, recip, exp2, log2, rsqrt)")),
    };
    if let Some(op) = op? {
        return b.elementwise(label, op, &[Operand::Node(x)]);
    }
    if fn_name == "exp" {
        let scaled = b.fresh(label, "log2e");
        let s = b.elementwise(
            &scaled,
            Op::Binary(BinaryOp::Mul),
            &[Operand::Node(x), Operand::Imm(std::f64::consts::LOG2_E)],
        )?;
        b.elementwise(label, Op::Unary(UnaryOp::Exp2), &[Operand::Node(s)])
    } else {
        let l2 = b.fresh(label, "log2");
        let l = b.elementwise(&l2, Op::Unary(UnaryOp::Log2), &[Operand::Node(x)])?;
        b.elementwise(label, Op::Binary(BinaryOp::Mul), &[Operand::Node(l), Operand::Imm(std::f64::consts::LN_2)])
    }
}

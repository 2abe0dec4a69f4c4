//! `to_json`: the node format, one node per line, keys in a fixed order.

use serde_json::{Map, Number, Value};

use crate::sym::Dim;

use super::super::graph::{Graph, NodeId};
use super::super::op::Op;

fn dim(d: &Dim) -> Value {
    match d.as_int() {
        Some(v) => Value::from(v),
        None => Value::from(d.to_string()),
    }
}

fn dims(ds: &[Dim]) -> Value {
    Value::Array(ds.iter().map(dim).collect())
}

/// A number; the non-finite values JSON cannot hold are written as the
/// strings `"inf"`, `"-inf"`, `"nan"`, which the loader reads back.
fn number(x: f64) -> Value {
    match Number::from_f64(x) {
        Some(n) => Value::Number(n),
        None if x.is_nan() => Value::from("nan"),
        None if x > 0.0 => Value::from("inf"),
        None => Value::from("-inf"),
    }
}

fn arg(g: &Graph, n: &super::super::graph::Node) -> Map<String, Value> {
    let mut a = Map::new();
    let mut put = |k: &str, v: Value| {
        a.insert(k.to_string(), v);
    };
    let dtype = Value::from(n.ty.dtype.json_name());
    match &n.op {
        Op::Input { name } => {
            put("tensor_id", Value::from(name.as_str()));
            put("dtype", dtype);
            put("shape", dims(&n.ty.shape));
        }
        Op::Const { value } => {
            put("value", number(*value));
            put("dtype", dtype);
        }
        Op::Unary(_) | Op::Binary(_) | Op::Where => {}
        Op::Cast => put("to", dtype),
        Op::Reduce { op, axes } => {
            put("op", Value::from(op.name()));
            put("axes", Value::from(axes.clone()));
            put("dtype", dtype);
        }
        Op::Reshape => put("result_shape", dims(&n.ty.shape)),
        Op::Expand => {
            put("result_shape", dims(&n.ty.shape));
            let from = g.shape(n.src[0]);
            let kept: Vec<usize> = (0..from.len()).filter(|&k| from[k] == n.ty.shape[k]).collect();
            put("broadcast_dimensions", Value::from(kept));
        }
        Op::Permute { perm } => put("perm", Value::from(perm.clone())),
        Op::Pad { pads, value } => {
            put("pad", Value::Array(pads.iter().map(|(lo, hi)| Value::Array(vec![dim(lo), dim(hi)])).collect()));
            put("value", number(*value));
        }
        Op::Shrink { lo, hi, step } => {
            put("lo", dims(lo));
            put("hi", dims(hi));
            put("step", dims(step));
        }
        Op::Flip { axes } => put("axes", Value::from(axes.clone())),
        Op::Gather { axis } => put("axis", Value::from(*axis)),
        Op::Scan { op, axis, exclusive, reverse } => {
            put("op", Value::from(op.name()));
            put("axis", Value::from(*axis));
            put("exclusive", Value::from(*exclusive));
            put("reverse", Value::from(*reverse));
        }
        Op::View { map } => {
            put("result_shape", dims(&n.ty.shape));
            put("index_map", Value::Array(map.iter().map(|e| Value::from(e.to_string())).collect()));
        }
    }
    a
}

/// Node `id` in the node format: `{"id", "uop", "src"?, "arg"?}`.
pub fn node_value(g: &Graph, id: NodeId) -> Value {
    let n = g.node(id);
    let mut m = Map::new();
    m.insert("id".into(), Value::from(n.label.as_str()));
    m.insert("uop".into(), Value::from(n.op.name()));
    if !n.src.is_empty() {
        m.insert("src".into(), Value::Array(n.src.iter().map(|s| Value::from(g.node(*s).label.as_str())).collect()));
    }
    let a = arg(g, n);
    if !a.is_empty() {
        m.insert("arg".into(), Value::Object(a));
    }
    Value::Object(m)
}

/// Renders `g` in the node format of `spec/002` §1.1 (see [`super`]):
/// `name`, `uops` (one per line, keys `id, uop, src, arg`), `outputs`,
/// `symbols`; dtypes in the `fp16` spelling, symbolic sizes as strings.
pub fn to_json(g: &Graph) -> String {
    let line = |v: Value| serde_json::to_string(&v).unwrap_or_default();
    let nodes: Vec<String> = g.ids().map(|id| format!("    {}", line(node_value(g, id)))).collect();
    let block =
        |items: Vec<String>| if items.is_empty() { "[]".to_string() } else { format!("[\n{}\n  ]", items.join(",\n")) };
    let list = |items: Vec<Value>| block(items.into_iter().map(|v| format!("    {}", line(v))).collect());
    let outputs = g.outputs.iter().map(|o| {
        let mut m = Map::new();
        m.insert("name".into(), Value::from(o.name.as_str()));
        m.insert("id".into(), Value::from(g.node(o.node).label.as_str()));
        Value::Object(m)
    });
    let symbols = g.symbols.iter().map(|s| {
        let mut m = Map::new();
        m.insert("name".into(), Value::from(s.name.as_str()));
        if let Some(d) = s.default {
            m.insert("default".into(), Value::from(d));
        }
        if s.padded {
            m.insert("padded".into(), Value::from(true));
        }
        Value::Object(m)
    });
    format!(
        "{{\n  \"name\": {},\n  \"uops\": {},\n  \"outputs\": {},\n  \"symbols\": {}\n}}\n",
        line(Value::from(g.name.as_str())),
        block(nodes),
        list(outputs.collect()),
        list(symbols.collect())
    )
}

//! The `tiny` dump: one line per node, `label = OP(sources) attrs : dtype[shape]`.

use std::fmt::Write;

use crate::affine::AffExpr;

use super::graph::Graph;
use super::infer::fmt_shape;
use super::op::Op;

/// Renders the graph as text.
pub fn dump(g: &Graph) -> String {
    dump_with_copies(g, &[])
}

/// [`dump`] with the movement nodes of `copies` marked `  # contiguous
/// copy`: the views region formation stores in a row-major buffer of their
/// own (`004`'s automatic contiguous copies: the `x` of a `GATHER`, a chain
/// of movements too long to fold) — the `--dump tiny` stage.
pub fn dump_with_copies(g: &Graph, copies: &[super::NodeId]) -> String {
    let mut s = String::new();
    let syms: Vec<String> = g
        .symbols
        .iter()
        .map(|x| match x.default {
            Some(v) => format!("{}={v}", x.name),
            None => x.name.clone(),
        })
        .collect();
    let _ = writeln!(s, "graph {}<{}>", g.name, syms.join(", "));
    for id in g.ids() {
        let n = g.node(id);
        let srcs: Vec<&str> = n.src.iter().map(|x| g.node(*x).label.as_str()).collect();
        let attrs = attrs(&n.op);
        let _ = writeln!(
            s,
            "  {} = {}({}){}{} : {}{}{}",
            n.label,
            n.op.name(),
            srcs.join(", "),
            if attrs.is_empty() { "" } else { " " },
            attrs,
            n.ty.dtype.json_name(),
            fmt_shape(&n.ty.shape),
            if copies.contains(&id) { "  # contiguous copy" } else { "" }
        );
    }
    for o in &g.outputs {
        let _ = writeln!(s, "  output {} = {}", o.name, g.node(o.node).label);
    }
    for c in &g.constraints {
        let rel = match c.constraint.rel {
            super::Rel::Eq => "==",
            super::Rel::Le => "<=",
        };
        let _ = writeln!(
            s,
            "  assume {} {rel} {}  ({}, at {})",
            c.constraint.lhs,
            c.constraint.rhs,
            c.constraint.what,
            g.node(c.node).label
        );
    }
    s
}

fn list<T: ToString>(v: &[T]) -> String {
    let v: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    format!("[{}]", v.join(", "))
}

fn attrs(op: &Op) -> String {
    match op {
        Op::Input { name } => format!("\"{name}\""),
        Op::Const { value } => format!("{value:?}"),
        Op::Reduce { op, axes } => format!("{} axes={}", op.name(), list(axes)),
        Op::Permute { perm } => format!("perm={}", list(perm)),
        Op::Pad { pads, value } => {
            let p: Vec<String> = pads.iter().map(|(a, b)| format!("[{a}, {b}]")).collect();
            format!("pad=[{}] value={value:?}", p.join(", "))
        }
        Op::Shrink { lo, hi, step } => format!("lo={} hi={} step={}", list(lo), list(hi), list(step)),
        Op::Flip { axes } => format!("axes={}", list(axes)),
        Op::View { map } => format!("map={}", list::<AffExpr>(map)),
        Op::Gather { axis } => format!("axis={axis}"),
        Op::Scan { op, axis, exclusive, reverse } => {
            format!("{} axis={axis} exclusive={exclusive} reverse={reverse}", op.name())
        }
        _ => String::new(),
    }
}

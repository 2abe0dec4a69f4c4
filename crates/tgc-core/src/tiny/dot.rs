//! Graphviz DOT text of a Tiny IR graph (`004`'s visualisation): the
//! `--dump dot` stage (every node, its op and type, every data edge) and
//! `--dump dot_regions` (the same graph with each region of
//! [`crate::region`] as a coloured cluster: an edge inside one region is
//! fused — the value never reaches memory — and drawn bold, an edge between
//! regions goes through memory and is drawn dashed; a value a region stores
//! has a double border), and `--dump dot_kernels` (one box per region,
//! that is per generated kernel, with an edge for each tensor one region
//! stores and another reads, labelled with its type; graph inputs and
//! outputs as ovals). Render with `dot -Tsvg graph.dot -o graph.svg`.
//!
//! Node `k` of the graph is DOT node `n<k>`; graph outputs are extra
//! `out<k>` nodes. A node a region inlines into several regions (a cheap
//! movement recomputed by each reader) is drawn in the first of them.

use std::collections::{HashMap, HashSet};
use std::fmt::Write;

use super::graph::{Graph, NodeId};
use super::infer::fmt_shape;
use crate::region::Regions;

/// Fill colours of the region clusters, in turn (Graphviz colour names).
const PALETTE: &[&str] = &["lightblue", "palegreen", "lightgoldenrod", "lightpink", "thistle", "lightcyan", "wheat"];

/// The graph as DOT text (the `--dump dot` stage).
pub fn dump(g: &Graph) -> String {
    let mut s = header(g);
    for id in g.ids() {
        let _ = writeln!(s, "  {}", node(g, id, ""));
    }
    edges(g, &mut s, |_, _| "");
    outputs(g, &mut s);
    s.push_str("}\n");
    s
}

/// The graph as DOT text with its regions as clusters (the `--dump
/// dot_regions` stage; see the module doc).
pub fn dump_regions(g: &Graph, rs: &Regions) -> String {
    let mut region_of: HashMap<NodeId, usize> = HashMap::new();
    let mut stored: HashSet<NodeId> = HashSet::new();
    for (r, region) in rs.regions.iter().enumerate() {
        for l in &region.body {
            region_of.entry(l.node).or_insert(r);
        }
        for o in &region.outputs {
            region_of.entry(o.node).or_insert(r);
            stored.insert(o.node);
        }
    }
    let mut s = header(g);
    for (r, region) in rs.regions.iter().enumerate() {
        let _ = writeln!(
            s,
            "  subgraph cluster_{r} {{\n    label={};\n    style=filled;\n    fillcolor={};",
            quote(&region.name),
            PALETTE[r % PALETTE.len()]
        );
        for id in g.ids().filter(|id| region_of.get(id) == Some(&r)) {
            let extra = if stored.contains(&id) { ", peripheries=2" } else { "" };
            let _ = writeln!(s, "    {}", node(g, id, extra));
        }
        s.push_str("  }\n");
    }
    for id in g.ids().filter(|id| !region_of.contains_key(id)) {
        let _ = writeln!(s, "  {}", node(g, id, ""));
    }
    edges(g, &mut s, |a, b| match (region_of.get(&a), region_of.get(&b)) {
        (Some(x), Some(y)) if x == y => " [style=bold]",
        _ => " [style=dashed]",
    });
    outputs(g, &mut s);
    s.push_str("}\n");
    s
}

/// One box per region, with the tensors between them (the `--dump
/// dot_kernels` stage; see the module doc). Region `k` is DOT node `r<k>`,
/// labelled with its name, the op of each value it stores and that value's
/// type; a value a region reads that no region stores (a graph input) is
/// an oval `t<node>`.
pub fn dump_kernels(g: &Graph, rs: &Regions) -> String {
    let mut stored_by: HashMap<NodeId, usize> = HashMap::new();
    for (r, region) in rs.regions.iter().enumerate() {
        for o in &region.outputs {
            stored_by.entry(o.node).or_insert(r);
        }
    }
    let ty = |id: NodeId| {
        let n = g.node(id);
        format!("{}{}", n.ty.dtype.json_name(), fmt_shape(&n.ty.shape))
    };
    let mut s = header(g);
    for (r, region) in rs.regions.iter().enumerate() {
        let mut label = region.name.clone();
        for o in &region.outputs {
            let _ = write!(label, "\n{} {} {}", g.node(o.node).label, g.node(o.node).op.name(), ty(o.node));
        }
        let _ =
            writeln!(s, "  r{r} [label={}, style=filled, fillcolor={}];", quote(&label), PALETTE[r % PALETTE.len()]);
    }
    let mut sources: Vec<NodeId> = Vec::new();
    let mut drawn: HashSet<(String, usize)> = HashSet::new();
    for (r, region) in rs.regions.iter().enumerate() {
        for input in &region.inputs {
            let from = match stored_by.get(&input.node) {
                Some(p) => format!("r{p}"),
                None => {
                    if !sources.contains(&input.node) {
                        sources.push(input.node);
                    }
                    format!("t{}", input.node.index())
                }
            };
            if drawn.insert((from.clone(), r)) {
                let _ = writeln!(s, "  {from} -> r{r} [label={}];", quote(&ty(input.node)));
            }
        }
    }
    for o in &g.outputs {
        if !stored_by.contains_key(&o.node) && !sources.contains(&o.node) {
            sources.push(o.node);
        }
    }
    for id in sources {
        let _ = writeln!(
            s,
            "  t{} [label={}, shape=oval];",
            id.index(),
            quote(&format!("{}\n{}", g.node(id).label, ty(id)))
        );
    }
    for (k, o) in g.outputs.iter().enumerate() {
        let from = stored_by.get(&o.node).map_or_else(|| format!("t{}", o.node.index()), |r| format!("r{r}"));
        let _ = writeln!(s, "  out{k} [label={}, shape=oval];\n  {from} -> out{k};", quote(&o.name));
    }
    s.push_str("}\n");
    s
}

fn header(g: &Graph) -> String {
    format!("digraph {} {{\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n", quote(&g.name))
}

/// `n<k> [label="label\nOP\ndtype[shape]"<extra>];`
fn node(g: &Graph, id: NodeId, extra: &str) -> String {
    let n = g.node(id);
    let label = format!("{}\n{}\n{}{}", n.label, n.op.name(), n.ty.dtype.json_name(), fmt_shape(&n.ty.shape));
    format!("n{} [label={}{extra}];", id.index(), quote(&label))
}

/// Every data edge `src -> node`, with `style(src, node)`'s attributes.
fn edges(g: &Graph, s: &mut String, style: impl Fn(NodeId, NodeId) -> &'static str) {
    for id in g.ids() {
        for &src in &g.node(id).src {
            let _ = writeln!(s, "  n{} -> n{}{};", src.index(), id.index(), style(src, id));
        }
    }
}

/// One oval per graph output, fed by its node.
fn outputs(g: &Graph, s: &mut String) {
    for (k, o) in g.outputs.iter().enumerate() {
        let _ = writeln!(s, "  out{k} [label={}, shape=oval];\n  n{} -> out{k};", quote(&o.name), o.node.index());
    }
}

/// A DOT string literal: quotes and backslashes escaped, newlines as `\n`.
fn quote(text: &str) -> String {
    let mut q = String::with_capacity(text.len() + 2);
    q.push('"');
    for c in text.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            '\n' => q.push_str("\\n"),
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::{load, Format};

    fn graph(src: &str) -> Graph {
        load(src, Format::Dsl, None).unwrap_or_else(|e| panic!("{e:?}")).graph
    }

    #[test]
    fn every_node_and_edge_is_drawn() {
        let g = graph(
            "graph gbr(x: f32[4, 8], w: f32[8, 3], b: f32[3]) -> (y: f32[4, 3]) {
                y = relu(matmul(x, w) + b)
                return y
            }",
        );
        let d = dump(&g);
        assert!(d.starts_with("digraph \"gbr\" {\n") && d.ends_with("}\n"), "{d}");
        for id in g.ids() {
            assert!(d.contains(&format!("  n{} [label=\"{}\\n", id.index(), g.node(id).label)), "{d}");
            for src in &g.node(id).src {
                assert!(d.contains(&format!("  n{} -> n{};", src.index(), id.index())), "{d}");
            }
        }
        let out = g.outputs[0].node.index();
        assert!(d.contains(&format!("out0 [label=\"y\", shape=oval];\n  n{out} -> out0;")), "{d}");
    }

    /// Softmax then a matmul: two regions, so some edges are fused and one
    /// at least goes through memory.
    const TWO_REGIONS: &str = "graph two(x: f32[4, 8], w: f32[8, 3]) -> (y: f32[4, 3]) {
        y = matmul(softmax(x, axis=-1), w)
        return y
    }";

    #[test]
    fn regions_are_clusters_with_fused_edges_bold() {
        let g = graph(TWO_REGIONS);
        let front = crate::region::front(&g, true, crate::region::Grouping::default()).unwrap();
        assert!(front.regions.regions.len() >= 2);
        let d = dump_regions(&g, &front.regions);
        for (r, region) in front.regions.regions.iter().enumerate() {
            assert!(d.contains(&format!("subgraph cluster_{r} {{\n    label=\"{}\";", region.name)), "{d}");
        }
        assert!(d.contains("[style=bold]") && d.contains("[style=dashed]"), "{d}");
        assert!(d.contains("peripheries=2"), "a stored value has a double border:\n{d}");
        // Each node is declared once.
        for id in g.ids() {
            assert_eq!(d.matches(&format!("  n{} [label=", id.index())).count(), 1, "{d}");
        }
    }

    #[test]
    fn kernels_are_one_box_per_region() {
        let g = graph(TWO_REGIONS);
        let front = crate::region::front(&g, true, crate::region::Grouping::default()).unwrap();
        let rs = &front.regions.regions;
        assert!(rs.len() >= 2);
        let d = dump_kernels(&g, &front.regions);
        assert!(d.starts_with("digraph \"two\" {\n") && d.ends_with("}\n"), "{d}");
        let boxes = d.lines().filter(|l| l.starts_with("  r") && l.contains(" [label=") && !l.contains(" -> ")).count();
        assert_eq!(boxes, rs.len(), "{d}");
        let ovals: Vec<&str> = d.lines().filter(|l| l.contains("shape=oval")).collect();
        assert_eq!(ovals.len(), 3, "x, w and the output y:\n{d}");
        // Every tensor between two regions is one labelled edge.
        let between = d.lines().filter(|l| l.starts_with("  r") && l.contains(" -> r")).count();
        assert!(between >= 1 && d.contains(" [label=\"fp32[4, 8]\"];"), "{d}");
    }

    #[test]
    fn labels_are_escaped() {
        assert_eq!(quote("a\"b\\c\nd"), "\"a\\\"b\\\\c\\nd\"");
    }
}

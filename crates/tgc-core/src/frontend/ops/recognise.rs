//! Recognising a decomposed function in a Tiny IR graph: the inverse of
//! [`elementwise::unary`], for back ends that compute a function such as
//! SiLU or GELU in one step (a tensor-core epilogue).
//!
//! The pattern of a function is its own decomposition: [`recognise`]
//! builds `unary(f, x)` on a one-input graph and matches that graph
//! against the nodes after `x`, so a decomposition is written once (in
//! [`elementwise`]) and the recogniser follows it when it changes.
//!
//! A match is structural, node by node from the function's result down to
//! `x`:
//!
//! - an op matches the same op with the same dtype, its operands matching
//!   in order, or swapped for a commutative `ADD`, `MUL`, `MAX`, `MIN`
//!   (`sigmoid(x) * x` is `x * sigmoid(x)`);
//! - a constant matches a `CONST` of the same value and dtype, reached
//!   through `RESHAPE`s and `EXPAND`s (a splat of any shape);
//! - a node of the pattern shared by two uses matches one node of the
//!   graph (the graph may share more: a value computed twice in the
//!   pattern may be one node in the graph).
//!
//! Only a function's whole decomposition counts: every use of `x` and of
//! each matched node but the result lies inside the match, so that the
//! nodes can be replaced by the one-step function.

use std::collections::BTreeSet;

use crate::frontend::ir::UnaryFn;
use crate::tiny::{BinaryOp, Graph, NodeId, Op};

use super::elementwise;

/// A function's decomposition found in a graph ([`recognise`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recognised {
    /// The function.
    pub f: UnaryFn,
    /// The node holding `f(x)`.
    pub root: NodeId,
    /// Every node of the decomposition but `x`, `root` included (the
    /// constants and their broadcasts too), in id order.
    pub nodes: Vec<NodeId>,
}

/// The first function of `fns` whose decomposition ([`elementwise::unary`]
/// with an operand of `x`'s dtype) `g` computes from `x`, every use of `x`
/// and of the decomposition's inner nodes inside it (module doc); `users`
/// is `g.consumers()`. `None` when no function of `fns` matches (or none
/// decomposes for `x`'s dtype).
pub fn recognise(g: &Graph, users: &[Vec<NodeId>], x: NodeId, fns: &[UnaryFn]) -> Option<Recognised> {
    fns.iter().find_map(|&f| {
        let mut t = Graph::new(f.name());
        let tx = t.input("x", g.dtype(x), &[]).ok()?;
        let root = elementwise::unary(&mut t, f, tx).ok()?;
        if root == tx {
            return None;
        }
        // The result is at most the pattern's size away from `x`.
        let mut seen = BTreeSet::from([x]);
        let mut frontier = vec![x];
        for _ in 0..t.len() {
            let mut next = Vec::new();
            for n in frontier {
                for &u in &users[n.index()] {
                    if seen.insert(u) {
                        next.push(u);
                    }
                }
            }
            frontier = next;
        }
        seen.into_iter().find_map(|candidate| {
            let mut m = Matcher { g, t: &t, map: vec![None; t.len()], splats: Vec::new() };
            m.map[tx.index()] = Some(x);
            if !m.matches(candidate, root) {
                return None;
            }
            let matched = m.map.iter().flatten().chain(&m.splats);
            let nodes: BTreeSet<NodeId> = matched.copied().filter(|&n| n != x).collect();
            let inside = |n: NodeId| users[n.index()].iter().all(|u| nodes.contains(u));
            let closed = inside(x) && nodes.iter().all(|&n| n == candidate || inside(n));
            closed.then(|| Recognised { f, root: candidate, nodes: nodes.into_iter().collect() })
        })
    })
}

/// A match of the pattern graph `t` in `g`: `map` gives each pattern node
/// the graph node it matched; `splats` holds the movements of matched
/// constants' splats, which have no pattern node.
struct Matcher<'a> {
    g: &'a Graph,
    t: &'a Graph,
    map: Vec<Option<NodeId>>,
    splats: Vec<NodeId>,
}

impl Matcher<'_> {
    /// Whether graph node `n` computes pattern node `p` (module doc),
    /// recording the match of `p` and its operands.
    fn matches(&mut self, n: NodeId, p: NodeId) -> bool {
        if let Some(m) = self.map[p.index()] {
            return m == n;
        }
        if self.g.dtype(n) != self.t.dtype(p) {
            return false;
        }
        let (gn, tn) = (self.g.node(n), self.t.node(p));
        let ok = match (constant(self.g, n), &tn.op) {
            (Some((c, at)), Op::Const { value }) => {
                // The splat's `CONST` and movements below `n`.
                let mut id = n;
                while id != at {
                    id = self.g.node(id).src[0];
                    self.splats.push(id);
                }
                c.to_bits() == value.to_bits()
            }
            (_, Op::Const { .. }) | (_, Op::Input { .. }) => false,
            (_, op) if *op != gn.op || gn.src.len() != tn.src.len() => false,
            (_, op) => {
                let (gs, ts) = (gn.src.clone(), tn.src.clone());
                let saved = (self.map.clone(), self.splats.len());
                let commutes = matches!(op, Op::Binary(BinaryOp::Add | BinaryOp::Mul | BinaryOp::Max | BinaryOp::Min));
                if gs.iter().zip(&ts).all(|(&a, &b)| self.matches(a, b)) {
                    true
                } else if commutes {
                    self.map = saved.0;
                    self.splats.truncate(saved.1);
                    self.matches(gs[1], ts[0]) && self.matches(gs[0], ts[1])
                } else {
                    false
                }
            }
        };
        if ok {
            self.map[p.index()] = Some(n);
        }
        ok
    }
}

/// The value of `id` when it is a `CONST` reached through `RESHAPE`s and
/// `EXPAND`s, with the `CONST` node.
fn constant(g: &Graph, mut id: NodeId) -> Option<(f64, NodeId)> {
    loop {
        match &g.node(id).op {
            Op::Const { value } => return Some((*value, id)),
            Op::Reshape | Op::Expand => id = g.node(id).src[0],
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    /// `f(x)` for each function on an `f16[4, 8]` input, and a use of `x`
    /// outside the decomposition.
    fn graph(f: UnaryFn, dtype: DType, leak: bool) -> (Graph, NodeId, NodeId) {
        let mut g = Graph::new("g");
        let shape = [crate::sym::Dim::int(4), crate::sym::Dim::int(8)];
        let x = g.input("x", dtype, &shape).unwrap();
        let y = elementwise::unary(&mut g, f, x).unwrap();
        let y = if leak { g.binary(BinaryOp::Add, y, x).unwrap() } else { y };
        (g, x, y)
    }

    const FNS: [UnaryFn; 4] = [UnaryFn::Silu, UnaryFn::Gelu, UnaryFn::GeluTanh, UnaryFn::Tanh];

    /// Each function's decomposition is found as itself, whole, in f32 and
    /// in f16 (whose decomposition computes in f32 between two casts).
    #[test]
    fn each_decomposition_is_recognised_as_itself() {
        for dtype in [DType::F32, DType::F16] {
            for f in FNS {
                let (g, x, y) = graph(f, dtype, false);
                let r = recognise(&g, &g.consumers(), x, &FNS).unwrap_or_else(|| panic!("{f:?} {dtype}"));
                assert_eq!((r.f, r.root), (f, y), "{dtype}");
                // Every node but the input.
                assert_eq!(r.nodes.len(), g.len() - 1, "{f:?} {dtype}");
            }
        }
    }

    /// A decomposition whose input is used elsewhere, or a function not
    /// asked for, is not recognised; `sigmoid(x) * x` is SiLU.
    #[test]
    fn only_a_whole_decomposition_of_a_listed_function_is() {
        let (g, x, _) = graph(UnaryFn::Silu, DType::F32, true);
        assert_eq!(recognise(&g, &g.consumers(), x, &FNS), None);
        let (g, x, _) = graph(UnaryFn::Sigmoid, DType::F32, false);
        assert_eq!(recognise(&g, &g.consumers(), x, &FNS), None);
        let (g, x, _) = graph(UnaryFn::Gelu, DType::F32, false);
        assert_eq!(recognise(&g, &g.consumers(), x, &[UnaryFn::GeluTanh, UnaryFn::Silu]), None);

        let mut g = Graph::new("g");
        let x = g.input("x", DType::F32, &[crate::sym::Dim::int(3)]).unwrap();
        let s = elementwise::unary(&mut g, UnaryFn::Sigmoid, x).unwrap();
        let y = g.binary(BinaryOp::Mul, s, x).unwrap();
        let r = recognise(&g, &g.consumers(), x, &FNS).unwrap();
        assert_eq!((r.f, r.root), (UnaryFn::Silu, y));
    }
}

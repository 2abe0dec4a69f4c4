//! Brute force: what each statement point of a concrete graph reads,
//! written from the op definitions (`tiny/op.rs`) by enumerating points —
//! no isl, no IndexBook. Movement ops map an index back through
//! `naive::source_index`, the naive evaluator's reading of the definitions.
//!
//! A value `v` of shape `s` has one statement point per element, except a
//! `REDUCE`, which has one per (output element, reduce point): the output
//! index followed by the reduced source axes in ascending axis order (the
//! Poly-View's statement `S_v[i0, …]`, `poly` module doc).

use std::collections::BTreeSet;

use tgc_core::tiny::{Graph, NodeId, Op};
use tgc_core::DType;

use crate::naive;

/// A point of a statement or an element of a tensor.
pub type Point = Vec<i64>;

/// The concrete shape of `v`.
pub fn shape(g: &Graph, v: NodeId) -> Vec<usize> {
    g.shape(v).iter().map(|d| d.as_int().expect("a concrete graph") as usize).collect()
}

/// The extents of the reduce axes of `v` (empty unless a `REDUCE`).
pub fn reduce_extents(g: &Graph, v: NodeId) -> Vec<usize> {
    match &g.node(v).op {
        Op::Reduce { axes, .. } => {
            let src = shape(g, g.node(v).src[0]);
            (0..src.len()).filter(|k| axes.contains(k)).map(|k| src[k]).collect()
        }
        _ => Vec::new(),
    }
}

/// Every index of `extents`, row-major.
pub fn boxed(extents: &[usize]) -> Vec<Point> {
    let n: usize = extents.iter().product();
    (0..n).map(|l| naive::unravel(l, extents).into_iter().map(|x| x as i64).collect()).collect()
}

/// Every statement point of `v`.
pub fn statement(g: &Graph, v: NodeId) -> Vec<Point> {
    let mut ext = shape(g, v);
    ext.extend(reduce_extents(g, v));
    boxed(&ext)
}

/// The statement points of `v` that write element `e`.
pub fn writers(g: &Graph, v: NodeId, e: &[i64]) -> Vec<Point> {
    boxed(&reduce_extents(g, v))
        .into_iter()
        .map(|r| {
            let mut p = e.to_vec();
            p.extend(r);
            p
        })
        .collect()
}

/// The `(source, element)` pairs statement point `p` of `v` reads; none
/// where a `PAD` fills in its value.
pub fn reads(g: &Graph, v: NodeId, p: &[i64]) -> Vec<(NodeId, Point)> {
    let n = g.node(v);
    let out = shape(g, v);
    let idx: Vec<usize> = p[..out.len()].iter().map(|&x| x as usize).collect();
    match &n.op {
        Op::Input { .. } | Op::Const { .. } => Vec::new(),
        Op::Reduce { axes, .. } => {
            let src = shape(g, n.src[0]);
            let (mut kept, mut red) = (p[..out.len()].iter(), p[out.len()..].iter());
            let e =
                (0..src.len()).map(|k| if axes.contains(&k) { *red.next().unwrap() } else { *kept.next().unwrap() });
            vec![(n.src[0], e.collect())]
        }
        op if op.is_movement() => {
            let src = shape(g, n.src[0]);
            match naive::source_index(op, &idx, &out, &src).expect("the generator makes valid movements") {
                Some(j) => vec![(n.src[0], j.into_iter().map(|x| x as i64).collect())],
                None => Vec::new(),
            }
        }
        // Element-wise: every source at the same index.
        _ => n.src.iter().map(|&s| (s, p.to_vec())).collect(),
    }
}

/// The flow dependences of edge `from -> to` (`from != to`): every
/// `(writer of e in from, point of to)` where the point reads element `e`.
pub fn flow(g: &Graph, from: NodeId, to: NodeId) -> BTreeSet<(Point, Point)> {
    let mut out = BTreeSet::new();
    for c in statement(g, to) {
        for (s, e) in reads(g, to, &c) {
            if s == from {
                for w in writers(g, from, &e) {
                    out.insert((w, c.clone()));
                }
            }
        }
    }
    out
}

/// A `REDUCE`'s accumulator dependences: `(o, r) -> (o, r')` with
/// `r <lex r'`.
pub fn accumulator(g: &Graph, v: NodeId) -> BTreeSet<(Point, Point)> {
    let out = shape(g, v).len();
    let pts = statement(g, v);
    let mut deps = BTreeSet::new();
    for a in &pts {
        for b in &pts {
            if a[..out] == b[..out] && a[out..] < b[out..] {
                deps.insert((a.clone(), b.clone()));
            }
        }
    }
    deps
}

/// The elements of `producer` that the statement points `from` of
/// `consumer` need, through every path of reads.
pub fn footprint(g: &Graph, producer: NodeId, consumer: NodeId, from: &[Point]) -> BTreeSet<Point> {
    let mut need = BTreeSet::new();
    let mut seen: BTreeSet<(NodeId, Point)> = BTreeSet::new();
    let mut work: Vec<(NodeId, Point)> = from.iter().map(|p| (consumer, p.clone())).collect();
    while let Some((v, p)) = work.pop() {
        for (s, e) in reads(g, v, &p) {
            if s == producer {
                need.insert(e);
            } else if s.index() > producer.index() && seen.insert((s, e.clone())) {
                work.extend(writers(g, s, &e).into_iter().map(|w| (s, w)));
            }
        }
    }
    need
}

/// Nodes that read `producer` directly or through others, up to `consumer`.
pub fn reaches(g: &Graph, producer: NodeId, consumer: NodeId) -> bool {
    let mut on = vec![false; g.len()];
    on[producer.index()] = true;
    for v in g.ids().filter(|v| v.index() > producer.index() && v.index() <= consumer.index()) {
        on[v.index()] = g.node(v).src.iter().any(|s| on[s.index()]);
    }
    on[consumer.index()]
}

/// Bytes per element, as `DType` sizes are defined (`spec/002` §1).
pub fn element_bytes(dt: DType) -> u64 {
    match dt {
        DType::Bool => 1,
        DType::F16 | DType::BF16 => 2,
        DType::F32 | DType::I32 => 4,
    }
}

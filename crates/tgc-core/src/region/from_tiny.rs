//! Region formation v1 (`000` §4.1): Tiny IR → [`Regions`].
//!
//! 1. [`grouping::group`] decides which values are stored and which
//!    `REDUCE` each group accumulates (element-wise chains fused, `mul →
//!    reduce → epilogue` in one group).
//! 2. With feature `poly`, Poly Core decides compute-at fusions
//!    (`poly_core::compute_at_fusions`): a stored `REDUCE` whose only reader
//!    chain reaches another group's accumulator through element-wise and
//!    movement nodes joins that group, computed at the accumulator's reads,
//!    when `can_compute_at` accepts one consumer point and
//!    `min_buffer_for_edge` is not global memory (`003`'s Conv → ReLU →
//!    MaxPool). Every candidate it rejects is a [`Stop`] with its reason.
//!    Legal candidates then pass the §4.2 threshold and the differential
//!    cost `Δtime < 0` of §4.1 step 4 / §6 (`region::cost`, on the CPU
//!    row: regions are lowered by the CPU backend), and `region::select`
//!    chooses among them (exact ILP on windows of up to 30 nodes, backward
//!    greedy with one-step rollback beyond).
//! 3. Each group becomes a compute region whose body is its root and every
//!    deferred value it reads (closure over the sources), and each graph
//!    output not stored by its own region becomes a copy region.

use crate::diag::DResult;
use crate::index_book::{self, IndexBook};
use crate::tiny::{self, Graph, NodeId};

use super::grouping::{self, Formation, Grouping};
use super::{Dest, Former, How, Let, LocalEdge, Materialize, MemRef, Operand, Region, RegionOutput, Regions};

/// The front of the pipeline for one graph, built and verified once and
/// read by everything after it (the CPU lowering, `region.json`,
/// `poly_view.json` and the dumps of `pipeline::compile_cpu`): the
/// IndexBook (`000` §3) and the regions (`000` §4).
#[derive(Clone, Debug)]
pub struct Front {
    pub book: IndexBook,
    pub regions: Regions,
}

/// Builds [`Front`]: verifies the Tiny IR, builds and verifies the
/// IndexBook, forms the regions ([`form_with`], `fuse` and `grouping` as
/// there) and verifies them.
///
/// Errors: the Tiny IR verifier's first error; those of building the
/// IndexBook and of [`form_with`]; `Internal` when the IndexBook or Region
/// verifier fails.
pub fn front(g: &Graph, fuse: bool, grouping: Grouping) -> DResult<Front> {
    if let Some(e) = tiny::verify::verify(g).into_iter().next() {
        return Err(e);
    }
    let book = index_book::build(g)?;
    index_book::verify::check(g, &book)?;
    let regions = form_with(g, &book, fuse, grouping)?;
    if let Some(e) = super::verify::verify(g, &regions).into_iter().next() {
        return Err(crate::Diagnostic { message: format!("Region verifier: {}", e.message), ..e });
    }
    Ok(Front { book, regions })
}

/// A producer `REDUCE` computed at the reads of accumulator `consumer`.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Fusion {
    pub producer: NodeId,
    pub consumer: NodeId,
    pub edge: LocalEdge,
}

/// Forms the regions of a verified graph whose IndexBook is `book`.
///
/// Errors: those of building the Poly-View are not errors here (formation
/// falls back to the grouping and records why); `Internal` when isl fails
/// on the view's own objects.
pub fn form(g: &Graph, book: &IndexBook) -> DResult<Regions> {
    form_with(g, book, true, Grouping::default())
}

/// [`form`], with step 2 (Poly Core's compute-at fusions) skipped when
/// `fuse` is false: the regions are then the grouping's alone, as without
/// feature `poly` (the unfused baseline of `examples/bench_conv_pool.rs`);
/// `grouping` the target's choices of the grouping rule.
pub fn form_with(g: &Graph, book: &IndexBook, fuse: bool, grouping: Grouping) -> DResult<Regions> {
    let f = grouping::group(g, book, grouping)?;
    #[cfg(feature = "poly")]
    let (former, fusions, stops) = if !fuse {
        (Former::Grouping, Vec::<Fusion>::new(), Vec::new())
    } else {
        let mut stops = Vec::new();
        let fusions = super::poly_core::compute_at_fusions(g, book, &f, &super::cost::CPU, &mut stops)?;
        (Former::PolyCore, fusions, stops)
    };
    #[cfg(not(feature = "poly"))]
    let (former, fusions, stops) = {
        let _ = fuse;
        (Former::Grouping, Vec::<Fusion>::new(), Vec::new())
    };
    let mut regions = Vec::new();
    let mut stored: Vec<Option<usize>> = vec![None; g.len()];
    for kp in &f.kernels {
        if fusions.iter().any(|x| x.producer == kp.root) {
            continue;
        }
        let fused: Vec<&Fusion> = fusions.iter().filter(|x| Some(x.consumer) == kp.reduce).collect();
        let region = compute_region(g, &f, kp.root, kp.reduce, &fused, regions.len());
        stored[kp.root.index()] = Some(regions.len());
        regions.push(region);
    }
    for (k, o) in g.outputs.iter().enumerate() {
        let own = stored[o.node.index()].filter(|&r| {
            regions[r].outputs[0].dest == Dest::Temp && g.outputs.iter().position(|p| p.node == o.node) == Some(k)
        });
        if let Some(r) = own {
            regions[r].outputs[0].dest = Dest::GraphOutput(k);
            continue;
        }
        let memref = MemRef::of(g, o.node);
        regions.push(Region {
            name: format!("r{}", regions.len()),
            inputs: vec![Operand { node: o.node, memref: memref.clone() }],
            outputs: vec![RegionOutput {
                node: o.node,
                dest: Dest::GraphOutput(k),
                memref,
                materialize: Materialize::Gmem,
            }],
            body: Vec::new(),
            local_edges: Vec::new(),
        });
    }
    Ok(Regions { graph: g.name.clone(), former, regions, stops })
}

/// The compute region storing `root`: its body is the closure of `root`
/// over deferred values and the fused producers.
fn compute_region(
    g: &Graph,
    f: &Formation,
    root: NodeId,
    reduce: Option<NodeId>,
    fused: &[&Fusion],
    index: usize,
) -> Region {
    let n = g.len();
    let mut in_body = vec![false; n];
    let mut is_input = vec![false; n];
    let mut stack = vec![root];
    in_body[root.index()] = true;
    while let Some(v) = stack.pop() {
        for &s in &g.node(v).src {
            let i = s.index();
            if in_body[i] || is_input[i] {
                continue;
            }
            let deferred = !f.materialised[i] || fused.iter().any(|x| x.producer == s);
            if deferred {
                in_body[i] = true;
                stack.push(s);
            } else {
                is_input[i] = true;
            }
        }
    }
    let how = |v: NodeId| {
        if Some(v) == reduce {
            How::Accumulate
        } else if matches!(g.node(v).op, tiny::Op::Scan { .. }) {
            How::Scan
        } else if fused.iter().any(|x| x.producer == v) {
            How::ComputeAt
        } else {
            How::Inline
        }
    };
    let body = (0..n as u32)
        .map(NodeId)
        .filter(|v| in_body[v.index()])
        .map(|v| Let {
            node: v,
            materialize: if v == root { Materialize::Gmem } else { Materialize::Deferred },
            how: how(v),
        })
        .collect();
    let inputs = (0..n as u32)
        .map(NodeId)
        .filter(|v| is_input[v.index()])
        .map(|v| Operand { node: v, memref: MemRef::of(g, v) })
        .collect();
    let memref = MemRef::of(g, root);
    Region {
        name: format!("r{index}"),
        inputs,
        outputs: vec![RegionOutput { node: root, dest: Dest::Temp, memref, materialize: Materialize::Gmem }],
        body,
        local_edges: fused.iter().map(|x| x.edge.clone()).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index_book;
    use crate::test_graphs::gemm_bias_relu;
    use crate::DType;

    #[test]
    fn gemm_epilogue_is_one_region() {
        let g = gemm_bias_relu(DType::F32, "M", "N", "K");
        let r = form(&g, &index_book::build(&g).unwrap()).unwrap();
        assert_eq!(r.regions.len(), 1);
        assert_eq!(r.regions[0].outputs[0].dest, Dest::GraphOutput(0));
        assert!(r.regions[0].accumulator().is_some());
        assert!(super::super::verify::verify(&g, &r).is_empty());
    }

    #[test]
    fn the_verifier_rejects_corrupted_regions() {
        let g = gemm_bias_relu(DType::F32, "M", "N", "K");
        let good = form(&g, &index_book::build(&g).unwrap()).unwrap();
        let mut r = good.clone();
        r.regions[0].body.last_mut().unwrap().materialize = Materialize::Deferred;
        assert!(!super::super::verify::verify(&g, &r).is_empty());
        let mut r = good.clone();
        r.regions[0].inputs.clear();
        assert!(!super::super::verify::verify(&g, &r).is_empty());
        let mut r = good.clone();
        r.regions[0].outputs[0].memref.alignment = 3;
        assert!(!super::super::verify::verify(&g, &r).is_empty());
        let mut r = good;
        r.regions[0].body[0].how = How::ComputeAt;
        assert!(!super::super::verify::verify(&g, &r).is_empty());
    }

    /// Softmax's sum feeds every column of the next GEMM: Poly Core says
    /// `gmem`, so it stays stored, and the dump says why.
    #[cfg(feature = "poly")]
    #[test]
    fn a_reduction_broadcast_is_not_computed_at() {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/graphs/attention.tgc"))
            .unwrap();
        let g = crate::pipeline::load(&text, crate::pipeline::Format::Dsl, None).unwrap().graph;
        let r = form(&g, &index_book::build(&g).unwrap()).unwrap();
        assert!(r.regions.iter().all(|x| x.local_edges.is_empty()));
        assert!(r.stops.iter().any(|s| matches!(s.reason, super::super::StopReason::NeedsGmem(_))), "{:?}", r.stops);
    }
}

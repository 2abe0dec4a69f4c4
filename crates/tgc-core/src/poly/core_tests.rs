//! Poly Core answers on the examples: halos of conv and pool, the GEMM
//! epilogue, buffer kinds, reduction axes, fusable groups. Every number here
//! comes out of isl (`dim_min`/`dim_max` of pre-images, deltas, single-
//! valuedness of element relations).

use super::core::*;
use super::pattern_tests::{dsl, example};
use super::tests::view_of;
use super::*;
use crate::sym::Dim;
use crate::test_graphs::gemm_bias_relu;
use crate::tiny::{Graph, Output};

const W: i64 = WHOLE;

fn id(v: &PolyView<'_>, name: &str) -> NodeId {
    v.find(name).unwrap_or_else(|| panic!("no block {name}")).node
}

fn of_kind(v: &PolyView<'_>, kind: BlockKind) -> Vec<NodeId> {
    v.blocks.iter().filter(|b| b.kind == kind).map(|b| b.node).collect()
}

fn ok(v: &PolyView<'_>, p: NodeId, c: NodeId, tile: &[i64]) -> ComputeAt {
    can_compute_at(v, p, c, tile).unwrap().unwrap_or_else(|r| panic!("not ok: {r}"))
}

/// `conv_relu_pool` with a 3×3 pool window (stride 2, overlapping): the
/// pooled map is 15×15.
fn conv_pool3() -> Graph {
    dsl("graph conv_pool3(x: f32[1, 3, 32, 32], w: f32[8, 3, 3, 3]) -> (y: f32[1, 8, 15, 15]) {\n    \
         c = conv2d(x, w, stride=[1, 1], pad=[1, 1])\n    r = relu(c)\n    \
         y = maxpool2d(r, kernel=[3, 3], stride=[2, 2])\n    return y\n}\n")
}

/// Conv 3×3, stride 1, pad 1: an 8×8 output tile needs a 10×10 input
/// patch, one row and column either side of its own.
#[test]
fn conv3x3_pad1_has_a_halo_of_one() {
    let ctx = Ctx::new();
    let (_, v) = view_of(&ctx, &example("conv_relu_pool.tgc"));
    let conv = of_kind(&v, BlockKind::ContractionPattern)[0];
    // S_conv[n, g, k, oy, ox, c, ky, kx]: one image, all 8 channels.
    let at = ok(&v, id(&v, "x"), conv, &[1, W, 8, 8, 8]);
    assert_eq!(at.halo.per_axis, [(0, 0), (0, 0), (1, 1), (1, 1)]);
    assert_eq!(at.needed, [(1, 1), (0, 2), (7, 16), (7, 16)]);
    assert_eq!(at.step, [1, 0, 8, 8]);
    assert_eq!(at.halo.bytes, 3 * 10 * 10 * 4);
    // From the padded tensor: the same patch, in padded coordinates.
    let pad = v.blocks[1 + id(&v, "b").index()].node;
    let at = ok(&v, pad, conv, &[1, W, 8, 8, 8]);
    assert_eq!((at.needed[2], at.halo.per_axis[2]), ((8, 17), (0, 2)));
    // A window reused by the next tile: a ring of 3 rows (kernel height).
    let b = min_buffer_for_edge(&v, pad, conv, &[1, W, 8, 8, 8]).unwrap();
    assert_eq!((b.kind, b.bytes), (BufferKind::SmemRing { depth: 3 }, Some(3 * 3 * 10 * 4)));
    // An input is a kernel argument.
    assert_eq!(min_buffer_for_edge(&v, id(&v, "x"), conv, &[1]).unwrap().kind, BufferKind::Gmem);
}

/// GEMM + bias + ReLU: the epilogue reads the accumulator point for point.
#[test]
fn gemm_epilogue_has_no_halo_and_stays_in_registers() {
    let ctx = Ctx::new();
    let g = gemm_bias_relu(DType::F32, "64", "64", "64");
    let (_, v) = view_of(&ctx, &g);
    let acc = of_kind(&v, BlockKind::ContractionPattern)[0];
    let relu = v.blocks.last().unwrap().node;
    let at = ok(&v, acc, relu, &[16, 16]);
    assert_eq!(at.halo, Halo { bytes: 16 * 16 * 4, per_axis: vec![(0, 0), (0, 0)] });
    assert_eq!(at.needed, [(16, 31), (16, 31)]);
    let b = min_buffer_for_edge(&v, acc, relu, &[16, 16]).unwrap();
    assert_eq!((b.kind, b.bytes), (BufferKind::Reg, Some(1024)));
    // The MUL feeds the accumulator inside a tile that keeps K whole.
    let mul = v.blocks[acc.index() - 1].node;
    assert_eq!(ok(&v, mul, acc, &[16, 16]).halo.per_axis, [(0, 0), (0, 0), (0, 0)]);
    assert_eq!(min_buffer_for_edge(&v, mul, acc, &[16, 16]).unwrap().kind, BufferKind::Reg);
}

/// MaxPool 2×2 stride 2 after conv: a t×t pool tile needs a 2t×2t conv
/// tile, no halo, and every conv value feeds one pool output (registers, as
/// in `003`'s fused kernel).
#[test]
fn pool2x2_stride2_needs_twice_the_tile() {
    let ctx = Ctx::new();
    let (_, v) = view_of(&ctx, &example("conv_relu_pool.tgc"));
    let conv = of_kind(&v, BlockKind::ContractionPattern)[0];
    let (r, y) = (id(&v, "r"), id(&v, "y"));
    for t in [2, 4] {
        let at = ok(&v, conv, y, &[1, 8, t, t]);
        assert_eq!(at.extents(), [1, 1, 8, 2 * t, 2 * t], "t = {t}");
        assert!(at.halo.per_axis.iter().all(|&h| h == (0, 0)), "{:?}", at.halo);
        assert_eq!(at.halo.bytes, (8 * 4 * t * t * 4) as u64);
        let at = ok(&v, r, y, &[1, 8, t, t]);
        assert_eq!(at.extents(), [1, 8, 2 * t, 2 * t]);
    }
    let b = min_buffer_for_edge(&v, r, y, &[1, 8, 4, 4]).unwrap();
    assert_eq!((b.kind, b.bytes), (BufferKind::Reg, Some(8 * 8 * 8 * 4)));
}

/// MaxPool 3×3 stride 2: windows overlap by one row, so a t×t pool tile
/// needs (2t+1)×(2t+1) conv values, a halo of one above, and the row
/// shared with the next tile calls for a ring of two rows.
#[test]
fn pool3x3_stride2_overlaps_by_one() {
    let ctx = Ctx::new();
    let (_, v) = view_of(&ctx, &conv_pool3());
    let conv = of_kind(&v, BlockKind::ContractionPattern)[0];
    let (r, y) = (id(&v, "r"), id(&v, "y"));
    for t in [2, 4] {
        let at = ok(&v, conv, y, &[1, 8, t, t]);
        assert_eq!(at.extents(), [1, 1, 8, 2 * t + 1, 2 * t + 1], "t = {t}");
        assert_eq!(at.halo.per_axis[3..], [(0, 1), (0, 1)]);
        assert_eq!(at.step[3..], [2 * t, 2 * t]);
    }
    let b = min_buffer_for_edge(&v, r, y, &[1, 8, 4, 4]).unwrap();
    assert_eq!((b.kind, b.bytes), (BufferKind::SmemRing { depth: 2 }, Some(2 * 8 * 9 * 4)));
}

/// A tile that cuts a reduction axis does not finish its outputs.
#[test]
fn splitting_a_reduction_is_not_ok() {
    let ctx = Ctx::new();
    let (_, v) = view_of(&ctx, &example("conv_relu_pool.tgc"));
    let conv = of_kind(&v, BlockKind::ContractionPattern)[0];
    let (r, y) = (id(&v, "r"), id(&v, "y"));
    let no = can_compute_at(&v, r, y, &[1, 8, 4, 4, 1]).unwrap();
    assert_eq!(no, Err(Reason::SplitsReduction { axis: 4, tile: 1, extent: Some(2) }));
    let no = can_compute_at(&v, id(&v, "x"), conv, &[1, W, 8, 8, 8, 1]).unwrap();
    assert_eq!(no, Err(Reason::SplitsReduction { axis: 5, tile: 1, extent: Some(3) }));
    assert_eq!(min_buffer_for_edge(&v, r, y, &[1, 8, 4, 4, 1]).unwrap().kind, BufferKind::Gmem);
    // No path from the bias to the conv's accumulator.
    assert_eq!(can_compute_at(&v, id(&v, "b"), conv, &[]).unwrap(), Err(Reason::NoDependence));
}

/// Softmax's max is broadcast back over the row it reduced: every tile of
/// the consumer waits for the whole reduction.
#[test]
fn a_reduction_broadcast_goes_through_global_memory() {
    let ctx = Ctx::new();
    let (_, v) = view_of(&ctx, &example("attention.tgc"));
    let a = analyze(&v, &[]).unwrap();
    // The broadcast edges, traced back through their movement chains.
    let mut hits = 0;
    for h in a.barriers.iter().filter(|h| h.relation == Relation::OneToMany) {
        let mut from = &v.blocks[h.from.index()];
        while from.kind == BlockKind::MovementAffine {
            from = &v.blocks[from.scop().unwrap().reads[0].src.index()];
        }
        if from.kind != BlockKind::Reduce {
            continue;
        }
        hits += 1;
        let b = min_buffer_for_edge(&v, from.node, h.to, &[]).unwrap();
        assert_eq!(b.kind, BufferKind::Gmem, "{} -> {}", from.name, v.blocks[h.to.index()].name);
    }
    assert_eq!(hits, 2, "softmax's max and sum");
}

/// Reduction axes from dependence deltas are the IndexBook's reduce axes;
/// tails and barrier hints of GEMM.
#[test]
fn analyze_finds_reductions_tails_and_barriers() {
    let ctx = Ctx::new();
    for g in [example("conv_relu_pool.tgc"), example("attention.tgc"), conv_pool3()] {
        let (_, v) = view_of(&ctx, &g);
        let a = analyze(&v, &[]).unwrap();
        for (b, ba) in v.blocks.iter().zip(&a.blocks) {
            let book: Vec<usize> = b
                .axes
                .iter()
                .enumerate()
                .filter(|(_, x)| x.kind == crate::index_book::AxisKind::Reduce)
                .map(|(k, _)| k)
                .collect();
            assert_eq!(ba.reduction, book, "{}", b.name);
            assert!(ba.affine);
        }
    }
    let (_, v) = view_of(&ctx, &gemm_bias_relu(DType::F32, "64", "48", "32"));
    let acc = of_kind(&v, BlockKind::ContractionPattern)[0];
    let a = analyze(&v, &[16, 16, 16]).unwrap();
    let ba = &a.blocks[acc.index()];
    assert_eq!((ba.parallel.clone(), ba.reduction.clone()), (vec![0, 1], vec![2]));
    assert!(ba.tail.is_empty());
    let a = analyze(&v, &[24, 24, 24]).unwrap();
    assert_eq!(
        a.blocks[acc.index()].tail,
        [TailAxis { axis: 0, extent: Some(64) }, TailAxis { axis: 2, extent: Some(32) }]
    );
    // The MUL -> accumulator edge sums (many-to-one); the expands broadcast.
    let kinds: Vec<Relation> = a.barriers.iter().map(|h| h.relation).collect();
    assert!(a.barriers.iter().any(|h| h.to == acc && h.relation == Relation::ManyToOne), "{kinds:?}");
    assert!(kinds.contains(&Relation::OneToMany));
    // Symbolic sizes are tails for any tile.
    let (_, v) = view_of(&ctx, &crate::test_graphs::gemm());
    let a = analyze(&v, &[]).unwrap();
    assert_eq!(a.blocks[8].tail.len(), 3);
}

#[test]
fn fusable_groups_follow_legal_compute_at() {
    let ctx = Ctx::new();
    let (_, v) = view_of(&ctx, &gemm_bias_relu(DType::F32, "64", "64", "64"));
    let groups = make_fusable_groups(&v, 16).unwrap();
    let names: Vec<Vec<&str>> =
        groups.iter().map(|g| g.iter().map(|&b| v.blocks[b.index()].name.as_str()).collect()).collect();
    assert_eq!(groups.len(), 1, "{names:?}");
    let (_, v) = view_of(&ctx, &example("conv_relu_pool.tgc"));
    let groups = make_fusable_groups(&v, 4).unwrap();
    let names: Vec<Vec<&str>> =
        groups.iter().map(|g| g.iter().map(|&b| v.blocks[b.index()].name.as_str()).collect()).collect();
    assert_eq!(groups.len(), 1, "{names:?}");
}

/// A tile whose reads all land in a `PAD`'s fill needs no producer element:
/// `NothingNeeded` at that tile (isl bounds an empty set by NaN, which was
/// read as "unbounded"), and `NoDependence` when no consumer point reads the
/// producer at all (found by `tests/poly_core_prop`).
#[test]
fn a_tile_that_reads_only_padding_needs_nothing() {
    let mut g = Graph::new("pad_only");
    let x = g.input("x", DType::F32, &[Dim::int(6)]).unwrap();
    let p = g.pad(x, &[(Dim::int(3), Dim::int(0))], 0.0).unwrap();
    let s = g.shrink(p, &[Dim::int(0)], &[Dim::int(2)], &[Dim::int(1)]).unwrap();
    g.outputs.push(Output { name: "y".into(), node: s });
    let ctx = Ctx::new();
    let (_, v) = view_of(&ctx, &g);
    // Tile 2 of 9: the interior tile [2, 4) reads x[0]; the origin [0, 2) only padding.
    assert_eq!(can_compute_at(&v, x, p, &[2]).unwrap(), Err(Reason::NothingNeeded { position: vec![0] }));
    assert_eq!(ok(&v, x, p, &[4]).needed, [(0, 0)], "one tile, which reads x[0]");
    // The SHRINK keeps only the padding.
    assert_eq!(can_compute_at(&v, x, s, &[]).unwrap(), Err(Reason::NoDependence));
    assert_eq!(min_buffer_for_edge(&v, x, s, &[]).unwrap().kind, BufferKind::Gmem);
}

/// The halos of the module doc's examples: a stride-2 read needs less than
/// its share at the top (`x[2·i]`, tile 4: box `[8, 14]` of `[8, 15]`), a
/// halving read with an odd tile needs one below and one less above
/// (`x[i / 2]`, tile 3: box `[1, 2]` of `[2, 3]`).
#[test]
fn strided_and_coarsening_reads_have_negative_halos() {
    let mut g = Graph::new("strided");
    let x = g.input("x", DType::F32, &[Dim::int(32)]).unwrap();
    let e = g.unary(crate::tiny::UnaryOp::Neg, x).unwrap();
    let s = g.shrink(e, &[Dim::int(0)], &[Dim::int(32)], &[Dim::int(2)]).unwrap();
    let y = g.unary(crate::tiny::UnaryOp::Neg, s).unwrap();
    let half = g.view(e, &[Dim::int(64)], &[crate::affine::AffExpr::parse("floor(i0 / 2)").unwrap()]).unwrap();
    let z = g.unary(crate::tiny::UnaryOp::Neg, half).unwrap();
    g.outputs.push(Output { name: "y".into(), node: y });
    g.outputs.push(Output { name: "z".into(), node: z });
    let ctx = Ctx::new();
    let (_, v) = view_of(&ctx, &g);
    let strided = ok(&v, e, y, &[4]);
    assert_eq!((strided.needed.clone(), strided.step.clone()), (vec![(8, 14)], vec![8]));
    assert_eq!(strided.halo.per_axis, [(0, -1)]);
    let coarse = ok(&v, e, z, &[3]);
    assert_eq!((coarse.needed.clone(), coarse.step.clone()), (vec![(1, 2)], vec![2]));
    assert_eq!(coarse.halo.per_axis, [(1, -1)]);
}

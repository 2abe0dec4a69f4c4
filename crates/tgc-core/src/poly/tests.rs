//! Poly-View tests: isl objects are checked semantically (`is_equal` with
//! sets and maps parsed from isl text, point counts, images of single
//! points), and every view built here passes the verifier.

use std::collections::BTreeMap;

use expect_test::expect;

use super::*;
use crate::diag::ErrorName;
use crate::fuzz::gen::{Entropy, SplitMix64};
use crate::index_book::{self, IndexBook};
use crate::sym::Dim;
use crate::test_graphs::{gemm, shape};
use crate::tiny::{Graph, Output, ReduceOp, UnaryOp};
use crate::DType;

/// Builds and verifies the view of `g`.
pub(super) fn view_of<'c>(ctx: &'c Ctx, g: &Graph) -> (IndexBook, PolyView<'c>) {
    let book = index_book::build(g).unwrap();
    let view = build(ctx, g, &book).unwrap();
    let errs = verify::verify(g, &book, &view, &Options::default());
    assert!(errs.is_empty(), "{errs:?}\n{}", dump(&view));
    (book, view)
}

fn scop<'v, 'c>(view: &'v PolyView<'c>, name: &str) -> &'v Scop<'c> {
    view.find(name).and_then(Block::scop).unwrap_or_else(|| panic!("no SCoP block {name}"))
}

fn assert_map(m: &Map<'_>, expected: &str) {
    let e = m.ctx().map(expected).unwrap();
    assert!(m.is_equal(&e).unwrap(), "got {m}\nwant {e}");
}

fn assert_set(s: &Set<'_>, expected: &str) {
    let e = s.ctx().set(expected).unwrap();
    assert!(s.is_equal(&e).unwrap(), "got {s}\nwant {e}");
}

/// The image of one point under `m`, as a set (empty when `m` is not
/// defined there).
fn image<'c>(m: &Map<'c>, stmt: &str, point: &[i64]) -> Set<'c> {
    let p: Vec<String> = point.iter().map(|v| v.to_string()).collect();
    let at = m.ctx().set(&format!("{{ {stmt}[{}] }}", p.join(", "))).unwrap();
    m.intersect_domain(&at).and_then(|x| x.range()).unwrap()
}

pub(super) fn load_spec(file: &str, dims: &[(&str, i64)]) -> Graph {
    let path = format!("{}/../../tests/spec/{file}", env!("CARGO_MANIFEST_DIR"));
    let g = crate::tiny::json::load_json(&std::fs::read_to_string(path).unwrap()).unwrap();
    let values: BTreeMap<String, i64> = dims.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    g.bind(&values).unwrap()
}

pub(super) fn output(g: &mut Graph, name: &str, node: crate::tiny::NodeId) {
    g.outputs.push(Output { name: name.into(), node });
    g.declare_input_symbols().unwrap();
}

#[test]
fn gemm_is_a_contraction_with_plain_operands() {
    let ctx = Ctx::new();
    let (_, v) = view_of(&ctx, &gemm());
    let r = v.find("n8").unwrap();
    assert_eq!(r.kind, BlockKind::ContractionPattern);
    let c = r.contraction.as_ref().unwrap();
    let idx = |o: &Operand<'_>| o.idx.iter().map(|e| e.to_string()).collect::<Vec<_>>();
    assert_eq!((idx(&c.lhs), idx(&c.rhs)), (vec!["i0".to_string(), "i2".into()], vec!["i2".to_string(), "i1".into()]));
    assert_eq!(
        (c.out_idx.clone(), c.reduce_idx.clone()),
        (vec!["i0".to_string(), "i1".into()], vec!["i2".to_string()])
    );
    assert!(c.affine_offsets.is_empty());
    let p = c.pattern.as_ref().unwrap();
    assert_eq!((p.kind, p.batch_idx.len(), p.windows.len()), (Pattern::Matmul, 0, 0));
    let dom = "0 <= i0 < M and 0 <= i1 < N and 0 <= i2 < K";
    assert_map(&c.lhs.map, &format!("[M, K, N] -> {{ S_n8[i0, i1, i2] -> n0[i0, i2] : {dom} }}"));
    assert_map(&c.rhs.map, &format!("[M, K, N] -> {{ S_n8[i0, i1, i2] -> n1[i2, i1] : {dom} }}"));
    assert_set(&scop(&v, "n8").domain, &format!("[M, K, N] -> {{ S_n8[i0, i1, i2] : {dom} }}"));
    assert_map(&scop(&v, "n8").write, &format!("[M, K, N] -> {{ S_n8[i0, i1, i2] -> n8[i0, i1] : {dom} }}"));
    // The accumulator: the same output cell at a later k.
    let acc = v.edges.iter().find(|e| e.from == r.node && e.to == r.node).unwrap().deps.as_ref().unwrap();
    let later = format!("[M, K, N] -> {{ S_n8[i0, i1, i2] -> S_n8[i0, i1, j] : {dom} and i2 < j < K }}");
    for m in acc.flow.iter().chain(&acc.anti).chain(&acc.output) {
        assert_map(m, &later);
    }
    // A broadcast read: every n: one A element feeds N points of the product.
    let e = v.edges.iter().find(|e| v.blocks[e.to.index()].name == "n5").unwrap();
    let d = e.deps.as_ref().unwrap();
    assert!(d.anti.is_empty() && d.output.is_empty());
    assert_map(
        &d.flow[0],
        "[M, K, N] -> { S_n2[i0, 0, i2] -> S_n5[i0, j, i2] : 0 <= i0 < M and 0 <= i2 < K and 0 <= j < N }",
    );
    let all_reads = v.reads().unwrap().unwrap();
    assert_eq!(all_reads.n_map().unwrap(), 9);
}

#[test]
fn gemm_dump() {
    let ctx = Ctx::new();
    let (_, v) = view_of(&ctx, &gemm());
    expect![[r#"
        poly_view gemm
          params [M, K, N]
          context [M, K, N] -> {  : M > 0 and K > 0 and N > 0 }
          block n0 leaf
            domain [M, K, N] -> { S_n0[i0, i1] : 0 <= i0 < M and 0 <= i1 < K }
            write  [M, K, N] -> { S_n0[i0, i1] -> n0[i0, i1] }
          block n1 leaf
            domain [M, K, N] -> { S_n1[i0, i1] : 0 <= i0 < K and 0 <= i1 < N }
            write  [M, K, N] -> { S_n1[i0, i1] -> n1[i0, i1] }
          block n2 movement_affine
            domain [M, K, N] -> { S_n2[i0, i1 = 0, i2] : 0 <= i0 < M and 0 <= i2 < K }
            write  [M, K, N] -> { S_n2[i0, i1, i2] -> n2[i0, 0, i2] }
            read   [M, K, N] -> { S_n2[i0, i1, i2] -> n0[i0, i2] }
          block n3 movement_affine
            domain [M, K, N] -> { S_n3[i0, i1] : 0 <= i0 < N and 0 <= i1 < K }
            write  [M, K, N] -> { S_n3[i0, i1] -> n3[i0, i1] }
            read   [M, K, N] -> { S_n3[i0, i1] -> n1[i1, i0] }
          block n4 movement_affine
            domain [M, K, N] -> { S_n4[i0 = 0, i1, i2] : 0 <= i1 < N and 0 <= i2 < K }
            write  [M, K, N] -> { S_n4[i0, i1, i2] -> n4[0, i1, i2] }
            read   [M, K, N] -> { S_n4[i0, i1, i2] -> n3[i1, i2] }
          block n5 movement_affine
            domain [M, K, N] -> { S_n5[i0, i1, i2] : 0 <= i0 < M and 0 <= i1 < N and 0 <= i2 < K }
            write  [M, K, N] -> { S_n5[i0, i1, i2] -> n5[i0, i1, i2] }
            read   [M, K, N] -> { S_n5[i0, i1, i2] -> n2[i0, 0, i2] }
          block n6 movement_affine
            domain [M, K, N] -> { S_n6[i0, i1, i2] : 0 <= i0 < M and 0 <= i1 < N and 0 <= i2 < K }
            write  [M, K, N] -> { S_n6[i0, i1, i2] -> n6[i0, i1, i2] }
            read   [M, K, N] -> { S_n6[i0, i1, i2] -> n4[0, i1, i2] }
          block n7 ewise
            domain [M, K, N] -> { S_n7[i0, i1, i2] : 0 <= i0 < M and 0 <= i1 < N and 0 <= i2 < K }
            write  [M, K, N] -> { S_n7[i0, i1, i2] -> n7[i0, i1, i2] }
            read   [M, K, N] -> { S_n7[i0, i1, i2] -> n5[i0, i1, i2] }
            read   [M, K, N] -> { S_n7[i0, i1, i2] -> n6[i0, i1, i2] }
          block n8 contraction_pattern
            domain [M, K, N] -> { S_n8[i0, i1, i2] : 0 <= i0 < M and 0 <= i1 < N and 0 <= i2 < K }
            write  [M, K, N] -> { S_n8[i0, i1, i2] -> n8[i0, i1] }
            read   [M, K, N] -> { S_n8[i0, i1, i2] -> n7[i0, i1, i2] }
            lhs n0[i0, i2]  [M, K, N] -> { S_n8[i0, i1, i2] -> n0[i0, i2] }
              no halo (one output point): the needed producer elements are unbounded along axis 1
            rhs n1[i2, i1]  [M, K, N] -> { S_n8[i0, i1, i2] -> n1[i2, i1] }
              no halo (one output point): the needed producer elements are unbounded along axis 0
            out [i0, i1] reduce [i2]
            pattern matmul  batch []
          block n9 ewise
            domain [M, K, N] -> { S_n9[i0, i1] : 0 <= i0 < M and 0 <= i1 < N }
            write  [M, K, N] -> { S_n9[i0, i1] -> n9[i0, i1] }
            read   [M, K, N] -> { S_n9[i0, i1] -> n8[i0, i1] }
          edges
            n0 -> n2  true [M, K, N] -> { S_n0[i0, i1] -> S_n2[i0' = i0, i1' = 0, i2 = i1] : 0 <= i0 < M and 0 <= i1 < K }
            n1 -> n3  true [M, K, N] -> { S_n1[i0, i1] -> S_n3[i0' = i1, i1' = i0] : 0 <= i0 < K and 0 <= i1 < N }
            n3 -> n4  true [M, K, N] -> { S_n3[i0, i1] -> S_n4[i0' = 0, i1' = i0, i2 = i1] : 0 <= i0 < N and 0 <= i1 < K }
            n2 -> n5  true [M, K, N] -> { S_n2[i0, i1 = 0, i2] -> S_n5[i0' = i0, i1', i2' = i2] : 0 <= i0 < M and 0 <= i2 < K and 0 <= i1' < N }
            n4 -> n6  true [M, K, N] -> { S_n4[i0 = 0, i1, i2] -> S_n6[i0', i1' = i1, i2' = i2] : 0 <= i1 < N and 0 <= i2 < K and 0 <= i0' < M }
            n5 -> n7  true [M, K, N] -> { S_n5[i0, i1, i2] -> S_n7[i0' = i0, i1' = i1, i2' = i2] : 0 <= i0 < M and 0 <= i1 < N and 0 <= i2 < K }
            n6 -> n7  true [M, K, N] -> { S_n6[i0, i1, i2] -> S_n7[i0' = i0, i1' = i1, i2' = i2] : 0 <= i0 < M and 0 <= i1 < N and 0 <= i2 < K }
            n7 -> n8  true [M, K, N] -> { S_n7[i0, i1, i2] -> S_n8[i0' = i0, i1' = i1, i2' = i2] : 0 <= i0 < M and 0 <= i1 < N and 0 <= i2 < K }
            n8 -> n8  true|anti|output [M, K, N] -> { S_n8[i0, i1, i2] -> S_n8[i0' = i0, i1' = i1, i2'] : 0 <= i0 < M and 0 <= i1 < N and i2 >= 0 and i2 < i2' < K }
            n8 -> n9  true [M, K, N] -> { S_n8[i0, i1, i2] -> S_n9[i0' = i0, i1' = i1] : 0 <= i0 < M and 0 <= i1 < N and 0 <= i2 < K }
    "#]]
    .assert_eq(&dump(&v));
}

/// The conv2d spec graph (`002` §5.2) with every symbol but the batch bound:
/// the `POOL` window is the affine sliding window of `003`, read through the
/// padding, and the reduction is a contraction over `(Cin, Kh, Kw)`.
#[test]
fn conv2d_sliding_window_reads_through_the_padding() {
    let dims = [
        ("Sh", 1),
        ("Sw", 1),
        ("Dh", 1),
        ("Dw", 1),
        ("G", 1),
        ("Cin_total", 3),
        ("Cin", 3),
        ("Kh", 3),
        ("Kw", 3),
        ("pt", 1),
        ("pb", 1),
        ("pl", 1),
        ("pr", 1),
        ("Cout", 8),
        ("Rcout", 8),
        ("H", 8),
        ("W", 8),
        ("Oy", 8),
        ("Ox", 8),
    ];
    let g = load_spec("002_conv2d.json", &dims);
    let ctx = Ctx::new();
    let (_, v) = view_of(&ctx, &g);
    assert!(v.blocks.iter().all(|b| b.scop().is_some()), "{}", dump(&v));
    // The window: xw[n, c, oy, ox, ky, kx] = xp[n, c, oy + ky, ox + kx].
    let xw = scop(&v, "xw");
    let box6 = "0 <= i0 < N and 0 <= i1 < 3 and 0 <= i2 < 8 and 0 <= i3 < 8 and 0 <= i4 < 3 and 0 <= i5 < 3";
    assert_map(
        &xw.reads[0].map,
        &format!("[N] -> {{ S_xw[i0, i1, i2, i3, i4, i5] -> xp[i0, i1, i2 + i4, i3 + i5] : {box6} }}"),
    );
    // Sliding: output rows 0 and 1 share two of their three input rows.
    let at = |oy: i64| image(&xw.reads[0].map, "S_xw", &[0, 0, oy, 0, 0, 0]);
    let rows = |oy: i64| (0..3).map(|ky| image(&xw.reads[0].map, "S_xw", &[0, 0, oy, 0, ky, 0])).collect::<Vec<_>>();
    assert_set(&at(1), "[N] -> { xp[0, 0, 1, 0] : N > 0 }");
    assert!(rows(0)[1].is_equal(&rows(1)[0]).unwrap() && rows(0)[2].is_equal(&rows(1)[1]).unwrap());
    // The contraction's input operand, traced through the window and the
    // padding: the pad's zero border is outside the map.
    let c = v.find("yacc").unwrap().contraction.as_ref().unwrap();
    assert_eq!(g.node(c.lhs.src).label, "x");
    assert_eq!(g.node(c.rhs.src).label, "w");
    let red = "0 <= i0 < N and i1 = 0 and 0 <= i2 < 8 and 0 <= i3 < 8 and 0 <= i4 < 8 and 0 <= i5 < 3 and 0 <= i6 < 3 and 0 <= i7 < 3";
    assert_map(
        &c.lhs.map,
        &format!(
            "[N] -> {{ S_yacc[i0, i1, i2, i3, i4, i5, i6, i7] -> x[i0, i5, i3 + i6 - 1, i4 + i7 - 1] : {red} \
             and 1 <= i3 + i6 <= 8 and 1 <= i4 + i7 <= 8 }}"
        ),
    );
    assert_map(
        &c.rhs.map,
        &format!("[N] -> {{ S_yacc[i0, i1, i2, i3, i4, i5, i6, i7] -> w[i2, i5, i6, i7] : {red} }}"),
    );
    assert_eq!(
        c.affine_offsets,
        vec![("lhs[2]".into(), "i3 + i6 - 1".into()), ("lhs[3]".into(), "i4 + i7 - 1".into())]
    );
    // At N = 1: 8 channels × 8×8 outputs × 27 taps in the domain.
    let n1 = ctx.set("[N] -> { : N = 1 }").unwrap();
    let dom = scop(&v, "yacc").domain.intersect_params(&n1).unwrap();
    assert_eq!(dom.count().unwrap(), 8 * 8 * 8 * 27);
    let taps = c.lhs.map.domain().unwrap().intersect_params(&n1).unwrap().count().unwrap();
    // Of the 8 output rows × 3 kernel rows, 2 pairs read the zero border
    // (oy = 0, ky = 0 and oy = 7, ky = 2); the same for columns.
    assert_eq!(taps, 8 * 3 * (8 * 3 - 2) * (8 * 3 - 2));
}

#[test]
fn symbolic_strides_leave_the_window_out_of_the_scop() {
    let g = load_spec("002_conv2d.json", &[]);
    let ctx = Ctx::new();
    let (_, v) = view_of(&ctx, &g);
    match &v.find("xw").unwrap().body {
        Body::NonScop(why) => assert!(why.contains("Sh"), "{why}"),
        Body::Scop(_) => panic!("a symbolic stride is not affine"),
    }
    // The padding itself stays affine in the symbols.
    let xp = scop(&v, "xp");
    assert_eq!(xp.reads[0].map.domain().unwrap().param_names().unwrap().len(), g.symbols.len());
    let e = v.edges.iter().find(|e| v.blocks[e.to.index()].name == "xw").unwrap();
    assert!(e.deps.is_none());
}

/// `PAD` is two kinds of pieces: the read on the source's box and the fill.
#[test]
fn pad_splits_the_domain_into_a_read_piece_and_fill_pieces() {
    let mut g = Graph::new("pad");
    let x = g.input("x", DType::F32, &shape(&["4", "5"])).unwrap();
    g.set_label(x, "x").unwrap();
    let p = g.pad(x, &[(Dim::int(1), Dim::int(2)), (Dim::int(0), Dim::int(1))], -1.0).unwrap();
    let y = g.unary(UnaryOp::Relu, p).unwrap();
    output(&mut g, "y", y);
    let ctx = Ctx::new();
    let (_, v) = view_of(&ctx, &g);
    let s = scop(&v, &g.node(p).label);
    let stmt = format!("S_{}", g.node(p).label);
    assert_set(&s.domain, &format!("{{ {stmt}[i0, i1] : 0 <= i0 < 7 and 0 <= i1 < 6 }}"));
    assert_map(&s.reads[0].map, &format!("{{ {stmt}[i0, i1] -> x[i0 - 1, i1] : 1 <= i0 <= 4 and 0 <= i1 <= 4 }}"));
    assert_eq!(s.fills.len(), 1);
    assert_eq!(s.fills[0].value, -1.0);
    assert_eq!(s.domain.count().unwrap(), 42);
    assert_eq!(s.reads[0].map.domain().unwrap().count().unwrap(), 20);
    assert_eq!(s.fills[0].set.count().unwrap(), 22);
    assert!(s.fills[0].set.n_basic_set().unwrap() >= 2, "the border is not convex");
    assert!(image(&s.reads[0].map, &stmt, &[0, 3]).is_empty().unwrap());
    assert_set(&image(&s.reads[0].map, &stmt, &[4, 3]), "{ x[3, 3] }");
    // Too small a piece limit is ExcessivePiecewise, on the PAD.
    let book = index_book::build(&g).unwrap();
    let Err(e) = build_with(&ctx, &g, &book, &Options { max_pieces: 2 }) else { panic!("limit not enforced") };
    assert_eq!(e.name, ErrorName::ExcessivePiecewise);
    assert_eq!(e.node.as_deref(), Some(g.node(p).label.as_str()));
}

/// A `RESHAPE` of `[N, J]` to `[N, K]` holds only where `N*J = N*K`; the
/// context carries it as `J = K` (the symbols are positive), so the read
/// stays inside its source and the view verifies.
#[test]
fn a_reshape_between_symbols_equal_only_by_constraint_carries_it_into_the_context() {
    let mut g = Graph::new("regroup_symbols");
    let b = g.input("b", DType::F32, &shape(&["J", "N"])).unwrap();
    let t = g.permute(b, &[1, 0]).unwrap();
    let y = g.reshape(t, &shape(&["N", "K"])).unwrap();
    output(&mut g, "y", y);
    assert_eq!(g.constraints.len(), 1, "N*J = N*K is open");
    let ctx = Ctx::new();
    let (_, v) = view_of(&ctx, &g);
    assert_set(&v.context, "[J, N, K] -> { : J = K and J > 0 and N > 0 }");
}

/// Merging axes is exact (`4·i0 + i1`); splitting them back is a floor
/// division, an isl div.
#[test]
fn floordiv_reshape_is_an_isl_div() {
    let mut g = Graph::new("split");
    let x = g.input("x", DType::F32, &shape(&["12"])).unwrap();
    g.set_label(x, "x").unwrap();
    let r = g.reshape(x, &shape(&["3", "4"])).unwrap();
    g.set_label(r, "S_x").unwrap(); // would read as the statement of `x`
    let back = g.reshape(r, &shape(&["12"])).unwrap();
    output(&mut g, "y", back);
    let ctx = Ctx::new();
    let (_, v) = view_of(&ctx, &g);
    let split = scop(&v, "TS_x");
    let (s, m) = ("TS_x".to_string(), g.node(back).label.clone());
    assert_map(&split.reads[0].map, &format!("{{ S_{s}[i0, i1] -> x[4i0 + i1] : 0 <= i0 < 3 and 0 <= i1 < 4 }}"));
    let merge = scop(&v, &m);
    assert_map(
        &merge.reads[0].map,
        &format!("{{ S_{m}[i0] -> {s}[q, r] : 0 <= i0 < 12 and i0 = 4q + r and 0 <= r < 4 }}"),
    );
    assert_set(&image(&merge.reads[0].map, &format!("S_{m}"), &[7]), &format!("{{ {s}[1, 3] }}"));
}

/// A reshape whose axes do not line up needs `%`: div plus guard in the
/// IndexBook, an exact div in isl (the guard simplifies away).
#[test]
fn remainder_is_a_div_and_its_guard_simplifies_away() {
    let mut g = Graph::new("regroup");
    let x = g.input("x", DType::F32, &shape(&["6", "4"])).unwrap();
    g.set_label(x, "x").unwrap();
    let r = g.reshape(x, &shape(&["4", "6"])).unwrap();
    output(&mut g, "y", r);
    let ctx = Ctx::new();
    let (book, v) = view_of(&ctx, &g);
    let info = book.get(r).unwrap();
    assert!(info.domain.constraints.len() > 4, "the IndexBook states the div guards");
    let s = scop(&v, &g.node(r).label);
    let stmt = format!("S_{}", g.node(r).label);
    assert_set(&s.domain, &format!("{{ {stmt}[i0, i1] : 0 <= i0 < 4 and 0 <= i1 < 6 }}"));
    assert_map(
        &s.reads[0].map,
        &format!("{{ {stmt}[i0, i1] -> x[q, r] : 0 <= i0 < 4 and 0 <= i1 < 6 and 6i0 + i1 = 4q + r and 0 <= r < 4 }}"),
    );
    // (1, 5) is element 11 = 2·4 + 3.
    assert_set(&image(&s.reads[0].map, &stmt, &[1, 5]), "{ x[2, 3] }");
    assert_eq!(s.reads[0].map.to_pw_multi_aff().unwrap().n_piece().unwrap(), 1);
}

/// The verifier catches a read that leaves its source: what a lost div
/// guard or a wrong map would do.
#[test]
fn verifier_rejects_out_of_bounds_reads_and_wrong_kinds() {
    let g = gemm();
    let ctx = Ctx::new();
    let (book, mut v) = view_of(&ctx, &g);
    let b = &mut v.blocks[3];
    if let Body::Scop(s) = &mut b.body {
        s.reads[0].map =
            ctx.map("[M, K, N] -> { S_n3[i0, i1] -> n1[i1 + 1, i0] : 0 <= i0 < N and 0 <= i1 < K }").unwrap();
    }
    b.kind = BlockKind::Ewise;
    let errs = verify::verify(&g, &book, &v, &Options::default());
    let msgs: Vec<String> = errs.iter().map(|e| e.message.clone()).collect();
    assert!(msgs.iter().any(|m| m.contains("leaves n1's domain")), "{msgs:?}");
    assert!(msgs.iter().any(|m| m.contains("is `ewise`")), "{msgs:?}");
    assert!(errs.iter().all(|e| e.node.as_deref() == Some("n3")), "{errs:?}");
}

#[test]
fn json_follows_12_3_and_round_trips() {
    let ctx = Ctx::new();
    let (_, v) = view_of(&ctx, &gemm());
    let text = json::to_json(&v).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let b = &doc["poly_view"]["blocks"][8];
    assert_eq!(b["kind"], "contraction_pattern");
    assert_eq!(b["domain"]["i2"], serde_json::json!(["0", "K - 1"]));
    assert_eq!(b["accesses"][0]["tensor"], "n7");
    assert_eq!(b["attrs"]["lhs_idx"], serde_json::json!(["i0", "i2"]));
    assert_eq!(b["attrs"]["reduce_idx"], serde_json::json!(["i2"]));
    let e = &doc["poly_view"]["edges"][0];
    assert_eq!((e["from"].as_str(), e["to"].as_str()), (Some("n0"), Some("n2")));
    assert!(e["deps"]["true"][0].as_str().unwrap().contains("S_n0[i0, i1] -> S_n2["));
    assert_eq!(e["deps"]["anti"], serde_json::json!([]));

    let back = json::from_json(&ctx, &text).unwrap();
    assert_eq!(dump(&back), dump(&v));
    for (a, b) in v.blocks.iter().zip(&back.blocks) {
        let (Some(x), Some(y)) = (a.scop(), b.scop()) else { panic!("gemm is all SCoP") };
        assert!(x.domain.is_equal(&y.domain).unwrap() && x.write.is_equal(&y.write).unwrap());
        for (r, s) in x.reads.iter().zip(&y.reads) {
            assert!(r.src == s.src && r.map.is_equal(&s.map).unwrap());
        }
    }
    assert!(json::from_json(&ctx, "{\"poly_view\": 1}").is_err());
}

/// Random chains of movement ops on small integer shapes: every read maps
/// its consumer's domain into its producer's (or into a fill), and isl's
/// image of random points is the IndexBook's own evaluation.
#[test]
fn random_movement_chains_read_inside_their_sources() {
    let mut rng = SplitMix64::new(0x2545_f491_4f6c_dd1du64);
    let mut next = |n: i64| rng.below(n as usize) as i64;
    let ctx = Ctx::new();
    for _ in 0..60 {
        let mut g = Graph::new("random");
        let rank = 1 + next(3) as usize;
        let dims: Vec<i64> = (0..rank).map(|_| 1 + next(4)).collect();
        let mut cur = g.input("x", DType::F32, &dims.iter().map(|&d| Dim::int(d)).collect::<Vec<_>>()).unwrap();
        for _ in 0..1 + next(4) {
            let sh: Vec<i64> = g.shape(cur).iter().map(|d| d.as_int().unwrap()).collect();
            let ints = |v: &[i64]| v.iter().map(|&x| Dim::int(x)).collect::<Vec<_>>();
            cur = match next(5) {
                0 => {
                    let mut perm: Vec<usize> = (0..sh.len()).collect();
                    perm.rotate_left(1);
                    g.permute(cur, &perm).unwrap()
                }
                1 => {
                    let mut rev = sh.clone();
                    rev.reverse();
                    let total: i64 = sh.iter().product();
                    let to = if next(2) == 0 { rev } else { vec![total] };
                    g.reshape(cur, &ints(&to)).unwrap()
                }
                2 => {
                    let pads: Vec<(Dim, Dim)> = sh.iter().map(|_| (Dim::int(next(3)), Dim::int(next(2)))).collect();
                    g.pad(cur, &pads, 0.0).unwrap()
                }
                3 => {
                    let lo: Vec<i64> = sh.iter().map(|&d| next(d)).collect();
                    let hi: Vec<i64> = sh.iter().zip(&lo).map(|(&d, &l)| l + 1 + next(d - l)).collect();
                    let step: Vec<i64> = sh.iter().map(|_| 1 + next(2)).collect();
                    g.shrink(cur, &ints(&lo), &ints(&hi), &ints(&step)).unwrap()
                }
                _ => g.flip(cur, &[next(sh.len() as i64) as usize]).unwrap(),
            };
        }
        let y = g.reduce(ReduceOp::Sum, cur, &[0], DType::F32).unwrap();
        output(&mut g, "y", y);
        let (book, v) = view_of(&ctx, &g);
        for id in g.ids() {
            let (Some(s), Some(info)) = (v.block(id).and_then(Block::scop), book.get(id)) else { continue };
            let ext: Vec<i64> = info.extents().iter().map(|d| d.as_int().unwrap()).collect();
            for (r, a) in s.reads.iter().zip(&info.inputs) {
                let p: Vec<i64> = ext.iter().map(|&e| next(e)).collect();
                let got = image(&r.map, &format!("S_{}", v.blocks[id.index()].name), &p);
                let inside = a.guard.iter().all(|pc| pc.valid.iter().all(|c| c.expr.eval(&p, &|_| None).unwrap() >= 0));
                if !inside {
                    assert!(got.is_empty().unwrap(), "{got} at {p:?}");
                    continue;
                }
                let want: Vec<String> = a.map.iter().map(|e| e.eval(&p, &|_| None).unwrap().to_string()).collect();
                let src = &v.blocks[a.src.index()].name;
                assert_set(&got, &format!("{{ {src}[{}] }}", want.join(", ")));
            }
        }
    }
}

/// A `GATHER` reads its `x` at a data-dependent position: its block is
/// non-SCoP (`000` §1.3 invariant 5), the affine blocks around it stay in
/// the SCoP, and the view verifies.
#[test]
fn a_gather_is_not_in_the_scop() {
    let src = "graph<N> t(table: f32[10, 4], ids: i32[N]) -> (y: f32[N, 4]) {\n    y = take(table, ids, 0) * 2\n    return y\n}";
    let g = crate::pipeline::load(src, crate::pipeline::Format::Dsl, None).unwrap().graph;
    let ctx = Ctx::new();
    let (_, v) = view_of(&ctx, &g);
    let gathers: Vec<&Block> =
        v.blocks.iter().filter(|b| matches!(g.node(b.node).op, crate::tiny::Op::Gather { .. })).collect();
    assert_eq!(gathers.len(), 1);
    match &gathers[0].body {
        Body::NonScop(why) => assert!(why.contains("data-dependent"), "{why}"),
        Body::Scop(_) => panic!("a gather is not affine"),
    }
    assert!(scop(&v, "y").reads.len() == 2);
}

/// `Parts`: the part between two GEMMs of a chain holds the nodes on the
/// way; two such parts that differ only in their names share a key (Poly
/// Core is asked once for both), a part of other shapes does not.
#[test]
fn parts_of_the_same_shape_share_a_key() {
    let src =
        "graph g(x: f32[4, 8], a: f32[8, 8], b: f32[8, 8], c: f32[8, 8], d: f32[8, 16]) -> (y: f32[4, 16]) {\n    \
               p = relu(matmul(x, a))\n    q = relu(matmul(p, b))\n    r = relu(matmul(q, c))\n    \
               y = matmul(r, d)\n    return y\n}\n";
    let g = crate::pipeline::load(src, crate::pipeline::Format::Dsl, None).unwrap().graph;
    let book = index_book::build(&g).unwrap();
    let sums: Vec<NodeId> = g.ids().filter(|&v| matches!(g.node(v).op, crate::tiny::Op::Reduce { .. })).collect();
    assert_eq!(sums.len(), 4);
    let ctx = Ctx::new();
    let mut parts = Parts::new(&ctx, &g, &book, &Options::default()).unwrap();
    let between: Vec<Vec<NodeId>> = sums.windows(2).map(|w| parts.between(w[0], w[1])).collect();
    for (w, part) in sums.windows(2).zip(&between) {
        assert_eq!((part.first(), part.last()), (Some(&w[0]), Some(&w[1])));
        // The relu, then the second GEMM's movement of its left operand and the product.
        assert!(part.len() > 3, "{part:?}");
        assert!(part.iter().all(|v| v.index() > w[0].index() || *v == w[0]));
    }
    assert!(parts.between(sums[1], sums[0]).is_empty());
    let keys: Vec<String> = between.iter().map(|p| parts.key(p).unwrap()).collect();
    assert_eq!(keys[0], keys[1]);
    assert_ne!(keys[1], keys[2]);
    // The part's view answers as the whole view does.
    let whole = build(&ctx, &g, &book).unwrap();
    let view = parts.view(&between[0]).unwrap();
    let tile = vec![1; g.shape(sums[1]).len()];
    assert_eq!(
        core::can_compute_at(&view, sums[0], sums[1], &tile).unwrap(),
        core::can_compute_at(&whole, sums[0], sums[1], &tile).unwrap()
    );
    assert!(view.blocks.iter().filter(|b| b.scop().is_some()).map(|b| b.node).eq(between[0].iter().copied()));
}

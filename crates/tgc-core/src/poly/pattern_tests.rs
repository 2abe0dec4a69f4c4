//! ContractionPattern detection (`000` §3.5) on the spec's and the examples'
//! contractions: which pattern, which batch axes, which windows.

use super::tests::{load_spec, output, view_of};
use super::*;
use crate::pipeline::{self, Format};
use crate::test_graphs::{gemm, shape};
use crate::tiny::{BinaryOp, Graph, ReduceOp};

/// The contraction blocks of `g`: `(name, pattern)`.
fn patterns(g: &Graph) -> Vec<(String, Option<PatternInfo>)> {
    let ctx = Ctx::new();
    let (_, v) = view_of(&ctx, g);
    v.blocks.iter().filter_map(|b| b.contraction.as_ref().map(|c| (b.name.clone(), c.pattern.clone()))).collect()
}

pub(super) fn dsl(text: &str) -> Graph {
    pipeline::load(text, Format::Dsl, None).unwrap().graph
}

pub(super) fn example(file: &str) -> Graph {
    let path = format!("{}/../../examples/graphs/{file}", env!("CARGO_MANIFEST_DIR"));
    dsl(&std::fs::read_to_string(path).unwrap())
}

fn only(g: &Graph) -> PatternInfo {
    let ps = patterns(g);
    assert_eq!(ps.len(), 1, "{ps:?}");
    ps[0].1.clone().unwrap_or_else(|| panic!("{} has no pattern", ps[0].0))
}

#[test]
fn gemm_and_the_001_matmuls_are_matmul() {
    let p = only(&gemm());
    assert_eq!((p.kind, p.batch_idx.len(), p.windows.len()), (Pattern::Matmul, 0, 0));
    for file in ["000_gemm_bias_relu.json", "001_matmul_1dx2d.json", "001_matmul_2dx1d.json", "001_matmul_2dx2d.json"] {
        let p = only(&load_spec(file, &[]));
        assert_eq!(p, PatternInfo { kind: Pattern::Matmul, batch_idx: vec![], windows: vec![] }, "{file}");
    }
}

/// Attention's `QKᵀ` and `PV` are batched over `B, H` (`i0, i1`).
#[test]
fn attention_contractions_are_batched_matmuls() {
    let ps = patterns(&example("attention.tgc"));
    assert_eq!(ps.len(), 2, "{ps:?}");
    for (name, p) in ps {
        let p = p.unwrap_or_else(|| panic!("{name}: no pattern"));
        assert_eq!(p.kind, Pattern::Matmul, "{name}");
        assert_eq!(p.batch_idx, ["i0", "i1"], "{name}");
        assert!(p.windows.is_empty(), "{name}");
    }
}

/// The spec conv2d with its symbols bound (stride 2, dilation 2, two
/// groups): the spatial windows carry stride and dilation, and the group
/// axis `i1` indexes both operands (`x`'s channel `2·g + c`); the image
/// axis `i0` indexes only `x`, like GEMM's `M`.
#[test]
fn conv2d_with_stride_dilation_and_groups_is_conv() {
    let dims = [
        ("Sh", 2),
        ("Sw", 2),
        ("Dh", 2),
        ("Dw", 2),
        ("G", 2),
        ("Cin_total", 4),
        ("Cin", 2),
        ("Kh", 3),
        ("Kw", 3),
        ("pt", 1),
        ("pb", 1),
        ("pl", 1),
        ("pr", 1),
        ("Cout", 6),
        ("Rcout", 3),
        ("H", 9),
        ("W", 9),
        ("Oy", 4),
        ("Ox", 4),
    ];
    let p = only(&load_spec("002_conv2d.json", &dims));
    assert_eq!(p.kind, Pattern::Conv);
    assert_eq!(p.batch_idx, ["i1"]);
    let w = |at: &str, out, reduce, stride, dilation, grouped| Window {
        at: at.into(),
        out,
        reduce,
        stride,
        dilation,
        grouped,
    };
    assert_eq!(
        p.windows,
        [w("lhs[1]", 1, 5, 2, 1, true), w("lhs[2]", 3, 6, 2, 2, false), w("lhs[3]", 4, 7, 2, 2, false)]
    );
    // The DSL's conv2d: the same roles.
    let g = dsl("graph main(x: f32[1, 4, 9, 9], w: f32[6, 2, 3, 3]) -> (y: f32[1, 6, 3, 3]) {\n    \
                 y = conv2d(x, w, stride=[2, 2], dilation=[2, 2], groups=2)\n    return y\n}\n");
    let p = only(&g);
    assert_eq!(p.kind, Pattern::Conv);
    let spatial: Vec<(i64, i64)> = p.windows.iter().filter(|w| !w.grouped).map(|w| (w.stride, w.dilation)).collect();
    assert_eq!(spatial, [(2, 2), (2, 2)]);
    assert_eq!(p.windows.iter().filter(|w| w.grouped).count(), 1);
    // The conv of the example (3×3, stride 1, pad 1).
    let p = only(&example("conv_relu_pool.tgc"));
    assert_eq!(p.kind, Pattern::Conv);
    assert!(p.windows.iter().all(|w| (w.stride, w.dilation, w.grouped) == (1, 1, false)));
}

/// `sum(a + b)` is a reduce, not a contraction.
#[test]
fn a_sum_of_an_add_is_no_contraction() {
    let mut g = Graph::new("sum_add");
    let a = g.input("a", DType::F32, &shape(&["4", "5"])).unwrap();
    let b = g.input("b", DType::F32, &shape(&["4", "5"])).unwrap();
    let s = g.binary(BinaryOp::Add, a, b).unwrap();
    let r = g.reduce(ReduceOp::Sum, s, &[1], DType::F32).unwrap();
    output(&mut g, "y", r);
    assert!(patterns(&g).is_empty());
    let ctx = Ctx::new();
    let (_, v) = view_of(&ctx, &g);
    assert_eq!(v.block(r).unwrap().kind, BlockKind::Reduce);
}

/// A sum of squares (`x·x`, one value on both sides of the `MUL`, read
/// once) is a contraction whose operands are the same tensor; a 1×1
/// convolution (window axes of size 1, read by neither operand) is a conv.
#[test]
fn a_sum_of_squares_and_a_1x1_conv_are_recognised() {
    let g = dsl("graph sq(x: f32[4, 6]) -> (y: f32[4]) {\n    y = sum(x * x, axes=[1])\n    return y\n}\n");
    let ps = patterns(&g);
    assert_eq!(ps.len(), 1, "{ps:?}");
    let g =
        dsl("graph c(x: f16[1, 8, 5, 5], w: f16[4, 8, 1, 1]) -> (y: f16[1, 4, 5, 5]) {\n    y = conv2d(x, w)\n    \
                 return y\n}\n");
    assert_eq!(only(&g).kind, Pattern::Matmul);
}

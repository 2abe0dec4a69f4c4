//! Every op family lowers, verifies and has the expected shape.

use super::ast_build::*;
use crate::frontend::ast::{BinOp, Program};
use crate::frontend::to_tiny::lower;
use crate::frontend::{ir, resolve};
use crate::tiny::infer::fmt_shape;
use crate::tiny::{verify::verify, Graph, Op, ReduceOp};
use crate::DType::{self, Bool, F16, F32, I32};

/// Lowers, verifies, and checks that every node has a span; the program
/// also prints and reads back (`frontend::raise`).
pub fn lower_ok(p: &Program) -> Graph {
    super::raise::reads_back(p);
    let g = lower(p, None).unwrap_or_else(|e| panic!("lowering failed: {e}"));
    let errs = verify(&g);
    assert!(errs.is_empty(), "verifier: {errs:?}\n{}", crate::tiny::text::dump(&g));
    g
}

fn out_shape(g: &Graph) -> String {
    fmt_shape(g.shape(g.outputs[0].node))
}

fn out_dtype(g: &Graph) -> DType {
    g.dtype(g.outputs[0].node)
}

/// `main(x: dt[xs]) -> (y: rdt[ys]) { y = value }`.
fn one(xs: &[&str], dt: DType, value: crate::frontend::ast::Expr, rdt: DType, ys: &[&str]) -> Graph {
    let syms: Vec<(&str, Option<i64>)> = ["B", "M", "N", "K", "H", "W", "C", "D"].iter().map(|s| (*s, None)).collect();
    lower_ok(&single(&syms, vec![t("x", dt, xs)], t("y", rdt, ys), value))
}

/// `main(a, b) -> (y) { y = value }`.
fn two(a: (&[&str], DType), b: (&[&str], DType), value: crate::frontend::ast::Expr, r: (&[&str], DType)) -> Graph {
    let syms: Vec<(&str, Option<i64>)> = ["B", "M", "N", "K", "H", "D"].iter().map(|s| (*s, None)).collect();
    lower_ok(&single(&syms, vec![t("a", a.1, a.0), t("b", b.1, b.0)], t("y", r.1, r.0), value))
}

fn gemm_bias_relu() -> Program {
    let body = vec![
        assign("acc", call("matmul", vec![n("x"), n("w")])),
        assign("y", call("relu", vec![bin(BinOp::Add, n("acc"), n("bias"))])),
    ];
    program(vec![graph(
        "gemm_bias_relu",
        &[("M", Some(128)), ("N", Some(256)), ("K", Some(64))],
        vec![t("x", F16, &["M", "K"]), t("w", F16, &["K", "N"]), t("bias", F16, &["N"])],
        vec![t("y", F16, &["M", "N"])],
        body,
        &["y"],
    )])
}

#[test]
fn dsl_example_lowers_to_tinygrad_matmul() {
    let g = lower_ok(&gemm_bias_relu());
    assert_eq!(g.name, "gemm_bias_relu");
    let syms: Vec<(&str, Option<i64>)> = g.symbols.iter().map(|s| (s.name.as_str(), s.default)).collect();
    assert_eq!(syms, [("M", Some(128)), ("N", Some(256)), ("K", Some(64))]);
    let ins: Vec<&str> = g.inputs().iter().map(|&i| g.node(i).label.as_str()).collect();
    assert_eq!(ins, ["x", "w", "bias"]);
    assert_eq!(g.outputs[0].name, "y");
    assert_eq!(out_shape(&g), "[M, N]");
    assert_eq!(out_dtype(&g), F16);
    let text = crate::tiny::text::dump(&g);
    assert!(text.contains("MUL") && text.contains("REDUCE") && text.contains("SUM axes=[2] : fp32[M, N]"), "{text}");
    assert!(text.contains("acc = CAST"), "{text}");
    assert!(text.contains("PERMUTE") && text.contains("perm=[0, 2, 1]"), "{text}");
    assert!(g.nodes().iter().all(|n| n.span.is_some()));
}

#[test]
fn frontend_dump_lists_statements() {
    let p = resolve::resolve(&gemm_bias_relu()).unwrap();
    let text = ir::dump(&p);
    assert!(
        text.starts_with(
            "graph gemm_bias_relu<M=128, N=256, K=64>(x: f16[M, K], w: f16[K, N], bias: f16[N]) -> (y: f16[M, N])"
        ),
        "{text}"
    );
    assert!(text.contains("  acc = matmul(x, w)"), "{text}");
    assert!(text.contains("  %4 = add(acc, bias)"), "{text}");
    assert!(text.contains("  y = relu(%4)"), "{text}");
    assert!(text.contains("  return y"), "{text}");
}

#[test]
fn matmul_shapes_follow_numpy() {
    let mm = || call("matmul", vec![n("a"), n("b")]);
    let cases: [(&[&str], &[&str], &[&str]); 6] = [
        (&["K"], &["K"], &[]),
        (&["M", "K"], &["K"], &["M"]),
        (&["K"], &["K", "N"], &["N"]),
        (&["M", "K"], &["K", "N"], &["M", "N"]),
        (&["B", "M", "K"], &["K", "N"], &["B", "M", "N"]),
        (&["B", "1", "M", "K"], &["H", "K", "N"], &["B", "H", "M", "N"]),
    ];
    for (a, b, r) in cases {
        let g = two((a, F32), (b, F32), mm(), (r, F32));
        assert_eq!(out_shape(&g), fmt_shape(&r.iter().map(|d| crate::sym::Dim::parse(d).unwrap()).collect::<Vec<_>>()));
    }
    let g = two((&["M", "K"], I32), (&["K", "N"], I32), mm(), (&["M", "N"], I32));
    assert_eq!(out_dtype(&g), I32);
}

#[test]
fn every_unary_function_lowers() {
    for f in ir::UnaryFn::ALL {
        for dt in [F32, F16, DType::BF16] {
            let g = one(&["M", "4"], dt, call(f.name(), vec![n("x")]), dt, &["M", "4"]);
            assert_eq!(out_dtype(&g), dt, "{}", f.name());
        }
    }
    for f in ["relu", "neg", "abs"] {
        one(&["4"], I32, call(f, vec![n("x")]), I32, &["4"]);
    }
}

#[test]
fn binary_operators_broadcast_and_compare() {
    let g = two((&["4", "1"], F32), (&["3"], F32), bin(BinOp::Mul, n("a"), n("b")), (&["4", "3"], F32));
    let expands = g.nodes().iter().filter(|n| n.op == Op::Expand).count();
    assert_eq!(expands, 2);
    for op in [BinOp::Lt, BinOp::Le, BinOp::Gt, BinOp::Ge, BinOp::Eq, BinOp::Ne] {
        let g = two((&["M", "N"], F32), (&["N"], F32), bin(op, n("a"), n("b")), (&["M", "N"], Bool));
        assert_eq!(out_dtype(&g), Bool);
    }
    for f in ["maximum", "minimum"] {
        two((&["B", "1", "N"], F16), (&["M", "1"], F16), call(f, vec![n("a"), n("b")]), (&["B", "M", "N"], F16));
    }
    let cond = bin(BinOp::Gt, n("a"), float(0.0));
    two((&["M", "N"], F32), (&["N"], F32), call("where", vec![cond, n("a"), n("b")]), (&["M", "N"], F32));
    // literals take the tensor's dtype, including i32 and bool
    one(&["4"], I32, bin(BinOp::Add, n("x"), int(1)), I32, &["4"]);
    one(&["4"], F16, bin(BinOp::Mul, float(0.5), n("x")), F16, &["4"]);
    one(&["4"], Bool, bin(BinOp::Eq, n("x"), Expr::Bool(true, Default::default())), Bool, &["4"]);
    one(&["4"], F32, call("where", vec![bin(BinOp::Lt, n("x"), int(0)), int(0), n("x")]), F32, &["4"]);
    one(&["4"], F32, call("cast", vec![n("x"), n("i32")]), I32, &["4"]);
}

use crate::frontend::ast::Expr;

#[test]
fn reductions_take_axes_keepdim_and_acc() {
    let kw = |axes: Expr, keep: bool| vec![("axes", axes), ("keepdim", Expr::Bool(keep, Default::default()))];
    let g = one(&["M", "N", "K"], F16, call_kw("sum", vec![n("x")], kw(ints(&[1]), false)), F16, &["M", "K"]);
    assert!(g.nodes().iter().any(|n| matches!(n.op, Op::Reduce { op: ReduceOp::Sum, .. }) && n.ty.dtype == F32));
    one(&["M", "N", "K"], F32, call_kw("mean", vec![n("x")], kw(ints(&[-1, 0]), true)), F32, &["1", "N", "1"]);
    one(&["M", "N", "K"], F32, call_kw("max", vec![n("x")], kw(list(vec![n("K")]), false)), F32, &["M", "N"]);
    one(&["M", "4"], F32, call_kw("min", vec![n("x")], kw(int(1), true)), F32, &["M", "1"]);
    one(&["M", "4"], F32, call("sum", vec![n("x")]), F32, &[]);
    one(&["M", "4"], I32, call("sum", vec![n("x"), ints(&[0])]), I32, &["4"]);
    one(&["M", "4"], Bool, call("sum", vec![n("x")]), I32, &[]);
    let g = one(&["M", "4"], F32, call_kw("sum", vec![n("x")], vec![("acc", n("f16"))]), F32, &[]);
    assert!(g.nodes().iter().any(|n| matches!(n.op, Op::Reduce { .. }) && n.ty.dtype == F16));
}

#[test]
fn movement_ops_have_their_shapes() {
    let cases: Vec<(Expr, &[&str])> = vec![
        (call("reshape", vec![n("x"), list(vec![n("M"), int(-1)])]), &["M", "12"]),
        (call("permute", vec![n("x"), ints(&[2, 0, 1])]), &["4", "M", "3"]),
        (call("transpose", vec![n("x"), int(-1), int(0)]), &["4", "3", "M"]),
        (
            call(
                "expand",
                vec![call("unsqueeze", vec![n("x"), int(0)]), list(vec![int(2), int(-1), int(-1), int(-1)])],
            ),
            &["2", "M", "3", "4"],
        ),
        (call("unsqueeze", vec![n("x"), int(-1)]), &["M", "3", "4", "1"]),
        (call("squeeze", vec![call("unsqueeze", vec![n("x"), int(1)]), int(1)]), &["M", "3", "4"]),
        (
            call_kw("pad", vec![n("x"), pairs(&[[0, 0], [1, 2], [0, 1]])], vec![("value", float(-1.0))]),
            &["M", "6", "5"],
        ),
        (
            call("shrink", vec![n("x"), list(vec![list(vec![int(0), n("M")]), ints(&[1, 3]), ints(&[0, 4])])]),
            &["M", "2", "4"],
        ),
        (
            call("slice", vec![n("x"), list(vec![list(vec![int(0), n("M")]), ints(&[0, 3, 2]), ints(&[1, 4])])]),
            &["M", "2", "3"],
        ),
        (call("flip", vec![n("x"), ints(&[0, -1])]), &["M", "3", "4"]),
    ];
    for (e, shape) in cases {
        one(&["M", "3", "4"], F32, e, F32, shape);
    }
}

#[test]
fn conv2d_lowers_with_groups_stride_pad_dilation_and_bias() {
    let p = program(vec![graph(
        "main",
        &[],
        vec![t("x", F16, &["2", "4", "9", "8"]), t("w", F16, &["6", "2", "3", "3"]), t("b", F16, &["6"])],
        vec![t("y", F16, &["2", "6", "4", "4"])],
        vec![assign(
            "y",
            call_kw(
                "conv2d",
                vec![n("x"), n("w")],
                vec![
                    ("bias", n("b")),
                    ("stride", ints(&[2, 2])),
                    ("pad", ints(&[1, 0, 2, 1])),
                    ("dilation", ints(&[1, 2])),
                    ("groups", int(2)),
                ],
            ),
        )],
        &["y"],
    )]);
    let g = lower_ok(&p);
    assert!(g.nodes().iter().any(|n| matches!(n.op, Op::View { .. })));
    assert!(g.nodes().iter().any(|n| matches!(&n.op, Op::Reduce { axes, .. } if axes == &[5, 6, 7])));
}

#[test]
fn conv2d_with_symbolic_sizes_keeps_the_output_formula() {
    let p = program(vec![graph(
        "main",
        &[("N", None), ("H", None), ("W", None)],
        vec![t("x", F32, &["N", "3", "H", "W"]), t("w", F32, &["8", "3", "3", "3"])],
        vec![t("y", F32, &["N", "8", "H", "W"])],
        vec![assign("y", call_kw("conv2d", vec![n("x"), n("w")], vec![("pad", int(1))]))],
        &["y"],
    )]);
    let g = lower_ok(&p);
    assert_eq!(out_shape(&g), "[N, 8, H, W]");
    let p2 = program(vec![graph(
        "main",
        &[("H", None)],
        vec![t("x", F32, &["1", "3", "H", "H"]), t("w", F32, &["8", "3", "3", "3"])],
        vec![t("y", F32, &["1", "8", "H", "H"])],
        vec![assign("y", call_kw("conv2d", vec![n("x"), n("w")], vec![("stride", int(2))]))],
        &["y"],
    )]);
    // (H - 3)/2 + 1 against the declared H: a constraint for bind time.
    let g = lower_ok(&p2);
    assert!(g.constraints.iter().any(|c| c.constraint.what.contains("result `y`")), "{:?}", g.constraints);
}

#[test]
fn pools_lower() {
    let kw = |k: &[i64]| vec![("kernel", ints(k)), ("stride", ints(&[2, 2])), ("pad", ints(&[1, 1]))];
    let g =
        one(&["N", "C", "8", "8"], F16, call_kw("maxpool2d", vec![n("x")], kw(&[3, 3])), F16, &["N", "C", "4", "4"]);
    assert!(g.nodes().iter().any(|n| matches!(&n.op, Op::Pad { value, .. } if *value == f64::NEG_INFINITY)));
    one(&["N", "C", "8", "8"], F32, call_kw("avgpool2d", vec![n("x")], kw(&[3, 3])), F32, &["N", "C", "4", "4"]);
    let mut k = kw(&[2, 2]);
    k.push(("count_include_pad", Expr::Bool(true, Default::default())));
    one(&["C", "8", "8"], F32, call_kw("avgpool2d", vec![n("x")], k), F32, &["C", "5", "5"]);
    one(
        &["N", "C", "8", "8"],
        F32,
        call_kw("maxpool2d", vec![n("x")], vec![("kernel", int(2))]),
        F32,
        &["N", "C", "4", "4"],
    );
}

#[test]
fn normalisations_and_attention_lower() {
    one(&["M", "N"], F16, call("softmax", vec![n("x")]), F16, &["M", "N"]);
    one(&["M", "N"], F32, call_kw("log_softmax", vec![n("x")], vec![("axis", int(0))]), F32, &["M", "N"]);
    let p = program(vec![graph(
        "main",
        &[("M", None), ("D", None)],
        vec![t("x", F16, &["M", "D"]), t("g", F16, &["D"]), t("b", F16, &["D"])],
        vec![t("y", F16, &["M", "D"])],
        vec![assign("y", call_kw("layernorm", vec![n("x"), n("g"), n("b")], vec![("eps", float(1e-6))]))],
        &["y"],
    )]);
    lower_ok(&p);
    let att = |kw: Vec<(&str, Expr)>, extra: Vec<crate::frontend::ast::TensorDecl>| {
        let mut params = vec![
            t("q", F16, &["B", "H", "M", "D"]),
            t("k", F16, &["B", "H", "N", "D"]),
            t("v", F16, &["B", "H", "N", "D"]),
        ];
        params.extend(extra);
        let syms: Vec<(&str, Option<i64>)> = ["B", "H", "M", "N", "D"].iter().map(|s| (*s, None)).collect();
        lower_ok(&single(
            &syms,
            params,
            t("o", F16, &["B", "H", "M", "D"]),
            call_kw("attention", vec![n("q"), n("k"), n("v")], kw),
        ))
    };
    att(vec![], vec![]);
    att(vec![("causal", Expr::Bool(true, Default::default())), ("scale", float(0.125))], vec![]);
    att(vec![("mask", n("m"))], vec![t("m", F16, &["M", "N"])]);
    att(vec![("mask", n("m"))], vec![t("m", Bool, &["B", "1", "M", "N"])]);
}

#[test]
fn subgraphs_inline_with_symbol_binding_and_destructuring() {
    let split = graph(
        "halves",
        &[("R", None), ("S", Some(2))],
        vec![t("x", F32, &["R", "4"])],
        vec![t("lo", F32, &["R", "S"]), t("hi", F32, &["R", "S"])],
        vec![
            assign(
                "lo",
                call("shrink", vec![n("x"), list(vec![list(vec![int(0), n("R")]), list(vec![int(0), n("S")])])]),
            ),
            assign(
                "hi",
                call("shrink", vec![n("x"), list(vec![list(vec![int(0), n("R")]), list(vec![n("S"), int(4)])])]),
            ),
        ],
        &["lo", "hi"],
    );
    let twice = graph(
        "twice",
        &[],
        vec![t("z", F32, &["3", "2"])],
        vec![t("r", F32, &["3", "2"])],
        vec![assign("r", bin(BinOp::Mul, n("z"), int(2)))],
        &["r"],
    );
    let main = graph(
        "main",
        &[],
        vec![t("x", F32, &["3", "4"])],
        vec![t("y", F32, &["3", "2"])],
        vec![
            destructure(&["a", "b"], call("halves", vec![n("x")])),
            assign("y", bin(BinOp::Add, call("twice", vec![n("a")]), n("b"))),
        ],
        &["y"],
    );
    let g = lower_ok(&program(vec![split, twice, main]));
    assert_eq!(g.name, "main");
    assert_eq!(g.inputs().len(), 1);
    assert_eq!(out_shape(&g), "[3, 2]");
    assert_eq!(g.nodes().iter().filter(|n| matches!(n.op, Op::Shrink { .. })).count(), 2);
}

#[test]
fn entry_is_main_or_named() {
    let a = graph(
        "a",
        &[],
        vec![t("x", F32, &["2"])],
        vec![t("y", F32, &["2"])],
        vec![assign("y", call("relu", vec![n("x")]))],
        &["y"],
    );
    let main = graph(
        "main",
        &[],
        vec![t("x", F32, &["2"])],
        vec![t("y", F32, &["2"])],
        vec![assign("y", call("a", vec![n("x")]))],
        &["y"],
    );
    let p = program(vec![a, main]);
    assert_eq!(lower(&p, None).unwrap().name, "main");
    assert_eq!(lower(&p, Some("a")).unwrap().name, "a");
    assert_eq!(lower(&p, Some("zz")).unwrap_err().name, crate::ErrorName::UnknownName);
}

#[test]
fn literals_alone_and_returned_take_dtypes() {
    let p = program(vec![graph(
        "main",
        &[],
        vec![t("x", F16, &["2"])],
        vec![t("y", F16, &["2"]), t("c", F32, &["3"])],
        vec![
            assign("k", bin(BinOp::Div, int(1), int(4))),
            assign("y", bin(BinOp::Mul, n("x"), n("k"))),
            assign("c", float(1.5)),
        ],
        &["y", "c"],
    )]);
    let g = lower_ok(&p);
    assert_eq!(g.outputs.len(), 2);
    assert_eq!(fmt_shape(g.shape(g.outputs[1].node)), "[3]");
    assert!(g.nodes().iter().any(|n| n.op == Op::Const { value: 0.25 } && n.ty.dtype == F16));
}

use std::collections::BTreeMap;

use super::*;
use crate::affine::AffExpr;
use crate::diag::ErrorName;
use crate::sym::Dim;
use crate::test_graphs::{gemm, shape};
use crate::DType;

#[test]
fn gemm_builds_verifies_and_binds() {
    let g = gemm();
    assert!(verify::verify(&g).is_empty());
    assert_eq!(g.shape(NodeId(9)), &shape(&["M", "N"])[..]);
    assert_eq!(g.symbols.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["M", "K", "N"]);
    let vals: BTreeMap<String, i64> = [("M", 2), ("N", 3), ("K", 4)].iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let b = g.bind(&vals).unwrap();
    assert_eq!(b.shape(NodeId(9)), &[Dim::int(2), Dim::int(3)][..]);
    assert!(b.symbols.is_empty());
    assert!(verify::verify(&b).is_empty());
}

#[test]
fn rule_violations_have_their_names() {
    let mut g = Graph::new("t");
    let x = g.input("x", DType::F32, &shape(&["4", "3"])).unwrap();
    let y = g.input("y", DType::F32, &shape(&["4", "5"])).unwrap();
    let i = g.input("i", DType::I32, &shape(&["4", "3"])).unwrap();
    let name = |r: Result<NodeId, crate::Diagnostic>| r.unwrap_err().name;
    assert_eq!(name(g.binary(BinaryOp::Add, x, y)), ErrorName::BroadcastMismatch);
    assert_eq!(name(g.binary(BinaryOp::Add, x, i)), ErrorName::DTypeMismatch);
    assert_eq!(name(g.permute(x, &[0, 0])), ErrorName::InvalidPermutation);
    assert_eq!(name(g.reshape(x, &shape(&["5"]))), ErrorName::AxisSizeMismatch);
    let s = g.input("s", DType::F32, &shape(&["M", "K"])).unwrap();
    assert_eq!(name(g.reshape(s, &shape(&["M", "K", "2"]))), ErrorName::AxisSizeMismatch);
    assert_eq!(
        name(g.push(Op::Reduce { op: ReduceOp::Sum, axes: vec![0] }, vec![x], None, None)),
        ErrorName::AccDtypeMissing
    );
    assert_eq!(
        name(g.shrink(x, &shape(&["0", "0"]), &shape(&["4", "3"]), &shape(&["1", "0"]))),
        ErrorName::NegativeStride
    );
    let neg = AffExpr::parse("3 - i1").unwrap();
    assert_eq!(name(g.view(x, &shape(&["4", "3"]), &[AffExpr::var(0), neg])), ErrorName::NegativeStride);
    let far = AffExpr::parse("i1 + 1").unwrap();
    assert_eq!(name(g.view(x, &shape(&["4", "3"]), &[AffExpr::var(0), far])), ErrorName::AxisSizeMismatch);
    assert_eq!(name(g.unary(UnaryOp::Exp2, i)), ErrorName::DTypeMismatch);
}

#[test]
fn undecidable_reshape_becomes_a_constraint_checked_at_bind() {
    let mut g = Graph::new("t");
    let x = g.input("x", DType::F32, &shape(&["C"])).unwrap();
    let r = g.reshape(x, &shape(&["G", "R"])).unwrap();
    g.outputs.push(Output { name: "y".into(), node: r });
    g.declare_input_symbols().unwrap();
    assert_eq!(g.constraints.len(), 1);
    let vals = |c, gg, r| -> BTreeMap<String, i64> {
        [("C", c), ("G", gg), ("R", r)].iter().map(|(k, v)| (k.to_string(), *v)).collect()
    };
    assert!(g.bind(&vals(6, 2, 3)).is_ok());
    let e = g.bind(&vals(6, 2, 2)).unwrap_err();
    assert_eq!(e.name, ErrorName::AxisSizeMismatch);
    assert_eq!(e.node.as_deref(), Some("n1"));
}

#[test]
fn dims_are_inferred_from_inputs_and_checked() {
    let g = gemm();
    let got = g.resolve_dims(&BTreeMap::new(), Some(&[vec![2, 4], vec![4, 3]])).unwrap();
    assert_eq!(got.get("N"), Some(&3));
    let e = g.resolve_dims(&BTreeMap::new(), Some(&[vec![2, 4], vec![5, 3]])).unwrap_err();
    assert_eq!(e.name, ErrorName::AxisSizeMismatch);
    let e = g.resolve_dims(&BTreeMap::new(), None).unwrap_err();
    assert_eq!(e.name, ErrorName::UnboundSymbol);
}

#[test]
fn dump_lists_every_node() {
    let text = text::dump(&gemm());
    assert!(text.contains("n8 = REDUCE(n7) SUM axes=[2] : fp32[M, N]"), "{text}");
    assert!(text.contains("output C = n9"));
}

/// `MAX_NODES`: the last node fits, the next is `ResourceExceeded` at the
/// statement being built.
#[test]
fn the_node_limit_holds_at_its_value() {
    let mut g = Graph::new("t");
    for _ in 0..graph::MAX_NODES {
        g.constant(1.0, DType::F32).unwrap();
    }
    let span = crate::diag::span_of("x", 0, 1);
    g.cur_span = Some(span);
    let e = g.constant(1.0, DType::F32).unwrap_err();
    assert_eq!((e.name, e.span), (ErrorName::ResourceExceeded, Some(span)), "{e}");
    assert!(e.message.contains("MAX_NODES"), "{e}");
    assert_eq!(g.len(), graph::MAX_NODES);
}

/// `MAX_RANK`: a rank-16 tensor is built, one of rank 17 (an input or a
/// reshape to it) is `ResourceExceeded`.
#[test]
fn the_rank_limit_holds_at_its_value() {
    let mut g = Graph::new("t");
    let ones = |n: usize| vec![Dim::int(1); n];
    let x = g.input("x", DType::F32, &ones(graph::MAX_RANK)).unwrap();
    assert_eq!(g.input("y", DType::F32, &ones(graph::MAX_RANK + 1)).unwrap_err().name, ErrorName::ResourceExceeded);
    let e = g.reshape(x, &ones(graph::MAX_RANK + 1)).unwrap_err();
    assert_eq!(e.name, ErrorName::ResourceExceeded, "{e}");
    assert!(e.message.contains("RESHAPE of rank 17"), "{e}");
}

/// `MAX_SYMBOLS` for symbols found in shapes: 64 are declared, the 65th is
/// `ResourceExceeded` at the node that uses it.
#[test]
fn the_symbol_limit_holds_for_symbols_found_in_shapes() {
    let mut g = Graph::new("t");
    for k in 0..graph::MAX_SYMBOLS {
        g.input(&format!("x{k}"), DType::F32, &shape(&[&format!("S{k}")])).unwrap();
    }
    g.declare_input_symbols().unwrap();
    assert_eq!(g.symbols.len(), graph::MAX_SYMBOLS);
    g.input("last", DType::F32, &shape(&["T"])).unwrap();
    let e = g.declare_input_symbols().unwrap_err();
    assert_eq!((e.name, e.node.as_deref()), (ErrorName::ResourceExceeded, Some("n64")), "{e}");
}

/// A reshape that merges adjacent axes (and adds or drops size-1 ones)
/// says how many axes each result axis holds; one that splits an axis, or
/// regroups across a boundary, is `None`; symbolic extents match one to
/// one.
#[test]
fn reshape_merges_counts_merged_axes_and_refuses_splits() {
    let ints = |v: &[i64]| v.iter().map(|&x| Dim::int(x)).collect::<Vec<_>>();
    assert_eq!(op::reshape_merges(&ints(&[2, 12, 32]), &ints(&[2, 1, 384])), Some(vec![1, 0, 2]));
    assert_eq!(op::reshape_merges(&ints(&[1, 16, 12, 32]), &ints(&[16, 384])), Some(vec![1, 2]));
    assert_eq!(op::reshape_merges(&ints(&[16, 384]), &ints(&[16, 12, 32])), None);
    assert_eq!(op::reshape_merges(&ints(&[4, 6]), &ints(&[6, 4])), None);
    let s = shape(&["S"]);
    assert_eq!(
        op::reshape_merges(&[s[0].clone(), Dim::int(8)], &[Dim::int(1), s[0].clone(), Dim::int(8)]),
        Some(vec![0, 1, 1])
    );
    assert_eq!(op::reshape_merges(&[s[0].clone(), Dim::int(8)], &[Dim::int(8), s[0].clone()]), None);
}

/// A refusal names the actual problem: a wrong concrete input size is not "needs 2 = 2", a remainder in a VIEW map is not "a
/// negative step".
#[test]
fn refusals_name_the_actual_problem() {
    let mut g = Graph::new("t");
    let x = g.input("x", DType::F32, &shape(&["N", "2"])).unwrap();
    let y = g.input("y", DType::F32, &shape(&["N", "N + 1"])).unwrap();
    g.outputs.push(Output { name: "a".into(), node: x });
    g.outputs.push(Output { name: "b".into(), node: y });
    g.declare_input_symbols().unwrap();
    let e = g.resolve_dims(&BTreeMap::new(), Some(&[vec![4, 3], vec![4, 5]])).unwrap_err();
    assert_eq!(e.message, "input `x` has size 3 on axis 1 where the graph declares [N, 2]");
    let e = g.resolve_dims(&BTreeMap::new(), Some(&[vec![4, 2], vec![4, 6]])).unwrap_err();
    assert_eq!(e.message, "input `y` has size 6 on axis 1 where the graph declares [N, N + 1] (N + 1 = 5)");

    let mut g = Graph::new("t");
    let x = g.input("x", DType::F32, &shape(&["7"])).unwrap();
    let wrap = g.view(x, &shape(&["20"]), &[AffExpr::parse("i0 % 7").unwrap()]).unwrap_err();
    assert_eq!(wrap.name, ErrorName::Unsupported);
    assert!(wrap.message.contains("subtracts a floor division (a remainder `%` does)"), "{}", wrap.message);
    assert!(!wrap.message.contains("negative step"), "{}", wrap.message);
    let back = g.view(x, &shape(&["7"]), &[AffExpr::parse("6 - i0").unwrap()]).unwrap_err();
    assert_eq!(back.name, ErrorName::NegativeStride);
    assert!(back.message.contains("has the negative step -1 along i0"), "{}", back.message);
}

/// Shape arithmetic is exact at the ends of `i64`: a step of `i64::MAX`
/// keeps one element (a saturating `(hi − lo + step − 1)/step` would give
/// 0), and a VIEW whose floor division's operand passes `i64::MAX` is
/// refused (a saturated bound would let it read past its source).
#[test]
fn shape_arithmetic_is_exact_at_the_ends_of_i64() {
    let mut g = Graph::new("t");
    let x = g.input("x", DType::F32, &shape(&["10"])).unwrap();
    let max = Dim::int(i64::MAX);
    let s = g.shrink(x, &[Dim::int(0)], &[Dim::int(10)], std::slice::from_ref(&max)).unwrap();
    assert_eq!(g.shape(s), &[Dim::int(1)]);
    let s = g.shrink(x, &[Dim::int(9)], &[Dim::int(10)], &[max]).unwrap();
    assert_eq!(g.shape(s), &[Dim::int(1)]);

    let m = g.input("m", DType::F32, &shape(&["2"])).unwrap();
    let big = i64::MAX;
    let map = AffExpr::parse(&format!("({big}*i0 + {big}*i1 + 1) / {big}")).unwrap();
    let e = g.view(m, &shape(&["2", "2"]), &[map]).unwrap_err();
    assert_eq!(e.name, ErrorName::AxisSizeMismatch);
    assert!(e.message.contains("overflows i64"), "{}", e.message);
}

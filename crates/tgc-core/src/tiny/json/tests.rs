use crate::diag::{Diagnostic, ErrorName};
use crate::sym::Dim;
use crate::tiny::{BinaryOp, Op, ReduceOp};
use crate::DType;

use super::*;

/// A node-format document with the given `uops` lines (and extra top-level keys).
fn doc(uops: &[&str], extra: &str) -> String {
    format!("{{\"uops\": [\n{}\n]{extra}}}", uops.join(",\n"))
}

const A: &str = r#"{"id":"a","uop":"INPUT","arg":{"tensor_id":"A","dtype":"fp32","shape":["M","K"]}}"#;
const B: &str = r#"{"id":"b","uop":"INPUT","arg":{"tensor_id":"B","dtype":"f32","shape":["K","N"]}}"#;

fn err(text: &str) -> Diagnostic {
    match load_json(text) {
        Ok(g) => panic!("loaded:\n{}", crate::tiny::text::dump(&g)),
        Err(e) => e,
    }
}

/// Asserts the error's name and node, and that its span is on the node's line.
fn check(text: &str, name: ErrorName, node: &str, msg: &str) {
    let e = err(text);
    assert_eq!((e.name, e.node.as_deref()), (name, Some(node)), "{e}");
    assert!(e.message.contains(msg), "`{}` should mention `{msg}`", e.message);
    let line = text.lines().position(|l| l.contains(&format!("\"id\":\"{node}\""))).map(|l| l as u32 + 1);
    assert_eq!(e.span.map(|s| s.line), line, "{e}");
}

fn dims(s: &[&str]) -> Vec<Dim> {
    s.iter().map(|x| Dim::parse(x).unwrap()).collect()
}

#[test]
fn a_duplicate_id_is_reported_at_its_second_use() {
    let e = err(&doc(&[A, B, A], ""));
    assert_eq!(
        (e.name, e.node.as_deref(), e.span.map(|s| s.line)),
        (ErrorName::SyntaxError, Some("a"), Some(4)),
        "{e}"
    );
}

#[test]
fn malformed_json_points_at_the_position() {
    let e = err("{\"uops\": [\n  {\"id\": \"a\",, }\n]}");
    assert_eq!(e.name, ErrorName::SyntaxError);
    let s = e.span.unwrap();
    assert_eq!((s.line, s.col), (2, 14), "{e}");
    assert_eq!(err("[1, 2]").name, ErrorName::SyntaxError);
}

#[test]
fn node_errors_carry_their_name_and_node() {
    use ErrorName::*;
    let c = |line: &str| doc(&[A, B, line], "");
    check(&c(r#"{"id":"x","uop":"CONTRACT","src":["a","b"]}"#), UnknownOp, "x", "CONTRACT");
    check(&c(r#"{"id":"x","uop":"ADD","src":["a"]}"#), ArityMismatch, "x", "2 source");
    check(&c(r#"{"id":"x","uop":"RESHAPE","src":["a"],"arg":{}}"#), SyntaxError, "x", "arg.result_shape");
    check(
        &c(r#"{"id":"x","uop":"RESHAPE","src":["a"],"arg":{"result_shape":["M",true]}}"#),
        SyntaxError,
        "x",
        "arg.result_shape[1]",
    );
    check(
        &c(r#"{"id":"x","uop":"RESHAPE","src":["a"],"arg":{"result_shape":["M+"]}}"#),
        SyntaxError,
        "x",
        "arg.result_shape[0]",
    );
    check(
        &c(r#"{"id":"x","uop":"PERMUTE","src":["a"],"arg":{"perm":[1,0],"prem":[0]}}"#),
        SyntaxError,
        "x",
        "arg.prem",
    );
    check(&c(r#"{"id":"x","uop":"CAST","src":["a"],"arg":{"to":"fp64"}}"#), SyntaxError, "x", "arg.to");
    check(&c(r#"{"id":"x","uop":"ADD","src":["a","zz"]}"#), UnknownName, "x", "zz");
    check(&c(r#"{"id":"x","uop":"ADD","src":["a","b"]}"#), BroadcastMismatch, "x", "[M, K]");
    check(
        &c(r#"{"id":"x","uop":"REDUCE","src":["a"],"arg":{"op":"SUM","axes":["K"]}}"#),
        AccDtypeMissing,
        "x",
        "dtype",
    );
    check(
        &c(r#"{"id":"x","uop":"REDUCE","src":["a"],"arg":{"op":"SUM","axes":["N"],"dtype":"fp32"}}"#),
        InvalidAxis,
        "x",
        "`N`",
    );
    check(
        &c(r#"{"id":"x","uop":"REDUCE","src":["a"],"arg":{"op":"SUM","axes":[2],"dtype":"fp32"}}"#),
        InvalidAxis,
        "x",
        "2",
    );
    check(
        &c(r#"{"id":"x","uop":"REDUCE","src":["a"],"arg":{"op":"MEAN","axes":[0],"dtype":"fp32"}}"#),
        UnknownOp,
        "x",
        "MEAN",
    );
    check(&c(r#"{"id":"x","uop":"PERMUTE","src":["a"],"arg":{"perm":[0,0]}}"#), InvalidPermutation, "x", "permutation");
    check(
        &c(r#"{"id":"x","uop":"POOL","src":["a"],"arg":{"kernel":[2],"stride":[0]}}"#),
        NegativeStride,
        "x",
        "stride",
    );
    check(
        &c(r#"{"id":"x","uop":"VIEW","src":["a"],"arg":{"result_shape":["M"],"index_map":["i0*i0","0"]}}"#),
        SyntaxError,
        "x",
        "index_map[0]",
    );
    check(&c(r#"{"id":"x","uop":"CONST","arg":{"value":1.5,"dtype":"i32"}}"#), DTypeMismatch, "x", "1.5");
}

#[test]
fn a_reshape_that_cannot_keep_the_count_is_axis_size_mismatch() {
    let sq = r#"{"id":"s","uop":"INPUT","arg":{"tensor_id":"S","dtype":"fp32","shape":[2,3]}}"#;
    check(
        &doc(&[sq, r#"{"id":"x","uop":"RESHAPE","src":["s"],"arg":{"result_shape":[5]}}"#], ""),
        ErrorName::AxisSizeMismatch,
        "x",
        "RESHAPE",
    );
}

#[test]
fn a_reduce_axis_name_must_pick_exactly_one_axis() {
    let sq = r#"{"id":"s","uop":"INPUT","arg":{"tensor_id":"S","dtype":"fp32","shape":["M","M"]}}"#;
    let r = r#"{"id":"r","uop":"REDUCE","src":["s"],"arg":{"op":"MAX","axes":["M"],"dtype":"fp32"}}"#;
    check(&doc(&[sq, r], ""), ErrorName::InvalidAxis, "r", "use an index");
    let r = r#"{"id":"r","uop":"REDUCE","src":["s"],"arg":{"op":"MAX","axes":[-1],"dtype":"fp32"}}"#;
    let g = load_json(&doc(&[sq, r], "")).unwrap();
    assert_eq!(g.node(g.find("r").unwrap()).op, Op::Reduce { op: crate::tiny::ReduceOp::Max, axes: vec![1] });
}

#[test]
fn broadcast_dimensions_must_agree_with_the_shapes() {
    let x = r#"{"id":"x","uop":"INPUT","arg":{"tensor_id":"X","dtype":"fp16","shape":["M",1,"K"]}}"#;
    let ok =
        r#"{"id":"e","uop":"EXPAND","src":["x"],"arg":{"result_shape":["M","N","K"],"broadcast_dimensions":[0,2]}}"#;
    assert!(load_json(&doc(&[x, ok], "")).is_ok());
    for bd in ["[0]", "[0,1,2]", "[1,2]"] {
        let bad = format!(
            r#"{{"id":"e","uop":"EXPAND","src":["x"],"arg":{{"result_shape":["M","N","K"],"broadcast_dimensions":{bd}}}}}"#
        );
        check(&doc(&[x, &bad], ""), ErrorName::BroadcastMismatch, "e", "broadcast_dimensions");
    }
}

#[test]
fn an_expand_of_lower_rank_is_right_aligned() {
    let v = r#"{"id":"v","uop":"INPUT","arg":{"tensor_id":"V","dtype":"fp16","shape":["N"]}}"#;
    let e = r#"{"id":"e","uop":"EXPAND","src":["v"],"arg":{"result_shape":["M","N"],"broadcast_dimensions":[1]}}"#;
    let g = load_json(&doc(&[v, e], "")).unwrap();
    let r = g.find("e.reshape").unwrap();
    assert_eq!(g.shape(r), &dims(&["1", "N"])[..]);
    assert_eq!(g.node(g.find("e").unwrap()).src, vec![r]);
}

#[test]
fn immediates_become_expanded_constants_of_the_other_dtype() {
    let m = r#"{"id":"m","uop":"MUL","src":[0.5,"a"]}"#;
    let g = load_json(&doc(&[A, m], "")).unwrap();
    let c = g.find("m.0.const").unwrap();
    assert_eq!((&g.node(c).op, g.dtype(c)), (&Op::Const { value: 0.5 }, DType::F32));
    let e = g.find("m.0.expand").unwrap();
    assert_eq!(g.shape(e), &dims(&["M", "K"])[..]);
    assert_eq!(g.node(g.find("m").unwrap()).src, vec![e, g.find("a").unwrap()]);
    check(&doc(&[r#"{"id":"m","uop":"MUL","src":[1,2]}"#], ""), ErrorName::SyntaxError, "m", "immediate");
}

#[test]
fn operands_broadcast_keepdim_for_reduce_results_else_right_aligned() {
    // Right-aligned: [M,1] and [N] broadcast to [M,N]; both sides expand.
    let x = r#"{"id":"x","uop":"INPUT","arg":{"tensor_id":"X","dtype":"fp32","shape":["M",1]}}"#;
    let y = r#"{"id":"y","uop":"INPUT","arg":{"tensor_id":"Y","dtype":"fp32","shape":["N"]}}"#;
    let g = load_json(&doc(&[x, y, r#"{"id":"s","uop":"ADD","src":["x","y"]}"#], "")).unwrap();
    assert_eq!(g.shape(g.find("s").unwrap()), &dims(&["M", "N"])[..]);
    assert!(g.find("s.1.reshape").is_some() && g.find("s.0.expand").is_some() && g.find("s.1.expand").is_some());
    // Keepdim: a [4,4] tensor minus its max over the *first* axis, where
    // right alignment would silently pair the wrong axes.
    let s = r#"{"id":"s","uop":"INPUT","arg":{"tensor_id":"S","dtype":"fp32","shape":[4,4]}}"#;
    let r = r#"{"id":"r","uop":"REDUCE","src":["s"],"arg":{"op":"MAX","axes":[0],"dtype":"fp32"}}"#;
    let n = r#"{"id":"n","uop":"NEG","src":["r"]}"#;
    let g = load_json(&doc(&[s, r, n, r#"{"id":"d","uop":"ADD","src":["s","n"]}"#], "")).unwrap();
    assert_eq!(g.shape(g.find("d.1.keepdim").unwrap()), &dims(&["1", "4"])[..]);
}

#[test]
fn float_operands_of_different_widths_meet_in_fp32_and_others_do_not() {
    let h = r#"{"id":"h","uop":"INPUT","arg":{"tensor_id":"H","dtype":"fp16","shape":["M","K"]}}"#;
    let g = load_json(&doc(&[A, h, r#"{"id":"s","uop":"ADD","src":["h","a"]}"#], "")).unwrap();
    let s = g.find("s").unwrap();
    assert_eq!(g.dtype(s), DType::F32);
    assert_eq!(g.node(g.find("s.0.cast").unwrap()).op, Op::Cast);
    let i = r#"{"id":"i","uop":"INPUT","arg":{"tensor_id":"I","dtype":"i32","shape":["M","K"]}}"#;
    check(&doc(&[A, i, r#"{"id":"s","uop":"ADD","src":["a","i"]}"#], ""), ErrorName::DTypeMismatch, "s", "cast");
}

#[test]
fn pool_is_a_sliding_window_view() {
    let x = r#"{"id":"x","uop":"INPUT","arg":{"tensor_id":"X","dtype":"fp32","shape":[2,9,8]}}"#;
    let p = r#"{"id":"p","uop":"POOL","src":["x"],"arg":{"kernel":[3,2],"stride":[2,3],"dilation":[2,1]}}"#;
    let g = load_json(&doc(&[x, p], "")).unwrap();
    let p = g.find("p").unwrap();
    // O = (9 - 2*2 - 1)/2 + 1 = 3 and (8 - 1 - 1)/3 + 1 = 3.
    assert_eq!(g.shape(p), &dims(&["2", "3", "3", "3", "2"])[..]);
    let Op::View { map } = &g.node(p).op else { panic!("POOL lowers to VIEW") };
    let want: Vec<_> =
        ["i0", "2*i1 + 2*i3", "3*i2 + i4"].iter().map(|s| crate::affine::AffExpr::parse(s).unwrap()).collect();
    assert_eq!(map, &want);
}

#[test]
fn outputs_are_sinks_unless_listed_and_must_exist() {
    let n = r#"{"id":"n","uop":"NEG","src":["a"]}"#;
    let g = load_json(&doc(&[A, B, n], "")).unwrap();
    let names: Vec<&str> = g.outputs.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["b", "n"]);
    let g = load_json(&doc(&[A, n], r#", "outputs": [{"name":"out","id":"a"}]"#)).unwrap();
    assert_eq!((g.outputs[0].name.as_str(), g.outputs[0].node), ("out", g.find("a").unwrap()));
    let e = err(&doc(&[A, n], r#", "outputs": [{"name":"out","id":"q"}]"#));
    assert_eq!((e.name, e.node.as_deref()), (ErrorName::UnknownName, Some("q")));
}

#[test]
fn declared_symbols_keep_defaults_and_must_cover_the_graph() {
    let g = load_json(&doc(&[A], r#", "symbols": [{"name":"K","default":8},{"name":"M"}]"#)).unwrap();
    assert_eq!(
        g.symbols.iter().map(|s| (s.name.as_str(), s.default)).collect::<Vec<_>>(),
        [("K", Some(8)), ("M", None)]
    );
    let e = err(&doc(&[A], r#", "symbols": [{"name":"M"}]"#));
    assert_eq!(e.name, ErrorName::UnknownName);
    assert!(e.message.contains("`K`"), "{e}");
    // Symbols only in op arguments are declared too.
    let s = r#"{"id":"s","uop":"SHRINK","src":["a"],"arg":{"lo":["o",0],"hi":["o+1","K"]}}"#;
    let g = load_json(&doc(&[A, s], "")).unwrap();
    assert!(g.symbols.iter().any(|s| s.name == "o"));
}

#[test]
fn unknown_top_level_keys_and_node_keys_are_rejected() {
    assert_eq!(err(&doc(&[A], r#", "uopz": []"#)).name, ErrorName::SyntaxError);
    let e = err(&doc(&[r#"{"id":"a","uop":"NEG","srcs":[]}"#], ""));
    assert_eq!((e.name, e.node.as_deref()), (ErrorName::SyntaxError, Some("a")));
}

#[test]
fn to_json_writes_what_load_json_reads() {
    let text = doc(
        &[
            A,
            r#"{"id":"f","uop":"FLIP","src":["a"],"arg":{"axes":[-1]}}"#,
            r#"{"id":"p","uop":"PAD","src":["f"],"arg":{"pad":[[1,0],[0,"K"]],"value":"-inf"}}"#,
            r#"{"id":"v","uop":"VIEW","src":["p"],"arg":{"result_shape":["M",2],"index_map":["i0 + 1","floor(i1 / 2) + 1"]}}"#,
            r#"{"id":"c","uop":"CMPLT","src":["v",0]}"#,
            r#"{"id":"w","uop":"WHERE","src":["c",1,"v"]}"#,
        ],
        r#", "name": "t""#,
    );
    let g = load_json(&text).unwrap();
    assert_eq!(g.name, "t");
    let back = load_json(&to_json(&g)).unwrap();
    for (a, b) in g.nodes().iter().zip(back.nodes()) {
        assert_eq!((&a.op, &a.src, &a.ty, &a.label), (&b.op, &b.src, &b.ty, &b.label));
    }
    assert_eq!(back.len(), g.len());
    assert!(matches!(g.node(g.find("p").unwrap()).op, Op::Pad { value, .. } if value == f64::NEG_INFINITY));
    assert_eq!(g.dtype(g.find("w.1.const").unwrap()), DType::F32);
    assert_eq!(g.node(g.find("c").unwrap()).op, Op::Binary(BinaryOp::Cmplt));
}

/// `GATHER` in the node format: `[x, index]` sources and an `axis`
/// (negative from the end); written back as it was read; a float index
/// or a bad axis is refused.
#[test]
fn gather_nodes_load_and_write_back() {
    let i = r#"{"id":"i","uop":"INPUT","arg":{"tensor_id":"I","dtype":"i32","shape":["M",3]}}"#;
    let text = doc(&[A, i, r#"{"id":"g","uop":"GATHER","src":["a","i"],"arg":{"axis":-1}}"#], "");
    let g = load_json(&text).unwrap();
    let n = g.node(g.find("g").unwrap());
    assert_eq!((&n.op, n.ty.shape.len()), (&Op::Gather { axis: 1 }, 2));
    let back = load_json(&to_json(&g)).unwrap();
    for (a, b) in g.nodes().iter().zip(back.nodes()) {
        assert_eq!((&a.op, &a.src, &a.ty), (&b.op, &b.src, &b.ty));
    }
    let bad = doc(&[A, i, r#"{"id":"g","uop":"GATHER","src":["a","i"],"arg":{"axis":2}}"#], "");
    assert_eq!(err(&bad).name, ErrorName::InvalidAxis);
    let bad = doc(&[A, B, r#"{"id":"g","uop":"GATHER","src":["a","b"],"arg":{"axis":0}}"#], "");
    assert_eq!(err(&bad).name, ErrorName::DTypeMismatch);
}

/// `SCAN` in the node format: an `op` of `REDUCE`'s names and an `axis`
/// (negative from the end); written back as it was read; an unknown op, a
/// bad axis or a bool source is refused.
#[test]
fn scan_nodes_load_and_write_back() {
    let text = doc(&[A, r#"{"id":"s","uop":"SCAN","src":["a"],"arg":{"op":"PROD","axis":-2}}"#], "");
    let g = load_json(&text).unwrap();
    let want = Op::Scan { op: ReduceOp::Prod, axis: 0, exclusive: false, reverse: false };
    assert_eq!(g.node(g.find("s").unwrap()).op, want);
    let flags = r#"{"id":"s","uop":"SCAN","src":["a"],"arg":{"op":"MAX","axis":1,"exclusive":true,"reverse":true}}"#;
    let g = load_json(&doc(&[A, flags], "")).unwrap();
    assert_eq!(
        g.node(g.find("s").unwrap()).op,
        Op::Scan { op: ReduceOp::Max, axis: 1, exclusive: true, reverse: true }
    );
    let back = load_json(&to_json(&g)).unwrap();
    for (a, b) in g.nodes().iter().zip(back.nodes()) {
        assert_eq!((&a.op, &a.src, &a.ty), (&b.op, &b.src, &b.ty));
    }
    let bad = doc(&[A, r#"{"id":"s","uop":"SCAN","src":["a"],"arg":{"op":"MEAN","axis":0}}"#], "");
    assert_eq!(err(&bad).name, ErrorName::UnknownOp);
    let bad = doc(&[A, r#"{"id":"s","uop":"SCAN","src":["a"],"arg":{"op":"SUM","axis":2}}"#], "");
    assert_eq!(err(&bad).name, ErrorName::InvalidAxis);
    let flag = r#"{"id":"f","uop":"CMPLT","src":["a","a"]}"#;
    let bad = doc(&[A, flag, r#"{"id":"s","uop":"SCAN","src":["f"],"arg":{"op":"SUM","axis":0}}"#], "");
    assert_eq!(err(&bad).name, ErrorName::DTypeMismatch);
}

// --- the op-list import -------------------------------------------------------

fn ops(ops: &[&str], values: &str) -> String {
    format!("{{\"ops\": [\n{}\n], \"values\": {{{values}}}}}", ops.join(",\n"))
}

const VALUES: &str = r#""X":{"dtype":"fp16","shape":["M","N"]}"#;

#[test]
fn op_list_errors_carry_the_op_name() {
    use ErrorName::*;
    let one = |op: &str, values: &str| err(&ops(&[op], values));
    let e = one(r#"{"op":"Unary","name":"g","fn":"gelu","inputs":["X"],"outputs":["Y"]}"#, VALUES);
    assert_eq!((e.name, e.node.as_deref()), (Unsupported, Some("g")));
    let e = one(r#"{"op":"Unary","name":"g","fn":"frob","inputs":["X"],"outputs":["Y"]}"#, VALUES);
    assert_eq!((e.name, e.node.as_deref()), (UnknownOp, Some("g")));
    let e = one(r#"{"op":"Binary","name":"b","fn":"add","inputs":["X"],"outputs":["Y"]}"#, VALUES);
    assert_eq!((e.name, e.node.as_deref()), (ArityMismatch, Some("b")));
    let e = one(r#"{"op":"Unary","name":"r","fn":"relu","inputs":["Z"],"outputs":["Y"]}"#, VALUES);
    assert_eq!((e.name, e.node.as_deref()), (UnknownName, Some("r")));
    let v = format!(r#"{VALUES}, "Y":{{"dtype":"fp32","shape":["M","N"]}}"#);
    let e = one(r#"{"op":"Unary","name":"r","fn":"relu","inputs":["X"],"outputs":["Y"]}"#, &v);
    assert_eq!((e.name, e.node.as_deref()), (DTypeMismatch, Some("r")));
    let v = format!(r#"{VALUES}, "Y":{{"dtype":"fp16","shape":["M"]}}"#);
    let e = one(r#"{"op":"Unary","name":"r","fn":"relu","inputs":["X"],"outputs":["Y"]}"#, &v);
    assert_eq!((e.name, e.node.as_deref()), (AxisSizeMismatch, Some("r")));
    let e = one(r#"{"op":"Reduce","name":"s","fn":"sum","inputs":["X"],"outputs":["Y"],"axes":["K"]}"#, VALUES);
    assert_eq!((e.name, e.node.as_deref()), (InvalidAxis, Some("s")));
}

#[test]
fn op_list_reduce_accumulates_in_fp32_and_exp_is_exp2() {
    let text = ops(
        &[
            r#"{"op":"Unary","name":"e","fn":"exp","inputs":["X"],"outputs":["E"]}"#,
            r#"{"op":"Reduce","name":"s","fn":"sum","inputs":["E"],"outputs":["S"],"axes":[-1]}"#,
            r#"{"op":"Binary","name":"d","fn":"div","inputs":["E","S"],"outputs":["P"]}"#,
        ],
        VALUES,
    );
    let g = load_json(&text).unwrap();
    let acc = g.find("S.acc").unwrap();
    assert_eq!(g.dtype(acc), DType::F32);
    assert_eq!(g.dtype(g.find("S").unwrap()), DType::F16);
    assert_eq!(g.node(g.find("E").unwrap()).op, Op::Unary(crate::tiny::UnaryOp::Exp2));
    assert_eq!(g.outputs.iter().map(|o| o.name.as_str()).collect::<Vec<_>>(), ["P"]);
    // `S` [M] meets `E` [M, N] through the keepdim rule.
    assert!(g.find("P.1.keepdim").is_some());
}

/// `MAX_SYMBOLS` for the `symbols` list: 64 load, the 65th is
/// `ResourceExceeded` on its line.
#[test]
fn the_symbol_list_holds_at_most_max_symbols() {
    let list = |n: usize| {
        let syms: Vec<String> = (0..n).map(|k| format!("{{\"name\":\"S{k}\"}}")).collect();
        format!(", \"symbols\": [\n{}, {{\"name\":\"M\"}}, {{\"name\":\"K\"}}\n]", syms.join(",\n"))
    };
    let max = crate::tiny::graph::MAX_SYMBOLS;
    assert_eq!(load_json(&doc(&[A], &list(max - 2))).unwrap().symbols.len(), max);
    let text = doc(&[A], &list(max - 1));
    let e = err(&text);
    assert_eq!(e.name, ErrorName::ResourceExceeded, "{e}");
    let line = text.lines().position(|l| l.contains("\"name\":\"K\"")).unwrap() as u32 + 1;
    assert_eq!(e.span.map(|s| s.line), Some(line), "{e}");
}

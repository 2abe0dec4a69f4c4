//! Plan tests: the spec's examples, round trips, and every validation rule
//! at its position.

use proptest::prelude::*;

use super::*;
use crate::diag::ErrorName;
use crate::DType;

fn example(name: &str) -> String {
    let path = format!("{}/../../tests/plans/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn gemm() -> Problem {
    Problem::gemm(4096, 4096, 4096, DType::F16)
}

/// 1-based line and column of the first occurrence of `at` in `text`.
fn position(text: &str, at: &str) -> (u32, u32) {
    let off = text.find(at).unwrap_or_else(|| panic!("`{at}` is not in:\n{text}"));
    let line = text[..off].matches('\n').count() as u32 + 1;
    let col = text[..off].rsplit('\n').next().map_or(0, |l| l.chars().count()) as u32 + 1;
    (line, col)
}

fn assert_at(e: &crate::Diagnostic, name: ErrorName, text: &str, at: &str) {
    assert_eq!(e.name, name, "{e}\n{text}");
    let sp = e.span.unwrap_or_else(|| panic!("no position: {e}"));
    assert_eq!((sp.line, sp.col), position(text, at), "{e}\n{text}");
}

#[test]
fn the_spec_dsl_example_loads_verbatim_and_validates() {
    let text = example("spec_1_7.plan");
    let p = parse_dsl(&text).unwrap();
    assert_eq!(p.loops.len(), 4);
    assert_eq!(p.bind.len(), 4);
    assert_eq!(p.pipeline.as_ref().unwrap().value.stages.value, 2);
    assert_eq!(validate(&p, &target::SM80, &gemm()), vec![]);
    assert_eq!(validate(&p, &target::SM90, &gemm()), vec![]);
    // Canonical text: one statement a line, same order as the spec.
    let printed = print_dsl(&p);
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ").replace(" ;", ";");
    assert_eq!(squash(&printed), squash(&text));
    assert_eq!(parse_dsl(&printed).unwrap(), p);
}

#[test]
fn the_gemm_plan_reads_the_same_from_json_and_dsl() {
    let j = from_json(&example("gemm_sm80.json")).unwrap();
    let d = parse_dsl(&example("gemm_sm80.plan")).unwrap();
    assert_eq!(j, d);
    assert_eq!(j.tile.as_ref().unwrap().value, [128, 64, 64]);
    assert_eq!(validate(&j, &target::SM80, &gemm()), vec![]);
    // Round trips through both printers.
    assert_eq!(from_json(&to_json(&j)).unwrap(), j);
    assert_eq!(parse_dsl(&print_dsl(&j)).unwrap(), j);
    assert_eq!(from_json(&to_json(&d)).unwrap(), parse_dsl(&print_dsl(&j)).unwrap());
    // Printing is canonical: printing again gives the same text.
    assert_eq!(to_json(&from_json(&to_json(&j)).unwrap()), to_json(&j));
    expect_test::expect![[r#"
        arch sm80;
        tile 128 64 64;
        warp_tile 64x64;
        bind m.o block.y;
        bind n.o block.x;
        bind m.i.o warp.y;
        bind n.i.o warp.x;
        pipeline stages=2;
        cache_read A smem at=k.i pingpong=true;
        cache_read B smem at=k.i pingpong=true;
        vectorize n.i.i 8;
        predicate_tail m.i.i n.i.i k.i.i;
        epilogue bias relu;
        algo_choice matmul implicit_gemm;
        layout_hint A_swizzle true;
        layout_hint B_swizzle true;
        layout_hint C_stride row;
        local_edge sum_k relu reg;
    "#]]
    .assert_eq(&print_dsl(&j));
}

#[test]
fn the_arch_must_match_the_target() {
    let text = example("gemm_sm80.json");
    let errs = validate(&from_json(&text).unwrap(), &target::SM90, &gemm());
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_at(&errs[0], ErrorName::Unsupported, &text, "\"sm80\"");
}

#[test]
fn dsl_syntax_errors_are_positioned() {
    for (text, name, at) in [
        ("split m 128;\nspilt n 64;", ErrorName::SyntaxError, "spilt"),
        ("split m 12x;", ErrorName::SyntaxError, "12x"),
        ("split M 128;", ErrorName::SyntaxError, "M 128"),
        ("fuse a b c;", ErrorName::SyntaxError, "c;"),
        ("pipeline k.i stages 2;", ErrorName::SyntaxError, "2;"),
        ("cache_read A gmem at=k.i;", ErrorName::SyntaxError, "gmem"),
        ("cache_read A smem at=k.i pingpong=yes;", ErrorName::SyntaxError, "yes"),
        ("bind m.o thread.x;", ErrorName::UnknownName, "thread.x"),
        ("vectorize n 8; vectorize m 4;", ErrorName::SyntaxError, "vectorize m"),
        ("split m 128 4;", ErrorName::SyntaxError, "4;"),
        ("split m 128 $", ErrorName::SyntaxError, "$"),
        ("  reorder;", ErrorName::SyntaxError, "reorder"),
        ("warp_tile 64by64;", ErrorName::SyntaxError, "64by64"),
        ("local_edge a b smem;", ErrorName::UnknownName, "smem"),
    ] {
        let e = parse_dsl(text).unwrap_err();
        assert_at(&e, name, text, at);
    }
}

#[test]
fn json_errors_are_positioned() {
    for (text, name, at) in [
        ("{\"tile\": [1, 2, 3],\n \"stagez\": 2}", ErrorName::SyntaxError, "\"stagez\""),
        ("{\"stages\": 2, \"stages\": 3}", ErrorName::SyntaxError, "\"stages\": 3"),
        ("{\"tile\": [1, 2]}", ErrorName::SyntaxError, "[1, 2]"),
        ("{\"bind\": {\"m.o\": \"lane.x\"}}", ErrorName::UnknownName, "\"lane.x\""),
        (
            "{\"cache\": [{\"tensor\": \"A\", \"where\": \"smem\", \"at\": \"k.i\", \"pin\": 1}]}",
            ErrorName::SyntaxError,
            "\"pin\"",
        ),
        ("{\"vectorize\": {\"axis\": \"N\", \"width\": 8}}", ErrorName::SyntaxError, "\"N\""),
        ("{\"loops\": [{\"op\": \"tile\"}]}", ErrorName::SyntaxError, "\"op\""),
        ("{\"pipeline_axis\": \"k.i\"}", ErrorName::SyntaxError, "\"k.i\""),
        ("{\"layout_hints\": {\"A\": \"true\"}}", ErrorName::SyntaxError, "\"true\""),
        ("{\"tile\": [1, 2, 3],\n  \"stages\": }", ErrorName::SyntaxError, "}"),
    ] {
        let e = from_json(text).unwrap_err();
        assert_at(&e, name, text, at);
    }
}

/// Validates `text` (DSL) for sm80 and a 4096³ f16 GEMM; expects exactly
/// the errors `want` (name, first occurrence of the text it points at).
fn check(text: &str, want: &[(ErrorName, &str)]) {
    let p = parse_dsl(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let errs = validate(&p, &target::SM80, &gemm());
    assert_eq!(errs.len(), want.len(), "{errs:#?}\n{text}");
    for (e, (name, at)) in errs.iter().zip(want) {
        assert_at(e, *name, text, at);
    }
}

#[test]
fn tile_rules() {
    use ErrorName::*;
    check("tile 128 64 64;\nwarp_tile 64x128;", &[(AxisSizeMismatch, "warp_tile")]);
    check("tile 128 96 64;\nwarp_tile 64x48;", &[]);
    check("tile 128 128 64;\nwarp_tile 72x64;", &[(AxisSizeMismatch, "warp_tile"), (AxisSizeMismatch, "warp_tile")]);
    check("tile 128 128 64;\nwarp_tile 32x12;", &[(AxisSizeMismatch, "warp_tile"), (AxisSizeMismatch, "warp_tile")]);
    check("tile 128 128 64;\nwarp_tile 32x24;", &[(AxisSizeMismatch, "warp_tile")]);
    check("tile 128 128 24;", &[(AxisSizeMismatch, "tile")]);
    check("tile 128 128 64;\nsplit m 64;", &[(AxisSizeMismatch, "tile")]);
    check("tile 256 256 64;\nwarp_tile 16x8;", &[(ResourceExceeded, "warp_tile")]);
    // 3 × (256·64 + 64·256) × 2 B = 196608 B > 163 KiB; 2 stages fit.
    check("tile 256 256 64;\npipeline k.i stages=3;", &[(ResourceExceeded, "tile")]);
    check("tile 256 256 64;\npipeline k.i stages=2;", &[]);
    check("split m 256; split n 256; split k 64;\npipeline k.i stages=3;", &[(ResourceExceeded, "split m")]);
    // f32 has no mma.sync shape on sm80.
    let p = parse_dsl("tile 128 128 32;").unwrap();
    let errs = validate(&p, &target::SM80, &Problem::gemm(64, 64, 64, DType::F32));
    assert_eq!(errs.iter().map(|e| e.name).collect::<Vec<_>>(), [Unsupported]);
}

#[test]
fn axis_rules() {
    use ErrorName::*;
    check("split m 128;\nsplit q 4;", &[(InvalidAxis, "q 4")]);
    check("split m 128;\nsplit m 64;", &[(InvalidAxis, "m 64")]);
    check("split m 128;\nfuse m.o n -> mn;\nbind mn block.x;", &[]);
    check("fuse m x -> mx;", &[(InvalidAxis, "x -> mx")]);
    check("fuse m n -> k;", &[(InvalidAxis, "k;")]);
    check("split m 128;\nreorder m.o n m.i m.o;", &[(InvalidPermutation, "m.o;")]);
    check("split m 128;\nreorder m.o n m;", &[(InvalidAxis, "m;")]);
    check("split m 0;", &[(Unsupported, "0")]);
    check("unroll z 4;", &[(InvalidAxis, "z 4")]);
    check("bind m block.x;\nbind m block.y;", &[(InvalidAxis, "m block.y")]);
    check("bind m block.x ;\nbind n block.x;", &[(InvalidAxis, "block.x;")]);
    check("bind mm block.x;", &[(InvalidAxis, "mm")]);
    check("predicate_tail m n.i;", &[(InvalidAxis, "n.i")]);
    check("cache_read C smem at=k;", &[(UnknownName, "C")]);
    check("split k 64;\ncache_read A smem at=k.o.o;", &[(InvalidAxis, "k.o.o")]);
}

#[test]
fn pipeline_vector_and_epilogue_rules() {
    use ErrorName::*;
    check("split k 32;\npipeline k.i stages=4;", &[(Unsupported, "4")]);
    check("split k 32;\npipeline k.i stages=1;", &[(Unsupported, "1")]);
    check("split k 64;\npipeline k.x stages=2;", &[(InvalidAxis, "k.x")]);
    check("vectorize n 8;", &[]);
    check("vectorize n 16;", &[(Unsupported, "16")]);
    check("vectorize n 1;", &[(Unsupported, "1")]);
    check("split n 12;\nvectorize n.i 8;", &[(Unsupported, "8")]);
    check("split n 12;\nvectorize n.i 4;", &[]);
    // The implicit warp level: n.i.i has the warp tile's WN = 32 elements.
    check("tile 128 64 32;\nwarp_tile 64x32;\nvectorize n.i.i 8;", &[]);
    check("local_edge a b smem_ring depth=4;", &[(Unsupported, "local_edge")]);
}

/// Epilogue op and `algo_choice` names are read once, by the plan's
/// readers: an unknown one is an error at the name, from DSL and JSON
/// alike, listing the names accepted there.
#[test]
fn unknown_epilogue_and_algorithm_names_are_read_errors() {
    use ErrorName::*;
    for (text, name, at, accepted) in [
        ("epilogue bias relu sigmoid;", UnknownOp, "sigmoid", "bias, relu, silu, gelu, gelu_tanh, tanh, residual"),
        ("algo_choice matmul splitk_parallel;", UnknownName, "splitk_parallel", "implicit_gemm"),
        ("algo_choice conv winograd_5x5;", UnknownName, "winograd_5x5", "implicit_gemm, winograd_3x3"),
        ("algo_choice pooling naive;", UnknownName, "pooling", "matmul, conv, attention"),
        ("algo_choice attention fft;", UnknownName, "fft", "streaming_softmax_2pass, online_softmax"),
    ] {
        let e = parse_dsl(text).unwrap_err();
        assert_at(&e, name, text, at);
        assert!(e.message.ends_with(&format!("`{at}`; expected one of {accepted}")), "{e}");
    }
    let e = from_json(r#"{"epilogue": ["bias", "sigmoid"]}"#).unwrap_err();
    assert_eq!(e.name, UnknownOp, "{e}");
    assert!(e.message.contains("`sigmoid`; expected one of bias,"), "{e}");
    let e = from_json(r#"{"algo_choice": {"pooling": "naive"}}"#).unwrap_err();
    assert_eq!(e.name, UnknownName, "{e}");
    // The names print back as they were read.
    let text = "epilogue bias silu residual;\nalgo_choice conv winograd_3x3;\nalgo_choice matmul implicit_gemm;\n";
    assert_eq!(print_dsl(&parse_dsl(text).unwrap()), text);
}

/// The first error of the plan `text` checked for sm80: its reader's,
/// else the validator's.
fn first_error(text: &str) -> crate::Diagnostic {
    match parse_dsl(text) {
        Err(e) => e,
        Ok(p) => validate(&p, &target::SM80, &gemm()).into_iter().next().unwrap_or_else(|| panic!("no error: {text}")),
    }
}

/// `fft_conv` is implemented nowhere: a plan naming it gets the error of
/// any unknown conv algorithm, at the name, and the accepted names the
/// error lists do not include it.
#[test]
fn fft_conv_is_an_unknown_conv_algorithm() {
    let text = "algo_choice conv fft_conv;";
    let fft = first_error(text);
    assert_at(&fft, ErrorName::UnknownName, text, "fft_conv");
    let other = first_error("algo_choice conv no_such_algo;");
    assert_eq!(fft.message.replace("fft_conv", "X"), other.message.replace("no_such_algo", "X"));
    assert_eq!(fft.message.matches("fft_conv").count(), 1, "{fft}");
    assert!(fft.message.contains("implicit_gemm") && fft.message.contains("winograd_3x3"), "{fft}");
    let json = from_json(r#"{"algo_choice": {"conv": "fft_conv"}}"#)
        .map(|p| validate(&p, &target::SM80, &gemm()).into_iter().next().expect("an error"));
    let json = json.unwrap_or_else(|e| e);
    assert_eq!((json.name, json.message), (fft.name, fft.message));
}

#[test]
fn every_violation_is_reported() {
    let text = "tile 128 64 64;\nwarp_tile 64x128;\npipeline k.i stages=5;\nbind q block.x;";
    let p = parse_dsl(text).unwrap();
    let names: Vec<ErrorName> = validate(&p, &target::SM80, &gemm()).iter().map(|e| e.name).collect();
    use ErrorName::*;
    assert_eq!(names, [AxisSizeMismatch, InvalidAxis, Unsupported]);
}

/// `warp_specialize` with `persistent` and `cluster=N` in either order:
/// the same plan from DSL and JSON, printed canonically, round-tripping.
#[test]
fn warp_specialize_cluster_round_trips() {
    let spec = |persistent, cluster| Some(sp(Specialize { persistent, cluster }));
    for (dsl, json, want, printed, printed_json) in [
        ("warp_specialize;", "true", spec(false, 1), "warp_specialize;\n", "true"),
        ("warp_specialize cluster=1;", "{}", spec(false, 1), "warp_specialize;\n", "true"),
        (
            "warp_specialize cluster=2;",
            r#"{"cluster": 2}"#,
            spec(false, 2),
            "warp_specialize cluster=2;\n",
            r#"{"cluster":2}"#,
        ),
        (
            "warp_specialize cluster = 2 persistent;",
            r#"{"cluster": 2, "persistent": true}"#,
            spec(true, 2),
            "warp_specialize persistent cluster=2;\n",
            r#"{"persistent":true,"cluster":2}"#,
        ),
        (
            "warp_specialize persistent cluster=1;",
            r#"{"persistent": true, "cluster": 1}"#,
            spec(true, 1),
            "warp_specialize persistent;\n",
            r#"{"persistent":true}"#,
        ),
    ] {
        let d = parse_dsl(dsl).unwrap_or_else(|e| panic!("{dsl}: {e}"));
        let j = from_json(&format!("{{\"warp_specialize\": {json}}}")).unwrap_or_else(|e| panic!("{json}: {e}"));
        assert_eq!(d.warp_specialize, want, "{dsl}");
        assert_eq!(j, d, "{json}");
        assert_eq!(print_dsl(&d), printed);
        assert_eq!(parse_dsl(&print_dsl(&d)).unwrap(), d);
        let text = to_json(&d);
        let squashed: String = text.split_whitespace().collect();
        assert_eq!(squashed, format!("{{\"warp_specialize\":{printed_json}}}"), "{text}");
        assert_eq!(from_json(&text).unwrap(), d);
    }
}

#[test]
fn warp_specialize_cluster_errors_are_positioned() {
    use ErrorName::*;
    for (text, at, says) in [
        ("warp_specialize cluster=3;", "3;", "cluster=1 or 2"),
        ("warp_specialize persistent cluster=0;", "0;", "cluster=1 or 2"),
        ("warp_specialize cluster=two;", "two", "CTAs per cluster"),
        ("warp_specialize cluster 2;", "2;", "`=` after `cluster`"),
        ("warp_specialize cluster=2 cluster=2;", "cluster=2;", "given twice"),
        ("warp_specialize persistent persistent;", "persistent;", "given twice"),
        ("warp_specialize clusters=2;", "clusters", "`persistent` or `cluster=N`"),
    ] {
        let e = parse_dsl(text).unwrap_err();
        assert_at(&e, SyntaxError, text, at);
        assert!(e.message.contains(says), "{text}: {e}");
    }
    for (text, at, says) in [
        ("{\"warp_specialize\": {\"cluster\": 4}}", "4}", "cluster=1 or 2"),
        ("{\"warp_specialize\": {\"persistent\": true,\n  \"cluster\": \"2\"}}", "\"2\"", "unsigned integer"),
        ("{\"warp_specialize\": {\"clusters\": 2}}", "\"clusters\"", "persistent, cluster"),
    ] {
        let e = from_json(text).unwrap_err();
        assert_at(&e, SyntaxError, text, at);
        assert!(e.message.contains(says), "{text}: {e}");
    }
}

/// `cluster=2` (like every `warp_specialize`) needs the target whose
/// template issues wgmma; a plan built in code with another cluster size
/// is refused there.
#[test]
fn warp_specialize_cluster_needs_sm90() {
    let text = "tile 128 256 64;\nwarp_tile 64x256;\npipeline stages=4;\nwarp_specialize persistent cluster=2;";
    let p = parse_dsl(text).unwrap();
    assert_eq!(validate(&p, &target::SM90, &gemm()), vec![]);
    let text80 = "tile 128 128 32;\nwarp_tile 64x64;\nwarp_specialize cluster=2;";
    let errs = validate(&parse_dsl(text80).unwrap(), &target::SM80, &gemm());
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_at(&errs[0], ErrorName::Unsupported, text80, "warp_specialize cluster=2");
    assert!(errs[0].message.contains("cluster=2") && errs[0].message.contains("`sm80`"), "{}", errs[0]);
    let mut odd = p.clone();
    odd.warp_specialize.as_mut().unwrap().value.cluster = 4;
    let errs = validate(&odd, &target::SM90, &gemm());
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_at(&errs[0], ErrorName::Unsupported, text, "warp_specialize persistent");
    assert!(errs[0].message.contains("cluster=1 or 2"), "{}", errs[0]);
}

fn axis() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[a-z]{1,2}(\\.[io]){0,3}").unwrap()
}

fn sp<T>(v: T) -> Spanned<T> {
    Spanned::new(v)
}

fn loop_step() -> impl Strategy<Value = LoopStep> {
    prop_oneof![
        (axis(), 1u64..512).prop_map(|(a, f)| LoopStep::Split { axis: sp(a), factor: sp(f) }),
        (axis(), 1u64..9).prop_map(|(a, f)| LoopStep::Unroll { axis: sp(a), factor: sp(f) }),
        proptest::collection::vec(axis(), 1..6)
            .prop_map(|v| LoopStep::Reorder { axes: v.into_iter().map(sp).collect() }),
        (axis(), axis(), axis()).prop_map(|(a, b, c)| LoopStep::Fuse { outer: sp(a), inner: sp(b), into: sp(c) }),
    ]
}

fn word() -> impl Strategy<Value = String> {
    proptest::string::string_regex("[a-z][a-z0-9_]{0,8}").unwrap()
}

prop_compose! {
    fn plan()(
        arch in proptest::option::of(prop_oneof![Just("sm80"), Just("sm90")]),
        tile in proptest::option::of([1u64..512, 1u64..512, 1u64..512]),
        warp in proptest::option::of([1u64..128, 1u64..128]),
        loops in proptest::collection::vec(loop_step(), 0..6),
        bind in proptest::collection::btree_map(axis(), 0usize..6, 0..4),
        pipeline in proptest::option::of((proptest::option::of(axis()), 0u64..5)),
        cache in proptest::collection::vec(("[A-Z][a-z0-9]{0,3}", axis(), proptest::option::of(any::<bool>())), 0..3),
        vectorize in proptest::option::of((axis(), 1u64..17)),
        tail in proptest::collection::vec(axis(), 0..4),
        epilogue in proptest::collection::vec(proptest::sample::select(&Epilogue::ALL[..]), 0..3),
        // One value or none per key, in the key order a JSON object keeps.
        algo in [AlgoKey::Attention, AlgoKey::Conv, AlgoKey::Matmul]
            .map(|k| proptest::option::of(proptest::sample::select(k.algorithms()))),
        hints in proptest::collection::btree_map("[A-Za-z_][A-Za-z0-9_]{0,6}", prop_oneof![any::<bool>().prop_map(HintValue::Bool), "x[a-z0-9]{0,4}".prop_map(HintValue::Word)], 0..3),
        edges in proptest::collection::vec((word(), word(), 0usize..3, proptest::option::of(2u64..4)), 0..3),
        specialize in proptest::option::of((any::<bool>(), 1u32..3)),
    ) -> Plan {
        Plan {
            arch: arch.map(|a| sp(a.to_string())),
            tile: tile.map(sp),
            warp_tile: warp.map(sp),
            loops: loops.into_iter().map(sp).collect(),
            bind: bind.into_iter().map(|(a, t)| sp(Bind { axis: sp(a), target: sp(BindTarget::ALL[t]) })).collect(),
            pipeline: pipeline.map(|(a, s)| sp(Pipeline { axis: a.map(sp), stages: sp(s) })),
            cache: cache.into_iter().map(|(t, a, p)| sp(CacheRead { tensor: sp(t), at: sp(a), pingpong: p })).collect(),
            vectorize: vectorize.map(|(a, w)| sp(Vectorize { axis: sp(a), width: sp(w) })),
            predicate_tail: tail.into_iter().map(sp).collect(),
            epilogue: epilogue.into_iter().map(sp).collect(),
            algo_choice: algo.into_iter().flatten().map(sp).collect(),
            layout_hints: hints.into_iter().map(|(key, value)| sp(LayoutHint { key, value })).collect(),
            local_edges: edges
                .into_iter()
                .map(|(from, to, b, depth)| {
                    let buffer = [Buffer::Reg, Buffer::SmemRing, Buffer::Gmem][b];
                    sp(LocalEdge { from, to, buffer, depth })
                })
                .collect(),
            warp_specialize: specialize.map(|(persistent, cluster)| sp(Specialize { persistent, cluster })),
        }
    }
}

proptest! {
    #[test]
    fn dsl_print_parse_round_trips(p in plan()) {
        let text = print_dsl(&p);
        let back = parse_dsl(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(&back, &p);
        prop_assert_eq!(print_dsl(&back), text);
    }

    #[test]
    fn json_print_parse_round_trips(p in plan()) {
        let text = to_json(&p);
        let back = from_json(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(&back, &p);
        prop_assert_eq!(parse_dsl(&print_dsl(&back)).unwrap(), back);
    }
}

//! Every error name a user can meet is raised, through the public pipeline
//! (what the CLI and `kernel!` call), at the right position: from the graph
//! language with the line and column of the offending construct, and from
//! Tiny IR JSON with the node's id and the position of its `"id"` pair.
//! Errors only a Schedule Plan can cause (`ResourceExceeded`) are raised by
//! `plan::validate` on plan DSL and plan JSON text (`Step::Plan`).
//!
//! The per-module tests (`frontend/tests/errors.rs`, `tiny/json/tests.rs`)
//! cover the variants of each rule; this table makes sure no name is left
//! without a positioned test in either input format. `cases` matches on the
//! name without a wildcard, so a new error name does not compile until it
//! has cases here.

use std::collections::BTreeMap;

use tgc_core::diag::{Diagnostic, ErrorName};
use tgc_core::interp::{self, Tensor};
use tgc_core::pipeline::{self, Format};
use tgc_core::plan;
use tgc_core::DType;

/// Where in the pipeline a case fails.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// `pipeline::load` (parse, lower, verify, IndexBook).
    Load,
    /// `pipeline::compile_cpu` on the loaded graph.
    Compile,
    /// `interp::run` with one f32 input of the given shape, and no dims.
    Run(&'static [usize]),
    /// The text is a Schedule Plan (DSL or JSON by the case's format),
    /// validated for sm80 and a 4096³ f16 GEMM.
    Plan,
}

/// One failing input: it must fail with the case's name at the first
/// occurrence of `at` in `text`, on `node` (JSON cases name their node).
struct Case {
    format: Format,
    text: String,
    at: String,
    node: Option<&'static str>,
    step: Step,
}

fn dsl(text: &str, at: &str) -> Case {
    Case { format: Format::Dsl, text: text.to_string(), at: at.to_string(), node: None, step: Step::Load }
}

/// A node-format JSON document of `uops`, failing at node `node`.
fn json(uops: &[&str], node: &'static str) -> Case {
    let text = format!("{{\"uops\": [\n  {}\n]}}\n", uops.join(",\n  "));
    let at = format!("\"id\": \"{node}\"");
    Case { format: Format::Json, text, at, node: Some(node), step: Step::Load }
}

impl Case {
    fn step(self, step: Step) -> Case {
        Case { step, ..self }
    }
}

const X: &str = r#"{"id": "x", "uop": "INPUT", "arg": {"tensor_id": "X", "dtype": "fp32", "shape": [4, 3]}}"#;
const Y: &str = r#"{"id": "y", "uop": "INPUT", "arg": {"tensor_id": "Y", "dtype": "fp32", "shape": [4, 5]}}"#;
const H: &str = r#"{"id": "h", "uop": "INPUT", "arg": {"tensor_id": "H", "dtype": "fp16", "shape": [4, 3]}}"#;

/// A chain of `n` one-element pads, each adding a guarded piece to reads of
/// the last one.
fn pad_chain_dsl(n: usize) -> String {
    let mut s = format!("graph main(x: f32[2]) -> (z: f32[{}]) {{\n    p0 = x\n", n + 2);
    for k in 1..=n {
        s.push_str(&format!("    p{k} = pad(p{}, [[1, 0]])\n", k - 1));
    }
    s.push_str(&format!("    z = p{n} * 2.0\n    return z\n}}\n"));
    s
}

fn pad_chain_json(n: usize) -> Vec<String> {
    let mut uops =
        vec![r#"{"id": "p0", "uop": "INPUT", "arg": {"tensor_id": "X", "dtype": "fp32", "shape": [2]}}"#.to_string()];
    for k in 1..=n {
        uops.push(format!(r#"{{"id": "p{k}", "uop": "PAD", "src": ["p{}"], "arg": {{"pad": [[1, 0]]}}}}"#, k - 1));
    }
    uops.push(format!(r#"{{"id": "z", "uop": "RELU", "src": ["p{n}"]}}"#));
    uops
}

/// The failing inputs for `name`: graph language and JSON, where the name
/// can arise from that format.
fn cases(name: ErrorName) -> Vec<Case> {
    use ErrorName::*;
    let main = |sig: &str, body: &str| format!("graph{sig} {{\n    {body}\n    return z\n}}\n");
    match name {
        BroadcastMismatch => vec![
            dsl(&main(" main(x: f32[4, 3], y: f32[4, 5]) -> (z: f32[4, 3])", "z = x + y"), "+ y"),
            json(&[X, Y, r#"{"id": "z", "uop": "ADD", "src": ["x", "y"]}"#], "z"),
        ],
        AxisSizeMismatch => vec![
            dsl(&main(" main(x: f32[4, 3]) -> (z: f32[5, 2])", "z = reshape(x, [5, 2])"), "reshape"),
            json(&[X, r#"{"id": "z", "uop": "RESHAPE", "src": ["x"], "arg": {"result_shape": [5, 2]}}"#], "z"),
            dsl(&main("<M> main(x: f32[M, 3]) -> (z: f32[M, 3])", "z = relu(x)"), "x: f32").step(Step::Run(&[4, 2])),
        ],
        InvalidPermutation => vec![
            dsl(&main(" main(x: f32[4, 3]) -> (z: f32[3, 4])", "z = permute(x, [1, 1])"), "permute"),
            json(&[X, r#"{"id": "z", "uop": "PERMUTE", "src": ["x"], "arg": {"perm": [1, 1]}}"#], "z"),
        ],
        // The graph language always states the accumulator (fp32 for float sums).
        AccDtypeMissing => {
            vec![json(&[X, r#"{"id": "z", "uop": "REDUCE", "src": ["x"], "arg": {"op": "SUM", "axes": [1]}}"#], "z")]
        }
        ExcessivePiecewise => {
            let uops = pad_chain_json(65);
            let uops: Vec<&str> = uops.iter().map(String::as_str).collect();
            vec![dsl(&pad_chain_dsl(65), "pad(p64").step(Step::Compile), json(&uops, "p65").step(Step::Compile)]
        }
        DTypeMismatch => vec![
            dsl(&main(" main(x: f32[4, 3], h: f16[4, 3]) -> (z: f32[4, 3])", "z = x * h"), "* h"),
            json(&[H, r#"{"id": "z", "uop": "CONST", "arg": {"value": 1.5, "dtype": "i32"}}"#], "z"),
        ],
        UnknownOp => vec![
            dsl(&main(" main(x: f32[4, 3]) -> (z: f32[4, 3])", "z = frobnicate(x)"), "frobnicate"),
            json(&[X, r#"{"id": "z", "uop": "FROBNICATE", "src": ["x"]}"#], "z"),
        ],
        UnknownName => vec![
            dsl(&main(" main(x: f32[4, 3]) -> (z: f32[4, 3])", "z = relu(w)"), "w)"),
            json(&[X, r#"{"id": "z", "uop": "ADD", "src": ["x", "w"]}"#], "z"),
        ],
        ArityMismatch => vec![
            dsl(&main(" main(x: f32[4, 3]) -> (z: f32[4, 3])", "z = relu(x, x)"), "relu"),
            json(&[X, r#"{"id": "z", "uop": "ADD", "src": ["x"]}"#], "z"),
        ],
        NegativeStride => vec![
            dsl(&main(" main(x: f32[4, 3]) -> (z: f32[4, 3])", "z = slice(x, [[0, 4, 0], [0, 3, 1]])"), "0], ["),
            json(
                &[
                    X,
                    r#"{"id": "z", "uop": "SHRINK", "src": ["x"], "arg": {"lo": [0, 0], "hi": [4, 3], "step": [0, 1]}}"#,
                ],
                "z",
            ),
        ],
        // JSON has no calls, so nothing to recurse through.
        RecursionLimit => vec![dsl(
            "graph f(a: f32[4]) -> (b: f32[4]) {\n    b = f(a)\n    return b\n}\n\
             graph main(x: f32[4]) -> (z: f32[4]) {\n    z = f(x)\n    return z\n}\n",
            "f(a)",
        )],
        InvalidAxis => vec![
            dsl(&main(" main(x: f32[4, 3]) -> (z: f32[4, 3])", "z = softmax(x, axis=2)"), "softmax"),
            json(
                &[
                    X,
                    r#"{"id": "z", "uop": "REDUCE", "src": ["x"], "arg": {"op": "SUM", "axes": [2], "dtype": "fp32"}}"#,
                ],
                "z",
            ),
        ],
        UnboundSymbol => vec![
            dsl(
                "graph<S> f(a: f32[4]) -> (b: f32[S]) {\n    b = reshape(a, [S])\n    return b\n}\n\
                 graph main(x: f32[4]) -> (z: f32[4]) {\n    z = f(x)\n    return z\n}\n",
                "f(x)",
            ),
            // A symbol that only an output shape uses has no value at run time.
            dsl(&main("<M, N> main(x: f32[M]) -> (z: f32[M, N])", "z = expand(reshape(x, [M, 1]), [M, N])"), "expand")
                .step(Step::Run(&[3])),
            json(
                &[
                    r#"{"id": "x", "uop": "INPUT", "arg": {"tensor_id": "X", "dtype": "fp32", "shape": ["M", 1]}}"#,
                    r#"{"id": "z", "uop": "EXPAND", "src": ["x"], "arg": {"result_shape": ["M", "N"]}}"#,
                ],
                "z",
            )
            .step(Step::Run(&[3, 1])),
        ],
        SyntaxError => vec![
            dsl(&main(" main(x: f32[4, 3]) -> (z: f32[4, 3])", "z = relu(x))"), ")\n"),
            // A schema error points at the value its JSON path names.
            Case {
                at: "\"fp64\"".to_string(),
                ..json(&[X, r#"{"id": "z", "uop": "CAST", "src": ["x"], "arg": {"to": "fp64"}}"#], "z")
            },
        ],
        Unsupported => vec![
            dsl(&main("<M> main(x: f32[M]) -> (z: f32[M])", "z = x * M"), "M\n"),
            // More elements than one tensor may have (`sym::MAX_ELEMENTS`).
            dsl(&main(" main(x: f32[9223372036854775807, 4]) -> (z: f32[4])", "z = sum(x, axes=[0])"), "x: f32"),
            // The op-list import names its ops by `"name"`.
            Case {
                format: Format::Json,
                text: r#"{"ops": [
  {"op": "Unary", "name": "g", "fn": "gelu", "inputs": ["X"], "outputs": ["Y"]}
], "values": {"X": {"dtype": "fp32", "shape": [4]}, "Y": {"dtype": "fp32", "shape": [4]}}}
"#
                .to_string(),
                at: "\"name\": \"g\"".to_string(),
                node: Some("g"),
                step: Step::Load,
            },
        ],
        // 3 stages × (256·64 + 64·256) × 2 B of shared memory > sm80's 163 KiB per block.
        ResourceExceeded => vec![
            dsl("split m 256;\nsplit n 256;\nsplit k 64;\npipeline k.i stages=3;\n", "split m").step(Step::Plan),
            Case {
                format: Format::Json,
                text: "{\"tile\": [256, 256, 64],\n \"stages\": 3}\n".to_string(),
                at: "[256".to_string(),
                node: None,
                step: Step::Plan,
            },
        ],
        // A tensor handed to a run that does not fit its input.
        Io => vec![
            dsl(&main(" main(x: f32[4, 3]) -> (z: f32[4, 3])", "z = relu(x)"), "x: f32").step(Step::Run(&[])),
            json(&[X, r#"{"id": "z", "uop": "RELU", "src": ["x"]}"#], "x").step(Step::Run(&[])),
        ],
        // A failed IR verifier after a pass: a tgc bug, which no input may
        // trigger on purpose (the verifiers' own tests corrupt IRs by hand).
        Internal => vec![],
    }
}

/// Runs `case` to its step and returns the error it must fail with.
fn fail(case: &Case) -> Diagnostic {
    if let Step::Plan = case.step {
        return fail_plan(case);
    }
    let loaded = match pipeline::load(&case.text, case.format, None) {
        Ok(l) => l,
        Err(e) => return e,
    };
    let result = match case.step {
        Step::Load => panic_ok(case, "loaded"),
        Step::Compile => pipeline::compile_cpu(&loaded.graph, &mut Default::default()).map(drop),
        Step::Plan => unreachable!("plan cases return above"),
        Step::Run(shape) => {
            let n: usize = shape.iter().product();
            // An empty shape stands for "a tensor that does not fit": 7 values for a scalar.
            let t = if shape.is_empty() {
                Tensor { dtype: DType::F32, shape: vec![], data: vec![0.0; 7] }
            } else {
                Tensor::new(DType::F32, shape, vec![0.5; n]).unwrap()
            };
            interp::run(&loaded.graph, &BTreeMap::new(), &[t]).map(drop)
        }
    };
    result.err().unwrap_or_else(|| panic_ok(case, "ran"))
}

fn fail_plan(case: &Case) -> Diagnostic {
    let read = match case.format {
        Format::Dsl => plan::parse_dsl(&case.text),
        Format::Json => plan::from_json(&case.text),
    };
    let p = match read {
        Ok(p) => p,
        Err(e) => return e,
    };
    let problem = plan::Problem::gemm(4096, 4096, 4096, DType::F16);
    let errs = plan::validate(&p, &plan::target::SM80, &problem);
    errs.into_iter().next().unwrap_or_else(|| panic_ok(case, "validated"))
}

fn panic_ok(case: &Case, what: &str) -> ! {
    panic!("expected a failure at `{}`, but the graph {what}:\n{}", case.at, case.text)
}

/// 1-based line and column of the first occurrence of `at` in `text`.
fn position(text: &str, at: &str) -> (u32, u32) {
    let off = text.find(at).unwrap_or_else(|| panic!("`{at}` is not in:\n{text}"));
    let line = text[..off].matches('\n').count() as u32 + 1;
    let col = text[..off].rsplit('\n').next().map_or(0, |l| l.chars().count()) as u32 + 1;
    (line, col)
}

#[test]
fn every_error_name_is_raised_at_its_position() {
    let mut uncovered = Vec::new();
    for name in ErrorName::ALL {
        let cases = cases(name);
        let formats = [Format::Dsl, Format::Json].map(|f| cases.iter().any(|c| c.format == f));
        if name != ErrorName::Internal && !formats.iter().any(|&f| f) {
            uncovered.push(name);
        }
        for case in &cases {
            let e = fail(case);
            let where_ = format!("{name} case at `{}`:\n{}\ngot {e}", case.at, case.text);
            assert_eq!(e.name, name, "{where_}");
            let span = e.span.unwrap_or_else(|| panic!("no position: {where_}"));
            assert_eq!((span.line, span.col), position(&case.text, &case.at), "{where_}");
            if case.node.is_some() {
                assert_eq!(e.node.as_deref(), case.node, "{where_}");
            }
        }
    }
    assert!(uncovered.is_empty(), "error names without a case: {uncovered:?}");
}

/// Names that cannot arise from one of the formats say why in `cases`; every
/// other name has a case in both.
#[test]
fn both_formats_are_covered_where_the_name_applies() {
    let dsl_only = [ErrorName::RecursionLimit];
    let json_only = [ErrorName::AccDtypeMissing];
    for name in ErrorName::ALL {
        if name == ErrorName::Internal {
            continue;
        }
        let cases = cases(name);
        let has = |f: Format| cases.iter().any(|c| c.format == f);
        assert_eq!(has(Format::Dsl), !json_only.contains(&name), "{name}: graph-language case");
        assert_eq!(has(Format::Json), !dsl_only.contains(&name), "{name}: JSON case");
    }
}

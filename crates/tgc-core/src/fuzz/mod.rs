//! Fuzz targets: one function per input format a user can hand
//! to tgc, each taking arbitrary bytes, and a structure-aware target
//! ([`graphs`]) whose bytes choose a valid graph that every evaluator must
//! compute alike. A target returns normally for every input; it panics only
//! on a tgc bug — a panic inside tgc, an `Internal` diagnostic (which by the
//! contract of [`crate::diag`] means a verifier failed after a pass), or
//! evaluators that disagree.
//!
//! The coverage-guided driver (AFL++ through cargo-afl, which builds on the
//! stable toolchain) lives in `fuzz/` outside the workspace and calls these
//! functions; `scripts/fuzz.sh` runs it. Every corpus file and every crash
//! found under `fuzz/corpus/<target>/` is replayed through the same
//! functions by `crates/tgc-core/tests/fuzz_corpus.rs` in the test command.

use std::path::Path;

use tgc_runtime::HostTensor;

use crate::diag::{Diagnostic, ErrorName};
use crate::pipeline::{self, Format, RunError};

pub mod gen;
pub mod tolerance;

/// A fuzz target: arbitrary bytes in, a panic only on a tgc bug.
pub type Target = fn(&[u8]);

/// The fuzz targets by name, as `fuzz/` and the corpus folders name them.
pub const TARGETS: [(&str, Target); 9] = [
    ("dsl", dsl),
    ("onnx", onnx),
    ("tiny_json", tiny_json),
    ("plan_dsl", plan_dsl),
    ("plan_json", plan_json),
    ("npy", npy),
    ("safetensors", safetensors),
    ("graphs", graphs),
    ("graphs_mma", graphs_mma),
];

/// Panics on an `Internal` diagnostic: a user error is a fine answer to
/// hostile input, a verifier failure is not.
fn user_error_only<T>(what: &str, r: Result<T, Diagnostic>) {
    if let Err(d) = r {
        assert!(d.name != ErrorName::Internal, "{what}: internal error on fuzz input: {d}");
    }
}

/// The graph language: decode, parse, resolve and lower to Tiny IR (what
/// `tgc check` does), then build the IndexBook of the result.
pub fn dsl(data: &[u8]) {
    graph(data, Format::Dsl, "dsl");
}

/// Tiny IR JSON, both the node format and the op list (`ops`).
pub fn tiny_json(data: &[u8]) {
    graph(data, Format::Json, "tiny_json");
}

fn graph(data: &[u8], format: Format, what: &str) {
    let Ok(text) = crate::diag::decode_source(data.to_vec()) else { return };
    let built = pipeline::load(&text, format, None).and_then(|l| crate::index_book::build(&l.graph));
    user_error_only(what, built);
}

/// An ONNX model: decode, import and lower to Tiny IR (what `tgc check
/// model.onnx` does, without external data), then build the IndexBook.
pub fn onnx(data: &[u8]) {
    let built = crate::frontend::onnx::import(data, None, &[]).and_then(|imported| {
        let g = crate::frontend::to_tiny::lower_program(&imported.program, None)?;
        crate::index_book::build(&g)
    });
    user_error_only("onnx", built);
}

/// The Schedule Plan DSL (`000` §12.5's text form).
pub fn plan_dsl(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        user_error_only("plan_dsl", crate::plan::parse_dsl(text));
    }
}

/// The Schedule Plan JSON (`000` §12.5).
pub fn plan_json(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        user_error_only("plan_json", crate::plan::from_json(text));
    }
}

/// The `.npy` reader of `tgc run --input` (every failure is a
/// `tgc_runtime::Error`, so only a panic is a finding).
pub fn npy(data: &[u8]) {
    let _ = tgc_runtime::npy::read_npy_bytes(data);
}

/// The `.safetensors` reader of `tgc run --input x=FILE:x` (every failure
/// is a `tgc_runtime::Error`, so only a panic is a finding).
pub fn safetensors(data: &[u8]) {
    let _ = tgc_runtime::safetensors_io::read_safetensors_tensor_bytes(data, "x");
}

/// The structure-aware target: the input chooses a valid graph and its
/// input values ([`gen::from_bytes`]); the reference interpreter and the
/// SIMT template run in the GPU emulator must compute the same outputs: bit
/// for bit for a movement case (every value is exact in f32, see [`gen`]),
/// within the op's error bound for a numeric one ([`tolerance`]).
///
/// The CPU backend compiles C with the system compiler, far too slow for
/// each execution: [`run_cpu`] checks it on many cases with one compiler
/// run, on every corpus file in the test command's replay and on a whole
/// fuzzer queue after `scripts/fuzz.sh graphs`.
pub fn graphs(data: &[u8]) {
    against_interpreter(gen::from_bytes(data), "SIMT emulator", emulate);
}

/// The tensor-core target: the input chooses a matmul, convolution or
/// attention in f16 or bf16 ([`gen::mma_from_bytes`]), lowered for sm80
/// ([`crate::gpu::driver::lower_program_for`]: the implicit-GEMM MMA template
/// or the fused attention template where they take the graph, SIMT kernels
/// where they refuse it) and run in the GPU emulator; its outputs must be
/// within the op's error bound of the interpreter's ([`tolerance`]).
pub fn graphs_mma(data: &[u8]) {
    against_interpreter(gen::mma_from_bytes(data), "sm80 emulator", emulate_sm80);
}

/// The check of the structure-aware targets: `run`'s outputs of the
/// generated case must be the interpreter's ([`same_outputs`]); a
/// generator error or a disagreement panics with the graph's text.
fn against_interpreter(
    case: Result<gen::Case, String>,
    who: &str,
    run: fn(&gen::Case) -> Result<Vec<Vec<f64>>, String>,
) {
    let case = case.unwrap_or_else(|e| panic!("generator: {e}"));
    let check = interpret(&case).and_then(|want| same_outputs(&case, who, &run(&case)?, &want));
    if let Err(e) = check {
        panic!("{e}\n{}", crate::tiny::text::dump(&case.graph));
    }
}

/// The reference interpreter's outputs of `case`, in output order.
///
/// Errors: the interpreter's diagnostic.
pub fn interpret(case: &gen::Case) -> Result<Vec<Vec<f64>>, String> {
    let outs = pipeline::run_interp(&case.graph, &host_inputs(case)?).map_err(|e| report("interpreter", e))?;
    Ok(outs.iter().map(HostTensor::to_f64_vec).collect())
}

/// The outputs of `case`'s SIMT program ([`crate::gpu::simt`]) run in the
/// emulator, in output order.
///
/// Errors: the lowering's or the emulator's diagnostic.
pub fn emulate(case: &gen::Case) -> Result<Vec<Vec<f64>>, String> {
    let prog = crate::gpu::driver::lower_program(&case.graph).map_err(|e| report("SIMT lowering", e))?;
    crate::gpu::program::emulate(&prog, &[], &case.inputs).map_err(|e| report("SIMT emulator", e))
}

/// The outputs of `case` lowered for sm80 (the tensor-core templates where
/// they take it, see [`graphs_mma`]) run in the emulator, in output order.
///
/// Errors: the lowering's or the emulator's diagnostic.
pub fn emulate_sm80(case: &gen::Case) -> Result<Vec<Vec<f64>>, String> {
    let prog = sm80_program(case)?;
    crate::gpu::program::emulate(&prog, &[], &case.inputs).map_err(|e| report("sm80 emulator", e))
}

/// `case` lowered for sm80 ([`emulate_sm80`]).
///
/// Errors: the lowering's diagnostic.
pub fn sm80_program(case: &gen::Case) -> Result<crate::gpu::program::GpuProgram, String> {
    crate::gpu::driver::lower_program_for(&case.graph, Some(&crate::plan::target::SM80))
        .map_err(|e| report("sm80 lowering", e))
}

/// The CPU backend's outputs of each case, all compiled into one library
/// in `work_dir` ([`pipeline::run_cpu_batch`]); when that fails, each case
/// alone, so that the failure is pinned on its cases.
pub fn run_cpu(cases: &[gen::Case], work_dir: &Path) -> Vec<Result<Vec<Vec<f64>>, String>> {
    let prepared: Vec<Result<(crate::tiny::Graph, Vec<HostTensor>), String>> = cases
        .iter()
        .enumerate()
        .map(|(k, c)| {
            let mut g = c.graph.clone();
            g.name = format!("case{k}");
            Ok((g, host_inputs(c)?))
        })
        .collect();
    let values = |outs: Vec<HostTensor>| outs.iter().map(HostTensor::to_f64_vec).collect::<Vec<_>>();
    let ready: Vec<(&crate::tiny::Graph, &[HostTensor])> =
        prepared.iter().flatten().map(|(g, ins)| (g, ins.as_slice())).collect();
    if ready.len() == cases.len() {
        if let Ok(outs) = pipeline::run_cpu_batch(&ready, work_dir) {
            return outs.into_iter().map(|o| Ok(values(o))).collect();
        }
    }
    let describe = |e: RunError| match e {
        RunError::Diag(d) => d.to_string(),
        RunError::Runtime(e) => e.to_string(),
    };
    prepared
        .into_iter()
        .map(|p| {
            let (g, ins) = p?;
            let outs = pipeline::run_cpu(&g, &ins, work_dir).map_err(|e| report("CPU backend", describe(e)))?;
            Ok(values(outs))
        })
        .collect()
}

/// Whether `got` (from `who`) equals the interpreter's `want`: exactly
/// when `case.bound` is `None`, else within that bound
/// ([`tolerance::Bound::allows`]).
///
/// Errors: the first differing element of each output that differs.
pub fn same_outputs(case: &gen::Case, who: &str, got: &[Vec<f64>], want: &[Vec<f64>]) -> Result<(), String> {
    let differ = |got: f64, want: f64| match &case.bound {
        None => got != want,
        Some(b) => !b.allows(got, want),
    };
    if got.len() != want.len() {
        return Err(report(who, format!("{} outputs, the interpreter gives {}", got.len(), want.len())));
    }
    let mut errors = Vec::new();
    for ((o, got), want) in case.graph.outputs.iter().zip(got).zip(want) {
        if got.len() != want.len() {
            errors.push(format!("output `{}`: {} elements, the interpreter gives {}", o.name, got.len(), want.len()));
        } else if let Some(l) = (0..got.len()).find(|&l| differ(got[l], want[l])) {
            let bad = (0..got.len()).filter(|&l| differ(got[l], want[l])).count();
            let within = case.bound.map(|b| format!(" (bound {})", b.slack(want[l]))).unwrap_or_default();
            errors.push(format!(
                "output `{}`: {bad} of {} elements differ; first at flat index {l}: {}, the interpreter gives {}{within}",
                o.name,
                got.len(),
                got[l],
                want[l]
            ));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(report(who, errors.join("\n")))
    }
}

/// `case`'s inputs as host tensors.
///
/// Errors: a tensor that cannot be made (a generator bug).
fn host_inputs(case: &gen::Case) -> Result<Vec<HostTensor>, String> {
    let g = &case.graph;
    g.inputs()
        .iter()
        .zip(&case.inputs)
        .map(|(&id, data)| {
            let shape: Vec<usize> = g.shape(id).iter().map(|d| d.as_int().unwrap_or(0) as usize).collect();
            HostTensor::from_f64(g.dtype(id), &shape, data).map_err(|e| report("input", e))
        })
        .collect()
}

/// `what` went wrong in `who`.
fn report(who: &str, what: impl std::fmt::Display) -> String {
    format!("{who}: {what}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The comparison the `graphs` target rests on sees a one-element
    /// difference in a movement case, and an input that runs out makes a
    /// small valid graph of either family.
    #[test]
    fn graphs_checks_outputs_exactly_and_accepts_any_input() {
        for data in [&[][..], &[0xff; 3], &[7, 200, 13, 99, 1, 0, 255, 42, 5]] {
            graphs(data);
            graphs_mma(data);
        }
        let case = gen::from_bytes(&[0, 1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        assert_eq!(case.bound, None, "a movement case");
        let want = interpret(&case).unwrap();
        assert_eq!(same_outputs(&case, "test", &want, &want), Ok(()));
        let mut got = want.clone();
        got[0][0] += 0.125;
        let err = same_outputs(&case, "test", &got, &want).unwrap_err();
        assert!(err.contains("1 of") && err.contains("flat index 0"), "{err}");
    }

    /// Seeded numeric cases (every op, f32, f16 and bf16): the SIMT
    /// emulator within each op's bound of the interpreter.
    #[test]
    fn numeric_cases_agree_within_their_bounds() {
        let (seed, cases) = gen::seed_and_cases(0x59, 80);
        for i in cases {
            let case = gen::numeric_case(seed, i, false).unwrap_or_else(|e| panic!("case {i}: {e}"));
            let check = interpret(&case).and_then(|want| same_outputs(&case, "SIMT", &emulate(&case)?, &want));
            if let Err(e) = check {
                panic!(
                    "case {i} (TGC_PROP_SEED={seed} TGC_PROP_CASE={i}): {e}\n{}",
                    crate::tiny::text::dump(&case.graph)
                );
            }
        }
    }

    /// Seeded tensor-core cases: the sm80 lowering within each op's bound
    /// of the interpreter, and most of them on a tensor-core template (a
    /// generator whose cases every template refused would test SIMT only).
    #[test]
    fn tensor_core_cases_run_on_the_templates_within_their_bounds() {
        let (seed, cases) = gen::seed_and_cases(0x59, 40);
        let mut on_templates = 0;
        for &i in &cases {
            let case = gen::numeric_case(seed, i, true).unwrap_or_else(|e| panic!("case {i}: {e}"));
            let prog = sm80_program(&case).unwrap();
            on_templates += prog.launches.iter().any(|l| l.form.tensor_cores()) as usize;
            let check = interpret(&case).and_then(|want| same_outputs(&case, "sm80", &emulate_sm80(&case)?, &want));
            if let Err(e) = check {
                panic!(
                    "case {i} (TGC_PROP_SEED={seed} TGC_PROP_CASE={i}): {e}\n{}",
                    crate::tiny::text::dump(&case.graph)
                );
            }
        }
        eprintln!("{on_templates} of {} cases on a tensor-core template", cases.len());
        assert!(2 * on_templates >= cases.len(), "{on_templates} of {} cases on a tensor-core template", cases.len());
    }

    /// The numeric bounds are tight enough to see numerics go wrong: an
    /// `exp` whose log2 e is 2^-20 too large (relative), and a layernorm
    /// with epsilon 1e-3 for 1e-5, fail against the right graphs, which
    /// the SIMT emulator meets.
    #[test]
    fn numeric_bounds_see_a_slightly_wrong_exp_and_a_wrong_epsilon() {
        use crate::frontend::ops::{const_like, elementwise, nn};
        use crate::sym::Dim;
        use crate::tiny::{BinaryOp, Graph, Output, UnaryOp};
        use crate::DType;
        use tolerance::Op;
        let case = |graph: Graph, inputs: Vec<Vec<f64>>, op: Op| gen::Case {
            graph,
            dtype: DType::F32,
            inputs,
            bound: Some(tolerance::bound(op, DType::F32)),
        };
        let exp = |log2e: Option<f64>| {
            let mut g = Graph::new("exp");
            let x = g.input("x", DType::F32, &[Dim::int(64)]).unwrap();
            let y = match log2e {
                None => elementwise::exp(&mut g, x).unwrap(),
                Some(k) => {
                    let c = const_like(&mut g, x, k).unwrap();
                    let s = g.binary(BinaryOp::Mul, x, c).unwrap();
                    g.unary(UnaryOp::Exp2, s).unwrap()
                }
            };
            g.outputs.push(Output { name: "y".into(), node: y });
            let xs = (0..64).map(|i| (i as f64 - 32.0) / 2.0 + 0.1).collect();
            case(g, vec![xs], Op::Exp)
        };
        let wrong = std::f64::consts::LOG2_E * (1.0 + 2f64.powi(-20));
        let layernorm = |eps: f64| {
            let mut g = Graph::new("ln");
            let x = g.input("x", DType::F32, &[Dim::int(4), Dim::int(16)]).unwrap();
            let gamma = g.input("gamma", DType::F32, &[Dim::int(16)]).unwrap();
            let beta = g.input("beta", DType::F32, &[Dim::int(16)]).unwrap();
            let y = nn::layernorm(&mut g, x, gamma, beta, &[1], eps).unwrap();
            g.outputs.push(Output { name: "y".into(), node: y });
            let xs: Vec<f64> = (0..64).map(|i| ((i * 37 % 64) as f64 - 32.0) / 32.0).collect();
            let shift = xs.chunks(16).fold(0.0f64, |s, row| {
                let mean = row.iter().sum::<f64>() / 16.0;
                let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / 16.0;
                s.max((16.0 + mean.abs()) / (var + 1e-5).sqrt())
            });
            let op = Op::LayerNorm { n: 16, shift, gamma: 1.0, beta: 0.0 };
            case(g, vec![xs, vec![1.0; 16], vec![0.0; 16]], op)
        };
        for (right, bad) in [(exp(None), exp(Some(wrong))), (layernorm(1e-5), layernorm(1e-3))] {
            let want = interpret(&right).unwrap();
            assert_eq!(same_outputs(&right, "SIMT", &emulate(&right).unwrap(), &want), Ok(()));
            let err = same_outputs(&right, "wrong", &interpret(&bad).unwrap(), &want).unwrap_err();
            assert!(err.contains("elements differ"), "{err}");
        }
    }

    /// A mutated byte changes one choice: the bytes decode one per choice.
    #[test]
    fn bytes_are_one_choice_each_then_zeros() {
        let mut b = gen::Bytes(&[5, 1, 2]);
        assert_eq!(gen::Entropy::below(&mut b, 4), 1);
        assert_eq!(gen::Entropy::below(&mut b, 1000), 258, "1·256 + 2, two bytes for 1000 values");
        assert_eq!(gen::Entropy::below(&mut b, 3), 0);
    }
}

//! Fuzz targets (issue 18): one function per input format a user can hand
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

/// A fuzz target: arbitrary bytes in, a panic only on a tgc bug.
pub type Target = fn(&[u8]);

/// The fuzz targets by name, as `fuzz/` and the corpus folders name them.
pub const TARGETS: [(&str, Target); 8] = [
    ("dsl", dsl),
    ("onnx", onnx),
    ("tiny_json", tiny_json),
    ("plan_dsl", plan_dsl),
    ("plan_json", plan_json),
    ("npy", npy),
    ("safetensors", safetensors),
    ("graphs", graphs),
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
/// SIMT template run in the GPU emulator must compute the same outputs, bit
/// for bit (every value is exact in f32, see [`gen`]).
///
/// The CPU backend compiles C with the system compiler, far too slow for
/// each execution: [`run_cpu`] checks it on many cases with one compiler
/// run, on every corpus file in the test command's replay and on a whole
/// fuzzer queue after `scripts/fuzz.sh graphs`.
pub fn graphs(data: &[u8]) {
    let case = gen::from_bytes(data).unwrap_or_else(|e| panic!("generator: {e}"));
    let check = interpret(&case).and_then(|want| {
        let got = emulate(&case)?;
        same_outputs(&case, "SIMT emulator", &got, &want)
    });
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
    let prog = crate::gpu::simt::lower_program(&case.graph).map_err(|e| report("SIMT lowering", e))?;
    crate::gpu::simt::emulate(&prog, &[], &case.inputs).map_err(|e| report("SIMT emulator", e))
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

/// Whether `got` (from `who`) equals the interpreter's `want` exactly.
///
/// Errors: the first differing element of each output that differs.
pub fn same_outputs(case: &gen::Case, who: &str, got: &[Vec<f64>], want: &[Vec<f64>]) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(report(who, format!("{} outputs, the interpreter gives {}", got.len(), want.len())));
    }
    let mut errors = Vec::new();
    for ((o, got), want) in case.graph.outputs.iter().zip(got).zip(want) {
        if got.len() != want.len() {
            errors.push(format!("output `{}`: {} elements, the interpreter gives {}", o.name, got.len(), want.len()));
        } else if let Some(l) = (0..got.len()).find(|&l| got[l] != want[l]) {
            let bad = (0..got.len()).filter(|&l| got[l] != want[l]).count();
            errors.push(format!(
                "output `{}`: {bad} of {} elements differ; first at flat index {l}: {}, the interpreter gives {}",
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
    /// difference, and an input that runs out makes a small valid graph.
    #[test]
    fn graphs_checks_outputs_exactly_and_accepts_any_input() {
        for data in [&[][..], &[0xff; 3], &[7, 200, 13, 99, 1, 0, 255, 42, 5]] {
            graphs(data);
        }
        let case = gen::from_bytes(&[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        let want = interpret(&case).unwrap();
        assert_eq!(same_outputs(&case, "test", &want, &want), Ok(()));
        let mut got = want.clone();
        got[0][0] += 0.125;
        let err = same_outputs(&case, "test", &got, &want).unwrap_err();
        assert!(err.contains("1 of") && err.contains("flat index 0"), "{err}");
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

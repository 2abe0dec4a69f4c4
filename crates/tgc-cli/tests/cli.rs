//! The `tgc` command-line contract (`DESIGN.md`): `check`, `run` and
//! `compile` on the spec's example graphs and the example graphs, the CPU
//! backend against the reference interpreter, exit codes and diagnostics.

use std::path::Path;
use std::process::Command;

use tgc_runtime::tensor::sample_values;
use tgc_runtime::{npy, DType, HostTensor};

mod common;
use common::{repo, stderr, temp, tgc};

/// The tolerance of an f32 output of the CPU backend against the
/// interpreter, absolute and relative: 1e-5 (about 84 units in the last
/// place), the emit harness's `Tol::F32` and its reasons — room for the
/// few-ulp bounds of `docs/numerics.md`'s ops along a chain and a sum's
/// rounding in another order, the floor that relative error of the terms
/// of magnitude 1 a sum cancels (the inputs are `sample_values`, in [-1, 1)).
const F32_TOL: f64 = 1e-5;

/// The tolerance of an f16 or bf16 output, absolute and relative: 1e-3,
/// about one f16 step near 1 (the output rounded to the other side of a sum
/// that differs in its last f32 bits).
const HALF_TOL: f64 = 1e-3;

/// The tolerance of an f16 or bf16 output of the GPU, absolute and
/// relative: 1e-2. The tensor-core and SIMT kernels sum in f32 in another
/// order than the interpreter (tiles, warp shuffles, split rows), so an
/// output can round to a neighbouring 16-bit value, and intermediate
/// values stored in the dtype carry that step on: one bf16 step is 2^-7
/// ≈ 7.8e-3 relative, past [`HALF_TOL`], which holds the CPU backend's
/// outputs (the interpreter's order of rounding steps). f32 outputs are
/// held to [`F32_TOL`] on the GPU too.
const GPU_HALF_TOL: f64 = 1e-2;

/// Writes random inputs, runs the graph on the CPU backend and on the
/// interpreter, and compares every output within [`F32_TOL`] (f32 outputs)
/// or [`HALF_TOL`] (f16 and bf16 ones); i32 and bool outputs are exact.
fn cpu_matches_interp(graph: &str, inputs: &[(&str, DType, Vec<usize>)], dims: &[(&str, i64)]) {
    cpu_matches_interp_with(graph, inputs, dims, &[], HALF_TOL);
}

/// [`cpu_matches_interp`] with `cpu_args` added to the CPU run, f16 and
/// bf16 outputs within `half_tol` (absolute and relative) of the
/// interpreter.
fn cpu_matches_interp_with(
    graph: &str,
    inputs: &[(&str, DType, Vec<usize>)],
    dims: &[(&str, i64)],
    cpu_args: &[&str],
    half_tol: f64,
) {
    let dir = temp(&format!(
        "{}-{}-{}",
        graph.replace(['/', '.'], "_"),
        dims.iter().map(|d| d.1.to_string()).collect::<Vec<_>>().join("x"),
        cpu_args.join("_").replace(['=', '-'], "")
    ));
    let mut args = write_inputs(&dir, inputs);
    for (s, v) in dims {
        args.push("--dim".into());
        args.push(format!("{s}={v}"));
    }
    let mut outs = Vec::new();
    for backend in ["cpu", "interp"] {
        let out_dir = dir.join(backend);
        let mut a: Vec<String> = vec![
            "run".into(),
            graph.into(),
            "--backend".into(),
            backend.into(),
            "--output-dir".into(),
            out_dir.display().to_string(),
        ];
        a.extend(args.iter().cloned());
        if backend == "cpu" {
            a.extend(cpu_args.iter().map(|s| s.to_string()));
        }
        let refs: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
        let o = tgc(&refs);
        assert!(o.status.success(), "tgc {refs:?} failed: {}", stderr(&o));
        outs.push(out_dir);
    }
    let mut compared = 0;
    for entry in std::fs::read_dir(&outs[1]).unwrap() {
        let p = entry.unwrap().path();
        let want = npy::read_npy(&p).unwrap();
        let got = npy::read_npy(outs[0].join(p.file_name().unwrap())).unwrap();
        assert_eq!(got.shape(), want.shape());
        assert_eq!(got.dtype(), want.dtype());
        let tol = match want.dtype() {
            DType::F32 => F32_TOL,
            DType::F16 | DType::BF16 => half_tol,
            DType::I32 | DType::Bool => 0.0,
        };
        for (i, (g, w)) in got.to_f64_vec().iter().zip(want.to_f64_vec()).enumerate() {
            let ok = (g - w).abs() <= tol + tol * w.abs();
            assert!(ok, "{graph} {dims:?}: {}[{i}]: cpu {g} vs interp {w} (tolerance {tol:e})", p.display());
        }
        compared += 1;
    }
    assert!(compared > 0, "no outputs were written");
    gpu_matches_interp(&GpuCase { graph, inputs, dims, algos: &[] }, &dir, &args, &outs[1]);
}

/// Sample tensors for `inputs` (`sample_values` seeded 1, 2, … in order)
/// written to `dir` as `.npy`; the `--input NAME=FILE` arguments that read
/// them.
fn write_inputs(dir: &Path, inputs: &[(&str, DType, Vec<usize>)]) -> Vec<String> {
    let mut args = Vec::new();
    for (k, (name, dtype, shape)) in inputs.iter().enumerate() {
        let n = shape.iter().product();
        let t = HostTensor::from_f64(*dtype, shape, &sample_values(k as u64 + 1, n)).unwrap();
        let file = dir.join(format!("{name}.npy"));
        npy::write_npy(&file, &t).unwrap();
        args.push("--input".into());
        args.push(format!("{name}={}", file.display()));
    }
    args
}

/// The GPU tier's rules, shared with the other test binaries that have a
/// GPU part.
mod gpu_tier {
    include!("../../../tests/support/gpu_tier.rs");
}

/// The committed list of the CLI tests' graphs that `tgc run --backend
/// cuda` is expected to refuse, each with the start of its refusal.
const REFUSALS: &str = "crates/tgc-cli/tests/gpu_refusals.txt";

/// The reason [`REFUSALS`] gives for `graph` (the refusal's text must
/// contain it), if the graph is listed.
fn listed_refusal(graph: &str) -> Option<String> {
    let text = std::fs::read_to_string(repo().join(REFUSALS)).unwrap_or_else(|e| panic!("{REFUSALS}: {e}"));
    parse_refusals(&text).into_iter().find(|(g, _)| g == graph).map(|(_, why)| why)
}

/// The `(graph, reason)` lines of a refusal list: `GRAPH | error[Name]:
/// message`, `#` comments and blank lines aside. Panics on a line of
/// another form, naming it.
fn parse_refusals(text: &str) -> Vec<(String, String)> {
    let lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'));
    lines
        .map(|(at, l)| match l.split_once(" | ") {
            Some((g, why)) if why.starts_with("error[") => (g.trim().to_string(), why.trim().to_string()),
            _ => panic!("{REFUSALS}:{}: expected `GRAPH | error[Name]: message`: {l}", at + 1),
        })
        .collect()
}

/// One GPU comparison of the CLI tests: `tgc run GRAPH --backend cuda` on
/// inputs of these dtypes and shapes, with these `--dim`s and `--algo` pins.
struct GpuCase<'a> {
    graph: &'a str,
    inputs: &'a [(&'a str, DType, Vec<usize>)],
    dims: &'a [(&'a str, i64)],
    algos: &'a [&'a str],
}

/// What `tgc run --backend cuda` answered for a graph, or what its
/// lowering alone decides before a device is needed ([`lowering`]).
#[derive(Debug)]
enum Cuda {
    /// It ran (or it lowers: the run's kernels would be compiled).
    Runs,
    /// No device: `tgc: no GPU device available: …`.
    NoDevice(String),
    /// The GPU lowering refused the graph: the `error[Unsupported]` or
    /// `error[UnboundSymbol]` diagnostic.
    Refused(String),
    /// Any other failure.
    Failed(String),
}

/// What the GPU tier does with an answer.
#[derive(Debug, PartialEq)]
enum Verdict {
    /// Compare the GPU's outputs with the interpreter's.
    Compare,
    /// Skip the comparison, printing why.
    Skip(String),
    /// Fail the test with this message.
    Fail(String),
}

/// The GPU tier's rule for `graph`'s answer `got`, `listed` being the
/// reason [`REFUSALS`] gives for it and `required` whether `TGC_GPU=1`:
/// a run is compared, and fails if the graph is listed (a listed graph
/// that runs is a stale line); no device skips, or fails when the tier is
/// required; a refusal skips only when it is listed with that reason, and
/// fails otherwise, with or without `TGC_GPU=1` (a refusal means that a
/// device was opened, or that the lowering alone refused); any other
/// failure fails.
fn verdict(graph: &str, got: &Cuda, listed: Option<&str>, required: bool) -> Verdict {
    match (got, listed) {
        (Cuda::Runs, None) => Verdict::Compare,
        (Cuda::Runs, Some(why)) => Verdict::Fail(format!(
            "{graph} is listed in {REFUSALS} as refused ({why}), but the GPU lowering takes it: remove its line"
        )),
        (Cuda::NoDevice(e), _) if !required => Verdict::Skip(format!("no GPU: {e}")),
        (Cuda::NoDevice(e), _) => Verdict::Fail(format!("TGC_GPU=1 but there is no GPU: {e}")),
        (Cuda::Refused(e), Some(why)) if e.contains(why) => {
            Verdict::Skip(format!("refused as {REFUSALS} expects: {why}"))
        }
        (Cuda::Refused(e), Some(why)) => {
            Verdict::Fail(format!("{graph} is refused, but not as {REFUSALS} says ({why}): {e}"))
        }
        (Cuda::Refused(e), None) => {
            Verdict::Fail(format!("{graph} is refused by the GPU lowering and is not in {REFUSALS}: {e}"))
        }
        (Cuda::Failed(e), _) => Verdict::Fail(format!("{graph}: tgc run --backend cuda failed: {e}")),
    }
}

/// A GPU lowering for the check: the bound graph and target to the
/// program's unbound symbols, or the refusal.
type Lowering<'a> =
    dyn Fn(&tgc_core::tiny::Graph, &tgc_core::plan::Target) -> Result<Vec<String>, tgc_core::Diagnostic> + 'a;

/// What `tgc run CASE --backend cuda` decides before it opens a device
/// (`tgc-cli`'s `run_graph` and `gpu::run_cuda`, the same calls): the
/// graph bound to the dims of its inputs' shapes and the `--dim`s, lowered
/// by `lower` for `target`; `Refused` with `error[Name]: message` when
/// that fails or leaves a symbol unbound, else `Runs`.
fn lowering(case: &GpuCase, target: &tgc_core::plan::Target, lower: &Lowering) -> Cuda {
    use tgc_core::pipeline;
    let path = repo().join(case.graph);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", case.graph));
    let g = pipeline::load(&text, pipeline::Format::of(&path, &text), None).expect("the graph loads").graph;
    let shapes: Vec<Vec<usize>> = case.inputs.iter().map(|(_, _, s)| s.clone()).collect();
    let given = case.dims.iter().map(|(s, v)| (s.to_string(), *v)).collect();
    let values = g.resolve_dims(&given, Some(&shapes)).expect("the dims resolve");
    let bound = g.bind(&values).expect("the graph binds");
    let refused = |d: tgc_core::Diagnostic| Cuda::Refused(format!("error[{}]: {}", d.name, d.message));
    match lower(&bound, target) {
        Ok(symbols) => match symbols.first() {
            Some(s) => refused(tgc_core::Diagnostic::new(
                tgc_core::diag::ErrorName::UnboundSymbol,
                format!("symbol `{s}` has no value"),
            )),
            None => Cuda::Runs,
        },
        Err(d) => refused(d),
    }
}

/// The GPU lowering `tgc run --backend cuda` uses: the analytic model with
/// the `--algo` pins, for `target`; the program's unbound symbols.
fn cli_lowering<'a>(
    algos: &'a [&'a str],
) -> impl Fn(&tgc_core::tiny::Graph, &tgc_core::plan::Target) -> Result<Vec<String>, tgc_core::Diagnostic> + 'a {
    move |g, target| {
        use tgc_core::plan::cost;
        let pins = algos.iter().map(|a| cost::parse_pin(a)).collect::<Result<_, _>>()?;
        let pinned = cost::PinnedAlgorithms { pins, inner: &cost::Analytic };
        let plans = tgc_core::tune::gpu::Recorded::new(None, &pinned);
        Ok(tgc_core::gpu::driver::lower_program_with(g, target, &plans)?.symbols)
    }
}

/// The GPU tier (`DESIGN.md`): `--backend cuda` on the same inputs,
/// compared with the interpreter's outputs in `want_dir` (f32 within
/// [`F32_TOL`], f16 and bf16 within [`GPU_HALF_TOL`]), then counted ([`gpu_tier::compared`]). First,
/// with or without a GPU, the lowering for each target a device can get
/// (sm80, sm90) must refuse exactly the graphs [`REFUSALS`] lists, for the
/// reason it gives ([`verdict`]). Then the run: without a GPU it prints
/// that it skipped, and with `TGC_GPU=1` (scripts/gpu_tests.sh) fails; a
/// refusal skips only for a listed graph, with its listed reason.
fn gpu_matches_interp(case: &GpuCase, dir: &Path, args: &[String], want_dir: &Path) {
    let graph = case.graph;
    let listed = listed_refusal(graph);
    let required = gpu_tier::required();
    for target in [&tgc_core::plan::target::SM80, &tgc_core::plan::target::SM90] {
        let lowered = lowering(case, target, &cli_lowering(case.algos));
        if let Verdict::Fail(e) = verdict(graph, &lowered, listed.as_deref(), required) {
            panic!("{} lowering: {e}", target.name);
        }
    }
    let out_dir = dir.join("cuda");
    let mut a: Vec<String> = vec![
        "run".into(),
        graph.into(),
        "--backend".into(),
        "cuda".into(),
        "--output-dir".into(),
        out_dir.display().to_string(),
    ];
    a.extend(args.iter().cloned());
    let refs: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
    let o = tgc(&refs);
    let e = stderr(&o);
    let got = match o.status.code() {
        Some(0) => Cuda::Runs,
        Some(1) if e.contains("no GPU device available") => Cuda::NoDevice(e.trim().to_string()),
        Some(1) if e.contains("error[Unsupported]") || e.contains("error[UnboundSymbol]") => {
            Cuda::Refused(e.trim().to_string())
        }
        _ => Cuda::Failed(format!("tgc {refs:?}: {e}")),
    };
    match verdict(graph, &got, listed.as_deref(), required) {
        Verdict::Compare => {}
        Verdict::Skip(why) => {
            eprintln!("{graph}: skipped the GPU part: {why}");
            return;
        }
        Verdict::Fail(e) => panic!("{e}"),
    }
    for entry in std::fs::read_dir(want_dir).unwrap() {
        let p = entry.unwrap().path();
        let want = npy::read_npy(&p).unwrap();
        let got = npy::read_npy(out_dir.join(p.file_name().unwrap())).unwrap();
        assert_eq!(got.shape(), want.shape());
        assert_eq!(got.dtype(), want.dtype());
        let tol = match want.dtype() {
            DType::F32 => F32_TOL,
            DType::F16 | DType::BF16 => GPU_HALF_TOL,
            DType::I32 | DType::Bool => 0.0,
        };
        for (i, (g, w)) in got.to_f64_vec().iter().zip(want.to_f64_vec()).enumerate() {
            let ok = (g - w).abs() <= tol + tol * w.abs();
            assert!(ok, "{graph}: {}[{i}]: cuda {g} vs interp {w} (tolerance {tol:e})", p.display());
        }
    }
    let shapes: Vec<&Vec<usize>> = case.inputs.iter().map(|(_, _, s)| s).collect();
    gpu_tier::compared(&format!("cli {graph} {shapes:?} {:?} {:?}", case.dims, case.algos));
}

/// The GPU tier's rule on every kind of answer, no GPU needed: a refusal
/// of a graph not in [`REFUSALS`] fails under `TGC_GPU=1` (and without),
/// a listed graph that runs fails, a listed refusal for another reason
/// fails, no device fails only under `TGC_GPU=1`.
#[test]
fn the_gpu_tier_fails_an_unlisted_refusal_and_a_stale_listing() {
    let refused = Cuda::Refused("g.tgc: error[Unsupported]: no template takes it".into());
    let why = "error[Unsupported]: no template takes it";
    for required in [true, false] {
        assert!(matches!(verdict("g.tgc", &refused, None, required), Verdict::Fail(_)));
        assert!(matches!(verdict("g.tgc", &Cuda::Runs, Some(why), required), Verdict::Fail(_)));
        assert!(matches!(verdict("g.tgc", &refused, Some("error[Unsupported]: f32"), required), Verdict::Fail(_)));
        assert!(matches!(verdict("g.tgc", &refused, Some(why), required), Verdict::Skip(_)));
        assert_eq!(verdict("g.tgc", &Cuda::Runs, None, required), Verdict::Compare);
        assert!(matches!(verdict("g.tgc", &Cuda::Failed("boom".into()), None, required), Verdict::Fail(_)));
    }
    let none = Cuda::NoDevice("tgc: no GPU device available: no driver".into());
    assert!(matches!(verdict("g.tgc", &none, None, true), Verdict::Fail(_)));
    assert!(matches!(verdict("g.tgc", &none, None, false), Verdict::Skip(_)));
    // The committed list parses, and each line names a graph that exists.
    let text = std::fs::read_to_string(repo().join(REFUSALS)).unwrap();
    for (graph, _) in parse_refusals(&text) {
        assert!(repo().join(&graph).is_file(), "{REFUSALS}: no graph {graph}");
    }
}

/// A deliberately broken GPU lowering — a template that refuses every
/// graph — fails the CLI's GPU check with no GPU, for every graph not in
/// [`REFUSALS`]: what `gpu_matches_interp` panics on, under `TGC_GPU=1` or
/// not. The real lowering of the same graph passes the check.
#[test]
fn a_lowering_that_refuses_every_graph_fails_the_gpu_check() {
    let broken = |_: &tgc_core::tiny::Graph, _: &tgc_core::plan::Target| -> Result<Vec<String>, tgc_core::Diagnostic> {
        Err(tgc_core::Diagnostic::new(tgc_core::diag::ErrorName::Unsupported, "this template refuses every graph"))
    };
    let inputs = [("x", DType::F16, vec![7, 5]), ("w", DType::F16, vec![5, 3]), ("bias", DType::F16, vec![3])];
    let case = GpuCase { graph: "examples/graphs/gemm_bias_relu.tgc", inputs: &inputs, dims: &[], algos: &[] };
    assert_eq!(listed_refusal(case.graph), None);
    for target in [&tgc_core::plan::target::SM80, &tgc_core::plan::target::SM90] {
        let got = lowering(&case, target, &broken);
        match verdict(case.graph, &got, None, true) {
            Verdict::Fail(e) => assert!(e.contains("this template refuses every graph") && e.contains(REFUSALS), "{e}"),
            other => panic!("{other:?}"),
        }
        let real = lowering(&case, target, &cli_lowering(&[]));
        assert_eq!(verdict(case.graph, &real, None, true), Verdict::Compare, "{}: {real:?}", target.name);
    }
}

/// `tgc run --backend cuda` without a GPU: exit 1 and a message saying
/// there is none (no panic, nothing compiled); with one, it runs.
#[test]
fn run_on_cuda_without_a_gpu_says_so_and_exits_1() {
    let out = temp("cuda-no-device");
    let (x, w, b) = (out.join("x.npy"), out.join("w.npy"), out.join("b.npy"));
    for (file, shape) in [(&x, vec![128, 64]), (&w, vec![64, 256]), (&b, vec![256])] {
        let n = shape.iter().product();
        npy::write_npy(file, &HostTensor::from_f64(DType::F16, &shape, &sample_values(3, n)).unwrap()).unwrap();
    }
    let inputs = [format!("x={}", x.display()), format!("w={}", w.display()), format!("bias={}", b.display())];
    let dir = out.display().to_string();
    let mut args = vec!["run", "examples/graphs/gemm_bias_relu.tgc", "--backend", "cuda", "--output-dir", &dir];
    for i in &inputs {
        args.extend(["--input", i.as_str()]);
    }
    let o = tgc(&args);
    if o.status.success() {
        eprintln!("a GPU is present: the run succeeded (its results are compared in the other tests)");
        return;
    }
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.starts_with("tgc: no GPU device available: "), "{e}");
    assert!(!e.contains("panicked"), "{e}");
}

#[test]
fn spec_gemm_runs_on_cpu_like_the_interpreter_for_odd_sizes() {
    for s in [1usize, 7, 129] {
        let ins = [("A", DType::F16, vec![s, s]), ("B", DType::F16, vec![s, s])];
        cpu_matches_interp("tests/spec/002_gemm.json", &ins, &[]);
    }
    let ins = [("A", DType::F16, vec![5, 3]), ("B", DType::F16, vec![3, 9])];
    cpu_matches_interp("tests/spec/002_gemm.json", &ins, &[("M", 5)]);
}

#[test]
fn spec_gemm_bias_relu_op_list_runs() {
    let ins = [("A", DType::F16, vec![7, 5]), ("B", DType::F16, vec![5, 3]), ("bias", DType::F16, vec![3])];
    cpu_matches_interp("tests/spec/000_gemm_bias_relu.json", &ins, &[]);
}

#[test]
fn spec_conv2d_with_pool_view_runs_with_dims_given_at_run_time() {
    // N=2, G=1, Cin=3, H=W=9, Cout=4, 3x3, stride 2, pad 1 -> Oy = Ox = 5.
    let ins = [("X", DType::F16, vec![2, 3, 9, 9]), ("W", DType::F16, vec![4, 3, 3, 3]), ("bias", DType::F16, vec![4])];
    let dims = [
        ("G", 1),
        ("Rcout", 4),
        ("Sh", 2),
        ("Sw", 2),
        ("Dh", 1),
        ("Dw", 1),
        ("pt", 1),
        ("pb", 1),
        ("pl", 1),
        ("pr", 1),
        ("Oy", 5),
        ("Ox", 5),
    ];
    cpu_matches_interp("tests/spec/002_conv2d.json", &ins, &dims);
}

#[test]
fn spec_attention_softmax_runs() {
    let ins = [("Q", DType::F16, vec![1, 2, 5, 8]), ("K", DType::F16, vec![1, 2, 7, 8])];
    cpu_matches_interp("tests/spec/002_attention.json", &ins, &[]);
}

#[test]
fn spec_001_matmuls_run() {
    cpu_matches_interp(
        "tests/spec/001_matmul_2dx2d.json",
        &[("X", DType::F16, vec![6, 4]), ("W", DType::F16, vec![4, 5]), ("bias", DType::F16, vec![5])],
        &[],
    );
    cpu_matches_interp(
        "tests/spec/001_matmul_1dx2d.json",
        &[("x", DType::F16, vec![4]), ("W", DType::F16, vec![4, 5])],
        &[],
    );
    cpu_matches_interp(
        "tests/spec/001_matmul_2dx1d.json",
        &[("X", DType::F16, vec![6, 4]), ("w", DType::F16, vec![4])],
        &[],
    );
}

#[test]
fn example_graphs_run_on_cpu_like_the_interpreter() {
    for (m, n, k) in [(1, 1, 1), (7, 7, 7), (129, 33, 17)] {
        let ins = [("x", DType::F16, vec![m, k]), ("w", DType::F16, vec![k, n]), ("bias", DType::F16, vec![n])];
        cpu_matches_interp("examples/graphs/gemm_bias_relu.tgc", &ins, &[]);
    }
    let ins = [("x", DType::F32, vec![2, 3, 32, 32]), ("w", DType::F32, vec![8, 3, 3, 3]), ("b", DType::F32, vec![8])];
    cpu_matches_interp("examples/graphs/conv_relu_pool.tgc", &ins, &[]);
    let ins = [
        ("q", DType::F32, vec![1, 2, 5, 4]),
        ("k", DType::F32, vec![1, 2, 6, 4]),
        ("v", DType::F32, vec![1, 2, 6, 4]),
        ("mask", DType::F32, vec![5, 6]),
    ];
    cpu_matches_interp("examples/graphs/attention.tgc", &ins, &[]);
}

/// Graphs that are one implicit GEMM on sm80 (a channels-last convolution,
/// a strided, dilated, asymmetrically padded NCHW one, a batched matmul
/// with a residual): the CPU backend and, on a GPU, the tensor-core
/// kernels like the interpreter.
#[test]
fn implicit_gemm_graphs_run_like_the_interpreter() {
    let ins =
        [("x", DType::F16, vec![2, 12, 10, 32]), ("w", DType::F16, vec![48, 3, 3, 32]), ("b", DType::F16, vec![48])];
    cpu_matches_interp("crates/tgc-cli/tests/graphs/conv3x3_nhwc.tgc", &ins, &[]);
    let ins =
        [("x", DType::F16, vec![2, 8, 13, 11]), ("w", DType::F16, vec![24, 8, 3, 3]), ("b", DType::F16, vec![24])];
    cpu_matches_interp("crates/tgc-cli/tests/graphs/conv_nchw_strided.tgc", &ins, &[]);
    let ins = [
        ("p", DType::F16, vec![2, 3, 33, 40]),
        ("v", DType::F16, vec![2, 3, 40, 24]),
        ("r", DType::F16, vec![2, 3, 33, 24]),
    ];
    cpu_matches_interp("crates/tgc-cli/tests/graphs/bmm_residual.tgc", &ins, &[]);
    for graph in ["conv3x3_nhwc", "conv_nchw_strided", "bmm_residual"] {
        let path = format!("crates/tgc-cli/tests/graphs/{graph}.tgc");
        let o = tgc(&["compile", &path, "--target", "sm80", "--dump", "gpu"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            out.starts_with("=== gpu ===\n// compiled for sm_80 (--target sm80)\n// Gemm form; ptxas: "),
            "{graph}: {out}"
        );
        assert!(!stderr(&o).contains("note:"), "{graph}: {}", stderr(&o));
    }
}

/// A convolution + ReLU + 2×2 max pool (one kernel pooling its tile on
/// sm80 and sm90) and an attention of head dimension 64 (sm90's wgmma
/// branch on a 9.x device): the CPU backend and, on a GPU, the kernels like
/// the interpreter; `compile --target sm90 --dump gpu` shows one kernel
/// each, the attention's an sm90 one.
#[test]
fn pooled_convolution_and_d64_attention_run_like_the_interpreter() {
    let path = "crates/tgc-cli/tests/graphs/conv_pool_nhwc.tgc";
    let ins =
        [("x", DType::F16, vec![2, 11, 9, 16]), ("w", DType::F16, vec![32, 3, 3, 16]), ("b", DType::F16, vec![32])];
    cpu_matches_interp(path, &ins, &[]);
    let att = "crates/tgc-cli/tests/graphs/attention_d64.tgc";
    let ins = [
        ("q", DType::F16, vec![1, 2, 70, 64]),
        ("k", DType::F16, vec![1, 2, 130, 64]),
        ("v", DType::F16, vec![1, 2, 130, 64]),
    ];
    cpu_matches_interp(att, &ins, &[]);
    for (graph, form) in [(path, "// Gemm form; ptxas: "), (att, "// Attention form; ptxas: ")] {
        let o = tgc(&["compile", graph, "--target", "sm90", "--dump", "gpu"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert_eq!(out.matches("form; ptxas: ").count(), 1, "{out}");
        assert!(out.contains(form) && out.contains("arch=sm90"), "{out}");
    }
}

/// `--algo conv=winograd_3x3` pins Winograd F(2×2, 3×3) for a 3×3
/// convolution the analytic model keeps on the implicit GEMM: `compile
/// --target sm80` gives its four kernels (three transforms around the
/// batched GEMM), the `plan` dump shows the implicit GEMM refused by the
/// pin, and on a GPU `run --backend cuda --algo …` matches the interpreter
/// (within the GPU tier's 1e-2: Winograd's error bound is larger than the
/// direct convolution's, `gpu::winograd`). A pin that names no algorithm,
/// or a pin for the CPU, is an error that lists the choices.
#[test]
fn a_pinned_algorithm_is_what_compile_and_run_use() {
    let path = "crates/tgc-cli/tests/graphs/conv3x3_nhwc.tgc";
    let o = tgc(&["compile", path, "--target", "sm80", "--algo", "conv=winograd_3x3", "--dump", "gpu,plan"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(out.matches("// WinogradTransform form; ptxas: ").count(), 3, "{out}");
    assert_eq!(out.matches("// Gemm form; ptxas: ").count(), 1, "{out}");
    assert!(out.contains("* algo_choice conv = winograd_3x3"), "{out}");
    assert!(out.contains("is not the pinned winograd_3x3 (--algo)"), "{out}");
    // Without the pin, the model's choice: the one implicit GEMM.
    let o = tgc(&["compile", path, "--target", "sm80", "--dump", "gpu"]);
    assert!(String::from_utf8_lossy(&o.stdout).matches("form; ptxas: ").count() == 1);

    let o = tgc(&["compile", path, "--target", "sm80", "--algo", "conv=fft"]);
    assert_eq!(o.status.code(), Some(1));
    let want = "--algo: unknown conv algorithm `fft`; expected one of implicit_gemm, winograd_3x3";
    assert!(stderr(&o).contains(want), "{}", stderr(&o));
    let o = tgc(&["compile", path, "--algo", "conv=winograd_3x3"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--algo applies to --target sm80 and sm90 only"), "{}", stderr(&o));

    // The GPU tier: the pinned program on the device against the interpreter.
    let dir = temp("winograd-run");
    let ins =
        [("x", DType::F16, vec![2, 12, 10, 32]), ("w", DType::F16, vec![48, 3, 3, 32]), ("b", DType::F16, vec![48])];
    let mut args = write_inputs(&dir, &ins);
    let want = dir.join("interp");
    let mut a = vec!["run", path, "--backend", "interp", "--output-dir", want.to_str().unwrap()];
    a.extend(args.iter().map(String::as_str));
    let o = tgc(&a);
    assert!(o.status.success(), "{}", stderr(&o));
    args.extend(["--algo".to_string(), "conv=winograd_3x3".to_string()]);
    gpu_matches_interp(
        &GpuCase { graph: path, inputs: &ins, dims: &[], algos: &["conv=winograd_3x3"] },
        &dir,
        &args,
        &want,
    );
}

/// The cumulative ops: the CPU backend (rows of one block and of several)
/// and, on a GPU, the warp scans (one segment, several) like the
/// interpreter.
#[test]
fn cumulative_graph_runs_like_the_interpreter() {
    let path = "crates/tgc-cli/tests/graphs/cumulative.tgc";
    for (m, n) in [(3, 40), (2, 5000)] {
        let ins = [("x", DType::F32, vec![m, n]), ("h", DType::F16, vec![m, n])];
        cpu_matches_interp(path, &ins, &[("M", m as i64), ("N", n as i64)]);
    }
}

/// `--dump tiny` marks the views region formation stores (`004`'s
/// automatic contiguous copies): the transposed table a `take` reads at
/// data-dependent rows; not the transpose that an element-wise op reads
/// through its index map.
#[test]
fn tiny_dump_marks_contiguous_copies() {
    let file = temp("contiguous-copy").join("g.tgc");
    let src = "graph<N=4> embed(table: f32[8, 10], ids: i32[N], pos: f32[N, 8], a: f32[8, 10]) -> (y: f32[N, 8], z: f32[10, 8]) {\n    \
               y = take(transpose(table, 0, 1), ids, 0) + pos\n    z = transpose(a, 0, 1) * 2\n    return y, z\n}\n";
    std::fs::write(&file, src).unwrap();
    let o = tgc(&["compile", file.to_str().unwrap(), "--dump", "tiny"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let marked: Vec<&str> = out.lines().filter(|l| l.ends_with("# contiguous copy")).collect();
    assert_eq!(marked.len(), 1, "{out}");
    assert!(marked[0].contains("PERMUTE(table)"), "{out}");
}

/// A graph that is one attention: the CPU backend and, on a GPU, the fused
/// attention kernel like the interpreter; `--dump gpu,plan` show the one
/// kernel and its schedule.
#[test]
fn fused_attention_graph_runs_like_the_interpreter() {
    let path = "crates/tgc-cli/tests/graphs/attention_causal_mask.tgc";
    let ins = [
        ("q", DType::F16, vec![2, 3, 70, 32]),
        ("k", DType::F16, vec![2, 3, 130, 32]),
        ("v", DType::F16, vec![2, 3, 130, 32]),
        ("mask", DType::F16, vec![70, 130]),
    ];
    cpu_matches_interp(path, &ins, &[]);
    let o = tgc(&["compile", path, "--target", "sm80", "--dump", "gpu,plan"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.starts_with("=== gpu ===\n// compiled for sm_80 (--target sm80)\n// Attention form; ptxas: "), "{out}");
    assert!(out.contains("0 bytes spilled"), "{out}");
    // Both softmax algorithms ranked, online softmax chosen.
    assert!(out.contains("* algo_choice attention = online_softmax "), "{out}");
    assert!(out.contains("  algo_choice attention = streaming_softmax_2pass "), "{out}");
    assert!(!stderr(&o).contains("note:"), "{}", stderr(&o));
}

/// A graph with two contractions that is no attention: each GEMM region on
/// the tensor-core template (`plan_<kernel>.json` each), the CPU backend
/// and, on a GPU, the program like the interpreter.
#[test]
fn gemm_regions_of_a_larger_graph_run_like_the_interpreter() {
    let path = "crates/tgc-cli/tests/graphs/mlp_f16.tgc";
    let ins = [
        ("x", DType::F16, vec![37, 16]),
        ("w1", DType::F16, vec![16, 32]),
        ("b1", DType::F16, vec![32]),
        ("w2", DType::F16, vec![32, 24]),
        ("b2", DType::F16, vec![24]),
    ];
    cpu_matches_interp(path, &ins, &[]);
    let dir = temp("mlp-regions");
    let o = tgc(&["compile", path, "--target", "sm80", "--dump", "gpu", "--out", &dir.display().to_string()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let gpu = std::fs::read_to_string(dir.join("gpu.txt")).unwrap();
    assert_eq!(gpu.matches("// Gemm form; ptxas: ").count(), 2, "{gpu}");
    let plans = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| e.as_ref().is_ok_and(|e| e.file_name().to_string_lossy().starts_with("plan_")));
    assert_eq!(plans.count(), 2);
    assert!(!stderr(&o).contains("note:"), "{}", stderr(&o));
}

/// A matmul + bias + GELU: the CPU backend and, on a GPU, the kernel like
/// the interpreter; `compile --target sm80` and `--target sm90` with
/// `--dump gpu,cu` show one GEMM kernel whose epilogue computes the GELU
/// (no SIMT kernel for it), without a note.
#[test]
fn a_gemm_with_gelu_is_one_kernel() {
    let path = "crates/tgc-cli/tests/graphs/gemm_gelu.tgc";
    let ins = [("x", DType::F16, vec![37, 32]), ("w", DType::F16, vec![32, 64]), ("b", DType::F16, vec![64])];
    cpu_matches_interp(path, &ins, &[]);
    for target in ["sm80", "sm90"] {
        let o = tgc(&["compile", path, "--target", target, "--dump", "gpu,cu"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert_eq!(out.matches("form; ptxas: ").count(), 1, "{target}: {out}");
        assert!(out.contains("// Gemm form; ptxas: ") && out.contains(&format!("arch={target}")), "{target}: {out}");
        assert!(out.contains("// epilogue: cast(f16), bias, gelu"), "{target}: {out}");
        assert!(!stderr(&o).contains("note:"), "{target}: {}", stderr(&o));
    }
}

/// `tgc toolchain show` names the toolchain it finds (scripts/setup.sh
/// installed one); `tgc toolchain install` with a Python that cannot be
/// run says so, exits 1 and creates nothing.
#[test]
fn toolchain_show_and_a_failed_install() {
    let o = tgc(&["toolchain", "show"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.starts_with("CUDA toolchain: ") && out.contains("libnvrtc.so.13"), "{out}");
    let dir = temp("toolchain-install").join("cuda");
    let d = dir.display().to_string();
    let o = tgc(&["toolchain", "install", &d, "--python", "/nonexistent/python3"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("running /nonexistent/python3 -m pip"), "{e}");
    assert!(!e.contains("panicked"), "{e}");
    assert!(!dir.exists());
}

/// A BERT layer (MiniLM's, small): its six projections on the GEMM
/// template (the GELU in the intermediate one's epilogue) and its
/// attention fused, the rest SIMT kernels; the CPU
/// backend and, on a GPU, the program like the interpreter (the CPU within
/// 8e-3: f16 values rounded in another summation order, through two
/// layernorms, land a few f16 steps away; seen 3.9e-3 at 1.7).
#[test]
fn bert_layer_runs_its_contractions_on_the_templates() {
    let path = "crates/tgc-cli/tests/graphs/bert_layer_f16.tgc";
    let h = |n: usize| vec![n];
    let ins = [
        ("x", DType::F16, vec![2, 17, 32]),
        ("mask", DType::F16, vec![2, 17]),
        ("wq", DType::F16, vec![2, 32, 32]),
        ("bq", DType::F16, vec![2, 32]),
        ("wk", DType::F16, vec![32, 32]),
        ("bk", DType::F16, h(32)),
        ("wv", DType::F16, vec![32, 32]),
        ("bv", DType::F16, h(32)),
        ("wo", DType::F16, vec![32, 32]),
        ("bo", DType::F16, h(32)),
        ("g1", DType::F16, h(32)),
        ("b1", DType::F16, h(32)),
        ("wi", DType::F16, vec![64, 32]),
        ("bi", DType::F16, h(64)),
        ("wf", DType::F16, vec![32, 64]),
        ("bf", DType::F16, h(32)),
    ];
    cpu_matches_interp_with(path, &ins, &[], &[], 8e-3);
    let o = tgc(&["compile", path, "--target", "sm80", "--dump", "gpu"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let gpu = String::from_utf8_lossy(&o.stdout);
    assert_eq!(gpu.matches("// Gemm form; ptxas: ").count(), 6, "{gpu}");
    assert_eq!(gpu.matches("// Attention form; ptxas: ").count(), 1, "{gpu}");
    // The GELU is the intermediate projection's epilogue.
    assert!(gpu.contains("]) gelu\n"), "{gpu}");
}

/// `run --tile`: the fused conv→relu→maxpool kernel strip-mined on H and W
/// by run-time tiles that do and do not divide the 16×16 result.
#[test]
fn run_with_run_time_tiles_matches_the_interpreter() {
    let ins = [("x", DType::F32, vec![1, 3, 32, 32]), ("w", DType::F32, vec![8, 3, 3, 3]), ("b", DType::F32, vec![8])];
    for tiles in [["--tile", "2=3", "--tile", "3=5"], ["--tile", "3=16", "--tile", "2=1"]] {
        cpu_matches_interp_with("examples/graphs/conv_relu_pool.tgc", &ins, &[], &tiles, HALF_TOL);
    }
}

#[test]
fn bad_tiles_are_refused_with_the_reason() {
    let dir = temp("bad-tiles");
    let (x, w, b) = (dir.join("x.npy"), dir.join("w.npy"), dir.join("b.npy"));
    for (file, shape) in [(&x, vec![1, 3, 32, 32]), (&w, vec![8, 3, 3, 3]), (&b, vec![8])] {
        let n = shape.iter().product();
        npy::write_npy(file, &HostTensor::from_f64(DType::F32, &shape, &sample_values(1, n)).unwrap()).unwrap();
    }
    let inputs = [format!("x={}", x.display()), format!("w={}", w.display()), format!("b={}", b.display())];
    for (tile, backend, want) in [
        ("2=0", "cpu", "the size `0` is not an integer ≥ 1"),
        ("h=4", "cpu", "`h` is not an axis index"),
        ("9=4", "cpu", "error[InvalidAxis]: no kernel of the graph has an output loop 9"),
        ("2=4", "interp", "--tile applies to --backend cpu only"),
    ] {
        let mut args = vec!["run", "examples/graphs/conv_relu_pool.tgc", "--backend", backend, "--tile", tile];
        for i in &inputs {
            args.extend(["--input", i.as_str()]);
        }
        args.extend(["--output-dir", dir.to_str().unwrap()]);
        let o = tgc(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(stderr(&o).contains(want), "{tile}: {}", stderr(&o));
    }
    assert!(!dir.join("y.npy").exists(), "a refused run writes nothing");
}

#[test]
fn check_prints_the_signature() {
    let o = tgc(&["check", "examples/graphs/gemm_bias_relu.tgc"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("x: f16[M, K]") && out.contains("y: f16[M, N]"), "{out}");
}

#[test]
fn user_errors_exit_1_with_a_position_and_no_panic() {
    let dir = temp("errors");
    let bad = dir.join("bad.tgc");
    std::fs::write(&bad, "graph main(x: f32[4], y: f32[5]) -> (z: f32[4]) {\n    z = x + y\n    return z\n}\n")
        .unwrap();
    let o = tgc(&["check", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains("bad.tgc:2:11: error[BroadcastMismatch]"), "{e}");
    assert!(!e.contains("panicked"), "{e}");

    for args in [
        vec!["check", "no/such/file.tgc"],
        vec!["run", "examples/graphs/gemm_bias_relu.tgc"],
        vec!["run", "tests/spec/002_gemm.json", "--dim", "M=zero"],
        vec!["compile", "examples/graphs/gemm_bias_relu.tgc", "--dump", "gpu"],
        vec!["check", "examples/graphs/gemm_bias_relu.tgc", "--dump", "nonsense"],
        vec!["compile", "examples/graphs/gemm_bias_relu.tgc", "--dump", "nonsense"],
        vec!["frobnicate"],
    ] {
        let o = tgc(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{args:?}");
    }
}

#[test]
fn compile_dumps_the_regions_of_conv_relu_pool() {
    let o = tgc(&["compile", "examples/graphs/conv_relu_pool.tgc", "--dump", "region"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("compute_at") && out.contains("local_edge"), "{out}");
}

#[test]
fn check_dumps_poly_view_of_a_spec_graph() {
    let o = tgc(&["check", "tests/spec/002_conv2d.json", "--dump", "poly_view"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.starts_with("ok: graph main<") && out.contains("=== poly_view ===\npoly_view main\n"), "{out}");
    // The PAD: a read on the unpadded piece and a fill elsewhere, over the
    // graph's symbols; the symbolic stride leaves the window out of the SCoP.
    for want in [
        "block xp movement_affine",
        "S_xp[i0, i1, i2, i3] -> x[i0, i1, -pt + i2, -pl + i3] : pt <= i2 < H + pt and pl <= i3 < W + pl }",
        "fill 0.0 ",
        "block xw movement_affine\n    not in the SCoP: ",
        "block yacc reduce\n",
        "p -> yacc  true ",
        "yacc -> yacc  true|anti|output ",
    ] {
        assert!(out.contains(want), "missing `{want}` in\n{out}");
    }
    // With every symbol but the batch bound, the convolution is a contraction
    // whose input operand is read through the padding as a sliding window.
    let dims = [
        "Sh=1",
        "Sw=1",
        "Dh=1",
        "Dw=1",
        "G=1",
        "Cin_total=3",
        "Cin=3",
        "Kh=3",
        "Kw=3",
        "pt=1",
        "pb=1",
        "pl=1",
        "pr=1",
        "Cout=8",
        "Rcout=8",
        "H=8",
        "W=8",
        "Oy=8",
        "Ox=8",
    ];
    let mut args = vec!["compile", "tests/spec/002_conv2d.json", "--dump", "poly_view"];
    for d in &dims {
        args.extend(["--dim", d]);
    }
    let o = tgc(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    for want in ["block yacc contraction_pattern", "lhs x[i0, i5, i3 + i6 - 1, i4 + i7 - 1]", "rhs w[i2, i5, i6, i7]"] {
        assert!(out.contains(want), "missing `{want}` in\n{out}");
    }
    assert!(!out.contains("not in the SCoP"), "{out}");
}

#[test]
fn compile_dumps_the_stages_that_exist() {
    let o = tgc(&["compile", "examples/graphs/gemm_bias_relu.tgc", "--dump", "frontend,tiny,indexbook,c"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    for stage in ["=== frontend ===", "=== tiny ===", "=== indexbook ===", "=== c ===", "pk_rt->ukernel("] {
        assert!(out.contains(stage), "missing {stage} in\n{out}");
    }
    let dir = temp("compile-out");
    let o =
        tgc(&["compile", "tests/spec/002_gemm.json", "--dim", "M=8", "--out", dir.to_str().unwrap(), "--dump", "tiny"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(dir.join("tiny.json").exists() && dir.join("tiny.txt").exists());
}

/// `compile --timings` prints every stage that ran, in order, with its
/// seconds and peak memory, and a total, on stderr (stdout keeps the dumps).
#[test]
fn compile_timings_name_each_stage() {
    let o = tgc(&["compile", "examples/graphs/gemm_bias_relu.tgc", "--timings", "--dump", "tiny"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("=== tiny ==="));
    let e = stderr(&o);
    let stages: Vec<&str> = e.lines().skip(1).map(|l| l.split("  ").next().unwrap_or("").trim()).collect();
    assert_eq!(
        stages,
        [
            "load (read, parse, lower to Tiny IR)",
            "IndexBook and regions",
            "C source",
            "tiny.json",
            "region.json",
            "poly_view.json",
            "dump tiny",
            "total"
        ],
        "{e}"
    );
    assert!(e.starts_with("stage") && e.contains("peak MiB"), "{e}");
}

/// `compile --out` writes the regions (`000` §12.4) and the Poly-View
/// (§12.3) as JSON beside the C source; conv→relu→maxpool is one region
/// whose conv is computed at the pool's reads.
#[test]
fn compile_writes_region_and_poly_view_json() {
    let dir = temp("compile-json");
    let o = tgc(&["compile", "examples/graphs/conv_relu_pool.tgc", "--out", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let read = |f: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(dir.join(f)).unwrap()).unwrap_or_else(|e| panic!("{f}: {e}"))
    };
    let regions = read("region.json");
    let rs = regions["regions"].as_array().unwrap();
    assert_eq!(rs.len(), 1, "{regions:#}");
    let r = &rs[0]["region"];
    assert_eq!(r["outputs"][0]["materialize"], "gmem");
    let hows: Vec<&str> = r["body"].as_array().unwrap().iter().filter_map(|l| l["how"].as_str()).collect();
    assert!(hows.contains(&"compute_at") && hows.contains(&"accumulate"), "{hows:?}");
    assert_eq!(r["local_edges"].as_array().map(Vec::len), Some(1), "{r:#}");
    let view = read("poly_view.json");
    let blocks = view["poly_view"]["blocks"].as_array().unwrap();
    assert!(blocks.iter().any(|b| b["kind"] == "contraction_pattern"), "{view:#}");
}

#[test]
fn compile_dumps_the_plan_of_a_bound_gemm() {
    let args = ["compile", "tests/spec/002_gemm.json", "--dump", "plan"];
    let dims = ["--dim", "M=4096", "--dim", "N=4096", "--dim", "K=4096"];
    let o = tgc(&[&args[..], &dims[..]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    for want in ["=== plan ===", "GEMM M=4096 N=4096 K=4096 f16 on sm80", "estimate", "chosen plan (Schedule DSL):"] {
        assert!(out.contains(want), "missing {want} in\n{out}");
    }
    assert_eq!(out.lines().filter(|l| l.starts_with('*')).count(), 1, "{out}");
    // Unbound, the dump says why there is nothing to plan.
    let o = tgc(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("not planned: the sm80 template needs concrete sizes"));
}

/// `compile --dump plan` on a 3×3 convolution ranks its algorithms: the
/// implicit GEMM for ResNet-50's first 3×3 layer (64 channels, 56×56,
/// batch 8), Winograd for its 14×14 layer of 256 channels, with the plan
/// of Winograd's batched GEMM (the analytic model's choice, see
/// `gpu::winograd`).
#[test]
fn compile_dumps_the_algorithms_of_a_convolution() {
    let dir = temp("conv_algos");
    for (c, hw, chosen) in [(64, 56, "implicit_gemm"), (256, 14, "winograd_3x3")] {
        let src = dir.join(format!("conv{c}.tgc"));
        std::fs::write(
            &src,
            format!(
                "graph r(x: f16[8, {hw}, {hw}, {c}], w: f16[{c}, 3, 3, {c}], b: f16[{c}]) -> (y: f16[8, {hw}, {hw}, \
                 {c}]) {{\n    xc = permute(x, [0, 3, 1, 2])\n    wc = permute(w, [0, 3, 1, 2])\n    c = \
                 relu(conv2d(xc, wc, bias=b, pad=[1, 1]))\n    y = permute(c, [0, 2, 3, 1])\n    return y\n}}\n"
            ),
        )
        .unwrap();
        let o = tgc(&["compile", src.to_str().unwrap(), "--dump", "plan"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains(&format!("* algo_choice conv = {chosen}")), "{out}");
        assert_eq!(out.contains("winograd_3x3's batched GEMM"), chosen == "winograd_3x3", "{out}");
    }
}

/// `compile --target sm80` on a GEMM + bias + ReLU with concrete dims
/// writes the tensor-core kernel's CUDA C, PTX, cubin and plan, and prints
/// the GPU stages; any other graph gets its SIMT kernels (the launches of
/// `tgc run --backend cuda`), and a GEMM the template refuses a note
/// saying why. NVRTC and cuobjdump run here; no GPU does.
/// `--target sm90`: the GEMM takes the template's wgmma branch (TMA
/// copies completing on mbarriers, wgmma from descriptors), compiled for
/// sm_90a; the SASS shows the instructions.
#[test]
fn compile_sm90_gives_a_tma_and_wgmma_kernel() {
    let dir = temp("sm90");
    let graph = "examples/graphs/gemm_bias_relu.tgc";
    let dims = ["--dim", "M=1000", "--dim", "N=512", "--dim", "K=256"];
    let mut args = vec!["compile", graph, "--target", "sm90", "--out", dir.to_str().unwrap()];
    args.extend(dims);
    args.extend(["--dump", "gpu,sass"]);
    let o = tgc(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let cu = std::fs::read_to_string(dir.join("tgc_gemm_bias_relu.cu")).unwrap();
    for want in
        ["const __grid_constant__ tgc_tensor_map A_map", "wgmma.mma_async.sync.aligned.m64n", "tgc_tma_load_2d("]
    {
        assert!(cu.contains(want), "no `{want}` in the CUDA C");
    }
    let ptx = std::fs::read_to_string(dir.join("tgc_gemm_bias_relu.ptx")).unwrap();
    assert!(ptx.contains(".target sm_90a"), "{ptx}");
    let dumps =
        std::fs::read_to_string(dir.join("gpu.txt")).unwrap() + &std::fs::read_to_string(dir.join("sass.txt")).unwrap();
    for want in
        ["arch=sm90", "cp.async.bulk.tensor.2d", "mbarrier.try_wait.parity", "HGMMA.64x", "UTMALDG.2D", "SYNCS."]
    {
        assert!(dumps.contains(want), "no `{want}` in the dumps");
    }
}

#[test]
fn compile_sm80_writes_cuda_ptx_cubin_and_plan_and_dumps_the_gpu_stages() {
    let dir = temp("sm80");
    let graph = "examples/graphs/gemm_bias_relu.tgc";
    let dims = ["--dim", "M=1000", "--dim", "N=512", "--dim", "K=256"];
    let mut args = vec!["compile", graph, "--target", "sm80", "--out", dir.to_str().unwrap()];
    args.extend(dims);
    let o = tgc(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let read = |f: &str| std::fs::read(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
    let cu = String::from_utf8(read("tgc_gemm_bias_relu.cu")).unwrap();
    assert!(cu.contains("extern \"C\" __global__ void __launch_bounds__(64) gemm_bias_relu_gemm("), "{cu}");
    assert!(String::from_utf8(read("tgc_gemm_bias_relu.ptx")).unwrap().contains(".entry gemm_bias_relu_gemm("));
    assert_eq!(&read("tgc_gemm_bias_relu.cubin")[..4], b"\x7fELF");
    let plan = String::from_utf8(read("plan.json")).unwrap();
    assert!(plan.contains("\"tile\"") && plan.contains("\"relu\""), "{plan}");

    let mut args = vec!["compile", graph, "--target", "sm80", "--dump", "gpu,cu,ptx,sass,plan"];
    args.extend(dims);
    let o = tgc(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    for want in [
        "=== gpu ===\n// compiled for sm_80 (--target sm80)\n// Gemm form; ptxas: ",
        "\nkernel gemm_bias_relu_gemm arch=sm80",
        "=== cu ===\n// compiled for sm_80 (--target sm80)\n// Generated by tgc",
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
        "=== ptx ===",
        ".target sm_80",
        "=== sass ===",
        "HMMA.16816.F32",
        "LDGSTS.E.BYPASS.128.ZFILL",
        "LDSM.16.MT88.4",
        "=== plan ===",
    ] {
        assert!(out.contains(want), "no `{want}` in the dumps");
    }

    // Symbols without --dim and without a default in the graph header: the
    // GEMM's SIMT kernels over symbolic dims, and a positioned note.
    let o = tgc(&["compile", "tests/spec/002_gemm.json", "--target", "sm80", "--dump", "gpu"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(
            "002_gemm.json:14:6: note: falls back to SIMT kernels because the tensor-core templates refuse it: "
        ) && !stderr(&o).contains("error["),
        "{}",
        stderr(&o)
    );
    assert!(!String::from_utf8_lossy(&o.stdout).contains("Gemm form"));
    // Conv → ReLU → MaxPool in f32: its SIMT kernels, every one in the
    // dumps, and a note that the f32 operands keep it off the template
    // (the pool alone would not: the template pools its output tile).
    let o = tgc(&["compile", "examples/graphs/conv_relu_pool.tgc", "--target", "sm80", "--dump", "gpu,cu"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let kernels = out.matches("\nkernel conv_relu_pool_k").count();
    assert!(kernels >= 1 && out.matches("extern \"C\" __global__").count() == kernels, "{out}");
    assert!(
        stderr(&o).contains("note: falls back to SIMT kernels because")
            && stderr(&o).contains("refuse it: sm80 has no tensor-core MMA for f32 operands"),
        "{}",
        stderr(&o)
    );

    // Without the CUDA toolchain: an error that says how to install it.
    let mut args = vec!["compile", graph, "--target", "sm80"];
    args.extend(dims);
    let o = Command::new(env!("CARGO_BIN_EXE_tgc"))
        .args(&args)
        .current_dir(repo())
        .env("TGC_CUDA_ROOT", "/nonexistent/cuda")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("error[Io]: CUDA toolchain not found") && e.contains("bash scripts/setup.sh"), "{e}");
    assert!(!e.contains("panicked"), "{e}");
}

/// `--dump dot,dot_regions` on the MiniLM encoder writes `dot.dot` and
/// `dot_regions.dot`: well-formed DOT (every edge between declared nodes,
/// one cluster per region), and Graphviz renders both where `dot` is
/// installed (skipped with the reason where it is not).
#[test]
fn dot_dumps_of_minilm_are_graphviz_text() {
    let dir = temp("dot");
    let out = dir.to_str().unwrap();
    let o = tgc(&["compile", "examples/minilm/graphs/minilm.tgc", "--dump", "dot,dot_regions", "--out", out]);
    assert!(o.status.success(), "{}", stderr(&o));
    for stage in ["dot", "dot_regions"] {
        let text = std::fs::read_to_string(dir.join(format!("{stage}.dot"))).unwrap();
        assert!(text.starts_with("digraph \"main\" {\n") && text.ends_with("}\n"), "{stage}");
        assert_eq!(text.matches('{').count(), text.matches('}').count(), "{stage}: unbalanced braces");
        let declared: std::collections::HashSet<&str> =
            text.lines().filter_map(|l| l.trim().split_once(" [label=").map(|(n, _)| n)).collect();
        let mut edges = 0;
        for l in text.lines().filter(|l| l.contains(" -> ")) {
            let (a, b) = l.trim().split_once(" -> ").unwrap();
            let b = b.split([' ', ';']).next().unwrap();
            assert!(declared.contains(a) && declared.contains(b), "{stage}: edge to an undeclared node: {l}");
            edges += 1;
        }
        assert!(edges > 1000, "{stage}: {edges} edges");
        if stage == "dot_regions" {
            assert!(text.matches("subgraph cluster_").count() > 10, "{text}");
        }
        match Command::new("dot").arg("-Tsvg").arg(dir.join(format!("{stage}.dot"))).output() {
            Ok(r) => {
                assert!(r.status.success(), "Graphviz refused {stage}.dot: {}", String::from_utf8_lossy(&r.stderr))
            }
            Err(e) => eprintln!("{stage}: skipped rendering with Graphviz: `dot` cannot run here ({e})"),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A reader that closes the pipe early (`tgc compile … | head`) ends the
/// command quietly: status 0, no "internal error".
#[test]
fn a_closed_stdout_is_not_an_internal_error() {
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_tgc"))
        .args(["compile", "examples/minilm/graphs/minilm.tgc", "--dump", "tiny,dot,c"])
        .current_dir(repo())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read a little, then close: the dumps (about 0.8 MB) cannot all
    // fit in the pipe's buffer.
    let mut out = child.stdout.take().unwrap();
    let mut first = [0u8; 64];
    std::io::Read::read_exact(&mut out, &mut first).unwrap();
    drop(out);
    let o = child.wait_with_output().unwrap();
    assert!(first.starts_with(b"=== tiny ==="), "{}", String::from_utf8_lossy(&first));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("internal error"), "{}", stderr(&o));
}

/// On a terminal, `tgc run` names the stage it is in on stderr (a
/// network's C compile takes tens of seconds); through a pipe it prints
/// none of it. util-linux `script` gives the command a pseudo-terminal and
/// copies what the terminal shows to its own standard output.
#[test]
fn run_shows_its_stages_on_a_terminal_only() {
    let dir = temp("stages");
    let inputs = [("x", DType::F16, vec![128, 64]), ("w", DType::F16, vec![64, 256]), ("bias", DType::F16, vec![256])];
    let mut args: Vec<String> =
        ["run", "examples/graphs/gemm_bias_relu.tgc", "--backend", "cpu", "--output-dir"].map(String::from).to_vec();
    args.push(dir.join("out").display().to_string());
    args.extend(write_inputs(&dir, &inputs));
    let quoted: Vec<String> = std::iter::once(env!("CARGO_BIN_EXE_tgc").to_string())
        .chain(args.iter().cloned())
        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
        .collect();
    let o = Command::new("script")
        .args(["-qec", &quoted.join(" "), "/dev/null"])
        .current_dir(repo())
        .output()
        .expect("util-linux `script` runs (it gives the test a terminal)");
    let shown = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "tgc on a terminal failed: {shown}");
    assert!(shown.contains("generating C and compiling it"), "no stage was shown on the terminal: {shown}");
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let piped = tgc(&refs);
    assert!(piped.status.success(), "{}", stderr(&piped));
    assert!(!stderr(&piped).contains("compiling"), "a pipe got the spinner: {}", stderr(&piped));
}

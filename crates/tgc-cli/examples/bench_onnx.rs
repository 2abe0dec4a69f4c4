//! Benchmark (not a test): one ONNX model from `.onnx` to a runnable CPU
//! program and its run time, for `scripts/bench_onnx.py`, which times ONNX
//! Runtime on the same inputs with the same threads and passes its outputs
//! here to be compared.
//!
//! ```text
//! cargo run --release -p tgc-cli --example bench_onnx -- MODEL.onnx \
//!     --input NAME=FILE.npy ... --expect FILE.npy ... [--threads 1,2] [--runs 20] --out DIR
//! ```
//!
//! Prints one JSON object: `import_s` (decode, import, lower and check:
//! `pipeline::load_onnx`), `compile_s` (C generation, the C compiler and
//! loading: `pipeline::CompiledCpu::new`, the default options), for
//! each thread count `n` (set with `cpu_rt::set_threads`) the median of
//! `--runs` calls after one warm-up, in ms, and `agreement`: the outputs of
//! the last call against the `--expect` files (ONNX Runtime's, in output
//! order) under the whole-model bound (`examples/common/agreement.rs`), the
//! worst output's `cell` (`max|d|/relative ok`, or `FAIL`) and `ok`. The
//! outputs are written to `DIR/output_K.npy`.

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use serde_json::json;
use tgc_core::pipeline::{self, CompiledCpu, Options, RunError};
use tgc_runtime::{cpu_rt, npy, HostTensor};

// Each benchmark uses the bounds of its own ops.
#[allow(dead_code)]
#[path = "common/agreement.rs"]
mod agreement;

#[derive(Parser)]
struct Args {
    /// The `.onnx` model.
    model: PathBuf,
    /// `NAME=FILE.npy` for each input of the model (by its ONNX name).
    #[arg(long = "input", value_name = "NAME=FILE.npy")]
    inputs: Vec<String>,
    /// Thread counts.
    #[arg(long, value_delimiter = ',', default_values = ["1", "2"])]
    threads: Vec<NonZeroUsize>,
    /// Timed calls per thread count; the median is printed.
    #[arg(long, default_value = "20")]
    runs: NonZeroUsize,
    /// The peer's output for each output of the model, in order, that tgc's
    /// are compared with.
    #[arg(long = "expect", value_name = "FILE.npy", required = true)]
    expect: Vec<PathBuf>,
    /// Where the outputs are written.
    #[arg(long)]
    out: PathBuf,
}

fn fail(e: RunError) -> String {
    match e {
        RunError::Diag(d) => d.to_string(),
        RunError::Runtime(e) => e.to_string(),
    }
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench_onnx: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> Result<(), String> {
    let t0 = Instant::now();
    let loaded = pipeline::load_onnx(&args.model, &[]).map_err(|d| d.render(&args.model.display().to_string()))?;
    let import_s = t0.elapsed().as_secs_f64();
    let g = &loaded.graph;
    let mut given: BTreeMap<String, HostTensor> = loaded.weights.iter().cloned().collect();
    for spec in &args.inputs {
        let (name, file) = spec.split_once('=').ok_or_else(|| format!("--input `{spec}`: expected NAME=FILE.npy"))?;
        let t = npy::read_npy(std::path::Path::new(file)).map_err(|e| e.to_string())?;
        given.insert(loaded.name_of(name).to_string(), t);
    }
    let inputs: Vec<HostTensor> = pipeline::input_names(g)
        .iter()
        .map(|n| given.remove(n).ok_or_else(|| format!("no --input for `{n}`")))
        .collect::<Result<_, _>>()?;
    let shapes: Vec<Vec<usize>> = inputs.iter().map(|t| t.shape().to_vec()).collect();
    let bound = g.resolve_dims(&BTreeMap::new(), Some(&shapes)).and_then(|v| g.bind(&v)).map_err(|d| d.to_string())?;
    let work = std::env::temp_dir().join(format!("tgc-bench-onnx-{}", std::process::id()));
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    let t1 = Instant::now();
    let compiled = CompiledCpu::new(&bound, &Options::default(), &work).map_err(fail)?;
    let compile_s = t1.elapsed().as_secs_f64();
    let mut outputs = compiled.run(&inputs, &[]).map_err(fail)?;
    let mut times = serde_json::Map::new();
    for n in &args.threads {
        cpu_rt::set_threads(n.get());
        compiled.run_into(&inputs, &mut outputs, &[]).map_err(fail)?;
        let mut ms: Vec<f64> = (0..args.runs.get())
            .map(|_| {
                let t = Instant::now();
                compiled.run_into(&inputs, &mut outputs, &[]).map(|()| t.elapsed().as_secs_f64() * 1e3)
            })
            .collect::<Result<_, _>>()
            .map_err(fail)?;
        ms.sort_by(f64::total_cmp);
        times.insert(n.to_string(), json!(ms[ms.len() / 2]));
    }
    std::fs::create_dir_all(&args.out).map_err(|e| format!("{}: {e}", args.out.display()))?;
    for (k, t) in outputs.iter().enumerate() {
        npy::write_npy(args.out.join(format!("output_{k}.npy")), t).map_err(|e| e.to_string())?;
    }
    let _ = std::fs::remove_dir_all(&work);
    if args.expect.len() != outputs.len() {
        return Err(format!("{} --expect files for the model's {} outputs", args.expect.len(), outputs.len()));
    }
    let mut worst: Option<agreement::Agreement> = None;
    for (k, (got, path)) in outputs.iter().zip(&args.expect).enumerate() {
        let want = npy::read_npy(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let a = agreement::compare(got, &want, agreement::Op::Model).map_err(|e| format!("output {k}: {e}"))?;
        worst = Some(worst.map_or(a, |w| w.worse(a)));
    }
    let agreement = worst.map(|a| json!({ "cell": a.to_string(), "ok": a.ok() }));
    println!("{}", json!({ "import_s": import_s, "compile_s": compile_s, "ms": times, "agreement": agreement }));
    Ok(())
}

//! Benchmark (not a test): tgc's sm80 GEMM kernels against cuBLAS through
//! PyTorch, on the GPU of the machine it runs on.
//!
//! ```text
//! cargo run --release -p tgc-cli --features cuda --example bench_gpu [-- ITERS]
//! ```
//!
//! For f16 and bf16, each of M×N×K = 1024³, 4096³, 8192³, 4096×3072×768 and
//! 4096×768×3072, twice: a plain GEMM (`y = x·w`, against `torch.matmul`)
//! and GEMM + bias + ReLU (tgc's one fused kernel, against torch's matmul,
//! add and ReLU as separate kernels). Each tgc kernel is compiled (NVRTC,
//! the cost model's plan), run once to warm up, then ITERS times (default
//! 20) back to back between two stream synchronisations; the PyTorch
//! numbers come from `scripts/bench_torch.py` run in the same process's
//! lifetime on the same GPU (CUDA events). Printed: TFLOP/s (2·M·N·K per
//! run) of each and tgc/torch. Without PyTorch the torch column says why.
//!
//! Then softmax and layernorm over the last axis of f16 `[rows, cols]`
//! (8192×1024 and 4096×4096): tgc's SIMT kernels (`gpu::simt`, every
//! region a kernel) against `torch.softmax` / `torch.nn.functional.layer_norm`,
//! printed as effective bandwidth (GB/s: bytes read once + written once).
//!
//! Without a GPU (no driver or no device) it prints that and exits 1.

use std::process::{Command, ExitCode};
use std::time::Instant;

use tgc_core::pipeline::{self, Format};
use tgc_runtime::cuda::Gpu;
use tgc_runtime::{DType, HostTensor};

#[allow(dead_code)]
#[path = "../src/gpu.rs"]
mod gpu;

const SHAPES: [(usize, usize, usize); 5] =
    [(1024, 1024, 1024), (4096, 4096, 4096), (8192, 8192, 8192), (4096, 3072, 768), (4096, 768, 3072)];

fn main() -> ExitCode {
    let iters: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(20);
    let gpu = match Gpu::new(0) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("bench_gpu: not run: {e}");
            return ExitCode::from(1);
        }
    };
    println!("device sm_{}, {iters} iterations per case", gpu.sm());
    println!(
        "{:<6} {:<20} {:<10} {:>10} {:>10} {:>8}",
        "dtype", "M×N×K", "epilogue", "tgc TF/s", "torch TF/s", "ratio"
    );
    let mut failed = false;
    for dtype in [DType::F16, DType::BF16] {
        for &(m, n, k) in &SHAPES {
            for epilogue in ["none", "bias_relu"] {
                let flops = 2.0 * m as f64 * n as f64 * k as f64;
                let text = gemm_graph(dtype, m, n, k, epilogue);
                let tgc = match tgc_seconds(&gpu, &text, iters) {
                    Ok(s) => Some(flops / s / 1e12),
                    Err(e) => {
                        eprintln!("tgc {dtype} {m}×{n}×{k} {epilogue}: {e}");
                        failed = true;
                        None
                    }
                };
                let torch = match torch_seconds(
                    &[&dtype.to_string(), "gemm", &format!("{m}"), &format!("{n}"), &format!("{k}"), epilogue],
                    iters,
                ) {
                    Ok(s) => Some(flops / s / 1e12),
                    Err(e) => {
                        eprintln!("torch {dtype} {m}×{n}×{k} {epilogue}: {e}");
                        None
                    }
                };
                let fmt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
                let ratio = match (tgc, torch) {
                    (Some(a), Some(b)) => format!("{:.2}", a / b),
                    _ => "-".into(),
                };
                let shape = format!("{m}×{n}×{k}");
                println!("{dtype:<6} {shape:<20} {epilogue:<10} {:>10} {:>10} {ratio:>8}", fmt(tgc), fmt(torch));
            }
        }
    }
    println!("{:<6} {:<20} {:<10} {:>10} {:>10} {:>8}", "dtype", "rows×cols", "op", "tgc GB/s", "torch GB/s", "ratio");
    for (rows, cols) in [(8192usize, 1024usize), (4096, 4096)] {
        for op in ["softmax", "layernorm"] {
            let text = row_graph(op, rows, cols);
            // Read x once and write y once (f16); gamma and beta are noise.
            let bytes = 2.0 * 2.0 * rows as f64 * cols as f64;
            let tgc = match tgc_seconds(&gpu, &text, iters) {
                Ok(s) => Some(bytes / s / 1e9),
                Err(e) => {
                    eprintln!("tgc {op} {rows}×{cols}: {e}");
                    failed = true;
                    None
                }
            };
            let torch = match torch_seconds(&["f16", op, &rows.to_string(), &cols.to_string(), "0", "none"], iters) {
                Ok(s) => Some(bytes / s / 1e9),
                Err(e) => {
                    eprintln!("torch {op} {rows}×{cols}: {e}");
                    None
                }
            };
            let fmt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
            let ratio = match (tgc, torch) {
                (Some(a), Some(b)) => format!("{:.2}", a / b),
                _ => "-".into(),
            };
            println!(
                "{:<6} {:<20} {op:<10} {:>10} {:>10} {ratio:>8}",
                "f16",
                format!("{rows}×{cols}"),
                fmt(tgc),
                fmt(torch)
            );
        }
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// The GEMM case's graph.
fn gemm_graph(dtype: DType, m: usize, n: usize, k: usize, epilogue: &str) -> String {
    let (bias_param, body) = match epilogue {
        "none" => (String::new(), "y = matmul(x, w)"),
        _ => (format!(", bias: {dtype}[{n}]"), "y = relu(matmul(x, w) + bias)"),
    };
    format!(
        "graph bench(x: {dtype}[{m}, {k}], w: {dtype}[{k}, {n}]{bias_param}) -> (y: {dtype}[{m}, {n}]) {{\n{body}\nreturn y\n}}"
    )
}

/// The row-reduction case's graph (f16, last axis).
fn row_graph(op: &str, rows: usize, cols: usize) -> String {
    match op {
        "softmax" => format!(
            "graph bench(x: f16[{rows}, {cols}]) -> (y: f16[{rows}, {cols}]) {{\ny = softmax(x, axis=-1)\nreturn y\n}}"
        ),
        _ => format!(
            "graph bench(x: f16[{rows}, {cols}], g: f16[{cols}], b: f16[{cols}]) -> (y: f16[{rows}, {cols}]) {{\n\
             y = layernorm(x, g, b, axis=-1, eps=1e-5)\nreturn y\n}}"
        ),
    }
}

/// Seconds per run of tgc's kernels for the graph `text` (every size
/// concrete), after a warm-up run: ITERS runs queued back to back between
/// two synchronisations.
fn tgc_seconds(gpu: &Gpu, text: &str, iters: usize) -> Result<f64, String> {
    let g = pipeline::load(text, Format::Dsl, None).map_err(|d| d.to_string())?.graph;
    let err = |e: gpu::GpuError| match e {
        gpu::GpuError::Diag(d) => d.to_string(),
        gpu::GpuError::Runtime(e) => e.to_string(),
    };
    let mut inputs = Vec::new();
    for (i, id) in g.inputs().into_iter().enumerate() {
        let shape: Vec<usize> = g.shape(id).iter().map(|d| d.as_int().unwrap_or(1) as usize).collect();
        let n = shape.iter().product();
        let values = tgc_runtime::tensor::sample_values(i as u64 + 1, n);
        inputs.push(HostTensor::from_f64(g.dtype(id), &shape, &values).map_err(|e| e.to_string())?);
    }
    let mut c = gpu::Compiled::new(gpu, &g, &format!("{:x}", fxhash(text))).map_err(err)?;
    c.upload(&inputs).map_err(err)?;
    c.run().map_err(err)?;
    gpu.synchronize().map_err(|e| e.to_string())?;
    let start = Instant::now();
    for _ in 0..iters {
        c.run().map_err(err)?;
    }
    gpu.synchronize().map_err(|e| e.to_string())?;
    Ok(start.elapsed().as_secs_f64() / iters as f64)
}

/// A hash of the graph text, for the module cache key.
fn fxhash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

/// Seconds per run of PyTorch's version, from `scripts/bench_torch.py`.
/// `case`: dtype, op (`gemm`, `softmax`, `layernorm`), three sizes, epilogue.
fn torch_seconds(case: &[&str], iters: usize) -> Result<f64, String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/bench_torch.py");
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let o = Command::new(&python)
        .arg(script)
        .args(case)
        .arg(iters.to_string())
        .output()
        .map_err(|e| format!("cannot run {python}: {e}"))?;
    if !o.status.success() {
        return Err(String::from_utf8_lossy(&o.stderr).trim().to_string());
    }
    String::from_utf8_lossy(&o.stdout).trim().parse().map_err(|e| format!("bench_torch.py printed no number: {e}"))
}

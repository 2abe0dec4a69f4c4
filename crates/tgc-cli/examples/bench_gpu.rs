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
//! Row reductions (softmax, layernorm) need the SIMT kernels, which are not
//! in this build; the program says so.
//!
//! Without a GPU (no driver or no device) it prints that and exits 1.

use std::process::{Command, ExitCode};
use std::time::Instant;

use tgc_core::gpu::launch::{gemm_launch, Binding};
use tgc_core::pipeline::{self, Format};
use tgc_runtime::cuda::{Cubin, CudaSlice, DeviceArg, Gpu, KernelArg, Launch, Module};
use tgc_runtime::{DType, HostTensor};

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
                let tgc = match tgc_seconds(&gpu, dtype, m, n, k, epilogue, iters) {
                    Ok(s) => Some(flops / s / 1e12),
                    Err(e) => {
                        eprintln!("tgc {dtype} {m}×{n}×{k} {epilogue}: {e}");
                        failed = true;
                        None
                    }
                };
                let torch = match torch_seconds(dtype, m, n, k, epilogue, iters) {
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
    println!("softmax, layernorm: not measured (the SIMT row-reduction kernels are not in this build)");
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Seconds per run of tgc's kernel for the case, after a warm-up run.
fn tgc_seconds(
    gpu: &Gpu,
    dtype: DType,
    m: usize,
    n: usize,
    k: usize,
    epilogue: &str,
    iters: usize,
) -> Result<f64, String> {
    let (bias_param, body) = match epilogue {
        "none" => (String::new(), "y = matmul(x, w)"),
        _ => (format!(", bias: {dtype}[{n}]"), "y = relu(matmul(x, w) + bias)"),
    };
    let text = format!(
        "graph bench(x: {dtype}[{m}, {k}], w: {dtype}[{k}, {n}]{bias_param}) -> (y: {dtype}[{m}, {n}]) {{\n{body}\nreturn y\n}}"
    );
    let g = pipeline::load(&text, Format::Dsl, None).map_err(|d| d.to_string())?.graph;
    let art = pipeline::compile_gpu(&g, "sm80").map_err(|d| d.to_string())?;
    let spec = gemm_launch(&art.kernel).map_err(|d| d.to_string())?;
    let module = Module {
        name: Box::leak(format!("{}_{dtype}_{m}_{n}_{k}_{epilogue}", art.symbol).into_boxed_str()),
        cubins: Box::leak(vec![Cubin { sm: 80, image: Box::leak(art.cubin.clone().into_boxed_slice()) }].into()),
        ptx: Box::leak(art.ptx.clone().into_boxed_str()),
    };
    let e = |e: tgc_runtime::Error| e.to_string();
    let mut inputs: Vec<CudaSlice<u8>> = Vec::new();
    for (i, id) in g.inputs().into_iter().enumerate() {
        let shape: Vec<usize> = g.shape(id).iter().map(|d| d.as_int().unwrap_or(1) as usize).collect();
        let len = shape.iter().product();
        let t =
            HostTensor::from_f64(dtype, &shape, &tgc_runtime::tensor::sample_values(i as u64 + 1, len)).map_err(e)?;
        inputs.push(gpu.upload(t.bytes()).map_err(e)?);
    }
    let out = gpu.zeros::<u8>(m * n * dtype.size_bytes()).map_err(e)?;
    let mut scratch = Vec::new();
    let mut args = Vec::new();
    for b in &spec.params {
        let ptr = |s: &CudaSlice<u8>| KernelArg::Ptr(DeviceArg::<u8>::address(s));
        args.push(match b {
            Binding::Input(i) => ptr(&inputs[*i]),
            Binding::Output(_) => ptr(&out),
            Binding::Scratch { dtype, elems } => {
                scratch.push(gpu.zeros::<u8>(*elems as usize * dtype.size_bytes()).map_err(e)?);
                ptr(&scratch[scratch.len() - 1])
            }
            Binding::I32(v) => KernelArg::I32(*v),
            Binding::I64(v) => KernelArg::I64(*v),
        });
    }
    if !scratch.is_empty() {
        return Err("the chosen plan splits K (its scratch buffers would need zeroing between runs)".into());
    }
    let launch = Launch { grid: spec.grid, block: spec.block, dynamic_smem_bytes: spec.smem_bytes };
    let run = || {
        // SAFETY: the arguments are bound by `gemm_launch` from the kernel
        // just compiled; the buffers have the bytes of the graph's tensors
        // and are separate driver allocations (256-byte aligned).
        unsafe { gpu.launch_raw(&module, &spec.symbol, &launch, &args) }
    };
    run().map_err(e)?;
    gpu.synchronize().map_err(e)?;
    let start = Instant::now();
    for _ in 0..iters {
        run().map_err(e)?;
    }
    gpu.synchronize().map_err(e)?;
    Ok(start.elapsed().as_secs_f64() / iters as f64)
}

/// Seconds per run of PyTorch's version, from `scripts/bench_torch.py`.
fn torch_seconds(dtype: DType, m: usize, n: usize, k: usize, epilogue: &str, iters: usize) -> Result<f64, String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/bench_torch.py");
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let o = Command::new(&python)
        .arg(script)
        .args([dtype.to_string(), m.to_string(), n.to_string(), k.to_string(), epilogue.into(), iters.to_string()])
        .output()
        .map_err(|e| format!("cannot run {python}: {e}"))?;
    if !o.status.success() {
        return Err(String::from_utf8_lossy(&o.stderr).trim().to_string());
    }
    String::from_utf8_lossy(&o.stdout).trim().parse().map_err(|e| format!("bench_torch.py printed no number: {e}"))
}

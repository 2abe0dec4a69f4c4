//! Benchmark (not a test): tgc's GEMM kernels against cuBLAS through
//! PyTorch, on the GPU of the machine it runs on: the MMA template's sm80
//! branch (`mma.sync`) on an 8.x device; on a 9.x device its sm90 branch
//! (TMA + `wgmma`) in the tgc column and the sm80 branch in a last
//! column, both against the same torch run.
//!
//! ```text
//! cargo run --release -p tgc-cli --features cuda --example bench_gpu [-- ITERS] [--gemm | --rows | --conv | --attention | --minilm]
//! ```
//!
//! For f16 and bf16, each of M×N×K = 1024³, 4096³, 8192³, 4096×3072×768 and
//! 4096×768×3072, twice: a plain GEMM (`y = x·w`, against `torch.matmul`)
//! and GEMM + bias + ReLU (tgc's one fused kernel, against torch's matmul,
//! add and ReLU as separate kernels). Printed: TFLOP/s (2·M·N·K per run) of
//! each and tgc/torch.
//!
//! Every row runs both sides on the same inputs: tgc's sample values
//! (`tensor::sample_values`, seeded by input position), written as `.npy`
//! for `scripts/bench_torch.py`, which runs torch on them and writes its
//! output back. Both sides are timed the same way: [`WARMUP`] runs, then
//! ITERS runs (default 20) back to back between two CUDA events on the
//! stream they run on ([`Gpu::record_event`] here, `torch.cuda.Event`
//! there): device time, not the host's. Each row's last column is the
//! agreement of every tgc kernel in it (the model's choice and the pinned
//! or sm80 columns) with torch's output, the worst printed
//! (`examples/common/agreement.rs`: normwise, `max|tgc − torch| ≤ tol ·
//! max|torch|`, `tol` per op), `FAIL` beyond the bound; the run then exits
//! 1 after every row is printed. The last line counts the rows compared,
//! failed and not compared. Without PyTorch the torch column and the
//! agreement say `-` and stderr says why. With `TGC_BENCH_CORRUPT=1` every
//! tgc output is made wrong before it is compared, so every compared row
//! must fail (the check of the check).
//!
//! Then softmax, layernorm and cumsum over the last axis of f16 `[rows,
//! cols]` (8192×1024 and 4096×4096; cumsum also over one row of 2²⁴):
//! tgc's SIMT kernels (`gpu::simt`, every region a kernel) against
//! `torch.softmax` / `torch.nn.functional.layer_norm` / `torch.cumsum`,
//! printed as effective bandwidth (GB/s: bytes read once + written once).
//!
//! Then the 3×3 and 1×1 convolutions of ResNet-50 ([`CONVS`], batch 32,
//! f16, channels-last: NHWC activations, OHWI weights, bias) — tgc's
//! choice between the implicit GEMM on the MMA template and Winograd
//! F(2×2, 3×3) (`gpu::winograd`) against `torch.nn.functional.conv2d`
//! on `channels_last` tensors (cuDNN) — in TFLOP/s (2·N·P·Q·K·C·R·S per
//! run, the direct convolution's count for both algorithms); then each
//! algorithm pinned in place of the model's choice, in the same units.
//!
//! Then attention ([`ATTENTION`], f16, batch 4, 16 heads, head dim 64 and
//! 128, sequence 512 to 16k, no mask, causal or not): tgc's fused
//! attention kernel (`gpu::attention::kernel`, FlashAttention-2 on
//! `mma.sync`) for the frontend's `attention(q, k, v, causal=…)` against
//! `torch.nn.functional.scaled_dot_product_attention` with the flash
//! backend, in TFLOP/s (4·B·H·S²·D per run: the two products; half of it
//! when causal, as FlashAttention counts), then tgc's kernel with the
//! two-pass softmax (`streaming_softmax_2pass`) pinned in place of the
//! model's choice, and on a 9.x device (where the tgc column is the
//! template's wgmma branch for head dims 64 and 128) the sm80 kernel
//! (`mma.sync`), in the same units. A graph the fused template does
//! not take is reported, not run (its SIMT kernels would hold the score
//! matrix in global memory).
//!
//! Then MiniLM ([`MINILM`], `examples/minilm`'s encoder graph with its
//! tensors in f16, weights of sample values scaled as [`minilm_inputs`]
//! says): tgc's program (per layer six GEMMs on the MMA template, the
//! fused attention, SIMT kernels for the rest) against the same encoder
//! with the same weights in PyTorch (`transformers`' `BertModel` in f16
//! with SDPA attention, then the masked mean pooling and L2
//! normalisation), in sequences per second; a second tgc column runs the
//! same launches captured once as a CUDA Graph ([`Gpu::capture`], on a
//! stream of its own) and replayed, one driver call per run: the launch
//! overhead a graph saves.
//!
//! With `--gemm` it runs only the GEMM rows; with `--rows` only the softmax, layernorm and cumsum rows, with
//! `--conv` only the convolutions, with `--attention` only attention, with
//! `--minilm` only MiniLM; `--only TEXT` keeps the attention and MiniLM
//! rows whose name contains TEXT (`--only causal`).
//!
//! With `--plans` it sweeps the plan space instead: for each GEMM shape of
//! [`SWEEP`] (f16) and each 3×3 convolution of [`CONVS`] (only those with
//! `--conv` too), every plan the MMA kernel is chosen from
//! (`gpu::mma::lower::choose`) is pinned in turn
//! (an [`Estimator`] that ranks only that plan first, the seam a tuning
//! cache uses), compiled and timed as above. Printed per plan: the analytic
//! model's estimate for the sm80 target (A100, the plan tgc chooses), its
//! estimate for the GPU at hand ([`sm80_model_of`]) with that rank, the
//! measured TFLOP/s and rank, and the plan's agreement with torch's output
//! (torch run once per shape); then per shape the device model's pick
//! against the best measured plan and the Spearman rank correlation of the
//! two orders; one `sweep,…` CSV line per plan for the record.
//!
//! ```text
//! cargo run --release -p tgc-cli --features cuda --example bench_gpu -- --plans [ITERS]
//! ```
//!
//! Without a GPU (no driver or no device) it prints that and exits 1; it
//! also exits 1 when a tgc kernel fails to compile or run.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use tgc_core::gpu::winograd;
use tgc_core::pipeline::{self, Format};
use tgc_core::plan::cost::{self, Estimator};
use tgc_core::plan::{self as plans, Plan, Target};
use tgc_core::tiny::Graph;
use tgc_runtime::cuda::Gpu;
use tgc_runtime::{npy, DType, HostTensor};

#[allow(dead_code)]
#[path = "../src/gpu.rs"]
mod gpu;

// Each benchmark uses the bounds of its own ops.
#[allow(dead_code)]
#[path = "common/agreement.rs"]
mod agreement;

use agreement::{Agreement, Op};

const SHAPES: [(usize, usize, usize); 5] =
    [(1024, 1024, 1024), (4096, 4096, 4096), (8192, 8192, 8192), (4096, 3072, 768), (4096, 768, 3072)];

/// The `--plans` sweep's GEMM shapes `M×N×K` (f16): square sizes from
/// small to large, the two BERT-base projections of [`SHAPES`], and a
/// MiniLM-sized one with few rows.
const SWEEP: [(usize, usize, usize); 7] = [
    (512, 512, 512),
    (1024, 1024, 1024),
    (2048, 2048, 2048),
    (4096, 4096, 4096),
    (4096, 3072, 768),
    (4096, 768, 3072),
    (256, 1536, 384),
];

/// ResNet-50's convolutions (He et al., "Deep Residual Learning for Image
/// Recognition", 2016, Table 1; batch 32): `(H=W, C, K, kernel, stride)`,
/// padding `kernel / 2`.
const CONVS: [(usize, usize, usize, usize, usize); 8] = [
    (56, 64, 64, 3, 1),
    (28, 128, 128, 3, 1),
    (14, 256, 256, 3, 1),
    (7, 512, 512, 3, 1),
    (56, 64, 256, 1, 1),
    (56, 256, 64, 1, 1),
    (14, 1024, 256, 1, 1),
    (7, 512, 2048, 1, 1),
];

/// The batch of the [`CONVS`] rows.
const CONV_BATCH: usize = 32;

/// The attention rows: `(sequence length, head dim)`, batch 4, 16 heads.
const ATTENTION: [(usize, usize, bool); 10] = [
    (512, 64, false),
    (2048, 64, false),
    (8192, 64, false),
    (16384, 64, false),
    (512, 128, false),
    (2048, 128, false),
    (8192, 128, false),
    (16384, 128, false),
    (8192, 64, true),
    (8192, 128, true),
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let sweep = args.iter().any(|a| a == "--plans");
    let conv_only = args.iter().any(|a| a == "--conv");
    let attention_only = args.iter().any(|a| a == "--attention");
    let minilm_only = args.iter().any(|a| a == "--minilm");
    let gemm_only = args.iter().any(|a| a == "--gemm");
    let rows_only = args.iter().any(|a| a == "--rows") || conv_only || attention_only || minilm_only;
    let iters: usize = args.iter().find_map(|a| a.parse().ok()).unwrap_or(20);
    let only = args.iter().position(|a| a == "--only").and_then(|i| args.get(i + 1)).map_or("", |s| s.as_str());
    let gpu = match Gpu::new(0) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("bench_gpu: not run: {e}");
            return ExitCode::from(1);
        }
    };
    let work = match tgc_runtime::files::scratch_dir("bench-gpu") {
        Ok(w) => w,
        Err(e) => {
            eprintln!("bench_gpu: cannot create a work directory in {}: {e}", std::env::temp_dir().display());
            return ExitCode::from(1);
        }
    };
    let mut bench = Bench { gpu: &gpu, iters, work: work.path(), rows: 0, failed: false, tally: Tally::default() };
    if sweep {
        plan_sweep(&mut bench, conv_only);
        return bench.exit();
    }
    let target = gpu::device_target(gpu.sm());
    println!(
        "device sm_{}, target {}, {iters} iterations per case after {WARMUP} warm-up runs, both sides timed with \
         CUDA events; agreement = max|tgc - torch| / that over max|torch| of every tgc column, ok within the op's \
         bound (examples/common/agreement.rs), else FAIL",
        gpu.sm(),
        target.name
    );
    // On a 9.x device the GEMMs run on the template's wgmma branch; the
    // sm80 branch (mma.sync) is measured beside it.
    let sm80_too = target.name != plans::target::SM80.name;
    if !rows_only {
        println!(
            "{:<6} {:<20} {:<10} {:>10} {:>10} {:>8}{} {:>20}",
            "dtype",
            "M×N×K",
            "epilogue",
            "tgc TF/s",
            "torch TF/s",
            "ratio",
            if sm80_too { format!(" {:>10} {:>8}", "sm80 TF/s", "ratio") } else { String::new() },
            "agreement"
        );
    }
    for dtype in if rows_only { &[][..] } else { &[DType::F16, DType::BF16][..] } {
        let dtype = *dtype;
        for &(m, n, k) in &SHAPES {
            for epilogue in ["none", "bias_relu"] {
                let flops = 2.0 * m as f64 * n as f64 * k as f64;
                let shape = format!("{m}×{n}×{k}");
                let torch_case = [&dtype.to_string(), "gemm", &m.to_string(), &n.to_string(), &k.to_string(), epilogue];
                let case = format!("{dtype} {shape} {epilogue}");
                let text = gemm_graph(dtype, m, n, k, epilogue);
                let Some(mut row) = bench.row(&case, &text, Op::Contraction { n: k }) else { continue };
                let pair = row.pair(&torch_case, flops / 1e12);
                let [tgc, torch, ratio] = pair.cells(1, 2);
                let mut sm80 = String::new();
                if sm80_too {
                    let old = row.tgc("sm80", &cost::Analytic, &plans::target::SM80);
                    let old = Pair { tgc: old.map(|s| flops / 1e12 / s).ok(), torch: pair.torch };
                    let [t, _, r] = old.cells(1, 2);
                    sm80 = format!(" {t:>10} {r:>8}");
                }
                let agreement = row.finish();
                println!(
                    "{dtype:<6} {shape:<20} {epilogue:<10} {tgc:>10} {torch:>10} {ratio:>8}{sm80} {agreement:>20}"
                );
            }
        }
    }
    if gemm_only {
        return bench.exit();
    }
    let others_only = conv_only || attention_only || minilm_only;
    let row_cases: &[(usize, usize)] = if others_only { &[] } else { &[(8192, 1024), (4096, 4096)] };
    if !others_only {
        println!(
            "{:<6} {:<20} {:<10} {:>10} {:>10} {:>8} {:>20}",
            "dtype", "rows×cols", "op", "tgc GB/s", "torch GB/s", "ratio", "agreement"
        );
    }
    let long_row: &[(usize, usize, &str)] = if others_only { &[] } else { &[(1, 1 << 24, "cumsum")] };
    let row_ops = row_cases
        .iter()
        .flat_map(|&(r, c)| ["softmax", "layernorm", "cumsum"].map(|op| (r, c, op)))
        .chain(long_row.iter().copied());
    for (rows, cols, op) in row_ops {
        let text = row_graph(op, rows, cols);
        // Read x once and write y once (f16); gamma and beta are noise.
        let gbytes = 2.0 * 2.0 * rows as f64 * cols as f64 / 1e9;
        let shape = format!("{rows}×{cols}");
        let torch_case = ["f16", op, &rows.to_string(), &cols.to_string(), "0", "none"];
        let bound = match op {
            "softmax" => Op::Softmax { n: cols },
            "layernorm" => Op::Layernorm { n: cols },
            _ => Op::Cumsum { n: cols },
        };
        let Some(mut row) = bench.row(&format!("{op} {shape}"), &text, bound) else { continue };
        let [tgc, torch, ratio] = row.pair(&torch_case, gbytes).cells(0, 2);
        let agreement = row.finish();
        println!("{:<6} {shape:<20} {op:<10} {tgc:>10} {torch:>10} {ratio:>8} {agreement:>20}", "f16");
    }
    if conv_only || !rows_only {
        conv_rows(&mut bench);
    }
    if attention_only || !rows_only {
        attention_rows(&mut bench, only);
    }
    if minilm_only || !rows_only {
        minilm_rows(&mut bench, only);
    }
    bench.exit()
}

/// Warm-up runs before the timed ones, on both sides (`bench_torch.py`'s
/// count).
const WARMUP: usize = 5;

/// The run's state: the device, the iterations per case, the folder the
/// rows' inputs and torch's outputs are written to, whether something
/// failed, and the rows' agreements so far.
struct Bench<'a> {
    gpu: &'a Gpu,
    iters: usize,
    work: &'a Path,
    /// Rows made so far (each gets a folder of its own).
    rows: usize,
    /// A tgc kernel failed to compile or run, or a row's outputs disagreed.
    failed: bool,
    tally: Tally,
}

/// How many rows were compared with torch, how many of those disagreed,
/// and how many had no torch output to compare with.
#[derive(Default)]
struct Tally {
    compared: usize,
    disagreed: usize,
    uncompared: usize,
}

impl<'a> Bench<'a> {
    /// The row `name` of the graph `text` on its sample inputs; `None`
    /// (why on stderr, the run failed) when the graph does not load or the
    /// inputs cannot be written.
    fn row(&mut self, name: &str, text: &str, op: Op) -> Option<Row<'_, 'a>> {
        let made = pipeline::load(text, Format::Dsl, None)
            .map_err(|d| d.to_string())
            .and_then(|l| Ok((sample_inputs(&l.graph)?, l.graph)));
        let (inputs, graph) = made.map_err(|e| eprintln!("{name}: {e}")).ok()?;
        self.row_of(name, graph, format!("{:x}", fxhash(text)), inputs, op)
    }

    /// [`Bench::row`] of a loaded graph (every dim bound) on `inputs`;
    /// `key` names its modules in the cache.
    fn row_of(
        &mut self,
        name: &str,
        graph: Graph,
        key: String,
        inputs: Vec<HostTensor>,
        op: Op,
    ) -> Option<Row<'_, 'a>> {
        self.rows += 1;
        let dir = self.work.join(format!("row{}", self.rows));
        let written = std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display())).and_then(|()| {
            inputs
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let path = dir.join(format!("input{i}.npy"));
                    npy::write_npy(&path, t).map_err(|e| format!("{}: {e}", path.display())).map(|()| path)
                })
                .collect::<Result<Vec<_>, _>>()
        });
        let paths = match written {
            Ok(p) => p,
            Err(e) => {
                eprintln!("{name}: {e}");
                self.failed = true;
                return None;
            }
        };
        Some(Row {
            bench: self,
            name: name.to_string(),
            graph,
            key,
            inputs,
            dir,
            paths,
            op,
            torch: None,
            last: None,
            worst: None,
        })
    }

    /// The exit code: 1 when anything failed. Prints the agreement count.
    fn exit(&self) -> ExitCode {
        let t = &self.tally;
        println!(
            "agreement: {} rows compared, {} FAIL, {} not compared (no torch output)",
            t.compared, t.disagreed, t.uncompared
        );
        if self.failed {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        }
    }
}

/// One row: a graph, its inputs (written as `.npy` for torch in `dir`)
/// and, once torch ran on them, torch's output, with which every tgc
/// kernel of the row is compared; `worst` is the worst agreement so far.
struct Row<'b, 'a> {
    bench: &'b mut Bench<'a>,
    name: String,
    graph: Graph,
    key: String,
    inputs: Vec<HostTensor>,
    dir: PathBuf,
    paths: Vec<PathBuf>,
    op: Op,
    torch: Option<HostTensor>,
    /// The agreement of the last tgc kernel compared.
    last: Option<Agreement>,
    worst: Option<Agreement>,
}

impl Row<'_, '_> {
    /// torch's rate and tgc's (the model's choice for the device), `work`
    /// per second; torch runs first, so tgc's output is compared with its.
    fn pair(&mut self, torch_case: &[&str], work: f64) -> Pair {
        let torch = self.torch(torch_case).map(|s| work / s).ok();
        let target = gpu::device_target(self.bench.gpu.sm());
        let tgc = self.tgc("", &cost::Analytic, target).map(|s| work / s).ok();
        Pair { tgc, torch }
    }

    /// Seconds per run of `bench_torch.py`'s version on the row's inputs,
    /// keeping its output; `None` with why on stderr.
    fn torch(&mut self, case: &[&str]) -> Result<f64, String> {
        let out = self.dir.join("torch.npy");
        let ran = torch_seconds(case, self.bench.iters, &out, &self.paths)
            .and_then(|s| Ok((s, npy::read_npy(&out).map_err(|e| format!("{}: {e}", out.display()))?)));
        match ran {
            Ok((s, t)) => {
                self.torch = Some(t);
                Ok(s)
            }
            Err(e) => {
                eprintln!("torch {}: {e}", self.name);
                Err(e)
            }
        }
    }

    /// Seconds per run of tgc's kernels compiled for `target` with plans
    /// ranked by `estimator` (`tag` keeps the module cache keys of one
    /// graph's variants apart); their output is compared with torch's. An
    /// error is printed on stderr and fails the run.
    fn tgc(&mut self, tag: &str, estimator: &dyn Estimator, target: &Target) -> Result<f64, String> {
        let key = format!("{}{tag}", self.key);
        let ran = tgc_run(self.bench.gpu, &self.graph, &key, self.bench.iters, estimator, target, &self.inputs);
        self.checked(tag, ran)
    }

    /// [`Row::tgc`] with the launches captured once as a CUDA Graph and
    /// replayed ([`replay_run`]).
    fn replayed(&mut self) -> Result<f64, String> {
        let key = format!("{}graph", self.key);
        let ran = replay_run(self.bench.gpu, &self.graph, &key, self.bench.iters, &self.inputs);
        self.checked("as a CUDA Graph", ran)
    }

    /// The seconds of `ran`, its output compared with torch's into `worst`.
    fn checked(&mut self, tag: &str, ran: Result<(f64, Vec<HostTensor>), String>) -> Result<f64, String> {
        let (secs, outputs) = ran.map_err(|e| {
            eprintln!("tgc {} {tag}: {e}", self.name);
            self.bench.failed = true;
            e
        })?;
        if let (Some(want), Some(got)) = (&self.torch, outputs.first()) {
            let a = agreement::compare(got, want, self.op).unwrap_or_else(|e| {
                eprintln!("tgc {} {tag}: {e}", self.name);
                Agreement { max_abs: f64::NAN, max_rel: f64::NAN, tol: self.op.tolerance(got.dtype()) }
            });
            self.last = Some(a);
            self.worst = Some(self.worst.map_or(a, |w| w.worse(a)));
        }
        Ok(secs)
    }

    /// The row's agreement cell (`-` without torch's output), counted in
    /// the tally; removes the row's files.
    fn finish(self) -> String {
        let _ = std::fs::remove_dir_all(&self.dir);
        let t = &mut self.bench.tally;
        match self.worst {
            Some(a) => {
                t.compared += 1;
                if !a.ok() {
                    t.disagreed += 1;
                    self.bench.failed = true;
                }
                a.to_string()
            }
            None => {
                t.uncompared += 1;
                "-".to_string()
            }
        }
    }
}

/// One case measured on both sides: tgc's rate and torch's, in the caller's
/// unit (`work` of it per run: TFLOP, GB).
struct Pair {
    tgc: Option<f64>,
    torch: Option<f64>,
}

impl Pair {
    /// tgc's rate and torch's with `digits` after the point, tgc/torch
    /// with `ratio_digits` (`-` where a side did not run).
    fn cells(&self, digits: usize, ratio_digits: usize) -> [String; 3] {
        let fmt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.digits$}"));
        let ratio = match (self.tgc, self.torch) {
            (Some(a), Some(b)) => format!("{:.ratio_digits$}", a / b),
            _ => "-".into(),
        };
        [fmt(self.tgc), fmt(self.torch), ratio]
    }
}

/// The [`CONVS`] rows. After tgc's choice (the analytic model's algorithm)
/// and PyTorch, the same graph with each `algo_choice conv` pinned: the
/// implicit GEMM, and Winograd F(2×2, 3×3) for the 3×3 stride-1 layers
/// (`-` for the others, which it does not take).
fn conv_rows(bench: &mut Bench) {
    println!(
        "{:<6} {:<28} {:>8} {:>10} {:>10} {:>8} {:>14} {:>14} {:>20}",
        "dtype",
        "N×H×W×C → K, R×R/stride",
        "P×Q",
        "tgc TF/s",
        "torch TF/s",
        "ratio",
        "implicit TF/s",
        "winograd TF/s",
        "agreement"
    );
    for &(hw, c, k, r, stride) in &CONVS {
        let n = CONV_BATCH;
        let pad = r / 2;
        let pq = (hw + 2 * pad - r) / stride + 1;
        let flops = 2.0 * (n * pq * pq * k * c * r * r) as f64;
        let text = conv_graph(n, hw, c, k, r, stride, pad);
        let spec = format!("{n},{hw},{c},{k},{r},{stride},{pad}");
        let case = format!("{n}×{hw}×{hw}×{c} → {k}, {r}×{r}/{stride}");
        let Some(mut row) = bench.row(&format!("conv {case}"), &text, Op::Conv { n: c * r * r }) else { continue };
        let [tgc, torch, ratio] = row.pair(&["f16", "conv", &spec, "0", "0", "bias"], flops / 1e12).cells(1, 2);
        let target = gpu::device_target(row.bench.gpu.sm());
        let mut pinned = Vec::new();
        for algo in [plans::AlgoChoice::Conv(plans::ConvAlgo::ImplicitGemm), winograd::ALGO] {
            if algo == winograd::ALGO && (r, stride) != (3, 1) {
                pinned.push("-".to_string());
                continue;
            }
            pinned.push(match row.tgc(algo.name(), &pin(algo), target) {
                Ok(secs) => format!("{:.2}", flops / secs / 1e12),
                Err(_) => "failed".to_string(),
            });
        }
        let agreement = row.finish();
        println!(
            "{:<6} {case:<28} {:>8} {tgc:>10} {torch:>10} {ratio:>8} {:>14} {:>14} {agreement:>20}",
            "f16",
            format!("{pq}×{pq}"),
            pinned[0],
            pinned[1]
        );
    }
}

/// The [`ATTENTION`] rows whose name contains `only`.
fn attention_rows(bench: &mut Bench, only: &str) {
    // On a 9.x device the tgc column is the template's wgmma branch; its
    // sm80 kernel (mma.sync) is measured beside it.
    let target = gpu::device_target(bench.gpu.sm());
    let sm80_too = target.name != plans::target::SM80.name;
    println!(
        "{:<6} {:<28} {:>10} {:>10} {:>8} {:>12}{} {:>20}",
        "dtype",
        "B×H×S×D",
        "tgc TF/s",
        "torch TF/s",
        "ratio",
        "2-pass TF/s",
        if sm80_too { format!(" {:>10}", "sm80 TF/s") } else { String::new() },
        "agreement"
    );
    let (b, h) = (4usize, 16usize);
    for &(seq, d, causal) in &ATTENTION {
        let flops = 4.0 * (b * h * seq * seq * d) as f64 / if causal { 2.0 } else { 1.0 };
        let text = format!(
            "graph bench(q: f16[{b}, {h}, {seq}, {d}], k: f16[{b}, {h}, {seq}, {d}], v: f16[{b}, {h}, {seq}, {d}]) -> \
             (o: f16[{b}, {h}, {seq}, {d}]) {{\no = attention(q, k, v, causal={causal})\nreturn o\n}}"
        );
        let spec = format!("{b},{h},{seq},{d}");
        let case = format!("{b}×{h}×{seq}×{d}{}", if causal { " causal" } else { "" });
        if !case.contains(only) {
            continue;
        }
        let fused = pipeline::load(&text, Format::Dsl, None)
            .ok()
            .and_then(|l| tgc_core::gpu::attention::recognise::match_attention(&l.graph).err())
            .map_or(Ok(()), |d| Err(d.message));
        if let Err(why) = fused {
            println!("{:<6} {case:<28} not fused ({why}): not run", "f16");
            bench.failed = true;
            continue;
        }
        let Some(mut row) = bench.row(&format!("attention {case}"), &text, Op::Attention) else { continue };
        let torch_case = ["f16", "attention", &spec, "0", "0", if causal { "causal" } else { "none" }];
        let [tgc, torch, ratio] = row.pair(&torch_case, flops / 1e12).cells(2, 3);
        // The same graph with the two-pass softmax pinned.
        let two_pass = match row.tgc(
            "2pass",
            &pin(plans::AlgoChoice::Attention(plans::AttentionAlgo::StreamingSoftmax2Pass)),
            target,
        ) {
            Ok(secs) => format!("{:.2}", flops / secs / 1e12),
            Err(_) => "failed".to_string(),
        };
        let mut sm80 = String::new();
        if sm80_too {
            sm80 = match row.tgc("sm80", &cost::Analytic, &plans::target::SM80) {
                Ok(secs) => format!(" {:>10.2}", flops / secs / 1e12),
                Err(_) => format!(" {:>10}", "failed"),
            };
        }
        let agreement = row.finish();
        println!("{:<6} {case:<28} {tgc:>10} {torch:>10} {ratio:>8} {two_pass:>12}{sm80} {agreement:>20}", "f16");
    }
}

/// The MiniLM rows: `(batch, sequence length)`.
const MINILM: [(usize, usize); 3] = [(1, 128), (8, 128), (32, 128)];

/// The [`MINILM`] rows whose name contains `only`.
fn minilm_rows(bench: &mut Bench, only: &str) {
    println!(
        "{:<6} {:<12} {:>10} {:>12} {:>10} {:>8} {:>20}",
        "dtype", "MiniLM B×S", "tgc seq/s", "graph seq/s", "torch seq/s", "ratio", "agreement"
    );
    let text = include_str!("../../../examples/minilm/graphs/minilm.tgc").replace("f32[", "f16[");
    for &(b, s) in &MINILM {
        let case = format!("{b}×{s}");
        if !case.contains(only) {
            continue;
        }
        let dims = [("B".to_string(), b as i64), ("S".to_string(), s as i64)].into_iter().collect();
        let graph = pipeline::load(&text, Format::Dsl, None).and_then(|l| l.graph.bind(&dims));
        let made = graph.map_err(|d| d.to_string()).and_then(|g| Ok((minilm_inputs(&g)?, g)));
        let (inputs, graph) = match made {
            Ok(m) => m,
            Err(e) => {
                eprintln!("MiniLM {case}: {e}");
                bench.failed = true;
                continue;
            }
        };
        let name = format!("MiniLM {case}");
        let Some(mut row) = bench.row_of(&name, graph, format!("minilm{b}x{s}"), inputs, Op::Model) else { continue };
        let torch_case = ["f16", "minilm", &format!("{b},{s}"), "0", "0", "none"];
        let [tgc, torch, ratio] = row.pair(&torch_case, b as f64).cells(0, 2);
        let replayed = match row.replayed() {
            Ok(t) => format!("{:.1}", b as f64 / t),
            Err(_) => "failed".into(),
        };
        let agreement = row.finish();
        println!("{:<6} {case:<12} {tgc:>10} {replayed:>12} {torch:>10} {ratio:>8} {agreement:>20}", "f16");
    }
}

/// The inputs of MiniLM's graph `g` (every dim bound), in the shape of a
/// trained model so that the output is well conditioned: token ids spread
/// over the vocabulary, a mask of ones (no padding), LayerNorm gains
/// `1 ± 0.1`, and every other weight and bias sample values scaled to
/// ±0.05 (about the standard deviation of 0.02 that `BertModel` draws its
/// weights from).
fn minilm_inputs(g: &Graph) -> Result<Vec<HostTensor>, String> {
    let mut inputs = Vec::new();
    for (i, (id, name)) in g.inputs().into_iter().zip(pipeline::input_names(g)).enumerate() {
        let shape: Vec<usize> = g.shape(id).iter().map(|d| d.as_int().unwrap_or(1) as usize).collect();
        let values = tgc_runtime::tensor::sample_values(i as u64 + 1, shape.iter().product());
        let values: Vec<f64> = match name.as_str() {
            "ids" => values.iter().map(|v| ((v + 1.0) / 2.0 * 30521.0).floor()).collect(),
            "mask" => vec![1.0; values.len()],
            "eg" | "g1" | "g2" => values.iter().map(|v| 1.0 + 0.1 * v).collect(),
            _ => values.iter().map(|v| 0.05 * v).collect(),
        };
        inputs.push(HostTensor::from_f64(g.dtype(id), &shape, &values).map_err(|e| e.to_string())?);
    }
    Ok(inputs)
}

/// The convolution case's graph: NHWC activations, OHWI weights and bias
/// in f16, NHWC output (the layouts permuted to the DSL's NCHW/OIHW
/// `conv2d` and back, which the implicit GEMM reads through).
fn conv_graph(n: usize, hw: usize, c: usize, k: usize, r: usize, stride: usize, pad: usize) -> String {
    let pq = (hw + 2 * pad - r) / stride + 1;
    format!(
        "graph bench(x: f16[{n}, {hw}, {hw}, {c}], w: f16[{k}, {r}, {r}, {c}], b: f16[{k}]) -> (y: f16[{n}, {pq}, \
         {pq}, {k}]) {{\nxc = permute(x, [0, 3, 1, 2])\nwc = permute(w, [0, 3, 1, 2])\nc = conv2d(xc, wc, bias=b, \
         stride=[{stride}, {stride}], pad=[{pad}, {pad}])\ny = permute(c, [0, 2, 3, 1])\nreturn y\n}}"
    )
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

/// The row case's graph (f16, last axis): softmax, layernorm or cumsum.
fn row_graph(op: &str, rows: usize, cols: usize) -> String {
    match op {
        "softmax" => format!(
            "graph bench(x: f16[{rows}, {cols}]) -> (y: f16[{rows}, {cols}]) {{\ny = softmax(x, axis=-1)\nreturn y\n}}"
        ),
        "cumsum" => format!(
            "graph bench(x: f16[{rows}, {cols}]) -> (y: f16[{rows}, {cols}]) {{\ny = cumsum(x, -1)\nreturn y\n}}"
        ),
        _ => format!(
            "graph bench(x: f16[{rows}, {cols}], g: f16[{cols}], b: f16[{cols}]) -> (y: f16[{rows}, {cols}]) {{\n\
             y = layernorm(x, g, b, axis=-1, eps=1e-5)\nreturn y\n}}"
        ),
    }
}

/// Seconds per run of tgc's kernels for `g` (every dim bound; `key` names
/// its module in the cache) compiled for `target` with plans ranked by
/// `estimator`, on `inputs` ([`event_seconds`]), and the outputs of the
/// last run.
fn tgc_run(
    gpu: &Gpu,
    g: &Graph,
    key: &str,
    iters: usize,
    estimator: &dyn Estimator,
    target: &Target,
    inputs: &[HostTensor],
) -> Result<(f64, Vec<HostTensor>), String> {
    let mut c = gpu::Compiled::for_target(gpu, g, key, estimator, target).map_err(err)?;
    c.upload(inputs).map_err(err)?;
    let secs = event_seconds(gpu, iters, || c.run().map_err(err))?;
    Ok((secs, c.download().map_err(err)?))
}

/// Seconds per run of `run`, which queues one run on `gpu`'s stream:
/// [`WARMUP`] runs, then ITERS runs back to back between two CUDA events
/// on that stream (`bench_torch.py`'s method: the device time of the
/// queued runs, not the host's).
fn event_seconds(gpu: &Gpu, iters: usize, mut run: impl FnMut() -> Result<(), String>) -> Result<f64, String> {
    for _ in 0..WARMUP {
        run()?;
    }
    let start = gpu.record_event().map_err(|e| e.to_string())?;
    for _ in 0..iters {
        run()?;
    }
    let end = gpu.record_event().map_err(|e| e.to_string())?;
    Ok(start.ms_until(&end).map_err(|e| e.to_string())? / 1e3 / iters as f64)
}

/// A compile or run error of [`gpu::Compiled`] as one line.
fn err(e: gpu::GpuError) -> String {
    match e {
        gpu::GpuError::Diag(d) => d.to_string(),
        gpu::GpuError::Runtime(e) => e.to_string(),
    }
}

/// Sample values (`tensor::sample_values`, seeded by input position) for
/// each input of `g`, every dimension bound.
fn sample_inputs(g: &Graph) -> Result<Vec<HostTensor>, String> {
    let mut inputs = Vec::new();
    for (i, id) in g.inputs().into_iter().enumerate() {
        let shape: Vec<usize> = g.shape(id).iter().map(|d| d.as_int().unwrap_or(1) as usize).collect();
        let n = shape.iter().product();
        let values = tgc_runtime::tensor::sample_values(i as u64 + 1, n);
        inputs.push(HostTensor::from_f64(g.dtype(id), &shape, &values).map_err(|e| e.to_string())?);
    }
    Ok(inputs)
}

/// Seconds per run of the graph's launches replayed as one CUDA Graph, and
/// the outputs of the last replay: on a stream of its own (the default
/// stream cannot be captured), one direct run, one captured, then
/// [`event_seconds`] of the replays.
fn replay_run(
    gpu: &Gpu,
    g: &Graph,
    key: &str,
    iters: usize,
    inputs: &[HostTensor],
) -> Result<(f64, Vec<HostTensor>), String> {
    let stream = gpu.new_stream().map_err(|e| e.to_string())?;
    let mut c = gpu::Compiled::with_estimator(&stream, g, key, &cost::Analytic).map_err(err)?;
    c.upload(inputs).map_err(err)?;
    c.run().map_err(err)?;
    let replay = stream.capture(|_| {
        c.run().map_err(|e| match e {
            gpu::GpuError::Runtime(e) => e,
            gpu::GpuError::Diag(d) => tgc_runtime::Error::Kernel(d.to_string()),
        })
    });
    let replay = replay.map_err(|e| e.to_string())?;
    let secs = event_seconds(&stream, iters, || replay.replay().map_err(|e| e.to_string()))?;
    Ok((secs, c.download().map_err(err)?))
}

/// The analytic model with one algorithm pinned (`key=value`, as `tgc run
/// --algo`): the templates of the other algorithms for that key refuse.
fn pin(choice: plans::AlgoChoice) -> cost::PinnedAlgorithms<'static> {
    cost::PinnedAlgorithms { pins: vec![choice], inner: &cost::Analytic }
}

/// The machine numbers of the GPU at hand for the analytic model, as the
/// sm80 template runs on it: the sm80 row on sm_80; on sm_90 the sm90 row
/// (H100) under the name `sm80` (the plans' `arch`: the kernels are sm_80
/// code) with the tensor rate of `mma.sync` taken as sm80's per SM and
/// clock (an assumption: no datasheet gives `mma.sync`'s rate on sm_90,
/// whose quoted peak is `wgmma`'s); `None` elsewhere.
fn sm80_model_of(sm: u32) -> Option<Target> {
    let (a100, h100) = (&plans::target::SM80, &plans::target::SM90);
    match sm {
        80 => Some(a100.clone()),
        90 => {
            let per_sm_clock = a100.peak_tensor_tflops / (a100.sm_count as f64 * a100.clock_mhz);
            let peak_tensor_tflops = per_sm_clock * h100.sm_count as f64 * h100.clock_mhz;
            Some(Target { name: a100.name, peak_tensor_tflops, ..h100.clone() })
        }
        _ => None,
    }
}

/// The `--plans` sweep (module doc).
fn plan_sweep(bench: &mut Bench, conv_only: bool) {
    let (gpu, iters) = (bench.gpu, bench.iters);
    let target = &plans::target::SM80;
    let device = sm80_model_of(gpu.sm()).unwrap_or_else(|| target.clone());
    println!(
        "device sm_{}, {iters} iterations per plan; model: the analytic estimate for {} (sm80) and for this device \
         ({} SMs, {:.0} TFLOP/s tensor, {:.0} GB/s DRAM)",
        gpu.sm(),
        target.part,
        device.sm_count,
        device.peak_tensor_tflops,
        device.dram_gbps
    );
    // Each case: its name, graph, torch's case and the bound of its output.
    let mut cases: Vec<(String, String, Vec<String>, Op)> = Vec::new();
    if !conv_only {
        for &(m, n, k) in &SWEEP {
            let torch = ["f16", "gemm", &m.to_string(), &n.to_string(), &k.to_string(), "none"].map(String::from);
            let text = gemm_graph(DType::F16, m, n, k, "none");
            cases.push((format!("GEMM f16 {m}×{n}×{k}"), text, torch.to_vec(), Op::Contraction { n: k }));
        }
    }
    for &(hw, c, kout, r, stride) in CONVS.iter().filter(|c| c.3 == 3) {
        let name = format!("conv f16 {CONV_BATCH}×{hw}×{hw}×{c} → {kout}, {r}×{r}");
        let spec = format!("{CONV_BATCH},{hw},{c},{kout},{r},{stride},{}", r / 2);
        let torch = ["f16", "conv", &spec, "0", "0", "bias"].map(String::from);
        let text = conv_graph(CONV_BATCH, hw, c, kout, r, stride, r / 2);
        cases.push((name, text, torch.to_vec(), Op::Conv { n: c * r * r }));
    }
    for (name, text, torch_case, op) in &cases {
        let Some(mut row) = bench.row(name, text, *op) else { continue };
        let g = row.graph.clone();
        let gg = match tgc_core::gpu::mma::recognise::match_gemm(&g) {
            Ok(gg) => gg,
            Err(d) => {
                eprintln!("{name}: {d}");
                row.bench.failed = true;
                continue;
            }
        };
        let _ = row.torch(&torch_case.iter().map(String::as_str).collect::<Vec<_>>());
        let problem = gg.problem.clone();
        let [m, n, k] = cost::gemm_dims(&problem).unwrap_or([0; 3]);
        let flops = 2.0 * m as f64 * n as f64 * k as f64;
        let Ok(choice) = tgc_core::gpu::mma::lower::choose(&gg, target, &cost::Analytic) else { continue };
        let mut rows = Vec::new();
        for (i, (plan, est)) in choice.candidates.iter().enumerate() {
            let pinned = cost::PinnedPlan(plan);
            let tensor_core = tgc_core::gpu::driver::lower_program_with(&g, target, &pinned)
                .is_ok_and(|p| p.launches.iter().all(|l| l.form == tgc_core::gpu::program::Form::Gemm));
            let measured = if tensor_core {
                row.tgc(&format!("plan{i}"), &pinned, target)
            } else {
                eprintln!("{name} {}: the plan did not give the tensor-core kernel", plan_name(plan));
                row.bench.failed = true;
                continue;
            };
            let on_device = cost::Analytic.estimate(plan, &problem, &device).map_or(0.0, |e| flops / e.time_s / 1e12);
            if let Ok(s) = measured {
                let agreement = row.last.map_or("-".to_string(), |a| a.to_string());
                rows.push((i, plan, flops / est.time_s / 1e12, on_device, flops / s / 1e12, agreement));
            }
        }
        let agreement = row.finish();
        let device_rank = ranks(&rows.iter().map(|r| r.3).collect::<Vec<_>>());
        let measured_rank = ranks(&rows.iter().map(|r| r.4).collect::<Vec<_>>());
        println!("{name} (* the sm80 choice)");
        println!(
            "  {:<28} {:>9} {:>9} {:>5} {:>9} {:>5} {:>20}",
            "plan (tile warp st vec ws)", "sm80 TF", "device TF", "rank", "meas TF", "rank", "agreement"
        );
        for (j, (i, plan, model, on_device, measured, agreement)) in rows.iter().enumerate() {
            let mark = if choice.best == Some(*i) { '*' } else { ' ' };
            println!(
                "{mark} {:<28} {model:>9.1} {on_device:>9.1} {:>5} {measured:>9.1} {:>5} {agreement:>20}",
                plan_name(plan),
                device_rank[j],
                measured_rank[j]
            );
            println!("sweep,{m},{n},{k},{},{model:.2},{on_device:.2},{measured:.2}", plan_name(plan).replace(' ', ","));
        }
        let best_measured = rows.iter().map(|r| r.4).fold(0.0f64, f64::max);
        // The device's space is checked against the device's row, so its
        // candidates are matched by plan, not by index.
        let device_choice = tgc_core::gpu::mma::lower::choose(&gg, &device, &cost::Analytic).ok();
        let device_pick = device_choice.as_ref().and_then(|c| c.best()).map(|(p, _)| p);
        let sm80_pick = choice.best().map(|(p, _)| p);
        for (who, pick) in [("sm80 model's", sm80_pick), ("device model's", device_pick)] {
            if let Some(picked) = rows.iter().find(|r| pick == Some(r.1)) {
                println!(
                    "  {who} pick {}: {:.1} TF/s measured, {:.0}% of the best plan measured ({best_measured:.1})",
                    plan_name(picked.1),
                    picked.4,
                    100.0 * picked.4 / best_measured,
                );
            }
        }
        println!("  Spearman ρ (device model vs measured) {:.2}", spearman(&device_rank, &measured_rank));
        println!("  agreement with torch, worst plan: {agreement}");
    }
}

/// `tile warp_tile stages vec ws` of a plan ([`plans::plan_shape`]), space-separated.
fn plan_name(p: &Plan) -> String {
    plans::plan_shape(p).join(" ")
}

/// 1-based ranks of `v`, highest first; ties share the mean rank.
fn ranks(v: &[f64]) -> Vec<f64> {
    v.iter()
        .map(|x| {
            let above = v.iter().filter(|y| *y > x).count() as f64;
            let equal = v.iter().filter(|y| *y == x).count() as f64;
            above + (equal + 1.0) / 2.0
        })
        .collect()
}

/// Spearman's ρ of two rank vectors: Pearson's correlation of the ranks.
fn spearman(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len() as f64;
    let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let cov: f64 = a.iter().zip(b).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let va: f64 = a.iter().map(|x| (x - ma).powi(2)).sum();
    let vb: f64 = b.iter().map(|y| (y - mb).powi(2)).sum();
    cov / (va * vb).sqrt()
}

/// A hash of the graph text, for the module cache key.
fn fxhash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

/// Seconds per run of PyTorch's version, from `scripts/bench_torch.py`, on
/// tgc's `inputs` (`.npy`, graph order), its output written to `output`.
/// `case`: dtype, op (`gemm`, `softmax`, …), three sizes, epilogue.
fn torch_seconds(case: &[&str], iters: usize, output: &Path, inputs: &[PathBuf]) -> Result<f64, String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/bench_torch.py");
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let o = Command::new(&python)
        .arg(script)
        .args(case)
        .arg(iters.to_string())
        .arg(output)
        .args(inputs)
        .output()
        .map_err(|e| format!("cannot run {python}: {e}"))?;
    if !o.status.success() {
        return Err(String::from_utf8_lossy(&o.stderr).trim().to_string());
    }
    String::from_utf8_lossy(&o.stdout).trim().parse().map_err(|e| format!("bench_torch.py printed no number: {e}"))
}

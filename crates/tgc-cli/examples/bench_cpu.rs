//! Benchmark (not a test): tgc's generated CPU kernels against NumPy
//! (OpenBLAS) and ONNX Runtime, measured in the same run with the same
//! number of threads offered to both sides, on the same inputs, each row's
//! outputs compared.
//!
//! ```text
//! bash scripts/bench_cpu.sh [RUNS] [--threads 1,2] [--only gemm|softmax|layernorm|conv|cumsum] [--peak-gflops F]
//! cargo run --release -p tgc-cli --example bench_cpu -- [the same arguments]
//! ```
//!
//! The script installs the peers (pinned) into `.toolchain/bench` and runs
//! this example with them on `PYTHONPATH`; run directly, the example uses
//! whatever `$PYTHON` (default `python3`) imports. Building needs what
//! `scripts/setup.sh` installs (autoconf, automake, libtool for isl).
//!
//! Cases, all f32:
//! - GEMM `y = matmul(x, w)`, M×N×K = 128×1536×384, 512³, 1024³, 2048³;
//! - softmax over the last axis of `[4096, 1024]`;
//! - layernorm over the last axis of `[4096, 384]`, with gamma and beta
//!   (eps 1e-5, the DSL's default);
//! - conv 3×3 stride 1 pad 1 with bias → ReLU → max pool 2×2 stride 2,
//!   NCHW, N = 1, C = K = 64 at 56×56, 128 at 28×28, 256 at 14×14 (the
//!   shapes of `bench_conv_pool`);
//! - cumsum over the last axis of `[4096, 1024]` (many rows) and of
//!   `[1, 4194304]` (one row of 1024 blocks: the blocked scan's case).
//!
//! Each case is compiled once as `bench_conv_pool` compiles it (C through
//! [`CompiledCpu`], the default [`Options`]: fused regions, packed
//! contractions) on the inputs of [`pipeline::sample_inputs`] and timed, for
//! each thread count `n` of `--threads` (default 1,2), with
//! [`cpu_rt::set_threads`]`(n)`: one warm-up `run_into`, the median of RUNS
//! calls (default 5). Only when every case is timed do the peers run:
//! `scripts/bench_cpu_peers.py` in a fresh Python process per case and
//! thread count, with `n` threads (OpenBLAS's, ONNX Runtime's intra-op pool)
//! on the same inputs (written as `.npy`), timed the same way, each process
//! started a second after the previous one exited. (Timing tgc right after a
//! peer process, even half a second after it exited, measured two-thread
//! times up to 1.9× longer, 2.33 ms instead of 1.24 ms for 128×1536×384;
//! the pause gives the peers the same quiet start.) The peers write their
//! outputs back, and each is compared with tgc's under the case's bound
//! (`examples/common/agreement.rs`: normwise, `max|tgc − peer| ≤ tol ·
//! max|peer|`, `tol` per op).
//!
//! Printed per row: the thread count tgc ran with, tgc's median ms and rate,
//! then for each peer the threads it ran with, its median ms, peer/tgc (≥ 1
//! means tgc is faster) and the agreement (`max|d|/relative ok`, or `FAIL`).
//! NumPy's softmax, layernorm and cumsum are single-threaded whatever the
//! count (its ufuncs have no thread pool), so their rows say 1 thread for
//! NumPy; its conv's contraction runs in OpenBLAS on `n` threads, the
//! padding, window view and pooling on one. Rates: GEMM GFLOP/s
//! (2·M·N·K per call) and the fraction of the f32 peak of `n` cores (at most
//! the machine's); softmax, layernorm and cumsum GB/s (every tensor read
//! or written once); conv GFLOP/s of the convolution (2·K·C·9·H·W). The peak of a core
//! is `tgc_core::plan::target::CpuTarget::host`'s: its f32 flops per cycle
//! (two FMA pipes of the widest vectors the runtime's micro-kernel uses)
//! times the clock of `/proc/cpuinfo`'s first "cpu MHz", or `--peak-gflops`.
//!
//! A missing peer (no Python, NumPy or ONNX Runtime) prints `-`, and once
//! what is missing and how to install it; the last line counts the rows
//! compared, failed and not compared. Exits 1, after every row is printed,
//! when a tgc kernel fails to compile or run or a row's outputs disagree.
//! With `TGC_BENCH_CORRUPT=1` every tgc output is made wrong before it is
//! compared, so every compared row must fail (the check of the check).

use std::collections::HashSet;
use std::num::NonZeroUsize;
use std::path::Path;
use std::process::{Command, ExitCode};
use std::time::Instant;

use clap::{Parser, ValueEnum};
use serde_json::{json, Value};
use tgc_core::pipeline::{self, CompiledCpu, Format, Options, RunError};
use tgc_core::plan::target::{self, CpuTarget};
use tgc_runtime::{cpu_rt, npy, HostTensor};

// Each benchmark uses the bounds of its own ops.
#[allow(dead_code)]
#[path = "common/agreement.rs"]
mod agreement;

use agreement::{Agreement, Op};

/// The peers' script, run as `$PYTHON bench_cpu_peers.py CASE_JSON`.
const PEER_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/bench_cpu_peers.py");

/// The peers the script times, in the order of their columns.
const PEERS: [&str; 2] = ["numpy", "onnxruntime"];

/// The pause before each peer process, so that the previous one is gone
/// when it starts timing (see the module doc).
const SETTLE: std::time::Duration = std::time::Duration::from_secs(1);

/// Times tgc's generated CPU kernels (f32 GEMM, softmax, layernorm, conv →
/// ReLU → max pool) against NumPy and ONNX Runtime, run by
/// scripts/bench_cpu_peers.py with $PYTHON (default python3), at equal thread
/// counts.
#[derive(Parser)]
struct Args {
    /// Timed runs per case and thread count; the median is printed.
    #[arg(default_value = "5")]
    runs: NonZeroUsize,
    /// Thread counts, each used by tgc and by the peers in turn.
    #[arg(long, value_delimiter = ',', default_values = ["1", "2"])]
    threads: Vec<NonZeroUsize>,
    /// Only this family of cases.
    #[arg(long)]
    only: Option<Family>,
    /// The f32 peak of one core in GFLOP/s, instead of `CpuTarget::host`'s
    /// flops per cycle × the clock in /proc/cpuinfo.
    #[arg(long)]
    peak_gflops: Option<f64>,
}

/// A family of cases, printed as one table.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Family {
    Gemm,
    Softmax,
    Layernorm,
    Conv,
    Cumsum,
}

/// One benchmark case.
#[derive(Clone, Copy)]
enum Case {
    /// `y[M, N] = x[M, K] · w[K, N]`.
    Gemm { m: usize, n: usize, k: usize },
    /// Softmax over the last axis of `x[rows, cols]`.
    Softmax { rows: usize, cols: usize },
    /// Layernorm over the last axis of `x[rows, cols]`, gamma and beta `[cols]`.
    Layernorm { rows: usize, cols: usize },
    /// Conv of `x[1, c, hw, hw]` with `k` 3×3 filters and a bias, ReLU, max pool.
    Conv { c: usize, hw: usize, k: usize },
    /// Cumulative sum over the last axis of `x[rows, cols]`.
    Cumsum { rows: usize, cols: usize },
}

const CASES: [Case; 11] = [
    Case::Gemm { m: 128, n: 1536, k: 384 },
    Case::Gemm { m: 512, n: 512, k: 512 },
    Case::Gemm { m: 1024, n: 1024, k: 1024 },
    Case::Gemm { m: 2048, n: 2048, k: 2048 },
    Case::Softmax { rows: 4096, cols: 1024 },
    Case::Layernorm { rows: 4096, cols: 384 },
    Case::Conv { c: 64, hw: 56, k: 64 },
    Case::Conv { c: 128, hw: 28, k: 128 },
    Case::Conv { c: 256, hw: 14, k: 256 },
    Case::Cumsum { rows: 4096, cols: 1024 },
    Case::Cumsum { rows: 1, cols: 4 << 20 },
];

impl Case {
    fn family(self) -> Family {
        match self {
            Case::Gemm { .. } => Family::Gemm,
            Case::Softmax { .. } => Family::Softmax,
            Case::Layernorm { .. } => Family::Layernorm,
            Case::Conv { .. } => Family::Conv,
            Case::Cumsum { .. } => Family::Cumsum,
        }
    }

    /// The row label.
    fn label(self) -> String {
        match self {
            Case::Gemm { m, n, k } => format!("{m}x{n}x{k}"),
            Case::Softmax { rows, cols } | Case::Layernorm { rows, cols } | Case::Cumsum { rows, cols } => {
                format!("{rows}x{cols}")
            }
            Case::Conv { c, hw, k } => format!("C={c} K={k} HW={hw}"),
        }
    }

    /// The graph in the DSL.
    fn graph(self) -> String {
        match self {
            Case::Gemm { m, n, k } => format!(
                "graph gemm_{m}x{n}x{k}(x: f32[{m}, {k}], w: f32[{k}, {n}]) -> (y: f32[{m}, {n}]) {{\n    \
                 y = matmul(x, w)\n    return y\n}}\n"
            ),
            Case::Softmax { rows, cols } => format!(
                "graph softmax_{rows}x{cols}(x: f32[{rows}, {cols}]) -> (y: f32[{rows}, {cols}]) {{\n    \
                 y = softmax(x, axis=-1)\n    return y\n}}\n"
            ),
            Case::Layernorm { rows, cols } => format!(
                "graph layernorm_{rows}x{cols}(x: f32[{rows}, {cols}], g: f32[{cols}], b: f32[{cols}]) \
                 -> (y: f32[{rows}, {cols}]) {{\n    y = layernorm(x, g, b, axis=-1, eps=1e-5)\n    return y\n}}\n"
            ),
            Case::Conv { c, hw, k } => format!(
                "graph conv_pool_c{c}_hw{hw}(x: f32[1, {c}, {hw}, {hw}], w: f32[{k}, {c}, 3, 3], b: f32[{k}]) \
                 -> (y: f32[1, {k}, {o}, {o}]) {{\n    \
                 c = conv2d(x, w, bias=b, stride=[1, 1], pad=[1, 1])\n    r = relu(c)\n    \
                 y = maxpool2d(r, kernel=[2, 2], stride=[2, 2], pad=[0, 0])\n    return y\n}}\n",
                o = hw / 2
            ),
            Case::Cumsum { rows, cols } => format!(
                "graph cumsum_{rows}x{cols}(x: f32[{rows}, {cols}]) -> (y: f32[{rows}, {cols}]) {{\n    \
                 y = cumsum(x, -1)\n    return y\n}}\n"
            ),
        }
    }

    /// The case's `op` for `bench_cpu_peers.py`.
    fn peer_op(self) -> &'static str {
        match self {
            Case::Gemm { .. } => "gemm",
            Case::Softmax { .. } => "softmax",
            Case::Layernorm { .. } => "layernorm",
            Case::Conv { .. } => "conv_relu_pool",
            Case::Cumsum { .. } => "cumsum",
        }
    }

    /// What the case computes, for its agreement bound.
    fn op(self) -> Op {
        match self {
            Case::Gemm { k, .. } => Op::Contraction { n: k },
            Case::Softmax { cols, .. } => Op::Softmax { n: cols },
            Case::Layernorm { cols, .. } => Op::Layernorm { n: cols },
            Case::Conv { c, .. } => Op::Conv { n: 9 * c },
            Case::Cumsum { cols, .. } => Op::Cumsum { n: cols },
        }
    }

    /// The work of one call in the unit of the rate column: flops (GEMM,
    /// conv) or bytes read and written (softmax, layernorm, cumsum).
    fn work(self) -> f64 {
        let f = |v: usize| v as f64;
        match self {
            Case::Gemm { m, n, k } => 2.0 * f(m) * f(n) * f(k),
            Case::Softmax { rows, cols } | Case::Cumsum { rows, cols } => 4.0 * 2.0 * f(rows) * f(cols),
            Case::Layernorm { rows, cols } => 4.0 * (2.0 * f(rows) * f(cols) + 2.0 * f(cols)),
            Case::Conv { c, hw, k } => 2.0 * f(k) * f(c) * 9.0 * f(hw) * f(hw),
        }
    }
}

impl Family {
    /// The table's title and the header of its rate column(s).
    fn heading(self) -> (&'static str, String) {
        match self {
            Family::Gemm => ("f32 GEMM y = matmul(x, w), MxNxK", format!("{:>8} {:>6}", "GF/s", "%peak")),
            Family::Softmax => ("f32 softmax over the last axis, rows x cols", format!("{:>8}", "GB/s")),
            Family::Layernorm => ("f32 layernorm over the last axis, rows x cols", format!("{:>8}", "GB/s")),
            Family::Conv => ("f32 conv 3x3 s1 p1 + bias -> ReLU -> maxpool 2x2 s2, N=1", format!("{:>8}", "GF/s")),
            Family::Cumsum => ("f32 cumsum over the last axis, rows x cols", format!("{:>8}", "GB/s")),
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runs = args.runs.get();
    let peak = match peak_per_core(args.peak_gflops) {
        Ok((gflops, source)) => {
            println!("f32 peak per core: {gflops:.1} GFLOP/s ({source})");
            Some(gflops)
        }
        Err(e) => {
            println!("f32 peak per core unknown ({e}): %peak not printed; pass --peak-gflops");
            None
        }
    };
    let threads: Vec<String> = args.threads.iter().map(|n| n.to_string()).collect();
    println!(
        "median of {runs} runs after one warm-up, threads {}; thr = the threads each side ran with; \
         ratio = peer ms / tgc ms (>= 1: tgc faster); agreement = max|tgc - peer| / that over max|peer|, \
         ok within the op's bound (examples/common/agreement.rs), else FAIL",
        threads.join(",")
    );
    let work = match tgc_runtime::files::scratch_dir("bench-cpu") {
        Ok(w) => w,
        Err(e) => {
            eprintln!("bench_cpu: cannot create a work directory in {}: {e}", std::env::temp_dir().display());
            return ExitCode::from(1);
        }
    };
    let dir = work.path();
    // Every tgc timing first, then every peer (see the module doc).
    let mut failed = false;
    let families: Vec<Family> = [Family::Gemm, Family::Softmax, Family::Layernorm, Family::Conv, Family::Cumsum]
        .into_iter()
        .filter(|&f| args.only.is_none_or(|o| o == f))
        .collect();
    let mut timed = Vec::new();
    for case in CASES.into_iter().filter(|c| families.contains(&c.family())) {
        match time_case(case, &args, dir) {
            Ok(t) => timed.push(t),
            Err(e) => {
                eprintln!("bench_cpu: {} {}: {e}", case.peer_op(), case.label());
                failed = true;
            }
        }
    }
    let mut peers = Peers::new();
    let mut tally = Tally::default();
    for family in families {
        let (title, rate) = family.heading();
        println!("\n== {title}");
        println!(
            "{:<18} {:>3} {:>9} {rate} | {:>3} {:>9} {:>7} {:>20} | {:>3} {:>9} {:>7} {:>20}",
            "case", "thr", "tgc ms", "thr", "numpy ms", "ratio", "agreement", "thr", "ort ms", "ratio", "agreement"
        );
        for t in timed.iter().filter(|t| t.case.family() == family) {
            report(t, peak, &mut peers, &mut tally);
        }
    }
    if let Some(v) = &peers.versions {
        println!("\npeers: {v} (scripts/bench_cpu_peers.py)");
    }
    println!(
        "agreement: {} outputs compared, {} FAIL, {} not compared (no peer output)",
        tally.compared, tally.failed, tally.missing
    );
    drop(work);
    if failed || tally.failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// A case compiled and timed: what its peers need and tgc's times.
struct Timed {
    case: Case,
    /// The request for `bench_cpu_peers.py`, less the thread count.
    request: Value,
    /// tgc's output, which the peers' outputs are compared with.
    output: HostTensor,
    /// tgc's median ms per thread count of `--threads`.
    ms: Vec<(NonZeroUsize, f64)>,
}

/// Compiles `case`, writes its inputs for the peers, and times tgc's kernel
/// at each thread count of `args`.
///
/// Errors: tgc's (load, compile, run) and the work directory's.
fn time_case(case: Case, args: &Args, dir: &Path) -> Result<Timed, String> {
    let runs = args.runs.get();
    let g = pipeline::load(&case.graph(), Format::Dsl, None).map_err(|d| d.render("bench_cpu"))?.graph;
    let inputs = pipeline::sample_inputs(&g).map_err(|d| d.render("bench_cpu"))?;
    let kernel = CompiledCpu::new(&g, &Options::default(), dir).map_err(run_error)?;
    let mut outputs = kernel.run(&inputs, &[]).map_err(run_error)?;
    let case_dir = dir.join(format!("{}_{}", case.peer_op(), case.label().replace([' ', '='], "")));
    std::fs::create_dir_all(&case_dir).map_err(|e| format!("{}: {e}", case_dir.display()))?;
    let mut paths = Vec::new();
    for (i, t) in inputs.iter().enumerate() {
        let path = case_dir.join(format!("input{i}.npy"));
        npy::write_npy(&path, t).map_err(|e| format!("{}: {e}", path.display()))?;
        paths.push(path);
    }
    let request = json!({
        "op": case.peer_op(),
        "shapes": inputs.iter().map(HostTensor::shape).collect::<Vec<_>>(),
        "runs": runs,
        "inputs": paths,
        "output_dir": case_dir,
    });
    let mut ms = Vec::new();
    for &n in &args.threads {
        cpu_rt::set_threads(n.get());
        ms.push((n, median_ms(runs, || kernel.run_into(&inputs, &mut outputs, &[])).map_err(run_error)?));
    }
    let output = outputs.swap_remove(0);
    Ok(Timed { case, request, output, ms })
}

/// How many peer outputs were compared with tgc's, how many of those
/// disagreed, and how many peers gave none.
#[derive(Default)]
struct Tally {
    compared: usize,
    failed: usize,
    missing: usize,
}

/// Times the peers of `t` at each of its thread counts and prints one row
/// per thread count, counting its comparisons in `tally`.
fn report(t: &Timed, peak: Option<f64>, peers: &mut Peers, tally: &mut Tally) {
    let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
    for &(n, ms) in &t.ms {
        let rate = t.case.work() / ms / 1e6;
        let rate_cols = match (t.case.family(), peak) {
            (Family::Gemm, Some(p)) => format!("{rate:>8.1} {:>5.0}%", 100.0 * rate / (p * n.get().min(cores) as f64)),
            (Family::Gemm, None) => format!("{rate:>8.1} {:>6}", "-"),
            _ => format!("{rate:>8.1}"),
        };
        let mut row = format!("{:<18} {n:>3} {ms:>9.3} {rate_cols}", t.case.label());
        let mut request = t.request.clone();
        request["threads"] = json!(n.get());
        let results = peers.run(&request, &t.output, t.case.op());
        for r in &results {
            let threads = r.threads.map_or("-".to_string(), |n| n.to_string());
            row.push_str(&format!(" | {threads:>3}"));
            match r.ms {
                Some(p) => row.push_str(&format!(" {p:>9.3} {:>7.2}", p / ms)),
                None => row.push_str(&format!(" {:>9} {:>7}", "-", "-")),
            }
            match r.agreement {
                Some(a) => {
                    tally.compared += 1;
                    tally.failed += usize::from(!a.ok());
                    row.push_str(&format!(" {a:>20}"));
                }
                None => {
                    tally.missing += 1;
                    row.push_str(&format!(" {:>20}", "-"));
                }
            }
        }
        println!("{row}");
    }
}

/// Median wall time of `runs` calls of `call`, in ms, after one warm-up call.
fn median_ms<E>(runs: usize, mut call: impl FnMut() -> Result<(), E>) -> Result<f64, E> {
    call()?;
    let mut ms = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        call()?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    ms.sort_by(f64::total_cmp);
    Ok(ms[ms.len() / 2])
}

/// `e` as one line for stderr.
fn run_error(e: RunError) -> String {
    match e {
        RunError::Diag(d) => d.render("bench_cpu"),
        RunError::Runtime(e) => e.to_string(),
    }
}

/// The f32 peak of one core in GFLOP/s, and where the number comes from:
/// `flag`, else [`CpuTarget::host`]'s (its flops per cycle × the first
/// "cpu MHz" of /proc/cpuinfo; an error when it has none).
fn peak_per_core(flag: Option<f64>) -> Result<(f64, String), String> {
    if let Some(gflops) = flag {
        if !(gflops.is_finite() && gflops > 0.0) {
            return Err(format!("--peak-gflops {gflops} is not a positive number"));
        }
        return Ok((gflops, "--peak-gflops".into()));
    }
    let mhz = target::cpu_mhz().ok_or("no \"cpu MHz\" in /proc/cpuinfo")?;
    let host = CpuTarget::host();
    let per_cycle = host.flops_per_clock();
    Ok((
        host.peak_flops(1) / 1e9,
        format!("{per_cycle} flops/cycle ({}) x {mhz} MHz, the first \"cpu MHz\" of /proc/cpuinfo", host.isa.name()),
    ))
}

/// One peer's numbers for one row; `None` where it did not run (the reason
/// is noted on stderr).
#[derive(Clone, Copy)]
struct PeerResult {
    /// The threads it ran with (NumPy's element-wise ops: 1).
    threads: Option<usize>,
    /// Median ms of one call.
    ms: Option<f64>,
    /// How its output agrees with tgc's.
    agreement: Option<Agreement>,
}

impl PeerResult {
    /// A peer that did not run.
    const MISSING: PeerResult = PeerResult { threads: None, ms: None, agreement: None };
}

/// The peers' runner: the Python to run `bench_cpu_peers.py` with, the
/// problems reported so far (each is printed once) and the peers' versions.
struct Peers {
    python: String,
    reported: HashSet<String>,
    versions: Option<String>,
}

impl Peers {
    fn new() -> Peers {
        Peers {
            python: std::env::var("PYTHON").unwrap_or_else(|_| "python3".into()),
            reported: HashSet::new(),
            versions: None,
        }
    }

    /// Prints `message` on stderr unless it was printed before.
    fn note(&mut self, message: String) {
        if self.reported.insert(message.clone()) {
            eprintln!("bench_cpu: {message}");
        }
    }

    /// Times the peers on `request` (the case as `bench_cpu_peers.py` reads
    /// it) and compares their outputs with tgc's output `tgc` under `op`'s
    /// bound. One result per [`PEERS`] entry.
    fn run(&mut self, request: &Value, tgc: &HostTensor, op: Op) -> Vec<PeerResult> {
        let reply = match self.ask(&request.to_string()) {
            Ok(r) => r,
            Err(e) => {
                self.note(e);
                return vec![PeerResult::MISSING; PEERS.len()];
            }
        };
        if self.versions.is_none() {
            self.versions = reply["versions"].as_object().map(|v| {
                v.iter().filter_map(|(k, v)| Some(format!("{k} {}", v.as_str()?))).collect::<Vec<_>>().join(", ")
            });
        }
        let empty = Vec::new();
        let replies = reply["peers"].as_array().unwrap_or(&empty);
        PEERS
            .iter()
            .map(|&name| {
                let Some(r) = replies.iter().find(|r| r["name"] == name) else {
                    self.note(format!("bench_cpu_peers.py gave no result for {name}"));
                    return PeerResult::MISSING;
                };
                if let Some(e) = r["error"].as_str() {
                    self.note(format!("{name}: {e}"));
                }
                let agreement = r["output"].as_str().and_then(|path| match agree(Path::new(path), tgc, op) {
                    Ok(a) => Some(a),
                    Err(e) => {
                        self.note(format!("{name}: {e}"));
                        None
                    }
                });
                let threads = r["threads"].as_u64().map(|n| n as usize);
                PeerResult { threads, ms: r["ms"].as_f64(), agreement }
            })
            .collect()
    }

    /// Runs `bench_cpu_peers.py` on the case `request` and parses its reply.
    ///
    /// Errors: Python cannot be started, the script fails (its stderr says
    /// why, e.g. NumPy is missing) or prints no JSON.
    fn ask(&self, request: &str) -> Result<Value, String> {
        std::thread::sleep(SETTLE);
        let out = Command::new(&self.python).arg(PEER_SCRIPT).arg(request).output().map_err(|e| {
            format!(
                "cannot run `{}` ({e}): install Python 3 or set PYTHON to one; \
                 bash scripts/bench_cpu.sh then installs the peers",
                self.python
            )
        })?;
        if !out.status.success() {
            return Err(format!(
                "bench_cpu_peers.py failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        serde_json::from_slice(&out.stdout).map_err(|e| format!("bench_cpu_peers.py printed no JSON result: {e}"))
    }
}

/// How tgc's output `tgc` agrees with the peer's, the `.npy` array at
/// `path`, under `op`'s bound ([`agreement::compare`]).
///
/// Errors: the file cannot be read, or its shape is not tgc's.
fn agree(path: &Path, tgc: &HostTensor, op: Op) -> Result<Agreement, String> {
    let peer = npy::read_npy(path).map_err(|e| format!("{}: {e}", path.display()))?;
    agreement::compare(tgc, &peer, op)
}

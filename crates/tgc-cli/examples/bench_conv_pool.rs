//! Benchmark (not a test): fused vs unfused Conv → ReLU → MaxPool on the
//! CPU, for a few ResNet-like shapes, and the fused kernel with symbolic
//! tiles (`003`) vs without.
//!
//! ```text
//! cargo run --release -p tgc-cli --example bench_conv_pool [-- RUNS]
//! ```
//!
//! *Fused* is the region pass's one kernel (Poly Core's compute-at: the
//! conv re-run at each pool-window read, no conv buffer); *unfused* is the
//! same graph with fusion off ([`Options::fuse`]: the conv stored, then
//! ReLU → MaxPool). *Tiled* is the fused kernel with the pool's H and W
//! loops strip-mined by run-time tiles of 8 × 8. Each variant is compiled
//! once (C, `cc -O2`), run once to warm up, then RUNS times (default 5);
//! the median wall time is printed in ms with the ratios. Timings include
//! nothing but the kernel call. The last column is the agreement of the
//! unfused and tiled outputs with the fused one (the worse of the two,
//! `examples/common/agreement.rs`'s convolution bound: `max|d|/relative
//! ok`, or `FAIL`); a row that fails makes the run exit 1 after the last
//! row. With `TGC_BENCH_CORRUPT=1` the compared outputs are made wrong
//! first, so every row must fail.

use std::process::ExitCode;
use std::time::Instant;

use tgc_core::pipeline::{self, CompiledCpu, Format, Options, TilePlan};
use tgc_runtime::HostTensor;

// Each benchmark uses the bounds of its own ops.
#[allow(dead_code)]
#[path = "common/agreement.rs"]
mod agreement;

/// One benchmark shape: input `[1, c, hw, hw]`, `k` 3×3 filters (stride 1,
/// pad 1), then a max pool `pool`×`pool` with stride 2 and padding `pad`.
struct Shape {
    c: usize,
    hw: usize,
    k: usize,
    pool: usize,
    pad: usize,
}

fn graph(s: &Shape) -> String {
    let out = (s.hw + 2 * s.pad - s.pool) / 2 + 1;
    format!(
        "graph conv_pool_c{c}_hw{hw}_p{p}(x: f32[1, {c}, {hw}, {hw}], w: f32[{k}, {c}, 3, 3], b: f32[{k}]) \
         -> (y: f32[1, {k}, {out}, {out}]) {{\n    \
         c = conv2d(x, w, bias=b, stride=[1, 1], pad=[1, 1])\n    r = relu(c)\n    \
         y = maxpool2d(r, kernel=[{p}, {p}], stride=[2, 2], pad=[{pad}, {pad}])\n    return y\n}}\n",
        c = s.c,
        hw = s.hw,
        k = s.k,
        p = s.pool,
        pad = s.pad,
    )
}

/// Median wall time of `runs` calls, in ms, after one warm-up call.
fn time(kernel: &CompiledCpu, inputs: &[HostTensor], outputs: &mut [HostTensor], tiles: &[i64], runs: usize) -> f64 {
    kernel.run_into(inputs, outputs, tiles).expect("kernel run");
    let mut ms: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            kernel.run_into(inputs, outputs, tiles).expect("kernel run");
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    ms[ms.len() / 2]
}

fn main() -> ExitCode {
    let runs: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(5).max(1);
    let work = tgc_runtime::files::scratch_dir("bench-conv-pool").expect("work directory");
    let dir = work.path();
    let shapes = [
        Shape { c: 64, hw: 56, k: 64, pool: 2, pad: 0 },
        Shape { c: 128, hw: 28, k: 128, pool: 2, pad: 0 },
        Shape { c: 256, hw: 14, k: 256, pool: 2, pad: 0 },
        Shape { c: 64, hw: 56, k: 64, pool: 3, pad: 1 },
    ];
    println!("Conv 3x3 s1 p1 -> ReLU -> MaxPool s2, N=1, f32; median of {runs} runs after one warm-up (ms)");
    println!(
        "{:<34} {:>10} {:>10} {:>10} {:>16} {:>14} {:>20}",
        "shape", "unfused", "fused", "tiled 8x8", "unfused/fused", "fused/tiled", "agreement"
    );
    let mut failed = 0;
    for s in &shapes {
        let src = graph(s);
        let g = pipeline::load(&src, Format::Dsl, None).unwrap_or_else(|d| panic!("{}", d.render("bench"))).graph;
        let inputs: Vec<HostTensor> = pipeline::sample_inputs(&g).expect("inputs");
        let compile = |opts: &Options| CompiledCpu::new(&g, opts, dir).unwrap_or_else(|e| panic!("{e:?}"));
        let fused = compile(&Options::default());
        let unfused = compile(&Options { fuse: false, ..Options::default() });
        let tiled = compile(&Options { tiles: TilePlan::spatial_nchw(), ..Options::default() });
        let tiles = [8, 8];
        let want = fused.run(&inputs, &[]).expect("fused run");
        let op = agreement::Op::Conv { n: 9 * s.c };
        let mut worst: Option<agreement::Agreement> = None;
        for (k, t) in [(&unfused, &[][..]), (&tiled, &tiles[..])] {
            let got = k.run(&inputs, t).expect("run");
            let a = agreement::compare(&got[0], &want[0], op).expect("the variants' outputs have one shape");
            worst = Some(worst.map_or(a, |w| w.worse(a)));
        }
        let agreement = worst.expect("two variants compared");
        failed += usize::from(!agreement.ok());
        let mut out = want;
        let t_unfused = time(&unfused, &inputs, &mut out, &[], runs);
        let t_fused = time(&fused, &inputs, &mut out, &[], runs);
        let t_tiled = time(&tiled, &inputs, &mut out, &tiles, runs);
        let label = format!("C={} H=W={} K={} pool {}x{} p{}", s.c, s.hw, s.k, s.pool, s.pool, s.pad);
        println!(
            "{label:<34} {t_unfused:>10.2} {t_fused:>10.2} {t_tiled:>10.2} {:>16.2} {:>14.2} {agreement:>20}",
            t_unfused / t_fused,
            t_fused / t_tiled
        );
    }
    println!("agreement: {} rows compared, {failed} FAIL", shapes.len());
    if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

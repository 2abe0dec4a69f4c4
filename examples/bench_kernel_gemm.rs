//! A benchmark, not a test: `kernel!`'s f32 GEMM (Rust bodies on the packed
//! template, tasks on the runtime's pool) at its ShapeSet points, on one
//! thread and on every core, in GFLOP/s:
//!
//! ```text
//! cargo run --release --example bench_kernel_gemm [-- RUNS]
//! ```
//!
//! It prints the median of RUNS (default 9) timed calls after a warm-up.

tgc::kernel!(gemm:
    graph<M, N, K> main(x: f32[M, K], w: f32[K, N]) -> (y: f32[M, N]) {
        y = matmul(x, w)
        return y
    },
    shapes(M = 128, N = 1536, K = 384),
    shapes(M = 512, N = 512, K = 512),
    shapes(M = 1024, N = 1024, K = 1024)
);

fn main() {
    let runs: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(9).max(1);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("kernel! f32 GEMM, median of {runs} runs; threads 1 and {cores}");
    println!("{:<16} {:>7} {:>10} {:>9}", "M×N×K", "threads", "ms", "GFLOP/s");
    for (m, n, k) in [(128, 1536, 384), (512, 512, 512), (1024, 1024, 1024)] {
        let x: Vec<f32> = (0..m * k).map(|i| (i % 13) as f32 * 0.01).collect();
        let w: Vec<f32> = (0..k * n).map(|i| (i % 7) as f32 * 0.01 - 0.03).collect();
        let mut y = vec![0.0f32; m * n];
        let mut first: Option<Vec<f32>> = None;
        for threads in [1, cores] {
            tgc::set_threads(threads);
            gemm::run(&x, &w, &mut y, m, n, k).expect("warm-up");
            match &first {
                None => first = Some(y.clone()),
                Some(f) => assert_eq!(&y, f, "the threads change no bit"),
            }
            let mut times: Vec<f64> = (0..runs)
                .map(|_| {
                    let t = std::time::Instant::now();
                    gemm::run(&x, &w, &mut y, m, n, k).expect("run");
                    t.elapsed().as_secs_f64()
                })
                .collect();
            times.sort_by(f64::total_cmp);
            let med = times[runs / 2];
            let gflops = 2.0 * (m * n * k) as f64 / med / 1e9;
            println!("{:<16} {threads:>7} {:>10.3} {gflops:>9.1}", format!("{m}×{n}×{k}"), med * 1e3);
        }
    }
}

//! A warm call of a `kernel!` function allocates nothing, on any thread: its
//! temporaries and GEMM panels are vectors from the runtime's per-thread
//! pools (`tgc::scratch::take`/`give`), and its packed GEMMs run their
//! tasks on the runtime's pool when they have work enough. The allocator of
//! this test binary counts the allocations of the whole process (its one
//! test runs alone).

include!("support/counting_alloc.rs");

// Two GEMMs (packed panels) with a stored product between them (a
// temporary), a softmax (reductions and element-wise temporaries).
tgc::kernel!(chain:
    graph<M, N, K> main(x: f32[M, K], w: f32[K, N], v: f32[N, K]) -> (y: f32[M, K]) {
        a = relu(matmul(x, w))
        y = softmax(matmul(a, v), axis=-1)
        return y
    }
);

#[test]
fn a_warm_kernel_call_allocates_nothing() {
    tgc::set_threads(2);
    // The first size splits its GEMMs across both threads; the others run
    // on the caller's (too little work to wake a worker).
    for (m, n, k) in [(200, 192, 96), (40, 48, 24), (7, 5, 3)] {
        let x: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 * 0.1).collect();
        let w: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.1 - 0.2).collect();
        let v: Vec<f32> = (0..n * k).map(|i| (i % 3) as f32 * 0.1).collect();
        let mut y = vec![0.0f32; m * k];
        chain::run(&x, &w, &v, &mut y, m, n, k).unwrap();
        let first = y.clone();
        // Warm: every thread that took a task has its pool. A worker that
        // took none so far (the caller may finish every task before it
        // wakes) fills its pool the first time it takes one.
        let mut quiet = 0;
        for _ in 0..200 {
            let before = allocations_everywhere();
            chain::run(&x, &w, &v, &mut y, m, n, k).unwrap();
            quiet = if allocations_everywhere() == before { quiet + 1 } else { 0 };
            if quiet == 5 {
                break;
            }
        }
        assert_eq!(quiet, 5, "{m}×{n}×{k}: calls kept allocating");
        let before = allocations_everywhere();
        for _ in 0..3 {
            chain::run(&x, &w, &v, &mut y, m, n, k).unwrap();
        }
        assert_eq!(allocations_everywhere() - before, 0, "{m}×{n}×{k}: allocations in three warm calls");
        assert_eq!(y, first, "the same result from reused memory");
        for row in y.chunks(k) {
            let s: f32 = row.iter().sum();
            assert!((s - 1.0).abs() < 1e-5, "a softmax row sums to {s}");
        }
    }
}

//! `tgc::kernel!` with feature `sm80` embeds the GEMM's sm_80 cubin and PTX,
//! compiled by NVRTC while this test crate was built (no GPU; nothing is
//! launched). Run by `scripts/test.sh` as
//! `cargo test -p tgc --features sm80 --test sm80_kernel`.
#![cfg(feature = "sm80")]

tgc::kernel!(gemm:
    graph<M, N=128, K=64> gemm(x: f16[M, K], w: f16[K, N], bias: f16[N]) -> (y: f16[M, N]) {
        y = relu(matmul(x, w) + bias)
        return y
    },
    shapes(M = 200)
);

tgc::kernel!(scale:
    graph<N=4> main(x: f32[N]) -> (y: f32[N]) {
        y = x * 2.0
        return y
    }
);

#[test]
fn the_gemm_module_holds_its_cubin_and_ptx() {
    assert_eq!(&gemm::sm80::CUBIN[..4], b"\x7fELF");
    assert_eq!(gemm::sm80::SYMBOL, "tgc_gemm");
    assert!(gemm::sm80::PTX.contains(".target sm_80"));
    assert!(gemm::sm80::PTX.contains(".entry tgc_gemm("));
    assert!(gemm::sm80::PTX.contains("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"));
    // The plan the cost model picks for 200×128×64: warps of 32 threads,
    // the operand ring in dynamic shared memory.
    let (threads, smem) = (gemm::sm80::THREADS, gemm::sm80::SMEM_BYTES);
    assert!(threads.is_multiple_of(32) && (4096..=98304).contains(&smem), "{threads} threads, {smem} bytes");
    assert!(gemm::sm80::PLAN_JSON.contains("\"relu\""));
    let m = &gemm::sm80::MODULE;
    assert_eq!((m.name, m.ptx.len()), ("tgc_gemm", gemm::sm80::PTX.len()));
    let cubin = tgc::cuda::pick_cubin(m.cubins, 86).expect("sm_80 code runs on sm_86");
    assert_eq!(cubin.image, gemm::sm80::CUBIN);
}

#[test]
fn a_graph_without_a_gemm_says_why() {
    assert!(scale::SM80_SKIPPED.contains("no GEMM contraction"), "{}", scale::SM80_SKIPPED);
    let mut y = [0.0f32; 4];
    scale::run(&[1.0, 2.0, 3.0, 4.0], &mut y, 4).unwrap();
    assert_eq!(y, [2.0, 4.0, 6.0, 8.0]);
}

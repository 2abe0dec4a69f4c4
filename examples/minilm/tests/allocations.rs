//! `model_run` allocates nothing once warm (`000` §8), on any thread: the
//! encoder's weights are in its ConstPool, its temporaries in the arena
//! the generated entry point takes from the runtime's scratch blocks
//! (`tgc_runtime::scratch`, kept between calls), and its tiles run on the
//! runtime's pool (`tgc_runtime::pool`), which posts jobs without
//! allocating. Needs no model files: the weights are random, the values
//! are not checked here (`reference.rs` does that).
//!
//! The allocator of this test binary counts every thread's allocations,
//! the pool's workers' included; this file holds one test, so nothing else
//! runs beside it.

use tgc::model::{write_weight, WeightSpec};
use tgc_minilm::{encoder, BUCKETS, HIDDEN};

include!("../../../tests/support/counting_alloc.rs");

/// Deterministic values in [-0.05, 0.05).
fn values(seed: u64, n: usize) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.1
        })
        .collect()
}

#[test]
fn a_warm_model_run_allocates_nothing_on_any_thread() {
    // Two kernel threads: the caller and a worker of the pool.
    tgc::set_threads(2);
    let mut seed = 0;
    let model = encoder::Model::init(&mut |spec: &WeightSpec, dst: &mut [u8]| {
        seed += 1;
        write_weight(spec, dst, &values(seed, spec.elements().unwrap_or(0)))
    })
    .expect("random weights load");
    // The smallest bucket exactly (a specialised kernel), 2 × 24 (the
    // 8 × 32 bucket, padded by the module) and 9 × 4 (past every bucket's
    // batch: the generic kernel).
    for (b, s) in [BUCKETS[0], (2, 24), (9, 4)] {
        let tokens: Vec<i32> = (0..b * s).map(|i| (i * 7919 % 30522) as i32).collect();
        let mask = vec![1.0f32; b * s];
        let mut e = vec![0.0f32; b * HIDDEN];
        model.run(&tokens, &mask, &mut e, b, s).expect("warm-up run");
        let before = allocations_everywhere();
        for _ in 0..2 {
            model.run(&tokens, &mask, &mut e, b, s).expect("run");
        }
        let during = allocations_everywhere() - before;
        assert_eq!(during, 0, "{b}×{s}: {during} allocations in two warm runs");
        assert!(e.iter().all(|v| v.is_finite()), "{b}×{s}: the embeddings are finite");
    }
}

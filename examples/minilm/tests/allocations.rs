//! The encoder's memory: after a warm-up, a call allocates nothing (its
//! temporaries live in the runtime's scratch blocks, `tgc_runtime::scratch`,
//! placed by the arena of `tgc_core::cpu::arena`), and the arena is smaller
//! than the temporaries side by side. Needs no model: the weights are
//! random, the values are not checked here (`reference.rs` does that).
//!
//! The allocator of this test binary counts the allocations of each
//! thread; with one kernel thread (`tgc::set_threads(1)`) a call runs
//! wholly on the caller's, and the other test's allocations do not count.

use tgc_core::cpu::arena;
use tgc_core::pipeline::{load, Format};
use tgc_core::tiny::Graph;
use tgc_minilm::{encoder, BUCKETS, HIDDEN, LAYERS, MAX_POSITIONS};

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

/// The encoder's weights (random), in the order of its inputs after the
/// token ids and the mask.
fn weights() -> Vec<Vec<f32>> {
    let h = HIDDEN;
    let mut sizes = vec![30522 * h, MAX_POSITIONS * h, 2 * h, h, h];
    for per_layer in [h * h, h, h * h, h, h * h, h, h * h, h, h, h, 4 * h * h, 4 * h, 4 * h * h, h, h, h] {
        sizes.push(LAYERS * per_layer);
    }
    sizes.iter().enumerate().map(|(i, &n)| values(i as u64 + 1, n)).collect()
}

fn run(w: &[Vec<f32>], tokens: &[i32], mask: &[f32], e: &mut [f32], b: usize, s: usize) {
    encoder::run(
        tokens, mask, &w[0], &w[1], &w[2], &w[3], &w[4], &w[5], &w[6], &w[7], &w[8], &w[9], &w[10], &w[11], &w[12],
        &w[13], &w[14], &w[15], &w[16], &w[17], &w[18], &w[19], &w[20], e, b, s,
    )
    .expect("encoder");
}

/// The encoder graph at batch `b`, sequence `s`.
fn bound_graph(b: usize, s: usize) -> Graph {
    let src = include_str!("../graphs/minilm.tgc");
    let g = load(src, Format::Dsl, None).expect("minilm.tgc").graph;
    let dims = [("B".to_string(), b as i64), ("S".to_string(), s as i64)].into_iter().collect();
    g.bind(&dims).expect("bind")
}

#[test]
fn a_warm_encoder_allocates_nothing() {
    tgc::set_threads(1);
    let w = weights();
    // The smallest bucket (a specialised kernel) and a size no bucket has
    // (the generic kernel); the larger buckets take minutes in a debug build.
    for (b, s) in [BUCKETS[0], (2, 24)] {
        let tokens: Vec<i32> = (0..b * s).map(|i| (i * 7919 % 30522) as i32).collect();
        let mask = vec![1.0f32; b * s];
        let mut e = vec![0.0f32; b * HIDDEN];
        run(&w, &tokens, &mask, &mut e, b, s);
        let before = allocations();
        for _ in 0..2 {
            run(&w, &tokens, &mask, &mut e, b, s);
        }
        let during = allocations() - before;
        assert_eq!(during, 0, "{b}×{s}: {during} allocations in two warm calls");
        assert!(e.iter().all(|v| v.is_finite()), "{b}×{s}: the embeddings are finite");
    }
}

#[test]
fn the_arena_is_far_smaller_than_the_temporaries() {
    for (b, s) in BUCKETS {
        let program = tgc_core::cpu::lower(&bound_graph(b, s)).expect("lowers");
        let plan = arena::plan(&program);
        let none = |_: &str| None;
        let (shared, unshared) = (plan.bytes(&none).unwrap(), plan.unshared_bytes(&none).unwrap());
        let temps: usize = plan.slots.iter().map(Vec::len).sum();
        println!(
            "{b}×{s}: {temps} temporaries in {} arena slots, {:.2} MiB instead of {:.2} MiB",
            plan.slots.len(),
            shared as f64 / (1 << 20) as f64,
            unshared as f64 / (1 << 20) as f64
        );
        // Six layers of the same shapes: one layer's worth of slots.
        assert!(
            shared * 4 < unshared,
            "{b}×{s}: the arena ({shared} B) is not under a quarter of the sum ({unshared} B)"
        );
    }
}

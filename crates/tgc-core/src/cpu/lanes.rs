//! Split accumulators for the CPU back end's plain reductions (a softmax's
//! row maximum and row sum, a layernorm's mean and variance, a pooling):
//! [`LANES`] partial accumulators instead of one, so that consecutive
//! updates do not wait on each other (one `addss` or `maxss` chain is bound
//! by the operation's latency, 3–4 cycles on current x86-64 cores; several
//! independent vector chains are bound by its throughput, and the C
//! compiler's vectoriser packs the lanes into vector registers).
//!
//! The order of a split reduction is fixed by this rule alone, whatever
//! the printer or the strips (so a tiled kernel still gives the untiled
//! kernel's bits, [`super::loop_ir`]'s invariant for schedules): value
//! number `j` of the innermost reduce loop goes to lane `j mod LANES`, each
//! lane folds its values in the nest's order (outer reduce loops first),
//! and the lanes are folded in halves ([`fold_steps`]): for `h = LANES/2,
//! …, 2, 1`, lane `a` takes `a ∘ (a + h)` for every `a < h` (for eight
//! lanes, `((l0 ∘ l4) ∘ (l2 ∘ l6)) ∘ ((l1 ∘ l5) ∘ (l3 ∘ l7))`). Both printers
//! print each step as a loop of `h` independent updates over contiguous
//! lanes, which the vectoriser packs (the earlier pairwise order, `a ∘ (a +
//! s)` for `a` a multiple of `2s`, strided the lanes and stayed scalar;
//! `bash scripts/bench_cpu.sh 9 --threads 1,2 --only softmax` went from
//! 8.74 to 7.71 ms with one thread and from 4.68 to 4.11 ms with two, on
//! a 2-core AMD EPYC, a noisy machine). For `MAX`, `MIN` and
//! integer `SUM` that is the sequential
//! result; a float `SUM` differs from it by rounding only (as the GPU's warp
//! reductions do, `crate::gpu::simt`).
//!
//! A kernel of the packed template's form ([`super::packed::is_contraction`])
//! is never split: its schedule, packed or strip-mined, keeps the nest's
//! `k` order. (A matrix–vector product, whose vector owns no output loop,
//! is not of that form and is split.)

use super::loop_ir::Program;
use super::packed;

/// Partial accumulators of a split reduction, and the chunk of an
/// element-wise kernel's innermost loop: two 16-wide AVX-512 vectors, four
/// 8-wide AVX vectors. With eight, an AVX-512 clone had one vector chain
/// per reduction and vectorised element-wise chunks at half its width.
/// Measured on a Xeon with AVX-512, one thread, on the row
/// kernel `bench_cpu`'s softmax (4096×1024) generates, called alone (best
/// of 15): 9.9 ms with the AVX2 clone and 8 lanes, 8.8 with an AVX-512
/// clone, 6.8 with that clone and 32 lanes (`emit::c`'s `TGC_CLONES`);
/// `bench_cpu --only softmax` itself went from 10.96 to 6.42 ms.
pub const LANES: usize = 32;

/// The steps of the halving fold of `lanes` accumulators (a power of
/// two), widest first: `lanes/2, …, 2, 1` (empty for one lane).
pub fn fold_steps(lanes: usize) -> impl Iterator<Item = usize> {
    debug_assert!(lanes.is_power_of_two(), "{lanes} lanes");
    std::iter::successors((lanes > 1).then_some(lanes / 2), |&h| (h > 1).then_some(h / 2))
}

/// Sets [`Kernel::lanes`](super::loop_ir::Kernel::lanes) of every kernel of `p`: [`LANES`] for a
/// reduction that is not a contraction and computes nothing at its reads
/// (a re-run reduction is printed inside the update), else 1.
pub fn plan(p: &mut Program) {
    for k in &mut p.kernels {
        let split = k.reduce.as_ref().is_some_and(|r| !r.loops.is_empty())
            && k.computed_at().is_empty()
            && !packed::is_contraction(k);
        k.lanes = if split { LANES } else { 1 };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::lower;
    use crate::pipeline::{load, Format};

    #[test]
    fn the_fold_halves_the_lanes_down_to_one() {
        assert_eq!(fold_steps(LANES).collect::<Vec<_>>(), [16, 8, 4, 2, 1]);
        assert_eq!(fold_steps(8).collect::<Vec<_>>(), [4, 2, 1]);
        assert_eq!(fold_steps(1).count(), 0);
    }

    #[test]
    fn row_reductions_are_split_and_contractions_are_not() {
        let g = load(
            "graph<M=5, N=7, K=3> main(x: f32[M, K], w: f32[K, N]) -> (y: f32[M, N], s: f32[M], m: f32[K]) {
                y = matmul(x, w)
                s = sum(x, axes=[1])
                m = max(x, axes=[0])
                return y, s, m
            }",
            Format::Dsl,
            None,
        )
        .unwrap_or_else(|e| panic!("{e:?}"))
        .graph;
        let p = lower(&g).unwrap();
        for k in &p.kernels {
            let want = match (&k.reduce, packed::is_contraction(k)) {
                (Some(_), false) => LANES,
                _ => 1,
            };
            assert_eq!(k.lanes, want, "{}", k.name);
        }
        assert!(p.kernels.iter().any(|k| k.lanes == LANES));
        assert!(p.kernels.iter().any(|k| k.packed.is_some() && k.lanes == 1));
    }
}

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

use crate::sym::Dim;

use super::loop_ir::{Kernel, Program};
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

/// Sets [`Kernel::lanes`] of every kernel of `p`: for a
/// reduction that is not a contraction and computes nothing at its reads
/// (a re-run reduction is printed inside the update), [`lanes_for`] its
/// innermost reduce loop; else 1.
/// A window kernel ([`is_window`]) gets one lane: its printers compute
/// several output points side by side instead.
pub fn plan(p: &mut Program) {
    for k in &mut p.kernels {
        let innermost = k.reduce.as_ref().and_then(|r| r.loops.last());
        k.lanes = match innermost {
            Some(n) if reduces_plainly(k) && !small_window(k) => lanes_for(n),
            _ => 1,
        };
    }
}

/// The most points a window of [`is_window`] has.
pub const MAX_WINDOW: i64 = 64;

/// Whether `k` reduces over a small window of constant size (a pooling's
/// 3 × 3, a 7 × 7 global pool): a reduction that is not a contraction and
/// computes nothing at its reads, with an output loop, whose reduce loops
/// are constants of at most [`MAX_WINDOW`] points together. Its values are
/// too few to split; the C printer instead computes
/// eight consecutive points (`emit::c`'s window groups) of its innermost output loop
/// together, window point by window point, each output's values still
/// folded in the nest's order (so the bits are the plain nest's), as
/// independent chains the CPU overlaps.
pub fn is_window(k: &Kernel) -> bool {
    small_window(k) && reduces_plainly(k)
}

/// A reduction with reduce loops that is not a contraction and computes
/// nothing at its reads: the kind [`plan`] splits.
fn reduces_plainly(k: &Kernel) -> bool {
    k.reduce.as_ref().is_some_and(|r| !r.loops.is_empty()) && k.computed_at().is_empty() && !packed::is_contraction(k)
}

/// [`is_window`]'s shape: an output loop, and reduce loops of constant
/// extents with at most [`MAX_WINDOW`] points together.
fn small_window(k: &Kernel) -> bool {
    let Some(r) = &k.reduce else { return false };
    let points = r.loops.iter().try_fold(1i64, |n, d| d.as_int().map(|e| n.saturating_mul(e)));
    !k.loops.is_empty() && points.is_some_and(|n| n <= MAX_WINDOW)
}

/// The accumulators of a split reduction whose innermost reduce loop runs
/// `extent` times: [`LANES`], or for a loop known to run fewer times (a
/// pooling window's row, a short softmax row) the largest power of two not
/// above its extent — more lanes than values would only add identities
/// to fold (a 3 × 3 max pool with 32 lanes spent 32 stores and 31
/// maxima on its 9 values).
pub fn lanes_for(extent: &Dim) -> usize {
    match extent.as_int() {
        Some(n) if n < LANES as i64 => 1 << (n.max(1).ilog2()),
        _ => LANES,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::lower;
    use crate::pipeline::{load, Format};
    use crate::tiny::ReduceOp;

    #[test]
    fn the_fold_halves_the_lanes_down_to_one() {
        assert_eq!(fold_steps(LANES).collect::<Vec<_>>(), [16, 8, 4, 2, 1]);
        assert_eq!(fold_steps(8).collect::<Vec<_>>(), [4, 2, 1]);
        assert_eq!(fold_steps(1).count(), 0);
    }

    #[test]
    fn a_short_reduce_loop_gets_no_more_lanes_than_values() {
        assert_eq!([1, 2, 3, 7, 8, 31].map(|n| lanes_for(&Dim::int(n))), [1, 2, 2, 4, 8, 16]);
        assert_eq!(lanes_for(&Dim::int(32)), LANES);
        assert_eq!(lanes_for(&Dim::int(4096)), LANES);
        assert_eq!(lanes_for(&Dim::sym("N")), LANES);
    }

    #[test]
    fn row_reductions_are_split_and_contractions_are_not() {
        // `s` sums rows of 72 values; `m` takes the maximum of a window of 5.
        let g = load(
            "graph main(x: f32[5, 72], w: f32[72, 7]) -> (y: f32[5, 7], s: f32[5], m: f32[72]) {
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
        let mut lanes: Vec<(bool, Option<ReduceOp>, usize)> =
            p.kernels.iter().map(|k| (k.packed.is_some(), k.reduce.as_ref().map(|r| r.op), k.lanes)).collect();
        lanes.sort_by_key(|l| l.2);
        assert_eq!(
            lanes,
            [(true, Some(ReduceOp::Sum), 1), (false, Some(ReduceOp::Max), 1), (false, Some(ReduceOp::Sum), LANES)]
        );
        let windows: Vec<bool> = p.kernels.iter().map(is_window).collect();
        assert_eq!(windows.iter().filter(|w| **w).count(), 1, "the max over 5 alone: {windows:?}");
    }
}

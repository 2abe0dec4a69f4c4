//! The list of templates ([`TEMPLATES`]: one row per template, pattern,
//! `algo_choice` and architecture) and the ranking of those that take a
//! whole graph ([`lower`], [`candidates`], [`best`]).

use crate::diag::{DResult, Diagnostic};
use crate::gpu::attention::kernel::Algorithm;
use crate::gpu::dialect::Arch;
use crate::gpu::program::GpuProgram;
use crate::gpu::template::{pattern_of, GraphPattern, Lowered, Template};
use crate::gpu::{attention, mma, winograd};
use crate::plan::cost::Estimator;
use crate::plan::{AlgoChoice, ConvAlgo, Target};
use crate::tiny::Graph;

/// Every template, in the order [`lower`] tries them.
pub const TEMPLATES: &[Template] = &[
    Template {
        name: "sm80 GEMM (plain or implicit)",
        pattern: GraphPattern::Contraction,
        algo_choice: AlgoChoice::Conv(ConvAlgo::ImplicitGemm),
        arch: Arch::Sm80,
        fallback: false,
        lower: mma::lower::gemm,
    },
    Template {
        name: "sm90 GEMM (TMA + wgmma)",
        pattern: GraphPattern::Contraction,
        algo_choice: AlgoChoice::Conv(ConvAlgo::ImplicitGemm),
        arch: Arch::Sm90,
        fallback: false,
        lower: mma::lower::gemm,
    },
    Template {
        name: "sm80 Winograd F(2×2, 3×3) convolution",
        pattern: GraphPattern::Contraction,
        algo_choice: winograd::ALGO,
        arch: Arch::Sm80,
        fallback: false,
        lower: winograd::lower,
    },
    Template {
        name: "sm90 Winograd F(2×2, 3×3) convolution",
        pattern: GraphPattern::Contraction,
        algo_choice: winograd::ALGO,
        arch: Arch::Sm90,
        fallback: false,
        lower: winograd::lower,
    },
    Template {
        name: "sm80 attention (FlashAttention-2)",
        pattern: GraphPattern::Attention,
        algo_choice: AlgoChoice::Attention(Algorithm::OnlineSoftmax),
        arch: Arch::Sm80,
        fallback: false,
        lower: |g, t, e| attention::lower(g, t, e, Algorithm::OnlineSoftmax),
    },
    Template {
        name: "sm80 attention (two-pass softmax)",
        pattern: GraphPattern::Attention,
        algo_choice: AlgoChoice::Attention(Algorithm::StreamingSoftmax2Pass),
        arch: Arch::Sm80,
        fallback: false,
        lower: |g, t, e| attention::lower(g, t, e, Algorithm::StreamingSoftmax2Pass),
    },
    Template {
        name: "sm90 attention (FlashAttention-2 on wgmma)",
        pattern: GraphPattern::Attention,
        algo_choice: AlgoChoice::Attention(Algorithm::OnlineSoftmax),
        arch: Arch::Sm90,
        fallback: false,
        lower: |g, t, e| attention::lower(g, t, e, Algorithm::OnlineSoftmax),
    },
    Template {
        name: "sm90 attention (two-pass softmax on wgmma)",
        pattern: GraphPattern::Attention,
        algo_choice: AlgoChoice::Attention(Algorithm::StreamingSoftmax2Pass),
        arch: Arch::Sm90,
        fallback: false,
        lower: |g, t, e| attention::lower(g, t, e, Algorithm::StreamingSoftmax2Pass),
    },
    // sm90 runs the sm80 templates' mma.sync kernels where its wgmma
    // branches refuse the graph (an attention whose head or value dimension
    // is not a multiple of 64), planned and estimated on the sm80 row: an
    // sm_80 kernel compiles for sm_90a unchanged.
    Template {
        name: "sm80 GEMM (mma.sync) on sm90",
        pattern: GraphPattern::Contraction,
        algo_choice: AlgoChoice::Conv(ConvAlgo::ImplicitGemm),
        arch: Arch::Sm90,
        fallback: true,
        lower: |g, _, e| mma::lower::gemm(g, &crate::plan::target::SM80, e),
    },
    Template {
        name: "sm80 attention (FlashAttention-2) on sm90",
        pattern: GraphPattern::Attention,
        algo_choice: AlgoChoice::Attention(Algorithm::OnlineSoftmax),
        arch: Arch::Sm90,
        fallback: true,
        lower: |g, _, e| attention::lower(g, &crate::plan::target::SM80, e, Algorithm::OnlineSoftmax),
    },
    Template {
        name: "sm80 attention (two-pass softmax) on sm90",
        pattern: GraphPattern::Attention,
        algo_choice: AlgoChoice::Attention(Algorithm::StreamingSoftmax2Pass),
        arch: Arch::Sm90,
        fallback: true,
        lower: |g, _, e| attention::lower(g, &crate::plan::target::SM80, e, Algorithm::StreamingSoftmax2Pass),
    },
];

/// The program of the template of `g`'s pattern for `target`'s
/// architecture that takes it with the least estimated time (the earlier
/// in [`TEMPLATES`] on a tie; the fallback templates only when no other
/// takes it); `Some(Err)` with the first refusal when none does; `None`
/// when no template has `g`'s pattern.
pub fn lower(g: &Graph, target: &Target, estimator: &dyn Estimator) -> Option<DResult<GpuProgram>> {
    let mut refusal: Option<Diagnostic> = None;
    for fallback in [false, true] {
        let mut tried = candidates(g, target, estimator, fallback)?;
        if let Some(i) = best(&tried) {
            return tried.swap_remove(i).1.ok().map(|l| Ok(l.program));
        }
        for (_, r) in tried {
            if let Err(d) = r {
                refusal.get_or_insert(d);
            }
        }
    }
    refusal.map(Err)
}

/// Each template of `g`'s pattern and `target`'s architecture (the
/// fallback ones when `fallback`, else the others), in [`TEMPLATES`]
/// order, with its program and estimate or its refusal: what [`lower`]
/// ranks, and the `plan` dump prints. `None` when no template has `g`'s
/// pattern or the target has no templates.
pub fn candidates(
    g: &Graph,
    target: &Target,
    estimator: &dyn Estimator,
    fallback: bool,
) -> Option<Vec<(&'static Template, DResult<Lowered>)>> {
    let pattern = pattern_of(g)?;
    let arch = Arch::parse(target.name)?;
    let chosen = TEMPLATES.iter().filter(|t| t.pattern == pattern && t.arch == arch && t.fallback == fallback);
    Some(chosen.map(|t| (t, (t.lower)(g, target, estimator))).collect())
}

/// The index of the lowered candidate with the least estimate (the
/// earlier on a tie), if any lowered.
pub fn best(candidates: &[(&'static Template, DResult<Lowered>)]) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (i, (_, r)) in candidates.iter().enumerate() {
        if let Ok(l) = r {
            if best.is_none_or(|(_, t)| l.estimate.time_s < t) {
                best = Some((i, l.estimate.time_s));
            }
        }
    }
    best.map(|b| b.0)
}

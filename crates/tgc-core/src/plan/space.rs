//! The plan search space of `000` §6 (MVP): `tile(3–4) × stages{2,3} ×
//! warp_tile{2} × vec{4,8,16}` for a GEMM, as [`Plan`]s shaped like §1.7's
//! example. What ranks them is an [`super::cost::Estimator`]; this module
//! only enumerates and checks.
//!
//! Every candidate is checked with [`validate`] and against the §5
//! resources [`validate`] does not check (registers per thread within the
//! target's limit, at least one CTA per SM); a candidate that fails is kept
//! in [`Space::rejected`] with its reasons, not silently dropped.

use super::resources;
use super::*;

/// The block tiles `[BM, BN, BK]` of the space: §7.1's SM80 example
/// `[128, 64, 64]`, `001` §5.2's `[64, 64, 32]`, and the two larger tiles
/// `[128, 128, 32]` and `[256, 128, 32]` (BK = 32 keeps three stages of
/// them within the per-block shared memory of both targets).
pub const TILES: [[u64; 3]; 4] = [[64, 64, 32], [128, 64, 64], [128, 128, 32], [256, 128, 32]];

/// `stages ∈ {2, 3}` (§1.7, §6).
pub const STAGES: [u64; 2] = [2, 3];

/// `warp_tile ∈ {64x64, 64x32}` (§1.7, §6).
pub const WARP_TILES: [[u64; 2]; 2] = [[64, 64], [64, 32]];

/// `vectorize` widths `{4, 8, 16}` (§5, §6), in elements.
pub const VECTOR_WIDTHS: [u64; 3] = [4, 8, 16];

/// The block tiles of the `wgmma` space (sm90): the two `docs/design/sm90_gemm.md`
/// measured on an H200, `128 × 128` and `128 × 256` with `BK = 64` (one
/// 128-byte swizzle row of 16-bit elements), and their one-warpgroup
/// halves `64 × 128` and `64 × 256` (one consumer warpgroup when
/// specialised; less padding when `M` is small); the warp tile is the
/// warpgroup's `64 × BN`.
pub const WGMMA_TILES: [[u64; 3]; 4] = [[64, 128, 64], [64, 256, 64], [128, 128, 64], [128, 256, 64]];

/// `stages ∈ {3, 4, 5}` of the `wgmma` space (sm90).
pub const WGMMA_STAGES: [u64; 3] = [3, 4, 5];

/// The enumerated space for one problem and target.
#[derive(Clone, Debug, Default)]
pub struct Space {
    /// Plans that pass every check, in enumeration order.
    pub valid: Vec<Plan>,
    /// Plans that fail, each with its reasons.
    pub rejected: Vec<(Plan, Vec<String>)>,
}

/// One GEMM plan in §1.7's shape: `tile`, `warp_tile`, the four binds,
/// `pipeline k.i stages=S`, A and B cached in shared memory at `k.i`,
/// `vectorize n.i.i W`, a predicated tail on every axis, `algo_choice
/// matmul implicit_gemm` and swizzled operand layouts.
pub fn gemm_plan(target: &Target, tile: [u64; 3], warp_tile: [u64; 2], stages: u64, vec: u64) -> Plan {
    let ax = |s: &str| Spanned::new(s.to_string());
    let bind = |a: &str, t| Spanned::new(Bind { axis: ax(a), target: Spanned::new(t) });
    let cache = |t: &str| Spanned::new(CacheRead { tensor: ax(t), at: ax("k.i"), pingpong: Some(true) });
    let hint = |k: &str, v| Spanned::new(LayoutHint { key: k.to_string(), value: v });
    Plan {
        arch: Some(ax(target.name)),
        tile: Some(Spanned::new(tile)),
        warp_tile: Some(Spanned::new(warp_tile)),
        loops: Vec::new(),
        bind: vec![
            bind("m.o", BindTarget::BlockY),
            bind("n.o", BindTarget::BlockX),
            bind("m.i.o", BindTarget::WarpY),
            bind("n.i.o", BindTarget::WarpX),
        ],
        pipeline: Some(Spanned::new(Pipeline { axis: Some(ax("k.i")), stages: Spanned::new(stages) })),
        cache: vec![cache("A"), cache("B")],
        vectorize: Some(Spanned::new(Vectorize { axis: ax("n.i.i"), width: Spanned::new(vec) })),
        predicate_tail: vec![ax("m.i.i"), ax("n.i.i"), ax("k.i.i")],
        epilogue: Vec::new(),
        algo_choice: vec![Spanned::new(AlgoChoice::Matmul(MatmulAlgo::ImplicitGemm))],
        layout_hints: vec![
            hint("A_swizzle", HintValue::Bool(true)),
            hint("B_swizzle", HintValue::Bool(true)),
            hint("C_stride", HintValue::Word("row".into())),
        ],
        local_edges: Vec::new(),
        warp_specialize: None,
    }
}

/// Why `plan` cannot run on `target` for `problem`: [`validate`]'s
/// diagnostics, then the §5 register and CTA checks. Empty: it can.
pub fn check(plan: &Plan, target: &Target, problem: &Problem) -> Vec<String> {
    let mut why: Vec<String> = validate(plan, target, problem).into_iter().map(|d| d.message).collect();
    if !why.is_empty() {
        return why;
    }
    match resources::of(plan, problem.dtype, target) {
        None => why.push("the plan has no block tile or no warp_tile".into()),
        Some(r) => {
            let (most, whose) = if plan.warp_specialize.is_some() {
                let consumers = r.threads_per_cta - resources::PRODUCER_THREADS;
                (resources::specialized_regs(consumers, target)[1], "the consumers' setmaxnreg budget of")
            } else {
                (target.regs_per_thread_max, "")
            };
            if r.regs_per_thread > most {
                why.push(format!(
                    "about {} registers per thread (000 §5) exceed {}'s {whose} {most}",
                    r.regs_per_thread, target.name
                ));
            }
            if r.ctas_per_sm == 0 {
                why.push(format!("no CTA fits on one SM ({} limits it)", r.cta_limit.as_str()));
            }
        }
    }
    why
}

/// The forms of a `wgmma` plan, in the space's order: not specialised,
/// `warp_specialize`, `warp_specialize persistent`, then both with
/// `cluster=2` (`(persistent, cluster)`).
pub const WGMMA_FORMS: [Option<(bool, u32)>; 5] =
    [None, Some((false, 1)), Some((true, 1)), Some((false, 2)), Some((true, 2))];

/// Whether the space offers `warp_specialize … cluster=2` for `problem`
/// with a block tile of `bm` rows: a GEMM of known extents with at least
/// two tiles along M (a pair of CTAs shares a B tile), and not an
/// implicit GEMM as far as [`Problem::distinct`] tells (a convolution's
/// `A` re-reads its elements, so it has fewer than `M·K`; the TMA copies
/// the form needs do not take an implicit GEMM). `distinct` cannot tell
/// an implicit GEMM that reads each element once (a 1×1 convolution):
/// the template refuses that one.
pub fn offers_cluster(problem: &Problem, bm: u64) -> bool {
    let Ok([m, n, k]) = super::cost::gemm_dims(problem) else { return false };
    m.div_ceil(bm.max(1)) >= 2 && problem.distinct == [m * k, k * n]
}

/// Enumerates the §6 space for `problem` on `target` in a fixed order
/// (tile, warp tile, stages, vector width) and checks each plan: the
/// `mma.sync` space above, or on a target whose template issues `wgmma`
/// ([`Target::template_shape`]) [`WGMMA_TILES`] × [`WGMMA_STAGES`] ×
/// [`WGMMA_FORMS`] (not specialised, `warp_specialize`, `warp_specialize
/// persistent`, and those two with `cluster=2` where [`offers_cluster`]),
/// with the warpgroup tile `64 × BN` and 8-element (16-byte) vectors.
pub fn candidates(problem: &Problem, target: &Target) -> Space {
    let mut plans = Vec::new();
    if target.issues_wgmma(problem.dtype) {
        for tile in WGMMA_TILES {
            for stages in WGMMA_STAGES {
                for form in WGMMA_FORMS {
                    if form.is_some_and(|(_, cluster)| cluster != 1) && !offers_cluster(problem, tile[0]) {
                        continue;
                    }
                    let mut plan = gemm_plan(target, tile, [64, tile[1]], stages, 8);
                    plan.warp_specialize =
                        form.map(|(persistent, cluster)| Spanned::new(Specialize { persistent, cluster }));
                    plans.push(plan);
                }
            }
        }
    } else {
        for tile in TILES {
            for warp_tile in WARP_TILES {
                for stages in STAGES {
                    for vec in VECTOR_WIDTHS {
                        plans.push(gemm_plan(target, tile, warp_tile, stages, vec));
                    }
                }
            }
        }
    }
    let mut space = Space::default();
    for plan in plans {
        let why = check(&plan, target, problem);
        if why.is_empty() {
            space.valid.push(plan);
        } else {
            space.rejected.push((plan, why));
        }
    }
    space
}

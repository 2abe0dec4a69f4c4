//! The resource formulas of `000` §5: what one CTA of the MMA template uses
//! (shared memory, registers, threads) and how many CTAs fit on one SM.
//!
//! These are estimates from the plan's parameters, not what a compiler
//! allocates: `ptxas` decides the real register count. Every hardware
//! number comes from the [`Target`] row.

use crate::DType;

use super::{LoopStep, Plan, Target};

/// Registers per thread the model counts besides the accumulator and
/// operand fragments: addresses, loop counters, predicates. §5 writes
/// `base` without a value; 32 is this model's assumption, not a spec or
/// hardware number.
pub const BASE_REGS: u64 = 32;

/// Threads of a warp-specialised CTA's producer role (`warp_specialize`):
/// one warpgroup issuing the TMA copies.
pub const PRODUCER_THREADS: u64 = 128;

/// Registers per thread `setmaxnreg` leaves the producer warpgroup: 40, as
/// CUTLASS 3's warp-specialised kernels and `docs/design/sm90_gemm.md`'s hand-written
/// kernel (measured on an H200) give it; it only issues copies.
pub const PRODUCER_REGS: u64 = 40;

/// Registers per thread of a warp-specialised CTA's roles as the template
/// sets them with `setmaxnreg`: `[producer, consumer]`, the producer's
/// [`PRODUCER_REGS`] and the consumers' share of the rest of the SM's
/// register file, rounded down to a multiple of 8 and at most 256 (PTX ISA
/// "setmaxnreg": counts 24 to 256 in steps of 8). One CTA per SM: it takes
/// the whole register file. 232 for two consumer warpgroups on a 64K-register SM.
pub fn specialized_regs(consumer_threads: u64, target: &Target) -> [u64; 2] {
    let rest = target.regs_per_sm.saturating_sub(PRODUCER_THREADS * PRODUCER_REGS);
    let share = (rest.checked_div(consumer_threads).unwrap_or(0) / 8 * 8).min(256);
    [PRODUCER_REGS, share]
}

/// What limits the CTAs per SM ([`ctas_per_sm`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CtaLimit {
    /// `SMEM_lim / smem_per_CTA`.
    Smem,
    /// `REG_lim / (regs_thr · thr_per_CTA)`.
    Regs,
    /// Warps per SM / warps per CTA.
    Threads,
    /// `BLK_lim`, the target's most CTAs per SM.
    Blocks,
}

impl CtaLimit {
    pub fn as_str(self) -> &'static str {
        match self {
            CtaLimit::Smem => "smem",
            CtaLimit::Regs => "regs",
            CtaLimit::Threads => "threads",
            CtaLimit::Blocks => "blocks",
        }
    }
}

/// The §5 resources of one plan on one target.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Resources {
    /// Shared memory per CTA in bytes ([`smem_per_cta`]).
    pub smem_per_cta: u64,
    /// Estimated 32-bit registers per thread ([`regs_per_thread`]).
    pub regs_per_thread: u64,
    /// Warps per CTA that compute ([`warps_per_cta`]).
    pub warps_per_cta: u64,
    /// Threads per CTA: the computing warps' and, with `warp_specialize`,
    /// the producer's [`PRODUCER_THREADS`].
    pub threads_per_cta: u64,
    /// CTAs resident on one SM (0: the CTA does not fit).
    pub ctas_per_sm: u64,
    /// The term that gave `ctas_per_sm`.
    pub cta_limit: CtaLimit,
    /// §5 `occ`, in `[0, 1]`.
    pub occupancy: f64,
}

/// `smem_per_CTA = (BM*BK + BK*BN) * sizeof(T) * stages` (`000` §5), in
/// bytes; the template keeps the epilogue in registers (§1.7: the epilogue
/// is applied to the accumulator fragments), so `epilogue_smem` is 0.
pub fn smem_per_cta(tile: [u64; 3], stages: u64, dtype: DType) -> u64 {
    let [bm, bn, bk] = tile;
    (bm * bk + bk * bn) * dtype.size_bytes() as u64 * stages
}

/// The threads that share one warp tile on `target` for `dtype`: a warp
/// for `mma.sync`, a warpgroup of four for `wgmma`
/// ([`super::target::MmaShape::threads`]); a warp when the target has no
/// shape for `dtype`.
pub fn group_threads(dtype: DType, target: &Target) -> u64 {
    target.template_shape(dtype).map_or(target.warp_size, |s| s.threads)
}

/// Warps per CTA: one warp (or warpgroup, [`group_threads`]) per warp
/// tile, `(BM/WM)·(BN/WN)·(group threads / warp size)` (§1.7's `m.i.o →
/// warp.y`, `n.i.o → warp.x`).
pub fn warps_per_cta(tile: [u64; 3], warp_tile: [u64; 2], dtype: DType, target: &Target) -> u64 {
    let groups = (tile[0] / warp_tile[0].max(1)) * (tile[1] / warp_tile[1].max(1));
    groups * (group_threads(dtype, target) / target.warp_size).max(1)
}

/// §5 `acc_regs(BM, BN, warp_tile)`: the warp tile's `WM×WN` f32
/// accumulator spread over the threads that share it ([`group_threads`]),
/// `WM·WN / threads` registers per thread (one f32 a register). The block
/// tile enters only through the warp count.
pub fn acc_regs(warp_tile: [u64; 2], dtype: DType, target: &Target) -> u64 {
    (warp_tile[0] * warp_tile[1]).div_ceil(group_threads(dtype, target))
}

/// Operand fragment registers per thread: one MMA `k` step of the warp's
/// A (`WM×k`) and B (`k×WN`) fragments in `dtype`, packed into 32-bit
/// registers and spread over the warp's lanes (the `ldmatrix` →
/// `mma.sync` operands of §5). 0 when the target's template shape reads
/// its operands from shared memory (`wgmma` with descriptors) or the
/// target has no shape for `dtype`.
pub fn operand_regs(warp_tile: [u64; 2], dtype: DType, target: &Target) -> u64 {
    match target.template_shape(dtype) {
        Some(mma) if mma.instr == "mma.sync" => {
            let bytes = (warp_tile[0] + warp_tile[1]) * mma.k * dtype.size_bytes() as u64;
            bytes.div_ceil(4 * target.warp_size)
        }
        _ => 0,
    }
}

/// `regs_per_thr ≈ base + acc_regs(BM,BN,warp_tile) + epilogue_regs`
/// (`000` §5) plus the operand fragments: [`BASE_REGS`] + [`acc_regs`] +
/// [`operand_regs`]. `epilogue_regs` is 0: the epilogue ops of §12.6 work
/// in place on the accumulator.
pub fn regs_per_thread(warp_tile: [u64; 2], dtype: DType, target: &Target) -> u64 {
    BASE_REGS + acc_regs(warp_tile, dtype, target) + operand_regs(warp_tile, dtype, target)
}

/// `cta_per_SM = min(SMEM_lim/smem_per_CTA, REG_lim/(regs_thr*thr_per_CTA),
/// BLK_lim)` (`000` §5), with the warp limit (`max_warps_per_sm /
/// warps_per_CTA`) as a fourth term; each quotient rounded down. Ties name
/// the first term in that order. The per-block reservation the CUDA driver
/// keeps from shared memory is not modelled.
pub fn ctas_per_sm(target: &Target, smem: u64, regs_per_thread: u64, warps: u64) -> (u64, CtaLimit) {
    let threads = warps * target.warp_size;
    let terms = [
        (target.smem_per_sm.checked_div(smem).unwrap_or(u64::MAX), CtaLimit::Smem),
        (target.regs_per_sm.checked_div(regs_per_thread * threads).unwrap_or(u64::MAX), CtaLimit::Regs),
        (target.max_warps_per_sm.checked_div(warps).unwrap_or(u64::MAX), CtaLimit::Threads),
        (target.max_blocks_per_sm, CtaLimit::Blocks),
    ];
    terms.into_iter().fold((u64::MAX, CtaLimit::Blocks), |best, t| if t.0 < best.0 { t } else { best })
}

/// `occ = min(1.0, cta_per_SM * warps_per_CTA / max_warps_SM)` (`000` §5).
pub fn occupancy(target: &Target, ctas_per_sm: u64, warps_per_cta: u64) -> f64 {
    (ctas_per_sm as f64 * warps_per_cta as f64 / target.max_warps_per_sm as f64).min(1.0)
}

/// The block tile `[BM, BN, BK]`: `tile`, else the `split` factors of `m`,
/// `n`, `k` (as [`super::validate`] reads it).
pub fn block_tile(plan: &Plan) -> Option<[u64; 3]> {
    if let Some(t) = &plan.tile {
        return Some(t.value);
    }
    let split = |root: &str| {
        plan.loops.iter().find_map(|s| match &s.value {
            LoopStep::Split { axis, factor } if axis.value == root => Some(factor.value),
            _ => None,
        })
    };
    Some([split("m")?, split("n")?, split("k")?])
}

/// The pipeline depth: `stages`, or 1 for a plan with no `pipeline` (a
/// synchronous plan holds one tile of A and B).
pub fn stages(plan: &Plan) -> u64 {
    plan.pipeline.as_ref().map_or(1, |p| p.value.stages.value)
}

/// All of §5 for `plan`. `None` when the plan has no block tile or no
/// `warp_tile` (the template needs both).
pub fn of(plan: &Plan, dtype: DType, target: &Target) -> Option<Resources> {
    let tile = block_tile(plan)?;
    let warp_tile = plan.warp_tile.as_ref()?.value;
    let smem_per_cta = smem_per_cta(tile, stages(plan), dtype);
    let regs_per_thread = regs_per_thread(warp_tile, dtype, target);
    let warps_per_cta = warps_per_cta(tile, warp_tile, dtype, target);
    let mut threads_per_cta = warps_per_cta * target.warp_size;
    let (ctas_per_sm, cta_limit) = if plan.warp_specialize.is_some() {
        // The producer warpgroup joins the CTA, whose roles share the whole
        // register file (`specialized_regs`).
        threads_per_cta += PRODUCER_THREADS;
        let warps = threads_per_cta / target.warp_size;
        ctas_per_sm(target, smem_per_cta, target.regs_per_sm / threads_per_cta, warps)
    } else {
        ctas_per_sm(target, smem_per_cta, regs_per_thread, warps_per_cta)
    };
    Some(Resources {
        smem_per_cta,
        regs_per_thread,
        warps_per_cta,
        threads_per_cta,
        ctas_per_sm,
        cta_limit,
        occupancy: occupancy(target, ctas_per_sm, warps_per_cta),
    })
}

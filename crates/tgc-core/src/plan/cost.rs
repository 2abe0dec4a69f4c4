//! The analytic cost model of `000` §6 and plan choice over the space of
//! [`super::space`].
//!
//! [`Estimator`] is the seam between the space and what ranks it: the
//! [`Analytic`] model here, measured tuning (§6 "実測") or a pinned plan
//! (`bench_gpu --plans`) elsewhere. Its numbers are estimates from the
//! formulas below, never measurements.
//!
//! §6's base formula, `time = max(FLOPs / peak_TF, Bytes / peak_BW)`, is
//! kept as a roofline, but over the resources a CTA of the MMA template
//! actually queues on, one SM at a time, wave by wave. For a GEMM
//! `M×N×K` of element size `e` with block tile `[BM, BN, BK]`, warp tile
//! `[WM, WN]`, `stages` and `c` CTAs per SM (§5, [`super::resources`]):
//!
//! - **Per tile** (the padded `Kp = ⌈K/BK⌉·BK`, since predicated tails
//!   still issue their MMAs): `F = 2·BM·BN·Kp` FLOPs; `G = (BM+BN)·Kp·e`
//!   bytes from L2 into shared memory (`cp.async`); `R = Kp·e·BM·BN·(1/WM +
//!   1/WN)` bytes read back by `ldmatrix` (each warp reads its `WM` rows
//!   of A and `WN` columns of B); shared-memory traffic `G + R`, plus `G`
//!   again when a copy is narrower than 16 bytes, because `cp.async.cg`
//!   takes only 16 and the narrower `.ca` copies pass through L1, which
//!   shares its data path with shared memory (PTX ISA, `cp.async`; A100
//!   whitepaper, "combined L1 data cache and shared memory").
//! - **Waves**: `tiles = ⌈M/BM⌉·⌈N/BN⌉` (`⌈M/BM⌉` even with `cluster=2`,
//!   below) run `slots = SMs·c` at a time,
//!   `⌈tiles/slots⌉` waves; in a wave of `n` tiles an SM runs
//!   `cw = ⌈n/SMs⌉` of them, so a partial last wave costs as much per SM as
//!   a full one of `cw` (wave quantisation).
//! - **Per SM and wave**, five times; the wave takes the largest:
//!   - tensor: `cw·F / (peak/SMs · min(1, cw·warps/8))`: the four tensor
//!     cores of an SM are one per scheduler (A100 whitepaper), and this
//!     model takes two warps per scheduler to cover the `mma`/`ldmatrix`
//!     latencies ([`TENSOR_WARPS_PER_SM`], an assumption, see there);
//!   - shared memory: `cw·(G + R [+ G]) / (smem_bytes_per_clock·clock)`;
//!   - L2: `cw·G / (l2_bandwidth/SMs)` (less the multicast half of B
//!     with `cluster=2`, below);
//!   - latency (Little's law): `ahead` K-steps of `(BM+BN)·BK·e` bytes
//!     in flight per CTA over a `mem_latency_clocks` round trip deliver at
//!     most `ahead·(BM+BN)·BK·e / latency` per CTA, so `G` takes
//!     `G·latency / (ahead·(BM+BN)·BK·e)`. The prefetch depth `ahead` is
//!     `stages − 1` for `cp.async` + `mma.sync` (a stage is refilled once
//!     its k-tile's `ldmatrix`s are done), but `stages − 2` (at least 1)
//!     where the template issues `wgmma`: it waits with `wait_group 1`,
//!     so a stage is released only after the next k-tile's `wgmma`s are
//!     issued, one k-tile late ([`prefetch_depth`]);
//!   - DRAM: the wave's bytes over `dram_bandwidth`, where L2 serves the
//!     re-reads inside a wave: the launch order runs `n` fastest (`bind
//!     n.o block.x`), so a wave reads each A row panel (`BM×K`) of the
//!     rows it covers and each B column panel (`K×BN`) of the columns it
//!     covers once, and B only in the first wave when it fits in half the
//!     L2; plus its C tiles and residual tiles written/read once, and a
//!     `bias` once. This is the L2 reuse that tile rasterisation relies on
//!     (CUTLASS's threadblock swizzle; Triton's matmul tutorial, "L2 cache
//!     optimizations").
//! - `time = Σ waves max(terms)`; the reported [`Limit`] is the term that
//!   decided the most time.
//! - On a target whose template issues `wgmma`: a plan without
//!   `warp_specialize` has its tensor term raised by
//!   [`UNSPECIALIZED_WGMMA_LOSS`] (its computing warps also issue the
//!   copies and meet at a `bar.sync` every k-tile, which the specialised
//!   form leaves to a producer warpgroup; an estimate from measurements,
//!   see there); and each wave exposes one pipeline fill, a memory round
//!   trip (`mem_latency_clocks`) before its first `wgmma`, added to the
//!   time whichever term limits, except with `warp_specialize persistent`,
//!   whose producer fills the next tile's stages while the consumers
//!   finish this one: one fill in all (a first-principles estimate, not
//!   measured).
//! - **Clusters** (`warp_specialize [persistent] cluster=2`, sm90): the two
//!   CTAs of a cluster take M tiles `2p` and `2p+1` of one N tile, and
//!   each copies its A tile and half of the shared B tile from L2,
//!   multicast to both. So the L2 term's `G` is `(BM + BN/2)·Kp·e` per
//!   CTA instead of `(BM + BN)·Kp·e`, while the shared-memory term keeps
//!   `G` (the whole B tile still lands in each CTA) and so does the
//!   latency term (a CTA still waits for `(stages−1)·(BM+BN)·BK·e` bytes
//!   to land per round trip, its peer's half included, so its bound is
//!   unchanged). The tiles along M round up to even (`⌈M/BM⌉` odd: the
//!   last pair's second CTA computes on zero-filled A, loads its half of
//!   B for its peer and stores nothing: it costs a tile in every term but
//!   DRAM, where its C is not written), `slots` is rounded down to whole
//!   clusters, and a wave's DRAM bytes count the clusters launched `n`
//!   fastest (each A row panel of the pairs' rows and each B column panel
//!   once). Persistent, the grid is pairs of CTAs walking tile pairs: one
//!   fill, as above. Not counted: an SM whose cluster partner cannot be
//!   placed (clusters are placed within a GPC), the multicast's own cost,
//!   and the cluster barriers. A first-principles estimate, not measured
//!   on a GPU.
//! - Ties go to the wider vector (§4.2 counts narrowing it as a loss), then
//!   to more stages (a deeper pipeline: the latency term takes one mean
//!   round trip, and a deeper ring also hides its variation, which the
//!   model does not see), then to the earlier candidate.
//!
//! **Attention** (a plan with `algo_choice attention`, over
//! [`Problem::attention`]: `b` batch points of `M` queries, `N` keys, head
//! dimension `d`, value dimension `dv`): the fused template's CTA takes `BM`
//! query rows of one batch point (`tile = [BM, BN, d]`, one warp per
//! `warp_tile` of 16 rows) and loops over `Np = ⌈N/BN⌉·BN` keys, `p` times
//! over K (`p` = 1 for `online_softmax`, 2 for `streaming_softmax_2pass`,
//! whose first pass finds the row maxima). Per tile: `F = 2·BM·Np·(p·d +
//! dv)` tensor FLOPs; `X = BM·Np` `exp2`s of `P`, plus online softmax's
//! two corrections per thread and key block; `G = (BM·d + Np·(p·d + dv))·e`
//! bytes copied from L2. CTAs per SM: the shared memory `(BM·d + 2·BN·(d +
//! dv))·e`, the warp and the block limits (registers are not counted).
//! Waves as for a GEMM; per SM and wave the largest of tensor (as above),
//! special function units (`cw·X / (MUFU_PER_SM_CLOCK·clock)`), L2
//! (`cw·G / (l2_bandwidth/SMs)`) and DRAM (the wave's Q and O tiles, and K
//! and V once for each batch point it covers). Not counted: the key blocks
//! a causal mask lets the kernel skip, and the score ops' and rescaling's
//! FP32 work.
//!
//! The machine numbers come from the [`Target`] row; the model is
//! deliberately coarse (no bank conflicts, no instruction issue, no
//! epilogue cost) and meant for ranking: `bench_gpu --plans` prints its
//! ranking next to the measured one.

use crate::diag;
use crate::diag::DResult;

use super::resources::{self, Resources};
use super::space::{self, Space};
use super::{AlgoChoice, AlgoKey, AttentionAlgo, Epilogue, Plan, Problem, Spanned, Target};

/// Resident warps per SM at which the model lets the tensor cores run at
/// their peak: two per scheduler of the four. An assumption, not a
/// datasheet number: with one warp per scheduler each `ldmatrix` → `mma`
/// dependency and each barrier is exposed, and a scheduler hides latency
/// only by switching between eligible warps (CUDA C++ Best Practices
/// Guide, "Occupancy"). On an H100 plan sweep (`bench_gpu --plans`, 7
/// shapes; `docs/results.md`, "the GEMM plan sweep") 8 and 4 rank the plans
/// about equally well (the picks reach 97% and 96% of the best measured
/// plan on average); 8 is kept.
pub const TENSOR_WARPS_PER_SM: u64 = 8;

/// The fraction of tensor time a `wgmma` kernel without warp
/// specialisation loses to issuing its own copies and to a `bar.sync` per
/// k-tile: 5%, an estimate read off the H200 measurements (`docs/results.md`)
/// of the hand-written kernel of `docs/design/sm90_gemm.md` at 4096³ and
/// 8192³, where the midpoints of the specialised form's ranges are 3–8%
/// above the non-specialised one's.
/// Where the tensor term does not decide (the smaller shapes of that table,
/// where the two measured level), it changes nothing.
pub const UNSPECIALIZED_WGMMA_LOSS: f64 = 0.05;

/// The time a kernel launched right after another in the same stream
/// adds beyond its own run: about 1 µs (NVIDIA Technical Blog, "Getting
/// Started with CUDA Graphs", 2019: 3.8 µs per kernel for kernels that run
/// 2.9 µs, launched back to back without synchronising). A number from
/// that source, not measured here; what a program of several launches
/// (the Winograd transforms) pays per launch beyond the first.
pub const LAUNCH_GAP_S: f64 = 1e-6;

/// `exp2` results per clock of one SM's special function units
/// (`MUFU.EX2`) on compute capability 8.0 and 9.0: CUDA C++ Programming
/// Guide, "Arithmetic Instructions", the throughput table's row for
/// base-2 exponentials (16).
pub const MUFU_PER_SM_CLOCK: f64 = 16.0;

/// Which term of the estimate decided the most time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// The tensor cores (FLOPs).
    Compute,
    /// Shared-memory bandwidth (`cp.async` fills, `ldmatrix` reads).
    SharedMemory,
    /// The special function units (`exp2`).
    Sfu,
    /// L2 → SM bandwidth.
    L2,
    /// Too few bytes in flight to cover the memory latency.
    Latency,
    /// DRAM bandwidth.
    Dram,
    /// Not a model's term: a time measured on a GPU (`tgc tune --target`,
    /// [`crate::tune::gpu`]).
    Measured,
}

impl Limit {
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::Compute => "compute",
            Limit::SharedMemory => "smem",
            Limit::Sfu => "sfu",
            Limit::L2 => "l2",
            Limit::Latency => "latency",
            Limit::Dram => "dram",
            Limit::Measured => "measured",
        }
    }
}

/// An estimated run time. Estimators other than [`Analytic`] (measured
/// tuning) fill `time_s` and `limit` their own way.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    /// Estimated seconds for one run.
    pub time_s: f64,
    pub limit: Limit,
}

/// Ranks one plan. `Err` when the estimator cannot cost the plan.
pub trait Estimator {
    fn estimate(&self, plan: &Plan, problem: &Problem, target: &Target) -> DResult<Estimate>;
}

/// The analytic model of the module doc.
#[derive(Clone, Copy, Debug, Default)]
pub struct Analytic;

/// The terms of [`Analytic`]'s estimate, for tests and the dump. Each
/// `*_s` is that term summed over the waves (seconds); `time_s` sums each
/// wave's largest term, so it is at least every one of them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Terms {
    pub resources: Resources,
    /// The CTAs' tiles, `⌈M/BM⌉·⌈N/BN⌉`, with `⌈M/BM⌉` rounded up to a
    /// multiple of the CTAs per cluster (module doc, "Clusters").
    pub tiles: u64,
    /// `⌈tiles / slots⌉`, `slots` the `SMs·c` CTAs resident at once (a
    /// whole number of clusters).
    pub waves: u64,
    pub compute_s: f64,
    pub smem_s: f64,
    pub l2_s: f64,
    pub latency_s: f64,
    pub dram_s: f64,
    pub time_s: f64,
    pub limit: Limit,
}

/// `(M, N, K)` of a problem over axes `m`, `n`, `k` with known extents.
///
/// Errors: `Unsupported` otherwise.
pub fn gemm_dims(problem: &Problem) -> DResult<[u64; 3]> {
    let extent = |name: &str| problem.axes.iter().find(|a| a.name == name).and_then(|a| a.extent);
    match (extent("m"), extent("n"), extent("k")) {
        (Some(m), Some(n), Some(k)) => Ok([m, n, k]),
        _ => Err(diag!(Unsupported, "the cost model needs a GEMM with known extents of axes m, n and k")),
    }
}

impl Analytic {
    /// Every term of the estimate (module doc).
    ///
    /// Errors: `Unsupported` when the problem is not a GEMM with known
    /// extents, the plan has no block or warp tile, or no CTA fits on an SM.
    pub fn terms(&self, plan: &Plan, problem: &Problem, target: &Target) -> DResult<Terms> {
        let [m, n, k] = gemm_dims(problem)?;
        let res = resources::of(plan, problem.dtype, target)
            .ok_or_else(|| diag!(Unsupported, "the cost model needs a plan with a block tile and a warp_tile"))?;
        if res.ctas_per_sm == 0 {
            return Err(diag!(Unsupported, "no CTA of this plan fits on one SM of {}", target.name));
        }
        let [bm, bn, bk] = resources::block_tile(plan).unwrap_or([1, 1, 1]).map(|t| t.max(1));
        let [wm, wn] = plan.warp_tile.as_ref().map_or([1, 1], |w| w.value.map(|x| x.max(1)));
        let vec = plan.vectorize.as_ref().map_or(1, |v| v.value.width.value);
        let e = problem.dtype.size_bytes() as f64;
        // CTAs per cluster: a cluster is a column of tiles sharing a B
        // tile, so the tiles along M round up to whole clusters.
        let cluster = plan.warp_specialize.as_ref().map_or(1, |w| u64::from(w.value.cluster.max(1)));
        let m_tiles = m.div_ceil(bm);
        let (tm, tn) = (m_tiles.div_ceil(cluster) * cluster, n.div_ceil(bn));
        let kp = (k.div_ceil(bk) * bk) as f64;
        let (bmf, bnf, bkf) = (bm as f64, bn as f64, bk as f64);

        // Per tile (module doc).
        let flops = 2.0 * bmf * bnf * kp;
        // Bytes landing in the CTA's shared memory, and the part of them
        // it copies from L2 (its share of a multicast B).
        let fill = (bmf + bnf) * kp * e;
        let l2_fill = (bmf + bnf / cluster as f64) * kp * e;
        let ldmatrix = kp * e * bmf * bnf * (1.0 / wm as f64 + 1.0 / wn as f64);
        let through_l1 = if vec as f64 * e < 16.0 { fill } else { 0.0 };
        let smem_bytes = fill + ldmatrix + through_l1;
        let wgmma = target.issues_wgmma(problem.dtype);
        let in_flight = prefetch_depth(resources::stages(plan), wgmma) as f64 * (bmf + bnf) * bkf * e;

        // Per-SM rates.
        let sms = target.sm_count as f64;
        let clock = target.clock_mhz * 1e6;
        let tensor_rate = target.peak_tensor_tflops * 1e12 / sms;
        let smem_rate = target.smem_bytes_per_clock as f64 * clock;
        let l2_rate = target.l2_gbps * 1e9 / sms;
        let latency = target.mem_latency_clocks as f64 / clock;
        let dram_rate = target.dram_gbps * 1e9;

        let epilogue_tile: f64 = plan.epilogue.iter().filter(|op| op.value == Epilogue::Residual).count() as f64;
        let bias = plan.epilogue.iter().any(|op| op.value == Epilogue::Bias);
        let b_fits = (k * n) as f64 * e <= target.l2_bytes as f64 / 2.0;
        // An implicit GEMM's operands re-read their distinct elements
        // (`Problem::distinct`); DRAM sees each once per tile that reads it.
        let unique = |i: usize, dense: u64| (problem.distinct[i] as f64 / dense.max(1) as f64).min(1.0);
        let (a_unique, b_unique) = (unique(0, m * k), unique(1, k * n));
        let tiles = tm * tn;
        if tiles == 0 {
            return Err(diag!(Unsupported, "the cost model needs a GEMM with M and N of at least 1"));
        }
        let slots = target.sm_count * res.ctas_per_sm / cluster * cluster;
        if slots == 0 {
            return Err(diag!(Unsupported, "no cluster of {cluster} CTAs of this plan fits on {}", target.name));
        }
        let waves = tiles.div_ceil(slots);
        let issue_loss = if wgmma && plan.warp_specialize.is_none() { 1.0 + UNSPECIALIZED_WGMMA_LOSS } else { 1.0 };
        let persistent = plan.warp_specialize.as_ref().is_some_and(|w| w.value.persistent);

        // One wave of `count` tiles starting at tile index `start`: its
        // five terms.
        let wave = |start: u64, count: u64, first: bool| -> [f64; 5] {
            let cw = count.div_ceil(target.sm_count) as f64;
            let warps = cw * res.warps_per_cta as f64;
            let compute = cw * flops / (tensor_rate * (warps / TENSOR_WARPS_PER_SM as f64).min(1.0)) * issue_loss;
            let smem = cw * smem_bytes / smem_rate;
            let l2 = cw * l2_fill / l2_rate;
            // The wave's CTAs stream their fills side by side.
            let lat = fill * latency / in_flight;
            // Clusters (columns of `cluster` tiles) launch `n` fastest: the
            // wave's first and last cluster, the rows of tiles they cover
            // within M, and the columns.
            let (u0, u1) = (start / cluster, (start + count - 1) / cluster);
            let (r0, r1) = (u0 / tn, u1 / tn);
            let rows = (cluster * (r1 + 1)).min(m_tiles).saturating_sub(cluster * r0);
            let cols = (u1 - u0 + 1).min(tn);
            // Tiles beyond M (the last row of clusters' spare CTAs) store nothing.
            let last = tm / cluster - 1;
            let spare = (u1 + 1).min((last + 1) * tn).saturating_sub(u0.max(last * tn)) * (tm - m_tiles);
            let a = rows as f64 * bmf * k as f64 * e * a_unique;
            let b = if first || !b_fits { cols as f64 * bnf * k as f64 * e * b_unique } else { 0.0 };
            let c = (count - spare) as f64 * bmf * bnf * e * (1.0 + epilogue_tile);
            let bias_bytes = if first && bias { n as f64 * e } else { 0.0 };
            let dram = (a + b + c + bias_bytes) / dram_rate;
            [compute, smem, l2, lat, dram]
        };
        // The first wave, the full waves between (all alike but for where
        // they start; costed at the second wave's start), the last one.
        let mut kinds = vec![(wave(0, tiles.min(slots), true), 1u64)];
        if waves > 2 {
            kinds.push((wave(slots, slots, false), waves - 2));
        }
        if waves > 1 {
            let start = (waves - 1) * slots;
            kinds.push((wave(start, tiles - start, false), 1));
        }
        let (time_s, sums, arg) = sum_waves(&kinds);
        let fills = match (wgmma, persistent) {
            (false, _) => 0,
            (true, false) => waves,
            (true, true) => 1,
        };
        let time_s = time_s + fills as f64 * latency;
        const LIMITS: [Limit; 5] = [Limit::Compute, Limit::SharedMemory, Limit::L2, Limit::Latency, Limit::Dram];
        Ok(Terms {
            resources: res,
            tiles,
            waves,
            compute_s: sums[0],
            smem_s: sums[1],
            l2_s: sums[2],
            latency_s: sums[3],
            dram_s: sums[4],
            time_s,
            limit: LIMITS[arg],
        })
    }

    /// The estimate of an attention plan (module doc, "Attention").
    ///
    /// Errors: `Unsupported` when the problem is no attention with known
    /// extents ([`attention_dims`]), the plan has no block tile or warp
    /// tile or an `algo_choice attention` other than `online_softmax` and
    /// `streaming_softmax_2pass`, or no CTA fits on an SM.
    pub fn attention(&self, plan: &Plan, problem: &Problem, target: &Target) -> DResult<Estimate> {
        let [b, m, n, d, dv] = attention_dims(problem)?;
        let passes: u64 = match attention_algorithm(plan) {
            Some(AttentionAlgo::OnlineSoftmax) => 1,
            Some(AttentionAlgo::StreamingSoftmax2Pass) => 2,
            None => {
                return Err(diag!(Unsupported, "the cost model costs attention plans with an algo_choice attention"))
            }
        };
        let ([bm, bn, _], Some(wm)) = (
            resources::block_tile(plan).unwrap_or([0; 3]),
            plan.warp_tile.as_ref().map(|w| w.value[0]).filter(|&w| w > 0),
        ) else {
            return Err(diag!(Unsupported, "the cost model needs an attention plan with a block tile and a warp_tile"));
        };
        if bm == 0 || bn == 0 || b * m == 0 {
            return Err(diag!(Unsupported, "the cost model needs an attention with rows and a non-empty block tile"));
        }
        let e = problem.dtype.size_bytes() as u64;
        let warps = bm.div_ceil(wm);
        let smem = (bm * d + 2 * bn * (d + dv)) * e;
        let ctas = [
            target.smem_per_sm.checked_div(smem).unwrap_or(u64::MAX),
            target.max_warps_per_sm / warps,
            target.max_blocks_per_sm,
        ]
        .into_iter()
        .min()
        .unwrap_or(0);
        if ctas == 0 {
            return Err(diag!(Unsupported, "no CTA of this attention plan fits on one SM of {}", target.name));
        }
        let (bmf, ef) = (bm as f64, e as f64);
        let np = (n.div_ceil(bn) * bn) as f64;
        let flops = 2.0 * bmf * np * (passes * d + dv) as f64;
        let corrections = if passes == 1 { 2.0 * 32.0 * warps as f64 * np / bn as f64 } else { 0.0 };
        let exps = bmf * np + corrections;
        let fill = (bmf * d as f64 + np * (passes * d + dv) as f64) * ef;

        let sms = target.sm_count as f64;
        let clock = target.clock_mhz * 1e6;
        let tensor_rate = target.peak_tensor_tflops * 1e12 / sms;
        let sfu_rate = MUFU_PER_SM_CLOCK * clock;
        let l2_rate = target.l2_gbps * 1e9 / sms;
        let dram_rate = target.dram_gbps * 1e9;
        let tm = m.div_ceil(bm);
        let tiles = b * tm;
        let slots = target.sm_count * ctas;
        let waves = tiles.div_ceil(slots);
        let wave = |start: u64, count: u64| -> [f64; 4] {
            let cw = count.div_ceil(target.sm_count) as f64;
            let busy = (cw * warps as f64 / TENSOR_WARPS_PER_SM as f64).min(1.0);
            let points = ((start + count - 1) / tm - start / tm + 1) as f64;
            let bytes = count as f64 * bmf * (d + dv) as f64 * ef + points * (n * (d + dv)) as f64 * ef;
            [cw * flops / (tensor_rate * busy), cw * exps / sfu_rate, cw * fill / l2_rate, bytes / dram_rate]
        };
        let mut kinds = vec![(wave(0, tiles.min(slots)), 1u64)];
        if waves > 2 {
            kinds.push((wave(slots, slots), waves - 2));
        }
        if waves > 1 {
            let start = (waves - 1) * slots;
            kinds.push((wave(start, tiles - start), 1));
        }
        let (time_s, _, arg) = sum_waves(&kinds);
        const LIMITS: [Limit; 4] = [Limit::Compute, Limit::Sfu, Limit::L2, Limit::Dram];
        Ok(Estimate { time_s, limit: LIMITS[arg] })
    }
}

/// `Σ waves max(terms)` over the kinds of wave `(terms, how many)`: the
/// time, each term summed, and the index of the term that decided the
/// most time.
fn sum_waves<const T: usize>(kinds: &[([f64; T], u64)]) -> (f64, [f64; T], usize) {
    let mut sums = [0.0f64; T];
    let mut decided = [0.0f64; T];
    let mut time_s = 0.0;
    for (terms, times) in kinds {
        let times = *times as f64;
        let arg = largest(terms);
        time_s += terms[arg] * times;
        decided[arg] += terms[arg] * times;
        for (s, t) in sums.iter_mut().zip(terms) {
            *s += t * times;
        }
    }
    (time_s, sums, largest(&decided))
}

/// The index of the largest of `terms`, the first on a tie.
fn largest(terms: &[f64]) -> usize {
    (1..terms.len()).fold(0, |best, i| if terms[i] > terms[best] { i } else { best })
}

/// `plan` with `algo_choice` `choice` added (replacing another value of
/// its key).
pub fn with_algorithm(plan: &Plan, choice: AlgoChoice) -> Plan {
    let mut plan = plan.clone();
    plan.algo_choice.retain(|a| a.value.key() != choice.key());
    plan.algo_choice.push(Spanned::new(choice));
    plan
}

/// The plan's `algo_choice` for `key`, if it has one.
pub fn algorithm(plan: &Plan, key: AlgoKey) -> Option<AlgoChoice> {
    plan.algo_choice.iter().map(|a| a.value).find(|a| a.key() == key)
}

/// An estimator that sees every plan with `algo_choice` `choice`
/// ([`with_algorithm`]): a template ranking the plans of one algorithm
/// (the implicit GEMM's of a convolution, Winograd's batched GEMM) says
/// which it is, so that a measured or pinned estimator can tell them
/// apart.
pub struct Tagged<'e> {
    pub inner: &'e dyn Estimator,
    pub choice: AlgoChoice,
}

impl Estimator for Tagged<'_> {
    fn estimate(&self, plan: &Plan, problem: &Problem, target: &Target) -> DResult<Estimate> {
        self.inner.estimate(&with_algorithm(plan, self.choice), problem, target)
    }
}

/// One whole plan pinned (`bench_gpu --plans`, the GPU tier's
/// `gpu_plans` test): it is estimated at 0 s and every other candidate at
/// 1 s, so the space's choice is this plan wherever it is a candidate.
pub struct PinnedPlan<'p>(pub &'p Plan);

impl Estimator for PinnedPlan<'_> {
    fn estimate(&self, plan: &Plan, _: &Problem, _: &Target) -> DResult<Estimate> {
        Ok(Estimate { time_s: if plan == self.0 { 0.0 } else { 1.0 }, limit: Limit::Compute })
    }
}

/// `inner` with algorithms pinned (`tgc compile|run --algo
/// conv=winograd_3x3`): a plan whose `algo_choice` for a pinned key is
/// another value is not costed (an error naming the pin), so a template of
/// another algorithm refuses the graph and the pinned one is taken where
/// it can be (where it cannot, no template takes the graph); plans without
/// that key are costed by `inner`.
pub struct PinnedAlgorithms<'e> {
    /// The pins, each read by [`parse_pin`].
    pub pins: Vec<AlgoChoice>,
    pub inner: &'e dyn Estimator,
}

impl Estimator for PinnedAlgorithms<'_> {
    fn estimate(&self, plan: &Plan, problem: &Problem, target: &Target) -> DResult<Estimate> {
        for pin in &self.pins {
            if let Some(other) = algorithm(plan, pin.key()).filter(|v| v != pin) {
                let key = pin.key();
                return Err(diag!(Unsupported, "algo_choice {key} {other} is not the pinned {pin} (--algo)"));
            }
        }
        self.inner.estimate(plan, problem, target)
    }
}

/// `key=value`, an `algo_choice` of `000` §1.7 ([`AlgoChoice::parse`]).
///
/// Errors: `UnknownName` for another form, key or value, listing the
/// choices.
pub fn parse_pin(text: &str) -> DResult<AlgoChoice> {
    let Some((key, value)) = text.split_once('=') else {
        let keys: Vec<&str> = AlgoKey::ALL.iter().map(|k| k.name()).collect();
        return Err(diag!(UnknownName, "--algo `{text}`: write KEY=VALUE, KEY one of {}", keys.join(", ")));
    };
    AlgoChoice::parse(&Spanned::new(key.to_string()), &Spanned::new(value.to_string())).map_err(|mut e| {
        e.message = format!("--algo: {}", e.message);
        e
    })
}

impl Estimator for Analytic {
    fn estimate(&self, plan: &Plan, problem: &Problem, target: &Target) -> DResult<Estimate> {
        if attention_algorithm(plan).is_some() {
            return self.attention(plan, problem, target);
        }
        let t = self.terms(plan, problem, target)?;
        Ok(Estimate { time_s: t.time_s, limit: t.limit })
    }
}

/// The plan's `algo_choice attention` value, if it has one.
pub fn attention_algorithm(plan: &Plan) -> Option<AttentionAlgo> {
    plan.algo_choice.iter().find_map(|a| match a.value {
        AlgoChoice::Attention(algo) => Some(algo),
        AlgoChoice::Matmul(_) | AlgoChoice::Conv(_) => None,
    })
}

/// `[b, M, N, d, dv]` of an attention problem ([`Problem::attention`]).
///
/// Errors: `Unsupported` when an axis is missing or has no extent.
pub fn attention_dims(problem: &Problem) -> DResult<[u64; 5]> {
    let extent = |name: &str| problem.axes.iter().find(|a| a.name == name).and_then(|a| a.extent);
    match ["b", "m", "n", "d", "dv"].map(extent) {
        [Some(b), Some(m), Some(n), Some(d), Some(dv)] => Ok([b, m, n, d, dv]),
        _ => Err(diag!(Unsupported, "the cost model needs an attention with known extents of axes b, m, n, d and dv")),
    }
}

/// The ranked space: every valid candidate with its estimate, the
/// rejected ones with their reasons, and which candidate is chosen.
#[derive(Clone, Debug)]
pub struct Choice {
    pub candidates: Vec<(Plan, Estimate)>,
    pub rejected: Vec<(Plan, Vec<String>)>,
    /// Index into `candidates`; `None` when no candidate is valid.
    pub best: Option<usize>,
}

impl Choice {
    /// The chosen plan and its estimate.
    pub fn best(&self) -> Option<&(Plan, Estimate)> {
        self.best.map(|i| &self.candidates[i])
    }

    /// Moves the candidates `why` has a reason against to `rejected` and
    /// chooses again among the rest (the same order: fastest estimate,
    /// then the wider vector, then more stages).
    pub fn reject(&mut self, why: impl Fn(&Plan) -> Option<String>) {
        let mut kept = Vec::new();
        for (plan, e) in std::mem::take(&mut self.candidates) {
            match why(&plan) {
                Some(reason) => self.rejected.push((plan, vec![reason])),
                None => kept.push((plan, e)),
            }
        }
        self.candidates = kept;
        self.best = best_of(&self.candidates);
    }
}

/// The k-tiles a CTA's copies run ahead of its products with a ring of
/// `stages` (module doc, "latency"): `stages − 1`, or with `wgmma`
/// (`wait_group 1`, the stage released one k-tile late) `stages − 2`;
/// at least 1.
pub fn prefetch_depth(stages: u64, wgmma: bool) -> u64 {
    let held = if wgmma { 2 } else { 1 };
    stages.saturating_sub(held).max(1)
}

/// The index of the best candidate (see [`Choice::reject`]).
fn best_of(candidates: &[(Plan, Estimate)]) -> Option<usize> {
    let width = |p: &Plan| p.vectorize.as_ref().map_or(0, |v| v.value.width.value);
    let mut best: Option<usize> = None;
    for (i, (p, e)) in candidates.iter().enumerate() {
        let better = match best.map(|b| &candidates[b]) {
            None => true,
            Some((bp, be)) => {
                let (w, bw) = (width(p), width(bp));
                e.time_s < be.time_s
                    || (e.time_s == be.time_s && (w > bw || (w == bw && resources::stages(p) > resources::stages(bp))))
            }
        };
        if better {
            best = Some(i);
        }
    }
    best
}

/// Ranks the §6 space of `problem` on `target` with `estimator`; a
/// candidate the estimator cannot cost is rejected with its reason.
///
/// Errors: `Unsupported` when the problem is not a GEMM with known extents.
pub fn choose_with(estimator: &dyn Estimator, problem: &Problem, target: &Target) -> DResult<Choice> {
    gemm_dims(problem)?;
    let Space { valid, mut rejected } = space::candidates(problem, target);
    let mut candidates = Vec::new();
    for plan in valid {
        match estimator.estimate(&plan, problem, target) {
            Ok(e) => candidates.push((plan, e)),
            Err(d) => rejected.push((plan, vec![d.message])),
        }
    }
    let best = best_of(&candidates);
    Ok(Choice { candidates, rejected, best })
}

/// [`choose_with`] the [`Analytic`] model: the `(best plan, every candidate
/// with its estimate)` as a [`Choice`].
pub fn choose(problem: &Problem, target: &Target) -> DResult<Choice> {
    choose_with(&Analytic, problem, target)
}

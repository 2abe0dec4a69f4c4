//! The analytic cost model of `000` §6 and plan choice over the space of
//! [`super::space`].
//!
//! [`Estimator`] is the seam between the space and what ranks it: the
//! [`Analytic`] model here, measured tuning (§6 "実測") later. Its numbers
//! are estimates from the formulas below, never measurements.
//!
//! The model, for a GEMM `M×N×K` with block tile `[BM, BN, BK]`:
//!
//! - `time_est = max(FLOPs/(peak_TF·occ·pipeline_eff), Bytes/(peak_BW·occ))`
//!   (§6 基本式; also `001` §10), the limiting factor being the larger term.
//! - `occ` is §5's occupancy ([`super::resources::occupancy`]);
//!   `pipeline_eff = 1 − 1/stages` (§5 パイプライン). A plan with no
//!   `pipeline` takes `pipeline_eff = 1`, as `001` §10 does for its
//!   synchronous MVP; the space only makes pipelined plans.
//! - FLOPs: `2·M·N·K` (`001` §10), counted over the padded extents
//!   `⌈M/BM⌉·BM` etc. because predicated tail tiles still issue their MMAs
//!   (the tail waste of `predicate_tail`, §1.7). The reported TFLOP/s uses
//!   the unpadded `2·M·N·K`.
//! - Wave quantisation: with `slots = SMs · cta_per_SM` and
//!   `tiles = ⌈M/BM⌉·⌈N/BN⌉`, the last of `⌈tiles/slots⌉` waves runs partly
//!   empty; the compute term is divided by `tiles / (waves · slots)`. §6's
//!   formula has no such term; it is added here because it decides between
//!   tiles of similar occupancy (§5's persistent kernels address the same
//!   loss).
//! - Bytes: each CTA reads its `BM×K` panel of A and `K×BN` panel of B, so
//!   A is read `⌈N/BN⌉` times and B `⌈M/BM⌉` times (`001` §10: "tile
//!   reuse … K/BK loads"); C is written once; epilogue operands (`bias`: N
//!   elements, `residual`: M·N) are read once. All in the problem's dtype.
//!   There is no cache model: every re-read is charged at DRAM bandwidth,
//!   which overstates the memory term where L2 serves the re-reads.
//! - Because §5's `occ` divides both terms and re-reads have no cache
//!   model, the absolute estimate is pessimistic for large tiles (a CTA of
//!   4–16 warps gives `occ` well below 1); it is meant for ranking.
//! - The vector width does not enter §6's formula; ties in the estimate go
//!   to the wider vector (§4.2 counts narrowing it as a loss), then to the
//!   earlier candidate.

use crate::diag;
use crate::diag::DResult;

use super::resources::{self, Resources};
use super::space::{self, Space};
use super::{Plan, Problem, Target};

/// Which term of `time_est` is the larger.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    Compute,
    Memory,
}

impl Limit {
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::Compute => "compute",
            Limit::Memory => "memory",
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

/// The §6 analytic model of the module doc.
#[derive(Clone, Copy, Debug, Default)]
pub struct Analytic;

/// The terms of [`Analytic`]'s estimate, for tests and the dump.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Terms {
    pub resources: Resources,
    /// `2·M·N·K` over the padded extents.
    pub padded_flops: f64,
    /// Bytes moved between DRAM and the SMs.
    pub bytes: f64,
    pub pipeline_eff: f64,
    /// `tiles / (waves · slots)`, in `(0, 1]`.
    pub wave_eff: f64,
    /// Seconds: `padded_flops / (peak_TF · occ · pipeline_eff · wave_eff)`.
    pub compute_s: f64,
    /// Seconds: `bytes / (peak_BW · occ)`.
    pub memory_s: f64,
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
        let dtype = problem.dtype;
        let res = resources::of(plan, dtype, target)
            .ok_or_else(|| diag!(Unsupported, "the cost model needs a plan with a block tile and a warp_tile"))?;
        if res.ctas_per_sm == 0 {
            return Err(diag!(Unsupported, "no CTA of this plan fits on one SM of {}", target.name));
        }
        let [bm, bn, bk] = resources::block_tile(plan).unwrap_or([1, 1, 1]).map(|t| t.max(1));
        let (tm, tn, tk) = (m.div_ceil(bm), n.div_ceil(bn), k.div_ceil(bk));
        let padded_flops = 2.0 * (tm * bm) as f64 * (tn * bn) as f64 * (tk * bk) as f64;
        let elem = dtype.size_bytes() as f64;
        let (mf, nf, kf) = (m as f64, n as f64, k as f64);
        let epilogue: f64 = plan
            .epilogue
            .iter()
            .map(|op| match op.value.as_str() {
                "bias" => nf,
                "residual" => mf * nf,
                _ => 0.0,
            })
            .sum();
        let bytes = elem * (mf * kf * tn as f64 + kf * nf * tm as f64 + mf * nf + epilogue);
        let stages = resources::stages(plan);
        let pipeline_eff = if plan.pipeline.is_some() { 1.0 - 1.0 / stages as f64 } else { 1.0 };
        let tiles = tm * tn;
        let slots = target.sm_count * res.ctas_per_sm;
        let waves = tiles.div_ceil(slots);
        let wave_eff = tiles as f64 / (waves * slots) as f64;
        let occ = res.occupancy;
        let compute_s = padded_flops / (target.peak_tensor_tflops * 1e12 * occ * pipeline_eff * wave_eff);
        let memory_s = bytes / (target.dram_gbps * 1e9 * occ);
        Ok(Terms { resources: res, padded_flops, bytes, pipeline_eff, wave_eff, compute_s, memory_s })
    }
}

impl Estimator for Analytic {
    fn estimate(&self, plan: &Plan, problem: &Problem, target: &Target) -> DResult<Estimate> {
        let t = self.terms(plan, problem, target)?;
        let limit = if t.compute_s >= t.memory_s { Limit::Compute } else { Limit::Memory };
        Ok(Estimate { time_s: t.compute_s.max(t.memory_s), limit })
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
    let width = |p: &Plan| p.vectorize.as_ref().map_or(0, |v| v.value.width.value);
    let mut best: Option<usize> = None;
    for (i, (p, e)) in candidates.iter().enumerate() {
        let better = match best.map(|b| &candidates[b]) {
            None => true,
            Some((bp, be)) => e.time_s < be.time_s || (e.time_s == be.time_s && width(p) > width(bp)),
        };
        if better {
            best = Some(i);
        }
    }
    Ok(Choice { candidates, rejected, best })
}

/// [`choose_with`] the [`Analytic`] model: the `(best plan, every candidate
/// with its estimate)` of issue 4 as a [`Choice`].
pub fn choose(problem: &Problem, target: &Target) -> DResult<Choice> {
    choose_with(&Analytic, problem, target)
}

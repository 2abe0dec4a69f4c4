//! The differential cost of one fusion (`000` §4.1 step 4, §6) and the
//! §4.2 thresholds, for region formation.
//!
//! Fusing a stored producer `p` into the region of its consumer `c`
//! (computed at `c`'s reads) changes the time by
//!
//! ```text
//! Δtime = max(ΔFLOPs / peak_flops, ΔBytes / bandwidth) + penalties
//!         − saved_bytes / bandwidth − kernel_overhead
//! ```
//!
//! (§6 "融合の差分評価", with `occ = pipeline_eff = 1`: before a plan is
//! chosen there is no occupancy to compare), where
//! - `saved_bytes = 2 · |p| · sizeof(p)`: the intermediate's write-back and
//!   read-back (§4.1 `benefit = (bytes_write_back + bytes_read_back)/BW`);
//! - `ΔFLOPs = (recompute − 1) · |p| · flops(p)`, with the recompute factor
//!   `needed_per_point · |c| / |p|` from Poly Core's halo
//!   (`can_compute_at` for one consumer point): a 2×2 stride-2 pool reads
//!   each conv point once (factor 1), a 3×3 stride-1 pool nine times;
//! - `ΔBytes = 0`: the recomputation's operand reads stay in the local
//!   buffer the §4.2 threshold below bounds;
//! - `penalties = 0`: a candidate has a unique consumer chain (no fan-out),
//!   and layout penalties (TMA/WGMMA tiles, vector widths) need a plan;
//! - `kernel_overhead`: the producer's kernel is gone (one launch fewer).
//!
//! A fusion is beneficial when `Δtime < 0` (§4.1 STOP ③ otherwise).
//!
//! Thresholds (§4.2 "しきい値（目安）"): the local edge buffer Poly Core names
//! (`min_buffer_for_edge` bytes) may use at most [`LOCAL_BUFFER_FRACTION`]
//! of the machine's per-kernel fast memory (shared memory per CTA on a GPU,
//! the L1 data cache on the CPU). The other §4.2 rules (CTA/SM dropping to
//! 1, vector width shrinking, SM90 TMA/WGMMA tiles) are about a chosen plan
//! and are checked by plan choice, not here.
//!
//! Machine numbers come from a [`Machine`] row: [`CPU`] (the
//! `plan::target::ZEN3` row, [`Machine::of_cpu`]) or [`Machine::of_target`]
//! (the GPU rows of `plan::target`); none is a literal in the formulas.

use crate::plan::target::{CpuTarget, Target, ZEN3};

/// §4.2: "`smem_per_CTA` が上限の ~80% 超見込み → STOP".
pub const LOCAL_BUFFER_FRACTION: f64 = 0.8;

/// The extent a symbolic dimension is costed at (a configuration default:
/// formation runs before shapes are bound; most terms scale together).
pub const SYMBOLIC_EXTENT: i64 = 64;

/// The numbers the cost model reads. Rates in units per second.
#[derive(Clone, Debug, PartialEq)]
pub struct Machine {
    pub name: &'static str,
    /// FLOP/s one kernel reaches (an FMA counted as 2).
    pub peak_flops: f64,
    /// Bytes/s between memory and the kernel.
    pub bandwidth: f64,
    /// Bytes of fast memory one kernel's local buffers may use before the
    /// [`LOCAL_BUFFER_FRACTION`] threshold (smem per CTA, or L1d).
    pub local_bytes: u64,
    /// What one kernel costs besides its work (launch, temporary buffer).
    pub kernel_overhead_s: f64,
}

/// The CPU backend's row: one core of `plan::target::ZEN3` running the
/// generated C ([`Machine::of_cpu`]).
pub const CPU: Machine = Machine::of_cpu(&ZEN3);

/// The fraction of a core's peak FLOP/s the generated loops are costed at:
/// a configuration default, not a measurement. A fused producer is
/// recomputed in its consumer's loop nest, not in the packed template's
/// micro-kernel, and such loops reach about half the peak.
pub const CPU_LOOP_EFFICIENCY: f64 = 0.5;

/// A call of a generated CPU kernel plus its temporary buffer's allocation:
/// a configuration default (not a datasheet number, so not in
/// `plan::target`).
pub const CPU_CALL_OVERHEAD_S: f64 = 1e-6;

/// A GPU kernel launch as seen by a stream of dependent kernels: a
/// configuration default (commonly measured at 2–5 µs; not a datasheet
/// number, so not in `plan::target`).
pub const GPU_LAUNCH_OVERHEAD_S: f64 = 3e-6;

impl Machine {
    /// The row of one core of CPU `t`: its peak FLOP/s at
    /// [`CPU_LOOP_EFFICIENCY`], the DRAM bandwidth one core streams, and
    /// its L1 data cache.
    pub const fn of_cpu(t: &CpuTarget) -> Machine {
        Machine {
            name: "cpu",
            peak_flops: CPU_LOOP_EFFICIENCY * t.peak_flops(1),
            bandwidth: t.bandwidth(1),
            local_bytes: t.l1d_bytes,
            kernel_overhead_s: CPU_CALL_OVERHEAD_S,
        }
    }

    /// The row of a GPU target: peak tensor throughput, DRAM bandwidth and
    /// the per-block shared memory limit from `plan::target`.
    pub fn of_target(t: &Target) -> Machine {
        Machine {
            name: t.name,
            peak_flops: t.peak_tensor_tflops * 1e12,
            bandwidth: t.dram_gbps * 1e9,
            local_bytes: t.smem_per_block_max,
            kernel_overhead_s: GPU_LAUNCH_OVERHEAD_S,
        }
    }
}

/// What the cost model needs of one candidate edge `p → c`.
#[derive(Clone, Debug, PartialEq)]
pub struct EdgeFacts {
    /// Elements of the producer tensor `|p|`.
    pub producer_elems: f64,
    /// FLOPs per producer element (2 per reduced element: multiply-add).
    pub flops_per_elem: f64,
    pub elem_bytes: f64,
    /// Output points of the consumer `|c|`.
    pub consumer_points: f64,
    /// Producer elements one consumer point needs (Poly Core's box).
    pub needed_per_point: f64,
    /// The local buffer Poly Core names for the edge, when known.
    pub buffer_bytes: Option<u64>,
}

/// The terms of `Δtime` (module doc), in seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Delta {
    /// How many times each producer element is computed once fused.
    pub recompute: f64,
    /// `saved_bytes / bandwidth + kernel_overhead`.
    pub benefit: f64,
    /// `max(ΔFLOPs / peak_flops, ΔBytes / bandwidth) + penalties`.
    pub cost: f64,
}

impl Delta {
    /// `cost − benefit`: negative when the fusion pays.
    pub fn time(&self) -> f64 {
        self.cost - self.benefit
    }
}

/// `Δtime` of fusing the edge on machine `m` (module doc).
pub fn delta(m: &Machine, e: &EdgeFacts) -> Delta {
    let recompute =
        if e.producer_elems > 0.0 { e.needed_per_point * e.consumer_points / e.producer_elems } else { 1.0 };
    let d_flops = (recompute - 1.0) * e.producer_elems * e.flops_per_elem;
    let d_bytes = 0.0;
    let penalties = 0.0;
    let cost = (d_flops / m.peak_flops).max(d_bytes / m.bandwidth).max(0.0) + penalties;
    let saved_bytes = 2.0 * e.producer_elems * e.elem_bytes;
    Delta { recompute, benefit: saved_bytes / m.bandwidth + m.kernel_overhead_s, cost }
}

/// A §4.2 threshold an edge breaks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OverThreshold {
    pub bytes: u64,
    /// `LOCAL_BUFFER_FRACTION · local_bytes`, rounded down.
    pub limit: u64,
}

/// The §4.2 local-buffer threshold (module doc); an unknown size passes
/// (Poly Core bounded the box, only its symbolic extent is unknown).
pub fn check_thresholds(m: &Machine, e: &EdgeFacts) -> Result<(), OverThreshold> {
    let limit = (LOCAL_BUFFER_FRACTION * m.local_bytes as f64) as u64;
    match e.buffer_bytes {
        Some(bytes) if bytes > limit => Err(OverThreshold { bytes, limit }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(window: f64, stride: f64, flops: f64) -> EdgeFacts {
        // A 64×64 conv output pooled with a square window.
        let p = 64.0 * 64.0;
        let out = (64.0 / stride) * (64.0 / stride);
        EdgeFacts {
            producer_elems: p,
            flops_per_elem: flops,
            elem_bytes: 4.0,
            consumer_points: out,
            needed_per_point: window * window,
            buffer_bytes: Some((window * window * 4.0) as u64),
        }
    }

    #[test]
    fn a_non_overlapping_pool_pays_and_recomputes_nothing() {
        let d = delta(&CPU, &pool(2.0, 2.0, 54.0));
        assert_eq!(d.recompute, 1.0);
        assert_eq!(d.cost, 0.0);
        assert!(d.time() < 0.0);
    }

    #[test]
    fn recompute_grows_with_overlap_until_it_does_not_pay() {
        let cheap = delta(&CPU, &pool(3.0, 1.0, 2.0));
        assert_eq!(cheap.recompute, 9.0);
        assert!(cheap.time() < 0.0, "{cheap:?}");
        let dear = delta(&CPU, &pool(3.0, 1.0, 2.0 * 576.0));
        assert!(dear.time() > 0.0, "{dear:?}");
        assert!(dear.cost > cheap.cost && dear.benefit == cheap.benefit);
    }

    #[test]
    fn the_local_buffer_threshold_is_80_percent() {
        let mut e = pool(2.0, 2.0, 2.0);
        e.buffer_bytes = Some(CPU.local_bytes * 8 / 10);
        assert!(check_thresholds(&CPU, &e).is_ok());
        e.buffer_bytes = Some(CPU.local_bytes * 8 / 10 + 1);
        assert_eq!(check_thresholds(&CPU, &e).unwrap_err().limit, CPU.local_bytes * 8 / 10);
        e.buffer_bytes = None;
        assert!(check_thresholds(&CPU, &e).is_ok());
    }

    #[test]
    fn the_cpu_row_comes_from_plan_target() {
        assert_eq!((CPU.peak_flops, CPU.bandwidth), (CPU_LOOP_EFFICIENCY * ZEN3.peak_flops(1), ZEN3.bandwidth(1)));
        assert_eq!(CPU.local_bytes, ZEN3.l1d_bytes);
    }

    #[test]
    fn gpu_rows_come_from_plan_target() {
        let m = Machine::of_target(&crate::plan::target::SM80);
        assert_eq!(m.local_bytes, crate::plan::target::SM80.smem_per_block_max);
        assert_eq!(m.bandwidth, 2039e9);
    }
}

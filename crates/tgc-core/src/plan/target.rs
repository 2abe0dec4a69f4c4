//! Targets: the hardware numbers plans are checked and costed against —
//! the GPU rows below and the CPU's ([`CpuTarget`], [`ZEN3`]).
//!
//! One row per target (`sm80` = A100-SXM4-80GB, `sm90` = H100-SXM5). The
//! validator and, later, the cost model of `000` §5/§6 read these rows and
//! never write a hardware number as a literal. Each value names its source.
//! Sources, as consulted for this table:
//!
//! - [CCG]: NVIDIA, *CUDA C++ Programming Guide*, "Compute Capabilities",
//!   table "Technical Specifications per Compute Capability"
//!   (<https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/compute-capabilities.html>).
//! - [A100]: NVIDIA A100 datasheet / *NVIDIA Ampere GA100 Architecture*
//!   whitepaper (as summarised at <https://glennklockwood.com/garden/processors/A100>
//!   and <https://www.thundercompute.com/blog/nvidia-a100-specs-full-guide>).
//! - [H100]: NVIDIA H100 datasheet / *NVIDIA H100 Tensor Core GPU
//!   Architecture* whitepaper (as tabulated at
//!   <https://archive-lib.hpctech.co.jp/gpuproduct/nvidia-h100.html> and
//!   <https://glennklockwood.com/garden/processors/h100>).
//! - [MLA]: "Hardware features of different Nvidia GPU architectures",
//!   Table 3 of <https://pmc.ncbi.nlm.nih.gov/articles/PMC10448217/>
//!   (shared-memory and L2 bandwidth, memory latency in cycles; its
//!   bandwidths are for the full chips, 128 and 144 SMs, at 1410 and
//!   1755 MHz).
//! - [PTX]: NVIDIA, *PTX ISA*, "Warp-level matrix multiply-accumulate
//!   instructions" (`mma.sync` shapes) and "Asynchronous warpgroup level
//!   matrix multiply-accumulate" (`wgmma` shapes).
//!
//! Where a number could not be confirmed from a retrieved copy of its
//! source while writing this table, its doc says so.

use tgc_runtime::cpu_rt::Isa;

use crate::diag;
use crate::diag::DResult;
use crate::DType;

/// A tensor-core instruction shape `m×n×k` and the operand dtypes it takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MmaShape {
    /// The PTX instruction family: `mma.sync` (one warp) or `wgmma` (a
    /// warpgroup of four warps).
    pub instr: &'static str,
    pub m: u64,
    pub n: u64,
    pub k: u64,
    /// Operand (A/B) dtypes; accumulation is in f32.
    pub dtypes: &'static [DType],
    /// The threads that issue one instruction together and share its
    /// accumulator: a warp (32) for `mma.sync`, a warpgroup (128) for
    /// `wgmma` [PTX]. A plan's `warp_tile` is the tile of one such group.
    pub threads: u64,
}

/// One GPU target. Sizes are in bytes, bandwidth in GB/s (10⁹ bytes/s),
/// throughput in TFLOP/s (10¹² FLOP/s, an FMA counted as 2).
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    /// The name plans use (`"arch"` of `000` §12.5): `sm80` or `sm90`.
    pub name: &'static str,
    /// The part the per-product numbers (SM count, bandwidth, peak) are for.
    pub part: &'static str,
    /// Compute capability (major, minor).
    pub compute_capability: (u32, u32),
    pub sm_count: u64,
    /// Shared memory per SM (the largest carve-out).
    pub smem_per_sm: u64,
    /// Largest dynamic shared memory one block may use (opt-in through
    /// `cudaFuncAttributeMaxDynamicSharedMemorySize`); the default without
    /// opt-in is 48 KiB.
    pub smem_per_block_max: u64,
    /// 32-bit registers per SM.
    pub regs_per_sm: u64,
    /// Most registers one thread may use.
    pub regs_per_thread_max: u64,
    pub max_threads_per_block: u64,
    /// The most blocks of a grid along `x`, `y` and `z`.
    pub max_grid: [u64; 3],
    pub max_warps_per_sm: u64,
    pub max_blocks_per_sm: u64,
    pub warp_size: u64,
    pub l2_bytes: u64,
    /// Peak dense (no sparsity) f16/bf16 tensor-core throughput, f32 accumulate.
    pub peak_tensor_tflops: f64,
    /// Peak DRAM (HBM) bandwidth.
    pub dram_gbps: f64,
    /// SM clock the peaks are quoted at, MHz.
    pub clock_mhz: f64,
    /// Shared-memory bandwidth of one SM, bytes per clock (32 banks of
    /// 4 bytes).
    pub smem_bytes_per_clock: u64,
    /// L2 read bandwidth of the chip, GB/s.
    pub l2_gbps: f64,
    /// Latency of a global load that misses L1, SM clocks.
    pub mem_latency_clocks: u64,
    /// Tensor-core shapes, the one the MMA template uses first.
    pub mma_shapes: &'static [MmaShape],
}

const F16_BF16: &[DType] = &[DType::F16, DType::BF16];

/// `mma.sync.aligned.m16n8k16` for f16/bf16 operands [PTX].
const MMA_M16N8K16: MmaShape = MmaShape { instr: "mma.sync", m: 16, n: 8, k: 16, dtypes: F16_BF16, threads: 32 };

/// `wgmma.mma_async.sync.aligned.m64nNk16` for f16/bf16 operands, N a
/// multiple of 8 up to 256; `n` is the smallest [PTX].
const WGMMA_M64NNK16: MmaShape = MmaShape { instr: "wgmma", m: 64, n: 8, k: 16, dtypes: F16_BF16, threads: 128 };

const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;

/// NVIDIA A100-SXM4-80GB, compute capability 8.0.
pub const SM80: Target = Target {
    name: "sm80",
    part: "A100-SXM4-80GB",
    compute_capability: (8, 0),
    // 108 SMs [A100] (7 GPCs, 54 TPCs, 2 SMs per TPC).
    sm_count: 108,
    // 164 KiB per SM [CCG] (also [A100]: "up to 164KB of shared memory per SM").
    smem_per_sm: 164 * KIB,
    // 163 KiB per block with opt-in [CCG]. Not confirmed from a retrieved
    // copy of the table while writing this row (the search excerpt omitted
    // it); it is the CCG value as generally quoted.
    smem_per_block_max: 163 * KIB,
    // 64 K 32-bit registers per SM [CCG] (256 KB register file [A100]).
    regs_per_sm: 64 * 1024,
    // 255 [CCG] (the Ampere tuning guide repeats it).
    regs_per_thread_max: 255,
    // 1024 [CCG].
    max_threads_per_block: 1024,
    // 2^31 - 1 along x, 65535 along y and z [CCG] (the same for every
    // compute capability since 3.0).
    max_grid: [(1 << 31) - 1, 65_535, 65_535],
    // 64 warps (2048 threads) per SM for 8.0 [CCG].
    max_warps_per_sm: 64,
    // 32 blocks per SM for 8.0 [CCG].
    max_blocks_per_sm: 32,
    // 32 [CCG].
    warp_size: 32,
    // 40 MB L2 [A100] (deviceQuery on an A100 reports 41943040 bytes).
    l2_bytes: 40 * MIB,
    // 312 TFLOP/s dense FP16 and BF16 tensor (624 with sparsity) [A100].
    peak_tensor_tflops: 312.0,
    // 2039 GB/s HBM2e on the 80 GB SXM4 part (1555 GB/s on the 40 GB) [A100].
    dram_gbps: 2039.0,
    // 1410 MHz boost [A100], [MLA].
    clock_mhz: 1410.0,
    // 128 B/clock/SM: [MLA]'s 23101 GB/s is 128 SMs x 128 B x 1.41 GHz.
    smem_bytes_per_clock: 128,
    // 7219 GB/s [MLA] (5120 B/clock; "2.3x the L2 cache read bandwidth of
    // V100" [A100]).
    l2_gbps: 7219.0,
    // 400 clocks [MLA].
    mem_latency_clocks: 400,
    mma_shapes: &[MMA_M16N8K16],
};

/// NVIDIA H100-SXM5-80GB, compute capability 9.0.
pub const SM90: Target = Target {
    name: "sm90",
    part: "H100-SXM5-80GB",
    compute_capability: (9, 0),
    // 132 SMs [H100] (66 TPCs, 2 SMs per TPC).
    sm_count: 132,
    // "Configurable up to 228 KB" per SM [H100], [CCG].
    smem_per_sm: 228 * KIB,
    // 227 KiB per block with opt-in [CCG]. Not confirmed from a retrieved
    // copy of the table while writing this row; it is the CCG value as
    // generally quoted (228 KiB per SM less 1 KiB reserved per block).
    smem_per_block_max: 227 * KIB,
    // 64 K 32-bit registers per SM [CCG] ("Register File Size / SM 256 KB" [H100]).
    regs_per_sm: 64 * 1024,
    // 255 [CCG].
    regs_per_thread_max: 255,
    // 1024 [CCG].
    max_threads_per_block: 1024,
    // 2^31 - 1 along x, 65535 along y and z [CCG] (the same for every
    // compute capability since 3.0).
    max_grid: [(1 << 31) - 1, 65_535, 65_535],
    // 64 warps per SM [CCG].
    max_warps_per_sm: 64,
    // 32 blocks per SM [CCG].
    max_blocks_per_sm: 32,
    // 32 [CCG].
    warp_size: 32,
    // 50 MB L2 [H100].
    l2_bytes: 50 * MIB,
    // 989.4 TFLOP/s dense FP16 and BF16 tensor (1979 with sparsity) [H100].
    peak_tensor_tflops: 989.4,
    // 3350 GB/s HBM3 [H100].
    dram_gbps: 3350.0,
    // 1980 MHz: `nvidia-smi --query-gpu=clocks.max.sm` on this project's
    // H100 80GB HBM3 machine (2026-11-26); [MLA]'s table uses 1755 MHz.
    clock_mhz: 1980.0,
    // 128 B/clock/SM: [MLA]'s 32348 GB/s is 144 SMs x 128 B x 1.755 GHz.
    smem_bytes_per_clock: 128,
    // 8986 GB/s [MLA] (5120 B/clock at 1755 MHz).
    l2_gbps: 8986.0,
    // 400 clocks [MLA].
    mem_latency_clocks: 400,
    // The template's SM90 branch issues `wgmma`; `mma.sync` m16n8k16 still
    // runs on sm_90 (the attention template uses it there) [PTX].
    mma_shapes: &[WGMMA_M64NNK16, MMA_M16N8K16],
};

/// Every known target, in name order.
pub const TARGETS: [&Target; 2] = [&SM80, &SM90];

impl Target {
    /// The target called `name` (`sm80`, `sm90`).
    ///
    /// Errors: `UnknownName`, listing the known targets.
    pub fn by_name(name: &str) -> DResult<&'static Target> {
        TARGETS.iter().copied().find(|t| t.name == name).ok_or_else(|| {
            let known: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
            diag!(UnknownName, "unknown target `{name}`; known targets: {}", known.join(", "))
        })
    }

    /// The shape the MMA template's GEMM issues for operands of `dtype` on
    /// this target (the first of [`Target::mma_shapes`] that takes it):
    /// `mma.sync` on sm80, `wgmma` on sm90.
    pub fn template_shape(&self, dtype: DType) -> Option<&'static MmaShape> {
        self.mma_shapes.iter().find(|s| s.dtypes.contains(&dtype))
    }

    /// Whether the MMA template issues `wgmma` for operands of `dtype` here
    /// ([`Target::template_shape`]): the SM90 branch, its plan space and
    /// its forms (`warp_specialize`).
    pub fn issues_wgmma(&self, dtype: DType) -> bool {
        self.template_shape(dtype).is_some_and(|s| s.instr == "wgmma")
    }

    /// The first `mma.sync` shape for operands of `dtype`, if the target has one.
    pub fn mma_sync_shape(&self, dtype: DType) -> Option<&'static MmaShape> {
        self.mma_shapes.iter().find(|s| s.instr == "mma.sync" && s.dtypes.contains(&dtype))
    }

    /// [`Target::mma_sync_shape`], or why there is none: the sentence the
    /// `plan` dump and the GPU lowering both give.
    pub fn require_mma_sync(&self, dtype: DType) -> Result<&'static MmaShape, String> {
        self.mma_sync_shape(dtype).ok_or_else(|| {
            let mut takes: Vec<String> = Vec::new();
            for s in self.mma_shapes.iter().filter(|s| s.instr == "mma.sync") {
                for d in s.dtypes {
                    if !takes.contains(&d.to_string()) {
                        takes.push(d.to_string());
                    }
                }
            }
            format!("{} has no tensor-core MMA for {dtype} operands (it takes {})", self.name, takes.join(", "))
        })
    }
}

/// The CPU the CPU back end is costed and blocked against. Sizes in bytes,
/// the clock in MHz, bandwidths in GB/s (10⁹ bytes/s), an FMA counted as 2
/// FLOP.
///
/// One row, [`ZEN3`], is read at compile time by the region cost
/// (`region::cost::CPU`) and the packed template's block-size model
/// (`cpu::packed::CacheModel`), so the generated code does not depend on
/// the machine that compiles it; the tuning report's roofline
/// (`tune::report::Roofline`) reads [`CpuTarget::host`], the same row with
/// this machine's clock and instruction set. Sources:
///
/// - [AMD19h]: AMD, *Software Optimization Guide for AMD Family 19h
///   Processors*, pub. 56665: §2.5 (caches: 32 KiB L1d and 512 KiB L2 per
///   core, 32 MiB L3 per complex of eight cores) and its floating-point
///   unit section (two FMA pipes, 256 bits wide). Not confirmed from a
///   retrieved copy of the guide while writing this row (its search
///   excerpt held only the contents); they are the Zen 3 numbers as
///   generally quoted.
/// - [EPYC]: AMD EPYC 7003 product pages (EPYC 7763, 7B13: 2.45 GHz base
///   clock, the nominal clock of this project's Zen 3 machines in
///   `docs/results.md`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CpuTarget {
    /// The part the numbers are for ([`CpuTarget::host`] keeps [`ZEN3`]'s:
    /// it assumes that part's caches, pipes and bandwidths).
    pub part: &'static str,
    /// The widest vector instruction set the peak is counted for.
    pub isa: Isa,
    /// Vector FMA instructions one core issues per clock (its FMA pipes).
    pub fma_per_clock: u64,
    pub clock_mhz: f64,
    /// L1 data cache of one core.
    pub l1d_bytes: u64,
    /// L2 of one core.
    pub l2_bytes: u64,
    /// One L3, shared by [`CpuTarget::l3_cores`] cores.
    pub l3_bytes: u64,
    pub l3_cores: u64,
    /// DRAM bandwidth one core streams.
    pub dram_gbps_per_core: f64,
    /// DRAM bandwidth all the kernels' threads together reach: their share
    /// of the socket's.
    pub dram_gbps: f64,
}

/// An AMD EPYC 7003 core (Zen 3, AVX2 with FMA).
pub const ZEN3: CpuTarget = CpuTarget {
    part: "AMD EPYC 7003 (Zen 3)",
    // AVX2 with FMA, no AVX-512 [AMD19h].
    isa: Isa::Avx2,
    // Two 256-bit FMA pipes [AMD19h].
    fma_per_clock: 2,
    // 2.45 GHz base [EPYC].
    clock_mhz: 2450.0,
    // 32 KiB L1d, 512 KiB L2 per core, 32 MiB L3 per eight cores [AMD19h].
    l1d_bytes: 32 * KIB,
    l2_bytes: 512 * KIB,
    l3_bytes: 32 * MIB,
    l3_cores: 8,
    // Configuration defaults, not datasheet numbers: one core streams about
    // 10 GB/s from DRAM, and a server's threads share about 40 GB/s.
    dram_gbps_per_core: 10.0,
    dram_gbps: 40.0,
};

/// `f32` lanes of one vector of `isa`: 16 for AVX-512 (512 bits), 8 for
/// AVX2, 4 for the portable loops (the 128-bit SSE2 or NEON vectors the C
/// compiler vectorises them to).
pub const fn f32_lanes(isa: Isa) -> u64 {
    match isa {
        Isa::Portable => 4,
        Isa::Avx2 => 8,
        Isa::Avx512 => 16,
    }
}

impl CpuTarget {
    /// `f32` FLOP one core computes per clock: FMAs per clock × lanes × 2.
    pub const fn flops_per_clock(&self) -> u64 {
        self.fma_per_clock * f32_lanes(self.isa) * 2
    }

    /// Peak `f32` FLOP/s of `threads` cores (at least one).
    pub const fn peak_flops(&self, threads: usize) -> f64 {
        let t = if threads == 0 { 1 } else { threads };
        t as f64 * self.flops_per_clock() as f64 * self.clock_mhz * 1e6
    }

    /// Bytes/s `threads` cores (at least one) stream from DRAM: each
    /// [`CpuTarget::dram_gbps_per_core`], together at most
    /// [`CpuTarget::dram_gbps`].
    pub const fn bandwidth(&self, threads: usize) -> f64 {
        let t = if threads == 0 { 1 } else { threads };
        (t as f64 * self.dram_gbps_per_core).min(self.dram_gbps) * 1e9
    }

    /// One core's share of the L3.
    pub const fn l3_per_core(&self) -> u64 {
        self.l3_bytes / self.l3_cores
    }

    /// This machine as the run-time reports see it: [`ZEN3`] with the clock
    /// of `/proc/cpuinfo` ([`cpu_mhz`]; ZEN3's where it has none) and the
    /// instruction set the runtime's micro-kernel runs
    /// (`tgc_runtime::cpu_rt::ukernel_isa`). Caches, FMA pipes and
    /// bandwidths stay ZEN3's: assumed, not read.
    pub fn host() -> CpuTarget {
        CpuTarget { isa: tgc_runtime::cpu_rt::ukernel_isa(), clock_mhz: cpu_mhz().unwrap_or(ZEN3.clock_mhz), ..ZEN3 }
    }
}

/// The first value of `field` in Linux's `/proc/cpuinfo` (`None`
/// elsewhere): the one place tgc reads it.
pub fn cpuinfo(field: &str) -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let line = text.lines().find(|l| l.split(':').next().is_some_and(|k| k.trim() == field))?;
    Some(line.split_once(':')?.1.trim().to_string())
}

/// This machine's clock in MHz: the first positive `cpu MHz` of
/// [`cpuinfo`].
pub fn cpu_mhz() -> Option<f64> {
    cpuinfo("cpu MHz").and_then(|v| v.parse::<f64>().ok()).filter(|&m| m > 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_by_name() {
        assert_eq!(Target::by_name("sm80").unwrap().sm_count, 108);
        assert_eq!(Target::by_name("sm90").unwrap().part, "H100-SXM5-80GB");
        let e = Target::by_name("sm75").unwrap_err();
        assert_eq!(e.name, crate::ErrorName::UnknownName);
        assert!(e.message.contains("sm80, sm90"), "{e}");
    }

    #[test]
    fn rows_are_consistent() {
        for t in TARGETS {
            assert!(t.smem_per_block_max <= t.smem_per_sm, "{}", t.name);
            assert_eq!(t.max_threads_per_block % t.warp_size, 0);
            assert!(t.max_grid[1] == t.max_grid[2] && t.max_grid[1] < t.max_grid[0], "{}", t.name);
            let m = t.mma_sync_shape(DType::F16).unwrap();
            assert_eq!((m.m, m.n, m.k), (16, 8, 16));
            assert!(t.mma_sync_shape(DType::F32).is_none());
        }
        assert_eq!(SM80.template_shape(DType::BF16).map(|s| (s.instr, s.threads)), Some(("mma.sync", 32)));
        assert_eq!(SM90.template_shape(DType::F16).map(|s| (s.instr, s.m, s.threads)), Some(("wgmma", 64, 128)));
        assert!(TARGETS.iter().all(|t| t.peak_tensor_tflops > 0.0 && t.dram_gbps > 0.0));
        // The L2 feeds the SMs faster than DRAM, shared memory faster still.
        for t in TARGETS {
            let smem_gbps = (t.smem_bytes_per_clock * t.sm_count) as f64 * t.clock_mhz / 1e3;
            assert!(t.dram_gbps < t.l2_gbps && t.l2_gbps < smem_gbps, "{}", t.name);
        }
    }

    #[test]
    fn the_cpu_row_counts_its_peak_from_pipes_lanes_and_clock() {
        // Zen 3's 32 single-precision FLOP per clock [AMD19h].
        assert_eq!(ZEN3.flops_per_clock(), 32, "two 8-lane FMA pipes");
        assert_eq!(ZEN3.peak_flops(1), ZEN3.flops_per_clock() as f64 * ZEN3.clock_mhz * 1e6);
        assert_eq!(ZEN3.peak_flops(0), ZEN3.peak_flops(1));
        assert_eq!(ZEN3.peak_flops(4), 4.0 * ZEN3.peak_flops(1));
        // Each thread streams its share until the socket's bandwidth caps them.
        assert_eq!(ZEN3.bandwidth(1), ZEN3.dram_gbps_per_core * 1e9);
        assert_eq!(ZEN3.bandwidth(2), 2.0 * ZEN3.bandwidth(1));
        assert_eq!(ZEN3.bandwidth(1 << 10), ZEN3.dram_gbps * 1e9);
        assert_eq!(ZEN3.l3_per_core() * ZEN3.l3_cores, ZEN3.l3_bytes);
        let lanes: Vec<u64> = Isa::ALL.into_iter().map(f32_lanes).collect();
        assert_eq!(lanes, [4, 8, 16], "narrowest first, each twice the last");
        assert!(ZEN3.l1d_bytes < ZEN3.l2_bytes && ZEN3.l2_bytes < ZEN3.l3_per_core());
    }

    #[test]
    fn the_host_is_the_cpu_row_with_this_machines_clock_and_isa() {
        let host = CpuTarget::host();
        assert_eq!(host.isa, tgc_runtime::cpu_rt::ukernel_isa());
        assert_eq!(host.clock_mhz, cpu_mhz().unwrap_or(ZEN3.clock_mhz));
        assert!(host.clock_mhz > 0.0);
        let assumed = CpuTarget { isa: ZEN3.isa, clock_mhz: ZEN3.clock_mhz, ..host };
        assert_eq!(assumed, ZEN3, "caches, pipes and bandwidths are the row's");
    }
}

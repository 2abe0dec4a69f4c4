//! The CUDA C of the SM90 statements (a part of the printer, [`super`]):
//! TMA copies completing on mbarriers and `wgmma` from shared-memory
//! matrix descriptors, as the hand-written kernel of `docs/sm90.md`
//! prints them (measured there on an H200).
//!
//! | IR | CUDA C |
//! |----|--------|
//! | `MbarrierInit` | `mbarrier.init.shared::cta.b64 [b], count;` (PTX ISA "Parallel Synchronization and Communication Instructions: mbarrier") |
//! | `FenceMbarrierInit` | `fence.mbarrier_init.release.cluster;` ("membar/fence") |
//! | `MbarrierArriveExpectTx` | `mbarrier.arrive.expect_tx.shared::cta.b64 _, [b], bytes;` |
//! | `MbarrierWait` | `tgc_mbar_wait(b, parity)`: `mbarrier.try_wait.parity` in a loop |
//! | `MbarrierArrive` | `mbarrier.arrive.shared::cta.b64 _, [b];`; to a peer: `tgc_mbar_arrive_cluster(b, cta)`: `mapa.shared::cluster.u32` then `mbarrier.arrive.shared::cluster.b64` with the default `.release.cta` semantics ("Data Movement and Conversion Instructions: mapa"; the explicit `.release.cluster` compiles to a CTA and a GPU `MEMBAR` before every arrival, CUTLASS's `ClusterBarrier::arrive` uses this form) |
//! | `ClusterSync` | `barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;` ("barrier.cluster") |
//! | `SetMaxNReg` | `setmaxnreg.{inc\|dec}.sync.aligned.u32 regs;` ("Miscellaneous Instructions: setmaxnreg", sm_90a) |
//! | `TmaLoad` | `tgc_tma_load_2d(dst, &map, b, c0, c1)`: `cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes` ("Data Movement and Conversion Instructions: cp.async.bulk.tensor"); multicast: `tgc_tma_load_2d_multicast(…, mask)`, the same with `.multicast::cluster` and a 16-bit `ctaMask` |
//! | `FenceProxyAsync` | `fence.proxy.async.shared::cta;` ("membar/fence") |
//! | `WgmmaFence` / `WgmmaCommit` / `WgmmaWait` | `wgmma.fence.sync.aligned;` / `wgmma.commit_group.sync.aligned;` / `wgmma.wait_group.sync.aligned N;`, with `tgc_pin` of every `wgmma` operand array before the fence and after the wait |
//! | `Wgmma` | `wgmma.mma_async.sync.aligned.m64nNk16.f32.T.T {d…}, da, db, scale_d, 1, 1, 0, trans_b;` with the descriptors made by `tgc_wgmma_desc` ("Asynchronous Warpgroup Level Matrix Multiply-Accumulate", "Matrix Descriptor Format") |
//!
//! A tensor-map parameter prints as `const __grid_constant__
//! tgc_tensor_map`, 128 bytes aligned to 64 (the driver's `CUtensorMap`;
//! no header is included). Descriptor starts and TMA destinations are
//! printed unswizzled: the hardware applies the 128-byte swizzle to the
//! address bits, which is why the kernel's shared-memory base is aligned
//! to [`Kernel::smem_base_align`].

use std::fmt::Write;

use crate::DType;

use super::*;

/// Device helpers of the SM90 statements (printed once per unit that has one).
pub(super) const SM90_PRELUDE: &str = r#"
// SM90 helpers: TMA tensor maps, mbarrier waits, wgmma descriptors.
struct __align__(64) tgc_tensor_map { unsigned long long opaque[16]; }; // CUtensorMap
__device__ __forceinline__ void tgc_mbar_wait(unsigned bar, unsigned parity) {
    asm volatile("{\n.reg .pred p;\nTGC_WAIT_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 "@!p bra TGC_WAIT_%=;\n}\n" :: "r"(bar), "r"(parity) : "memory");
}
__device__ __forceinline__ void tgc_tma_load_2d(unsigned dst, const tgc_tensor_map* map, unsigned bar, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n"
                 :: "r"(dst), "l"((unsigned long long)map), "r"(bar), "r"(c0), "r"(c1) : "memory");
}
__device__ __forceinline__ void tgc_tma_load_2d_multicast(unsigned dst, const tgc_tensor_map* map, unsigned bar, int c0, int c1, unsigned short mask) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;\n"
                 :: "r"(dst), "l"((unsigned long long)map), "r"(bar), "r"(c0), "r"(c1), "h"(mask) : "memory");
}
// An arrival on the mbarrier at `bar`'s offset in CTA `cta` of the cluster.
__device__ __forceinline__ void tgc_mbar_arrive_cluster(unsigned bar, unsigned cta) {
    asm volatile("{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
                 "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" :: "r"(bar), "r"(cta) : "memory");
}
// Keeps the compilers from moving any read or write of the register array `r`
// across this point (as CUTLASS's warpgroup_fence_operand): printed before each
// wgmma.fence and after each wait for every wgmma operand array, so that no
// register code moves past a fence to its wgmma (where ptxas would inject a
// warpgroup.arrive, advisory C7519) or above a wait.
template <int N> __device__ __forceinline__ void tgc_pin(float (&r)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i]) :: "memory");
}
template <int N> __device__ __forceinline__ void tgc_pin(unsigned (&r)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i]) :: "memory");
}
// A wgmma matrix descriptor: start address, leading and stride byte
// offsets (in 16-byte units), swizzle mode in bits 62-63 (1: 128 bytes).
__device__ __forceinline__ unsigned long long tgc_wgmma_desc(unsigned addr, unsigned lbo, unsigned sbo, unsigned mode) {
    return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)((lbo >> 4) & 0x3FFF) << 16) |
           ((unsigned long long)((sbo >> 4) & 0x3FFF) << 32) | ((unsigned long long)mode << 62);
}
"#;

/// Whether `k` has an SM90 statement or a tensor-map parameter (its unit
/// needs [`SM90_PRELUDE`]).
pub(super) fn uses_sm90(k: &Kernel) -> bool {
    let mut any = k.params.iter().any(|p| matches!(p.kind, ParamKind::TensorMap(_)));
    k.walk(&mut |_, s| any |= s.min_arch() == Arch::Sm90 && !matches!(s, Stmt::Sm90(Sm90Stmt::GridDepControlWait)));
    any
}

/// The descriptor's swizzle mode (PTX ISA "Matrix Descriptor Format":
/// 0 none, 1 128-byte); `None` for a swizzle no mode is.
pub(super) fn desc_mode(s: Swizzle) -> Option<u32> {
    if s == Swizzle::IDENTITY {
        Some(0)
    } else if s == Swizzle::B128 {
        Some(1)
    } else {
        None
    }
}

impl Printer<'_> {
    /// `tgc_pin(r);` for each register array a `wgmma` uses (see the
    /// prelude's `tgc_pin`).
    fn pin_wgmma_operands(&self, out: &mut String, tag: &str) {
        let pinned: Vec<String> = self
            .regs
            .iter()
            .zip(&self.wgmma_regs)
            .filter(|(_, &used)| used)
            .map(|(name, _)| format!("tgc_pin({name});"))
            .collect();
        if !pinned.is_empty() {
            writeln!(out, "{tag}{}", pinned.join(" ")).unwrap();
        }
    }

    /// The 32-bit shared address of `r` without its swizzle (a descriptor
    /// start, a TMA destination or an mbarrier), checked to carry its
    /// buffer's swizzle.
    fn smem_raw_addr(&self, r: &SmemRef, stmt: u32) -> Result<String, CudaError> {
        Ok(format!("{} + {}", self.smem_base(r, stmt)?, self.expr_u32(&r.offset, stmt)?))
    }

    fn desc(&self, d: &MatrixDesc, stmt: u32) -> Result<String, CudaError> {
        let mode = desc_mode(d.start.swizzle).ok_or_else(|| {
            self.err(stmt, Fault::Swizzle, format!("no wgmma descriptor mode is the swizzle {}", d.start.swizzle))
        })?;
        Ok(format!("tgc_wgmma_desc({}, {}u, {}u, {mode}u)", self.smem_raw_addr(&d.start, stmt)?, d.lbo, d.sbo))
    }

    /// Prints one SM90 statement (the caller matched it).
    pub(super) fn sm90_stmt(&self, out: &mut String, s: &Sm90Stmt, id: u32, tag: &str) -> Result<(), CudaError> {
        match s {
            Sm90Stmt::MbarrierInit { bar, count } => writeln!(
                out,
                "{tag}asm volatile(\"mbarrier.init.shared::cta.b64 [%0], %1;\\n\" :: \"r\"({}), \"r\"({count}u));",
                self.smem_raw_addr(bar, id)?
            )
            .unwrap(),
            Sm90Stmt::FenceMbarrierInit => writeln!(
                out,
                "{tag}asm volatile(\"fence.mbarrier_init.release.cluster;\\n\" ::: \"memory\");"
            )
            .unwrap(),
            Sm90Stmt::MbarrierArriveExpectTx { bar, bytes } => writeln!(
                out,
                "{tag}asm volatile(\"mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\\n\" :: \"r\"({}), \"r\"({bytes}u) : \"memory\");",
                self.smem_raw_addr(bar, id)?
            )
            .unwrap(),
            Sm90Stmt::MbarrierWait { bar, parity } => writeln!(
                out,
                "{tag}tgc_mbar_wait({}, {});",
                self.smem_raw_addr(bar, id)?,
                self.expr_u32(parity, id)?
            )
            .unwrap(),
            Sm90Stmt::MbarrierArrive { bar, cta: None } => writeln!(
                out,
                "{tag}asm volatile(\"mbarrier.arrive.shared::cta.b64 _, [%0];\\n\" :: \"r\"({}) : \"memory\");",
                self.smem_raw_addr(bar, id)?
            )
            .unwrap(),
            Sm90Stmt::MbarrierArrive { bar, cta: Some(cta) } => writeln!(
                out,
                "{tag}tgc_mbar_arrive_cluster({}, {});",
                self.smem_raw_addr(bar, id)?,
                self.expr_u32(cta, id)?
            )
            .unwrap(),
            Sm90Stmt::ClusterSync => writeln!(
                out,
                "{tag}asm volatile(\"barrier.cluster.arrive.release.aligned;\\nbarrier.cluster.wait.acquire.aligned;\\n\" ::: \"memory\");"
            )
            .unwrap(),
            Sm90Stmt::SetMaxNReg { inc, regs } => {
                if !is_maxnreg_count(*regs) {
                    return Err(self.err(id, Fault::BadValue, format!("setmaxnreg {regs}: a multiple of 8 in 24..=256")));
                }
                let op = if *inc { "inc" } else { "dec" };
                writeln!(out, "{tag}asm volatile(\"setmaxnreg.{op}.sync.aligned.u32 {regs};\\n\");").unwrap()
            }
            Sm90Stmt::TmaLoad { dst, map, coords, bar, multicast } => {
                if !matches!(self.k.params.get(map.0 as usize).map(|p| p.kind), Some(ParamKind::TensorMap(_))) {
                    return Err(self.err(id, Fault::BadId, format!("parameter {} is not a tensor map", map.0)));
                }
                let (name, mask) = match multicast {
                    None => ("tgc_tma_load_2d", String::new()),
                    Some(m) => ("tgc_tma_load_2d_multicast", format!(", (unsigned short){m}u")),
                };
                writeln!(
                    out,
                    "{tag}{name}({}, &{}, {}, (int){}, (int){}{mask});",
                    self.smem_raw_addr(dst, id)?,
                    self.params[map.0 as usize],
                    self.smem_raw_addr(bar, id)?,
                    self.expr(&coords[0], Some(id))?,
                    self.expr(&coords[1], Some(id))?
                )
                .unwrap()
            }
            Sm90Stmt::FenceProxyAsync => {
                writeln!(out, "{tag}asm volatile(\"fence.proxy.async.shared::cta;\\n\" ::: \"memory\");").unwrap()
            }
            Sm90Stmt::WgmmaFence => {
                self.pin_wgmma_operands(out, &tag);
                writeln!(out, "{tag}asm volatile(\"wgmma.fence.sync.aligned;\\n\" ::: \"memory\");").unwrap()
            }
            Sm90Stmt::WgmmaCommit => {
                writeln!(out, "{tag}asm volatile(\"wgmma.commit_group.sync.aligned;\\n\" ::: \"memory\");").unwrap()
            }
            Sm90Stmt::WgmmaWait { pending } => {
                writeln!(out, "{tag}asm volatile(\"wgmma.wait_group.sync.aligned {pending};\\n\" ::: \"memory\");")
                    .unwrap();
                self.pin_wgmma_operands(out, &tag);
            }
            Sm90Stmt::Wgmma { ab, n, d, a, b, trans_b, scale_d } => {
                let t = match ab {
                    DType::F16 => "f16",
                    DType::BF16 => "bf16",
                    other => return Err(self.err(id, Fault::FragmentShape, format!("wgmma on {other} operands"))),
                };
                if *n == 0 || n % 8 != 0 || *n > 256 {
                    return Err(self.err(id, Fault::FragmentShape, format!("wgmma m64n{n}k16: n is 8, 16, …, 256")));
                }
                if self.reg_kind(d, id)? != RegKind::F32 {
                    return Err(self.err(id, Fault::FragmentShape, "wgmma accumulates into f32 registers"));
                }
                let count = (n / 2) as i64;
                let regs: Vec<String> = (0..count)
                    .map(|i| self.reg(&RegRef { reg: d.reg, index: d.index.clone() + i }, id).map(|r| format!("\"+f\"({r})")))
                    .collect::<Result<_, _>>()?;
                let slots: Vec<String> = (0..count).map(|i| format!("%{i}")).collect();
                // A from a descriptor: `desc_a, desc_b, scale-d, scale-a,
                // scale-b, trans-a, trans-b`; from registers: `{a0..a3},
                // desc_b, scale-d, scale-a, scale-b, trans-b` (no trans-a).
                let (a_slot, a_inputs, trans_a) = match a {
                    WgmmaA::Smem(a) => (format!("%{count}"), vec![format!("\"l\"({})", self.desc(a, id)?)], ", 0"),
                    WgmmaA::Regs(r) => {
                        if self.reg_kind(r, id)? != RegKind::B16x2 {
                            return Err(self.err(id, Fault::FragmentShape, "wgmma's A registers hold b16 pairs"));
                        }
                        let mut inputs = Vec::new();
                        for j in 0..4 {
                            let x = self.reg(&RegRef { reg: r.reg, index: r.index.clone() + j }, id)?;
                            inputs.push(format!("\"r\"({x})"));
                        }
                        let slots: Vec<String> = (count..count + 4).map(|i| format!("%{i}")).collect();
                        (format!("{{{}}}", slots.join(", ")), inputs, "")
                    }
                };
                let b_slot = count + a_inputs.len() as i64;
                let a_inputs = a_inputs.join(", ");
                writeln!(
                    out,
                    "{tag}asm volatile(\"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{t}.{t} {{{}}}, {a_slot}, %{b_slot}, {}, 1, 1{trans_a}, {};\\n\" : {} : {a_inputs}, \"l\"({}));",
                    slots.join(", "),
                    u32::from(*scale_d),
                    u32::from(*trans_b),
                    regs.join(", "),
                    self.desc(b, id)?
                )
                .unwrap()
            }
            Sm90Stmt::GridDepControlWait => {
                writeln!(out, "{tag}asm volatile(\"griddepcontrol.wait;\\n\" ::: \"memory\");").unwrap()
            }
        }
        Ok(())
    }
}

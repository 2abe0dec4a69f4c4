//! The CUDA toolchain of `scripts/setup.sh` compiles an sm_80 tensor-core
//! kernel with NVRTC, and ptxas and cuobjdump show it took the intended path.
//! No GPU is needed. Without the toolchain these tests fail and say to run
//! `bash scripts/setup.sh` (which `scripts/test.sh` does first).

use tgc_core::gpu::toolchain::{sass_opcodes, Arch, Error, Toolchain};

/// One warp: a 16×16 f16 A tile global → shared with `cp.async`, into
/// registers with `ldmatrix.x4`, times an 16×8 B fragment read directly,
/// with one `mma.sync.m16n8k16` into f32. Inline PTX, no headers.
const MMA_KERNEL: &str = r#"
extern "C" __global__ void mma_m16n8k16(const uint4* __restrict__ a, const unsigned* __restrict__ b,
                                        float* __restrict__ c) {
    __shared__ __align__(128) uint4 tile[32];
    unsigned lane = threadIdx.x;
    unsigned dst = (unsigned)__cvta_generic_to_shared(&tile[lane]);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(dst), "l"(a + lane));
    asm volatile("cp.async.commit_group;\n" ::);
    asm volatile("cp.async.wait_group 0;\n" ::);
    __syncwarp();
    // Row lane % 16, column half (lane / 16) * 8 of the 16×16 tile (32-byte rows).
    unsigned row = (unsigned)__cvta_generic_to_shared(&tile[(lane % 16) * 2 + lane / 16]);
    unsigned a0, a1, a2, a3;
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3) : "r"(row));
    unsigned b0 = b[lane * 2], b1 = b[lane * 2 + 1];
    float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    c[lane * 4 + 0] = d0;
    c[lane * 4 + 1] = d1;
    c[lane * 4 + 2] = d2;
    c[lane * 4 + 3] = d3;
}
"#;

fn toolchain() -> Toolchain {
    Toolchain::locate().unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn sm80_mma_kernel_uses_tensor_cores_and_async_copies() {
    let tc = toolchain();
    let compiled = tc.compile(MMA_KERNEL, "mma.cu", Arch::Sm80, &[]).unwrap_or_else(|e| panic!("{e}"));
    assert!(compiled.ptx.contains(".target sm_80"), "{}", compiled.ptx);
    assert!(compiled.ptx.contains("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"));
    assert_eq!(&compiled.cubin[..4], b"\x7fELF", "a cubin is an ELF file");

    let sass = tc.sass(&compiled.cubin).unwrap_or_else(|e| panic!("{e}"));
    let opcodes = sass_opcodes(&sass);
    for wanted in ["HMMA.16816.F32", "LDGSTS.E.BYPASS.128", "LDSM.16.M88.4"] {
        assert!(opcodes.contains(wanted), "no {wanted} in {opcodes:?}\n{sass}");
    }

    let resources = tc.ptxas_resources(&compiled.ptx, Arch::Sm80).unwrap_or_else(|e| panic!("{e}"));
    let [kernel] = resources.as_slice() else { panic!("one kernel expected: {resources:?}") };
    assert_eq!(kernel.function, "mma_m16n8k16");
    assert_eq!((kernel.spill_stores, kernel.spill_loads, kernel.stack_frame), (0, 0, 0), "{kernel:?}");
    assert_eq!(kernel.shared_bytes, 512, "{kernel:?}");
    assert!(kernel.registers > 0 && kernel.registers <= 64, "{kernel:?}");
}

#[test]
fn sm90a_compiles_the_same_kernel() {
    let compiled = toolchain().compile(MMA_KERNEL, "mma.cu", Arch::Sm90a, &[]).unwrap_or_else(|e| panic!("{e}"));
    assert!(compiled.ptx.contains(".target sm_90a"), "{}", compiled.ptx);
    assert!(!compiled.cubin.is_empty());
}

#[test]
fn a_compile_error_comes_back_with_the_log() {
    let err = toolchain().compile("__global__ void k() { undeclared(); }", "bad.cu", Arch::Sm80, &[]).unwrap_err();
    let Error::Compile { name, log, .. } = &err else { panic!("{err}") };
    assert_eq!(name, "bad.cu");
    assert!(log.contains("undeclared"), "{log}");
}

/// One warpgroup's `wgmma.m64n8k16` from two shared-memory descriptors
/// adding to four f32 accumulators per thread read from `out`.
/// `LOAD_AFTER_FENCE` decides where they are read: between `wgmma.fence`
/// and the `wgmma` (the order PTX ISA forbids: a register write needs a
/// fence after it), or before the fence, held there by empty `asm`
/// operands.
const WGMMA_KERNEL: &str = r#"
extern "C" __global__ void wgmma_m64n8k16(float* out, unsigned long long da, unsigned long long db) {
    float d[4];
#if !LOAD_AFTER_FENCE
    for (int i = 0; i < 4; ++i) { d[i] = out[threadIdx.x * 4 + i]; asm volatile("" : "+f"(d[i]) :: "memory"); }
#endif
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#if LOAD_AFTER_FENCE
    for (int i = 0; i < 4; ++i) d[i] = out[threadIdx.x * 4 + i];
#endif
    asm volatile("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %5, 1, 1, 1, 0, 0;\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "l"(da), "l"(db));
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    for (int i = 0; i < 4; ++i) out[threadIdx.x * 4 + i] = d[i];
}
"#;

#[test]
fn a_ptxas_c75xx_advisory_is_an_error() {
    let tc = toolchain();
    let err = tc.compile(WGMMA_KERNEL, "wgmma.cu", Arch::Sm90a, &["-DLOAD_AFTER_FENCE=1"]);
    let Err(Error::Advisory { name, advisories, .. }) = &err else { panic!("{:?}", err.map(|c| c.ptx)) };
    assert_eq!(name, "wgmma.cu");
    assert!(advisories.iter().any(|a| a.contains("(C7519)")), "{advisories:?}");
    let compiled = tc.compile(WGMMA_KERNEL, "wgmma.cu", Arch::Sm90a, &["-DLOAD_AFTER_FENCE=0"]);
    let compiled = compiled.unwrap_or_else(|e| panic!("{e}"));
    assert!(compiled.ptx.contains("wgmma.mma_async"), "{}", compiled.ptx);
}

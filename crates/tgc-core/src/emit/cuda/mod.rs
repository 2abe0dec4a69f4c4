//! The CUDA C printer: a GPU dialect IR [`Kernel`] as CUDA C++ with inline
//! PTX (the `cu` stage), and its compilation to PTX and a cubin for the
//! newest architecture among the kernels with NVRTC ([`compile`]).
//!
//! What each IR statement prints as (PTX ISA 9.0 sections named):
//!
//! | IR | CUDA C |
//! |----|--------|
//! | `Let` | `const long long v = e;` |
//! | `For` | `for (long long v = …)`, `#pragma unroll` (or `unroll 1`) |
//! | `If` | `if (…) { … } else { … }` |
//! | `Barrier` | `__syncthreads();` (`bar.sync 0`, "Parallel Synchronization and Communication Instructions: bar, barrier") |
//! | `BarrierNamed` | `bar.sync id, threads;` (the same section) |
//! | `WarpSpecialize` | `if (threadIdx.x < producer_threads) { producer } else { consumer }` |
//! | `CpAsync` | `cp.async.cg.shared.global [d], [s], 16, src_size;` (`.ca` for 4 and 8 bytes: `.cg` takes only 16; "Data Movement and Conversion Instructions: cp.async") |
//! | `CommitGroup` / `WaitGroup` | `cp.async.commit_group;` / `cp.async.wait_group N;` ("cp.async.commit_group", "cp.async.wait_group") |
//! | `CopySync` | `tgc_copy_sync(…)`: `ld.global` + `st.shared`, zero fill past `src_bytes` |
//! | `LdMatrix` | `ldmatrix.sync.aligned.m8n8.xN[.trans].shared.b16 {…}, [a];` ("Warp Level Matrix Load Instruction: ldmatrix") |
//! | `MmaSync` | `mma.sync.aligned.m16n8k16.row.col.f32.T.T.f32 {d}, {a}, {b}, {c};` ("Warp Level Matrix Multiply-Accumulate Instructions: mma", "Matrix Fragments for mma.m16n8k16 with floating point type") |
//! | `MovF32` | `r[i] = 0.0f;` |
//! | `Epilogue` | the ops on the accumulator, in place, in `f32` (GELU, its tanh form and tanh through `double`: `ir::EpilogueOp` states each formula) |
//! | `StGlobalVec` | `st.global[.v2/.v4].{b16,b32,f32}` ("Data Movement and Conversion Instructions: st"); 16-bit values packed in pairs into `.b32` words above two elements |
//! | `GridDepControlWait` | `griddepcontrol.wait;` ("griddepcontrol", sm_90) |
//! | `MbarrierInit`, `FenceMbarrierInit`, `MbarrierArriveExpectTx`, `MbarrierWait`, `TmaLoad`, `WgmmaFence`, `Wgmma`, `WgmmaCommit`, `WgmmaWait` | the SM90 statements, `sm90.rs` (`mbarrier.*`, `cp.async.bulk.tensor.2d`, `wgmma.*`) |
//! | `Compute`, `Accumulate`, `ShflBfly`, `ShflUpScan`, `ShflIdx`, `StGlobal`, `LdGlobalVec` | the SIMT statements, `simt.rs` (scalar C in `float`/`int`, `shfl.sync.{bfly,up,idx}.b32`, `ld.global[.v2/.v4].b32`) |
//!
//! Invariants of the printed source:
//!
//! - Every IR statement's line starts with `/* sN */`, N its pre-order id
//!   (the ids of the IR text dump and of verifier errors).
//! - Integer expressions are evaluated in `long long` as the IR defines
//!   (`i64`, C semantics): thread and block indices and `int` parameters
//!   are widened before any arithmetic.
//! - Shared-memory addresses are 32-bit `.shared` addresses:
//!   `__cvta_generic_to_shared` of the kernel's one `extern __shared__`
//!   array, plus the buffer's offset, plus the buffer's swizzle of the
//!   in-buffer offset. The swizzle functions are printed from
//!   [`Swizzle::expr`], the IR's own formula, not written a second time.
//! - The kernel is `extern "C" __global__` with the symbol [`Kernel::symbol`] (the
//!   kernel's name made a C identifier) and `__launch_bounds__(threads)`,
//!   or `__launch_bounds__(threads, m)` when the kernel states
//!   [`Kernel::min_blocks_per_sm`]; a clustered kernel also has
//!   `__cluster_dims__(n, 1, 1)` (its cluster size is fixed at compile
//!   time, so a plain `cuLaunchKernel` launches it).
//! - No header is included: 16-bit floats travel as `unsigned short` bits
//!   (`tgc_f16`, `tgc_bf16`), converted with `cvt` in inline PTX
//!   (bf16 → f32 is a 16-bit shift: `cvt.f32.bf16` needs sm_90).
//!
//! Launch: grid and block as the comment above the kernel says, with the
//! kernel's `smem_bytes` of dynamic shared memory (above 48 KiB it needs
//! `cudaFuncAttributeMaxDynamicSharedMemorySize`); the launches of a whole
//! program are [`crate::gpu::program::GpuProgram::steps`].
//!
//! The tests compile it with NVRTC and read what ptxas and cuobjdump
//! report; the GPU tier runs it.

use std::collections::{BTreeSet, HashSet};
use std::fmt::Write;

use crate::DType;

use crate::gpu::dialect::*;
use crate::gpu::toolchain::{self, Compiled, Toolchain};

/// Why a kernel could not be printed or compiled.
#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    /// The kernel has something the printer cannot express (a fragment of
    /// the wrong size, a store width PTX has no instruction for, …).
    #[error("CUDA C printer: {0}")]
    Print(GpuError),
    /// NVRTC or the toolchain failed.
    #[error(transparent)]
    Toolchain(#[from] toolchain::Error),
}

impl From<GpuError> for CudaError {
    fn from(e: GpuError) -> CudaError {
        CudaError::Print(e)
    }
}

/// The toolchain architecture a kernel's `arch` compiles for.
pub fn toolchain_arch(arch: Arch) -> toolchain::Arch {
    match arch {
        Arch::Sm80 => toolchain::Arch::Sm80,
        Arch::Sm90 => toolchain::Arch::Sm90a,
    }
}

/// `kernel` as one CUDA C++ translation unit (the `cu` stage).
///
/// Errors: [`CudaError::Print`] naming the statement the printer cannot
/// express.
pub fn print(kernel: &Kernel) -> Result<String, CudaError> {
    print_unit(std::slice::from_ref(kernel))
}

/// Several kernels in one translation unit, sharing one prelude (one NVRTC
/// compilation for all of them). Their symbols must differ.
///
/// Errors: as [`print()`]; [`CudaError::Print`] for two kernels with one
/// symbol.
pub fn print_unit(kernels: &[Kernel]) -> Result<String, CudaError> {
    let mut seen = HashSet::new();
    for k in kernels {
        if !seen.insert(k.symbol()) {
            return Err(GpuError::new(Fault::BadId, None, format!("two kernels named `{}`", k.symbol())).into());
        }
    }
    let mut out = String::new();
    out.push_str(PRELUDE);
    let swizzles: BTreeSet<(u32, u32, u32)> = kernels
        .iter()
        .flat_map(|k| k.smem.iter().map(|b| b.swizzle))
        .filter(|s| s.bits != 0)
        .map(|s| (s.bits, s.base, s.shift))
        .collect();
    for (bits, base, shift) in swizzles {
        out.push_str(&swizzle_function(Swizzle { bits, base, shift })?);
    }
    if kernels.iter().any(uses_simt) {
        out.push_str(SIMT_PRELUDE);
    }
    if kernels.iter().any(uses_sm90) {
        out.push_str(SM90_PRELUDE);
    }
    for k in kernels {
        out.push('\n');
        Printer::new(k)?.kernel(&mut out)?;
    }
    Ok(out)
}

/// Prints `kernels` as one unit and compiles it with NVRTC for the newest
/// architecture among them (a kernel's `arch` is the oldest it runs on:
/// an sm80 SIMT kernel beside an sm90 `wgmma` kernel compiles for
/// sm_90a), with `-lineinfo` off. Resource usage comes from
/// [`Toolchain::ptxas_resources`] on the PTX, not from NVRTC's log: the
/// CUDA 13.0.88 toolkit's NVRTC on the H100 machine left `-Xptxas=-v`'s
/// report out of its log (the wheel's NVRTC put it there).
///
/// Errors: [`CudaError::Print`] as [`print_unit`], or for no kernel;
/// [`CudaError::Toolchain`] when NVRTC fails.
pub fn compile(tc: &Toolchain, kernels: &[Kernel], name: &str) -> Result<(String, Compiled), CudaError> {
    let Some(arch) = kernels.iter().map(|k| k.arch).max() else {
        return Err(GpuError::new(Fault::BadValue, None, "no kernel to compile").into());
    };
    let source = print_unit(kernels)?;
    let compiled = tc.compile(&source, name, toolchain_arch(arch), &[])?;
    Ok((source, compiled))
}

/// Helpers every unit starts with: 16-bit float bits, conversions with
/// inline PTX, `long long` min/max/floord, the synchronous copy.
const PRELUDE: &str = r#"// Generated by tgc from the GPU dialect IR; `/* sN */` is the IR statement id.
// No headers: 16-bit floats are their bits.
typedef unsigned short tgc_f16;  // IEEE binary16 bits
typedef unsigned short tgc_bf16; // bfloat16 bits

__device__ __forceinline__ long long tgc_min(long long a, long long b) { return a < b ? a : b; }
__device__ __forceinline__ long long tgc_max(long long a, long long b) { return a > b ? a : b; }
// GATHER's position for index value v on an axis of d elements (tiny::op::gather_position):
// negative counts from the end, then clamped to [0, d).
__device__ __forceinline__ long long tgc_gather_at(int v, long long d) { long long i = v < 0 ? (long long)v + d : (long long)v; return i < 0 ? 0 : i >= d ? d - 1 : i; }
// floor(n / d) for d > 0 (isl's `floord`); a function, so `n` is computed once.
__device__ __forceinline__ long long tgc_floord(long long n, long long d) { return n < 0 ? -((-n + d - 1) / d) : n / d; }

__device__ __forceinline__ float tgc_f16_to_f32(tgc_f16 h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
__device__ __forceinline__ float tgc_bf16_to_f32(tgc_bf16 h) { return __uint_as_float(((unsigned)h) << 16); }
__device__ __forceinline__ tgc_f16 tgc_f32_to_f16(float f) {
    tgc_f16 h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
__device__ __forceinline__ tgc_bf16 tgc_f32_to_bf16(float f) {
    tgc_bf16 h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
// Two 16-bit values in one .b32 word, `lo` at the lower address.
__device__ __forceinline__ unsigned tgc_pack_b16x2(unsigned short lo, unsigned short hi) {
    return (unsigned)lo | ((unsigned)hi << 16);
}

// `bytes` bytes global -> shared through registers; bytes past `src_bytes`
// are zero and not read.
__device__ __forceinline__ void tgc_copy_sync(unsigned dst, const void* src, unsigned bytes, unsigned src_bytes) {
    if (src_bytes >= bytes && bytes == 16) {
        uint4 v = *(const uint4*)src;
        asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" :: "r"(dst), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
    } else if (src_bytes >= bytes && bytes == 8) {
        uint2 v = *(const uint2*)src;
        asm volatile("st.shared.v2.b32 [%0], {%1, %2};" :: "r"(dst), "r"(v.x), "r"(v.y) : "memory");
    } else if (src_bytes >= bytes && bytes == 4) {
        unsigned v = *(const unsigned*)src;
        asm volatile("st.shared.b32 [%0], %1;" :: "r"(dst), "r"(v) : "memory");
    } else {
        for (unsigned i = 0; i < bytes; ++i) {
            unsigned short b = i < src_bytes ? ((const unsigned char*)src)[i] : 0;
            asm volatile("st.shared.b8 [%0], %1;" :: "r"(dst + i), "h"(b) : "memory");
        }
    }
}
"#;

/// The C name of the device function for a swizzle.
fn swizzle_name(s: Swizzle) -> String {
    format!("tgc_swizzle_{}_{}_{}", s.bits, s.base, s.shift)
}

/// A swizzle as a device function on 32-bit shared offsets, its body
/// printed from [`Swizzle::expr`].
fn swizzle_function(s: Swizzle) -> Result<String, GpuError> {
    let expr = s.expr(Expr::Var(VarId(0)));
    let mut body = String::new();
    write_c_expr(&mut body, &expr, &|_| "off".to_string(), &|p| Err(format!("parameter {} in a swizzle", p.0)), false)
        .map_err(|m| GpuError::new(Fault::Swizzle, None, m))?;
    Ok(format!(
        "\n// {s} (ir::Swizzle::expr): XOR of the 16-byte chunk index with higher offset bits.\n\
         __device__ __forceinline__ unsigned {}(unsigned off) {{ return {body}; }}\n",
        swizzle_name(s)
    ))
}

/// Writes `e` as C. `var` names variables; `param` prints a scalar
/// parameter (or fails for a pointer). `wide_leaves`: whether leaves are
/// `long long` (kernel expressions) or not (the swizzle's `unsigned`).
fn write_c_expr(
    out: &mut String,
    e: &Expr,
    var: &dyn Fn(VarId) -> String,
    param: &dyn Fn(ParamId) -> Result<String, String>,
    wide_leaves: bool,
) -> Result<(), String> {
    match e {
        Expr::Const(v) => {
            if i32::try_from(*v).is_ok() {
                if *v < 0 {
                    write!(out, "({v})").unwrap();
                } else {
                    write!(out, "{v}").unwrap();
                }
            } else {
                write!(out, "({v}LL)").unwrap();
            }
        }
        Expr::Param(p) => out.push_str(&param(*p)?),
        Expr::Var(v) => out.push_str(&var(*v)),
        Expr::ThreadIdx(d) => write!(out, "(long long)threadIdx.{}", d.name()).unwrap(),
        Expr::BlockIdx(d) => write!(out, "(long long)blockIdx.{}", d.name()).unwrap(),
        Expr::GridDim(d) => write!(out, "(long long)gridDim.{}", d.name()).unwrap(),
        Expr::Bin(op, a, b) => match prelude_call(*op) {
            Some(name) => {
                write!(out, "{name}(").unwrap();
                write_c_expr(out, a, var, param, wide_leaves)?;
                out.push_str(", ");
                write_c_expr(out, b, var, param, wide_leaves)?;
                out.push(')');
            }
            None => {
                out.push('(');
                // Two operands without a `long long` leaf (constants, truth
                // values) would be computed in `int`: widen the left one.
                if wide_leaves && !is_bool_op(*op) && !has_wide_leaf(a) && !has_wide_leaf(b) {
                    out.push_str("(long long)");
                }
                write_c_expr(out, a, var, param, wide_leaves)?;
                write!(out, " {} ", op.symbol()).unwrap();
                write_c_expr(out, b, var, param, wide_leaves)?;
                out.push(')');
            }
        },
        Expr::Select(c, a, b) => {
            out.push('(');
            write_c_expr(out, c, var, param, wide_leaves)?;
            out.push_str(" ? ");
            write_c_expr(out, a, var, param, wide_leaves)?;
            out.push_str(" : ");
            write_c_expr(out, b, var, param, wide_leaves)?;
            out.push(')');
        }
    }
    Ok(())
}

/// The prelude function that computes `op`, for the operators C has no
/// infix form of.
fn prelude_call(op: BinOp) -> Option<&'static str> {
    match op {
        BinOp::Min => Some("tgc_min"),
        BinOp::Max => Some("tgc_max"),
        BinOp::FloorDiv => Some("tgc_floord"),
        BinOp::Add
        | BinOp::Sub
        | BinOp::Mul
        | BinOp::Div
        | BinOp::Rem
        | BinOp::And
        | BinOp::Or
        | BinOp::Xor
        | BinOp::Shl
        | BinOp::Shr
        | BinOp::Lt
        | BinOp::Le
        | BinOp::Eq
        | BinOp::Ne
        | BinOp::LAnd
        | BinOp::LOr => None,
    }
}

/// Operators whose C result is an `int` truth value.
fn is_bool_op(op: BinOp) -> bool {
    matches!(op, BinOp::Lt | BinOp::Le | BinOp::Eq | BinOp::Ne | BinOp::LAnd | BinOp::LOr)
}

/// Whether the C value of `e` is `long long` (it has a variable, parameter
/// or index that is not under a comparison).
fn has_wide_leaf(e: &Expr) -> bool {
    match e {
        Expr::Const(v) => i32::try_from(*v).is_err(),
        Expr::Param(_) | Expr::Var(_) | Expr::ThreadIdx(_) | Expr::BlockIdx(_) | Expr::GridDim(_) => true,
        Expr::Bin(op, a, b) => !is_bool_op(*op) && (has_wide_leaf(a) || has_wide_leaf(b)),
        Expr::Select(_, a, b) => has_wide_leaf(a) || has_wide_leaf(b),
    }
}

/// C and CUDA words a name must not take.
const RESERVED: &[&str] = &[
    "auto",
    "break",
    "case",
    "char",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "goto",
    "if",
    "int",
    "long",
    "register",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
    "volatile",
    "while",
    "bool",
    "true",
    "false",
    "class",
    "template",
    "this",
    "new",
    "delete",
    "asm",
    "inline",
    "threadIdx",
    "blockIdx",
    "blockDim",
    "gridDim",
    "warpSize",
    "min",
    "max",
    "off",
];

/// Prints one kernel: unique C names for its parameters, variables,
/// register arrays and shared buffers.
struct Printer<'k> {
    k: &'k Kernel,
    params: Vec<String>,
    vars: Vec<String>,
    regs: Vec<String>,
    /// Per register array, whether a `wgmma` uses it
    /// ([`Kernel::wgmma_registers`]): the arrays pinned at each
    /// `wgmma.fence` and after each wait.
    wgmma_regs: Vec<bool>,
    smem: Vec<String>,
    next: u32,
}

impl<'k> Printer<'k> {
    fn new(k: &'k Kernel) -> Result<Printer<'k>, CudaError> {
        let mut used: HashSet<String> = HashSet::new();
        used.insert(k.symbol());
        let mut name = |s: &str, fallback: String| {
            let mut base: String =
                s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
            if base.is_empty() || base.starts_with(|c: char| c.is_ascii_digit()) {
                base = fallback;
            }
            if RESERVED.contains(&base.as_str()) || base.starts_with("tgc_") || base.starts_with("__") {
                base = format!("{base}_");
            }
            let mut n = base.clone();
            let mut i = 1;
            while used.contains(&n) {
                n = format!("{base}_{i}");
                i += 1;
            }
            used.insert(n.clone());
            n
        };
        let params = k.params.iter().enumerate().map(|(i, p)| name(&p.name, format!("p{i}"))).collect();
        let regs = k.regs.iter().enumerate().map(|(i, r)| name(&r.name, format!("r{i}"))).collect();
        let smem =
            k.smem.iter().enumerate().map(|(i, b)| name(&format!("{}_smem", b.name), format!("smem{i}"))).collect();
        let vars = k.vars.iter().enumerate().map(|(i, v)| name(v, format!("v{i}"))).collect();
        let threads = k.threads();
        let most = k.arch.target().max_threads_per_block;
        if threads == 0 || threads > most {
            return Err(
                GpuError::new(Fault::BadValue, None, format!("{threads} threads per block (1 to {most})")).into()
            );
        }
        Ok(Printer { k, params, vars, regs, wgmma_regs: k.wgmma_registers(), smem, next: 0 })
    }

    fn err(&self, stmt: u32, fault: Fault, message: impl Into<String>) -> CudaError {
        CudaError::Print(GpuError::new(fault, Some(stmt), message))
    }

    fn expr(&self, e: &Expr, stmt: Option<u32>) -> Result<String, CudaError> {
        let mut out = String::new();
        let var = |v: VarId| self.vars.get(v.0 as usize).cloned().unwrap_or_else(|| format!("v{}", v.0));
        let param = |p: ParamId| match self.k.params.get(p.0 as usize).map(|q| q.kind) {
            Some(ParamKind::I32) => Ok(format!("(long long){}", self.params[p.0 as usize])),
            Some(ParamKind::I64) => Ok(self.params[p.0 as usize].clone()),
            Some(ParamKind::Ptr { .. } | ParamKind::TensorMap(_)) => {
                Err(format!("pointer parameter `{}` used as an integer", self.params[p.0 as usize]))
            }
            None => Err(format!("parameter {} out of range", p.0)),
        };
        write_c_expr(&mut out, e, &var, &param, true)
            .map_err(|m| CudaError::Print(GpuError::new(Fault::BadId, stmt, m)))?;
        Ok(out)
    }

    /// `e` as a condition: without the outer parentheses of a binary
    /// operator (they come from `if (…)`).
    fn cond(&self, e: &Expr, stmt: u32) -> Result<String, CudaError> {
        let s = self.expr(e, Some(stmt))?;
        Ok(match e {
            Expr::Bin(op, ..) if !matches!(op, BinOp::Min | BinOp::Max) => s[1..s.len() - 1].to_string(),
            _ => s,
        })
    }

    /// `e` as a C expression of type `unsigned`.
    fn expr_u32(&self, e: &Expr, stmt: u32) -> Result<String, CudaError> {
        Ok(match e {
            Expr::Const(v) if *v >= 0 && *v <= u32::MAX as i64 => format!("{v}u"),
            _ => format!("(unsigned){}", self.expr(e, Some(stmt))?),
        })
    }

    fn reg(&self, r: &RegRef, stmt: u32) -> Result<String, CudaError> {
        let name = self
            .regs
            .get(r.reg.0 as usize)
            .ok_or_else(|| self.err(stmt, Fault::BadId, "register array out of range"))?;
        Ok(format!("{name}[{}]", self.expr(&r.index, Some(stmt))?))
    }

    fn reg_kind(&self, r: &RegRef, stmt: u32) -> Result<RegKind, CudaError> {
        self.k
            .regs
            .get(r.reg.0 as usize)
            .map(|a| a.kind)
            .ok_or_else(|| self.err(stmt, Fault::BadId, "register array out of range"))
    }

    /// The C name of `r`'s buffer's base address, once `r` is checked to
    /// name a buffer and carry its swizzle.
    fn smem_base(&self, r: &SmemRef, stmt: u32) -> Result<&str, CudaError> {
        let buf = self
            .k
            .smem
            .get(r.buf.0 as usize)
            .ok_or_else(|| self.err(stmt, Fault::BadId, "shared buffer out of range"))?;
        if r.swizzle != buf.swizzle {
            return Err(self.err(
                stmt,
                Fault::Swizzle,
                format!("swizzle {} is not `{}`'s {}", r.swizzle, buf.name, buf.swizzle),
            ));
        }
        Ok(&self.smem[r.buf.0 as usize])
    }

    /// The 32-bit shared address of `r`: buffer base + swizzled offset.
    fn smem_addr(&self, r: &SmemRef, stmt: u32) -> Result<String, CudaError> {
        let base = self.smem_base(r, stmt)?;
        let off = self.expr_u32(&r.offset, stmt)?;
        Ok(if r.swizzle.bits == 0 {
            format!("{base} + {off}")
        } else {
            format!("{base} + {}({off})", swizzle_name(r.swizzle))
        })
    }

    /// `param + offset` as a C pointer expression.
    fn global(&self, g: &GlobalRef, stmt: u32) -> Result<(String, DType), CudaError> {
        let Some(ParamKind::Ptr { dtype, .. }) = self.k.params.get(g.param.0 as usize).map(|p| p.kind) else {
            return Err(self.err(stmt, Fault::BadId, format!("parameter {} is not a pointer", g.param.0)));
        };
        Ok((format!("{} + {}", self.params[g.param.0 as usize], self.expr(&g.offset, Some(stmt))?), dtype))
    }

    fn kernel(&mut self, out: &mut String) -> Result<(), CudaError> {
        let k = self.k;
        let sym = k.symbol();
        let grid: Vec<String> = k.grid.iter().map(|e| self.expr(e, None)).collect::<Result<_, _>>()?;
        writeln!(
            out,
            "// kernel {} ({}): grid ({}), block ({}, {}, {}), {} bytes of dynamic shared memory",
            k.name,
            toolchain_arch(k.arch),
            grid.join(", "),
            k.block[0],
            k.block[1],
            k.block[2],
            k.launch_smem_bytes()
        )
        .unwrap();
        for (b, c) in k.smem.iter().zip(&self.smem) {
            writeln!(
                out,
                "// shared `{}` ({c}): bytes [{}, {}), swizzle {}",
                b.name,
                b.offset,
                b.offset + b.size,
                b.swizzle
            )
            .unwrap();
        }
        let params: Vec<String> = k
            .params
            .iter()
            .zip(&self.params)
            .map(|(p, n)| match p.kind {
                ParamKind::Ptr { dtype, writable } => {
                    format!("{}{}* __restrict__ {n}", if writable { "" } else { "const " }, c_type(dtype))
                }
                ParamKind::I32 => format!("int {n}"),
                ParamKind::I64 => format!("long long {n}"),
                ParamKind::TensorMap(_) => format!("const __grid_constant__ tgc_tensor_map {n}"),
            })
            .collect();
        let bounds = match k.min_blocks_per_sm {
            Some(m) => format!("{}, {m}", k.threads()),
            None => k.threads().to_string(),
        };
        let cluster = if k.cluster > 1 { format!("__cluster_dims__({}, 1, 1) ", k.cluster) } else { String::new() };
        writeln!(out, "extern \"C\" __global__ void {cluster}__launch_bounds__({bounds}) {sym}(").unwrap();
        for (i, p) in params.iter().enumerate() {
            writeln!(out, "    {p}{}", if i + 1 < params.len() { "," } else { "" }).unwrap();
        }
        out.push_str(") {\n");
        if !k.smem.is_empty() {
            out.push_str("    extern __shared__ __align__(128) unsigned char tgc_smem[];\n");
            match k.smem_base_align() {
                16 => {
                    out.push_str("    const unsigned tgc_smem_base = (unsigned)__cvta_generic_to_shared(tgc_smem);\n")
                }
                a => writeln!(
                    out,
                    "    const unsigned tgc_smem_base = ((unsigned)__cvta_generic_to_shared(tgc_smem) + {}u) & ~{}u;",
                    a - 1,
                    a - 1
                )
                .unwrap(),
            }
            for (b, c) in k.smem.iter().zip(&self.smem) {
                writeln!(out, "    const unsigned {c} = tgc_smem_base + {}u;", b.offset).unwrap();
            }
        }
        for (r, c) in k.regs.iter().zip(&self.regs) {
            let ty = match r.kind {
                RegKind::F32 => "float",
                RegKind::B16x2 => "unsigned",
                RegKind::I32 => "int",
            };
            writeln!(out, "    {ty} {c}[{}];", r.len).unwrap();
        }
        self.next = 0;
        self.body(out, &k.body, 1)?;
        out.push_str("}\n");
        Ok(())
    }

    fn body(&mut self, out: &mut String, body: &[Stmt], depth: usize) -> Result<(), CudaError> {
        for s in body {
            self.stmt(out, s, depth)?;
        }
        Ok(())
    }

    fn stmt(&mut self, out: &mut String, s: &Stmt, depth: usize) -> Result<(), CudaError> {
        let id = self.next;
        self.next += 1;
        let pad = "    ".repeat(depth);
        let tag = format!("{pad}/* s{id} */ ");
        match s {
            Stmt::Let { var, value } => {
                writeln!(out, "{tag}const long long {} = {};", self.var(*var, id)?, self.expr(value, Some(id))?)
                    .unwrap();
            }
            Stmt::For { var, start, end, step, unroll, body } => {
                if *step <= 0 {
                    return Err(self.err(id, Fault::BadValue, format!("loop step {step}")));
                }
                let v = self.var(*var, id)?;
                writeln!(out, "{pad}#pragma unroll{}", if *unroll { "" } else { " 1" }).unwrap();
                writeln!(
                    out,
                    "{tag}for (long long {v} = {}; {v} < {}; {v} += {step}) {{",
                    self.expr(start, Some(id))?,
                    self.expr(end, Some(id))?
                )
                .unwrap();
                self.body(out, body, depth + 1)?;
                writeln!(out, "{pad}}}").unwrap();
            }
            Stmt::If { cond, then, otherwise } => {
                writeln!(out, "{tag}if ({}) {{", self.cond(cond, id)?).unwrap();
                self.body(out, then, depth + 1)?;
                if otherwise.is_empty() {
                    writeln!(out, "{pad}}}").unwrap();
                } else {
                    writeln!(out, "{pad}}} else {{").unwrap();
                    self.body(out, otherwise, depth + 1)?;
                    writeln!(out, "{pad}}}").unwrap();
                }
            }
            Stmt::Barrier => writeln!(out, "{tag}__syncthreads(); // bar.sync 0").unwrap(),
            Stmt::BarrierNamed { id: bar, threads } => {
                writeln!(out, "{tag}asm volatile(\"bar.sync {bar}, {threads};\\n\" ::: \"memory\");").unwrap()
            }
            Stmt::WarpSpecialize { producer_threads, producer, consumer } => {
                writeln!(out, "{tag}if (threadIdx.x < {producer_threads}u) {{ // warp-specialised: producer role")
                    .unwrap();
                self.body(out, producer, depth + 1)?;
                writeln!(out, "{pad}}} else {{ // consumer role").unwrap();
                self.body(out, consumer, depth + 1)?;
                writeln!(out, "{pad}}}").unwrap();
            }
            Stmt::Mma(MmaStmt::CpAsync { dst, src, bytes, src_bytes }) => {
                let cache = match bytes {
                    16 => "cg",
                    4 | 8 => "ca",
                    _ => return Err(self.err(id, Fault::BadValue, format!("cp.async of {bytes} bytes (4, 8 or 16)"))),
                };
                let d = self.smem_addr(dst, id)?;
                let (g, _) = self.global(src, id)?;
                let full = matches!(src_bytes, Expr::Const(v) if *v == *bytes as i64);
                if full {
                    writeln!(
                        out,
                        "{tag}asm volatile(\"cp.async.{cache}.shared.global [%0], [%1], {bytes};\\n\" :: \"r\"({d}), \"l\"({g}) : \"memory\");"
                    )
                    .unwrap();
                } else {
                    let n = self.expr_u32(src_bytes, id)?;
                    writeln!(
                        out,
                        "{tag}asm volatile(\"cp.async.{cache}.shared.global [%0], [%1], {bytes}, %2;\\n\" :: \"r\"({d}), \"l\"({g}), \"r\"({n}) : \"memory\");"
                    )
                    .unwrap();
                }
            }
            Stmt::Mma(MmaStmt::CommitGroup) => {
                writeln!(out, "{tag}asm volatile(\"cp.async.commit_group;\\n\" ::: \"memory\");").unwrap()
            }
            Stmt::Mma(MmaStmt::WaitGroup { pending }) => {
                writeln!(out, "{tag}asm volatile(\"cp.async.wait_group {pending};\\n\" ::: \"memory\");").unwrap()
            }
            Stmt::Mma(MmaStmt::CopySync { dst, src, bytes, src_bytes }) => {
                if !matches!(bytes, 2 | 4 | 8 | 16) {
                    return Err(self.err(
                        id,
                        Fault::BadValue,
                        format!("synchronous copy of {bytes} bytes (2, 4, 8 or 16)"),
                    ));
                }
                let d = self.smem_addr(dst, id)?;
                let (g, _) = self.global(src, id)?;
                writeln!(out, "{tag}tgc_copy_sync({d}, {g}, {bytes}u, {});", self.expr_u32(src_bytes, id)?).unwrap();
            }
            Stmt::Mma(MmaStmt::LdMatrix { num, trans, dst, src }) => {
                let n = num.count();
                if dst.len() != n {
                    return Err(self.err(
                        id,
                        Fault::FragmentShape,
                        format!("ldmatrix.x{n} with {} registers", dst.len()),
                    ));
                }
                let mut regs = Vec::new();
                for r in dst {
                    if self.reg_kind(r, id)? != RegKind::B16x2 {
                        return Err(self.err(id, Fault::FragmentShape, "ldmatrix into an f32 register"));
                    }
                    regs.push(format!("\"=r\"({})", self.reg(r, id)?));
                }
                let slots: Vec<String> = (0..n).map(|i| format!("%{i}")).collect();
                writeln!(
                    out,
                    "{tag}asm volatile(\"ldmatrix.sync.aligned.m8n8.x{n}{}.shared.b16 {{{}}}, [%{n}];\\n\" : {} : \"r\"({}));",
                    if *trans { ".trans" } else { "" },
                    slots.join(", "),
                    regs.join(", "),
                    self.smem_addr(src, id)?
                )
                .unwrap();
            }
            Stmt::Mma(MmaStmt::MmaSync { ab, d, a, b, c }) => {
                let t = match ab {
                    DType::F16 => "f16",
                    DType::BF16 => "bf16",
                    other => return Err(self.err(id, Fault::FragmentShape, format!("mma.sync on {other} operands"))),
                };
                if (d.len(), a.len(), b.len(), c.len()) != (4, 4, 2, 4) {
                    return Err(self.err(
                        id,
                        Fault::FragmentShape,
                        format!(
                            "m16n8k16 takes 4, 4, 2, 4 registers, not {}, {}, {}, {}",
                            d.len(),
                            a.len(),
                            b.len(),
                            c.len()
                        ),
                    ));
                }
                let kinds = [(d, RegKind::F32), (a, RegKind::B16x2), (b, RegKind::B16x2), (c, RegKind::F32)];
                for (rs, kind) in kinds {
                    for r in rs {
                        if self.reg_kind(r, id)? != kind {
                            return Err(self.err(
                                id,
                                Fault::FragmentShape,
                                "mma.sync operand of the wrong register kind",
                            ));
                        }
                    }
                }
                let list =
                    |from: usize, n: usize| (from..from + n).map(|i| format!("%{i}")).collect::<Vec<_>>().join(", ");
                let outs: Vec<String> =
                    d.iter().map(|r| Ok(format!("\"=f\"({})", self.reg(r, id)?))).collect::<Result<_, CudaError>>()?;
                let mut ins: Vec<String> = Vec::new();
                for r in a.iter().chain(b) {
                    ins.push(format!("\"r\"({})", self.reg(r, id)?));
                }
                for r in c {
                    ins.push(format!("\"f\"({})", self.reg(r, id)?));
                }
                let inner = format!("{pad}    ");
                writeln!(out, "{tag}asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.{t}.{t}.f32 \"").unwrap();
                writeln!(
                    out,
                    "{inner}\"{{{}}}, {{{}}}, {{{}}}, {{{}}};\\n\"",
                    list(0, 4),
                    list(4, 4),
                    list(8, 2),
                    list(10, 4)
                )
                .unwrap();
                writeln!(out, "{inner}: {}", outs.join(", ")).unwrap();
                writeln!(out, "{inner}: {});", ins.join(", ")).unwrap();
            }
            Stmt::Mma(MmaStmt::MovF32 { dst, value }) => {
                if self.reg_kind(dst, id)? != RegKind::F32 {
                    return Err(self.err(id, Fault::FragmentShape, "an f32 value into a b32 register"));
                }
                writeln!(out, "{tag}{} = {};", self.reg(dst, id)?, f32_literal(*value)).unwrap();
            }
            Stmt::Mma(MmaStmt::PackB16x2 { dst, lo, hi, dtype }) => {
                let kinds = [(dst, RegKind::B16x2), (lo, RegKind::F32), (hi, RegKind::F32)];
                for (r, kind) in kinds {
                    if self.reg_kind(r, id)? != kind {
                        return Err(self.err(id, Fault::FragmentShape, "cvt.rn.x2.f32 packs two f32 into a b32"));
                    }
                }
                let ty = match dtype {
                    DType::F16 => "f16x2",
                    DType::BF16 => "bf16x2",
                    _ => return Err(self.err(id, Fault::BadValue, format!("cvt packs f16 or bf16, not {dtype}"))),
                };
                writeln!(
                    out,
                    "{tag}asm(\"cvt.rn.{ty}.f32 %0, %1, %2;\\n\" : \"=r\"({}) : \"f\"({}), \"f\"({}));",
                    self.reg(dst, id)?,
                    self.reg(hi, id)?,
                    self.reg(lo, id)?
                )
                .unwrap();
            }
            Stmt::Mma(MmaStmt::Epilogue { acc, pred, ops }) => self.epilogue(out, id, &pad, acc, pred, ops)?,
            Stmt::Mma(MmaStmt::StGlobalVec { dst, src, dtype, pred }) => {
                let (g, pd) = self.global(dst, id)?;
                if pd != *dtype {
                    return Err(self.err(id, Fault::BadValue, format!("stores {dtype} into a {pd} tensor")));
                }
                let store = self.store(id, "global", &format!("\"l\"({g})"), src, *dtype)?;
                match pred {
                    Expr::Const(v) if *v != 0 => writeln!(out, "{tag}{store}").unwrap(),
                    _ => writeln!(out, "{tag}if ({}) {store}", self.cond(pred, id)?).unwrap(),
                }
            }
            Stmt::Mma(MmaStmt::StShared { dst, src, dtype }) => {
                let a = self.smem_addr(dst, id)?;
                writeln!(out, "{tag}{}", self.store(id, "shared", &format!("\"r\"({a})"), src, *dtype)?).unwrap();
            }
            Stmt::Mma(MmaStmt::LdShared { dst, src, dtype }) => self.ld_shared(out, id, &pad, dst, src, *dtype)?,
            Stmt::Simt(x) => self.simt_stmt(out, x, id, &tag, &pad)?,
            Stmt::Sm90(x) => self.sm90_stmt(out, x, id, &tag)?,
        }
        Ok(())
    }

    fn var(&self, v: VarId, stmt: u32) -> Result<String, CudaError> {
        self.vars
            .get(v.0 as usize)
            .cloned()
            .ok_or_else(|| self.err(stmt, Fault::BadId, format!("variable {} out of range", v.0)))
    }

    /// One `st.global` of `src` (f32 registers) rounded to `dtype`.
    /// `addr` is the address operand with its constraint (`"l"(p)` for
    /// global, `"r"(a)` for shared); `space` the state space.
    fn store(&self, id: u32, space: &str, addr: &str, src: &[RegRef], dtype: DType) -> Result<String, CudaError> {
        let mut regs = Vec::new();
        for r in src {
            if self.reg_kind(r, id)? != compute_kind(dtype) {
                let msg = format!("a store of {dtype} from registers of another kind");
                return Err(self.err(id, Fault::FragmentShape, msg));
            }
            regs.push(self.reg(r, id)?);
        }
        let bad = || self.err(id, Fault::BadValue, format!("a store of {} {dtype} elements", src.len()));
        let (ty, operands, constraint): (&str, Vec<String>, &str) = match dtype {
            DType::F32 => ("f32", regs, "f"),
            DType::I32 if regs.len() == 1 => ("s32", regs, "r"),
            DType::F16 | DType::BF16 => {
                let cvt = if dtype == DType::F16 { "tgc_f32_to_f16" } else { "tgc_f32_to_bf16" };
                if regs.len() == 1 {
                    ("b16", vec![format!("{cvt}({})", regs[0])], "h")
                } else if regs.len() % 2 == 0 {
                    let words =
                        regs.chunks(2).map(|p| format!("tgc_pack_b16x2({cvt}({}), {cvt}({}))", p[0], p[1])).collect();
                    ("b32", words, "r")
                } else {
                    return Err(bad());
                }
            }
            _ => return Err(bad()),
        };
        let vec = match operands.len() {
            1 => "",
            2 => ".v2",
            4 => ".v4",
            _ => return Err(bad()),
        };
        let slots: Vec<String> = (1..=operands.len()).map(|i| format!("%{i}")).collect();
        let slots = if operands.len() == 1 { slots[0].clone() } else { format!("{{{}}}", slots.join(", ")) };
        let args: Vec<String> = operands.iter().map(|o| format!("\"{constraint}\"({o})")).collect();
        Ok(format!(
            "asm volatile(\"st.{space}{vec}.{ty} [%0], {slots};\\n\" :: {addr}, {} : \"memory\");",
            args.join(", ")
        ))
    }

    #[allow(clippy::too_many_arguments)]
    fn epilogue(
        &self,
        out: &mut String,
        id: u32,
        pad: &str,
        acc: &RegRef,
        pred: &Expr,
        ops: &[EpilogueOp],
    ) -> Result<(), CudaError> {
        if self.reg_kind(acc, id)? != RegKind::F32 {
            return Err(self.err(id, Fault::FragmentShape, "an epilogue on a b32 register"));
        }
        let a = self.reg(acc, id)?;
        let inner = format!("{pad}    ");
        let names: Vec<String> = ops.iter().map(op_name).collect();
        writeln!(out, "{pad}/* s{id} */ if ({}) {{ // epilogue: {}", self.cond(pred, id)?, names.join(", ")).unwrap();
        writeln!(out, "{inner}float tgc_v = {a};").unwrap();
        for op in ops {
            match op {
                EpilogueOp::Bias { param, at } | EpilogueOp::Residual { param, at } => {
                    let at = self.expr(at, Some(id))?;
                    writeln!(out, "{inner}tgc_v += {};", self.load_f32(id, *param, &at)?).unwrap()
                }
                EpilogueOp::Relu => writeln!(out, "{inner}tgc_v = fmaxf(tgc_v, 0.0f);").unwrap(),
                EpilogueOp::Silu => writeln!(out, "{inner}tgc_v = tgc_v / (1.0f + expf(-tgc_v));").unwrap(),
                EpilogueOp::Gelu => {
                    use crate::frontend::ops::elementwise::{AS_A, AS_P};
                    let [a1, a2, a3, a4, a5] = AS_A;
                    let r = std::f64::consts::FRAC_1_SQRT_2;
                    writeln!(
                        out,
                        "{inner}{{ const double x = tgc_v; const double a = fabs(x * {r:?}); const double t = 1.0 / (1.0 + \
                         {AS_P:?} * a); const double q = t * ({a1:?} + t * ({a2:?} + t * ({a3:?} + t * ({a4:?} + t * \
                         {a5:?})))) * exp(-a * a); tgc_v = (float)(0.5 * x * (x < 0.0 ? q : 2.0 - q)); }}"
                    )
                    .unwrap()
                }
                EpilogueOp::GeluTanh => {
                    let c = (2.0f64 / std::f64::consts::PI).sqrt();
                    writeln!(
                        out,
                        "{inner}{{ const double x = tgc_v; tgc_v = (float)(0.5 * x * (1.0 + tanh({c:?} * (x + 0.044715 * x * x * x)))); }}"
                    )
                    .unwrap()
                }
                EpilogueOp::Tanh => writeln!(out, "{inner}tgc_v = (float)tanh((double)tgc_v);").unwrap(),
                EpilogueOp::Cast(DType::F16) => {
                    writeln!(out, "{inner}tgc_v = tgc_f16_to_f32(tgc_f32_to_f16(tgc_v));").unwrap()
                }
                EpilogueOp::Cast(DType::BF16) => {
                    writeln!(out, "{inner}tgc_v = tgc_bf16_to_f32(tgc_f32_to_bf16(tgc_v));").unwrap()
                }
                EpilogueOp::Cast(DType::F32) => writeln!(out, "{inner}// cast to f32: nothing to round").unwrap(),
                EpilogueOp::Cast(d) => return Err(self.err(id, Fault::BadValue, format!("an epilogue cast to {d}"))),
            }
        }
        writeln!(out, "{inner}{a} = tgc_v;").unwrap();
        writeln!(out, "{pad}}}").unwrap();
        Ok(())
    }

    /// `ld.shared` of `dst.len()` elements of `dtype` into f32 registers:
    /// 16-bit values in pairs per `.b32` word, then widened.
    fn ld_shared(
        &self,
        out: &mut String,
        id: u32,
        pad: &str,
        dst: &[RegRef],
        src: &SmemRef,
        dtype: DType,
    ) -> Result<(), CudaError> {
        let mut regs = Vec::new();
        for r in dst {
            if self.reg_kind(r, id)? != compute_kind(dtype) {
                let msg = format!("ld.shared of {dtype} into registers of another kind");
                return Err(self.err(id, Fault::FragmentShape, msg));
            }
            regs.push(self.reg(r, id)?);
        }
        let bad = || self.err(id, Fault::BadValue, format!("a shared load of {} {dtype} elements", dst.len()));
        let widen = match dtype {
            DType::F16 => "tgc_f16_to_f32",
            DType::BF16 => "tgc_bf16_to_f32",
            DType::F32 => "__uint_as_float",
            DType::I32 if regs.len() == 1 => "(int)",
            _ => return Err(bad()),
        };
        let (ty, words) = match (dtype, regs.len()) {
            (DType::F32 | DType::I32, n) => ("b32", n),
            (_, 1) => ("b16", 1),
            (_, n) if n % 2 == 0 => ("b32", n / 2),
            _ => return Err(bad()),
        };
        let vec = match words {
            1 => "",
            2 => ".v2",
            4 => ".v4",
            _ => return Err(bad()),
        };
        let addr = self.smem_addr(src, id)?;
        let c = if ty == "b16" { "h" } else { "r" };
        let wty = if ty == "b16" { "unsigned short" } else { "unsigned" };
        let names: Vec<String> = (0..words).map(|i| format!("tgc_w{i}")).collect();
        let slots: Vec<String> = (0..words).map(|i| format!("%{i}")).collect();
        let slots = if words == 1 { slots[0].clone() } else { format!("{{{}}}", slots.join(", ")) };
        let outs: Vec<String> = names.iter().map(|n| format!("\"={c}\"({n})")).collect();
        writeln!(out, "{pad}/* s{id} */ {{").unwrap();
        writeln!(out, "{pad}    {wty} {};", names.join(", ")).unwrap();
        writeln!(
            out,
            "{pad}    asm volatile(\"ld.shared{vec}.{ty} {slots}, [%{words}];\\n\" : {} : \"r\"({addr}) : \"memory\");",
            outs.join(", ")
        )
        .unwrap();
        for (i, r) in regs.iter().enumerate() {
            let value = if matches!(dtype, DType::F32 | DType::I32) || ty == "b16" {
                format!("{widen}({})", names[i])
            } else {
                let w = &names[i / 2];
                if i % 2 == 0 {
                    format!("{widen}((unsigned short)({w} & 0xffffu))")
                } else {
                    format!("{widen}((unsigned short)({w} >> 16))")
                }
            };
            writeln!(out, "{pad}    {r} = {value};").unwrap();
        }
        writeln!(out, "{pad}}}").unwrap();
        Ok(())
    }

    /// `param[at]` as an `f32` C expression.
    fn load_f32(&self, id: u32, p: ParamId, at: &str) -> Result<String, CudaError> {
        let Some(ParamKind::Ptr { dtype, .. }) = self.k.params.get(p.0 as usize).map(|q| q.kind) else {
            return Err(self.err(id, Fault::BadId, format!("epilogue operand {} is not a pointer", p.0)));
        };
        let name = &self.params[p.0 as usize];
        Ok(match dtype {
            DType::F16 => format!("tgc_f16_to_f32({name}[{at}])"),
            DType::BF16 => format!("tgc_bf16_to_f32({name}[{at}])"),
            DType::F32 => format!("{name}[{at}]"),
            d => return Err(self.err(id, Fault::BadValue, format!("an epilogue operand of {d}"))),
        })
    }
}

fn op_name(op: &EpilogueOp) -> String {
    match op {
        EpilogueOp::Bias { .. } => "bias".into(),
        EpilogueOp::Relu => "relu".into(),
        EpilogueOp::Silu => "silu".into(),
        EpilogueOp::Gelu => "gelu".into(),
        EpilogueOp::GeluTanh => "gelu_tanh".into(),
        EpilogueOp::Tanh => "tanh".into(),
        EpilogueOp::Residual { .. } => "residual".into(),
        EpilogueOp::Cast(d) => format!("cast({d})"),
    }
}

/// The C element type of a pointer parameter.
fn c_type(d: DType) -> &'static str {
    match d {
        DType::F16 => "tgc_f16",
        DType::BF16 => "tgc_bf16",
        DType::F32 => "float",
        DType::I32 => "int",
        DType::Bool => "unsigned char",
    }
}

/// An exact C `float` literal: the shortest decimal that reads back as
/// `v` (Rust's `{:?}`), or its bits for infinities and NaNs.
fn f32_literal(v: f32) -> String {
    if v.is_finite() {
        let s = format!("{v:?}");
        if s.contains(['.', 'e']) {
            format!("{s}f")
        } else {
            format!("{s}.0f")
        }
    } else {
        format!("__uint_as_float(0x{:08x}u)", v.to_bits())
    }
}

/// The statement ids of the `/* sN */` tags in printed source, in order:
/// what matches C lines to IR statements (for tests and tools).
pub fn tagged_ids(source: &str) -> Vec<u32> {
    let mut ids = Vec::new();
    for part in source.split("/* s").skip(1) {
        if let Some((n, _)) = part.split_once(" */") {
            if let Ok(n) = n.parse() {
                ids.push(n);
            }
        }
    }
    ids
}

mod simt;
use simt::{uses_simt, SIMT_PRELUDE};

mod sm90;
use sm90::{uses_sm90, SM90_PRELUDE};

#[cfg(test)]
mod tests;

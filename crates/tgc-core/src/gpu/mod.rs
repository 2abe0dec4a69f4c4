//! The NVIDIA GPU backend.
//!
//! - [`ir`]: the GPU dialect IR (`000` §1.8): a kernel as PTX-level
//!   statements (`cp.async`, `ldmatrix`, `mma.sync`, epilogue, vector
//!   stores) inside loops, conditions and barriers, with its text dump.
//! - [`verify`]: the static checks of `ir`'s invariants, each error naming
//!   the statement.
//! - [`sm80`]: the SM80 instance of the single MMA template: a Schedule
//!   Plan and a GEMM problem → a [`ir::Kernel`].
//! - [`emulate`]: runs a kernel on the CPU with the PTX ISA's fragment
//!   layouts and `cp.async` group semantics, reporting out-of-bounds,
//!   incomplete, racing and divergent accesses; the proof of a schedule
//!   on a machine without a GPU, compared with the reference interpreter.
//! - [`toolchain`]: NVRTC, ptxas and cuobjdump from the pinned CUDA 13.0
//!   wheels, which compile CUDA C++ to PTX and cubin and report what the
//!   compiled code uses (registers, shared memory, spills, SASS opcodes) —
//!   the checks DESIGN.md asks of generated kernels on a machine without a
//!   GPU.
//!
//! - [`lower`]: a Tiny IR graph that is one contraction (GEMM, batched matmul,
//!   convolution) + epilogue with concrete M/N/K → its chosen plan and [`sm80`]
//!   kernel (`pipeline::compile_gpu` adds the verifier, the printer and NVRTC).
//! - [`attention`]: a Tiny IR graph that is one attention (`matmul → softmax
//!   → matmul`) → the fused kernel of `sm80::attention` (FlashAttention-2's
//!   online softmax, or the two-pass softmax).
//! - [`template`]: the seam: the graph's pattern, the list of tensor-core
//!   templates by `(pattern, algo_choice, arch)`, of those that take the
//!   graph the one estimated fastest as a one-launch program.
//! - [`cuda`]: the CUDA C printer: a kernel as CUDA C++ with inline PTX
//!   (the `cu` stage), compiled to PTX and cubin with [`toolchain`]'s
//!   NVRTC.
//! - [`simt`]: the SIMT template: every region of a graph (element-wise,
//!   row reductions, and as the naive correct path any other) as a kernel
//!   without tensor cores, from the CPU loop-nest IR; the whole program
//!   with its buffers and launch geometry ([`simt::GpuProgram`]), whose
//!   `steps` at given dims are what `tgc run --backend cuda` executes and
//!   what generated `sm80::steps` functions print (a contraction + epilogue graph
//!   at concrete sizes takes the [`sm80`] kernel there).

pub mod attention;
pub mod cuda;
pub mod emulate;
pub mod ir;
pub mod lower;
pub mod simt;
pub mod sm80;
pub mod template;
pub mod toolchain;
pub mod verify;
pub mod winograd;
mod write;

#[cfg(test)]
mod attention_tests;
#[cfg(test)]
mod emulate_tests;
#[cfg(test)]
mod epilogue_tests;
#[cfg(test)]
mod implicit_tests;
#[cfg(test)]
mod template_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod wgmma_tests;
#[cfg(test)]
mod winograd_tests;

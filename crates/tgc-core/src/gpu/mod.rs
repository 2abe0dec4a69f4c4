//! The NVIDIA GPU back end, cut along its template seam.
//!
//! - [`dialect`]: the GPU dialect IR (`000` §1.8) — a kernel as PTX-level
//!   statements inside loops, conditions and barriers ([`dialect::ir`]),
//!   its verifier ([`dialect::verify`]) and its text form (the `gpu` dump).
//! - [`program`]: a whole graph on the GPU — its buffers and launches
//!   ([`program::GpuProgram`], [`program::Launch`], [`program::Form`]), their
//!   evaluation at given sizes (grids, runtime steps) and their emulation.
//! - [`template`]: what a template is to the driver: the graph patterns it
//!   takes, its registration row ([`template::Template`]) and what its
//!   lowering returns ([`template::Lowered`]).
//! - [`driver`]: the one entry point from a Tiny IR graph to a
//!   [`program::GpuProgram`] ([`driver::lower_program_noting`] and its
//!   shorter forms): the list of templates ([`driver::TEMPLATES`]), the
//!   ranking of those that take the graph, and the regions of a larger
//!   graph ([`driver::regions`]) each on a template or on the SIMT kernels.
//! - The templates, each a folder with its recogniser and its arch
//!   branches: [`mma`] (GEMM, batched matmul and implicit-GEMM convolution
//!   on `mma.sync` (sm80) and `wgmma` (sm90)), [`attention`] (the fused
//!   attention, sm80 and sm90), [`winograd`] (F(2×2, 3×3) around a batched
//!   GEMM of [`mma`]) and [`simt`] (every region without tensor cores:
//!   element-wise, reductions, rows, scans).
//! - [`emulate`]: runs a kernel on the CPU with the PTX ISA's fragment
//!   layouts and `cp.async` group semantics, reporting out-of-bounds,
//!   incomplete, racing and divergent accesses; the proof of a schedule on
//!   a machine without a GPU, compared with the reference interpreter.
//! - [`toolchain`]: NVRTC, ptxas and cuobjdump from the pinned CUDA 13.0
//!   wheels, which compile CUDA C++ to PTX and cubin and report what the
//!   compiled code uses (registers, shared memory, spills, SASS opcodes).
//!
//! The CUDA C printer of the dialect (the `cu` stage) is
//! [`crate::emit::cuda`], beside the C and Rust printers.
//!
//! Dependencies point one way: `driver` → templates → `program` →
//! `dialect`; a template reads another only as [`winograd`] reads
//! [`mma`] and [`attention`] reads [`mma`]'s recogniser helpers.

pub mod attention;
pub mod dialect;
pub mod driver;
pub mod emulate;
pub mod mma;
pub mod program;
pub mod simt;
pub mod template;
pub mod toolchain;
pub mod winograd;

#[cfg(test)]
mod golden_tests;

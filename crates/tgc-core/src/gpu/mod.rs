//! The NVIDIA GPU backend.
//!
//! - [`ir`]: the GPU dialect IR (`000` §1.8): a kernel as PTX-level
//!   statements (`cp.async`, `ldmatrix`, `mma.sync`, epilogue, vector
//!   stores) inside loops, conditions and barriers, with its text dump.
//! - [`toolchain`]: NVRTC, ptxas and cuobjdump from the pinned CUDA 13.0
//!   wheels, which compile CUDA C++ to PTX and cubin and report what the
//!   compiled code uses (registers, shared memory, spills, SASS opcodes) —
//!   the checks DESIGN.md asks of generated kernels on a machine without a
//!   GPU.

pub mod emulate;
pub mod ir;
pub mod sm80;
pub mod toolchain;
pub mod verify;

#[cfg(test)]
mod tests;

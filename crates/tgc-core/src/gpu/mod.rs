//! The NVIDIA GPU backend. So far only its [`toolchain`]: NVRTC, ptxas and
//! cuobjdump from the pinned CUDA 13.0 wheels, which compile CUDA C++ to PTX
//! and cubin and report what the compiled code uses (registers, shared
//! memory, spills, SASS opcodes) — the checks DESIGN.md asks of generated
//! kernels on a machine without a GPU. Code generation comes later.

pub mod toolchain;

//! The CPU path: Tiny IR → kernels ([`kernels`]) → loop nests ([`loop_ir`],
//! built by [`from_tiny::lower`]) → C or Rust source (`crate::emit`).
//!
//! It is the correctness-first backend: naive loop nests in the SCoP-clean
//! style of `spec/003` (affine subscripts, `restrict`, `#pragma scop`), with
//! the epilogue fusion of `spec/001` §8 and nothing else.

pub mod from_tiny;
pub mod kernels;
pub mod loop_ir;

pub use from_tiny::lower;
pub use kernels::{form_kernels, Formation, KernelPlan};
pub use loop_ir::{BufId, Buffer, Expr, Kernel, Program, Reduction, Role};

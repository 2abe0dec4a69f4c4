//! tgc-runtime: what generated code and the `tgc` tool need at run time.
//!
//! - [`error`]: `tgc::Error`, the error of every generated function and runtime call.
//! - [`dtype`]: element types and their rounding.
//! - [`tensor`]: [`HostTensor`], dense tensors in host memory.
//! - [`npy`] and [`safetensors_io`]: reading and writing tensor files;
//!   [`input`]: what their readers share (regular files only, headers read
//!   before the data, each read bounded by the file's length).
//! - [`weights`]: the weight sources of a model that read tensor files
//!   ([`model::Safetensors`], [`model::Npy`]).
//! - [`files`]: files written whole or not at all, private scratch folders.
//! - [`cpu`]: compiling generated C kernels and calling them;
//!   [`objcache`]: the cache of what was compiled, by a hash of the source.
//! - [`cpu_rt`]: what generated CPU kernels call: the thread pool and the
//!   GEMM micro-kernel, and the scratch memory they ask it for.
//! - [`scratch`]: the per-thread stacks of scratch blocks behind it.
//! - [`checks`]: the argument checks generated `run` functions call.
//! - [`launch`]: kernel launches as data (grid, block, arguments, the
//!   steps of a whole graph), executed by `cuda`.
//! - `cuda` (feature `cuda`): loading embedded cubin/PTX and launching
//!   kernels on a GPU through the CUDA driver.
//!
//! This crate does not depend on `tgc-core`: generated code links only this.

#![warn(missing_docs)]

pub mod checks;
pub mod cpu;
pub mod cpu_rt;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod dtype;
pub mod error;
pub mod files;
pub mod input;
pub mod launch;
pub mod model;
pub mod npy;
pub mod objcache;
pub mod pool;
pub mod safetensors_io;
pub mod scratch;
pub mod tensor;
pub mod weights;

#[cfg(test)]
mod test_util;

pub use dtype::DType;
pub use error::{Error, Result};
pub use tensor::HostTensor;

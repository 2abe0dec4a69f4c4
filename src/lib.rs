//! # tgc — a build-time deep-learning kernel compiler for Rust
//!
//! Write a tensor graph in the tgc graph language; at `cargo build` time
//! [`kernel!`] validates it, lowers it through tgc's IRs (Frontend IR → Tiny
//! IR → IndexBook → loop nests) and emits a module of typed functions.
//! Shape errors are compile errors on the offending tokens.
//!
//! ```
//! tgc::kernel!(scale_add:
//!     graph<N=4> main(x: f32[N], y: f32[N]) -> (z: f32[N]) {
//!         z = x * 2.0 + y
//!         return z
//!     }
//! );
//!
//! let x = [1.0f32, 2.0, 3.0, 4.0];
//! let y = [0.5f32; 4];
//! let mut z = [0.0f32; 4];
//! scale_add::run(&x, &y, &mut z, 4).unwrap();
//! assert_eq!(z, [2.5, 4.5, 6.5, 8.5]);
//!
//! // Lengths are checked before anything runs.
//! assert!(scale_add::run(&x, &y, &mut z, 3).is_err());
//! ```
//!
//! The `tgc` command-line tool runs the same pipeline on files (`tgc check`,
//! `tgc run`, `tgc compile --dump …`), and `tgc_core::build` compiles graph
//! files from a build script into C and modules with the same API as
//! [`kernel!`]'s.
//!
//! With feature `sm80`, every [`kernel!`] graph also gets a submodule
//! `sm80`: the whole graph compiled for sm_80 by NVRTC while the crate
//! builds (the CUDA toolchain of `scripts/setup.sh`, or `$TGC_CUDA_ROOT`;
//! without it that is a compile error). Its variants `generic` (one SIMT
//! kernel per region, every dim symbolic) and `shape_<k>` (a ShapeSet point
//! at which the graph is one GEMM + epilogue: the tensor-core kernel) each
//! hold `CUBIN`, `PTX`, `MODULE`, `KERNELS` and `PLAN_JSON`; the typed
//! functions are `check` (dims as `run` checks them, lengths and 16-byte
//! alignment of `tgc::cuda::DeviceArg` buffers, no driver call), `steps`
//! (the variant and its launch list for given dims, no device), `launch`
//! (device buffers on a `tgc::cuda::Gpu`) and `run_on_gpu` (host slices,
//! device 0), all returning [`Error`] (`NoDevice` without a GPU). The GPU
//! tier (`scripts/gpu_tests.sh`) runs them against the CPU `run`
//! (`docs/gpu.md`; its runs are in `docs/results.md`).

pub use tgc_macros::kernel;
pub use tgc_runtime::{DType, Error, Result};

// The thread count of generated CPU kernels (build helper and CLI: C on
// the runtime's pool; `kernel!`'s Rust: its packed GEMMs' sums on the pool,
// everything else on the caller's thread).
pub use tgc_runtime::cpu_rt::{set_threads, threads};

/// The per-thread scratch memory of generated C kernels (the build helper's
/// and the CLI's): [`scratch::held`] and [`scratch::trim`] tell and free
/// what a thread keeps between calls.
pub use tgc_runtime::scratch;

/// Models (`000` §8): the ConstPool of a model's weights, the sources they
/// load from, and the C ABI's helpers; see the build helper's
/// `Kernels::model`.
pub use tgc_runtime::model;

/// The GPU runtime (feature `cuda`): devices, embedded modules, launches.
#[cfg(feature = "cuda")]
pub use tgc_runtime::cuda;

/// Half-precision types used in generated signatures (`f16`, `bf16`).
pub use half;

/// Support code for the modules `kernel!` and the build helper generate; not
/// an API for users (it changes with the generator).
#[doc(hidden)]
pub mod __private {
    pub use tgc_runtime::checks;
    pub use tgc_runtime::cpu_rt;
}

/// README.md's Rust examples as doc tests, so that the page stays true: the
/// quick example runs, and the build script of "Getting started" compiles
/// (it needs a build script's `$OUT_DIR` to run; `examples/build-helper`
/// runs the same code).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeExamples;

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
//! ## Weights from files
//!
//! A model of the build helper (`tgc_core::build::Kernels::model`) loads
//! its weights once, with `Model::init(&mut source)`, from a
//! [`model::WeightSource`]: [`model::Npy`] reads a folder of `.npy` files
//! (weight `w` from `w.npy`), [`model::Safetensors`] the tensors of a
//! `.safetensors` file by name. Each checks a tensor's dtype and shape
//! before reading its data; an error names the file, the tensor, the
//! weight, and the shape expected against the one found. `Model::init`
//! fills a [`model::ConstPool`] exactly as here:
//!
//! ```
//! use tgc::model::{ConstPool, Npy, Safetensors, WeightSpec};
//! use tgc::{DType, HostTensor};
//!
//! static WEIGHTS: [WeightSpec; 1] = [WeightSpec { name: "w1", dtype: DType::F32, shape: &[2, 3] }];
//! let dir = std::env::temp_dir().join(format!("tgc-doc-weights-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let w1 = HostTensor::from_f32(DType::F32, &[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])?;
//! tgc::npy::write_npy(dir.join("w1.npy"), &w1)?;
//!
//! let pool = ConstPool::load(&WEIGHTS, &mut Npy::dir(&dir))?;
//! assert_eq!(pool.get::<f32>(0), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
//!
//! // The same weight under another name in a .safetensors file.
//! let file = dir.join("model.safetensors");
//! let bytes = tgc::safetensors_io::to_safetensors(&[("layer.w1".to_string(), w1)], &[])?;
//! std::fs::write(&file, bytes)?;
//! let pool = ConstPool::load(&WEIGHTS, &mut Safetensors::file(&file).rename(|w| format!("layer.{w}")))?;
//! assert_eq!(pool.get::<f32>(0)[5], 6.0);
//!
//! // A weight of another shape: the file, the weight and both shapes.
//! let w1t = HostTensor::from_f32(DType::F32, &[3, 2], &[0.0; 6])?;
//! tgc::npy::write_npy(dir.join("w1.npy"), &w1t)?;
//! let e = ConstPool::load(&WEIGHTS, &mut Npy::dir(&dir)).unwrap_err();
//! assert!(e.to_string().ends_with("w1.npy` for weight `w1`: expected w1: f32[2, 3], got f32[3, 2]"), "{e}");
//! std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
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
pub use tgc_runtime::{DType, Error, HostTensor, Result};

/// `.npy` files (NumPy's format): [`npy::read_npy`] into a [`HostTensor`],
/// [`npy::write_npy`] from one.
pub use tgc_runtime::npy;

/// `.safetensors` files: [`safetensors_io::read_safetensors_tensor`] (one
/// tensor by name), [`safetensors_io::tensor_names`],
/// [`safetensors_io::to_safetensors`] (named tensors as a file's bytes).
pub use tgc_runtime::safetensors_io;

// The thread count of generated CPU kernels (build helper and CLI: C on
// the runtime's pool; `kernel!`'s Rust: its packed GEMMs' sums on the pool,
// everything else on the caller's thread).
pub use tgc_runtime::cpu_rt::{set_threads, threads};

/// The per-thread scratch memory of generated C kernels (the build helper's
/// and the CLI's): [`scratch::held`] and [`scratch::trim`] tell and free
/// what a thread keeps between calls.
pub use tgc_runtime::scratch;

/// Models (`000` §8): the ConstPool of a model's weights, the sources they
/// load from ([`model::Npy`], [`model::Safetensors`], a closure), and the C
/// ABI's helpers; see the build helper's `Kernels::model` and "Weights from
/// files" above.
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
/// (it needs a build script's `$OUT_DIR` to run; `tests/getting_started.rs`
/// builds and runs the section's whole crate, its `src/lib.rs` included).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeExamples;

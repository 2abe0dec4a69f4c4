//! tgc's build-script helper in use. `build.rs` compiles `graphs/*.tgc` to
//! C with the system C compiler into a static library and writes one typed
//! module per kernel, included here:
//!
//! - `gemm_bias_relu::run(x, w, bias, y, M, N, K)`: f32, with a body
//!   specialised for `M = N = K = 64`;
//! - `softmax_rows::run(logits, p, R, C, L)`: f16, `L` must be `R * C`;
//! - `gemm_f16::run(x, w, bias, y, M, N, K)`: f16 GEMM + bias, and with
//!   feature `sm80` `gemm_f16::sm80::{check, launch, run_on_gpu}` for its
//!   sm_80 kernel at the defaults M = 128, N = 64, K = 64.
//!
//! Each module has the API of a `tgc::kernel!` module (`run`, `TINY_IR`,
//! `GENERATED_SOURCE`), and the same argument checks.

include!(concat!(env!("OUT_DIR"), "/tgc_kernels.rs"));

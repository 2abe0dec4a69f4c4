//! tgc's build-script helper in use. `build.rs` compiles `graphs/*.tgc` to
//! C with the system C compiler into a static library and writes one typed
//! module per kernel, included here:
//!
//! - `gemm_bias_relu::run(x, w, bias, y, M, N, K)`: f32, with a body
//!   specialised for `M = N = K = 64`;
//! - `softmax_rows::run(logits, p, R, C, L)`: f16, `L` must be `R * C`.
//!
//! Each module has the API of a `tgc::kernel!` module (`run`, `TINY_IR`,
//! `GENERATED_SOURCE`), and the same argument checks.

include!(concat!(env!("OUT_DIR"), "/tgc_kernels.rs"));

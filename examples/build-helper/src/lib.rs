//! tgc's build-script helper in use. `build.rs` compiles `graphs/*.tgc` to
//! C with the system C compiler into a static library and writes one typed
//! module per kernel, included here:
//!
//! - `gemm_bias_relu::run(x, w, bias, y, M, N, K)`: f32, with a body
//!   specialised for `M = N = K = 64`;
//! - `softmax_rows::run(logits, p, R, C, L)`: f16, `L` must be `R * C`;
//! - `gemm_f16::run(x, w, bias, y, M, N, K)`: f16 GEMM + bias, and with
//!   feature `sm80` `gemm_f16::sm80::{check, launch, run_on_gpu}` for its
//!   sm_80 kernel at the defaults M = 128, N = 64, K = 64;
//! - `row_mean::run(x, y, R, C)`: the buckets `R = 4`, `C ∈ {8, 16}` of a
//!   graph whose symbols are `padded` (smaller calls run a bucket);
//! - `mlp`: a two-layer perceptron made a model (`000` §8): `mlp::Model::init`
//!   loads its weights once into a ConstPool and `Model::run(x, y, B)` takes
//!   only the input; the crate's cdylib exports the same as the C functions
//!   `tgc_mlp_model_init/run/free` of `$OUT_DIR/tgc_kernels.h`
//!   (`tests/c/mlp.c` calls them);
//! - `small_cnn`: the ONNX model `models/small_cnn.onnx` (a Conv →
//!   BatchNormalization → Relu → MaxPool → Flatten → Gemm exported as
//!   PyTorch would), imported at build time: `small_cnn::Model::embedded()`
//!   loads the initializers embedded in the binary and
//!   `Model::run(input, logits, batch)` runs it.
//!
//! Each module has the API of a `tgc::kernel!` module (`run`, `TINY_IR`,
//! `GENERATED_SOURCE`), and the same argument checks.

include!(concat!(env!("OUT_DIR"), "/tgc_kernels.rs"));

//! Compiles the graphs of `graphs/` to C with the system C compiler (the
//! ShapeSet point's block sizes from the committed tuning cache
//! `tgc-tune/`) and writes their typed Rust modules to
//! `$OUT_DIR/tgc_kernels.rs` (and the C ABI of the model `mlp` to
//! `$OUT_DIR/tgc_kernels.h`) and the ONNX model `models/small_cnn.onnx`;
//! with feature `sm80`, GEMM graphs also get
//! their sm_80 kernel and typed GPU launch functions (NVRTC at build time),
//! with `sm90` also their sm_90a twins (TMA + wgmma) for 9.x devices.

fn main() {
    let result = tgc_core::build::Kernels::new()
        .kernel("gemm_bias_relu", "graphs/gemm_bias_relu.tgc")
        .shapes(&[("M", 64), ("N", 64), ("K", 64)])
        .kernel("softmax_rows", "graphs/softmax_rows.tgc")
        .kernel("gemm_f16", "graphs/gemm_f16.tgc")
        // Its default sizes as a ShapeSet point: with feature `sm80` the
        // tensor-core kernel there (with `sm90` also its sm_90a twin).
        .shapes(&[("M", 128), ("N", 64), ("K", 64)])
        // A model: its weights in a ConstPool, a `Model` type and the C ABI
        // of `$OUT_DIR/tgc_kernels.h` (exported from the crate's cdylib).
        // ShapeSet buckets of `padded` symbols.
        .kernel("row_mean", "graphs/row_mean.tgc")
        .shape_set(&[("R", &[4]), ("C", &[8, 16])])
        .kernel("mlp", "graphs/mlp.tgc")
        .model(&["x"])
        // An ONNX model (models/small_cnn.py writes it): a model whose run
        // input is the ONNX graph's `input`, its initializers embedded as
        // the weights (`small_cnn::Model::embedded()`).
        .onnx("small_cnn", "models/small_cnn.onnx")
        .sm80(std::env::var_os("CARGO_FEATURE_SM80").is_some())
        .sm90(std::env::var_os("CARGO_FEATURE_SM90").is_some())
        // Block sizes measured by `tgc tune graphs/gemm_bias_relu.tgc
        // --point M=64,N=64,K=64 --cache tgc-tune` (the ShapeSet point above).
        .tuning("tgc-tune")
        .compile("tgc_kernels");
    if let Err(e) = result {
        eprintln!("{e}");
        std::process::exit(1);
    }
}

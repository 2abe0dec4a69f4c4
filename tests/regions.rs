//! `kernel!` forms its regions as the facade's feature `poly` says
//! (docs/kernels.md, "`kernel!` and the CLI"): without it by the grouping
//! alone, so Conv → ReLU → MaxPool is two kernels (the conv stored, then
//! ReLU → MaxPool), the kernels `tgc compile --regions grouping` prints;
//! with it one, as `tgc compile` gives (`crates/tgc-cli/tests/user_path.rs`
//! holds the CLI's side).

tgc::kernel!(conv_relu_pool: "examples/graphs/conv_relu_pool.tgc");

#[test]
fn kernel_forms_its_regions_as_the_poly_feature_says() {
    let source = conv_relu_pool::GENERATED_SOURCE;
    // One Rust function per kernel: `fn k<i>(…) { …::cpu_rt::with_fma(…`.
    let kernels = source.lines().filter(|l| l.trim_start().starts_with("fn k") && l.contains("with_fma(")).count();
    assert_eq!(kernels, if cfg!(feature = "poly") { 1 } else { 2 }, "{source}");
}

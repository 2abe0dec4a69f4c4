//! Conv2D 3x3 (pad 1) + bias -> ReLU -> MaxPool 2x2 in f32, NCHW, checked
//! against the reference interpreter for two batch sizes.

#[path = "common/mod.rs"]
mod common;

use tgc_core::DType;

tgc::kernel!(conv_relu_pool: "examples/graphs/conv_relu_pool.tgc");

fn main() -> Result<(), tgc::Error> {
    for n in [1usize, 2] {
        let x = common::values(1, n * 3 * 32 * 32);
        let w = common::values(2, 8 * 3 * 3 * 3);
        let b = common::values(3, 8);
        let f = |v: &[f64]| v.iter().map(|&a| a as f32).collect::<Vec<_>>();
        let mut y = vec![0.0f32; n * 8 * 16 * 16];
        conv_relu_pool::run(&f(&x), &f(&w), &f(&b), &mut y, n)?;
        let got: Vec<f64> = y.iter().map(|&v| v as f64).collect();
        let inputs = vec![
            common::tensor(DType::F32, &[n, 3, 32, 32], &x),
            common::tensor(DType::F32, &[8, 3, 3, 3], &w),
            common::tensor(DType::F32, &[8], &b),
        ];
        let err = common::check(conv_relu_pool::TINY_IR, &[("N", n as i64)], inputs, &got, 0);
        println!("conv_relu_pool N={n}: matches the interpreter (max abs error {err:.2e})");
    }
    Ok(())
}

//! GEMM + bias + ReLU in f16 (`spec/000` §7.1): one fused loop nest with the
//! accumulator in a register. Runs several sizes, including odd ones, and
//! checks each against the reference interpreter.

#[path = "common/mod.rs"]
mod common;

use tgc::half::f16;
use tgc_core::DType;

tgc::kernel!(gemm_bias_relu: "examples/graphs/gemm_bias_relu.tgc");

fn main() -> Result<(), tgc::Error> {
    for (m, n, k) in [(128, 256, 64), (7, 13, 129), (1, 1, 1)] {
        let x: Vec<f64> = common::values(1, m * k);
        let w: Vec<f64> = common::values(2, k * n);
        let b: Vec<f64> = common::values(3, n);
        let h = |v: &[f64]| v.iter().map(|&a| f16::from_f64(a)).collect::<Vec<_>>();
        let mut y = vec![f16::ZERO; m * n];
        gemm_bias_relu::run(&h(&x), &h(&w), &h(&b), &mut y, m, n, k)?;
        let got: Vec<f64> = y.iter().map(|v| v.to_f64()).collect();
        let inputs = vec![
            common::tensor(DType::F16, &[m, k], &x),
            common::tensor(DType::F16, &[k, n], &w),
            common::tensor(DType::F16, &[n], &b),
        ];
        let dims = [("M", m as i64), ("N", n as i64), ("K", k as i64)];
        let err = common::check(gemm_bias_relu::TINY_IR, &dims, inputs, &got, 0);
        println!("gemm_bias_relu M={m} N={n} K={k}: matches the interpreter (max abs error {err:.2e})");
    }
    Ok(())
}

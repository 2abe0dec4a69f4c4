//! Scaled dot-product attention with an additive mask in f32, checked
//! against the reference interpreter.

#[path = "common/mod.rs"]
mod common;

use tgc_core::DType;

tgc::kernel!(attention: "examples/graphs/attention.tgc");

fn main() -> Result<(), tgc::Error> {
    for (b, h, m, n, d) in [(2, 4, 32, 48, 16), (1, 1, 7, 5, 3)] {
        let q = common::values(1, b * h * m * d);
        let k = common::values(2, b * h * n * d);
        let v = common::values(3, b * h * n * d);
        let mask = common::values(4, m * n);
        let f = |x: &[f64]| x.iter().map(|&a| a as f32).collect::<Vec<_>>();
        let mut o = vec![0.0f32; b * h * m * d];
        attention::run(&f(&q), &f(&k), &f(&v), &f(&mask), &mut o, b, h, m, n, d)?;
        let got: Vec<f64> = o.iter().map(|&x| x as f64).collect();
        let inputs = vec![
            common::tensor(DType::F32, &[b, h, m, d], &q),
            common::tensor(DType::F32, &[b, h, n, d], &k),
            common::tensor(DType::F32, &[b, h, n, d], &v),
            common::tensor(DType::F32, &[m, n], &mask),
        ];
        let dims = [("B", b as i64), ("H", h as i64), ("M", m as i64), ("N", n as i64), ("D", d as i64)];
        let err = common::check(attention::TINY_IR, &dims, inputs, &got, 0);
        println!("attention B={b} H={h} M={m} N={n} D={d}: matches the interpreter (max abs error {err:.2e})");
    }
    Ok(())
}

//! The kernels `build.rs` compiled, called through their generated modules:
//! results against the reference interpreter (`tgc_core::pipeline::run_interp`
//! on the module's own `TINY_IR`), and the argument checks.

use std::collections::BTreeMap;

use tgc::half::f16;
use tgc::Error;
use tgc_build_demo::{gemm_bias_relu, softmax_rows};
use tgc_core::{pipeline, tiny, DType};
use tgc_runtime::HostTensor;

/// Deterministic values in [-1, 1) (a linear congruential generator).
fn values(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// Runs `tiny_json` bound to `dims` on the reference interpreter.
fn interp(tiny_json: &str, dims: &[(&str, i64)], inputs: &[HostTensor]) -> Vec<Vec<f32>> {
    let g = tiny::json::load_json(tiny_json).expect("the module's Tiny IR loads");
    let dims: BTreeMap<String, i64> = dims.iter().map(|(s, v)| (s.to_string(), *v)).collect();
    let g = g.bind(&dims).expect("the dims fit the graph");
    pipeline::run_interp(&g, inputs).expect("the interpreter runs").iter().map(HostTensor::to_f32_vec).collect()
}

/// The tolerance of an f32 output against the interpreter, absolute and
/// relative: 1e-5 (about 84 units in the last place; the emit harness's
/// `Tol::F32`, for the same reasons: the few-ulp bounds of
/// `docs/numerics.md` and a sum in another order, its floor that relative
/// error of the inputs' terms in [-1, 1)).
const F32_TOL: f32 = 1e-5;

/// The tolerance of an f16 output: 1e-3 (`spec/000` §9), about one f16
/// step near 1.
const F16_TOL: f32 = 1e-3;

/// `got` within `tol` (absolute and relative) of `want`.
fn assert_close(got: &[f32], want: &[f32], tol: f32) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol + tol * w.abs(), "element {i}: kernel {g} vs interpreter {w} (tolerance {tol:e})");
    }
}

fn gemm(m: usize, n: usize, k: usize) {
    let (x, w, bias) = (values(1, m * k), values(2, k * n), values(3, n));
    let mut y = vec![f32::NAN; m * n];
    gemm_bias_relu::run(&x, &w, &bias, &mut y, m, n, k).unwrap();
    let t = |shape: &[usize], v: &[f32]| HostTensor::from_f32(DType::F32, shape, v).unwrap();
    let want = interp(
        gemm_bias_relu::TINY_IR,
        &[("M", m as i64), ("N", n as i64), ("K", k as i64)],
        &[t(&[m, k], &x), t(&[k, n], &w), t(&[n], &bias)],
    );
    assert_close(&y, &want[0], F32_TOL);
    assert!(y.iter().any(|&v| v > 0.0) && y.contains(&0.0), "ReLU leaves positives and clamps negatives");
}

#[test]
fn gemm_bias_relu_matches_the_interpreter_on_odd_sizes() {
    gemm(7, 5, 3);
    gemm(1, 13, 9);
}

#[test]
fn gemm_bias_relu_matches_the_interpreter_on_its_shapeset_point() {
    gemm(64, 64, 64);
    // Next to the point: the generic body.
    gemm(64, 64, 63);
}

#[test]
fn softmax_rows_f16_matches_the_interpreter() {
    let (r, c) = (5, 11);
    let logits: Vec<f16> = values(4, r * c).iter().map(|&v| f16::from_f32(4.0 * v)).collect();
    let mut p = vec![f16::ZERO; r * c];
    softmax_rows::run(&logits, &mut p, r, c, r * c).unwrap();
    let input = HostTensor::from_f32(DType::F16, &[r * c], &logits.iter().map(|v| v.to_f32()).collect::<Vec<_>>());
    let want =
        interp(softmax_rows::TINY_IR, &[("R", r as i64), ("C", c as i64), ("L", (r * c) as i64)], &[input.unwrap()]);
    let got: Vec<f32> = p.iter().map(|v| v.to_f32()).collect();
    assert_close(&got, &want[0], F16_TOL);
    for row in got.chunks(c) {
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-2, "a softmax row sums to 1: {row:?}");
    }
}

#[test]
fn the_modules_carry_their_ir_and_c_source() {
    assert!(gemm_bias_relu::TINY_IR.contains("\"REDUCE\"") || gemm_bias_relu::TINY_IR.contains("REDUCE"));
    // The C unit: the GEMM on the packed contraction template.
    assert!(gemm_bias_relu::GENERATED_SOURCE.contains("pk_rt->ukernel("), "the C unit");
    assert!(softmax_rows::GENERATED_SOURCE.contains("uint16_t"), "f16 as 16-bit patterns");
}

#[test]
fn bad_arguments_are_errors_and_nothing_is_written() {
    let (m, n, k) = (3, 4, 2);
    let (x, w, bias) = (values(5, m * k), values(6, k * n), values(7, n));
    let mut y = vec![-7.0f32; m * n];

    let e = gemm_bias_relu::run(&x[1..], &w, &bias, &mut y, m, n, k).unwrap_err();
    assert_eq!(e, Error::LengthMismatch { arg: "x".into(), expected: m * k, got: m * k - 1 });
    let e = gemm_bias_relu::run(&x, &w, &bias, &mut y[..m * n - 1], m, n, k).unwrap_err();
    assert_eq!(e, Error::LengthMismatch { arg: "y".into(), expected: m * n, got: m * n - 1 });
    let e = gemm_bias_relu::run(&x, &w, &bias, &mut y, 0, n, k).unwrap_err();
    assert_eq!(e, Error::InvalidDim { dim: "M".into(), value: 0 });
    let e = gemm_bias_relu::run(&x, &w, &bias, &mut y, m, n, 1 << 31).unwrap_err();
    assert_eq!(e, Error::InvalidDim { dim: "K".into(), value: 1 << 31 });
    assert!(y.iter().all(|&v| v == -7.0), "a failed check writes nothing");

    let (r, c) = (2, 3);
    let logits = vec![f16::ONE; r * c];
    let mut p = vec![f16::NEG_ONE; r * c];
    let e = softmax_rows::run(&logits, &mut p, r, c, r * c + 1).unwrap_err();
    let Error::DimMismatch { expected, got, .. } = &e else { panic!("expected DimMismatch, got {e:?}") };
    assert_eq!((*expected, *got), ((r * c) as i64, (r * c + 1) as i64), "{e}");
    assert!(p.iter().all(|&v| v == f16::NEG_ONE), "a failed check writes nothing");
}

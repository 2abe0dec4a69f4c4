//! The benchmarks' check of their answers: every row of `bench_cpu`,
//! `bench_gpu`, `bench_onnx` and `bench_conv_pool` compares tgc's output
//! with its peer's (NumPy, ONNX Runtime, PyTorch, or tgc's reference
//! variant) on the same inputs, prints the [`Agreement`] in its table, and
//! fails the row when it exceeds the op's bound; a benchmark with a failed
//! row exits non-zero after printing every row. Included by each example
//! with `#[path]`; `tests/bench_agreement.rs` runs this module's tests.
//!
//! The comparison is normwise: `max|tgc − peer| ≤ tol · max|peer|` over
//! the whole output. Elementwise relative error means nothing at the
//! outputs that cancel to near zero (a GEMM's, a cumsum's), while a wrong
//! kernel (an index bug, a missing tile, a wrong constant) moves some
//! output by a fraction of the largest. NaN or infinity on either side
//! fails the row.
//!
//! # The bounds
//!
//! `ε` is the output dtype's machine epsilon (2⁻¹⁰ f16, 2⁻⁷ bf16, 2⁻²³
//! f32), `ε32` = 2⁻²³ that of the f32 accumulators both sides use, and
//! `n` the op's reduction length. All inputs are tgc's sample values,
//! uniform in [−1, 1). The "√n·ε32" terms are the rounding of an n-term f32
//! sum of random-sign terms, about `√n·u` of the terms' norm with high
//! probability (Higham and Mary, "A New Approach to Probabilistic Rounding
//! Error Analysis", SIAM J. Sci. Comput. 41(5), 2019), which for such sums
//! is below `√n·ε32` of the largest output; the factor 4 covers two sides
//! summing in different orders and the tail of the largest of millions of
//! outputs.
//!
//! | op | tol | why |
//! | --- | --- | --- |
//! | [`Op::Contraction`] (GEMM, `n` = K) | 4ε + 4√n·ε32 | each side rounds its output once (½ ulp each), PyTorch's unfused bias + ReLU once more, and cuBLAS may add split-K partials in the output dtype (PyTorch's default `allow_fp16_reduced_precision_reduction`): 4 ulp |
//! | [`Op::Conv`] (`n` = C·R·S) | 12ε + 4√n·ε32 | a contraction, plus Winograd F(2×2, 3×3)'s transforms rounded to the operand dtype (`gpu::winograd`'s error bound: 2u per product, over random signs a few ulp of the output): 8 ulp more |
//! | [`Op::Softmax`] | 4ε + 3e-6 + 4√n·ε32 | the rounded output, tgc's `exp` (2.5 ulp + 2.7e-6 relative, docs/numerics.md), the row sum |
//! | [`Op::Layernorm`] | 8ε + 4√n·ε32 | the rounded output, `rsqrt` (1.5 ulp) and the products with gamma and beta, the mean and variance sums |
//! | [`Op::Cumsum`] | 4ε + 4√n·ε32 | the rounded output and the prefix sums (a blocked scan on tgc's side, a sequential one on the peer's) |
//! | [`Op::Attention`] | 8ε | the rounded output (1 ulp), and on both sides (FlashAttention-2) the probabilities rounded to the operand dtype before P·V: u per weight, which averages out over the row |
//! | [`Op::Model`], f32 | 1e-3 | dozens of layers, each a contraction summed in another order than the peer's; the bound `bench_onnx` has used, met by every model it runs |
//! | [`Op::Model`], 16-bit | 16ε | six transformer layers that each round their activations to the dtype several times |
//!
//! # Wrong on purpose
//!
//! With `TGC_BENCH_CORRUPT=1` in the environment, [`compare`] adds the
//! largest magnitude of tgc's output (1 if it is all zeros) to its first
//! element before comparing: one wrong value, the smallest change a wrong
//! kernel makes, which every row must then print as `FAIL`.

use std::fmt;

use tgc_runtime::{DType, HostTensor};

/// The environment switch that makes every tgc output wrong before it is
/// compared (module doc, "Wrong on purpose").
pub const CORRUPT_ENV: &str = "TGC_BENCH_CORRUPT";

/// What a benchmark row computes, for its bound (the module doc's table).
#[derive(Clone, Copy, Debug)]
pub enum Op {
    /// A GEMM: `n` products summed per output.
    Contraction { n: usize },
    /// A convolution: `n` = C·R·S products summed per output (by an
    /// implicit GEMM or Winograd).
    Conv { n: usize },
    /// Softmax over rows of `n`.
    Softmax { n: usize },
    /// Layernorm over rows of `n`.
    Layernorm { n: usize },
    /// Cumulative sum over rows of `n`.
    Cumsum { n: usize },
    /// Scaled dot-product attention.
    Attention,
    /// A whole model.
    Model,
}

/// The machine epsilon of `dtype` (the gap from 1 to the next value); 0 for
/// the integer and boolean dtypes, which must agree exactly.
pub fn epsilon(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => 2f64.powi(-10),
        DType::BF16 => 2f64.powi(-7),
        DType::F32 => 2f64.powi(-23),
        DType::I32 | DType::Bool => 0.0,
    }
}

impl Op {
    /// The normwise bound `tol` of this op with outputs in `dtype`:
    /// `max|tgc − peer| ≤ tol · max|peer|` (the module doc's table).
    pub fn tolerance(self, dtype: DType) -> f64 {
        let eps = epsilon(dtype);
        let sum = |n: usize| 4.0 * (n as f64).sqrt() * epsilon(DType::F32);
        match self {
            Op::Contraction { n } => 4.0 * eps + sum(n),
            Op::Conv { n } => 12.0 * eps + sum(n),
            Op::Softmax { n } => 4.0 * eps + 3e-6 + sum(n),
            Op::Layernorm { n } => 8.0 * eps + sum(n),
            Op::Cumsum { n } => 4.0 * eps + sum(n),
            Op::Attention => 8.0 * eps,
            Op::Model if dtype == DType::F32 => 1e-3,
            Op::Model => 16.0 * eps,
        }
    }
}

/// How one output of tgc's agrees with its peer's.
#[derive(Clone, Copy, Debug)]
pub struct Agreement {
    /// `max|tgc − peer|` (NaN when either side has a NaN or an infinity).
    pub max_abs: f64,
    /// `max_abs / max|peer|` (0 where both are 0, infinity where only the
    /// peer's output is all zeros).
    pub max_rel: f64,
    /// The op's bound on `max_rel` ([`Op::tolerance`]).
    pub tol: f64,
}

impl Agreement {
    /// Whether the difference is within the bound (false for NaN).
    pub fn ok(&self) -> bool {
        self.max_rel <= self.tol
    }

    /// The worse of two outputs' agreements (a model with several outputs
    /// fails if one does).
    pub fn worse(self, other: Agreement) -> Agreement {
        if !other.ok() || (self.ok() && other.max_rel / other.tol > self.max_rel / self.tol) {
            other
        } else {
            self
        }
    }
}

/// `max|d|/rel ok`, or `FAIL` in place of `ok`: the table cell.
impl fmt::Display for Agreement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = if self.ok() { "ok" } else { "FAIL" };
        let cell = format!("{:.1e}/{:.1e} {verdict}", self.max_abs, self.max_rel);
        f.pad(&cell)
    }
}

/// Compares tgc's output `got` with the peer's `want` under `op`'s bound
/// for `got`'s dtype, `got` first made wrong when [`CORRUPT_ENV`] is `1`.
///
/// Errors: the shapes differ (the message names both).
pub fn compare(got: &HostTensor, want: &HostTensor, op: Op) -> Result<Agreement, String> {
    let corrupt = std::env::var(CORRUPT_ENV).is_ok_and(|v| v == "1");
    compare_with(got, want, op, corrupt)
}

/// [`compare`] with the switch given: `corrupt` adds `got`'s largest
/// magnitude (1 if it is all zeros) to its first element before comparing.
///
/// Errors: the shapes differ.
pub fn compare_with(got: &HostTensor, want: &HostTensor, op: Op, corrupt: bool) -> Result<Agreement, String> {
    if got.shape() != want.shape() {
        return Err(format!("tgc's output has shape {:?}, the peer's {:?}", got.shape(), want.shape()));
    }
    let mut g = got.to_f64_vec();
    if corrupt {
        let largest = g.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        if let Some(first) = g.first_mut() {
            *first += if largest > 0.0 { largest } else { 1.0 };
        }
    }
    let w = want.to_f64_vec();
    let not_finite = g.iter().chain(&w).any(|v| !v.is_finite());
    let max_abs = if not_finite { f64::NAN } else { g.iter().zip(&w).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max) };
    let scale = w.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let max_rel = if max_abs == 0.0 { 0.0 } else { max_abs / scale };
    Ok(Agreement { max_abs, max_rel, tol: op.tolerance(got.dtype()) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(dtype: DType, values: &[f64]) -> HostTensor {
        HostTensor::from_f64(dtype, &[values.len()], values).unwrap()
    }

    /// A 64×64 by 64×64 f32 GEMM of sample values, summed in f64 (the
    /// peer) and in f32 in the opposite order (tgc): two honest kernels.
    fn gemm_pair() -> (Vec<f64>, Vec<f64>) {
        let n = 64;
        let x = tgc_runtime::tensor::sample_values(1, n * n);
        let w = tgc_runtime::tensor::sample_values(2, n * n);
        let (x32, w32): (Vec<f32>, Vec<f32>) =
            (x.iter().map(|&v| v as f32).collect(), w.iter().map(|&v| v as f32).collect());
        let mut exact = vec![0.0; n * n];
        let mut f32_sum = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                exact[i * n + j] = (0..n).map(|k| x32[i * n + k] as f64 * w32[k * n + j] as f64).sum();
                f32_sum[i * n + j] = (0..n).rev().fold(0f32, |s, k| x32[i * n + k].mul_add(w32[k * n + j], s)) as f64;
            }
        }
        (f32_sum, exact)
    }

    #[test]
    fn an_honest_gemm_agrees_and_a_wrong_element_fails() {
        let (got, want) = gemm_pair();
        let op = Op::Contraction { n: 64 };
        let a = compare_with(&tensor(DType::F32, &got), &tensor(DType::F32, &want), op, false).unwrap();
        assert!(a.ok() && a.max_abs > 0.0, "{a}");
        // A kernel that drops the last product of one output.
        let mut wrong = got.clone();
        wrong[100] -= 0.5;
        let a = compare_with(&tensor(DType::F32, &wrong), &tensor(DType::F32, &want), op, false).unwrap();
        assert!(!a.ok(), "{a}");
        assert!(a.to_string().ends_with("FAIL"), "{a}");
    }

    #[test]
    fn the_corrupt_switch_fails_identical_outputs() {
        let (got, _) = gemm_pair();
        let t = tensor(DType::F16, &got);
        for op in [
            Op::Contraction { n: 4096 },
            Op::Conv { n: 2304 },
            Op::Softmax { n: 4096 },
            Op::Layernorm { n: 4096 },
            Op::Cumsum { n: 1 << 24 },
            Op::Attention,
            Op::Model,
        ] {
            for dtype in [DType::F16, DType::BF16, DType::F32] {
                let t = t.convert(dtype);
                assert!(compare_with(&t, &t, op, false).unwrap().ok());
                let a = compare_with(&t, &t, op, true).unwrap();
                assert!(!a.ok(), "{op:?} {dtype}: {a}");
            }
        }
        let zeros = tensor(DType::F32, &[0.0; 4]);
        assert!(!compare_with(&zeros, &zeros, Op::Model, true).unwrap().ok());
    }

    /// The one test that reads the environment (the others pass the switch).
    #[test]
    fn compare_reads_the_switch_from_the_environment() {
        let t = tensor(DType::F32, &[1.0, -2.0, 3.0]);
        std::env::set_var(CORRUPT_ENV, "1");
        let corrupted = compare(&t, &t, Op::Model).unwrap();
        std::env::set_var(CORRUPT_ENV, "0");
        let honest = compare(&t, &t, Op::Model).unwrap();
        std::env::remove_var(CORRUPT_ENV);
        assert!(!corrupted.ok() && corrupted.max_abs == 3.0, "{corrupted}");
        assert!(honest.ok() && honest.max_abs == 0.0, "{honest}");
    }

    #[test]
    fn the_bound_is_normwise_and_grows_with_the_reduction() {
        // An error of 1e-5 at an output near zero is within the f32 GEMM's
        // bound when the largest output is 10, not when it is 0.1.
        let want = [10.0, 1e-4, -3.0];
        let got = [10.0, 1e-4 + 1e-5, -3.0];
        let op = Op::Contraction { n: 1024 };
        assert!(compare_with(&tensor(DType::F32, &got), &tensor(DType::F32, &want), op, false).unwrap().ok());
        let small: Vec<f64> = want.iter().map(|v| v / 100.0).collect();
        let got: Vec<f64> = small.iter().enumerate().map(|(i, v)| if i == 1 { v + 1e-5 } else { *v }).collect();
        assert!(!compare_with(&tensor(DType::F32, &got), &tensor(DType::F32, &small), op, false).unwrap().ok());
        assert!(Op::Cumsum { n: 1 << 22 }.tolerance(DType::F32) > Op::Cumsum { n: 1024 }.tolerance(DType::F32));
        assert!(Op::Contraction { n: 64 }.tolerance(DType::F16) > Op::Contraction { n: 64 }.tolerance(DType::F32));
    }

    #[test]
    fn nan_infinity_and_a_wrong_shape_never_agree() {
        let want = tensor(DType::F32, &[1.0, 2.0]);
        let nan = tensor(DType::F32, &[1.0, f64::NAN]);
        let inf = tensor(DType::F32, &[1.0, f64::INFINITY]);
        assert!(!compare_with(&nan, &want, Op::Model, false).unwrap().ok());
        assert!(!compare_with(&inf, &inf, Op::Model, false).unwrap().ok());
        let e = compare_with(&tensor(DType::F32, &[1.0]), &want, Op::Model, false).unwrap_err();
        assert!(e.contains("[1]") && e.contains("[2]"), "{e}");
    }

    #[test]
    fn the_worse_of_two_outputs_is_kept() {
        let good = Agreement { max_abs: 1e-6, max_rel: 1e-6, tol: 1e-3 };
        let closer = Agreement { max_abs: 1e-4, max_rel: 5e-4, tol: 1e-3 };
        let bad = Agreement { max_abs: 1.0, max_rel: 1.0, tol: 1e-3 };
        assert_eq!(good.worse(closer).max_rel, 5e-4);
        assert!(!good.worse(bad).ok() && !bad.worse(good).ok());
    }
}

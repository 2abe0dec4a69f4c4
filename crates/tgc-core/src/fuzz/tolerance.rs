//! How far an evaluator's element may be from the interpreter's on the
//! `graphs` target's numeric cases ([`super::gen`]): one function,
//! [`bound`], from an op, the dtype of its result and the magnitudes of its
//! operands to a [`Bound`], and [`Bound::allows`], the comparison.
//!
//! Sources. The interpreter computes in f64 and rounds where the graph says
//! so; an evaluator computes each op in f32 (f16 and bf16 in f32, rounded
//! when stored). The per-op rows are those of `docs/numerics.md` ("Error
//! bounds of the CPU backend", which hold for the GPU emulator too: it
//! computes the same decomposition in f32 with `exp2f`/`log2f` no less
//! accurate than `tgc_exp2f`/`log2f`). A sum of `n` terms `s` in f32 in any
//! order is within `(n − 1)·u·Σ|s|` (Higham, *Accuracy and Stability of
//! Numerical Algorithms*, 2002, §4.2; `u = 2^-24`), and a product of f32
//! operands adds `u·|s|` per term. The bounds of softmax, layernorm and
//! attention are composed from those rows as each variant's doc says. A
//! result stored as f16 or bf16 is rounded on both sides: two f32 values
//! `δ` apart round to values at most `δ` plus one step of the dtype apart.

use crate::DType;

/// The unit roundoff of f32, 2^-24.
pub const U: f64 = 1.0 / 16_777_216.0;

/// An op of a numeric case with what its bound needs to know.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op {
    /// `exp` (`docs/numerics.md` row `exp`).
    Exp,
    /// `log` (row `log`).
    Log,
    /// `erf` (row `erf`).
    Erf,
    /// `tanh` (row `tanh`).
    Tanh,
    /// `sigmoid` (row `sigmoid`).
    Sigmoid,
    /// `softmax` along an axis of `n` elements whose values are at most
    /// `max_abs` in magnitude.
    Softmax { n: usize, max_abs: f64 },
    /// A sum of `n` products (`matmul`, a convolution: `n` is K, or
    /// Cin/groups·ΠK) of operands at most `a` and `b` in magnitude, maybe
    /// plus a bias.
    Contraction { n: usize, a: f64, b: f64 },
    /// `layernorm` over rows of `n` elements: `shift` is the largest
    /// `(n·max|x| + |μ|)/σ'` of a row (`σ' = √(var + eps)`, the f32 error
    /// of the mean relative to the deviation it shifts), `gamma` and
    /// `beta` the largest magnitudes of the affine parameters.
    LayerNorm { n: usize, shift: f64, gamma: f64, beta: f64 },
    /// `attention` with `d` = D, `keys` = N, operands at most `q`, `k`,
    /// `v` in magnitude and scale `scale`; `p_rounded`: the evaluator
    /// rounds the probabilities to the operands' dtype before `P·V` (the
    /// fused attention template, `gpu/attention_tests.rs`).
    Attention { d: usize, keys: usize, q: f64, k: f64, v: f64, scale: f64, p_rounded: bool },
}

/// An error bound: `ulp` units in the last place of the interpreter's
/// value in f32, `rel` relative to it, `abs` absolute, then one rounding
/// step of `dtype` when that is f16 or bf16 (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bound {
    pub ulp: f64,
    pub rel: f64,
    pub abs: f64,
    pub dtype: DType,
}

/// The bound of `op` with a result of `dtype` (see the module doc for the
/// sources; each arm names its own).
pub fn bound(op: Op, dtype: DType) -> Bound {
    let (ulp, rel, abs) = match op {
        // Rows `exp`, `log`, `erf`, `tanh`, `sigmoid` of docs/numerics.md.
        Op::Exp => (2.5, 2.7e-6, 1.6e-44),
        Op::Log => (2.0, 0.0, 0.0),
        Op::Erf => (0.0, 0.0, 6e-7),
        Op::Tanh => (0.0, 0.0, 2.4e-7),
        Op::Sigmoid => (1.0, 3e-6, 3e-39),
        Op::Softmax { n, max_abs } => {
            // `e = EXP2((x − max)·log2 e)`: `exp`'s relative bound at an
            // argument of at most 2·max_abs, which the two roundings of the
            // argument (the difference and the product) scale by
            // (2|x − max| + 2)·u (`frontend::ops::elementwise::exp`); the
            // numerator and the sum each carry it, the sum of n positive
            // terms adds (n − 1)·u, the division one rounding.
            let e = 2.7e-6 + (4.0 * max_abs + 2.0) * U;
            (0.0, 2.0 * e + n as f64 * U, 0.0)
        }
        Op::Contraction { n, a, b } => {
            // n products rounded (u each) and summed ((n − 1)·u), with
            // Σ|s| ≤ n·a·b; the bias add, one rounding of the result.
            (0.5, 0.0, n as f64 * U * (n as f64 * a * b))
        }
        Op::LayerNorm { n, shift, gamma, beta } => {
            // The mean's error (a sum of n terms and a division) shifts each
            // deviation by at most `shift·u` in units of σ'; the variance (a
            // sum of n squares, (n + 1)·u relative), `+ eps`, `RSQRT` (1.5
            // ulp) and the product scale |z| ≤ √n by ((n + 1)/2 + 5)·u; then
            // `·gamma` and `+ beta`, one rounding each.
            let nf = n as f64;
            let z = nf.sqrt();
            let dz = shift * U + z * ((nf + 1.0) / 2.0 + 5.0) * U;
            (0.0, U, gamma * dz + (z * gamma + beta) * U)
        }
        Op::Attention { d, keys, q, k, v, scale, p_rounded } => {
            // Scores: a contraction of D products, then `·scale` (one
            // rounding, and the constant's); softmax over N of them: each
            // probability's relative error is twice the largest score error
            // (numerator and sum) plus the softmax bound above; `P·V` is a
            // contraction of N terms whose Σp|v| ≤ max|v|. The fused template
            // rounds P to the operands' dtype (2^-11 for f16, 2^-8 for bf16
            // relative) and rescales its running sums on the way (a few more
            // roundings of the probabilities).
            let s = d as f64 * q * k * scale;
            let ds = (d as f64 + 2.0) * U * s;
            let soft = 2.7e-6 + (8.0 * s + 2.0) * U;
            let mut p = 2.0 * ds + 2.0 * soft + keys as f64 * U;
            if p_rounded {
                p += step(dtype) / 2.0 + 8.0 * U;
            }
            (0.0, 0.0, v * (p + keys as f64 * U))
        }
    };
    Bound { ulp, rel, abs, dtype }
}

impl Bound {
    /// The largest distance allowed from the interpreter's `want`.
    pub fn slack(&self, want: f64) -> f64 {
        let narrow = match self.dtype {
            DType::F16 | DType::BF16 => ulp_of(self.dtype, want),
            _ => 0.0,
        };
        self.ulp * ulp_of(DType::F32, want) + self.rel * want.abs() + self.abs + narrow
    }

    /// Whether `got` is within the bound of the interpreter's `want`: both
    /// NaN, or equal (infinities of one sign included), or within
    /// [`Bound::slack`]; an infinity meets a finite value of its sign only
    /// when the bound reaches past the dtype's largest finite value.
    pub fn allows(&self, got: f64, want: f64) -> bool {
        if got.is_nan() || want.is_nan() {
            return got.is_nan() && want.is_nan();
        }
        if got == want {
            return true;
        }
        match (got.is_infinite(), want.is_infinite()) {
            (false, false) => (got - want).abs() <= self.slack(want),
            (true, true) => false,
            (g_inf, _) => {
                let (inf, fin) = if g_inf { (got, want) } else { (want, got) };
                inf.signum() == fin.signum() && fin.abs() + self.slack(fin) >= max_finite(self.dtype)
            }
        }
    }
}

/// One step of `dtype` at 1: 2^-10 for f16, 2^-7 for bf16, 2^-23 for f32.
fn step(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => 1.0 / 1024.0,
        DType::BF16 => 1.0 / 128.0,
        _ => 2.0 * U,
    }
}

/// The unit in the last place of `x` in `dtype` (f16, bf16 or f32): the
/// step at |x|'s binade, the subnormal step below the normal range.
pub fn ulp_of(dtype: DType, x: f64) -> f64 {
    let (min_exp, mant) = match dtype {
        DType::F16 => (-14, 10),
        DType::BF16 => (-126, 7),
        _ => (-126, 23),
    };
    let a = x.abs();
    let e = if a == 0.0 || !a.is_finite() { min_exp } else { (a.log2().floor() as i32).max(min_exp) };
    2f64.powi(e - mant)
}

/// The largest finite value of `dtype` (f16, bf16 or f32).
fn max_finite(dtype: DType) -> f64 {
    match dtype {
        DType::F16 => 65504.0,
        DType::BF16 => 3.389_531_389_251_535_5e38,
        _ => f32::MAX as f64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ulp of f16, bf16 and f32 at 1, in a binade, among the
    /// subnormals; one ulp away passes a 1-ulp bound, two do not.
    #[test]
    fn ulps_and_the_comparison() {
        assert_eq!(ulp_of(DType::F32, 1.0), 2f64.powi(-23));
        assert_eq!(ulp_of(DType::F32, 3.0), 2f64.powi(-22));
        assert_eq!(ulp_of(DType::F32, 1e-40), 2f64.powi(-149));
        assert_eq!(ulp_of(DType::F16, 1.0), 2f64.powi(-10));
        assert_eq!(ulp_of(DType::F16, 1e-6), 2f64.powi(-24));
        assert_eq!(ulp_of(DType::BF16, 1.5), 2f64.powi(-7));
        let b = Bound { ulp: 1.0, rel: 0.0, abs: 0.0, dtype: DType::F32 };
        let one_ulp = 2f64.powi(-23);
        assert!(b.allows(1.0 + one_ulp, 1.0));
        assert!(!b.allows(1.0 + 2.0 * one_ulp, 1.0));
        assert!(b.allows(f64::NAN, f64::NAN) && !b.allows(f64::NAN, 1.0) && !b.allows(1.0, f64::NAN));
        assert!(b.allows(f64::INFINITY, f64::INFINITY) && !b.allows(f64::INFINITY, f64::NEG_INFINITY));
        assert!(!b.allows(f64::INFINITY, 1.0));
        let h = Bound { dtype: DType::F16, ..b };
        assert!(h.allows(f64::INFINITY, 65504.0), "65504 is one f16 step from overflowing");
        assert!(!h.allows(f64::INFINITY, 30000.0));
        assert!(h.allows(1.0 + 2f64.powi(-10), 1.0), "one f16 step");
    }

    /// A sum's bound grows with its length and its operands' magnitudes.
    #[test]
    fn a_contraction_bound_is_n_u_times_the_sum_of_magnitudes() {
        let b = bound(Op::Contraction { n: 8, a: 2.0, b: 0.5 }, DType::F32);
        assert_eq!(b.abs, 8.0 * U * 8.0);
        assert_eq!(bound(Op::Erf, DType::F32).abs, 6e-7);
    }
}

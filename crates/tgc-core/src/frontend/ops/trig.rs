//! Circular and hyperbolic functions and their inverses, decomposed into
//! `MUL ADD SUB FDIV RECIP SQRT EXP2 LOG2 CAST WHERE CMPLT CMPEQ`.
//!
//! `sin cos tan` reduce `|x|` by Cody–Waite (W. J. Cody and W. Waite,
//! *Software Manual for the Elementary Functions*, 1980, ch. 8): `k =
//! round(|x|·2/π)` (a `CAST` to i32 and back truncates `|x|·2/π + 1/2`),
//! `r = |x| − k·π/2` with π/2 in five parts, the first four of 8 significant
//! bits so that `k·Cᵢ` is exact for `k < 2^16` ([`REDUCE_MAX`]); beyond that
//! bound the result is NaN rather than a value with no correct digit. The
//! polynomials on `|r| ≤ π/4` and those of `atan` and `asin` are the single
//! precision minimax polynomials of Cephes (S. L. Moshier, *Methods and
//! Programs for Mathematical Functions*, 1989; `sinf.c`, `atanf.c`,
//! `asinf.c`). The hyperbolic functions go through `exp` and a `log1p`
//! written without its cancellation near 0. Each function takes an f32
//! operand (the caller [`super::elementwise::unary`] upcasts f16/bf16) and
//! states its error against exact mathematics measured in f32 by
//! `frontend/tests/numeric.rs`.

use std::f64::consts::{FRAC_PI_2, FRAC_PI_4, PI};

use crate::diag::DResult;
use crate::tiny::{BinaryOp, Graph, NodeId, UnaryOp};
use crate::DType;

use super::const_like;
use super::elementwise::{abs, const_with, horner, is_negative, log, with_const};
use super::{LN_2, LOG2_E};

/// The largest `|x|` that `sin cos tan` reduce: `k = round(|x|·2/π) ≤
/// 41 723 < 2^16`, so `k` times each 8-bit part of π/2 is exact in f32.
pub const REDUCE_MAX: f64 = 65_536.0;

/// π/2 as a sum of parts: four of 8 significant bits (exact products with
/// `k < 2^16`) and an f32 remainder; their sum is π/2 within 2^-63.
const PIO2_PARTS: [f64; 5] = [
    1.570_312_5,
    4.844_665_527_343_75e-4,
    -6.407_499_313_354_492e-7,
    9.895_302_355_289_46e-10,
    2.563_344_068_257_089_6e-12,
];

/// Cephes `sinf.c`: `sin r ≈ r + r·z·P(z)`, `z = r²`, `|r| ≤ π/4`.
const SIN_P: [f64; 3] = [-1.951_529_589_1e-4, 8.332_160_873_6e-3, -1.666_665_461_1e-1];
/// Cephes `sinf.c`: `cos r ≈ 1 − z/2 + z²·Q(z)`, `z = r²`, `|r| ≤ π/4`.
const COS_Q: [f64; 3] = [2.443_315_711_809_948e-5, -1.388_731_625_493_765e-3, 4.166_664_568_298_827e-2];
/// Cephes `atanf.c`: `atan t ≈ t + t·z·P(z)`, `z = t²`, `|t| ≤ tan(π/8)`.
const ATAN_P: [f64; 4] = [8.053_744_495_38e-2, -1.387_768_560_32e-1, 1.997_771_064_78e-1, -3.333_294_915_39e-1];
/// Cephes `asinf.c`: `asin t ≈ t + t·z·P(z)`, `z = t²`, `|t| ≤ 1/2`.
const ASIN_P: [f64; 5] =
    [4.216_319_904_8e-2, 2.418_131_104_9e-2, 4.547_002_599_8e-2, 7.495_300_268_6e-2, 1.666_675_242_2e-1];
/// Taylor coefficients 1/13!·13·12, …: `sinh t ≈ t + t·z·P(z)`, `z = t²`,
/// `|t| < 1`; the first omitted term, `t^13/13!`, is below 1.7e-10·|t|.
const SINH_P: [f64; 5] = [1.0 / 39_916_800.0, 1.0 / 362_880.0, 1.0 / 5_040.0, 1.0 / 120.0, 1.0 / 6.0];

/// From this `|x|` on, `asinh` and `acosh` use `ln(2|x|)`: `x² + 1 = x²` in
/// f32 there, and `x²` would overflow from 1.8e19.
const ASINH_LARGE: f64 = 4096.0;

/// `t + t·z·P(z)` with `z = t²`, the odd polynomial of every Cephes kernel.
fn odd_poly(g: &mut Graph, t: NodeId, cs: &[f64]) -> DResult<NodeId> {
    let z = g.binary(BinaryOp::Mul, t, t)?;
    let p = horner(g, z, cs)?;
    let tz = g.binary(BinaryOp::Mul, t, z)?;
    let m = g.binary(BinaryOp::Mul, tz, p)?;
    g.binary(BinaryOp::Add, t, m)
}

/// `x` truncated toward zero to an integer-valued f32: `CAST` to i32 and
/// back, exact for `|x| < 2^31`.
fn trunc(g: &mut Graph, x: NodeId) -> DResult<NodeId> {
    let i = g.cast(x, DType::I32)?;
    g.cast(i, DType::F32)
}

/// `WHERE(c, −y, y)`.
fn negate_where(g: &mut Graph, c: NodeId, y: NodeId) -> DResult<NodeId> {
    let n = g.unary(UnaryOp::Neg, y)?;
    g.where_(c, n, y)
}

/// `y` with the sign of `x` (`y ≥ 0`): `WHERE(x < 0, −y, y)`.
fn with_sign_of(g: &mut Graph, x: NodeId, y: NodeId) -> DResult<NodeId> {
    let c = is_negative(g, x)?;
    negate_where(g, c, y)
}

/// `WHERE(c, NaN, y)`: the value outside a domain.
fn nan_where(g: &mut Graph, c: NodeId, y: NodeId) -> DResult<NodeId> {
    let nan = const_like(g, y, f64::NAN)?;
    g.where_(c, nan, y)
}

/// `WHERE(hi < x, NaN, y)`.
fn nan_above(g: &mut Graph, x: NodeId, hi: f64, y: NodeId) -> DResult<NodeId> {
    let h = const_like(g, x, hi)?;
    let c = g.binary(BinaryOp::Cmplt, h, x)?;
    nan_where(g, c, y)
}

/// The reduction of `a = |x|`: `(k, sin r, cos r)` with `a = k·π/2 + r`.
fn reduce(g: &mut Graph, a: NodeId) -> DResult<(NodeId, NodeId, NodeId)> {
    let v = with_const(g, BinaryOp::Mul, a, 2.0 / PI)?;
    let v = with_const(g, BinaryOp::Add, v, 0.5)?;
    let k = trunc(g, v)?;
    let mut r = a;
    for c in PIO2_PARTS {
        let kc = with_const(g, BinaryOp::Mul, k, c)?;
        r = g.binary(BinaryOp::Sub, r, kc)?;
    }
    let s = odd_poly(g, r, &SIN_P)?;
    let z = g.binary(BinaryOp::Mul, r, r)?;
    let q = horner(g, z, &COS_Q)?;
    let zz = g.binary(BinaryOp::Mul, z, z)?;
    let t = g.binary(BinaryOp::Mul, zz, q)?;
    let hz = with_const(g, BinaryOp::Mul, z, 0.5)?;
    let c = const_with(g, BinaryOp::Sub, 1.0, hz)?;
    let c = g.binary(BinaryOp::Add, c, t)?;
    Ok((k, s, c))
}

/// `sin(k·π/2 + r)` from `sin r` and `cos r`: with `q = k mod 4`, `sin r`,
/// `cos r`, `−sin r`, `−cos r` for q = 0, 1, 2, 3 (exact selections).
fn quadrant(g: &mut Graph, k: NodeId, s: NodeId, c: NodeId) -> DResult<NodeId> {
    let quarter = with_const(g, BinaryOp::Mul, k, 0.25)?;
    let whole = trunc(g, quarter)?;
    let four = with_const(g, BinaryOp::Mul, whole, 4.0)?;
    let q = g.binary(BinaryOp::Sub, k, four)?;
    let half = with_const(g, BinaryOp::Mul, q, 0.5)?;
    let pairs = trunc(g, half)?;
    let even = with_const(g, BinaryOp::Mul, pairs, 2.0)?;
    let odd = g.binary(BinaryOp::Cmplt, even, q)?;
    let y = g.where_(odd, c, s)?;
    let one = const_like(g, q, 1.5)?;
    let upper = g.binary(BinaryOp::Cmplt, one, q)?;
    negate_where(g, upper, y)
}

/// `sin |x|` and `cos |x|` by the reduction (NaN beyond [`REDUCE_MAX`]).
fn sin_cos_abs(g: &mut Graph, x: NodeId) -> DResult<(NodeId, NodeId)> {
    let a = abs(g, x)?;
    let (k, s, c) = reduce(g, a)?;
    let sin = quadrant(g, k, s, c)?;
    let k1 = with_const(g, BinaryOp::Add, k, 1.0)?;
    let cos = quadrant(g, k1, s, c)?;
    Ok((nan_above(g, a, REDUCE_MAX, sin)?, nan_above(g, a, REDUCE_MAX, cos)?))
}

/// `sin x` by the reduction; NaN for `|x| > 65536` ([`REDUCE_MAX`]) and ±inf.
///
/// Max error (f32): 3.5 ulp for `|x| ≤ 65536`.
pub fn sin(g: &mut Graph, x: NodeId) -> DResult<NodeId> {
    let (s, _) = sin_cos_abs(g, x)?;
    with_sign_of(g, x, s)
}

/// `cos x` by the reduction; NaN for `|x| > 65536` ([`REDUCE_MAX`]) and ±inf.
///
/// Max error (f32): 3.5 ulp for `|x| ≤ 65536`.
pub fn cos(g: &mut Graph, x: NodeId) -> DResult<NodeId> {
    let (_, c) = sin_cos_abs(g, x)?;
    Ok(c)
}

/// `tan x = sin x / cos x`, both from one reduction; NaN for `|x| > 65536`
/// ([`REDUCE_MAX`]) and ±inf.
///
/// Max error (f32): 7 ulp for `|x| ≤ 65536`.
pub fn tan(g: &mut Graph, x: NodeId) -> DResult<NodeId> {
    let (s, c) = sin_cos_abs(g, x)?;
    let t = g.binary(BinaryOp::Fdiv, s, c)?;
    with_sign_of(g, x, t)
}

/// `atan x`: with `a = |x|`, `t = −1/a` and base π/2 above tan(3π/8), `t =
/// (a − 1)/(a + 1)` and base π/4 above tan(π/8), else `t = a`; then `base +
/// t + t·z·P(z)` (Cephes `atanf.c`), with the sign of x. ±inf give ±π/2.
///
/// Max error (f32): 2.5 ulp.
pub fn atan(g: &mut Graph, x: NodeId) -> DResult<NodeId> {
    let a = abs(g, x)?;
    let ra = g.unary(UnaryOp::Recip, a)?;
    let t_hi = g.unary(UnaryOp::Neg, ra)?;
    let am = with_const(g, BinaryOp::Sub, a, 1.0)?;
    let ap = with_const(g, BinaryOp::Add, a, 1.0)?;
    let t_mid = g.binary(BinaryOp::Fdiv, am, ap)?;
    let tan3 = const_like(g, a, 2.414_213_562_373_095)?;
    let hi = g.binary(BinaryOp::Cmplt, tan3, a)?;
    let tan1 = const_like(g, a, 0.414_213_562_373_095)?;
    let mid = g.binary(BinaryOp::Cmplt, tan1, a)?;
    let t = g.where_(mid, t_mid, a)?;
    let t = g.where_(hi, t_hi, t)?;
    let (b_hi, b_mid, b_lo) = (const_like(g, a, FRAC_PI_2)?, const_like(g, a, FRAC_PI_4)?, const_like(g, a, 0.0)?);
    let base = g.where_(mid, b_mid, b_lo)?;
    let base = g.where_(hi, b_hi, base)?;
    let p = odd_poly(g, t, &ATAN_P)?;
    let y = g.binary(BinaryOp::Add, base, p)?;
    with_sign_of(g, x, y)
}

/// `2·asin(√((1 − u)/2))` for `u ≥ 1/2` (`= π/2 − asin u`, without its
/// cancellation near u = 1); NaN for `u > 1`.
fn twice_asin_half_complement(g: &mut Graph, u: NodeId) -> DResult<NodeId> {
    let d = const_with(g, BinaryOp::Sub, 1.0, u)?;
    let h = with_const(g, BinaryOp::Mul, d, 0.5)?;
    let s = g.unary(UnaryOp::Sqrt, h)?;
    let p = odd_poly(g, s, &ASIN_P)?;
    with_const(g, BinaryOp::Mul, p, 2.0)
}

/// `asin x`: with `a = |x|`, the polynomial (Cephes `asinf.c`) for `a ≤ 1/2`,
/// else `π/2 − 2·asin(√((1 − a)/2))`; the sign of x; NaN for `|x| > 1`.
///
/// Max error (f32): 2.5 ulp.
pub fn asin(g: &mut Graph, x: NodeId) -> DResult<NodeId> {
    let a = abs(g, x)?;
    let small = odd_poly(g, a, &ASIN_P)?;
    let w = twice_asin_half_complement(g, a)?;
    let big = const_with(g, BinaryOp::Sub, FRAC_PI_2, w)?;
    let half = const_like(g, a, 0.5)?;
    let c = g.binary(BinaryOp::Cmplt, half, a)?;
    let y = g.where_(c, big, small)?;
    with_sign_of(g, x, y)
}

/// `acos x`: `2·asin(√((1 − x)/2))` for `x > 1/2`, `π − 2·asin(√((1 +
/// x)/2))` for `x < −1/2`, else `π/2 − asin x` by the polynomial; NaN for
/// `|x| > 1`.
///
/// Max error (f32): 1.5 ulp.
pub fn acos(g: &mut Graph, x: NodeId) -> DResult<NodeId> {
    let pos = twice_asin_half_complement(g, x)?;
    let nx = g.unary(UnaryOp::Neg, x)?;
    let wn = twice_asin_half_complement(g, nx)?;
    let neg = const_with(g, BinaryOp::Sub, PI, wn)?;
    let p = odd_poly(g, x, &ASIN_P)?;
    let mid = const_with(g, BinaryOp::Sub, FRAC_PI_2, p)?;
    let half = const_like(g, x, 0.5)?;
    let above = g.binary(BinaryOp::Cmplt, half, x)?;
    let minus_half = const_like(g, x, -0.5)?;
    let below = g.binary(BinaryOp::Cmplt, x, minus_half)?;
    let y = g.where_(below, neg, mid)?;
    g.where_(above, pos, y)
}

/// `ln(1 + u)` for finite `u > −1` without the cancellation of `log(1 + u)`
/// near 0: `w = 1 + u`; `u` where `w = 1`, else `log(w)·u/(w − 1)` (W. Kahan;
/// Goldberg, "What every computer scientist should know about floating-point
/// arithmetic", 1991, Theorem 4: the quotient corrects the rounding of `w`).
fn log1p(g: &mut Graph, u: NodeId) -> DResult<NodeId> {
    let w = const_with(g, BinaryOp::Add, 1.0, u)?;
    let l = log(g, w)?;
    let d = with_const(g, BinaryOp::Sub, w, 1.0)?;
    let q = g.binary(BinaryOp::Fdiv, u, d)?;
    let v = g.binary(BinaryOp::Mul, l, q)?;
    let one = const_like(g, w, 1.0)?;
    let exact = g.binary(BinaryOp::Cmpeq, w, one)?;
    g.where_(exact, u, v)
}

/// `e^a / 2` for `a ≥ 0`: `EXP2(a·log2 e − 1)`, which overflows only where
/// the result does.
fn half_exp(g: &mut Graph, a: NodeId) -> DResult<NodeId> {
    let s = with_const(g, BinaryOp::Mul, a, LOG2_E)?;
    let s = with_const(g, BinaryOp::Sub, s, 1.0)?;
    g.unary(UnaryOp::Exp2, s)
}

/// `sinh x`: with `a = |x|`, the Taylor polynomial [`SINH_P`] for `a < 1`,
/// else `h − 1/(4h)` with `h = e^a/2`; the sign of x.
///
/// Max error (f32): 2 ulp + `(2|x| + 2)·2^-24` relative (`exp`'s rounding of
/// `a·log2 e`; 1.1e-5 at |x| = 89).
pub fn sinh(g: &mut Graph, x: NodeId) -> DResult<NodeId> {
    let a = abs(g, x)?;
    let small = odd_poly(g, a, &SINH_P)?;
    let h = half_exp(g, a)?;
    let q = const_with(g, BinaryOp::Fdiv, 0.25, h)?;
    let big = g.binary(BinaryOp::Sub, h, q)?;
    let one = const_like(g, a, 1.0)?;
    let c = g.binary(BinaryOp::Cmplt, a, one)?;
    let y = g.where_(c, small, big)?;
    with_sign_of(g, x, y)
}

/// `cosh x = h + 1/(4h)` with `h = e^|x|/2`.
///
/// Max error (f32): 2 ulp + `(2|x| + 2)·2^-24` relative (that of `sinh`).
pub fn cosh(g: &mut Graph, x: NodeId) -> DResult<NodeId> {
    let a = abs(g, x)?;
    let h = half_exp(g, a)?;
    let q = const_with(g, BinaryOp::Fdiv, 0.25, h)?;
    g.binary(BinaryOp::Add, h, q)
}

/// `ln(x) + ln 2`, the value of `asinh` and `acosh` from [`ASINH_LARGE`] on.
fn log_twice(g: &mut Graph, x: NodeId) -> DResult<NodeId> {
    let l = log(g, x)?;
    with_const(g, BinaryOp::Add, l, LN_2)
}

/// `asinh x`: with `a = |x|`, `log1p(a + a²/(1 + √(a² + 1)))` below 4096,
/// `ln(2a)` from there; the sign of x.
///
/// Max error (f32): 2.5 ulp.
pub fn asinh(g: &mut Graph, x: NodeId) -> DResult<NodeId> {
    let a = abs(g, x)?;
    let z = g.binary(BinaryOp::Mul, a, a)?;
    let z1 = with_const(g, BinaryOp::Add, z, 1.0)?;
    let r = g.unary(UnaryOp::Sqrt, z1)?;
    let d = with_const(g, BinaryOp::Add, r, 1.0)?;
    let f = g.binary(BinaryOp::Fdiv, z, d)?;
    let u = g.binary(BinaryOp::Add, a, f)?;
    let small = log1p(g, u)?;
    let big = log_twice(g, a)?;
    let lim = const_like(g, a, ASINH_LARGE)?;
    let c = g.binary(BinaryOp::Cmplt, a, lim)?;
    let y = g.where_(c, small, big)?;
    with_sign_of(g, x, y)
}

/// `acosh x`: with `t = x − 1` (exact near 1), `log1p(t + √(t·(x + 1)))`
/// below 4096, `ln(2x)` from there; NaN for `x < 1` (a `WHERE`: for
/// large negative x the formula need not give NaN, since `√(t·(x + 1))`
/// may cancel `t`).
///
/// Max error (f32): 3 ulp.
pub fn acosh(g: &mut Graph, x: NodeId) -> DResult<NodeId> {
    let t = with_const(g, BinaryOp::Sub, x, 1.0)?;
    let xp = with_const(g, BinaryOp::Add, x, 1.0)?;
    let p = g.binary(BinaryOp::Mul, t, xp)?;
    let r = g.unary(UnaryOp::Sqrt, p)?;
    let u = g.binary(BinaryOp::Add, t, r)?;
    let small = log1p(g, u)?;
    let big = log_twice(g, x)?;
    let lim = const_like(g, x, ASINH_LARGE)?;
    let c = g.binary(BinaryOp::Cmplt, x, lim)?;
    let y = g.where_(c, small, big)?;
    let one = const_like(g, x, 1.0)?;
    let below = g.binary(BinaryOp::Cmplt, x, one)?;
    nan_where(g, below, y)
}

/// `atanh x`: with `a = |x|`, `log1p(2a/(1 − a))/2` below 1/2, `log((1 +
/// a)/(1 − a))/2` from there; the sign of x; ±inf at ±1, NaN beyond.
///
/// Max error (f32): 3.5 ulp.
pub fn atanh(g: &mut Graph, x: NodeId) -> DResult<NodeId> {
    let a = abs(g, x)?;
    let d = const_with(g, BinaryOp::Sub, 1.0, a)?;
    let a2 = with_const(g, BinaryOp::Mul, a, 2.0)?;
    let u = g.binary(BinaryOp::Fdiv, a2, d)?;
    let small = log1p(g, u)?;
    let n = with_const(g, BinaryOp::Add, a, 1.0)?;
    let ratio = g.binary(BinaryOp::Fdiv, n, d)?;
    let big = log(g, ratio)?;
    let half = const_like(g, a, 0.5)?;
    let c = g.binary(BinaryOp::Cmplt, a, half)?;
    let y = g.where_(c, small, big)?;
    let y = with_const(g, BinaryOp::Mul, y, 0.5)?;
    with_sign_of(g, x, y)
}

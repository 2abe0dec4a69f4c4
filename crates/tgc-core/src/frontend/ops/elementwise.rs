//! Element-wise ops: operators, comparisons, `where`, `cast`, and the
//! activations, with the decompositions of those outside the Tiny vocabulary.
//!
//! Direct mappings (exact: one Tiny op): `relu` RELU, `neg` NEG, `exp2`
//! EXP2, `log2` LOG2, `sqrt` SQRT, `rsqrt` RSQRT, `recip` RECIP, `+ - * /`
//! ADD SUB MUL FDIV, `maximum`/`minimum` MAX/MIN, `<` CMPLT, `==` CMPEQ.
//! The others are documented on their functions. Float constants below are
//! the f64 values, rounded once to f32 by `CONST`.

use crate::diag::DResult;
use crate::frontend::ir::{BinaryFn, UnaryFn};
use crate::tiny::{BinaryOp, Graph, NodeId, UnaryOp};

use super::trig;
use super::{broadcast_shape, broadcast_to, cast_to, const_like, require_float, upcast, LN_2, LOG2_E};

/// `a f b` with right-aligned broadcasting (decision 3).
///
/// Comparisons give `bool`: `a > b` is `CMPLT(b, a)`; `a <= b` is
/// `MAX(CMPLT(a, b), CMPEQ(a, b))` (an OR on bools, so a NaN operand gives
/// false as IEEE does); `a >= b` likewise with swapped `CMPLT`; `a != b` is
/// `CMPEQ(CMPEQ(a, b), false)` (true for NaN). All exact.
///
/// Errors: `BroadcastMismatch`; `DTypeMismatch` for operands of different
/// dtypes, `/` on integers, arithmetic on bools.
pub fn binary(g: &mut Graph, f: BinaryFn, a: NodeId, b: NodeId) -> DResult<NodeId> {
    if f == BinaryFn::Pow {
        return pow(g, a, b);
    }
    let shape = broadcast_shape(g, g.shape(a), g.shape(b))?;
    let a = broadcast_to(g, a, &shape)?;
    let b = broadcast_to(g, b, &shape)?;
    let op = |o| move |g: &mut Graph| g.binary(o, a, b);
    match f {
        BinaryFn::Add => op(BinaryOp::Add)(g),
        BinaryFn::Sub => op(BinaryOp::Sub)(g),
        BinaryFn::Mul => op(BinaryOp::Mul)(g),
        BinaryFn::Div => op(BinaryOp::Fdiv)(g),
        BinaryFn::Maximum => op(BinaryOp::Max)(g),
        BinaryFn::Minimum => op(BinaryOp::Min)(g),
        BinaryFn::Lt => g.binary(BinaryOp::Cmplt, a, b),
        BinaryFn::Gt => g.binary(BinaryOp::Cmplt, b, a),
        BinaryFn::Eq => g.binary(BinaryOp::Cmpeq, a, b),
        BinaryFn::Le | BinaryFn::Ge => {
            let lt =
                if f == BinaryFn::Le { g.binary(BinaryOp::Cmplt, a, b)? } else { g.binary(BinaryOp::Cmplt, b, a)? };
            let eq = g.binary(BinaryOp::Cmpeq, a, b)?;
            g.binary(BinaryOp::Max, lt, eq)
        }
        BinaryFn::Ne => {
            let eq = g.binary(BinaryOp::Cmpeq, a, b)?;
            not(g, eq)
        }
        BinaryFn::Pow => pow(g, a, b),
    }
}

/// The largest exponent magnitude of a constant integer exponent that
/// [`pow`] computes by repeated squaring.
const POW_SQUARING_MAX: f64 = 64.0;

/// `pow(a, b)`, `a` to the power `b`, broadcast together; float operands,
/// f16/bf16 computed in f32.
///
/// A constant integer exponent `n` with `|n| ≤ 64` (`pow(x, 2)`) is exact
/// arithmetic: `x^|n|` by repeated squaring (at most 11 `MUL`s), `RECIP` of
/// it for `n < 0`, `1` for `n = 0`. Max error (f32): relative
/// `(|n| + 1)·2^-24` where the result is a normal f32 (each squaring
/// doubles the error of its operand).
///
/// Otherwise `EXP2(b · LOG2|a|)` with the special cases of C's `pow` (C11
/// F.10.4.4): a negative `a` gives the sign `(-1)^b` when `b` is an integer
/// and NaN otherwise; `b = 0` and `a = 1` give 1 even against a NaN. An
/// integer is a value equal to its conversion to i32 and back, or of
/// magnitude at least 2^24 (every such f32 is an even integer). Max error
/// (f32): relative `(1.5·|b·log2 a| + 4)·2^-24` (the roundings of `LOG2`
/// and of the product move the exponent), measured on `a` in [1e-3, 1e3],
/// `b` in [-8, 8].
///
/// Errors: `DTypeMismatch` for a non-float operand or operands of different
/// dtypes; `BroadcastMismatch`.
pub fn pow(g: &mut Graph, a: NodeId, b: NodeId) -> DResult<NodeId> {
    require_float(g, a, "pow")?;
    require_float(g, b, "pow")?;
    let shape = broadcast_shape(g, g.shape(a), g.shape(b))?;
    let dt = g.dtype(a);
    if g.dtype(b) != dt {
        let msg = format!("pow of {dt} by {}: the operands need one dtype; cast one of them", g.dtype(b));
        return Err(super::fail(g, crate::diag!(DTypeMismatch, "{msg}")));
    }
    let a = upcast(g, a)?;
    let a = broadcast_to(g, a, &shape)?;
    let constant = match g.node(b).op {
        crate::tiny::Op::Const { value } => Some(value),
        _ => None,
    };
    let y = match constant {
        Some(n) if n.fract() == 0.0 && n.abs() <= POW_SQUARING_MAX => pow_int(g, a, n as i64)?,
        _ => {
            let b = upcast(g, b)?;
            let b = broadcast_to(g, b, &shape)?;
            pow_general(g, a, b)?
        }
    };
    cast_to(g, y, dt)
}

/// `a^n` for an integer `n` by repeated squaring, exact but for the roundings
/// of its products.
fn pow_int(g: &mut Graph, a: NodeId, n: i64) -> DResult<NodeId> {
    let (mut base, mut e, mut acc) = (a, n.unsigned_abs(), None);
    while e > 0 {
        if e & 1 == 1 {
            acc = Some(match acc {
                Some(p) => g.binary(BinaryOp::Mul, p, base)?,
                None => base,
            });
        }
        e >>= 1;
        if e > 0 {
            base = g.binary(BinaryOp::Mul, base, base)?;
        }
    }
    match acc {
        None => const_like(g, a, 1.0),
        Some(p) if n < 0 => g.unary(UnaryOp::Recip, p),
        Some(p) => Ok(p),
    }
}

/// Whether each value of the f32 tensor `x` is an integer (see [`pow`]).
fn is_integer(g: &mut Graph, x: NodeId) -> DResult<NodeId> {
    let i = g.cast(x, crate::DType::I32)?;
    let back = g.cast(i, crate::DType::F32)?;
    let same = g.binary(BinaryOp::Cmpeq, back, x)?;
    let ax = abs(g, x)?;
    let big = const_like(g, ax, 16_777_216.0)?;
    let large = g.binary(BinaryOp::Cmplt, ax, big)?;
    let large = not(g, large)?;
    g.binary(BinaryOp::Max, same, large)
}

/// `pow(a, b)` of same-shaped f32 tensors through `EXP2(b · LOG2|a|)`.
fn pow_general(g: &mut Graph, a: NodeId, b: NodeId) -> DResult<NodeId> {
    let ax = abs(g, a)?;
    let l = g.unary(UnaryOp::Log2, ax)?;
    let p = g.binary(BinaryOp::Mul, b, l)?;
    let m = g.unary(UnaryOp::Exp2, p)?;
    // A negative base: (-1)^b for an integer b, NaN otherwise.
    let b_int = is_integer(g, b)?;
    let half = with_const(g, BinaryOp::Mul, b, 0.5)?;
    let b_even = is_integer(g, half)?;
    let neg_m = g.unary(UnaryOp::Neg, m)?;
    let signed = g.where_(b_even, m, neg_m)?;
    let nan = const_like(g, m, f64::NAN)?;
    let negative = g.where_(b_int, signed, nan)?;
    let zero = const_like(g, a, 0.0)?;
    let below = g.binary(BinaryOp::Cmplt, a, zero)?;
    let y = g.where_(below, negative, m)?;
    // b = 0 or a = 1: exactly 1.
    let one = const_like(g, a, 1.0)?;
    let b_zero = with_const(g, BinaryOp::Cmpeq, b, 0.0)?;
    let a_one = g.binary(BinaryOp::Cmpeq, a, one)?;
    let unit = g.binary(BinaryOp::Max, b_zero, a_one)?;
    g.where_(unit, one, y)
}

/// `clamp(x, min, max) = MIN(MAX(x, min), max)` with the bounds given; exact.
/// NaN stays NaN (`MAX`/`MIN` propagate it); a `min` above `max` gives `max`
/// everywhere, as PyTorch's `clamp`.
///
/// Errors: `DTypeMismatch` for a fractional bound of an integer `x` or a
/// `bool` `x`.
pub fn clamp(g: &mut Graph, x: NodeId, min: Option<f64>, max: Option<f64>) -> DResult<NodeId> {
    let dt = g.dtype(x);
    for v in [min, max].into_iter().flatten() {
        if dt == crate::DType::Bool || (!dt.is_float() && v.fract() != 0.0) {
            return Err(super::fail(g, crate::diag!(DTypeMismatch, "clamp bound {v} is not a value of {dt}")));
        }
    }
    let mut y = x;
    if let Some(lo) = min {
        y = with_const(g, BinaryOp::Max, y, lo)?;
    }
    if let Some(hi) = max {
        y = with_const(g, BinaryOp::Min, y, hi)?;
    }
    Ok(y)
}

/// `sign(x)`: -1, 0 or 1 in the dtype of `x`, as `CAST(0 < x) − CAST(x < 0)`;
/// NaN stays NaN (`WHERE(x == x, …, x)`); exact, for floats and i32.
///
/// Errors: `DTypeMismatch` for a `bool` operand.
pub fn sign(g: &mut Graph, x: NodeId) -> DResult<NodeId> {
    let dt = g.dtype(x);
    if dt == crate::DType::Bool {
        return Err(super::fail(g, crate::diag!(DTypeMismatch, "sign needs a number, got bool")));
    }
    let zero = const_like(g, x, 0.0)?;
    let pos = g.binary(BinaryOp::Cmplt, zero, x)?;
    let neg = g.binary(BinaryOp::Cmplt, x, zero)?;
    let pos = g.cast(pos, dt)?;
    let neg = g.cast(neg, dt)?;
    let s = g.binary(BinaryOp::Sub, pos, neg)?;
    if !dt.is_float() {
        return Ok(s);
    }
    let number = g.binary(BinaryOp::Cmpeq, x, x)?;
    g.where_(number, s, x)
}

/// Logical not of a bool tensor: `CMPEQ(c, false)`.
pub fn not(g: &mut Graph, c: NodeId) -> DResult<NodeId> {
    let f = const_like(g, c, 0.0)?;
    g.binary(BinaryOp::Cmpeq, c, f)
}

/// `where(cond, a, b)` with the three operands broadcast together.
///
/// Errors: `BroadcastMismatch`; `DTypeMismatch` when `cond` is not bool or
/// the branches differ in dtype.
pub fn where_(g: &mut Graph, cond: NodeId, a: NodeId, b: NodeId) -> DResult<NodeId> {
    let s = broadcast_shape(g, g.shape(cond), g.shape(a))?;
    let s = broadcast_shape(g, &s, g.shape(b))?;
    let c = broadcast_to(g, cond, &s)?;
    let a = broadcast_to(g, a, &s)?;
    let b = broadcast_to(g, b, &s)?;
    g.where_(c, a, b)
}

/// `x op c` for a scalar constant `c` in the dtype of `x`.
pub(super) fn with_const(g: &mut Graph, op: BinaryOp, x: NodeId, c: f64) -> DResult<NodeId> {
    let k = const_like(g, x, c)?;
    g.binary(op, x, k)
}

/// `c op x` for a scalar constant `c`.
pub(super) fn const_with(g: &mut Graph, op: BinaryOp, c: f64, x: NodeId) -> DResult<NodeId> {
    let k = const_like(g, x, c)?;
    g.binary(op, k, x)
}

/// Horner's rule `(…(c₀·z + c₁)·z + …) + cₙ` in the dtype of `z`
/// (`cs` not empty).
pub(super) fn horner(g: &mut Graph, z: NodeId, cs: &[f64]) -> DResult<NodeId> {
    let mut p = const_like(g, z, cs[0])?;
    for &c in &cs[1..] {
        let m = g.binary(BinaryOp::Mul, p, z)?;
        p = with_const(g, BinaryOp::Add, m, c)?;
    }
    Ok(p)
}

/// Applies an element-wise function of one operand.
///
/// Decomposed functions (`exp log sigmoid tanh silu gelu gelu_tanh erf`, and
/// the circular and hyperbolic functions of [`trig`]) need a float operand and compute f16/bf16 in f32, casting back.
///
/// Errors: `DTypeMismatch` for a non-float operand where one is needed
/// (`neg`, `relu` and `abs` also take i32).
pub fn unary(g: &mut Graph, f: UnaryFn, x: NodeId) -> DResult<NodeId> {
    let direct = |op| move |g: &mut Graph| g.unary(op, x);
    match f {
        UnaryFn::Relu => direct(UnaryOp::Relu)(g),
        UnaryFn::Neg => direct(UnaryOp::Neg)(g),
        UnaryFn::Exp2 => direct(UnaryOp::Exp2)(g),
        UnaryFn::Log2 => direct(UnaryOp::Log2)(g),
        UnaryFn::Sqrt => direct(UnaryOp::Sqrt)(g),
        UnaryFn::Rsqrt => direct(UnaryOp::Rsqrt)(g),
        UnaryFn::Recip => direct(UnaryOp::Recip)(g),
        UnaryFn::Abs => abs(g, x),
        UnaryFn::Sign => sign(g, x),
        _ => {
            require_float(g, x, f.name())?;
            let dt = g.dtype(x);
            let x = upcast(g, x)?;
            let y = match f {
                UnaryFn::Exp => exp(g, x)?,
                UnaryFn::Log => log(g, x)?,
                UnaryFn::Sigmoid => sigmoid(g, x)?,
                UnaryFn::Tanh => tanh(g, x)?,
                UnaryFn::Silu => silu(g, x)?,
                UnaryFn::Gelu => gelu(g, x)?,
                UnaryFn::GeluTanh => gelu_tanh(g, x)?,
                UnaryFn::Sin => trig::sin(g, x)?,
                UnaryFn::Cos => trig::cos(g, x)?,
                UnaryFn::Tan => trig::tan(g, x)?,
                UnaryFn::Asin => trig::asin(g, x)?,
                UnaryFn::Acos => trig::acos(g, x)?,
                UnaryFn::Atan => trig::atan(g, x)?,
                UnaryFn::Sinh => trig::sinh(g, x)?,
                UnaryFn::Cosh => trig::cosh(g, x)?,
                UnaryFn::Asinh => trig::asinh(g, x)?,
                UnaryFn::Acosh => trig::acosh(g, x)?,
                UnaryFn::Atanh => trig::atanh(g, x)?,
                _ => erf(g, x)?,
            };
            cast_to(g, y, dt)
        }
    }
}

/// `|x| = MAX(x, NEG(x))`; exact.
pub fn abs(g: &mut Graph, x: NodeId) -> DResult<NodeId> {
    let n = g.unary(UnaryOp::Neg, x)?;
    g.binary(BinaryOp::Max, x, n)
}

/// `exp(x) = EXP2(x · log2 e)`.
///
/// Max error (f32): relative `(2|x| + 2)·2^-24` (the roundings of log2 e and
/// of `x·log2 e` shift the exponent; ≤ 1.1e-5 over the finite range
/// |x| ≤ 88).
pub fn exp(g: &mut Graph, x: NodeId) -> DResult<NodeId> {
    let s = with_const(g, BinaryOp::Mul, x, LOG2_E)?;
    g.unary(UnaryOp::Exp2, s)
}

/// `log(x) = LOG2(x) · ln 2`.
///
/// Max error (f32): relative 2e-7 for x in [1e-3, 1e4] (three roundings).
pub fn log(g: &mut Graph, x: NodeId) -> DResult<NodeId> {
    let l = g.unary(UnaryOp::Log2, x)?;
    with_const(g, BinaryOp::Mul, l, LN_2)
}

/// `sigmoid(x) = RECIP(1 + EXP2(x · -log2 e))`; saturates to 0 and 1
/// without NaN (EXP2 overflows to +inf, RECIP(inf) = 0).
///
/// Max error (f32): absolute 1.2e-7; relative 2e-6 for |x| ≤ 30 (the
/// `exp` term's error, visible in the tail x → −∞).
pub fn sigmoid(g: &mut Graph, x: NodeId) -> DResult<NodeId> {
    let s = with_const(g, BinaryOp::Mul, x, -LOG2_E)?;
    let e = g.unary(UnaryOp::Exp2, s)?;
    let d = const_with(g, BinaryOp::Add, 1.0, e)?;
    g.unary(UnaryOp::Recip, d)
}

/// `tanh(x) = 2·sigmoid(2x) − 1`.
///
/// Max error (f32): absolute 2.4e-7 (the final `− 1` cancels near 0, so the
/// error is absolute, not relative).
pub fn tanh(g: &mut Graph, x: NodeId) -> DResult<NodeId> {
    let x2 = with_const(g, BinaryOp::Mul, x, 2.0)?;
    let s = sigmoid(g, x2)?;
    let s2 = with_const(g, BinaryOp::Mul, s, 2.0)?;
    with_const(g, BinaryOp::Sub, s2, 1.0)
}

/// `silu(x) = x · sigmoid(x)`.
///
/// Max error (f32): relative 2e-6 for |x| ≤ 30 (that of `sigmoid` plus one rounding).
pub fn silu(g: &mut Graph, x: NodeId) -> DResult<NodeId> {
    let s = sigmoid(g, x)?;
    g.binary(BinaryOp::Mul, x, s)
}

/// Abramowitz & Stegun 7.1.26 coefficients: `erfc(a) ≈ t·(a1 + t·(a2 + t·(a3
/// + t·(a4 + t·a5))))·exp(−a²)` with `t = 1/(1 + p·a)` for `a ≥ 0`,
/// `|error| ≤ 1.5e-7` (Handbook of Mathematical Functions, 1964, p. 299).
pub const AS_P: f64 = 0.327_591_1;
/// `a1` to `a5` of [`AS_P`]'s formula.
pub const AS_A: [f64; 5] = [0.254_829_592, -0.284_496_736, 1.421_413_741, -1.453_152_027, 1.061_405_429];

/// `erfc(a)` for `a ≥ 0` by A&S 7.1.26 in f64: `t·(a1 + t·(a2 + t·(a3 +
/// t·(a4 + t·a5))))·exp(−a²)`, `t = 1/(1 + p·a)`, the formula [`erfc_abs`]
/// decomposes, for a back end that computes GELU in one step (the GPU
/// emulator's epilogue; `emit::cuda` prints the same expression).
pub fn erfc_abs_f64(a: f64) -> f64 {
    let t = 1.0 / (1.0 + AS_P * a);
    let poly = AS_A.iter().rev().fold(0.0, |p, &c| p * t + c);
    t * poly * (-a * a).exp()
}

/// `erfc(|x|)` by A&S 7.1.26 (see [`AS_A`]): `a = MAX(x, −x)`, `t = RECIP(1 +
/// p·a)`, a Horner polynomial in `t`, times `EXP2(−a²·log2 e)`.
fn erfc_abs(g: &mut Graph, x: NodeId) -> DResult<NodeId> {
    let a = abs(g, x)?;
    let pa = with_const(g, BinaryOp::Mul, a, AS_P)?;
    let d = const_with(g, BinaryOp::Add, 1.0, pa)?;
    let t = g.unary(UnaryOp::Recip, d)?;
    let a5_first: Vec<f64> = AS_A.iter().rev().copied().collect();
    let poly = horner(g, t, &a5_first)?;
    let poly = g.binary(BinaryOp::Mul, poly, t)?;
    let a2 = g.binary(BinaryOp::Mul, a, a)?;
    let s = with_const(g, BinaryOp::Mul, a2, -LOG2_E)?;
    let e = g.unary(UnaryOp::Exp2, s)?;
    g.binary(BinaryOp::Mul, poly, e)
}

/// `x < 0` as a bool tensor.
pub(super) fn is_negative(g: &mut Graph, x: NodeId) -> DResult<NodeId> {
    let z = const_like(g, x, 0.0)?;
    g.binary(BinaryOp::Cmplt, x, z)
}

/// `erf(x) = WHERE(x < 0, q − 1, 1 − q)` with `q = erfc(|x|)` by A&S 7.1.26.
///
/// Max error: absolute 1.5e-7 in exact arithmetic (A&S); 5e-7 in f32.
pub fn erf(g: &mut Graph, x: NodeId) -> DResult<NodeId> {
    let q = erfc_abs(g, x)?;
    let neg = with_const(g, BinaryOp::Sub, q, 1.0)?;
    let pos = const_with(g, BinaryOp::Sub, 1.0, q)?;
    let c = is_negative(g, x)?;
    g.where_(c, neg, pos)
}

/// `gelu(x) = 0.5·x·(1 + erf(x/√2))`, written without cancellation as
/// `0.5·x·WHERE(u < 0, q, 2 − q)` with `u = x·(1/√2)` and `q = erfc(|u|)` by
/// A&S 7.1.26 (`1 + erf(u) = erfc(−u)`).
///
/// Max error: absolute `0.75e-7·|x|` in exact arithmetic (half the A&S
/// bound times |x|); absolute 5e-7 in f32 for |x| ≤ 10.
pub fn gelu(g: &mut Graph, x: NodeId) -> DResult<NodeId> {
    let u = with_const(g, BinaryOp::Mul, x, std::f64::consts::FRAC_1_SQRT_2)?;
    let q = erfc_abs(g, u)?;
    let two_minus = const_with(g, BinaryOp::Sub, 2.0, q)?;
    let c = is_negative(g, u)?;
    let w = g.where_(c, q, two_minus)?;
    let hx = with_const(g, BinaryOp::Mul, x, 0.5)?;
    g.binary(BinaryOp::Mul, hx, w)
}

/// `gelu_tanh(x) = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`, computed as
/// the identical `x·sigmoid(2·√(2/π)·x·(1 + 0.044715·x²))`
/// (`0.5·(1 + tanh z) = sigmoid(2z)`), which does not cancel for x < 0.
///
/// Max error: none in exact arithmetic (an identity); absolute 6e-7 in f32
/// for |x| ≤ 10.
pub fn gelu_tanh(g: &mut Graph, x: NodeId) -> DResult<NodeId> {
    let k = 2.0 * (2.0 / std::f64::consts::PI).sqrt();
    let x2 = g.binary(BinaryOp::Mul, x, x)?;
    let c = with_const(g, BinaryOp::Mul, x2, k * 0.044715)?;
    let c = with_const(g, BinaryOp::Add, c, k)?;
    let z = g.binary(BinaryOp::Mul, x, c)?;
    let s = sigmoid(g, z)?;
    g.binary(BinaryOp::Mul, x, s)
}

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
    }
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
fn with_const(g: &mut Graph, op: BinaryOp, x: NodeId, c: f64) -> DResult<NodeId> {
    let k = const_like(g, x, c)?;
    g.binary(op, x, k)
}

/// `c op x` for a scalar constant `c`.
fn const_with(g: &mut Graph, op: BinaryOp, c: f64, x: NodeId) -> DResult<NodeId> {
    let k = const_like(g, x, c)?;
    g.binary(op, k, x)
}

/// Applies an element-wise function of one operand.
///
/// Decomposed functions (`exp log sigmoid tanh silu gelu gelu_tanh erf`) need
/// a float operand and compute f16/bf16 in f32, casting back.
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
const AS_P: f64 = 0.327_591_1;
const AS_A: [f64; 5] = [0.254_829_592, -0.284_496_736, 1.421_413_741, -1.453_152_027, 1.061_405_429];

/// `erfc(|x|)` by A&S 7.1.26 (see [`AS_A`]): `a = MAX(x, −x)`, `t = RECIP(1 +
/// p·a)`, a Horner polynomial in `t`, times `EXP2(−a²·log2 e)`.
fn erfc_abs(g: &mut Graph, x: NodeId) -> DResult<NodeId> {
    let a = abs(g, x)?;
    let pa = with_const(g, BinaryOp::Mul, a, AS_P)?;
    let d = const_with(g, BinaryOp::Add, 1.0, pa)?;
    let t = g.unary(UnaryOp::Recip, d)?;
    let mut poly = const_like(g, t, AS_A[4])?;
    for c in AS_A[..4].iter().rev() {
        let m = g.binary(BinaryOp::Mul, poly, t)?;
        poly = with_const(g, BinaryOp::Add, m, *c)?;
    }
    let poly = g.binary(BinaryOp::Mul, poly, t)?;
    let a2 = g.binary(BinaryOp::Mul, a, a)?;
    let s = with_const(g, BinaryOp::Mul, a2, -LOG2_E)?;
    let e = g.unary(UnaryOp::Exp2, s)?;
    g.binary(BinaryOp::Mul, poly, e)
}

/// `x < 0` as a bool tensor.
fn is_negative(g: &mut Graph, x: NodeId) -> DResult<NodeId> {
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

//! Run-time `Floor`, `Ceil` and `Round` (half to even), exact for every
//! float: computed in f32 (an f16 or bf16 input is widened and narrowed
//! back, which changes no integral value), from the truncation that a
//! cast to i32 is. Each value with `|x| < 2^23` is truncated and adjusted
//! by one; every other value (larger ones, which f32 holds only as
//! integers, infinities and NaN) is its own result. A zero result takes the
//! sign of the input, as IEEE 754's `roundToIntegral` gives it
//! (`ceil(−0.5) = −0`).

use crate::diag::DResult;
use crate::frontend::ir::*;
use crate::DType;

use super::super::Builder;
use super::{bin, unary, val};

/// `2^23`: from here on every f32 is an integer.
const INTEGRAL: f64 = 8_388_608.0;

/// The rounding of one ONNX operator.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Rounding {
    Floor,
    Ceil,
    /// To the nearest integer, a tie to the even one.
    HalfEven,
}

/// `x` truncated toward zero, in `x`'s dtype (`|x| < 2^23`).
fn trunc(b: &mut Builder, x: ValueId) -> DResult<ValueId> {
    let dt = b.dtype(x)?;
    let i = b.emit(FOp::Cast { to: DType::I32 }, vec![val(x)])?;
    b.emit(FOp::Cast { to: dt }, vec![val(i)])
}

/// `t ± 1` where `cond`, else `t`.
fn step(b: &mut Builder, cond: ValueId, t: ValueId, by: f64) -> DResult<ValueId> {
    let moved = bin(b, BinaryFn::Add, val(t), b.lit(by, LitKind::Float))?;
    b.emit(FOp::Where, vec![val(cond), val(moved), val(t)])
}

/// `floor(x)` for `|x| < 2^23`, in `x`'s dtype (a caller that holds its
/// values in that range first needs none of [`round`]'s guards).
pub(super) fn floor_small(b: &mut Builder, x: ValueId) -> DResult<ValueId> {
    let t = trunc(b, x)?;
    let above = bin(b, BinaryFn::Gt, val(t), val(x))?;
    step(b, above, t, -1.0)
}

/// `x` rounded to an integer by `how` (module doc).
pub(super) fn round(b: &mut Builder, x: ValueId, how: Rounding) -> DResult<ValueId> {
    let dt = b.dtype(x)?;
    let xf = if dt == DType::F32 { x } else { b.emit(FOp::Cast { to: DType::F32 }, vec![val(x)])? };
    let a = unary(b, UnaryFn::Abs, xf)?;
    let small = bin(b, BinaryFn::Lt, val(a), b.lit(INTEGRAL, LitKind::Float))?;
    // Zero where the cast could overflow (or meet a NaN); those elements
    // take `x` at the end.
    let safe = b.emit(FOp::Where, vec![val(small), val(xf), b.lit(0.0, LitKind::Float)])?;
    let r = match how {
        Rounding::Floor => floor_small(b, safe)?,
        Rounding::Ceil => {
            let t = trunc(b, safe)?;
            let below = bin(b, BinaryFn::Lt, val(t), val(safe))?;
            step(b, below, t, 1.0)?
        }
        Rounding::HalfEven => half_even_small(b, safe)?,
    };
    // The sign bit of `x`: negative, or −0 (whose reciprocal is −inf).
    let r_inv = unary(b, UnaryFn::Recip, xf)?;
    let inv_neg = bin(b, BinaryFn::Lt, val(r_inv), b.lit(0.0, LitKind::Float))?;
    let x_neg = bin(b, BinaryFn::Lt, val(xf), b.lit(0.0, LitKind::Float))?;
    let neg = b.emit(FOp::Where, vec![val(x_neg), b.lit(1.0, LitKind::Bool), val(inv_neg)])?;
    let signed_zero = b.emit(FOp::Where, vec![val(neg), b.lit(-0.0, LitKind::Float), b.lit(0.0, LitKind::Float)])?;
    let zero = bin(b, BinaryFn::Eq, val(r), b.lit(0.0, LitKind::Float))?;
    let r = b.emit(FOp::Where, vec![val(zero), val(signed_zero), val(r)])?;
    let y = b.emit(FOp::Where, vec![val(small), val(r), val(xf)])?;
    if dt == DType::F32 {
        return Ok(y);
    }
    b.emit(FOp::Cast { to: dt }, vec![val(y)])
}

/// `x` rounded to the nearest integer, a tie to the even one, for `|x| <
/// 2^23`, in `x`'s dtype.
pub(super) fn half_even_small(b: &mut Builder, x: ValueId) -> DResult<ValueId> {
    // `x − f` is exact: both lie within one unit of each other.
    let f = floor_small(b, x)?;
    let frac = bin(b, BinaryFn::Sub, val(x), val(f))?;
    let half = bin(b, BinaryFn::Mul, val(f), b.lit(0.5, LitKind::Float))?;
    let hf = floor_small(b, half)?;
    let odd = bin(b, BinaryFn::Ne, val(hf), val(half))?;
    let tie = bin(b, BinaryFn::Eq, val(frac), b.lit(0.5, LitKind::Float))?;
    let tie_up = b.emit(FOp::Where, vec![val(tie), val(odd), b.lit(0.0, LitKind::Bool)])?;
    let over = bin(b, BinaryFn::Gt, val(frac), b.lit(0.5, LitKind::Float))?;
    let up = b.emit(FOp::Where, vec![val(over), b.lit(1.0, LitKind::Bool), val(tie_up)])?;
    step(b, up, f, 1.0)
}

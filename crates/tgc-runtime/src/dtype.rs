//! Element types of tgc tensors (`spec/README.md` decision 7).
//!
//! f16 and bf16 are storage types: every backend computes them in f32 and rounds
//! to the storage type when a value is materialized or at a `CAST`.

use std::fmt;

/// Element type of a tensor.
///
/// Spelled `f16`/`bf16`/`f32`/`i32`/`bool` in the graph language and
/// `fp16`/`bf16`/`fp32`/`i32`/`bool` in Tiny IR JSON; [`DType::parse`] accepts both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// IEEE 754 binary16: 1 sign, 5 exponent, 10 mantissa bits.
    F16,
    /// bfloat16: the upper 16 bits of an f32 (8 exponent, 7 mantissa bits).
    BF16,
    /// IEEE 754 binary32.
    F32,
    /// Two's-complement 32-bit integer.
    I32,
    /// Boolean, stored as one byte 0 or 1.
    Bool,
}

impl DType {
    /// All dtypes, in declaration order.
    pub const ALL: [DType; 5] = [DType::F16, DType::BF16, DType::F32, DType::I32, DType::Bool];

    /// Parses either spelling (`f16`/`fp16`, `f32`/`fp32`, `bf16`, `i32`, `bool`).
    pub fn parse(s: &str) -> Option<DType> {
        Some(match s {
            "f16" | "fp16" => DType::F16,
            "bf16" => DType::BF16,
            "f32" | "fp32" => DType::F32,
            "i32" => DType::I32,
            "bool" => DType::Bool,
            _ => return None,
        })
    }

    /// The graph-language spelling (`f16`, `bf16`, `f32`, `i32`, `bool`).
    pub fn dsl_name(self) -> &'static str {
        match self {
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::I32 => "i32",
            DType::Bool => "bool",
        }
    }

    /// The Tiny IR JSON spelling (`fp16`, `bf16`, `fp32`, `i32`, `bool`).
    pub fn json_name(self) -> &'static str {
        match self {
            DType::F16 => "fp16",
            DType::BF16 => "bf16",
            DType::F32 => "fp32",
            DType::I32 => "i32",
            DType::Bool => "bool",
        }
    }

    /// True for f16, bf16 and f32.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32)
    }

    /// Size of one element in memory, in bytes (bool is one byte).
    pub fn size_bytes(self) -> usize {
        match self {
            DType::F16 | DType::BF16 => 2,
            DType::F32 | DType::I32 => 4,
            DType::Bool => 1,
        }
    }

    /// The value Tiny `CAST` to this dtype gives for the value `x` of any
    /// dtype (as f64), one rule for every backend (`docs/numerics.md`):
    /// to i32, truncation toward zero saturating at `i32::MIN` and
    /// `i32::MAX` (±inf included), NaN to 0 — Rust's `as`, and PTX's
    /// `cvt.rzi.s32.f32`; to the other dtypes, [`DType::round`].
    pub fn cast(self, x: f64) -> f64 {
        match self {
            DType::I32 => x as i32 as f64,
            _ => self.round(x),
        }
    }

    /// Rounds an f64 value to this dtype and returns it as f64: the value a
    /// tensor of this dtype can hold (round to nearest even for floats,
    /// truncation toward zero with wrap-around for i32, the two's-complement
    /// result of integer arithmetic, `x != 0` for bool). [`DType::cast`] is
    /// the rule of a `CAST`.
    pub fn round(self, x: f64) -> f64 {
        match self {
            DType::F16 => f16_from_f64(x).to_f64(),
            DType::BF16 => bf16_from_f64(x).to_f64(),
            DType::F32 => x as f32 as f64,
            DType::I32 => {
                if x.is_nan() {
                    0.0
                } else {
                    (x.trunc() as i64 as i32) as f64
                }
            }
            DType::Bool => {
                if x != 0.0 {
                    1.0
                } else {
                    0.0
                }
            }
        }
    }
}

/// Rounds `x` to the nearest f16, ties to even, with a single rounding.
///
/// `half::f16::from_f64` goes through f32 on x86 with F16C (two roundings) and
/// `half::bf16::from_f64` drops the low 32 mantissa bits before rounding, so
/// both can be off by one ulp on ties; rounding to f32 with round-to-odd first
/// is exact (Boldo and Melquiond, "When double rounding is odd", 2005: an odd
/// intermediate with at least two more bits than the target never changes the
/// result).
pub(crate) fn f16_from_f64(x: f64) -> half::f16 {
    half::f16::from_f32(f32_round_to_odd(x))
}

/// Rounds `x` to the nearest bf16, ties to even, with a single rounding
/// (see [`f16_from_f64`]).
pub(crate) fn bf16_from_f64(x: f64) -> half::bf16 {
    half::bf16::from_f32(f32_round_to_odd(x))
}

/// `x` rounded to f32 with round-to-odd: exact values stay, inexact ones take
/// the neighbour toward zero with its lowest mantissa bit forced to one.
fn f32_round_to_odd(x: f64) -> f32 {
    let nearest = x as f32;
    if !x.is_finite() || nearest as f64 == x {
        return nearest;
    }
    let toward_zero = if (nearest as f64).abs() > x.abs() {
        // One step toward zero; also turns an overflowed infinity into MAX.
        f32::from_bits(nearest.to_bits() - 1)
    } else {
        nearest
    };
    f32::from_bits(toward_zero.to_bits() | 1)
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.dsl_name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_spellings_parse_to_the_same_dtype() {
        for d in DType::ALL {
            assert_eq!(DType::parse(d.dsl_name()), Some(d));
            assert_eq!(DType::parse(d.json_name()), Some(d));
        }
        assert_eq!(DType::parse("float"), None);
    }

    #[test]
    fn rounding_matches_storage_precision() {
        assert_eq!(DType::F16.round(1.0 + 1.0 / 4096.0), 1.0);
        assert_eq!(DType::BF16.round(1.0 + 1.0 / 512.0), 1.0);
        assert_eq!(DType::I32.round(-2.7), -2.0);
        assert_eq!(DType::Bool.round(0.5), 1.0);
    }

    #[test]
    fn cast_to_i32_truncates_and_saturates_with_nan_to_zero() {
        let table = [
            (f64::INFINITY, i32::MAX),
            (f64::NEG_INFINITY, i32::MIN),
            (f64::NAN, 0),
            (3e9, i32::MAX),
            (-3e9, i32::MIN),
            (2147483648.0, i32::MAX),
            (-2147483648.0, i32::MIN),
            (2147483520.0, 2147483520),
            (-2.9, -2),
        ];
        for (x, want) in table {
            assert_eq!(DType::I32.cast(x), want as f64, "cast({x}, i32)");
        }
        assert_eq!(DType::I32.round(2147483648.0), i32::MIN as f64, "integer arithmetic wraps");
        assert_eq!(DType::F16.cast(1e300), f64::INFINITY);
    }

    #[test]
    fn f64_rounding_to_half_precision_is_a_single_rounding() {
        // Just above a tie: the bit that breaks it is below f32 precision.
        let above = 2f64.powi(-40);
        assert_eq!(DType::F16.round(1.0 + 2f64.powi(-11) + above), 1.0 + 2f64.powi(-10));
        assert_eq!(DType::BF16.round(1.0 + 2f64.powi(-8) + above), 1.0 + 2f64.powi(-7));
        assert_eq!(DType::BF16.round(-(1.0 + 2f64.powi(-8) + above)), -(1.0 + 2f64.powi(-7)));
        // Exact ties still go to even.
        assert_eq!(DType::F16.round(1.0 + 2f64.powi(-11)), 1.0);
        assert_eq!(DType::BF16.round(1.0 + 3.0 * 2f64.powi(-8)), 1.0 + 2f64.powi(-6));
        // Overflow, underflow and non-finite values.
        assert_eq!(DType::F16.round(1e300), f64::INFINITY);
        assert_eq!(DType::BF16.round(-1e300), f64::NEG_INFINITY);
        assert_eq!(DType::F16.round(1e-300), 0.0);
        assert_eq!(DType::BF16.round(2f64.powi(-134) + above * 2f64.powi(-134)), 2f64.powi(-133));
        assert!(DType::BF16.round(f64::NAN).is_nan());
    }
}

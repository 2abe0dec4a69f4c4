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
    F16,
    BF16,
    F32,
    I32,
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

    /// Rounds an f64 value to this dtype and returns it as f64: the value a
    /// tensor of this dtype can hold (round to nearest even for floats,
    /// truncation toward zero with wrap-around for i32 as C casts do for
    /// in-range values, `x != 0` for bool).
    pub fn round(self, x: f64) -> f64 {
        match self {
            DType::F16 => half::f16::from_f64(x).to_f64(),
            DType::BF16 => half::bf16::from_f64(x).to_f64(),
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
}

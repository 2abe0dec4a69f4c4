//! `tgc::Error`: everything that can go wrong when a user calls a generated
//! kernel function or a runtime helper.
//!
//! Each variant is a user-facing condition (bad arguments, missing device,
//! unreadable file, failed kernel), never a compiler bug; messages name the
//! argument, dimension or file concerned.

use crate::DType;

/// An error from a generated kernel function or a runtime call.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A slice's element count differs from the product of its shape.
    #[error("argument `{arg}` has {got} elements, but its shape needs {expected}")]
    LengthMismatch {
        /// The argument's name.
        arg: String,
        /// Elements the shape needs (product of its dims).
        expected: usize,
        /// Elements the slice has.
        got: usize,
    },

    /// A shape (or another structured size, such as a byte length) differs from
    /// the one required; `expected` and `got` are already formatted.
    #[error("{what}: expected {expected}, got {got}")]
    ShapeMismatch {
        /// What was checked, e.g. "shape of `x`".
        what: String,
        /// The required value, formatted.
        expected: String,
        /// The value found, formatted.
        got: String,
    },

    /// A symbolic dimension was given two different values, or a run-time shape
    /// constraint failed; `dim` names the dimension or states the constraint.
    #[error("dimension `{dim}`: expected {expected}, got {got}")]
    DimMismatch {
        /// The dimension's name, or the constraint that failed.
        dim: String,
        /// The value required (or first seen).
        expected: i64,
        /// The value found.
        got: i64,
    },

    /// A dimension is zero or negative where a positive value is needed.
    #[error("dimension `{dim}` must be positive, got {value}")]
    InvalidDim {
        /// The dimension's name.
        dim: String,
        /// The value given.
        value: i64,
    },

    /// An argument has the wrong element type.
    #[error("argument `{arg}` has dtype {got}, expected {expected}")]
    DTypeMismatch {
        /// The argument's name.
        arg: String,
        /// The dtype the kernel needs.
        expected: DType,
        /// The dtype given.
        got: DType,
    },

    /// A buffer does not start at a multiple of `align` bytes.
    #[error("argument `{arg}` is not aligned to {align} bytes")]
    Misaligned {
        /// The argument's name.
        arg: String,
        /// The alignment needed, in bytes.
        align: usize,
    },

    /// No GPU, or no driver, is available; the message says which.
    #[error("no GPU device available: {0}")]
    NoDevice(String),

    /// A file could not be read or written; the message names the path.
    #[error("I/O error: {0}")]
    Io(String),

    /// The content of a file or buffer is invalid (bad `.npy` or `.safetensors`
    /// data, unsupported element type, out-of-range value).
    #[error("invalid data: {0}")]
    Format(String),

    /// Memory for a tensor could not be allocated; `what` says which.
    #[error("cannot allocate {bytes} bytes for {what}: out of memory")]
    OutOfMemory {
        /// The tensor or buffer, e.g. "a f32 tensor of shape [65536, 65536]".
        what: String,
        /// The size asked for, in bytes.
        bytes: usize,
    },

    /// A compiled kernel failed: allocation failure, C compiler error,
    /// library loading failure, missing symbol or a non-zero status.
    #[error("kernel error: {0}")]
    Kernel(String),
}

/// `std::result::Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An [`Error::Io`] naming `path` and the operation that failed.
    pub(crate) fn io(action: &str, path: &std::path::Path, err: std::io::Error) -> Error {
        Error::Io(format!("cannot {action} `{}`: {err}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_what_went_wrong() {
        let e = Error::LengthMismatch { arg: "x".into(), expected: 6, got: 5 };
        assert_eq!(e.to_string(), "argument `x` has 5 elements, but its shape needs 6");
        let e = Error::DTypeMismatch { arg: "w".into(), expected: DType::BF16, got: DType::F32 };
        assert_eq!(e.to_string(), "argument `w` has dtype f32, expected bf16");
        let e =
            Error::io("read", std::path::Path::new("/no/such.npy"), std::io::Error::from(std::io::ErrorKind::NotFound));
        assert!(e.to_string().starts_with("I/O error: cannot read `/no/such.npy`: "), "{e}");
    }
}

//! Values the importer knows at import time: initializers read as
//! constants, `Constant` nodes, and everything computed from them and from
//! shapes (`Shape → Gather → Unsqueeze → Concat → Reshape`), so that no
//! shape computation reaches the kernels.
//!
//! Integers are [`Dim`]s, so a shape element can be a symbol (`batch`) or
//! an expression of symbols (`batch * 12`); floats are f64 (exact for every
//! float type read); bools are the integers 0 and 1. A known tensor's
//! shape is concrete.

use crate::diag;
use crate::diag::DResult;
use crate::sym::Dim;

use super::proto::{self, code, Data, Values};

/// Most elements of a known tensor computed at import time (a shape
/// computation never needs more; a larger constant is a weight).
pub const MAX_KNOWN_ELEMENTS: usize = 1 << 16;

/// A tensor known at import time.
#[derive(Clone, Debug, PartialEq)]
pub struct Known {
    /// ONNX element type ([`proto::code`]).
    pub code: i32,
    pub shape: Vec<usize>,
    pub data: KData,
}

/// The elements of a [`Known`], row-major.
#[derive(Clone, Debug, PartialEq)]
pub enum KData {
    Float(Vec<f64>),
    Int(Vec<Dim>),
}

impl KData {
    /// The number of elements.
    pub fn len(&self) -> usize {
        match self {
            KData::Float(v) => v.len(),
            KData::Int(v) => v.len(),
        }
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Known {
    pub fn from_values(v: Values) -> Known {
        let data = match v.data {
            Data::Float(f) => KData::Float(f),
            Data::Int(i) => KData::Int(i.into_iter().map(Dim::int).collect()),
        };
        Known { code: v.code, shape: v.shape, data }
    }

    /// A 1-D integer tensor.
    pub fn ints(dims: Vec<Dim>) -> Known {
        Known { code: code::INT64, shape: vec![dims.len()], data: KData::Int(dims) }
    }

    /// A scalar of type `code` (a float type, else an integer).
    pub fn scalar(code: i32, v: f64) -> Known {
        let data = if proto::is_float(code) { KData::Float(vec![v]) } else { KData::Int(vec![Dim::int(v as i64)]) };
        Known { code, shape: Vec::new(), data }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// True when the tensor has no elements (an axis of size 0).
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The integer elements.
    ///
    /// Errors: `DTypeMismatch` for a float tensor.
    pub fn dims(&self, what: &str) -> DResult<&[Dim]> {
        match &self.data {
            KData::Int(v) => Ok(v),
            KData::Float(_) => {
                Err(diag!(DTypeMismatch, "{what} must be an integer tensor, not {}", proto::type_name(self.code)))
            }
        }
    }

    /// The integer elements as integers.
    ///
    /// Errors: `UnboundSymbol` for an element that depends on a symbol.
    pub fn int_values(&self, what: &str) -> DResult<Vec<i64>> {
        self.dims(what)?
            .iter()
            .map(|d| {
                d.as_int().ok_or_else(|| {
                    diag!(UnboundSymbol, "{what} depends on `{d}`, which is only known at run time; bind it with --dim")
                })
            })
            .collect()
    }

    /// Every element as f64 (integers must be concrete).
    pub fn float_values(&self, what: &str) -> DResult<Vec<f64>> {
        match &self.data {
            KData::Float(v) => Ok(v.clone()),
            KData::Int(_) => Ok(self.int_values(what)?.into_iter().map(|v| v as f64).collect()),
        }
    }

    /// The only element as f64.
    ///
    /// Errors: `AxisSizeMismatch` when the tensor has more than one.
    pub fn scalar_value(&self, what: &str) -> DResult<f64> {
        let v = self.float_values(what)?;
        match v[..] {
            [x] => Ok(x),
            _ => Err(diag!(AxisSizeMismatch, "{what} must hold one value, not {}", v.len())),
        }
    }

    /// Whether every element is a known number (no symbol).
    pub fn is_concrete(&self) -> bool {
        match &self.data {
            KData::Float(_) => true,
            KData::Int(v) => v.iter().all(|d| d.as_int().is_some()),
        }
    }

    /// The tensor with `shape` (same elements).
    pub fn reshaped(mut self, shape: Vec<usize>) -> Known {
        self.shape = shape;
        self
    }

    /// The elements at flat positions `index` (a gather).
    pub fn pick(&self, index: &[usize], shape: Vec<usize>) -> Known {
        let data = match &self.data {
            KData::Float(v) => KData::Float(index.iter().map(|&i| v[i]).collect()),
            KData::Int(v) => KData::Int(index.iter().map(|&i| v[i].clone()).collect()),
        };
        Known { code: self.code, shape, data }
    }
}

/// Row-major strides of `shape`.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        s[k] = s[k + 1] * shape[k + 1];
    }
    s
}

/// The flat indices of a row-major tensor of `out` that reads a tensor of
/// `src` shape broadcast right-aligned to `out`.
pub fn broadcast_index(src: &[usize], out: &[usize]) -> Vec<usize> {
    let n: usize = out.iter().product();
    let ss = strides(src);
    let off = out.len() - src.len();
    let os = strides(out);
    (0..n)
        .map(|flat| {
            let mut i = 0;
            for k in 0..out.len() {
                let c = flat / os[k] % out[k].max(1);
                if k >= off && src[k - off] != 1 {
                    i += c * ss[k - off];
                }
            }
            i
        })
        .collect()
}

/// The right-aligned broadcast of two concrete shapes.
///
/// Errors: `BroadcastMismatch`.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> DResult<Vec<usize>> {
    let n = a.len().max(b.len());
    let at = |s: &[usize], k: usize| if k + s.len() < n { 1 } else { s[k + s.len() - n] };
    (0..n)
        .map(|k| match (at(a, k), at(b, k)) {
            (x, y) if x == y || y == 1 => Ok(x),
            (1, y) => Ok(y),
            (x, y) => Err(diag!(BroadcastMismatch, "sizes {x} and {y} do not broadcast ({a:?} and {b:?})")),
        })
        .collect()
}

/// Checks that a known result of `n` elements stays within
/// [`MAX_KNOWN_ELEMENTS`].
pub fn check_size(n: usize, what: &str) -> DResult<()> {
    if n > MAX_KNOWN_ELEMENTS {
        return Err(diag!(
            ResourceExceeded,
            "{what} would compute {n} elements at import time, more than {MAX_KNOWN_ELEMENTS}"
        ));
    }
    Ok(())
}

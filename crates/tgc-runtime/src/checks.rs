//! The argument checks of generated `run` functions.
//!
//! Every kernel module that `tgc::kernel!` or the build helper generates
//! (`tgc_core::emit::api`) calls these, through the facade's hidden path
//! `::tgc::__private::checks`, before any kernel code runs. They are support
//! code for generated code, not an API for users, and may change with the
//! generator.
//!
//! Sizes are `Option<i64>`: `None` is a size whose evaluation overflowed
//! `i64` or divided by a value < 1 ([`add`], [`mul`], [`floordiv`]). A check
//! that meets `None` fails with [`Error::ShapeMismatch`], so no overflow can
//! make a wrong length pass.

use crate::{Error, Result};

/// A dim argument as `i64`: it must be in `1..=i32::MAX`.
///
/// Errors: [`Error::InvalidDim`] naming the dim.
pub fn dim(name: &str, v: usize) -> Result<i64> {
    match i64::try_from(v) {
        Ok(d) if (1..=i32::MAX as i64).contains(&d) => Ok(d),
        _ => Err(Error::InvalidDim { dim: name.into(), value: i64::try_from(v).unwrap_or(i64::MAX) }),
    }
}

/// `a + b`, `None` on overflow or when either is `None`.
pub fn add(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    a?.checked_add(b?)
}

/// `a * b`, `None` on overflow or when either is `None`.
pub fn mul(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    a?.checked_mul(b?)
}

/// `⌊n / q⌋` for `q ≥ 1`; `None` for `q < 1` or when either is `None`.
pub fn floordiv(n: Option<i64>, q: Option<i64>) -> Option<i64> {
    let q = q.filter(|&q| q >= 1)?;
    Some(n?.div_euclid(q))
}

/// A size of the graph (`size` is its text, e.g. `H - 2`) must be ≥ 1.
///
/// Errors: [`Error::InvalidDim`] when it is < 1, [`Error::ShapeMismatch`]
/// when it overflowed.
pub fn positive(size: &str, v: Option<i64>) -> Result<()> {
    match v {
        Some(v) if v >= 1 => Ok(()),
        Some(v) => Err(Error::InvalidDim { dim: size.into(), value: v }),
        None => Err(overflow(format!("size {size}"))),
    }
}

/// A shape fact of the graph: `lhs <= rhs` when `le`, else `lhs == rhs`.
///
/// Errors: [`Error::DimMismatch`] when it does not hold,
/// [`Error::ShapeMismatch`] when a side overflowed.
pub fn require(what: &str, lhs: Option<i64>, rhs: Option<i64>, le: bool) -> Result<()> {
    match (lhs, rhs) {
        (Some(l), Some(r)) if (le && l <= r) || (!le && l == r) => Ok(()),
        (Some(l), Some(r)) => Err(Error::DimMismatch { dim: what.into(), expected: r, got: l }),
        _ => Err(overflow(format!("the sizes in {what}"))),
    }
}

fn overflow(what: String) -> Error {
    Error::ShapeMismatch { what, expected: "values that fit in i64".into(), got: "an overflow".into() }
}

/// The element count of `shape`, whose sizes must be ≥ 1 and whose bytes
/// (`elem_bytes` each) must fit in `isize::MAX`.
///
/// Errors: [`Error::ShapeMismatch`] naming `what` otherwise.
pub fn size(what: &str, shape: &[Option<i64>], elem_bytes: usize) -> Result<usize> {
    count(shape, elem_bytes).ok_or_else(|| size_error(what, shape, elem_bytes))
}

/// [`size`]'s count, `None` where it reports an error. Allocates nothing:
/// a warm kernel call allocates nothing (`crate::scratch`).
fn count(shape: &[Option<i64>], elem_bytes: usize) -> Option<usize> {
    let n = shape.iter().try_fold(1usize, |n, d| n.checked_mul(usize::try_from(d.filter(|&d| d >= 1)?).ok()?))?;
    (n.checked_mul(elem_bytes)? <= isize::MAX as usize).then_some(n)
}

fn size_error(what: &str, shape: &[Option<i64>], elem_bytes: usize) -> Error {
    let sizes: Vec<String> = shape.iter().map(|d| d.map_or_else(|| "overflow".into(), |d| d.to_string())).collect();
    Error::ShapeMismatch {
        what: format!("shape of {what}"),
        expected: format!("sizes >= 1 of at most {} bytes in all", isize::MAX),
        got: format!("[{}] of {elem_bytes}-byte elements", sizes.join(", ")),
    }
}

/// Slice argument `arg` of `got` elements must hold exactly `shape`'s count.
///
/// Errors: [`Error::LengthMismatch`], or those of [`size`].
pub fn len(arg: &str, got: usize, shape: &[Option<i64>], elem_bytes: usize) -> Result<()> {
    let expected =
        count(shape, elem_bytes).ok_or_else(|| size_error(&format!("argument `{arg}`"), shape, elem_bytes))?;
    if got == expected {
        Ok(())
    } else {
        Err(Error::LengthMismatch { arg: arg.into(), expected, got })
    }
}

/// The status a C kernel entry point returned (the ABI of [`crate::cpu`]).
///
/// Errors: [`Error::Kernel`] for any status but 0.
pub fn status(symbol: &str, status: i32) -> Result<()> {
    match status {
        0 => Ok(()),
        1 => Err(Error::Kernel(format!("kernel `{symbol}` ran out of memory allocating its scratch memory"))),
        s => Err(Error::Kernel(format!("kernel `{symbol}` failed with status {s}"))),
    }
}

// ------------------------------------------------ padding to a bucket

/// A tensor of shape `to` (dense, row-major) holding `src`, of shape
/// `from`, at its origin and zeros elsewhere: a call's input padded to a
/// ShapeSet point of its `padded` symbols. The vector comes from the
/// calling thread's pool ([`crate::scratch::take`]); hand it back with
/// [`give`], last taken first, so a warm padded call allocates nothing.
///
/// Panics when the ranks differ, a dim of `from` exceeds `to`'s, or
/// `src` is not `from`'s size: the generated dispatch only calls it after
/// `run`'s checks, with a point that holds the dims.
pub fn pad<T: crate::scratch::Pooled>(src: &[T], from: &[usize], to: &[usize]) -> Vec<T> {
    let mut out = crate::scratch::take(to.iter().product());
    copy_corner(src, from, &mut out, to, from);
    out
}

/// A zeroed vector of `len` elements from the calling thread's pool, for
/// an output computed at a larger point than the call's (see [`pad`]).
pub fn zeros<T: crate::scratch::Pooled>(len: usize) -> Vec<T> {
    crate::scratch::take(len)
}

/// Copies the corner of shape `to` of `src` (shape `from`, each dim at
/// least `to`'s) into `dst` (dense, shape `to`): an output cut back from
/// the padded point to the call's dims.
///
/// Panics on inconsistent shapes, as [`pad`].
pub fn crop<T: Copy>(src: &[T], from: &[usize], dst: &mut [T], to: &[usize]) {
    copy_corner(src, from, dst, to, to);
}

/// Hands a vector of [`pad`] or [`zeros`] back to the thread's pool.
pub fn give<T: crate::scratch::Pooled>(v: Vec<T>) {
    crate::scratch::give(v);
}

/// Copies the `extent`-shaped corner at the origin of `a` (dense, shape
/// `a_shape`) to the same place in `b` (shape `b_shape`), row by row.
fn copy_corner<T: Copy>(a: &[T], a_shape: &[usize], b: &mut [T], b_shape: &[usize], extent: &[usize]) {
    assert!(a_shape.len() == b_shape.len() && extent.len() == a_shape.len(), "ranks differ");
    assert!(
        extent.iter().zip(a_shape).zip(b_shape).all(|((e, x), y)| e <= x && e <= y),
        "the corner {extent:?} is outside {a_shape:?} or {b_shape:?}"
    );
    assert_eq!(a.len(), a_shape.iter().product::<usize>(), "the source's length");
    assert_eq!(b.len(), b_shape.iter().product::<usize>(), "the destination's length");
    if extent.contains(&0) {
        return;
    }
    let Some((&row, outer)) = extent.split_last() else {
        b[0] = a[0]; // rank 0: one element
        return;
    };
    // Walk the corner's rows in order, an odometer over the outer dims.
    let rank = outer.len();
    let mut index = [0usize; 16];
    assert!(rank <= index.len(), "rank {rank} above 16");
    loop {
        let (mut ao, mut bo) = (0usize, 0usize);
        for d in 0..rank {
            ao = ao * a_shape[d] + index[d];
            bo = bo * b_shape[d] + index[d];
        }
        let (ao, bo) = (ao * a_shape[rank], bo * b_shape[rank]);
        b[bo..bo + row].copy_from_slice(&a[ao..ao + row]);
        let mut d = rank;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            index[d] += 1;
            if index[d] < outer[d] {
                break;
            }
            index[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn pad_and_crop_move_the_corner() {
        // [2, 3] into [3, 4], zeros elsewhere; then back.
        let src = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        let p = pad(&src, &[2, 3], &[3, 4]);
        assert_eq!(p, [1.0, 2.0, 3.0, 0.0, 4.0, 5.0, 6.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        let mut back = [0.0f32; 6];
        crop(&p, &[3, 4], &mut back, &[2, 3]);
        assert_eq!(back, src);
        give(p);
        // Rank 3, padding an inner axis only; rank 0.
        let src: Vec<i32> = (0..12).collect();
        let p = pad(&src, &[2, 2, 3], &[2, 3, 3]);
        assert_eq!(p, [0, 1, 2, 3, 4, 5, 0, 0, 0, 6, 7, 8, 9, 10, 11, 0, 0, 0]);
        assert_eq!(pad(&[7i32], &[], &[]), [7]);
        assert_eq!(zeros::<f32>(3), [0.0; 3]);
    }
    use super::*;

    #[test]
    fn dims_must_be_positive_i32() {
        assert_eq!(dim("M", 7).unwrap(), 7);
        assert!(matches!(dim("M", 0), Err(Error::InvalidDim { value: 0, .. })));
        assert!(matches!(dim("M", 1 << 31), Err(Error::InvalidDim { value: 2147483648, .. })));
    }

    #[test]
    fn arithmetic_reports_overflow_and_bad_divisors_as_none() {
        assert_eq!(add(Some(2), Some(3)), Some(5));
        assert_eq!(add(Some(i64::MAX), Some(1)), None);
        assert_eq!(mul(Some(1 << 40), Some(1 << 40)), None);
        assert_eq!(floordiv(Some(-7), Some(2)), Some(-4));
        assert_eq!(floordiv(Some(7), Some(0)), None);
        assert_eq!(mul(None, Some(1)), None);
    }

    #[test]
    fn shape_facts_and_sizes() {
        assert!(require("L == R*C", Some(6), Some(6), false).is_ok());
        assert!(require("a <= b", Some(5), Some(6), true).is_ok());
        assert!(matches!(require("x", Some(7), Some(6), true), Err(Error::DimMismatch { expected: 6, got: 7, .. })));
        assert!(matches!(require("x", None, Some(6), false), Err(Error::ShapeMismatch { .. })));
        assert!(matches!(positive("H - 2", Some(0)), Err(Error::InvalidDim { value: 0, .. })));
        assert!(matches!(positive("H - 2", None), Err(Error::ShapeMismatch { .. })));
    }

    #[test]
    fn lengths_are_exact_and_byte_sizes_bounded() {
        assert!(len("x", 12, &[Some(3), Some(4)], 4).is_ok());
        assert!(matches!(len("x", 11, &[Some(3), Some(4)], 4), Err(Error::LengthMismatch { expected: 12, .. })));
        assert!(matches!(size("t", &[Some(1 << 62), Some(4)], 4), Err(Error::ShapeMismatch { .. })));
        assert!(matches!(size("t", &[Some(0)], 4), Err(Error::ShapeMismatch { .. })));
        assert!(status("k", 0).is_ok());
        assert!(matches!(status("k", 1), Err(Error::Kernel(m)) if m.contains("out of memory")));
    }
}

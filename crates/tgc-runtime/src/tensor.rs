//! `HostTensor`: a dense tensor in host memory, the unit of data the `tgc`
//! tool reads from files, hands to kernels and writes back.
//!
//! Invariants:
//! - `data` is row-major (C order) and holds exactly `product(shape) *
//!   dtype.size_bytes()` bytes; a shape of `[]` is a scalar (one element).
//! - Elements are little-endian; f16 and bf16 are stored as their 16-bit
//!   patterns; bool is one byte, 0 or 1.
//! - `data` starts at a multiple of [`TENSOR_ALIGN`] bytes.

use crate::dtype::{bf16_from_f64, f16_from_f64};
use crate::{DType, Error, Result};

/// A dense, row-major tensor in host memory (see the module doc for the layout).
#[derive(Clone, Debug, PartialEq)]
pub struct HostTensor {
    dtype: DType,
    shape: Vec<usize>,
    data: AlignedBytes,
}

/// `n` deterministic pseudo-random values in [-1, 1), the same for the same
/// `seed` on every machine: inputs for tests, examples and benchmarks (a
/// linear congruential generator, Knuth's MMIX constants; not for anything
/// that needs statistical quality).
pub fn sample_values(seed: u64, n: usize) -> Vec<f64> {
    const A: u64 = 6364136223846793005;
    const C: u64 = 1442695040888963407;
    let mut s = seed.wrapping_mul(A).wrapping_add(C);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(A).wrapping_add(C);
            ((s >> 40) as f64 / (1u64 << 24) as f64) * 2.0 - 1.0
        })
        .collect()
}

/// Number of elements of a tensor of `shape` (1 for `[]`), or `None` when it
/// overflows `usize`.
pub fn num_elements(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
}

/// The alignment of a [`HostTensor`]'s bytes: a cache line, and the width of
/// an AVX-512 vector. With `Vec<u8>`'s alignment of 1 the allocator put a
/// large tensor 16 bytes past a page, so every 64-byte vector load and
/// store of a kernel spanned two cache lines: softmax 4096×1024 on one
/// thread of a Zen 4 EPYC took 2.00 ms on such buffers and 1.76 ms on
/// aligned ones (same library, scratch driver). PyTorch's and
/// ONNX Runtime's CPU allocators align to 64 as well.
pub const TENSOR_ALIGN: usize = 64;

/// A type of no size aligned to [`TENSOR_ALIGN`], whose dangling pointer is where an
/// empty [`AlignedBytes`] points.
#[repr(align(64))]
struct Line;
const _: () = assert!(std::mem::align_of::<Line>() == TENSOR_ALIGN);

/// Bytes in one allocation aligned to [`TENSOR_ALIGN`]: `Vec<u8>`'s
/// ownership without its alignment of 1.
struct AlignedBytes {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: `AlignedBytes` owns its allocation as `Vec<u8>` does; nothing
// else points into it.
unsafe impl Send for AlignedBytes {}
// SAFETY: shared access is read-only, as for `Vec<u8>`.
unsafe impl Sync for AlignedBytes {}

impl AlignedBytes {
    /// `n` zero bytes, or [`Error::OutOfMemory`] naming `what` when the
    /// allocator refuses.
    ///
    /// The bytes come zeroed from the allocator (`calloc`-like), so pages
    /// the caller never writes are never touched.
    fn zeroed(n: usize, what: &dyn Fn() -> String) -> Result<AlignedBytes> {
        if n == 0 {
            return Ok(AlignedBytes { ptr: std::ptr::NonNull::<Line>::dangling().cast(), len: 0 });
        }
        let oom = || Error::OutOfMemory { what: what(), bytes: n };
        let layout = std::alloc::Layout::from_size_align(n, TENSOR_ALIGN).map_err(|_| oom())?;
        // SAFETY: `layout` has a non-zero size (n > 0).
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = std::ptr::NonNull::new(p).ok_or_else(oom)?;
        Ok(AlignedBytes { ptr, len: n })
    }

    /// A copy of `bytes`; errors as [`AlignedBytes::zeroed`].
    fn copy_of(bytes: &[u8], what: &dyn Fn() -> String) -> Result<AlignedBytes> {
        let mut b = AlignedBytes::zeroed(bytes.len(), what)?;
        b.copy_from_slice(bytes);
        Ok(b)
    }

    /// `n` zero bytes; aborts when the allocator refuses, as `Vec` does
    /// (for `clone` and [`HostTensor::convert`], which return no `Result`).
    fn zeroed_or_abort(n: usize) -> AlignedBytes {
        AlignedBytes::zeroed(n, &String::new).unwrap_or_else(|_| {
            std::alloc::handle_alloc_error(std::alloc::Layout::from_size_align(n, TENSOR_ALIGN).unwrap())
        })
    }
}

impl Drop for AlignedBytes {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: `ptr` came from `alloc_zeroed` with this layout, which
            // `zeroed` checked.
            unsafe {
                std::alloc::dealloc(
                    self.ptr.as_ptr(),
                    std::alloc::Layout::from_size_align_unchecked(self.len, TENSOR_ALIGN),
                )
            }
        }
    }
}

impl std::ops::Deref for AlignedBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` points at `len` initialised bytes that this value
        // owns (or is dangling and aligned with `len` 0).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for AlignedBytes {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as for `deref`, and `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Clone for AlignedBytes {
    /// A copy; aborts when the allocator refuses, as `Vec`'s `clone` does.
    fn clone(&self) -> AlignedBytes {
        let mut b = AlignedBytes::zeroed_or_abort(self.len);
        b.copy_from_slice(self);
        b
    }
}

impl PartialEq for AlignedBytes {
    fn eq(&self, other: &AlignedBytes) -> bool {
        self[..] == other[..]
    }
}

impl std::fmt::Debug for AlignedBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Number of bytes of a dense tensor of `dtype` and `shape`, or an error when
/// it overflows `usize`.
fn num_bytes(dtype: DType, shape: &[usize]) -> Result<usize> {
    num_elements(shape).and_then(|n| n.checked_mul(dtype.size_bytes())).ok_or_else(|| Error::ShapeMismatch {
        what: format!("size of a {dtype} tensor"),
        expected: "at most usize::MAX bytes".into(),
        got: format!("shape {shape:?}"),
    })
}

impl HostTensor {
    /// A tensor of `dtype` and `shape` filled with zeros (false for bool).
    ///
    /// Errors: [`Error::ShapeMismatch`] when the byte size overflows `usize`;
    /// [`Error::OutOfMemory`] when the allocation fails (the size comes from
    /// user input, so it is never an abort).
    pub fn zeros(dtype: DType, shape: &[usize]) -> Result<HostTensor> {
        let n = num_bytes(dtype, shape)?;
        let data = AlignedBytes::zeroed(n, &|| format!("a {dtype} tensor of shape {shape:?}"))?;
        Ok(HostTensor { dtype, shape: shape.to_vec(), data })
    }

    /// A tensor of `dtype` and `shape` from row-major f32 values, each rounded
    /// to `dtype` as [`DType::round`] does (nearest even for f16/bf16,
    /// truncation toward zero for i32, `x != 0` for bool).
    ///
    /// Errors: [`Error::LengthMismatch`] when `values.len()` is not the
    /// product of `shape`.
    pub fn from_f32(dtype: DType, shape: &[usize], values: &[f32]) -> Result<HostTensor> {
        let mut t = HostTensor::with_len(dtype, shape, values.len())?;
        let size = dtype.size_bytes();
        for (chunk, &x) in t.data.chunks_exact_mut(size).zip(values) {
            encode(dtype, x as f64, chunk);
        }
        Ok(t)
    }

    /// A tensor of `dtype` and `shape` from row-major f64 values, each rounded
    /// to `dtype` once, as [`DType::round`] does.
    ///
    /// Errors: [`Error::LengthMismatch`] when `values.len()` is not the
    /// product of `shape`.
    pub fn from_f64(dtype: DType, shape: &[usize], values: &[f64]) -> Result<HostTensor> {
        let mut t = HostTensor::with_len(dtype, shape, values.len())?;
        let size = dtype.size_bytes();
        for (chunk, &x) in t.data.chunks_exact_mut(size).zip(values) {
            encode(dtype, x, chunk);
        }
        Ok(t)
    }

    /// A tensor over raw little-endian bytes in the layout of the module doc,
    /// copied into storage aligned to [`TENSOR_ALIGN`].
    ///
    /// Errors: [`Error::ShapeMismatch`] when `data.len()` is not
    /// `product(shape) * dtype.size_bytes()`; [`Error::Format`] when a bool
    /// byte is neither 0 nor 1; [`Error::OutOfMemory`] when the copy cannot
    /// be allocated.
    pub fn from_bytes(dtype: DType, shape: &[usize], data: Vec<u8>) -> Result<HostTensor> {
        let n = num_bytes(dtype, shape)?;
        if data.len() != n {
            return Err(Error::ShapeMismatch {
                what: format!("byte length of a {dtype} tensor of shape {shape:?}"),
                expected: n.to_string(),
                got: data.len().to_string(),
            });
        }
        if dtype == DType::Bool {
            if let Some(i) = data.iter().position(|&b| b > 1) {
                return Err(Error::Format(format!(
                    "bool element {i} is stored as byte {}; bool elements must be 0 or 1",
                    data[i]
                )));
            }
        }
        let data = AlignedBytes::copy_of(&data, &|| format!("a {dtype} tensor of shape {shape:?}"))?;
        Ok(HostTensor { dtype, shape: shape.to_vec(), data })
    }

    /// A zero tensor after checking that `len` values fill `shape`.
    fn with_len(dtype: DType, shape: &[usize], len: usize) -> Result<HostTensor> {
        let expected = num_elements(shape).unwrap_or(usize::MAX);
        if expected != len {
            return Err(Error::LengthMismatch { arg: "values".into(), expected, got: len });
        }
        HostTensor::zeros(dtype, shape)
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The shape, outermost dimension first; `[]` for a scalar.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The number of elements (the product of the shape).
    pub fn len(&self) -> usize {
        self.data.len() / self.dtype.size_bytes()
    }

    /// True when the tensor has no elements (some dimension is 0).
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The raw bytes, `len() * dtype().size_bytes()` of them, starting at an
    /// address that is a multiple of [`TENSOR_ALIGN`].
    pub fn bytes(&self) -> &[u8] {
        &self.data
    }

    /// The raw bytes, for a kernel to write into (aligned as
    /// [`HostTensor::bytes`]); bool bytes must stay 0 or 1.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }

    /// The elements as f64, row-major; every dtype converts exactly.
    pub fn to_f64_vec(&self) -> Vec<f64> {
        self.data.chunks_exact(self.dtype.size_bytes()).map(|c| decode(self.dtype, c)).collect()
    }

    /// The elements as f32, row-major; exact except for i32 values beyond
    /// 2^24 in magnitude, which round to nearest even.
    pub fn to_f32_vec(&self) -> Vec<f32> {
        self.data.chunks_exact(self.dtype.size_bytes()).map(|c| decode(self.dtype, c) as f32).collect()
    }

    /// This tensor's values rounded to `dtype` as [`DType::round`] does (an
    /// f32 tensor converted to bf16 rounds to nearest even); same shape.
    pub fn convert(&self, dtype: DType) -> HostTensor {
        if dtype == self.dtype {
            return self.clone();
        }
        let size = dtype.size_bytes();
        let mut data = AlignedBytes::zeroed_or_abort(self.len() * size);
        let src = self.data.chunks_exact(self.dtype.size_bytes());
        for (dst, src) in data.chunks_exact_mut(size).zip(src) {
            encode(dtype, decode(self.dtype, src), dst);
        }
        HostTensor { dtype, shape: self.shape.clone(), data }
    }
}

/// Little-endian f64 elements rounded to little-endian f32 (nearest even):
/// how files' f64 data is read.
pub(crate) fn f64_le_to_f32_le(data: &[u8]) -> Vec<u8> {
    data.chunks_exact(8)
        .flat_map(|c| (f64::from_le_bytes(c.try_into().expect("chunks_exact(8)")) as f32).to_le_bytes())
        .collect()
}

/// Little-endian i64 elements as little-endian i32: how files' i64 data is read.
///
/// Errors: [`Error::Format`] naming the first element outside the i32 range.
pub(crate) fn i64_le_to_i32_le(data: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(data.len() / 2);
    for (i, c) in data.chunks_exact(8).enumerate() {
        let v = i64::from_le_bytes(c.try_into().expect("chunks_exact(8)"));
        let v = i32::try_from(v)
            .map_err(|_| Error::Format(format!("i64 element {i} is {v}, which does not fit in i32")))?;
        out.extend_from_slice(&v.to_le_bytes());
    }
    Ok(out)
}

/// Writes `x` rounded to `dtype` into `out` (`dtype.size_bytes()` bytes).
fn encode(dtype: DType, x: f64, out: &mut [u8]) {
    match dtype {
        DType::F16 => out.copy_from_slice(&f16_from_f64(x).to_le_bytes()),
        DType::BF16 => out.copy_from_slice(&bf16_from_f64(x).to_le_bytes()),
        DType::F32 => out.copy_from_slice(&(x as f32).to_le_bytes()),
        DType::I32 => out.copy_from_slice(&(DType::I32.round(x) as i32).to_le_bytes()),
        DType::Bool => out[0] = (x != 0.0) as u8,
    }
}

/// Reads one element of `dtype` from `bytes` (`dtype.size_bytes()` bytes).
fn decode(dtype: DType, bytes: &[u8]) -> f64 {
    match dtype {
        DType::F16 => half::f16::from_le_bytes([bytes[0], bytes[1]]).to_f64(),
        DType::BF16 => half::bf16::from_le_bytes([bytes[0], bytes[1]]).to_f64(),
        DType::F32 => f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as f64,
        DType::I32 => i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as f64,
        DType::Bool => (bytes[0] != 0) as u8 as f64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_f32_rounds_to_the_dtype() {
        let v = [1.0 + 1.0 / 4096.0, -2.7, 0.0, 0.5];
        let t = |d| HostTensor::from_f32(d, &[2, 2], &v).unwrap();
        assert_eq!(t(DType::F16).to_f64_vec(), [1.0, -2.69921875, 0.0, 0.5]);
        assert_eq!(t(DType::BF16).to_f64_vec(), [1.0, -2.703125, 0.0, 0.5]);
        assert_eq!(t(DType::F32).to_f32_vec(), v);
        assert_eq!(t(DType::I32).to_f64_vec(), [1.0, -2.0, 0.0, 0.0]);
        assert_eq!(t(DType::Bool).bytes(), [1, 1, 0, 1]);
        for d in DType::ALL {
            let want: Vec<f64> = v.iter().map(|&x| d.round(x as f64)).collect();
            assert_eq!(t(d).to_f64_vec(), want, "{d}");
            assert_eq!(t(d).bytes().len(), 4 * d.size_bytes());
        }
    }

    /// Every way of making a tensor gives bytes at a multiple of
    /// [`TENSOR_ALIGN`] — small and large (a large allocation is where
    /// `Vec<u8>` landed 16 bytes past a page) — and clones, conversions and
    /// equality see the bytes, not the address.
    #[test]
    fn bytes_are_aligned_to_a_cache_line() {
        let aligned = |t: &HostTensor| (t.bytes().as_ptr() as usize).is_multiple_of(TENSOR_ALIGN);
        for n in [1, 3, 17, 1 << 20] {
            let z = HostTensor::zeros(DType::F32, &[n]).unwrap();
            let v: Vec<f32> = (0..n).map(|i| i as f32).collect();
            let f = HostTensor::from_f32(DType::F32, &[n], &v).unwrap();
            let b = HostTensor::from_bytes(DType::F32, &[n], f.bytes().to_vec()).unwrap();
            let (c, h) = (f.clone(), f.convert(DType::F16));
            for t in [&z, &f, &b, &c, &h] {
                assert!(aligned(t), "{n} elements at {:p}", t.bytes().as_ptr());
            }
            assert!(b == f && c == f && z != f || n == 1 && z == f);
            assert_eq!(h.to_f32_vec(), HostTensor::from_f32(DType::F16, &[n], &v).unwrap().to_f32_vec());
        }
        let empty = HostTensor::zeros(DType::F32, &[0, 4]).unwrap();
        assert!(empty.is_empty() && empty.bytes().is_empty() && empty.clone() == empty);
        assert!(aligned(&empty) && aligned(&empty.clone()), "empty at {:p}", empty.bytes().as_ptr());
    }

    #[test]
    fn storage_is_little_endian_bit_patterns() {
        let t = HostTensor::from_f64(DType::BF16, &[2], &[1.0, -2.0]).unwrap();
        assert_eq!(t.bytes(), [0x80, 0x3f, 0x00, 0xc0]);
        let t = HostTensor::from_f64(DType::F16, &[1], &[1.0]).unwrap();
        assert_eq!(t.bytes(), [0x00, 0x3c]);
        let t = HostTensor::from_f64(DType::I32, &[], &[-2.0]).unwrap();
        assert_eq!((t.len(), t.bytes()), (1, &[0xfe, 0xff, 0xff, 0xff][..]));
    }

    #[test]
    fn from_f64_rounds_once() {
        let x = 1.0 + 2f64.powi(-8) + 2f64.powi(-40);
        let t = HostTensor::from_f64(DType::BF16, &[1], &[x]).unwrap();
        assert_eq!(t.to_f64_vec(), [1.0 + 2f64.powi(-7)]);
    }

    #[test]
    fn lengths_are_checked() {
        let e = HostTensor::from_f32(DType::F32, &[2, 3], &[0.0; 5]).unwrap_err();
        assert_eq!(e, Error::LengthMismatch { arg: "values".into(), expected: 6, got: 5 });
        let e = HostTensor::from_bytes(DType::F16, &[3], vec![0; 5]).unwrap_err();
        assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
        let e = HostTensor::from_bytes(DType::Bool, &[2], vec![0, 2]).unwrap_err();
        assert!(matches!(e, Error::Format(_)), "{e}");
        let e = HostTensor::zeros(DType::F32, &[usize::MAX, 2]).unwrap_err();
        assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
        let t = HostTensor::from_bytes(DType::I32, &[2, 0], vec![]).unwrap();
        assert!(t.is_empty() && t.to_f64_vec().is_empty());
    }

    #[test]
    fn an_allocation_the_allocator_refuses_is_an_error() {
        // 2^62 bytes: a valid layout no machine can back.
        let e = HostTensor::zeros(DType::F32, &[1 << 30, 1 << 30]).unwrap_err();
        assert_eq!(
            e,
            Error::OutOfMemory { what: "a f32 tensor of shape [1073741824, 1073741824]".into(), bytes: 1 << 62 }
        );
        assert_eq!(HostTensor::zeros(DType::F32, &[0, 3]).unwrap().len(), 0);
        assert!(HostTensor::zeros(DType::F16, &[5]).unwrap().to_f32_vec().iter().all(|&v| v == 0.0));
    }

    #[test]
    fn convert_rounds_f32_to_bf16_to_nearest_even() {
        // 1 + 2^-8 is a tie between bf16 1.0 and 1 + 2^-7: even wins.
        let tie = 1.0 + 2f32.powi(-8);
        let above = 1.0 + 2f32.powi(-8) + 2f32.powi(-20);
        let t = HostTensor::from_f32(DType::F32, &[3], &[tie, above, 3.0]).unwrap();
        let b = t.convert(DType::BF16);
        assert_eq!((b.dtype(), b.shape()), (DType::BF16, &[3][..]));
        assert_eq!(b.to_f32_vec(), [1.0, 1.0 + 2f32.powi(-7), 3.0]);
        assert_eq!(b.convert(DType::F32).convert(DType::I32).to_f64_vec(), [1.0, 1.0, 3.0]);
        assert_eq!(t.convert(DType::F32), t);
    }

    #[test]
    fn bytes_mut_writes_through() {
        let mut t = HostTensor::zeros(DType::F32, &[1]).unwrap();
        t.bytes_mut().copy_from_slice(&2.5f32.to_le_bytes());
        assert_eq!(t.to_f32_vec(), [2.5]);
    }
}

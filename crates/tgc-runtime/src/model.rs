//! The model runtime of `000` §8: the ConstPool that holds a model's
//! weights, the sources they are loaded from, and the helpers of the C ABI
//! (`tgc_<name>_model_init/run/free`) that the build helper generates for
//! each model (`tgc_core::build::Kernels::model`).
//!
//! A *model* is a kernel whose graph inputs split in two: the inputs given
//! to every run (token ids, an image) and the *weights*, loaded once by
//! `Model::init` into one [`ConstPool`] and passed by the model to every
//! run. Its temporaries live in the Memory Arena of the generated entry
//! point (`tgc_core::cpu::arena`: slots shared by temporaries whose live
//! ranges do not overlap), taken from the calling thread's scratch stack
//! ([`crate::scratch`]) and kept there between runs; with the thread pool
//! of [`crate::pool`], a run for dims it has seen on that thread allocates
//! nothing.

use std::cell::RefCell;
use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr::NonNull;

use crate::{DType, Error, Result};

pub use crate::weights::{Npy, Safetensors};

/// The alignment in bytes of the ConstPool and of each weight in it: a
/// cache line, an AVX-512 vector, and more than any GPU load needs.
pub const POOL_ALIGN: usize = 64;

/// One weight of a model: its graph input's name, dtype and shape (all
/// static: a weight's shape does not depend on the run's dims).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WeightSpec {
    /// The graph input's name.
    pub name: &'static str,
    /// Its element type.
    pub dtype: DType,
    /// Its shape, row-major.
    pub shape: &'static [usize],
}

impl WeightSpec {
    /// Its elements; `None` on overflow.
    pub fn elements(&self) -> Option<usize> {
        self.shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
    }

    /// Its size in bytes; `None` on overflow.
    pub fn bytes(&self) -> Option<usize> {
        self.elements()?.checked_mul(self.dtype.size_bytes())
    }

    /// `name: dtype[shape]`.
    pub fn describe(&self) -> String {
        let dims: Vec<String> = self.shape.iter().map(usize::to_string).collect();
        format!("{}: {}[{}]", self.name, self.dtype, dims.join(", "))
    }
}

/// The storage types of the dtypes, as generated signatures use them.
pub trait Element: Copy + sealed::Sealed {
    /// The dtype stored as `Self`.
    const DTYPE: DType;
    /// The little-endian bytes of `self` (length `DTYPE.size_bytes()`).
    fn write_le(self, out: &mut [u8]);
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for i32 {}
    impl Sealed for bool {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
    fn write_le(self, out: &mut [u8]) {
        out.copy_from_slice(&self.to_le_bytes());
    }
}
impl Element for i32 {
    const DTYPE: DType = DType::I32;
    fn write_le(self, out: &mut [u8]) {
        out.copy_from_slice(&self.to_le_bytes());
    }
}
impl Element for bool {
    const DTYPE: DType = DType::Bool;
    fn write_le(self, out: &mut [u8]) {
        out[0] = self as u8;
    }
}
impl Element for half::f16 {
    const DTYPE: DType = DType::F16;
    fn write_le(self, out: &mut [u8]) {
        out.copy_from_slice(&self.to_le_bytes());
    }
}
impl Element for half::bf16 {
    const DTYPE: DType = DType::BF16;
    fn write_le(self, out: &mut [u8]) {
        out.copy_from_slice(&self.to_le_bytes());
    }
}

/// Writes `values` into `dst`, the bytes of weight `spec` in the pool — the
/// helper of a [`WeightSource`] that holds typed values.
///
/// Errors: [`Error::DTypeMismatch`] when `T` is not the weight's storage
/// type; [`Error::LengthMismatch`] when `values` has not the weight's
/// element count.
pub fn write_weight<T: Element>(spec: &WeightSpec, dst: &mut [u8], values: &[T]) -> Result<()> {
    if T::DTYPE != spec.dtype {
        return Err(Error::DTypeMismatch { arg: spec.name.into(), expected: spec.dtype, got: T::DTYPE });
    }
    let size = spec.dtype.size_bytes();
    if values.len() * size != dst.len() {
        return Err(Error::LengthMismatch { arg: spec.name.into(), expected: dst.len() / size, got: values.len() });
    }
    for (chunk, &v) in dst.chunks_exact_mut(size).zip(values) {
        v.write_le(chunk);
    }
    Ok(())
}

/// Where a model's weights come from: [`ConstPool::load`] asks for each
/// weight once, in the model's order, with the weight's bytes in the pool
/// to fill (dense, row-major, little-endian; bool as 0 or 1).
///
/// A closure `FnMut(&WeightSpec, &mut [u8]) -> Result<()>` is a source
/// (use [`write_weight`] for typed values); [`Safetensors`] reads a
/// `.safetensors` file (in memory or on disk) by name, [`Npy`] a folder of
/// `.npy` files, one per weight; [`CWeights`] is the C ABI's.
pub trait WeightSource {
    /// Fills `dst` (exactly `spec.bytes()` long) with weight `spec`.
    fn fill(&mut self, spec: &WeightSpec, dst: &mut [u8]) -> Result<()>;
}

impl<F: FnMut(&WeightSpec, &mut [u8]) -> Result<()>> WeightSource for F {
    fn fill(&mut self, spec: &WeightSpec, dst: &mut [u8]) -> Result<()> {
        self(spec, dst)
    }
}

/// A model's weights side by side in one allocation of [`POOL_ALIGN`]
/// alignment, each at a multiple of [`POOL_ALIGN`] bytes: `000` §8's
/// ConstPool. Read-only once loaded, so a model can be shared between
/// threads.
pub struct ConstPool {
    base: NonNull<u8>,
    /// The allocation's size in bytes (a multiple of [`POOL_ALIGN`], ≥ 1
    /// granule).
    size: usize,
    /// Each weight's byte offset in the pool.
    offsets: Vec<usize>,
    specs: &'static [WeightSpec],
}

// SAFETY: the pool owns its allocation and is only read after `load`.
unsafe impl Send for ConstPool {}
// SAFETY: as above; `&ConstPool` hands out shared slices only.
unsafe impl Sync for ConstPool {}

impl ConstPool {
    /// Allocates the pool for `specs` (zeroed) and has `source` fill each
    /// weight, in order.
    ///
    /// Errors: [`Error::ShapeMismatch`] when the pool's size overflows;
    /// [`Error::OutOfMemory`] when it cannot be allocated; the source's
    /// error for a weight, with the weight named; [`Error::Format`] when a
    /// bool weight holds a byte other than 0 or 1.
    pub fn load(specs: &'static [WeightSpec], source: &mut dyn WeightSource) -> Result<ConstPool> {
        let mut offsets = Vec::with_capacity(specs.len());
        let mut size = 0usize;
        let overflow = || Error::ShapeMismatch {
            what: "the ConstPool's size".into(),
            expected: "at most isize::MAX bytes".into(),
            got: "more".into(),
        };
        for s in specs {
            offsets.push(size);
            let b = s.bytes().and_then(|b| b.checked_next_multiple_of(POOL_ALIGN)).ok_or_else(overflow)?;
            size = size.checked_add(b).ok_or_else(overflow)?;
        }
        let size = size.max(POOL_ALIGN);
        let layout = std::alloc::Layout::from_size_align(size, POOL_ALIGN).map_err(|_| overflow())?;
        // SAFETY: the layout's size is nonzero.
        let base = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })
            .ok_or_else(|| Error::OutOfMemory { what: "the ConstPool".into(), bytes: size })?;
        let pool = ConstPool { base, size, offsets, specs };
        for (k, spec) in specs.iter().enumerate() {
            let (at, len) = (pool.offsets[k], spec.bytes().unwrap_or(0));
            // SAFETY: `[at, at + len)` is inside the allocation (summed
            // above), no other reference to it exists while we write.
            let dst = unsafe { std::slice::from_raw_parts_mut(pool.base.as_ptr().add(at), len) };
            source.fill(spec, dst).map_err(|e| named(spec, e))?;
            if spec.dtype == DType::Bool {
                if let Some(i) = dst.iter().position(|&b| b > 1) {
                    return Err(Error::Format(format!(
                        "weight `{}`: bool element {i} is byte {}; bool elements must be 0 or 1",
                        spec.name, dst[i]
                    )));
                }
            }
        }
        Ok(pool)
    }

    /// The weights, in pool order.
    pub fn specs(&self) -> &'static [WeightSpec] {
        self.specs
    }

    /// The pool's size in bytes: every weight rounded up to [`POOL_ALIGN`].
    pub fn size_bytes(&self) -> usize {
        self.size
    }

    /// The whole pool, padding included (what a device copy uploads).
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: the allocation is `size` initialised bytes.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr(), self.size) }
    }

    /// Weight `k`'s byte offset in the pool.
    pub fn offset(&self, k: usize) -> usize {
        self.offsets[k]
    }

    /// Weight `k` as its storage type.
    ///
    /// Panics when `k` is out of range or `T` is not its storage type: the
    /// generated `Model` asks for each weight by its index and type, so
    /// that would be a generator bug, not bad input.
    pub fn get<T: Element>(&self, k: usize) -> &[T] {
        let spec = &self.specs[k];
        assert_eq!(T::DTYPE, spec.dtype, "ConstPool::get: weight `{}`", spec.name);
        let n = spec.elements().unwrap_or(0);
        // SAFETY: the weight's bytes are in the allocation at a multiple of
        // POOL_ALIGN (≥ any storage type's alignment); every bit pattern is
        // a valid f32/i32/f16/bf16, and bool weights were checked to be 0
        // or 1 by `load`; the pool is not written after `load`.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(self.offsets[k]).cast::<T>(), n) }
    }
}

impl Drop for ConstPool {
    fn drop(&mut self) {
        // SAFETY: allocated in `load` with this layout.
        unsafe {
            std::alloc::dealloc(
                self.base.as_ptr(),
                std::alloc::Layout::from_size_align_unchecked(self.size, POOL_ALIGN),
            )
        }
    }
}

impl std::fmt::Debug for ConstPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConstPool").field("size_bytes", &self.size).field("weights", &self.specs.len()).finish()
    }
}

/// The error of weight `spec`, saying which weight it was.
fn named(spec: &WeightSpec, e: Error) -> Error {
    match e {
        Error::Format(m) if !m.contains(spec.name) => Error::Format(format!("weight `{}`: {m}", spec.name)),
        Error::Io(m) if !m.contains(spec.name) => Error::Io(format!("weight `{}`: {m}", spec.name)),
        e => e,
    }
}

/// The size of a ShapeSet point's Memory Arena: `peak_bytes` is what the
/// generated entry point asks for (slots shared by temporaries whose live
/// ranges do not overlap), `sum_bytes` what the temporaries would take
/// each in its own buffer. Both count each buffer rounded up to 64 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArenaSize {
    /// The point: `(symbol, value)` for each symbol it binds.
    pub point: &'static [(&'static str, i64)],
    /// Bytes of the arena (the sum of its slots' sizes).
    pub peak_bytes: u64,
    /// Bytes of all temporaries, unshared.
    pub sum_bytes: u64,
}

// ---------------------------------------------------------------- C ABI

/// One weight as a C caller passes it to `tgc_<name>_model_init`: its
/// graph input's name (NUL-terminated UTF-8) and its bytes (dense,
/// row-major, little-endian).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CWeight {
    /// The weight's name.
    pub name: *const c_char,
    /// Its bytes.
    pub data: *const c_void,
    /// How many bytes `data` holds.
    pub bytes: i64,
}

/// The C status names, indexed by their code: `TGC_OK` is 0, an error's
/// code is [`status_code`], then [`STATUS_INVALID_ARGUMENT`] and
/// [`STATUS_PANIC`].
pub const STATUS_NAMES: [&str; 14] = [
    "TGC_OK",
    "TGC_LENGTH_MISMATCH",
    "TGC_SHAPE_MISMATCH",
    "TGC_DIM_MISMATCH",
    "TGC_INVALID_DIM",
    "TGC_DTYPE_MISMATCH",
    "TGC_MISALIGNED",
    "TGC_NO_DEVICE",
    "TGC_IO",
    "TGC_FORMAT",
    "TGC_OUT_OF_MEMORY",
    "TGC_KERNEL",
    "TGC_INVALID_ARGUMENT",
    "TGC_PANIC",
];

/// The C status of an error, an index of [`STATUS_NAMES`].
pub fn status_code(e: &Error) -> i32 {
    match e {
        Error::LengthMismatch { .. } => 1,
        Error::ShapeMismatch { .. } => 2,
        Error::DimMismatch { .. } => 3,
        Error::InvalidDim { .. } => 4,
        Error::DTypeMismatch { .. } => 5,
        Error::Misaligned { .. } => 6,
        Error::NoDevice(_) => 7,
        Error::Io(_) => 8,
        Error::Format(_) => 9,
        Error::OutOfMemory { .. } => 10,
        Error::Kernel(_) => 11,
    }
}

/// `TGC_INVALID_ARGUMENT`: a null pointer or a negative length where the
/// ABI needs one.
pub const STATUS_INVALID_ARGUMENT: i32 = 12;
/// `TGC_PANIC`: the call panicked (a bug of tgc; the model is left as it
/// was).
pub const STATUS_PANIC: i32 = 13;

/// The C declarations of [`CWeight`] and of the status codes
/// ([`STATUS_NAMES`]), printed into every generated header.
pub fn c_decl() -> String {
    let codes: Vec<String> = STATUS_NAMES.iter().enumerate().map(|(i, n)| format!("    {n} = {i}")).collect();
    format!(
        "#ifndef TGC_MODEL_ABI
#define TGC_MODEL_ABI 1
/* One weight: its graph input's name and its bytes (dense, row-major, little-endian). */
typedef struct tgc_weight {{
    const char* name;
    const void* data;
    int64_t bytes;
}} tgc_weight;
/* Status codes: 0 is success; the message of the last failure on the calling thread is
   tgc_<name>_last_error(). */
enum {{
{}
}};
#endif
",
        codes.join(",\n")
    )
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Records `message` as the calling thread's last error.
pub fn set_last_error(message: &str) {
    let c = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST_ERROR.with(|e| *e.borrow_mut() = c);
}

/// The calling thread's last error message (empty when none), valid until
/// the next failing call on this thread.
pub fn last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// Runs a C entry's body: its status, the message recorded on failure, a
/// panic caught and reported as [`STATUS_PANIC`].
pub fn c_call(body: impl FnOnce() -> std::result::Result<(), (i32, String)>) -> i32 {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(Ok(())) => 0,
        Ok(Err((code, message))) => {
            set_last_error(&message);
            code
        }
        Err(_) => {
            set_last_error("tgc panicked (a bug: please report it)");
            STATUS_PANIC
        }
    }
}

/// An [`Error`] as `(status, message)` for [`c_call`].
pub fn c_error(e: Error) -> (i32, String) {
    (status_code(&e), e.to_string())
}

/// An invalid-argument failure for [`c_call`].
pub fn c_invalid(message: String) -> (i32, String) {
    (STATUS_INVALID_ARGUMENT, message)
}

/// The weights a C caller passed: `n` [`CWeight`]s at `ptr`, found by name.
pub struct CWeights<'a> {
    weights: &'a [CWeight],
}

impl<'a> CWeights<'a> {
    /// The weights at `ptr`.
    ///
    /// # Safety
    /// `ptr` points to `n` [`CWeight`]s (nothing is read when `n` is 0),
    /// each `name` a NUL-terminated string and each `data` readable for
    /// `bytes` bytes, all alive and unchanged for `'a`.
    ///
    /// Errors: [`STATUS_INVALID_ARGUMENT`] for a null `ptr` with `n > 0`, a
    /// negative `n`, a null name or data, a negative size, a name that is
    /// not UTF-8 or given twice.
    pub unsafe fn new(ptr: *const CWeight, n: i64) -> std::result::Result<CWeights<'a>, (i32, String)> {
        let n = usize::try_from(n).map_err(|_| c_invalid(format!("{n} weights")))?;
        if n == 0 {
            return Ok(CWeights { weights: &[] });
        }
        if ptr.is_null() {
            return Err(c_invalid("the weights pointer is null".into()));
        }
        // SAFETY: the caller's contract.
        let weights = unsafe { std::slice::from_raw_parts(ptr, n) };
        let mut names: Vec<&str> = Vec::with_capacity(n);
        for (i, w) in weights.iter().enumerate() {
            if w.name.is_null() || (w.data.is_null() && w.bytes != 0) || w.bytes < 0 {
                return Err(c_invalid(format!("weight {i}: a null name or data, or a negative size")));
            }
            // SAFETY: the caller's contract.
            let name = unsafe { CStr::from_ptr(w.name) }
                .to_str()
                .map_err(|_| c_invalid(format!("weight {i}: its name is not UTF-8")))?;
            if names.contains(&name) {
                return Err(c_invalid(format!("weight `{name}` is given twice")));
            }
            names.push(name);
        }
        Ok(CWeights { weights })
    }

    /// Fails when a weight names no input of `specs` (a typo would
    /// otherwise surface as a missing weight).
    pub fn check_names(&self, specs: &[WeightSpec]) -> std::result::Result<(), (i32, String)> {
        for w in self.weights {
            // SAFETY: checked to be a NUL-terminated UTF-8 string in `new`.
            let name = unsafe { CStr::from_ptr(w.name) }.to_str().unwrap_or_default();
            if !specs.iter().any(|s| s.name == name) {
                let known: Vec<&str> = specs.iter().map(|s| s.name).collect();
                return Err(c_invalid(format!("the model has no weight `{name}`; its weights: {}", known.join(", "))));
            }
        }
        Ok(())
    }
}

impl WeightSource for CWeights<'_> {
    fn fill(&mut self, spec: &WeightSpec, dst: &mut [u8]) -> Result<()> {
        // SAFETY: names were checked in `new`.
        let found = self.weights.iter().find(|w| unsafe { CStr::from_ptr(w.name) }.to_bytes() == spec.name.as_bytes());
        let Some(w) = found else {
            return Err(Error::Format(format!("weight `{}` ({}) is missing", spec.name, spec.describe())));
        };
        if w.bytes as usize != dst.len() {
            return Err(Error::ShapeMismatch {
                what: format!("bytes of weight `{}` ({})", spec.name, spec.describe()),
                expected: dst.len().to_string(),
                got: w.bytes.to_string(),
            });
        }
        if !dst.is_empty() {
            // SAFETY: `data` is readable for `bytes` bytes (`new`'s contract).
            dst.copy_from_slice(unsafe { std::slice::from_raw_parts(w.data.cast::<u8>(), dst.len()) });
        }
        Ok(())
    }
}

/// One pointer argument of a C `model_run`: its name, address and length
/// in bytes, for [`c_slice`] and [`c_disjoint`].
#[derive(Clone, Copy, Debug)]
pub struct CArg {
    /// The graph's name of the argument.
    pub name: &'static str,
    /// Its first byte.
    pub addr: usize,
    /// Its length in bytes.
    pub bytes: usize,
}

/// The slice of `len` elements at `ptr`, for argument `name` of a C entry.
///
/// # Safety
/// When the checks pass, `ptr` must be readable (and, for an output,
/// writable) for `len` elements of `T` and not written by anyone else
/// during the call.
///
/// Errors: [`STATUS_INVALID_ARGUMENT`] for a negative length, a null
/// pointer with a positive length, or a `bool` argument holding a byte
/// other than 0 and 1 (which a Rust `bool` cannot be); [`Error::Misaligned`]
/// when `ptr` is not aligned for `T`.
pub unsafe fn c_slice<'a, T: Element>(
    name: &'static str,
    ptr: *const T,
    len: i64,
) -> std::result::Result<(&'a [T], CArg), (i32, String)> {
    let arg = c_arg(name, ptr, len)?;
    if arg.bytes == 0 {
        return Ok((&[], arg));
    }
    let len = arg.bytes / std::mem::size_of::<T>();
    // SAFETY: the function's contract; bytes are valid for any value.
    if T::DTYPE == DType::Bool && unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) }.iter().any(|&b| b > 1) {
        return Err(c_invalid(format!("argument `{name}` (bool) holds a byte other than 0 and 1")));
    }
    // SAFETY: the function's contract, and every value is valid for `T`.
    Ok((unsafe { std::slice::from_raw_parts(ptr, len) }, arg))
}

/// [`c_slice`] for an output: a mutable slice. A `bool` output is zeroed
/// first (its bytes may be anything before the kernels write it).
///
/// # Safety
/// As [`c_slice`], and [`c_disjoint`] must pass before the slice is used
/// beside the others.
pub unsafe fn c_slice_mut<'a, T: Element>(
    name: &'static str,
    ptr: *mut T,
    len: i64,
) -> std::result::Result<(&'a mut [T], CArg), (i32, String)> {
    let arg = c_arg(name, ptr.cast_const(), len)?;
    if arg.bytes == 0 {
        return Ok((&mut [], arg));
    }
    if T::DTYPE == DType::Bool {
        // SAFETY: the caller's contract: writable for `arg.bytes` bytes.
        unsafe { ptr.cast::<u8>().write_bytes(0, arg.bytes) };
    }
    // SAFETY: the caller's contract: writable, and ours alone for the call;
    // the bytes are a valid `T` (any bits, or zeroed bools).
    Ok((unsafe { std::slice::from_raw_parts_mut(ptr, arg.bytes / std::mem::size_of::<T>()) }, arg))
}

/// The checks of [`c_slice`] but the bool values: length, null, alignment
/// and size in bytes.
fn c_arg<T>(name: &'static str, ptr: *const T, len: i64) -> std::result::Result<CArg, (i32, String)> {
    let len = usize::try_from(len).map_err(|_| c_invalid(format!("argument `{name}` has length {len}")))?;
    if len == 0 {
        return Ok(CArg { name, addr: 0, bytes: 0 });
    }
    if ptr.is_null() {
        return Err(c_invalid(format!("argument `{name}` is null")));
    }
    if !(ptr as usize).is_multiple_of(std::mem::align_of::<T>()) {
        return Err(c_error(Error::Misaligned { arg: name.into(), align: std::mem::align_of::<T>() }));
    }
    let bytes = len
        .checked_mul(std::mem::size_of::<T>())
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or_else(|| c_invalid(format!("argument `{name}`: {len} elements do not fit in memory")))?;
    Ok(CArg { name, addr: ptr as usize, bytes })
}

/// Fails when an output's bytes overlap any other argument's (the kernels
/// assume outputs alias nothing).
pub fn c_disjoint(inputs: &[CArg], outputs: &[CArg]) -> std::result::Result<(), (i32, String)> {
    let overlap =
        |a: &CArg, b: &CArg| a.bytes > 0 && b.bytes > 0 && a.addr < b.addr + b.bytes && b.addr < a.addr + a.bytes;
    for (i, o) in outputs.iter().enumerate() {
        if let Some(x) = inputs.iter().chain(&outputs[..i]).find(|x| overlap(o, x)) {
            return Err(c_invalid(format!("output `{}` overlaps argument `{}`", o.name, x.name)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    static SPECS: [WeightSpec; 3] = [
        WeightSpec { name: "w", dtype: DType::F32, shape: &[2, 3] },
        WeightSpec { name: "b", dtype: DType::F16, shape: &[3] },
        WeightSpec { name: "m", dtype: DType::Bool, shape: &[5] },
    ];

    fn source(spec: &WeightSpec, dst: &mut [u8]) -> Result<()> {
        match spec.name {
            "w" => write_weight(spec, dst, &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]),
            "b" => write_weight(spec, dst, &[half::f16::from_f32(0.5); 3]),
            _ => write_weight(spec, dst, &[true, false, true, true, false]),
        }
    }

    #[test]
    fn the_pool_holds_each_weight_aligned() {
        let pool = ConstPool::load(&SPECS, &mut source).unwrap();
        assert_eq!(pool.get::<f32>(0), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(pool.get::<half::f16>(1), [half::f16::from_f32(0.5); 3]);
        assert_eq!(pool.get::<bool>(2), [true, false, true, true, false]);
        assert_eq!((pool.offset(0), pool.offset(1), pool.offset(2)), (0, 64, 128));
        assert_eq!(pool.size_bytes(), 192);
        assert_eq!(pool.as_bytes().as_ptr() as usize % POOL_ALIGN, 0);
    }

    #[test]
    fn a_bad_source_is_an_error_naming_the_weight() {
        let mut short = |spec: &WeightSpec, dst: &mut [u8]| write_weight(spec, dst, &[0.0f32]);
        let e = ConstPool::load(&SPECS[..1], &mut short).unwrap_err();
        assert_eq!(e, Error::LengthMismatch { arg: "w".into(), expected: 6, got: 1 });
        let mut bad_bool = |_: &WeightSpec, dst: &mut [u8]| {
            dst.fill(2);
            Ok(())
        };
        let e = ConstPool::load(&SPECS[2..], &mut bad_bool).unwrap_err();
        assert!(matches!(&e, Error::Format(m) if m.contains("weight `m`")), "{e}");
        let mut wrong_type = |spec: &WeightSpec, dst: &mut [u8]| write_weight(spec, dst, &[0i32; 6]);
        let e = ConstPool::load(&SPECS[..1], &mut wrong_type).unwrap_err();
        assert!(matches!(e, Error::DTypeMismatch { expected: DType::F32, got: DType::I32, .. }));
    }

    #[test]
    fn c_weights_are_found_by_name_and_checked() {
        let w = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        let cw = [CWeight { name: c"w".as_ptr(), data: w.as_ptr().cast(), bytes: 24 }];
        // SAFETY: `cw` and what it points to outlive the uses below.
        let mut src = unsafe { CWeights::new(cw.as_ptr(), 1) }.unwrap();
        src.check_names(&SPECS).unwrap();
        assert_eq!(ConstPool::load(&SPECS[..1], &mut src).unwrap().get::<f32>(0), w);
        let e = ConstPool::load(&SPECS[..2], &mut src).unwrap_err();
        assert!(matches!(&e, Error::Format(m) if m.contains("`b`") && m.contains("missing")), "{e}");
        let short = [CWeight { name: c"w".as_ptr(), data: w.as_ptr().cast(), bytes: 20 }];
        // SAFETY: as above.
        let mut src = unsafe { CWeights::new(short.as_ptr(), 1) }.unwrap();
        assert!(matches!(ConstPool::load(&SPECS[..1], &mut src), Err(Error::ShapeMismatch { .. })));
        let typo = [CWeight { name: c"ww".as_ptr(), data: w.as_ptr().cast(), bytes: 24 }];
        // SAFETY: as above.
        let src = unsafe { CWeights::new(typo.as_ptr(), 1) }.unwrap();
        let (code, m) = src.check_names(&SPECS).unwrap_err();
        assert_eq!(code, STATUS_INVALID_ARGUMENT);
        assert!(m.contains("no weight `ww`"), "{m}");
        let twice = [cw[0], cw[0]];
        // SAFETY: as above.
        assert!(unsafe { CWeights::new(twice.as_ptr(), 2) }.is_err());
        // SAFETY: a null pointer with a positive count is refused before any read.
        assert!(unsafe { CWeights::new(std::ptr::null(), 1) }.is_err());
    }

    #[test]
    fn c_arguments_are_checked() {
        let v = [0.0f32; 8];
        // SAFETY: `v` outlives the slices.
        let (s, a) = unsafe { c_slice("x", v.as_ptr(), 8) }.unwrap();
        assert_eq!((s.len(), a.bytes), (8, 32));
        // SAFETY: refused before any read.
        assert_eq!(unsafe { c_slice::<f32>("x", std::ptr::null(), 1) }.unwrap_err().0, STATUS_INVALID_ARGUMENT);
        // SAFETY: refused before any read.
        assert_eq!(unsafe { c_slice("x", v.as_ptr(), -1) }.unwrap_err().0, STATUS_INVALID_ARGUMENT);
        // SAFETY: refused before any read (misaligned).
        let odd = unsafe { v.as_ptr().cast::<u8>().add(1).cast::<f32>() };
        // SAFETY: as above.
        assert_eq!(unsafe { c_slice("x", odd, 1) }.unwrap_err().0, 6);
        let x = CArg { name: "x", addr: 1000, bytes: 32 };
        let y = CArg { name: "y", addr: 1028, bytes: 8 };
        let z = CArg { name: "z", addr: 1032, bytes: 8 };
        assert!(c_disjoint(&[x], &[z]).is_ok());
        let (_, m) = c_disjoint(&[x], &[y]).unwrap_err();
        assert!(m.contains("`y` overlaps argument `x`"), "{m}");
        assert!(c_disjoint(&[], &[y, y]).is_err());
    }

    #[test]
    fn c_bools_are_zero_or_one_on_the_way_in_and_zeroed_on_the_way_out() {
        let bytes = [0u8, 1, 1, 0, 2];
        // SAFETY: `bytes` outlives the slice; its first four bytes are 0 or 1.
        let (s, _) = unsafe { c_slice("m", bytes.as_ptr().cast::<bool>(), 4) }.unwrap();
        assert_eq!(s, [false, true, true, false]);
        // SAFETY: refused before a `bool` is made of the byte 2.
        let (code, msg) = unsafe { c_slice("m", bytes.as_ptr().cast::<bool>(), 5) }.unwrap_err();
        assert_eq!(code, STATUS_INVALID_ARGUMENT);
        assert!(msg.contains("`m` (bool) holds a byte other than 0 and 1"), "{msg}");
        let mut out = [7u8, 255, 3];
        // SAFETY: `out` is writable for three bytes and ours alone.
        let (o, _) = unsafe { c_slice_mut("y", out.as_mut_ptr().cast::<bool>(), 3) }.unwrap();
        assert_eq!(o, [false; 3]);
        o[1] = true;
        assert_eq!(out, [0, 1, 0]);
    }

    #[test]
    fn status_codes_name_their_errors() {
        let name = |e: Error| STATUS_NAMES[status_code(&e) as usize];
        assert_eq!(name(Error::LengthMismatch { arg: "x".into(), expected: 1, got: 2 }), "TGC_LENGTH_MISMATCH");
        assert_eq!(name(Error::Kernel("k".into())), "TGC_KERNEL");
        assert_eq!(name(Error::OutOfMemory { what: "p".into(), bytes: 1 }), "TGC_OUT_OF_MEMORY");
        assert_eq!(STATUS_NAMES[STATUS_INVALID_ARGUMENT as usize], "TGC_INVALID_ARGUMENT");
        assert_eq!(STATUS_NAMES[STATUS_PANIC as usize], "TGC_PANIC");
        assert!(
            c_decl().contains("    TGC_OK = 0,\n    TGC_LENGTH_MISMATCH = 1,")
                && c_decl().contains("TGC_PANIC = 13\n};")
        );
    }

    #[test]
    fn c_call_reports_status_and_message() {
        assert_eq!(c_call(|| Ok(())), 0);
        assert_eq!(c_call(|| Err(c_error(Error::Kernel("boom".into())))), 11);
        // SAFETY: `last_error` points to a live NUL-terminated string.
        assert_eq!(unsafe { CStr::from_ptr(last_error()) }.to_str().unwrap(), "kernel error: boom");
        assert_eq!(c_call(|| panic!("a panic on purpose")), STATUS_PANIC);
    }
}

//! TMA tensor maps (`CUtensorMap`) for the bulk tensor copies of sm_90
//! kernels (`cp.async.bulk.tensor`, PTX ISA "Tensor Memory Accelerator"):
//! [`TileMap`] describes a tensor in global memory and the box one copy
//! moves, [`check_tile_map`] applies the driver's rules to it before any
//! driver call, and [`super::Gpu::tensor_map`] encodes it
//! (`cuTensorMapEncodeTiled`) into a [`TensorMap`], which a launch passes
//! by value ([`super::KernelArg::TensorMap`]) to a
//! `const __grid_constant__` kernel parameter of 128 bytes.
//!
//! The rules, from the CUDA Driver API reference of
//! `cuTensorMapEncodeTiled` (CUDA 13.0) for the non-interleaved layout
//! used here: rank 1 to 5; the global address a multiple of 16 bytes;
//! each extent 1 to 2³²; each stride of the outer dims a multiple of 16
//! bytes and below 2⁴⁰; each box extent 1 to 256, the inner one a multiple
//! of 16 bytes; with a swizzle, the inner box extent at most the swizzle's
//! span (32, 64 or 128 bytes). Out-of-bounds elements of a box are filled
//! with zeros, and the transaction count of the copy is the whole box.

use cudarc::driver::sys::{
    cuTensorMapEncodeTiled, CUresult, CUtensorMap, CUtensorMapDataType, CUtensorMapFloatOOBfill, CUtensorMapInterleave,
    CUtensorMapL2promotion, CUtensorMapSwizzle,
};
use cudarc::driver::DeviceRepr;

use crate::{DType, Error, Result};

/// An encoded tensor map: the driver's 128 opaque bytes, 64-byte aligned
/// as the kernel parameter that receives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct TensorMap([u64; 16]);

// SAFETY: plain bytes, copied into the kernel's parameter buffer as they are.
unsafe impl DeviceRepr for TensorMap {}

/// The shared-memory swizzle a copy writes its box with (PTX ISA, "Tensor
/// Memory Accelerator: swizzling modes"); `wgmma`'s matrix descriptors
/// name the same modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Swizzle {
    /// Rows as they are.
    None,
    /// 16-byte chunks permuted within 32-byte spans.
    B32,
    /// Within 64-byte spans.
    B64,
    /// Within 128-byte spans (8 rows of 128 bytes, 1024-byte aligned).
    B128,
}

impl Swizzle {
    /// The span in bytes the inner box extent may not exceed (`None`: no
    /// limit).
    pub fn span_bytes(self) -> Option<u64> {
        match self {
            Swizzle::None => None,
            Swizzle::B32 => Some(32),
            Swizzle::B64 => Some(64),
            Swizzle::B128 => Some(128),
        }
    }

    fn driver(self) -> CUtensorMapSwizzle {
        match self {
            Swizzle::None => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE,
            Swizzle::B32 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_32B,
            Swizzle::B64 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B,
            Swizzle::B128 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
        }
    }
}

/// A dense tensor in global memory and the box one bulk copy moves, dims
/// innermost (contiguous) first, as `cuTensorMapEncodeTiled` takes them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TileMap {
    /// The element type.
    pub dtype: DType,
    /// Extents in elements, innermost first: 1 to 5 of them.
    pub dims: Vec<u64>,
    /// Byte strides of `dims[1..]` (one fewer than `dims`).
    pub strides: Vec<u64>,
    /// The box in elements, one extent per dim.
    pub box_dims: Vec<u32>,
    /// The shared-memory layout the copy writes.
    pub swizzle: Swizzle,
}

/// Checks `map` for a tensor at device address `address` (named `name` in
/// errors) against the driver's rules (module doc) before any driver call.
///
/// Errors: [`Error::Misaligned`] for an address that is not a multiple of
/// 16 bytes; [`Error::ShapeMismatch`] naming the rule a rank, extent,
/// stride or box breaks, or a dtype TMA does not copy (`bool`).
pub fn check_tile_map(name: &str, address: u64, map: &TileMap) -> Result<()> {
    let bad = |what: String, expected: &str, got: String| {
        Err(Error::ShapeMismatch { what: format!("tensor map of `{name}`: {what}"), expected: expected.into(), got })
    };
    let rank = map.dims.len();
    if !(1..=5).contains(&rank) {
        return bad("rank".into(), "1 to 5", rank.to_string());
    }
    if map.strides.len() != rank - 1 || map.box_dims.len() != rank {
        let got = format!("{} strides and {} box extents", map.strides.len(), map.box_dims.len());
        return bad("layout".into(), &format!("{} strides and {rank} box extents", rank - 1), got);
    }
    if data_type(map.dtype).is_none() {
        return bad("dtype".into(), "f16, bf16, f32 or i32", map.dtype.to_string());
    }
    if !address.is_multiple_of(16) {
        return Err(Error::Misaligned { arg: name.into(), align: 16 });
    }
    for (i, &d) in map.dims.iter().enumerate() {
        if !(1..=1u64 << 32).contains(&d) {
            return bad(format!("extent {i}"), "1 to 2^32", d.to_string());
        }
    }
    for (i, &s) in map.strides.iter().enumerate() {
        if !s.is_multiple_of(16) || s >= 1u64 << 40 {
            return bad(format!("stride of dim {}", i + 1), "a multiple of 16 bytes below 2^40", s.to_string());
        }
    }
    for (i, &b) in map.box_dims.iter().enumerate() {
        if !(1..=256).contains(&b) {
            return bad(format!("box extent {i}"), "1 to 256", b.to_string());
        }
    }
    let inner_bytes = map.box_dims[0] as u64 * map.dtype.size_bytes() as u64;
    if !inner_bytes.is_multiple_of(16) {
        return bad("inner box extent".into(), "a multiple of 16 bytes", format!("{inner_bytes} bytes"));
    }
    if let Some(span) = map.swizzle.span_bytes().filter(|&s| inner_bytes > s) {
        let expected = format!("at most the swizzle's {span} bytes");
        return bad("inner box extent".into(), &expected, format!("{inner_bytes} bytes"));
    }
    Ok(())
}

/// The driver's element type for `dtype`; `None` for `bool`.
fn data_type(dtype: DType) -> Option<CUtensorMapDataType> {
    use CUtensorMapDataType::*;
    match dtype {
        DType::F16 => Some(CU_TENSOR_MAP_DATA_TYPE_FLOAT16),
        DType::BF16 => Some(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16),
        DType::F32 => Some(CU_TENSOR_MAP_DATA_TYPE_FLOAT32),
        DType::I32 => Some(CU_TENSOR_MAP_DATA_TYPE_INT32),
        DType::Bool => None,
    }
}

/// Encodes a map [`check_tile_map`] accepted: 256-byte L2 promotion,
/// zeros out of bounds.
///
/// Errors: [`Error::Kernel`] with the driver's code when it refuses.
///
/// # Safety
///
/// A context must be current on this thread (any [`super::Gpu`] call made
/// it so), and `map` must have passed [`check_tile_map`].
pub(super) unsafe fn encode(address: u64, map: &TileMap) -> Result<TensorMap> {
    let dtype = data_type(map.dtype).expect("check_tile_map refused other dtypes");
    let elem_strides = vec![1u32; map.dims.len()];
    let mut out = std::mem::MaybeUninit::<CUtensorMap>::zeroed();
    // SAFETY: the arrays hold rank (dims, box, element strides) and rank - 1
    // (strides) values, checked; the address is a device address of the
    // current context (the caller's contract); `out` is written by the call.
    let r = unsafe {
        cuTensorMapEncodeTiled(
            out.as_mut_ptr(),
            dtype,
            map.dims.len() as u32,
            address as *mut std::ffi::c_void,
            map.dims.as_ptr(),
            map.strides.as_ptr(),
            map.box_dims.as_ptr(),
            elem_strides.as_ptr(),
            CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            map.swizzle.driver(),
            CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    if r != CUresult::CUDA_SUCCESS {
        return Err(Error::Kernel(format!("cuTensorMapEncodeTiled refused the tensor map: {r:?}")));
    }
    // SAFETY: the driver wrote the 128 bytes.
    let encoded = unsafe { out.assume_init() };
    Ok(TensorMap(encoded.opaque))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map() -> TileMap {
        TileMap {
            dtype: DType::F16,
            dims: vec![4096, 1024],
            strides: vec![8192],
            box_dims: vec![64, 128],
            swizzle: Swizzle::B128,
        }
    }

    #[test]
    fn the_driver_rules_are_checked_before_any_call() {
        assert_eq!(check_tile_map("a", 0x1000, &map()), Ok(()));
        assert_eq!(check_tile_map("a", 0x1008, &map()), Err(Error::Misaligned { arg: "a".into(), align: 16 }));
        let refused = |m: TileMap, what: &str| {
            let e = check_tile_map("a", 0x1000, &m).unwrap_err();
            assert!(e.to_string().contains(what), "{e}");
        };
        refused(TileMap { strides: vec![8200], ..map() }, "stride of dim 1");
        refused(TileMap { box_dims: vec![64, 257], ..map() }, "box extent 1");
        refused(TileMap { box_dims: vec![128, 128], ..map() }, "at most the swizzle's 128 bytes");
        refused(TileMap { box_dims: vec![4, 128], swizzle: Swizzle::None, ..map() }, "multiple of 16 bytes");
        refused(TileMap { dims: vec![0, 1024], ..map() }, "extent 0");
        refused(TileMap { dims: vec![1; 6], strides: vec![16; 5], box_dims: vec![8; 6], ..map() }, "rank");
        refused(TileMap { strides: vec![], ..map() }, "layout");
        refused(TileMap { dtype: DType::Bool, ..map() }, "dtype");
        // Without a swizzle the inner box is not limited to 128 bytes.
        let wide = TileMap { box_dims: vec![256, 8], swizzle: Swizzle::None, ..map() };
        assert_eq!(check_tile_map("a", 0x1000, &wide), Ok(()));
    }

    #[test]
    fn a_tensor_map_is_128_bytes_aligned_to_64() {
        assert_eq!((std::mem::size_of::<TensorMap>(), std::mem::align_of::<TensorMap>()), (128, 64));
        assert_eq!(std::mem::size_of::<CUtensorMap>(), 128);
    }
}

//! How compiled GPU kernels are launched, as plain data (no driver needed,
//! so built and tested on any machine; `cuda::Gpu` executes it).
//!
//! - [`Launch`]: grid, block and dynamic shared memory of one kernel, and
//!   [`Launch::check`] against a device's [`Limits`].
//! - [`Steps`]: a whole graph's launches in order, each kernel argument
//!   a graph tensor, a temporary or an integer ([`StepArg`]), plus the
//!   temporaries' sizes. Generated `sm80::steps` functions and the `tgc`
//!   tool build one for given dims; `cuda::Gpu::run_steps` allocates the
//!   temporaries (not initialised: the kernels write every byte of one
//!   before they read it) and queues the kernels on one stream.

use std::borrow::Cow;

use crate::{Error, Result};

/// How a kernel is launched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Launch {
    /// Blocks per grid, x/y/z.
    pub grid: [u32; 3],
    /// Threads per block, x/y/z.
    pub block: [u32; 3],
    /// Dynamic shared memory per block, in bytes.
    pub dynamic_smem_bytes: u32,
    /// `grid[0]` is an upper bound: a persistent kernel, which walks its
    /// work by `gridDim.x`, gets at most one block per SM of the device
    /// ([`Launch::on`]).
    pub persistent: bool,
    /// CTAs per thread block cluster along `x` (1: none). The kernel
    /// states it itself (`__cluster_dims__`), so a plain launch runs it;
    /// `grid[0]` is a multiple of it, also after [`Launch::on`].
    pub cluster: u32,
}

/// Dynamic shared memory a function gets without opting in, in bytes.
pub const DEFAULT_DYNAMIC_SMEM_BYTES: u32 = 48 * 1024;

/// What [`Launch::check`] compares with: the device's limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Threads per block.
    pub max_threads_per_block: u32,
    /// Shared memory per block with opt-in, in bytes.
    pub max_smem_per_block_optin: u32,
    /// Grid extents, x/y/z.
    pub max_grid: [u32; 3],
    /// Streaming multiprocessors.
    pub sm_count: u32,
}

impl Launch {
    /// The launch as it runs on a device of `limits`: a [`Launch::persistent`]
    /// grid's `x` capped at the device's SMs, rounded down to whole
    /// clusters (at least one), so it runs in one wave on a part with fewer
    /// SMs than the target row it was planned for (an H100 PCIe's 114
    /// against the SXM's 132); others unchanged.
    pub fn on(&self, limits: &Limits) -> Launch {
        let mut l = *self;
        if l.persistent {
            let cluster = l.cluster.max(1);
            let sms = (limits.sm_count / cluster * cluster).max(cluster);
            l.grid[0] = l.grid[0].min(sms);
        }
        l
    }

    /// `Ok` when the launch fits `limits`; otherwise [`Error::Kernel`]
    /// naming `kernel` and the limit it breaks. A zero extent is refused too
    /// (the driver would reject it with a less helpful message).
    pub fn check(&self, kernel: &str, limits: &Limits) -> Result<()> {
        let bad = |what: String| Err(Error::Kernel(format!("launch of `{kernel}`: {what}")));
        if self.grid.contains(&0) || self.block.contains(&0) {
            return bad(format!("empty grid {:?} or block {:?}", self.grid, self.block));
        }
        if self.cluster == 0 || !self.grid[0].is_multiple_of(self.cluster) {
            return bad(format!("grid x of {} is not a multiple of its cluster's {} CTAs", self.grid[0], self.cluster));
        }
        let threads: u64 = self.block.iter().map(|&b| b as u64).product();
        if threads > limits.max_threads_per_block as u64 {
            return bad(format!("{threads} threads per block > {}", limits.max_threads_per_block));
        }
        if let Some(k) = (0..3).find(|&k| self.grid[k] > limits.max_grid[k]) {
            return bad(format!("grid extent {} on axis {k} > {}", self.grid[k], limits.max_grid[k]));
        }
        if self.dynamic_smem_bytes > limits.max_smem_per_block_optin {
            return bad(format!(
                "{} bytes of dynamic shared memory > the device's {} per block",
                self.dynamic_smem_bytes, limits.max_smem_per_block_optin
            ));
        }
        Ok(())
    }
}

/// Where one kernel argument of a [`Step`] comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepArg {
    /// The device pointer of the graph's tensor `k`: inputs in
    /// `Graph::inputs()` order, then outputs.
    Tensor(usize),
    /// The device pointer of [`Steps::temps`]`[k]`.
    Temp(usize),
    /// An `int`.
    I32(i32),
    /// A `long long`.
    I64(i64),
    /// A TMA tensor map of a graph tensor or temporary, passed by value
    /// (sm_90 kernels); `cuda::Gpu::run_steps` encodes it at each launch
    /// from the buffer's device address.
    TensorMap(MapArg),
}

/// A graph tensor or a temporary of a [`Steps`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufferArg {
    /// The graph's tensor `k` (inputs then outputs), as [`StepArg::Tensor`].
    Tensor(usize),
    /// [`Steps::temps`]`[k]`, as [`StepArg::Temp`].
    Temp(usize),
}

/// The tensor map of a 2-D row-major tensor and the box one copy moves
/// (`cuTensorMapEncodeTiled`'s arguments; `cuda::tma::TileMap` with the
/// address taken from `buffer` at launch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MapArg {
    /// The tensor the map describes.
    pub buffer: BufferArg,
    /// Its element type.
    pub dtype: crate::DType,
    /// Extents in elements, innermost first.
    pub dims: [u64; 2],
    /// Bytes between consecutive rows (dim 1).
    pub row_stride_bytes: u64,
    /// The box in elements, innermost first.
    pub box_dims: [u32; 2],
    /// The 128-byte swizzle (`CU_TENSOR_MAP_SWIZZLE_128B`); else none.
    pub swizzle_128b: bool,
}

/// One kernel launch of a [`Steps`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The kernel's `extern "C"` name in its module.
    pub kernel: Cow<'static, str>,
    /// Its geometry.
    pub launch: Launch,
    /// One per kernel parameter, in ABI order.
    pub args: Vec<StepArg>,
}

/// A compiled graph's launches for one set of dims: what runs, in order,
/// on one stream.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Steps {
    /// Bytes of each temporary buffer (the values between kernels),
    /// allocated uninitialised: a kernel writes every byte of a temporary
    /// before any kernel reads it (`GpuProgram::buffers`).
    pub temps: Vec<usize>,
    /// The launches, in execution order.
    pub steps: Vec<Step>,
}

/// A grid extent computed from the dims, as the driver takes it.
///
/// Errors: [`Error::Kernel`] naming `kernel` when `blocks` is outside
/// `1..=u32::MAX` (the checks of the dims before keep valid sizes inside).
pub fn grid_extent(kernel: &str, blocks: i64) -> Result<u32> {
    match u32::try_from(blocks) {
        Ok(b) if b >= 1 => Ok(b),
        _ => Err(Error::Kernel(format!("launch of `{kernel}`: a grid extent of {blocks} blocks"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_extents_outside_the_drivers_range_are_refused() {
        assert_eq!(grid_extent("k", 7), Ok(7));
        assert_eq!(grid_extent("k", u32::MAX as i64), Ok(u32::MAX));
        for bad in [0, -3, u32::MAX as i64 + 1] {
            let e = grid_extent("k", bad).unwrap_err();
            assert_eq!(e, Error::Kernel(format!("launch of `k`: a grid extent of {bad} blocks")));
        }
    }
}

//! Running embedded GPU kernels (feature `cuda`): cudarc's driver API,
//! with `libcuda` loaded at run time, so a binary built with this feature
//! starts on a machine without a GPU and reports [`Error::NoDevice`].
//!
//! - [`Gpu`]: one device's primary context and a stream, the modules and
//!   functions loaded from it (cached), device buffers.
//! - [`Module`]: what a generated crate embeds for one graph: a cubin per
//!   architecture and PTX. [`pick_cubin`] chooses the cubin the device can
//!   run; without one the driver compiles the PTX (JIT) instead.
//! - [`Launch`]: grid, block and dynamic shared memory, checked against the
//!   device before a launch ([`Gpu::prepare`] raises a function's dynamic
//!   shared-memory limit when it asks for more than the 48 KiB default).
//! - [`Event`]: a timing event recorded on a handle's stream
//!   ([`Gpu::record_event`]); two of them give the device time of the work
//!   queued between them.
//!
//! Rules followed here (CUDA C++ Programming Guide, "Compute Capability",
//! "Binary Compatibility"): a cubin for `sm_XY` runs on devices of the same
//! major version `X` with minor version `≥ Y`; PTX for `compute_XY` runs on
//! any device of compute capability `≥ X.Y` through the driver's JIT.
//! Dynamic shared memory above 48 KiB needs
//! `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` set on the function, up
//! to the device's `MAX_SHARED_MEMORY_PER_BLOCK_OPTIN`.
//!
//! Typed launches: generated launch functions take their device buffers as
//! [`DeviceArg`]s (an element count and a device address), check them with
//! [`check_arg`] and a kernel's fixed dims with [`check_dim`] before any
//! driver call, then call [`Gpu::launch_raw`]. The checks are plain
//! functions of numbers, so they are tested without a GPU.
//!
//! Models (`000` §8): [`Gpu::upload_pool`] puts a model's ConstPool on
//! the device in one allocation ([`DeviceConstPool`], each weight a
//! [`CudaView`] at its host offset), and [`Gpu::capture`] records the
//! launches of one run as a CUDA Graph ([`Replay`]) that later runs of the
//! same shape cluster replay with one driver call ([`Graphs`] keeps one per
//! cluster).
//!
//! Streams: the work of one handle is queued on its one stream, in order
//! (a program's copies, temporaries and launches). Handles made by
//! [`Gpu::new_stream`] run concurrently and nothing orders them for the
//! caller: a buffer one stream writes and another reads or frees needs
//! [`Gpu::synchronize`] on the first in between. cudarc's automatic
//! per-buffer events are off ([`Gpu::new`]); with them a captured run
//! waited on uncaptured events and the capture failed.
//!
//! Nothing here panics on a missing driver or device: cudarc panics when a
//! driver function is called without `libcuda`, so [`Gpu::new`] checks
//! `is_culib_present` before any other call.

mod tma;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::sys::{
    CUdevice_attribute, CUevent_flags, CUfunction_attribute_enum, CUgraphInstantiate_flags, CUstreamCaptureMode,
};
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaGraph, CudaModule, CudaStream, DevicePtr, DeviceRepr, DeviceSlice,
    DriverError, ValidAsZeroBits,
};
use cudarc::nvrtc::Ptx;

pub use cudarc::driver::{CudaSlice, CudaView, CudaViewMut, LaunchArgs, PushKernelArg};

pub use crate::launch::{
    grid_extent, BufferArg, Launch, Limits, MapArg, Step, StepArg, Steps, DEFAULT_DYNAMIC_SMEM_BYTES,
};
pub use tma::{check_tile_map, Swizzle, TensorMap, TileMap};

use crate::model::{ConstPool, WeightSpec};
use crate::{Error, Result};

/// A cubin compiled for one architecture.
#[derive(Clone, Copy, Debug)]
pub struct Cubin {
    /// The architecture as `10 * major + minor` (80 for `sm_80`).
    pub sm: u32,
    /// The ELF image ptxas wrote.
    pub image: &'static [u8],
}

/// The compiled code of one graph, as a generated crate embeds it.
#[derive(Clone, Copy, Debug)]
pub struct Module {
    /// A name unique in the program (the cache key), e.g. the graph's.
    pub name: &'static str,
    /// Cubins, any order.
    pub cubins: &'static [Cubin],
    /// PTX text for the lowest architecture the kernels need (the JIT
    /// fallback); empty when none was embedded.
    pub ptx: &'static str,
}

/// The cubin of `cubins` a device of architecture `device_sm` runs: the
/// same major version, the highest minor version not above the device's.
pub fn pick_cubin(cubins: &[Cubin], device_sm: u32) -> Option<&Cubin> {
    cubins.iter().filter(|c| c.sm / 10 == device_sm / 10 && c.sm <= device_sm).max_by_key(|c| c.sm)
}

/// A device buffer of elements `T` as a kernel argument: its element count
/// and the device address of its first element. Implemented for cudarc's
/// [`CudaSlice`], [`CudaView`] and [`CudaViewMut`]; a test implements it
/// for a fake buffer to exercise the argument checks without a GPU.
///
/// The address is passed to the kernel as is: the buffer must belong to the
/// device of the [`Gpu`] that launches, and work queued on another stream
/// that writes it must be finished (buffers made by [`Gpu::upload`] and
/// [`Gpu::zeros`] are on the launching stream already).
pub trait DeviceArg<T> {
    /// Elements in the buffer.
    fn elems(&self) -> usize;
    /// The device address of element 0, in bytes.
    fn address(&self) -> u64;
}

/// A [`DeviceArg`] a kernel may write: taken as `&mut`, so no other
/// argument of the launch borrows it.
pub trait DeviceArgMut<T>: DeviceArg<T> {}

impl<T> DeviceArg<T> for CudaSlice<T> {
    fn elems(&self) -> usize {
        DeviceSlice::len(self)
    }
    fn address(&self) -> u64 {
        self.device_ptr(DeviceSlice::stream(self)).0
    }
}

impl<T> DeviceArgMut<T> for CudaSlice<T> {}

impl<T> DeviceArg<T> for CudaView<'_, T> {
    fn elems(&self) -> usize {
        DeviceSlice::len(self)
    }
    fn address(&self) -> u64 {
        self.device_ptr(DeviceSlice::stream(self)).0
    }
}

impl<T> DeviceArg<T> for CudaViewMut<'_, T> {
    fn elems(&self) -> usize {
        DeviceSlice::len(self)
    }
    fn address(&self) -> u64 {
        self.device_ptr(DeviceSlice::stream(self)).0
    }
}

impl<T> DeviceArgMut<T> for CudaViewMut<'_, T> {}

/// Checks device buffer `arg` (named `name` in errors) for a kernel that
/// reads or writes `expected` elements of it through `align`-byte vector
/// accesses; its address on success.
///
/// Errors: [`Error::LengthMismatch`] when it has another element count;
/// [`Error::Misaligned`] when its address is not a multiple of `align`.
pub fn check_arg<T>(name: &str, arg: &(impl DeviceArg<T> + ?Sized), expected: usize, align: usize) -> Result<u64> {
    let got = arg.elems();
    if got != expected {
        return Err(Error::LengthMismatch { arg: name.into(), expected, got });
    }
    let address = arg.address();
    if align > 1 && address % align as u64 != 0 {
        return Err(Error::Misaligned { arg: name.into(), align });
    }
    Ok(address)
}

/// Checks a dim argument of a kernel compiled for the fixed value
/// `compiled`; the dim as `i64`.
///
/// Errors: [`Error::InvalidDim`] outside `1..=i32::MAX`;
/// [`Error::DimMismatch`] when it is not `compiled`.
pub fn check_dim(name: &str, value: usize, compiled: i64) -> Result<i64> {
    let v = crate::checks::dim(name, value)?;
    if v != compiled {
        return Err(Error::DimMismatch { dim: name.into(), expected: compiled, got: v });
    }
    Ok(v)
}

/// Checks a host slice of `got` elements for an argument of `expected`.
///
/// Errors: [`Error::LengthMismatch`].
pub fn check_host_len(name: &str, got: usize, expected: usize) -> Result<()> {
    if got != expected {
        return Err(Error::LengthMismatch { arg: name.into(), expected, got });
    }
    Ok(())
}

/// One kernel argument of [`Gpu::launch_raw`], in the kernel's ABI order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelArg {
    /// A device pointer (`T*`).
    Ptr(u64),
    /// An `int`.
    I32(i32),
    /// A `long long`.
    I64(i64),
    /// A TMA tensor map, by value (`const __grid_constant__ CUtensorMap`,
    /// 128 bytes), from [`Gpu::tensor_map`].
    TensorMap(TensorMap),
}

/// One GPU: its primary context, the stream kernels run on, and the
/// modules loaded so far.
///
/// Everything a `Gpu` queues (copies, launches, the frees of temporaries)
/// goes on its one stream, in order. For concurrent work take another
/// handle with [`Gpu::new_stream`]: same device, same loaded modules, its
/// own stream.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    sm: u32,
    limits: Limits,
    /// Shared by the handles of one context ([`Gpu::new_stream`]): a module
    /// loaded in a context serves all its streams.
    modules: Arc<Mutex<HashMap<&'static str, Arc<CudaModule>>>>,
}

fn driver(what: &str) -> impl Fn(DriverError) -> Error + '_ {
    move |e| Error::Kernel(format!("{what}: {e}"))
}

/// True when the CUDA driver library can be loaded (no device is needed).
pub fn driver_present() -> bool {
    // SAFETY: only tries to open the shared library.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

impl Gpu {
    /// The device `ordinal` (0 for the first GPU) with its default stream.
    ///
    /// Errors: [`Error::NoDevice`] when the driver library is missing, no
    /// device is visible, or `ordinal` is out of range; [`Error::Kernel`]
    /// when the driver fails to create the context.
    pub fn new(ordinal: usize) -> Result<Gpu> {
        if !driver_present() {
            return Err(Error::NoDevice("the CUDA driver library (libcuda) is not installed".into()));
        }
        let count = CudaContext::device_count().map_err(|e| Error::NoDevice(format!("the driver reports {e}")))?;
        if ordinal >= count.max(0) as usize {
            return Err(Error::NoDevice(format!("device {ordinal} asked for, {count} visible")));
        }
        let ctx = CudaContext::new(ordinal).map_err(driver("creating the context"))?;
        // SAFETY: no buffer of this context handle exists yet. tgc orders
        // its GPU work itself (module doc, "Streams"), so cudarc's event
        // tracking — a wait on each buffer's last write and a record of each
        // use at every launch and copy — is turned off: it adds driver
        // calls to every launch, and inside a stream capture its wait on an
        // event recorded before the capture began fails the capture
        // (`CUDA_ERROR_STREAM_CAPTURE_ISOLATION`, seen on an H200).
        unsafe { ctx.disable_event_tracking() };
        let (major, minor) = ctx.compute_capability().map_err(driver("reading the compute capability"))?;
        let attr = |a| ctx.attribute(a).map(|v| v.max(0) as u32).map_err(driver("reading a device attribute"));
        let limits = Limits {
            max_threads_per_block: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            max_smem_per_block_optin: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
            max_grid: [
                attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
                attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
                attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
            ],
            sm_count: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        };
        let stream = ctx.default_stream();
        let sm = (10 * major + minor).max(0) as u32;
        Ok(Gpu { ctx, stream, sm, limits, modules: Arc::new(Mutex::new(HashMap::new())) })
    }

    /// Another handle on this device with a new stream of its own; it shares
    /// this handle's context and loaded modules. Work queued on the two
    /// streams may run concurrently: a buffer one writes and the other reads
    /// or frees needs [`Gpu::synchronize`] on the writer first (no event
    /// orders them: module doc, "Streams").
    ///
    /// Errors: [`Error::Kernel`] when the driver cannot create the stream.
    pub fn new_stream(&self) -> Result<Gpu> {
        let stream = self.ctx.new_stream().map_err(driver("creating a stream"))?;
        Ok(Gpu { ctx: self.ctx.clone(), stream, sm: self.sm, limits: self.limits, modules: self.modules.clone() })
    }

    /// The TMA tensor map of `map` over the buffer at device `address`
    /// (named `name` in errors), for a launch argument
    /// ([`KernelArg::TensorMap`]); the map holds the address, so it serves
    /// that buffer only.
    ///
    /// Errors: those of [`check_tile_map`], before any driver call;
    /// [`Error::Kernel`] when the driver is older than CUDA 12.0 (no TMA)
    /// or refuses the map.
    pub fn tensor_map(&self, name: &str, address: u64, map: &TileMap) -> Result<TensorMap> {
        check_tile_map(name, address, map)?;
        let mut version = 0;
        // SAFETY: writes one int; the driver library is loaded (`Gpu::new`).
        let r = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut version) };
        if r != cudarc::driver::sys::CUresult::CUDA_SUCCESS || version < 12000 {
            return Err(Error::Kernel(format!("tensor maps need a CUDA 12.0 driver or newer, this one is {version}")));
        }
        self.ctx.bind_to_thread().map_err(driver("making the context current"))?;
        // SAFETY: the context is current and the map was checked.
        unsafe { tma::encode(address, map) }
    }

    /// The device's architecture as `10 * major + minor` (90 for an H100).
    pub fn sm(&self) -> u32 {
        self.sm
    }

    /// The device's name as the driver reports it (`NVIDIA H200`).
    ///
    /// Errors: [`Error::Kernel`] when the driver cannot say.
    pub fn name(&self) -> Result<String> {
        self.ctx.name().map_err(driver("reading the device name"))
    }

    /// The device's launch limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The stream kernels are launched on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// A timing event recorded on this handle's stream: it completes when
    /// the work queued on the stream before it has. Two of them time the
    /// work queued between them on the device ([`Event::ms_until`]), as
    /// PyTorch's `torch.cuda.Event(enable_timing=True)` does.
    ///
    /// Errors: [`Error::Kernel`] when the driver cannot create or record it.
    pub fn record_event(&self) -> Result<Event> {
        self.stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map(Event).map_err(driver("recording an event"))
    }

    /// The module `m` on this device, loaded on first use: the cubin
    /// [`pick_cubin`] chooses, else its PTX.
    ///
    /// Errors: [`Error::Kernel`] when neither fits the device or the driver
    /// refuses the image (e.g. PTX newer than the driver).
    pub fn module(&self, m: &Module) -> Result<Arc<CudaModule>> {
        let mut cache = self.modules.lock().map_err(|_| Error::Kernel("the module cache is poisoned".into()))?;
        if let Some(loaded) = cache.get(m.name) {
            return Ok(loaded.clone());
        }
        let image = match pick_cubin(m.cubins, self.sm) {
            Some(c) => Ptx::from_binary(c.image.to_vec()),
            None if !m.ptx.is_empty() && !m.ptx.contains('\0') => Ptx::from_src(m.ptx),
            None => {
                let have: Vec<String> = m.cubins.iter().map(|c| format!("sm_{}", c.sm)).collect();
                return Err(Error::Kernel(format!(
                    "module `{}` has no code for sm_{} (cubins: {}; no PTX)",
                    m.name,
                    self.sm,
                    if have.is_empty() { "none".to_string() } else { have.join(", ") }
                )));
            }
        };
        let loaded = self.ctx.load_module(image).map_err(|e| Error::Kernel(format!("loading `{}`: {e}", m.name)))?;
        cache.insert(m.name, loaded.clone());
        Ok(loaded)
    }

    /// Kernel `name` of module `m`, ready for `launch`: its dynamic
    /// shared-memory limit raised to `launch`'s when that is above
    /// [`DEFAULT_DYNAMIC_SMEM_BYTES`], after [`Launch::check`].
    ///
    /// Errors: [`Error::Kernel`] for a launch over the device's limits, a
    /// missing kernel, or a driver failure.
    pub fn prepare(&self, m: &Module, name: &str, launch: &Launch) -> Result<CudaFunction> {
        launch.check(name, &self.limits)?;
        if name.contains('\0') {
            return Err(Error::Kernel(format!("kernel name {name:?} contains NUL")));
        }
        let f = self
            .module(m)?
            .load_function(name)
            .map_err(|e| Error::Kernel(format!("module `{}` has no kernel `{name}`: {e}", m.name)))?;
        if launch.dynamic_smem_bytes > DEFAULT_DYNAMIC_SMEM_BYTES {
            f.set_attribute(
                CUfunction_attribute_enum::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                launch.dynamic_smem_bytes as i32,
            )
            .map_err(driver("raising the dynamic shared-memory limit"))?;
        }
        Ok(f)
    }

    /// Launches kernel `name` of `m` with `args` on this GPU's stream
    /// ([`Gpu::prepare`] first); returns once the launch is queued.
    ///
    /// Errors: those of [`Gpu::prepare`], and [`Error::Kernel`] when the
    /// driver refuses the launch.
    ///
    /// # Safety
    ///
    /// `args` must match the kernel's parameters in number, order and type,
    /// and every pointer must address a live device buffer of this device
    /// with the elements the kernel reads or writes for these arguments and
    /// `launch`, written buffers overlapping no other argument.
    pub unsafe fn launch_raw(&self, m: &Module, name: &str, launch: &Launch, args: &[KernelArg]) -> Result<()> {
        let launch = &launch.on(&self.limits);
        let f = self.prepare(m, name, launch)?;
        let mut b = self.stream.launch_builder(&f);
        for a in args {
            match a {
                KernelArg::Ptr(p) => b.arg(p),
                KernelArg::I32(v) => b.arg(v),
                KernelArg::I64(v) => b.arg(v),
                KernelArg::TensorMap(m) => b.arg(m),
            };
        }
        // SAFETY: the caller's contract.
        unsafe { b.launch(Gpu::config(launch)) }.map(|_| ()).map_err(driver("launching the kernel"))
    }

    /// Queues a whole graph's launches ([`Steps`], e.g. from a generated
    /// `sm80::steps`) on the stream: allocates each temporary (not
    /// initialised: the steps write every byte of one before they read it), then
    /// launches every step in order with its arguments, `tensors[k]` being
    /// the device address of the graph's tensor `k` (inputs then outputs).
    /// Returns once all are queued; the temporaries are freed in stream
    /// order after the last kernel.
    ///
    /// Errors: [`Error::Kernel`] for an argument naming a tensor or
    /// temporary that does not exist (before anything is queued), a failed
    /// allocation, module load or launch.
    ///
    /// # Safety
    ///
    /// `m` must hold every step's kernel, each step's arguments must match
    /// its kernel's parameters (what `tgc` generated them from), and
    /// `tensors` must address live buffers of this device holding what the
    /// kernels read and write at these dims (the checks of a generated
    /// `sm80::check`), outputs overlapping no other tensor; the steps write
    /// every byte of a temporary before any step reads it.
    pub unsafe fn run_steps(&self, m: &Module, steps: &Steps, tensors: &[u64]) -> Result<()> {
        for s in &steps.steps {
            for a in &s.args {
                let tensor = |k: usize| (k >= tensors.len()).then(|| format!("tensor {k} of {}", tensors.len()));
                let temp =
                    |k: usize| (k >= steps.temps.len()).then(|| format!("temporary {k} of {}", steps.temps.len()));
                let missing = match *a {
                    StepArg::Tensor(k) | StepArg::TensorMap(MapArg { buffer: BufferArg::Tensor(k), .. }) => tensor(k),
                    StepArg::Temp(k) | StepArg::TensorMap(MapArg { buffer: BufferArg::Temp(k), .. }) => temp(k),
                    StepArg::I32(_) | StepArg::I64(_) => None,
                };
                if let Some(what) = missing {
                    return Err(Error::Kernel(format!("launch of `{}`: no {what}", s.kernel)));
                }
            }
        }
        // SAFETY: the caller's contract: no step reads a byte of a
        // temporary before a step has written it.
        let alloc = |bytes: usize| unsafe { self.stream.alloc::<u8>(bytes.max(1)) };
        let temps: Vec<CudaSlice<u8>> =
            steps.temps.iter().map(|&b| alloc(b).map_err(driver("allocating a temporary"))).collect::<Result<_>>()?;
        let address = |b: BufferArg| match b {
            BufferArg::Tensor(k) => tensors[k],
            BufferArg::Temp(k) => DeviceArg::<u8>::address(&temps[k]),
        };
        for s in &steps.steps {
            let args: Vec<KernelArg> = s
                .args
                .iter()
                .map(|a| {
                    Ok(match *a {
                        StepArg::Tensor(k) => KernelArg::Ptr(tensors[k]),
                        StepArg::Temp(k) => KernelArg::Ptr(DeviceArg::<u8>::address(&temps[k])),
                        StepArg::I32(v) => KernelArg::I32(v),
                        StepArg::I64(v) => KernelArg::I64(v),
                        StepArg::TensorMap(m) => {
                            let map = TileMap {
                                dtype: m.dtype,
                                dims: m.dims.to_vec(),
                                strides: vec![m.row_stride_bytes],
                                box_dims: m.box_dims.to_vec(),
                                swizzle: if m.swizzle_128b { tma::Swizzle::B128 } else { tma::Swizzle::None },
                            };
                            KernelArg::TensorMap(self.tensor_map(&s.kernel, address(m.buffer), &map)?)
                        }
                    })
                })
                .collect::<Result<_>>()?;
            // SAFETY: the caller's contract; the temporaries are live
            // device allocations of this stream until after the last launch.
            unsafe { self.launch_raw(m, &s.kernel, &s.launch, &args) }?;
        }
        Ok(())
    }

    /// The driver's launch configuration for `launch`.
    pub fn config(launch: &Launch) -> cudarc::driver::LaunchConfig {
        let [gx, gy, gz] = launch.grid;
        let [bx, by, bz] = launch.block;
        cudarc::driver::LaunchConfig {
            grid_dim: (gx, gy, gz),
            block_dim: (bx, by, bz),
            shared_mem_bytes: launch.dynamic_smem_bytes,
        }
    }

    /// A device copy of `host`.
    ///
    /// Errors: [`Error::Kernel`] when the allocation or copy fails.
    pub fn upload<T: DeviceRepr>(&self, host: &[T]) -> Result<CudaSlice<T>> {
        self.stream.clone_htod(host).map_err(driver("copying to the device"))
    }

    /// `len` zeroed elements on the device.
    ///
    /// Errors: [`Error::Kernel`] when the allocation fails.
    pub fn zeros<T: DeviceRepr + ValidAsZeroBits>(&self, len: usize) -> Result<CudaSlice<T>> {
        self.stream.alloc_zeros(len).map_err(driver("allocating device memory"))
    }

    /// A host copy of `dev`, after the work queued on the stream.
    ///
    /// Errors: [`Error::Kernel`] when a kernel queued before failed or the
    /// copy fails.
    pub fn download<T: DeviceRepr>(&self, dev: &CudaSlice<T>) -> Result<Vec<T>> {
        self.stream.clone_dtoh(dev).map_err(driver("copying from the device"))
    }

    /// Copies `host` into `dev`, queued on the stream (a host slice, not
    /// page-locked, is copied before the call returns).
    ///
    /// Errors: [`Error::LengthMismatch`] when the lengths differ;
    /// [`Error::Kernel`] when the copy fails.
    pub fn copy_to_device<T: DeviceRepr>(&self, host: &[T], dev: &mut CudaSlice<T>) -> Result<()> {
        same_len("device buffer", DeviceSlice::len(dev), host.len())?;
        self.stream.memcpy_htod(host, dev).map_err(driver("copying to the device"))
    }

    /// Copies `dev` into `host`, queued on the stream: `host` holds the
    /// values after the next [`Gpu::synchronize`].
    ///
    /// Errors: [`Error::LengthMismatch`] when the lengths differ;
    /// [`Error::Kernel`] when the copy fails.
    pub fn copy_to_host<T: DeviceRepr>(&self, dev: &CudaSlice<T>, host: &mut [T]) -> Result<()> {
        same_len("host buffer", host.len(), DeviceSlice::len(dev))?;
        self.stream.memcpy_dtoh(dev, host).map_err(driver("copying from the device"))
    }

    /// Waits for the work queued on the stream.
    ///
    /// Errors: [`Error::Kernel`] with the driver's error of a failed kernel.
    pub fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().map_err(driver("synchronising the stream"))
    }

    /// A device copy of a model's ConstPool: one allocation, one copy of
    /// the host pool's bytes, each weight at its host offset.
    ///
    /// Errors: [`Error::Kernel`] when the allocation or copy fails.
    pub fn upload_pool(&self, pool: &ConstPool) -> Result<DeviceConstPool> {
        let bytes = self.upload(pool.as_bytes())?;
        let offsets = (0..pool.specs().len()).map(|k| pool.offset(k)).collect();
        Ok(DeviceConstPool { bytes, offsets, specs: pool.specs() })
    }

    /// Records the work `body` queues on this handle's stream as a CUDA
    /// Graph instead of running it (stream capture, thread-local mode), for
    /// [`Replay::replay`]. The body should have run once uncaptured first:
    /// loading a module and raising a kernel's shared-memory limit are not
    /// stream work and cannot be captured. A replay reads and writes the
    /// buffers the body used, at the same addresses: they must outlive the
    /// [`Replay`].
    ///
    /// The handle of [`Gpu::new`] works on the device's legacy default
    /// stream, which cannot be captured: capture on a handle of
    /// [`Gpu::new_stream`].
    ///
    /// Errors: the body's error (the capture is ended and dropped);
    /// [`Error::Kernel`] on the default stream, when the driver refuses
    /// the capture, or when the body queued nothing.
    pub fn capture(&self, body: impl FnOnce(&Gpu) -> Result<()>) -> Result<Replay> {
        if self.stream.cu_stream().is_null() {
            return Err(Error::Kernel(
                "the default stream cannot be captured as a CUDA Graph: capture on a Gpu::new_stream handle".into(),
            ));
        }
        self.stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(driver("beginning a stream capture"))?;
        let ran = body(self);
        let graph = self.stream.end_capture(CUgraphInstantiate_flags(0));
        ran?;
        match graph.map_err(driver("ending a stream capture"))? {
            Some(graph) => Ok(Replay { graph }),
            None => Err(Error::Kernel("the captured body queued no work".into())),
        }
    }
}

/// A timing event on a stream ([`Gpu::record_event`]).
pub struct Event(CudaEvent);

impl Event {
    /// Milliseconds of device time from this event to `end` (recorded
    /// later on the same stream), waiting for both to complete. The
    /// driver's resolution is about 0.5 µs (`cuEventElapsedTime`).
    ///
    /// Errors: [`Error::Kernel`] when the events belong to different
    /// contexts or the work before them failed.
    pub fn ms_until(&self, end: &Event) -> Result<f64> {
        self.0.elapsed_ms(&end.0).map(f64::from).map_err(driver("reading the time between two events"))
    }
}

/// `Ok` when a copy's two sides have the same element count.
fn same_len(what: &str, got: usize, expected: usize) -> Result<()> {
    if got == expected {
        Ok(())
    } else {
        Err(Error::LengthMismatch { arg: what.into(), expected, got })
    }
}

/// A model's ConstPool on the device ([`Gpu::upload_pool`]).
pub struct DeviceConstPool {
    bytes: CudaSlice<u8>,
    offsets: Vec<usize>,
    specs: &'static [WeightSpec],
}

impl DeviceConstPool {
    /// The pool's size in bytes (the host pool's).
    pub fn size_bytes(&self) -> usize {
        DeviceSlice::len(&self.bytes)
    }

    /// Weight `k` as elements of `T`, a type of its dtype's size (`f32`
    /// for f32, `u16` for f16 and bf16 bits…); `None` when `k` is out of
    /// range or the sizes differ. The view starts at a multiple of 64
    /// bytes ([`crate::model::POOL_ALIGN`]).
    pub fn weight<T: DeviceRepr>(&self, k: usize) -> Option<CudaView<'_, T>> {
        let spec = self.specs.get(k)?;
        if std::mem::size_of::<T>() != spec.dtype.size_bytes() {
            return None;
        }
        let (at, len) = (self.offsets[k], spec.bytes()?);
        let view = self.bytes.slice(at..at + len);
        // SAFETY: the view holds `elements × size_of::<T>()` bytes of the
        // weight, which the host pool filled with valid values of its dtype
        // (any bit pattern of f32/i32/f16/bf16; bool checked 0 or 1), and
        // its start is 64-byte aligned.
        unsafe { view.transmute::<T>(spec.elements()?) }
    }
}

/// A launch sequence captured as a CUDA Graph ([`Gpu::capture`]).
pub struct Replay {
    graph: CudaGraph,
}

impl Replay {
    /// Queues the captured work again on the capturing stream, as one
    /// graph launch.
    ///
    /// Errors: [`Error::Kernel`] when the driver refuses the launch.
    pub fn replay(&self) -> Result<()> {
        self.graph.launch().map_err(driver("replaying a CUDA Graph"))
    }
}

/// One captured graph per shape cluster (`000` §8): the first run of a
/// cluster runs its body uncaptured (loading what it needs), the second
/// captures it, and every later one replays the capture.
pub struct Graphs<K> {
    seen: HashMap<K, Option<Replay>>,
}

impl<K: std::hash::Hash + Eq> Default for Graphs<K> {
    fn default() -> Graphs<K> {
        Graphs { seen: HashMap::new() }
    }
}

impl<K: std::hash::Hash + Eq> Graphs<K> {
    /// Runs `body` for cluster `key` on `gpu`: directly the first time,
    /// captured (then replayed) the second, replayed after that. The body
    /// must queue the same work on the same buffers every time.
    ///
    /// Errors: the body's or the capture's.
    pub fn run(&mut self, gpu: &Gpu, key: K, body: impl FnOnce(&Gpu) -> Result<()>) -> Result<()> {
        match self.seen.get(&key) {
            Some(Some(replay)) => replay.replay(),
            Some(None) => {
                let replay = gpu.capture(body)?;
                replay.replay()?;
                self.seen.insert(key, Some(replay));
                Ok(())
            }
            None => {
                body(gpu)?;
                self.seen.insert(key, None);
                Ok(())
            }
        }
    }

    /// The clusters captured so far.
    pub fn captured(&self) -> usize {
        self.seen.values().filter(|r| r.is_some()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The GPU tier's rules (`scripts/gpu_tests.sh`).
    mod gpu_tier {
        include!("../../../tests/support/gpu_tier.rs");
    }

    const A: &[u8] = b"a";

    #[test]
    fn cubins_are_picked_by_major_version_then_highest_minor() {
        let cubins = [Cubin { sm: 80, image: A }, Cubin { sm: 86, image: A }, Cubin { sm: 90, image: A }];
        let pick = |sm| pick_cubin(&cubins, sm).map(|c| c.sm);
        assert_eq!(pick(80), Some(80));
        assert_eq!(pick(89), Some(86));
        assert_eq!(pick(90), Some(90));
        assert_eq!(pick(100), None, "sm_100 needs PTX");
        assert_eq!(pick(75), None);
    }

    #[test]
    fn launches_over_the_limits_are_refused_with_the_limit() {
        let limits = Limits {
            max_threads_per_block: 1024,
            max_smem_per_block_optin: 232_448,
            max_grid: [1 << 31, 65535, 65535],
            sm_count: 132,
        };
        let ok =
            Launch { grid: [10, 1, 1], block: [128, 1, 1], dynamic_smem_bytes: 100_000, persistent: false, cluster: 1 };
        assert_eq!(ok.check("k", &limits), Ok(()));
        for (launch, want) in [
            (Launch { block: [1024, 2, 1], ..ok }, "2048 threads per block > 1024"),
            (Launch { grid: [1, 70000, 1], ..ok }, "grid extent 70000 on axis 1 > 65535"),
            (Launch { dynamic_smem_bytes: 300_000, ..ok }, "300000 bytes of dynamic shared memory"),
            (Launch { grid: [0, 1, 1], ..ok }, "empty grid"),
        ] {
            let e = launch.check("gemm", &limits).unwrap_err().to_string();
            assert!(e.contains("launch of `gemm`") && e.contains(want), "{e}");
        }
    }

    /// `ADD_ONE_PTX`'s launch over `n` elements: 128 threads a block.
    fn add_one_launch(n: u32) -> Launch {
        Launch {
            grid: [n.div_ceil(128), 1, 1],
            block: [128, 1, 1],
            dynamic_smem_bytes: 0,
            persistent: false,
            cluster: 1,
        }
    }

    /// A persistent grid planned for the sm90 row's 132 SMs runs one block
    /// per SM of a smaller part (an H100 PCIe's 114) and keeps a grid that
    /// already fits; other launches keep their grid.
    #[test]
    fn a_persistent_grid_is_capped_at_the_device_sms() {
        let limits = |sm_count| Limits {
            max_threads_per_block: 1024,
            max_smem_per_block_optin: 232_448,
            max_grid: [1 << 31, 65535, 65535],
            sm_count,
        };
        let planned =
            Launch { grid: [132, 1, 1], block: [384, 1, 1], dynamic_smem_bytes: 200_000, persistent: true, cluster: 1 };
        assert_eq!(planned.on(&limits(114)).grid, [114, 1, 1]);
        assert_eq!(planned.on(&limits(132)).grid, [132, 1, 1]);
        assert_eq!(Launch { grid: [7, 1, 1], ..planned }.on(&limits(114)).grid, [7, 1, 1]);
        assert_eq!(planned.on(&limits(0)).grid, [1, 1, 1], "a device reporting no SMs still gets one block");
        let fixed = Launch { persistent: false, ..planned };
        assert_eq!(fixed.on(&limits(114)), fixed);
        // Pairs of CTAs: whole clusters only, at least one.
        let pairs = Launch { cluster: 2, ..planned };
        assert_eq!(pairs.on(&limits(115)).grid, [114, 1, 1]);
        assert_eq!(pairs.on(&limits(1)).grid, [2, 1, 1]);
        let limits = limits(132);
        assert!(pairs.check("k", &limits).is_ok());
        let odd = Launch { grid: [131, 1, 1], ..pairs }.check("k", &limits).unwrap_err().to_string();
        assert!(odd.contains("not a multiple of its cluster's 2 CTAs"), "{odd}");
    }

    /// A buffer with a chosen element count and address, for the checks.
    struct Fake(usize, u64);

    impl DeviceArg<f32> for Fake {
        fn elems(&self) -> usize {
            self.0
        }
        fn address(&self) -> u64 {
            self.1
        }
    }

    #[test]
    fn device_arguments_are_checked_for_length_then_alignment() {
        assert_eq!(check_arg("x", &Fake(6, 0x1000), 6, 16), Ok(0x1000));
        let e = check_arg("x", &Fake(5, 0x1000), 6, 16).unwrap_err();
        assert_eq!(e, Error::LengthMismatch { arg: "x".into(), expected: 6, got: 5 });
        let e = check_arg("w", &Fake(6, 0x1008), 6, 16).unwrap_err();
        assert_eq!(e, Error::Misaligned { arg: "w".into(), align: 16 });
        assert_eq!(check_dim("M", 200, 200), Ok(200));
        assert_eq!(check_dim("M", 100, 200), Err(Error::DimMismatch { dim: "M".into(), expected: 200, got: 100 }));
        assert!(matches!(check_dim("M", 0, 200), Err(Error::InvalidDim { .. })));
        assert!(check_host_len("y", 3, 4).is_err() && check_host_len("y", 4, 4).is_ok());
    }

    /// A tiny PTX kernel (`y[i] = x[i] + 1.0` for `i < n`).
    const ADD_ONE_PTX: &str = "
.version 7.0
.target sm_80
.address_size 64
.visible .entry add_one(.param .u64 x, .param .u64 y, .param .u32 n)
{
    .reg .pred p;
    .reg .b32 r<5>;
    .reg .f32 f<3>;
    .reg .b64 a<6>;
    ld.param.u64 a0, [x];
    ld.param.u64 a1, [y];
    ld.param.u32 r0, [n];
    mov.u32 r1, %ctaid.x;
    mov.u32 r2, %ntid.x;
    mov.u32 r3, %tid.x;
    mad.lo.s32 r4, r1, r2, r3;
    setp.ge.u32 p, r4, r0;
    @p bra DONE;
    cvta.to.global.u64 a2, a0;
    cvta.to.global.u64 a3, a1;
    mul.wide.u32 a4, r4, 4;
    add.s64 a5, a2, a4;
    ld.global.f32 f0, [a5];
    add.f32 f1, f0, 0f3F800000;
    add.s64 a5, a3, a4;
    st.global.f32 [a5], f1;
DONE:
    ret;
}
";

    /// Without a driver (CI): `NoDevice`. With a GPU (the device tier):
    /// the PTX fallback loads, the kernel runs, and a missing kernel or an
    /// oversized launch is an error, not a panic.
    #[test]
    fn no_device_without_a_driver_and_a_ptx_kernel_with_one() {
        let gpu = match Gpu::new(0) {
            Err(Error::NoDevice(why)) if gpu_tier::required() => {
                panic!("TGC_GPU=1 but there is no GPU: {why}")
            }
            Err(Error::NoDevice(why)) => {
                assert!(!driver_present() || why.contains("visible") || why.contains("driver"), "{why}");
                eprintln!("skipped the GPU half of this test: {why}");
                return;
            }
            other => other.expect("a GPU is present"),
        };
        let m = Module { name: "add_one_test", cubins: &[], ptx: ADD_ONE_PTX };
        let n = 1000u32;
        let launch = add_one_launch(n);
        let f = gpu.prepare(&m, "add_one", &launch).unwrap();
        let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
        let dx = gpu.upload(&x).unwrap();
        let mut dy = gpu.zeros::<f32>(n as usize).unwrap();
        let mut args = gpu.stream().launch_builder(&f);
        args.arg(&dx).arg(&mut dy).arg(&n);
        // SAFETY: the kernel reads n f32 from x and writes n f32 to y, both n long.
        unsafe { args.launch(Gpu::config(&launch)) }.unwrap();
        let y = gpu.download(&dy).unwrap();
        assert!(y.iter().zip(&x).all(|(y, x)| *y == x + 1.0));
        assert!(gpu.prepare(&m, "no_such_kernel", &launch).is_err());
        let huge = Launch { dynamic_smem_bytes: u32::MAX, ..launch };
        assert!(gpu.prepare(&m, "add_one", &huge).is_err());

        // A second stream: the module is not loaded again, and its kernel
        // runs on that stream's buffers.
        let other = gpu.new_stream().unwrap();
        assert!(Arc::ptr_eq(&other.module(&m).unwrap(), &gpu.module(&m).unwrap()));
        let f = other.prepare(&m, "add_one", &launch).unwrap();
        let dx = other.upload(&y).unwrap();
        let mut dz = other.zeros::<f32>(n as usize).unwrap();
        let mut args = other.stream().launch_builder(&f);
        args.arg(&dx).arg(&mut dz).arg(&n);
        // SAFETY: as above.
        unsafe { args.launch(Gpu::config(&launch)) }.unwrap();
        let z = other.download(&dz).unwrap();
        assert!(z.iter().zip(&x).all(|(z, x)| *z == x + 2.0));
        gpu_tier::compared("tgc-runtime cuda: a PTX kernel on two streams");
    }

    /// Device 0, or `None` after saying that the GPU half of the test
    /// (`what`) is skipped; with `TGC_GPU=1` a missing GPU fails the test.
    fn gpu_or_skip(what: &str) -> Option<Gpu> {
        match Gpu::new(0) {
            Err(Error::NoDevice(why)) if gpu_tier::required() => {
                panic!("TGC_GPU=1 but there is no GPU: {why}")
            }
            Err(Error::NoDevice(why)) => {
                eprintln!("skipped the GPU half of this test ({what}): {why}");
                None
            }
            other => Some(other.expect("a GPU is present")),
        }
    }

    /// A model's ConstPool on the device and its runs replayed from CUDA
    /// Graphs. Without a driver (CI): `NoDevice` before any upload or
    /// capture. With a GPU: the uploaded weights are read by a kernel at
    /// their views, a chain of launches captured and replayed gives what
    /// the launches give, and the time of queuing 32 launches against one
    /// replay of them is printed (the launch overhead a graph saves).
    #[test]
    fn const_pool_upload_and_graph_replay_or_no_device() {
        use crate::model::{write_weight, ConstPool, WeightSpec};
        static SPECS: [WeightSpec; 2] = [
            WeightSpec { name: "w", dtype: crate::DType::F32, shape: &[1000] },
            WeightSpec { name: "k", dtype: crate::DType::I32, shape: &[3] },
        ];
        let w: Vec<f32> = (0..1000).map(|i| i as f32 * 0.25).collect();
        let pool = ConstPool::load(&SPECS, &mut |spec: &WeightSpec, dst: &mut [u8]| match spec.name {
            "w" => write_weight(spec, dst, &w),
            _ => write_weight(spec, dst, &[1i32, 2, 3]),
        })
        .unwrap();
        let Some(gpu) = gpu_or_skip("ConstPool upload, CUDA Graph replay") else { return };
        // The default stream cannot be captured; a stream of its own can.
        assert!(gpu.capture(|_| Ok(())).is_err());
        let gpu = gpu.new_stream().unwrap();
        let dev = gpu.upload_pool(&pool).unwrap();
        assert_eq!(dev.size_bytes(), pool.size_bytes());
        assert!(dev.weight::<u16>(0).is_none() && dev.weight::<f32>(2).is_none());
        let wv = dev.weight::<f32>(0).unwrap();
        let m = Module { name: "add_one_test", cubins: &[], ptx: ADD_ONE_PTX };
        let n = 1000u32;
        let launch = add_one_launch(n);
        let f = gpu.prepare(&m, "add_one", &launch).unwrap();
        let mut a = gpu.zeros::<f32>(n as usize).unwrap();
        let mut b = gpu.zeros::<f32>(n as usize).unwrap();
        // Copies into and out of kept buffers, lengths checked first.
        gpu.copy_to_device(&w, &mut b).unwrap();
        let mut back = vec![0.0f32; n as usize];
        gpu.copy_to_host(&b, &mut back).unwrap();
        gpu.synchronize().unwrap();
        assert_eq!(back, w);
        assert!(matches!(gpu.copy_to_device(&w[1..], &mut b), Err(Error::LengthMismatch { .. })));
        assert!(matches!(gpu.copy_to_host(&b, &mut back[1..]), Err(Error::LengthMismatch { .. })));
        // a = w + 1, then 31 more steps back and forth: a or b = w + 32.
        let chain = |gpu: &Gpu, a: &mut CudaSlice<f32>, b: &mut CudaSlice<f32>| -> Result<()> {
            let mut args = gpu.stream().launch_builder(&f);
            args.arg(&wv).arg(&mut *a).arg(&n);
            // SAFETY: the kernel reads n f32 and writes n f32; all are n long.
            unsafe { args.launch(Gpu::config(&launch)) }.map_err(driver("launch"))?;
            for step in 1..32 {
                let (src, dst) = if step % 2 == 1 { (&*a, &mut *b) } else { (&*b, &mut *a) };
                let mut args = gpu.stream().launch_builder(&f);
                args.arg(src).arg(dst).arg(&n);
                // SAFETY: as above.
                unsafe { args.launch(Gpu::config(&launch)) }.map_err(driver("launch"))?;
            }
            Ok(())
        };
        let mut graphs = Graphs::default();
        let expect = |v: Vec<f32>| assert!(v.iter().zip(&w).all(|(v, w)| *v == w + 32.0), "{:?}", &v[..4]);
        for run in 0..3 {
            graphs.run(&gpu, "n=1000", |gpu| chain(gpu, &mut a, &mut b)).unwrap();
            expect(gpu.download(&b).unwrap());
            assert_eq!(graphs.captured(), usize::from(run >= 1));
        }
        // Launch overhead: 32 launches queued one by one against one replay.
        let replay = gpu.capture(|gpu| chain(gpu, &mut a, &mut b)).unwrap();
        let time = |f: &mut dyn FnMut()| {
            gpu.synchronize().unwrap();
            let t0 = std::time::Instant::now();
            for _ in 0..100 {
                f();
            }
            gpu.synchronize().unwrap();
            t0.elapsed().as_secs_f64() * 1e6 / 100.0
        };
        let direct = time(&mut || chain(&gpu, &mut a, &mut b).unwrap());
        let replayed = time(&mut || replay.replay().unwrap());
        expect(gpu.download(&b).unwrap());
        eprintln!("32 launches: {direct:.1} µs queued one by one, {replayed:.1} µs as one CUDA Graph replay");
        gpu_tier::compared("tgc-runtime cuda: ConstPool upload, CUDA Graph replay");
    }

    /// One TMA box load (sm_90): thread 0 arms an mbarrier for 512 bytes and
    /// issues `cp.async.bulk.tensor` with a map from [`Gpu::tensor_map`]
    /// passed by value; every thread waits on the barrier's phase and
    /// writes one element of the 8×16 f32 box. Lanes are one per element.
    const TMA_BOX_PTX: &str = r".version 8.0
.target sm_90
.address_size 64

.visible .entry tma_box(
    .param .align 64 .b8 tma_box_param_0[128],
    .param .u64 tma_box_param_1,
    .param .u32 tma_box_param_2,
    .param .u32 tma_box_param_3
)
{
    .reg .pred p<2>;
    .reg .b32 r<8>;
    .reg .b64 rd<6>;
    .reg .f32 f0;
    .shared .align 128 .b8 tile[512];
    .shared .align 8 .b64 bar;

    mov.u32 r0, %tid.x;
    mov.u32 r1, bar;
    mov.u32 r2, tile;
    setp.eq.u32 p0, r0, 0;
    @!p0 bra SYNC;
    mbarrier.init.shared::cta.b64 [r1], 1;
    fence.mbarrier_init.release.cluster;
SYNC:
    bar.sync 0;
    @!p0 bra WAIT;
    mov.b64 rd0, tma_box_param_0;
    cvta.param.u64 rd1, rd0;
    ld.param.u32 r3, [tma_box_param_2];
    ld.param.u32 r4, [tma_box_param_3];
    mbarrier.arrive.expect_tx.shared::cta.b64 _, [r1], 512;
    cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [r2], [rd1, {r3, r4}], [r1];
WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 p1, [r1], 0;
    @!p1 bra WAIT;
    shl.b32 r5, r0, 2;
    add.u32 r6, r2, r5;
    ld.shared.f32 f0, [r6];
    ld.param.u64 rd2, [tma_box_param_1];
    cvta.to.global.u64 rd3, rd2;
    cvt.u64.u32 rd4, r5;
    add.s64 rd5, rd3, rd4;
    st.global.f32 [rd5], f0;
    ret;
}
";

    /// A tensor map made here and passed by value loads the box it
    /// describes, with the part of the box outside the tensor zero-filled.
    /// Without a driver (CI): `NoDevice`; on a GPU older than sm_90 (no
    /// TMA) the GPU half is reported skipped.
    #[test]
    fn a_tensor_map_loads_its_box_with_zeros_outside_or_no_device() {
        let Some(gpu) = gpu_or_skip("TMA tensor map") else { return };
        if gpu.sm() < 90 {
            eprintln!("skipped the GPU half of this test: sm_{} has no TMA (sm_90 and newer)", gpu.sm());
            return;
        }
        // A 20 × 40 f32 tensor holding its element indices.
        let (rows, cols) = (20usize, 40usize);
        let x: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
        let dx = gpu.upload(&x).unwrap();
        let map = TileMap {
            dtype: crate::DType::F32,
            dims: vec![cols as u64, rows as u64],
            strides: vec![(cols * 4) as u64],
            box_dims: vec![16, 8],
            swizzle: Swizzle::None,
        };
        let tm = gpu.tensor_map("x", DeviceArg::<f32>::address(&dx), &map).unwrap();
        let misaligned = gpu.tensor_map("x", DeviceArg::<f32>::address(&dx) + 4, &map);
        assert_eq!(misaligned, Err(Error::Misaligned { arg: "x".into(), align: 16 }));
        let m = Module { name: "tma_box_test", cubins: &[], ptx: TMA_BOX_PTX };
        let launch =
            Launch { grid: [1, 1, 1], block: [128, 1, 1], dynamic_smem_bytes: 0, persistent: false, cluster: 1 };
        for (c0, c1) in [(0usize, 0usize), (32, 16)] {
            let dy = gpu.zeros::<f32>(128).unwrap();
            let args = [
                KernelArg::TensorMap(tm),
                KernelArg::Ptr(DeviceArg::<f32>::address(&dy)),
                KernelArg::I32(c0 as i32),
                KernelArg::I32(c1 as i32),
            ];
            // SAFETY: the kernel takes (map, f32*, int, int) and writes 128
            // f32 to y; the map describes x, live until after the download.
            unsafe { gpu.launch_raw(&m, "tma_box", &launch, &args) }.unwrap();
            let y = gpu.download(&dy).unwrap();
            for (k, got) in y.iter().enumerate() {
                let (r, c) = (c1 + k / 16, c0 + k % 16);
                let want = if r < rows && c < cols { (r * cols + c) as f32 } else { 0.0 };
                assert_eq!(*got, want, "box at ({c0}, {c1}), element {k} (row {r}, column {c})");
            }
        }
        gpu_tier::compared("tgc-runtime cuda: a TMA box load (sm_90)");
    }
}

//! `tgc run --backend cuda` (feature `cuda`, on by default): a graph with
//! every dim bound, compiled for the device's target ([`device_target`]:
//! sm90 on a 9.x device, else sm80), loaded on a GPU, run on host inputs,
//! its outputs copied back. Also used by the `bench_gpu` example (through
//! `#[path]`), which times [`Compiled::run`].
//!
//! The graph becomes `gpu::simt`'s program for that target: the tensor-core
//! kernel for a graph that is one GEMM + epilogue, else one SIMT kernel per
//! region; its `steps` (launched in order on one stream by
//! `Gpu::run_steps`, with uninitialised device temporaries) are those a
//! generated `sm80::launch` runs.

use tgc_core::gpu::{driver, program};
use tgc_core::tiny::Graph;
use tgc_core::{diag, Diagnostic};
use tgc_runtime::cuda::{Cubin, CudaSlice, DeviceArg, Gpu, Module, Steps};
use tgc_runtime::HostTensor;

/// Why a GPU run failed: a compiler diagnostic or a runtime error.
#[derive(Debug)]
pub enum GpuError {
    /// The graph cannot be compiled for the GPU (or the toolchain is missing).
    Diag(Diagnostic),
    /// No device, or a failed copy, load, launch or kernel.
    Runtime(tgc_runtime::Error),
}

impl From<tgc_runtime::Error> for GpuError {
    fn from(e: tgc_runtime::Error) -> GpuError {
        GpuError::Runtime(e)
    }
}

impl From<Diagnostic> for GpuError {
    fn from(d: Diagnostic) -> GpuError {
        GpuError::Diag(d)
    }
}

/// The target row a device of architecture `sm` (`10 * major + minor`)
/// gets: sm90 (the MMA template's `wgmma` branch, compiled for sm_90a) on
/// 9.x, sm80 elsewhere (its PTX JIT-compiles on newer devices).
pub fn device_target(sm: u32) -> &'static tgc_core::plan::Target {
    if sm / 10 == 9 {
        &tgc_core::plan::target::SM90
    } else {
        &tgc_core::plan::target::SM80
    }
}

/// A graph compiled for a GPU target and loaded on a GPU: its launches at the
/// bound shape and the device buffers of its inputs and outputs.
pub struct Compiled<'g> {
    gpu: &'g Gpu,
    module: Module,
    steps: Steps,
    /// Inputs then outputs, in graph order.
    buffers: Vec<CudaSlice<u8>>,
    n_inputs: usize,
    /// Host tensors of the outputs' dtypes and shapes, filled by
    /// [`Compiled::download`].
    outputs: Vec<HostTensor>,
}

/// A dim as a concrete `usize`, or an `Internal` error.
fn concrete(d: &tgc_core::sym::Dim) -> Result<usize, GpuError> {
    d.as_int()
        .and_then(|v| usize::try_from(v).ok())
        .ok_or_else(|| GpuError::Diag(diag!(Internal, "size {d} is not concrete")))
}

impl<'g> Compiled<'g> {
    /// Compiles `bound` (every dim bound; `name` makes the module's cache
    /// key unique) with [`driver::lower_program_with`] for the device's
    /// target ([`device_target`]), a template's plans ranked by `estimator`
    /// (the analytic model, `--algo` pins, or one plan pinned by
    /// `bench_gpu --plans`), and allocates its inputs and outputs on `gpu`.
    ///
    /// Errors: the compiler's diagnostics (`Io` without the CUDA
    /// toolchain); `Kernel` for a failed allocation.
    pub fn with_estimator(
        gpu: &'g Gpu,
        bound: &Graph,
        name: &str,
        estimator: &dyn tgc_core::plan::cost::Estimator,
    ) -> Result<Compiled<'g>, GpuError> {
        Compiled::for_target(gpu, bound, name, estimator, device_target(gpu.sm()))
    }

    /// [`Compiled::with_estimator`] for the target row `target` (`bench_gpu`
    /// runs the sm80 template on a 9.x device beside the sm90 one); the
    /// cubin is for the newest architecture of the program's kernels, its
    /// PTX the fallback elsewhere.
    pub fn for_target(
        gpu: &'g Gpu,
        bound: &Graph,
        name: &str,
        estimator: &dyn tgc_core::plan::cost::Estimator,
        target: &tgc_core::plan::Target,
    ) -> Result<Compiled<'g>, GpuError> {
        let prog = driver::lower_program_with(bound, target, estimator)?;
        Compiled::from_program(gpu, bound, prog, &format!("{}:{name}", target.name))
    }

    /// [`Compiled::for_target`] of the program `prog` of `bound` already
    /// lowered (`tgc tune --target` pins a plan in it); `name` makes the
    /// module's cache key unique in the process.
    ///
    /// Errors: as [`Compiled::for_target`].
    pub fn from_program(
        gpu: &'g Gpu,
        bound: &Graph,
        prog: program::GpuProgram,
        name: &str,
    ) -> Result<Compiled<'g>, GpuError> {
        // Every dim is bound: the program's symbols, if any, have no value.
        if let Some(s) = prog.symbols.first() {
            return Err(GpuError::Diag(diag!(UnboundSymbol, "symbol `{s}` has no value")));
        }
        let steps = prog.steps(&[])?;
        let mut buffers = Vec::new();
        let mut outputs = Vec::new();
        let alloc = |bytes: usize| -> Result<CudaSlice<u8>, GpuError> { Ok(gpu.zeros::<u8>(bytes.max(1))?) };
        for id in bound.inputs() {
            let n: usize = bound.shape(id).iter().map(concrete).product::<Result<usize, _>>()?;
            buffers.push(alloc(n * bound.dtype(id).size_bytes())?);
        }
        for o in &bound.outputs {
            let shape: Vec<usize> = bound.shape(o.node).iter().map(concrete).collect::<Result<_, _>>()?;
            let t = HostTensor::zeros(bound.dtype(o.node), &shape)?;
            buffers.push(alloc(t.bytes().len())?);
            outputs.push(t);
        }
        let kernels = prog.kernels();
        let (_, compiled) = tgc_core::pipeline::compile_kernels(&kernels, &format!("{}.cu", prog.name))?;
        let sm = match kernels.iter().map(|k| k.arch).max() {
            Some(tgc_core::gpu::dialect::Arch::Sm90) => 90,
            Some(tgc_core::gpu::dialect::Arch::Sm80) | None => 80,
        };
        // The module lives until the process ends: a command or a benchmark
        // loads a handful.
        let module = Module {
            name: Box::leak(format!("{}:{name}", prog.name).into_boxed_str()),
            cubins: Box::leak(vec![Cubin { sm, image: Box::leak(compiled.cubin.into_boxed_slice()) }].into()),
            ptx: Box::leak(compiled.ptx.into_boxed_str()),
        };
        Ok(Compiled { gpu, module, steps, buffers, n_inputs: bound.inputs().len(), outputs })
    }

    /// Copies `inputs` (graph order, each its input's dtype and shape) to
    /// the device.
    ///
    /// Errors: `ShapeMismatch` for a tensor of another byte size; `Kernel`
    /// for a failed copy.
    pub fn upload(&mut self, inputs: &[HostTensor]) -> Result<(), GpuError> {
        for (b, t) in inputs.iter().enumerate().take(self.n_inputs) {
            let want = DeviceArg::<u8>::elems(&self.buffers[b]);
            if t.bytes().len() != want && !(t.bytes().is_empty() && want == 1) {
                return Err(GpuError::Runtime(tgc_runtime::Error::ShapeMismatch {
                    what: "input bytes".into(),
                    expected: want.to_string(),
                    got: t.bytes().len().to_string(),
                }));
            }
            self.buffers[b] = self.gpu.upload(t.bytes())?;
        }
        Ok(())
    }

    /// Queues every kernel once, in order, with fresh temporaries.
    ///
    /// Errors: `Kernel` when loading, an allocation or a launch fails.
    pub fn run(&mut self) -> Result<(), GpuError> {
        let addresses: Vec<u64> = self.buffers.iter().map(DeviceArg::<u8>::address).collect();
        // SAFETY: the steps were made from the program compiled into this
        // module; every buffer has the bytes of its tensor at the bound
        // shape (inputs checked by `upload`), in separate driver
        // allocations (256-byte aligned) on this GPU's stream.
        unsafe { self.gpu.run_steps(&self.module, &self.steps, &addresses) }?;
        Ok(())
    }

    /// Waits for the queued work and copies the outputs back (graph order).
    ///
    /// Errors: `Kernel` with the driver's error of a failed kernel or copy.
    pub fn download(&mut self) -> Result<Vec<HostTensor>, GpuError> {
        self.gpu.synchronize()?;
        let mut out = Vec::new();
        for (k, t) in self.outputs.iter_mut().enumerate() {
            let bytes = self.gpu.download(&self.buffers[self.n_inputs + k])?;
            let n = t.bytes().len();
            t.bytes_mut().copy_from_slice(&bytes[..n]);
            out.push(t.clone());
        }
        Ok(out)
    }
}

/// The outputs of `bound` (every dim bound) on `inputs` (graph order),
/// computed on GPU 0. The device is opened first, so a machine without a
/// GPU gets `NoDevice` before anything is compiled.
///
/// Errors: those of [`Gpu::new`] and [`Compiled`]'s steps.
pub fn run_cuda(
    bound: &Graph,
    inputs: &[HostTensor],
    estimator: &dyn tgc_core::plan::cost::Estimator,
) -> Result<Vec<HostTensor>, GpuError> {
    let gpu = Gpu::new(0)?;
    let mut c = Compiled::with_estimator(&gpu, bound, "run", estimator)?;
    c.upload(inputs)?;
    c.run()?;
    c.download()
}

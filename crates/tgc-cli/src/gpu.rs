//! `tgc run --backend cuda` (feature `cuda`, on by default): a graph with
//! every dim bound, compiled for sm80, loaded on a GPU, run on host inputs,
//! its outputs copied back. Also used by the `bench_gpu` example (through
//! `#[path]`), which times [`Compiled::run`].
//!
//! A graph that is one GEMM + epilogue gets the tensor-core kernel
//! (`tgc_core::gpu::lower`, bound by `gpu::launch::gemm_launch`); any other
//! graph the SIMT kernels of `gpu::simt` (one per region, launched in order
//! on one stream, with device temporaries for the buffers between them).

use tgc_core::cpu::loop_ir::Role;
use tgc_core::gpu::ir::ParamKind;
use tgc_core::gpu::launch::{gemm_launch, Binding};
use tgc_core::gpu::simt::{self, LaunchArg};
use tgc_core::tiny::Graph;
use tgc_core::{diag, pipeline, Diagnostic};
use tgc_runtime::cuda::{Cubin, CudaSlice, DeviceArg, Gpu, KernelArg, Launch, Module};
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

/// Where a kernel argument comes from.
#[derive(Clone, Copy, Debug)]
enum Arg {
    /// Device buffer `k` of [`Compiled::buffers`].
    Buffer(usize),
    I32(i32),
    I64(i64),
}

/// One kernel launch of a compiled graph.
struct Step {
    symbol: String,
    args: Vec<Arg>,
    launch: Launch,
}

/// A graph compiled for sm80 and loaded on a GPU, with its device buffers
/// allocated (inputs, outputs, temporaries and scratch, in bytes).
pub struct Compiled<'g> {
    gpu: &'g Gpu,
    module: Module,
    steps: Vec<Step>,
    buffers: Vec<CudaSlice<u8>>,
    /// Buffers zeroed before every run (split-K scratch).
    zeroed: Vec<usize>,
    /// Buffer index of each graph input and output, in graph order.
    inputs: Vec<usize>,
    outputs: Vec<(usize, HostTensor)>,
}

/// A dim as a concrete `usize`, or an `Internal` error.
fn concrete(d: &tgc_core::sym::Dim) -> Result<usize, GpuError> {
    d.as_int()
        .and_then(|v| usize::try_from(v).ok())
        .ok_or_else(|| GpuError::Diag(diag!(Internal, "size {d} is not concrete")))
}

impl<'g> Compiled<'g> {
    /// Compiles `bound` (every dim bound; `name` makes the module's cache
    /// key unique) and allocates its buffers on `gpu`.
    ///
    /// Errors: the compiler's diagnostics (`Io` without the CUDA
    /// toolchain); `Kernel` for a failed allocation.
    pub fn new(gpu: &'g Gpu, bound: &Graph, name: &str) -> Result<Compiled<'g>, GpuError> {
        let mut buffers = Vec::new();
        let mut zeroed = Vec::new();
        let mut inputs = Vec::new();
        let mut outputs = Vec::new();
        let mut steps = Vec::new();
        let alloc = |bytes: usize| -> Result<CudaSlice<u8>, GpuError> { Ok(gpu.zeros::<u8>(bytes.max(1))?) };
        for id in bound.inputs() {
            let n: usize = bound.shape(id).iter().map(concrete).product::<Result<usize, _>>()?;
            inputs.push(buffers.len());
            buffers.push(alloc(n * bound.dtype(id).size_bytes())?);
        }
        for o in &bound.outputs {
            let shape: Vec<usize> = bound.shape(o.node).iter().map(concrete).collect::<Result<_, _>>()?;
            let t = HostTensor::zeros(bound.dtype(o.node), &shape)?;
            outputs.push((buffers.len(), t));
            buffers.push(alloc(outputs[outputs.len() - 1].1.bytes().len())?);
        }
        let (cubin, ptx, symbol) = if tgc_core::gpu::lower::match_gemm(bound).is_ok() {
            let art = pipeline::compile_gpu(bound, "sm80")?;
            let spec = gemm_launch(&art.kernel)?;
            let mut args = Vec::new();
            for b in &spec.params {
                args.push(match b {
                    Binding::Input(i) => Arg::Buffer(inputs[*i]),
                    Binding::Output(o) => Arg::Buffer(outputs[*o].0),
                    Binding::Scratch { dtype, elems } => {
                        zeroed.push(buffers.len());
                        buffers.push(alloc(*elems as usize * dtype.size_bytes())?);
                        Arg::Buffer(buffers.len() - 1)
                    }
                    Binding::I32(v) => Arg::I32(*v),
                    Binding::I64(v) => Arg::I64(*v),
                });
            }
            let launch = Launch { grid: spec.grid, block: spec.block, dynamic_smem_bytes: spec.smem_bytes };
            steps.push(Step { symbol: spec.symbol, args, launch });
            (art.cubin, art.ptx, art.symbol)
        } else {
            let prog = simt::lower_program(bound)?;
            // Every dim is bound: the program's symbols, if any, have no
            // value here.
            if let Some(s) = prog.symbols.first() {
                return Err(GpuError::Diag(diag!(UnboundSymbol, "symbol `{s}` has no value")));
            }
            let mut of_buf = Vec::new();
            for (k, b) in prog.buffers.iter().enumerate() {
                of_buf.push(match b.role {
                    Role::Input(i) => inputs[i],
                    Role::Output(o) => outputs[o].0,
                    Role::Temp => {
                        let n = prog.elements(tgc_core::cpu::loop_ir::BufId(k as u32), &[])?;
                        let n = usize::try_from(n).map_err(|_| diag!(Internal, "buffer of {n} elements"))?;
                        buffers.push(alloc(n * b.dtype.size_bytes())?);
                        buffers.len() - 1
                    }
                });
            }
            for l in &prog.launches {
                let grid = l.grid(&[])?;
                let grid = grid.map(|g| u32::try_from(g).unwrap_or(0));
                let args = l
                    .args
                    .iter()
                    .zip(&l.kernel.params)
                    .map(|(a, p)| match a {
                        LaunchArg::Buffer(b) => Ok(Arg::Buffer(of_buf[b.0 as usize])),
                        LaunchArg::Int(v) if p.kind == ParamKind::I32 => i32::try_from(*v)
                            .map(Arg::I32)
                            .map_err(|_| diag!(Internal, "{v} does not fit parameter `{}`", p.name)),
                        LaunchArg::Int(v) => Ok(Arg::I64(*v)),
                        LaunchArg::Dim(k) => Err(diag!(Internal, "dim {k} of a program without symbols")),
                    })
                    .collect::<Result<_, _>>()?;
                let launch = Launch { grid, block: l.block(), dynamic_smem_bytes: l.kernel.smem_bytes as u32 };
                steps.push(Step { symbol: l.kernel.name.clone(), args, launch });
            }
            let tc = tgc_core::gpu::toolchain::Toolchain::locate().map_err(|e| diag!(Io, "{e}"))?;
            let (_, compiled) = tgc_core::gpu::cuda::compile(&tc, &prog.kernels(), &format!("{}.cu", prog.name))
                .map_err(|e| diag!(Internal, "{e}"))?;
            (compiled.cubin, compiled.ptx, prog.name)
        };
        // The module lives until the process ends: a command or a benchmark
        // loads a handful.
        let module = Module {
            name: Box::leak(format!("{symbol}:{name}").into_boxed_str()),
            cubins: Box::leak(vec![Cubin { sm: 80, image: Box::leak(cubin.into_boxed_slice()) }].into()),
            ptx: Box::leak(ptx.into_boxed_str()),
        };
        Ok(Compiled { gpu, module, steps, buffers, zeroed, inputs, outputs })
    }

    /// Copies `inputs` (graph order, each its input's dtype and shape) to
    /// the device.
    ///
    /// Errors: `ShapeMismatch` for a tensor of another byte size; `Kernel`
    /// for a failed copy.
    pub fn upload(&mut self, inputs: &[HostTensor]) -> Result<(), GpuError> {
        for (t, &b) in inputs.iter().zip(&self.inputs) {
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

    /// Queues every kernel once, in order (and re-zeroes scratch first).
    ///
    /// Errors: `Kernel` when loading, a launch or a memset fails.
    pub fn run(&mut self) -> Result<(), GpuError> {
        for &z in &self.zeroed {
            let n = DeviceArg::<u8>::elems(&self.buffers[z]);
            self.buffers[z] = self.gpu.zeros::<u8>(n)?;
        }
        for s in &self.steps {
            let args: Vec<KernelArg> = s
                .args
                .iter()
                .map(|a| match a {
                    Arg::Buffer(b) => KernelArg::Ptr(DeviceArg::<u8>::address(&self.buffers[*b])),
                    Arg::I32(v) => KernelArg::I32(*v),
                    Arg::I64(v) => KernelArg::I64(*v),
                })
                .collect();
            // SAFETY: the arguments follow the kernel's parameters (bound
            // by gpu::launch or gpu::simt from the kernel compiled into this
            // module); every buffer has the bytes of its tensor at the
            // bound shape (inputs checked by `upload`), in separate driver
            // allocations (256-byte aligned) on this GPU's stream.
            unsafe { self.gpu.launch_raw(&self.module, &s.symbol, &s.launch, &args) }?;
        }
        Ok(())
    }

    /// Waits for the queued work and copies the outputs back (graph order).
    ///
    /// Errors: `Kernel` with the driver's error of a failed kernel or copy.
    pub fn download(&mut self) -> Result<Vec<HostTensor>, GpuError> {
        self.gpu.synchronize()?;
        let mut out = Vec::new();
        for (b, t) in &mut self.outputs {
            let bytes = self.gpu.download(&self.buffers[*b])?;
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
pub fn run_cuda(bound: &Graph, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, GpuError> {
    let gpu = Gpu::new(0)?;
    let mut c = Compiled::new(&gpu, bound, "run")?;
    c.upload(inputs)?;
    c.run()?;
    c.download()
}

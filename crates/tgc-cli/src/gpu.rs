//! `tgc run --backend cuda` (feature `cuda`, on by default): the graph
//! compiled for sm80, loaded on device 0, run on the inputs, the outputs
//! copied back. The device is opened first, so a machine without a GPU
//! gets `NoDevice` before any compilation.
//!
//! Today's GPU code generation covers graphs that are one GEMM + epilogue
//! (`tgc_core::gpu::lower`); other graphs are an `Unsupported` diagnostic.

use std::path::Path;

use tgc_core::gpu::launch::{gemm_launch, Binding};
use tgc_core::pipeline;
use tgc_core::tiny::Graph;
use tgc_runtime::cuda::{Cubin, DeviceArg, Gpu, KernelArg, Launch, Module};
use tgc_runtime::HostTensor;

use crate::commands::Failure;

/// The outputs of `bound` (every dim bound) on `inputs` (in
/// `Graph::inputs()` order, each of its input's dtype and shape), computed
/// on GPU 0.
///
/// Errors: `NoDevice` without a driver or GPU; the compiler's diagnostics
/// (an `Unsupported` graph, a missing CUDA toolchain); `Kernel` for a
/// failed copy, launch or kernel.
pub fn run_cuda(path: &Path, bound: &Graph, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, Failure> {
    let gpu = Gpu::new(0)?;
    let diag = |d: tgc_core::Diagnostic| Failure::diag(path, &d);
    let art = pipeline::compile_gpu(bound, "sm80").map_err(diag)?;
    let spec = gemm_launch(&art.kernel).map_err(diag)?;
    // The module lives until the process ends: this command runs it once.
    let module = Module {
        name: Box::leak(art.symbol.clone().into_boxed_str()),
        cubins: Box::leak(vec![Cubin { sm: 80, image: Box::leak(art.cubin.clone().into_boxed_slice()) }].into()),
        ptx: Box::leak(art.ptx.clone().into_boxed_str()),
    };
    let mut device_inputs = Vec::new();
    for t in inputs {
        device_inputs.push(gpu.upload(t.bytes())?);
    }
    let mut outputs = Vec::new();
    let mut device_outputs = Vec::new();
    for o in &bound.outputs {
        let shape: Vec<usize> = bound
            .shape(o.node)
            .iter()
            .map(|d| d.as_int().and_then(|v| usize::try_from(v).ok()))
            .collect::<Option<_>>()
            .ok_or_else(|| Failure::user(format!("output `{}` has no concrete shape", o.name)))?;
        let t = HostTensor::zeros(bound.dtype(o.node), &shape)?;
        device_outputs.push(gpu.zeros::<u8>(t.bytes().len())?);
        outputs.push(t);
    }
    let mut scratch = Vec::new();
    let mut args = Vec::new();
    for b in &spec.params {
        let ptr = |bytes: &tgc_runtime::cuda::CudaSlice<u8>| KernelArg::Ptr(DeviceArg::<u8>::address(bytes));
        args.push(match b {
            Binding::Input(i) => ptr(&device_inputs[*i]),
            Binding::Output(o) => ptr(&device_outputs[*o]),
            Binding::Scratch { dtype, elems } => {
                let bytes = usize::try_from(*elems)
                    .ok()
                    .and_then(|e| e.checked_mul(dtype.size_bytes()))
                    .ok_or_else(|| Failure::user("a scratch buffer does not fit in memory"))?;
                scratch.push(gpu.zeros::<u8>(bytes)?);
                ptr(&scratch[scratch.len() - 1])
            }
            Binding::I32(v) => KernelArg::I32(*v),
            Binding::I64(v) => KernelArg::I64(*v),
        });
    }
    let launch = Launch { grid: spec.grid, block: spec.block, dynamic_smem_bytes: spec.smem_bytes };
    // SAFETY: the arguments are bound by `gemm_launch` from the kernel just
    // compiled; every tensor buffer has its tensor's bytes at the bound
    // shape (inputs were checked against the graph's shapes by the caller,
    // outputs and scratch allocated here), starts where the driver's
    // allocator puts it (256-byte aligned), and outputs are separate
    // allocations.
    unsafe { gpu.launch_raw(&module, &spec.symbol, &launch, &args) }?;
    gpu.synchronize()?;
    for (t, d) in outputs.iter_mut().zip(&device_outputs) {
        let bytes = gpu.download(d)?;
        t.bytes_mut().copy_from_slice(&bytes);
    }
    drop(scratch);
    Ok(outputs)
}

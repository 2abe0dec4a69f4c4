//! The typed launch functions of a kernel module's `sm80` submodule
//! (feature `sm80` of `tgc::kernel!`): Rust text placed next to the
//! embedded `MODULE`, `SYMBOL` and `THREADS`/`SMEM_BYTES` constants.
//!
//! For a graph compiled at one shape point it prints:
//!
//! - `LAUNCH: ::tgc::cuda::Launch`, the kernel's grid, block and dynamic
//!   shared memory at that point;
//! - `check(inputs…, outputs…, dims…) -> Result<[u64; n], ::tgc::Error>`:
//!   every dim equals the compiled value (`InvalidDim`, `DimMismatch`),
//!   every buffer (a `&impl ::tgc::cuda::DeviceArg<T>`) has its shape's
//!   element count (`LengthMismatch`) and a 16-byte aligned address
//!   (`Misaligned`), in that order; the buffers' addresses. No driver
//!   call, so it is tested with fake buffers on any machine;
//! - `launch(gpu, inputs…, outputs…, dims…)`: `check`, then zeroed scratch
//!   buffers when the kernel needs them, then the launch on `gpu`'s stream
//!   (asynchronous: errors of the running kernel surface at the next
//!   synchronising call). Outputs are `&mut impl DeviceArgMut<T>`;
//! - `run_on_gpu(inputs: &[T]…, outputs: &mut [T]…, dims…)`: host slices;
//!   checks dims and lengths, opens device 0 (`NoDevice` without one),
//!   uploads, launches, downloads into the outputs.
//!
//! Parameter names and order are those of the module's `run`
//! ([`super::api::param_names`]); `T` is the dtype's storage type.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::diag;
use crate::diag::DResult;
use crate::gpu::launch::{Binding, LaunchSpec, TENSOR_ALIGN};
use crate::tiny::Graph;
use crate::DType;

use super::api::{param_names, FACADE};

/// The launch items for `g` (the graph as written, with its symbols)
/// compiled at `values` (a value for each symbol) into `bound`, whose
/// kernel launches as `spec`.
///
/// Errors: `Internal` when a symbol has no value or a tensor of `bound`
/// has a symbolic or overflowing size.
pub fn sm80_launch_items(
    g: &Graph,
    values: &BTreeMap<String, i64>,
    bound: &Graph,
    spec: &LaunchSpec,
) -> DResult<String> {
    let params = param_names(g);
    let (ins, outs) = (bound.inputs(), &bound.outputs);
    let (n_in, n_out) = (ins.len(), outs.len());
    let names = crate::pipeline::input_names(g);
    // (graph name, Rust name, dtype, elements) of inputs then outputs.
    let mut tensors = Vec::new();
    let io = ins.iter().copied().zip(names.iter().cloned()).chain(outs.iter().map(|o| (o.node, o.name.clone())));
    for (k, (id, name)) in io.enumerate() {
        let elems = bound
            .shape(id)
            .iter()
            .try_fold(1u64, |n, d| n.checked_mul(u64::try_from(d.as_int()?).ok()?))
            .ok_or_else(|| diag!(Internal, "tensor `{name}` has no concrete size"))?;
        tensors.push((name, params[k].clone(), bound.dtype(id), elems));
    }
    let dims: Vec<(String, String, i64)> = g
        .symbols
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let v = values.get(&s.name).ok_or_else(|| diag!(Internal, "symbol `{}` has no value", s.name))?;
            Ok((s.name.clone(), params[n_in + n_out + k].clone(), *v))
        })
        .collect::<DResult<_>>()?;
    let dim_params: Vec<String> = dims.iter().map(|(_, p, _)| format!("{p}: usize")).collect();
    let dim_args: Vec<String> = dims.iter().map(|(_, p, _)| p.clone()).collect();
    let sig = |ty_in: &dyn Fn(DType) -> String, ty_out: &dyn Fn(DType) -> String| -> String {
        let t = tensors.iter().enumerate().map(|(k, (_, p, d, _))| {
            let ty = if k < n_in { ty_in(*d) } else { ty_out(*d) };
            format!("{p}: {ty}")
        });
        t.chain(dim_params.iter().cloned()).collect::<Vec<_>>().join(", ")
    };
    let cuda = format!("{FACADE}::cuda");
    let err = format!("{FACADE}::Error");
    let mut s = String::new();

    let [gx, gy, gz] = spec.grid;
    let [bx, by, bz] = spec.block;
    let _ = writeln!(s, "/// The launch at the compiled shape: grid, block, dynamic shared memory (bytes).");
    let _ = writeln!(
        s,
        "pub const LAUNCH: {cuda}::Launch = {cuda}::Launch {{ grid: [{gx}, {gy}, {gz}], block: [{bx}, {by}, {bz}], \
         dynamic_smem_bytes: {} }};",
        spec.smem_bytes
    );
    let compiled: Vec<String> = dims.iter().map(|(n, _, v)| format!("`{n}` = {v}")).collect();
    let at = if compiled.is_empty() { "its fixed shapes".to_string() } else { compiled.join(", ") };
    let _ = writeln!(s, "/// The dims this kernel was compiled for ({at}), in symbol order.");
    let dim_consts: Vec<String> = dims.iter().map(|(n, _, v)| format!("({n:?}, {v}i64)")).collect();
    let _ = writeln!(s, "pub const DIMS: [(&str, i64); {}] = [{}];", dims.len(), dim_consts.join(", "));

    // check
    let arg_doc: Vec<String> = tensors.iter().map(|(n, _, d, e)| format!("`{n}`: {e} × {d}")).collect::<Vec<_>>();
    let _ = writeln!(
        s,
        "/// Checks the arguments of [`launch`] without touching the device: the dims ({at}), then each \
         buffer's element count ({}) and {TENSOR_ALIGN}-byte alignment. Returns the buffers' device addresses.",
        arg_doc.join(", ")
    );
    let _ = writeln!(s, "///\n/// # Errors\n///");
    let _ = writeln!(
        s,
        "/// `InvalidDim` for a dim outside `1..=i32::MAX`, `DimMismatch` for a dim other than the compiled \
         value,\n/// `LengthMismatch` for a buffer of another length, `Misaligned` for an address not a \
         multiple of {TENSOR_ALIGN}."
    );
    let ref_ty = |d: DType| format!("&impl {cuda}::DeviceArg<{}>", rust_type(d));
    let _ = writeln!(
        s,
        "pub fn check({}) -> ::core::result::Result<[u64; {}], {err}> {{",
        sig(&ref_ty, &ref_ty),
        tensors.len()
    );
    for (name, p, v) in &dims {
        let _ = writeln!(s, "    {cuda}::check_dim({name:?}, {p}, {v})?;");
    }
    let checks: Vec<String> = tensors
        .iter()
        .map(|(n, p, _, e)| format!("        {cuda}::check_arg({n:?}, {p}, {e}usize, {TENSOR_ALIGN})?,"))
        .collect();
    let _ = writeln!(s, "    Ok([\n{}\n    ])\n}}", checks.join("\n"));

    // launch
    let _ = writeln!(
        s,
        "/// Launches the kernel on `gpu`'s stream after [`check`]; returns once it is queued (a failure of the \
         running kernel is reported by the next synchronising call, e.g. `gpu.synchronize()`). Buffers must be \
         on `gpu`'s device; outputs are written, and must not overlap any other argument."
    );
    let _ = writeln!(s, "///\n/// # Errors\n///");
    let _ = writeln!(
        s,
        "/// Those of [`check`], before any driver call; `Kernel` when a scratch allocation, loading the module \
         or the launch fails."
    );
    let mut_ty = |d: DType| format!("&mut impl {cuda}::DeviceArgMut<{}>", rust_type(d));
    let _ = writeln!(
        s,
        "pub fn launch(gpu: &{cuda}::Gpu, {}) -> ::core::result::Result<(), {err}> {{",
        sig(&ref_ty, &mut_ty)
    );
    let check_args: Vec<String> = tensors
        .iter()
        .enumerate()
        .map(|(k, (_, p, _, _))| if k < n_in { p.clone() } else { format!("&*{p}") })
        .chain(dim_args.iter().cloned())
        .collect();
    let _ = writeln!(s, "    let __addr = self::check({})?;", check_args.join(", "));
    let mut kargs = Vec::new();
    for (k, b) in spec.params.iter().enumerate() {
        kargs.push(match b {
            Binding::Input(i) => format!("{cuda}::KernelArg::Ptr(__addr[{i}])"),
            Binding::Output(o) => format!("{cuda}::KernelArg::Ptr(__addr[{}])", n_in + o),
            Binding::Scratch { dtype, elems } => {
                let ty = rust_type(*dtype);
                let _ = writeln!(s, "    let __scratch{k} = gpu.zeros::<{ty}>({elems}usize)?;");
                format!("{cuda}::KernelArg::Ptr({cuda}::DeviceArg::<{ty}>::address(&__scratch{k}))")
            }
            Binding::I32(v) => format!("{cuda}::KernelArg::I32({v})"),
            Binding::I64(v) => format!("{cuda}::KernelArg::I64({v})"),
        });
    }
    let _ = writeln!(s, "    let __args = [{}];", kargs.join(", "));
    for line in [
        "// SAFETY: `__args` follow the kernel's parameters (tgc_core::gpu::launch binds them from the same",
        "// kernel the cubin was compiled from). `check` passed: each buffer has exactly the element count",
        "// its tensor has at the compiled shape, which the kernel, built for these M, N, K, stays within,",
        "// and a 16-byte aligned address; the scratch buffers are live until after the launch is queued",
        "// (their frees are ordered on the same stream). Outputs are `&mut` borrows, so no input aliases them.",
    ] {
        let _ = writeln!(s, "    {line}");
    }
    let _ = writeln!(s, "    unsafe {{ gpu.launch_raw(&self::MODULE, self::SYMBOL, &self::LAUNCH, &__args) }}\n}}");

    // run_on_gpu
    let _ = writeln!(
        s,
        "/// Runs the kernel on device 0 with host slices: checks the dims and lengths, uploads the inputs and \
         outputs, [`launch`]es, waits, and downloads the outputs."
    );
    let _ = writeln!(s, "///\n/// # Errors\n///");
    let _ = writeln!(
        s,
        "/// `InvalidDim`, `DimMismatch`, `LengthMismatch` as [`check`] (before the device is opened); \
         `NoDevice` without a driver or GPU; `Kernel` when a copy, the launch or the kernel fails."
    );
    let host_in = |d: DType| format!("&[{}]", rust_type(d));
    let host_out = |d: DType| format!("&mut [{}]", rust_type(d));
    let _ = writeln!(s, "pub fn run_on_gpu({}) -> ::core::result::Result<(), {err}> {{", sig(&host_in, &host_out));
    for (name, p, v) in &dims {
        let _ = writeln!(s, "    {cuda}::check_dim({name:?}, {p}, {v})?;");
    }
    for (n, p, _, e) in &tensors {
        let _ = writeln!(s, "    {cuda}::check_host_len({n:?}, {p}.len(), {e}usize)?;");
    }
    let _ = writeln!(s, "    let __gpu = {cuda}::Gpu::new(0)?;");
    for (k, (_, p, _, _)) in tensors.iter().enumerate() {
        let m = if k < n_in { "" } else { "mut " };
        let _ = writeln!(s, "    let {m}__d_{k} = __gpu.upload(&*{p})?;");
    }
    let launch_args: Vec<String> = (0..tensors.len())
        .map(|k| if k < n_in { format!("&__d_{k}") } else { format!("&mut __d_{k}") })
        .chain(dim_args.iter().cloned())
        .collect();
    let _ = writeln!(s, "    self::launch(&__gpu, {})?;", launch_args.join(", "));
    let _ = writeln!(s, "    __gpu.synchronize()?;");
    for (k, (_, p, _, _)) in tensors.iter().enumerate().skip(n_in) {
        let _ = writeln!(s, "    {p}.copy_from_slice(&__gpu.download(&__d_{k})?);");
    }
    let _ = writeln!(s, "    Ok(())\n}}");
    Ok(s)
}

/// The Rust type of an element of dtype `d` in generated code.
fn rust_type(d: DType) -> String {
    match d {
        DType::F16 => format!("{FACADE}::half::f16"),
        DType::BF16 => format!("{FACADE}::half::bf16"),
        DType::F32 => "f32".into(),
        DType::I32 => "i32".into(),
        DType::Bool => "bool".into(),
    }
}

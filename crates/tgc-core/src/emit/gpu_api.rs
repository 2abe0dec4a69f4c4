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
//!
//! [`sm80_module`] prints the whole submodule (the embedded code and these
//! functions) or, for a graph without an sm80 kernel, `SM80_SKIPPED`; both
//! `tgc::kernel!` and the build helper ([`crate::build::Kernels::sm80`])
//! use it.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::diag;
use crate::diag::DResult;
use crate::gpu::launch::{Binding, LaunchSpec, TENSOR_ALIGN};
use crate::tiny::Graph;
use crate::DType;

use super::api::{param_names, FACADE};

/// Where the generated `sm80` module takes its cubin bytes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CubinSource<'a> {
    /// A byte-string literal in the module text (`kernel!`).
    Inline,
    /// `include_bytes!(PATH)` of a file written next to the generated Rust
    /// (the build helper); the path is absolute.
    File(&'a str),
}

/// The graph the sm80 kernel is compiled for: `g` itself when it has no
/// symbols, else bound to the one `shapes` point (or none) with the
/// symbols' defaults for what it leaves out, and the values used; `Err`
/// says why there is none.
pub fn sm80_graph(g: &Graph, shapes: &[BTreeMap<String, i64>]) -> Result<(Graph, BTreeMap<String, i64>), String> {
    let mut values: BTreeMap<String, i64> =
        g.symbols.iter().filter_map(|s| s.default.map(|v| (s.name.clone(), v))).collect();
    match shapes {
        _ if g.symbols.is_empty() => return Ok((g.clone(), values)),
        [one] => values.extend(one.clone()),
        [] => {}
        _ => return Err(format!("{} `shapes(...)` points; the sm80 kernel is built for one", shapes.len())),
    }
    if let Some(s) = g.symbols.iter().find(|s| !values.contains_key(&s.name)) {
        return Err(format!("symbol `{}` has no default and no `shapes(...)` point gives it", s.name));
    }
    let bound = g.bind(&values).map_err(|d| d.to_string())?;
    Ok((bound, values))
}

/// The items of a kernel module's sm80 part, and the cubin the text refers
/// to (empty when skipped): for a graph that is one GEMM + epilogue at
/// concrete shapes ([`sm80_graph`]), `pub mod sm80 { … }` with `CUBIN`,
/// `PTX`, `MODULE`, `SYMBOL`, `THREADS`, `SMEM_BYTES`, `PLAN_JSON` and the
/// launch functions of [`sm80_launch_items`], compiled by NVRTC now; for
/// any other graph a constant `SM80_SKIPPED` saying why there is none.
///
/// Errors: the message of a compile error when the GEMM does not compile
/// for another reason than `Unsupported` (e.g. without the CUDA toolchain).
pub fn sm80_module(
    g: &Graph,
    shapes: &[BTreeMap<String, i64>],
    cubin_source: CubinSource,
) -> Result<(String, Vec<u8>), String> {
    let skipped = |why: String| {
        let why = format!("no sm80 kernel: {why}");
        format!("/// Why this graph has no embedded sm80 kernel (feature `sm80`).\npub const SM80_SKIPPED: &str = {why:?};\n")
    };
    let (bound, values) = match sm80_graph(g, shapes) {
        Ok(b) => b,
        Err(why) => return Ok((skipped(why), Vec::new())),
    };
    if let Err(d) = crate::gpu::lower::match_gemm(&bound) {
        return Ok((skipped(d.message), Vec::new()));
    }
    let fail = |d: crate::Diagnostic| format!("tgc (feature `sm80`): {d}");
    let gpu = match crate::pipeline::compile_gpu(&bound, "sm80") {
        Ok(gpu) => gpu,
        // E.g. no plan of the space fits (an f32 GEMM).
        Err(d) if d.name == crate::ErrorName::Unsupported => return Ok((skipped(d.message), Vec::new())),
        Err(d) => return Err(fail(d)),
    };
    let spec = crate::gpu::launch::gemm_launch(&gpu.kernel).map_err(fail)?;
    let launch = sm80_launch_items(g, &values, &bound, &spec).map_err(fail)?;
    let cubin = match cubin_source {
        CubinSource::Inline => byte_string(&gpu.cubin),
        CubinSource::File(path) => format!("include_bytes!({path:?})"),
    };
    let mut s = String::new();
    for line in [
        "/// The graph's GEMM + epilogue compiled for sm_80 when this crate",
        "/// was built (feature `sm80`): NVRTC's cubin and PTX of the CUDA C",
        "/// that `tgc compile --target sm80 --dump cu` prints, and typed",
        "/// launch functions: [`check`] (the arguments, no device needed),",
        "/// [`launch`] (device buffers on a `tgc::cuda::Gpu`) and",
        "/// [`run_on_gpu`] (host slices, device 0).",
        "pub mod sm80 {",
    ] {
        let _ = writeln!(s, "{line}");
    }
    let _ = writeln!(s, "const CUBIN_BYTES: &[u8] = {cubin};");
    let _ = writeln!(s, "const PTX_TEXT: &str = {:?};", gpu.ptx);
    let _ = writeln!(s, "/// The kernel's `extern \"C\"` name in [`CUBIN`] and [`PTX`].");
    let _ = writeln!(s, "pub const SYMBOL: &str = {:?};", gpu.symbol);
    let _ = writeln!(s, "/// The ELF cubin for `sm_80`.\npub static CUBIN: &[u8] = CUBIN_BYTES;");
    let _ = writeln!(s, "/// The PTX (`.target sm_80`), which a driver can JIT for newer GPUs.");
    let _ = writeln!(s, "pub static PTX: &str = PTX_TEXT;");
    let _ = writeln!(s, "/// [`CUBIN`] and [`PTX`] as the GPU runtime's module (`tgc::cuda`).");
    let _ = writeln!(
        s,
        "pub static MODULE: {FACADE}::cuda::Module = {FACADE}::cuda::Module {{ name: SYMBOL, cubins: \
         &[{FACADE}::cuda::Cubin {{ sm: 80, image: CUBIN_BYTES }}], ptx: PTX_TEXT }};"
    );
    let _ = writeln!(s, "/// Threads per block (one dimension).");
    let _ = writeln!(s, "pub const THREADS: u32 = {}u32;", gpu.kernel.kernel.threads());
    let _ = writeln!(s, "/// Dynamic shared memory per block, in bytes.");
    let _ = writeln!(s, "pub const SMEM_BYTES: u32 = {}u32;", gpu.kernel.kernel.smem_bytes);
    let _ = writeln!(s, "/// The chosen Schedule Plan as JSON (`000` §12.5).");
    let _ = writeln!(s, "pub const PLAN_JSON: &str = {:?};", crate::plan::to_json(&gpu.kernel.plan));
    s.push_str(&launch);
    s.push_str("}\n");
    Ok((s, gpu.cubin))
}

/// `bytes` as a Rust byte-string literal.
fn byte_string(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 4 + 3);
    s.push_str("b\"");
    for &b in bytes {
        let _ = write!(s, "\\x{b:02X}");
    }
    s.push('"');
    s
}

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

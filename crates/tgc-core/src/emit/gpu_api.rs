//! The `sm80` submodule of a kernel module (feature `sm80` of
//! `tgc::kernel!`, [`crate::build::Kernels::sm80`]): the whole graph
//! compiled for sm_80 — every region a kernel ([`crate::gpu::simt`]), a
//! GEMM + epilogue graph at concrete sizes the tensor-core template —
//! embedded as cubin and PTX, with typed launch functions.
//!
//! It holds one *variant* per compiled program, each a submodule with its
//! `CUBIN`, `PTX`, `MODULE` (the runtime's [`Module`]), `KERNELS` (the
//! kernel symbols in launch order) and `PLAN_JSON` (the Schedule Plan of
//! the first planned tensor-core kernel, `000` §12.5; `None` without one):
//!
//! - `generic`: the graph with every dim symbolic, SIMT kernels (the
//!   tensor-core kernel when the graph has no symbols and is one GEMM +
//!   epilogue);
//! - `shape_<k>`: ShapeSet point `k` (a symbol it leaves open taking its
//!   default) when that gives every symbol a value and the graph is one
//!   GEMM + epilogue there; it runs at exactly those dims (other points
//!   run the generic kernels, which are correct at every size).
//!
//! and the functions, whose parameters are those of the module's `run`
//! ([`super::api::param_names`]; `T` the dtype's storage type):
//!
//! - `check(inputs…, outputs…, dims…) -> Result<[u64; n], ::tgc::Error>`:
//!   the dims as `run` checks them (each in `1..=i32::MAX`, the graph's
//!   shape facts), then each buffer (`&impl ::tgc::cuda::DeviceArg<T>`)
//!   has its shape's element count (`LengthMismatch`) and a
//!   [`TENSOR_ALIGN`]-byte aligned address (`Misaligned`); returns the
//!   addresses. No driver call, so it is tested with fake buffers;
//! - `steps(dims…) -> Result<(&'static Module, Steps), ::tgc::Error>`: the
//!   variant for these dims and its launches ([`Steps`]: temporaries'
//!   bytes, then each kernel's grid, block, shared memory and arguments),
//!   equal to [`crate::gpu::program::GpuProgram::steps`] of that variant;
//! - `launch(gpu, inputs…, outputs…, dims…)`: `check`, `steps`, then
//!   `Gpu::run_steps` on `gpu`'s stream (temporaries allocated, uninitialised, and
//!   freed in stream order; asynchronous: a failing kernel is reported by
//!   the next synchronising call). Outputs are `&mut impl DeviceArgMut<T>`;
//! - `run_on_gpu(inputs: &[T]…, outputs: &mut [T]…, dims…)`: host slices;
//!   checks the dims and lengths, opens device 0 (`NoDevice` without one),
//!   uploads, launches, downloads into the outputs.
//!
//! A graph the GPU path cannot lower gets `SM80_SKIPPED: &str` (why)
//! instead of the submodule.
//!
//! [`Module`]: tgc_runtime::cuda::Module
//! [`Steps`]: tgc_runtime::launch::Steps

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::diag;
use crate::diag::DResult;
use crate::gpu::dialect::{BinOp, Expr};
use crate::gpu::program::{GpuProgram, LaunchArg, TENSOR_ALIGN};
use crate::gpu::{driver, program};
use crate::tiny::Graph;
use tgc_runtime::launch::StepArg;

use super::api::{lit, param_names, rust_type, Printer, CHECKS, FACADE};

/// Where the generated `sm80` module takes its cubin bytes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CubinSource<'a> {
    /// Byte-string literals in the module text (`kernel!`).
    Inline,
    /// `include_bytes!` of files written next to the generated Rust (the
    /// build helper): variant `v`'s cubin is `{prefix}{v}.cubin`, with
    /// `prefix` an absolute path.
    Files(&'a str),
}

/// The text of the sm80 part of a kernel module and the cubins it refers
/// to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sm80Module {
    /// `pub mod sm80 { … }`, or `pub const SM80_SKIPPED: &str = …;`.
    pub text: String,
    /// For [`CubinSource::Files`]: each file's path and bytes, for the
    /// caller to write; empty for [`CubinSource::Inline`].
    pub files: Vec<(String, Vec<u8>)>,
    /// Whether the graph was skipped (`text` is `SM80_SKIPPED`).
    pub skipped: bool,
}

impl Sm80Module {
    /// Adds `items` at the end of the `sm80` submodule (such as
    /// [`super::model::sm80_model_items`]); nothing for a skipped graph.
    pub fn add_items(&mut self, items: &str) {
        if self.skipped {
            return;
        }
        let end = self.text.rfind('}').expect("an sm80 module ends with its closing brace");
        self.text.insert_str(end, items);
    }
}

/// One compiled program of the module.
struct Variant {
    /// `generic` or `shape_<k>`, with `_sm90` for the sm90 target's.
    name: String,
    /// The architecture its cubin is for (`80`, or `90` for sm_90a).
    sm: u32,
    /// The point's values in symbol order (`None` for `generic`).
    point: Option<Vec<i64>>,
    program: GpuProgram,
    cubin: Vec<u8>,
    ptx: String,
    plan_json: Option<String>,
}

/// The sm80 part of kernel module for `g` with ShapeSet `shapes` (see the
/// module doc), its kernels compiled by NVRTC now.
///
/// Errors: the message of a compile error for anything but a graph the GPU
/// path does not take (`Unsupported`, which becomes `SM80_SKIPPED`): no CUDA
/// toolchain, a kernel the verifier or NVRTC rejects (a tgc bug).
///
/// With `sm90` (the facade's feature `sm90`), every variant whose program
/// on the sm90 target has a kernel of the template's `wgmma` branch gets
/// an sm90 twin `<variant>_sm90`, compiled for sm_90a, and `steps_for`
/// (and so `launch`) picks the twins on a 9.x device.
///
/// `plans` ranks the templates' plans of every program with concrete
/// sizes: [`crate::plan::cost::Analytic`], or a tuning cache's measured
/// times ([`crate::tune::gpu::Recorded`]).
pub fn sm80_module(
    g: &Graph,
    shapes: &[BTreeMap<String, i64>],
    source: CubinSource,
    sm90: bool,
    plans: &dyn crate::plan::cost::Estimator,
) -> Result<Sm80Module, String> {
    let skipped = |why: String| Sm80Module {
        text: format!(
            "/// Why this graph has no embedded sm80 kernels (feature `sm80`).\npub const SM80_SKIPPED: &str = {};\n",
            lit(&format!("no sm80 kernels: {why}"))
        ),
        files: Vec::new(),
        skipped: true,
    };
    let fail = |d: crate::Diagnostic| format!("tgc (feature `sm80`): {d}");
    let target = &crate::plan::target::SM80;
    let generic =
        if g.symbols.is_empty() { driver::lower_program_with(g, target, plans) } else { driver::lower_program(g) };
    let generic = match generic {
        Ok(p) => p,
        Err(d) if d.name == crate::ErrorName::Unsupported => return Ok(skipped(d.message)),
        Err(d) => return Err(fail(d)),
    };
    let mut programs = Vec::new();
    for (k, point) in shapes.iter().enumerate() {
        // The point's values, a symbol it leaves open taking its default.
        let values: Option<Vec<i64>> = g.symbols.iter().map(|s| point.get(&s.name).copied().or(s.default)).collect();
        let (Some(values), false) = (values, g.symbols.is_empty()) else { continue };
        let full: BTreeMap<String, i64> =
            g.symbols.iter().map(|s| s.name.clone()).zip(values.iter().copied()).collect();
        let bound = g.bind(&full).map_err(fail)?;
        let program = driver::lower_program_with(&bound, target, plans).map_err(fail)?;
        if program.launches.iter().any(|l| l.form.tensor_cores()) {
            programs.push((format!("shape_{k}"), Some(values), program));
        }
    }
    programs.push(("generic".to_string(), None, generic));
    let mut variants = Vec::new();
    let mut twins = Vec::new();
    for (name, point, program) in programs {
        if sm90 {
            let bound = match &point {
                Some(values) => {
                    let full = g.symbols.iter().map(|s| s.name.clone()).zip(values.iter().copied()).collect();
                    Some(g.bind(&full).map_err(fail)?)
                }
                None if g.symbols.is_empty() => Some(g.clone()),
                None => None,
            };
            if let Some(bound) = bound {
                let twin = driver::lower_program_with(&bound, &crate::plan::target::SM90, plans).map_err(fail)?;
                if twin.kernels().iter().any(|k| k.arch == crate::gpu::dialect::Arch::Sm90) {
                    twins.push(compile(g, format!("{name}_sm90"), 90, point.clone(), twin).map_err(fail)?);
                }
            }
        }
        variants.push(compile(g, name, 80, point, program).map_err(fail)?);
    }
    let mut files = Vec::new();
    let text = module_text(g, &variants, &twins, |v| match source {
        CubinSource::Inline => byte_string(&v.cubin),
        CubinSource::Files(prefix) => {
            let path = format!("{prefix}{}.cubin", v.name);
            let text = format!("include_bytes!({path:?})");
            files.push((path, v.cubin.clone()));
            text
        }
    })
    .map_err(fail)?;
    Ok(Sm80Module { text, files, skipped: false })
}

/// Verifies `program`'s kernels and compiles them as one NVRTC unit
/// ([`crate::pipeline::compile_kernels`], for sm_`sm`: the newest
/// architecture of its kernels).
fn compile(g: &Graph, name: String, sm: u32, point: Option<Vec<i64>>, program: GpuProgram) -> DResult<Variant> {
    let (_, compiled) = crate::pipeline::compile_kernels(&program.kernels(), &format!("{}_{name}.cu", g.name))?;
    let plan_json = program.launches.iter().find_map(|l| l.plan.as_ref()).map(crate::plan::to_json);
    Ok(Variant { name, sm, point, program, cubin: compiled.cubin, ptx: compiled.ptx, plan_json })
}

/// The Rust statement that returns variant `v`'s module and steps when the
/// dims are its point (unconditionally for `generic`).
fn variant_return(v: &Variant) -> String {
    let call = format!("(&self::{0}::MODULE, self::{0}::steps(&__dims)?)", v.name);
    match &v.point {
        Some(values) => {
            let conds: Vec<String> = values.iter().enumerate().map(|(i, x)| format!("__dims[{i}] == {x}")).collect();
            format!("    if {} {{\n        return Ok({call});\n    }}", conds.join(" && "))
        }
        None => format!("    return Ok({call});"),
    }
}

/// `pub mod sm80 { … }`; `cubin` gives the expression of a variant's
/// bytes; `twins` are the sm90 variants.
fn module_text(
    g: &Graph,
    variants: &[Variant],
    twins: &[Variant],
    mut cubin: impl FnMut(&Variant) -> String,
) -> DResult<String> {
    let params = param_names(g);
    let (n_in, n_out) = (g.inputs().len(), g.outputs.len());
    let n_io = n_in + n_out;
    let printer = Printer { g };
    let generic = &variants[variants.len() - 1].program;
    let cuda = format!("{FACADE}::cuda");
    let err = format!("{FACADE}::Error");
    let dtypes: Vec<_> = g.inputs().into_iter().chain(g.outputs.iter().map(|o| o.node)).map(|id| g.dtype(id)).collect();
    let dim_params: Vec<String> = params[n_io..].iter().map(|p| format!("{p}: usize")).collect();
    let dim_args = params[n_io..].join(", ");
    let sig = |ty: &dyn Fn(usize) -> String| -> String {
        let t = (0..n_io).map(|k| format!("{}: {}", params[k], ty(k)));
        t.chain(dim_params.iter().cloned()).collect::<Vec<_>>().join(", ")
    };
    let mut s = String::new();
    for line in [
        "/// The graph compiled for sm_80 when this crate was built (feature",
        "/// `sm80`): NVRTC's cubin and PTX of the CUDA C that `tgc compile",
        "/// --target sm80 --dump cu` prints, per variant (`generic`, and",
        "/// `shape_<k>` for ShapeSet points with a tensor-core kernel), and typed",
        "/// launch functions: [`check`] (the arguments, no device needed),",
        "/// [`steps`] (the launches for given dims), [`launch`] (device buffers",
        "/// on a `tgc::cuda::Gpu`) and [`run_on_gpu`] (host slices, device 0).",
        "pub mod sm80 {",
    ] {
        let _ = writeln!(s, "{line}");
    }
    let _ = writeln!(s, "#![allow(non_snake_case, clippy::all)]");
    let _ = writeln!(s, "use {CHECKS} as __c;");
    for v in variants.iter().chain(twins) {
        s.push_str(&variant_text(&printer, v, &cubin(v))?);
    }

    // dims: steps 1–2 of `run`'s checks.
    let _ = writeln!(s, "/// The dims as `i64` after `run`'s checks of them (range, the graph's shape facts).");
    let _ = writeln!(
        s,
        "fn dims({}) -> ::core::result::Result<[i64; {}], {err}> {{",
        dim_params.join(", "),
        g.symbols.len()
    );
    s.push_str(&printer.dims(&generic.checks, &params)?);
    let _ = writeln!(s, "    Ok(__dims)\n}}");

    // check
    let ty_doc: Vec<String> = crate::pipeline::input_names(g)
        .into_iter()
        .chain(g.outputs.iter().map(|o| o.name.clone()))
        .zip(g.inputs().into_iter().chain(g.outputs.iter().map(|o| o.node)))
        .map(|(n, id)| format!("`{n}: {}{}`", g.dtype(id), crate::tiny::infer::fmt_shape(g.shape(id))))
        .collect();
    let _ = writeln!(
        s,
        "/// Checks the arguments of [`launch`] without touching the device: the dims as `run` checks them, then \
         each buffer's element count ({}) and {TENSOR_ALIGN}-byte alignment. Returns the buffers' device addresses.",
        ty_doc.join(", ")
    );
    let _ = writeln!(s, "///\n/// # Errors\n///");
    let _ = writeln!(
        s,
        "/// Those of `run`'s dim checks (`InvalidDim`, `DimMismatch`, `ShapeMismatch` on overflow); \
         `LengthMismatch` for a buffer of another length, `Misaligned` for an address not a multiple of \
         {TENSOR_ALIGN}."
    );
    let dev = |k: usize| format!("&impl {cuda}::DeviceArg<{}>", rust_type(dtypes[k]));
    let _ = writeln!(s, "pub fn check({}) -> ::core::result::Result<[u64; {n_io}], {err}> {{", sig(&dev));
    let _ = writeln!(s, "    let __dims = self::dims({dim_args})?;");
    let mut checks = Vec::new();
    for (k, (name, shape, bytes)) in printer.io_shapes()?.into_iter().enumerate() {
        checks.push(format!(
            "        {cuda}::check_arg({}, {}, __c::size({}, &{shape}, {bytes})?, {TENSOR_ALIGN})?,",
            lit(&name),
            params[k],
            lit(&format!("tensor `{name}`"))
        ));
    }
    let _ = writeln!(s, "    let _ = __dims;\n    Ok([\n{}\n    ])\n}}", checks.join("\n"));

    // steps
    let _ = writeln!(
        s,
        "/// The variant that runs at these dims (a `shape_<k>` whose point they are, else `generic`) and its \
         launches: temporaries' bytes, each kernel's grid, block, dynamic shared memory and arguments (tensors \
         numbered inputs then outputs). No device needed."
    );
    let _ = writeln!(s, "///\n/// # Errors\n///");
    let _ = writeln!(
        s,
        "/// Those of `run`'s dim checks; `ShapeMismatch` for a temporary that does not fit in memory; `Kernel` \
         for a grid extent the driver cannot take."
    );
    let _ = writeln!(
        s,
        "pub fn steps({}) -> ::core::result::Result<(&'static {cuda}::Module, {cuda}::Steps), {err}> {{",
        dim_params.join(", ")
    );
    let _ = writeln!(s, "    let __dims = self::dims({dim_args})?;");
    for v in variants {
        let _ = writeln!(s, "{}", variant_return(v));
    }
    let _ = writeln!(s, "}}");

    // steps_for
    let _ = writeln!(
        s,
        "/// [`steps`] for a device of architecture `sm` (`10 * major + minor`, `Gpu::sm`): on a 9.x device the \
         sm90 variant of these dims when the crate was built with feature `sm90` and the dims have one (the \
         template's TMA + wgmma kernels, an sm_90a cubin); otherwise [`steps`]. No device needed."
    );
    let _ = writeln!(s, "///\n/// # Errors\n///\n/// Those of [`steps`].");
    let _ = writeln!(
        s,
        "pub fn steps_for(sm: u32, {}) -> ::core::result::Result<(&'static {cuda}::Module, {cuda}::Steps), {err}> {{",
        dim_params.join(", ")
    );
    if twins.is_empty() {
        let _ = writeln!(s, "    let _ = sm;");
    } else {
        let _ = writeln!(s, "    if sm / 10 == 9 {{\n    let __dims = self::dims({dim_args})?;");
        for v in twins {
            let _ = writeln!(s, "{}", variant_return(v));
        }
        let _ = writeln!(s, "    }}");
    }
    let _ = writeln!(s, "    self::steps({dim_args})\n}}");

    // launch
    let _ = writeln!(
        s,
        "/// Runs the graph on `gpu`'s stream: [`check`], [`steps`], then the kernels in order with uninitialised \
         temporaries (each written before it is read); returns once they are queued (a failure of a running kernel is reported by the next \
         synchronising call, e.g. `gpu.synchronize()`). Buffers must be on `gpu`'s device; outputs are written, \
         and must not overlap any other argument."
    );
    let _ = writeln!(s, "///\n/// # Errors\n///");
    let _ = writeln!(
        s,
        "/// Those of [`check`] and [`steps`], before any driver call; `Kernel` when an allocation, loading the \
         module or a launch fails."
    );
    let dev_mut = |k: usize| {
        if k < n_in {
            format!("&impl {cuda}::DeviceArg<{}>", rust_type(dtypes[k]))
        } else {
            format!("&mut impl {cuda}::DeviceArgMut<{}>", rust_type(dtypes[k]))
        }
    };
    let _ = writeln!(s, "pub fn launch(gpu: &{cuda}::Gpu, {}) -> ::core::result::Result<(), {err}> {{", sig(&dev_mut));
    let check_args: Vec<String> = (0..n_io)
        .map(|k| if k < n_in { params[k].clone() } else { format!("&*{}", params[k]) })
        .chain(params[n_io..].iter().cloned())
        .collect();
    let _ = writeln!(s, "    let __addr = self::check({})?;", check_args.join(", "));
    let _ = writeln!(s, "    let (__module, __steps) = self::steps_for(gpu.sm(), {dim_args})?;");
    for line in [
        "// SAFETY: `__module` holds the kernels `__steps` names, whose arguments tgc bound from the",
        "// same program the module was compiled from. `check` passed: each buffer has exactly its",
        "// tensor's element count at these dims, under which the kernels stay in bounds (the checks",
        "// of the dims are those of the loop nests the kernels come from), and a 16-byte aligned",
        "// address. Outputs are `&mut` borrows, so no other argument aliases them.",
    ] {
        let _ = writeln!(s, "    {line}");
    }
    let _ = writeln!(s, "    unsafe {{ gpu.run_steps(__module, &__steps, &__addr) }}\n}}");

    // run_on_gpu
    let _ = writeln!(
        s,
        "/// Runs the graph on device 0 with host slices: checks the dims and lengths, uploads the inputs and \
         outputs, [`launch`]es, waits, and downloads the outputs."
    );
    let _ = writeln!(s, "///\n/// # Errors\n///");
    let _ = writeln!(
        s,
        "/// `InvalidDim`, `DimMismatch`, `LengthMismatch` as `run` (before the device is opened); `NoDevice` \
         without a driver or GPU; those of [`launch`]; `Kernel` when a copy or a kernel fails."
    );
    let host = |k: usize| {
        if k < n_in {
            format!("&[{}]", rust_type(dtypes[k]))
        } else {
            format!("&mut [{}]", rust_type(dtypes[k]))
        }
    };
    let _ = writeln!(s, "pub fn run_on_gpu({}) -> ::core::result::Result<(), {err}> {{", sig(&host));
    let _ = writeln!(s, "    let __dims = self::dims({dim_args})?;");
    s.push_str(&printer.lengths(&params)?);
    let _ = writeln!(s, "    let _ = __dims;");
    let _ = writeln!(s, "    let __gpu = {cuda}::Gpu::new(0)?;");
    for (k, p) in params[..n_io].iter().enumerate() {
        let m = if k < n_in { "" } else { "mut " };
        let _ = writeln!(s, "    let {m}__d_{k} = __gpu.upload(&*{p})?;");
    }
    let launch_args: Vec<String> = (0..n_io)
        .map(|k| if k < n_in { format!("&__d_{k}") } else { format!("&mut __d_{k}") })
        .chain(params[n_io..].iter().cloned())
        .collect();
    let _ = writeln!(s, "    self::launch(&__gpu, {})?;", launch_args.join(", "));
    let _ = writeln!(s, "    __gpu.synchronize()?;");
    for (k, p) in params[..n_io].iter().enumerate().skip(n_in) {
        let _ = writeln!(s, "    {p}.copy_from_slice(&__gpu.download(&__d_{k})?);");
    }
    let _ = writeln!(s, "    Ok(())\n}}");
    s.push_str("}\n");
    Ok(s)
}

/// `pub mod <variant> { … }`: its code, `KERNELS`, `PLAN_JSON` and the
/// `steps` of [`GpuProgram::steps`] as Rust over `__dims`.
fn variant_text(printer: &Printer, v: &Variant, cubin: &str) -> DResult<String> {
    let cuda = format!("{FACADE}::cuda");
    let err = format!("{FACADE}::Error");
    let p = &v.program;
    let mut s = String::new();
    let what = match &v.point {
        None => "every dim symbolic".to_string(),
        Some(values) => {
            let at: Vec<String> = p.symbols.iter().zip(values).map(|(n, x)| format!("`{n}` = {x}")).collect();
            format!("the ShapeSet point {}", at.join(", "))
        }
    };
    let forms: Vec<String> = p.launches.iter().map(|l| format!("{:?}", l.form)).collect();
    let _ = writeln!(s, "/// The kernels for {what}: {}.", forms.join(", "));
    let _ = writeln!(s, "pub mod {} {{", v.name);
    // A variant without temporaries sizes nothing with it.
    let _ = writeln!(s, "#[allow(unused_imports)]\nuse {CHECKS} as __c;");
    let _ = writeln!(s, "const CUBIN_BYTES: &[u8] = {cubin};");
    let _ = writeln!(s, "const PTX_TEXT: &str = {};", lit(&v.ptx));
    let (arch, jit) = match v.sm {
        80 => ("sm_80", "which a driver can JIT for newer GPUs"),
        _ => ("sm_90a", "for 9.0 devices only: `wgmma` and TMA are not in later architectures' PTX"),
    };
    let _ = writeln!(s, "/// The ELF cubin for `{arch}`.\npub static CUBIN: &[u8] = CUBIN_BYTES;");
    let _ = writeln!(s, "/// The PTX (`.target {arch}`), {jit}.");
    let _ = writeln!(s, "pub static PTX: &str = PTX_TEXT;");
    let _ = writeln!(s, "/// [`CUBIN`] and [`PTX`] as the GPU runtime's module (`tgc::cuda`).");
    let _ = writeln!(
        s,
        "pub static MODULE: {cuda}::Module = {cuda}::Module {{ name: ::core::module_path!(), cubins: \
         &[{cuda}::Cubin {{ sm: {}, image: CUBIN_BYTES }}], ptx: PTX_TEXT }};",
        v.sm
    );
    let symbols: Vec<String> = p.launches.iter().map(|l| lit(&l.kernel.symbol())).collect();
    let _ = writeln!(s, "/// The kernels' `extern \"C\"` names, in launch order.");
    let _ = writeln!(s, "pub const KERNELS: [&str; {}] = [{}];", symbols.len(), symbols.join(", "));
    let _ = writeln!(
        s,
        "/// The Schedule Plan of the first planned tensor-core kernel as JSON (`000` §12.5); `None` without one."
    );
    let plan = match &v.plan_json {
        Some(j) => format!("Some({})", lit(j)),
        None => "None".into(),
    };
    let _ = writeln!(s, "pub const PLAN_JSON: Option<&str> = {plan};");

    // steps
    let _ = writeln!(s, "/// The launches at `__dims` (checked by the caller), in symbol order.");
    let _ = writeln!(
        s,
        "pub(super) fn steps(__dims: &[i64; {}]) -> ::core::result::Result<{cuda}::Steps, {err}> {{",
        printer.g.symbols.len()
    );
    let _ = writeln!(s, "    let _ = __dims;");
    let mut temps = Vec::new();
    for b in p.buffers.iter().filter(|b| b.role == crate::cpu::Role::Temp) {
        let shape = printer.shape(&b.shape)?;
        let what = lit(&format!("temporary `{}`", b.label));
        let bytes = b.dtype.size_bytes();
        temps.push(format!("__c::size({what}, &{shape}, {bytes})? * {bytes}"));
    }
    let of_buf = p.buffer_args();
    let _ = writeln!(s, "    let temps = vec![{}];", temps.join(", "));
    let mut steps = Vec::new();
    for l in &p.launches {
        let symbol = l.kernel.symbol();
        let mut grid = Vec::new();
        for e in &l.kernel.grid {
            grid.push(format!("{cuda}::grid_extent({}, {})?", lit(&symbol), grid_expr(e, &l.args)?));
        }
        let mut args = Vec::new();
        for (a, q) in l.args.iter().zip(&l.kernel.params) {
            let i32_param = q.kind == crate::gpu::dialect::ParamKind::I32;
            args.push(match a {
                LaunchArg::Buffer(b) => match of_buf[b.0 as usize] {
                    StepArg::Tensor(k) => format!("{cuda}::StepArg::Tensor({k})"),
                    StepArg::Temp(t) => format!("{cuda}::StepArg::Temp({t})"),
                    other => return Err(diag!(Internal, "buffer {} is bound to {other:?}", b.0)),
                },
                // The dims were checked to lie in `1..=i32::MAX`.
                LaunchArg::Dim(k) if i32_param => format!("{cuda}::StepArg::I32(__dims[{k}] as i32)"),
                LaunchArg::Dim(k) => format!("{cuda}::StepArg::I64(__dims[{k}])"),
                LaunchArg::Int(v) if i32_param => {
                    let v =
                        i32::try_from(*v).map_err(|_| diag!(Internal, "{v} does not fit parameter `{}`", q.name))?;
                    format!("{cuda}::StepArg::I32({v}i32)")
                }
                LaunchArg::Int(v) => format!("{cuda}::StepArg::I64({v}i64)"),
                LaunchArg::TensorMap => tensor_map_arg(l, q, &of_buf, &cuda)?,
            });
        }
        let [bx, by, bz] = l.block();
        steps.push(format!(
            "        {cuda}::Step {{\n            kernel: ::std::borrow::Cow::Borrowed({}),\n            launch: \
             {cuda}::Launch {{ grid: [{}], block: [{bx}, {by}, {bz}], dynamic_smem_bytes: {}, persistent: {}, \
             cluster: {} }},\n            args: vec![{}],\n        }},",
            lit(&symbol),
            grid.join(", "),
            l.kernel.launch_smem_bytes(),
            l.kernel.persistent,
            l.kernel.cluster,
            args.join(", ")
        ));
    }
    let _ = writeln!(s, "    let steps = vec![\n{}\n    ];", steps.join("\n"));
    let _ = writeln!(s, "    Ok({cuda}::Steps {{ temps, steps }})\n}}");
    s.push_str("}\n");
    Ok(s)
}

/// The Rust of a `StepArg::TensorMap` for parameter `q` of launch `l`
/// ([`crate::gpu::program::Launch::tensor_map`] with the dims as `__dims`).
///
/// Errors: `Internal` when `q` is not a tensor map or its tensor or scalars
/// are not bound as a map needs.
fn tensor_map_arg(
    l: &program::Launch,
    q: &crate::gpu::dialect::Param,
    of_buf: &[StepArg],
    cuda: &str,
) -> DResult<String> {
    use crate::gpu::dialect::{ParamKind, Swizzle};
    let ParamKind::TensorMap(m) = &q.kind else {
        return Err(diag!(Internal, "a tensor map bound to parameter `{}`", q.name));
    };
    let buffer = match l.args.get(m.tensor.0 as usize).and_then(|a| match a {
        LaunchArg::Buffer(b) => of_buf.get(b.0 as usize),
        _ => None,
    }) {
        Some(StepArg::Tensor(k)) => format!("{cuda}::BufferArg::Tensor({k})"),
        Some(StepArg::Temp(k)) => format!("{cuda}::BufferArg::Temp({k})"),
        _ => return Err(diag!(Internal, "the tensor of tensor map `{}` is not bound to a buffer", q.name)),
    };
    let Some(ParamKind::Ptr { dtype, .. }) = l.kernel.params.get(m.tensor.0 as usize).map(|p| p.kind) else {
        return Err(diag!(Internal, "the tensor of tensor map `{}` is not a pointer", q.name));
    };
    let value = |p| grid_expr(&Expr::Param(p), &l.args).map(|e| format!("({e}) as u64"));
    Ok(format!(
        "{cuda}::StepArg::TensorMap({cuda}::MapArg {{ buffer: {buffer}, dtype: {FACADE}::DType::{dtype:?}, \
         dims: [{}, {}], row_stride_bytes: {} * {}, box_dims: [{}, {}], swizzle_128b: {} }})",
        value(m.dims[0])?,
        value(m.dims[1])?,
        value(m.row_stride)?,
        dtype.size_bytes(),
        m.box_dims[0],
        m.box_dims[1],
        m.swizzle == Swizzle::B128
    ))
}

/// A grid expression of a kernel launched with `args` as Rust of type
/// `i64` over `__dims`, with [`BinOp::eval`]'s value wherever that is
/// defined (a property test below holds it to that). `+`, `-`, `*` wrap:
/// the dims were checked, so every size the grid is computed from fits
/// `i64`; division, floor division and `%` are only by positive constants
/// (block sizes, strides), anything else is `Internal`.
fn grid_expr(e: &Expr, args: &[LaunchArg]) -> DResult<String> {
    Ok(match e {
        Expr::Const(v) => format!("{v}i64"),
        Expr::Param(p) => match args.get(p.0 as usize) {
            Some(LaunchArg::Dim(k)) => format!("__dims[{k}]"),
            Some(LaunchArg::Int(v)) => format!("{v}i64"),
            _ => return Err(diag!(Internal, "a grid reads parameter {} that is not a dim", p.0)),
        },
        Expr::Bin(op, a, b) => {
            let (x, y) = (grid_expr(a, args)?, grid_expr(b, args)?);
            match op {
                BinOp::Add => format!("({x}).wrapping_add({y})"),
                BinOp::Sub => format!("({x}).wrapping_sub({y})"),
                BinOp::Mul => format!("({x}).wrapping_mul({y})"),
                BinOp::Div | BinOp::Rem | BinOp::FloorDiv => {
                    let Expr::Const(q @ 1..) = **b else {
                        return Err(diag!(Internal, "a grid divides by `{y}`, not a positive constant"));
                    };
                    if *op == BinOp::FloorDiv {
                        format!("({x}).div_euclid({q}i64)")
                    } else {
                        format!("({x}) {} {q}i64", op.symbol())
                    }
                }
                BinOp::Min => format!("({x}).min({y})"),
                BinOp::Max => format!("({x}).max({y})"),
                BinOp::Lt => format!("(({x}) < ({y})) as i64"),
                BinOp::Le => format!("(({x}) <= ({y})) as i64"),
                other => return Err(diag!(Internal, "a grid uses `{}`", other.symbol())),
            }
        }
        Expr::Select(c, a, b) => {
            format!(
                "if ({}) != 0 {{ {} }} else {{ {} }}",
                grid_expr(c, args)?,
                grid_expr(a, args)?,
                grid_expr(b, args)?
            )
        }
        _ => return Err(diag!(Internal, "a grid reads a thread, block or variable")),
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sym::Dim;
    use crate::test_graphs::shape;
    use crate::tiny::{Output, UnaryOp};
    use crate::DType;

    /// Every grid of the generic (SIMT) variant prints as Rust, including
    /// one whose extent floors a symbolic size: every second element of
    /// `x[H]` is `⌊(H + 1)/2⌋` elements, a [`BinOp::FloorDiv`] in the grid.
    #[test]
    fn a_grid_over_a_floored_symbolic_size_prints() {
        let mut g = Graph::new("every_second");
        let x = g.input("x", DType::F32, &shape(&["H"])).unwrap();
        let s = g.shrink(x, &[Dim::int(0)], &shape(&["H"]), &[Dim::int(2)]).unwrap();
        let y = g.unary(UnaryOp::Relu, s).unwrap();
        g.outputs.push(Output { name: "y".into(), node: y });
        g.declare_input_symbols().unwrap();
        let program = driver::lower_program(&g).unwrap();
        let mut floored = false;
        for l in &program.launches {
            for e in &l.kernel.grid {
                let mut floors = false;
                e.visit(&mut |x| floors |= matches!(x, Expr::Bin(BinOp::FloorDiv, ..)));
                let text = grid_expr(e, &l.args).unwrap();
                assert_eq!(floors, text.contains(".div_euclid(2i64)"), "{text}");
                floored |= floors;
            }
        }
        assert!(floored, "no grid floors a size; the test no longer covers FloorDiv");
    }

    /// The value of a printed grid expression as Rust gives it: a tiny
    /// reader of exactly the Rust `grid_expr` prints, each form given its
    /// meaning by Rust's own `i64` operations (`/` and `%` panic where
    /// `checked_div`/`checked_rem` give `None`), and typed, so a printed
    /// `bool` where an `i64` belongs fails as rustc would fail it.
    mod printed {
        #[derive(Clone, Copy, Debug, PartialEq)]
        pub enum V {
            I(i64),
            B(bool),
        }

        pub fn value(text: &str, dims: &[i64]) -> Result<i64, String> {
            let mut r = Reader { s: text.as_bytes(), at: 0, dims };
            let v = r.expr()?;
            r.skip();
            match (v, r.at == r.s.len()) {
                (V::I(v), true) => Ok(v),
                (v, _) => Err(format!("{v:?}, then `{}`", &text[r.at..])),
            }
        }

        struct Reader<'a> {
            s: &'a [u8],
            at: usize,
            dims: &'a [i64],
        }

        impl Reader<'_> {
            fn skip(&mut self) {
                while self.s.get(self.at) == Some(&b' ') {
                    self.at += 1;
                }
            }

            fn eat(&mut self, tok: &str) -> bool {
                self.skip();
                let hit = self.s[self.at..].starts_with(tok.as_bytes());
                if hit {
                    self.at += tok.len();
                }
                hit
            }

            fn expect(&mut self, tok: &str) -> Result<(), String> {
                if self.eat(tok) {
                    Ok(())
                } else {
                    Err(format!("`{tok}` expected at byte {}", self.at))
                }
            }

            fn int(&mut self, v: V) -> Result<i64, String> {
                match v {
                    V::I(v) => Ok(v),
                    V::B(_) => Err(format!("a bool where an i64 belongs, byte {}", self.at)),
                }
            }

            /// `postfix [(< | <= | !=) postfix]` (`/`, `%` bind tighter).
            fn expr(&mut self) -> Result<V, String> {
                let a = self.term()?;
                for (tok, op) in [("<=", i64::le as fn(&i64, &i64) -> bool), ("<", i64::lt), ("!=", i64::ne)] {
                    if self.eat(tok) {
                        let (x, b) = (self.int(a)?, self.term()?);
                        return Ok(V::B(op(&x, &self.int(b)?)));
                    }
                }
                Ok(a)
            }

            fn term(&mut self) -> Result<V, String> {
                let a = self.postfix()?;
                for (tok, op) in [("/", i64::checked_div as fn(i64, i64) -> Option<i64>), ("%", i64::checked_rem)] {
                    if self.eat(tok) {
                        let (x, b) = (self.int(a)?, self.postfix()?);
                        return op(x, self.int(b)?).map(V::I).ok_or_else(|| format!("`{tok}` panics"));
                    }
                }
                Ok(a)
            }

            fn postfix(&mut self) -> Result<V, String> {
                let mut v = self.primary()?;
                loop {
                    if self.eat("as i64") {
                        v = V::I(match v {
                            V::I(x) => x,
                            V::B(b) => b as i64,
                        });
                    } else if self.eat(".") {
                        let start = self.at;
                        while self.s[self.at].is_ascii_alphanumeric() || self.s[self.at] == b'_' {
                            self.at += 1;
                        }
                        let name = std::str::from_utf8(&self.s[start..self.at]).unwrap().to_string();
                        self.expect("(")?;
                        let (x, y) = (self.int(v)?, self.expr()?);
                        let y = self.int(y)?;
                        self.expect(")")?;
                        v = V::I(match name.as_str() {
                            "wrapping_add" => x.wrapping_add(y),
                            "wrapping_sub" => x.wrapping_sub(y),
                            "wrapping_mul" => x.wrapping_mul(y),
                            "div_euclid" => x.checked_div_euclid(y).ok_or("`div_euclid` panics")?,
                            "min" => x.min(y),
                            "max" => x.max(y),
                            other => return Err(format!("no method `{other}` on i64 here")),
                        });
                    } else {
                        return Ok(v);
                    }
                }
            }

            fn primary(&mut self) -> Result<V, String> {
                if self.eat("(") {
                    let v = self.expr()?;
                    self.expect(")")?;
                    return Ok(v);
                }
                if self.eat("__dims[") {
                    let k = self.literal()?;
                    self.expect("]")?;
                    return self.dims.get(k as usize).map(|&d| V::I(d)).ok_or_else(|| format!("no dim {k}"));
                }
                if self.eat("if ") {
                    let c = self.expr()?;
                    self.expect("{")?;
                    let a = self.expr()?;
                    self.expect("}")?;
                    self.expect("else")?;
                    self.expect("{")?;
                    let b = self.expr()?;
                    self.expect("}")?;
                    return match c {
                        V::B(true) => Ok(a),
                        V::B(false) => Ok(b),
                        V::I(_) => Err("an `if` on an i64".into()),
                    };
                }
                Ok(V::I(self.literal()?))
            }

            /// A decimal literal, with or without its `i64` suffix.
            fn literal(&mut self) -> Result<i64, String> {
                self.skip();
                let start = self.at;
                if self.s.get(self.at) == Some(&b'-') {
                    self.at += 1;
                }
                while self.s.get(self.at).is_some_and(u8::is_ascii_digit) {
                    self.at += 1;
                }
                let digits = std::str::from_utf8(&self.s[start..self.at]).unwrap();
                let v = digits.parse().map_err(|_| format!("a literal expected at byte {start}"))?;
                self.eat("i64");
                Ok(v)
            }
        }
    }

    /// The launch arguments of the property test: parameter `p` is dim
    /// `p` for `p < 3`, the constant 7 for `p = 3`.
    fn grid_args() -> Vec<LaunchArg> {
        vec![LaunchArg::Dim(0), LaunchArg::Dim(1), LaunchArg::Dim(2), LaunchArg::Int(7)]
    }

    /// A grid expression over the operations `grid_expr` prints: dims,
    /// constants and integers of either sign, `+ - * min max < <=`,
    /// selects, and `/ % floord` by positive constants.
    fn grid() -> proptest::strategy::BoxedStrategy<Expr> {
        use crate::gpu::dialect::ParamId;
        use proptest::prelude::*;
        let leaf = prop_oneof![(-40..40i64).prop_map(Expr::c), (0..4u32).prop_map(|p| Expr::Param(ParamId(p)))];
        leaf.prop_recursive(4, 32, 3, |inner| {
            let total = prop_oneof![
                Just(BinOp::Add),
                Just(BinOp::Sub),
                Just(BinOp::Mul),
                Just(BinOp::Min),
                Just(BinOp::Max),
                Just(BinOp::Lt),
                Just(BinOp::Le)
            ];
            let division = prop_oneof![Just(BinOp::Div), Just(BinOp::Rem), Just(BinOp::FloorDiv)];
            prop_oneof![
                (total, inner.clone(), inner.clone()).prop_map(|(op, a, b)| Expr::bin(op, a, b)),
                (division, inner.clone(), 1..9i64).prop_map(|(op, a, q)| Expr::bin(op, a, Expr::c(q))),
                (inner.clone(), inner.clone(), inner).prop_map(|(c, a, b)| c.select(a, b)),
            ]
        })
        .boxed()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// The Rust a grid prints as has the value [`Expr::eval`] gives the
        /// grid, at dims of either sign (where C truncation, Rust's `/` and
        /// floor division part), wherever that value is defined.
        #[test]
        fn printed_grids_mean_what_eval_says(e in grid(), dims in proptest::array::uniform3(-50..50i64)) {
            let args = grid_args();
            let mut leaf = |x: crate::gpu::dialect::Leaf| match x {
                crate::gpu::dialect::Leaf::Param(p) => match args[p.0 as usize] {
                    LaunchArg::Dim(k) => Ok(dims[k]),
                    LaunchArg::Int(v) => Ok(v),
                    LaunchArg::Buffer(_) | LaunchArg::TensorMap => Err(()),
                },
                other => panic!("the strategy made a {other:?}"),
            };
            let text = grid_expr(&e, &args).map_err(|d| proptest::test_runner::TestCaseError::fail(d.to_string()))?;
            if let Ok(v) = e.eval(&mut leaf, &|_| ()) {
                proptest::prop_assert_eq!(printed::value(&text, &dims), Ok(v), "{}", text);
            }
        }
    }
}

//! The model API of a build-helper kernel (`000` §8: ConstPool,
//! `model_init`/`model_run`/`model_free`): Rust items added to the kernel's
//! module, and the C ABI's declarations for the library's header.
//!
//! A model is a kernel whose graph inputs are split by the build script
//! ([`crate::build::Kernels::model`]) into *run inputs*, given to every
//! run, and *weights*, every other input, whose shapes must be static.
//! For kernel `NAME` the module gains:
//!
//! - `WEIGHTS: &[tgc::model::WeightSpec]`, the weights in ConstPool order
//!   (graph order);
//! - `ARENAS: &[tgc::model::ArenaSize]`, the Memory Arena's bytes at each
//!   ShapeSet point against the sum of the temporaries;
//! - `struct Model` with `init(&mut dyn WeightSource)` (`model_init`: the
//!   weights into one [`tgc_runtime::model::ConstPool`]), `run(run
//!   inputs…, outputs…, dims…)` (`model_run`: the module's `run` with the
//!   weights from the pool, so the same checks and ShapeSet dispatch), and
//!   `const_pool()`; dropping it is `model_free`;
//! - the C ABI, `#[unsafe(no_mangle)]` functions `tgc_NAME_model_init`,
//!   `tgc_NAME_model_run`, `tgc_NAME_model_free` and `tgc_NAME_last_error`,
//!   exported from the crate's `cdylib` or `staticlib` and declared by
//!   [`ModelText::header`]. Slices cross as `(pointer, element count)`;
//!   the checks of `tgc_runtime::model` (`c_slice`, `c_disjoint`) refuse a
//!   null or misaligned pointer, a negative count and an output that
//!   overlaps another argument before the Rust API's own checks run; a
//!   failure is a nonzero status with its message from
//!   `tgc_NAME_last_error()`, and a panic is caught (status
//!   `TGC_PANIC`), never unwound into C;
//! - with the build helper's `sm80`, `sm80::Model` in the module's `sm80`
//!   submodule ([`sm80_model_items`]): the ConstPool on the device and a
//!   CUDA Graph per shape cluster.

use std::fmt::Write;

use super::api::{lit, param_names, rust_type, FACADE};
use crate::diag;
use crate::diag::DResult;
use crate::tiny::Graph;
use crate::DType;

/// A model's generated text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelText {
    /// Items for the kernel's module (after `run`).
    pub items: String,
    /// The C declarations of its ABI, for the library's header (which
    /// starts with `tgc_runtime::model::c_decl()`).
    pub header: String,
}

/// One ShapeSet point's arena: the point, the arena's bytes and the
/// temporaries' unshared bytes (`crate::cpu::arena::Arena::bytes`,
/// `unshared_bytes`).
pub type PointArena = (Vec<(String, i64)>, i64, i64);

/// The model items of kernel `name` over `g`, with `run_inputs` the graph
/// inputs given to each run and `arenas` the ShapeSet points' arena sizes.
///
/// Errors: `UnknownName` for a run input the graph does not have;
/// `Unsupported` for one named twice, or a weight whose shape has a symbol
/// (a weight is loaded once, so its shape cannot depend on the run).
pub fn model_items(name: &str, g: &Graph, run_inputs: &[String], arenas: &[PointArena]) -> DResult<ModelText> {
    let names = crate::pipeline::input_names(g);
    let weights = weights(name, g, run_inputs)?;
    let params = param_names(g);
    let ins = g.inputs();
    let (n_in, n_out) = (ins.len(), g.outputs.len());
    let ty = |id| format!("{}{}", g.dtype(id), crate::tiny::infer::fmt_shape(g.shape(id)));
    let slot = |i: usize| weights.iter().position(|w| w.0 == i);

    let mut s = String::new();
    let runs: Vec<String> = (0..n_in).filter(|&i| slot(i).is_none()).map(|i| format!("`{}`", names[i])).collect();
    let runs = if runs.is_empty() { "none".to_string() } else { runs.join(", ") };
    let _ = writeln!(
        s,
        "/// The weights of [`Model`], in ConstPool order: the graph inputs other than the run inputs ({runs})."
    );
    let _ = writeln!(s, "pub const WEIGHTS: &[{FACADE}::model::WeightSpec] = &[");
    for (i, dt, shape) in &weights {
        let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
        let _ = writeln!(
            s,
            "    {FACADE}::model::WeightSpec {{ name: {}, dtype: {FACADE}::DType::{}, shape: &[{}] }},",
            lit(&names[*i]),
            dtype_variant(*dt),
            dims.join(", ")
        );
    }
    s.push_str("];\n");
    let _ = writeln!(
        s,
        "/// The Memory Arena of each ShapeSet point: the bytes the entry point takes for its temporaries \
         (slots shared by live range) and what they would take unshared."
    );
    let _ = writeln!(s, "pub const ARENAS: &[{FACADE}::model::ArenaSize] = &[");
    for (point, peak, sum) in arenas {
        let pairs: Vec<String> = point.iter().map(|(k, v)| format!("({}, {v})", lit(k))).collect();
        let _ = writeln!(
            s,
            "    {FACADE}::model::ArenaSize {{ point: &[{}], peak_bytes: {peak}u64, sum_bytes: {sum}u64 }},",
            pairs.join(", ")
        );
    }
    s.push_str("];\n");

    // The Rust model.
    let model_doc = format!(
        "Kernel `{name}` as a model (`000` §8): [`Model::init`] loads its {} weights ([`WEIGHTS`]) once into a \
         ConstPool; [`Model::run`] takes only the run inputs ({runs}), the outputs and the dims. Dropping it frees \
         the pool. Its temporaries live in the calling thread's scratch arena ([`ARENAS`]), kept between runs: a \
         run at dims the thread has run before allocates nothing.",
        weights.len()
    );
    let _ = writeln!(s, "#[doc = {}]", lit(&model_doc));
    s.push_str("pub struct Model {\n    pool: ::tgc::model::ConstPool,\n}\n");
    let run_params: Vec<usize> = (0..n_in).filter(|&i| slot(i).is_none()).collect();
    let sig: Vec<String> = run_params
        .iter()
        .map(|&i| format!("{}: &[{}]", params[i], rust_type(g.dtype(ins[i]))))
        .chain(
            g.outputs
                .iter()
                .enumerate()
                .map(|(k, o)| format!("{}: &mut [{}]", params[n_in + k], rust_type(g.dtype(o.node)))),
        )
        .chain(g.symbols.iter().enumerate().map(|(k, _)| format!("{}: usize", params[n_in + n_out + k])))
        .collect();
    let args: Vec<String> = (0..n_in)
        .map(|i| match slot(i) {
            Some(w) => format!("self.pool.get::<{}>({w})", rust_type(g.dtype(ins[i]))),
            None => params[i].clone(),
        })
        .chain(params[n_in..].iter().cloned())
        .collect();
    let _ = write!(
        s,
        "impl Model {{
    /// `model_init`: each weight of [`WEIGHTS`] from `source`, into one ConstPool.
    ///
    /// # Errors
    ///
    /// The source's error, naming the weight; `OutOfMemory` when the pool cannot be allocated.
    pub fn init(source: &mut dyn {FACADE}::model::WeightSource) -> ::core::result::Result<Model, {FACADE}::Error> {{
        ::core::result::Result::Ok(Model {{ pool: {FACADE}::model::ConstPool::load(WEIGHTS, source)? }})
    }}

    /// The model's ConstPool.
    pub fn const_pool(&self) -> &{FACADE}::model::ConstPool {{
        &self.pool
    }}

    /// `model_run`: [`run`] with the weights from the ConstPool.
    ///
    /// # Errors
    ///
    /// As [`run`].
    pub fn run(&self, {sig}) -> ::core::result::Result<(), {FACADE}::Error> {{
        self::run({args})
    }}
}}
",
        sig = sig.join(", "),
        args = args.join(", ")
    );

    // The C ABI.
    let c_name = name.strip_prefix("r#").unwrap_or(name);
    let model_ty = format!("tgc_{c_name}_model");
    let _ = write!(
        s,
        "/// `tgc_{c_name}_model_init` of the C ABI: [`Model::init`] from `n` named weights; `*out` gets the model.
///
/// # Safety
///
/// `weights` points to `n` `tgc_weight`s whose names are NUL-terminated and whose data is readable for
/// `bytes` bytes; `out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern \"C\" fn tgc_{c_name}_model_init(weights: *const {FACADE}::model::CWeight, n: i64, out: *mut *mut Model) -> i32 {{
    {FACADE}::model::c_call(|| {{
        if out.is_null() {{
            return ::core::result::Result::Err({FACADE}::model::c_invalid(\"`out` is null\".into()));
        }}
        // SAFETY: the function's contract.
        let mut source = unsafe {{ {FACADE}::model::CWeights::new(weights, n)? }};
        source.check_names(WEIGHTS)?;
        let model = Model::init(&mut source).map_err({FACADE}::model::c_error)?;
        // SAFETY: `out` is writable (contract) and not null (checked).
        unsafe {{ *out = ::std::boxed::Box::into_raw(::std::boxed::Box::new(model)) }};
        ::core::result::Result::Ok(())
    }})
}}

/// `tgc_{c_name}_model_free` of the C ABI: drops a model of `tgc_{c_name}_model_init` (null: nothing).
///
/// # Safety
///
/// `model` is null or a model of `tgc_{c_name}_model_init` not freed before and not in use.
#[unsafe(no_mangle)]
pub unsafe extern \"C\" fn tgc_{c_name}_model_free(model: *mut Model) {{
    if !model.is_null() {{
        // SAFETY: the function's contract: made by `Box::into_raw` in init.
        drop(unsafe {{ ::std::boxed::Box::from_raw(model) }});
    }}
}}

/// `tgc_{c_name}_last_error` of the C ABI: the message of the calling thread's last failure.
#[unsafe(no_mangle)]
pub extern \"C\" fn tgc_{c_name}_last_error() -> *const ::core::ffi::c_char {{
    {FACADE}::model::last_error()
}}
"
    );
    // model_run: (pointer, count) per run input and output, then the dims.
    let mut c_params = vec!["model: *const Model".to_string()];
    let mut h_params = vec![format!("const {model_ty}* model")];
    let mut body = String::new();
    let mut in_args = Vec::new();
    let mut out_args = Vec::new();
    for (k, &i) in run_params.iter().enumerate() {
        let (p, dt) = (&params[i], g.dtype(ins[i]));
        c_params.push(format!("{p}: *const {}, __len_{p}: i64", rust_type(dt)));
        h_params.push(format!("const {}* {}, int64_t {}", super::c::storage_ty(dt), c_ident(p), c_len(p, &params)));
        let _ = writeln!(
            body,
            "        let ({p}, __in{k}) = unsafe {{ {FACADE}::model::c_slice({}, {p}, __len_{p})? }};",
            lit(&names[i])
        );
        in_args.push(format!("__in{k}"));
    }
    for (k, o) in g.outputs.iter().enumerate() {
        let (p, dt) = (&params[n_in + k], g.dtype(o.node));
        c_params.push(format!("{p}: *mut {}, __len_{p}: i64", rust_type(dt)));
        h_params.push(format!("{}* {}, int64_t {}", super::c::storage_ty(dt), c_ident(p), c_len(p, &params)));
        let _ = writeln!(
            body,
            "        let ({p}, __out{k}) = unsafe {{ {FACADE}::model::c_slice_mut({}, {p}, __len_{p})? }};",
            lit(&o.name)
        );
        out_args.push(format!("__out{k}"));
    }
    let _ =
        writeln!(body, "        {FACADE}::model::c_disjoint(&[{}], &[{}])?;", in_args.join(", "), out_args.join(", "));
    for (k, sym) in g.symbols.iter().enumerate() {
        let p = &params[n_in + n_out + k];
        c_params.push(format!("{p}: i64"));
        h_params.push(format!("int64_t {}", c_ident(p)));
        let _ = writeln!(
            body,
            "        let {p} = usize::try_from({p}).map_err(|_| {FACADE}::model::c_error({FACADE}::Error::InvalidDim {{ dim: {}.into(), value: {p} }}))?;",
            lit(&sym.name)
        );
    }
    let call_args: Vec<&str> =
        run_params.iter().map(|&i| params[i].as_str()).chain(params[n_in..].iter().map(String::as_str)).collect();
    let _ = write!(
        s,
        "/// `tgc_{c_name}_model_run` of the C ABI: [`Model::run`] on C buffers, each a pointer and its element count.
///
/// # Safety
///
/// `model` is null or a live model of `tgc_{c_name}_model_init`; each pointer is readable (an output:
/// writable) for its count of elements and not written by anyone else during the call.
#[unsafe(no_mangle)]
pub unsafe extern \"C\" fn tgc_{c_name}_model_run({}) -> i32 {{
    {FACADE}::model::c_call(|| {{
        // SAFETY (of each `unsafe` below): the function's contract; `c_slice` checks null, alignment and
        // count, `c_disjoint` that no output overlaps another argument.
        let ::core::option::Option::Some(model) = (unsafe {{ model.as_ref() }}) else {{
            return ::core::result::Result::Err({FACADE}::model::c_invalid(\"the model is null\".into()));
        }};
{body}        model.run({}).map_err({FACADE}::model::c_error)
    }})
}}
",
        c_params.join(", "),
        call_args.join(", ")
    );

    // The header's declarations.
    let mut h = String::new();
    let wlist: Vec<String> = weights
        .iter()
        .map(|(i, dt, shape)| {
            let dims: Vec<String> = shape.iter().map(i64::to_string).collect();
            format!("{} {dt}[{}]", names[*i], dims.join(", "))
        })
        .collect();
    let list = |v: Vec<String>| v.iter().map(|w| format!(" *   {w}\n")).collect::<String>();
    let inputs: Vec<String> = run_params.iter().map(|&i| format!("{} {}", names[i], ty(ins[i]))).collect();
    let outputs: Vec<String> = g.outputs.iter().map(|o| format!("{} {}", o.name, ty(o.node))).collect();
    let dims: Vec<&str> = g.symbols.iter().map(|s| s.name.as_str()).collect();
    let _ = write!(
        h,
        "
/* Model `{c_name}` (graph `{}`).
 * Weights (each a tgc_weight: its name, its dense row-major little-endian bytes):
{} * Run inputs:
{} * Outputs:
{} * Dims: {}
 *
 * tgc_{c_name}_model_init copies the weights into the model's ConstPool (the caller's buffers
 * may be freed after) and sets *out; every weight must be given once. tgc_{c_name}_model_run
 * takes each input and output as (pointer, element count), then the dims; outputs must not
 * overlap other arguments. Both return TGC_OK or a TGC_* status whose message is
 * tgc_{c_name}_last_error(). tgc_{c_name}_model_free frees a model (null: nothing). A model may
 * be run from several threads at once. */
typedef struct {model_ty} {model_ty};
int32_t tgc_{c_name}_model_init(const tgc_weight* weights, int64_t n_weights, {model_ty}** out);
int32_t tgc_{c_name}_model_run({});
void tgc_{c_name}_model_free({model_ty}* model);
const char* tgc_{c_name}_last_error(void);
",
        g.name,
        list(wlist),
        list(inputs),
        list(outputs),
        if dims.is_empty() { "none".to_string() } else { dims.join(", ") },
        h_params.join(", ")
    );
    Ok(ModelText { items: s, header: h })
}

/// A model's weights: every graph input not in `run_inputs`, as (input
/// index, dtype, static shape), in graph order — the ConstPool's order.
///
/// Errors: as [`model_items`].
fn weights(name: &str, g: &Graph, run_inputs: &[String]) -> DResult<Vec<(usize, DType, Vec<i64>)>> {
    let names = crate::pipeline::input_names(g);
    for (i, r) in run_inputs.iter().enumerate() {
        if !names.contains(r) {
            return Err(diag!(
                UnknownName,
                "model `{name}`: the graph has no input `{r}` (its inputs: {})",
                names.join(", ")
            ));
        }
        if run_inputs[..i].contains(r) {
            return Err(diag!(Unsupported, "model `{name}`: run input `{r}` is named twice"));
        }
    }
    let mut weights = Vec::new();
    for (i, (&id, n)) in g.inputs().iter().zip(&names).enumerate() {
        if run_inputs.contains(n) {
            continue;
        }
        let shape: Option<Vec<i64>> = g.shape(id).iter().map(|d| d.as_int()).collect();
        let Some(shape) = shape else {
            return Err(diag!(
                Unsupported,
                "model `{name}`: weight `{n}` has shape {}{}, which depends on the run; a weight's shape must be \
                 static (give `{n}` to model() as a run input)",
                g.dtype(id),
                crate::tiny::infer::fmt_shape(g.shape(id))
            ));
        };
        weights.push((i, g.dtype(id), shape));
    }
    Ok(weights)
}

/// `tgc::DType`'s variant for `d`.
fn dtype_variant(d: DType) -> &'static str {
    match d {
        DType::F16 => "F16",
        DType::BF16 => "BF16",
        DType::F32 => "F32",
        DType::I32 => "I32",
        DType::Bool => "Bool",
    }
}

/// `p` as a C parameter name: a C keyword gets a `_` suffix.
fn c_ident(p: &str) -> String {
    const C_KEYWORDS: &[&str] = &[
        "auto", "bool", "char", "double", "float", "int", "long", "register", "restrict", "short", "signed", "sizeof",
        "switch", "case", "default", "goto", "typedef", "union", "unsigned", "void", "volatile", "inline", "extern",
        "static", "const", "enum", "struct", "for", "if", "else", "while", "do", "return", "break", "continue",
        "model",
    ];
    if C_KEYWORDS.contains(&p) {
        format!("{p}_")
    } else {
        p.to_string()
    }
}

/// The C name of `p`'s element count: `{p}_len`, with `_` added until no
/// parameter has that name.
fn c_len(p: &str, params: &[String]) -> String {
    let mut n = format!("{p}_len");
    while params.contains(&n) {
        n.push('_');
    }
    n
}

/// The items of a model whose weights are embedded in the binary (an ONNX
/// model's initializers, [`crate::build::Kernels::onnx`]): `WEIGHT_DATA`,
/// the bytes of the `.safetensors` file at `path` (read by
/// `include_bytes!` at compile time), and `Model::embedded`.
pub fn embedded_weights_items(path: &str) -> String {
    format!(
        "/// The model's weights as the bytes of a `.safetensors` file, embedded at build time.\n\
         pub static WEIGHT_DATA: &[u8] = include_bytes!({});\n\n\
         impl Model {{\n    \
             /// [`Model::init`] from the embedded weights ([`WEIGHT_DATA`]).\n    \
             ///\n    \
             /// # Errors\n    \
             ///\n    \
             /// `OutOfMemory` when the pool cannot be allocated.\n    \
             pub fn embedded() -> ::core::result::Result<Model, {FACADE}::Error> {{\n        \
                 Model::init(&mut {FACADE}::model::Safetensors::new(WEIGHT_DATA))\n    \
             }}\n\
         }}\n",
        lit(path)
    )
}

/// The whole header of library `lib` with the declarations of its models.
pub fn header(lib: &str, decls: &[String]) -> String {
    let guard = format!("TGC_{}_H", lib.to_ascii_uppercase());
    format!(
        "/* Generated by tgc's build helper: the C ABI of the models of library `{lib}` (`000` §8).
 * Do not edit. Link the crate that compiled them as a cdylib or staticlib. */
#ifndef {guard}
#define {guard}
#include <stdint.h>
#ifdef __cplusplus
extern \"C\" {{
#endif
{}{}
#ifdef __cplusplus
}}
#endif
#endif
",
        tgc_runtime::model::c_decl(),
        decls.concat()
    )
}

/// The GPU half of model `name` (build helper, [`crate::build::Kernels::model`]
/// with [`crate::build::Kernels::sm80`]): items for the kernel's `sm80`
/// submodule ([`super::gpu_api`]), whose `dims`, `launch` and `__c` they use.
///
/// `sm80::Model::new(&host)` opens device 0 on a stream of its own and
/// uploads the host model's ConstPool in one allocation
/// (`Gpu::upload_pool`); `run(run inputs…, outputs…, dims…)` takes host
/// slices, as the host `Model::run`: it checks the dims and lengths,
/// copies the run inputs into device buffers kept per dims tuple (the
/// shape cluster of `000` §8), runs the launches — directly the first
/// time a cluster runs, captured as a CUDA Graph the second, replayed
/// after (`tgc::cuda::Graphs`; a replay reads and writes the buffers it
/// captured, which is why they are kept) — and copies the outputs back.
///
/// Errors: as [`model_items`].
pub fn sm80_model_items(name: &str, g: &Graph, run_inputs: &[String]) -> DResult<String> {
    let weights = weights(name, g, run_inputs)?;
    let slot = |i: usize| weights.iter().position(|w| w.0 == i);
    let names = crate::pipeline::input_names(g);
    let params = param_names(g);
    let ins = g.inputs();
    let (n_in, n_out) = (ins.len(), g.outputs.len());
    let n_io = n_in + n_out;
    let printer = super::api::Printer { g };
    let shapes = printer.io_shapes()?;
    let cuda = format!("{FACADE}::cuda");
    let err = format!("{FACADE}::Error");
    // The tensors kept per dims: run inputs, then outputs (graph indices).
    let kept: Vec<usize> = (0..n_in).filter(|&i| slot(i).is_none()).chain(n_in..n_io).collect();
    let dtype = |k: usize| if k < n_in { g.dtype(ins[k]) } else { g.dtype(g.outputs[k - n_in].node) };
    let kept_ty: Vec<String> = kept.iter().map(|&k| format!("{cuda}::CudaSlice<{}>", rust_type(dtype(k)))).collect();
    let n_sym = g.symbols.len();
    let sig: Vec<String> = kept
        .iter()
        .map(|&k| {
            let r = if k < n_in { "&" } else { "&mut " };
            format!("{}: {r}[{}]", params[k], rust_type(dtype(k)))
        })
        .chain(params[n_io..].iter().map(|p| format!("{p}: usize")))
        .collect();
    let dim_args = params[n_io..].join(", ");

    let mut s = String::new();
    let doc = format!(
        "Model `{name}` on device 0 (`000` §8): the host [`super::Model`]'s ConstPool uploaded once, in one \
         allocation; [`Model::run`] takes host slices as `super::Model::run` does, through device buffers kept per \
         dims tuple (a shape cluster), and runs the graph's launches directly the first time a cluster runs, \
         captured as a CUDA Graph the second, and as a replay of that graph (one driver call) after."
    );
    let _ = writeln!(s, "#[doc = {}]", lit(&doc));
    let _ = writeln!(
        s,
        "pub struct Model {{
    gpu: {cuda}::Gpu,
    pool: {cuda}::DeviceConstPool,
    graphs: {cuda}::Graphs<[i64; {n_sym}]>,
    kept: ::std::collections::HashMap<[i64; {n_sym}], ({},)>,
}}",
        kept_ty.join(", ")
    );
    let _ = writeln!(
        s,
        "impl Model {{
    /// Opens device 0 on a stream of its own and uploads `host`'s ConstPool.
    ///
    /// # Errors
    ///
    /// `NoDevice` without a driver or GPU; `Kernel` when a stream, the allocation or the copy fails.
    pub fn new(host: &super::Model) -> ::core::result::Result<Model, {err}> {{
        let gpu = {cuda}::Gpu::new(0)?.new_stream()?;
        let pool = gpu.upload_pool(host.const_pool())?;
        ::core::result::Result::Ok(Model {{ gpu, pool, graphs: ::core::default::Default::default(), kept: ::std::collections::HashMap::new() }})
    }}

    /// The device handle the model runs on (its own stream).
    pub fn gpu(&self) -> &{cuda}::Gpu {{
        &self.gpu
    }}

    /// The ConstPool on the device.
    pub fn const_pool(&self) -> &{cuda}::DeviceConstPool {{
        &self.pool
    }}

    /// The shape clusters whose launches are captured as a CUDA Graph so far.
    pub fn captured(&self) -> usize {{
        self.graphs.captured()
    }}

    /// `model_run` on the GPU (see [`Model`]); returns when the outputs hold the results.
    ///
    /// # Errors
    ///
    /// As `super::Model::run` for the dims and lengths (before any device work); those of [`launch`]; `Kernel`
    /// when a copy, an allocation, the capture or a replay fails.
    pub fn run(&mut self, {}) -> ::core::result::Result<(), {err}> {{
        let __dims = self::dims({dim_args})?;",
        sig.join(", ")
    );
    for &k in &kept {
        let (name, shape, bytes) = &shapes[k];
        let _ = writeln!(s, "        __c::len({}, {}.len(), &{shape}, {bytes})?;", lit(name), params[k]);
    }
    let _ = writeln!(s, "        let Model {{ gpu, pool, graphs, kept }} = self;");
    let _ = writeln!(s, "        let __kept = match kept.entry(__dims) {{");
    let _ = writeln!(s, "            ::std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),");
    let allocs: Vec<String> = kept
        .iter()
        .map(|&k| {
            let (name, shape, bytes) = &shapes[k];
            format!("gpu.zeros(__c::size({}, &{shape}, {bytes})?)?", lit(&format!("tensor `{name}`")))
        })
        .collect();
    let _ = writeln!(
        s,
        "            ::std::collections::hash_map::Entry::Vacant(e) => e.insert(({},)),\n        }};",
        allocs.join(", ")
    );
    for (j, &k) in kept.iter().enumerate().filter(|(_, &k)| k < n_in) {
        let _ = writeln!(s, "        gpu.copy_to_device({}, &mut __kept.{j})?;", params[k]);
    }
    for (w, (i, dt, _)) in weights.iter().enumerate() {
        let _ = writeln!(
            s,
            "        let __w{w} = pool.weight::<{}>({w}).ok_or_else(|| {err}::Kernel({}.into()))?;",
            rust_type(*dt),
            lit(&format!("weight `{}` is not in the device pool", names[*i]))
        );
    }
    let launch_args: Vec<String> = (0..n_io)
        .map(|k| match slot(k) {
            Some(w) if k < n_in => format!("&__w{w}"),
            _ => {
                let j = kept.iter().position(|&x| x == k).expect("every run input and output is kept");
                if k < n_in {
                    format!("&__kept.{j}")
                } else {
                    format!("&mut __kept.{j}")
                }
            }
        })
        .chain(params[n_io..].iter().cloned())
        .collect();
    let _ = writeln!(s, "        graphs.run(gpu, __dims, |__gpu| self::launch(__gpu, {}))?;", launch_args.join(", "));
    for (j, &k) in kept.iter().enumerate().filter(|(_, &k)| k >= n_in) {
        let _ = writeln!(s, "        gpu.copy_to_host(&__kept.{j}, {})?;", params[k]);
    }
    s.push_str("        gpu.synchronize()\n    }\n}\n");
    Ok(s)
}

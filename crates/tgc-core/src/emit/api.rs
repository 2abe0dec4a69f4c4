//! The typed Rust API of a kernel module: the one generator behind both
//! `tgc::kernel!` and the build-script helper ([`crate::build`]), so the two
//! expose the same functions and check their arguments the same way.
//!
//! For a kernel `NAME` it prints the items of `pub mod NAME { … }`:
//!
//! - `TINY_IR: &str`, the graph as canonical Tiny IR JSON;
//! - `GENERATED_SOURCE: &str`, the generic (all dims symbolic) body: Rust for
//!   [`Backend::Rust`], the C translation unit for [`Backend::C`];
//! - `run(inputs…, outputs…, dims…) -> Result<(), ::tgc::Error>`: inputs as
//!   `&[T]` in `Graph::inputs()` order, outputs as `&mut [T]` in
//!   `Graph::outputs` order, then one `usize` per symbol in `Graph::symbols`
//!   order; `T` is the dtype's storage type (`f32`, `i32`, `bool`,
//!   `::tgc::half::f16`, `::tgc::half::bf16`).
//!
//! `run` checks, in this order, before anything runs (so a failed check
//! writes nothing):
//!
//! 1. every dim is in `1..=i32::MAX` (`Error::InvalidDim`);
//! 2. the checks of the loop-nest program ([`crate::cpu::Program::checks`])
//!    hold: the graph's open shape facts ([`crate::tiny::NodeConstraint`],
//!    `Error::DimMismatch`) and every size and divisor it uses is ≥ 1
//!    (`Error::InvalidDim` naming the size, e.g. `H - 2`);
//! 3. every slice has its shape's element count (`Error::LengthMismatch`);
//! 4. every scratch buffer the kernels allocate fits in `isize::MAX` bytes
//!    (`Error::ShapeMismatch`).
//!
//! The checks are calls into `tgc_runtime::checks` (reached as
//! `::tgc::__private::checks`), compiled and unit-tested code rather than
//! text printed into every module. Sizes are evaluated with checked `i64`
//! arithmetic, so no overflow can
//! make a wrong length pass: an overflow is `Error::ShapeMismatch`. Once the
//! checks pass, every subscript of the loop nests is in bounds (the
//! invariant of [`crate::cpu::loop_ir`]), which is what makes the
//! `extern "C"` calls of [`Backend::C`] sound.
//!
//! Then it dispatches: the first ShapeSet point whose dims all match runs
//! the body specialised for it (with the dims that stay symbolic);
//! otherwise, when the graph has `padded` symbols, the smallest point that
//! binds every symbol and holds the call (see [`bucket_dispatch`]) runs on
//! zero-filled copies of the inputs and its outputs are cut back;
//! otherwise the generic body runs. A body's own failure is
//! `Error::Kernel`.
//!
//! Generated code names only `::core::…`, `::std::…` and `::tgc::…` paths
//! (the facade re-exports `Error` and `half`), so a user crate needs the
//! `tgc` crate as its only dependency. Parameter names are the graph's names,
//! made into distinct Rust identifiers (see [`param_names`]); error messages
//! keep the graph's own names.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use crate::cpu::loop_ir::Buffer;
use crate::cpu::{Program, Role};
use crate::diag;
use crate::diag::DResult;
use crate::sym::{Atom, Dim};
use crate::tiny::{Constraint, Graph, Rel};
use crate::DType;

/// The path of the facade crate in generated code.
pub const FACADE: &str = "::tgc";

/// The path of the argument checks (`tgc_runtime::checks`) in generated code.
pub const CHECKS: &str = "::tgc::__private::checks";

/// The runtime table of generated C kernels (`tgc_runtime::cpu_rt::Rt`) as
/// generated code names it.
pub const RT: &str = "::tgc::__private::cpu_rt::Rt";

/// How `run` reaches the loop nests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Bodies printed as Rust by [`super::rust`] into private submodules
    /// (`generic`, `shape_<k>`): what `tgc::kernel!` compiles.
    Rust {
        /// Block sizes for the ShapeSet points' packed kernels, as for
        /// [`Backend::C`]. The records are the C printer's measurements,
        /// looked up under the C toolchain that made them: the Rust printer
        /// prints the same template (panels, blocking, the runtime's
        /// micro-kernel calls), so the sizes carry over.
        tuning: Option<crate::tune::Tuning>,
    },
    /// Bodies printed as C by [`super::c`] and called through `extern "C"`:
    /// the generic body exports `symbol`, ShapeSet point `k` exports
    /// `{symbol}_shape{k}`. The caller compiles [`KernelModule::c_units`] and
    /// links them into the crate (the build helper does).
    C {
        /// The C symbol of the generic body; unique in the final binary.
        symbol: String,
        /// Block sizes for the ShapeSet points' packed kernels
        /// ([`crate::tune`]); `None`: the analytic ones.
        tuning: Option<crate::tune::Tuning>,
    },
}

/// One C translation unit of a [`Backend::C`] module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CUnit {
    /// The entry point it exports (ABI of `tgc_runtime::cpu`).
    pub symbol: String,
    /// The C11 source.
    pub source: String,
}

/// A generated kernel module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelModule {
    /// The module's name (a Rust identifier).
    pub name: String,
    /// Its items, starting with the inner attributes `#![doc]` and
    /// `#![allow]`: the text between `pub mod NAME {` and `}`.
    pub items: String,
    /// The C units `run` calls ([`Backend::C`] only; empty for Rust).
    pub c_units: Vec<CUnit>,
    /// Notes for the build's output: ShapeSet points whose kernels have no
    /// tuning record ([`crate::tune::miss_note`]).
    pub notes: Vec<String>,
    /// The Memory Arena of each ShapeSet point ([`Backend::C`] only), for
    /// a model's `ARENAS` ([`super::model`]).
    pub arenas: Vec<super::model::PointArena>,
}

impl KernelModule {
    /// The whole item, `pub mod NAME { … }`.
    pub fn to_module_text(&self) -> String {
        format!("pub mod {} {{\n{}}}\n", self.name, self.items)
    }
}

/// Generates the module `name` for `g`, with one specialised body per
/// ShapeSet point of `shapes` (symbol → value; a point may leave symbols
/// open).
///
/// Errors: `Unsupported` when `name` is not a Rust identifier; `UnknownName`
/// when a point names a symbol the graph does not have; `AxisSizeMismatch`
/// when a point's value is out of `1..=i32::MAX`, or the graph's own error
/// when it breaks a shape fact; any error of the printers.
pub fn kernel_module(
    name: &str,
    g: &Graph,
    shapes: &[BTreeMap<String, i64>],
    backend: &Backend,
) -> DResult<KernelModule> {
    check_module_name(name)?;
    let points: Vec<(&BTreeMap<String, i64>, Graph)> =
        shapes.iter().map(|p| Ok((p, bind_point(g, p)?))).collect::<DResult<_>>()?;
    // The generic body's lowering: its checks are `run`'s, and it is printed.
    let program = crate::cpu::lower(g)?;
    let printer = Printer { g };
    let params = param_names(g);
    let checks = printer.checks(&program, &params)?;
    let (n_in, n_out) = (g.inputs().len(), g.outputs.len());
    let args = Args { inputs: &params[..n_in], outputs: &params[n_in..n_in + n_out] };
    let (bodies, lang, via) = match backend {
        Backend::Rust { tuning } => {
            let via = "the loop nests printed as Rust in this module";
            (rust_bodies(g, program, tuning.as_ref(), &points, &args)?, "Rust", via)
        }
        Backend::C { symbol, tuning } => {
            let via = "the loop nests printed as C, compiled by the build helper and linked statically";
            (c_bodies(g, program, symbol, tuning.as_ref(), &points, &args)?, "C", via)
        }
    };

    let mut s = String::new();
    let doc = format!("Kernel `{name}`: graph `{}` compiled by tgc; [`run`] calls {via}.", g.name);
    let _ = writeln!(s, "#![doc = {}]", lit(&doc));
    s.push_str("#![allow(non_snake_case, clippy::all)]\n");
    let _ = writeln!(s, "/// The kernel's Tiny IR, canonical JSON.");
    let _ = writeln!(s, "pub const TINY_IR: &str = {};", lit(&crate::tiny::json::to_json(g)));
    let _ = writeln!(s, "/// The generated {lang} source of the generic body (every dim symbolic) that [`run`] calls.");
    let _ = writeln!(s, "pub const GENERATED_SOURCE: &str = {};", lit(&bodies.generic_source));
    let _ = writeln!(s, "#[doc = {}]", lit(&run_doc(name, g)));
    s.push_str(RUN_ERRORS_DOC);
    let types = g
        .inputs()
        .into_iter()
        .map(|id| format!("&[{}]", rust_type(g.dtype(id))))
        .chain(g.outputs.iter().map(|o| format!("&mut [{}]", rust_type(g.dtype(o.node)))))
        .chain(g.symbols.iter().map(|_| "usize".to_string()));
    let sig: Vec<String> = params.iter().zip(types).map(|(p, t)| format!("{p}: {t}")).collect();
    let _ = writeln!(s, "pub fn run({}) -> ::core::result::Result<(), {FACADE}::Error> {{", sig.join(", "));
    let _ = writeln!(s, "    use {CHECKS} as __c;");
    s.push_str(&checks);
    s.push_str(&bodies.run_tail);
    s.push_str("}\n");
    s.push_str(&bodies.items);
    Ok(KernelModule {
        name: name.to_string(),
        items: s,
        c_units: bodies.c_units,
        notes: bodies.notes,
        arenas: bodies.arenas,
    })
}

/// The parameter names of the input and output slices.
struct Args<'a> {
    inputs: &'a [String],
    outputs: &'a [String],
}

/// What a backend adds after `run`'s checks.
struct Bodies {
    /// The statements of `run` after the checks: the dispatch and the call.
    run_tail: String,
    /// Items after `run`: body modules or the `extern "C"` block.
    items: String,
    /// The C units ([`Backend::C`]).
    c_units: Vec<CUnit>,
    /// The generic body's source, for `GENERATED_SOURCE`.
    generic_source: String,
    /// [`KernelModule::notes`].
    notes: Vec<String>,
    /// [`KernelModule::arenas`].
    arenas: Vec<super::model::PointArena>,
}

/// [`Backend::Rust`]: `mod generic` and `mod shape_<k>`, each with the
/// `body` of [`super::rust`].
fn rust_bodies(
    g: &Graph,
    program: Program,
    tuning: Option<&crate::tune::Tuning>,
    points: &[(&BTreeMap<String, i64>, Graph)],
    args: &Args,
) -> DResult<Bodies> {
    let (ins, outs) = (tuple(args.inputs), tuple(args.outputs));
    let call = |module: &str, dims: &str| {
        format!("self::{module}::body({ins}, {outs}, &{dims}).map_err({FACADE}::Error::Kernel)")
    };
    let (mut run_tail, mut items) = (String::new(), String::new());
    let mut notes = Vec::new();
    for (k, (point, bound)) in points.iter().enumerate() {
        run_tail.push_str(&dispatch(g, point, &format!("        return {};\n", call(&format!("shape_{k}"), "__rest"))));
        let mut p = crate::cpu::lower(bound)?;
        if let Some(t) = tuning {
            notes.extend(t.apply(&mut p, &g.name, &format!(" at {}", crate::tune::point_label(point))));
        }
        let _ = write!(items, "mod shape_{k} {{\n{}}}\n", super::rust::emit_rust_program(bound, &p, FACADE)?);
    }
    run_tail.push_str(&bucket_dispatch(g, points, args, &|k| format!("{}\n", call(&format!("shape_{k}"), "__rest")))?);
    let generic = super::rust::emit_rust_program(g, &program, FACADE)?;
    let _ = writeln!(run_tail, "    {}", call("generic", "__dims"));
    let _ = write!(items, "mod generic {{\n{generic}}}\n");
    Ok(Bodies { run_tail, items, c_units: Vec::new(), generic_source: generic, notes, arenas: Vec::new() })
}

/// [`Backend::C`]: the units of [`super::c`] and an `extern "C"` block
/// declaring their entry points, called with the pointer arrays of the ABI.
fn c_bodies(
    g: &Graph,
    program: Program,
    symbol: &str,
    tuning: Option<&crate::tune::Tuning>,
    points: &[(&BTreeMap<String, i64>, Graph)],
    args: &Args,
) -> DResult<Bodies> {
    let ptrs = |names: &[String], method: &str| -> String {
        names.iter().map(|n| format!("{n}.{method}().cast()")).collect::<Vec<_>>().join(", ")
    };
    let mut run_tail = String::new();
    let (n_in, n_out) = (args.inputs.len(), args.outputs.len());
    let in_ptrs = ptrs(args.inputs, "as_ptr");
    let out_ptrs = ptrs(args.outputs, "as_mut_ptr");
    let pointer_arrays = format!(
        "let __inputs: [*const ::core::ffi::c_void; {n_in}] = [{in_ptrs}];\n\
         let __outputs: [*mut ::core::ffi::c_void; {n_out}] = [{out_ptrs}];\n"
    );
    for line in pointer_arrays.lines() {
        let _ = writeln!(run_tail, "    {line}");
    }
    // The `// SAFETY:` comment and `{ret}__c::status(…)`, as lines indented by `indent`.
    let call = |sym: &str, dims: &str, indent: &str, ret: &str| {
        let mut s = String::new();
        for line in safety_comment(sym) {
            let _ = writeln!(s, "{indent}{line}");
        }
        let call = format!("self::{sym}(__inputs.as_ptr(), __outputs.as_ptr(), {dims}.as_ptr(), &{RT}::current())");
        let end = if ret.is_empty() { "" } else { ";" };
        let _ = writeln!(s, "{indent}{ret}__c::status({}, unsafe {{ {call} }}){end}", lit(sym));
        s
    };
    let source = super::c::emit_c_programs(&[(g, program, symbol)])?;
    let mut c_units = vec![CUnit { symbol: symbol.to_string(), source }];
    let mut notes = Vec::new();
    let mut arenas = Vec::new();
    for (k, (point, bound)) in points.iter().enumerate() {
        let sym = format!("{symbol}_shape{k}");
        run_tail.push_str(&dispatch(g, point, &call(&sym, "__rest", "        ", "return ")));
        let mut p = crate::cpu::lower(bound)?;
        if let Some(t) = tuning {
            notes.extend(t.apply(&mut p, &g.name, &format!(" at {}", crate::tune::point_label(point))));
        }
        let arena = crate::cpu::arena::plan(&p);
        let bind = |s: &str| -> Option<i64> { point.get(s).copied() };
        if let (Ok(peak), Ok(sum)) = (arena.bytes(&bind), arena.unshared_bytes(&bind)) {
            arenas.push((point.iter().map(|(k, v)| (k.clone(), *v)).collect(), peak, sum));
        }
        c_units.push(CUnit { source: super::c::emit_c_programs(&[(bound, p, &sym)])?, symbol: sym });
    }
    let padded_call = |k: usize| format!("{pointer_arrays}{}", call(&format!("{symbol}_shape{k}"), "__rest", "", ""));
    run_tail.push_str(&bucket_dispatch(g, points, args, &padded_call)?);
    run_tail.push_str(&call(symbol, "__dims", "    ", ""));
    let mut items = String::from("unsafe extern \"C\" {\n");
    for u in &c_units {
        let _ = writeln!(
            items,
            "    fn {}(inputs: *const *const ::core::ffi::c_void, outputs: *const *mut ::core::ffi::c_void, dims: *const i64, rt: *const {RT}) -> i32;",
            u.symbol
        );
    }
    items.push_str("}\n");
    let generic_source = c_units[0].source.clone();
    Ok(Bodies { run_tail, items, c_units, generic_source, notes, arenas })
}

/// `g` with `point` bound, after checking the point names only the graph's
/// symbols with values in `1..=i32::MAX`.
fn bind_point(g: &Graph, point: &BTreeMap<String, i64>) -> DResult<Graph> {
    for (sym, &v) in point {
        if !g.symbols.iter().any(|s| &s.name == sym) {
            return Err(diag!(UnknownName, "shapes(): the graph has no symbol `{sym}`"));
        }
        if !(1..=i32::MAX as i64).contains(&v) {
            return Err(diag!(AxisSizeMismatch, "shapes(): `{sym}` = {v} is not in 1..={}", i32::MAX));
        }
    }
    g.bind(point)
}

/// `if __dims[i] == v && … { let __rest = [the open dims]; ACTION }`, where
/// `action` is whole lines.
fn dispatch(g: &Graph, point: &BTreeMap<String, i64>, action: &str) -> String {
    let conds: Vec<String> = g
        .symbols
        .iter()
        .enumerate()
        .filter_map(|(i, s)| point.get(&s.name).map(|v| format!("__dims[{i}] == {v}")))
        .collect();
    let rest: Vec<String> = g
        .symbols
        .iter()
        .enumerate()
        .filter(|(_, s)| !point.contains_key(&s.name))
        .map(|(i, _)| format!("__dims[{i}]"))
        .collect();
    format!(
        "    if {} {{\n        let __rest: [i64; {}] = [{}];\n{action}    }}\n",
        conds.join(" && "),
        rest.len(),
        rest.join(", ")
    )
}

/// The run-time dispatch to a larger ShapeSet point (`000` §8's
/// ShapeSets; the graph's `padded` symbols, [`crate::tiny::Symbol::padded`]):
/// for each point that binds every symbol, smallest first (by the product
/// of its values; ties in declaration order), `if` the call's dims fit it —
/// a `padded` symbol's value at most the point's, every other symbol's
/// equal — the inputs are copied into zero-filled buffers of the point's
/// shapes (`__c::pad`), the point's body runs on them (`call(k)`: lines
/// ending in the call's `Result`, with the parameter names shadowed by the
/// padded buffers), and the outputs are cut back (`__c::crop`). A call
/// that is a point exactly never gets here (the exact dispatch comes
/// first). Nothing when the graph has no `padded` symbol.
///
/// Errors: `Unsupported` when a `padded` symbol appears in an input or
/// output shape other than as a whole dim (`S + 1`): its padded extent
/// would be ambiguous.
fn bucket_dispatch(
    g: &Graph,
    points: &[(&BTreeMap<String, i64>, Graph)],
    args: &Args,
    call: &dyn Fn(usize) -> String,
) -> DResult<String> {
    let padded: Vec<usize> = (0..g.symbols.len()).filter(|&i| g.symbols[i].padded).collect();
    if padded.is_empty() {
        return Ok(String::new());
    }
    let is_padded =
        |d: &Dim| d.as_sym().and_then(|s| g.symbols.iter().position(|x| x.name == s)).filter(|i| padded.contains(i));
    let mentions_padded = |d: &Dim| padded.iter().any(|&i| d.symbols().contains(&g.symbols[i].name));
    // Each input and output: (parameter, node, whether a padded symbol sizes it).
    let ins = g.inputs();
    let tensors: Vec<(&String, crate::tiny::NodeId, bool)> = args
        .inputs
        .iter()
        .zip(ins.iter().copied())
        .chain(args.outputs.iter().zip(g.outputs.iter().map(|o| o.node)))
        .map(|(p, id)| {
            let shape = g.shape(id);
            if let Some(d) = shape.iter().find(|d| mentions_padded(d) && is_padded(d).is_none()) {
                return Err(diag!(
                    Unsupported,
                    "`{p}` has the dim `{d}`, which holds a `padded` symbol: a padded symbol must be a whole dim \
                     of every input and output shape it sizes"
                ));
            }
            Ok((p, id, shape.iter().any(|d| is_padded(d).is_some())))
        })
        .collect::<DResult<_>>()?;
    let mut order: Vec<usize> =
        (0..points.len()).filter(|&k| g.symbols.iter().all(|s| points[k].0.contains_key(&s.name))).collect();
    order.sort_by_key(|&k| points[k].0.values().map(|&v| v as i128).product::<i128>());
    let mut s = String::new();
    for k in order {
        let (point, bound) = &points[k];
        let conds: Vec<String> = g
            .symbols
            .iter()
            .enumerate()
            .map(|(i, sym)| {
                let v = point[&sym.name];
                if padded.contains(&i) {
                    format!("__dims[{i}] <= {v}")
                } else {
                    format!("__dims[{i}] == {v}")
                }
            })
            .collect();
        let label = crate::tune::point_label(point);
        let _ = writeln!(s, "    if {} {{", conds.join(" && "));
        let _ = writeln!(
            s,
            "        // Padded to ShapeSet point {k} ({label}): zeros past the call's dims, outputs cut back."
        );
        // The call's shape and the point's, as `usize` lists, of tensor `t`.
        let shapes = |t: usize, id: crate::tiny::NodeId| -> (String, String) {
            let bound_id = if t < ins.len() { bound.inputs()[t] } else { bound.outputs[t - ins.len()].node };
            let at: Vec<String> = bound.shape(bound_id).iter().map(|d| d.as_int().unwrap_or(0).to_string()).collect();
            let call: Vec<String> = g
                .shape(id)
                .iter()
                .zip(&at)
                .map(|(d, v)| match is_padded(d) {
                    Some(i) => format!("__dims[{i}] as usize"),
                    None => v.clone(),
                })
                .collect();
            (format!("&[{}]", call.join(", ")), format!("&[{}]", at.join(", ")))
        };
        let mut taken = Vec::new();
        let mut shadow = String::new();
        let mut crops = String::new();
        for (t, &(p, id, sized)) in tensors.iter().enumerate() {
            if !sized {
                continue;
            }
            let (call_shape, at_shape) = shapes(t, id);
            let buf = format!("__pad{t}");
            let ty = rust_type(g.dtype(id));
            if t < ins.len() {
                let _ = writeln!(s, "        let {buf} = __c::pad({p}, {call_shape}, {at_shape});");
                let _ = writeln!(shadow, "            let {p}: &[{ty}] = &{buf};");
            } else {
                let len: i64 =
                    bound.shape(bound.outputs[t - ins.len()].node).iter().map(|d| d.as_int().unwrap_or(0)).product();
                let _ = writeln!(s, "        let mut {buf} = __c::zeros::<{ty}>({len});");
                let _ = writeln!(shadow, "            let {p}: &mut [{ty}] = &mut {buf};");
                let _ = writeln!(crops, "            __c::crop(&{buf}, {at_shape}, {p}, {call_shape});");
            }
            taken.push(buf);
        }
        s.push_str("        let __result = {\n");
        s.push_str(&shadow);
        s.push_str("            let __rest: [i64; 0] = [];\n");
        for line in call(k).lines() {
            let _ = writeln!(s, "            {line}");
        }
        s.push_str("        };\n");
        if !crops.is_empty() {
            let _ = write!(s, "        if __result.is_ok() {{\n{crops}        }}\n");
        }
        for buf in taken.iter().rev() {
            let _ = writeln!(s, "        __c::give({buf});");
        }
        s.push_str("        return __result;\n    }\n");
    }
    Ok(s)
}

/// The lines of the `// SAFETY:` comment of an extern call.
fn safety_comment(sym: &str) -> [String; 8] {
    [
        format!("// SAFETY: `{sym}` is the entry point tgc printed for this graph with the kernel ABI"),
        "// of `tgc_runtime::cpu` (inputs and outputs in graph order, dims in symbol order). The checks".into(),
        "// above passed: the dims meet every requirement of the loop nests, under which every subscript".into(),
        "// is in bounds; every slice has exactly the element count its shape needs; every scratch buffer".into(),
        "// fits in `isize::MAX` bytes. Each slice's element type is its dtype's storage type, so the".into(),
        "// pointers are aligned and hold valid values (the kernel writes bool as 0 or 1). The outputs are".into(),
        "// `&mut` borrows, so they overlap no input and no other output while the kernel runs; `rt`".into(),
        "// is the runtime table the ABI names, alive across the call.".into(),
    ]
}

fn run_doc(name: &str, g: &Graph) -> String {
    let ty = |id| format!("{}{}", g.dtype(id), crate::tiny::infer::fmt_shape(g.shape(id)));
    let ins: Vec<String> =
        crate::pipeline::input_names(g).iter().zip(g.inputs()).map(|(n, id)| format!("`{n}: {}`", ty(id))).collect();
    let outs: Vec<String> = g.outputs.iter().map(|o| format!("`{}: {}`", o.name, ty(o.node))).collect();
    let dims: Vec<String> = g.symbols.iter().map(|s| format!("`{}`", s.name)).collect();
    let list = |v: Vec<String>| if v.is_empty() { "none".to_string() } else { v.join(", ") };
    format!(
        "Runs kernel `{name}`. Arguments: the inputs ({}), the outputs ({}), then the dims ({}). \
         Slices are dense and row-major.",
        list(ins),
        list(outs),
        list(dims)
    )
}

const RUN_ERRORS_DOC: &str = "///
/// # Errors
///
/// `InvalidDim` for a dim outside `1..=i32::MAX`, or a size of the graph
/// that these dims make < 1; `DimMismatch` for dims that break a shape fact
/// of the graph; `LengthMismatch` for a slice whose length is not its
/// shape's element count; `ShapeMismatch` when a size overflows or a scratch
/// buffer would not fit in memory; `Kernel` when the kernel fails (a scratch
/// allocation). Nothing is written when a check fails.
";

/// Prints `run`'s checks (calls into [`CHECKS`], imported as `__c`), and
/// size expressions over `__dims` for the GPU launch functions
/// ([`super::gpu_api`]).
pub(super) struct Printer<'g> {
    pub(super) g: &'g Graph,
}

impl Printer<'_> {
    /// The checks of the module doc, steps 1–4, as statements of `run`.
    fn checks(&self, program: &Program, params: &[String]) -> DResult<String> {
        let mut s = self.dims(&program.checks, params)?;
        s.push_str(&self.lengths(params)?);
        s.push_str(&self.temps(&program.buffers)?);
        Ok(s)
    }

    /// Steps 1–2: `let __dims: [i64; n] = …;` from the dim parameters, then
    /// the shape facts and positive sizes of `checks`.
    pub(super) fn dims(&self, checks: &[Constraint], params: &[String]) -> DResult<String> {
        let g = self.g;
        let ins = g.inputs();
        let dims_at = ins.len() + g.outputs.len();
        let mut s = String::new();
        let dims: Vec<String> = g
            .symbols
            .iter()
            .enumerate()
            .map(|(k, sym)| format!("__c::dim({}, {})?", lit(&sym.name), params[dims_at + k]))
            .collect();
        let _ = writeln!(s, "    let __dims: [i64; {}] = [{}];", dims.len(), dims.join(", "));
        // The program's checks: the graph's open shape facts, and sizes and
        // divisors ≥ 1 (`symbol ≥ 1` is `dim`'s already).
        for c in checks {
            let at_least_one = c.rel == Rel::Le && c.lhs.as_int() == Some(1);
            if at_least_one && c.rhs.as_sym().is_some() {
                continue;
            }
            if at_least_one {
                let _ = writeln!(s, "    __c::positive({}, {})?;", lit(&c.rhs.to_string()), self.checked(&c.rhs)?);
            } else {
                let what = format!("{} ({} vs {})", c.what, c.lhs, c.rhs);
                let (l, r) = (self.checked(&c.lhs)?, self.checked(&c.rhs)?);
                let _ = writeln!(s, "    __c::require({}, {l}, {r}, {})?;", lit(&what), c.rel == Rel::Le);
            }
        }
        Ok(s)
    }

    /// Step 3: `__c::len(name, ARG.len(), &shape, bytes)?;` per input and
    /// output slice parameter.
    pub(super) fn lengths(&self, params: &[String]) -> DResult<String> {
        let mut s = String::new();
        for ((name, shape, bytes), p) in self.io_shapes()?.iter().zip(params) {
            let _ = writeln!(s, "    __c::len({}, {p}.len(), &{shape}, {bytes})?;", lit(name));
        }
        Ok(s)
    }

    /// Per input then output: its graph name, its shape as a checked size
    /// expression ([`Printer::shape`]) and its element's bytes.
    pub(super) fn io_shapes(&self) -> DResult<Vec<(String, String, usize)>> {
        let g = self.g;
        let names = crate::pipeline::input_names(g);
        let io = g.inputs().into_iter().zip(names).chain(g.outputs.iter().map(|o| (o.node, o.name.clone())));
        io.map(|(id, name)| Ok((name, self.shape(g.shape(id))?, g.dtype(id).size_bytes()))).collect()
    }

    /// Step 4: the scratch buffers the kernels allocate, unless fixed and
    /// small enough for any target.
    fn temps(&self, buffers: &[Buffer]) -> DResult<String> {
        let mut s = String::new();
        for b in buffers.iter().filter(|b| b.role == Role::Temp) {
            let bytes = b.dtype.size_bytes();
            let fixed: Option<i64> =
                b.shape.iter().try_fold(1i64, |n, d| n.checked_mul(d.as_int().filter(|&v| v >= 1)?));
            if fixed.and_then(|n| n.checked_mul(bytes as i64)).is_some_and(|b| b <= i32::MAX as i64) {
                continue;
            }
            let what = format!("tensor `{}` ({}{})", b.label, b.dtype, crate::tiny::infer::fmt_shape(&b.shape));
            let _ = writeln!(s, "    __c::size({}, &{}, {bytes})?;", lit(&what), self.shape(&b.shape)?);
        }
        Ok(s)
    }

    /// `[e0, e1, …]`, each a checked size expression.
    pub(super) fn shape(&self, shape: &[Dim]) -> DResult<String> {
        let v: Vec<String> = shape.iter().map(|d| self.checked(d)).collect::<DResult<_>>()?;
        Ok(format!("[{}]", v.join(", ")))
    }

    /// `d` as an expression of type `Option<i64>` over `__dims`: `None` when
    /// a step overflows `i64` or divides by a value < 1.
    pub(super) fn checked(&self, d: &Dim) -> DResult<String> {
        let mut sum: Option<String> = None;
        for (atoms, c) in d.monomials() {
            let mut term: Option<String> = (c != 1 || atoms.is_empty()).then(|| format!("Some({c}i64)"));
            for a in atoms {
                let factor = match a {
                    Atom::Sym(s) => {
                        let k = self.g.symbols.iter().position(|x| &x.name == s).ok_or_else(|| {
                            diag!(Internal, "size {d} names `{s}`, which is not a symbol of graph `{}`", self.g.name)
                        })?;
                        format!("Some(__dims[{k}])")
                    }
                    Atom::FloorDiv(n, q) => {
                        format!("__c::floordiv({}, {})", self.checked(n)?, self.checked(q)?)
                    }
                };
                term = Some(match term {
                    None => factor,
                    Some(t) => format!("__c::mul({t}, {factor})"),
                });
            }
            let term = term.unwrap_or_else(|| "Some(1i64)".into());
            sum = Some(match sum {
                None => term,
                Some(acc) => format!("__c::add({acc}, {term})"),
            });
        }
        Ok(sum.unwrap_or_else(|| "Some(0i64)".into()))
    }
}

/// The Rust type of a slice element of dtype `d`.
pub(super) fn rust_type(d: DType) -> String {
    match d {
        DType::F16 => format!("{FACADE}::half::f16"),
        DType::BF16 => format!("{FACADE}::half::bf16"),
        DType::F32 => "f32".into(),
        DType::I32 => "i32".into(),
        DType::Bool => "bool".into(),
    }
}

/// `(a, b,)`, or `()`.
fn tuple(names: &[String]) -> String {
    if names.is_empty() {
        "()".into()
    } else {
        format!("({},)", names.join(", "))
    }
}

/// `s` as a Rust string literal.
pub(super) fn lit(s: &str) -> String {
    format!("{s:?}")
}

/// The parameter names of `run`: inputs, outputs, then dims, each the
/// graph's name made a Rust identifier that is distinct from the others and
/// from every name `run` uses itself. Characters other than ASCII letters,
/// digits and `_` become `_`; keywords, the prelude's variants (`Some`,
/// `None`, `Ok`, `Err`), the module's constants and names starting with `__`
/// (kept for generated locals) get a `_` suffix (`type` → `type_`); a name
/// already taken gets `_2`, `_3`, ….
pub fn param_names(g: &Graph) -> Vec<String> {
    let raw = crate::pipeline::input_names(g)
        .into_iter()
        .chain(g.outputs.iter().map(|o| o.name.clone()))
        .chain(g.symbols.iter().map(|s| s.name.clone()));
    let mut taken = BTreeSet::new();
    let mut out = Vec::new();
    for name in raw {
        let mut s: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
        if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
            s.insert(0, '_');
        }
        if s == "_" || s.starts_with("__") || is_keyword(&s) || RESERVED.contains(&s.as_str()) {
            s.push('_');
        }
        let mut unique = s.clone();
        let mut n = 2;
        while !taken.insert(unique.clone()) {
            unique = format!("{s}_{n}");
            n += 1;
        }
        out.push(unique);
    }
    out
}

/// Names a parameter must not take: they would be read as patterns.
/// (The constants of the `sm80` submodule and the `gpu` parameter of its
/// `launch` are reserved too.)
const RESERVED: &[&str] = &[
    "Some",
    "None",
    "Ok",
    "Err",
    "TINY_IR",
    "GENERATED_SOURCE",
    "gpu",
    "LAUNCH",
    "DIMS",
    "MODULE",
    "SYMBOL",
    "CUBIN",
    "PTX",
    "THREADS",
    "SMEM_BYTES",
    "PLAN_JSON",
    "Model",
    "WEIGHTS",
    "ARENAS",
    "model",
];

/// True for `[A-Za-z_][A-Za-z0-9_]*` other than `_`.
fn is_rust_ident(s: &str) -> bool {
    s != "_"
        && s.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Rust's strict and reserved keywords, all editions.
fn is_keyword(s: &str) -> bool {
    const KEYWORDS: &[&str] = &[
        "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern", "false", "fn",
        "for", "gen", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "self",
        "Self", "static", "struct", "super", "trait", "true", "try", "type", "unsafe", "use", "where", "while",
        "abstract", "become", "box", "do", "final", "macro", "override", "priv", "typeof", "unsized", "virtual",
        "yield",
    ];
    KEYWORDS.contains(&s)
}

/// Checks that `name` can name a kernel module: a Rust identifier, not a
/// keyword (a raw identifier `r#type` is accepted), of at most
/// [`MAX_NAME_BYTES`](crate::frontend::lexer::MAX_NAME_BYTES) (it becomes part
/// of the build helper's file names).
///
/// Errors: `Unsupported` otherwise.
pub fn check_module_name(name: &str) -> DResult<()> {
    if let Some(why) = crate::frontend::lexer::name_length_fault("kernel", name) {
        return Err(diag!(Unsupported, "{why}"));
    }
    let ok = match name.strip_prefix("r#") {
        Some(raw) => is_rust_ident(raw) && !matches!(raw, "crate" | "self" | "super" | "Self"),
        None => is_rust_ident(name) && !is_keyword(name),
    };
    if ok {
        Ok(())
    } else {
        Err(diag!(Unsupported, "`{name}` cannot name a kernel module: it is not a Rust identifier"))
    }
}

#[cfg(test)]
mod tests;

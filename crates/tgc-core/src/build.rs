//! The build-script helper: compiles graph files (`.tgc` or Tiny IR `.json`)
//! and ONNX models ([`Kernels::onnx`]) at `cargo build` time into C, builds the C into one static library with
//! the system C compiler (through the [`cc`] crate), and writes a Rust file
//! of typed kernel modules to `include!`.
//!
//! Each module has the API of a `tgc::kernel!` module (`TINY_IR`,
//! `GENERATED_SOURCE` — here the C source — and `run`), printed by the same
//! generator, [`crate::emit::api`], so the two check their arguments the same
//! way; only the bodies differ (C called through `extern "C"` here, Rust loop
//! nests in the macro). The user crate depends on `tgc` and has `tgc-core`
//! as a build-dependency only.
//!
//! ```no_run
//! // build.rs, in `fn main()`:
//! let result = tgc_core::build::Kernels::new()
//!     // A path relative to the crate's Cargo.toml; `.tgc` or `.json`.
//!     .kernel("gemm_bias_relu", "graphs/gemm_bias_relu.tgc")
//!     // Optional ShapeSet points of the last kernel: specialised bodies
//!     // that `run` dispatches to when the dims match.
//!     .shapes(&[("M", 64), ("N", 64), ("K", 64)])
//!     // Writes $OUT_DIR/tgc_kernels.rs and links libtgc_kernels.a.
//!     .compile("tgc_kernels");
//! if let Err(e) = result {
//!     eprintln!("{e}");
//!     std::process::exit(1);
//! }
//! ```
//!
//! and in `src/lib.rs`:
//!
//! ```text
//! include!(concat!(env!("OUT_DIR"), "/tgc_kernels.rs"));
//! // gemm_bias_relu::run(&x, &w, &bias, &mut y, m, n, k)?;
//! ```
//!
//! C symbols are `tgc_<package>_<version>_<kernel>` (plus `_shape<k>` for
//! ShapeSet points), from `CARGO_PKG_NAME` and `CARGO_PKG_VERSION`, so two
//! crates — or two versions of one crate — that use the helper link into one
//! binary without clashes.
//!
//! Outside a build script (tests, tools) give the output directory with
//! [`Kernels::out_dir`] and turn off the `cargo:` lines with
//! [`Kernels::cargo_metadata`]; the target and host default to the triple
//! `rustc -vV` reports and the optimisation level to 2 when Cargo's
//! variables are absent.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::emit::api::{self, Backend};
use crate::pipeline::{self, Format};
use crate::Diagnostic;

/// A set of kernels to compile from a build script; see the module doc.
///
/// The builder records mistakes (such as [`Kernels::shapes`] before any
/// [`Kernels::kernel`]) and reports them from [`Kernels::compile`]: nothing
/// here panics.
#[derive(Clone, Debug, Default)]
#[must_use = "nothing is compiled until `compile` is called"]
pub struct Kernels {
    kernels: Vec<KernelSpec>,
    out_dir: Option<PathBuf>,
    manifest_dir: Option<PathBuf>,
    target: Option<String>,
    host: Option<String>,
    opt_level: Option<u32>,
    cargo_metadata: Option<bool>,
    sm80: bool,
    sm90: bool,
    tuning: Option<PathBuf>,
    misuse: Vec<String>,
}

#[derive(Clone, Debug)]
struct KernelSpec {
    name: String,
    path: PathBuf,
    entry: Option<String>,
    shapes: Vec<Vec<(String, i64)>>,
    /// The run inputs of a model ([`Kernels::model`]).
    model: Option<Vec<String>>,
    /// An ONNX model ([`Kernels::onnx`]): a model whose run inputs are the
    /// ONNX graph inputs, its initializers embedded as its weights.
    onnx: bool,
}

/// What [`Kernels::compile`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Generated {
    /// `OUT_DIR/<lib>.rs`: the kernel modules, to `include!`.
    pub rust_file: PathBuf,
    /// `OUT_DIR/<lib>/<symbol>.c`: one C unit per kernel and ShapeSet point,
    /// compiled into the static library `lib<lib>.a` (`<lib>.lib` with MSVC)
    /// in `OUT_DIR`.
    pub c_files: Vec<PathBuf>,
    /// `OUT_DIR/<lib>.h`: the C ABI of the models ([`Kernels::model`]);
    /// `None` when there are none.
    pub header: Option<PathBuf>,
    /// The C files of `c_files` that this call compiled; the others'
    /// objects came from the object cache `OUT_DIR/<lib>-objects`
    /// ([`tgc_runtime::objcache`]), built by an earlier build from the same
    /// C, compiler and flags.
    pub compiled: Vec<PathBuf>,
}

/// Why [`Kernels::compile`] failed. The `Display` text is meant for a build
/// script's stderr.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// A graph file has an error (or a ShapeSet point breaks it); shown as
    /// `FILE:LINE:COL: error[Name]: message` ([`Diagnostic::render`]).
    Graph {
        /// The graph file, as read (manifest directory joined).
        file: PathBuf,
        /// What is wrong, with its position in the file when known.
        diagnostic: Diagnostic,
    },
    /// The helper was used wrongly: a bad kernel or library name, `shapes`
    /// before any kernel, no `OUT_DIR`, colliding symbols.
    Config(String),
    /// A file could not be read or written.
    Io {
        /// What was being done: `read`, `write`, `create directory`.
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The C compiler could not be run, or failed (its message included).
    CCompiler(String),
    /// With [`Kernels::sm80`]: a graph's sm80 kernels could not be
    /// compiled (e.g. the CUDA toolchain is missing); the message says why.
    Gpu(String),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Graph { file, diagnostic } => f.write_str(&diagnostic.render(&file.display().to_string())),
            BuildError::Config(m) => write!(f, "tgc build: {m}"),
            BuildError::Io { action, path, source } => {
                write!(f, "tgc build: cannot {action} `{}`: {source}", path.display())
            }
            BuildError::CCompiler(m) => write!(f, "tgc build: the C compiler failed: {m}"),
            BuildError::Gpu(m) => write!(f, "tgc build: {m}"),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::Graph { diagnostic, .. } => Some(diagnostic),
            BuildError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl Kernels {
    /// An empty set.
    pub fn new() -> Kernels {
        Kernels::default()
    }

    /// Adds kernel `name` (the module name in the generated file; a Rust
    /// identifier) from the graph file `path`, relative to the manifest
    /// directory. The format follows the extension (`.tgc`, `.json`; else
    /// JSON when the text starts with `{`).
    pub fn kernel(mut self, name: &str, path: impl AsRef<Path>) -> Kernels {
        self.kernels.push(KernelSpec {
            name: name.to_string(),
            path: path.as_ref().to_path_buf(),
            entry: None,
            shapes: Vec::new(),
            model: None,
            onnx: false,
        });
        self
    }

    /// Adds the ONNX model at `path` (relative to the manifest directory)
    /// as kernel `name`, imported by [`crate::frontend::onnx`]: a model
    /// ([`Kernels::model`]) whose run inputs are the ONNX graph's inputs and
    /// whose weights are its initializers. The weights are written to
    /// `OUT_DIR/<lib>/<name>.safetensors` and embedded in the binary: the
    /// module gains `WEIGHT_DATA` (those bytes) and `Model::embedded()`
    /// (`Model::init` from them). To load them from a file at run time
    /// instead, write them once with `tgc import` and call `Model::init`
    /// with `tgc::model::Safetensors::file(PATH)`.
    pub fn onnx(mut self, name: &str, path: impl AsRef<Path>) -> Kernels {
        self = self.kernel(name, path);
        if let Some(k) = self.kernels.last_mut() {
            k.onnx = true;
            k.model = Some(Vec::new());
        }
        self
    }

    /// Makes the last kernel a model too (`000` §8; [`crate::emit::model`]):
    /// `run_inputs` are the graph inputs given to each run, every other
    /// input is a weight (its shape must be static), loaded once into the
    /// model's ConstPool. The module gains `WEIGHTS`, `ARENAS` and `Model`
    /// (`init`, `run`), and the crate the C ABI `tgc_NAME_model_init/run/free`
    /// and `tgc_NAME_last_error`, declared in `OUT_DIR/<lib>.h`
    /// ([`Generated::header`]).
    pub fn model(mut self, run_inputs: &[&str]) -> Kernels {
        match self.kernels.last_mut() {
            Some(k) => k.model = Some(run_inputs.iter().map(|s| s.to_string()).collect()),
            None => self.misuse.push("model(…) comes before any kernel()".into()),
        }
        self
    }

    /// Picks the graph of the last kernel's file (`main` by default; graph
    /// language files only), like the CLI's `--entry`.
    pub fn entry(mut self, graph: &str) -> Kernels {
        match self.kernels.last_mut() {
            Some(k) => k.entry = Some(graph.to_string()),
            None => self.misuse.push(format!("entry(\"{graph}\") comes before any kernel()")),
        }
        self
    }

    /// Adds a ShapeSet point to the last kernel: a body specialised for
    /// these values (`("M", 64)`…; symbols not named stay open), which `run`
    /// calls when its dims match. Call it once per point.
    pub fn shapes(mut self, point: &[(&str, i64)]) -> Kernels {
        match self.kernels.last_mut() {
            Some(k) => k.shapes.push(point.iter().map(|(s, v)| (s.to_string(), *v)).collect()),
            None => self.misuse.push("shapes(…) comes before any kernel()".into()),
        }
        self
    }

    /// Adds the ShapeSet points of every combination of `values` to the
    /// last kernel (`000` §8's buckets): `shape_set(&[("B", &[1]), ("S",
    /// &[16, 32, 64])])` is three points, the last symbol varying fastest.
    /// With the graph's symbols declared `padded`, a call runs the smallest
    /// point that holds its dims ([`crate::emit::api`]).
    pub fn shape_set(mut self, values: &[(&str, &[i64])]) -> Kernels {
        let mut points: Vec<Vec<(String, i64)>> = vec![Vec::new()];
        for (sym, vs) in values {
            points = points
                .into_iter()
                .flat_map(|p| {
                    vs.iter().map(move |&v| {
                        let mut p = p.clone();
                        p.push((sym.to_string(), v));
                        p
                    })
                })
                .collect();
        }
        match self.kernels.last_mut() {
            Some(k) if values.iter().all(|(_, vs)| !vs.is_empty()) => k.shapes.extend(points),
            Some(_) => self.misuse.push("shape_set(…) lists a symbol with no values".into()),
            None => self.misuse.push("shape_set(…) comes before any kernel()".into()),
        }
        self
    }

    /// The directory to write into; default `$OUT_DIR` (set by Cargo for
    /// build scripts).
    pub fn out_dir(mut self, dir: impl AsRef<Path>) -> Kernels {
        self.out_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// The directory graph paths are relative to; default
    /// `$CARGO_MANIFEST_DIR`, else the current directory.
    pub fn manifest_dir(mut self, dir: impl AsRef<Path>) -> Kernels {
        self.manifest_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// The target triple to compile C for; default `$TARGET`, else the host
    /// of `rustc -vV`.
    pub fn target(mut self, triple: &str) -> Kernels {
        self.target = Some(triple.to_string());
        self
    }

    /// The host triple; default `$HOST`, else the host of `rustc -vV`.
    pub fn host(mut self, triple: &str) -> Kernels {
        self.host = Some(triple.to_string());
        self
    }

    /// The C optimisation level; default 2 in every Cargo profile, debug
    /// builds included (see [`c_opt_level`]).
    pub fn opt_level(mut self, level: u32) -> Kernels {
        self.opt_level = Some(level);
        self
    }

    /// Whether to print `cargo:` lines (`rerun-if-changed` for each graph
    /// file, the link flags of the library, the C compiler's warnings);
    /// default: when `$OUT_DIR` is set, that is in a build script.
    pub fn cargo_metadata(mut self, on: bool) -> Kernels {
        self.cargo_metadata = Some(on);
        self
    }

    /// Reads the ShapeSet points' block sizes from the tuning cache `dir`
    /// (relative to the crate's `Cargo.toml`; written by `tgc tune`, see
    /// [`crate::tune`]), and with [`Kernels::sm80`] or [`Kernels::sm90`]
    /// the GPU templates' plans from its `gpu/` folder (`tgc tune --target
    /// sm80|sm90`, [`crate::tune::gpu`]). Nothing is measured at build
    /// time: a kernel or plan decision with no record keeps the analytic
    /// choice and the build prints a `cargo:warning`; a corrupted or
    /// hand-edited record fails the build.
    pub fn tuning(mut self, dir: impl AsRef<Path>) -> Kernels {
        self.tuning = Some(dir.as_ref().to_path_buf());
        self
    }

    /// With `on`, every kernel module also gets the sm80 part of
    /// `tgc::kernel!`'s feature `sm80` ([`crate::emit::gpu_api::sm80_module`]):
    /// a submodule `sm80` with the whole graph's kernels (cubins written to
    /// `<lib>/<symbol>_<variant>.cubin` and embedded with `include_bytes!`,
    /// PTX) and the typed launch functions `check`, `steps`, `launch`,
    /// `run_on_gpu`; `SM80_SKIPPED` for a graph the GPU path does not take.
    /// The crate then needs `tgc` with feature `cuda`. NVRTC runs now, so
    /// the CUDA toolchain of `scripts/setup.sh` (or `$TGC_CUDA_ROOT`) is
    /// needed. Off by default.
    pub fn sm80(mut self, on: bool) -> Kernels {
        self.sm80 = on;
        self
    }

    /// With `on`, [`Kernels::sm80`]'s submodule also holds the sm90 twins
    /// of its variants (the MMA template's TMA + `wgmma` kernels, an
    /// sm_90a cubin each; [`crate::emit::gpu_api::sm80_module`]), which its
    /// `steps_for` and `launch` pick on a 9.x device: `tgc::kernel!`'s
    /// feature `sm90`. Turns on [`Kernels::sm80`]. Off by default.
    pub fn sm90(mut self, on: bool) -> Kernels {
        self.sm90 = on;
        self
    }

    /// Compiles every kernel and writes, in the output directory:
    /// `<lib>.rs` (one `pub mod <kernel>` per kernel), `<lib>/<symbol>.c`
    /// (the C units) and the static library `<lib>` (`lib<lib>.a`), which
    /// Cargo links into the crate when this runs in a build script.
    ///
    /// Errors: [`BuildError::Config`] for a `lib` or kernel name that is not
    /// an identifier, a kernel given twice, no kernels, no output directory,
    /// or misuse recorded by the builder; [`BuildError::Io`] for a graph file
    /// that cannot be read or an output that cannot be written;
    /// [`BuildError::Graph`] for any diagnostic of the graph (parse, shapes,
    /// ShapeSet points), rendered `file:line:col`; [`BuildError::CCompiler`]
    /// when `cc` fails.
    pub fn compile(self, lib: &str) -> Result<Generated, BuildError> {
        if let Some(m) = self.misuse.first() {
            return Err(BuildError::Config(m.clone()));
        }
        if lib.is_empty() || !lib.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(BuildError::Config(format!("`{lib}` cannot name the library: use letters, digits and `_`")));
        }
        if self.kernels.is_empty() {
            return Err(BuildError::Config("no kernels: add one with kernel(NAME, PATH)".into()));
        }
        let out_dir = match self.out_dir.clone().or_else(|| std::env::var_os("OUT_DIR").map(PathBuf::from)) {
            Some(d) => d,
            None => {
                return Err(BuildError::Config(
                    "OUT_DIR is not set: run from a build script, or give out_dir(DIR)".into(),
                ))
            }
        };
        let metadata = self.cargo_metadata.unwrap_or_else(|| std::env::var_os("OUT_DIR").is_some());
        let manifest_dir = self
            .manifest_dir
            .clone()
            .or_else(|| std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from("."));
        let prefix = symbol_prefix();
        let mut gpu_cache = None;
        let tuning = match &self.tuning {
            Some(dir) => {
                let dir = manifest_dir.join(dir);
                if metadata {
                    println!("cargo:rerun-if-changed={}", dir.display());
                }
                let cache = crate::tune::Cache::open(&dir).map_err(|e| BuildError::Config(e.to_string()))?;
                if self.sm80 || self.sm90 {
                    gpu_cache = Some(crate::tune::gpu::open(&dir).map_err(|e| BuildError::Config(e.to_string()))?);
                }
                let arch = self.target_triple()?.split('-').next().unwrap_or_default().to_string();
                let compiler = self.cc_build()?.try_get_compiler().map_err(|e| BuildError::CCompiler(e.to_string()))?;
                let toolchain =
                    crate::tune::Toolchain::of(&arch, compiler.to_command()).map_err(BuildError::CCompiler)?;
                Some(crate::tune::Tuning { cache, toolchain })
            }
            None => None,
        };

        let mut modules = Vec::new();
        let mut files = Vec::new();
        let mut sm80_cubins: Vec<(PathBuf, Vec<u8>)> = Vec::new();
        let mut model_decls = Vec::new();
        let mut weight_files: Vec<(PathBuf, Vec<u8>)> = Vec::new();
        for (i, k) in self.kernels.iter().enumerate() {
            api::check_module_name(&k.name).map_err(|d| BuildError::Config(d.message))?;
            if self.kernels[..i].iter().any(|o| o.name == k.name) {
                return Err(BuildError::Config(format!("kernel `{}` is given twice", k.name)));
            }
            let file = manifest_dir.join(&k.path);
            if metadata {
                println!("cargo:rerun-if-changed={}", file.display());
            }
            let symbol = format!("tgc_{prefix}_{}", k.name);
            let (mut module, loaded, points) = compile_kernel(k, &file, &symbol, tuning.as_ref())?;
            let graph = loaded.graph;
            let run_inputs = match (&k.model, k.onnx) {
                (Some(_), true) => {
                    let weights = &loaded.weights;
                    let runs =
                        pipeline::input_names(&graph).into_iter().filter(|n| !weights.iter().any(|(w, _)| w == n));
                    Some(runs.collect::<Vec<_>>())
                }
                (model, false) => model.clone(),
                (None, true) => None,
            };
            if let Some(run_inputs) = &run_inputs {
                let m = crate::emit::model::model_items(&k.name, &graph, run_inputs, &module.arenas)
                    .map_err(|diagnostic| BuildError::Graph { file: file.clone(), diagnostic })?;
                module.items.push_str(&m.items);
                model_decls.push(m.header);
            }
            if k.onnx {
                let bytes = tgc_runtime::safetensors_io::to_safetensors(&loaded.weights, &[])
                    .map_err(|e| BuildError::Config(format!("kernel `{}`: {e}", k.name)))?;
                let path = out_dir.join(lib).join(format!("{}.safetensors", k.name));
                weight_files.push((path.clone(), bytes));
                module.items.push_str(&crate::emit::model::embedded_weights_items(&path.display().to_string()));
            }
            for note in &module.notes {
                if metadata {
                    println!("cargo:warning={note}");
                } else {
                    eprintln!("warning: {note}");
                }
            }
            if self.sm80 || self.sm90 {
                let prefix = out_dir.join(lib).join(format!("{symbol}_")).display().to_string();
                let source = crate::emit::gpu_api::CubinSource::Files(&prefix);
                let plans = crate::tune::gpu::Recorded::new(gpu_cache.as_ref(), &crate::plan::cost::Analytic);
                let mut sm80 = crate::emit::gpu_api::sm80_module(&graph, &points, source, self.sm90, &plans)
                    .map_err(|m| BuildError::Gpu(format!("kernel `{}`: {m}", k.name)))?;
                if let Some(note) = plans.miss_note(&graph.name) {
                    if metadata {
                        println!("cargo:warning={note}");
                    } else {
                        eprintln!("warning: {note}");
                    }
                }
                if let Some(run_inputs) = &run_inputs {
                    let items = crate::emit::model::sm80_model_items(&k.name, &graph, run_inputs)
                        .map_err(|diagnostic| BuildError::Graph { file: file.clone(), diagnostic })?;
                    sm80.add_items(&items);
                }
                sm80_cubins.extend(sm80.files.into_iter().map(|(path, bytes)| (PathBuf::from(path), bytes)));
                module.items.push_str(&sm80.text);
            }
            files.push(file);
            modules.push(module);
        }
        let mut symbols: Vec<&str> = modules.iter().flat_map(|m| m.c_units.iter().map(|u| u.symbol.as_str())).collect();
        symbols.sort_unstable();
        if let Some(w) = symbols.windows(2).find(|w| w[0] == w[1]) {
            return Err(BuildError::Config(format!("two kernels would export the C symbol `{}`: rename one", w[0])));
        }

        let c_dir = out_dir.join(lib);
        std::fs::create_dir_all(&c_dir).map_err(|source| BuildError::Io {
            action: "create directory",
            path: c_dir.clone(),
            source,
        })?;
        for (path, bytes) in sm80_cubins.iter().chain(&weight_files) {
            tgc_runtime::files::write_atomic(path, bytes).map_err(|source| BuildError::Io {
                action: "write",
                path: path.clone(),
                source,
            })?;
        }
        let mut c_files = Vec::new();
        for unit in modules.iter().flat_map(|m| &m.c_units) {
            let path = c_dir.join(format!("{}.c", unit.symbol));
            write(&path, &unit.source)?;
            c_files.push(path);
        }
        let compiled = self.run_cc(lib, &out_dir, &c_files, metadata)?;

        let mut rust = format!(
            "// Generated by tgc's build helper (tgc_core::build) from:\n{}// Do not edit; include with\n// `include!(concat!(env!(\"OUT_DIR\"), \"/{lib}.rs\"));`.\n",
            files.iter().map(|f| format!("//   {}\n", f.display())).collect::<String>()
        );
        for m in &modules {
            rust.push('\n');
            rust.push_str(&m.to_module_text());
        }
        let rust_file = out_dir.join(format!("{lib}.rs"));
        write(&rust_file, &rust)?;
        let header = if model_decls.is_empty() {
            None
        } else {
            let path = out_dir.join(format!("{lib}.h"));
            write(&path, &crate::emit::model::header(lib, &model_decls))?;
            Some(path)
        };
        Ok(Generated { rust_file, c_files, header, compiled })
    }

    /// The target triple: [`Kernels::target`], `$TARGET`, else rustc's host.
    fn target_triple(&self) -> Result<String, BuildError> {
        match self.target.clone().or_else(|| std::env::var("TARGET").ok()) {
            Some(t) => Ok(t),
            None => rustc_host().map_err(BuildError::Config),
        }
    }

    /// A C build for the target, with the kernels' flags and optimisation
    /// level.
    fn cc_build(&self) -> Result<cc::Build, BuildError> {
        let env = |k: &str| std::env::var(k).ok();
        let host = match self.host.clone().or_else(|| env("HOST")) {
            Some(h) => h,
            None => rustc_host().map_err(BuildError::Config)?,
        };
        let mut build = cc::Build::new();
        build.target(&self.target_triple()?).host(&host).opt_level(c_opt_level(self.opt_level));
        if env("DEBUG").is_none() {
            build.debug(false);
        }
        Ok(build)
    }

    /// Builds the C units into the static library `lib` in `out_dir`:
    /// each unit's object from the object cache `out_dir/<lib>-objects`
    /// when an earlier build compiled the same C with the same compiler
    /// command (flags included) and version, else compiled, up to
    /// `$NUM_JOBS` (Cargo's jobs) or the machine's threads at once. Returns
    /// the C files it compiled. With MSVC, which takes other arguments, `cc`
    /// compiles every unit.
    fn run_cc(
        &self,
        lib: &str,
        out_dir: &Path,
        c_files: &[PathBuf],
        metadata: bool,
    ) -> Result<Vec<PathBuf>, BuildError> {
        let env = |k: &str| std::env::var(k).ok();
        let mut build = self.cc_build()?;
        build
            .files(c_files)
            .out_dir(out_dir)
            .cargo_metadata(metadata)
            .cargo_warnings(metadata)
            .std("c11")
            // Generated code: unused loop variables and parameters are normal.
            .warnings(false)
            .extra_warnings(false);
        // As in `tgc_runtime::cpu`: no FMA contraction by the compiler (the
        // kernels' own `fmaf` are the only fused operations), so every clone
        // and both printers give the same bits; no FP exception flags or
        // errno, so the vectoriser can work.
        // And the optimisation flags past the level (`OPT_CFLAGS`).
        for flag in tgc_runtime::cpu::OPT_CFLAGS.iter().chain(tgc_runtime::cpu::VALUE_CFLAGS) {
            build.flag_if_supported(flag);
        }
        let cc_error = |e: cc::Error| BuildError::CCompiler(e.to_string());
        let compiler = build.try_get_compiler().map_err(cc_error)?;
        let compiled = if compiler.is_like_msvc() {
            build.files(c_files).try_compile(lib).map_err(cc_error)?;
            c_files.to_vec()
        } else {
            let cache = tgc_runtime::objcache::ObjectCache::open(&out_dir.join(format!("{lib}-objects")))
                .map_err(|e| BuildError::CCompiler(e.to_string()))?;
            let (objects, compiled) = cached_objects(&compiler, &cache, c_files)?;
            build.try_create_archive(lib, &objects).map_err(cc_error)?;
            if metadata {
                println!("cargo:rustc-link-lib=static={lib}");
                println!("cargo:rustc-link-search=native={}", out_dir.display());
            }
            compiled
        };
        // The kernels call libm (`expf`, `sqrtf`, …).
        if metadata && env("CARGO_CFG_TARGET_FAMILY").is_some_and(|f| f.split(',').any(|f| f == "unix")) {
            println!("cargo:rustc-link-lib=m");
        }
        Ok(compiled)
    }
}

/// The object of each of `c_files` (in order), from `cache` or compiled
/// by `compiler` (`-c`) into it, several at once; and the files compiled.
fn cached_objects(
    compiler: &cc::Tool,
    cache: &tgc_runtime::objcache::ObjectCache,
    c_files: &[PathBuf],
) -> Result<(Vec<PathBuf>, Vec<PathBuf>), BuildError> {
    let command = compiler.to_command();
    let mut words = vec![command.get_program().to_string_lossy().into_owned()];
    words.extend(command.get_args().map(|a| a.to_string_lossy().into_owned()));
    let words = words.join("\0");
    let version = compiler.to_command().arg("--version").output().map_err(|e| {
        BuildError::CCompiler(format!("cannot run the C compiler `{}`: {e}", compiler.path().display()))
    })?;
    let mut objects = Vec::new();
    let mut missing = Vec::new();
    for file in c_files {
        let source =
            std::fs::read(file).map_err(|source| BuildError::Io { action: "read", path: file.clone(), source })?;
        let key = tgc_runtime::objcache::ObjectCache::key(&[&source, words.as_bytes(), &version.stdout]);
        match cache.lookup(&key, "o").map_err(|e| BuildError::CCompiler(e.to_string()))? {
            Some(object) => objects.push(object),
            None => {
                objects.push(cache.path(&key, "o"));
                missing.push((file, key));
            }
        }
    }
    let jobs = std::env::var("NUM_JOBS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(1)
        .clamp(1, missing.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let compile_one = |(file, key): &(&PathBuf, String)| -> Result<(), BuildError> {
        let partial = cache.partial(key, "o");
        let output = compiler.to_command().arg("-c").arg("-o").arg(&partial).arg(file).output().map_err(|e| {
            BuildError::CCompiler(format!("cannot run the C compiler `{}`: {e}", compiler.path().display()))
        })?;
        if !output.status.success() {
            let _ = std::fs::remove_file(&partial);
            return Err(BuildError::CCompiler(format!(
                "the C compiler `{}` failed ({}) on `{}`:\n{}",
                compiler.path().display(),
                output.status,
                file.display(),
                String::from_utf8_lossy(&output.stderr).trim_end()
            )));
        }
        cache.store(&partial, key, "o").map_err(|e| BuildError::CCompiler(e.to_string()))?;
        Ok(())
    };
    let results: Vec<Result<(), BuildError>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..jobs)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    while let Some(unit) = missing.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) {
                        done.push(compile_one(unit));
                    }
                    done
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    });
    results.into_iter().collect::<Result<(), BuildError>>()?;
    Ok((objects, missing.into_iter().map(|(f, _)| f.clone()).collect()))
}

/// A kernel's module, with what was loaded (its graph, and an ONNX model's
/// weights) and its ShapeSet points (for the sm80 part).
type CompiledKernel = (api::KernelModule, pipeline::Loaded, Vec<BTreeMap<String, i64>>);

/// The kernel's module, and its graph and ShapeSet points.
fn compile_kernel(
    k: &KernelSpec,
    file: &Path,
    symbol: &str,
    tuning: Option<&crate::tune::Tuning>,
) -> Result<CompiledKernel, BuildError> {
    let graph_err = |diagnostic: Diagnostic| BuildError::Graph { file: file.to_path_buf(), diagnostic };
    let loaded = if k.onnx {
        pipeline::load_onnx(file, &[]).map_err(graph_err)?
    } else {
        let text = crate::diag::read_source(file)
            .map_err(|source| BuildError::Io { action: "read", path: file.to_path_buf(), source })?
            .map_err(graph_err)?;
        pipeline::load(&text, Format::of(file, &text), k.entry.as_deref()).map_err(graph_err)?
    };
    let mut points = Vec::new();
    for p in &k.shapes {
        let mut point = BTreeMap::new();
        for (sym, v) in p {
            if point.insert(sym.clone(), *v).is_some() {
                return Err(BuildError::Config(format!("kernel `{}`: shapes() gives `{sym}` twice", k.name)));
            }
        }
        if point.is_empty() {
            return Err(BuildError::Config(format!("kernel `{}`: shapes() needs at least one (SYM, INT)", k.name)));
        }
        points.push(point);
    }
    let backend = Backend::C { symbol: symbol.to_string(), tuning: tuning.cloned() };
    let module = api::kernel_module(&k.name, &loaded.graph, &points, &backend).map_err(graph_err)?;
    Ok((module, loaded, points))
}

/// `<package>_<version>` from Cargo's variables, as C identifier characters.
fn symbol_prefix() -> String {
    let name = std::env::var("CARGO_PKG_NAME").unwrap_or_else(|_| "crate".into());
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_else(|_| "0".into());
    format!("{name}_{version}").chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect()
}

/// The host triple of `$RUSTC` (or `rustc`), from `rustc -vV`.
fn rustc_host() -> Result<String, String> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = std::process::Command::new(&rustc)
        .arg("-vV")
        .output()
        .map_err(|e| format!("cannot run `{rustc} -vV` to find the target ({e}); set TARGET or give target(TRIPLE)"))?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .ok_or_else(|| format!("`{rustc} -vV` names no host; set TARGET or give target(TRIPLE)"))
}

/// Writes `text` to `path` unless it already holds exactly that (so Cargo
/// and `cc` see unchanged files as unchanged), whole or not at all
/// ([`tgc_runtime::files::write_atomic`]: a build killed part way leaves no
/// torn file, and a link at `path` is replaced, not followed).
fn write(path: &Path, text: &str) -> Result<(), BuildError> {
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file())
        && std::fs::read_to_string(path).is_ok_and(|old| old == text)
    {
        return Ok(());
    }
    tgc_runtime::files::write_atomic(path, text.as_bytes()).map_err(|source| BuildError::Io {
        action: "write",
        path: path.to_path_buf(),
        source,
    })
}

/// The C optimisation level of the kernels: `explicit` when the build
/// script chose one, else 2 whatever Cargo's profile, so a debug build
/// (`$OPT_LEVEL` 0) does not run unoptimised micro-kernels. Not 3 by
/// default: GCC 12.2's `-O3` loop vectoriser (the dynamic cost model)
/// miscompiles a generated reduction whose subscript holds a floor division
/// (found by the movement property test, seed `0x74676370726f7030` case
/// 202: `-O3` gives -3 where `-O2` and the interpreter give 0);
/// `tgc_runtime::cpu` compiles at `-O2` for the same reason.
fn c_opt_level(explicit: Option<u32>) -> u32 {
    explicit.unwrap_or(2)
}

#[cfg(test)]
mod tests;

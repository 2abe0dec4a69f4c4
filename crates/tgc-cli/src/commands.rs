//! The three commands. Every user error becomes a [`Failure`] with exit
//! code 1 and a `file:line:col: error[Name]: message` line.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;

use tgc_core::pipeline::{self, Loaded};
use tgc_core::timings::Timings;
use tgc_core::{Diagnostic, ErrorName};
use tgc_runtime::input::Pending;
use tgc_runtime::HostTensor;

use crate::cli::{Backend, Cli, Command, Target, ToolchainAction};
use crate::progress::Stages;

/// Why a command failed: the message for stderr and the exit code.
pub struct Failure {
    pub message: String,
    pub code: u8,
}

impl Failure {
    pub(crate) fn user(message: impl Into<String>) -> Failure {
        Failure { message: format!("tgc: {}", message.into()), code: 1 }
    }

    pub(crate) fn diag(file: &Path, d: &Diagnostic) -> Failure {
        let code = if d.name == ErrorName::Internal { 2 } else { 1 };
        Failure { message: d.render(&file.display().to_string()), code }
    }
}

impl From<tgc_runtime::Error> for Failure {
    fn from(e: tgc_runtime::Error) -> Failure {
        Failure::user(e.to_string())
    }
}

type Result<T> = std::result::Result<T, Failure>;

pub fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Check { graph, entry, dump } => check(&graph, entry.as_deref(), &dump),
        Command::Run {
            graph,
            entry,
            backend,
            dims,
            inputs,
            inputs_from,
            output_dir,
            tiles,
            max_memory,
            algos,
            tuning,
        } => {
            let run = RunOptions { backend, tiles: &tiles, max_memory, algos: &algos, tuning: tuning.as_deref() };
            let given = Inputs { flags: &inputs, from: inputs_from.as_deref() };
            run_graph(&graph, entry.as_deref(), &dims, &given, &output_dir, &run)
        }
        Command::Import { model, out } => crate::import::import(&model, &out),
        Command::Compile { graph, entry, target, dims, dump, out, timings, tuning, algos, regions } => {
            let mut t = Timings::default();
            let how = CompileOptions { target, out: out.as_deref(), tuning: tuning.as_deref(), algos: &algos, regions };
            let result = compile(&graph, entry.as_deref(), &dims, &dump, &how, &mut t);
            if timings {
                eprint!("{}", t.report());
            }
            result
        }
        Command::Toolchain { action } => toolchain(action),
        Command::Tune { graph, entry, points, dims, cache, check, warmup, repetitions, report, target } => {
            crate::tune::tune(&crate::tune::TuneArgs {
                graph: &graph,
                entry: entry.as_deref(),
                points: &points,
                dims: &dims,
                cache: &cache,
                check,
                warmup,
                repetitions: repetitions as usize,
                report: report.as_deref(),
                target,
            })
        }
    }
}

/// `tgc toolchain show|install`.
fn toolchain(action: ToolchainAction) -> Result<()> {
    use tgc_core::gpu::toolchain::{Toolchain, ROOT_ENV};
    let found = match action {
        ToolchainAction::Show => Toolchain::locate(),
        ToolchainAction::Install { dir, python } => {
            eprintln!("tgc: installing {} into {}", tgc_core::gpu::toolchain::WHEELS.join(" "), dir.display());
            Toolchain::install(&dir, python.as_ref())
        }
    };
    let t = found.map_err(|e| Failure::user(e.to_string()))?;
    println!("CUDA toolchain: {}", t.root().display());
    println!("NVRTC: {}", t.nvrtc_library().display());
    if std::env::var_os(ROOT_ENV).is_none_or(|v| std::path::Path::new(&v) != t.root()) {
        println!("to use it from any folder: export {ROOT_ENV}={}", t.root().display());
    }
    Ok(())
}

pub(crate) fn load(path: &Path, entry: Option<&str>) -> Result<Loaded> {
    if path.extension().is_some_and(|e| e == "onnx") {
        if entry.is_some() {
            return Err(Failure::user("--entry applies to graph-language files; an ONNX model holds one graph"));
        }
        return pipeline::load_onnx(path, &[]).map_err(|d| Failure::diag(path, &d));
    }
    let text = tgc_core::diag::read_source(path)
        .map_err(|e| Failure::user(format!("cannot read {}: {e}", path.display())))?
        .map_err(|d| Failure::diag(path, &d))?;
    pipeline::load(&text, pipeline::Format::of(path, &text), entry).map_err(|d| Failure::diag(path, &d))
}

pub(crate) fn parse_dims(dims: &[String]) -> Result<BTreeMap<String, i64>> {
    let mut out = BTreeMap::new();
    for d in dims {
        let (k, v) = d.split_once('=').ok_or_else(|| Failure::user(format!("--dim `{d}`: expected SYM=INT")))?;
        let v: i64 = v.trim().parse().map_err(|_| Failure::user(format!("--dim `{d}`: `{v}` is not an integer")))?;
        if out.insert(k.trim().to_string(), v).is_some() {
            return Err(Failure::user(format!("--dim {k} is given twice")));
        }
    }
    Ok(out)
}

fn check(path: &Path, entry: Option<&str>, dump: &[String]) -> Result<()> {
    for s in dump {
        pipeline::check_stage(s).map_err(|d| Failure::diag(path, &d))?;
    }
    let loaded = load(path, entry)?;
    println!("{}", pipeline::signature(&loaded.graph));
    if dump.is_empty() {
        return Ok(());
    }
    let artifacts = pipeline::compile_cpu(&loaded.graph, &mut Timings::default())
        .map_err(|d| Failure::diag(path, &loaded.locate(d)))?;
    for s in dump {
        let text = pipeline::dump_stage(s, &loaded, &loaded.graph, &artifacts)
            .map_err(|d| Failure::diag(path, &loaded.locate(d)))?;
        print!("=== {s} ===\n{text}");
    }
    Ok(())
}

/// Opens `NAME=FILE.npy` or `NAME=FILE.safetensors:TENSOR` and reads the
/// file's header; the data is read later, once the run's budget allows it.
fn open_input(spec: &str) -> Result<(String, Pending<File>)> {
    let (name, file) = spec.split_once('=').ok_or_else(|| {
        Failure::user(format!("--input `{spec}`: expected NAME=FILE.npy or NAME=FILE.safetensors:TENSOR"))
    })?;
    let tensor = if let Some((f, t)) = file.rsplit_once(':').filter(|(f, _)| f.ends_with(".safetensors")) {
        tgc_runtime::safetensors_io::open_safetensors(Path::new(f), t)?
    } else if file.ends_with(".npy") {
        tgc_runtime::npy::open_npy(Path::new(file))?
    } else {
        return Err(Failure::user(format!("--input `{spec}`: the file must be .npy or .safetensors:TENSOR")));
    };
    Ok((name.to_string(), tensor))
}

/// `tgc run`'s inputs: the `--input` flags and the `--inputs` source.
struct Inputs<'a> {
    flags: &'a [String],
    from: Option<&'a Path>,
}

/// The tensors of `--inputs PATH`, by file name, opened (their headers
/// read, the data not yet): each `NAME.npy` of a folder (other files
/// passed over), or each tensor of a `.safetensors` file.
///
/// Errors: a path that is neither, a file that cannot be opened or is not
/// a valid `.npy` or `.safetensors`.
fn open_inputs_from(path: &Path) -> Result<Vec<(String, Pending<File>)>> {
    let io = |e: std::io::Error| Failure::user(format!("--inputs {}: {e}", path.display()));
    if path.is_dir() {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(path).map_err(io)? {
            let p = entry.map_err(io)?.path();
            if let (Some(stem), Some("npy")) =
                (p.file_stem().and_then(|s| s.to_str()), p.extension().and_then(|e| e.to_str()))
            {
                files.push((stem.to_string(), p.clone()));
            }
        }
        files.sort();
        return files.into_iter().map(|(name, p)| Ok((name, tgc_runtime::npy::open_npy(&p)?))).collect();
    }
    if path.extension().is_none_or(|e| e != "safetensors") {
        return Err(Failure::user(format!(
            "--inputs {}: expected a folder of NAME.npy files or a .safetensors file",
            path.display()
        )));
    }
    tgc_runtime::safetensors_io::tensor_names(path)?
        .into_iter()
        .map(|name| {
            let t = tgc_runtime::safetensors_io::open_safetensors(path, &name)?;
            Ok((name, t))
        })
        .collect()
}

/// An input of a run: opened from a file (read once the budget allows), or
/// held by the source (an ONNX model's initializer).
enum Given {
    Opened(Pending<File>),
    Held(HostTensor),
}

impl Given {
    fn dtype(&self) -> tgc_runtime::DType {
        match self {
            Given::Opened(p) => p.dtype(),
            Given::Held(t) => t.dtype(),
        }
    }

    fn shape(&self) -> &[usize] {
        match self {
            Given::Opened(p) => p.shape(),
            Given::Held(t) => t.shape(),
        }
    }

    /// The bytes the run holds for it beyond the graph's own tensors.
    fn data_bytes(&self) -> u64 {
        match self {
            Given::Opened(p) => p.data_bytes(),
            Given::Held(t) => t.bytes().len() as u64,
        }
    }

    fn read(self) -> Result<HostTensor> {
        match self {
            Given::Opened(p) => Ok(p.read()?),
            Given::Held(t) => Ok(t),
        }
    }
}

/// `--tile AXIS=SIZE` options, sorted by axis: the strip-mined axes and
/// their sizes.
fn parse_tiles(tiles: &[String]) -> Result<(Vec<usize>, Vec<i64>)> {
    let mut out: BTreeMap<usize, i64> = BTreeMap::new();
    for t in tiles {
        let (a, v) = t.split_once('=').ok_or_else(|| Failure::user(format!("--tile `{t}`: expected AXIS=SIZE")))?;
        let a: usize =
            a.trim().parse().map_err(|_| Failure::user(format!("--tile `{t}`: `{a}` is not an axis index")))?;
        let v: i64 = match v.trim().parse() {
            Ok(v) if v >= 1 => v,
            _ => return Err(Failure::user(format!("--tile `{t}`: the size `{v}` is not an integer ≥ 1"))),
        };
        if out.insert(a, v).is_some() {
            return Err(Failure::user(format!("--tile {a} is given twice")));
        }
    }
    Ok(out.into_iter().unzip())
}

/// How `tgc run` runs: the backend, `--tile` and `--max-memory`.
struct RunOptions<'a> {
    backend: Backend,
    tiles: &'a [String],
    max_memory: u64,
    /// `--algo` pins, unparsed.
    algos: &'a [String],
    /// `--tuning`: the cache whose GPU records rank the plans.
    tuning: Option<&'a Path>,
}

/// The estimator of the GPU templates: the analytic model with the
/// `--algo` pins (`KEY=VALUE` each).
///
/// Errors: a pin that is not `KEY=VALUE` of `000` §1.7's algorithms.
pub(crate) fn estimator(algos: &[String]) -> Result<tgc_core::plan::cost::PinnedAlgorithms<'static>> {
    let pins = algos
        .iter()
        .map(|a| tgc_core::plan::cost::parse_pin(a).map_err(|d| Failure::user(d.message)))
        .collect::<Result<_>>()?;
    Ok(tgc_core::plan::cost::PinnedAlgorithms { pins, inner: &tgc_core::plan::cost::Analytic })
}

/// The GPU records of `--tuning DIR`, if given.
///
/// Errors: a folder or record that cannot be read, or is refused.
fn gpu_records(tuning: Option<&Path>) -> Result<Option<tgc_core::tune::Cache<tgc_core::tune::gpu::GpuRecord>>> {
    tuning.map(tgc_core::tune::gpu::open).transpose().map_err(|e| Failure::user(e.to_string()))
}

/// The note on stderr for the plan decisions of graph `graph` that `plans`
/// found no record for, if any.
fn note_misses(plans: &tgc_core::tune::gpu::Recorded, graph: &str) {
    if let Some(note) = plans.miss_note(graph) {
        eprintln!("note: {note}");
    }
}

fn run_graph(
    path: &Path,
    entry: Option<&str>,
    dims: &[String],
    inputs: &Inputs,
    out_dir: &Path,
    run: &RunOptions,
) -> Result<()> {
    let backend = run.backend;
    let (tile_axes, tile_sizes) = parse_tiles(run.tiles)?;
    if !tile_axes.is_empty() && backend != Backend::Cpu {
        return Err(Failure::user("--tile applies to --backend cpu only"));
    }
    if !run.algos.is_empty() && backend != Backend::Cuda {
        return Err(Failure::user("--algo applies to --backend cuda only"));
    }
    if run.tuning.is_some() && backend != Backend::Cuda {
        return Err(Failure::user("--tuning applies to --backend cuda only (CPU builds read it with `tgc compile`)"));
    }
    #[cfg_attr(not(feature = "cuda"), allow(unused_variables))]
    let estimator = estimator(run.algos)?;
    let stages = Stages::start(&format!("loading {}", path.display()));
    let loaded = load(path, entry)?;
    let g = &loaded.graph;
    let mut given: BTreeMap<String, Given> = BTreeMap::new();
    let from = match inputs.from {
        Some(p) => open_inputs_from(p)?,
        None => Vec::new(),
    };
    for (name, t) in
        inputs.flags.iter().map(|spec| open_input(spec)).collect::<Result<Vec<_>>>()?.into_iter().chain(from)
    {
        let name = loaded.name_of(&name).to_string();
        let t = Given::Opened(t);
        if given.insert(name.clone(), t).is_some() {
            return Err(Failure::user(format!("input `{name}` is given twice")));
        }
    }
    for (name, t) in &loaded.weights {
        given.entry(name.clone()).or_insert_with(|| Given::Held(t.clone()));
    }
    let names = pipeline::input_names(g);
    for name in given.keys() {
        if !names.contains(name) {
            return Err(Failure::user(format!("the graph has no input `{name}` (inputs: {})", names.join(", "))));
        }
    }
    let mut pending = Vec::new();
    for (name, id) in names.iter().zip(g.inputs()) {
        let t = given
            .remove(name)
            .ok_or_else(|| Failure::user(format!("missing --input {name}=FILE (inputs: {})", names.join(", "))))?;
        let want = g.dtype(id);
        match (t.dtype(), want) {
            (a, b) if a == b => {}
            (tgc_runtime::DType::F32, tgc_runtime::DType::BF16) => {}
            (a, b) => return Err(Failure::user(format!("input `{name}` is {a} but the graph wants {b}"))),
        }
        pending.push((t, want));
    }
    let shapes: Vec<Vec<usize>> = pending.iter().map(|(t, _)| t.shape().to_vec()).collect();
    let values =
        g.resolve_dims(&parse_dims(dims)?, Some(&shapes)).map_err(|d| Failure::diag(path, &loaded.locate(d)))?;
    let bound = g.bind(&values).map_err(|d| Failure::diag(path, &loaded.locate(d)))?;
    let file_bytes = pending.iter().fold(0u64, |sum, (t, _)| sum.saturating_add(t.data_bytes()));
    // The CPU backend allocates its program's buffers; the interpreter (and
    // the bound for the GPU) every node's value.
    let check = if backend == Backend::Cpu { pipeline::check_cpu_run_bytes } else { pipeline::check_run_bytes };
    check(&bound, file_bytes, run.max_memory).map_err(|d| Failure::diag(path, &loaded.locate(d)))?;
    let ordered = pending
        .into_iter()
        .map(|(t, want)| {
            let t = t.read()?;
            Ok(if t.dtype() == want { t } else { t.convert(want) })
        })
        .collect::<Result<Vec<HostTensor>>>()?;
    let outputs = match backend {
        Backend::Interp => {
            stages.stage("running on the reference interpreter");
            pipeline::run_interp(&bound, &ordered).map_err(|d| Failure::diag(path, &loaded.locate(d)))?
        }
        Backend::Cpu => {
            let work = scratch_dir("run")?;
            let work = work.path();
            let failure = |e| match e {
                pipeline::RunError::Diag(d) => Failure::diag(path, &loaded.locate(d)),
                pipeline::RunError::Runtime(e) => Failure::from(e),
            };
            stages.stage("generating C and compiling it");
            let opts = pipeline::Options { tiles: pipeline::TilePlan { axes: tile_axes }, ..Default::default() };
            let compiled = pipeline::CompiledCpu::new(&bound, &opts, work).map_err(failure)?;
            stages.stage("running");
            compiled.run(&ordered, &tile_sizes).map_err(failure)?
        }
        #[cfg(feature = "cuda")]
        Backend::Cuda => {
            let failure = |e| match e {
                crate::gpu::GpuError::Diag(d) => Failure::diag(path, &loaded.locate(d)),
                crate::gpu::GpuError::Runtime(e) => Failure::from(e),
            };
            let cache = gpu_records(run.tuning)?;
            let plans = tgc_core::tune::gpu::Recorded::new(cache.as_ref(), &estimator);
            stages.stage("compiling CUDA and running on the GPU");
            let out = crate::gpu::run_cuda(&bound, &ordered, &plans).map_err(failure)?;
            stages.clear();
            note_misses(&plans, &bound.name);
            out
        }
        #[cfg(not(feature = "cuda"))]
        Backend::Cuda => {
            return Err(Failure::user(
                "the cuda backend is not available in this build (feature `cuda` of tgc-cli is off): use --backend \
                 cpu or interp",
            ));
        }
    };
    std::fs::create_dir_all(out_dir).map_err(|e| Failure::user(format!("cannot create {}: {e}", out_dir.display())))?;
    for (o, t) in g.outputs.iter().zip(&outputs) {
        let file = out_dir.join(format!("{}.npy", o.name));
        tgc_runtime::npy::write_npy(&file, t)?;
        println!("wrote {} ({}{:?})", file.display(), t.dtype(), t.shape());
    }
    Ok(())
}

/// A fresh private folder for the kernels this process compiles for
/// `command` (`run`, `tune`), removed when the value drops
/// ([`tgc_runtime::files::scratch_dir`]).
pub(crate) fn scratch_dir(command: &str) -> Result<tgc_runtime::files::TempDir> {
    tgc_runtime::files::scratch_dir(command).map_err(|e| {
        Failure::user(format!("cannot create a scratch folder in {}: {e}", std::env::temp_dir().display()))
    })
}

/// `tgc compile`'s target, output folder, tuning cache, `--algo` pins and
/// region rule.
struct CompileOptions<'a> {
    target: Target,
    out: Option<&'a Path>,
    tuning: Option<&'a Path>,
    algos: &'a [String],
    regions: Option<crate::cli::Regions>,
}

fn compile(
    path: &Path,
    entry: Option<&str>,
    dims: &[String],
    dump: &[String],
    how: &CompileOptions,
    timings: &mut Timings,
) -> Result<()> {
    let (target, out) = (how.target, how.out);
    if !how.algos.is_empty() && target == Target::Cpu {
        return Err(Failure::user("--algo applies to --target sm80 and sm90 only"));
    }
    if how.regions.is_some() && target != Target::Cpu {
        return Err(Failure::user(
            "--regions applies to --target cpu only (the GPU targets form their regions for the templates)",
        ));
    }
    let fuse = match how.regions {
        None | Some(crate::cli::Regions::PolyCore) => true,
        Some(crate::cli::Regions::Grouping) => false,
    };
    let estimator = estimator(how.algos)?;
    for s in dump {
        pipeline::check_stage(s).map_err(|d| Failure::diag(path, &d))?;
    }
    let stages = Stages::start(&format!("loading {}", path.display()));
    let loaded = timings.time("load (read, parse, lower to Tiny IR)", || load(path, entry))?;
    stages.clear();
    let mut given = parse_dims(dims)?;
    let gpu = match target {
        Target::Cpu => None,
        Target::Sm80 => Some("sm80"),
        Target::Sm90 => Some("sm90"),
    };
    if gpu.is_some() {
        // A GPU kernel is compiled for concrete sizes: a symbol not given
        // takes the graph header's default, and the user is told so.
        let defaulted: Vec<(String, i64)> = loaded
            .graph
            .symbols
            .iter()
            .filter(|s| !given.contains_key(&s.name))
            .filter_map(|s| s.default.map(|v| (s.name.clone(), v)))
            .collect();
        if !defaulted.is_empty() {
            let shown: Vec<String> = defaulted.iter().map(|(name, v)| format!("{name}={v}")).collect();
            eprintln!("note: {} from the graph header's defaults (give --dim to override)", shown.join(", "));
            given.extend(defaulted);
        }
    }
    let graph = if given.is_empty() {
        loaded.graph.clone()
    } else {
        loaded.graph.bind(&given).map_err(|d| Failure::diag(path, &loaded.locate(d)))?
    };
    if let Some(gpu) = gpu {
        let cache = gpu_records(how.tuning)?;
        let plans = tgc_core::tune::gpu::Recorded::new(cache.as_ref(), &estimator);
        compile_gpu(path, gpu, &loaded, &graph, dump, out, &plans, timings)?;
        note_misses(&plans, &graph.name);
        return Ok(());
    }
    let tuning = match how.tuning {
        Some(dir) => Some(tgc_core::tune::Tuning {
            cache: tgc_core::tune::Cache::open(dir).map_err(|e| Failure::user(e.to_string()))?,
            toolchain: tgc_core::tune::Toolchain::host().map_err(Failure::user)?,
        }),
        None => None,
    };
    let artifacts = pipeline::compile_cpu_tuned(&graph, tuning.as_ref(), fuse, timings)
        .map_err(|d| Failure::diag(path, &loaded.locate(d)))?;
    if let Some(dir) = out {
        create_dir(dir)?;
        for (file, text) in &artifacts.files {
            write_file(&dir.join(file), text.as_bytes())?;
        }
    }
    if out.is_some() || tuning.is_some() {
        for note in &artifacts.notes {
            eprintln!("note: {note}");
        }
    }
    for s in dump {
        let text = timings
            .time(&format!("dump {s}"), || pipeline::dump_stage(s, &loaded, &graph, &artifacts))
            .map_err(|d| Failure::diag(path, &loaded.locate(d)))?;
        emit_dump(s, &text, out, dump.len() == 1)?;
    }
    Ok(())
}

/// The lead of the note `compile --target` prints for each contraction the
/// tensor-core templates refuse, before the template's reason.
const SIMT_FALLBACK: &str = "falls back to SIMT kernels because the tensor-core templates refuse it:";

/// `compile --target sm80|sm90` (`target`): the GPU program's `.cu`,
/// `.ptx`, `.cubin` (and the tensor-core kernel's `plan.json`) into `out`,
/// a note on stderr when the template refused the graph's GEMM, and the
/// dumps (the GPU stages from the compiled program, the others as for the
/// CPU target).
#[allow(clippy::too_many_arguments)]
fn compile_gpu(
    path: &Path,
    target: &str,
    loaded: &Loaded,
    graph: &tgc_core::tiny::Graph,
    dump: &[String],
    out: Option<&Path>,
    estimator: &dyn tgc_core::plan::cost::Estimator,
    timings: &mut Timings,
) -> Result<()> {
    let stages = Stages::start(&format!("compiling the GPU kernels for {target} (plan, CUDA C, NVRTC)"));
    let gpu = timings
        .time("GPU kernels (plan, lowering, CUDA C, PTX, cubin)", || pipeline::compile_gpu(graph, target, estimator))
        .map_err(|d| Failure::diag(path, &d))?;
    stages.clear();
    let file = path.display().to_string();
    for d in &gpu.refusals {
        eprintln!("{}", d.render_note(&file, SIMT_FALLBACK));
    }
    let compiled_for = compiled_for(target, &gpu, &file);
    if let Some(dir) = out {
        create_dir(dir)?;
        let files = gpu.files();
        remove_stale_plans(dir, &files)?;
        for (file, bytes) in files {
            write_file(&dir.join(file), &bytes)?;
        }
    }
    let mut cpu = None;
    for s in dump {
        let text = if pipeline::is_gpu_stage(s) {
            timings.time(&format!("dump {s}"), || pipeline::dump_gpu_stage(s, &gpu)).map(|t| compiled_for.clone() + &t)
        } else if s == "plan" {
            let row = tgc_core::plan::Target::by_name(target).map_err(|d| Failure::diag(path, &d))?;
            Ok(timings.time("dump plan", || pipeline::plan_dump(graph, row, estimator)))
        } else {
            let artifacts = match &cpu {
                Some(a) => a,
                None => cpu.insert(pipeline::compile_cpu(graph, timings).map_err(|d| Failure::diag(path, &d))?),
            };
            timings.time(&format!("dump {s}"), || pipeline::dump_stage(s, loaded, graph, artifacts))
        }
        .map_err(|d| Failure::diag(path, &d))?;
        emit_dump(s, &text, out, dump.len() == 1)?;
    }
    Ok(())
}

/// The lines that head each GPU dump (`gpu`, `cu`, `ptx`, `sass`): the
/// architecture the unit was compiled for (what cuobjdump's `code for
/// sm_XX` shows) and the `--target` (`target`); when the two differ (no
/// kernel of an `sm90` program needs sm_90a, so it is sm_80 code, whose PTX
/// the driver compiles for a 9.x GPU), why: the contractions that fall back to SIMT kernels, in
/// the words of their notes (`file` positions them), or that no kernel is
/// an sm90 one. Each line starts with `//`, a comment in CUDA C and PTX.
fn compiled_for(target: &str, gpu: &pipeline::GpuArtifacts, file: &str) -> String {
    let (arch, asked) = (gpu.arch, gpu.target_arch);
    if arch == asked {
        return format!("// compiled for {arch} (--target {target})\n");
    }
    let mut s = format!(
        "// compiled for {arch}, not the {asked} of --target {target}: no kernel needs {asked} (TMA, wgmma), so the \
         unit is {arch} code (a GPU of the target runs its PTX, which the driver compiles as it loads)\n"
    );
    for d in &gpu.refusals {
        s.push_str(&format!("// {}\n", d.render_note(file, SIMT_FALLBACK)));
    }
    if gpu.refusals.is_empty() {
        let forms: Vec<String> = gpu.program.launches.iter().map(|l| format!("{:?}", l.form)).collect();
        s.push_str(&format!("// its kernels: {} (no template's {asked} branch takes them)\n", forms.join(", ")));
    }
    s
}

/// Removes from `dir` the plan files of an earlier `compile --out`
/// ([`pipeline::GpuArtifacts::is_plan_file`]) that `files` does not hold: a
/// `plan.json` beside a cubin it was not made for would be read as its plan.
///
/// Errors: `dir` cannot be listed, or a stale plan cannot be removed.
fn remove_stale_plans(dir: &Path, files: &[(String, Vec<u8>)]) -> Result<()> {
    let cannot = |what: &str, p: &Path, e: std::io::Error| Failure::user(format!("cannot {what} {}: {e}", p.display()));
    for entry in std::fs::read_dir(dir).map_err(|e| cannot("list", dir, e))? {
        let entry = entry.map_err(|e| cannot("list", dir, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if pipeline::GpuArtifacts::is_plan_file(name) && !files.iter().any(|(f, _)| f == name) {
            std::fs::remove_file(entry.path()).map_err(|e| cannot("remove the stale", &entry.path(), e))?;
            println!("removed {} (a plan of an earlier compile)", entry.path().display());
        }
    }
    Ok(())
}

fn create_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Failure::user(format!("cannot create {}: {e}", dir.display())))
}

/// Writes `bytes` to `p` whole or not at all ([`tgc_runtime::files::write_atomic`])
/// and says so on stdout.
pub(crate) fn write_file(p: &Path, bytes: &[u8]) -> Result<()> {
    tgc_runtime::files::write_atomic(p, bytes)
        .map_err(|e| Failure::user(format!("cannot write {}: {e}", p.display())))?;
    println!("wrote {}", p.display());
    Ok(())
}

/// Prints a stage's dump, headed `=== stage ===` unless it is the only
/// stage asked (`alone`) and DOT text, so that `--dump dot | dot -Tpng`
/// works; or writes it to `<out>/<stage>.txt` (`.dot` for the DOT stages).
fn emit_dump(s: &str, text: &str, out: Option<&Path>, alone: bool) -> Result<()> {
    let dot = pipeline::is_dot_stage(s);
    match out {
        Some(dir) => write_file(&dir.join(format!("{s}.{}", if dot { "dot" } else { "txt" })), text.as_bytes()),
        None if dot && alone => {
            print!("{text}");
            Ok(())
        }
        None => {
            print!("=== {s} ===\n{text}");
            Ok(())
        }
    }
}

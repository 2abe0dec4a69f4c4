//! The pipeline driver: runs the passes in their visible order, names each
//! stage (for `--dump`), and re-verifies the IR after each lowering. The CLI,
//! `tgc::kernel!` and the build-script helper all go through here.
//!
//! Stages, in order: `frontend` (parse + resolve the graph language),
//! `tiny` (lower to Tiny IR, or load Tiny IR JSON), `indexbook` (axis maps),
//! `poly_view` (domains, accesses and dependences in isl, for the dump),
//! `region` (Region Buffer SSA: region formation, with Poly Core when
//! feature `poly` is on), `plan` (the ranked plan space of each GEMM,
//! [`plan_dump`]), `c` (CPU loop nests as C, one kernel per region), and
//! for a GPU target ([`compile_gpu`], a graph that is one contraction (GEMM,
//! batched matmul, convolution) + epilogue with concrete M/N/K): `gpu` (the GPU
//! dialect IR of the chosen plan's kernel), `cu` (its CUDA C with inline PTX),
//! `ptx` and `sass` (NVRTC's PTX, cuobjdump's disassembly of the cubin).

use std::path::Path;

use crate::diag::DResult;
#[cfg(feature = "poly")]
use crate::poly;
use crate::timings::Timings;
use crate::tiny::{self, Graph, Op};
use crate::{cpu, diag, emit, frontend, index_book, interp, plan, region};
use tgc_runtime::HostTensor;

pub use crate::cpu::{Options, TilePlan};

/// Every stage `--dump` knows, in pipeline order, and whether this build has it.
pub const STAGES: &[(&str, bool)] = &[
    ("frontend", true),
    ("tiny", true),
    ("dot", true),
    ("indexbook", true),
    ("poly_view", cfg!(feature = "poly")),
    ("region", true),
    ("dot_regions", true),
    ("dot_kernels", true),
    ("plan", true),
    ("gpu", true),
    ("cu", true),
    ("ptx", true),
    ("sass", true),
    ("c", true),
];

/// The two source formats (`spec/README.md` decision 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// The graph language of `DSL.md`.
    Dsl,
    /// Tiny IR JSON: the node format, or the op-list import format.
    Json,
}

impl Format {
    /// By extension (`.json` → JSON, `.tgc` → DSL); otherwise JSON when the
    /// text starts with `{`.
    pub fn of(path: &Path, text: &str) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some("json") => Format::Json,
            Some("tgc") => Format::Dsl,
            _ if text.trim_start().starts_with('{') => Format::Json,
            _ => Format::Dsl,
        }
    }
}

/// A loaded graph and what the front of the pipeline produced.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub graph: Graph,
    /// The `frontend` dump (graph-language and ONNX sources).
    pub frontend: Option<String>,
    /// Values of inputs the source itself holds (an ONNX model's
    /// initializers), by input name: `run` binds them unless given.
    pub weights: Vec<(String, HostTensor)>,
    /// `(input or output name, the source's name)` where they differ (an
    /// ONNX name that is not an identifier).
    pub aliases: Vec<(String, String)>,
    /// An ONNX model's node descriptions, by node index: its statements'
    /// spans are line `index + 1` (`frontend::onnx`'s invariant), which
    /// [`Loaded::locate`] turns back into the node.
    pub nodes: Vec<String>,
}

impl Loaded {
    /// `d` pointing at what the source calls it: for an ONNX model the
    /// node its span stands for (and no line and column), else `d` as it
    /// is.
    pub fn locate(&self, mut d: crate::Diagnostic) -> crate::Diagnostic {
        if self.nodes.is_empty() {
            return d;
        }
        if let Some(sp) = d.span.take() {
            if let Some(n) = (sp.line as usize).checked_sub(1).and_then(|k| self.nodes.get(k)) {
                d.node = Some(match d.node.take() {
                    Some(tiny) => format!("{n}; Tiny IR node {tiny}"),
                    None => n.clone(),
                });
            }
        }
        d
    }

    /// The graph's name for an input or output given by its own name or
    /// by the source's (an ONNX name).
    pub fn name_of<'a>(&'a self, name: &'a str) -> &'a str {
        self.aliases.iter().find(|(_, s)| s == name).map_or(name, |(t, _)| t.as_str())
    }
}

/// Parses and lowers (DSL) or loads (JSON) a graph, then verifies the Tiny
/// IR and builds its IndexBook so that every user error surfaces here.
///
/// `entry` picks the graph of a multi-graph DSL file (default `main`).
pub fn load(text: &str, format: Format, entry: Option<&str>) -> DResult<Loaded> {
    let (graph, frontend) = match format {
        Format::Dsl => {
            let program = frontend::parser::parse(text)?;
            let (graph, fir) = frontend::to_tiny::lower_with_dump(&program, entry)?;
            (graph, Some(fir))
        }
        Format::Json => {
            if entry.is_some() {
                return Err(diag!(Unsupported, "--entry applies to graph-language files; a JSON file holds one graph"));
            }
            (tiny::json::load_json(text)?, None)
        }
    };
    checked(Loaded { graph, frontend, weights: Vec::new(), aliases: Vec::new(), nodes: Vec::new() })
}

/// Imports the ONNX model at `path` ([`frontend::onnx::read_model`], with
/// the inputs `fixed` at import time) and lowers it like a graph-language
/// source; its initializers become [`Loaded::weights`].
///
/// Errors: the importer's, each naming the node or tensor.
pub fn load_onnx(path: &Path, fixed: &[onnx_protobuf::TensorProto]) -> DResult<Loaded> {
    let imported = frontend::onnx::read_model(path, fixed)?;
    let graph = frontend::to_tiny::lower_program(&imported.program, None).map_err(|d| imported.locate(d))?;
    let frontend = Some(frontend::ir::dump(&imported.program));
    let nodes = imported.node_descriptions().to_vec();
    let loaded = Loaded { graph, frontend, weights: imported.weights, aliases: imported.onnx_names, nodes };
    checked_ref(&loaded).map_err(|d| loaded.locate(d))?;
    Ok(loaded)
}

/// Verifies a loaded graph's Tiny IR and builds its IndexBook, so that
/// every user error surfaces at load.
fn checked(loaded: Loaded) -> DResult<Loaded> {
    checked_ref(&loaded)?;
    Ok(loaded)
}

fn checked_ref(loaded: &Loaded) -> DResult<()> {
    verify_tiny(&loaded.graph)?;
    let book = index_book::build(&loaded.graph)?;
    index_book::verify::check(&loaded.graph, &book)
}

fn verify_tiny(g: &Graph) -> DResult<()> {
    match tiny::verify::verify(g).into_iter().next() {
        None => Ok(()),
        Some(e) => Err(diag!(Internal, "Tiny IR verifier: {e}")),
    }
}

/// Whether `stage`'s dump is Graphviz DOT text (`.dot` under `--out`).
pub fn is_dot_stage(stage: &str) -> bool {
    matches!(stage, "dot" | "dot_regions" | "dot_kernels")
}

/// Checks that `stage` is a known stage built in this version.
pub fn check_stage(stage: &str) -> DResult<()> {
    let available: Vec<&str> = STAGES.iter().filter(|s| s.1).map(|s| s.0).collect();
    match STAGES.iter().find(|s| s.0 == stage) {
        Some((_, true)) => Ok(()),
        Some((_, false)) => {
            let why = if stage == "poly_view" { "needs tgc-core's feature `poly`" } else { "is not built yet" };
            Err(diag!(Unsupported, "stage `{stage}` {why} (available: {})", available.join(", ")))
        }
        None => Err(diag!(UnknownName, "no stage `{stage}` (available: {})", available.join(", "))),
    }
}

/// Canonical Tiny IR JSON of a graph.
pub fn to_json(g: &Graph) -> String {
    tiny::json::to_json(g)
}

/// The names of the graph's inputs, in argument order.
pub fn input_names(g: &Graph) -> Vec<String> {
    g.inputs()
        .into_iter()
        .map(|id| match &g.node(id).op {
            Op::Input { name } => name.clone(),
            _ => g.node(id).label.clone(),
        })
        .collect()
}

/// `name<syms>(x: f16[M, K], …) -> (y: f16[M, N])`, for `tgc check`.
pub fn signature(g: &Graph) -> String {
    let ty = |id| format!("{}{}", g.dtype(id), tiny::infer::fmt_shape(g.shape(id)));
    let ins: Vec<String> = input_names(g).iter().zip(g.inputs()).map(|(n, id)| format!("{n}: {}", ty(id))).collect();
    let outs: Vec<String> = g.outputs.iter().map(|o| format!("{}: {}", o.name, ty(o.node))).collect();
    let syms: Vec<String> = g.symbols.iter().map(ToString::to_string).collect();
    format!(
        "ok: graph {}<{}>({}) -> ({}), {} Tiny IR nodes",
        g.name,
        syms.join(", "),
        ins.join(", "),
        outs.join(", "),
        g.len()
    )
}

/// What `compile --target cpu` produces: file name → contents.
#[derive(Clone, Debug)]
pub struct Artifacts {
    /// The IndexBook and regions every artifact and dump was made from.
    pub front: region::Front,
    pub files: Vec<(String, String)>,
    pub c_source: String,
    /// Files that could not be made, and why (the compile still succeeds:
    /// a graph whose Poly-View fails to build gets no `poly_view.json`,
    /// as its regions are formed without Poly Core).
    pub notes: Vec<String>,
}

/// Generates the CPU artifacts of `g` (which may still have symbols),
/// timing each in `timings`: the [`region::Front`] once, then from it the C source
/// (loop nests, schedule, emission), `tiny.json`, `region.json` and
/// `poly_view.json`.
pub fn compile_cpu(g: &Graph, timings: &mut Timings) -> DResult<Artifacts> {
    compile_cpu_tuned(g, None, true, timings)
}

/// [`compile_cpu`] with the packed kernels' block sizes from `tuning`
/// ([`crate::tune`]; a note in [`Artifacts::notes`] names the kernels that
/// have no record: they keep the analytic sizes), and the regions formed
/// with Poly Core's fusions when `fuse` (feature `poly`; without it, or
/// when `fuse` is false, by the grouping alone: [`region::form_with`]).
pub fn compile_cpu_tuned(
    g: &Graph,
    tuning: Option<&crate::tune::Tuning>,
    fuse: bool,
    timings: &mut Timings,
) -> DResult<Artifacts> {
    let symbol = c_symbol(&g.name);
    let front = timings.time("IndexBook and regions", || region::front(g, fuse, region::Grouping::default()))?;
    let mut notes = Vec::new();
    let c_source = timings.time("C source", || {
        let mut p = cpu::from_tiny::lower_formed(g, &front.book, &front.regions, &Options::default())?;
        if let Some(t) = tuning {
            notes.extend(t.apply(&mut p, &g.name, ""));
        }
        emit::c::emit_c_programs(&[(g, p, symbol.as_str())])
    })?;
    let tiny_json = timings.time("tiny.json", || to_json(g));
    let region_json = timings.time("region.json", || region::json::to_json(g, &front.regions));
    let mut files = vec![
        (format!("{symbol}.c"), c_source.clone()),
        ("tiny.json".to_string(), tiny_json),
        ("region.json".to_string(), region_json),
    ];
    let (poly, poly_notes) = timings.time("poly_view.json", || poly_view_artifact(g, &front.book));
    files.extend(poly);
    notes.extend(poly_notes);
    Ok(Artifacts { front, files, c_source, notes })
}

/// `poly_view.json` (feature `poly`), or why there is none.
#[cfg(feature = "poly")]
fn poly_view_artifact(g: &Graph, book: &index_book::IndexBook) -> (Option<(String, String)>, Vec<String>) {
    let ctx = poly::Ctx::new();
    let json = poly::build(&ctx, g, book)
        .and_then(|view| poly::json::to_json(&view).map_err(|e| crate::diag!(Internal, "Poly-View JSON: {e}")));
    match json {
        Ok(text) => (Some(("poly_view.json".to_string(), text)), Vec::new()),
        Err(e) => (None, vec![format!("no poly_view.json: {e}")]),
    }
}

#[cfg(not(feature = "poly"))]
fn poly_view_artifact(_: &Graph, _: &index_book::IndexBook) -> (Option<(String, String)>, Vec<String>) {
    (None, Vec::new())
}

/// A C identifier for a graph name.
fn c_symbol(name: &str) -> String {
    let s: String = name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    format!("tgc_{s}")
}

/// The `poly_view` dump from a verified IndexBook of `g` (feature `poly`):
/// builds the Poly-View, verifies it, prints it in isl notation.
///
/// Errors: `ExcessivePiecewise` on the node with too many pieces; `Internal`
/// when the verifier fails.
#[cfg(feature = "poly")]
fn poly_view_of(g: &Graph, book: &index_book::IndexBook) -> DResult<String> {
    let ctx = poly::Ctx::new();
    let opts = poly::Options::default();
    let view = poly::build_with(&ctx, g, book, &opts)?;
    if let Some(e) = poly::verify::verify(g, book, &view, &opts).into_iter().next() {
        return Err(crate::Diagnostic { message: format!("Poly-View verifier: {}", e.message), ..e });
    }
    Ok(poly::dump(&view))
}

/// The `region` dump of `g` (which may still have symbols): forms the
/// regions (`000` §4), verifies them, prints them.
///
/// Errors: those of building the IndexBook; `Internal` when the Region
/// verifier fails.
pub fn regions(g: &Graph) -> DResult<String> {
    Ok(region::dump(g, &region::front(g, true, region::Grouping::default())?.regions))
}

/// The `plan` dump of `g` for `target`, what the GPU lowering
/// (`gpu::template`) chooses: for a graph that is one attention, its
/// softmax algorithms ranked and the chosen schedule; for one contraction
/// and its epilogue ([`crate::gpu::mma::recognise::match_gemm`]: a GEMM, a batched
/// matmul, a convolution) the ranked plan space its MMA kernel is chosen
/// from ([`crate::gpu::mma::lower::choose`]); otherwise the same for each region
/// that has a contraction, an attention inside the graph as the one fused
/// region the lowering makes of it
/// ([`crate::gpu::driver::regions::region_graphs`]), or why it is not planned; a
/// graph with none says so. [`dump_stage`] (the CPU target's dumps) uses
/// `sm80`; `tgc compile --target sm80|sm90` passes its target.
pub fn plan_dump(g: &Graph, target: &plan::Target, estimator: &dyn plan::cost::Estimator) -> String {
    let attention = crate::gpu::attention::recognise::match_attention(g);
    if let Ok(text) = template_plan(g, target, estimator) {
        return text;
    }
    let mut out = String::new();
    if let (Err(d), Some(crate::gpu::template::GraphPattern::Attention)) =
        (attention, crate::gpu::template::pattern_of(g))
    {
        out.push_str(&format!("two contractions, not fused as an attention: {}\n", d.message));
    }
    match crate::gpu::driver::regions::region_graphs(g, target, estimator) {
        Ok(regions) => {
            for (name, sub) in regions {
                let text = template_plan(&sub, target, estimator).unwrap_or_else(|why| format!("{why}\n"));
                out.push_str(&format!("region {name}: {text}"));
            }
        }
        Err(d) => out.push_str(&format!("not planned: {}\n", d.message)),
    }
    if out.is_empty() {
        out.push_str("no contraction (REDUCE SUM of MUL) in this graph\n");
    }
    out
}

/// The plan dump of `g` when a template takes it whole: an attention's
/// ([`attention_plan`]) or a GEMM's ([`gemm_plan`]); `Err` with why `g` is
/// no GEMM.
fn template_plan(g: &Graph, target: &plan::Target, estimator: &dyn plan::cost::Estimator) -> Result<String, String> {
    match crate::gpu::attention::recognise::match_attention(g) {
        Ok(graph) => Ok(attention_plan(g, &graph, target, estimator)),
        Err(_) => gemm_plan(g, target, estimator),
    }
}

/// The `plan` dump of the attention `graph` (of `g`): each algorithm of
/// the fused template with each CTA size (query rows) ranked by the
/// estimator (the chosen one marked `*`, the earlier on a tie, as
/// `gpu::driver::lower` and `gpu::attention::build` choose), then the
/// chosen one's schedule.
fn attention_plan(
    g: &Graph,
    graph: &crate::gpu::attention::recognise::AttentionGraph,
    target: &plan::Target,
    estimator: &dyn plan::cost::Estimator,
) -> String {
    use crate::gpu::attention::kernel::{self, Algorithm};
    let label = &g.node(graph.scores).label;
    let problem = kernel::problem(&graph.attention);
    let arch = crate::gpu::dialect::Arch::parse(target.name).unwrap_or(crate::gpu::dialect::Arch::Sm80);
    let ranked: Vec<((Algorithm, i64), Result<crate::plan::cost::Estimate, String>)> = Algorithm::ALL
        .iter()
        .flat_map(|&algo| kernel::warp_choices(arch).iter().map(move |&w| (algo, w)))
        .map(|(algo, warps)| {
            let plan = kernel::plan(&graph.attention, algo, target, warps);
            ((algo, warps), estimator.estimate(&plan, &problem, target).map_err(|d| d.message))
        })
        .collect();
    let mut best: Option<usize> = None;
    for (i, (_, e)) in ranked.iter().enumerate() {
        if let Ok(e) = e {
            if best.is_none_or(|b| ranked[b].1.as_ref().is_ok_and(|be| e.time_s < be.time_s)) {
                best = Some(i);
            }
        }
    }
    let mut out = format!("attention at `{label}`:\n");
    for (i, ((algo, warps), e)) in ranked.iter().enumerate() {
        let mark = if Some(i) == best { '*' } else { ' ' };
        let cost = match e {
            Ok(e) => format!("estimate {:.1} µs, limited by {}", e.time_s * 1e6, e.limit.as_str()),
            Err(why) => format!("not costed: {why}"),
        };
        out.push_str(&format!("{mark} algo_choice attention = {algo:<24} {:>3} rows  {cost}\n", 16 * warps));
    }
    let (chosen, warps) = ranked[best.unwrap_or(0)].0;
    out.push_str(&kernel::describe(&graph.attention, chosen, arch, warps));
    out
}

/// The ranked plan space of `g`'s MMA kernel when `g` is one contraction +
/// epilogue (the ranking, or why no plan fits); `Err` with why `g` is not
/// ([`crate::gpu::mma::recognise::match_gemm`]'s refusal, naming the contraction).
fn gemm_plan(g: &Graph, target: &plan::Target, estimator: &dyn plan::cost::Estimator) -> Result<String, String> {
    let graph = crate::gpu::mma::recognise::match_gemm(g).map_err(|d| match &d.node {
        Some(n) => format!("contraction `{n}`: not planned: {}", d.message),
        None => format!("not planned: {}", d.message),
    })?;
    let label = &g.node(graph.contraction).label;
    let how = match &graph.gemm.implicit {
        None => String::new(),
        Some(im) => format!(
            " ({} as an implicit GEMM: {} batch points of M={} N={} K={}{})",
            graph.pattern.name(),
            im.extent(crate::gpu::mma::Axis::Batch),
            graph.sizes[0],
            graph.sizes[1],
            graph.sizes[2],
            if im.pool.is_some() { ", its 2×2 max pool on the output tile" } else { "" }
        ),
    };
    let choice = target
        .require_mma_sync(graph.problem.dtype)
        .map_err(|why| why.to_string())
        .and_then(|_| crate::gpu::mma::lower::choose(&graph, target, estimator).map_err(|d| d.message));
    let ranked = match choice {
        Ok(c) => format!("contraction `{label}`{how}: {}", plan::dump(&graph.problem, target, &c)),
        Err(why) => format!("contraction `{label}`{how}: not planned: {why}\n"),
    };
    if graph.pattern != crate::index_book::contraction::Pattern::Conv {
        return Ok(ranked);
    }
    Ok(format!("{}{ranked}", conv_algorithms(g, target, estimator)))
}

/// The `algo_choice conv` templates of `target` for the convolution `g`,
/// each with its estimate (the chosen one marked `*`, as
/// `gpu::driver::lower` chooses) or why it does not take `g`; when
/// Winograd is chosen, its batched GEMM's plan.
fn conv_algorithms(g: &Graph, target: &plan::Target, estimator: &dyn plan::cost::Estimator) -> String {
    use crate::gpu::driver;
    let Some(tried) = driver::candidates(g, target, estimator, false) else { return String::new() };
    let best = driver::best(&tried);
    let mut out =
        format!("algorithms for this convolution on {} (analytic estimates, not measurements):\n", target.name);
    for (i, (t, r)) in tried.iter().enumerate() {
        let mark = if best == Some(i) { '*' } else { ' ' };
        let cost = match r {
            Ok(l) => format!("estimate {:.1} µs, limited by {}", l.estimate.time_s * 1e6, l.estimate.limit.as_str()),
            Err(d) => format!("not taken: {}", d.message),
        };
        out.push_str(&format!("{mark} algo_choice conv = {:<14} {:<40} {cost}\n", t.algo_choice, t.name));
    }
    let winograd = best.map(|i| &tried[i]).filter(|(t, _)| t.algo_choice == crate::gpu::winograd::ALGO);
    if let Some((_, Ok(l))) = winograd {
        if let Some(p) = l.program.launches.iter().find_map(|launch| launch.plan.as_ref()) {
            let algo = crate::gpu::winograd::ALGO;
            out.push_str(&format!("{algo}'s batched GEMM (16 GEMMs over the 4×4 tile positions), plan:\n"));
            out.push_str(&plan::print_dsl(p));
        }
        out.push_str("the implicit GEMM's plans, not chosen:\n");
    }
    out
}

/// One stage's dump.
pub fn dump_stage(stage: &str, loaded: &Loaded, g: &Graph, artifacts: &Artifacts) -> DResult<String> {
    check_stage(stage)?;
    Ok(match stage {
        "frontend" => loaded.frontend.clone().unwrap_or_else(|| "(a JSON graph has no frontend stage)\n".to_string()),
        "tiny" => {
            // Views stored by region formation (not as a graph output).
            let outputs: Vec<_> = g.outputs.iter().map(|o| o.node).collect();
            let copies: Vec<_> = artifacts
                .front
                .regions
                .regions
                .iter()
                .filter(|r| !r.is_copy())
                .map(|r| r.root())
                .filter(|&v| g.node(v).op.is_movement() && !outputs.contains(&v))
                .collect();
            tiny::text::dump_with_copies(g, &copies)
        }
        "dot" => tiny::dot::dump(g),
        "dot_regions" => tiny::dot::dump_regions(g, &artifacts.front.regions),
        "dot_kernels" => tiny::dot::dump_kernels(g, &artifacts.front.regions),
        "indexbook" => index_book::dump(g, &artifacts.front.book),
        #[cfg(feature = "poly")]
        "poly_view" => poly_view_of(g, &artifacts.front.book)?,
        "region" => region::dump(g, &artifacts.front.regions),
        "plan" => plan_dump(g, &plan::target::SM80, &plan::cost::Analytic),
        "c" => artifacts.c_source.clone(),
        "gpu" | "cu" | "ptx" | "sass" => {
            return Err(diag!(Unsupported, "stage `{stage}` is made by `tgc compile --target sm80` (a GPU target)"))
        }
        _ => return Err(diag!(Internal, "stage `{stage}` has no dump")),
    })
}

/// Whether `stage` is one of the GPU stages [`compile_gpu`] makes.
pub fn is_gpu_stage(stage: &str) -> bool {
    matches!(stage, "gpu" | "cu" | "ptx" | "sass")
}

/// What `compile --target sm80` produces: the graph's GPU program (the
/// launches `tgc run --backend cuda` makes) compiled as one unit.
#[derive(Clone, Debug)]
pub struct GpuArtifacts {
    /// `tgc_<graph name>`: the stem of the `.cu`, `.ptx` and `.cubin` files.
    pub symbol: String,
    /// The kernels in launch order ([`crate::gpu::driver::lower_program_for`]):
    /// the sm80 tensor-core kernel for a graph that is one contraction (GEMM,
    /// batched matmul, convolution) + epilogue with concrete sizes, the SIMT
    /// kernels of every region otherwise.
    pub program: crate::gpu::program::GpuProgram,
    /// The `cu` stage: CUDA C++ with inline PTX, every kernel.
    pub cu: String,
    /// The architecture the unit is compiled for: `sm_90a` when a kernel
    /// uses sm90's instructions (TMA, wgmma), else `sm_80` (SIMT kernels
    /// and the templates' sm80 branches; a 9.x GPU runs their PTX, which
    /// the driver compiles as it loads), on either target.
    pub arch: crate::gpu::toolchain::Arch,
    /// The architecture the target asks for: `sm_80` for `sm80`, `sm_90a`
    /// for `sm90`; [`GpuArtifacts::arch`] differs from it when no kernel
    /// of an `sm90` program needs sm_90a.
    pub target_arch: crate::gpu::toolchain::Arch,
    /// NVRTC's PTX (`.target` [`GpuArtifacts::arch`]).
    pub ptx: String,
    /// The ELF cubin for [`GpuArtifacts::arch`].
    pub cubin: Vec<u8>,
    /// What ptxas reported per kernel (registers, shared memory, spills),
    /// in launch order.
    pub resources: Vec<crate::gpu::toolchain::Resources>,
    /// Why a contraction or an attention did not get a tensor-core template
    /// (its SIMT kernels run instead): the templates' diagnostics,
    /// positioned at the contraction ([`crate::gpu::driver::lower_program_noting`]).
    pub refusals: Vec<crate::Diagnostic>,
}

impl GpuArtifacts {
    /// The files `compile --out` writes: `<symbol>.cu`, `<symbol>.ptx`,
    /// `<symbol>.cubin`, and `plan.json` (the tensor-core kernel's plan,
    /// [`plan::to_json`]) when there is one.
    pub fn files(&self) -> Vec<(String, Vec<u8>)> {
        let mut files = vec![
            (format!("{}.cu", self.symbol), self.cu.clone().into_bytes()),
            (format!("{}.ptx", self.symbol), self.ptx.clone().into_bytes()),
            (format!("{}.cubin", self.symbol), self.cubin.clone()),
        ];
        // `plan.json` for a program's one planned kernel; with several (the
        // GEMM regions of a larger graph), `plan_<kernel>.json` each.
        let planned: Vec<_> =
            self.program.launches.iter().filter_map(|l| Some((&l.kernel.name, l.plan.as_ref()?))).collect();
        for (name, p) in &planned {
            let file = if planned.len() == 1 { "plan.json".to_string() } else { format!("plan_{name}.json") };
            files.push((file, plan::to_json(p).into_bytes()));
        }
        files
    }

    /// True for the name of a plan file [`GpuArtifacts::files`] may hold
    /// (`plan.json`, `plan_<kernel>.json`): these are not named by the
    /// program, so `compile --out` removes those of an earlier compile that
    /// it does not write again.
    pub fn is_plan_file(name: &str) -> bool {
        name == "plan.json" || name.strip_prefix("plan_").is_some_and(|rest| rest.ends_with(".json"))
    }

    /// The plan of the program's first tensor-core kernel, if it has one.
    pub fn plan(&self) -> Option<&plan::Plan> {
        self.program.launches.iter().find_map(|l| l.plan.as_ref())
    }
}

/// Compiles `g` for the GPU target `target` (`sm80` or `sm90`, the rows of
/// [`plan::target`]): lowers it to its GPU
/// program ([`crate::gpu::driver::lower_program_noting`]: a tensor-core
/// template for a graph that is one contraction (GEMM, batched matmul,
/// convolution) + epilogue or one attention with concrete sizes, else the
/// SIMT kernels of its regions with the template's kernel for each region
/// that is a contraction + epilogue — the launches `tgc run --backend cuda`
/// makes), checks every kernel with the GPU verifier, prints them as one
/// CUDA C unit, compiles it with NVRTC and reads ptxas's report of each
/// kernel. A contraction the templates do not take (symbolic sizes, f32
/// operands, an op after it that is no epilogue, sizes past its launch
/// limits) runs as SIMT kernels, with a note saying why. On sm90 the GEMM
/// takes the template's `wgmma` branch and the unit compiles for sm_90a.
///
/// Errors: `UnknownName` for another target; those of
/// lowering; `Internal` when the verifier or the printer rejects a
/// kernel; `Io` when the CUDA toolchain is missing or NVRTC or ptxas
/// fails (the toolchain's message says what to install).
pub fn compile_gpu(g: &Graph, target: &str, estimator: &dyn plan::cost::Estimator) -> DResult<GpuArtifacts> {
    let row = plan::Target::by_name(target)?;
    let symbol = c_symbol(&g.name);
    let (program, refusals) = crate::gpu::driver::lower_program_noting(g, row, estimator)?;
    let kernels = program.kernels();
    let (cu, compiled) = compile_kernels(&kernels, &format!("{symbol}.cu"))?;
    let tc = crate::gpu::toolchain::Toolchain::locate().map_err(|e| diag!(Io, "{e}"))?;
    let arch = kernels.iter().map(|k| k.arch).max().unwrap_or(crate::gpu::dialect::Arch::Sm80);
    let arch = crate::emit::cuda::toolchain_arch(arch);
    let target_arch = crate::gpu::dialect::Arch::parse(row.name)
        .map(crate::emit::cuda::toolchain_arch)
        .ok_or_else(|| diag!(Internal, "target `{}` has no GPU dialect architecture", row.name))?;
    let reported = tc.ptxas_resources(&compiled.ptx, arch).map_err(|e| diag!(Io, "{e}"))?;
    let mut resources = Vec::new();
    for k in &kernels {
        let name = k.symbol();
        let r = reported.iter().find(|r| r.function == name);
        resources.push(r.cloned().ok_or_else(|| diag!(Internal, "ptxas reported nothing for `{name}`"))?);
    }
    Ok(GpuArtifacts {
        symbol,
        program,
        cu,
        arch,
        target_arch,
        ptx: compiled.ptx,
        cubin: compiled.cubin,
        resources,
        refusals,
    })
}

/// Checks `kernels` with the GPU dialect verifier, prints them as one CUDA
/// C unit named `unit` (e.g. `gemm.cu`) and compiles it with NVRTC
/// ([`crate::emit::cuda::compile`]): the CUDA C and NVRTC's PTX, cubin and
/// log.
///
/// Errors: `Internal` when the verifier (naming the kernel) or the
/// printer rejects a kernel, a tgc bug; `Io` when the CUDA toolchain is
/// missing or NVRTC fails.
pub fn compile_kernels(
    kernels: &[crate::gpu::dialect::Kernel],
    unit: &str,
) -> DResult<(String, crate::gpu::toolchain::Compiled)> {
    for k in kernels {
        if let Err(errors) = crate::gpu::dialect::verify::verify(k) {
            let first = errors.first().map(|e| e.to_string()).unwrap_or_default();
            return Err(diag!(Internal, "GPU dialect verifier, kernel `{}`: {first}", k.name));
        }
    }
    let tc = crate::gpu::toolchain::Toolchain::locate().map_err(|e| diag!(Io, "{e}"))?;
    crate::emit::cuda::compile(&tc, kernels, unit).map_err(|e| match e {
        crate::emit::cuda::CudaError::Print(e) => diag!(Internal, "{e}"),
        crate::emit::cuda::CudaError::Toolchain(e) => diag!(Io, "{e}"),
    })
}

/// One GPU stage's dump (`gpu`, `cu`, `ptx`, `sass`) of `gpu`.
///
/// Errors: `Io` when cuobjdump fails (`sass`); `Internal` for a stage
/// that is not a GPU stage.
pub fn dump_gpu_stage(stage: &str, gpu: &GpuArtifacts) -> DResult<String> {
    Ok(match stage {
        "gpu" => {
            let mut out = String::new();
            for (l, r) in gpu.program.launches.iter().zip(&gpu.resources) {
                out.push_str(&format!(
                    "// {:?} form; ptxas: {} registers, {} bytes spilled, {} bytes of dynamic shared memory\n",
                    l.form,
                    r.registers,
                    r.spill_stores,
                    l.kernel.launch_smem_bytes()
                ));
                out.push_str(&l.kernel.to_string());
            }
            out
        }
        "cu" => gpu.cu.clone(),
        "ptx" => gpu.ptx.clone(),
        "sass" => {
            let tc = crate::gpu::toolchain::Toolchain::locate().map_err(|e| diag!(Io, "{e}"))?;
            tc.sass(&gpu.cubin).map_err(|e| diag!(Io, "{e}"))?
        }
        _ => return Err(diag!(Internal, "stage `{stage}` is not a GPU stage")),
    })
}

fn to_interp(t: &HostTensor) -> interp::Tensor {
    interp::Tensor { dtype: t.dtype(), shape: t.shape().to_vec(), data: t.to_f64_vec() }
}

fn from_interp(t: &interp::Tensor) -> DResult<HostTensor> {
    HostTensor::from_f64(t.dtype, &t.shape, &t.data).map_err(|e| diag!(Internal, "interpreter output: {e}"))
}

/// Deterministic inputs for the bound graph `g`: input `k` holds
/// [`tgc_runtime::tensor::sample_values`] with seed `k + 1`, in its dtype and
/// shape. For tests, examples and benchmarks.
///
/// Errors: `UnboundSymbol` when an input's shape is not concrete; the
/// runtime's error (as `Io`) for a tensor that cannot be allocated.
pub fn sample_inputs(g: &Graph) -> DResult<Vec<HostTensor>> {
    g.inputs()
        .into_iter()
        .enumerate()
        .map(|(k, id)| {
            let shape = g
                .shape(id)
                .iter()
                .map(|d| d.as_int().and_then(|v| usize::try_from(v).ok()))
                .collect::<Option<Vec<usize>>>()
                .ok_or_else(|| diag!(UnboundSymbol, "input `{}` has no concrete shape", g.node(id).label))?;
            let n = shape.iter().product();
            let values = tgc_runtime::tensor::sample_values(k as u64 + 1, n);
            HostTensor::from_f64(g.dtype(id), &shape, &values)
                .map_err(|e| diag!(Io, "input `{}`: {e}", g.node(id).label))
        })
        .collect()
}

/// The default budget of [`check_run_bytes`]: 64 GiB of tensors for one
/// run (`tgc run --max-memory` sets another).
pub const MAX_RUN_BYTES: u64 = 1 << 36;

/// The bytes a run of the bound graph `g` holds at most: every node's value
/// together (what the reference interpreter holds at most, and an upper
/// bound for the backends, which keep fused intermediates in registers and
/// scratch rows), plus `file_bytes`, the data of the input files it reads
/// (a reader holds a file's data while it builds the tensor; `tgc run`
/// passes the sum of `tgc_runtime::input::Pending::data_bytes`). `tgc run`
/// checks it against its budget before it reads the input files' data and
/// before any backend allocates, so that a run too large for the budget
/// stops with a message instead of an allocation failure, or a kill by the
/// operating system once over-committed pages are touched.
///
/// Errors: `ResourceExceeded` at the largest node when the total exceeds
/// `budget` bytes; `UnboundSymbol` for a graph that is not bound.
pub fn check_run_bytes(g: &Graph, file_bytes: u64, budget: u64) -> DResult<u64> {
    let mut values = Vec::new();
    for id in g.ids() {
        let node = g.node(id);
        let bytes = value_bytes(g.dtype(id), g.shape(id)).map_err(|d| d.on_node(node.label.clone()))?;
        values.push((bytes, id));
    }
    let (total, largest) = total_bytes(values.iter().map(|&(b, _)| b), file_bytes);
    match largest.map(|k| values[k]) {
        Some((bytes, id)) if total > budget as u128 => {
            let node = g.node(id);
            let what = format!("{} of shape {}", node.op.name(), crate::tiny::infer::fmt_shape(g.shape(id)));
            Err(over_budget(total, file_bytes, budget, &what, bytes).or_at(node.span).on_node(node.label.clone()))
        }
        _ => Ok(total.min(u64::MAX as u128) as u64),
    }
}

/// [`check_run_bytes`] for the CPU backend: the bytes of the buffers its
/// program of the bound graph `g` allocates (inputs, outputs and
/// temporaries, each whole: an upper bound, as temporaries share arena
/// slots), plus `file_bytes`. A fused intermediate is never a buffer, so a
/// convolution's window (an `EXPAND` of the image by the filter taps,
/// which [`check_run_bytes`] counts whole) costs nothing here.
///
/// Errors: as [`check_run_bytes`], at the largest buffer; the lowering's.
pub fn check_cpu_run_bytes(g: &Graph, file_bytes: u64, budget: u64) -> DResult<u64> {
    let program = crate::cpu::lower(g)?;
    let sizes = program.buffers.iter().map(|b| value_bytes(b.dtype, &b.shape)).collect::<DResult<Vec<_>>>()?;
    let (total, largest) = total_bytes(sizes.iter().copied(), file_bytes);
    match largest {
        Some(k) if total > budget as u128 => {
            let b = &program.buffers[k];
            let what = format!("buffer `{}` of shape {}", b.label, crate::tiny::infer::fmt_shape(&b.shape));
            Err(over_budget(total, file_bytes, budget, &what, sizes[k]))
        }
        _ => Ok(total.min(u64::MAX as u128) as u64),
    }
}

/// The bytes of a bound value of `dtype` and `shape`.
///
/// Errors: `UnboundSymbol` for a shape with a symbol.
fn value_bytes(dtype: crate::DType, shape: &[crate::sym::Dim]) -> DResult<u128> {
    let mut n: u128 = dtype.size_bytes() as u128;
    for d in shape {
        let v = d.as_int().ok_or_else(|| diag!(UnboundSymbol, "`{d}` is not bound"))?;
        n = n.saturating_mul(v.max(0) as u128);
    }
    Ok(n)
}

/// The sum of `sizes` and `file_bytes`, and the index of the largest size.
fn total_bytes(sizes: impl Iterator<Item = u128>, file_bytes: u64) -> (u128, Option<usize>) {
    let mut total: u128 = file_bytes as u128;
    let mut largest: Option<(u128, usize)> = None;
    for (k, n) in sizes.enumerate() {
        total = total.saturating_add(n);
        if largest.is_none_or(|(m, _)| n > m) {
            largest = Some((n, k));
        }
    }
    (total, largest.map(|(_, k)| k))
}

/// The `ResourceExceeded` of a run needing `total` bytes over `budget`,
/// `what` (of `bytes`) the largest part.
fn over_budget(total: u128, file_bytes: u64, budget: u64, what: &str, bytes: u128) -> crate::Diagnostic {
    let files = match file_bytes {
        0 => String::new(),
        n => format!(" ({n} of them the data read from its input files)"),
    };
    diag!(
        ResourceExceeded,
        "the run needs up to {total} bytes of tensors{files}, more than the budget of {budget} bytes \
         (`--max-memory`, default {} GiB); the largest is this {what} ({bytes} bytes)",
        MAX_RUN_BYTES >> 30
    )
}

/// Runs a fully bound graph on the reference interpreter.
pub fn run_interp(g: &Graph, inputs: &[HostTensor]) -> DResult<Vec<HostTensor>> {
    let ins: Vec<interp::Tensor> = inputs.iter().map(to_interp).collect();
    let outs = interp::run(g, &Default::default(), &ins)?;
    outs.iter().map(from_interp).collect()
}

/// Why a CPU run failed: a diagnosed graph problem or a runtime failure
/// (C compiler, loading, allocation).
#[derive(Debug)]
pub enum RunError {
    Diag(crate::Diagnostic),
    Runtime(tgc_runtime::Error),
}

/// Generates C for a fully bound graph, compiles it (through the user's
/// object cache when there is one, else in `work_dir`), and runs it.
pub fn run_cpu(g: &Graph, inputs: &[HostTensor], work_dir: &Path) -> Result<Vec<HostTensor>, RunError> {
    let mut outs = run_cpu_batch(&[(g, inputs)], work_dir)?;
    Ok(outs.remove(0))
}

/// [`run_cpu`] for several fully bound graphs, each with its inputs, compiled
/// together into one library (one C compiler run instead of one per graph);
/// result `k` holds the outputs of `runs[k]`. The graphs' names must give
/// distinct C symbols.
///
/// Errors: the first graph that is not bound or fails to lower (as
/// [`emit::c::emit_c_units`] reports it), `Internal` for inputs whose dtypes
/// or shapes are not the graph's, or the first runtime failure; no graph's
/// outputs are returned then.
pub fn run_cpu_batch(runs: &[(&Graph, &[HostTensor])], work_dir: &Path) -> Result<Vec<Vec<HostTensor>>, RunError> {
    run_cpu_parts(runs, work_dir, PART_LINES)
}

/// [`run_cpu_batch`] with the C in parts of about `part_lines` lines.
pub(crate) fn run_cpu_parts(
    runs: &[(&Graph, &[HostTensor])],
    work_dir: &Path,
    part_lines: usize,
) -> Result<Vec<Vec<HostTensor>>, RunError> {
    if runs.is_empty() {
        return Ok(Vec::new());
    }
    let mut entries = Vec::new();
    let mut programs = Vec::new();
    for (g, _) in runs {
        let program = crate::cpu::lower(g).map_err(RunError::Diag)?;
        entries.push(Entry::of(g, &program)?);
        programs.push((*g, program));
    }
    let units: Vec<(&Graph, crate::cpu::Program, &str)> =
        programs.into_iter().zip(&entries).map(|((g, p), e)| (g, p, e.symbol.as_str())).collect();
    let lib = compile_and_load(&units, work_dir, part_lines)?;
    runs.iter().zip(&entries).map(|((_, inputs), e)| e.run(&lib, inputs, &[])).collect()
}

/// The lines of generated C per translation unit of a CPU run
/// ([`emit::c::emit_c_parts`]): the functions of a larger graph are cut
/// into parts of about this many lines, compiled at once on the machine's
/// cores; a graph of fewer lines stays one unit. Large enough that the
/// includes and helpers each part repeats cost little, small enough that
/// two cores share a CNN's compile.
pub const PART_LINES: usize = 2000;

/// Prints `units` as C in parts of about `part_lines` lines, compiles them
/// at once into one library ([`tgc_runtime::cpu::compile_units`]) and loads
/// it: through the user's object cache
/// ([`tgc_runtime::objcache::ObjectCache::from_env`]) when there is one, so
/// the same C compiles once per user, else in `work_dir`.
fn compile_and_load(
    units: &[(&Graph, crate::cpu::Program, &str)],
    work_dir: &Path,
    part_lines: usize,
) -> Result<tgc_runtime::cpu::CpuLibrary, RunError> {
    let parts = emit::c::emit_c_parts(units, part_lines).map_err(RunError::Diag)?;
    let cache = match tgc_runtime::objcache::ObjectCache::from_env().map_err(RunError::Runtime)? {
        Some(cache) => cache,
        None => tgc_runtime::objcache::ObjectCache::open(work_dir).map_err(RunError::Runtime)?,
    };
    let lib_path = tgc_runtime::cpu::compile_units(&parts, &cache).map_err(RunError::Runtime)?;
    // SAFETY: the library was generated from these graphs with the ABI of
    // `tgc_runtime::cpu`.
    unsafe { tgc_runtime::cpu::CpuLibrary::load(&lib_path) }.map_err(RunError::Runtime)
}

/// One entry point of a compiled library: its symbol and the dtypes and
/// shapes of the bound graph it was generated from.
struct Entry {
    symbol: String,
    inputs: Vec<(tgc_runtime::DType, Vec<usize>)>,
    outputs: Vec<(tgc_runtime::DType, Vec<usize>)>,
    tiles: usize,
}

impl Entry {
    /// The entry point of the bound graph `g`, lowered to `program`.
    fn of(g: &Graph, program: &crate::cpu::Program) -> Result<Entry, RunError> {
        if !g.symbols.is_empty() {
            return Err(RunError::Diag(diag!(Internal, "the CPU runner needs a bound graph, `{}` is not", g.name)));
        }
        let shape = |id| -> Vec<usize> { g.shape(id).iter().map(|d| d.as_int().unwrap_or(0) as usize).collect() };
        Ok(Entry {
            symbol: c_symbol(&g.name),
            inputs: g.inputs().into_iter().map(|id| (g.dtype(id), shape(id))).collect(),
            outputs: g.outputs.iter().map(|o| (g.dtype(o.node), shape(o.node))).collect(),
            tiles: program.tiles.len(),
        })
    }

    /// Runs the entry point of `lib` on `inputs`, returning new outputs.
    fn run(
        &self,
        lib: &tgc_runtime::cpu::CpuLibrary,
        inputs: &[HostTensor],
        tiles: &[i64],
    ) -> Result<Vec<HostTensor>, RunError> {
        let mut outputs = Vec::new();
        for (dt, shape) in &self.outputs {
            outputs.push(HostTensor::zeros(*dt, shape).map_err(RunError::Runtime)?);
        }
        self.run_into(lib, inputs, &mut outputs, tiles)?;
        Ok(outputs)
    }

    /// Runs the entry point of `lib` writing into `outputs`, after checking
    /// every tensor's dtype and shape and the number of tile sizes.
    fn run_into(
        &self,
        lib: &tgc_runtime::cpu::CpuLibrary,
        inputs: &[HostTensor],
        outputs: &mut [HostTensor],
        tiles: &[i64],
    ) -> Result<(), RunError> {
        let fits = |ts: &[HostTensor], want: &[(tgc_runtime::DType, Vec<usize>)]| {
            ts.len() == want.len() && ts.iter().zip(want).all(|(t, (dt, s))| t.dtype() == *dt && t.shape() == &s[..])
        };
        if !fits(inputs, &self.inputs) || !fits(outputs, &self.outputs) || tiles.len() != self.tiles {
            return Err(RunError::Diag(diag!(Internal, "tensors or tile sizes do not fit `{}`", self.symbol)));
        }
        let in_bytes: Vec<&[u8]> = inputs.iter().map(|t| t.bytes()).collect();
        let mut out_bytes: Vec<&mut [u8]> = outputs.iter_mut().map(|t| t.bytes_mut()).collect();
        // SAFETY: `symbol` is the entry point generated from the bound graph,
        // the buffers have its dtypes and shapes (checked above), and `dims`
        // is the tile sizes alone (the graph has no symbols), which the
        // kernel checks.
        unsafe { lib.call(&self.symbol, &in_bytes, &mut out_bytes, tiles) }.map_err(RunError::Runtime)
    }
}

/// A fully bound graph compiled once to C under [`Options`] and loaded,
/// callable with any run-time tile sizes (symbolic tiling, `003`).
pub struct CompiledCpu {
    lib: tgc_runtime::cpu::CpuLibrary,
    entry: Entry,
}

impl CompiledCpu {
    /// Generates C for the bound graph `g` under `opts`, compiles it in
    /// `work_dir` (or takes it from the user's object cache, as [`run_cpu`]) and loads it.
    ///
    /// Errors: as [`run_cpu`].
    pub fn new(g: &Graph, opts: &Options, work_dir: &Path) -> Result<CompiledCpu, RunError> {
        let program = crate::cpu::lower_with(g, opts).map_err(RunError::Diag)?;
        let entry = Entry::of(g, &program)?;
        let lib = compile_and_load(&[(g, program, entry.symbol.as_str())], work_dir, PART_LINES)?;
        Ok(CompiledCpu { lib, entry })
    }

    /// How many tile sizes [`CompiledCpu::run`] takes: one per planned axis.
    pub fn tiles(&self) -> usize {
        self.entry.tiles
    }

    /// Runs the kernel on `inputs` with `tiles` (one per
    /// [`CompiledCpu::tiles`]), returning new outputs.
    ///
    /// Errors: as [`CompiledCpu::run_into`].
    pub fn run(&self, inputs: &[HostTensor], tiles: &[i64]) -> Result<Vec<HostTensor>, RunError> {
        self.entry.run(&self.lib, inputs, tiles)
    }

    /// Runs the kernel writing into `outputs`.
    ///
    /// Errors: `Internal` when the tensors' dtypes or shapes, or the number
    /// of tile sizes, are not the graph's; [`tgc_runtime::Error::Kernel`]
    /// (status 2) when a tile size is below 1.
    pub fn run_into(&self, inputs: &[HostTensor], outputs: &mut [HostTensor], tiles: &[i64]) -> Result<(), RunError> {
        self.entry.run_into(&self.lib, inputs, outputs, tiles)
    }
}

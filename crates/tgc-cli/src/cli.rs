//! Command-line syntax (`DESIGN.md`, "Command-line tool").

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// tgc: a build-time deep-learning kernel compiler.
///
/// GRAPH is a `.tgc` file in the graph language or a `.json` Tiny IR file
/// (node format, or the op-list import format).
#[derive(Parser, Debug)]
#[command(name = "tgc", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Parse, lower and verify a graph; print its signature, then any
    /// requested stage dumps of the graph as written (symbols kept).
    Check {
        /// A `.tgc` or `.json` graph file.
        graph: PathBuf,
        /// The graph to use when the file has several (default: `main`).
        #[arg(long)]
        entry: Option<String>,
        /// Comma-separated stages to dump (as for `compile`), e.g. `poly_view`.
        #[arg(long, value_delimiter = ',')]
        dump: Vec<String>,
    },
    /// Run a graph on input tensors and write every output as `.npy`.
    ///
    /// Symbolic dims come from `--dim`, then from the input shapes, then from
    /// the graph's defaults.
    Run {
        /// A `.tgc` or `.json` graph file, or an `.onnx` model.
        graph: PathBuf,
        /// The graph to use when the file has several (default: `main`).
        #[arg(long)]
        entry: Option<String>,
        /// `cpu` (generated C), `interp` (the reference interpreter) or `cuda`.
        #[arg(long, value_enum, default_value_t = Backend::Cpu)]
        backend: Backend,
        /// A symbolic dimension's value, e.g. `--dim M=128` (repeatable).
        #[arg(long = "dim", value_name = "SYM=INT")]
        dims: Vec<String>,
        /// An input tensor: `NAME=FILE.npy` or `NAME=FILE.safetensors:TENSOR` (repeatable).
        #[arg(long = "input", value_name = "NAME=FILE")]
        inputs: Vec<String>,
        /// Inputs by name from PATH: a folder of `NAME.npy` files (other
        /// files in it are passed over) or a `.safetensors` file (each
        /// tensor an input, e.g. the weights `tgc import` writes). With
        /// `--input` too, a name given by both is an error; an ONNX model's
        /// own initializers fill the inputs neither gives.
        #[arg(long = "inputs", value_name = "PATH")]
        inputs_from: Option<PathBuf>,
        /// Where to write `<output name>.npy` (created if missing).
        #[arg(long, default_value = ".")]
        output_dir: PathBuf,
        /// Strip-mine output loop AXIS of every kernel by a run-time tile of
        /// SIZE (`--backend cpu`; repeatable, e.g. `--tile 2=8 --tile 3=8`
        /// for the H and W loops of an NCHW result). The results do not
        /// depend on the tiles.
        #[arg(long = "tile", value_name = "AXIS=SIZE")]
        tiles: Vec<String>,
        /// The most bytes of tensors the run may hold, counted as every
        /// node's value at once (an upper bound for every backend) plus
        /// the data of the input files, and checked from the files'
        /// headers before their data is read or anything is allocated; a
        /// number with an optional K, M or G suffix (powers of 1024), e.g.
        /// 512M. The default is 64 GiB (`tgc_core::pipeline::MAX_RUN_BYTES`).
        #[arg(long, value_name = "BYTES", default_value_t = tgc_core::pipeline::MAX_RUN_BYTES, value_parser = parse_bytes)]
        max_memory: u64,
        /// Pin an algorithm of the GPU templates (`--backend cuda`;
        /// repeatable): `conv=implicit_gemm|winograd_3x3`,
        /// `attention=online_softmax|streaming_softmax_2pass`. A template of
        /// another algorithm for that key is not taken; a graph (or region)
        /// the pinned one cannot take runs as SIMT kernels, with a note.
        #[arg(long = "algo", value_name = "KEY=VALUE")]
        algos: Vec<String>,
        /// Rank the GPU templates' plans by this tuning cache's records
        /// (`--backend cuda`; DIR/gpu/, written by `tgc tune --target`); a
        /// plan decision without a record keeps the analytic plan, with a
        /// note.
        #[arg(long, value_name = "DIR")]
        tuning: Option<PathBuf>,
    },
    /// Write an ONNX model as a graph-language program and its weights:
    /// DIR/<graph>.tgc (the imported graph, which reads back as exactly
    /// what `tgc run MODEL.onnx` runs) and DIR/weights.safetensors (every
    /// initializer the graph takes as a parameter, by parameter name).
    ///
    /// Example (`main_graph` is the graph's name in the model, as PyTorch
    /// exports it):
    ///   tgc import model.onnx --out model
    ///   tgc run model/main_graph.tgc --inputs model/weights.safetensors --input input_1=x.npy
    ///
    /// Nothing is written when the model does not import, or holds what
    /// the graph language cannot spell (a result of size 2*N, a
    /// non-finite attribute, a dilated average pool): the error names the
    /// node or the result.
    #[command(verbatim_doc_comment)]
    Import {
        /// The `.onnx` model (its external data is read from its folder).
        model: PathBuf,
        /// The folder to write into (created if missing).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
    /// Compile a graph for a target and print or write the requested stages.
    Compile {
        /// A `.tgc` or `.json` graph file, or an `.onnx` model.
        graph: PathBuf,
        /// The graph to use when the file has several (default: `main`).
        #[arg(long)]
        entry: Option<String>,
        /// What to compile for: `cpu` (C for this machine), `sm80` (CUDA
        /// for 8.x GPUs) or `sm90` (9.x: Hopper's TMA and wgmma kernels).
        #[arg(long, value_enum, default_value_t = Target::Cpu)]
        target: Target,
        /// A symbolic dimension's value to specialise for (repeatable).
        #[arg(long = "dim", value_name = "SYM=INT")]
        dims: Vec<String>,
        /// Comma-separated stages to dump: frontend, tiny, dot (the graph
        /// as Graphviz DOT), indexbook, poly_view, region, dot_regions (DOT
        /// with each region a cluster, fused edges bold), dot_kernels (DOT,
        /// one box per region and an edge per tensor between them), plan (the GPU
        /// target's plans ranked by their estimates: each GEMM or
        /// convolution's plan space — on sm90 with the warp-specialised
        /// `ws` and persistent `wsp` forms, `ws2`/`wsp2` in clusters of
        /// two CTAs —, an attention's softmax
        /// algorithms; needs concrete sizes, e.g. from `--dim`), c;
        /// with `--target sm80|sm90` also gpu (every kernel's GPU dialect
        /// IR), cu (CUDA C), ptx, sass, each opening with the architecture
        /// it was compiled for (and why, when not the target's). Each printed stage is headed
        /// `=== stage ===`, except a DOT stage dumped alone, so that
        /// `--dump dot_kernels | dot -Tsvg > g.svg` renders it.
        #[arg(long, value_delimiter = ',')]
        dump: Vec<String>,
        /// Write the artifacts here instead of printing the dumps: for
        /// `cpu` the C source and Tiny IR JSON; for `sm80|sm90` the graph's GPU
        /// kernels (with concrete sizes, the tensor-core templates for a
        /// GEMM or convolution + epilogue and for an attention, whole or as
        /// regions; SIMT kernels for the rest) as `<name>.cu`,
        /// `<name>.ptx`, `<name>.cubin`, and `plan.json` for a planned
        /// tensor-core kernel (`plan_<kernel>.json` each for several); and
        /// the dumps as `<stage>.txt` (`<stage>.dot` for the DOT ones).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Print each stage's wall time and peak resident memory to stderr
        /// (loading, each artifact, each dump).
        #[arg(long)]
        timings: bool,
        /// Take the packed kernels' block sizes (`--target cpu`) or the GPU
        /// templates' plans (`sm80|sm90`, from DIR/gpu/) from this tuning
        /// cache, written by `tgc tune`. A kernel or plan decision without
        /// a record keeps the analytic choice, with a note on stderr; a
        /// corrupted or hand-edited record is an error.
        #[arg(long, value_name = "DIR")]
        tuning: Option<PathBuf>,
        /// Pin an algorithm of the GPU templates (`--target sm80|sm90`;
        /// repeatable), as for `run`: e.g. `--algo conv=winograd_3x3`. The
        /// `plan` dump shows the other algorithms refused by the pin.
        #[arg(long = "algo", value_name = "KEY=VALUE")]
        algos: Vec<String>,
        /// How the regions (one kernel each) are formed, `--target cpu`:
        /// `poly-core` (the grouping, then Poly Core's compute-at fusions:
        /// what `kernel!` and the build helper lower with feature `poly`)
        /// or `grouping` (the grouping alone: what they lower without it,
        /// the facade's default). The GPU targets form their regions for
        /// the templates, without Poly Core.
        #[arg(long, value_enum, value_name = "RULE")]
        regions: Option<Regions>,
    },
    /// Measure candidate block sizes of every packed CPU kernel at each
    /// ShapeSet point on this machine (or, with --target sm80|sm90, every
    /// plan of the GPU templates on GPU 0), check each candidate against the
    /// interpreter, and record the fastest in a tuning cache to commit.
    ///
    /// Examples:
    ///   tgc tune graphs/gemm.tgc --point M=256,N=256,K=256 --cache tgc-tune
    ///   tgc tune minilm.tgc --point B=1,S=16 --point B=8,S=128 --cache tgc-tune --report tune.csv
    ///   tgc tune minilm.tgc --point B=8,S=128 --cache tgc-tune --check   # for CI: measures nothing
    ///   tgc tune graphs/gemm.tgc --target sm90 --point M=4096,N=4096,K=4096 --cache tgc-tune
    ///
    /// The kernels' thread count is TGC_NUM_THREADS (default: all cores).
    /// GPU records go to CACHE/gpu/, one per plan decision (a template's
    /// problem: its sizes, dtype and algorithm key); `tgc compile --target
    /// sm80|sm90 --tuning CACHE` reads them.
    #[command(verbatim_doc_comment)]
    Tune {
        /// A `.tgc` or `.json` graph file.
        graph: PathBuf,
        /// The graph to use when the file has several (default: `main`).
        #[arg(long)]
        entry: Option<String>,
        /// A ShapeSet point, `SYM=INT,SYM=INT…` (repeatable). Symbols it
        /// leaves open take `--dim`, then the graph header's defaults.
        #[arg(long = "point", value_name = "SYM=INT,…")]
        points: Vec<String>,
        /// A symbolic dimension's value for every point (repeatable).
        #[arg(long = "dim", value_name = "SYM=INT")]
        dims: Vec<String>,
        /// The tuning cache: a folder of one JSON record per kernel key,
        /// created if missing. Required, so that records land where the
        /// build that reads them looks (e.g. `tgc-tune` beside the crate's
        /// `Cargo.toml` for `kernel!`'s `tuning("tgc-tune")`).
        #[arg(long, value_name = "DIR")]
        cache: PathBuf,
        /// Measure nothing: exit 1 when a kernel of a point has no record
        /// (never tuned, or its graph, tgc or C compiler changed since).
        #[arg(long)]
        check: bool,
        /// Untimed runs of each candidate before the timed ones.
        #[arg(long, default_value_t = 2)]
        warmup: usize,
        /// Timed runs of each candidate; the median is kept.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=10_000))]
        repetitions: u64,
        /// Write the measurement log (`000` §9: FLOPs, bytes, estimate,
        /// measured, plan) as CSV to FILE, and its picture to FILE with the
        /// extension `.svg` (for `--target sm80|sm90`: every plan's
        /// measured time against the analytic model's estimate).
        #[arg(long, value_name = "FILE")]
        report: Option<PathBuf>,
        /// What to tune: `cpu` the packed kernels' block sizes on this
        /// machine; `sm80`/`sm90` the GPU templates' plans on GPU 0 (sm90
        /// needs a 9.x device; `--check` needs none).
        #[arg(long, value_enum, default_value = "cpu")]
        target: Target,
    },
    /// Find or install the CUDA 13.0 toolchain (NVRTC, ptxas, cuobjdump,
    /// the headers) that `--target sm80` and the GPU features compile with.
    Toolchain {
        #[command(subcommand)]
        action: ToolchainAction,
    },
}

#[derive(Subcommand, Debug)]
pub enum ToolchainAction {
    /// Print the toolchain tgc finds (its folder and NVRTC), or every place
    /// it searched and why each was passed over (exit 1).
    Show,
    /// Install the pinned CUDA 13.0 wheels with pip into DIR (about 140
    /// MB; nothing is written outside DIR), then print the
    /// `TGC_CUDA_ROOT` to set: `DIR/nvidia/cu13`.
    Install {
        /// The folder to install into (pip creates it).
        dir: PathBuf,
        /// The Python whose pip installs the wheels.
        #[arg(long, default_value = "python3")]
        python: String,
    },
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    Cpu,
    Interp,
    Cuda,
}

/// How `compile --regions` forms the regions (`tgc_core::region::Former`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Regions {
    /// The grouping, then Poly Core's compute-at fusions (feature `poly`).
    PolyCore,
    /// The grouping alone (`kernel!` and the build helper without `poly`).
    Grouping,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum Target {
    Cpu,
    Sm80,
    Sm90,
}

/// A byte count: digits with an optional `K`, `M` or `G` suffix (powers of
/// 1024), e.g. `512M`.
fn parse_bytes(text: &str) -> Result<u64, String> {
    let (digits, shift) = match text.char_indices().last() {
        Some((i, 'K' | 'k')) => (&text[..i], 10),
        Some((i, 'M' | 'm')) => (&text[..i], 20),
        Some((i, 'G' | 'g')) => (&text[..i], 30),
        _ => (text, 0),
    };
    let n: u64 = digits.parse().map_err(|_| format!("`{text}` is not a byte count such as 4096, 512M or 8G"))?;
    n.checked_mul(1 << shift).ok_or_else(|| format!("`{text}` is more than 2^64 bytes"))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every argument of every subcommand, at any depth, says what it is in
    /// `--help`.
    #[test]
    fn every_argument_is_described() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {}", arg.get_id()));
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&super::Cli::command(), "tgc", &mut missing);
        assert!(missing.is_empty(), "arguments without help text: {missing:?}");
    }
}

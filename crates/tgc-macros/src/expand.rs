//! Reading a `kernel!` invocation and generating its module (the text of
//! `tgc_core::emit::api`, shared with the build-script helper).

use std::collections::BTreeMap;

use proc_macro2::{Delimiter, Literal, Span, TokenStream, TokenTree};
use quote::{quote, quote_spanned};
use tgc_core::emit::api::{self, Backend};
use tgc_core::emit::gpu_api;
use tgc_core::pipeline::{self, Format};
use tgc_core::tiny::Graph;
use tgc_core::tune;
use tgc_core::Diagnostic;

use crate::source::SourceText;

/// A compile error at `span` (rustc underlines that token).
fn error(span: Span, msg: &str) -> TokenStream {
    quote_spanned!(span => ::core::compile_error!(#msg);)
}

/// What the invocation says, before compiling the graph.
struct Invocation {
    name: proc_macro2::Ident,
    graph: GraphSource,
    shapes: Vec<BTreeMap<String, i64>>,
    /// `tuning("DIR")`: the tuning cache folder, relative to the crate's
    /// `Cargo.toml`, and the literal's span.
    tuning: Option<(String, Span)>,
}

enum GraphSource {
    Inline(Vec<TokenTree>),
    File { path: String, span: Span },
}

pub fn expand(input: TokenStream) -> TokenStream {
    let inv = match parse_invocation(input) {
        Ok(i) => i,
        Err(e) => return e,
    };
    match compile(&inv) {
        Ok(ts) => ts,
        Err(e) => e,
    }
}

fn parse_invocation(input: TokenStream) -> Result<Invocation, TokenStream> {
    let toks: Vec<TokenTree> = input.into_iter().collect();
    let usage = "expected `kernel!(NAME: GRAPH [, shapes(SYM = INT | SYM in [INT, ...], ...)]* [, tuning(\"DIR\")])`";
    let name = match toks.first() {
        Some(TokenTree::Ident(i)) => i.clone(),
        Some(t) => return Err(error(t.span(), usage)),
        None => return Err(error(Span::call_site(), usage)),
    };
    match toks.get(1) {
        Some(TokenTree::Punct(p)) if p.as_char() == ':' => {}
        Some(t) => return Err(error(t.span(), &format!("{usage}: a `:` follows the kernel name"))),
        None => return Err(error(name.span(), usage)),
    }
    let mut rest: Vec<TokenTree> = toks[2..].to_vec();
    // Trailing `, shapes(...)` and `, tuning(...)` groups, read from the end.
    let mut shapes = Vec::new();
    let mut tuning = None;
    while rest.len() >= 3 {
        let n = rest.len();
        let (TokenTree::Punct(comma), TokenTree::Ident(kw), TokenTree::Group(g)) =
            (&rest[n - 3], &rest[n - 2], &rest[n - 1])
        else {
            break;
        };
        if comma.as_char() != ',' || g.delimiter() != Delimiter::Parenthesis {
            break;
        }
        if kw == "shapes" {
            let points = parse_shape_points(g.stream(), g.span())?;
            shapes.splice(0..0, points);
        } else if kw == "tuning" {
            if tuning.is_some() {
                return Err(error(kw.span(), "`tuning(...)` is given twice"));
            }
            let arg: Vec<TokenTree> = g.stream().into_iter().collect();
            let dir = match arg.as_slice() {
                [TokenTree::Literal(l)] => string_literal(l).map(|d| (d, l.span())),
                _ => None,
            };
            match dir {
                Some(d) => tuning = Some(d),
                None => return Err(error(g.span(), "expected `tuning(\"DIR\")`: the tuning cache folder, a string")),
            }
        } else {
            break;
        }
        rest.truncate(n - 3);
    }
    if rest.is_empty() {
        return Err(error(name.span(), &format!("{usage}: the graph is missing")));
    }
    let graph = match rest.as_slice() {
        [TokenTree::Literal(l)] => match string_literal(l) {
            Some(path) => GraphSource::File { path, span: l.span() },
            None => return Err(error(l.span(), "expected the graph text or a string naming a .tgc/.json file")),
        },
        _ => GraphSource::Inline(rest),
    };
    Ok(Invocation { name, graph, shapes, tuning })
}

/// The value of a plain `"..."` literal (no escapes needed for paths).
fn string_literal(l: &Literal) -> Option<String> {
    let s = l.to_string();
    let inner = s.strip_prefix('"')?.strip_suffix('"')?;
    (!inner.contains('\\')).then(|| inner.to_string())
}

/// `SYM = INT` and `SYM in [INT, ...]` items inside `shapes(...)`: the
/// ShapeSet points of every combination of the listed values (one point
/// for `SYM = INT` items alone), in order, the last item varying fastest.
fn parse_shape_points(ts: TokenStream, span: Span) -> Result<Vec<BTreeMap<String, i64>>, TokenStream> {
    let toks: Vec<TokenTree> = ts.into_iter().collect();
    let mut items: Vec<(String, Vec<i64>)> = Vec::new();
    let int = |v: &Literal| -> Result<i64, TokenStream> {
        let value: i64 = v.to_string().parse().map_err(|_| error(v.span(), "expected a positive integer"))?;
        if value < 1 {
            return Err(error(v.span(), "a dimension must be at least 1"));
        }
        Ok(value)
    };
    for chunk in toks.split(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ',')) {
        if chunk.is_empty() {
            continue;
        }
        let (name, values) = match chunk {
            [TokenTree::Ident(i), TokenTree::Punct(eq), TokenTree::Literal(v)] if eq.as_char() == '=' => {
                (i, vec![int(v)?])
            }
            [TokenTree::Ident(i), TokenTree::Ident(kw), TokenTree::Group(list)]
                if kw == "in" && list.delimiter() == Delimiter::Bracket =>
            {
                let mut values = Vec::new();
                let list_toks: Vec<TokenTree> = list.stream().into_iter().collect();
                for v in list_toks.split(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ',')) {
                    match v {
                        [] => {}
                        [TokenTree::Literal(l)] => {
                            let value = int(l)?;
                            if values.contains(&value) {
                                return Err(error(l.span(), &format!("{value} is listed twice")));
                            }
                            values.push(value);
                        }
                        _ => return Err(error(v[0].span(), "expected a positive integer")),
                    }
                }
                if values.is_empty() {
                    return Err(error(list.span(), "the list of values is empty"));
                }
                (i, values)
            }
            _ => return Err(error(chunk[0].span(), "expected `SYM = INT` or `SYM in [INT, ...]`")),
        };
        if items.iter().any(|(n, _)| name == n) {
            return Err(error(name.span(), &format!("`{name}` is given twice")));
        }
        items.push((name.to_string(), values));
    }
    if items.is_empty() {
        return Err(error(span, "`shapes()` needs at least one `SYM = INT` or `SYM in [INT, ...]`"));
    }
    let mut points = vec![BTreeMap::new()];
    for (name, values) in &items {
        points = points
            .into_iter()
            .flat_map(|p| {
                values.iter().map(move |&v| {
                    let mut p = p.clone();
                    p.insert(name.clone(), v);
                    p
                })
            })
            .collect();
    }
    Ok(points)
}

/// Loads the graph; a diagnostic becomes a compile error on the right token.
fn load(inv: &Invocation) -> Result<(Graph, Option<String>), TokenStream> {
    match &inv.graph {
        GraphSource::Inline(toks) => {
            let src = SourceText::from_tokens(toks);
            let g = pipeline::load(&src.text, Format::Dsl, None).map_err(|d| {
                let span = d.span.and_then(|s| src.span_at(s.start as usize)).unwrap_or_else(Span::call_site);
                error(span, &d.render_for_rustc(None))
            })?;
            Ok((g.graph, None))
        }
        GraphSource::File { path, span } => {
            let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
            let full = std::path::Path::new(&dir).join(path);
            let text = tgc_core::diag::read_source(&full)
                .map_err(|e| error(*span, &format!("cannot read {}: {e}", full.display())))?
                .map_err(|d| error(*span, &d.render_for_rustc(Some(path))))?;
            let g = pipeline::load(&text, Format::of(&full, &text), None)
                .map_err(|d: Diagnostic| error(*span, &d.render_for_rustc(Some(path))))?;
            Ok((g.graph, Some(full.display().to_string())))
        }
    }
}

/// The module: the typed API of `tgc_core::emit::api` over Rust loop nests,
/// named by the invocation's identifier (so rustc points there).
fn compile(inv: &Invocation) -> Result<TokenStream, TokenStream> {
    let (g, file) = load(inv)?;
    let name = &inv.name;
    let span = name.span();
    let (tuning, mut warnings) = match &inv.tuning {
        Some((dir, at)) => read_tuning(dir, *at)?,
        None => (None, TokenStream::new()),
    };
    let gpu_cache = match &inv.tuning {
        Some((dir, at)) if cfg!(feature = "sm80") => Some(read_gpu_tuning(dir, *at, &mut warnings)?),
        _ => None,
    };
    let module = api::kernel_module(&name.to_string(), &g, &inv.shapes, &Backend::Rust { tuning })
        .map_err(|d| error(span, &d.render_for_rustc(file.as_deref())))?;
    let note_span = inv.tuning.as_ref().map_or(span, |(_, at)| *at);
    for note in &module.notes {
        warnings.extend(warning(note_span, note));
    }
    let items: TokenStream = module
        .items
        .parse()
        .map_err(|e| error(span, &format!("tgc generated Rust that does not parse (a tgc bug): {e}")))?;
    let plans = tune::gpu::Recorded::new(gpu_cache.as_ref(), &tgc_core::plan::cost::Analytic);
    let gpu = sm80_items(&g, &inv.shapes, cfg!(feature = "sm80"), cfg!(feature = "sm90"), &plans)
        .map_err(|m| error(span, &m))?;
    if let Some(note) = plans.miss_note(&g.name) {
        warnings.extend(warning(note_span, &note));
    }
    // Rebuild the crate when the graph file changes.
    let track = file.map(|f| {
        quote!(
            const _: &[u8] = include_bytes!(#f);
        )
    });
    Ok(quote! {
        pub mod #name {
            #items
            #track
            #gpu
            #warnings
        }
    })
}

/// A warning at `span` (stable proc macros cannot emit one directly: this is
/// the use of a deprecated item whose note is `msg`).
fn warning(span: Span, msg: &str) -> TokenStream {
    quote_spanned!(span => const _: () = {
        #[deprecated(note = #msg)]
        struct TgcWarning;
        let _ = TgcWarning;
    };)
}

/// `tuning("DIR")`: the cache in `DIR` (relative to the crate's
/// `Cargo.toml`) and the toolchain whose keys it is read under — the host's
/// C compiler, as `tgc tune` measured with it (see
/// `tgc_core::emit::api::Backend::Rust`) — plus the items that make Cargo
/// rebuild when a record present now changes. A C compiler that cannot be
/// identified is a warning (the analytic sizes are used); a record that
/// fails its checks is a compile error at `at`.
fn read_tuning(dir: &str, at: Span) -> Result<(Option<tune::Tuning>, TokenStream), TokenStream> {
    let cache = tune::Cache::open(&cache_dir(dir)).map_err(|e| error(at, &e.to_string()))?;
    let mut items = tracked(&cache);
    match tune::Toolchain::host() {
        Ok(toolchain) => Ok((Some(tune::Tuning { cache, toolchain }), items)),
        Err(e) => {
            items.extend(warning(
                at,
                &format!("tuning(\"{dir}\"): {e}; the packed kernels keep the analytic block sizes"),
            ));
            Ok((None, items))
        }
    }
}

/// `tuning("DIR")` with feature `sm80`: the GPU records of `DIR/gpu`
/// (`tgc tune --target sm80|sm90`), with the items that make Cargo rebuild
/// when one present now changes (added to `items`). A record that fails
/// its checks is a compile error at `at`.
fn read_gpu_tuning(
    dir: &str,
    at: Span,
    items: &mut TokenStream,
) -> Result<tune::Cache<tune::gpu::GpuRecord>, TokenStream> {
    let cache = tune::gpu::open(&cache_dir(dir)).map_err(|e| error(at, &e.to_string()))?;
    items.extend(tracked(&cache));
    Ok(cache)
}

/// `tuning("DIR")`'s folder: `DIR` relative to the crate's `Cargo.toml`.
fn cache_dir(dir: &str) -> std::path::PathBuf {
    let root = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    std::path::Path::new(&root).join(dir)
}

/// An `include_bytes!` of each record of `cache`, so that Cargo rebuilds
/// the invocation when one changes.
fn tracked<R: tune::Entry>(cache: &tune::Cache<R>) -> TokenStream {
    let mut items = TokenStream::new();
    for r in cache.paths().map(|p| p.display().to_string()) {
        items.extend(quote!(
            const _: &[u8] = include_bytes!(#r);
        ));
    }
    items
}

/// With feature `sm80`: the sm80 part of the module,
/// [`tgc_core::emit::gpu_api::sm80_module`] with the cubins inline (a
/// submodule `sm80` with the whole graph's kernels and launch functions,
/// or a constant `SM80_SKIPPED` for a graph the GPU path does not take; the
/// facade's `sm80` turns on its `cuda`). `Err` (a compile error) when the
/// kernels do not compile, e.g. without the CUDA toolchain. With feature
/// `sm90` (which turns on `sm80`) the submodule also holds the sm90 twins
/// its `launch` picks on a 9.x device.
fn sm80_items(
    g: &Graph,
    shapes: &[BTreeMap<String, i64>],
    enabled: bool,
    sm90: bool,
    plans: &dyn tgc_core::plan::cost::Estimator,
) -> Result<TokenStream, String> {
    if !enabled {
        return Ok(TokenStream::new());
    }
    let module = gpu_api::sm80_module(g, shapes, gpu_api::CubinSource::Inline, sm90, plans)?;
    module.text.parse().map_err(|e| format!("tgc generated an sm80 module that does not parse (a tgc bug): {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tgc_core::cpu::packed::Blocks;
    use tgc_core::plan::cost::Analytic;

    fn graph(text: &str) -> Graph {
        pipeline::load(text, Format::Dsl, None).unwrap().graph
    }

    const GEMM: &str = "graph<M, N=64, K=32> g(x: f16[M, K], w: f16[K, N], b: f16[N]) -> (y: f16[M, N]) {
        y = relu(matmul(x, w) + b)
        return y
    }";

    #[test]
    fn a_gemm_with_one_shape_point_embeds_its_tensor_core_and_simt_kernels() {
        let point: BTreeMap<String, i64> = [("M".to_string(), 100)].into();
        let ts = sm80_items(&graph(GEMM), std::slice::from_ref(&point), true, false, &Analytic)
            .unwrap_or_else(|e| panic!("{e}"));
        let text = ts.to_string();
        for want in [
            "pub mod sm80",
            "pub mod shape_0",
            "pub mod generic",
            "const CUBIN_BYTES : & [u8] = b\"\\x7F\\x45\\x4C\\x46",
            "pub static PTX",
            "__dims [0] == 100 && __dims [1] == 64 && __dims [2] == 32",
            "pub fn run_on_gpu",
        ] {
            let at = text.find("CUBIN_BYTES").unwrap_or(0);
            assert!(text.contains(want), "no `{want}` in {}", &text[at..(at + 300).min(text.len())]);
        }
        assert!(text.contains("mma.sync.aligned.m16n8k16"), "the shape_0 PTX has no MMA");
        assert!(!text.contains("_sm90"), "no sm90 twins without feature sm90");
        assert!(sm80_items(&graph(GEMM), &[], false, false, &Analytic).unwrap().is_empty());
        // With sm90: the point's twin, compiled for sm_90a, chosen on 9.x.
        let text = sm80_items(&graph(GEMM), &[point], true, true, &Analytic).unwrap().to_string();
        for want in ["pub mod shape_0_sm90", "wgmma.mma_async", "sm : 90", "if sm / 10 == 9"] {
            assert!(text.contains(want), "no `{want}` with sm90");
        }
        assert!(!text.contains("pub mod generic_sm90"), "a symbolic generic variant has no wgmma kernel");
    }

    const F32_GEMM: &str = "graph<M, N=96, K=80> g(x: f32[M, K], w: f32[K, N]) -> (y: f32[M, N]) {
        y = matmul(x, w)
        return y
    }";

    fn point(m: i64) -> BTreeMap<String, i64> {
        [("M".to_string(), m), ("N".to_string(), 96), ("K".to_string(), 80)].into()
    }

    /// A folder holding a record of `plan` for the packed kernel of
    /// `F32_GEMM` at `M = m`, keyed under this machine's C toolchain.
    fn cache_with(name: &str, m: i64, plan: Blocks) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("tgc-macros-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let p = tgc_core::cpu::lower(&graph(F32_GEMM).bind(&point(m)).unwrap()).unwrap();
        let (_, k) = tune::tunable(&p).next().expect("the GEMM is packed");
        let inputs = tune::key_inputs(&p, k, &tune::Toolchain::host().unwrap());
        let record = tune::Record {
            schema: tune::SCHEMA.into(),
            key: inputs.key(),
            inputs,
            plan,
            analytic: k.packed.as_ref().unwrap().blocks,
            timings: vec![tune::Timing { blocks: plan, median_ns: 1, repetitions: 1 }],
            measured_on: "expand test".into(),
            machine: tune::Machine::this(1),
            date: tune::utc_date(0),
            digest: String::new(),
        };
        tune::Cache::open(&dir).unwrap().put(record).unwrap();
        dir
    }

    #[test]
    fn tuning_gives_a_point_its_recorded_block_sizes_and_warns_for_a_missing_record() {
        let plan = Blocks { mc: 12, nc: 64, kc: 40, threads: 0 };
        let dir = cache_with("apply", 64, plan);
        let (tuning, tracked) = read_tuning(dir.to_str().unwrap(), Span::call_site()).unwrap_or_else(|e| panic!("{e}"));
        assert!(tracked.to_string().contains("include_bytes"), "the record is tracked: {tracked}");
        let backend = Backend::Rust { tuning };
        let m = api::kernel_module("g", &graph(F32_GEMM), &[point(64), point(32)], &backend).unwrap();
        let shape0 = &m.items[m.items.find("mod shape_0").unwrap()..m.items.find("mod shape_1").unwrap()];
        assert!(
            shape0.contains("pk_batch, 64, pk_rt.threads, ")
                && shape0.contains("let pk_mc: i64 = 12;")
                && shape0.contains("(40 / pk_kin)"),
            "not the record's sizes: {shape0}"
        );
        assert_eq!(m.notes.len(), 1, "M = 32 has no record: {:?}", m.notes);
        assert!(m.notes[0].contains("at K=80, M=32, N=96") && m.notes[0].contains("tgc tune"), "{}", m.notes[0]);
        let untuned = api::kernel_module("g", &graph(F32_GEMM), &[point(64)], &Backend::Rust { tuning: None }).unwrap();
        assert!(!untuned.items.contains("(40 / pk_kin)"), "the analytic sizes are not the record's");

        // The whole expansion: the note is a warning in the module.
        let file = dir.join("g.tgc");
        std::fs::write(&file, F32_GEMM).unwrap();
        let inv = Invocation {
            name: proc_macro2::Ident::new("g", Span::call_site()),
            graph: GraphSource::File { path: file.display().to_string(), span: Span::call_site() },
            shapes: vec![point(32)],
            tuning: Some((dir.to_str().unwrap().to_string(), Span::call_site())),
        };
        let ts = compile(&inv).unwrap_or_else(|e| panic!("{e}")).to_string();
        assert!(ts.contains("deprecated") && ts.contains("no tuning record"), "{ts}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_hand_edited_record_is_a_compile_error() {
        let dir = cache_with("edited", 64, Blocks { mc: 12, nc: 64, kc: 40, threads: 0 });
        let file = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap().path();
        let text = std::fs::read_to_string(&file).unwrap().replacen("\"kc\": 40", "\"kc\": 48", 1);
        std::fs::write(&file, text).unwrap();
        let err = read_tuning(dir.to_str().unwrap(), Span::call_site()).expect_err("refused").to_string();
        assert!(err.contains("compile_error") && err.contains("refused") && err.contains("digest"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn tuning_takes_one_string_once() {
        let err = |src: &str| match parse_invocation(src.parse().unwrap()) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("`{src}` parsed"),
        };
        assert!(err(r#"g: "a.tgc", tuning("x"), tuning("y")"#).contains("given twice"));
        assert!(err(r#"g: "a.tgc", tuning(x)"#).contains("tuning(\\\"DIR\\\")"));
        let inv = parse_invocation(r#"g: "a.tgc", tuning("t"), shapes(M = 2, N = 96, K = 80)"#.parse().unwrap())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((inv.tuning.map(|t| t.0), inv.shapes), (Some("t".to_string()), vec![point(2)]));
    }

    #[test]
    fn graphs_without_a_shape_point_get_the_generic_kernels() {
        let ts = sm80_items(&graph(GEMM), &[], true, false, &Analytic).unwrap().to_string();
        assert!(ts.contains("pub mod generic") && !ts.contains("shape_0"), "{}", &ts[..300]);
        let scale = graph("graph<N=4> main(x: f32[N]) -> (y: f32[N]) {\n y = x * 2.0\n return y\n}");
        let ts = sm80_items(&scale, &[], true, false, &Analytic).unwrap().to_string();
        assert!(ts.contains("pub mod generic") && ts.contains("Elementwise"), "{}", &ts[..300]);
    }
}

//! Reading a `kernel!` invocation and generating its module (the text of
//! `tgc_core::emit::api`, shared with the build-script helper).

use std::collections::BTreeMap;

use proc_macro2::{Delimiter, Literal, Span, TokenStream, TokenTree};
use quote::{quote, quote_spanned};
use tgc_core::emit::api::{self, Backend};
use tgc_core::emit::gpu_api;
use tgc_core::pipeline::{self, Format};
use tgc_core::tiny::Graph;
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
    let usage = "expected `kernel!(NAME: GRAPH [, shapes(SYM = INT | SYM in [INT, ...], ...)])`";
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
    // Trailing `, shapes(...)` groups, read from the end.
    let mut shapes = Vec::new();
    while rest.len() >= 3 {
        let n = rest.len();
        let is_shapes = matches!(&rest[n - 2], TokenTree::Ident(i) if i == "shapes")
            && matches!(&rest[n - 1], TokenTree::Group(g) if g.delimiter() == Delimiter::Parenthesis)
            && matches!(&rest[n - 3], TokenTree::Punct(p) if p.as_char() == ',');
        if !is_shapes {
            break;
        }
        if let TokenTree::Group(g) = &rest[n - 1] {
            let points = parse_shape_points(g.stream(), g.span())?;
            shapes.splice(0..0, points);
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
    Ok(Invocation { name, graph, shapes })
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
                // rustc shows where; the text position of the rebuilt source would only mislead.
                let d = Diagnostic { span: None, ..d };
                error(span, &d.to_string())
            })?;
            Ok((g.graph, None))
        }
        GraphSource::File { path, span } => {
            let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
            let full = std::path::Path::new(&dir).join(path);
            let text = tgc_core::diag::read_source(&full)
                .map_err(|e| error(*span, &format!("cannot read {}: {e}", full.display())))?
                .map_err(|d| error(*span, &d.render(path)))?;
            let g = pipeline::load(&text, Format::of(&full, &text), None)
                .map_err(|d: Diagnostic| error(*span, &d.render(path)))?;
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
    let module = api::kernel_module(&name.to_string(), &g, &inv.shapes, &Backend::Rust)
        .map_err(|d| error(span, &d.to_string()))?;
    let items: TokenStream = module
        .items
        .parse()
        .map_err(|e| error(span, &format!("tgc generated Rust that does not parse (a tgc bug): {e}")))?;
    let gpu = sm80_items(&g, &inv.shapes, cfg!(feature = "sm80")).map_err(|m| error(span, &m))?;
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
        }
    })
}

/// With feature `sm80`: the sm80 part of the module,
/// [`tgc_core::emit::gpu_api::sm80_module`] with the cubins inline (a
/// submodule `sm80` with the whole graph's kernels and launch functions,
/// or a constant `SM80_SKIPPED` for a graph the GPU path does not take; the
/// facade's `sm80` turns on its `cuda`). `Err` (a compile error) when the
/// kernels do not compile, e.g. without the CUDA toolchain.
fn sm80_items(g: &Graph, shapes: &[BTreeMap<String, i64>], enabled: bool) -> Result<TokenStream, String> {
    if !enabled {
        return Ok(TokenStream::new());
    }
    let module = gpu_api::sm80_module(g, shapes, gpu_api::CubinSource::Inline)?;
    module.text.parse().map_err(|e| format!("tgc generated an sm80 module that does not parse (a tgc bug): {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let ts = sm80_items(&graph(GEMM), &[point], true).unwrap_or_else(|e| panic!("{e}"));
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
        assert!(sm80_items(&graph(GEMM), &[], false).unwrap().is_empty());
    }

    #[test]
    fn graphs_without_a_shape_point_get_the_generic_kernels() {
        let ts = sm80_items(&graph(GEMM), &[], true).unwrap().to_string();
        assert!(ts.contains("pub mod generic") && !ts.contains("shape_0"), "{}", &ts[..300]);
        let scale = graph("graph<N=4> main(x: f32[N]) -> (y: f32[N]) {\n y = x * 2.0\n return y\n}");
        let ts = sm80_items(&scale, &[], true).unwrap().to_string();
        assert!(ts.contains("pub mod generic") && ts.contains("Elementwise"), "{}", &ts[..300]);
    }
}

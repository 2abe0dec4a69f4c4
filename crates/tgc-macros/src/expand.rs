//! Reading a `kernel!` invocation and generating its module.

use std::collections::BTreeMap;

use proc_macro2::{Delimiter, Literal, Span, TokenStream, TokenTree};
use quote::{format_ident, quote, quote_spanned};
use tgc_core::pipeline::{self, Format};
use tgc_core::tiny::{Graph, Op, Rel};
use tgc_core::{DType, Diagnostic};

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
    let usage = "expected `kernel!(NAME: GRAPH [, shapes(SYM = INT, ...)])`";
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
            shapes.insert(0, parse_shape_point(g.stream(), g.span())?);
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

/// `SYM = INT, ...` inside `shapes(...)`.
fn parse_shape_point(ts: TokenStream, span: Span) -> Result<BTreeMap<String, i64>, TokenStream> {
    let toks: Vec<TokenTree> = ts.into_iter().collect();
    let mut out = BTreeMap::new();
    for chunk in toks.split(|t| matches!(t, TokenTree::Punct(p) if p.as_char() == ',')) {
        if chunk.is_empty() {
            continue;
        }
        match chunk {
            [TokenTree::Ident(i), TokenTree::Punct(eq), TokenTree::Literal(v)] if eq.as_char() == '=' => {
                let value: i64 = v.to_string().parse().map_err(|_| error(v.span(), "expected a positive integer"))?;
                if value < 1 {
                    return Err(error(v.span(), "a dimension must be at least 1"));
                }
                if out.insert(i.to_string(), value).is_some() {
                    return Err(error(i.span(), &format!("`{i}` is given twice")));
                }
            }
            _ => return Err(error(chunk[0].span(), "expected `SYM = INT`")),
        }
    }
    if out.is_empty() {
        return Err(error(span, "`shapes()` needs at least one `SYM = INT`"));
    }
    Ok(out)
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
            let text = std::fs::read_to_string(&full)
                .map_err(|e| error(*span, &format!("cannot read {}: {e}", full.display())))?;
            let g = pipeline::load(&text, Format::of(&full, &text), None)
                .map_err(|d: Diagnostic| error(*span, &d.render(path)))?;
            Ok((g.graph, Some(full.display().to_string())))
        }
    }
}

fn rust_type(d: DType) -> TokenStream {
    match d {
        DType::F16 => quote!(::tgc::half::f16),
        DType::BF16 => quote!(::tgc::half::bf16),
        DType::F32 => quote!(f32),
        DType::I32 => quote!(i32),
        DType::Bool => quote!(bool),
    }
}

/// `dims[k]` for symbol `s` in generated code.
fn dim_code(d: &tgc_core::sym::Dim, g: &Graph) -> TokenStream {
    let idx = |s: &str| {
        g.symbols.iter().position(|x| x.name == s).map(|k| format!("__dims[{k}]")).unwrap_or_else(|| "0".into())
    };
    let text = d.to_code(&idx, &|n, q| format!("i64::div_euclid({n}, {q})"));
    text.parse().unwrap_or_else(|_| quote!(0))
}

fn compile(inv: &Invocation) -> Result<TokenStream, TokenStream> {
    let (g, file) = load(inv)?;
    let name = &inv.name;
    let span = name.span();
    let fail = |d: Diagnostic| error(span, &d.to_string());
    let tiny_json = pipeline::to_json(&g);
    let generic_src = pipeline::rust_body(&g, "::tgc").map_err(fail)?;
    let generic: TokenStream = generic_src
        .parse()
        .map_err(|e| error(span, &format!("tgc generated Rust that does not parse (a tgc bug): {e}")))?;

    // Specialised bodies, one per ShapeSet point.
    let mut special = Vec::new();
    for (k, point) in inv.shapes.iter().enumerate() {
        for sym in point.keys() {
            if !g.symbols.iter().any(|s| &s.name == sym) {
                return Err(error(span, &format!("shapes(): the graph has no symbol `{sym}`")));
            }
        }
        let bound = g.bind(point).map_err(fail)?;
        let src = pipeline::rust_body(&bound, "::tgc").map_err(fail)?;
        let body: TokenStream = src
            .parse()
            .map_err(|e| error(span, &format!("tgc generated Rust that does not parse (a tgc bug): {e}")))?;
        let m = format_ident!("shape_{}", k);
        let conds: Vec<TokenStream> = point
            .iter()
            .map(|(s, v)| {
                let i = g.symbols.iter().position(|x| &x.name == s).unwrap_or(0);
                quote!(__dims[#i] == #v)
            })
            .collect();
        // The specialised body takes the dims that stay symbolic.
        let rest: Vec<usize> =
            g.symbols.iter().enumerate().filter(|(_, s)| !point.contains_key(&s.name)).map(|(i, _)| i).collect();
        special.push((m, body, conds, rest));
    }

    let ins = g.inputs();
    let in_names: Vec<String> = ins
        .iter()
        .map(|&id| match &g.node(id).op {
            Op::Input { name } => name.clone(),
            _ => g.node(id).label.clone(),
        })
        .collect();
    let mut params = Vec::new();
    let mut checks = Vec::new();
    let mut in_args = Vec::new();
    for (id, n) in ins.iter().zip(&in_names) {
        let ident = format_ident!("{}", n);
        let ty = rust_type(g.dtype(*id));
        params.push(quote!(#ident: &[#ty]));
        let len = dim_code(&tgc_core::sym::Dim::product(g.shape(*id)), &g);
        checks.push(quote! {
            let __want = (#len) as usize;
            if #ident.len() != __want {
                return Err(::tgc::Error::LengthMismatch { arg: #n.to_string(), expected: __want, got: #ident.len() });
            }
        });
        in_args.push(quote!(#ident));
    }
    let mut out_args = Vec::new();
    for o in &g.outputs {
        let ident = format_ident!("{}", o.name);
        let ty = rust_type(g.dtype(o.node));
        params.push(quote!(#ident: &mut [#ty]));
        let len = dim_code(&tgc_core::sym::Dim::product(g.shape(o.node)), &g);
        let n = &o.name;
        checks.push(quote! {
            let __want = (#len) as usize;
            if #ident.len() != __want {
                return Err(::tgc::Error::LengthMismatch { arg: #n.to_string(), expected: __want, got: #ident.len() });
            }
        });
        out_args.push(quote!(#ident));
    }
    let mut dim_vals = Vec::new();
    for s in &g.symbols {
        let ident = format_ident!("{}", s.name);
        params.push(quote!(#ident: usize));
        let sname = &s.name;
        dim_vals.push(quote! {{
            let v = #ident as i64;
            if v < 1 || #ident > i32::MAX as usize {
                return Err(::tgc::Error::InvalidDim { dim: #sname.to_string(), value: v });
            }
            v
        }});
    }
    let nd = g.symbols.len();
    for c in &g.constraints {
        let (l, r) = (dim_code(&c.constraint.lhs, &g), dim_code(&c.constraint.rhs, &g));
        let what = format!("{} ({} vs {})", c.constraint.what, c.constraint.lhs, c.constraint.rhs);
        let holds = match c.constraint.rel {
            Rel::Eq => quote!((#l) == (#r)),
            Rel::Le => quote!((#l) <= (#r)),
        };
        checks.push(quote! {
            if !(#holds) {
                return Err(::tgc::Error::DimMismatch { dim: #what.to_string(), expected: #r, got: #l });
            }
        });
    }
    let dispatch: Vec<TokenStream> = special
        .iter()
        .map(|(m, _, conds, rest)| {
            let n = rest.len();
            quote! {
                if true #(&& #conds)* {
                    let __rest: [i64; #n] = [#(__dims[#rest]),*];
                    #m::body((#(#in_args,)*), (#(#out_args,)*), &__rest).map_err(::tgc::Error::Kernel)?;
                    return Ok(());
                }
            }
        })
        .collect();
    let special_mods = special.iter().map(|(m, body, _, _)| quote!(mod #m { #body }));
    let doc = format!(
        "Runs kernel `{}`. Arguments: the inputs, the outputs, then the dims ({}).",
        name,
        g.symbols.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ")
    );
    let track = file.map(|f| {
        quote!(
            const _: &[u8] = include_bytes!(#f);
        )
    });
    Ok(quote! {
        #[allow(non_snake_case, clippy::all)]
        pub mod #name {
            #track
            /// The kernel's Tiny IR, canonical JSON.
            pub const TINY_IR: &str = #tiny_json;
            /// The generated loop-nest code (generic over the dims) compiled into this module.
            pub const GENERATED_SOURCE: &str = #generic_src;
            #[doc = #doc]
            ///
            /// # Errors
            /// `InvalidDim` for a dim < 1, `DimMismatch` for dims that break a
            /// shape fact of the graph, `LengthMismatch` for a slice whose length
            /// is not its shape's element count. Nothing runs when a check fails.
            pub fn run(#(#params),*) -> ::core::result::Result<(), ::tgc::Error> {
                let __dims: [i64; #nd] = [#(#dim_vals),*];
                #(#checks)*
                #(#dispatch)*
                generic::body((#(#in_args,)*), (#(#out_args,)*), &__dims).map_err(::tgc::Error::Kernel)?;
                Ok(())
            }
            mod generic { #generic }
            #(#special_mods)*
        }
    })
}

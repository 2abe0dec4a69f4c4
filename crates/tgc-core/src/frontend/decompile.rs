//! Decompiler: [`Program`] back to canonical graph-language text.
//!
//! - `parse(&decompile(p))` equals `p` up to spans ([`strip_spans`]) for every
//!   program the parser can produce.
//! - One statement per line, four-space indentation, a blank line between
//!   graphs, spaces around binary operators, none around `=` in keyword
//!   arguments (`axis=-1`).
//! - Parentheses only where precedence needs them: `+ - * /` are
//!   left-associative (`a - (b - c)` keeps its parentheses, `(a - b) - c` is
//!   printed `a - b - c`), comparisons do not chain (both sides of a nested
//!   comparison are parenthesised), and a negated sum is `-(a + b)`.
//! - `Neg` of a non-negative literal prints as `-(1)`, because `-1` parses as
//!   the literal `Int(-1)`.
//! - Floats print in Rust's shortest round-trip form (`0.5`, `1e-5`, `1.0`),
//!   so they read back as the identical `f64` and never as an integer.
//!
//! Only parser-producible trees print as valid source: reserved words as
//! names, negative dimensions or non-finite floats print as they are.

use super::ast::{DimExpr, Expr, GraphDef, Ident, Program, Stmt, SymDecl, TensorDecl};
use crate::diag::Span;

/// Prints `p` as source text that parses back to `p` (modulo spans).
pub fn decompile(p: &Program) -> String {
    let graphs: Vec<String> = p.graphs.iter().map(graph).collect();
    graphs.join("\n")
}

/// Prints one expression with minimal parentheses (`a * (b + c)`).
pub fn decompile_expr(e: &Expr) -> String {
    match e {
        Expr::Int(v, _) => v.to_string(),
        Expr::Float(v, _) => format!("{v:?}"),
        Expr::Bool(b, _) => b.to_string(),
        Expr::Name(id) => id.name.clone(),
        Expr::Neg(inner, _) => {
            let text = decompile_expr(inner);
            let needs_parens = match **inner {
                Expr::Binary { .. } => true,
                Expr::Int(..) | Expr::Float(..) => !text.starts_with('-'),
                _ => false,
            };
            if needs_parens {
                format!("-({text})")
            } else {
                format!("-{text}")
            }
        }
        Expr::Binary { op, lhs, rhs, .. } => {
            let prec = op.precedence();
            let non_associative = prec == 1; // comparisons do not chain
            let lhs_parens = binary_precedence(lhs).is_some_and(|p| p < prec || (p == prec && non_associative));
            let rhs_parens = binary_precedence(rhs).is_some_and(|p| p <= prec);
            format!("{} {} {}", operand(lhs, lhs_parens), op.symbol(), operand(rhs, rhs_parens))
        }
        Expr::Call { callee, args, kwargs, .. } => {
            let mut parts: Vec<String> = args.iter().map(decompile_expr).collect();
            parts.extend(kwargs.iter().map(|(k, v)| format!("{}={}", k.name, decompile_expr(v))));
            format!("{}({})", callee.name, parts.join(", "))
        }
        Expr::List(items, _) => {
            let items: Vec<String> = items.iter().map(decompile_expr).collect();
            format!("[{}]", items.join(", "))
        }
    }
}

/// A copy of `p` with every span set to `Span::default()`, for comparing
/// trees parsed from different texts.
pub fn strip_spans(p: &Program) -> Program {
    Program { graphs: p.graphs.iter().map(strip_graph).collect() }
}

fn graph(g: &GraphDef) -> String {
    let mut out = String::from("graph");
    if !g.syms.is_empty() {
        let syms: Vec<String> = g.syms.iter().map(sym_decl).collect();
        out.push_str(&format!("<{}>", syms.join(", ")));
    }
    let params: Vec<String> = g.params.iter().map(tensor_decl).collect();
    let results: Vec<String> = g.results.iter().map(tensor_decl).collect();
    out.push_str(&format!(" {}({}) -> ({}) {{\n", g.name.name, params.join(", "), results.join(", ")));
    for s in &g.body {
        out.push_str(&format!("    {}\n", statement(s)));
    }
    out.push_str(&format!("    return {}\n}}\n", names(&g.ret)));
    out
}

fn sym_decl(s: &SymDecl) -> String {
    let decl = match s.default {
        Some(d) => format!("{}={d}", s.name.name),
        None => s.name.name.clone(),
    };
    if s.padded {
        format!("{decl} padded")
    } else {
        decl
    }
}

fn tensor_decl(t: &TensorDecl) -> String {
    let dims: Vec<String> = t
        .shape
        .iter()
        .map(|d| match d {
            DimExpr::Int(v, _) => v.to_string(),
            DimExpr::Sym(id) => id.name.clone(),
        })
        .collect();
    format!("{}: {}[{}]", t.name.name, t.dtype.dsl_name(), dims.join(", "))
}

fn statement(s: &Stmt) -> String {
    let value = decompile_expr(&s.value);
    if s.destructure {
        format!("({}) = {value}", names(&s.targets))
    } else {
        format!("{} = {value}", names(&s.targets))
    }
}

fn names(ids: &[Ident]) -> String {
    ids.iter().map(|id| id.name.as_str()).collect::<Vec<_>>().join(", ")
}

/// The precedence of a binary expression; `None` for everything that binds
/// tighter than any binary operator.
fn binary_precedence(e: &Expr) -> Option<u8> {
    match e {
        Expr::Binary { op, .. } => Some(op.precedence()),
        _ => None,
    }
}

fn operand(e: &Expr, parens: bool) -> String {
    if parens {
        format!("({})", decompile_expr(e))
    } else {
        decompile_expr(e)
    }
}

fn strip_graph(g: &GraphDef) -> GraphDef {
    GraphDef {
        name: strip_ident(&g.name),
        syms: g
            .syms
            .iter()
            .map(|s| SymDecl { name: strip_ident(&s.name), default: s.default, padded: s.padded })
            .collect(),
        params: g.params.iter().map(strip_tensor_decl).collect(),
        results: g.results.iter().map(strip_tensor_decl).collect(),
        body: g
            .body
            .iter()
            .map(|s| Stmt {
                targets: s.targets.iter().map(strip_ident).collect(),
                destructure: s.destructure,
                value: strip_expr(&s.value),
            })
            .collect(),
        ret: g.ret.iter().map(strip_ident).collect(),
        ret_span: Span::default(),
        span: Span::default(),
    }
}

fn strip_ident(id: &Ident) -> Ident {
    Ident { name: id.name.clone(), span: Span::default() }
}

fn strip_tensor_decl(t: &TensorDecl) -> TensorDecl {
    TensorDecl {
        name: strip_ident(&t.name),
        dtype: t.dtype,
        dtype_span: Span::default(),
        shape: t
            .shape
            .iter()
            .map(|d| match d {
                DimExpr::Int(v, _) => DimExpr::Int(*v, Span::default()),
                DimExpr::Sym(id) => DimExpr::Sym(strip_ident(id)),
            })
            .collect(),
    }
}

fn strip_expr(e: &Expr) -> Expr {
    let none = Span::default();
    match e {
        Expr::Int(v, _) => Expr::Int(*v, none),
        Expr::Float(v, _) => Expr::Float(*v, none),
        Expr::Bool(b, _) => Expr::Bool(*b, none),
        Expr::Name(id) => Expr::Name(strip_ident(id)),
        Expr::Neg(inner, _) => Expr::Neg(Box::new(strip_expr(inner)), none),
        Expr::Binary { op, lhs, rhs, .. } => {
            Expr::Binary { op: *op, lhs: Box::new(strip_expr(lhs)), rhs: Box::new(strip_expr(rhs)), span: none }
        }
        Expr::Call { callee, args, kwargs, .. } => Expr::Call {
            callee: strip_ident(callee),
            args: args.iter().map(strip_expr).collect(),
            kwargs: kwargs.iter().map(|(k, v)| (strip_ident(k), strip_expr(v))).collect(),
            span: none,
        },
        Expr::List(items, _) => Expr::List(items.iter().map(strip_expr).collect(), none),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::frontend::ast::BinOp;
    use crate::frontend::parser::tests::{DSL_MD_GEMM, EXAMPLES, SPEC_004_MULTI_OUTPUT};
    use crate::frontend::parser::{is_reserved, parse};
    use expect_test::expect;
    use proptest::collection::vec;
    use proptest::prelude::*;
    use proptest::sample::select;

    /// Parses, prints, parses again; both trees and both texts must agree.
    fn round_trip(src: &str) -> String {
        let first = parse(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
        let text = decompile(&first);
        let second = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(strip_spans(&second), strip_spans(&first), "{text}");
        assert_eq!(decompile(&second), text);
        text
    }

    /// The canonical text of one expression.
    fn canonical(expr: &str) -> String {
        let text = round_trip(&format!("graph g() -> (y: f32[]) {{\n    y = {expr}\n    return y\n}}\n"));
        let line = text.lines().nth(1).unwrap_or_default();
        line.trim_start().trim_start_matches("y = ").to_string()
    }

    #[test]
    fn examples_round_trip() {
        for src in EXAMPLES {
            round_trip(src);
        }
    }

    #[test]
    fn canonical_text_of_the_examples() {
        expect![[r#"
            graph<M=128, N=256, K=64> gemm_bias_relu(x: f16[M, K], w: f16[K, N], bias: f16[N]) -> (y: f16[M, N]) {
                acc = matmul(x, w)
                y = relu(acc + bias)
                return y
            }
        "#]]
        .assert_eq(&round_trip(DSL_MD_GEMM));
        expect![[r#"
            graph<N=1> multi_output(x: f32[N]) -> (a: f32[N], b: f32[N]) {
                r1 = x + 1.0
                r2 = x * 2.0
                return r1, r2
            }

            graph main(input: f32[10]) -> (out1: f32[10], out2: f32[10]) {
                (a, b) = multi_output(input)
                return a, b
            }
        "#]]
        .assert_eq(&round_trip(SPEC_004_MULTI_OUTPUT));
        expect![[r#"
            graph<M, N=0> g(s: bool[], t: i32[M, 1, N]) -> (u: bf16[]) {
                (a) = f(s, k=[], l=[[t]])
                return a
            }
        "#]]
        .assert_eq(&round_trip(
            "graph<M, N=0,> g(s: bool[], t: i32[M, 1, N,],) -> (u: bf16[]) { (a,) = f(s, k=[], l=[[t,]]); return a }",
        ));
    }

    #[test]
    fn minimal_parentheses() {
        let cases = [
            ("a - (b - c)", "a - (b - c)"),
            ("(a - b) - c", "a - b - c"),
            ("a + (b * c)", "a + b * c"),
            ("(a + b) * c", "(a + b) * c"),
            ("a / (b * c)", "a / (b * c)"),
            ("(a / b) * c", "a / b * c"),
            ("-(a + b)", "-(a + b)"),
            ("-(a * b)", "-(a * b)"),
            ("(-a) * b", "-a * b"),
            ("--x", "--x"),
            ("-f(x)", "-f(x)"),
            ("-[1]", "-[1]"),
            ("(a < b) == c", "(a < b) == c"),
            ("a < (b == c)", "a < (b == c)"),
            ("(a + 1) < b", "a + 1 < b"),
            ("a >= -(b - 1)", "a >= -(b - 1)"),
            ("f((a), (b + c) * d)", "f(a, (b + c) * d)"),
        ];
        for (src, expected) in cases {
            assert_eq!(canonical(src), expected, "{src}");
        }
    }

    #[test]
    fn literals_print_as_they_parse() {
        let cases = [
            ("-1", "-1"),
            ("-(1)", "-(1)"),
            ("-(-1)", "--1"),
            ("x - -1", "x - -1"),
            ("- 2.0", "-2.0"),
            ("-(0.0)", "-(0.0)"),
            ("-0.0", "-0.0"),
            ("2.", "2.0"),
            ("1.0", "1.0"),
            ("1e-5", "1e-5"),
            ("1e300", "1e300"),
            ("0.1", "0.1"),
            ("-9223372036854775808", "-9223372036854775808"),
            ("true", "true"),
            ("f(x, axis = -1)", "f(x, axis=-1)"),
            ("[[0,0],[1,1]]", "[[0, 0], [1, 1]]"),
        ];
        for (src, expected) in cases {
            assert_eq!(canonical(src), expected, "{src}");
        }
    }

    #[test]
    fn strip_spans_forgets_layout() {
        let a = parse("graph g(x: f32[N]) -> (y: f32[N]) { y = f(x, k=[1]) + -x; return y }").unwrap();
        let b = parse("graph g(\n  x: f32[N],\n) -> (y: f32[N])\n{\n    y = f(x,\n k = [ 1 ]) + - x\n    return y\n}")
            .unwrap();
        assert_ne!(a, b);
        assert_eq!(strip_spans(&a), strip_spans(&b));
    }

    // Random trees, built only from what the parser can produce: names that
    // are not reserved, finite floats, non-negative dimensions, calls on the
    // right of `(a, b) =`, unique names where the parser demands them.

    const OPS: [BinOp; 10] = [
        BinOp::Add,
        BinOp::Sub,
        BinOp::Mul,
        BinOp::Div,
        BinOp::Lt,
        BinOp::Le,
        BinOp::Gt,
        BinOp::Ge,
        BinOp::Eq,
        BinOp::Ne,
    ];

    fn id(name: String) -> Ident {
        Ident { name, span: Span::default() }
    }

    fn name() -> impl Strategy<Value = String> {
        "[a-z_][a-z0-9_]{0,5}".prop_filter("reserved", |s| !is_reserved(s))
    }

    /// `n` distinct names (a random stem plus the index).
    fn names(n: std::ops::Range<usize>) -> impl Strategy<Value = Vec<Ident>> {
        vec(name(), n).prop_map(|v| v.into_iter().enumerate().map(|(i, s)| id(format!("{s}{i}"))).collect())
    }

    fn float() -> impl Strategy<Value = f64> {
        prop_oneof![any::<f64>().prop_filter("finite", |v| v.is_finite()), -4.0..4.0f64, Just(1e-5), Just(-0.0)]
    }

    fn expr() -> BoxedStrategy<Expr> {
        let none = Span::default();
        let leaf = prop_oneof![
            any::<i64>().prop_map(move |v| Expr::Int(v, none)),
            (-3..3i64).prop_map(move |v| Expr::Int(v, none)),
            float().prop_map(move |v| Expr::Float(v, none)),
            any::<bool>().prop_map(move |b| Expr::Bool(b, none)),
            name().prop_map(|s| Expr::Name(id(s))),
        ];
        leaf.prop_recursive(5, 48, 4, move |inner| {
            prop_oneof![
                inner.clone().prop_map(move |e| Expr::Neg(Box::new(e), none)),
                (select(&OPS[..]), inner.clone(), inner.clone()).prop_map(move |(op, l, r)| Expr::Binary {
                    op,
                    lhs: Box::new(l),
                    rhs: Box::new(r),
                    span: none
                }),
                call(inner.clone()),
                vec(inner, 0..4).prop_map(move |items| Expr::List(items, none)),
            ]
        })
        .boxed()
    }

    fn call(arg: impl Strategy<Value = Expr> + Clone) -> impl Strategy<Value = Expr> {
        (name(), vec(arg.clone(), 0..3), names(0..3), vec(arg, 3)).prop_map(|(callee, args, keys, values)| {
            let kwargs = keys.into_iter().zip(values).collect();
            Expr::Call { callee: id(callee), args, kwargs, span: Span::default() }
        })
    }

    fn tensor_decl(name: Ident) -> impl Strategy<Value = TensorDecl> {
        let dim = prop_oneof![
            (0..=i64::MAX).prop_map(|v| DimExpr::Int(v, Span::default())),
            name_ident().prop_map(DimExpr::Sym),
        ];
        (select(&DType::ALL[..]), vec(dim, 0..4)).prop_map(move |(dtype, shape)| TensorDecl {
            name: name.clone(),
            dtype,
            dtype_span: Span::default(),
            shape,
        })
    }

    fn name_ident() -> impl Strategy<Value = Ident> {
        name().prop_map(id)
    }

    fn decls(n: std::ops::Range<usize>) -> impl Strategy<Value = Vec<TensorDecl>> {
        names(n).prop_flat_map(|ns| ns.into_iter().map(tensor_decl).collect::<Vec<_>>())
    }

    fn stmt() -> impl Strategy<Value = Stmt> {
        prop_oneof![
            (name_ident(), expr()).prop_map(|(t, value)| Stmt { targets: vec![t], destructure: false, value }),
            (names(1..4), call(expr())).prop_map(|(targets, value)| Stmt { targets, destructure: true, value }),
        ]
    }

    fn graph(name: Ident) -> impl Strategy<Value = GraphDef> {
        let syms = names(0..3).prop_flat_map(|ns| {
            ns.into_iter()
                .map(|n| {
                    (proptest::option::of(0..=i64::MAX), any::<bool>()).prop_map(move |(default, padded)| SymDecl {
                        name: n.clone(),
                        default,
                        padded,
                    })
                })
                .collect::<Vec<_>>()
        });
        (syms, decls(0..3), decls(1..3), vec(stmt(), 0..4), vec(name_ident(), 1..3)).prop_map(
            move |(syms, params, results, body, ret)| GraphDef {
                name: name.clone(),
                syms,
                params,
                results,
                body,
                ret,
                ret_span: Span::default(),
                span: Span::default(),
            },
        )
    }

    fn program() -> impl Strategy<Value = Program> {
        names(1..3)
            .prop_flat_map(|ns| ns.into_iter().map(graph).collect::<Vec<_>>())
            .prop_map(|graphs| Program { graphs })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn decompiled_programs_parse_back(p in program()) {
            let text = decompile(&p);
            let back = parse(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
            prop_assert_eq!(strip_spans(&back), p, "{}", text);
        }
    }
}

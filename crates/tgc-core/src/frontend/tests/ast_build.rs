//! Builders for syntax trees, for tests that construct programs directly
//! (positions are tested from source text in `errors.rs`); spans are 0:0.

use crate::diag::Span;
use crate::frontend::ast::*;
use crate::DType;

pub fn ident(name: &str, sp: Span) -> Ident {
    Ident { name: name.to_string(), span: sp }
}

pub fn n(name: &str) -> Expr {
    Expr::Name(ident(name, Span::default()))
}

pub fn int(v: i64) -> Expr {
    Expr::Int(v, Span::default())
}

pub fn float(v: f64) -> Expr {
    Expr::Float(v, Span::default())
}

pub fn list(v: Vec<Expr>) -> Expr {
    Expr::List(v, Span::default())
}

pub fn ints(v: &[i64]) -> Expr {
    list(v.iter().map(|&x| if x < 0 { Expr::Neg(Box::new(int(-x)), Span::default()) } else { int(x) }).collect())
}

pub fn pairs(v: &[[i64; 2]]) -> Expr {
    list(v.iter().map(|p| ints(p)).collect())
}

pub fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
    Expr::Binary { op, lhs: Box::new(a), rhs: Box::new(b), span: Span::default() }
}

pub fn call(f: &str, args: Vec<Expr>) -> Expr {
    call_kw(f, args, vec![])
}

pub fn call_kw(f: &str, args: Vec<Expr>, kw: Vec<(&str, Expr)>) -> Expr {
    let sp = Span::default();
    Expr::Call {
        callee: ident(f, sp),
        args,
        kwargs: kw.into_iter().map(|(k, v)| (ident(k, sp), v)).collect(),
        span: sp,
    }
}

/// `name: dtype[dims]`, dims given as text (`"M"`, `"4"`).
pub fn t(name: &str, dtype: DType, dims: &[&str]) -> TensorDecl {
    let shape = dims
        .iter()
        .map(|d| match d.parse::<i64>() {
            Ok(v) => DimExpr::Int(v, Span::default()),
            Err(_) => DimExpr::Sym(ident(d, Span::default())),
        })
        .collect();
    TensorDecl { name: ident(name, Span::default()), dtype, dtype_span: Span::default(), shape }
}

pub fn assign(target: &str, value: Expr) -> Stmt {
    Stmt { targets: vec![ident(target, Span::default())], destructure: false, value }
}

pub fn destructure(targets: &[&str], value: Expr) -> Stmt {
    Stmt { targets: targets.iter().map(|x| ident(x, Span::default())).collect(), destructure: true, value }
}

/// A graph definition; `syms` are `(name, default)`.
pub fn graph(
    name: &str,
    syms: &[(&str, Option<i64>)],
    params: Vec<TensorDecl>,
    results: Vec<TensorDecl>,
    body: Vec<Stmt>,
    ret: &[&str],
) -> GraphDef {
    GraphDef {
        name: ident(name, Span::default()),
        syms: syms
            .iter()
            .map(|(s, d)| SymDecl { name: ident(s, Span::default()), default: *d, padded: false })
            .collect(),
        params,
        results,
        body,
        ret: ret.iter().map(|r| ident(r, Span::default())).collect(),
        ret_span: Span::default(),
        span: Span::default(),
    }
}

pub fn program(graphs: Vec<GraphDef>) -> Program {
    Program { graphs }
}

/// A one-graph program `main(params) -> (y: dtype[dims]) { y = value; return y }`.
pub fn single(syms: &[(&str, Option<i64>)], params: Vec<TensorDecl>, result: TensorDecl, value: Expr) -> Program {
    let y = result.name.name.clone();
    program(vec![graph("main", syms, params, vec![result], vec![assign(&y, value)], &[&y])])
}

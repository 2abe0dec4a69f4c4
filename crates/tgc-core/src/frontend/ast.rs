//! Syntax tree of the graph language (`DSL.md`): what the parser produces and
//! `decompile` prints. Names are not resolved here; every node keeps the span
//! of the token that starts it so later errors point at the source.

use crate::diag::Span;
use crate::dtype::DType;

/// A whole source file: one or more graph definitions.
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    pub graphs: Vec<GraphDef>,
}

/// `graph<SYM=default, ...> name(params) -> (results) { body; return ... }`
#[derive(Clone, Debug, PartialEq)]
pub struct GraphDef {
    pub name: Ident,
    /// Declared symbolic dimensions, in order, with optional defaults.
    pub syms: Vec<SymDecl>,
    pub params: Vec<TensorDecl>,
    pub results: Vec<TensorDecl>,
    pub body: Vec<Stmt>,
    /// The names in the final `return a, b`.
    pub ret: Vec<Ident>,
    /// Span of the `return` keyword.
    pub ret_span: Span,
    /// Span of the `graph` keyword.
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

/// `SYM`, `SYM=default`, either followed by `padded`, in `graph<...>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SymDecl {
    pub name: Ident,
    pub default: Option<i64>,
    /// Declared `padded`: a call may be run at a larger ShapeSet point of
    /// this symbol, its inputs zero-filled and its outputs cut back
    /// ([`crate::tiny::Symbol::padded`]).
    pub padded: bool,
}

/// `name: dtype[dims]` in a parameter or result list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorDecl {
    pub name: Ident,
    pub dtype: DType,
    /// Span of the dtype token (for dtype errors).
    pub dtype_span: Span,
    /// `[]` is a scalar.
    pub shape: Vec<DimExpr>,
}

/// One entry of a declared shape: an integer or a symbol name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DimExpr {
    Int(i64, Span),
    Sym(Ident),
}

/// `name = expr` or `(a, b) = call(...)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    /// One target for `name = expr`; several for destructuring.
    pub targets: Vec<Ident>,
    /// True when the targets were written in parentheses (`(a) = f(x)` too).
    pub destructure: bool,
    pub value: Expr,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl BinOp {
    /// The operator as written in source.
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
        }
    }

    /// Binding strength: comparisons 1, `+ -` 2, `* /` 3.
    pub fn precedence(self) -> u8 {
        match self {
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne => 1,
            BinOp::Add | BinOp::Sub => 2,
            BinOp::Mul | BinOp::Div => 3,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// An integer literal; `-1` is one literal (negative), `-(1)` and `-x` are [`Expr::Neg`].
    Int(i64, Span),
    Float(f64, Span),
    Bool(bool, Span),
    /// A value name, a dtype name used as an argument (`cast(x, f16)`), or a
    /// symbol name used as an integer (`reshape(x, [M, 1])`); resolved later.
    Name(Ident),
    /// `-x`
    Neg(Box<Expr>, Span),
    /// `a op b`; the span is the operator's.
    Binary {
        op: BinOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
        span: Span,
    },
    /// `f(args, key=value)`; the span is the callee name's.
    Call {
        callee: Ident,
        args: Vec<Expr>,
        kwargs: Vec<(Ident, Expr)>,
        span: Span,
    },
    /// `[a, b]`; the span is the `[`.
    List(Vec<Expr>, Span),
}

impl Expr {
    /// The span that errors about this expression point at.
    pub fn span(&self) -> Span {
        match self {
            Expr::Int(_, s) | Expr::Float(_, s) | Expr::Bool(_, s) | Expr::Neg(_, s) | Expr::List(_, s) => *s,
            Expr::Name(id) => id.span,
            Expr::Binary { span, .. } | Expr::Call { span, .. } => *span,
        }
    }
}

//! Parser of the graph language (`DSL.md`): tokens to [`Program`].
//!
//! It checks syntax only; names, ops, dtypes and shapes are checked when the
//! program is lowered. Every error is a `SyntaxError` at the offending token
//! that says what was expected. Rules beyond the grammar of `DSL.md`:
//!
//! - **Statements end at a line break or `;`.** A binary operator, a call's
//!   `(` or a `,` in `return a, b` continues a statement only if no line break
//!   comes before it, so two lines are never joined into one statement
//!   (`y = a` / `-b` is two statements, and the second is an error). Inside
//!   `( )` and `[ ]` line breaks are ignored, as in Python. A token that cannot
//!   continue a statement and is on the same line is an error
//!   (`expected ';' or a line break`); `}` also ends a statement.
//! - `return a, b` is required and is the last statement of every graph.
//! - **A `-` directly before a number literal is part of the literal**: `-1`
//!   is `Expr::Int(-1)` (so `axis=-1` and `i64::MIN` need no negation node),
//!   while `-(1)` and `-x` are `Expr::Neg`.
//! - Comparisons do not chain: `a < b < c` is an error; write parentheses.
//! - Keyword arguments follow positional ones and are not repeated.
//! - `(a, b) = …` takes a call on the right.
//! - Declared shapes and symbol defaults are non-negative integers or symbols.
//! - Trailing commas are accepted inside `( )`, `[ ]` and `< >`.
//! - Names declared twice in one list (graphs in a file; symbols, parameters
//!   or results of a graph; targets of one statement; keyword arguments of one
//!   call) are a `SyntaxError` at the second occurrence: the text is
//!   ill-formed on its own, before any name is looked up.
//! - Reserved words ([`RESERVED_WORDS`]) are never names.
//! - Expressions nest at most [`MAX_NESTING`] levels (parentheses, lists,
//!   calls, unary minus, and each binary operator of a chain), so
//!   adversarial input cannot overflow the stack of any later walk.

use std::collections::HashMap;

use super::ast::{BinOp, DimExpr, Expr, GraphDef, Ident, Program, Stmt, SymDecl, TensorDecl};
use super::lexer::{lex, Token, TokenKind};
use crate::diag;
use crate::diag::{Diagnostic, Span};
use crate::dtype::DType;
use crate::tiny::graph::MAX_SYMBOLS;

/// Words that cannot name a graph, value, symbol or keyword argument
/// (`DSL.md`; `spec/004`, 予約語).
pub const RESERVED_WORDS: [&str; 7] = ["graph", "return", "true", "false", "fused", "fused_reduce", "fused_cumulative"];

/// How deeply expressions may nest (parentheses, lists, calls, unary minus,
/// binary operators: `a + b + c` is two levels).
///
/// 128, like `serde_json`'s recursion limit. An unoptimised build spends up
/// to about 8 KiB of stack per level of nested calls, so the deepest
/// accepted input stays near 1 MiB, within a 2 MiB test thread; real
/// programs nest a few levels.
pub const MAX_NESTING: u32 = 128;

/// Lexes and parses a source file.
///
/// Errors: the lexer's errors, then [`parse_tokens`]'s; all are `SyntaxError`.
pub fn parse(src: &str) -> Result<Program, Diagnostic> {
    parse_tokens(&lex(src)?)
}

/// Parses a token stream (from [`lex`] or from `tgc::kernel!`) into a
/// program of one or more graphs. AST spans are copied from the tokens.
///
/// Errors: `SyntaxError` at the first token that does not fit the grammar
/// (just after the last token when the input ends early; at 1:1 when it is
/// empty),
/// with a message of the form ``expected ')' after argument, found '}'``.
pub fn parse_tokens(tokens: &[Token]) -> Result<Program, Diagnostic> {
    let mut p = Parser { tokens, pos: 0, brackets: 0, nesting: 0 };
    let mut graphs = vec![graph_def(&mut p)?];
    while p.peek().is_some() {
        graphs.push(graph_def(&mut p)?);
    }
    check_unique(graphs.iter().map(|g| &g.name), "graph")?;
    Ok(Program { graphs })
}

/// True for the words of [`RESERVED_WORDS`].
pub fn is_reserved(word: &str) -> bool {
    RESERVED_WORDS.contains(&word)
}

type PResult<T> = Result<T, Diagnostic>;

/// A cursor over the tokens.
struct Parser<'t> {
    tokens: &'t [Token],
    pos: usize,
    /// Open `(`/`[` around the current expression token; line breaks inside
    /// them do not end statements.
    brackets: u32,
    /// Current expression nesting, capped at [`MAX_NESTING`].
    nesting: u32,
}

impl<'t> Parser<'t> {
    fn peek(&self) -> Option<&'t Token> {
        self.tokens.get(self.pos)
    }

    fn peek_kind(&self) -> Option<&'t TokenKind> {
        self.peek().map(|t| &t.kind)
    }

    fn peek_kind_at(&self, ahead: usize) -> Option<&'t TokenKind> {
        self.tokens.get(self.pos + ahead).map(|t| &t.kind)
    }

    fn at(&self, kind: &TokenKind) -> bool {
        self.peek_kind() == Some(kind)
    }

    fn at_word(&self, word: &str) -> bool {
        matches!(self.peek_kind(), Some(TokenKind::Ident(w)) if w == word)
    }

    /// True when the current token may continue the expression or list
    /// before it: it exists and no line break comes before it, or we are
    /// inside brackets.
    fn continues(&self) -> bool {
        self.peek().is_some_and(|t| !t.newline_before || self.brackets > 0)
    }

    fn bump(&mut self) -> Option<&'t Token> {
        let tok = self.peek();
        if tok.is_some() {
            self.pos += 1;
        }
        tok
    }

    /// Consumes the current token if it is `kind` and returns its span.
    fn eat(&mut self, kind: &TokenKind) -> Option<Span> {
        if self.at(kind) {
            self.bump().map(|t| t.span)
        } else {
            None
        }
    }

    /// Consumes a `kind` token or fails with ``expected 'x' {context}``.
    fn expect(&mut self, kind: &TokenKind, context: &str) -> PResult<Span> {
        match self.eat(kind) {
            Some(span) => Ok(span),
            None => Err(self.error(&format!("{} {context}", kind.describe()))),
        }
    }

    /// Consumes the keyword `word` or fails.
    fn expect_word(&mut self, word: &str) -> PResult<Span> {
        if self.at_word(word) {
            if let Some(t) = self.bump() {
                return Ok(t.span);
            }
        }
        Err(self.error(&format!("`{word}`")))
    }

    /// ``expected {expected}, found {current token}`` at the current token.
    fn error(&self, expected: &str) -> Diagnostic {
        let found = match self.peek() {
            Some(Token { kind: TokenKind::Ident(w), .. }) if is_reserved(w) => format!("reserved word `{w}`"),
            Some(t) => t.kind.describe(),
            None => "end of input".to_string(),
        };
        diag!(SyntaxError, "expected {expected}, found {found}").at(self.span())
    }

    /// The current token's span; past the end, the point just after the
    /// last token (1:1 for empty input).
    fn span(&self) -> Span {
        match (self.peek(), self.tokens.last()) {
            (Some(t), _) => t.span,
            (None, Some(last)) => {
                let s = last.span;
                Span { col: s.col + s.end.saturating_sub(s.start), start: s.end, ..s }
            }
            (None, None) => Span { line: 1, col: 1, ..Span::default() },
        }
    }

    /// Runs `f` one nesting level deeper (and inside brackets if `bracket`).
    fn nested<T>(&mut self, bracket: bool, f: impl FnOnce(&mut Self) -> PResult<T>) -> PResult<T> {
        if self.nesting >= MAX_NESTING {
            return Err(too_deep(self.span()));
        }
        self.nesting += 1;
        self.brackets += u32::from(bracket);
        let result = f(self);
        self.nesting -= 1;
        self.brackets -= u32::from(bracket);
        result
    }
}

/// `graph<syms> name(params) -> (results) { statements; return names }`
fn graph_def(p: &mut Parser) -> PResult<GraphDef> {
    let span = p.expect_word("graph")?;
    let syms =
        if p.eat(&TokenKind::Lt).is_some() { comma_list(p, TokenKind::Gt, "symbol", sym_decl)? } else { Vec::new() };
    if let Some(s) = syms.get(MAX_SYMBOLS) {
        return Err(diag!(
            ResourceExceeded,
            "symbol `{}` is one more than the {MAX_SYMBOLS} symbols a graph may declare (tiny::graph::MAX_SYMBOLS)",
            s.name.name
        )
        .at(s.name.span));
    }
    check_unique(syms.iter().map(|s| &s.name), "symbol")?;
    let name = ident(p, "a graph name")?;
    p.expect(&TokenKind::LParen, "after the graph name")?;
    let params = comma_list(p, TokenKind::RParen, "parameter", tensor_decl)?;
    check_unique(params.iter().map(|t| &t.name), "parameter")?;
    p.expect(&TokenKind::Arrow, "after the parameter list")?;
    p.expect(&TokenKind::LParen, "to open the result list")?;
    if p.at(&TokenKind::RParen) {
        return Err(p.error("at least one result"));
    }
    let results = comma_list(p, TokenKind::RParen, "result", tensor_decl)?;
    check_unique(results.iter().map(|t| &t.name), "result")?;
    p.expect(&TokenKind::LBrace, "to open the graph body")?;
    let mut body = Vec::new();
    loop {
        while p.eat(&TokenKind::Semi).is_some() {}
        if p.at_word("return") {
            break;
        }
        if p.at(&TokenKind::RBrace) {
            return Err(p.error("a statement or `return` (every graph ends with `return`)"));
        }
        body.push(statement(p)?);
        end_of_statement(p)?;
    }
    let ret_span = p.expect_word("return")?;
    let mut ret = vec![ident(p, "a value name after `return`")?];
    while p.continues() && p.eat(&TokenKind::Comma).is_some() {
        ret.push(ident(p, "a value name after ','")?);
    }
    end_of_statement(p)?;
    while p.eat(&TokenKind::Semi).is_some() {}
    p.expect(&TokenKind::RBrace, "after `return` (it must be the last statement of a graph)")?;
    Ok(GraphDef { name, syms, params, results, body, ret, ret_span, span })
}

/// `SYM` or `SYM=default`, then optionally `padded`.
fn sym_decl(p: &mut Parser) -> PResult<SymDecl> {
    let name = ident(p, "a symbol name")?;
    let default = match p.eat(&TokenKind::Assign) {
        Some(_) => Some(size(p, "a default value (a non-negative integer)")?.0),
        None => None,
    };
    let padded = matches!(p.peek_kind(), Some(TokenKind::Ident(w)) if w == "padded");
    if padded {
        ident(p, "`padded`")?;
    }
    Ok(SymDecl { name, default, padded })
}

/// `name: dtype[dims]`
fn tensor_decl(p: &mut Parser) -> PResult<TensorDecl> {
    let name = ident(p, "a tensor name")?;
    p.expect(&TokenKind::Colon, "after the tensor name")?;
    let dtype_span = p.span();
    let dtype = match p.peek_kind() {
        Some(TokenKind::Ident(w)) => DType::parse(w),
        _ => None,
    };
    let Some(dtype) = dtype else {
        return Err(p.error("a dtype (f16, bf16, f32, i32 or bool)"));
    };
    p.bump();
    p.expect(&TokenKind::LBracket, "after the dtype (write `[]` for a scalar)")?;
    let shape = comma_list(p, TokenKind::RBracket, "dimension", |p| {
        if let Some(TokenKind::Ident(_)) = p.peek_kind() {
            return ident(p, "a dimension").map(DimExpr::Sym);
        }
        let (v, span) = size(p, "a dimension (a non-negative integer or a symbol)")?;
        Ok(DimExpr::Int(v, span))
    })?;
    Ok(TensorDecl { name, dtype, dtype_span, shape })
}

/// A non-negative integer literal that fits `i64`.
fn size(p: &mut Parser, expected: &str) -> PResult<(i64, Span)> {
    match p.peek() {
        Some(Token { kind: TokenKind::Int(v), span, .. }) => {
            let v =
                i64::try_from(*v).map_err(|_| diag!(SyntaxError, "integer {v} does not fit in 64 bits").at(*span))?;
            p.bump();
            Ok((v, *span))
        }
        _ => Err(p.error(expected)),
    }
}

/// `name = expr` or `(a, b) = call(...)`.
fn statement(p: &mut Parser) -> PResult<Stmt> {
    let destructure = p.eat(&TokenKind::LParen).is_some();
    let targets = if destructure {
        if p.at(&TokenKind::RParen) {
            return Err(p.error("at least one target name"));
        }
        let targets = comma_list(p, TokenKind::RParen, "target", |p| ident(p, "a target name"))?;
        check_unique(targets.iter(), "target")?;
        targets
    } else if let Some(TokenKind::Ident(_)) = p.peek_kind() {
        vec![ident(p, "a target name")?]
    } else {
        return Err(p.error("a statement (`name = …`, `(a, b) = …` or `return …`)"));
    };
    p.expect(&TokenKind::Assign, "after the assignment target")?;
    let value_span = p.span();
    let value = *expr(p)?;
    if destructure && !matches!(value, Expr::Call { .. }) {
        return Err(
            diag!(SyntaxError, "expected a call after `(…) =`: only calls return several values").at(value_span)
        );
    }
    Ok(Stmt { targets, destructure, value })
}

/// A statement ends at `;`, `}`, a line break or the end of input.
fn end_of_statement(p: &Parser) -> PResult<()> {
    match p.peek() {
        None => Ok(()),
        Some(t) if t.newline_before || matches!(t.kind, TokenKind::Semi | TokenKind::RBrace) => Ok(()),
        Some(_) => Err(p.error("';' or a line break after the statement")),
    }
}

/// A name that is not a reserved word.
fn ident(p: &mut Parser, expected: &str) -> PResult<Ident> {
    match p.peek() {
        Some(Token { kind: TokenKind::Ident(name), span, .. }) => {
            if is_reserved(name) {
                return Err(diag!(SyntaxError, "`{name}` is a reserved word and cannot be used as a name").at(*span));
            }
            p.bump();
            Ok(Ident { name: name.clone(), span: *span })
        }
        _ => Err(p.error(expected)),
    }
}

/// Items separated by commas up to `close`, the opening bracket already
/// consumed. Empty lists and a trailing comma are accepted.
fn comma_list<T>(
    p: &mut Parser,
    close: TokenKind,
    item_name: &str,
    mut item: impl FnMut(&mut Parser) -> PResult<T>,
) -> PResult<Vec<T>> {
    let mut items = Vec::new();
    loop {
        if p.eat(&close).is_some() {
            return Ok(items);
        }
        items.push(item(p)?);
        if p.eat(&close).is_some() {
            return Ok(items);
        }
        if p.eat(&TokenKind::Comma).is_none() {
            return Err(expected_separator(p, &close, item_name));
        }
    }
}

/// Fails at the second of two equal names.
fn check_unique<'a>(names: impl Iterator<Item = &'a Ident>, what: &str) -> PResult<()> {
    let mut seen: HashMap<&str, Span> = HashMap::new();
    for id in names {
        if let Some(first) = seen.insert(&id.name, id.span) {
            return Err(diag!(
                SyntaxError,
                "{what} `{}` is declared twice (first at {}:{})",
                id.name,
                first.line,
                first.col
            )
            .at(id.span));
        }
    }
    Ok(())
}

/// `expr := unary (binop unary)*` by precedence climbing: `* /` bind tighter
/// than `+ -`, which bind tighter than comparisons ([`BinOp::precedence`]);
/// `+ - * /` are left-associative and comparisons do not chain.
///
/// The recursive expression functions return boxes: the tree needs them
/// anyway, and small return values keep the (debug-build) stack frames of
/// deep nesting small.
fn expr(p: &mut Parser) -> PResult<Box<Expr>> {
    binary(p, 1)
}

/// Operators of precedence `min_prec` and up, with their operands.
///
/// Each operator of a chain is one nesting level: `x + x + x` parses in a
/// loop, but it builds a left-deep tree that every later walk (resolver,
/// lowering, printers) descends recursively, so the chain's length counts
/// towards [`MAX_NESTING`] like parentheses do.
fn binary(p: &mut Parser, min_prec: u8) -> PResult<Box<Expr>> {
    let base = p.nesting;
    let result = operator_chain(p, min_prec);
    p.nesting = base;
    result
}

/// The loop of [`binary`]; raises `p.nesting` by one per operator.
fn operator_chain(p: &mut Parser, min_prec: u8) -> PResult<Box<Expr>> {
    let mut lhs = unary(p)?;
    let mut compared = false;
    while let Some((op, span)) = binop(p, min_prec) {
        if op.precedence() == 1 && std::mem::replace(&mut compared, true) {
            return Err(chained_comparison(span));
        }
        if p.nesting >= MAX_NESTING {
            return Err(too_deep(span));
        }
        p.nesting += 1;
        let rhs = binary(p, op.precedence() + 1)?;
        lhs = Box::new(Expr::Binary { op, lhs, rhs, span });
    }
    Ok(lhs)
}

/// Consumes a binary operator of precedence `min_prec` or more if one
/// continues the expression.
fn binop(p: &mut Parser, min_prec: u8) -> Option<(BinOp, Span)> {
    let op = match p.peek_kind()? {
        TokenKind::Plus => BinOp::Add,
        TokenKind::Minus => BinOp::Sub,
        TokenKind::Star => BinOp::Mul,
        TokenKind::Slash => BinOp::Div,
        TokenKind::Lt => BinOp::Lt,
        TokenKind::Le => BinOp::Le,
        TokenKind::Gt => BinOp::Gt,
        TokenKind::Ge => BinOp::Ge,
        TokenKind::EqEq => BinOp::Eq,
        TokenKind::Ne => BinOp::Ne,
        _ => return None,
    };
    if op.precedence() < min_prec || !p.continues() {
        return None;
    }
    p.bump().map(|t| (op, t.span))
}

/// `unary := '-' number | '-' unary | atom`
fn unary(p: &mut Parser) -> PResult<Box<Expr>> {
    let minus = p.eat(&TokenKind::Minus);
    if let Some(literal) = number(p, minus) {
        return literal;
    }
    match minus {
        Some(minus) => p.nested(false, |p| Ok(Box::new(Expr::Neg(unary(p)?, minus)))),
        None => atom(p),
    }
}

/// The number literal at the cursor, negated and spanning the `-` when
/// `minus` is the span of a `-` before it; `None` when no number is next.
fn number(p: &mut Parser, minus: Option<Span>) -> Option<PResult<Box<Expr>>> {
    let tok = p.peek()?;
    let span = match minus {
        Some(m) => Span { end: tok.span.end, ..m },
        None => tok.span,
    };
    let literal = match tok.kind {
        TokenKind::Int(v) => {
            let v = if minus.is_some() { -i128::from(v) } else { i128::from(v) };
            match i64::try_from(v) {
                Ok(v) => Ok(Box::new(Expr::Int(v, span))),
                Err(_) => Err(diag!(SyntaxError, "integer {v} does not fit in 64 bits").at(span)),
            }
        }
        TokenKind::Float(v) => Ok(Box::new(Expr::Float(if minus.is_some() { -v } else { v }, span))),
        _ => return None,
    };
    p.bump();
    Some(literal)
}

/// Names, booleans, calls, `( expr )` and `[ list ]`.
fn atom(p: &mut Parser) -> PResult<Box<Expr>> {
    let Some(tok) = p.peek() else {
        return Err(p.error("an expression"));
    };
    match &tok.kind {
        TokenKind::Ident(_) => name_or_call(p),
        TokenKind::LParen => {
            p.bump();
            p.nested(true, |p| {
                let inner = expr(p)?;
                p.expect(&TokenKind::RParen, "to close '('")?;
                Ok(inner)
            })
        }
        TokenKind::LBracket => {
            p.bump();
            let items = p.nested(true, |p| comma_list(p, TokenKind::RBracket, "list element", |p| Ok(*expr(p)?)))?;
            Ok(Box::new(Expr::List(items, tok.span)))
        }
        _ => Err(p.error("an expression")),
    }
}

/// `true`, `false`, a name, or a call `name(...)`.
fn name_or_call(p: &mut Parser) -> PResult<Box<Expr>> {
    if let Some(Token { kind: TokenKind::Ident(w), span, .. }) = p.peek() {
        if w == "true" || w == "false" {
            p.bump();
            return Ok(Box::new(Expr::Bool(w == "true", *span)));
        }
    }
    let name = ident(p, "an expression")?;
    if p.at(&TokenKind::LParen) && p.continues() {
        p.bump();
        call(p, name)
    } else {
        Ok(Box::new(Expr::Name(name)))
    }
}

/// The arguments of `callee(`, its `(` already consumed.
fn call(p: &mut Parser, callee: Ident) -> PResult<Box<Expr>> {
    let mut args = Vec::new();
    let mut kwargs: Vec<(Ident, Expr)> = Vec::new();
    p.nested(true, |p| comma_list(p, TokenKind::RParen, "argument", |p| argument(p, &mut args, &mut kwargs)))?;
    check_unique(kwargs.iter().map(|(k, _)| k), "keyword argument")?;
    Ok(Box::new(Expr::Call { span: callee.span, callee, args, kwargs }))
}

/// One argument of a call: `expr` or `key=expr`; keywords come last.
fn argument(p: &mut Parser, args: &mut Vec<Expr>, kwargs: &mut Vec<(Ident, Expr)>) -> PResult<()> {
    let is_keyword =
        matches!(p.peek_kind(), Some(TokenKind::Ident(_))) && p.peek_kind_at(1) == Some(&TokenKind::Assign);
    if is_keyword {
        let key = ident(p, "a keyword")?;
        p.bump(); // `=`
        kwargs.push((key, *expr(p)?));
    } else if let Some((key, _)) = kwargs.first() {
        return Err(positional_after_keyword(key, p.span()));
    } else {
        args.push(*expr(p)?);
    }
    Ok(())
}

// Errors raised inside the recursive expression functions are built here, so
// that their formatting does not enlarge every recursive stack frame.

fn too_deep(span: Span) -> Diagnostic {
    diag!(
        SyntaxError,
        "expression nested too deeply (the limit is {MAX_NESTING} levels; each operator of a chain is one level): \
         split it into statements"
    )
    .at(span)
}

fn expected_separator(p: &Parser, close: &TokenKind, item_name: &str) -> Diagnostic {
    p.error(&format!("',' or {} after {item_name}", close.describe()))
}

fn positional_after_keyword(key: &Ident, span: Span) -> Diagnostic {
    diag!(SyntaxError, "positional argument after keyword argument `{}`; keyword arguments come last", key.name)
        .at(span)
}

fn chained_comparison(span: Span) -> Diagnostic {
    diag!(SyntaxError, "comparisons cannot be chained; add parentheses").at(span)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::diag::ErrorName;
    use expect_test::{expect, Expect};
    use proptest::prelude::*;

    /// The example of `DSL.md`, verbatim.
    pub(crate) const DSL_MD_GEMM: &str = "\
graph<M=128, N=256, K=64> gemm_bias_relu(x: f16[M, K], w: f16[K, N], bias: f16[N]) -> (y: f16[M, N]) {
    acc = matmul(x, w)
    y = relu(acc + bias)
    return y
}
";

    /// `spec/004`, DSL構文: the code block holds two programs (each has a
    /// `main`); this is the first, verbatim.
    pub(crate) const SPEC_004_SUBGRAPH: &str = "\
// サブグラフ定義（動的Shape変数B, Nにデフォルト値を指定）
graph<B=1, N=1> relu(x: f32[B, N]) -> (y: f32[B, N]) {
    zero = 0.0
    result = max(x, zero)
    return result
}

// メイングラフからサブグラフを呼び出し
graph<B=1, D=1> main(input: f32[B, D]) -> (output: f32[B, D]) {
    result = relu(input)
    return result
}
";

    /// `spec/004`, DSL構文: the second program of the code block, verbatim.
    pub(crate) const SPEC_004_MULTI_OUTPUT: &str = "\
// 複数出力サブグラフのタプル分解
graph<N=1> multi_output(x: f32[N]) -> (a: f32[N], b: f32[N]) {
    r1 = x + 1.0
    r2 = x * 2.0
    return r1, r2
}

graph main(input: f32[10]) -> (out1: f32[10], out2: f32[10]) {
    (a, b) = multi_output(input)
    return a, b
}
";

    /// Every call form of `DSL.md`'s operation table and every operator,
    /// with `;`, comments and a call split over lines.
    pub(crate) const ALL_FORMS: &str = "\
graph<B=2, H=4, M=16, N=16, D=8, C=3, G> everything(x: f32[B, C, M, N], w: fp32[C, C, 3, 3], b: f32[C],
        q: bf16[B, H, M, D], k: bf16[B, H, N, D], v: bf16[B, H, N, D], m: fp16[B, H, M, N],
        s: f32[], i: i32[4], c: bool[4],) -> (y: f32[B, C, M, N], a: bf16[B, H, M, D]) {
    // elementwise
    e1 = relu(x) + gelu(x) - gelu_tanh(x) * silu(x) / sigmoid(x)
    e2 = tanh(exp(exp2(log(log2(sqrt(rsqrt(recip(abs(neg(erf(x)))))))))))
    e3 = where(x > 0.0, maximum(x, s), minimum(x, -s)); e4 = cast(i, f16); e5 = cast(c, bool)
    c1 = x <= s; c2 = (x < s) == (x >= s); c3 = x != 1e-5; c4 = -(1) * -x - --2.
    // reduce
    r1 = sum(x, axes=[2, 3], keepdim=false)
    r2 = max(x, axes=[1], acc=f32)
    r3 = min(x, axes=[1]); r4 = mean(x, axes=[-1], keepdim=true)
    // movement
    m1 = reshape(x, [B, C, M * N])
    m2 = permute(x, [0, 2, 3, 1])
    m3 = transpose(x, 2, 3)
    m4 = expand(unsqueeze(squeeze(r4, -1), 0), [B, C, M, N])
    m5 = pad(x, [[0, 0], [0, 0], [1, 1], [1, 1]], value=0)
    m6 = shrink(x, [[0, B], [0, C], [1, 15], [1, 15]])
    m7 = slice(x, [[0, B, 1], [0, C, 1], [0, M, 2], [0, N, 2]])
    m8 = flip(x, axes=[2])
    // contraction and neural
    mm = matmul(q, permute(k, [0, 1, 3, 2]))
    y = conv2d(x, w, bias=b,
               stride=[1, 1], pad=[1, 1, 1, 1], dilation=[1, 1], groups=1)
    p1 = maxpool2d(x, kernel=[2, 2], stride=[2, 2], pad=[0, 0], dilation=[1, 1])
    p2 = avgpool2d(x, kernel=[3, 3], stride=[1, 1], pad=[1, 1], count_include_pad=false)
    sm = softmax(x, axis=-1) + log_softmax(x, axis=-1)
    ln = layernorm(x, b, b, axis=-1, eps=1e-5)
    a = attention(q, k, v, mask=m, causal=false, scale=0.35355339059327373)
    return y, a;
}
";

    pub(crate) const EXAMPLES: [&str; 4] = [DSL_MD_GEMM, SPEC_004_SUBGRAPH, SPEC_004_MULTI_OUTPUT, ALL_FORMS];

    /// The first statement's value of the only graph of `src` as an
    /// s-expression: `(+ a (* b c))`, `(neg x)`, `f(a; k=b)`, `[a b]`.
    fn value(src: &str) -> String {
        let program = parse(&format!("graph g() -> (y: f32[]) {{\n    y = {src}\n    return y\n}}"))
            .unwrap_or_else(|e| panic!("{src}: {e}"));
        sexpr(&program.graphs[0].body[0].value)
    }

    fn sexpr(e: &Expr) -> String {
        match e {
            Expr::Int(v, _) => format!("{v}"),
            Expr::Float(v, _) => format!("{v:?}"),
            Expr::Bool(b, _) => format!("{b}"),
            Expr::Name(id) => id.name.clone(),
            Expr::Neg(x, _) => format!("(neg {})", sexpr(x)),
            Expr::Binary { op, lhs, rhs, .. } => format!("({} {} {})", op.symbol(), sexpr(lhs), sexpr(rhs)),
            Expr::Call { callee, args, kwargs, .. } => {
                let args: Vec<String> = args.iter().map(sexpr).collect();
                let kwargs: Vec<String> = kwargs.iter().map(|(k, v)| format!("{}={}", k.name, sexpr(v))).collect();
                format!("{}({}; {})", callee.name, args.join(" "), kwargs.join(" "))
            }
            Expr::List(items, _) => format!("[{}]", items.iter().map(sexpr).collect::<Vec<_>>().join(" ")),
        }
    }

    /// Parses `src`, which must fail; compares `line:col: error[Name]: message`.
    fn check_error(src: &str, expected: Expect) {
        match parse(src) {
            Ok(p) => panic!("parsed, expected an error: {p:?}"),
            Err(e) => expected.assert_eq(&e.to_string()),
        }
    }

    /// Wraps statements in a graph whose body starts on line 2, column 5.
    fn in_graph(body: &str) -> String {
        format!("graph g(x: f32[4], a: f32[4], b: f32[4]) -> (y: f32[4]) {{\n    {body}\n}}\n")
    }

    #[test]
    fn examples_parse() {
        for src in EXAMPLES {
            parse(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
        }
    }

    #[test]
    fn dsl_md_example_tree() {
        let p = parse(DSL_MD_GEMM).unwrap();
        let g = &p.graphs[0];
        assert_eq!(g.name.name, "gemm_bias_relu");
        let syms: Vec<_> = g.syms.iter().map(|s| (s.name.name.as_str(), s.default)).collect();
        assert_eq!(syms, [("M", Some(128)), ("N", Some(256)), ("K", Some(64))]);
        assert_eq!(g.params.len(), 3);
        assert_eq!(g.params[0].dtype, DType::F16);
        assert!(matches!(&g.params[2].shape[..], [DimExpr::Sym(id)] if id.name == "N"));
        assert_eq!(g.results[0].name.name, "y");
        assert_eq!(sexpr(&g.body[0].value), "matmul(x w; )");
        assert_eq!(sexpr(&g.body[1].value), "relu((+ acc bias); )");
        assert_eq!(g.ret[0].name, "y");
        assert_eq!((g.span.line, g.span.col), (1, 1));
        assert_eq!((g.ret_span.line, g.ret_span.col), (4, 5));
    }

    #[test]
    fn spec_004_examples_trees() {
        let p = parse(SPEC_004_MULTI_OUTPUT).unwrap();
        let main = &p.graphs[1];
        assert_eq!(main.syms, []);
        assert!(main.body[0].destructure);
        let targets: Vec<_> = main.body[0].targets.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(targets, ["a", "b"]);
        let ret: Vec<_> = main.ret.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(ret, ["a", "b"]);
        assert_eq!(sexpr(&p.graphs[0].body[0].value), "(+ x 1.0)");
        let p = parse(SPEC_004_SUBGRAPH).unwrap();
        assert_eq!(p.graphs[0].body[0].value, Expr::Float(0.0, p.graphs[0].body[0].value.span()));
    }

    #[test]
    fn the_spec_004_code_block_as_one_file_defines_main_twice() {
        let whole = format!("{SPEC_004_SUBGRAPH}\n{SPEC_004_MULTI_OUTPUT}");
        check_error(&whole, expect!["21:7: error[SyntaxError]: graph `main` is declared twice (first at 9:17)"]);
    }

    #[test]
    fn symbols_may_be_declared_padded() {
        let p =
            parse("graph<B padded, S=16 padded, H> main(x: f32[B, S, H]) -> (y: f32[B, S, H]) { return x }").unwrap();
        let syms: Vec<_> = p.graphs[0].syms.iter().map(|s| (s.name.name.as_str(), s.default, s.padded)).collect();
        assert_eq!(syms, [("B", None, true), ("S", Some(16), true), ("H", None, false)]);
        // It reaches Tiny IR, its JSON and `tgc check`'s signature.
        let g = crate::pipeline::load(
            "graph<B padded, S=16 padded> main(x: f32[B, S]) -> (y: f32[B, S]) { return x }",
            crate::pipeline::Format::Dsl,
            None,
        )
        .unwrap()
        .graph;
        assert_eq!(g.symbols.iter().map(|s| s.padded).collect::<Vec<_>>(), [true, true]);
        let json = crate::tiny::json::to_json(&g);
        assert!(json.contains(r#"{"name":"S","default":16,"padded":true}"#), "{json}");
        assert_eq!(crate::tiny::json::load_json(&json).unwrap().symbols, g.symbols);
        assert!(crate::pipeline::signature(&g).starts_with("ok: graph main<B padded, S=16 padded>"));
    }

    #[test]
    fn precedence_and_associativity() {
        assert_eq!(value("a + b * c"), "(+ a (* b c))");
        assert_eq!(value("a - b - c"), "(- (- a b) c)");
        assert_eq!(value("a - (b - c)"), "(- a (- b c))");
        assert_eq!(value("a / b * c"), "(* (/ a b) c)");
        assert_eq!(value("-a * b"), "(* (neg a) b)");
        assert_eq!(value("-(a + b)"), "(neg (+ a b))");
        assert_eq!(value("a + b < c * d"), "(< (+ a b) (* c d))");
        assert_eq!(value("(a < b) == (c >= d)"), "(== (< a b) (>= c d))");
        assert_eq!(value("a != b"), "(!= a b)");
        assert_eq!(value("a <= -b"), "(<= a (neg b))");
        assert_eq!(value("--a"), "(neg (neg a))");
    }

    #[test]
    fn minus_before_a_number_is_part_of_the_literal() {
        assert_eq!(value("-1"), "-1");
        assert_eq!(value("- 2.5"), "-2.5");
        assert_eq!(value("-(1)"), "(neg 1)");
        assert_eq!(value("x - 1"), "(- x 1)");
        assert_eq!(value("x--1"), "(- x -1)");
        assert_eq!(value("-2 * x"), "(* -2 x)");
        assert_eq!(value("--1"), "(neg -1)");
        assert_eq!(value("-9223372036854775808"), "-9223372036854775808");
        assert_eq!(value("9223372036854775807"), "9223372036854775807");
    }

    #[test]
    fn literals_calls_and_lists() {
        assert_eq!(value("true"), "true");
        assert_eq!(value("1e-5"), "1e-5");
        assert_eq!(value("2."), "2.0");
        assert_eq!(value("f()"), "f(; )");
        assert_eq!(value("f(x, axis=-1)"), "f(x; axis=-1)");
        assert_eq!(value("f(x, k=[1, 2],)"), "f(x; k=[1 2])");
        assert_eq!(value("[[0, 0], [1, 1]]"), "[[0 0] [1 1]]");
        assert_eq!(value("[]"), "[]");
        assert_eq!(value("cast(x, f16) == g(h(y))"), "(== cast(x f16; ) g(h(y; ); ))");
    }

    #[test]
    fn spans_point_at_the_starting_token() {
        let p = parse(&in_graph("y = f(a) + -1\n    return y")).unwrap();
        let Expr::Binary { lhs, rhs, span, .. } = &p.graphs[0].body[0].value else { panic!() };
        assert_eq!((span.line, span.col), (2, 14));
        assert_eq!((lhs.span().col, lhs.span().start, lhs.span().end), (9, 66, 67));
        assert_eq!((rhs.span().col, rhs.span().start, rhs.span().end), (16, 73, 75));
        assert_eq!(p.graphs[0].params[1].dtype_span.col, 23);
    }

    #[test]
    fn a_line_break_ends_a_statement() {
        // `-b` on the next line is not a continuation of `a = x`.
        check_error(
            "graph g(x: f32[1]) -> (y: f32[1]) {\n    a = x\n     -b\n    return a\n}",
            expect![
                "3:6: error[SyntaxError]: expected a statement (`name = …`, `(a, b) = …` or `return …`), found '-'"
            ],
        );
        let p = parse(&in_graph("a = x\n    b = -a\n    return b")).unwrap();
        assert_eq!(p.graphs[0].body.len(), 2);
        // A call's `(` on the next line is a new statement, too.
        let p = parse(&in_graph("a = x\n    (c, d) = f(a)\n    return c")).unwrap();
        assert_eq!(sexpr(&p.graphs[0].body[0].value), "x");
        assert!(p.graphs[0].body[1].destructure);
        // `return a` then `, b` on the next line is not `return a, b`.
        check_error(&in_graph("return a\n    , b"), expect!["3:5: error[SyntaxError]: expected '}' after `return` (it must be the last statement of a graph), found ','"]);
    }

    #[test]
    fn line_breaks_inside_brackets_and_after_operators_are_ignored() {
        assert_eq!(value("(x\n - b)"), "(- x b)");
        assert_eq!(value("f(x,\n  -b\n)"), "f(x (neg b); )");
        assert_eq!(value("x +\n b"), "(+ x b)");
        assert_eq!(value("[1,\n2]"), "[1 2]");
    }

    #[test]
    fn semicolons_separate_statements() {
        let p = parse("graph main(x: f32[1]) -> (y: f32[1]) { a = x; ; b = a * 2; return b; ; }graph h() -> (z: i32[]) { return z }")
            .unwrap();
        assert_eq!(p.graphs.len(), 2);
        assert_eq!(p.graphs[0].body.len(), 2);
    }

    #[test]
    fn tokens_without_line_information_need_semicolons() {
        // What `kernel!` produces when it cannot see line breaks.
        let flatten = |src: &str| -> Vec<Token> {
            let mut toks = lex(src).unwrap();
            for (i, t) in toks.iter_mut().enumerate() {
                t.newline_before = false;
                t.span.token = Some(i as u32);
            }
            toks
        };
        let p =
            parse_tokens(&flatten("graph main(x: f32[1]) -> (y: f32[1]) {\n a = x;\n b = -a;\n return b\n}")).unwrap();
        assert_eq!(p.graphs[0].body[1].targets[0].span.token, Some(24));
        let err = parse_tokens(&flatten("graph main(x: f32[1]) -> (y: f32[1]) {\n a = x\n b = -a;\n return b\n}"))
            .unwrap_err();
        assert_eq!(err.span.and_then(|s| s.token), Some(23));
        assert_eq!(err.message, "expected ';' or a line break after the statement, found `b`");
    }

    #[test]
    fn syntax_errors_name_what_was_expected() {
        let cases: Vec<(String, Expect)> = vec![
            ("".into(), expect!["1:1: error[SyntaxError]: expected `graph`, found end of input"]),
            ("x = 1".into(), expect!["1:1: error[SyntaxError]: expected `graph`, found `x`"]),
            ("graph main(x: f32[1]) -> (y: f32[1]) {".into(), expect!["1:39: error[SyntaxError]: expected a statement (`name = …`, `(a, b) = …` or `return …`), found end of input"]),
            ("graph main(x: f32[1]) -> (y: f32[1]) { y = ".into(), expect!["1:43: error[SyntaxError]: expected an expression, found end of input"]),
            ("graph return(x: f32[1]) -> (y: f32[1]) { return x }".into(), expect!["1:7: error[SyntaxError]: `return` is a reserved word and cannot be used as a name"]),
            ("graph main[x: f32[1]) -> (y: f32[1]) { return x }".into(), expect!["1:11: error[SyntaxError]: expected '(' after the graph name, found '['"]),
            ("graph main(x: f32[1]) (y: f32[1]) { return x }".into(), expect!["1:23: error[SyntaxError]: expected '->' after the parameter list, found '('"]),
            ("graph main(x: f32[1]) -> y: f32[1] { return x }".into(), expect!["1:26: error[SyntaxError]: expected '(' to open the result list, found `y`"]),
            ("graph main(x: f32[1]) -> () { return x }".into(), expect!["1:27: error[SyntaxError]: expected at least one result, found ')'"]),
            ("graph main(x: f32[1]) -> (y: f32[1]) return x }".into(), expect!["1:38: error[SyntaxError]: expected '{' to open the graph body, found reserved word `return`"]),
            ("graph main(x f32[1]) -> (y: f32[1]) { return x }".into(), expect!["1:14: error[SyntaxError]: expected ':' after the tensor name, found `f32`"]),
            ("graph main(x: f64[1]) -> (y: f32[1]) { return x }".into(), expect!["1:15: error[SyntaxError]: expected a dtype (f16, bf16, f32, i32 or bool), found `f64`"]),
            ("graph main(x: f32) -> (y: f32[1]) { return x }".into(), expect!["1:18: error[SyntaxError]: expected '[' after the dtype (write `[]` for a scalar), found ')'"]),
            ("graph main(x: f32[-1]) -> (y: f32[1]) { return x }".into(), expect!["1:19: error[SyntaxError]: expected a dimension (a non-negative integer or a symbol), found '-'"]),
            ("graph main(x: f32[1 2]) -> (y: f32[1]) { return x }".into(), expect!["1:21: error[SyntaxError]: expected ',' or ']' after dimension, found integer 2"]),
            ("graph main(x: f32[9223372036854775808]) -> (y: f32[1]) { return x }".into(), expect!["1:19: error[SyntaxError]: integer 9223372036854775808 does not fit in 64 bits"]),
            ("graph<N=x> main(x: f32[N]) -> (y: f32[N]) { return x }".into(), expect!["1:9: error[SyntaxError]: expected a default value (a non-negative integer), found `x`"]),
            ("graph<N main(x: f32[N]) -> (y: f32[N]) { return x }".into(), expect!["1:9: error[SyntaxError]: expected ',' or '>' after symbol, found `main`"]),
            ("graph<N padded padded> main(x: f32[N]) -> (y: f32[N]) { return x }".into(), expect!["1:16: error[SyntaxError]: expected ',' or '>' after symbol, found `padded`"]),
            ("graph<N, N=2> main(x: f32[N]) -> (y: f32[N]) { return x }".into(), expect!["1:10: error[SyntaxError]: symbol `N` is declared twice (first at 1:7)"]),
            ("graph main(x: f32[1], x: f32[2]) -> (y: f32[1]) { return x }".into(), expect!["1:23: error[SyntaxError]: parameter `x` is declared twice (first at 1:12)"]),
            ("graph main(x: f32[1]) -> (y: f32[1], y: f32[1]) { return x, x }".into(), expect!["1:38: error[SyntaxError]: result `y` is declared twice (first at 1:27)"]),
            ("graph main(x: f32[1]) -> (y: f32[1]) { return x }\ngraph main(x: f32[1]) -> (y: f32[1]) { return x }".into(), expect!["2:7: error[SyntaxError]: graph `main` is declared twice (first at 1:7)"]),
            ("graph main(fused: f32[1]) -> (y: f32[1]) { return x }".into(), expect!["1:12: error[SyntaxError]: `fused` is a reserved word and cannot be used as a name"]),
            (in_graph("y = x"), expect!["3:1: error[SyntaxError]: expected a statement or `return` (every graph ends with `return`), found '}'"]),
            (in_graph("return x\n    y = x"), expect!["3:5: error[SyntaxError]: expected '}' after `return` (it must be the last statement of a graph), found `y`"]),
            (in_graph("return x y"), expect!["2:14: error[SyntaxError]: expected ';' or a line break after the statement, found `y`"]),
            (in_graph("return x + a"), expect!["2:14: error[SyntaxError]: expected ';' or a line break after the statement, found '+'"]),
            (in_graph("return x,"), expect!["3:1: error[SyntaxError]: expected a value name after ',', found '}'"]),
            (in_graph("return"), expect!["3:1: error[SyntaxError]: expected a value name after `return`, found '}'"]),
            (in_graph("1 = x"), expect!["2:5: error[SyntaxError]: expected a statement (`name = …`, `(a, b) = …` or `return …`), found integer 1"]),
            (in_graph("y x"), expect!["2:7: error[SyntaxError]: expected '=' after the assignment target, found `x`"]),
            (in_graph("y == x"), expect!["2:7: error[SyntaxError]: expected '=' after the assignment target, found '=='"]),
            (in_graph("y = a b = x"), expect!["2:11: error[SyntaxError]: expected ';' or a line break after the statement, found `b`"]),
            (in_graph("y = a (c, d) = f(x)"), expect!["2:18: error[SyntaxError]: expected ';' or a line break after the statement, found '='"]),
            (in_graph("y = f(a)(b)"), expect!["2:13: error[SyntaxError]: expected ';' or a line break after the statement, found '('"]),
            (in_graph("y = f(a, b}"), expect!["2:15: error[SyntaxError]: expected ',' or ')' after argument, found '}'"]),
            (in_graph("y = (a + b"), expect!["3:1: error[SyntaxError]: expected ')' to close '(', found '}'"]),
            (in_graph("y = [a, b"), expect!["3:1: error[SyntaxError]: expected ',' or ']' after list element, found '}'"]),
            (in_graph("y = f(a,, b)"), expect!["2:13: error[SyntaxError]: expected an expression, found ','"]),
            (in_graph("y = )"), expect!["2:9: error[SyntaxError]: expected an expression, found ')'"]),
            (in_graph("y = a +"), expect!["3:1: error[SyntaxError]: expected an expression, found '}'"]),
            (in_graph("y = f(x, axis=1, a)"), expect!["2:22: error[SyntaxError]: positional argument after keyword argument `axis`; keyword arguments come last"]),
            (in_graph("y = f(x, axis=1, axis=2)"), expect!["2:22: error[SyntaxError]: keyword argument `axis` is declared twice (first at 2:14)"]),
            (in_graph("y = f(x, graph=1)"), expect!["2:14: error[SyntaxError]: `graph` is a reserved word and cannot be used as a name"]),
            (in_graph("(a, b) = x + 1"), expect!["2:14: error[SyntaxError]: expected a call after `(…) =`: only calls return several values"]),
            (in_graph("() = f(x)"), expect!["2:6: error[SyntaxError]: expected at least one target name, found ')'"]),
            (in_graph("(c, c) = f(x)"), expect!["2:9: error[SyntaxError]: target `c` is declared twice (first at 2:6)"]),
            (in_graph("y = a < b < x"), expect!["2:15: error[SyntaxError]: comparisons cannot be chained; add parentheses"]),
            (in_graph("true = x"), expect!["2:5: error[SyntaxError]: `true` is a reserved word and cannot be used as a name"]),
            (in_graph("y = fused_reduce(x)"), expect!["2:9: error[SyntaxError]: `fused_reduce` is a reserved word and cannot be used as a name"]),
            (in_graph("y = 9223372036854775808"), expect!["2:9: error[SyntaxError]: integer 9223372036854775808 does not fit in 64 bits"]),
            (in_graph("y = -9223372036854775809"), expect!["2:9: error[SyntaxError]: integer -9223372036854775809 does not fit in 64 bits"]),
            (in_graph("y = x # 1"), expect!["2:11: error[SyntaxError]: unexpected character '#'"]),
        ];
        for (src, expected) in cases {
            let err = parse(&src).unwrap_err();
            assert_eq!(err.name, ErrorName::SyntaxError);
            expected.assert_eq(&err.to_string());
        }
    }

    #[test]
    fn nesting_is_capped() {
        let forms = [("(", ")"), ("[", "]"), ("f(", ")"), ("-", ""), ("-(", ")")];
        let deep = |open: &str, close: &str, n: usize| {
            in_graph(&format!("y = {}x{}\n    return y", open.repeat(n), close.repeat(n)))
        };
        for (open, close) in forms {
            let levels = if open == "-(" { 64 } else { 128 };
            parse(&deep(open, close, levels)).unwrap_or_else(|e| panic!("{open}: {e}"));
            for n in [levels + 1, 100_000] {
                let err = parse(&deep(open, close, n)).unwrap_err();
                assert_eq!(err.message, TOO_DEEP);
            }
        }
    }

    const TOO_DEEP: &str = "expression nested too deeply (the limit is 128 levels; each operator of a chain is one \
                            level): split it into statements";

    /// A left-associative chain parses in a loop but builds a tree as deep
    /// as it is long, which the resolver and printers walk recursively.
    #[test]
    fn operator_chains_count_towards_the_nesting_cap() {
        let chain = |op: &str, n: usize| in_graph(&format!("y = x{}\n    return y", format!(" {op} x").repeat(n)));
        for op in ["+", "-", "*", "/"] {
            parse(&chain(op, 128)).unwrap_or_else(|e| panic!("{op}: {e}"));
            for n in [129, 15_000] {
                let err = parse(&chain(op, n)).unwrap_err();
                assert_eq!(err.message, TOO_DEEP, "{op} × {n}");
                let at = err.span.unwrap();
                assert_eq!((at.line, at.col), (2, 7 + 4 * 129), "{op} × {n}: at the 129th operator");
            }
        }
        // Parentheses and operators share the budget.
        let mixed = |n: usize| in_graph(&format!("y = {}x{}\n    return y", "(x + ".repeat(n), ")".repeat(n)));
        parse(&mixed(64)).unwrap();
        assert_eq!(parse(&mixed(65)).unwrap_err().message, TOO_DEEP);
    }

    /// Pieces of source text for token soups: every token kind, line
    /// breaks, and a graph header so soups reach statement parsing.
    const SOUP: [&str; 40] = [
        "graph main(x: f32[N]) -> (y: f32[]) {",
        "graph",
        "<",
        "N=1",
        ">",
        "main",
        "(",
        ")",
        "[",
        "]",
        "{",
        "}",
        "x",
        "y",
        ": f32",
        "->",
        "=",
        "==",
        "!=",
        "<=",
        ">=",
        ",",
        ";",
        "+",
        "-",
        "*",
        "/",
        "1",
        "2.5",
        "1e-5",
        "true",
        "return",
        "fused",
        "\n",
        " ",
        "f(",
        "axis=",
        "(a, b) =",
        "// c\n",
        "99999999999999999999",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn arbitrary_text_never_panics(src in any::<String>()) {
            let _ = parse(&src);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse(&String::from_utf8_lossy(&bytes));
        }

        #[test]
        fn token_soups_never_panic(pieces in proptest::collection::vec(proptest::sample::select(&SOUP[..]), 0..80)) {
            let _ = parse(&pieces.join(" "));
            let _ = parse(&pieces.concat());
        }
    }
}

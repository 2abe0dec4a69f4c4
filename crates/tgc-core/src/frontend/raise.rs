//! Raising: Frontend IR ([`ir`]) → syntax tree ([`ast`]), the inverse of
//! [`super::resolve`]. With [`super::decompile`] it prints a program that
//! did not come from text (an ONNX import) in the graph language.
//!
//! Guarantees:
//! - `resolve(parse(decompile(raise(p))))` is `p` up to spans, the order
//!   of value ids and the names of temporaries ([`same_program`]);
//!   [`to_source`] checks it on every program it prints;
//! - each statement becomes one line, its op the builtin call (or the
//!   operator, `a + b`, `-x`) whose keyword arguments `resolve` reads back
//!   to the same attributes; an attribute at `resolve`'s default is left
//!   out (`stride` of a convolution at 1, of a pool at its kernel; `pad` at
//!   0; `axis=-1` of `softmax`; `eps=1e-5`);
//! - a temporary (a value without a name, `%7` in the `frontend` dump) is
//!   named `t7` (`t7_2`, … when taken); a value whose name a later
//!   statement takes again while it is still used is kept reachable by an
//!   alias line `x_2 = x` before that statement (an alias makes no
//!   statement of the Frontend IR);
//! - a non-finite literal operand is written as the literal division that
//!   `resolve` folds to it (`1.0 / 0.0`, `-1.0 / 0.0`, `0.0 / 0.0`).
//!
//! Errors (`Unsupported`, at the statement's or the declared tensor's
//! span) for what the graph language cannot spell: a declared size that
//! is neither an integer nor a symbol (`2*N` as a result size), a
//! non-finite attribute (`clamp(x, min=-inf)`), a dilated average pool,
//! arithmetic of two literals (which `resolve` folds), and an op whose
//! attributes no call makes (a `cummean`).

use std::collections::{HashMap, HashSet};

use crate::diag;
use crate::diag::{DResult, Span};
use crate::frontend::ast::{self, BinOp, DimExpr, Expr, Ident};
use crate::frontend::ir::*;
use crate::sym::{Atom, Dim};
use crate::DType;

/// The syntax tree of `p`: one graph definition per graph, in order.
///
/// Errors: see the module doc.
pub fn raise(p: &FProgram) -> DResult<ast::Program> {
    let graphs = p.graphs.iter().map(|g| Raiser::new(p, g).graph()).collect::<DResult<_>>()?;
    Ok(ast::Program { graphs })
}

/// `p` as graph-language text ([`raise`], then [`super::decompile::decompile`]),
/// checked to read back as `p` ([`same_program`]).
///
/// Errors: those of [`raise`]; `Internal` when the text does not read back
/// as `p` (a bug of this module or of the text form).
pub fn to_source(p: &FProgram) -> DResult<String> {
    let text = super::decompile::decompile(&raise(p)?);
    let back = super::parser::parse(&text)
        .and_then(|ast| super::resolve::resolve(&ast))
        .map_err(|d| diag!(Internal, "the printed program does not read back: {}", d.render("(printed)")))?;
    if !same_program(p, &back) {
        return Err(diag!(Internal, "the printed program reads back as another program"));
    }
    Ok(text)
}

/// Whether `b` is `a` up to spans, the order of value ids (parameters
/// first, then each statement's results in program order) and the names of
/// the values `a` leaves unnamed. Floats compare by their printed form, so
/// a NaN literal equals itself.
pub fn same_program(a: &FProgram, b: &FProgram) -> bool {
    a.graphs.len() == b.graphs.len()
        && a.graphs.iter().zip(&b.graphs).all(|(x, y)| {
            let (x, mut y) = (canonical(x), canonical(y));
            if x.values.len() != y.values.len() {
                return false;
            }
            for (vx, vy) in x.values.iter().zip(&mut y.values) {
                if vx.name.is_none() {
                    vy.name = None;
                }
            }
            format!("{x:?}") == format!("{y:?}")
        })
}

/// `g` without spans, its values numbered parameters first, then each
/// statement's results in order (values no statement defines last).
fn canonical(g: &FGraph) -> FGraph {
    let n = g.values.len();
    let mut order: Vec<usize> = (0..g.params.len().min(n)).collect();
    order.extend(g.body.iter().flat_map(|st| st.results.iter().map(|v| v.0 as usize)).filter(|&v| v < n));
    let mut seen = vec![false; n];
    order.retain(|&v| !std::mem::replace(&mut seen[v], true));
    order.extend((0..n).filter(|&v| !seen[v]));
    let mut new_id = vec![0u32; n];
    for (k, &v) in order.iter().enumerate() {
        new_id[v] = k as u32;
    }
    let id = |v: &ValueId| ValueId(new_id.get(v.0 as usize).copied().unwrap_or(u32::MAX));
    let operand = |o: &Operand| match o {
        Operand::Value(v) => Operand::Value(id(v)),
        Operand::Lit(l) => Operand::Lit(Literal { span: Span::default(), ..*l }),
    };
    let tensor = |t: &FTensor| FTensor { span: Span::default(), ..t.clone() };
    FGraph {
        name: g.name.clone(),
        span: Span::default(),
        syms: g.syms.clone(),
        padded: g.padded.clone(),
        params: g.params.iter().map(tensor).collect(),
        results: g.results.iter().map(tensor).collect(),
        values: order.iter().map(|&v| FValue { name: g.values[v].name.clone(), span: Span::default() }).collect(),
        body: g
            .body
            .iter()
            .map(|st| FStmt {
                results: st.results.iter().map(id).collect(),
                op: st.op.clone(),
                args: st.args.iter().map(operand).collect(),
                arg_spans: vec![Span::default(); st.arg_spans.len()],
                span: Span::default(),
            })
            .collect(),
        ret: g.ret.iter().map(|(o, _)| (operand(o), Span::default())).collect(),
    }
}

/// The state of raising one graph.
struct Raiser<'p> {
    program: &'p FProgram,
    g: &'p FGraph,
    /// Every name in use or reserved for a value of the graph.
    taken: HashSet<String>,
    /// The value each name refers to at the current line.
    bound: HashMap<String, ValueId>,
    /// The name each value is reachable by at the current line.
    reach: Vec<Option<String>>,
    /// The last statement reading each value (`body.len()` for `return`).
    last_use: Vec<Option<usize>>,
    body: Vec<ast::Stmt>,
}

impl<'p> Raiser<'p> {
    fn new(program: &'p FProgram, g: &'p FGraph) -> Raiser<'p> {
        let mut last_use = vec![None; g.values.len()];
        let uses = g.body.iter().enumerate().flat_map(|(k, st)| st.args.iter().map(move |a| (k, a)));
        for (k, a) in uses.chain(g.ret.iter().map(|(o, _)| (g.body.len(), o))) {
            if let Some(slot) = value_of(a).and_then(|v| last_use.get_mut(v.0 as usize)) {
                *slot = Some(k);
            }
        }
        let mut taken: HashSet<String> = g.values.iter().filter_map(|v| v.name.clone()).collect();
        taken.extend(g.syms.iter().map(|(s, _)| s.clone()));
        taken.extend(g.params.iter().chain(&g.results).map(|t| t.name.clone()));
        Raiser {
            program,
            g,
            taken,
            bound: HashMap::new(),
            reach: vec![None; g.values.len()],
            last_use,
            body: Vec::new(),
        }
    }

    fn graph(mut self) -> DResult<ast::GraphDef> {
        let g = self.g;
        let syms = g
            .syms
            .iter()
            .map(|(s, d)| ast::SymDecl { name: ident(s), default: *d, padded: g.padded.contains(s) })
            .collect();
        let params = g.params.iter().map(|t| decl(t, "parameter")).collect::<DResult<_>>()?;
        let results = g.results.iter().map(|t| decl(t, "result")).collect::<DResult<_>>()?;
        for (k, t) in g.params.iter().enumerate() {
            if k < self.reach.len() {
                self.reach[k] = Some(t.name.clone());
                self.bound.insert(t.name.clone(), ValueId(k as u32));
            }
        }
        for (k, st) in g.body.iter().enumerate() {
            let value = self.stmt(st).map_err(|d| if d.span.is_none() { d.at(st.span) } else { d })?;
            let targets: Vec<Ident> = st.results.iter().map(|v| self.define(*v, k)).collect();
            self.body.push(ast::Stmt { destructure: targets.len() != 1, targets, value });
        }
        let mut ret = Vec::new();
        for (o, _) in &g.ret {
            ret.push(match o {
                Operand::Value(v) => ident(&self.name_of(*v)?),
                // `r = 1.0` binds a name to the literal and makes no statement.
                Operand::Lit(l) => {
                    let name = ident(&self.fresh("r"));
                    self.body.push(ast::Stmt { targets: vec![name.clone()], destructure: false, value: lit(l) });
                    name
                }
            });
        }
        Ok(ast::GraphDef {
            name: ident(&g.name),
            syms,
            params,
            results,
            body: self.body,
            ret,
            ret_span: Span::default(),
            span: Span::default(),
        })
    }

    /// A name not taken yet: `base`, else `base_2`, `base_3`, ….
    fn fresh(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        let mut k = 2;
        while !self.taken.insert(name.clone()) {
            name = format!("{base}_{k}");
            k += 1;
        }
        name
    }

    /// The target naming `v`, a result of statement `at`. The value that
    /// name refers to so far, if still read after `at`, gets an alias line
    /// first.
    fn define(&mut self, v: ValueId, at: usize) -> Ident {
        let name = match self.g.values.get(v.0 as usize).and_then(|x| x.name.clone()) {
            Some(n) => n,
            None => self.fresh(&format!("t{}", v.0)),
        };
        if let Some(&u) = self.bound.get(&name) {
            if u != v && self.last_use[u.0 as usize].is_some_and(|l| l > at) {
                let alias = self.fresh(&name);
                let stmt = ast::Stmt { targets: vec![ident(&alias)], destructure: false, value: named(&name) };
                self.body.push(stmt);
                self.reach[u.0 as usize] = Some(alias.clone());
                self.bound.insert(alias, u);
            }
        }
        if let Some(old) = self.bound.insert(name.clone(), v) {
            if self.reach[old.0 as usize].as_deref() == Some(name.as_str()) {
                self.reach[old.0 as usize] = None;
            }
        }
        self.reach[v.0 as usize] = Some(name.clone());
        ident(&name)
    }

    fn name_of(&self, v: ValueId) -> DResult<String> {
        self.reach
            .get(v.0 as usize)
            .cloned()
            .flatten()
            .ok_or_else(|| diag!(Internal, "value %{} is read before it is defined", v.0))
    }

    fn operand(&self, o: &Operand) -> DResult<Expr> {
        match o {
            Operand::Value(v) => Ok(named(&self.name_of(*v)?)),
            Operand::Lit(l) => Ok(lit(l)),
        }
    }

    /// The expression of statement `st` (its operands by their names now).
    fn stmt(&self, st: &FStmt) -> DResult<Expr> {
        let a = |k: usize| -> DResult<Expr> {
            let o = st.args.get(k).ok_or_else(|| diag!(Internal, "`{}` has no operand {k}", st.op.name()))?;
            self.operand(o)
        };
        // The first `n` operands, positionally.
        let first = |n: usize| (0..n).map(a).collect::<DResult<Vec<_>>>();
        let all = || first(st.args.len());
        let call = |f: &str, args: Vec<Expr>, kwargs: Vec<(&str, Expr)>| Expr::Call {
            callee: ident(f),
            args,
            kwargs: kwargs.into_iter().map(|(k, v)| (ident(k), v)).collect(),
            span: Span::default(),
        };
        let with = |mut v: Vec<Expr>, extra: Vec<Expr>| {
            v.extend(extra);
            v
        };
        Ok(match &st.op {
            FOp::Unary(UnaryFn::Neg) if st.args.first().and_then(value_of).is_some() => {
                Expr::Neg(Box::new(a(0)?), Span::default())
            }
            FOp::Unary(u) => call(u.name(), first(1)?, vec![]),
            FOp::Binary(b) => match bin_op(*b) {
                // `resolve` folds an operator of two literals.
                Some(_) if st.args.iter().all(|o| value_of(o).is_none()) => {
                    return Err(diag!(Unsupported, "`{}` of two literals has no graph-language form", b.name()));
                }
                Some(op) => binary(op, a(0)?, a(1)?),
                None => call(b.name(), first(2)?, vec![]),
            },
            FOp::Where => call("where", first(3)?, vec![]),
            FOp::Cast { to } => call("cast", with(first(1)?, vec![dtype(*to)]), vec![]),
            FOp::Reduce { op, axes, keepdim, acc } => {
                let mut kw = Vec::new();
                if let Some(axes) = axes {
                    let axes = axes
                        .iter()
                        .map(|x| match x {
                            AxisRef::Index(i) => int(*i),
                            AxisRef::Name(n) => named(n),
                        })
                        .collect();
                    kw.push(("axes", list(axes)));
                }
                if *keepdim {
                    kw.push(("keepdim", Expr::Bool(true, Span::default())));
                }
                if let Some(acc) = acc {
                    kw.push(("acc", dtype(*acc)));
                }
                call(op.name(), first(1)?, kw)
            }
            FOp::Scan { op, axis, exclusive, reverse } => {
                if *op == ReduceFn::Mean {
                    return Err(diag!(Unsupported, "a cumulative mean has no graph-language call"));
                }
                let mut kw = Vec::new();
                flag(&mut kw, "exclusive", *exclusive);
                flag(&mut kw, "reverse", *reverse);
                call(&format!("cum{}", op.name()), with(first(1)?, vec![int(*axis)]), kw)
            }
            FOp::Movement(m) => {
                let x = first(1)?;
                match m {
                    Movement::Reshape { shape } => call("reshape", with(x, vec![dims(shape)]), vec![]),
                    Movement::Expand { shape } => call("expand", with(x, vec![dims(shape)]), vec![]),
                    Movement::Permute { perm } => call("permute", with(x, vec![ints(perm)]), vec![]),
                    Movement::Transpose { a, b } => call("transpose", with(x, vec![int(*a), int(*b)]), vec![]),
                    Movement::Unsqueeze { axes } => call("unsqueeze", with(x, vec![int_or_list(axes)]), vec![]),
                    Movement::Squeeze { axes } => call("squeeze", with(x, vec![int_or_list(axes)]), vec![]),
                    Movement::Tile { reps } => call("tile", with(x, vec![dims(reps)]), vec![]),
                    Movement::RepeatInterleave { repeats, axis } => {
                        call("repeat_interleave", with(x, vec![dim(repeats), int(*axis)]), vec![])
                    }
                    Movement::Pad { pads, value, mode } => {
                        let pads = list(pads.iter().map(|(lo, hi)| dims(&[lo.clone(), hi.clone()])).collect());
                        let kw = match mode {
                            PadMode::Constant if value.to_bits() == 0 => vec![],
                            PadMode::Constant => vec![("value", float(*value, "pad value")?)],
                            PadMode::Reflect | PadMode::Edge => vec![("mode", named(mode.name()))],
                        };
                        call("pad", with(x, vec![pads]), kw)
                    }
                    Movement::Shrink { bounds } => {
                        let b = list(bounds.iter().map(|(lo, hi)| dims(&[lo.clone(), hi.clone()])).collect());
                        call("shrink", with(x, vec![b]), vec![])
                    }
                    Movement::Slice { bounds } => {
                        let b = bounds
                            .iter()
                            .map(|(lo, hi, step)| match step.is_one() {
                                true => dims(&[lo.clone(), hi.clone()]),
                                false => dims(&[lo.clone(), hi.clone(), step.clone()]),
                            })
                            .collect();
                        call("slice", with(x, vec![list(b)]), vec![])
                    }
                    Movement::Flip { axes } => call("flip", with(x, vec![ints(axes)]), vec![]),
                    Movement::Unfold { axis, size, step } => {
                        call("unfold", with(x, vec![int(*axis), dim(size), dim(step)]), vec![])
                    }
                }
            }
            FOp::Pieces(p) => match p {
                Pieces::Concat { axis } => call("concat", vec![list(all()?)], axis_kw(*axis, 0)),
                Pieces::Split { sizes, axis } => call("split", with(first(1)?, vec![dims(sizes)]), axis_kw(*axis, 0)),
                Pieces::Chunk { chunks, axis } => {
                    call("chunk", with(first(1)?, vec![int(*chunks as i64)]), axis_kw(*axis, 0))
                }
            },
            FOp::Gather { axis } => call("gather", vec![a(0)?, int(*axis), a(1)?], vec![]),
            FOp::Take { axis } => call("take", vec![a(0)?, a(1)?, int(*axis)], vec![]),
            FOp::Matmul => call("matmul", first(2)?, vec![]),
            FOp::Conv { window: w, groups, bias } => {
                let mut kw = window(w, &ones(w.rank()), true)?;
                if *groups != 1 {
                    kw.push(("groups", int(*groups)));
                }
                call(&spatial("conv", w.rank())?, first(2 + usize::from(*bias))?, kw)
            }
            FOp::ConvTranspose { window: w, output_padding, groups, bias } => {
                let mut kw = window(w, &ones(w.rank()), false)?;
                if output_padding.iter().any(|d| d.as_int() != Some(0)) {
                    kw.push(("output_padding", dims_n(output_padding)));
                }
                if *groups != 1 {
                    kw.push(("groups", int(*groups)));
                }
                if w.dilation.iter().any(|d| !d.is_one()) {
                    kw.push(("dilation", dims_n(&w.dilation)));
                }
                call(&spatial("conv_transpose", w.rank())?, first(2 + usize::from(*bias))?, kw)
            }
            FOp::Im2Col { kernel, window: w } => {
                call("im2col", with(first(1)?, vec![dims(kernel)]), window(w, &ones(w.rank()), true)?)
            }
            FOp::Col2Im { output, kernel, window: w } => {
                call("col2im", with(first(1)?, vec![dims(output), dims(kernel)]), window(w, &ones(w.rank()), true)?)
            }
            FOp::MaxPool { kernel, window: w } => {
                call(&spatial("maxpool", w.rank())?, with(first(1)?, vec![dims_n(kernel)]), window(w, kernel, true)?)
            }
            FOp::AvgPool { kernel, window: w, count_include_pad } => {
                if w.dilation.iter().any(|d| !d.is_one()) {
                    return Err(diag!(Unsupported, "a dilated average pool has no graph-language call"));
                }
                let mut kw = window(w, kernel, false)?;
                flag(&mut kw, "count_include_pad", *count_include_pad);
                call(&spatial("avgpool", w.rank())?, with(first(1)?, vec![dims_n(kernel)]), kw)
            }
            FOp::Softmax { axis } => call("softmax", first(1)?, axis_kw(*axis, -1)),
            FOp::LogSoftmax { axis } => call("log_softmax", first(1)?, axis_kw(*axis, -1)),
            FOp::Clamp { min, max } => {
                let mut kw = Vec::new();
                for (k, v) in [("min", min), ("max", max)] {
                    if let Some(v) = v {
                        kw.push((k, float(*v, "clamp bound")?));
                    }
                }
                call("clamp", first(1)?, kw)
            }
            FOp::BatchNorm { eps } => call("batch_norm", first(5)?, eps_kw(*eps)?),
            FOp::InstanceNorm { eps } => call("instance_norm", first(3)?, eps_kw(*eps)?),
            FOp::LayerNorm { axes, eps } => {
                let mut kw = if axes.as_slice() == [-1] { vec![] } else { vec![("axis", int_or_list(axes))] };
                kw.extend(eps_kw(*eps)?);
                call("layernorm", first(3)?, kw)
            }
            FOp::Attention { mask, causal, scale } => {
                let mut kw = Vec::new();
                flag(&mut kw, "causal", *causal);
                if let Some(s) = scale {
                    kw.push(("scale", float(*s, "attention scale")?));
                }
                call("attention", first(3 + usize::from(*mask))?, kw)
            }
            FOp::Call { graph, name } => {
                let callee = self.program.graphs.get(*graph).map_or(name.as_str(), |g| g.name.as_str());
                call(callee, all()?, vec![])
            }
        })
    }
}

fn value_of(o: &Operand) -> Option<ValueId> {
    match o {
        Operand::Value(v) => Some(*v),
        Operand::Lit(_) => None,
    }
}

fn ident(name: &str) -> Ident {
    Ident { name: name.to_string(), span: Span::default() }
}

fn named(name: &str) -> Expr {
    Expr::Name(ident(name))
}

fn int(v: i64) -> Expr {
    Expr::Int(v, Span::default())
}

fn list(items: Vec<Expr>) -> Expr {
    Expr::List(items, Span::default())
}

fn ints(v: &[i64]) -> Expr {
    list(v.iter().map(|&i| int(i)).collect())
}

/// One integer for a single axis, else a list.
fn int_or_list(v: &[i64]) -> Expr {
    match v {
        [one] => int(*one),
        _ => ints(v),
    }
}

fn binary(op: BinOp, lhs: Expr, rhs: Expr) -> Expr {
    Expr::Binary { op, lhs: Box::new(lhs), rhs: Box::new(rhs), span: Span::default() }
}

fn dtype(d: DType) -> Expr {
    named(d.dsl_name())
}

/// A float attribute; `what` names it in the error for a non-finite one.
fn float(v: f64, what: &str) -> DResult<Expr> {
    if !v.is_finite() {
        return Err(diag!(Unsupported, "the {what} {v} has no graph-language form (attributes are finite numbers)"));
    }
    Ok(Expr::Float(v, Span::default()))
}

/// A literal operand: a non-finite float as the division `resolve` folds.
fn lit(l: &Literal) -> Expr {
    let f = |v: f64| Expr::Float(v, Span::default());
    match l.kind {
        LitKind::Bool => Expr::Bool(l.value != 0.0, Span::default()),
        LitKind::Int => int(l.value as i64),
        LitKind::Float if l.value.is_nan() => binary(BinOp::Div, f(0.0), f(0.0)),
        LitKind::Float if l.value.is_infinite() => binary(BinOp::Div, f(l.value.signum()), f(0.0)),
        LitKind::Float => f(l.value),
    }
}

/// A dimension as `resolve` reads one: integers, symbols, `+ - *` and `/`
/// (floor division).
fn dim(d: &Dim) -> Expr {
    let mut out: Option<Expr> = None;
    for (atoms, c) in d.monomials() {
        let product = atoms
            .iter()
            .map(|a| match a {
                Atom::Sym(s) => named(s),
                Atom::FloorDiv(n, q) => binary(BinOp::Div, dim(n), dim(q)),
            })
            .reduce(|acc, e| binary(BinOp::Mul, acc, e));
        let (op, c) = match (&out, c) {
            (Some(_), c) if c < 0 && c != i64::MIN => (BinOp::Sub, -c),
            (_, c) => (BinOp::Add, c),
        };
        let term = match product {
            None => int(c),
            Some(p) if c == 1 => p,
            Some(p) => binary(BinOp::Mul, int(c), p),
        };
        out = Some(match out {
            None => term,
            Some(acc) => binary(op, acc, term),
        });
    }
    out.unwrap_or_else(|| int(0))
}

fn dims(v: &[Dim]) -> Expr {
    list(v.iter().map(dim).collect())
}

/// One size per spatial axis: one dimension when all are equal.
fn dims_n(v: &[Dim]) -> Expr {
    match v.first() {
        Some(d) if v.iter().all(|x| x == d) => dim(d),
        _ => dims(v),
    }
}

fn ones(n: usize) -> Vec<Dim> {
    vec![Dim::int(1); n]
}

/// `stride=`, `pad=` and (when `dilation`) `dilation=` where they differ
/// from `resolve`'s defaults (`stride`, no padding, 1).
fn window(w: &Window, stride: &[Dim], dilation: bool) -> DResult<Vec<(&'static str, Expr)>> {
    let mut kw = Vec::new();
    if w.stride.as_slice() != stride {
        kw.push(("stride", dims_n(&w.stride)));
    }
    if w.pad.iter().any(|(a, b)| a.as_int() != Some(0) || b.as_int() != Some(0)) {
        let pad = if w.pad.iter().all(|(a, b)| a == b) {
            dims_n(&w.pad.iter().map(|(a, _)| a.clone()).collect::<Vec<_>>())
        } else {
            dims(&w.pad.iter().flat_map(|(a, b)| [a.clone(), b.clone()]).collect::<Vec<_>>())
        };
        kw.push(("pad", pad));
    }
    if dilation && w.dilation.iter().any(|d| !d.is_one()) {
        kw.push(("dilation", dims_n(&w.dilation)));
    }
    Ok(kw)
}

/// `conv2d` for `("conv", 2)`.
fn spatial(family: &str, n: usize) -> DResult<String> {
    if !(1..=3).contains(&n) {
        return Err(diag!(Unsupported, "`{family}` over {n} spatial axes has no graph-language call (1 to 3)"));
    }
    Ok(format!("{family}{n}d"))
}

fn flag(kw: &mut Vec<(&'static str, Expr)>, key: &'static str, on: bool) {
    if on {
        kw.push((key, Expr::Bool(true, Span::default())));
    }
}

fn axis_kw(axis: i64, default: i64) -> Vec<(&'static str, Expr)> {
    if axis == default {
        vec![]
    } else {
        vec![("axis", int(axis))]
    }
}

/// `eps=` unless it is `resolve`'s default, 1e-5.
fn eps_kw(eps: f64) -> DResult<Vec<(&'static str, Expr)>> {
    Ok(if eps.to_bits() == 1e-5f64.to_bits() { vec![] } else { vec![("eps", float(eps, "epsilon")?)] })
}

/// The operator of a binary function written infix (`None`: a call).
fn bin_op(b: BinaryFn) -> Option<BinOp> {
    Some(match b {
        BinaryFn::Add => BinOp::Add,
        BinaryFn::Sub => BinOp::Sub,
        BinaryFn::Mul => BinOp::Mul,
        BinaryFn::Div => BinOp::Div,
        BinaryFn::Lt => BinOp::Lt,
        BinaryFn::Le => BinOp::Le,
        BinaryFn::Gt => BinOp::Gt,
        BinaryFn::Ge => BinOp::Ge,
        BinaryFn::Eq => BinOp::Eq,
        BinaryFn::Ne => BinOp::Ne,
        BinaryFn::Maximum | BinaryFn::Minimum | BinaryFn::Pow => return None,
    })
}

/// A declared parameter or result (`what`); each size an integer or a
/// symbol.
fn decl(t: &FTensor, what: &str) -> DResult<ast::TensorDecl> {
    let mut shape = Vec::new();
    for (k, d) in t.shape.iter().enumerate() {
        shape.push(match (d.as_int(), d.as_sym()) {
            (Some(v), _) => DimExpr::Int(v, Span::default()),
            (_, Some(s)) => DimExpr::Sym(ident(s)),
            _ => {
                return Err(diag!(
                    Unsupported,
                    "{what} `{}` has size {d} at axis {k}: a declared size is an integer or a symbol",
                    t.name
                )
                .at(t.span))
            }
        });
    }
    Ok(ast::TensorDecl { name: ident(&t.name), dtype: t.dtype, dtype_span: Span::default(), shape })
}

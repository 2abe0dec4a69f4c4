//! Name resolution: syntax tree ([`ast`]) → Frontend IR ([`ir`]).
//!
//! Checks, each reported at the offending token's span:
//! - value, graph and symbol names exist (`UnknownName`, with the closest
//!   name when one is near);
//! - callees are builtin ops or graphs of the program (`UnknownOp`, with the
//!   closest op name); a builtin name always means the builtin, so a graph
//!   named `attention` can wrap the `attention` op (it can still be the
//!   entry graph, but not be called);
//! - argument counts, keyword names and attribute kinds: too many or missing
//!   arguments and destructuring counts are `ArityMismatch`; an unknown or
//!   repeated keyword and an attribute of the wrong kind (a list where an
//!   integer is expected, an unknown dtype name) are `SyntaxError`; a literal
//!   slice step ≤ 0 is `NegativeStride`; a declared size < 1 is
//!   `AxisSizeMismatch`;
//! - literal-only arithmetic is folded here (`2 * 0.5` → `1.0`); a bool
//!   literal in arithmetic is `DTypeMismatch`.
//!
//! Shapes and dtypes are checked later, while lowering (`to_tiny`).

use std::collections::HashMap;

use crate::diag;
use crate::diag::{DResult, Span};
use crate::frontend::ast::{self, BinOp, Expr, Ident};
use crate::frontend::ir::*;
use crate::sym::Dim;
use crate::DType;

/// Resolves every graph of `p`.
///
/// Errors: see the module doc.
pub fn resolve(p: &ast::Program) -> DResult<FProgram> {
    let mut sigs: Vec<Sig> = Vec::new();
    for gd in &p.graphs {
        if sigs.iter().any(|s| s.name == gd.name.name) {
            return Err(diag!(SyntaxError, "graph `{}` is defined twice", gd.name.name).at(gd.name.span));
        }
        let params = gd.params.iter().map(|t| t.name.name.clone()).collect();
        sigs.push(Sig { name: gd.name.name.clone(), params, results: gd.results.len() });
    }
    let graphs = p.graphs.iter().map(|gd| resolve_graph(gd, &sigs)).collect::<DResult<_>>()?;
    Ok(FProgram { graphs })
}

/// What a call site needs to know about a graph.
struct Sig {
    name: String,
    params: Vec<String>,
    results: usize,
}

/// Every builtin op other than the unary functions ([`UnaryFn::ALL`]): its
/// name, its parameter names in positional order, and how many of the first
/// ones are required. The one list of builtins: signatures and
/// suggestions read it, and `docs/dsl.md` must name each (a test).
const BUILTINS: &[(&str, &[&str], usize)] = &[
    ("maximum", &["a", "b"], 2),
    ("minimum", &["a", "b"], 2),
    ("matmul", &["a", "b"], 2),
    ("gather", &["x", "axis", "index"], 3),
    ("take", &["x", "index", "axis"], 3),
    ("pow", &["a", "b"], 2),
    ("clamp", &["x", "min", "max"], 1),
    ("batch_norm", &["x", "scale", "bias", "mean", "var", "eps"], 5),
    ("instance_norm", &["x", "scale", "bias", "eps"], 3),
    ("where", &["cond", "a", "b"], 3),
    ("cast", &["x", "dtype"], 2),
    ("sum", &["x", "axes", "keepdim", "acc"], 1),
    ("max", &["x", "axes", "keepdim", "acc"], 1),
    ("min", &["x", "axes", "keepdim", "acc"], 1),
    ("mean", &["x", "axes", "keepdim", "acc"], 1),
    ("prod", &["x", "axes", "keepdim", "acc"], 1),
    ("cumsum", CUMULATIVE, 2),
    ("cumprod", CUMULATIVE, 2),
    ("cummax", CUMULATIVE, 2),
    ("cummin", CUMULATIVE, 2),
    ("reshape", &["x", "shape"], 2),
    ("expand", &["x", "shape"], 2),
    ("permute", &["x", "perm"], 2),
    ("transpose", &["x", "dim0", "dim1"], 3),
    ("unsqueeze", &["x", "axis"], 2),
    ("squeeze", &["x", "axis"], 2),
    ("tile", &["x", "reps"], 2),
    ("repeat_interleave", &["x", "repeats", "axis"], 3),
    ("concat", &["xs", "axis"], 1),
    ("split", &["x", "sizes", "axis"], 2),
    ("chunk", &["x", "chunks", "axis"], 2),
    ("pad", &["x", "pads", "value", "mode"], 2),
    ("shrink", &["x", "bounds"], 2),
    ("slice", &["x", "bounds"], 2),
    ("flip", &["x", "axes"], 2),
    ("unfold", &["x", "axis", "size", "step"], 4),
    ("im2col", &["x", "kernel", "stride", "pad", "dilation"], 2),
    ("col2im", &["x", "output", "kernel", "stride", "pad", "dilation"], 3),
    ("conv1d", CONV, 2),
    ("conv2d", CONV, 2),
    ("conv3d", CONV, 2),
    ("conv_transpose1d", CONV_TRANSPOSE, 2),
    ("conv_transpose2d", CONV_TRANSPOSE, 2),
    ("conv_transpose3d", CONV_TRANSPOSE, 2),
    ("maxpool1d", MAXPOOL, 2),
    ("maxpool2d", MAXPOOL, 2),
    ("maxpool3d", MAXPOOL, 2),
    ("avgpool1d", AVGPOOL, 2),
    ("avgpool2d", AVGPOOL, 2),
    ("avgpool3d", AVGPOOL, 2),
    ("softmax", &["x", "axis"], 1),
    ("log_softmax", &["x", "axis"], 1),
    ("layernorm", &["x", "gamma", "beta", "axis", "eps"], 3),
    ("attention", &["q", "k", "v", "mask", "causal", "scale"], 3),
];

// The parameters of the sliding-window builtins, one list per family for
// its 1-D, 2-D and 3-D names.
const CONV: &[&str] = &["x", "w", "bias", "stride", "pad", "dilation", "groups"];
const CONV_TRANSPOSE: &[&str] = &["x", "w", "bias", "stride", "pad", "output_padding", "groups", "dilation"];
const CUMULATIVE: &[&str] = &["x", "axis", "exclusive", "reverse"];
const MAXPOOL: &[&str] = &["x", "kernel", "stride", "pad", "dilation"];
const AVGPOOL: &[&str] = &["x", "kernel", "stride", "pad", "count_include_pad"];

/// `("conv", 2)` for `conv2d`: a sliding-window op's family and its number
/// of spatial axes (1, 2 or 3).
fn spatial(name: &str) -> Option<(&str, usize)> {
    let stem = name.strip_suffix('d')?;
    let n = match stem.as_bytes().last()? {
        b'1' => 1,
        b'2' => 2,
        b'3' => 3,
        _ => return None,
    };
    Some((&stem[..stem.len() - 1], n))
}

/// Parameter names of a builtin op in positional order, and how many of the
/// first ones are required.
fn builtin_sig(name: &str) -> Option<(&'static [&'static str], usize)> {
    if UnaryFn::ALL.iter().any(|u| u.name() == name) {
        return Some((&["x"], 1));
    }
    BUILTINS.iter().find(|b| b.0 == name).map(|&(_, params, required)| (params, required))
}

/// Every builtin op name (for suggestions).
pub(crate) fn builtin_names() -> Vec<&'static str> {
    UnaryFn::ALL.iter().map(|u| u.name()).chain(BUILTINS.iter().map(|b| b.0)).collect()
}

/// Levenshtein distance, for "did you mean" hints.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// ` (did you mean `x`?)` when a candidate is within two edits.
fn suggest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> String {
    let best = candidates.map(|c| (distance(name, c), c)).filter(|(d, _)| *d <= 2).min();
    match best {
        Some((_, c)) => format!(" (did you mean `{c}`?)"),
        None => String::new(),
    }
}

fn resolve_graph(gd: &ast::GraphDef, sigs: &[Sig]) -> DResult<FGraph> {
    let mut syms: Vec<(String, Option<i64>)> = Vec::new();
    for s in &gd.syms {
        if syms.iter().any(|(n, _)| n == &s.name.name) {
            return Err(diag!(SyntaxError, "symbol `{}` is declared twice", s.name.name).at(s.name.span));
        }
        if let Some(v) = s.default.filter(|v| *v < 1) {
            return Err(diag!(AxisSizeMismatch, "symbol `{}` defaults to {v}: sizes must be at least 1", s.name.name)
                .at(s.name.span));
        }
        syms.push((s.name.name.clone(), s.default));
    }
    let padded = gd.syms.iter().filter(|s| s.padded).map(|s| s.name.name.clone()).collect();
    let mut r = Resolver {
        sigs,
        syms: syms.iter().map(|(n, _)| n.clone()).collect(),
        g: FGraph {
            name: gd.name.name.clone(),
            span: gd.span,
            syms,
            padded,
            params: vec![],
            results: vec![],
            values: vec![],
            body: vec![],
            ret: vec![],
        },
        env: HashMap::new(),
    };
    for t in &gd.params {
        let ft = r.decl(t, r.g.params.iter().map(|p| p.name.as_str()))?;
        let id = ValueId(r.g.values.len() as u32);
        r.g.values.push(FValue { name: Some(ft.name.clone()), span: ft.span });
        r.env.insert(ft.name.clone(), Operand::Value(id));
        r.g.params.push(ft);
    }
    for t in &gd.results {
        let ft = r.decl(t, r.g.results.iter().map(|p| p.name.as_str()))?;
        r.g.results.push(ft);
    }
    for s in &gd.body {
        r.stmt(s)?;
    }
    if gd.ret.len() != gd.results.len() {
        return Err(diag!(
            ArityMismatch,
            "graph `{}` declares {} result(s) but returns {}",
            gd.name.name,
            gd.results.len(),
            gd.ret.len()
        )
        .at(gd.ret_span));
    }
    for id in &gd.ret {
        let o = r.lookup(id)?;
        r.g.ret.push((o, id.span));
    }
    Ok(r.g)
}

struct Resolver<'a> {
    sigs: &'a [Sig],
    syms: Vec<String>,
    g: FGraph,
    env: HashMap<String, Operand>,
}

type Slots<'e> = Vec<Option<&'e Expr>>;

impl Resolver<'_> {
    fn decl<'n>(&self, t: &ast::TensorDecl, earlier: impl Iterator<Item = &'n str>) -> DResult<FTensor> {
        if earlier.into_iter().any(|n| n == t.name.name) {
            return Err(diag!(SyntaxError, "`{}` is declared twice", t.name.name).at(t.name.span));
        }
        let mut shape = Vec::new();
        for d in &t.shape {
            shape.push(match d {
                ast::DimExpr::Int(v, sp) if *v < 1 => {
                    return Err(
                        diag!(AxisSizeMismatch, "dimension {v} of `{}`: sizes must be at least 1", t.name.name).at(*sp)
                    )
                }
                ast::DimExpr::Int(v, _) => Dim::int(*v),
                ast::DimExpr::Sym(id) => self.sym(id)?,
            });
        }
        Ok(FTensor { name: t.name.name.clone(), dtype: t.dtype, shape, span: t.name.span })
    }

    fn sym(&self, id: &Ident) -> DResult<Dim> {
        if self.syms.contains(&id.name) {
            return Ok(Dim::sym(&id.name));
        }
        let hint = suggest(&id.name, self.syms.iter().map(|s| s.as_str()));
        Err(diag!(UnknownName, "graph `{}` declares no symbol `{}`{hint}", self.g.name, id.name).at(id.span))
    }

    fn lookup(&self, id: &Ident) -> DResult<Operand> {
        if let Some(o) = self.env.get(&id.name) {
            return Ok(*o);
        }
        if self.syms.contains(&id.name) {
            return Err(diag!(Unsupported, "`{}` is a symbolic dimension, not a tensor", id.name).at(id.span));
        }
        let hint = suggest(&id.name, self.env.keys().map(|s| s.as_str()));
        Err(diag!(UnknownName, "no value named `{}`{hint}", id.name).at(id.span))
    }

    fn stmt(&mut self, s: &ast::Stmt) -> DResult<()> {
        let results = if s.destructure || s.targets.len() != 1 {
            match &s.value {
                Expr::Call { callee, args, kwargs, span } => self.call(callee, args, kwargs, *span, s.targets.len())?,
                other => {
                    return Err(diag!(
                        ArityMismatch,
                        "{} targets need a call that returns {} values",
                        s.targets.len(),
                        s.targets.len()
                    )
                    .at(other.span()))
                }
            }
        } else {
            vec![self.expr(&s.value)?]
        };
        let fresh = self.g.body.last().map(|st| st.results.clone()).unwrap_or_default();
        for (t, o) in s.targets.iter().zip(results) {
            if let Operand::Value(v) = o {
                let val = &mut self.g.values[v.0 as usize];
                if fresh.contains(&v) && val.name.is_none() {
                    val.name = Some(t.name.clone());
                }
            }
            self.env.insert(t.name.clone(), o);
        }
        Ok(())
    }

    /// Appends a statement and returns its result values.
    fn push(&mut self, op: FOp, args: Vec<(Operand, Span)>, span: Span, n: usize) -> Vec<ValueId> {
        let results: Vec<ValueId> = (0..n)
            .map(|_| {
                self.g.values.push(FValue { name: None, span });
                ValueId(self.g.values.len() as u32 - 1)
            })
            .collect();
        let (args, arg_spans) = args.into_iter().unzip();
        self.g.body.push(FStmt { results: results.clone(), op, args, arg_spans, span });
        results
    }

    fn expr(&mut self, e: &Expr) -> DResult<Operand> {
        Ok(match e {
            Expr::Int(v, sp) => Operand::Lit(Literal { value: *v as f64, kind: LitKind::Int, span: *sp }),
            Expr::Float(v, sp) => Operand::Lit(Literal { value: *v, kind: LitKind::Float, span: *sp }),
            Expr::Bool(v, sp) => {
                Operand::Lit(Literal { value: f64::from(u8::from(*v)), kind: LitKind::Bool, span: *sp })
            }
            Expr::Name(id) => self.lookup(id)?,
            Expr::Neg(x, sp) => match self.expr(x)? {
                Operand::Lit(l) if l.kind == LitKind::Bool => {
                    return Err(diag!(DTypeMismatch, "cannot negate a bool").at(*sp))
                }
                Operand::Lit(l) => Operand::Lit(Literal { value: -l.value, kind: l.kind, span: *sp }),
                o => Operand::Value(self.push(FOp::Unary(UnaryFn::Neg), vec![(o, x.span())], *sp, 1)[0]),
            },
            Expr::Binary { op, lhs, rhs, span } => {
                let (a, b) = (self.expr(lhs)?, self.expr(rhs)?);
                if let (Operand::Lit(x), Operand::Lit(y)) = (a, b) {
                    return Ok(Operand::Lit(fold(*op, x, y, *span)?));
                }
                Operand::Value(
                    self.push(FOp::Binary(binary_fn(*op)), vec![(a, lhs.span()), (b, rhs.span())], *span, 1)[0],
                )
            }
            Expr::Call { callee, args, kwargs, span } => self.call(callee, args, kwargs, *span, 1)?[0],
            Expr::List(_, sp) => return Err(diag!(SyntaxError, "a list is not a tensor").at(*sp)),
        })
    }

    fn tensor(&mut self, e: &Expr) -> DResult<(Operand, Span)> {
        Ok((self.expr(e)?, e.span()))
    }

    /// Matches positional and keyword arguments to `names`.
    fn bind<'e>(
        &self,
        callee: &Ident,
        names: &[&str],
        required: usize,
        args: &'e [Expr],
        kwargs: &'e [(Ident, Expr)],
    ) -> DResult<Slots<'e>> {
        let f = &callee.name;
        if args.len() > names.len() {
            return Err(diag!(
                ArityMismatch,
                "`{f}` takes at most {} argument(s) ({}), got {}",
                names.len(),
                names.join(", "),
                args.len()
            )
            .at(callee.span));
        }
        let mut slots: Slots<'e> = vec![None; names.len()];
        for (k, a) in args.iter().enumerate() {
            slots[k] = Some(a);
        }
        for (key, v) in kwargs {
            let Some(k) = names.iter().position(|n| *n == key.name) else {
                let hint = suggest(&key.name, names.iter().copied());
                return Err(diag!(
                    SyntaxError,
                    "`{f}` has no argument `{}`{hint} (arguments: {})",
                    key.name,
                    names.join(", ")
                )
                .at(key.span));
            };
            if slots[k].is_some() {
                return Err(diag!(SyntaxError, "argument `{}` of `{f}` is given twice", key.name).at(key.span));
            }
            slots[k] = Some(v);
        }
        if let Some(k) = (0..required).find(|&k| slots[k].is_none()) {
            return Err(diag!(
                ArityMismatch,
                "`{f}` needs argument `{}` ({} required: {})",
                names[k],
                required,
                names[..required].join(", ")
            )
            .at(callee.span));
        }
        Ok(slots)
    }

    /// Resolves a call expecting `want` results.
    fn call(
        &mut self,
        callee: &Ident,
        args: &[Expr],
        kwargs: &[(Ident, Expr)],
        span: Span,
        want: usize,
    ) -> DResult<Vec<Operand>> {
        let graph =
            self.sigs.iter().position(|s| s.name == callee.name).filter(|_| builtin_sig(&callee.name).is_none());
        if let Some(gi) = graph {
            let sig = &self.sigs[gi];
            if sig.results != want {
                return Err(diag!(
                    ArityMismatch,
                    "graph `{}` returns {} value(s) but {want} are expected here",
                    sig.name,
                    sig.results
                )
                .at(span));
            }
            let names: Vec<&str> = sig.params.iter().map(|s| s.as_str()).collect();
            let slots = self.bind(callee, &names, names.len(), args, kwargs)?;
            let mut ops = Vec::new();
            for e in slots.into_iter().flatten() {
                ops.push(self.tensor(e)?);
            }
            let n = self.sigs[gi].results;
            let vals = self.push(FOp::Call { graph: gi, name: callee.name.clone() }, ops, span, n);
            return Ok(vals.into_iter().map(Operand::Value).collect());
        }
        let Some((names, required)) = builtin_sig(&callee.name) else {
            let all = builtin_names();
            let hint = suggest(&callee.name, all.iter().copied().chain(self.sigs.iter().map(|s| s.name.as_str())));
            return Err(diag!(UnknownOp, "unknown operation `{}`{hint}", callee.name).at(callee.span));
        };
        let s = self.bind(callee, names, required, args, kwargs)?;
        let (op, tensors) =
            self.builtin(&callee.name, &s).map_err(|d| if d.span.is_none() { d.at(span) } else { d })?;
        let n = op.results();
        if n != want {
            return Err(
                diag!(ArityMismatch, "`{}` returns {n} value(s) but {want} are expected here", callee.name).at(span)
            );
        }
        let mut ops = Vec::new();
        for e in tensors.into_iter().flatten() {
            ops.push(self.tensor(e)?);
        }
        Ok(self.push(op, ops, span, n).into_iter().map(Operand::Value).collect())
    }

    /// The op of a builtin call and its tensor arguments (absent optional
    /// ones are `None`).
    fn builtin<'e>(&self, name: &str, s: &Slots<'e>) -> DResult<(FOp, Vec<Option<&'e Expr>>)> {
        let x = vec![s[0]];
        // `n` spatial axes; the stride defaults to the kernel for pools and
        // to 1 for convolutions.
        let window = |n: usize,
                      stride: Option<&Expr>,
                      pad: Option<&Expr>,
                      dilation: Option<&Expr>,
                      default_stride: &[Dim]|
         -> DResult<Window> {
            Ok(Window {
                stride: match stride {
                    Some(e) => self.dims_n(e, n)?,
                    None => default_stride.to_vec(),
                },
                pad: match pad {
                    Some(e) => self.pads_n(e, n)?,
                    None => vec![(Dim::int(0), Dim::int(0)); n],
                },
                dilation: match dilation {
                    Some(e) => self.dims_n(e, n)?,
                    None => vec![Dim::int(1); n],
                },
            })
        };
        let groups = |e: Option<&Expr>| -> DResult<i64> {
            let groups = e.map(|e| self.int(e)).transpose()?.unwrap_or(1);
            if groups < 1 {
                return Err(diag!(AxisSizeMismatch, "groups = {groups}: must be at least 1").at(span_of(e)));
            }
            Ok(groups)
        };
        if let Some((family, n)) = spatial(name) {
            let op = match family {
                "conv" => FOp::Conv {
                    window: window(n, s[3], s[4], s[5], &vec![Dim::int(1); n])?,
                    groups: groups(s[6])?,
                    bias: s[2].is_some(),
                },
                "conv_transpose" => FOp::ConvTranspose {
                    window: window(n, s[3], s[4], s[7], &vec![Dim::int(1); n])?,
                    output_padding: match s[5] {
                        Some(e) => self.dims_n(e, n)?,
                        None => vec![Dim::int(0); n],
                    },
                    groups: groups(s[6])?,
                    bias: s[2].is_some(),
                },
                "maxpool" => {
                    let kernel = self.dims_n(req(s, 1)?, n)?;
                    return Ok((FOp::MaxPool { window: window(n, s[2], s[3], s[4], &kernel)?, kernel }, x));
                }
                "avgpool" => {
                    let kernel = self.dims_n(req(s, 1)?, n)?;
                    let cip = s[4].map(|e| self.boolean(e)).transpose()?.unwrap_or(false);
                    let op =
                        FOp::AvgPool { window: window(n, s[2], s[3], None, &kernel)?, kernel, count_include_pad: cip };
                    return Ok((op, x));
                }
                _ => return Err(diag!(Internal, "builtin `{name}` has a signature but no resolver")),
            };
            return Ok((op, vec![s[0], s[1], s[2]]));
        }
        if let Some(u) = UnaryFn::ALL.iter().find(|u| u.name() == name) {
            return Ok((FOp::Unary(*u), x));
        }
        let op = match name {
            "maximum" => return Ok((FOp::Binary(BinaryFn::Maximum), vec![s[0], s[1]])),
            "minimum" => return Ok((FOp::Binary(BinaryFn::Minimum), vec![s[0], s[1]])),
            "matmul" => return Ok((FOp::Matmul, vec![s[0], s[1]])),
            "gather" => return Ok((FOp::Gather { axis: self.int(req(s, 1)?)? }, vec![s[0], s[2]])),
            "take" => return Ok((FOp::Take { axis: self.int(req(s, 2)?)? }, vec![s[0], s[1]])),
            "pow" => return Ok((FOp::Binary(BinaryFn::Pow), vec![s[0], s[1]])),
            "clamp" => {
                let (min, max) = (s[1].map(|e| self.float(e)).transpose()?, s[2].map(|e| self.float(e)).transpose()?);
                if min.is_none() && max.is_none() {
                    return Err(diag!(ArityMismatch, "`clamp` needs `min=`, `max=` or both"));
                }
                FOp::Clamp { min, max }
            }
            "batch_norm" => {
                let eps = s[5].map(|e| self.float(e)).transpose()?.unwrap_or(1e-5);
                return Ok((FOp::BatchNorm { eps }, vec![s[0], s[1], s[2], s[3], s[4]]));
            }
            "instance_norm" => {
                let eps = s[3].map(|e| self.float(e)).transpose()?.unwrap_or(1e-5);
                return Ok((FOp::InstanceNorm { eps }, vec![s[0], s[1], s[2]]));
            }
            "where" => return Ok((FOp::Where, vec![s[0], s[1], s[2]])),
            "cast" => FOp::Cast { to: self.dtype(req(s, 1)?)? },
            "sum" | "prod" | "max" | "min" | "mean" => FOp::Reduce {
                op: match name {
                    "sum" => ReduceFn::Sum,
                    "prod" => ReduceFn::Prod,
                    "max" => ReduceFn::Max,
                    "min" => ReduceFn::Min,
                    _ => ReduceFn::Mean,
                },
                axes: s[1].map(|e| self.axes(e)).transpose()?,
                keepdim: s[2].map(|e| self.boolean(e)).transpose()?.unwrap_or(false),
                acc: s[3].map(|e| self.dtype(e)).transpose()?,
            },
            "cumsum" | "cumprod" | "cummax" | "cummin" => FOp::Scan {
                op: match name {
                    "cumsum" => ReduceFn::Sum,
                    "cumprod" => ReduceFn::Prod,
                    "cummax" => ReduceFn::Max,
                    _ => ReduceFn::Min,
                },
                axis: self.int(req(s, 1)?)?,
                exclusive: s[2].map(|e| self.boolean(e)).transpose()?.unwrap_or(false),
                reverse: s[3].map(|e| self.boolean(e)).transpose()?.unwrap_or(false),
            },
            "reshape" => FOp::Movement(Movement::Reshape { shape: self.dim_list(req(s, 1)?)? }),
            "expand" => FOp::Movement(Movement::Expand { shape: self.dim_list(req(s, 1)?)? }),
            "permute" => FOp::Movement(Movement::Permute { perm: self.int_list(req(s, 1)?)? }),
            "transpose" => FOp::Movement(Movement::Transpose { a: self.int(req(s, 1)?)?, b: self.int(req(s, 2)?)? }),
            "unsqueeze" => FOp::Movement(Movement::Unsqueeze { axes: self.int_or_list(req(s, 1)?)? }),
            "squeeze" => FOp::Movement(Movement::Squeeze { axes: self.int_or_list(req(s, 1)?)? }),
            "tile" => FOp::Movement(Movement::Tile { reps: self.dim_list(req(s, 1)?)? }),
            "concat" => {
                let axis = s[1].map(|e| self.int(e)).transpose()?.unwrap_or(0);
                let xs = match req(s, 0)? {
                    Expr::List(items, _) if !items.is_empty() => items.iter().map(Some).collect(),
                    e => return Err(expected(e, "a list of tensors, `[a, b, ..]`")),
                };
                return Ok((FOp::Pieces(Pieces::Concat { axis }), xs));
            }
            "split" => {
                let sizes = self.dim_list(req(s, 1)?)?;
                if sizes.is_empty() {
                    return Err(expected(req(s, 1)?, "a list of piece sizes, `[2, 3]`"));
                }
                let axis = s[2].map(|e| self.int(e)).transpose()?.unwrap_or(0);
                FOp::Pieces(Pieces::Split { sizes, axis })
            }
            "repeat_interleave" => FOp::Movement(Movement::RepeatInterleave {
                repeats: self.dim(req(s, 1)?)?,
                axis: self.int(req(s, 2)?)?,
            }),
            "pad" => {
                let pads = self.tuples(req(s, 1)?, 2)?.into_iter().map(|v| (v[0].clone(), v[1].clone())).collect();
                let mode = s[3].map(|e| self.pad_mode(e)).transpose()?.unwrap_or(PadMode::Constant);
                if let (Some(v), PadMode::Reflect | PadMode::Edge) = (s[2], mode) {
                    return Err(diag!(ArityMismatch, "`value=` fills only `mode=constant` padding").at(v.span()));
                }
                let value = s[2].map(|e| self.float(e)).transpose()?.unwrap_or(0.0);
                FOp::Movement(Movement::Pad { pads, value, mode })
            }
            "unfold" => FOp::Movement(Movement::Unfold {
                axis: self.int(req(s, 1)?)?,
                size: self.dim(req(s, 2)?)?,
                step: self.dim(req(s, 3)?)?,
            }),
            "im2col" | "col2im" => {
                // The kernel's length is the number of spatial axes.
                let at = usize::from(name == "col2im");
                let kernel = self.dim_list(req(s, 1 + at)?)?;
                if !(1..=3).contains(&kernel.len()) {
                    return Err(expected(req(s, 1 + at)?, "a kernel of 1 to 3 sizes, `[kh, kw]`"));
                }
                let n = kernel.len();
                let w = window(n, s[2 + at], s[3 + at], s[4 + at], &vec![Dim::int(1); n])?;
                if at == 0 {
                    FOp::Im2Col { kernel, window: w }
                } else {
                    FOp::Col2Im { output: self.dims_n(req(s, 1)?, n)?, kernel, window: w }
                }
            }
            "chunk" => {
                let chunks = self.int(req(s, 1)?)?;
                if chunks < 1 {
                    return Err(
                        diag!(AxisSizeMismatch, "chunk into {chunks} pieces: must be at least 1").at(span_of(s[1]))
                    );
                }
                // The count of results is checked against the assignment next.
                FOp::Pieces(Pieces::Chunk {
                    chunks: chunks as usize,
                    axis: s[2].map(|e| self.int(e)).transpose()?.unwrap_or(0),
                })
            }
            "shrink" => {
                let bounds = self.tuples(req(s, 1)?, 2)?.into_iter().map(|v| (v[0].clone(), v[1].clone())).collect();
                FOp::Movement(Movement::Shrink { bounds })
            }
            "slice" => FOp::Movement(Movement::Slice { bounds: self.slice_bounds(req(s, 1)?)? }),
            "flip" => FOp::Movement(Movement::Flip { axes: self.int_list(req(s, 1)?)? }),
            "softmax" => FOp::Softmax { axis: s[1].map(|e| self.int(e)).transpose()?.unwrap_or(-1) },
            "log_softmax" => FOp::LogSoftmax { axis: s[1].map(|e| self.int(e)).transpose()?.unwrap_or(-1) },
            "layernorm" => {
                let axes = s[3].map(|e| self.int_or_list(e)).transpose()?.unwrap_or_else(|| vec![-1]);
                let eps = s[4].map(|e| self.float(e)).transpose()?.unwrap_or(1e-5);
                return Ok((FOp::LayerNorm { axes, eps }, vec![s[0], s[1], s[2]]));
            }
            "attention" => {
                let op = FOp::Attention {
                    mask: s[3].is_some(),
                    causal: s[4].map(|e| self.boolean(e)).transpose()?.unwrap_or(false),
                    scale: s[5].map(|e| self.float(e)).transpose()?,
                };
                return Ok((op, vec![s[0], s[1], s[2], s[3]]));
            }
            _ => return Err(diag!(Internal, "builtin `{name}` has a signature but no resolver")),
        };
        Ok((op, x))
    }

    // --- attributes -------------------------------------------------------

    fn int(&self, e: &Expr) -> DResult<i64> {
        match e {
            Expr::Int(v, _) => Ok(*v),
            Expr::Neg(x, _) => match x.as_ref() {
                Expr::Int(v, _) => v.checked_neg().ok_or_else(|| expected(e, "an integer that fits 64 bits")),
                _ => Err(expected(e, "an integer")),
            },
            _ => Err(expected(e, "an integer")),
        }
    }

    /// One integer or a list of them.
    fn int_or_list(&self, e: &Expr) -> DResult<Vec<i64>> {
        match e {
            Expr::List(..) => self.int_list(e),
            _ => Ok(vec![self.int(e)?]),
        }
    }

    /// An integer, a declared symbol, or `+ - * /` (floor division) of these.
    fn dim(&self, e: &Expr) -> DResult<Dim> {
        match e {
            Expr::Name(id) => self.sym(id),
            Expr::Binary { op, lhs, rhs, span } => {
                let (a, b) = (self.dim(lhs)?, self.dim(rhs)?);
                match op {
                    BinOp::Add => Ok(&a + &b),
                    BinOp::Sub => Ok(&a - &b),
                    BinOp::Mul => Ok(&a * &b),
                    BinOp::Div => a
                        .floordiv(&b)
                        .ok_or_else(|| diag!(AxisSizeMismatch, "division by {b} in a dimension").at(*span)),
                    _ => Err(expected(e, "a dimension (integer or symbol)")),
                }
            }
            _ => self.int(e).map(Dim::int).map_err(|_| expected(e, "a dimension (integer or symbol)")),
        }
    }

    fn float(&self, e: &Expr) -> DResult<f64> {
        match e {
            Expr::Float(v, _) => Ok(*v),
            Expr::Int(v, _) => Ok(*v as f64),
            Expr::Neg(x, _) => self.float(x).map(|v| -v),
            _ => Err(expected(e, "a number")),
        }
    }

    fn boolean(&self, e: &Expr) -> DResult<bool> {
        match e {
            Expr::Bool(v, _) => Ok(*v),
            _ => Err(expected(e, "`true` or `false`")),
        }
    }

    fn dtype(&self, e: &Expr) -> DResult<DType> {
        match e {
            Expr::Name(id) => DType::parse(&id.name).ok_or_else(|| {
                diag!(SyntaxError, "`{}` is not a dtype (f16, bf16, f32, i32, bool)", id.name).at(id.span)
            }),
            _ => Err(expected(e, "a dtype (f16, bf16, f32, i32, bool)")),
        }
    }

    fn list<'e>(&self, e: &'e Expr) -> DResult<&'e [Expr]> {
        match e {
            Expr::List(v, _) => Ok(v),
            _ => Err(expected(e, "a list")),
        }
    }

    fn int_list(&self, e: &Expr) -> DResult<Vec<i64>> {
        self.list(e)?.iter().map(|x| self.int(x)).collect()
    }

    fn dim_list(&self, e: &Expr) -> DResult<Vec<Dim>> {
        self.list(e)?.iter().map(|x| self.dim(x)).collect()
    }

    /// A list of lists of exactly `n` dimensions (`[[lo, hi], ...]`).
    fn tuples(&self, e: &Expr, n: usize) -> DResult<Vec<Vec<Dim>>> {
        let mut out = Vec::new();
        for item in self.list(e)? {
            let v = self.dim_list(item)?;
            if v.len() != n {
                return Err(diag!(SyntaxError, "expected [lo, hi], got {} entries", v.len()).at(item.span()));
            }
            out.push(v);
        }
        Ok(out)
    }

    /// `[[lo, hi, step], ...]` (step defaults to 1); a literal step ≤ 0 is
    /// `NegativeStride` (decision 5).
    fn slice_bounds(&self, e: &Expr) -> DResult<Vec<(Dim, Dim, Dim)>> {
        let mut out = Vec::new();
        for item in self.list(e)? {
            let parts = self.list(item)?;
            if !(2..=3).contains(&parts.len()) {
                return Err(diag!(SyntaxError, "expected [lo, hi] or [lo, hi, step], got {} entries", parts.len())
                    .at(item.span()));
            }
            let step = match parts.get(2) {
                Some(p) => self.dim(p)?,
                None => Dim::int(1),
            };
            if let (Some(v), Some(p)) = (step.as_int(), parts.get(2)) {
                if v <= 0 {
                    return Err(
                        diag!(NegativeStride, "slice step {v} must be positive; use flip to reverse").at(p.span())
                    );
                }
            }
            out.push((self.dim(&parts[0])?, self.dim(&parts[1])?, step));
        }
        Ok(out)
    }

    /// `n` sizes: one for every axis (`2`) or a list of `n` (`[2, 3]`).
    fn dims_n(&self, e: &Expr, n: usize) -> DResult<Vec<Dim>> {
        match e {
            Expr::List(v, _) if v.len() == n => v.iter().map(|x| self.dim(x)).collect(),
            Expr::List(v, sp) => {
                Err(diag!(SyntaxError, "expected one entry per spatial axis ({n}), got {}", v.len()).at(*sp))
            }
            _ => Ok(vec![self.dim(e)?; n]),
        }
    }

    /// Padding of `n` spatial axes: `p` for all, a list of `n` (the same
    /// before and after each axis) or of `2n` (`[before_0, after_0,
    /// before_1, after_1, ..]`: `[top, bottom, left, right]` in 2-D).
    fn pads_n(&self, e: &Expr, n: usize) -> DResult<Vec<(Dim, Dim)>> {
        match e {
            Expr::List(v, sp) => {
                let d: Vec<Dim> = v.iter().map(|x| self.dim(x)).collect::<DResult<_>>()?;
                if d.len() == n {
                    Ok(d.into_iter().map(|p| (p.clone(), p)).collect())
                } else if d.len() == 2 * n {
                    Ok(d.chunks(2).map(|c| (c[0].clone(), c[1].clone())).collect())
                } else {
                    Err(diag!(
                        SyntaxError,
                        "expected {n} paddings (one per spatial axis) or {} (before and after each), got {}",
                        2 * n,
                        v.len()
                    )
                    .at(*sp))
                }
            }
            _ => {
                let d = self.dim(e)?;
                Ok(vec![(d.clone(), d); n])
            }
        }
    }

    fn pad_mode(&self, e: &Expr) -> DResult<PadMode> {
        match e {
            Expr::Name(id) => [PadMode::Constant, PadMode::Reflect, PadMode::Edge]
                .into_iter()
                .find(|m| m.name() == id.name)
                .ok_or_else(|| {
                    diag!(SyntaxError, "`{}` is not a pad mode (constant, reflect, edge)", id.name).at(id.span)
                }),
            _ => Err(expected(e, "a pad mode (constant, reflect, edge)")),
        }
    }

    /// One axis or a list of axes, each an integer or a symbol name.
    fn axes(&self, e: &Expr) -> DResult<Vec<AxisRef>> {
        let one = |x: &Expr| -> DResult<AxisRef> {
            match x {
                Expr::Name(id) => self.sym(id).map(|_| AxisRef::Name(id.name.clone())),
                _ => self.int(x).map(AxisRef::Index).map_err(|_| expected(x, "an axis (integer or symbol name)")),
            }
        };
        match e {
            Expr::List(v, _) => v.iter().map(one).collect(),
            _ => Ok(vec![one(e)?]),
        }
    }
}

fn span_of(e: Option<&Expr>) -> Span {
    e.map(|e| e.span()).unwrap_or_default()
}

fn req<'e>(s: &Slots<'e>, k: usize) -> DResult<&'e Expr> {
    s.get(k).copied().flatten().ok_or_else(|| diag!(Internal, "required argument {k} was not bound"))
}

fn expected(e: &Expr, what: &str) -> crate::Diagnostic {
    diag!(SyntaxError, "expected {what} here").at(e.span())
}

fn binary_fn(op: BinOp) -> BinaryFn {
    match op {
        BinOp::Add => BinaryFn::Add,
        BinOp::Sub => BinaryFn::Sub,
        BinOp::Mul => BinaryFn::Mul,
        BinOp::Div => BinaryFn::Div,
        BinOp::Lt => BinaryFn::Lt,
        BinOp::Le => BinaryFn::Le,
        BinOp::Gt => BinaryFn::Gt,
        BinOp::Ge => BinaryFn::Ge,
        BinOp::Eq => BinaryFn::Eq,
        BinOp::Ne => BinaryFn::Ne,
    }
}

/// Folds `a op b` of two literals: comparisons give a bool, `/` a float,
/// otherwise a float if either is one.
fn fold(op: BinOp, a: Literal, b: Literal, span: Span) -> DResult<Literal> {
    let bools = a.kind == LitKind::Bool || b.kind == LitKind::Bool;
    let equality = matches!(op, BinOp::Eq | BinOp::Ne);
    if bools && !(equality && a.kind == b.kind) {
        return Err(diag!(DTypeMismatch, "`{}` is not defined on these literals", op.symbol()).at(span));
    }
    let (x, y) = (a.value, b.value);
    let cmp = |c: bool| Literal { value: f64::from(u8::from(c)), kind: LitKind::Bool, span };
    let kind = if a.kind == LitKind::Float || b.kind == LitKind::Float || op == BinOp::Div {
        LitKind::Float
    } else {
        LitKind::Int
    };
    let num = |v: f64| Literal { value: v, kind, span };
    Ok(match op {
        BinOp::Add => num(x + y),
        BinOp::Sub => num(x - y),
        BinOp::Mul => num(x * y),
        BinOp::Div => num(x / y),
        BinOp::Lt => cmp(x < y),
        BinOp::Le => cmp(x <= y),
        BinOp::Gt => cmp(x > y),
        BinOp::Ge => cmp(x >= y),
        BinOp::Eq => cmp(x == y),
        BinOp::Ne => cmp(x != y),
    })
}

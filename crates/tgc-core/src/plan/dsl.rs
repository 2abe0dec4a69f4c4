//! The Schedule DSL (`000` §12.6 and the extensions listed in the module
//! doc of [`crate::plan`]): lexer, parser and canonical printer.
//!
//! Lexical rules: a word is a run of `[A-Za-z0-9_.]` (axes `m.i.o`,
//! numbers `128`, `64x64`); punctuation is `=`, `;` and `->`; `//` starts
//! a comment to the end of the line. The graph language's lexer
//! (`frontend::lexer`) reads `m.i.o` as a malformed number, so the plan
//! has this small one. Statements are separated by `;`; a trailing `;`
//! and empty statements are allowed (§1.7's example ends each with `;`).

use crate::diag;
use crate::diag::{DResult, Span};

use super::*;

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Word(String),
    Assign,
    Semi,
    Arrow,
}

fn lex(src: &str) -> DResult<Vec<(Tok, Span)>> {
    let mut out = Vec::new();
    let (mut line, mut col) = (1u32, 1u32);
    let mut it = src.char_indices().peekable();
    let word_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.';
    while let Some(&(start, c)) = it.peek() {
        let span = |end: usize| Span { line, col, start: start as u32, end: end as u32, token: None };
        if c == '\n' {
            it.next();
            line += 1;
            col = 1;
        } else if c.is_whitespace() {
            it.next();
            col += 1;
        } else if src[start..].starts_with("//") {
            while it.peek().is_some_and(|&(_, c)| c != '\n') {
                it.next();
            }
        } else if word_char(c) {
            let mut end = start;
            while let Some(&(i, c)) = it.peek().filter(|&&(_, c)| word_char(c)) {
                end = i + c.len_utf8();
                it.next();
            }
            let n = (end - start) as u32;
            out.push((Tok::Word(src[start..end].to_string()), span(end)));
            col += n;
        } else if src[start..].starts_with("->") {
            it.next();
            it.next();
            out.push((Tok::Arrow, span(start + 2)));
            col += 2;
        } else if c == '=' || c == ';' {
            it.next();
            out.push((if c == '=' { Tok::Assign } else { Tok::Semi }, span(start + 1)));
            col += 1;
        } else {
            let end = start + c.len_utf8();
            return Err(diag!(SyntaxError, "unexpected character `{c}` in a schedule").at(span(end)));
        }
    }
    Ok(out)
}

/// The span from the start of `a` to the end of `b`.
fn join(a: Span, b: Span) -> Span {
    Span { end: b.end, ..a }
}

/// The tokens of one statement, read left to right.
struct Stmt<'a> {
    toks: &'a [(Tok, Span)],
    pos: usize,
    /// The statement keyword's span, for errors at its end.
    head: Span,
}

impl<'a> Stmt<'a> {
    fn last_span(&self) -> Span {
        self.toks.get(self.pos.saturating_sub(1)).map_or(self.head, |t| t.1)
    }

    fn at_end(&self) -> bool {
        self.pos >= self.toks.len()
    }

    fn word(&mut self, what: &str) -> DResult<Spanned<String>> {
        match self.toks.get(self.pos) {
            Some((Tok::Word(w), sp)) => {
                self.pos += 1;
                Ok(Spanned::at(w.clone(), *sp))
            }
            Some((t, sp)) => Err(diag!(SyntaxError, "expected {what}, found {}", describe(t)).at(*sp)),
            None => Err(diag!(SyntaxError, "expected {what} after `{}`", self.head_text()).at(self.last_span())),
        }
    }

    fn head_text(&self) -> String {
        match self.toks.first() {
            Some((Tok::Word(w), _)) => w.clone(),
            _ => String::new(),
        }
    }

    fn checked(&mut self, what: &str, ok: fn(&str) -> bool, rule: &str) -> DResult<Spanned<String>> {
        let w = self.word(what)?;
        if !ok(&w.value) {
            return Err(diag!(SyntaxError, "`{}` is not {what} ({rule})", w.value).or_at(w.span));
        }
        Ok(w)
    }

    fn axis(&mut self) -> DResult<Axis> {
        self.checked("an axis", is_axis_name, "`[a-z.]+`")
    }

    fn int(&mut self, what: &str) -> DResult<Spanned<u64>> {
        let w = self.word(what)?;
        let n = w.value.parse::<u64>().ok().filter(|_| w.value.bytes().all(|b| b.is_ascii_digit()));
        n.map(|n| Spanned { value: n, span: w.span })
            .ok_or_else(|| diag!(SyntaxError, "expected {what}, found `{}`", w.value).or_at(w.span))
    }

    fn keyword(&mut self, kw: &str) -> DResult<Span> {
        let w = self.word(&format!("`{kw}`"))?;
        if w.value != kw {
            return Err(diag!(SyntaxError, "expected `{kw}`, found `{}`", w.value).or_at(w.span));
        }
        Ok(w.span.unwrap_or(self.head))
    }

    /// `key=` (the `=` may be spaced).
    fn key(&mut self, key: &str) -> DResult<()> {
        self.keyword(key)?;
        self.punct(Tok::Assign, &format!("`=` after `{key}`"))
    }

    fn punct(&mut self, want: Tok, what: &str) -> DResult<()> {
        match self.toks.get(self.pos) {
            Some((t, _)) if *t == want => {
                self.pos += 1;
                Ok(())
            }
            Some((t, sp)) => Err(diag!(SyntaxError, "expected {what}, found {}", describe(t)).at(*sp)),
            None => Err(diag!(SyntaxError, "expected {what}").at(self.last_span())),
        }
    }

    fn peek_word(&self, w: &str) -> bool {
        matches!(self.toks.get(self.pos), Some((Tok::Word(x), _)) if x == w)
    }

    fn end(&self) -> DResult<()> {
        match self.toks.get(self.pos) {
            None => Ok(()),
            Some((t, sp)) => {
                Err(diag!(SyntaxError, "unexpected {} at the end of `{}`", describe(t), self.head_text()).at(*sp))
            }
        }
    }

    /// The span of the whole statement read so far.
    fn span(&self) -> Span {
        join(self.head, self.last_span())
    }
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Word(w) => format!("`{w}`"),
        Tok::Assign => "`=`".into(),
        Tok::Semi => "`;`".into(),
        Tok::Arrow => "`->`".into(),
    }
}

/// Statement keywords: §12.6's, then the extensions.
const KEYWORDS: [&str; 17] = [
    "split",
    "reorder",
    "fuse",
    "bind",
    "pipeline",
    "cache_read",
    "vectorize",
    "unroll",
    "predicate_tail",
    "epilogue",
    "algo_choice",
    "arch",
    "tile",
    "warp_tile",
    "layout_hint",
    "local_edge",
    "warp_specialize",
];

/// Parses Schedule DSL text into a [`Plan`].
///
/// Errors: `SyntaxError` at the offending token (unknown statement, a word
/// that is not an axis or an integer where one is needed, a once-only
/// statement given twice); `UnknownName` for a bind target outside §12.6's
/// list. What the grammar admits but a target cannot run is left to
/// [`validate`](super::validate).
pub fn parse_dsl(src: &str) -> DResult<Plan> {
    let toks = lex(src)?;
    let mut plan = Plan::default();
    for stmt in toks.split(|(t, _)| *t == Tok::Semi) {
        let Some((first, head)) = stmt.first() else { continue };
        let Tok::Word(kw) = first else {
            return Err(diag!(SyntaxError, "expected a statement, found {}", describe(first)).at(*head));
        };
        let mut s = Stmt { toks: stmt, pos: 1, head: *head };
        statement(&mut plan, kw, &mut s)?;
        s.end()?;
    }
    Ok(plan)
}

fn once<T>(slot: &mut Option<Spanned<T>>, value: T, s: &Stmt, kw: &str) -> DResult<()> {
    if slot.is_some() {
        return Err(diag!(SyntaxError, "`{kw}` is given twice; a plan has one").at(s.head));
    }
    *slot = Some(Spanned::at(value, s.span()));
    Ok(())
}

fn statement(plan: &mut Plan, kw: &str, s: &mut Stmt) -> DResult<()> {
    match kw {
        "split" | "unroll" => {
            let axis = s.axis()?;
            let factor = s.int("an integer factor")?;
            let step = if kw == "split" { LoopStep::Split { axis, factor } } else { LoopStep::Unroll { axis, factor } };
            plan.loops.push(Spanned::at(step, s.span()));
        }
        "reorder" => {
            let axes = axes(s)?;
            plan.loops.push(Spanned::at(LoopStep::Reorder { axes }, s.span()));
        }
        "fuse" => {
            let (outer, inner) = (s.axis()?, s.axis()?);
            s.punct(Tok::Arrow, "`->`")?;
            let into = s.axis()?;
            plan.loops.push(Spanned::at(LoopStep::Fuse { outer, inner, into }, s.span()));
        }
        "bind" => {
            let axis = s.axis()?;
            let w = s.word("a bind target")?;
            let target = BindTarget::parse(&w.value).ok_or_else(|| {
                let known: Vec<&str> = BindTarget::ALL.iter().map(|t| t.as_str()).collect();
                diag!(UnknownName, "unknown bind target `{}`; expected one of {}", w.value, known.join(", "))
                    .or_at(w.span)
            })?;
            plan.bind.push(Spanned::at(Bind { axis, target: Spanned { value: target, span: w.span } }, s.span()));
        }
        "pipeline" => {
            let axis = if s.peek_word("stages") { None } else { Some(s.axis()?) };
            s.key("stages")?;
            let stages = s.int("the number of stages")?;
            once(&mut plan.pipeline, Pipeline { axis, stages }, s, kw)?;
        }
        "cache_read" => {
            let tensor = s.checked("a tensor name", is_ident, "an identifier")?;
            s.keyword("smem")?;
            s.key("at")?;
            let at = s.axis()?;
            let pingpong = if s.at_end() {
                None
            } else {
                s.key("pingpong")?;
                Some(boolean(s)?)
            };
            plan.cache.push(Spanned::at(CacheRead { tensor, at, pingpong }, s.span()));
        }
        "vectorize" => {
            let axis = s.axis()?;
            let width = s.int("a vector width")?;
            once(&mut plan.vectorize, Vectorize { axis, width }, s, kw)?;
        }
        "predicate_tail" => plan.predicate_tail.extend(axes(s)?),
        "epilogue" => loop {
            let op = s.checked("an epilogue op", is_ident, "an identifier")?;
            plan.epilogue.push(Spanned { value: Epilogue::parse(&op.value, op.span)?, span: op.span });
            if s.at_end() {
                break;
            }
        },
        "algo_choice" => {
            let key = s.checked("an algorithm key", is_value_word, "`[a-z0-9_]+`")?;
            let value = s.checked("an algorithm", is_value_word, "`[a-z0-9_]+`")?;
            plan.algo_choice.push(Spanned::at(AlgoChoice::parse(&key, &value)?, s.span()));
        }
        "arch" => {
            let a = s.checked("a target name", is_value_word, "`[a-z0-9_]+`")?;
            once(&mut plan.arch, a.value, s, kw)?;
        }
        "tile" => {
            let t = [s.int("BM")?.value, s.int("BN")?.value, s.int("BK")?.value];
            once(&mut plan.tile, t, s, kw)?;
        }
        "warp_tile" => {
            let w = s.word("a warp tile such as `64x64`")?;
            let t = parse_warp_tile(&w.value)
                .ok_or_else(|| diag!(SyntaxError, "expected a warp tile such as `64x64`, found `{}`", w.value))
                .map_err(|e| e.or_at(w.span))?;
            once(&mut plan.warp_tile, t, s, kw)?;
        }
        "warp_specialize" => {
            let spec = specialize(s)?;
            once(&mut plan.warp_specialize, spec, s, kw)?
        }
        "layout_hint" => {
            let key = s.checked("a hint name", is_ident, "an identifier")?.value;
            let v = s.checked("a hint value", is_hint_word, "`[A-Za-z0-9_]+`")?.value;
            let value = match v.as_str() {
                "true" => HintValue::Bool(true),
                "false" => HintValue::Bool(false),
                _ => HintValue::Word(v),
            };
            plan.layout_hints.push(Spanned::at(LayoutHint { key, value }, s.span()));
        }
        "local_edge" => {
            let from = s.checked("a region op name", is_ident, "an identifier")?.value;
            let to = s.checked("a region op name", is_ident, "an identifier")?.value;
            let b = s.word("a buffer (`reg`, `smem_ring`, `gmem`)")?;
            let buffer = Buffer::parse(&b.value)
                .ok_or_else(|| diag!(UnknownName, "unknown buffer `{}`; expected reg, smem_ring or gmem", b.value))
                .map_err(|e| e.or_at(b.span))?;
            let depth = if s.at_end() {
                None
            } else {
                s.key("depth")?;
                Some(s.int("a ring depth")?.value)
            };
            plan.local_edges.push(Spanned::at(LocalEdge { from, to, buffer, depth }, s.span()));
        }
        _ => {
            return Err(diag!(
                SyntaxError,
                "unknown schedule statement `{kw}`; expected one of {}",
                KEYWORDS.join(", ")
            )
            .at(s.head))
        }
    }
    Ok(())
}

/// The options of `warp_specialize`: `persistent` and `cluster=N` (N 1
/// or 2), each at most once, in either order.
fn specialize(s: &mut Stmt) -> DResult<Specialize> {
    let mut spec = Specialize::default();
    let (mut persistent, mut cluster) = (false, false);
    while !s.at_end() {
        let twice = |what: &str, at: Span| diag!(SyntaxError, "`{what}` is given twice in `warp_specialize`").at(at);
        if s.peek_word("persistent") {
            let at = s.keyword("persistent")?;
            if std::mem::replace(&mut persistent, true) {
                return Err(twice("persistent", at));
            }
            spec.persistent = true;
        } else if s.peek_word("cluster") {
            let at = s.keyword("cluster")?;
            s.punct(Tok::Assign, "`=` after `cluster`")?;
            let n = s.int("the CTAs per cluster (`cluster=1` or `cluster=2`)")?;
            if std::mem::replace(&mut cluster, true) {
                return Err(twice("cluster", at));
            }
            spec.cluster = cluster_size(n.value).ok_or_else(|| {
                diag!(SyntaxError, "a cluster of {} CTAs; write cluster=1 or 2", n.value).or_at(n.span)
            })?;
        } else {
            let w = s.word("`persistent` or `cluster=N`")?;
            return Err(diag!(
                SyntaxError,
                "expected `persistent` or `cluster=N` after `warp_specialize`, found `{}`",
                w.value
            )
            .or_at(w.span));
        }
    }
    Ok(spec)
}

/// `n` as a [`Specialize::cluster`]: 1 or 2.
pub(crate) fn cluster_size(n: u64) -> Option<u32> {
    matches!(n, 1 | 2).then_some(n as u32)
}

/// `axis+`.
fn axes(s: &mut Stmt) -> DResult<Vec<Axis>> {
    let mut v = vec![s.axis()?];
    while !s.at_end() {
        v.push(s.axis()?);
    }
    Ok(v)
}

fn boolean(s: &mut Stmt) -> DResult<bool> {
    let w = s.word("`true` or `false`")?;
    match w.value.as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(diag!(SyntaxError, "expected `true` or `false`, found `{}`", w.value).or_at(w.span)),
    }
}

pub(crate) fn is_hint_word(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// `64x32` → `[64, 32]`.
pub(crate) fn parse_warp_tile(s: &str) -> Option<[u64; 2]> {
    let (a, b) = s.split_once('x')?;
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit());
    (digits(a) && digits(b)).then(|| Some([a.parse().ok()?, b.parse().ok()?])).flatten()
}

/// Prints `plan` as canonical DSL text: one statement a line, each ending in
/// `;`, in the order `arch`, `tile`, `warp_tile`, loop steps (in their
/// order), `bind`, `pipeline`, `cache_read`, `vectorize`, `predicate_tail`,
/// `epilogue`, `algo_choice`, `layout_hint`, `local_edge`, `warp_specialize`.
pub fn print_dsl(plan: &Plan) -> String {
    let mut lines: Vec<String> = Vec::new();
    if let Some(a) = &plan.arch {
        lines.push(format!("arch {}", a.value));
    }
    if let Some(t) = &plan.tile {
        let [m, n, k] = t.value;
        lines.push(format!("tile {m} {n} {k}"));
    }
    if let Some(w) = &plan.warp_tile {
        lines.push(format!("warp_tile {}x{}", w.value[0], w.value[1]));
    }
    for step in &plan.loops {
        lines.push(match &step.value {
            LoopStep::Split { axis, factor } => format!("split {} {}", axis.value, factor.value),
            LoopStep::Unroll { axis, factor } => format!("unroll {} {}", axis.value, factor.value),
            LoopStep::Reorder { axes } => format!("reorder {}", join_axes(axes)),
            LoopStep::Fuse { outer, inner, into } => format!("fuse {} {} -> {}", outer.value, inner.value, into.value),
        });
    }
    for b in &plan.bind {
        lines.push(format!("bind {} {}", b.value.axis.value, b.value.target.value));
    }
    if let Some(p) = &plan.pipeline {
        let axis = p.value.axis.as_ref().map_or(String::new(), |a| format!("{} ", a.value));
        lines.push(format!("pipeline {axis}stages={}", p.value.stages.value));
    }
    for c in &plan.cache {
        let pp = c.value.pingpong.map_or(String::new(), |b| format!(" pingpong={b}"));
        lines.push(format!("cache_read {} smem at={}{pp}", c.value.tensor.value, c.value.at.value));
    }
    if let Some(v) = &plan.vectorize {
        lines.push(format!("vectorize {} {}", v.value.axis.value, v.value.width.value));
    }
    if !plan.predicate_tail.is_empty() {
        lines.push(format!("predicate_tail {}", join_axes(&plan.predicate_tail)));
    }
    if !plan.epilogue.is_empty() {
        let ops: Vec<&str> = plan.epilogue.iter().map(|op| op.value.name()).collect();
        lines.push(format!("epilogue {}", ops.join(" ")));
    }
    for a in &plan.algo_choice {
        lines.push(format!("algo_choice {} {}", a.value.key(), a.value));
    }
    for h in &plan.layout_hints {
        let v = match &h.value.value {
            HintValue::Bool(b) => b.to_string(),
            HintValue::Word(w) => w.clone(),
        };
        lines.push(format!("layout_hint {} {v}", h.value.key));
    }
    for e in &plan.local_edges {
        let d = e.value.depth.map_or(String::new(), |d| format!(" depth={d}"));
        lines.push(format!("local_edge {} {} {}{d}", e.value.from, e.value.to, e.value.buffer.as_str()));
    }
    if let Some(w) = &plan.warp_specialize {
        let persistent = if w.value.persistent { " persistent" } else { "" };
        let cluster = if w.value.cluster != 1 { format!(" cluster={}", w.value.cluster) } else { String::new() };
        lines.push(format!("warp_specialize{persistent}{cluster}"));
    }
    lines.iter().map(|l| format!("{l};\n")).collect()
}

fn join_axes(v: &[Spanned<String>]) -> String {
    v.iter().map(|a| a.value.as_str()).collect::<Vec<_>>().join(" ")
}

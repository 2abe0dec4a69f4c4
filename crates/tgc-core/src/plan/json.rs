//! The JSON form of a Schedule Plan (`000` §12.5, with the `loops` and
//! `pipeline_axis` keys of the module doc of [`crate::plan`]).
//!
//! serde_json reads and writes the document; a small scan of the same text
//! records where every key and value sits (by JSON pointer), so that
//! unknown or repeated keys and, later, validation errors point at the
//! text. `//` comments are allowed, as in Tiny IR JSON.

use std::collections::HashMap;

use serde_json::{json, Map, Value};

use crate::diag;
use crate::diag::span_of;
use crate::diag::{DResult, Diagnostic, Span};
use crate::tiny::json::source::{span_at_line_col, strip_comments};

use super::dsl::{cluster_size, is_hint_word, parse_warp_tile};
use super::*;

/// Reads a plan from JSON text.
///
/// Errors: `SyntaxError` at the position of malformed JSON, an unknown or
/// repeated key, or a value of the wrong kind; `UnknownName` for a bind
/// target or buffer outside the spec's lists.
pub fn from_json(text: &str) -> DResult<Plan> {
    let clean = strip_comments(text);
    let root: Value = serde_json::from_str(&clean).map_err(|e| {
        let msg = e.to_string();
        let msg = msg.split(" at line ").next().unwrap_or(&msg).to_string();
        diag!(SyntaxError, "malformed JSON: {msg}").at(span_at_line_col(text, e.line(), e.column()))
    })?;
    let mut spans = Spans { text, map: HashMap::new() };
    spans.value(clean.as_bytes(), &mut 0, String::new())?;
    Reader { spans }.plan(&root)
}

/// Key and value spans by JSON pointer (`/bind/m.o`, `/cache/0/at`).
struct Spans<'a> {
    text: &'a str,
    map: HashMap<String, (Span, Span)>,
}

fn ws(b: &[u8], i: &mut usize) {
    while *i < b.len() && b[*i].is_ascii_whitespace() {
        *i += 1;
    }
}

fn pointer(base: &str, key: &str) -> String {
    format!("{base}/{}", key.replace('~', "~0").replace('/', "~1"))
}

impl Spans<'_> {
    /// Scans the value at `b[*i..]` (text serde_json already accepted).
    fn value(&mut self, b: &[u8], i: &mut usize, ptr: String) -> DResult<Span> {
        ws(b, i);
        let start = *i;
        match b.get(*i) {
            Some(b'{') => {
                *i += 1;
                loop {
                    ws(b, i);
                    if b.get(*i) == Some(&b'}') {
                        break;
                    }
                    let ks = *i;
                    self.string(b, i);
                    let key: String = serde_json::from_slice(&b[ks..*i]).unwrap_or_default();
                    let key_span = span_of(self.text, ks, *i);
                    ws(b, i);
                    *i += 1; // ':'
                    let p = pointer(&ptr, &key);
                    if self.map.contains_key(&p) {
                        return Err(diag!(SyntaxError, "key `{key}` is given twice").at(key_span));
                    }
                    let v = self.value(b, i, p.clone())?;
                    self.map.insert(p, (key_span, v));
                    ws(b, i);
                    if b.get(*i) == Some(&b',') {
                        *i += 1;
                    }
                }
                *i += 1;
            }
            Some(b'[') => {
                *i += 1;
                let mut k = 0;
                loop {
                    ws(b, i);
                    if b.get(*i) == Some(&b']') {
                        break;
                    }
                    let p = format!("{ptr}/{k}");
                    let v = self.value(b, i, p.clone())?;
                    self.map.insert(p, (v, v));
                    k += 1;
                    ws(b, i);
                    if b.get(*i) == Some(&b',') {
                        *i += 1;
                    }
                }
                *i += 1;
            }
            Some(b'"') => self.string(b, i),
            _ => {
                while *i < b.len() && !b",]} \t\r\n".contains(&b[*i]) {
                    *i += 1;
                }
            }
        }
        Ok(span_of(self.text, start, *i))
    }

    fn string(&self, b: &[u8], i: &mut usize) {
        *i += 1;
        while *i < b.len() && b[*i] != b'"' {
            *i += if b[*i] == b'\\' { 2 } else { 1 };
        }
        *i += 1;
    }
}

struct Reader<'a> {
    spans: Spans<'a>,
}

impl Reader<'_> {
    fn at(&self, ptr: &str) -> Option<Span> {
        self.spans.map.get(ptr).map(|s| s.1)
    }

    fn key_at(&self, ptr: &str) -> Option<Span> {
        self.spans.map.get(ptr).map(|s| s.0)
    }

    fn bad(&self, ptr: &str, want: &str, got: &Value) -> Diagnostic {
        diag!(SyntaxError, "`{}` must be {want}, got {got}", show(ptr)).or_at(self.at(ptr))
    }

    /// The fields of the object at `ptr`, rejecting keys outside `allowed`.
    fn object<'v>(&self, v: &'v Value, ptr: &str, allowed: &[&str]) -> DResult<&'v Map<String, Value>> {
        let m = v.as_object().ok_or_else(|| self.bad(ptr, "an object", v))?;
        if !allowed.is_empty() {
            if let Some(k) = m.keys().find(|k| !allowed.contains(&k.as_str())) {
                let p = pointer(ptr, k);
                return Err(diag!(
                    SyntaxError,
                    "unknown key `{k}` in {}; expected one of {}",
                    where_(ptr),
                    allowed.join(", ")
                )
                .or_at(self.key_at(&p)));
            }
        }
        Ok(m)
    }

    fn array<'v>(&self, v: &'v Value, ptr: &str) -> DResult<&'v Vec<Value>> {
        v.as_array().ok_or_else(|| self.bad(ptr, "an array", v))
    }

    fn field<'v>(&self, m: &'v Map<String, Value>, ptr: &str, key: &str) -> DResult<&'v Value> {
        m.get(key).ok_or_else(|| diag!(SyntaxError, "missing key `{key}` in {}", where_(ptr)).or_at(self.at(ptr)))
    }

    fn string(&self, v: &Value, ptr: &str, ok: fn(&str) -> bool, rule: &str) -> DResult<Spanned<String>> {
        match v.as_str() {
            Some(s) if ok(s) => Ok(Spanned { value: s.to_string(), span: self.at(ptr) }),
            _ => Err(self.bad(ptr, rule, v)),
        }
    }

    fn axis(&self, v: &Value, ptr: &str) -> DResult<Axis> {
        self.string(v, ptr, is_axis_name, "an axis name (`[a-z.]+`)")
    }

    fn uint(&self, v: &Value, ptr: &str) -> DResult<Spanned<u64>> {
        v.as_u64()
            .map(|n| Spanned { value: n, span: self.at(ptr) })
            .ok_or_else(|| self.bad(ptr, "an unsigned integer", v))
    }

    fn boolean(&self, v: &Value, ptr: &str) -> DResult<bool> {
        v.as_bool().ok_or_else(|| self.bad(ptr, "`true` or `false`", v))
    }

    fn plan(&self, root: &Value) -> DResult<Plan> {
        let m = self.object(root, "", &KEYS)?;
        let mut plan = Plan::default();
        for (k, v) in m {
            let p = pointer("", k);
            match k.as_str() {
                "arch" => plan.arch = Some(self.string(v, &p, is_value_word, "a target name such as \"sm80\"")?),
                "tile" => {
                    let a = self.array(v, &p)?;
                    let [m, n, k] = a.as_slice() else { return Err(self.bad(&p, "[BM, BN, BK]", v)) };
                    let t = [
                        self.uint(m, &format!("{p}/0"))?,
                        self.uint(n, &format!("{p}/1"))?,
                        self.uint(k, &format!("{p}/2"))?,
                    ];
                    plan.tile = Some(Spanned { value: t.map(|x| x.value), span: self.at(&p) });
                }
                "warp_tile" => {
                    let t = v
                        .as_str()
                        .and_then(parse_warp_tile)
                        .ok_or_else(|| self.bad(&p, "a warp tile such as \"64x64\"", v))?;
                    plan.warp_tile = Some(Spanned { value: t, span: self.at(&p) });
                }
                "stages" | "pipeline_axis" => {}
                "loops" => {
                    for (i, s) in self.array(v, &p)?.iter().enumerate() {
                        plan.loops.push(self.loop_step(s, &format!("{p}/{i}"))?);
                    }
                }
                "bind" => {
                    for (axis, t) in self.object(v, &p, &[])? {
                        let q = pointer(&p, axis);
                        let key_span = self.key_at(&q);
                        if !is_axis_name(axis) {
                            return Err(diag!(SyntaxError, "`{axis}` is not an axis name (`[a-z.]+`)").or_at(key_span));
                        }
                        let target = self.string(t, &q, |_| true, "a bind target")?;
                        let tv = BindTarget::parse(&target.value).ok_or_else(|| {
                            diag!(UnknownName, "unknown bind target `{}`", target.value).or_at(target.span)
                        })?;
                        let span = key_span.zip(target.span).map(|(a, b)| Span { end: b.end, ..a });
                        let bind = Bind {
                            axis: Spanned { value: axis.clone(), span: key_span },
                            target: Spanned { value: tv, span: target.span },
                        };
                        plan.bind.push(Spanned { value: bind, span });
                    }
                }
                "cache" => {
                    for (i, c) in self.array(v, &p)?.iter().enumerate() {
                        let q = format!("{p}/{i}");
                        let o = self.object(c, &q, &["tensor", "where", "at", "pingpong"])?;
                        let tensor = self.string(
                            self.field(o, &q, "tensor")?,
                            &format!("{q}/tensor"),
                            is_ident,
                            "a tensor name",
                        )?;
                        self.string(self.field(o, &q, "where")?, &format!("{q}/where"), |w| w == "smem", "\"smem\"")?;
                        let at = self.axis(self.field(o, &q, "at")?, &format!("{q}/at"))?;
                        let pingpong =
                            o.get("pingpong").map(|b| self.boolean(b, &format!("{q}/pingpong"))).transpose()?;
                        plan.cache.push(Spanned { value: CacheRead { tensor, at, pingpong }, span: self.at(&q) });
                    }
                }
                "vectorize" => {
                    let o = self.object(v, &p, &["axis", "width"])?;
                    let axis = self.axis(self.field(o, &p, "axis")?, &format!("{p}/axis"))?;
                    let width = self.uint(self.field(o, &p, "width")?, &format!("{p}/width"))?;
                    plan.vectorize = Some(Spanned { value: Vectorize { axis, width }, span: self.at(&p) });
                }
                "predicate_tail" => {
                    for (i, a) in self.array(v, &p)?.iter().enumerate() {
                        plan.predicate_tail.push(self.axis(a, &format!("{p}/{i}"))?);
                    }
                }
                "epilogue" => {
                    for (i, a) in self.array(v, &p)?.iter().enumerate() {
                        let op = self.string(a, &format!("{p}/{i}"), is_ident, "an epilogue op name")?;
                        plan.epilogue.push(Spanned { value: Epilogue::parse(&op.value, op.span)?, span: op.span });
                    }
                }
                "algo_choice" => {
                    for (key, val) in self.object(v, &p, &[])? {
                        let q = pointer(&p, key);
                        let key_span = self.key_at(&q);
                        if !is_value_word(key) {
                            return Err(
                                diag!(SyntaxError, "`{key}` is not an algorithm key (`[a-z0-9_]+`)").or_at(key_span)
                            );
                        }
                        let value = self.string(val, &q, is_value_word, "an algorithm name (`[a-z0-9_]+`)")?;
                        let span = key_span.zip(value.span).map(|(a, b)| Span { end: b.end, ..a });
                        let key = Spanned { value: key.clone(), span: key_span };
                        plan.algo_choice.push(Spanned { value: AlgoChoice::parse(&key, &value)?, span });
                    }
                }
                "layout_hints" => {
                    for (key, val) in self.object(v, &p, &[])? {
                        let q = pointer(&p, key);
                        if !is_ident(key) {
                            return Err(diag!(SyntaxError, "`{key}` is not a hint name").or_at(self.key_at(&q)));
                        }
                        let value = match val {
                            Value::Bool(b) => HintValue::Bool(*b),
                            Value::String(s) if is_hint_word(s) && s != "true" && s != "false" => {
                                HintValue::Word(s.clone())
                            }
                            _ => return Err(self.bad(&q, "a boolean or a word (`[A-Za-z0-9_]+`)", val)),
                        };
                        plan.layout_hints
                            .push(Spanned { value: LayoutHint { key: key.clone(), value }, span: self.key_at(&q) });
                    }
                }
                "local_edges" => {
                    for (i, e) in self.array(v, &p)?.iter().enumerate() {
                        let q = format!("{p}/{i}");
                        let o = self.object(e, &q, &["from", "to", "buffer", "depth"])?;
                        let from = self
                            .string(self.field(o, &q, "from")?, &format!("{q}/from"), is_ident, "a region op name")?
                            .value;
                        let to = self
                            .string(self.field(o, &q, "to")?, &format!("{q}/to"), is_ident, "a region op name")?
                            .value;
                        let b =
                            self.string(self.field(o, &q, "buffer")?, &format!("{q}/buffer"), |_| true, "a buffer")?;
                        let buffer = Buffer::parse(&b.value).ok_or_else(|| {
                            diag!(UnknownName, "unknown buffer `{}`; expected reg, smem_ring or gmem", b.value)
                                .or_at(b.span)
                        })?;
                        let depth =
                            o.get("depth").map(|d| self.uint(d, &format!("{q}/depth"))).transpose()?.map(|d| d.value);
                        plan.local_edges
                            .push(Spanned { value: LocalEdge { from, to, buffer, depth }, span: self.at(&q) });
                    }
                }
                "warp_specialize" => {
                    let value = match v {
                        Value::Bool(b) => b.then_some(Specialize::default()),
                        _ => {
                            let o = self.object(v, &p, &["persistent", "cluster"])?;
                            let persistent = o
                                .get("persistent")
                                .map(|b| self.boolean(b, &format!("{p}/persistent")))
                                .transpose()?
                                .unwrap_or(false);
                            let cluster = match o.get("cluster") {
                                None => 1,
                                Some(c) => {
                                    let q = format!("{p}/cluster");
                                    let n = self.uint(c, &q)?;
                                    cluster_size(n.value).ok_or_else(|| {
                                        diag!(SyntaxError, "a cluster of {} CTAs; write cluster=1 or 2", n.value)
                                            .or_at(n.span)
                                    })?
                                }
                            };
                            Some(Specialize { persistent, cluster })
                        }
                    };
                    plan.warp_specialize = value.map(|value| Spanned { value, span: self.at(&p) });
                }
                _ => unreachable!("`object` admits only KEYS"),
            }
        }
        let axis = m.get("pipeline_axis").map(|a| self.axis(a, "/pipeline_axis")).transpose()?;
        match (m.get("stages"), axis) {
            (Some(s), axis) => {
                let stages = self.uint(s, "/stages")?;
                plan.pipeline = Some(Spanned { span: stages.span, value: Pipeline { axis, stages } });
            }
            (None, Some(a)) => return Err(diag!(SyntaxError, "`pipeline_axis` without `stages`").or_at(a.span)),
            (None, None) => {}
        }
        Ok(plan)
    }

    fn loop_step(&self, v: &Value, p: &str) -> DResult<Spanned<LoopStep>> {
        let op = v.get("op").and_then(Value::as_str).unwrap_or("");
        let step = match op {
            "split" | "unroll" => {
                let o = self.object(v, p, &["op", "axis", "factor"])?;
                let axis = self.axis(self.field(o, p, "axis")?, &format!("{p}/axis"))?;
                let factor = self.uint(self.field(o, p, "factor")?, &format!("{p}/factor"))?;
                if op == "split" {
                    LoopStep::Split { axis, factor }
                } else {
                    LoopStep::Unroll { axis, factor }
                }
            }
            "reorder" => {
                let o = self.object(v, p, &["op", "axes"])?;
                let q = format!("{p}/axes");
                let a = self.array(self.field(o, p, "axes")?, &q)?;
                let axes = a
                    .iter()
                    .enumerate()
                    .map(|(i, x)| self.axis(x, &format!("{q}/{i}")))
                    .collect::<DResult<Vec<_>>>()?;
                if axes.is_empty() {
                    return Err(self.bad(&q, "a non-empty list of axes", &Value::Array(vec![])));
                }
                LoopStep::Reorder { axes }
            }
            "fuse" => {
                let o = self.object(v, p, &["op", "axes", "into"])?;
                let q = format!("{p}/axes");
                let a = self.field(o, p, "axes")?;
                let [x, y] = self.array(a, &q)?.as_slice() else { return Err(self.bad(&q, "two axes", a)) };
                let (outer, inner) = (self.axis(x, &format!("{q}/0"))?, self.axis(y, &format!("{q}/1"))?);
                let into = self.axis(self.field(o, p, "into")?, &format!("{p}/into"))?;
                LoopStep::Fuse { outer, inner, into }
            }
            _ => {
                let at = self.key_at(&format!("{p}/op")).or(self.at(p));
                return Err(diag!(SyntaxError, "a loop step needs `op`: split, reorder, fuse or unroll").or_at(at));
            }
        };
        Ok(Spanned { value: step, span: self.at(p) })
    }
}

/// The top-level keys: §12.5's, then `loops`, `pipeline_axis` and
/// `warp_specialize`.
const KEYS: [&str; 15] = [
    "tile",
    "stages",
    "bind",
    "warp_tile",
    "cache",
    "vectorize",
    "predicate_tail",
    "epilogue",
    "arch",
    "layout_hints",
    "algo_choice",
    "local_edges",
    "loops",
    "pipeline_axis",
    "warp_specialize",
];

/// `/cache/0/at` → `cache[0].at`, for messages.
fn show(ptr: &str) -> String {
    let mut s = String::new();
    for seg in ptr.split('/').skip(1) {
        if seg.bytes().all(|b| b.is_ascii_digit()) && !seg.is_empty() {
            s.push_str(&format!("[{seg}]"));
        } else {
            if !s.is_empty() {
                s.push('.');
            }
            s.push_str(&seg.replace("~1", "/").replace("~0", "~"));
        }
    }
    s
}

fn where_(ptr: &str) -> String {
    if ptr.is_empty() {
        "the plan".to_string()
    } else {
        format!("`{}`", show(ptr))
    }
}

/// Prints `plan` as JSON, keys in §12.5's order then `loops` and
/// `pipeline_axis`; absent fields and empty lists are left out.
pub fn to_json(plan: &Plan) -> String {
    let mut m = Map::new();
    if let Some(t) = &plan.tile {
        m.insert("tile".into(), json!(t.value));
    }
    if let Some(p) = &plan.pipeline {
        m.insert("stages".into(), json!(p.value.stages.value));
    }
    if !plan.bind.is_empty() {
        let b: Map<String, Value> =
            plan.bind.iter().map(|b| (b.value.axis.value.clone(), json!(b.value.target.value.as_str()))).collect();
        m.insert("bind".into(), Value::Object(b));
    }
    if let Some(w) = &plan.warp_tile {
        m.insert("warp_tile".into(), json!(format!("{}x{}", w.value[0], w.value[1])));
    }
    if !plan.cache.is_empty() {
        let c: Vec<Value> = plan
            .cache
            .iter()
            .map(|c| {
                let mut o = Map::new();
                o.insert("tensor".into(), json!(c.value.tensor.value));
                o.insert("where".into(), json!("smem"));
                o.insert("at".into(), json!(c.value.at.value));
                if let Some(b) = c.value.pingpong {
                    o.insert("pingpong".into(), json!(b));
                }
                Value::Object(o)
            })
            .collect();
        m.insert("cache".into(), Value::Array(c));
    }
    if let Some(v) = &plan.vectorize {
        m.insert("vectorize".into(), json!({"axis": v.value.axis.value, "width": v.value.width.value}));
    }
    let words = |v: &[Spanned<String>]| Value::Array(v.iter().map(|a| json!(a.value)).collect());
    if !plan.predicate_tail.is_empty() {
        m.insert("predicate_tail".into(), words(&plan.predicate_tail));
    }
    if !plan.epilogue.is_empty() {
        m.insert("epilogue".into(), Value::Array(plan.epilogue.iter().map(|op| json!(op.value.name())).collect()));
    }
    if let Some(a) = &plan.arch {
        m.insert("arch".into(), json!(a.value));
    }
    if !plan.layout_hints.is_empty() {
        let h: Map<String, Value> = plan
            .layout_hints
            .iter()
            .map(|h| {
                let v = match &h.value.value {
                    HintValue::Bool(b) => json!(b),
                    HintValue::Word(w) => json!(w),
                };
                (h.value.key.clone(), v)
            })
            .collect();
        m.insert("layout_hints".into(), Value::Object(h));
    }
    if !plan.algo_choice.is_empty() {
        let a: Map<String, Value> =
            plan.algo_choice.iter().map(|a| (a.value.key().to_string(), json!(a.value.name()))).collect();
        m.insert("algo_choice".into(), Value::Object(a));
    }
    if !plan.local_edges.is_empty() {
        let e: Vec<Value> = plan
            .local_edges
            .iter()
            .map(|e| {
                let mut o = Map::new();
                o.insert("from".into(), json!(e.value.from));
                o.insert("to".into(), json!(e.value.to));
                o.insert("buffer".into(), json!(e.value.buffer.as_str()));
                if let Some(d) = e.value.depth {
                    o.insert("depth".into(), json!(d));
                }
                Value::Object(o)
            })
            .collect();
        m.insert("local_edges".into(), Value::Array(e));
    }
    if let Some(w) = &plan.warp_specialize {
        let v = if w.value == Specialize::default() {
            json!(true)
        } else {
            let mut o = Map::new();
            if w.value.persistent {
                o.insert("persistent".into(), json!(true));
            }
            if w.value.cluster != 1 {
                o.insert("cluster".into(), json!(w.value.cluster));
            }
            Value::Object(o)
        };
        m.insert("warp_specialize".into(), v);
    }
    if !plan.loops.is_empty() {
        let l: Vec<Value> = plan
            .loops
            .iter()
            .map(|s| match &s.value {
                LoopStep::Split { axis, factor } => json!({"op": "split", "axis": axis.value, "factor": factor.value}),
                LoopStep::Unroll { axis, factor } => {
                    json!({"op": "unroll", "axis": axis.value, "factor": factor.value})
                }
                LoopStep::Reorder { axes } => json!({"op": "reorder", "axes": words(axes)}),
                LoopStep::Fuse { outer, inner, into } => {
                    json!({"op": "fuse", "axes": [outer.value, inner.value], "into": into.value})
                }
            })
            .collect();
        m.insert("loops".into(), Value::Array(l));
    }
    if let Some(a) = plan.pipeline.as_ref().and_then(|p| p.value.axis.as_ref()) {
        m.insert("pipeline_axis".into(), json!(a.value));
    }
    let mut s = serde_json::to_string_pretty(&Value::Object(m)).unwrap_or_default();
    s.push('\n');
    s
}

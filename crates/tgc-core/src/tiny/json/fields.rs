//! Typed reads of JSON object fields; every failure is a `SyntaxError` that
//! names the field (`arg.result_shape[2]`) as the first backquoted text of
//! its message, where `load_json` finds it to give the error a line and
//! column.

use std::cell::RefCell;

use serde_json::{Map, Value};

use crate::diag;
use crate::diag::DResult;
use crate::sym::Dim;
use crate::DType;

/// An axis given by index (negative counts from the end) or by dimension name.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum AxisRef {
    Index(i64),
    Name(String),
}

/// The fields of one JSON object, remembering which were read so that
/// [`Fields::finish`] can reject unknown ones.
pub(super) struct Fields<'a> {
    obj: &'a Map<String, Value>,
    what: String,
    used: RefCell<Vec<&'a str>>,
}

fn bad(path: &str, want: &str, got: &Value) -> crate::Diagnostic {
    diag!(SyntaxError, "`{path}` must be {want}, got {got}")
}

/// Reads a dimension: an integer or a string in `Dim::parse` syntax.
pub(super) fn dim(v: &Value, path: &str) -> DResult<Dim> {
    match v {
        Value::Number(n) => n.as_i64().map(Dim::int).ok_or_else(|| bad(path, "an integer or a dimension name", v)),
        Value::String(s) => Dim::parse(s).map_err(|m| diag!(SyntaxError, "`{path}`: {m}")),
        _ => Err(bad(path, "an integer or a dimension name", v)),
    }
}

/// Reads a number; `"inf"`, `"-inf"` and `"nan"` stand for the values JSON
/// numbers cannot hold.
pub(super) fn number(v: &Value, path: &str) -> DResult<f64> {
    match v {
        Value::Number(n) => n.as_f64().ok_or_else(|| bad(path, "a number", v)),
        Value::String(s) if s == "inf" => Ok(f64::INFINITY),
        Value::String(s) if s == "-inf" => Ok(f64::NEG_INFINITY),
        Value::String(s) if s == "nan" => Ok(f64::NAN),
        _ => Err(bad(path, "a number", v)),
    }
}

impl<'a> Fields<'a> {
    /// The fields of `obj`, called `what` in messages (`arg`, `values.A`).
    pub(super) fn new(obj: &'a Map<String, Value>, what: impl Into<String>) -> Fields<'a> {
        Fields { obj, what: what.into(), used: RefCell::new(Vec::new()) }
    }

    /// The object at `v`, which must be one.
    pub(super) fn of(v: &'a Value, what: impl Into<String>) -> DResult<Fields<'a>> {
        let what = what.into();
        match v {
            Value::Object(m) => Ok(Fields::new(m, what)),
            _ => Err(bad(&what, "an object", v)),
        }
    }

    /// `what.key`, for messages.
    pub(super) fn path(&self, key: &str) -> String {
        format!("{}.{key}", self.what)
    }

    pub(super) fn get(&self, key: &str) -> Option<&'a Value> {
        let (k, v) = self.obj.get_key_value(key)?;
        self.used.borrow_mut().push(k.as_str());
        Some(v)
    }

    pub(super) fn req(&self, key: &str) -> DResult<&'a Value> {
        self.get(key).ok_or_else(|| diag!(SyntaxError, "missing field `{}`", self.path(key)))
    }

    /// Fails on a field that was never read: a misspelt or unsupported one.
    pub(super) fn finish(&self, context: &str) -> DResult<()> {
        let used = self.used.borrow();
        match self.obj.keys().find(|k| !used.contains(&k.as_str())) {
            Some(k) => Err(diag!(SyntaxError, "unknown field `{}` for {context}", self.path(k))),
            None => Ok(()),
        }
    }

    fn list(&self, key: &str) -> DResult<Option<&'a Vec<Value>>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a)),
            Some(v) => Err(bad(&self.path(key), "a list", v)),
        }
    }

    fn req_list(&self, key: &str) -> DResult<&'a Vec<Value>> {
        self.list(key)?.ok_or_else(|| diag!(SyntaxError, "missing field `{}`", self.path(key)))
    }

    pub(super) fn opt_str(&self, key: &str) -> DResult<Option<&'a str>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(bad(&self.path(key), "a string", v)),
        }
    }

    pub(super) fn str(&self, key: &str) -> DResult<&'a str> {
        self.opt_str(key)?.ok_or_else(|| diag!(SyntaxError, "missing field `{}`", self.path(key)))
    }

    pub(super) fn strs(&self, key: &str) -> DResult<Vec<&'a str>> {
        self.req_list(key)?
            .iter()
            .enumerate()
            .map(|(i, v)| v.as_str().ok_or_else(|| bad(&format!("{}[{i}]", self.path(key)), "a string", v)))
            .collect()
    }

    pub(super) fn opt_dtype(&self, key: &str) -> DResult<Option<DType>> {
        match self.opt_str(key)? {
            None => Ok(None),
            Some(s) => DType::parse(s).map(Some).ok_or_else(|| {
                diag!(SyntaxError, "`{}`: unknown dtype `{s}` (fp16, bf16, fp32, i32, bool)", self.path(key))
            }),
        }
    }

    pub(super) fn dtype(&self, key: &str) -> DResult<DType> {
        self.opt_dtype(key)?.ok_or_else(|| diag!(SyntaxError, "missing field `{}`", self.path(key)))
    }

    pub(super) fn opt_dims(&self, key: &str) -> DResult<Option<Vec<Dim>>> {
        let Some(l) = self.list(key)? else { return Ok(None) };
        l.iter().enumerate().map(|(i, v)| dim(v, &format!("{}[{i}]", self.path(key)))).collect::<DResult<_>>().map(Some)
    }

    pub(super) fn dims(&self, key: &str) -> DResult<Vec<Dim>> {
        self.opt_dims(key)?.ok_or_else(|| diag!(SyntaxError, "missing field `{}`", self.path(key)))
    }

    pub(super) fn opt_ints(&self, key: &str) -> DResult<Option<Vec<i64>>> {
        let Some(l) = self.list(key)? else { return Ok(None) };
        l.iter()
            .enumerate()
            .map(|(i, v)| v.as_i64().ok_or_else(|| bad(&format!("{}[{i}]", self.path(key)), "an integer", v)))
            .collect::<DResult<_>>()
            .map(Some)
    }

    pub(super) fn ints(&self, key: &str) -> DResult<Vec<i64>> {
        self.opt_ints(key)?.ok_or_else(|| diag!(SyntaxError, "missing field `{}`", self.path(key)))
    }

    pub(super) fn opt_number(&self, key: &str) -> DResult<Option<f64>> {
        self.get(key).map(|v| number(v, &self.path(key))).transpose()
    }

    /// A `true`/`false` field, if present.
    pub(super) fn opt_bool(&self, key: &str) -> DResult<Option<bool>> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(bad(&self.path(key), "true or false", v)),
        }
    }

    pub(super) fn number(&self, key: &str) -> DResult<f64> {
        self.opt_number(key)?.ok_or_else(|| diag!(SyntaxError, "missing field `{}`", self.path(key)))
    }

    /// Axes as integers (negative from the end) or dimension names; a string
    /// of digits is an index.
    pub(super) fn axes(&self, key: &str) -> DResult<Vec<AxisRef>> {
        let l = self.req_list(key)?;
        l.iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::Number(n) => n
                    .as_i64()
                    .map(AxisRef::Index)
                    .ok_or_else(|| bad(&format!("{}[{i}]", self.path(key)), "an integer", v)),
                Value::String(s) => {
                    Ok(s.trim().parse::<i64>().map_or_else(|_| AxisRef::Name(s.clone()), AxisRef::Index))
                }
                _ => Err(bad(&format!("{}[{i}]", self.path(key)), "an axis index or name", v)),
            })
            .collect()
    }

    /// `[[lo, hi], …]` pairs of dimensions (`PAD`).
    pub(super) fn dim_pairs(&self, key: &str) -> DResult<Vec<(Dim, Dim)>> {
        let l = self.req_list(key)?;
        l.iter()
            .enumerate()
            .map(|(i, v)| {
                let p = format!("{}[{i}]", self.path(key));
                match v.as_array().map(|a| a.as_slice()) {
                    Some([lo, hi]) => Ok((dim(lo, &format!("{p}[0]"))?, dim(hi, &format!("{p}[1]"))?)),
                    _ => Err(bad(&p, "a [lo, hi] pair", v)),
                }
            })
            .collect()
    }
}

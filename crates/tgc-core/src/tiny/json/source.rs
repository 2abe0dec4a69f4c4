//! The source text of a JSON graph: `//` comments and positions.
//!
//! Comments are blanked byte for byte (newlines kept), so byte offsets and
//! serde_json's line/column in the cleaned text are those of the original.

use std::collections::HashMap;

use crate::diag::{span_of, Span};

/// Replaces every `//` comment outside string literals by spaces.
pub(crate) fn strip_comments(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let (mut i, mut in_str) = (0, false);
    while i < b.len() {
        match (in_str, b[i]) {
            (true, b'\\') => i += 1,
            (_, b'"') => in_str = !in_str,
            (false, b'/') if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    out[i] = b' ';
                    i += 1;
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    // Only whole comments (from an ASCII `/` to before an ASCII newline) were
    // blanked, so the bytes are still UTF-8; the lossy path is never taken.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// The span of serde_json's 1-based `line` and byte `column` in `text`.
pub(crate) fn span_at_line_col(text: &str, line: usize, column: usize) -> Span {
    let mut offset = 0;
    for (k, l) in text.split_inclusive('\n').enumerate() {
        if k + 1 == line {
            offset += column.saturating_sub(1).min(l.len());
            break;
        }
        offset += l.len();
    }
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    span_of(text, offset, offset)
}

/// Where each `"key": "value"` pair of a few keys (`"id"`, `"name"`) sits in
/// the text: the spans of every occurrence of every value, in text order.
pub(super) struct KeySpans {
    spans: HashMap<(String, String), Vec<Span>>,
}

impl KeySpans {
    /// Scans the comment-free `clean` text; spans refer to `original`.
    pub(super) fn new(original: &str, clean: &str, keys: &[&str]) -> KeySpans {
        enum Tok {
            Str(usize, usize),
            Punct(u8),
        }
        let toks: Vec<Tok> = tokens(clean)
            .into_iter()
            .map(|(s, e)| if clean.as_bytes()[s] == b'"' { Tok::Str(s, e) } else { Tok::Punct(clean.as_bytes()[s]) })
            .collect();
        let mut spans: HashMap<(String, String), Vec<Span>> = HashMap::new();
        for w in toks.windows(3) {
            if let [Tok::Str(ks, ke), Tok::Punct(b':'), Tok::Str(vs, ve)] = w {
                if let (Some(k), Some(v)) = (string_at(clean, *ks, *ke), string_at(clean, *vs, *ve)) {
                    if keys.contains(&k.as_str()) {
                        spans.entry((k, v)).or_default().push(span_of(original, *ks, *ve));
                    }
                }
            }
        }
        KeySpans { spans }
    }

    /// The `n`-th occurrence (0-based) of `"key": "value"`.
    pub(super) fn get(&self, key: &str, value: &str, n: usize) -> Option<Span> {
        self.spans.get(&(key.to_string(), value.to_string())).and_then(|v| v.get(n)).copied()
    }
}

/// The tokens of comment-free JSON text as byte ranges: each string literal
/// (quotes included) and each other non-blank byte on its own.
fn tokens(clean: &str) -> Vec<(usize, usize)> {
    let b = clean.as_bytes();
    let mut toks = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'"' {
            let st = i;
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            toks.push((st, i.min(b.len())));
            continue;
        }
        if !b[i].is_ascii_whitespace() {
            toks.push((i, i + 1));
        }
        i += 1;
    }
    toks
}

/// The decoded string literal at bytes `s..e` of `clean`, if it is one.
fn string_at(clean: &str, s: usize, e: usize) -> Option<String> {
    clean.get(s..e).filter(|lit| lit.starts_with('"')).and_then(|lit| serde_json::from_str::<String>(lit).ok())
}

/// The span (in `original`) of the value a JSON path such as
/// `uops[3].arg.result_shape[1]` names in `clean` (a document serde_json
/// accepted), or of the deepest value on the path that exists: a missing
/// field points at the object that lacks it. A path starting with `the
/// document` starts at the root; any other whose first key is not in the
/// root object is `None` (it is not a path).
pub(crate) fn path_span(original: &str, clean: &str, path: &str) -> Option<Span> {
    let toks = tokens(clean);
    let b = clean.as_bytes();
    let byte = |t: usize| toks.get(t).map(|&(s, _)| b[s]);
    // The token index just past the value starting at token `t`.
    let skip = |mut t: usize| {
        let mut depth = 0usize;
        loop {
            match byte(t)? {
                b'{' | b'[' => depth += 1,
                b'}' | b']' => depth = depth.checked_sub(1)?,
                _ => {}
            }
            t += 1;
            if depth == 0 {
                return Some(t);
            }
        }
    };
    let mut at = 0;
    let rooted = path.starts_with("the document");
    let path = path.strip_prefix("the document").unwrap_or(path).trim_start_matches('.');
    // Where the walk stops: the root only for a path that starts there.
    let here = |at: usize| (at > 0 || rooted).then(|| toks.get(at).map(|&(s, e)| span_of(original, s, e))).flatten();
    for seg in path.split('.').filter(|s| !s.is_empty()) {
        let (key, indices) = seg.split_once('[').map_or((seg, ""), |(k, rest)| (k, rest));
        let mut steps: Vec<Result<&str, usize>> = Vec::new();
        if !key.is_empty() {
            steps.push(Ok(key));
        }
        for i in indices.split('[') {
            match i.trim_end_matches(']').parse::<usize>() {
                Ok(n) => steps.push(Err(n)),
                Err(_) if i.is_empty() => {}
                Err(_) => return here(at),
            }
        }
        for step in steps {
            let next = match (step, byte(at)) {
                (Ok(key), Some(b'{')) => {
                    let mut t = at + 1;
                    let mut found = None;
                    while byte(t).is_some_and(|c| c != b'}') {
                        let (s, e) = toks[t];
                        if string_at(clean, s, e).as_deref() == Some(key) && byte(t + 1) == Some(b':') {
                            found = Some(t + 2);
                            break;
                        }
                        t = skip(t + 2)?; // past `"key": value`
                        if byte(t) == Some(b',') {
                            t += 1;
                        }
                    }
                    found
                }
                (Err(n), Some(b'[')) => {
                    let mut t = at + 1;
                    for _ in 0..n {
                        if byte(t).is_none_or(|c| c == b']') {
                            break;
                        }
                        t = skip(t)?;
                        if byte(t) == Some(b',') {
                            t += 1;
                        }
                    }
                    byte(t).filter(|&c| c != b']').map(|_| t)
                }
                _ => None,
            };
            match next {
                Some(t) => at = t,
                None => return here(at),
            }
        }
    }
    here(at)
}

/// The span (in `original`) of the first string literal of `clean` whose
/// value is `value`, key or value alike.
pub(super) fn string_span(original: &str, clean: &str, value: &str) -> Option<Span> {
    tokens(clean)
        .into_iter()
        .find(|&(s, e)| string_at(clean, s, e).as_deref() == Some(value))
        .map(|(s, e)| span_of(original, s, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_are_blanked_outside_strings_only() {
        let t = "{\"a\": \"x//y\", // note\n \"b\": 1} // end";
        let c = strip_comments(t);
        assert_eq!(c.len(), t.len());
        assert!(c.contains("x//y"));
        assert!(!c.contains("note") && !c.contains("end"));
        assert!(serde_json::from_str::<serde_json::Value>(&c).is_ok());
    }

    #[test]
    fn paths_point_at_their_value_or_the_deepest_that_exists() {
        let t = "{\"uops\": [\n  {\"id\": \"n0\", \"arg\": {\"s\": [1, [2, 3], \"M\"]}}, // x\n  {\"id\": 7}\n]}";
        let c = strip_comments(t);
        let at = |p: &str| path_span(t, &c, p).map(|s| (s.line, s.col));
        assert_eq!(at("uops[1].id"), Some((3, 10)));
        assert_eq!(at("the document.uops[0].arg.s[2]"), Some((2, 41)));
        assert_eq!(at("uops[0].arg.s[1][1]"), Some((2, 37)));
        assert_eq!(at("uops[0].arg.shape"), Some((2, 23)), "a missing field: the object");
        assert_eq!(at("uops[5]"), Some((1, 10)), "past the end: the list");
        assert_eq!(at("the document.name"), Some((1, 1)));
        assert_eq!(at("C"), None, "not a path of this document");
    }

    #[test]
    fn key_spans_point_at_the_pair() {
        let t = "{\"uops\":[\n  {\"id\": \"n0\"}, // 日本語\n  {\"id\":\"n1\"}]}";
        let c = strip_comments(t);
        let k = KeySpans::new(t, &c, &["id"]);
        let s = k.get("id", "n1", 0).unwrap();
        assert_eq!((s.line, s.col), (3, 4));
        assert!(k.get("id", "n1", 1).is_none());
    }
}

//! The source text of a JSON graph: `//` comments and positions.
//!
//! Comments are blanked byte for byte (newlines kept), so byte offsets and
//! serde_json's line/column in the cleaned text are those of the original.

use std::collections::HashMap;

use crate::diag::Span;

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

/// The span of bytes `start..end` of `text` (1-based line, column in characters).
pub(crate) fn span_of(text: &str, start: usize, end: usize) -> Span {
    let start = start.min(text.len());
    let before = text.get(..start).unwrap_or("");
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |p| p + 1);
    let col = before.get(line_start..).map_or(0, |s| s.chars().count()) + 1;
    Span { line: line as u32, col: col as u32, start: start as u32, end: end.max(start) as u32, token: None }
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
                toks.push(Tok::Str(st, i.min(b.len())));
                continue;
            }
            if !b[i].is_ascii_whitespace() {
                toks.push(Tok::Punct(b[i]));
            }
            i += 1;
        }
        let text_of = |s: usize, e: usize| clean.get(s..e).and_then(|lit| serde_json::from_str::<String>(lit).ok());
        let mut spans: HashMap<(String, String), Vec<Span>> = HashMap::new();
        for w in toks.windows(3) {
            if let [Tok::Str(ks, ke), Tok::Punct(b':'), Tok::Str(vs, ve)] = w {
                if let (Some(k), Some(v)) = (text_of(*ks, *ke), text_of(*vs, *ve)) {
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
    fn key_spans_point_at_the_pair() {
        let t = "{\"uops\":[\n  {\"id\": \"n0\"}, // 日本語\n  {\"id\":\"n1\"}]}";
        let c = strip_comments(t);
        let k = KeySpans::new(t, &c, &["id"]);
        let s = k.get("id", "n1", 0).unwrap();
        assert_eq!((s.line, s.col), (3, 4));
        assert!(k.get("id", "n1", 1).is_none());
    }
}

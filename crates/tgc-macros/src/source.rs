//! Graph text from Rust tokens, and diagnostics back onto Rust spans.
//!
//! The graph language is line-oriented (a statement ends at a line break or
//! `;`), and rustc hands a proc-macro tokens, not text. We lay the tokens out
//! again — a line break wherever the next token starts on a later source
//! line, no space inside joint punctuation such as `->` or `<=` — so the same
//! lexer and parser as for files run on it, and every byte of the text
//! remembers the token it came from.

use proc_macro2::{Delimiter, Spacing, Span, TokenTree};

/// Text rebuilt from tokens, with the byte range → span table.
pub struct SourceText {
    pub text: String,
    pieces: Vec<(usize, usize, Span)>,
}

/// The source line a token starts on, when rustc tells us (inside a real
/// proc-macro call); `None` in unit tests.
fn line_of(span: Span) -> Option<usize> {
    if proc_macro::is_available() {
        Some(span.unwrap().line())
    } else {
        None
    }
}

impl SourceText {
    pub fn from_tokens(tokens: &[TokenTree]) -> SourceText {
        let mut s = SourceText { text: String::new(), pieces: Vec::new() };
        let mut line = tokens.first().and_then(|t| line_of(t.span()));
        let mut joint = false;
        s.walk(tokens, &mut line, &mut joint);
        s
    }

    fn put(&mut self, piece: &str, span: Span, line: &mut Option<usize>, joint: &mut bool) {
        match (line_of(span), *line) {
            (Some(now), Some(before)) if now > before => {
                self.text.push_str(&"\n".repeat(now - before));
                *line = Some(now);
            }
            _ if !*joint && !self.text.is_empty() => self.text.push(' '),
            _ => {}
        }
        let start = self.text.len();
        self.text.push_str(piece);
        self.pieces.push((start, self.text.len(), span));
        *joint = false;
    }

    fn walk(&mut self, tokens: &[TokenTree], line: &mut Option<usize>, joint: &mut bool) {
        for t in tokens {
            match t {
                TokenTree::Group(g) => {
                    let (open, close) = match g.delimiter() {
                        Delimiter::Parenthesis => ("(", ")"),
                        Delimiter::Bracket => ("[", "]"),
                        Delimiter::Brace => ("{", "}"),
                        Delimiter::None => ("", ""),
                    };
                    if !open.is_empty() {
                        self.put(open, g.span_open(), line, joint);
                    }
                    let inner: Vec<TokenTree> = g.stream().into_iter().collect();
                    self.walk(&inner, line, joint);
                    if !close.is_empty() {
                        self.put(close, g.span_close(), line, joint);
                    }
                }
                TokenTree::Punct(p) => {
                    self.put(&p.as_char().to_string(), p.span(), line, joint);
                    *joint = p.spacing() == Spacing::Joint;
                }
                TokenTree::Ident(i) => self.put(&i.to_string(), i.span(), line, joint),
                TokenTree::Literal(l) => self.put(&l.to_string(), l.span(), line, joint),
            }
        }
    }

    /// The span of the token that covers byte `at` of the text (or the
    /// nearest one before it).
    pub fn span_at(&self, at: usize) -> Option<Span> {
        self.pieces.iter().rev().find(|(st, _, _)| *st <= at).or(self.pieces.first()).map(|p| p.2)
    }
}

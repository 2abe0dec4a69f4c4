//! Lexer of the graph language (`DSL.md`): source text to [`Token`]s.
//!
//! - Identifiers are ASCII: `[A-Za-z_][A-Za-z0-9_]*`. Reserved words
//!   (`graph`, `return`, `true`, …) come out as identifiers; the parser
//!   recognises them.
//! - Numbers: an integer is digits only (`128`); a float has a `.` or an
//!   exponent (`0.5`, `2.`, `1e-5`, `3E+2`). There is no sign: `-1` is `-`
//!   then `1`, and the parser folds the two into one literal.
//! - Punctuation: `( ) [ ] { } < > <= >= == != = , : ; -> + - * /`.
//! - `//` starts a comment that runs to the end of the line.
//! - Every token records whether a line break separates it from the previous
//!   one ([`Token::newline_before`]): line breaks end statements.
//!
//! `tgc::kernel!` builds the same tokens from Rust tokens instead (with
//! `span.token` set), so the parser never looks at the text itself.

use crate::diag;
use crate::diag::{Diagnostic, Span};

/// One token with its position.
#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    pub kind: TokenKind,
    /// 1-based line/column and byte range; `token` is `None` for text input.
    pub span: Span,
    /// True when a line break separates this token from the previous one
    /// (for the first token: from the start of the input).
    pub newline_before: bool,
}

/// What a token is. Integers are unsigned (`u64`) because a sign is a
/// separate `-` token; floats are finite.
#[derive(Clone, Debug, PartialEq)]
pub enum TokenKind {
    Ident(String),
    Int(u64),
    Float(f64),
    LParen,
    RParen,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    Lt,
    Gt,
    Le,
    Ge,
    EqEq,
    Ne,
    /// `=`
    Assign,
    Comma,
    Colon,
    Semi,
    /// `->`
    Arrow,
    Plus,
    Minus,
    Star,
    Slash,
}

/// Every punctuation token with its spelling, two-character ones first so
/// that a longest-match scan can try them in order.
const PUNCTUATION: [(&str, TokenKind); 21] = [
    ("<=", TokenKind::Le),
    (">=", TokenKind::Ge),
    ("==", TokenKind::EqEq),
    ("!=", TokenKind::Ne),
    ("->", TokenKind::Arrow),
    ("(", TokenKind::LParen),
    (")", TokenKind::RParen),
    ("[", TokenKind::LBracket),
    ("]", TokenKind::RBracket),
    ("{", TokenKind::LBrace),
    ("}", TokenKind::RBrace),
    ("<", TokenKind::Lt),
    (">", TokenKind::Gt),
    ("=", TokenKind::Assign),
    (",", TokenKind::Comma),
    (":", TokenKind::Colon),
    (";", TokenKind::Semi),
    ("+", TokenKind::Plus),
    ("-", TokenKind::Minus),
    ("*", TokenKind::Star),
    ("/", TokenKind::Slash),
];

impl TokenKind {
    /// The punctuation token spelled `text` (`"->"`, `"("`, …), or `None`.
    /// `kernel!` uses this to turn joined Rust punctuation into tokens.
    pub fn punct(text: &str) -> Option<TokenKind> {
        PUNCTUATION.iter().find(|(s, _)| *s == text).map(|(_, k)| k.clone())
    }

    /// How error messages name the token: `'('`, `` `foo` ``, `integer 3`.
    pub fn describe(&self) -> String {
        match self {
            TokenKind::Ident(name) => format!("`{name}`"),
            TokenKind::Int(v) => format!("integer {v}"),
            TokenKind::Float(v) => format!("float {v:?}"),
            TokenKind::LParen => "'('".into(),
            TokenKind::RParen => "')'".into(),
            TokenKind::LBracket => "'['".into(),
            TokenKind::RBracket => "']'".into(),
            TokenKind::LBrace => "'{'".into(),
            TokenKind::RBrace => "'}'".into(),
            TokenKind::Lt => "'<'".into(),
            TokenKind::Gt => "'>'".into(),
            TokenKind::Le => "'<='".into(),
            TokenKind::Ge => "'>='".into(),
            TokenKind::EqEq => "'=='".into(),
            TokenKind::Ne => "'!='".into(),
            TokenKind::Assign => "'='".into(),
            TokenKind::Comma => "','".into(),
            TokenKind::Colon => "':'".into(),
            TokenKind::Semi => "';'".into(),
            TokenKind::Arrow => "'->'".into(),
            TokenKind::Plus => "'+'".into(),
            TokenKind::Minus => "'-'".into(),
            TokenKind::Star => "'*'".into(),
            TokenKind::Slash => "'/'".into(),
        }
    }
}

/// The most bytes in a name: every identifier of the graph language, the
/// graph, input and output names of Tiny IR JSON, a build's kernel names.
/// Names become parts of file names (`<output>.npy`, `tgc_<graph>.c`, the
/// build helper's `tgc_<package>_<version>_<kernel>….c`), and Linux refuses
/// a path component over `NAME_MAX` = 255 bytes (`<linux/limits.h>`; ext4,
/// XFS, btrfs and tmpfs all stop there). 128 leaves room for what tgc adds:
/// the longest, `tgc_<graph>_<16 hex digits>.<pid>-<counter>.partial` while
/// `tgc run` builds, is 186 bytes at most.
pub const MAX_NAME_BYTES: usize = 128;

/// Why `name` (`what`: "output", "kernel", …) cannot be a name: longer than
/// [`MAX_NAME_BYTES`]. `None` when it is short enough.
pub fn name_length_fault(what: &str, name: &str) -> Option<String> {
    (name.len() > MAX_NAME_BYTES).then(|| {
        let start: String = name.chars().take(24).collect();
        format!(
            "{what} name `{start}…` is {} bytes, more than the {MAX_NAME_BYTES} a name may have (names become parts \
             of file names)",
            name.len()
        )
    })
}

/// True for a name of the graph language: `[A-Za-z_][A-Za-z0-9_]*`. Names
/// that reach generated code or file names (inputs, outputs, graphs) from
/// other front ends (Tiny IR JSON) are held to the same rule.
pub fn is_identifier(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes.next().is_some_and(is_ident_start) && bytes.all(is_ident_continue)
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_ident_continue(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// Splits `src` into tokens.
///
/// Errors (`SyntaxError`, at the offending character): a character that
/// starts no token (`@`, a lone `!`, non-ASCII letters), an integer above
/// `u64::MAX`, a float that overflows to infinity.
pub fn lex(src: &str) -> Result<Vec<Token>, Diagnostic> {
    let bytes = src.as_bytes();
    let mut tokens = Vec::new();
    let mut pos = 0usize;
    let mut line = 1u32;
    let mut col = 1u32;
    let mut newline_before = true;
    while pos < bytes.len() {
        let b = bytes[pos];
        let span = |len: usize| Span { line, col, start: pos as u32, end: (pos + len) as u32, token: None };
        if b == b'\n' {
            pos += 1;
            line += 1;
            col = 1;
            newline_before = true;
            continue;
        }
        if b.is_ascii_whitespace() {
            pos += 1;
            col += 1;
            continue;
        }
        if src[pos..].starts_with("//") {
            let len = src[pos..].find('\n').unwrap_or(src.len() - pos);
            col += src[pos..pos + len].chars().count() as u32;
            pos += len;
            continue;
        }
        let (kind, len) = if is_ident_start(b) {
            let len = run_len(&bytes[pos..], is_ident_continue);
            if let Some(why) = name_length_fault("the", &src[pos..pos + len]) {
                return Err(diag!(SyntaxError, "{why}").at(span(len)));
            }
            (TokenKind::Ident(src[pos..pos + len].to_string()), len)
        } else if b.is_ascii_digit() {
            number(&src[pos..]).map_err(|e| e.at(span(1)))?
        } else {
            match punctuation(&src[pos..]) {
                Some(found) => found,
                None => return Err(unexpected_char(&src[pos..]).at(span(1))),
            }
        };
        tokens.push(Token { kind, span: span(len), newline_before });
        newline_before = false;
        pos += len;
        col += len as u32; // every token is ASCII
    }
    Ok(tokens)
}

/// Length of the longest prefix of `bytes` whose bytes all satisfy `ok`.
fn run_len(bytes: &[u8], ok: impl Fn(u8) -> bool) -> usize {
    bytes.iter().position(|&c| !ok(c)).unwrap_or(bytes.len())
}

/// Lexes the number at the start of `s` (which starts with a digit):
/// `digits [. digits?] [(e|E) [+|-] digits]`. An `e` not followed by digits
/// is not part of the number.
fn number(s: &str) -> Result<(TokenKind, usize), Diagnostic> {
    let bytes = s.as_bytes();
    let mut len = run_len(bytes, |c| c.is_ascii_digit());
    let mut is_float = false;
    if bytes.get(len) == Some(&b'.') {
        is_float = true;
        len += 1;
        len += run_len(&bytes[len..], |c| c.is_ascii_digit());
    }
    if matches!(bytes.get(len), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(bytes.get(len + 1), Some(b'+' | b'-')));
        let digits = run_len(&bytes[len + 1 + sign..], |c| c.is_ascii_digit());
        if digits > 0 {
            is_float = true;
            len += 1 + sign + digits;
        }
    }
    let text = &s[..len];
    if is_float {
        match text.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok((TokenKind::Float(v), len)),
            _ => Err(diag!(SyntaxError, "float literal `{text}` is out of range")),
        }
    } else {
        match text.parse::<u64>() {
            Ok(v) => Ok((TokenKind::Int(v), len)),
            Err(_) => Err(diag!(SyntaxError, "integer literal `{text}` is too large")),
        }
    }
}

/// The punctuation token at the start of `s` (longest match) and its length.
fn punctuation(s: &str) -> Option<(TokenKind, usize)> {
    PUNCTUATION.iter().find(|(p, _)| s.starts_with(p)).map(|(p, k)| (k.clone(), p.len()))
}

/// The error for a character that starts no token.
fn unexpected_char(s: &str) -> Diagnostic {
    match s.chars().next() {
        Some('!') => diag!(SyntaxError, "unexpected character '!' (did you mean '!='?)"),
        Some(c) => diag!(SyntaxError, "unexpected character {c:?}"),
        None => diag!(SyntaxError, "unexpected end of input"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::ErrorName;

    fn kinds(src: &str) -> Vec<TokenKind> {
        lex(src).unwrap().into_iter().map(|t| t.kind).collect()
    }

    #[test]
    fn numbers_integers_and_floats() {
        use TokenKind::*;
        assert_eq!(
            kinds("128 0.5 2. 1e-5 3E+2 7e"),
            vec![Int(128), Float(0.5), Float(2.0), Float(1e-5), Float(300.0), Int(7), Ident("e".into())]
        );
        assert_eq!(kinds("18446744073709551615"), vec![Int(u64::MAX)]);
    }

    #[test]
    fn punctuation_takes_the_longest_match() {
        use TokenKind::*;
        assert_eq!(
            kinds("<= < >= > == = != -> - ( ) [ ] { } , : ; + * /"),
            vec![
                Le, Lt, Ge, Gt, EqEq, Assign, Ne, Arrow, Minus, LParen, RParen, LBracket, RBracket, LBrace, RBrace,
                Comma, Colon, Semi, Plus, Star, Slash
            ]
        );
        assert_eq!(kinds("a<-1"), vec![Ident("a".into()), Lt, Minus, Int(1)]);
    }

    #[test]
    fn spans_and_line_breaks() {
        let toks = lex("a = b // c = d\n  é_free\n").unwrap_err();
        assert_eq!(toks.name, ErrorName::SyntaxError);
        assert_eq!((toks.span.unwrap().line, toks.span.unwrap().col), (2, 3));

        let toks = lex("y = x // comment\n  -b;c").unwrap();
        let summary: Vec<_> =
            toks.iter().map(|t| (t.span.line, t.span.col, t.span.start, t.span.end, t.newline_before)).collect();
        assert_eq!(
            summary,
            vec![
                (1, 1, 0, 1, true),
                (1, 3, 2, 3, false),
                (1, 5, 4, 5, false),
                (2, 3, 19, 20, true),
                (2, 4, 20, 21, false),
                (2, 5, 21, 22, false),
                (2, 6, 22, 23, false),
            ]
        );
        assert!(toks.iter().all(|t| t.span.token.is_none()));
    }

    #[test]
    fn columns_count_characters_in_comments() {
        let toks = lex("// é\nx").unwrap();
        assert_eq!((toks[0].span.line, toks[0].span.col), (2, 1));
        let toks = lex("a // é\n").unwrap();
        assert_eq!(toks.len(), 1);
    }

    #[test]
    fn lexical_errors() {
        let cases = [
            ("x = y @ z", 1, 7, "unexpected character '@'"),
            ("x = !y", 1, 5, "unexpected character '!' (did you mean '!='?)"),
            ("\n  x = 99999999999999999999", 2, 7, "integer literal `99999999999999999999` is too large"),
            ("x = 1e999", 1, 5, "float literal `1e999` is out of range"),
            ("x = .5", 1, 5, "unexpected character '.'"),
        ];
        for (src, line, col, msg) in cases {
            let err = lex(src).unwrap_err();
            assert_eq!(err.name, ErrorName::SyntaxError, "{src}");
            let span = err.span.unwrap();
            assert_eq!((span.line, span.col, err.message.as_str()), (line, col, msg), "{src}");
        }
    }

    /// A name becomes part of file names: one over `MAX_NAME_BYTES` is
    /// refused at the name; one at the limit lexes.
    #[test]
    fn names_longer_than_the_limit_are_refused_where_they_stand() {
        let at_limit = "n".repeat(MAX_NAME_BYTES);
        assert_eq!(kinds(&at_limit), vec![TokenKind::Ident(at_limit.clone())]);
        let long = "n".repeat(MAX_NAME_BYTES + 1);
        let err = lex(&format!("y = {long}")).unwrap_err();
        assert_eq!(err.name, ErrorName::SyntaxError);
        let span = err.span.unwrap();
        assert_eq!((span.line, span.col, span.end - span.start), (1, 5, 129));
        assert!(err.message.contains("is 129 bytes, more than the 128 a name may have"), "{}", err.message);
    }

    #[test]
    fn punct_lookup_matches_the_lexer() {
        for (text, kind) in PUNCTUATION.iter() {
            assert_eq!(TokenKind::punct(text).as_ref(), Some(kind));
            assert_eq!(kind.describe(), format!("'{text}'"));
            assert_eq!(kinds(text), vec![kind.clone()]);
        }
        assert_eq!(TokenKind::punct("!"), None);
    }
}

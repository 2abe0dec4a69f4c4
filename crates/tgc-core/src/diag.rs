//! User-facing diagnostics: an error name, a message and a source position.
//!
//! Every error a user can cause (bad graph text, bad shapes, bad JSON, unbound
//! symbols) is a [`Diagnostic`]. Internal invariant violations (a verifier
//! failing after a pass) are bugs and are reported as [`ErrorName::Internal`].

use std::fmt;

/// A position in a source text: 1-based line and column, and the byte range.
///
/// Inside `tgc::kernel!` the token index lets the macro map the span back to
/// the Rust token so that rustc underlines it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Span {
    /// 1-based line.
    pub line: u32,
    /// 1-based column, in characters.
    pub col: u32,
    /// Byte offset of the first byte.
    pub start: u32,
    /// Byte offset one past the last byte.
    pub end: u32,
    /// Index of the first token of the construct in the token stream it was
    /// parsed from, when the source came as tokens (`kernel!`).
    pub token: Option<u32>,
}

/// The names of user-facing errors (`spec/002` §4, `spec/000` §13, `DSL.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorName {
    /// Right-aligned broadcast with both sizes > 1 and different (`002` §4).
    BroadcastMismatch,
    /// Element counts or sizes that must agree do not (`002` §4, `RESHAPE`).
    AxisSizeMismatch,
    /// A permutation with repeated or missing axes (`002` §4).
    InvalidPermutation,
    /// `REDUCE` without an accumulator dtype (`002` §4).
    AccDtypeMissing,
    /// A value's access needs more pieces than the stated limit (`002` §4).
    ExcessivePiecewise,
    /// Operand dtypes disagree with no explicit cast (`002` §3).
    DTypeMismatch,
    /// An operation name that does not exist.
    UnknownOp,
    /// A name (value, graph, symbol, tensor) that is not defined.
    UnknownName,
    /// A call with the wrong number of arguments.
    ArityMismatch,
    /// A `SHRINK`/`VIEW` step ≤ 0 (`spec/README.md` decision 5).
    NegativeStride,
    /// Subgraph calls nested deeper than the limit (`DSL.md`).
    RecursionLimit,
    /// An axis index out of range, or a name that does not pick exactly one axis.
    InvalidAxis,
    /// A symbolic dimension with no value where one is needed.
    UnboundSymbol,
    /// Text that does not follow the grammar.
    SyntaxError,
    /// Well-formed input that tgc does not support.
    Unsupported,
    /// More of a resource than allowed: a schedule that needs more shared
    /// memory or threads than the target has (`000` §5), or an input past
    /// one of tgc's stated limits (a composed index of more than
    /// `index_book::MAX_INDEX_ATOMS` terms).
    ResourceExceeded,
    /// Input/output problems (files, tensors given to `run`).
    Io,
    /// A tgc bug: an IR verifier failed after a pass.
    Internal,
}

impl ErrorName {
    /// Every error name, in declaration order (keep in step with the enum).
    pub const ALL: [ErrorName; 18] = [
        ErrorName::BroadcastMismatch,
        ErrorName::AxisSizeMismatch,
        ErrorName::InvalidPermutation,
        ErrorName::AccDtypeMissing,
        ErrorName::ExcessivePiecewise,
        ErrorName::DTypeMismatch,
        ErrorName::UnknownOp,
        ErrorName::UnknownName,
        ErrorName::ArityMismatch,
        ErrorName::NegativeStride,
        ErrorName::RecursionLimit,
        ErrorName::InvalidAxis,
        ErrorName::UnboundSymbol,
        ErrorName::SyntaxError,
        ErrorName::Unsupported,
        ErrorName::ResourceExceeded,
        ErrorName::Io,
        ErrorName::Internal,
    ];

    /// The name as written in messages, e.g. `BroadcastMismatch`.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorName::BroadcastMismatch => "BroadcastMismatch",
            ErrorName::AxisSizeMismatch => "AxisSizeMismatch",
            ErrorName::InvalidPermutation => "InvalidPermutation",
            ErrorName::AccDtypeMissing => "AccDtypeMissing",
            ErrorName::ExcessivePiecewise => "ExcessivePiecewise",
            ErrorName::DTypeMismatch => "DTypeMismatch",
            ErrorName::UnknownOp => "UnknownOp",
            ErrorName::UnknownName => "UnknownName",
            ErrorName::ArityMismatch => "ArityMismatch",
            ErrorName::NegativeStride => "NegativeStride",
            ErrorName::RecursionLimit => "RecursionLimit",
            ErrorName::InvalidAxis => "InvalidAxis",
            ErrorName::UnboundSymbol => "UnboundSymbol",
            ErrorName::SyntaxError => "SyntaxError",
            ErrorName::Unsupported => "Unsupported",
            ErrorName::ResourceExceeded => "ResourceExceeded",
            ErrorName::Io => "Io",
            ErrorName::Internal => "Internal",
        }
    }
}

impl fmt::Display for ErrorName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A user-facing error: name, message, and where it happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub name: ErrorName,
    pub message: String,
    /// Source position, when the construct came from text.
    pub span: Option<Span>,
    /// The Tiny IR node the error is about (its JSON id), when there is one.
    pub node: Option<String>,
}

impl Diagnostic {
    pub fn new(name: ErrorName, message: impl Into<String>) -> Diagnostic {
        Diagnostic { name, message: message.into(), span: None, node: None }
    }

    pub fn at(mut self, span: Span) -> Diagnostic {
        self.span = Some(span);
        self
    }

    /// Sets the span only if none is set yet.
    pub fn or_at(mut self, span: Option<Span>) -> Diagnostic {
        if self.span.is_none() {
            self.span = span;
        }
        self
    }

    pub fn on_node(mut self, node: impl Into<String>) -> Diagnostic {
        self.node = Some(node.into());
        self
    }

    /// Points at a Tiny IR node: its label, and its source span unless a
    /// span is set already.
    pub fn at_node(self, node: &crate::tiny::Node) -> Diagnostic {
        self.on_node(node.label.clone()).or_at(node.span)
    }

    /// Renders as `file:line:col: error[Name]: message (node n3)`.
    pub fn render(&self, file: &str) -> String {
        self.render_headed(Some(file), &format!("error[{}]:", self.name))
    }

    /// The text of a `compile_error!` (the `kernel!` macro's diagnostics):
    /// `file:line:col: [Name] message (node n3)`. rustc prints `error: `
    /// before it, so the name stands without a second `error`. Without
    /// `file` (an inline graph) no position is written: rustc points at the
    /// token, and a position in the macro's rebuilt text would mislead.
    pub fn render_for_rustc(&self, file: Option<&str>) -> String {
        self.render_headed(file, &format!("[{}]", self.name))
    }

    /// Renders as a note, not an error: `file:line:col: note: {lead} message
    /// (node n3)`, for a refusal the compiler recovers from (a contraction
    /// the tensor-core templates refuse runs as SIMT kernels). The error
    /// name stays out of the text: nothing failed.
    pub fn render_note(&self, file: &str, lead: &str) -> String {
        self.render_headed(Some(file), &format!("note: {lead}"))
    }

    fn render_headed(&self, file: Option<&str>, head: &str) -> String {
        let mut s = String::new();
        match (file, self.span) {
            (Some(file), Some(sp)) => s.push_str(&format!("{file}:{}:{}: ", sp.line, sp.col)),
            (Some(file), None) => s.push_str(&format!("{file}: ")),
            (None, _) => {}
        }
        s.push_str(&format!("{head} {}", self.message));
        if let Some(n) = &self.node {
            s.push_str(&format!(" (node {n})"));
        }
        s
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(sp) = self.span {
            write!(f, "{}:{}: ", sp.line, sp.col)?;
        }
        write!(f, "error[{}]: {}", self.name, self.message)?;
        if let Some(n) = &self.node {
            write!(f, " (node {n})")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostic {}

/// The span of bytes `start..end` of `text` (1-based line, column in
/// characters); `start` past the end is the end.
pub fn span_of(text: &str, start: usize, end: usize) -> Span {
    let start = start.min(text.len());
    let before = text.get(..start).unwrap_or("");
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |p| p + 1);
    let col = before.get(line_start..).map_or(0, |s| s.chars().count()) + 1;
    Span { line: line as u32, col: col as u32, start: start as u32, end: end.max(start) as u32, token: None }
}

/// Bytes of one graph source file, DSL or JSON (64 MiB: a 100,000-node
/// Tiny IR JSON graph is about 10 MiB). [`read_source`] reads no more.
pub const MAX_SOURCE_BYTES: u64 = 1 << 26;

/// Reads the graph file at `path` — at most [`MAX_SOURCE_BYTES`] of it, so
/// a huge file or an endless stream is never loaded — and decodes it with
/// [`decode_source`]. The one reader of graph files: the CLI, the build
/// helper and `kernel!` call it.
///
/// Errors: the outer `io::Error` when the file cannot be opened or read;
/// the inner diagnostic is `ResourceExceeded` at 1:1 for a longer file, or
/// [`decode_source`]'s.
pub fn read_source(path: &std::path::Path) -> std::io::Result<DResult<String>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?.take(MAX_SOURCE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_SOURCE_BYTES {
        let d = crate::diag!(
            ResourceExceeded,
            "the file is longer than {} MiB (diag::MAX_SOURCE_BYTES): split the graph into several files",
            MAX_SOURCE_BYTES >> 20
        );
        return Ok(Err(d.at(span_of("", 0, 0))));
    }
    Ok(decode_source(bytes))
}

/// The text of a graph file read as bytes: UTF-8, or a `SyntaxError` at the
/// line and column of the first byte that is not (`DSL.md`: sources are
/// UTF-8).
pub fn decode_source(bytes: Vec<u8>) -> DResult<String> {
    String::from_utf8(bytes).map_err(|e| {
        let bytes = e.as_bytes();
        let at = e.utf8_error().valid_up_to();
        // The prefix is valid UTF-8 by the definition of `valid_up_to`.
        let before = std::str::from_utf8(&bytes[..at]).unwrap_or("");
        let span = span_of(before, at, at + 1);
        crate::diag!(SyntaxError, "the file is not UTF-8: byte 0x{:02x} cannot start a character here", bytes[at])
            .at(span)
    })
}

/// Shorthand for results carrying a [`Diagnostic`].
pub type DResult<T> = Result<T, Diagnostic>;

/// Builds a [`Diagnostic`] with a formatted message: `diag!(DTypeMismatch, "…{}", x)`.
#[macro_export]
macro_rules! diag {
    ($name:ident, $($fmt:tt)+) => {
        $crate::diag::Diagnostic::new($crate::diag::ErrorName::$name, format!($($fmt)+))
    };
}

//! Tiny IR as JSON: the node format of `spec/002` §1.1 (canonical,
//! `spec/README.md` decision 1) and the op-list import of `spec/000` §1.2.
//!
//! ```json
//! {"name"?: "g",
//!  "uops": [{"id": "n0", "uop": "INPUT", "src"?: [...], "arg"?: {...}, "tag"?: "..."}, ...],
//!  "outputs"?: [{"name": "C", "id": "n9"}],
//!  "symbols"?: [{"name": "M", "default"?: 64, "padded"?: true}]}
//! ```
//!
//! Text rules:
//! - `//` comments outside strings are allowed (the spec's examples have
//!   them); malformed JSON is `SyntaxError` at serde_json's line/column.
//! - A document with an `ops` key is the op-list format (module `oplist`).
//! - Shapes and size arguments are integers or strings in [`Dim::parse`]
//!   syntax (`"M"`, `"1"`, `"M*K"`); dtypes are accepted in both spellings
//!   (`fp16`/`f16`, …) and written as `fp16`, `bf16`, `fp32`, `i32`, `bool`.
//!   Numbers may be the strings `"inf"`, `"-inf"`, `"nan"`.
//! - Node ids are node labels; a duplicate id is `SyntaxError`, a source
//!   naming no earlier node `UnknownName` (nodes come in topological order).
//!   `tag` is accepted and dropped (it never affects compilation, §1.1).
//! - Unknown `uop` is `UnknownOp`; a wrong number of `src` is
//!   `ArityMismatch`; a missing, ill-typed or unknown `arg` field is
//!   `SyntaxError` naming it. Every node error carries the node id and the
//!   span of its `"id"` pair.
//!
//! `arg` per uop (omitted where there is none — unary, binary, `WHERE`):
//! - `INPUT {tensor_id, dtype, shape}`, `CONST {value, dtype}`, `CAST {to}`;
//! - `REDUCE {op: SUM|MAX|MIN, axes, dtype}`: axes are integers (negative
//!   from the end) or dimension names, a name matching exactly one axis whose
//!   size is that symbol (decision 4, else `InvalidAxis`); no `dtype` is
//!   `AccDtypeMissing`; `init` is `Unsupported`;
//! - `RESHAPE {result_shape}`; `PERMUTE {perm}`; `FLIP {axes}`;
//! - `EXPAND {result_shape, broadcast_dimensions?}`: `broadcast_dimensions`
//!   lists the output axes that are *not* broadcast (their input size equals
//!   the output size; every other input size is 1), else `BroadcastMismatch`.
//!   An input of lower rank is right-aligned by a `RESHAPE` with leading 1s;
//! - `PAD {pad: [[lo, hi], …], value?}` (`value` defaults to 0);
//!   `SHRINK {lo, hi, step?}` (`step` defaults to 1s);
//! - `VIEW {result_shape, index_map}`: `index_map[k]` is the input index of
//!   axis `k`, a string in [`AffExpr::parse`] syntax over the output axes
//!   `i0, i1, …` (e.g. `"2*i2 + i4"`, `"floor(i0 / 4)"`, `"i1 % 3"`);
//! - `POOL {kernel, stride?, dilation?}` (decision 2; stride and dilation
//!   default to 1s): a sliding window over the last `len(kernel)` axes,
//!   lowered to a `VIEW` of shape `[.., O_1..O_n, K_1..K_n]` with
//!   `O_j = (D_j - dil_j*(K_j-1) - 1)/S_j + 1` reading `o_j*S_j + k_j*dil_j`.
//!
//! Normalisation of element-wise operands (the loader is a frontend, so
//! decision 3 applies; `002`'s own §5.2 and §5.3 examples rely on it), in
//! this order, each inserted node labelled `{id}.{operand}.{what}`:
//! 1. an immediate in `src` (`["n10", 1.442695]`) is a `CONST` of the other
//!    operands' dtype (`bool` for a `WHERE` condition);
//! 2. float operands of different dtypes are `CAST` to fp32 (`002` §5.2 adds
//!    its fp32 `REDUCE` result to an fp16 bias); other dtype differences stay
//!    `DTypeMismatch`;
//! 3. operands of different shapes are broadcast: an operand that is the
//!    result of a `REDUCE` (possibly through element-wise nodes) whose input
//!    shape is another operand's shape is reshaped with 1s at the removed
//!    axes (keepdim) and `EXPAND`ed to it (`002` §5.3:
//!    `SUB(S [B,H,M,N], rowmax [B,H,M])`); otherwise shapes broadcast
//!    right-aligned like NumPy (`RESHAPE` with leading 1s, `EXPAND`); sizes
//!    that are both ≠ 1 and differ are `BroadcastMismatch`.
//!
//! Graph outputs are `outputs` when given, else every node no other node
//! reads, named by its id. The graph's, inputs' and outputs' names follow
//! the graph language's identifier rule (`SyntaxError` otherwise), since
//! they become code and file names. Symbols are `symbols` when given (a symbol used
//! but not listed is `UnknownName`), else every symbol in order of first use
//! ([`Graph::declare_input_symbols`]). A graph without `name` is called
//! `main`.
//!
//! [`to_json`] writes every key explicitly, so `load_json(&to_json(&g))`
//! rebuilds `g`'s nodes (ops, sources, types, labels), outputs and symbols;
//! nodes inserted by the normalisations above are ordinary nodes there.
//!
//! [`Dim::parse`]: crate::sym::Dim::parse
//! [`AffExpr::parse`]: crate::affine::AffExpr::parse

mod build;
mod fields;
mod nodes;
mod oplist;
pub(crate) mod source;
mod write;

use serde_json::Value;

use crate::diag;
use crate::diag::Diagnostic;
use crate::frontend::lexer::is_identifier;

use super::graph::Graph;
use fields::Fields;

pub use write::{node_value, to_json};

/// The name of a graph whose text gives none.
const DEFAULT_NAME: &str = "main";

/// Loads a Tiny IR graph from JSON text: the node format, or the op-list
/// format when the top-level object has an `ops` key. The rules and errors
/// are listed in the module doc.
pub fn load_json(text: &str) -> Result<Graph, Diagnostic> {
    let clean = source::strip_comments(text);
    let root: Value = serde_json::from_str(&clean).map_err(|e| {
        let msg = e.to_string();
        let msg = msg.split(" at line ").next().unwrap_or(&msg).to_string();
        diag!(SyntaxError, "malformed JSON: {msg}").at(source::span_at_line_col(text, e.line(), e.column()))
    })?;
    let root = Fields::of(&root, "the document")?;
    let loaded = if root.get("ops").is_some() {
        let spans = source::KeySpans::new(text, &clean, &["name"]);
        oplist::load(&root, &spans)
    } else {
        let spans = source::KeySpans::new(text, &clean, &["id"]);
        nodes::load(&root, &spans)
    };
    let g = loaded.and_then(|g| root.finish("a Tiny IR graph").map(|()| g)).map_err(|e| locate(e, text, &clean))?;
    check_names(&g, text, &clean)?;
    Ok(g)
}

/// Points an error at the value of the JSON path its message names, when
/// the path is one of this document: the field helpers ([`Fields`]) write
/// the path first, in backquotes (`` `uops[0].arg.shape[1]` must be … ``).
/// Other errors keep their span (a node's `"id"` pair).
fn locate(e: Diagnostic, text: &str, clean: &str) -> Diagnostic {
    match e.message.split('`').nth(1).and_then(|path| source::path_span(text, clean, path)) {
        Some(span) => e.at(span),
        None => e,
    }
}

/// Names that become identifiers in generated code or file names (the
/// graph's, its inputs', its outputs') follow the graph language's rule
/// ([`is_identifier`], at most [`MAX_NAME_BYTES`](crate::frontend::lexer::MAX_NAME_BYTES)):
/// an output named `../../x` must not make `tgc run` write outside its output
/// folder, nor one of 300 letters make it fail with "File name too long" after
/// computing everything.
///
/// Errors: `SyntaxError` at the first occurrence of the name in the text.
fn check_names(g: &Graph, text: &str, clean: &str) -> Result<(), Diagnostic> {
    let inputs = g.ids().filter_map(|id| match &g.node(id).op {
        super::Op::Input { name } => Some(("input", name.as_str())),
        _ => None,
    });
    let outputs = g.outputs.iter().map(|o| ("output", o.name.as_str()));
    for (what, name) in std::iter::once(("graph", g.name.as_str())).chain(inputs).chain(outputs) {
        if !is_identifier(name) {
            return Err(diag!(
                SyntaxError,
                "{what} name {name:?} is not a plain name: letters, digits and `_`, not starting with a digit"
            )
            .or_at(source::string_span(text, clean, name)));
        }
        if let Some(why) = crate::frontend::lexer::name_length_fault(what, name) {
            return Err(diag!(SyntaxError, "{why}").or_at(source::string_span(text, clean, name)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;

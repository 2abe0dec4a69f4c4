//! Frontend: the graph language (`DSL.md`) and its lowering to Tiny IR.
//!
//! Pipeline: [`lexer::lex`] (text to tokens; `kernel!` builds the tokens
//! itself) → [`parser::parse_tokens`] (tokens to [`ast::Program`], syntax
//! only) → [`resolve::resolve`] (names, ops, arities, attributes: the
//! Frontend IR of [`ir`]) → [`to_tiny::lower_program`] (inlining subgraphs,
//! decomposing every op with [`ops`] into Tiny IR).
//! [`decompile::decompile`] prints a program back as text, and
//! [`raise::raise`] turns a Frontend IR (an ONNX import's) back into one.

pub mod ast;
pub mod decompile;
pub mod ir;
pub mod lexer;
pub mod onnx;
pub mod ops;
pub mod parser;
pub mod raise;
pub mod resolve;
pub mod to_tiny;

#[cfg(test)]
mod tests;

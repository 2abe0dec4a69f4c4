//! Frontend: the graph language (`DSL.md`) and its lowering to Tiny IR.
//!
//! Pipeline: [`lexer::lex`] (text to tokens; `kernel!` builds the tokens
//! itself) → [`parser::parse_tokens`] (tokens to [`ast::Program`], syntax
//! only) → lowering. [`decompile::decompile`] prints a program back as text.

pub mod ast;
pub mod decompile;
pub mod lexer;
pub mod parser;

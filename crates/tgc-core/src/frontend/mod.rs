//! Frontend: the graph language (`DSL.md`) and its lowering to Tiny IR.
//!
//! Pipeline: [`lexer::lex`] (text to tokens; `kernel!` builds the tokens
//! itself) → [`parser::parse_tokens`] (tokens to [`ast::Program`], syntax
//! only) → lowering.

pub mod ast;
pub mod lexer;
pub mod parser;

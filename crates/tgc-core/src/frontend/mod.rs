//! Frontend: the graph language (`DSL.md`) and its lowering to Tiny IR.

pub mod ast;

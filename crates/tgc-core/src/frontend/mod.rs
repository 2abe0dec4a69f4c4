//! Frontend: the graph language (`DSL.md`) and its lowering to Tiny IR.

pub mod ast;
pub mod ir;
pub mod ops;
pub mod resolve;
pub mod to_tiny;

#[cfg(test)]
mod tests;

//! Tests of the frontend: resolution, lowering of every op family, error
//! names and positions, and numeric checks of the decompositions against
//! f64 references (through the small evaluator in `eval.rs`).

mod ast_build;
mod docs;
mod errors;
mod eval;
mod examples;
mod interp;
mod lowering;
mod numeric;
mod raise;

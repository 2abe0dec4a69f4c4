//! tgc-core: every IR of tgc, the lowerings between them, the reference
//! interpreter, the code generators and the build-script helper
//! ([`build`]). See `ARCHITECTURE.md` for the map.

pub mod affine;
pub mod build;
pub mod cpu;
pub mod diag;
pub mod emit;
pub mod frontend;
pub mod fuzz;
pub mod gpu;
pub mod index_book;
pub mod interp;
pub mod pipeline;
pub mod plan;
#[cfg(feature = "poly")]
pub mod poly;
pub mod region;
pub mod sym;
pub mod timings;
pub mod tiny;
pub mod tune;

#[cfg(test)]
mod test_graphs;

pub use diag::{DResult, Diagnostic, ErrorName, Span};
pub use tgc_runtime::dtype;
pub use tgc_runtime::DType;

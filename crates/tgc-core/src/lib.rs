//! tgc-core: every IR of tgc, the lowerings between them, the reference
//! interpreter and the code generators. See `ARCHITECTURE.md` for the map.

pub mod diag;
pub mod dtype;
pub mod frontend;

pub use diag::{DResult, Diagnostic, ErrorName, Span};
pub use dtype::DType;

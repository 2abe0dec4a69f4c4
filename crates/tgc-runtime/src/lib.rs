//! tgc-runtime: what generated code and the `tgc` tool need at run time.

pub mod dtype;

pub use dtype::DType;

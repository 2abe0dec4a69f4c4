//! The CPU path: Tiny IR → regions ([`crate::region`]) → loop nests, one
//! kernel per region ([`loop_ir`], built by [`from_tiny::lower`]) → C or
//! Rust source (`crate::emit`).
//!
//! Kernels are loop nests in the SCoP-clean style of `spec/003` (affine
//! subscripts, `restrict`, `#pragma scop`), with the epilogue fusion of
//! `spec/001` §8 and the consumer-driven compute-at of `spec/003` (a
//! producer reduction re-run at each read of it); a contraction kernel is
//! printed on the packed template instead ([`packed`]: BLIS-style panels,
//! the runtime's micro-kernel, tiles on its thread pool), which computes
//! the same bits (each step a fused multiply-add in the nest's order,
//! [`packed::fused_factors`]); any other reduction folds into split accumulators
//! ([`lanes`]); consecutive plain kernels over the same rows run row by
//! row, their temporaries held one row at a time ([`rows`]); the other
//! temporaries share the slots of one arena by their live ranges
//! ([`arena`]).

pub mod arena;
pub mod from_tiny;
pub mod lanes;
pub mod loop_ir;
pub mod packed;
pub mod rows;
pub mod tile;

pub use from_tiny::{lower, lower_regions, lower_with, Options};
pub use loop_ir::{BufId, Buffer, Expr, Kernel, Loop, Nest, Program, Reduction, Role, RowGroup, Strip};
pub use tile::{strip_mine, TilePlan};

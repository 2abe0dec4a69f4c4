//! Tiny IR (`spec/002`): a pure DAG of movement, unary, binary, reduce, cast
//! and I/O nodes in which GEMM, convolution and attention are written naively
//! (movement → element-wise `MUL` → `REDUCE(SUM)`).
//!
//! Invariants (checked by [`verify::verify`]):
//! - nodes are in topological order: every source id is smaller than the node's;
//! - every node has the number of sources its op takes (`Op::arity`);
//! - every node's stored type is what [`infer::infer`] computes from its
//!   sources: binary and `WHERE` operands have identical shapes and dtypes
//!   (broadcasts are explicit `EXPAND`s, `002` §3), `REDUCE` has an
//!   accumulator dtype and removes its axes, `PERMUTE` is a permutation,
//!   `SHRINK` steps are positive and `VIEW` maps are non-decreasing affine +
//!   floordiv expressions (decision 5);
//! - labels are unique; every output names an existing node;
//! - shape facts that cannot be decided symbolically are listed in
//!   `Graph::constraints` and checked by `Graph::bind`.
//!
//! The vocabulary is decision 6 of `spec/README.md`: unary NEG, RELU, EXP2,
//! LOG2, SQRT, RSQRT, RECIP; binary ADD, SUB, MUL, FDIV, MAX, MIN, CMPLT,
//! CMPEQ; WHERE; REDUCE{SUM,MAX,MIN}; CAST; the movement ops RESHAPE, PERMUTE,
//! EXPAND, PAD, SHRINK, FLIP, VIEW; INPUT and CONST (a scalar of shape `[]`).

pub mod dot;
pub mod graph;
pub mod infer;
pub mod json;
pub mod op;
pub mod text;
pub mod verify;

pub use graph::{Graph, Node, NodeConstraint, NodeId, Output, Symbol};
pub use infer::{Constraint, Rel, TensorType};
pub use json::{load_json, to_json};
pub use op::{BinaryOp, Op, ReduceOp, UnaryOp};

#[cfg(test)]
mod tests;

//! Graphs shared by the tests of several modules, built with the builder.

use crate::sym::Dim;
use crate::tiny::{BinaryOp, Graph, Output, ReduceOp};
use crate::DType;

/// Parses a shape such as `["M", "1", "K"]`.
pub fn shape(s: &[&str]) -> Vec<Dim> {
    s.iter().map(|x| Dim::parse(x).expect("test shape")).collect()
}

/// `spec/002` §5.1: `A[M,K] · B[K,N]` by reshape, permute, expand, `MUL`,
/// `REDUCE(SUM)` in fp32 and a cast back to fp16. Nodes `n0..n9`.
pub fn gemm() -> Graph {
    let mut g = Graph::new("gemm");
    let a = g.input("A", DType::F16, &shape(&["M", "K"])).unwrap();
    let b = g.input("B", DType::F16, &shape(&["K", "N"])).unwrap();
    let a2 = g.reshape(a, &shape(&["M", "1", "K"])).unwrap();
    let bt = g.permute(b, &[1, 0]).unwrap();
    let b2 = g.reshape(bt, &shape(&["1", "N", "K"])).unwrap();
    let ae = g.expand(a2, &shape(&["M", "N", "K"])).unwrap();
    let be = g.expand(b2, &shape(&["M", "N", "K"])).unwrap();
    let p = g.binary(BinaryOp::Mul, ae, be).unwrap();
    let r = g.reduce(ReduceOp::Sum, p, &[2], DType::F32).unwrap();
    let c = g.cast(r, DType::F16).unwrap();
    g.outputs.push(Output { name: "C".into(), node: c });
    g.declare_input_symbols();
    g
}

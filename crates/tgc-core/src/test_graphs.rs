//! Graphs shared by the tests of several modules, built with the builder.

use crate::sym::Dim;
use crate::tiny::{BinaryOp, Graph, NodeId, Output, ReduceOp, UnaryOp};
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
    g.declare_input_symbols().unwrap();
    g
}

/// `000` §7.1 / `001`: `relu(X[M,K] · W[K,N] + bias[N])` with inputs of
/// dtype `dt`, accumulation in fp32, the sum cast back to `dt` before the
/// bias is added (`001` §0), output of dtype `dt`.
pub fn gemm_bias_relu(dt: DType, m: &str, n: &str, k: &str) -> Graph {
    let mut g = Graph::new("gemm_bias_relu");
    let x = g.input("X", dt, &shape(&[m, k])).unwrap();
    let w = g.input("W", dt, &shape(&[k, n])).unwrap();
    let bias = g.input("bias", dt, &shape(&[n])).unwrap();
    let x2 = g.reshape(x, &shape(&[m, "1", k])).unwrap();
    let wt = g.permute(w, &[1, 0]).unwrap();
    let w2 = g.reshape(wt, &shape(&["1", n, k])).unwrap();
    let xe = g.expand(x2, &shape(&[m, n, k])).unwrap();
    let we = g.expand(w2, &shape(&[m, n, k])).unwrap();
    let p = g.binary(BinaryOp::Mul, xe, we).unwrap();
    let s = g.reduce(ReduceOp::Sum, p, &[2], DType::F32).unwrap();
    let c = g.cast(s, dt).unwrap();
    let b1 = g.reshape(bias, &shape(&["1", n])).unwrap();
    let be = g.expand(b1, &shape(&[m, n])).unwrap();
    let y = g.binary(BinaryOp::Add, c, be).unwrap();
    let r = g.unary(UnaryOp::Relu, y).unwrap();
    g.outputs.push(Output { name: "Y".into(), node: r });
    g.declare_input_symbols().unwrap();
    g
}

/// Broadcasts scalar `value` (a `CONST`) to `to`.
pub fn splat(g: &mut Graph, value: f64, dt: DType, to: &[Dim]) -> NodeId {
    let c = g.constant(value, dt).unwrap();
    let ones = vec![Dim::int(1); to.len()];
    let r = g.reshape(c, &ones).unwrap();
    g.expand(r, to).unwrap()
}

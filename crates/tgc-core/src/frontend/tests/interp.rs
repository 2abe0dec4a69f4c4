//! Whole graphs from source text through the reference interpreter
//! (`crate::interp`), against naive f64 computations, at the tolerance of
//! `spec/000` §9 (`rtol = atol = 1e-3`) for f16 and tighter for f32.

use std::collections::BTreeMap;

use super::eval::{random, unravel};
use super::numeric::conv_ref;
use crate::frontend::parser::parse;
use crate::frontend::to_tiny::lower;
use crate::interp::{run, Tensor};
use crate::DType::{self, F16, F32};

/// Parses, lowers and interprets `src` on `inputs` (in parameter order);
/// the program also prints and reads back (`frontend::raise`).
fn interpret(src: &str, inputs: Vec<Tensor>) -> Vec<Tensor> {
    let p = parse(src).unwrap_or_else(|e| panic!("{e}"));
    super::raise::reads_back(&p);
    let g = lower(&p, None).unwrap_or_else(|e| panic!("{e}"));
    run(&g, &BTreeMap::new(), &inputs).unwrap_or_else(|e| panic!("{e}"))
}

/// A random tensor already rounded to `dt` (so the reference sees the same values).
fn input(dt: DType, shape: &[usize], seed: u64, lo: f64, hi: f64) -> Tensor {
    Tensor::new(dt, shape, random(shape, seed, lo, hi).data).unwrap()
}

fn at(t: &Tensor, idx: &[usize]) -> f64 {
    t.data[idx.iter().zip(&t.shape).fold(0, |a, (i, d)| a * d + i)]
}

fn assert_close(got: &Tensor, want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.data.len(), want.len(), "{what}: element count");
    for (k, (a, b)) in got.data.iter().zip(want).enumerate() {
        assert!((a - b).abs() <= tol * (1.0 + b.abs()), "{what}[{k}] = {a}, want {b}");
    }
}

#[test]
fn gemm_bias_relu_f16_matches_f64() {
    let src = "graph<M=8, N=16, K=32> g(x: f16[M, K], w: f16[K, N], bias: f16[N]) -> (y: f16[M, N]) {\n\
        acc = matmul(x, w)\n    y = relu(acc + bias)\n    return y\n}\n";
    let (x, w, b) =
        (input(F16, &[8, 32], 31, -1.0, 1.0), input(F16, &[32, 16], 32, -1.0, 1.0), input(F16, &[16], 33, -1.0, 1.0));
    let y = interpret(src, vec![x.clone(), w.clone(), b.clone()]).remove(0);
    assert_eq!((y.dtype, y.shape.as_slice()), (F16, &[8, 16][..]));
    let want: Vec<f64> = (0..128)
        .map(|i| {
            let (m, n) = (i / 16, i % 16);
            let acc = F16.round((0..32).map(|k| at(&x, &[m, k]) * at(&w, &[k, n])).sum());
            (acc + at(&b, &[n])).max(0.0)
        })
        .collect();
    assert_close(&y, &want, 1e-3, "gemm_bias_relu");
}

#[test]
fn conv2d_matches_f64() {
    let src = "graph main(x: f32[2, 4, 9, 8], w: f32[6, 2, 3, 3], b: f32[6]) -> (y: f32[2, 6, 4, 4]) {\n\
        y = conv2d(x, w, bias=b, stride=[2, 2], pad=[1, 0, 2, 1], dilation=[1, 2], groups=2)\n    return y\n}\n";
    let (x, w, b) = (
        input(F32, &[2, 4, 9, 8], 34, -1.0, 1.0),
        input(F32, &[6, 2, 3, 3], 35, -1.0, 1.0),
        input(F32, &[6], 36, -1.0, 1.0),
    );
    let y = interpret(src, vec![x.clone(), w.clone(), b.clone()]).remove(0);
    let ex = super::eval::Tensor::new(&x.shape, x.data.clone());
    let ew = super::eval::Tensor::new(&w.shape, w.data.clone());
    assert_close(&y, &conv_ref(&ex, &ew, &b.data, [2, 2], [1, 0, 2, 1], [1, 2], 2, &[2, 6, 4, 4]), 1e-6, "conv2d");
}

#[test]
fn softmax_and_layernorm_match_f64_in_f16_and_f32() {
    for dt in [F16, F32] {
        let name = dt.dsl_name();
        let src = format!(
            "graph main(x: {name}[4, 64], g: {name}[64], b: {name}[64]) -> (p: {name}[4, 64], l: {name}[4, 64]) {{\n\
             p = softmax(x * 3)\n    l = layernorm(x, g, b, eps=1e-5)\n    return p, l\n}}\n"
        );
        let (x, g, b) =
            (input(dt, &[4, 64], 37, -2.0, 2.0), input(dt, &[64], 38, 0.5, 1.5), input(dt, &[64], 39, -1.0, 1.0));
        let out = interpret(&src, vec![x.clone(), g.clone(), b.clone()]);
        let tol = if dt == F16 { 1e-3 } else { 1e-6 };
        let (mut p, mut l) = (Vec::new(), Vec::new());
        for row in x.data.chunks(64) {
            let s: Vec<f64> = row.iter().map(|v| 3.0 * v).collect();
            let m = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = s.iter().map(|v| (v - m).exp()).sum();
            p.extend(s.iter().map(|v| (v - m).exp() / z));
            let mean = row.iter().sum::<f64>() / 64.0;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / 64.0;
            l.extend(row.iter().enumerate().map(|(j, v)| (v - mean) / (var + 1e-5).sqrt() * g.data[j] + b.data[j]));
        }
        assert_close(&out[0], &p, tol, &format!("softmax {name}"));
        assert_close(&out[1], &l, tol, &format!("layernorm {name}"));
    }
}

#[test]
fn causal_attention_f16_matches_f64() {
    let src = "graph<B=1, H=2, M=6, N=6, D=8> main(q: f16[B, H, M, D], k: f16[B, H, N, D], v: f16[B, H, N, D]) -> (o: f16[B, H, M, D]) {\n\
        o = attention(q, k, v, causal=true)\n    return o\n}\n";
    let sh = [1, 2, 6, 8];
    let (q, k, v) = (input(F16, &sh, 40, -1.0, 1.0), input(F16, &sh, 41, -1.0, 1.0), input(F16, &sh, 42, -1.0, 1.0));
    let o = interpret(src, vec![q.clone(), k.clone(), v.clone()]).remove(0);
    let mut want = Vec::new();
    for i in 0..2 * 6 * 8 {
        let [h, m, c] = unravel(i, &[2, 6, 8])[..] else { unreachable!() };
        let s: Vec<f64> = (0..=m)
            .map(|j| (0..8).map(|d| at(&q, &[0, h, m, d]) * at(&k, &[0, h, j, d])).sum::<f64>() / 8f64.sqrt())
            .collect();
        let mx = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let z: f64 = s.iter().map(|x| (x - mx).exp()).sum();
        want.push((0..=m).map(|j| (s[j] - mx).exp() / z * at(&v, &[0, h, j, c])).sum());
    }
    assert_close(&o, &want, 1e-3, "attention");
}

//! The example graphs of the specification (`tests/spec/` at the repository
//! root) load, survive a JSON round trip, and compute what a naive loop nest
//! written here computes.

use std::collections::BTreeMap;

use tgc_core::interp::{run, Tensor};
use tgc_core::tiny::{load_json, to_json, Graph};
use tgc_core::DType;

fn spec_text(name: &str) -> String {
    let path = format!("{}/../../tests/spec/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn load(name: &str) -> Graph {
    load_json(&spec_text(name)).unwrap_or_else(|e| panic!("{name}: {}", e.render(name)))
}

fn dims(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

/// Deterministic values that are small multiples of 1/8, exact in fp16, so
/// GEMM-like sums are exact in every dtype.
fn tensor(dtype: DType, shape: &[usize], seed: u64) -> Tensor {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let n: usize = shape.iter().product();
    let data = (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 33) % 17) as f64 / 8.0 - 1.0
        })
        .collect();
    Tensor::new(dtype, shape, data).unwrap()
}

fn f16(x: f64) -> f64 {
    DType::F16.round(x)
}

fn f32(x: f64) -> f64 {
    DType::F32.round(x)
}

fn assert_close(got: &Tensor, want: &[f64], shape: &[usize], what: &str) {
    assert_eq!(got.shape, shape, "{what}: shape");
    assert_eq!(got.data.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.data.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 1e-3 + 1e-3 * w.abs(), "{what}[{i}]: got {g}, want {w}");
    }
}

/// The spec's example graphs (the list); `tests/spec/` holds exactly these.
const FILES: [&str; 7] = [
    "000_gemm_bias_relu.json",
    "001_matmul_2dx2d.json",
    "001_matmul_1dx2d.json",
    "001_matmul_2dx1d.json",
    "002_gemm.json",
    "002_conv2d.json",
    "002_attention.json",
];

#[test]
fn tests_spec_holds_every_spec_example() {
    let dir = format!("{}/../../tests/spec", env!("CARGO_MANIFEST_DIR"));
    let mut present: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    present.sort();
    let mut want: Vec<&str> = FILES.to_vec();
    want.sort();
    assert_eq!(present, want);
}

#[test]
fn every_spec_graph_round_trips_through_json() {
    for name in FILES {
        let g = load(name);
        let text = to_json(&g);
        let h = load_json(&text).unwrap_or_else(|e| panic!("{name} reloaded: {e}\n{text}"));
        assert_eq!(h.name, g.name, "{name}");
        assert_eq!(h.len(), g.len(), "{name}");
        for (a, b) in g.nodes().iter().zip(h.nodes()) {
            assert_eq!((&a.op, &a.src, &a.ty, &a.label), (&b.op, &b.src, &b.ty, &b.label), "{name}");
        }
        assert_eq!(h.outputs, g.outputs, "{name}");
        assert_eq!(h.symbols, g.symbols, "{name}");
        assert_eq!(to_json(&h), text, "{name}: to_json is stable");
        assert!(tgc_core::tiny::verify::verify(&g).is_empty(), "{name}");
    }
}

/// `C[m,n] = Σ_k A[m,k]·B[k,n]` in f64.
fn matmul(a: &[f64], b: &[f64], m: usize, k: usize, n: usize) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
        }
    }
    c
}

#[test]
fn gemm_002_matches_a_triple_loop() {
    let g = load("002_gemm.json");
    let (m, k, n) = (3, 5, 4);
    let a = tensor(DType::F16, &[m, k], 1);
    let b = tensor(DType::F16, &[k, n], 2);
    let out = run(&g, &dims(&[("M", 3), ("K", 5), ("N", 4)]), &[a.clone(), b.clone()]).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].dtype, DType::F16);
    let want: Vec<f64> = matmul(&a.data, &b.data, m, k, n).into_iter().map(|v| f16(f32(v))).collect();
    assert_eq!(out[0].data, want);
}

#[test]
fn gemm_64_cubed_is_fast_enough_for_tests() {
    let g = load("002_gemm.json");
    let a = tensor(DType::F16, &[64, 64], 3);
    let b = tensor(DType::F16, &[64, 64], 4);
    let t = std::time::Instant::now();
    // Symbols are inferred from the input shapes.
    let out = run(&g, &BTreeMap::new(), &[a.clone(), b.clone()]).unwrap();
    let took = t.elapsed();
    let want: Vec<f64> = matmul(&a.data, &b.data, 64, 64, 64).into_iter().map(|v| f16(f32(v))).collect();
    assert_eq!(out[0].data, want);
    assert!(took.as_secs_f64() < 5.0, "64x64x64 GEMM took {took:?}");
}

#[test]
fn matmuls_of_001_match_naive_loops() {
    let (m, k, n) = (4, 6, 5);
    let x = tensor(DType::F16, &[m, k], 5);
    let w = tensor(DType::F16, &[k, n], 6);
    let bias = tensor(DType::F16, &[n], 7);
    let d = dims(&[("M", 4), ("K", 6), ("N", 5)]);
    let out = run(&load("001_matmul_2dx2d.json"), &d, &[x.clone(), w.clone(), bias.clone()]).unwrap();
    let y = matmul(&x.data, &w.data, m, k, n);
    let want: Vec<f64> = (0..m * n).map(|i| f16((f32(y[i]) + bias.data[i % n]).max(0.0))).collect();
    assert_eq!(out[0].data, want);
    assert!(want.contains(&0.0) && want.iter().any(|&v| v > 0.0), "the test exercises ReLU");

    let v = tensor(DType::F16, &[k], 8);
    let out = run(&load("001_matmul_1dx2d.json"), &dims(&[("K", 6), ("N", 5)]), &[v.clone(), w.clone()]).unwrap();
    let want: Vec<f64> = matmul(&v.data, &w.data, 1, k, n).into_iter().map(|s| f16(f32(s))).collect();
    assert_close(&out[0], &want, &[n], "1D×2D");

    let out = run(&load("001_matmul_2dx1d.json"), &dims(&[("M", 4), ("K", 6)]), &[x.clone(), v.clone()]).unwrap();
    let want: Vec<f64> = matmul(&x.data, &v.data, m, k, 1).into_iter().map(|s| f16(f32(s))).collect();
    assert_close(&out[0], &want, &[m], "2D×1D");
}

#[test]
fn op_list_gemm_bias_relu_equals_the_node_format_one() {
    let x = tensor(DType::F16, &[3, 7], 9);
    let w = tensor(DType::F16, &[7, 2], 10);
    let bias = tensor(DType::F16, &[2], 11);
    let d = dims(&[("M", 3), ("K", 7), ("N", 2)]);
    let g = load("000_gemm_bias_relu.json");
    assert_eq!(g.outputs.len(), 1);
    assert_eq!(g.outputs[0].name, "C2");
    let a = run(&g, &d, &[x.clone(), w.clone(), bias.clone()]).unwrap();
    let b = run(&load("001_matmul_2dx2d.json"), &d, &[x, w, bias]).unwrap();
    assert_eq!(a[0].shape, b[0].shape);
    assert_eq!(a[0].dtype, b[0].dtype);
    assert_eq!(a[0].data, b[0].data);
}

/// Grouped Conv2D, NCHW, weights `[Cout, Cin, Kh, Kw]`, `Cout = G·Rcout`.
struct Conv {
    n: usize,
    g: usize,
    cin: usize,
    rcout: usize,
    h: usize,
    w: usize,
    k: usize,
    s: usize,
    d: usize,
    p: usize,
}

impl Conv {
    fn out(&self, size: usize) -> usize {
        (size + 2 * self.p - self.d * (self.k - 1) - 1) / self.s + 1
    }

    fn naive(&self, x: &[f64], w: &[f64], b: &[f64]) -> Vec<f64> {
        let (ct, cout) = (self.g * self.cin, self.g * self.rcout);
        let (oy, ox) = (self.out(self.h), self.out(self.w));
        let mut y = Vec::new();
        for n in 0..self.n {
            for co in 0..cout {
                let g = co / self.rcout;
                for i in 0..oy {
                    for j in 0..ox {
                        let mut acc = 0.0;
                        for c in 0..self.cin {
                            for ky in 0..self.k {
                                for kx in 0..self.k {
                                    let yy = (i * self.s + ky * self.d) as i64 - self.p as i64;
                                    let xx = (j * self.s + kx * self.d) as i64 - self.p as i64;
                                    if yy < 0 || xx < 0 || yy >= self.h as i64 || xx >= self.w as i64 {
                                        continue;
                                    }
                                    let xv =
                                        x[((n * ct + g * self.cin + c) * self.h + yy as usize) * self.w + xx as usize];
                                    acc += xv * w[((co * self.cin + c) * self.k + ky) * self.k + kx];
                                }
                            }
                        }
                        y.push(f16(f32(acc) + b[co]));
                    }
                }
            }
        }
        y
    }

    fn dims(&self) -> BTreeMap<String, i64> {
        let v = |x: usize| x as i64;
        let (oy, ox) = (self.out(self.h), self.out(self.w));
        let mut d = dims(&[("N", v(self.n)), ("G", v(self.g)), ("Cin", v(self.cin)), ("Rcout", v(self.rcout))]);
        d.extend(dims(&[
            ("Cin_total", v(self.g * self.cin)),
            ("Cout", v(self.g * self.rcout)),
            ("H", v(self.h)),
            ("W", v(self.w)),
        ]));
        d.extend(dims(&[
            ("Kh", v(self.k)),
            ("Kw", v(self.k)),
            ("Sh", v(self.s)),
            ("Sw", v(self.s)),
            ("Dh", v(self.d)),
            ("Dw", v(self.d)),
        ]));
        d.extend(dims(&[
            ("pt", v(self.p)),
            ("pb", v(self.p)),
            ("pl", v(self.p)),
            ("pr", v(self.p)),
            ("Oy", v(oy)),
            ("Ox", v(ox)),
        ]));
        d
    }
}

#[test]
fn conv2d_002_matches_a_naive_convolution() {
    let g = load("002_conv2d.json");
    let cases = [
        Conv { n: 1, g: 1, cin: 2, rcout: 3, h: 5, w: 5, k: 3, s: 2, d: 1, p: 1 },
        Conv { n: 2, g: 2, cin: 2, rcout: 2, h: 6, w: 7, k: 3, s: 1, d: 2, p: 2 },
    ];
    for (t, c) in cases.iter().enumerate() {
        let (ct, cout) = (c.g * c.cin, c.g * c.rcout);
        let x = tensor(DType::F16, &[c.n, ct, c.h, c.w], 20 + t as u64);
        let w = tensor(DType::F16, &[cout, c.cin, c.k, c.k], 30 + t as u64);
        let b = tensor(DType::F16, &[cout], 40 + t as u64);
        let out = run(&g, &c.dims(), &[x.clone(), w.clone(), b.clone()]).unwrap_or_else(|e| panic!("case {t}: {e}"));
        assert_eq!(out[0].dtype, DType::F16);
        let want = c.naive(&x.data, &w.data, &b.data);
        assert_close(&out[0], &want, &[c.n, cout, c.out(c.h), c.out(c.w)], &format!("conv case {t}"));
    }
}

#[test]
fn conv2d_002_needs_every_symbol_and_a_consistent_output_size() {
    let g = load("002_conv2d.json");
    let c = Conv { n: 1, g: 1, cin: 1, rcout: 1, h: 5, w: 5, k: 3, s: 2, d: 1, p: 1 };
    let mut d = c.dims();
    d.insert("Oy".into(), 4);
    let x = tensor(DType::F16, &[1, 1, 5, 5], 1);
    let w = tensor(DType::F16, &[1, 1, 3, 3], 2);
    let b = tensor(DType::F16, &[1], 3);
    let e = run(&g, &d, &[x.clone(), w.clone(), b.clone()]).unwrap_err();
    assert_eq!(e.name, tgc_core::ErrorName::AxisSizeMismatch, "{e}");
    // Symbols that no input shape determines must be given.
    let mut d = c.dims();
    d.remove("Sh");
    let e = run(&g, &d, &[x, w, b]).unwrap_err();
    assert_eq!(e.name, tgc_core::ErrorName::UnboundSymbol, "{e}");
    assert!(e.message.contains("Sh"), "{e}");
}

/// The immediate of node `n11` in `002` §5.3 (log2 e to 7 digits).
#[allow(clippy::approx_constant)]
const SPEC_LOG2_E: f64 = 1.442695;

#[test]
fn attention_002_is_a_row_softmax_of_its_scores() {
    let g = load("002_attention.json");
    let (bsz, h, m, n, d) = (2, 1, 3, 4, 2);
    let q = tensor(DType::F16, &[bsz, h, m, d], 50);
    let k = tensor(DType::F16, &[bsz, h, n, d], 51);
    let out = run(&g, &dims(&[("B", 2), ("H", 1), ("M", 3), ("N", 4), ("D", 2)]), &[q.clone(), k.clone()]).unwrap();
    // The graph reshapes Kᵀ [D, N] to [1, N, D] (002 §5.3, nodes n2 and n4):
    // a row-major reinterpretation, so row `r` of the right operand holds
    // Kᵀ's flat elements `r·D .. r·D + D`.
    let mut want = Vec::new();
    for bh in 0..bsz * h {
        let kt = |flat: usize| k.data[bh * n * d + (flat % n) * d + flat / n];
        let qv = |i: usize, c: usize| q.data[bh * m * d + i * d + c];
        for i in 0..m {
            let s: Vec<f64> = (0..n).map(|r| f32((0..d).map(|c| qv(i, c) * kt(r * d + c)).sum())).collect();
            let mx = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let a: Vec<f64> = s.iter().map(|v| ((v - mx) * f32(SPEC_LOG2_E)).exp2()).collect();
            let z = f32(a.iter().sum());
            want.extend(a.iter().map(|v| f16(v / z)));
        }
    }
    assert_close(&out[0], &want, &[bsz, h, m, n], "attention");
    for row in out[0].data.chunks(n) {
        assert!((row.iter().sum::<f64>() - 1.0).abs() < 4e-3, "a softmax row sums to 1: {row:?}");
    }
}

//! Generated C and Rust, compiled and run against naive computations written
//! here.

mod harness;
mod numerics;

use std::process::Command;

use harness::{
    assert_close, assert_within, compile, compile_edited, compile_with, data, f32_bits, f32_inputs, Compiled, Scratch,
    Tol,
};

use crate::diag::ErrorName;
use crate::sym::Dim;
use crate::test_graphs::{gemm_bias_relu, shape, splat};
use crate::tiny::{BinaryOp, Graph, Output, ReduceOp, UnaryOp};
use crate::DType;
use tgc_runtime::HostTensor;

/// `relu(round(X·W) + bias)` with every rounding of the graph.
fn gemm_ref(x: &[f64], w: &[f64], b: &[f64], (m, k, n): (usize, usize, usize), dt: DType) -> Vec<f64> {
    let mut out = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            let acc: f64 = (0..k).map(|l| x[i * k + l] * w[l * n + j]).sum();
            let c = dt.round(acc);
            out.push(dt.round((c + b[j]).max(0.0)));
        }
    }
    out
}

fn check_gemm(dt: DType, sizes: &[(usize, usize, usize)]) {
    let g = gemm_bias_relu(dt, "M", "N", "K");
    assert_eq!(g.symbols.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["M", "K", "N"]);
    let lib = compile(&g);
    for (t, &(m, k, n)) in sizes.iter().enumerate() {
        let x = data(3 * t as u64 + 1, m * k, -1.0, 1.0, dt);
        let w = data(3 * t as u64 + 2, k * n, -1.0, 1.0, dt);
        let b = data(3 * t as u64 + 3, n, -0.5, 0.5, dt);
        let want = gemm_ref(&x, &w, &b, (m, k, n), dt);
        let (c, r) = lib.run(&[x, w, b], &[m as i64, k as i64, n as i64]);
        for (run, who) in [(c, "C"), (r, "Rust")] {
            assert_eq!(run.rc, 0, "{who}");
            assert_close(&run.outputs[0], &want, dt, &format!("{who} {dt} gemm {m}x{k}x{n}"));
        }
    }
}

/// Symbolic tiling (`003`): both printers strip-mine M and N by run-time
/// tiles read after the symbols in `dims`; every tile size, dividing the
/// extents or not, gives the untiled kernel's bits (and the interpreter's
/// values, checked by `run`); a tile size below 1 is refused.
#[test]
fn symbolic_tiles_in_c_and_rust() {
    let g = gemm_bias_relu(DType::F32, "M", "N", "K");
    let plain = compile(&g);
    let opts = crate::cpu::Options { tiles: crate::cpu::TilePlan { axes: vec![0, 1] }, ..Default::default() };
    let tiled = compile_with(&g, &opts);
    assert!(tiled.rust_src.contains(".step_by(s_tile0 as usize)"), "{}", tiled.rust_src);
    let (m, k, n) = (13, 5, 11);
    let ins = [
        data(1, m * k, -1.0, 1.0, DType::F32),
        data(2, k * n, -1.0, 1.0, DType::F32),
        data(3, n, -0.5, 0.5, DType::F32),
    ];
    let dims = [m as i64, k as i64, n as i64];
    let (want, _) = plain.run(&ins, &dims);
    for t in [[1, 1], [2, 3], [5, 7], [16, 16], [13, 11], [16, 14], [4, 1]] {
        let (c, r) = tiled.run(&ins, &[dims[0], dims[1], dims[2], t[0], t[1]]);
        for (run, who) in [(c, "C"), (r, "Rust")] {
            assert_eq!(run.rc, 0, "{who}");
            assert_eq!(f32_bits(&run.outputs[0]), f32_bits(&want.outputs[0]), "{who} at tiles {t:?}");
        }
    }
    // `run` wants the interpreter's agreement, which ignores tiles: check
    // the refusal of a 0 tile in the text (`tests/symbolic_tiles.rs` runs it).
    for (src, check) in [(&tiled.c_src, "if (!(1 <= s_tile1)) return 2;"), (&tiled.rust_src, "if !(1 <= s_tile1) {")] {
        assert!(src.contains(check), "{src}");
    }
}

const GEMM_SIZES: [(usize, usize, usize); 5] = [(1, 1, 1), (7, 3, 5), (129, 7, 33), (5, 129, 1), (1, 17, 129)];

#[test]
fn gemm_bias_relu_f32_with_symbolic_dims() {
    check_gemm(DType::F32, &GEMM_SIZES);
}

#[test]
fn gemm_bias_relu_f16_with_symbolic_dims() {
    check_gemm(DType::F16, &GEMM_SIZES);
}

#[test]
fn gemm_bias_relu_with_fixed_sizes_is_one_fused_kernel() {
    for dt in [DType::F32, DType::BF16] {
        let g = gemm_bias_relu(dt, "7", "129", "1");
        let lib = compile(&g);
        // C: one kernel on the packed contraction template (no plain nest).
        assert_eq!(lib.c_src.matches("_task(void* pk_vctx, int64_t pk_t)").count(), 1, "{}", lib.c_src);
        assert!(lib.c_src.contains("pk_rt->ukernel(") && !lib.c_src.contains("#pragma scop"), "{}", lib.c_src);
        assert!(
            lib.rust_src.contains("::__private::cpu_rt::ukernel(") && !lib.rust_src.contains("unsafe"),
            "{}",
            lib.rust_src
        );
        let x = data(11, 7, -1.0, 1.0, dt);
        let w = data(12, 129, -1.0, 1.0, dt);
        let b = data(13, 129, -0.5, 0.5, dt);
        let want = gemm_ref(&x, &w, &b, (7, 1, 129), dt);
        let (c, r) = lib.run(&[x, w, b], &[]);
        assert_close(&c.outputs[0], &want, dt, "C");
        assert_close(&r.outputs[0], &want, dt, "Rust");
    }
}

/// `x[R,C]` with `y[C]` broadcast: a shared product (materialised), `WHERE`,
/// a cast to i32, a bool comparison.
#[test]
fn elementwise_chain_with_broadcast() {
    let mut g = Graph::new("ew");
    let rc = shape(&["R", "C"]);
    let x = g.input("x", DType::F32, &rc).unwrap();
    let y = g.input("y", DType::F32, &shape(&["C"])).unwrap();
    let y1 = g.reshape(y, &shape(&["1", "C"])).unwrap();
    let yb = g.expand(y1, &rc).unwrap();
    let p = g.binary(BinaryOp::Mul, x, yb).unwrap();
    let half = splat(&mut g, 0.5, DType::F32, &rc);
    let lt = g.binary(BinaryOp::Cmplt, p, half).unwrap();
    let e = g.unary(UnaryOp::Exp2, p).unwrap();
    let sq = g.unary(UnaryOp::Sqrt, p).unwrap();
    let q = g.where_(lt, e, sq).unwrap();
    let out0 = g.binary(BinaryOp::Sub, q, yb).unwrap();
    let four = splat(&mut g, 4.0, DType::F32, &rc);
    let p4 = g.binary(BinaryOp::Mul, p, four).unwrap();
    let pi = g.cast(p4, DType::I32).unwrap();
    let out1 = g.unary(UnaryOp::Relu, pi).unwrap();
    let out2 = g.binary(BinaryOp::Cmplt, x, yb).unwrap();
    for (name, node) in [("q", out0), ("i", out1), ("b", out2)] {
        g.outputs.push(Output { name: name.into(), node });
    }
    g.declare_input_symbols().unwrap();
    let lib = compile(&g);
    assert!(lib.c_src.contains("tmp0"), "the shared product is materialised:\n{}", lib.c_src);
    for (r, c) in [(1, 1), (3, 7), (4, 129)] {
        let xs = data(21, r * c, -2.0, 2.0, DType::F32);
        let ys = data(22, c, -2.0, 2.0, DType::F32);
        let mut want = [Vec::new(), Vec::new(), Vec::new()];
        for i in 0..r {
            for j in 0..c {
                let (xv, yv) = (xs[i * c + j] as f32, ys[j] as f32);
                let pv = xv * yv;
                let qv = if pv < 0.5 { pv.exp2() } else { pv.sqrt() };
                want[0].push((qv - yv) as f64);
                want[1].push(((pv * 4.0) as i64 as i32).max(0) as f64);
                want[2].push(if xv < yv { 1.0 } else { 0.0 });
            }
        }
        let (cr, rr) = lib.run(&[xs, ys], &[r as i64, c as i64]);
        for run in [cr, rr] {
            assert_eq!(run.rc, 0);
            assert_close(&run.outputs[0], &want[0], DType::F32, "where");
            assert_eq!(run.outputs[1], want[1], "i32 cast");
            assert_eq!(run.outputs[2], want[2], "bool");
        }
    }
}

/// A batched product `[B, M, N]` stored as `[M, B*N]` with a bias: the
/// epilogue reads the accumulator through `PERMUTE` and `RESHAPE`, and the
/// grouping keeps them in one kernel (no buffer for the product).
#[test]
fn epilogue_through_permute_and_reshape() {
    let mut g = Graph::new("bmm_t");
    let (b_, m, k, n) = ("B", "M", "K", "N");
    let x = g.input("x", DType::F32, &shape(&[b_, m, k])).unwrap();
    let w = g.input("w", DType::F32, &shape(&[b_, k, n])).unwrap();
    let bias = g.input("bias", DType::F32, &shape(&[m])).unwrap();
    let x4 = g.reshape(x, &shape(&[b_, m, k, "1"])).unwrap();
    let x4 = g.expand(x4, &shape(&[b_, m, k, n])).unwrap();
    let w4 = g.reshape(w, &shape(&[b_, "1", k, n])).unwrap();
    let w4 = g.expand(w4, &shape(&[b_, m, k, n])).unwrap();
    let p = g.binary(BinaryOp::Mul, x4, w4).unwrap();
    let s = g.reduce(ReduceOp::Sum, p, &[2], DType::F32).unwrap();
    let t = g.permute(s, &[1, 0, 2]).unwrap();
    let bn = Dim::product(&shape(&[b_, n]));
    let t = g.reshape(t, &[Dim::sym(m), bn.clone()]).unwrap();
    let b2 = g.reshape(bias, &shape(&[m, "1"])).unwrap();
    let b2 = g.expand(b2, &[Dim::sym(m), bn]).unwrap();
    let y = g.binary(BinaryOp::Add, t, b2).unwrap();
    g.outputs.push(Output { name: "y".into(), node: y });
    g.declare_input_symbols().unwrap();
    let lib = compile(&g);
    assert!(!lib.c_src.contains("arena slot"), "one kernel, no buffer for the product:\n{}", lib.c_src);
    for (bv, mv, kv, nv) in [(1, 1, 1, 1), (2, 3, 5, 4), (3, 2, 7, 5)] {
        let xs = data(31, bv * mv * kv, -1.0, 1.0, DType::F32);
        let ws = data(32, bv * kv * nv, -1.0, 1.0, DType::F32);
        let bs = data(33, mv, -1.0, 1.0, DType::F32);
        let mut want = vec![0.0; mv * bv * nv];
        for bi in 0..bv {
            for i in 0..mv {
                for j in 0..nv {
                    let mut acc = 0.0f32;
                    for l in 0..kv {
                        acc += xs[(bi * mv + i) * kv + l] as f32 * ws[(bi * kv + l) * nv + j] as f32;
                    }
                    want[i * bv * nv + bi * nv + j] = (acc + bs[i] as f32) as f64;
                }
            }
        }
        let dims: Vec<i64> = g
            .symbols
            .iter()
            .map(|sym| match sym.name.as_str() {
                "B" => bv,
                "M" => mv,
                "K" => kv,
                _ => nv,
            } as i64)
            .collect();
        let (cr, rr) = lib.run(&[xs, ws, bs], &dims);
        for run in [cr, rr] {
            assert_eq!(run.rc, 0);
            assert_close(&run.outputs[0], &want, DType::F32, "permuted epilogue");
        }
    }
}

/// Row softmax in base 2: `REDUCE MAX`, `SUB`, `EXP2`, `REDUCE SUM`, `FDIV`;
/// the exponentials feed both the sum and the division.
#[test]
fn softmax_like_reduce_with_fan_out() {
    let mut g = Graph::new("softmax");
    let rc = shape(&["R", "C"]);
    let x = g.input("x", DType::F32, &rc).unwrap();
    let m = g.reduce(ReduceOp::Max, x, &[1], DType::F32).unwrap();
    let m1 = g.reshape(m, &shape(&["R", "1"])).unwrap();
    let mb = g.expand(m1, &rc).unwrap();
    let d = g.binary(BinaryOp::Sub, x, mb).unwrap();
    let e = g.unary(UnaryOp::Exp2, d).unwrap();
    let s = g.reduce(ReduceOp::Sum, e, &[1], DType::F32).unwrap();
    let s1 = g.reshape(s, &shape(&["R", "1"])).unwrap();
    let sb = g.expand(s1, &rc).unwrap();
    let y = g.binary(BinaryOp::Fdiv, e, sb).unwrap();
    g.outputs.push(Output { name: "y".into(), node: y });
    g.declare_input_symbols().unwrap();
    let lib = compile(&g);
    // Max, exp2, sum and div in one row group: one nest over the rows, the
    // exponentials held one row at a time (no tensor-sized temporary), the
    // sum in the exp2's loop, the division of the row before ahead of each
    // chunk of that loop (`rows::defers_into_producer_loop`), the last
    // row's after the rows; printed three times, as the AVX-512F and AVX2
    // copies of `emit::c`'s `Isa` (the `EXP2` in a lane loop) and the usual
    // function.
    assert_eq!(lib.c_src.matches("#pragma scop").count(), 3, "{}", lib.c_src);
    for k in [
        "{ /* k0 */",
        "{ /* k1, k2 in its loop; k3 of the row before, chunk by chunk ahead of it */",
        "{ /* k3 of the last row */",
    ] {
        assert!(lib.c_src.contains(k), "{k}:\n{}", lib.c_src);
    }
    assert!(lib.c_src.contains("(int64_t)(s_C) * (int64_t)sizeof(float)"), "{}", lib.c_src);
    assert!(lib.c_src.contains("/* one row */"), "{}", lib.c_src);
    for (r, c) in [(1, 1), (3, 7), (5, 129)] {
        let xs = data(31, r * c, -4.0, 4.0, DType::F32);
        let mut want = Vec::new();
        for i in 0..r {
            let row = &xs[i * c..(i + 1) * c];
            let mx = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = row.iter().map(|v| (v - mx).exp2()).sum();
            want.extend(row.iter().map(|v| (v - mx).exp2() / z));
        }
        let (cr, rr) = lib.run(&[xs], &[r as i64, c as i64]);
        for run in [cr, rr] {
            assert_eq!(run.rc, 0);
            assert_close(&run.outputs[0], &want, DType::F32, "softmax");
        }
    }
}

/// `permute(flip(shrink(pad(x), step 2)))` read by a `MUL`, a `REDUCE` and
/// stored as it is; the pad guards end up inside the reduce loop.
#[test]
fn pad_shrink_flip_permute_chain_feeds_binary_and_reduce() {
    let mut g = Graph::new("chain");
    let x = g.input("x", DType::F32, &shape(&["H", "W"])).unwrap();
    let p = g.pad(x, &[(Dim::int(1), Dim::int(2)), (Dim::int(2), Dim::int(0))], 0.25).unwrap();
    let s = g.shrink(p, &shape(&["0", "1"]), &shape(&["H + 3", "W + 2"]), &shape(&["2", "1"])).unwrap();
    let f = g.flip(s, &[1]).unwrap();
    let t = g.permute(f, &[1, 0]).unwrap();
    let ts = g.shape(t).to_vec();
    assert_eq!(ts, shape(&["W + 1", "(H + 4)/2"]));
    let y = g.input("y", DType::F32, &ts).unwrap();
    let prod = g.binary(BinaryOp::Mul, t, y).unwrap();
    let sum = g.reduce(ReduceOp::Sum, t, &[1], DType::F32).unwrap();
    for (name, node) in [("prod", prod), ("sum", sum), ("t", t)] {
        g.outputs.push(Output { name: name.into(), node });
    }
    g.declare_input_symbols().unwrap();
    let lib = compile(&g);
    for (h, w) in [(1, 1), (4, 3), (7, 6)] {
        let (a_n, b_n) = (w + 1, (h + 4) / 2);
        let xs = data(41, h * w, -1.0, 1.0, DType::F32);
        let ys = data(42, a_n * b_n, -1.0, 1.0, DType::F32);
        let tv = |a: usize, b: usize| -> f64 {
            let (i, j) = (2 * b, w - a + 1);
            if (1..h + 1).contains(&i) && (2..w + 2).contains(&j) {
                xs[(i - 1) * w + (j - 2)]
            } else {
                0.25
            }
        };
        let t_want: Vec<f64> = (0..a_n).flat_map(|a| (0..b_n).map(move |b| (a, b))).map(|(a, b)| tv(a, b)).collect();
        let prod_want: Vec<f64> = t_want.iter().zip(&ys).map(|(a, b)| a * b).collect();
        let sum_want: Vec<f64> = (0..a_n).map(|a| (0..b_n).map(|b| tv(a, b)).sum()).collect();
        let (cr, rr) = lib.run(&[xs.clone(), ys.clone()], &[h as i64, w as i64]);
        for run in [cr, rr] {
            assert_eq!(run.rc, 0);
            assert_close(&run.outputs[0], &prod_want, DType::F32, "prod");
            assert_close(&run.outputs[1], &sum_want, DType::F32, "sum");
            assert_close(&run.outputs[2], &t_want, DType::F32, "t");
        }
    }
}

/// Copies of inputs, one node under two names, a scalar reduce, integer and
/// bool reductions, a bf16 output.
#[test]
fn outputs_copies_scalars_and_integer_reductions() {
    let mut g = Graph::new("misc");
    let x = g.input("x", DType::F32, &shape(&["N"])).unwrap();
    let xi = g.input("xi", DType::I32, &shape(&["N"])).unwrap();
    let total = g.reduce(ReduceOp::Sum, x, &[0], DType::F32).unwrap();
    let top = g.reduce(ReduceOp::Max, xi, &[0], DType::I32).unwrap();
    let zero = splat(&mut g, 0.0, DType::I32, &shape(&["N"]));
    let neg = g.binary(BinaryOp::Cmplt, xi, zero).unwrap();
    let count = g.reduce(ReduceOp::Sum, neg, &[0], DType::I32).unwrap();
    let xb = g.cast(x, DType::BF16).unwrap();
    let outs = [("a", x), ("b", x), ("total", total), ("top", top), ("count", count), ("xb", xb)];
    for (name, node) in outs {
        g.outputs.push(Output { name: name.into(), node });
    }
    g.declare_input_symbols().unwrap();
    let lib = compile(&g);
    for n in [1usize, 9] {
        let xs = data(51, n, -3.0, 3.0, DType::F32);
        let is: Vec<f64> = data(52, n, -100.0, 100.0, DType::F32).iter().map(|v| v.trunc()).collect();
        let (cr, rr) = lib.run(&[xs.clone(), is.clone()], &[n as i64]);
        for run in [cr, rr] {
            assert_eq!(run.rc, 0);
            assert_eq!(run.outputs[0], xs);
            assert_eq!(run.outputs[1], xs);
            assert_close(&run.outputs[2], &[xs.iter().sum()], DType::F32, "total");
            assert_eq!(run.outputs[3], vec![is.iter().cloned().fold(f64::MIN, f64::max)]);
            assert_eq!(run.outputs[4], vec![is.iter().filter(|v| **v < 0.0).count() as f64]);
            assert_eq!(run.outputs[5], xs.iter().map(|v| DType::BF16.round(*v)).collect::<Vec<_>>());
        }
    }
}

/// Sizes that break an undecided constraint (`C = G·R` of a `RESHAPE`) are
/// refused before anything is written: 2 from C, `Err` from Rust.
#[test]
fn dims_breaking_a_constraint_are_refused() {
    let mut g = Graph::new("split");
    let x = g.input("x", DType::F32, &shape(&["C"])).unwrap();
    let r = g.reshape(x, &shape(&["G", "R"])).unwrap();
    let n = g.unary(UnaryOp::Neg, r).unwrap();
    g.outputs.push(Output { name: "y".into(), node: n });
    g.declare_input_symbols().unwrap();
    let lib = compile(&g);
    let xs = data(61, 6, -1.0, 1.0, DType::F32);
    let (c, r) = lib.run(std::slice::from_ref(&xs), &[6, 2, 3]);
    assert_eq!((c.rc, r.rc), (0, 0));
    assert_eq!(c.outputs[0], xs.iter().map(|v| -v).collect::<Vec<_>>());
    let (c, r) = lib.run(std::slice::from_ref(&xs), &[6, 3, 3]);
    assert_eq!((c.rc, r.rc), (2, 2));
    let (c, r) = lib.run(&[xs], &[6, 0, 3]);
    assert_eq!((c.rc, r.rc), (2, 2));
}

/// The harness's check with the interpreter cannot drop out unseen: an
/// interpreter call that fails for a reason other than the dims (an input
/// longer than its shape at the dims, of which C and Rust read the start)
/// fails `run`, where it used to skip the comparison; a refusal of the dims
/// is named (`DimsRefused`, `AxisSizeMismatch`) and C and Rust must refuse
/// them too; a library dropped with no call compared fails the test.
#[test]
fn the_harness_fails_a_call_the_interpreter_does_not_check() {
    let g = crate::pipeline::load(
        "graph<N> twice(x: f32[N]) -> (y: f32[N]) {\n    y = x * 2\n    return y\n}",
        crate::pipeline::Format::Dsl,
        None,
    )
    .unwrap()
    .graph;
    let lib = compile(&g);
    let message = |p: Box<dyn std::any::Any + Send>| p.downcast_ref::<String>().cloned().unwrap_or_default();
    let long = data(1, 5, -1.0, 1.0, DType::F32);
    let broken = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| lib.run(&[long], &[4])));
    let e = message(broken.expect_err("`run` passed a call the interpreter failed"));
    assert!(e.contains("the interpreter fails at dims [4], which is no dims refusal"), "{e}");
    assert!(e.contains("has 4 elements, got 5"), "{e}");

    let refused = lib.interp(&[vec![]], &[0]).expect_err("the interpreter refuses N = 0");
    assert_eq!(refused.0.name, ErrorName::AxisSizeMismatch);
    assert!(refused.0.message.contains("symbol `N` = 0: sizes must be at least 1"), "{}", refused.0);
    let (c, r) = lib.run(&[vec![]], &[0]);
    assert_eq!((c.rc, r.rc), (2, 2));

    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(lib)));
    let e = message(dropped.expect_err("a library with no compared call dropped quietly"));
    assert_eq!(e, "`twice`: no call was compared with the interpreter");
}

#[test]
fn bad_symbols_and_crate_paths_are_refused() {
    let g = gemm_bias_relu(DType::F32, "M", "N", "K");
    for s in ["1abc", "for", "a-b", "", "tgc_f16_to_f32"] {
        assert_eq!(super::c::emit_c(&g, s).unwrap_err().name, ErrorName::Unsupported, "{s}");
    }
    assert_eq!(super::rust::emit_rust(&g, "::tgc;").unwrap_err().name, ErrorName::Unsupported);
    assert!(super::rust::emit_rust(&g, "::tgc").is_ok());
}

#[test]
fn one_c_unit_runs_several_graphs() {
    let gemm = gemm_bias_relu(DType::F32, "2", "3", "4");
    let mut neg = Graph::new("neg");
    let x = neg.input("x", DType::I32, &shape(&["3"])).unwrap();
    let y = neg.unary(UnaryOp::Neg, x).unwrap();
    neg.outputs.push(Output { name: "y".into(), node: y });
    let unit = super::c::emit_c_units(&[(&gemm, "gemm"), (&neg, "neg")]).unwrap();
    assert_eq!(unit.matches("#include <math.h>").count(), 1, "{unit}");
    assert!(unit.contains("int32_t gemm(") && unit.contains("int32_t neg("), "{unit}");

    let (xv, wv, bv) =
        (data(1, 8, -1.0, 1.0, DType::F32), data(2, 12, -1.0, 1.0, DType::F32), data(3, 3, -0.5, 0.5, DType::F32));
    let t = |shape: &[usize], v: &[f64]| HostTensor::from_f64(DType::F32, shape, v).unwrap();
    let gemm_in = [t(&[2, 4], &xv), t(&[4, 3], &wv), t(&[3], &bv)];
    let neg_in = [HostTensor::from_f64(DType::I32, &[3], &[1.0, -2.0, 7.0]).unwrap()];
    let dir = Scratch::new("batch");
    let outs = crate::pipeline::run_cpu_batch(&[(&gemm, &gemm_in), (&neg, &neg_in)], &dir.0).unwrap();
    assert_close(&outs[0][0].to_f64_vec(), &gemm_ref(&xv, &wv, &bv, (2, 4, 3), DType::F32), DType::F32, "gemm");
    assert_eq!(outs[1][0].to_f64_vec(), [-1.0, 2.0, -7.0]);
}

/// Two residual blocks of the same shapes and ops, other weights: the C
/// holds the block's function once, called for both, and still computes
/// what the interpreter does (inside `Compiled::run`). Different shapes
/// keep their own functions.
#[test]
fn identical_kernels_are_printed_once() {
    let block = |n: usize| {
        format!(
            "graph main(x: f32[{n}, 64], w0: f32[64, 64], w1: f32[64, 64], b1: f32[64], w2: f32[64, 64], b2: f32[64]) \
             -> (y: f32[{n}, 64]) {{\n    x0 = matmul(x, w0)\n    y1 = relu(matmul(x0, w1) + b1) + x0\n    \
             y = relu(matmul(y1, w2) + b2) + y1\n    return y\n}}\n"
        )
    };
    let g = crate::pipeline::load(&block(24), crate::pipeline::Format::Dsl, None).unwrap().graph;
    let lib = compile(&g);
    let c = &lib.c_src;
    let defined = |k: &str| c.matches(&format!("static int32_t tgc_{k}_")).count();
    assert_eq!((defined("k0"), defined("k1"), defined("k2")), (1, 1, 0), "{c}");
    assert!(c.contains("/* tgc_k2_tgc_test_main: the C of tgc_k1_tgc_test_main, called in its place. */"), "{c}");
    assert_eq!(c.matches("if (tgc_k1_tgc_test_main(").count(), 2, "{c}");
    // Weights of 1/8 keep the three products' values near 1.
    let inputs: Vec<Vec<f64>> =
        f32_inputs(&g, 7).into_iter().map(|v| v.into_iter().map(|x| x / 8.0).collect()).collect();
    lib.run(&inputs, &[]);

    // The first block reads the graph input and writes a temporary of
    // another size than the second's output: nothing is shared.
    let text = block(24).replace("    x0 = matmul(x, w0)\n", "").replace("(x0, w1) + b1) + x0", "(x, w1) + b1) + x");
    let g = crate::pipeline::load(&text, crate::pipeline::Format::Dsl, None).unwrap().graph;
    let c = super::c::emit_c_units(&[(&g, "t")]).unwrap();
    assert!(!c.contains("called in its place"), "{c}");
}

/// The C of several graphs in parts of one function each (every function
/// its own translation unit, the entry points in the last), compiled at
/// once and linked into one library, computes what the interpreter does:
/// attention (row groups), a fused convolution and pool, and the two
/// residual blocks that share a function.
#[test]
fn c_in_parts_matches_the_interpreter() {
    let root = format!("{}/../../examples/graphs", env!("CARGO_MANIFEST_DIR"));
    let read = |name: &str| std::fs::read_to_string(format!("{root}/{name}")).unwrap();
    let blocks = "graph main(x: f32[4, 32], w0: f32[32, 32], w1: f32[32, 32], b1: f32[32], w2: f32[32, 32], \
                  b2: f32[32]) -> (y: f32[4, 32]) {\n    x0 = matmul(x, w0)\n    y1 = relu(matmul(x0, w1) + b1) + \
                  x0\n    y = relu(matmul(y1, w2) + b2) + y1\n    return y\n}\n";
    let mut graphs = Vec::new();
    for text in [read("attention.tgc"), read("conv_relu_pool.tgc"), blocks.to_string()] {
        let g = crate::pipeline::load(&text, crate::pipeline::Format::Dsl, None).unwrap().graph;
        let values = g.resolve_dims(&Default::default(), None).unwrap();
        graphs.push(g.bind(&values).unwrap());
    }
    let symbols: Vec<String> = graphs.iter().map(|g| format!("t_{}", g.name)).collect();
    let programs: Vec<(&Graph, crate::cpu::Program, &str)> =
        graphs.iter().zip(&symbols).map(|(g, s)| (g, crate::cpu::lower(g).unwrap(), s.as_str())).collect();
    let parts = super::c::emit_c_parts(&programs, 1).unwrap();
    let (entries, functions) = parts.split_last().unwrap();
    assert!(functions.len() >= 6, "{} parts", functions.len());
    for part in functions {
        let defined = part.matches("TGC_PART void ").count() + part.matches("TGC_PART int32_t ").count();
        assert_eq!(defined, 1, "one function a part:\n{part}");
    }
    assert_eq!(entries.matches("TGC_PART int32_t tgc_k1_t_main(").count(), 1, "{entries}");
    assert_eq!(entries.matches("tgc_k1_t_main(in").count(), 2, "called for both blocks:\n{entries}");
    assert_eq!(super::c::emit_c_parts(&programs, usize::MAX).unwrap(), [super::c::emit_c_programs(&programs).unwrap()]);

    let inputs: Vec<Vec<HostTensor>> = graphs.iter().map(|g| crate::pipeline::sample_inputs(g).unwrap()).collect();
    let runs: Vec<(&Graph, &[HostTensor])> = graphs.iter().zip(&inputs).map(|(g, i)| (g, &i[..])).collect();
    let dir = Scratch::new("parts");
    let outs = crate::pipeline::run_cpu_parts(&runs, &dir.0, 1).unwrap_or_else(|e| panic!("{e:?}"));
    for ((g, inputs), got) in runs.iter().zip(outs) {
        let want = crate::pipeline::run_interp(g, inputs).unwrap();
        for (got, want) in got.iter().zip(&want) {
            assert_within(&got.to_f64_vec(), &want.to_f64_vec(), Tol::of(want.dtype()), &g.name);
        }
    }
}

#[test]
fn a_c_unit_refuses_functions_of_the_same_name() {
    let g = gemm_bias_relu(DType::F32, "M", "N", "K");
    // `tgc_k0_a` is the first kernel of the entry point `a`.
    for pair in [["a", "a"], ["a", "tgc_k0_a"]] {
        let e = super::c::emit_c_units(&[(&g, pair[0]), (&g, pair[1])]).unwrap_err();
        assert_eq!(e.name, ErrorName::Unsupported, "{pair:?}: {e}");
    }
}

/// Every example graph of the specification (`tests/spec/`), generated as C
/// and Rust and compared with the interpreter (inside `Compiled::run`).
#[test]
fn spec_graphs_match_the_interpreter() {
    let dir = format!("{}/../../tests/spec", env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    files.sort();
    // Conv2D: N G Cin Rcout H W K S D P, output size (H + 2P - D(K-1) - 1)/S + 1.
    let convs = [(1, 1, 2, 3, 5, 5, 3, 2, 1, 1), (2, 2, 2, 2, 6, 7, 3, 1, 2, 2)];
    for name in &files {
        let path = format!("{dir}/{name}");
        let g = crate::tiny::load_json(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let lib = compile(&g);
        let points: Vec<Vec<(&str, i64)>> = if name.contains("conv") {
            convs
                .iter()
                .map(|&(n, gr, cin, rc, h, w, k, s, d, p)| {
                    let out = |x: i64| (x + 2 * p - d * (k - 1) - 1) / s + 1;
                    vec![
                        ("N", n),
                        ("G", gr),
                        ("Cin", cin),
                        ("Rcout", rc),
                        ("Cin_total", gr * cin),
                        ("Cout", gr * rc),
                        ("H", h),
                        ("W", w),
                        ("Kh", k),
                        ("Kw", k),
                        ("Sh", s),
                        ("Sw", s),
                        ("Dh", d),
                        ("Dw", d),
                        ("pt", p),
                        ("pb", p),
                        ("pl", p),
                        ("pr", p),
                        ("Oy", out(h)),
                        ("Ox", out(w)),
                    ]
                })
                .collect()
        } else {
            vec![
                vec![("M", 3), ("K", 5), ("N", 4), ("B", 2), ("H", 2), ("D", 3)],
                vec![("M", 1), ("K", 1), ("N", 1), ("B", 1), ("H", 1), ("D", 1)],
            ]
        };
        for (t, point) in points.iter().enumerate() {
            let val = |s: &str| point.iter().find(|(k, _)| *k == s).map(|(_, v)| *v).unwrap_or(3);
            let dims: Vec<i64> = g.symbols.iter().map(|s| val(&s.name)).collect();
            let inputs: Vec<Vec<f64>> = g
                .inputs()
                .into_iter()
                .enumerate()
                .map(|(k, id)| {
                    let n: i64 = g.shape(id).iter().map(|d| d.eval(&|s| Some(val(s))).unwrap()).product();
                    data(100 * t as u64 + k as u64 + 1, n as usize, -1.0, 1.0, g.dtype(id))
                })
                .collect();
            if let Err(refused) = lib.interp(&inputs, &dims) {
                panic!("{name}: the interpreter refuses {point:?}: {}", refused.0);
            }
            let (c, r) = lib.run(&inputs, &dims);
            assert_eq!((c.rc, r.rc), (0, 0), "{name} at {point:?}");
        }
    }
}

/// A padded row maximum: the pad's guard inside the reduce loop, the `RELU`
/// epilogue fused. Snapshots of both printers (`UPDATE_EXPECT=1` regenerates).
#[test]
fn padded_row_max_snapshots() {
    let mut g = Graph::new("rowmax");
    let x = g.input("x", DType::F16, &shape(&["M", "K"])).unwrap();
    let p = g.pad(x, &[(Dim::int(0), Dim::int(0)), (Dim::int(1), Dim::int(0))], -1.0).unwrap();
    let r = g.reduce(ReduceOp::Max, p, &[1], DType::F32).unwrap();
    let y = g.unary(UnaryOp::Relu, r).unwrap();
    g.outputs.push(Output { name: "y".into(), node: y });
    g.declare_input_symbols().unwrap();
    let c = super::c::emit_c(&g, "rowmax").unwrap();
    expect_test::expect![[r#"
        /* k0 -> out0 (y): n3 RELU; inlines n1 PAD; accumulates n2 REDUCE MAX in fp32 in a register */
        TGC_CLONES static void tgc_k0_rowmax_rows(const uint16_t* restrict in0, float* restrict out0, const int64_t s_M, const int64_t s_K, const int64_t pk_lo, const int64_t pk_hi)
        {
            (void)s_M;
            (void)s_K;
        #pragma scop
            for (int64_t pk_row = pk_lo; pk_row < pk_hi; pk_row += 1) {
                const int64_t i0 = pk_row;
                float acc_l[32];
                for (int64_t pk_l = 0; pk_l < 32; pk_l += 1) acc_l[pk_l] = (-INFINITY);
                const int64_t pk_full1 = floord((s_K + 1), 32) * 32;
                for (int64_t pk_r = 0; pk_r < pk_full1; pk_r += 32) {
                    for (int64_t pk_l = 0; pk_l < 32; pk_l += 1) {
                        const int64_t i1 = pk_r + pk_l;
                        (void)i1;
                        acc_l[pk_l] = tgc_max_f32(acc_l[pk_l], ((i1 - 1 >= 0) ? tgc_f16_to_f32(in0[s_K*i0 + i1 - 1]) : (-1.0f)));
                    }
                }
                for (int64_t pk_l = 0; pk_full1 + pk_l < (s_K + 1); pk_l += 1) {
                    const int64_t i1 = pk_full1 + pk_l;
                    (void)i1;
                    acc_l[pk_l] = tgc_max_f32(acc_l[pk_l], ((i1 - 1 >= 0) ? tgc_f16_to_f32(in0[s_K*i0 + i1 - 1]) : (-1.0f)));
                }
                for (int64_t pk_a = 0; pk_a < 16; pk_a += 1) acc_l[pk_a] = tgc_max_f32(acc_l[pk_a], acc_l[pk_a + 16]);
                for (int64_t pk_a = 0; pk_a < 8; pk_a += 1) acc_l[pk_a] = tgc_max_f32(acc_l[pk_a], acc_l[pk_a + 8]);
                for (int64_t pk_a = 0; pk_a < 4; pk_a += 1) acc_l[pk_a] = tgc_max_f32(acc_l[pk_a], acc_l[pk_a + 4]);
                for (int64_t pk_a = 0; pk_a < 2; pk_a += 1) acc_l[pk_a] = tgc_max_f32(acc_l[pk_a], acc_l[pk_a + 2]);
                for (int64_t pk_a = 0; pk_a < 1; pk_a += 1) acc_l[pk_a] = tgc_max_f32(acc_l[pk_a], acc_l[pk_a + 1]);
                const float acc = acc_l[0];
                out0[i0] = tgc_relu_f32(acc);
            }
        #pragma endscop
        }

        struct tgc_k0_rowmax_ctx {
            const uint16_t* in0;
            float* out0;
            int64_t s_M;
            int64_t s_K;
            int64_t nt;
        };

        static void tgc_k0_rowmax_task(void* pk_vctx, int64_t pk_t)
        {
            const struct tgc_k0_rowmax_ctx* pk_ctx = (const struct tgc_k0_rowmax_ctx*)pk_vctx;
            const int64_t s_M = pk_ctx->s_M;
            const int64_t s_K = pk_ctx->s_K;
            const int64_t pk_e = s_M;
            tgc_k0_rowmax_rows(pk_ctx->in0, pk_ctx->out0, s_M, s_K, pk_e * pk_t / pk_ctx->nt, pk_e * (pk_t + 1) / pk_ctx->nt);
        }

        static void tgc_k0_rowmax(const uint16_t* restrict in0, float* restrict out0, const int64_t s_M, const int64_t s_K, const tgc_rt* rt)
        {
            /* About 32768 loop points a part, at most one part a thread. */
            const int64_t pk_e = s_M;
            int64_t pk_nt = (s_K*s_M + s_M) / 32768;
            if (pk_nt > rt->threads) pk_nt = rt->threads;
            if (pk_nt > pk_e) pk_nt = pk_e;
            if (pk_nt <= 1) {
                tgc_k0_rowmax_rows(in0, out0, s_M, s_K, 0, pk_e);
                return;
            }
            struct tgc_k0_rowmax_ctx pk_ctx;
            pk_ctx.in0 = in0;
            pk_ctx.out0 = out0;
            pk_ctx.s_M = s_M;
            pk_ctx.s_K = s_K;
            pk_ctx.nt = pk_nt;
            rt->parallel_for(rt, pk_nt, tgc_k0_rowmax_task, &pk_ctx);
        }

        int32_t rowmax(const void* const* inputs, void* const* outputs, const int64_t* dims, const tgc_rt* rt)
        {
            const int64_t s_M = dims[0];
            const int64_t s_K = dims[1];
            if (!(1 <= s_M)) return 2; /* symbol M ≥ 1 */
            if (!(1 <= s_K)) return 2; /* symbol K ≥ 1 */
            const uint16_t* in0 = (const uint16_t*)inputs[0];
            float* out0 = (float*)outputs[0];
            tgc_k0_rowmax(in0, out0, s_M, s_K, rt);
            return 0;
        }
    "#]].assert_eq(&c[c.find("/* k0").unwrap()..]);
    expect_test::expect![[r#"
        // Generated by tgc from graph `rowmax`: Rust, one kernel per loop nest. Do not edit.
        // inputs: (x: fp16[M, K]); outputs: (y: fp32[M]); dims: [M, K].
        // Returns Err, writing nothing, when the dims or the slice lengths do not fit the graph.
        #[allow(unused_parens, unused_variables, unused_mut, non_snake_case, clippy::all)]
        pub fn body(inputs: (&[::tgc::half::f16],), outputs: (&mut [f32],), dims: &[i64]) -> ::core::result::Result<(), ::std::string::String> {
            use ::tgc::half::f16;
            #[inline(always)] fn max_f32(a: f32, b: f32) -> f32 { if a.is_nan() || b.is_nan() { f32::NAN } else if a > b { a } else { b } }
            #[inline(always)] fn relu_f32(x: f32) -> f32 { if x < 0.0 { 0.0 } else { x } }
            // k0 -> out0 (y): n3 RELU; inlines n1 PAD; accumulates n2 REDUCE MAX in fp32 in a register
            fn k0(in0: &[f16], out0: &mut [f32], s_M: i64, s_K: i64) { ::tgc::__private::cpu_rt::with_fma(|| {
                for i0 in 0i64..s_M {
                    let mut acc_l: [f32; 32] = [f32::NEG_INFINITY; 32];
                    let pk_e: i64 = (s_K + 1);
                    let pk_full: i64 = pk_e / 32 * 32;
                    for pk_r in (0i64..pk_full).step_by(32) {
                        for pk_l in 0usize..32 {
                            let i1: i64 = pk_r + pk_l as i64;
                            acc_l[pk_l] = max_f32(acc_l[pk_l], (if i1 - 1 >= 0 { in0[(s_K*i0 + i1 - 1) as usize].to_f32() } else { (-1.0f32) }));
                        }
                    }
                    for pk_l in 0usize..(pk_e - pk_full) as usize {
                        let i1: i64 = pk_full + pk_l as i64;
                        acc_l[pk_l] = max_f32(acc_l[pk_l], (if i1 - 1 >= 0 { in0[(s_K*i0 + i1 - 1) as usize].to_f32() } else { (-1.0f32) }));
                    }
                    for pk_a in 0usize..16 { acc_l[pk_a] = max_f32(acc_l[pk_a], acc_l[pk_a + 16]); }
                    for pk_a in 0usize..8 { acc_l[pk_a] = max_f32(acc_l[pk_a], acc_l[pk_a + 8]); }
                    for pk_a in 0usize..4 { acc_l[pk_a] = max_f32(acc_l[pk_a], acc_l[pk_a + 4]); }
                    for pk_a in 0usize..2 { acc_l[pk_a] = max_f32(acc_l[pk_a], acc_l[pk_a + 2]); }
                    for pk_a in 0usize..1 { acc_l[pk_a] = max_f32(acc_l[pk_a], acc_l[pk_a + 1]); }
                    let acc: f32 = acc_l[0];
                    out0[i0 as usize] = relu_f32(acc);
                }
            }) }
            if dims.len() != 2 {
                return Err(::std::format!("graph {} takes 2 dims ({}), got {}", "rowmax", "M, K", dims.len()));
            }
            let s_M: i64 = dims[0];
            let s_K: i64 = dims[1];
            if !(1 <= s_M) {
                return Err(::std::string::String::from("the dims break the requirement symbol M ≥ 1"));
            }
            if !(1 <= s_K) {
                return Err(::std::string::String::from("the dims break the requirement symbol K ≥ 1"));
            }
            let (in0,) = inputs;
            let (out0,) = outputs;
            let len = |sizes: &[i64]| -> ::core::option::Option<i64> { sizes.iter().try_fold(1i64, |a, &d| a.checked_mul(d)) };
            if len(&[s_M, s_K]) != ::core::option::Option::Some(in0.len() as i64) {
                return Err(::std::format!("{} has {} elements, its shape needs {:?}", "x", in0.len(), len(&[s_M, s_K])));
            }
            if len(&[s_M]) != ::core::option::Option::Some(out0.len() as i64) {
                return Err(::std::format!("{} has {} elements, its shape needs {:?}", "y", out0.len(), len(&[s_M])));
            }
            k0(&in0[..], &mut out0[..], s_M, s_K);
            Ok(())
        }
    "#]].assert_eq(&super::rust::emit_rust(&g, "::tgc").unwrap());
}

/// The packed contraction template (`cpu::packed`) against the interpreter
/// on random shapes: every graph below is one packed kernel (plain,
/// transposed operands, batched, an attention-style `Q·Kᵀ`, every epilogue
/// the frontend folds into a GEMM), compiled once with symbolic dims and
/// run at random sizes from 1 to 300 per dim (M·N·K at most 4·10⁶, so the
/// f64 interpreter stays quick), C and Rust alike (`Compiled::run`
/// compares both with the interpreter). `TGC_PROP_SEED` changes the sizes.
/// That a packed kernel gives the plain nest's bits is
/// `symbolic_tiles_in_c_and_rust`'s check (a tiled kernel is never packed).
#[test]
fn packed_contractions_match_the_interpreter_on_random_shapes() {
    let graphs = [
        "graph<M, N, K> mm(x: f32[M, K], w: f32[K, N]) -> (y: f32[M, N]) { y = matmul(x, w)\n return y }",
        "graph<M, N, K> linear(x: f32[M, K], w: f32[N, K], b: f32[N]) -> (y: f32[M, N]) {
            y = matmul(x, transpose(w, 0, 1)) + b\n return y }",
        "graph<M, N, K> xt(x: f32[K, M], w: f32[K, N], b: f32[N]) -> (y: f32[M, N]) {
            y = relu(matmul(transpose(x, 0, 1), w) + b)\n return y }",
        "graph<M, N, K> both_t(x: f32[K, M], w: f32[N, K]) -> (y: f32[M, N]) {
            y = gelu(matmul(transpose(x, 0, 1), transpose(w, 0, 1)))\n return y }",
        "graph<M, N, K> residual(x: f32[M, K], w: f32[K, N], r: f32[M, N]) -> (y: f32[M, N]) {
            y = silu(matmul(x, w) + r)\n return y }",
        "graph<B, M, N, K> batched(x: f32[B, M, K], w: f32[B, K, N], b: f32[N]) -> (y: f32[B, M, N]) {
            y = matmul(x, w) * 0.5 + b\n return y }",
        "graph<B, H, M, N, K> qk(q: f32[B, H, M, K], k: f32[B, H, N, K]) -> (s: f32[B, H, M, N]) {
            s = matmul(q, transpose(k, 2, 3)) * 0.125\n return s }",
    ];
    let seed: u64 = std::env::var("TGC_PROP_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0);
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5851_f42d_4c95_7f2d;
    let mut next = |lo: u64, hi: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        lo + state % (hi - lo + 1)
    };
    for (gi, src) in graphs.iter().enumerate() {
        let g = crate::pipeline::load(src, crate::pipeline::Format::Dsl, None).unwrap().graph;
        let lib = compile(&g);
        assert!(lib.c_src.contains("pk_rt->ukernel("), "not packed in C:\n{}", lib.c_src);
        assert!(lib.rust_src.contains("cpu_rt::ukernel("), "not packed in Rust:\n{}", lib.rust_src);
        for run in 0..4 {
            // Sizes: one dim pinned to 1 on the first run, then random.
            let mut dims: Vec<(String, i64)> = Vec::new();
            for s in &g.symbols {
                let v = match (run, s.name.as_str()) {
                    (_, "B" | "H") => next(1, 3),
                    (0, "M") => 1,
                    _ => next(1, 300),
                };
                dims.push((s.name.clone(), v as i64));
            }
            let get = |dims: &[(String, i64)], n: &str| dims.iter().find(|(s, _)| s == n).map_or(1, |d| d.1);
            while get(&dims, "M") * get(&dims, "N") * get(&dims, "K") > 4_000_000 {
                let big = ["M", "N", "K"].into_iter().max_by_key(|n| get(&dims, n)).unwrap();
                dims.iter_mut().find(|(s, _)| s == big).unwrap().1 /= 2;
            }
            let values: Vec<i64> = dims.iter().map(|d| d.1).collect();
            let inputs: Vec<Vec<f64>> = g
                .inputs()
                .into_iter()
                .enumerate()
                .map(|(k, id)| {
                    let n: i64 = g
                        .shape(id)
                        .iter()
                        .map(|d| d.eval(&|s| dims.iter().find(|x| x.0 == s).map(|x| x.1)).unwrap())
                        .product();
                    data(1000 * gi as u64 + 10 * run + k as u64, n as usize, -1.0, 1.0, DType::F32)
                })
                .collect();
            let (c, r) = lib.run(&inputs, &values);
            assert_eq!((c.rc, r.rc), (0, 0), "{} at {dims:?}", g.name);
        }
    }
}

/// Contractions with at most `NR` rows or columns read one factor in place
/// (`cpu::packed::PackOrder::Direct`, `cpu_rt::ukernel_direct`): a linear
/// layer over a few tokens (the weight swaps to the `a` side), attention's
/// `Q·Kᵀ` for a few queries, a GEMM with few columns, and a convolution
/// with few output pixels, C and Rust against the interpreter; ragged
/// sizes and `K` above `kc` (several K blocks, the row pointer moved by
/// each block's start).
#[test]
fn few_row_contractions_read_a_factor_in_place() {
    let graphs = [
        "graph lin(x: f32[5, 300], w: f32[37, 300], b: f32[37]) -> (y: f32[5, 37]) {
            y = gelu(matmul(x, transpose(w, 0, 1)) + b)\n return y }",
        "graph lin32(x: f32[2, 16, 200], w: f32[70, 200]) -> (y: f32[2, 16, 70]) {
            y = matmul(x, transpose(w, 0, 1))\n return y }",
        "graph qk(q: f32[2, 3, 7, 16], k: f32[2, 3, 40, 16]) -> (s: f32[2, 3, 7, 40]) {
            s = matmul(q, transpose(k, 2, 3)) * 0.25\n return s }",
        "graph few_cols(x: f32[50, 129], w: f32[129, 9]) -> (y: f32[50, 9]) { y = relu(matmul(x, w))\n return y }",
        "graph conv(x: f32[1, 20, 4, 5], w: f32[6, 20, 3, 3], b: f32[6]) -> (y: f32[1, 6, 4, 5]) {
            y = conv2d(x, w, bias=b, stride=[1, 1], pad=[1, 1])\n return y }",
    ];
    for (gi, src) in graphs.iter().enumerate() {
        let g = crate::pipeline::load(src, crate::pipeline::Format::Dsl, None).unwrap().graph;
        let lib = compile(&g);
        assert!(lib.c_src.contains("pk_rt->ukernel_direct("), "not read in place in C:\n{}", lib.c_src);
        assert!(lib.rust_src.contains("cpu_rt::ukernel_direct("), "not read in place in Rust:\n{}", lib.rust_src);
        let inputs = f32_inputs(&g, 7000 + 10 * gi as u64);
        let (c, r) = lib.run(&inputs, &[]);
        assert_eq!((c.rc, r.rc), (0, 0), "{}", g.name);
    }
}

/// Convolutions computed at the reads of a pooling (`003`'s compute-at
/// fusion) on the packed template with the pooling as the epilogue
/// (`cpu::packed`'s `pooled`), on C and Rust, against the interpreter:
/// strides, dilations, padding, groups, overlapping and ragged windows,
/// max and average pools; windows packed a window at a time where they
/// lie inside the image (overlapping 3×3 ones across panel groups too).
/// Fusion needs Poly-View (the `poly` feature).
#[cfg(feature = "poly")]
#[test]
fn pooled_convolutions_match_the_interpreter() {
    struct Case {
        n: i64,
        c: i64,
        k: i64,
        hw: (i64, i64),
        groups: i64,
        stride: i64,
        /// top, bottom, left, right
        pad: [i64; 4],
        dilation: i64,
        act: &'static str,
        pool: &'static str,
        window: (i64, i64),
        pool_stride: (i64, i64),
        pool_pad: i64,
        form: Form,
    }
    /// How the case is lowered.
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Form {
        /// Fused (non-overlapping windows, a one-op activation): the
        /// pooling is the packed convolution's epilogue.
        Pooled,
        /// Not fused: the convolution stored by a packed kernel, pooled by a
        /// plain nest.
        Stored,
        /// A plain nest: a grouped convolution (both factors read the output
        /// channel), or a fused one under the pool's padding guard.
        Plain,
    }
    let base = Case {
        n: 1,
        c: 5,
        k: 7,
        hw: (9, 8),
        groups: 1,
        stride: 1,
        pad: [1; 4],
        dilation: 1,
        act: "relu",
        pool: "maxpool2d",
        window: (2, 2),
        pool_stride: (2, 2),
        pool_pad: 0,
        form: Form::Pooled,
    };
    let cases = [
        Case { ..base },
        Case { n: 2, c: 3, k: 13, hw: (7, 11), pad: [0; 4], window: (3, 3), pool_stride: (3, 3), ..base },
        Case { c: 4, k: 6, hw: (12, 10), stride: 2, pad: [1, 2, 0, 1], pool: "avgpool2d", ..base },
        Case {
            c: 2,
            k: 3,
            hw: (11, 13),
            pad: [2; 4],
            dilation: 2,
            act: "silu",
            window: (2, 3),
            pool_stride: (2, 1),
            form: Form::Stored,
            ..base
        },
        Case { n: 2, c: 4, k: 6, hw: (8, 8), groups: 2, form: Form::Plain, ..base },
        Case { c: 17, k: 20, hw: (6, 6), pool: "avgpool2d", window: (3, 3), pool_stride: (3, 3), ..base },
        Case { c: 3, k: 5, hw: (8, 8), pool_pad: 1, form: Form::Plain, ..base },
        Case { c: 3, k: 5, hw: (9, 9), window: (3, 3), pool_stride: (2, 2), form: Form::Pooled, ..base },
    ];
    for (t, cs) in cases.iter().enumerate() {
        let conv_out = |x: i64, lo: i64, hi: i64| (x + lo + hi - cs.dilation * 2 - 1) / cs.stride + 1;
        let (oh, ow) = (conv_out(cs.hw.0, cs.pad[0], cs.pad[1]), conv_out(cs.hw.1, cs.pad[2], cs.pad[3]));
        let pool_out = |x: i64, k: i64, s: i64| (x + 2 * cs.pool_pad - k) / s + 1;
        let (ph, pw) = (pool_out(oh, cs.window.0, cs.pool_stride.0), pool_out(ow, cs.window.1, cs.pool_stride.1));
        let src = format!(
            "graph cp{t}(x: f32[{n}, {c}, {h}, {w}], w: f32[{k}, {cg}, 3, 3], b: f32[{k}]) -> (y: f32[{n}, {k}, {ph}, {pw}]) {{
                c = conv2d(x, w, bias=b, stride=[{s}, {s}], pad=[{p0}, {p1}, {p2}, {p3}], dilation=[{d}, {d}], groups={gr})
                r = {act}(c)
                y = {pool}(r, kernel=[{wh}, {ww}], stride=[{sh}, {sw}], pad=[{pp}, {pp}])
                return y
            }}",
            n = cs.n,
            c = cs.c,
            k = cs.k,
            h = cs.hw.0,
            w = cs.hw.1,
            cg = cs.c / cs.groups,
            s = cs.stride,
            p0 = cs.pad[0],
            p1 = cs.pad[1],
            p2 = cs.pad[2],
            p3 = cs.pad[3],
            d = cs.dilation,
            gr = cs.groups,
            act = cs.act,
            pool = cs.pool,
            wh = cs.window.0,
            ww = cs.window.1,
            sh = cs.pool_stride.0,
            sw = cs.pool_stride.1,
            pp = cs.pool_pad,
        );
        let g = crate::pipeline::load(&src, crate::pipeline::Format::Dsl, None)
            .unwrap_or_else(|e| panic!("{}", e.render(&src)))
            .graph;
        let p = crate::cpu::lower(&g).unwrap();
        let fused = p.kernels.iter().any(|k| !k.computed_at().is_empty());
        let pooled = p.kernels.iter().any(|k| k.packed.as_ref().is_some_and(|pk| pk.pooled));
        let got = match (fused, pooled) {
            (true, true) => Form::Pooled,
            (false, _) if p.kernels.iter().any(|k| k.packed.is_some()) => Form::Stored,
            _ => Form::Plain,
        };
        assert_eq!(got, cs.form, "case {t}");
        let lib = compile(&g);
        let packed = cs.form != Form::Plain;
        // Packed `a`, or (few columns: `packed::DIRECT_COLS`) the weights
        // read in place.
        let calls =
            |src: &str, rt: &str| ["ukernel(", "ukernel_direct("].iter().any(|f| src.contains(&format!("{rt}{f}")));
        assert_eq!(calls(&lib.c_src, "pk_rt->"), packed, "C of case {t}:\n{}", lib.c_src);
        assert_eq!(calls(&lib.rust_src, "cpu_rt::"), packed, "Rust of case {t}:\n{}", lib.rust_src);
        // A pooling window's pixels are consecutive in the image row at
        // stride 1: packed a window at a time (`Contraction::window_copy`).
        let windows = cs.form == Form::Pooled && cs.stride == 1;
        for (lang, src) in [("C", &lib.c_src), ("Rust", &lib.rust_src)] {
            let got = src.contains("A pooling window inside the image");
            assert_eq!(got, windows, "{lang} of case {t} packs a window at a time: {got}\n{src}");
        }
        let inputs = f32_inputs(&g, 7000 + 10 * t as u64);
        let (c_run, r_run) = lib.run(&inputs, &[]);
        assert_eq!((c_run.rc, r_run.rc), (0, 0), "case {t}");
        // The C folds a group of windows as the lanes of a vector
        // (`Printer::vector_fold`), the Rust one window at a time: the
        // same operations in the same order, so the same bits.
        if cs.form == Form::Pooled {
            assert!(lib.c_src.contains("pk_vv = "), "C of case {t} folds windows as vectors:\n{}", lib.c_src);
        }
        for (k, (c, r)) in c_run.outputs.iter().zip(&r_run.outputs).enumerate() {
            assert_eq!(f32_bits(c), f32_bits(r), "case {t}, output {k}: C and Rust differ in bits");
        }
    }
}

/// A pooled convolution at symbolic sizes packs its windows a window at a
/// time too (`Contraction::window_copy`: the window's row offset is the
/// image width, a symbol), C and Rust against the interpreter at even and
/// odd sizes, with windows on every border and, at 5 × 5, none inside.
#[cfg(feature = "poly")]
#[test]
fn symbolic_pooled_convolution_packs_whole_windows() {
    let src = "graph<H, W, P, Q> cps(x: f32[1, 3, H, W], w: f32[4, 3, 3, 3], b: f32[4]) -> (y: f32[1, 4, P, Q]) {
        c = conv2d(x, w, bias=b, stride=[1, 1], pad=[1, 1])
        r = relu(c)
        y = maxpool2d(r, kernel=[2, 2], stride=[2, 2], pad=[0, 0])
        return y
    }";
    let g = crate::pipeline::load(src, crate::pipeline::Format::Dsl, None).unwrap().graph;
    let lib = compile(&g);
    for (lang, code) in [("C", &lib.c_src), ("Rust", &lib.rust_src)] {
        assert!(code.contains("A pooling window inside the image"), "{lang} packs no whole window:\n{code}");
    }
    for (t, (h, w)) in [(9i64, 12i64), (6, 7), (5, 5), (16, 16)].into_iter().enumerate() {
        let inputs = vec![
            data(900 + t as u64, (3 * h * w) as usize, -1.0, 1.0, DType::F32),
            data(910 + t as u64, 4 * 3 * 9, -1.0, 1.0, DType::F32),
            data(920 + t as u64, 4, -1.0, 1.0, DType::F32),
        ];
        let (c, r) = lib.run(&inputs, &[h, w, h / 2, w / 2]);
        assert_eq!((c.rc, r.rc), (0, 0), "{h}×{w}");
        assert_eq!(f32_bits(&c.outputs[0]), f32_bits(&r.outputs[0]), "{h}×{w}: C vs Rust");
    }
}

/// Convolution windows packed as copies (`cpu::packed::Contraction::copy`,
/// both printers' `pack_copy`), C and Rust against the interpreter:
/// rows of pixels wide enough for blocks of eight consecutive interior
/// pixels (one vector move), border pixels packed again with their guards,
/// an image too small for any interior pixel, a batch, stride 2 along the height with
/// asymmetric padding and dilation 2.
#[test]
fn copied_windows_match_the_interpreter() {
    let graphs = [
        ("x: f32[1, 3, 20, 24], w: f32[5, 3, 3, 3]", "pad=[1, 1]", "f32[1, 5, 20, 24]"),
        ("x: f32[1, 2, 2, 9], w: f32[3, 2, 3, 3]", "pad=[1, 1]", "f32[1, 3, 2, 9]"),
        (
            "x: f32[2, 4, 13, 17], w: f32[6, 4, 3, 3]",
            "stride=[2, 1], pad=[0, 2, 1, 0], dilation=[2, 2]",
            "f32[2, 6, 6, 14]",
        ),
    ];
    for (gi, (inputs, args, out)) in graphs.into_iter().enumerate() {
        let src = format!("graph cw{gi}({inputs}) -> (y: {out}) {{\n    y = conv2d(x, w, {args})\n    return y\n}}");
        let g = crate::pipeline::load(&src, crate::pipeline::Format::Dsl, None)
            .unwrap_or_else(|e| panic!("{}", e.render(&src)))
            .graph;
        let lib = compile(&g);
        assert!(lib.c_src.contains("pk_ok[32]"), "case {gi}: the window is not copied:\n{}", lib.c_src);
        assert!(
            lib.rust_src.contains("let mut pk_ok = [false; 32];"),
            "case {gi}: not copied in Rust:\n{}",
            lib.rust_src
        );
        let inputs = f32_inputs(&g, 7100 + 10 * gi as u64);
        let (c, r) = lib.run(&inputs, &[]);
        assert_eq!((c.rc, r.rc), (0, 0), "case {gi}");
    }
}

/// Reductions in split accumulators (`cpu::lanes`) on C and Rust against
/// the interpreter at every tail length (`K` from 1 to 17: no full group of
/// eight, one, two, with 0 to 7 left over): f32 sum, max and min, an f16
/// max, an i32 sum (exact) and a sum over two axes (the lanes carried
/// across the outer reduce loop).
#[test]
fn split_reductions_match_the_interpreter_at_every_tail() {
    let src = "graph<R, K> red(x: f32[R, K], h: f16[R, K], n: i32[R, K], z: f32[R, 3, K])
        -> (s: f32[R], m: f32[R], lo: f32[R], hm: f16[R], ns: i32[R], zs: f32[R]) {
        s = sum(x, axes=[1])
        m = max(x, axes=[1])
        lo = min(x, axes=[1])
        hm = max(h, axes=[1])
        ns = sum(n, axes=[1])
        zs = sum(z, axes=[1, 2])
        return s, m, lo, hm, ns, zs
    }";
    let g = crate::pipeline::load(src, crate::pipeline::Format::Dsl, None).unwrap().graph;
    let p = crate::cpu::lower(&g).unwrap();
    assert!(p.kernels.iter().all(|k| k.lanes == crate::cpu::lanes::LANES), "every reduction is split");
    let lib = compile(&g);
    assert!(lib.c_src.contains("acc_l[pk_l]") && lib.rust_src.contains("acc_l[pk_l]"));
    for k in 1..=17i64 {
        let r = 3i64;
        let inputs: Vec<Vec<f64>> = g
            .inputs()
            .into_iter()
            .enumerate()
            .map(|(j, id)| {
                let len: i64 =
                    g.shape(id).iter().map(|d| d.eval(&|s| Some(if s == "R" { r } else { k })).unwrap()).product();
                let (lo, hi) = if g.dtype(id) == DType::I32 { (-1000.0, 1000.0) } else { (-4.0, 4.0) };
                data(900 + 10 * k as u64 + j as u64, len as usize, lo, hi, g.dtype(id))
            })
            .collect();
        let (c, rs) = lib.run(&inputs, &[r, k]);
        assert_eq!((c.rc, rs.rc), (0, 0), "K = {k}");
    }
}

/// Softmax and layernorm as row groups ([`crate::cpu::rows`]): one nest over
/// the rows, the temporaries one row per task, the last kernel one row late
/// in C. At sizes whose work is split into parts on the pool (two threads
/// or more), one row, and chunk tails of every length, both printers match
/// the interpreter and each other bit for bit
/// (the C `tgc_exp2f` and the runtime's `cpu_rt::exp2` are the same
/// operations).
#[test]
fn row_groups_match_the_interpreter_across_parts() {
    let src = "graph<R, C> rows(x: f32[R, C], g: f32[C], b: f32[C]) -> (y: f32[R, C], z: f32[R, C]) {
        y = softmax(x, axis=-1)
        z = layernorm(x, g, b, axis=-1, eps=1e-5)
        return y, z
    }";
    let g = crate::pipeline::load(src, crate::pipeline::Format::Dsl, None).unwrap().graph;
    let p = crate::cpu::lower(&g).unwrap();
    // Every kernel over the rows in one group; layernorm's element counts
    // (reductions of a constant, no row loop) moved before it.
    assert_eq!(p.rows.len(), 1, "{:?}", p.rows);
    let rows = &p.rows[0].kernels;
    for (j, k) in p.kernels.iter().enumerate() {
        assert_eq!(rows.contains(&j), !k.loops.is_empty(), "{}", k.name);
    }
    assert!(p.rows[0].local.len() >= 5, "{:?}", p.rows);
    let lib = compile(&g);
    assert!(lib.c_src.contains("tgc_exp2f(") && lib.rust_src.contains("exp2_f32("));
    // The C runs softmax's sum, layernorm's sum and its sum of squares
    // inside the loops of the kernels before them
    // (`rows::reduces_in_producer_loop`), and the group's last kernel
    // (layernorm's normalisation) one row late inside the last of those
    // loops (`rows::defers_into_producer_loop`); the Rust does neither: the
    // bits below are the same either way.
    // Three prints of the group, each with the same loops: the copies of
    // `emit::c`'s `Isa` (softmax's `EXP2` is in a lane loop) and the usual one.
    let prints = 3;
    assert_eq!(lib.c_src.matches(" in its loop").count(), 3 * prints, "{}", lib.c_src);
    assert_eq!(lib.c_src.matches("of the row before, chunk by chunk ahead of it */").count(), prints, "{}", lib.c_src);
    for (r, c) in [(1, 1), (3, 9), (67, 1000), (130, 517)] {
        let x = data(71 + c as u64, r * c, -6.0, 6.0, DType::F32);
        let gamma = data(72, c, 0.5, 1.5, DType::F32);
        let beta = data(73, c, -0.5, 0.5, DType::F32);
        let (cr, rr) = lib.run(&[x, gamma, beta], &[r as i64, c as i64]);
        assert_eq!((cr.rc, rr.rc), (0, 0));
        for k in 0..2 {
            assert_eq!(f32_bits(&cr.outputs[k]), f32_bits(&rr.outputs[k]), "output {k} at {r}x{c}: C vs Rust");
        }
    }
}

/// Pooling windows (`cpu::lanes::is_window`) of a batch-1 NCHW image: one
/// lane each, the C computing eight outputs of a row together
/// (`Printer::window_groups`) and cutting its parts across the flattened
/// batch, channel and row loops (`cpu::rows::part_loops`), the Rust the
/// plain nest. The stride-2 max pools (one of a `concat` whose piece an
/// outer loop chooses) take the group as one vector of every second
/// element (`TGC_EVEN8`); the padded average pool, whose guard varies along
/// the row, the scalar group. Both agree with the interpreter, and with
/// each other bit for bit on rows with whole groups and tails, with NaN and
/// signed zeros (a maximum's ties).
#[test]
fn window_kernels_give_the_plain_nest_bits() {
    let src =
        "graph<H, W, P, Q> pools(x: f32[1, 4, H, W]) -> (y: f32[1, 4, P, Q], z: f32[1, 4, H, W], u: f32[1, 8, P, Q]) {
        y = maxpool2d(relu(x), kernel=[3, 3], stride=[2, 2], pad=[0, 0])
        z = avgpool2d(x, kernel=[3, 3], stride=[1, 1], pad=[1, 1])
        u = maxpool2d(concat([relu(x), x], axis=1), kernel=[3, 3], stride=[2, 2], pad=[0, 0])
        return y, z, u
    }";
    let g = crate::pipeline::load(src, crate::pipeline::Format::Dsl, None).unwrap().graph;
    let p = crate::cpu::lower(&g).unwrap();
    let windows: Vec<&crate::cpu::Kernel> = p.kernels.iter().filter(|k| crate::cpu::lanes::is_window(k)).collect();
    // The two max pools and the average pool's two windows.
    assert_eq!(windows.len(), 4, "{:?}", p.kernels.iter().map(|k| &k.name).collect::<Vec<_>>());
    for k in &windows {
        assert_eq!(k.lanes, 1, "{}", k.name);
        if k.loops.len() == 4 {
            assert_eq!(crate::cpu::rows::part_loops(k), 3, "{}", k.name);
        }
    }
    for (level, lib) in each_isa_clone(&g) {
        assert!(lib.c_src.contains("acc_g[pk_l]") && lib.c_src.contains("pk_row"), "{}", lib.c_src);
        assert_eq!(lib.c_src.matches("pk_vv = {").count(), 2, "{}", lib.c_src);
        // `relu` prints its operand twice: `y`'s two loads, `u`'s two and one.
        assert_eq!(lib.c_src.matches("TGC_EVEN8(&in0[").count(), 2 + 3, "{}", lib.c_src);
        assert_eq!(lib.c_src.matches("pk_x[pk_l] = ").count(), 2, "{}", lib.c_src);
        for (h, w) in [(3, 3), (7, 20), (9, 37), (21, 40)] {
            let mut x = data(90 + w as u64, 4 * h * w, -2.0, 2.0, DType::F32);
            let dims = [h as i64, w as i64, (h as i64 - 3) / 2 + 1, (w as i64 - 3) / 2 + 1];
            lib.run(std::slice::from_ref(&x), &dims);
            x[1] = f64::NAN;
            x[w + 2] = -0.0;
            x[w + 3] = 0.0;
            x[2 * w + 2] = -0.0;
            let (cr, rr) = lib.run_unchecked(&[x], &dims);
            assert_eq!((cr.rc, rr.rc), (0, 0));
            for k in 0..3 {
                let at = format!("output {k} at {h}x{w}, TGC_MAX_ISA {level:?}");
                assert_eq!(f32_bits(&cr.outputs[k]), f32_bits(&rr.outputs[k]), "{at}: C vs Rust");
            }
        }
    }
}

/// A 1×1 convolution over a `Concat` of an activation and an input
/// (SqueezeNet's squeeze after its expands): the image's pixels packed as
/// one flat row (`cpu::packed::Packed::b_flat`), the C a whole group of the
/// panel as vectors along it (`Printer::vector_group`). C and Rust agree
/// with the interpreter and with each other bit for bit at sizes whose
/// pixels fill whole panel groups and leave tails, on every instruction
/// set's clone this CPU and compiler have.
#[test]
fn a_pointwise_convolution_packs_flat_rows_with_the_plain_nest_bits() {
    let src = "graph<H, W> pw(x: f32[1, 8, H, W], u: f32[1, 8, H, W], w: f32[40, 16, 1, 1]) -> (y: f32[1, 40, H, W]) {
        y = relu(conv2d(concat([relu(x), u], axis=1), w, stride=[1, 1], pad=[0, 0]))
        return y
    }";
    let g = crate::pipeline::load(src, crate::pipeline::Format::Dsl, None).unwrap().graph;
    for (level, lib) in each_isa_clone(&g) {
        // The two halves of a panel group of 32 rows.
        assert_eq!(lib.c_src.matches("*(tgc_f32x16u*)&pk_dst[").count(), 2, "{}", lib.c_src);
        for (h, w) in [(1, 1), (3, 5), (4, 8), (7, 20), (11, 37)] {
            let x = data(40 + w as u64, 8 * h * w, -2.0, 2.0, DType::F32);
            let u = data(41 + w as u64, 8 * h * w, -2.0, 2.0, DType::F32);
            let wt = data(42, 40 * 16, -1.0, 1.0, DType::F32);
            let (cr, rr) = lib.run(&[x, u, wt], &[h as i64, w as i64]);
            assert_eq!((cr.rc, rr.rc), (0, 0));
            assert_eq!(f32_bits(&cr.outputs[0]), f32_bits(&rr.outputs[0]), "{h}x{w}, TGC_MAX_ISA {level:?}: C vs Rust");
        }
    }
}

/// A function whose lane loop computes `EXP2` (softmax's row group,
/// GELU's element-wise loop) is printed with the loop as explicit vectors
/// in an AVX-512F and an AVX2 copy beside the usual one
/// (`emit::c`'s `Isa`), and every copy gives the bits of the Rust print (the
/// lane loop's operations in the lane loop's order): each instruction set
/// of `cpu_rt::Isa::ALL` this CPU has is forced through the dispatchers —
/// the C compiled with `TGC_MAX_ISA` at its level (the clones, the copies,
/// softmax's row maximum), the micro-kernel of a matmul capped by
/// `cpu_rt::set_max_isa` — and run on rows with full chunks and tails, of
/// one value and of 32, with NaN, infinities and values whose exponential
/// is subnormal: C and Rust agree with the interpreter and with each other
/// bit for bit, and every ISA gives the portable path's bits. The paths
/// skipped for want of the ISA are counted (`tests/support/isa_paths.rs`).
/// Skipped (and says so) off x86-64 or without GCC 12 or later, where the
/// copies are not compiled.
#[test]
fn explicit_vector_copies_give_the_lane_loop_bits() {
    use tgc_runtime::cpu_rt::{self, Isa};
    if gcc_12_on_x86_64().is_none() {
        return;
    }
    let src = "graph<R, C> sm(x: f32[R, C], w: f32[C, 40]) -> (y: f32[R, C], z: f32[R, C], p: f32[R, 40]) {
        y = softmax(x, axis=-1)
        z = gelu(x)
        p = matmul(x, w)
        return y, z, p
    }";
    let g = crate::pipeline::load(src, crate::pipeline::Format::Dsl, None).unwrap().graph;
    let (mut ran, mut skipped) = (Vec::new(), Vec::new());
    let mut portable: Vec<Vec<Vec<u32>>> = Vec::new();
    for isa in Isa::ALL {
        if !isa.available() {
            assert!(cpu_rt::set_max_isa(Some(isa)).is_err());
            skipped.push(isa);
            continue;
        }
        cpu_rt::set_max_isa(Some(isa)).unwrap();
        let level = isa.level();
        let lib = compile_edited(&g, &crate::cpu::Options::default(), &|c| format!("#define TGC_MAX_ISA {level}\n{c}"));
        for copy in ["_rows_avx512(", "_rows_avx2(", "_rows_portable(", "rt->ukernel"] {
            assert!(lib.c_src.contains(copy), "no {copy} in the C:\n{}", lib.c_src);
        }
        assert!(lib.c_src.contains("tgc_exp2f_x16(") && lib.c_src.contains("tgc_exp2f_x8("));
        assert!(lib.c_src.contains("if (TGC_MAX_ISA >= 2 && __builtin_cpu_supports(\"avx512f\"))"));
        for (at, (r, c)) in [(1, 1), (3, 31), (2, 32), (4, 77), (9, 1000), (130, 517)].into_iter().enumerate() {
            let mut x = data(91 + c as u64, r * c, -30.0, 30.0, DType::F32);
            if c > 64 {
                let mut rows: Vec<&mut [f64]> = x.chunks_mut(c).collect();
                rows[0][40] = f64::NEG_INFINITY;
                rows[1][3] = 200.0;
                rows[1][70] = -200.0;
                rows[2][35] = f64::NAN;
                rows[3].iter_mut().enumerate().for_each(|(j, v)| *v = if j % 2 == 0 { 88.0 } else { -60.0 });
            }
            let w = data(7 + c as u64, c * 40, -1.0, 1.0, DType::F32);
            let (cr, rr) = lib.run_within(&[x, w], &[r as i64, c as i64], &[Tol::F32, Tol::F32, WIDE_MATMUL]);
            assert_eq!((cr.rc, rr.rc), (0, 0));
            let bits: Vec<Vec<u32>> = cr.outputs.iter().map(|o| f32_bits(o)).collect();
            for (k, b) in bits.iter().enumerate() {
                assert_eq!(*b, f32_bits(&rr.outputs[k]), "{}, output {k} at {r}x{c}: C vs Rust", isa.name());
            }
            match portable.get(at) {
                Some(want) => assert_eq!(&bits, want, "{} at {r}x{c}: vs the portable path", isa.name()),
                None => portable.push(bits),
            }
        }
        ran.push(isa);
    }
    cpu_rt::set_max_isa(None).unwrap();
    isa_report::isa_paths("emit::c dispatch and micro-kernel", &ran, &skipped);
}

/// The tolerance of `explicit_vector_copies_give_the_lane_loop_bits`'s
/// `p = matmul(x, w)`: up to 1000 products of |x| ≤ 88 (up to 200 at two
/// outliers) and |w| < 1, summed in the micro-kernel's order against the
/// interpreter's. `docs/numerics.md`'s `sum` bound, (n − 1)·2^-24·Σ|x·w|,
/// is about 5 there; a sum of random-sign terms in another order rounds by
/// about √n·2^-24 of the terms' size (seen 2.1e-4 at an output that
/// cancels to 1.5). The
/// test holds the ISAs and the two printers to each other's bits; against
/// the interpreter it takes 1e-2 absolute, which a wrong index or a lost
/// panel (an error of the terms' size, ~10) does not meet.
const WIDE_MATMUL: Tol = Tol { rtol: 1e-5, atol: 1e-2 };

/// The ISA paths' report (`tests/support/isa_paths.rs`).
mod isa_report {
    use tgc_runtime::cpu_rt::Isa;
    include!("../../../../tests/support/isa_paths.rs");
}

/// A row `MAX` or `MIN` of a contiguous f32 run is the C helper
/// `tgc_max_run_f32` / `tgc_min_run_f32`, whose vector path (AVX-512F or
/// AVX2 where the CPU has them) must give the bits of the lane loop it
/// replaces — `tgc_max_f32`'s rule per lane (`lanes`' order, then the
/// halving fold), modelled here — on rows of two full chunks and a tail
/// with NaNs (two payloads in one lane: the first wins), a NaN only in the
/// tail, signed zeros (a tie takes the new value), infinities, and rows of
/// one and of 32 values. The Rust printer agrees bit for bit except for a
/// NaN's payload (its `max_f32` returns the canonical NaN).
#[test]
fn row_max_and_min_runs_give_the_lane_loop_bits() {
    let src = "graph<R, C> mm(x: f32[R, C]) -> (a: f32[R], b: f32[R]) {
        a = max(x, axes=[1])
        b = min(x, axes=[1])
        return a, b
    }";
    let g = crate::pipeline::load(src, crate::pipeline::Format::Dsl, None).unwrap().graph;
    let lib = compile(&g);
    for helper in ["tgc_max_run_f32(&", "tgc_min_run_f32(&"] {
        assert!(lib.c_src.contains(helper), "no call of {helper}:\n{}", lib.c_src);
    }
    let nan = |bits: u32| f32::from_bits(bits) as f64;
    for (r, c) in [(7, 77), (3, 1), (2, 32)] {
        let mut x = data(5 + c as u64, r * c, -4.0, 4.0, DType::F32);
        if c > 64 {
            let mut rows: Vec<&mut [f64]> = x.chunks_mut(c).collect();
            rows[1][40] = nan(0x7fc0_beef);
            rows[2][70] = nan(0xffc0_1234);
            rows[3].iter_mut().enumerate().for_each(|(j, v)| *v = if j % 3 == 0 { -0.0 } else { 0.0 });
            rows[4][5] = f64::INFINITY;
            rows[4][6] = f64::NEG_INFINITY;
            rows[5][3] = nan(0x7fc0_0001);
            rows[5][35] = nan(0x7fc0_0002);
            rows[6].iter_mut().for_each(|v| *v = f64::NEG_INFINITY);
        }
        let (cr, rr) = lib.run(&[x.clone()], &[r as i64, c as i64]);
        assert_eq!((cr.rc, rr.rc), (0, 0));
        // The lane loop's result for one row, with C's rule for `op`.
        let lane_loop = |row: &[f64], greater: bool| -> u32 {
            let pick = |a: f32, b: f32| if (if greater { a > b } else { a < b }) || a.is_nan() { a } else { b };
            let mut acc = [if greater { f32::NEG_INFINITY } else { f32::INFINITY }; crate::cpu::lanes::LANES];
            for (j, &v) in row.iter().enumerate() {
                acc[j % acc.len()] = pick(acc[j % acc.len()], v as f32);
            }
            for half in crate::cpu::lanes::fold_steps(acc.len()) {
                for a in 0..half {
                    acc[a] = pick(acc[a], acc[a + half]);
                }
            }
            acc[0].to_bits()
        };
        for i in 0..r {
            let row = &x[i * c..(i + 1) * c];
            for (k, greater) in [(0, true), (1, false)] {
                let (got, rust) = (cr.outputs[k][i] as f32, rr.outputs[k][i] as f32);
                assert_eq!(got.to_bits(), lane_loop(row, greater), "output {k} row {i} at {r}x{c}: C vs the lane loop");
                assert!(
                    got.to_bits() == rust.to_bits() || got.is_nan() && rust.is_nan(),
                    "output {k} row {i}: C vs Rust"
                );
            }
        }
        if c > 64 {
            assert_eq!((cr.outputs[0][1] as f32).to_bits(), 0x7fc0_beef);
            assert_eq!((cr.outputs[0][5] as f32).to_bits(), 0x7fc0_0001, "the first NaN of a lane wins");
            assert_eq!((cr.outputs[1][2] as f32).to_bits(), 0xffc0_1234);
            assert_eq!(cr.outputs[0][4], f64::INFINITY);
            assert_eq!(cr.outputs[1][4], f64::NEG_INFINITY);
        }
    }
}

/// `EXP2` over every kind of input — zeros, halves (ties of the rounding to
/// an integer), the overflow and underflow edges, subnormal results, huge
/// magnitudes, infinities, NaN — and a sweep of bit patterns: the C
/// `tgc_exp2f` and the runtime's `cpu_rt::exp2` give the same bits, within
/// 1 ulp of libm's `exp2f` (NaN for NaN).
#[test]
fn exp2_gives_the_same_bits_in_c_and_rust() {
    let g = crate::pipeline::load(
        "graph<N> e(x: f32[N]) -> (y: f32[N]) {\n    y = exp2(x)\n    return y\n}",
        crate::pipeline::Format::Dsl,
        None,
    )
    .unwrap()
    .graph;
    let lib = compile(&g);
    let mut xs: Vec<f32> = vec![
        0.0,
        -0.0,
        0.5,
        -0.5,
        1.5,
        -2.5,
        1.0,
        127.0,
        127.99,
        128.0,
        159.5,
        160.0,
        161.0,
        1e9,
        -125.5,
        -126.0,
        -126.5,
        -140.3,
        -149.0,
        -149.5,
        -150.0,
        -160.0,
        -1e9,
        f32::MAX,
        f32::MIN,
        f32::MIN_POSITIVE,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
    ];
    xs.extend((0..=u32::MAX).step_by(65_537).map(f32::from_bits));
    // The interpreter computes in f64, where 2^x is finite until x = 1024:
    // its f32 overflow is checked against libm below instead.
    let (finite_in_f64, xs): (Vec<f32>, Vec<f32>) = xs.into_iter().partition(|x| (128.0..1024.0).contains(x));
    assert!(finite_in_f64.contains(&128.0));
    let input: Vec<f64> = xs.iter().map(|&x| x as f64).collect();
    let (cr, rr) = lib.run(&[input], &[xs.len() as i64]);
    assert_eq!((cr.rc, rr.rc), (0, 0));
    for (i, &x) in xs.iter().enumerate() {
        let (c, r) = (cr.outputs[0][i] as f32, rr.outputs[0][i] as f32);
        if x.is_nan() {
            assert!(c.is_nan() && r.is_nan(), "exp2(NaN): C {c}, Rust {r}");
            continue;
        }
        assert_eq!(c.to_bits(), r.to_bits(), "exp2({x:e}): C {c:e}, Rust {r:e}");
        let ulps = (c.to_bits() as i64 - x.exp2().to_bits() as i64).abs();
        assert!(ulps <= 1, "exp2({x:e}) = {c:e}, libm {:e}", x.exp2());
    }
    for x in finite_in_f64 {
        assert_eq!(tgc_runtime::cpu_rt::exp2(x), f32::INFINITY, "exp2({x:e})");
    }
}

/// The major version of GCC when `cc` is GCC 12 or later on x86-64 — where
/// `TGC_CLONES` has its x86-64-v3 clone and `tgc_exp2f` its vector
/// variants (`TGC_VECTOR_ABI`) —, else `None` after saying why the caller
/// skips.
/// `g` compiled once per instruction set's clone (`TGC_MAX_ISA` at its
/// level, `Some(level)`) that this CPU and compiler have; where the clones
/// are not compiled (not x86-64 with GCC 12 or later), once as it is
/// (`None`).
fn each_isa_clone(g: &Graph) -> Vec<(Option<usize>, Compiled)> {
    let levels: Vec<Option<usize>> = match gcc_12_on_x86_64() {
        Some(_) => tgc_runtime::cpu_rt::Isa::ALL.iter().filter(|i| i.available()).map(|i| Some(i.level())).collect(),
        None => vec![None],
    };
    levels
        .into_iter()
        .map(|level| {
            let lib = compile_edited(g, &crate::cpu::Options::default(), &|c| match level {
                Some(l) => format!("#define TGC_MAX_ISA {l}\n{c}"),
                None => c.to_string(),
            });
            (level, lib)
        })
        .collect()
}

fn gcc_12_on_x86_64() -> Option<u32> {
    let gcc_major = Command::new("cc")
        .arg("-dumpversion")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|v| v.trim().split('.').next()?.parse::<u32>().ok());
    let is_gcc = Command::new("cc").arg("--version").output().is_ok_and(|o| {
        let v = String::from_utf8_lossy(&o.stdout).to_lowercase();
        !v.contains("clang")
    });
    if !cfg!(target_arch = "x86_64") || !is_gcc || gcc_major.is_none_or(|m| m < 12) {
        eprintln!("skipped: needs x86-64 and GCC 12 or later as `cc` (found {gcc_major:?}, gcc: {is_gcc})");
        return None;
    }
    gcc_major
}

/// The C of a softmax over rows of 1024, as the runtime compiles it.
fn softmax_c() -> String {
    let g = crate::pipeline::load(
        "graph<N> s(x: f32[N, 1024]) -> (y: f32[N, 1024]) {\n    y = softmax(x, axis=-1)\n    return y\n}",
        crate::pipeline::Format::Dsl,
        None,
    )
    .unwrap()
    .graph;
    super::c::emit_c_units_with(&[(&g, "tgc_s")], &crate::cpu::Options::default()).unwrap()
}

/// Softmax's `EXP2` in GCC's assembly: each clone of the usual row loop
/// (`_rows_portable`) calls `tgc_exp2f`'s vector variant for its width
/// (x86-64 vector function ABI: `_ZGVeN16v_` in the AVX-512F clone,
/// `_ZGVdN8v_` in the x86-64-v3 one, `_ZGVbN4v_` in the baseline), the
/// AVX-512F and AVX2 copies of `emit::c`'s `Isa` have their variant
/// inlined (no call; its FMAs and its scaling in the copy), and the
/// variants are the instructions they are written for: no call (an `fmaf`
/// call per step would be scalar), six `vfmadd`, the clamp's
/// `vminps`/`vmaxps`, and in the AVX-512F one `vrndscaleps` and
/// `vscalefps`. Skipped (and says so) off x86-64 or with a C compiler
/// other than GCC 12 or later.
#[test]
fn exp2_is_a_vector_function_in_the_clones() {
    if gcc_12_on_x86_64().is_none() {
        return;
    }
    let dir = Scratch::new("clones");
    let src = dir.0.join("k.c");
    std::fs::write(&src, softmax_c()).unwrap();
    let out = Command::new("cc").args(tgc_runtime::cpu::cflags()).args(["-S", "-o", "-"]).arg(&src).output().unwrap();
    assert!(out.status.success(), "cc -S failed:\n{}", String::from_utf8_lossy(&out.stderr));
    // Each function's instructions, by label.
    let asm = String::from_utf8(out.stdout).unwrap();
    let mut bodies: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    let mut current: Option<&str> = None;
    for line in asm.lines() {
        if let Some(label) = line.strip_suffix(':').filter(|l| !l.starts_with(['.', ' ', '\t'])) {
            current = Some(label);
        } else if let Some(f) = current.filter(|_| line.starts_with('\t') && !line.starts_with("\t.")) {
            bodies.entry(f).or_default().push(line.trim());
        }
    }
    let body =
        |name: &str| bodies.get(name).unwrap_or_else(|| panic!("no `{name}` in the assembly: {:?}", bodies.keys()));
    let count = |name: &str, op: &str| body(name).iter().filter(|l| l.starts_with(op)).count();
    for (clone, variant) in [
        ("avx512f", "_ZGVeN16v_tgc_exp2f"),
        ("arch_x86_64_v3", "_ZGVdN8v_tgc_exp2f"),
        ("default", "_ZGVbN4v_tgc_exp2f"),
    ] {
        let rows = bodies.keys().find(|l| l.starts_with("tgc_") && l.ends_with(&format!("_rows_portable.{clone}")));
        let rows = rows.unwrap_or_else(|| panic!("no `.{clone}` clone of the row loop: {:?}", bodies.keys()));
        assert!(
            body(rows).iter().any(|l| l.starts_with("call") && l.contains(variant)),
            "`{rows}` does not call {variant}"
        );
    }
    // The copies of `emit::c`'s `Isa` have the variant inlined.
    for (copy, variant, scale) in
        [("_rows_avx512", "_ZGVeN16v_tgc_exp2f", "vscalefps"), ("_rows_avx2", "_ZGVdN8v_tgc_exp2f", "vpslld")]
    {
        let rows = bodies.keys().find(|l| l.starts_with("tgc_") && l.contains(copy));
        let rows = rows.unwrap_or_else(|| panic!("no `{copy}` copy of the row loop: {:?}", bodies.keys()));
        assert!(!body(rows).iter().any(|l| l.starts_with("call") && l.contains(variant)), "`{rows}` calls {variant}");
        assert!(count(rows, "vfmadd") >= 6 && count(rows, scale) >= 1, "`{rows}`: {:?}", body(rows));
    }
    for variant in ["_ZGVeN16v_tgc_exp2f", "_ZGVdN8v_tgc_exp2f"] {
        assert_eq!(count(variant, "call"), 0, "{variant} calls: {:?}", body(variant));
        assert_eq!(count(variant, "vfmadd"), 6, "{variant}: {:?}", body(variant));
        assert!(count(variant, "vminps") == 1 && count(variant, "vmaxps") == 1, "{variant}: {:?}", body(variant));
    }
    assert!(count("_ZGVeN16v_tgc_exp2f", "vrndscaleps") == 1 && count("_ZGVeN16v_tgc_exp2f", "vscalefps") == 1);
}

/// Every vector variant of `tgc_exp2f` that this CPU can run gives the bits
/// of the lane code (`tgc_exp2f_lane`, the operations of
/// `cpu_rt::exp2`) — NaN payloads included — over every 4099th f32 and the
/// edges: signed zeros, ties, the overflow and subnormal edges, infinities,
/// quiet and signalling NaNs. A C driver includes the generated source
/// and calls the variants directly; the AVX2 and AVX-512F ones only where
/// the CPU has them (the driver says which it ran, and one always runs).
/// Skipped (and says so) off x86-64 or without GCC 12 or later.
#[test]
fn exp2_vector_variants_give_the_lane_bits() {
    if gcc_12_on_x86_64().is_none() {
        return;
    }
    let dir = Scratch::new("exp2_variants");
    std::fs::write(dir.0.join("k.c"), softmax_c()).unwrap();
    let driver = r#"#include "k.c"
#include <stdio.h>
static const uint32_t EDGES[] = { 0x00000000u, 0x80000000u, 0x3f000000u, 0xbf000000u, 0x3fc00000u, 0xc0200000u,
    0x42fe0000u, 0x43000000u, 0x431f8000u, 0x43200000u, 0x43210000u, 0xc2fb0000u, 0xc2fc0000u, 0xc2fd0000u,
    0xc3150000u, 0xc3158000u, 0xc3160000u, 0xc3200000u, 0x7f7fffffu, 0xff7fffffu, 0x00800000u, 0x00000001u,
    0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7fa00001u, 0xff812345u, 0x7fc0beefu };
static int check(const char* name, int width, void (*apply)(float*))
{
    long bad = 0, n = 0;
    for (uint64_t base = 0; base < (1ull << 32) + 64; base += 16ull * 4099ull) {
        uint32_t bits[16];
        float v[16], lane[16];
        for (int i = 0; i < 16; i += 1)
            bits[i] = base < (1ull << 32) ? (uint32_t)(base + 4099ull * (uint64_t)i) : EDGES[(i + base) % (sizeof EDGES / 4)];
        memcpy(v, bits, sizeof v);
        for (int i = 0; i < 16; i += 1) lane[i] = tgc_exp2f_lane(v[i]);
        for (int i = 0; i < 16; i += width) apply(v + i);
        for (int i = 0; i < 16; i += 1) {
            uint32_t a, b;
            memcpy(&a, &lane[i], 4);
            memcpy(&b, &v[i], 4);
            n += 1;
            if (a != b && bad++ < 5) printf("%s: %08x -> lane %08x, variant %08x\n", name, bits[i], a, b);
        }
    }
    printf("%s: %ld inputs, %ld differ\n", name, n, bad);
    return bad != 0;
}
static void v4(float* v) { __m128 x; memcpy(&x, v, sizeof x); x = tgc_exp2f_v4(x); memcpy(v, &x, sizeof x); }
__attribute__((target("avx"))) static void v8c(float* v) { __m256 x = _mm256_loadu_ps(v); _mm256_storeu_ps(v, tgc_exp2f_v8c(x)); }
__attribute__((target("avx2,fma"))) static void v8(float* v) { __m256 x = _mm256_loadu_ps(v); _mm256_storeu_ps(v, tgc_exp2f_v8(x)); }
__attribute__((target("avx512f"))) static void v16(float* v) { __m512 x = _mm512_loadu_ps(v); _mm512_storeu_ps(v, tgc_exp2f_v16(x)); }
int main(void)
{
    int bad = check("sse2", 4, v4);
    if (__builtin_cpu_supports("avx")) bad |= check("avx", 8, v8c);
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) bad |= check("avx2", 8, v8);
    if (__builtin_cpu_supports("avx512f")) bad |= check("avx512f", 16, v16);
    return bad;
}
"#;
    std::fs::write(dir.0.join("main.c"), driver).unwrap();
    let exe = dir.0.join("variants");
    let mut cc = Command::new("cc");
    cc.args(tgc_runtime::cpu::VALUE_CFLAGS)
        .args(["-O2", "-std=gnu11", "-o"])
        .arg(&exe)
        .arg(dir.0.join("main.c"))
        .arg("-lm");
    let out = cc.output().unwrap();
    assert!(out.status.success(), "cc failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let run = Command::new(&exe).output().unwrap();
    let report = String::from_utf8_lossy(&run.stdout);
    eprintln!("{report}");
    assert!(run.status.success(), "a variant differs from the lane code:\n{report}");
    assert!(report.contains("sse2: ") && report.lines().all(|l| l.ends_with(" 0 differ")), "{report}");
}

/// Every path of `tgc_max_run_f32` and `tgc_min_run_f32` that this CPU can
/// run — the lane loop, AVX2, AVX-512F — gives the lane loop's bits for
/// all 32 lanes, called directly by a C driver that includes the generated
/// source (the graph test above reaches only the widest path): runs of 0
/// to 100 values of random signs with NaNs (payloads) in chunks and tails,
/// signed zeros, infinities, and an incoming acc with a NaN. Skipped (and
/// says so) off x86-64 or without GCC 12 or later.
#[test]
fn row_max_and_min_run_paths_give_the_lane_loop_bits() {
    if gcc_12_on_x86_64().is_none() {
        return;
    }
    let g = crate::pipeline::load(
        "graph<R, C> mm(x: f32[R, C]) -> (a: f32[R], b: f32[R]) {\n    a = max(x, axes=[1])\n    b = min(x, axes=[1])\n    return a, b\n}",
        crate::pipeline::Format::Dsl,
        None,
    )
    .unwrap()
    .graph;
    let dir = Scratch::new("run_paths");
    std::fs::write(
        dir.0.join("k.c"),
        super::c::emit_c_units_with(&[(&g, "tgc_mm")], &crate::cpu::Options::default()).unwrap(),
    )
    .unwrap();
    let driver = r#"#include "k.c"
#include <stdio.h>
typedef void (*run_fn)(const float* restrict, int64_t, float* restrict);
static uint32_t state = 12345u;
static uint32_t next(void) { state = state * 1664525u + 1013904223u; return state; }
static float value(void)
{
    const uint32_t r = next() % 64u;
    const uint32_t payload = next() & 0x3fffffu;
    uint32_t bits;
    if (r == 0) bits = 0x7fc00000u | payload;
    else if (r == 1) bits = 0xffc00000u | payload;
    else if (r == 2) bits = 0x80000000u;
    else if (r == 3) bits = 0x00000000u;
    else if (r == 4) bits = 0x7f800000u;
    else if (r == 5) bits = 0xff800000u;
    else { float f = (float)(int32_t)(next() % 2001u) / 250.0f - 4.0f; memcpy(&bits, &f, 4); }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
static int compare(const char* name, run_fn f, run_fn exact, int64_t n, const float* x, const float* acc0)
{
    float want[32], got[32];
    memcpy(want, acc0, sizeof want);
    memcpy(got, acc0, sizeof got);
    exact(x, n, want);
    f(x, n, got);
    if (memcmp(want, got, sizeof want) != 0) {
        printf("%s differs at n = %ld\n", name, (long)n);
        return 1;
    }
    return 0;
}
int main(void)
{
    int bad = 0, runs = 0;
    float x[100], acc0[32];
    for (int trial = 0; trial < 4000; trial += 1) {
        const int64_t n = (int64_t)(next() % 101u);
        /* Mostly clean runs (the vector path's own result), some with NaNs. */
        const int dirty = trial % 4 == 0;
        for (int64_t j = 0; j < n; j += 1) {
            float v = value();
            if (!dirty && v != v) v = 1.5f;
            x[j] = v;
        }
        for (int l = 0; l < 32; l += 1) acc0[l] = trial % 97 == 0 && l == 5 ? NAN : (trial % 2 ? -INFINITY : INFINITY);
        bad |= compare("max exact", tgc_max_run_exact, tgc_max_run_exact, n, x, acc0);
        if (__builtin_cpu_supports("avx2")) {
            bad |= compare("max avx2", tgc_max_run_v8, tgc_max_run_exact, n, x, acc0);
            bad |= compare("min avx2", tgc_min_run_v8, tgc_min_run_exact, n, x, acc0);
            runs |= 1;
        }
        if (__builtin_cpu_supports("avx512f")) {
            bad |= compare("max avx512f", tgc_max_run_v16, tgc_max_run_exact, n, x, acc0);
            bad |= compare("min avx512f", tgc_min_run_v16, tgc_min_run_exact, n, x, acc0);
            runs |= 2;
        }
    }
    printf("paths: avx2 %s, avx512f %s\n", runs & 1 ? "checked" : "not on this CPU", runs & 2 ? "checked" : "not on this CPU");
    return bad;
}
"#;
    std::fs::write(dir.0.join("main.c"), driver).unwrap();
    let exe = dir.0.join("runs");
    let mut cc = Command::new("cc");
    cc.args(tgc_runtime::cpu::VALUE_CFLAGS)
        .args(["-O2", "-std=gnu11", "-o"])
        .arg(&exe)
        .arg(dir.0.join("main.c"))
        .arg("-lm");
    let out = cc.output().unwrap();
    assert!(out.status.success(), "cc failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let run = Command::new(&exe).output().unwrap();
    let report = String::from_utf8_lossy(&run.stdout);
    eprintln!("{report}");
    assert!(run.status.success(), "a vector path differs from the lane loop:\n{report}");
    // The driver's paths, counted: the lane loop always, then each vector path.
    use tgc_runtime::cpu_rt::Isa;
    let (mut ran, mut skipped) = (vec![Isa::Portable], Vec::new());
    for (isa, name) in [(Isa::Avx2, "avx2"), (Isa::Avx512, "avx512f")] {
        match (report.contains(&format!("{name} checked")), report.contains(&format!("{name} not on this CPU"))) {
            (true, false) => ran.push(isa),
            (false, true) => skipped.push(isa),
            _ => panic!("no line on {name}'s path:\n{report}"),
        }
    }
    isa_report::isa_paths("tgc_max_run_f32 and tgc_min_run_f32 paths", &ran, &skipped);
}

/// The graph-layer ops of `004` §4 — `sign`, `clamp`, `pow` (a constant
/// integer exponent and the general form), `batch_norm`, `instance_norm` —
/// in C and Rust against the interpreter, at symbolic sizes: odd ones and
/// ones; an empty extent is refused (status 2), as the interpreter refuses
/// it (every size is at least 1).
#[test]
fn graph_layer_ops_in_c_and_rust() {
    let src = "graph<N, C, H, W> ops(x: f32[N, C, H, W], e: f32[N, C, H, W], s: f32[C], b: f32[C], m: f32[C], v: f32[C]) -> (a: f32[N, C, H, W], y: f32[N, C, H, W], p: f32[N, C, H, W], q: f32[N, C, H, W], n: f32[N, C, H, W]) {
        a = sign(x) + clamp(x, min=-0.5, max=0.25) + clamp(x, max=0)
        y = pow(x, 3) - pow(x, -2) + pow(x, 0)
        p = pow(x, e)
        q = batch_norm(x, s, b, m, abs(v) + 0.1, eps=1e-3)
        n = instance_norm(x, s, b)
        return a, y, p, q, n
    }";
    let g = crate::pipeline::load(src, crate::pipeline::Format::Dsl, None).unwrap().graph;
    let lib = compile(&g);
    for (k, dims) in [[2, 3, 5, 7], [1, 1, 1, 1], [3, 2, 0, 4], [1, 4, 9, 2]].into_iter().enumerate() {
        let [n, c, h, w] = dims.map(|d| d as usize);
        let all = n * c * h * w;
        // `x` has negative values, zeros and exact integers (`pow`'s cases).
        let mut x = data(91 + k as u64, all, -2.0, 2.0, DType::F32);
        for (i, v) in x.iter_mut().enumerate() {
            if i % 5 == 0 {
                *v = (i % 7) as f64 - 3.0;
            }
        }
        let mut e = data(92 + k as u64, all, -3.0, 3.0, DType::F32);
        for (i, v) in e.iter_mut().enumerate() {
            if i % 3 == 0 {
                *v = (i % 5) as f64 - 2.0;
            }
        }
        let ins = [
            x,
            e,
            data(93, c, 0.5, 1.5, DType::F32),
            data(94, c, -0.5, 0.5, DType::F32),
            data(95, c, -1.0, 1.0, DType::F32),
            data(96, c, 0.0, 2.0, DType::F32),
        ];
        let (cr, rr) = lib.run(&ins, &dims.map(|d| d as i64));
        let refused = if all == 0 { 2 } else { 0 };
        assert_eq!((cr.rc, rr.rc), (refused, refused), "dims {dims:?}");
    }
}

/// `tile`, `repeat_interleave` and list `squeeze`/`unsqueeze` (movement
/// only: `RESHAPE`, `EXPAND`) in C and Rust against the interpreter, at
/// symbolic sizes, fused into a consumer.
#[test]
fn tile_and_repeat_in_c_and_rust() {
    let src = "graph<N> mv(x: f32[N, 4], y: f32[4]) -> (a: f32[2, N, 12], b: f32[N, 8], c: f32[N, 4]) {
        a = tile(x, [2, 1, 3]) + 1
        b = repeat_interleave(x, 2, 1) * 2
        c = squeeze(unsqueeze(x, [0, -1]), [0, 3]) + tile(y, [1])
        return a, b, c
    }";
    let g = crate::pipeline::load(src, crate::pipeline::Format::Dsl, None).unwrap().graph;
    let lib = compile(&g);
    for n in [1, 3, 7] {
        let c = 4;
        let ins = [data(97, n * c, -1.0, 1.0, DType::F32), data(98, c, -1.0, 1.0, DType::F32)];
        let (cr, rr) = lib.run(&ins, &[n as i64]);
        assert_eq!((cr.rc, rr.rc), (0, 0));
        assert_eq!(cr.outputs[0].len(), 6 * n * c);
    }
}

/// `concat` and `split` in C and Rust against the interpreter, at a
/// symbolic size, fused into their consumers.
#[test]
fn concat_and_split_in_c_and_rust() {
    let src = "graph<N> cs(x: f32[N, 3], y: f32[N, 2]) -> (c: f32[N, 8], a: f32[N, 1], b: f32[N, 2], r: f32[N, 3]) {
        c = concat([x, y, x], axis=1) * 2
        (a, b) = split(x, [1, 2], axis=1)
        (p, q) = split(y, [1, 1], axis=-1)
        r = concat([q, p, a + 1], axis=1)
        return c, a, b, r
    }";
    let g = crate::pipeline::load(src, crate::pipeline::Format::Dsl, None).unwrap().graph;
    let lib = compile(&g);
    for n in [1, 4, 9] {
        let ins = [data(99, n * 3, -1.0, 1.0, DType::F32), data(100, n * 2, -1.0, 1.0, DType::F32)];
        let (cr, rr) = lib.run(&ins, &[n as i64]);
        assert_eq!((cr.rc, rr.rc), (0, 0));
        assert_eq!(cr.outputs[0].len(), 8 * n);
    }
}

/// The sliding-window ops in 1-D and 3-D, transposed convolutions (the
/// input dilated by `RESHAPE` + `PAD`, the weight flipped), pools,
/// `im2col`/`col2im`/`unfold`, `reflect`/`edge` padding and `chunk` in C
/// and Rust against the interpreter, at a symbolic batch.
#[test]
fn nd_windows_border_pads_and_chunks_in_c_and_rust() {
    let src = "graph<N> nd(x: f32[N, 4, 9], v: f32[N, 2, 4, 5, 3], w: f32[6, 2, 3], u: f32[4, 3, 2], k: f32[2, 1, 2, 3, 2], b: f32[6], r: f32[N, 3, 4]) -> (a: f32[N, 6, 5], t: f32[N, 6, 18], p: f32[N, 4, 9], q: f32[N, 2, 2, 3, 2], c: f32[N, 2, 3, 8, 4], e: f32[N, 7, 7], h: f32[N, 3, 2], f: f32[N, 4, 9], s: f32[N, 4, 4, 3]) {
        a = maxpool1d(relu(conv1d(x, w, bias=b, pad=[1, 0], dilation=2, groups=2)), kernel=2, stride=1)
        t = conv_transpose1d(x, u, bias=b, stride=2, pad=[1, 0], output_padding=1, groups=2)
        p = avgpool1d(x, kernel=3, stride=1, pad=1)
        q = maxpool3d(v, kernel=[2, 2, 2], pad=[0, 1, 1, 0, 0, 1]) + avgpool3d(v, kernel=[2, 2, 2], pad=[0, 1, 1, 0, 0, 1])
        c = conv_transpose3d(v, k, stride=[1, 2, 1], pad=[1, 1, 2, 1, 0, 0], groups=2)
        e = pad(r, [[0, 0], [2, 2], [1, 2]], mode=reflect) + pad(r, [[0, 0], [1, 3], [2, 1]], mode=edge)
        (h0, h1) = chunk(r, 2, axis=2)
        h = h0 * h1
        f = col2im(im2col(x, kernel=[3], stride=2, pad=1), output=[9], kernel=[3], stride=2, pad=1)
        s = unfold(x, 2, 3, 2) * 2
        return a, t, p, q, c, e, h, f, s
    }";
    let g = crate::pipeline::load(src, crate::pipeline::Format::Dsl, None).unwrap_or_else(|e| panic!("{e}")).graph;
    let lib = compile(&g);
    for n in [1, 3] {
        let ins: Vec<Vec<f64>> = g
            .inputs()
            .into_iter()
            .enumerate()
            .map(|(j, id)| {
                let count: i64 = g.shape(id).iter().map(|d| d.as_int().unwrap_or(n)).product();
                data(110 + j as u64, count as usize, -1.0, 1.0, DType::F32)
            })
            .collect();
        let (cr, rr) = lib.run(&ins, &[n]);
        assert_eq!((cr.rc, rr.rc), (0, 0), "N = {n}");
        assert_eq!(cr.outputs[1].len(), n as usize * 6 * 18);
    }
}

/// `gather` and `take` (the one data-dependent read, `GATHER`) in C and
/// Rust against the interpreter at symbolic sizes, fused into element-wise
/// consumers, a reduction and a matmul's operand, and from a transposed
/// table (stored first: the view's contiguous copy), with indices below,
/// inside and above the range (negative ones count from the end, the rest
/// are clamped).
#[test]
fn gather_and_take_in_c_and_rust() {
    let src = "graph<V, N> gt(table: f32[V, 6], ids: i32[N], x: f32[N, 6], i: i32[N, 6], w: f32[6, 40]) -> (e: f32[N, 6], s: f32[N], g: f32[N, 6], p: f32[N, 40], c: f32[N, V]) {
        e = take(table, ids, 0) + x
        c = take(transpose(table, 0, 1), ids, 0)
        s = sum(take(table, ids, 0) * x, axes=[1])
        g = gather(x, 1, i) * 2
        p = matmul(take(table, ids, 0), w)
        return e, s, g, p, c
    }";
    let g = crate::pipeline::load(src, crate::pipeline::Format::Dsl, None).unwrap_or_else(|e| panic!("{e}")).graph;
    let lib = compile(&g);
    assert!(lib.c_src.contains("tgc_gather_at(") && lib.rust_src.contains("gather_at("));
    // The matmul is on the packed template, its A panel packed from the gather.
    assert!(lib.c_src.contains("pk_rt->ukernel"), "{}", lib.c_src);
    for (v, n) in [(5, 7), (1, 1), (9, 3)] {
        let ins = [
            data(140, v * 6, -1.0, 1.0, DType::F32),
            data(141, n, -2.0 * v as f64, 2.0 * v as f64, DType::I32),
            data(142, n * 6, -1.0, 1.0, DType::F32),
            data(143, n * 6, -9.0, 9.0, DType::I32),
            data(144, 6 * 40, -1.0, 1.0, DType::F32),
        ];
        let (cr, rr) = lib.run(&ins, &[v as i64, n as i64]);
        assert_eq!((cr.rc, rr.rc), (0, 0), "V = {v}, N = {n}");
    }
}

/// The tolerance of an f32 running sum of about 8000 terms of [-1, 1)
/// (`cumulative_ops_in_c_and_rust`'s rows of more than a block):
/// `docs/numerics.md`'s `sum` bound, (n − 1)·2^-24·Σ|s|, is about 4 there,
/// looser than [`Tol::F32`]; the tolerance stays at 1e-3 absolute and
/// relative, which a sum in another order meets (its rounding grows like
/// √n·2^-24 of the partial sums, ~1e-4 here: seen 2.3e-5), and a wrong
/// carry between blocks does not.
const SCAN_SUM: Tol = Tol { rtol: 1e-3, atol: 1e-3 };

/// The cumulative ops (`SCAN`) in C and Rust against the interpreter at
/// symbolic sizes: every op, exclusive and reverse, along the first, last
/// and a middle axis, with a fused producer, in f32, f16 and i32, and rows
/// longer than one block (`SCAN_BLOCK`), which the C code splits into
/// block totals, carries and a second pass on the pool. C and Rust print
/// the same block order, so they agree to the bit. In a row longer than a
/// block, the exclusive reverse sum `e` adds thousands of terms of both
/// signs: it is held to [`SCAN_SUM`], the other outputs to their dtype's
/// tolerance.
#[test]
fn cumulative_ops_in_c_and_rust() {
    let src = "graph<M, N> cum(x: f32[M, N], h: f16[M, N], i: i32[M, 3, N]) -> (s: f32[M, N], p: f32[M, N], mx: f32[M, N], mn: f16[M, N], si: i32[M, 3, N], e: f32[M, N]) {
        s = cumsum(x * x, 1)
        p = cumprod(x, 0, reverse=true)
        mx = cummax(x, -1, exclusive=true)
        mn = cummin(h, 1, reverse=true, exclusive=true)
        si = cumsum(i, 1)
        e = cumsum(x, -1, exclusive=true, reverse=true) + 1
        return s, p, mx, mn, si, e
    }";
    let g = crate::pipeline::load(src, crate::pipeline::Format::Dsl, None).unwrap_or_else(|e| panic!("{e}")).graph;
    let lib = compile(&g);
    assert!(lib.c_src.contains("pk_carry"), "the C scan runs in blocks");
    let block = crate::cpu::loop_ir::SCAN_BLOCK as usize;
    for (m, n) in [(3, 5), (1, 1), (8, 2 * block + 3), (4, 1)] {
        let ins = [
            data(150, m * n, -1.0, 1.0, DType::F32),
            data(151, m * n, -4.0, 4.0, DType::F16),
            data(152, m * 3 * n, -50.0, 50.0, DType::I32),
        ];
        let mut tols: Vec<Tol> = g.outputs.iter().map(|o| Tol::of(g.dtype(o.node))).collect();
        if n > block {
            // `e`: a running sum of terms of both signs (`s`'s squares
            // do not cancel, and meet `Tol::F32`).
            tols[5] = SCAN_SUM;
        }
        let (cr, rr) = lib.run_within(&ins, &[m as i64, n as i64], &tols);
        assert_eq!((cr.rc, rr.rc), (0, 0), "M = {m}, N = {n}");
        for (k, (c, r)) in cr.outputs.iter().zip(&rr.outputs).enumerate() {
            let same = c.iter().zip(r).all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
            assert!(same, "output {k}: C and Rust differ at M = {m}, N = {n}");
        }
    }
}

/// The GPU model of a build-helper model: weights from the device pool in
/// ConstPool order, the run inputs and outputs from the buffers kept per
/// dims, each at its place among the launch's arguments.
#[test]
fn the_sm80_model_passes_weights_and_kept_buffers_in_graph_order() {
    let src = "graph<B> main(w: f32[4, 4], x: f32[B, 4], b: f32[4]) -> (y: f32[B, 4]) {
        y = matmul(x, w) + b
        return y
    }";
    let g = crate::pipeline::load(src, crate::pipeline::Format::Dsl, None).unwrap().graph;
    let items = super::model::sm80_model_items("affine", &g, &["x".to_string()]).unwrap();
    for want in [
        "graphs: ::tgc::cuda::Graphs<[i64; 1]>,",
        "kept: ::std::collections::HashMap<[i64; 1], (::tgc::cuda::CudaSlice<f32>, ::tgc::cuda::CudaSlice<f32>,)>,",
        "pub fn run(&mut self, x: &[f32], y: &mut [f32], B: usize)",
        "gpu.copy_to_device(x, &mut __kept.0)?;",
        "let __w0 = pool.weight::<f32>(0)",
        "\"weight `b` is not in the device pool\"",
        "graphs.run(gpu, __dims, |__gpu| self::launch(__gpu, &__w0, &__kept.0, &__w1, &mut __kept.1, B))?;",
        "gpu.copy_to_host(&__kept.1, y)?;",
    ] {
        assert!(items.contains(want), "no `{want}` in\n{items}");
    }
    let e = super::model::sm80_model_items("affine", &g, &["z".to_string()]).unwrap_err();
    assert_eq!(e.name, crate::ErrorName::UnknownName);
}

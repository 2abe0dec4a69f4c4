//! Numeric checks: the decompositions against f64 references, evaluated by
//! `eval.rs` exactly (approximation error alone) and with every float node
//! rounded to f32 (the error a correct backend may show).

use super::eval::{eval, random, Tensor};
use crate::frontend::ir::UnaryFn;
use crate::frontend::ops::elementwise;
use crate::sym::Dim;
use crate::tiny::{Graph, Output};
use crate::DType::F32;

/// erf by its everywhere-convergent series
/// `erf(x) = 2/√π · e^{−x²} · Σ_{n≥0} 2ⁿ x^{2n+1} / (1·3·…·(2n+1))`
/// (all terms positive for x ≥ 0, so no cancellation; ~1e-15 relative);
/// ±1 beyond |x| = 6, where erfc(6) = 2e-17 is below an f64 ulp of 1.
pub fn erf_ref(x: f64) -> f64 {
    let a = x.abs();
    if a > 6.0 {
        return 1f64.copysign(x);
    }
    let (mut term, mut sum, mut k) = (a, a, 0.0);
    while term > sum * 1e-17 {
        k += 1.0;
        term *= 2.0 * a * a / (2.0 * k + 1.0);
        sum += term;
    }
    (2.0 / std::f64::consts::PI.sqrt() * (-a * a).exp() * sum).copysign(x)
}

fn sigmoid_ref(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

fn reference(f: UnaryFn, x: f64) -> f64 {
    match f {
        UnaryFn::Exp => x.exp(),
        UnaryFn::Log => x.ln(),
        UnaryFn::Sigmoid => sigmoid_ref(x),
        UnaryFn::Tanh => x.tanh(),
        UnaryFn::Silu => x * sigmoid_ref(x),
        UnaryFn::Erf => erf_ref(x),
        UnaryFn::Gelu => 0.5 * x * (1.0 + erf_ref(x / std::f64::consts::SQRT_2)),
        UnaryFn::GeluTanh => {
            0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
        }
        _ => f64::NAN,
    }
}

/// `f` applied to the points `xs`, evaluated exactly and in f32.
fn run(f: UnaryFn, xs: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let mut g = Graph::new("t");
    let x = g.input("x", F32, &[Dim::int(xs.len() as i64)]).unwrap();
    let y = elementwise::unary(&mut g, f, x).unwrap();
    g.outputs.push(Output { name: "y".into(), node: y });
    let input = || vec![("x", Tensor::new(&[xs.len()], xs.to_vec()))];
    let exact = eval(&g, &[], &input(), false).remove(0).data;
    let f32 = eval(&g, &[], &input(), true).remove(0).data;
    (exact, f32)
}

/// 2^-24, the unit roundoff of f32.
const U: f64 = 1.0 / 16_777_216.0;

fn grid(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    (0..=n).map(|i| lo + (hi - lo) * i as f64 / n as f64).collect()
}

#[test]
fn reference_erf_is_accurate() {
    // Known values (A&S Table 7.1).
    assert!((erf_ref(0.5) - 0.520_499_877_813_046_5).abs() < 1e-15);
    assert!((erf_ref(1.0) - 0.842_700_792_949_714_9).abs() < 1e-15);
    assert!((erf_ref(2.0) - 0.995_322_265_018_952_7).abs() < 1e-15);
    assert!((erf_ref(-3.0) + 0.999_977_909_503_001_4).abs() < 1e-15);
}

/// The error bounds stated in the doc comments of `ops/elementwise.rs`,
/// checked at every point of a 20001-point grid: `(function, lo, hi, exact
/// absolute bound, f32 absolute bound as a function of x, f32 relative bound
/// as a function of x)`; `INF` where no bound is claimed.
#[test]
fn unary_decompositions_meet_their_stated_error_bounds() {
    type Bound = fn(f64) -> f64;
    let none: Bound = |_| f64::INFINITY;
    let cases: [(UnaryFn, f64, f64, Bound, Bound, Bound); 8] = [
        (UnaryFn::Exp, -88.0, 88.0, none, none, |x| (2.0 * x.abs() + 2.0) * U),
        (UnaryFn::Log, 1e-3, 1e4, none, none, |_| 2e-7),
        (UnaryFn::Sigmoid, -30.0, 30.0, none, |_| 1.2e-7, |_| 2e-6),
        (UnaryFn::Tanh, -10.0, 10.0, none, |_| 2.4e-7, none),
        (UnaryFn::Silu, -30.0, 30.0, none, none, |_| 2e-6),
        (UnaryFn::Erf, -6.0, 6.0, |_| 1.5e-7, |_| 5e-7, none),
        (UnaryFn::Gelu, -10.0, 10.0, |x| 0.75e-7 * x.abs(), |_| 5e-7, none),
        (UnaryFn::GeluTanh, -10.0, 10.0, |_| 1e-14, |_| 6e-7, none),
    ];
    for (f, lo, hi, exact_abs, f32_abs, f32_rel) in cases {
        let xs = grid(lo, hi, 20_000);
        let (exact, rounded) = run(f, &xs);
        for (k, &x) in xs.iter().enumerate() {
            let x32 = x as f32 as f64;
            let r = reference(f, x32);
            let (e, y) = (exact[k], rounded[k]);
            assert!((e - r).abs() <= exact_abs(x32).max(1e-14 * r.abs()), "{} exact at {x}: {e} vs {r}", f.name());
            assert!((y - r).abs() <= f32_abs(x32), "{} f32 abs at {x}: {y} vs {r}", f.name());
            assert!(r == 0.0 || ((y - r) / r).abs() <= f32_rel(x32), "{} f32 rel at {x}: {y} vs {r}", f.name());
        }
    }
}

/// The spacing of f32 at `v` (2^-149 among the subnormals).
fn ulp32(v: f64) -> f64 {
    let e = v.abs().max(f32::MIN_POSITIVE as f64).log2().floor() as i32;
    2f64.powi(e - 23)
}

/// f32 points of `[lo, hi]`: a uniform grid, and magnitudes spread
/// logarithmically down to 1e-30 (both signs where the range has them).
fn sweep(lo: f64, hi: f64) -> Vec<f64> {
    let mut xs = grid(lo, hi, 40_000);
    let top = lo.abs().max(hi.abs());
    for i in 0..=20_000 {
        let m = (1e-30f64.ln() + (top.ln() - 1e-30f64.ln()) * i as f64 / 20_000.0).exp();
        xs.extend([m, -m].into_iter().filter(|x| (lo..=hi).contains(x)));
    }
    xs.into_iter().map(|x| x as f32 as f64).collect()
}

/// The circular and hyperbolic functions of `ops/trig.rs` evaluated in f32
/// against Rust's f64 functions (the platform libm): at most `ulp` units in
/// the last place plus `rel(x)` relative, the bounds their doc comments
/// state, on a sweep of each domain; `sin cos tan` also next to each
/// multiple of π/2 up to 65536 (where the reduction cancels most), and NaN
/// beyond it.
#[test]
fn trig_decompositions_meet_their_ulp_bounds() {
    type Rel = fn(f64) -> f64;
    let zero: Rel = |_| 0.0;
    let exp_rel: Rel = |x| (2.0 * x.abs() + 2.0) * U;
    // (function, reference, lo, hi, ulp bound, relative bound).
    type Case = (UnaryFn, fn(f64) -> f64, f64, f64, f64, Rel);
    let cases: [Case; 11] = [
        (UnaryFn::Sin, f64::sin, -65536.0, 65536.0, 3.5, zero),
        (UnaryFn::Cos, f64::cos, -65536.0, 65536.0, 3.5, zero),
        (UnaryFn::Tan, f64::tan, -65536.0, 65536.0, 7.0, zero),
        (UnaryFn::Asin, f64::asin, -1.0, 1.0, 2.5, zero),
        (UnaryFn::Acos, f64::acos, -1.0, 1.0, 1.5, zero),
        (UnaryFn::Atan, f64::atan, -3e38, 3e38, 2.5, zero),
        (UnaryFn::Sinh, f64::sinh, -89.0, 89.0, 2.0, exp_rel),
        (UnaryFn::Cosh, f64::cosh, -89.0, 89.0, 2.0, exp_rel),
        (UnaryFn::Asinh, f64::asinh, -3e38, 3e38, 2.5, zero),
        (UnaryFn::Acosh, f64::acosh, 1.0, 3e38, 3.0, zero),
        (UnaryFn::Atanh, f64::atanh, -0.999_999_9, 0.999_999_9, 3.5, zero),
    ];
    for (f, reference, lo, hi, ulps, rel) in cases {
        let mut xs = sweep(lo, hi);
        if f == UnaryFn::Acosh {
            xs.extend(sweep(0.0, 8.0).into_iter().map(|x| (1.0 + x) as f32 as f64));
        }
        if matches!(f, UnaryFn::Sin | UnaryFn::Cos | UnaryFn::Tan) {
            for k in 1..41_723 {
                let c = (k as f64 * std::f64::consts::FRAC_PI_2) as f32;
                xs.extend([c.next_down(), c, c.next_up()].map(f64::from).into_iter().filter(|x| x.abs() <= hi));
            }
        }
        let (_, y) = run(f, &xs);
        let mut worst = (0.0, 0.0);
        for (&x, &v) in xs.iter().zip(&y) {
            let r = reference(x);
            let err = (v - r).abs() / (ulps * ulp32(r) + rel(x) * r.abs());
            // NaN where the reference is a number is outside any bound.
            let err = if err.is_nan() { f64::INFINITY } else { err };
            if err > 1.0 && err > worst.0 {
                worst = (err, x);
            }
        }
        assert!(worst.0 == 0.0, "{} outside {ulps} ulp: {:.2}× the bound at x = {:e}", f.name(), worst.0, worst.1);
    }
    for f in [UnaryFn::Sin, UnaryFn::Cos, UnaryFn::Tan] {
        let (_, y) = run(f, &[65537.0, -1e10, f64::INFINITY]);
        assert!(y.iter().all(|v| v.is_nan()), "{} beyond the reduction: {y:?}", f.name());
    }
}

#[test]
fn saturation_gives_no_nan() {
    let xs = [-1e4, -100.0, 100.0, 1e4];
    for f in [UnaryFn::Sigmoid, UnaryFn::Tanh, UnaryFn::Silu, UnaryFn::Erf, UnaryFn::Gelu, UnaryFn::GeluTanh] {
        let (_, y) = run(f, &xs);
        for (x, v) in xs.iter().zip(&y) {
            let r = reference(f, *x);
            assert!(v == &r || (v - r).abs() <= 1e-6 * r.abs().max(1.0), "{} at {x}: {v} vs {r}", f.name());
        }
    }
}

// --- whole ops against naive f64 loops ------------------------------------

use super::ast_build::*;
use super::eval::unravel;
use crate::frontend::ast::{BinOp, Expr, TensorDecl};
use crate::frontend::to_tiny::lower;

/// Lowers `main(params) -> (y: f32[ys]) { y = value }` and evaluates it in
/// f32 with `inputs`.
fn run_graph(params: Vec<TensorDecl>, ys: &[&str], value: Expr, inputs: &[(&str, Tensor)]) -> Tensor {
    let p = single(&[], params, t("y", F32, ys), value);
    let g = lower(&p, None).unwrap_or_else(|e| panic!("{e}"));
    assert!(crate::tiny::verify::verify(&g).is_empty());
    eval(&g, &[], inputs, true).remove(0)
}

fn dims(shape: &[usize]) -> Vec<String> {
    shape.iter().map(|d| d.to_string()).collect()
}

fn decl(name: &str, shape: &[usize]) -> TensorDecl {
    let d = dims(shape);
    let r: Vec<&str> = d.iter().map(|s| s.as_str()).collect();
    t(name, F32, &r)
}

fn assert_close(got: &Tensor, want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.data.len(), want.len(), "{what}: element count");
    for (k, (a, b)) in got.data.iter().zip(want).enumerate() {
        assert!((a - b).abs() <= tol * (1.0 + b.abs()), "{what}[{k}] = {a}, want {b}");
    }
}

#[test]
fn matmul_matches_naive_batched_product() {
    let (b, m, k, nc) = (2, 3, 5, 4);
    let a = random(&[b, m, k], 1, -1.0, 1.0);
    let w = random(&[k, nc], 2, -1.0, 1.0);
    let y = run_graph(
        vec![decl("a", &[b, m, k]), decl("w", &[k, nc])],
        &["2", "3", "4"],
        call("matmul", vec![n("a"), n("w")]),
        &[("a", a.clone()), ("w", w.clone())],
    );
    let mut want = Vec::new();
    for i in 0..b * m * nc {
        let ix = unravel(i, &[b, m, nc]);
        want.push((0..k).map(|kk| a.at(&[ix[0], ix[1], kk]) * w.at(&[kk, ix[2]])).sum());
    }
    assert_close(&y, &want, 1e-6, "matmul");
    let v = random(&[k], 3, -1.0, 1.0);
    let y = run_graph(
        vec![decl("v", &[k]), decl("w", &[k, nc])],
        &["4"],
        call("matmul", vec![n("v"), n("w")]),
        &[("v", v.clone()), ("w", w.clone())],
    );
    let want: Vec<f64> = (0..nc).map(|j| (0..k).map(|kk| v.at(&[kk]) * w.at(&[kk, j])).sum()).collect();
    assert_close(&y, &want, 1e-6, "vector·matrix");
}

/// Naive NCHW/OIHW convolution with asymmetric padding.
#[allow(clippy::too_many_arguments)]
pub(super) fn conv_ref(
    x: &Tensor,
    w: &Tensor,
    bias: &[f64],
    s: [usize; 2],
    p: [usize; 4],
    d: [usize; 2],
    groups: usize,
    out: &[usize],
) -> Vec<f64> {
    let (cin_g, kh, kw) = (w.shape[1], w.shape[2], w.shape[3]);
    let rcout = w.shape[0] / groups;
    let mut y = Vec::new();
    for i in 0..out.iter().product() {
        let [nn, o, oy, ox] = unravel(i, out)[..] else { unreachable!() };
        let gi = o / rcout;
        let mut acc = bias[o];
        for c in 0..cin_g {
            for ky in 0..kh {
                for kx in 0..kw {
                    let iy = (oy * s[0] + ky * d[0]) as i64 - p[0] as i64;
                    let ix = (ox * s[1] + kx * d[1]) as i64 - p[2] as i64;
                    if iy >= 0 && ix >= 0 && (iy as usize) < x.shape[2] && (ix as usize) < x.shape[3] {
                        acc += x.at(&[nn, gi * cin_g + c, iy as usize, ix as usize]) * w.at(&[o, c, ky, kx]);
                    }
                }
            }
        }
        y.push(acc);
    }
    y
}

#[test]
fn conv2d_matches_naive_convolution() {
    let x = random(&[2, 4, 9, 8], 4, -1.0, 1.0);
    let w = random(&[6, 2, 3, 3], 5, -1.0, 1.0);
    let b = random(&[6], 6, -1.0, 1.0);
    let out = [2, 6, 4, 4];
    let kw = vec![
        ("bias", n("b")),
        ("stride", ints(&[2, 2])),
        ("pad", ints(&[1, 0, 2, 1])),
        ("dilation", ints(&[1, 2])),
        ("groups", int(2)),
    ];
    let y = run_graph(
        vec![decl("x", &x.shape), decl("w", &w.shape), decl("b", &b.shape)],
        &["2", "6", "4", "4"],
        call_kw("conv2d", vec![n("x"), n("w")], kw),
        &[("x", x.clone()), ("w", w.clone()), ("b", b.clone())],
    );
    assert_close(&y, &conv_ref(&x, &w, &b.data, [2, 2], [1, 0, 2, 1], [1, 2], 2, &out), 1e-5, "conv2d");
    let y = run_graph(
        vec![decl("x", &x.shape), decl("w", &[3, 4, 2, 2])],
        &["2", "3", "8", "7"],
        call("conv2d", vec![n("x"), n("w")]),
        &[("x", x.clone()), ("w", random(&[3, 4, 2, 2], 7, -1.0, 1.0))],
    );
    let w2 = random(&[3, 4, 2, 2], 7, -1.0, 1.0);
    assert_close(&y, &conv_ref(&x, &w2, &[0.0; 3], [1, 1], [0; 4], [1, 1], 1, &[2, 3, 8, 7]), 1e-5, "conv2d plain");
}

/// Naive pooling; `avg` with `cip` (count_include_pad) or real-element counts.
fn pool_ref(x: &Tensor, k: [usize; 2], s: [usize; 2], p: [usize; 2], out: &[usize], avg: Option<bool>) -> Vec<f64> {
    let mut y = Vec::new();
    for i in 0..out.iter().product() {
        let [nn, c, oy, ox] = unravel(i, out)[..] else { unreachable!() };
        let (mut acc, mut cnt) = (if avg.is_some() { 0.0 } else { f64::NEG_INFINITY }, 0.0);
        for ky in 0..k[0] {
            for kx in 0..k[1] {
                let iy = (oy * s[0] + ky) as i64 - p[0] as i64;
                let ix = (ox * s[1] + kx) as i64 - p[1] as i64;
                if iy >= 0 && ix >= 0 && (iy as usize) < x.shape[2] && (ix as usize) < x.shape[3] {
                    let v = x.at(&[nn, c, iy as usize, ix as usize]);
                    acc = if avg.is_some() { acc + v } else { acc.max(v) };
                    cnt += 1.0;
                }
            }
        }
        y.push(match avg {
            Some(true) => acc / (k[0] * k[1]) as f64,
            Some(false) => acc / cnt,
            None => acc,
        });
    }
    y
}

#[test]
fn pools_match_naive_pooling() {
    let x = random(&[1, 2, 7, 6], 8, -3.0, -1.0);
    let out = [1, 2, 4, 4];
    let kw = |extra: Option<bool>| {
        let mut v = vec![("kernel", ints(&[3, 2])), ("stride", ints(&[2, 2])), ("pad", ints(&[1, 1]))];
        if let Some(c) = extra {
            v.push(("count_include_pad", Expr::Bool(c, Default::default())));
        }
        v
    };
    let go = |f: &str, extra| {
        run_graph(
            vec![decl("x", &x.shape)],
            &["1", "2", "4", "4"],
            call_kw(f, vec![n("x")], kw(extra)),
            &[("x", x.clone())],
        )
    };
    // All inputs are negative, so a zero from the padding would win a max.
    assert_close(&go("maxpool2d", None), &pool_ref(&x, [3, 2], [2, 2], [1, 1], &out, None), 1e-6, "maxpool2d");
    assert_close(
        &go("avgpool2d", Some(true)),
        &pool_ref(&x, [3, 2], [2, 2], [1, 1], &out, Some(true)),
        1e-6,
        "avgpool2d cip",
    );
    assert_close(
        &go("avgpool2d", Some(false)),
        &pool_ref(&x, [3, 2], [2, 2], [1, 1], &out, Some(false)),
        1e-6,
        "avgpool2d",
    );
}

fn softmax_rows(x: &Tensor) -> (Vec<f64>, Vec<f64>) {
    let n = *x.shape.last().unwrap();
    let (mut p, mut l) = (Vec::new(), Vec::new());
    for row in x.data.chunks(n) {
        let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let z: f64 = row.iter().map(|v| (v - m).exp()).sum();
        p.extend(row.iter().map(|v| (v - m).exp() / z));
        l.extend(row.iter().map(|v| v - m - z.ln()));
    }
    (p, l)
}

#[test]
fn softmax_and_log_softmax_match_within_their_bounds() {
    let x = random(&[4, 1024], 9, -30.0, 30.0);
    let (p, l) = softmax_rows(&x);
    let y = run_graph(vec![decl("x", &x.shape)], &["4", "1024"], call("softmax", vec![n("x")]), &[("x", x.clone())]);
    for (k, (a, b)) in y.data.iter().zip(&p).enumerate() {
        let row = &x.data[k / 1024 * 1024..][..1024];
        let d = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max) - x.data[k];
        assert!((a - b).abs() <= b * (4.0 * d + 4.0) * U, "softmax {a} vs {b}");
    }
    let y = run_graph(
        vec![decl("x", &x.shape)],
        &["4", "1024"],
        call_kw("log_softmax", vec![n("x")], vec![("axis", int(-1))]),
        &[("x", x.clone())],
    );
    for (a, b) in y.data.iter().zip(&l) {
        assert!((a - b).abs() <= (2.0 * b.abs() + 2.0) * U, "log_softmax {a} vs {b}");
    }
}

#[test]
fn layernorm_matches_two_pass_reference() {
    let d = 1024;
    let ga = random(&[d], 11, 0.5, 1.5);
    let be = random(&[d], 12, -1.0, 1.0);
    // A large mean (one-pass variance would cancel) and a centred row.
    for (lo, hi) in [(100.0, 101.0), (-3.0, 3.0)] {
        let x = random(&[2, d], 10, lo, hi);
        let y = run_graph(
            vec![decl("x", &x.shape), decl("g", &[d]), decl("b", &[d])],
            &["2", "1024"],
            call_kw("layernorm", vec![n("x"), n("g"), n("b")], vec![("eps", float(1e-5))]),
            &[("x", x.clone()), ("g", ga.clone()), ("b", be.clone())],
        );
        for (r, row) in x.data.chunks(d).enumerate() {
            let mean = row.iter().sum::<f64>() / d as f64;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / d as f64;
            let sd = (var + 1e-5).sqrt();
            for (j, v) in row.iter().enumerate() {
                let want = (v - mean) / sd * ga.data[j] + be.data[j];
                let got = y.data[r * d + j];
                let bound = (2.0 * mean.abs() / sd + 8.0) * U * ga.data[j] + 2.0 * U * (want.abs() + 1.0);
                assert!((got - want).abs() <= bound, "layernorm {got} vs {want}");
            }
        }
    }
}

#[test]
fn attention_matches_naive_with_causal_and_mask() {
    for (b, h, m, nn, d) in [(1, 2, 3, 5, 4), (1, 1, 16, 128, 64)] {
        attention_case(b, h, m, nn, d);
    }
}

fn attention_case(b: usize, h: usize, m: usize, nn: usize, d: usize) {
    let q = random(&[b, h, m, d], 13, -1.0, 1.0);
    let k = random(&[b, h, nn, d], 14, -1.0, 1.0);
    let v = random(&[b, h, nn, d], 15, -1.0, 1.0);
    let mask = random(&[m, nn], 16, -2.0, 0.0);
    let kw = vec![("mask", n("mask")), ("causal", Expr::Bool(true, Default::default()))];
    let ys = dims(&[b, h, m, d]);
    let ys: Vec<&str> = ys.iter().map(|s| s.as_str()).collect();
    let y = run_graph(
        vec![decl("q", &q.shape), decl("k", &k.shape), decl("v", &v.shape), decl("mask", &mask.shape)],
        &ys,
        call_kw("attention", vec![n("q"), n("k"), n("v")], kw),
        &[("q", q.clone()), ("k", k.clone()), ("v", v.clone()), ("mask", mask.clone())],
    );
    let mut want = Vec::new();
    for hh in 0..h {
        for i in 0..m {
            let s: Vec<f64> = (0..nn)
                .map(|j| {
                    let dot: f64 = (0..d).map(|c| q.at(&[0, hh, i, c]) * k.at(&[0, hh, j, c])).sum();
                    if j <= i {
                        dot / (d as f64).sqrt() + mask.at(&[i, j])
                    } else {
                        f64::NEG_INFINITY
                    }
                })
                .collect();
            let mx = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = s.iter().map(|x| (x - mx).exp()).sum();
            for c in 0..d {
                want.push((0..nn).map(|j| (s[j] - mx).exp() / z * v.at(&[0, hh, j, c])).sum());
            }
        }
    }
    assert_close(&y, &want, 1e-5, "attention");
}

#[test]
fn reductions_comparisons_and_movement_compute_the_right_values() {
    let x = Tensor::new(&[2, 3], vec![1.0, f64::NAN, 3.0, -4.0, 5.0, 6.0]);
    let ones = Tensor::new(&[3], vec![1.0, 5.0, 3.0]);
    let cmp = |op: BinOp| {
        let e = call("cast", vec![bin(op, n("x"), n("o")), n("f32")]);
        run_graph(vec![decl("x", &[2, 3]), decl("o", &[3])], &["2", "3"], e, &[("x", x.clone()), ("o", ones.clone())])
            .data
    };
    assert_eq!(cmp(BinOp::Le), [1.0, 0.0, 1.0, 1.0, 1.0, 0.0]);
    assert_eq!(cmp(BinOp::Ge), [1.0, 0.0, 1.0, 0.0, 1.0, 1.0]);
    assert_eq!(cmp(BinOp::Gt), [0.0, 0.0, 0.0, 0.0, 0.0, 1.0]);
    assert_eq!(cmp(BinOp::Ne), [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]);
    let y = Tensor::new(&[2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let one = |e: Expr, ys: &[&str]| run_graph(vec![decl("x", &[2, 3])], ys, e, &[("x", y.clone())]).data;
    assert_eq!(one(call_kw("mean", vec![n("x")], vec![("axes", ints(&[1]))]), &["2"]), [2.0, 5.0]);
    assert_eq!(
        one(
            call_kw("max", vec![n("x")], vec![("axes", ints(&[0])), ("keepdim", Expr::Bool(true, Default::default()))]),
            &["1", "3"]
        ),
        [4.0, 5.0, 6.0]
    );
    assert_eq!(one(call("flip", vec![n("x"), ints(&[1])]), &["2", "3"]), [3.0, 2.0, 1.0, 6.0, 5.0, 4.0]);
    assert_eq!(
        one(call("slice", vec![n("x"), list(vec![ints(&[0, 2]), ints(&[0, 3, 2])])]), &["2", "2"]),
        [1.0, 3.0, 4.0, 6.0]
    );
    assert_eq!(one(call("transpose", vec![n("x"), int(0), int(1)]), &["3", "2"]), [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    assert_eq!(one(call("reshape", vec![n("x"), ints(&[3, -1])]), &["3", "2"]), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(one(call("abs", vec![bin(BinOp::Sub, int(3), n("x"))]), &["2", "3"]), [2.0, 1.0, 0.0, 1.0, 2.0, 3.0]);
}

// --- the graph-layer ops of `004` §4 ---------------------------------------

/// `pow(a, b)` of two `[n]` inputs (`b` a constant when `exponent` is
/// given), evaluated in f32.
fn pow_f32(a: &[f64], b: &[f64], exponent: Option<f64>) -> Vec<f64> {
    let mut g = Graph::new("t");
    let n = Dim::int(a.len() as i64);
    let x = g.input("a", F32, std::slice::from_ref(&n)).unwrap();
    let e = match exponent {
        Some(v) => g.constant(v, F32).unwrap(),
        None => g.input("b", F32, &[n]).unwrap(),
    };
    let y = elementwise::pow(&mut g, x, e).unwrap();
    g.outputs.push(Output { name: "y".into(), node: y });
    let mut inputs = vec![("a", Tensor::new(&[a.len()], a.to_vec()))];
    if exponent.is_none() {
        inputs.push(("b", Tensor::new(&[b.len()], b.to_vec())));
    }
    eval(&g, &[], &inputs, true).remove(0).data
}

/// The bounds of `elementwise::pow`'s doc: relative `(1.5·|b·log2 a| + 4)·2^-24`
/// for the general form on `a` in [1e-3, 1e3], `b` in [-8, 8], and
/// `(|n| + 1)·2^-24` for constant integer exponents.
#[test]
fn pow_meets_its_stated_error_bounds() {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for i in 0..=200 {
        for j in 0..=64 {
            a.push((10f64.powf(-3.0 + 6.0 * i as f64 / 200.0) as f32) as f64);
            b.push((-8.0 + 16.0 * j as f64 / 64.0 + 0.013) as f32 as f64);
        }
    }
    for ((x, e), y) in a.iter().zip(&b).zip(pow_f32(&a, &b, None)) {
        let r = x.powf(*e);
        let bound = (1.5 * (e * x.log2()).abs() + 4.0) * U;
        assert!(((y - r) / r).abs() <= bound, "pow({x}, {e}) = {y}, want {r}");
    }
    let xs: Vec<f64> = grid(-3.0, 3.0, 600).into_iter().map(|x| x as f32 as f64).filter(|x| *x != 0.0).collect();
    for n in [-7i32, -2, -1, 1, 2, 3, 5, 8, 13, 64] {
        let ys = pow_f32(&xs, &[], Some(n as f64));
        for (x, y) in xs.iter().zip(ys) {
            let r = x.powi(n);
            let bound = (n.unsigned_abs() as f64 + 1.0) * U;
            let normal = (f32::MIN_POSITIVE as f64..=f32::MAX as f64).contains(&r.abs());
            assert!(!normal || ((y - r) / r).abs() <= bound, "pow({x}, {n}) = {y}, want {r}");
        }
    }
}

/// `pow`'s special cases: C11 F.10.4.4's signs and NaNs and its exact 1s.
#[test]
fn pow_special_cases_are_those_of_c() {
    let nan = f64::NAN;
    let cases = [
        (-2.0, 3.0, -8.0),
        (-2.0, 2.0, 4.0),
        (-2.0, -1.0, -0.5),
        (-2.0, 0.5, nan),
        (0.0, 2.5, 0.0),
        (0.0, -1.5, f64::INFINITY),
        (0.0, 0.0, 1.0),
        (nan, 0.0, 1.0),
        (1.0, nan, 1.0),
        (nan, 1.5, nan),
        (-3.0, 33554432.0, f64::INFINITY),
        (4.0, 0.5, 2.0),
    ];
    let a: Vec<f64> = cases.iter().map(|c| c.0).collect();
    let b: Vec<f64> = cases.iter().map(|c| c.1).collect();
    for (c, y) in cases.iter().zip(pow_f32(&a, &b, None)) {
        let ok = (y.is_nan() && c.2.is_nan()) || y == c.2 || ((y - c.2) / c.2).abs() < 1e-6;
        assert!(ok, "pow({}, {}) = {y}, want {}", c.0, c.1, c.2);
    }
    // A constant 0 exponent is 1 everywhere, NaN included.
    assert_eq!(pow_f32(&[nan, -3.0, 0.0], &[], Some(0.0)), [1.0, 1.0, 1.0]);
}

/// `sign` and `clamp` are exact: -1/0/1 (NaN stays NaN), and the clamped
/// value (NaN stays NaN, `min > max` gives `max`).
#[test]
fn sign_and_clamp_are_exact() {
    let xs = [-2.5, -0.0, 0.0, 1e-30, 3.0, f64::NAN, f64::NEG_INFINITY];
    let mut g = Graph::new("t");
    let x = g.input("x", F32, &[Dim::int(xs.len() as i64)]).unwrap();
    let s = elementwise::sign(&mut g, x).unwrap();
    let c = elementwise::clamp(&mut g, x, Some(-1.0), Some(0.5)).unwrap();
    let d = elementwise::clamp(&mut g, x, Some(1.0), Some(-1.0)).unwrap();
    for (name, node) in [("s", s), ("c", c), ("d", d)] {
        g.outputs.push(Output { name: name.into(), node });
    }
    let out = eval(&g, &[], &[("x", Tensor::new(&[xs.len()], xs.to_vec()))], true);
    let same = |a: &[f64], b: &[f64]| a.iter().zip(b).all(|(p, q)| p == q || (p.is_nan() && q.is_nan()));
    let nan = f64::NAN;
    assert!(same(&out[0].data, &[-1.0, 0.0, 0.0, 1.0, 1.0, nan, -1.0]), "{:?}", out[0].data);
    assert!(same(&out[1].data, &[-1.0, -0.0, 0.0, f64::from(1e-30_f32), 0.5, nan, -1.0]), "{:?}", out[1].data);
    assert!(same(&out[2].data, &[-1.0; 5]) && out[2].data[5].is_nan() && out[2].data[6] == -1.0, "{:?}", out[2].data);
}

/// `batch_norm` and `instance_norm` against naive f64 loops over `[2, 3, 4,
/// 5]`, evaluated in f32: within 1e-5 relative to max(1, |reference|).
#[test]
fn channel_norms_match_naive_loops() {
    let (n, c, h, w) = (2, 3, 4, 5);
    let x = random(&[n, c, h, w], 11, -3.0, 3.0);
    let p: Vec<Tensor> = (0..4).map(|k| random(&[c], 12 + k, 0.1, 2.0)).collect();
    let mut g = Graph::new("t");
    let shape = |s: &[usize]| s.iter().map(|&d| Dim::int(d as i64)).collect::<Vec<_>>();
    let xi = g.input("x", F32, &shape(&[n, c, h, w])).unwrap();
    let names = ["scale", "bias", "mean", "var"];
    let ps: Vec<_> = names.iter().map(|m| g.input(m, F32, &shape(&[c])).unwrap()).collect();
    let bn = crate::frontend::ops::nn::batch_norm(&mut g, xi, [ps[0], ps[1], ps[2], ps[3]], 1e-3).unwrap();
    let inorm = crate::frontend::ops::nn::instance_norm(&mut g, xi, ps[0], ps[1], 1e-5).unwrap();
    g.outputs.push(Output { name: "bn".into(), node: bn });
    g.outputs.push(Output { name: "in".into(), node: inorm });
    let mut inputs = vec![("x", x.clone())];
    inputs.extend(names.iter().copied().zip(p.iter().cloned()));
    let out = eval(&g, &[], &inputs, true);
    let plane = h * w;
    for i in 0..n * c * plane {
        let ch = i / plane % c;
        let xv = x.data[i];
        let want = (xv - p[2].data[ch]) / (p[3].data[ch] + 1e-3).sqrt() * p[0].data[ch] + p[1].data[ch];
        assert!((out[0].data[i] - want).abs() <= 1e-5 * want.abs().max(1.0), "batch_norm[{i}]");
        let base = i / plane * plane;
        let vals = &x.data[base..base + plane];
        let mean = vals.iter().sum::<f64>() / plane as f64;
        let var = vals.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / plane as f64;
        let want = (xv - mean) / (var + 1e-5).sqrt() * p[0].data[ch] + p[1].data[ch];
        assert!((out[1].data[i] - want).abs() <= 1e-5 * want.abs().max(1.0), "instance_norm[{i}]");
    }
}

/// `tile`, `repeat_interleave` and list `squeeze`/`unsqueeze` read the
/// elements NumPy's `tile`, `repeat` and `expand_dims`/`squeeze` read.
#[test]
fn tile_and_repeat_read_numpys_elements() {
    let src = "graph t(x: f32[2, 3]) -> (a: f32[2, 4, 3], b: f32[2, 9], c: f32[1, 2, 1, 3, 1], d: f32[2, 3]) {
        a = tile(x, [2, 2, 1])
        b = repeat_interleave(tile(x, [1, 3]), 1, 1) + repeat_interleave(x, 3, 1) * 0
        c = unsqueeze(x, [0, 2, -1])
        d = squeeze(c, [0, 2, 4])
        return a, b, c, d
    }";
    let g = crate::pipeline::load(src, crate::pipeline::Format::Dsl, None).unwrap().graph;
    let x: Vec<f64> = (0..6).map(|v| v as f64).collect();
    let out = eval(&g, &[], &[("x", Tensor::new(&[2, 3], x.clone()))], true);
    // np.tile(x, (2, 2, 1)): [2, 4, 3], a[i, j, k] = x[j % 2, k].
    let want_a: Vec<f64> = (0..24).map(|f| x[(f / 3 % 4 % 2) * 3 + f % 3]).collect();
    assert_eq!(out[0].data, want_a);
    // np.tile(x, (1, 3)): b[i, j] = x[i, j % 3].
    let want_b: Vec<f64> = (0..18).map(|f| x[f / 9 * 3 + f % 9 % 3]).collect();
    assert_eq!(out[1].data, want_b);
    assert_eq!((out[2].shape.as_slice(), &out[2].data), (&[1, 2, 1, 3, 1][..], &x));
    assert_eq!(out[3].data, x);
    // np.repeat(x, 2, axis=0): [4, 3], r[i, k] = x[i / 2, k].
    let src = "graph r(x: f32[2, 3]) -> (r: f32[4, 3]) {\n    r = repeat_interleave(x, 2, 0)\n    return r\n}";
    let g = crate::pipeline::load(src, crate::pipeline::Format::Dsl, None).unwrap().graph;
    let out = eval(&g, &[], &[("x", Tensor::new(&[2, 3], x.clone()))], true);
    let want: Vec<f64> = (0..12).map(|f| x[f / 3 / 2 * 3 + f % 3]).collect();
    assert_eq!(out[0].data, want);
}

/// `concat` and `split` read NumPy's `concatenate` and `split` elements;
/// `concat` keeps a negative zero (it selects, never adds).
#[test]
fn concat_and_split_read_numpys_elements() {
    let src = "graph t(x: f32[2, 3], y: f32[2, 1]) -> (c: f32[2, 7], a: f32[2, 1], b: f32[2, 2], r: f32[4, 3]) {
        c = concat([x, y, x], axis=-1)
        (a, b) = split(x, [1, 2], axis=1)
        r = concat([x, x], axis=0)
        return c, a, b, r
    }";
    let g = crate::pipeline::load(src, crate::pipeline::Format::Dsl, None).unwrap().graph;
    let x: Vec<f64> = vec![0.0, 1.0, 2.0, 3.0, -0.0, 5.0];
    let y = vec![6.0, 7.0];
    let out = eval(&g, &[], &[("x", Tensor::new(&[2, 3], x.clone())), ("y", Tensor::new(&[2, 1], y.clone()))], true);
    let want_c = [0.0, 1.0, 2.0, 6.0, 0.0, 1.0, 2.0, 3.0, -0.0, 5.0, 7.0, 3.0, -0.0, 5.0];
    assert_eq!(out[0].data, want_c);
    assert!(out[0].data[8].is_sign_negative() && out[0].data[12].is_sign_negative());
    assert_eq!(out[1].data, [0.0, 3.0]);
    assert_eq!(out[2].data, [1.0, 2.0, -0.0, 5.0]);
    assert_eq!(out[3].data, [x.clone(), x].concat());
}

/// A sliding-window case in `n` spatial dimensions for the N-d references.
struct Nd {
    stride: Vec<usize>,
    /// `(before, after)` per spatial axis.
    pad: Vec<(usize, usize)>,
    dilation: Vec<usize>,
}

/// The input index of window point `q` of output point `o` along each
/// spatial axis, or `None` in the padding.
fn tap(nd: &Nd, o: &[usize], q: &[usize], size: &[usize]) -> Option<Vec<usize>> {
    (0..o.len())
        .map(|k| {
            let i = (o[k] * nd.stride[k] + q[k] * nd.dilation[k]) as i64 - nd.pad[k].0 as i64;
            (i >= 0 && (i as usize) < size[k]).then_some(i as usize)
        })
        .collect()
}

/// Naive N-d convolution, x `[N, Cin, *S]`, w `[Cout, Cin/G, *K]`.
fn conv_nd_ref(x: &Tensor, w: &Tensor, bias: &[f64], nd: &Nd, groups: usize, out: &[usize]) -> Vec<f64> {
    let (cin_g, kernel) = (w.shape[1], &w.shape[2..]);
    let rcout = w.shape[0] / groups;
    let taps: usize = kernel.iter().product();
    (0..out.iter().product())
        .map(|i| {
            let ix = unravel(i, out);
            let (b, o) = (ix[0], ix[1]);
            let mut acc = bias[o];
            for c in 0..cin_g {
                for t in 0..taps {
                    let q = unravel(t, kernel);
                    if let Some(at) = tap(nd, &ix[2..], &q, &x.shape[2..]) {
                        let xi: Vec<usize> = [b, o / rcout * cin_g + c].into_iter().chain(at).collect();
                        let wi: Vec<usize> = [o, c].into_iter().chain(q).collect();
                        acc += x.at(&xi) * w.at(&wi);
                    }
                }
            }
            acc
        })
        .collect()
}

/// `(name, stride, pad, dilation, groups)` as DSL keyword text.
fn window_kw(nd: &Nd) -> String {
    let list = |v: &[usize]| format!("[{}]", v.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", "));
    let pads: Vec<usize> = nd.pad.iter().flat_map(|&(a, b)| [a, b]).collect();
    format!("stride={}, pad={}, dilation={}", list(&nd.stride), list(&pads), list(&nd.dilation))
}

fn shape_text(s: &[usize]) -> String {
    format!("[{}]", s.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", "))
}

/// `conv1d` and `conv3d` (strides, asymmetric padding, dilation, groups)
/// against naive loops; `conv2d` goes through the same N-d lowering.
#[test]
fn conv_nd_matches_naive_convolution() {
    let cases: [(Vec<usize>, Vec<usize>, Nd, usize); 3] = [
        (vec![2, 4, 11], vec![6, 2, 3], Nd { stride: vec![2], pad: vec![(2, 1)], dilation: vec![2] }, 2),
        (
            vec![1, 3, 9, 8],
            vec![4, 3, 3, 2],
            Nd { stride: vec![1, 2], pad: vec![(1, 0), (2, 1)], dilation: vec![1, 2] },
            1,
        ),
        (
            vec![2, 2, 5, 6, 4],
            vec![4, 1, 2, 3, 2],
            Nd { stride: vec![1, 2, 1], pad: vec![(1, 1), (0, 1), (1, 0)], dilation: vec![2, 1, 1] },
            2,
        ),
    ];
    for (k, (xs, ws, nd, groups)) in cases.iter().enumerate() {
        let n = xs.len() - 2;
        let x = random(xs, 40 + k as u64, -1.0, 1.0);
        let w = random(ws, 50 + k as u64, -1.0, 1.0);
        let b = random(&ws[..1], 60 + k as u64, -1.0, 1.0);
        let mut out = vec![xs[0], ws[0]];
        for a in 0..n {
            let span = xs[2 + a] + nd.pad[a].0 + nd.pad[a].1 - nd.dilation[a] * (ws[2 + a] - 1) - 1;
            out.push(span / nd.stride[a] + 1);
        }
        let src = format!(
            "graph t(x: f32{}, w: f32{}, b: f32{}) -> (y: f32{}) {{\n    y = conv{n}d(x, w, bias=b, {}, groups={groups})\n    return y\n}}",
            shape_text(xs),
            shape_text(ws),
            shape_text(&ws[..1]),
            shape_text(&out),
            window_kw(nd)
        );
        let g = crate::pipeline::load(&src, crate::pipeline::Format::Dsl, None)
            .unwrap_or_else(|e| panic!("{e}\n{src}"))
            .graph;
        let y = eval(&g, &[], &[("x", x.clone()), ("w", w.clone()), ("b", b.clone())], true).remove(0);
        assert_close(&y, &conv_nd_ref(&x, &w, &b.data, nd, *groups, &out), 1e-5, &format!("conv{n}d"));
    }
}

/// Naive transposed convolution by its definition (a scatter): input point
/// `i` adds `x·w` to output point `i·s − before + q·d`; x `[N, Cin, *S]`, w
/// `[Cin, Cout/G, *K]`.
fn conv_transpose_ref(x: &Tensor, w: &Tensor, bias: &[f64], nd: &Nd, groups: usize, out: &[usize]) -> Vec<f64> {
    let (cin_g, rcout, kernel) = (x.shape[1] / groups, w.shape[1], &w.shape[2..]);
    let mut y: Vec<f64> = (0..out.iter().product()).map(|i| bias[unravel(i, out)[1]]).collect();
    for i in 0..x.data.len() {
        let ix = unravel(i, &x.shape);
        let (b, c) = (ix[0], ix[1]);
        let gi = c / cin_g;
        for oc in 0..rcout {
            for t in 0..kernel.iter().product() {
                let q = unravel(t, kernel);
                let at: Option<Vec<usize>> = (0..kernel.len())
                    .map(|k| {
                        let o = (ix[2 + k] * nd.stride[k] + q[k] * nd.dilation[k]) as i64 - nd.pad[k].0 as i64;
                        (o >= 0 && (o as usize) < out[2 + k]).then_some(o as usize)
                    })
                    .collect();
                if let Some(at) = at {
                    let yi: Vec<usize> = [b, gi * rcout + oc].into_iter().chain(at).collect();
                    let flat = yi.iter().zip(out).fold(0, |acc, (v, d)| acc * d + v);
                    let wi: Vec<usize> = [c, oc].into_iter().chain(q).collect();
                    y[flat] += x.data[i] * w.at(&wi);
                }
            }
        }
    }
    y
}

/// `conv_transpose{1,2,3}d` against the scatter definition: strides,
/// asymmetric padding (larger than the kernel's reach on one side, a
/// `SHRINK`), output padding, dilation and groups.
#[test]
fn conv_transpose_matches_the_scatter_definition() {
    // (x shape, w shape, window, output padding, groups)
    type Case = (Vec<usize>, Vec<usize>, Nd, Vec<usize>, usize);
    let cases: [Case; 4] = [
        (vec![2, 4, 5], vec![4, 3, 3], Nd { stride: vec![2], pad: vec![(1, 0)], dilation: vec![1] }, vec![1], 2),
        (
            vec![1, 3, 4, 5],
            vec![3, 2, 3, 2],
            Nd { stride: vec![3, 2], pad: vec![(0, 1), (1, 1)], dilation: vec![1, 2] },
            vec![2, 1],
            1,
        ),
        (
            vec![1, 2, 3, 3],
            vec![2, 2, 2, 2],
            Nd { stride: vec![1, 1], pad: vec![(0, 0), (0, 0)], dilation: vec![1, 1] },
            vec![0, 0],
            1,
        ),
        (
            vec![1, 2, 3, 2, 3],
            vec![2, 1, 2, 3, 2],
            Nd { stride: vec![2, 1, 2], pad: vec![(1, 2), (1, 0), (0, 0)], dilation: vec![1, 1, 2] },
            vec![1, 0, 0],
            2,
        ),
    ];
    for (k, (xs, ws, nd, op, groups)) in cases.iter().enumerate() {
        let n = xs.len() - 2;
        let x = random(xs, 70 + k as u64, -1.0, 1.0);
        let w = random(ws, 80 + k as u64, -1.0, 1.0);
        let cout = ws[1] * groups;
        let b = random(&[cout], 90 + k as u64, -1.0, 1.0);
        let mut out = vec![xs[0], cout];
        for a in 0..n {
            out.push(
                (xs[2 + a] - 1) * nd.stride[a] + nd.dilation[a] * (ws[2 + a] - 1) + op[a] + 1
                    - nd.pad[a].0
                    - nd.pad[a].1,
            );
        }
        let src = format!(
            "graph t(x: f32{}, w: f32{}, b: f32[{cout}]) -> (y: f32{}) {{\n    y = conv_transpose{n}d(x, w, bias=b, {}, output_padding={}, groups={groups})\n    return y\n}}",
            shape_text(xs),
            shape_text(ws),
            shape_text(&out),
            window_kw(nd),
            shape_text(op)
        );
        let g = crate::pipeline::load(&src, crate::pipeline::Format::Dsl, None)
            .unwrap_or_else(|e| panic!("{e}\n{src}"))
            .graph;
        let y = eval(&g, &[], &[("x", x.clone()), ("w", w.clone()), ("b", b.clone())], true).remove(0);
        assert_close(
            &y,
            &conv_transpose_ref(&x, &w, &b.data, nd, *groups, &out),
            1e-5,
            &format!("conv_transpose{n}d #{k}"),
        );
    }
}

/// `maxpool1d`/`3d` and `avgpool1d`/`3d` (both counts) against naive loops.
#[test]
fn pools_in_1d_and_3d_match_naive_pooling() {
    let cases: [(Vec<usize>, Vec<usize>, Nd); 2] = [
        (vec![2, 3, 11], vec![3], Nd { stride: vec![2], pad: vec![(1, 1)], dilation: vec![1] }),
        (
            vec![1, 2, 5, 6, 4],
            vec![2, 3, 2],
            Nd { stride: vec![2, 2, 1], pad: vec![(1, 0), (1, 1), (0, 1)], dilation: vec![1, 1, 1] },
        ),
    ];
    for (k, (xs, kernel, nd)) in cases.iter().enumerate() {
        let n = kernel.len();
        // All negative: a zero from the padding would win a max.
        let x = random(xs, 100 + k as u64, -3.0, -1.0);
        let mut out = xs[..2].to_vec();
        for a in 0..n {
            out.push((xs[2 + a] + nd.pad[a].0 + nd.pad[a].1 - kernel[a]) / nd.stride[a] + 1);
        }
        let taps: usize = kernel.iter().product();
        let pooled = |avg: Option<bool>| -> Vec<f64> {
            (0..out.iter().product())
                .map(|i| {
                    let ix = unravel(i, &out);
                    let (mut acc, mut cnt) = (if avg.is_some() { 0.0 } else { f64::NEG_INFINITY }, 0.0);
                    for t in 0..taps {
                        if let Some(at) = tap(nd, &ix[2..], &unravel(t, kernel), &xs[2..]) {
                            let v = x.at(&[ix[0], ix[1]].into_iter().chain(at).collect::<Vec<_>>());
                            acc = if avg.is_some() { acc + v } else { f64::max(acc, v) };
                            cnt += 1.0;
                        }
                    }
                    match avg {
                        Some(true) => acc / taps as f64,
                        Some(false) => acc / cnt,
                        None => acc,
                    }
                })
                .collect()
        };
        let pads: Vec<usize> = nd.pad.iter().flat_map(|&(a, b)| [a, b]).collect();
        let kw = format!("kernel={}, stride={}, pad={}", shape_text(kernel), shape_text(&nd.stride), shape_text(&pads));
        let src = format!(
            "graph t(x: f32{xsh}) -> (m: f32{o}, a: f32{o}, c: f32{o}) {{\n    m = maxpool{n}d(x, {kw})\n    a = avgpool{n}d(x, {kw})\n    c = avgpool{n}d(x, {kw}, count_include_pad=true)\n    return m, a, c\n}}",
            xsh = shape_text(xs),
            o = shape_text(&out),
        );
        let g = crate::pipeline::load(&src, crate::pipeline::Format::Dsl, None)
            .unwrap_or_else(|e| panic!("{e}\n{src}"))
            .graph;
        let y = eval(&g, &[], &[("x", x.clone())], true);
        assert_close(&y[0], &pooled(None), 1e-6, &format!("maxpool{n}d"));
        assert_close(&y[1], &pooled(Some(false)), 1e-6, &format!("avgpool{n}d"));
        assert_close(&y[2], &pooled(Some(true)), 1e-6, &format!("avgpool{n}d count_include_pad"));
    }
}

/// `pad(.., mode=reflect|edge)` reads NumPy's `pad` elements (modes
/// `reflect` and `edge`), corners included; `chunk` reads `split`'s.
#[test]
fn border_pads_and_chunk_read_numpys_elements() {
    let src = "graph t(x: f32[3, 4]) -> (r: f32[7, 6], e: f32[4, 9], a: f32[3, 2], b: f32[3, 2]) {
        r = pad(x, [[2, 2], [1, 1]], mode=reflect)
        e = pad(x, [[1, 0], [3, 2]], mode=edge)
        (a, b) = chunk(x, 2, axis=-1)
        return r, e, a, b
    }";
    let g = crate::pipeline::load(src, crate::pipeline::Format::Dsl, None).unwrap().graph;
    let x: Vec<f64> = (0..12).map(|v| v as f64).collect();
    let out = eval(&g, &[], &[("x", Tensor::new(&[3, 4], x.clone()))], true);
    // np.pad reflect: index i − lo mirrored into [0, L) without the edge.
    let reflect = |i: i64, l: i64| {
        let i = i.abs();
        if i >= l {
            2 * (l - 1) - i
        } else {
            i
        }
    };
    let want_r: Vec<f64> = (0..42).map(|f| x[(reflect(f / 6 - 2, 3) * 4 + reflect(f % 6 - 1, 4)) as usize]).collect();
    assert_eq!(out[0].data, want_r);
    let want_e: Vec<f64> =
        (0..36).map(|f| x[((f / 9 - 1).clamp(0, 2) * 4 + (f % 9 - 3).clamp(0, 3)) as usize]).collect();
    assert_eq!(out[1].data, want_e);
    let half = |off: usize| -> Vec<f64> { (0..6).map(|f| x[f / 2 * 4 + off + f % 2]).collect() };
    assert_eq!((out[2].data.clone(), out[3].data.clone()), (half(0), half(2)));
}

/// `im2col` reads PyTorch's `F.unfold` elements and `col2im` adds them
/// back as `F.fold` does (overlaps summed), in 1-D, 2-D and 3-D; `unfold`
/// reads `Tensor.unfold`'s.
#[test]
fn im2col_col2im_and_unfold_match_naive_loops() {
    let cases: [(Vec<usize>, Vec<usize>, Nd); 3] = [
        (vec![2, 3, 9], vec![3], Nd { stride: vec![2], pad: vec![(1, 2)], dilation: vec![1] }),
        (vec![1, 2, 7, 6], vec![3, 2], Nd { stride: vec![2, 1], pad: vec![(1, 1), (0, 1)], dilation: vec![1, 2] }),
        (
            vec![1, 2, 4, 5, 3],
            vec![2, 3, 2],
            Nd { stride: vec![1, 2, 1], pad: vec![(0, 1), (1, 1), (1, 0)], dilation: vec![2, 1, 1] },
        ),
    ];
    for (k, (xs, kernel, nd)) in cases.iter().enumerate() {
        let n = kernel.len();
        let x = random(xs, 120 + k as u64, -1.0, 1.0);
        let outs: Vec<usize> = (0..n)
            .map(|a| (xs[2 + a] + nd.pad[a].0 + nd.pad[a].1 - nd.dilation[a] * (kernel[a] - 1) - 1) / nd.stride[a] + 1)
            .collect();
        let (taps, positions): (usize, usize) = (kernel.iter().product(), outs.iter().product());
        let rows = xs[1] * taps;
        let cols = random(&[xs[0], rows, positions], 130 + k as u64, -1.0, 1.0);
        let src = format!(
            "graph t(x: f32{}, c: f32[{}, {rows}, {positions}]) -> (u: f32[{}, {rows}, {positions}], f: f32{}) {{\n    \
             u = im2col(x, kernel={kw}, {win})\n    f = col2im(c, output={sp}, kernel={kw}, {win})\n    return u, f\n}}",
            shape_text(xs),
            xs[0],
            xs[0],
            shape_text(xs),
            kw = shape_text(kernel),
            win = window_kw(nd),
            sp = shape_text(&xs[2..]),
        );
        let g = crate::pipeline::load(&src, crate::pipeline::Format::Dsl, None)
            .unwrap_or_else(|e| panic!("{e}\n{src}"))
            .graph;
        let y = eval(&g, &[], &[("x", x.clone()), ("c", cols.clone())], true);
        // F.unfold: row (c, q) in row-major order, column o in row-major order.
        let mut want_u = vec![0.0; xs[0] * rows * positions];
        let mut want_f = vec![0.0; x.data.len()];
        for b in 0..xs[0] {
            for row in 0..rows {
                let (c, q) = (row / taps, unravel(row % taps, kernel));
                for col in 0..positions {
                    let o = unravel(col, &outs);
                    if let Some(at) = tap(nd, &o, &q, &xs[2..]) {
                        let xi: Vec<usize> = [b, c].into_iter().chain(at).collect();
                        let flat = xi.iter().zip(xs.iter()).fold(0, |acc, (v, d)| acc * d + v);
                        want_u[(b * rows + row) * positions + col] = x.data[flat];
                        want_f[flat] += cols.data[(b * rows + row) * positions + col];
                    }
                }
            }
        }
        assert_close(&y[0], &want_u, 0.0, &format!("im2col {n}-d"));
        assert_close(&y[1], &want_f, 1e-6, &format!("col2im {n}-d"));
    }
    let src = "graph t(x: f32[2, 7]) -> (y: f32[2, 3, 3]) {\n    y = unfold(x, 1, 3, 2)\n    return y\n}";
    let g = crate::pipeline::load(src, crate::pipeline::Format::Dsl, None).unwrap().graph;
    let x: Vec<f64> = (0..14).map(|v| v as f64).collect();
    let out = eval(&g, &[], &[("x", Tensor::new(&[2, 7], x.clone()))], true);
    let want: Vec<f64> = (0..18).map(|f| x[f / 9 * 7 + f / 3 % 3 * 2 + f % 3]).collect();
    assert_eq!(out[0].data, want);
}

/// `gather` reads `torch.gather`'s elements and `take` NumPy's `take`
/// (embedding lookups included); a negative index counts from the end and
/// an index out of range reads the nearest end (the documented clamp).
#[test]
fn gather_and_take_read_torchs_and_numpys_elements() {
    let src = "graph t(x: f32[3, 4], i: i32[3, 2], ids: i32[2, 3], k: i32[2]) -> (g: f32[3, 2], e: f32[2, 3, 4], c: f32[3, 2]) {
        g = gather(x, 1, i)
        e = take(x, ids, 0)
        c = take(x, k, -1)
        return g, e, c
    }";
    let g = crate::pipeline::load(src, crate::pipeline::Format::Dsl, None).unwrap().graph;
    let x: Vec<f64> = (0..12).map(|v| v as f64).collect();
    let i = vec![0.0, 3.0, -1.0, 2.0, 9.0, -9.0];
    let ids = vec![2.0, 0.0, 1.0, 1.0, -3.0, 7.0];
    let k = vec![3.0, -4.0];
    let out = eval(
        &g,
        &[],
        &[
            ("x", Tensor::new(&[3, 4], x.clone())),
            ("i", Tensor::new(&[3, 2], i)),
            ("ids", Tensor::new(&[2, 3], ids)),
            ("k", Tensor::new(&[2], k)),
        ],
        true,
    );
    // torch.gather(x, 1, i) with i = [[0, 3], [-1 → 3, 2], [9 → 3, -9 → 0]].
    assert_eq!(out[0].data, [0.0, 3.0, 7.0, 6.0, 11.0, 8.0]);
    // np.take(x, ids, 0): rows [2, 0, 1, 1, -3 → 0, 7 → 2].
    let rows = [2, 0, 1, 1, 0, 2];
    let want: Vec<f64> = rows.iter().flat_map(|r| x[r * 4..r * 4 + 4].to_vec()).collect();
    assert_eq!(out[1].data, want);
    // np.take(x, [3, -4], -1): columns 3 and 0 of every row.
    assert_eq!(out[2].data, [3.0, 0.0, 7.0, 4.0, 11.0, 8.0]);
}

/// The cumulative ops read NumPy's and PyTorch's values (`np.cumsum`,
/// `np.cumprod`, `np.maximum.accumulate`, `np.minimum.accumulate`), and
/// `exclusive`/`reverse` ONNX `CumSum`'s: the identity first, the scan
/// from the end; `prod` is `np.prod`.
#[test]
fn cumulative_ops_read_numpys_values() {
    let src = "graph t(x: f32[2, 4], b: bool[4]) -> (s: f32[2, 4], p: f32[2, 4], mx: f32[2, 4], mn: f32[2, 4], e: f32[2, 4], r: f32[2, 4], er: f32[2, 4], c: i32[4], q: f32[2]) {
        s = cumsum(x, 1)
        p = cumprod(x, 0)
        mx = cummax(x, -1)
        mn = cummin(x, 1)
        e = cumsum(x, 1, exclusive=true)
        r = cumsum(x, 1, reverse=true)
        er = cummax(x, 1, exclusive=true, reverse=true)
        c = cumsum(b, 0)
        q = prod(x, axes=[1])
        return s, p, mx, mn, e, r, er, c, q
    }";
    let g = crate::pipeline::load(src, crate::pipeline::Format::Dsl, None).unwrap().graph;
    let x = vec![1.0, -2.0, 3.0, 0.5, 2.0, 4.0, -1.0, 6.0];
    let b = vec![1.0, 0.0, 1.0, 1.0];
    let out = eval(&g, &[], &[("x", Tensor::new(&[2, 4], x)), ("b", Tensor::new(&[4], b))], true);
    let inf = f64::INFINITY;
    assert_eq!(out[0].data, [1.0, -1.0, 2.0, 2.5, 2.0, 6.0, 5.0, 11.0]);
    assert_eq!(out[1].data, [1.0, -2.0, 3.0, 0.5, 2.0, -8.0, -3.0, 3.0]);
    assert_eq!(out[2].data, [1.0, 1.0, 3.0, 3.0, 2.0, 4.0, 4.0, 6.0]);
    assert_eq!(out[3].data, [1.0, -2.0, -2.0, -2.0, 2.0, 2.0, -1.0, -1.0]);
    assert_eq!(out[4].data, [0.0, 1.0, -1.0, 2.0, 0.0, 2.0, 6.0, 5.0]);
    assert_eq!(out[5].data, [2.5, 1.5, 3.5, 0.5, 11.0, 9.0, 5.0, 6.0]);
    assert_eq!(out[6].data, [3.0, 3.0, 0.5, -inf, 6.0, 6.0, 6.0, -inf]);
    assert_eq!(out[7].data, [1.0, 1.0, 2.0, 3.0]);
    assert_eq!(out[8].data, [-3.0, -48.0]);
}

//! Numeric checks: the decompositions against f64 references, evaluated by
//! `eval.rs` exactly (approximation error alone) and with every float node
//! rounded to f32 (the error a correct backend may show).

use super::eval::{eval, random, Tensor};
use crate::frontend::ir::UnaryFn;
use crate::frontend::ops::elementwise;
use crate::tiny::{Graph, Output};
use crate::sym::Dim;
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
        UnaryFn::GeluTanh => 0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh()),
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
    const U: f64 = 1.0 / 16_777_216.0; // 2^-24
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

//! The SM80 template run on the emulator, against the reference
//! interpreter and an f64 reference; the verifier and the emulator on
//! deliberately broken schedules.
//!
//! Inputs are multiples of 1/8 in [-1, 1] (bias too): every product and
//! every partial sum up to K = 256 is exact in f32, so the kernel's result
//! does not depend on summation order and must equal the interpreter's
//! bit for bit after the same roundings; the tolerance (rtol = atol =
//! 1e-3) is the brief's.

use std::collections::BTreeMap;

use super::emulate::{self, Arg};
use super::ir::*;
use super::sm80::{self, BLayout, Gemm, GemmParams};
use super::verify;
use crate::plan::{self, space, Plan, Spanned};
use crate::DType;

/// `n` multiples of 1/8 in [-1, 1], deterministic in `seed`.
fn values(seed: u64, n: usize) -> Vec<f64> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 20) % 17) as f64 / 8.0 - 1.0
        })
        .collect()
}

fn gemm(ab: DType, out: DType, b_layout: BLayout, n: i64, k: i64) -> Gemm {
    let align = |x: i64| [8u32, 4, 2, 1].into_iter().find(|&a| x % a as i64 == 0).unwrap_or(1);
    let ldb = if b_layout == BLayout::KN { n } else { k };
    Gemm { ab, out, b_layout, round_sum: true, align_a: align(k), align_b: align(ldb), align_c: align(n) }
}

/// Inputs of one problem: A `[M,K]`, B as stored, bias `[N]`, residual `[M,N]`.
struct Case {
    m: i64,
    n: i64,
    k: i64,
    a: Vec<f64>,
    b: Vec<f64>,
    bias: Vec<f64>,
    residual: Vec<f64>,
}

impl Case {
    fn new(m: i64, n: i64, k: i64) -> Case {
        let s = (m * 1_000_003 + n * 1009 + k) as u64;
        Case {
            m,
            n,
            k,
            a: values(s, (m * k) as usize),
            b: values(s + 1, (k * n) as usize),
            bias: values(s + 2, n as usize),
            residual: values(s + 3, (m * n) as usize),
        }
    }

    /// B as the kernel takes it (`[N,K]` is the transpose of the `[K,N]` data).
    fn b_stored(&self, layout: BLayout) -> Vec<f64> {
        match layout {
            BLayout::KN => self.b.clone(),
            BLayout::NK => {
                let (n, k) = (self.n as usize, self.k as usize);
                (0..n * k).map(|i| self.b[(i % k) * n + i / k]).collect()
            }
        }
    }
}

/// Runs the kernel of `plan` for `g` on `case`; returns `C`.
fn run(plan: &Plan, g: &Gemm, case: &Case) -> Result<Vec<f64>, GpuError> {
    let (kernel, p) = sm80::build(plan, g).expect("the template builds");
    if let Err(errs) = verify::verify(&kernel) {
        panic!("the built kernel fails the verifier: {errs:#?}\n{kernel}");
    }
    run_kernel(&kernel, &p, g, case)
}

fn run_kernel(kernel: &Kernel, p: &GemmParams, g: &Gemm, case: &Case) -> Result<Vec<f64>, GpuError> {
    let mut args = vec![Arg::Int(0); kernel.params.len()];
    let ldb = if g.b_layout == BLayout::KN { case.n } else { case.k };
    args[p.a.0 as usize] = Arg::tensor(g.ab, &case.a);
    args[p.b.0 as usize] = Arg::tensor(g.ab, &case.b_stored(g.b_layout));
    if let Some(b) = p.bias {
        args[b.0 as usize] = Arg::tensor(g.ab, &case.bias);
    }
    if let Some(r) = p.residual {
        args[r.0 as usize] = Arg::tensor(g.ab, &case.residual);
    }
    args[p.c.0 as usize] = Arg::tensor(g.out, &vec![f64::NAN; (case.m * case.n) as usize]);
    for (id, v) in [(p.m, case.m), (p.n, case.n), (p.k, case.k), (p.lda, case.k), (p.ldb, ldb), (p.ldc, case.n)] {
        args[id.0 as usize] = Arg::Int(v);
    }
    emulate::run(kernel, &mut args)?;
    Ok(args[p.c.0 as usize].values(g.out))
}

/// The f64 reference: the sum rounded to `ab` (the graph's `CAST`), the
/// plan's epilogue exactly, then the rounding to `out` of the store.
fn reference(plan: &Plan, g: &Gemm, case: &Case) -> Vec<f64> {
    let (m, n, k) = (case.m as usize, case.n as usize, case.k as usize);
    let r = |v: f64| g.ab.round(v);
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut v = r((0..k).map(|x| r(case.a[i * k + x]) * r(case.b[x * n + j])).sum::<f64>());
            for op in &plan.epilogue {
                v = match op.value.as_str() {
                    "bias" => v + r(case.bias[j]),
                    "relu" => v.max(0.0),
                    "residual" => v + r(case.residual[i * n + j]),
                    "silu" => v / (1.0 + (-v).exp()),
                    other => panic!("no reference for {other}"),
                };
            }
            c[i * n + j] = g.out.round(v);
        }
    }
    c
}

fn assert_close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 1e-3 + 1e-3 * w.abs(), "{what}: element {i}: got {g}, want {w}");
    }
}

fn plan_with(tile: [u64; 3], warp: [u64; 2], stages: u64, vec: u64, epilogue: &[&str]) -> Plan {
    let mut p = space::gemm_plan(&plan::target::SM80, tile, warp, stages, vec);
    p.epilogue = epilogue.iter().map(|e| Spanned::new(e.to_string())).collect();
    p
}

/// The interpreter's `relu(cast(X·W) + bias)` (`test_graphs::gemm_bias_relu`),
/// rounded to `dt` as storing the output tensor rounds it (the interpreter
/// keeps the exact value after the add).
fn interp_gemm_bias_relu(dt: DType, case: &Case) -> Vec<f64> {
    let g = crate::test_graphs::gemm_bias_relu(dt, "M", "N", "K");
    let (m, n, k) = (case.m as usize, case.n as usize, case.k as usize);
    let t = |shape: &[usize], v: &[f64]| crate::interp::Tensor::new(dt, shape, v.to_vec()).unwrap();
    let ins = [t(&[m, k], &case.a), t(&[k, n], &case.b), t(&[n], &case.bias)];
    let dims: BTreeMap<String, i64> =
        [("M", case.m), ("N", case.n), ("K", case.k)].map(|(s, v)| (s.to_string(), v)).into();
    crate::interp::run(&g, &dims, &ins).unwrap().remove(0).data.into_iter().map(|v| dt.round(v)).collect()
}

/// GEMM + bias + ReLU in f16 and bf16, B `[K,N]`, over tails on every axis.
///
/// The shapes cover each of {1, 17, 64, 127, 130, 256} on each axis, as
/// three Latin-square rows plus the extremes (the full cross product, 216
/// shapes × 2 dtypes, takes minutes in a debug emulator; what a tail can
/// break is per axis — its predicate and its alignment — so every value on
/// every axis, with each other axis both aligned and not, covers it).
#[test]
fn gemm_bias_relu_matches_interp() {
    let shapes: [(i64, i64, i64); 8] = [
        (1, 17, 64),
        (17, 64, 127),
        (64, 127, 130),
        (127, 130, 256),
        (130, 256, 1),
        (256, 1, 17),
        (1, 1, 1),
        (130, 130, 130),
    ];
    let plan = plan_with([64, 64, 32], [64, 32], 3, 8, &["bias", "relu"]);
    for dt in [DType::F16, DType::BF16] {
        for &(m, n, k) in &shapes {
            let case = Case::new(m, n, k);
            let g = gemm(dt, dt, BLayout::KN, n, k);
            let got = run(&plan, &g, &case).unwrap_or_else(|e| panic!("{dt:?} {m}x{n}x{k}: {e}"));
            let what = format!("{} M={m} N={n} K={k}", dt.dsl_name());
            assert_close(&got, &interp_gemm_bias_relu(dt, &case), &what);
            assert_close(&got, &reference(&plan, &g, &case), &what);
        }
    }
}

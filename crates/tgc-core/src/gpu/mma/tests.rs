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

use crate::gpu::dialect::verify;
use crate::gpu::dialect::*;
use crate::gpu::emulate::{self, Arg};
use crate::gpu::mma::{self, BLayout, Gemm, GemmParams};
use crate::plan::{self, space, Epilogue, Plan, Spanned};
use crate::DType;

/// `n` multiples of 1/8 in [-1, 1], deterministic in `seed`.
pub(crate) fn values(seed: u64, n: usize) -> Vec<f64> {
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

pub(crate) fn gemm(ab: DType, out: DType, b_layout: BLayout, n: i64, k: i64) -> Gemm {
    let align = |x: i64| [8u32, 4, 2, 1].into_iter().find(|&a| x % a as i64 == 0).unwrap_or(1);
    let ldb = if b_layout == BLayout::KN { n } else { k };
    Gemm {
        ab,
        out,
        b_layout,
        round_sum: true,
        align_a: align(k),
        align_b: align(ldb),
        align_c: align(n),
        implicit: None,
    }
}

/// Inputs of one problem: A `[M,K]`, B as stored, bias `[N]`, residual `[M,N]`.
pub(crate) struct Case {
    pub(crate) m: i64,
    pub(crate) n: i64,
    pub(crate) k: i64,
    pub(crate) a: Vec<f64>,
    pub(crate) b: Vec<f64>,
    pub(crate) bias: Vec<f64>,
    pub(crate) residual: Vec<f64>,
}

impl Case {
    pub(crate) fn new(m: i64, n: i64, k: i64) -> Case {
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
pub(crate) fn run(plan: &Plan, g: &Gemm, case: &Case) -> Result<Vec<f64>, GpuError> {
    let (kernel, p) = mma::build(plan, g).expect("the template builds");
    if let Err(errs) = verify::verify(&kernel) {
        panic!("the built kernel fails the verifier: {errs:#?}\n{kernel}");
    }
    run_kernel(&kernel, &p, g, case)
}

pub(crate) fn run_kernel(kernel: &Kernel, p: &GemmParams, g: &Gemm, case: &Case) -> Result<Vec<f64>, GpuError> {
    run_with_stats(kernel, p, g, case).map(|(c, _)| c)
}

pub(crate) fn run_with_stats(
    kernel: &Kernel,
    p: &GemmParams,
    g: &Gemm,
    case: &Case,
) -> Result<(Vec<f64>, emulate::Stats), GpuError> {
    run_ordered(kernel, p, g, case, emulate::RoleOrder::default())
}

/// [`run_with_stats`] with a warp-specialised kernel's roles interleaved
/// as `order` says.
pub(crate) fn run_ordered(
    kernel: &Kernel,
    p: &GemmParams,
    g: &Gemm,
    case: &Case,
    order: emulate::RoleOrder,
) -> Result<(Vec<f64>, emulate::Stats), GpuError> {
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
    for map in p.tensor_maps.into_iter().flatten() {
        args[map.0 as usize] = Arg::TensorMap;
    }
    let stats = emulate::run_ordered(kernel, &mut args, order)?;
    Ok((args[p.c.0 as usize].values(g.out), stats))
}

/// The f64 reference: the sum rounded to `ab` when `round_sum` (the graph's `CAST`), the
/// plan's epilogue exactly, then the rounding to `out` of the store.
pub(crate) fn reference(plan: &Plan, g: &Gemm, case: &Case) -> Vec<f64> {
    let (m, n, k) = (case.m as usize, case.n as usize, case.k as usize);
    let r = |v: f64| g.ab.round(v);
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut v = (0..k).map(|x| r(case.a[i * k + x]) * r(case.b[x * n + j])).sum::<f64>();
            if g.round_sum {
                v = r(v);
            }
            for op in &plan.epilogue {
                v = match op.value {
                    Epilogue::Bias => v + r(case.bias[j]),
                    Epilogue::Relu => v.max(0.0),
                    Epilogue::Residual => v + r(case.residual[i * n + j]),
                    Epilogue::Silu => v / (1.0 + (-v).exp()),
                    Epilogue::Gelu => 0.5 * v * (1.0 + erf(v * std::f64::consts::FRAC_1_SQRT_2)),
                    Epilogue::GeluTanh => {
                        0.5 * v * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (v + 0.044715 * v.powi(3))).tanh())
                    }
                    Epilogue::Tanh => v.tanh(),
                };
            }
            c[i * n + j] = g.out.round(v);
        }
    }
    c
}

/// `erf(u)` by its Maclaurin series `2/√π Σ (−1)ⁿ u^(2n+1) / (n! (2n+1))`
/// (within 1e-9 for |u| ≤ 4, whose largest term is about 4e6), ±1 beyond
/// (`1 − |erf|` < 2e-8 there): a reference independent of the A&S formula
/// the frontend and the epilogue use.
pub(crate) fn erf(u: f64) -> f64 {
    if u.abs() > 4.0 {
        return u.signum();
    }
    let (mut term, mut sum) = (u, u);
    for n in 1..200 {
        term *= -u * u / n as f64;
        sum += term / (2 * n + 1) as f64;
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

pub(crate) fn assert_close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 1e-3 + 1e-3 * w.abs(), "{what}: element {i}: got {g}, want {w}");
    }
}

pub(super) fn plan_with(tile: [u64; 3], warp: [u64; 2], stages: u64, vec: u64, epilogue: &[&str]) -> Plan {
    let mut p = space::gemm_plan(&plan::target::SM80, tile, warp, stages, vec);
    p.epilogue = epilogue.iter().map(|e| Spanned::new(Epilogue::parse(e, None).unwrap())).collect();
    p
}

/// The interpreter's `relu(cast(X·W) + bias)` (`test_graphs::gemm_bias_relu`),
/// rounded to `dt` as storing the output tensor rounds it (the interpreter
/// keeps the exact value after the add).
pub(crate) fn interp_gemm_bias_relu(dt: DType, case: &Case) -> Vec<f64> {
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

/// Every plan of the §6 search space that the plan checks accept builds a
/// kernel that verifies and computes the right result on one small shape
/// with a tail on every axis, B `[K,N]` and `[N,K]` alternately: the sm80
/// space in f16 and bf16 (the sm90 space: `wgmma_tests`).
#[test]
fn every_valid_plan_of_the_space_runs() {
    let (m, n, k) = (72, 40, 48);
    let case = Case::new(m, n, k);
    for (target, dt) in [(&plan::target::SM80, DType::F16), (&plan::target::SM80, DType::BF16)] {
        let problem = plan::Problem::gemm(m as u64, n as u64, k as u64, dt);
        let space = space::candidates(&problem, target);
        assert!(space.valid.len() >= 8, "only {} valid plans: {:?}", space.valid.len(), space.rejected);
        for (i, p) in space.valid.iter().enumerate() {
            let mut p = p.clone();
            p.epilogue = vec![Spanned::new(Epilogue::Bias), Spanned::new(Epilogue::Relu)];
            let layout = if i % 2 == 0 { BLayout::KN } else { BLayout::NK };
            let g = gemm(dt, dt, layout, n, k);
            let what = format!("{} plan {i} ({layout:?}):\n{}", target.name, plan::print_dsl(&p));
            let got = run(&p, &g, &case).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_close(&got, &reference(&p, &g, &case), &what);
        }
    }
}

/// B `[N,K]` (plain `ldmatrix`), bf16 operands, f32 output, bias, SiLU or
/// GELU and a residual, without rounding the sum.
#[test]
fn nk_layout_f32_output_silu_gelu_residual() {
    let silu = plan_with([64, 64, 32], [64, 32], 2, 8, &["bias", "silu", "residual"]);
    let gelu = plan_with([64, 64, 32], [64, 64], 3, 4, &["residual", "gelu"]);
    for (plan, (m, n, k)) in [(&silu, (65, 40, 96)), (&silu, (7, 64, 130)), (&gelu, (33, 72, 40))] {
        let case = Case::new(m, n, k);
        let mut g = gemm(DType::BF16, DType::F32, BLayout::NK, n, k);
        g.round_sum = false;
        let got = run(plan, &g, &case).unwrap();
        assert_close(&got, &reference(plan, &g, &case), &format!("{m}x{n}x{k}"));
    }
}

/// Removes, everywhere in `body`, the statements `drop` selects.
pub(crate) fn remove(body: &mut Vec<Stmt>, drop: &impl Fn(&Stmt) -> bool) {
    body.retain(|s| !drop(s));
    for s in body.iter_mut() {
        for body in s.children_mut() {
            remove(body, drop);
        }
    }
}

/// Applies `f` to every statement of `body`, nested ones included.
pub(crate) fn edit(body: &mut [Stmt], f: &mut impl FnMut(&mut Stmt)) {
    for s in body.iter_mut() {
        f(s);
        for body in s.children_mut() {
            edit(body, f);
        }
    }
}

/// The pre-order id of the first statement `pick` selects.
pub(crate) fn first(k: &Kernel, pick: impl Fn(&Stmt) -> bool) -> u32 {
    let mut found = None;
    k.walk(&mut |id, s| {
        if found.is_none() && pick(s) {
            found = Some(id);
        }
    });
    found.expect("the kernel has such a statement")
}

/// A 3-stage kernel, f16, B `[K,N]`, bias + ReLU, and a shape with tails.
fn broken_setup() -> (Plan, Gemm, Case, Kernel, GemmParams) {
    let plan = plan_with([64, 64, 32], [64, 32], 3, 8, &["bias", "relu"]);
    let case = Case::new(40, 64, 128);
    let g = gemm(DType::F16, DType::F16, BLayout::KN, case.n, case.k);
    let (kernel, p) = mma::build(&plan, &g).unwrap();
    verify::verify(&kernel).unwrap();
    (plan, g, case, kernel, p)
}

fn is_ldmatrix_of(buf: u32) -> impl Fn(&Stmt) -> bool {
    move |s| matches!(s, Stmt::Mma(MmaStmt::LdMatrix { src, .. }) if src.buf.0 == buf)
}

#[test]
fn removed_wait_group_is_caught_by_verifier_and_emulator() {
    let (_, g, case, mut kernel, p) = broken_setup();
    // Drop the main loop's wait (pending = stages - 2), keep the final drain.
    remove(&mut kernel.body, &|s| matches!(s, Stmt::Mma(MmaStmt::WaitGroup { pending: 1 })));
    let ld = first(&kernel, is_ldmatrix_of(0));
    let errs = verify::verify(&kernel).unwrap_err();
    assert_eq!((errs[0].fault, errs[0].stmt), (Fault::IncompleteRead, Some(ld)), "{errs:?}");
    assert!(errs[0].message.contains("no cp.async.wait_group"), "{}", errs[0]);
    let e = run_kernel(&kernel, &p, &g, &case).unwrap_err();
    assert_eq!((e.fault, e.stmt), (Fault::IncompleteRead, Some(ld)), "{e}");
    assert!(e.message.contains("in flight"), "{e}");
}

/// A wait that leaves one group too many in flight passes the verifier's
/// path check; the emulator finds the stage read before its group lands.
#[test]
fn wait_group_count_off_by_one_is_caught_by_emulator() {
    let (_, g, case, mut kernel, p) = broken_setup();
    edit(&mut kernel.body, &mut |s| {
        if let Stmt::Mma(MmaStmt::WaitGroup { pending: pending @ 1 }) = s {
            *pending = 2;
        }
    });
    verify::verify(&kernel).unwrap();
    let e = run_kernel(&kernel, &p, &g, &case).unwrap_err();
    assert_eq!((e.fault, e.stmt), (Fault::IncompleteRead, Some(first(&kernel, is_ldmatrix_of(0)))), "{e}");
}

#[test]
fn missing_barrier_after_wait_is_caught() {
    let (_, g, case, mut kernel, p) = broken_setup();
    remove(&mut kernel.body, &|s| matches!(s, Stmt::Barrier));
    let ld = first(&kernel, is_ldmatrix_of(0));
    let errs = verify::verify(&kernel).unwrap_err();
    assert_eq!((errs[0].fault, errs[0].stmt), (Fault::IncompleteRead, Some(ld)), "{errs:?}");
    assert!(errs[0].message.contains("bar.sync after the wait"), "{}", errs[0]);
    let e = run_kernel(&kernel, &p, &g, &case).unwrap_err();
    assert_eq!((e.fault, e.stmt), (Fault::Race, Some(ld)), "{e}");
}

#[test]
fn swizzle_mismatch_is_caught_by_verifier_and_gives_wrong_results() {
    let (plan, g, case, mut kernel, p) = broken_setup();
    edit(&mut kernel.body, &mut |s| {
        if let Stmt::Mma(MmaStmt::LdMatrix { src, .. }) = s {
            if src.buf.0 == 0 {
                src.swizzle = Swizzle::IDENTITY;
            }
        }
    });
    let ld = first(&kernel, is_ldmatrix_of(0));
    let errs = verify::verify(&kernel).unwrap_err();
    assert_eq!((errs[0].fault, errs[0].stmt), (Fault::Swizzle, Some(ld)), "{errs:?}");
    assert!(errs[0].message.contains("`As`"), "{}", errs[0]);
    let got = run_kernel(&kernel, &p, &g, &case).unwrap();
    let want = reference(&plan, &g, &case);
    let wrong = got.iter().zip(&want).filter(|(a, b)| (*a - *b).abs() > 1e-3 + 1e-3 * b.abs()).count();
    assert!(wrong > got.len() / 2, "only {wrong} of {} elements differ", got.len());
}

/// Without `m.i.i` in `predicate_tail`, rows of A past M are copied: an
/// out-of-bounds global read at A's `cp.async`.
#[test]
fn dropped_tail_predicate_reads_out_of_bounds() {
    let (mut plan, g, case, _, _) = broken_setup();
    plan.predicate_tail.retain(|a| a.value != "m.i.i");
    let (kernel, p) = mma::build(&plan, &g).unwrap();
    verify::verify(&kernel).unwrap();
    let e = run_kernel(&kernel, &p, &g, &case).unwrap_err();
    let copy_a = first(&kernel, |s| matches!(s, Stmt::Mma(MmaStmt::CpAsync { src, .. }) if src.param == p.a));
    assert_eq!((e.fault, e.stmt), (Fault::OutOfBounds, Some(copy_a)), "{e}");
    assert!(e.message.contains("outside `A`"), "{e}");
}

#[test]
fn divergent_barrier_is_caught() {
    let (_, g, case, mut kernel, p) = broken_setup();
    let tid = Expr::ThreadIdx(Dim::X);
    kernel.body.insert(0, Stmt::If { cond: tid.lt(32), then: vec![Stmt::Barrier], otherwise: Vec::new() });
    let errs = verify::verify(&kernel).unwrap_err();
    assert_eq!((errs[0].fault, errs[0].stmt), (Fault::Divergence, Some(1)), "{errs:?}");
    let e = run_kernel(&kernel, &p, &g, &case).unwrap_err();
    assert_eq!((e.fault, e.stmt), (Fault::Divergence, Some(1)), "{e}");
}

/// `griddepcontrol.wait` is sm_90: rejected in an sm80 kernel, accepted
/// (and a no-op) in the same kernel for sm90.
#[test]
fn sm90_statement_in_sm80_kernel_is_caught() {
    let (plan, g, case, mut kernel, p) = broken_setup();
    kernel.body.insert(0, Stmt::Sm90(Sm90Stmt::GridDepControlWait));
    let errs = verify::verify(&kernel).unwrap_err();
    assert_eq!((errs[0].fault, errs[0].stmt), (Fault::Arch, Some(0)), "{errs:?}");
    assert_eq!(run_kernel(&kernel, &p, &g, &case).unwrap_err().fault, Fault::Arch);
    kernel.arch = Arch::Sm90;
    verify::verify(&kernel).unwrap();
    assert_close(&run_kernel(&kernel, &p, &g, &case).unwrap(), &reference(&plan, &g, &case), "sm90");
}

#[test]
fn fragment_shape_errors_name_the_statement() {
    let (_, _, _, mut kernel, _) = broken_setup();
    edit(&mut kernel.body, &mut |s| {
        if let Stmt::Mma(MmaStmt::MmaSync { b, .. }) = s {
            b.pop();
        }
    });
    let mma = first(&kernel, |s| matches!(s, Stmt::Mma(MmaStmt::MmaSync { .. })));
    let errs = verify::verify(&kernel).unwrap_err();
    assert_eq!((errs[0].fault, errs[0].stmt), (Fault::FragmentShape, Some(mma)), "{errs:?}");
    assert!(errs[0].message.contains("2 B registers, not 1"), "{}", errs[0]);

    // A register index past its array, and one that depends on the lane.
    let (_, _, _, mut kernel, _) = broken_setup();
    edit(&mut kernel.body, &mut |s| {
        if let Stmt::Mma(MmaStmt::MmaSync { a, .. }) = s {
            a[3].index = a[3].index.clone() + 1;
        }
        if let Stmt::Mma(MmaStmt::MovF32 { dst, .. }) = s {
            dst.index = Expr::ThreadIdx(Dim::X) % 32;
        }
    });
    let errs = verify::verify(&kernel).unwrap_err();
    let mov = first(&kernel, |s| matches!(s, Stmt::Mma(MmaStmt::MovF32 { .. })));
    assert_eq!((errs[0].fault, errs[0].stmt), (Fault::FragmentShape, Some(mov)), "{errs:?}");
    assert!(errs[0].message.contains("not a constant"), "{}", errs[0]);
    assert_eq!((errs[1].fault, errs[1].stmt), (Fault::FragmentShape, Some(mma)), "{errs:?}");
    assert!(errs[1].message.contains("`afrag[4..=16]` outside its 16 registers"), "{}", errs[1]);
}

/// The swizzle of each row size the template uses sends the 8 rows of one
/// `ldmatrix` 8×8 matrix (same 16-byte column, consecutive rows) to 8
/// distinct 16-byte bank groups of a 128-byte line, for every column.
#[test]
fn swizzle_makes_ldmatrix_rows_conflict_free() {
    for row_bytes in [32u64, 64, 128, 256, 512] {
        let sw = Swizzle::for_rows(row_bytes).unwrap();
        for row0 in (0..64).step_by(8) {
            for col in (0..row_bytes).step_by(16) {
                let groups: std::collections::BTreeSet<u64> =
                    (row0..row0 + 8).map(|r| sw.apply(r * row_bytes + col) / 16 % 8).collect();
                assert_eq!(groups.len(), 8, "rows of {row_bytes} bytes, row {row0}, column {col}");
                // The swizzle moves whole 16-byte chunks and stays in the row.
                let off = sw.apply(row0 * row_bytes + col);
                assert_eq!((off % 16, off / row_bytes), (0, row0), "{sw}");
            }
        }
        let plain: std::collections::BTreeSet<u64> = (0..8).map(|r| r * row_bytes / 16 % 8).collect();
        assert!(plain.len() < 8, "without the swizzle rows of {row_bytes} bytes conflict");
    }
}

/// C is stored 16 bytes at a time (staged through shared memory) when `N`
/// allows it, and in pairs or single elements when it does not.
#[test]
fn c_stores_are_16_bytes_when_aligned() {
    let plan = plan_with([64, 64, 32], [64, 32], 2, 8, &["bias", "relu"]);
    let widths = |out: DType, n: i64| {
        let (k, _) = mma::build(&plan, &gemm(DType::F16, out, BLayout::KN, n, 64)).unwrap();
        let mut w = std::collections::BTreeSet::new();
        k.walk(&mut |_, s| {
            if let Stmt::Mma(MmaStmt::StGlobalVec { src, .. }) = s {
                w.insert(src.len());
            }
        });
        (w.into_iter().collect::<Vec<_>>(), k.smem.iter().any(|b| b.name == "Cs"))
    };
    assert_eq!(widths(DType::F16, 64), (vec![1, 8], true));
    assert_eq!(widths(DType::F32, 64), (vec![1, 4], true));
    assert_eq!(widths(DType::F16, 66), (vec![1, 2], false));
    assert_eq!(widths(DType::F16, 17), (vec![1], false));
    let (k, _) = mma::build(&plan, &gemm(DType::F16, DType::F16, BLayout::KN, 64, 64)).unwrap();
    assert!(k.to_string().contains("st.global.v8.f16 C[(((c_grow * ldc) + c_gcol) + 0)]"), "{k}");
}

/// The text dump of one SM80 kernel (the `gpu` dump):
/// `UPDATE_EXPECT=1` regenerates it; review the diff.
#[test]
fn dump_of_an_sm80_kernel() {
    let plan = plan_with([64, 64, 32], [64, 32], 2, 8, &["bias", "relu"]);
    let (kernel, _) = mma::build(&plan, &gemm(DType::F16, DType::F16, BLayout::KN, 64, 64)).unwrap();
    expect_test::expect_file!["../snapshots/gemm_sm80_f16_64x64x32_2stage.gpu"].assert_eq(&kernel.to_string());
}

/// The template's swizzle makes every `ldmatrix` phase conflict-free, for
/// both B layouts and every row size of the space's tiles; without it (the
/// `A_swizzle`/`B_swizzle` hints false) the same kernel has conflicts and
/// still computes the same result.
#[test]
fn swizzled_ldmatrix_has_no_bank_conflicts() {
    let case = Case::new(64, 128, 64);
    for (tile, warp) in [([64, 64, 32], [64, 32]), ([128, 128, 32], [64, 64]), ([128, 64, 64], [64, 32])] {
        for layout in [BLayout::KN, BLayout::NK] {
            let g = gemm(DType::F16, DType::F16, layout, case.n, case.k);
            let mut plan = plan_with(tile, warp, 2, 8, &["relu"]);
            let (kernel, p) = mma::build(&plan, &g).unwrap();
            let (got, stats) = run_with_stats(&kernel, &p, &g, &case).unwrap();
            let what = format!("{tile:?} {layout:?}");
            assert!(stats.ldmatrix > 0, "{what}");
            assert_eq!(stats.ldmatrix_bank_conflicts, 0, "{what}");
            for h in plan.layout_hints.iter_mut() {
                if h.value.key.ends_with("_swizzle") {
                    h.value.value = plan::HintValue::Bool(false);
                }
            }
            let (kernel, p) = mma::build(&plan, &g).unwrap();
            assert!(kernel.smem.iter().all(|b| b.swizzle == Swizzle::IDENTITY));
            let (plain, stats) = run_with_stats(&kernel, &p, &g, &case).unwrap();
            assert!(stats.ldmatrix_bank_conflicts > 0, "{what}");
            assert_eq!(plain, got, "{what}");
        }
    }
}

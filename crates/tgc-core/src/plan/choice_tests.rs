//! Plan choice tests: §5's resources of the §7.1 plan worked by hand, and
//! properties of the §6 model and of the space (no magic outputs).

use super::cost::{self, Analytic, Estimate, Estimator, Limit};
use super::resources::{self, CtaLimit};
use super::*;
use crate::diag::DResult;
use crate::DType;

fn example(name: &str) -> Plan {
    let path = format!("{}/../../tests/plans/{name}", env!("CARGO_MANIFEST_DIR"));
    parse_dsl(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn gemm(size: u64) -> Problem {
    Problem::gemm(size, size, size, DType::F16)
}

#[test]
fn resources_of_the_7_1_plan_by_hand() {
    // 000 §7.1 on sm80: tile [128, 64, 64], stages 2, warp_tile 64x64, f16.
    let r = resources::of(&example("gemm_sm80.plan"), DType::F16, &target::SM80).unwrap();
    // smem = (BM·BK + BK·BN) · 2 B · stages = (8192 + 4096) · 2 · 2.
    assert_eq!(r.smem_per_cta, 49152);
    // (128/64)·(64/64) = 2 warps of 32 threads.
    assert_eq!((r.warps_per_cta, r.threads_per_cta), (2, 64));
    // base 32 + acc 64·64/32 = 128 + operands (64 + 64)·16·2 B / (4 B · 32) = 32.
    assert_eq!(r.regs_per_thread, 32 + 128 + 32);
    // min(164 KiB / 48 KiB = 3, 65536 / (192·64) = 5, 64 warps / 2 = 32, 32 blocks) = 3.
    assert_eq!((r.ctas_per_sm, r.cta_limit), (3, CtaLimit::Smem));
    // occ = 3 · 2 / 64.
    assert_eq!(r.occupancy, 6.0 / 64.0);
}

#[test]
fn every_generated_candidate_validates_and_every_rejection_has_a_reason() {
    for t in target::TARGETS {
        for p in [gemm(4096), Problem::gemm(1000, 3000, 520, DType::BF16)] {
            let s = space::candidates(&p, t);
            assert!(!s.valid.is_empty(), "{}", t.name);
            assert_eq!(s.valid.len() + s.rejected.len(), 4 * 2 * 2 * 3);
            for plan in &s.valid {
                assert_eq!(validate(plan, t, &p), vec![]);
                assert_eq!(parse_dsl(&print_dsl(plan)).unwrap(), *plan);
            }
            assert!(s.rejected.iter().all(|(_, why)| !why.is_empty()));
        }
    }
    // f32 has no tensor-core shape: nothing to choose, and the dump says so.
    let p = Problem::gemm(256, 256, 256, DType::F32);
    let c = cost::choose(&p, &target::SM80).unwrap();
    assert!(c.best().is_none() && c.candidates.is_empty());
    assert!(dump(&p, &target::SM80, &c).contains("no candidate is valid"));
}

/// Prefers the most shared memory: a plan over the limit still loses,
/// because the space rejects it before any estimator sees it.
struct MostSmem;

impl Estimator for MostSmem {
    fn estimate(&self, plan: &Plan, problem: &Problem, target: &Target) -> DResult<Estimate> {
        let r = resources::of(plan, problem.dtype, target).unwrap();
        Ok(Estimate { time_s: 1.0 / r.smem_per_cta as f64, limit: Limit::Memory })
    }
}

#[test]
fn a_plan_over_the_smem_limit_is_never_chosen() {
    let big = space::gemm_plan(&target::SM80, [256, 256, 64], [64, 64], 3, 8);
    let why = space::check(&big, &target::SM80, &gemm(4096));
    assert!(why.iter().any(|w| w.contains("shared memory")), "{why:?}");
    for t in target::TARGETS {
        for est in [&Analytic as &dyn Estimator, &MostSmem] {
            let c = cost::choose_with(est, &gemm(4096), t).unwrap();
            for (plan, _) in &c.candidates {
                assert!(resources::of(plan, DType::F16, t).unwrap().smem_per_cta <= t.smem_per_block_max);
            }
            assert!(c.best().is_some());
        }
    }
}

#[test]
fn bigger_problems_take_longer() {
    for t in target::TARGETS {
        let best = |s| cost::choose(&gemm(s), t).unwrap().best().unwrap().1.time_s;
        let times: Vec<f64> = [256, 1024, 2048, 4096, 8192].into_iter().map(best).collect();
        assert!(times.windows(2).all(|w| w[0] < w[1]), "{}: {times:?}", t.name);
        // And for one plan, growing any one extent.
        let plan = example("gemm_sm80.plan");
        let time = |m, n, k| Analytic.estimate(&plan, &Problem::gemm(m, n, k, DType::F16), t).unwrap().time_s;
        assert!(time(2048, 1024, 1024) > time(1024, 1024, 1024));
        assert!(time(1024, 2048, 1024) > time(1024, 1024, 1024));
        assert!(time(1024, 1024, 2048) > time(1024, 1024, 1024));
    }
}

#[test]
fn estimates_stay_below_the_peak_and_the_terms_are_in_range() {
    let p = gemm(4096);
    let flops = 2.0 * 4096f64.powi(3);
    for t in target::TARGETS {
        let c = cost::choose(&p, t).unwrap();
        let (best, e) = c.best().unwrap();
        assert!(flops / e.time_s / 1e12 < t.peak_tensor_tflops, "{}", t.name);
        assert!(c.candidates.iter().all(|(_, x)| x.time_s >= e.time_s));
        let terms = Analytic.terms(best, &p, t).unwrap();
        assert!(terms.wave_eff > 0.0 && terms.wave_eff <= 1.0);
        assert!(terms.resources.occupancy > 0.0 && terms.resources.occupancy <= 1.0);
        assert_eq!(e.time_s, terms.compute_s.max(terms.memory_s));
    }
    // A third stage raises pipeline_eff (§5: 1 − 1/stages).
    let two = space::gemm_plan(&target::SM80, [128, 128, 32], [64, 32], 2, 8);
    let three = space::gemm_plan(&target::SM80, [128, 128, 32], [64, 32], 3, 8);
    let eff = |pl: &Plan| Analytic.terms(pl, &p, &target::SM80).unwrap().pipeline_eff;
    assert!(eff(&three) > eff(&two));
    // A tail costs: 4097 pads to 4096 + BM, so it takes longer than 4096.
    let t4097 = Analytic.estimate(&two, &Problem::gemm(4097, 4096, 4096, DType::F16), &target::SM80).unwrap();
    assert!(t4097.time_s > Analytic.estimate(&two, &p, &target::SM80).unwrap().time_s);
}

#[test]
fn the_dump_marks_one_choice_and_ends_with_its_plan() {
    let p = gemm(4096);
    let c = cost::choose(&p, &target::SM80).unwrap();
    let text = dump(&p, &target::SM80, &c);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("GEMM M=4096 N=4096 K=4096 f16 on sm80"));
    assert!(lines[1].contains("estimate") && lines[1].contains("not measurements"));
    assert!(lines[2].contains("est_us") && lines[2].contains("est_TFLOP/s") && lines[2].contains("limit"));
    let rows = &lines[3..3 + c.candidates.len()];
    assert_eq!(rows.iter().filter(|l| l.starts_with('*')).count(), 1);
    assert!(rows.iter().all(|l| l.ends_with("compute") || l.ends_with("memory")));
    let (_, dsl) = text.split_once("chosen plan (Schedule DSL):\n").unwrap();
    assert_eq!(parse_dsl(dsl).unwrap(), c.best().unwrap().0);
}

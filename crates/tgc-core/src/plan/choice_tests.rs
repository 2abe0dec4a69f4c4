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
            let size = match t.template_shape(p.dtype).map(|s| s.instr) {
                // Three forms, and two more with `cluster=2` (every tile
                // has at least two tiles along M here).
                Some("wgmma") => {
                    assert!(space::WGMMA_TILES.iter().all(|t| space::offers_cluster(&p, t[0])));
                    space::WGMMA_TILES.len() * space::WGMMA_STAGES.len() * space::WGMMA_FORMS.len()
                }
                _ => space::TILES.len() * space::WARP_TILES.len() * space::STAGES.len() * space::VECTOR_WIDTHS.len(),
            };
            assert_eq!(s.valid.len() + s.rejected.len(), size, "{}", t.name);
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
        Ok(Estimate { time_s: 1.0 / r.smem_per_cta as f64, limit: Limit::SharedMemory })
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
        // And for one plan, growing any one extent never takes less time;
        // past a full machine it takes more. (Below that, more tiles per SM
        // add warps that hide latency: an SM short of warps gets the extra
        // tile for free.)
        let plan = example("gemm_sm80.plan");
        let time = |m, n, k| Analytic.estimate(&plan, &Problem::gemm(m, n, k, DType::F16), t).unwrap().time_s;
        for base in [1024, 4096] {
            let (grow_m, grow_n, grow_k) =
                (time(2 * base, base, base), time(base, 2 * base, base), time(base, base, 2 * base));
            let at = time(base, base, base);
            assert!(grow_m >= at && grow_n >= at && grow_k > at, "{}: {base}", t.name);
            if base == 4096 {
                assert!(grow_m > at && grow_n > at, "{}", t.name);
            }
        }
    }
}

#[test]
fn estimates_stay_below_the_peak_and_the_terms_are_consistent() {
    let p = gemm(4096);
    let flops = 2.0 * 4096f64.powi(3);
    for t in target::TARGETS {
        let c = cost::choose(&p, t).unwrap();
        let (best, e) = c.best().unwrap();
        assert!(flops / e.time_s / 1e12 < t.peak_tensor_tflops, "{}", t.name);
        assert!(c.candidates.iter().all(|(_, x)| x.time_s >= e.time_s));
        let terms = Analytic.terms(best, &p, t).unwrap();
        assert_eq!((e.time_s, e.limit), (terms.time_s, terms.limit));
        // Each wave takes its largest term, so the sum is at least each
        // term's sum and at most their total.
        let parts = [terms.compute_s, terms.smem_s, terms.l2_s, terms.latency_s, terms.dram_s];
        assert!(parts.iter().all(|&x| x > 0.0 && x <= terms.time_s), "{parts:?}");
        assert!(terms.time_s <= parts.iter().sum::<f64>());
        let slots = t.sm_count * terms.resources.ctas_per_sm;
        assert_eq!(terms.waves, terms.tiles.div_ceil(slots));
    }
    // A third stage keeps one more K-step in flight: less latency-bound.
    let two = space::gemm_plan(&target::SM80, [128, 128, 32], [64, 32], 2, 8);
    let three = space::gemm_plan(&target::SM80, [128, 128, 32], [64, 32], 3, 8);
    let latency = |pl: &Plan| Analytic.terms(pl, &p, &target::SM80).unwrap().latency_s;
    assert!((latency(&three) - latency(&two) / 2.0).abs() < 1e-12 * latency(&two));
    // A tail costs: K = 4097 pads to 4096 + BK, whose MMAs are issued.
    let t4097 = Analytic.estimate(&two, &Problem::gemm(4096, 4096, 4097, DType::F16), &target::SM80).unwrap();
    assert!(t4097.time_s > Analytic.estimate(&two, &p, &target::SM80).unwrap().time_s);
}

/// The ranking properties the model must have: large problems are
/// compute-bound and take big tiles, small ones take small tiles.
#[test]
fn large_gemms_are_compute_bound_on_big_tiles_and_small_ones_take_small_tiles() {
    let area = |p: &Plan| resources::block_tile(p).map_or(0, |[m, n, _]| m * n);
    for t in target::TARGETS {
        let large = cost::choose(&gemm(4096), t).unwrap();
        let (big, e) = large.best().unwrap();
        assert_eq!(e.limit, Limit::Compute, "{}", t.name);
        // On sm90 the row's peak is `wgmma`'s, which tiles copied through
        // L2 one CTA at a time cannot feed (every plan without a cluster
        // is L2-bound); a cluster pair multicasting B can.
        if t.name == "sm90" {
            assert_eq!(big.warp_specialize.as_ref().map(|w| w.value.cluster), Some(2), "{}", print_dsl(big));
            let unclustered: Vec<&Estimate> = large
                .candidates
                .iter()
                .filter(|(p, _)| p.warp_specialize.as_ref().is_none_or(|w| w.value.cluster == 1))
                .map(|(_, e)| e)
                .collect();
            assert!(!unclustered.is_empty() && unclustered.iter().all(|e| e.limit == Limit::L2));
        }
        assert!(area(big) >= 128 * 128, "{}: {}", t.name, print_dsl(big));
        let small = cost::choose(&gemm(512), t).unwrap();
        let (little, _) = small.best().unwrap();
        assert!(area(little) < area(big), "{}: {}", t.name, print_dsl(little));
    }
}

/// Wave quantisation: one tile more than the SMs hold at once costs a
/// second wave, far more than its share of the work.
#[test]
fn one_tile_past_a_full_wave_costs_a_second_wave() {
    let plan = space::gemm_plan(&target::SM80, [128, 128, 32], [64, 64], 2, 8);
    let slots = target::SM80.sm_count * resources::of(&plan, DType::F16, &target::SM80).unwrap().ctas_per_sm;
    // N = 8 tiles of 128, M = slots / 8 tiles: exactly one full wave.
    assert_eq!(slots % 8, 0);
    let m = 128 * slots / 8;
    let time = |m| Analytic.terms(&plan, &Problem::gemm(m, 1024, 4096, DType::F16), &target::SM80).unwrap();
    let (full, over) = (time(m), time(m + 128));
    assert_eq!((full.waves, over.waves), (1, 2));
    assert!(over.time_s > 1.5 * full.time_s, "{} vs {}", over.time_s, full.time_s);
}

/// L2 reuse: a wave reads each A row panel and B column panel it covers
/// once, not once per tile, so DRAM moves far less than the tiles load.
#[test]
fn l2_serves_the_re_reads_within_a_wave() {
    let plan = space::gemm_plan(&target::SM80, [128, 128, 32], [64, 64], 2, 8);
    let t = Analytic.terms(&plan, &gemm(4096), &target::SM80).unwrap();
    let per_tile_loads = t.tiles as f64 * (128.0 + 128.0) * 4096.0 * 2.0;
    let dram_bytes = t.dram_s * target::SM80.dram_gbps * 1e9;
    // Without reuse every tile's panels would come from DRAM.
    assert!(dram_bytes < per_tile_loads / 8.0, "{dram_bytes} vs {per_tile_loads}");
    // And no fewer than A, B and C once each.
    assert!(dram_bytes >= 3.0 * 4096.0 * 4096.0 * 2.0);
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
    let limits = [Limit::Compute, Limit::SharedMemory, Limit::L2, Limit::Latency, Limit::Dram].map(Limit::as_str);
    assert!(rows.iter().all(|l| limits.iter().any(|x| l.ends_with(x))), "{rows:?}");
    let (_, dsl) = text.split_once("chosen plan (Schedule DSL):\n").unwrap();
    assert_eq!(parse_dsl(dsl).unwrap(), c.best().unwrap().0);
}

/// A plan of the attention template with `algo`, head dimension `d`.
fn attention_plan(algo: AttentionAlgo, d: u64) -> Plan {
    Plan {
        tile: Some(Spanned::new([64, 64, d])),
        warp_tile: Some(Spanned::new([16, 64])),
        algo_choice: vec![Spanned::new(AlgoChoice::Attention(algo))],
        ..Plan::default()
    }
}

/// An attention plan (`algo_choice attention`) at the sizes of MiniLM's
/// attention (12 heads × 8 sentences, 128 tokens, head dim 32: DRAM-bound,
/// where the second pass over K comes from L2 and costs nothing) and of
/// long ones (compute-bound, where it costs more), on sm80: the time is at
/// least the FLOPs at the peak, and more keys take longer.
#[test]
fn attention_estimates_count_the_passes_and_stay_below_the_peak() {
    let t = &target::SM80;
    let mut limits = Vec::new();
    for (b, s, d) in [(96, 128, 32), (64, 4096, 64), (64, 8192, 128)] {
        let p = Problem::attention(b, s, s, d, d, DType::F16);
        let online = Analytic.estimate(&attention_plan(AttentionAlgo::OnlineSoftmax, d), &p, t).unwrap();
        let two = Analytic.estimate(&attention_plan(AttentionAlgo::StreamingSoftmax2Pass, d), &p, t).unwrap();
        let flops = 4.0 * (b * s * s * d) as f64;
        assert!(online.time_s >= flops / (t.peak_tensor_tflops * 1e12), "{online:?}");
        if online.limit == Limit::Compute {
            assert!(two.time_s > online.time_s, "{two:?} vs {online:?}");
        } else {
            assert!(two.time_s >= online.time_s, "{two:?} vs {online:?}");
        }
        let longer = Problem::attention(b, s, 2 * s, d, d, DType::F16);
        let more = Analytic.estimate(&attention_plan(AttentionAlgo::OnlineSoftmax, d), &longer, t).unwrap();
        assert!(more.time_s > online.time_s, "{more:?} vs {online:?}");
        limits.push(online.limit);
    }
    assert_eq!(limits, [Limit::Dram, Limit::Compute, Limit::Compute]);
    // A GEMM problem, a plan without tiles: errors.
    let p = Problem::attention(1, 64, 64, 64, 64, DType::F16);
    assert!(Analytic.estimate(&attention_plan(AttentionAlgo::OnlineSoftmax, 64), &gemm(64), t).is_err());
    let mut bare = attention_plan(AttentionAlgo::OnlineSoftmax, 64);
    bare.tile = None;
    assert!(Analytic.estimate(&bare, &p, t).is_err());
}

/// `plan` as `warp_specialize [persistent] cluster=N`.
fn specialized(plan: &Plan, persistent: bool, cluster: u32) -> Plan {
    let mut plan = plan.clone();
    plan.warp_specialize = Some(Spanned::new(Specialize { persistent, cluster }));
    plan
}

/// A cluster pair (`warp_specialize cluster=2`) copies `(BM + BN/2)·Kp·e`
/// bytes per CTA from L2 instead of `(BM + BN)·Kp·e`: for a large GEMM
/// that the same tile leaves L2-bound on sm90, the estimate is faster,
/// while the shared-memory, latency and tensor terms stay as they were.
#[test]
fn a_cluster_pair_multicasting_b_relieves_an_l2_bound_gemm() {
    let t = &target::SM90;
    let p = gemm(8192);
    let tile = space::gemm_plan(t, [128, 256, 64], [64, 256], 4, 8);
    for persistent in [false, true] {
        let one = Analytic.terms(&specialized(&tile, persistent, 1), &p, t).unwrap();
        let two = Analytic.terms(&specialized(&tile, persistent, 2), &p, t).unwrap();
        assert_eq!(one.limit, Limit::L2);
        assert!(two.time_s < one.time_s, "{} vs {}", two.time_s, one.time_s);
        // (128 + 256/2) / (128 + 256) of the L2 bytes.
        assert!((two.l2_s / one.l2_s - 256.0 / 384.0).abs() < 1e-12, "{} vs {}", two.l2_s, one.l2_s);
        assert_eq!((two.tiles, two.waves), (one.tiles, one.waves));
        // (DRAM differs: a wave's pairs cover other rows and columns.)
        assert_eq!([two.compute_s, two.smem_s, two.latency_s], [one.compute_s, one.smem_s, one.latency_s]);
    }
    // An odd number of tiles along M rounds up to whole pairs; the spare
    // CTA (on a tile beyond M) writes no C, so DRAM sees the same bytes.
    let odd = Problem::gemm(3 * 128, 4096, 4096, DType::F16);
    let one = Analytic.terms(&specialized(&tile, false, 1), &odd, t).unwrap();
    let two = Analytic.terms(&specialized(&tile, false, 2), &odd, t).unwrap();
    assert_eq!((one.tiles, two.tiles), (3 * 16, 4 * 16));
    assert_eq!(two.dram_s, one.dram_s);
}

/// `cluster=2` candidates only where a pair has two tiles along M to
/// share B, on the target whose template issues wgmma, and for a plain
/// GEMM (not one whose operands re-read their elements).
#[test]
fn cluster_candidates_need_two_tiles_along_m() {
    let clustered = |p: &Problem, t: &Target| {
        let s = space::candidates(p, t);
        let all = s.valid.iter().chain(s.rejected.iter().map(|(p, _)| p));
        let rows: Vec<u64> = all
            .filter(|p| p.warp_specialize.as_ref().is_some_and(|w| w.value.cluster == 2))
            .map(|p| p.tile.as_ref().unwrap().value[0])
            .collect();
        rows
    };
    // M of exactly one tile of every wgmma tile (BM = 64 or 128).
    assert_eq!(clustered(&Problem::gemm(64, 4096, 4096, DType::F16), &target::SM90), Vec::<u64>::new());
    // M = 128 is one 128-row tile but two 64-row ones.
    let rows = clustered(&Problem::gemm(128, 4096, 4096, DType::F16), &target::SM90);
    assert!(!rows.is_empty() && rows.iter().all(|&bm| bm == 64), "{rows:?}");
    let c = cost::choose(&Problem::gemm(128, 4096, 4096, DType::F16), &target::SM90).unwrap();
    assert!(c.candidates.iter().all(|(p, _)| {
        p.warp_specialize.as_ref().is_none_or(|w| w.value.cluster == 1 || p.tile.as_ref().unwrap().value[0] == 64)
    }));
    // An implicit GEMM (a convolution's A re-reads its input) and sm80.
    let mut conv = gemm(4096);
    conv.distinct[0] /= 9;
    assert_eq!(clustered(&conv, &target::SM90), Vec::<u64>::new());
    assert_eq!(clustered(&gemm(4096), &target::SM80), Vec::<u64>::new());
}

/// With `wgmma` a ring of `stages` runs `stages − 2` k-tiles ahead (the
/// stage is released one k-tile late), so on sm90 a fourth stage halves the
/// latency term of a third, where on sm80 it takes it to two thirds; and a
/// tie goes to the deeper ring: at 4096³ the 128×256 tile with 4 stages,
/// as the hand-written kernel ran (`docs/design/sm90/reference_gemm.cu`).
#[test]
fn wgmma_rings_prefetch_two_stages_short_and_ties_take_the_deeper_ring() {
    assert_eq!([2, 3, 4, 5].map(|s| cost::prefetch_depth(s, true)), [1, 1, 2, 3]);
    assert_eq!([1, 2, 3, 4].map(|s| cost::prefetch_depth(s, false)), [1, 1, 2, 3]);
    let p = gemm(4096);
    for (t, ratio) in [(&target::SM90, 2.0), (&target::SM80, 1.5)] {
        let latency = |stages| {
            let plan = space::gemm_plan(t, [128, 128, 32], [64, 64], stages, 8);
            Analytic.terms(&plan, &p, t).unwrap().latency_s
        };
        assert!((latency(3) / latency(4) - ratio).abs() < 1e-12, "{}: {} / {}", t.name, latency(3), latency(4));
    }
    let c = cost::choose(&p, &target::SM90).unwrap();
    let (best, e) = c.best().unwrap();
    assert_eq!(resources::block_tile(best).map(|[m, n, _]| [m, n]), Some([128, 256]), "{}", print_dsl(best));
    assert_eq!(resources::stages(best), 4, "{}", print_dsl(best));
    // The same plan with 3 stages costs the same: the tie decided it.
    let mut shallow = best.clone();
    shallow.pipeline.as_mut().unwrap().value.stages.value = 3;
    let same = c.candidates.iter().find(|(q, _)| *q == shallow).map(|(_, e)| e.time_s);
    assert_eq!(same, Some(e.time_s));
}

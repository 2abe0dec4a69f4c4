//! GPU plan tuning without a GPU: the decisions a graph has, the choice
//! among measured candidates (a stand-in `measure` plays the device), the
//! records' round trip and checks, and builds reading them.

use std::path::PathBuf;

use super::gpu::*;
use super::{Cache, CacheError, Entry};
use crate::gpu::{driver, program};
use crate::pipeline::{self, Format};
use crate::plan::target::{SM80, SM90};
use crate::plan::{cost, AlgoKey, AttentionAlgo, Epilogue, Plan, Target};

fn load(text: &str) -> crate::tiny::Graph {
    pipeline::load(text, Format::Dsl, None).unwrap_or_else(|d| panic!("{}", d.render("test"))).graph
}

fn gemm() -> crate::tiny::Graph {
    load(
        "graph g(x: f16[256, 64], w: f16[64, 192], b: f16[192]) -> (y: f16[256, 192]) {\n    y = relu(matmul(x, w) + \
         b)\n    return y\n}\n",
    )
}

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tgc-tune-gpu-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn machine() -> GpuMachine {
    GpuMachine { device: "a stand-in".into(), sm: 80, repetitions: 3 }
}

#[test]
fn a_gemm_has_one_decision_whose_candidates_are_its_plan_space() {
    let g = gemm();
    for target in [&SM80, &SM90] {
        let ds = decisions(&g, target).unwrap();
        assert_eq!(ds.len(), 1, "{}", target.name);
        let gg = crate::gpu::mma::recognise::match_gemm(&g).unwrap();
        let choice = crate::gpu::mma::lower::choose(&gg, target, &cost::Analytic).unwrap();
        let space: Vec<&Plan> = choice.candidates.iter().map(|(p, _)| p).collect();
        let found: Vec<&Plan> = ds[0].candidates.iter().collect();
        // Every plan the space costs, rejected after costing or not.
        assert!(space.iter().all(|p| found.contains(p)), "{}", target.name);
        assert_eq!(ds[0].analytic.as_ref(), choice.best().map(|(p, _)| p), "{}", target.name);
        assert_eq!(ds[0].inputs.target, target.name);
        assert_eq!(ds[0].macs(), 256 * 192 * 64);
        assert_eq!(ds[0].inputs.decision, "f16 m=256 n=192 k=64; A, B; distinct 16384, 12288; algo [matmul]");
    }
}

/// The stand-in device: a plan's "time" from its index among the
/// candidates, with the last candidate fastest and the second failing its
/// check.
fn stand_in(candidates: &[Plan]) -> impl FnMut(&program::GpuProgram) -> Result<Outcome, String> + '_ {
    move |p: &program::GpuProgram| {
        let plan = launched_plans(p).into_iter().next().expect("a tensor-core launch");
        let i = candidates.iter().position(|c| *c == plan).expect("the launch is a candidate");
        Ok(match i {
            1 => Err("differs from the interpreter".into()),
            _ if i + 1 == candidates.len() => Ok(10),
            _ => Ok(100 + i as u64),
        })
    }
}

fn tuned(g: &crate::tiny::Graph, target: &Target) -> Vec<TunedDecision> {
    let ds = decisions(g, target).unwrap();
    let candidates = ds[0].candidates.clone();
    let mut calls = 0;
    let mut measure = stand_in(&candidates);
    let mut counting = |p: &program::GpuProgram| {
        calls += 1;
        measure(p)
    };
    let mut last = (0, 0);
    let out = tune(g, target, ds, &mut counting, &mut |d, t| last = (d, t)).unwrap();
    assert_eq!(last, (candidates.len(), candidates.len()));
    let taken = out[0].outcomes.iter().filter(|(_, o)| !o.as_ref().is_err_and(|e| e.starts_with("not taken"))).count();
    assert_eq!(calls, taken, "measure runs each taken candidate once");
    out
}

#[test]
fn tuning_keeps_the_least_median_and_a_build_from_its_record_launches_it() {
    let g = gemm();
    for target in [&SM80, &SM90] {
        let t = tuned(&g, target);
        let d = &t[0];
        let last = d.decision.candidates.len() - 1;
        assert_eq!(d.best, Some(last), "{}", target.name);
        assert_eq!(d.outcomes[1].1, Err("differs from the interpreter".to_string()));
        assert_ne!(d.decision.analytic.as_ref(), Some(&d.outcomes[last].0), "the stand-in prefers another plan");

        let dir = temp(target.name);
        let mut cache: Cache<GpuRecord> = Cache::open(&dir).unwrap();
        let record = d.record("g at -".into(), machine(), "2026-11-29T00:00:00Z".into()).unwrap();
        assert_eq!((record.fault(), record.plan_fault()), (None, None));
        cache.put(record).unwrap();
        let cache: Cache<GpuRecord> = Cache::open(&dir).unwrap();
        assert_eq!(cache.len(), 1);

        let recorded = Recorded::new(Some(&cache), &cost::Analytic);
        let p = driver::lower_program_with(&g, target, &recorded).unwrap();
        assert_eq!(launched_plans(&p), [d.outcomes[last].0.clone()], "{}", target.name);
        assert_eq!(recorded.misses(), []);
        assert_eq!(recorded.miss_note("g"), None);

        // Without a record: the analytic plan, and a note naming the miss.
        let empty: Cache<GpuRecord> = Cache::open(&dir.join("none")).unwrap();
        let recorded = Recorded::new(Some(&empty), &cost::Analytic);
        let p = driver::lower_program_with(&g, target, &recorded).unwrap();
        assert_eq!(launched_plans(&p), [d.decision.analytic.clone().unwrap()]);
        assert_eq!(recorded.misses().len(), 1);
        let note = recorded.miss_note("g").unwrap();
        assert!(note.contains("no GPU tuning record for 1 plan decision (first: f16 m=256"), "{note}");
        // Without a cache (a build not asked to read one): the analytic
        // plan, and no note.
        let none = Recorded::new(None, &cost::Analytic);
        let p = driver::lower_program_with(&g, target, &none).unwrap();
        assert_eq!(launched_plans(&p), [d.decision.analytic.clone().unwrap()]);
        assert_eq!((none.misses(), none.miss_note("g")), (Vec::new(), None));
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A record whose content was changed is refused with its file and why;
/// so is one re-digested by hand whose plan is not the least median.
#[test]
fn an_edited_gpu_record_is_refused() {
    let g = gemm();
    let t = tuned(&g, &SM80);
    let record = t[0].record("g at -".into(), machine(), "2026-11-29T00:00:00Z".into()).unwrap();
    let dir = temp("edited");
    let mut cache: Cache<GpuRecord> = Cache::open(&dir).unwrap();
    let path = cache.put(record.clone()).unwrap();
    let refused = |why: &str| match Cache::<GpuRecord>::open(&dir) {
        Err(CacheError::Refused { path: p, why: w }) => {
            assert_eq!(p, path);
            assert!(w.contains(why), "{w}");
        }
        other => panic!("{other:?}"),
    };

    let other = t[0].outcomes[0].0.clone();
    let text = std::fs::read_to_string(&path).unwrap();
    let edited = text.replacen(
        &serde_json::to_string(&record.plan).unwrap(),
        &serde_json::to_string(&crate::plan::print_dsl(&other)).unwrap(),
        1,
    );
    assert_ne!(edited, text);
    std::fs::write(&path, &edited).unwrap();
    refused("digest does not match");

    let mut forged = record.clone();
    forged.plan = crate::plan::print_dsl(&other);
    forged.set_digest(forged.compute_digest());
    std::fs::write(&path, serde_json::to_string(&forged).unwrap()).unwrap();
    refused("not the measured candidate of the least median");

    let mut moved = record.clone();
    moved.inputs.target = "sm90".into();
    moved.set_digest(moved.compute_digest());
    std::fs::write(&path, serde_json::to_string(&moved).unwrap()).unwrap();
    refused("key is not the hash of its inputs");

    // A CPU cache at the same folder reads no GPU record (they live in
    // `gpu/`), and a GPU record is no CPU record.
    std::fs::write(&path, serde_json::to_string(&record).unwrap()).unwrap();
    assert!(matches!(Cache::<super::Record>::open(&dir), Err(CacheError::Refused { .. })));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A convolution's decisions carry its `conv` key: its implicit GEMM's
/// plans are another decision than a GEMM's of the same sizes, and
/// Winograd's batched GEMM a third; pinning any candidate launches it,
/// Winograd's included (its transforms' estimate does not outweigh a pin).
#[test]
fn a_convolution_has_decisions_of_its_own_and_each_candidate_can_be_pinned() {
    let g = load(
        "graph c(x: f16[2, 8, 10, 10], w: f16[16, 8, 3, 3]) -> (y: f16[2, 16, 10, 10]) {\n    y = relu(conv2d(x, w, \
         pad=[1, 1]))\n    return y\n}\n",
    );
    let ds = decisions(&g, &SM80).unwrap();
    assert!(ds.len() >= 2, "{:?}", ds.iter().map(|d| &d.inputs.decision).collect::<Vec<_>>());
    let texts: Vec<&str> = ds.iter().map(|d| d.inputs.decision.as_str()).collect();
    assert!(texts.iter().all(|d| d.ends_with("algo [conv, matmul]")), "{texts:?}");
    let winograd = ds.iter().position(|d| {
        d.candidates.iter().any(|p| cost::algorithm(p, AlgoKey::Conv) == Some(crate::gpu::winograd::ALGO))
    });
    let w = winograd.expect("a Winograd decision");
    // The implicit GEMM's register allowance rejects the 64×64 warp tiles
    // after costing: pinned, they are not taken; the others are launched.
    let t =
        tune(&g, &SM80, vec![ds[w].clone()], &mut |p| Ok::<_, ()>(Ok(launched_plans(p).len() as u64)), &mut |_, _| {})
            .unwrap();
    for (plan, outcome) in &t[0].outcomes {
        let wide = plan.warp_tile.as_ref().is_some_and(|w| w.value == [64, 64]);
        match outcome {
            Ok(_) => assert!(!wide),
            Err(why) => assert!(wide && why.starts_with("not taken"), "{why}"),
        }
    }
    assert!(t[0].best.is_some());
}

#[test]
fn an_attention_decides_between_its_algorithms() {
    let g = load(
        "graph att(q: f16[1, 2, 128, 64], k: f16[1, 2, 128, 64], v: f16[1, 2, 128, 64]) -> (o: f16[1, 2, 128, 64]) \
         {\n    o = attention(q, k, v, causal=false)\n    return o\n}\n",
    );
    for target in [&SM80, &SM90] {
        let ds = decisions(&g, target).unwrap();
        assert_eq!(ds.len(), 1);
        assert!(ds[0].inputs.decision.ends_with("algo [attention]"), "{}", ds[0].inputs.decision);
        assert_eq!(ds[0].macs(), 2 * 128 * 128 * (64 + 64), "two batch points, both products");
        let algos: Vec<AttentionAlgo> = ds[0].candidates.iter().filter_map(cost::attention_algorithm).collect();
        assert!(algos.len() >= 2, "{algos:?}");
        let t = tune(&g, target, ds, &mut |p| Ok::<_, ()>(Ok(launched_plans(p).len() as u64)), &mut |_, _| {}).unwrap();
        assert!(
            t[0].outcomes.iter().all(|(_, o)| o.is_ok()),
            "every algorithm is taken when pinned: {:?}",
            t[0].outcomes
        );
    }
}

/// The build helper's and `kernel!`'s sm80 part (`emit::gpu_api::sm80_module`)
/// ranks its ShapeSet points' plans by the records: the point's variant
/// embeds the recorded plan (its `PLAN_JSON`), and an untuned point the
/// analytic one, noted as a miss. Needs the CUDA toolchain (NVRTC), as the
/// build does.
#[test]
fn the_sm80_module_of_a_build_embeds_the_recorded_plan() {
    let text = "graph<M=256> g(x: f16[M, 64], w: f16[64, 192], b: f16[192]) -> (y: f16[M, 192]) {\n    y = \
                relu(matmul(x, w) + b)\n    return y\n}\n";
    let symbolic = load(text);
    let t = tuned(&gemm(), &SM80);
    let d = &t[0];
    let won = d.outcomes[d.best.unwrap()].0.clone();
    let dir = temp("module");
    let mut cache: Cache<GpuRecord> = Cache::open(&dir).unwrap();
    cache.put(d.record("g at M=256".into(), machine(), "2026-11-29T00:00:00Z".into()).unwrap()).unwrap();
    let recorded = Recorded::new(Some(&cache), &cost::Analytic);
    let points: Vec<std::collections::BTreeMap<String, i64>> =
        [256, 128].iter().map(|&m| [("M".to_string(), m)].into_iter().collect()).collect();
    let module = crate::emit::gpu_api::sm80_module(
        &symbolic,
        &points,
        crate::emit::gpu_api::CubinSource::Inline,
        false,
        &recorded,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let embedded = |plan: &Plan| {
        let full =
            Plan { epilogue: [Epilogue::Bias, Epilogue::Relu].map(crate::plan::Spanned::new).to_vec(), ..plan.clone() };
        format!("pub const PLAN_JSON: Option<&str> = Some({:?});", crate::plan::to_json(&full))
    };
    assert!(module.text.contains(&embedded(&won)), "the tuned point's plan");
    let m128 = symbolic.bind(&points[1]).unwrap();
    let analytic = decisions(&m128, &SM80).unwrap()[0].analytic.clone().unwrap();
    assert!(module.text.contains(&embedded(&analytic)), "the untuned point's analytic plan");
    assert_eq!(recorded.misses().len(), 1, "M=128 has no record");
    assert!(recorded.misses()[0].1.starts_with("f16 m=128 "));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Two layers of the same GEMM + bias + ReLU then a softmax: no template
/// takes the graph whole, so tuning measures its regions as graphs of
/// their own; the second layer's decision is the first's (same problem),
/// measured once, and a later point that repeats it adds nothing. The
/// unit's candidates lower, pinned, to the unit's own few launches.
#[test]
fn a_model_is_tuned_region_by_region_and_a_repeated_layer_once() {
    let g = load(
        "graph mlp(x: f16[256, 64], w1: f16[64, 64], b1: f16[64], w2: f16[64, 64], b2: f16[64]) -> (y: f16[256, \
         64]) {\n    h = relu(matmul(x, w1) + b1)\n    z = relu(matmul(h, w2) + b2)\n    y = softmax(z, axis=1)\n    \
         return y\n}\n",
    );
    let whole = decisions(&g, &SM80).unwrap();
    assert_eq!(whole.len(), 1, "both layers are one decision");
    let mut seen = std::collections::BTreeSet::new();
    let units = units(&g, &SM80, &mut seen).unwrap();
    assert_eq!(units.len(), 1, "{:?}", units.iter().map(|u| &u.name).collect::<Vec<_>>());
    assert_eq!(units[0].decisions[0].key(), whole[0].key());
    assert!(units[0].graph.ids().count() < g.ids().count(), "a region, not the model");
    assert_eq!(seen.len(), 1);
    assert!(super::gpu::units(&g, &SM80, &mut seen).unwrap().is_empty(), "nothing new at a repeated point");

    let u = &units[0];
    let t =
        tune(&u.graph, &SM80, u.decisions.clone(), &mut |p| Ok::<_, ()>(Ok(p.launches.len() as u64)), &mut |_, _| {})
            .unwrap();
    assert!(t[0].outcomes.iter().any(|(_, o)| *o == Ok(1)), "one launch per pinned candidate: {:?}", t[0].outcomes);

    // A graph a template takes whole is its own unit.
    let mut seen = std::collections::BTreeSet::new();
    let whole_unit = super::gpu::units(&gemm(), &SM80, &mut seen).unwrap();
    assert_eq!(whole_unit.len(), 1);
    assert_eq!(whole_unit[0].name, "g");
}

/// `tgc tune --target --report`: one CSV line per candidate (the chosen
/// and the analytic plan marked, a failure's reason kept), and an SVG
/// with one dot per measured candidate the model costs.
#[test]
fn the_gpu_report_lists_every_candidate_and_plots_the_measured_ones() {
    let g = gemm();
    let t = tuned(&g, &SM80);
    let units = [super::report::GpuUnitReport { graph: "g", point: "M=256", tuned: &t }];
    let csv = super::report::gpu_csv(&units);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], super::report::GPU_CSV_HEADER);
    let d = &t[0];
    assert_eq!(lines.len(), 1 + d.outcomes.len());
    let cols = |l: &str| l.rsplit(',').take(2).map(str::to_string).collect::<Vec<_>>();
    assert_eq!(lines[1..].iter().filter(|l| cols(l)[0] == "true").count(), 1, "one chosen");
    assert_eq!(lines[1..].iter().filter(|l| cols(l)[1] == "true").count(), 1, "one analytic");
    assert!(lines[2].contains("\"differs from the interpreter\""), "{}", lines[2]);
    assert!(
        lines[1].contains(&format!(",{},{},0,", 2 * 256 * 192 * 64, (256 * 64 + 64 * 192 + 256 * 192) * 2)),
        "{}",
        lines[1]
    );
    let svg = super::report::gpu_svg(&units);
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    let measured = d.outcomes.iter().filter(|(_, o)| o.is_ok()).count();
    assert_eq!(svg.matches("<circle").count(), measured, "every measured candidate is costed by the model");
    assert_eq!(svg.matches("fill=\"#2a2\"").count(), 1, "the chosen plan in green");
}

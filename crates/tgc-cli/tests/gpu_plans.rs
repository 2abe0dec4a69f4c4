//! Every plan of the device's GEMM space run on the GPU against a CPU
//! reference: on an sm90 device the wgmma plans in all their forms (not
//! specialised, warp-specialised, persistent; the last two also in
//! clusters of two CTAs), whose producer/consumer ordering and persistent
//! tile walk the emulator runs in one order only;
//! on others the mma.sync space; and every attention plan (each softmax
//! algorithm on CTAs of 64 and 128 query rows) against the interpreter.
//! Without a GPU the tests say that they skipped; with `TGC_GPU=1`
//! (scripts/gpu_tests.sh) a missing GPU fails them.

#[path = "../src/gpu.rs"]
#[allow(dead_code)]
mod gpu;

use tgc_core::pipeline::{self, Format};
use tgc_core::plan::cost;
use tgc_core::plan::{Plan, Target};
use tgc_runtime::cuda::Gpu;
use tgc_runtime::{DType, HostTensor};

/// The GPU tier's rules (`scripts/gpu_tests.sh`).
mod gpu_tier {
    include!("../../../tests/support/gpu_tier.rs");
}

/// `values` rounded to f16, as the device sees them.
fn f16_rounded(shape: &[usize], values: &[f64]) -> (HostTensor, Vec<f64>) {
    let t = HostTensor::from_f64(DType::F16, shape, values).expect("an f16 tensor");
    let rounded = t.to_f64_vec();
    (t, rounded)
}

/// `relu(round(x · w) + b)` rounded to f16, in f64 from the rounded
/// inputs: the graph's semantics (the product is an f16 tensor before the
/// bias is added).
fn reference(x: &[f64], w: &[f64], b: &[f64], [m, n, k]: [usize; 3]) -> Vec<f64> {
    let mut sums = vec![0.0; m * n];
    for i in 0..m {
        for p in 0..k {
            let a = x[i * k + p];
            for j in 0..n {
                sums[i * n + j] += a * w[p * n + j];
            }
        }
    }
    let (_, sums) = f16_rounded(&[m, n], &sums);
    let out: Vec<f64> = sums.iter().enumerate().map(|(at, s)| (s + b[at % n]).max(0.0)).collect();
    f16_rounded(&[m, n], &out).1
}

/// A GEMM + bias + ReLU in f16 with more 128 × 128 tiles (17 × 10) than an
/// H100 or H200 has SMs (132), so persistent CTAs walk two tiles, and tails
/// on every axis (rows 16-byte aligned, so TMA copies them).
const M: usize = 2120;
const N: usize = 1256;
const K: usize = 200;

fn graph() -> tgc_core::tiny::Graph {
    let text = format!(
        "graph g(x: f16[{M}, {K}], w: f16[{K}, {N}], b: f16[{N}]) -> (y: f16[{M}, {N}]) {{\n    \
         y = relu(matmul(x, w) + b)\n    return y\n}}\n"
    );
    pipeline::load(&text, Format::Dsl, None).expect("the graph loads").graph
}

/// The candidates of the GEMM's space on `target`, each checked to lower,
/// pinned, to one tensor-core launch with that plan (what the GPU part
/// runs); on sm90 all five forms are among them (the three of the module
/// doc, the specialised two also with `cluster=2`).
fn pinned_plans(graph: &tgc_core::tiny::Graph, target: &Target) -> Vec<Plan> {
    let gg = tgc_core::gpu::mma::recognise::match_gemm(graph).expect("a GEMM");
    let choice = tgc_core::gpu::mma::lower::choose(&gg, target, &cost::Analytic).expect("a plan space");
    let mut forms = std::collections::BTreeSet::new();
    for (plan, _) in &choice.candidates {
        let p =
            tgc_core::gpu::driver::lower_program_with(graph, target, &cost::PinnedPlan(plan)).expect("the plan lowers");
        assert_eq!(p.launches.len(), 1);
        assert_eq!(p.launches[0].form, tgc_core::gpu::program::Form::Gemm);
        // The launch's plan is the candidate with the graph's epilogue.
        let launched = p.launches[0].plan.clone().expect("a tensor-core launch has its plan");
        assert_eq!(Plan { epilogue: Vec::new(), ..launched.clone() }, *plan);
        assert_eq!(launched.epilogue.iter().map(|e| e.value.name()).collect::<Vec<_>>(), ["bias", "relu"]);
        forms.insert(tgc_core::plan::plan_shape(plan)[4].clone());
    }
    if target.name == "sm90" {
        let forms: Vec<String> = forms.into_iter().collect();
        assert_eq!(forms, ["-", "ws", "ws2", "wsp", "wsp2"], "every form is a candidate");
    }
    choice.candidates.into_iter().map(|(p, _)| p).collect()
}

/// GPU 0, or `None` after saying that `test` skipped; without a GPU under
/// `TGC_GPU=1` (scripts/gpu_tests.sh) a panic.
fn device(test: &str) -> Option<Gpu> {
    match Gpu::new(0) {
        Ok(g) => Some(g),
        Err(e) if !gpu_tier::required() => {
            eprintln!("{test}: skipped, no GPU: {e}");
            None
        }
        Err(e) => panic!("TGC_GPU=1 but no GPU: {e}"),
    }
}

#[test]
fn every_sm90_form_lowers_pinned_to_its_own_launch() {
    let plans = pinned_plans(&graph(), &tgc_core::plan::target::SM90);
    assert_eq!(plans.len(), 55);
}

#[test]
fn every_plan_of_the_device_space_matches_a_cpu_reference() {
    let Some(gpu) = device("every_plan_of_the_device_space") else { return };
    let (m, n, k) = (M, N, K);
    let graph = graph();
    let target = gpu::device_target(gpu.sm());
    let plans = pinned_plans(&graph, target);
    let values = |seed, len| tgc_runtime::tensor::sample_values(seed, len);
    let (xt, x) = f16_rounded(&[m, k], &values(1, m * k));
    let (wt, w) = f16_rounded(&[k, n], &values(2, k * n));
    let (bt, b) = f16_rounded(&[n], &values(3, n));
    let want = reference(&x, &w, &b, [m, n, k]);
    for (i, plan) in plans.iter().enumerate() {
        let shape = tgc_core::plan::plan_shape(plan).join(" ");
        let mut c = gpu::Compiled::for_target(&gpu, &graph, &format!("plan{i}"), &cost::PinnedPlan(plan), target)
            .unwrap_or_else(|e| panic!("plan {shape}: {e:?}"));
        c.upload(&[xt.clone(), wt.clone(), bt.clone()]).unwrap_or_else(|e| panic!("plan {shape}: {e:?}"));
        c.run().unwrap_or_else(|e| panic!("plan {shape}: {e:?}"));
        let got = c.download().unwrap_or_else(|e| panic!("plan {shape}: {e:?}"))[0].to_f64_vec();
        for (at, (g, r)) in got.iter().zip(&want).enumerate() {
            assert!((g - r).abs() <= 1e-2 + 1e-2 * r.abs(), "plan {shape}: y[{}, {}] = {g}, want {r}", at / n, at % n);
        }
        eprintln!("plan {shape}: matches");
    }
    gpu_tier::compared(&format!("gpu_plans: every GEMM plan of {} ({})", target.name, plans.len()));
}

/// An f16 attention with tails on both sequence axes (130 queries and keys,
/// head dim 64, causal): its plans on `target` (each softmax algorithm on
/// CTAs of 64 and 128 query rows), each checked to lower, pinned, to one
/// attention launch with that plan.
fn attention_plans(target: &Target) -> (tgc_core::tiny::Graph, Vec<Plan>) {
    let text = "graph att(q: f16[1, 2, 130, 64], k: f16[1, 2, 130, 64], v: f16[1, 2, 130, 64]) -> (o: f16[1, 2, 130, \
                64]) {\n    o = attention(q, k, v, causal=true)\n    return o\n}\n";
    let graph = pipeline::load(text, Format::Dsl, None).expect("the graph loads").graph;
    let ds = tgc_core::tune::gpu::decisions(&graph, target).expect("the attention lowers");
    let [d] = &ds[..] else { panic!("one decision: {ds:?}") };
    for plan in &d.candidates {
        let p = tgc_core::gpu::driver::lower_program_with(&graph, target, &cost::PinnedPlan(plan)).expect("it lowers");
        assert_eq!(p.launches.len(), 1);
        assert_eq!(p.launches[0].form, tgc_core::gpu::program::Form::Attention);
        assert_eq!(p.launches[0].plan.as_ref(), Some(plan));
    }
    let rows: std::collections::BTreeSet<u64> =
        d.candidates.iter().filter_map(|p| p.tile.as_ref().map(|t| t.value[0])).collect();
    assert_eq!(rows.into_iter().collect::<Vec<_>>(), [64, 128]);
    (graph, d.candidates.clone())
}

#[test]
fn every_attention_plan_lowers_pinned_to_its_own_launch() {
    for target in [&tgc_core::plan::target::SM80, &tgc_core::plan::target::SM90] {
        assert_eq!(attention_plans(target).1.len(), 4, "{}", target.name);
    }
}

/// Every attention plan of the device's target on the GPU against the
/// interpreter (`1e-2` relative and absolute); skipped without a GPU, a
/// failure without one under `TGC_GPU=1`.
#[test]
fn every_attention_plan_of_the_device_matches_the_interpreter() {
    let Some(gpu) = device("every_attention_plan_of_the_device") else { return };
    let target = gpu::device_target(gpu.sm());
    let (graph, plans) = attention_plans(target);
    let inputs = pipeline::sample_inputs(&graph).expect("inputs");
    let want = pipeline::run_interp(&graph, &inputs).expect("the interpreter runs")[0].to_f64_vec();
    for (i, plan) in plans.iter().enumerate() {
        let shape = format!("{:?} rows {:?}", cost::attention_algorithm(plan), plan.tile.as_ref().map(|t| t.value[0]));
        let mut c = gpu::Compiled::for_target(&gpu, &graph, &format!("att{i}"), &cost::PinnedPlan(plan), target)
            .unwrap_or_else(|e| panic!("{shape}: {e:?}"));
        c.upload(&inputs).unwrap_or_else(|e| panic!("{shape}: {e:?}"));
        c.run().unwrap_or_else(|e| panic!("{shape}: {e:?}"));
        let got = c.download().unwrap_or_else(|e| panic!("{shape}: {e:?}"))[0].to_f64_vec();
        for (at, (g, r)) in got.iter().zip(&want).enumerate() {
            assert!((g - r).abs() <= 1e-2 + 1e-2 * r.abs(), "{shape}: o[{at}] = {g}, want {r}");
        }
        eprintln!("{shape}: matches");
    }
    gpu_tier::compared(&format!("gpu_plans: every attention plan of {} ({})", target.name, plans.len()));
}

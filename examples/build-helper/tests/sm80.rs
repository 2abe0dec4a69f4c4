//! With feature `sm80` (`cargo test -p tgc-build-demo --features sm80`):
//! the build helper's `sm80` modules (the GEMM's, and the whole softmax
//! graph's SIMT kernels) compile, check their arguments before any driver
//! call, and run on the GPU when there is one (else `NoDevice`, and the GPU
//! half is reported skipped); the model `mlp` gets `sm80::Model` (its
//! ConstPool on the device, a CUDA Graph per shape cluster).
#![cfg(feature = "sm80")]

use tgc::half::f16;
use tgc::Error;
use tgc_build_demo::{gemm_f16, mlp, softmax_rows};

/// The GPU tier's rules (`scripts/gpu_tests.sh`): under `TGC_GPU=1` a
/// missing GPU fails, and each GPU comparison that ran is counted.
mod gpu_tier {
    include!("../../../tests/support/gpu_tier.rs");
}

struct Fake(usize, u64);

impl tgc::cuda::DeviceArg<f16> for Fake {
    fn elems(&self) -> usize {
        self.0
    }
    fn address(&self) -> u64 {
        self.1
    }
}

impl tgc::cuda::DeviceArgMut<f16> for Fake {}

#[test]
fn the_build_helpers_launch_functions_check_then_need_a_device() {
    let (x, w, b, y) = (Fake(128 * 64, 0x1000), Fake(64 * 64, 0x9000), Fake(64, 0xd000), Fake(128 * 64, 0xe000));
    assert!(gemm_f16::sm80::check(&x, &w, &b, &y, 128, 64, 64).is_ok());
    let e = gemm_f16::sm80::check(&x, &Fake(64 * 64, 0x9004), &b, &y, 128, 64, 64).unwrap_err();
    assert_eq!(e, Error::Misaligned { arg: "w".into(), align: 16 });

    let xs: Vec<f16> = (0..128 * 64).map(|i| f16::from_f32((i % 7) as f32 - 3.0)).collect();
    let ws: Vec<f16> = (0..64 * 64).map(|i| f16::from_f32((i % 5) as f32 - 2.0)).collect();
    let bs: Vec<f16> = (0..64).map(|i| f16::from_f32((i % 3) as f32)).collect();
    let mut want = vec![f16::ZERO; 128 * 64];
    gemm_f16::run(&xs, &ws, &bs, &mut want, 128, 64, 64).unwrap();
    let mut got = vec![f16::ZERO; 128 * 64];
    match gemm_f16::sm80::run_on_gpu(&xs, &ws, &bs, &mut got, 128, 64, 64) {
        Err(Error::NoDevice(why)) if !gpu_tier::required() => {
            eprintln!("skipped the GPU half of this test: {why}")
        }
        Err(e) => panic!("{e}"),
        // Small integers: exact in f16 and in the f32 sum.
        Ok(()) => {
            assert_eq!(got, want);
            gpu_tier::compared("build-helper sm80: f16 GEMM run_on_gpu");
        }
    }
}

/// The softmax graph's shape fact `L = R * C` is checked before any
/// launch, as `run` checks it; then its kernels run on the GPU or report
/// `NoDevice`.
#[test]
fn a_whole_graph_checks_its_shape_facts_then_needs_a_device() {
    let (r, c) = (5usize, 37usize);
    let (logits, p) = (Fake(r * c, 0x1000), Fake(r * c, 0x2000));
    assert!(softmax_rows::sm80::check(&logits, &p, r, c, r * c).is_ok());
    let e = softmax_rows::sm80::check(&logits, &p, r, c, r * c + 1).unwrap_err();
    assert!(matches!(e, Error::DimMismatch { .. }), "{e}");
    assert!(matches!(softmax_rows::sm80::steps(r, c, 7), Err(Error::DimMismatch { .. })));

    let x: Vec<f16> = (0..r * c).map(|i| f16::from_f32(((i * 7) % 11) as f32 / 4.0 - 1.0)).collect();
    let mut want = vec![f16::ZERO; r * c];
    softmax_rows::run(&x, &mut want, r, c, r * c).unwrap();
    let mut got = vec![f16::ZERO; r * c];
    match softmax_rows::sm80::run_on_gpu(&x, &mut got, r, c, r * c) {
        Err(Error::NoDevice(why)) if !gpu_tier::required() => {
            eprintln!("skipped the GPU half of this test: {why}")
        }
        Err(e) => panic!("{e}"),
        // One f16 ulp: the warp reduction sums in another order.
        Ok(()) => {
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!((g.to_f32() - w.to_f32()).abs() <= 1e-3, "p[{i}]: GPU {g}, CPU {w}");
            }
            gpu_tier::compared("build-helper sm80: softmax graph run_on_gpu");
        }
    }
}

/// The model `mlp` on the GPU: `sm80::Model::new` uploads the host model's
/// ConstPool; each dims tuple's first run launches directly, the second
/// captures a CUDA Graph, later runs replay it — each giving the host
/// model's outputs (to the f32 rounding of another summation order). The
/// wall time of direct launches against replays is printed: the launch
/// overhead a graph saves.
#[test]
fn the_gpu_model_runs_each_cluster_directly_then_captured_then_replayed() {
    let weights: Vec<Vec<f32>> = mlp::WEIGHTS
        .iter()
        .enumerate()
        .map(|(k, w)| (0..w.elements().unwrap()).map(|i| ((i * 7 + k * 3) % 13) as f32 / 8.0 - 0.75).collect())
        .collect();
    let host = mlp::Model::init(&mut |spec: &tgc::model::WeightSpec, dst: &mut [u8]| {
        let k = mlp::WEIGHTS.iter().position(|s| s == spec).unwrap();
        tgc::model::write_weight(spec, dst, &weights[k])
    })
    .unwrap();
    let mut gpu = match mlp::sm80::Model::new(&host) {
        Err(Error::NoDevice(why)) if !gpu_tier::required() => {
            eprintln!("skipped the GPU half of this test: {why}");
            return;
        }
        Err(e) => panic!("{e}"),
        Ok(m) => m,
    };
    assert_eq!(gpu.const_pool().size_bytes(), host.const_pool().size_bytes());
    for (cluster, b) in [4usize, 3].into_iter().enumerate() {
        let x: Vec<f32> = (0..b * 16).map(|i| ((i * 5) % 9) as f32 / 4.0 - 1.0).collect();
        let mut want = vec![0.0f32; b * 8];
        host.run(&x, &mut want, b).unwrap();
        for run in 0..4 {
            let mut got = vec![f32::NAN; b * 8];
            gpu.run(&x, &mut got, b).unwrap_or_else(|e| panic!("B = {b}, run {run}: {e}"));
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!((g - w).abs() <= 1e-4 * (1.0 + w.abs()), "B = {b}, run {run}, y[{i}]: GPU {g}, CPU {w}");
            }
            assert_eq!(gpu.captured(), cluster + usize::from(run >= 1), "B = {b}, run {run}");
        }
    }
    gpu_tier::compared("build-helper sm80: mlp sm80::Model direct, captured, replayed");
    let b = 4;
    let x = vec![0.5f32; b * 16];
    let mut y = vec![0.0f32; b * 8];
    let reps = 200;
    let t = std::time::Instant::now();
    for _ in 0..reps {
        mlp::sm80::run_on_gpu(&x, &weights[0], &weights[1], &weights[2], &weights[3], &mut y, b).unwrap();
    }
    let direct = t.elapsed() / reps;
    let t = std::time::Instant::now();
    for _ in 0..reps {
        gpu.run(&x, &mut y, b).unwrap();
    }
    let replayed = t.elapsed() / reps;
    eprintln!("mlp at B = {b}: run_on_gpu (device opened, weights uploaded, direct launches) {direct:?} per run; sm80::Model::run (replayed graph) {replayed:?}");
}

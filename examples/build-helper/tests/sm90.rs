//! With feature `sm90` (`cargo test -p tgc-build-demo --features sm90`):
//! the build helper's `sm80` modules also hold the sm90 twins of their
//! tensor-core variants (the MMA template's TMA + wgmma kernels, an
//! sm_90a cubin), and `steps_for` — what `launch` calls with the device's
//! architecture — picks the twin on a 9.x device and the sm80 kernels
//! elsewhere. Tested without a GPU on the choice function; the launch
//! itself needs a device (`NoDevice` here, a run under `TGC_GPU=1`).
#![cfg(feature = "sm90")]

use tgc::cuda::{BufferArg, MapArg, StepArg};
use tgc::half::f16;
use tgc::{DType, Error};
use tgc_build_demo::gemm_f16;

/// The GPU tier's rules (`scripts/gpu_tests.sh`): under `TGC_GPU=1` a
/// missing GPU fails, and each GPU comparison that ran is counted.
mod gpu_tier {
    include!("../../../tests/support/gpu_tier.rs");
}

#[test]
fn steps_pick_the_sm90_twin_on_a_9x_device_and_the_sm80_kernels_elsewhere() {
    let sms = |m: &tgc::cuda::Module| m.cubins.iter().map(|c| c.sm).collect::<Vec<_>>();
    // The ShapeSet point M=128, N=64, K=64.
    let (m90, s90) = gemm_f16::sm80::steps_for(90, 128, 64, 64).unwrap();
    assert_eq!((sms(m90), m90.name), (vec![90], "tgc_build_demo::gemm_f16::sm80::shape_0_sm90"));
    assert!(gemm_f16::sm80::shape_0_sm90::PTX.contains(".target sm_90a"));
    assert!(gemm_f16::sm80::shape_0_sm90::PTX.contains("wgmma.mma_async"));
    let maps: Vec<MapArg> = s90.steps[0]
        .args
        .iter()
        .filter_map(|a| match a {
            StepArg::TensorMap(m) => Some(*m),
            _ => None,
        })
        .collect();
    // x [128, 64] in boxes of 64 x 64 rows (the model's 64-row tile for
    // M = 128: two CTAs rather than one, which the model puts in a cluster
    // sharing w), w [64, 64] (K x N) in 64-column atoms of which each CTA
    // of the pair copies 32 of the 64 K rows and multicasts them, both f16
    // with the 128-byte swizzle.
    let x = MapArg {
        buffer: BufferArg::Tensor(0),
        dtype: DType::F16,
        dims: [64, 128],
        row_stride_bytes: 128,
        box_dims: [64, 64],
        swizzle_128b: true,
    };
    let w = MapArg { buffer: BufferArg::Tensor(1), dims: [64, 64], box_dims: [64, 32], ..x };
    assert_eq!(maps, [x, w]);
    assert_eq!((s90.steps[0].launch.cluster, s90.steps[0].launch.grid[0] % 2), (2, 0));
    for sm in [80, 86, 89, 100] {
        let (m, steps) = gemm_f16::sm80::steps_for(sm, 128, 64, 64).unwrap();
        assert_eq!((sms(m), m.name), (vec![80], "tgc_build_demo::gemm_f16::sm80::shape_0"), "sm {sm}");
        assert_eq!(steps, gemm_f16::sm80::steps(128, 64, 64).unwrap().1);
    }
    // Other sizes have no twin: the generic kernels on every device.
    let (m, _) = gemm_f16::sm80::steps_for(90, 100, 64, 64).unwrap();
    assert_eq!(m.name, "tgc_build_demo::gemm_f16::sm80::generic");
    // The checks come before the choice.
    assert!(matches!(gemm_f16::sm80::steps_for(90, 0, 64, 64), Err(Error::InvalidDim { .. })));
}

#[test]
fn the_launch_needs_a_device() {
    let (x, w, b) = (vec![f16::ONE; 128 * 64], vec![f16::ONE; 64 * 64], vec![f16::ZERO; 64]);
    let mut y = vec![f16::ZERO; 128 * 64];
    match gemm_f16::sm80::run_on_gpu(&x, &w, &b, &mut y, 128, 64, 64) {
        Err(Error::NoDevice(why)) if !gpu_tier::required() => {
            eprintln!("skipped the GPU half of this test: {why}")
        }
        Err(e) => panic!("{e}"),
        // Sums of 64 ones: exact.
        Ok(()) => {
            assert!(y.iter().all(|v| v.to_f32() == 64.0), "{:?}", &y[..8]);
            gpu_tier::compared("build-helper sm90: f16 GEMM run_on_gpu through launch's choice");
        }
    }
}

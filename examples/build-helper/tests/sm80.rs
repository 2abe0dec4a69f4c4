//! With feature `sm80` (`cargo test -p tgc-build-demo --features sm80`):
//! the build helper's `sm80` modules (the GEMM's, and the whole softmax
//! graph's SIMT kernels) compile, check their arguments before any driver
//! call, and run on the GPU when there is one (else `NoDevice`, and the GPU
//! half is reported skipped).
#![cfg(feature = "sm80")]

use tgc::half::f16;
use tgc::Error;
use tgc_build_demo::{gemm_f16, softmax_rows};

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
        Err(Error::NoDevice(why)) if std::env::var("TGC_GPU").as_deref() != Ok("1") => {
            eprintln!("skipped the GPU half of this test: {why}")
        }
        Err(e) => panic!("{e}"),
        // Small integers: exact in f16 and in the f32 sum.
        Ok(()) => assert_eq!(got, want),
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
        Err(Error::NoDevice(why)) if std::env::var("TGC_GPU").as_deref() != Ok("1") => {
            eprintln!("skipped the GPU half of this test: {why}")
        }
        Err(e) => panic!("{e}"),
        // One f16 ulp: the warp reduction sums in another order.
        Ok(()) => {
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!((g.to_f32() - w.to_f32()).abs() <= 1e-3, "p[{i}]: GPU {g}, CPU {w}");
            }
        }
    }
}

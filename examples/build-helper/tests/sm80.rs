//! With feature `sm80` (`cargo test -p tgc-build-demo --features sm80`):
//! the build helper's `gemm_f16::sm80` module compiles, checks its
//! arguments before any driver call, and runs on the GPU when there is one
//! (else `NoDevice`, and the GPU half is reported skipped).
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
    assert!(softmax_rows::SM80_SKIPPED.starts_with("no sm80 kernel"), "{}", softmax_rows::SM80_SKIPPED);

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

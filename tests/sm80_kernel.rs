//! `tgc::kernel!` with feature `sm80` embeds the GEMM's sm_80 cubin and PTX,
//! compiled by NVRTC while this test crate was built, with typed launch
//! functions. Without a GPU the argument checks are tested with fake device
//! buffers and the launch reports `NoDevice`; with one (the GPU tier,
//! `scripts/gpu_tests.sh`) the kernel runs and is compared with the CPU
//! `run`. Run by `scripts/test.sh` as
//! `cargo test -p tgc --features sm80 --test sm80_kernel`.
#![cfg(feature = "sm80")]

tgc::kernel!(gemm:
    graph<M, N=128, K=64> gemm(x: f16[M, K], w: f16[K, N], bias: f16[N]) -> (y: f16[M, N]) {
        y = relu(matmul(x, w) + bias)
        return y
    },
    shapes(M = 200)
);

tgc::kernel!(scale:
    graph<N=4> main(x: f32[N]) -> (y: f32[N]) {
        y = x * 2.0
        return y
    }
);

#[test]
fn the_gemm_module_holds_its_cubin_and_ptx() {
    assert_eq!(&gemm::sm80::CUBIN[..4], b"\x7fELF");
    assert_eq!(gemm::sm80::SYMBOL, "tgc_gemm");
    assert!(gemm::sm80::PTX.contains(".target sm_80"));
    assert!(gemm::sm80::PTX.contains(".entry tgc_gemm("));
    assert!(gemm::sm80::PTX.contains("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"));
    // The plan the cost model picks for 200×128×64: warps of 32 threads,
    // the operand ring in dynamic shared memory.
    let (threads, smem) = (gemm::sm80::THREADS, gemm::sm80::SMEM_BYTES);
    assert!(threads.is_multiple_of(32) && (4096..=98304).contains(&smem), "{threads} threads, {smem} bytes");
    assert!(gemm::sm80::PLAN_JSON.contains("\"relu\""));
    let m = &gemm::sm80::MODULE;
    assert_eq!((m.name, m.ptx.len()), ("tgc_gemm", gemm::sm80::PTX.len()));
    let cubin = tgc::cuda::pick_cubin(m.cubins, 86).expect("sm_80 code runs on sm_86");
    assert_eq!(cubin.image, gemm::sm80::CUBIN);
}

use tgc::half::{bf16, f16};
use tgc::Error;

tgc::kernel!(gemm_bf16:
    graph<M, N=64, K=32> gemm(x: bf16[M, K], w: bf16[K, N]) -> (y: bf16[M, N]) {
        y = matmul(x, w)
        return y
    },
    shapes(M = 48)
);

/// `TGC_GPU=1` (scripts/gpu_tests.sh): the GPU tier must run, so a missing
/// GPU fails the test instead of skipping its GPU half.
fn gpu_required() -> bool {
    std::env::var("TGC_GPU").is_ok_and(|v| v == "1")
}

/// A device buffer with a chosen length and address: no GPU needed.
struct Fake(usize, u64);

impl<T> tgc::cuda::DeviceArg<T> for Fake {
    fn elems(&self) -> usize {
        self.0
    }
    fn address(&self) -> u64 {
        self.1
    }
}

impl<T> tgc::cuda::DeviceArgMut<T> for Fake {}

/// `x`, `w`, `bias`, `y` of `gemm` at M = 200: right lengths, 256-byte aligned.
fn gemm_buffers() -> [Fake; 4] {
    [Fake(200 * 64, 0x10000), Fake(64 * 128, 0x20000), Fake(128, 0x30000), Fake(200 * 128, 0x40000)]
}

#[test]
fn launch_arguments_that_fit_pass_the_checks() {
    let [x, w, b, y] = gemm_buffers();
    assert_eq!(gemm::sm80::check(&x, &w, &b, &y, 200, 128, 64), Ok([0x10000, 0x20000, 0x30000, 0x40000]));
    assert_eq!(gemm::sm80::DIMS, [("M", 200), ("N", 128), ("K", 64)]);
    let l = gemm::sm80::LAUNCH;
    assert_eq!(
        (l.block[0] * l.block[1] * l.block[2], l.dynamic_smem_bytes),
        (gemm::sm80::THREADS, gemm::sm80::SMEM_BYTES)
    );
    assert!(l.grid.iter().all(|&g| g >= 1));
}

#[test]
fn a_buffer_of_the_wrong_length_is_refused() {
    let [x, w, _, y] = gemm_buffers();
    let e = gemm::sm80::check(&x, &w, &Fake(127, 0x30000), &y, 200, 128, 64).unwrap_err();
    assert_eq!(e, Error::LengthMismatch { arg: "bias".into(), expected: 128, got: 127 });
    let e = gemm::sm80::check(&x, &w, &Fake(128, 0x30000), &Fake(100 * 128, 0x40000), 200, 128, 64).unwrap_err();
    assert_eq!(e, Error::LengthMismatch { arg: "y".into(), expected: 25600, got: 12800 });
}

#[test]
fn a_dim_other_than_the_compiled_shape_is_refused() {
    let [x, w, b, y] = gemm_buffers();
    let e = gemm::sm80::check(&x, &w, &b, &y, 100, 128, 64).unwrap_err();
    assert_eq!(e, Error::DimMismatch { dim: "M".into(), expected: 200, got: 100 });
    assert!(matches!(gemm::sm80::check(&x, &w, &b, &y, 0, 128, 64), Err(Error::InvalidDim { .. })));
}

#[test]
fn a_misaligned_buffer_is_refused() {
    let [x, _, b, y] = gemm_buffers();
    // A view starting one f16 into an aligned allocation.
    let e = gemm::sm80::check(&x, &Fake(64 * 128, 0x20002), &b, &y, 200, 128, 64).unwrap_err();
    assert_eq!(e, Error::Misaligned { arg: "w".into(), align: 16 });
}

/// `run_on_gpu` against the CPU `run` (the reference tier's interpreter is
/// what `run` is tested against): `NoDevice` without a GPU, and then the
/// GPU half is reported skipped; with one, the results agree within f16/bf16
/// rounding of the f32 sum.
#[test]
fn run_on_gpu_matches_the_cpu_run_or_reports_no_device() {
    let (m, n, k) = (200usize, 128usize, 64usize);
    let x: Vec<f16> = (0..m * k).map(|i| f16::from_f32(((i * 7 % 13) as f32 - 6.0) / 8.0)).collect();
    let w: Vec<f16> = (0..k * n).map(|i| f16::from_f32(((i * 5 % 11) as f32 - 5.0) / 8.0)).collect();
    let b: Vec<f16> = (0..n).map(|i| f16::from_f32((i % 3) as f32 - 1.0)).collect();
    let mut want = vec![f16::ZERO; m * n];
    gemm::run(&x, &w, &b, &mut want, m, n, k).unwrap();
    let mut got = vec![f16::ZERO; m * n];
    // Wrong lengths are refused before the device is opened.
    let e = gemm::sm80::run_on_gpu(&x[1..], &w, &b, &mut got, m, n, k).unwrap_err();
    assert!(matches!(e, Error::LengthMismatch { .. }), "{e}");
    match gemm::sm80::run_on_gpu(&x, &w, &b, &mut got, m, n, k) {
        Err(Error::NoDevice(why)) if !gpu_required() => eprintln!("skipped the GPU half of this test: {why}"),
        Err(e) => panic!("{e}"),
        Ok(()) => {
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                let (g, w) = (g.to_f32(), w.to_f32());
                assert!((g - w).abs() <= 1e-2 * w.abs().max(1.0), "y[{i}]: GPU {g}, CPU {w}");
            }
        }
    }
    let xb: Vec<bf16> = (0..48 * 32).map(|i| bf16::from_f32((i % 5) as f32 - 2.0)).collect();
    let wb: Vec<bf16> = (0..32 * 64).map(|i| bf16::from_f32((i % 3) as f32 - 1.0)).collect();
    let mut want = vec![bf16::ZERO; 48 * 64];
    gemm_bf16::run(&xb, &wb, &mut want, 48, 64, 32).unwrap();
    let mut got = vec![bf16::ZERO; 48 * 64];
    match gemm_bf16::sm80::run_on_gpu(&xb, &wb, &mut got, 48, 64, 32) {
        Err(Error::NoDevice(why)) if !gpu_required() => {
            eprintln!("skipped the GPU half of this test (bf16): {why}")
        }
        Err(e) => panic!("{e}"),
        // Small integers: exact in bf16 and in the f32 sum.
        Ok(()) => assert_eq!(got, want),
    }
}

#[test]
fn a_graph_without_a_gemm_says_why() {
    assert!(scale::SM80_SKIPPED.contains("no GEMM contraction"), "{}", scale::SM80_SKIPPED);
    let mut y = [0.0f32; 4];
    scale::run(&[1.0, 2.0, 3.0, 4.0], &mut y, 4).unwrap();
    assert_eq!(y, [2.0, 4.0, 6.0, 8.0]);
}

/// The example of README.md's "GPU usage", as written there.
fn readme_example() -> Result<(), tgc::Error> {
    // Host slices: checks, uploads, launches on device 0, downloads.
    let (x, w, b) = (vec![f16::ONE; 200 * 64], vec![f16::ONE; 64 * 128], vec![f16::ZERO; 128]);
    let mut y = vec![f16::ZERO; 200 * 128];
    match gemm::sm80::run_on_gpu(&x, &w, &b, &mut y, 200, 128, 64) {
        Err(tgc::Error::NoDevice(why)) => eprintln!("no GPU: {why}"),
        other => other?,
    }
    let gpu = tgc::cuda::Gpu::new(0)?;
    let (dx, dw, db) = (gpu.upload(&x)?, gpu.upload(&w)?, gpu.upload(&b)?);
    let mut dy = gpu.upload(&y)?;
    gemm::sm80::launch(&gpu, &dx, &dw, &db, &mut dy, 200, 128, 64)?;
    let y = gpu.download(&dy)?; // waits for the kernel
    assert!(y.iter().all(|v| v.to_f32() == 64.0), "relu(ones · ones) = K");
    Ok(())
}

#[test]
fn the_readme_example_runs_or_reports_no_device() {
    match readme_example() {
        Err(Error::NoDevice(why)) if !gpu_required() => eprintln!("skipped the GPU half of this test: {why}"),
        other => other.unwrap(),
    }
}

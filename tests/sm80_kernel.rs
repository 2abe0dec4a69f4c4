//! `tgc::kernel!` with feature `sm80` embeds a graph's sm_80 cubins and
//! PTX (the GEMM's tensor-core kernel at its ShapeSet point, SIMT kernels
//! for every dim and for any graph), compiled by NVRTC while this test
//! crate was built, with typed launch functions. Without a GPU the argument checks are tested with fake device
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

tgc::kernel!(attention:
    graph<B, S, D=16> attn(q: f32[B, S, D], k: f32[B, S, D], v: f32[B, S, D]) -> (o: f32[B, S, D]) {
        o = matmul(softmax(matmul(q, permute(k, [0, 2, 1])) * 0.25, axis=-1), v)
        return o
    }
);

#[test]
fn the_gemm_module_holds_its_tensor_core_and_simt_kernels() {
    let m = &gemm::sm80::shape_0::MODULE;
    assert_eq!(&gemm::sm80::shape_0::CUBIN[..4], b"\x7fELF");
    assert_eq!(gemm::sm80::shape_0::KERNELS, ["gemm_gemm"]);
    let ptx = gemm::sm80::shape_0::PTX;
    assert!(ptx.contains(".target sm_80") && ptx.contains(".entry gemm_gemm("));
    assert!(ptx.contains("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"));
    assert!(gemm::sm80::shape_0::PLAN_JSON.is_some_and(|j| j.contains("\"relu\"")));
    assert_eq!((m.ptx.len(), m.name), (ptx.len(), "sm80_kernel::gemm::sm80::shape_0"));
    let cubin = tgc::cuda::pick_cubin(m.cubins, 86).expect("sm_80 code runs on sm_86");
    assert_eq!(cubin.image, gemm::sm80::shape_0::CUBIN);
    // Every other M: the SIMT kernels, no plan, no tensor cores.
    assert_eq!(gemm::sm80::generic::PLAN_JSON, None);
    assert!(!gemm::sm80::generic::PTX.contains("mma.sync"));
    assert_eq!(&gemm::sm80::generic::CUBIN[..4], b"\x7fELF");
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

/// The GPU tier's rules (`scripts/gpu_tests.sh`): under `TGC_GPU=1` a
/// missing GPU fails a test instead of skipping its GPU half, and each GPU
/// comparison that ran is counted.
mod gpu_tier {
    include!("support/gpu_tier.rs");
}
use gpu_tier::required as gpu_required;

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
    // At the ShapeSet point: the tensor-core kernel, one launch.
    let (module, steps) = gemm::sm80::steps(200, 128, 64).unwrap();
    assert!(std::ptr::eq(module, &gemm::sm80::shape_0::MODULE));
    let [step] = &steps.steps[..] else { panic!("{steps:?}") };
    assert_eq!(step.kernel, "gemm_gemm");
    let l = step.launch;
    assert!(l.grid.iter().all(|&g| g >= 1) && l.block[0] % 32 == 0 && l.dynamic_smem_bytes >= 4096, "{l:?}");
    use tgc::cuda::StepArg::{Tensor, I32};
    for want in [Tensor(0), Tensor(1), Tensor(2), Tensor(3), I32(200), I32(128), I32(64)] {
        assert!(step.args.contains(&want), "{want:?} not in {:?}", step.args);
    }
}

#[test]
fn other_dims_run_the_generic_kernels_after_the_same_checks() {
    let (m, n, k) = (37usize, 128usize, 64usize);
    let (x, w, b, y) = (Fake(m * k, 0x10000), Fake(k * n, 0x20000), Fake(n, 0x30000), Fake(m * n, 0x40000));
    assert!(gemm::sm80::check(&x, &w, &b, &y, m, n, k).is_ok());
    let (module, steps) = gemm::sm80::steps(m, n, k).unwrap();
    assert!(std::ptr::eq(module, &gemm::sm80::generic::MODULE));
    let names: Vec<&str> = steps.steps.iter().map(|s| &*s.kernel).collect();
    assert_eq!(names, gemm::sm80::generic::KERNELS);
    // The lengths follow the dims given, not the ShapeSet point's.
    let e = gemm::sm80::check(&Fake(200 * 64, 0x10000), &w, &b, &y, m, n, k).unwrap_err();
    assert_eq!(e, Error::LengthMismatch { arg: "x".into(), expected: m * k, got: 200 * 64 });
    assert!(matches!(gemm::sm80::check(&x, &w, &b, &y, 0, n, k), Err(Error::InvalidDim { .. })));
    assert!(matches!(gemm::sm80::steps(m, n, 0), Err(Error::InvalidDim { .. })));
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
fn a_misaligned_buffer_is_refused() {
    let [x, _, b, y] = gemm_buffers();
    // A view starting one f16 into an aligned allocation.
    let e = gemm::sm80::check(&x, &Fake(64 * 128, 0x20002), &b, &y, 200, 128, 64).unwrap_err();
    assert_eq!(e, Error::Misaligned { arg: "w".into(), align: 16 });
}

/// `run_on_gpu` against the CPU `run` (the reference tier's interpreter is
/// what `run` is tested against): `NoDevice` without a GPU, and then the
/// GPU half is reported skipped; with one, the results are the CPU's
/// exactly, on inputs for which no step rounds.
#[test]
fn run_on_gpu_matches_the_cpu_run_or_reports_no_device() {
    let (m, n, k) = (200usize, 128usize, 64usize);
    let x: Vec<f16> = (0..m * k).map(|i| f16::from_f32(((i * 7 % 13) as f32 - 6.0) / 8.0)).collect();
    let w: Vec<f16> = (0..k * n).map(|i| f16::from_f32(((i * 5 % 11) as f32 - 5.0) / 8.0)).collect();
    let b: Vec<f16> = (0..n).map(|i| f16::from_f32((i % 3) as f32 - 1.0)).collect();
    let mut want = vec![f16::ZERO; m * n];
    gemm::run(&x, &w, &b, &mut want, m, n, k).unwrap();
    // The inputs make the result exact (argued below): the CPU's f16
    // values are the f64 sums, unrounded.
    for (at, v) in want.iter().enumerate() {
        let (i, j) = (at / n, at % n);
        let sum: f64 = (0..k).map(|p| x[i * k + p].to_f64() * w[p * n + j].to_f64()).sum::<f64>() + b[j].to_f64();
        assert_eq!(v.to_f64(), sum.max(0.0), "y[{i}, {j}]");
    }
    let mut got = vec![f16::ZERO; m * n];
    // Wrong lengths are refused before the device is opened.
    let e = gemm::sm80::run_on_gpu(&x[1..], &w, &b, &mut got, m, n, k).unwrap_err();
    assert!(matches!(e, Error::LengthMismatch { .. }), "{e}");
    match gemm::sm80::run_on_gpu(&x, &w, &b, &mut got, m, n, k) {
        Err(Error::NoDevice(why)) if !gpu_required() => eprintln!("skipped the GPU half of this test: {why}"),
        Err(e) => panic!("{e}"),
        // x and w are multiples of 1/8 of magnitude at most 6/8 and 5/8:
        // each product a multiple of 1/64 of at most 30/64, so every
        // partial sum of the K = 64 steps (in any order, the tensor cores'
        // f32 accumulation included) is a multiple of 1/64 below 30 in
        // magnitude, and with the bias (-1, 0 or 1) below 31: fewer than
        // 31 · 64 = 1984 < 2^11 units of 1/64, exact in f16's 11-bit
        // significand. Neither side rounds: the bits agree
        // (`gpu::simt`'s `a_gemm_graph_takes_the_sm80_template_when_asked`
        // shows the same of the emulated template without a GPU).
        Ok(()) => {
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g.to_bits(), w.to_bits(), "y[{i}]: GPU {g}, CPU {w}");
            }
            gpu_tier::compared("sm80_kernel: f16 GEMM run_on_gpu");
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
        Ok(()) => {
            assert_eq!(got, want);
            gpu_tier::compared("sm80_kernel: bf16 GEMM run_on_gpu");
        }
    }
}

/// `attention::sm80::steps`, printed as Rust by the code generator, equals
/// what tgc-core computes from the same program (`GpuProgram::steps`) at
/// several dims, and so does the GEMM's at its ShapeSet point.
#[test]
fn the_printed_steps_are_the_programs_steps() {
    use tgc_core::gpu::driver;
    let g = tgc_core::tiny::json::load_json(attention::TINY_IR).unwrap();
    let prog = driver::lower_program(&g).unwrap();
    assert!(prog.launches.len() >= 3, "{} kernels", prog.launches.len());
    for (b, s, d) in [(1, 1, 16), (2, 7, 16), (3, 33, 5), (1, 130, 64)] {
        let (module, got) = attention::sm80::steps(b, s, d).unwrap();
        assert!(std::ptr::eq(module, &attention::sm80::generic::MODULE));
        let want = prog.steps(&[b as i64, s as i64, d as i64]).unwrap();
        assert_eq!(got, want, "B={b} S={s} D={d}");
    }
    let g = tgc_core::tiny::json::load_json(gemm::TINY_IR).unwrap();
    let point = [("M", 200), ("N", 128), ("K", 64)].map(|(n, v)| (n.to_string(), v)).into();
    let bound = g.bind(&point).unwrap();
    let prog = driver::lower_program_for(&bound, Some(&tgc_core::plan::target::SM80)).unwrap();
    assert_eq!(gemm::sm80::steps(200, 128, 64).unwrap().1, prog.steps(&[]).unwrap());
}

/// The generated launches of a whole graph — several kernels and device
/// temporaries — run one by one in the CPU emulator of the GPU dialect IR
/// exactly as `Gpu::run_steps` runs them (tensors numbered inputs then
/// outputs, temporaries zeroed with the bytes `steps` gives), compute what
/// the CPU `run` computes.
#[test]
fn the_printed_steps_run_in_the_emulator_match_the_cpu_run() {
    use tgc::cuda::StepArg;
    use tgc_core::gpu::dialect::ParamKind;
    use tgc_core::gpu::emulate::{self, Arg};
    let g = tgc_core::tiny::json::load_json(attention::TINY_IR).unwrap();
    let prog = tgc_core::gpu::driver::lower_program(&g).unwrap();
    let (b, s, d) = (2usize, 9usize, 16usize);
    let n = b * s * d;
    let data = |seed: usize| -> Vec<f32> { (0..n).map(|i| ((i * seed + 3) % 17) as f32 / 8.0 - 1.0).collect() };
    let (q, k, v) = (data(5), data(7), data(11));
    let mut want = vec![0f32; n];
    attention::run(&q, &k, &v, &mut want, b, s, d).unwrap();

    let (_, steps) = attention::sm80::steps(b, s, d).unwrap();
    let bytes = |x: &[f32]| -> Vec<u8> { x.iter().flat_map(|v| v.to_le_bytes()).collect() };
    let mut tensors = [bytes(&q), bytes(&k), bytes(&v), vec![0u8; n * 4]];
    let mut temps: Vec<Vec<u8>> = steps.temps.iter().map(|&bytes| vec![0u8; bytes]).collect();
    for step in &steps.steps {
        let launch = prog
            .launches
            .iter()
            .find(|l| l.kernel.symbol() == step.kernel)
            .unwrap_or_else(|| panic!("no kernel `{}`", step.kernel));
        let mut args: Vec<Arg> = step
            .args
            .iter()
            .map(|a| match *a {
                StepArg::Tensor(i) => Arg::Tensor(tensors[i].clone()),
                StepArg::Temp(t) => Arg::Tensor(temps[t].clone()),
                StepArg::I32(v) => Arg::Int(v as i64),
                StepArg::I64(v) => Arg::Int(v),
                StepArg::TensorMap(_) => Arg::TensorMap,
            })
            .collect();
        emulate::run(&launch.kernel, &mut args).unwrap_or_else(|e| panic!("`{}`: {e}", step.kernel));
        for ((a, p), arg) in step.args.iter().zip(&launch.kernel.params).zip(args) {
            if let (ParamKind::Ptr { writable: true, .. }, Arg::Tensor(out)) = (p.kind, arg) {
                match *a {
                    StepArg::Tensor(i) => tensors[i] = out,
                    StepArg::Temp(t) => temps[t] = out,
                    other => panic!("`{}` writes {other:?}", step.kernel),
                }
            }
        }
    }
    let got: Vec<f32> = tensors[3].chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!((g - w).abs() <= 1e-5 * (1.0 + w.abs()), "o[{i}]: emulated {g}, CPU {w}");
    }
}

/// A whole graph on the GPU through `run_on_gpu`: `NoDevice` without one
/// (the GPU half reported skipped), else the CPU `run`'s result within f32
/// rounding (the warp reductions sum in another order).
#[test]
fn attention_runs_on_the_gpu_or_reports_no_device() {
    let (b, s, d) = (3usize, 70usize, 16usize);
    let n = b * s * d;
    let data = |seed: usize| -> Vec<f32> { (0..n).map(|i| ((i * seed + 1) % 13) as f32 / 6.0 - 1.0).collect() };
    let (q, k, v) = (data(3), data(5), data(7));
    let mut want = vec![0f32; n];
    attention::run(&q, &k, &v, &mut want, b, s, d).unwrap();
    let mut got = vec![0f32; n];
    let e = attention::sm80::run_on_gpu(&q, &k[1..], &v, &mut got, b, s, d).unwrap_err();
    assert_eq!(e, Error::LengthMismatch { arg: "k".into(), expected: n, got: n - 1 });
    match attention::sm80::run_on_gpu(&q, &k, &v, &mut got, b, s, d) {
        Err(Error::NoDevice(why)) if !gpu_required() => eprintln!("skipped the GPU half of this test: {why}"),
        Err(e) => panic!("{e}"),
        Ok(()) => {
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!((g - w).abs() <= 1e-5 * (1.0 + w.abs()), "o[{i}]: GPU {g}, CPU {w}");
            }
            gpu_tier::compared("sm80_kernel: attention graph run_on_gpu");
        }
    }
}

/// The example of docs/gpu.md's "`kernel!` and the build helper with features
/// `sm80`, `sm90`", as written there.
fn readme_example() -> Result<(), tgc::Error> {
    // Host slices: checks, uploads, launches on device 0, downloads.
    let (x, w, b) = (vec![f16::ONE; 200 * 64], vec![f16::ONE; 64 * 128], vec![f16::ZERO; 128]);
    let mut y = vec![f16::ZERO; 200 * 128];
    match gemm::sm80::run_on_gpu(&x, &w, &b, &mut y, 200, 128, 64) {
        Err(tgc::Error::NoDevice(why)) => eprintln!("no GPU: {why}"),
        other => other?,
    }
    // Device buffers on a stream you keep: `launch` takes `&impl DeviceArg<T>`
    // (cudarc's CudaSlice/CudaView) for inputs and `&mut impl DeviceArgMut<T>`
    // for outputs, then the dims; it checks the dims as `run` does, each length
    // and 16-byte alignment before any driver call (`gemm::sm80::check` does
    // only that), and queues the kernels (M = 200: the tensor-core kernel).
    // The kernels go on `gpu`'s stream; `gpu.new_stream()?` is another
    // handle on the same device and loaded modules with a stream of its own.
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
        Err(e) => panic!("{e}"),
        Ok(()) => gpu_tier::compared("sm80_kernel: the README's GPU example"),
    }
}

/// With feature `sm90` (`cargo test -p tgc --features sm90 --test
/// sm80_kernel`, as `scripts/test.sh` runs it): the GEMM's ShapeSet point
/// also has its sm90 twin (TMA + wgmma, an sm_90a cubin), which
/// `steps_for` picks on a 9.x device and `launch` with the device's
/// architecture; the attention graph has no wgmma kernel, so no twin.
#[cfg(feature = "sm90")]
#[test]
fn the_sm90_twin_is_picked_on_a_9x_device() {
    let twin = &gemm::sm80::shape_0_sm90::MODULE;
    assert_eq!(twin.cubins.iter().map(|c| c.sm).collect::<Vec<_>>(), [90]);
    assert!(gemm::sm80::shape_0_sm90::PTX.contains(".target sm_90a"));
    assert!(gemm::sm80::shape_0_sm90::PTX.contains("cp.async.bulk.tensor.2d"));
    assert!(gemm::sm80::shape_0_sm90::PLAN_JSON.is_some_and(|j| j.contains("\"sm90\"")));
    assert_eq!(gemm::sm80::steps_for(90, 200, 128, 64).unwrap().0.name, twin.name);
    assert_eq!(gemm::sm80::steps_for(80, 200, 128, 64).unwrap().0.name, gemm::sm80::shape_0::MODULE.name);
    assert_eq!(gemm::sm80::steps_for(90, 100, 128, 64).unwrap().0.name, gemm::sm80::generic::MODULE.name);
    assert_eq!(
        attention::sm80::steps_for(90, 2, 8, 16).unwrap().0.name,
        attention::sm80::steps(2, 8, 16).unwrap().0.name
    );
}

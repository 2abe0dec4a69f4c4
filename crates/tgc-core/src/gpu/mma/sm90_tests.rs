//! The SM90 branch of the MMA template (TMA, mbarrier, `wgmma`) run on the
//! emulator against the reference interpreter and an f64 reference, and
//! the verifier and emulator on deliberately broken schedules (inputs as
//! in `tests`: multiples of 1/8, so sums are exact in f32).

use super::tests::{
    assert_close, edit, first, gemm, interp_gemm_bias_relu, reference, remove, run, run_kernel, run_ordered,
    run_with_stats, Case,
};
use crate::gpu::dialect::verify;
use crate::gpu::dialect::*;
use crate::gpu::emulate::{self, Arg};
use crate::gpu::mma::{self, BLayout, Gemm, GemmParams};
use crate::plan::{self, space, Epilogue, Plan, Spanned};
use crate::DType;

/// An sm90 plan: tile `BM × BN × 64`, the warpgroup tile `64 × BN`.
fn plan_sm90(bm: u64, bn: u64, stages: u64, epilogue: &[&str]) -> Plan {
    let mut p = space::gemm_plan(&plan::target::SM90, [bm, bn, 64], [64, bn], stages, 8);
    p.epilogue = epilogue.iter().map(|e| Spanned::new(Epilogue::parse(e, None).unwrap())).collect();
    p
}

/// GEMM + bias + ReLU in f16 and bf16 against the interpreter, B `[K,N]`
/// and `[N,K]`, each of {1, 17, 64, 127, 130, 256, 1000} on each axis
/// (Latin-square rows as in `tests::gemm_bias_relu_matches_interp`; 1000
/// with the other axes small, the emulator's time). Rows whose leading
/// dimensions are multiples of 8 elements take the TMA copies, the others
/// `cp.async`; both are asserted to occur.
#[test]
fn gemm_bias_relu_matches_interp() {
    let shapes: [(i64, i64, i64); 10] = [
        (1, 17, 64),
        (17, 64, 127),
        (64, 127, 130),
        (127, 130, 256),
        (130, 256, 1),
        (256, 1, 17),
        (1000, 17, 64),
        (64, 1000, 17),
        (17, 64, 1000),
        (130, 136, 256),
    ];
    let plan = plan_sm90(128, 128, 4, &["bias", "relu"]);
    let mut paths = [0; 2];
    for (i, &(m, n, k)) in shapes.iter().enumerate() {
        let layout = if i % 2 == 0 { BLayout::KN } else { BLayout::NK };
        for dt in [DType::F16, DType::BF16] {
            let case = Case::new(m, n, k);
            let g = gemm(dt, dt, layout, n, k);
            let (kernel, p) = mma::build(&plan, &g).unwrap();
            paths[p.tensor_maps.is_some() as usize] += 1;
            verify::verify(&kernel).unwrap_or_else(|e| panic!("{e:#?}\n{kernel}"));
            let what = format!("{} M={m} N={n} K={k} {layout:?}", dt.dsl_name());
            let got = run_kernel(&kernel, &p, &g, &case).unwrap_or_else(|e| panic!("{what}: {e}"));
            if layout == BLayout::KN {
                assert_close(&got, &interp_gemm_bias_relu(dt, &case), &what);
            }
            assert_close(&got, &reference(&plan, &g, &case), &what);
        }
    }
    assert!(paths[0] > 0 && paths[1] > 0, "cp.async and TMA kernels: {paths:?}");
}

/// Every plan of the sm90 space the plan checks accept builds a kernel
/// that verifies and computes the right result, B `[K,N]` and `[N,K]`
/// alternately, in bf16 with an f32 output, SiLU and a residual.
#[test]
fn every_valid_plan_of_the_sm90_space_runs() {
    let (m, n, k) = (72, 136, 200);
    let case = Case::new(m, n, k);
    let problem = plan::Problem::gemm(m as u64, n as u64, k as u64, DType::BF16);
    let sp = space::candidates(&problem, &plan::target::SM90);
    assert_eq!(sp.valid.len(), 45, "{:?}", sp.rejected);
    for (i, p) in sp.valid.iter().enumerate() {
        let mut p = p.clone();
        p.epilogue = [Epilogue::Bias, Epilogue::Silu, Epilogue::Residual].map(Spanned::new).to_vec();
        let layout = if i % 2 == 0 { BLayout::KN } else { BLayout::NK };
        let mut g = gemm(DType::BF16, DType::F32, layout, n, k);
        g.round_sum = false;
        let what = format!("plan {i} ({layout:?}):\n{}", plan::print_dsl(&p));
        let got = run(&p, &g, &case).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_close(&got, &reference(&p, &g, &case), &what);
    }
}

/// One CTA of 128 × 128 over two k-tiles: 2 k-tiles × 4 k-steps × 2
/// warpgroups `wgmma`s, two stages of A and B boxes by TMA.
#[test]
fn counts_of_one_tile() {
    let plan = plan_sm90(128, 128, 3, &[]);
    let g = gemm(DType::F16, DType::F16, BLayout::KN, 128, 128);
    let (kernel, p) = mma::build(&plan, &g).unwrap();
    let (_, stats) = run_with_stats(&kernel, &p, &g, &Case::new(128, 128, 128)).unwrap();
    assert_eq!((stats.ctas, stats.wgmma, stats.tma_bytes), (1, 16, 2 * (128 * 64 + 64 * 128) * 2));
    assert_eq!(stats.cp_async_bytes, 0);
    assert_eq!(kernel.smem_base_align(), 1024);
    assert_eq!(kernel.launch_smem_bytes(), kernel.smem_bytes + 1008);
}

/// A TMA kernel (f16, B `[K,N]`, bias + ReLU) and a shape with tails.
fn setup(k: i64) -> (Plan, Gemm, Case, Kernel, GemmParams) {
    let plan = plan_sm90(128, 128, 3, &["bias", "relu"]);
    let g = gemm(DType::F16, DType::F16, BLayout::KN, 136, k);
    let (kernel, p) = mma::build(&plan, &g).unwrap();
    (plan, g, Case::new(130, 136, k), kernel, p)
}

fn faults(k: &Kernel) -> Vec<(Fault, Option<u32>)> {
    verify::verify(k).err().unwrap_or_default().iter().map(|e| (e.fault, e.stmt)).collect()
}

#[test]
fn the_built_kernels_verify() {
    for k in [200, 127] {
        let (_, _, _, kernel, _) = setup(k);
        assert_eq!(faults(&kernel), vec![], "{kernel}");
    }
}

#[test]
fn a_missing_mbarrier_wait_is_caught_by_verifier_and_emulator() {
    let (_, g, case, mut kernel, p) = setup(200);
    let wgmma = first(&kernel, |s| matches!(s, Stmt::Sm90(Sm90Stmt::Wgmma { .. })));
    remove(&mut kernel.body, &|s| matches!(s, Stmt::Sm90(Sm90Stmt::MbarrierWait { .. })));
    // The wgmma's id is one less once the wait before it is gone.
    assert!(faults(&kernel).contains(&(Fault::IncompleteRead, Some(wgmma - 1))), "{:?}", faults(&kernel));
    let e = run_kernel(&kernel, &p, &g, &case).unwrap_err();
    assert_eq!(e.fault, Fault::IncompleteRead, "{e}");
}

#[test]
fn a_wrong_parity_is_caught_by_the_emulator() {
    let (_, g, case, mut kernel, p) = setup(200);
    let wait = first(&kernel, |s| matches!(s, Stmt::Sm90(Sm90Stmt::MbarrierWait { .. })));
    edit(&mut kernel.body, &mut |s| {
        if let Stmt::Sm90(Sm90Stmt::MbarrierWait { parity, .. }) = s {
            *parity = parity.clone().xor(1);
        }
    });
    assert_eq!(faults(&kernel), vec![]);
    // At k-tile 0 the wait for parity 1 passes at once: the wgmma reads a
    // stage whose copy has not landed.
    let e = run_kernel(&kernel, &p, &g, &case).unwrap_err();
    assert_eq!(e.fault, Fault::IncompleteRead, "{e}");
    assert!(e.stmt > Some(wait), "{e}");
}

#[test]
fn a_missing_wait_group_before_the_epilogue_is_caught() {
    let (_, g, case, mut kernel, p) = setup(200);
    remove(&mut kernel.body, &|s| matches!(s, Stmt::Sm90(Sm90Stmt::WgmmaWait { pending: 0 })));
    let f = faults(&kernel);
    assert!(!f.is_empty() && f.iter().all(|x| x.0 == Fault::IncompleteRead), "{f:?}");
    let e = run_kernel(&kernel, &p, &g, &case).unwrap_err();
    assert_eq!(e.fault, Fault::IncompleteRead, "{e}");
    assert!(e.message.contains("wgmma that uses it is in flight"), "{e}");
}

#[test]
fn a_descriptor_swizzle_that_does_not_match_the_tma_box_is_caught() {
    let (plan, g, case, mut kernel, p) = setup(200);
    let wgmma = first(&kernel, |s| matches!(s, Stmt::Sm90(Sm90Stmt::Wgmma { .. })));
    edit(&mut kernel.body, &mut |s| {
        if let Stmt::Sm90(Sm90Stmt::Wgmma { b, .. }) = s {
            b.start.swizzle = Swizzle::IDENTITY;
        }
    });
    assert!(faults(&kernel).contains(&(Fault::Swizzle, Some(wgmma))), "{:?}", faults(&kernel));
    // The emulator reads what such a descriptor addresses: the wrong
    // elements (or none it can decode).
    match run_kernel(&kernel, &p, &g, &case) {
        Err(e) => assert_eq!(e.fault, Fault::BadValue, "{e}"),
        Ok(got) => assert_ne!(got, reference(&plan, &g, &case)),
    }
}

#[test]
fn a_missing_wgmma_fence_is_caught() {
    let (_, g, case, mut kernel, p) = setup(200);
    remove(&mut kernel.body, &|s| matches!(s, Stmt::Sm90(Sm90Stmt::WgmmaFence)));
    assert!(faults(&kernel).iter().any(|f| f.0 == Fault::Race), "{:?}", faults(&kernel));
    assert_eq!(run_kernel(&kernel, &p, &g, &case).unwrap_err().fault, Fault::Race);
}

#[test]
fn a_missing_proxy_fence_after_cp_async_is_caught_by_the_emulator() {
    let (_, g, case, mut kernel, p) = setup(127);
    assert!(p.tensor_maps.is_none(), "K = 127: rows not 16-byte aligned, cp.async");
    remove(&mut kernel.body, &|s| matches!(s, Stmt::Sm90(Sm90Stmt::FenceProxyAsync)));
    let e = run_kernel(&kernel, &p, &g, &case).unwrap_err();
    assert_eq!(e.fault, Fault::Race, "{e}");
    assert!(e.message.contains("fence.proxy.async"), "{e}");
}

#[test]
fn an_expect_tx_short_of_the_copies_is_caught() {
    let (_, g, case, mut kernel, p) = setup(200);
    edit(&mut kernel.body, &mut |s| {
        if let Stmt::Sm90(Sm90Stmt::MbarrierArriveExpectTx { bytes, .. }) = s {
            *bytes += 1024;
        }
    });
    let e = run_kernel(&kernel, &p, &g, &case).unwrap_err();
    assert_eq!(e.fault, Fault::Deadlock, "{e}");
    assert!(e.message.contains("1024 bytes of copies missing"), "{e}");
}

#[test]
fn a_tensor_map_that_breaks_the_driver_rules_is_refused_before_running() {
    let (_, _, _, mut kernel, p) = setup(200);
    let [a_map, _] = p.tensor_maps.unwrap();
    let ParamKind::TensorMap(m) = &mut kernel.params[a_map.0 as usize].kind else { panic!() };
    m.box_dims[0] = 72; // 144 bytes: wider than the 128-byte swizzle
    let mut args = vec![Arg::Int(0); kernel.params.len()];
    args[p.a.0 as usize] = Arg::tensor(DType::F16, &vec![0.0; 130 * 200]);
    args[p.b.0 as usize] = Arg::tensor(DType::F16, &vec![0.0; 200 * 136]);
    args[p.bias.unwrap().0 as usize] = Arg::tensor(DType::F16, &[0.0; 136]);
    args[p.c.0 as usize] = Arg::tensor(DType::F16, &vec![0.0; 130 * 136]);
    for (id, v) in [(p.m, 130), (p.n, 136), (p.k, 200), (p.lda, 200), (p.ldb, 136), (p.ldc, 136)] {
        args[id.0 as usize] = Arg::Int(v);
    }
    for id in p.tensor_maps.unwrap() {
        args[id.0 as usize] = Arg::TensorMap;
    }
    let e = emulate::run(&kernel, &mut args).unwrap_err();
    assert_eq!((e.fault, e.stmt), (Fault::BadValue, None), "{e}");
    assert!(e.message.contains("tensor map `A_map`") && e.message.contains("swizzle"), "{e}");
}

/// `plan_sm90` with `warp_specialize`.
fn plan_ws(bm: u64, bn: u64, stages: u64, epilogue: &[&str]) -> Plan {
    let mut p = plan_sm90(bm, bn, stages, epilogue);
    p.warp_specialize = Some(Spanned::new(plan::Specialize::default()));
    p
}

/// The warp-specialised form over `gemm_bias_relu_matches_interp`'s grid:
/// where the operand rows are 16-byte aligned (TMA) it matches the
/// interpreter and the f64 reference, f16 and bf16, both B layouts; where
/// they are not, the template refuses it (`Unsupported`: the producer
/// issues TMA copies only) rather than building another form.
#[test]
fn warp_specialized_gemm_matches_interp() {
    // Rows of B [K,N] with N = 258, and of A and B [N,K] with K = 127, are
    // not 16-byte aligned.
    let shapes: [(i64, i64, i64); 7] = [
        (1, 64, 64),
        (17, 136, 128),
        (130, 258, 200),
        (1000, 24, 64),
        (64, 1000, 72),
        (127, 130, 127),
        (130, 136, 448),
    ];
    let plan = plan_ws(128, 128, 4, &["bias", "relu"]);
    let (mut ran, mut refused) = (0, 0);
    for (i, &(m, n, k)) in shapes.iter().enumerate() {
        let layout = if i % 2 == 0 { BLayout::KN } else { BLayout::NK };
        for dt in [DType::F16, DType::BF16] {
            let case = Case::new(m, n, k);
            let g = gemm(dt, dt, layout, n, k);
            let what = format!("{} M={m} N={n} K={k} {layout:?}", dt.dsl_name());
            if !mma::uses_tma(&g) {
                let e = mma::build(&plan, &g).unwrap_err();
                assert!(e.message.contains("TMA copies for `warp_specialize`"), "{what}: {e}");
                refused += 1;
                continue;
            }
            let (kernel, p) = mma::build(&plan, &g).unwrap();
            assert_eq!(kernel.threads(), 384, "{what}");
            verify::verify(&kernel).unwrap_or_else(|e| panic!("{what}: {e:#?}\n{kernel}"));
            let got = run_kernel(&kernel, &p, &g, &case).unwrap_or_else(|e| panic!("{what}: {e}"));
            if layout == BLayout::KN {
                assert_close(&got, &interp_gemm_bias_relu(dt, &case), &what);
            }
            assert_close(&got, &reference(&plan, &g, &case), &what);
            // The roles taking turns after every statement: the same bits
            // (f16 only: the emulator's time).
            if dt == DType::F16 {
                let (stepped, _) = run_ordered(&kernel, &p, &g, &case, emulate::RoleOrder::EveryStatement)
                    .unwrap_or_else(|e| panic!("{what}, every statement: {e}"));
                let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&stepped), bits(&got), "{what}");
            }
            ran += 1;
        }
    }
    assert_eq!((ran, refused), (10, 4));
    // The 128 × 256 tile, five k-tiles over a ring of three (five stages
    // do not fit).
    let plan = plan_ws(128, 256, 3, &["bias", "relu"]);
    let case = Case::new(136, 264, 320);
    let g = gemm(DType::F16, DType::F16, BLayout::KN, case.n, case.k);
    assert_close(&run(&plan, &g, &case).unwrap(), &reference(&plan, &g, &case), "128x256 ws");
}

/// One CTA of the specialised 128 × 128 over two k-tiles does the
/// non-specialised form's work: the same `wgmma`s and TMA bytes, 384
/// threads, and the register budgets of `resources::specialized_regs`.
#[test]
fn counts_of_one_specialized_tile() {
    let g = gemm(DType::F16, DType::F16, BLayout::KN, 128, 128);
    let (kernel, p) = mma::build(&plan_ws(128, 128, 3, &[]), &g).unwrap();
    let (_, stats) = run_with_stats(&kernel, &p, &g, &Case::new(128, 128, 128)).unwrap();
    assert_eq!((stats.ctas, stats.wgmma, stats.tma_bytes), (1, 16, 2 * (128 * 64 + 64 * 128) * 2));
    assert_eq!(kernel.block, [384, 1, 1]);
    let mut budgets = Vec::new();
    kernel.walk(&mut |_, s| {
        if let Stmt::Sm90(Sm90Stmt::SetMaxNReg { inc, regs }) = s {
            budgets.push((*inc, *regs));
        }
    });
    assert_eq!(budgets, vec![(false, 40), (true, 232)]);
}

/// A specialised TMA kernel (f16, B `[K,N]`, bias + ReLU, K = 448: seven
/// k-tiles over a three-stage ring, so every stage is refilled).
fn setup_ws() -> (Gemm, Case, Kernel, GemmParams) {
    let g = gemm(DType::F16, DType::F16, BLayout::KN, 136, 448);
    let (kernel, p) = mma::build(&plan_ws(128, 128, 3, &["bias", "relu"]), &g).unwrap();
    assert_eq!(faults(&kernel), vec![], "{kernel}");
    (g, Case::new(130, 136, 448), kernel, p)
}

/// The id of the producer's wait on a ring stage's `empty` barrier.
fn empty_wait(k: &Kernel) -> u32 {
    let empty = k.smem.iter().position(|b| b.name == "empty").unwrap() as u32;
    first(k, |s| matches!(s, Stmt::Sm90(Sm90Stmt::MbarrierWait { bar, .. }) if bar.buf.0 == empty))
}

#[test]
fn a_consumer_that_never_releases_a_stage_deadlocks_the_producer() {
    let (g, case, mut kernel, p) = setup_ws();
    remove(&mut kernel.body, &|s| matches!(s, Stmt::Sm90(Sm90Stmt::MbarrierArrive { .. })));
    let wait = empty_wait(&kernel);
    let e = run_kernel(&kernel, &p, &g, &case).unwrap_err();
    assert_eq!((e.fault, e.stmt), (Fault::Deadlock, Some(wait)), "{e}");
    assert!(e.message.contains("2 arrivals"), "{e}"); // thread 0 of each of the 2 consumer warpgroups
}

#[test]
fn a_producer_that_does_not_wait_for_a_free_stage_is_caught() {
    let (g, case, mut kernel, p) = setup_ws();
    let empty = kernel.smem.iter().position(|b| b.name == "empty").unwrap() as u32;
    remove(&mut kernel.body, &|s| matches!(s, Stmt::Sm90(Sm90Stmt::MbarrierWait { bar, .. }) if bar.buf.0 == empty));
    // It refills stage 0 while its copies for k-tile 0 are in flight: a
    // second arrival on a phase that expects one.
    let e = run_kernel(&kernel, &p, &g, &case).unwrap_err();
    assert_eq!(e.fault, Fault::BadValue, "{e}");
    assert!(e.message.contains("more arrivals than the mbarrier"), "{e}");
}

#[test]
fn a_wrong_parity_on_the_free_stages_deadlocks() {
    let (g, case, mut kernel, p) = setup_ws();
    let wait = empty_wait(&kernel);
    let empty = kernel.smem.iter().position(|b| b.name == "empty").unwrap() as u32;
    edit(&mut kernel.body, &mut |s| {
        if let Stmt::Sm90(Sm90Stmt::MbarrierWait { bar, parity }) = s {
            if bar.buf.0 == empty {
                *parity = parity.clone().xor(1);
            }
        }
    });
    // The first pass waits for phase 0 of a ring no consumer has used.
    let e = run_kernel(&kernel, &p, &g, &case).unwrap_err();
    assert_eq!((e.fault, e.stmt), (Fault::Deadlock, Some(wait)), "{e}");
}

#[test]
fn a_whole_cta_barrier_inside_a_role_is_caught() {
    let (g, case, mut kernel, p) = setup_ws();
    edit(&mut kernel.body, &mut |s| {
        if matches!(s, Stmt::BarrierNamed { .. }) {
            *s = Stmt::Barrier;
        }
    });
    let bar = first(&kernel, |s| matches!(s, Stmt::Barrier));
    assert!(faults(&kernel).iter().any(|f| f.0 == Fault::Divergence && f.1 > Some(bar)), "{:?}", faults(&kernel));
    let e = run_kernel(&kernel, &p, &g, &case).unwrap_err();
    assert_eq!(e.fault, Fault::Divergence, "{e}");
    assert!(e.message.contains("bar.sync reached by 256 of 384 threads"), "{e}");
}

#[test]
fn register_budgets_beyond_the_register_file_are_caught() {
    let (_, _, mut kernel, _) = setup_ws();
    edit(&mut kernel.body, &mut |s| {
        if let Stmt::Sm90(Sm90Stmt::SetMaxNReg { inc: true, regs }) = s {
            *regs = 256;
        }
    });
    let errs = verify::verify(&kernel).unwrap_err();
    assert!(errs.iter().any(|e| e.fault == Fault::BadValue && e.message.contains("70656 registers")), "{errs:?}");
}

/// The persistent form: one CTA per SM of the sm90 row walks the tiles,
/// the ring's phases running on from one tile into the next. The kernel
/// as it runs on a GPU of two SMs (its grid, `min(tiles, 132)`, capped to
/// 2 as the runtime caps it to a device's SMs; emulating 132 CTAs' tiles
/// would take minutes) over five tiles of
/// 128 × 128 (M = 640, N = 24): CTA 0 takes tiles 0, 2, 4, CTA 1 tiles 1
/// and 3; K = 200 (four k-tiles over a ring of three, so stages and
/// parities carry over the tile boundaries). Against the f64 reference
/// and, for B `[K,N]`, the interpreter; then as built, M = 130 (two tiles,
/// two CTAs).
#[test]
fn persistent_warp_specialized_gemm_matches_interp() {
    let mut plan = plan_ws(128, 128, 3, &["bias", "relu"]);
    plan.warp_specialize = Some(Spanned::new(plan::Specialize { persistent: true, cluster: 1 }));
    for (dt, layout, m, ctas) in [(DType::BF16, BLayout::KN, 640, Some(2)), (DType::F16, BLayout::NK, 130, None)] {
        let case = Case::new(m, 24, 200);
        let g = gemm(dt, dt, layout, case.n, case.k);
        let (mut kernel, p) = mma::build(&plan, &g).unwrap();
        verify::verify(&kernel).unwrap_or_else(|e| panic!("{e:#?}\n{kernel}"));
        assert!(kernel.persistent, "the runtime caps its grid at the device's SMs");
        if let Some(c) = ctas {
            // What the runtime launches on a device of `c` SMs
            // (`Launch::on`): the tile walk follows `gridDim.x`.
            kernel.grid[0] = Expr::c(c);
        }
        let (got, stats) = run_with_stats(&kernel, &p, &g, &case).unwrap_or_else(|e| panic!("{m}: {e}"));
        let (stepped, _) = run_ordered(&kernel, &p, &g, &case, emulate::RoleOrder::EveryStatement)
            .unwrap_or_else(|e| panic!("{m}, every statement: {e}"));
        assert_eq!(
            stepped.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            got.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
        let tiles = (m + 127) / 128;
        assert_eq!(stats.ctas as i64, ctas.unwrap_or(tiles), "{m}");
        assert_eq!(stats.wgmma as i64, tiles * 2 * 4 * 4, "{m}: two warpgroups, four k-tiles of four");
        if layout == BLayout::KN {
            assert_close(&got, &interp_gemm_bias_relu(dt, &case), "persistent");
        }
        assert_close(&got, &reference(&plan, &g, &case), "persistent");
    }
}

/// A persistent kernel whose consumers do not release the last k-tile's
/// stage of a tile: one CTA, four tiles of one k-tile each over a ring of
/// three, so the fourth tile's copies wait for the first tile's stage,
/// which is never released.
#[test]
fn a_persistent_tile_that_keeps_its_last_stage_deadlocks() {
    let mut plan = plan_ws(128, 128, 3, &[]);
    plan.warp_specialize = Some(Spanned::new(plan::Specialize { persistent: true, cluster: 1 }));
    let case = Case::new(512, 24, 64);
    let g = gemm(DType::F16, DType::F16, BLayout::KN, case.n, case.k);
    let (mut kernel, p) = mma::build(&plan, &g).unwrap();
    // One SM: one CTA walks the four tiles.
    kernel.grid[0] = Expr::c(1);
    let mut arrives = 0;
    edit(&mut kernel.body, &mut |s| {
        if let Stmt::Sm90(Sm90Stmt::MbarrierArrive { .. }) = s {
            arrives += 1;
            // The second: after the k loop (K = 64, one k-tile).
            if arrives == 2 {
                *s = Stmt::If { cond: Expr::c(0), then: Vec::new(), otherwise: Vec::new() };
            }
        }
    });
    assert_eq!(arrives, 2);
    let Err(e) = run_kernel(&kernel, &p, &g, &case) else { panic!("ran to the end") };
    assert_eq!((e.fault, e.stmt), (Fault::Deadlock, Some(empty_wait(&kernel))), "{e}");
}

/// Without the `bar.sync` after each k-tile's `wgmma.wait_group 1`, thread
/// 0 refills a stage the other warpgroup's `wgmma`s read with nothing
/// ordering those reads before its copy: no mbarrier carries the other
/// threads' arrivals to it in this form, so the emulator's race check
/// still sees it.
#[test]
fn a_refill_without_the_barrier_after_the_wgmmas_is_a_race() {
    let plan = plan_sm90(128, 128, 3, &[]);
    let g = gemm(DType::F16, DType::F16, BLayout::KN, 136, 448);
    let (mut kernel, p) = mma::build(&plan, &g).unwrap();
    let mut in_loop = 0;
    edit(&mut kernel.body, &mut |s| {
        if let Stmt::For { body, unroll: false, .. } = s {
            let before = body.len();
            body.retain(|x| !matches!(x, Stmt::Barrier));
            in_loop += before - body.len();
        }
    });
    assert_eq!(in_loop, 1);
    let Err(e) = run_kernel(&kernel, &p, &g, &Case::new(130, 136, 448)) else { panic!("ran to the end") };
    assert_eq!(e.fault, Fault::Race, "{e}");
    assert!(e.message.contains("no bar.sync or mbarrier phase between"), "{e}");
}

/// `plan_ws` with clusters of two CTAs (`warp_specialize [persistent]
/// cluster=2`): 128 × 128 tiles, three stages, bias + ReLU.
fn plan_cluster(persistent: bool) -> Plan {
    let mut p = plan_ws(128, 128, 3, &["bias", "relu"]);
    p.warp_specialize = Some(Spanned::new(plan::Specialize { persistent, cluster: 2 }));
    p
}

/// Pairs of CTAs on vertically adjacent tiles, each copying half of the
/// shared B tile and multicasting it to both: against the interpreter
/// (B `[K,N]`) and the f64 reference, both B layouts, f16 and bf16, one
/// CTA per tile and persistent. M = 300 is three tiles, so the last
/// pair's second CTA lies below M and stores nothing; the persistent
/// kernel runs as on a device of two or three SMs (one cluster) walking
/// `⌈M/256⌉ · ⌈N/128⌉` units. K = 200: four k-tiles over a ring of three.
/// The tasks taking turns after every statement (the CTAs in step) give
/// the same bits. Every CTA receives whole stages: its A box and both
/// halves of B.
#[test]
fn clustered_gemm_matches_interp() {
    let k = 200;
    for (persistent, dt, layout, m, n) in [
        (false, DType::F16, BLayout::KN, 130, 136),
        (false, DType::BF16, BLayout::NK, 300, 72),
        (true, DType::F16, BLayout::NK, 300, 136),
        (true, DType::BF16, BLayout::KN, 520, 24),
    ] {
        let plan = plan_cluster(persistent);
        let case = Case::new(m, n, k);
        let g = gemm(dt, dt, layout, n, k);
        let what = format!("{} M={m} N={n} {layout:?} persistent={persistent}", dt.dsl_name());
        let (mut kernel, p) = mma::build(&plan, &g).unwrap();
        verify::verify(&kernel).unwrap_or_else(|e| panic!("{what}: {e:#?}\n{kernel}"));
        assert_eq!(kernel.cluster, 2, "{what}");
        let units = (m + 255) / 256 * ((n + 127) / 128);
        if persistent {
            kernel.grid[0] = Expr::c(2);
        }
        let (got, stats) = run_with_stats(&kernel, &p, &g, &case).unwrap_or_else(|e| panic!("{what}: {e}"));
        let ctas = if persistent { 2 } else { 2 * units };
        assert_eq!(stats.ctas as i64, ctas, "{what}");
        assert_eq!(stats.tma_bytes as i64, 2 * units * 4 * (128 * 64 + 64 * 128) * 2, "{what}");
        let (stepped, _) = run_ordered(&kernel, &p, &g, &case, emulate::RoleOrder::EveryStatement)
            .unwrap_or_else(|e| panic!("{what}, every statement: {e}"));
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&stepped), bits(&got), "{what}");
        if layout == BLayout::KN {
            assert_close(&got, &interp_gemm_bias_relu(dt, &case), &what);
        }
        assert_close(&got, &reference(&plan, &g, &case), &what);
    }
}

/// A clustered kernel (f16, B `[K,N]`, M = 300: two pairs) that verifies.
fn setup_cluster() -> (Gemm, Case, Kernel, GemmParams) {
    let g = gemm(DType::F16, DType::F16, BLayout::KN, 136, 200);
    let (kernel, p) = mma::build(&plan_cluster(false), &g).unwrap();
    assert_eq!(faults(&kernel), vec![], "{kernel}");
    (g, Case::new(300, 136, 200), kernel, p)
}

#[test]
fn a_clustered_kernel_prints_its_cluster_multicast_and_remote_arrivals() {
    let (_, _, kernel, _) = setup_cluster();
    let text = kernel.to_string();
    for part in ["cluster=2", "multicast=0b11", "mbarrier.arrive.shared::cluster", "barrier.cluster"] {
        assert!(text.contains(part), "{part}:\n{text}");
    }
    let src = crate::emit::cuda::print(&kernel).unwrap();
    for part in [
        "__cluster_dims__(2, 1, 1)",
        ".multicast::cluster",
        "tgc_tma_load_2d_multicast(",
        "mapa.shared::cluster.u32",
        "tgc_mbar_arrive_cluster(",
        "barrier.cluster.arrive.release.aligned",
    ] {
        assert!(src.contains(part), "{part}:\n{src}");
    }
}

/// Each consumer releases a stage to its own CTA only: the peer's
/// producer, which multicasts into it too, waits for arrivals that never
/// come.
#[test]
fn a_stage_released_to_one_cta_of_the_cluster_deadlocks_its_peer() {
    let (g, case, mut kernel, p) = setup_cluster();
    remove(&mut kernel.body, &|s| matches!(s, Stmt::Sm90(Sm90Stmt::MbarrierArrive { cta: Some(Expr::Const(1)), .. })));
    let e = run_kernel(&kernel, &p, &g, &case).unwrap_err();
    assert_eq!(e.fault, Fault::Deadlock, "{e}");
    // CTA 1's producer: none of the 2 × 2 consumer warpgroups' arrivals came.
    let wait = format!("Deadlock at s{}: block (1, 0, 0): thread 0 waits", empty_wait(&kernel));
    assert!(e.message.contains(&wait) && e.message.contains("4 arrivals"), "{e}");
}

/// The producers send their B halves to CTA 0 only: CTA 1's stages never
/// receive the bytes its mbarrier expects.
#[test]
fn a_multicast_that_misses_a_cta_is_caught() {
    let (g, case, mut kernel, p) = setup_cluster();
    edit(&mut kernel.body, &mut |s| {
        if let Stmt::Sm90(Sm90Stmt::TmaLoad { multicast: Some(m), .. }) = s {
            *m = 0b01;
        }
    });
    let e = run_kernel(&kernel, &p, &g, &case).unwrap_err();
    assert_eq!(e.fault, Fault::Deadlock, "{e}");
    assert!(e.message.contains("block (1, 0, 0)") && e.message.contains("bytes of copies missing"), "{e}");
    edit(&mut kernel.body, &mut |s| {
        if let Stmt::Sm90(Sm90Stmt::TmaLoad { multicast: Some(m), .. }) = s {
            *m = 0b100;
        }
    });
    let tma = first(&kernel, |s| matches!(s, Stmt::Sm90(Sm90Stmt::TmaLoad { multicast: Some(_), .. })));
    assert!(faults(&kernel).contains(&(Fault::BadValue, Some(tma))), "{:?}", faults(&kernel));
}

/// Without the `barrier.cluster` after the mbarriers' initialisation a
/// peer's multicast may reach them first; without the last one a CTA may
/// exit while its peer still releases stages to it.
#[test]
fn missing_cluster_barriers_are_caught() {
    let (g, case, kernel, p) = setup_cluster();
    let first_remote = first(&kernel, |s| matches!(s, Stmt::Sm90(Sm90Stmt::TmaLoad { multicast: Some(_), .. })));
    let mut early = kernel.clone();
    let sync = early.body.iter().position(|s| *s == Stmt::Sm90(Sm90Stmt::ClusterSync)).unwrap();
    early.body[sync] = Stmt::Barrier;
    assert!(faults(&early).contains(&(Fault::Race, Some(first_remote))), "{:?}", faults(&early));

    let mut late = kernel.clone();
    assert_eq!(late.body.pop(), Some(Stmt::Sm90(Sm90Stmt::ClusterSync)));
    let specialize = first(&late, |s| matches!(s, Stmt::WarpSpecialize { .. }));
    assert!(faults(&late).contains(&(Fault::Race, Some(specialize))), "{:?}", faults(&late));
    // In every order: the CTA that finishes first has received its peer's
    // copies and arrivals since its last barrier.cluster.
    for order in [emulate::RoleOrder::UntilBlocked, emulate::RoleOrder::EveryStatement] {
        let Err(e) = run_ordered(&late, &p, &g, &case, order) else { panic!("{order:?}: ran to the end") };
        assert_eq!(e.fault, Fault::Race, "{e}");
        assert!(e.message.contains("no barrier.cluster"), "{e}");
    }
}

/// A hand-built warpgroup that multiplies a 64 × 16 A, loaded from global
/// memory into its registers as `mma.m16n8k16` A fragments, by a 16 × 8 B
/// in shared memory (`[N, K]`, K-major, no swizzle: 8-row core matrices of
/// 16 bytes, the second half of K `lbo` = 128 bytes on) with one `wgmma`
/// whose A operand is the registers ([`WgmmaA::Regs`]), and stores the
/// 64 × 8 f32 product. With `late_pack`, A's fragments are packed only
/// after the `wgmma.fence`; with `repack_in_flight`, packed once more
/// between the `wgmma`'s commit and its wait.
fn register_a_kernel(late_pack: bool, repack_in_flight: bool) -> Kernel {
    let mut k = Kernel::empty("wgmma_register_a", Arch::Sm90);
    let ptr = |dtype, writable| ParamKind::Ptr { dtype, writable };
    let (a, b, c) = (
        k.add_param("A", ptr(DType::F16, false)),
        k.add_param("B", ptr(DType::F16, false)),
        k.add_param("C", ptr(DType::F32, true)),
    );
    k.block = [128, 1, 1];
    let bs = k.add_smem("Bs", 256, Swizzle::IDENTITY);
    let pf = k.add_regs("pf", RegKind::B16x2, 4);
    let x = k.add_regs("x", RegKind::F32, 8);
    let acc = k.add_regs("acc", RegKind::F32, 4);
    let reg = |r: RegId, i: i64| RegRef { reg: r, index: Expr::c(i) };
    let tid_var = k.add_var("tid");
    let mut body = vec![Stmt::Let { var: tid_var, value: Expr::ThreadIdx(Dim::X) }];
    let tid = Expr::Var(tid_var);
    let (warp, g, q) = (tid.clone() / 32, tid.clone() % 32 / 4, tid.clone() % 4);
    // B: 16 copies of 16 bytes, row n = tid % 8, K half tid / 8.
    let copy = Stmt::Mma(MmaStmt::CpAsync {
        dst: SmemRef { buf: bs.buf, offset: tid.clone() % 8 * 16 + tid.clone() / 8 * 128, swizzle: Swizzle::IDENTITY },
        src: GlobalRef { param: b, offset: tid.clone() % 8 * 16 + tid.clone() / 8 * 8 },
        bytes: 16,
        src_bytes: Expr::c(16),
    });
    body.extend([
        Stmt::If { cond: tid.clone().lt(16), then: vec![copy], otherwise: Vec::new() },
        Stmt::Mma(MmaStmt::CommitGroup),
        Stmt::Mma(MmaStmt::WaitGroup { pending: 0 }),
        Stmt::Sm90(Sm90Stmt::FenceProxyAsync),
        Stmt::Barrier,
    ]);
    // A's fragment j: row 16·warp + g + 8·(j % 2), columns 2q + 8·(j / 2), +1.
    let mut pack = Vec::new();
    for j in 0..4i64 {
        let row = warp.clone() * 16 + g.clone() + 8 * (j % 2);
        let at = row * 16 + q.clone() * 2 + 8 * (j / 2);
        body.push(Stmt::Simt(SimtStmt::LdGlobalVec {
            dst: vec![reg(x, 2 * j), reg(x, 2 * j + 1)],
            src: GlobalRef { param: a, offset: at },
            dtype: DType::F16,
            pred: Expr::c(1),
        }));
        pack.push(Stmt::Mma(MmaStmt::PackB16x2 {
            dst: reg(pf, j),
            lo: reg(x, 2 * j),
            hi: reg(x, 2 * j + 1),
            dtype: DType::F16,
        }));
    }
    if !late_pack {
        body.append(&mut pack.clone());
    }
    body.extend((0..4).map(|i| Stmt::Mma(MmaStmt::MovF32 { dst: reg(acc, i), value: 0.0 })));
    body.push(Stmt::Sm90(Sm90Stmt::WgmmaFence));
    if late_pack {
        body.append(&mut pack.clone());
    }
    let desc = MatrixDesc {
        start: SmemRef { buf: bs.buf, offset: Expr::c(0), swizzle: Swizzle::IDENTITY },
        lbo: 128,
        sbo: 256,
    };
    body.extend([
        Stmt::Sm90(Sm90Stmt::Wgmma {
            ab: DType::F16,
            n: 8,
            d: reg(acc, 0),
            a: WgmmaA::Regs(reg(pf, 0)),
            b: desc,
            trans_b: false,
            scale_d: true,
        }),
        Stmt::Sm90(Sm90Stmt::WgmmaCommit),
    ]);
    if repack_in_flight {
        body.push(pack[0].clone());
    }
    body.push(Stmt::Sm90(Sm90Stmt::WgmmaWait { pending: 0 }));
    // D: registers 2h, 2h+1 hold row 16·warp + g + 8h, columns 2q, 2q+1.
    for h in 0..2i64 {
        let row = warp.clone() * 16 + g.clone() + 8 * h;
        body.push(Stmt::Mma(MmaStmt::StGlobalVec {
            dst: GlobalRef { param: c, offset: row * 8 + q.clone() * 2 },
            src: vec![reg(acc, 2 * h), reg(acc, 2 * h + 1)],
            dtype: DType::F32,
            pred: Expr::c(1),
        }));
    }
    k.body = body;
    k
}

/// Runs [`register_a_kernel`] on A = `(3i + 5k) % 11 / 8 − 0.5`, B =
/// `(7n + 2k) % 13 / 8 − 0.75` (exact in f16 and in f32 sums).
fn run_register_a(kernel: &Kernel) -> (Result<emulate::Stats, GpuError>, Vec<f64>, Vec<f64>) {
    let av: Vec<f64> = (0..64 * 16).map(|x| ((3 * (x / 16) + 5 * (x % 16)) % 11) as f64 / 8.0 - 0.5).collect();
    let bv: Vec<f64> = (0..8 * 16).map(|x| ((7 * (x / 16) + 2 * (x % 16)) % 13) as f64 / 8.0 - 0.75).collect();
    let mut args =
        vec![Arg::tensor(DType::F16, &av), Arg::tensor(DType::F16, &bv), Arg::tensor(DType::F32, &[0.0; 64 * 8])];
    let r = emulate::run(kernel, &mut args);
    let want = (0..64 * 8).map(|x| (0..16).map(|kk| av[x / 8 * 16 + kk] * bv[x % 8 * 16 + kk]).sum()).collect();
    (r, args[2].values(DType::F32), want)
}

/// `wgmma` with its A operand in registers: the product in the emulator
/// equals the f64 one, the kernel verifies and prints the register form
/// (`{a0..a3}`, no `trans-a`) that NVRTC compiles for sm_90a to `HGMMA`.
#[test]
fn a_wgmma_reads_its_a_fragments_from_registers() {
    let kernel = register_a_kernel(false, false);
    assert_eq!(faults(&kernel), vec![], "{kernel}");
    let (stats, got, want) = run_register_a(&kernel);
    assert_eq!(stats.unwrap().wgmma, 1);
    assert_eq!(got, want);
    let src = crate::emit::cuda::print(&kernel).unwrap();
    let line = src.lines().find(|l| l.contains("wgmma.mma_async")).unwrap();
    assert!(line.contains("m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, 1, 1, 1, 0;"), "{line}");
    // The operand arrays (A fragments, accumulators; not `x`) are pinned
    // right before the fence and right after the wait, nowhere else.
    let lines: Vec<&str> = src.lines().collect();
    let pins: Vec<usize> =
        (0..lines.len()).filter(|&i| lines[i].contains("tgc_pin(") && !lines[i].contains("void")).collect();
    let at = |what: &str| lines.iter().position(|l| l.contains(what)).unwrap();
    assert_eq!(pins, [at("wgmma.fence.sync") - 1, at("wgmma.wait_group.sync") + 1], "{src}");
    for &i in &pins {
        assert!(lines[i].trim_start().ends_with("tgc_pin(pf); tgc_pin(acc);"), "{}", lines[i]);
    }
    let tc = crate::gpu::toolchain::Toolchain::locate().unwrap_or_else(|e| panic!("the CUDA toolchain: {e}"));
    let (_, compiled) = crate::emit::cuda::compile(&tc, std::slice::from_ref(&kernel), "register_a").unwrap();
    let ops = crate::gpu::toolchain::sass_opcodes(&tc.sass(&compiled.cubin).unwrap());
    assert!(ops.iter().any(|o| o.starts_with("HGMMA.64x8x16.F32")), "{ops:?}");
}

/// A fragments written after the `wgmma.fence` (a `Race`), or while the
/// `wgmma` that reads them is in flight (`IncompleteRead`): caught by the
/// verifier and the emulator.
#[test]
fn register_a_fragments_touched_unfenced_or_in_flight_are_caught() {
    let late = register_a_kernel(true, false);
    let wgmma = first(&late, |s| matches!(s, Stmt::Sm90(Sm90Stmt::Wgmma { .. })));
    assert!(faults(&late).contains(&(Fault::Race, Some(wgmma))), "{:?}", faults(&late));
    let e = run_register_a(&late).0.unwrap_err();
    assert_eq!((e.fault, e.stmt), (Fault::Race, Some(wgmma)), "{e}");

    let repack = register_a_kernel(false, true);
    let write = first(&repack, |s| matches!(s, Stmt::Sm90(Sm90Stmt::WgmmaCommit))) + 1;
    assert!(faults(&repack).contains(&(Fault::IncompleteRead, Some(write))), "{:?}", faults(&repack));
    let e = run_register_a(&repack).0.unwrap_err();
    assert_eq!((e.fault, e.stmt), (Fault::IncompleteRead, Some(write)), "{e}");
    assert!(e.message.contains("pf[0] while a wgmma that uses it is in flight"), "{e}");
}

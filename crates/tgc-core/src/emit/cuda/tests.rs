//! The CUDA C printer on hand-built IR kernels: the printed text (snapshot),
//! its statement tags, and what NVRTC, ptxas and cuobjdump make of it. No
//! GPU is needed (NVRTC compiles without one); nothing here runs a kernel.

use super::*;
use crate::gpu::toolchain::{sass_functions, sass_opcodes};
use crate::plan::Epilogue;

fn v(i: u32) -> Expr {
    Expr::Var(VarId(i))
}

fn p(i: u32) -> Expr {
    Expr::Param(ParamId(i))
}

fn reg(r: u32, i: i64) -> RegRef {
    RegRef { reg: RegId(r), index: Expr::c(i) }
}

fn ptr(name: &str, dtype: DType, writable: bool) -> Param {
    Param { name: name.into(), kind: ParamKind::Ptr { dtype, writable } }
}

/// One warp computes `C[16, 8] = relu(A[16, 16] · B[16, 8] + bias)` in f16
/// with rows past `M` predicated: A through a swizzled shared tile with
/// `cp.async` (zero fill past `M`), B with `cp.async` by half the warp,
/// `ldmatrix.x4` for A, `ldmatrix.x2.trans` for B, one `mma.sync`, the
/// epilogue per accumulator and two `st.global.v2` per lane.
fn mini_gemm(ab: DType) -> Kernel {
    let a_swz = Swizzle::for_rows(32).unwrap();
    let (lane, row, chunk, j) = (0, 1, 2, 3);
    let m = p(4);
    let a_tile = SmemRef { buf: SmemId(0), offset: v(row) * 32 + v(chunk) * 16, swizzle: a_swz };
    let mut body = vec![
        Stmt::Let { var: VarId(lane), value: Expr::ThreadIdx(Dim::X) },
        Stmt::Let { var: VarId(row), value: v(lane) / 2 },
        Stmt::Let { var: VarId(chunk), value: v(lane) % 2 },
        Stmt::Mma(MmaStmt::CpAsync {
            dst: a_tile,
            src: GlobalRef { param: ParamId(0), offset: v(row).min(m.clone() - 1).max(0) * 16 + v(chunk) * 8 },
            bytes: 16,
            src_bytes: v(row).lt(m.clone()).select(16, 0),
        }),
        Stmt::If {
            cond: v(lane).lt(16),
            then: vec![Stmt::Mma(MmaStmt::CpAsync {
                dst: SmemRef { buf: SmemId(1), offset: v(lane) * 16, swizzle: Swizzle::IDENTITY },
                src: GlobalRef { param: ParamId(1), offset: v(lane) * 8 },
                bytes: 16,
                src_bytes: Expr::c(16),
            })],
            otherwise: vec![],
        },
        Stmt::Mma(MmaStmt::CommitGroup),
        Stmt::Mma(MmaStmt::WaitGroup { pending: 0 }),
        Stmt::Barrier,
        Stmt::Mma(MmaStmt::LdMatrix {
            num: LdMatrixNum::X4,
            trans: false,
            dst: (0..4).map(|i| reg(0, i)).collect(),
            src: SmemRef { buf: SmemId(0), offset: (v(lane) % 16) * 32 + (v(lane) / 16) * 16, swizzle: a_swz },
        }),
        Stmt::Mma(MmaStmt::LdMatrix {
            num: LdMatrixNum::X2,
            trans: true,
            dst: (0..2).map(|i| reg(1, i)).collect(),
            src: SmemRef { buf: SmemId(1), offset: (v(lane) % 16) * 16, swizzle: Swizzle::IDENTITY },
        }),
        Stmt::For {
            var: VarId(j),
            start: Expr::c(0),
            end: Expr::c(4),
            step: 1,
            unroll: true,
            body: vec![Stmt::Mma(MmaStmt::MovF32 { dst: RegRef { reg: RegId(2), index: v(j) }, value: 0.0 })],
        },
        Stmt::Mma(MmaStmt::MmaSync {
            ab,
            d: (0..4).map(|i| reg(2, i)).collect(),
            a: (0..4).map(|i| reg(0, i)).collect(),
            b: (0..2).map(|i| reg(1, i)).collect(),
            c: (0..4).map(|i| reg(2, i)).collect(),
        }),
    ];
    for i in 0..4i64 {
        let row = v(lane) / 4 + 8 * (i / 2);
        body.push(Stmt::Mma(MmaStmt::Epilogue {
            acc: reg(2, i),
            pred: row.lt(m.clone()),
            ops: vec![EpilogueOp::Bias { param: ParamId(2), at: (v(lane) % 4) * 2 + i % 2 }, EpilogueOp::Relu],
        }));
    }
    for half in 0..2i64 {
        let row = v(lane) / 4 + 8 * half;
        body.push(Stmt::Mma(MmaStmt::StGlobalVec {
            dst: GlobalRef { param: ParamId(3), offset: row.clone() * 8 + (v(lane) % 4) * 2 },
            src: vec![reg(2, 2 * half), reg(2, 2 * half + 1)],
            dtype: ab,
            pred: row.lt(m.clone()),
        }));
    }
    Kernel {
        name: format!("mini_gemm_{}", ab.dsl_name()),
        arch: Arch::Sm80,
        params: vec![
            ptr("a", ab, false),
            ptr("b", ab, false),
            ptr("bias", ab, false),
            ptr("c", ab, true),
            Param { name: "M".into(), kind: ParamKind::I32 },
        ],
        grid: [Expr::c(1), Expr::c(1), Expr::c(1)],
        persistent: false,
        cluster: 1,
        block: [32, 1, 1],
        min_blocks_per_sm: None,
        smem_bytes: 768,
        smem: vec![
            SmemBuffer { name: "a".into(), offset: 0, size: 512, swizzle: a_swz },
            SmemBuffer { name: "b".into(), offset: 512, size: 256, swizzle: Swizzle::IDENTITY },
        ],
        regs: vec![
            RegArray { name: "afrag".into(), kind: RegKind::B16x2, len: 4 },
            RegArray { name: "bfrag".into(), kind: RegKind::B16x2, len: 2 },
            RegArray { name: "acc".into(), kind: RegKind::F32, len: 4 },
        ],
        vars: vec!["lane".into(), "row".into(), "chunk".into(), "j".into()],
        body,
    }
}

/// The statements the GEMM does not use: a synchronous copy, a non-unrolled
/// loop with `if`/`else`, the other epilogue ops, an f32 `v4` store, a
/// 16-bit single store, a bf16 `v4` store packed into words, names that
/// collide with C words.
fn misc_kernel() -> Kernel {
    let (t, i, int) = (0, 1, 2);
    let body = vec![
        Stmt::Let { var: VarId(t), value: Expr::ThreadIdx(Dim::X) + Expr::BlockIdx(Dim::X) * 64 },
        Stmt::Mma(MmaStmt::CopySync {
            dst: SmemRef { buf: SmemId(0), offset: v(t) * 8, swizzle: Swizzle::IDENTITY },
            src: GlobalRef { param: ParamId(0), offset: v(t) * 4 },
            bytes: 8,
            src_bytes: (p(3) - v(t) * 4).min(4).max(0) * 2,
        }),
        Stmt::Barrier,
        Stmt::For {
            var: VarId(i),
            start: Expr::c(0),
            end: p(3),
            step: 2,
            unroll: false,
            body: vec![Stmt::If {
                cond: v(i).eq(0),
                then: vec![Stmt::Mma(MmaStmt::MovF32 { dst: reg(0, 0), value: f32::INFINITY })],
                otherwise: vec![Stmt::Let { var: VarId(int), value: Expr::c(1 << 40) * 3 }],
            }],
        },
        Stmt::Mma(MmaStmt::MovF32 { dst: reg(0, 1), value: -1.5 }),
        Stmt::Mma(MmaStmt::MovF32 { dst: reg(0, 2), value: 1e-3 }),
        Stmt::Mma(MmaStmt::MovF32 { dst: reg(0, 3), value: 3.0 }),
        Stmt::Mma(MmaStmt::Epilogue {
            acc: reg(0, 1),
            pred: Expr::c(1),
            ops: vec![
                EpilogueOp::Residual { param: ParamId(1), at: v(t) * p(3) },
                EpilogueOp::Silu,
                EpilogueOp::Gelu,
                EpilogueOp::GeluTanh,
                EpilogueOp::Tanh,
                EpilogueOp::Cast(DType::BF16),
                EpilogueOp::Cast(DType::F16),
            ],
        }),
        Stmt::Mma(MmaStmt::StGlobalVec {
            dst: GlobalRef { param: ParamId(2), offset: v(t) * 4 },
            src: (0..4).map(|k| reg(0, k)).collect(),
            dtype: DType::F32,
            pred: v(t).lt(p(3)),
        }),
        Stmt::Mma(MmaStmt::StGlobalVec {
            dst: GlobalRef { param: ParamId(1), offset: v(t) * 4 },
            src: (0..4).map(|k| reg(0, k)).collect(),
            dtype: DType::BF16,
            pred: Expr::c(1),
        }),
        Stmt::Mma(MmaStmt::StGlobalVec {
            dst: GlobalRef { param: ParamId(4), offset: v(t) },
            src: vec![reg(0, 0)],
            dtype: DType::F16,
            pred: Expr::c(1),
        }),
    ];
    Kernel {
        name: "misc-kernel".into(),
        arch: Arch::Sm80,
        params: vec![
            ptr("x", DType::F16, false),
            ptr("res", DType::BF16, true),
            ptr("out", DType::F32, true),
            Param { name: "n".into(), kind: ParamKind::I64 },
            ptr("out16", DType::F16, true),
        ],
        grid: [p(3) / 64 + 1, Expr::c(1), Expr::c(1)],
        persistent: false,
        cluster: 1,
        block: [64, 1, 1],
        min_blocks_per_sm: Some(2),
        smem_bytes: 512,
        smem: vec![SmemBuffer { name: "stage".into(), offset: 0, size: 512, swizzle: Swizzle::IDENTITY }],
        regs: vec![RegArray { name: "float".into(), kind: RegKind::F32, len: 4 }],
        vars: vec!["t".into(), "i".into(), "int".into()],
        body,
    }
}

fn toolchain() -> Toolchain {
    Toolchain::locate().unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn mini_gemm_prints_readable_cuda_with_inline_ptx() {
    let src = print(&mini_gemm(DType::F16)).unwrap();
    let kernel = &src[src.find("// kernel").unwrap()..];
    expect_test::expect![[r#"
        // kernel mini_gemm_f16 (sm_80): grid (1, 1, 1), block (32, 1, 1), 768 bytes of dynamic shared memory
        // shared `a` (a_smem): bytes [0, 512), swizzle Swizzle<1,4,3>
        // shared `b` (b_smem): bytes [512, 768), swizzle none
        extern "C" __global__ void __launch_bounds__(32) mini_gemm_f16(
            const tgc_f16* __restrict__ a,
            const tgc_f16* __restrict__ b,
            const tgc_f16* __restrict__ bias,
            tgc_f16* __restrict__ c,
            int M
        ) {
            extern __shared__ __align__(128) unsigned char tgc_smem[];
            const unsigned tgc_smem_base = (unsigned)__cvta_generic_to_shared(tgc_smem);
            const unsigned a_smem = tgc_smem_base + 0u;
            const unsigned b_smem = tgc_smem_base + 512u;
            unsigned afrag[4];
            unsigned bfrag[2];
            float acc[4];
            /* s0 */ const long long lane = (long long)threadIdx.x;
            /* s1 */ const long long row = (lane / 2);
            /* s2 */ const long long chunk = (lane % 2);
            /* s3 */ asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(a_smem + tgc_swizzle_1_4_3((unsigned)((row * 32) + (chunk * 16)))), "l"(a + ((tgc_max(tgc_min(row, ((long long)M - 1)), 0) * 16) + (chunk * 8))), "r"((unsigned)((row < (long long)M) ? 16 : 0)) : "memory");
            /* s4 */ if (lane < 16) {
                /* s5 */ asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(b_smem + (unsigned)(lane * 16)), "l"(b + (lane * 8)) : "memory");
            }
            /* s6 */ asm volatile("cp.async.commit_group;\n" ::: "memory");
            /* s7 */ asm volatile("cp.async.wait_group 0;\n" ::: "memory");
            /* s8 */ __syncthreads(); // bar.sync 0
            /* s9 */ asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n" : "=r"(afrag[0]), "=r"(afrag[1]), "=r"(afrag[2]), "=r"(afrag[3]) : "r"(a_smem + tgc_swizzle_1_4_3((unsigned)(((lane % 16) * 32) + ((lane / 16) * 16)))));
            /* s10 */ asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n" : "=r"(bfrag[0]), "=r"(bfrag[1]) : "r"(b_smem + (unsigned)((lane % 16) * 16)));
            #pragma unroll
            /* s11 */ for (long long j = 0; j < 4; j += 1) {
                /* s12 */ acc[j] = 0.0f;
            }
            /* s13 */ asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
                : "=f"(acc[0]), "=f"(acc[1]), "=f"(acc[2]), "=f"(acc[3])
                : "r"(afrag[0]), "r"(afrag[1]), "r"(afrag[2]), "r"(afrag[3]), "r"(bfrag[0]), "r"(bfrag[1]), "f"(acc[0]), "f"(acc[1]), "f"(acc[2]), "f"(acc[3]));
            /* s14 */ if (((lane / 4) + 0) < (long long)M) { // epilogue: bias, relu
                float tgc_v = acc[0];
                tgc_v += tgc_f16_to_f32(bias[(((lane % 4) * 2) + 0)]);
                tgc_v = fmaxf(tgc_v, 0.0f);
                acc[0] = tgc_v;
            }
            /* s15 */ if (((lane / 4) + 0) < (long long)M) { // epilogue: bias, relu
                float tgc_v = acc[1];
                tgc_v += tgc_f16_to_f32(bias[(((lane % 4) * 2) + 1)]);
                tgc_v = fmaxf(tgc_v, 0.0f);
                acc[1] = tgc_v;
            }
            /* s16 */ if (((lane / 4) + 8) < (long long)M) { // epilogue: bias, relu
                float tgc_v = acc[2];
                tgc_v += tgc_f16_to_f32(bias[(((lane % 4) * 2) + 0)]);
                tgc_v = fmaxf(tgc_v, 0.0f);
                acc[2] = tgc_v;
            }
            /* s17 */ if (((lane / 4) + 8) < (long long)M) { // epilogue: bias, relu
                float tgc_v = acc[3];
                tgc_v += tgc_f16_to_f32(bias[(((lane % 4) * 2) + 1)]);
                tgc_v = fmaxf(tgc_v, 0.0f);
                acc[3] = tgc_v;
            }
            /* s18 */ if (((lane / 4) + 0) < (long long)M) asm volatile("st.global.b32 [%0], %1;\n" :: "l"(c + ((((lane / 4) + 0) * 8) + ((lane % 4) * 2))), "r"(tgc_pack_b16x2(tgc_f32_to_f16(acc[0]), tgc_f32_to_f16(acc[1]))) : "memory");
            /* s19 */ if (((lane / 4) + 8) < (long long)M) asm volatile("st.global.b32 [%0], %1;\n" :: "l"(c + ((((lane / 4) + 8) * 8) + ((lane % 4) * 2))), "r"(tgc_pack_b16x2(tgc_f32_to_f16(acc[2]), tgc_f32_to_f16(acc[3]))) : "memory");
        }
    "#]].assert_eq(kernel);
}

#[test]
fn every_statement_is_tagged_once_in_pre_order() {
    for k in [mini_gemm(DType::F16), misc_kernel()] {
        let src = print(&k).unwrap();
        let want: Vec<u32> = (0..count_stmts(&k.body)).collect();
        assert_eq!(tagged_ids(&src), want, "{src}");
    }
}

/// A swizzle's expression over variable 0 at `off` ([`Expr::eval`]).
fn eval(e: &Expr, off: i64) -> i64 {
    let mut leaf = |l: Leaf| match l {
        Leaf::Var(_) => Ok(off),
        other => Err(format!("{other:?} in a swizzle")),
    };
    e.eval(&mut leaf, &|u| u.to_string()).unwrap_or_else(|m| panic!("{m}"))
}

#[test]
fn the_printed_swizzle_is_the_irs() {
    for row_bytes in [32, 64, 128, 256] {
        let s = Swizzle::for_rows(row_bytes).unwrap();
        let e = s.expr(Expr::Var(VarId(0)));
        for off in 0..8192u64 {
            assert_eq!(eval(&e, off as i64) as u64, s.apply(off), "{s} at {off}");
        }
    }
    let src = print(&mini_gemm(DType::F16)).unwrap();
    assert!(src.contains("unsigned tgc_swizzle_1_4_3(unsigned off) { return (off ^ ((off >> 3) & 16)); }"), "{src}");
}

#[test]
fn misc_statements_print_with_c_names_and_wide_integers() {
    let src = print(&misc_kernel()).unwrap();
    for want in [
        "extern \"C\" __global__ void __launch_bounds__(64, 2) misc_kernel(",
        "tgc_bf16* __restrict__ res,",
        "long long n,",
        "float float_[4];",
        "#pragma unroll 1",
        "for (long long i = 0; i < n; i += 2) {",
        "const long long int_ = ((1099511627776LL) * 3);",
        "float_[0] = __uint_as_float(0x7f800000u);",
        "float_[1] = -1.5f;",
        "float_[2] = 0.001f;",
        "float_[3] = 3.0f;",
        "tgc_copy_sync(stage_smem + (unsigned)(t * 8), x + (t * 4), 8u, (unsigned)(tgc_max(tgc_min((n - (t * 4)), 4), 0) * 2));",
        "tgc_v += tgc_bf16_to_f32(res[(t * n)]);",
        "// epilogue: residual, silu, gelu, gelu_tanh, tanh, cast(bf16), cast(f16)",
        "tgc_v = (float)(0.5 * x * (x < 0.0 ? q : 2.0 - q));",
        "tgc_v = (float)tanh((double)tgc_v);",
        "st.global.v4.f32 [%0], {%1, %2, %3, %4};",
        "st.global.v2.b32 [%0], {%1, %2};",
        "\"r\"(tgc_pack_b16x2(tgc_f32_to_bf16(float_[0]), tgc_f32_to_bf16(float_[1])))",
        "st.global.b16 [%0], %1;",
    ] {
        assert!(src.contains(want), "no `{want}` in\n{src}");
    }
}

#[test]
fn both_kernels_compile_in_one_unit_to_sm80_cubin_without_spills() {
    let tc = toolchain();
    let kernels = [mini_gemm(DType::F16), mini_gemm(DType::BF16), misc_kernel()];
    let (_, compiled) = compile(&tc, &kernels, "hand.cu").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(&compiled.cubin[..4], b"\x7fELF");
    assert!(compiled.ptx.contains("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"), "{}", compiled.ptx);
    let resources = ptxas_sm80(&tc, &compiled);
    let names: Vec<&str> = resources.iter().map(|r| r.function.as_str()).collect();
    assert_eq!(names.len(), 3, "{names:?}");
    for k in &kernels {
        assert!(names.contains(&k.symbol().as_str()), "{} not in {names:?}", k.symbol());
    }
    for r in &resources {
        assert_eq!((r.spill_stores, r.spill_loads), (0, 0), "{r:?}");
    }
    // The GEMMs' epilogue declares only the coordinates it reads (the hand
    // kernel's unused `int_` is its own).
    let (_, gemms) = compile(&tc, &kernels[..2], "gemms.cu").unwrap_or_else(|e| panic!("{e}"));
    assert!(!gemms.log.contains("warning"), "NVRTC warned:\n{}", gemms.log);
    let sass = tc.sass(&compiled.cubin).unwrap_or_else(|e| panic!("{e}"));
    let ops = sass_opcodes(&sass);
    for want in ["HMMA.16816.F32", "HMMA.16816.F32.BF16", "LDGSTS.E.BYPASS.128", "LDSM.16.M88.4", "LDSM.16.MT88.2"] {
        assert!(ops.contains(want), "no {want} in {ops:?}");
    }
}

/// ptxas `-v`'s report on the PTX of `compiled` (sm_80).
fn ptxas_sm80(tc: &Toolchain, compiled: &toolchain::Compiled) -> Vec<toolchain::Resources> {
    tc.ptxas_resources(&compiled.ptx, toolchain::Arch::Sm80).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_griddepcontrol_kernel_compiles_for_sm90a() {
    let mut k = misc_kernel();
    k.arch = Arch::Sm90;
    k.body.insert(0, Stmt::Sm90(Sm90Stmt::GridDepControlWait));
    let (src, compiled) = compile(&toolchain(), &[k], "pdl.cu").unwrap_or_else(|e| panic!("{e}"));
    assert!(src.contains("/* s0 */ asm volatile(\"griddepcontrol.wait;\\n\" ::: \"memory\");"), "{src}");
    assert!(compiled.ptx.contains("griddepcontrol.wait"), "{}", compiled.ptx);
}

#[test]
fn what_cannot_be_printed_names_the_statement() {
    let mut k = mini_gemm(DType::F16);
    let Stmt::Mma(MmaStmt::MmaSync { b, .. }) = &mut k.body[11] else { panic!("not the mma: {:?}", k.body[11]) };
    b.pop();
    let err = print(&k).unwrap_err();
    let CudaError::Print(e) = &err else { panic!("{err}") };
    assert_eq!((e.fault, e.stmt), (Fault::FragmentShape, Some(13)), "{err}");

    let mut k = misc_kernel();
    let Stmt::Mma(MmaStmt::StGlobalVec { src, .. }) = &mut k.body[9] else { panic!("{:?}", k.body[9]) };
    src.pop();
    let err = print(&k).unwrap_err();
    assert!(err.to_string().contains("a store of 3 bf16 elements"), "{err}");

    let err = print_unit(&[misc_kernel(), misc_kernel()]).unwrap_err();
    assert!(err.to_string().contains("two kernels named `misc_kernel`"), "{err}");

    let err = compile(&toolchain(), &[], "none.cu").unwrap_err();
    assert!(err.to_string().contains("no kernel"), "{err}");
}

mod template {
    use super::*;
    use crate::gpu::mma::{self, BLayout, Gemm};
    use crate::plan::{self, resources, space, Plan, Spanned};

    pub fn gemm() -> Gemm {
        Gemm {
            ab: DType::F16,
            out: DType::F16,
            b_layout: BLayout::KN,
            round_sum: true,
            align_a: 8,
            align_b: 8,
            align_c: 8,
            implicit: None,
        }
    }

    /// A kernel name that says which plan it is.
    pub fn plan_name(p: &Plan) -> String {
        let [bm, bn, bk] = resources::block_tile(p).unwrap();
        let [wm, wn] = p.warp_tile.as_ref().unwrap().value;
        let vec = p.vectorize.as_ref().map_or(0, |v| v.value.width.value);
        format!("gemm_{bm}x{bn}x{bk}_w{wm}x{wn}_s{}_v{vec}", resources::stages(p))
    }

    /// Every plan of the §6 space that the plan checks accept, for a
    /// 1024³ f16 GEMM + bias + ReLU, compiled by NVRTC: no spills,
    /// no stack; shared memory exactly the §5 formula (all of it dynamic:
    /// ptxas sees 0 static bytes, the IR's `smem_bytes` is what a launch
    /// passes); registers at least the fragments the §5 model counts (the
    /// accumulator and one k-step of operands must be live at once, and
    /// nothing spilled) and at most the target's 255.
    #[test]
    fn every_valid_plan_of_the_space_compiles_without_spills() {
        let target = &plan::target::SM80;
        let problem = plan::Problem::gemm(1024, 1024, 1024, DType::F16);
        let sp = space::candidates(&problem, target);
        assert_eq!(sp.valid.len(), 32, "{:?}", sp.rejected);
        let mut kernels = Vec::new();
        let mut plans = Vec::new();
        for p in &sp.valid {
            let mut p = p.clone();
            p.epilogue = vec![Spanned::new(Epilogue::Bias), Spanned::new(Epilogue::Relu)];
            let (mut k, _) = mma::build(&p, &gemm()).unwrap();
            k.name = plan_name(&p);
            kernels.push(k);
            plans.push(p);
        }
        // Four units compiled on four threads (NVRTC takes concurrent
        // programs); ptxas is nearly all of the time.
        let tc = toolchain();
        let reported: Vec<toolchain::Resources> = std::thread::scope(|scope| {
            let jobs: Vec<_> = kernels
                .chunks(kernels.len().div_ceil(4))
                .enumerate()
                .map(|(i, unit)| {
                    let tc = &tc;
                    scope.spawn(move || {
                        let (_, c) = compile(tc, unit, &format!("space{i}.cu")).unwrap_or_else(|e| panic!("{e}"));
                        ptxas_sm80(tc, &c)
                    })
                })
                .collect();
            jobs.into_iter().flat_map(|j| j.join().expect("a compile thread")).collect()
        });
        assert_eq!(reported.len(), kernels.len(), "{reported:?}");
        for (k, p) in kernels.iter().zip(&plans) {
            let r = reported.iter().find(|r| r.function == k.name).unwrap_or_else(|| panic!("no {}", k.name));
            let est = resources::of(p, DType::F16, target).unwrap();
            let warp = p.warp_tile.as_ref().unwrap().value;
            let fragments =
                resources::acc_regs(warp, DType::F16, target) + resources::operand_regs(warp, DType::F16, target);
            eprintln!(
                "{}: {} registers (estimate {}, fragments {}), {} B shared, spills {}/{}",
                k.name, r.registers, est.regs_per_thread, fragments, k.smem_bytes, r.spill_stores, r.spill_loads
            );
            assert_eq!((r.spill_stores, r.spill_loads, r.stack_frame), (0, 0, 0), "{r:?}");
            assert_eq!(r.shared_bytes, 0, "{r:?}");
            assert_eq!(k.smem_bytes, est.smem_per_cta, "{}", k.name);
            assert!(fragments <= r.registers as u64 && r.registers as u64 <= target.regs_per_thread_max, "{r:?}");
        }
    }

    /// Every plan of the sm90 space the plan checks accept, with B `[K,N]`
    /// and `[N,K]` by TMA, and one plan with `cp.async` copies (rows not
    /// 16-byte aligned: `lda` odd, so its A copies are synchronous), compiled by NVRTC for sm_90a: no spills or stack,
    /// at most 255 registers for the non-specialised form
    /// (`__launch_bounds__(256, 1)`, no `setmaxnreg` budget); the
    /// warp-specialised forms (one CTA per tile, or persistent) within
    /// their launch share of the register file
    /// (`__launch_bounds__(384, 1)`: 168) with `setmaxnreg` in the SASS
    /// (`USETMAXREG`), so the consumers' 232 and the producer's 40 are what
    /// ptxas allocated the roles; in the SASS the `wgmma` (`HGMMA`), the TMA
    /// copies (`UTMALDG`) and the mbarrier operations (`SYNCS`); the
    /// `cp.async` kernel has `LDGSTS` instead of both. The clustered forms
    /// (`cluster=2`, compiled in units of their own) multicast their B
    /// halves (`UTMALDG.2D.MULTICAST`) and meet at the cluster barrier
    /// (`UCGABAR_ARV`, `UCGABAR_WAIT`); the others do neither. No loop of
    /// any of them has a GPU-scope fence (`MEMBAR.ALL.GPU`, which an
    /// mbarrier arrival with `.release.cluster` semantics compiles to).
    #[test]
    fn every_sm90_plan_compiles_to_wgmma_and_tma_without_spills() {
        let target = &plan::target::SM90;
        let problem = plan::Problem::gemm(4096, 4096, 4096, DType::F16);
        let sp = space::candidates(&problem, target);
        assert_eq!(sp.valid.len(), 55, "{:?}", sp.rejected);
        let (mut kernels, mut clustered) = (Vec::new(), Vec::new());
        for p in &sp.valid {
            let mut p = p.clone();
            p.epilogue = vec![Spanned::new(Epilogue::Bias), Spanned::new(Epilogue::Relu)];
            for layout in [BLayout::KN, BLayout::NK] {
                let (mut k, params) = mma::build(&p, &Gemm { b_layout: layout, ..gemm() }).unwrap();
                assert!(params.tensor_maps.is_some());
                let ws = match p.warp_specialize.as_ref().map(|w| w.value) {
                    None => String::new(),
                    Some(w) => {
                        let cluster = if w.cluster > 1 { format!("_c{}", w.cluster) } else { String::new() };
                        format!("_ws{}{cluster}", if w.persistent { "p" } else { "" })
                    }
                };
                k.name = format!("{}{ws}_{layout:?}", plan_name(&p));
                if k.cluster > 1 {
                    clustered.push(k);
                } else {
                    kernels.push(k);
                }
            }
        }
        assert!(!clustered.is_empty(), "the space has clusters of two");
        let (mut cp_async, params) = mma::build(&sp.valid[0], &Gemm { align_a: 1, ..gemm() }).unwrap();
        assert!(params.tensor_maps.is_none());
        cp_async.name = "gemm_sm90_cp_async".into();
        let mut units: Vec<&[Kernel]> = kernels.chunks(kernels.len().div_ceil(4)).collect();
        units.extend(clustered.chunks(clustered.len().div_ceil(2)));
        units.push(std::slice::from_ref(&cp_async));
        let tc = toolchain();
        let compiled: Vec<(Vec<String>, String, Vec<toolchain::Resources>)> = std::thread::scope(|scope| {
            let jobs: Vec<_> = units
                .iter()
                .enumerate()
                .map(|(i, unit)| {
                    let tc = &tc;
                    scope.spawn(move || {
                        let (_, c) = compile(tc, unit, &format!("sm90_{i}.cu")).unwrap_or_else(|e| panic!("{e}"));
                        let sass = tc.sass(&c.cubin).unwrap_or_else(|e| panic!("{e}"));
                        let r = tc.ptxas_resources(&c.ptx, toolchain::Arch::Sm90a).unwrap_or_else(|e| panic!("{e}"));
                        (unit.iter().map(|k| k.name.clone()).collect(), sass, r)
                    })
                })
                .collect();
            jobs.into_iter().map(|j| j.join().expect("a compile thread")).collect()
        });
        for (names, sass, resources) in &compiled {
            let ops = sass_opcodes(sass);
            let has = |p: &str| ops.iter().any(|o| o.starts_with(p));
            assert!(has("HGMMA"), "{names:?}: {ops:?}");
            let tma = names[0] != cp_async.name;
            assert_eq!((has("UTMALDG"), has("SYNCS"), has("LDGSTS")), (tma, tma, !tma), "{names:?}: {ops:?}");
            let cluster = names[0].contains("_c2_");
            let cluster_ops = (has("UTMALDG.2D.MULTICAST"), has("UCGABAR_ARV"), has("UCGABAR_WAIT"));
            assert_eq!(cluster_ops, (cluster, cluster, cluster), "{names:?}: {ops:?}");
            for f in sass_functions(sass) {
                let looped = f.on_cycles();
                let gpu_fences: Vec<_> =
                    looped.iter().filter(|i| i.opcode.starts_with("MEMBAR") && i.opcode.ends_with(".GPU")).collect();
                eprintln!(
                    "{}: {} instructions on loops, {} of them MEMBAR.*.GPU",
                    f.name,
                    looped.len(),
                    gpu_fences.len()
                );
                assert!(gpu_fences.is_empty(), "{}: GPU-scope fences in a loop: {gpu_fences:?}", f.name);
            }
            for r in resources {
                eprintln!("{}: {} registers, spills {}/{}", r.function, r.registers, r.spill_stores, r.spill_loads);
                assert_eq!((r.spill_stores, r.spill_loads, r.stack_frame), (0, 0, 0), "{r:?}");
                let k = kernels
                    .iter()
                    .chain(&clustered)
                    .chain([&cp_async])
                    .find(|k| k.name == r.function)
                    .expect("a built kernel");
                let specialized = k.name.contains("_ws");
                let most =
                    if specialized { target.regs_per_sm / k.threads() / 8 * 8 } else { target.regs_per_thread_max };
                assert!(r.registers as u64 <= most, "{r:?}");
                if specialized {
                    assert!(has("USETMAXREG"), "{names:?}: {ops:?}");
                }
            }
        }
        assert_eq!(compiled.iter().map(|c| c.2.len()).sum::<usize>(), kernels.len() + clustered.len() + 1);
    }

    /// A kernel whose epilogue stages the C tile through shared memory
    /// (`st.shared` then `ld.shared`, one 16-byte `st.global` a row) prints,
    /// tags every statement, and compiles to sm_80 without spills.
    #[test]
    fn staged_c_kernel_compiles() {
        let mut p = space::gemm_plan(&plan::target::SM80, [64, 64, 32], [64, 32], 3, 8);
        p.epilogue = vec![Spanned::new(Epilogue::Bias), Spanned::new(Epilogue::Relu)];
        let (k, _) = mma::build(&p, &gemm()).unwrap_or_else(|e| panic!("{e}"));
        let src = print(&k).unwrap();
        assert_eq!(tagged_ids(&src), (0..count_stmts(&k.body)).collect::<Vec<_>>(), "{src}");
        let tc = toolchain();
        let (src, compiled) = compile(&tc, &[k], "staged.cu").unwrap_or_else(|e| panic!("{e}"));
        for want in ["st.shared.v4.b32", "ld.shared.v4.b32", "st.global.v4.b32"] {
            assert!(src.contains(want), "no `{want}` in the CUDA C");
        }
        for r in ptxas_sm80(&tc, &compiled) {
            assert_eq!((r.spill_stores, r.spill_loads), (0, 0), "{r:?}");
        }
    }
}

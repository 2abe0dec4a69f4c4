//! Activations in the MMA template's epilogue: SiLU, GELU (erf and tanh
//! forms) and tanh after a GEMM or an implicit-GEMM convolution are
//! recognised by their frontend decomposition ([`super::recognise::EPILOGUE_ACTIVATIONS`])
//! and computed in the epilogue, so the graph is one launch on sm80 and
//! sm90; the emulator's closed forms equal the interpreter's
//! decompositions; each kernel compiles with NVRTC; an activation the
//! epilogue does not compute falls back to SIMT kernels, still correct.
//!
//! Tolerances: [`ACTIVATION_F32_TOL`] for the closed forms on f32 values;
//! [`ACTIVATION_F16_TOL`] for f16 graphs.

use std::collections::BTreeMap;

use super::implicit_tests::{compiles_to_mma, load};
use super::tests::{gemm, plan_with, run, Case};
use super::BLayout;
use crate::emit::cuda;
use crate::gpu::dialect::Arch;
use crate::gpu::driver::{lower_program_for, lower_program_noting};
use crate::gpu::program::{Form, GpuProgram};
use crate::gpu::simt::tests::check_program;
use crate::gpu::toolchain::{sass_opcodes, Toolchain};
use crate::plan::cost::Analytic;
use crate::plan::target::{SM80, SM90};
use crate::plan::Target;
use crate::DType;

/// The graph-language name of each activation the epilogue computes, its
/// plan epilogue op.
const ACTIVATIONS: [&str; 4] = ["silu", "gelu", "gelu_tanh", "tanh"];

/// The epilogue's closed form against the interpreter's decomposition on
/// f32 values, absolute part and relative part: the decompositions'
/// stated errors (`frontend::ops::elementwise`: SiLU 2e-6 relative, GELU
/// 5e-7 and its tanh form 6e-7 absolute, tanh 2.4e-7 absolute) and one f32
/// rounding. The two GELU forms differ by up to 4.7e-4 (at |x| ≈ 2), far
/// outside it.
const ACTIVATION_F32_TOL: (f64, f64) = (1e-6, 3e-6);

/// An f16 graph's output against the interpreter, relative to
/// max(1, |reference|): three steps of f16 in [1, 2) (3 · 2^-10): the
/// activation's input a step and a half away (the rounded sum one step,
/// from another summation order; the interpreter's rounding after the bias
/// half a step, which the epilogue does not repeat), carried through a
/// slope of at most 1.13 (GELU's; SiLU's 1.10, tanh's 1), then the
/// output's own rounding.
const ACTIVATION_F16_TOL: f64 = 3e-3;

/// Each activation op of the epilogue, emulated on every multiple of 1/16
/// in [-8, 8) (exact in bf16: `A` holds them, `B` is the identity, the f32
/// output is the activation of each), equals the interpreter's
/// decomposition of the graph-language function of its name.
#[test]
fn each_epilogue_activation_equals_the_interpreters_decomposition() {
    let (m, n) = (16i64, 16i64);
    let xs: Vec<f64> = (0..m * n).map(|j| j as f64 / 16.0 - 8.0).collect();
    let mut case = Case::new(m, n, n);
    case.a = xs.clone();
    case.b = (0..n * n).map(|i| if i / n == i % n { 1.0 } else { 0.0 }).collect();
    let mut g = gemm(DType::BF16, DType::F32, BLayout::KN, n, n);
    g.round_sum = false;
    let (atol, rtol) = ACTIVATION_F32_TOL;
    for act in ACTIVATIONS {
        let plan = plan_with([64, 64, 32], [64, 32], 2, 8, &[act]);
        let got = run(&plan, &g, &case).unwrap_or_else(|e| panic!("{act}: {e}"));
        let src =
            format!("graph a(x: f32[{}]) -> (y: f32[{}]) {{\n    y = {act}(x)\n    return y\n}}\n", xs.len(), xs.len());
        let ag = load(&src);
        let x = crate::interp::Tensor::new(DType::F32, &[xs.len()], xs.clone()).unwrap();
        let want = crate::interp::run(&ag, &BTreeMap::new(), &[x]).unwrap().remove(0).data;
        for ((x, g), w) in xs.iter().zip(&got).zip(&want) {
            assert!((g - w).abs() <= atol + rtol * w.abs(), "{act}({x}): epilogue {g}, interpreter {w}");
        }
    }
}

/// The one launch of `p`: the MMA template's, on `arch`.
fn one_gemm_launch(p: &GpuProgram, arch: Arch, what: &str) {
    let forms: Vec<Form> = p.launches.iter().map(|l| l.form).collect();
    assert_eq!(forms, [Form::Gemm], "{what}");
    assert_eq!(p.launches[0].kernel.arch, arch, "{what}");
}

/// `act(matmul(x, w) + b)` in f16, named after the activation (the kernel
/// names of one NVRTC unit differ).
fn gemm_graph(act: &str) -> String {
    format!(
        "graph gemm_{act}(x: f16[40, 32], w: f16[32, 24], b: f16[24]) -> (y: f16[40, 24]) {{\n    y = \
         {act}(matmul(x, w) + b)\n    return y\n}}\n"
    )
}

/// `act(conv2d(x, w, bias=b))`, 3×3 with padding 1, NCHW in f16: an
/// implicit GEMM.
fn conv_graph(act: &str) -> String {
    format!(
        "graph conv_{act}(x: f16[2, 8, 9, 7], w: f16[16, 8, 3, 3], b: f16[16]) -> (y: f16[2, 16, 9, 7]) {{\n    y = \
         {act}(conv2d(x, w, bias=b, pad=[1, 1]))\n    return y\n}}\n"
    )
}

/// Lowers each graph for `target`: one launch of the MMA template on its
/// architecture, the plan's epilogue ending in the activation, the
/// emulated output the interpreter's; the programs, for one NVRTC unit.
fn one_launch_each(graphs: &[(String, &str)], target: &Target, arch: Arch) -> Vec<GpuProgram> {
    graphs
        .iter()
        .map(|(src, act)| {
            let g = load(src);
            let prog = lower_program_for(&g, Some(target)).unwrap_or_else(|e| panic!("{e}"));
            let what = format!("{act} on {}", target.name);
            one_gemm_launch(&prog, arch, &what);
            let plan = prog.launches[0].plan.as_ref().expect("the template's plan");
            assert_eq!(plan.epilogue.last().map(|e| e.value.name()), Some(*act), "{what}");
            check_program(&g, prog, &[], ACTIVATION_F16_TOL)
        })
        .collect()
}

/// Each activation after a GEMM (+ bias) and after a convolution (+ bias)
/// is one launch on sm80 (`mma.sync`) and on sm90 (the `wgmma` branch),
/// equal to the interpreter; the sm80 kernels compile with NVRTC to
/// `HMMA` without spills, the sm90 ones to `HGMMA`.
#[test]
fn activations_after_a_gemm_or_a_convolution_are_one_launch() {
    let tc = Toolchain::locate().unwrap_or_else(|e| panic!("the CUDA toolchain of scripts/setup.sh: {e}"));
    let graphs: Vec<(String, &str)> =
        ACTIVATIONS.iter().flat_map(|&act| [(gemm_graph(act), act), (conv_graph(act), act)]).collect();
    let sm80 = one_launch_each(&graphs, &SM80, Arch::Sm80);
    for p in &sm80 {
        compiles_to_mma(&tc, p, true);
    }
    let sm90 = one_launch_each(&graphs, &SM90, Arch::Sm90);
    let kernels: Vec<_> = sm90.iter().flat_map(|p| p.kernels()).collect();
    let (cu, compiled) = cuda::compile(&tc, &kernels, "activations_sm90").unwrap_or_else(|e| panic!("{e}"));
    for act in ACTIVATIONS {
        assert!(cu.contains(&format!("// epilogue: bias, {act}\n")), "no {act} epilogue in the sm90 unit");
    }
    for r in tc.ptxas_resources(&compiled.ptx, cuda::toolchain_arch(Arch::Sm90)).unwrap() {
        assert_eq!((r.spill_stores, r.spill_loads), (0, 0), "{r:?}");
    }
    let ops = sass_opcodes(&tc.sass(&compiled.cubin).unwrap());
    assert!(ops.iter().any(|o| o.starts_with("HGMMA")), "no HGMMA in {ops:?}");
}

/// A transformer's feed-forward block, `matmul(gelu(matmul(x, w1) + b1),
/// w2) + b2`, is two GEMM launches: the GELU is the first one's epilogue,
/// no SIMT kernel between them.
#[test]
fn a_feed_forward_block_has_its_gelu_in_the_first_gemm() {
    let src = "graph ffn(x: f16[40, 32], w1: f16[32, 64], b1: f16[64], w2: f16[64, 24], b2: f16[24]) -> (y: f16[40, \
               24]) {\n    h = gelu(matmul(x, w1) + b1)\n    y = matmul(h, w2) + b2\n    return y\n}\n";
    let g = load(src);
    let (prog, notes) = lower_program_noting(&g, &SM80, &Analytic).unwrap_or_else(|e| panic!("{e}"));
    let forms: Vec<Form> = prog.launches.iter().map(|l| l.form).collect();
    assert_eq!(forms, [Form::Gemm, Form::Gemm], "{notes:?}");
    let first = prog.launches[0].plan.as_ref().expect("the template's plan");
    assert_eq!(first.epilogue.iter().map(|e| e.value.name()).collect::<Vec<_>>(), ["bias", "gelu"]);
    // Two f16 layers: the hidden layer's step carried through 64 products.
    check_program(&g, prog, &[], 4e-3);
}

/// What the epilogue does not compute stays outside it, correct: a
/// sigmoid (no epilogue op), a SiLU whose input is also added back (its
/// decomposition is not the input's only reader) and a GELU after a 2×2
/// max pool (the pooled epilogue computes its ops before the max): the
/// template refuses the whole graph, saying why, and the graph runs as
/// SIMT kernels, or a GEMM launch and SIMT kernels, equal to the
/// interpreter.
#[test]
fn an_activation_the_epilogue_cannot_take_falls_back() {
    let sigmoid = "graph s(x: f16[40, 32], w: f16[32, 24]) -> (y: f16[40, 24]) {\n    y = sigmoid(matmul(x, w))\n    \
                   return y\n}\n";
    let reused =
        "graph r(x: f16[40, 32], w: f16[32, 24]) -> (y: f16[40, 24]) {\n    c = matmul(x, w)\n    y = silu(c) \
                  + c\n    return y\n}\n";
    let pooled = "graph p(x: f16[2, 8, 10, 10], w: f16[16, 8, 3, 3]) -> (y: f16[2, 16, 5, 5]) {\n    c = conv2d(x, w, \
                  pad=[1, 1])\n    y = gelu(maxpool2d(c, kernel=[2, 2], stride=[2, 2]))\n    return y\n}\n";
    for (src, why) in [
        (sigmoid, "is not an epilogue the sm80 template fuses"),
        (reused, "used 2 times"),
        (pooled, "after the pooling"),
    ] {
        let g = load(src);
        let refusal = crate::gpu::driver::lower(&g, &SM80, &Analytic).expect("a contraction").err();
        assert!(refusal.as_ref().is_some_and(|d| d.message.contains(why)), "{src}: {refusal:?}");
        let prog = lower_program_for(&g, Some(&SM80)).unwrap_or_else(|e| panic!("{e}"));
        let forms: Vec<Form> = prog.launches.iter().map(|l| l.form).collect();
        assert_ne!(forms, [Form::Gemm], "{src}");
        check_program(&g, prog, &[], ACTIVATION_F16_TOL);
    }
}

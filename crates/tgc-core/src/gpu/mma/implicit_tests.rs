//! Implicit GEMM on the SM80 MMA template ([`super::Implicit`]):
//! graphs that are one convolution or batched matmul + epilogue, lowered
//! through [`super::recognise`] (the IndexBook's contraction pattern), run in
//! the emulator against the reference interpreter, and compiled with NVRTC
//! to sm_80 cubins without spills whose SASS has the tensor-core MMA.
//!
//! Tolerance: f16 outputs within 1e-3 relative (one f16 rounding, 2^-11
//! relative, is below it: emulator and interpreter both sum in f32, in
//! different orders); bf16 outputs within 8e-3 (one bf16 rounding is
//! 2^-8 relative, and an f32 sum in another order may round to the
//! neighbour).

use super::Axis;
use crate::emit::cuda;
use crate::gpu::dialect::verify;
use crate::gpu::dialect::Arch;
use crate::gpu::driver::lower_program_for;
use crate::gpu::program::{emulate, Form, GpuProgram};
use crate::gpu::toolchain::{sass_opcodes, Toolchain};
use crate::pipeline::{self, Format};
use crate::plan::target::SM80;
use crate::tiny::Graph;

/// One 2-D convolution of the grid.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Conv {
    pub(crate) n: i64,
    pub(crate) c: i64,
    pub(crate) h: i64,
    pub(crate) w: i64,
    pub(crate) k: i64,
    /// Square kernel.
    pub(crate) r: i64,
    pub(crate) stride: i64,
    /// Top, bottom, left, right.
    pub(crate) pad: [i64; 4],
    pub(crate) dilation: i64,
    pub(crate) groups: i64,
    /// NHWC activations and OHWI weights (through permutes) instead of
    /// NCHW / OIHW.
    pub(crate) nhwc: bool,
    pub(crate) dtype: &'static str,
    pub(crate) relu: bool,
}

impl Conv {
    pub(crate) fn out(&self) -> (i64, i64) {
        let span = self.dilation * (self.r - 1) + 1;
        let p = (self.h + self.pad[0] + self.pad[1] - span) / self.stride + 1;
        let q = (self.w + self.pad[2] + self.pad[3] - span) / self.stride + 1;
        (p, q)
    }

    pub(crate) fn source(&self) -> String {
        let Conv { n, c, h, w, k, r, stride, pad, dilation, groups, nhwc, dtype, relu } = *self;
        let (p, q) = self.out();
        let cg = c / groups;
        let conv = format!(
            "conv2d(xc, wc, bias=b, stride=[{stride}, {stride}], pad=[{}, {}, {}, {}], dilation=[{dilation}, \
             {dilation}], groups={groups})",
            pad[0], pad[1], pad[2], pad[3]
        );
        let act = if relu { "relu(c)" } else { "c" };
        if nhwc {
            format!(
                "graph conv(x: {dtype}[{n}, {h}, {w}, {c}], wt: {dtype}[{k}, {r}, {r}, {cg}], b: {dtype}[{k}]) -> \
                 (y: {dtype}[{n}, {p}, {q}, {k}]) {{\n    xc = permute(x, [0, 3, 1, 2])\n    wc = permute(wt, [0, 3, \
                 1, 2])\n    c = {conv}\n    a = {act}\n    y = permute(a, [0, 2, 3, 1])\n    return y\n}}\n"
            )
        } else {
            format!(
                "graph conv(xc: {dtype}[{n}, {c}, {h}, {w}], wc: {dtype}[{k}, {cg}, {r}, {r}], b: {dtype}[{k}]) -> \
                 (y: {dtype}[{n}, {k}, {p}, {q}]) {{\n    c = {conv}\n    y = {act}\n    return y\n}}\n"
            )
        }
    }
}

pub(crate) fn load(src: &str) -> Graph {
    pipeline::load(src, Format::Dsl, None).unwrap_or_else(|e| panic!("{e}\n{src}")).graph
}

/// Lowers `g` for sm80, then verifies, emulates and compares it with the
/// interpreter as the SIMT tests do (`simt::tests::check_program`), within
/// `tol` relative to max(1, |reference|).
fn check(g: &Graph, tol: f64) -> GpuProgram {
    let prog = lower_program_for(g, Some(&SM80)).unwrap_or_else(|e| panic!("{e}"));
    crate::gpu::simt::tests::check_program(g, prog, &[], tol)
}

fn tol(dtype: &str) -> f64 {
    if dtype == "bf16" {
        8e-3
    } else {
        1e-3
    }
}

/// The one launch of `p`, which must be the MMA template's.
fn gemm_launch(p: &GpuProgram) -> &crate::gpu::program::Launch {
    let [l] = &p.launches[..] else { panic!("{} launches", p.launches.len()) };
    assert_eq!(l.form, Form::Gemm, "{}", l.kernel);
    l
}

pub(crate) const BASE: Conv = Conv {
    n: 2,
    c: 8,
    h: 9,
    w: 7,
    k: 16,
    r: 3,
    stride: 1,
    pad: [1, 1, 1, 1],
    dilation: 1,
    groups: 1,
    nhwc: false,
    dtype: "f16",
    relu: false,
};

/// Convolutions over kernel sizes, strides, symmetric and asymmetric
/// padding, dilation, odd spatial sizes and both layouts, f16 and bf16:
/// each on the MMA template, equal to the interpreter.
#[test]
fn convolutions_run_on_the_mma_template() {
    let grid = [
        BASE,
        Conv { nhwc: true, ..BASE },
        Conv { r: 1, pad: [0; 4], ..BASE },
        Conv { r: 1, pad: [0; 4], nhwc: true, c: 16, ..BASE },
        Conv { r: 5, pad: [2, 2, 2, 2], h: 11, w: 10, ..BASE },
        Conv { stride: 2, nhwc: true, relu: true, ..BASE },
        Conv { stride: 2, pad: [0, 1, 0, 1], h: 8, w: 8, ..BASE },
        Conv { dilation: 2, pad: [2, 2, 2, 2], nhwc: true, ..BASE },
        Conv { pad: [0, 2, 1, 0], c: 3, k: 5, h: 6, w: 5, ..BASE },
        Conv { dtype: "bf16", nhwc: true, relu: true, ..BASE },
        Conv { dtype: "bf16", stride: 2, dilation: 2, pad: [1, 2, 2, 1], ..BASE },
        Conv { n: 1, c: 16, h: 5, w: 5, k: 24, nhwc: true, ..BASE },
    ];
    let tc = Toolchain::locate().unwrap_or_else(|e| panic!("the CUDA toolchain of scripts/setup.sh: {e}"));
    for conv in grid {
        let g = load(&conv.source());
        let p = check(&g, tol(conv.dtype));
        gemm_launch(&p);
        let m = super::recognise::match_gemm(&g).unwrap();
        // A copy of at least 4 bytes is a `cp.async` (LDGSTS).
        compiles_to_mma(&tc, &p, m.gemm.align_a.max(m.gemm.align_b) >= 2);
    }
}

/// The same convolutions (every other one of the grid above) on sm90: the
/// template's wgmma branch with its `cp.async` loader (an implicit GEMM's
/// operands are no TMA tensors), equal to the interpreter; one f16 and one
/// bf16 layer compiled for sm_90a to `HGMMA` with `LDGSTS` and no spills.
#[test]
fn convolutions_run_on_the_wgmma_branch_on_sm90() {
    let grid = [
        BASE,
        Conv { r: 1, pad: [0; 4], ..BASE },
        Conv { r: 5, pad: [2, 2, 2, 2], h: 11, w: 10, ..BASE },
        Conv { stride: 2, pad: [0, 1, 0, 1], h: 8, w: 8, ..BASE },
        Conv { dtype: "bf16", nhwc: true, relu: true, ..BASE },
        Conv { n: 1, c: 16, h: 5, w: 5, k: 24, nhwc: true, ..BASE },
    ];
    let tc = Toolchain::locate().unwrap_or_else(|e| panic!("the CUDA toolchain of scripts/setup.sh: {e}"));
    for (i, conv) in grid.into_iter().enumerate() {
        let g = load(&conv.source());
        let prog = lower_program_for(&g, Some(&crate::plan::target::SM90)).unwrap_or_else(|e| panic!("{e}"));
        let p = crate::gpu::simt::tests::check_program(&g, prog, &[], tol(conv.dtype));
        assert_eq!(gemm_launch(&p).kernel.arch, Arch::Sm90, "{conv:?}");
        if i == 0 || i == 4 {
            let kernels = p.kernels();
            let (_, compiled) = cuda::compile(&tc, &kernels, &p.name).unwrap_or_else(|e| panic!("{e}"));
            for r in tc.ptxas_resources(&compiled.ptx, cuda::toolchain_arch(Arch::Sm90)).unwrap() {
                assert_eq!((r.spill_stores, r.spill_loads, r.stack_frame), (0, 0, 0), "{r:?}");
            }
            let ops = sass_opcodes(&tc.sass(&compiled.cubin).unwrap());
            for want in ["HGMMA", "LDGSTS"] {
                assert!(ops.iter().any(|o| o.starts_with(want)), "no {want} in {ops:?}");
            }
        }
    }
}

/// Every input of the bound graph `g` filled with `value`.
pub(crate) fn filled_inputs(g: &Graph, value: f64) -> Vec<Vec<f64>> {
    let numel = |id| g.shape(id).iter().map(|d| d.as_int().unwrap() as usize).product();
    g.inputs().into_iter().map(|id| vec![value; numel(id)]).collect()
}

/// Compiles `p`'s kernels with NVRTC for sm_80: no spills, and SASS with
/// `HMMA.16816.F32`, `LDSM` and, when `ldgsts`, `LDGSTS`.
pub(crate) fn compiles_to_mma(tc: &Toolchain, p: &GpuProgram, ldgsts: bool) {
    let kernels = p.kernels();
    let (_, compiled) = cuda::compile(tc, &kernels, &p.name).unwrap_or_else(|e| panic!("{e}"));
    let res = tc.ptxas_resources(&compiled.ptx, cuda::toolchain_arch(Arch::Sm80)).unwrap();
    for r in &res {
        assert_eq!((r.spill_stores, r.spill_loads, r.stack_frame), (0, 0, 0), "{r:?}\n{}", kernels[0]);
    }
    let ops = sass_opcodes(&tc.sass(&compiled.cubin).unwrap());
    for want in ["HMMA.16816.F32", "LDSM"].into_iter().chain(ldgsts.then_some("LDGSTS")) {
        assert!(ops.iter().any(|o| o.starts_with(want)), "no {want} in {ops:?}");
    }
}

/// Grouped convolutions are correct (through the SIMT kernels: the
/// output's channel axis merges the group and the channel in it, which
/// the template's `C` layout does not take).
#[test]
fn grouped_convolutions_are_correct() {
    for conv in [Conv { groups: 2, ..BASE }, Conv { groups: 8, c: 8, k: 8, nhwc: true, ..BASE }] {
        let g = load(&conv.source());
        check(&g, tol(conv.dtype));
    }
}

/// The GEMM axes of a convolution: NHWC puts the output pixels on `M`
/// (`A` the activations, read 8 wide: the channels are contiguous) and the
/// output channels on `N` (`B` the OHWI weights, 8 wide); NCHW puts the
/// output channels on `M` (`A` the OIHW weights, contiguous over
/// `(c, r, s)`), the pixels on `N`, the images on the grid's `z`, and
/// reads the activations one element at a time (the padding guards read
/// the pixel digits).
#[test]
fn conv_layouts_choose_the_gemm_axes_and_copy_widths() {
    let nhwc = load(&Conv { c: 16, nhwc: true, ..BASE }.source());
    let m = super::recognise::match_gemm(&nhwc).unwrap();
    let im = m.gemm.implicit.as_ref().expect("an implicit GEMM");
    assert_eq!(
        (im.batch.clone(), im.m.clone(), im.n.clone(), im.k.clone()),
        (vec![], vec![2, 9, 7], vec![16], vec![3, 3, 16])
    );
    assert_eq!((m.gemm.align_a, m.gemm.align_b), (8, 8));
    assert_eq!(m.pattern, crate::index_book::contraction::Pattern::Conv);
    assert_eq!(im.a.guards.len(), 4, "{:?}", im.a.guards);

    let nchw = load(&BASE.source());
    let m = super::recognise::match_gemm(&nchw).unwrap();
    let im = m.gemm.implicit.as_ref().expect("an implicit GEMM");
    assert_eq!(
        (im.batch.clone(), im.m.clone(), im.n.clone(), im.k.clone()),
        (vec![2], vec![16], vec![9, 7], vec![8, 3, 3])
    );
    assert_eq!((m.gemm.align_a, m.gemm.align_b), (8, 1));
    assert_eq!(im.extent(Axis::K), 72);
    let names: Vec<&str> = m.inputs.iter().map(|x| x.0.as_str()).collect();
    assert_eq!(names, ["xc", "wc", "b"]);
}

/// Batched matmuls (attention's `Q·Kᵀ` and `P·V` shapes) with a residual:
/// the batch axes go to the grid's `z`, odd sizes predicated.
#[test]
fn batched_matmuls_run_on_the_mma_template() {
    let qk = "graph qk(q: f16[2, 3, 17, 16], k: f16[2, 3, 33, 16]) -> (s: f16[2, 3, 17, 33]) {\n    kt = permute(k, \
              [0, 1, 3, 2])\n    s = matmul(q, kt)\n    return s\n}\n";
    let pv = "graph pv(p: f16[2, 2, 20, 24], v: f16[2, 2, 24, 16], r: f16[2, 2, 20, 16]) -> (o: f16[2, 2, 20, 16]) \
              {\n    m = matmul(p, v)\n    o = m + r\n    return o\n}\n";
    for src in [qk, pv] {
        let g = load(src);
        let p = check(&g, 1e-3);
        gemm_launch(&p);
        let m = super::recognise::match_gemm(&g).unwrap();
        assert!(m.gemm.implicit.as_ref().is_some_and(|im| im.extent(Axis::Batch) > 1), "{src}");
    }
}

/// A ResNet-sized channels-last convolution and the batched matmuls
/// compile to sm_80 cubins without spills, with `HMMA.16816.F32`, `LDSM`
/// and `LDGSTS` (the convolution grid's own are checked with it).
#[test]
fn implicit_gemms_compile_without_spills_to_hmma_ldgsts_ldsm() {
    let tc = Toolchain::locate().unwrap_or_else(|e| panic!("the CUDA toolchain of scripts/setup.sh: {e}"));
    let conv = Conv { n: 32, c: 256, h: 14, w: 14, k: 256, nhwc: true, relu: true, ..BASE };
    let bmm = "graph bmm(a: f16[4, 8, 128, 64], b: f16[4, 8, 64, 128]) -> (c: f16[4, 8, 128, 128]) {\n    c = \
               matmul(a, b)\n    return c\n}\n";
    for g in [load(&conv.source()), load(bmm)] {
        let p = lower_program_for(&g, Some(&SM80)).unwrap();
        gemm_launch(&p);
        compiles_to_mma(&tc, &p, true);
    }
}

/// A deliberately broken implicit GEMM: the loader's padding guards
/// dropped, the copies at the border read before the start of the
/// activations, which the emulator reports as out of bounds instead of
/// running.
#[test]
fn an_implicit_gemm_without_its_padding_guards_is_caught_by_the_emulator() {
    let g = load(&Conv { nhwc: true, ..BASE }.source());
    let mut prog = lower_program_for(&g, Some(&SM80)).unwrap();
    let mut graph = super::recognise::match_gemm(&g).unwrap();
    let im = graph.gemm.implicit.as_mut().expect("an implicit GEMM");
    assert!(!im.a.guards.is_empty());
    im.a.guards.clear();
    let launch = &mut prog.launches[0];
    let plan = launch.plan.clone().expect("the MMA kernel's plan");
    let (kernel, _) = super::build(&plan, &graph.gemm).unwrap();
    launch.kernel = crate::gpu::dialect::Kernel { name: launch.kernel.name.clone(), ..kernel };
    verify::verify(&launch.kernel).unwrap_or_else(|e| panic!("{e:?}"));
    let inputs = filled_inputs(&g, 0.5);
    let err = emulate(&prog, &[], &inputs).expect_err("reads outside the activations");
    assert!(err.message.contains("OutOfBounds") && err.message.contains("outside `A`"), "{err}");
}

/// The `plan` dump of a ResNet-50 3×3 layer: its algorithms ranked (the
/// implicit GEMM chosen), then the ranking the kernel's plan is chosen
/// from, as a GEMM over the convolution's implicit axes, with the warp
/// tiles the address registers leave no room for rejected.
#[test]
fn the_plan_dump_of_a_resnet_layer_ranks_its_implicit_gemm() {
    let conv = Conv { n: 32, c: 256, h: 14, w: 14, k: 256, nhwc: true, ..BASE };
    let dump = pipeline::plan_dump(&load(&conv.source()), &SM80, &crate::plan::cost::Analytic);
    assert!(dump.starts_with("algorithms for this convolution on sm80"), "{dump}");
    assert!(dump.contains("* algo_choice conv = implicit_gemm"), "{dump}");
    assert!(
        dump.contains("\ncontraction `n13` (conv as an implicit GEMM: 1 batch points of M=6272 N=256 K=2304)"),
        "{dump}"
    );
    // One algorithm and one plan chosen.
    assert_eq!(dump.lines().filter(|l| l.starts_with('*')).count(), 2, "{dump}");
    assert!(dump.contains("for the implicit GEMM's addresses exceed sm80's 255"), "{dump}");
}

/// Convolutions in one and three spatial dimensions (`conv1d`, `conv3d`:
/// the same N-d lowering as `conv2d`) are implicit GEMMs on the MMA
/// template too, with their strides, padding and dilation, and compile to
/// tensor-core SASS.
#[test]
fn conv1d_and_conv3d_run_on_the_mma_template() {
    let tc = Toolchain::locate().unwrap_or_else(|e| panic!("the CUDA toolchain of scripts/setup.sh: {e}"));
    for src in [
        "graph c1(x: f16[2, 8, 37], w: f16[16, 8, 3], b: f16[16]) -> (y: f16[2, 16, 19]) {\n    \
         y = relu(conv1d(x, w, bias=b, stride=2, pad=1))\n    return y\n}\n",
        "graph c3(x: f16[1, 8, 5, 6, 7], w: f16[16, 8, 3, 3, 3], b: f16[16]) -> (y: f16[1, 16, 5, 3, 5]) {\n    \
         y = conv3d(x, w, bias=b, stride=[1, 2, 1], pad=[1, 1, 1, 1, 0, 0], dilation=[1, 1, 1])\n    return y\n}\n",
    ] {
        let g = load(src);
        let p = check(&g, 1e-3);
        gemm_launch(&p);
        compiles_to_mma(&tc, &p, true);
    }
}

/// An embedding lookup feeding a projection (`take` then `matmul`, f16):
/// the gathered rows are stored by a SIMT kernel and the projection runs
/// on the MMA template, equal to the interpreter.
#[test]
fn a_gathered_operand_feeds_the_mma_template() {
    let g = load(
        "graph emb(table: f16[50, 32], ids: i32[24], w: f16[32, 16]) -> (y: f16[24, 16]) {\n    \
         y = matmul(take(table, ids, 0), w)\n    return y\n}\n",
    );
    let p = check(&g, 1e-3);
    let forms: Vec<Form> = p.launches.iter().map(|l| l.form).collect();
    assert!(forms.contains(&Form::Gemm), "{forms:?}");
}

/// Conv → bias → ReLU → 2×2 max pool of stride 2, channels-first or
/// channels-last, the pooled image `⌊P/2⌋ × ⌊Q/2⌋`.
fn conv_pool_source(n: i64, c: i64, h: i64, w: i64, k: i64, nhwc: bool, dtype: &str) -> String {
    let (p, q) = (h / 2, w / 2);
    if nhwc {
        format!(
            "graph crp(x: {dtype}[{n}, {h}, {w}, {c}], wt: {dtype}[{k}, 3, 3, {c}], b: {dtype}[{k}]) -> (y: \
             {dtype}[{n}, {p}, {q}, {k}]) {{\n    xc = permute(x, [0, 3, 1, 2])\n    wc = permute(wt, [0, 3, 1, 2])\n    \
             c = relu(conv2d(xc, wc, bias=b, pad=[1, 1]))\n    m = maxpool2d(c, kernel=[2, 2], stride=[2, 2])\n    y = \
             permute(m, [0, 2, 3, 1])\n    return y\n}}\n"
        )
    } else {
        format!(
            "graph crp(x: {dtype}[{n}, {c}, {h}, {w}], wt: {dtype}[{k}, {c}, 3, 3], b: {dtype}[{k}]) -> (y: \
             {dtype}[{n}, {k}, {p}, {q}]) {{\n    c = relu(conv2d(x, wt, bias=b, pad=[1, 1]))\n    y = maxpool2d(c, \
             kernel=[2, 2], stride=[2, 2])\n    return y\n}}\n"
        )
    }
}

/// A convolution + ReLU followed by a 2×2 max pool is one launch of the
/// MMA template that pools its output tile (`Implicit::pool`): on the GEMM
/// rows for channels-last outputs (pixels are rows), on its columns for
/// channels-first ones; even and odd images (an odd last row or column is
/// not pooled, as the interpreter's floor), f16 and bf16, sm80 and sm90;
/// equal to the interpreter. The sm80 kernels compile without spills to
/// tensor-core SASS with `SHFL.BFLY`.
#[test]
fn a_pooled_convolution_is_one_launch_that_pools_its_tile() {
    use super::Axis;
    let tc = Toolchain::locate().unwrap_or_else(|e| panic!("the CUDA toolchain of scripts/setup.sh: {e}"));
    let cases = [
        (2, 8, 10, 10, 16, false, "f16", Axis::N),
        (2, 8, 10, 10, 16, true, "f16", Axis::M),
        (2, 8, 9, 11, 16, false, "f16", Axis::N),
        (1, 16, 7, 9, 24, true, "f16", Axis::M),
        (2, 8, 12, 10, 32, true, "bf16", Axis::M),
        (2, 5, 8, 6, 8, false, "bf16", Axis::N),
    ];
    for (i, &(n, c, h, w, k, nhwc, dtype, axis)) in cases.iter().enumerate() {
        let g = load(&conv_pool_source(n, c, h, w, k, nhwc, dtype));
        let m = super::recognise::match_gemm(&g).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(m.gemm.implicit.as_ref().and_then(|im| im.pool), Some(axis));
        let p = check(&g, tol(dtype));
        gemm_launch(&p);
        let sm90 = lower_program_for(&g, Some(&crate::plan::target::SM90)).unwrap_or_else(|e| panic!("{e}"));
        let sm90 = crate::gpu::simt::tests::check_program(&g, sm90, &[], tol(dtype));
        assert_eq!(gemm_launch(&sm90).kernel.arch, Arch::Sm90);
        if i < 2 {
            compiles_to_mma(&tc, &p, true);
            let kernels = p.kernels();
            let (_, compiled) = cuda::compile(&tc, &kernels, &p.name).unwrap();
            let ops = sass_opcodes(&tc.sass(&compiled.cubin).unwrap());
            assert!(ops.iter().any(|o| o.starts_with("SHFL.BFLY")), "{ops:?}");
        }
    }
}

/// What the pooled epilogue does not take is refused at the view, and the
/// graph runs as an implicit GEMM and a SIMT pool: a 3×3 window (overlapping),
/// a padded 2×2 one, a pool of stride 1.
#[test]
fn other_pools_after_a_convolution_stay_separate_kernels() {
    let base = conv_pool_source(2, 8, 10, 10, 16, false, "f16");
    for (from, to) in [
        ("kernel=[2, 2], stride=[2, 2]", "kernel=[3, 3], stride=[2, 2]"),
        ("kernel=[2, 2], stride=[2, 2]", "kernel=[2, 2], stride=[2, 2], pad=[1, 1]"),
        ("kernel=[2, 2], stride=[2, 2]", "kernel=[2, 2], stride=[1, 1]"),
    ] {
        let src = base.replace(from, to);
        let out = match (from, to) {
            (_, t) if t.contains("3, 3") => "[2, 16, 4, 4]",
            (_, t) if t.contains("pad") => "[2, 16, 6, 6]",
            _ => "[2, 16, 9, 9]",
        };
        let src = src.replace("[2, 16, 5, 5]", out);
        let g = load(&src);
        let d = super::recognise::match_gemm(&g).expect_err("the template took the pool");
        assert!(d.message.contains("not a 2×2 max pool of stride 2") || d.message.contains("`PAD` after"), "{d}");
        let p = check(&g, 1e-3);
        assert_eq!(p.launches[0].form, Form::Gemm, "{src}");
        assert!(p.launches.len() > 1);
    }
}

/// The pooled epilogue without its second butterfly step (lane mask 8)
/// takes the max of two rows of each window, not four: the emulator's
/// result differs from the interpreter's, as the test above would report.
#[test]
fn a_pooled_epilogue_missing_a_shuffle_gives_wrong_maxima() {
    use crate::gpu::dialect::{SimtStmt, Stmt};
    let g = load(&conv_pool_source(2, 8, 10, 10, 16, true, "f16"));
    let mut p = lower_program_for(&g, Some(&SM80)).unwrap();
    let before = format!("{}", p.launches[0].kernel);
    super::tests::remove(&mut p.launches[0].kernel.body, &|s| {
        matches!(s, Stmt::Simt(SimtStmt::ShflBfly { lane_mask: 8, .. }))
    });
    assert_ne!(before, format!("{}", p.launches[0].kernel), "no mask-8 shuffle to drop");
    let ts: Vec<crate::interp::Tensor> = g
        .inputs()
        .into_iter()
        .enumerate()
        .map(|(k, id)| {
            let shape: Vec<usize> = g.shape(id).iter().map(|d| d.as_int().unwrap() as usize).collect();
            let n = shape.iter().product();
            crate::interp::Tensor::new(g.dtype(id), &shape, tgc_runtime::tensor::sample_values(k as u64 + 7, n))
                .unwrap()
        })
        .collect();
    let want = crate::interp::run(&g, &Default::default(), &ts).unwrap();
    let got = emulate(&p, &[], &ts.iter().map(|t| t.data.clone()).collect::<Vec<_>>()).unwrap();
    let wrong = got[0].iter().zip(&want[0].data).filter(|(a, b)| (*a - *b).abs() > 1e-3 * b.abs().max(1.0)).count();
    assert!(wrong > 0, "every pooled maximum still matched");
}

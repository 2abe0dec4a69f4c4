//! Winograd F(2×2, 3×3) ([`crate::gpu::winograd`]): the four-launch program of
//! 3×3 convolutions run in the emulator against the interpreter, every
//! output within the module's stated error bound computed in f64 from the
//! inputs; the refusals; the model's choice between it and the implicit
//! GEMM; the kernels compiled to sm_80 SASS; a broken transform caught.

use std::collections::BTreeMap;

use crate::diag::DResult;
use crate::diag::ErrorName;
use crate::emit::cuda;
use crate::gpu::dialect::verify;
use crate::gpu::dialect::Arch;
use crate::gpu::mma::implicit_tests::{load, Conv, BASE};
use crate::gpu::program::{emulate, Form, GpuProgram};
use crate::gpu::toolchain::{sass_opcodes, Toolchain};
use crate::gpu::winograd::{self, AT, BT, G};
use crate::interp;
use crate::plan::cost::{algorithm, Analytic, Estimate, Estimator, Limit};
use crate::plan::target::{SM80, SM90};
use crate::plan::{AlgoKey, Plan, Problem, Target};
use crate::tiny::Graph;

/// The inputs `check_program` gives a graph (rounded to their dtypes).
fn inputs(g: &Graph) -> Vec<interp::Tensor> {
    g.inputs()
        .into_iter()
        .enumerate()
        .map(|(k, id)| {
            let shape: Vec<usize> = g.shape(id).iter().map(|d| d.as_int().unwrap() as usize).collect();
            let n = shape.iter().product();
            interp::Tensor::new(g.dtype(id), &shape, tgc_runtime::tensor::sample_values(k as u64 + 7, n)).unwrap()
        })
        .collect()
}

/// `L X Lᵀ` in f64 (`X` square, `L` with `N` columns).
fn sandwich<const N: usize, R: AsRef<[f64]>>(l: &[[f64; N]], x: &[R]) -> Vec<Vec<f64>> {
    let lx: Vec<Vec<f64>> = l
        .iter()
        .map(|row| (0..N).map(|j| row.iter().zip(x).map(|(c, xr)| c * xr.as_ref()[j]).sum()).collect())
        .collect();
    lx.iter().map(|t| l.iter().map(|row| row.iter().zip(t).map(|(c, v)| c * v).sum()).collect()).collect()
}

/// The module doc's bound before the output's rounding, for each output
/// element of `conv` (in the graph's output layout): `Σ_ξν |Aᵀ_aξ|·|Aᵀ_bν|
/// · Σ_c |U|·|V|` in f64.
fn winograd_magnitudes(conv: &Conv, x: &[f64], w: &[f64]) -> Vec<f64> {
    let Conv { n, c, h, w: wd, k, pad, nhwc, .. } = *conv;
    let (p, q) = conv.out();
    let xat = |ni: i64, ci: i64, y: i64, xx: i64| -> f64 {
        let (y, xx) = (y - pad[0], xx - pad[2]);
        if y < 0 || y >= h || xx < 0 || xx >= wd {
            return 0.0;
        }
        let i = if nhwc { ((ni * h + y) * wd + xx) * c + ci } else { ((ni * c + ci) * h + y) * wd + xx };
        x[i as usize]
    };
    let wat = |ki: i64, ci: i64, r: i64, s: i64| -> f64 {
        let i = if nhwc { ((ki * 3 + r) * 3 + s) * c + ci } else { ((ki * c + ci) * 3 + r) * 3 + s };
        w[i as usize]
    };
    let mut out = vec![0.0; (n * k * p * q) as usize];
    for ni in 0..n {
        for ki in 0..k {
            for th in 0..(p + 1) / 2 {
                for tw in 0..(q + 1) / 2 {
                    // Σ_c |U_ξν|·|V_ξν| for the tile.
                    let mut uv = vec![vec![0.0f64; 4]; 4];
                    for ci in 0..c {
                        let d: [[f64; 4]; 4] = std::array::from_fn(|i| {
                            std::array::from_fn(|j| xat(ni, ci, 2 * th + i as i64, 2 * tw + j as i64))
                        });
                        let g: [[f64; 3]; 3] =
                            std::array::from_fn(|a| std::array::from_fn(|b| wat(ki, ci, a as i64, b as i64)));
                        let (v, u) = (sandwich(&BT, &d), sandwich(&G, &g));
                        for ((acc, ur), vr) in uv.iter_mut().zip(&u).zip(&v) {
                            for ((e, x), y) in acc.iter_mut().zip(ur).zip(vr) {
                                *e += x.abs() * y.abs();
                            }
                        }
                    }
                    let s = sandwich(&AT.map(|r| r.map(f64::abs)), &uv);
                    for (a, row) in s.iter().enumerate() {
                        for (b, &bound) in row.iter().enumerate() {
                            let (oy, ox) = (2 * th + a as i64, 2 * tw + b as i64);
                            if oy >= p || ox >= q {
                                continue;
                            }
                            let i = if nhwc {
                                ((ni * p + oy) * q + ox) * k + ki
                            } else {
                                ((ni * k + ki) * p + oy) * q + ox
                            };
                            out[i as usize] = bound;
                        }
                    }
                }
            }
        }
    }
    out
}

/// Lowers `conv` with the Winograd template, verifies its kernels, runs
/// it in the emulator and checks every output against the interpreter
/// within the bound: `(2u + u²)·S` (the module doc, `S` from
/// [`winograd_magnitudes`]), `2^-20·S` for the f32 sums in both, and one
/// rounding of the output on each side (`2u·|y|`).
fn check(conv: &Conv) -> GpuProgram {
    let g = load(&conv.source());
    let prog = winograd::lower(&g, &SM80, &Analytic).unwrap_or_else(|e| panic!("{conv:?}: {e}")).program;
    for l in &prog.launches {
        if let Err(errs) = verify::verify(&l.kernel) {
            panic!("{}: {errs:?}\n{}", l.kernel.name, l.kernel);
        }
    }
    let ts = inputs(&g);
    let want = interp::run(&g, &BTreeMap::new(), &ts).unwrap();
    let data: Vec<Vec<f64>> = ts.iter().map(|t| t.data.clone()).collect();
    let got = emulate(&prog, &[], &data).unwrap_or_else(|e| panic!("{conv:?}: {e}"));
    let s = winograd_magnitudes(conv, &ts[0].data, &ts[1].data);
    let u = if conv.dtype == "bf16" { 2f64.powi(-8) } else { 2f64.powi(-11) };
    let (mut worst, mut at) = (0.0f64, 0);
    for (i, (a, b)) in got[0].iter().zip(&want[0].data).enumerate() {
        let bound = (2.0 * u + u * u) * s[i] + 2f64.powi(-20) * s[i] + 2.0 * u * b.abs() + 1e-12;
        let err = (a - b).abs();
        assert!(err <= bound, "{conv:?} output {i}: winograd {a}, interpreter {b}, bound {bound}");
        if err / bound > worst {
            (worst, at) = (err / bound, i);
        }
    }
    eprintln!("{conv:?}: largest error {worst:.3} of the bound (output {at})");
    // The bound is not vacuous: the errors come within a factor 100 of it
    // (0.14–0.33 on this grid).
    assert!(worst > 0.01, "{conv:?}: largest error {worst} of the bound");
    prog
}

const W3: Conv = Conv { n: 2, c: 8, h: 9, w: 7, k: 16, ..BASE };

/// 3×3 convolutions over odd and even sizes, symmetric, asymmetric and no
/// padding, both layouts, bias with and without ReLU, f16 and bf16: four
/// launches (input and filter transforms, the batched GEMM on the MMA
/// template, the output transform) within the stated bound.
#[test]
fn winograd_convolutions_stay_within_the_stated_bound() {
    let grid = [
        W3,
        Conv { nhwc: true, relu: true, ..W3 },
        Conv { pad: [0; 4], h: 8, w: 8, ..W3 },
        Conv { pad: [0, 2, 1, 0], c: 3, k: 5, h: 6, w: 5, ..W3 },
        Conv { n: 1, c: 16, h: 5, w: 5, k: 24, nhwc: true, ..W3 },
        Conv { h: 3, w: 4, pad: [1, 0, 0, 1], ..W3 },
        Conv { dtype: "bf16", nhwc: true, relu: true, ..W3 },
        Conv { dtype: "bf16", c: 32, k: 8, h: 12, w: 11, ..W3 },
    ];
    for conv in grid {
        let p = check(&conv);
        let forms: Vec<Form> = p.launches.iter().map(|l| l.form).collect();
        assert_eq!(
            forms,
            [Form::WinogradTransform, Form::WinogradTransform, Form::Gemm, Form::WinogradTransform],
            "{conv:?}"
        );
        let plan = p.launches[2].plan.as_ref().unwrap();
        assert_eq!(algorithm(plan, AlgoKey::Conv), Some(winograd::ALGO));
    }
}

/// What F(2×2, 3×3) cannot compute is refused at the convolution, saying
/// why.
#[test]
fn winograd_refuses_what_is_not_a_3x3_stride_1_convolution() {
    // Grouped, without a bias (the MMA template does not fuse a grouped
    // convolution's bias: `match_gemm` refuses that first).
    let grouped = "graph conv(x: f16[2, 8, 9, 7], w: f16[16, 4, 3, 3]) -> (y: f16[2, 16, 9, 7]) {\n    y = conv2d(x, \
                   w, stride=[1, 1], pad=[1, 1, 1, 1], groups=2)\n    return y\n}\n";
    let cases: [(String, &str); 5] = [
        (Conv { stride: 2, ..W3 }.source(), "stride 2"),
        (Conv { dilation: 2, pad: [2; 4], ..W3 }.source(), "dilation 2"),
        (Conv { r: 5, pad: [2; 4], ..W3 }.source(), "not 3×3"),
        (Conv { r: 1, pad: [0; 4], ..W3 }.source(), "not a convolution"),
        (grouped.to_string(), "groups"),
    ];
    for (conv, why) in cases {
        let g = load(&conv);
        let Err(d) = winograd::lower(&g, &SM80, &Analytic) else { panic!("{conv:?} was taken") };
        assert_eq!(d.name, ErrorName::Unsupported, "{d}");
        assert!(d.message.contains(why), "{conv:?}: {d}");
        assert!(d.span.is_some(), "{d}");
    }
}

/// The analytic model keeps the implicit GEMM for ResNet-50's first 3×3
/// layer (64 channels, 56×56, batch 8), where the transforms' traffic
/// costs more than the multiplies they save, and takes Winograd for its
/// 14×14 layer of 256 channels, where the implicit GEMM's 26 tiles leave
/// most SMs idle and the sixteen batched GEMMs fill them; both on sm80
/// and sm90.
#[test]
fn the_model_chooses_winograd_only_where_it_estimates_a_gain() {
    let resnet = Conv { n: 8, c: 64, h: 56, w: 56, k: 64, nhwc: true, relu: true, ..BASE };
    let wide = Conv { n: 8, c: 256, h: 14, w: 14, k: 256, nhwc: true, relu: true, ..BASE };
    for target in [&SM80, &SM90] {
        for (conv, winograd) in [(resnet, false), (wide, true)] {
            let g = load(&conv.source());
            let p = crate::gpu::driver::lower_program_for(&g, Some(target)).unwrap();
            let took = p.launches.iter().any(|l| l.form == Form::WinogradTransform);
            assert_eq!(
                took,
                winograd,
                "{} {conv:?}: {:?}",
                target.name,
                p.launches.iter().map(|l| l.form).collect::<Vec<_>>()
            );
            let implicit = crate::gpu::mma::lower::gemm(&g, target, &Analytic).unwrap().estimate.time_s;
            let wino = winograd::lower(&g, target, &Analytic).unwrap().estimate.time_s;
            assert_eq!(wino < implicit, winograd, "{}: winograd {wino:e} s, implicit {implicit:e} s", target.name);
        }
    }
}

/// The program's kernels compile as one NVRTC unit for sm_80 without
/// spills; the GEMM's SASS has the tensor-core MMA and `LDGSTS`.
#[test]
fn winograd_kernels_compile_without_spills() {
    let tc = Toolchain::locate().unwrap_or_else(|e| panic!("the CUDA toolchain of scripts/setup.sh: {e}"));
    let g = load(&Conv { n: 1, c: 16, h: 5, w: 5, k: 24, nhwc: true, ..W3 }.source());
    let p = winograd::lower(&g, &SM80, &Analytic).unwrap().program;
    let kernels = p.kernels();
    let (_, compiled) = cuda::compile(&tc, &kernels, &p.name).unwrap_or_else(|e| panic!("{e}"));
    let res = tc.ptxas_resources(&compiled.ptx, cuda::toolchain_arch(Arch::Sm80)).unwrap();
    assert_eq!(res.len(), 4, "{res:?}");
    for r in &res {
        assert_eq!((r.spill_stores, r.spill_loads, r.stack_frame), (0, 0, 0), "{r:?}");
    }
    let ops = sass_opcodes(&tc.sass(&compiled.cubin).unwrap());
    for want in ["HMMA.16816.F32", "LDSM", "LDGSTS"] {
        assert!(ops.iter().any(|o| o.starts_with(want)), "no {want} in {ops:?}");
    }
}

/// An input transform that reads its taps without the padding guards
/// reads outside the activation: the emulator stops it.
#[test]
fn an_unguarded_input_transform_is_caught() {
    use crate::gpu::dialect::{ScalarExpr, SimtStmt, Stmt};
    let g = load(&W3.source());
    let mut p = winograd::lower(&g, &SM80, &Analytic).unwrap().program;
    crate::gpu::mma::tests::edit(&mut p.launches[0].kernel.body, &mut |s| {
        if let Stmt::Simt(SimtStmt::Compute { value: ScalarExpr::Cast { x, .. }, .. }) = s {
            if let ScalarExpr::Select { then, .. } = &**x {
                let load = (**then).clone();
                **x = load;
            }
        }
    });
    let data: Vec<Vec<f64>> = inputs(&g).iter().map(|t| t.data.clone()).collect();
    let e = emulate(&p, &[], &data).expect_err("the unguarded reads ran");
    assert!(e.message.contains("out of bounds") || e.message.contains("outside"), "{e}");
}

/// Ranks the plans of `algo_choice conv winograd_3x3` first (estimate 0)
/// and every other plan after them (1 s): how a measured or pinned
/// estimator picks Winograd through the seam.
struct PinWinograd;

impl Estimator for PinWinograd {
    fn estimate(&self, plan: &Plan, _: &Problem, _: &Target) -> DResult<Estimate> {
        let time_s = if algorithm(plan, AlgoKey::Conv) == Some(winograd::ALGO) { 0.0 } else { 1.0 };
        Ok(Estimate { time_s, limit: Limit::Compute })
    }
}

/// Conv → ReLU → AvgPool with Winograd pinned: the convolution's region
/// becomes the four Winograd launches (their temporaries added to the
/// program), the pool a SIMT kernel after them; equal to the interpreter
/// within 1e-2 relative (the bound above allows more than the implicit
/// GEMM's 1e-3 where the transforms cancel).
#[test]
fn a_pinned_winograd_convolution_runs_inside_a_larger_graph() {
    let src = "graph crp(x: f16[2, 8, 10, 10], w: f16[16, 8, 3, 3], b: f16[16]) -> (y: f16[2, 16, 5, 5]) {\n    c = \
               relu(conv2d(x, w, bias=b, pad=[1, 1]))\n    y = avgpool2d(c, kernel=[2, 2], stride=[2, 2])\n    return \
               y\n}\n";
    let g = load(src);
    let prog = crate::gpu::driver::lower_program_with(&g, &SM80, &PinWinograd).unwrap_or_else(|e| panic!("{e}"));
    let p = crate::gpu::simt::tests::check_program(&g, prog, &[], 1e-2);
    let forms: Vec<Form> = p.launches.iter().map(|l| l.form).collect();
    assert_eq!(&forms[..4], [Form::WinogradTransform, Form::WinogradTransform, Form::Gemm, Form::WinogradTransform]);
    assert!(forms[4..].iter().all(|f| !f.tensor_cores()), "{forms:?}");
    let temps = p.buffers.iter().filter(|b| b.role == crate::cpu::loop_ir::Role::Temp).count();
    assert!(temps >= 3, "{:?}", p.buffers);
    // The analytic model keeps this small layer on the implicit GEMM.
    let analytic = crate::gpu::driver::lower_program_for(&g, Some(&SM80)).unwrap();
    assert_eq!(analytic.launches[0].form, Form::Gemm);
    assert!(analytic.launches.iter().all(|l| l.form != Form::WinogradTransform));
}

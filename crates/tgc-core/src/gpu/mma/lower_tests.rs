//! Graph → GEMM recognition on the spec graphs, its positioned errors, and
//! the chosen plan's kernel through the whole sm80 pipeline (NVRTC, ptxas,
//! cuobjdump; no GPU).

use std::collections::BTreeMap;

use super::*;
use crate::gpu::mma::recognise::*;
use crate::gpu::mma::{BLayout, Gemm};
use crate::gpu::toolchain::sass_opcodes;
use crate::pipeline::{self, Format};
use crate::plan::resources;
use crate::plan::Epilogue;
use crate::{DType, ErrorName};

fn spec(name: &str) -> Graph {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/spec").join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    pipeline::load(&text, Format::Json, None).unwrap().graph
}

fn example(name: &str) -> Graph {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/graphs").join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    pipeline::load(&text, Format::Dsl, None).unwrap().graph
}

fn bind(g: &Graph, dims: &[(&str, i64)]) -> Graph {
    let values: BTreeMap<String, i64> = dims.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    g.bind(&values).unwrap()
}

#[test]
fn spec_gemm_bias_relu_is_a_kn_gemm_with_rounding_bias_and_relu() {
    let g = bind(&spec("000_gemm_bias_relu.json"), &[("M", 100), ("N", 72), ("K", 40)]);
    let m = match_gemm(&g).unwrap();
    assert_eq!(m.problem, crate::plan::Problem::gemm(100, 72, 40, DType::F16));
    assert_eq!(
        m.gemm,
        Gemm {
            ab: DType::F16,
            out: DType::F16,
            b_layout: BLayout::KN,
            round_sum: true,
            align_a: 8,
            align_b: 8,
            align_c: 8,
            implicit: None
        }
    );
    assert_eq!(m.epilogue, [Epilogue::Bias, Epilogue::Relu]);
    let roles: Vec<(&str, Operand)> = m.inputs.iter().map(|(n, r)| (n.as_str(), *r)).collect();
    assert_eq!(roles, [("A", Operand::A), ("B", Operand::B), ("bias", Operand::Bias)]);
}

#[test]
fn a_permuted_b_and_odd_leading_dimensions() {
    let g = bind(&spec("002_gemm.json"), &[("M", 33), ("N", 34), ("K", 36)]);
    let m = match_gemm(&g).unwrap();
    assert_eq!((m.gemm.b_layout, m.gemm.align_a, m.gemm.align_b, m.gemm.align_c), (BLayout::KN, 4, 2, 2));
    assert!(m.epilogue.is_empty());
}

#[test]
fn what_is_not_one_concrete_gemm_is_a_positioned_error() {
    let err = match_gemm(&example("gemm_bias_relu.tgc")).unwrap_err();
    assert_eq!(err.name, ErrorName::UnboundSymbol, "{err}");
    let span = err.span.expect("the contraction's position");
    assert_eq!((span.line, span.col), (4, 11), "{err}");
    assert!(err.message.contains("give them with --dim"), "{err}");

    // The convolution is recognised, and its 2×2 max pool of stride 2 is
    // pooled on the output tile (NCHW: on the GEMM's columns); a 3×3 pool
    // is no epilogue.
    let m = match_gemm(&bind(&example("conv_relu_pool.tgc"), &[("N", 2)])).unwrap();
    assert_eq!(m.gemm.implicit.as_ref().and_then(|im| im.pool), Some(crate::gpu::mma::Axis::N));
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/graphs/conv_relu_pool.tgc");
    let text =
        std::fs::read_to_string(path).unwrap().replace("kernel=[2, 2]", "kernel=[3, 3]").replace("16, 16]", "15, 15]");
    let g = pipeline::load(&text, Format::Dsl, None).unwrap().graph;
    let err = match_gemm(&bind(&g, &[("N", 2)])).unwrap_err();
    assert_eq!(err.name, ErrorName::Unsupported, "{err}");
    assert!(err.span.is_some() && err.message.contains("not a 2×2 max pool of stride 2"), "{err}");

    let err = match_gemm(&example("attention.tgc")).unwrap_err();
    assert_eq!(err.name, ErrorName::Unsupported, "{err}");
    assert!(err.span.is_some(), "{err}");
}

/// The chosen plan of a 1000×512×256 GEMM + bias + ReLU through
/// [`pipeline::compile_gpu`]: the SASS has the tensor-core MMA, the
/// asynchronous copies and `ldmatrix`; ptxas's numbers against §5:
///
/// - shared memory: all dynamic (ptxas's static count is 0) and the IR's
///   `smem_bytes` equals `smem_per_cta` exactly;
/// - registers: at least the fragments (accumulator + one k-step of A and
///   B; nothing spills, so they are all in registers) and at most the
///   estimate + 48. The estimate's `BASE_REGS` (32) is the model's guess
///   for addresses and counters; this template keeps one 64-bit source
///   address and a byte count per `cp.async` of a stage live across the
///   k loop (8 copies per thread here), which ptxas reports as 44 more.
#[test]
fn the_chosen_plan_compiles_to_hmma_ldgsts_ldsm_within_its_estimate() {
    let g = bind(&example("gemm_bias_relu.tgc"), &[("M", 1000), ("N", 512), ("K", 256)]);
    let gpu = pipeline::compile_gpu(&g, "sm80", &crate::plan::cost::Analytic).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(gpu.symbol, "tgc_gemm_bias_relu");
    assert!(gpu.refusals.is_empty(), "{:?}", gpu.refusals);
    // One launch: the tensor-core kernel, with its plan.
    let [launch] = &gpu.program.launches[..] else { panic!("{} launches", gpu.program.launches.len()) };
    assert_eq!(launch.form, crate::gpu::program::Form::Gemm);
    let plan = gpu.plan().expect("the tensor-core kernel's plan");
    let target = &crate::plan::target::SM80;
    let est = resources::of(plan, DType::F16, target).unwrap();
    let warp = plan.warp_tile.as_ref().unwrap().value;
    let fragments = resources::acc_regs(warp, DType::F16, target) + resources::operand_regs(warp, DType::F16, target);
    let r = &gpu.resources[0];
    eprintln!("chosen plan:\n{}ptxas: {r:?}\nestimate: {est:?}, fragments {fragments}", crate::plan::print_dsl(plan));
    assert_eq!((r.spill_stores, r.spill_loads, r.stack_frame), (0, 0, 0), "{r:?}");
    assert_eq!(r.shared_bytes, 0, "{r:?}");
    assert_eq!(launch.kernel.smem_bytes, est.smem_per_cta);
    let regs = r.registers as u64;
    assert!(
        fragments <= regs && regs <= est.regs_per_thread + 48,
        "{regs} registers, estimate {}",
        est.regs_per_thread
    );

    let tc = crate::gpu::toolchain::Toolchain::locate().unwrap();
    let ops = sass_opcodes(&tc.sass(&gpu.cubin).unwrap());
    for want in ["HMMA.16816.F32", "LDGSTS", "LDSM"] {
        assert!(ops.iter().any(|o| o.starts_with(want)), "no {want} in {ops:?}");
    }
    let files: Vec<String> = gpu.files().into_iter().map(|f| f.0).collect();
    assert_eq!(files, ["tgc_gemm_bias_relu.cu", "tgc_gemm_bias_relu.ptx", "tgc_gemm_bias_relu.cubin", "plan.json"]);
    assert_eq!(crate::plan::from_json(&crate::plan::to_json(plan)).unwrap(), *plan);
    let dump = pipeline::dump_gpu_stage("gpu", &gpu).unwrap();
    assert!(
        dump.starts_with("// Gemm form; ptxas: ") && dump.contains("\nkernel gemm_bias_relu_gemm arch=sm80"),
        "{dump}"
    );
}

/// The launch limits are the target's: a grid of more than one block
/// along `y` is refused on a target whose row allows one.
#[test]
fn the_grid_limit_is_the_targets() {
    let g = bind(&spec("000_gemm_bias_relu.json"), &[("M", 1024), ("N", 64), ("K", 64)]);
    assert!(build(&g, &crate::plan::target::SM80, "k").is_ok());
    let one_row = Target { max_grid: [crate::plan::target::SM80.max_grid[0], 1, 1], ..crate::plan::target::SM80 };
    let err = build(&g, &one_row, "k").unwrap_err();
    assert_eq!(err.name, ErrorName::Unsupported, "{err}");
    assert!(err.message.contains("blocks along y") && err.message.contains("more than the 1 sm80 allows"), "{err}");
}

/// The epilogue reads a bias through the movements the IndexBook
/// composes ([`index_book::chase`]): here a reshape into two axes and back,
/// neither of which only adds or drops size-1 axes.
#[test]
fn a_bias_is_read_through_composed_movements() {
    let text = "graph gemm_bias(x: f16[64, 32], w: f16[32, 48], bias: f16[48]) -> (y: f16[64, 48]) {\n    acc = \
                matmul(x, w)\n    b = reshape(reshape(bias, [6, 8]), [48])\n    y = acc + b\n    return y\n}\n";
    let g = pipeline::load(text, Format::Dsl, None).unwrap().graph;
    let m = match_gemm(&g).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(m.epilogue, [Epilogue::Bias]);
    let roles: Vec<(&str, Operand)> = m.inputs.iter().map(|(n, r)| (n.as_str(), *r)).collect();
    assert_eq!(roles, [("x", Operand::A), ("w", Operand::B), ("bias", Operand::Bias)]);
    // A bias of two axes merged is no contraction variable plus a constant.
    let merged = text
        .replace("bias: f16[48]", "bias: f16[6, 8]")
        .replace("reshape(reshape(bias, [6, 8]), [48])", "reshape(bias, [48])");
    let e = match_gemm(&pipeline::load(&merged, Format::Dsl, None).unwrap().graph).unwrap_err();
    assert_eq!(e.name, ErrorName::Unsupported, "{e}");
}

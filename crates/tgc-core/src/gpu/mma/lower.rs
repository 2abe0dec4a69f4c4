//! The MMA template's entry ([`gemm`], a row of the driver's list): a
//! graph that is one contraction + epilogue ([`super::recognise::match_gemm`])
//! → the plan the estimator ranks first ([`choose`]) → the kernel
//! ([`super::build`], the sm80 or sm90 branch by the plan's `arch`) → a
//! one-launch program bound to the graph's buffers.

use crate::cpu::loop_ir::BufId;
use crate::diag;
use crate::diag::DResult;
use crate::gpu::dialect::{Kernel, ParamId};
use crate::gpu::program::{whole_graph_buffers, Form, GpuProgram, Launch, LaunchArg};
use crate::gpu::template::Lowered;
use crate::index_book::contraction::Pattern;
use crate::plan::cost::Estimator;
use crate::plan::Spanned;
use crate::plan::{self, Plan, Target};
use crate::tiny::Graph;

use super::recognise::{match_gemm, GemmGraph};
use super::{Axis, GemmParams};

/// The kernel of a GEMM graph and how it was made.
#[derive(Clone, Debug)]
pub struct GpuKernel {
    pub graph: GemmGraph,
    /// The chosen plan, with the graph's epilogue, and its estimate.
    pub plan: Plan,
    pub estimate: plan::cost::Estimate,
    pub kernel: Kernel,
    pub params: GemmParams,
}

/// Recognises `g`, chooses the best plan of the space for `target` by the
/// analytic model ([`plan::cost::choose`]), adds the graph's epilogue to it
/// and builds the kernel, named `symbol`.
///
/// Errors: those of [`match_gemm`], of plan choice (no valid plan) and of
/// [`super::build`], at the contraction.
pub fn build(g: &Graph, target: &Target, symbol: &str) -> DResult<GpuKernel> {
    build_with(g, target, &plan::cost::Analytic, symbol)
}

/// [`build`] with the plan ranked best by `estimator` (the seam of
/// [`plan::cost::Estimator`]: measured timings, a plan sweep) instead of
/// the analytic model.
pub fn build_with(g: &Graph, target: &Target, estimator: &dyn Estimator, symbol: &str) -> DResult<GpuKernel> {
    let graph = match_gemm(g)?;
    let at = g.node(graph.contraction);
    target.require_mma_sync(graph.problem.dtype).map_err(|why| diag!(Unsupported, "{why}").at_node(at))?;
    let choice = choose(&graph, target, estimator).map_err(|d| d.or_at(at.span))?;
    let Some(&(ref best, estimate)) = choice.best() else {
        // The last rejection: the estimator's (a pinned algorithm) when it
        // refused them all, else the space's.
        let why = choice.rejected.last().map(|(_, w)| format!(": {}", w.join("; "))).unwrap_or_default();
        return Err(diag!(Unsupported, "no plan of the space fits this GEMM on {}{why}", target.name).at_node(at));
    };
    check_launch(&graph, best, target).map_err(|d| d.at_node(at))?;
    let mut plan = best.clone();
    plan.epilogue = graph.epilogue.iter().map(|&e| Spanned::new(e)).collect();
    let (mut kernel, params) = super::build(&plan, &graph.gemm).map_err(|d| d.or_at(at.span))?;
    kernel.name = symbol.to_string();
    Ok(GpuKernel { graph, plan, estimate, kernel, params })
}

/// Registers per thread an implicit GEMM's loader needs beyond the plan's
/// estimate ([`plan::resources::regs_per_thread`]): the digits of each
/// copy's row and column and its guards. An allowance from ptxas's
/// reports, not a model: a 3×3 NHWC convolution took 167 registers with a
/// 64×32 warp tile (estimate 120) and spilled at 255 with 64×64
/// (estimate 192).
pub const IMPLICIT_ADDRESS_REGS: u64 = 64;

/// The ranked plan space of `graph` on `target` by `estimator`
/// ([`plan::cost::choose_with`]; a convolution's plans carry `algo_choice
/// conv implicit_gemm`, also as the estimator sees them); for an implicit GEMM, the plans whose
/// registers with [`IMPLICIT_ADDRESS_REGS`] exceed the target's limit are
/// rejected, and `warp_specialize` plans where the operands cannot be
/// copied by TMA ([`super::uses_tma`]: the specialised form's
/// producer issues TMA copies only).
///
/// Errors: those of [`plan::cost::choose_with`].
pub fn choose(graph: &GemmGraph, target: &Target, estimator: &dyn Estimator) -> DResult<plan::cost::Choice> {
    let mut choice = if graph.pattern == Pattern::Conv {
        // A convolution's plans say they are its implicit GEMM.
        let conv = plan::AlgoChoice::Conv(plan::ConvAlgo::ImplicitGemm);
        let tagged = plan::cost::Tagged { inner: estimator, choice: conv };
        let mut c = plan::cost::choose_with(&tagged, &graph.problem, target)?;
        let tag = |p: &Plan| plan::cost::with_algorithm(p, conv);
        c.candidates.iter_mut().for_each(|(p, _)| *p = tag(p));
        c.rejected.iter_mut().for_each(|(p, _)| *p = tag(p));
        c
    } else {
        plan::cost::choose_with(estimator, &graph.problem, target)?
    };
    if !super::uses_tma(&graph.gemm) {
        choice.reject(|p| {
            p.warp_specialize.as_ref().map(|_| {
                "warp_specialize needs TMA copies: operand rows of a multiple of 16 bytes and no implicit GEMM".into()
            })
        });
    }
    if graph.gemm.implicit.is_some() {
        choice.reject(|p| {
            let regs = plan::resources::of(p, graph.problem.dtype, target)?.regs_per_thread;
            (regs + IMPLICIT_ADDRESS_REGS > target.regs_per_thread_max).then(|| {
                format!(
                    "about {regs} registers per thread and {IMPLICIT_ADDRESS_REGS} for the implicit GEMM's addresses \
                     exceed {}'s {}",
                    target.name, target.regs_per_thread_max
                )
            })
        });
    }
    Ok(choice)
}

/// Checks that the SM80 template can launch `graph`'s GEMM with `plan` on
/// `target`: `M`, `N`, `K` (and so the leading dimensions) fit the
/// kernel's `int` parameters, and the grid `(⌈N/BN⌉, ⌈M/BM⌉, batch)`
/// fits the target's [`Target::max_grid`].
///
/// Errors: `Unsupported`, naming the size and the limit.
fn check_launch(graph: &GemmGraph, plan: &Plan, target: &Target) -> DResult<()> {
    let [m, n, k] = graph.sizes.map(|x| x as u64);
    for (name, v) in [("M", m), ("N", n), ("K", k)] {
        if v > i32::MAX as u64 {
            return Err(diag!(
                Unsupported,
                "{name} = {v} does not fit the sm80 kernel's 32-bit `int {name}` parameter (at most {})",
                i32::MAX
            ));
        }
    }
    let [bm, bn, _] = plan.tile.as_ref().map_or([1; 3], |t| t.value);
    let [max_x, max_y, max_z] = target.max_grid;
    let blocks = [("x", n.div_ceil(bn.max(1)), max_x, "N", bn), ("y", m.div_ceil(bm.max(1)), max_y, "M", bm)];
    for (axis, blocks, limit, dim, tile) in blocks {
        if blocks > limit {
            return Err(diag!(
                Unsupported,
                "the grid needs {blocks} blocks along {axis} (⌈{dim}/{tile}⌉), more than the {limit} {} allows",
                target.name
            ));
        }
    }
    let batch = graph.gemm.implicit.as_ref().map_or(1, |im| im.extent(Axis::Batch)) as u64;
    if batch > max_z {
        return Err(diag!(Unsupported, "{batch} batch points exceed the grid's z limit {max_z}"));
    }
    Ok(())
}

/// The GEMM template ([`build_with`]) as a program, with
/// its chosen plan's estimate.
pub fn gemm(g: &Graph, target: &Target, estimator: &dyn Estimator) -> DResult<Lowered> {
    let gk = build_with(g, target, estimator, &format!("{}_gemm", g.name))?;
    let estimate = gk.estimate;
    let program = gemm_program(g, gk).ok_or_else(|| {
        diag!(
            Unsupported,
            "the GEMM kernel's parameters do not bind to the program's buffers (one input as both operands)"
        )
    })?;
    Ok(Lowered { program, estimate })
}

/// The one-launch program of the GEMM graph `g` with its tensor-core
/// kernel `gk` ([`build_with`]); `None` when a kernel parameter binds to
/// no buffer of the graph (one input as both operands) or the graph has
/// more than one output.
fn gemm_program(g: &Graph, gk: GpuKernel) -> Option<GpuProgram> {
    use super::recognise::Operand;
    let ps = &gk.params;
    if g.outputs.len() != 1 {
        return None;
    }
    let [m, n, k] = gk.graph.sizes;
    let ldb = if gk.graph.gemm.b_layout == super::BLayout::KN { n } else { k };
    // A pool on the columns stores a quarter of each row (`Implicit::pool`).
    let pooled_n = gk.graph.gemm.implicit.as_ref().is_some_and(|im| im.pool == Some(super::Axis::N));
    let ldc = if pooled_n { n / 4 } else { n };
    let buffers = whole_graph_buffers(g);
    let role_buf: Vec<(Operand, BufId)> =
        gk.graph.inputs.iter().enumerate().map(|(i, (_, role))| (*role, BufId(i as u32))).collect();
    let c = BufId(buffers.len() as u32 - 1);
    let role = |r: Operand| role_buf.iter().find(|x| x.0 == r).map(|x| x.1);
    let mut bind: Vec<(ParamId, LaunchArg)> = vec![
        (ps.a, LaunchArg::Buffer(role(Operand::A)?)),
        (ps.b, LaunchArg::Buffer(role(Operand::B)?)),
        (ps.c, LaunchArg::Buffer(c)),
        (ps.m, LaunchArg::Int(m)),
        (ps.n, LaunchArg::Int(n)),
        (ps.k, LaunchArg::Int(k)),
        (ps.lda, LaunchArg::Int(k)),
        (ps.ldb, LaunchArg::Int(ldb)),
        (ps.ldc, LaunchArg::Int(ldc)),
    ];
    if let Some(p) = ps.bias {
        bind.push((p, LaunchArg::Buffer(role(Operand::Bias)?)));
    }
    if let Some(p) = ps.residual {
        bind.push((p, LaunchArg::Buffer(role(Operand::Residual)?)));
    }
    for p in ps.tensor_maps.into_iter().flatten() {
        bind.push((p, LaunchArg::TensorMap));
    }
    let mut args = Vec::new();
    for i in 0..gk.kernel.params.len() {
        args.push(bind.iter().find(|(p, _)| p.0 as usize == i)?.1);
    }
    let launch = Launch {
        kernel: gk.kernel,
        form: Form::Gemm,
        args,
        region: g.ids().collect(),
        outs: vec![c],
        plan: Some(gk.plan),
    };
    Some(GpuProgram { name: g.name.clone(), symbols: Vec::new(), checks: Vec::new(), buffers, launches: vec![launch] })
}

#[cfg(test)]
#[path = "lower_tests.rs"]
mod tests;

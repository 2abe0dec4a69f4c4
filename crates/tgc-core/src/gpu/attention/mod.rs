//! The fused attention template (`matmul → softmax → matmul`, FlashAttention-2's
//! online softmax or the two-pass softmax): the recogniser ([`recognise`]:
//! [`recognise::match_attention`]), the kernel builder with its sm80
//! (`mma.sync`) and sm90 (`wgmma`) branches ([`kernel`]), and the
//! template's entry ([`lower`], rows of the driver's list): the graph's
//! kernel on the CTA size the estimator ranks first ([`build`]) as a
//! one-launch program.

pub mod kernel;
pub mod recognise;

#[cfg(test)]
mod tests;

use crate::cpu::loop_ir::BufId;
use crate::diag;
use crate::diag::DResult;
use crate::gpu::dialect::ParamId;
use crate::gpu::program::{whole_graph_buffers, Form, GpuProgram, Launch, LaunchArg};
use crate::gpu::template::Lowered;
use crate::plan::cost::Estimator;
use crate::plan::Target;
use crate::tiny::Graph;

use kernel::Algorithm;
use recognise::{match_attention, AttentionGraph};

/// The fused kernel of an attention graph and how it was made.
#[derive(Clone, Debug)]
pub struct AttentionKernel {
    pub graph: AttentionGraph,
    /// The softmax's algorithm and the kernel's plan
    /// (`sm80::attention::plan`).
    pub algo: Algorithm,
    pub plan: crate::plan::Plan,
    pub kernel: crate::gpu::dialect::Kernel,
    pub params: kernel::AttentionParams,
}

/// Recognises `g` ([`match_attention`]) and builds its fused kernel for
/// `target` with the softmax by `algo`, named `symbol`, on the CTA size
/// ([`kernel::warp_choices`]) `estimator` ranks first (the smaller
/// on a tie).
///
/// Errors: those of [`match_attention`]; `Unsupported` when `target` has
/// no `mma.sync` for the operands' dtype or the template does not take the
/// attention (`sm80::attention::build`), and the estimator's when it costs
/// no CTA size, at the `Q·Kᵀ` contraction.
pub fn build(
    g: &Graph,
    target: &crate::plan::Target,
    algo: Algorithm,
    estimator: &dyn crate::plan::cost::Estimator,
    symbol: &str,
) -> DResult<AttentionKernel> {
    let graph = match_attention(g)?;
    let at = g.node(graph.scores);
    target.require_mma_sync(graph.attention.ab).map_err(|why| diag!(Unsupported, "{why}").at_node(at))?;
    let arch = super::dialect::Arch::parse(target.name)
        .ok_or_else(|| diag!(Unsupported, "no attention template for target `{}`", target.name).at_node(at))?;
    let problem = kernel::problem(&graph.attention);
    let mut best: Option<(f64, crate::plan::Plan, i64)> = None;
    let mut refusal = None;
    for &warps in kernel::warp_choices(arch) {
        let plan = kernel::plan(&graph.attention, algo, target, warps);
        match estimator.estimate(&plan, &problem, target) {
            Ok(e) if best.as_ref().is_none_or(|(t, _, _)| e.time_s < *t) => best = Some((e.time_s, plan, warps)),
            Ok(_) => {}
            Err(d) => {
                refusal.get_or_insert(d);
            }
        }
    }
    let Some((_, plan, warps)) = best else {
        let d =
            refusal.unwrap_or_else(|| diag!(Internal, "the attention template offers no CTA size on {}", arch.name()));
        return Err(d.or_at(at.span));
    };
    let (mut kernel, params) = kernel::build(&graph.attention, algo, arch, warps).map_err(|d| d.or_at(at.span))?;
    kernel.name = symbol.to_string();
    Ok(AttentionKernel { graph, algo, plan, kernel, params })
}

/// The attention template ([`super::attention::build`]) with `algo` as a
/// program, with `estimator`'s time for its plan.
///
/// Errors: those of the build, and the estimator's when it cannot cost the
/// plan.
pub fn lower(g: &Graph, target: &Target, estimator: &dyn Estimator, algo: Algorithm) -> DResult<Lowered> {
    let ak = super::attention::build(g, target, algo, estimator, &format!("{}_attention", g.name))?;
    let problem = super::attention::kernel::problem(&ak.graph.attention);
    let at = g.node(ak.graph.scores).span;
    let estimate = estimator.estimate(&ak.plan, &problem, target).map_err(|d| d.or_at(at))?;
    Ok(Lowered { program: attention_program(g, ak)?, estimate })
}

/// The one-launch program of the attention graph `g` with its fused
/// kernel `ak` ([`super::attention::build`]).
///
/// Errors: `Internal` when a kernel parameter is left unbound.
fn attention_program(g: &Graph, ak: super::attention::AttentionKernel) -> DResult<GpuProgram> {
    use super::attention::recognise::Role as R;
    let buffers = whole_graph_buffers(g);
    let out = BufId(buffers.len() as u32 - 1);
    let tensor_biases: Vec<ParamId> = ak.params.biases.iter().flatten().copied().collect();
    let mut bind: Vec<(ParamId, LaunchArg)> = vec![(ak.params.o, LaunchArg::Buffer(out))];
    for &(role, i) in &ak.graph.inputs {
        let param = match role {
            R::Q => Some(ak.params.q),
            R::K => Some(ak.params.k),
            R::V => Some(ak.params.v),
            R::Bias(b) => tensor_biases.get(b).copied(),
        };
        if let Some(p) = param {
            bind.push((p, LaunchArg::Buffer(BufId(i as u32))));
        }
    }
    bind.sort_by_key(|b| b.0);
    if bind.iter().map(|b| b.0 .0 as usize).ne(0..ak.kernel.params.len()) {
        return Err(diag!(Internal, "the attention kernel's parameters do not bind one to one to the graph's buffers"));
    }
    let launch = Launch {
        kernel: ak.kernel,
        form: Form::Attention,
        args: bind.into_iter().map(|b| b.1).collect(),
        region: g.ids().collect(),
        outs: vec![out],
        plan: Some(ak.plan),
    };
    Ok(GpuProgram { name: g.name.clone(), symbols: Vec::new(), checks: Vec::new(), buffers, launches: vec![launch] })
}

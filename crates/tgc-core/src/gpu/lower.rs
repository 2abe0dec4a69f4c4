//! From a Tiny IR graph to one SM80 GEMM kernel: recognising a graph that
//! is a GEMM plus an epilogue ([`match_gemm`]), choosing its plan with
//! [`plan::cost::choose`] and instantiating the template ([`build`]).
//!
//! Recognised (structurally, on the Tiny IR):
//!
//! - one contraction: `REDUCE SUM` over one axis of a rank-3 `MUL` whose
//!   result is `[M, N]`; `M`, `N`, `K` concrete (bound with `--dim`);
//! - its operands: graph inputs reached through `RESHAPE`s that only add or
//!   drop size-1 axes, `EXPAND`s and `PERMUTE`s; `A` stored `[M, K]`, `B`
//!   stored `[K, N]` ([`BLayout::KN`]) or `[N, K]` ([`BLayout::NK`]),
//!   row-major;
//! - after the sum, a chain of single-use nodes, each one of: `CAST` to the
//!   operand dtype right after the sum (the rounding of `001` §0); `ADD` of
//!   an input broadcast from `[N]` (`bias`) or of an input `[M, N]`
//!   (`residual`); `RELU`. The chain's end is the graph's only output.
//!
//! Anything else (a second contraction, another op, an input the kernel
//! has no parameter for) is an `Unsupported` error at the node.

use crate::diag;
use crate::diag::DResult;
use crate::plan::cost::Estimator;
use crate::plan::{self, Plan, Spanned, Target};
use crate::tiny::{BinaryOp, Graph, NodeId, Op, ReduceOp, UnaryOp};

use super::ir::Kernel;
use super::sm80::{self, BLayout, Gemm, GemmParams};

/// What a graph input is to the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand {
    A,
    B,
    Bias,
    Residual,
}

/// A graph recognised as GEMM + epilogue.
#[derive(Clone, Debug)]
pub struct GemmGraph {
    /// `M`, `N`, `K` and the operand dtype, for plan choice.
    pub problem: plan::Problem,
    pub gemm: Gemm,
    /// Epilogue op names in order (`bias`, `relu`, `residual`), as a
    /// plan's `epilogue`.
    pub epilogue: Vec<String>,
    /// Each graph input's role, in the graph's input order.
    pub inputs: Vec<(String, Operand)>,
    /// The graph output the kernel writes (`C`).
    pub output: String,
    /// The contraction (`REDUCE SUM`) node.
    pub contraction: NodeId,
}

/// The kernel of a GEMM graph and how it was made.
#[derive(Clone, Debug)]
pub struct GpuKernel {
    pub graph: GemmGraph,
    /// The chosen plan, with the graph's epilogue.
    pub plan: Plan,
    pub kernel: Kernel,
    pub params: GemmParams,
}

/// Whether node `id` is a contraction [`match_gemm`] looks for: a `REDUCE
/// SUM` over one axis of a `MUL`.
pub fn is_contraction(g: &Graph, id: NodeId) -> bool {
    let n = g.node(id);
    matches!(&n.op, Op::Reduce { op: ReduceOp::Sum, axes } if axes.len() == 1)
        && n.src.first().is_some_and(|&m| matches!(g.node(m).op, Op::Binary(BinaryOp::Mul)))
}

/// Follows movement ops from `id` (whose axes are `axes`, each the index
/// of an axis of the reference space, or `None` for a broadcast or size-1
/// axis) down to a graph input; the input and its axes' meaning.
fn trace(g: &Graph, mut id: NodeId, mut axes: Vec<Option<usize>>) -> DResult<(NodeId, Vec<Option<usize>>)> {
    loop {
        let n = g.node(id);
        let unsupported =
            |what: &str| diag!(Unsupported, "the sm80 GEMM cannot read its operand through {what}").at_node(n);
        match &n.op {
            Op::Input { .. } => return Ok((id, axes)),
            Op::Expand => {
                let x = n.src[0];
                axes = axes
                    .iter()
                    .zip(g.shape(x).iter().zip(g.shape(id)))
                    .map(|(&a, (from, to))| if from.is_one() && !to.is_one() { None } else { a })
                    .collect();
                id = x;
            }
            Op::Reshape => {
                let x = n.src[0];
                let kept: Vec<Option<usize>> =
                    g.shape(id).iter().zip(&axes).filter(|(d, _)| !d.is_one()).map(|(_, &a)| a).collect();
                let xs = g.shape(x);
                let non_unit: Vec<usize> = (0..xs.len()).filter(|&k| !xs[k].is_one()).collect();
                let ours: Vec<&crate::sym::Dim> = g.shape(id).iter().filter(|d| !d.is_one()).collect();
                if non_unit.len() != kept.len() || non_unit.iter().zip(&ours).any(|(&k, d)| &xs[k] != *d) {
                    return Err(unsupported("a RESHAPE that does more than add or drop size-1 axes"));
                }
                let mut next = vec![None; xs.len()];
                for (&k, a) in non_unit.iter().zip(kept) {
                    next[k] = a;
                }
                axes = next;
                id = x;
            }
            Op::Permute { perm } => {
                let mut next = vec![None; perm.len()];
                for (j, &p) in perm.iter().enumerate() {
                    next[p] = axes[j];
                }
                axes = next;
                id = n.src[0];
            }
            other => return Err(unsupported(&format!("`{}`", other.name()))),
        }
    }
}

/// Whether an input's axes are `want` (row-major), a size-1 axis standing
/// for any.
fn laid_out(axes: &[Option<usize>], want: &[usize]) -> bool {
    axes.len() == want.len() && axes.iter().zip(want).all(|(a, w)| a.is_none_or(|a| a == *w))
}

fn input_name(g: &Graph, id: NodeId) -> String {
    match &g.node(id).op {
        Op::Input { name } => name.clone(),
        _ => g.node(id).label.clone(),
    }
}

/// The largest of 8, 4, 2, 1 elements dividing `x` (a leading dimension).
fn align(x: u64) -> u32 {
    [8u32, 4, 2, 1].into_iter().find(|&a| x.is_multiple_of(a as u64)).unwrap_or(1)
}

/// Recognises `g` as GEMM + epilogue (module doc).
///
/// Errors: `Unsupported` at the node that breaks the pattern (no or two
/// contractions, a layout, an op); `UnboundSymbol` at the contraction when
/// `M`, `N` or `K` is symbolic.
pub fn match_gemm(g: &Graph) -> DResult<GemmGraph> {
    let contractions: Vec<NodeId> = g.ids().filter(|&id| is_contraction(g, id)).collect();
    let r = match contractions.as_slice() {
        [r] => *r,
        [] => {
            let d = diag!(
                Unsupported,
                "graph `{}` has no GEMM contraction (REDUCE SUM of one axis of a MUL): the sm80 target compiles one \
                 GEMM + epilogue",
                g.name
            );
            return Err(match g.outputs.first() {
                Some(o) => d.at_node(g.node(o.node)),
                None => d,
            });
        }
        [_, second, ..] => {
            return Err(diag!(
                Unsupported,
                "graph `{}` has {} contractions; the sm80 target compiles one GEMM + epilogue per graph",
                g.name,
                contractions.len()
            )
            .at_node(g.node(*second)))
        }
    };
    let rn = g.node(r);
    let mul = rn.src[0];
    let Op::Reduce { axes, .. } = &rn.op else {
        return Err(diag!(Internal, "contraction `{}` is not a REDUCE", rn.label));
    };
    let k_ax = axes[0];
    let ms = g.shape(mul);
    if ms.len() != 3 || g.shape(r).len() != 2 {
        return Err(diag!(
            Unsupported,
            "the sm80 target compiles a rank-2 GEMM [M, N]; this contraction is rank {}",
            g.shape(r).len()
        )
        .at_node(rn));
    }
    let [m_ax, n_ax] = match k_ax {
        0 => [1, 2],
        1 => [0, 2],
        _ => [0, 1],
    };
    let dims = [&ms[m_ax], &ms[n_ax], &ms[k_ax]];
    let concrete: Vec<u64> = dims.iter().filter_map(|d| d.as_int().and_then(|v| u64::try_from(v).ok())).collect();
    let &[m, n, k] = concrete.as_slice() else {
        return Err(diag!(
            UnboundSymbol,
            "the GEMM needs concrete M, N, K for the sm80 target (M={}, N={}, K={}; give them with --dim)",
            dims[0],
            dims[1],
            dims[2]
        )
        .at_node(rn));
    };
    let ab = g.dtype(mul);
    let mut inputs: Vec<(NodeId, Operand)> = Vec::new();
    let mut b_layout = None;
    for &src in &g.node(mul).src {
        let (input, axes) = trace(g, src, vec![Some(0), Some(1), Some(2)])?;
        let role = if laid_out(&axes, &[m_ax, k_ax]) && !inputs.iter().any(|x| x.1 == Operand::A) {
            Operand::A
        } else if laid_out(&axes, &[k_ax, n_ax]) {
            b_layout = Some(BLayout::KN);
            Operand::B
        } else if laid_out(&axes, &[n_ax, k_ax]) {
            b_layout = Some(BLayout::NK);
            Operand::B
        } else {
            return Err(diag!(
                Unsupported,
                "operand `{}` is not stored [M, K], [K, N] or [N, K] row-major",
                input_name(g, input)
            )
            .at_node(g.node(input)));
        };
        inputs.push((input, role));
    }
    let Some(b_layout) = b_layout.filter(|_| inputs.iter().any(|x| x.1 == Operand::A)) else {
        return Err(diag!(Unsupported, "the GEMM's operands are not one [M, K] and one [K, N] or [N, K]").at_node(rn));
    };

    let mut users: Vec<Vec<NodeId>> = vec![Vec::new(); g.len()];
    for id in g.ids() {
        for &s in &g.node(id).src {
            users[s.index()].push(id);
        }
    }
    let (mut cur, mut round_sum, mut epilogue) = (r, false, Vec::new());
    let mut chain = vec![mul, r];
    loop {
        let is_output = g.outputs.iter().any(|o| o.node == cur);
        if is_output {
            break;
        }
        let [next] = users[cur.index()].as_slice() else {
            return Err(diag!(
                Unsupported,
                "the GEMM's result is used {} times; the sm80 kernel has one output",
                users[cur.index()].len()
            )
            .at_node(g.node(cur)));
        };
        let nn = g.node(*next);
        match &nn.op {
            Op::Cast if cur == r && g.dtype(*next) == ab => round_sum = true,
            Op::Unary(UnaryOp::Relu) => epilogue.push("relu".to_string()),
            Op::Binary(BinaryOp::Add) => {
                let other = if nn.src[0] == cur { nn.src[1] } else { nn.src[0] };
                let (input, axes) = trace(g, other, vec![Some(0), Some(1)])?;
                let role = if laid_out(&axes, &[1]) {
                    Operand::Bias
                } else if laid_out(&axes, &[0, 1]) {
                    Operand::Residual
                } else {
                    return Err(diag!(
                        Unsupported,
                        "an ADD after the GEMM of `{}`, neither a bias [N] nor a residual [M, N]",
                        input_name(g, input)
                    )
                    .at_node(nn));
                };
                if g.dtype(input) != ab || inputs.iter().any(|x| x.1 == role) {
                    return Err(diag!(
                        Unsupported,
                        "the sm80 epilogue takes one {} in the operands' dtype {ab}",
                        if role == Operand::Bias { "bias" } else { "residual" }
                    )
                    .at_node(nn));
                }
                epilogue.push(if role == Operand::Bias { "bias" } else { "residual" }.to_string());
                inputs.push((input, role));
            }
            other => {
                return Err(diag!(
                    Unsupported,
                    "`{}` after the GEMM is not an epilogue the sm80 template fuses (bias, relu, residual)",
                    other.name()
                )
                .at_node(nn))
            }
        }
        chain.push(*next);
        cur = *next;
    }
    if g.outputs.len() != 1 {
        return Err(diag!(
            Unsupported,
            "graph `{}` has {} outputs; the sm80 kernel writes one",
            g.name,
            g.outputs.len()
        ));
    }
    let out = g.dtype(cur);
    for id in g.ids() {
        let n = g.node(id);
        let movement = matches!(n.op, Op::Reshape | Op::Expand | Op::Permute { .. });
        if matches!(n.op, Op::Input { .. }) && !inputs.iter().any(|x| x.0 == id) {
            return Err(diag!(
                Unsupported,
                "input `{}` is not an operand of the GEMM or its epilogue",
                input_name(g, id)
            )
            .at_node(n));
        }
        if !movement && !matches!(n.op, Op::Input { .. }) && !chain.contains(&id) {
            return Err(diag!(
                Unsupported,
                "`{}` is outside the GEMM + epilogue the sm80 target compiles",
                n.op.name()
            )
            .at_node(n));
        }
    }
    let ldb = if b_layout == BLayout::KN { n } else { k };
    let gemm =
        Gemm { ab, out, b_layout, round_sum, align_a: align(k), align_b: align(ldb), align_c: align(n), split_k: 1 };
    let mut named: Vec<(String, Operand)> = Vec::new();
    for id in g.inputs() {
        if let Some((_, role)) = inputs.iter().find(|x| x.0 == id) {
            named.push((input_name(g, id), *role));
        }
    }
    Ok(GemmGraph {
        problem: plan::Problem::gemm(m, n, k, ab),
        gemm,
        epilogue,
        inputs: named,
        output: g.outputs[0].name.clone(),
        contraction: r,
    })
}

/// Recognises `g`, chooses the best plan of the space for `target` by the
/// analytic model ([`plan::cost::choose`]), adds the graph's epilogue to it
/// and builds the kernel, named `symbol`.
///
/// Errors: those of [`match_gemm`], of plan choice (no valid plan) and of
/// [`sm80::build`], at the contraction.
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
    let choice = plan::cost::choose_with(estimator, &graph.problem, target).map_err(|d| d.or_at(at.span))?;
    let Some((best, _)) = choice.best() else {
        return Err(diag!(Unsupported, "no plan of the space fits this GEMM on {}", target.name).at_node(at));
    };
    check_launch(&graph, best).map_err(|d| d.at_node(at))?;
    let mut plan = best.clone();
    plan.epilogue = graph.epilogue.iter().map(|e| Spanned::new(e.clone())).collect();
    let (mut kernel, params) = sm80::build(&plan, &graph.gemm).map_err(|d| d.or_at(at.span))?;
    kernel.name = symbol.to_string();
    Ok(GpuKernel { graph, plan, kernel, params })
}

/// The most blocks of a grid along `y` and `z`; `x` allows
/// [`MAX_GRID_X`] (CUDA C++ Programming Guide, "Technical Specifications per
/// Compute Capability", the same for every compute capability since 3.0).
pub const MAX_GRID_YZ: u64 = 65_535;

/// The most blocks of a grid along `x`: 2^31 - 1.
pub const MAX_GRID_X: u64 = (1 << 31) - 1;

/// Checks that the SM80 template can launch `graph`'s GEMM with `plan`:
/// `M`, `N`, `K` (and so the leading dimensions) fit the kernel's `int`
/// parameters, and the grid `(⌈N/BN⌉, ⌈M/BM⌉, split_k)` fits the limits
/// above.
///
/// Errors: `Unsupported`, naming the size and the limit.
fn check_launch(graph: &GemmGraph, plan: &Plan) -> DResult<()> {
    let extent = |name: &str| graph.problem.axes.iter().find(|a| a.name == name).and_then(|a| a.extent).unwrap_or(0);
    let (m, n, k) = (extent("m"), extent("n"), extent("k"));
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
    let blocks =
        [("x", n.div_ceil(bn.max(1)), MAX_GRID_X, "N", bn), ("y", m.div_ceil(bm.max(1)), MAX_GRID_YZ, "M", bm)];
    for (axis, blocks, limit, dim, tile) in blocks {
        if blocks > limit {
            return Err(diag!(
                Unsupported,
                "the grid needs {blocks} blocks along {axis} (⌈{dim}/{tile}⌉), more than the {limit} CUDA allows"
            ));
        }
    }
    if graph.gemm.split_k as u64 > MAX_GRID_YZ {
        return Err(diag!(Unsupported, "split-K of {} exceeds the grid's z limit {MAX_GRID_YZ}", graph.gemm.split_k));
    }
    Ok(())
}

#[cfg(test)]
#[path = "lower_tests.rs"]
mod tests;

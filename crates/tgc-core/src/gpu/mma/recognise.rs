//! The MMA template's recogniser: a Tiny IR graph that is one contraction
//! plus an epilogue ([`match_gemm`]) as the template's [`GemmGraph`] (its
//! plan choice and the kernel are [`super::lower`]'s).
//!
//! Recognised:
//!
//! - one contraction, `REDUCE SUM` of a `MUL`, whose operands
//!   [`contraction::trace`] follows to graph inputs and whose pattern
//!   (`000` §3.5, the one recogniser Poly-View also uses) is `matmul` or
//!   `conv`: a GEMM, a batched matmul, a convolution with any stride,
//!   dilation and zero padding (`PAD`s on an operand's chain become the
//!   loader's guards), operands in any layout reached through movements;
//!   every size concrete (bound with `--dim`);
//! - after the sum, a chain of single-use nodes, each one of: `CAST` to the
//!   operand dtype before any other op (the rounding of `001` §0) or
//!   before an activation (not repeated: the epilogue keeps f32 between
//!   its ops and rounds at the store);
//!   `RESHAPE`s that only add or drop size-1 axes and `PERMUTE`s (they
//!   decide the output's layout); `ADD` of an input with the output's
//!   layout (`residual`) or broadcast along some of its axes (`bias`, one
//!   per kernel); `RELU`; the decomposition of SiLU, GELU (erf or tanh
//!   form) or tanh ([`EPILOGUE_ACTIVATIONS`], recognised as the frontend
//!   writes it), before any pooling. The chain's end is the graph's only
//!   output.
//!
//! The GEMM's axes come from the output's layout: `N` is its innermost run
//! of variables that only one operand (`B`) reads, `M` the run before it
//! that only the other (`A`) reads, the outer variables are batch points
//! (the grid's `z`), and `K` the reduce variables (the one `A` reads with
//! unit stride innermost, so that its copies are vectors). A plain GEMM —
//! one variable per axis, `A` `[M, K]` and `B` `[K, N]` or `[N, K]`
//! row-major, no padding — gets the template's run-time `M`, `N`, `K` and
//! leading dimensions; anything else is an implicit GEMM
//! ([`sm80::Implicit`]): affine addresses over the axes' digits, padding
//! zero-filled, no im2col buffer.
//!
//! Anything else (a second contraction, another op, a computed operand, an
//! input the kernel has no parameter for, an output whose innermost axis
//! both operands read) is an `Unsupported` error at the node.

use crate::affine::AffExpr;
use crate::diag;
use crate::diag::DResult;
use crate::frontend::ir::UnaryFn;
use crate::frontend::ops::recognise::recognise;
use crate::index_book::contraction::{self, Pattern};
use crate::index_book::{self, IndexBook};
use crate::plan::{self, Epilogue};
use crate::tiny::{BinaryOp, Graph, NodeId, Op, ReduceOp, UnaryOp};
use crate::DType;

use super::{Access, Affine, Axis, BLayout, Digit, Gemm, Implicit};

/// What a graph input is to the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operand {
    A,
    B,
    Bias,
    Residual,
}

/// A graph recognised as one contraction + epilogue.
#[derive(Clone, Debug)]
pub struct GemmGraph {
    /// `M`, `N`, `K` and the operand dtype, for plan choice (an implicit
    /// GEMM's batch points counted in `M`: the plan ranks the tiles of
    /// every batch point together).
    pub problem: plan::Problem,
    /// The kernel's `M`, `N`, `K` parameters (one batch point's GEMM).
    pub sizes: [i64; 3],
    /// Poly-View's pattern of the contraction (`000` §1.4).
    pub pattern: Pattern,
    pub gemm: Gemm,
    /// Epilogue op names in order (`bias`, `relu`, `residual`), as a
    /// plan's `epilogue`.
    pub epilogue: Vec<Epilogue>,
    /// Each graph input's role, in the graph's input order.
    pub inputs: Vec<(String, Operand)>,
    /// The graph output the kernel writes (`C`).
    pub output: String,
    /// The contraction (`REDUCE SUM`) node.
    pub contraction: NodeId,
    /// A convolution's spatial windows on the GEMM's digits (Poly-View's
    /// `conv` pattern, `000` §1.4), each once; empty for a matmul. A
    /// window whose output or reduce variable has extent 1 has no digit
    /// and is left out.
    pub windows: Vec<ConvWindow>,
}

/// One sliding window of a convolution: the operand index component
/// `stride·out + dilation·reduce + offset` (`index_book::contraction::Window`,
/// not a group's block of channels) with its variables as GEMM digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvWindow {
    /// The output position's digit (`M`, `N` or batch).
    pub out: Digit,
    /// The filter tap's digit (`K`).
    pub reduce: Digit,
    pub stride: i64,
    pub dilation: i64,
}

/// Follows movement ops from `id` (whose axes are `axes`, each the index
/// of a variable of the reference space, of extents `extents`, or `None`
/// for a broadcast or size-1 axis) down to a graph input: the IndexBook's
/// composition ([`index_book::chase`]), and through widening `CAST`s to
/// f32 (exact from f16/bf16, which the epilogue converts as it loads).
/// Returns the input, its axes' meaning and the constant offset of each of
/// its axes (a `SHRINK`'s `lo`: a slice of a stacked weight).
///
/// Errors: `Unsupported` where the chain ends at a value that is not an
/// input, reads under a guard (a `PAD`), or leaves an input axis that is
/// not one variable plus a constant (a `RESHAPE` that merges or splits
/// axes, a strided or symbolic `SHRINK`).
fn trace(
    g: &Graph,
    book: &IndexBook,
    id: NodeId,
    axes: &[Option<usize>],
    extents: &[i64],
) -> DResult<(NodeId, Vec<Option<usize>>, Vec<i64>)> {
    let unsupported = |at: NodeId, what: &str| {
        diag!(Unsupported, "the sm80 GEMM cannot read its operand through {what}").at_node(g.node(at))
    };
    let dims: Vec<crate::sym::Dim> = extents.iter().map(|&e| crate::sym::Dim::int(e)).collect();
    let mut index: Vec<AffExpr> = axes.iter().map(|a| a.map_or(AffExpr::int(0), |v| AffExpr::var(v as u32))).collect();
    let mut from = id;
    loop {
        let c = index_book::chase(g, book, from, index, &dims, &|_| false)?;
        if !c.guard.is_empty() {
            return Err(unsupported(from, "a guarded read (a PAD)"));
        }
        let n = g.node(c.src);
        match &n.op {
            Op::Input { .. } => {
                let mut meaning = Vec::with_capacity(c.index.len());
                for e in &c.index {
                    let vars: Vec<(u32, &crate::sym::Dim)> = e.var_coeffs().collect();
                    let offset = e.constant_part().as_int();
                    meaning.push(match (vars.as_slice(), offset) {
                        ([], Some(o)) if e.terms().count() == 0 => (None, o),
                        ([(v, k)], Some(o)) if k.as_int() == Some(1) && e.terms().count() == 1 => {
                            (Some(*v as usize), o)
                        }
                        _ => return Err(unsupported(from, "an index that is not one variable plus a constant")),
                    });
                }
                return Ok((c.src, meaning.iter().map(|m| m.0).collect(), meaning.iter().map(|m| m.1).collect()));
            }
            Op::Cast if g.dtype(c.src) == DType::F32 && matches!(g.dtype(n.src[0]), DType::F16 | DType::BF16) => {
                from = n.src[0];
                index = c.index;
            }
            other => return Err(unsupported(c.src, &format!("`{}`", other.name()))),
        }
    }
}

pub(crate) fn input_name(g: &Graph, id: NodeId) -> String {
    match &g.node(id).op {
        Op::Input { name } => name.clone(),
        _ => g.node(id).label.clone(),
    }
}

/// The largest of 8, 4, 2, 1 elements dividing `x` (a leading dimension).
fn align(x: u64) -> u32 {
    [8u32, 4, 2, 1].into_iter().find(|&a| x.is_multiple_of(a as u64)).unwrap_or(1)
}

/// Recognises `g` as one contraction + epilogue (module doc).
///
/// Errors: `Unsupported` at the node that breaks the pattern (no or two
/// contractions, an operand that is not a graph input, a pattern Poly-View
/// does not recognise, an op after the sum, an output layout with no `N`
/// axis); `UnboundSymbol` at the contraction when a size is symbolic.
pub fn match_gemm(g: &Graph) -> DResult<GemmGraph> {
    let book = crate::index_book::build(g)?;
    let reductions: Vec<NodeId> = g.ids().filter(|&id| contraction::is_contraction(g, id)).collect();
    let r = match reductions.as_slice() {
        [r] => *r,
        [] => {
            let d = diag!(
                Unsupported,
                "graph `{}` has no contraction (REDUCE SUM of a MUL): the sm80 template compiles one GEMM or \
                 convolution + epilogue",
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
                "graph `{}` has {} contractions; the sm80 template compiles one per graph",
                g.name,
                reductions.len()
            )
            .at_node(g.node(*second)))
        }
    };
    let rn = g.node(r);
    let Some(t) = contraction::trace(g, &book, r)? else {
        return Err(diag!(Unsupported, "the operands of this sum do not fold into affine reads").at_node(rn));
    };
    let Some(pattern) = &t.pattern else {
        return Err(diag!(
            Unsupported,
            "this contraction is neither a matmul nor a convolution (`000` §3.5): an operand index is not affine \
             with positive windows"
        )
        .at_node(rn));
    };
    let info = book.get(r).ok_or_else(|| diag!(Internal, "the IndexBook lacks {}", rn.label))?;
    let extents: Vec<i64> =
        info.extents().iter().map(|d| d.as_int().filter(|&v| v >= 1)).collect::<Option<_>>().ok_or_else(|| {
            diag!(
                UnboundSymbol,
                "the sm80 template needs concrete sizes (this {} has extents {}; give them with --dim)",
                pattern.kind.name(),
                info.extents().iter().map(|d| d.to_string()).collect::<Vec<_>>().join(" × ")
            )
            .at_node(rn)
        })?;
    let ab = g.dtype(t.mul);
    for op in [&t.lhs, &t.rhs] {
        if !matches!(g.node(op.src).op, Op::Input { .. }) {
            return Err(diag!(
                Unsupported,
                "the sm80 template reads its operands from graph inputs; `{}` is computed (`{}`)",
                g.node(op.src).label,
                g.node(op.src).op.name()
            )
            .at_node(g.node(op.src)));
        }
        if let Some(p) = op.guard.iter().find(|p| p.otherwise != 0.0) {
            return Err(diag!(
                Unsupported,
                "operand `{}` is padded with {}, not zero: the loader's zero fill cannot give it",
                input_name(g, op.src),
                p.otherwise
            )
            .at_node(rn));
        }
    }

    let epilogue_chain = epilogue_chain(g, &book, &t, r, &extents)?;
    let out_strides = epilogue_chain.strides();
    let Chain { end: cur, order, round_sum, epilogue, inputs: epi_inputs, nodes: chain, pool, .. } = epilogue_chain;
    if !pool.is_empty() && epi_inputs.iter().any(|x| x.role == Operand::Residual) {
        return Err(diag!(Unsupported, "a residual before a pooling: the pooled epilogue adds no residual")
            .at_node(g.node(cur)));
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
        let operand = [t.lhs.src, t.rhs.src].contains(&id) || epi_inputs.iter().any(|x| x.node == id);
        if matches!(n.op, Op::Input { .. }) && !operand {
            return Err(diag!(
                Unsupported,
                "input `{}` is not an operand of the contraction or its epilogue",
                input_name(g, id)
            )
            .at_node(n));
        }
        // A bias or residual widened to f32 (read through by `trace`).
        let widened = n.op == Op::Cast && epi_inputs.iter().any(|x| n.src.first() == Some(&x.node));
        if !n.op.is_movement() && !matches!(n.op, Op::Input { .. }) && !chain.contains(&id) && !widened {
            return Err(diag!(
                Unsupported,
                "`{}` is outside the contraction + epilogue the sm80 target compiles",
                n.op.name()
            )
            .at_node(n));
        }
    }

    // GEMM axes from C's order: N is the innermost run of variables only
    // one operand reads, M the run before it that only the other reads,
    // batch the rest.
    let c_order: Vec<usize> = order.iter().flatten().copied().collect();
    let only = |op: &contraction::Operand, other: &contraction::Operand, v: usize| op.reads(v) && !other.reads(v);
    let (b_op, a_op) = match c_order.last() {
        Some(&v) if only(&t.rhs, &t.lhs, v) => (&t.rhs, &t.lhs),
        Some(&v) if only(&t.lhs, &t.rhs, v) => (&t.lhs, &t.rhs),
        _ => {
            return Err(diag!(
                Unsupported,
                "the output's innermost axis is not read by exactly one operand: no GEMM N axis"
            )
            .at_node(rn))
        }
    };
    let n_start = c_order.iter().rposition(|&v| !only(b_op, a_op, v)).map_or(0, |p| p + 1);
    let m_start = c_order[..n_start].iter().rposition(|&v| !only(a_op, b_op, v)).map_or(0, |p| p + 1);
    let (batch_v, m_v, n_v) = (&c_order[..m_start], &c_order[m_start..n_start], &c_order[n_start..]);
    if m_v.is_empty() {
        return Err(diag!(Unsupported, "no output axis is read by the other operand alone: no GEMM M axis (a GEMV)")
            .at_node(rn));
    }
    let symbolic = || diag!(Unsupported, "an operand is addressed with a symbolic size or offset").at_node(rn);
    let (a_flat, b_flat) = (flat_offset(g, a_op).ok_or_else(symbolic)?, flat_offset(g, b_op).ok_or_else(symbolic)?);
    // K: the reduce variables, the one A reads contiguously last.
    let mut k_v: Vec<usize> = (t.out..t.out + t.reduce).filter(|&v| extents[v] > 1).collect();
    if let Some(p) = k_v.iter().position(|&v| a_flat.0.iter().any(|&(x, c)| x == v && c == 1)) {
        let v = k_v.remove(p);
        k_v.push(v);
    }
    if k_v.is_empty() {
        return Err(diag!(Unsupported, "the contraction sums over no axis longer than 1").at_node(rn));
    }
    // A pooled variable `v` (`pool`) is `2·coarse + fine`: its coarse digit
    // (extent ⌊E/2⌋) where `v` stands, its window digit (extent 2) after
    // every other digit of its axis, rows' before columns', so that each
    // four consecutive points of the axis are one window.
    let pool_axis = match pool[..] {
        [] => None,
        [a, b] if m_v.contains(&a) && m_v.contains(&b) => Some(Axis::M),
        [a, b] if n_v.contains(&a) && n_v.contains(&b) => Some(Axis::N),
        _ => {
            return Err(diag!(Unsupported, "the pooled axes are not both rows or both columns of the GEMM")
                .at_node(g.node(cur)))
        }
    };
    let mut digit = vec![None; extents.len()];
    let mut fine: Vec<Option<Digit>> = vec![None; extents.len()];
    let mut digit_ext: Vec<Vec<i64>> = Vec::new();
    for (axis, vars) in [(Axis::Batch, batch_v), (Axis::M, m_v), (Axis::N, n_v), (Axis::K, &k_v[..])] {
        let mut exts = Vec::new();
        for (index, &v) in vars.iter().enumerate() {
            digit[v] = Some(Digit { axis, index });
            exts.push(if pool.contains(&v) { extents[v] / 2 } else { extents[v] });
        }
        if pool_axis == Some(axis) {
            for &v in &pool {
                fine[v] = Some(Digit { axis, index: exts.len() });
                exts.push(2);
            }
        }
        digit_ext.push(exts);
    }
    // The affine terms of `c · v`.
    let terms = |v: usize, c: i64| -> Vec<(Digit, i64)> {
        match (digit[v], fine[v]) {
            (Some(d), Some(f)) => vec![(d, 2 * c), (f, c)],
            (Some(d), None) => vec![(d, c)],
            (None, _) => Vec::new(),
        }
    };
    // Variable coefficients → digit terms (a size-1 variable is always 0).
    let to_affine = |(vars, constant): (Vec<(usize, i64)>, i64)| -> DResult<Affine> {
        let mut a = Affine { terms: Vec::new(), constant };
        for (v, c) in vars {
            match digit[v] {
                Some(_) => a.terms.extend(terms(v, c)),
                None if extents[v] == 1 => {}
                None => return Err(diag!(Internal, "variable i{v} has no GEMM axis").at_node(rn)),
            }
        }
        Ok(a)
    };
    let access = |op: &contraction::Operand, flat: (Vec<(usize, i64)>, i64)| -> DResult<Access> {
        let guards = op.guard.iter().flat_map(|p| &p.valid).map(|c| linear(&c.expr, 1).ok_or_else(symbolic));
        let guards = guards.map(|l| l.and_then(&to_affine)).collect::<DResult<_>>()?;
        Ok(Access { offset: to_affine(flat)?, guards })
    };
    let c_batch = Affine {
        terms: batch_v
            .iter()
            .enumerate()
            .map(|(index, &v)| {
                let axis = order.iter().position(|&a| a == Some(v)).unwrap_or(0);
                (Digit { axis: Axis::Batch, index }, out_strides[axis])
            })
            .collect(),
        constant: 0,
    };
    let [batch_e, m_e, n_e, k_e] = <[Vec<i64>; 4]>::try_from(digit_ext).unwrap_or_default();
    let mut implicit = Implicit {
        batch: batch_e,
        m: m_e,
        n: n_e,
        k: k_e,
        a: access(a_op, a_flat)?,
        b: access(b_op, b_flat)?,
        bias: None,
        c_batch,
        pool: pool_axis,
    };
    let mut inputs: Vec<(NodeId, Operand)> = vec![(a_op.src, Operand::A), (b_op.src, Operand::B)];
    for EpilogueInput { node: input, role, axes, offset } in &epi_inputs {
        inputs.push((*input, *role));
        if *role == Operand::Bias {
            let st = strides(g, *input).ok_or_else(symbolic)?;
            let mut bias = Affine { terms: Vec::new(), constant: *offset };
            for (a, s) in axes.iter().zip(st) {
                if let Some(v) = a {
                    bias.terms.extend(terms(*v, s));
                }
            }
            implicit.bias = Some(bias);
        }
    }
    let (m, n, k) = (implicit.extent(Axis::M), implicit.extent(Axis::N), implicit.extent(Axis::K));
    let plain_b = |layout: BLayout| {
        let (kc, nc) = if layout == BLayout::KN { (n, 1) } else { (1, k) };
        implicit.b.offset == Affine { terms: vec![(digit_of(Axis::K), kc), (digit_of(Axis::N), nc)], constant: 0 }
            || implicit.b.offset
                == Affine { terms: vec![(digit_of(Axis::N), nc), (digit_of(Axis::K), kc)], constant: 0 }
    };
    let plain = implicit.batch.is_empty()
        && [&implicit.m, &implicit.n, &implicit.k].iter().all(|d| d.len() == 1)
        && implicit.a.guards.is_empty()
        && implicit.b.guards.is_empty()
        && implicit.a.offset == Affine { terms: vec![(digit_of(Axis::M), k), (digit_of(Axis::K), 1)], constant: 0 }
        // The plain kernel reads a bias at the output's column.
        && implicit.bias.as_ref().is_none_or(|b| *b == Affine { terms: vec![(digit_of(Axis::N), 1)], constant: 0 });
    let gemm = if plain && (plain_b(BLayout::KN) || plain_b(BLayout::NK)) {
        let b_layout = if plain_b(BLayout::KN) { BLayout::KN } else { BLayout::NK };
        let ldb = if b_layout == BLayout::KN { n } else { k };
        let [aa, ab_, ac] = [k, ldb, n].map(|x| align(x as u64));
        Gemm { ab, out, b_layout, round_sum, align_a: aa, align_b: ab_, align_c: ac, implicit: None }
    } else {
        let (kn, nk) = (implicit.vector_width(&implicit.b, Axis::N), implicit.vector_width(&implicit.b, Axis::K));
        let b_layout = if kn > nk { BLayout::KN } else { BLayout::NK };
        Gemm {
            ab,
            out,
            b_layout,
            round_sum,
            align_a: implicit.vector_width(&implicit.a, Axis::K),
            align_b: kn.max(nk),
            align_c: align(n as u64),
            implicit: Some(implicit),
        }
    };
    let mut named: Vec<(String, Operand)> = Vec::new();
    for id in g.inputs() {
        if let Some((_, role)) = inputs.iter().find(|x| x.0 == id) {
            named.push((input_name(g, id), *role));
        }
    }
    let mut windows: Vec<ConvWindow> = Vec::new();
    for w in pattern.windows.iter().filter(|w| !w.grouped) {
        let (Some(&Some(out)), Some(&Some(reduce))) = (digit.get(w.out as usize), digit.get(w.reduce as usize)) else {
            continue;
        };
        let cw = ConvWindow { out, reduce, stride: w.stride, dilation: w.dilation };
        if !windows.contains(&cw) {
            windows.push(cw);
        }
    }
    let batch = gemm.implicit.as_ref().map_or(1, |im| im.extent(Axis::Batch));
    let mut problem = plan::Problem::gemm((m * batch) as u64, n as u64, k as u64, ab);
    if gemm.implicit.is_some() {
        let numel = |id: NodeId| g.shape(id).iter().map(|d| d.as_int().unwrap_or(1).max(1) as u64).product::<u64>();
        problem.distinct = [numel(a_op.src), numel(b_op.src)];
    }
    Ok(GemmGraph {
        problem,
        sizes: [m, n, k],
        pattern: pattern.kind,
        gemm,
        epilogue,
        inputs: named,
        output: g.outputs[0].name.clone(),
        contraction: r,
        windows,
    })
}

/// The single-use chain of nodes from the contraction `r` to the graph's
/// output (module doc), and what it asks of the kernel.
pub(crate) struct Chain {
    /// The last node: the graph's output.
    pub end: NodeId,
    /// Which output variable of the contraction each axis of `end` is
    /// (`None`: a size-1 axis), with a `RESHAPE` that merges axes undone:
    /// the axes of [`Chain::dims`].
    pub order: Vec<Option<usize>>,
    /// `end`'s shape with merged axes split back (row-major, the same
    /// element offsets): the extent of each axis of `order`.
    pub dims: Vec<i64>,
    /// A `CAST` to the operands' dtype before any other op (`001` §0).
    pub round_sum: bool,
    /// The plan's epilogue ops, in order.
    pub epilogue: Vec<Epilogue>,
    /// Each bias or residual input.
    pub inputs: Vec<EpilogueInput>,
    /// The `MUL`, the sum and every node after it.
    pub nodes: Vec<NodeId>,
    /// A 2×2 max pool of stride 2 after the epilogue ops ([`max_pool`]):
    /// the contraction's output variables of its window rows and columns,
    /// in that order (their axes in `order` are the pooled ones, of half
    /// the extent rounded down); empty without one.
    pub pool: Vec<usize>,
}

/// A bias or residual an epilogue reads.
pub(crate) struct EpilogueInput {
    /// The graph input.
    pub node: NodeId,
    pub role: Operand,
    /// The contraction variable of each of its axes (`None`: index 0).
    pub axes: Vec<Option<usize>>,
    /// The element offset where it starts (a `SHRINK`'s slice).
    pub offset: i64,
}

impl Chain {
    /// The row-major element strides of [`Chain::dims`].
    pub fn strides(&self) -> Vec<i64> {
        let mut st = vec![1i64; self.dims.len()];
        for a in (0..self.dims.len().saturating_sub(1)).rev() {
            st[a] = st[a + 1] * self.dims[a + 1];
        }
        st
    }
}

/// The activations the epilogue computes in one step (each the plan
/// epilogue op [`Epilogue::of_function`] names), recognised by
/// their frontend decomposition ([`recognise`]); `RELU` is a Tiny IR op.
pub const EPILOGUE_ACTIVATIONS: [UnaryFn; 4] = [UnaryFn::Silu, UnaryFn::Gelu, UnaryFn::GeluTanh, UnaryFn::Tanh];

/// Follows the users of the contraction `r` (traced as `t`, variables of
/// extents `extents`) to the graph's output. A `RESHAPE` may add or drop
/// size-1 axes and merge adjacent axes (the offsets stay affine in the
/// contraction's variables); it may not split one.
///
/// Errors: `Unsupported` at the node that is not an epilogue the template
/// fuses, at a second use, at a bias or residual it cannot read.
pub(crate) fn epilogue_chain(
    g: &Graph,
    book: &IndexBook,
    t: &contraction::Traced,
    r: NodeId,
    extents: &[i64],
) -> DResult<Chain> {
    let users = g.consumers();
    let ab = g.dtype(t.mul);
    // Per axis of `cur`: the variables (`None` for size 1) and extents of
    // the axes merged into it, outermost first.
    let mut groups: Vec<Vec<(Option<usize>, i64)>> =
        (0..t.out).map(|v| vec![((extents[v] > 1).then_some(v), extents[v])]).collect();
    let (mut cur, mut round_sum, mut epilogue) = (r, false, Vec::new());
    let mut chain = vec![t.mul, r];
    let mut pool: Vec<usize> = Vec::new();
    let mut epi_inputs: Vec<EpilogueInput> = Vec::new();
    while !g.outputs.iter().any(|o| o.node == cur) {
        // An activation's decomposition reads its input more than once.
        if let Some(act) = recognise(g, &users, cur, &EPILOGUE_ACTIVATIONS) {
            if !pool.is_empty() {
                return Err(diag!(
                    Unsupported,
                    "`{}` after the pooling: the pooled epilogue computes its ops before the max",
                    act.f.name()
                )
                .at_node(g.node(act.root)));
            }
            let op = Epilogue::of_function(act.f)
                .ok_or_else(|| diag!(Internal, "`{}` is not an epilogue op", act.f.name()))?;
            epilogue.push(op);
            chain.extend(act.nodes);
            cur = act.root;
            continue;
        }
        let [next] = users[cur.index()].as_slice() else {
            return Err(diag!(
                Unsupported,
                "the contraction's result is used {} times; the sm80 kernel has one output",
                users[cur.index()].len()
            )
            .at_node(g.node(cur)));
        };
        let nn = g.node(*next);
        match &nn.op {
            // The rounding of the sum (`001` §0): a CAST to the operands'
            // dtype before any other op.
            Op::Cast if !round_sum && epilogue.is_empty() && g.dtype(*next) == ab => round_sum = true,
            // The store's rounding to the output's dtype.
            Op::Cast if stores(g, &users, *next) => {}
            // The rounding of an activation's input (after a bias the
            // frontend adds in f32), which the epilogue does not repeat:
            // its ops keep f32 values, as after an ADD in the operands'
            // dtype, and the store rounds.
            Op::Cast if g.dtype(*next) == ab && recognise(g, &users, *next, &EPILOGUE_ACTIVATIONS).is_some() => {}
            Op::Unary(UnaryOp::Relu) => epilogue.push(Epilogue::Relu),
            Op::Reshape => {
                let split = || {
                    diag!(Unsupported, "a RESHAPE after the contraction that splits an axis (or a symbolic one)")
                        .at_node(nn)
                };
                let kept: Vec<(Option<usize>, i64)> = groups.iter().flatten().copied().filter(|e| e.1 > 1).collect();
                let from: Vec<crate::sym::Dim> = kept.iter().map(|e| crate::sym::Dim::int(e.1)).collect();
                let counts = crate::tiny::op::reshape_merges(&from, g.shape(*next)).ok_or_else(split)?;
                let mut rest = kept.into_iter();
                groups = counts
                    .into_iter()
                    .map(|n| if n == 0 { vec![(None, 1)] } else { rest.by_ref().take(n).collect() })
                    .collect();
            }
            Op::Permute { perm } => groups = perm.iter().map(|&p| groups[p].clone()).collect(),
            Op::View { map } if pool.is_empty() => {
                let (reduce, pooled) = max_pool(g, &users, *next, map, &groups)?;
                for &k in &pooled {
                    groups[k][0].1 /= 2;
                }
                pool = pooled.iter().filter_map(|&k| groups[k][0].0).collect();
                chain.push(*next);
                cur = reduce;
                chain.push(reduce);
                continue;
            }
            Op::Binary(BinaryOp::Add) if !pool.is_empty() => {
                return Err(diag!(Unsupported, "an ADD after the pooling: the epilogue adds before it").at_node(nn));
            }
            Op::Binary(BinaryOp::Add) => {
                let other = if nn.src[0] == cur { nn.src[1] } else { nn.src[0] };
                if groups.iter().any(|x| x.len() > 1) {
                    return Err(
                        diag!(Unsupported, "an ADD after a RESHAPE that merges the contraction's axes").at_node(nn)
                    );
                }
                let order: Vec<Option<usize>> = groups.iter().map(|x| x[0].0).collect();
                let (input, axes, offsets) = trace(g, book, other, &order, extents)?;
                let dims = g.shape(input);
                // A residual has C's layout: its non-unit axes are C's, in order.
                let same = axes.iter().flatten().eq(order.iter().flatten())
                    && axes.iter().zip(dims).all(|(a, d)| a.is_some() || d.is_one());
                let role = if same { Operand::Residual } else { Operand::Bias };
                if g.dtype(input) != ab || epi_inputs.iter().any(|x| x.role == role) {
                    return Err(diag!(
                        Unsupported,
                        "the sm80 epilogue takes one {} in the operands' dtype {ab}",
                        if role == Operand::Bias { "bias" } else { "residual" }
                    )
                    .at_node(nn));
                }
                // An axis longer than 1 with no variable is one a SHRINK
                // sliced to one index (`trace` reaches inputs through
                // broadcasts of size-1 axes otherwise): its offset says which.
                epilogue.push(if role == Operand::Bias { Epilogue::Bias } else { Epilogue::Residual });
                let strides = strides(g, input).ok_or_else(|| {
                    diag!(Unsupported, "an ADD after the contraction of a tensor of symbolic shape").at_node(nn)
                })?;
                let offset: i64 = offsets.iter().zip(&strides).map(|(o, s)| o * s).sum();
                if role == Operand::Residual && offset != 0 {
                    return Err(diag!(Unsupported, "the sm80 epilogue reads a residual from its start").at_node(nn));
                }
                epi_inputs.push(EpilogueInput { node: input, role, axes, offset });
            }
            other => {
                return Err(diag!(
                    Unsupported,
                    "`{}` after the contraction is not an epilogue the sm80 template fuses (bias, relu, silu, gelu, \
                     gelu_tanh, tanh, residual, a 2×2 max pool)",
                    other.name()
                )
                .at_node(nn))
            }
        }
        chain.push(*next);
        cur = *next;
    }
    let (order, dims) = groups.into_iter().flatten().unzip();
    Ok(Chain { end: cur, order, dims, round_sum, epilogue, inputs: epi_inputs, nodes: chain, pool })
}

/// The max pool the `VIEW` `view` (of a value whose axes are the
/// contraction variables `groups`, its map `map`) starts: the view's only
/// user is a `REDUCE MAX` over the two window axes it appends, and the
/// map is the identity but on two axes, each `2·o + w` for a window axis
/// `w` of extent 2 — a 2×2 window of stride 2 without padding over two
/// output variables of the contraction, the pooling the epilogue does on
/// the output tile (`Implicit::pool`). The `REDUCE` node and the pooled
/// axes, in window order.
///
/// Errors: `Unsupported` at the view for any other view, window or use.
fn max_pool(
    g: &Graph,
    users: &[Vec<NodeId>],
    view: NodeId,
    map: &[AffExpr],
    groups: &[Vec<(Option<usize>, i64)>],
) -> DResult<(NodeId, Vec<usize>)> {
    let vn = g.node(view);
    let refuse = |why: &str| {
        diag!(Unsupported, "a view after the contraction that is not a 2×2 max pool of stride 2 ({why})").at_node(vn)
    };
    let r = map.len();
    let reduce = match users[view.index()].as_slice() {
        [u] => *u,
        _ => return Err(refuse("used more than once")),
    };
    let axes_ok = matches!(&g.node(reduce).op, Op::Reduce { op: ReduceOp::Max, axes } if axes[..] == [r, r + 1]);
    if !axes_ok || g.shape(view).len() != r + 2 {
        return Err(refuse("not a REDUCE MAX over its two window axes"));
    }
    let mut pooled = vec![usize::MAX; 2];
    for (k, e) in map.iter().enumerate() {
        if e.constant_part().as_int() != Some(0) {
            return Err(refuse("an offset: a padded window"));
        }
        let terms: Vec<(u32, Option<i64>)> = e.var_coeffs().map(|(v, c)| (v, c.as_int())).collect();
        match terms[..] {
            [(v, Some(1))] if v as usize == k => {}
            [(o, Some(2)), (w, Some(1))] | [(w, Some(1)), (o, Some(2))] if o as usize == k && w as usize >= r => {
                let j = w as usize - r;
                let whole = groups[k].len() == 1 && groups[k][0].0.is_some() && groups[k][0].1 >= 2;
                if g.shape(view)[w as usize].as_int() != Some(2) || pooled[j] != usize::MAX || !whole {
                    return Err(refuse("a window other than 2 over one output variable"));
                }
                pooled[j] = k;
            }
            _ => return Err(refuse("a window of stride or size other than 2")),
        }
    }
    if pooled.contains(&usize::MAX) {
        return Err(refuse("a window over fewer than two axes"));
    }
    Ok((reduce, pooled))
}

/// Whether `id` reaches the graph's output through movements, `RELU`s and
/// `REDUCE MAX`es only: a `CAST` there is the store's rounding (a `RELU`
/// or a max gives the same bits before or after a rounding, which is
/// monotone).
fn stores(g: &Graph, users: &[Vec<NodeId>], mut id: NodeId) -> bool {
    loop {
        if g.outputs.iter().any(|o| o.node == id) {
            return true;
        }
        match users[id.index()].as_slice() {
            [next]
                if g.node(*next).op.is_movement()
                    || g.node(*next).op == Op::Unary(UnaryOp::Relu)
                    || matches!(g.node(*next).op, Op::Reduce { op: ReduceOp::Max, .. }) =>
            {
                id = *next
            }
            _ => return false,
        }
    }
}

/// The first digit of `axis`.
fn digit_of(axis: Axis) -> Digit {
    Digit { axis, index: 0 }
}

/// Row-major element strides of `id`'s shape (`region::MemRef::of`);
/// `None` when one is symbolic.
pub(crate) fn strides(g: &Graph, id: NodeId) -> Option<Vec<i64>> {
    crate::region::MemRef::of(g, id).strides.iter().map(|d| d.as_int()).collect()
}

/// `e · scale` as `(variable, coefficient)` pairs and a constant; `None`
/// when a coefficient or the constant is symbolic.
pub(crate) fn linear(e: &AffExpr, scale: i64) -> Option<(Vec<(usize, i64)>, i64)> {
    let vars = e.var_coeffs().map(|(v, c)| c.as_int().map(|c| (v as usize, c * scale))).collect::<Option<_>>()?;
    Some((vars, e.constant_part().as_int()? * scale))
}

/// The flat element offset of an operand (`Σ stride · index`) as
/// [`linear`] gives it, each variable once.
pub(crate) fn flat_offset(g: &Graph, op: &contraction::Operand) -> Option<(Vec<(usize, i64)>, i64)> {
    let mut vars: Vec<(usize, i64)> = Vec::new();
    let mut constant = 0;
    for (e, s) in op.idx.iter().zip(strides(g, op.src)?) {
        let (vs, c) = linear(e, s)?;
        constant += c;
        for (v, c) in vs {
            match vars.iter_mut().find(|x| x.0 == v) {
                Some(x) => x.1 += c,
                None => vars.push((v, c)),
            }
        }
    }
    Some((vars, constant))
}

//! The foundation's grouping (`000` §7.1, `001` §8): which values get a
//! buffer, and which region computes each of them. Region formation
//! ([`super::from_tiny`]) starts from it; without feature `poly` it is the
//! whole of region formation.
//!
//! The rule:
//! - only live values (those an output depends on) are considered;
//! - a value is **materialised** (has a buffer) when it is an `INPUT`, a graph
//!   output, an element-wise value or a `GATHER` with more than one reader,
//!   the `x` a `GATHER` reads (at a data-dependent position: no index map
//!   composes into it, so it is read from a buffer in its own row-major
//!   layout), a `SCAN` (a kernel of its own: its fold runs along an axis
//!   of its own output), or a `REDUCE` that is not fused (below). Readers are counted with multiplicity and
//!   through movement nodes: a value read by a `RESHAPE` that two nodes read
//!   has two readers;
//! - with [`Grouping::store_operands`] (the GPU's tensor-core templates,
//!   which load their operands from memory), an element-wise value, a
//!   `GATHER` or a sum that a contraction's `MUL` reads through an `EXPAND` that
//!   broadcasts (a matmul operand such as a hidden layer's
//!   `relu(x·W + b)`, an attention's output read by the output
//!   projection) is materialised too, in the layout the contraction reads
//!   it: after the `PERMUTE`s and the `RESHAPE`s that merge axes on the
//!   way (not one that splits an axis, which a template's store cannot
//!   write), so that the chain ends its producer's kernel as the epilogue
//!   (`001` §8) and the kernel's root may be that movement; a widening
//!   `CAST` to f32 is looked through, and the narrower value stored. So is
//!   an element-wise value computed from inputs that an `ADD` after a
//!   contraction reads through a broadcast (an attention's additive mask
//!   `(1 - mask) · -10000`): the template reads it as a bias. The CPU
//!   keeps these inlined: a stored f16 value is rounded, which the
//!   interpreter's (and the inlined) value is not, and its packing
//!   computes the operand once per panel anyway;
//! - movement nodes never materialise unless they are outputs: they are index
//!   maps, composed into the accesses of their readers — except where a chain
//!   of them does not fold: a movement materialises when its access composed
//!   down the chain ([`index_book::compose::fold`]) has more than
//!   [`MAX_FOLDED_ATOMS`] atoms, and the chain above it starts afresh from
//!   its buffer (a `RESHAPE` → `PERMUTE` → `RESHAPE` link on a 2×3 array
//!   doubles the index; folded whole, a few dozen such links would not fit
//!   in memory);
//! - a `CONST` never materialises unless it is an output: it is a literal;
//! - an f32 element-wise value computed from `INPUT`s and `CONST`s alone
//!   whose expression holds a costly unary op (`EXP2`, `LOG2`, `SQRT`,
//!   `RSQRT`, `RECIP`) and that its reader reads through an `EXPAND`
//!   that broadcasts materialises: it is computed once per element of its
//!   own shape, not once per point it is broadcast to (a
//!   BatchNormalization's `RSQRT(var + eps) · scale`, `[C]`, read at every
//!   pixel of a `[N, C, H, W]` image: inlined, ResNet-50's convolutions
//!   computed a square root and a division per element of every packed
//!   panel);
//! - an element-wise value also materialises when inlining it would make a
//!   chain of more than [`MAX_INLINE_DEPTH`] element-wise nodes (movement
//!   nodes between them do not count): expressions, and the recursion of the
//!   lowering and the printers over them, stay shallow;
//! - every other element-wise value has exactly one reader and is inlined into
//!   it (recomputed where a movement broadcasts it);
//! - a `REDUCE` that is not an output and has exactly one reader is **fused**
//!   into the kernel of the element-wise chain that consumes it when it is
//!   reached from that kernel's root through element-wise nodes and
//!   bijective movements (`RESHAPE`, `PERMUTE`: each point of the root reads
//!   exactly one accumulator element, and each element is read once, so
//!   nothing is recomputed and no guard is needed) and that kernel has no
//!   fused `REDUCE` yet (reduces are considered in node order). That kernel
//!   keeps the accumulator in a register over the reduce loops and applies
//!   the epilogue (e.g. GEMM → `CAST` → `+ bias` → `RELU`, or a grouped
//!   convolution's `[N, G, Cout/G, …]` accumulator → `RESHAPE` → `+ bias`)
//!   before its one store;
//! - each materialised value other than an `INPUT` is the root of one kernel,
//!   in node order (a topological order).

use crate::diag::DResult;
use crate::index_book::{self, Access, IndexBook};
use crate::tiny::{BinaryOp, Graph, NodeId, Op, ReduceOp, UnaryOp};

/// The deepest chain of element-wise nodes inlined into one expression.
pub const MAX_INLINE_DEPTH: usize = 64;

/// The most atoms ([`crate::affine::AffExpr::atom_count`], summed over the
/// axes) of a movement chain's folded access before the chain is stored
/// part way. The largest fold of the spec graphs and examples is 28 atoms
/// (`tests/spec/002_conv2d.json`'s windows); 64 leaves room for a reader's
/// own index, composed in later, below [`index_book::MAX_INDEX_ATOMS`], and
/// keeps one subscript of the generated code to a line or two.
pub const MAX_FOLDED_ATOMS: usize = 64;

/// One group: the value it stores and the `REDUCE` it accumulates, if any
/// (the root itself when the root is a `REDUCE`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelPlan {
    pub root: NodeId,
    pub reduce: Option<NodeId>,
}

/// The result of the grouping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Formation {
    /// Per node: whether it has a buffer.
    pub materialised: Vec<bool>,
    /// Groups in execution order.
    pub kernels: Vec<KernelPlan>,
    /// Per node: whether a graph output depends on it.
    pub live: Vec<bool>,
    /// Per node: its live readers, with multiplicity and through movement
    /// nodes (the rule of the module doc).
    pub readers: Vec<usize>,
}

/// The choices of the rule of the module doc that differ between targets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Grouping {
    /// Materialise element-wise values a contraction reads through a
    /// broadcast.
    pub store_operands: bool,
}

/// Applies the rule of the module doc to a verified graph and its book.
///
/// Errors: `Internal` when the book does not fit the graph.
pub fn group(g: &Graph, book: &IndexBook, rules: Grouping) -> DResult<Formation> {
    let n = g.len();
    let mut is_output = vec![false; n];
    for o in &g.outputs {
        if o.node.index() < n {
            is_output[o.node.index()] = true;
        }
    }
    let mut live = is_output.clone();
    for id in (0..n as u32).rev().map(NodeId) {
        if live[id.index()] {
            for s in &g.node(id).src {
                live[s.index()] = true;
            }
        }
    }
    // Readers with multiplicity, through movement nodes (consumers come later).
    let mut readers = vec![0usize; n];
    for id in (0..n as u32).rev().map(NodeId) {
        if !live[id.index()] {
            continue;
        }
        let through = if g.node(id).op.is_movement() { readers[id.index()] } else { 1 };
        for s in &g.node(id).src {
            readers[s.index()] = readers[s.index()].saturating_add(through);
        }
    }
    let mut materialised: Vec<bool> = g
        .ids()
        .map(|id| {
            let i = id.index();
            let op = &g.node(id).op;
            live[i]
                && (is_output[i]
                    || matches!(op, Op::Input { .. } | Op::Scan { .. })
                    || (pointwise(op) && readers[i] > 1))
        })
        .collect();
    for id in g.ids() {
        if let (Op::Gather { .. }, Some(&x)) = (&g.node(id).op, g.node(id).src.first()) {
            materialised[x.index()] |= live[id.index()];
        }
    }
    // With `store_operands`: an element-wise value a contraction's product
    // reads through a broadcast is stored; its chain then ends the
    // producing kernel as its epilogue (`001` §8). So is an input-derived
    // element-wise value a contraction's epilogue adds through a broadcast
    // (an attention's computed mask), and the layout in which a
    // contraction reads another one's sum (an attention's output).
    let consumers = g.consumers();
    let reader_of = |v: NodeId| consumers[v.index()].iter().copied().find(|c| live[c.index()]);
    if rules.store_operands {
        let mut after_contraction = vec![false; n];
        let mut from_input = vec![false; n];
        for id in g.ids() {
            let node = g.node(id);
            after_contraction[id.index()] =
                index_book::contraction::is_contraction(g, id) || node.src.iter().any(|s| after_contraction[s.index()]);
            from_input[id.index()] =
                matches!(node.op, Op::Input { .. }) || node.src.iter().any(|s| from_input[s.index()]);
        }
        for id in g.ids() {
            let i = id.index();
            if !live[i] || materialised[i] || is_output[i] || readers[i] != 1 || widens(g, id) {
                continue;
            }
            let Some(read) = broadcast_read(g, id, &reader_of) else { continue };
            let reader = g.node(read.reader);
            let product = reader.op == Op::Binary(BinaryOp::Mul)
                && reader_of(read.reader).is_some_and(|s| matches!(g.node(s).op, Op::Reduce { op: ReduceOp::Sum, .. }));
            let epilogue_add = reader.op == Op::Binary(BinaryOp::Add)
                && reader.src.iter().any(|&s| s != read.last && after_contraction[s.index()]);
            let op = &g.node(id).op;
            if (pointwise(op) || matches!(op, Op::Reduce { .. })) && product {
                materialised[read.before.index()] = true;
            } else if op.is_elementwise() && epilogue_add && from_input[i] {
                materialised[i] = true;
            }
        }
    }
    // A costly f32 value of the inputs alone that a reader broadcasts (a
    // BatchNormalization's per-channel factor) is stored once per element
    // of its own shape.
    let mut costly = vec![false; n];
    let mut of_inputs = vec![false; n];
    for id in g.ids() {
        let (i, node) = (id.index(), g.node(id));
        of_inputs[i] = match &node.op {
            Op::Input { .. } | Op::Const { .. } => true,
            op if op.is_elementwise() || op.is_movement() => node.src.iter().all(|s| of_inputs[s.index()]),
            _ => false,
        };
        costly[i] = of_inputs[i]
            && (matches!(node.op, Op::Unary(u) if costly_unary(u))
                || node.src.iter().any(|s| costly[s.index()] && !materialised[s.index()]));
        if live[i]
            && !materialised[i]
            && costly[i]
            && node.op.is_elementwise()
            && g.dtype(id) == crate::DType::F32
            && broadcast_read(g, id, &reader_of).is_some()
        {
            materialised[i] = true;
        }
    }
    // Inlined element-wise chains stay at most MAX_INLINE_DEPTH deep.
    let mut depth = vec![0usize; n];
    for id in g.ids() {
        let (i, node) = (id.index(), g.node(id));
        let below = node.src.iter().map(|s| depth[s.index()]).max().unwrap_or(0);
        depth[i] = match &node.op {
            _ if materialised[i] => 0,
            Op::Input { .. } | Op::Const { .. } | Op::Reduce { .. } | Op::Scan { .. } => 0,
            op if op.is_movement() => below,
            _ if below >= MAX_INLINE_DEPTH && live[i] => {
                materialised[i] = true;
                0
            }
            _ => below + 1,
        };
    }
    // Movement chains that do not fold are stored part way.
    let mut folded: Vec<Option<Access>> = vec![None; n];
    for id in g.ids() {
        let i = id.index();
        if !live[i] || materialised[i] || !g.node(id).op.is_movement() {
            continue;
        }
        let access = index_book::compose::fold(g, book, id, &folded, &|v| materialised[v.index()])?;
        if index_book::compose::atom_count(&access.map) > MAX_FOLDED_ATOMS {
            materialised[i] = true;
        } else {
            folded[i] = Some(access);
        }
    }
    // `reader_of`: the single live reader of a non-materialised value.
    // Per kernel root, the REDUCE fused into it.
    let mut fused_reduce: Vec<Option<NodeId>> = vec![None; n];
    for r in g.ids() {
        let i = r.index();
        if !live[i] || !matches!(g.node(r).op, Op::Reduce { .. }) {
            continue;
        }
        let root =
            if is_output[i] || readers[i] != 1 { None } else { fusion_root(g, &materialised, r, &reader_of, rules) };
        match root {
            Some(root) if fused_reduce[root.index()].is_none() => fused_reduce[root.index()] = Some(r),
            _ => materialised[i] = true,
        }
    }
    let kernels = g
        .ids()
        .filter(|id| materialised[id.index()] && !matches!(g.node(*id).op, Op::Input { .. }))
        .map(|root| {
            let reduce =
                if matches!(g.node(root).op, Op::Reduce { .. }) { Some(root) } else { fused_reduce[root.index()] };
            KernelPlan { root, reduce }
        })
        .collect();
    Ok(Formation { materialised, kernels, live, readers })
}

/// Whether `u` costs more than an add (a transcendental, a square root, a
/// division): the ops that make a broadcast value worth storing.
fn costly_unary(u: UnaryOp) -> bool {
    match u {
        UnaryOp::Exp2 | UnaryOp::Log2 | UnaryOp::Sqrt | UnaryOp::Rsqrt | UnaryOp::Recip => true,
        UnaryOp::Neg | UnaryOp::Relu => false,
    }
}

/// An op computed point by point from its operands' points: element-wise,
/// or a `GATHER` (whose other read is of a materialised `x`).
fn pointwise(op: &Op) -> bool {
    op.is_elementwise() || matches!(op, Op::Gather { .. })
}

/// Whether `id` is a `CAST` that widens f16/bf16 to f32 (exact: the
/// narrower value is the one to store).
fn widens(g: &Graph, id: NodeId) -> bool {
    let n = g.node(id);
    n.op == Op::Cast
        && g.dtype(id) == crate::DType::F32
        && n.src.first().is_some_and(|&s| matches!(g.dtype(s), crate::DType::F16 | crate::DType::BF16))
}

/// How a value is read through a broadcast ([`broadcast_read`]).
struct BroadcastRead {
    /// The node that reads it: the first that is neither a movement nor a
    /// widening `CAST`.
    reader: NodeId,
    /// The last node of the chain, which `reader` reads.
    last: NodeId,
    /// The last node before the first movement that is not bijective or
    /// that splits an axis: the value in the layout its reader indexes (a
    /// template writes an output whose axes merge its own, not split them).
    before: NodeId,
}

/// Where `v`'s single reader chain, through movements and widening casts
/// with an `EXPAND` that broadcasts among them, ends; `None` when it ends
/// with no broadcast or at no reader.
fn broadcast_read(g: &Graph, v: NodeId, reader_of: &dyn Fn(NodeId) -> Option<NodeId>) -> Option<BroadcastRead> {
    let (mut broadcast, mut bijective) = (false, true);
    let (mut c, mut before) = (v, v);
    while let Some(r) = reader_of(c) {
        let op = &g.node(r).op;
        if widens(g, r) || op.is_movement() {
            broadcast |= *op == Op::Expand && g.shape(c).iter().zip(g.shape(r)).any(|(a, b)| a.is_one() && !b.is_one());
            let splits = *op == Op::Reshape && crate::tiny::op::reshape_merges(g.shape(c), g.shape(r)).is_none();
            bijective &= is_bijective_movement(op) && !splits;
            if bijective && op.is_movement() {
                before = r;
            }
            c = r;
            continue;
        }
        return broadcast.then_some(BroadcastRead { reader: r, last: c, before });
    }
    None
}

/// The materialised element-wise value reached from `r` upward through
/// element-wise readers and bijective movements only, if any; with
/// [`Grouping::store_operands`] a materialised bijective movement too (a
/// template writes its accumulators in the layout the readers index).
fn fusion_root(
    g: &Graph,
    materialised: &[bool],
    r: NodeId,
    reader_of: &dyn Fn(NodeId) -> Option<NodeId>,
    rules: Grouping,
) -> Option<NodeId> {
    let mut c = reader_of(r)?;
    loop {
        let op = &g.node(c).op;
        if materialised[c.index()] {
            let movement_root = rules.store_operands && is_bijective_movement(op);
            return (op.is_elementwise() || movement_root).then_some(c);
        }
        if !(op.is_elementwise() || is_bijective_movement(op)) {
            return None;
        }
        c = reader_of(c)?;
    }
}

/// `RESHAPE` and `PERMUTE`: movements that map their output's points one to
/// one onto their source's points.
pub fn is_bijective_movement(op: &Op) -> bool {
    matches!(op, Op::Reshape | Op::Permute { .. })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_graphs::gemm_bias_relu;
    use crate::DType;

    fn grouped(g: &Graph) -> Formation {
        group(g, &index_book::build(g).unwrap(), Grouping::default()).unwrap()
    }

    #[test]
    fn gemm_epilogue_is_one_kernel() {
        let g = gemm_bias_relu(DType::F32, "M", "N", "K");
        let f = grouped(&g);
        let relu = g.outputs[0].node;
        let sum = g.ids().find(|&i| matches!(g.node(i).op, Op::Reduce { .. }));
        assert_eq!(f.kernels, vec![KernelPlan { root: relu, reduce: sum }]);
        assert_eq!(f.materialised.iter().filter(|m| **m).count(), 4);
    }

    /// A batch norm's per-channel factor `RSQRT(var + eps) · scale` is a
    /// costly value of the inputs alone read through a broadcast: stored,
    /// one kernel of `[C]` points, the image's kernel reading it. A
    /// layernorm's `RSQRT` of its row statistics (a `REDUCE` below it) and
    /// a computed mask without a costly op stay inlined.
    #[test]
    fn a_costly_value_of_the_inputs_is_stored_before_its_broadcast() {
        let g = crate::pipeline::load(
            "graph bn(x: f32[2, 3, 4, 5], s: f32[3], b: f32[3], m: f32[3], v: f32[3]) -> (y: f32[2, 3, 4, 5]) {
                y = batch_norm(x, s, b, m, v, eps=1e-3)
                return y
            }",
            crate::pipeline::Format::Dsl,
            None,
        )
        .unwrap()
        .graph;
        let roots: Vec<(Op, Vec<crate::sym::Dim>)> =
            grouped(&g).kernels.iter().map(|k| (g.node(k.root).op.clone(), g.shape(k.root).to_vec())).collect();
        assert_eq!(roots.len(), 2, "{roots:?}");
        assert_eq!(roots[0], (Op::Binary(BinaryOp::Mul), vec![crate::sym::Dim::int(3)]), "{roots:?}");
        assert_eq!(roots[1].0, g.node(g.outputs[0].node).op, "{roots:?}");
        let g = crate::pipeline::load(
            "graph ln(x: f32[4, 8], g: f32[8], b: f32[8], k: f32[8]) -> (y: f32[4, 8], z: f32[4, 8]) {
                y = layernorm(x, g, b)
                z = x + (1.0 - k) * -10000.0
                return y, z
            }",
            crate::pipeline::Format::Dsl,
            None,
        )
        .unwrap()
        .graph;
        // Every kernel stores an output, a row statistic or a value read
        // twice (`x − mean`).
        let outputs: Vec<NodeId> = g.outputs.iter().map(|o| o.node).collect();
        let f = grouped(&g);
        for k in &f.kernels {
            let op = &g.node(k.root).op;
            let stored = outputs.contains(&k.root) || matches!(op, Op::Reduce { .. }) || f.readers[k.root.index()] > 1;
            assert!(stored, "a kernel of {op:?}");
        }
    }

    /// A `[A, B, K]` sum read as `[B, A]` through `PERMUTE` and as `[A*B]`
    /// through `RESHAPE` is one kernel with its epilogue; read through an
    /// `EXPAND` (every accumulator element read twice) it is stored.
    #[test]
    fn epilogues_read_through_bijective_movements_only() {
        use crate::sym::Dim;
        use crate::tiny::{BinaryOp, Output, ReduceOp, UnaryOp};
        let build = |tail: &dyn Fn(&mut crate::tiny::Graph, NodeId) -> NodeId| {
            let mut g = crate::tiny::Graph::new("epi");
            let x = g.input("x", DType::F32, &[Dim::int(2), Dim::int(3), Dim::int(4)]).unwrap();
            let s = g.reduce(ReduceOp::Sum, x, &[2], DType::F32).unwrap();
            let t = tail(&mut g, s);
            let y = g.unary(UnaryOp::Relu, t).unwrap();
            g.outputs.push(Output { name: "y".into(), node: y });
            (g, s, y)
        };
        let permuted = |g: &mut crate::tiny::Graph, s| {
            let p = g.permute(s, &[1, 0]).unwrap();
            let r = g.reshape(p, &[Dim::int(6)]).unwrap();
            let n = g.unary(UnaryOp::Neg, r).unwrap();
            let one = g.constant(1.0, DType::F32).unwrap();
            let one = g.reshape(one, &[Dim::int(1)]).unwrap();
            let one = g.expand(one, &[Dim::int(6)]).unwrap();
            g.binary(BinaryOp::Add, n, one).unwrap()
        };
        let (g, s, y) = build(&permuted);
        assert_eq!(grouped(&g).kernels, vec![KernelPlan { root: y, reduce: Some(s) }]);
        let expanded = |g: &mut crate::tiny::Graph, s| {
            let r = g.reshape(s, &[Dim::int(2), Dim::int(3), Dim::int(1)]).unwrap();
            g.expand(r, &[Dim::int(2), Dim::int(3), Dim::int(2)]).unwrap()
        };
        let (g, s, y) = build(&expanded);
        let f = grouped(&g);
        assert_eq!(f.kernels, vec![KernelPlan { root: s, reduce: Some(s) }, KernelPlan { root: y, reduce: None }]);
    }

    #[test]
    fn long_chains_are_cut_into_kernels() {
        let mut g = crate::tiny::Graph::new("chain");
        let mut x = g.input("x", DType::F32, &crate::test_graphs::shape(&["N"])).unwrap();
        for _ in 0..200 {
            x = g.unary(crate::tiny::UnaryOp::Neg, x).unwrap();
        }
        g.outputs.push(crate::tiny::Output { name: "y".into(), node: x });
        let f = grouped(&g);
        assert_eq!(f.kernels.len(), 4, "{:?}", f.kernels);
    }
}

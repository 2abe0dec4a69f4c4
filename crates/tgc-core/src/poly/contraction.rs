//! ContractionPattern detection (`000` §3.5): a `REDUCE(SUM)` whose source is
//! a `MUL` is a binary contraction. Each `MUL` operand is traced through its
//! chain of movement nodes down to the first value that is not a movement
//! (the tensor a kernel would load), both as IndexBook expressions over the
//! reduction's variables (`lhs_idx`, `rhs_idx`) and as an isl map composed
//! step by step (`000` §3.2 "逐次合成") — `003`'s
//! `S_conv[n, k, h, w, c, rh, rw] -> In[n, c, h + rh, w + rw]`.
//!
//! "Operands contain nothing but movements" holds by construction here: the
//! trace stops at the first non-movement value, which becomes the operand.
//! Detection needs the reduction, the `MUL` and every node of both chains in
//! the SCoP; otherwise the block stays a plain `reduce`.
//!
//! **Extension point:** [`pattern`] decides `matmul` or `conv` from the
//! traced operands. It answers `None` for now: telling a convolution (an
//! affine offset `h + rh` in an operand index) from a matrix product, and
//! batched or grouped variants, is the next task of the polyhedral core, and
//! `algo_choice` (`000` §4.1 step 7) will read the answer.

use crate::affine::AffExpr;
use crate::diag;
use crate::diag::DResult;
use crate::index_book::{chase, compose, IndexBook};
use crate::tiny::{BinaryOp, Graph, NodeId, Op, ReduceOp};

use super::isl::Map;
use super::{internal, Block, PolyView};

/// The contraction kind of `000` §1.4 `attrs.pattern`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pattern {
    Matmul,
    Conv,
}

impl Pattern {
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Matmul => "matmul",
            Pattern::Conv => "conv",
        }
    }
}

/// One traced `MUL` operand.
pub struct Operand<'c> {
    /// The first non-movement value of the operand's chain.
    pub src: NodeId,
    /// Its index as expressions over the reduction's variables `i0, …`.
    pub idx: Vec<AffExpr>,
    /// `S_reduce[i…] -> src[idx]`, defined where the operand is read (a `PAD`
    /// on the chain restricts it to the unpadded piece).
    pub map: Map<'c>,
}

/// The attributes of a `contraction_pattern` block (`000` §1.4 `attrs`).
pub struct Contraction<'c> {
    /// The `MUL` node.
    pub mul: NodeId,
    pub lhs: Operand<'c>,
    pub rhs: Operand<'c>,
    /// The output axes `i0 … i{r-1}`.
    pub out_idx: Vec<String>,
    /// The reduce axes `i{r} …`.
    pub reduce_idx: Vec<String>,
    /// Operand index components that add two or more variables, e.g.
    /// `("lhs[2]", "i3 + i6")`: the sliding windows a convolution has.
    pub affine_offsets: Vec<(String, String)>,
    /// `matmul` or `conv`; see [`pattern`].
    pub pattern: Option<Pattern>,
}

/// The contraction of block `id`, if it is a `REDUCE(SUM)` of a `MUL` whose
/// operand chains are all in the SCoP.
///
/// Errors: `ExcessivePiecewise` from tracing a chain with too many `PAD`
/// guards; `Internal` when the book and the view disagree with the graph.
pub fn detect<'c>(g: &Graph, book: &IndexBook, view: &PolyView<'c>, id: NodeId) -> DResult<Option<Contraction<'c>>> {
    let n = g.node(id);
    let (Op::Reduce { op: ReduceOp::Sum, .. }, Some(&mul)) = (&n.op, n.src.first()) else { return Ok(None) };
    if g.node(mul).op != Op::Binary(BinaryOp::Mul) {
        return Ok(None);
    }
    let (Some(info), Some(mul_info)) = (book.get(id), book.get(mul)) else {
        return Err(diag!(Internal, "the IndexBook lacks {}", n.label));
    };
    let (Some(reduce), Some(mul_block)) = (scop_block(view, id), scop_block(view, mul)) else { return Ok(None) };
    let (Some(r), Some(m)) = (reduce.scop(), mul_block.scop()) else { return Ok(None) };
    let extents = info.extents();
    let to_mul = info.inputs.first().ok_or_else(|| diag!(Internal, "REDUCE {} has no access", n.label))?;
    // S_reduce -> S_mul: the reduction's read of the MUL, then back through
    // the MUL's write.
    let at_mul = r.reads[0].map.apply_range(&m.write.reverse().map_err(internal)?).map_err(internal)?;
    let mut operands = Vec::new();
    for &s in g.node(mul).src.iter().take(2) {
        let (k, access) = mul_info
            .inputs
            .iter()
            .enumerate()
            .find(|(_, a)| a.src == s)
            .ok_or_else(|| diag!(Internal, "MUL {} has no access to its source", g.node(mul).label))?;
        let step = compose(&to_mul.map, access, &extents)?;
        let traced = chase(g, book, s, step.index, &extents)?;
        let mut map = at_mul.apply_range(&m.reads[k].map).map_err(internal)?;
        let mut cur = s;
        while g.node(cur).op.is_movement() {
            let Some(t) = scop_block(view, cur).and_then(Block::scop) else { return Ok(None) };
            let back = t.write.reverse().map_err(internal)?;
            map = map.apply_range(&back).and_then(|x| x.apply_range(&t.reads[0].map)).map_err(internal)?;
            cur = t.reads[0].src;
        }
        if cur != traced.src {
            return Err(diag!(
                Internal,
                "tracing {} reached {} but the IndexBook says {}",
                n.label,
                cur.0,
                traced.src.0
            ));
        }
        let map = super::from_index_book::simplify_map(&map)?;
        operands.push(Operand { src: traced.src, idx: traced.index, map });
    }
    let (Some(rhs), Some(lhs)) = (operands.pop(), operands.pop()) else {
        return Err(diag!(Internal, "MUL {} has fewer than two operands", g.node(mul).label));
    };
    let r_out = info.axes.len();
    let mut c = Contraction {
        mul,
        out_idx: (0..r_out).map(|k| format!("i{k}")).collect(),
        reduce_idx: (r_out..r_out + info.reduce_axes.len()).map(|k| format!("i{k}")).collect(),
        affine_offsets: offsets("lhs", &lhs.idx).into_iter().chain(offsets("rhs", &rhs.idx)).collect(),
        lhs,
        rhs,
        pattern: None,
    };
    c.pattern = pattern(&c);
    Ok(Some(c))
}

fn scop_block<'v, 'c>(view: &'v PolyView<'c>, id: NodeId) -> Option<&'v Block<'c>> {
    view.block(id).filter(|b| b.scop().is_some())
}

/// Index components of `side` that add two or more variables.
fn offsets(side: &str, idx: &[AffExpr]) -> Vec<(String, String)> {
    idx.iter()
        .enumerate()
        .filter(|(_, e)| e.var_coeffs().count() >= 2)
        .map(|(k, e)| (format!("{side}[{k}]"), e.to_string()))
        .collect()
}

/// `matmul` or `conv` for a detected contraction: the extension point of the
/// module doc. Not decided yet, so always `None`.
pub fn pattern(_c: &Contraction<'_>) -> Option<Pattern> {
    None
}

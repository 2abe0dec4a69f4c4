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
//! [`pattern`] (`crate::index_book::contraction`, the one recogniser, which
//! also traces the operands' index expressions without isl) decides
//! `matmul` or `conv`.

use crate::affine::AffExpr;
use crate::diag;
use crate::diag::DResult;
use crate::index_book::contraction::{trace, Traced};
pub use crate::index_book::contraction::{Pattern, PatternInfo, Window};
use crate::index_book::IndexBook;
use crate::tiny::{Graph, NodeId};

use super::isl::Map;
use super::{internal, Block, PolyView};

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
    /// `matmul` or `conv` with its roles; `None` when [`pattern`] does not
    /// recognise the operands.
    pub pattern: Option<PatternInfo>,
}

/// The contraction of block `id`, if it is a `REDUCE(SUM)` of a `MUL` whose
/// operand chains are all in the SCoP.
///
/// The operands are [`trace`]d on the IndexBook (an operand chain of
/// movements that does not fold is not a contraction), then their isl maps
/// composed along the same chains.
///
/// Errors: `ExcessivePiecewise` from tracing a chain with too many `PAD`
/// guards; `Internal` when the book and the view disagree with the graph.
pub fn detect<'c>(g: &Graph, book: &IndexBook, view: &PolyView<'c>, id: NodeId) -> DResult<Option<Contraction<'c>>> {
    let n = g.node(id);
    let Some(&mul) = n.src.first() else { return Ok(None) };
    let (Some(reduce), Some(mul_block)) = (scop_block(view, id), scop_block(view, mul)) else { return Ok(None) };
    let (Some(r), Some(m)) = (reduce.scop(), mul_block.scop()) else { return Ok(None) };
    let Some(traced) = trace(g, book, id)? else { return Ok(None) };
    // S_reduce -> S_mul: the reduction's read of the MUL, then back through
    // the MUL's write.
    let at_mul = r.reads[0].map.apply_range(&m.write.reverse().map_err(internal)?).map_err(internal)?;
    let mut maps = Vec::new();
    let mul_info = book.get(mul).ok_or_else(|| diag!(Internal, "the IndexBook lacks {}", g.node(mul).label))?;
    for (&s, op) in g.node(mul).src.iter().zip([&traced.lhs, &traced.rhs]) {
        // The MUL's read of `s` (one read when both factors are the same value).
        let read = mul_info.inputs.iter().position(|a| a.src == s).and_then(|k| m.reads.get(k));
        let read = read.ok_or_else(|| diag!(Internal, "MUL {} has no read of its source", g.node(mul).label))?;
        let mut map = at_mul.apply_range(&read.map).map_err(internal)?;
        let mut cur = s;
        while g.node(cur).op.is_movement() {
            let Some(t) = scop_block(view, cur).and_then(Block::scop) else { return Ok(None) };
            let back = t.write.reverse().map_err(internal)?;
            map = map.apply_range(&back).and_then(|x| x.apply_range(&t.reads[0].map)).map_err(internal)?;
            cur = t.reads[0].src;
        }
        if cur != op.src {
            return Err(diag!(Internal, "tracing {} reached {} but the IndexBook says {}", n.label, cur.0, op.src.0));
        }
        maps.push(super::from_index_book::simplify_map(&map)?);
    }
    let (Some(rhs_map), Some(lhs_map)) = (maps.pop(), maps.pop()) else {
        return Err(diag!(Internal, "MUL {} has fewer than two operands", g.node(mul).label));
    };
    let Traced { lhs, rhs, out, reduce, pattern, .. } = traced;
    Ok(Some(Contraction {
        mul,
        out_idx: (0..out).map(|k| format!("i{k}")).collect(),
        reduce_idx: (out..out + reduce).map(|k| format!("i{k}")).collect(),
        affine_offsets: offsets("lhs", &lhs.idx).into_iter().chain(offsets("rhs", &rhs.idx)).collect(),
        lhs: Operand { src: lhs.src, idx: lhs.idx, map: lhs_map },
        rhs: Operand { src: rhs.src, idx: rhs.idx, map: rhs_map },
        pattern,
    }))
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

/// [`pattern`](crate::index_book::contraction::pattern) of `c`'s operand
/// indices.
pub fn pattern(c: &Contraction<'_>) -> Option<PatternInfo> {
    crate::index_book::contraction::pattern(&c.lhs.idx, &c.rhs.idx, c.out_idx.len(), c.reduce_idx.len())
}

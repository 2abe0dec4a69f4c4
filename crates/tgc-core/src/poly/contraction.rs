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
//! [`pattern`] decides `matmul` or `conv` by comparing the two operands'
//! index expressions (`000` §3.5 "二入力 AxisMap の比較"); `algo_choice`
//! (`000` §4.1 step 7) will read the answer. The rule, per operand index
//! component (an [`AffExpr`] over the reduction's variables):
//! - a component with a floor division, or a non-integer or zero
//!   coefficient, is not recognised: no pattern;
//! - a component that mixes output and reduce variables must be exactly
//!   `S·o + D·r + c` with one output variable `o`, one reduce variable `r`
//!   and `S, D > 0`: a [`Window`] (`003`'s `h*S + rh`; `D` is the dilation).
//!   Any other mix is not recognised;
//! - every reduce variable must index both operands (else the sum is not a
//!   binary contraction: no pattern);
//! - an output variable that indexes both operands is a batch axis
//!   (`batch_idx`: attention's `B, H`, a convolution's group axis);
//! - a window whose output variable indexes only its own operand slides
//!   (a spatial axis): `conv`. A window whose output variable also indexes
//!   the other operand is a group (`g·Cin + c`): it does not make a `conv`
//!   by itself. Without sliding windows the pattern is `matmul` (plain,
//!   batched, `1D×2D`, `2D×1D`).

use crate::affine::AffExpr;
use crate::diag;
use crate::diag::{DResult, ErrorName};
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
    /// `matmul` or `conv` with its roles; `None` when [`pattern`] does not
    /// recognise the operands.
    pub pattern: Option<PatternInfo>,
}

/// What [`pattern`] found (`000` §1.4 `attrs.pattern` and the roles behind
/// it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PatternInfo {
    pub kind: Pattern,
    /// Output variables that index both operands (batch or group axes).
    pub batch_idx: Vec<String>,
    /// Operand components `S·o + D·r + c`, in lhs then rhs component order.
    pub windows: Vec<Window>,
}

/// An operand index component `stride·out + dilation·reduce + offset`: a
/// sliding window (`conv`) or, when `grouped`, a group's block of channels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    /// `"lhs[2]"`: the operand and the component.
    pub at: String,
    /// The output variable `i<k>`.
    pub out: u32,
    /// The reduce variable `i<k>`.
    pub reduce: u32,
    /// The output variable's coefficient (the convolution stride), > 0.
    pub stride: i64,
    /// The reduce variable's coefficient (the dilation), > 0.
    pub dilation: i64,
    /// The output variable also indexes the other operand: a group axis, not
    /// a spatial one.
    pub grouped: bool,
}

/// The contraction of block `id`, if it is a `REDUCE(SUM)` of a `MUL` whose
/// operand chains are all in the SCoP.
///
/// An operand chain of movements that does not fold (`ResourceExceeded` from
/// [`chase`]) is not a contraction.
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
        // An operand chain that does not fold is stored part way by region
        // formation: no plain affine read, so no contraction.
        let traced = match chase(g, book, s, step.index, &extents, &|_| false) {
            Err(e) if e.name == ErrorName::ResourceExceeded => return Ok(None),
            traced => traced?,
        };
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

/// `matmul` or `conv` for a detected contraction, by the rule of the module
/// doc; `None` when an operand index is not of a recognised shape. Reads
/// only `lhs.idx`, `rhs.idx`, `out_idx` and `reduce_idx`.
pub fn pattern(c: &Contraction<'_>) -> Option<PatternInfo> {
    let r_out = c.out_idx.len() as u32;
    let n_vars = r_out + c.reduce_idx.len() as u32;
    let is_out = |k: u32| k < r_out;
    // Which variables index each operand, and its mixed components.
    let mut uses = [vec![false; n_vars as usize], vec![false; n_vars as usize]];
    let mut windows: Vec<Window> = Vec::new();
    for (side, (name, op)) in [("lhs", &c.lhs), ("rhs", &c.rhs)].into_iter().enumerate() {
        for (k, e) in op.idx.iter().enumerate() {
            if e.terms().count() != e.var_coeffs().count() {
                return None; // a floor division
            }
            let mut vars = Vec::new();
            for (v, coeff) in e.var_coeffs() {
                let coeff = coeff.as_int().filter(|&x| x != 0)?;
                if v >= n_vars {
                    return None;
                }
                uses[side][v as usize] = true;
                vars.push((v, coeff));
            }
            let (outs, reds): (Vec<_>, Vec<_>) = vars.into_iter().partition(|&(v, _)| is_out(v));
            match (outs.as_slice(), reds.as_slice()) {
                (_, []) | ([], _) => {}
                ([o], [r]) if o.1 > 0 && r.1 > 0 => windows.push(Window {
                    at: format!("{name}[{k}]"),
                    out: o.0,
                    reduce: r.0,
                    stride: o.1,
                    dilation: r.1,
                    grouped: false,
                }),
                _ => return None,
            }
        }
    }
    if (r_out..n_vars).any(|v| !(uses[0][v as usize] && uses[1][v as usize])) {
        return None;
    }
    let both = |v: u32| uses[0][v as usize] && uses[1][v as usize];
    for w in &mut windows {
        w.grouped = both(w.out);
    }
    let kind = if windows.iter().any(|w| !w.grouped) { Pattern::Conv } else { Pattern::Matmul };
    Some(PatternInfo { kind, batch_idx: (0..r_out).filter(|&v| both(v)).map(|v| format!("i{v}")).collect(), windows })
}

//! ContractionPattern recognition on the IndexBook (`000` §3.5): a
//! `REDUCE(SUM)` whose source is a `MUL` is a binary contraction. Each `MUL`
//! operand is traced through its chain of movement nodes ([`chase`]) down to
//! the first value that is not a movement (the tensor a kernel would load),
//! as index expressions over the reduction's variables and the guards
//! (`PAD`s) under which it is read ([`trace`]).
//!
//! This is the one recogniser of contractions: Poly-View
//! (`crate::poly::contraction`, feature `poly`) adds the isl access maps
//! of the same operands for its `contraction_pattern` blocks, and the GPU
//! back end reads the pattern to choose a template without isl.
//!
//! [`pattern`] decides `matmul` or `conv` by comparing the two operands'
//! index expressions (`000` §3.5 "二入力 AxisMap の比較"); `algo_choice`
//! (`000` §4.1 step 7) reads the answer: the GPU back end picks its
//! template by it ([`crate::gpu::mma::recognise`]). The rule, per operand index
//! component (an [`AffExpr`] over the reduction's variables):
//! - a component with a floor division, or a non-integer or zero
//!   coefficient, is not recognised: no pattern;
//! - a component that mixes output and reduce variables must be exactly
//!   `S·o + D·r + c` with one output variable `o`, one reduce variable `r`
//!   and `S, D > 0`: a [`Window`] (`003`'s `h*S + rh`; `D` is the dilation).
//!   Any other mix is not recognised;
//! - every reduce variable must index both operands or neither (one that
//!   indexes only one operand makes the sum not a binary contraction: no
//!   pattern; one that indexes neither is a size-1 axis, such as a 1×1
//!   convolution's window, and sums equal products);
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
use crate::tiny::{BinaryOp, Graph, NodeId, Op, ReduceOp};

use super::{chase, compose, IndexBook, Piece};

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

/// One traced `MUL` operand.
#[derive(Clone, Debug, PartialEq)]
pub struct Operand {
    /// The first non-movement value of the operand's chain.
    pub src: NodeId,
    /// Its index as expressions over the reduction's variables `i0, …`.
    pub idx: Vec<AffExpr>,
    /// The guards of the `PAD`s on the chain: outside a piece's `valid`
    /// constraints the operand reads `otherwise`.
    pub guard: Vec<Piece>,
}

impl Operand {
    /// Whether variable `v` indexes the operand or one of its guards.
    pub fn reads(&self, v: usize) -> bool {
        let mut exprs = self.idx.iter().chain(self.guard.iter().flat_map(|p| p.valid.iter().map(|c| &c.expr)));
        exprs.any(|e| e.var_coeffs().any(|(k, c)| k as usize == v && c.as_int() != Some(0)))
    }
}

/// A `REDUCE(SUM)` of a `MUL`, its operands traced.
#[derive(Clone, Debug, PartialEq)]
pub struct Traced {
    /// The `MUL` node.
    pub mul: NodeId,
    pub lhs: Operand,
    pub rhs: Operand,
    /// The number of output variables `i0 … i{out-1}`; the reduce variables
    /// follow.
    pub out: usize,
    pub reduce: usize,
    /// [`pattern`] of the operands.
    pub pattern: Option<PatternInfo>,
}

/// Whether node `id` is a contraction: a `REDUCE SUM` of a `MUL` of two
/// values (what [`trace`] starts from; the templates and the GPU's region
/// formation look for these). A `MUL` of a value by itself (a
/// layernorm's `sum((x − m)²)`) is a sum of squares, element by element,
/// not a product of two operands.
pub fn is_contraction(g: &Graph, id: NodeId) -> bool {
    let n = g.node(id);
    let product = |m: NodeId| {
        let mul = g.node(m);
        mul.op == Op::Binary(BinaryOp::Mul) && mul.src.first() != mul.src.get(1)
    };
    matches!(n.op, Op::Reduce { op: ReduceOp::Sum, .. }) && n.src.first().is_some_and(|&m| product(m))
}

/// The contraction at node `id`: `None` unless it is a `REDUCE(SUM)` of a
/// `MUL`, or when an operand chain of movements does not fold
/// (`ResourceExceeded` from [`chase`]: region formation stores such a chain
/// part way, so there is no plain affine read).
///
/// Errors: `ExcessivePiecewise` from a chain with too many `PAD` guards;
/// `Internal` when the book lacks a node.
pub fn trace(g: &Graph, book: &IndexBook, id: NodeId) -> DResult<Option<Traced>> {
    let n = g.node(id);
    let (Op::Reduce { op: ReduceOp::Sum, .. }, Some(&mul)) = (&n.op, n.src.first()) else { return Ok(None) };
    if g.node(mul).op != Op::Binary(BinaryOp::Mul) {
        return Ok(None);
    }
    let (Some(info), Some(mul_info)) = (book.get(id), book.get(mul)) else {
        return Err(diag!(Internal, "the IndexBook lacks {}", n.label));
    };
    let extents = info.extents();
    let to_mul = info.inputs.first().ok_or_else(|| diag!(Internal, "REDUCE {} has no access", n.label))?;
    let mut operands = Vec::new();
    for &s in g.node(mul).src.iter().take(2) {
        let access = mul_info
            .inputs
            .iter()
            .find(|a| a.src == s)
            .ok_or_else(|| diag!(Internal, "MUL {} has no access to its source", g.node(mul).label))?;
        let step = compose(&to_mul.map, access, &extents)?;
        let traced = match chase(g, book, s, step.index, &extents, &|_| false) {
            Err(e) if e.name == ErrorName::ResourceExceeded => return Ok(None),
            traced => traced?,
        };
        let mut guard = step.guard;
        guard.extend(traced.guard);
        operands.push(Operand { src: traced.src, idx: traced.index, guard });
    }
    let (Some(rhs), Some(lhs)) = (operands.pop(), operands.pop()) else {
        return Err(diag!(Internal, "MUL {} has fewer than two operands", g.node(mul).label));
    };
    let (out, reduce) = (info.axes.len(), info.reduce_axes.len());
    let pattern = pattern(&lhs.idx, &rhs.idx, out, reduce);
    Ok(Some(Traced { mul, lhs, rhs, out, reduce, pattern }))
}

/// `matmul` or `conv` for a contraction whose operands are read at `lhs`
/// and `rhs` (expressions over `r_out` output variables `i0…` then
/// `r_reduce` reduce variables), by the rule of the module doc; `None`
/// when an operand index is not of a recognised shape.
pub fn pattern(lhs: &[AffExpr], rhs: &[AffExpr], r_out: usize, r_reduce: usize) -> Option<PatternInfo> {
    let r_out = r_out as u32;
    let n_vars = r_out + r_reduce as u32;
    let is_out = |k: u32| k < r_out;
    // Which variables index each operand, and its mixed components.
    let mut uses = [vec![false; n_vars as usize], vec![false; n_vars as usize]];
    let mut windows: Vec<Window> = Vec::new();
    for (side, (name, idx)) in [("lhs", lhs), ("rhs", rhs)].into_iter().enumerate() {
        for (k, e) in idx.iter().enumerate() {
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
    // A reduce variable that indexes neither operand (a size-1 window
    // axis, a 1×1 convolution's `r` and `s`) sums equal products.
    if (r_out..n_vars).any(|v| uses[0][v as usize] != uses[1][v as usize]) {
        return None;
    }
    let both = |v: u32| uses[0][v as usize] && uses[1][v as usize];
    for w in &mut windows {
        w.grouped = both(w.out);
    }
    let kind = if windows.iter().any(|w| !w.grouped) { Pattern::Conv } else { Pattern::Matmul };
    Some(PatternInfo { kind, batch_idx: (0..r_out).filter(|&v| both(v)).map(|v| format!("i{v}")).collect(), windows })
}

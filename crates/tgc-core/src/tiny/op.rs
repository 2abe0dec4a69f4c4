//! The Tiny IR vocabulary (`spec/README.md` decision 6, `spec/002` §2).

use crate::affine::AffExpr;
use crate::sym::Dim;

/// Unary operations. Transcendentals are base-2 (`EXP2`, `LOG2`) as in
/// tinygrad; the frontend decomposes `exp`, `log`, `gelu`, … into these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Neg,
    Relu,
    Exp2,
    Log2,
    Sqrt,
    Rsqrt,
    Recip,
}

/// Binary operations on operands of identical shape and dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    /// Floating-point division.
    Fdiv,
    Max,
    Min,
    /// `a < b`, result `bool`.
    Cmplt,
    /// `a == b`, result `bool`.
    Cmpeq,
}

/// Reduction operators of `REDUCE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Sum,
    /// Product: `cumprod`'s combination (and `prod`'s).
    Prod,
    Max,
    Min,
}

/// One Tiny IR operation. The result's dtype and shape live on the node;
/// ops whose result shape is an argument (`RESHAPE`, `EXPAND`, `VIEW`) read it
/// from there.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    // --- I/O
    /// An external tensor (`INPUT{tensor_id}`), named `name`.
    Input {
        name: String,
    },
    /// A scalar constant of shape `[]`.
    Const {
        value: f64,
    },
    // --- unary, cast
    Unary(UnaryOp),
    /// Conversion to the node's dtype (round to nearest even for floats,
    /// truncation toward zero for i32, `x != 0` for bool).
    Cast,
    // --- binary, ternary
    Binary(BinaryOp),
    /// `where(cond, a, b)`.
    Where,
    // --- reduce
    /// Reduces `axes` (removed from the shape, keepdim=false) accumulating in
    /// the node's dtype.
    Reduce {
        op: ReduceOp,
        axes: Vec<usize>,
    },
    // --- movement (never materialized)
    /// Row-major re-layout to the node's shape; element counts must agree.
    Reshape,
    /// Output axis `k` is input axis `perm[k]`.
    Permute {
        perm: Vec<usize>,
    },
    /// Broadcasts size-1 axes to the node's shape (same rank).
    Expand,
    /// Pads axis `k` with `pads[k].0` elements before and `pads[k].1` after,
    /// filled with `value`.
    Pad {
        pads: Vec<(Dim, Dim)>,
        value: f64,
    },
    /// Keeps `lo[k] + j·step[k]` for `lo[k] + j·step[k] < hi[k]` on every axis.
    Shrink {
        lo: Vec<Dim>,
        hi: Vec<Dim>,
        step: Vec<Dim>,
    },
    /// Reverses the listed axes: `out[i] = in[D-1-i]`.
    Flip {
        axes: Vec<usize>,
    },
    /// General affine re-mapping: input index `k` is `map[k]` evaluated at the
    /// output index (variables `i0, i1, …` are output axes).
    View {
        map: Vec<AffExpr>,
    },
    // --- data-dependent read
    /// `torch.gather(x, axis, index)`: sources `[x, index]`, `index` of
    /// dtype `i32` and the shape of the result, equal to `x`'s on every axis
    /// but `axis`; `out[i] = x[i with i_axis ← gather_position(index[i],
    /// D)]`, `D` the size of `x`'s axis. The one op whose read position is
    /// a value, not an index expression (`004`'s `LoadIndex`; Non-SCoP,
    /// `000` §13): its `x` is always materialised (decision 6: no
    /// composition of index maps can express the read).
    Gather {
        axis: usize,
    },
    // --- scan
    /// Prefix combination along `axis` (`004` 並列化: cumulative ops by
    /// parallel scan; ONNX `CumSum`'s attributes): the axis's points taken
    /// in scan order `p_j = j`, or `D-1-j` when `reverse`, `out[p_j] =
    /// x[p_0] ⊕ … ⊕ x[p_j]` — without `x[p_j]` when `exclusive`, so
    /// `out[p_0]` is the identity — `⊕` the reduce op, accumulated in the
    /// node's dtype (its compute type, rounded on each output as a
    /// `REDUCE`'s result is). Shape and dtype are `x`'s. Decision 6's
    /// reason for the op: written with the other ops a prefix is a `REDUCE`
    /// over a triangle (`where(j ≤ i, x, 0)`), `O(n²)` work that no schedule
    /// turns into a scan's `O(n)`; the op keeps the recurrence visible so
    /// that back ends can run a parallel scan (blocked on the CPU,
    /// warp-shuffle on the GPU). The flags are attributes rather than
    /// `FLIP`s and shifts around an inclusive scan because those would read
    /// the scan's stored result through a view: one more pass over memory.
    Scan {
        op: ReduceOp,
        axis: usize,
        exclusive: bool,
        reverse: bool,
    },
}

/// The position `GATHER` reads for index value `v` along an axis of size
/// `d ≥ 1`: a negative `v` counts from the end (NumPy, ONNX), then the
/// result is clamped to `0..d`, so that no index value reads outside the
/// tensor and every backend reads the same element (checking instead
/// would need an error path out of every GPU thread).
pub fn gather_position(v: i64, d: i64) -> i64 {
    let i = if v < 0 { v + d } else { v };
    i.clamp(0, d - 1)
}

impl Op {
    /// The upper-case op name used in JSON and dumps (`ADD`, `REDUCE`, …).
    pub fn name(&self) -> &'static str {
        match self {
            Op::Input { .. } => "INPUT",
            Op::Const { .. } => "CONST",
            Op::Unary(u) => match u {
                UnaryOp::Neg => "NEG",
                UnaryOp::Relu => "RELU",
                UnaryOp::Exp2 => "EXP2",
                UnaryOp::Log2 => "LOG2",
                UnaryOp::Sqrt => "SQRT",
                UnaryOp::Rsqrt => "RSQRT",
                UnaryOp::Recip => "RECIP",
            },
            Op::Cast => "CAST",
            Op::Binary(b) => match b {
                BinaryOp::Add => "ADD",
                BinaryOp::Sub => "SUB",
                BinaryOp::Mul => "MUL",
                BinaryOp::Fdiv => "FDIV",
                BinaryOp::Max => "MAX",
                BinaryOp::Min => "MIN",
                BinaryOp::Cmplt => "CMPLT",
                BinaryOp::Cmpeq => "CMPEQ",
            },
            Op::Where => "WHERE",
            Op::Reduce { .. } => "REDUCE",
            Op::Reshape => "RESHAPE",
            Op::Permute { .. } => "PERMUTE",
            Op::Expand => "EXPAND",
            Op::Pad { .. } => "PAD",
            Op::Shrink { .. } => "SHRINK",
            Op::Flip { .. } => "FLIP",
            Op::View { .. } => "VIEW",
            Op::Gather { .. } => "GATHER",
            Op::Scan { .. } => "SCAN",
        }
    }

    /// Number of sources the op takes.
    pub fn arity(&self) -> usize {
        match self {
            Op::Input { .. } | Op::Const { .. } => 0,
            Op::Binary(_) | Op::Gather { .. } => 2,
            Op::Where => 3,
            _ => 1,
        }
    }

    /// True for the movement ops, which only re-index their source.
    pub fn is_movement(&self) -> bool {
        matches!(
            self,
            Op::Reshape
                | Op::Permute { .. }
                | Op::Expand
                | Op::Pad { .. }
                | Op::Shrink { .. }
                | Op::Flip { .. }
                | Op::View { .. }
        )
    }

    /// True for element-wise ops (unary, cast, binary, where): same index
    /// space in and out.
    pub fn is_elementwise(&self) -> bool {
        matches!(self, Op::Unary(_) | Op::Cast | Op::Binary(_) | Op::Where)
    }
}

impl ReduceOp {
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "SUM",
            ReduceOp::Prod => "PROD",
            ReduceOp::Max => "MAX",
            ReduceOp::Min => "MIN",
        }
    }

    /// The op of an upper-case name ([`ReduceOp::name`]).
    pub fn parse(name: &str) -> Option<ReduceOp> {
        [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min].into_iter().find(|op| op.name() == name)
    }

    /// The binary op that combines two partial results.
    pub fn combine(self) -> BinaryOp {
        match self {
            ReduceOp::Sum => BinaryOp::Add,
            ReduceOp::Prod => BinaryOp::Mul,
            ReduceOp::Max => BinaryOp::Max,
            ReduceOp::Min => BinaryOp::Min,
        }
    }

    /// The identity element: 0 for SUM, 1 for PROD, -inf for MAX, +inf for
    /// MIN (for integer accumulators the dtype's extreme values).
    pub fn identity(self, acc: crate::DType) -> f64 {
        match (self, acc) {
            (ReduceOp::Sum, _) => 0.0,
            (ReduceOp::Prod, _) => 1.0,
            (ReduceOp::Max, crate::DType::I32) => i32::MIN as f64,
            (ReduceOp::Min, crate::DType::I32) => i32::MAX as f64,
            (ReduceOp::Max, crate::DType::Bool) => 0.0,
            (ReduceOp::Min, crate::DType::Bool) => 1.0,
            (ReduceOp::Max, _) => f64::NEG_INFINITY,
            (ReduceOp::Min, _) => f64::INFINITY,
        }
    }
}

/// How a `RESHAPE` from shape `from` to shape `to` merges axes: for each
/// axis of `to`, how many of `from`'s axes longer than 1 it holds, in
/// order (0 for a size-1 axis); `None` when it splits an axis of `from`
/// (or when symbolic extents are not matched one to one). A reshape that
/// only merges adjacent axes and adds or drops size-1 ones keeps each
/// element's row-major offset as a sum over `from`'s axes: what a template
/// can write its accumulators through.
pub fn reshape_merges(from: &[Dim], to: &[Dim]) -> Option<Vec<usize>> {
    let mut src = from.iter().filter(|d| !d.is_one()).peekable();
    let mut counts = Vec::with_capacity(to.len());
    for d in to {
        if d.is_one() {
            counts.push(0);
            continue;
        }
        let first = src.next()?;
        if first == d {
            counts.push(1);
            continue;
        }
        let (want, mut size, mut n) = (d.as_int()?, first.as_int()?, 1);
        while size < want {
            size *= src.next()?.as_int()?;
            n += 1;
        }
        if size != want {
            return None;
        }
        counts.push(n);
    }
    src.peek().is_none().then_some(counts)
}

//! Frontend IR (`spec/000` §1.1): the graph language after name resolution.
//!
//! Each graph is a list of statements in program order; a statement applies
//! one typed high-level op ([`FOp`]) with its attributes to operands and
//! defines one value (several for a subgraph call). Nested expressions of the
//! source are flattened into unnamed temporaries (`%7`).
//!
//! Invariants (established by [`crate::frontend::resolve`]):
//! - every operand names a value defined earlier in the same graph (parameters
//!   are values `0..params.len()`) or is a literal;
//! - every [`FOp::Call`] names a graph of the program and has as many operands
//!   as that graph has parameters; the statement defines as many values as it
//!   has results;
//! - attribute dimensions mention only symbols the graph declares;
//! - literal-only arithmetic has been folded: no statement has only literal
//!   operands except a unary one (whose literal takes its default dtype).
//!
//! Shapes are not stored: the Tiny builder infers them while lowering
//! ([`crate::frontend::to_tiny`]), so there is one set of shape rules.
//! Movement ops are logical (no copies).

use std::fmt::Write;

use crate::diag::Span;
use crate::sym::Dim;
use crate::DType;

/// A resolved program: every graph of the source file, in source order.
#[derive(Clone, Debug, PartialEq)]
pub struct FProgram {
    pub graphs: Vec<FGraph>,
}

/// Index of a value inside its [`FGraph`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

/// A declared parameter or result: `name: dtype[shape]`.
#[derive(Clone, Debug, PartialEq)]
pub struct FTensor {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<Dim>,
    pub span: Span,
}

/// A value of a graph: a parameter, a named statement result or a temporary.
#[derive(Clone, Debug, PartialEq)]
pub struct FValue {
    /// The source name; `None` for temporaries of nested expressions.
    pub name: Option<String>,
    pub span: Span,
}

/// The kind of a literal: it decides which dtypes the literal may meet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LitKind {
    Int,
    Float,
    Bool,
}

/// A literal operand. It takes the dtype of the tensor it meets (`DSL.md`);
/// alone it is `i32`, `f32` or `bool` by kind.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Literal {
    pub value: f64,
    pub kind: LitKind,
    pub span: Span,
}

impl Literal {
    /// The dtype of a literal that meets no tensor.
    pub fn default_dtype(&self) -> DType {
        match self.kind {
            LitKind::Int => DType::I32,
            LitKind::Float => DType::F32,
            LitKind::Bool => DType::Bool,
        }
    }

    /// Whether the literal may take `dtype`: floats only meet float tensors,
    /// booleans only bool tensors, integers any numeric tensor.
    pub fn fits(&self, dtype: DType) -> bool {
        match self.kind {
            LitKind::Float => dtype.is_float(),
            LitKind::Int => dtype != DType::Bool,
            LitKind::Bool => dtype == DType::Bool,
        }
    }
}

/// An operand: a value or a literal.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Operand {
    Value(ValueId),
    Lit(Literal),
}

/// A statement: `results = op(args)`.
#[derive(Clone, Debug, PartialEq)]
pub struct FStmt {
    pub results: Vec<ValueId>,
    pub op: FOp,
    /// Tensor operands in the op's order (optional ones, such as a bias or a
    /// mask, last and only when present).
    pub args: Vec<Operand>,
    /// Span of each operand's expression.
    pub arg_spans: Vec<Span>,
    /// Span of the operator or callee name.
    pub span: Span,
}

/// A resolved graph definition.
#[derive(Clone, Debug, PartialEq)]
pub struct FGraph {
    pub name: String,
    pub span: Span,
    /// Declared symbols with their defaults, in order.
    pub syms: Vec<(String, Option<i64>)>,
    /// The symbols declared `padded`.
    pub padded: Vec<String>,
    pub params: Vec<FTensor>,
    pub results: Vec<FTensor>,
    /// Every value; parameters first.
    pub values: Vec<FValue>,
    pub body: Vec<FStmt>,
    /// The returned operands with the spans of their names in `return`.
    pub ret: Vec<(Operand, Span)>,
}

/// Element-wise functions of one operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryFn {
    Relu,
    Gelu,
    GeluTanh,
    Silu,
    Sigmoid,
    Tanh,
    Exp,
    Exp2,
    Log,
    Log2,
    Sqrt,
    Rsqrt,
    Recip,
    Abs,
    Neg,
    Erf,
    Sign,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Asinh,
    Acosh,
    Atanh,
}

impl UnaryFn {
    /// Every unary function, for name lookup.
    pub const ALL: [UnaryFn; 28] = [
        UnaryFn::Relu,
        UnaryFn::Gelu,
        UnaryFn::GeluTanh,
        UnaryFn::Silu,
        UnaryFn::Sigmoid,
        UnaryFn::Tanh,
        UnaryFn::Exp,
        UnaryFn::Exp2,
        UnaryFn::Log,
        UnaryFn::Log2,
        UnaryFn::Sqrt,
        UnaryFn::Rsqrt,
        UnaryFn::Recip,
        UnaryFn::Abs,
        UnaryFn::Neg,
        UnaryFn::Erf,
        UnaryFn::Sign,
        UnaryFn::Sin,
        UnaryFn::Cos,
        UnaryFn::Tan,
        UnaryFn::Asin,
        UnaryFn::Acos,
        UnaryFn::Atan,
        UnaryFn::Sinh,
        UnaryFn::Cosh,
        UnaryFn::Asinh,
        UnaryFn::Acosh,
        UnaryFn::Atanh,
    ];

    /// The DSL call name.
    pub fn name(self) -> &'static str {
        match self {
            UnaryFn::Relu => "relu",
            UnaryFn::Gelu => "gelu",
            UnaryFn::GeluTanh => "gelu_tanh",
            UnaryFn::Silu => "silu",
            UnaryFn::Sigmoid => "sigmoid",
            UnaryFn::Tanh => "tanh",
            UnaryFn::Exp => "exp",
            UnaryFn::Exp2 => "exp2",
            UnaryFn::Log => "log",
            UnaryFn::Log2 => "log2",
            UnaryFn::Sqrt => "sqrt",
            UnaryFn::Rsqrt => "rsqrt",
            UnaryFn::Recip => "recip",
            UnaryFn::Abs => "abs",
            UnaryFn::Neg => "neg",
            UnaryFn::Erf => "erf",
            UnaryFn::Sign => "sign",
            UnaryFn::Sin => "sin",
            UnaryFn::Cos => "cos",
            UnaryFn::Tan => "tan",
            UnaryFn::Asin => "asin",
            UnaryFn::Acos => "acos",
            UnaryFn::Atan => "atan",
            UnaryFn::Sinh => "sinh",
            UnaryFn::Cosh => "cosh",
            UnaryFn::Asinh => "asinh",
            UnaryFn::Acosh => "acosh",
            UnaryFn::Atanh => "atanh",
        }
    }
}

/// Element-wise functions of two operands (operators and `maximum`/`minimum`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryFn {
    Add,
    Sub,
    Mul,
    Div,
    Maximum,
    Minimum,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    /// `pow(a, b)`: `a` to the power `b`.
    Pow,
}

impl BinaryFn {
    /// The name in the `frontend` dump.
    pub fn name(self) -> &'static str {
        match self {
            BinaryFn::Add => "add",
            BinaryFn::Sub => "sub",
            BinaryFn::Mul => "mul",
            BinaryFn::Div => "div",
            BinaryFn::Maximum => "maximum",
            BinaryFn::Minimum => "minimum",
            BinaryFn::Lt => "lt",
            BinaryFn::Le => "le",
            BinaryFn::Gt => "gt",
            BinaryFn::Ge => "ge",
            BinaryFn::Eq => "eq",
            BinaryFn::Ne => "ne",
            BinaryFn::Pow => "pow",
        }
    }

    /// True for the comparisons, whose result is `bool`.
    pub fn is_comparison(self) -> bool {
        matches!(self, BinaryFn::Lt | BinaryFn::Le | BinaryFn::Gt | BinaryFn::Ge | BinaryFn::Eq | BinaryFn::Ne)
    }
}

/// Reductions of the DSL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceFn {
    Sum,
    Prod,
    Max,
    Min,
    Mean,
}

impl ReduceFn {
    pub fn name(self) -> &'static str {
        match self {
            ReduceFn::Sum => "sum",
            ReduceFn::Prod => "prod",
            ReduceFn::Max => "max",
            ReduceFn::Min => "min",
            ReduceFn::Mean => "mean",
        }
    }
}

/// An axis given as an index (negative counts from the end) or as the name
/// of a symbol that must size exactly one axis (`spec/README.md` decision 4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AxisRef {
    Index(i64),
    Name(String),
}

/// Movement ops: logical re-indexings (no copies).
#[derive(Clone, Debug, PartialEq)]
pub enum Movement {
    /// Row-major re-layout; one entry may be `-1` (inferred).
    Reshape { shape: Vec<Dim> },
    /// Output axis `k` is input axis `perm[k]` (negative entries count from the end).
    Permute { perm: Vec<i64> },
    /// Swaps two axes.
    Transpose { a: i64, b: i64 },
    /// Right-aligned broadcast to `shape` (a `-1` entry keeps the size).
    Expand { shape: Vec<Dim> },
    /// Inserts size-1 axes at the positions `axes` of the result (each in
    /// `-(r+n)..r+n` for `n` new axes).
    Unsqueeze { axes: Vec<i64> },
    /// Removes the size-1 axes `axes`.
    Squeeze { axes: Vec<i64> },
    /// NumPy's `tile`: the whole tensor repeated `reps[k]` times along each
    /// axis (right-aligned; the shorter of `reps` and the shape gets 1s).
    Tile { reps: Vec<Dim> },
    /// Each element repeated `repeats` times in place along `axis`.
    RepeatInterleave { repeats: Dim, axis: i64 },
    /// `[lo, hi]` per axis, filled with `value` or by `mode`.
    Pad { pads: Vec<(Dim, Dim)>, value: f64, mode: PadMode },
    /// `[lo, hi)` per axis.
    Shrink { bounds: Vec<(Dim, Dim)> },
    /// `[lo, hi, step)` per axis, step > 0.
    Slice { bounds: Vec<(Dim, Dim, Dim)> },
    /// Reverses the listed axes.
    Flip { axes: Vec<i64> },
    /// PyTorch's `Tensor.unfold`: the windows of `size` elements every
    /// `step` along `axis`, as a new last axis.
    Unfold { axis: i64, size: Dim, step: Dim },
}

/// Joins and cuts along one axis (`concat`, `split`): several operands or
/// several results, so not a [`Movement`] of one tensor.
#[derive(Clone, Debug, PartialEq)]
pub enum Pieces {
    /// The operands one after the other along `axis`.
    Concat { axis: i64 },
    /// One result per entry of `sizes`, consecutive pieces along `axis`.
    Split { sizes: Vec<Dim>, axis: i64 },
    /// `chunks` equal consecutive pieces along `axis` (whose size they
    /// must divide).
    Chunk { chunks: usize, axis: i64 },
}

/// Sliding-window parameters shared by convolution and pooling, one entry
/// per spatial axis (the last `rank()` axes of the input; the kernel size
/// comes from the weight or from the pool's `kernel`).
#[derive(Clone, Debug, PartialEq)]
pub struct Window {
    /// One stride per spatial axis.
    pub stride: Vec<Dim>,
    /// `(before, after)` per spatial axis.
    pub pad: Vec<(Dim, Dim)>,
    /// One dilation per spatial axis.
    pub dilation: Vec<Dim>,
}

impl Window {
    /// The number of spatial axes (1, 2 or 3 for the DSL's ops).
    pub fn rank(&self) -> usize {
        self.stride.len()
    }
}

/// How `pad` fills the new elements (ONNX `Pad`'s modes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PadMode {
    /// The given value.
    Constant,
    /// The mirror image without the edge element: `[a b c]` padded by 2 is
    /// `[c b a b c b a]`.
    Reflect,
    /// The edge element repeated (PyTorch's `replicate`).
    Edge,
}

impl PadMode {
    /// The name the DSL spells it with (`mode=reflect`).
    pub fn name(self) -> &'static str {
        match self {
            PadMode::Constant => "constant",
            PadMode::Reflect => "reflect",
            PadMode::Edge => "edge",
        }
    }
}

/// A typed high-level op with its attributes (`spec/000` §1.1).
#[derive(Clone, Debug, PartialEq)]
pub enum FOp {
    Unary(UnaryFn),
    Binary(BinaryFn),
    /// `where(cond, a, b)`.
    Where,
    Cast {
        to: DType,
    },
    /// `axes: None` reduces every axis; `acc: None` is the default
    /// accumulator (f32 for floats, i32 for i32, i32 for a bool sum).
    Reduce {
        op: ReduceFn,
        axes: Option<Vec<AxisRef>>,
        keepdim: bool,
        acc: Option<DType>,
    },
    /// `cumsum`, `cumprod`, `cummax`, `cummin` along `axis` (`op` is never
    /// `Mean`): a `SCAN` with its flags.
    Scan {
        op: ReduceFn,
        axis: i64,
        exclusive: bool,
        reverse: bool,
    },
    Movement(Movement),
    Pieces(Pieces),
    /// `torch.gather(x, axis, index)`: operands `x, index` (i32, the rank
    /// of `x` and its sizes on every other axis); a `GATHER`.
    Gather {
        axis: i64,
    },
    /// NumPy's `take(x, index, axis)` (PyTorch's `index_select` for a 1-D
    /// index, an embedding lookup): operands `x, index` (i32, any shape);
    /// `x`'s `axis` replaced by `index`'s axes.
    Take {
        axis: i64,
    },
    /// NumPy/tinygrad `matmul` (`spec/001` §0).
    Matmul,
    /// `conv1d`/`conv2d`/`conv3d` (`window.rank()` spatial axes): input
    /// `[N, Cin, *spatial]`, weight `[Cout, Cin/groups, *kernel]`; operands
    /// `x, w[, bias]`.
    Conv {
        window: Window,
        groups: i64,
        bias: bool,
    },
    /// `conv_transpose{1,2,3}d` (PyTorch's `ConvTranspose`): input `[N, Cin,
    /// *spatial]`, weight `[Cin, Cout/groups, *kernel]`; `window.pad` is the
    /// padding taken off the full output, `output_padding` the extra size
    /// added after it; operands `x, w[, bias]`.
    ConvTranspose {
        window: Window,
        output_padding: Vec<Dim>,
        groups: i64,
        bias: bool,
    },
    /// `im2col` (PyTorch's `F.unfold`): `kernel` has one size per spatial
    /// axis.
    Im2Col {
        kernel: Vec<Dim>,
        window: Window,
    },
    /// `col2im` (PyTorch's `F.fold`, ONNX `Col2Im`) to the spatial sizes
    /// `output`.
    Col2Im {
        output: Vec<Dim>,
        kernel: Vec<Dim>,
        window: Window,
    },
    /// `maxpool{1,2,3}d`: `kernel` has one size per spatial axis.
    MaxPool {
        kernel: Vec<Dim>,
        window: Window,
    },
    AvgPool {
        kernel: Vec<Dim>,
        window: Window,
        count_include_pad: bool,
    },
    Softmax {
        axis: i64,
    },
    LogSoftmax {
        axis: i64,
    },
    /// `x` limited to `[min, max]`; at least one bound is given.
    Clamp {
        min: Option<f64>,
        max: Option<f64>,
    },
    /// Inference batch normalisation over axis 1; operands `x, scale, bias,
    /// mean, var`.
    BatchNorm {
        eps: f64,
    },
    /// Instance normalisation (each `(n, c)` over the spatial axes);
    /// operands `x, scale, bias`.
    InstanceNorm {
        eps: f64,
    },
    /// Normalises over `axes`; operands `x, gamma, beta`.
    LayerNorm {
        axes: Vec<i64>,
        eps: f64,
    },
    /// Operands `q, k, v[, mask]`; `scale: None` is `1/sqrt(D)`.
    Attention {
        mask: bool,
        causal: bool,
        scale: Option<f64>,
    },
    /// Inlined call of graph `graph` (an index into [`FProgram::graphs`]).
    Call {
        graph: usize,
        name: String,
    },
}

fn dims(v: &[Dim]) -> String {
    let s: Vec<String> = v.iter().map(|d| d.to_string()).collect();
    format!("[{}]", s.join(", "))
}

fn ints(v: &[i64]) -> String {
    let s: Vec<String> = v.iter().map(|d| d.to_string()).collect();
    format!("[{}]", s.join(", "))
}

fn window(w: &Window) -> String {
    let p: Vec<String> = w.pad.iter().map(|(a, b)| format!("[{a}, {b}]")).collect();
    format!(" stride={} pad=[{}] dilation={}", dims(&w.stride), p.join(", "), dims(&w.dilation))
}

impl FOp {
    /// How many values the op gives: one per size of a `split`, else one.
    pub fn results(&self) -> usize {
        match self {
            FOp::Pieces(Pieces::Split { sizes, .. }) => sizes.len(),
            FOp::Pieces(Pieces::Chunk { chunks, .. }) => *chunks,
            _ => 1,
        }
    }

    /// The op name in the dump.
    pub fn name(&self) -> String {
        match self {
            FOp::Unary(u) => u.name().to_string(),
            FOp::Binary(b) => b.name().to_string(),
            FOp::Where => "where".into(),
            FOp::Cast { .. } => "cast".into(),
            FOp::Reduce { op, .. } => op.name().to_string(),
            FOp::Movement(m) => match m {
                Movement::Reshape { .. } => "reshape",
                Movement::Permute { .. } => "permute",
                Movement::Transpose { .. } => "transpose",
                Movement::Expand { .. } => "expand",
                Movement::Unsqueeze { .. } => "unsqueeze",
                Movement::Squeeze { .. } => "squeeze",
                Movement::Pad { .. } => "pad",
                Movement::Shrink { .. } => "shrink",
                Movement::Slice { .. } => "slice",
                Movement::Flip { .. } => "flip",
                Movement::Unfold { .. } => "unfold",
                Movement::Tile { .. } => "tile",
                Movement::RepeatInterleave { .. } => "repeat_interleave",
            }
            .to_string(),
            FOp::Pieces(Pieces::Concat { .. }) => "concat".into(),
            FOp::Pieces(Pieces::Split { .. }) => "split".into(),
            FOp::Pieces(Pieces::Chunk { .. }) => "chunk".into(),
            FOp::Gather { .. } => "gather".into(),
            FOp::Take { .. } => "take".into(),
            FOp::Scan { op, .. } => format!("cum{}", op.name()),
            FOp::Matmul => "matmul".into(),
            FOp::Conv { window, .. } => format!("conv{}d", window.rank()),
            FOp::ConvTranspose { window, .. } => format!("conv_transpose{}d", window.rank()),
            FOp::Im2Col { .. } => "im2col".into(),
            FOp::Col2Im { .. } => "col2im".into(),
            FOp::MaxPool { window, .. } => format!("maxpool{}d", window.rank()),
            FOp::AvgPool { window, .. } => format!("avgpool{}d", window.rank()),
            FOp::Softmax { .. } => "softmax".into(),
            FOp::LogSoftmax { .. } => "log_softmax".into(),
            FOp::Clamp { .. } => "clamp".into(),
            FOp::BatchNorm { .. } => "batch_norm".into(),
            FOp::InstanceNorm { .. } => "instance_norm".into(),
            FOp::LayerNorm { .. } => "layernorm".into(),
            FOp::Attention { .. } => "attention".into(),
            FOp::Call { name, .. } => format!("call {name}"),
        }
    }

    /// The attributes as ` key=value` pairs (empty when there are none).
    pub fn attrs(&self) -> String {
        match self {
            FOp::Cast { to } => format!(" to={to}"),
            FOp::Reduce { axes, keepdim, acc, .. } => {
                let mut s = String::new();
                if let Some(a) = axes {
                    let v: Vec<String> = a
                        .iter()
                        .map(|x| match x {
                            AxisRef::Index(i) => i.to_string(),
                            AxisRef::Name(n) => n.clone(),
                        })
                        .collect();
                    s.push_str(&format!(" axes=[{}]", v.join(", ")));
                }
                s.push_str(&format!(" keepdim={keepdim}"));
                if let Some(a) = acc {
                    s.push_str(&format!(" acc={a}"));
                }
                s
            }
            FOp::Movement(m) => match m {
                Movement::Reshape { shape } | Movement::Expand { shape } => format!(" shape={}", dims(shape)),
                Movement::Permute { perm } => format!(" perm={}", ints(perm)),
                Movement::Transpose { a, b } => format!(" axes=[{a}, {b}]"),
                Movement::Unsqueeze { axes } | Movement::Squeeze { axes } => format!(" axes={}", ints(axes)),
                Movement::Tile { reps } => format!(" reps={}", dims(reps)),
                Movement::RepeatInterleave { repeats, axis } => format!(" repeats={repeats} axis={axis}"),
                Movement::Pad { pads, value, mode } => {
                    let p: Vec<String> = pads.iter().map(|(a, b)| format!("[{a}, {b}]")).collect();
                    match mode {
                        PadMode::Constant => format!(" pads=[{}] value={value:?}", p.join(", ")),
                        PadMode::Reflect | PadMode::Edge => format!(" pads=[{}] mode={}", p.join(", "), mode.name()),
                    }
                }
                Movement::Shrink { bounds } => {
                    let p: Vec<String> = bounds.iter().map(|(a, b)| format!("[{a}, {b}]")).collect();
                    format!(" bounds=[{}]", p.join(", "))
                }
                Movement::Slice { bounds } => {
                    let p: Vec<String> = bounds.iter().map(|(a, b, c)| format!("[{a}, {b}, {c}]")).collect();
                    format!(" bounds=[{}]", p.join(", "))
                }
                Movement::Flip { axes } => format!(" axes={}", ints(axes)),
                Movement::Unfold { axis, size, step } => format!(" axis={axis} size={size} step={step}"),
            },
            FOp::Pieces(Pieces::Concat { axis }) => format!(" axis={axis}"),
            FOp::Pieces(Pieces::Split { sizes, axis }) => format!(" sizes={} axis={axis}", dims(sizes)),
            FOp::Pieces(Pieces::Chunk { chunks, axis }) => format!(" chunks={chunks} axis={axis}"),
            FOp::Conv { window: w, groups, bias } => format!("{} groups={groups} bias={bias}", window(w)),
            FOp::ConvTranspose { window: w, output_padding, groups, bias } => {
                format!("{} output_padding={} groups={groups} bias={bias}", window(w), dims(output_padding))
            }
            FOp::MaxPool { kernel, window: w } | FOp::Im2Col { kernel, window: w } => {
                format!(" kernel={}{}", dims(kernel), window(w))
            }
            FOp::Col2Im { output, kernel, window: w } => {
                format!(" output={} kernel={}{}", dims(output), dims(kernel), window(w))
            }
            FOp::AvgPool { kernel, window: w, count_include_pad } => {
                format!(" kernel={}{} count_include_pad={count_include_pad}", dims(kernel), window(w))
            }
            FOp::Softmax { axis } | FOp::LogSoftmax { axis } | FOp::Gather { axis } | FOp::Take { axis } => {
                format!(" axis={axis}")
            }
            FOp::Scan { axis, exclusive, reverse, .. } => {
                format!(" axis={axis} exclusive={exclusive} reverse={reverse}")
            }
            FOp::Clamp { min, max } => {
                let bound = |k: &str, v: &Option<f64>| v.map(|v| format!(" {k}={v:?}")).unwrap_or_default();
                format!("{}{}", bound("min", min), bound("max", max))
            }
            FOp::BatchNorm { eps } | FOp::InstanceNorm { eps } => format!(" eps={eps:?}"),
            FOp::LayerNorm { axes, eps } => format!(" axes={} eps={eps:?}", ints(axes)),
            FOp::Attention { mask, causal, scale } => {
                let mut s = format!(" mask={mask} causal={causal}");
                if let Some(v) = scale {
                    s.push_str(&format!(" scale={v:?}"));
                }
                s
            }
            FOp::Unary(_) | FOp::Binary(_) | FOp::Where | FOp::Matmul | FOp::Call { .. } => String::new(),
        }
    }
}

fn tensor(t: &FTensor) -> String {
    format!("{}: {}{}", t.name, t.dtype, dims(&t.shape))
}

fn value_name(g: &FGraph, v: ValueId) -> String {
    match g.values.get(v.0 as usize).and_then(|x| x.name.clone()) {
        Some(n) => n,
        None => format!("%{}", v.0),
    }
}

fn operand(g: &FGraph, o: &Operand) -> String {
    match o {
        Operand::Value(v) => value_name(g, *v),
        Operand::Lit(l) => match l.kind {
            LitKind::Bool => (l.value != 0.0).to_string(),
            LitKind::Int => format!("{}", l.value),
            LitKind::Float => format!("{:?}", l.value),
        },
    }
}

/// Renders the program as text (the `--dump frontend` stage): one line per
/// statement, `results = op(operands) attrs  @line:col`.
pub fn dump(p: &FProgram) -> String {
    let mut s = String::new();
    for g in &p.graphs {
        let syms: Vec<String> = g
            .syms
            .iter()
            .map(|(n, d)| {
                let decl = match d {
                    Some(v) => format!("{n}={v}"),
                    None => n.clone(),
                };
                if g.padded.contains(n) {
                    format!("{decl} padded")
                } else {
                    decl
                }
            })
            .collect();
        let params: Vec<String> = g.params.iter().map(tensor).collect();
        let results: Vec<String> = g.results.iter().map(tensor).collect();
        let _ = writeln!(s, "graph {}<{}>({}) -> ({})", g.name, syms.join(", "), params.join(", "), results.join(", "));
        for st in &g.body {
            let res: Vec<String> = st.results.iter().map(|v| value_name(g, *v)).collect();
            let args: Vec<String> = st.args.iter().map(|a| operand(g, a)).collect();
            let lhs = if res.len() == 1 { res[0].clone() } else { format!("({})", res.join(", ")) };
            let _ = writeln!(
                s,
                "  {lhs} = {}({}){}  @{}:{}",
                st.op.name(),
                args.join(", "),
                st.op.attrs(),
                st.span.line,
                st.span.col
            );
        }
        let ret: Vec<String> = g.ret.iter().map(|(o, _)| operand(g, o)).collect();
        let _ = writeln!(s, "  return {}", ret.join(", "));
    }
    s
}

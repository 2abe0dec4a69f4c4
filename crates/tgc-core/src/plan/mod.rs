//! Schedule Plan (`000` §1.7, §12.5, §12.6): the thin parameter set the GPU
//! dialect IR's single MMA template is instantiated with.
//!
//! A [`Plan`] has two text forms that carry the same information:
//!
//! - JSON (`000` §12.5; [`from_json`], [`to_json`]): the keys of §12.5
//!   (`tile`, `stages`, `bind`, `warp_tile`, `cache`, `vectorize`,
//!   `predicate_tail`, `epilogue`, `arch`, `layout_hints`, `algo_choice`,
//!   `local_edges`) plus two keys for what only the DSL states: `loops`
//!   (the `split`/`reorder`/`fuse`/`unroll` steps, in order) and
//!   `pipeline_axis` (the axis of `pipeline`). Any other key is a
//!   `SyntaxError` at the key; so is a key given twice.
//! - The Schedule DSL (`000` §12.6; [`parse_dsl`], [`print_dsl`]): exactly
//!   the statements of §12.6, plus statements for the §12.5 fields the
//!   minimal grammar leaves out: `arch sm80`, `tile BM BN BK`,
//!   `warp_tile 64x64`, `layout_hint KEY VALUE`,
//!   `local_edge FROM TO BUFFER [depth=N]`, and `warp_specialize
//!   [persistent] [cluster=N]` (the sm90 template's producer/consumer
//!   form; `persistent` and `cluster=` in either order, `N` 1 or 2,
//!   printed `warp_specialize persistent cluster=2` with `cluster=1` left
//!   out; JSON `"warp_specialize": true` or `{"persistent": B, "cluster":
//!   N}`, printed `true` for the default form and `cluster` only when not
//!   1); and `pipeline` may omit its axis (a JSON plan with `stages` and
//!   no `pipeline_axis`).
//!
//! Invariants (what both readers guarantee; [`validate`] checks the rest):
//!
//! 1. Axis names match `[a-z.]+` (§12.6 `axis`), algorithm values
//!    `[a-z0-9_]+` (§12.6 `value`), tensor and hint names are identifiers;
//!    so every plan prints to DSL text that parses back.
//! 2. `arch`, `tile`, `warp_tile`, `pipeline`, `vectorize` and
//!    `warp_specialize` appear at most once (JSON has one key for each);
//!    a `warp_specialize`'s `cluster` is 1 or 2.
//! 3. Loop steps keep their order (a `fuse` may use an axis a `split` made).
//! 4. Every element read from text carries its span; spans take no part in
//!    equality, so a plan read from DSL equals the same plan read from JSON.
//!
//! Round trips: `parse_dsl(print_dsl(p)) == p` and
//! `from_json(to_json(p)) == p` for every plan the readers produce; the
//! printers are canonical (a fixed statement and key order), so printing
//! what was parsed gives the canonical text. A plan that binds one axis
//! twice (which [`validate`] rejects) loses the repeat in JSON, whose
//! `bind` is an object.
//!
//! [`validate`] checks a plan against a [`Target`] row and the caller's
//! loop axes, with positioned errors; see `validate.rs`.
//!
//! Plan choice (`000` §5, §6): [`resources`] holds §5's formulas, [`space`]
//! enumerates §6's MVP search space, [`cost`] ranks it through the
//! [`cost::Estimator`] seam ([`cost::Analytic`], or a tuning cache's
//! measurements through `tune::gpu::Recorded`) and [`cost::choose`] picks
//! the best estimate; [`dump()`] prints the
//! ranked table (the `plan` stage).

pub mod cost;
mod dsl;
mod dump;
mod json;
pub mod resources;
pub mod space;
pub mod target;
mod validate;

#[cfg(test)]
mod choice_tests;
#[cfg(test)]
mod tests;

use std::fmt;

use crate::diag::{DResult, Span};
use crate::frontend::ir::UnaryFn;

pub use dsl::{parse_dsl, print_dsl};
pub use dump::{dump, plan_shape};
pub use json::{from_json, to_json};
pub use target::{MmaShape, Target};
pub use validate::{validate, LoopAxis, Problem};

/// A value with the span of the text it was read from. Equality and hashing
/// ignore the span (invariant 4).
#[derive(Clone, Debug)]
pub struct Spanned<T> {
    pub value: T,
    pub span: Option<Span>,
}

impl<T> Spanned<T> {
    /// A value with no source position (built in code).
    pub fn new(value: T) -> Spanned<T> {
        Spanned { value, span: None }
    }

    pub fn at(value: T, span: Span) -> Spanned<T> {
        Spanned { value, span: Some(span) }
    }
}

impl<T: PartialEq> PartialEq for Spanned<T> {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}

impl<T: Eq> Eq for Spanned<T> {}

/// A loop axis name such as `m`, `m.o` or `n.i.i` (§12.6 `axis := [a-z.]+`).
pub type Axis = Spanned<String>;

/// The whole plan. Empty lists and `None` mean "not given".
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// `arch`: the target name, `sm80` or `sm90`.
    pub arch: Option<Spanned<String>>,
    /// `tile = [BM, BN, BK]`: the block tile.
    pub tile: Option<Spanned<[u64; 3]>>,
    /// `warp_tile = WMxWN` (`64x64` or `64x32` in §1.7).
    pub warp_tile: Option<Spanned<[u64; 2]>>,
    /// `split`/`reorder`/`fuse`/`unroll`, in order.
    pub loops: Vec<Spanned<LoopStep>>,
    /// `bind axis target`, in order.
    pub bind: Vec<Spanned<Bind>>,
    /// `pipeline [axis] stages=N`, JSON `stages` and `pipeline_axis`.
    pub pipeline: Option<Spanned<Pipeline>>,
    /// `cache_read` / JSON `cache`.
    pub cache: Vec<Spanned<CacheRead>>,
    pub vectorize: Option<Spanned<Vectorize>>,
    pub predicate_tail: Vec<Axis>,
    /// Epilogue ops, applied to the accumulator in order.
    pub epilogue: Vec<Spanned<Epilogue>>,
    pub algo_choice: Vec<Spanned<AlgoChoice>>,
    pub layout_hints: Vec<Spanned<LayoutHint>>,
    pub local_edges: Vec<Spanned<LocalEdge>>,
    /// `warp_specialize [persistent] [cluster=N]` (an extension of §12.6;
    /// JSON `"warp_specialize": true` or `{"persistent": true, "cluster":
    /// 2}`): one producer warpgroup issues the operand copies and the
    /// block's other warpgroups compute (CUTLASS 3's producer/consumer
    /// kernels; the sm90 template, with TMA copies).
    pub warp_specialize: Option<Spanned<Specialize>>,
}

/// How a warp-specialised kernel schedules its tiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Specialize {
    /// A persistent tile scheduler: one CTA per SM (at most one per tile)
    /// walks the tiles `blockIdx.x, blockIdx.x + gridDim.x, …`, its producer
    /// filling the ring for the next tile while the consumers run the
    /// epilogue of this one. Otherwise one CTA per tile.
    pub persistent: bool,
    /// CTAs per thread block cluster: 1, or 2 for a pair of CTAs on
    /// vertically adjacent tiles (M tiles `2p` and `2p + 1`, the same B
    /// tile) whose producers each load their A tile and half of B and
    /// multicast that half to both (TMA `.multicast::cluster`; sm90 only).
    /// With an odd number of tiles along M the last pair's second CTA
    /// lies beyond M: it loads its half of B for its peer and stores
    /// nothing. Persistent, the grid is pairs of CTAs walking tile pairs.
    pub cluster: u32,
}

impl Default for Specialize {
    fn default() -> Specialize {
        Specialize { persistent: false, cluster: 1 }
    }
}

/// A loop transformation (§12.6 `split`, `reorder`, `fuse`, `unroll`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoopStep {
    /// `split a F`: `a` becomes `a.o` (outer) and `a.i` (inner, extent `F`).
    Split { axis: Axis, factor: Spanned<u64> },
    /// `reorder a b …`: the loop order, outermost first.
    Reorder { axes: Vec<Axis> },
    /// `fuse a b -> c`: `a` and `b` become one axis `c`.
    Fuse { outer: Axis, inner: Axis, into: Axis },
    /// `unroll a F`.
    Unroll { axis: Axis, factor: Spanned<u64> },
}

/// `bind axis target` / JSON `"bind": {"m.o": "block.y"}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bind {
    pub axis: Axis,
    pub target: Spanned<BindTarget>,
}

/// §12.6 `target`: a block or warp index dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BindTarget {
    BlockX,
    BlockY,
    BlockZ,
    WarpX,
    WarpY,
    WarpZ,
}

impl BindTarget {
    pub const ALL: [BindTarget; 6] = [
        BindTarget::BlockX,
        BindTarget::BlockY,
        BindTarget::BlockZ,
        BindTarget::WarpX,
        BindTarget::WarpY,
        BindTarget::WarpZ,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            BindTarget::BlockX => "block.x",
            BindTarget::BlockY => "block.y",
            BindTarget::BlockZ => "block.z",
            BindTarget::WarpX => "warp.x",
            BindTarget::WarpY => "warp.y",
            BindTarget::WarpZ => "warp.z",
        }
    }

    pub fn parse(s: &str) -> Option<BindTarget> {
        BindTarget::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

impl fmt::Display for BindTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `pipeline axis stages=N`: software pipelining of `axis` over `N` buffers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pipeline {
    pub axis: Option<Axis>,
    pub stages: Spanned<u64>,
}

/// `cache_read T smem at=axis [pingpong=B]` / JSON
/// `{"tensor": T, "where": "smem", "at": axis, "pingpong": B}`.
/// `where` is always `smem` (the only place §12.6 names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheRead {
    pub tensor: Spanned<String>,
    pub at: Axis,
    /// `None` when not given (the DSL's optional `pingpong=`).
    pub pingpong: Option<bool>,
}

/// `vectorize axis W`: `W` elements per access.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vectorize {
    pub axis: Axis,
    pub width: Spanned<u64>,
}

/// The value of `all` whose `Display` is `word`.
///
/// Errors: `name` at `span`, "unknown WHAT `WORD`; expected one of …"
/// listing every name of `all`.
fn one_of<T: Copy + fmt::Display>(
    all: &[T],
    word: &str,
    what: &str,
    name: crate::diag::ErrorName,
    span: Option<Span>,
) -> DResult<T> {
    all.iter().copied().find(|x| x.to_string() == word).ok_or_else(|| {
        let names: Vec<String> = all.iter().map(T::to_string).collect();
        let e = crate::diag::Diagnostic::new(
            name,
            format!("unknown {what} `{word}`; expected one of {}", names.join(", ")),
        );
        e.or_at(span)
    })
}

/// An epilogue op (§12.6 `op`), applied to the `f32` accumulator in the
/// plan's order: `bias` and `residual` add an operand, the others are
/// activations. `Display` gives its plan name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Epilogue {
    /// `bias`: `v += bias[col]`.
    Bias,
    /// `relu`: `v = max(v, 0)`.
    Relu,
    /// `silu`: `v = v / (1 + exp(-v))`.
    Silu,
    /// `gelu`: GELU's erf form, `x·Φ(x)`, as the graph language's `gelu`.
    Gelu,
    /// `gelu_tanh`: GELU's tanh approximation (the graph language's
    /// `gelu_tanh`); with `tanh`, beyond §12.6's list.
    GeluTanh,
    /// `tanh`: `v = tanh(v)`.
    Tanh,
    /// `residual`: `v += residual[row, col]`.
    Residual,
}

impl Epilogue {
    pub const ALL: [Epilogue; 7] = [
        Epilogue::Bias,
        Epilogue::Relu,
        Epilogue::Silu,
        Epilogue::Gelu,
        Epilogue::GeluTanh,
        Epilogue::Tanh,
        Epilogue::Residual,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Epilogue::Bias => "bias",
            Epilogue::Relu => "relu",
            Epilogue::Silu => "silu",
            Epilogue::Gelu => "gelu",
            Epilogue::GeluTanh => "gelu_tanh",
            Epilogue::Tanh => "tanh",
            Epilogue::Residual => "residual",
        }
    }

    /// The graph language's function an activation op computes; `None`
    /// for `bias` and `residual`, which add an operand.
    pub fn function(self) -> Option<UnaryFn> {
        match self {
            Epilogue::Relu => Some(UnaryFn::Relu),
            Epilogue::Silu => Some(UnaryFn::Silu),
            Epilogue::Gelu => Some(UnaryFn::Gelu),
            Epilogue::GeluTanh => Some(UnaryFn::GeluTanh),
            Epilogue::Tanh => Some(UnaryFn::Tanh),
            Epilogue::Bias | Epilogue::Residual => None,
        }
    }

    /// The activation op computing `f`, if the epilogue has one.
    pub fn of_function(f: UnaryFn) -> Option<Epilogue> {
        Epilogue::ALL.into_iter().find(|e| e.function() == Some(f))
    }

    /// The op named `word`.
    ///
    /// Errors: `UnknownOp` at `span`, listing the ops.
    pub fn parse(word: &str, span: Option<Span>) -> DResult<Epilogue> {
        one_of(&Epilogue::ALL, word, "epilogue op", crate::diag::ErrorName::UnknownOp, span)
    }
}

impl fmt::Display for Epilogue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// The problem an `algo_choice` is for (§1.7's keys).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AlgoKey {
    Matmul,
    Conv,
    Attention,
}

impl AlgoKey {
    pub const ALL: [AlgoKey; 3] = [AlgoKey::Matmul, AlgoKey::Conv, AlgoKey::Attention];

    pub fn name(self) -> &'static str {
        match self {
            AlgoKey::Matmul => "matmul",
            AlgoKey::Conv => "conv",
            AlgoKey::Attention => "attention",
        }
    }

    /// Every algorithm of this key, the default first.
    pub fn algorithms(self) -> &'static [AlgoChoice] {
        match self {
            AlgoKey::Matmul => &[AlgoChoice::Matmul(MatmulAlgo::ImplicitGemm)],
            AlgoKey::Conv => &[AlgoChoice::Conv(ConvAlgo::ImplicitGemm), AlgoChoice::Conv(ConvAlgo::Winograd3x3)],
            AlgoKey::Attention => &[
                AlgoChoice::Attention(AttentionAlgo::StreamingSoftmax2Pass),
                AlgoChoice::Attention(AttentionAlgo::OnlineSoftmax),
            ],
        }
    }

    /// The key named `word`.
    ///
    /// Errors: `UnknownName` at `span`, listing the keys.
    pub fn parse(word: &str, span: Option<Span>) -> DResult<AlgoKey> {
        one_of(&AlgoKey::ALL, word, "algo_choice key", crate::diag::ErrorName::UnknownName, span)
    }
}

impl fmt::Display for AlgoKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// `algo_choice matmul …` (§1.7): the one a template builds (§1.7's
/// split-K kinds `splitk_serial`/`splitk_parallel` are not, so a plan
/// naming them is an `UnknownName` at the name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MatmulAlgo {
    ImplicitGemm,
}

/// `algo_choice conv …` (§1.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConvAlgo {
    /// The convolution as a GEMM over its im2col view, read in place.
    ImplicitGemm,
    /// Winograd `F(2×2, 3×3)`: transforms around a batched GEMM.
    Winograd3x3,
}

/// `algo_choice attention …`: how the kernel finds each row's softmax
/// maximum (§1.7; the loop skeletons are in `gpu::attention::kernel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AttentionAlgo {
    /// `online_softmax` (FlashAttention-2): one pass over the keys with a
    /// running maximum; when it grows, the row sum and `O` are rescaled.
    OnlineSoftmax,
    /// `streaming_softmax_2pass` (`000` §7.3, §11 item 9): a first pass
    /// over K for each row's maximum, then the loop over K and V with that
    /// maximum fixed — `Q·Kᵀ` computed twice and K read twice, nothing
    /// rescaled.
    StreamingSoftmax2Pass,
}

impl AttentionAlgo {
    /// Both, in the order the templates are tried.
    pub const ALL: [AttentionAlgo; 2] = [AttentionAlgo::OnlineSoftmax, AttentionAlgo::StreamingSoftmax2Pass];
}

/// `algo_choice key value`, e.g. `matmul implicit_gemm`: the algorithm
/// and, through it, its key. `Display` gives the value's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AlgoChoice {
    Matmul(MatmulAlgo),
    Conv(ConvAlgo),
    Attention(AttentionAlgo),
}

impl AlgoChoice {
    pub fn key(self) -> AlgoKey {
        match self {
            AlgoChoice::Matmul(_) => AlgoKey::Matmul,
            AlgoChoice::Conv(_) => AlgoKey::Conv,
            AlgoChoice::Attention(_) => AlgoKey::Attention,
        }
    }

    /// The value's name (`implicit_gemm`, `winograd_3x3`, …).
    pub fn name(self) -> &'static str {
        match self {
            AlgoChoice::Matmul(MatmulAlgo::ImplicitGemm) | AlgoChoice::Conv(ConvAlgo::ImplicitGemm) => "implicit_gemm",
            AlgoChoice::Conv(ConvAlgo::Winograd3x3) => "winograd_3x3",
            AlgoChoice::Attention(AttentionAlgo::OnlineSoftmax) => "online_softmax",
            AlgoChoice::Attention(AttentionAlgo::StreamingSoftmax2Pass) => "streaming_softmax_2pass",
        }
    }

    /// `algo_choice key value`.
    ///
    /// Errors: `UnknownName` at the key's span for an unknown key, at the
    /// value's for an algorithm the key does not have, listing the
    /// accepted names.
    pub fn parse(key: &Spanned<String>, value: &Spanned<String>) -> DResult<AlgoChoice> {
        let k = AlgoKey::parse(&key.value, key.span)?;
        one_of(k.algorithms(), &value.value, &format!("{k} algorithm"), crate::diag::ErrorName::UnknownName, value.span)
    }
}

impl fmt::Display for AlgoChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

impl fmt::Display for MatmulAlgo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&AlgoChoice::Matmul(*self), f)
    }
}

impl fmt::Display for ConvAlgo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&AlgoChoice::Conv(*self), f)
    }
}

impl fmt::Display for AttentionAlgo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&AlgoChoice::Attention(*self), f)
    }
}

/// One entry of `layout_hints`, e.g. `A_swizzle: true`, `C_stride: "row"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayoutHint {
    pub key: String,
    pub value: HintValue,
}

/// A layout hint's value: a flag or a word.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HintValue {
    Bool(bool),
    Word(String),
}

/// `local_edges` entry: how a value moves from one region op to the next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalEdge {
    pub from: String,
    pub to: String,
    pub buffer: Buffer,
    /// Ring depth (2 or 3), for `smem_ring`.
    pub depth: Option<u64>,
}

/// `local_edges[].buffer`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buffer {
    Reg,
    SmemRing,
    Gmem,
}

impl Buffer {
    pub fn as_str(self) -> &'static str {
        match self {
            Buffer::Reg => "reg",
            Buffer::SmemRing => "smem_ring",
            Buffer::Gmem => "gmem",
        }
    }

    pub fn parse(s: &str) -> Option<Buffer> {
        [Buffer::Reg, Buffer::SmemRing, Buffer::Gmem].into_iter().find(|b| b.as_str() == s)
    }
}

/// `[a-z.]+` (§12.6 `axis`).
pub(crate) fn is_axis_name(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase() || b == b'.')
}

/// `[a-z0-9_]+` (§12.6 `value`).
pub(crate) fn is_value_word(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// `[A-Za-z_][A-Za-z0-9_]*`: tensor names, hint keys, region op names.
pub(crate) fn is_ident(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

//! The graph generator of the structure-aware fuzz target and the
//! movement property tests: random Tiny IR graphs in which a chain of 1 to 5
//! movement ops (the frontend's `tile` and `reflect`/`edge` `pad` among them)
//! from an `INPUT` and a second operand (another such chain, a
//! broadcast `CONST`, or the first operand read again at a shifted index)
//! feed a binary op or `CMPLT` + `WHERE`, followed by an optional `SCAN`
//! (sum, max or min along one axis), an optional `REDUCE` and an optional
//! movement tail; sometimes the first operand is a second
//! output.
//!
//! Shapes are concrete. The operand chains are drawn backwards from the
//! binary op's shape (each step picks an op and the input shape it needs), so
//! both operands meet in one shape; the tail is drawn forwards. Every move
//! predicts its result shape from the op's definition (`tiny/op.rs`), and
//! [`Move::build`] checks the builder's shape rules against that prediction.
//!
//! Every choice comes from an [`Entropy`]: [`SplitMix64`] for the seeded
//! property tests ([`case`]), the fuzzer's input for the fuzz target
//! ([`from_bytes`]). Input values are drawn so that every result is exact in
//! f32 (see [`Gen::data`]): the evaluators must agree bit for bit.
//!
//! The numeric cases ([`numeric`]: transcendentals, softmax, layernorm,
//! matmul, convolution, attention, in f32, f16 or bf16) share the operand
//! chains; their values are not exact, and each case carries its op's error
//! bound ([`Case::bound`]). The fuzz target's first choice is the family
//! ([`from_bytes`]); [`mma_from_bytes`] draws the tensor-core family.

mod numeric;

use super::tolerance::Bound;
use crate::affine::AffExpr;
use crate::frontend::ir::{Movement, PadMode};
use crate::sym::Dim;
use crate::tiny::{BinaryOp, Graph, NodeId, Output, ReduceOp};
use crate::DType;

/// Where the generator's choices come from.
pub trait Entropy {
    /// A value in `0..n`; `n` is at least 1.
    fn below(&mut self, n: usize) -> usize;
}

/// The SplitMix64 generator (Steele, Lea and Flood, "Fast splittable
/// pseudorandom number generators", OOPSLA 2014): a seeded stream for the
/// property tests.
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

impl Entropy for SplitMix64 {
    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// A fuzzer's input as choices: one byte per choice among at most 256
/// values, two bytes otherwise, then zeros once the input runs out, so
/// that every input makes a graph and a mutated byte changes one choice.
/// A zero choice is the first option, "no" for [`Gen::chance`]: short
/// inputs make small graphs.
pub struct Bytes<'a>(pub &'a [u8]);

impl Entropy for Bytes<'_> {
    fn below(&mut self, n: usize) -> usize {
        let width = if n <= 256 { 1 } else { 2 };
        let (now, rest) = self.0.split_at(width.min(self.0.len()));
        self.0 = rest;
        let v = now.iter().fold(0usize, |v, &b| v << 8 | b as usize);
        v % n
    }
}

/// Largest rank of a value (a full `REDUCE` may still give rank 0).
const MAX_RANK: usize = 4;
/// Largest axis size of any value.
const MAX_DIM: usize = 24;
/// Largest element count of any value, so that each case stays fast.
const MAX_NUMEL: usize = 1024;
/// Largest axis size and element count of the binary op's shape.
const MAX_TARGET_DIM: usize = 7;
const MAX_TARGET_NUMEL: usize = 512;

#[derive(Clone)]
/// One generated case: a graph with one or two outputs and the values of its
/// inputs (row-major, in `Graph::inputs` order).
pub struct Case {
    pub graph: Graph,
    pub dtype: DType,
    pub inputs: Vec<Vec<f64>>,
    /// How far an evaluator's output element may be from the interpreter's:
    /// `None` for the movement cases (bit for bit), the op's bound for the
    /// numeric ones ([`numeric`]).
    pub bound: Option<Bound>,
}

/// Generates case `index` of the run seeded with `seed`: the same pair always
/// gives the same case, independently of the other cases.
///
/// Errors: a message with the Tiny IR built so far when the builder rejects a
/// move that is valid by the op's definition, or infers another shape (a bug
/// of the builder).
pub fn case(seed: u64, index: u64) -> Result<Case, String> {
    seeded(seed, index, true)
}

/// [`case`] without `GATHER` and `SCAN`: every node of the graph is in the
/// SCoP (for the polyhedral property tests, which compare isl's relations
/// with enumerated ones).
///
/// Errors: as [`case`].
pub fn affine_case(seed: u64, index: u64) -> Result<Case, String> {
    seeded(seed, index, false)
}

/// Case `index` of the run seeded with `seed`, with or without the ops
/// outside the SCoP.
fn seeded(seed: u64, index: u64, non_scop: bool) -> Result<Case, String> {
    let mut rng = SplitMix64::new(seed ^ index.wrapping_mul(0xd1b5_4a32_d192_ed03));
    generate(&mut rng, &format!("case{index}"), non_scop)
}

/// The case a fuzzer's input describes (see [`Bytes`]): its first choice
/// is the family, 0 a movement case (this module's graphs, exact), else a
/// numeric one ([`numeric`]: an op with a stated error bound, in f32, f16
/// or bf16).
///
/// Errors: as [`case`].
pub fn from_bytes(data: &[u8]) -> Result<Case, String> {
    let mut src = Bytes(data);
    match src.below(2) {
        0 => generate(&mut src, "fuzz", true),
        _ => numeric::generate(&mut src, "fuzz", numeric::Family::Any),
    }
}

/// The tensor-core case a fuzzer's input describes: a numeric case that is
/// a matmul, convolution or attention in f16 or bf16 ([`numeric`]).
///
/// Errors: as [`case`].
pub fn mma_from_bytes(data: &[u8]) -> Result<Case, String> {
    numeric::generate(&mut Bytes(data), "fuzz", numeric::Family::TensorCore)
}

/// Numeric case `index` of the run seeded with `seed` (see [`case`]); with
/// `tensor_core`, of the tensor-core family ([`mma_from_bytes`]).
///
/// Errors: as [`case`].
pub fn numeric_case(seed: u64, index: u64, tensor_core: bool) -> Result<Case, String> {
    let mut rng = SplitMix64::new(seed ^ index.wrapping_mul(0xd1b5_4a32_d192_ed03));
    let family = if tensor_core { numeric::Family::TensorCore } else { numeric::Family::Any };
    numeric::generate(&mut rng, &format!("case{index}"), family)
}

fn generate<E: Entropy>(src: &mut E, name: &str, non_scop: bool) -> Result<Case, String> {
    let dtype = if src.below(2) == 1 { DType::I32 } else { DType::F32 };
    let data = SplitMix64::new(src.below(1 << 16) as u64);
    let mut gen = Gen { src, data, dtype, inputs: Vec::new(), non_scop, gathers: 0, spread: None };
    let mut g = Graph::new(name);
    match gen.graph(&mut g) {
        Ok(()) => Ok(Case { graph: g, dtype, inputs: gen.inputs, bound: None }),
        Err(e) => Err(format!("{e}\nTiny IR so far:\n{}", crate::tiny::text::dump(&g))),
    }
}

/// A movement op with its arguments, as concrete integers.
#[derive(Clone, Debug)]
enum Move {
    /// To this shape.
    Reshape(Vec<usize>),
    Permute(Vec<usize>),
    /// To this shape.
    Expand(Vec<usize>),
    /// `(lo, hi)` per axis, and the fill value.
    Pad(Vec<(usize, usize)>, f64),
    /// The frontend's `pad` in `reflect` or `edge` mode, `(lo, hi)` per
    /// axis: `SHRINK`ed border pieces (`FLIP`ped or `EXPAND`ed) joined by
    /// `concat` (`PAD` + `WHERE` of padded bool masks).
    BorderPad(Vec<(usize, usize)>, PadMode),
    Shrink {
        lo: Vec<usize>,
        hi: Vec<usize>,
        step: Vec<usize>,
    },
    Flip(Vec<usize>),
    /// To this shape, with this index map (one expression per input axis).
    View(Vec<usize>, Vec<AffExpr>),
    /// `GATHER` along `axis` at a new i32 `INPUT` named `name`, of the
    /// result's shape, holding `values` (row-major).
    Gather {
        axis: usize,
        name: String,
        shape: Vec<usize>,
        values: Vec<f64>,
    },
}

impl Move {
    /// The result shape of the move on a value of shape `x`, by the op's
    /// definition (`tiny/op.rs`).
    fn out_shape(&self, x: &[usize]) -> Vec<usize> {
        match self {
            Move::Reshape(s) | Move::Expand(s) | Move::View(s, _) => s.clone(),
            Move::Permute(perm) => perm.iter().map(|&p| x[p]).collect(),
            Move::Pad(pads, _) | Move::BorderPad(pads, _) => {
                x.iter().zip(pads).map(|(d, (lo, hi))| d + lo + hi).collect()
            }
            Move::Shrink { lo, hi, step } => (0..x.len()).map(|k| (hi[k] - lo[k]).div_ceil(step[k])).collect(),
            Move::Flip(_) => x.to_vec(),
            Move::Gather { shape, .. } => shape.clone(),
        }
    }

    /// Adds the move's node to `g` after `x`.
    ///
    /// Errors: the builder rejects the move, or infers another shape than
    /// [`Move::out_shape`].
    fn build(&self, g: &mut Graph, x: NodeId) -> Result<NodeId, String> {
        let from = shape_of(g, x);
        let want = self.out_shape(&from);
        let y = match self {
            Move::Reshape(s) => g.reshape(x, &dims(s)),
            Move::Permute(perm) => g.permute(x, perm),
            Move::Expand(s) => g.expand(x, &dims(s)),
            Move::Pad(pads, value) => {
                let pads: Vec<(Dim, Dim)> = pads.iter().map(|&(lo, hi)| (int(lo), int(hi))).collect();
                g.pad(x, &pads, *value)
            }
            Move::BorderPad(pads, mode) => {
                let pads: Vec<(Dim, Dim)> = pads.iter().map(|&(lo, hi)| (int(lo), int(hi))).collect();
                let m = Movement::Pad { pads, value: 0.0, mode: *mode };
                crate::frontend::ops::movement::movement(g, x, &m)
            }
            Move::Shrink { lo, hi, step } => g.shrink(x, &dims(lo), &dims(hi), &dims(step)),
            Move::Flip(axes) => g.flip(x, axes),
            Move::View(s, map) => g.view(x, &dims(s), map),
            Move::Gather { axis, name, shape, .. } => {
                g.input(name, DType::I32, &dims(shape)).and_then(|index| g.gather(x, index, *axis))
            }
        }
        .map_err(|e| format!("the builder rejects {self:?} on {from:?}: {e}"))?;
        let got = shape_of(g, y);
        if got != want {
            return Err(format!("{self:?} on {from:?}: the builder infers {got:?}, the definition gives {want:?}"));
        }
        Ok(y)
    }
}

fn int(v: usize) -> Dim {
    Dim::int(v as i64)
}

fn dims(s: &[usize]) -> Vec<Dim> {
    s.iter().map(|&v| int(v)).collect()
}

/// The concrete shape of a node (every generated shape is concrete).
fn shape_of(g: &Graph, x: NodeId) -> Vec<usize> {
    g.shape(x).iter().map(|d| d.as_int().map_or(0, |v| v as usize)).collect()
}

fn numel(s: &[usize]) -> usize {
    s.iter().product()
}

/// Within the limits of the module's constants (rank 1 to 4).
fn fits(s: &[usize]) -> bool {
    (1..=MAX_RANK).contains(&s.len()) && s.iter().all(|&d| (1..=MAX_DIM).contains(&d)) && numel(s) <= MAX_NUMEL
}

/// The index map of a sliding window: output axis `a` is the window
/// position (stride `stride`), output axis `b` the kernel offset (dilation
/// `dil`), both read input axis `a` (counted without `b`) at
/// `i_a·stride + i_b·dil + offset`; the other output axes map one to one.
/// The frontend's `unfold` is the case `b` last, `dil` 1 and `offset` 0.
fn window_map(out_rank: usize, a: usize, b: usize, stride: usize, dil: usize, offset: usize) -> Vec<AffExpr> {
    (0..out_rank)
        .filter(|&j| j != b)
        .map(|j| {
            if j == a {
                let pos = AffExpr::var(a as u32).scale(&int(stride));
                let tap = AffExpr::var(b as u32).scale(&int(dil));
                &(&pos + &tap) + &AffExpr::int(offset as i64)
            } else {
                AffExpr::var(j as u32)
            }
        })
        .collect()
}

/// The index map of a nearest-neighbour upsampling of axis `k`:
/// `floor((i_k + offset) / factor)`, the other axes one to one.
fn upsample_map(rank: usize, k: usize, factor: usize, offset: usize) -> Vec<AffExpr> {
    (0..rank)
        .map(|j| {
            let v = AffExpr::var(j as u32);
            if j == k {
                let shifted = &v + &AffExpr::int(offset as i64);
                shifted.floordiv(&int(factor), &|_| None).expect("the factor is positive")
            } else {
                v
            }
        })
        .collect()
}

struct Gen<'e, E> {
    src: &'e mut E,
    /// The stream of input values, seeded from `src` (input values take
    /// none of a fuzzer's bytes).
    data: SplitMix64,
    dtype: DType,
    inputs: Vec<Vec<f64>>,
    /// Whether the graph may have the ops Poly-View leaves out of the
    /// SCoP: a `GATHER` step in a chain, a `SCAN`.
    non_scop: bool,
    /// `GATHER` index inputs made so far (for their names).
    gathers: usize,
    /// `None`: exact input values ([`Gen::data`]); `Some(r)`: values of
    /// the dtype uniform in `[−r, r]`, every bit of the mantissa drawn
    /// (the numeric cases).
    spread: Option<f64>,
}

impl<E: Entropy> Gen<'_, E> {
    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.src.below(hi - lo + 1)
    }

    fn below(&mut self, n: usize) -> usize {
        self.src.below(n)
    }

    /// True with probability `p` (in steps of 1/1000); a zero choice is
    /// false.
    fn chance(&mut self, p: f64) -> bool {
        self.below(1000) >= 1000 - (p * 1000.0) as usize
    }

    /// An index drawn with the given weights.
    fn weighted(&mut self, weights: &[usize]) -> usize {
        let mut x = self.below(weights.iter().sum());
        for (k, &w) in weights.iter().enumerate() {
            if x < w {
                return k;
            }
            x -= w;
        }
        unreachable!("x is below the sum of the weights")
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }

    fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut p: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            let j = self.below(i + 1);
            p.swap(i, j);
        }
        p
    }

    /// A non-empty subset of `0..n`, in random order.
    fn subset(&mut self, n: usize) -> Vec<usize> {
        let k = self.range(1, n);
        let mut p = self.permutation(n);
        p.truncate(k);
        p
    }

    /// A random shape of rank 1 to 4 with `n` elements (its axes may exceed
    /// the limits; callers check with [`fits`]).
    fn shape_with_numel(&mut self, n: usize) -> Vec<usize> {
        let rank = self.range(1, MAX_RANK);
        let mut s = vec![1; rank];
        let (mut m, mut p) = (n, 2);
        while m > 1 {
            if m % p == 0 {
                let k = self.below(rank);
                s[k] *= p;
                m /= p;
            } else {
                p += 1;
            }
        }
        s
    }

    /// A scalar of the case's dtype: 0 half of the time.
    fn scalar(&mut self) -> f64 {
        if self.chance(0.5) {
            return 0.0;
        }
        match self.dtype {
            DType::I32 => self.range(1, 10) as f64 - 5.0,
            _ => (self.range(0, 24) as f64 - 12.0) / 4.0 + 0.125,
        }
    }

    /// Input data: integers in -9..=9, or multiples of 1/8 in [-4, 4]. With
    /// the scalars of [`Gen::scalar`] (multiples of 1/8, at most 3.125 in
    /// magnitude) every value a graph computes is exact in f32: one product
    /// is a multiple of 1/64 below 16 in magnitude, and a sum of at most [`MAX_NUMEL`]
    /// of them needs 20 bits of mantissa — 23 after a `SCAN` along an axis
    /// of at most [`MAX_TARGET_DIM`] — so no evaluator rounds.
    fn data(&mut self, n: usize) -> Vec<f64> {
        let data = &mut self.data;
        (0..n)
            .map(|_| match (self.dtype, self.spread) {
                (DType::I32, _) => data.below(19) as f64 - 9.0,
                (_, None) => (data.below(65) as f64 - 32.0) / 8.0,
                (dt, Some(r)) => {
                    let unit = (data.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                    dt.round((2.0 * unit - 1.0) * r)
                }
            })
            .collect()
    }

    // --- the graph ---------------------------------------------------------

    /// The shape of the element-wise op: rank 1 to 4, each axis at most
    /// [`MAX_TARGET_DIM`], at most [`MAX_TARGET_NUMEL`] elements.
    fn target_shape(&mut self) -> Vec<usize> {
        let rank = self.range(1, MAX_RANK);
        let mut t: Vec<usize> = (0..rank).map(|_| self.range(1, MAX_TARGET_DIM)).collect();
        while numel(&t) > MAX_TARGET_NUMEL {
            let k = self.below(rank);
            t[k] = t[k].div_ceil(2);
        }
        t
    }

    fn graph(&mut self, g: &mut Graph) -> Result<(), String> {
        let t = self.target_shape();
        let rank = t.len();
        let a = self.operand(g, "a", &t)?;
        let b = match self.weighted(&[7, 2, 2]) {
            0 => self.operand(g, "b", &t)?,
            1 => self.broadcast_constant(g, &t)?,
            _ => self.shifted(g, a, &t)?,
        };
        let err = |e: crate::Diagnostic| format!("the builder rejects an element-wise op: {e}");
        let mut y = if self.chance(0.2) {
            let c = g.binary(BinaryOp::Cmplt, a, b).map_err(err)?;
            if self.chance(0.5) { g.where_(c, a, b) } else { g.where_(c, b, a) }.map_err(err)?
        } else {
            let op = self.pick(&[BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Max, BinaryOp::Min]);
            g.binary(op, a, b).map_err(err)?
        };
        if self.non_scop && self.chance(0.2) {
            let op = self.pick(&[ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min]);
            let (axis, exclusive, reverse) = (self.below(rank), self.chance(0.3), self.chance(0.3));
            y = g
                .scan(y, op, axis, exclusive, reverse)
                .map_err(|e| format!("the builder rejects SCAN along {axis}: {e}"))?;
        }
        if self.chance(0.65) {
            let op = self.pick(&[ReduceOp::Sum, ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min]);
            let mut axes = if self.chance(0.1) { self.permutation(rank) } else { self.subset(rank) };
            if self.chance(0.5) {
                axes.sort_unstable();
            }
            y = g.reduce(op, y, &axes, self.dtype).map_err(|e| format!("the builder rejects REDUCE {axes:?}: {e}"))?;
            let want: Vec<usize> = (0..rank).filter(|k| !axes.contains(k)).map(|k| t[k]).collect();
            if shape_of(g, y) != want {
                return Err(format!("REDUCE {axes:?} of {t:?} infers {:?}, not {want:?}", shape_of(g, y)));
            }
        }
        if self.chance(0.5) {
            let len = self.range(1, 3);
            y = self.tail(g, y, len)?;
        }
        g.outputs.push(Output { name: "out".into(), node: y });
        if self.chance(0.2) {
            g.outputs.push(Output { name: "aux".into(), node: a });
        }
        Ok(())
    }

    /// An `INPUT` and a chain of 1 to 5 movement ops ending in shape `t`.
    fn operand(&mut self, g: &mut Graph, name: &str, t: &[usize]) -> Result<NodeId, String> {
        let len = self.range(1, 5);
        let (shape, moves) = self.chain_to(t, len);
        let mut x = g.input(name, self.dtype, &dims(&shape)).map_err(|e| format!("INPUT {shape:?}: {e}"))?;
        let data = self.data(numel(&shape));
        self.inputs.push(data);
        for m in &moves {
            // A GATHER's index is an input made after those before it.
            if let Move::Gather { values, .. } = m {
                self.inputs.push(values.clone());
            }
            x = m.build(g, x)?;
        }
        Ok(x)
    }

    /// `CONST` → `RESHAPE [1, …]` → `EXPAND t`.
    fn broadcast_constant(&mut self, g: &mut Graph, t: &[usize]) -> Result<NodeId, String> {
        let v = self.scalar();
        let c = g.constant(v, self.dtype).map_err(|e| format!("CONST {v}: {e}"))?;
        let ones = Move::Reshape(vec![1; t.len()]);
        let x = ones.build(g, c)?;
        Move::Expand(t.to_vec()).build(g, x)
    }

    /// `a` read again at a shifted, maybe flipped index, so that the binary op
    /// combines neighbours as a stencil does: `PAD` every axis by one on both
    /// sides, `SHRINK` back to `t` at offsets 0 to 2.
    fn shifted(&mut self, g: &mut Graph, a: NodeId, t: &[usize]) -> Result<NodeId, String> {
        let mut x = a;
        if self.chance(0.5) {
            x = Move::Flip(self.subset(t.len())).build(g, x)?;
        }
        x = Move::Pad(vec![(1, 1); t.len()], self.scalar()).build(g, x)?;
        let lo: Vec<usize> = t.iter().map(|_| self.range(0, 2)).collect();
        let hi = lo.iter().zip(t).map(|(l, d)| l + d).collect();
        Move::Shrink { lo, hi, step: vec![1; t.len()] }.build(g, x)
    }

    /// `len` movement steps (a step may be two ops) whose result has shape
    /// `out`, drawn backwards; returns the input shape and the moves in
    /// program order.
    fn chain_to(&mut self, out: &[usize], len: usize) -> (Vec<usize>, Vec<Move>) {
        let mut cur = out.to_vec();
        let mut moves: Vec<Move> = Vec::new();
        let (mut made, mut tries) = (0, 0);
        while made < len && tries < 100 {
            tries += 1;
            if let Some((input, step)) = self.step_back(&cur) {
                if fits(&input) {
                    moves.splice(0..0, step);
                    cur = input;
                    made += 1;
                }
            }
        }
        (cur, moves)
    }

    /// A random step whose result has shape `out`: the input shape it needs
    /// and its moves in program order; `None` when the drawn op cannot make
    /// `out`.
    fn step_back(&mut self, out: &[usize]) -> Option<(Vec<usize>, Vec<Move>)> {
        let r = out.len();
        // RESHAPE, PERMUTE, EXPAND, broadcast, PAD, SHRINK, FLIP, window,
        // upsample, general affine VIEW, tile / repeat_interleave, reflect /
        // edge pad, GATHER.
        let step = match self.weighted(&[2, 2, 1, 1, 2, 2, 1, 2, 1, 1, 1, 1, 1]) {
            0 => (self.shape_with_numel(numel(out)), vec![Move::Reshape(out.to_vec())]),
            1 => {
                let perm = self.permutation(r);
                let mut input = vec![0; r];
                for (k, &p) in perm.iter().enumerate() {
                    input[p] = out[k];
                }
                (input, vec![Move::Permute(perm)])
            }
            2 => {
                let wide: Vec<usize> = (0..r).filter(|&k| out[k] > 1).collect();
                if wide.is_empty() {
                    return None;
                }
                let mut input = out.to_vec();
                for j in self.subset(wide.len()) {
                    input[wide[j]] = 1;
                }
                (input, vec![Move::Expand(out.to_vec())])
            }
            3 => {
                // Broadcasting as the frontend writes it: drop axes, put them
                // back as 1-axes with RESHAPE, EXPAND them.
                let axes = self.subset(r);
                let unit: Vec<usize> = (0..r).map(|k| if axes.contains(&k) { 1 } else { out[k] }).collect();
                let mut input: Vec<usize> = (0..r).filter(|k| !axes.contains(k)).map(|k| out[k]).collect();
                if input.is_empty() {
                    input.push(1);
                }
                (input, vec![Move::Reshape(unit), Move::Expand(out.to_vec())])
            }
            4 => {
                let mut pads = Vec::new();
                for &d in out {
                    let lo = self.below(d.min(3));
                    let hi = self.below((d - lo).min(3));
                    pads.push((lo, hi));
                }
                let input = out.iter().zip(&pads).map(|(d, (lo, hi))| d - lo - hi).collect();
                (input, vec![Move::Pad(pads, self.scalar())])
            }
            5 => {
                let (mut lo, mut hi, mut step, mut input) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
                for &n in out {
                    let s = if self.chance(0.5) { 1 } else { self.range(2, 3) };
                    let l = self.range(0, 2);
                    // (hi - lo) / s rounded up is n for any hi in this range.
                    let h = l + (n - 1) * s + 1 + self.below(s);
                    lo.push(l);
                    hi.push(h);
                    step.push(s);
                    input.push(h + self.range(0, 2));
                }
                (input, vec![Move::Shrink { lo, hi, step }])
            }
            6 => (out.to_vec(), vec![Move::Flip(self.subset(r))]),
            7 if r >= 2 => {
                let b = self.below(r);
                let a = (b + 1 + self.below(r - 1)) % r;
                let (stride, dil, offset) = (self.range(1, 3), self.range(1, 2), self.range(0, 1));
                let mut input: Vec<usize> = (0..r).filter(|&j| j != b).map(|j| out[j]).collect();
                let ai = if a < b { a } else { a - 1 };
                input[ai] = offset + (out[a] - 1) * stride + (out[b] - 1) * dil + 1 + self.below(stride);
                (input, vec![Move::View(out.to_vec(), window_map(r, a, b, stride, dil, offset))])
            }
            8 => {
                let k = self.below(r);
                let factor = self.range(2, 3);
                let offset = self.below(factor);
                let mut input = out.to_vec();
                input[k] = (out[k] - 1 + offset) / factor + 1 + self.range(0, 1);
                (input, vec![Move::View(out.to_vec(), upsample_map(r, k, factor, offset))])
            }
            9 => {
                let map: Vec<AffExpr> = (0..self.range(1, MAX_RANK)).map(|_| self.affine_expr(r)).collect();
                let last: Vec<i64> = out.iter().map(|&d| d as i64 - 1).collect();
                let mut input = Vec::new();
                for e in &map {
                    // Every coefficient is non-negative: the largest index
                    // read is at the last output index.
                    let hi = e.eval(&last, &|_| None).expect("a concrete map");
                    input.push(hi as usize + 1 + self.range(0, 1));
                }
                (input, vec![Move::View(out.to_vec(), map)])
            }
            10 => {
                // The frontend's `tile` (whole copies along axis k) or
                // `repeat_interleave` (each element repeated in place):
                // RESHAPE inserting a 1-axis beside k, EXPAND it to r,
                // RESHAPE merging it into k.
                let k = self.below(r);
                let rs: Vec<usize> = (2..=out[k]).filter(|&f| out[k].is_multiple_of(f)).collect();
                if rs.is_empty() {
                    return None;
                }
                let reps = self.pick(&rs);
                let d = out[k] / reps;
                let mut input = out.to_vec();
                input[k] = d;
                let (pair_one, pair_wide) = if self.chance(0.5) { ([1, d], [reps, d]) } else { ([d, 1], [d, reps]) };
                let split = |pair: [usize; 2]| -> Vec<usize> {
                    out[..k].iter().copied().chain(pair).chain(out[k + 1..].iter().copied()).collect()
                };
                (
                    input,
                    vec![Move::Reshape(split(pair_one)), Move::Expand(split(pair_wide)), Move::Reshape(out.to_vec())],
                )
            }
            11 => {
                // `reflect` needs each pad below the input's size, `edge` an
                // input of at least one element.
                let mode = if self.chance(0.5) { PadMode::Reflect } else { PadMode::Edge };
                let mut pads = Vec::with_capacity(r);
                for &d in out {
                    let (lo, hi) = (self.below(3), self.below(3));
                    let fits = match mode {
                        PadMode::Reflect => d > lo + hi + lo.max(hi),
                        _ => d > lo + hi,
                    };
                    pads.push(if fits && self.chance(0.6) { (lo, hi) } else { (0, 0) });
                }
                if pads.iter().all(|&p| p == (0, 0)) {
                    return None;
                }
                let input = out.iter().zip(&pads).map(|(d, (lo, hi))| d - lo - hi).collect();
                (input, vec![Move::BorderPad(pads, mode)])
            }
            12 if self.non_scop => {
                // Index values in -(d + 2)..=d + 2: negative ones and ones
                // beyond either end (clamped) among them.
                let axis = self.below(r);
                let d = self.range(1, 5);
                let mut input = out.to_vec();
                input[axis] = d;
                if !fits(&input) {
                    return None;
                }
                let span = 2 * d + 5;
                let values = (0..numel(out)).map(|_| self.data.below(span) as f64 - (d + 2) as f64).collect();
                self.gathers += 1;
                let name = format!("idx{}", self.gathers);
                (input, vec![Move::Gather { axis, name, shape: out.to_vec(), values }])
            }
            _ => return None,
        };
        Some(step)
    }

    /// A random index expression over `rank` output axes with coefficients
    /// 0 to 2 (so an output axis may be read by several input axes, or by
    /// none: a broadcast), a constant 0 or 1, sometimes floor-divided.
    fn affine_expr(&mut self, rank: usize) -> AffExpr {
        let mut e = AffExpr::int(self.range(0, 1) as i64);
        for j in 0..rank {
            let c = self.weighted(&[3, 2, 1]);
            e = &e + &AffExpr::var(j as u32).scale(&int(c));
        }
        if self.chance(0.3) {
            e = e.floordiv(&int(self.range(2, 3)), &|_| None).expect("the divisor is positive");
        }
        e
    }

    /// `len` movement ops after `x`, drawn forwards.
    fn tail(&mut self, g: &mut Graph, mut x: NodeId, len: usize) -> Result<NodeId, String> {
        let (mut made, mut tries) = (0, 0);
        while made < len && tries < 100 {
            tries += 1;
            let shape = shape_of(g, x);
            if let Some(m) = self.step_forward(&shape) {
                if fits(&m.out_shape(&shape)) {
                    x = m.build(g, x)?;
                    made += 1;
                }
            }
        }
        Ok(x)
    }

    /// A random move applicable to a value of shape `x`, or `None` when the
    /// drawn op does not apply. A rank-0 value (a full reduction) is only
    /// reshaped.
    fn step_forward(&mut self, x: &[usize]) -> Option<Move> {
        let r = x.len();
        if r == 0 {
            let rank = self.range(1, MAX_RANK);
            return Some(Move::Reshape(vec![1; rank]));
        }
        Some(match self.below(8) {
            0 => Move::Reshape(self.shape_with_numel(numel(x))),
            1 => Move::Permute(self.permutation(r)),
            2 => {
                let unit: Vec<usize> = (0..r).filter(|&k| x[k] == 1).collect();
                if unit.is_empty() {
                    return None;
                }
                let mut to = x.to_vec();
                for k in unit {
                    to[k] = self.range(1, 4);
                }
                Move::Expand(to)
            }
            3 => Move::Pad((0..r).map(|_| (self.range(0, 2), self.range(0, 2))).collect(), self.scalar()),
            4 => {
                let (mut lo, mut hi, mut step) = (Vec::new(), Vec::new(), Vec::new());
                for &d in x {
                    let l = self.below(d);
                    lo.push(l);
                    hi.push(self.range(l + 1, d));
                    step.push(if self.chance(0.5) { 1 } else { self.range(2, 3) });
                }
                Move::Shrink { lo, hi, step }
            }
            5 => Move::Flip(self.subset(r)),
            6 if r < MAX_RANK => {
                let ai = self.below(r);
                let d = x[ai];
                let offset = self.range(0, (d - 1).min(1));
                let dil = self.range(1, 2);
                let kernel = self.range(1, ((d - 1 - offset) / dil + 1).min(4));
                let stride = self.range(1, 3);
                let positions = (d - offset - (kernel - 1) * dil - 1) / stride + 1;
                let b = self.range(0, r);
                let a = if ai < b { ai } else { ai + 1 };
                let mut to = x.to_vec();
                to[ai] = positions;
                to.insert(b, kernel);
                Move::View(to, window_map(r + 1, a, b, stride, dil, offset))
            }
            7 => {
                let k = self.below(r);
                let factor = self.range(2, 3);
                let offset = self.below(factor);
                let mut to = x.to_vec();
                to[k] = self.range(1, x[k] * factor - offset);
                Move::View(to, upsample_map(r, k, factor, offset))
            }
            _ => return None,
        })
    }
}

/// The seed and the case indices of a run: `TGC_PROP_SEED` (else
/// `default_seed`), and `TGC_PROP_CASE` (that one case, to replay it) or
/// `TGC_PROP_CASES` cases (else `default_cases`). Values are decimal or
/// `0x` hex.
pub fn seed_and_cases(default_seed: u64, default_cases: u64) -> (u64, Vec<u64>) {
    let seed = env_u64("TGC_PROP_SEED").unwrap_or(default_seed);
    let cases = match env_u64("TGC_PROP_CASE") {
        Some(i) => vec![i],
        None => (0..env_u64("TGC_PROP_CASES").unwrap_or(default_cases)).collect(),
    };
    (seed, cases)
}

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    let parsed = match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => v.parse(),
    };
    Some(parsed.unwrap_or_else(|e| panic!("{name}={v} is not an integer: {e}")))
}

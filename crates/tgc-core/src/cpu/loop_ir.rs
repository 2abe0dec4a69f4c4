//! The CPU loop-nest IR: what the C and Rust printers (`emit::c`,
//! `emit::rust`) print, one kernel per materialised value.
//!
//! A kernel is a nest of loops `i0..i{r-1}` over its root's shape — perfect,
//! or strip-mined by run-time tile sizes ([`Strip`], [`Kernel::nest`]) —
//! whose point optionally contains an accumulator initialised to the
//! `REDUCE` identity and reduce loops `i{r}..` that update it, then one
//! store of a scalar expression to `out[Σ i_k·stride_k]` (row-major).
//!
//! Invariants (established by [`super::from_tiny::lower`]):
//! - loop extents, subscripts and guards are affine (+ floordiv) over the
//!   loop variables, with [`Dim`] coefficients whose symbols are read from
//!   the `dims` array at run time; every subscript is in bounds once
//!   [`Program::checks`] hold;
//! - values are computed in a compute type: `f32` for f16/bf16/f32 (f16 and
//!   bf16 are storage, converted on load and store, and rounded at a `CAST`),
//!   `i32` for i32 (wrapping arithmetic), `u8`/`bool` for bool;
//! - an accumulator has the `REDUCE`'s dtype, held in its compute type: the
//!   update combines it with [`Reduction::value`] (already cast to that
//!   dtype) without rounding, and reading it ([`Expr::Acc`]) rounds it to the
//!   dtype — a no-op but for f16/bf16 (the interpreter's rule: accumulate
//!   wide, round the result);
//! - `MAX`, `MIN` (binary and reduce) propagate NaN; `RELU` is `x < 0 ? 0 : x`;
//! - a kernel never reads the buffer it writes, and reads only buffers that
//!   are inputs or written by earlier kernels;
//! - an [`Expr::Reduce`] (a producer computed at its reads, `003`'s
//!   consumer-driven nest) occurs only in a kernel's [`Reduction::value`],
//!   never inside another `Reduce`; its loop variables are numbered after
//!   every other variable of the kernel, its `id`s are distinct within the
//!   kernel, and its `guard` is the conjunction of the [`Expr::Select`]
//!   conditions it is under — printers hoist it to a statement that runs,
//!   under that guard, before the accumulator's update;
//! - a kernel's [`Strip`]s (strip-mining, `003`'s symbolic tiles; added by
//!   [`super::tile::strip_mine`]) name distinct output loops in increasing
//!   order and tile sizes in [`Program::tiles`]; they change only the order
//!   in which output points are visited ([`Kernel::nest`]), never what a
//!   point computes or the order of its reduction, so a tiled kernel's
//!   results are bit-identical to the untiled kernel's for every tile size;
//! - in a [`Kernel::nest`], a full tile's point loop runs `io..io + T` with
//!   no `min` and no guard; the one partial tile of an axis runs
//!   `floor(E/T)*T..E` (empty when `T` divides `E`);
//! - a [`Kernel::packed`] schedule, like strips, changes the order in which
//!   output points are computed and nothing else: each accumulator still
//!   folds its values in the reduce loops' order, so printers give the
//!   plain nest's bits;
//! - a reduction split into [`Kernel::lanes`] accumulators folds its values
//!   in the order of [`super::lanes`]'s rule, which depends on nothing but
//!   the reduce loops, so strips do not change its bits either;
//! - a [`Scan`] kernel (a `SCAN` root) folds, per point of its other
//!   loops, the values along its scanned loop in [`SCAN_BLOCK`]-point
//!   blocks: each block from the identity, its points stored as the
//!   combination of the blocks before it (the carry) with the block's own
//!   prefix, `carry ⊕ local` (a float `SUM` or `PROD` folds a block in
//!   groups of [`SCAN_LANES`] points in registers, [`Scan::grouped`]). The
//!   blocks and groups depend on the extent alone, so the
//!   bits do not depend on how many threads run them; it is never
//!   strip-mined, packed, split into lanes or put in a row group;
//! - a [`RowGroup`] runs its kernels row by row, which keeps every
//!   dependence between them ([`super::rows`]), so its bits are those of
//!   the kernels run one after the other.

use std::collections::BTreeSet;

use crate::affine::{AffAtom, AffExpr};
use crate::index_book::Constr;
use crate::sym::{Atom, Dim};
use crate::tiny::{BinaryOp, Constraint, NodeId, ReduceOp, UnaryOp};
use crate::DType;

/// Index of a [`Buffer`] in [`Program::buffers`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufId(pub u32);

/// Where a buffer comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// `inputs[k]` of the generated function.
    Input(usize),
    /// `outputs[k]` of the generated function.
    Output(usize),
    /// Allocated and freed by the generated function.
    Temp,
}

/// A dense row-major buffer.
#[derive(Clone, Debug, PartialEq)]
pub struct Buffer {
    /// Identifier in generated code: `in<k>`, `out<k>`, `tmp<k>`.
    pub name: String,
    /// What it holds, for comments: an input or output name, or a node label.
    pub label: String,
    pub dtype: DType,
    pub shape: Vec<Dim>,
    pub role: Role,
}

/// A scalar expression over the loop variables.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// `buf[index]`, converted from storage to the compute type.
    Load {
        buf: BufId,
        index: AffExpr,
        dtype: DType,
    },
    /// `buf[base + stride·p]` with `p = gather_position(at, extent)`
    /// ([`crate::tiny::op::gather_position`]): a `GATHER`'s read, at a
    /// position its `i32` operand `at` gives. `stride` and `extent` are
    /// constant expressions (the gathered axis's row-major stride and size).
    Gather {
        buf: BufId,
        base: AffExpr,
        stride: AffExpr,
        extent: AffExpr,
        at: Box<Expr>,
        dtype: DType,
    },
    /// A literal, already rounded to `dtype`.
    Const {
        value: f64,
        dtype: DType,
    },
    /// The kernel's accumulator, rounded to `dtype`.
    Acc {
        dtype: DType,
    },
    Unary {
        op: UnaryOp,
        x: Box<Expr>,
    },
    Binary {
        op: BinaryOp,
        a: Box<Expr>,
        b: Box<Expr>,
    },
    /// Conversion to `to` (Tiny `CAST` semantics, `tiny::Op::Cast`).
    Cast {
        to: DType,
        x: Box<Expr>,
    },
    Where {
        cond: Box<Expr>,
        a: Box<Expr>,
        b: Box<Expr>,
    },
    /// `then` where every constraint holds, else `otherwise` (a `PAD` piece);
    /// `then` is evaluated only where the constraints hold.
    Select {
        valid: Vec<Constr>,
        then: Box<Expr>,
        otherwise: Box<Expr>,
    },
    /// A reduction re-run at this point (a `REDUCE` computed at its reader,
    /// [`crate::region::How::ComputeAt`]): `r = identity; for i{first}..
    /// { r = op(r, value) }`, read rounded to `dtype`. Printed as local
    /// `acc<id>`.
    Reduce {
        id: u32,
        /// The `REDUCE` node.
        node: NodeId,
        op: ReduceOp,
        dtype: DType,
        /// Index of its first loop variable.
        first: u32,
        /// Extents of its loops `i{first}, i{first+1}, …`.
        loops: Vec<Dim>,
        /// Where it is needed (outside, its value is not used).
        guard: Vec<Constr>,
        /// The reduced value at the current point, of dtype `dtype`.
        value: Box<Expr>,
    },
}

impl Expr {
    /// The Tiny dtype of the value (its compute type follows from it).
    pub fn dtype(&self) -> DType {
        match self {
            Expr::Load { dtype, .. }
            | Expr::Gather { dtype, .. }
            | Expr::Const { dtype, .. }
            | Expr::Acc { dtype }
            | Expr::Reduce { dtype, .. } => *dtype,
            Expr::Unary { x, .. } => x.dtype(),
            Expr::Binary { op: BinaryOp::Cmplt | BinaryOp::Cmpeq, .. } => DType::Bool,
            Expr::Binary { a, .. } => a.dtype(),
            Expr::Cast { to, .. } => *to,
            Expr::Where { a, .. } => a.dtype(),
            Expr::Select { then, .. } => then.dtype(),
        }
    }

    /// Calls `f` on this expression and every sub-expression, parents first.
    pub fn walk<'a>(&'a self, f: &mut dyn FnMut(&'a Expr)) {
        f(self);
        match self {
            Expr::Load { .. } | Expr::Const { .. } | Expr::Acc { .. } => {}
            Expr::Unary { x, .. }
            | Expr::Cast { x, .. }
            | Expr::Reduce { value: x, .. }
            | Expr::Gather { at: x, .. } => x.walk(f),
            Expr::Binary { a, b, .. } => {
                a.walk(f);
                b.walk(f);
            }
            Expr::Where { cond, a, b } => {
                cond.walk(f);
                a.walk(f);
                b.walk(f);
            }
            Expr::Select { then, otherwise, .. } => {
                then.walk(f);
                otherwise.walk(f);
            }
        }
    }
}

/// The reduction of a kernel: `acc = identity; for i{r}.. { acc = op(acc, value) }`.
#[derive(Clone, Debug, PartialEq)]
pub struct Reduction {
    /// The `REDUCE` node.
    pub node: NodeId,
    pub op: ReduceOp,
    /// The accumulator's dtype.
    pub dtype: DType,
    /// Extents of the reduce loops `i{r}, i{r+1}, …`.
    pub loops: Vec<Dim>,
    /// The reduced value at the current point, of dtype `dtype`.
    pub value: Expr,
}

/// The points of one block of a [`Scan`]'s order: a block is folded from
/// the identity, then combined with the carry of the blocks before it
/// (the reduce-then-scan order of a parallel scan: block totals, a scan of
/// the totals, then each block again from its carry; Merrill & Garland,
/// "Single-pass Parallel Prefix Scan with Decoupled Look-back", 2016, §2).
/// 4096 f32 points are 16 KiB, half an L1 data cache, so the second pass
/// over a block finds it in cache.
pub const SCAN_BLOCK: i64 = 4096;

/// Points of a block that a float `SUM` or `PROD` scan folds as one group
/// in registers: the group's inclusive prefix by Hillis & Steele's steps
/// (`s ← s ⊕ s` shifted up by 1, 2, then 4 points, the identity — `-0.0`
/// for a sum, which adds nothing — shifted in), then each point combined
/// with the block's running value `acc` (`s[l] ⊕ acc`), `acc` becoming
/// the group's last point; the block's last `len mod 8` points are folded
/// one by one. The other scans fold every point one by one.
pub const SCAN_LANES: usize = 8;

/// A kernel's scan ([`crate::tiny::Op::Scan`]): along output loop `axis`,
/// in the block order of the module's invariants; [`Kernel::value`] is the
/// value folded in at the current point, of dtype `dtype`, and the store
/// writes the running combination rounded to `dtype`, after the point's
/// value is folded in or, when `exclusive`, before. A reverse scan is a
/// forward one over reversed subscripts: its loop `i` reads and stores the
/// axis's point `E - 1 - i`.
#[derive(Clone, Debug, PartialEq)]
pub struct Scan {
    /// The `SCAN` node.
    pub node: NodeId,
    pub op: ReduceOp,
    /// The accumulator's dtype (the output's).
    pub dtype: DType,
    /// The scanned output loop.
    pub axis: usize,
    pub exclusive: bool,
}

impl Scan {
    /// Whether the scan folds its blocks in groups of [`SCAN_LANES`]
    /// points in registers: a `SUM` or `PROD` of floats.
    pub fn grouped(&self) -> bool {
        self.neutral().is_some()
    }

    /// For a grouped scan, what the first block's points are combined with
    /// in place of a carry, so that every block stores `carry ⊕ v` without
    /// a branch: a value that changes no `v` to the bit (`-0.0` for a sum:
    /// `-0.0 + v` is `v` for every `v`, `+0.0` included; 1 for a product).
    /// `None` for the scans folded point by point.
    pub fn neutral(&self) -> Option<f64> {
        match self.op {
            _ if !self.dtype.is_float() => None,
            ReduceOp::Sum => Some(-0.0),
            ReduceOp::Prod => Some(1.0),
            ReduceOp::Max | ReduceOp::Min => None,
        }
    }
}

/// One loop nest.
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    /// Identifier suffix: `k<n>`.
    pub name: String,
    /// The Tiny nodes it computes in place: the root, then the nodes inlined
    /// into it, latest first (not a fused `REDUCE`, see [`Reduction::node`]).
    pub nodes: Vec<NodeId>,
    /// Extents of the output loops `i0..i{r-1}`.
    pub loops: Vec<Dim>,
    pub reduce: Option<Reduction>,
    /// The kernel's scan (then `reduce` is `None`).
    pub scan: Option<Scan>,
    pub out: BufId,
    /// Row-major subscript of the store.
    pub store_index: AffExpr,
    /// The stored value, of the output buffer's dtype.
    pub value: Expr,
    /// Output loops strip-mined by run-time tile sizes, by increasing axis
    /// (empty: the plain nest).
    pub strips: Vec<Strip>,
    /// The packed contraction schedule ([`super::packed`]) when the kernel
    /// has its form and was planned for it; `None`: the plain nest.
    pub packed: Option<super::packed::Packed>,
    /// Partial accumulators of the reduction on the CPU ([`super::lanes`]):
    /// 1 for the nest's order, else the split order of that module's rule.
    /// The SIMT printer has its own order (warp lanes) and ignores it.
    pub lanes: usize,
}

/// Output loop `axis` (extent `E`) strip-mined by the run-time tile size
/// `tile` (`T`, a name of [`Program::tiles`]): full tiles `io = 0, T, …`
/// below `floor(E/T)*T`, then one partial tile (`003`: strip-mining at code
/// generation, not in the polyhedral model).
#[derive(Clone, Debug, PartialEq)]
pub struct Strip {
    pub axis: usize,
    pub tile: String,
}

/// One loop of a printed nest: `for var = lo; var < hi; var += step`.
#[derive(Clone, Debug, PartialEq)]
pub struct Loop {
    /// Printed `i{var}`: an output loop's index, or a tile-start variable
    /// numbered after every variable of the kernel.
    pub var: u32,
    pub lo: AffExpr,
    /// Exclusive upper bound.
    pub hi: AffExpr,
    /// 1, or a tile size for a tile loop.
    pub step: Dim,
}

/// The output loops of a kernel as printers print them ([`Kernel::nest`]).
#[derive(Clone, Debug, PartialEq)]
pub enum Nest {
    Loop(Loop, Box<Nest>),
    /// These nests, one after the other (full tiles, then the partial tile).
    Seq(Vec<Nest>),
    /// One output point: the reduction (if any) and the store at `i0..`.
    Point,
}

impl Kernel {
    /// The [`Expr::Reduce`]s of the kernel, in the order their values are
    /// needed (the order of [`Expr::walk`] over the reduction's value).
    pub fn computed_at(&self) -> Vec<&Expr> {
        let mut out = Vec::new();
        if let Some(r) = &self.reduce {
            collect_reduces(&r.value, &mut out);
        }
        out
    }

    /// Every load of the kernel (its value, its reduction, the reductions
    /// computed at its reads) as `(buffer, subscript)`, in walk order.
    pub fn loads(&self) -> Vec<(BufId, &AffExpr)> {
        let mut out = Vec::new();
        self.walk(&mut |e| {
            if let Expr::Load { buf, index, .. } = e {
                out.push((*buf, index));
            }
        });
        out
    }

    /// [`Expr::walk`] over the stored value, then the reduction's value.
    fn walk<'a>(&'a self, f: &mut dyn FnMut(&'a Expr)) {
        self.value.walk(f);
        if let Some(r) = &self.reduce {
            r.value.walk(f);
        }
    }

    /// The buffers the kernel reads at a gathered position
    /// ([`Expr::Gather`]), in walk order.
    pub fn gathers(&self) -> Vec<BufId> {
        let mut out = Vec::new();
        self.walk(&mut |e| {
            if let Expr::Gather { buf, .. } = e {
                out.push(*buf);
            }
        });
        out
    }

    /// Buffers the kernel loads or gathers from, in id order.
    pub fn reads(&self) -> Vec<BufId> {
        let set: BTreeSet<BufId> = self.loads().into_iter().map(|(b, _)| b).chain(self.gathers()).collect();
        set.into_iter().collect()
    }

    /// The extent of loop variable `i{v}`: an output loop, a loop of the
    /// reduction, or a loop of a reduction computed at its reads; `None`
    /// when no loop of the kernel is `i{v}`.
    pub fn extent(&self, v: usize) -> Option<&Dim> {
        if let Some(d) = self.loops.get(v) {
            return Some(d);
        }
        let r = self.reduce.as_ref()?;
        if let Some(d) = r.loops.get(v - self.loops.len()) {
            return Some(d);
        }
        self.computed_at().into_iter().find_map(|e| match e {
            Expr::Reduce { first, loops, .. } => loops.get(v.checked_sub(*first as usize)?),
            _ => None,
        })
    }

    /// The first loop-variable number no loop of the kernel uses (tile-start
    /// variables of [`Kernel::nest`] are numbered from it).
    pub fn free_var(&self) -> u32 {
        let mut n = self.loops.len() + self.reduce.as_ref().map_or(0, |r| r.loops.len());
        for e in self.computed_at() {
            if let Expr::Reduce { first, loops, .. } = e {
                n = n.max(*first as usize + loops.len());
            }
        }
        n as u32
    }

    /// The output loops as printed. Without strips: `for i_v in 0..E_v`, in
    /// order. With strips on axes `a_0 < a_1 < …`: the loops before `a_0`,
    /// then for each strip (outermost first) its full tiles `for io in
    /// (0..floor(E/T)*T).step_by(T)` followed by its partial tile, and
    /// inside the last strip the remaining output loops in order — a
    /// strip-mined axis scanning `io..io + T` in a full tile and
    /// `floor(E/T)*T..E` in the partial one. Every output point is visited
    /// exactly once.
    pub fn nest(&self) -> Nest {
        let first = self.strips.first().map_or(self.loops.len(), |s| s.axis);
        let mut ranges = Vec::new();
        let inner = self.tiles(0, &mut ranges);
        (0..first).rev().fold(inner, |body, v| {
            Nest::Loop(
                Loop {
                    var: v as u32,
                    lo: AffExpr::int(0),
                    hi: AffExpr::constant(self.loops[v].clone()),
                    step: Dim::int(1),
                },
                Box::new(body),
            )
        })
    }

    /// Strips `j..` around the point loops, the strips before `j` having
    /// chosen `ranges` for their axes.
    fn tiles(&self, j: usize, ranges: &mut Vec<(AffExpr, AffExpr)>) -> Nest {
        let Some(s) = self.strips.get(j) else { return self.points(ranges) };
        let e = &self.loops[s.axis];
        let t = Dim::sym(&s.tile);
        let full_end = &e.floordiv(&t).unwrap_or_else(|| Dim::int(0)) * &t;
        let io = self.free_var() + j as u32;
        ranges.push((AffExpr::var(io), &AffExpr::var(io) + &AffExpr::constant(t.clone())));
        let full = self.tiles(j + 1, ranges);
        ranges.pop();
        ranges.push((AffExpr::constant(full_end.clone()), AffExpr::constant(e.clone())));
        let partial = self.tiles(j + 1, ranges);
        ranges.pop();
        let tile_loop = Loop { var: io, lo: AffExpr::int(0), hi: AffExpr::constant(full_end), step: t };
        Nest::Seq(vec![Nest::Loop(tile_loop, Box::new(full)), partial])
    }

    /// The output loops from the first strip's axis on, strip-mined axes
    /// scanning `ranges` (one per strip).
    fn points(&self, ranges: &[(AffExpr, AffExpr)]) -> Nest {
        let first = self.strips.first().map_or(self.loops.len(), |s| s.axis);
        (first..self.loops.len()).rev().fold(Nest::Point, |body, v| {
            let (lo, hi) = match self.strips.iter().position(|s| s.axis == v) {
                Some(j) => ranges[j].clone(),
                None => (AffExpr::int(0), AffExpr::constant(self.loops[v].clone())),
            };
            Nest::Loop(Loop { var: v as u32, lo, hi, step: Dim::int(1) }, Box::new(body))
        })
    }

    /// Every symbol the kernel's extents, subscripts and guards mention,
    /// and its tile sizes.
    pub fn symbols(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        out.extend(self.strips.iter().map(|s| s.tile.clone()));
        let loops = self.loops.iter().chain(self.reduce.iter().flat_map(|r| &r.loops));
        for d in loops {
            out.extend(d.symbols());
        }
        aff_symbols(&self.store_index, &mut out);
        let mut visit = |e: &Expr| match e {
            Expr::Load { index, .. } => aff_symbols(index, &mut out),
            Expr::Gather { base, stride, extent, .. } => {
                [base, stride, extent].into_iter().for_each(|a| aff_symbols(a, &mut out))
            }
            Expr::Select { valid, .. } => valid.iter().for_each(|c| aff_symbols(&c.expr, &mut out)),
            Expr::Reduce { loops, guard, .. } => {
                loops.iter().for_each(|d| out.extend(d.symbols()));
                guard.iter().for_each(|c| aff_symbols(&c.expr, &mut out));
            }
            _ => {}
        };
        self.value.walk(&mut visit);
        if let Some(r) = &self.reduce {
            r.value.walk(&mut visit);
        }
        out
    }
}

/// A whole graph as loop nests.
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    /// The graph's name.
    pub name: String,
    /// Symbol names, in the order of the `dims` array.
    pub symbols: Vec<String>,
    /// Run-time tile sizes ([`Strip::tile`]), read from `dims` after the
    /// symbols: `dims[symbols.len() + j]` is `tiles[j]`. Empty unless
    /// [`super::tile::strip_mine`] ran.
    pub tiles: Vec<String>,
    /// Facts the sizes must satisfy, checked in order before anything runs:
    /// every symbol ≥ 1, every divisor ≥ 1, the graph's undecided shape
    /// constraints, every buffer and loop extent ≥ 1.
    pub checks: Vec<Constraint>,
    pub buffers: Vec<Buffer>,
    pub kernels: Vec<Kernel>,
    /// Runs of kernels printed as one nest over their shared outermost
    /// loop ([`super::rows`]), in order, disjoint; empty unless
    /// [`super::rows::plan`] ran. Printers may ignore them.
    pub rows: Vec<RowGroup>,
}

/// Consecutive kernels run row by row: one loop over their common
/// outermost output loop `i0`, and inside each of its points every kernel's
/// remaining nest in turn ([`super::rows`] states when that is legal).
#[derive(Clone, Debug, PartialEq)]
pub struct RowGroup {
    /// The kernels, a range of [`Program::kernels`] of at least two.
    pub kernels: std::ops::Range<usize>,
    /// Temporaries written and read only in the group, each access in the
    /// current row: a printer may hold one row of each (its last
    /// `shape.len() - 1` axes) instead of the whole buffer, and address it
    /// by [`super::rows::row_subscript`].
    pub local: Vec<BufId>,
}

impl Program {
    /// The buffer `id`.
    pub fn buffer(&self, id: BufId) -> &Buffer {
        &self.buffers[id.0 as usize]
    }

    /// The names of the `dims` array's entries, in order: the symbols, then
    /// the tile sizes.
    pub fn dims(&self) -> impl Iterator<Item = &String> {
        self.symbols.iter().chain(&self.tiles)
    }

    /// The program's calls in execution order, each a range of
    /// [`Program::kernels`]: a row group's kernels ([`Program::rows`]) run
    /// as one call, row by row, every other kernel as a call of its own.
    /// Within a call the kernels' accesses interleave, so a buffer is live
    /// for whole calls ([`super::arena`]).
    pub fn calls(&self) -> Vec<std::ops::Range<usize>> {
        let mut out = Vec::new();
        let mut next = 0;
        while next < self.kernels.len() {
            let end = self.rows.iter().find(|g| g.kernels.start == next).map_or(next + 1, |g| g.kernels.end);
            out.push(next..end);
            next = end;
        }
        out
    }
}

/// Adds the symbols of `e` (coefficients, constant, divisors) to `out`.
pub fn aff_symbols(e: &AffExpr, out: &mut BTreeSet<String>) {
    out.extend(e.constant_part().symbols());
    for (a, c) in e.terms() {
        out.extend(c.symbols());
        if let AffAtom::FloorDiv(inner, q) = a {
            out.extend(q.symbols());
            aff_symbols(inner, out);
        }
    }
}

/// Every divisor in `d`, innermost first.
pub fn dim_divisors(d: &Dim, out: &mut Vec<Dim>) {
    for (atoms, _) in d.monomials() {
        for a in atoms {
            if let Atom::FloorDiv(n, q) = a {
                dim_divisors(n, out);
                dim_divisors(q, out);
                if !out.contains(q) {
                    out.push((**q).clone());
                }
            }
        }
    }
}

/// Every divisor in `e` (of its floor divisions and inside its [`Dim`]s),
/// innermost first.
pub fn aff_divisors(e: &AffExpr, out: &mut Vec<Dim>) {
    dim_divisors(e.constant_part(), out);
    for (a, c) in e.terms() {
        dim_divisors(c, out);
        if let AffAtom::FloorDiv(inner, q) = a {
            aff_divisors(inner, out);
            dim_divisors(q, out);
            if !out.contains(q) {
                out.push(q.clone());
            }
        }
    }
}

fn collect_reduces<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    if let Expr::Reduce { .. } = e {
        out.push(e);
        return;
    }
    match e {
        Expr::Load { .. } | Expr::Const { .. } | Expr::Acc { .. } | Expr::Reduce { .. } => {}
        Expr::Unary { x, .. } | Expr::Cast { x, .. } | Expr::Gather { at: x, .. } => collect_reduces(x, out),
        Expr::Binary { a, b, .. } => {
            collect_reduces(a, out);
            collect_reduces(b, out);
        }
        Expr::Where { cond, a, b } => {
            collect_reduces(cond, out);
            collect_reduces(a, out);
            collect_reduces(b, out);
        }
        Expr::Select { then, otherwise, .. } => {
            collect_reduces(then, out);
            collect_reduces(otherwise, out);
        }
    }
}

//! The packed contraction template of the CPU back end: a kernel whose
//! reduction sums a product of two factors (`Σ_k a·b` — a matmul, a batched
//! matmul, a convolution read through its window, attention's `Q·Kᵀ` and
//! `P·V`) computed the BLIS way (Van Zee & van de Geijn, ACM TOMS 41(3),
//! 2015; Goto & van de Geijn, ACM TOMS 34(3), 2008):
//!
//! - its output loops split into the GEMM's `M` (loops `a` reads and `b`
//!   does not), `N` (the reverse) and batch loops (the rest), its reduce
//!   loops into the GEMM's `K`;
//! - per task (a batch point × an `mc × nc` block of `M × N`), the `K` loops
//!   in blocks of about `kc`: the `a` and `b` panels *packed* — evaluated
//!   point by point with the kernel's own expressions, so padding guards,
//!   strides, windows, casts and `f16`/`bf16` loads happen once per element
//!   into a contiguous `f32` panel (a convolution's im2col happens here, in
//!   registers, with no im2col buffer) — then the `MR × NR` micro-kernel
//!   (`tgc_runtime::cpu_rt::ukernel`) over every micro-tile; with at most
//!   `NR` rows or columns, a factor that is already an `f32` matrix with
//!   unit stride along `K` is read in place instead ([`PackOrder::Direct`],
//!   `cpu_rt::ukernel_direct`), the sides swapped if need be;
//! - then the kernel's epilogue (its `value`: bias, activations, residual,
//!   cast) on each accumulator, stored where the plain nest stores it;
//! - the tasks on the runtime's thread pool (`cpu_rt::Rt::parallel_for`).
//!
//! A convolution computed at the reads of a pooling (`003`'s compute-at
//! fusion: conv → ReLU → max pool in one kernel) is a contraction too
//! ([`Packed::pooled`]): the pooling's window loops join the GEMM's columns,
//! a task holds whole windows, and the epilogue folds each window's columns
//! into one output point before the store — so the fused kernel keeps its
//! fusion and gets the micro-kernel.
//!
//! It changes the schedule, not the arithmetic: every accumulator sums its
//! products in the plain nest's `k` order, each product rounded before the
//! add, so a packed kernel gives the plain kernel's bits
//! ([`crate::cpu::loop_ir`]'s invariant for schedules).
//!
//! Chosen by [`plan`] for every kernel that has the form and no strips
//! (a `--tile` plan asks for the plain strip-mined nest).
//!
//! Block sizes come from [`CacheModel::blocks`] (the analytical model of Low
//! et al., "Analytical Modeling Is Enough for High-Performance BLIS", ACM
//! TOMS 43(2), 2016, simplified): `kc` so that a `kc × NR` panel of `b`
//! fills half of L1, `mc` so that an `mc × kc` block of `a` fills half of L2,
//! `nc` so that a `kc × nc` block of `b` fills half of the part of L3 a
//! core counts on (half its share, [`CacheModel::of`]). At run time the kernel halves the larger of `M` and `N`'s parts,
//! then the other, while there are fewer tasks than threads
//! (`cpu_rt::packed_tasks`), feeding no more threads than give each
//! `cpu_rt::MIN_TASK_MACS` multiply-adds (`cpu_rt::split_threads`).

use std::collections::BTreeSet;

use crate::affine::{AffAtom, AffExpr};
use crate::index_book::Constr;
use crate::plan::target::{CpuTarget, ZEN3};
use crate::sym::Dim;
use crate::tiny::{BinaryOp, ReduceOp};
use crate::DType;

use super::loop_ir::{BufId, Expr, Kernel, Program};

pub use tgc_runtime::cpu_rt::{MR, NR};

/// A kernel's contraction in GEMM terms (see the module doc).
#[derive(Clone, Debug, PartialEq)]
pub struct Packed {
    /// Output loops only the `a` factor reads: the GEMM's rows, in nest order.
    pub m: Vec<usize>,
    /// Loops only the `b` factor reads: the GEMM's columns, in nest order —
    /// output loops, then (when `pooled`) every loop of the kernel's own
    /// reduction.
    pub n: Vec<usize>,
    /// The other output loops, in nest order: one GEMM per point.
    pub batch: Vec<usize>,
    /// Whether `a` is the product's second operand (`b · a` in the kernel).
    pub swapped: bool,
    /// Whether the contraction is the kernel's one [`Expr::Reduce`] (a
    /// convolution computed at the reads of the pooling that is the kernel's
    /// reduction, `003`'s compute-at fusion) rather than its reduction: the
    /// epilogue then folds each run of `window` consecutive columns (a
    /// pooling window, `window` the product of the reduce loops' extents)
    /// into one output point, in the reduce loops' order.
    pub pooled: bool,
    /// How the `a` panel is packed: which loops run innermost.
    pub a_order: PackOrder,
    /// How the `b` panel is packed.
    pub b_order: PackOrder,
    /// `b` read through one row loop ([`flatten`]): when its rows are
    /// several loops (a convolution's output pixels) that it reads only
    /// through their row-major flattening (a 1×1 convolution's image
    /// `x[c, h, w]` at `W·h + w`), `b` with the outer row loops at 0 and the
    /// last one standing for the flat row (`pk_n0 + pk_j`, decoded by no
    /// division), packed as rows over that one loop. Set only when that
    /// packing reads the source along the rows ([`PackOrder::WidthInner`]):
    /// the multi-loop rows would be packed one at a time, a strided read
    /// per element.
    pub b_flat: Option<Expr>,
    pub blocks: Blocks,
}

/// The loop order of a panel's packing ([`pack_order`]): the panel's layout
/// is fixed (`MR` or `NR` rows side by side per K step), but the packing
/// reads its factor fastest along whichever loop has unit stride there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PackOrder {
    /// One row of the panel (a point of `M` or `N`) after another, its K
    /// values innermost: the factor is read along K (`x[M, K]` as `a`,
    /// `w[N, K]` as `b`).
    DepthInner,
    /// One K point after another, the panel's rows innermost, a group of
    /// `MR` or `NR` at a time: the factor is read along the panel's last
    /// axis (`w[K, N]` as `b`, an image row under a convolution window).
    WidthInner,
    /// One group of the panel (`MR` or `NR` rows) after another, its K
    /// values in the middle, the group's rows innermost: the group's rows
    /// are read side by side along K, one K point's values stored together
    /// (`x[M, K]` as `a`, `w[N, K]` as `b`). Only for rows over one loop,
    /// whose index needs no decoding per element.
    Grouped,
    /// Not packed: the micro-kernel reads the factor in place
    /// (`cpu_rt::ukernel_direct`), row by row along `K`. Only for `a`, and
    /// only when [`direct`] holds: an `f32` load with unit stride along
    /// `K` and one loop for the rows.
    Direct,
}

/// What a printer needs of a packed kernel ([`of`]).
#[derive(Clone, Copy, Debug)]
pub struct Contraction<'a> {
    pub packed: &'a Packed,
    /// The factor that owns the GEMM's rows.
    pub a: &'a Expr,
    /// The factor that owns the GEMM's columns.
    pub b: &'a Expr,
    /// The GEMM's `K`: the extents of the loops the product is summed over,
    /// loop variables `i{k_first}, i{k_first + 1}, …`.
    pub k_loops: &'a [Dim],
    pub k_first: usize,
    /// For a [`Packed::pooled`] kernel, the `id` of the `Reduce` that a
    /// column of the GEMM's result is (printed `acc{id}`).
    pub pooled: Option<u32>,
}

/// One factor of a contraction: `a` (the GEMM's rows) or `b` (its columns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    A,
    B,
}

impl Contraction<'_> {
    /// The factor of `side`, the loops of its panel's rows and its packing
    /// order.
    pub fn factor(&self, side: Side) -> (&Expr, &[usize], PackOrder) {
        let pk = self.packed;
        match side {
            Side::A => (self.a, &pk.m, pk.a_order),
            Side::B => match &pk.b_flat {
                Some(flat) => (flat, &pk.n[pk.n.len() - 1..], pk.b_order),
                None => (self.b, &pk.n, pk.b_order),
            },
        }
    }

    /// The factor of `side` where no padding guard can fail: when the
    /// factor reads through [`Expr::Select`]s (a convolution's zero
    /// padding, guarded on the window's loops), the condition on the
    /// panel's other loops under which every guard holds at every point of
    /// the K loops (their whole extents: a K block is inside them), and
    /// the factor with those selects replaced by their `then`. A printer
    /// packs a row that meets it with the guard-free factor, so an
    /// interior pixel's window costs a load and a store per element
    /// instead of four comparisons more (the conv of `bench_cpu`, 64
    /// channels at 56×56: packing its window took about two thirds of the
    /// kernel's samples in `perf record` on an AVX2 EPYC, 2026-11-28).
    ///
    /// Each guard `g ≥ 0` is affine, so its least value over the box of
    /// the K loops is at a corner: each K variable at `0` where its
    /// coefficient is positive, at its extent − 1 where negative. `None`
    /// when the factor has no select, or a guard has a K variable inside a
    /// floor division or with a coefficient of unknown sign, or the factor
    /// holds an expression this does not rewrite (a gather, a reduction).
    pub fn interior(&self, side: Side) -> Option<Interior> {
        let (e, ..) = self.factor(side);
        let k = self.k_first as u32..(self.k_first + self.k_loops.len()) as u32;
        let mut rows = Vec::new();
        let value = unguarded(e, &k, self.k_loops, &mut rows)?;
        (!rows.is_empty()).then_some(Interior { rows, value })
    }

    /// A [`PackOrder::DepthInner`] factor of kernel `k` that is a copy: an `f32` load
    /// (behind the padding selects of [`Contraction::interior`], if any)
    /// whose subscript, over variables only, splits into a part in the
    /// panel's row loops and the rest (K loops, batch loops, constant). A
    /// row meeting the interior condition then reads `buf[row + rest]` at
    /// every K point: a printer computes each row's part once per group
    /// and copies runs of rows whose parts are consecutive, instead of
    /// decoding and storing one element at a time (a row with a pixel on
    /// the border takes the guarded path). `f32` only: `buffers` gives the
    /// buffer's dtype, and a load from `f16` or `bf16` storage converts.
    /// And only where runs of `run` rows can be consecutive: the panel's
    /// innermost row loop has coefficient 1 and an extent of at least `run`
    /// (or a symbolic one). A pooled conv's rows end with the window's
    /// columns (extent 2 or 3): copied element by element they packed no
    /// faster than row by row (64 channels at 56×56 on an AVX2 EPYC,
    /// 2026-11-28: 4.9 against 4.7 ms for the whole kernel, best of 200),
    /// where a plain conv's pixel rows took 3.8 against 4.5 ms.
    pub fn copy(&self, k: &Kernel, side: Side, buffers: &[super::loop_ir::Buffer], run: usize) -> Option<RowCopy> {
        let cp = self.row_copy(side, buffers)?;
        let (_, axes, _) = self.factor(side);
        let &inner = axes.last()?;
        let long = |d: &Dim| d.as_int().is_none_or(|n| n >= run as i64);
        (cp.unit_stride(inner) && long(&extent(k, &[inner]))).then_some(cp)
    }

    /// The factor of `side` as a [`RowCopy`], whatever its rows' strides:
    /// [`Contraction::copy`]'s form without its condition on runs.
    fn row_copy(&self, side: Side, buffers: &[super::loop_ir::Buffer]) -> Option<RowCopy> {
        let (e, axes, order) = self.factor(side);
        if order != PackOrder::DepthInner {
            return None;
        }
        let interior = self.interior(side);
        let (value, guard) = match &interior {
            Some(int) => (&int.value, int.rows.clone()),
            None if !has_select(e) => (e, Vec::new()),
            None => return None,
        };
        let Expr::Load { buf, index, dtype: DType::F32 } = value else { return None };
        if buffers.get(buf.0 as usize)?.dtype != DType::F32 || index.terms().any(|(a, _)| !matches!(a, AffAtom::Var(_)))
        {
            return None;
        }
        let arity = index.arity();
        let keep = |row: bool| -> Vec<AffExpr> {
            (0..arity)
                .map(|v| if axes.contains(&(v as usize)) == row { AffExpr::var(v) } else { AffExpr::int(0) })
                .collect()
        };
        let row = index.substitute(&keep(true)).ok()?;
        let row = &row - &AffExpr::constant(index.constant_part().clone());
        let rest = index.substitute(&keep(false)).ok()?;
        Some(RowCopy { buf: *buf, row, rest, interior: guard })
    }

    /// For a [`Packed::pooled`] kernel whose `b` factor (the image under
    /// the convolution's window, its rows the pooled pixels, each pooling
    /// window's pixels consecutive) is a copy as for [`Contraction::copy`]
    /// but whose pooling window is too narrow for its runs (a 2×2 window's
    /// rows are pairs): the form in which a printer packs one whole pooling
    /// window at a time, at each K point one move of `run` values per row
    /// of the window, where the window lies inside the image. On the conv
    /// of `bench_cpu` (64 channels at 56×56, one thread of an AVX-512 EPYC,
    /// 2026-11-29, with the grouped pooled epilogue; a scratch driver, best
    /// of 200 calls) the kernel took 2.68 instead of 3.23 ms. `None` unless the window's extents are known, its
    /// last loop has stride 1 in the load and the window fits in a group
    /// of [`NR`] panel rows.
    pub fn window_copy(&self, k: &Kernel, buffers: &[super::loop_ir::Buffer]) -> Option<WindowCopy> {
        self.pooled?;
        let r = k.reduce.as_ref()?;
        let cp = self.row_copy(Side::B, buffers)?;
        let (_, axes, _) = self.factor(Side::B);
        let window = &axes[axes.len().checked_sub(r.loops.len())?..];
        let extents: Vec<i64> = r.loops.iter().map(Dim::as_int).collect::<Option<_>>()?;
        let (&last, _) = window.split_last()?;
        let run = *extents.last()?;
        let points: i64 = extents.iter().product();
        if !cp.unit_stride(last) || run < 1 || points > NR as i64 {
            return None;
        }
        // Where the pixel guards hold at every point of the window (and
        // every K point): each at its least over the window's box.
        let first = window[0] as u32;
        let (win, dims) = (first..first + window.len() as u32, &r.loops);
        let interior =
            cp.interior.iter().map(|c| least(&c.expr, &win, dims).map(Constr::ge0)).collect::<Option<_>>()?;
        // The offset of each row of the window from its first pixel: its
        // loops but the last at their values, row-major.
        let index = &cp.row;
        let offsets = (0..points / run)
            .map(|t| {
                let mut vals: Vec<AffExpr> = (0..index.arity()).map(|_| AffExpr::int(0)).collect();
                let mut rest = t;
                for (j, &v) in window[..window.len() - 1].iter().enumerate().rev() {
                    vals[v] = AffExpr::int(rest % extents[j]);
                    rest /= extents[j];
                }
                index.substitute(&vals).ok()
            })
            .collect::<Option<_>>()?;
        Some(WindowCopy {
            copy: RowCopy { interior, ..cp },
            window: window.to_vec(),
            points: points as usize,
            run: run as usize,
            offsets,
        })
    }

    /// For an `a` read in place ([`PackOrder::Direct`]): its buffer, its
    /// load's index and the loop of its rows (whose coefficient in the
    /// index is the row stride). `None` for a packed `a`.
    pub fn direct_a(&self) -> Option<(BufId, &AffExpr, usize)> {
        match (self.packed.a_order, self.a, self.packed.m.as_slice()) {
            (PackOrder::Direct, Expr::Load { buf, index, .. }, &[row]) => Some((*buf, index, row)),
            _ => None,
        }
    }
}

/// A factor's guard-free form ([`Contraction::interior`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Interior {
    /// Constraints (`expr ≥ 0`) on loops other than the K loops: where all
    /// hold, every guard of the factor holds for every K point.
    pub rows: Vec<Constr>,
    /// The factor with those guards' selects replaced by their `then`.
    pub value: Expr,
}

/// The most columns (`N`, at compile time) for which `a` is read in place
/// (`cpu_rt::ukernel_direct`) whenever [`direct`] allows it: the micro-kernel
/// then reads `a` from its rows once per panel of `b` (32 panels here),
/// instead of packing all of it once and reading the packed copy per
/// panel. Reading in place wins while the panels are few and loses when
/// they are many: on one thread of a Zen 4 EPYC, kernels alone, same bits,
/// conv 3×3 → ReLU → 2×2 pool at 256 channels, 14×14 (7 panels) takes 2.95
/// ms packed and 2.35 ms in place, at 128 channels, 28×28 (25 panels) 2.41
/// and 2.26 ms, at 64 channels, 56×56 (98 panels) 2.68 and 3.03 ms; GEMMs
/// and all-MiniLM-L6-v2 (`bench/`) measure the same with a bound of 8 or
/// 32 panels.
pub const DIRECT_COLS: usize = 32 * NR;
const _: () = assert!(DIRECT_COLS >= NR, "the swap's in-place `a` (at most NR columns) is one of these");

/// Rows of a copied panel ([`Contraction::copy`]) that the printers move at
/// once when their parts are consecutive: one AVX2 vector of `f32`.
pub const COPY_RUN: usize = 8;

/// A factor packed as a copy ([`Contraction::copy`]): row `j`'s value at a
/// K point is `buf[row + rest]`, `row` over the panel's row loops, `rest`
/// over the others, where every constraint of `interior` holds (all rows
/// when it is empty).
#[derive(Clone, Debug, PartialEq)]
pub struct RowCopy {
    pub buf: BufId,
    pub row: AffExpr,
    pub rest: AffExpr,
    pub interior: Vec<Constr>,
}

impl RowCopy {
    /// Whether loop `v` has stride 1 in the copied load.
    fn unit_stride(&self, v: usize) -> bool {
        self.row.coeff(v as u32).and_then(Dim::as_int) == Some(1)
    }
}

/// A pooled kernel's `b` factor packed a pooling window at a time
/// ([`Contraction::window_copy`]): for a pixel that is its window's first
/// (every loop of `window` at 0) and whose whole window meets
/// `copy.interior`, the window's `points` panel rows are, at each K point,
/// `offsets.len()` runs of `run` consecutive values, run `r` at
/// `buf[rest + row + offsets[r]]` (`row` at that first pixel), stored at
/// the panel rows `r·run ..` after it.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowCopy {
    pub copy: RowCopy,
    /// The window's loops, in nest order (the panel's last rows).
    pub window: Vec<usize>,
    pub points: usize,
    pub run: usize,
    pub offsets: Vec<AffExpr>,
}

/// Whether `e` reads through an [`Expr::Select`].
fn has_select(e: &Expr) -> bool {
    let mut found = false;
    e.walk(&mut |x| found |= matches!(x, Expr::Select { .. }));
    found
}

/// `e` with every [`Expr::Select`] replaced by its `then`, each select's
/// guards, at their least over the box of the K loops `k` (extents
/// `extents`), pushed onto `rows`; `None` as [`Contraction::interior`].
fn unguarded(e: &Expr, k: &std::ops::Range<u32>, extents: &[Dim], rows: &mut Vec<Constr>) -> Option<Expr> {
    let go = |x: &Expr, rows: &mut Vec<Constr>| unguarded(x, k, extents, rows).map(Box::new);
    Some(match e {
        Expr::Load { .. } | Expr::Const { .. } => e.clone(),
        Expr::Unary { op, x } => Expr::Unary { op: *op, x: go(x, rows)? },
        Expr::Cast { to, x } => Expr::Cast { to: *to, x: go(x, rows)? },
        Expr::Binary { op, a, b } => Expr::Binary { op: *op, a: go(a, rows)?, b: go(b, rows)? },
        Expr::Where { cond, a, b } => Expr::Where { cond: go(cond, rows)?, a: go(a, rows)?, b: go(b, rows)? },
        Expr::Select { valid, then, .. } => {
            for c in valid {
                rows.push(Constr::ge0(least(&c.expr, k, extents)?));
            }
            *go(then, rows)?
        }
        Expr::Gather { .. } | Expr::Acc { .. } | Expr::Reduce { .. } => return None,
    })
}

/// The least value of `g` over the box `0 ≤ i{v} < extents[v - k.start]`
/// of the variables `k`, as an expression of the others.
fn least(g: &AffExpr, k: &std::ops::Range<u32>, extents: &[Dim]) -> Option<AffExpr> {
    fn mentions(e: &AffExpr, k: &std::ops::Range<u32>) -> bool {
        e.terms().any(|(a, _)| match a {
            AffAtom::Var(v) => k.contains(v),
            AffAtom::FloorDiv(inner, _) => mentions(inner, k),
        })
    }
    let mut vals: Vec<AffExpr> = (0..g.arity()).map(AffExpr::var).collect();
    for (a, c) in g.terms() {
        match a {
            AffAtom::Var(v) if k.contains(v) => {
                let corner = if c.as_int()? > 0 {
                    AffExpr::int(0)
                } else {
                    &AffExpr::constant(extents[(v - k.start) as usize].clone()) - &AffExpr::int(1)
                };
                vals[*v as usize] = corner;
            }
            AffAtom::Var(_) => {}
            AffAtom::FloorDiv(inner, _) if mentions(inner, k) => return None,
            AffAtom::FloorDiv(..) => {}
        }
    }
    g.substitute(&vals).ok()
}

/// A packed kernel's plan: cache block sizes in elements (`mc` a multiple
/// of [`MR`], `nc` of [`NR`]) and the most threads its tasks run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Blocks {
    pub mc: usize,
    pub nc: usize,
    pub kc: usize,
    /// At most this many threads of the runtime's pool (`1`: the caller's
    /// alone, for a kernel too small to gain from a split); `0`, the
    /// analytic plan's, is every thread of the pool. Absent from a tuning
    /// record when `0`. Both printers apply it (with
    /// `cpu_rt::split_threads`'s floor on the work a thread gets).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub threads: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl std::fmt::Display for Blocks {
    /// `mc=120 nc=256 kc=256`, then ` threads=1` for a capped plan.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "mc={} nc={} kc={}", self.mc, self.nc, self.kc)?;
        if self.threads > 0 {
            write!(f, " threads={}", self.threads)?;
        }
        Ok(())
    }
}

/// The cache sizes the block sizes are derived from, in bytes per core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheModel {
    pub l1: usize,
    pub l2: usize,
    /// The part of the last-level cache one core counts on ([`CacheModel::of`]).
    pub l3: usize,
}

impl Default for CacheModel {
    /// The model of `plan::target::ZEN3`, the measured target.
    fn default() -> CacheModel {
        CacheModel::of(&ZEN3)
    }
}

impl CacheModel {
    /// The model of CPU `t`: its L1d and L2, and half its L3 share of one
    /// core, as other work shares it.
    pub fn of(t: &CpuTarget) -> CacheModel {
        CacheModel { l1: t.l1d_bytes as usize, l2: t.l2_bytes as usize, l3: (t.l3_per_core() / 2) as usize }
    }

    /// Block sizes for `f32` panels (see the module doc).
    pub fn blocks(&self) -> Blocks {
        let f = std::mem::size_of::<f32>();
        let kc = (self.l1 / 2 / (NR * f)).max(1);
        let mc = (self.l2 / 2 / (kc * f) / MR).max(1) * MR;
        let nc = (self.l3 / 2 / (kc * f) / NR).max(1) * NR;
        Blocks { mc, nc, kc, threads: 0 }
    }
}

/// `k`'s contraction when [`plan`] gave it the packed schedule: what every
/// printer asks before printing `k` on the template instead of as its plain
/// nest.
pub fn of(k: &Kernel) -> Option<Contraction<'_>> {
    let pk = k.packed.as_ref()?;
    let s = contraction(k, pk.pooled)?;
    let (x, y) = product(s.value)?;
    let (a, b) = if pk.swapped { (y, x) } else { (x, y) };
    Some(Contraction { packed: pk, a, b, k_loops: s.loops, k_first: s.first, pooled: s.id })
}

/// The product of the extents of `k`'s loops `axes` (1 for none).
///
/// # Panics
/// If a loop of `axes` is not a loop of `k` — [`Packed`]'s axes always are.
pub fn extent(k: &Kernel, axes: &[usize]) -> Dim {
    let dims: Vec<Dim> =
        axes.iter().map(|&v| k.extent(v).expect("a packed axis is a loop of its kernel").clone()).collect();
    Dim::product(&dims)
}

/// Marks every kernel of `p` that has the form and no strips as packed,
/// with `model`'s block sizes.
pub fn plan(p: &mut Program, model: &CacheModel) {
    let blocks = model.blocks();
    for k in &mut p.kernels {
        k.packed = if k.strips.is_empty() { analyze(k, blocks) } else { None };
    }
}

/// A float `SUM` of a kernel: its loops (variables `first..`), the summed
/// value, and the `id` of a `Reduce` computed at the reads (`None`: the
/// kernel's own reduction).
struct FloatSum<'a> {
    loops: &'a [Dim],
    first: usize,
    value: &'a Expr,
    id: Option<u32>,
}

/// The float `SUM` of `k` that the template computes: its reduction, or
/// (`pooled`) the one `Reduce` computed at the reads of its reduction,
/// needed at every point (no guard).
fn contraction(k: &Kernel, pooled: bool) -> Option<FloatSum<'_>> {
    let r = k.reduce.as_ref()?;
    let at = k.computed_at();
    if !pooled {
        let ok = at.is_empty() && r.op == ReduceOp::Sum && r.dtype.is_float() && !r.loops.is_empty();
        return ok.then_some(FloatSum { loops: &r.loops, first: k.loops.len(), value: &r.value, id: None });
    }
    match at.as_slice() {
        [Expr::Reduce { id, op: ReduceOp::Sum, dtype, first, loops, guard, value, .. }]
            if dtype.is_float() && guard.is_empty() && !loops.is_empty() && !r.loops.is_empty() =>
        {
            Some(FloatSum { loops, first: *first as usize, value, id: Some(*id) })
        }
        _ => None,
    }
}

/// `(x, y)` when `value` is `x · y` of floats (through a no-op cast to f32).
fn product(value: &Expr) -> Option<(&Expr, &Expr)> {
    match value {
        Expr::Cast { to: DType::F32, x } if x.dtype().is_float() => product(x),
        Expr::Binary { op: BinaryOp::Mul, a, b } if a.dtype().is_float() => Some((a, b)),
        _ => None,
    }
}

/// The factors `(x, y)` of the sum `id` of `k` (`None`: the kernel's own
/// reduction, else the `Reduce` computed at its reads with that id) when
/// it is the sum of products the packed template computes, packed or not
/// (a kernel with strips keeps its plain nest). Each step of that sum is
/// one fused multiply-add, `acc = fma(x, y, acc)`, rounded once: the
/// micro-kernel's rule (`tgc_runtime::cpu_rt`), which both printers print
/// (`fmaf` in C, `mul_add` in Rust), so a packed kernel and its plain nest
/// give the same bits. Every other sum adds rounded values.
pub fn fused_factors<'e>(k: &Kernel, id: Option<u32>, value: &'e Expr) -> Option<(&'e Expr, &'e Expr)> {
    let pk = analyze(k, CacheModel::default().blocks())?;
    if contraction(k, pk.pooled)?.id != id {
        return None;
    }
    product(value)
}

/// The packed form of `k`, if it has one: a float `SUM` of a product whose
/// factors each read a loop the other does not — the kernel's reduction
/// (nothing computed at its reads), or else the one reduction computed at
/// the reads of the kernel's reduction when every loop of the latter
/// falls to the GEMM's columns.
/// Whether `k` has the form of the packed template, strips or not: a sum
/// of products whose order [`super::lanes`] must not change.
pub fn is_contraction(k: &Kernel) -> bool {
    analyze(k, CacheModel::default().blocks()).is_some()
}

fn analyze(k: &Kernel, blocks: Blocks) -> Option<Packed> {
    [false, true].into_iter().find_map(|pooled| analyze_as(k, blocks, pooled))
}

fn analyze_as(k: &Kernel, blocks: Blocks, pooled: bool) -> Option<Packed> {
    let sum = contraction(k, pooled)?;
    let (x, y) = product(sum.value)?;
    let (vx, vy) = (expr_vars(x), expr_vars(y));
    let out = k.loops.len();
    let window = if pooled { k.reduce.as_ref().map_or(0, |r| r.loops.len()) } else { 0 };
    let only = |mine: &BTreeSet<u32>, other: &BTreeSet<u32>| -> Vec<usize> {
        (0..out + window).filter(|&v| mine.contains(&(v as u32)) && !other.contains(&(v as u32))).collect()
    };
    let (ox, oy) = (only(&vx, &vy), only(&vy, &vx));
    if ox.is_empty() || oy.is_empty() {
        return None;
    }
    // `b` owns the innermost of the two sides' loops, so the epilogue
    // stores along the output's fastest axis.
    let mut swapped = ox.last() > oy.last();
    // Few rows (a known M of at most NR: one sentence's tokens times a
    // weight matrix): packing `b` costs more than the multiply, as each
    // packed value is used M times. When `b` can be read in place as `a`,
    // the sides swap and it is not packed at all; the other factor, packed
    // as `b`, fills at most one panel width. On all-MiniLM-L6-v2 at 1×16
    // (`bench/`, one thread) the packing was 35% of the samples, the
    // micro-kernel 13%. `in_place(e, rows, cols)`: factor `e` with its
    // panel's rows on `rows` is read in place as `a` against `cols`.
    let in_place = |e: &Expr, rows: &[usize], cols: &[usize]| {
        window == 0 && extent(k, cols).as_int().is_some_and(|c| c <= NR as i64) && direct(e, rows, &sum)
    };
    let (m0, n0, b0) = if swapped { (&oy, &ox, x) } else { (&ox, &oy, y) };
    if in_place(b0, n0, m0) {
        swapped = !swapped;
    }
    let (m, n) = if swapped { (oy, ox) } else { (ox, oy) };
    if !(out..out + window).all(|v| n.contains(&v)) {
        return None;
    }
    let batch = (0..out).filter(|v| !m.contains(v) && !n.contains(v)).collect();
    let (a, b) = if swapped { (y, x) } else { (x, y) };
    // Few columns (at most DIRECT_COLS, which covers `in_place`'s NR): `a`
    // is read in place whenever it can be, whatever the swap decided,
    // pooled or not.
    let few_cols = extent(k, &n).as_int().is_some_and(|c| c <= DIRECT_COLS as i64);
    let a_order = if few_cols && direct(a, &m, &sum) { PackOrder::Direct } else { pack_order(a, &m) };
    let b_flat = match &n[..] {
        [.., last] if !pooled && n.len() > 1 => {
            flatten(k, b, &n).filter(|flat| pack_order(flat, &[*last]) == PackOrder::WidthInner)
        }
        _ => None,
    };
    let b_order = match &b_flat {
        Some(_) => PackOrder::WidthInner,
        None => pack_order(b, &n),
    };
    Some(Packed { m, n, batch, swapped, pooled, a_order, b_order, b_flat, blocks })
}

/// `e` with the loops `rows` (outer to inner, several) read as one: when
/// every subscript and guard of `e` reads them only through their
/// row-major flattening — coefficient `c · S_j` on loop `j`, `S_j` the
/// product of the later loops' extents, `c` the last loop's (0 for
/// all) — and never inside a floor division, `e` with every loop of `rows`
/// but the last at 0, so that the last one set to the flat index `Σ S_j ·
/// i_j` gives `e`'s value. `None` where `e` reads them otherwise (a
/// padded or strided window, whose pixels are not consecutive), or holds a
/// gather or a reduction.
fn flatten(k: &Kernel, e: &Expr, rows: &[usize]) -> Option<Expr> {
    let flat = |x: &AffExpr| -> Option<AffExpr> {
        let mentions =
            |inner: &AffExpr| inner.terms().any(|(a, _)| matches!(a, AffAtom::Var(v) if rows.contains(&(*v as usize))));
        if x.terms().any(|(a, _)| matches!(a, AffAtom::FloorDiv(inner, _) if mentions(inner))) {
            return None;
        }
        let &last = rows.last()?;
        let c = x.coeff(last as u32);
        let mut stride = Dim::int(1);
        for (j, &v) in rows.iter().enumerate().rev().skip(1) {
            stride = &stride * k.extent(rows[j + 1])?;
            if x.coeff(v as u32).cloned() != c.map(|c| c * &stride) {
                return None;
            }
        }
        let vals: Vec<AffExpr> = (0..x.arity())
            .map(|v| if rows.contains(&(v as usize)) && v as usize != last { AffExpr::int(0) } else { AffExpr::var(v) })
            .collect();
        x.substitute(&vals).ok()
    };
    let go = |x: &Expr| flatten(k, x, rows).map(Box::new);
    Some(match e {
        Expr::Load { buf, index, dtype } => Expr::Load { buf: *buf, index: flat(index)?, dtype: *dtype },
        Expr::Const { .. } => e.clone(),
        Expr::Unary { op, x } => Expr::Unary { op: *op, x: go(x)? },
        Expr::Cast { to, x } => Expr::Cast { to: *to, x: go(x)? },
        Expr::Binary { op, a, b } => Expr::Binary { op: *op, a: go(a)?, b: go(b)? },
        Expr::Where { cond, a, b } => Expr::Where { cond: go(cond)?, a: go(a)?, b: go(b)? },
        Expr::Select { valid, then, otherwise } => Expr::Select {
            valid: valid.iter().map(|c| flat(&c.expr).map(Constr::ge0)).collect::<Option<_>>()?,
            then: go(then)?,
            otherwise: go(otherwise)?,
        },
        Expr::Gather { .. } | Expr::Acc { .. } | Expr::Reduce { .. } => return None,
    })
}

/// Whether the factor `e`, with its panel's rows on the loops `rows`, can
/// be read in place by the micro-kernel ([`PackOrder::Direct`]): an `f32`
/// load (no cast, no padding guard) whose rows are one loop and whose `K`
/// loops (`sum`'s) are contiguous in memory, the last with stride 1 and
/// each other with the product of the extents after it.
fn direct(e: &Expr, rows: &[usize], sum: &FloatSum) -> bool {
    let (&[row], Expr::Load { index, dtype: DType::F32, .. }) = (rows, e) else { return false };
    if index.terms().any(|(a, _)| matches!(a, AffAtom::FloorDiv(..))) {
        return false;
    }
    let mut stride = Dim::int(1);
    for (j, extent) in sum.loops.iter().enumerate().rev() {
        if index.coeff((sum.first + j) as u32) != Some(&stride) {
            return false;
        }
        stride = Dim::product(&[stride, extent.clone()]);
    }
    index.coeff(row as u32).is_some()
}

/// The packing order of a panel whose rows are the loops `axes` of a factor
/// `e`: [`PackOrder::WidthInner`] when the rows are one loop and a load of
/// `e` has unit stride along it (so consecutive rows of the panel are
/// consecutive elements of the source, and the packing streams through it
/// instead of reading one element per cache line); [`PackOrder::Grouped`]
/// for the other rows over one loop (each group's rows read as that many
/// streams along K, each K point's values stored together: on a 1024³
/// GEMM, `perf record` put half the packing's samples on the loads of the
/// row-by-row order, one stream at a time); else [`PackOrder::DepthInner`].
/// Rows over several loops (a convolution's output pixels) stay
/// `DepthInner`: the other orders would decode each row's loop indices (a
/// division and a remainder per loop) once per element instead of once per
/// row, which measured 2.4× slower on the conv of `bench_cpu` (64 channels,
/// 56×56). Every order gives the same panel.
fn pack_order(e: &Expr, axes: &[usize]) -> PackOrder {
    let &[last] = axes else { return PackOrder::DepthInner };
    let mut unit = false;
    e.walk(&mut |e| {
        if let Expr::Load { index, .. } = e {
            unit |= index.var_coeffs().any(|(v, c)| v as usize == last && c.is_one());
        }
    });
    if unit {
        PackOrder::WidthInner
    } else {
        PackOrder::Grouped
    }
}

/// The loop variables `e` reads (subscripts and guards).
fn expr_vars(e: &Expr) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    e.walk(&mut |e| match e {
        Expr::Load { index, .. } | Expr::Gather { base: index, .. } => aff_vars(index, &mut out),
        Expr::Select { valid, .. } => valid.iter().for_each(|c| aff_vars(&c.expr, &mut out)),
        _ => {}
    });
    out
}

fn aff_vars(e: &AffExpr, out: &mut BTreeSet<u32>) {
    for (a, _) in e.terms() {
        match a {
            AffAtom::Var(v) => {
                out.insert(*v);
            }
            AffAtom::FloorDiv(inner, _) => aff_vars(inner, out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::lower;
    use crate::pipeline::{load, Format};

    fn program(src: &str) -> Program {
        let g = load(src, Format::Dsl, None).unwrap_or_else(|e| panic!("{e:?}")).graph;
        lower(&g).unwrap()
    }

    /// The interior condition of a padded window, checked point by point:
    /// wherever it holds, every guard of the factor holds at every K point;
    /// and it holds at some rows (the fast path is taken) but not all. A
    /// GEMM's factors have no guard, hence no interior form.
    #[test]
    fn the_interior_of_a_padded_window_needs_no_guard() {
        // (arguments, weight channels, output height and width)
        let mut copies = 0;
        let convs = [
            ("stride=[1, 1], pad=[1, 1]", 4, 7, 6),
            ("stride=[2, 1], pad=[0, 2, 1, 0], dilation=[2, 1]", 4, 3, 5),
            ("stride=[1, 2], pad=[2, 2], dilation=[1, 2], groups=2", 2, 9, 3),
        ];
        for (conv, c, h, w) in convs {
            let p = program(&format!(
                "graph conv(x: f32[1, 4, 7, 6], w: f32[6, {c}, 3, 3]) -> (y: f32[1, 6, {h}, {w}]) {{
                    y = conv2d(x, w, {conv})
                    return y
                }}"
            ));
            let k = &p.kernels[0];
            let c = of(k).expect("packed");
            let guards_of = |side| {
                let mut guards = Vec::new();
                c.factor(side).0.walk(&mut |x| {
                    if let Expr::Select { valid, .. } = x {
                        guards.extend(valid.iter().cloned());
                    }
                });
                guards
            };
            // The window is the factor with guards; the weights have none.
            let window = if guards_of(Side::A).is_empty() { Side::B } else { Side::A };
            let guards = guards_of(window);
            assert!(!guards.is_empty(), "{conv}");
            let int = c.interior(window).unwrap_or_else(|| panic!("{conv}: no interior"));
            int.value.walk(&mut |x| assert!(!matches!(x, Expr::Select { .. }), "{conv}: a select is left"));
            // Every point of the kernel's loops: output loops, then K loops.
            let extents: Vec<i64> = (0..k.loops.len() + c.k_loops.len())
                .map(|v| {
                    let d = if v < k.loops.len() { &k.loops[v] } else { &c.k_loops[v - k.loops.len()] };
                    d.as_int().expect("static")
                })
                .collect();
            assert_eq!(c.k_first, k.loops.len());
            let holds = |cs: &[Constr], at: &[i64]| cs.iter().all(|g| g.expr.eval(at, &|_| None).unwrap() >= 0);
            // As a copy (unit stride along the output's width only): the
            // row's part plus the rest is the load's subscript.
            let copy = c.copy(k, window, &p.buffers, 1);
            assert_eq!(copy.is_some(), !conv.contains("stride=[1, 2]"), "{conv}");
            copies += usize::from(copy.is_some());
            let (mut inside, mut outside) = (0, 0);
            let total: i64 = extents.iter().product();
            for flat in 0..total {
                let mut at = vec![0; extents.len()];
                let mut f = flat;
                for (v, &n) in extents.iter().enumerate().rev() {
                    at[v] = f % n;
                    f /= n;
                }
                if holds(&int.rows, &at) {
                    assert!(holds(&guards, &at), "{conv}: interior at {at:?} but a guard fails");
                    if let (Some(cp), Expr::Load { index, .. }) = (&copy, &int.value) {
                        let ev = |e: &AffExpr| e.eval(&at, &|_| None).unwrap();
                        assert_eq!(ev(&cp.row) + ev(&cp.rest), ev(index), "{conv} at {at:?}");
                    }
                    inside += 1;
                } else {
                    outside += 1;
                }
            }
            assert!(inside > 0 && outside > 0, "{conv}: {inside} inside, {outside} outside");
        }
        assert_eq!(copies, 2);
        let p = program("graph mm(x: f32[8, 5], w: f32[5, 40]) -> (y: f32[8, 40]) {\n y = matmul(x, w)\n return y\n}");
        let c = of(&p.kernels[0]).expect("packed");
        assert_eq!((c.interior(Side::A), c.interior(Side::B)), (None, None));
    }

    #[test]
    fn blocks_of_the_default_model() {
        let b = CacheModel::default().blocks();
        assert_eq!((b.kc, b.mc % MR, b.nc % NR), (128, 0, 0));
        assert_eq!((b.mc, b.nc), (510, 2048));
    }

    #[test]
    fn a_matmul_plus_epilogue_is_packed_with_m_and_n() {
        let p = program(
            "graph<M=5, N=7, K=3> main(x: f32[M, K], w: f32[K, N], b: f32[N]) -> (y: f32[M, N]) {
                y = relu(matmul(x, w) + b)
                return y
            }",
        );
        let k = &p.kernels[0];
        let pk = k.packed.as_ref().expect("packed");
        assert_eq!((pk.m.as_slice(), pk.n.as_slice(), pk.batch.as_slice()), (&[0][..], &[1][..], &[][..]));
    }

    #[test]
    fn each_panel_is_packed_along_its_factors_unit_stride() {
        use PackOrder::{Grouped, WidthInner};
        let cases = [
            ("x: f32[M, K], w: f32[K, N]", "matmul(x, w)", (Grouped, WidthInner)),
            ("x: f32[M, K], w: f32[N, K]", "matmul(x, transpose(w, 0, 1))", (Grouped, Grouped)),
            ("x: f32[K, M], w: f32[K, N]", "matmul(transpose(x, 0, 1), w)", (WidthInner, WidthInner)),
            ("x: f32[K, M], w: f32[N, K]", "matmul(transpose(x, 0, 1), transpose(w, 0, 1))", (WidthInner, Grouped)),
        ];
        for (params, body, want) in cases {
            // More rows and columns than a panel is wide: both panels pay.
            let p = program(&format!(
                "graph<M=50, N=70, K=3> main({params}) -> (y: f32[M, N]) {{\n y = {body}\n return y\n}}"
            ));
            let pk = p.kernels[0].packed.as_ref().expect("packed");
            assert_eq!((pk.a_order, pk.b_order), want, "{body}");
        }
    }

    /// A 1×1 convolution's image (NCHW: the pixels `W·h + w` apart, the
    /// channels `H·W`) is packed as rows over one loop, the pixels read as
    /// one flat index along which the image has unit stride; a window that
    /// is padded or strided reads its pixels otherwise and keeps its rows
    /// over both loops, packed row by row.
    #[test]
    fn a_pointwise_convolution_packs_its_pixels_as_one_flat_row() {
        use PackOrder::{DepthInner, WidthInner};
        let conv = |kernel: usize, stride: usize, pad: usize, x: &str| {
            let p = program(&format!(
                "graph conv(x: f32[1, 8, 10, 12], u: f32[1, 8, 10, 12], w: f32[40, 16, {kernel}, {kernel}]) -> (y: f32[1, 40, {h}, {w}]) {{
                    y = conv2d({x}, w, stride=[{stride}, {stride}], pad=[{pad}, {pad}])
                    return y
                }}",
                h = (10 + 2 * pad - kernel) / stride + 1,
                w = (12 + 2 * pad - kernel) / stride + 1,
            ));
            p.kernels.iter().find_map(|k| k.packed.clone()).expect("a packed conv")
        };
        let cat = "concat([relu(x), u], axis=1)";
        let pk = conv(1, 1, 0, cat);
        assert_eq!((pk.n.len(), pk.b_order), (2, WidthInner), "{pk:?}");
        let flat = pk.b_flat.as_ref().expect("flat rows");
        // Every subscript of the flat factor reads the pixels through the
        // inner loop alone, with coefficient 1.
        let (h, w) = (pk.n[0] as u32, pk.n[1] as u32);
        let mut loads = 0;
        flat.walk(&mut |e| {
            if let Expr::Load { index, .. } = e {
                if index.coeff(w).is_some() {
                    loads += 1;
                    assert_eq!((index.coeff(h), index.coeff(w)), (None, Some(&Dim::int(1))), "{index:?}");
                }
            }
        });
        assert_eq!(loads, 2, "{flat:?}");
        for (kernel, stride, pad) in [(1, 2, 0), (3, 1, 1), (3, 1, 0)] {
            let pk = conv(kernel, stride, pad, cat);
            assert_eq!(
                (pk.b_flat.is_some(), pk.b_order),
                (false, DepthInner),
                "{kernel}×{kernel}, stride {stride}, pad {pad}"
            );
        }
    }

    /// At most `NR` rows (or columns): the factor with unit stride along
    /// `K` is read in place as `a` — a weight `w[N, K]` swaps sides to be
    /// it — and packed otherwise; above `NR` rows there is no swap, and `a`
    /// is read in place up to [`DIRECT_COLS`] columns, packed above.
    #[test]
    fn few_rows_read_the_other_factor_in_place() {
        use PackOrder::{DepthInner, Direct, Grouped, WidthInner};
        let cases = [
            // (M, N, params, body, swapped, a_order, b_order)
            (16, 384, "x: f32[M, K], w: f32[N, K]", "matmul(x, transpose(w, 0, 1))", true, Direct, Grouped),
            (32, 384, "x: f32[M, K], w: f32[N, K]", "matmul(x, transpose(w, 0, 1))", true, Direct, Grouped),
            // No swap above NR rows; `x` still read in place up to DIRECT_COLS columns.
            (33, DIRECT_COLS, "x: f32[M, K], w: f32[N, K]", "matmul(x, transpose(w, 0, 1))", false, Direct, Grouped),
            (
                33,
                DIRECT_COLS + 32,
                "x: f32[M, K], w: f32[N, K]",
                "matmul(x, transpose(w, 0, 1))",
                false,
                Grouped,
                Grouped,
            ),
            // w[K, N] has no unit stride along K: no swap (`x` read in
            // place, its columns being few), and packed above DIRECT_COLS.
            (16, 384, "x: f32[M, K], w: f32[K, N]", "matmul(x, w)", false, Direct, WidthInner),
            (16, DIRECT_COLS + 32, "x: f32[M, K], w: f32[K, N]", "matmul(x, w)", false, Grouped, WidthInner),
            // Few columns: `x` (unit stride along K) is used by one panel of `b`.
            (384, 16, "x: f32[M, K], w: f32[K, N]", "matmul(x, w)", false, Direct, WidthInner),
            // A transposed `x` has no unit stride along K.
            (384, 16, "x: f32[K, M], w: f32[K, N]", "matmul(transpose(x, 0, 1), w)", false, WidthInner, WidthInner),
            // Up to DIRECT_COLS columns `x` is still read in place, above not.
            (384, DIRECT_COLS, "x: f32[M, K], w: f32[K, N]", "matmul(x, w)", false, Direct, WidthInner),
            (384, DIRECT_COLS + 1, "x: f32[M, K], w: f32[K, N]", "matmul(x, w)", false, Grouped, WidthInner),
        ];
        for (m, n, params, body, swapped, a, b) in cases {
            // Known sizes: a symbol's default is no known size.
            let params = params.replace('M', &m.to_string()).replace('N', &n.to_string()).replace('K', "40");
            let p = program(&format!("graph main({params}) -> (y: f32[{m}, {n}]) {{\n y = {body}\n return y\n}}"));
            let pk = p.kernels[0].packed.as_ref().expect("packed");
            assert_eq!((pk.swapped, pk.a_order, pk.b_order), (swapped, a, b), "M={m} N={n} {body}");
        }
        // A convolution with 16 output pixels: its weights (rows `Cout`, K
        // = `C·3·3` contiguous) are read in place, its padded window (a
        // guarded load) is packed.
        let p = program(
            "graph conv(x: f32[1, 3, 4, 4], w: f32[4, 3, 3, 3]) -> (y: f32[1, 4, 4, 4]) {
                y = conv2d(x, w, stride=[1, 1], pad=[1, 1])
                return y
            }",
        );
        let pk = p.kernels[0].packed.as_ref().expect("packed");
        assert_eq!((pk.m.len(), pk.n.len(), pk.a_order, pk.b_order), (1, 2, Direct, DepthInner), "{pk:?}");
        // Conv → ReLU → pool: the weights are read in place up to
        // DIRECT_COLS columns (32×32 pixels), packed above (34×34).
        assert_eq!(DIRECT_COLS, 32 * 32);
        for (hw, want) in [(32, Direct), (34, Grouped)] {
            let p = program(&format!(
                "graph cp(x: f32[1, 8, {hw}, {hw}], w: f32[16, 8, 3, 3]) -> (y: f32[1, 16, {o}, {o}]) {{
                    c = conv2d(x, w, stride=[1, 1], pad=[1, 1])
                    y = maxpool2d(relu(c), kernel=[2, 2], stride=[2, 2], pad=[0, 0])
                    return y
                }}",
                o = hw / 2
            ));
            let pk = p.kernels.iter().find_map(|k| k.packed.as_ref()).expect("packed");
            assert!(pk.pooled, "{pk:?}");
            assert_eq!(pk.a_order, want, "{hw}×{hw}: {pk:?}");
        }
    }

    #[test]
    fn a_batched_matmul_has_batch_loops_and_a_reduction_over_one_row_is_not_packed() {
        let p = program(
            "graph<B=2, M=5, N=7, K=3> main(x: f32[B, M, K], w: f32[B, K, N]) -> (y: f32[B, M, N], s: f32[B, M]) {
                y = matmul(x, w)
                s = sum(x, axes=[2])
                return y, s
            }",
        );
        let pk = p.kernels[0].packed.as_ref().expect("packed");
        assert_eq!((pk.m.as_slice(), pk.n.as_slice(), pk.batch.as_slice()), (&[1][..], &[2][..], &[0][..]));
        assert!(p.kernels[1].packed.is_none());
    }
}

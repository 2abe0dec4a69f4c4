//! Implicit GEMM (`000` §1.4 `affine_offsets`, §5 `algo_choice conv
//! implicit_gemm`): a contraction whose operands are not plain row-major
//! matrices — a convolution read through its windows, a batched matmul, an
//! operand reached through permutes — computed by the same MMA core, the
//! loader finding each element of an operand tile from affine addresses
//! instead of `row · ld + col`.
//!
//! Each GEMM axis (`batch`, `M`, `N`, `K`) is a list of *digits*: loop
//! variables of the contraction, outermost first, the axis index being
//! their mixed-radix number (`m = (n·P + p)·Q + q` for a convolution's
//! output pixels). An operand's element offset is affine in the digits
//! ([`Affine`]), and so is each of its guards: where a guard is negative
//! the element is padding and reads as zero (the `cp.async` zero fill,
//! `src_bytes = 0`) — there is no im2col buffer. `C` stays row-major
//! `[M, N]` per batch point (`ldc = N`), at the batch point's offset.

use super::*;

/// A GEMM axis of an implicit GEMM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Axis {
    /// `blockIdx.z`: one GEMM per point.
    Batch,
    M,
    N,
    K,
}

/// Digit `index` (outermost first) of `axis`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Digit {
    pub axis: Axis,
    pub index: usize,
}

/// `Σ coeff · digit + constant`, in elements.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Affine {
    pub terms: Vec<(Digit, i64)>,
    pub constant: i64,
}

impl Affine {
    /// The value at digit values `digits` (only the axes it uses need be
    /// present; a digit absent from `digits` adds nothing).
    pub fn at(&self, digits: &[(Axis, &[Expr])]) -> Expr {
        let value = |d: Digit| digits.iter().find(|x| x.0 == d.axis).and_then(|x| x.1.get(d.index)).cloned();
        Expr::linear(self.terms.iter().filter_map(|&(d, c)| value(d).map(|v| (c, v))), self.constant)
    }

    /// The coefficient of `d` (0 when absent).
    pub fn coeff(&self, d: Digit) -> i64 {
        self.terms.iter().filter(|t| t.0 == d).map(|t| t.1).sum()
    }

    /// Whether a digit of `axis` appears.
    pub fn uses(&self, axis: Axis) -> bool {
        self.terms.iter().any(|t| t.0.axis == axis && t.1 != 0)
    }
}

/// How an operand is read: its element offset, and the guards (`≥ 0`)
/// outside which it is zero padding.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Access {
    pub offset: Affine,
    pub guards: Vec<Affine>,
}

impl Access {
    /// Whether every guard holds at digit values `digits` (the element is
    /// not padding), as a truth value.
    pub fn inside(&self, digits: &[(Axis, &[Expr])]) -> Expr {
        self.guards.iter().fold(Expr::c(1), |acc, g| acc.and(Expr::c(-1).lt(g.at(digits))))
    }
}

/// The implicit GEMM's axes and accesses. `M`, `N`, `K` of the kernel are
/// the products of the digits' extents; the grid's `z` is the product of
/// `batch`'s.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Implicit {
    /// Digit extents of each axis, outermost first (every one ≥ 1; `m`,
    /// `n` and `k` not empty).
    pub batch: Vec<i64>,
    pub m: Vec<i64>,
    pub n: Vec<i64>,
    pub k: Vec<i64>,
    /// `A[m, k]`: terms over batch, `M` and `K` digits.
    pub a: Access,
    /// `B[k, n]`: terms over batch, `K` and `N` digits.
    pub b: Access,
    /// The bias's element offset (terms over batch, `M` and `N` digits),
    /// when the epilogue has `bias`.
    pub bias: Option<Affine>,
    /// `C`'s (and the residual's) offset of a batch point: terms over
    /// batch digits only.
    pub c_batch: Affine,
    /// A 2×2 max pool of stride 2 on the output tile (the convolution →
    /// pool fusion of `003`, issue 13): the last two digits of this axis
    /// (`M` or `N`, extent 2 each) are a window's row and column, so each
    /// four consecutive rows (or columns) of the GEMM are one window. The
    /// epilogue applies its ops, takes the window's max across the lanes
    /// that hold it (`shfl.sync.bfly`) and stores one element, at `row /
    /// 4` (or `col / 4`) of a `C` whose `ldc` is the pooled row's length.
    /// No residual with it.
    pub pool: Option<Axis>,
}

/// An operand tile's view of an [`Implicit`] GEMM: its access and the
/// axes (with digit extents) of the tile's rows and columns.
#[derive(Clone, Debug)]
pub(super) struct Tile {
    pub access: Access,
    pub rows: (Axis, Vec<i64>),
    pub cols: (Axis, Vec<i64>),
}

impl Implicit {
    pub(super) fn tile(&self, access: &Access, rows: Axis, cols: Axis) -> Tile {
        Tile {
            access: access.clone(),
            rows: (rows, self.digits(rows).to_vec()),
            cols: (cols, self.digits(cols).to_vec()),
        }
    }

    /// The extents of `axis`'s digits.
    pub fn digits(&self, axis: Axis) -> &[i64] {
        match axis {
            Axis::Batch => &self.batch,
            Axis::M => &self.m,
            Axis::N => &self.n,
            Axis::K => &self.k,
        }
    }

    /// The number of points of `axis` (the product of its digits).
    pub fn extent(&self, axis: Axis) -> i64 {
        self.digits(axis).iter().product()
    }

    /// The widest copy (8, 4, 2 or 1 elements) of `access` along `along`
    /// (`K` for `A` and an `[N, K]` tile of `B`, `N` for a `[K, N]` tile).
    /// The innermost digits of `along` that `access` reads row-major
    /// (coefficient 1, then each the product of the extents inside it)
    /// and no guard reads are one contiguous run; the width divides the
    /// run's extent (a copy never leaves it, so it is all inside or all
    /// padding), and every other coefficient and the constant (the copy
    /// is aligned).
    pub fn vector_width(&self, access: &Access, along: Axis) -> u32 {
        let digits = self.digits(along);
        let (mut run, mut stride) = (1i64, 1i64);
        let mut inner = Vec::new();
        for index in (0..digits.len()).rev() {
            let d = Digit { axis: along, index };
            if access.offset.coeff(d) != stride || access.guards.iter().any(|g| g.coeff(d) != 0) {
                break;
            }
            run *= digits[index];
            stride *= digits[index];
            inner.push(d);
        }
        [8u32, 4, 2, 1]
            .into_iter()
            .find(|&v| {
                let v = v as i64;
                run % v == 0
                    && access.offset.constant % v == 0
                    && access.offset.terms.iter().all(|(d, c)| inner.contains(d) || c % v == 0)
            })
            .unwrap_or(1)
    }
}

impl Builder {}

/// One copy slot of an operand tile (copy `i` of each thread), its values
/// that do not change along `K`, computed once before the k loop: the
/// elements of its chunk inside the fixed axis (`M` or `N`), that axis's
/// digits, and the part of the element offset they and the batch give.
#[derive(Clone, Debug)]
pub(super) struct Slot {
    /// The chunk's row and column in the tile.
    row: Expr,
    col: Expr,
    fixed_elems: Expr,
    digits: Vec<Expr>,
    offset: Expr,
}

impl Tile {
    /// The tile's axis that does not run along `K`, and whether `K` is the
    /// tile's columns.
    fn fixed(&self) -> (Axis, bool) {
        if self.cols.0 == Axis::K {
            (self.rows.0, true)
        } else {
            (self.cols.0, false)
        }
    }
}

impl Builder {
    /// For an implicit GEMM whose operand copies are unrolled (at most
    /// [`MAX_UNROLLED_COPIES`] per thread), the [`Slot`]s of each operand,
    /// computed into `out` before the k loop: each copy then only adds its
    /// `K` digits' terms per k tile (the division of a row into its
    /// digits, the most costly part, happens once). When every copy of a
    /// thread starts at the same tile column (`threads` a multiple of the
    /// chunks per row), the `K` digits are shared by all copies too.
    pub(super) fn hoist_implicit(&mut self, p: &GemmParams, ids: &Ids, out: &mut Vec<Stmt>) {
        if self.gemm.implicit.is_none() {
            return;
        }
        let threads = self.k.threads() as i64;
        for (o, tag) in self.operands(p, ids, Expr::c(0)) {
            let Some(t) = &o.implicit else { continue };
            let (v, per_row, _, iters) = self.geometry(&o);
            if iters > MAX_UNROLLED_COPIES {
                continue;
            }
            let (fixed, k_is_col) = t.fixed();
            let fixed_digits = if k_is_col { t.rows.1.clone() } else { t.cols.1.clone() };
            let offset_terms = Affine {
                terms: t.access.offset.terms.iter().filter(|x| x.0.axis != Axis::K).copied().collect(),
                ..t.access.offset.clone()
            };
            let mut slots = Vec::new();
            for i in 0..iters {
                let (row, col) = if threads % per_row == 0 {
                    (ids.tid.clone() / per_row + i * (threads / per_row), ids.tid.clone() % per_row * v)
                } else {
                    let ch = ids.tid.clone() + i * threads;
                    (ch.clone() / per_row, ch % per_row * v)
                };
                let row = self.let_(out, &format!("{tag}{i}_row"), row);
                let col = self.let_(out, &format!("{tag}{i}_col"), col);
                let (g, end, pred) = if k_is_col {
                    (o.row0.clone() + row.clone(), o.row_end.clone(), o.pred[0])
                } else {
                    (o.col0.clone() + col.clone(), o.col_end.clone(), o.pred[1])
                };
                let g = self.let_(out, &format!("{tag}{i}_fixed"), g);
                let elems = match (pred, k_is_col) {
                    (false, _) => Expr::c(v),
                    (true, true) => g.clone().lt(end).select(v, 0),
                    (true, false) => (end - g.clone()).max(0).min(v),
                };
                let fixed_elems = self.let_(out, &format!("{tag}{i}_in"), elems);
                let digits = self.k.split_digits(out, &format!("{tag}{i}_d"), g, &fixed_digits);
                let at = offset_terms.at(&[(Axis::Batch, &ids.batch), (fixed, &digits)]);
                let offset = self.let_(out, &format!("{tag}{i}_off"), at);
                slots.push(Slot { row, col, fixed_elems, digits, offset });
            }
            self.hoisted.push((tag, slots));
        }
    }

    /// The copies of implicit operand tile `o` for its k tile (`o.row0` or
    /// `o.col0` along `K`) into ring stage `stage`, from the hoisted
    /// `slots`.
    pub(super) fn copy_hoisted(&mut self, o: &Operand, ids: &Ids, stage: Expr, tag: &str, slots: &[Slot]) -> Vec<Stmt> {
        let Some(t) = &o.implicit else { return Vec::new() };
        let es = self.gemm.ab.size_bytes() as i64;
        let threads = self.k.threads() as i64;
        let (v, per_row, chunks, _) = self.geometry(o);
        let (fixed, k_is_col) = t.fixed();
        let k_digits = if k_is_col { t.cols.1.clone() } else { t.rows.1.clone() };
        let mut out = Vec::new();
        let mut shared: Option<(Expr, Vec<Expr>)> = None;
        for (i, slot) in slots.iter().enumerate() {
            // The chunk's index along K and its digits (shared by every
            // slot when the column is).
            let local_k = if k_is_col { slot.col.clone() } else { slot.row.clone() };
            let (gk, kd) = match &shared {
                Some(s) => s.clone(),
                None => {
                    let k0 = if k_is_col { o.col0.clone() } else { o.row0.clone() };
                    let gk = self.let_(&mut out, &format!("{tag}{i}_k"), k0 + local_k);
                    let kd = self.k.split_digits(&mut out, &format!("{tag}{i}_kd"), gk.clone(), &k_digits);
                    if k_is_col && threads % per_row == 0 {
                        shared = Some((gk.clone(), kd.clone()));
                    }
                    (gk, kd)
                }
            };
            let (k_end, k_pred) =
                if k_is_col { (o.col_end.clone(), o.pred[1]) } else { (o.row_end.clone(), o.pred[0]) };
            let k_elems = match (k_pred, k_is_col) {
                (false, _) => Expr::c(v),
                (true, true) => (k_end - gk).max(0).min(v),
                (true, false) => gk.lt(k_end).select(v, 0),
            };
            let digits = [(Axis::Batch, &ids.batch[..]), (fixed, &slot.digits[..]), (Axis::K, &kd[..])];
            let inside = t.access.inside(&digits);
            let k_terms = Affine {
                terms: t.access.offset.terms.iter().filter(|x| x.0.axis == Axis::K).copied().collect(),
                constant: 0,
            };
            let valid = inside.select(slot.fixed_elems.clone().min(k_elems), 0);
            let src_bytes = self.let_(&mut out, &format!("{tag}{i}_bytes"), valid * es);
            let at = slot.offset.clone() + k_terms.at(&digits);
            let offset = Expr::c(0).lt(src_bytes.clone()).select(at, 0);
            let dst = o.smem_at(stage.clone(), slot.row.clone(), slot.col.clone(), es);
            let src = GlobalRef { param: o.param, offset };
            let copy = copy_stmt(dst, src, (v * es) as u32, src_bytes);
            let last = (i as i64 + 1) * threads > chunks;
            out.push(if last {
                Stmt::If {
                    cond: (ids.tid.clone() + i as i64 * threads).lt(chunks),
                    then: vec![copy],
                    otherwise: Vec::new(),
                }
            } else {
                copy
            });
        }
        out
    }
}

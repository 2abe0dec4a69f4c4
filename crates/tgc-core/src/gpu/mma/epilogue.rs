//! The epilogue of the SM80 template (`001` §8): the plan's ops on the
//! accumulator registers and the stores of C — straight from the
//! fragments or staged through shared memory for 16-byte stores.

use super::*;
use crate::tiny::{BinaryOp, ReduceOp};

impl Builder {
    /// The epilogue on `acc` and the stores of `C`: staged through shared
    /// memory for stores of `vs > 2` elements, else straight from the
    /// fragments (pairs of adjacent columns), as always in a persistent
    /// kernel, whose producer is filling the operand ring (which a staging
    /// buffer would overlay) for the next tile meanwhile.
    pub(super) fn epilogue(&mut self, p: &GemmParams, ids: &Ids, ops: &[Epi]) -> Vec<Stmt> {
        if let Some(axis) = self.gemm.implicit.as_ref().and_then(|im| im.pool) {
            return self.pooled_epilogue(p, ids, ops, axis);
        }
        let (wm, wn) = (self.sh.wm, self.sh.wn);
        let (mi_n, ni_n) = (wm / 16, wn / 8);
        let eo = self.gemm.out.size_bytes() as i64;
        let vs = [8, 4, 2, 1]
            .into_iter()
            .find(|&v| v * eo <= 16 && v <= self.gemm.align_c as i64 && v <= self.sh.vec && wn % v == 0)
            .unwrap_or(1);
        let staged = vs > 2 && !self.sh.persistent();
        let cs = staged.then(|| {
            let size = self.computing_threads() / 32 * 16 * wn * eo;
            self.staging_buffer(size)
        });
        let lane = ids.lane.clone();
        let mut out = Vec::new();
        if staged {
            // Every warp is done reading the operand tiles the staging buffer may overlay.
            out.push(Stmt::Barrier);
        }
        // How far this lane's first row and column are from C's edges:
        // each element's guard compares a constant offset with them.
        let row0 = ids.bm.clone() + ids.wm.clone() * wm + lane.clone() / 4;
        let col0 = ids.bn.clone() + ids.wn.clone() * wn + lane.clone() % 4 * 2;
        let rows_left = self.let_(&mut out, "rows_left", Expr::Param(p.m) - row0);
        let cols_left = self.let_(&mut out, "cols_left", Expr::Param(p.n) - col0);
        self.for_unrolled(&mut out, "em", mi_n, |b, mi| {
            let mut slice = Vec::new();
            b.for_unrolled(&mut slice, "en", ni_n, |b, ni| {
                let mut l2 = Vec::new();
                b.for_unrolled(&mut l2, "eh", 2, |b, h| {
                    let mut body = Vec::new();
                    let row = b.let_(
                        &mut body,
                        "row",
                        ids.bm.clone() + ids.wm.clone() * wm + mi.clone() * 16 + lane.clone() / 4 + h.clone() * 8,
                    );
                    let col = b.let_(
                        &mut body,
                        "col",
                        ids.bn.clone() + ids.wn.clone() * wn + ni.clone() * 8 + lane.clone() % 4 * 2,
                    );
                    let reg0 = (mi.clone() * ni_n + ni.clone()) * 4 + h.clone() * 2;
                    let regs: Vec<RegRef> = (0..2).map(|j| RegRef { reg: ids.acc, index: reg0.clone() + j }).collect();
                    for (j, r) in regs.iter().enumerate() {
                        let ops = b.ops_at(&mut body, p, ids, ops, &row, &(col.clone() + j as i64));
                        let [pm, pn, _] = b.sh.pred;
                        let in_m =
                            if pm { (mi.clone() * 16 + h.clone() * 8).lt(rows_left.clone()) } else { Expr::c(1) };
                        let in_n =
                            if pn { (ni.clone() * 8 + (j as i64 + 1)).le(cols_left.clone()) } else { Expr::c(1) };
                        body.push(Stmt::Mma(MmaStmt::Epilogue { acc: r.clone(), pred: in_m.and(in_n), ops }));
                    }
                    match &cs {
                        Some(cs) => {
                            let at = ids.warp.clone() * (16 * wn)
                                + (lane.clone() / 4 + h.clone() * 8) * wn
                                + ni.clone() * 8
                                + lane.clone() % 4 * 2;
                            let dst = SmemRef { offset: at * eo, ..cs.clone() };
                            body.push(Stmt::Mma(MmaStmt::StShared { dst, src: regs, dtype: b.gemm.out }));
                        }
                        None => body.extend(b.store(p, ids, p.c, b.gemm.out, b.gemm.align_c as i64, &row, &col, &regs)),
                    }
                    body
                });
                l2
            });
            if let Some(cs) = &cs {
                slice.push(Stmt::Barrier);
                slice.extend(b.store_slice(p, ids, cs, mi.clone(), vs));
                slice.push(Stmt::Barrier);
            }
            slice
        });
        out
    }

    /// The epilogue of a GEMM that max-pools its output tile
    /// ([`Implicit::pool`]): the ops on every accumulator, then the max of
    /// each window's four elements and one store per window. A window on
    /// `M` is four consecutive rows, which the `mma` C fragment (PTX ISA
    /// "Matrix Fragments for mma.m16n8k16") gives to the four lanes whose
    /// `lane / 4` differ in its two low bits: two butterfly steps (lane
    /// masks 4 and 8) leave the max in all of them and the first stores
    /// it. A window on `N` is four consecutive columns: two in this lane's
    /// pair, two in lane `lane ^ 1`'s; the pair's max, one butterfly step
    /// (mask 1), the even lane stores. Rows past `M` (columns past `N`)
    /// form whole windows (the axis is a multiple of 4), so a window never
    /// mixes them with real ones; the shuffles run in every lane.
    fn pooled_epilogue(&mut self, p: &GemmParams, ids: &Ids, ops: &[Epi], axis: Axis) -> Vec<Stmt> {
        let lane = ids.lane.clone();
        let out = self.gemm.out;
        self.for_fragments(ids, |b, row, col, regs| {
            let mut body = Vec::new();
            for (j, r) in regs.iter().enumerate() {
                let ops = b.ops_at(&mut body, p, ids, ops, row, &(col.clone() + j as i64));
                body.push(Stmt::Mma(MmaStmt::Epilogue { acc: r.clone(), pred: b.in_c(p, row, col, j as i64, 1), ops }));
            }
            let bfly = |r: &RegRef, lane_mask: u32| {
                Stmt::Simt(SimtStmt::ShflBfly { op: ReduceOp::Max, dtype: DType::F32, acc: r.clone(), lane_mask })
            };
            let c_batch = |at: Expr| match ids.c_batch {
                Expr::Const(0) => at,
                ref c => c.clone() + at,
            };
            match axis {
                Axis::M => {
                    for r in regs {
                        body.push(bfly(r, 4));
                        body.push(bfly(r, 8));
                    }
                    let first = (lane.clone() / 4 % 4).eq(0);
                    for (j, r) in regs.iter().enumerate() {
                        let at = c_batch(row.clone() / 4 * Expr::Param(p.ldc) + col.clone() + j as i64);
                        let pred = first.clone().and(b.in_c(p, row, col, j as i64, 1));
                        body.push(Stmt::Simt(SimtStmt::StGlobal {
                            dst: GlobalRef { param: p.c, offset: at },
                            src: r.clone(),
                            dtype: out,
                            pred,
                        }));
                    }
                }
                // `check_implicit` admits a pool on `M` or `N` only.
                Axis::N | Axis::K | Axis::Batch => {
                    let value = ScalarExpr::Binary {
                        op: BinaryOp::Max,
                        a: Box::new(ScalarExpr::Reg { reg: regs[0].clone(), dtype: DType::F32 }),
                        b: Box::new(ScalarExpr::Reg { reg: regs[1].clone(), dtype: DType::F32 }),
                    };
                    body.push(Stmt::Simt(SimtStmt::Compute { dst: regs[0].clone(), value }));
                    body.push(bfly(&regs[0], 1));
                    let at = c_batch(row.clone() * Expr::Param(p.ldc) + col.clone() / 4);
                    let pred = (lane.clone() % 2).eq(0).and(b.in_c(p, row, col, 0, 1));
                    body.push(Stmt::Simt(SimtStmt::StGlobal {
                        dst: GlobalRef { param: p.c, offset: at },
                        src: regs[0].clone(),
                        dtype: out,
                        pred,
                    }));
                }
            }
            body
        })
    }

    /// `row < M && col + j < N` for the `n` columns from `col + j`, as
    /// `predicate_tail` asks (a dropped axis checks nothing).
    fn in_c(&self, p: &GemmParams, row: &Expr, col: &Expr, j: i64, n: i64) -> Expr {
        let [pm, pn, _] = self.sh.pred;
        let in_m = if pm { row.clone().lt(Expr::Param(p.m)) } else { Expr::c(1) };
        let in_n = if pn { (col.clone() + (j + n)).le(Expr::Param(p.n)) } else { Expr::c(1) };
        in_m.and(in_n)
    }

    /// The epilogue `ops` of the output element `(row, col)`, with their
    /// operands' offsets (`bias` over `N` at `col`, or an implicit GEMM's
    /// bias offset from the digits; `residual` at `C`'s offset).
    pub(super) fn ops_at(
        &mut self,
        body: &mut Vec<Stmt>,
        p: &GemmParams,
        ids: &Ids,
        ops: &[Epi],
        row: &Expr,
        col: &Expr,
    ) -> Vec<EpilogueOp> {
        let mut bias_at = None;
        ops.iter()
            .map(|&op| match op {
                Epi::Cast(d) => EpilogueOp::Cast(d),
                Epi::Relu => EpilogueOp::Relu,
                Epi::Silu => EpilogueOp::Silu,
                Epi::Gelu => EpilogueOp::Gelu,
                Epi::GeluTanh => EpilogueOp::GeluTanh,
                Epi::Tanh => EpilogueOp::Tanh,
                Epi::Residual(param) => EpilogueOp::Residual { param, at: self.c_at(p, ids, row, col) },
                Epi::Bias(param) => {
                    let at = bias_at.get_or_insert_with(|| self.bias_at(body, ids, row, col)).clone();
                    EpilogueOp::Bias { param, at }
                }
            })
            .collect()
    }

    /// The bias offset of output element `(row, col)`: `col`, or an
    /// implicit GEMM's bias affine at the element's digits.
    fn bias_at(&mut self, body: &mut Vec<Stmt>, ids: &Ids, row: &Expr, col: &Expr) -> Expr {
        let Some(im) = self.gemm.implicit.clone() else { return col.clone() };
        let Some(bias) = &im.bias else { return col.clone() };
        let md = if bias.uses(Axis::M) { self.k.split_digits(body, "bias_m", row.clone(), &im.m) } else { Vec::new() };
        let nd = if bias.uses(Axis::N) { self.k.split_digits(body, "bias_n", col.clone(), &im.n) } else { Vec::new() };
        bias.at(&[(Axis::Batch, &ids.batch), (Axis::M, &md), (Axis::N, &nd)])
    }

    /// The element offset of `(row, col)` in `C` (and in the residual):
    /// the batch point's offset plus `row · ldc + col`.
    fn c_at(&self, p: &GemmParams, ids: &Ids, row: &Expr, col: &Expr) -> Expr {
        let in_batch = row.clone() * Expr::Param(p.ldc) + col.clone();
        match ids.c_batch {
            Expr::Const(0) => in_batch,
            ref at => at.clone() + in_batch,
        }
    }

    /// Stores of `regs` (adjacent columns from `(row, col)`): one vector
    /// store when all are inside `C` and aligned, else one per element.
    /// `dst` is `C` (`[M, ldc]` of `dtype`, whose leading dimension is a
    /// multiple of `align` elements).
    #[allow(clippy::too_many_arguments)]
    fn store(
        &mut self,
        p: &GemmParams,
        ids: &Ids,
        dst: ParamId,
        dtype: DType,
        align: i64,
        row: &Expr,
        col: &Expr,
        regs: &[RegRef],
    ) -> Vec<Stmt> {
        let n = regs.len() as i64;
        let at = |j: i64| GlobalRef { param: dst, offset: self.c_at(p, ids, row, col) + j };
        let singles: Vec<Stmt> = (0..n)
            .map(|j| {
                Stmt::Mma(MmaStmt::StGlobalVec {
                    dst: at(j),
                    src: vec![regs[j as usize].clone()],
                    dtype,
                    pred: self.in_c(p, row, col, j, 1),
                })
            })
            .collect();
        if n > 1 && align >= n {
            let vector = Stmt::Mma(MmaStmt::StGlobalVec { dst: at(0), src: regs.to_vec(), dtype, pred: Expr::c(1) });
            vec![Stmt::If { cond: self.in_c(p, row, col, 0, n), then: vec![vector], otherwise: singles }]
        } else {
            singles
        }
    }

    /// Each warp reads back its staged 16-row slice `mi` in chunks of `vs`
    /// elements and stores them to `C`.
    fn store_slice(&mut self, p: &GemmParams, ids: &Ids, cs: &SmemRef, mi: Expr, vs: i64) -> Vec<Stmt> {
        let (wm, wn) = (self.sh.wm, self.sh.wn);
        let eo = self.gemm.out.size_bytes() as i64;
        let per_row = wn / vs;
        let cfrag = self.regs("cfrag", RegKind::F32, vs);
        let regs: Vec<RegRef> = (0..vs).map(|j| RegRef { reg: cfrag, index: Expr::c(j) }).collect();
        let mut out = Vec::new();
        self.for_unrolled(&mut out, "ci", 16 * per_row / 32, |b, it| {
            let mut body = Vec::new();
            let c = b.let_(&mut body, "c_chunk", it * 32 + ids.lane.clone());
            let r = b.let_(&mut body, "c_row", c.clone() / per_row);
            let cc = b.let_(&mut body, "c_col", c % per_row * vs);
            let at = ids.warp.clone() * (16 * wn) + r.clone() * wn + cc.clone();
            body.push(Stmt::Mma(MmaStmt::LdShared {
                dst: regs.clone(),
                src: SmemRef { offset: at * eo, ..cs.clone() },
                dtype: b.gemm.out,
            }));
            let row = b.let_(&mut body, "c_grow", ids.bm.clone() + ids.wm.clone() * wm + mi.clone() * 16 + r);
            let col = b.let_(&mut body, "c_gcol", ids.bn.clone() + ids.wn.clone() * wn + cc);
            body.extend(b.store(p, ids, p.c, b.gemm.out, b.gemm.align_c as i64, &row, &col, &regs));
            body
        });
        out
    }

    /// `f(row, col, [acc pair])` for each pair of adjacent columns of this
    /// thread's accumulator fragments, inside unrolled loops.
    fn for_fragments(
        &mut self,
        ids: &Ids,
        mut f: impl FnMut(&mut Self, &Expr, &Expr, &[RegRef]) -> Vec<Stmt>,
    ) -> Vec<Stmt> {
        let (wm, wn) = (self.sh.wm, self.sh.wn);
        let (mi_n, ni_n) = (wm / 16, wn / 8);
        let lane = ids.lane.clone();
        let mut out = Vec::new();
        self.for_unrolled(&mut out, "fm", mi_n, |b, mi| {
            let mut l1 = Vec::new();
            b.for_unrolled(&mut l1, "fn", ni_n, |b, ni| {
                let mut l2 = Vec::new();
                b.for_unrolled(&mut l2, "fh", 2, |b, h| {
                    let mut body = Vec::new();
                    let row = b.let_(
                        &mut body,
                        "frow",
                        ids.bm.clone() + ids.wm.clone() * wm + mi.clone() * 16 + lane.clone() / 4 + h.clone() * 8,
                    );
                    let col = b.let_(
                        &mut body,
                        "fcol",
                        ids.bn.clone() + ids.wn.clone() * wn + ni.clone() * 8 + lane.clone() % 4 * 2,
                    );
                    let reg0 = (mi * ni_n + ni) * 4 + h * 2;
                    let regs: Vec<RegRef> = (0..2).map(|j| RegRef { reg: ids.acc, index: reg0.clone() + j }).collect();
                    body.extend(f(b, &row, &col, &regs));
                    body
                });
                l2
            });
            l1
        });
        out
    }

    /// The buffer the epilogue stages C in: over the operand buffers when
    /// it fits in them (they are dead after the main loop), else after them.
    fn staging_buffer(&mut self, size: i64) -> SmemRef {
        let size = size as u64;
        let offset = if size <= self.k.smem_bytes { 0 } else { self.k.smem_bytes.div_ceil(128) * 128 };
        self.k.smem.push(SmemBuffer { name: "Cs".into(), offset, size, swizzle: Swizzle::IDENTITY });
        self.k.smem_bytes = self.k.smem_bytes.max(offset + size);
        SmemRef { buf: SmemId(self.k.smem.len() as u32 - 1), offset: Expr::c(0), swizzle: Swizzle::IDENTITY }
    }
}

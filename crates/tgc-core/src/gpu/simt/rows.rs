//! The SIMT template's row form ([`Form::Rows`]): a row group of the CPU
//! back end (a softmax's, a layernorm's kernels over the same rows) as one
//! kernel, its local rows in the lanes' registers ([`ROWS_REG_POINTS`],
//! [`ROWS_REG_SLOTS`], [`ROWS_REG_WARPS`]) or in shared memory
//! ([`ROWS_SMEM_MAX`]) or global memory (see the module doc of
//! [`super`]).

use super::*;
use crate::gpu::program::{Form, Launch};

impl<'p> Builder<'p> {
    /// Whether a [`Form::Rows`] member without a reduction computes
    /// [`VEC`] consecutive points of its row per lane and step
    /// ([`Builder::row_points_vectorised`]): a float output (the vector
    /// stores' dtypes), one loop besides the row's,
    /// of a constant extent [`VEC`] divides, its store and every load of a
    /// shared row contiguous along it ([`contiguous`]).
    fn row_points_vectorisable(&self, lk: &loop_ir::Kernel, smem_of: &BTreeMap<BufId, SmemId>) -> bool {
        let [_, d] = lk.loops.as_slice() else { return false };
        let float = self.p.buffer(lk.out).dtype.is_float();
        if !float || d.as_int().is_none_or(|e| e % VEC != 0) || !contiguous(&lk.store_index, 1, VEC) {
            return false;
        }
        let mut loads = Vec::new();
        vector_loads(&lk.value, 1, VEC, false, &mut loads);
        !scalar_shared_loads(&lk.value, 1, &loads, smem_of)
    }

    /// A row member's points [`VEC`] at a time: lane `l` takes points
    /// `VEC·l + 32·VEC·(c + ROWS_CHUNK/VEC·t)`, `c < ROWS_CHUNK/VEC`; for
    /// each, the contiguous loads as `ld.global.v4` / `ld.shared.v4`
    /// (others scalar), the [`VEC`] values, then (after all values of the
    /// step, as the scalar form) one `st.global.v4` / `st.shared.v4` each.
    fn row_points_vectorised(&mut self, lk: &loop_ir::Kernel, smem_of: &BTreeMap<BufId, SmemId>) -> DResult<Stmt> {
        let points = self.dim(&lk.loops[1])?;
        let dtype = self.p.buffer(lk.out).dtype;
        let chunks = ROWS_CHUNK / VEC;
        self.k.regs.push(RegArray { name: "vs".into(), kind: compute_kind(dtype), len: ROWS_CHUNK as u32 });
        let vs = RegId(self.k.regs.len() as u32 - 1);
        let j = self.var("j");
        let mut phases = Vec::new();
        for storing in [false, true] {
            let (u, jj) = (self.var("u"), self.var("jp"));
            let regs: Vec<RegRef> =
                (0..VEC).map(|e| RegRef { reg: vs, index: Expr::Var(u) * Expr::c(VEC) + Expr::c(e) }).collect();
            self.loop_vars.insert(1, Expr::Var(jj));
            let mut body = Vec::new();
            if storing {
                body.push(match smem_of.get(&lk.out) {
                    Some(&smem) => {
                        let at = self.aff(&crate::cpu::rows::row_subscript(&lk.store_index))?;
                        let offset = at * Expr::c(dtype.size_bytes() as i64);
                        Stmt::Mma(MmaStmt::StShared {
                            dst: SmemRef { buf: smem, offset, swizzle: Swizzle::IDENTITY },
                            src: regs,
                            dtype,
                        })
                    }
                    None => Stmt::Mma(MmaStmt::StGlobalVec {
                        dst: GlobalRef { param: self.param_of(lk.out)?, offset: self.aff(&lk.store_index)? },
                        src: regs,
                        dtype,
                        pred: Expr::c(1),
                    }),
                });
            } else {
                body.extend(self.vector_loads_of(&lk.value, 1, VEC, smem_of)?);
                body.extend(self.per_element(1, Expr::Var(jj), VEC, |b, e| {
                    Ok(Stmt::Simt(SimtStmt::Compute { dst: regs[e as usize].clone(), value: b.scalar(&lk.value)? }))
                })?);
            }
            let at = Stmt::Let { var: jj, value: Expr::Var(j) + Expr::c(32 * VEC) * Expr::Var(u) };
            let inside = Stmt::If { cond: Expr::Var(jj).lt(points.clone()), then: body, otherwise: Vec::new() };
            phases.push(unrolled(u, chunks, vec![at, inside]));
        }
        Ok(Stmt::For {
            var: j,
            start: Expr::ThreadIdx(Dim::X) * Expr::c(VEC),
            end: points,
            step: 32 * VEC * chunks,
            unroll: false,
            body: phases,
        })
    }

    /// A shared buffer `warp_totals` of one `dtype` value per warp of a
    /// block of `warps` warps (at `warp · size`), the kernel's only shared
    /// memory.
    pub(super) fn warp_totals(&mut self, warps: u32, dtype: DType) -> SmemId {
        let size = warps as u64 * dtype.size_bytes() as u64;
        let smem = SmemId(self.k.smem.len() as u32);
        self.k.smem.push(SmemBuffer { name: "warp_totals".into(), offset: 0, size, swizzle: Swizzle::IDENTITY });
        self.k.smem_bytes = size.div_ceil(16) * 16;
        smem
    }

    /// `acc ⊕= warp_totals[from..to]` ([`Builder::warp_totals`]), in warp
    /// order.
    pub(super) fn fold_warp_totals(
        &mut self,
        smem: SmemId,
        (op, dtype): (crate::tiny::ReduceOp, DType),
        acc: &RegRef,
        from: Expr,
        to: Expr,
    ) -> Stmt {
        let (j, total) = (self.var("j"), self.reg("total", dtype));
        let value = ScalarExpr::Reg { reg: total.clone(), dtype };
        Stmt::For {
            var: j,
            start: from,
            end: to,
            step: 1,
            unroll: false,
            body: vec![
                Stmt::Mma(MmaStmt::LdShared { dst: vec![total], src: warp_total_at(smem, dtype, Expr::Var(j)), dtype }),
                Stmt::Simt(SimtStmt::Accumulate { op, dtype, acc: acc.clone(), value }),
            ],
        }
    }

    /// `f(u, base)` for each group `u < rr.groups` of a register-row lane's
    /// points (`base = vec·g + 32·warps·vec·u`, `g` the lane's index in its
    /// row), unrolled, under `base < len` when the groups overrun the row;
    /// the local rows ([`Builder::row_regs`]) read at the group's
    /// registers, loop variable 1 at `base`.
    fn lane_groups(&mut self, rr: RegisterRows, g: VarId, f: &mut GroupBody<'_, 'p>) -> DResult<Stmt> {
        let (u, base) = (self.var("u"), self.var("p"));
        for (_, at) in self.row_regs.values_mut() {
            if at.is_some() {
                *at = Some(Expr::Var(u) * Expr::c(rr.vec));
            }
        }
        self.loop_vars.insert(1, Expr::Var(base));
        let stride = 32 * rr.warps as i64 * rr.vec;
        let inner = f(self, u, base)?;
        let inner = match rr.len % stride {
            0 => inner,
            _ => vec![Stmt::If { cond: Expr::Var(base).lt(Expr::c(rr.len)), then: inner, otherwise: vec![] }],
        };
        let mut body =
            vec![Stmt::Let { var: base, value: Expr::Var(g) * Expr::c(rr.vec) + Expr::c(stride) * Expr::Var(u) }];
        body.extend(inner);
        Ok(unrolled(u, rr.groups, body))
    }

    /// The vector loads of `e`'s global inputs at a register-row lane's
    /// group of points ([`Builder::vector_loads_of`]; none when a lane
    /// takes its points one at a time).
    fn row_loads(&mut self, e: &loop_ir::Expr, rr: RegisterRows) -> DResult<Vec<Stmt>> {
        match rr.vec {
            1 => Ok(Vec::new()),
            v => self.vector_loads_of(e, 1, v, &BTreeMap::new()),
        }
    }

    /// A register-row kernel's value of a row (a reduction's result or a
    /// nest over the rows alone), computed by every lane into `v`: kept as
    /// the local scalar's register, or stored by the row's first lane
    /// (`g == 0`).
    fn row_scalar(&mut self, lk: &loop_ir::Kernel, v: RegRef, g: &VarId) -> DResult<Vec<Stmt>> {
        let dtype = self.p.buffer(lk.out).dtype;
        if let Some((reg, _)) = self.row_regs.get(&lk.out) {
            let dst = RegRef { reg: *reg, index: Expr::c(0) };
            return Ok(vec![Stmt::Simt(SimtStmt::Compute { dst, value: ScalarExpr::Reg { reg: v, dtype } })]);
        }
        let store = self.store_reg(lk, v, &BTreeMap::new())?;
        Ok(vec![Stmt::If { cond: Expr::Var(*g).eq(Expr::c(0)), then: vec![store], otherwise: vec![] }])
    }

    /// The store of the value in `v` at the current output point: to the
    /// output buffer, or to its row in shared memory when `smem_of` holds it.
    pub(super) fn store_reg(
        &mut self,
        lk: &loop_ir::Kernel,
        v: RegRef,
        smem_of: &BTreeMap<BufId, SmemId>,
    ) -> DResult<Stmt> {
        let dtype = self.p.buffer(lk.out).dtype;
        Ok(match smem_of.get(&lk.out) {
            Some(&smem) => {
                let offset =
                    self.aff(&crate::cpu::rows::row_subscript(&lk.store_index))? * Expr::c(dtype.size_bytes() as i64);
                Stmt::Mma(MmaStmt::StShared {
                    dst: SmemRef { buf: smem, offset, swizzle: Swizzle::IDENTITY },
                    src: vec![v],
                    dtype,
                })
            }
            None => Stmt::Simt(SimtStmt::StGlobal {
                dst: GlobalRef { param: self.buf_param[&lk.out], offset: self.aff(&lk.store_index)? },
                src: v,
                dtype,
                pred: Expr::c(1),
            }),
        })
    }
}

/// Most bytes of shared memory a [`Form::Rows`] kernel keeps its local
/// temporaries in (one row of each): 16 KiB leaves room for 10 one-warp
/// blocks per SM on sm80's 164 KiB (`plan::target`). A group whose local
/// rows need more keeps them in global memory.
pub const ROWS_SMEM_MAX: u64 = 16 * 1024;

/// Fewest rows a [`Form::Rows`] kernel of element-wise steps only takes
/// (one warp per row): 1024 warps are 8 per SM of an H100's 132 (sm80's
/// 108: 9), enough to keep each SM's four schedulers busy. With fewer its
/// kernels run as [`Form::Elementwise`] kernels over all their points. A
/// group with a reduction keeps its rows: its reduction's own kernel would
/// give each row one warp as well.
pub const ROWS_MIN_ELEMENTWISE: i64 = 1024;

/// Points of a [`Form::Rows`] kernel's element-wise step a lane computes
/// before it stores any: their loads are issued back to back (the stores
/// are `asm volatile`, which the compiler does not move loads across), so
/// a lane has this many loads in flight rather than one.
pub const ROWS_CHUNK: i64 = 8;

/// The local temporaries of `group` ([`loop_ir::RowGroup::local`]) that a
/// [`Form::Rows`] kernel holds in shared memory, each with its row as a
/// shared buffer (offsets 16-byte aligned), and the bytes of all: all of
/// them when each is a float of a constant row length, no kernel of the
/// group reads one under a `PAD` guard (the loads are issued before the
/// value), and one row of each fits in [`ROWS_SMEM_MAX`]; else none.
fn shared_rows(p: &loop_ir::Program, group: &loop_ir::RowGroup) -> (Vec<(BufId, SmemBuffer)>, u64) {
    let mut placed = Vec::new();
    let mut bytes = 0u64;
    for &b in &group.local {
        let buf = p.buffer(b);
        let len = crate::cpu::rows::row_len(p, b).as_int().and_then(|n| u64::try_from(n).ok());
        let (Some(len), true) = (len, matches!(buf.dtype, DType::F32 | DType::F16 | DType::BF16)) else {
            return (Vec::new(), 0);
        };
        let size = len * buf.dtype.size_bytes() as u64;
        let row = SmemBuffer { name: format!("{}_row", buf.name), offset: bytes, size, swizzle: Swizzle::IDENTITY };
        placed.push((b, row));
        bytes += size.div_ceil(16) * 16;
    }
    let guarded = p.kernels[group.kernels.clone()].iter().any(|lk| {
        let mut select = false;
        lk.value.walk(&mut |e| select |= matches!(e, loop_ir::Expr::Select { .. }));
        if let Some(r) = &lk.reduce {
            r.value.walk(&mut |e| select |= matches!(e, loop_ir::Expr::Select { .. }));
        }
        select
    });
    if bytes > ROWS_SMEM_MAX || guarded {
        return (Vec::new(), 0);
    }
    (placed, bytes)
}

/// Most points of a row one lane holds of each local temporary in a
/// [`Form::Rows`] kernel with its rows in registers (`register_rows`): a
/// row of `L` points takes `ceil(L / (32 · ROWS_REG_POINTS))` warps, rounded
/// up to a power of two.
pub const ROWS_REG_POINTS: i64 = 32;

/// Most registers a lane gives to the local rows of a register-row
/// kernel, all of them together (two rows of [`ROWS_REG_POINTS`]: a
/// softmax's or a layernorm's); a group needing more keeps them in shared
/// memory (`shared_rows`).
pub const ROWS_REG_SLOTS: i64 = 64;

/// Most warps one row of a register-row kernel spreads over (a block).
pub const ROWS_REG_WARPS: u32 = 8;

/// The layout of a [`Form::Rows`] kernel that keeps its rows in registers
/// ([`lower_rows_in_registers`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RegisterRows {
    /// Points of a row (a constant).
    len: i64,
    /// Warps a row.
    warps: u32,
    /// Consecutive points a lane takes at a time ([`VEC`] or 1).
    vec: i64,
    /// Groups of `vec` points a lane takes: `ceil(len / (32·warps·vec))`.
    groups: i64,
}

/// Whether row group `group` can keep its local temporaries in registers,
/// and how: every member is an element-wise nest over `[rows, L]` or
/// `[rows]`, or a reduction of `[rows]` over one loop of `L` with nothing
/// computed at its reads, for one constant `L`; every local temporary
/// holds `L` points a row (read and written only at the current point) or
/// one (read anywhere in the row); and the lanes' share of the `L`-point
/// rows fits [`ROWS_REG_SLOTS`] with at most [`ROWS_REG_POINTS`] points
/// per lane and row and [`ROWS_REG_WARPS`] warps. Then no value crosses
/// lanes except through the reductions' butterflies (and, with several
/// warps a row, their totals in shared memory).
fn register_rows(p: &loop_ir::Program, group: &loop_ir::RowGroup) -> Option<RegisterRows> {
    let members = &p.kernels[group.kernels.clone()];
    let mut len = None;
    for lk in members {
        let l = match (&lk.reduce, lk.loops.as_slice()) {
            (None, [_, d]) => d.as_int()?,
            (None, [_]) => continue,
            (Some(r), [_]) if lk.computed_at().is_empty() && lk.strips.is_empty() => match r.loops.as_slice() {
                [d] => d.as_int()?,
                _ => return None,
            },
            _ => return None,
        };
        if *len.get_or_insert(l) != l || l < 1 {
            return None;
        }
    }
    let len = len?;
    let point = AffExpr::var(1);
    let mut full = 0;
    for &b in &group.local {
        match crate::cpu::rows::row_len(p, b).as_int()? {
            1 => {}
            l if l == len => full += 1,
            _ => return None,
        }
    }
    // Every access of a local row at the current point, of a local
    // scalar anywhere.
    let at_point = |buf: BufId, index: &AffExpr| {
        let sub = crate::cpu::rows::row_subscript(index);
        match crate::cpu::rows::row_len(p, buf).as_int() {
            Some(1) => true,
            _ => sub == point,
        }
    };
    for lk in members {
        let mut ok = !group.local.contains(&lk.out) || at_point(lk.out, &lk.store_index);
        let mut check = |e: &loop_ir::Expr| {
            e.walk(&mut |x| match x {
                loop_ir::Expr::Load { buf, index, .. } if group.local.contains(buf) => ok &= at_point(*buf, index),
                loop_ir::Expr::Gather { buf, .. } if group.local.contains(buf) => ok = false,
                _ => {}
            })
        };
        check(&lk.value);
        if let Some(r) = &lk.reduce {
            check(&r.value);
        }
        if !ok {
            return None;
        }
    }
    let warps = (len + 32 * ROWS_REG_POINTS - 1) / (32 * ROWS_REG_POINTS);
    let warps = (warps as u32).next_power_of_two();
    let vec = if len % VEC == 0 { VEC } else { 1 };
    let groups = (len + 32 * warps as i64 * vec - 1) / (32 * warps as i64 * vec);
    let fits = warps <= ROWS_REG_WARPS && full * groups * vec <= ROWS_REG_SLOTS;
    fits.then_some(RegisterRows { len, warps, vec, groups })
}

/// The body of [`Builder::lane_groups`] for a group `u` of points from
/// `base`.
type GroupBody<'f, 'p> = dyn FnMut(&mut Builder<'p>, VarId, VarId) -> DResult<Vec<Stmt>> + 'f;

/// Warps (rows) a block of a register-row kernel with one warp a row.
pub(crate) const ROWS_REG_BLOCK: u32 = 4;

/// The builder of row group `group`'s one kernel (named after its first
/// and last kernels), its parameters the buffers the group reads and
/// writes except those `held` says it keeps on chip; and the buffers it
/// writes to memory.
fn row_group_builder<'p>(
    p: &'p loop_ir::Program,
    group: &loop_ir::RowGroup,
    held: &dyn Fn(&BufId) -> bool,
) -> (Builder<'p>, Vec<BufId>) {
    let members = &p.kernels[group.kernels.clone()];
    let writes: Vec<BufId> = members.iter().map(|lk| lk.out).filter(|b| !held(b)).collect();
    let mut reads: Vec<BufId> = members.iter().flat_map(|lk| lk.reads()).filter(|b| !held(b)).collect();
    reads.sort();
    reads.dedup();
    let (first, last) = (&members[0], &members[members.len() - 1]);
    let name = format!("{}_{}_{}", p.name, first.name, last.name);
    (Builder::with_buffers(p, &name, &reads, &writes), writes)
}

/// A row group as one [`Form::Rows`] kernel with its local temporaries in
/// registers ([`register_rows`]'s layout `rr`).
///
/// A row is `rr.warps` warps; lane `l` of warp `w` takes the points
/// `vec·g + 32·warps·vec·t + e` (`g = 32·w + l`, `t < groups`, `e < vec`), so
/// every element-wise step reads its local rows from the lane's own
/// registers and its global inputs with `ld.global.v{vec}`. A reduction
/// folds the lane's points in that order, then the butterfly (and, with
/// several warps, each warp's total through shared memory between two
/// `bar.sync`s, folded in warp order) leaves the total in every lane, which
/// is the row's local scalar. One warp a row: blocks of
/// [`ROWS_REG_BLOCK`] rows and no barrier; several: a block a row. A
/// grid-stride loop over the rows (at most [`MAX_BLOCKS`] blocks). Global
/// memory is read once per input and written once per output.
fn lower_rows_in_registers(p: &loop_ir::Program, group: &loop_ir::RowGroup, rr: RegisterRows) -> DResult<Launch> {
    let members = &p.kernels[group.kernels.clone()];
    let first = &members[0];
    let (mut b, writes) = row_group_builder(p, group, &|buf| group.local.contains(buf));
    let per_block = if rr.warps == 1 { ROWS_REG_BLOCK } else { 1 };
    b.k.block = [32, rr.warps * per_block, 1];
    b.k.min_blocks_per_sm = Some(1);
    // The reductions' warp totals (4 bytes each: f32 or i32).
    let red_smem = (rr.warps > 1).then(|| b.warp_totals(rr.warps, DType::F32));
    let rows = b.dim(&first.loops[0])?;
    let blocks = ceil_div(rows.clone(), Expr::c(per_block as i64)).min(MAX_BLOCKS);
    b.k.grid = [blocks.clone(), Expr::c(1), Expr::c(1)];
    let (nblk, it, row, g) = (b.var("nblocks"), b.var("it"), b.var("row"), b.var("g"));
    let (y, lane) = (Expr::ThreadIdx(Dim::Y), Expr::ThreadIdx(Dim::X));
    let (row_value, g_value) = match rr.warps {
        1 => ((Expr::Var(it) * Expr::Var(nblk) + Expr::BlockIdx(Dim::X)) * Expr::c(per_block as i64) + y, lane.clone()),
        _ => (Expr::Var(it) * Expr::Var(nblk) + Expr::BlockIdx(Dim::X), y * Expr::c(32) + lane.clone()),
    };
    // One register array per local row, one register per local scalar.
    let slots = rr.groups * rr.vec;
    for &buf in &group.local {
        let dtype = p.buffer(buf).dtype;
        let full = crate::cpu::rows::row_len(p, buf).as_int() != Some(1);
        let len = if full { slots as u32 } else { 1 };
        b.k.regs.push(RegArray { name: format!("{}_r", p.buffer(buf).name), kind: compute_kind(dtype), len });
        let reg = RegId(b.k.regs.len() as u32 - 1);
        b.row_regs.insert(buf, (reg, full.then(|| Expr::c(0))));
    }
    let mut point = vec![Stmt::Let { var: g, value: g_value }];
    for lk in members {
        b.loop_vars.clear();
        b.loop_vars.insert(0, Expr::Var(row));
        b.acc = None;
        match &lk.reduce {
            None if lk.loops.len() == 2 => {
                let dtype = p.buffer(lk.out).dtype;
                let out_reg = b.row_regs.get(&lk.out).map(|(r, _)| *r);
                b.k.regs.push(RegArray { name: "vs".into(), kind: compute_kind(dtype), len: rr.vec as u32 });
                let vs = RegId(b.k.regs.len() as u32 - 1);
                let step = b.lane_groups(rr, g, &mut |b, u, base| {
                    let mut out = b.row_loads(&lk.value, rr)?;
                    let u_at = Expr::Var(u) * Expr::c(rr.vec);
                    out.extend(b.per_element(1, Expr::Var(base), rr.vec, |b, e| {
                        let dst = match out_reg {
                            Some(reg) => RegRef { reg, index: u_at.clone() + Expr::c(e) },
                            None => RegRef { reg: vs, index: Expr::c(e) },
                        };
                        Ok(Stmt::Simt(SimtStmt::Compute { dst, value: b.scalar(&lk.value)? }))
                    })?);
                    if out_reg.is_none() {
                        let regs: Vec<RegRef> = (0..rr.vec).map(|e| RegRef { reg: vs, index: Expr::c(e) }).collect();
                        b.loop_vars.insert(1, Expr::Var(base));
                        if rr.vec > 1 && dtype.is_float() && contiguous(&lk.store_index, 1, rr.vec) {
                            out.push(Stmt::Mma(MmaStmt::StGlobalVec {
                                dst: GlobalRef { param: b.param_of(lk.out)?, offset: b.aff(&lk.store_index)? },
                                src: regs,
                                dtype,
                                pred: Expr::c(1),
                            }));
                        } else {
                            for (e, r) in regs.into_iter().enumerate() {
                                b.loop_vars.insert(1, Expr::Var(base) + Expr::c(e as i64));
                                out.push(b.store_reg(lk, r, &BTreeMap::new())?);
                            }
                        }
                    }
                    Ok(out)
                })?;
                point.push(step);
            }
            None => {
                // A value a row: every lane computes it.
                let v = b.reg("v", p.buffer(lk.out).dtype);
                point.push(Stmt::Simt(SimtStmt::Compute { dst: v.clone(), value: b.scalar(&lk.value)? }));
                point.extend(b.row_scalar(lk, v, &g)?);
            }
            Some(r) => {
                let acc = b.reg("acc", r.dtype);
                b.acc = Some(acc.reg);
                point.push(Stmt::Simt(SimtStmt::Compute {
                    dst: acc.clone(),
                    value: ScalarExpr::identity(r.op, r.dtype),
                }));
                let step = b.lane_groups(rr, g, &mut |b, _, base| {
                    let mut out = b.row_loads(&r.value, rr)?;
                    out.extend(b.per_element(1, Expr::Var(base), rr.vec, |b, _| {
                        Ok(Stmt::Simt(SimtStmt::Accumulate {
                            op: r.op,
                            dtype: r.dtype,
                            acc: acc.clone(),
                            value: b.scalar(&r.value)?,
                        }))
                    })?);
                    Ok(out)
                })?;
                point.push(step);
                point.extend(butterfly(r.op, r.dtype, &acc));
                if let Some(smem) = red_smem {
                    point.push(keep_warp_total(smem, r.dtype, &acc));
                    point.push(Stmt::Barrier);
                    point.push(Stmt::Simt(SimtStmt::Compute {
                        dst: acc.clone(),
                        value: ScalarExpr::identity(r.op, r.dtype),
                    }));
                    let all = Expr::c(rr.warps as i64);
                    point.push(b.fold_warp_totals(smem, (r.op, r.dtype), &acc, Expr::c(0), all));
                    point.push(Stmt::Barrier);
                }
                b.loop_vars.remove(&1);
                let v = b.reg("v", p.buffer(lk.out).dtype);
                point.push(Stmt::Simt(SimtStmt::Compute { dst: v.clone(), value: b.scalar(&lk.value)? }));
                point.extend(b.row_scalar(lk, v, &g)?);
            }
        }
    }
    b.k.body = vec![
        Stmt::Let { var: nblk, value: blocks },
        Stmt::For {
            var: it,
            start: Expr::c(0),
            end: ceil_div(ceil_div(rows.clone(), Expr::c(per_block as i64)), Expr::Var(nblk)),
            step: 1,
            unroll: false,
            body: vec![
                Stmt::Let { var: row, value: row_value },
                Stmt::If { cond: Expr::Var(row).lt(rows), then: point, otherwise: Vec::new() },
            ],
        },
    ];
    let region = members.iter().flat_map(|lk| lk.nodes.iter().copied()).collect();
    Ok(Launch { kernel: b.k, form: Form::Rows, args: b.args, region, outs: writes, plan: None })
}

/// Whether a kernel of a row group can be a part of a [`Form::Rows`]
/// kernel: a plain nest that stores in its own row ([`rows::in_row`], so
/// no other block reads what it writes), without a reduction, or with one
/// over the whole row (its only output loop is the row's) and none
/// computed at its reads.
fn row_member(p: &loop_ir::Program, lk: &loop_ir::Kernel) -> bool {
    let plain = crate::cpu::rows::can_join(lk) && crate::cpu::rows::in_row(p, lk, lk.out, &lk.store_index);
    plain
        && match &lk.reduce {
            None => true,
            Some(_) => lk.loops.len() == 1 && lk.computed_at().is_empty(),
        }
}

/// A row group ([`loop_ir::RowGroup`]) as one [`Form::Rows`] kernel, or
/// `None` when one of its kernels is not a [`row_member`].
///
/// Blocks of one warp, a grid-stride loop over the rows (at most
/// [`MAX_BLOCKS`] blocks); for row `i0` each kernel of the group in turn:
/// without a reduction, lane `l` computes and stores the row's points `l,
/// l + 32, …` (row-major over the other output loops); with one, lane `l`
/// accumulates the reduce points `l, l + 32, …`, the butterfly combines the
/// lanes and lane 0 stores; then `bar.sync`, after which the block's later
/// kernels read what this one wrote (`__syncthreads` orders global memory
/// within the block; CUDA C++ Programming Guide, "Synchronization
/// Functions"). Every read of a buffer the group writes is in the same row
/// ([`crate::cpu::rows::plan`]'s rule), so blocks share nothing. The
/// group's local temporaries live in shared memory ([`shared_rows`]) when
/// they fit, else they stay buffers of the program.
pub(crate) fn lower_rows(p: &loop_ir::Program, group: &loop_ir::RowGroup) -> DResult<Option<Launch>> {
    let members = &p.kernels[group.kernels.clone()];
    let Some(first) = members.first() else { return Ok(None) };
    if !members.iter().all(|lk| row_member(p, lk)) {
        return Ok(None);
    }
    // Element-wise kernels only, over a few long rows (GELU's steps on
    // `[1, 128, 1536]`: one row): the group would run on that many warps,
    // each kernel alone spreads over the whole GPU.
    let rows = first.loops.first().and_then(|d| d.as_int());
    if members.iter().all(|lk| lk.reduce.is_none()) && rows.is_some_and(|r| r < ROWS_MIN_ELEMENTWISE) {
        return Ok(None);
    }
    if let Some(rr) = register_rows(p, group) {
        return lower_rows_in_registers(p, group, rr).map(Some);
    }
    let (shared, smem_bytes) = shared_rows(p, group);
    let (mut b, writes) = row_group_builder(p, group, &|buf| shared.iter().any(|(b, _)| b == buf));
    let mut smem_of = BTreeMap::new();
    for (buf, row) in shared {
        smem_of.insert(buf, SmemId(b.k.smem.len() as u32));
        b.k.smem.push(row);
    }
    b.k.smem_bytes = smem_bytes;
    b.k.block = [32, 1, 1];
    b.k.min_blocks_per_sm = Some(1);
    let rows = b.dim(&first.loops[0])?;
    let blocks = rows.clone().min(MAX_BLOCKS);
    b.k.grid = [blocks.clone(), Expr::c(1), Expr::c(1)];
    let (nblk, it, row) = (b.var("nblocks"), b.var("it"), b.var("row"));
    let mut point = Vec::new();
    for lk in members {
        b.loop_vars.clear();
        b.loop_vars.insert(0, Expr::Var(row));
        b.reduces.clear();
        b.acc = None;
        match &lk.reduce {
            None if b.row_points_vectorisable(lk, &smem_of) => point.push(b.row_points_vectorised(lk, &smem_of)?),
            None => {
                let j = b.var("j");
                // Lane points j0 + 32·u, u < ROWS_CHUNK: all values, then all stores.
                let points = product(lk.loops[1..].iter().map(|d| b.dim(d)).collect::<DResult<Vec<_>>>()?);
                let dtype = p.buffer(lk.out).dtype;
                b.k.regs.push(RegArray { name: "vs".into(), kind: compute_kind(dtype), len: ROWS_CHUNK as u32 });
                let vs = RegId(b.k.regs.len() as u32 - 1);
                let mut phases = Vec::new();
                for storing in [false, true] {
                    let (u, jj) = (b.var("u"), b.var("jp"));
                    let at = RegRef { reg: vs, index: Expr::Var(u) };
                    let mut body = Vec::new();
                    b.unflatten(Expr::Var(jj), 1, &lk.loops[1..], &mut body)?;
                    if storing {
                        body.push(b.store_reg(lk, at, &smem_of)?);
                    } else {
                        b.shared_loads(&lk.value, &smem_of, &mut body)?;
                        body.push(Stmt::Simt(SimtStmt::Compute { dst: at, value: b.scalar(&lk.value)? }));
                        b.vec_loads.clear();
                    }
                    let at = Stmt::Let { var: jj, value: Expr::Var(j) + Expr::c(32) * Expr::Var(u) };
                    let inside = Stmt::If { cond: Expr::Var(jj).lt(points.clone()), then: body, otherwise: Vec::new() };
                    phases.push(unrolled(u, ROWS_CHUNK, vec![at, inside]));
                }
                point.push(Stmt::For {
                    var: j,
                    start: Expr::ThreadIdx(Dim::X),
                    end: points,
                    step: 32 * ROWS_CHUNK,
                    unroll: false,
                    body: phases,
                });
            }
            Some(r) => {
                b.acc = Some(b.reg("acc", r.dtype).reg);
                b.warp_reduction(lk, &smem_of, &mut point)?;
                b.shared_loads(&lk.value, &smem_of, &mut point)?;
                let store = b.store_in(lk, &smem_of)?;
                b.vec_loads.clear();
                point.push(Stmt::If {
                    cond: Expr::ThreadIdx(Dim::X).eq(Expr::c(0)),
                    then: store,
                    otherwise: Vec::new(),
                });
            }
        }
        point.push(Stmt::Barrier);
    }
    b.k.body = vec![
        Stmt::Let { var: nblk, value: blocks },
        Stmt::For {
            var: it,
            start: Expr::c(0),
            end: ceil_div(rows.clone(), Expr::Var(nblk)),
            step: 1,
            unroll: false,
            body: vec![
                Stmt::Let { var: row, value: Expr::Var(it) * Expr::Var(nblk) + Expr::BlockIdx(Dim::X) },
                Stmt::If { cond: Expr::Var(row).lt(rows), then: point, otherwise: Vec::new() },
            ],
        },
    ];
    let region = members.iter().flat_map(|lk| lk.nodes.iter().copied()).collect();
    Ok(Some(Launch { kernel: b.k, form: Form::Rows, args: b.args, region, outs: writes, plan: None }))
}

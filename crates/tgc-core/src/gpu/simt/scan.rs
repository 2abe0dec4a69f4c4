//! The SIMT template's scan form ([`Form::Scan`]): a block scan per tile
//! of a row ([`ScanTiles`]), and a row longer than a tile in three passes
//! (tile totals, their scan, every tile from its carry; see the module doc
//! of [`super`]).

use super::*;
use crate::gpu::program::{Form, Launch};

impl Builder<'_> {
    /// The loop variables of a scan's rows (every loop but the scanned
    /// one), their extents and their point count.
    fn scan_rows(&self, lk: &loop_ir::Kernel, axis: usize) -> DResult<(Vec<u32>, Vec<SymDim>, Expr)> {
        let rows: Vec<u32> = (0..lk.loops.len() as u32).filter(|&v| v != axis as u32).collect();
        let extents: Vec<SymDim> = rows.iter().map(|&v| lk.loops[v as usize].clone()).collect();
        let n = product(extents.iter().map(|d| self.dim(d)).collect::<DResult<Vec<_>>>()?);
        Ok((rows, extents, n))
    }

    /// One chunk of a warp scan: lane `l` takes the value `value` (the
    /// identity where `inside` is false), five `shfl.sync.up` steps, the
    /// carry `carry` combined in, `store` of `v` where `inside`, and lane
    /// 31's value broadcast into `carry`. With `exclusive` the lane then
    /// takes lane `l - 1`'s value into `v` (lane 0 the carry before the
    /// chunk) before the store.
    fn scan_chunk(
        &mut self,
        (op, dt, exclusive): (crate::tiny::ReduceOp, DType, bool),
        (carry, v): (&RegRef, &RegRef),
        inside: Expr,
        value: ScalarExpr,
        store: &dyn Fn(RegRef) -> Stmt,
    ) -> Vec<Stmt> {
        let mut out = vec![
            Stmt::Simt(SimtStmt::Compute { dst: v.clone(), value: ScalarExpr::identity(op, dt) }),
            Stmt::If {
                cond: inside.clone(),
                then: vec![Stmt::Simt(SimtStmt::Compute { dst: v.clone(), value })],
                otherwise: Vec::new(),
            },
        ];
        out.extend(
            [1, 2, 4, 8, 16].map(|delta| Stmt::Simt(SimtStmt::ShflUpScan { op, dtype: dt, acc: v.clone(), delta })),
        );
        out.push(Stmt::Simt(SimtStmt::Accumulate {
            op,
            dtype: dt,
            acc: v.clone(),
            value: ScalarExpr::Reg { reg: carry.clone(), dtype: dt },
        }));
        let next = Stmt::Simt(SimtStmt::ShflIdx { dtype: dt, dst: carry.clone(), src: v.clone(), lane: Expr::c(31) });
        if !exclusive {
            out.push(Stmt::If { cond: inside, then: vec![store(v.clone())], otherwise: Vec::new() });
            out.push(next);
            return out;
        }
        // Lane `l` stores lane `l - 1`'s inclusive value (lane 0 the carry
        // before the chunk); lane 31's is the next carry.
        let lane = Expr::ThreadIdx(Dim::X);
        let before = self.reg("before", dt);
        let from = lane.clone().max(Expr::c(1)) - Expr::c(1);
        out.push(Stmt::Simt(SimtStmt::ShflIdx { dtype: dt, dst: before.clone(), src: v.clone(), lane: from }));
        let first = Stmt::Simt(SimtStmt::Compute {
            dst: before.clone(),
            value: ScalarExpr::Reg { reg: carry.clone(), dtype: dt },
        });
        out.push(Stmt::If { cond: lane.eq(Expr::c(0)), then: vec![first], otherwise: Vec::new() });
        out.push(next);
        out.push(Stmt::If { cond: inside, then: vec![store(before)], otherwise: Vec::new() });
        out
    }

    /// The scan's value at the current point in the running dtype `dt`.
    fn scan_value(&mut self, lk: &loop_ir::Kernel, dt: DType) -> DResult<ScalarExpr> {
        Ok(match self.scalar(&lk.value)? {
            x if x.dtype() == dt => x,
            x => ScalarExpr::Cast { to: dt, x: Box::new(x) },
        })
    }

    /// A block scan ([`Form::Scan`]) of one pass: see [`ScanPass`] and
    /// [`ScanTiles`]. A block of `tiles.warps` warps takes `warps / wr`
    /// items, `wr` warps each ([`ScanTiles::layout`]); an item is a row
    /// (its tiles in turn, the carry running from one to the next) or,
    /// with segment totals, one (row, tile). Per tile, warp `w` of the
    /// item takes the `seg` points from `tile·wr·seg + w·seg`, lane `l`
    /// the points `32·u + l` of them, all loaded into registers first
    /// (the identity past the row's end); the lanes fold them and the
    /// butterfly gives the warp's total, which lane 0 stores in shared
    /// memory; after `bar.sync` the warp's carry is the tile's carry and
    /// the totals of the warps before it, in order, and the warp scans
    /// its chunks from it ([`Builder::scan_chunk`]); the tile's carry
    /// then takes all the item's warp totals, and a second `bar.sync`
    /// frees the shared totals for the next tile. The totals pass stops
    /// after the first `bar.sync` and stores the tile's total.
    fn block_scan(
        &mut self,
        lk: &loop_ir::Kernel,
        sc: &loop_ir::Scan,
        pass: ScanPass,
        tiles: ScanTiles,
    ) -> DResult<Vec<Stmt>> {
        let dt = running_dtype(sc);
        let e = self.dim(&lk.loops[sc.axis])?;
        let tile_len = Expr::c(tiles.tile());
        let nb = ceil_div(e.clone(), tile_len.clone());
        // The scanned length and the layout of its tiles.
        let (len, len_const) = match pass {
            ScanPass::Carries(_) => {
                (nb.clone(), lk.loops[sc.axis].as_int().map(|e| (e + tiles.tile() - 1) / tiles.tile()))
            }
            ScanPass::Totals(_) | ScanPass::Scan(Some(_)) => (e.clone(), None),
            ScanPass::Scan(None) => (e.clone(), lk.loops[sc.axis].as_int()),
        };
        let (wr, seg) = tiles.layout(len_const);
        let per_item = matches!(pass, ScanPass::Carries(_) | ScanPass::Scan(None));
        let row_tile = Expr::c(wr as i64 * seg);
        let (rows, extents, nrows) = self.scan_rows(lk, sc.axis)?;
        let items = if per_item { nrows.clone() } else { nrows.clone() * nb.clone() };
        let per_block = (tiles.warps / wr) as i64;
        self.k.block = [32, tiles.warps, 1];
        self.k.min_blocks_per_sm = Some(1);
        self.k.grid = [ceil_div(items.clone(), Expr::c(per_block)), Expr::c(1), Expr::c(1)];
        let smem = self.warp_totals(tiles.warps, dt);

        let (item, w, w0, row, first) =
            (self.var("item"), self.var("w"), self.var("w0"), self.var("row"), self.var("first"));
        let (y, lane) = (Expr::ThreadIdx(Dim::Y), Expr::ThreadIdx(Dim::X));
        let mut body = vec![
            Stmt::Let {
                var: item,
                value: Expr::BlockIdx(Dim::X) * Expr::c(per_block) + y.clone() / Expr::c(wr as i64),
            },
            Stmt::Let { var: w, value: y.clone() % Expr::c(wr as i64) },
            Stmt::Let { var: w0, value: y.clone() - Expr::Var(w) },
        ];
        let (row_value, first_value, count) = match per_item {
            true => (Expr::Var(item), Expr::c(0), ceil_div(len.clone(), row_tile.clone())),
            false => (Expr::Var(item) / nb.clone(), Expr::Var(item) % nb.clone(), Expr::c(1)),
        };
        body.push(Stmt::Let { var: row, value: row_value });
        body.push(Stmt::Let { var: first, value: first_value });
        self.unflatten_vars(Expr::Var(row), &rows, &extents, &mut body)?;
        let live = Expr::Var(item).lt(items);

        // The carry into the item's first tile.
        let tc = self.reg("tile_carry", dt);
        let identity = ScalarExpr::identity(sc.op, dt);
        let init = match pass {
            ScanPass::Scan(Some(t)) => ScalarExpr::Select {
                cond: Expr::c(0).lt(Expr::Var(first)),
                then: Box::new(ScalarExpr::Load {
                    src: GlobalRef { param: self.buf_param[&t], offset: Expr::Var(item) - Expr::c(1) },
                    dtype: dt,
                }),
                otherwise: Box::new(identity.clone()),
            },
            _ => identity.clone(),
        };
        body.push(Stmt::Simt(SimtStmt::Compute { dst: tc.clone(), value: identity.clone() }));
        body.push(Stmt::If {
            cond: live.clone(),
            then: vec![Stmt::Simt(SimtStmt::Compute { dst: tc.clone(), value: init })],
            otherwise: vec![],
        });

        // The value at point `i` of the row and the store of a register there.
        let (k, t, base) = (self.var("k"), self.var("tile"), self.var("base"));
        let (u, i) = (self.var("u"), self.var(&format!("i{}", sc.axis)));
        let (u2, i2) = (self.var("u"), self.var(&format!("i{}", sc.axis)));
        let row_base = Expr::Var(row) * nb.clone();
        let value = match pass {
            ScanPass::Carries(tb) => ScalarExpr::Load {
                src: GlobalRef { param: self.buf_param[&tb], offset: row_base.clone() + Expr::Var(i) },
                dtype: dt,
            },
            _ => {
                self.loop_vars.insert(sc.axis as u32, Expr::Var(i));
                self.scan_value(lk, dt)?
            }
        };
        let store_at = match pass {
            ScanPass::Carries(tb) => Some((self.buf_param[&tb], row_base + Expr::Var(i2), dt)),
            ScanPass::Scan(_) => {
                self.loop_vars.insert(sc.axis as u32, Expr::Var(i2));
                Some((self.buf_param[&lk.out], self.aff(&lk.store_index)?, self.p.buffer(lk.out).dtype))
            }
            ScanPass::Totals(_) => None,
        };

        // Load and fold the warp's points; lane 0 stores the warp total.
        let chunks = seg / 32;
        self.k.regs.push(RegArray { name: "vals".into(), kind: compute_kind(dt), len: chunks as u32 });
        let vals = RegId(self.k.regs.len() as u32 - 1);
        let val = |u: VarId| RegRef { reg: vals, index: Expr::Var(u) };
        let point = |u: VarId| Expr::Var(base) + Expr::c(32) * Expr::Var(u) + lane.clone();
        let acc = self.reg("acc", dt);
        let mut fold = vec![unrolled(
            u,
            chunks,
            vec![
                Stmt::Let { var: i, value: point(u) },
                Stmt::Simt(SimtStmt::Compute { dst: val(u), value: identity.clone() }),
                Stmt::If {
                    cond: Expr::Var(i).lt(len.clone()),
                    then: vec![Stmt::Simt(SimtStmt::Compute { dst: val(u), value })],
                    otherwise: vec![],
                },
            ],
        )];
        fold.push(Stmt::Simt(SimtStmt::Compute { dst: acc.clone(), value: identity.clone() }));
        let u1 = self.var("u");
        let fold_value = ScalarExpr::Reg { reg: val(u1), dtype: dt };
        fold.push(unrolled(
            u1,
            chunks,
            vec![Stmt::Simt(SimtStmt::Accumulate { op: sc.op, dtype: dt, acc: acc.clone(), value: fold_value })],
        ));
        fold.extend(butterfly(sc.op, dt, &acc));
        fold.push(keep_warp_total(smem, dt, &acc));
        let mut tile = vec![
            Stmt::Let { var: t, value: Expr::Var(first) + Expr::Var(k) },
            Stmt::Let { var: base, value: Expr::Var(t) * row_tile.clone() + Expr::Var(w) * Expr::c(seg) },
            Stmt::If { cond: live.clone(), then: fold, otherwise: vec![] },
            Stmt::Barrier,
        ];
        let mut after = Vec::new();
        if let Some((param, offset, out_dt)) = store_at {
            let carry = self.reg("carry", dt);
            let v = self.reg("v", dt);
            let mut scan = vec![
                Stmt::Simt(SimtStmt::Compute {
                    dst: carry.clone(),
                    value: ScalarExpr::Reg { reg: tc.clone(), dtype: dt },
                }),
                self.fold_warp_totals(smem, (sc.op, dt), &carry, Expr::Var(w0), y.clone()),
            ];
            let at = GlobalRef { param, offset };
            let store = |src| Stmt::Simt(SimtStmt::StGlobal { dst: at.clone(), src, dtype: out_dt, pred: Expr::c(1) });
            let mut chunk = vec![Stmt::Let { var: i2, value: point(u2) }];
            let inside = Expr::Var(i2).lt(len.clone());
            let reg_value = ScalarExpr::Reg { reg: val(u2), dtype: dt };
            let exclusive = sc.exclusive && matches!(pass, ScanPass::Scan(_));
            chunk.extend(self.scan_chunk((sc.op, dt, exclusive), (&carry, &v), inside, reg_value, &store));
            scan.push(unrolled(u2, chunks, chunk));
            after = scan;
        }
        after.push(self.fold_warp_totals(smem, (sc.op, dt), &tc, Expr::Var(w0), Expr::Var(w0) + Expr::c(wr as i64)));
        tile.push(Stmt::If { cond: live.clone(), then: after, otherwise: vec![] });
        if count != Expr::c(1) {
            tile.push(Stmt::Barrier);
        }
        body.push(Stmt::For { var: k, start: Expr::c(0), end: count, step: 1, unroll: false, body: tile });
        if let ScanPass::Totals(tb) = pass {
            let store = Stmt::Simt(SimtStmt::StGlobal {
                dst: GlobalRef { param: self.buf_param[&tb], offset: Expr::Var(item) },
                src: tc,
                dtype: dt,
                pred: Expr::c(1),
            });
            let lead = live.and(Expr::Var(w).eq(Expr::c(0))).and(lane.eq(Expr::c(0)));
            body.push(Stmt::If { cond: lead, then: vec![store], otherwise: vec![] });
        }
        Ok(body)
    }
}

/// The blocks of a scan ([`Form::Scan`], `Builder::block_scan`): `warps`
/// warps a block (a power of two), each scanning at most `segment` points
/// (a multiple of 32) of a row per tile; a tile of a row is at most
/// [`ScanTiles::tile`] points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanTiles {
    /// Warps per block.
    pub warps: u32,
    /// Most points one warp takes of a tile.
    pub segment: i64,
}

/// The scans' blocks: 8 warps of at most 512 points (16 chunks of 32 in
/// registers), tiles of 4096 points. A row of at most 4096 points (a
/// constant extent) is one tile, scanned in one pass; a longer or
/// symbolic row takes three passes over tiles of 4096 (segment totals,
/// their scan, the tiles from their carries).
pub const SCAN_TILES: ScanTiles = ScanTiles { warps: 8, segment: 512 };

impl ScanTiles {
    /// The most points of a row one block scans in one step:
    /// `warps · segment`.
    pub fn tile(self) -> i64 {
        self.warps as i64 * self.segment
    }

    /// `(wr, seg)` for a row of `len` points: a row known to fit a tile
    /// takes the fewest warps `wr` (a power of two) whose segments of at
    /// most `segment` points cover it, each warp `seg` points (`len / wr`
    /// rounded up to a multiple of 32), so a block holds `warps / wr` rows;
    /// any other row all the warps of a block, `segment` points each.
    fn layout(self, len: Option<i64>) -> (u32, i64) {
        match len {
            Some(n) if n <= self.tile() => {
                let wr = (n.max(1) + self.segment - 1) / self.segment;
                let wr = (wr as u32).next_power_of_two().min(self.warps);
                let seg = (n.max(1) + wr as i64 - 1) / wr as i64;
                (wr, (seg + 31) / 32 * 32)
            }
            _ => (self.warps, self.segment),
        }
    }
}

/// One launch of a scan ([`lower_scan`]): with segment totals `t` (a row
/// longer than a tile) the totals of the (row, tile) items, their scan in
/// place per row, then the scan of each (row, tile) from its carry;
/// without, the scan of each row in one pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ScanPass {
    Totals(BufId),
    Carries(BufId),
    Scan(Option<BufId>),
}

/// The dtype a scan's running value is held in on the GPU: the
/// accumulator's compute type, f32 for f16/bf16 (read back without
/// rounding).
fn running_dtype(sc: &loop_ir::Scan) -> DType {
    if sc.dtype.is_float() {
        DType::F32
    } else {
        sc.dtype
    }
}

/// Per kernel of `p`: for a scan whose row is not known to fit one tile of
/// `tiles`, a new temporary for its tile totals (`[rows…, ceil(E /
/// tile)]`, in the running dtype: f32 for floats).
pub(crate) fn scan_totals(p: &mut loop_ir::Program, tiles: ScanTiles) -> Vec<Option<BufId>> {
    let mut out = Vec::new();
    for k in 0..p.kernels.len() {
        let lk = &p.kernels[k];
        let Some(sc) = lk.scan.as_ref().filter(|sc| lk.loops[sc.axis].as_int().is_none_or(|e| e > tiles.tile())) else {
            out.push(None);
            continue;
        };
        let e = &lk.loops[sc.axis];
        let nb = (e + &SymDim::int(tiles.tile() - 1)).floordiv(&SymDim::int(tiles.tile()));
        let mut shape: Vec<SymDim> =
            lk.loops.iter().enumerate().filter(|&(v, _)| v != sc.axis).map(|(_, d)| d.clone()).collect();
        shape.push(nb.unwrap_or_else(|| e.clone()));
        let dtype = running_dtype(sc);
        let name = format!("{}_totals", lk.name);
        p.buffers.push(Buffer { label: format!("tile totals of {}", lk.name), name, dtype, shape, role: Role::Temp });
        out.push(Some(BufId(p.buffers.len() as u32 - 1)));
    }
    out
}

/// The SIMT launches of kernel `k` of `p`: [`lower_scan`]'s for a scan
/// (with its tile totals `totals`), else [`lower_kernel`]'s one.
pub(crate) fn lower_simt(
    p: &loop_ir::Program,
    k: usize,
    totals: Option<BufId>,
    tiles: ScanTiles,
) -> DResult<Vec<Launch>> {
    let lk = &p.kernels[k];
    match lk.scan {
        Some(_) => lower_scan(p, lk, totals, tiles),
        None => Ok(vec![lower_kernel(p, lk)?]),
    }
}

/// The launches of scan kernel `lk` ([`Form::Scan`], [`ScanPass`]): with
/// `totals` (a row longer than a tile) three, else one.
fn lower_scan(
    p: &loop_ir::Program,
    lk: &loop_ir::Kernel,
    totals: Option<BufId>,
    tiles: ScanTiles,
) -> DResult<Vec<Launch>> {
    let sc = lk.scan.as_ref().ok_or_else(|| diag!(Internal, "{} is not a scan", lk.name))?;
    let name = format!("{}_{}", p.name, lk.name);
    let passes = match totals {
        Some(t) => vec![ScanPass::Totals(t), ScanPass::Carries(t), ScanPass::Scan(Some(t))],
        None => vec![ScanPass::Scan(None)],
    };
    let mut out = Vec::new();
    for pass in passes {
        let (suffix, reads, write) = match pass {
            ScanPass::Totals(t) => ("_totals", lk.reads(), t),
            ScanPass::Carries(t) => ("_carries", Vec::new(), t),
            ScanPass::Scan(t) => ("", lk.reads().into_iter().chain(t).collect(), lk.out),
        };
        let mut b = Builder::with_buffers(p, &format!("{name}{suffix}"), &reads, &[write]);
        let body = b.block_scan(lk, sc, pass, tiles)?;
        b.k.body = body;
        out.push(Launch {
            kernel: b.k,
            form: Form::Scan,
            args: b.args,
            region: lk.nodes.clone(),
            outs: vec![write],
            plan: None,
        });
    }
    Ok(out)
}

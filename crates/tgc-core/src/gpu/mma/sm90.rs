//! The SM90 branch of the MMA template (`000` §1.8: "`tma.load` /
//! `mbarrier` → `wgmma`"; the arch is the template's only branch besides
//! tails): the kernel `docs/sm90.md` wrote by hand and measured on an
//! H200, in both its forms, from a plan whose `warp_tile` is the
//! warpgroup's `64 × BN` (`000` §1.7: "`warp_tile` で `ldmatrix|wgmma`
//! 形状を確定"). Without `warp_specialize` every warpgroup computes and
//! thread 0 also issues the copies:
//!
//! ```text
//! acc = 0
//! thread 0: init full[s] (1 arrival) for every stage; fence; bar.sync
//! thread 0: for s in 0..stages-1: if s < ktiles { issue(s) }
//! for kt in 0..ktiles:
//!     mbarrier wait full[kt % S], parity (kt / S) % 2     // tile kt landed
//!     wgmma.fence; 4 × wgmma m64nBNk16 (A, B from descriptors); commit
//!     wgmma.wait_group 1; bar.sync     // every warpgroup retired tile kt-1's reads
//!     thread 0: if kt+S-1 < ktiles { issue(kt+S-1) into stage (kt-1) % S }
//! wgmma.wait_group 0
//! epilogue on the accumulators (the SM80 epilogue: warp w of the CTA holds rows 16w..16w+15)
//! issue(t): arrive.expect_tx(full[t % S], stage bytes); TMA A box, B box(es)
//! ```
//!
//! With `warp_specialize` (TMA copies only) warpgroup 0 is a producer and
//! warpgroups `1..=BM/64` compute (CUTLASS 3's warp-specialised
//! "cooperative" kernel; [`Stmt::WarpSpecialize`]); the roles meet only at
//! the `full`/`empty` mbarrier pairs, so no `bar.sync` waits on a k-tile:
//!
//! ```text
//! thread 0: init full[s] (1 arrival), empty[s] (consumer warpgroups) for every stage; fence; bar.sync
//! producer warpgroup: setmaxnreg.dec 40
//!     thread 0: for kt in 0..ktiles:
//!         mbarrier wait empty[kt % S], parity (kt / S + 1) % 2   // the first pass finds every stage free
//!         issue(kt) into stage kt % S
//! consumer warpgroups: setmaxnreg.inc 232 (resources::specialized_regs)
//!     acc = 0
//!     for kt in 0..ktiles:
//!         mbarrier wait full[kt % S], parity (kt / S) % 2
//!         wgmma.fence; 4 × wgmma; commit; wgmma.wait_group 1
//!         if kt > 0: thread 0 of the warpgroup: mbarrier arrive empty[(kt - 1) % S]   // tile kt-1's reads retired
//!     wgmma.wait_group 0; thread 0 of the warpgroup: mbarrier arrive empty[(ktiles - 1) % S]
//!     epilogue, its bar.sync the consumers' named barrier 1
//! ```
//!
//! With `warp_specialize persistent` the grid is `min(tiles, SMs)` CTAs
//! (the sm90 row's 132 SMs, capped at launch to the device's: an H100 PCIe
//! has 114), CTA `b` takes the tiles `b, b + ctas, …` with `ctas =
//! gridDim.x` (`N` fastest), and both roles wrap the loops above in one
//! over them, counting the ring's uses `it = i · ktiles + kt` for stages
//! and parities, so the producer fills the next tile's stages while the
//! consumers run this one's epilogue; that epilogue stores C from the
//! fragments (no staging buffer over the ring the producer is filling).
//!
//! With `warp_specialize … cluster=2` two CTAs on vertically adjacent
//! tiles (the same B tile) form a thread block cluster (CUTLASS 3's 2×1
//! cluster shape; PTX ISA "Cluster of Cooperative Thread Arrays"): each
//! producer copies its A box and half of the B tile, multicast to both
//! CTAs (`.multicast::cluster`), so the pair reads B from L2 once; each
//! CTA's `full[s]` still expects the whole stage. A stage is free only
//! when both CTAs' consumers are done with it, so `empty[s]` counts the
//! consumer warpgroups of both and thread 0 of each consumer warpgroup
//! arrives on it in both CTAs (`mapa` + `mbarrier.arrive.shared::cluster`). A
//! `barrier.cluster` follows the mbarrier initialisation (no peer may
//! reach them before) and ends the kernel (no CTA exits while its peer may
//! still write to it). Rank `r = blockIdx.x % 2` takes the `r`-th tile of
//! its cluster's pair; with `M` an odd number of tiles the last pair's
//! second CTA lies below `M`: it loads its half of B for its peer and
//! stores nothing.
//!
//! - Block: `BM / 64` warpgroups (128 threads each); warpgroup `g` owns
//!   rows `64g..64g+63` of the tile. Grid `(⌈N/BN⌉, ⌈M/BM⌉)`.
//! - Shared memory: per stage A as `BM` rows of `BK = 64` elements (128
//!   bytes, K-major) and B as `BN` rows of `BK` (`[N,K]`, K-major) or
//!   `BN / 64` atoms of `BK` rows of 64 elements (`[K,N]`, MN-major:
//!   `wgmma`'s `trans_b`), all with the 128-byte swizzle, 1024-byte
//!   aligned; then one 8-byte mbarrier per stage.
//! - Copies: TMA boxes (A `64 × BM`, B `64 × 64` per atom or `64 × BN`)
//!   when the operands' rows are 16-byte aligned (TMA's rule for strides):
//!   the box's out-of-bounds part is zero-filled, so tails need no code.
//!   Otherwise (and for an implicit GEMM) `cp.async` into the same layout (the SM80 loader with the
//!   zero-filling predicates), completed by `cp.async.wait_group`, then
//!   `fence.proxy.async` (the copies are generic-proxy writes, `wgmma`
//!   reads through the async proxy) and `bar.sync`.
//! - Descriptors ([`MatrixDesc`]): A and a K-major B with `sbo = 1024`
//!   (eight 128-byte rows) and the k-th 16-wide step 32 bytes further; an
//!   MN-major B with `lbo` = one atom (`64 · BK · 2` bytes), `sbo = 1024`
//!   and the k-th step 16 rows (2048 bytes) further — the assignment the
//!   H200 confirmed (`docs/sm90.md`).
//!
//! - An implicit GEMM (a convolution, a batched matmul: [`Gemm::implicit`])
//!   takes the `cp.async` loader with its computed addresses, batch points
//!   on the grid's `z`, as the SM80 branch does.
//!
//! Not built here (errors `Unsupported`): `warp_specialize` with the
//! `cp.async` loader, other tiles than
//! `BK · sizeof(T) = 128`, `BM` a multiple of 64 up to 256, `BN` a multiple
//! of 64 up to 256, clusters of more than 2 CTAs or sharing A.

use super::*;
use crate::plan::resources::PRODUCER_THREADS;

/// Columns of one atom of an MN-major operand: 64 16-bit elements, one
/// 128-byte swizzle row.
pub(super) const ATOM_COLS: i64 = 64;

/// Bytes of one swizzle row, the K extent of a tile row in bytes.
const ROW_BYTES: i64 = 128;

/// The plan's numbers for the SM90 branch, with the warp tile as the
/// epilogue sees it (each warp 16 rows of the warpgroup's 64, all `BN`
/// columns: the `wgmma` D fragment is the `mma.m16n8` C layout repeated).
///
/// Errors: `Unsupported` for what the module doc lists and for a
/// `warp_tile` other than `64 × BN`.
pub(super) fn shape(plan: &Plan, gemm: &Gemm) -> DResult<Shape> {
    let unsupported = |m: String| diag!(Unsupported, "the SM90 template needs {m}");
    let [bm, bn, bk] = plan.tile.as_ref().ok_or_else(|| unsupported("a `tile`".into()))?.value;
    let [wm, wn] = plan.warp_tile.as_ref().ok_or_else(|| unsupported("a `warp_tile`".into()))?.value;
    let stages =
        plan.pipeline.as_ref().ok_or_else(|| unsupported("`pipeline ... stages=2..5`".into()))?.value.stages.value;
    let es = gemm.ab.size_bytes() as u64;
    if !(2..=5).contains(&stages) {
        return Err(unsupported(format!("2 to 5 stages, not {stages}")));
    }
    if bk * es != ROW_BYTES as u64 || wm != 64 || wn != bn || bm % 64 != 0 || !(64..=256).contains(&bm) {
        return Err(unsupported(format!(
            "BK of 128 bytes, BM a multiple of 64 up to 256 and the warpgroup tile 64 x BN (tile {bm}x{bn}x{bk}, \
             warp_tile {wm}x{wn})"
        )));
    }
    if bn % ATOM_COLS as u64 != 0 || bn > 256 {
        return Err(unsupported(format!("BN a multiple of 64 up to 256, not {bn}")));
    }
    let algo = crate::plan::cost::algorithm(plan, AlgoKey::Matmul);
    if let Some(other) = algo.filter(|a| *a != AlgoChoice::Matmul(MatmulAlgo::ImplicitGemm)) {
        return Err(diag!(Unsupported, "the SM90 template does not build `{other}` yet"));
    }
    let specialize = plan.warp_specialize.as_ref().map(|w| w.value);
    if specialize.is_some() && !uses_tma(gemm) {
        return Err(unsupported(
            "TMA copies for `warp_specialize` (operand rows of a multiple of 16 bytes, not an implicit GEMM)".into(),
        ));
    }
    if let Some(c) = specialize.map(|s| s.cluster).filter(|c| !(1..=2).contains(c)) {
        return Err(unsupported(format!("a cluster of 1 or 2 CTAs, not {c}")));
    }
    let vec = plan.vectorize.as_ref().map_or(8, |v| v.value.width.value) as i64;
    let tail = |root: &str| plan.predicate_tail.iter().any(|a| a.value.split('.').next() == Some(root));
    Ok(Shape {
        bm: bm as i64,
        bn: bn as i64,
        bk: bk as i64,
        wm: 16,
        wn: bn as i64,
        stages: stages as i64,
        vec,
        pred: [tail("m"), tail("n"), tail("k")],
        swizzle: [true, true],
        specialize,
    })
}

/// Whether the operands are copied by TMA: a plain GEMM (an implicit
/// GEMM's operands are not 2-D tensors) whose rows (`lda`, `ldb`) are
/// multiples of 16 bytes, TMA's rule for a tensor's strides
/// (`cuTensorMapEncodeTiled`).
pub fn uses_tma(gemm: &Gemm) -> bool {
    let es = gemm.ab.size_bytes() as u32;
    gemm.implicit.is_none() && (gemm.align_a * es).is_multiple_of(16) && (gemm.align_b * es).is_multiple_of(16)
}

/// The tensor maps of A and B: A `[M, K]` in boxes of `64 × BM`; B `[K, N]`
/// in boxes of `64 × 64` (one atom) or `[N, K]` in boxes of `64 × BN`,
/// the B boxes `1/c` as tall in a cluster of `c`; all with the 128-byte
/// swizzle. `ab` are the pointer parameters, `scalars`
/// `M, N, K, lda, ldb`.
pub(super) fn tensor_maps(sh: &Shape, gemm: &Gemm, ab: [ParamId; 2], scalars: [ParamId; 5]) -> [TensorMapParam; 2] {
    let [m, n, k, lda, ldb] = scalars;
    // A cluster's CTAs each copy 1/cluster of the B tile: `BN / c` rows
    // of an `[N, K]` B, `BK / c` rows of each atom of a `[K, N]` one.
    let c = sh.cluster() as u32;
    let (bm, bn, bk) = (sh.bm as u32, sh.bn as u32 / c, sh.bk as u32);
    let a = TensorMapParam { tensor: ab[0], dims: [k, m], row_stride: lda, box_dims: [bk, bm], swizzle: Swizzle::B128 };
    let b = match gemm.b_layout {
        BLayout::KN => TensorMapParam {
            tensor: ab[1],
            dims: [n, k],
            row_stride: ldb,
            box_dims: [ATOM_COLS as u32, bk / c],
            swizzle: Swizzle::B128,
        },
        BLayout::NK => {
            TensorMapParam { tensor: ab[1], dims: [k, n], row_stride: ldb, box_dims: [bk, bn], swizzle: Swizzle::B128 }
        }
    };
    [a, b]
}

impl Builder {
    /// This CTA's rank in its cluster, `blockIdx.x % c` ([`Kernel::cluster`]),
    /// or `None` without a cluster.
    fn cluster_rank(&self) -> Option<Expr> {
        let c = self.sh.cluster();
        (c > 1).then(|| Expr::BlockIdx(Dim::X) % c)
    }

    /// A shared buffer of `size` bytes at the next 1024-byte boundary (the
    /// 128-byte swizzle's period).
    fn smem_1024(&mut self, name: &str, size: i64, swizzle: Swizzle) -> SmemRef {
        self.k.smem_bytes = self.k.smem_bytes.div_ceil(1024) * 1024;
        self.k.add_smem(name, size as u64, swizzle)
    }

    /// The kernel body of the module doc.
    pub(super) fn body_sm90(&mut self, p: &GemmParams, ops: &[Epi]) {
        if let (Some(_), Some(maps)) = (self.sh.specialize, p.tensor_maps) {
            return self.body_sm90_specialized(p, ops, maps);
        }
        let (bm, bn, bk, stages) = (self.sh.bm, self.sh.bn, self.sh.bk, self.sh.stages);
        let es = self.gemm.ab.size_bytes() as i64;
        self.k.block = [(bm / 64 * 128) as u32, 1, 1];
        self.k.min_blocks_per_sm = Some(1);
        let param = Expr::Param;
        let z = self.gemm.implicit.as_ref().map_or(1, |im| im.extent(Axis::Batch));
        self.k.grid = [(param(p.n) + (bn - 1)) / bn, (param(p.m) + (bm - 1)) / bm, Expr::c(z)];
        let a_stage = bm * bk * es;
        let b_stage = bn * bk * es;
        let a_smem = self.smem_1024("As", stages * a_stage, Swizzle::B128);
        let b_smem = self.smem_1024("Bs", stages * b_stage, Swizzle::B128);
        let acc = self.regs("acc", RegKind::F32, bn / 2);

        let mut out = Vec::new();
        let [tid, lane, warp, wm, wn, block_m, block_n] = self.thread_ids(&mut out);
        let ktiles = self.let_(&mut out, "ktiles", (param(p.k) + (bk - 1)) / bk);
        let warpgroup = self.let_(&mut out, "warpgroup", tid.clone() / 128);
        let (batch, c_batch) = self.batch_ids(&mut out);
        let ids = Ids {
            tid,
            lane,
            warp,
            wm,
            wn,
            bm: block_m,
            bn: block_n,
            kt0: Expr::c(0),
            ktiles,
            a_smem,
            b_smem,
            acc,
            batch,
            c_batch,
        };
        self.for_unrolled(&mut out, "i", bn / 2, |_, i| {
            vec![Stmt::Mma(MmaStmt::MovF32 { dst: RegRef { reg: acc, index: i }, value: 0.0 })]
        });
        // The zeroing fenced (and so pinned by the printer) where it is:
        // else NVVM sinks a copy of it into the path that skips the k loop,
        // and ptxas serialises every `wgmma` of the loop (C7515).
        out.push(Stmt::Sm90(Sm90Stmt::WgmmaFence));
        let thread0 = ids.tid.clone().eq(0);
        let kt = self.var("kt");
        let kt_e = Expr::Var(kt);
        let mut main = Vec::new();
        let stage = self.let_(&mut main, "stage", kt_e.clone() % stages);
        match p.tensor_maps {
            Some(maps) => {
                let bars = self.k.add_smem("full", 8 * stages as u64, Swizzle::IDENTITY);
                let bar = |s: Expr| SmemRef { offset: s * 8, ..bars.clone() };
                let mut init = Vec::new();
                self.for_unrolled(&mut init, "s", stages, |_, s| {
                    vec![Stmt::Sm90(Sm90Stmt::MbarrierInit { bar: bar(s), count: 1 })]
                });
                init.push(Stmt::Sm90(Sm90Stmt::FenceMbarrierInit));
                out.push(Stmt::If { cond: thread0.clone(), then: init, otherwise: Vec::new() });
                out.push(Stmt::Barrier);
                let mut prologue = Vec::new();
                self.for_unrolled(&mut prologue, "s", stages - 1, |b, s| {
                    let issue = b.issue_tma(&ids, maps, &bars, s.clone(), s.clone());
                    vec![Stmt::If { cond: s.lt(ids.ktiles.clone()), then: issue, otherwise: Vec::new() }]
                });
                out.push(Stmt::If { cond: thread0.clone(), then: prologue, otherwise: Vec::new() });
                main.push(Stmt::Sm90(Sm90Stmt::MbarrierWait {
                    bar: bar(stage.clone()),
                    parity: kt_e.clone() / stages % 2,
                }));
                main.extend(self.wgmma_ktile(&ids, &warpgroup, stage));
                main.push(Stmt::Barrier);
                let pf = self.let_(&mut main, "kt_next", kt_e + (stages - 1));
                let issue = self.issue_tma(&ids, maps, &bars, pf.clone() % stages, pf.clone());
                main.push(Stmt::If {
                    cond: thread0.and(pf.lt(ids.ktiles.clone())),
                    then: issue,
                    otherwise: Vec::new(),
                });
            }
            None => {
                self.hoist_implicit(p, &ids, &mut out);
                self.for_unrolled(&mut out, "s", stages - 1, |b, s| {
                    let loads = b.load_tiles(p, &ids, s.clone(), s.clone());
                    vec![
                        Stmt::If { cond: s.lt(ids.ktiles.clone()), then: loads, otherwise: Vec::new() },
                        Stmt::Mma(MmaStmt::CommitGroup),
                    ]
                });
                main.extend([
                    Stmt::Mma(MmaStmt::WaitGroup { pending: (stages - 2) as u32 }),
                    Stmt::Sm90(Sm90Stmt::FenceProxyAsync),
                    Stmt::Barrier,
                ]);
                main.extend(self.wgmma_ktile(&ids, &warpgroup, stage));
                main.push(Stmt::Barrier);
                let pf = self.let_(&mut main, "kt_next", kt_e + (stages - 1));
                let loads = self.load_tiles(p, &ids, pf.clone() % stages, pf.clone());
                main.push(Stmt::If { cond: pf.lt(ids.ktiles.clone()), then: loads, otherwise: Vec::new() });
                main.push(Stmt::Mma(MmaStmt::CommitGroup));
            }
        }
        out.push(Stmt::For { var: kt, start: Expr::c(0), end: ids.ktiles.clone(), step: 1, unroll: false, body: main });
        if p.tensor_maps.is_none() {
            out.push(Stmt::Mma(MmaStmt::WaitGroup { pending: 0 }));
        }
        out.push(Stmt::Sm90(Sm90Stmt::WgmmaWait { pending: 0 }));
        out.extend(self.epilogue(p, &ids, ops));
        self.k.body = out;
    }

    /// Thread 0's copies of k-tile `kt` into ring stage `stage`: the
    /// stage's mbarrier armed with the stage's bytes, then the A box and
    /// the B box(es). In a cluster of `c` the CTA of rank `r` copies the
    /// `r`-th of `c` slices of the B tile (rows of an `[N, K]` B, k-rows of
    /// each atom of a `[K, N]` one) and multicasts it to every CTA of the
    /// cluster, which share the B tile; each CTA's mbarrier still expects
    /// the whole stage, its slice and its peers'.
    fn issue_tma(&mut self, ids: &Ids, maps: [ParamId; 2], bars: &SmemRef, stage: Expr, kt: Expr) -> Vec<Stmt> {
        let (bm, bn, bk, c) = (self.sh.bm, self.sh.bn, self.sh.bk, self.sh.cluster());
        let es = self.gemm.ab.size_bytes() as i64;
        let (a_stage, b_stage) = (bm * bk * es, bn * bk * es);
        let bar = SmemRef { offset: stage.clone() * 8, ..bars.clone() };
        let k0 = kt * bk;
        // This CTA's slice of B (none but the whole tile without a cluster),
        // sent to every CTA of the cluster.
        let rank = self.cluster_rank();
        let multicast = rank.is_some().then(|| ((1u32 << c) - 1) as u16);
        let slice = |rows: i64| rank.clone().map(|r| r * rows);
        let plus = |e: Expr, d: Option<Expr>| d.map_or(e.clone(), |d| e + d);
        let mut out = vec![
            Stmt::Sm90(Sm90Stmt::MbarrierArriveExpectTx { bar: bar.clone(), bytes: (a_stage + b_stage) as u32 }),
            Stmt::Sm90(Sm90Stmt::TmaLoad {
                dst: SmemRef { offset: stage.clone() * a_stage, ..ids.a_smem.clone() },
                map: maps[0],
                coords: [k0.clone(), ids.bm.clone()],
                bar: bar.clone(),
                multicast: None,
            }),
        ];
        match self.gemm.b_layout {
            BLayout::KN => {
                for j in 0..bn / ATOM_COLS {
                    let atom = stage.clone() * b_stage + j * ATOM_COLS * bk * es;
                    out.push(Stmt::Sm90(Sm90Stmt::TmaLoad {
                        dst: SmemRef { offset: plus(atom, slice(bk / c * ROW_BYTES)), ..ids.b_smem.clone() },
                        map: maps[1],
                        coords: [ids.bn.clone() + j * ATOM_COLS, plus(k0.clone(), slice(bk / c))],
                        bar: bar.clone(),
                        multicast,
                    }));
                }
            }
            BLayout::NK => out.push(Stmt::Sm90(Sm90Stmt::TmaLoad {
                dst: SmemRef { offset: plus(stage * b_stage, slice(bn / c * bk * es)), ..ids.b_smem.clone() },
                map: maps[1],
                coords: [k0, plus(ids.bn.clone(), slice(bn / c))],
                bar,
                multicast,
            })),
        }
        out
    }

    /// The `wgmma`s of one k-tile on ring stage `stage`, then the wait
    /// that retires the previous k-tile's (after which its stage may be
    /// refilled).
    fn wgmma_ktile(&mut self, ids: &Ids, warpgroup: &Expr, stage: Expr) -> Vec<Stmt> {
        let (bm, bn, bk) = (self.sh.bm, self.sh.bn, self.sh.bk);
        let es = self.gemm.ab.size_bytes() as i64;
        let (a_stage, b_stage) = (bm * bk * es, bn * bk * es);
        let trans_b = self.gemm.b_layout == BLayout::KN;
        let ab = self.gemm.ab;
        let mut out = vec![Stmt::Sm90(Sm90Stmt::WgmmaFence)];
        self.for_unrolled(&mut out, "ks", bk / 16, |_, ks| {
            let a = MatrixDesc {
                start: SmemRef {
                    offset: stage.clone() * a_stage + warpgroup.clone() * (64 * ROW_BYTES) + ks.clone() * (16 * es),
                    ..ids.a_smem.clone()
                },
                lbo: 16,
                sbo: 8 * ROW_BYTES as u32,
            };
            let b = if trans_b {
                MatrixDesc {
                    start: SmemRef { offset: stage.clone() * b_stage + ks * (16 * ROW_BYTES), ..ids.b_smem.clone() },
                    lbo: (ATOM_COLS * bk * es) as u32,
                    sbo: 8 * ROW_BYTES as u32,
                }
            } else {
                MatrixDesc {
                    start: SmemRef { offset: stage.clone() * b_stage + ks * (16 * es), ..ids.b_smem.clone() },
                    lbo: 16,
                    sbo: 8 * ROW_BYTES as u32,
                }
            };
            let (d, a) = (RegRef { reg: ids.acc, index: Expr::c(0) }, WgmmaA::Smem(a));
            vec![Stmt::Sm90(Sm90Stmt::Wgmma { ab, n: bn as u32, d, a, b, trans_b, scale_d: true })]
        });
        out.extend([Stmt::Sm90(Sm90Stmt::WgmmaCommit), Stmt::Sm90(Sm90Stmt::WgmmaWait { pending: 1 })]);
        out
    }

    /// The warp-specialised body (`warp_specialize`, TMA copies; the module
    /// doc's second form): warpgroup 0 is the producer, whose thread 0
    /// fills the ring as stages come free; warpgroups `1..=BM/64` compute,
    /// warpgroup `1 + g` rows `64g..64g+63`, and release each stage once
    /// the `wgmma`s that read it retired. `full[s]` completes when stage
    /// `s`'s copies landed, `empty[s]` when every consumer warpgroup released
    /// it; the producer's first pass over the ring waits on the phase
    /// before `empty`'s first (parity 1), which has completed. Both roles
    /// count the ring's uses `it = i · ktiles + kt` over this CTA's tiles
    /// `i` (one, or with `persistent` those of [`Builder::tiles`]), so the
    /// ring and its phases run on from one tile into the next.
    fn body_sm90_specialized(&mut self, p: &GemmParams, ops: &[Epi], maps: [ParamId; 2]) {
        let (bm, bn, bk, stages, cluster) = (self.sh.bm, self.sh.bn, self.sh.bk, self.sh.stages, self.sh.cluster());
        let es = self.gemm.ab.size_bytes() as i64;
        let producer = PRODUCER_THREADS as i64;
        let consumers = bm / 64 * 128;
        self.k.block = [(producer + consumers) as u32, 1, 1];
        self.k.cluster = cluster as u32;
        self.k.min_blocks_per_sm = Some(1);
        let a_smem = self.smem_1024("As", stages * bm * bk * es, Swizzle::B128);
        let b_smem = self.smem_1024("Bs", stages * bn * bk * es, Swizzle::B128);
        let full = self.k.add_smem("full", 8 * stages as u64, Swizzle::IDENTITY);
        let empty = self.k.add_smem("empty", 8 * stages as u64, Swizzle::IDENTITY);
        let at = |bars: &SmemRef, s: Expr| SmemRef { offset: s * 8, ..bars.clone() };
        let acc = self.regs("acc", RegKind::F32, bn / 2);
        let [producer_regs, consumer_regs] =
            crate::plan::resources::specialized_regs(consumers as u64, &crate::plan::target::SM90).map(|r| r as u32);

        let mut out = Vec::new();
        let ktiles = self.let_(&mut out, "ktiles", (Expr::Param(p.k) + (bk - 1)) / bk);
        let tiles = self.tiles(p, &mut out);
        let mut init = Vec::new();
        self.for_unrolled(&mut init, "s", stages, |_, s| {
            vec![
                Stmt::Sm90(Sm90Stmt::MbarrierInit { bar: at(&full, s.clone()), count: 1 }),
                Stmt::Sm90(Sm90Stmt::MbarrierInit { bar: at(&empty, s), count: (consumers / 128 * cluster) as u32 }),
            ]
        });
        init.push(Stmt::Sm90(Sm90Stmt::FenceMbarrierInit));
        out.push(Stmt::If { cond: Expr::ThreadIdx(Dim::X).eq(0), then: init, otherwise: Vec::new() });
        // A cluster's peers multicast into this CTA's ring and release its
        // stages: its mbarriers are initialised before any peer goes on.
        out.push(if cluster > 1 { Stmt::Sm90(Sm90Stmt::ClusterSync) } else { Stmt::Barrier });

        // The consumers' ids, counted from their first thread.
        let mut consumer = vec![Stmt::Sm90(Sm90Stmt::SetMaxNReg { inc: true, regs: consumer_regs })];
        let tid = self.let_(&mut consumer, "tid", Expr::ThreadIdx(Dim::X) - producer);
        let lane = self.let_(&mut consumer, "lane", tid.clone() % 32);
        let warp = self.let_(&mut consumer, "warp", tid.clone() / 32);
        let warpgroup = self.let_(&mut consumer, "warpgroup", tid.clone() / 128);
        let ids = Ids {
            tid,
            lane,
            wm: warp.clone(),
            wn: Expr::c(0),
            warp,
            bm: Expr::c(0),
            bn: Expr::c(0),
            kt0: Expr::c(0),
            ktiles,
            a_smem,
            b_smem,
            acc,
            batch: Vec::new(),
            c_batch: Expr::c(0),
        };
        let use_of = |i: &Expr, kt: Expr| match i {
            Expr::Const(0) => kt,
            i => i.clone() * ids.ktiles.clone() + kt,
        };
        // Thread 0 of each consumer warpgroup releases a stage, after the
        // warpgroup's `wgmma.wait_group` retired its reads, to every CTA of
        // the cluster (whose producers all write the stage): one arrival
        // per warpgroup and CTA, as CUTLASS's
        // `PipelineTmaAsync::consumer_release`.
        let first_of_group = self.let_(&mut consumer, "wg_tid", ids.tid.clone() % 128).eq(0);
        let release = |stage: Expr| {
            let arrive = |r: i64| {
                Stmt::Sm90(Sm90Stmt::MbarrierArrive {
                    bar: at(&empty, stage.clone()),
                    cta: (cluster > 1).then(|| Expr::c(r)),
                })
            };
            Stmt::If { cond: first_of_group.clone(), then: (0..cluster).map(arrive).collect(), otherwise: Vec::new() }
        };

        let mut fill_tiles = Vec::new();
        self.tile_loop(&mut fill_tiles, &tiles, |b, i, block_m, block_n| {
            let kt = b.var("kt");
            let mut fill = Vec::new();
            let it = b.let_(&mut fill, "it", use_of(&i, Expr::Var(kt)));
            let stage = b.let_(&mut fill, "stage", it.clone() % stages);
            fill.push(Stmt::Sm90(Sm90Stmt::MbarrierWait {
                bar: at(&empty, stage.clone()),
                parity: (it / stages + 1) % 2,
            }));
            let ids = Ids { bm: block_m, bn: block_n, ..ids.clone() };
            fill.extend(b.issue_tma(&ids, maps, &full, stage, Expr::Var(kt)));
            vec![Stmt::For { var: kt, start: Expr::c(0), end: ids.ktiles.clone(), step: 1, unroll: false, body: fill }]
        });
        let producer_body = vec![
            Stmt::Sm90(Sm90Stmt::SetMaxNReg { inc: false, regs: producer_regs }),
            Stmt::If { cond: Expr::ThreadIdx(Dim::X).eq(0), then: fill_tiles, otherwise: Vec::new() },
        ];

        self.tile_loop(&mut consumer, &tiles, |b, i, block_m, block_n| {
            let mut tile = Vec::new();
            b.for_unrolled(&mut tile, "i", bn / 2, |_, r| {
                vec![Stmt::Mma(MmaStmt::MovF32 { dst: RegRef { reg: acc, index: r }, value: 0.0 })]
            });
            // As in the lockstep form: the zeroing stays before the k loop.
            tile.push(Stmt::Sm90(Sm90Stmt::WgmmaFence));
            let kt = b.var("kt");
            let kt_e = Expr::Var(kt);
            let mut main = Vec::new();
            let it = b.let_(&mut main, "it", use_of(&i, kt_e.clone()));
            let stage = b.let_(&mut main, "stage", it.clone() % stages);
            main.push(Stmt::Sm90(Sm90Stmt::MbarrierWait {
                bar: at(&full, stage.clone()),
                parity: it.clone() / stages % 2,
            }));
            main.extend(b.wgmma_ktile(&ids, &warpgroup, stage));
            // The previous k-tile's wgmmas retired: its stage is free.
            main.push(Stmt::If {
                cond: Expr::c(0).lt(kt_e.clone()),
                then: vec![release((it + (stages - 1)) % stages)],
                otherwise: Vec::new(),
            });
            tile.push(Stmt::For {
                var: kt,
                start: Expr::c(0),
                end: ids.ktiles.clone(),
                step: 1,
                unroll: false,
                body: main,
            });
            tile.push(Stmt::Sm90(Sm90Stmt::WgmmaWait { pending: 0 }));
            // And so is the last k-tile's: the next tile's copies may use it.
            let last = use_of(&i, ids.ktiles.clone() - 1) % stages;
            tile.push(Stmt::If {
                cond: Expr::c(0).lt(ids.ktiles.clone()),
                then: vec![release(last)],
                otherwise: Vec::new(),
            });
            let ids = Ids { bm: block_m.clone(), bn: block_n, ..ids.clone() };
            let mut epilogue = b.epilogue(p, &ids, ops);
            name_barriers(&mut epilogue, CONSUMER_BARRIER, consumers as u32);
            if cluster > 1 {
                // The second CTA of the last pair may lie below M: it loads
                // its slice of B for its peer and stores nothing.
                epilogue = vec![Stmt::If { cond: block_m.lt(Expr::Param(p.m)), then: epilogue, otherwise: Vec::new() }];
            }
            tile.extend(epilogue);
            tile
        });
        out.push(Stmt::WarpSpecialize { producer_threads: producer as u32, producer: producer_body, consumer });
        if cluster > 1 {
            // No CTA exits while a peer may still multicast into it or
            // release its stages.
            out.push(Stmt::Sm90(Sm90Stmt::ClusterSync));
        }
        self.k.body = out;
    }

    /// The grid and this CTA's tiles. One CTA per `BM × BN` tile, the grid
    /// `(⌈N/BN⌉, ⌈M/BM⌉)`; or with `persistent` one CTA per SM (at most one
    /// per tile) on the grid's `x`: `min(tiles, 132)` for the sm90 row,
    /// fewer where the runtime finds fewer SMs ([`crate::gpu::dialect::Kernel::persistent`]),
    /// each taking the tiles `blockIdx.x + i · gridDim.x` (`N` fastest, as
    /// `bind n.o block.x` orders them).
    ///
    /// In a cluster of `c` CTAs the unit is a column of `c` tiles, the
    /// cluster's, rank `r` (`blockIdx.x % c`) taking the `r`-th: the grid
    /// is `(c·⌈N/BN⌉, ⌈M/(c·BM)⌉)`, or `c · min(units, ⌊132/c⌋)` CTAs for
    /// `persistent`, cluster `blockIdx.x / c` taking the units
    /// `blockIdx.x / c + i · gridDim.x / c`.
    fn tiles(&mut self, p: &GemmParams, out: &mut Vec<Stmt>) -> Tiles {
        let (bm, bn, c) = (self.sh.bm, self.sh.bn, self.sh.cluster());
        let rows = (Expr::Param(p.m) + (c * bm - 1)) / (c * bm);
        let tiles_n = (Expr::Param(p.n) + (bn - 1)) / bn;
        let per_cluster = |e: Expr| if c == 1 { e } else { e * c };
        if !self.sh.persistent() {
            self.k.grid = [per_cluster(tiles_n), rows, Expr::c(1)];
            return Tiles::Grid;
        }
        // At most one CTA per SM: the row's 132 here, the device's when the
        // runtime launches it (`Kernel::persistent`, whole clusters); the
        // tile walk follows `gridDim.x`.
        let clusters = crate::plan::target::SM90.sm_count as i64 / c;
        let units = Expr::bin(BinOp::Min, rows.clone() * tiles_n.clone(), Expr::c(clusters));
        self.k.grid = [per_cluster(units), Expr::c(1), Expr::c(1)];
        self.k.persistent = true;
        let tiles_n = self.let_(out, "tiles_n", tiles_n);
        let count = self.let_(out, "tiles", rows * tiles_n.clone());
        let (first, ctas) = match c {
            1 => (Expr::BlockIdx(Dim::X), Expr::GridDim(Dim::X)),
            c => (Expr::BlockIdx(Dim::X) / c, Expr::GridDim(Dim::X) / c),
        };
        let ctas = self.let_(out, "ctas", ctas);
        let mine = self.let_(out, "my_tiles", (count - first.clone() + ctas.clone() - 1) / ctas.clone());
        Tiles::Persistent { tiles_n, first, ctas, mine }
    }

    /// `f(i, block_m, block_n)` for each of this CTA's tiles `i`: once (`i`
    /// = 0, the tile of `blockIdx`), or in a loop over [`Tiles::Persistent`]'s.
    fn tile_loop(
        &mut self,
        out: &mut Vec<Stmt>,
        tiles: &Tiles,
        f: impl FnOnce(&mut Self, Expr, Expr, Expr) -> Vec<Stmt>,
    ) {
        let (bm, bn, c) = (self.sh.bm, self.sh.bn, self.sh.cluster());
        // The row of tiles of unit row `u` this CTA takes: its rank's.
        let rank = self.cluster_rank();
        let row = |u: Expr| match rank.clone() {
            None => u * bm,
            Some(r) => (u * c + r) * bm,
        };
        let column = |x: Expr| if c == 1 { x * bn } else { x / c * bn };
        match tiles {
            Tiles::Grid => {
                let block_m = self.let_(out, "block_m", row(Expr::BlockIdx(Dim::Y)));
                let block_n = self.let_(out, "block_n", column(Expr::BlockIdx(Dim::X)));
                let body = f(self, Expr::c(0), block_m, block_n);
                out.extend(body);
            }
            Tiles::Persistent { tiles_n, first, ctas, mine } => {
                let i = self.var("i_tile");
                let mut body = Vec::new();
                let tile = self.let_(&mut body, "tile", first.clone() + Expr::Var(i) * ctas.clone());
                let block_m = self.let_(&mut body, "block_m", row(tile.clone() / tiles_n.clone()));
                let block_n = self.let_(&mut body, "block_n", tile % tiles_n.clone() * bn);
                body.extend(f(self, Expr::Var(i), block_m, block_n));
                out.push(Stmt::For { var: i, start: Expr::c(0), end: mine.clone(), step: 1, unroll: false, body });
            }
        }
    }
}

/// Which tiles a CTA of the warp-specialised kernel computes
/// ([`Builder::tiles`]).
enum Tiles {
    /// The one of its `blockIdx`.
    Grid,
    /// `first + i · ctas` for `i` in `0..mine`, `tiles_n` tiles (or units
    /// of a cluster's tiles) a row.
    Persistent { tiles_n: Expr, first: Expr, ctas: Expr, mine: Expr },
}

/// The named barrier (`bar.sync 1, threads`) of a warp-specialised
/// kernel's consumer role; 0 is `bar.sync 0`'s, the whole CTA's.
const CONSUMER_BARRIER: u32 = 1;

/// Rewrites every `bar.sync 0` in `body` as the named barrier `id` of
/// `threads` threads: the epilogue of the consumer role synchronises its
/// own threads, not the producer's.
fn name_barriers(body: &mut [Stmt], id: u32, threads: u32) {
    for s in body {
        if *s == Stmt::Barrier {
            *s = Stmt::BarrierNamed { id, threads };
        }
        for body in s.children_mut() {
            name_barriers(body, id, threads);
        }
    }
}

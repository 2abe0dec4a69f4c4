//! The MMA template (`000` §1.8, `001` §6,
//! §12): from a Schedule [`Plan`] and a [`Gemm`] problem, a [`Kernel`] for `C[M,N] = epilogue(A[M,K] · B)`
//! with `B` stored `[K,N]` or `[N,K]` — this file the problem, the builder
//! and its sm80 branch (`mma.sync`); `sm90.rs` the sm90 branch (`wgmma`,
//! TMA); `epilogue.rs` the epilogue and stores; `implicit.rs` the implicit
//! GEMM's loader; [`recognise`] the graph recogniser; [`lower`] the
//! template's entry (plan choice, the kernel as a one-launch program).
//!
//! Skeleton (CUTLASS's multistage SM80 GEMM):
//!
//! ```text
//! acc = 0
//! for s in 0..stages-1: if s < ktiles { copy tile s → stage s }; commit
//! for kt in 0..ktiles:
//!     wait_group(stages-2); bar.sync          // tile kt landed, stage kt-1 free
//!     if kt+stages-1 < ktiles { copy tile kt+stages-1 → its stage }; commit
//!     for each k16 step: ldmatrix.x4 A, ldmatrix.x4(.trans) B, mma.sync m16n8k16
//! wait_group 0
//! epilogue on the accumulator fragments; st.global.v{vs} (staged through shared memory)
//! ```
//!
//! - Block: `(BM/WM)·(BN/WN)` warps, warp `w` at `(w / (BN/WN), w % (BN/WN))`
//!   (`bind m.i.o warp.y`, `n.i.o warp.x`); grid `(⌈N/BN⌉, ⌈M/BM⌉)`
//!   (`bind n.o block.x`, `m.o block.y`).
//! - Operands go to shared memory in `stages` ring buffers, one row of the
//!   tile per row of the buffer, swizzled by [`Swizzle::for_rows`] (when the
//!   plan's `A_swizzle`/`B_swizzle` hint is not `false`) so each `ldmatrix`
//!   phase touches 8 distinct 16-byte bank groups.
//! - Copies are `cp.async` of `min(vectorize width, 8, alignment)` elements
//!   when that is at least 4 bytes, else synchronous (`CopySync`); a tail
//!   (rows past `M`/`N`, columns past `K`) is zero-filled through
//!   `src_bytes` when the axis is in `predicate_tail`, and the source
//!   address is clamped to the tensor's start when nothing is read.
//! - Fragments: per warp `MI = WM/16` A tiles (`afrag[4·MI]`), `NI = WN/8`
//!   B tiles (`bfrag[2·NI]`, two per `ldmatrix.x4`), `acc[4·MI·NI]` in f32.
//! - Epilogue (§8 of `001`): on each accumulator register, in f32: an
//!   optional rounding to the operand dtype (the graph's `CAST` of the sum,
//!   `001` §0), then the plan's `epilogue` ops in order; the store rounds to
//!   the output dtype. Stores are `vs = min(16 bytes, vectorize width,
//!   C's alignment)` elements wide: for `vs > 2` each warp stages its
//!   16-row slices of C in shared memory (`Cs`, over the dead operand
//!   buffers when it fits; `000` §5's `epilogue_smem`) and reads them back
//!   as `vs`-element rows for one `st.global` each; else each thread stores
//!   its fragment's pairs of adjacent columns. A vector that would cross
//!   the `N` tail falls back to predicated single-element stores.
//!
//! Not built here (errors `Unsupported`): warp tiles whose `WN` is not a
//! multiple of 16.

use crate::diag;
use crate::diag::DResult;
use crate::plan::{AlgoChoice, AlgoKey, Epilogue, HintValue, MatmulAlgo, Plan};
use crate::DType;

use super::dialect::*;

mod epilogue;
mod implicit;
pub mod lower;
pub mod recognise;
mod sm90;

#[cfg(test)]
mod epilogue_tests;
#[cfg(test)]
pub(crate) mod implicit_tests;
#[cfg(test)]
mod sm90_tests;
#[cfg(test)]
pub(crate) mod tests;

pub use implicit::{Access, Affine, Axis, Digit, Implicit};
pub use sm90::uses_tma;

/// How `B` is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BLayout {
    /// `B[K,N]` row-major (`ldb ≥ N`); read with `ldmatrix.trans`.
    KN,
    /// `B[N,K]` row-major, i.e. `Bᵀ` (`ldb ≥ K`); read with `ldmatrix`.
    NK,
}

/// The GEMM a kernel computes, beyond what the plan says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gemm {
    /// Operand dtype of `A` and `B` (f16 or bf16); bias and residual have it too.
    pub ab: DType,
    /// Output dtype (f16, bf16 or f32).
    pub out: DType,
    pub b_layout: BLayout,
    /// Round the f32 sum to `ab` before the epilogue (`001` §0's `CAST`).
    pub round_sum: bool,
    /// Elements that the leading dimensions `lda`, `ldb` (and `ldc` for
    /// `align_c`) are known to be multiples of (1, 2, 4 or 8); tensors
    /// start 256-byte aligned.
    pub align_a: u32,
    pub align_b: u32,
    pub align_c: u32,
    /// The operands' affine addresses of an implicit GEMM ([`Implicit`]);
    /// `None`: `A`, `B`, `C` row-major with the `lda`, `ldb`, `ldc`
    /// parameters. With it the kernel reads only `M`, `N`, `K` (the
    /// digits' products) and `ldc` (`N`) of its scalars, the `align_*`
    /// fields are the copy widths [`Implicit::vector_width`] allows.
    pub implicit: Option<Implicit>,
}

/// The kernel's parameters, in ABI order, as [`ParamId`]s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmParams {
    pub a: ParamId,
    pub b: ParamId,
    pub bias: Option<ParamId>,
    pub residual: Option<ParamId>,
    pub c: ParamId,
    /// SM90 with TMA only: the tensor maps of `A` and `B`
    /// ([`ParamKind::TensorMap`]), which the host makes from `A`, `B` and
    /// the scalars.
    pub tensor_maps: Option<[ParamId; 2]>,
    pub m: ParamId,
    pub n: ParamId,
    pub k: ParamId,
    pub lda: ParamId,
    pub ldb: ParamId,
    /// The leading dimension of `C` and of the residual.
    pub ldc: ParamId,
}

/// The plan's numbers the template reads.
struct Shape {
    bm: i64,
    bn: i64,
    bk: i64,
    wm: i64,
    wn: i64,
    stages: i64,
    vec: i64,
    pred: [bool; 3],
    swizzle: [bool; 2],
    /// `warp_specialize [persistent]`: a producer warpgroup before the
    /// computing ones (the SM90 branch with TMA copies), and whether one
    /// CTA per SM walks the tiles.
    specialize: Option<crate::plan::Specialize>,
}

impl Shape {
    /// `warp_specialize persistent`.
    fn persistent(&self) -> bool {
        self.specialize.is_some_and(|s| s.persistent)
    }

    /// CTAs per cluster (`warp_specialize … cluster=N`; 1 without).
    fn cluster(&self) -> i64 {
        self.specialize.map_or(1, |s| s.cluster as i64)
    }
}

fn shape(plan: &Plan) -> DResult<Shape> {
    let unsupported = |m: &str| diag!(Unsupported, "the SM80 template needs {m}");
    let [bm, bn, bk] = plan.tile.as_ref().ok_or_else(|| unsupported("a `tile`"))?.value;
    let [wm, wn] = plan.warp_tile.as_ref().ok_or_else(|| unsupported("a `warp_tile`"))?.value;
    let stages = plan.pipeline.as_ref().ok_or_else(|| unsupported("`pipeline ... stages=2|3`"))?.value.stages.value;
    if plan.warp_specialize.is_some() {
        return Err(unsupported("no `warp_specialize` (the SM90 branch's form)"));
    }
    if !(2..=3).contains(&stages) {
        return Err(unsupported("2 or 3 stages"));
    }
    if bm % wm != 0 || bn % wn != 0 || wm % 16 != 0 || wn % 16 != 0 || bk % 16 != 0 || bm == 0 || bn == 0 || bk == 0 {
        return Err(diag!(
            Unsupported,
            "the SM80 template needs BM, BN multiples of the warp tile, WM and BK multiples of 16 and WN of 16 \
             (tile {bm}x{bn}x{bk}, warp tile {wm}x{wn})"
        ));
    }
    match crate::plan::cost::algorithm(plan, AlgoKey::Matmul) {
        None | Some(AlgoChoice::Matmul(MatmulAlgo::ImplicitGemm)) => {}
        Some(other @ (AlgoChoice::Conv(_) | AlgoChoice::Attention(_))) => {
            return Err(diag!(Internal, "algo_choice matmul holds `{other}`"))
        }
    }
    let target = Arch::Sm80.target();
    let threads = (bm / wm) * (bn / wn) * target.warp_size;
    if threads > target.max_threads_per_block {
        return Err(diag!(
            ResourceExceeded,
            "{threads} threads per block (warp tile {wm}x{wn} in tile {bm}x{bn}) exceed {}",
            target.max_threads_per_block
        ));
    }
    let vec = plan.vectorize.as_ref().map_or(8, |v| v.value.width.value) as i64;
    let tail = |root: &str| plan.predicate_tail.iter().any(|a| a.value.split('.').next() == Some(root));
    let hint =
        |key: &str| !plan.layout_hints.iter().any(|h| h.value.key == key && h.value.value == HintValue::Bool(false));
    Ok(Shape {
        bm: bm as i64,
        bn: bn as i64,
        bk: bk as i64,
        wm: wm as i64,
        wn: wn as i64,
        stages: stages as i64,
        vec,
        pred: [tail("m"), tail("n"), tail("k")],
        swizzle: [hint("A_swizzle"), hint("B_swizzle")],
        specialize: None,
    })
}

/// Builds the kernel for `plan` (validated by [`crate::plan::validate`]
/// for `sm80` or `sm90`) and `gemm`, and its parameter ids.
///
/// Parameters: `A`, `B`, then `bias` when the epilogue has `bias`,
/// `residual` when it has `residual`, then `C`, and the `i32` scalars `M`,
/// `N`, `K`, `lda`, `ldb`, `ldc`.
///
/// Errors: `Unsupported` for what the module doc lists, for a plan without
/// `tile`, `warp_tile` or `pipeline stages=2|3`, and for operand or output
/// dtypes other than those [`Gemm`] names; `ResourceExceeded` for more
/// threads than the target's `max_threads_per_block`.
pub fn build(plan: &Plan, gemm: &Gemm) -> DResult<(Kernel, GemmParams)> {
    if !matches!(gemm.ab, DType::F16 | DType::BF16) || !matches!(gemm.out, DType::F16 | DType::BF16 | DType::F32) {
        return Err(diag!(
            Unsupported,
            "the SM80 template takes f16/bf16 operands and f16/bf16/f32 output, not {} → {}",
            gemm.ab.dsl_name(),
            gemm.out.dsl_name()
        ));
    }
    for al in [gemm.align_a, gemm.align_b, gemm.align_c] {
        if !matches!(al, 1 | 2 | 4 | 8) {
            return Err(diag!(Unsupported, "alignment {al}: not 1, 2, 4 or 8 elements"));
        }
    }
    if let Some(im) = &gemm.implicit {
        check_implicit(im)?;
    }
    let arch = match plan.arch.as_ref().map(|a| a.value.as_str()) {
        None | Some("sm80") => Arch::Sm80,
        Some("sm90") => Arch::Sm90,
        Some(a) => return Err(diag!(Unsupported, "the MMA template does not target `{a}`")),
    };
    let sh = match arch {
        Arch::Sm80 => shape(plan)?,
        Arch::Sm90 => sm90::shape(plan, gemm)?,
    };
    let names: Vec<Epilogue> = plan.epilogue.iter().map(|e| e.value).collect();
    let name = format!("gemm_{}", arch.name());
    let mut b = Builder { k: Kernel::empty(&name, arch), sh, gemm: gemm.clone(), hoisted: Vec::new() };
    let ptr = |dtype, writable| ParamKind::Ptr { dtype, writable };
    let a = b.param("A", ptr(gemm.ab, false));
    let bp = b.param("B", ptr(gemm.ab, false));
    let bias = names.contains(&Epilogue::Bias).then(|| b.param("bias", ptr(gemm.ab, false)));
    let residual = names.contains(&Epilogue::Residual).then(|| b.param("residual", ptr(gemm.ab, false)));
    let c = b.param("C", ptr(gemm.out, true));
    let [m, n, k, lda, ldb, ldc] = ["M", "N", "K", "lda", "ldb", "ldc"].map(|s| b.param(s, ParamKind::I32));
    let tensor_maps = (arch == Arch::Sm90 && sm90::uses_tma(gemm)).then(|| {
        let [a_map, b_map] = sm90::tensor_maps(&b.sh, gemm, [a, bp], [m, n, k, lda, ldb]);
        [b.param("A_map", ParamKind::TensorMap(a_map)), b.param("B_map", ParamKind::TensorMap(b_map))]
    });
    let p = GemmParams { a, b: bp, bias, residual, c, tensor_maps, m, n, k, lda, ldb, ldc };
    let mut ops = Vec::new();
    if gemm.round_sum {
        ops.push(Epi::Cast(gemm.ab));
    }
    for name in names {
        ops.push(match name {
            Epilogue::Bias => Epi::Bias(bias.unwrap_or(p.c)),
            Epilogue::Relu => Epi::Relu,
            Epilogue::Silu => Epi::Silu,
            Epilogue::Gelu => Epi::Gelu,
            Epilogue::GeluTanh => Epi::GeluTanh,
            Epilogue::Tanh => Epi::Tanh,
            Epilogue::Residual => Epi::Residual(residual.unwrap_or(p.c)),
        });
    }
    match arch {
        Arch::Sm80 => b.body(&p, &ops),
        Arch::Sm90 => b.body_sm90(&p, &ops),
    }
    Ok((b.k, p))
}

/// The invariants [`Builder`] relies on for an implicit GEMM: digits ≥ 1,
/// `M`, `N`, `K` not empty, each access's terms on its own axes and
/// digits.
fn check_implicit(im: &Implicit) -> DResult<()> {
    let bad = |why: String| Err(diag!(Internal, "implicit GEMM: {why}"));
    for axis in [Axis::Batch, Axis::M, Axis::N, Axis::K] {
        let ds = im.digits(axis);
        if ds.iter().any(|&e| e < 1) || (axis != Axis::Batch && ds.is_empty()) {
            return bad(format!("{axis:?} digits {ds:?}"));
        }
    }
    if let Some(axis) = im.pool {
        let ds = im.digits(axis);
        if !matches!(axis, Axis::M | Axis::N) || ds.len() < 2 || ds[ds.len() - 2..] != [2, 2] {
            return bad(format!("a pool on {axis:?} digits {ds:?}"));
        }
    }
    let mut affines: Vec<(&str, &Affine, &[Axis])> = vec![
        ("A", &im.a.offset, &[Axis::Batch, Axis::M, Axis::K]),
        ("B", &im.b.offset, &[Axis::Batch, Axis::K, Axis::N]),
        ("C", &im.c_batch, &[Axis::Batch]),
    ];
    affines.extend(im.a.guards.iter().map(|g| ("an A guard", g, &[Axis::Batch, Axis::M, Axis::K][..])));
    affines.extend(im.b.guards.iter().map(|g| ("a B guard", g, &[Axis::Batch, Axis::K, Axis::N][..])));
    if let Some(bias) = &im.bias {
        affines.push(("bias", bias, &[Axis::Batch, Axis::M, Axis::N]));
    }
    for (what, a, axes) in affines {
        if let Some((d, _)) =
            a.terms.iter().find(|(d, _)| !axes.contains(&d.axis) || d.index >= im.digits(d.axis).len())
        {
            return bad(format!("{what} reads digit {} of {:?}", d.index, d.axis));
        }
    }
    Ok(())
}

/// One epilogue op before its operand offsets are known.
#[derive(Clone, Copy, Debug)]
enum Epi {
    Cast(DType),
    Bias(ParamId),
    Relu,
    Silu,
    Gelu,
    GeluTanh,
    Tanh,
    Residual(ParamId),
}

/// The most copies per thread of one operand tile that are unrolled.
pub(super) const MAX_UNROLLED_COPIES: i64 = 8;

struct Builder {
    k: Kernel,
    sh: Shape,
    gemm: Gemm,
    /// An implicit GEMM's operand copies with their fixed-axis values
    /// computed once before the k loop, by tag (see
    /// [`Builder::hoist_implicit`]).
    hoisted: Vec<(&'static str, Vec<implicit::Slot>)>,
}

/// The per-thread values every part of the kernel uses.
#[derive(Clone)]
struct Ids {
    tid: Expr,
    lane: Expr,
    warp: Expr,
    wm: Expr,
    wn: Expr,
    bm: Expr,
    bn: Expr,
    /// The first k tile of the CTA (0: every CTA runs all of them) and how many.
    kt0: Expr,
    ktiles: Expr,
    a_smem: SmemRef,
    b_smem: SmemRef,
    acc: RegId,
    /// An implicit GEMM's batch digits (of `blockIdx.z`); empty otherwise.
    batch: Vec<Expr>,
    /// The element offset of this batch point's `C` (0 without batch).
    c_batch: Expr,
}

impl Builder {
    fn param(&mut self, name: &str, kind: ParamKind) -> ParamId {
        self.k.add_param(name, kind)
    }

    fn var(&mut self, name: &str) -> VarId {
        self.k.add_var(name)
    }

    /// The threads that hold accumulators: the block's, less a
    /// warp-specialised kernel's producer warpgroup.
    fn computing_threads(&self) -> i64 {
        let producer = if self.sh.specialize.is_some() { crate::plan::resources::PRODUCER_THREADS as i64 } else { 0 };
        self.k.threads() as i64 - producer
    }

    fn let_(&mut self, out: &mut Vec<Stmt>, name: &str, value: Expr) -> Expr {
        let var = self.var(name);
        out.push(Stmt::Let { var, value });
        Expr::Var(var)
    }

    fn regs(&mut self, name: &str, kind: RegKind, len: i64) -> RegId {
        self.k.add_regs(name, kind, len as u32)
    }

    fn smem(&mut self, name: &str, size: i64, row_bytes: i64, swizzle: bool) -> SmemRef {
        self.k.add_smem(name, size as u64, row_swizzle(row_bytes, swizzle))
    }

    /// The `Let`s of the thread's and block's coordinates: `tid`, `lane`,
    /// `warp`, the warp's tile row and column (`warp_m`, `warp_n`: warp `w`
    /// at `(w / (BN/WN), w % (BN/WN))`), and the block tile's first row and
    /// column (`block_m`, `block_n`).
    fn thread_ids(&mut self, out: &mut Vec<Stmt>) -> [Expr; 7] {
        let (bm, bn, warps_n) = (self.sh.bm, self.sh.bn, self.sh.bn / self.sh.wn);
        let tid = self.let_(out, "tid", Expr::ThreadIdx(Dim::X));
        let lane = self.let_(out, "lane", tid.clone() % 32);
        let warp = self.let_(out, "warp", tid.clone() / 32);
        let wm = self.let_(out, "warp_m", warp.clone() / warps_n);
        let wn = self.let_(out, "warp_n", warp.clone() % warps_n);
        let block_m = self.let_(out, "block_m", Expr::BlockIdx(Dim::Y) * bm);
        let block_n = self.let_(out, "block_n", Expr::BlockIdx(Dim::X) * bn);
        [tid, lane, warp, wm, wn, block_m, block_n]
    }

    /// An implicit GEMM's batch digits (of `blockIdx.z`) and the element
    /// offset of this batch point's `C`: none and 0 without batch.
    fn batch_ids(&mut self, out: &mut Vec<Stmt>) -> (Vec<Expr>, Expr) {
        let batch_extents = self.gemm.implicit.as_ref().map(|im| im.batch.clone()).unwrap_or_default();
        let batch = self.k.split_digits(out, "batch", Expr::BlockIdx(Dim::Z), &batch_extents);
        let c_batch = match &self.gemm.implicit {
            Some(im) if !batch.is_empty() => {
                let at = im.c_batch.at(&[(implicit::Axis::Batch, &batch)]);
                self.let_(out, "c_batch", at)
            }
            _ => Expr::c(0),
        };
        (batch, c_batch)
    }

    /// `for v in 0..n unroll { f(v) }`.
    fn for_unrolled(&mut self, out: &mut Vec<Stmt>, name: &str, n: i64, f: impl FnOnce(&mut Self, Expr) -> Vec<Stmt>) {
        let var = self.var(name);
        let body = f(self, Expr::Var(var));
        out.push(Stmt::For { var, start: Expr::c(0), end: Expr::c(n), step: 1, unroll: true, body });
    }

    fn body(&mut self, p: &GemmParams, ops: &[Epi]) {
        let sh = &self.sh;
        let (bm, bn, bk, wm, wn, stages) = (sh.bm, sh.bn, sh.bk, sh.wm, sh.wn, sh.stages);
        let warps_n = bn / wn;
        let threads = (bm / wm) * warps_n * 32;
        let es = self.gemm.ab.size_bytes() as i64;
        let (mi_n, ni_n) = (wm / 16, wn / 8);
        self.k.block = [threads as u32, 1, 1];
        let param = Expr::Param;
        let z = self.gemm.implicit.as_ref().map_or(1, |im| im.extent(implicit::Axis::Batch));
        self.k.grid = [(param(p.n) + (bn - 1)) / bn, (param(p.m) + (bm - 1)) / bm, Expr::c(z)];
        let a_smem = self.smem("As", stages * bm * bk * es, bk * es, self.sh.swizzle[0]);
        let b_row = if self.gemm.b_layout == BLayout::KN { bn } else { bk };
        let b_smem = self.smem("Bs", stages * bn * bk * es, b_row * es, self.sh.swizzle[1]);
        let acc = self.regs("acc", RegKind::F32, mi_n * ni_n * 4);
        let afrag = self.regs("afrag", RegKind::B16x2, mi_n * 4);
        let bfrag = self.regs("bfrag", RegKind::B16x2, ni_n * 2);

        let mut out = Vec::new();
        let [tid, lane, warp, wm_e, wn_e, bm_e, bn_e] = self.thread_ids(&mut out);
        let (kt0, ktiles) = (Expr::c(0), self.let_(&mut out, "ktiles", (param(p.k) + (bk - 1)) / bk));
        let (batch, c_batch) = self.batch_ids(&mut out);
        let ids = Ids {
            batch,
            c_batch,
            tid,
            lane,
            warp,
            wm: wm_e,
            wn: wn_e,
            bm: bm_e,
            bn: bn_e,
            kt0,
            ktiles,
            a_smem,
            b_smem,
            acc,
        };
        self.for_unrolled(&mut out, "i", mi_n * ni_n * 4, |_, i| {
            vec![Stmt::Mma(MmaStmt::MovF32 { dst: RegRef { reg: acc, index: i }, value: 0.0 })]
        });
        self.hoist_implicit(p, &ids, &mut out);
        // Prologue: tiles 0..stages-1.
        self.for_unrolled(&mut out, "s", stages - 1, |b, s| {
            let loads = b.load_tiles(p, &ids, s.clone(), ids.kt0.clone() + s.clone());
            vec![
                Stmt::If { cond: s.lt(ids.ktiles.clone()), then: loads, otherwise: Vec::new() },
                Stmt::Mma(MmaStmt::CommitGroup),
            ]
        });
        let kt = self.var("kt");
        let kt_e = Expr::Var(kt);
        let mut main = vec![Stmt::Mma(MmaStmt::WaitGroup { pending: (stages - 2) as u32 }), Stmt::Barrier];
        let pf = self.let_(&mut main, "kt_next", kt_e.clone() + (stages - 1));
        let loads = self.load_tiles(p, &ids, pf.clone() % stages, ids.kt0.clone() + pf.clone());
        main.push(Stmt::If { cond: pf.lt(ids.ktiles.clone()), then: loads, otherwise: Vec::new() });
        main.push(Stmt::Mma(MmaStmt::CommitGroup));
        let stage = self.let_(&mut main, "stage", kt_e % stages);
        main.extend(self.compute(&ids, stage, afrag, bfrag));
        out.push(Stmt::For { var: kt, start: Expr::c(0), end: ids.ktiles.clone(), step: 1, unroll: false, body: main });
        out.push(Stmt::Mma(MmaStmt::WaitGroup { pending: 0 }));
        out.extend(self.epilogue(p, &ids, ops));
        self.k.body = out;
    }

    /// Copies of the A and B tiles of k-tile `kt` into ring stage `stage`.
    fn load_tiles(&mut self, p: &GemmParams, ids: &Ids, stage: Expr, kt: Expr) -> Vec<Stmt> {
        let [(a, ta), (b, tb)] = self.operands(p, ids, kt * self.sh.bk);
        let mut out = self.copy_tile(&a, ids, stage.clone(), ta);
        out.extend(self.copy_tile(&b, ids, stage, tb));
        out
    }

    /// The A and B tiles whose k columns (or rows) start at `k0`, with
    /// their tags.
    fn operands(&self, p: &GemmParams, ids: &Ids, k0: Expr) -> [(Operand, &'static str); 2] {
        let (bm, bn, bk) = (self.sh.bm, self.sh.bn, self.sh.bk);
        let es = self.gemm.ab.size_bytes() as i64;
        let [pm, pn, pk] = self.sh.pred;
        // A: BM rows (m) of BK columns (k).
        let a = Operand {
            param: p.a,
            ld: Expr::Param(p.lda),
            rows: bm,
            cols: bk,
            row0: ids.bm.clone(),
            col0: k0.clone(),
            row_end: Expr::Param(p.m),
            col_end: Expr::Param(p.k),
            pred: [pm, pk],
            align: self.gemm.align_a,
            smem: ids.a_smem.clone(),
            stage_bytes: bm * bk * es,
            implicit: self.gemm.implicit.as_ref().map(|im| im.tile(&im.a, Axis::M, Axis::K)),
            atom: None,
        };
        let b = match self.gemm.b_layout {
            BLayout::KN => Operand {
                param: p.b,
                ld: Expr::Param(p.ldb),
                rows: bk,
                cols: bn,
                row0: k0,
                col0: ids.bn.clone(),
                row_end: Expr::Param(p.k),
                col_end: Expr::Param(p.n),
                pred: [pk, pn],
                align: self.gemm.align_b,
                smem: ids.b_smem.clone(),
                stage_bytes: bk * bn * es,
                implicit: self.gemm.implicit.as_ref().map(|im| im.tile(&im.b, Axis::K, Axis::N)),
                // wgmma reads an MN-major B in 64-column atoms.
                atom: (self.k.arch == Arch::Sm90).then_some(sm90::ATOM_COLS),
            },
            BLayout::NK => Operand {
                param: p.b,
                ld: Expr::Param(p.ldb),
                rows: bn,
                cols: bk,
                row0: ids.bn.clone(),
                col0: k0,
                row_end: Expr::Param(p.n),
                col_end: Expr::Param(p.k),
                pred: [pn, pk],
                align: self.gemm.align_b,
                smem: ids.b_smem.clone(),
                stage_bytes: bn * bk * es,
                implicit: self.gemm.implicit.as_ref().map(|im| im.tile(&im.b, Axis::N, Axis::K)),
                atom: None,
            },
        };
        [(a, "a"), (b, "b")]
    }

    /// Chunk width `v`, chunks per tile row and per tile, and copies per
    /// thread of operand tile `o`.
    fn geometry(&self, o: &Operand) -> (i64, i64, i64, i64) {
        let threads = self.k.threads() as i64;
        let v =
            [8, 4, 2, 1].into_iter().find(|&v| v <= self.sh.vec && v <= o.align as i64 && o.cols % v == 0).unwrap_or(1);
        let per_row = o.cols / v;
        let chunks = o.rows * per_row;
        (v, per_row, chunks, (chunks + threads - 1) / threads)
    }

    /// The copies of one operand tile: each thread copies chunks of `v`
    /// elements, chunk `i·threads + tid` of the tile in row-major order.
    fn copy_tile(&mut self, o: &Operand, ids: &Ids, stage: Expr, tag: &str) -> Vec<Stmt> {
        if let Some(slots) = self.hoisted.iter().find(|h| h.0 == tag).map(|h| h.1.clone()) {
            return self.copy_hoisted(o, ids, stage, tag, &slots);
        }
        let es = self.gemm.ab.size_bytes() as i64;
        let threads = self.k.threads() as i64;
        let (v, per_row, chunks, iters) = self.geometry(o);
        let bytes = (v * es) as u32;
        let var = self.var(&format!("{tag}_i"));
        let mut body = Vec::new();
        let ch = self.let_(&mut body, &format!("{tag}_chunk"), Expr::Var(var) * threads + ids.tid.clone());
        let row = self.let_(&mut body, &format!("{tag}_row"), ch.clone() / per_row);
        let col = self.let_(&mut body, &format!("{tag}_col"), ch.clone() % per_row * v);
        let g_row = o.row0.clone() + row.clone();
        let g_col = o.col0.clone() + col.clone();
        // Elements of the chunk inside the tensor (the tail is zero-filled).
        let cols_in = if o.pred[1] { (o.col_end.clone() - g_col.clone()).max(0).min(v) } else { Expr::c(v) };
        let valid = if o.pred[0] { g_row.clone().lt(o.row_end.clone()).select(cols_in, 0) } else { cols_in };
        let (valid, at) = match &o.implicit {
            None => (valid, g_row * o.ld.clone() + g_col),
            Some(t) => {
                let rd = self.k.split_digits(&mut body, &format!("{tag}_r"), g_row, &t.rows.1);
                let cd = self.k.split_digits(&mut body, &format!("{tag}_c"), g_col, &t.cols.1);
                let digits = [(Axis::Batch, &ids.batch[..]), (t.rows.0, &rd[..]), (t.cols.0, &cd[..])];
                (t.access.inside(&digits).select(valid, 0), t.access.offset.at(&digits))
            }
        };
        let src_bytes = self.let_(&mut body, &format!("{tag}_bytes"), valid * es);
        let offset = Expr::c(0).lt(src_bytes.clone()).select(at, 0);
        let dst = o.smem_at(stage, row, col, es);
        let src = GlobalRef { param: o.param, offset };
        let copy = copy_stmt(dst, src, bytes, src_bytes);
        if chunks % threads == 0 {
            body.push(copy);
        } else {
            body.push(Stmt::If { cond: ch.lt(chunks), then: vec![copy], otherwise: Vec::new() });
        }
        // Unrolled up to `MAX_UNROLLED_COPIES` copies per thread: more (an
        // implicit GEMM's element copies) keep every address live at once
        // and spill.
        let unroll = iters <= MAX_UNROLLED_COPIES;
        vec![Stmt::For { var, start: Expr::c(0), end: Expr::c(iters), step: 1, unroll, body }]
    }

    /// The k16 steps on ring stage `stage`: ldmatrix A and B, then mma.
    fn compute(&mut self, ids: &Ids, stage: Expr, afrag: RegId, bfrag: RegId) -> Vec<Stmt> {
        let (bn, bk, wm, wn) = (self.sh.bn, self.sh.bk, self.sh.wm, self.sh.wn);
        let es = self.gemm.ab.size_bytes() as i64;
        let (mi_n, ni_n) = (wm / 16, wn / 8);
        let lane = ids.lane.clone();
        let layout = self.gemm.b_layout;
        let ab = self.gemm.ab;
        let a_stage = self.sh.bm * bk * es;
        let b_stage = bn * bk * es;
        let mut out = Vec::new();
        self.for_unrolled(&mut out, "ks", bk / 16, |b, ks| {
            let mut step = Vec::new();
            // A fragments: matrix l/8 is (rows +8·((l/8)%2), k +8·(l/16)).
            b.for_unrolled(&mut step, "mi", mi_n, |_, mi| {
                let row = ids.wm.clone() * wm + mi.clone() * 16 + lane.clone() % 8 + lane.clone() / 8 % 2 * 8;
                let col = ks.clone() * 16 + lane.clone() / 16 * 8;
                let src =
                    SmemRef { offset: stage.clone() * a_stage + row * (bk * es) + col * es, ..ids.a_smem.clone() };
                let dst = (0..4).map(|j| RegRef { reg: afrag, index: mi.clone() * 4 + j }).collect();
                vec![Stmt::Mma(MmaStmt::LdMatrix { num: LdMatrixNum::X4, trans: false, dst, src })]
            });
            // B fragments, two n8 tiles per ldmatrix.x4: matrices (b0, b1) of tile 2nj, then of 2nj+1.
            b.for_unrolled(&mut step, "nj", ni_n / 2, |_, nj| {
                let (offset, trans) = match layout {
                    BLayout::KN => {
                        let krow = ks.clone() * 16 + lane.clone() % 8 + lane.clone() / 8 % 2 * 8;
                        let ncol = ids.wn.clone() * wn + nj.clone() * 16 + lane.clone() / 16 * 8;
                        (krow * (bn * es) + ncol * es, true)
                    }
                    BLayout::NK => {
                        let nrow = ids.wn.clone() * wn + nj.clone() * 16 + lane.clone() % 8 + lane.clone() / 16 * 8;
                        let kcol = ks.clone() * 16 + lane.clone() / 8 % 2 * 8;
                        (nrow * (bk * es) + kcol * es, false)
                    }
                };
                let src = SmemRef { offset: stage.clone() * b_stage + offset, ..ids.b_smem.clone() };
                let dst = (0..4).map(|j| RegRef { reg: bfrag, index: nj.clone() * 4 + j }).collect();
                vec![Stmt::Mma(MmaStmt::LdMatrix { num: LdMatrixNum::X4, trans, dst, src })]
            });
            b.for_unrolled(&mut step, "mma_m", mi_n, |b, mi| {
                let mut inner = Vec::new();
                b.for_unrolled(&mut inner, "mma_n", ni_n, |_, ni| {
                    let reg = |r: RegId, base: Expr, n: i64| -> Vec<RegRef> {
                        (0..n).map(|j| RegRef { reg: r, index: base.clone() + j }).collect()
                    };
                    let c = reg(ids.acc, (mi.clone() * ni_n + ni.clone()) * 4, 4);
                    vec![Stmt::Mma(MmaStmt::MmaSync {
                        ab,
                        d: c.clone(),
                        a: reg(afrag, mi.clone() * 4, 4),
                        b: reg(bfrag, ni * 2, 2),
                        c,
                    })]
                });
                inner
            });
            step
        });
        out
    }
}

/// The swizzle of a buffer of rows of `row_bytes` ([`Swizzle::for_rows`]),
/// or none when `swizzle` is false or the rows are not a power of two.
pub(crate) fn row_swizzle(row_bytes: i64, swizzle: bool) -> Swizzle {
    if swizzle {
        Swizzle::for_rows(row_bytes as u64).unwrap_or(Swizzle::IDENTITY)
    } else {
        Swizzle::IDENTITY
    }
}

/// A copy of `bytes` from global to shared memory, `src_bytes` of them
/// read and the rest zero-filled: `cp.async` when it moves at least 4
/// bytes (its smallest size, PTX ISA "cp.async"), else synchronous.
fn copy_stmt(dst: SmemRef, src: GlobalRef, bytes: u32, src_bytes: Expr) -> Stmt {
    if bytes >= 4 {
        Stmt::Mma(MmaStmt::CpAsync { dst, src, bytes, src_bytes })
    } else {
        Stmt::Mma(MmaStmt::CopySync { dst, src, bytes, src_bytes })
    }
}

/// One operand tile's copy parameters: a `rows × cols` tile of a row-major
/// tensor with leading dimension `ld`, starting at `(row0, col0)`, inside
/// the tensor while `row < row_end` and `col < col_end`.
pub(super) struct Operand {
    param: ParamId,
    ld: Expr,
    rows: i64,
    cols: i64,
    row0: Expr,
    col0: Expr,
    row_end: Expr,
    col_end: Expr,
    /// Predicate rows, columns (`predicate_tail`).
    pred: [bool; 2],
    align: u32,
    smem: SmemRef,
    stage_bytes: i64,
    /// An implicit GEMM's operand: the element at `(row, col)` is at the
    /// access's offset for their digits, zero where a guard fails; `None`:
    /// `row · ld + col`.
    implicit: Option<implicit::Tile>,
    /// Columns per atom of an MN-major `wgmma` operand: the tile is stored
    /// as `cols / atom` blocks of `rows × atom` (the layout of
    /// [`MatrixDesc`]); `None`: rows of `cols`.
    atom: Option<i64>,
}

impl Operand {
    /// Where element `(row, col)` of ring stage `stage` of this tile lies
    /// in shared memory (before the swizzle), for elements of `es` bytes.
    fn smem_at(&self, stage: Expr, row: Expr, col: Expr, es: i64) -> SmemRef {
        let in_stage = match self.atom {
            None => row * (self.cols * es) + col * es,
            Some(a) => col.clone() / a * (self.rows * a * es) + row * (a * es) + col % a * es,
        };
        SmemRef { offset: stage * self.stage_bytes + in_stage, ..self.smem.clone() }
    }
}

//! The attention template's kernel builder, its sm80 (`mma.sync`) and
//! sm90 (`wgmma`) branches (`000` §7.3, `algo_choice.attention =
//! online_softmax | streaming_softmax_2pass`, [`Algorithm`]): `O =
//! softmax(Q·Kᵀ·scale + bias)·V` for one [`Attention`] on `mma.sync`
//! without writing the score matrix to memory.
//!
//! Skeleton of `online_softmax` (FlashAttention-2, Dao 2023), one CTA of
//! [`WARPS`] warps per [`BM`] query rows of one batch point (or
//! [`WIDE_WARPS`] per 128 rows: [`warp_choices`]), each warp owning 16
//! rows:
//!
//! ```text
//! copy Q tile → Qs; commit; copy K₀ → Ks[0]; commit; copy V₀ → Vs[0]; commit
//! wait_group 2; bar.sync; ldmatrix Q fragments (kept in registers)
//! m = −inf, l = 0, O = 0
//! for j in 0..blocks:                         // BN keys per block
//!     wait_group 1; bar.sync                   // K_j landed
//!     copy K_{j+1} → Ks[(j+1)%2]; commit
//!     S = Q·K_jᵀ (ldmatrix K, mma.sync)        // 16×BN per warp, f32
//!     x = S·scale + biases, −inf past N
//!     m' = max(m, rowmax x) (quad shuffles); c = exp2((m − m')·e)
//!     P = exp2((x − m')·e); l = l·c + Σ P; O = O·c; m = m'
//!     P → f16/bf16 A fragments (cvt.rn.x2)    // C layout = A layout
//!     wait_group 1; bar.sync                   // V_j landed
//!     copy V_{j+1} → Vs[(j+1)%2]; commit
//!     O += P·V_j (ldmatrix.trans V, mma.sync)
//! l = quad sum of l; O /= l; st.global pairs of columns
//! ```
//!
//! `streaming_softmax_2pass` first finds each row's maximum, then runs the
//! same loop with it fixed (no correction, no rescaling of `O`):
//!
//! ```text
//! copy Q tile → Qs; commit; copy K₀ → Ks[0]; commit
//! wait_group 1; bar.sync; ldmatrix Q fragments
//! m = −inf, l = 0, O = 0
//! for j in 0..blocks:                         // first pass: K only
//!     wait_group 0; bar.sync                   // K_j landed
//!     copy K_{j+1} → Ks[(j+1)%2]; commit
//!     x = S·scale + biases as above; m = max(m, x) per thread
//! bar.sync; m = quad max of m
//! copy K₀ → Ks[0]; commit; copy V₀ → Vs[0]; commit
//! for j in 0..blocks: the loop above with m' = m and c = 1
//! l = quad sum of l; O /= l; st.global pairs of columns
//! ```
//!
//! `e` is the softmax's exponent scale (`log2 e`); a row whose maximum is
//! still −inf shifts by 0 (so `exp2` gives 0, not NaN), and a row with no
//! key at all ends 0/0 = NaN, as the graph's softmax of −inf does. K and V
//! tiles past `N` and Q rows past `M` are zero-filled by `cp.async`.
//! Where a constant −inf bias (the causal mask) makes every key past some
//! column invalid for all of a CTA's rows, the loop stops before those
//! blocks ([`Bias::Guarded`] with one constraint falling in `n`).
//!
//! **sm90** ([`build`] with `Arch::Sm90`, head and value dimensions
//! multiples of 64): a CTA of one warpgroup or two ([`warp_choices`]; with
//! two, 128 query rows, warpgroup `w / 4` owning rows `64·(w / 4)..`, so
//! each K/V tile in shared memory serves twice the rows) and the same
//! loops, the
//! two products by `wgmma.m64nNk16` (issue 15) — `S = Q·K_jᵀ` from Q and
//! K_j (K-major), `O += P·V_j` from `P` and V_j (MN-major) — on tiles the
//! copies write as column blocks of 64 elements with the 128-byte swizzle
//! (`k_major`); `P`, rounded and packed as on sm80, stays in registers:
//! `wgmma`'s A operand from registers ([`WgmmaA::Regs`]) has
//! `mma.m16n8k16`'s A fragment layout per warp, as FlashAttention-3
//! feeds its second product; each wait for copies is followed by
//! `fence.proxy.async` (the copies are generic-proxy writes, `wgmma` an
//! async-proxy read) before its barrier, and each product is fenced,
//! committed and waited for (`wgmma.wait_group 0`) before the softmax
//! reads `S` or rescales `O`. The `wgmma` D fragment is the `mma.m16n8`
//! accumulator layout repeated (warp `w` of the warpgroup holds rows
//! `16w + g` and `16w + g + 8`), so the softmax, the rescaling and the
//! stores are the sm80 code. The loop overlaps the softmax of key block
//! `j` with the second product of block `j − 1` (FlashAttention-3's
//! intra-warpgroup overlap, Shah et al. 2024, §3.2):
//!
//! ```text
//! for j in 0..blocks:
//!     wgmma.wait_group 0                          // P·V_{j−2} retired
//!     wait_group 0; fence.proxy.async; bar.sync   // K_j, V_{j−1} landed
//!     copy K_{j+1} → Ks[(j+1)%2]; copy V_j → Vs[j%2] (j > 0); commit
//!     if j > 0: P_{j−1} → packed registers; O = O·c
//!     wgmma.fence; S = Q·K_jᵀ (wgmma); commit
//!     if j > 0: O += P·V_{j−1} (wgmma, P from registers); commit
//!               wait_group 1                     // S landed, P·V may run on
//!     else: wait_group 0
//!     x = S·scale + biases; m', c; P = exp2(...); l
//! wgmma.wait_group 0; wait_group 0; fence.proxy.async; bar.sync
//! P_last → packed registers; O = O·c; O += P·V_last (wgmma); wait_group 0
//! ```
//!
//! Not warp-specialised (no producer warpgroup: every thread issues
//! `cp.async`) nor ping-ponged between warpgroups as FlashAttention-3 is;
//! not measured on a GPU.
//!
//! Fragments (PTX ISA "Matrix Fragments for mma.m16n8k16"): an accumulator
//! tile's registers `c0, c1` are row `g = lane/4`, columns `2·(lane%4)`,
//! `+1`, and `c2, c3` row `g + 8`; an A fragment's `a0..a3` are the same
//! rows and columns `k` and `k + 8`, so two adjacent 16×8 tiles of `P` are
//! one 16×16 A operand after packing pairs.

use crate::diag;
use crate::diag::DResult;
use crate::gpu::attention::recognise::{Attention, Bias, Lin, ScoreOp};
use crate::plan::{AlgoChoice, Pipeline, Plan, Problem, Spanned};
use crate::tiny::{BinaryOp, ReduceOp, UnaryOp};
use crate::DType;

use crate::gpu::dialect::*;
use crate::gpu::mma::row_swizzle;

/// Warps per CTA of the sm80 kernel; each owns 16 query rows.
pub const WARPS: i64 = 4;
/// Query rows per CTA of the sm80 kernel.
pub const BM: i64 = 16 * WARPS;
/// The larger CTA: 8 warps, 128 query rows — on sm90 two warpgroups of 64
/// rows each (FlashAttention-3's two consumer warpgroups, without its
/// producer warpgroup or ping-pong) — so every K/V tile copied to shared
/// memory serves twice the rows of [`WARPS`].
pub const WIDE_WARPS: i64 = 8;

/// The CTA sizes, in warps, the kernel offers on `arch`: [`WARPS`] (64
/// query rows; on sm90 one warpgroup) or [`WIDE_WARPS`] (128 rows) — the
/// wide CTA halves the K/V copies per query row but makes half the CTAs,
/// which fills fewer SMs when `M` is short — ranked by the estimator
/// through the plan's `tile[0] = 16 · warps` ([`plan`]). The same on both
/// arches today; per arch so that a branch can offer its own.
pub fn warp_choices(arch: Arch) -> &'static [i64] {
    match arch {
        Arch::Sm80 | Arch::Sm90 => &[WARPS, WIDE_WARPS],
    }
}
/// Keys per block of the loop.
pub const BN: i64 = 64;
/// `__launch_bounds__`'s minimum CTAs per SM (see [`Kernel::min_blocks_per_sm`]).
pub const MIN_BLOCKS: u32 = 1;
/// The largest head and value dimension (registers: `O` takes `dv/2` and
/// the Q fragments `d/4` per thread).
pub const MAX_HEAD_DIM: i64 = 128;
/// Elements of one 128-byte swizzle row (f16/bf16): on sm90 a tile of `d`
/// columns is `d / 64` such column blocks, each `rows × 128` bytes.
const WGMMA_COLS: i64 = 64;
/// The bytes between 8-row groups of a 128-byte swizzled tile (a
/// descriptor's `sbo`, `wgmma::Builder`'s as well).
const SWIZZLE_ATOM: i64 = 1024;

/// How the kernel finds each row's softmax maximum: the plan's
/// `algo_choice attention` (the loop skeletons are in the module doc).
pub use crate::plan::AttentionAlgo as Algorithm;

/// The kernel's parameters, in ABI order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttentionParams {
    pub q: ParamId,
    pub k: ParamId,
    pub v: ParamId,
    /// One per [`Attention::scores`] op: the parameter of an `Add` of a
    /// [`Bias::Tensor`], `None` for the others.
    pub biases: Vec<Option<ParamId>>,
    pub o: ParamId,
}

/// The fused attention kernel of `a` computing its softmax by `algo`, on
/// a CTA of `warps` warps (one of [`warp_choices`]).
///
/// Errors: `Unsupported` for a `warps` the arch does not offer, operand
/// dtypes other than f16/bf16, an output
/// other than f16/bf16/f32, head or value dimensions that are not
/// multiples of 16 up to [`MAX_HEAD_DIM`], `q`/`k`/`v` whose rows are not
/// 16-byte aligned runs (the `c` coefficient 1, every other a multiple of
/// 8), an output whose column pairs are not aligned, or more batch points
/// than the grid's `y` allows.
pub fn build(a: &Attention, algo: Algorithm, arch: Arch, warps: i64) -> DResult<(Kernel, AttentionParams)> {
    check(a, arch)?;
    if !warp_choices(arch).contains(&warps) {
        let offered = warp_choices(arch);
        return Err(diag!(
            Unsupported,
            "the {} attention template has CTAs of {offered:?} warps, not {warps}",
            arch.name()
        ));
    }
    let name = format!("attention_{}", arch.name());
    let mut b = Builder { k: Kernel::empty(&name, arch), a: a.clone(), arch, warps, bm: 16 * warps };
    let ptr = |dtype, writable| ParamKind::Ptr { dtype, writable };
    let q = b.k.add_param("Q", ptr(a.ab, false));
    let k = b.k.add_param("K", ptr(a.ab, false));
    let v = b.k.add_param("V", ptr(a.ab, false));
    let mut biases = Vec::new();
    for (i, op) in a.scores.iter().enumerate() {
        biases.push(match op {
            ScoreOp::Add(Bias::Tensor { dtype, .. }) => Some(b.k.add_param(&format!("bias{i}"), ptr(*dtype, false))),
            ScoreOp::Add(Bias::Guarded { .. }) | ScoreOp::Scale(_) | ScoreOp::Round(_) => None,
        });
    }
    let o = b.k.add_param("O", ptr(a.out, true));
    let p = AttentionParams { q, k, v, biases, o };
    b.body(&p, algo);
    Ok((b.k, p))
}

/// The Schedule Plan (`000` §1.7) of `a`'s kernel with `algo` on a CTA
/// of `warps` warps on `target`: `arch`, `tile = [16·warps, BN, d]`,
/// `warp_tile = 16xBN`, the K/V ring's two stages and `algo_choice
/// attention`; what [`crate::plan::cost::Estimator`]s rank the algorithms
/// and CTA sizes by.
pub fn plan(a: &Attention, algo: Algorithm, target: &crate::plan::Target, warps: i64) -> Plan {
    let ax = |s: &str| Spanned::new(s.to_string());
    let bm = 16 * warps;
    Plan {
        arch: Some(ax(target.name)),
        tile: Some(Spanned::new([bm as u64, BN as u64, a.d as u64])),
        warp_tile: Some(Spanned::new([16, BN as u64])),
        pipeline: Some(Spanned::new(Pipeline { axis: Some(ax("n")), stages: Spanned::new(2) })),
        algo_choice: vec![Spanned::new(AlgoChoice::Attention(algo))],
        ..Plan::default()
    }
}

/// `a` as a cost-model problem ([`Problem::attention`]).
pub fn problem(a: &Attention) -> Problem {
    let batch: i64 = a.batch.iter().product();
    let u = |x: i64| x.max(0) as u64;
    Problem::attention(u(batch), u(a.m), u(a.n), u(a.d), u(a.dv), a.ab)
}

/// The template's schedule for `a` with `algo` on a CTA of `warps` warps
/// on `arch` (the sm90 branch where it takes `a`, else the sm80 kernel),
/// for the `plan` dump: `algo_choice`, tiles, warps, stages, the sizes and
/// the score ops.
pub fn describe(a: &Attention, algo: Algorithm, arch: Arch, warps: i64) -> String {
    let ops: Vec<String> = a
        .scores
        .iter()
        .map(|op| match op {
            ScoreOp::Scale(c) => format!("scale {c}"),
            ScoreOp::Add(Bias::Tensor { dtype, .. }) => format!("+ {dtype} bias"),
            ScoreOp::Add(Bias::Guarded { value, otherwise, valid }) => {
                format!("+ ({value} where {} affine guard(s) hold, else {otherwise})", valid.len())
            }
            ScoreOp::Round(d) => format!("round to {d}"),
        })
        .collect();
    let arch = if arch == Arch::Sm90 && check(a, Arch::Sm90).is_ok() { Arch::Sm90 } else { Arch::Sm80 };
    let fits = match check(a, arch) {
        Ok(()) => format!("on the {} attention template", arch.name()),
        Err(d) => format!("not on the template ({})", d.message),
    };
    let loops = match algo {
        Algorithm::OnlineSoftmax => "one pass over K and V with a running maximum",
        Algorithm::StreamingSoftmax2Pass => "a pass over K for the maximum, then one over K and V",
    };
    let products = match arch {
        Arch::Sm80 => "K/V in a 2-stage cp.async ring, P kept in registers (ldmatrix + mma.sync)",
        Arch::Sm90 => {
            "K/V in a 2-stage cp.async ring of 128-byte swizzled tiles, Q·Kᵀ and P·V by wgmma (a warpgroup per 64 \
             rows), P kept in registers as the second wgmma's A operand, P·V of a block overlapping the next \
             block's softmax"
        }
    };
    let warps = if warp_choices(arch).contains(&warps) { warps } else { WARPS };
    format!(
        "algo_choice attention = {}, {fits}\n  {} batch points × M={} queries × N={} keys, head dim {}, value dim \
         {}, {} → {}\n  tile: {} query rows × {BN} keys per step, {warps} warps (16 rows each), {products}, \
         {loops}\n  scores: {}\n",
        algo,
        a.batch.iter().product::<i64>(),
        a.m,
        a.n,
        a.d,
        a.dv,
        a.ab,
        a.out,
        16 * warps,
        if ops.is_empty() { "S".to_string() } else { format!("S, {}", ops.join(", ")) }
    )
}

fn check(a: &Attention, arch: Arch) -> DResult<()> {
    let unsupported = |why: String| Err(diag!(Unsupported, "the {} attention template: {why}", arch.name()));
    if arch == Arch::Sm90 && (a.d % WGMMA_COLS != 0 || a.dv % WGMMA_COLS != 0) {
        return unsupported(format!(
            "head and value dimensions that are multiples of {WGMMA_COLS} (one 128-byte swizzle row), not {} and {}",
            a.d, a.dv
        ));
    }
    if !matches!(a.ab, DType::F16 | DType::BF16) || !matches!(a.out, DType::F16 | DType::BF16 | DType::F32) {
        return unsupported(format!("f16/bf16 operands and f16/bf16/f32 output, not {} → {}", a.ab, a.out));
    }
    for (name, x) in [("head", a.d), ("value", a.dv)] {
        if x % 16 != 0 || !(16..=MAX_HEAD_DIM).contains(&x) {
            return unsupported(format!("the {name} dimension {x} is not a multiple of 16 up to {MAX_HEAD_DIM}"));
        }
    }
    if a.m < 1 || a.n < 1 || a.batch.iter().any(|&x| x < 1) {
        return unsupported(format!("empty sizes (M = {}, N = {}, batch {:?})", a.m, a.n, a.batch));
    }
    let vector = |l: &Lin, unit: i64| {
        l.c == 1
            && [l.m, l.n, l.constant].iter().chain(&l.batch).all(|x| x % unit == 0)
            && l.batch.len() == a.batch.len()
    };
    for (name, l) in [("q", &a.q), ("k", &a.k), ("v", &a.v)] {
        if !vector(l, 8) {
            return unsupported(format!("{name}'s rows are not contiguous 16-byte aligned runs ({l:?})"));
        }
    }
    if !vector(&a.o, 2) {
        return unsupported(format!("the output's column pairs are not contiguous and aligned ({:?})", a.o));
    }
    let points: i64 = a.batch.iter().product();
    if points as u64 > arch.target().max_grid[1] {
        return unsupported(format!("{points} batch points exceed the grid's y limit"));
    }
    Ok(())
}

struct Builder {
    k: Kernel,
    a: Attention,
    /// `Sm80`: `ldmatrix` + `mma.sync`; `Sm90`: the two products by
    /// `wgmma` from 128-byte swizzled tiles (module doc).
    arch: Arch,
    /// Warps per CTA ([`warps`]) and the CTA's query rows, `16 · warps`.
    warps: i64,
    bm: i64,
}

/// The per-thread values the parts of the kernel share.
struct Ids {
    tid: Expr,
    lane: Expr,
    warp: Expr,
    /// `lane / 4` and `lane % 4`: a fragment's row and column pair.
    g: Expr,
    t4: Expr,
    m0: Expr,
    batch: Vec<Expr>,
}

/// The shared-memory tiles and the registers the parts of the kernel
/// share.
struct Regs {
    qs: SmemRef,
    ks: SmemRef,
    vs: SmemRef,
    /// Q's A fragments and a B fragment of K.
    qf: RegId,
    kf: RegId,
    /// The scores (then `P`) of one key block, `n_s` per thread.
    s: RegId,
    /// Per row half (`g`, `g + 8`): the maximum, online softmax's new
    /// maximum, the shift `exp2` subtracts, the correction, the sum.
    mrow: RegId,
    mnew: RegId,
    shift: RegId,
    corr: RegId,
    lrow: RegId,
    n_s: i64,
}

/// A key loop's variable `j` (`je` as an expression), its ring stage
/// `j % 2` and `j + 1`.
struct LoopHead {
    var: VarId,
    je: Expr,
    stage: Expr,
    next: Expr,
}

/// One operand tile copy: `rows` rows of `cols` elements from `row0`,
/// rows from `row_end` on zero-filled.
struct Tile<'l> {
    param: ParamId,
    smem: SmemRef,
    stage_bytes: i64,
    rows: i64,
    cols: i64,
    row0: Expr,
    row_end: i64,
    lin: &'l Lin,
    /// The row is the query row `m` (else the key row `n`).
    query: bool,
}

impl Builder {
    fn let_(&mut self, out: &mut Vec<Stmt>, name: &str, value: Expr) -> Expr {
        let var = self.k.add_var(name);
        out.push(Stmt::Let { var, value });
        Expr::Var(var)
    }

    fn for_unrolled(&mut self, out: &mut Vec<Stmt>, name: &str, n: i64, f: impl FnOnce(&mut Self, Expr) -> Vec<Stmt>) {
        let var = self.k.add_var(name);
        let body = f(self, Expr::Var(var));
        out.push(Stmt::For { var, start: Expr::c(0), end: Expr::c(n), step: 1, unroll: true, body });
    }

    fn body(&mut self, p: &AttentionParams, algo: Algorithm) {
        let a = self.a.clone();
        let es = a.ab.size_bytes() as i64;
        let bm = self.bm;
        let threads = self.warps * 32;
        self.k.block = [threads as u32, 1, 1];
        self.k.min_blocks_per_sm = Some(MIN_BLOCKS);
        self.k.grid = [Expr::c((a.m + bm - 1) / bm), Expr::c(a.batch.iter().product()), Expr::c(1)];
        let (qs, ks, vs) = match self.arch {
            Arch::Sm80 => (
                self.k.add_smem("Qs", (bm * a.d * es) as u64, row_swizzle(a.d * es, true)),
                self.k.add_smem("Ks", (2 * BN * a.d * es) as u64, row_swizzle(a.d * es, true)),
                self.k.add_smem("Vs", (2 * BN * a.dv * es) as u64, row_swizzle(a.dv * es, true)),
            ),
            Arch::Sm90 => (
                self.smem_1024("Qs", bm * a.d * es),
                self.smem_1024("Ks", 2 * BN * a.d * es),
                self.smem_1024("Vs", 2 * BN * a.dv * es),
            ),
        };
        let n_s = BN / 8 * 4;
        let n_o = a.dv / 8 * 4;
        let qf = self.k.add_regs("qf", RegKind::B16x2, (a.d / 16 * 4) as u32);
        let kf = self.k.add_regs("kf", RegKind::B16x2, 4);
        let vf = self.k.add_regs("vf", RegKind::B16x2, 4);
        let s = self.k.add_regs("s", RegKind::F32, n_s as u32);
        let pf = self.k.add_regs("pf", RegKind::B16x2, (BN / 16 * 4) as u32);
        let o = self.k.add_regs("o", RegKind::F32, n_o as u32);
        let [mrow, mnew, shift, corr, lrow] =
            ["m_row", "m_new", "m_shift", "corr", "l_row"].map(|n| self.k.add_regs(n, RegKind::F32, 2));
        let rg = Regs { qs, ks, vs, qf, kf, s, mrow, mnew, shift, corr, lrow, n_s };

        let mut out = Vec::new();
        let tid = self.let_(&mut out, "tid", Expr::ThreadIdx(Dim::X));
        let lane = self.let_(&mut out, "lane", tid.clone() % 32);
        let warp = self.let_(&mut out, "warp", tid.clone() / 32);
        let g = self.let_(&mut out, "g", lane.clone() / 4);
        let t4 = self.let_(&mut out, "t4", lane.clone() % 4);
        // Query tiles last to first: under a causal bound the last tiles
        // read the most keys, and starting them first leaves the short
        // ones to fill the final wave (longest job first). Without a
        // bound every tile costs the same.
        let tiles = (a.m + bm - 1) / bm;
        let m0 = self.let_(&mut out, "m0", (Expr::c(tiles - 1) - Expr::BlockIdx(Dim::X)) * bm);
        let batch_extents = a.batch.clone();
        let batch = self.k.split_digits(&mut out, "batch", Expr::BlockIdx(Dim::Y), &batch_extents);
        let ids = Ids { tid, lane, warp, g, t4, m0, batch };
        let kv_end = self.kv_end(&ids);
        let kv_end = self.let_(&mut out, "kv_end", kv_end);
        let blocks = self.let_(&mut out, "kv_blocks", (kv_end.clone() + (BN - 1)) / BN);

        let q_tile = Tile {
            param: p.q,
            smem: rg.qs.clone(),
            stage_bytes: 0,
            rows: bm,
            cols: a.d,
            row0: ids.m0.clone(),
            row_end: a.m,
            lin: &a.q,
            query: true,
        };
        out.extend(self.copy(&q_tile, &ids, Expr::c(0), "q"));
        out.push(Stmt::Mma(MmaStmt::CommitGroup));
        // The first key block of the loop over K and V; the two-pass
        // softmax's first pass reads only K.
        let first_blocks: &[(bool, &str)] = match algo {
            Algorithm::OnlineSoftmax => &[(false, "k0"), (true, "v0")],
            Algorithm::StreamingSoftmax2Pass => &[(false, "k0")],
        };
        self.copy_first_blocks(&mut out, p, &ids, &rg, &blocks, first_blocks);
        out.extend(self.landed(first_blocks.len() as u32));
        // Q's A fragments: matrix l/8 is rows +8·((l/8)%2), columns +8·(l/16)
        // (sm90's wgmma reads Q from shared memory).
        if self.arch == Arch::Sm80 {
            self.for_unrolled(&mut out, "qk", a.d / 16, |_, kk| {
                let row = ids.warp.clone() * 16 + ids.lane.clone() % 8 + ids.lane.clone() / 8 % 2 * 8;
                let col = kk.clone() * 16 + ids.lane.clone() / 16 * 8;
                let src = SmemRef { offset: row * (a.d * es) + col * es, ..rg.qs.clone() };
                let dst = (0..4).map(|j| reg(qf, kk.clone() * 4 + j)).collect();
                vec![Stmt::Mma(MmaStmt::LdMatrix { num: LdMatrixNum::X4, trans: false, dst, src })]
            });
        }
        self.for_unrolled(&mut out, "oi", n_o, |_, i| vec![Stmt::Mma(MmaStmt::MovF32 { dst: reg(o, i), value: 0.0 })]);
        self.for_unrolled(&mut out, "h", 2, |_, h| {
            vec![
                Stmt::Mma(MmaStmt::MovF32 { dst: reg(mrow, h.clone()), value: f32::NEG_INFINITY }),
                Stmt::Mma(MmaStmt::MovF32 { dst: reg(lrow, h), value: 0.0 }),
            ]
        });

        if algo == Algorithm::StreamingSoftmax2Pass {
            // First pass: each thread's maximum of its scores, over every
            // key block; the quads agree on it after the loop.
            let (mut pass, head) = self.key_loop_head(p, &ids, &rg, &blocks, 0, "1", false);
            self.scores(&mut pass, p, &ids, &rg, head.je, head.stage);
            self.for_unrolled(&mut pass, "mi1", n_s, |_, i| {
                vec![Stmt::Simt(SimtStmt::Accumulate {
                    op: ReduceOp::Max,
                    dtype: DType::F32,
                    acc: reg(mrow, i.clone() % 4 / 2),
                    value: f32v(s, i),
                })]
            });
            out.push(Stmt::For {
                var: head.var,
                start: Expr::c(0),
                end: blocks.clone(),
                step: 1,
                unroll: false,
                body: pass,
            });
            // Every warp is done with K's stages before the second pass
            // refills them.
            out.push(Stmt::Barrier);
            self.for_unrolled(&mut out, "mq1", 2, |_, h| {
                let mut v: Vec<Stmt> = quad(ReduceOp::Max, reg(mrow, h.clone()));
                v.push(Stmt::Simt(SimtStmt::Compute {
                    dst: reg(shift, h.clone()),
                    value: finite_or_zero(f32v(mrow, h)),
                }));
                v
            });
            self.copy_first_blocks(&mut out, p, &ids, &rg, &blocks, &[(false, "k0"), (true, "v0")]);
        }

        let (mut main, head) = match self.arch {
            Arch::Sm80 => self.key_loop_head(p, &ids, &rg, &blocks, 1, "", false),
            Arch::Sm90 => {
                // P_{j−2}·V_{j−2}, issued by the last iteration, retired
                // before the barrier lets the copies refill its V stage
                // and before P_{j−1} is packed over its A fragments. Here,
                // across the loop's back edge, ptxas keeps the wait after
                // block j − 1's softmax; at the end of the body it hoisted
                // the wait above the first row maximum.
                let mut top = vec![Stmt::Sm90(Sm90Stmt::WgmmaWait { pending: 0 })];
                let (body, head) = self.key_loop_head(p, &ids, &rg, &blocks, 0, "", true);
                top.extend(body);
                (top, head)
            }
        };
        let (stage, next, je) = (head.stage.clone(), head.next.clone(), head.je.clone());
        match self.arch {
            Arch::Sm80 => self.scores(&mut main, p, &ids, &rg, je.clone(), stage.clone()),
            Arch::Sm90 => {
                // S_j = Q·K_jᵀ issued, then O += P_{j−1}·V_{j−1}: the
                // softmax of block j runs while the second product of
                // block j − 1 does (FlashAttention-3's intra-warpgroup
                // overlap); `wait_group 1` waits for S_j only. The second
                // group has its own `wgmma.fence` (as FlashAttention-3's
                // every product): without it ptxas injects one (C7519).
                let mut carried = self.pack_p(&rg, pf);
                carried.extend(self.rescale_o(algo, &rg, o, n_o));
                main.push(Stmt::If { cond: Expr::c(0).lt(je.clone()), then: carried, otherwise: Vec::new() });
                self.score_products(&mut main, &ids, &rg, stage.clone());
                main.push(Stmt::Sm90(Sm90Stmt::WgmmaCommit));
                let mut previous = vec![Stmt::Sm90(Sm90Stmt::WgmmaFence)];
                previous.extend(self.value_products(&rg, o, pf, (je.clone() + 1) % 2));
                previous.extend([Stmt::Sm90(Sm90Stmt::WgmmaCommit), Stmt::Sm90(Sm90Stmt::WgmmaWait { pending: 1 })]);
                main.push(Stmt::If {
                    cond: Expr::c(0).lt(je.clone()),
                    then: previous,
                    otherwise: vec![Stmt::Sm90(Sm90Stmt::WgmmaWait { pending: 0 })],
                });
                self.score_ops(&mut main, p, &ids, &rg, je.clone());
            }
        }
        if algo == Algorithm::OnlineSoftmax {
            self.online_maximum(&mut main, &rg);
        }
        // P = exp2((x − shift)·e) and its row sums.
        let e_scale = cst(a.exp_scale as f64);
        self.for_unrolled(&mut main, "pi", n_s, |_, i| {
            let h = i.clone() % 4 / 2;
            let x = bin(BinaryOp::Sub, f32v(s, i.clone()), f32v(shift, h.clone()));
            vec![
                Stmt::Simt(SimtStmt::Compute {
                    dst: reg(s, i.clone()),
                    value: exp2(bin(BinaryOp::Mul, x, e_scale.clone())),
                }),
                Stmt::Simt(SimtStmt::Accumulate {
                    op: ReduceOp::Sum,
                    dtype: DType::F32,
                    acc: reg(lrow, h),
                    value: f32v(s, i),
                }),
            ]
        });
        match self.arch {
            Arch::Sm80 => {
                let rescale = self.rescale_o(algo, &rg, o, n_o);
                main.extend(rescale);
                let packed = self.pack_p(&rg, pf);
                main.extend(packed);
                main.extend(self.landed(1));
                let copy = self.copy(&key_tile(&a, p, &rg, true, next.clone() * BN), &ids, next.clone() % 2, "v");
                main.push(Stmt::If { cond: next.lt(blocks.clone()), then: copy, otherwise: Vec::new() });
                main.push(Stmt::Mma(MmaStmt::CommitGroup));
                // O += P·V_j.
                let v_stage = BN * a.dv * es;
                self.for_unrolled(&mut main, "vk", BN / 16, |b, kk| {
                    let mut step = Vec::new();
                    b.for_unrolled(&mut step, "vn", a.dv / 16, |_, nj| {
                        let krow = kk.clone() * 16 + ids.lane.clone() % 8 + ids.lane.clone() / 8 % 2 * 8;
                        let ncol = nj.clone() * 16 + ids.lane.clone() / 16 * 8;
                        let src = SmemRef {
                            offset: stage.clone() * v_stage + krow * (a.dv * es) + ncol * es,
                            ..rg.vs.clone()
                        };
                        ldmatrix_mma_pair(a.ab, src, true, vf, o, &nj, pf, kk.clone() * 4)
                    });
                    step
                });
            }
            // P·V_j in the next iteration, or after the loop.
            Arch::Sm90 => {}
        }
        let end = blocks.clone();
        out.push(Stmt::For { var: head.var, start: Expr::c(0), end, step: 1, unroll: false, body: main });
        if self.arch == Arch::Sm90 {
            // The last block's O += P·V, once P·V_{last−1} retired and
            // V_last landed.
            out.push(Stmt::Sm90(Sm90Stmt::WgmmaWait { pending: 0 }));
            let mut last = self.landed(0);
            last.extend(self.pack_p(&rg, pf));
            last.extend(self.rescale_o(algo, &rg, o, n_o));
            last.push(Stmt::Sm90(Sm90Stmt::WgmmaFence));
            last.extend(self.value_products(&rg, o, pf, (blocks.clone() - 1) % 2));
            last.extend([Stmt::Sm90(Sm90Stmt::WgmmaCommit), Stmt::Sm90(Sm90Stmt::WgmmaWait { pending: 0 })]);
            out.push(Stmt::If { cond: Expr::c(0).lt(blocks), then: last, otherwise: Vec::new() });
        }
        out.push(Stmt::Mma(MmaStmt::WaitGroup { pending: 0 }));

        // O / l, stored as column pairs.
        self.for_unrolled(&mut out, "lq", 2, |_, h| quad(ReduceOp::Sum, reg(lrow, h.clone())));
        self.for_unrolled(&mut out, "on", n_o, |_, i| {
            let v = bin(BinaryOp::Fdiv, f32v(o, i.clone()), f32v(lrow, i.clone() % 4 / 2));
            vec![Stmt::Simt(SimtStmt::Compute { dst: reg(o, i), value: v })]
        });
        self.for_unrolled(&mut out, "st", a.dv / 8, |b, nt| {
            let mut v = Vec::new();
            b.for_unrolled(&mut v, "sh", 2, |_, h| {
                let row = ids.m0.clone() + ids.warp.clone() * 16 + ids.g.clone() + h.clone() * 8;
                let col = nt.clone() * 8 + ids.t4.clone() * 2;
                let at = lin_expr(&a.o, &ids.batch, row.clone(), Expr::c(0), col);
                let src = (0..2).map(|x| reg(o, nt.clone() * 4 + h.clone() * 2 + x)).collect();
                vec![Stmt::Mma(MmaStmt::StGlobalVec {
                    dst: GlobalRef { param: p.o, offset: at },
                    src,
                    dtype: a.out,
                    pred: row.lt(a.m),
                })]
            });
            v
        });
        self.k.body = out;
    }

    /// sm90's `O += P·V` of the key block in V's ring stage `v_stage`: `P`
    /// from its packed registers `pf` (FlashAttention-3's second product),
    /// V MN-major (rows of keys, `dv / 64` column blocks of `BN` rows each:
    /// lbo steps a column block, sbo 8 keys); the `wgmma`s of an open
    /// group, after a `wgmma.fence` the caller placed.
    fn value_products(&self, rg: &Regs, o: RegId, pf: RegId, v_stage: Expr) -> Vec<Stmt> {
        let a = &self.a;
        let es = a.ab.size_bytes() as i64;
        let stage_bytes = BN * a.dv * es;
        (0..BN / 16)
            .map(|kk| {
                Stmt::Sm90(Sm90Stmt::Wgmma {
                    ab: a.ab,
                    n: a.dv as u32,
                    d: reg(o, Expr::c(0)),
                    a: WgmmaA::Regs(reg(pf, Expr::c(kk * 4))),
                    b: MatrixDesc {
                        start: SmemRef {
                            offset: v_stage.clone() * stage_bytes + kk * 16 * WGMMA_COLS * es,
                            ..rg.vs.clone()
                        },
                        lbo: (BN * WGMMA_COLS * es) as u32,
                        sbo: SWIZZLE_ATOM as u32,
                    },
                    trans_b: true,
                    scale_d: true,
                })
            })
            .collect()
    }

    /// The byte offset, inside each 64-column block of a `bm`-row tile
    /// (`Qs`), of this thread's warpgroup's 64 rows: the start of its
    /// `wgmma` A operand (warpgroup `w / 4` of warp `w` owns rows
    /// `64·(w / 4)..`, its D fragment rows `16·w + g` and `+ 8`).
    fn warpgroup_rows(&self, ids: &Ids) -> Expr {
        let es = self.a.ab.size_bytes() as i64;
        ids.warp.clone() / 4 * (64 * WGMMA_COLS * es)
    }

    /// Waits until at most `pending` copy groups are in flight, then
    /// publishes what landed to the CTA (`bar.sync`); on sm90 each thread
    /// first orders its copies before the `wgmma`s that read them
    /// (`fence.proxy.async`).
    fn landed(&self, pending: u32) -> Vec<Stmt> {
        let mut v = vec![Stmt::Mma(MmaStmt::WaitGroup { pending })];
        if self.arch == Arch::Sm90 {
            v.push(Stmt::Sm90(Sm90Stmt::FenceProxyAsync));
        }
        v.push(Stmt::Barrier);
        v
    }

    /// A shared buffer of `size` bytes at the next 1024-byte boundary, with
    /// the 128-byte swizzle a `wgmma` descriptor reads.
    fn smem_1024(&mut self, name: &str, size: i64) -> SmemRef {
        self.k.smem_bytes = self.k.smem_bytes.div_ceil(SWIZZLE_ATOM as u64) * SWIZZLE_ATOM as u64;
        self.k.add_smem(name, size as u64, Swizzle::B128)
    }

    /// The copies of key block 0 into ring stage 0, one commit group each
    /// (when there is a block): of V where `value`, else of K.
    fn copy_first_blocks(
        &mut self,
        out: &mut Vec<Stmt>,
        p: &AttentionParams,
        ids: &Ids,
        rg: &Regs,
        blocks: &Expr,
        which: &[(bool, &str)],
    ) {
        let a = self.a.clone();
        for &(value, tag) in which {
            let copy = self.copy(&key_tile(&a, p, rg, value, Expr::c(0)), ids, Expr::c(0), tag);
            out.push(Stmt::If { cond: Expr::c(0).lt(blocks.clone()), then: copy, otherwise: Vec::new() });
            out.push(Stmt::Mma(MmaStmt::CommitGroup));
        }
    }

    /// The start of a loop over the key blocks: a new loop variable `j`
    /// (names suffixed by `tag`), the wait for K_j (`pending` groups left in
    /// flight) and the barrier, then K_{j+1}'s copy into the other stage,
    /// committed. With `value_too` (sm90's overlapped loop, `pending` 0:
    /// every copy landed, K_j and the V_{j−1} its `P·V` reads), V_j also
    /// (`j > 0`; V₀ came with the first blocks) into V's stage `j % 2`, in
    /// the same group: that stage's last reader, `P_{j−2}·V_{j−2}`, retired
    /// in iteration `j − 1`, as did K's other stage's, `S_{j−1}`.
    #[allow(clippy::too_many_arguments)]
    fn key_loop_head(
        &mut self,
        p: &AttentionParams,
        ids: &Ids,
        rg: &Regs,
        blocks: &Expr,
        pending: u32,
        tag: &str,
        value_too: bool,
    ) -> (Vec<Stmt>, LoopHead) {
        let a = self.a.clone();
        let var = self.k.add_var(&format!("j{tag}"));
        let je = Expr::Var(var);
        let mut body = self.landed(pending);
        let stage = self.let_(&mut body, &format!("stage{tag}"), je.clone() % 2);
        let next = self.let_(&mut body, &format!("next{tag}"), je.clone() + 1);
        let tile = key_tile(&a, p, rg, false, next.clone() * BN);
        let copy = self.copy(&tile, ids, next.clone() % 2, &format!("k{tag}"));
        body.push(Stmt::If { cond: next.clone().lt(blocks.clone()), then: copy, otherwise: Vec::new() });
        if value_too {
            let copy = self.copy(&key_tile(&a, p, rg, true, je.clone() * BN), ids, stage.clone(), &format!("v{tag}"));
            body.push(Stmt::If { cond: Expr::c(0).lt(je.clone()), then: copy, otherwise: Vec::new() });
        }
        body.push(Stmt::Mma(MmaStmt::CommitGroup));
        (body, LoopHead { var, je, stage, next })
    }

    /// `S = Q·K_jᵀ` for key block `je` (in ring stage `stage`), then the
    /// score ops, into `rg.s`.
    fn scores(&mut self, out: &mut Vec<Stmt>, p: &AttentionParams, ids: &Ids, rg: &Regs, je: Expr, stage: Expr) {
        self.score_products(out, ids, rg, stage);
        if self.arch == Arch::Sm90 {
            out.extend([Stmt::Sm90(Sm90Stmt::WgmmaCommit), Stmt::Sm90(Sm90Stmt::WgmmaWait { pending: 0 })]);
        }
        self.score_ops(out, p, ids, rg, je);
    }

    /// `S = Q·K_jᵀ` of the block in ring stage `stage` into `rg.s`: on sm80
    /// done, on sm90 issued (the `wgmma`s of an open group, which the
    /// caller commits and waits for).
    fn score_products(&mut self, out: &mut Vec<Stmt>, ids: &Ids, rg: &Regs, stage: Expr) {
        let a = self.a.clone();
        let es = a.ab.size_bytes() as i64;
        let s = rg.s;
        let k_stage = BN * a.d * es;
        match self.arch {
            Arch::Sm80 => {
                self.for_unrolled(out, "si", rg.n_s, |_, i| {
                    vec![Stmt::Mma(MmaStmt::MovF32 { dst: reg(s, i), value: 0.0 })]
                });
                self.for_unrolled(out, "sk", a.d / 16, |b, kk| {
                    let mut step = Vec::new();
                    b.for_unrolled(&mut step, "sn", BN / 16, |_, nj| {
                        let nrow = nj.clone() * 16 + ids.lane.clone() % 8 + ids.lane.clone() / 16 * 8;
                        let kcol = kk.clone() * 16 + ids.lane.clone() / 8 % 2 * 8;
                        let src = SmemRef {
                            offset: stage.clone() * k_stage + nrow * (a.d * es) + kcol * es,
                            ..rg.ks.clone()
                        };
                        ldmatrix_mma_pair(a.ab, src, false, rg.kf, s, &nj, rg.qf, kk.clone() * 4)
                    });
                    step
                })
            }
            Arch::Sm90 => {
                // Q (64 rows: warp w's 16 are its rows of S) and K_j, both
                // K-major, by `wgmma` k16 step by step; the first step
                // replaces S (scale-d = 0) rather than S being zeroed.
                out.push(Stmt::Sm90(Sm90Stmt::WgmmaFence));
                for kk in 0..a.d / 16 {
                    let q = k_major(&rg.qs, self.warpgroup_rows(ids), kk, self.bm);
                    let k = k_major(&rg.ks, stage.clone() * k_stage, kk, BN);
                    let (d, q) = (reg(s, Expr::c(0)), WgmmaA::Smem(q));
                    let scale_d = kk > 0;
                    out.push(Stmt::Sm90(Sm90Stmt::Wgmma {
                        ab: a.ab,
                        n: BN as u32,
                        d,
                        a: q,
                        b: k,
                        trans_b: false,
                        scale_d,
                    }));
                }
            }
        }
    }

    /// The score ops on `S` of key block `je` in `rg.s`: scale, biases,
    /// rounding, and the mask past M × N and by the guarded biases.
    fn score_ops(&mut self, out: &mut Vec<Stmt>, p: &AttentionParams, ids: &Ids, rg: &Regs, je: Expr) {
        let a = self.a.clone();
        let s = rg.s;
        // The scores, masked past M × N and by the guarded biases; a block
        // whose every score is inside and has every guard holding takes a
        // copy without the selects (most blocks: the masks cost the
        // softmax's ALU about as much again).
        let scores = |b: &mut Self, masked: bool| {
            let mut body = Vec::new();
            b.for_unrolled(&mut body, if masked { "xi" } else { "xf" }, rg.n_s, |b, i| {
                let row = ids.m0.clone() + ids.warp.clone() * 16 + ids.g.clone() + i.clone() % 4 / 2 * 8;
                let col = je.clone() * BN + i.clone() / 4 * 8 + ids.t4.clone() * 2 + i.clone() % 2;
                let mut x = f32v(s, i.clone());
                for (op, param) in a.scores.iter().zip(&p.biases) {
                    x = match op {
                        ScoreOp::Scale(c) => bin(BinaryOp::Mul, x, cst(*c as f64)),
                        ScoreOp::Add(Bias::Guarded { value, .. }) if !masked => {
                            bin(BinaryOp::Add, x, cst(*value as f64))
                        }
                        ScoreOp::Add(bias) => {
                            bin(BinaryOp::Add, x, b.bias_value(bias, *param, ids, row.clone(), col.clone()))
                        }
                        ScoreOp::Round(d) => {
                            let rounded = ScalarExpr::Cast { to: *d, x: Box::new(x) };
                            ScalarExpr::Cast { to: DType::F32, x: Box::new(rounded) }
                        }
                    };
                }
                let value = if masked {
                    let inside = row.lt(a.m).and(col.lt(a.n));
                    ScalarExpr::Select { cond: inside, then: Box::new(x), otherwise: Box::new(cst(f64::NEG_INFINITY)) }
                } else {
                    x
                };
                vec![Stmt::Simt(SimtStmt::Compute { dst: reg(s, i), value })]
            });
            body
        };
        let (fast, masked) = (scores(self, false), scores(self, true));
        let interior = self.interior(ids, je);
        out.push(Stmt::If { cond: interior, then: fast, otherwise: masked });
    }

    /// P's accumulator pairs as A fragments: tiles 2kk and 2kk+1 are one
    /// k16 step, for `mma.sync` and for `wgmma` alike (its register A
    /// fragment is `mma.m16n8k16`'s per warp).
    fn pack_p(&mut self, rg: &Regs, pf: RegId) -> Vec<Stmt> {
        let (s, ab) = (rg.s, self.a.ab);
        let mut out = Vec::new();
        self.for_unrolled(&mut out, "pk", BN / 16, |_, kk| {
            (0..4)
                .map(|x| {
                    let base = (kk.clone() * 2 + x / 2) * 4 + x % 2 * 2;
                    Stmt::Mma(MmaStmt::PackB16x2 {
                        dst: reg(pf, kk.clone() * 4 + x),
                        lo: reg(s, base.clone()),
                        hi: reg(s, base + 1),
                        dtype: ab,
                    })
                })
                .collect()
        });
        out
    }

    /// Online softmax's `O = O·c` by the last block's correction (none for
    /// the two-pass softmax, whose maximum is fixed). sm80 rescales after
    /// the block's `exp2`; sm90 at the top of the next iteration, before
    /// `S_j` is issued (between that issue and the next `wgmma.fence` ptxas
    /// waits for `S_j` before a register operand touches `O`: C7517), so
    /// `O` holds the blocks before `j − 1` at their maximum `m_{j−2}` and
    /// `c` of block `j − 1` brings them to `m_{j−1}`, the shift of
    /// `P_{j−1}`.
    fn rescale_o(&mut self, algo: Algorithm, rg: &Regs, o: RegId, n_o: i64) -> Vec<Stmt> {
        let mut out = Vec::new();
        if algo == Algorithm::OnlineSoftmax {
            let corr = rg.corr;
            self.for_unrolled(&mut out, "oc", n_o, |_, i| {
                let v = bin(BinaryOp::Mul, f32v(o, i.clone()), f32v(corr, i.clone() % 4 / 2));
                vec![Stmt::Simt(SimtStmt::Compute { dst: reg(o, i), value: v })]
            });
        }
        out
    }

    /// Online softmax's step over one block of scores: the running maximum
    /// over the quad of each row, the shift `exp2` subtracts, the
    /// correction `c = exp2((m − m')·e)` of what was summed before, and the
    /// row sums scaled by it.
    fn online_maximum(&mut self, out: &mut Vec<Stmt>, rg: &Regs) {
        let Regs { s, mrow, mnew, shift, corr, lrow, .. } = *rg;
        let e_scale = cst(self.a.exp_scale as f64);
        self.for_unrolled(out, "mh", 2, |_, h| {
            vec![Stmt::Simt(SimtStmt::Compute { dst: reg(mnew, h.clone()), value: f32v(mrow, h) })]
        });
        self.for_unrolled(out, "mi", rg.n_s, |_, i| {
            vec![Stmt::Simt(SimtStmt::Accumulate {
                op: ReduceOp::Max,
                dtype: DType::F32,
                acc: reg(mnew, i.clone() % 4 / 2),
                value: f32v(s, i),
            })]
        });
        self.for_unrolled(out, "mq", 2, |_, h| quad(ReduceOp::Max, reg(mnew, h.clone())));
        self.for_unrolled(out, "ch", 2, |_, h| {
            let c = exp2(bin(
                BinaryOp::Mul,
                bin(BinaryOp::Sub, f32v(mrow, h.clone()), f32v(shift, h.clone())),
                e_scale.clone(),
            ));
            vec![
                Stmt::Simt(SimtStmt::Compute {
                    dst: reg(shift, h.clone()),
                    value: finite_or_zero(f32v(mnew, h.clone())),
                }),
                Stmt::Simt(SimtStmt::Compute { dst: reg(corr, h.clone()), value: c }),
                Stmt::Simt(SimtStmt::Compute { dst: reg(mrow, h.clone()), value: f32v(mnew, h.clone()) }),
                Stmt::Simt(SimtStmt::Compute {
                    dst: reg(lrow, h.clone()),
                    value: bin(BinaryOp::Mul, f32v(lrow, h.clone()), f32v(corr, h)),
                }),
            ]
        });
    }

    /// The keys this CTA reads: `N`, or fewer where a −inf constant bias
    /// with one constraint `α·m + β·n + γ ≥ 0` (`α ≥ 0 > β`, no batch
    /// term: the causal mask) rules out every key past a column for all of
    /// the CTA's rows `m ≤ m0 + bm − 1`: `n ≤ ⌊(α·(m0 + bm − 1) + γ) / −β⌋`.
    /// Only when every later score op keeps −inf at −inf (a positive
    /// scale, a rounding, a constant bias that is never +inf).
    fn kv_end(&self, ids: &Ids) -> Expr {
        let mut end = Expr::c(self.a.n);
        for (i, op) in self.a.scores.iter().enumerate() {
            let ScoreOp::Add(Bias::Guarded { valid, otherwise, .. }) = op else { continue };
            let keeps_ninf = |op: &ScoreOp| match op {
                ScoreOp::Scale(c) => *c > 0.0,
                ScoreOp::Round(_) => true,
                ScoreOp::Add(Bias::Guarded { value, otherwise, .. }) => {
                    *value != f32::INFINITY && *otherwise != f32::INFINITY
                }
                ScoreOp::Add(Bias::Tensor { .. }) => false,
            };
            if *otherwise != f32::NEG_INFINITY || !self.a.scores[i + 1..].iter().all(keeps_ninf) {
                continue;
            }
            for l in valid {
                if l.m >= 0 && l.n < 0 && l.c == 0 && l.batch.iter().all(|&x| x == 0) {
                    let last = ids.m0.clone() + (self.bm - 1);
                    let bound = Expr::bin(BinOp::FloorDiv, last * l.m + l.constant, Expr::c(-l.n));
                    end = end.min((bound + 1).max(0));
                }
            }
        }
        end
    }

    /// Whether every score of key block `je` of this CTA (rows `m0 ..
    /// m0 + bm`, columns `je·BN .. (je + 1)·BN`) is inside `M × N` and has
    /// every guarded bias at its `value`: each constraint `α·m + β·n + … ≥
    /// 0` holds at its minimum over that box (`m0` or the last row by the
    /// sign of `α`, likewise for `n`). A constraint on the channel is never
    /// taken to hold. Uniform over the CTA.
    fn interior(&self, ids: &Ids, je: Expr) -> Expr {
        let (first_row, last_row) = (ids.m0.clone(), ids.m0.clone() + (self.bm - 1));
        let (first_col, last_col) = (je.clone() * BN, je * BN + (BN - 1));
        let mut cond = last_row.clone().lt(self.a.m).and(last_col.clone().lt(self.a.n));
        for op in &self.a.scores {
            let ScoreOp::Add(Bias::Guarded { valid, .. }) = op else { continue };
            for l in valid {
                if l.c != 0 {
                    return Expr::c(0);
                }
                let row = if l.m >= 0 { first_row.clone() } else { last_row.clone() };
                let col = if l.n >= 0 { first_col.clone() } else { last_col.clone() };
                cond = cond.and(Expr::c(-1).lt(lin_expr(l, &ids.batch, row, col, Expr::c(0))));
            }
        }
        cond
    }

    /// One bias term at score `(row, col)`, a tensor bias read through
    /// `param` (its parameter, which [`build`] adds; without one the bias
    /// is read as 0). Reads only inside `M × N` (the caller selects −inf
    /// outside).
    fn bias_value(&self, bias: &Bias, param: Option<ParamId>, ids: &Ids, row: Expr, col: Expr) -> ScalarExpr {
        match (bias, param) {
            (Bias::Tensor { dtype, at }, Some(param)) => {
                let inside = row.clone().lt(self.a.m).and(col.clone().lt(self.a.n));
                let offset = inside.select(lin_expr(at, &ids.batch, row, col, Expr::c(0)), 0);
                let load = ScalarExpr::Load { src: GlobalRef { param, offset }, dtype: *dtype };
                if *dtype == DType::F32 {
                    load
                } else {
                    ScalarExpr::Cast { to: DType::F32, x: Box::new(load) }
                }
            }
            (Bias::Tensor { .. }, None) => ScalarExpr::Const { value: 0.0, dtype: DType::F32 },
            (Bias::Guarded { value, valid, otherwise }, _) => {
                let cond = valid.iter().fold(Expr::c(1), |acc, l| {
                    acc.and(Expr::c(-1).lt(lin_expr(l, &ids.batch, row.clone(), col.clone(), Expr::c(0))))
                });
                let c = |v: f32| ScalarExpr::Const { value: v as f64, dtype: DType::F32 };
                ScalarExpr::Select { cond, then: Box::new(c(*value)), otherwise: Box::new(c(*otherwise)) }
            }
        }
    }

    /// The copies of one tile into ring stage `stage`: chunk `i·threads +
    /// tid` of the tile's 8-element (16-byte) chunks, row-major.
    fn copy(&mut self, t: &Tile, ids: &Ids, stage: Expr, tag: &str) -> Vec<Stmt> {
        let es = self.a.ab.size_bytes() as i64;
        let threads = self.k.threads() as i64;
        let per_row = t.cols / 8;
        let chunks = t.rows * per_row;
        let var = self.k.add_var(&format!("{tag}_i"));
        let mut body = Vec::new();
        let ch = self.let_(&mut body, &format!("{tag}_chunk"), Expr::Var(var) * threads + ids.tid.clone());
        let row = self.let_(&mut body, &format!("{tag}_row"), ch.clone() / per_row);
        let col = self.let_(&mut body, &format!("{tag}_col"), ch.clone() % per_row * 8);
        let at_row = t.row0.clone() + row.clone();
        let inside = self.let_(&mut body, &format!("{tag}_in"), at_row.clone().lt(t.row_end));
        let (m, n) = if t.query { (at_row, Expr::c(0)) } else { (Expr::c(0), at_row) };
        let at = lin_expr(t.lin, &ids.batch, m, n, col.clone());
        let in_tile = match self.arch {
            Arch::Sm80 => row * (t.cols * es) + col.clone() * es,
            // Column block `col / 64` of `rows × 128` bytes, then the row.
            Arch::Sm90 => {
                col.clone() / WGMMA_COLS * (t.rows * WGMMA_COLS * es)
                    + row * (WGMMA_COLS * es)
                    + col.clone() % WGMMA_COLS * es
            }
        };
        let dst = SmemRef { offset: stage * t.stage_bytes + in_tile, ..t.smem.clone() };
        let src = GlobalRef { param: t.param, offset: inside.clone().select(at, 0) };
        let copy = Stmt::Mma(MmaStmt::CpAsync { dst, src, bytes: 16, src_bytes: inside.select(16, 0) });
        if chunks % threads == 0 {
            body.push(copy);
        } else {
            body.push(Stmt::If { cond: ch.lt(chunks), then: vec![copy], otherwise: Vec::new() });
        }
        let iters = (chunks + threads - 1) / threads;
        vec![Stmt::For { var, start: Expr::c(0), end: Expr::c(iters), step: 1, unroll: true, body }]
    }
}

/// A block of [`BN`] keys from key row `row0`: of V (`value`, `dv`
/// columns) or K (`d` columns), into its ring stage.
fn key_tile<'l>(a: &'l Attention, p: &AttentionParams, rg: &Regs, value: bool, row0: Expr) -> Tile<'l> {
    let (param, smem, cols, lin) = if value { (p.v, &rg.vs, a.dv, &a.v) } else { (p.k, &rg.ks, a.d, &a.k) };
    Tile {
        param,
        smem: smem.clone(),
        stage_bytes: BN * cols * a.ab.size_bytes() as i64,
        rows: BN,
        cols,
        row0,
        row_end: a.n,
        lin,
        query: false,
    }
}

/// The K-major descriptor of k16 step `kk` of a `rows`-row tile at byte
/// `base` of `smem` laid out as sm90's copies write it (column blocks of
/// 64 elements, `rows × 128` bytes each, 128-byte swizzle): the step's
/// column block, then 32 bytes per step inside it; `sbo` steps 8 rows.
fn k_major(smem: &SmemRef, base: Expr, kk: i64, rows: i64) -> MatrixDesc {
    let block = kk * 16 / WGMMA_COLS;
    let offset = base + (block * rows * 128 + kk * 16 % WGMMA_COLS * 2);
    MatrixDesc { start: SmemRef { offset, ..smem.clone() }, lbo: 16, sbo: SWIZZLE_ATOM as u32 }
}

/// `l` at batch digits `batch` and `(m, n, c)`, only its non-zero terms.
fn lin_expr(l: &Lin, batch: &[Expr], m: Expr, n: Expr, c: Expr) -> Expr {
    let terms = l.batch.iter().zip(batch).map(|(&k, x)| (k, x.clone())).chain([(l.m, m), (l.n, n), (l.c, c)]);
    Expr::linear(terms, l.constant)
}

/// One `ldmatrix.x4` of `src` into the B fragments `bf[0..4]` (two n8
/// tiles, `trans` for a `[k, n]` tile) and the two `mma.sync` that add
/// `A·B` of tiles `2·nj` and `2·nj + 1` into `acc` (four registers each),
/// the A fragment `af[a_base..a_base + 4]`.
#[allow(clippy::too_many_arguments)]
fn ldmatrix_mma_pair(
    ab: DType,
    src: SmemRef,
    trans: bool,
    bf: RegId,
    acc: RegId,
    nj: &Expr,
    af: RegId,
    a_base: Expr,
) -> Vec<Stmt> {
    let r = |reg: RegId, index: Expr| RegRef { reg, index };
    let dst = (0..4).map(|x| r(bf, Expr::c(x))).collect();
    let mut v = vec![Stmt::Mma(MmaStmt::LdMatrix { num: LdMatrixNum::X4, trans, dst, src })];
    for half in 0..2 {
        let c: Vec<RegRef> = (0..4).map(|x| r(acc, (nj.clone() * 2 + half) * 4 + x)).collect();
        v.push(Stmt::Mma(MmaStmt::MmaSync {
            ab,
            d: c.clone(),
            a: (0..4).map(|x| r(af, a_base.clone() + x)).collect(),
            b: (0..2).map(|x| r(bf, Expr::c(half * 2 + x))).collect(),
            c,
        }));
    }
    v
}

fn reg(reg: RegId, index: Expr) -> RegRef {
    RegRef { reg, index }
}

fn f32v(r: RegId, index: Expr) -> ScalarExpr {
    ScalarExpr::Reg { reg: reg(r, index), dtype: DType::F32 }
}

fn cst(value: f64) -> ScalarExpr {
    ScalarExpr::Const { value, dtype: DType::F32 }
}

fn bin(op: BinaryOp, x: ScalarExpr, y: ScalarExpr) -> ScalarExpr {
    ScalarExpr::Binary { op, a: Box::new(x), b: Box::new(y) }
}

fn exp2(x: ScalarExpr) -> ScalarExpr {
    ScalarExpr::Unary { op: UnaryOp::Exp2, x: Box::new(x) }
}

/// `x`, or 0 where `x` is −inf: the shift of a row with no finite score
/// yet, so that `exp2` of its −inf scores gives 0 rather than NaN.
fn finite_or_zero(x: ScalarExpr) -> ScalarExpr {
    let is_ninf = bin(BinaryOp::Cmpeq, x.clone(), cst(f64::NEG_INFINITY));
    ScalarExpr::Where { cond: Box::new(is_ninf), a: Box::new(cst(0.0)), b: Box::new(x) }
}

/// `acc` reduced by `op` over the quad of lanes that hold one row of a
/// fragment (lanes `4·g .. 4·g + 4`), every lane left with the result.
fn quad(op: ReduceOp, acc: RegRef) -> Vec<Stmt> {
    [1, 2]
        .map(|lane_mask| Stmt::Simt(SimtStmt::ShflBfly { op, dtype: DType::F32, acc: acc.clone(), lane_mask }))
        .to_vec()
}

//! The statements of the GPU dialect: [`Stmt`] holds the control flow
//! and the CTA barriers; the statements of one hardware feature set are
//! grouped, each group one enum that its printer, emulator and verifier
//! arms match whole: [`MmaStmt`] (sm80 asynchronous copies, `ldmatrix`,
//! `mma.sync`, fragment moves, the epilogue and the vector and shared
//! accesses around it), [`SimtStmt`] (scalar values in registers, warp
//! shuffles, scalar and vector global accesses) and [`Sm90Stmt`] (TMA,
//! mbarriers, clusters, `wgmma`, `setmaxnreg`, `griddepcontrol`). See
//! [`super::ir`] for ids, units and invariants.

use crate::tiny::ReduceOp;
use crate::DType;

use super::ir::{
    reduce_name, Arch, EpilogueOp, Expr, GlobalRef, LdMatrixNum, MatrixDesc, ParamId, RegRef, ScalarExpr, SmemRef,
    VarId,
};

/// A statement. See [`super::ir`] for ids and units.
#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    /// `const long long var = value;`.
    Let { var: VarId, value: Expr },
    /// `for (var = start; var < end; var += step)`, `step > 0`;
    /// `unroll` prints `#pragma unroll` (register indices may then use `var`).
    For { var: VarId, start: Expr, end: Expr, step: i64, unroll: bool, body: Vec<Stmt> },
    /// `if (cond) { then } else { otherwise }`.
    If { cond: Expr, then: Vec<Stmt>, otherwise: Vec<Stmt> },
    /// `bar.sync 0`: every thread of the CTA.
    Barrier,
    /// `bar.sync id, threads` (PTX ISA "bar.sync"): the named barrier `id`
    /// (1..=15; 0 is [`Stmt::Barrier`]'s) of `threads` threads (a multiple
    /// of 32): one role's threads of a [`Stmt::WarpSpecialize`].
    BarrierNamed { id: u32, threads: u32 },
    /// Warp specialisation (CUTLASS's producer/consumer kernels): the
    /// threads below `producer_threads` (whole warpgroups) run `producer`,
    /// the others `consumer`, concurrently; the roles share data through
    /// shared memory ordered by mbarriers only. Printed as `if
    /// (threadIdx.x < producer_threads) { producer } else { consumer }`.
    WarpSpecialize { producer_threads: u32, producer: Vec<Stmt>, consumer: Vec<Stmt> },
    /// An sm80 tensor-core, copy or epilogue statement.
    Mma(MmaStmt),
    /// A scalar, shuffle or global-access statement of the SIMT kernels.
    Simt(SimtStmt),
    /// An sm90 statement (TMA, mbarrier, cluster, `wgmma`).
    Sm90(Sm90Stmt),
}

/// The sm80 tensor-core statements: asynchronous and synchronous copies
/// to shared memory, `ldmatrix`, `mma.sync`, fragment moves, the epilogue
/// and the vector global and shared accesses of its stores.
#[derive(Clone, Debug, PartialEq)]
pub enum MmaStmt {
    /// `cp.async.{cg|ca}.shared.global [dst], [src], bytes, src_bytes` (PTX
    /// ISA "cp.async"): copies `src_bytes` (0..=`bytes`) bytes and
    /// zero-fills the rest; `bytes` ∈ {4, 8, 16}, both addresses aligned to
    /// `bytes`. 16 bytes print as `.cg` (L2 only), 4 and 8 as `.ca` (`.cg`
    /// takes only 16).
    /// With `src_bytes = 0` nothing is read. The data become visible to the
    /// issuing thread at the `WaitGroup` that completes its group.
    CpAsync { dst: SmemRef, src: GlobalRef, bytes: u32, src_bytes: Expr },
    /// `cp.async.commit_group`: closes this thread's open group.
    CommitGroup,
    /// `cp.async.wait_group pending`: waits until at most `pending` of this
    /// thread's committed groups are incomplete.
    WaitGroup { pending: u32 },
    /// A synchronous copy through a register (`ld.global` then
    /// `st.shared`), same operands as `CpAsync`; `bytes` ∈ {2, 4, 8, 16}.
    /// Used when operands are not aligned for `cp.async`.
    CopySync { dst: SmemRef, src: GlobalRef, bytes: u32, src_bytes: Expr },
    /// `ldmatrix.sync.aligned.m8n8.{num}{.trans}.shared.b16`: lane `l`
    /// gives the address of row `l % 8` of matrix `l / 8` (16 bytes,
    /// 16-byte aligned); `dst[i]` receives matrix `i`'s fragment.
    LdMatrix { num: LdMatrixNum, trans: bool, dst: Vec<RegRef>, src: SmemRef },
    /// `mma.sync.aligned.m16n8k16.row.col.f32.{ab}.{ab}.f32 d, a, b, c`
    /// with `ab` f16 or bf16: `d` and `c` are four `f32` registers, `a`
    /// four and `b` two `B16x2` registers (invariant 4).
    MmaSync { ab: DType, d: Vec<RegRef>, a: Vec<RegRef>, b: Vec<RegRef>, c: Vec<RegRef> },
    /// `mov.b32 dst, value` on an `f32` register.
    MovF32 { dst: RegRef, value: f32 },
    /// `cvt.rn.{f16x2|bf16x2}.f32 dst, hi, lo` (PTX ISA "cvt"): rounds two
    /// `f32` registers to `dtype` (f16 or bf16, round to nearest even) and
    /// packs them into the `B16x2` register `dst`, `lo` in the low half —
    /// an accumulator fragment of one `mma` becoming an A operand of the
    /// next (FlashAttention-2's `P`).
    PackB16x2 { dst: RegRef, lo: RegRef, hi: RegRef, dtype: DType },
    /// Applies `ops` in order to the accumulator `acc`; when `pred` is
    /// false, nothing (no operand load).
    Epilogue { acc: RegRef, pred: Expr, ops: Vec<EpilogueOp> },
    /// `st.global[.v2|.v4]`: stores `src` (f32 registers) rounded to
    /// `dtype` to consecutive elements at `dst` when `pred`; the access
    /// (`src.len() × sizeof(dtype)` bytes, at most 16) is aligned to its size.
    StGlobalVec { dst: GlobalRef, src: Vec<RegRef>, dtype: DType, pred: Expr },
    /// `st.shared[.v2|.v4]`: stores `src` (f32 registers) rounded to
    /// `dtype` to consecutive elements at `dst` (the epilogue's staging of
    /// the C tile), or one `i32` register with `dtype` i32 (a scan's warp
    /// total); registers of `dtype`'s [`compute_kind`]; at most 16 bytes,
    /// aligned to their size.
    StShared { dst: SmemRef, src: Vec<RegRef>, dtype: DType },
    /// `ld.shared[.v2|.v4]`: loads `dst.len()` consecutive elements of
    /// `dtype` at `src` into f32 registers, or one `i32` into an `i32`
    /// register; at most 16 bytes, aligned.
    LdShared { dst: Vec<RegRef>, src: SmemRef, dtype: DType },
}

/// The SIMT statements: scalar values computed in registers
/// ([`ScalarExpr`]), warp shuffles, scalar stores and vector loads.
#[derive(Clone, Debug, PartialEq)]
pub enum SimtStmt {
    /// `dst = value`: a scalar computed in registers ([`ScalarExpr`]);
    /// `dst`'s kind is the value's compute kind ([`compute_kind`]).
    Compute { dst: RegRef, value: ScalarExpr },
    /// `acc = op(acc, value)` in the compute type of `dtype` (the
    /// accumulator's), without rounding (`loop_ir`: accumulate wide, round
    /// the read); `value` has dtype `dtype`. SUM adds (wrapping for i32, OR
    /// for bool), MAX/MIN propagate NaN.
    Accumulate { op: ReduceOp, dtype: DType, acc: RegRef, value: ScalarExpr },
    /// One butterfly step of a warp reduction: `acc = op(acc,
    /// shfl.sync.bfly.b32(acc, lane_mask, 0x1f, 0xffffffff))` (PTX ISA
    /// "shfl.sync"): every lane combines its value with lane `lane ^
    /// lane_mask`'s, the combine as [`SimtStmt::Accumulate`]'s. All 32 lanes of
    /// the warp must execute it (the member mask is full), so it must not
    /// be under control that differs between the lanes of a warp.
    ShflBfly { op: ReduceOp, dtype: DType, acc: RegRef, lane_mask: u32 },
    /// One step of a warp's inclusive scan (Hillis & Steele): `t =
    /// shfl.sync.up.b32(acc, delta, 0, 0xffffffff)` (PTX ISA "shfl.sync",
    /// mode `.up`: lane `l` reads lane `l - delta`), then the lanes `l ≥
    /// delta` set `acc = op(t, acc)`, the combine as [`SimtStmt::Accumulate`]'s.
    /// Steps with `delta` 1, 2, 4, 8, 16 leave lane `l` the combination of
    /// lanes `0..=l`. Full member mask, as [`SimtStmt::ShflBfly`].
    ShflUpScan { op: ReduceOp, dtype: DType, acc: RegRef, delta: u32 },
    /// `dst = shfl.sync.idx.b32(src, lane, 0x1f, 0xffffffff)`: every lane
    /// reads `src` of the lane `lane` gives it (in `0..32`; a constant is a
    /// broadcast); both registers of `dtype`'s compute kind. Full member
    /// mask, as [`SimtStmt::ShflBfly`].
    ShflIdx { dtype: DType, dst: RegRef, src: RegRef, lane: Expr },
    /// `st.global` of one element: `src` (a register of `dtype`'s compute
    /// kind) converted to `dtype` (rounded for f16/bf16) at `dst`, when `pred`.
    StGlobal { dst: GlobalRef, src: RegRef, dtype: DType, pred: Expr },
    /// `ld.global[.v2|.v4]`: `dst.len()` consecutive elements of `dtype` at
    /// `src` (the access aligned to its size, at most 16 bytes) widened into
    /// registers of `dtype`'s compute kind, when `pred` (else the registers
    /// are unchanged).
    LdGlobalVec { dst: Vec<RegRef>, src: GlobalRef, dtype: DType, pred: Expr },
}

/// The sm90 statements: TMA copies, mbarriers, clusters, `wgmma`,
/// `setmaxnreg` and `griddepcontrol`.
#[derive(Clone, Debug, PartialEq)]
pub enum Sm90Stmt {
    /// `setmaxnreg.{inc|dec}.sync.aligned.u32 regs` (PTX ISA
    /// "setmaxnreg", sm_90a): the executing warpgroup's registers per
    /// thread become `regs` (a multiple of 8 in 24..=256), released to or
    /// taken from the CTA's pool.
    SetMaxNReg { inc: bool, regs: u32 },
    /// `griddepcontrol.wait` (PTX ISA 7.8, sm_90): waits for the grids this
    /// one depends on; a no-op for a kernel launched alone.
    GridDepControlWait,
    /// `mbarrier.init.shared::cta.b64 [bar], count` (PTX ISA "mbarrier"):
    /// the 8-byte barrier at `bar` starts phase 0 expecting `count`
    /// arrivals. One thread initialises it; [`Sm90Stmt::FenceMbarrierInit`] and
    /// a `Barrier` publish it to the CTA and to the TMA unit.
    MbarrierInit { bar: SmemRef, count: u32 },
    /// `fence.mbarrier_init.release.cluster`: orders the initialisations
    /// before later uses by other threads and the async proxy.
    FenceMbarrierInit,
    /// `mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], bytes`: each
    /// executing thread arrives once and adds `bytes` to the transactions
    /// the current phase waits for. The phase completes when every
    /// expected arrival came and the transactions' bytes all landed.
    MbarrierArriveExpectTx { bar: SmemRef, bytes: u32 },
    /// `mbarrier.try_wait.parity.shared::cta.b64` in a loop: waits until the
    /// phase of parity `parity` (0 or 1) has completed. Phase `p`'s data
    /// (the copies that complete it) are visible to the thread after it.
    MbarrierWait { bar: SmemRef, parity: Expr },
    /// `mbarrier.arrive.shared::cta.b64 _, [bar]`: each executing thread
    /// arrives once on the current phase (a consumer releasing a ring
    /// stage to the producer). With `cta`, the arrival goes to the
    /// mbarrier at the same offset in that CTA of the cluster (its rank,
    /// `0..Kernel::cluster`): `mapa.shared::cluster` then
    /// `mbarrier.arrive.shared::cluster.b64` (PTX ISA "mapa",
    /// "mbarrier.arrive"; the default `.release.cta` semantics, as
    /// CUTLASS's `ClusterBarrier::arrive`: an explicit `.release.cluster`
    /// costs two `MEMBAR`s per arrival), a consumer releasing a stage
    /// that its peer's producer multicasts into, after the reads that
    /// used it retired.
    MbarrierArrive { bar: SmemRef, cta: Option<Expr> },
    /// `cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
    /// [dst], [map, {coords}], [bar]` (PTX ISA "cp.async.bulk.tensor"): each
    /// executing thread copies the box of tensor-map parameter `map` whose
    /// first element is at `coords` (innermost first, in elements; may lie
    /// partly or wholly outside the tensor: zero fill) to `dst` (128-byte
    /// aligned, 1024 with the 128-byte swizzle; the map's swizzle), and
    /// completes the box's bytes on `bar`'s current phase. With
    /// `multicast` (`.multicast::cluster`, a `ctaMask` of cluster ranks)
    /// the box lands at `dst` in every CTA of the mask and completes its
    /// bytes on the mbarrier at `bar`'s offset in each (PTX ISA
    /// "cp.async.bulk.tensor": "the destination and mbarrier addresses are
    /// relative to each destination CTA").
    TmaLoad { dst: SmemRef, map: ParamId, coords: [Expr; 2], bar: SmemRef, multicast: Option<u16> },
    /// `barrier.cluster.arrive.release.aligned` then
    /// `barrier.cluster.wait.acquire.aligned` (PTX ISA "barrier.cluster"):
    /// every thread of every CTA of the cluster meets here. Needed after
    /// the mbarriers are initialised, before a peer's multicast or remote
    /// arrival may reach them, and before a CTA exits while a peer may
    /// still reach its shared memory (PTX ISA "Distributed Shared
    /// Memory"). A CTA barrier too.
    ClusterSync,
    /// `fence.proxy.async.shared::cta` (PTX ISA "membar/fence"): orders
    /// this thread's earlier generic-proxy writes of shared memory (`st`,
    /// `cp.async`) before later async-proxy reads (`wgmma`, TMA), which
    /// need it ("Async Proxy" of `wgmma`); a `Barrier` after it publishes
    /// that to the other threads.
    FenceProxyAsync,
    /// `wgmma.fence.sync.aligned`: orders this warpgroup's register
    /// accesses before the next `wgmma` reads or writes its accumulators.
    WgmmaFence,
    /// `wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ab}.{ab}` (PTX ISA
    /// "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"): the
    /// warpgroup (128 threads) adds the product of the 64×16 A tile (`a`:
    /// K-major in shared memory, or fragments in registers, [`WgmmaA`])
    /// and the 16×`n` B tile (`b`: K-major, or MN-major when
    /// `trans_b`) to its 64×`n` f32 accumulator, `n / 2` registers per
    /// thread from `d`: warp `w` of the warpgroup, lane `l` (`g = l / 4`,
    /// `q = l % 4`) holds in register `4j + 2h + c` the element of row
    /// `16w + g + 8h`, column `8j + 2q + c` (PTX ISA "Register Fragments and
    /// Shared Memory Matrix Layouts": the `mma.m16n8` C layout repeated).
    /// Asynchronous: the registers hold the sum only after a
    /// [`Sm90Stmt::WgmmaWait`] retires its group; `n` is a multiple of 8 up to
    /// 256. `scale_d` is PTX's `scale-d`: when false the product replaces
    /// the accumulator instead of adding to it (`d` is not read), so a
    /// product starts without zeroing moves for the compilers to reorder.
    Wgmma { ab: DType, n: u32, d: RegRef, a: WgmmaA, b: MatrixDesc, trans_b: bool, scale_d: bool },
    /// `wgmma.commit_group.sync.aligned`: closes the warpgroup's open
    /// group of `wgmma`s.
    WgmmaCommit,
    /// `wgmma.wait_group.sync.aligned pending`: waits until at most
    /// `pending` of the warpgroup's committed groups are in flight.
    WgmmaWait { pending: u32 },
}

/// Where a [`Sm90Stmt::Wgmma`] reads its 64×16 A tile.
#[derive(Clone, Debug, PartialEq)]
pub enum WgmmaA {
    /// Shared memory through a K-major matrix descriptor.
    Smem(MatrixDesc),
    /// Registers: four `B16x2` registers per thread from this one, warp
    /// `w` of the warpgroup holding rows `16w..16w+15` in the layout of
    /// `mma.m16n8k16`'s A fragment (with `g = lane / 4`, `q = lane % 4`:
    /// register `j` holds row `16w + g + 8·(j % 2)`, columns `2q + 8·(j / 2)`
    /// and `+1`, the first in the low half; PTX ISA "Register Fragments and
    /// Shared Memory Matrix Layouts", wgmma A in registers). Like the
    /// accumulators they may not be touched while the `wgmma` is in flight,
    /// and a write to them needs a `wgmma.fence` before the next `wgmma`.
    Regs(RegRef),
}

impl WgmmaA {
    /// The first A-fragment register, when A is in registers.
    pub fn regs(&self) -> Option<&RegRef> {
        match self {
            WgmmaA::Regs(r) => Some(r),
            WgmmaA::Smem(_) => None,
        }
    }

    /// The descriptor, when A is in shared memory.
    pub fn desc(&self) -> Option<&MatrixDesc> {
        match self {
            WgmmaA::Smem(d) => Some(d),
            WgmmaA::Regs(_) => None,
        }
    }
}

impl Stmt {
    /// The oldest architecture that has this statement (PTX ISA target
    /// requirements of each instruction).
    pub fn min_arch(&self) -> Arch {
        match self {
            Stmt::WarpSpecialize { .. } | Stmt::Sm90(_) => Arch::Sm90,
            // cp.async, ldmatrix and mma.m16n8k16 need sm_80; the others any.
            Stmt::Let { .. }
            | Stmt::For { .. }
            | Stmt::If { .. }
            | Stmt::Barrier
            | Stmt::BarrierNamed { .. }
            | Stmt::Mma(_)
            | Stmt::Simt(_) => Arch::Sm80,
        }
    }

    /// The PTX mnemonic or C keyword of this statement, for errors.
    pub fn head(&self) -> String {
        match self {
            Stmt::Let { .. } => "let".into(),
            Stmt::For { .. } => "for".into(),
            Stmt::If { .. } => "if".into(),
            Stmt::Barrier => "bar.sync".into(),
            Stmt::BarrierNamed { id, threads } => format!("bar.sync {id}, {threads}"),
            Stmt::WarpSpecialize { .. } => "warp_specialize".into(),
            Stmt::Sm90(Sm90Stmt::SetMaxNReg { inc, regs }) => {
                format!("setmaxnreg.{} {regs}", if *inc { "inc" } else { "dec" })
            }
            Stmt::Mma(MmaStmt::CpAsync { .. }) => "cp.async".into(),
            Stmt::Mma(MmaStmt::CommitGroup) => "cp.async.commit_group".into(),
            Stmt::Mma(MmaStmt::WaitGroup { pending }) => format!("cp.async.wait_group {pending}"),
            Stmt::Mma(MmaStmt::CopySync { .. }) => "copy.sync".into(),
            Stmt::Mma(MmaStmt::LdMatrix { num, trans, .. }) => {
                format!("ldmatrix.x{}{}", num.count(), if *trans { ".trans" } else { "" })
            }
            Stmt::Mma(MmaStmt::MmaSync { .. }) => "mma.sync.m16n8k16".into(),
            Stmt::Mma(MmaStmt::MovF32 { .. }) => "mov.b32".into(),
            Stmt::Mma(MmaStmt::PackB16x2 { dtype, .. }) => format!("cvt.rn.{}x2.f32", dtype.dsl_name()),
            Stmt::Mma(MmaStmt::Epilogue { .. }) => "epilogue".into(),
            Stmt::Mma(MmaStmt::StGlobalVec { src, .. }) => format!("st.global.v{}", src.len()),
            Stmt::Mma(MmaStmt::StShared { src, .. }) => format!("st.shared.v{}", src.len()),
            Stmt::Mma(MmaStmt::LdShared { dst, .. }) => format!("ld.shared.v{}", dst.len()),
            Stmt::Sm90(Sm90Stmt::GridDepControlWait) => "griddepcontrol.wait".into(),
            Stmt::Simt(SimtStmt::Compute { .. }) => "compute".into(),
            Stmt::Simt(SimtStmt::Accumulate { op, .. }) => format!("accumulate.{}", reduce_name(*op)),
            Stmt::Simt(SimtStmt::ShflBfly { .. }) => "shfl.sync.bfly.b32".into(),
            Stmt::Simt(SimtStmt::ShflUpScan { .. }) => "shfl.sync.up.b32".into(),
            Stmt::Simt(SimtStmt::ShflIdx { .. }) => "shfl.sync.idx.b32".into(),
            Stmt::Simt(SimtStmt::StGlobal { .. }) => "st.global".into(),
            Stmt::Simt(SimtStmt::LdGlobalVec { dst, .. }) => format!("ld.global.v{}", dst.len()),
            Stmt::Sm90(Sm90Stmt::MbarrierInit { .. }) => "mbarrier.init".into(),
            Stmt::Sm90(Sm90Stmt::FenceMbarrierInit) => "fence.mbarrier_init".into(),
            Stmt::Sm90(Sm90Stmt::MbarrierArriveExpectTx { .. }) => "mbarrier.arrive.expect_tx".into(),
            Stmt::Sm90(Sm90Stmt::MbarrierWait { .. }) => "mbarrier.try_wait.parity".into(),
            Stmt::Sm90(Sm90Stmt::MbarrierArrive { cta: None, .. }) => "mbarrier.arrive".into(),
            Stmt::Sm90(Sm90Stmt::MbarrierArrive { cta: Some(_), .. }) => "mbarrier.arrive.shared::cluster".into(),
            Stmt::Sm90(Sm90Stmt::TmaLoad { multicast: None, .. }) => "cp.async.bulk.tensor.2d".into(),
            Stmt::Sm90(Sm90Stmt::TmaLoad { multicast: Some(_), .. }) => {
                "cp.async.bulk.tensor.2d.multicast::cluster".into()
            }
            Stmt::Sm90(Sm90Stmt::ClusterSync) => "barrier.cluster".into(),
            Stmt::Sm90(Sm90Stmt::FenceProxyAsync) => "fence.proxy.async".into(),
            Stmt::Sm90(Sm90Stmt::WgmmaFence) => "wgmma.fence".into(),
            Stmt::Sm90(Sm90Stmt::Wgmma { n, .. }) => format!("wgmma.mma_async.m64n{n}k16"),
            Stmt::Sm90(Sm90Stmt::WgmmaCommit) => "wgmma.commit_group".into(),
            Stmt::Sm90(Sm90Stmt::WgmmaWait { pending }) => format!("wgmma.wait_group {pending}"),
        }
    }

    /// Whether the statement is a `.sync.aligned` warpgroup collective
    /// (`wgmma.*`): all 128 threads of each warpgroup that reaches it
    /// execute it together.
    pub fn is_warpgroup_collective(&self) -> bool {
        matches!(
            self,
            Stmt::Sm90(Sm90Stmt::WgmmaFence)
                | Stmt::Sm90(Sm90Stmt::Wgmma { .. })
                | Stmt::Sm90(Sm90Stmt::WgmmaCommit)
                | Stmt::Sm90(Sm90Stmt::WgmmaWait { .. })
                | Stmt::Sm90(Sm90Stmt::SetMaxNReg { .. })
        )
    }

    /// The statement lists nested in this one, in pre-order: a `For`'s
    /// body, an `If`'s `then` and `otherwise`, a `WarpSpecialize`'s
    /// producer and consumer; empty slices for the others.
    pub fn children(&self) -> [&[Stmt]; 2] {
        match self {
            Stmt::For { body, .. } => [body, &[]],
            Stmt::If { then, otherwise, .. } => [then, otherwise],
            Stmt::WarpSpecialize { producer, consumer, .. } => [producer, consumer],
            Stmt::Let { .. }
            | Stmt::Barrier
            | Stmt::BarrierNamed { .. }
            | Stmt::Mma(_)
            | Stmt::Simt(_)
            | Stmt::Sm90(_) => [&[], &[]],
        }
    }

    /// The nested statement lists as [`Stmt::children`] lists them (only
    /// those that exist), to edit.
    pub fn children_mut(&mut self) -> Vec<&mut Vec<Stmt>> {
        match self {
            Stmt::For { body, .. } => vec![body],
            Stmt::If { then, otherwise, .. } => vec![then, otherwise],
            Stmt::WarpSpecialize { producer, consumer, .. } => vec![producer, consumer],
            Stmt::Let { .. }
            | Stmt::Barrier
            | Stmt::BarrierNamed { .. }
            | Stmt::Mma(_)
            | Stmt::Simt(_)
            | Stmt::Sm90(_) => Vec::new(),
        }
    }
}

/// The ids of named barriers, `bar.sync id, threads` (PTX ISA "bar.sync":
/// 16 per CTA, 0 being `bar.sync 0`'s).
pub const NAMED_BARRIER_IDS: std::ops::Range<u32> = 1..16;

/// Whether `regs` is a register count `setmaxnreg` takes: a multiple of 8
/// in 24..=256 (PTX ISA "setmaxnreg").
pub fn is_maxnreg_count(regs: u32) -> bool {
    regs.is_multiple_of(8) && (24..=256).contains(&regs)
}

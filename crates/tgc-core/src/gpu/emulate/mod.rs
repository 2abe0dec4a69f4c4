//! The emulator of the GPU dialect IR: runs a [`Kernel`] on the CPU, every
//! CTA, warp and lane, with the semantics the CUDA C printer's output has on
//! the device, and reports what would be undefined there as an error naming
//! the statement.
//!
//! Model:
//!
//! - CTAs run one after another in `blockIdx` order (x fastest), the CTAs
//!   of a thread block cluster ([`Kernel::cluster`]) concurrently as tasks
//!   (`emulate/tasks.rs`). Inside a CTA all threads run in lockstep,
//!   statement by statement, under an active mask: `If` narrows the mask,
//!   `For` keeps the threads whose condition holds. A `Barrier` with some
//!   but not all threads active is a `Divergence` error, as is an
//!   `ldmatrix`/`mma.sync` with a partly active warp (both are `.aligned`,
//!   PTX ISA).
//! - Shared memory is bytes, fresh per CTA, with per-byte state: the
//!   `cp.async` copies in flight on it, its last writer and reader and the
//!   barrier epoch of each. A `cp.async` reads global memory when issued and
//!   lands in shared memory at the `cp.async.wait_group` that completes its
//!   group (PTX ISA "cp.async.wait_group"). Reading a byte with a copy in
//!   flight, or never written, is `IncompleteRead`; reading a byte another
//!   thread wrote, or writing one another thread read, since the last
//!   `bar.sync` is a `Race`.
//! - Fragments follow the PTX ISA layouts: `ldmatrix` ("Warp-level matrix
//!   load instruction: ldmatrix": lane `l` receives row `l/4`, columns
//!   `2(l%4)`, `2(l%4)+1` of each 8×8 matrix, transposed with `.trans`) and
//!   `mma.m16n8k16` ("Matrix Fragments for mma.m16n8k16 with floating point
//!   type": with `g = l/4`, `t = l%4`, A `a0:(g, 2t..)`, `a1:(g+8, 2t..)`,
//!   `a2:(g, 2t+8..)`, `a3:(g+8, 2t+8..)`; B `b0:(k=2t.., n=g)`,
//!   `b1:(k=2t+8.., n=g)`; C/D `c0,c1:(g, 2t..)`, `c2,c3:(g+8, 2t..)`).
//!   Products and sums are in `f32`, summed in `k` order onto `c`.
//! - SIMT statements (`Compute`, `Accumulate`, `ShflBfly`, `StGlobal`,
//!   `LdGlobalVec`; [`scalar`]): values in their compute type with the CPU
//!   backend's semantics, in `f32` (so differences from the interpreter's
//!   f64 are f32 rounding); `shfl.sync.bfly` needs every lane of the warp
//!   active (`Divergence` otherwise) and exchanges the values all lanes had
//!   before it.
//! - SM90 (`emulate/sm90.rs`): a TMA box reads global memory when
//!   issued (zero outside the tensor) and lands, swizzled, when an
//!   `MbarrierWait` completes the phase of its mbarrier, which needs every
//!   expected arrival and exactly the bytes `expect_tx` announced; a wait
//!   on a phase that cannot complete is a `Deadlock`, one on the previous
//!   phase's parity passes at once (the data may not be there: the next
//!   read of it is an `IncompleteRead`). A `wgmma` reads its A and B tiles
//!   through the descriptors' layouts ([`MatrixDesc`]) when issued and
//!   writes the D fragment, whose registers are in flight until a
//!   `wgmma.wait_group` retires the group: touching them before is an
//!   `IncompleteRead`, overwriting bytes an in-flight `wgmma` reads is a
//!   `Race`, as is a `wgmma` without a `wgmma.fence` since other
//!   statements wrote its accumulators, or one reading bytes written
//!   through the generic proxy (`st.shared`, `cp.async`) without a
//!   `fence.proxy.async` by their writer.
//! - Warp specialisation and clusters (`emulate/tasks.rs`): the two roles
//!   of a `WarpSpecialize`, and the CTAs of a cluster, run as tasks, each
//!   in lockstep over its own threads, taking turns whenever one reaches
//!   an `MbarrierWait` that cannot complete yet or a `barrier.cluster`
//!   its peers have not reached ([`run_ordered`] with
//!   [`RoleOrder::EveryStatement`]: after every statement); when none can
//!   move it is a `Deadlock` naming the wait. A multicast box lands in
//!   every CTA of its mask and completes on each one's mbarrier; a remote
//!   arrival counts on the peer's; one reaching a CTA that has exited is
//!   a `Race`. An mbarrier arrival orders what the arriving thread did
//!   before it before what a thread does after its wait sees that phase
//!   complete (release/acquire), which the race check of a shared write
//!   honours like a `bar.sync`. `bar.sync id, n` needs exactly `n` active
//!   threads; `setmaxnreg` whole warpgroups.
//! - Every global and shared access is checked against its tensor or
//!   buffer (`OutOfBounds`) and its alignment (`Misaligned`; tensors are
//!   taken as 256-byte aligned, as `cudaMalloc` gives).

use std::collections::{HashMap, VecDeque};

use half::{bf16, f16};

use super::dialect::*;

mod exec;
pub mod scalar;
mod sm90;
mod tasks;
use crate::DType;

/// A launch argument, one per kernel parameter in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    /// A tensor's bytes (little-endian elements of the parameter's dtype).
    Tensor(Vec<u8>),
    /// A scalar parameter's value.
    Int(i64),
    /// A tensor-map parameter: the map its [`TensorMapParam`] makes from
    /// the other arguments (the tensor and its dims), as the runtime
    /// encodes it on the device.
    TensorMap,
}

impl Arg {
    /// A tensor of `dtype` holding `values` rounded to it (nearest even).
    pub fn tensor(dtype: DType, values: &[f64]) -> Arg {
        let mut bytes = Vec::with_capacity(values.len() * dtype.size_bytes());
        for &v in values {
            match dtype {
                DType::F16 => bytes.extend(f16::from_f64(v).to_le_bytes()),
                DType::BF16 => bytes.extend(bf16::from_f64(v).to_le_bytes()),
                DType::F32 => bytes.extend((v as f32).to_le_bytes()),
                DType::I32 => bytes.extend((v as i32).to_le_bytes()),
                DType::Bool => bytes.push((v != 0.0) as u8),
            }
        }
        Arg::Tensor(bytes)
    }

    /// The elements of a tensor argument read as `dtype`; empty for a scalar.
    pub fn values(&self, dtype: DType) -> Vec<f64> {
        match self {
            Arg::Int(_) | Arg::TensorMap => Vec::new(),
            Arg::Tensor(b) => b.chunks_exact(dtype.size_bytes()).map(|c| load(dtype, c)).collect(),
        }
    }
}

fn load(dtype: DType, c: &[u8]) -> f64 {
    match dtype {
        DType::F16 => f16::from_le_bytes([c[0], c[1]]).to_f64(),
        DType::BF16 => bf16::from_le_bytes([c[0], c[1]]).to_f64(),
        DType::F32 => f32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
        DType::I32 => i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as f64,
        DType::Bool => c[0] as f64,
    }
}

/// The bytes of a vector access of `len` elements of `dtype`, when it is
/// one PTX can do: a power-of-two count, 1 to 16 bytes, a float dtype.
fn vector_bytes(len: usize, dtype: DType) -> Option<u64> {
    let n = (len * dtype.size_bytes()) as u64;
    (len.is_power_of_two() && n <= 16 && dtype.is_float()).then_some(n)
}

/// The bytes of a shared-memory access of `len` elements of `dtype`: a
/// vector access ([`vector_bytes`]) or one `i32` (`ld`/`st.shared.s32`).
fn shared_bytes(len: usize, dtype: DType) -> Option<u64> {
    match (len, dtype) {
        (1, DType::I32) => Some(4),
        _ => vector_bytes(len, dtype),
    }
}

/// Appends `v` rounded to `dtype` (a float dtype) as little-endian bytes.
fn store_bytes(dtype: DType, v: f32, out: &mut Vec<u8>) -> Option<()> {
    match dtype {
        DType::F16 => out.extend(f16::from_f32(v).to_le_bytes()),
        DType::BF16 => out.extend(bf16::from_f32(v).to_le_bytes()),
        DType::F32 => out.extend(v.to_le_bytes()),
        _ => return None,
    }
    Some(())
}

fn round_to(dtype: DType, v: f32) -> f32 {
    match dtype {
        DType::F16 => f16::from_f32(v).to_f32(),
        DType::BF16 => bf16::from_f32(v).to_f32(),
        _ => v,
    }
}

/// Where register `j` (0..4) of lane `lane`'s `mma.m16n8k16` A fragment
/// lies in the warp's 16×16 tile, as (row, first column); the register
/// holds that column and the next, the first in its low half (PTX ISA
/// "Matrix Fragments for mma.m16n8k16": `a0:(g, 2t..)`, `a1:(g+8, 2t..)`,
/// `a2:(g, 2t+8..)`, `a3:(g+8, 2t+8..)`). `wgmma`'s A in registers is this
/// per warp of the warpgroup.
fn a_fragment_at(lane: usize, j: usize) -> (usize, usize) {
    (lane / 4 + 8 * (j % 2), 2 * (lane % 4) + 8 * (j / 2))
}

fn b16_to_f32(ab: DType, bits: u16) -> f32 {
    match ab {
        DType::BF16 => bf16::from_bits(bits).to_f32(),
        _ => f16::from_bits(bits).to_f32(),
    }
}

/// What one run did, for tests and tuning: counts over all threads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub ctas: u64,
    pub cp_async_bytes: u64,
    pub ldmatrix: u64,
    pub mma: u64,
    pub barriers: u64,
    /// `wgmma` instructions (one per warpgroup) and bytes TMA copied.
    pub wgmma: u64,
    pub tma_bytes: u64,
    /// Extra shared-memory wavefronts of `ldmatrix` bank conflicts: per
    /// 8×8 matrix (one phase, 8 rows of 16 bytes), the most rows that fall
    /// in the same 16-byte group of the 32 four-byte banks, less one.
    pub ldmatrix_bank_conflicts: u64,
}

/// Runs `kernel` over its whole grid with `args` (one per parameter; the
/// tensors are read and written in place).
///
/// Errors: the first fault met, naming its statement (see the module doc);
/// `BadValue` without a statement for arguments that do not fit the
/// parameters or a grid or block that cannot launch.
pub fn run(kernel: &Kernel, args: &mut [Arg]) -> Result<Stats, GpuError> {
    launch(kernel, args, RoleOrder::default()).map(|(stats, _)| stats)
}

/// How the emulator interleaves its tasks, the CTAs of a cluster and the
/// two roles of a `WarpSpecialize` (`emulate/tasks.rs`); every order is
/// one the hardware allows, and a correct kernel gives the same result
/// under each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RoleOrder {
    /// Each task runs until it waits on a phase that cannot complete yet
    /// (or at a `barrier.cluster`).
    #[default]
    UntilBlocked,
    /// The tasks take turns after every statement: the producer never
    /// runs far ahead of the consumers, nor one CTA of a cluster ahead of
    /// the other.
    EveryStatement,
}

/// [`run`] with the roles of a warp-specialised kernel interleaved as
/// `order` says.
pub fn run_ordered(kernel: &Kernel, args: &mut [Arg], order: RoleOrder) -> Result<Stats, GpuError> {
    launch(kernel, args, order).map(|(stats, _)| stats)
}

/// [`run`], also returning the register arrays of the last CTA run (per
/// [`RegId`], `len` registers per thread, thread-major; `f32` registers as
/// their bits): what a fragment holds, for tests and debugging.
pub fn run_keeping_registers(kernel: &Kernel, args: &mut [Arg]) -> Result<(Stats, Vec<Vec<u32>>), GpuError> {
    launch(kernel, args, RoleOrder::default())
}

fn launch(kernel: &Kernel, args: &mut [Arg], order: RoleOrder) -> Result<(Stats, Vec<Vec<u32>>), GpuError> {
    let bad = |m: String| GpuError::new(Fault::BadValue, None, m);
    if args.len() != kernel.params.len() {
        return Err(bad(format!("{} arguments for {} parameters", args.len(), kernel.params.len())));
    }
    let mut scalars = vec![0i64; args.len()];
    for (i, (p, a)) in kernel.params.iter().zip(args.iter()).enumerate() {
        match (p.kind, a) {
            (ParamKind::Ptr { dtype, .. }, Arg::Tensor(b)) if b.len() % dtype.size_bytes() == 0 => {}
            (ParamKind::I32, Arg::Int(v)) if i32::try_from(*v).is_ok() => scalars[i] = *v,
            (ParamKind::I64, Arg::Int(v)) => scalars[i] = *v,
            (ParamKind::TensorMap(_), Arg::TensorMap) => {}
            _ => return Err(bad(format!("argument {i} does not fit parameter `{}` ({:?})", p.name, p.kind))),
        }
    }
    let target = kernel.arch.target();
    let (threads, warp, most) = (kernel.threads(), target.warp_size, target.max_threads_per_block);
    if threads == 0 || !threads.is_multiple_of(warp) || threads > most {
        return Err(bad(format!("{threads} threads per block: not a positive multiple of {warp} up to {most}")));
    }
    let smem_max = target.smem_per_block_max;
    if kernel.smem_bytes > smem_max {
        return Err(bad(format!("{} bytes of shared memory exceed {}'s {smem_max}", kernel.smem_bytes, target.name)));
    }
    if let Some(b) = kernel.smem.iter().find(|b| b.offset.saturating_add(b.size) > kernel.smem_bytes) {
        return Err(bad(format!(
            "shared buffer `{}` ends past the {} bytes of shared memory",
            b.name, kernel.smem_bytes
        )));
    }
    for p in &kernel.params {
        if let ParamKind::TensorMap(m) = p.kind {
            sm90::check_map(kernel, &m, &scalars, args)
                .map_err(|why| bad(format!("tensor map `{}`: {why}", p.name)))?;
        }
    }
    let mut ids = HashMap::new();
    index(&kernel.body, &mut 0, &mut ids);
    let mut grid = [0i64; 3];
    {
        let no_vars = Frame::new(kernel, &scalars, &ids, 1, [0; 3], [0; 3]);
        for (d, (g, e)) in grid.iter_mut().zip(&kernel.grid).enumerate() {
            *g = no_vars.eval(e, 0, None)?;
            if *g < 0 {
                return Err(bad(format!("grid dimension {d} is {g}")));
            }
        }
    }
    let cluster = kernel.cluster.max(1) as i64;
    if grid[0] % cluster != 0 {
        return Err(bad(format!("grid x of {} is not a multiple of the cluster's {cluster} CTAs", grid[0])));
    }
    let mut stats = Stats::default();
    let mut regs = Vec::new();
    for z in 0..grid[2] {
        for y in 0..grid[1] {
            for x in (0..grid[0]).step_by(cluster as usize) {
                let mut frames: Vec<Frame> = (0..cluster)
                    .map(|r| {
                        let mut f = Frame::new(kernel, &scalars, &ids, threads as usize, [x + r, y, z], grid);
                        f.order = order;
                        f.rank = r as usize;
                        f
                    })
                    .collect();
                tasks::run_cluster(&mut frames, &kernel.body, args)?;
                for f in frames {
                    stats.ctas += 1;
                    stats.cp_async_bytes += f.stats.cp_async_bytes;
                    stats.ldmatrix += f.stats.ldmatrix;
                    stats.mma += f.stats.mma;
                    stats.barriers += f.stats.barriers;
                    stats.wgmma += f.stats.wgmma;
                    stats.tma_bytes += f.stats.tma_bytes;
                    stats.ldmatrix_bank_conflicts += f.stats.ldmatrix_bank_conflicts;
                    regs = f.regs;
                }
            }
        }
    }
    Ok((stats, regs))
}

fn index(body: &[Stmt], next: &mut u32, ids: &mut HashMap<*const Stmt, u32>) {
    for s in body {
        ids.insert(s as *const Stmt, *next);
        *next += 1;
        for body in s.children() {
            index(body, next, ids);
        }
    }
}

/// Per-byte shared-memory state.
#[derive(Clone, Copy, Default)]
struct ByteState {
    /// Copies in flight that will write this byte.
    pending: u16,
    /// Writer and reader as thread + 1 (0: none), with their epochs.
    writer: u32,
    w_epoch: u32,
    reader: u32,
    r_epoch: u32,
    /// The reader's mbarrier arrivals before the read: a writer that has
    /// since waited on a phase with a later arrival of the reader is
    /// ordered after the read ([`Frame::acquired`]).
    r_arrived: u32,
    /// In-flight `wgmma`s (not retired by a `wgmma.wait_group`) that read
    /// this byte.
    wgmma_readers: u16,
    /// Written through the generic proxy with no `fence.proxy.async` by
    /// the writer since: the async proxy (`wgmma`) may not see it.
    generic: bool,
}

/// One `cp.async` in flight: where it lands and what it carries.
#[derive(Clone)]
struct Copy {
    dst: usize,
    data: Vec<u8>,
}

/// One CTA's state.
struct Frame<'k> {
    k: &'k Kernel,
    scalars: &'k [i64],
    ids: &'k HashMap<*const Stmt, u32>,
    threads: usize,
    block_idx: [i64; 3],
    /// The launch's blocks per dimension (`gridDim`).
    grid_dim: [i64; 3],
    /// `vars[t * nvars + v]`.
    vars: Vec<Option<i64>>,
    /// Per register array: `regs[a][t * len + i]`.
    regs: Vec<Vec<u32>>,
    smem: Vec<u8>,
    state: Vec<ByteState>,
    epoch: u32,
    /// Per thread: the open group and the committed groups, oldest first.
    open: Vec<Vec<Copy>>,
    committed: Vec<VecDeque<Vec<Copy>>>,
    /// The variables of the enclosing `For`s (a `Let` may not assign them).
    loop_vars: Vec<VarId>,
    /// The mbarriers, by shared byte address.
    mbars: HashMap<usize, sm90::Mbarrier>,
    /// Per thread, its mbarrier arrivals so far.
    arrived: Vec<u32>,
    /// `(waiter, arriver)` → the latest arrival of `arriver` whose phase
    /// `waiter` has seen complete: what the arriver did before it happens
    /// before what the waiter does after (PTX ISA memory consistency
    /// model: mbarrier arrive has release, a completed wait acquire
    /// semantics).
    acquired: HashMap<(u32, u32), u32>,
    /// How the tasks (the cluster's CTAs, a `WarpSpecialize`'s roles)
    /// interleave.
    order: RoleOrder,
    /// The CTA's rank in its cluster (`blockIdx.x % Kernel::cluster`).
    rank: usize,
    /// Its effects on peer CTAs, delivered when its task's turn ends.
    outbox: Vec<sm90::Remote>,
    /// The `barrier.cluster`s the CTA has arrived at.
    cluster_arrivals: u32,
    /// Whether the CTA has run to its end (a peer may no longer reach its
    /// shared memory).
    exited: bool,
    /// A peer reached this CTA's shared memory since it last passed a
    /// `barrier.cluster`: it may not exit before passing another.
    received_since_sync: bool,
    /// Per warpgroup (128 threads): its `wgmma` groups.
    warpgroups: Vec<sm90::Warpgroup>,
    /// Per register array: per register (`t * len + i`), the in-flight
    /// `wgmma`s that use it (write it, or read it as A fragments).
    reg_pending: Vec<Vec<u16>>,
    /// Per register array: whether a `wgmma` uses it
    /// ([`Kernel::wgmma_registers`]).
    wgmma_regs: Vec<bool>,
    stats: Stats,
}

type R<T> = Result<T, GpuError>;

impl<'k> Frame<'k> {
    fn new(
        k: &'k Kernel,
        scalars: &'k [i64],
        ids: &'k HashMap<*const Stmt, u32>,
        threads: usize,
        block_idx: [i64; 3],
        grid_dim: [i64; 3],
    ) -> Frame<'k> {
        let smem = k.smem_bytes as usize;
        Frame {
            k,
            scalars,
            ids,
            threads,
            block_idx,
            grid_dim,
            vars: vec![None; threads * k.vars.len()],
            regs: k.regs.iter().map(|r| vec![0u32; threads * r.len as usize]).collect(),
            smem: vec![0; if threads > 1 { smem } else { 0 }],
            state: vec![ByteState::default(); if threads > 1 { smem } else { 0 }],
            epoch: 1,
            open: (0..threads).map(|_| Vec::new()).collect(),
            committed: (0..threads).map(|_| VecDeque::new()).collect(),
            loop_vars: Vec::new(),
            mbars: HashMap::new(),
            arrived: vec![0; threads],
            acquired: HashMap::new(),
            order: RoleOrder::default(),
            rank: 0,
            outbox: Vec::new(),
            cluster_arrivals: 0,
            exited: false,
            received_since_sync: false,
            warpgroups: (0..threads.div_ceil(128)).map(|_| sm90::Warpgroup::default()).collect(),
            reg_pending: k.regs.iter().map(|r| vec![0u16; threads * r.len as usize]).collect(),
            wgmma_regs: k.wgmma_registers(),
            stats: Stats::default(),
        }
    }

    fn id(&self, s: &Stmt) -> Option<u32> {
        self.ids.get(&(s as *const Stmt)).copied()
    }

    fn err(&self, fault: Fault, s: Option<u32>, msg: String) -> GpuError {
        GpuError::new(
            fault,
            s,
            format!("block ({}, {}, {}): {msg}", self.block_idx[0], self.block_idx[1], self.block_idx[2]),
        )
    }

    fn thread_idx(&self, t: usize) -> [i64; 3] {
        let [bx, by, _] = self.k.block;
        let (bx, by) = (bx as usize, by as usize);
        [(t % bx) as i64, ((t / bx) % by) as i64, (t / (bx * by)) as i64]
    }

    /// `e` in thread `t` ([`Expr::eval`]); what C leaves undefined is a
    /// [`Fault::BadValue`] at `s`.
    fn eval(&self, e: &Expr, t: usize, s: Option<u32>) -> R<i64> {
        let bad = |m: String| self.err(Fault::BadValue, s, m);
        let mut leaf = |x: Leaf| {
            Ok(match x {
                Leaf::Param(p) => match self.k.params.get(p.0 as usize) {
                    Some(Param { kind: ParamKind::I32 | ParamKind::I64, .. }) => self.scalars[p.0 as usize],
                    _ => return Err(bad(format!("parameter {} is not a scalar", p.0))),
                },
                Leaf::Var(v) => {
                    let nv = self.k.vars.len();
                    match self.vars.get(t * nv + v.0 as usize).copied().flatten() {
                        Some(x) => x,
                        None => return Err(bad(format!("variable {} read before it is set", v.0))),
                    }
                }
                Leaf::ThreadIdx(d) => self.thread_idx(t)[d.index()],
                Leaf::BlockIdx(d) => self.block_idx[d.index()],
                Leaf::GridDim(d) => self.grid_dim[d.index()],
            })
        };
        e.eval(&mut leaf, &|u| bad(u.to_string()))
    }

    fn set_var(&mut self, v: VarId, t: usize, x: i64, s: Option<u32>) -> R<()> {
        let nv = self.k.vars.len();
        match self.vars.get_mut(t * nv + v.0 as usize) {
            Some(slot) => {
                *slot = Some(x);
                Ok(())
            }
            None => Err(self.err(Fault::BadId, s, format!("variable {} is not declared", v.0))),
        }
    }

    /// The flat index of register `r` of thread `t`.
    fn reg(&self, r: &RegRef, t: usize, s: Option<u32>) -> R<(usize, usize)> {
        let Some(arr) = self.k.regs.get(r.reg.0 as usize) else {
            return Err(self.err(Fault::BadId, s, format!("register array {} is not declared", r.reg.0)));
        };
        let i = self.eval(&r.index, t, s)?;
        if i < 0 || i >= arr.len as i64 {
            return Err(self.err(
                Fault::BadValue,
                s,
                format!("register {}[{i}] outside its {} registers", arr.name, arr.len),
            ));
        }
        Ok((r.reg.0 as usize, t * arr.len as usize + i as usize))
    }

    fn get_reg(&self, r: &RegRef, t: usize, s: Option<u32>) -> R<u32> {
        let (a, i) = self.reg(r, t, s)?;
        self.check_not_in_flight(a, i, t, s)?;
        Ok(self.regs[a][i])
    }

    /// Register `r` of the 32 lanes of warp `w`, in lane order (what a
    /// `shfl.sync` reads before any lane writes).
    fn warp_regs(&self, r: &RegRef, w: usize, s: Option<u32>) -> R<Vec<u32>> {
        (0..32).map(|l| self.get_reg(r, w * 32 + l, s)).collect()
    }

    fn set_reg(&mut self, r: &RegRef, t: usize, v: u32, s: Option<u32>) -> R<()> {
        let (a, i) = self.reg(r, t, s)?;
        self.check_not_in_flight(a, i, t, s)?;
        if self.wgmma_regs[a] {
            // Other instructions wrote a wgmma operand: the next wgmma
            // needs a wgmma.fence first.
            self.warpgroups[t / 128].fenced = false;
        }
        self.regs[a][i] = v;
        Ok(())
    }

    /// An `IncompleteRead` when register `i` of array `a` (thread `t`) is
    /// used (written, or read as A fragments) by a `wgmma` no
    /// `wgmma.wait_group` retired.
    fn check_not_in_flight(&self, a: usize, i: usize, t: usize, s: Option<u32>) -> R<()> {
        if self.reg_pending[a][i] == 0 {
            return Ok(());
        }
        let arr = &self.k.regs[a];
        Err(self.err(
            Fault::IncompleteRead,
            s,
            format!(
                "thread {t} accesses {}[{}] while a wgmma that uses it is in flight (no wgmma.wait_group retired it)",
                arr.name,
                i % arr.len as usize
            ),
        ))
    }

    /// The byte address in shared memory of `r` for thread `t`, checked to
    /// hold `bytes` bytes aligned to `align` inside its buffer.
    fn smem_addr(&self, r: &SmemRef, t: usize, bytes: u64, align: u64, s: Option<u32>) -> R<usize> {
        let Some(buf) = self.k.smem.get(r.buf.0 as usize) else {
            return Err(self.err(Fault::BadId, s, format!("shared buffer {} is not declared", r.buf.0)));
        };
        let off = self.eval(&r.offset, t, s)?;
        if off < 0 || (off as u64).saturating_add(bytes) > buf.size {
            return Err(self.err(
                Fault::OutOfBounds,
                s,
                format!(
                    "thread {t}: shared access of {bytes} bytes at offset {off} outside `{}` ({} bytes)",
                    buf.name, buf.size
                ),
            ));
        }
        let sw = r.swizzle.apply(off as u64);
        if sw.saturating_add(bytes) > buf.size {
            return Err(self.err(
                Fault::OutOfBounds,
                s,
                format!("thread {t}: swizzled offset {sw} (from {off}) outside `{}` ({} bytes)", buf.name, buf.size),
            ));
        }
        let addr = buf.offset + sw;
        if !addr.is_multiple_of(align) {
            return Err(self.err(
                Fault::Misaligned,
                s,
                format!("thread {t}: shared address {addr} not {align}-byte aligned"),
            ));
        }
        Ok(addr as usize)
    }

    /// Element offset and dtype of global `g` for thread `t`, and the byte
    /// range `[start, start + bytes)` checked inside the tensor (when
    /// `bytes > 0`) and `align`-aligned.
    fn global_addr(
        &self,
        g: &GlobalRef,
        t: usize,
        bytes: u64,
        align: u64,
        args: &[Arg],
        s: Option<u32>,
    ) -> R<(usize, DType)> {
        let p = g.param.0 as usize;
        let (Some(Param { kind: ParamKind::Ptr { dtype, .. }, name }), Some(Arg::Tensor(data))) =
            (self.k.params.get(p), args.get(p))
        else {
            return Err(self.err(Fault::BadId, s, format!("parameter {p} is not a pointer")));
        };
        let off = self.eval(&g.offset, t, s)?;
        let es = dtype.size_bytes() as i64;
        let start = off.wrapping_mul(es);
        if bytes > 0 && (off < 0 || start < 0 || (start as u64).saturating_add(bytes) > data.len() as u64) {
            return Err(self.err(
                Fault::OutOfBounds,
                s,
                format!(
                    "thread {t}: global access of {bytes} bytes at element {off} outside `{name}` ({} elements)",
                    data.len() as i64 / es
                ),
            ));
        }
        if start.rem_euclid(align as i64) != 0 {
            return Err(self.err(
                Fault::Misaligned,
                s,
                format!("thread {t}: global address `{name}`+{start} bytes not {align}-byte aligned"),
            ));
        }
        Ok((start as usize, *dtype))
    }

    fn read_smem(&mut self, addr: usize, len: usize, t: usize, s: Option<u32>) -> R<Vec<u8>> {
        for b in addr..addr + len {
            let st = self.state[b];
            if st.pending > 0 {
                return Err(self.err(
                    Fault::IncompleteRead,
                    s,
                    format!("thread {t} reads shared byte {b} while a cp.async that writes it is in flight (no wait_group completed its group)"),
                ));
            }
            if st.writer == 0 {
                return Err(self.err(
                    Fault::IncompleteRead,
                    s,
                    format!("thread {t} reads shared byte {b}, never written"),
                ));
            }
            if st.writer != t as u32 + 1 && st.w_epoch == self.epoch {
                return Err(self.err(
                    Fault::Race,
                    s,
                    format!(
                        "thread {t} reads shared byte {b} written by thread {} with no bar.sync between",
                        st.writer - 1
                    ),
                ));
            }
            self.state[b].reader = t as u32 + 1;
            self.state[b].r_epoch = self.epoch;
            self.state[b].r_arrived = self.arrived[t];
        }
        Ok(self.smem[addr..addr + len].to_vec())
    }

    /// Checks a write of `[addr, addr + len)` by `t` against readers of
    /// this epoch and `wgmma`s in flight.
    fn check_write(&self, addr: usize, len: usize, t: usize, s: Option<u32>) -> R<()> {
        for b in addr..addr + len {
            let st = self.state[b];
            if st.wgmma_readers > 0 {
                return Err(self.err(
                    Fault::Race,
                    s,
                    format!("thread {t} writes shared byte {b}, which a wgmma no wgmma.wait_group retired reads"),
                ));
            }
            let released = || {
                let arrival = self.acquired.get(&(t as u32, st.reader - 1)).copied().unwrap_or(0);
                arrival > st.r_arrived
            };
            if st.reader != 0 && st.reader != t as u32 + 1 && st.r_epoch == self.epoch && !released() {
                return Err(self.err(
                    Fault::Race,
                    s,
                    format!(
                        "thread {t} writes shared byte {b} read by thread {} with no bar.sync or mbarrier phase between",
                        st.reader - 1
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Writes `c` into shared memory as thread `t`'s; `in_flight` when it
    /// is a `cp.async` whose pending count it ends.
    fn land(&mut self, c: &Copy, t: usize, in_flight: bool) {
        for (i, &v) in c.data.iter().enumerate() {
            let b = c.dst + i;
            self.smem[b] = v;
            let st = &mut self.state[b];
            if in_flight {
                st.pending = st.pending.saturating_sub(1);
            }
            st.writer = t as u32 + 1;
            st.w_epoch = self.epoch;
            st.generic = true;
        }
    }

    fn active(mask: &[bool]) -> impl Iterator<Item = usize> + '_ {
        mask.iter().enumerate().filter(|(_, &m)| m).map(|(t, _)| t)
    }

    /// The warps with all lanes active; a partly active warp is an error.
    fn full_warps(&self, mask: &[bool], s: Option<u32>, what: &str) -> R<Vec<usize>> {
        let mut warps = Vec::new();
        for (w, lanes) in mask.chunks(32).enumerate() {
            let n = lanes.iter().filter(|&&m| m).count();
            if n == 32 {
                warps.push(w);
            } else if n > 0 {
                return Err(self.err(Fault::Divergence, s, format!("{what} with {n} of warp {w}'s 32 lanes active")));
            }
        }
        Ok(warps)
    }
}

#[cfg(test)]
mod tests;

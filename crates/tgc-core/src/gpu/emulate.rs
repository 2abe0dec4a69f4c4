//! The emulator of the GPU dialect IR: runs a [`Kernel`] on the CPU, every
//! CTA, warp and lane, with the semantics the CUDA C printer's output has on
//! the device, and reports what would be undefined there as an error naming
//! the statement.
//!
//! Model:
//!
//! - CTAs run one after another in `blockIdx` order (x fastest). Inside a
//!   CTA all threads run in lockstep, statement by statement, under an
//!   active mask: `If` narrows the mask, `For` keeps the threads whose
//!   condition holds. A `Barrier` with some but not all threads active is a
//!   `Divergence` error, as is an `ldmatrix`/`mma.sync` with a partly
//!   active warp (both are `.aligned`, PTX ISA).
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
//! - Atomics: `red.add.f32` and `AtomicArrive` act at once (CTAs run one
//!   at a time, so every order of their effects is this one).
//! - Semaphores (split-K): a `SemaphoreWait` whose lock does not yet hold
//!   its value would spin forever in this order (every CTA it could wait
//!   for has a smaller `blockIdx` in the orders the template uses) and is
//!   a `Deadlock`.
//! - Every global and shared access is checked against its tensor or
//!   buffer (`OutOfBounds`) and its alignment (`Misaligned`; tensors are
//!   taken as 256-byte aligned, as `cudaMalloc` gives).

use std::collections::{HashMap, VecDeque};

use half::{bf16, f16};

use super::ir::*;
use crate::DType;

/// A launch argument, one per kernel parameter in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    /// A tensor's bytes (little-endian elements of the parameter's dtype).
    Tensor(Vec<u8>),
    /// A scalar parameter's value.
    Int(i64),
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
            Arg::Int(_) => Vec::new(),
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
    launch(kernel, args).map(|(stats, _)| stats)
}

/// [`run`], also returning the register arrays of the last CTA run (per
/// [`RegId`], `len` registers per thread, thread-major; `f32` registers as
/// their bits): what a fragment holds, for tests and debugging.
pub fn run_keeping_registers(kernel: &Kernel, args: &mut [Arg]) -> Result<(Stats, Vec<Vec<u32>>), GpuError> {
    launch(kernel, args)
}

fn launch(kernel: &Kernel, args: &mut [Arg]) -> Result<(Stats, Vec<Vec<u32>>), GpuError> {
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
            _ => return Err(bad(format!("argument {i} does not fit parameter `{}` ({:?})", p.name, p.kind))),
        }
    }
    let threads = kernel.threads();
    if threads == 0 || !threads.is_multiple_of(32) || threads > 1024 {
        return Err(bad(format!("{threads} threads per block: not a positive multiple of 32 up to 1024")));
    }
    let smem_max = crate::plan::target::TARGETS.iter().map(|t| t.smem_per_block_max).max().unwrap_or(0);
    if kernel.smem_bytes > smem_max {
        return Err(bad(format!("{} bytes of shared memory exceed any target's {smem_max}", kernel.smem_bytes)));
    }
    if let Some(b) = kernel.smem.iter().find(|b| b.offset.saturating_add(b.size) > kernel.smem_bytes) {
        return Err(bad(format!(
            "shared buffer `{}` ends past the {} bytes of shared memory",
            b.name, kernel.smem_bytes
        )));
    }
    let mut ids = HashMap::new();
    index(&kernel.body, &mut 0, &mut ids);
    let mut grid = [0i64; 3];
    {
        let no_vars = Frame::new(kernel, &scalars, &ids, 1, [0; 3]);
        for (d, (g, e)) in grid.iter_mut().zip(&kernel.grid).enumerate() {
            *g = no_vars.eval(e, 0, None)?;
            if *g < 0 {
                return Err(bad(format!("grid dimension {d} is {g}")));
            }
        }
    }
    let mut stats = Stats::default();
    let mut regs = Vec::new();
    for z in 0..grid[2] {
        for y in 0..grid[1] {
            for x in 0..grid[0] {
                let mut f = Frame::new(kernel, &scalars, &ids, threads as usize, [x, y, z]);
                let mask = vec![true; threads as usize];
                f.exec(&kernel.body, &mask, args)?;
                stats.ctas += 1;
                stats.cp_async_bytes += f.stats.cp_async_bytes;
                stats.ldmatrix += f.stats.ldmatrix;
                stats.mma += f.stats.mma;
                stats.barriers += f.stats.barriers;
                stats.ldmatrix_bank_conflicts += f.stats.ldmatrix_bank_conflicts;
                regs = f.regs;
            }
        }
    }
    Ok((stats, regs))
}

fn index(body: &[Stmt], next: &mut u32, ids: &mut HashMap<*const Stmt, u32>) {
    for s in body {
        ids.insert(s as *const Stmt, *next);
        *next += 1;
        match s {
            Stmt::For { body, .. } => index(body, next, ids),
            Stmt::If { then, otherwise, .. } => {
                index(then, next, ids);
                index(otherwise, next, ids);
            }
            _ => {}
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
}

/// One `cp.async` in flight: where it lands and what it carries.
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
    ) -> Frame<'k> {
        let smem = k.smem_bytes as usize;
        Frame {
            k,
            scalars,
            ids,
            threads,
            block_idx,
            vars: vec![None; threads * k.vars.len()],
            regs: k.regs.iter().map(|r| vec![0u32; threads * r.len as usize]).collect(),
            smem: vec![0; if threads > 1 { smem } else { 0 }],
            state: vec![ByteState::default(); if threads > 1 { smem } else { 0 }],
            epoch: 1,
            open: (0..threads).map(|_| Vec::new()).collect(),
            committed: (0..threads).map(|_| VecDeque::new()).collect(),
            loop_vars: Vec::new(),
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

    fn eval(&self, e: &Expr, t: usize, s: Option<u32>) -> R<i64> {
        let bad = |m: String| self.err(Fault::BadValue, s, m);
        Ok(match e {
            Expr::Const(v) => *v,
            Expr::Param(p) => match self.k.params.get(p.0 as usize) {
                Some(Param { kind: ParamKind::I32 | ParamKind::I64, .. }) => self.scalars[p.0 as usize],
                _ => return Err(bad(format!("parameter {} is not a scalar", p.0))),
            },
            Expr::Var(v) => {
                let nv = self.k.vars.len();
                match self.vars.get(t * nv + v.0 as usize).copied().flatten() {
                    Some(x) => x,
                    None => return Err(bad(format!("variable {} read before it is set", v.0))),
                }
            }
            Expr::ThreadIdx(d) => self.thread_idx(t)[d.index()],
            Expr::BlockIdx(d) => self.block_idx[d.index()],
            Expr::Select(c, a, b) => {
                if self.eval(c, t, s)? != 0 {
                    self.eval(a, t, s)?
                } else {
                    self.eval(b, t, s)?
                }
            }
            Expr::Bin(op, a, b) => {
                let x = self.eval(a, t, s)?;
                let y = self.eval(b, t, s)?;
                match op {
                    BinOp::Add => x.wrapping_add(y),
                    BinOp::Sub => x.wrapping_sub(y),
                    BinOp::Mul => x.wrapping_mul(y),
                    BinOp::Div | BinOp::Rem if y == 0 => return Err(bad("division by zero".into())),
                    BinOp::Div => x.wrapping_div(y),
                    BinOp::Rem => x.wrapping_rem(y),
                    BinOp::Min => x.min(y),
                    BinOp::Max => x.max(y),
                    BinOp::And => x & y,
                    BinOp::Or => x | y,
                    BinOp::Xor => x ^ y,
                    BinOp::Shl => x.wrapping_shl(y as u32),
                    BinOp::Shr => x.wrapping_shr(y as u32),
                    BinOp::Lt => (x < y) as i64,
                    BinOp::Le => (x <= y) as i64,
                    BinOp::Eq => (x == y) as i64,
                    BinOp::Ne => (x != y) as i64,
                    BinOp::LAnd => (x != 0 && y != 0) as i64,
                    BinOp::LOr => (x != 0 || y != 0) as i64,
                }
            }
        })
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
        Ok(self.regs[a][i])
    }

    fn set_reg(&mut self, r: &RegRef, t: usize, v: u32, s: Option<u32>) -> R<()> {
        let (a, i) = self.reg(r, t, s)?;
        self.regs[a][i] = v;
        Ok(())
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
        }
        Ok(self.smem[addr..addr + len].to_vec())
    }

    /// Checks a write of `[addr, addr + len)` by `t` against readers of this epoch.
    fn check_write(&self, addr: usize, len: usize, t: usize, s: Option<u32>) -> R<()> {
        for b in addr..addr + len {
            let st = self.state[b];
            if st.reader != 0 && st.reader != t as u32 + 1 && st.r_epoch == self.epoch {
                return Err(self.err(
                    Fault::Race,
                    s,
                    format!(
                        "thread {t} writes shared byte {b} read by thread {} with no bar.sync between",
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
        }
    }

    fn exec(&mut self, body: &'k [Stmt], mask: &[bool], args: &mut [Arg]) -> R<()> {
        if !mask.iter().any(|&m| m) {
            return Ok(());
        }
        for s in body {
            self.stmt(s, mask, args)?;
        }
        Ok(())
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

    fn stmt(&mut self, st: &'k Stmt, mask: &[bool], args: &mut [Arg]) -> R<()> {
        let s = self.id(st);
        if st.min_arch() > self.k.arch {
            return Err(self.err(Fault::Arch, s, format!("{} needs {}", st.head(), st.min_arch().name())));
        }
        match st {
            Stmt::Let { var, value } => {
                if self.loop_vars.contains(var) {
                    let msg = format!("assigns the loop variable `{}`", self.k.vars[var.0 as usize]);
                    return Err(self.err(Fault::BadId, s, msg));
                }
                for t in Self::active(mask) {
                    let x = self.eval(value, t, s)?;
                    self.set_var(*var, t, x, s)?;
                }
            }
            Stmt::For { var, start, end, step, body, .. } => {
                if *step <= 0 {
                    return Err(self.err(Fault::BadValue, s, format!("loop step {step} is not positive")));
                }
                for t in Self::active(mask) {
                    let x = self.eval(start, t, s)?;
                    self.set_var(*var, t, x, s)?;
                }
                if self.loop_vars.contains(var) {
                    let msg = format!("reuses the enclosing loop's variable `{}`", self.k.vars[var.0 as usize]);
                    return Err(self.err(Fault::BadId, s, msg));
                }
                self.loop_vars.push(*var);
                let mut live = mask.to_vec();
                loop {
                    for (t, l) in live.iter_mut().enumerate() {
                        if *l {
                            let i = self.eval(&Expr::Var(*var), t, s)?;
                            *l = i < self.eval(end, t, s)?;
                        }
                    }
                    if !live.iter().any(|&m| m) {
                        break;
                    }
                    self.exec(body, &live, args)?;
                    for t in Self::active(&live).collect::<Vec<_>>() {
                        let i = self.eval(&Expr::Var(*var), t, s)?;
                        self.set_var(*var, t, i.saturating_add(*step), s)?;
                    }
                }
                self.loop_vars.pop();
            }
            Stmt::If { cond, then, otherwise } => {
                let mut yes = vec![false; self.threads];
                let mut no = vec![false; self.threads];
                for t in Self::active(mask) {
                    if self.eval(cond, t, s)? != 0 {
                        yes[t] = true;
                    } else {
                        no[t] = true;
                    }
                }
                self.exec(then, &yes, args)?;
                self.exec(otherwise, &no, args)?;
            }
            Stmt::Barrier => {
                let n = mask.iter().filter(|&&m| m).count();
                if n != self.threads {
                    return Err(self.err(
                        Fault::Divergence,
                        s,
                        format!("bar.sync reached by {n} of {} threads", self.threads),
                    ));
                }
                self.epoch += 1;
                self.stats.barriers += 1;
            }
            Stmt::CpAsync { dst, src, bytes, src_bytes } | Stmt::CopySync { dst, src, bytes, src_bytes } => {
                let is_async = matches!(st, Stmt::CpAsync { .. });
                let sizes: &[u32] = if is_async { &[4, 8, 16] } else { &[2, 4, 8, 16] };
                if !sizes.contains(bytes) {
                    return Err(self.err(
                        Fault::BadValue,
                        s,
                        format!("{} of {bytes} bytes; sizes are {sizes:?}", st.head()),
                    ));
                }
                let n = *bytes as u64;
                for t in Self::active(mask) {
                    let sb = self.eval(src_bytes, t, s)?;
                    if sb < 0 || sb as u64 > n {
                        return Err(self.err(
                            Fault::BadValue,
                            s,
                            format!("thread {t}: src_bytes {sb} outside 0..={n}"),
                        ));
                    }
                    let (g, _) = self.global_addr(src, t, sb as u64, n, args, s)?;
                    let d = self.smem_addr(dst, t, n, n, s)?;
                    let mut data = vec![0u8; n as usize];
                    if sb > 0 {
                        if let Some(Arg::Tensor(b)) = args.get(src.param.0 as usize) {
                            data[..sb as usize].copy_from_slice(&b[g..g + sb as usize]);
                        }
                    }
                    self.check_write(d, n as usize, t, s)?;
                    let c = Copy { dst: d, data };
                    if is_async {
                        for b in d..d + n as usize {
                            self.state[b].pending += 1;
                        }
                        self.stats.cp_async_bytes += n;
                        self.open[t].push(c);
                    } else {
                        self.land(&c, t, false);
                    }
                }
            }
            Stmt::CommitGroup => {
                for t in Self::active(mask) {
                    let g = std::mem::take(&mut self.open[t]);
                    self.committed[t].push_back(g);
                }
            }
            Stmt::WaitGroup { pending } => {
                for t in Self::active(mask) {
                    while self.committed[t].len() > *pending as usize {
                        if let Some(g) = self.committed[t].pop_front() {
                            for c in &g {
                                self.land(c, t, true);
                            }
                        }
                    }
                }
            }
            Stmt::LdMatrix { num, trans, dst, src } => {
                if dst.len() != num.count() {
                    return Err(self.err(
                        Fault::FragmentShape,
                        s,
                        format!("{} with {} registers", st.head(), dst.len()),
                    ));
                }
                for w in self.full_warps(mask, s, &st.head())? {
                    self.stats.ldmatrix += 1;
                    for (i, reg) in dst.iter().enumerate() {
                        // rows[r][c]: matrix i, 8 rows of 8 16-bit elements.
                        let mut rows = [[0u16; 8]; 8];
                        let mut groups = [0u64; 8];
                        for (r, row) in rows.iter_mut().enumerate() {
                            let t = w * 32 + i * 8 + r;
                            let a = self.smem_addr(src, t, 16, 16, s)?;
                            groups[a / 16 % 8] += 1;
                            let bytes = self.read_smem(a, 16, t, s)?;
                            for (c, e) in row.iter_mut().enumerate() {
                                *e = u16::from_le_bytes([bytes[2 * c], bytes[2 * c + 1]]);
                            }
                        }
                        self.stats.ldmatrix_bank_conflicts += groups.iter().max().map_or(0, |m| m - 1);
                        for l in 0..32 {
                            let (lo, hi) = if *trans {
                                (rows[2 * (l % 4)][l / 4], rows[2 * (l % 4) + 1][l / 4])
                            } else {
                                (rows[l / 4][2 * (l % 4)], rows[l / 4][2 * (l % 4) + 1])
                            };
                            self.set_reg(reg, w * 32 + l, lo as u32 | (hi as u32) << 16, s)?;
                        }
                    }
                }
            }
            Stmt::MmaSync { ab, d, a, b, c } => {
                if d.len() != 4 || a.len() != 4 || b.len() != 2 || c.len() != 4 {
                    return Err(self.err(
                        Fault::FragmentShape,
                        s,
                        "mma.m16n8k16 takes 4 D, 4 A, 2 B and 4 C registers".into(),
                    ));
                }
                if !matches!(ab, DType::F16 | DType::BF16) {
                    return Err(self.err(Fault::BadValue, s, format!("mma.m16n8k16 on {}", ab.dsl_name())));
                }
                for w in self.full_warps(mask, s, "mma.sync")? {
                    self.stats.mma += 1;
                    let mut ma = [[0f32; 16]; 16];
                    let mut mb = [[0f32; 8]; 16];
                    let mut mc = [[0f32; 8]; 16];
                    for l in 0..32 {
                        let t = w * 32 + l;
                        let (g, q) = (l / 4, l % 4);
                        for (j, r) in a.iter().enumerate() {
                            let v = self.get_reg(r, t, s)?;
                            let (row, col) = (g + 8 * (j % 2), 2 * q + 8 * (j / 2));
                            ma[row][col] = b16_to_f32(*ab, v as u16);
                            ma[row][col + 1] = b16_to_f32(*ab, (v >> 16) as u16);
                        }
                        for (j, r) in b.iter().enumerate() {
                            let v = self.get_reg(r, t, s)?;
                            let k = 2 * q + 8 * j;
                            mb[k][g] = b16_to_f32(*ab, v as u16);
                            mb[k + 1][g] = b16_to_f32(*ab, (v >> 16) as u16);
                        }
                        for (j, r) in c.iter().enumerate() {
                            mc[g + 8 * (j / 2)][2 * q + j % 2] = f32::from_bits(self.get_reg(r, t, s)?);
                        }
                    }
                    for l in 0..32 {
                        let t = w * 32 + l;
                        let (g, q) = (l / 4, l % 4);
                        for (j, r) in d.iter().enumerate() {
                            let (row, col) = (g + 8 * (j / 2), 2 * q + j % 2);
                            let mut acc = mc[row][col];
                            for (k, arow) in ma[row].iter().enumerate() {
                                acc += arow * mb[k][col];
                            }
                            self.set_reg(r, t, acc.to_bits(), s)?;
                        }
                    }
                }
            }
            Stmt::MovF32 { dst, value } => {
                for t in Self::active(mask) {
                    self.set_reg(dst, t, value.to_bits(), s)?;
                }
            }
            Stmt::Epilogue { acc, row, col, pred, ops } => {
                for t in Self::active(mask) {
                    if self.eval(pred, t, s)? == 0 {
                        continue;
                    }
                    let mut v = f32::from_bits(self.get_reg(acc, t, s)?);
                    let (r, c) = (self.eval(row, t, s)?, self.eval(col, t, s)?);
                    for op in ops {
                        v = match op {
                            EpilogueOp::Bias(p) => v + self.load_elem(*p, Expr::Const(c), t, args, s)?,
                            EpilogueOp::Residual { param, ld } => {
                                let ld = self.eval(ld, t, s)?;
                                v + self.load_elem(*param, Expr::Const(r * ld + c), t, args, s)?
                            }
                            EpilogueOp::Relu => v.max(0.0),
                            EpilogueOp::Silu => v / (1.0 + (-v).exp()),
                            EpilogueOp::Gelu => {
                                let x = v as f64;
                                (0.5 * x
                                    * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh()))
                                    as f32
                            }
                            EpilogueOp::Cast(d) => round_to(*d, v),
                        };
                    }
                    self.set_reg(acc, t, v.to_bits(), s)?;
                }
            }
            Stmt::StGlobalVec { dst, src, dtype, pred } => {
                let n = vector_bytes(src.len(), *dtype).ok_or_else(|| self.bad_vector(s, src.len(), *dtype))?;
                for t in Self::active(mask) {
                    if self.eval(pred, t, s)? == 0 {
                        continue;
                    }
                    let (g, pd) = self.global_addr(dst, t, n, n, args, s)?;
                    if pd != *dtype {
                        return Err(self.err(
                            Fault::BadValue,
                            s,
                            format!("stores {} into a {} tensor", dtype.dsl_name(), pd.dsl_name()),
                        ));
                    }
                    let mut bytes = Vec::with_capacity(n as usize);
                    for r in src {
                        let v = f32::from_bits(self.get_reg(r, t, s)?);
                        store_bytes(*dtype, v, &mut bytes).ok_or_else(|| self.bad_vector(s, src.len(), *dtype))?;
                    }
                    if let Some(Arg::Tensor(b)) = args.get_mut(dst.param.0 as usize) {
                        b[g..g + n as usize].copy_from_slice(&bytes);
                    }
                }
            }
            Stmt::StShared { dst, src, dtype } => {
                let n = vector_bytes(src.len(), *dtype).ok_or_else(|| self.bad_vector(s, src.len(), *dtype))?;
                for t in Self::active(mask) {
                    let a = self.smem_addr(dst, t, n, n, s)?;
                    let mut bytes = Vec::with_capacity(n as usize);
                    for r in src {
                        let v = f32::from_bits(self.get_reg(r, t, s)?);
                        store_bytes(*dtype, v, &mut bytes).ok_or_else(|| self.bad_vector(s, src.len(), *dtype))?;
                    }
                    self.check_write(a, n as usize, t, s)?;
                    self.land(&Copy { dst: a, data: bytes }, t, false);
                }
            }
            Stmt::LdShared { dst, src, dtype } => {
                let n = vector_bytes(dst.len(), *dtype).ok_or_else(|| self.bad_vector(s, dst.len(), *dtype))?;
                let es = dtype.size_bytes();
                for t in Self::active(mask) {
                    let a = self.smem_addr(src, t, n, n, s)?;
                    let bytes = self.read_smem(a, n as usize, t, s)?;
                    for (r, c) in dst.iter().zip(bytes.chunks_exact(es)) {
                        self.set_reg(r, t, (load(*dtype, c) as f32).to_bits(), s)?;
                    }
                }
            }
            Stmt::SemaphoreWait { lock, value } => {
                for t in Self::active(mask) {
                    let want = self.eval(value, t, s)?;
                    let have = self.lock(lock, t, args, s)?.1;
                    if have != want {
                        return Err(self.err(
                            Fault::Deadlock,
                            s,
                            format!("thread {t} waits for the lock to read {want}; it reads {have} after every earlier CTA ran"),
                        ));
                    }
                }
            }
            Stmt::SemaphoreRelease { lock, value } => {
                for t in Self::active(mask) {
                    let v = self.eval(value, t, s)?;
                    let v = i32::try_from(v).map_err(|_| self.err(Fault::BadValue, s, format!("lock value {v}")))?;
                    let (at, _) = self.lock(lock, t, args, s)?;
                    if let Some(Arg::Tensor(b)) = args.get_mut(lock.param.0 as usize) {
                        b[at..at + 4].copy_from_slice(&v.to_le_bytes());
                    }
                }
            }
            Stmt::RedAddF32 { dst, src, pred } => {
                for t in Self::active(mask) {
                    if self.eval(pred, t, s)? == 0 {
                        continue;
                    }
                    let (at, dtype) = self.global_addr(dst, t, 4, 4, args, s)?;
                    if dtype != DType::F32 {
                        return Err(self.err(
                            Fault::BadValue,
                            s,
                            format!("red.add.f32 into a {} tensor", dtype.dsl_name()),
                        ));
                    }
                    let v = f32::from_bits(self.get_reg(src, t, s)?);
                    if let Some(Arg::Tensor(b)) = args.get_mut(dst.param.0 as usize) {
                        let old = f32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
                        b[at..at + 4].copy_from_slice(&(old + v).to_le_bytes());
                    }
                }
            }
            Stmt::AtomicArrive { var, counter } => {
                let n = mask.iter().filter(|&&m| m).count();
                if n != self.threads {
                    return Err(self.err(
                        Fault::Divergence,
                        s,
                        format!("atomic.arrive reached by {n} of {} threads", self.threads),
                    ));
                }
                let (at, old) = self.lock(counter, 0, args, s)?;
                let new = i32::try_from(old + 1)
                    .map_err(|_| self.err(Fault::BadValue, s, format!("counter {old} overflows")))?;
                if let Some(Arg::Tensor(b)) = args.get_mut(counter.param.0 as usize) {
                    b[at..at + 4].copy_from_slice(&new.to_le_bytes());
                }
                for t in 0..self.threads {
                    self.set_var(*var, t, old, s)?;
                }
                // Its two barriers.
                self.epoch += 2;
                self.stats.barriers += 2;
            }
            Stmt::GridDepControlWait => {}
        }
        Ok(())
    }

    /// The byte offset and value of the `i32` lock at `g`.
    fn lock(&self, g: &GlobalRef, t: usize, args: &[Arg], s: Option<u32>) -> R<(usize, i64)> {
        let (at, dtype) = self.global_addr(g, t, 4, 4, args, s)?;
        if dtype != DType::I32 {
            return Err(self.err(Fault::BadValue, s, format!("a lock in a {} tensor", dtype.dsl_name())));
        }
        match args.get(g.param.0 as usize) {
            Some(Arg::Tensor(b)) => Ok((at, i32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) as i64)),
            _ => Err(self.err(Fault::BadId, s, format!("parameter {} has no tensor", g.param.0))),
        }
    }

    fn bad_vector(&self, s: Option<u32>, len: usize, dtype: DType) -> GpuError {
        self.err(
            Fault::BadValue,
            s,
            format!("a vector of {len} {} elements (1, 2, 4, 8 or 16 bytes of f16/bf16/f32)", dtype.dsl_name()),
        )
    }

    fn load_elem(&self, p: ParamId, offset: Expr, t: usize, args: &[Arg], s: Option<u32>) -> R<f32> {
        let g = GlobalRef { param: p, offset };
        let es = match self.k.params.get(p.0 as usize) {
            Some(Param { kind: ParamKind::Ptr { dtype, .. }, .. }) => dtype.size_bytes() as u64,
            _ => return Err(self.err(Fault::BadId, s, format!("parameter {} is not a pointer", p.0))),
        };
        let (at, dtype) = self.global_addr(&g, t, es, es, args, s)?;
        match args.get(p.0 as usize) {
            Some(Arg::Tensor(b)) => Ok(load(dtype, &b[at..at + es as usize]) as f32),
            _ => Err(self.err(Fault::BadId, s, format!("parameter {} has no tensor", p.0))),
        }
    }
}

//! The verifier of the GPU dialect IR: checks the invariants of
//! [`super::ir`]'s module doc statically and reports every violation with
//! the statement's pre-order id (`sN` in the text dump):
//!
//! - Ids (invariant 1): parameters, variables, register arrays and shared
//!   buffers exist; a variable is defined once and used inside the scope of
//!   its `Let` (the rest of the enclosing body) or `For` (its body); the
//!   grid uses scalar parameters and constants only; a [`GlobalRef`] and an
//!   epilogue operand name a pointer parameter, an expression's `Param` a
//!   scalar one (`BadId`).
//! - Architecture (invariant 2): each statement's [`Stmt::min_arch`] is at
//!   most the kernel's `arch` (`Arch`).
//! - Divergence (invariant 3): a statement is under divergent control when
//!   an enclosing `If` condition or `For` bound depends on the thread
//!   (`threadIdx`, or a variable whose value does, transitively).
//!   `Barrier`, `LdMatrix` and `MmaSync` must not be (conservatively also for
//!   collectives: a warp-uniform condition counts as divergent) (`Divergence`).
//! - Fragments (invariant 4): register counts and kinds of `LdMatrix` and
//!   `MmaSync`; `MmaSync` operands f16 or bf16; every register index is a
//!   constant once the enclosing unrolled loops (constant bounds) are
//!   unrolled, and lies inside its array over all their iterations
//!   (`FragmentShape`).
//! - SIMT statements: `Compute`/`Accumulate`/`StGlobal`/`LdGlobalVec`
//!   registers have their value's compute kind ([`compute_kind`]);
//!   `ShflBfly`, `ShflUpScan` and `ShflIdx` (full member mask) are not
//!   under an `If` or `For` whose condition or bounds may differ between
//!   the lanes of one warp (a finer rule than the CTA-wide one: with
//!   `block.x` a multiple of 32, `threadIdx.y` is the same in a whole
//!   warp) (`Divergence`).
//! - Swizzle (invariant 5): every [`SmemRef`] carries its buffer's swizzle
//!   (`Swizzle`).
//! - Completion (invariant 6), the static part: along every path, an
//!   `LdMatrix` of a buffer that `cp.async` writes is preceded by a
//!   `WaitGroup` and then a `Barrier`, counted from the kernel's start and
//!   afresh at the head of every loop whose body both issues `cp.async`
//!   into that buffer and reads it (each iteration reads new data)
//!   (`IncompleteRead`). Whether
//!   the `WaitGroup`'s count completes exactly the group that wrote the
//!   stage read is the emulator's check (per byte, [`crate::gpu::emulate`]).
//! - SM90 (invariant 7): `Wgmma` and the `wgmma` fence, commit and wait
//!   are collectives (`Divergence` under thread-dependent control); a
//!   `Wgmma` of a buffer TMA writes needs an `MbarrierWait` on every path
//!   since the data may have changed (`IncompleteRead`); a register of an
//!   array a `wgmma` uses (its accumulators, its A fragments) touched by
//!   another statement where a `Wgmma` using that array may still be in
//!   flight on some path (not retired by a `WgmmaWait`: `wait_group N`
//!   retires all but the newest `N` committed groups) is
//!   `IncompleteRead`, and a `Wgmma` with no `WgmmaFence` after
//!   such an access on some path is a `Race`; a TMA box's map swizzle,
//!   its destination's and the buffer's agree, and a descriptor's is a
//!   mode `wgmma` has (`Swizzle`); the tensor-map parameter exists.
//! - Warp specialisation (invariant 8): a `WarpSpecialize` is not nested
//!   or under thread-dependent control, its roles are whole warpgroups of
//!   a one-dimensional block, and the `setmaxnreg` budgets its roles end
//!   with fit the target's `regs_per_sm` (`BadValue`); each role is checked
//!   as a body of its own threads (the split is uniform per warpgroup, so
//!   the role's collectives are not divergent), where a `bar.sync 0` is a
//!   `Divergence` (it would wait for the other role) and a named barrier
//!   must count the role's threads; a loop of one role that waits on an
//!   mbarrier reads, in each iteration, new data in the buffers the other
//!   role copies into (invariant 6's loop rule); `setmaxnreg` counts are
//!   multiples of 8 in 24..=256.
//! - Clusters (invariant 9): a kernel of more than one CTA per cluster is
//!   for sm90 with a one-dimensional cluster of at most 8 CTAs
//!   (the portable size, CUDA C++ Programming Guide "Thread Block
//!   Clusters"); a multicast `TmaLoad`'s mask names CTAs of the cluster
//!   and a remote `MbarrierArrive` needs a cluster (`BadValue`); a
//!   `ClusterSync` is a collective of the whole CTA, so not inside a
//!   role either (`Divergence`); a kernel whose CTAs reach a peer's shared
//!   memory (multicast or remote arrivals) has a `ClusterSync` after
//!   its last `MbarrierInit` before any other statement of the body's top
//!   level, and ends with one, so no CTA exits while a peer may still
//!   write its shared memory (PTX ISA "Distributed Shared Memory")
//!   (`Race`).

use std::collections::{BTreeSet, HashSet};

use super::ir::*;
use super::kernel::*;
use super::stmt::*;

/// Every violation in `k`, in pre-order of the statements; `Ok` when none.
pub fn verify(k: &Kernel) -> Result<(), Vec<GpuError>> {
    let mut v = Verifier {
        k,
        errs: Vec::new(),
        next: 0,
        defined: HashSet::new(),
        thread_vars: Vec::new(),
        lane_vars: Vec::new(),
        lane_divergent: 0,
        unrolled: Vec::new(),
        wgmma_registers: k.wgmma_registers(),
        tma_written: BTreeSet::new(),
        wgmma_in_flight: InFlight::default(),
        fenced: false,
        role: None,
        concurrent: BTreeSet::new(),
    };
    k.walk(&mut |_, s| {
        if let Stmt::Sm90(Sm90Stmt::TmaLoad { dst, .. }) = s {
            v.tma_written.insert(dst.buf.0);
        }
    });
    for (d, e) in k.grid.iter().enumerate() {
        e.visit(&mut |x| {
            if matches!(x, Expr::Var(_) | Expr::ThreadIdx(_) | Expr::BlockIdx(_) | Expr::GridDim(_)) {
                v.errs.push(GpuError::new(Fault::BadId, None, format!("grid dimension {d} uses more than parameters")));
            }
        });
        v.expr(e, &[], None);
    }
    for b in &k.smem {
        if b.offset + b.size > k.smem_bytes {
            v.errs.push(GpuError::new(
                Fault::OutOfBounds,
                None,
                format!("shared buffer `{}` ends at {} past the {} bytes", b.name, b.offset + b.size, k.smem_bytes),
            ));
        }
    }
    v.cluster();
    let mut sync = Sync::entry(k);
    v.body(&k.body, &mut Vec::new(), false, &mut sync);
    if v.errs.is_empty() {
        Ok(())
    } else {
        Err(v.errs)
    }
}

/// The register arrays of `wgmma`s that may be in flight: those of the
/// open (uncommitted) group and of each committed group, oldest first. A
/// `wgmma.wait_group N` retires all but the newest `N` committed groups
/// (PTX ISA "wgmma.wait_group"); where paths meet, the groups are joined
/// newest with newest.
#[derive(Clone, Debug, Default)]
struct InFlight {
    open: BTreeSet<u32>,
    groups: Vec<BTreeSet<u32>>,
}

impl InFlight {
    fn commit(&mut self) {
        let group = std::mem::take(&mut self.open);
        self.groups.push(group);
    }

    fn wait(&mut self, pending: usize) {
        let retired = self.groups.len().saturating_sub(pending);
        self.groups.drain(..retired);
    }

    /// Whether a `wgmma` may still use register array `reg`.
    fn uses(&self, reg: u32) -> bool {
        self.open.contains(&reg) || self.groups.iter().any(|g| g.contains(&reg))
    }

    /// Both paths' groups (either may have been taken).
    fn join(&mut self, other: &InFlight) {
        self.open.extend(other.open.iter().copied());
        if other.groups.len() > self.groups.len() {
            let extra = other.groups.len() - self.groups.len();
            self.groups.splice(0..0, other.groups[..extra].iter().cloned());
        }
        let offset = self.groups.len() - other.groups.len();
        for (mine, theirs) in self.groups[offset..].iter_mut().zip(&other.groups) {
            mine.extend(theirs.iter().copied());
        }
    }
}

struct Verifier<'k> {
    k: &'k Kernel,
    errs: Vec<GpuError>,
    next: u32,
    defined: HashSet<VarId>,
    /// Variables whose value may differ between threads.
    thread_vars: Vec<VarId>,
    /// Variables whose value may differ between the lanes of one warp.
    lane_vars: Vec<VarId>,
    /// How many enclosing `If`/`For`s have a condition or bound that may
    /// differ between the lanes of one warp.
    lane_divergent: u32,
    /// The enclosing unrolled loops with constant bounds: variable, start, end, step.
    unrolled: Vec<(VarId, i64, i64, i64)>,
    /// Per register array: whether a `wgmma` uses it (its accumulators or
    /// A fragments, [`Kernel::wgmma_registers`]).
    wgmma_registers: Vec<bool>,
    /// The shared buffers TMA copies write.
    tma_written: BTreeSet<u32>,
    /// The register arrays `wgmma`s may still be using here, on some path.
    wgmma_in_flight: InFlight,
    /// On every path to here a `wgmma.fence` follows the last access of an
    /// accumulator by another instruction.
    fenced: bool,
    /// Inside a role of a `WarpSpecialize`: the role's threads.
    role: Option<u32>,
    /// The shared buffers the other role writes (by copies) while this one
    /// runs: a loop here that waits on an mbarrier may read new data in
    /// each iteration.
    concurrent: BTreeSet<u32>,
}

/// `e` with the variables of `env`, when it reads nothing else and its
/// value is defined ([`Expr::eval`]).
fn eval_const(e: &Expr, env: &[(VarId, i64)]) -> Option<i64> {
    let mut leaf = |x: Leaf| match x {
        Leaf::Var(v) => env.iter().find(|p| p.0 == v).map(|p| p.1).ok_or(()),
        Leaf::Param(_) | Leaf::ThreadIdx(_) | Leaf::BlockIdx(_) | Leaf::GridDim(_) => Err(()),
    };
    e.eval(&mut leaf, &|_| ()).ok()
}

/// Per shared buffer, how far the last `cp.async` into it is synchronised
/// on the current path (invariant 6): ordered, the meet of two paths is the min.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Sync {
    /// No `WaitGroup` yet since the data may have changed.
    Unsynced,
    /// A `WaitGroup`, no `Barrier` after it yet.
    Waited,
    /// `WaitGroup` then `Barrier`.
    Synced,
}

impl Sync {
    fn entry(k: &Kernel) -> Vec<Sync> {
        vec![Sync::Unsynced; k.smem.len()]
    }
}

/// The buffers `cp.async` or TMA writes (`reads` false) or `ldmatrix` or
/// `wgmma` reads (`reads` true) anywhere in `body`.
fn buffers(body: &[Stmt], reads: bool, out: &mut BTreeSet<u32>) {
    for s in body {
        match s {
            Stmt::Mma(MmaStmt::CpAsync { dst, .. }) | Stmt::Sm90(Sm90Stmt::TmaLoad { dst, .. }) => {
                if !reads {
                    out.insert(dst.buf.0);
                }
            }
            Stmt::Mma(MmaStmt::LdMatrix { src, .. }) => {
                if reads {
                    out.insert(src.buf.0);
                }
            }
            Stmt::Sm90(Sm90Stmt::Wgmma { a, b, .. }) => {
                if reads {
                    out.extend(a.desc().map(|a| a.start.buf.0));
                    out.insert(b.start.buf.0);
                }
            }
            Stmt::For { .. } | Stmt::If { .. } | Stmt::WarpSpecialize { .. } => {
                for body in s.children() {
                    buffers(body, reads, out);
                }
            }
            // No other statement copies into shared memory by `cp.async` or
            // TMA, or reads it by `ldmatrix` or a descriptor.
            Stmt::Let { .. }
            | Stmt::Barrier
            | Stmt::BarrierNamed { .. }
            | Stmt::Mma(_)
            | Stmt::Simt(_)
            | Stmt::Sm90(_) => {}
        }
    }
}

/// Whether `s` or a statement nested in it is one `pick` selects.
fn contains(s: &Stmt, pick: &impl Fn(&Stmt) -> bool) -> bool {
    pick(s) || s.children().iter().any(|body| body.iter().any(|x| contains(x, pick)))
}

impl Verifier<'_> {
    fn err(&mut self, fault: Fault, s: u32, msg: String) {
        self.errs.push(GpuError::new(fault, Some(s), msg));
    }

    fn expr(&mut self, e: &Expr, scope: &[VarId], s: Option<u32>) {
        let mut errs = Vec::new();
        e.visit(&mut |x| match x {
            Expr::Var(v) if !scope.contains(v) => {
                let name = self.k.vars.get(v.0 as usize).cloned().unwrap_or_else(|| format!("v{}", v.0));
                errs.push(format!("variable `{name}` used outside its scope"));
            }
            Expr::Param(p) => match self.k.params.get(p.0 as usize) {
                Some(Param { kind: ParamKind::I32 | ParamKind::I64, .. }) => {}
                Some(p) => errs.push(format!("pointer parameter `{}` used as an integer", p.name)),
                None => errs.push(format!("parameter {} does not exist", p.0)),
            },
            _ => {}
        });
        for m in errs {
            self.errs.push(GpuError::new(Fault::BadId, s, m));
        }
    }

    /// A `Divergence` fault when statement `s`, a `shfl.sync` with the full
    /// member mask (`what`), is under control that differs between the
    /// lanes of a warp.
    fn full_mask(&mut self, s: u32, what: &str) {
        if self.lane_divergent > 0 {
            let msg = format!("{what} (full member mask) under control that differs between the lanes of a warp");
            self.err(Fault::Divergence, s, msg);
        }
    }

    /// Checks a register another instruction than `wgmma` accesses (the
    /// `wgmma` rules: not while a `wgmma` that writes it may be in flight,
    /// and a `wgmma.fence` needed after it), then [`Verifier::fragment_reg`].
    fn reg(&mut self, r: &RegRef, kind: RegKind, scope: &[VarId], s: u32, what: &str) {
        if self.wgmma_registers.get(r.reg.0 as usize).copied().unwrap_or(false) {
            if self.wgmma_in_flight.uses(r.reg.0) {
                let name = &self.k.regs[r.reg.0 as usize].name;
                let msg = format!(
                    "{what} register `{name}` is a wgmma operand, accessed while a wgmma that uses it may be in \
                     flight on some path (no wgmma.wait_group retired it)"
                );
                self.err(Fault::IncompleteRead, s, msg);
            }
            self.fenced = false;
        }
        self.fragment_reg(r, kind, scope, s, what);
    }

    /// Checks register `r`: its array exists and has `kind`, its index is
    /// a constant inside the array once unrolled loops are unrolled.
    fn fragment_reg(&mut self, r: &RegRef, kind: RegKind, scope: &[VarId], s: u32, what: &str) {
        self.expr(&r.index, scope, Some(s));
        let Some(a) = self.k.regs.get(r.reg.0 as usize) else {
            return self.err(Fault::BadId, s, format!("register array {} does not exist", r.reg.0));
        };
        if a.kind != kind {
            let msg = format!("{what} register `{}` is {:?}, the instruction takes {kind:?}", a.name, a.kind);
            self.err(Fault::FragmentShape, s, msg);
        }
        let (name, len) = (a.name.clone(), a.len as i64);
        match self.index_range(&r.index) {
            None => self.err(
                Fault::FragmentShape,
                s,
                format!("the index of register `{name}` is not a constant once unrolled loops are unrolled"),
            ),
            Some((lo, hi)) if lo < 0 || hi >= len => {
                self.err(Fault::FragmentShape, s, format!("register `{name}[{lo}..={hi}]` outside its {len} registers"))
            }
            Some(_) => {}
        }
    }

    /// The least and greatest value of a register index over the
    /// iterations of the enclosing unrolled loops; `None` when it reads
    /// anything else (a thread index, a parameter, a rolled loop's
    /// variable). Unbounded enumerations are cut at 2^16 points.
    fn index_range(&self, e: &Expr) -> Option<(i64, i64)> {
        let mut vars = Vec::new();
        let mut constant = true;
        e.visit(&mut |x| match x {
            Expr::Var(v) => match self.unrolled.iter().find(|u| u.0 == *v) {
                Some(u) if !vars.contains(u) => vars.push(*u),
                Some(_) => {}
                None => constant = false,
            },
            Expr::Const(_) | Expr::Bin(..) | Expr::Select(..) => {}
            _ => constant = false,
        });
        if !constant {
            return None;
        }
        let mut env: Vec<(VarId, i64)> = vars.iter().map(|&(v, start, _, _)| (v, start)).collect();
        let (mut lo, mut hi) = (i64::MAX, i64::MIN);
        for _ in 0..1 << 16 {
            if vars.iter().zip(&env).any(|(&(_, start, end, _), _)| start >= end) {
                return Some((0, -1));
            }
            let v = eval_const(e, &env)?;
            (lo, hi) = (lo.min(v), hi.max(v));
            // Next point of the product of the loops' ranges, like an odometer.
            let mut i = 0;
            loop {
                let Some(&(_, start, end, step)) = vars.get(i) else {
                    return Some((lo, hi));
                };
                env[i].1 += step;
                if env[i].1 < end {
                    break;
                }
                env[i].1 = start;
                i += 1;
            }
        }
        Some((lo, hi))
    }

    fn smem(&mut self, r: &SmemRef, scope: &[VarId], s: u32) {
        match self.k.smem.get(r.buf.0 as usize) {
            None => self.err(Fault::BadId, s, format!("shared buffer {} does not exist", r.buf.0)),
            Some(b) if b.swizzle != r.swizzle => {
                let msg = format!("accesses `{}` with swizzle {} but the buffer's is {}", b.name, r.swizzle, b.swizzle);
                self.err(Fault::Swizzle, s, msg)
            }
            Some(_) => {}
        }
        self.expr(&r.offset, scope, Some(s));
    }

    fn global(&mut self, g: &GlobalRef, scope: &[VarId], s: u32) {
        self.pointer(g.param, s);
        self.expr(&g.offset, scope, Some(s));
    }

    fn pointer(&mut self, p: ParamId, s: u32) {
        if !matches!(self.k.params.get(p.0 as usize), Some(Param { kind: ParamKind::Ptr { .. }, .. })) {
            self.err(Fault::BadId, s, format!("parameter {} is not a pointer", p.0));
        }
    }

    fn define(&mut self, var: VarId, s: u32, thread: bool) {
        if var.0 as usize >= self.k.vars.len() {
            self.err(Fault::BadId, s, format!("variable {} does not exist", var.0));
        } else if !self.defined.insert(var) {
            self.err(Fault::BadId, s, format!("variable `{}` defined twice", self.k.vars[var.0 as usize]));
        }
        if thread {
            self.thread_vars.push(var);
        }
    }

    fn body(&mut self, body: &[Stmt], scope: &mut Vec<VarId>, divergent: bool, sync: &mut [Sync]) {
        let depth = scope.len();
        for st in body {
            self.stmt(st, scope, divergent, sync);
        }
        scope.truncate(depth);
    }

    fn stmt(&mut self, st: &Stmt, scope: &mut Vec<VarId>, divergent: bool, sync: &mut [Sync]) {
        let s = self.next;
        self.next += 1;
        if st.min_arch() > self.k.arch {
            let msg =
                format!("{} needs {} but the kernel is for {}", st.head(), st.min_arch().name(), self.k.arch.name());
            self.err(Fault::Arch, s, msg);
        }
        let collective = matches!(
            st,
            Stmt::Barrier
                | Stmt::BarrierNamed { .. }
                | Stmt::Sm90(Sm90Stmt::ClusterSync)
                | Stmt::WarpSpecialize { .. }
                | Stmt::Mma(MmaStmt::LdMatrix { .. })
                | Stmt::Mma(MmaStmt::MmaSync { .. })
        ) || st.is_warpgroup_collective();
        if collective && divergent {
            self.err(Fault::Divergence, s, format!("{} under control flow that depends on the thread", st.head()));
        }
        match st {
            Stmt::Let { var, value } => {
                self.expr(value, scope, Some(s));
                let thread = value.depends_on_thread(&self.thread_vars);
                if self.lane_varying(value) {
                    self.lane_vars.push(*var);
                }
                self.define(*var, s, thread);
                scope.push(*var);
            }
            Stmt::For { var, start, end, step, body, unroll } => {
                self.expr(start, scope, Some(s));
                self.expr(end, scope, Some(s));
                if *step <= 0 {
                    self.err(Fault::BadValue, s, format!("loop step {step} is not positive"));
                }
                let thread = start.depends_on_thread(&self.thread_vars) || end.depends_on_thread(&self.thread_vars);
                let lanes = self.lane_varying(start) || self.lane_varying(end);
                if lanes {
                    self.lane_vars.push(*var);
                }
                self.define(*var, s, thread);
                // A loop that both copies into a buffer and reads it reads
                // new data in each iteration.
                // So does a loop that moves through mbarrier phases while
                // the other role of a warp-specialised kernel copies.
                let waits =
                    body.iter().any(|x| contains(x, &|y| matches!(y, Stmt::Sm90(Sm90Stmt::MbarrierWait { .. }))));
                let mut written = if waits { self.concurrent.clone() } else { BTreeSet::new() };
                let mut read = BTreeSet::new();
                buffers(body, false, &mut written);
                buffers(body, true, &mut read);
                let targets: Vec<u32> = written.intersection(&read).copied().collect();
                let before = sync.to_vec();
                for &b in &targets {
                    if let Some(x) = sync.get_mut(b as usize) {
                        *x = Sync::Unsynced;
                    }
                }
                scope.push(*var);
                let bounds = (eval_const(start, &[]), eval_const(end, &[]));
                let pushed = match bounds {
                    (Some(a), Some(b)) if *unroll && *step > 0 => {
                        self.unrolled.push((*var, a, b, *step));
                        true
                    }
                    _ => false,
                };
                let (in_flight, fenced) = (self.wgmma_in_flight.clone(), self.fenced);
                self.lane_divergent += lanes as u32;
                self.body(body, scope, divergent || thread, sync);
                self.lane_divergent -= lanes as u32;
                self.wgmma_in_flight.join(&in_flight);
                self.fenced &= fenced;
                if pushed {
                    self.unrolled.pop();
                }
                scope.pop();
                // Zero trips keep `before`; some trips end with the body's state.
                for (x, b) in sync.iter_mut().zip(before) {
                    *x = (*x).min(b);
                }
            }
            Stmt::If { cond, then, otherwise } => {
                self.expr(cond, scope, Some(s));
                let div = divergent || cond.depends_on_thread(&self.thread_vars);
                let lanes = self.lane_varying(cond) as u32;
                let mut other = sync.to_vec();
                let (in_flight, fenced) = (self.wgmma_in_flight.clone(), self.fenced);
                self.lane_divergent += lanes;
                self.body(then, scope, div, sync);
                let (then_flight, then_fenced) = (std::mem::replace(&mut self.wgmma_in_flight, in_flight), self.fenced);
                self.fenced = fenced;
                self.body(otherwise, scope, div, &mut other);
                self.wgmma_in_flight.join(&then_flight);
                self.fenced &= then_fenced;
                self.lane_divergent -= lanes;
                for (x, o) in sync.iter_mut().zip(other) {
                    *x = (*x).min(o);
                }
            }
            Stmt::WarpSpecialize { producer_threads, producer, consumer } => {
                self.specialize(s, *producer_threads, [producer, consumer], scope, sync)
            }
            Stmt::Sm90(Sm90Stmt::SetMaxNReg { regs, .. }) => {
                if !is_maxnreg_count(*regs) {
                    self.err(Fault::BadValue, s, format!("setmaxnreg {regs}: a multiple of 8 in 24..=256"));
                }
            }
            Stmt::Sm90(Sm90Stmt::MbarrierArrive { bar, cta }) => {
                self.smem(bar, scope, s);
                if let Some(cta) = cta {
                    self.expr(cta, scope, Some(s));
                    self.cluster_rank(cta, s);
                }
            }
            Stmt::Sm90(Sm90Stmt::ClusterSync) if self.role.is_some() => self.err(
                Fault::Divergence,
                s,
                "barrier.cluster inside a warp-specialised role waits for the other role's threads".into(),
            ),
            Stmt::Barrier | Stmt::BarrierNamed { .. } | Stmt::Sm90(Sm90Stmt::ClusterSync) => {
                let cta = self.k.threads() as u32;
                match (st, self.role) {
                    (Stmt::Barrier, Some(_)) => self.err(
                        Fault::Divergence,
                        s,
                        "bar.sync 0 inside a warp-specialised role waits for the other role's threads".into(),
                    ),
                    (Stmt::BarrierNamed { id, threads }, role) => {
                        if !NAMED_BARRIER_IDS.contains(id) {
                            self.err(Fault::BadValue, s, format!("named barrier {id}: ids are 1 to 15"));
                        }
                        let want = role.unwrap_or(cta);
                        if *threads != want {
                            let msg = format!("bar.sync {id}, {threads} where {want} threads run");
                            self.err(Fault::Divergence, s, msg);
                        }
                    }
                    _ => {}
                }
                for x in sync.iter_mut() {
                    if *x == Sync::Waited {
                        *x = Sync::Synced;
                    }
                }
            }
            Stmt::Mma(MmaStmt::WaitGroup { .. }) => {
                // Completes cp.async groups, not TMA copies.
                for (b, x) in sync.iter_mut().enumerate() {
                    if *x == Sync::Unsynced && !self.tma_written.contains(&(b as u32)) {
                        *x = Sync::Waited;
                    }
                }
            }
            Stmt::Mma(MmaStmt::CommitGroup) | Stmt::Sm90(Sm90Stmt::GridDepControlWait) => {}
            Stmt::Mma(MmaStmt::CpAsync { dst, src, bytes, src_bytes })
            | Stmt::Mma(MmaStmt::CopySync { dst, src, bytes, src_bytes }) => {
                let sizes: &[u32] =
                    if matches!(st, Stmt::Mma(MmaStmt::CpAsync { .. })) { &[4, 8, 16] } else { &[2, 4, 8, 16] };
                if !sizes.contains(bytes) {
                    self.err(Fault::BadValue, s, format!("{} of {bytes} bytes; sizes are {sizes:?}", st.head()));
                }
                self.smem(dst, scope, s);
                self.global(src, scope, s);
                self.expr(src_bytes, scope, Some(s));
            }
            Stmt::Mma(MmaStmt::LdMatrix { num, dst, src, .. }) => {
                if dst.len() != num.count() {
                    let msg = format!("{} writes {} registers, not {}", st.head(), num.count(), dst.len());
                    self.err(Fault::FragmentShape, s, msg);
                }
                for r in dst {
                    self.reg(r, RegKind::B16x2, scope, s, "ldmatrix destination");
                }
                self.smem(src, scope, s);
                if let Some(&state) = sync.get(src.buf.0 as usize) {
                    let written = {
                        let mut t = BTreeSet::new();
                        buffers(&self.k.body, false, &mut t);
                        t.contains(&src.buf.0)
                    };
                    if written && state != Sync::Synced {
                        let name = &self.k.smem[src.buf.0 as usize].name;
                        let what =
                            if state == Sync::Unsynced { "cp.async.wait_group" } else { "bar.sync after the wait" };
                        let msg =
                            format!("reads `{name}`, which cp.async writes, with no {what} on some path before it");
                        self.err(Fault::IncompleteRead, s, msg);
                    }
                }
            }
            Stmt::Mma(MmaStmt::MmaSync { ab, d, a, b, c }) => {
                if !matches!(ab, crate::DType::F16 | crate::DType::BF16) {
                    self.err(Fault::FragmentShape, s, format!("mma.m16n8k16 operands are {}", ab.dsl_name()));
                }
                for (regs, n, kind, what) in [
                    (d, 4, RegKind::F32, "D"),
                    (a, 4, RegKind::B16x2, "A"),
                    (b, 2, RegKind::B16x2, "B"),
                    (c, 4, RegKind::F32, "C"),
                ] {
                    if regs.len() != n {
                        let msg = format!("mma.m16n8k16 takes {n} {what} registers, not {}", regs.len());
                        self.err(Fault::FragmentShape, s, msg);
                    }
                    for r in regs {
                        self.reg(r, kind, scope, s, what);
                    }
                }
            }
            Stmt::Mma(MmaStmt::MovF32 { dst, .. }) => self.reg(dst, RegKind::F32, scope, s, "mov"),
            Stmt::Mma(MmaStmt::PackB16x2 { dst, lo, hi, dtype }) => {
                if !matches!(dtype, crate::DType::F16 | crate::DType::BF16) {
                    self.err(Fault::BadValue, s, format!("cvt packs f16 or bf16 pairs, not {dtype}"));
                }
                self.reg(dst, RegKind::B16x2, scope, s, "cvt destination");
                self.reg(lo, RegKind::F32, scope, s, "cvt source");
                self.reg(hi, RegKind::F32, scope, s, "cvt source");
            }
            Stmt::Mma(MmaStmt::Epilogue { acc, pred, ops }) => {
                self.reg(acc, RegKind::F32, scope, s, "epilogue");
                self.expr(pred, scope, Some(s));
                for op in ops {
                    match op {
                        EpilogueOp::Bias { param, at } | EpilogueOp::Residual { param, at } => {
                            self.pointer(*param, s);
                            self.expr(at, scope, Some(s));
                        }
                        EpilogueOp::Relu
                        | EpilogueOp::Silu
                        | EpilogueOp::Gelu
                        | EpilogueOp::GeluTanh
                        | EpilogueOp::Tanh
                        | EpilogueOp::Cast(_) => {}
                    }
                }
            }
            Stmt::Mma(MmaStmt::StShared { dst, src: regs, dtype })
            | Stmt::Mma(MmaStmt::LdShared { dst: regs, src: dst, dtype }) => {
                self.smem(dst, scope, s);
                for r in regs {
                    self.reg(r, compute_kind(*dtype), scope, s, "shared store/load");
                }
            }
            Stmt::Mma(MmaStmt::StGlobalVec { dst, src, pred, .. }) => {
                self.global(dst, scope, s);
                for r in src {
                    self.reg(r, RegKind::F32, scope, s, "store source");
                }
                self.expr(pred, scope, Some(s));
            }
            Stmt::Simt(SimtStmt::Compute { dst, value }) => {
                self.reg(dst, compute_kind(value.dtype()), scope, s, "compute destination");
                self.scalar(value, scope, s);
            }
            Stmt::Simt(SimtStmt::Accumulate { dtype, acc, value, .. }) => {
                self.reg(acc, compute_kind(*dtype), scope, s, "accumulator");
                if value.dtype() != *dtype {
                    let msg = format!("accumulates a {} value into a {dtype} accumulator", value.dtype());
                    self.err(Fault::BadValue, s, msg);
                }
                self.scalar(value, scope, s);
            }
            Stmt::Simt(SimtStmt::ShflBfly { dtype, acc, lane_mask, .. }) => {
                self.reg(acc, compute_kind(*dtype), scope, s, "shuffled");
                if *lane_mask >= 32 {
                    self.err(Fault::BadValue, s, format!("lane mask {lane_mask} is not a lane (0 to 31)"));
                }
                self.full_mask(s, "shfl.sync.bfly");
            }
            Stmt::Simt(SimtStmt::ShflUpScan { dtype, acc, delta, .. }) => {
                self.reg(acc, compute_kind(*dtype), scope, s, "scanned");
                if !(1..32).contains(delta) {
                    self.err(Fault::BadValue, s, format!("shfl.sync.up delta {delta} (1 to 31)"));
                }
                self.full_mask(s, "shfl.sync.up");
            }
            Stmt::Simt(SimtStmt::ShflIdx { dtype, dst, src, lane }) => {
                self.reg(dst, compute_kind(*dtype), scope, s, "broadcast destination");
                self.reg(src, compute_kind(*dtype), scope, s, "broadcast source");
                if let Expr::Const(l) = lane {
                    if !(0..32).contains(l) {
                        self.err(Fault::BadValue, s, format!("lane {l} is not a lane (0 to 31)"));
                    }
                }
                self.expr(lane, scope, Some(s));
                self.full_mask(s, "shfl.sync.idx");
            }
            Stmt::Simt(SimtStmt::StGlobal { dst, src, dtype, pred }) => {
                self.global(dst, scope, s);
                self.reg(src, compute_kind(*dtype), scope, s, "store source");
                self.expr(pred, scope, Some(s));
            }
            Stmt::Simt(SimtStmt::LdGlobalVec { dst, src, dtype, pred }) => {
                let bytes = dst.len() * dtype.size_bytes();
                if !dst.len().is_power_of_two() || bytes > 16 {
                    self.err(Fault::BadValue, s, format!("{} of {bytes} bytes (a power of two up to 16)", st.head()));
                }
                self.global(src, scope, s);
                for r in dst {
                    self.reg(r, compute_kind(*dtype), scope, s, "load destination");
                }
                self.expr(pred, scope, Some(s));
            }
            Stmt::Sm90(Sm90Stmt::MbarrierInit { bar, count }) => {
                if *count == 0 {
                    self.err(Fault::BadValue, s, "an mbarrier expecting 0 arrivals".into());
                }
                self.smem(bar, scope, s);
            }
            Stmt::Sm90(Sm90Stmt::WgmmaCommit) => self.wgmma_in_flight.commit(),
            Stmt::Sm90(Sm90Stmt::FenceMbarrierInit)
            | Stmt::Sm90(Sm90Stmt::FenceProxyAsync)
            | Stmt::Sm90(Sm90Stmt::WgmmaFence) => {
                if matches!(st, Stmt::Sm90(Sm90Stmt::WgmmaFence)) {
                    self.fenced = true;
                }
            }
            Stmt::Sm90(Sm90Stmt::MbarrierArriveExpectTx { bar, .. }) => self.smem(bar, scope, s),
            Stmt::Sm90(Sm90Stmt::MbarrierWait { bar, parity }) => {
                self.smem(bar, scope, s);
                self.expr(parity, scope, Some(s));
                // The wait makes the copies that completed the phase visible.
                for b in &self.tma_written {
                    if let Some(x) = sync.get_mut(*b as usize) {
                        *x = Sync::Synced;
                    }
                }
            }
            Stmt::Sm90(Sm90Stmt::TmaLoad { dst, map, coords, bar, multicast }) => {
                self.smem(dst, scope, s);
                self.smem(bar, scope, s);
                if let Some(mask) = multicast {
                    let cluster = self.k.cluster;
                    if cluster < 2 || *mask == 0 || u32::from(*mask) >> cluster != 0 {
                        let msg = format!("multicast to CTAs {mask:#b} of a cluster of {cluster}");
                        self.err(Fault::BadValue, s, msg);
                    }
                }
                for c in coords {
                    self.expr(c, scope, Some(s));
                }
                match self.k.params.get(map.0 as usize).map(|p| p.kind) {
                    Some(ParamKind::TensorMap(m)) => {
                        if m.swizzle != dst.swizzle {
                            let msg = format!(
                                "the tensor map writes its box with swizzle {}, the destination has {}",
                                m.swizzle, dst.swizzle
                            );
                            self.err(Fault::Swizzle, s, msg);
                        }
                        self.pointer(m.tensor, s);
                    }
                    _ => self.err(Fault::BadId, s, format!("parameter {} is not a tensor map", map.0)),
                }
            }
            Stmt::Sm90(Sm90Stmt::WgmmaWait { pending }) => self.wgmma_in_flight.wait(*pending as usize),
            Stmt::Sm90(Sm90Stmt::Wgmma { ab, n, d, a, b, .. }) => {
                if !matches!(ab, crate::DType::F16 | crate::DType::BF16) {
                    self.err(Fault::FragmentShape, s, format!("wgmma operands are {}", ab.dsl_name()));
                }
                if *n == 0 || n % 8 != 0 || *n > 256 {
                    self.err(Fault::FragmentShape, s, format!("wgmma m64n{n}k16: n is 8, 16, …, 256"));
                }
                let last = RegRef { reg: d.reg, index: d.index.clone() + (*n as i64 / 2 - 1).max(0) };
                self.fragment_reg(d, RegKind::F32, scope, s, "wgmma accumulator");
                self.fragment_reg(&last, RegKind::F32, scope, s, "wgmma accumulator");
                if let Some(r) = a.regs() {
                    let last = RegRef { reg: r.reg, index: r.index.clone() + 3 };
                    self.fragment_reg(r, RegKind::B16x2, scope, s, "wgmma A fragment");
                    self.fragment_reg(&last, RegKind::B16x2, scope, s, "wgmma A fragment");
                }
                if !self.fenced {
                    let msg = "no wgmma.fence since another instruction accessed the wgmma operands (or before the \
                               first wgmma) on some path";
                    self.err(Fault::Race, s, msg.into());
                }
                for desc in a.desc().into_iter().chain([b]) {
                    self.smem(&desc.start, scope, s);
                    if desc.start.swizzle != Swizzle::IDENTITY && desc.start.swizzle != Swizzle::B128 {
                        let msg = format!("no wgmma descriptor mode is the swizzle {}", desc.start.swizzle);
                        self.err(Fault::Swizzle, s, msg);
                    }
                    if desc.lbo % 16 != 0 || desc.sbo % 16 != 0 || desc.lbo >= 1 << 18 || desc.sbo >= 1 << 18 {
                        let msg = format!(
                            "descriptor offsets lbo {} and sbo {}: multiples of 16 below 2^18",
                            desc.lbo, desc.sbo
                        );
                        self.err(Fault::BadValue, s, msg);
                    }
                    let buf = desc.start.buf.0;
                    if self.tma_written.contains(&buf) && sync.get(buf as usize) != Some(&Sync::Synced) {
                        let name = &self.k.smem[buf as usize].name;
                        let msg = format!(
                            "reads `{name}`, which TMA copies write, with no mbarrier wait on some path before it"
                        );
                        self.err(Fault::IncompleteRead, s, msg);
                    }
                }
                self.wgmma_in_flight.open.extend(std::iter::once(d).chain(a.regs()).map(|r| r.reg.0));
            }
        }
    }

    /// Invariant 9's kernel-wide part (the module doc): the cluster's size
    /// and arch, and the `ClusterSync`s a kernel that reaches its peers'
    /// shared memory needs at the top level of its body.
    fn cluster(&mut self) {
        let k = self.k;
        if k.cluster == 0 || (k.cluster > 1 && (k.arch < Arch::Sm90 || k.cluster > 8)) {
            let msg = format!("a cluster of {} CTAs on {}: 1, or 2 to 8 on sm90", k.cluster, k.arch.name());
            self.errs.push(GpuError::new(Fault::BadValue, None, msg));
        }
        let (mut remote, mut last_init, mut syncs, mut last_top) = (None, None, Vec::new(), None);
        k.walk(&mut |id, s| {
            let top = k.body.iter().any(|t| std::ptr::eq(t, s));
            if let Stmt::Sm90(x) = s {
                match x {
                    Sm90Stmt::TmaLoad { multicast: Some(_), .. } | Sm90Stmt::MbarrierArrive { cta: Some(_), .. } => {
                        remote.get_or_insert(id);
                    }
                    Sm90Stmt::MbarrierInit { .. } => last_init = Some(id),
                    Sm90Stmt::ClusterSync => {
                        if top {
                            syncs.push(id)
                        }
                    }
                    Sm90Stmt::TmaLoad { multicast: None, .. }
                    | Sm90Stmt::MbarrierArrive { cta: None, .. }
                    | Sm90Stmt::SetMaxNReg { .. }
                    | Sm90Stmt::GridDepControlWait
                    | Sm90Stmt::FenceMbarrierInit
                    | Sm90Stmt::MbarrierArriveExpectTx { .. }
                    | Sm90Stmt::MbarrierWait { .. }
                    | Sm90Stmt::FenceProxyAsync
                    | Sm90Stmt::WgmmaFence
                    | Sm90Stmt::Wgmma { .. }
                    | Sm90Stmt::WgmmaCommit
                    | Sm90Stmt::WgmmaWait { .. } => {}
                }
            }
            if top {
                last_top = Some((id, (*s != Stmt::Sm90(Sm90Stmt::ClusterSync)).then(|| s.head())));
            }
        });
        let Some(first) = remote else { return };
        let after_init = last_init.unwrap_or(0);
        if !syncs.iter().any(|&c| c > after_init && c < first) {
            let msg = "a peer's multicast or arrival may reach this CTA's mbarriers before they are initialised: \
                       no barrier.cluster at the top level between the last mbarrier.init and it";
            self.err(Fault::Race, first, msg.into());
        }
        if let Some((id, Some(head))) = last_top {
            let msg = format!(
                "the kernel ends with {head}, not barrier.cluster: a CTA may exit while a peer still writes its shared memory"
            );
            self.err(Fault::Race, id, msg);
        }
    }

    /// A remote arrival's CTA rank `cta` lies in the cluster where it is a
    /// constant; a remote arrival needs a cluster.
    fn cluster_rank(&mut self, cta: &Expr, s: u32) {
        let cluster = self.k.cluster as i64;
        let out = match cta {
            Expr::Const(c) => !(0..cluster).contains(c),
            _ => cluster < 2,
        };
        if out || cluster < 2 {
            let msg = format!("an arrival on CTA {cta:?} of a cluster of {cluster}");
            self.err(Fault::BadValue, s, msg);
        }
    }

    /// Invariant 8 for the `WarpSpecialize` statement `s`: whole-warpgroup
    /// roles of a one-dimensional block, not nested, their `setmaxnreg`
    /// budgets within the SM's 64K registers; each role checked as a body
    /// of its own threads (the split is uniform in each warpgroup, so the
    /// role's collectives are not divergent), with the buffers the other
    /// role copies into changing under it.
    fn specialize(
        &mut self,
        s: u32,
        producer_threads: u32,
        roles: [&[Stmt]; 2],
        scope: &mut Vec<VarId>,
        sync: &mut [Sync],
    ) {
        let cta = self.k.threads() as u32;
        if self.role.is_some() {
            self.err(Fault::Divergence, s, "warp_specialize inside a role".into());
        }
        if self.k.block[1] != 1
            || self.k.block[2] != 1
            || producer_threads == 0
            || !producer_threads.is_multiple_of(128)
            || producer_threads >= cta
            || !cta.is_multiple_of(128)
        {
            let msg = format!(
                "roles of whole warpgroups of a one-dimensional block: a producer of {producer_threads} threads in a block of {:?}",
                self.k.block
            );
            self.err(Fault::BadValue, s, msg);
        }
        let threads = [producer_threads, cta.saturating_sub(producer_threads)];
        let budget: Option<u32> = roles
            .iter()
            .zip(threads)
            .map(|(body, n)| {
                body.iter().rev().find_map(|x| {
                    if let Stmt::Sm90(Sm90Stmt::SetMaxNReg { regs, .. }) = x {
                        Some(regs * n)
                    } else {
                        None
                    }
                })
            })
            .sum();
        let regs = self.k.arch.target().regs_per_sm;
        if let Some(total) = budget.filter(|&t| u64::from(t) > regs) {
            let msg = format!("the roles' setmaxnreg budgets take {total} registers, more than an SM's {regs}");
            self.err(Fault::BadValue, s, msg);
        }
        let written: [BTreeSet<u32>; 2] = roles.map(|body| {
            let mut w = BTreeSet::new();
            buffers(body, false, &mut w);
            w
        });
        let (in_flight, fenced) = (self.wgmma_in_flight.clone(), self.fenced);
        let (mut flight_any, mut fenced_all) = (InFlight::default(), true);
        let entry = sync.to_vec();
        let mut meet = sync.to_vec();
        for (i, body) in roles.into_iter().enumerate() {
            let mut state = entry.clone();
            self.role = Some(threads[i]);
            self.concurrent = written[1 - i].clone();
            (self.wgmma_in_flight, self.fenced) = (in_flight.clone(), fenced);
            self.body(body, scope, false, &mut state);
            flight_any.join(&self.wgmma_in_flight);
            fenced_all &= self.fenced;
            for (m, x) in meet.iter_mut().zip(state) {
                *m = (*m).min(x);
            }
        }
        self.role = None;
        self.concurrent.clear();
        (self.wgmma_in_flight, self.fenced) = (flight_any, fenced_all);
        sync.copy_from_slice(&meet);
    }

    /// Whether `e` may differ between the lanes of one warp: it reads a
    /// thread index that varies inside a warp of this block shape (`x`
    /// unless the block is one thread wide; `y` when rows of `x` do not
    /// fill whole warps; likewise `z`), or a variable that does.
    fn lane_varying(&self, e: &Expr) -> bool {
        let [bx, by, bz] = self.k.block;
        let mut varies = false;
        e.visit(&mut |x| match x {
            Expr::ThreadIdx(Dim::X) if bx > 1 => varies = true,
            Expr::ThreadIdx(Dim::Y) if by > 1 && bx % 32 != 0 => varies = true,
            Expr::ThreadIdx(Dim::Z) if bz > 1 && (bx * by) % 32 != 0 => varies = true,
            Expr::Var(v) if self.lane_vars.contains(v) => varies = true,
            _ => {}
        });
        varies
    }

    /// Checks the ids of a scalar expression: loads of pointer parameters,
    /// registers of the right kind, integer expressions in scope.
    fn scalar(&mut self, e: &ScalarExpr, scope: &[VarId], s: u32) {
        let mut parts = Vec::new();
        e.walk(&mut |x| parts.push(x.clone()));
        for x in parts {
            match &x {
                ScalarExpr::Load { src, .. } => self.global(src, scope, s),
                ScalarExpr::Gather { src, stride, extent, at, .. } => {
                    self.global(src, scope, s);
                    self.expr(stride, scope, Some(s));
                    self.expr(extent, scope, Some(s));
                    if at.dtype() != crate::DType::I32 {
                        self.err(Fault::BadValue, s, format!("a gather at a {} position", at.dtype().dsl_name()));
                    }
                }
                ScalarExpr::Reg { reg, dtype } => self.reg(reg, compute_kind(*dtype), scope, s, "operand"),
                ScalarExpr::Select { cond, .. } => self.expr(cond, scope, Some(s)),
                _ => {}
            }
        }
    }
}

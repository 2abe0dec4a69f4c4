//! The SM90 statements' semantics (see the module doc of `emulate`):
//! TMA box copies that land when a wait completes their mbarrier's
//! phase, mbarrier phases with arrival and transaction counts, and
//! `wgmma` with descriptor-addressed, swizzled operand tiles whose
//! results are in flight until a `wgmma.wait_group` retires them.

use super::*;

/// One mbarrier's state (PTX ISA "mbarrier": phases, pending arrival
/// count, transaction count).
pub(super) struct Mbarrier {
    count: u32,
    arrivals_left: u32,
    /// Bytes `expect_tx` announced for the current phase.
    tx_expected: u64,
    /// The TMA copies that complete on the current phase, with their
    /// issuing thread, and their bytes.
    inflight: Vec<(usize, Copy)>,
    inflight_bytes: u64,
    /// Completed phases; the current phase's parity is `phase & 1`.
    phase: u32,
    /// The current phase's arrivals (thread, its arrival count) and the
    /// last completed phase's, which its waiters acquire.
    arrivers: Vec<(u32, u32)>,
    completed: Vec<(u32, u32)>,
}

/// A statement's effect on a peer CTA of the cluster, delivered when its
/// task's turn ends (`emulate/tasks.rs`).
pub(super) enum Remote {
    /// A multicast box's 16-byte copies for CTA `cta`, issued by thread
    /// `issuer` of its peer, completing on the mbarrier at byte `bar`.
    Box { cta: usize, bar: usize, issuer: usize, copies: Vec<Copy>, s: Option<u32> },
    /// An arrival on CTA `cta`'s mbarrier at byte `bar`.
    Arrive { cta: usize, bar: usize, s: Option<u32> },
}

impl Remote {
    pub(super) fn cta(&self) -> usize {
        match self {
            Remote::Box { cta, .. } | Remote::Arrive { cta, .. } => *cta,
        }
    }
}

/// One `wgmma` in flight: the registers it uses (array, first, count per
/// thread: its accumulators, and its A fragments when they are registers)
/// and the shared bytes it reads.
struct WgmmaOp {
    regs: Vec<(usize, usize, usize)>,
    bytes: Vec<usize>,
}

/// One warpgroup's `wgmma` state.
#[derive(Default)]
pub(super) struct Warpgroup {
    /// A `wgmma.fence` since other instructions last wrote an accumulator.
    pub(super) fenced: bool,
    open: Vec<WgmmaOp>,
    committed: VecDeque<Vec<WgmmaOp>>,
}

/// The tensor and scalars of map `m` at a launch: dtype, elements per row,
/// rows, row stride, box extents.
struct MapView {
    dtype: DType,
    dims: [i64; 2],
    row_stride: i64,
}

fn map_view(k: &Kernel, m: &TensorMapParam, scalars: &[i64], args: &[Arg]) -> Result<MapView, String> {
    let scalar = |p: ParamId| match k.params.get(p.0 as usize).map(|q| q.kind) {
        Some(ParamKind::I32 | ParamKind::I64) => Ok(scalars[p.0 as usize]),
        _ => Err(format!("parameter {} is not a scalar", p.0)),
    };
    let (Some(ParamKind::Ptr { dtype, .. }), Some(Arg::Tensor(data))) =
        (k.params.get(m.tensor.0 as usize).map(|p| p.kind), args.get(m.tensor.0 as usize))
    else {
        return Err(format!("parameter {} is not a tensor", m.tensor.0));
    };
    let dims = [scalar(m.dims[0])?, scalar(m.dims[1])?];
    let row_stride = scalar(m.row_stride)?;
    let es = dtype.size_bytes() as i64;
    if dims.iter().any(|&d| !(1..=1 << 32).contains(&d)) {
        return Err(format!("extents {dims:?} not in 1..=2^32"));
    }
    if row_stride < dims[0] || (row_stride * es) % 16 != 0 {
        return Err(format!(
            "row stride {row_stride} is below the row's {} elements or not a multiple of 16 bytes",
            dims[0]
        ));
    }
    let need = (dims[1] - 1).saturating_mul(row_stride).saturating_add(dims[0]);
    if (data.len() as i64) / es < need {
        return Err(format!("the tensor holds {} elements, the map spans {need}", data.len() as i64 / es));
    }
    Ok(MapView { dtype, dims, row_stride })
}

/// Checks tensor map `m` against the driver's rules for
/// `cuTensorMapEncodeTiled` (those `tgc_runtime::cuda::tma` applies) for
/// the launch's `args`.
pub(super) fn check_map(k: &Kernel, m: &TensorMapParam, scalars: &[i64], args: &[Arg]) -> Result<(), String> {
    let v = map_view(k, m, scalars, args)?;
    if matches!(v.dtype, DType::Bool) {
        return Err("TMA does not copy bool".into());
    }
    let inner = m.box_dims[0] as u64 * v.dtype.size_bytes() as u64;
    if m.box_dims.iter().any(|&b| !(1..=256).contains(&b)) || !inner.is_multiple_of(16) {
        return Err(format!("box {:?}: extents 1 to 256, the inner one a multiple of 16 bytes", m.box_dims));
    }
    match m.swizzle {
        s if s == Swizzle::IDENTITY => Ok(()),
        s if s == Swizzle::B128 && inner <= 128 => Ok(()),
        s => Err(format!("swizzle {s} with a {inner}-byte inner box (none, or 128B with at most 128 bytes)")),
    }
}

/// Byte offset, before the swizzle, of element `(outer, k)` of a
/// descriptor's tile that starts at `start` (the layouts of
/// [`MatrixDesc`]); `outer` is the M or N index.
fn desc_offset(d: &MatrixDesc, start: u64, mn_major: bool, outer: u64, k: u64) -> Option<u64> {
    let (lbo, sbo) = (d.lbo as u64, d.sbo as u64);
    match (d.start.swizzle == Swizzle::B128, mn_major) {
        (true, false) => Some(start + outer / 8 * sbo + outer % 8 * 128 + 2 * k),
        (true, true) => Some(start + outer / 64 * lbo + k / 8 * sbo + k % 8 * 128 + 2 * (outer % 64)),
        (false, false) if d.start.swizzle == Swizzle::IDENTITY => {
            Some(start + outer / 8 * sbo + outer % 8 * 16 + k / 8 * lbo + 2 * (k % 8))
        }
        _ => None,
    }
}

impl<'k> Frame<'k> {
    /// The warpgroups with all 128 threads active; a partly active one is
    /// a `Divergence` (the `wgmma.*` instructions are `.sync.aligned`).
    fn full_warpgroups(&self, mask: &[bool], s: Option<u32>, what: &str) -> R<Vec<usize>> {
        let mut out = Vec::new();
        for (w, lanes) in mask.chunks(128).enumerate() {
            let n = lanes.iter().filter(|&&m| m).count();
            if n == 128 {
                out.push(w);
            } else if n > 0 {
                return Err(self.err(
                    Fault::Divergence,
                    s,
                    format!("{what} with {n} of warpgroup {w}'s 128 threads active"),
                ));
            }
        }
        Ok(out)
    }

    /// Thread `t` has seen the phase whose arrivals are `seen` complete.
    fn acquire(&mut self, t: usize, seen: &[(u32, u32)]) {
        for &(r, n) in seen {
            let a = self.acquired.entry((t as u32, r)).or_insert(0);
            *a = (*a).max(n);
        }
    }

    /// The mbarrier at `bar` for thread `t`: its byte address.
    fn mbar_addr(&self, bar: &SmemRef, t: usize, s: Option<u32>) -> R<usize> {
        self.smem_addr(bar, t, 8, 8, s)
    }

    fn mbar(&mut self, addr: usize, s: Option<u32>) -> R<&mut Mbarrier> {
        if !self.mbars.contains_key(&addr) {
            return Err(self.err(Fault::BadValue, s, format!("the mbarrier at shared byte {addr} is not initialised")));
        }
        Ok(self.mbars.get_mut(&addr).expect("checked"))
    }

    /// Why the `MbarrierWait` `st` cannot complete now for the `mask`
    /// threads (a `Deadlock` naming the phase and what it lacks), or `None`
    /// when every thread's phase has completed or can complete: all its
    /// arrivals came and its copies carry at least the announced bytes.
    pub(super) fn wait_blocks(&mut self, st: &'k Stmt, mask: &[bool], s: Option<u32>) -> R<Option<GpuError>> {
        let Stmt::Sm90(Sm90Stmt::MbarrierWait { bar, parity }) = st else {
            return Err(self.err(Fault::BadId, s, format!("{} is not an mbarrier wait", st.head())));
        };
        for t in Self::active(mask) {
            let a = self.mbar_addr(bar, t, s)?;
            let p = self.eval(parity, t, s)?;
            if !(0..=1).contains(&p) {
                return Err(self.err(Fault::BadValue, s, format!("thread {t}: parity {p}")));
            }
            let m = self.mbar(a, s)?;
            let (phase, left, expected, carried) = (m.phase, m.arrivals_left, m.tx_expected, m.inflight_bytes);
            if (phase & 1) as i64 == p && (left > 0 || carried < expected) {
                return Ok(Some(self.err(
                    Fault::Deadlock,
                    s,
                    format!(
                        "thread {t} waits for phase {phase} (parity {p}) of the mbarrier at byte {a}, which cannot \
                         complete: {left} arrivals and {} bytes of copies missing",
                        expected.saturating_sub(carried)
                    ),
                )));
            }
        }
        Ok(None)
    }

    /// One arrival, by `who`, on the current phase of this CTA's mbarrier
    /// at byte `a`.
    fn arrive(&mut self, a: usize, s: Option<u32>, who: &str) -> R<()> {
        let m = self.mbar(a, s)?;
        if m.arrivals_left == 0 {
            let phase = m.phase;
            let msg = format!("{who}: more arrivals than the mbarrier at byte {a} expects in phase {phase}");
            return Err(self.err(Fault::BadValue, s, msg));
        }
        m.arrivals_left -= 1;
        Ok(())
    }

    /// The cluster rank `cta` names for thread `t`.
    fn cluster_rank(&self, cta: &Expr, t: usize, s: Option<u32>) -> R<usize> {
        let r = self.eval(cta, t, s)?;
        let cluster = self.k.cluster.max(1) as i64;
        if !(0..cluster).contains(&r) {
            return Err(self.err(Fault::BadValue, s, format!("thread {t}: CTA {r} of a cluster of {cluster}")));
        }
        Ok(r as usize)
    }

    /// A box's `copies` (issued by thread `issuer`, of this CTA when
    /// `local`, else of a peer) arriving in this CTA's shared memory, to
    /// land when a wait completes the phase of its mbarrier at byte `bar`.
    fn receive_box(&mut self, copies: Vec<Copy>, bar: usize, issuer: usize, local: bool, s: Option<u32>) -> R<()> {
        self.mbar(bar, s)?;
        let who = if local { format!("thread {issuer}") } else { format!("a peer's thread {issuer}") };
        for c in &copies {
            for b in c.dst..c.dst + c.data.len() {
                if self.state[b].wgmma_readers > 0 {
                    return Err(self.err(
                        Fault::Race,
                        s,
                        format!("{who}: the box overwrites shared byte {b}, which a wgmma no wgmma.wait_group retired reads"),
                    ));
                }
            }
            if local {
                self.check_write(c.dst, c.data.len(), issuer, s)?;
            }
            for b in c.dst..c.dst + c.data.len() {
                self.state[b].pending += 1;
            }
        }
        let bytes: u64 = copies.iter().map(|c| c.data.len() as u64).sum();
        self.stats.tma_bytes += bytes;
        let mb = self.mbar(bar, s)?;
        mb.inflight_bytes += bytes;
        mb.inflight.extend(copies.into_iter().map(|c| (issuer, c)));
        Ok(())
    }

    /// Applies a peer's effect on this CTA (`emulate/tasks.rs`).
    pub(super) fn receive(&mut self, r: Remote) -> R<()> {
        let s = match &r {
            Remote::Box { s, .. } | Remote::Arrive { s, .. } => *s,
        };
        if self.exited {
            let msg =
                "reaches the shared memory of a CTA of the cluster that has exited (no barrier.cluster before its end)";
            return Err(self.err(Fault::Race, s, msg.into()));
        }
        self.received_since_sync = true;
        match r {
            Remote::Box { bar, issuer, copies, .. } => self.receive_box(copies, bar, issuer, false, s),
            Remote::Arrive { bar, .. } => self.arrive(bar, s, "a peer's arrival"),
        }
    }

    pub(super) fn sm90_stmt(
        &mut self,
        st: &'k Stmt,
        x: &'k Sm90Stmt,
        mask: &[bool],
        args: &mut [Arg],
        s: Option<u32>,
    ) -> R<()> {
        match x {
            Sm90Stmt::MbarrierInit { bar, count } => {
                if *count == 0 {
                    return Err(self.err(Fault::BadValue, s, "an mbarrier expecting 0 arrivals".into()));
                }
                for t in Self::active(mask) {
                    let a = self.mbar_addr(bar, t, s)?;
                    if self.mbars.get(&a).is_some_and(|m| !m.inflight.is_empty()) {
                        return Err(self.err(
                            Fault::Race,
                            s,
                            format!("re-initialises the mbarrier at byte {a} with copies in flight"),
                        ));
                    }
                    let m = Mbarrier {
                        count: *count,
                        arrivals_left: *count,
                        tx_expected: 0,
                        inflight: Vec::new(),
                        inflight_bytes: 0,
                        phase: 0,
                        arrivers: Vec::new(),
                        completed: Vec::new(),
                    };
                    self.mbars.insert(a, m);
                }
            }
            Sm90Stmt::FenceMbarrierInit => {}
            Sm90Stmt::MbarrierArriveExpectTx { bar, .. } | Sm90Stmt::MbarrierArrive { bar, .. } => {
                let (bytes, cta) = if let Sm90Stmt::MbarrierArriveExpectTx { bytes, .. } = x {
                    (*bytes, None)
                } else if let Sm90Stmt::MbarrierArrive { cta, .. } = x {
                    (0, cta.as_ref())
                } else {
                    (0, None)
                };
                for t in Self::active(mask) {
                    let a = self.mbar_addr(bar, t, s)?;
                    if let Some(cta) = cta {
                        let r = self.cluster_rank(cta, t, s)?;
                        if r != self.rank {
                            self.outbox.push(Remote::Arrive { cta: r, bar: a, s });
                            continue;
                        }
                    }
                    self.arrive(a, s, &format!("thread {t}"))?;
                    self.mbar(a, s)?.tx_expected += bytes as u64;
                    self.arrived[t] += 1;
                    let n = self.arrived[t];
                    self.mbar(a, s)?.arrivers.push((t as u32, n));
                }
            }
            Sm90Stmt::MbarrierWait { bar, parity } => {
                if let Some(e) = self.wait_blocks(st, mask, s)? {
                    return Err(e);
                }
                for t in Self::active(mask) {
                    let a = self.mbar_addr(bar, t, s)?;
                    let p = self.eval(parity, t, s)?;
                    let m = self.mbar(a, s)?;
                    if (m.phase & 1) as i64 != p {
                        // The phase of parity p is the one before the current: complete.
                        let seen = m.completed.clone();
                        self.acquire(t, &seen);
                        continue;
                    }
                    let (expected, carried) = (m.tx_expected, m.inflight_bytes);
                    if carried > expected {
                        return Err(self.err(
                            Fault::BadValue,
                            s,
                            format!(
                                "the copies completing on the mbarrier at byte {a} carry {carried} bytes, expect_tx announced {expected}"
                            ),
                        ));
                    }
                    let copies = std::mem::take(&mut m.inflight);
                    m.completed = std::mem::take(&mut m.arrivers);
                    let seen = m.completed.clone();
                    m.phase += 1;
                    m.arrivals_left = m.count;
                    m.tx_expected = 0;
                    m.inflight_bytes = 0;
                    self.acquire(t, &seen);
                    for (issuer, c) in copies {
                        // Visible to every thread that observed the phase: no
                        // barrier epoch to race with.
                        self.land(&c, issuer, true);
                        for b in c.dst..c.dst + c.data.len() {
                            self.state[b].w_epoch = 0;
                            self.state[b].generic = false;
                        }
                    }
                }
            }
            Sm90Stmt::SetMaxNReg { regs, .. } => {
                self.full_warpgroups(mask, s, "setmaxnreg")?;
                if !is_maxnreg_count(*regs) {
                    return Err(self.err(
                        Fault::BadValue,
                        s,
                        format!("setmaxnreg {regs}: a multiple of 8 in 24..=256"),
                    ));
                }
            }
            Sm90Stmt::TmaLoad { dst, map, coords, bar, multicast } => {
                let Some(ParamKind::TensorMap(m)) = self.k.params.get(map.0 as usize).map(|p| p.kind) else {
                    return Err(self.err(Fault::BadId, s, format!("parameter {} is not a tensor map", map.0)));
                };
                if dst.swizzle != m.swizzle {
                    return Err(self.err(
                        Fault::Swizzle,
                        s,
                        format!(
                            "the box is written with the map's swizzle {}, the destination says {}",
                            m.swizzle, dst.swizzle
                        ),
                    ));
                }
                let view = map_view(self.k, &m, self.scalars, args).map_err(|w| self.err(Fault::BadValue, s, w))?;
                let es = view.dtype.size_bytes();
                let [b0, b1] = m.box_dims.map(|b| b as usize);
                let row_bytes = b0 * es;
                let box_bytes = row_bytes * b1;
                let align = if m.swizzle == Swizzle::B128 { 1024 } else { 128 };
                for t in Self::active(mask) {
                    let Some(buf) = self.k.smem.get(dst.buf.0 as usize) else {
                        return Err(self.err(Fault::BadId, s, format!("shared buffer {} is not declared", dst.buf.0)));
                    };
                    let off = self.eval(&dst.offset, t, s)?;
                    if off < 0 || off as u64 + box_bytes as u64 > buf.size {
                        return Err(self.err(
                            Fault::OutOfBounds,
                            s,
                            format!(
                                "thread {t}: a {box_bytes}-byte box at offset {off} outside `{}` ({} bytes)",
                                buf.name, buf.size
                            ),
                        ));
                    }
                    let at = buf.offset + off as u64;
                    if !at.is_multiple_of(align) {
                        return Err(self.err(
                            Fault::Misaligned,
                            s,
                            format!("thread {t}: box destination at shared byte {at}, not {align}-byte aligned"),
                        ));
                    }
                    let [c0, c1] = [self.eval(&coords[0], t, s)?, self.eval(&coords[1], t, s)?];
                    let bar_at = self.mbar_addr(bar, t, s)?;
                    self.mbar(bar_at, s)?;
                    let Some(Arg::Tensor(data)) = args.get(m.tensor.0 as usize) else {
                        return Err(self.err(Fault::BadId, s, "the map's tensor is not an argument".into()));
                    };
                    let mut copies = Vec::with_capacity(box_bytes / 16);
                    for r in 0..b1 {
                        let y = c1 + r as i64;
                        for chunk in 0..row_bytes / 16 {
                            let mut bytes = vec![0u8; 16];
                            for e in 0..16 / es {
                                let x = c0 + ((chunk * 16) / es + e) as i64;
                                if (0..view.dims[0]).contains(&x) && (0..view.dims[1]).contains(&y) {
                                    let g = ((y * view.row_stride + x) as usize) * es;
                                    bytes[e * es..(e + 1) * es].copy_from_slice(&data[g..g + es]);
                                }
                            }
                            let pre = off as u64 + (r * row_bytes + chunk * 16) as u64;
                            let phys = (buf.offset + m.swizzle.apply(pre)) as usize;
                            copies.push(Copy { dst: phys, data: bytes });
                        }
                    }
                    match multicast {
                        None => self.receive_box(copies, bar_at, t, true, s)?,
                        Some(mask) => {
                            let cluster = self.k.cluster.max(1) as usize;
                            if *mask == 0 || usize::from(*mask) >> cluster != 0 {
                                let msg = format!("multicast to CTAs {mask:#b} of a cluster of {cluster}");
                                return Err(self.err(Fault::BadValue, s, msg));
                            }
                            for r in (0..cluster).filter(|r| mask >> r & 1 == 1) {
                                let copies = copies.clone();
                                if r == self.rank {
                                    self.receive_box(copies, bar_at, t, true, s)?;
                                } else {
                                    self.outbox.push(Remote::Box { cta: r, bar: bar_at, issuer: t, copies, s });
                                }
                            }
                        }
                    }
                }
            }
            Sm90Stmt::FenceProxyAsync => {
                let active: Vec<u32> = Self::active(mask).map(|t| t as u32 + 1).collect();
                for st in self.state.iter_mut().filter(|b| b.generic) {
                    if active.binary_search(&st.writer).is_ok() {
                        st.generic = false;
                    }
                }
            }
            Sm90Stmt::WgmmaFence => {
                for w in self.full_warpgroups(mask, s, "wgmma.fence")? {
                    self.warpgroups[w].fenced = true;
                }
            }
            Sm90Stmt::WgmmaCommit => {
                for w in self.full_warpgroups(mask, s, "wgmma.commit_group")? {
                    let g = std::mem::take(&mut self.warpgroups[w].open);
                    self.warpgroups[w].committed.push_back(g);
                }
            }
            Sm90Stmt::WgmmaWait { pending } => {
                for w in self.full_warpgroups(mask, s, "wgmma.wait_group")? {
                    while self.warpgroups[w].committed.len() > *pending as usize {
                        let group = self.warpgroups[w].committed.pop_front().unwrap_or_default();
                        for op in group {
                            self.retire(w, op);
                        }
                    }
                }
            }
            Sm90Stmt::Wgmma { ab, n, d, a, b, trans_b, scale_d } => {
                self.wgmma(mask, s, *ab, *n, d, a, b, *trans_b, *scale_d)?
            }
            Sm90Stmt::ClusterSync => self.barrier(st, mask, s)?,
            Sm90Stmt::GridDepControlWait => {}
        }
        Ok(())
    }

    /// Warpgroup `w`'s A tile from its fragments in registers `r..r+4`
    /// ([`WgmmaA::Regs`]'s layout) into `ma`, marking them in use by the
    /// `wgmma` (returned as array, first, count) until it retires; other
    /// `wgmma`s may read them meanwhile, other statements may not touch
    /// them.
    fn wgmma_a_regs(
        &mut self,
        r: &RegRef,
        w: usize,
        ab: DType,
        ma: &mut [[f32; 16]],
        s: Option<u32>,
    ) -> R<(usize, usize, usize)> {
        let t0 = w * 128;
        let first = self.eval(&r.index, t0, s)?;
        let (arr, _) = self.reg(r, t0, s)?;
        let len = self.k.regs[arr].len as usize;
        if self.k.regs[arr].kind != RegKind::B16x2 || first < 0 || first as usize + 4 > len {
            let msg =
                format!("wgmma reads its A fragments from 4 b16x2 registers at {}[{first}]", self.k.regs[arr].name);
            return Err(self.err(Fault::FragmentShape, s, msg));
        }
        for warp in 0..4 {
            for lane in 0..32 {
                let t = t0 + warp * 32 + lane;
                if self.eval(&r.index, t, s)? != first {
                    let msg = format!("the A registers differ between threads of warpgroup {w}");
                    return Err(self.err(Fault::BadValue, s, msg));
                }
                for j in 0..4 {
                    let slot = t * len + first as usize + j;
                    let v = self.regs[arr][slot];
                    let (row, col) = a_fragment_at(lane, j);
                    let row = 16 * warp + row;
                    ma[row][col] = b16_to_f32(ab, v as u16);
                    ma[row][col + 1] = b16_to_f32(ab, (v >> 16) as u16);
                    self.reg_pending[arr][slot] += 1;
                }
            }
        }
        Ok((arr, first as usize, 4))
    }

    fn retire(&mut self, w: usize, op: WgmmaOp) {
        for (arr, first, count) in op.regs {
            let len = self.k.regs[arr].len as usize;
            for t in w * 128..(w + 1) * 128 {
                for i in first..first + count {
                    let p = &mut self.reg_pending[arr][t * len + i];
                    *p = p.saturating_sub(1);
                }
            }
        }
        for b in op.bytes {
            self.state[b].wgmma_readers = self.state[b].wgmma_readers.saturating_sub(1);
        }
    }

    /// The buffer and pre-swizzle start offset of descriptor `d`, the
    /// same for every thread of warpgroup `w`.
    fn desc_start(&self, d: &MatrixDesc, w: usize, s: Option<u32>) -> R<(usize, u64)> {
        let Some(buf) = self.k.smem.get(d.start.buf.0 as usize) else {
            return Err(self.err(Fault::BadId, s, format!("shared buffer {} is not declared", d.start.buf.0)));
        };
        let off = self.eval(&d.start.offset, w * 128, s)?;
        for t in w * 128 + 1..(w + 1) * 128 {
            if self.eval(&d.start.offset, t, s)? != off {
                return Err(self.err(
                    Fault::BadValue,
                    s,
                    format!("the descriptor differs between threads of warpgroup {w}"),
                ));
            }
        }
        if off < 0 {
            return Err(self.err(Fault::OutOfBounds, s, format!("descriptor start {off} in `{}`", buf.name)));
        }
        if d.start.swizzle == Swizzle::B128 && buf.offset % 1024 != 0 {
            return Err(self.err(
                Fault::Misaligned,
                s,
                format!(
                    "`{}` at shared byte {} is read with the 128-byte swizzle but not 1024-byte aligned",
                    buf.name, buf.offset
                ),
            ));
        }
        Ok((d.start.buf.0 as usize, off as u64))
    }

    /// Reads the 16-bit element `(outer, k)` of descriptor `d`'s tile as
    /// thread `t`, recording the bytes read.
    #[allow(clippy::too_many_arguments)]
    fn desc_elem(
        &mut self,
        d: &MatrixDesc,
        (buf, start): (usize, u64),
        mn_major: bool,
        outer: u64,
        k: u64,
        t: usize,
        ab: DType,
        read: &mut Vec<usize>,
        s: Option<u32>,
    ) -> R<f32> {
        let b = &self.k.smem[buf];
        let Some(off) = desc_offset(d, start, mn_major, outer, k) else {
            return Err(self.err(
                Fault::BadValue,
                s,
                format!(
                    "a wgmma descriptor with swizzle {} {}-major is not emulated",
                    d.start.swizzle,
                    if mn_major { "MN" } else { "K" }
                ),
            ));
        };
        if off + 2 > b.size {
            return Err(self.err(
                Fault::OutOfBounds,
                s,
                format!("wgmma operand byte {off} outside `{}` ({} bytes)", b.name, b.size),
            ));
        }
        let phys = (b.offset + d.start.swizzle.apply(off)) as usize;
        if self.state[phys].generic || self.state[phys + 1].generic {
            return Err(self.err(
                Fault::Race,
                s,
                format!(
                    "wgmma reads shared byte {phys} of `{}`, written through the generic proxy with no fence.proxy.async by its writer",
                    b.name
                ),
            ));
        }
        let bytes = self.read_smem(phys, 2, t, s)?;
        read.extend([phys, phys + 1]);
        Ok(b16_to_f32(ab, u16::from_le_bytes([bytes[0], bytes[1]])))
    }

    #[allow(clippy::too_many_arguments)]
    fn wgmma(
        &mut self,
        mask: &[bool],
        s: Option<u32>,
        ab: DType,
        n: u32,
        d: &RegRef,
        a: &WgmmaA,
        b: &MatrixDesc,
        trans_b: bool,
        scale_d: bool,
    ) -> R<()> {
        if !matches!(ab, DType::F16 | DType::BF16) || n == 0 || !n.is_multiple_of(8) || n > 256 {
            return Err(self.err(
                Fault::FragmentShape,
                s,
                format!("wgmma m64n{n}k16 on {}: n is 8, 16, …, 256 and the operands f16 or bf16", ab.dsl_name()),
            ));
        }
        let half = n as usize / 2;
        for w in self.full_warpgroups(mask, s, "wgmma.mma_async")? {
            if !self.warpgroups[w].fenced {
                return Err(self.err(
                    Fault::Race,
                    s,
                    format!("warpgroup {w}: wgmma with no wgmma.fence since other instructions wrote its accumulators (or before the first wgmma)"),
                ));
            }
            let t0 = w * 128;
            let first = self.eval(&d.index, t0, s)?;
            let (arr, _) = self.reg(d, t0, s)?;
            let len = self.k.regs[arr].len as usize;
            if self.k.regs[arr].kind != RegKind::F32 || first as usize + half > len {
                return Err(self.err(
                    Fault::FragmentShape,
                    s,
                    format!(
                        "wgmma m64n{n}k16 accumulates into {half} f32 registers from {}[{first}]",
                        self.k.regs[arr].name
                    ),
                ));
            }
            let mut read = Vec::new();
            let mut ma = vec![[0f32; 16]; 64];
            let mut used = vec![(arr, first as usize, half)];
            match a {
                WgmmaA::Smem(a) => {
                    let sa = self.desc_start(a, w, s)?;
                    for (r, row) in ma.iter_mut().enumerate() {
                        for (k, x) in row.iter_mut().enumerate() {
                            *x = self.desc_elem(a, sa, false, r as u64, k as u64, t0, ab, &mut read, s)?;
                        }
                    }
                }
                WgmmaA::Regs(r) => used.push(self.wgmma_a_regs(r, w, ab, &mut ma, s)?),
            }
            let sb = self.desc_start(b, w, s)?;
            let mut mb = vec![[0f32; 16]; n as usize];
            for (c, col) in mb.iter_mut().enumerate() {
                for (k, x) in col.iter_mut().enumerate() {
                    *x = self.desc_elem(b, sb, trans_b, c as u64, k as u64, t0, ab, &mut read, s)?;
                }
            }
            for warp in 0..4 {
                for lane in 0..32 {
                    let t = t0 + warp * 32 + lane;
                    let (g, q) = (lane / 4, lane % 4);
                    for i in 0..half {
                        let (j, h, c) = (i / 4, i % 4 / 2, i % 2);
                        let (row, col) = (16 * warp + g + 8 * h, 8 * j + 2 * q + c);
                        let slot = t * len + first as usize + i;
                        let mut acc = if scale_d { f32::from_bits(self.regs[arr][slot]) } else { 0.0 };
                        for k in 0..16 {
                            acc += ma[row][k] * mb[col][k];
                        }
                        self.regs[arr][slot] = acc.to_bits();
                        self.reg_pending[arr][slot] += 1;
                    }
                }
            }
            for &byte in &read {
                self.state[byte].wgmma_readers += 1;
            }
            self.warpgroups[w].open.push(WgmmaOp { regs: used, bytes: read });
            self.stats.wgmma += 1;
        }
        Ok(())
    }
}

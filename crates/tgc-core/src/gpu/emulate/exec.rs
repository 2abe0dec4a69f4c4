//! The statements' semantics: one [`Stmt`] run by the active threads of
//! a CTA (see the module doc of `emulate` for the model).

use super::*;
use crate::frontend::ops::elementwise::erfc_abs_f64;

impl<'k> Frame<'k> {
    pub(super) fn stmt(&mut self, st: &'k Stmt, mask: &[bool], args: &mut [Arg]) -> R<()> {
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
            Stmt::For { .. } | Stmt::If { .. } | Stmt::WarpSpecialize { .. } => {
                let msg =
                    format!("{} runs as a task's control flow (`emulate/tasks.rs`), not as a statement", st.head());
                return Err(self.err(Fault::BadValue, s, msg));
            }
            Stmt::Barrier | Stmt::BarrierNamed { .. } => self.barrier(st, mask, s)?,
            Stmt::Mma(MmaStmt::CpAsync { dst, src, bytes, src_bytes })
            | Stmt::Mma(MmaStmt::CopySync { dst, src, bytes, src_bytes }) => {
                let is_async = matches!(st, Stmt::Mma(MmaStmt::CpAsync { .. }));
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
            Stmt::Mma(MmaStmt::CommitGroup) => {
                for t in Self::active(mask) {
                    let g = std::mem::take(&mut self.open[t]);
                    self.committed[t].push_back(g);
                }
            }
            Stmt::Mma(MmaStmt::WaitGroup { pending }) => {
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
            Stmt::Mma(MmaStmt::LdMatrix { num, trans, dst, src }) => {
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
            Stmt::Mma(MmaStmt::MmaSync { ab, d, a, b, c }) => {
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
                            let (row, col) = a_fragment_at(l, j);
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
            Stmt::Mma(MmaStmt::MovF32 { dst, value }) => {
                for t in Self::active(mask) {
                    self.set_reg(dst, t, value.to_bits(), s)?;
                }
            }
            Stmt::Mma(MmaStmt::PackB16x2 { dst, lo, hi, dtype }) => {
                let mut bytes = Vec::with_capacity(4);
                for t in Self::active(mask) {
                    bytes.clear();
                    for r in [lo, hi] {
                        let v = f32::from_bits(self.get_reg(r, t, s)?);
                        store_bytes(*dtype, v, &mut bytes).ok_or_else(|| self.bad_vector(s, 2, *dtype))?;
                    }
                    let packed = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
                    self.set_reg(dst, t, packed, s)?;
                }
            }
            Stmt::Mma(MmaStmt::Epilogue { acc, pred, ops }) => {
                for t in Self::active(mask) {
                    if self.eval(pred, t, s)? == 0 {
                        continue;
                    }
                    let mut v = f32::from_bits(self.get_reg(acc, t, s)?);
                    for op in ops {
                        v = match op {
                            EpilogueOp::Bias { param, at } | EpilogueOp::Residual { param, at } => {
                                let at = self.eval(at, t, s)?;
                                v + self.load_elem(*param, Expr::Const(at), t, args, s)?
                            }
                            EpilogueOp::Relu => v.max(0.0),
                            EpilogueOp::Silu => v / (1.0 + (-v).exp()),
                            EpilogueOp::Gelu => {
                                let x = v as f64;
                                let q = erfc_abs_f64((x * std::f64::consts::FRAC_1_SQRT_2).abs());
                                (0.5 * x * if x < 0.0 { q } else { 2.0 - q }) as f32
                            }
                            EpilogueOp::GeluTanh => {
                                let x = v as f64;
                                (0.5 * x
                                    * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh()))
                                    as f32
                            }
                            EpilogueOp::Tanh => (v as f64).tanh() as f32,
                            EpilogueOp::Cast(d) => round_to(*d, v),
                        };
                    }
                    self.set_reg(acc, t, v.to_bits(), s)?;
                }
            }
            Stmt::Mma(MmaStmt::StGlobalVec { dst, src, dtype, pred }) => {
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
            Stmt::Mma(MmaStmt::StShared { dst, src, dtype }) => {
                let n = shared_bytes(src.len(), *dtype).ok_or_else(|| self.bad_vector(s, src.len(), *dtype))?;
                for t in Self::active(mask) {
                    let a = self.smem_addr(dst, t, n, n, s)?;
                    let mut bytes = Vec::with_capacity(n as usize);
                    for r in src {
                        let bits = self.get_reg(r, t, s)?;
                        match dtype {
                            DType::I32 => bytes.extend(bits.to_le_bytes()),
                            _ => store_bytes(*dtype, f32::from_bits(bits), &mut bytes)
                                .ok_or_else(|| self.bad_vector(s, src.len(), *dtype))?,
                        }
                    }
                    self.check_write(a, n as usize, t, s)?;
                    self.land(&Copy { dst: a, data: bytes }, t, false);
                }
            }
            Stmt::Mma(MmaStmt::LdShared { dst, src, dtype }) => {
                let n = shared_bytes(dst.len(), *dtype).ok_or_else(|| self.bad_vector(s, dst.len(), *dtype))?;
                let es = dtype.size_bytes();
                for t in Self::active(mask) {
                    let a = self.smem_addr(src, t, n, n, s)?;
                    let bytes = self.read_smem(a, n as usize, t, s)?;
                    for (r, c) in dst.iter().zip(bytes.chunks_exact(es)) {
                        let bits = match dtype {
                            DType::I32 => u32::from_le_bytes([c[0], c[1], c[2], c[3]]),
                            _ => (load(*dtype, c) as f32).to_bits(),
                        };
                        self.set_reg(r, t, bits, s)?;
                    }
                }
            }
            Stmt::Simt(x) => self.simt_stmt(x, mask, args, s)?,
            Stmt::Sm90(x) => self.sm90_stmt(st, x, mask, args, s)?,
        }
        Ok(())
    }

    /// A CTA barrier `st` (`Barrier`, `BarrierNamed`, `ClusterSync`)
    /// reached by the `mask` threads: every thread it waits for is there.
    pub(super) fn barrier(&mut self, st: &'k Stmt, mask: &[bool], s: Option<u32>) -> R<()> {
        let n = mask.iter().filter(|&&m| m).count();
        let (want, reached) = if let Stmt::BarrierNamed { id, threads } = st {
            if !NAMED_BARRIER_IDS.contains(id) || threads % 32 != 0 {
                let msg = format!("bar.sync {id}, {threads}: ids 1 to 15, a multiple of 32 threads");
                return Err(self.err(Fault::BadValue, s, msg));
            }
            (*threads as usize, format!("bar.sync {id}, {threads} reached by {n} threads"))
        } else {
            (self.threads, format!("{} reached by {n} of {} threads", st.head(), self.threads))
        };
        if n != want {
            return Err(self.err(Fault::Divergence, s, reached));
        }
        self.epoch += 1;
        self.stats.barriers += 1;
        if *st == Stmt::Sm90(Sm90Stmt::ClusterSync) {
            self.received_since_sync = false;
        }
        Ok(())
    }

    /// Enters the `For` `st` under `mask`: sets its variable to `start`
    /// and returns the threads for which the first iteration runs (the
    /// variable stays in `loop_vars` until [`Frame::loop_next`] ends it).
    pub(super) fn loop_enter(&mut self, st: &'k Stmt, mask: &[bool], s: Option<u32>) -> R<Vec<bool>> {
        let Stmt::For { var, start, step, .. } = st else {
            return Err(self.err(Fault::BadId, s, format!("{} is not a loop", st.head())));
        };
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
        self.loop_test(st, &mut live, s)?;
        Ok(live)
    }

    /// Ends an iteration of the `For` `st` for the `live` threads: steps
    /// the variable and keeps the threads whose condition still holds;
    /// when none does, the loop is left.
    pub(super) fn loop_next(&mut self, st: &'k Stmt, live: &mut [bool], s: Option<u32>) -> R<()> {
        let Stmt::For { var, step, .. } = st else {
            return Err(self.err(Fault::BadId, s, format!("{} is not a loop", st.head())));
        };
        for t in Self::active(live).collect::<Vec<_>>() {
            let i = self.eval(&Expr::Var(*var), t, s)?;
            self.set_var(*var, t, i.saturating_add(*step), s)?;
        }
        self.loop_test(st, live, s)
    }

    fn loop_test(&mut self, st: &'k Stmt, live: &mut [bool], s: Option<u32>) -> R<()> {
        let Stmt::For { var, end, .. } = st else {
            return Err(self.err(Fault::BadId, s, format!("{} is not a loop", st.head())));
        };
        for (t, l) in live.iter_mut().enumerate() {
            if *l {
                let i = self.eval(&Expr::Var(*var), t, s)?;
                *l = i < self.eval(end, t, s)?;
            }
        }
        if !live.iter().any(|&m| m) {
            self.loop_vars.pop();
        }
        Ok(())
    }

    /// The threads of `mask` that take the `If` `st`'s `then` and those
    /// that take its `otherwise`.
    pub(super) fn branch(&self, st: &'k Stmt, mask: &[bool], s: Option<u32>) -> R<(Vec<bool>, Vec<bool>)> {
        let Stmt::If { cond, .. } = st else {
            return Err(self.err(Fault::BadId, s, format!("{} is not a branch", st.head())));
        };
        let mut yes = vec![false; self.threads];
        let mut no = vec![false; self.threads];
        for t in Self::active(mask) {
            if self.eval(cond, t, s)? != 0 {
                yes[t] = true;
            } else {
                no[t] = true;
            }
        }
        Ok((yes, no))
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

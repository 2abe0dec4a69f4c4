//! The SIMT template: every region of a graph as a GPU kernel without
//! tensor cores, generated from the CPU loop-nest IR ([`loop_ir`]), which
//! stays the one description of what a region computes (`000` §1.5 regions,
//! §1.8 GPU dialect, §7 the GPU path).
//!
//! [`super::driver::lower_program`] lowers a graph with [`crate::cpu::from_tiny::lower`] (regions,
//! IndexBook subscripts, no strip-mining, row groups) and turns each row
//! group into one [`dialect::Kernel`] and each other [`loop_ir::Kernel`] into
//! one, of five forms ([`Form`]):
//!
//! - [`Form::Elementwise`] (no reduction): one thread per output element.
//!   Blocks of [`THREADS`] threads, at most [`MAX_BLOCKS`] blocks, and a
//!   grid-stride loop over the row-major flattened output; the output
//!   multi-index comes from the flat index by `%` and `/` of the extents
//!   (symbolic extents are kernel parameters). The value is a
//!   [`ScalarExpr`] (a mirror of [`loop_ir::Expr`]) computed in registers
//!   and stored with one `st.global`.
//! - [`Form::WarpReduce`] (a reduction with no reduction computed at its
//!   reads, whose reduce loops are not a constant count below 32): one warp
//!   per output element, [`WARPS`] warps per block (`block = (32, WARPS)`,
//!   the warp is `threadIdx.y`, so the row guard is the same in all lanes of
//!   a warp); lane `l` accumulates the flattened reduce points `l, l + 32,
//!   …`, then five `shfl.sync.bfly` steps (lane masks 16, 8, 4, 2, 1) give
//!   every lane the combination of all 32; lane 0 evaluates the value (the
//!   epilogue, which reads the accumulator rounded to its dtype) and stores.
//!   The order of a sum differs from the CPU backend's (32 strided partial
//!   sums, then a tree), so f32 results differ by rounding; MAX/MIN are
//!   exact.
//! - [`Form::Rows`] (a row group of the CPU back end, [`crate::cpu::rows`]:
//!   consecutive kernels over the same rows, each reading what the others
//!   wrote only in its own row — a softmax's cast, max, exp, sum and
//!   division, a layernorm's): one kernel running the group's kernels in
//!   order over each row. When the rows have a constant length and every
//!   local temporary is read at the point being computed (or is one value
//!   a row), those temporaries live in the lanes' registers
//!   (`register_rows`: one to eight warps a row, no barrier with one, the
//!   reductions' warp totals in shared memory with more). Otherwise a
//!   block of one warp per row with `bar.sync` between the kernels:
//!   an element-wise step computes [`ROWS_CHUNK`] points per lane before it
//!   stores any (several loads in flight); a row reduction is lanes plus
//!   the butterfly, as `WarpReduce`. The group's local temporaries
//!   (written and read only in it, in the same row) live as one row each
//!   in shared memory when the rows have a constant length and fit
//!   [`ROWS_SMEM_MAX`]; otherwise they stay buffers in global memory. A
//!   kernel of the group that is none of these (a reduction with other
//!   output loops, or one computed at its reads) leaves the group to the
//!   other forms.
//! - [`Form::Serial`] (any other reduction: short reduce loops — a pooling
//!   window, a small contraction such as the `Q·Kᵀ` of a naive attention or
//!   a convolution —, or reductions computed at their reads, `ComputeAt`):
//!   one thread per output element as `Elementwise`, running the reduce
//!   loops serially in the CPU backend's order; a computed-at reduction is
//!   recomputed, under its guard, before each update of the accumulator.
//! - [`Form::Scan`] (a `SCAN`, [`loop_ir::Scan`]): a block scan
//!   (`Builder::block_scan`): the warps of a block take consecutive
//!   segments of a row's tile, hold them in registers, exchange their
//!   totals through shared memory across a `bar.sync`, and scan their
//!   chunks of 32 points with `shfl.sync.up` from the carry before them; a
//!   row longer than a tile ([`SCAN_TILES`]) in three passes (tile totals,
//!   their scan, every tile from its carry).
//!
//! Numerics are the CPU backend's (`loop_ir` invariants): f32 compute for
//! f16/bf16/f32 (16-bit values rounded at `CAST` and on store), wrapping
//! i32, bool as 0/1; NaN-propagating MAX/MIN; RELU as `x < 0 ? 0 : x`;
//! accumulators wide, read rounded to their dtype.
//!
//! Kernel parameters ([`Launch::args`]): a `const` pointer per buffer the
//! kernel reads (in buffer id order), the pointer it writes, then one
//! `long long` per symbol of the program ([`GpuProgram::symbols`], the CPU
//! backend's `dims` order), all of them whether the kernel uses them or not.
//! Units: pointer offsets in elements; extents and indices `i64`.
//!
//! Vectorisation: an element-wise kernel whose output is a float tensor
//! stored row-major by its loops ([`vectorisable`]) computes [`VEC`]
//! consecutive elements per thread and stores them with one
//! `st.global.v4` (16 bytes in f32, 8 in f16/bf16, aligned: `4·flat`
//! elements from a 256-byte aligned base). When the innermost extent is a
//! constant multiple of 4, every group lies in one row: one multi-index
//! per group (the innermost index stepping by one per element), and every
//! load whose subscript is `i_last + 4·(…)` with constant coefficients (not
//! under a `PAD` guard) is one `ld.global.v4` ([`SimtStmt::LdGlobalVec`]; at the
//! group's first element the subscript is a multiple of 4, so the access is
//! aligned); broadcast and other loads stay scalar. Otherwise each element
//! of a group has its own multi-index and scalar loads, and the last partial
//! group scalar stores: with a symbolic innermost extent the alignment of
//! `row · C` is a run-time fact, and this template decides at compile time.
//!
//! The driver ([`super::driver`]) calls this template for every region no
//! tensor-core template takes: it is the correct path for all graphs (the
//! naive matmul of a region the MMA template does not take is a `Serial`
//! or `WarpReduce` kernel). The forms live in [`rows`] (row groups) and
//! [`scan`] (scans) beside the element-wise and reduction kernels here.
//!
//! The tests run the kernels in the emulator against the reference
//! interpreter and compile them with NVRTC; the GPU tier runs them on a
//! GPU.

use std::collections::BTreeMap;

use crate::affine::{AffAtom, AffExpr};
use crate::cpu::loop_ir::{self, BufId, Buffer, Role};
use crate::diag;
use crate::diag::DResult;
use crate::sym::{Atom, Dim as SymDim};
use crate::DType;

use super::dialect::{self, *};
use super::program::{Form, Launch, LaunchArg};

/// Threads per block of the one-thread-per-element forms.
pub const THREADS: u32 = 256;
/// Most blocks of a grid-stride kernel (more elements loop).
pub const MAX_BLOCKS: i64 = 1 << 16;
/// Output elements per thread of a vectorised [`Form::Elementwise`] kernel.
pub const VEC: i64 = 4;
/// Warps (output elements) per block of [`Form::WarpReduce`].
pub const WARPS: u32 = 4;

/// The form [`lower_program`] gives a kernel.
pub fn form_of(k: &loop_ir::Kernel) -> Form {
    if k.scan.is_some() {
        return Form::Scan;
    }
    match &k.reduce {
        None => Form::Elementwise,
        Some(_) if !k.computed_at().is_empty() => Form::Serial,
        Some(r) => match SymDim::product(&r.loops).as_int() {
            Some(n) if n < 32 => Form::Serial,
            _ => Form::WarpReduce,
        },
    }
}

/// The builder of one kernel: parameters, registers, loop-variable bindings.
struct Builder<'p> {
    p: &'p loop_ir::Program,
    k: dialect::Kernel,
    args: Vec<LaunchArg>,
    /// The pointer parameter of each buffer the kernel touches.
    buf_param: BTreeMap<BufId, ParamId>,
    /// The parameter of each symbol.
    sym_param: BTreeMap<String, ParamId>,
    /// `loop_ir` variable `i<k>` → its value.
    loop_vars: BTreeMap<u32, Expr>,
    /// The accumulator register, and the register of each computed-at reduce by id.
    acc: Option<RegId>,
    reduces: BTreeMap<u32, RegId>,
    /// Loads read from registers: vector registers (filled by one
    /// `LdGlobalVec` or `ld.shared.v4` per group of elements; read at
    /// `lane`, the element of the group being computed) or, when the flag
    /// is set, one register every element reads (a shared-row value the
    /// group does not index).
    vec_loads: Vec<(BufId, AffExpr, RegId, bool)>,
    lane: i64,
    /// Local temporaries of a register-row kernel held in registers: the
    /// array and, for a row, the index of the current group's first point
    /// (the element read is that plus [`Builder::lane`]); `None` for a
    /// value a row (element 0).
    row_regs: BTreeMap<BufId, (RegId, Option<Expr>)>,
}

fn ceil_div(a: Expr, b: Expr) -> Expr {
    (a + b.clone() - Expr::c(1)) / b
}

/// `floor(a / b)` for `b > 0`.
fn floor_div(a: Expr, b: Expr) -> Expr {
    if let Expr::Const(1) = b {
        return a;
    }
    Expr::bin(BinOp::FloorDiv, a, b)
}

/// `for (var = 0; var < n; var++)`, unrolled (`#pragma unroll`: register
/// indices may use `var`).
fn unrolled(var: VarId, n: i64, body: Vec<Stmt>) -> Stmt {
    Stmt::For { var, start: Expr::c(0), end: Expr::c(n), step: 1, unroll: true, body }
}

/// The five `shfl.sync.bfly` steps (lane masks 16, 8, 4, 2, 1) that leave
/// a warp's `op` of `acc` in every lane.
fn butterfly(op: crate::tiny::ReduceOp, dtype: DType, acc: &RegRef) -> Vec<Stmt> {
    [16, 8, 4, 2, 1].map(|m| Stmt::Simt(SimtStmt::ShflBfly { op, dtype, acc: acc.clone(), lane_mask: m })).to_vec()
}

/// Warp `warp`'s slot of a [`Builder::warp_totals`] buffer.
fn warp_total_at(smem: SmemId, dtype: DType, warp: Expr) -> SmemRef {
    SmemRef { buf: smem, offset: warp * Expr::c(dtype.size_bytes() as i64), swizzle: Swizzle::IDENTITY }
}

/// Lane 0 of each warp (`threadIdx.y`) stores its total `acc` in the
/// warp's slot of `smem` ([`Builder::warp_totals`]).
fn keep_warp_total(smem: SmemId, dtype: DType, acc: &RegRef) -> Stmt {
    let keep = Stmt::Mma(MmaStmt::StShared {
        dst: warp_total_at(smem, dtype, Expr::ThreadIdx(Dim::Y)),
        src: vec![acc.clone()],
        dtype,
    });
    Stmt::If { cond: Expr::ThreadIdx(Dim::X).eq(Expr::c(0)), then: vec![keep], otherwise: vec![] }
}

fn product(es: Vec<Expr>) -> Expr {
    es.into_iter().reduce(|a, b| a * b).unwrap_or(Expr::c(1))
}

impl<'p> Builder<'p> {
    fn new(p: &'p loop_ir::Program, lk: &loop_ir::Kernel) -> Builder<'p> {
        Builder::with_buffers(p, &format!("{}_{}", p.name, lk.name), &lk.reads(), &[lk.out])
    }

    /// A kernel named `name` with a `const` pointer parameter per buffer of
    /// `reads` that it does not write, then a writable one per buffer of
    /// `writes`, then the symbols.
    fn with_buffers(p: &'p loop_ir::Program, name: &str, reads: &[BufId], writes: &[BufId]) -> Builder<'p> {
        let mut k = dialect::Kernel::empty(name, Arch::Sm80);
        let mut args = Vec::new();
        let mut buf_param = BTreeMap::new();
        let params = reads.iter().filter(|b| !writes.contains(b)).map(|&b| (b, false));
        for (b, writable) in params.chain(writes.iter().map(|&b| (b, true))) {
            let buf = p.buffer(b);
            buf_param.insert(b, ParamId(k.params.len() as u32));
            k.params.push(Param { name: buf.name.clone(), kind: ParamKind::Ptr { dtype: buf.dtype, writable } });
            args.push(LaunchArg::Buffer(b));
        }
        let mut sym_param = BTreeMap::new();
        for (j, s) in p.symbols.iter().enumerate() {
            sym_param.insert(s.clone(), ParamId(k.params.len() as u32));
            k.params.push(Param { name: s.clone(), kind: ParamKind::I64 });
            args.push(LaunchArg::Dim(j));
        }
        Builder {
            p,
            k,
            args,
            buf_param,
            sym_param,
            loop_vars: BTreeMap::new(),
            acc: None,
            reduces: BTreeMap::new(),
            vec_loads: Vec::new(),
            lane: 0,
            row_regs: BTreeMap::new(),
        }
    }

    fn var(&mut self, name: &str) -> VarId {
        self.k.vars.push(name.to_string());
        VarId(self.k.vars.len() as u32 - 1)
    }

    /// A one-element register array named `name`, or `name` and its index
    /// when the kernel has one of that name (a [`Form::Rows`] kernel's
    /// second accumulator).
    fn reg(&mut self, name: &str, dtype: DType) -> RegRef {
        let taken = self.k.regs.iter().any(|r| r.name == name);
        let name = if taken { format!("{name}{}", self.k.regs.len()) } else { name.to_string() };
        self.k.regs.push(RegArray { name, kind: compute_kind(dtype), len: 1 });
        RegRef { reg: RegId(self.k.regs.len() as u32 - 1), index: Expr::c(0) }
    }

    fn dim(&self, d: &SymDim) -> DResult<Expr> {
        let mut terms = Vec::new();
        for (atoms, c) in d.monomials() {
            let mut t = Expr::c(c);
            for a in atoms {
                let f = match a {
                    Atom::Sym(s) => Expr::Param(
                        *self.sym_param.get(s).ok_or_else(|| diag!(Internal, "symbol `{s}` is not a program dim"))?,
                    ),
                    Atom::FloorDiv(n, q) => floor_div(self.dim(n)?, self.dim(q)?),
                };
                t = if matches!(t, Expr::Const(1)) { f } else { t * f };
            }
            terms.push(t);
        }
        Ok(terms.into_iter().reduce(|a, b| a + b).unwrap_or(Expr::c(0)))
    }

    fn aff(&self, e: &AffExpr) -> DResult<Expr> {
        let mut out = self.dim(e.constant_part())?;
        for (atom, c) in e.terms() {
            let x = match atom {
                AffAtom::Var(v) => {
                    self.loop_vars.get(v).cloned().ok_or_else(|| diag!(Internal, "loop variable i{v} is not bound"))?
                }
                AffAtom::FloorDiv(inner, q) => floor_div(self.aff(inner)?, self.dim(q)?),
            };
            let c = self.dim(c)?;
            let term = if matches!(c, Expr::Const(1)) { x } else { c * x };
            out = if matches!(out, Expr::Const(0)) { term } else { out + term };
        }
        Ok(out)
    }

    /// The accumulator register.
    fn acc_ref(&self) -> DResult<RegRef> {
        let reg = self.acc.ok_or_else(|| diag!(Internal, "a reduction with no accumulator register"))?;
        Ok(RegRef { reg, index: Expr::c(0) })
    }

    /// The register of a load read from one, if it is, and whether every
    /// element reads its element 0.
    fn vec_load(&self, buf: BufId, index: &AffExpr) -> Option<(RegId, bool)> {
        self.vec_loads.iter().find(|(b, i, _, _)| *b == buf && i == index).map(|x| (x.2, x.3))
    }

    fn scalar(&self, e: &loop_ir::Expr) -> DResult<ScalarExpr> {
        use loop_ir::Expr as L;
        let b = |e: &loop_ir::Expr| self.scalar(e).map(Box::new);
        Ok(match e {
            L::Load { buf, dtype, .. } if self.row_regs.contains_key(buf) => {
                let (reg, at) = &self.row_regs[buf];
                let index = at.clone().map_or(Expr::c(0), |a| a + Expr::c(self.lane));
                ScalarExpr::Reg { reg: RegRef { reg: *reg, index }, dtype: *dtype }
            }
            L::Load { buf, index, dtype } => match self.vec_load(*buf, index) {
                Some((reg, one)) => {
                    let index = Expr::c(if one { 0 } else { self.lane });
                    ScalarExpr::Reg { reg: RegRef { reg, index }, dtype: *dtype }
                }
                None => ScalarExpr::Load {
                    src: GlobalRef { param: self.param_of(*buf)?, offset: self.aff(index)? },
                    dtype: *dtype,
                },
            },
            L::Gather { buf, base, stride, extent, at, dtype } => ScalarExpr::Gather {
                src: GlobalRef { param: self.param_of(*buf)?, offset: self.aff(base)? },
                stride: self.aff(stride)?,
                extent: self.aff(extent)?,
                at: b(at)?,
                dtype: *dtype,
            },
            L::Const { value, dtype } => ScalarExpr::Const { value: *value, dtype: *dtype },
            L::Acc { dtype } => ScalarExpr::Reg {
                reg: RegRef {
                    reg: self.acc.ok_or_else(|| diag!(Internal, "an accumulator read with no reduction"))?,
                    index: Expr::c(0),
                },
                dtype: *dtype,
            },
            L::Reduce { id, dtype, .. } => ScalarExpr::Reg {
                reg: RegRef {
                    reg: *self
                        .reduces
                        .get(id)
                        .ok_or_else(|| diag!(Internal, "computed-at reduce {id} has no register"))?,
                    index: Expr::c(0),
                },
                dtype: *dtype,
            },
            L::Unary { op, x } => ScalarExpr::Unary { op: *op, x: b(x)? },
            L::Binary { op, a, b: y } => ScalarExpr::Binary { op: *op, a: b(a)?, b: b(y)? },
            L::Cast { to, x } => ScalarExpr::Cast { to: *to, x: b(x)? },
            L::Where { cond, a, b: y } => ScalarExpr::Where { cond: b(cond)?, a: b(a)?, b: b(y)? },
            L::Select { valid, then, otherwise } => {
                let mut cond: Option<Expr> = None;
                for c in valid {
                    let t = Expr::c(0).le(self.aff(&c.expr)?);
                    cond = Some(match cond {
                        None => t,
                        Some(x) => x.and(t),
                    });
                }
                ScalarExpr::Select { cond: cond.unwrap_or(Expr::c(1)), then: b(then)?, otherwise: b(otherwise)? }
            }
        })
    }

    /// `Let`s binding loop variables `first..first + extents.len()` to the
    /// row-major multi-index of `flat` over `extents`.
    fn unflatten(&mut self, flat: Expr, first: u32, extents: &[SymDim], out: &mut Vec<Stmt>) -> DResult<()> {
        let vars: Vec<u32> = (0..extents.len() as u32).map(|j| first + j).collect();
        self.unflatten_vars(flat, &vars, extents, out)
    }

    /// [`Builder::unflatten`] binding the loop variables `vars` (one per
    /// extent, outermost first).
    fn unflatten_vars(&mut self, flat: Expr, vars: &[u32], extents: &[SymDim], out: &mut Vec<Stmt>) -> DResult<()> {
        let mut rest = flat;
        for (j, e) in extents.iter().enumerate().rev() {
            let v = vars[j];
            let var = self.var(&format!("i{v}"));
            let value = if j == 0 { rest.clone() } else { rest.clone() % self.dim(e)? };
            out.push(Stmt::Let { var, value });
            self.loop_vars.insert(v, Expr::Var(var));
            if j > 0 {
                let q = self.var(&format!("q{v}"));
                out.push(Stmt::Let { var: q, value: rest / self.dim(e)? });
                rest = Expr::Var(q);
            }
        }
        Ok(())
    }

    /// Nested serial loops over `extents` binding variables `first..`,
    /// around `inner`.
    fn serial_loops(
        &mut self,
        first: u32,
        extents: &[SymDim],
        inner: &mut dyn FnMut(&mut Builder<'p>) -> DResult<Vec<Stmt>>,
    ) -> DResult<Vec<Stmt>> {
        let mut vars = Vec::new();
        for j in 0..extents.len() {
            let v = first + j as u32;
            let var = self.var(&format!("i{v}"));
            self.loop_vars.insert(v, Expr::Var(var));
            vars.push(var);
        }
        let mut body = inner(self)?;
        for (j, e) in extents.iter().enumerate().rev() {
            body = vec![Stmt::For { var: vars[j], start: Expr::c(0), end: self.dim(e)?, step: 1, unroll: false, body }];
        }
        Ok(body)
    }

    /// One reduction step at the current reduce point: the computed-at
    /// reduces under their guards, then the accumulator's update.
    fn update(&mut self, lk: &loop_ir::Kernel) -> DResult<Vec<Stmt>> {
        let Some(r) = &lk.reduce else { return Ok(Vec::new()) };
        let mut out = Vec::new();
        for e in lk.computed_at() {
            let loop_ir::Expr::Reduce { id, op, dtype, first, loops, guard, value, .. } = e else { continue };
            let reg = RegRef { reg: self.reduces[id], index: Expr::c(0) };
            let mut body =
                vec![Stmt::Simt(SimtStmt::Compute { dst: reg.clone(), value: ScalarExpr::identity(*op, *dtype) })];
            let (op, dtype) = (*op, *dtype);
            body.extend(self.serial_loops(*first, loops, &mut |b| {
                Ok(vec![Stmt::Simt(SimtStmt::Accumulate { op, dtype, acc: reg.clone(), value: b.scalar(value)? })])
            })?);
            if guard.is_empty() {
                out.extend(body);
            } else {
                let mut cond: Option<Expr> = None;
                for c in guard {
                    let t = Expr::c(0).le(self.aff(&c.expr)?);
                    cond = Some(match cond {
                        None => t,
                        Some(x) => x.and(t),
                    });
                }
                out.push(Stmt::If { cond: cond.unwrap_or(Expr::c(1)), then: body, otherwise: Vec::new() });
            }
        }
        let acc = self.acc_ref()?;
        out.push(Stmt::Simt(SimtStmt::Accumulate { op: r.op, dtype: r.dtype, acc, value: self.scalar(&r.value)? }));
        Ok(out)
    }

    /// Elements `base..base + vec` of the flattened output (row-major, as
    /// the store subscript): each computed where it is below `total`, then
    /// one `st.global.v{vec}` when all are (the address is `vec` elements
    /// from a 256-byte aligned base, so aligned to the access), else one
    /// `st.global` each.
    fn vector_point(&mut self, lk: &loop_ir::Kernel, base: Expr, vec: i64, total: &Expr) -> DResult<Vec<Stmt>> {
        let dtype = self.p.buffer(lk.out).dtype;
        self.k.regs.push(RegArray { name: "v".into(), kind: compute_kind(dtype), len: vec as u32 });
        let v = RegId(self.k.regs.len() as u32 - 1);
        let param = self.buf_param[&lk.out];
        let b0 = self.var("base");
        let mut out = vec![Stmt::Let { var: b0, value: base }];
        let last = lk.loops.len().checked_sub(1);
        let rows_of_vec = lk.loops.last().and_then(|d| d.as_int()).is_some_and(|e| e % vec == 0);
        if let (Some(last), true) = (last, rows_of_vec) {
            // Every group lies in one row: one multi-index, the innermost
            // index stepping by one per element, and 4-wide loads.
            self.unflatten(Expr::Var(b0), 0, &lk.loops, &mut out)?;
            let first = self.loop_vars[&(last as u32)].clone();
            out.extend(self.vector_loads_of(&lk.value, last as u32, vec, &BTreeMap::new())?);
            out.extend(self.per_element(last as u32, first, vec, |b, u| {
                Ok(Stmt::Simt(SimtStmt::Compute {
                    dst: RegRef { reg: v, index: Expr::c(u) },
                    value: b.scalar(&lk.value)?,
                }))
            })?);
            out.push(Stmt::Mma(MmaStmt::StGlobalVec {
                dst: GlobalRef { param, offset: Expr::Var(b0) },
                src: (0..vec).map(|u| RegRef { reg: v, index: Expr::c(u) }).collect(),
                dtype,
                pred: Expr::c(1),
            }));
            return Ok(out);
        }
        let mut tail = Vec::new();
        for u in 0..vec {
            let e = self.var(&format!("e{u}"));
            out.push(Stmt::Let { var: e, value: Expr::Var(b0) + Expr::c(u) });
            let mut body = Vec::new();
            self.unflatten(Expr::Var(e), 0, &lk.loops, &mut body)?;
            let reg = RegRef { reg: v, index: Expr::c(u) };
            body.push(Stmt::Simt(SimtStmt::Compute { dst: reg.clone(), value: self.scalar(&lk.value)? }));
            out.push(Stmt::If { cond: Expr::Var(e).lt(total.clone()), then: body, otherwise: Vec::new() });
            tail.push(Stmt::Simt(SimtStmt::StGlobal {
                dst: GlobalRef { param, offset: Expr::Var(e) },
                src: reg,
                dtype,
                pred: Expr::Var(e).lt(total.clone()),
            }));
        }
        let full = Stmt::Mma(MmaStmt::StGlobalVec {
            dst: GlobalRef { param, offset: Expr::Var(b0) },
            src: (0..vec).map(|u| RegRef { reg: v, index: Expr::c(u) }).collect(),
            dtype,
            pred: Expr::c(1),
        });
        out.push(Stmt::If {
            cond: (Expr::Var(b0) + Expr::c(vec)).le(total.clone()),
            then: vec![full],
            otherwise: tail,
        });
        Ok(out)
    }

    /// A warp's reduction of `lk` at the current output point, leaving the
    /// total in every lane's accumulator ([`Builder::acc`]): the identity,
    /// lane `l` accumulating the flattened reduce points `l, l + 32, …`
    /// (loads of `smem_of` buffers from shared memory), or [`VEC`] at a
    /// time where [`Builder::vector_reduction_step`] applies, then five
    /// `shfl.sync.bfly` steps (lane masks 16, 8, 4, 2, 1).
    fn warp_reduction(
        &mut self,
        lk: &loop_ir::Kernel,
        smem_of: &BTreeMap<BufId, SmemId>,
        out: &mut Vec<Stmt>,
    ) -> DResult<()> {
        let r = lk.reduce.as_ref().ok_or_else(|| diag!(Internal, "a warp reduction without a reduction"))?;
        let acc = self.acc_ref()?;
        out.push(Stmt::Simt(SimtStmt::Compute { dst: acc.clone(), value: ScalarExpr::identity(r.op, r.dtype) }));
        let red = product(r.loops.iter().map(|d| self.dim(d)).collect::<DResult<Vec<_>>>()?);
        if let Some((j, step)) = self.vector_reduction_step(lk, smem_of)? {
            let start = Expr::ThreadIdx(Dim::X) * Expr::c(VEC);
            out.push(Stmt::For { var: j, start, end: red, step: 32 * VEC, unroll: false, body: step });
        } else {
            let j = self.var("j");
            let mut step = Vec::new();
            self.unflatten(Expr::Var(j), lk.loops.len() as u32, &r.loops, &mut step)?;
            self.shared_loads(&r.value, smem_of, &mut step)?;
            step.extend(self.update(lk)?);
            self.vec_loads.clear();
            out.push(Stmt::For {
                var: j,
                start: Expr::ThreadIdx(Dim::X),
                end: red,
                step: 32,
                unroll: false,
                body: step,
            });
        }
        out.extend(butterfly(r.op, r.dtype, &acc));
        Ok(())
    }

    /// One `ld.shared` of element `index` of `buf`'s row (a [`Form::Rows`]
    /// local row in `smem_of`) into a register of its own, registered in
    /// [`Builder::vec_loads`] for every element to read.
    fn shared_scalar_load(
        &mut self,
        buf: BufId,
        index: AffExpr,
        dtype: DType,
        smem_of: &BTreeMap<BufId, SmemId>,
    ) -> DResult<Stmt> {
        let smem = *smem_of.get(&buf).ok_or_else(|| diag!(Internal, "buffer {} has no shared row", buf.0))?;
        let reg = self.reg("l", dtype);
        let offset = self.aff(&crate::cpu::rows::row_subscript(&index))? * Expr::c(dtype.size_bytes() as i64);
        self.vec_loads.push((buf, index, reg.reg, true));
        Ok(Stmt::Mma(MmaStmt::LdShared {
            dst: vec![reg],
            src: SmemRef { buf: smem, offset, swizzle: Swizzle::IDENTITY },
            dtype,
        }))
    }

    /// The body of a vectorised warp reduction step, with its loop
    /// variable `j` (lane `l` takes the reduce points `VEC·l + 32·VEC·t …`,
    /// [`VEC`] at a time): each load contiguous along the one reduce loop
    /// ([`vector_loads`]) is one `ld.global.v4` or, from a shared row,
    /// `ld.shared.v4`, then the [`VEC`] updates in order. `None` (the
    /// scalar step) unless the reduction has one loop of a constant extent
    /// that [`VEC`] divides, nothing computed at its reads, at least one
    /// such load, and every shared-row load among them.
    fn vector_reduction_step(
        &mut self,
        lk: &loop_ir::Kernel,
        smem_of: &BTreeMap<BufId, SmemId>,
    ) -> DResult<Option<(VarId, Vec<Stmt>)>> {
        let Some(r) = &lk.reduce else { return Ok(None) };
        let var = lk.loops.len() as u32;
        let whole = matches!(r.loops.as_slice(), [d] if d.as_int().is_some_and(|e| e % VEC == 0));
        if !whole || !lk.computed_at().is_empty() {
            return Ok(None);
        }
        let mut loads = Vec::new();
        vector_loads(&r.value, var, VEC, false, &mut loads);
        if loads.is_empty() || scalar_shared_loads(&r.value, var, &loads, smem_of) {
            return Ok(None);
        }
        let j = self.var("j");
        self.loop_vars.insert(var, Expr::Var(j));
        let mut body = self.vector_loads_of(&r.value, var, VEC, smem_of)?;
        let acc = self.acc_ref()?;
        body.extend(self.per_element(var, Expr::Var(j), VEC, |b, _| {
            Ok(Stmt::Simt(SimtStmt::Accumulate {
                op: r.op,
                dtype: r.dtype,
                acc: acc.clone(),
                value: b.scalar(&r.value)?,
            }))
        })?);
        Ok(Some((j, body)))
    }

    /// `ld.shared` of every load of `e` from a buffer of `smem_of` (a
    /// [`Form::Rows`] kernel's local rows) into a register of its own, which
    /// [`Builder::scalar`] then reads ([`Builder::vec_loads`], lane 0).
    fn shared_loads(
        &mut self,
        e: &loop_ir::Expr,
        smem_of: &BTreeMap<BufId, SmemId>,
        out: &mut Vec<Stmt>,
    ) -> DResult<()> {
        let mut loads = Vec::new();
        e.walk(&mut |x| {
            if let loop_ir::Expr::Load { buf, index, dtype } = x {
                if smem_of.contains_key(buf) && !loads.iter().any(|(b, i, _)| b == buf && i == index) {
                    loads.push((*buf, index.clone(), *dtype));
                }
            }
        });
        self.lane = 0;
        for (buf, index, dtype) in loads {
            out.push(self.shared_scalar_load(buf, index, dtype, smem_of)?);
        }
        Ok(())
    }

    /// The value's computation and store at the current output point.
    fn store(&mut self, lk: &loop_ir::Kernel) -> DResult<Vec<Stmt>> {
        self.store_in(lk, &BTreeMap::new())
    }

    /// [`Builder::store`], into the row of a local buffer in shared memory
    /// when `smem_of` holds the output (a [`Form::Rows`] kernel).
    fn store_in(&mut self, lk: &loop_ir::Kernel, smem_of: &BTreeMap<BufId, SmemId>) -> DResult<Vec<Stmt>> {
        let v = self.reg("v", self.p.buffer(lk.out).dtype);
        let mut out = vec![Stmt::Simt(SimtStmt::Compute { dst: v.clone(), value: self.scalar(&lk.value)? })];
        out.push(self.store_reg(lk, v, smem_of)?);
        Ok(out)
    }

    /// `f(element)` at each of the `vec` consecutive points `base, base + 1,
    /// …` of loop `var`, [`Builder::scalar`] reading element `u` of the
    /// vector loads [`Builder::vector_loads_of`] registered; then those
    /// registrations end.
    fn per_element(
        &mut self,
        var: u32,
        base: Expr,
        vec: i64,
        mut f: impl FnMut(&mut Self, i64) -> DResult<Stmt>,
    ) -> DResult<Vec<Stmt>> {
        let mut out = Vec::new();
        for u in 0..vec {
            self.loop_vars.insert(var, if u == 0 { base.clone() } else { base.clone() + Expr::c(u) });
            self.lane = u;
            out.push(f(self, u)?);
        }
        self.vec_loads.clear();
        self.lane = 0;
        Ok(out)
    }

    /// The buffer parameter of `buf`.
    fn param_of(&self, buf: BufId) -> DResult<ParamId> {
        self.buf_param.get(&buf).copied().ok_or_else(|| diag!(Internal, "buffer {} has no parameter", buf.0))
    }

    /// One `ld.global.v{vec}` (or, from a row in `smem_of`,
    /// `ld.shared.v{vec}`) of each load of `e` contiguous along loop `var`
    /// ([`vector_loads`]), at the current loop variables (`var` at a
    /// multiple of `vec`), registered in [`Builder::vec_loads`] for
    /// [`Builder::scalar`] ([`Builder::per_element`] reads them).
    fn vector_loads_of(
        &mut self,
        e: &loop_ir::Expr,
        var: u32,
        vec: i64,
        smem_of: &BTreeMap<BufId, SmemId>,
    ) -> DResult<Vec<Stmt>> {
        let mut loads = Vec::new();
        vector_loads(e, var, vec, false, &mut loads);
        loads.retain(|(b, _, _)| !self.row_regs.contains_key(b));
        let mut out = Vec::new();
        for (n, (buf, index, dtype)) in loads.into_iter().enumerate() {
            self.k.regs.push(RegArray { name: format!("x{n}"), kind: compute_kind(dtype), len: vec as u32 });
            let reg = RegId(self.k.regs.len() as u32 - 1);
            let dst: Vec<RegRef> = (0..vec).map(|u| RegRef { reg, index: Expr::c(u) }).collect();
            out.push(match smem_of.get(&buf) {
                Some(&smem) => {
                    let at = self.aff(&crate::cpu::rows::row_subscript(&index))?;
                    let offset = at * Expr::c(dtype.size_bytes() as i64);
                    Stmt::Mma(MmaStmt::LdShared {
                        dst,
                        src: SmemRef { buf: smem, offset, swizzle: Swizzle::IDENTITY },
                        dtype,
                    })
                }
                None => Stmt::Simt(SimtStmt::LdGlobalVec {
                    dst,
                    src: GlobalRef { param: self.param_of(buf)?, offset: self.aff(&index)? },
                    dtype,
                    pred: Expr::c(1),
                }),
            });
            self.vec_loads.push((buf, index, reg, false));
        }
        // Shared-row values the group does not index: one scalar load.
        let mut one = Vec::new();
        e.walk(&mut |x| {
            if let loop_ir::Expr::Load { buf, index, dtype } = x {
                let fresh = !self.vec_loads.iter().any(|(b, i, _, _)| b == buf && i == index)
                    && !one.iter().any(|(b, i, _)| b == buf && i == index);
                if smem_of.contains_key(buf) && !index.var_coeffs().any(|(k, _)| k == var) && fresh {
                    one.push((*buf, index.clone(), *dtype));
                }
            }
        });
        for (buf, index, dtype) in one {
            out.push(self.shared_scalar_load(buf, index, dtype, smem_of)?);
        }
        Ok(out)
    }
}

/// Whether an element-wise kernel computes [`VEC`] elements per thread and
/// stores them with one vector store: a float output stored row-major by
/// the output loops (so the store subscript is the flat index), and a
/// value with no IEEE division or square root (`FDIV`, `RECIP`, `SQRT`,
/// `RSQRT`: their round-to-nearest slow paths are subroutine calls in SASS,
/// and the results already computed would spill across them — ptxas
/// reports it).
pub fn vectorisable(lk: &loop_ir::Kernel, out: &Buffer) -> bool {
    use crate::tiny::{BinaryOp, UnaryOp};
    let mut calls = false;
    lk.value.walk(&mut |e| {
        calls |= matches!(
            e,
            loop_ir::Expr::Binary { op: BinaryOp::Fdiv, .. }
                | loop_ir::Expr::Unary { op: UnaryOp::Recip | UnaryOp::Sqrt | UnaryOp::Rsqrt, .. }
        )
    });
    lk.reduce.is_none() && out.dtype.is_float() && lk.loops == out.shape && !calls
}

/// Whether `e` reads a row in `smem_of` along loop `var` other than
/// through one of `loads` (the contiguous ones): such a load has no vector
/// form.
fn scalar_shared_loads(
    e: &loop_ir::Expr,
    var: u32,
    loads: &[(BufId, AffExpr, DType)],
    smem_of: &BTreeMap<BufId, SmemId>,
) -> bool {
    let mut scalar = false;
    e.walk(&mut |x| {
        if let loop_ir::Expr::Load { buf, index, .. } = x {
            scalar |= smem_of.contains_key(buf)
                && index.var_coeffs().any(|(k, _)| k == var)
                && !loads.iter().any(|(b, i, _)| b == buf && i == index);
        }
    });
    scalar
}

/// Whether subscript `index` is `i{var} + vec·(…)` with constant
/// coefficients: contiguous along loop `var` and, where `i{var} ≡ 0 mod
/// vec`, aligned to `vec` elements.
fn contiguous(index: &AffExpr, var: u32, vec: i64) -> bool {
    let plain = index.terms().all(|(a, _)| matches!(a, AffAtom::Var(_)));
    let coeffs_ok = index.var_coeffs().all(|(k, c)| match c.as_int() {
        Some(c) if k == var => c == 1,
        Some(c) => c % vec == 0,
        None => false,
    });
    let has_var = index.var_coeffs().any(|(k, _)| k == var);
    plain && coeffs_ok && has_var && index.constant_part().as_int().is_some_and(|c| c % vec == 0)
}

/// The distinct loads of `e` (not under a `PAD` guard, of a float or i32
/// dtype) whose subscript is `i{last} + 4·(…)` with constant coefficients:
/// contiguous along the innermost output index and, at the first element of
/// a group (`i{last} ≡ 0 mod vec`), aligned to `vec` elements.
fn vector_loads(e: &loop_ir::Expr, last: u32, vec: i64, guarded: bool, out: &mut Vec<(BufId, AffExpr, DType)>) {
    use loop_ir::Expr as L;
    match e {
        L::Load { buf, index, dtype } => {
            let kind_ok = matches!(dtype, DType::F32 | DType::F16 | DType::BF16 | DType::I32);
            if !guarded
                && contiguous(index, last, vec)
                && kind_ok
                && !out.iter().any(|(b, i, _)| b == buf && i == index)
            {
                out.push((*buf, index.clone(), *dtype));
            }
        }
        L::Const { .. } | L::Acc { .. } | L::Reduce { .. } => {}
        // The gathered element is read by itself; its position may come
        // from vector loads.
        L::Unary { x, .. } | L::Cast { x, .. } | L::Gather { at: x, .. } => vector_loads(x, last, vec, guarded, out),
        L::Binary { a, b, .. } => {
            vector_loads(a, last, vec, guarded, out);
            vector_loads(b, last, vec, guarded, out);
        }
        L::Where { cond, a, b } => {
            for x in [cond, a, b] {
                vector_loads(x, last, vec, guarded, out);
            }
        }
        L::Select { then, otherwise, .. } => {
            vector_loads(then, last, vec, true, out);
            vector_loads(otherwise, last, vec, true, out);
        }
    }
}

/// One `loop_ir` kernel as a SIMT kernel.
fn lower_kernel(p: &loop_ir::Program, lk: &loop_ir::Kernel) -> DResult<Launch> {
    if !lk.strips.is_empty() {
        return Err(diag!(Internal, "the SIMT template takes kernels without strip-mining"));
    }
    let form = form_of(lk);
    let mut b = Builder::new(p, lk);
    if let Some(r) = &lk.reduce {
        let acc = b.reg("acc", r.dtype);
        b.acc = Some(acc.reg);
        for e in lk.computed_at() {
            if let loop_ir::Expr::Reduce { id, dtype, .. } = e {
                let reg = b.reg(&format!("r{id}"), *dtype);
                b.reduces.insert(*id, reg.reg);
            }
        }
    }
    let rank = lk.loops.len() as u32;
    let total = product(lk.loops.iter().map(|d| b.dim(d)).collect::<DResult<Vec<_>>>()?);
    let body = match form {
        Form::Gemm | Form::Attention | Form::Rows | Form::WinogradTransform => {
            return Err(diag!(Internal, "form_of never chooses {form:?}"))
        }
        Form::Scan => return Err(diag!(Internal, "a scan is lowered by lower_scan")),
        Form::Elementwise | Form::Serial => {
            let out = p.buffer(lk.out);
            let vec = if vectorisable(lk, out) { VEC } else { 1 };
            let threads = Expr::c(THREADS as i64);
            let items = ceil_div(total.clone(), Expr::c(vec));
            let blocks = ceil_div(items.clone(), threads.clone()).min(MAX_BLOCKS);
            b.k.block = [THREADS, 1, 1];
            b.k.min_blocks_per_sm = Some(1);
            b.k.grid = [blocks.clone(), Expr::c(1), Expr::c(1)];
            let nblk = b.var("nblocks");
            let it = b.var("it");
            let flat = b.var("flat");
            let mut point = Vec::new();
            if vec == 1 {
                b.unflatten(Expr::Var(flat), 0, &lk.loops, &mut point)?;
                if let Some(r) = &lk.reduce {
                    let acc = b.acc_ref()?;
                    point.push(Stmt::Simt(SimtStmt::Compute { dst: acc, value: ScalarExpr::identity(r.op, r.dtype) }));
                    point.extend(b.serial_loops(rank, &r.loops, &mut |b| b.update(lk))?);
                }
                point.extend(b.store(lk)?);
            } else {
                point.extend(b.vector_point(lk, Expr::Var(flat) * Expr::c(vec), vec, &total)?);
            }
            let first =
                (Expr::Var(it) * Expr::Var(nblk) + Expr::BlockIdx(Dim::X)) * threads.clone() + Expr::ThreadIdx(Dim::X);
            vec![
                Stmt::Let { var: nblk, value: blocks },
                Stmt::For {
                    var: it,
                    start: Expr::c(0),
                    end: ceil_div(items.clone(), Expr::Var(nblk) * threads),
                    step: 1,
                    unroll: false,
                    body: vec![
                        Stmt::Let { var: flat, value: first },
                        Stmt::If { cond: Expr::Var(flat).lt(items), then: point, otherwise: Vec::new() },
                    ],
                },
            ]
        }
        Form::WarpReduce => {
            b.k.block = [32, WARPS, 1];
            b.k.min_blocks_per_sm = Some(1);
            b.k.grid = [ceil_div(total.clone(), Expr::c(WARPS as i64)), Expr::c(1), Expr::c(1)];
            let row = b.var("row");
            let mut point = Vec::new();
            b.unflatten(Expr::Var(row), 0, &lk.loops, &mut point)?;
            b.warp_reduction(lk, &BTreeMap::new(), &mut point)?;
            let store = b.store(lk)?;
            point.push(Stmt::If { cond: Expr::ThreadIdx(Dim::X).eq(Expr::c(0)), then: store, otherwise: Vec::new() });
            vec![
                Stmt::Let { var: row, value: Expr::BlockIdx(Dim::X) * Expr::c(WARPS as i64) + Expr::ThreadIdx(Dim::Y) },
                Stmt::If { cond: Expr::Var(row).lt(total), then: point, otherwise: Vec::new() },
            ]
        }
    };
    b.k.body = body;
    Ok(Launch { kernel: b.k, form, args: b.args, region: lk.nodes.clone(), outs: vec![lk.out], plan: None })
}

pub mod rows;
pub mod scan;

#[cfg(test)]
pub(super) mod tests;

//! The text form of the GPU dialect IR: `Display` for [`Kernel`], one
//! line per statement prefixed by its pre-order id `sN` (the ids verifier
//! and emulator errors name), expressions in C syntax with the kernel's
//! names, shared addresses as `buf[offset]@swizzle`, registers as
//! `array[index]`. Vector accesses print their element count
//! (`st.global.v8.f16` is 16 bytes).

use std::fmt;

use super::ir::*;
use super::kernel::*;
use super::stmt::*;

/// Prints expressions with the kernel's names.
pub struct ExprText<'a> {
    pub kernel: &'a Kernel,
    pub expr: &'a Expr,
}

impl fmt::Display for ExprText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_expr(f, self.kernel, self.expr)
    }
}

fn name_or(names: Option<&str>, prefix: &str, i: u32) -> String {
    names.map(str::to_string).unwrap_or_else(|| format!("{prefix}{i}"))
}

fn write_expr(f: &mut fmt::Formatter<'_>, k: &Kernel, e: &Expr) -> fmt::Result {
    match e {
        Expr::Const(v) => write!(f, "{v}"),
        Expr::Param(p) => f.write_str(&name_or(k.params.get(p.0 as usize).map(|p| p.name.as_str()), "p", p.0)),
        Expr::Var(v) => f.write_str(&name_or(k.vars.get(v.0 as usize).map(|s| s.as_str()), "v", v.0)),
        Expr::ThreadIdx(d) => write!(f, "threadIdx.{}", d.name()),
        Expr::BlockIdx(d) => write!(f, "blockIdx.{}", d.name()),
        Expr::GridDim(d) => write!(f, "gridDim.{}", d.name()),
        Expr::Bin(op @ (BinOp::Min | BinOp::Max | BinOp::FloorDiv), a, b) => {
            write!(f, "{}(", op.symbol())?;
            write_expr(f, k, a)?;
            f.write_str(", ")?;
            write_expr(f, k, b)?;
            f.write_str(")")
        }
        Expr::Bin(op, a, b) => {
            f.write_str("(")?;
            write_expr(f, k, a)?;
            write!(f, " {} ", op.symbol())?;
            write_expr(f, k, b)?;
            f.write_str(")")
        }
        Expr::Select(c, a, b) => {
            f.write_str("(")?;
            write_expr(f, k, c)?;
            f.write_str(" ? ")?;
            write_expr(f, k, a)?;
            f.write_str(" : ")?;
            write_expr(f, k, b)?;
            f.write_str(")")
        }
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "kernel {} arch={} grid=[{}]{} block={:?} smem={}B",
            self.name,
            self.arch.name(),
            self.grid_text(),
            if self.cluster > 1 { format!(" cluster={}", self.cluster) } else { String::new() },
            self.block,
            self.smem_bytes
        )?;
        for p in &self.params {
            match p.kind {
                ParamKind::Ptr { dtype, writable } => {
                    writeln!(f, "  param {}: {}{}*", p.name, if writable { "" } else { "const " }, dtype.dsl_name())?
                }
                ParamKind::I32 => writeln!(f, "  param {}: i32", p.name)?,
                ParamKind::I64 => writeln!(f, "  param {}: i64", p.name)?,
                ParamKind::TensorMap(m) => writeln!(
                    f,
                    "  param {}: tensor_map({}, dims=[{}, {}], row_stride={}, box=[{}, {}], swizzle={})",
                    p.name,
                    self.param_name(m.tensor),
                    self.param_name(m.dims[0]),
                    self.param_name(m.dims[1]),
                    self.param_name(m.row_stride),
                    m.box_dims[0],
                    m.box_dims[1],
                    m.swizzle
                )?,
            }
        }
        for b in &self.smem {
            writeln!(f, "  smem {}: [{}, {}) swizzle={}", b.name, b.offset, b.offset + b.size, b.swizzle)?;
        }
        for r in &self.regs {
            let kind = match r.kind {
                RegKind::F32 => "f32",
                RegKind::B16x2 => "b32",
                RegKind::I32 => "s32",
            };
            writeln!(f, "  reg {}: {kind}[{}]", r.name, r.len)?;
        }
        let mut next = 0;
        self.write_body(f, &self.body, 1, &mut next)
    }
}

impl Kernel {
    fn grid_text(&self) -> String {
        self.grid.iter().map(|e| self.expr(e).to_string()).collect::<Vec<_>>().join(", ")
    }

    /// `e` printed with this kernel's names.
    pub fn expr<'a>(&'a self, e: &'a Expr) -> ExprText<'a> {
        ExprText { kernel: self, expr: e }
    }

    fn reg_text(&self, r: &RegRef) -> String {
        let name = name_or(self.regs.get(r.reg.0 as usize).map(|a| a.name.as_str()), "r", r.reg.0);
        format!("{name}[{}]", self.expr(&r.index))
    }

    fn regs_text(&self, rs: &[RegRef]) -> String {
        format!("{{{}}}", rs.iter().map(|r| self.reg_text(r)).collect::<Vec<_>>().join(", "))
    }

    fn smem_text(&self, s: &SmemRef) -> String {
        let name = name_or(self.smem.get(s.buf.0 as usize).map(|b| b.name.as_str()), "smem", s.buf.0);
        format!("{name}[{}]@{}", self.expr(&s.offset), s.swizzle)
    }

    fn desc_text(&self, d: &MatrixDesc) -> String {
        format!("desc({}, lbo={}, sbo={})", self.smem_text(&d.start), d.lbo, d.sbo)
    }

    fn global_text(&self, g: &GlobalRef) -> String {
        let name = name_or(self.params.get(g.param.0 as usize).map(|p| p.name.as_str()), "p", g.param.0);
        format!("{name}[{}]", self.expr(&g.offset))
    }

    /// A [`ScalarExpr`] in prefix form: `add.f32(ld.f16 x[i], 1.0:f32)`.
    fn scalar_text(&self, e: &ScalarExpr) -> String {
        match e {
            ScalarExpr::Load { src, dtype } => format!("ld.{} {}", dtype.dsl_name(), self.global_text(src)),
            ScalarExpr::Gather { src, stride, extent, at, dtype } => format!(
                "gather.{} {} + {}·at({}, {})",
                dtype.dsl_name(),
                self.global_text(src),
                self.expr(stride),
                self.scalar_text(at),
                self.expr(extent)
            ),
            ScalarExpr::Const { value, dtype } => format!("{value:?}:{}", dtype.dsl_name()),
            ScalarExpr::Reg { reg, dtype } => format!("{}:{}", self.reg_text(reg), dtype.dsl_name()),
            ScalarExpr::Unary { op, x } => format!("{}({})", format!("{op:?}").to_lowercase(), self.scalar_text(x)),
            ScalarExpr::Binary { op, a, b } => {
                format!("{}({}, {})", format!("{op:?}").to_lowercase(), self.scalar_text(a), self.scalar_text(b))
            }
            ScalarExpr::Cast { to, x } => format!("cast.{}({})", to.dsl_name(), self.scalar_text(x)),
            ScalarExpr::Where { cond, a, b } => {
                format!("where({}, {}, {})", self.scalar_text(cond), self.scalar_text(a), self.scalar_text(b))
            }
            ScalarExpr::Select { cond, then, otherwise } => {
                format!("({} ? {} : {})", self.expr(cond), self.scalar_text(then), self.scalar_text(otherwise))
            }
        }
    }

    fn param_name(&self, p: ParamId) -> String {
        name_or(self.params.get(p.0 as usize).map(|p| p.name.as_str()), "p", p.0)
    }

    fn write_body(&self, f: &mut fmt::Formatter<'_>, body: &[Stmt], depth: usize, next: &mut u32) -> fmt::Result {
        for s in body {
            let id = *next;
            *next += 1;
            let pad = "  ".repeat(depth);
            write!(f, "{pad}s{id}: ")?;
            match s {
                Stmt::Let { var, value } => writeln!(f, "let {} = {}", self.expr(&Expr::Var(*var)), self.expr(value))?,
                Stmt::For { var, start, end, step, unroll, body } => {
                    writeln!(
                        f,
                        "for {} in {}..{} step {}{}",
                        self.expr(&Expr::Var(*var)),
                        self.expr(start),
                        self.expr(end),
                        step,
                        if *unroll { " unroll" } else { "" }
                    )?;
                    self.write_body(f, body, depth + 1, next)?;
                }
                Stmt::If { cond, then, otherwise } => {
                    writeln!(f, "if {}", self.expr(cond))?;
                    self.write_body(f, then, depth + 1, next)?;
                    if !otherwise.is_empty() {
                        writeln!(f, "{pad}else")?;
                        self.write_body(f, otherwise, depth + 1, next)?;
                    }
                }
                Stmt::Barrier => writeln!(f, "bar.sync 0")?,
                Stmt::BarrierNamed { id, threads } => writeln!(f, "bar.sync {id}, {threads}")?,
                Stmt::WarpSpecialize { producer_threads, producer, consumer } => {
                    writeln!(f, "warp_specialize producer=threads 0..{producer_threads}")?;
                    self.write_body(f, producer, depth + 1, next)?;
                    writeln!(f, "{pad}consumer")?;
                    self.write_body(f, consumer, depth + 1, next)?;
                }
                Stmt::Sm90(Sm90Stmt::SetMaxNReg { inc, regs }) => {
                    writeln!(f, "setmaxnreg.{}.sync.aligned.u32 {regs}", if *inc { "inc" } else { "dec" })?
                }
                Stmt::Sm90(Sm90Stmt::MbarrierArrive { bar, cta: None }) => {
                    writeln!(f, "mbarrier.arrive {}", self.smem_text(bar))?
                }
                Stmt::Sm90(Sm90Stmt::MbarrierArrive { bar, cta: Some(cta) }) => {
                    writeln!(f, "mbarrier.arrive.shared::cluster {}, cta={}", self.smem_text(bar), self.expr(cta))?
                }
                Stmt::Sm90(Sm90Stmt::ClusterSync) => writeln!(f, "barrier.cluster.arrive; barrier.cluster.wait")?,
                Stmt::Sm90(Sm90Stmt::MbarrierInit { bar, count }) => {
                    writeln!(f, "mbarrier.init {}, {count}", self.smem_text(bar))?
                }
                Stmt::Sm90(Sm90Stmt::FenceMbarrierInit) => writeln!(f, "fence.mbarrier_init.release.cluster")?,
                Stmt::Sm90(Sm90Stmt::MbarrierArriveExpectTx { bar, bytes }) => {
                    writeln!(f, "mbarrier.arrive.expect_tx {}, {bytes}", self.smem_text(bar))?
                }
                Stmt::Sm90(Sm90Stmt::MbarrierWait { bar, parity }) => {
                    writeln!(f, "mbarrier.try_wait.parity {}, {}", self.smem_text(bar), self.expr(parity))?
                }
                Stmt::Sm90(Sm90Stmt::TmaLoad { dst, map, coords, bar, multicast }) => writeln!(
                    f,
                    "cp.async.bulk.tensor.2d {}, {}[{}, {}], mbar={}{}",
                    self.smem_text(dst),
                    self.param_name(*map),
                    self.expr(&coords[0]),
                    self.expr(&coords[1]),
                    self.smem_text(bar),
                    multicast.map_or(String::new(), |m| format!(", multicast={m:#b}"))
                )?,
                Stmt::Sm90(Sm90Stmt::FenceProxyAsync) => writeln!(f, "fence.proxy.async.shared::cta")?,
                Stmt::Sm90(Sm90Stmt::WgmmaFence) => writeln!(f, "wgmma.fence")?,
                Stmt::Sm90(Sm90Stmt::Wgmma { ab, n, d, a, b, trans_b, scale_d }) => writeln!(
                    f,
                    "wgmma.mma_async.m64n{n}k16.f32.{0}.{0} {1}..+{2}, {3}, {4}{5}{6}",
                    ab.dsl_name(),
                    self.reg_text(d),
                    n / 2,
                    match a {
                        WgmmaA::Smem(a) => self.desc_text(a),
                        WgmmaA::Regs(r) => format!("{}..+4", self.reg_text(r)),
                    },
                    self.desc_text(b),
                    if *trans_b { ", trans_b" } else { "" },
                    if *scale_d { "" } else { ", scale-d=0" }
                )?,
                Stmt::Sm90(Sm90Stmt::WgmmaCommit) => writeln!(f, "wgmma.commit_group")?,
                Stmt::Sm90(Sm90Stmt::WgmmaWait { pending }) => writeln!(f, "wgmma.wait_group {pending}")?,
                Stmt::Mma(MmaStmt::CpAsync { dst, src, bytes, src_bytes }) => writeln!(
                    f,
                    "cp.async.{}.shared.global {}, {}, {bytes}, src_bytes={}",
                    if *bytes == 16 { "cg" } else { "ca" },
                    self.smem_text(dst),
                    self.global_text(src),
                    self.expr(src_bytes)
                )?,
                Stmt::Mma(MmaStmt::CommitGroup) => writeln!(f, "cp.async.commit_group")?,
                Stmt::Mma(MmaStmt::WaitGroup { pending }) => writeln!(f, "cp.async.wait_group {pending}")?,
                Stmt::Mma(MmaStmt::CopySync { dst, src, bytes, src_bytes }) => writeln!(
                    f,
                    "copy.sync {}, {}, {bytes}, src_bytes={}",
                    self.smem_text(dst),
                    self.global_text(src),
                    self.expr(src_bytes)
                )?,
                Stmt::Mma(MmaStmt::LdMatrix { num, trans, dst, src }) => writeln!(
                    f,
                    "ldmatrix.sync.aligned.m8n8.x{}{}.shared.b16 {}, {}",
                    num.count(),
                    if *trans { ".trans" } else { "" },
                    self.regs_text(dst),
                    self.smem_text(src)
                )?,
                Stmt::Mma(MmaStmt::MmaSync { ab, d, a, b, c }) => writeln!(
                    f,
                    "mma.sync.aligned.m16n8k16.row.col.f32.{0}.{0}.f32 {1}, {2}, {3}, {4}",
                    ab.dsl_name(),
                    self.regs_text(d),
                    self.regs_text(a),
                    self.regs_text(b),
                    self.regs_text(c)
                )?,
                Stmt::Mma(MmaStmt::MovF32 { dst, value }) => writeln!(f, "mov.b32 {}, {value:?}", self.reg_text(dst))?,
                Stmt::Mma(MmaStmt::PackB16x2 { dst, lo, hi, dtype }) => writeln!(
                    f,
                    "cvt.rn.{}x2.f32 {}, {}, {}",
                    dtype.dsl_name(),
                    self.reg_text(dst),
                    self.reg_text(hi),
                    self.reg_text(lo)
                )?,
                Stmt::Mma(MmaStmt::Epilogue { acc, pred, ops }) => {
                    let ops: Vec<String> = ops
                        .iter()
                        .map(|o| match o {
                            EpilogueOp::Bias { param, at } => {
                                format!("bias({}[{}])", self.param_name(*param), self.expr(at))
                            }
                            EpilogueOp::Relu => "relu".into(),
                            EpilogueOp::Silu => "silu".into(),
                            EpilogueOp::Gelu => "gelu".into(),
                            EpilogueOp::GeluTanh => "gelu_tanh".into(),
                            EpilogueOp::Tanh => "tanh".into(),
                            EpilogueOp::Residual { param, at } => {
                                format!("residual({}[{}])", self.param_name(*param), self.expr(at))
                            }
                            EpilogueOp::Cast(d) => format!("cast({})", d.dsl_name()),
                        })
                        .collect();
                    writeln!(f, "epilogue {} if {}: {}", self.reg_text(acc), self.expr(pred), ops.join(" "))?
                }
                Stmt::Mma(MmaStmt::StGlobalVec { dst, src, dtype, pred }) => writeln!(
                    f,
                    "st.global.v{}.{} {}, {} if {}",
                    src.len(),
                    dtype.dsl_name(),
                    self.global_text(dst),
                    self.regs_text(src),
                    self.expr(pred)
                )?,
                Stmt::Mma(MmaStmt::StShared { dst, src, dtype }) => writeln!(
                    f,
                    "st.shared.v{}.{} {}, {}",
                    src.len(),
                    dtype.dsl_name(),
                    self.smem_text(dst),
                    self.regs_text(src)
                )?,
                Stmt::Mma(MmaStmt::LdShared { dst, src, dtype }) => writeln!(
                    f,
                    "ld.shared.v{}.{} {}, {}",
                    dst.len(),
                    dtype.dsl_name(),
                    self.regs_text(dst),
                    self.smem_text(src)
                )?,
                Stmt::Sm90(Sm90Stmt::GridDepControlWait) => writeln!(f, "griddepcontrol.wait")?,
                Stmt::Simt(SimtStmt::Compute { dst, value }) => {
                    writeln!(f, "{} = {}", self.reg_text(dst), self.scalar_text(value))?
                }
                Stmt::Simt(SimtStmt::Accumulate { op, dtype, acc, value }) => writeln!(
                    f,
                    "{} = {}.{}({0}, {})",
                    self.reg_text(acc),
                    reduce_name(*op),
                    dtype.dsl_name(),
                    self.scalar_text(value)
                )?,
                Stmt::Simt(SimtStmt::ShflBfly { op, dtype, acc, lane_mask }) => writeln!(
                    f,
                    "{} = {}.{}({0}, shfl.sync.bfly.b32({0}, {lane_mask}))",
                    self.reg_text(acc),
                    reduce_name(*op),
                    dtype.dsl_name()
                )?,
                Stmt::Simt(SimtStmt::ShflUpScan { op, dtype, acc, delta }) => writeln!(
                    f,
                    "{} = {}.{}(shfl.sync.up.b32({0}, {delta}), {0}) if lane >= {delta}",
                    self.reg_text(acc),
                    reduce_name(*op),
                    dtype.dsl_name()
                )?,
                Stmt::Simt(SimtStmt::ShflIdx { dtype, dst, src, lane }) => writeln!(
                    f,
                    "{} = shfl.sync.idx.b32.{}({}, {})",
                    self.reg_text(dst),
                    dtype.dsl_name(),
                    self.reg_text(src),
                    self.expr(lane)
                )?,
                Stmt::Simt(SimtStmt::StGlobal { dst, src, dtype, pred }) => writeln!(
                    f,
                    "st.global.{} {}, {} if {}",
                    dtype.dsl_name(),
                    self.global_text(dst),
                    self.reg_text(src),
                    self.expr(pred)
                )?,
                Stmt::Simt(SimtStmt::LdGlobalVec { dst, src, dtype, pred }) => writeln!(
                    f,
                    "ld.global.v{}.{} {}, {} if {}",
                    dst.len(),
                    dtype.dsl_name(),
                    self.regs_text(dst),
                    self.global_text(src),
                    self.expr(pred)
                )?,
            }
        }
        Ok(())
    }
}

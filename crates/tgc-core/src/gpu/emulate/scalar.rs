//! The SIMT template's statements ([`SimtStmt::Compute`], [`SimtStmt::Accumulate`],
//! [`SimtStmt::ShflBfly`], [`SimtStmt::StGlobal`], [`SimtStmt::LdGlobalVec`]): scalar
//! values in their compute type (`f32` bits, or `i32` for i32 and bool),
//! with the CPU backend's semantics (`cpu::loop_ir`, `emit::c`).

use crate::tiny::{BinaryOp, ReduceOp, UnaryOp};

use super::*;

/// A value of Tiny dtype `d` as its register bits.
fn from_f64(d: DType, v: f64) -> u32 {
    match d {
        DType::F16 | DType::BF16 | DType::F32 => (v as f32).to_bits(),
        DType::I32 => (v as i64 as i32) as u32,
        DType::Bool => (v != 0.0) as u32,
    }
}

fn f(bits: u32) -> f32 {
    f32::from_bits(bits)
}

fn nan_max(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else {
        a.max(b)
    }
}

fn nan_min(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else {
        a.min(b)
    }
}

/// Rounds register bits of a `dtype` value to `dtype` (f16/bf16; others as they are).
pub(super) fn round_bits(dtype: DType, bits: u32) -> u32 {
    match dtype {
        DType::F16 | DType::BF16 => round_to(dtype, f(bits)).to_bits(),
        _ => bits,
    }
}

/// `op(x)` on a value of dtype `d`; `None` for an op the dtype does not have.
pub fn unary(op: UnaryOp, d: DType, x: u32) -> Option<u32> {
    if !d.is_float() {
        let x = x as i32;
        return Some(match op {
            UnaryOp::Neg => x.wrapping_neg() as u32,
            UnaryOp::Relu => x.max(0) as u32,
            _ => return None,
        });
    }
    let x = f(x);
    Some(
        match op {
            UnaryOp::Neg => -x,
            UnaryOp::Relu => {
                if x < 0.0 {
                    0.0
                } else {
                    x
                }
            }
            UnaryOp::Exp2 => x.exp2(),
            UnaryOp::Log2 => x.log2(),
            UnaryOp::Sqrt => x.sqrt(),
            UnaryOp::Rsqrt => 1.0 / x.sqrt(),
            UnaryOp::Recip => 1.0 / x,
        }
        .to_bits(),
    )
}

/// `op(a, b)` on operands of dtype `d`; `None` for an op the dtype does not have.
pub fn binary(op: BinaryOp, d: DType, a: u32, b: u32) -> Option<u32> {
    match d {
        DType::F16 | DType::BF16 | DType::F32 => {
            let (x, y) = (f(a), f(b));
            Some(match op {
                BinaryOp::Cmplt => return Some((x < y) as u32),
                BinaryOp::Cmpeq => return Some((x == y) as u32),
                BinaryOp::Add => (x + y).to_bits(),
                BinaryOp::Sub => (x - y).to_bits(),
                BinaryOp::Mul => (x * y).to_bits(),
                BinaryOp::Fdiv => (x / y).to_bits(),
                BinaryOp::Max => nan_max(x, y).to_bits(),
                BinaryOp::Min => nan_min(x, y).to_bits(),
            })
        }
        DType::I32 => {
            let (x, y) = (a as i32, b as i32);
            Some(match op {
                BinaryOp::Cmplt => (x < y) as u32,
                BinaryOp::Cmpeq => (x == y) as u32,
                BinaryOp::Add => x.wrapping_add(y) as u32,
                BinaryOp::Sub => x.wrapping_sub(y) as u32,
                BinaryOp::Mul => x.wrapping_mul(y) as u32,
                BinaryOp::Max => x.max(y) as u32,
                BinaryOp::Min => x.min(y) as u32,
                BinaryOp::Fdiv => return None,
            })
        }
        DType::Bool => {
            let (x, y) = (a != 0, b != 0);
            Some(match op {
                BinaryOp::Cmplt => (!x & y) as u32,
                BinaryOp::Cmpeq => (x == y) as u32,
                BinaryOp::Add | BinaryOp::Max => (x | y) as u32,
                BinaryOp::Min | BinaryOp::Mul => (x & y) as u32,
                BinaryOp::Sub => (x != y) as u32,
                BinaryOp::Fdiv => return None,
            })
        }
    }
}

/// Tiny `CAST` of a value of dtype `from` to `to` (the C backend's `cast`).
pub fn cast(from: DType, to: DType, x: u32) -> u32 {
    use DType::*;
    match (from, to) {
        _ if from == to => x,
        (F16 | BF16 | F32, F32) => x,
        (F16 | BF16 | F32, F16 | BF16) => round_bits(to, x),
        (F16 | BF16 | F32, I32) => DType::I32.cast(f(x) as f64) as i32 as u32,
        (F16 | BF16 | F32, Bool) => (f(x) != 0.0) as u32,
        (I32, F16 | BF16 | F32) => round_bits(to, (x as i32 as f32).to_bits()),
        (I32, Bool) => (x != 0) as u32,
        (Bool, F16 | BF16 | F32) => (x as f32).to_bits(),
        (Bool, I32) | (I32, I32) | (Bool, Bool) => x,
    }
}

/// `op(acc, v)` for an accumulator of dtype `d`, without rounding.
pub fn combine(op: ReduceOp, d: DType, acc: u32, v: u32) -> u32 {
    let b = op.combine();
    binary(b, d, acc, v).unwrap_or(acc)
}

/// The bits of a register of `kind` for a value loaded from storage bytes of `dtype`.
fn widen(dtype: DType, c: &[u8]) -> u32 {
    match dtype {
        DType::I32 => i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as u32,
        DType::Bool => (c[0] != 0) as u32,
        _ => (load(dtype, c) as f32).to_bits(),
    }
}

/// The storage bytes of a `dtype` value held as register bits.
fn narrow(dtype: DType, bits: u32, out: &mut Vec<u8>) {
    match dtype {
        DType::I32 => out.extend((bits as i32).to_le_bytes()),
        DType::Bool => out.push((bits != 0) as u8),
        _ => {
            let _ = store_bytes(dtype, f(bits), out);
        }
    }
}

impl<'k> Frame<'k> {
    fn check_kind(&self, r: &RegRef, dtype: DType, s: Option<u32>) -> R<()> {
        let want = compute_kind(dtype);
        match self.k.regs.get(r.reg.0 as usize) {
            Some(a) if a.kind == want => Ok(()),
            Some(a) => Err(self.err(
                Fault::FragmentShape,
                s,
                format!("register `{}` is {:?}, a {} value needs {want:?}", a.name, a.kind, dtype.dsl_name()),
            )),
            None => Err(self.err(Fault::BadId, s, format!("register array {} is not declared", r.reg.0))),
        }
    }

    /// The value of `e` for thread `t`, as register bits of its compute kind.
    pub(super) fn scalar(&self, e: &ScalarExpr, t: usize, args: &[Arg], s: Option<u32>) -> R<u32> {
        let unsupported = |what: String| self.err(Fault::BadValue, s, what);
        Ok(match e {
            ScalarExpr::Load { src, dtype } => {
                let es = dtype.size_bytes() as u64;
                let (at, pd) = self.global_addr(src, t, es, es, args, s)?;
                if pd != *dtype {
                    return Err(unsupported(format!("loads {} from a {} tensor", dtype.dsl_name(), pd.dsl_name())));
                }
                match args.get(src.param.0 as usize) {
                    Some(Arg::Tensor(b)) => widen(*dtype, &b[at..at + es as usize]),
                    _ => return Err(self.err(Fault::BadId, s, format!("parameter {} has no tensor", src.param.0))),
                }
            }
            ScalarExpr::Gather { src, stride, extent, at, dtype } => {
                if at.dtype() != DType::I32 {
                    return Err(unsupported(format!("a gather at a {} position", at.dtype().dsl_name())));
                }
                let v = self.scalar(at, t, args, s)? as i32;
                let d = self.eval(extent, t, s)?;
                let pos = crate::tiny::op::gather_position(v as i64, d);
                let read = GlobalRef { param: src.param, offset: src.offset.clone() + stride.clone() * Expr::c(pos) };
                self.scalar(&ScalarExpr::Load { src: read, dtype: *dtype }, t, args, s)?
            }
            ScalarExpr::Const { value, dtype } => from_f64(*dtype, *value),
            ScalarExpr::Reg { reg, dtype } => {
                self.check_kind(reg, *dtype, s)?;
                round_bits(*dtype, self.get_reg(reg, t, s)?)
            }
            ScalarExpr::Unary { op, x } => {
                let d = x.dtype();
                let v = self.scalar(x, t, args, s)?;
                unary(*op, d, v).ok_or_else(|| unsupported(format!("{op:?} on {}", d.dsl_name())))?
            }
            ScalarExpr::Binary { op, a, b } => {
                let d = a.dtype();
                let (x, y) = (self.scalar(a, t, args, s)?, self.scalar(b, t, args, s)?);
                binary(*op, d, x, y).ok_or_else(|| unsupported(format!("{op:?} on {}", d.dsl_name())))?
            }
            ScalarExpr::Cast { to, x } => cast(x.dtype(), *to, self.scalar(x, t, args, s)?),
            ScalarExpr::Where { cond, a, b } => {
                let c = self.scalar(cond, t, args, s)?;
                let (x, y) = (self.scalar(a, t, args, s)?, self.scalar(b, t, args, s)?);
                let truthy = if cond.dtype().is_float() { f(c) != 0.0 } else { c != 0 };
                if truthy {
                    x
                } else {
                    y
                }
            }
            ScalarExpr::Select { cond, then, otherwise } => {
                if self.eval(cond, t, s)? != 0 {
                    self.scalar(then, t, args, s)?
                } else {
                    self.scalar(otherwise, t, args, s)?
                }
            }
        })
    }

    /// Runs a SIMT statement.
    pub(super) fn simt_stmt(&mut self, st: &'k SimtStmt, mask: &[bool], args: &mut [Arg], s: Option<u32>) -> R<()> {
        match st {
            SimtStmt::Compute { dst, value } => {
                self.check_kind(dst, value.dtype(), s)?;
                for t in Self::active(mask) {
                    let v = self.scalar(value, t, args, s)?;
                    self.set_reg(dst, t, v, s)?;
                }
            }
            SimtStmt::Accumulate { op, dtype, acc, value } => {
                self.check_kind(acc, *dtype, s)?;
                if value.dtype() != *dtype {
                    let msg = format!("accumulates a {} value into a {} accumulator", value.dtype(), dtype);
                    return Err(self.err(Fault::BadValue, s, msg));
                }
                for t in Self::active(mask) {
                    let v = self.scalar(value, t, args, s)?;
                    let a = self.get_reg(acc, t, s)?;
                    self.set_reg(acc, t, combine(*op, *dtype, a, v), s)?;
                }
            }
            SimtStmt::ShflBfly { op, dtype, acc, lane_mask } => {
                self.check_kind(acc, *dtype, s)?;
                if *lane_mask >= 32 {
                    return Err(self.err(Fault::BadValue, s, format!("lane mask {lane_mask} (0 to 31)")));
                }
                for w in self.full_warps(mask, s, "shfl.sync.bfly")? {
                    let lanes = self.warp_regs(acc, w, s)?;
                    for l in 0..32 {
                        let other = lanes[l ^ *lane_mask as usize];
                        self.set_reg(acc, w * 32 + l, combine(*op, *dtype, lanes[l], other), s)?;
                    }
                }
            }
            SimtStmt::ShflUpScan { op, dtype, acc, delta } => {
                self.check_kind(acc, *dtype, s)?;
                if !(1..32).contains(delta) {
                    return Err(self.err(Fault::BadValue, s, format!("shfl.sync.up delta {delta} (1 to 31)")));
                }
                let d = *delta as usize;
                for w in self.full_warps(mask, s, "shfl.sync.up")? {
                    let lanes = self.warp_regs(acc, w, s)?;
                    for l in d..32 {
                        self.set_reg(acc, w * 32 + l, combine(*op, *dtype, lanes[l - d], lanes[l]), s)?;
                    }
                }
            }
            SimtStmt::ShflIdx { dtype, dst, src, lane } => {
                self.check_kind(dst, *dtype, s)?;
                self.check_kind(src, *dtype, s)?;
                for w in self.full_warps(mask, s, "shfl.sync.idx")? {
                    let lanes = self.warp_regs(src, w, s)?;
                    for l in 0..32 {
                        let from = self.eval(lane, w * 32 + l, s)?;
                        let v = *usize::try_from(from)
                            .ok()
                            .and_then(|f| lanes.get(f))
                            .ok_or_else(|| self.err(Fault::BadValue, s, format!("lane {from} (0 to 31)")))?;
                        self.set_reg(dst, w * 32 + l, v, s)?;
                    }
                }
            }
            SimtStmt::StGlobal { dst, src, dtype, pred } => {
                self.check_kind(src, *dtype, s)?;
                let es = dtype.size_bytes();
                for t in Self::active(mask) {
                    if self.eval(pred, t, s)? == 0 {
                        continue;
                    }
                    let (g, pd) = self.global_addr(dst, t, es as u64, es as u64, args, s)?;
                    if pd != *dtype {
                        let msg = format!("stores {} into a {} tensor", dtype.dsl_name(), pd.dsl_name());
                        return Err(self.err(Fault::BadValue, s, msg));
                    }
                    let mut bytes = Vec::with_capacity(es);
                    narrow(*dtype, self.get_reg(src, t, s)?, &mut bytes);
                    if let Some(Arg::Tensor(b)) = args.get_mut(dst.param.0 as usize) {
                        b[g..g + es].copy_from_slice(&bytes);
                    }
                }
            }
            SimtStmt::LdGlobalVec { dst, src, dtype, pred } => {
                let es = dtype.size_bytes();
                let n = (dst.len() * es) as u64;
                if !dst.len().is_power_of_two() || n > 16 {
                    let msg = format!("a vector load of {} {} elements", dst.len(), dtype.dsl_name());
                    return Err(self.err(Fault::BadValue, s, msg));
                }
                for r in dst {
                    self.check_kind(r, *dtype, s)?;
                }
                for t in Self::active(mask) {
                    if self.eval(pred, t, s)? == 0 {
                        continue;
                    }
                    let (g, pd) = self.global_addr(src, t, n, n, args, s)?;
                    if pd != *dtype {
                        let msg = format!("loads {} from a {} tensor", dtype.dsl_name(), pd.dsl_name());
                        return Err(self.err(Fault::BadValue, s, msg));
                    }
                    let bytes = match args.get(src.param.0 as usize) {
                        Some(Arg::Tensor(b)) => b[g..g + n as usize].to_vec(),
                        _ => return Err(self.err(Fault::BadId, s, "no tensor".to_string())),
                    };
                    for (r, c) in dst.iter().zip(bytes.chunks_exact(es)) {
                        self.set_reg(r, t, widen(*dtype, c), s)?;
                    }
                }
            }
        }
        Ok(())
    }
}

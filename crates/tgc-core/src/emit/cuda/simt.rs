//! The CUDA C of the SIMT template's statements (a part of the printer,
//! [`super`]): scalar values in their compute type (`float`, or `int` for
//! i32 and bool), with the C backend's semantics (`emit::c`).
//!
//! | IR | CUDA C |
//! |----|--------|
//! | `Compute` | `r[i] = <expression>;` |
//! | `Accumulate` | `acc[0] = acc[0] + v;` (`tgc_max_nan`/`tgc_min_nan` for MAX/MIN) |
//! | `ShflBfly` | `shfl.sync.bfly.b32 d, a, lane_mask, 0x1f, 0xffffffff;` then the combine ("Data Movement and Conversion Instructions: shfl.sync") |
//! | `ShflUpScan` | `shfl.sync.up.b32 d, a, delta, 0, 0xffffffff;` then the combine in lanes `≥ delta` (same section) |
//! | `ShflIdx` | `shfl.sync.idx.b32 d, a, lane, 0x1f, 0xffffffff;` with the lane in a register (same section) |
//! | `StGlobal` | `if (pred) p[off] = <storage conversion>(r[i]);` |
//! | `LdGlobalVec` | `ld.global[.v2/.v4].b32` into words, then widened ("Data Movement and Conversion Instructions: ld") |

use std::fmt::Write;

use crate::tiny::{BinaryOp, ReduceOp, UnaryOp};
use crate::DType;

use super::*;

/// Device helpers of the SIMT statements (printed once per unit that has one).
pub(super) const SIMT_PRELUDE: &str = r#"
// SIMT template helpers: the CPU backend's semantics (NaN-propagating
// MAX/MIN, RELU as x < 0 ? 0 : x, wrapping i32, CAST to i32 truncating and saturating).
__device__ __forceinline__ float tgc_max_nan(float a, float b) { return (a != a || b != b) ? __int_as_float(0x7fc00000) : fmaxf(a, b); }
__device__ __forceinline__ float tgc_min_nan(float a, float b) { return (a != a || b != b) ? __int_as_float(0x7fc00000) : fminf(a, b); }
__device__ __forceinline__ float tgc_relu(float x) { return x < 0.0f ? 0.0f : x; }
__device__ __forceinline__ float tgc_round_f16(float x) { return tgc_f16_to_f32(tgc_f32_to_f16(x)); }
__device__ __forceinline__ float tgc_round_bf16(float x) { return tgc_bf16_to_f32(tgc_f32_to_bf16(x)); }
__device__ __forceinline__ int tgc_add_i32(int a, int b) { return (int)((unsigned)a + (unsigned)b); }
__device__ __forceinline__ int tgc_sub_i32(int a, int b) { return (int)((unsigned)a - (unsigned)b); }
__device__ __forceinline__ int tgc_mul_i32(int a, int b) { return (int)((unsigned)a * (unsigned)b); }
__device__ __forceinline__ int tgc_neg_i32(int a) { return (int)(0u - (unsigned)a); }
// CAST to i32 (tgc_runtime::DType::cast): truncation toward zero, saturating
// (cvt's float-to-integer conversion clamps to the destination range), NaN to 0.
__device__ __forceinline__ int tgc_f32_to_i32(float x) {
    int v;
    asm("cvt.rzi.s32.f32 %0, %1;" : "=r"(v) : "f"(x));
    return x != x ? 0 : v;
}
"#;

/// Whether `k` has a SIMT statement (its unit needs [`SIMT_PRELUDE`]).
pub(super) fn uses_simt(k: &Kernel) -> bool {
    let mut any = false;
    k.walk(&mut |_, s| {
        any |= matches!(
            s,
            Stmt::Simt(SimtStmt::Compute { .. })
                | Stmt::Simt(SimtStmt::Accumulate { .. })
                | Stmt::Simt(SimtStmt::ShflBfly { .. })
                | Stmt::Simt(SimtStmt::ShflUpScan { .. })
                | Stmt::Simt(SimtStmt::ShflIdx { .. })
                | Stmt::Simt(SimtStmt::StGlobal { .. })
                | Stmt::Simt(SimtStmt::LdGlobalVec { .. })
        )
    });
    any
}

/// `x` (a compute value of dtype `d`) rounded to `d`.
fn round_to(x: String, d: DType) -> String {
    match d {
        DType::F16 => format!("tgc_round_f16({x})"),
        DType::BF16 => format!("tgc_round_bf16({x})"),
        _ => x,
    }
}

/// `op(a, b)` on compute values of dtype `d`.
fn binary(op: BinaryOp, a: String, b: String, d: DType) -> Option<String> {
    let infix = |o: &str| format!("({a} {o} {b})");
    Some(match (op, d) {
        (BinaryOp::Cmplt, _) => format!("(int){}", infix("<")),
        (BinaryOp::Cmpeq, _) => format!("(int){}", infix("==")),
        (BinaryOp::Add, DType::I32) => format!("tgc_add_i32({a}, {b})"),
        (BinaryOp::Sub, DType::I32) => format!("tgc_sub_i32({a}, {b})"),
        (BinaryOp::Mul, DType::I32) => format!("tgc_mul_i32({a}, {b})"),
        (BinaryOp::Max, DType::I32) => format!("max({a}, {b})"),
        (BinaryOp::Min, DType::I32) => format!("min({a}, {b})"),
        (BinaryOp::Fdiv, DType::I32 | DType::Bool) => return None,
        (BinaryOp::Add | BinaryOp::Max, DType::Bool) => infix("|"),
        (BinaryOp::Min | BinaryOp::Mul, DType::Bool) => infix("&"),
        (BinaryOp::Sub, DType::Bool) => format!("(int){}", infix("!=")),
        (BinaryOp::Add, _) => infix("+"),
        (BinaryOp::Sub, _) => infix("-"),
        (BinaryOp::Mul, _) => infix("*"),
        (BinaryOp::Fdiv, _) => infix("/"),
        (BinaryOp::Max, _) => format!("tgc_max_nan({a}, {b})"),
        (BinaryOp::Min, _) => format!("tgc_min_nan({a}, {b})"),
    })
}

/// One `shfl.sync` in a block of its own: `instr` (PTX, `%0` the result
/// `tgc_o`, `%1`, `%2`, … the 32-bit `inputs`), then the statement `then`
/// that reads `tgc_o`.
fn shuffle(out: &mut String, (tag, pad): (&str, &str), comment: &str, instr: &str, inputs: &[&str], then: &str) {
    let inputs: Vec<String> = inputs.iter().map(|x| format!("\"r\"({x})")).collect();
    writeln!(out, "{tag}{{ // {comment}").unwrap();
    writeln!(out, "{pad}    unsigned tgc_o;").unwrap();
    writeln!(out, "{pad}    asm volatile(\"{instr}\\n\" : \"=r\"(tgc_o) : {});", inputs.join(", ")).unwrap();
    writeln!(out, "{pad}    {then}").unwrap();
    writeln!(out, "{pad}}}").unwrap();
}

/// A register's 32 bits for `shfl.sync` and the shuffled bits `tgc_o` read
/// back as its compute type.
fn shfl_bits(r: &str, dtype: DType) -> (String, String) {
    if dtype.is_float() {
        (format!("__float_as_uint({r})"), "__uint_as_float(tgc_o)".to_string())
    } else {
        (format!("(unsigned){r}"), "(int)tgc_o".to_string())
    }
}

fn combine(op: ReduceOp, a: String, b: String, d: DType) -> Option<String> {
    let bop = op.combine();
    binary(bop, a, b, d)
}

/// Tiny `CAST` of a compute value from `from` to `to`.
fn cast(x: String, from: DType, to: DType) -> String {
    use DType::*;
    match (from, to) {
        _ if from == to => x,
        (F16 | BF16 | F32, F32) => x,
        (F16 | BF16 | F32, F16 | BF16) => round_to(x, to),
        (F16 | BF16 | F32, I32) => format!("tgc_f32_to_i32({x})"),
        (F16 | BF16 | F32, Bool) => format!("(int)({x} != 0.0f)"),
        (I32, F16 | BF16 | F32) => round_to(format!("(float){x}"), to),
        (I32, Bool) => format!("(int)({x} != 0)"),
        (Bool, F16 | BF16 | F32) => format!("(float){x}"),
        (Bool, I32) | (I32, I32) | (Bool, Bool) => x,
    }
}

/// A compute value of dtype `d` as a C literal.
fn literal(value: f64, d: DType) -> String {
    match d {
        DType::I32 => {
            let v = value as i64 as i32;
            if v == i32::MIN {
                "(-2147483647 - 1)".into()
            } else {
                format!("({v})")
            }
        }
        DType::Bool => ((value != 0.0) as i32).to_string(),
        _ => f32_literal(value as f32),
    }
}

/// The global element `at` of `dtype` in its compute type: f16/bf16 bits
/// widened to float, bool as an `int` 0 or 1.
fn widen(at: &str, dtype: DType) -> String {
    match dtype {
        DType::F16 => format!("tgc_f16_to_f32({at})"),
        DType::BF16 => format!("tgc_bf16_to_f32({at})"),
        DType::Bool => format!("(int)({at} != 0)"),
        DType::F32 | DType::I32 => format!("({at})"),
    }
}

impl Printer<'_> {
    /// A scalar expression as C of its compute type.
    fn scalar(&self, e: &ScalarExpr, id: u32) -> Result<String, CudaError> {
        Ok(match e {
            ScalarExpr::Load { src, dtype } => {
                let (g, pd) = self.global(src, id)?;
                if pd != *dtype {
                    return Err(self.err(id, Fault::BadValue, format!("loads {dtype} from a {pd} tensor")));
                }
                widen(&format!("*({g})"), *dtype)
            }
            ScalarExpr::Gather { src, stride, extent, at, dtype } => {
                let (g, pd) = self.global(src, id)?;
                if pd != *dtype || at.dtype() != DType::I32 {
                    let msg = format!("gathers {dtype} from a {pd} tensor at a {} position", at.dtype());
                    return Err(self.err(id, Fault::BadValue, msg));
                }
                let pos = format!("tgc_gather_at({}, {})", self.scalar(at, id)?, self.expr(extent, Some(id))?);
                widen(&format!("*({g} + ({}) * {pos})", self.expr(stride, Some(id))?), *dtype)
            }
            ScalarExpr::Const { value, dtype } => literal(*value, *dtype),
            ScalarExpr::Reg { reg, dtype } => {
                if self.reg_kind(reg, id)? != compute_kind(*dtype) {
                    return Err(self.err(id, Fault::FragmentShape, "an operand register of the wrong kind"));
                }
                round_to(self.reg(reg, id)?, *dtype)
            }
            ScalarExpr::Unary { op, x } => {
                let d = x.dtype();
                let v = self.scalar(x, id)?;
                if !d.is_float() {
                    match op {
                        UnaryOp::Neg => format!("tgc_neg_i32({v})"),
                        UnaryOp::Relu => format!("max({v}, 0)"),
                        _ => return Err(self.err(id, Fault::BadValue, format!("{op:?} on {d}"))),
                    }
                } else {
                    match op {
                        UnaryOp::Neg => format!("(-{v})"),
                        UnaryOp::Relu => format!("tgc_relu({v})"),
                        UnaryOp::Exp2 => format!("exp2f({v})"),
                        UnaryOp::Log2 => format!("log2f({v})"),
                        UnaryOp::Sqrt => format!("sqrtf({v})"),
                        UnaryOp::Rsqrt => format!("(1.0f / sqrtf({v}))"),
                        UnaryOp::Recip => format!("(1.0f / {v})"),
                    }
                }
            }
            ScalarExpr::Binary { op, a, b } => {
                let d = a.dtype();
                let (x, y) = (self.scalar(a, id)?, self.scalar(b, id)?);
                binary(*op, x, y, d).ok_or_else(|| self.err(id, Fault::BadValue, format!("{op:?} on {d}")))?
            }
            ScalarExpr::Cast { to, x } => cast(self.scalar(x, id)?, x.dtype(), *to),
            ScalarExpr::Where { cond, a, b } => {
                let c = self.scalar(cond, id)?;
                let test = if cond.dtype().is_float() { format!("{c} != 0.0f") } else { format!("{c} != 0") };
                format!("({test} ? {} : {})", self.scalar(a, id)?, self.scalar(b, id)?)
            }
            ScalarExpr::Select { cond, then, otherwise } => {
                format!(
                    "({} ? {} : {})",
                    self.expr(cond, Some(id))?,
                    self.scalar(then, id)?,
                    self.scalar(otherwise, id)?
                )
            }
        })
    }

    fn kind_of(&self, r: &RegRef, d: DType, id: u32) -> Result<String, CudaError> {
        if self.reg_kind(r, id)? != compute_kind(d) {
            return Err(self.err(id, Fault::FragmentShape, format!("a {d} value in a register of the wrong kind")));
        }
        self.reg(r, id)
    }

    pub(super) fn simt_stmt(
        &self,
        out: &mut String,
        s: &SimtStmt,
        id: u32,
        tag: &str,
        pad: &str,
    ) -> Result<(), CudaError> {
        let guarded = |pred: &Expr, what: String| -> Result<String, CudaError> {
            Ok(match pred {
                Expr::Const(v) if *v != 0 => what,
                _ => format!("if ({}) {what}", self.cond(pred, id)?),
            })
        };
        match s {
            SimtStmt::Compute { dst, value } => {
                let r = self.kind_of(dst, value.dtype(), id)?;
                writeln!(out, "{tag}{r} = {};", self.scalar(value, id)?).unwrap();
            }
            SimtStmt::Accumulate { op, dtype, acc, value } => {
                let r = self.kind_of(acc, *dtype, id)?;
                let v = self.scalar(value, id)?;
                let c = combine(*op, r.clone(), v, *dtype)
                    .ok_or_else(|| self.err(id, Fault::BadValue, format!("{op:?} on {dtype}")))?;
                writeln!(out, "{tag}{r} = {c};").unwrap();
            }
            SimtStmt::ShflBfly { op, dtype, acc, lane_mask } => {
                let r = self.kind_of(acc, *dtype, id)?;
                let (bits, back) = shfl_bits(&r, *dtype);
                let c = combine(*op, r.clone(), back, *dtype)
                    .ok_or_else(|| self.err(id, Fault::BadValue, format!("{op:?} on {dtype}")))?;
                let instr = format!("shfl.sync.bfly.b32 %0, %1, {lane_mask}, 0x1f, 0xffffffff;");
                shuffle(
                    out,
                    (tag, pad),
                    &format!("warp butterfly, lane ^ {lane_mask}"),
                    &instr,
                    &[&bits],
                    &format!("{r} = {c};"),
                );
            }
            SimtStmt::ShflUpScan { op, dtype, acc, delta } => {
                let r = self.kind_of(acc, *dtype, id)?;
                let (bits, back) = shfl_bits(&r, *dtype);
                let c = combine(*op, back, r.clone(), *dtype)
                    .ok_or_else(|| self.err(id, Fault::BadValue, format!("{op:?} on {dtype}")))?;
                let instr = format!("shfl.sync.up.b32 %0, %1, {delta}, 0, 0xffffffff;");
                let then = format!("if ((threadIdx.x & 31) >= {delta}) {r} = {c};");
                shuffle(out, (tag, pad), &format!("warp scan step, lane - {delta}"), &instr, &[&bits], &then);
            }
            SimtStmt::ShflIdx { dtype, dst, src, lane } => {
                let d = self.kind_of(dst, *dtype, id)?;
                let r = self.kind_of(src, *dtype, id)?;
                let (bits, back) = shfl_bits(&r, *dtype);
                let from = self.expr(lane, Some(id))?;
                let instr = "shfl.sync.idx.b32 %0, %1, %2, 0x1f, 0xffffffff;";
                let lane = format!("(unsigned)({from})");
                shuffle(
                    out,
                    (tag, pad),
                    &format!("warp shuffle from lane {from}"),
                    instr,
                    &[&bits, &lane],
                    &format!("{d} = {back};"),
                );
            }
            SimtStmt::StGlobal { dst, src, dtype, pred } => {
                let (g, pd) = self.global(dst, id)?;
                if pd != *dtype {
                    return Err(self.err(id, Fault::BadValue, format!("stores {dtype} into a {pd} tensor")));
                }
                let r = self.kind_of(src, *dtype, id)?;
                let v = match dtype {
                    DType::F16 => format!("tgc_f32_to_f16({r})"),
                    DType::BF16 => format!("tgc_f32_to_bf16({r})"),
                    DType::Bool => format!("(unsigned char)({r} != 0)"),
                    _ => r,
                };
                writeln!(out, "{tag}{}", guarded(pred, format!("*({g}) = {v};"))?).unwrap();
            }
            SimtStmt::LdGlobalVec { dst, src, dtype, pred } => {
                let (g, pd) = self.global(src, id)?;
                if pd != *dtype {
                    return Err(self.err(id, Fault::BadValue, format!("loads {dtype} from a {pd} tensor")));
                }
                let regs: Vec<String> = dst.iter().map(|r| self.kind_of(r, *dtype, id)).collect::<Result<_, _>>()?;
                let bad = || self.err(id, Fault::BadValue, format!("a global load of {} {dtype} elements", dst.len()));
                let words = match dtype {
                    DType::F32 | DType::I32 => regs.len(),
                    DType::F16 | DType::BF16 if regs.len().is_multiple_of(2) => regs.len() / 2,
                    _ => return Err(bad()),
                };
                let vec = match words {
                    1 => "",
                    2 => ".v2",
                    4 => ".v4",
                    _ => return Err(bad()),
                };
                let names: Vec<String> = (0..words).map(|i| format!("tgc_w{i}")).collect();
                let slots: Vec<String> = (0..words).map(|i| format!("%{i}")).collect();
                let slots = if words == 1 { slots[0].clone() } else { format!("{{{}}}", slots.join(", ")) };
                let outs: Vec<String> = names.iter().map(|n| format!("\"=r\"({n})")).collect();
                writeln!(out, "{tag}{} {{", guarded(pred, String::new())?.trim_end()).unwrap();
                writeln!(out, "{pad}    unsigned {};", names.join(", ")).unwrap();
                writeln!(
                    out,
                    "{pad}    asm volatile(\"ld.global{vec}.b32 {slots}, [%{words}];\\n\" : {} : \"l\"({g}));",
                    outs.join(", ")
                )
                .unwrap();
                for (i, r) in regs.iter().enumerate() {
                    let v = match dtype {
                        DType::F32 => format!("__uint_as_float({})", names[i]),
                        DType::I32 => format!("(int){}", names[i]),
                        _ => {
                            let w = &names[i / 2];
                            let half = if i % 2 == 0 { format!("({w} & 0xffffu)") } else { format!("({w} >> 16)") };
                            let cvt = if *dtype == DType::F16 { "tgc_f16_to_f32" } else { "tgc_bf16_to_f32" };
                            format!("{cvt}((unsigned short){half})")
                        }
                    };
                    writeln!(out, "{pad}    {r} = {v};").unwrap();
                }
                writeln!(out, "{pad}}}").unwrap();
            }
        }
        Ok(())
    }
}

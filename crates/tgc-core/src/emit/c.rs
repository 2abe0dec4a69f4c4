//! The C11 printer: one self-contained translation unit per graph (or per
//! batch of graphs, [`emit_c_units`]), in the SCoP-clean style of `spec/003`
//! — one `static` function per kernel with `restrict` pointers,
//! `#pragma scop` / `#pragma endscop` around each loop nest, affine `int64_t`
//! subscripts, `floord` for floor division as isl and CLooG print it, min/max
//! through helper functions (NaN-propagating, as the interpreter).
//!
//! The exported function is
//! `int32_t SYMBOL(const void* const* inputs, void* const* outputs, const int64_t* dims)`:
//! `inputs` in `Graph::inputs()` order, `outputs` in `Graph::outputs` order,
//! `dims` in `Graph::symbols` order, then the run-time tile sizes of a tile
//! plan ([`Program::tiles`], [`emit_c_units_with`]; none by default); buffers are dense row-major, f16 and
//! bf16 as `uint16_t` bit patterns, bool as `uint8_t`. It returns 0, 1 when
//! an allocation fails, 2 when the dims break a check of
//! [`Program::checks`] (nothing is written then).

use std::collections::BTreeSet;
use std::fmt::Write;

use crate::cpu::loop_ir::{BufId, Expr, Kernel, Nest, Program, Role};
use crate::cpu::{lower_with, Options};
use crate::diag;
use crate::diag::Diagnostic;
use crate::tiny::{BinaryOp, Graph, ReduceOp, Rel, UnaryOp};
use crate::DType;

use super::{aff, bare, bound, comment_text, dim, guard, kernel_summary, sym_name, Lang};

/// Generates the C translation unit of `g`, exporting `symbol`.
///
/// Errors: `Unsupported` when `symbol` is not a C identifier or collides with
/// a generated name; any error of [`lower`].
pub fn emit_c(g: &Graph, symbol: &str) -> Result<String, Diagnostic> {
    emit_c_units(&[(g, symbol)])
}

/// Generates one C translation unit exporting every `(graph, symbol)` pair,
/// so that one compiler run builds them all: the comment blocks of the
/// graphs, the includes and the helpers once, then each graph's kernels and
/// entry point in order. With one pair it is [`emit_c`].
///
/// Errors: `Unsupported` when a symbol is not a C identifier, or when two
/// functions of the unit (entry points, kernels `tgc_k<n>_SYMBOL`) would have
/// the same name; the first error of [`lower`], naming its graph when there
/// are several.
pub fn emit_c_units(units: &[(&Graph, &str)]) -> Result<String, Diagnostic> {
    emit_c_units_with(units, &Options::default())
}

/// [`emit_c_units`], lowering under `opts` ([`lower_with`]): with a tile
/// plan, each entry point reads its tile sizes from `dims` after the
/// graph's symbols ([`Program::tiles`]).
pub fn emit_c_units_with(units: &[(&Graph, &str)], opts: &Options) -> Result<String, Diagnostic> {
    let mut programs = Vec::new();
    for &(g, symbol) in units {
        check_symbol(symbol)?;
        let p = lower_with(g, opts).map_err(|mut e| {
            if units.len() > 1 {
                e.message = format!("graph `{}`: {}", g.name, e.message);
            }
            e
        })?;
        programs.push((g, p, symbol));
    }
    emit_c_programs(&programs)
}

/// `Unsupported` unless `symbol` can name the generated entry point.
fn check_symbol(symbol: &str) -> Result<(), Diagnostic> {
    let ok = symbol.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && symbol.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ok || C_RESERVED.contains(&symbol) || HELPERS.iter().any(|(n, _)| *n == symbol) {
        return Err(diag!(Unsupported, "`{symbol}` cannot name the generated C function"));
    }
    Ok(())
}

/// [`emit_c_units_with`] for programs the caller has lowered already
/// (`programs[k].1` must be the lowering of `programs[k].0`), so a caller
/// that needs the [`Program`] too lowers once.
///
/// Errors: `Unsupported` as [`emit_c_units`] says.
pub fn emit_c_programs(programs: &[(&Graph, Program, &str)]) -> Result<String, Diagnostic> {
    let mut names = BTreeSet::new();
    for (_, p, symbol) in programs {
        let symbol = *symbol;
        check_symbol(symbol)?;
        let kernels = p.kernels.iter().map(|k| format!("tgc_{}_{symbol}", k.name));
        for name in kernels.chain([symbol.to_string()]) {
            if !names.insert(name.clone()) {
                return Err(diag!(Unsupported, "two functions of the C unit would be named `{name}`"));
            }
        }
    }
    Ok(print(programs))
}

/// C keywords, and names from the included headers the unit uses, that the
/// exported function must not take. Kernels are `tgc_k<n>_SYMBOL`, longer than
/// `SYMBOL` and unlike every helper; locals (`s_*`, `in*`, `out*`, `tmp*`)
/// may shadow `SYMBOL` inside its own body, harmlessly.
const C_RESERVED: &[&str] = &[
    "auto",
    "break",
    "case",
    "char",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "register",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
    "volatile",
    "while",
    "_Bool",
    "floord",
    "malloc",
    "free",
    "memcpy",
    "main",
    "exp2f",
    "log2f",
    "sqrtf",
    "fmaxf",
    "fminf",
    "NAN",
    "INFINITY",
    "INT32_MIN",
    "INT64_MAX",
    "INT64_MIN",
    "int32_t",
    "int64_t",
    "uint8_t",
    "uint16_t",
    "uint32_t",
    "uint64_t",
    "size_t",
];

/// Helper functions, emitted when used, in this order.
const HELPERS: &[(&str, &str)] = &[
    (
        "tgc_f16_to_f32",
        "static inline float tgc_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
    if (e == 0x1fu) {
        x = sign | 0x7f800000u | (m << 13);
    } else if (e != 0) {
        x = sign | ((e + 112u) << 23) | (m << 13);
    } else if (m == 0) {
        x = sign;
    } else { /* subnormal: normalise */
        e = 113u;
        while (!(m & 0x400u)) {
            m <<= 1;
            e -= 1;
        }
        x = sign | (e << 23) | ((m & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}",
    ),
    (
        "tgc_f32_to_f16",
        "/* Round to nearest even; overflow to infinity; NaN stays NaN. */
static inline uint16_t tgc_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return sign | 0x7e00u;
    if (ax >= 0x47800000u) return sign | 0x7c00u;
    if (ax >= 0x38800000u) { /* normal: rebias, round the 13 dropped bits */
        uint32_t r = ax - 0x38000000u;
        r += 0x0fffu + ((r >> 13) & 1u);
        return sign | (uint16_t)(r >> 13);
    }
    if (ax < 0x33000000u) return sign;
    uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u, shift = 126u - e;
    uint32_t r = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (r & 1u))) r += 1u;
    return sign | (uint16_t)r;
}",
    ),
    (
        "tgc_bf16_to_f32",
        "static inline float tgc_bf16_to_f32(uint16_t h)
{
    uint32_t x = (uint32_t)h << 16;
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}",
    ),
    (
        "tgc_f32_to_bf16",
        "/* Round to nearest even; NaN stays NaN. */
static inline uint16_t tgc_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}",
    ),
    ("tgc_round_f16", "static inline float tgc_round_f16(float x) { return tgc_f16_to_f32(tgc_f32_to_f16(x)); }"),
    ("tgc_round_bf16", "static inline float tgc_round_bf16(float x) { return tgc_bf16_to_f32(tgc_f32_to_bf16(x)); }"),
    (
        "tgc_f32_to_i32",
        "/* Truncation toward zero to int64 (NaN to 0, saturating), then wrap to int32. */
static inline int32_t tgc_f32_to_i32(float x)
{
    int64_t v;
    if (x != x) v = 0;
    else if (x >= 9223372036854775807.0f) v = INT64_MAX;
    else if (x <= -9223372036854775808.0f) v = INT64_MIN;
    else v = (int64_t)x;
    return (int32_t)(uint32_t)(uint64_t)v;
}",
    ),
    ("tgc_max_f32", "/* NaN if either is NaN, as the interpreter. */\nstatic inline float tgc_max_f32(float a, float b) { return (a != a || b != b) ? NAN : fmaxf(a, b); }"),
    ("tgc_min_f32", "/* NaN if either is NaN, as the interpreter. */\nstatic inline float tgc_min_f32(float a, float b) { return (a != a || b != b) ? NAN : fminf(a, b); }"),
    ("tgc_relu_f32", "static inline float tgc_relu_f32(float x) { return x < 0.0f ? 0.0f : x; }"),
    ("tgc_add_i32", "static inline int32_t tgc_add_i32(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }"),
    ("tgc_sub_i32", "static inline int32_t tgc_sub_i32(int32_t a, int32_t b) { return (int32_t)((uint32_t)a - (uint32_t)b); }"),
    ("tgc_mul_i32", "static inline int32_t tgc_mul_i32(int32_t a, int32_t b) { return (int32_t)((uint32_t)a * (uint32_t)b); }"),
    ("tgc_neg_i32", "static inline int32_t tgc_neg_i32(int32_t a) { return (int32_t)(0u - (uint32_t)a); }"),
    ("tgc_max_i32", "static inline int32_t tgc_max_i32(int32_t a, int32_t b) { return a > b ? a : b; }"),
    ("tgc_min_i32", "static inline int32_t tgc_min_i32(int32_t a, int32_t b) { return a < b ? a : b; }"),
];

/// Which helpers a helper calls.
fn helper_deps(name: &str) -> &'static [&'static str] {
    match name {
        "tgc_round_f16" => &["tgc_f16_to_f32", "tgc_f32_to_f16"],
        "tgc_round_bf16" => &["tgc_bf16_to_f32", "tgc_f32_to_bf16"],
        _ => &[],
    }
}

/// The C type a value of `dt` is computed in.
fn compute_ty(dt: DType) -> &'static str {
    match dt {
        DType::F16 | DType::BF16 | DType::F32 => "float",
        DType::I32 => "int32_t",
        DType::Bool => "uint8_t",
    }
}

/// The C type a buffer of `dt` stores.
fn storage_ty(dt: DType) -> &'static str {
    match dt {
        DType::F16 | DType::BF16 => "uint16_t",
        DType::F32 => "float",
        DType::I32 => "int32_t",
        DType::Bool => "uint8_t",
    }
}

/// The printer's state: the program and the helpers used so far.
struct Printer<'a> {
    g: &'a Graph,
    p: &'a Program,
    used: BTreeSet<&'static str>,
}

impl Printer<'_> {
    fn call(&mut self, helper: &'static str, args: &[String]) -> String {
        self.used.insert(helper);
        format!("{helper}({})", args.join(", "))
    }

    fn literal(&self, value: f64, dt: DType) -> String {
        match dt {
            DType::F16 | DType::BF16 | DType::F32 => {
                let v = value as f32;
                if v.is_nan() {
                    "NAN".into()
                } else if v.is_infinite() {
                    if v > 0.0 {
                        "INFINITY".into()
                    } else {
                        "(-INFINITY)".into()
                    }
                } else if v.is_sign_negative() {
                    format!("({v:?}f)")
                } else {
                    format!("{v:?}f")
                }
            }
            DType::I32 => match value as i32 {
                i32::MIN => "INT32_MIN".into(),
                v if v < 0 => format!("({v})"),
                v => v.to_string(),
            },
            DType::Bool => if value != 0.0 { "1" } else { "0" }.into(),
        }
    }

    /// `x` (computed as `from`) rounded to the precision of `to`.
    fn round_to(&mut self, x: String, to: DType) -> String {
        match to {
            DType::F16 => self.call("tgc_round_f16", &[x]),
            DType::BF16 => self.call("tgc_round_bf16", &[x]),
            _ => x,
        }
    }

    fn cast(&mut self, x: String, from: DType, to: DType) -> String {
        use DType::*;
        match (from, to) {
            _ if from == to => x,
            (F16 | BF16 | F32, F32) => x,
            (F16 | BF16 | F32, F16 | BF16) => self.round_to(x, to),
            (F16 | BF16 | F32, I32) => self.call("tgc_f32_to_i32", &[x]),
            (F16 | BF16 | F32, Bool) => format!("(uint8_t)({x} != 0.0f)"),
            (I32, F16 | BF16 | F32) => self.round_to(format!("(float){x}"), to),
            (I32, Bool) => format!("(uint8_t)({x} != 0)"),
            (Bool, F16 | BF16 | F32) => format!("(float){x}"),
            (Bool, I32) => format!("(int32_t){x}"),
            (I32 | Bool, _) => x,
        }
    }

    fn unary(&mut self, op: UnaryOp, x: String, dt: DType) -> String {
        if dt == DType::I32 {
            return match op {
                UnaryOp::Neg => self.call("tgc_neg_i32", &[x]),
                _ => self.call("tgc_max_i32", &[x, "0".into()]),
            };
        }
        match op {
            UnaryOp::Neg => format!("(-{x})"),
            UnaryOp::Relu => self.call("tgc_relu_f32", &[x]),
            UnaryOp::Exp2 => format!("exp2f({x})"),
            UnaryOp::Log2 => format!("log2f({x})"),
            UnaryOp::Sqrt => format!("sqrtf({x})"),
            UnaryOp::Rsqrt => format!("(1.0f / sqrtf({x}))"),
            UnaryOp::Recip => format!("(1.0f / {x})"),
        }
    }

    /// `op(a, b)` on operands of dtype `dt` (also the accumulator updates).
    fn binary(&mut self, op: BinaryOp, a: String, b: String, dt: DType) -> String {
        let infix = |o: &str| format!("({a} {o} {b})");
        match (op, dt) {
            (BinaryOp::Cmplt, _) => format!("(uint8_t){}", infix("<")),
            (BinaryOp::Cmpeq, _) => format!("(uint8_t){}", infix("==")),
            (BinaryOp::Add, DType::I32) => self.call("tgc_add_i32", &[a, b]),
            (BinaryOp::Sub, DType::I32) => self.call("tgc_sub_i32", &[a, b]),
            (BinaryOp::Mul, DType::I32) => self.call("tgc_mul_i32", &[a, b]),
            (BinaryOp::Max, DType::I32) => self.call("tgc_max_i32", &[a, b]),
            (BinaryOp::Min, DType::I32) => self.call("tgc_min_i32", &[a, b]),
            (BinaryOp::Add | BinaryOp::Max, DType::Bool) => format!("(uint8_t){}", infix("|")),
            (BinaryOp::Min | BinaryOp::Mul, DType::Bool) => format!("(uint8_t){}", infix("&")),
            (BinaryOp::Add, _) => infix("+"),
            (BinaryOp::Sub, _) => infix("-"),
            (BinaryOp::Mul, _) => infix("*"),
            (BinaryOp::Fdiv, _) => infix("/"),
            (BinaryOp::Max, _) => self.call("tgc_max_f32", &[a, b]),
            (BinaryOp::Min, _) => self.call("tgc_min_f32", &[a, b]),
        }
    }

    /// An expression. Every printed expression is a primary, postfix, unary or
    /// cast expression, or parenthesised, so it is safe as any operand.
    fn expr(&mut self, e: &Expr) -> String {
        match e {
            Expr::Load { buf, index, dtype } => {
                let at = format!("{}[{}]", self.p.buffer(*buf).name, bare(aff(index, Lang::C)));
                match dtype {
                    DType::F16 => self.call("tgc_f16_to_f32", &[at]),
                    DType::BF16 => self.call("tgc_bf16_to_f32", &[at]),
                    _ => at,
                }
            }
            Expr::Const { value, dtype } => self.literal(*value, *dtype),
            Expr::Acc { dtype } => self.round_to("acc".into(), *dtype),
            Expr::Reduce { id, dtype, .. } => self.round_to(format!("acc{id}"), *dtype),
            Expr::Unary { op, x } => {
                let xs = self.expr(x);
                self.unary(*op, xs, x.dtype())
            }
            Expr::Binary { op, a, b } => {
                let (sa, sb) = (self.expr(a), self.expr(b));
                self.binary(*op, sa, sb, a.dtype())
            }
            Expr::Cast { to, x } => {
                let xs = self.expr(x);
                self.cast(xs, x.dtype(), *to)
            }
            Expr::Where { cond, a, b } => format!("({} ? {} : {})", self.expr(cond), self.expr(a), self.expr(b)),
            Expr::Select { valid, then, otherwise } => {
                format!("(({}) ? {} : {})", guard(valid, Lang::C), self.expr(then), self.expr(otherwise))
            }
        }
    }

    fn kernel(&mut self, k: &Kernel, symbol: &str) -> String {
        let p = self.p;
        let out = p.buffer(k.out);
        let mut s = String::new();
        let _ = writeln!(s, "/* {} */", kernel_summary(self.g, p, k));
        let mut params: Vec<String> = k
            .reads()
            .into_iter()
            .map(|b| {
                let b = p.buffer(b);
                format!("const {}* restrict {}", storage_ty(b.dtype), b.name)
            })
            .collect();
        params.push(format!("{}* restrict {}", storage_ty(out.dtype), out.name));
        let used = k.symbols();
        params.extend(p.dims().filter(|x| used.contains(*x)).map(|x| format!("const int64_t {}", sym_name(x))));
        let _ = writeln!(s, "static void tgc_{}_{symbol}({})\n{{\n#pragma scop", k.name, params.join(", "));
        self.nest(&mut s, k, &k.nest(), 1);
        s.push_str("#pragma endscop\n}\n");
        s
    }

    /// Prints `nest` at indentation `depth`, its points as [`Printer::point`].
    fn nest(&mut self, s: &mut String, k: &Kernel, nest: &Nest, depth: usize) {
        match nest {
            Nest::Loop(l, body) => {
                let step = dim(&l.step, Lang::C);
                let _ = writeln!(
                    s,
                    "{:w$}for (int64_t i{v} = {}; i{v} < {}; i{v} += {step}) {{",
                    "",
                    bound(&l.lo, Lang::C),
                    bound(&l.hi, Lang::C),
                    v = l.var,
                    w = depth * 4
                );
                self.nest(s, k, body, depth + 1);
                let _ = writeln!(s, "{:w$}}}", "", w = depth * 4);
            }
            Nest::Seq(parts) => parts.iter().for_each(|n| self.nest(s, k, n, depth)),
            Nest::Point => self.point(s, k, depth),
        }
    }

    /// One output point at indentation `depth`: the reduction, then the store.
    fn point(&mut self, s: &mut String, k: &Kernel, depth: usize) {
        let p = self.p;
        let out = p.buffer(k.out);
        let mut depth = depth;
        let open = |s: &mut String, depth: &mut usize, var: usize, extent: &crate::sym::Dim| {
            let _ = writeln!(
                s,
                "{:w$}for (int64_t i{var} = 0; i{var} < {}; i{var} += 1) {{",
                "",
                dim(extent, Lang::C),
                w = *depth * 4
            );
            *depth += 1;
        };
        if let Some(r) = &k.reduce {
            let init = self.literal(r.op.identity(r.dtype), r.dtype);
            let _ = writeln!(s, "{:w$}{} acc = {init};", "", compute_ty(r.dtype), w = depth * 4);
            let body_depth = depth;
            for (j, d) in r.loops.iter().enumerate() {
                open(s, &mut depth, k.loops.len() + j, d);
            }
            for e in k.computed_at() {
                let Expr::Reduce { id, op, dtype, first, loops, guard: cond, value, .. } = e else { continue };
                let init = self.literal(op.identity(*dtype), *dtype);
                let _ = writeln!(s, "{:w$}{} acc{id} = {init};", "", compute_ty(*dtype), w = depth * 4);
                let outer = depth;
                if !cond.is_empty() {
                    let _ = writeln!(s, "{:w$}if ({}) {{", "", bare(guard(cond, Lang::C)), w = depth * 4);
                    depth += 1;
                }
                for (j, d) in loops.iter().enumerate() {
                    open(s, &mut depth, *first as usize + j, d);
                }
                let x = self.expr(value);
                let update = self.binary(update_op(*op), format!("acc{id}"), x, *dtype);
                let _ = writeln!(s, "{:w$}acc{id} = {update};", "", w = depth * 4);
                while depth > outer {
                    depth -= 1;
                    let _ = writeln!(s, "{:w$}}}", "", w = depth * 4);
                }
            }
            let x = self.expr(&r.value);
            let update = self.binary(update_op(r.op), "acc".into(), x, r.dtype);
            let _ = writeln!(s, "{:w$}acc = {update};", "", w = depth * 4);
            while depth > body_depth {
                depth -= 1;
                let _ = writeln!(s, "{:w$}}}", "", w = depth * 4);
            }
        }
        let v = self.expr(&k.value);
        let stored = match out.dtype {
            DType::F16 => self.call("tgc_f32_to_f16", &[v]),
            DType::BF16 => self.call("tgc_f32_to_bf16", &[v]),
            _ => v,
        };
        let _ = writeln!(s, "{:w$}{}[{}] = {stored};", "", out.name, bare(aff(&k.store_index, Lang::C)), w = depth * 4);
    }
}

/// The binary op that folds one value into a `REDUCE` accumulator.
fn update_op(op: ReduceOp) -> BinaryOp {
    match op {
        ReduceOp::Sum => BinaryOp::Add,
        ReduceOp::Max => BinaryOp::Max,
        ReduceOp::Min => BinaryOp::Min,
    }
}

/// The whole translation unit: one comment block per graph, the includes
/// and helpers, then each graph's kernels and entry point.
fn print(units: &[(&Graph, Program, &str)]) -> String {
    let mut used = BTreeSet::new();
    let mut bodies = Vec::new();
    for &(g, ref p, symbol) in units {
        let mut pr = Printer { g, p, used: BTreeSet::new() };
        let mut body = String::new();
        for k in &p.kernels {
            let _ = writeln!(body, "{}", pr.kernel(k, symbol));
        }
        body.push_str(&entry(p, symbol));
        used.extend(pr.used);
        bodies.push(body);
    }
    let mut s = String::new();
    for (_, p, symbol) in units {
        s.push_str(&header(p, symbol));
    }
    s.push_str("#include <math.h>\n#include <stdint.h>\n#include <stdlib.h>\n#include <string.h>\n\n");
    s.push_str("#define floord(n, d) (((n) < 0) ? -((-(n) + (d) - 1) / (d)) : (n) / (d))\n\n");
    let mut needed: BTreeSet<&str> = used.clone();
    for h in &used {
        needed.extend(helper_deps(h));
    }
    for (name, code) in HELPERS {
        if needed.contains(name) {
            let _ = writeln!(s, "{code}\n");
        }
    }
    s.push_str(&bodies.join("\n"));
    s
}

/// The comment block that documents one graph's entry point.
fn header(p: &Program, symbol: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "/* Generated by tgc from graph `{}`: C11, one kernel per loop nest. Do not edit.",
        comment_text(&p.name)
    );
    let _ =
        writeln!(s, " *\n * int32_t {symbol}(const void* const* inputs, void* const* outputs, const int64_t* dims)");
    for b in &p.buffers {
        let dims: Vec<String> = b.shape.iter().map(|d| d.to_string()).collect();
        let what = match b.role {
            Role::Input(k) => format!("inputs[{k}]"),
            Role::Output(k) => format!("outputs[{k}]"),
            Role::Temp => continue,
        };
        let _ = writeln!(
            s,
            " *   {what}: {} {}[{}]",
            comment_text(&b.label),
            b.dtype.json_name(),
            comment_text(&dims.join(", "))
        );
    }
    let syms: Vec<String> = p.dims().enumerate().map(|(k, n)| format!("dims[{k}] = {n}")).collect();
    if !syms.is_empty() {
        let _ = writeln!(s, " *   {}", syms.join(", "));
    }
    s.push_str(" * Returns 0; 1 when an allocation fails; 2 when the dims break a requirement of the graph.\n */\n");
    s
}

/// The exported function: dims, checks, buffers, kernel calls, frees.
fn entry(p: &Program, symbol: &str) -> String {
    let mut s = format!("int32_t {symbol}(const void* const* inputs, void* const* outputs, const int64_t* dims)\n{{\n");
    if p.symbols.is_empty() && p.tiles.is_empty() {
        s.push_str("    (void)dims;\n");
    }
    for (k, n) in p.dims().enumerate() {
        let _ = writeln!(s, "    const int64_t {} = dims[{k}];", sym_name(n));
    }
    for c in &p.checks {
        let rel = match c.rel {
            Rel::Eq => "==",
            Rel::Le => "<=",
        };
        let _ = writeln!(
            s,
            "    if (!({} {rel} {})) return 2; /* {} */",
            dim(&c.lhs, Lang::C),
            dim(&c.rhs, Lang::C),
            comment_text(&c.what)
        );
    }
    let used: BTreeSet<_> = p.kernels.iter().flat_map(|k| k.reads().into_iter().chain([k.out])).collect();
    let mut temps = Vec::new();
    for (i, b) in p.buffers.iter().enumerate() {
        if !used.contains(&BufId(i as u32)) {
            continue;
        }
        let ty = storage_ty(b.dtype);
        match b.role {
            Role::Input(k) => {
                let _ = writeln!(s, "    const {ty}* {} = (const {ty}*)inputs[{k}];", b.name);
            }
            Role::Output(k) => {
                let _ = writeln!(s, "    {ty}* {} = ({ty}*)outputs[{k}];", b.name);
            }
            Role::Temp => {
                let n = dim(&crate::sym::Dim::product(&b.shape), Lang::C);
                let _ = writeln!(
                    s,
                    "    {ty}* {} = ({ty}*)malloc((size_t){n} * sizeof({ty})); /* {} */",
                    b.name,
                    comment_text(&b.label)
                );
                temps.push(b.name.clone());
            }
        }
    }
    let uses =
        |f: fn(Role) -> bool| p.buffers.iter().enumerate().any(|(i, b)| f(b.role) && used.contains(&BufId(i as u32)));
    if !uses(|r| matches!(r, Role::Input(_))) {
        s.push_str("    (void)inputs;\n");
    }
    if !uses(|r| matches!(r, Role::Output(_))) {
        s.push_str("    (void)outputs;\n");
    }
    let frees = temps.iter().map(|t| format!("free({t});")).collect::<Vec<_>>().join(" ");
    if !temps.is_empty() {
        let any_null: Vec<String> = temps.iter().map(|t| format!("!{t}")).collect();
        let _ = writeln!(s, "    if ({}) {{\n        {frees}\n        return 1;\n    }}", any_null.join(" || "));
    }
    for k in &p.kernels {
        let mut args: Vec<String> = k.reads().into_iter().map(|b| p.buffer(b).name.clone()).collect();
        args.push(p.buffer(k.out).name.clone());
        let syms = k.symbols();
        args.extend(p.dims().filter(|x| syms.contains(*x)).map(|x| sym_name(x)));
        let _ = writeln!(s, "    tgc_{}_{symbol}({});", k.name, args.join(", "));
    }
    if !temps.is_empty() {
        let _ = writeln!(s, "    {frees}");
    }
    s.push_str("    return 0;\n}\n");
    s
}

//! The Rust printer: the same loop nests as [`super::c`], as Rust source text
//! for the `tgc::kernel!` proc-macro (which must work in crates without a
//! build script). The text is one item:
//!
//! ```text
//! pub fn body(inputs: (&[T0], &[T1], …), outputs: (&mut [U0], …), dims: &[i64])
//!     -> ::core::result::Result<(), ::std::string::String>
//! ```
//!
//! - `inputs` in `Graph::inputs()` order, `outputs` in `Graph::outputs` order
//!   (1-tuples as `(&[T],)`, none as `()`), `dims` in `Graph::symbols` order,
//!   then the run-time tile sizes of a tile plan ([`emit_rust_with`]; the
//!   macro has none), each checked ≥ 1; a tile loop is a `step_by`;
//! - element types `f32`, `i32`, `bool`, `{crate_path}::half::f16` and
//!   `{crate_path}::half::bf16`; slices are dense row-major;
//! - it returns `Err` (writing nothing) when `dims` has the wrong length, the
//!   sizes break a check of [`crate::cpu::Program::checks`], or a slice's
//!   length is not its shape's element count; then it runs the kernels
//!   (nested `fn`s) and cannot fail.
//!
//! The item carries `#[allow(unused_parens, unused_variables, unused_mut,
//! non_snake_case, clippy::all)]`: generated expressions are fully
//! parenthesised, unused inputs keep their names, symbols keep their case.

use std::collections::BTreeSet;
use std::fmt::Write;

use crate::cpu::loop_ir::{BufId, Expr, Kernel, Nest, Program, Reduction, Role, Scan, SCAN_BLOCK, SCAN_LANES};
use crate::cpu::packed::{self, Contraction, PackOrder, Side, MR, NR};
use crate::cpu::{lanes, lower_with, Options};
use crate::diag;
use crate::diag::Diagnostic;
use crate::sym::Dim;
use crate::tiny::{BinaryOp, Graph, ReduceOp, Rel, UnaryOp};
use crate::DType;

use super::{
    aff, bound, comment_text, dim, guard, kernel_summary, sym_name, window_start, Lang, Panel, A_PANEL, B_PANEL,
};

/// Generates the Rust text of `g`; `crate_path` is the path of the facade
/// crate that re-exports `half` (e.g. `::tgc`).
///
/// Errors: `Unsupported` when `crate_path` is not a path; any error of
/// [`lower`].
pub fn emit_rust(g: &Graph, crate_path: &str) -> Result<String, Diagnostic> {
    emit_rust_with(g, crate_path, &Options::default())
}

/// [`emit_rust`], lowering under `opts` ([`lower_with`]): with a tile plan,
/// `body` takes the tile sizes in `dims` after the graph's symbols and
/// returns `Err` for one below 1.
pub fn emit_rust_with(g: &Graph, crate_path: &str, opts: &Options) -> Result<String, Diagnostic> {
    check_crate_path(crate_path)?;
    let p = lower_with(g, opts)?;
    Ok(print(g, &p, crate_path))
}

/// [`emit_rust`] for a program the caller has lowered already (`p` must be
/// the lowering of `g`), so a caller that needs the [`Program`] too lowers
/// once.
///
/// Errors: `Unsupported` when `crate_path` is not a path.
pub fn emit_rust_program(g: &Graph, p: &Program, crate_path: &str) -> Result<String, Diagnostic> {
    check_crate_path(crate_path)?;
    Ok(print(g, p, crate_path))
}

fn check_crate_path(crate_path: &str) -> Result<(), Diagnostic> {
    let segs: Vec<&str> = crate_path.strip_prefix("::").unwrap_or(crate_path).split("::").collect();
    let ident = |s: &str| {
        s.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    if !segs.iter().all(|s| ident(s)) {
        return Err(diag!(Unsupported, "`{crate_path}` is not a Rust path"));
    }
    Ok(())
}

/// The Rust type a buffer of `dt` stores (after `use {crate}::half::{f16, bf16}`).
fn storage_ty(dt: DType) -> &'static str {
    match dt {
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        DType::F32 => "f32",
        DType::I32 => "i32",
        DType::Bool => "bool",
    }
}

/// The Rust type a value of `dt` is computed in.
fn compute_ty(dt: DType) -> &'static str {
    match dt {
        DType::F16 | DType::BF16 | DType::F32 => "f32",
        DType::I32 => "i32",
        DType::Bool => "bool",
    }
}

fn literal(value: f64, dt: DType) -> String {
    match dt {
        DType::F16 | DType::BF16 | DType::F32 => {
            let v = value as f32;
            if v.is_nan() {
                "f32::NAN".into()
            } else if v.is_infinite() {
                if v > 0.0 {
                    "f32::INFINITY".into()
                } else {
                    "f32::NEG_INFINITY".into()
                }
            } else if v.is_sign_negative() {
                format!("({v:?}f32)")
            } else {
                format!("{v:?}f32")
            }
        }
        DType::I32 => match value as i32 {
            i32::MIN => "i32::MIN".into(),
            v if v < 0 => format!("({v}i32)"),
            v => format!("{v}i32"),
        },
        DType::Bool => (value != 0.0).to_string(),
    }
}

/// `x` rounded to the precision of `to`.
fn round_to(x: String, to: DType) -> String {
    match to {
        DType::F16 | DType::BF16 => format!("{}::from_f32({x}).to_f32()", storage_ty(to)),
        _ => x,
    }
}

fn cast(x: String, from: DType, to: DType) -> String {
    use DType::*;
    match (from, to) {
        _ if from == to => x,
        (F16 | BF16 | F32, F32) => x,
        (F16 | BF16 | F32, F16 | BF16) => round_to(x, to),
        // Rust's `as` is the rule of `DType::cast`: truncating, saturating, NaN to 0.
        (F16 | BF16 | F32, I32) => format!("({x} as i32)"),
        (F16 | BF16 | F32, Bool) => format!("({x} != 0.0f32)"),
        (I32, F16 | BF16 | F32) => round_to(format!("({x} as f32)"), to),
        (I32, Bool) => format!("({x} != 0i32)"),
        (Bool, F16 | BF16 | F32) => format!("({x} as u8 as f32)"),
        (Bool, I32) => format!("({x} as i32)"),
        (I32 | Bool, _) => x,
    }
}

fn unary(op: UnaryOp, x: String, dt: DType) -> String {
    if dt == DType::I32 {
        return match op {
            UnaryOp::Neg => format!("{x}.wrapping_neg()"),
            _ => format!("::core::cmp::max({x}, 0i32)"),
        };
    }
    match op {
        UnaryOp::Neg => format!("(-{x})"),
        UnaryOp::Relu => format!("relu_f32({x})"),
        UnaryOp::Exp2 => format!("exp2_f32({x})"),
        UnaryOp::Log2 => format!("{x}.log2()"),
        UnaryOp::Sqrt => format!("{x}.sqrt()"),
        UnaryOp::Rsqrt => format!("(1.0f32 / {x}.sqrt())"),
        UnaryOp::Recip => format!("(1.0f32 / {x})"),
    }
}

/// `op(a, b)` on operands of dtype `dt` (also the accumulator updates).
fn binary(op: BinaryOp, a: String, b: String, dt: DType) -> String {
    let infix = |o: &str| format!("({a} {o} {b})");
    match (op, dt) {
        (BinaryOp::Cmplt, _) => infix("<"),
        (BinaryOp::Cmpeq, _) => infix("=="),
        (BinaryOp::Add, DType::I32) => format!("{a}.wrapping_add({b})"),
        (BinaryOp::Sub, DType::I32) => format!("{a}.wrapping_sub({b})"),
        (BinaryOp::Mul, DType::I32) => format!("{a}.wrapping_mul({b})"),
        (BinaryOp::Max, DType::I32) => format!("::core::cmp::max({a}, {b})"),
        (BinaryOp::Min, DType::I32) => format!("::core::cmp::min({a}, {b})"),
        (BinaryOp::Add | BinaryOp::Max, DType::Bool) => infix("|"),
        (BinaryOp::Min | BinaryOp::Mul, DType::Bool) => infix("&"),
        (BinaryOp::Add, _) => infix("+"),
        (BinaryOp::Sub, _) => infix("-"),
        (BinaryOp::Mul, _) => infix("*"),
        (BinaryOp::Fdiv, _) => infix("/"),
        (BinaryOp::Max, _) => format!("max_f32({a}, {b})"),
        (BinaryOp::Min, _) => format!("min_f32({a}, {b})"),
    }
}

/// The new value of the accumulator `acc` of `k`'s sum `id` (as for
/// [`packed::fused_factors`]) after one more `value`: one `mul_add` for the
/// packed template's sums of products, else `op`.
fn update(p: &Program, k: &Kernel, id: Option<u32>, op: ReduceOp, acc: String, value: &Expr, dt: DType) -> String {
    match packed::fused_factors(k, id, value) {
        Some((x, y)) => format!("{}.mul_add({}, {acc})", expr(p, x), expr(p, y)),
        None => binary(op.combine(), acc, expr(p, value), dt),
    }
}

/// The stored element `at` of a buffer of `dtype` in its compute type
/// (`f16`/`bf16` widened to `f32`).
fn widen(at: String, dtype: DType) -> String {
    match dtype {
        DType::F16 | DType::BF16 => format!("{at}.to_f32()"),
        DType::F32 | DType::I32 | DType::Bool => at,
    }
}

/// An expression. Every printed expression is a primary or postfix
/// expression (names, literals, calls, method calls, indexing) or wrapped in
/// parentheses, so it is safe as an operand and as a method receiver.
fn expr(p: &Program, e: &Expr) -> String {
    match e {
        Expr::Load { buf, index, dtype } => {
            widen(format!("{}[{} as usize]", p.buffer(*buf).name, paren(aff(index, Lang::Rust))), *dtype)
        }
        Expr::Gather { buf, base, stride, extent, at, dtype } => {
            let pos = format!("gather_at({}, {})", expr(p, at), aff(extent, Lang::Rust));
            let index = format!("{} + {} * {pos}", aff(base, Lang::Rust), aff(stride, Lang::Rust));
            widen(format!("{}[({index}) as usize]", p.buffer(*buf).name), *dtype)
        }
        Expr::Const { value, dtype } => literal(*value, *dtype),
        Expr::Acc { dtype } => round_to("acc".into(), *dtype),
        Expr::Reduce { id, dtype, .. } => round_to(format!("acc{id}"), *dtype),
        Expr::Unary { op, x } => unary(*op, expr(p, x), x.dtype()),
        Expr::Binary { op, a, b } => binary(*op, expr(p, a), expr(p, b), a.dtype()),
        Expr::Cast { to, x } => cast(expr(p, x), x.dtype(), *to),
        Expr::Where { cond, a, b } => format!("(if {} {{ {} }} else {{ {} }})", expr(p, cond), expr(p, a), expr(p, b)),
        Expr::Select { valid, then, otherwise } => {
            format!("(if {} {{ {} }} else {{ {} }})", guard(valid, Lang::Rust), expr(p, then), expr(p, otherwise))
        }
    }
}

/// `s` wrapped in parentheses unless it is a plain name or already one
/// parenthesised group (for `… as usize`, which binds tighter than `*`).
fn paren(s: String) -> String {
    let simple = s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if simple || (s.starts_with('(') && super::encloses(&s)) {
        s
    } else {
        format!("({s})")
    }
}

fn kernel(g: &Graph, p: &Program, k: &Kernel, cp: &str) -> String {
    let out = p.buffer(k.out);
    let mut s = String::new();
    let _ = writeln!(s, "    // {}", kernel_summary(g, p, k));
    let mut params: Vec<String> = k
        .reads()
        .into_iter()
        .map(|b| {
            let b = p.buffer(b);
            format!("{}: &[{}]", b.name, storage_ty(b.dtype))
        })
        .collect();
    params.push(format!("{}: &mut [{}]", out.name, storage_ty(out.dtype)));
    let used = k.symbols();
    params.extend(p.dims().filter(|x| used.contains(*x)).map(|x| format!("{}: i64", sym_name(x))));
    // The body runs inside `cpu_rt::with_fma` (compiled with AVX2 and FMA
    // where the CPU has them), as the C kernels have their clones.
    let _ = writeln!(s, "    fn {}({}) {{ {cp}::__private::cpu_rt::with_fma(|| {{", k.name, params.join(", "));
    match (packed::of(k), &k.scan) {
        (Some(c), _) => packed(&mut s, p, k, c, cp),
        (None, Some(sc)) => scan(&mut s, p, k, sc),
        (None, None) => nest(&mut s, p, k, &k.nest(), 2),
    }
    let _ = writeln!(s, "    }}) }}");
    s
}

/// The body of a kernel on the packed contraction template
/// ([`crate::cpu::packed`]), as `super::c` prints it: tasks of a batch
/// point × `mpart` rows × `nc` columns (`cpu_rt::packed_tasks`, the C
/// kernels' split rule), each packing its panels and running the runtime's
/// micro-kernel (`cpu_rt::ukernel`) into its own piece of one sums buffer,
/// on the runtime's pool (`Rt::parallel_chunks`: the pieces are disjoint,
/// so the printed Rust needs no `unsafe`); then the epilogue of every task
/// on the caller's thread, the only writes to the kernel's output.
fn packed(s: &mut String, p: &Program, k: &Kernel, c: Contraction, cp: &str) {
    let pk = c.packed;
    let Some(r) = &k.reduce else { return };
    let rt = format!("{cp}::__private::cpu_rt");
    let extent = |axes: &[usize]| dim(&packed::extent(k, axes), Lang::Rust);
    let (m_ext, n_ext, batch_ext) = (extent(&pk.m), extent(&pk.n), extent(&pk.batch));
    let blocks = pk.blocks;
    // A pooled kernel's window: how many columns make one output point; a
    // task holds whole windows.
    let window = c.pooled.map(|_| dim(&Dim::product(&r.loops), Lang::Rust));
    let cap = match blocks.threads {
        0 => String::new(),
        n => format!("\n        let pk_rt = {rt}::Rt {{ threads: pk_rt.threads.min({n}), ..pk_rt }};"),
    };
    let _ = writeln!(
        s,
        "        let pk_rt = {rt}::Rt::current();{cap}
        let (pk_M, pk_N, pk_batch): (i64, i64, i64) = ({m_ext}, {n_ext}, {batch_ext});
        let pk_threads: i64 = {rt}::split_threads(pk_batch as f64 * pk_M as f64 * pk_N as f64 * ({k_all}) as f64, pk_rt.threads);
        let pk_rt = {rt}::Rt {{ threads: pk_threads, ..pk_rt }};
        let (pk_mpart, pk_nc): (i64, i64) = {rt}::packed_tasks(pk_M, pk_N, pk_batch, {nc}, pk_rt.threads, {in_place});{whole}
        let (pk_mt, pk_nt): (i64, i64) = ((pk_M + pk_mpart - 1) / pk_mpart, (pk_N + pk_nc - 1) / pk_nc);
        let pk_chunk: usize = (pk_mpart * ((pk_nc + {NR} - 1) / {NR} * {NR} + {NR})) as usize;
        let mut pk_sums: ::std::vec::Vec<f32> = {cp}::scratch::take(pk_chunk * (pk_batch * pk_mt * pk_nt) as usize);
        pk_rt.parallel_chunks(&mut pk_sums, pk_chunk, &|pk_t: i64, pk_c: &mut [f32]| {rt}::with_fma(|| {{",
        nc = blocks.nc,
        in_place = pk.a_order == PackOrder::Direct,
        k_all = dim(&Dim::product(c.k_loops), Lang::Rust),
        whole = window.as_ref().map_or(String::new(), |w| format!(
            "\n        let pk_w: i64 = {w};\n        let pk_nc: i64 = (pk_nc + pk_w - 1) / pk_w * pk_w;"
        )),
    );
    task_origin(s, k, &rt);
    let _ = writeln!(
        s,
        "            let pk_mc: i64 = {mc};
            let pk_kin: i64 = {k_inner};
            let pk_kstep: i64 = ({kc} / pk_kin).max(1);{a_panel}
            let mut pk_b: ::std::vec::Vec<f32> = {cp}::scratch::take((pk_np * pk_kstep * pk_kin) as usize);
            let mut pk_ko: i64 = 0;
            while pk_ko < {k_outer} {{
                let pk_ke: i64 = (pk_ko + pk_kstep).min({k_outer});
                let pk_kb: i64 = (pk_ke - pk_ko) * pk_kin;",
        mc = blocks.mc,
        k_inner = dim(&Dim::product(&c.k_loops[1..]), Lang::Rust),
        k_outer = dim(&c.k_loops[0], Lang::Rust),
        kc = blocks.kc,
        a_panel = if pk.a_order == PackOrder::Direct {
            ""
        } else {
            "\n            let mut pk_a: ::std::vec::Vec<f32> = CRATE::scratch::take((pk_mp.min(pk_mc) * pk_kstep * pk_kin) as usize);"
        }
        .replace("CRATE", cp),
    );
    // The `b` panel once per K block; the `a` panel per `mc` rows.
    pack(s, p, k, &c, &B_PANEL);
    s.push_str(
        "                for pk_ic in (0..pk_mp).step_by(pk_mc as usize) {
                let pk_icb: i64 = (pk_mp - pk_ic).min(pk_mc);\n",
    );
    let call = if pk.a_order == PackOrder::Direct {
        direct_call(p, &c, &rt)
    } else {
        pack(s, p, k, &c, &A_PANEL);
        format!(
            "                        {rt}::ukernel(pk_kb as usize, &pk_a[(pk_ir * pk_kb) as usize..], &pk_b[(pk_jr * pk_kb) as usize..], &mut pk_c[pk_ci..], pk_ldc as usize, (pk_nb - pk_jr).min({NR}) as usize, pk_ko > 0);\n"
        )
    };
    // The panels go back to the thread's pool, last taken first.
    let panels: &[&str] = if pk.a_order == PackOrder::Direct { &["pk_b"] } else { &["pk_b", "pk_a"] };
    let give: Vec<String> = panels.iter().map(|v| format!("{cp}::scratch::give({v});")).collect();
    let _ = writeln!(
        s,
        "                for pk_jr in (0..pk_np).step_by({NR}) {{
                    for pk_ir in (0..pk_icb).step_by({MR}) {{
                        let pk_ci = ((pk_ic + pk_ir) * pk_ldc + pk_jr) as usize;
{call}                    }}
                }}
                }}
                pk_ko = pk_ke;
            }}
            {}
        }}));
        for pk_t in 0i64..pk_batch * pk_mt * pk_nt {{
            let pk_c: &[f32] = &pk_sums[pk_t as usize * pk_chunk..];",
        give.join(" ")
    );
    task_origin(s, k, &rt);
    s.push_str("            for pk_i in 0i64..pk_mb {\n");
    decode(s, k, "pk_m0 + pk_i", &pk.m, 4);
    match c.pooled {
        None => {
            s.push_str("                for pk_j in 0i64..pk_nb {\n");
            decode(s, k, "pk_n0 + pk_j", &pk.n, 5);
            s.push_str("                    let acc: f32 = pk_c[(pk_i * pk_ldc + pk_j) as usize];\n");
        }
        Some(id) => {
            // Each window's columns, folded in the reduce loops' order.
            let (out_n, window) = pk.n.split_at(pk.n.len() - r.loops.len());
            let _ = writeln!(
                s,
                "                for pk_g in (0i64..pk_nb).step_by(pk_w as usize) {{
                    let mut acc: {} = {};",
                compute_ty(r.dtype),
                literal(r.op.identity(r.dtype), r.dtype)
            );
            decode(s, k, "(pk_n0 + pk_g) / pk_w", out_n, 5);
            s.push_str("                    for pk_j in pk_g..pk_g + pk_w {\n");
            decode(s, k, "pk_j - pk_g", window, 6);
            let update = binary(r.op.combine(), "acc".into(), expr(p, &r.value), r.dtype);
            let _ = writeln!(
                s,
                "                        let acc{id}: f32 = pk_c[(pk_i * pk_ldc + pk_j) as usize];
                        acc = {update};
                    }}"
            );
        }
    }
    let _ = writeln!(
        s,
        "                    {}[{} as usize] = {};
                }}
            }}
        }}
        {cp}::scratch::give(pk_sums);",
        p.buffer(k.out).name,
        paren(aff(&k.store_index, Lang::Rust)),
        stored(p, k),
    );
}

/// Task `pk_t`'s place: its first column `pk_n0` and row `pk_m0`, its
/// batch point (`i{v}` of each batch loop), and its valid and padded rows
/// and columns (`pk_mb`, `pk_nb`; `pk_mp`, `pk_np`), and its sums' row
/// stride `pk_ldc` (`rt::sums_stride`).
fn task_origin(s: &mut String, k: &Kernel, rt: &str) {
    s.push_str(
        "            let pk_n0: i64 = pk_t % pk_nt * pk_nc;
            let pk_t: i64 = pk_t / pk_nt;
            let pk_m0: i64 = pk_t % pk_mt * pk_mpart;
            let pk_t: i64 = pk_t / pk_mt;\n",
    );
    let pk = k.packed.as_ref().expect("a packed kernel");
    for &v in pk.batch.iter().rev() {
        let e = dim(&k.loops[v], Lang::Rust);
        let _ = writeln!(s, "            let i{v}: i64 = pk_t % {e};\n            let pk_t: i64 = pk_t / {e};");
        let _ = writeln!(s, "            let _ = i{v};");
    }
    let _ = writeln!(
        s,
        "            let _ = pk_t;
            let (pk_mb, pk_nb): (i64, i64) = ((pk_M - pk_m0).min(pk_mpart), (pk_N - pk_n0).min(pk_nc));
            let (pk_mp, pk_np): (i64, i64) = ((pk_mb + {MR} - 1) / {MR} * {MR}, (pk_nb + {NR} - 1) / {NR} * {NR});
            let pk_ldc: i64 = {rt}::sums_stride(pk_np);
            let _ = (pk_mp, pk_np, pk_ldc);"
    );
}

/// The micro-kernel call of a [`PackOrder::Direct`] `a`, as the C
/// printer's `direct_call`: the factor from its load at row `pk_m0 + pk_ic +
/// pk_ir` and the K block's first point, its row stride, the valid rows.
fn direct_call(p: &Program, c: &Contraction, rt: &str) -> String {
    let (buf, index, row) = c.direct_a().expect("called for an `a` read in place");
    let lda = dim(index.coeff(row as u32).expect("packed::direct admits a load that reads its row loop"), Lang::Rust);
    let mut out = format!("                        let i{row}: i64 = pk_m0 + pk_ic + pk_ir;\n");
    for j in 0..c.k_loops.len() {
        let at = if j == 0 { "pk_ko" } else { "0" };
        let _ = writeln!(out, "                        let i{v}: i64 = {at};", v = c.k_first + j);
    }
    let _ = writeln!(
        out,
        "                        {rt}::ukernel_direct(pk_kb as usize, &{}[{} as usize..], ({lda}) as usize, (pk_mb - pk_ic - pk_ir).min({MR}) as usize, &pk_b[(pk_jr * pk_kb) as usize..], &mut pk_c[pk_ci..], pk_ldc as usize, (pk_nb - pk_jr).min({NR}) as usize, pk_ko > 0);",
        p.buffer(buf).name,
        paren(aff(index, Lang::Rust))
    );
    out
}

/// Packs `e` into a panel for the K block `pk_ko..pk_ke` (`pk_kb` values a
/// row), as the C printer's `pack` does: row `j` (a point of `axes` at
/// `origin + j`) at `j / width · pk_kb · width + q · width + j % width` for
/// the `q`-th K point, zero past the valid rows, in `order`.
fn pack(s: &mut String, p: &Program, k: &Kernel, c: &Contraction, panel: &Panel) {
    let Panel { side, name, rows, valid, origin, width } = *panel;
    let (e, axes, order) = c.factor(side);
    if let Some(cp) = c.copy(k, side, &p.buffers, packed::COPY_RUN) {
        return pack_copy(s, p, k, c, panel, &cp);
    }
    let k_loops = |s: &mut String, depth: usize| pack_k_loops(s, c, depth);
    let close = close_loops;
    match order {
        PackOrder::Direct => unreachable!("a factor read in place is not packed"),
        PackOrder::DepthInner => {
            let window = if side == Side::B { c.window_copy(k, &p.buffers) } else { None };
            if window.is_some() {
                s.push_str("                let mut pk_skip: i64 = 0;\n");
            }
            let _ = writeln!(s, "                for pk_j in 0i64..{rows} {{");
            if window.is_some() {
                s.push_str("                    if pk_skip > 0 {\n                        pk_skip -= 1;\n                        continue;\n                    }\n");
            }
            let _ = writeln!(
                s,
                "                    let pk_at: usize = (pk_j / {width} * pk_kb * {width} + pk_j % {width}) as usize;
                    if pk_j < {valid} {{"
            );
            decode(s, k, &format!("{origin} + pk_j"), axes, 6);
            if let Some(wc) = &window {
                pack_window(s, c, panel, &p.buffer(wc.copy.buf).name, wc);
            }
            s.push_str("                        let mut pk_q: usize = pk_at;\n");
            let fill = |s: &mut String, x: &str, at: usize| fill_row(s, c, name, x, width, at);
            match c.interior(side) {
                Some(int) => {
                    // A row whose every guard holds takes the guard-free value.
                    let _ = writeln!(s, "                        if {} {{", guard(&int.rows, Lang::Rust));
                    fill(s, &expr(p, &int.value), 7);
                    s.push_str("                        } else {\n");
                    fill(s, &expr(p, e), 7);
                    s.push_str("                        }\n");
                }
                None => fill(s, &expr(p, e), 6),
            }
            let _ = writeln!(
                s,
                "                    }} else {{
                        for pk_q in 0..pk_kb as usize {{
                            {name}[pk_at + pk_q * {width}] = 0.0f32;
                        }}
                    }}
                }}"
            );
        }
        PackOrder::Grouped => {
            let _ = writeln!(
                s,
                "                for pk_jb in (0i64..{rows}).step_by({width}) {{
                    let mut pk_at: usize = (pk_jb * pk_kb) as usize;"
            );
            let depth = k_loops(s, 5);
            pack_group(s, p, k, e, panel, axes, depth);
            let _ = writeln!(s, "{:w$}pk_at += {width};", "", w = depth * 4);
            close(s, depth, 4);
        }
        PackOrder::WidthInner => {
            s.push_str("                let mut pk_q: i64 = 0;\n");
            let depth = k_loops(s, 4);
            let w = depth * 4;
            let _ = writeln!(
                s,
                "{:w$}for pk_jb in (0i64..{rows}).step_by({width}) {{
{:w$}    let pk_at: usize = (pk_jb * pk_kb + pk_q * {width}) as usize;",
                "", ""
            );
            pack_group(s, p, k, e, panel, axes, depth + 1);
            let _ = writeln!(s, "{:w$}}}\n{:w$}pk_q += 1;", "", "");
            close(s, depth, 4);
        }
    }
}

/// A whole pooling window of a pooled kernel's `b` panel at the decoded
/// pixel `pk_j` (indentation 6), as the C printer's `pack_window` packs
/// it: one slice copy of `run` values per row of the window at each K
/// point, then `pk_skip` past the window's other pixels.
fn pack_window(s: &mut String, c: &Contraction, panel: &Panel, src: &str, wc: &packed::WindowCopy) {
    let Panel { name, width, .. } = *panel;
    let (points, run) = (wc.points, wc.run);
    let _ = writeln!(
        s,
        "                        if {} {{
                            // A pooling window inside the image, a run of {run} values per row of it.
                            let pk_wb: i64 = {};
                            let mut pk_q: usize = pk_at;",
        window_start(wc, panel, Lang::Rust),
        aff(&wc.copy.row, Lang::Rust)
    );
    let depth = pack_k_loops(s, c, 7);
    let w = depth * 4;
    let _ = writeln!(s, "{:w$}let pk_src: i64 = pk_wb + {};", "", aff(&wc.copy.rest, Lang::Rust));
    for (r, off) in wc.offsets.iter().enumerate() {
        let _ = writeln!(
            s,
            "{:w$}let pk_from = (pk_src + {}) as usize;
{:w$}{name}[pk_q + {at}..pk_q + {at} + {run}].copy_from_slice(&{src}[pk_from..pk_from + {run}]);",
            "",
            aff(off, Lang::Rust),
            "",
            at = r * run
        );
    }
    let _ = writeln!(s, "{:w$}pk_q += {width};", "");
    close_loops(s, depth, 7);
    let _ = writeln!(
        s,
        "                            pk_skip = {};
                            continue;
                        }}",
        points - 1
    );
}

/// Opens the K loops of a panel's K block (`pk_ko..pk_ke` for the first)
/// at indentation `depth`; returns the depth inside.
fn pack_k_loops(s: &mut String, c: &Contraction, mut depth: usize) -> usize {
    for (j, d) in c.k_loops.iter().enumerate() {
        let range = if j == 0 { "pk_ko..pk_ke".to_string() } else { format!("0i64..{}", dim(d, Lang::Rust)) };
        let _ = writeln!(s, "{:w$}for i{v} in {range} {{", "", v = c.k_first + j, w = depth * 4);
        depth += 1;
    }
    depth
}

/// One row of panel `name` from element `pk_q` on (a step of `width` per
/// K point): the K loops at indentation `depth`, `x` each element's value.
fn fill_row(s: &mut String, c: &Contraction, name: &str, x: &str, width: usize, depth: usize) {
    let inner = pack_k_loops(s, c, depth);
    let _ = writeln!(s, "{:w$}{name}[pk_q] = {x};\n{:w$}pk_q += {width};", "", "", w = inner * 4);
    close_loops(s, inner, depth);
}

/// Closes loops opened down to indentation `depth`, up to `to`.
fn close_loops(s: &mut String, mut depth: usize, to: usize) {
    while depth > to {
        depth -= 1;
        let _ = writeln!(s, "{:w$}}}", "", w = depth * 4);
    }
}

/// A [`PackOrder::DepthInner`] factor that is a copy, as the C printer's
/// `pack_copy` packs it: per group of `width` rows each row's part of the
/// subscript once, then at each K point every row's value copied from
/// `buf[rest + part]`, a block of [`packed::COPY_RUN`] interior rows with
/// consecutive parts as one slice copy; rows outside the interior (or
/// past the valid rows) packed again row by row with their guards.
fn pack_copy(s: &mut String, p: &Program, k: &Kernel, c: &Contraction, panel: &Panel, cp: &packed::RowCopy) {
    let Panel { side, name, rows, valid, origin, width } = *panel;
    let (e, axes, _) = c.factor(side);
    let run = packed::COPY_RUN;
    let src = &p.buffer(cp.buf).name;
    let interior = if cp.interior.is_empty() { "true".to_string() } else { guard(&cp.interior, Lang::Rust) };
    let blocks = if width % run == 0 { width / run } else { 0 };
    let k_loops = |s: &mut String, depth: usize| pack_k_loops(s, c, depth);
    let close = close_loops;
    let _ = writeln!(
        s,
        "                for pk_jb in (0i64..{rows}).step_by({width}) {{
                    // Each row's part of the subscript (pk_ok: the row is interior); rows to pack one by one.
                    let mut pk_off = [0i64; {width}];
                    let mut pk_ok = [false; {width}];
                    let mut pk_edge = [0usize; {width}];
                    let mut pk_ne = 0usize;
                    let mut pk_in: Option<usize> = None;
                    for pk_jj in 0..{width} {{
                        if pk_jb + (pk_jj as i64) < {valid} {{"
    );
    decode(s, k, &format!("{origin} + pk_jb + pk_jj as i64"), axes, 7);
    let _ = writeln!(
        s,
        "                            if {interior} {{
                                pk_off[pk_jj] = {row};
                                pk_ok[pk_jj] = true;
                                pk_in = Some(pk_jj);
                            }}
                        }}
                        if !pk_ok[pk_jj] {{
                            pk_edge[pk_ne] = pk_jj;
                            pk_ne += 1;
                        }}
                    }}
                    if let Some(pk_in) = pk_in {{
                        // The other rows copy an interior row's values, packed again below.
                        for pk_e in 0..pk_ne {{
                            pk_off[pk_edge[pk_e]] = pk_off[pk_in];
                        }}",
        row = aff(&cp.row, Lang::Rust)
    );
    if blocks > 0 {
        let _ = writeln!(
            s,
            "                        // Blocks of {run} interior rows whose parts are consecutive: one slice copy.
                        let mut pk_vec = [true; {blocks}];
                        for pk_m in 0..{blocks} {{
                            for pk_t in 0..{run} {{
                                let pk_jj = pk_m * {run} + pk_t;
                                pk_vec[pk_m] &= pk_ok[pk_jj] && pk_off[pk_jj] == pk_off[pk_m * {run}] + pk_t as i64;
                            }}
                        }}"
        );
    }
    s.push_str("                        let mut pk_at: usize = (pk_jb * pk_kb) as usize;\n");
    let depth = k_loops(s, 6);
    let w = depth * 4;
    let _ = writeln!(s, "{:w$}let pk_src: i64 = {};", "", aff(&cp.rest, Lang::Rust));
    if blocks > 0 {
        let _ = writeln!(
            s,
            "{:w$}for pk_m in 0..{blocks} {{
{:w$}    let pk_to = pk_at + pk_m * {run};
{:w$}    if pk_vec[pk_m] {{
{:w$}        let pk_from = (pk_src + pk_off[pk_m * {run}]) as usize;
{:w$}        {name}[pk_to..pk_to + {run}].copy_from_slice(&{src}[pk_from..pk_from + {run}]);
{:w$}    }} else {{
{:w$}        for pk_t in 0..{run} {{
{:w$}            {name}[pk_to + pk_t] = {src}[(pk_src + pk_off[pk_m * {run} + pk_t]) as usize];
{:w$}        }}
{:w$}    }}
{:w$}}}",
            "", "", "", "", "", "", "", "", "", "", ""
        );
    } else {
        let _ = writeln!(
            s,
            "{:w$}for pk_jj in 0..{width} {{
{:w$}    {name}[pk_at + pk_jj] = {src}[(pk_src + pk_off[pk_jj]) as usize];
{:w$}}}",
            "", "", ""
        );
    }
    let _ = writeln!(s, "{:w$}pk_at += {width};", "");
    close(s, depth, 6);
    let _ = writeln!(
        s,
        "                    }} else {{
                        for pk_jj in 0..{width} {{
                            pk_edge[pk_jj] = pk_jj;
                        }}
                        pk_ne = {width};
                    }}
                    for pk_e in 0..pk_ne {{
                        let pk_j: i64 = pk_jb + pk_edge[pk_e] as i64;
                        let pk_at: usize = (pk_jb * pk_kb) as usize + pk_edge[pk_e];
                        if pk_j < {valid} {{"
    );
    decode(s, k, &format!("{origin} + pk_j"), axes, 7);
    s.push_str("                            let mut pk_q: usize = pk_at;\n");
    fill_row(s, c, name, &expr(p, e), width, 7);
    let _ = writeln!(
        s,
        "                        }} else {{
                            for pk_q in 0..pk_kb as usize {{
                                {name}[pk_at + pk_q * {width}] = 0.0f32;
                            }}
                        }}
                    }}
                }}"
    );
}

/// The `width` rows of the group at `pk_jb` for the current K point, from
/// `pk_at` on (zero past the valid rows), at indentation `depth`.
fn pack_group(s: &mut String, p: &Program, k: &Kernel, e: &Expr, panel: &Panel, axes: &[usize], depth: usize) {
    let Panel { name, valid, origin, width, .. } = *panel;
    let w = depth * 4;
    let _ = writeln!(
        s,
        "{:w$}for pk_jj in 0i64..{width} {{
{:w$}    {name}[pk_at + pk_jj as usize] = if pk_jb + pk_jj < {valid} {{",
        "", ""
    );
    decode(s, k, &format!("{origin} + pk_jb + pk_jj"), axes, depth + 2);
    let _ = writeln!(
        s,
        "{:w$}        {}
{:w$}    }} else {{
{:w$}        0.0f32
{:w$}    }};
{:w$}}}",
        "",
        expr(p, e),
        "",
        "",
        "",
        ""
    );
}

/// The kernel's value at the current output point, converted to the output's storage type.
fn stored(p: &Program, k: &Kernel) -> String {
    to_storage(p, k, expr(p, &k.value))
}

/// `v`, a compute-type value of `k`'s output dtype, converted to its storage type.
fn to_storage(p: &Program, k: &Kernel, v: String) -> String {
    let out = p.buffer(k.out);
    match out.dtype {
        DType::F16 | DType::BF16 => format!("{}::from_f32({v})", storage_ty(out.dtype)),
        _ => v,
    }
}

/// The body of a scan kernel ([`Scan`]) in `loop_ir`'s block order, as
/// `super::c` prints it, the blocks in turn on the caller's thread: per
/// row (a point of the other loops), each block folded from the identity,
/// its points stored as `carry ⊕ prefix` (the prefix alone in the first
/// block), then the carry advanced by the block's total.
fn scan(s: &mut String, p: &Program, k: &Kernel, sc: &Scan) {
    let a = sc.axis;
    let (ty, init) = (compute_ty(sc.dtype), literal(sc.op.identity(sc.dtype), sc.dtype));
    let mut depth = 2;
    for v in (0..k.loops.len()).filter(|&v| v != a) {
        let _ = writeln!(s, "{:w$}for i{v} in 0i64..{} {{", "", dim(&k.loops[v], Lang::Rust), w = depth * 4);
        depth += 1;
    }
    let e = dim(&k.loops[a], Lang::Rust);
    let op = |x: &str, y: &str| binary(sc.op.combine(), x.into(), y.into(), sc.dtype);
    let x = expr(p, &k.value);
    let update = op("acc", &x);
    // A grouped scan stores `pk_cin ⊕ v`, as `super::c` prints it.
    let stored = |v: &str| match sc.grouped() {
        true => to_storage(p, k, op("pk_cin", v)),
        false => to_storage(p, k, format!("if pk_b > 0 {{ {} }} else {{ {v} }}", op("pk_c", v))),
    };
    let (out, at) = (&p.buffer(k.out).name, paren(aff(&k.store_index, Lang::Rust)));
    let mut lines = vec![
        format!("let pk_e: i64 = {e};"),
        format!("let mut pk_c: {ty} = {init};"),
        format!("for pk_b in 0i64..(pk_e + {SCAN_BLOCK} - 1) / {SCAN_BLOCK} {{"),
        format!("    let mut acc: {ty} = {init};"),
        format!("    let pk_end: i64 = ((pk_b + 1) * {SCAN_BLOCK}).min(pk_e);"),
        format!("    let mut pk_i: i64 = pk_b * {SCAN_BLOCK};"),
    ];
    if let Some(neutral) = sc.neutral() {
        let neutral = literal(neutral, sc.dtype);
        lines.push(format!("    let pk_cin: {ty} = if pk_b > 0 {{ pk_c }} else {{ {neutral} }};"));
    }
    if sc.grouped() {
        // `loop_ir::SCAN_LANES`' order, as the C's vector steps compute it.
        let n = SCAN_LANES;
        lines.extend([
            format!("    while pk_i + {n} <= pk_end {{"),
            format!("        let mut pk_v: [{ty}; {n}] = [{init}; {n}];"),
            format!("        for pk_l in 0..{n}i64 {{"),
            format!("            let i{a}: i64 = pk_i + pk_l;"),
            format!("            pk_v[pk_l as usize] = {x};"),
            "        }".to_string(),
            "        for pk_d in [1usize, 2, 4] {".to_string(),
            "            let pk_p = pk_v;".to_string(),
            format!("            for pk_l in pk_d..{n} {{"),
            format!("                pk_v[pk_l] = {};", op("pk_p[pk_l]", "pk_p[pk_l - pk_d]")),
            "            }".to_string(),
            "        }".to_string(),
            format!("        for pk_l in 0..{n} {{"),
            format!("            pk_v[pk_l] = {};", op("pk_v[pk_l]", "acc")),
            "        }".to_string(),
            format!("        for pk_l in 0..{n}i64 {{"),
            format!("            let i{a}: i64 = pk_i + pk_l;"),
        ]);
        // An exclusive scan stores the prefix before the point.
        let v = if sc.exclusive {
            lines.push("            let pk_x = if pk_l > 0 { pk_v[pk_l as usize - 1] } else { acc };".to_string());
            "pk_x"
        } else {
            "pk_v[pk_l as usize]"
        };
        lines.extend([
            format!("            {out}[{at} as usize] = {};", stored(v)),
            "        }".to_string(),
            format!("        acc = pk_v[{}];", n - 1),
            format!("        pk_i += {n};"),
            "    }".to_string(),
        ]);
    }
    let (fold, store) =
        (format!("        acc = {update};"), format!("        {out}[{at} as usize] = {};", stored("acc")));
    let (first, second) = if sc.exclusive { (store, fold) } else { (fold, store) };
    lines.extend([
        format!("    for i{a} in pk_i..pk_end {{"),
        first,
        second,
        "    }".to_string(),
        format!("    pk_c = {};", op("pk_c", "acc")),
        "}".to_string(),
    ]);
    for line in lines {
        let _ = writeln!(s, "{:w$}{line}", "", w = depth * 4);
    }
    while depth > 2 {
        depth -= 1;
        let _ = writeln!(s, "{:w$}}}", "", w = depth * 4);
    }
}

/// Declares the loop variables of `axes` (nest order) at the flat index
/// `flat` of their row-major product, at indentation `depth`.
fn decode(s: &mut String, k: &Kernel, flat: &str, axes: &[usize], depth: usize) {
    let w = depth * 4;
    if let [v] = axes {
        let _ = writeln!(s, "{:w$}let i{v}: i64 = {flat};", "");
        return;
    }
    let _ = writeln!(s, "{:w$}let pk_f: i64 = {flat};", "");
    for (j, &v) in axes.iter().enumerate().rev() {
        if j == 0 {
            let _ = writeln!(s, "{:w$}let i{v}: i64 = pk_f;", "");
        } else {
            let e = dim(&packed::extent(k, &[v]), Lang::Rust);
            let _ = writeln!(s, "{:w$}let i{v}: i64 = pk_f % {e};\n{:w$}let pk_f: i64 = pk_f / {e};", "", "");
        }
    }
}

/// Prints `n` at indentation `depth`, its points as [`point`]. A tile loop
/// (step `T`, checked ≥ 1 by `body`) is a `step_by`.
fn nest(s: &mut String, p: &Program, k: &Kernel, n: &Nest, depth: usize) {
    match n {
        Nest::Loop(l, body) => {
            // An integer lower bound is typed, so that `i{var}` is an `i64`.
            let lo = match l.lo.as_constant().and_then(|d| d.as_int()) {
                Some(v) => format!("{v}i64"),
                None => bound(&l.lo, Lang::Rust),
            };
            let range = format!("{lo}..{}", bound(&l.hi, Lang::Rust));
            let range = match l.step.as_int() {
                Some(1) => range,
                _ => format!("({range}).step_by({} as usize)", dim(&l.step, Lang::Rust)),
            };
            let _ = writeln!(s, "{:w$}for i{} in {range} {{", "", l.var, w = depth * 4);
            nest(s, p, k, body, depth + 1);
            let _ = writeln!(s, "{:w$}}}", "", w = depth * 4);
        }
        Nest::Seq(parts) => parts.iter().for_each(|n| nest(s, p, k, n, depth)),
        Nest::Point => point(s, p, k, depth),
    }
}

/// One output point at indentation `depth`: the reduction, then the store.
fn point(s: &mut String, p: &Program, k: &Kernel, depth: usize) {
    let mut depth = depth;
    let open = |s: &mut String, depth: &mut usize, var: usize, extent: &Dim| {
        let _ = writeln!(s, "{:w$}for i{var} in 0i64..{} {{", "", dim(extent, Lang::Rust), w = *depth * 4);
        *depth += 1;
    };
    if let (Some(r), true) = (&k.reduce, k.lanes > 1) {
        split_reduction(s, p, k, r, depth);
    } else if let Some(r) = &k.reduce {
        let _ = writeln!(
            s,
            "{:w$}let mut acc: {} = {};",
            "",
            compute_ty(r.dtype),
            literal(r.op.identity(r.dtype), r.dtype),
            w = depth * 4
        );
        let body_depth = depth;
        for (j, d) in r.loops.iter().enumerate() {
            open(s, &mut depth, k.loops.len() + j, d);
        }
        for e in k.computed_at() {
            let Expr::Reduce { id, op, dtype, first, loops, guard: cond, value, .. } = e else { continue };
            let init = literal(op.identity(*dtype), *dtype);
            let _ = writeln!(s, "{:w$}let mut acc{id}: {} = {init};", "", compute_ty(*dtype), w = depth * 4);
            let outer = depth;
            if !cond.is_empty() {
                let _ = writeln!(s, "{:w$}if {} {{", "", guard(cond, Lang::Rust), w = depth * 4);
                depth += 1;
            }
            for (j, d) in loops.iter().enumerate() {
                open(s, &mut depth, *first as usize + j, d);
            }
            let update = update(p, k, Some(*id), *op, format!("acc{id}"), value, *dtype);
            let _ = writeln!(s, "{:w$}acc{id} = {update};", "", w = depth * 4);
            while depth > outer {
                depth -= 1;
                let _ = writeln!(s, "{:w$}}}", "", w = depth * 4);
            }
        }
        let update = update(p, k, None, r.op, "acc".into(), &r.value, r.dtype);
        let _ = writeln!(s, "{:w$}acc = {update};", "", w = depth * 4);
        while depth > body_depth {
            depth -= 1;
            let _ = writeln!(s, "{:w$}}}", "", w = depth * 4);
        }
    }
    let _ = writeln!(
        s,
        "{:w$}{}[{} as usize] = {};",
        "",
        p.buffer(k.out).name,
        paren(aff(&k.store_index, Lang::Rust)),
        stored(p, k),
        w = depth * 4
    );
}

/// A reduction in `k.lanes` split accumulators `acc_l` (`cpu::lanes`'s
/// rule, as `super::c` prints it), at indentation `depth`; declares `acc`.
fn split_reduction(s: &mut String, p: &Program, k: &Kernel, r: &Reduction, depth: usize) {
    let lanes = k.lanes;
    let ty = compute_ty(r.dtype);
    let init = literal(r.op.identity(r.dtype), r.dtype);
    let _ = writeln!(s, "{:w$}let mut acc_l: [{ty}; {lanes}] = [{init}; {lanes}];", "", w = depth * 4);
    let mut d = depth;
    let (inner, outer) = r.loops.split_last().expect("a split reduction has reduce loops");
    for (j, e) in outer.iter().enumerate() {
        let _ = writeln!(s, "{:w$}for i{v} in 0i64..{} {{", "", dim(e, Lang::Rust), v = k.loops.len() + j, w = d * 4);
        d += 1;
    }
    let v = k.loops.len() + outer.len();
    let e = dim(inner, Lang::Rust);
    let update = binary(r.op.combine(), "acc_l[pk_l]".into(), expr(p, &r.value), r.dtype);
    let w = d * 4;
    let _ = writeln!(
        s,
        "{:w$}let pk_e: i64 = {e};
{:w$}let pk_full: i64 = pk_e / {lanes} * {lanes};
{:w$}for pk_r in (0i64..pk_full).step_by({lanes}) {{
{:w$}    for pk_l in 0usize..{lanes} {{
{:w$}        let i{v}: i64 = pk_r + pk_l as i64;
{:w$}        acc_l[pk_l] = {update};
{:w$}    }}
{:w$}}}
{:w$}for pk_l in 0usize..(pk_e - pk_full) as usize {{
{:w$}    let i{v}: i64 = pk_full + pk_l as i64;
{:w$}    acc_l[pk_l] = {update};
{:w$}}}",
        "", "", "", "", "", "", "", "", "", "", "", ""
    );
    while d > depth {
        d -= 1;
        let _ = writeln!(s, "{:w$}}}", "", w = d * 4);
    }
    // The halving fold of the lanes ([`lanes`]'s rule), one loop of a
    // constant trip count per step.
    for half in lanes::fold_steps(lanes) {
        let folded = binary(r.op.combine(), "acc_l[pk_a]".into(), format!("acc_l[pk_a + {half}]"), r.dtype);
        let _ = writeln!(s, "{:w$}for pk_a in 0usize..{half} {{ acc_l[pk_a] = {folded}; }}", "", w = depth * 4);
    }
    let _ = writeln!(s, "{:w$}let acc: {ty} = acc_l[0];", "", w = depth * 4);
}

/// Nested helper functions, emitted when used: NaN-propagating max/min and
/// `RELU` as the interpreter defines them, `EXP2` as the C printer's
/// `tgc_exp2f` (the runtime's `cpu_rt::exp2`), and `GATHER`'s position
/// (`tiny::op::gather_position`, the C printer's `tgc_gather_at`). `CRATE`
/// stands for the crate path the module is printed with. Each is printed
/// `#[inline(always)]`: a helper left out of line
/// would be compiled without the features of `cpu_rt::with_fma`, and
/// `exp2`'s fused steps would be calls of the C library's `fmaf`.
const FLOAT_HELPERS: [(&str, &str); 5] = [
    (
        "gather_at",
        "fn gather_at(v: i32, d: i64) -> i64 { let i = if v < 0 { v as i64 + d } else { v as i64 }; i.clamp(0, d - 1) }",
    ),
    ("exp2_f32", "fn exp2_f32(x: f32) -> f32 { CRATE::__private::cpu_rt::exp2(x) }"),
    (
        "max_f32",
        "fn max_f32(a: f32, b: f32) -> f32 { if a.is_nan() || b.is_nan() { f32::NAN } else if a > b { a } else { b } }",
    ),
    (
        "min_f32",
        "fn min_f32(a: f32, b: f32) -> f32 { if a.is_nan() || b.is_nan() { f32::NAN } else if a < b { a } else { b } }",
    ),
    ("relu_f32", "fn relu_f32(x: f32) -> f32 { if x < 0.0 { 0.0 } else { x } }"),
];

/// The helpers of [`FLOAT_HELPERS`] the program calls.
fn float_helpers(p: &Program) -> BTreeSet<&'static str> {
    let mut out = BTreeSet::new();
    let float = |dt: DType| matches!(dt, DType::F16 | DType::BF16 | DType::F32);
    // The folds of reductions and scans: `(op, accumulator dtype)`.
    let mut folds: Vec<(ReduceOp, DType)> = Vec::new();
    for k in &p.kernels {
        let mut visit = |e: &Expr| match e {
            Expr::Unary { op: UnaryOp::Relu, x } if float(x.dtype()) => {
                out.insert("relu_f32");
            }
            Expr::Unary { op: UnaryOp::Exp2, x } if float(x.dtype()) => {
                out.insert("exp2_f32");
            }
            Expr::Gather { .. } => {
                out.insert("gather_at");
            }
            Expr::Binary { op: BinaryOp::Max, a, .. } if float(a.dtype()) => {
                out.insert("max_f32");
            }
            Expr::Binary { op: BinaryOp::Min, a, .. } if float(a.dtype()) => {
                out.insert("min_f32");
            }
            Expr::Reduce { op, dtype, .. } => folds.push((*op, *dtype)),
            _ => {}
        };
        k.value.walk(&mut visit);
        if let Some(r) = &k.reduce {
            r.value.walk(&mut visit);
            folds.push((r.op, r.dtype));
        }
        folds.extend(k.scan.iter().map(|sc| (sc.op, sc.dtype)));
    }
    for (op, dt) in folds {
        match op {
            ReduceOp::Max if float(dt) => {
                out.insert("max_f32");
            }
            ReduceOp::Min if float(dt) => {
                out.insert("min_f32");
            }
            _ => {}
        }
    }
    out
}

/// `s` as a Rust string literal.
fn lit(s: &str) -> String {
    format!("{s:?}")
}

/// The `half` types the body names in kernels and temporaries: dtypes of
/// used buffers, targets of rounding casts, f16/bf16 accumulators.
fn half_types(p: &Program, used: &BTreeSet<BufId>) -> Vec<&'static str> {
    let mut out = BTreeSet::new();
    let mut add = |dt: DType| {
        if matches!(dt, DType::F16 | DType::BF16) {
            out.insert(storage_ty(dt));
        }
    };
    for b in used {
        add(p.buffer(*b).dtype);
    }
    for k in &p.kernels {
        let mut visit = |e: &Expr| match e {
            Expr::Cast { to, x } if x.dtype() != *to && x.dtype() != DType::Bool => add(*to),
            Expr::Reduce { dtype, .. } => add(*dtype),
            _ => {}
        };
        k.value.walk(&mut visit);
        if let Some(r) = &k.reduce {
            r.value.walk(&mut visit);
            add(r.dtype);
        }
    }
    out.into_iter().collect()
}

/// `[d0, d1]` as a Rust array of `i64` sizes.
fn size_array(shape: &[Dim]) -> String {
    let v: Vec<String> = shape.iter().map(|d| dim(d, Lang::Rust)).collect();
    format!("[{}]", v.join(", "))
}

fn print(g: &Graph, p: &Program, cp: &str) -> String {
    let ins: Vec<&crate::cpu::Buffer> = p.buffers.iter().filter(|b| matches!(b.role, Role::Input(_))).collect();
    let outs: Vec<&crate::cpu::Buffer> = p.buffers.iter().filter(|b| matches!(b.role, Role::Output(_))).collect();
    let full_ty = |dt: DType| match dt {
        DType::F16 | DType::BF16 => format!("{cp}::half::{}", storage_ty(dt)),
        _ => storage_ty(dt).to_string(),
    };
    let tuple = |v: Vec<String>| match v.len() {
        1 => format!("({},)", v[0]),
        _ => format!("({})", v.join(", ")),
    };
    let describe = |bs: &[&crate::cpu::Buffer]| {
        let v: Vec<String> = bs
            .iter()
            .map(|b| {
                let d: Vec<String> = b.shape.iter().map(|x| x.to_string()).collect();
                format!("{}: {}[{}]", comment_text(&b.label), b.dtype.json_name(), d.join(", "))
            })
            .collect();
        v.join(", ")
    };
    let dims: Vec<&str> = p.dims().map(String::as_str).collect();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// Generated by tgc from graph `{}`: Rust, one kernel per loop nest. Do not edit.",
        comment_text(&p.name)
    );
    let _ =
        writeln!(s, "// inputs: ({}); outputs: ({}); dims: [{}].", describe(&ins), describe(&outs), dims.join(", "));
    let _ = writeln!(s, "// Returns Err, writing nothing, when the dims or the slice lengths do not fit the graph.");
    s.push_str("#[allow(unused_parens, unused_variables, unused_mut, non_snake_case, clippy::all)]\n");
    let in_tys = tuple(ins.iter().map(|b| format!("&[{}]", full_ty(b.dtype))).collect());
    let out_tys = tuple(outs.iter().map(|b| format!("&mut [{}]", full_ty(b.dtype))).collect());
    let _ = writeln!(
        s,
        "pub fn body(inputs: {in_tys}, outputs: {out_tys}, dims: &[i64]) -> ::core::result::Result<(), ::std::string::String> {{"
    );
    let used: BTreeSet<BufId> = p.kernels.iter().flat_map(|k| k.reads().into_iter().chain([k.out])).collect();
    let halves = half_types(p, &used);
    match halves.as_slice() {
        [] => {}
        [one] => {
            let _ = writeln!(s, "    use {cp}::half::{one};");
        }
        many => {
            let _ = writeln!(s, "    use {cp}::half::{{{}}};", many.join(", "));
        }
    }
    for (name, code) in FLOAT_HELPERS {
        if float_helpers(p).contains(name) {
            let _ = writeln!(s, "    #[inline(always)] {}", code.replace("CRATE", cp));
        }
    }
    for k in &p.kernels {
        s.push_str(&kernel(g, p, k, cp));
    }
    let n = dims.len();
    let _ = writeln!(
        s,
        "    if dims.len() != {n} {{\n        return Err(::std::format!(\"graph {{}} takes {n} dims ({{}}), got {{}}\", {}, {}, dims.len()));\n    }}",
        lit(&p.name),
        lit(&dims.join(", "))
    );
    for (k, name) in dims.iter().enumerate() {
        let _ = writeln!(s, "    let {}: i64 = dims[{k}];", sym_name(name));
    }
    for c in &p.checks {
        let rel = match c.rel {
            Rel::Eq => "==",
            Rel::Le => "<=",
        };
        let _ = writeln!(
            s,
            "    if !({} {rel} {}) {{\n        return Err(::std::string::String::from({}));\n    }}",
            dim(&c.lhs, Lang::Rust),
            dim(&c.rhs, Lang::Rust),
            lit(&format!("the dims break the requirement {}", c.what))
        );
    }
    let names = |bs: &[&crate::cpu::Buffer]| tuple(bs.iter().map(|b| b.name.clone()).collect());
    let _ = writeln!(s, "    let {} = inputs;\n    let {} = outputs;", names(&ins), names(&outs));
    s.push_str("    let len = |sizes: &[i64]| -> ::core::option::Option<i64> { sizes.iter().try_fold(1i64, |a, &d| a.checked_mul(d)) };\n");
    for b in ins.iter().chain(&outs) {
        let _ = writeln!(
            s,
            "    if len(&{}) != ::core::option::Option::Some({}.len() as i64) {{\n        return Err(::std::format!(\"{{}} has {{}} elements, its shape needs {{:?}}\", {}, {}.len(), len(&{})));\n    }}",
            size_array(&b.shape),
            b.name,
            lit(&b.label),
            b.name,
            size_array(&b.shape)
        );
    }
    // The temporaries: zeroed vectors from the thread's pool
    // (`tgc_runtime::scratch::take`), given back, last first, at the end.
    let mut temps = Vec::new();
    for (i, b) in p.buffers.iter().enumerate() {
        if b.role != Role::Temp || !used.contains(&BufId(i as u32)) {
            continue;
        }
        let _ = writeln!(
            s,
            "    let mut {}: ::std::vec::Vec<{}> = {cp}::scratch::take(len(&{}).ok_or_else(|| ::std::string::String::from(\"a size overflows i64\"))? as usize); // {}",
            b.name,
            storage_ty(b.dtype),
            size_array(&b.shape),
            comment_text(&b.label)
        );
        temps.push(b.name.as_str());
    }
    for k in &p.kernels {
        let mut args: Vec<String> = k.reads().into_iter().map(|b| format!("&{}[..]", p.buffer(b).name)).collect();
        args.push(format!("&mut {}[..]", p.buffer(k.out).name));
        let syms = k.symbols();
        args.extend(p.dims().filter(|x| syms.contains(*x)).map(|x| sym_name(x)));
        let _ = writeln!(s, "    {}({});", k.name, args.join(", "));
    }
    for t in temps.iter().rev() {
        let _ = writeln!(s, "    {cp}::scratch::give({t});");
    }
    s.push_str("    Ok(())\n}\n");
    s
}

//! Source printers of the CPU loop-nest IR ([`crate::cpu::loop_ir`]): C11
//! ([`c`]) and Rust ([`rust`]), and the typed Rust API around either body
//! ([`api`]), plus the typed GPU launch functions of its `sm80` submodule
//! ([`gpu_api`]), and the CUDA C printer of the GPU dialect ([`cuda`]).
//! Both CPU printers print the same [`crate::cpu::Program`];
//! this module holds what they share: the printing of sizes, subscripts and
//! guards, and the names used in generated code.
//!
//! Names in generated code: loop variables `i<k>`, buffers `in<k>`,
//! `out<k>`, `tmp<k>`, symbols `s_<name>` (the prefix keeps symbol names
//! clear of keywords and of every other generated name), the accumulator
//! `acc`.

pub mod api;
pub mod c;
pub mod cuda;
pub mod gpu_api;
pub mod model;
pub mod rust;

use crate::affine::{AffAtom, AffExpr};
use crate::cpu::packed::Side;
use crate::cpu::{Kernel, Program};
use crate::index_book::Constr;
use crate::sym::{Atom, Dim};
use crate::tiny::{Graph, NodeId};

/// The target language of a printer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lang {
    C,
    Rust,
}

/// A panel of the packed template ([`crate::cpu::packed`]) as both printers
/// name it: the panel buffer, how many rows it has (a multiple of `width`),
/// how many of them are real (the rest are zero), and the flat index of its
/// first row in the panel's loops. All are expressions of generated code.
#[derive(Clone, Copy)]
struct Panel {
    side: Side,
    name: &'static str,
    rows: &'static str,
    valid: &'static str,
    origin: &'static str,
    width: usize,
}

/// The `b` panel: `nc` columns of a task, packed once per K block.
const B_PANEL: Panel = Panel {
    side: Side::B,
    name: "pk_b",
    rows: "pk_np",
    valid: "pk_nb",
    origin: "pk_n0",
    width: crate::cpu::packed::NR,
};

/// The `a` panel: `mc` rows from `pk_ic` on, packed per K block.
const A_PANEL: Panel = Panel {
    side: Side::A,
    name: "pk_a",
    rows: "pk_icb",
    valid: "pk_mb - pk_ic",
    origin: "pk_m0 + pk_ic",
    width: crate::cpu::packed::MR,
};

/// The generated name of symbol `s`.
fn sym_name(s: &str) -> String {
    format!("s_{s}")
}

/// `floor(n / q)` in `lang` (`floord` is the C prelude's function, named
/// after isl/CLooG's macro).
fn floordiv(n: String, q: String, lang: Lang) -> String {
    match lang {
        Lang::C => format!("floord({n}, {q})"),
        Lang::Rust => format!("({n}).div_euclid({q})"),
    }
}

/// A loop bound ([`crate::cpu::Loop`]): a size as [`dim`] prints it, else
/// the affine expression without outer parentheses.
fn bound(e: &AffExpr, lang: Lang) -> String {
    match e.as_constant() {
        Some(d) => dim(d, lang),
        None => bare(aff(e, lang)),
    }
}

/// A size as an `int64_t` / `i64` expression.
fn dim(d: &Dim, lang: Lang) -> String {
    let mut parts: Vec<(bool, String)> = Vec::new();
    for (atoms, c) in d.monomials() {
        let mut factors: Vec<String> = atoms
            .iter()
            .map(|a| match a {
                Atom::Sym(s) => sym_name(s),
                Atom::FloorDiv(n, q) => {
                    let num = match (n.as_int(), lang) {
                        (Some(v), Lang::Rust) => format!("{v}i64"),
                        _ => dim(n, lang),
                    };
                    floordiv(num, dim(q, lang), lang)
                }
            })
            .collect();
        if factors.is_empty() || c.abs() != 1 {
            factors.insert(0, c.unsigned_abs().to_string());
        }
        parts.push((c < 0, factors.join("*")));
    }
    // The constant monomial comes first in canonical order; print it last.
    if d.monomials().next().is_some_and(|(atoms, _)| atoms.is_empty()) && parts.len() > 1 {
        parts.rotate_left(1);
    }
    join_signed(parts)
}

/// `a + b - c`, parenthesised unless it is one non-negative term.
fn join_signed(parts: Vec<(bool, String)>) -> String {
    if parts.is_empty() {
        return "0".into();
    }
    let mut s = String::new();
    for (i, (neg, body)) in parts.iter().enumerate() {
        match (i, neg) {
            (0, true) => s.push('-'),
            (0, false) => {}
            (_, true) => s.push_str(" - "),
            (_, false) => s.push_str(" + "),
        }
        s.push_str(body);
    }
    if parts.len() == 1 && !parts[0].0 {
        s
    } else {
        format!("({s})")
    }
}

/// A subscript or guard expression over the loop variables `i<k>`.
fn aff(e: &AffExpr, lang: Lang) -> String {
    let mut parts: Vec<(bool, String)> = Vec::new();
    for (a, c) in e.terms() {
        let body = match a {
            AffAtom::Var(k) => format!("i{k}"),
            AffAtom::FloorDiv(inner, q) => floordiv(aff(inner, lang), dim(q, lang), lang),
        };
        match c.as_int() {
            Some(1) => parts.push((false, body)),
            Some(-1) => parts.push((true, body)),
            Some(v) => parts.push((v < 0, format!("{}*{body}", v.unsigned_abs()))),
            None => {
                let (neg, mag) = signed(c);
                parts.push((neg, format!("{}*{body}", dim(&mag, lang))));
            }
        }
    }
    let k = e.constant_part();
    if k.as_int() != Some(0) {
        let (neg, mag) = signed(k);
        parts.push((neg, dim(&mag, lang)));
    }
    join_signed(parts)
}

/// `(true, -d)` when every monomial of `d` is negative, else `(false, d)`:
/// so that `i0 - pt` prints as a subtraction.
fn signed(d: &Dim) -> (bool, Dim) {
    if d.monomials().all(|(_, c)| c < 0) {
        (true, &Dim::int(0) - d)
    } else {
        (false, d.clone())
    }
}

/// True when the `(` at the start of `s` is closed by its last character.
fn encloses(s: &str) -> bool {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i == s.len() - 1;
                }
            }
            _ => {}
        }
    }
    false
}

/// `s` without one pair of parentheses enclosing all of it (for subscripts).
fn bare(s: String) -> String {
    if s.starts_with('(') && encloses(&s) {
        s[1..s.len() - 1].to_string()
    } else {
        s
    }
}

/// A conjunction of guards, `e0 >= 0 && e1 >= 0`.
fn guard(cs: &[Constr], lang: Lang) -> String {
    let v: Vec<String> = cs.iter().map(|c| format!("{} >= 0", bare(aff(&c.expr, lang)))).collect();
    v.join(" && ")
}

/// The condition, in both printers' syntax, under which the decoded pixel
/// `pk_j` of `panel` starts a pooling window packed whole
/// ([`crate::cpu::packed::WindowCopy`]): its window loops at 0, the
/// window's pixels valid and in one group of the panel's width, and the
/// window inside the image.
fn window_start(wc: &crate::cpu::packed::WindowCopy, panel: &Panel, lang: Lang) -> String {
    let (points, width, valid) = (wc.points, panel.width, panel.valid);
    let mut cond: Vec<String> = wc.window.iter().map(|v| format!("i{v} == 0")).collect();
    cond.push(format!("pk_j + {points} <= {valid}"));
    cond.push(format!("pk_j % {width} + {points} <= {width}"));
    if !wc.copy.interior.is_empty() {
        cond.push(guard(&wc.copy.interior, lang));
    }
    cond.join(" && ")
}

/// One line describing a kernel for a comment:
/// `k0 -> out0 (Y): n14 RELU; inlines n13 ADD, …; accumulates n9 REDUCE SUM in fp32`.
fn kernel_summary(g: &Graph, p: &Program, k: &Kernel) -> String {
    let label = |n: NodeId| comment_text(&format!("{} {}", g.node(n).label, g.node(n).op.name()));
    let out = p.buffer(k.out);
    let mut s = format!("{} -> {} ({}): {}", k.name, out.name, comment_text(&out.label), label(k.nodes[0]));
    if k.nodes.len() > 1 {
        let rest: Vec<String> = k.nodes[1..].iter().map(|n| label(*n)).collect();
        s.push_str(&format!("; inlines {}", rest.join(", ")));
    }
    if let Some(r) = &k.reduce {
        s.push_str(&format!(
            "; accumulates {} {} in {} in a register",
            label(r.node),
            r.op.name(),
            r.dtype.json_name()
        ));
    }
    if let Some(sc) = &k.scan {
        s.push_str(&format!(
            "; scans {} along i{} in {} in blocks of {}",
            sc.op.name(),
            sc.axis,
            sc.dtype.json_name(),
            crate::cpu::loop_ir::SCAN_BLOCK
        ));
    }
    for e in k.computed_at() {
        if let crate::cpu::Expr::Reduce { id, node, op, .. } = e {
            s.push_str(&format!("; recomputes {} {} at each read (acc{id}, no buffer)", label(*node), op.name()));
        }
    }
    s
}

/// `s` made safe inside a comment of either language: no line breaks, no
/// comment terminator.
fn comment_text(s: &str) -> String {
    s.replace(['\n', '\r'], " ").replace("*/", "* /").replace("/*", "/ *")
}

#[cfg(test)]
mod tests;

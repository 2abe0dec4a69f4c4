//! IndexBook expressions as isl text (`000` §3.2): the quasi-affine subset
//! that isl represents exactly, over the graph's symbols as parameters.
//!
//! | IndexBook | isl |
//! | --- | --- |
//! | `c·i_k` (integer `c`) | `c*i_k` |
//! | `floor(e / q)` (integer `q > 0`) | `floor((e)/q)`, an isl div |
//! | `e - q·floor(e/q)` (an expanded `%`) | the same, plus its guard in the domain |
//! | a symbol `N`, `c·N`, `floor(D / q)` in a constant | the parameter `N`, … |
//!
//! Anything else — a symbolic coefficient of a variable (`Sh*i2`), a product
//! of symbols (`M*K`), a division by a symbol — is not quasi-affine: it is
//! returned as a [`NonAffine`] reason and the value is left out of the SCoP.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::affine::{AffAtom, AffExpr};
use crate::index_book::Constr;
use crate::sym::{Atom, Dim};

/// Why an expression has no isl form.
pub type NonAffine = String;

/// isl's reserved words (`isl_stream.c`), compared case-insensitively.
const KEYWORDS: &[&str] = &[
    "exists", "and", "or", "implies", "not", "infty", "infinity", "nan", "min", "max", "rat", "true", "false", "ceild",
    "floord", "mod", "ceil", "floor",
];

/// True when `name` can be written as-is in isl text next to the index
/// variables `i<k>` / `o<k>` this module writes.
fn is_plain_name(name: &str) -> bool {
    let mut chars = name.chars();
    let head_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    let var_like = name.len() > 1
        && (name.starts_with('i') || name.starts_with('o'))
        && name[1..].chars().all(|c| c.is_ascii_digit());
    head_ok
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !var_like
        && !KEYWORDS.contains(&name.to_ascii_lowercase().as_str())
}

/// An isl identifier for `name`: non-identifier characters become `_`, and
/// a name that would read as a keyword or an index variable gets a trailing
/// `_`. `taken` names are avoided by appending `_` again.
pub fn isl_name(name: &str, taken: &dyn Fn(&str) -> bool) -> String {
    let mut s: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    while !is_plain_name(&s) || taken(&s) {
        s.push('_');
    }
    s
}

/// The isl spelling of the graph's symbols (parameters), in order.
#[derive(Clone, Debug, Default)]
pub struct Params {
    /// `(symbol, isl name)` in declaration order.
    pub names: Vec<(String, String)>,
    by_symbol: BTreeMap<String, String>,
}

impl Params {
    /// Parameters for `symbols` (in order).
    pub fn new(symbols: &[String]) -> Params {
        let mut p = Params::default();
        for s in symbols {
            let isl = isl_name(s, &|n| p.by_symbol.values().any(|v| v == n));
            p.by_symbol.insert(s.clone(), isl.clone());
            p.names.push((s.clone(), isl));
        }
        p
    }

    /// The parameters of an existing view.
    pub fn from_names(names: &[(String, String)]) -> Params {
        let by_symbol = names.iter().cloned().collect();
        Params { names: names.to_vec(), by_symbol }
    }

    /// `[N, K] -> ` (empty for no parameters).
    pub fn prefix(&self) -> String {
        if self.names.is_empty() {
            return String::new();
        }
        let v: Vec<&str> = self.names.iter().map(|(_, i)| i.as_str()).collect();
        format!("[{}] -> ", v.join(", "))
    }

    fn get(&self, sym: &str) -> Result<&str, NonAffine> {
        self.by_symbol.get(sym).map(String::as_str).ok_or_else(|| format!("symbol `{sym}` is not a graph symbol"))
    }
}

/// `Σ c·t` as text, with the signs folded in (`2*i0 - i1 + 3`).
fn sum(terms: &[(i64, String)]) -> String {
    let mut s = String::new();
    for (c, t) in terms.iter().filter(|(c, _)| *c != 0) {
        let (neg, a) = (*c < 0, c.unsigned_abs());
        if s.is_empty() {
            s.push_str(if neg { "-" } else { "" });
        } else {
            s.push_str(if neg { " - " } else { " + " });
        }
        match (a, t.is_empty()) {
            (_, true) => {
                let _ = write!(s, "{a}");
            }
            (1, false) => s.push_str(t),
            _ => {
                let _ = write!(s, "{a}*{t}");
            }
        }
    }
    if s.is_empty() {
        "0".into()
    } else {
        s
    }
}

/// A symbolic dimension as an isl parameter expression.
pub fn dim(d: &Dim, p: &Params) -> Result<String, NonAffine> {
    let mut terms = Vec::new();
    for (mono, c) in d.monomials() {
        let t = match mono {
            [] => String::new(),
            [Atom::Sym(s)] => p.get(s)?.to_string(),
            [Atom::FloorDiv(a, q)] => match q.as_int() {
                Some(q) if q > 0 => format!("floor(({})/{q})", dim(a, p)?),
                _ => return Err(format!("`{d}` divides by the symbol `{q}`")),
            },
            _ => return Err(format!("`{d}` multiplies symbols")),
        };
        terms.push((c, t));
    }
    Ok(sum(&terms))
}

/// An index expression over `i0, i1, …` as isl text.
pub fn expr(e: &AffExpr, p: &Params) -> Result<String, NonAffine> {
    let mut terms = Vec::new();
    for (atom, c) in e.terms() {
        let c = c.as_int().ok_or_else(|| format!("`{e}` has the symbolic coefficient `{c}`"))?;
        let t = match atom {
            AffAtom::Var(k) => format!("i{k}"),
            AffAtom::FloorDiv(inner, q) => match q.as_int() {
                Some(q) if q > 0 => format!("floor(({})/{q})", expr(inner, p)?),
                _ => return Err(format!("`{e}` divides by the symbol `{q}`")),
            },
        };
        terms.push((c, t));
    }
    let konst = dim(e.constant_part(), p)?;
    let mut s = sum(&terms);
    if konst != "0" {
        s = if s == "0" { konst } else { format!("{s} + ({konst})") };
    }
    Ok(s)
}

/// A constraint `e >= 0`.
pub fn constr(c: &Constr, p: &Params) -> Result<String, NonAffine> {
    Ok(format!("{} >= 0", expr(&c.expr, p)?))
}

/// `i0, i1, …, i{n-1}`.
pub fn vars(n: usize) -> String {
    (0..n).map(|k| format!("i{k}")).collect::<Vec<_>>().join(", ")
}

/// ` : c1 and c2` (empty for no constraint).
pub fn such_that(cs: &[String]) -> String {
    if cs.is_empty() {
        String::new()
    } else {
        format!(" : {}", cs.join(" and "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> Params {
        Params::new(&["N".into(), "K".into(), "min".into(), "i0".into()])
    }

    #[test]
    fn quasi_affine_expressions_print_as_isl() {
        let p = params();
        let e = AffExpr::parse("2*i0 - i1 + N - 1").unwrap();
        assert_eq!(expr(&e, &p).unwrap(), "2*i0 - i1 + (-1 + N)");
        let m = AffExpr::parse("i0 % 4").unwrap();
        assert_eq!(expr(&m, &p).unwrap(), "i0 - 4*floor((i0)/4)");
        assert_eq!(dim(&Dim::parse("(N + 3)/4").unwrap(), &p).unwrap(), "floor((3 + N)/4)");
    }

    #[test]
    fn non_affine_expressions_say_why() {
        let p = params();
        assert!(expr(&AffExpr::parse("K*i0").unwrap(), &p).unwrap_err().contains("symbolic coefficient"));
        assert!(dim(&Dim::parse("N*K").unwrap(), &p).unwrap_err().contains("multiplies"));
        assert!(expr(&AffExpr::parse("floor(i0 / K)").unwrap(), &p).unwrap_err().contains("divides by"));
    }

    #[test]
    fn names_never_read_as_keywords_or_variables() {
        let p = params();
        assert_eq!(p.prefix(), "[N, K, min_, i0_] -> ");
        assert_eq!(isl_name("y1.1.cast", &|_| false), "y1_1_cast");
        assert_eq!(isl_name("3x", &|n| n == "_3x"), "_3x_");
    }
}

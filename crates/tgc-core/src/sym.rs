//! Symbolic dimensions: integer polynomials over named symbols, with floor
//! division as an opaque atom.
//!
//! Invariants of [`Dim`]:
//! - canonical form: a sum of monomials with non-zero integer coefficients,
//!   each monomial a sorted multiset of atoms, so structural equality is
//!   symbolic equality of polynomials;
//! - a floor division whose divisor divides every term exactly is folded
//!   (`(2*M)/2 = M`, `(M*K)/K = M`), and one of two integers is evaluated;
//!   anything else stays an atom `(a)/(b)`.
//!
//! - the operators' coefficient arithmetic saturates at the ends of `i64`
//!   instead of overflowing, so no input makes it panic; shape inference
//!   (`tiny::infer`) uses the exact [`Dim::checked_add`], [`Dim::checked_sub`]
//!   and [`Dim::checked_mul`] instead, since a saturated term can come back in
//!   range through a later subtraction; [`Dim::eval`] reports overflow as an
//!   error.
//!
//! The text form is parsed by [`Dim::parse`]: integers, symbol names, `+ - *`,
//! `/` (floor division, divisor > 0) and parentheses. Display prints that form.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// The most elements a tensor may have, and so the largest size of an axis
/// (2^48: far beyond any real tensor, and small enough that index arithmetic
/// on such sizes — strides times indices plus offsets — stays inside `i64`).
pub const MAX_ELEMENTS: i64 = 1 << 48;

/// An atom of a monomial: a symbol or a floor division that did not fold.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Atom {
    Sym(String),
    FloorDiv(Box<Dim>, Box<Dim>),
}

type Monomial = Vec<Atom>;

/// A symbolic integer dimension (see the module doc for its invariants).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Dim {
    terms: BTreeMap<Monomial, i64>,
}

impl Dim {
    /// The integer `v`.
    pub fn int(v: i64) -> Dim {
        let mut terms = BTreeMap::new();
        if v != 0 {
            terms.insert(Vec::new(), v);
        }
        Dim { terms }
    }

    /// The symbol `name`.
    pub fn sym(name: &str) -> Dim {
        let mut terms = BTreeMap::new();
        terms.insert(vec![Atom::Sym(name.to_string())], 1);
        Dim { terms }
    }

    /// The value if the dimension is a known integer.
    pub fn as_int(&self) -> Option<i64> {
        match self.terms.len() {
            0 => Some(0),
            1 => self.terms.get(&Vec::new()).copied(),
            _ => None,
        }
    }

    /// The symbol name if the dimension is exactly one symbol.
    pub fn as_sym(&self) -> Option<&str> {
        if self.terms.len() != 1 {
            return None;
        }
        let (mono, c) = self.terms.iter().next()?;
        match (mono.as_slice(), c) {
            ([Atom::Sym(s)], 1) => Some(s),
            _ => None,
        }
    }

    /// True when the dimension is the integer 1.
    pub fn is_one(&self) -> bool {
        self.as_int() == Some(1)
    }

    /// The least value the dimension can take when every symbol is at
    /// least 1 (symbols are sizes, and a size is at least 1:
    /// `Graph::resolve_dims`): `Some` for a sum of symbol products with
    /// positive coefficients plus a constant, `None` otherwise (a negative
    /// coefficient or a floor division leaves the bound open).
    pub fn lower_bound(&self) -> Option<i64> {
        let mut bound: i64 = 0;
        for (m, &c) in &self.terms {
            if !m.is_empty() && (c < 0 || m.iter().any(|a| !matches!(a, Atom::Sym(_)))) {
                return None;
            }
            bound = bound.checked_add(c)?;
        }
        Some(bound)
    }

    fn from_terms(terms: impl IntoIterator<Item = (Monomial, i64)>) -> Dim {
        let mut out: BTreeMap<Monomial, i64> = BTreeMap::new();
        for (m, c) in terms {
            let e = out.entry(m).or_insert(0);
            *e = e.saturating_add(c);
        }
        out.retain(|_, c| *c != 0);
        Dim { terms: out }
    }

    /// Sums the coefficients of equal monomials exactly: `None` when a sum
    /// leaves `i64`.
    fn checked_from_terms(terms: impl IntoIterator<Item = (Monomial, i128)>) -> Option<Dim> {
        let mut sums: BTreeMap<Monomial, i128> = BTreeMap::new();
        for (m, c) in terms {
            let e = sums.entry(m).or_insert(0);
            *e = e.checked_add(c)?;
        }
        let terms = sums.into_iter().filter(|(_, c)| *c != 0).map(|(m, c)| Some((m, i64::try_from(c).ok()?)));
        Some(Dim { terms: terms.collect::<Option<_>>()? })
    }

    /// `self + o` exactly: `None` when a coefficient leaves `i64` (shape
    /// inference's arithmetic, where a saturated size could come back in
    /// range through a later subtraction).
    pub fn checked_add(&self, o: &Dim) -> Option<Dim> {
        Dim::checked_from_terms(self.terms.iter().chain(&o.terms).map(|(m, c)| (m.clone(), *c as i128)))
    }

    /// `self - o` exactly: `None` when a coefficient leaves `i64`.
    pub fn checked_sub(&self, o: &Dim) -> Option<Dim> {
        let neg = o.terms.iter().map(|(m, c)| (m.clone(), -(*c as i128)));
        Dim::checked_from_terms(self.terms.iter().map(|(m, c)| (m.clone(), *c as i128)).chain(neg))
    }

    /// `self · o` exactly: `None` when a coefficient leaves `i64`.
    pub fn checked_mul(&self, o: &Dim) -> Option<Dim> {
        let mut out = Vec::new();
        for (ma, ca) in &self.terms {
            for (mb, cb) in &o.terms {
                let mut m: Monomial = ma.iter().chain(mb.iter()).cloned().collect();
                m.sort();
                // Two i64 factors: the product fits in i128.
                out.push((m, *ca as i128 * *cb as i128));
            }
        }
        Dim::checked_from_terms(out)
    }

    /// Floor division by `d` (`d` must be positive; `None` for a known
    /// non-positive integer divisor).
    pub fn floordiv(&self, d: &Dim) -> Option<Dim> {
        if let Some(q) = d.as_int() {
            if q <= 0 {
                return None;
            }
            if q == 1 {
                return Some(self.clone());
            }
            if let Some(v) = self.as_int() {
                return Some(Dim::int(v.div_euclid(q)));
            }
            if self.terms.values().all(|c| c % q == 0) {
                return Some(Dim::from_terms(self.terms.iter().map(|(m, c)| (m.clone(), c / q))));
            }
        }
        if self == d {
            return Some(Dim::int(1));
        }
        if let Some(quot) = self.exact_div_by_monomial(d) {
            return Some(quot);
        }
        let mut terms = BTreeMap::new();
        terms.insert(vec![Atom::FloorDiv(Box::new(self.clone()), Box::new(d.clone()))], 1);
        Some(Dim { terms })
    }

    /// `self / d` when `d` is a single monomial `c*m` that divides every term.
    fn exact_div_by_monomial(&self, d: &Dim) -> Option<Dim> {
        if d.terms.len() != 1 {
            return None;
        }
        let (dm, dc) = d.terms.iter().next()?;
        let mut out = Vec::new();
        for (m, c) in &self.terms {
            if c.checked_rem(*dc) != Some(0) {
                return None;
            }
            let mut rest = m.clone();
            for a in dm {
                let pos = rest.iter().position(|x| x == a)?;
                rest.remove(pos);
            }
            out.push((rest, c / dc));
        }
        Some(Dim::from_terms(out))
    }

    /// The largest `c*m` dividing every term: `c > 0` the gcd of the
    /// coefficients, `m` the symbols (not floor divisions) every monomial
    /// has; `1` for zero. `N*J - N*K` gives `N`, `4*M + 6` gives `2`.
    pub fn common_factor(&self) -> Dim {
        let mut terms = self.terms.iter();
        let Some((first, c0)) = terms.next() else { return Dim::int(1) };
        let mut gcd = c0.unsigned_abs();
        let mut common: Monomial = first.iter().filter(|a| matches!(a, Atom::Sym(_))).cloned().collect();
        for (m, c) in terms {
            let (mut a, mut b) = (gcd, c.unsigned_abs());
            while b != 0 {
                (a, b) = (b, a % b);
            }
            gcd = a;
            let mut rest = m.clone();
            common.retain(|atom| match rest.iter().position(|x| x == atom) {
                Some(pos) => {
                    rest.remove(pos);
                    true
                }
                None => false,
            });
        }
        let c = i64::try_from(gcd).unwrap_or(1).max(1);
        Dim { terms: BTreeMap::from([(common, c)]) }
    }

    /// `self mod d` as `self - d * floor(self / d)`.
    pub fn modulo(&self, d: &Dim) -> Option<Dim> {
        Some(self - &(d * &self.floordiv(d)?))
    }

    /// Symbols the dimension mentions (inside floor divisions too).
    pub fn symbols(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        self.collect_symbols(&mut out);
        out
    }

    fn collect_symbols(&self, out: &mut BTreeSet<String>) {
        for m in self.terms.keys() {
            for a in m {
                match a {
                    Atom::Sym(s) => {
                        out.insert(s.clone());
                    }
                    Atom::FloorDiv(n, d) => {
                        n.collect_symbols(out);
                        d.collect_symbols(out);
                    }
                }
            }
        }
    }

    /// Replaces symbols by dimensions (symbols not in the map stay).
    /// Errors when a floor division's divisor becomes a non-positive integer.
    pub fn substitute(&self, map: &BTreeMap<String, Dim>) -> Result<Dim, String> {
        let mut acc = Dim::int(0);
        for (m, c) in &self.terms {
            let mut t = Dim::int(*c);
            for a in m {
                let v = match a {
                    Atom::Sym(s) => map.get(s).cloned().unwrap_or_else(|| Dim::sym(s)),
                    Atom::FloorDiv(n, d) => {
                        let (n, d) = (n.substitute(map)?, d.substitute(map)?);
                        n.floordiv(&d).ok_or_else(|| format!("division by {d} in a dimension"))?
                    }
                };
                t = &t * &v;
            }
            acc = &acc + &t;
        }
        Ok(acc)
    }

    /// Evaluates with every symbol bound; the error names the first unbound
    /// symbol or a non-positive divisor.
    pub fn eval(&self, bind: &dyn Fn(&str) -> Option<i64>) -> Result<i64, String> {
        let mut acc: i64 = 0;
        for (m, c) in &self.terms {
            let mut t = *c;
            for a in m {
                let v = match a {
                    Atom::Sym(s) => bind(s).ok_or_else(|| format!("symbol `{s}` has no value"))?,
                    Atom::FloorDiv(n, d) => {
                        let (n, d) = (n.eval(bind)?, d.eval(bind)?);
                        if d <= 0 {
                            return Err(format!("division by {d} in a dimension"));
                        }
                        n.div_euclid(d)
                    }
                };
                t = t.checked_mul(v).ok_or("dimension overflows i64")?;
            }
            acc = acc.checked_add(t).ok_or("dimension overflows i64")?;
        }
        Ok(acc)
    }

    /// Parses the text form (see the module doc).
    pub fn parse(s: &str) -> Result<Dim, String> {
        let toks = tokenize(s, "+-*/()", "dimension")?;
        let mut p = Parser { toks: &toks, pos: 0 };
        let d = p.sum(0)?;
        if p.pos != toks.len() {
            return Err(format!("unexpected `{}` in dimension `{s}`", toks[p.pos]));
        }
        Ok(d)
    }

    /// Prints the dimension as an expression of a target language: `sym`
    /// names a symbol's variable, `floordiv(n, d)` spells a floor division.
    /// Products and sums are written with `*`, `+` and `-`, fully
    /// parenthesised where needed, so the text is valid C and Rust for integer types.
    pub fn to_code(&self, sym: &dyn Fn(&str) -> String, floordiv: &dyn Fn(String, String) -> String) -> String {
        if self.terms.is_empty() {
            return "0".to_string();
        }
        let mut parts = Vec::new();
        for (m, c) in &self.terms {
            let mut factors: Vec<String> = m
                .iter()
                .map(|a| match a {
                    Atom::Sym(s) => sym(s),
                    Atom::FloorDiv(n, d) => floordiv(n.to_code(sym, floordiv), d.to_code(sym, floordiv)),
                })
                .collect();
            if *c != 1 || factors.is_empty() {
                factors.insert(0, c.to_string());
            }
            parts.push(factors.join(" * "));
        }
        match parts.as_slice() {
            [one] if !one.starts_with('-') => one.clone(),
            _ => format!("({})", parts.join(" + ")),
        }
    }

    /// The product of a shape's dimensions.
    pub fn product(dims: &[Dim]) -> Dim {
        dims.iter().fold(Dim::int(1), |a, b| &a * b)
    }

    /// The monomials as `(atoms, coefficient)`, in canonical order (the
    /// constant, if any, first, with no atoms); for printers that need a
    /// syntax other than [`fmt::Display`]'s (C, Rust).
    pub fn monomials(&self) -> impl Iterator<Item = (&[Atom], i64)> {
        self.terms.iter().map(|(m, c)| (m.as_slice(), *c))
    }
}

impl From<i64> for Dim {
    fn from(v: i64) -> Dim {
        Dim::int(v)
    }
}

impl std::ops::Add for &Dim {
    type Output = Dim;
    fn add(self, o: &Dim) -> Dim {
        Dim::from_terms(self.terms.iter().chain(o.terms.iter()).map(|(m, c)| (m.clone(), *c)))
    }
}

impl std::ops::Sub for &Dim {
    type Output = Dim;
    fn sub(self, o: &Dim) -> Dim {
        let neg = o.terms.iter().map(|(m, c)| (m.clone(), c.saturating_neg()));
        Dim::from_terms(self.terms.iter().map(|(m, c)| (m.clone(), *c)).chain(neg))
    }
}

impl std::ops::Mul for &Dim {
    type Output = Dim;
    fn mul(self, o: &Dim) -> Dim {
        let mut out = Vec::new();
        for (ma, ca) in &self.terms {
            for (mb, cb) in &o.terms {
                let mut m: Monomial = ma.iter().chain(mb.iter()).cloned().collect();
                m.sort();
                out.push((m, ca.saturating_mul(*cb)));
            }
        }
        Dim::from_terms(out)
    }
}

fn fmt_atom(a: &Atom, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match a {
        Atom::Sym(s) => f.write_str(s),
        Atom::FloorDiv(n, d) => {
            let paren =
                |x: &Dim| x.terms.len() > 1 || x.terms.keys().any(|m| m.len() > 1) || x.terms.values().any(|c| *c < 0);
            let ns = if paren(n) { format!("({n})") } else { n.to_string() };
            let ds = if paren(d) || d.terms.keys().any(|m| !m.is_empty()) && d.terms.len() > 1 {
                format!("({d})")
            } else {
                d.to_string()
            };
            write!(f, "({ns}/{ds})")
        }
    }
}

impl fmt::Display for Dim {
    /// Prints symbols first (in order), the constant last: `2*M*K + N - 1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.terms.is_empty() {
            return f.write_str("0");
        }
        let constant = self.terms.get(EMPTY).map(|c| (EMPTY, c));
        let ordered: Vec<(&Monomial, &i64)> =
            self.terms.iter().filter(|(m, _)| !m.is_empty()).chain(constant).collect();
        for (i, (m, c)) in ordered.iter().enumerate() {
            let c = **c;
            if i > 0 {
                f.write_str(if c < 0 { " - " } else { " + " })?;
            } else if c < 0 {
                f.write_str("-")?;
            }
            let a = c.unsigned_abs();
            if m.is_empty() {
                write!(f, "{a}")?;
                continue;
            }
            if a != 1 {
                write!(f, "{a}*")?;
            }
            for (j, at) in m.iter().enumerate() {
                if j > 0 {
                    f.write_str("*")?;
                }
                fmt_atom(at, f)?;
            }
        }
        Ok(())
    }
}

const EMPTY: &Monomial = &Vec::new();

/// Splits `s` into identifiers/integers and the single-character operators
/// in `ops`; `what` names the kind of text for errors. Shared with
/// `AffExpr::parse`.
pub(crate) fn tokenize(s: &str, ops: &str, what: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let cs: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < cs.len() {
        let c = cs[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_alphanumeric() || c == '_' {
            let st = i;
            while i < cs.len() && (cs[i].is_ascii_alphanumeric() || cs[i] == '_') {
                i += 1;
            }
            out.push(cs[st..i].iter().collect());
        } else if ops.contains(c) {
            out.push(c.to_string());
            i += 1;
        } else {
            return Err(format!("unexpected character `{c}` in {what} `{s}`"));
        }
    }
    Ok(out)
}

struct Parser<'a> {
    toks: &'a [String],
    pos: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&str> {
        self.toks.get(self.pos).map(|s| s.as_str())
    }

    fn sum(&mut self, depth: u32) -> Result<Dim, String> {
        let mut acc = self.product(depth)?;
        while let Some(op @ ("+" | "-")) = self.peek() {
            let plus = op == "+";
            self.pos += 1;
            let rhs = self.product(depth)?;
            acc = if plus { &acc + &rhs } else { &acc - &rhs };
        }
        Ok(acc)
    }

    fn product(&mut self, depth: u32) -> Result<Dim, String> {
        let mut acc = self.atom(depth)?;
        while let Some(op @ ("*" | "/")) = self.peek() {
            let mul = op == "*";
            self.pos += 1;
            let rhs = self.atom(depth)?;
            acc = if mul { &acc * &rhs } else { acc.floordiv(&rhs).ok_or_else(|| format!("division by {rhs}"))? };
        }
        Ok(acc)
    }

    fn atom(&mut self, depth: u32) -> Result<Dim, String> {
        if depth > 64 {
            return Err("dimension expression nested too deeply".into());
        }
        let t = self.peek().ok_or("dimension expression ends early")?.to_string();
        self.pos += 1;
        if t == "(" {
            let d = self.sum(depth + 1)?;
            if self.peek() != Some(")") {
                return Err("expected `)` in dimension".into());
            }
            self.pos += 1;
            return Ok(d);
        }
        if t == "-" {
            return Ok(&Dim::int(0) - &self.atom(depth + 1)?);
        }
        if t.chars().next().is_some_and(|c| c.is_ascii_digit()) {
            return t.parse::<i64>().map(Dim::int).map_err(|_| format!("bad integer `{t}` in dimension"));
        }
        if t.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') {
            return Ok(Dim::sym(&t));
        }
        Err(format!("unexpected `{t}` in dimension"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Dim {
        Dim::parse(s).unwrap()
    }

    #[test]
    fn huge_coefficients_saturate_and_evaluation_reports_overflow() {
        let big = Dim::int(i64::MAX);
        assert_eq!((&big * &big).as_int(), Some(i64::MAX));
        assert_eq!((&Dim::int(i64::MIN) - &big).as_int(), Some(i64::MIN));
        assert_eq!((&(&big + &big) * &d("M")).to_string(), format!("{}*M", i64::MAX));
        assert_eq!(Dim::int(i64::MIN).to_string(), i64::MIN.to_string());
        assert!(d("M*N*K").eval(&|_| Some(1 << 31)).is_err());
        assert_eq!(Dim::int(i64::MIN).floordiv(&Dim::int(-1)), None);
    }

    #[test]
    fn checked_arithmetic_is_exact_or_none() {
        let (big, ten) = (Dim::int(i64::MAX), Dim::int(10));
        assert_eq!(ten.checked_add(&big), None, "10 + MAX leaves i64");
        assert_eq!(big.checked_sub(&ten).and_then(|d| d.checked_add(&ten)), Some(big.clone()));
        assert_eq!(Dim::int(0).checked_sub(&Dim::int(i64::MIN)), None);
        assert_eq!(Dim::int(-1).checked_sub(&Dim::int(i64::MAX)), Some(Dim::int(i64::MIN)));
        assert_eq!(d("M + 1").checked_mul(&d("M - 1")), Some(d("M*M - 1")), "cross terms cancel");
        assert_eq!(d("4294967296*M").checked_mul(&d("4294967296")), None);
        assert_eq!(d("2*M + N").checked_add(&d("M - N")), Some(d("3*M")));
    }

    #[test]
    fn common_factor_takes_the_symbols_and_gcd_of_every_term() {
        for (x, f) in [("N*J - N*K", "N"), ("4*M + 6", "2"), ("-3*M*N*N + 6*N*N*K", "3*N*N"), ("M + N", "1")] {
            assert_eq!(d(x).common_factor(), d(f), "{x}");
            assert_eq!(&d(x).floordiv(&d(f)).unwrap() * &d(f), d(x), "{x}: the factor divides exactly");
        }
        assert_eq!(Dim::int(0).common_factor(), Dim::int(1));
        assert_eq!(d("(M/2)*N + (M/2)").common_factor(), Dim::int(1), "floor divisions may be zero: never factored");
    }

    #[test]
    fn polynomial_equality_is_symbolic() {
        assert_eq!(d("M*K"), d("K*M"));
        assert_eq!(d("2*(M+1) - 2"), d("M + M"));
        assert_ne!(d("M"), d("N"));
        assert_eq!(d("(M*K)/K"), d("M"));
        assert_eq!(d("(2*M + 4)/2"), d("M + 2"));
        assert_eq!(d("7/2"), Dim::int(3));
    }

    #[test]
    fn unfolded_floordiv_is_an_atom_that_evaluates() {
        let o = d("(H + 2 - 3)/S + 1");
        assert_eq!(o.as_int(), None);
        let v = o.eval(&|s| match s {
            "H" => Some(8),
            "S" => Some(2),
            _ => None,
        });
        assert_eq!(v, Ok(4));
        let mut m = BTreeMap::new();
        m.insert("H".to_string(), Dim::int(8));
        m.insert("S".to_string(), Dim::int(2));
        assert_eq!(o.substitute(&m).unwrap(), Dim::int(4));
    }

    #[test]
    fn display_parses_back() {
        for s in ["M*K + 3", "2*M - N - 1", "(H + 2)/S + 1", "0", "-4", "Cin*G*Kh"] {
            let x = d(s);
            assert_eq!(d(&x.to_string()), x, "{s} printed as {x}");
        }
    }

    #[test]
    fn code_evaluates_like_the_dim() {
        let x = d("2*M*K - (M + 3)/2 + 1");
        let code = x.to_code(&|s| s.to_lowercase(), &|n, q| format!("fd({n}, {q})"));
        assert_eq!(code, "(1 + 2 * k * m + -1 * fd((3 + m), 2))");
    }

    #[test]
    fn bad_text_is_an_error() {
        assert!(Dim::parse("M +").is_err());
        assert!(Dim::parse("M $ 2").is_err());
        assert!(Dim::parse("M/0").is_err());
        assert!(d("M").eval(&|_| None).is_err());
    }
}

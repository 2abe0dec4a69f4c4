//! Affine index expressions with floor division: the `AxisExpr` of the
//! IndexBook (`spec/000` §1.3, §12.2) and the `index_map` of Tiny IR `VIEW`.
//!
//! An [`AffExpr`] is `Σ coeff·atom + constant` where an atom is an index
//! variable `i<k>` or `floor(e / q)` of another expression, and coefficients,
//! constant and divisors are [`Dim`]s (integers or symbols). Remainders are
//! never atoms: `e % q` is expanded to `e - q·floor(e/q)` (`000` §3.2), whose
//! guard `0 ≤ e - q·floor(e/q) < q` holds by construction of `floor`.
//!
//! Invariants: no zero coefficients; a floor division whose divisor divides
//! every coefficient and the constant is folded; division by 1 is folded.

use std::collections::BTreeMap;
use std::fmt;

use crate::sym::Dim;

/// An atom of an affine expression.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AffAtom {
    /// Index variable `i<k>`.
    Var(u32),
    /// `floor(e / q)` with `q > 0`.
    FloorDiv(Box<AffExpr>, Dim),
}

/// `Σ coeff·atom + constant` (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct AffExpr {
    terms: BTreeMap<AffAtom, Dim>,
    constant: Dim,
}

impl AffExpr {
    /// The variable `i<k>`.
    pub fn var(k: u32) -> AffExpr {
        let mut terms = BTreeMap::new();
        terms.insert(AffAtom::Var(k), Dim::int(1));
        AffExpr { terms, constant: Dim::int(0) }
    }

    /// A constant (integer or symbolic).
    pub fn constant(c: Dim) -> AffExpr {
        AffExpr { terms: BTreeMap::new(), constant: c }
    }

    /// The integer constant `v`.
    pub fn int(v: i64) -> AffExpr {
        AffExpr::constant(Dim::int(v))
    }

    /// The terms, as `(atom, coefficient)`.
    pub fn terms(&self) -> impl Iterator<Item = (&AffAtom, &Dim)> {
        self.terms.iter()
    }

    /// The constant part.
    pub fn constant_part(&self) -> &Dim {
        &self.constant
    }

    /// `Some(c)` when the expression has no variable.
    pub fn as_constant(&self) -> Option<&Dim> {
        self.terms.is_empty().then_some(&self.constant)
    }

    /// `Some(k)` when the expression is exactly `i<k>`.
    pub fn as_var(&self) -> Option<u32> {
        if self.terms.len() != 1 || self.constant.as_int() != Some(0) {
            return None;
        }
        match self.terms.iter().next()? {
            (AffAtom::Var(k), c) if c.is_one() => Some(*k),
            _ => None,
        }
    }

    fn normalized(mut self) -> AffExpr {
        self.terms.retain(|_, c| c.as_int() != Some(0));
        self
    }

    /// `c · self`.
    pub fn scale(&self, c: &Dim) -> AffExpr {
        AffExpr { terms: self.terms.iter().map(|(a, k)| (a.clone(), k * c)).collect(), constant: &self.constant * c }
            .normalized()
    }

    /// `floor(self / q)`; `None` when `q` is a known integer ≤ 0.
    ///
    /// Folds exact divisions, and `floor(e / q) = 0` when `e` is a variable
    /// whose extent (from `extent`) is `q` or a known integer ≤ `q`.
    pub fn floordiv(&self, q: &Dim, extent: &dyn Fn(u32) -> Option<Dim>) -> Option<AffExpr> {
        if let Some(v) = q.as_int() {
            if v <= 0 {
                return None;
            }
            if v == 1 {
                return Some(self.clone());
            }
        }
        let exact = |d: &Dim| (d / q).filter(|r| &(r * q) == d);
        let divided: Option<BTreeMap<AffAtom, Dim>> =
            self.terms.iter().map(|(a, c)| exact(c).map(|r| (a.clone(), r))).collect();
        if let (Some(terms), Some(constant)) = (divided, exact(&self.constant)) {
            return Some(AffExpr { terms, constant }.normalized());
        }
        if let Some(k) = self.as_var() {
            if let Some(e) = extent(k) {
                let fits = &e == q || matches!((e.as_int(), q.as_int()), (Some(a), Some(b)) if a <= b);
                if fits {
                    return Some(AffExpr::int(0));
                }
            }
        }
        if let (true, Some(c)) = (self.terms.is_empty(), self.constant.floordiv(q)) {
            return Some(AffExpr::constant(c));
        }
        let mut terms = BTreeMap::new();
        terms.insert(AffAtom::FloorDiv(Box::new(self.clone()), q.clone()), Dim::int(1));
        Some(AffExpr { terms, constant: Dim::int(0) })
    }

    /// `self mod q`, expanded as `self - q·floor(self/q)`; `self` itself when
    /// it is a variable whose extent is known to be ≤ `q`.
    pub fn modulo(&self, q: &Dim, extent: &dyn Fn(u32) -> Option<Dim>) -> Option<AffExpr> {
        let f = self.floordiv(q, extent)?;
        Some(self - &f.scale(q))
    }

    /// Replaces every variable `i<k>` by `vals[k]` (composition of index maps),
    /// re-folding floor divisions. Variables beyond `vals` are an error.
    pub fn substitute(&self, vals: &[AffExpr]) -> Result<AffExpr, String> {
        let none = |_: u32| None;
        let mut acc = AffExpr::constant(self.constant.clone());
        for (a, c) in &self.terms {
            let v = match a {
                AffAtom::Var(k) => {
                    vals.get(*k as usize).cloned().ok_or_else(|| format!("index variable i{k} is out of range"))?
                }
                AffAtom::FloorDiv(e, q) => {
                    e.substitute(vals)?.floordiv(q, &none).ok_or("division by a non-positive number")?
                }
            };
            acc = &acc + &v.scale(c);
        }
        Ok(acc)
    }

    /// Applies `f` to every [`Dim`] (coefficients, constants, divisors), e.g.
    /// to bind symbols.
    pub fn map_dims(&self, f: &dyn Fn(&Dim) -> Result<Dim, String>) -> Result<AffExpr, String> {
        let none = |_: u32| None;
        let mut acc = AffExpr::constant(f(&self.constant)?);
        for (a, c) in &self.terms {
            let v = match a {
                AffAtom::Var(k) => AffExpr::var(*k),
                AffAtom::FloorDiv(e, q) => {
                    e.map_dims(f)?.floordiv(&f(q)?, &none).ok_or("division by a non-positive number")?
                }
            };
            acc = &acc + &v.scale(&f(c)?);
        }
        Ok(acc)
    }

    /// Evaluates with index values `vars` and symbol values from `bind`.
    pub fn eval(&self, vars: &[i64], bind: &dyn Fn(&str) -> Option<i64>) -> Result<i64, String> {
        let mut acc = self.constant.eval(bind)?;
        for (a, c) in &self.terms {
            let v = match a {
                AffAtom::Var(k) => {
                    *vars.get(*k as usize).ok_or_else(|| format!("index variable i{k} is out of range"))?
                }
                AffAtom::FloorDiv(e, q) => {
                    let q = q.eval(bind)?;
                    if q <= 0 {
                        return Err(format!("division by {q}"));
                    }
                    e.eval(vars, bind)?.div_euclid(q)
                }
            };
            let term = c.eval(bind)?.checked_mul(v).ok_or("index expression overflows i64")?;
            acc = acc.checked_add(term).ok_or("index expression overflows i64")?;
        }
        Ok(acc)
    }

    /// Symbols mentioned by coefficients, constants and divisors.
    pub fn symbols(&self) -> std::collections::BTreeSet<String> {
        let mut out = self.constant.symbols();
        for (a, c) in &self.terms {
            out.extend(c.symbols());
            if let AffAtom::FloorDiv(e, q) = a {
                out.extend(e.symbols());
                out.extend(q.symbols());
            }
        }
        out
    }

    /// Largest variable index used plus one (0 for a constant).
    pub fn arity(&self) -> u32 {
        self.terms
            .keys()
            .map(|a| match a {
                AffAtom::Var(k) => k + 1,
                AffAtom::FloorDiv(e, _) => e.arity(),
            })
            .max()
            .unwrap_or(0)
    }

    /// The number of atoms, those inside floor divisions included: the size
    /// a printer writes, up to constant factors.
    pub fn atom_count(&self) -> usize {
        self.terms
            .keys()
            .map(|a| match a {
                AffAtom::Var(_) => 1,
                AffAtom::FloorDiv(e, _) => 1 + e.atom_count(),
            })
            .sum()
    }

    /// Coefficients of variables appearing outside floor divisions.
    pub fn var_coeffs(&self) -> impl Iterator<Item = (u32, &Dim)> {
        self.terms.iter().filter_map(|(a, c)| match a {
            AffAtom::Var(k) => Some((*k, c)),
            AffAtom::FloorDiv(..) => None,
        })
    }

    /// The coefficient of variable `i<k>` outside floor divisions (`None`
    /// when it appears only inside one, or not at all).
    pub fn coeff(&self, k: u32) -> Option<&Dim> {
        self.terms.get(&AffAtom::Var(k))
    }

    /// Prints with variables named by `name` (e.g. `i0`, or C loop variables).
    pub fn display_with<'a>(&'a self, name: &'a dyn Fn(u32) -> String) -> impl fmt::Display + 'a {
        Shown { e: self, name }
    }

    /// Parses the text form: integers, symbols, variables `i<k>`, `+ - *`,
    /// `floor(e / q)` or `e / q` (floor division) and `e % q` (expanded).
    pub fn parse(s: &str) -> Result<AffExpr, String> {
        parse::parse(s)
    }
}

impl std::ops::Add for &AffExpr {
    type Output = AffExpr;
    fn add(self, o: &AffExpr) -> AffExpr {
        let mut terms = self.terms.clone();
        for (a, c) in &o.terms {
            let e = terms.entry(a.clone()).or_insert_with(|| Dim::int(0));
            *e = &*e + c;
        }
        AffExpr { terms, constant: &self.constant + &o.constant }.normalized()
    }
}

impl std::ops::Sub for &AffExpr {
    type Output = AffExpr;
    fn sub(self, o: &AffExpr) -> AffExpr {
        self + &o.scale(&Dim::int(-1))
    }
}

struct Shown<'a> {
    e: &'a AffExpr,
    name: &'a dyn Fn(u32) -> String,
}

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut put = |f: &mut fmt::Formatter<'_>, c: &Dim, body: Option<String>| -> fmt::Result {
            // The magnitude as text: `-i64::MIN` has no `i64`.
            let (neg, coef, one) = match c.as_int() {
                Some(v) => (v < 0, v.unsigned_abs().to_string(), v.unsigned_abs() == 1),
                None if c.as_sym().is_some() => (false, c.to_string(), false),
                None => (false, format!("({c})"), false),
            };
            if first {
                if neg {
                    f.write_str("-")?;
                }
            } else {
                f.write_str(if neg { " - " } else { " + " })?;
            }
            first = false;
            match body {
                None => f.write_str(&coef),
                Some(b) if one => f.write_str(&b),
                Some(b) => write!(f, "{coef}*{b}"),
            }
        };
        for (a, c) in &self.e.terms {
            let body = match a {
                AffAtom::Var(k) => (self.name)(*k),
                AffAtom::FloorDiv(e, q) => {
                    let qs =
                        if q.as_int().is_some() || q.as_sym().is_some() { q.to_string() } else { format!("({q})") };
                    format!("floor(({}) / {qs})", e.display_with(self.name))
                }
            };
            put(f, c, Some(body))?;
        }
        if self.e.constant.as_int() != Some(0) || self.e.terms.is_empty() {
            put(f, &self.e.constant, None)?;
        }
        Ok(())
    }
}

impl fmt::Display for AffExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = |k: u32| format!("i{k}");
        let shown = Shown { e: self, name: &name };
        write!(f, "{shown}")
    }
}

impl std::ops::Div<&Dim> for &Dim {
    type Output = Option<Dim>;
    /// Floor division of dimensions (see [`Dim::floordiv`]).
    fn div(self, q: &Dim) -> Option<Dim> {
        self.floordiv(q)
    }
}

mod parse {
    use super::*;

    pub fn parse(s: &str) -> Result<AffExpr, String> {
        let toks = crate::sym::tokenize(s, "+-*/%()", "index expression")?;
        let mut p = P { t: &toks, i: 0 };
        let e = p.sum(0)?;
        if p.i != toks.len() {
            return Err(format!("unexpected `{}` in index expression `{s}`", toks[p.i]));
        }
        Ok(e)
    }

    struct P<'a> {
        t: &'a [String],
        i: usize,
    }

    /// Operand of `*`, `/`, `%`: either an index expression or a pure dimension.
    impl P<'_> {
        fn peek(&self) -> Option<&str> {
            self.t.get(self.i).map(|s| s.as_str())
        }

        fn sum(&mut self, d: u32) -> Result<AffExpr, String> {
            let mut acc = self.prod(d)?;
            while let Some(op @ ("+" | "-")) = self.peek() {
                let plus = op == "+";
                self.i += 1;
                let r = self.prod(d)?;
                acc = if plus { &acc + &r } else { &acc - &r };
            }
            Ok(acc)
        }

        fn prod(&mut self, d: u32) -> Result<AffExpr, String> {
            let none = |_: u32| None;
            let mut acc = self.atom(d)?;
            while let Some(op @ ("*" | "/" | "%")) = self.peek() {
                let op = op.to_string();
                self.i += 1;
                let r = self.atom(d)?;
                acc = match (op.as_str(), acc.as_constant().cloned(), r.as_constant().cloned()) {
                    ("*", Some(c), _) => r.scale(&c),
                    ("*", _, Some(c)) => acc.scale(&c),
                    ("/", _, Some(q)) => acc.floordiv(&q, &none).ok_or("division by a non-positive number")?,
                    ("%", _, Some(q)) => acc.modulo(&q, &none).ok_or("remainder by a non-positive number")?,
                    _ => return Err(format!("`{op}` needs a constant operand: the index expression is not affine")),
                };
            }
            Ok(acc)
        }

        fn atom(&mut self, d: u32) -> Result<AffExpr, String> {
            if d > 64 {
                return Err("index expression nested too deeply".into());
            }
            let t = self.peek().ok_or("index expression ends early")?.to_string();
            self.i += 1;
            match t.as_str() {
                "(" => {
                    let e = self.sum(d + 1)?;
                    self.expect(")")?;
                    Ok(e)
                }
                "-" => Ok(self.atom(d + 1)?.scale(&Dim::int(-1))),
                "floor" => {
                    self.expect("(")?;
                    let e = self.sum(d + 1)?;
                    self.expect(")")?;
                    Ok(e)
                }
                _ if t.starts_with(|c: char| c.is_ascii_digit()) => {
                    t.parse::<i64>().map(AffExpr::int).map_err(|_| format!("bad integer `{t}`"))
                }
                _ if t.len() > 1 && t.starts_with('i') && t[1..].chars().all(|c| c.is_ascii_digit()) => {
                    let k = t[1..].parse::<u32>().map_err(|_| format!("bad variable `{t}`"))?;
                    Ok(AffExpr::var(k))
                }
                _ if t.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') => {
                    Ok(AffExpr::constant(Dim::sym(&t)))
                }
                _ => Err(format!("unexpected `{t}` in index expression")),
            }
        }

        fn expect(&mut self, s: &str) -> Result<(), String> {
            if self.peek() == Some(s) {
                self.i += 1;
                Ok(())
            } else {
                Err(format!("expected `{s}` in index expression"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(s: &str) -> AffExpr {
        AffExpr::parse(s).unwrap()
    }

    #[test]
    fn exact_floordiv_folds_and_inexact_stays() {
        let none = |_: u32| None;
        assert_eq!(e("(4*i0 + 2*i1 + 6) / 2"), e("2*i0 + i1 + 3"));
        assert_eq!(e("(K*i0 + K*i1) / K"), e("i0 + i1"));
        let f = e("i0 / 3");
        assert!(f.as_var().is_none());
        assert_eq!(f.eval(&[7], &|_| None), Ok(2));
        assert_eq!(e("i0 / 1"), e("i0"));
        assert_eq!(e("i0").floordiv(&Dim::int(4), &|_| Some(Dim::int(4))), Some(AffExpr::int(0)));
        assert!(e("i0").floordiv(&Dim::int(0), &none).is_none());
    }

    /// A coefficient or constant of `i64::MIN` prints (its magnitude is no
    /// `i64`; the fuzzer's `tiny_json` crash-d3258474c312999a, a VIEW refused
    /// with its map in the message).
    #[test]
    fn the_ends_of_i64_print() {
        let min = AffExpr::constant(Dim::int(i64::MIN));
        assert_eq!(min.to_string(), "-9223372036854775808");
        assert_eq!((&e("i0") + &min).to_string(), "i0 - 9223372036854775808");
        assert_eq!(e("i0").scale(&Dim::int(i64::MIN)).to_string(), "-9223372036854775808*i0");
    }

    #[test]
    fn remainder_expands_to_floordiv() {
        let m = e("i0 % 4");
        for x in 0..20 {
            assert_eq!(m.eval(&[x], &|_| None), Ok(x % 4));
        }
    }

    #[test]
    fn substitution_composes_maps() {
        // out -> mid: (i0*2 + i1); mid -> in: (mid / 3)
        let inner = e("i0 / 3");
        let outer = vec![e("2*i0 + i1")];
        let c = inner.substitute(&outer).unwrap();
        for a in 0..5 {
            for b in 0..2 {
                assert_eq!(c.eval(&[a, b], &|_| None), Ok((2 * a + b) / 3));
            }
        }
    }

    #[test]
    fn symbolic_coefficients_evaluate() {
        let x = e("S*i0 + D*i1 - 1");
        let bind = |s: &str| match s {
            "S" => Some(2),
            "D" => Some(3),
            _ => None,
        };
        assert_eq!(x.eval(&[4, 1], &bind), Ok(10));
        assert_eq!(AffExpr::parse(&x.to_string()).unwrap(), x);
    }

    #[test]
    fn non_affine_text_is_rejected() {
        assert!(AffExpr::parse("i0 * i1").is_err());
        assert!(AffExpr::parse("i0 / i1").is_err());
        assert!(AffExpr::parse("i0 +").is_err());
    }
}

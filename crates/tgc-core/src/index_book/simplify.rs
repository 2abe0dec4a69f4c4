//! Range-aware simplification of index expressions: the folding that keeps
//! reshape maps and composed chains free of needless floor divisions.
//!
//! Facts used, all sound because every symbol is a size ≥ 1 (generated code
//! checks that at run time) and every variable `i<k>` ranges over
//! `0 ≤ i < extent[k]`:
//! - a [`Dim`] whose monomials all have positive coefficients over symbols and
//!   floor divisions of such is ≥ 0 ([`is_nonneg`]);
//! - `floor((q·Q + r) / q) = Q + floor(r / q)` when `Q` has integer
//!   coefficients, and `floor(r / q) = 0` when `0 ≤ r ≤ q - 1` ([`floordiv`]).

use crate::affine::{AffAtom, AffExpr};
use crate::sym::{Atom, Dim};

use super::Constr;

/// True when `d` is evidently ≥ 0 (see the module doc).
pub fn is_nonneg(d: &Dim) -> bool {
    if let Some(v) = d.as_int() {
        return v >= 0;
    }
    d.monomials().all(|(atoms, c)| {
        c > 0
            && atoms.iter().all(|a| match a {
                Atom::Sym(_) => true,
                Atom::FloorDiv(n, q) => is_nonneg(n) && is_nonneg(q),
            })
    })
}

/// True when `e` mentions `i<k>`, inside floor divisions too.
pub fn mentions(e: &AffExpr, k: u32) -> bool {
    e.terms().any(|(a, _)| match a {
        AffAtom::Var(j) => *j == k,
        AffAtom::FloorDiv(inner, _) => mentions(inner, k),
    })
}

/// `(min, max)` of `e` over `0 ≤ i_k < extents[k]`, when signs can be decided.
pub fn bounds(e: &AffExpr, extents: &[Dim]) -> Option<(Dim, Dim)> {
    let mut lo = e.constant_part().clone();
    let mut hi = lo.clone();
    for (a, c) in e.terms() {
        let (alo, ahi) = match a {
            AffAtom::Var(k) => (Dim::int(0), extents.get(*k as usize)? - &Dim::int(1)),
            AffAtom::FloorDiv(inner, q) => {
                let (l, h) = bounds(inner, extents)?;
                (l.floordiv(q)?, h.floordiv(q)?)
            }
        };
        if is_nonneg(c) {
            lo = &lo + &(c * &alo);
            hi = &hi + &(c * &ahi);
        } else if is_nonneg(&(&Dim::int(0) - c)) {
            lo = &lo + &(c * &ahi);
            hi = &hi + &(c * &alo);
        } else {
            return None;
        }
    }
    Some((lo, hi))
}

/// True when `c` holds for every point of the box `extents`.
pub fn always_holds(c: &Constr, extents: &[Dim]) -> bool {
    bounds(&c.expr, extents).is_some_and(|(lo, _)| is_nonneg(&lo))
}

/// `floor(e / q)`, folded with the ranges of the variables; `None` when `q` is
/// a known integer ≤ 0.
///
/// `e` is split as `q·Q + r` and `floor(e / q) = Q + floor(r / q)`, which
/// folds to `Q + c` when the bounds of `r` fall in one quotient `c` (see
/// [`split`] for the two splits tried). The second split is what keeps a
/// composed chain of reshapes and permutes from doubling at every link
/// (`000` §3.2): `floor((2·i - 3·floor(i/2)) / 2)` is `i - 2·floor(i/2)`.
pub fn floordiv(e: &AffExpr, q: &Dim, extents: &[Dim]) -> Option<AffExpr> {
    if q.as_int().is_some_and(|v| v <= 0) {
        return None;
    }
    let (quot, rest) = split(e, q, false);
    if let Some(folded) = fold(&quot, &rest, q, extents) {
        return Some(folded);
    }
    if q.as_int().is_some() {
        let (quot, rest) = split(e, q, true);
        if let Some(folded) = fold(&quot, &rest, q, extents) {
            return Some(folded);
        }
    }
    let ext = |k: u32| extents.get(k as usize).cloned();
    Some(&quot + &rest.floordiv(q, &ext)?)
}

/// `e = q·quot + rest`. The terms whose coefficient `q` divides exactly go
/// to `quot`; with `euclid`, every integer coefficient `c` (for an integer
/// `q`) is split as `q·⌊c/q⌋ + (c mod q)`, so `rest` keeps only
/// non-negative coefficients below `q`. An integer constant is always split
/// that way.
fn split(e: &AffExpr, q: &Dim, euclid: bool) -> (AffExpr, AffExpr) {
    let exact = |d: &Dim| d.floordiv(q).filter(|r| &(r * q) == d);
    let mut quot = AffExpr::int(0);
    let mut rest = AffExpr::int(0);
    for (a, c) in e.terms() {
        let atom = atom_expr(a);
        match (exact(c), euclid.then(|| c.as_int().zip(q.as_int())).flatten()) {
            (Some(r), _) => quot = &quot + &atom.scale(&r),
            (None, Some((cv, qv))) => {
                quot = &quot + &atom.scale(&Dim::int(cv.div_euclid(qv)));
                rest = &rest + &atom.scale(&Dim::int(cv.rem_euclid(qv)));
            }
            (None, None) => rest = &rest + &atom.scale(c),
        }
    }
    let k = e.constant_part();
    match (exact(k), k.as_int(), q.as_int()) {
        (Some(r), _, _) => quot = &quot + &AffExpr::constant(r),
        (None, Some(kv), Some(qv)) => {
            quot = &quot + &AffExpr::int(kv.div_euclid(qv));
            rest = &rest + &AffExpr::int(kv.rem_euclid(qv));
        }
        _ => rest = &rest + &AffExpr::constant(k.clone()),
    }
    (quot, rest)
}

/// `quot + floor(rest / q)` when the ranges decide `floor(rest / q)`: `rest`
/// is zero, lies in `[0, q - 1]`, or its bounds have one integer quotient.
fn fold(quot: &AffExpr, rest: &AffExpr, q: &Dim, extents: &[Dim]) -> Option<AffExpr> {
    if rest.as_constant().is_some_and(|r| r.as_int() == Some(0)) {
        return Some(quot.clone());
    }
    let (lo, hi) = bounds(rest, extents)?;
    if is_nonneg(&lo) && is_nonneg(&(&(q - &Dim::int(1)) - &hi)) {
        return Some(quot.clone());
    }
    match (lo.floordiv(q)?.as_int(), hi.floordiv(q)?.as_int()) {
        (Some(a), Some(b)) if a == b => Some(quot + &AffExpr::int(a)),
        _ => None,
    }
}

/// `e mod q` as `e - q·floor(e/q)`, folded like [`floordiv`].
pub fn modulo(e: &AffExpr, q: &Dim, extents: &[Dim]) -> Option<AffExpr> {
    Some(e - &floordiv(e, q, extents)?.scale(q))
}

/// Rebuilds `e` bottom-up, re-folding every floor division with the ranges of
/// the variables. Returns `e` unchanged where a divisor is not positive.
pub fn simplify(e: &AffExpr, extents: &[Dim]) -> AffExpr {
    let mut acc = AffExpr::constant(e.constant_part().clone());
    for (a, c) in e.terms() {
        let v = match a {
            AffAtom::Var(k) => AffExpr::var(*k),
            AffAtom::FloorDiv(inner, q) => match floordiv(&simplify(inner, extents), q, extents) {
                Some(f) => f,
                None => atom_expr(a),
            },
        };
        acc = &acc + &v.scale(c);
    }
    acc
}

/// The div guards `0 ≤ e - q·floor(e/q) ≤ q - 1` of every floor division in
/// `e` (nested ones included), innermost first.
pub fn div_guards(e: &AffExpr) -> Vec<Constr> {
    let mut out = Vec::new();
    collect_div_guards(e, &mut out);
    out
}

fn collect_div_guards(e: &AffExpr, out: &mut Vec<Constr>) {
    for (a, _) in e.terms() {
        if let AffAtom::FloorDiv(inner, q) = a {
            collect_div_guards(inner, out);
            let r = inner.as_ref() - &atom_expr(a).scale(q);
            for c in Constr::between(&r, &Dim::int(0), &(q - &Dim::int(1))) {
                if !out.contains(&c) {
                    out.push(c);
                }
            }
        }
    }
}

/// An atom as an expression (coefficient 1).
fn atom_expr(a: &AffAtom) -> AffExpr {
    match a {
        AffAtom::Var(k) => AffExpr::var(*k),
        AffAtom::FloorDiv(inner, q) => {
            let none = |_: u32| None;
            // An atom that exists was built by a successful floordiv.
            inner.floordiv(q, &none).unwrap_or_else(|| AffExpr::int(0))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuzz::gen::{Entropy, SplitMix64};

    fn e(s: &str) -> AffExpr {
        AffExpr::parse(s).unwrap()
    }

    fn d(s: &str) -> Dim {
        Dim::parse(s).unwrap()
    }

    #[test]
    fn split_then_merge_folds_with_ranges() {
        let ext = [d("A"), d("B")];
        assert_eq!(floordiv(&e("B*i0 + i1"), &d("B"), &ext), Some(e("i0")));
        assert_eq!(modulo(&e("B*i0 + i1"), &d("B"), &ext), Some(e("i1")));
        assert_eq!(simplify(&e("floor((B*i0 + i1) / B)"), &ext), e("i0"));
        let ext3 = [d("A"), d("B"), d("C")];
        assert_eq!(floordiv(&e("B*C*i0 + C*i1 + i2"), &d("B*C"), &ext3), Some(e("i0")));
    }

    /// The second split folds what the first cannot: `f(i) = 2·(i mod 2) +
    /// floor(i/2)` on `0 ≤ i < 4` is an involution, and composing it with
    /// itself simplifies to `i` (so a chain of them does not double per
    /// link).
    #[test]
    fn a_composed_involution_folds_to_the_identity() {
        let ext = [Dim::int(4)];
        let f = &modulo(&e("i0"), &Dim::int(2), &ext).unwrap().scale(&Dim::int(2))
            + &floordiv(&e("i0"), &Dim::int(2), &ext).unwrap();
        assert_eq!(f, e("2*i0 - 3*floor(i0 / 2)"));
        let ff = simplify(&f.substitute(std::slice::from_ref(&f)).unwrap(), &ext);
        assert_eq!(ff, e("i0"));
    }

    /// Every fold is exact: `floordiv` of random expressions over small
    /// boxes evaluates to the true floor at every point.
    #[test]
    fn floordiv_agrees_with_floor_at_every_point() {
        let mut rng = SplitMix64::new(0x9e37_79b9_7f4a_7c15u64);
        let mut next = |m: i64| rng.below(m as usize) as i64;
        for _ in 0..2000 {
            let ext = [Dim::int(1 + next(6)), Dim::int(1 + next(6))];
            let inner_q = Dim::int(1 + next(4));
            let inner = floordiv(&e("i0"), &inner_q, &ext).unwrap();
            let x = &(&e("i0").scale(&Dim::int(next(9) - 4)) + &e("i1").scale(&Dim::int(next(9) - 4)))
                + &(&inner.scale(&Dim::int(next(9) - 4)) + &AffExpr::int(next(11) - 5));
            let q = 1 + next(5);
            let f = floordiv(&x, &Dim::int(q), &ext).unwrap();
            for a in 0..ext[0].as_int().unwrap() {
                for b in 0..ext[1].as_int().unwrap() {
                    let want = x.eval(&[a, b], &|_| None).unwrap().div_euclid(q);
                    assert_eq!(f.eval(&[a, b], &|_| None), Ok(want), "floor(({x}) / {q}) = {f} at ({a}, {b})");
                }
            }
        }
    }

    #[test]
    fn unfoldable_divisions_stay_and_evaluate() {
        let ext = [Dim::int(4), Dim::int(6)];
        let f = floordiv(&e("6*i0 + i1"), &Dim::int(4), &ext).unwrap();
        for a in 0..4 {
            for b in 0..6 {
                assert_eq!(f.eval(&[a, b], &|_| None), Ok((6 * a + b) / 4));
            }
        }
        assert_eq!(floordiv(&e("i0"), &Dim::int(0), &ext), None);
    }

    #[test]
    fn signs_and_bounds() {
        assert!(is_nonneg(&d("M*K + 3")));
        assert!(!is_nonneg(&d("M - 1")));
        let (lo, hi) = bounds(&e("M - 1 - i0"), &[d("M")]).unwrap();
        assert_eq!((lo, hi), (Dim::int(0), d("M - 1")));
        assert!(always_holds(&Constr::ge0(e("M - 1 - i0")), &[d("M")]));
        assert!(!always_holds(&Constr::ge0(e("i0 - 1")), &[d("M")]));
    }

    #[test]
    fn div_guards_bound_the_remainder() {
        let g = div_guards(&e("floor(i0 / 3)"));
        assert_eq!(g.len(), 2);
        for x in 0..10 {
            for c in &g {
                assert!(c.expr.eval(&[x], &|_| None).unwrap() >= 0);
            }
        }
    }
}

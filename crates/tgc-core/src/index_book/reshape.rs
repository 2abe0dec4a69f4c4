//! The `RESHAPE` map (`000` §1.3, §3.2; `001` §1.3 (B)): linearise the output
//! index row-major, `L = Σ o_j·stride'_j`, and re-decompose it into the source
//! index, `s_k = floor(L / stride_k) mod size_k`.
//!
//! Before that, axes are matched in groups of equal products — greedily from
//! the left, then from the right, the unmatched middle being one group — and
//! the rule is applied per group, so inserting or removing unit axes,
//! splitting and merging give maps without floor divisions wherever the
//! division is exact. Unit axes take no part in groups: a unit source axis
//! reads index 0, a unit output axis is not used.

use std::ops::Range;

use crate::affine::AffExpr;
use crate::sym::Dim;

use super::simplify;

/// The map from output index (`i0..`, extents `dst`) to source index (shape
/// `src`); `None` only when a size is a known integer ≤ 0.
pub fn reshape_map(src: &[Dim], dst: &[Dim]) -> Option<Vec<AffExpr>> {
    let s: Vec<usize> = (0..src.len()).filter(|&k| !src[k].is_one()).collect();
    let t: Vec<usize> = (0..dst.len()).filter(|&k| !dst[k].is_one()).collect();
    let sizes = |axes: &[usize], shape: &[Dim]| axes.iter().map(|&k| shape[k].clone()).collect::<Vec<_>>();
    let groups = match_groups(&sizes(&s, src), &sizes(&t, dst));
    let mut map = vec![AffExpr::int(0); src.len()];
    for (gs, gt) in groups {
        let src_axes = &s[gs];
        let dst_axes = &t[gt];
        let mut lin = AffExpr::int(0);
        let mut stride = Dim::int(1);
        for &k in dst_axes.iter().rev() {
            lin = &lin + &AffExpr::var(k as u32).scale(&stride);
            stride = &stride * &dst[k];
        }
        let mut stride = Dim::int(1);
        for (n, &k) in src_axes.iter().enumerate().rev() {
            let q = simplify::floordiv(&lin, &stride, dst)?;
            map[k] = if n == 0 { q } else { simplify::modulo(&q, &src[k], dst)? };
            stride = &stride * &src[k];
        }
    }
    Some(map)
}

/// Pairs of index ranges of equal products covering both shapes (unit axes
/// already removed). Products that cannot be compared end the greedy scans.
fn match_groups(a: &[Dim], b: &[Dim]) -> Vec<(Range<usize>, Range<usize>)> {
    let mut front = Vec::new();
    let (mut i, mut j) = (0, 0);
    while let Some((ni, nj)) = next_group(a, b, i, j) {
        front.push((i..ni, j..nj));
        (i, j) = (ni, nj);
    }
    let mut back = Vec::new();
    let (mut ie, mut je) = (a.len(), b.len());
    while ie > i && je > j {
        let ra: Vec<Dim> = a[i..ie].iter().rev().cloned().collect();
        let rb: Vec<Dim> = b[j..je].iter().rev().cloned().collect();
        let Some((ni, nj)) = next_group(&ra, &rb, 0, 0) else { break };
        back.push((ie - ni..ie, je - nj..je));
        (ie, je) = (ie - ni, je - nj);
    }
    if i < ie || j < je {
        front.push((i..ie, j..je));
    }
    front.extend(back.into_iter().rev());
    front
}

/// From positions `i`, `j`, the shortest non-empty prefixes of equal product;
/// `None` at the end of either shape or when products cannot be compared.
fn next_group(a: &[Dim], b: &[Dim], mut i: usize, mut j: usize) -> Option<(usize, usize)> {
    let (mut pa, mut pb) = (a.get(i)?.clone(), b.get(j)?.clone());
    i += 1;
    j += 1;
    loop {
        if pa == pb {
            return Some((i, j));
        }
        let divides = |x: &Dim, y: &Dim| y.floordiv(x).is_some_and(|r| &(&r * x) == y);
        let grow_a = match (pa.as_int(), pb.as_int()) {
            (Some(x), Some(y)) => x < y,
            _ if divides(&pa, &pb) => true,
            _ if divides(&pb, &pa) => false,
            _ => return None,
        };
        if grow_a {
            pa = &pa * a.get(i)?;
            i += 1;
        } else {
            pb = &pb * b.get(j)?;
            j += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(s: &[&str]) -> Vec<Dim> {
        s.iter().map(|x| Dim::parse(x).unwrap()).collect()
    }

    fn show(m: &[AffExpr]) -> String {
        let v: Vec<String> = m.iter().map(|e| e.to_string()).collect();
        format!("[{}]", v.join(", "))
    }

    #[test]
    fn common_reshapes_have_simple_maps() {
        let m = |a: &[&str], b: &[&str]| show(&reshape_map(&shape(a), &shape(b)).unwrap());
        assert_eq!(m(&["M", "K"], &["M", "1", "K"]), "[i0, i2]");
        assert_eq!(m(&["M", "1", "K"], &["M", "K"]), "[i0, 0, i1]");
        assert_eq!(m(&["M", "N", "K"], &["M*N", "K"]), "[floor((i0) / N), i0 + (-N)*floor((i0) / N), i1]");
        assert_eq!(m(&["M*N", "K"], &["M", "N", "K"]), "[N*i0 + i1, i2]");
        assert_eq!(m(&["Cout", "Cin", "Kh", "Kw"], &["G", "R", "Cin", "Kh", "Kw"]), "[R*i0 + i1, i2, i3, i4]");
        assert_eq!(m(&["1"], &["1", "1"]), "[0]");
    }

    #[test]
    fn groups_pair_equal_products() {
        let g = match_groups(&shape(&["2", "3", "4"]), &shape(&["6", "4"]));
        assert_eq!(g, vec![(0..2, 0..1), (2..3, 1..2)]);
        let g = match_groups(&shape(&["N", "Cout", "H"]), &shape(&["N", "G", "R", "H"]));
        assert_eq!(g, vec![(0..1, 0..1), (1..2, 1..3), (2..3, 3..4)]);
    }
}

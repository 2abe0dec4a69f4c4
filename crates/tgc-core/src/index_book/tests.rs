use expect_test::expect;

use super::*;
use crate::affine::AffExpr;
use crate::diag::ErrorName;
use crate::sym::Dim;
use crate::test_graphs::{gemm, shape};
use crate::tiny::{Graph, NodeId, Output};
use crate::DType;

/// A tiny deterministic generator (xorshift) for the enumeration tests.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn ints(v: &[i64]) -> Vec<Dim> {
    v.iter().map(|&x| Dim::int(x)).collect()
}

/// Every index of a shape, row-major.
fn points(shape: &[i64]) -> Vec<Vec<i64>> {
    let mut out = vec![vec![]];
    for &d in shape {
        out = out.into_iter().flat_map(|p| (0..d).map(move |x| [p.clone(), vec![x]].concat())).collect();
    }
    out
}

fn ravel(idx: &[i64], shape: &[i64]) -> i64 {
    idx.iter().zip(shape).fold(0, |acc, (i, d)| acc * d + i)
}

fn unravel(mut l: i64, shape: &[i64]) -> Vec<i64> {
    let mut out = vec![0; shape.len()];
    for k in (0..shape.len()).rev() {
        out[k] = l % shape[k];
        l /= shape[k];
    }
    out
}

fn eval_all(map: &[AffExpr], p: &[i64], bind: &dyn Fn(&str) -> Option<i64>) -> Vec<i64> {
    map.iter().map(|e| e.eval(p, bind).unwrap()).collect()
}

fn holds(guard: &[Piece], p: &[i64], bind: &dyn Fn(&str) -> Option<i64>) -> bool {
    guard.iter().all(|pc| pc.valid.iter().all(|c| c.expr.eval(p, bind).unwrap() >= 0))
}

fn book_of(g: &Graph) -> IndexBook {
    let b = build(g).unwrap();
    let errs = verify::verify(g, &b);
    assert!(errs.is_empty(), "{errs:?}");
    b
}

#[test]
fn gemm_book_has_broadcast_maps_and_the_reduce_axis() {
    let g = gemm();
    let b = book_of(&g);
    expect![[r#"
        indexbook gemm
          n0: [i0:M iter, i1:K iter]
          n1: [i0:K iter, i1:N iter]
          n2: [i0:M iter, i1:1 broadcast, i2:K iter]  n0[i0, i2]
          n3: [i0:N iter, i1:K iter]  n1[i1, i0]
          n4: [i0:1 broadcast, i1:N iter, i2:K iter]  n3[i1, i2]
          n5: [i0:M iter, i1:N broadcast, i2:K iter]  n2[i0, 0, i2]
          n6: [i0:M broadcast, i1:N iter, i2:K iter]  n4[0, i1, i2]
          n7: [i0:M iter, i1:N iter, i2:K iter]  n5[i0, i1, i2]  n6[i0, i1, i2]
          n8: [i0:M iter, i1:N iter] reduce [i2:K]  n7[i0, i1, i2]
          n9: [i0:M iter, i1:N iter]  n8[i0, i1]
    "#]]
    .assert_eq(&dump(&g, &b));
    let r = b.get(crate::tiny::NodeId(8)).unwrap();
    assert_eq!(r.reduce_axes, vec![AxisVar::new(2, Dim::sym("K"), AxisKind::Reduce)]);
    assert_eq!(r.domain.constraints.len(), 6);
}

#[test]
fn chased_gemm_operands_are_plain_affine_reads() {
    let g = gemm();
    let b = book_of(&g);
    let ext = shape(&["M", "N", "K"]);
    let idx: Vec<AffExpr> = (0..3).map(AffExpr::var).collect();
    let a = chase(&g, &b, crate::tiny::NodeId(5), idx.clone(), &ext, &|_| false).unwrap();
    assert_eq!(
        (a.src.0, a.index.iter().map(|e| e.to_string()).collect::<Vec<_>>()),
        (0, vec!["i0".into(), "i2".into()])
    );
    let w = chase(&g, &b, crate::tiny::NodeId(6), idx, &ext, &|_| false).unwrap();
    assert_eq!(
        (w.src.0, w.index.iter().map(|e| e.to_string()).collect::<Vec<_>>()),
        (1, vec!["i2".into(), "i1".into()])
    );
    assert!(a.guard.is_empty() && w.guard.is_empty());
}

/// Random reshapes between shapes of equal product (integer and symbolic)
/// agree with row-major re-indexing at every point.
#[test]
fn reshape_maps_match_row_major_reindexing() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..300 {
        let factors: Vec<i64> = (0..rng.below(5) + 1).map(|_| [1, 2, 3, 4, 5][rng.below(5) as usize]).collect();
        let split = |rng: &mut Rng| -> Vec<i64> {
            let mut out = Vec::new();
            let mut cur = 1;
            for &f in &factors {
                cur *= f;
                if rng.below(2) == 0 {
                    out.push(cur);
                    cur = 1;
                }
            }
            out.push(cur);
            if rng.below(3) == 0 {
                out.insert(rng.below(out.len() as u64 + 1) as usize, 1);
            }
            out
        };
        let (src, dst) = (split(&mut rng), split(&mut rng));
        let mut g = Graph::new("r");
        let x = g.input("x", DType::F32, &ints(&src)).unwrap();
        let y = g.reshape(x, &ints(&dst)).unwrap();
        let b = book_of(&g);
        let map = &b.get(y).unwrap().inputs[0].map;
        for p in points(&dst) {
            let want = unravel(ravel(&p, &dst), &src);
            assert_eq!(eval_all(map, &p, &|_| None), want, "{src:?} -> {dst:?} at {p:?}: {map:?}");
        }
    }
}

#[test]
fn symbolic_reshape_maps_evaluate_like_row_major() {
    let cases: [(&[&str], &[&str]); 5] = [
        (&["A", "B", "C"], &["A*B", "C"]),
        (&["A*B", "C"], &["A", "B*C"]),
        (&["A", "B"], &["B", "A"]),
        (&["Cout", "Cin"], &["G", "R", "Cin"]),
        (&["N", "G", "R", "H"], &["N", "G*R", "H"]),
    ];
    let vals = [("A", 2), ("B", 3), ("C", 4), ("G", 2), ("R", 3), ("Cout", 6), ("Cin", 2), ("N", 2), ("H", 3)];
    let bind = |s: &str| vals.iter().find(|(k, _)| *k == s).map(|(_, v)| *v);
    for (src, dst) in cases {
        let mut g = Graph::new("r");
        let x = g.input("x", DType::F32, &shape(src)).unwrap();
        let y = g.reshape(x, &shape(dst)).unwrap();
        let b = book_of(&g);
        let map = &b.get(y).unwrap().inputs[0].map;
        let ev = |s: &[&str]| s.iter().map(|d| Dim::parse(d).unwrap().eval(&bind).unwrap()).collect::<Vec<_>>();
        let (si, di) = (ev(src), ev(dst));
        for p in points(&di) {
            assert_eq!(eval_all(map, &p, &bind), unravel(ravel(&p, &di), &si), "{src:?} -> {dst:?}");
        }
    }
}

#[test]
fn pad_shrink_flip_view_maps_enumerate_correctly() {
    let mut g = Graph::new("m");
    let x = g.input("x", DType::F32, &ints(&[4, 5])).unwrap();
    let p = g.pad(x, &[(Dim::int(1), Dim::int(2)), (Dim::int(0), Dim::int(3))], -1.0).unwrap();
    let s = g.shrink(x, &ints(&[1, 0]), &ints(&[4, 5]), &ints(&[2, 3])).unwrap();
    let f = g.flip(x, &[1]).unwrap();
    let vmap = vec![AffExpr::parse("i0 + i2").unwrap(), AffExpr::parse("2*i1").unwrap()];
    let v = g.view(x, &ints(&[3, 3, 2]), &vmap).unwrap();
    let b = book_of(&g);
    let none = |_: &str| None;
    let pa = &b.get(p).unwrap().inputs[0];
    assert_eq!(pa.guard.len(), 1);
    assert_eq!(pa.guard[0].otherwise, -1.0);
    for q in points(&[7, 8]) {
        let inside = (1..5).contains(&q[0]) && q[1] < 5;
        assert_eq!(holds(&pa.guard, &q, &none), inside, "{q:?}");
        if inside {
            assert_eq!(eval_all(&pa.map, &q, &none), vec![q[0] - 1, q[1]]);
        }
    }
    assert_eq!(g.shape(s), &ints(&[2, 2])[..]);
    for q in points(&[2, 2]) {
        assert_eq!(eval_all(&b.get(s).unwrap().inputs[0].map, &q, &none), vec![1 + 2 * q[0], 3 * q[1]]);
    }
    for q in points(&[4, 5]) {
        assert_eq!(eval_all(&b.get(f).unwrap().inputs[0].map, &q, &none), vec![q[0], 4 - q[1]]);
    }
    for q in points(&[3, 3, 2]) {
        assert_eq!(eval_all(&b.get(v).unwrap().inputs[0].map, &q, &none), vec![q[0] + q[2], 2 * q[1]]);
    }
}

/// `permute(flip(shrink(pad(x))))` chased to `x`: at every point the chased
/// guard and index agree with applying each op's definition in turn.
#[test]
fn chased_movement_chain_matches_step_by_step_semantics() {
    let mut g = Graph::new("chain");
    let x = g.input("x", DType::F32, &shape(&["H", "W"])).unwrap();
    let p = g.pad(x, &[(Dim::int(2), Dim::int(1)), (Dim::int(1), Dim::int(1))], 0.5).unwrap();
    let s = g.shrink(p, &ints(&[1, 0]), &shape(&["H + 3", "W + 2"]), &ints(&[2, 1])).unwrap();
    let f = g.flip(s, &[0]).unwrap();
    let t = g.permute(f, &[1, 0]).unwrap();
    g.outputs.push(Output { name: "y".into(), node: t });
    let b = book_of(&g);
    let (hv, wv) = (5i64, 3i64);
    let bind = |s: &str| match s {
        "H" => Some(hv),
        "W" => Some(wv),
        _ => None,
    };
    let out: Vec<i64> = g.shape(t).iter().map(|d| d.eval(&bind).unwrap()).collect();
    let sh0 = g.shape(s)[0].eval(&bind).unwrap();
    let ext = g.shape(t).to_vec();
    let idx: Vec<AffExpr> = (0..2).map(AffExpr::var).collect();
    let c = chase(&g, &b, t, idx, &ext, &|_| false).unwrap();
    assert_eq!(c.src, x);
    for q in points(&out) {
        // permute, flip, shrink, pad by hand
        let (a0, a1) = (q[1], q[0]);
        let a0 = sh0 - 1 - a0;
        let (p0, p1) = (1 + 2 * a0, a1);
        let inside = (2..2 + hv).contains(&p0) && (1..1 + wv).contains(&p1);
        assert_eq!(holds(&c.guard, &q, &bind), inside, "{q:?}");
        if inside {
            assert_eq!(eval_all(&c.index, &q, &bind), vec![p0 - 2, p1 - 1]);
        }
    }
}

#[test]
fn too_many_pieces_is_excessive_piecewise() {
    let mut g = Graph::new("pads");
    let mut x = g.input("x", DType::F32, &ints(&[2])).unwrap();
    for _ in 0..=MAX_PIECES {
        x = g.pad(x, &[(Dim::int(1), Dim::int(0))], 0.0).unwrap();
    }
    let b = book_of(&g);
    let ext = g.shape(x).to_vec();
    let e = chase(&g, &b, x, vec![AffExpr::var(0)], &ext, &|_| false).unwrap_err();
    assert_eq!(e.name, ErrorName::ExcessivePiecewise);
}

/// A reshape-permute-reshape link on 6 elements does not fold and doubles
/// the composed index; the chase stops at the limit instead of growing
/// without bound, at the value being read. The same link on 4 elements
/// is an involution and folds: forty links are still one read of `x`.
#[test]
fn composed_indices_stay_below_the_atom_limit() {
    let chain = |n: usize, a: i64, b: i64| {
        let mut g = Graph::new("links");
        let mut t = g.input("x", DType::F32, &ints(&[a * b])).unwrap();
        for _ in 0..n {
            let r = g.reshape(t, &ints(&[a, b])).unwrap();
            let p = g.permute(r, &[1, 0]).unwrap();
            t = g.reshape(p, &ints(&[a * b])).unwrap();
        }
        (g, t)
    };
    let (g, t) = chain(40, 2, 3);
    let b = book_of(&g);
    let e = chase(&g, &b, t, vec![AffExpr::var(0)], &ints(&[6]), &|_| false).unwrap_err();
    assert_eq!(e.name, ErrorName::ResourceExceeded);
    assert_eq!(e.node.as_deref(), Some(g.node(t).label.as_str()));
    assert!(e.message.contains(&format!("the limit is {MAX_INDEX_ATOMS}")), "{}", e.message);

    let (g, t) = chain(40, 2, 2);
    let b = book_of(&g);
    let c = chase(&g, &b, t, vec![AffExpr::var(0)], &ints(&[4]), &|_| false).unwrap();
    assert_eq!((c.src, c.index), (NodeId(0), vec![AffExpr::var(0)]));
}

#[test]
fn merged_axes_carry_div_guards() {
    let mut g = Graph::new("merge");
    let x = g.input("x", DType::F32, &shape(&["A", "B"])).unwrap();
    let y = g.reshape(x, &shape(&["A*B"])).unwrap();
    let b = book_of(&g);
    let line = dump(&g, &b).lines().find(|l| l.starts_with("  n1")).unwrap().to_string();
    expect!["  n1: [i0:A*B iter]  n0[floor((i0) / B), i0 + (-B)*floor((i0) / B)] where {i0 + (-B)*floor((i0) / B) >= 0, -i0 + B*floor((i0) / B) + (B - 1) >= 0}"]
        .assert_eq(&line);
    assert_eq!(b.get(y).unwrap().domain.constraints.len(), 4);
}

#[test]
fn verifier_rejects_a_corrupted_book() {
    let g = gemm();
    let good = book_of(&g);
    let n = crate::tiny::NodeId;
    let corrupt = |f: &dyn Fn(&mut IndexBook)| {
        let mut b = good.clone();
        f(&mut b);
        verify::verify(&g, &b)
    };
    let e = corrupt(&|b| b.get_mut(n(7)).unwrap().axes[1].name = "j".into());
    assert!(e.iter().any(|d| d.node.as_deref() == Some("n7") && d.message.contains("not i1")), "{e:?}");
    let e = corrupt(&|b| b.get_mut(n(5)).unwrap().inputs[0].map[1] = AffExpr::var(1));
    assert!(e.iter().any(|d| d.node.as_deref() == Some("n5") && d.message.contains("constant 0")), "{e:?}");
    let e = corrupt(&|b| b.get_mut(n(8)).unwrap().reduce_axes.clear());
    assert!(e.iter().any(|d| d.node.as_deref() == Some("n8")), "{e:?}");
    let e = corrupt(&|b| b.get_mut(n(7)).unwrap().inputs.pop().map(|_| ()).unwrap());
    assert!(e.iter().any(|d| d.message.contains("distinct sources")), "{e:?}");
    let e = corrupt(&|b| b.get_mut(n(2)).unwrap().inputs[0].map[0] = AffExpr::var(5));
    assert!(e.iter().any(|d| d.message.contains("beyond")), "{e:?}");
    let e = corrupt(&|b| b.get_mut(n(2)).unwrap().axes[1].kind = AxisKind::Iter);
    assert!(e.iter().any(|d| d.message.contains("kinds")), "{e:?}");
}

/// A run of reshapes is one reshape from the run's first source: the chase
/// reads `x` through the direct map, whatever shapes lie between. Found by
/// the `graphs` fuzz target, where [4,24]→[6,8,2]→[2,8,2,3]→[6,4,4] composed
/// step by step into an index past [`MAX_INDEX_ATOMS`].
#[test]
fn reshape_runs_chase_as_one_reshape() {
    let shapes: [&[i64]; 8] = [&[4, 24], &[6, 8, 2], &[2, 8, 2, 3], &[6, 4, 4], &[3, 32], &[2, 3, 16], &[16, 6], &[96]];
    let mut g = Graph::new("reshapes");
    let x = g.input("x", DType::F32, &ints(shapes[0])).unwrap();
    let mut t = x;
    for _ in 0..4 {
        for s in &shapes[1..] {
            t = g.reshape(t, &ints(s)).unwrap();
        }
        t = g.reshape(t, &ints(shapes[0])).unwrap();
    }
    let t = g.reshape(t, &ints(&[6, 4, 4])).unwrap();
    let b = book_of(&g);
    let ext = g.shape(t).to_vec();
    let c = chase(&g, &b, t, (0..3).map(AffExpr::var).collect(), &ext, &|_| false).unwrap();
    assert_eq!(c.src, x);
    assert!(c.guard.is_empty());
    for q in points(&[6, 4, 4]) {
        let l = q[0] * 16 + q[1] * 4 + q[2];
        assert_eq!(eval_all(&c.index, &q, &|_| None), vec![l / 24, l % 24], "{q:?}");
    }
}

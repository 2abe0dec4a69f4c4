//! The example graphs of `examples/graphs/` and the DSL text of `DSL.md`,
//! through the parser: they lower, verify, and compute what naive loops do.

use super::eval::{eval, random};
use crate::frontend::parser::parse;
use crate::frontend::to_tiny::{lower, lower_with_dump};
use crate::tiny::verify::verify;

fn example(name: &str) -> String {
    let path = format!("{}/../../examples/graphs/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn example_graphs_lower_and_verify() {
    for name in ["gemm_bias_relu.tgc", "conv_relu_pool.tgc", "attention.tgc"] {
        let p = parse(&example(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let (g, dump) = lower_with_dump(&p, None).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(verify(&g).is_empty(), "{name}: {:?}", verify(&g));
        assert!(dump.starts_with("graph "), "{dump}");
        assert!(
            g.nodes().iter().all(|n| n.span.is_some_and(|s| s.line >= 1)),
            "{name}: a node without a source position"
        );
    }
}

#[test]
fn conv_relu_pool_example_computes_the_naive_result() {
    let g = lower(&parse(&example("conv_relu_pool.tgc")).unwrap(), None).unwrap();
    let (x, w, b) =
        (random(&[1, 3, 32, 32], 21, -1.0, 1.0), random(&[8, 3, 3, 3], 22, -1.0, 1.0), random(&[8], 23, -1.0, 1.0));
    let y = eval(&g, &[("N", 1)], &[("x", x.clone()), ("w", w.clone()), ("b", b.clone())], true).remove(0);
    assert_eq!(y.shape, [1, 8, 16, 16]);
    let conv = |o: usize, i: i64, j: i64| -> f64 {
        let mut acc = b.data[o];
        for c in 0..3 {
            for ky in 0..3 {
                for kx in 0..3 {
                    let (yy, xx) = (i + ky as i64 - 1, j + kx as i64 - 1);
                    if (0..32).contains(&yy) && (0..32).contains(&xx) {
                        acc += x.at(&[0, c, yy as usize, xx as usize]) * w.at(&[o, c, ky, kx]);
                    }
                }
            }
        }
        acc.max(0.0)
    };
    for o in 0..8 {
        for i in 0..16 {
            for j in 0..16 {
                let want = (0..4)
                    .map(|k| conv(o, (2 * i + k / 2) as i64, (2 * j + k % 2) as i64))
                    .fold(f64::NEG_INFINITY, f64::max);
                let got = y.at(&[0, o, i, j]);
                assert!((got - want).abs() <= 1e-5 * (1.0 + want.abs()), "y[{o},{i},{j}] = {got}, want {want}");
            }
        }
    }
}

#[test]
fn dsl_text_with_subgraphs_destructuring_and_semicolons_lowers() {
    let src = "// two results\n\
graph<R> halves(x: f32[R, 4]) -> (lo: f32[R, 2], hi: f32[R, 2]) {\n\
    lo = shrink(x, [[0, R], [0, 2]]); hi = shrink(x, [[0, R], [2, 4]])\n\
    return lo, hi\n\
}\n\
graph<B=3> main(x: f32[B, 4]) -> (y: f32[B, 2], s: f32[B]) {\n\
    (a, b) = halves(x)\n\
    y = gelu(a) * sigmoid(b) + 1e-5\n\
    s = mean(y, axes=[-1])\n\
    return y, s\n\
}\n";
    let g = lower(&parse(src).unwrap(), None).unwrap();
    assert!(verify(&g).is_empty());
    let names: Vec<&str> = g.outputs.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["y", "s"]);
    assert_eq!(g.symbols[0].name, "B");
}

//! The template seam ([`super::template`]): every registered template takes
//! a graph of its pattern, and a region of a larger graph that is a
//! contraction + epilogue runs on the MMA template (`lower_region`), the
//! program emulated against the interpreter.

use super::simt::{lower_program_noting, tests::check_program, Form};
use super::template::{lower, pattern_of, GraphPattern, Template, TEMPLATES};
use crate::pipeline::{self, Format};
use crate::plan::cost::Analytic;
use crate::plan::target::SM80;
use crate::tiny::Graph;

fn load(src: &str) -> Graph {
    pipeline::load(src, Format::Dsl, None).unwrap_or_else(|e| panic!("{e}\n{src}")).graph
}

/// The seam: every `TEMPLATES` entry takes a graph of its pattern (a
/// GEMM + bias + ReLU, an attention), each `(pattern, algo_choice, arch)`
/// is listed once, and a graph of no template's pattern gets no refusal.
#[test]
fn every_template_takes_a_graph_of_its_pattern() {
    let gemm = load(
        "graph g(x: f16[40, 32], w: f16[32, 24], b: f16[24]) -> (y: f16[40, 24]) {\n    y = relu(matmul(x, w) + b)\n    \
         return y\n}\n",
    );
    let att = load(
        "graph a(q: f16[1, 2, 17, 16], k: f16[1, 2, 17, 16], v: f16[1, 2, 17, 16]) -> (o: f16[1, 2, 17, 16]) {\n    o = \
         attention(q, k, v)\n    return o\n}\n",
    );
    for (g, pattern, form) in
        [(&gemm, GraphPattern::Contraction, Form::Gemm), (&att, GraphPattern::Attention, Form::Attention)]
    {
        assert_eq!(pattern_of(g), Some(pattern));
        let p = lower(g, &SM80, &Analytic).expect("a template of the pattern").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.launches.iter().map(|l| l.form).collect::<Vec<_>>(), [form]);
    }
    for (i, t) in TEMPLATES.iter().enumerate() {
        let same = |u: &&Template| (u.pattern, u.algo_choice, u.arch) == (t.pattern, t.algo_choice, t.arch);
        assert_eq!(TEMPLATES.iter().filter(same).count(), 1, "{} listed twice", t.name);
        assert!(TEMPLATES[..i].iter().all(|u| u.name != t.name));
    }
    let rows = load("graph r(x: f16[8, 64]) -> (y: f16[8, 64]) {\n    y = softmax(x, -1)\n    return y\n}\n");
    assert_eq!(pattern_of(&rows), None);
    assert!(lower(&rows, &SM80, &Analytic).is_none());
}

/// The launches of `src` lowered for sm80, checked in the emulator
/// against the interpreter within `tol`, and its refusals.
fn regions(src: &str, tol: f64) -> (Vec<Form>, Vec<String>) {
    let g = load(src);
    let (prog, notes) = lower_program_noting(&g, &SM80, &Analytic).unwrap_or_else(|e| panic!("{e}"));
    let forms = prog.launches.iter().map(|l| l.form).collect();
    check_program(&g, prog, &[], tol);
    (forms, notes.into_iter().map(|d| d.message).collect())
}

/// Contractions inside larger graphs: a two-layer MLP is two GEMM
/// kernels with their epilogues (the hidden layer stored between them:
/// for the GPU, region formation stores a value a contraction reads
/// through a broadcast), a GEMM followed by a softmax is the GEMM kernel then the
/// row kernel. The MLP within 4e-3: its hidden layer is an f16 rounding
/// of an f32 sum taken in another order than the interpreter's, which may
/// land one step (2^-11 relative) away, and the second layer sums 64 of
/// them before its own rounding (seen: 1.8e-3).
#[test]
fn contraction_regions_of_larger_graphs_run_on_the_mma_template() {
    let mlp = "graph mlp(x: f16[40, 32], w1: f16[32, 64], b1: f16[64], w2: f16[64, 24], b2: f16[24]) -> (y: f16[40, \
               24]) {\n    h = relu(matmul(x, w1) + b1)\n    y = matmul(h, w2) + b2\n    return y\n}\n";
    let (forms, notes) = regions(mlp, 4e-3);
    assert_eq!(forms, [Form::Gemm, Form::Gemm], "{notes:?}");
    assert!(notes.is_empty(), "{notes:?}");
    let scores = "graph s(x: f16[2, 33, 32], w: f16[2, 32, 48]) -> (y: f16[2, 33, 48]) {\n    y = softmax(matmul(x, \
                  w), -1)\n    return y\n}\n";
    let (forms, notes) = regions(scores, 1e-3);
    assert_eq!(forms.first(), Some(&Form::Gemm), "{forms:?} {notes:?}");
    assert!(forms[1..].iter().all(|f| !f.tensor_cores()), "{forms:?}");
}

/// A region the template does not take says why, at the user's line: an
/// f32 matmul followed by a softmax (no `mma.sync` for f32 operands).
#[test]
fn a_refused_region_says_why_at_its_node() {
    let src =
        "graph r(x: f32[40, 32], w: f32[32, 24]) -> (y: f32[40, 24]) {\n    s = matmul(x, w)\n    y = softmax(s, \
               -1)\n    return y\n}\n";
    let g = load(src);
    let (prog, notes) = lower_program_noting(&g, &SM80, &Analytic).unwrap();
    assert!(prog.launches.iter().all(|l| !l.form.tensor_cores()));
    assert!(
        notes.iter().any(|d| d.message.contains("no tensor-core MMA for f32") && d.span.is_some_and(|s| s.line == 2)),
        "{notes:?}"
    );
}

/// An attention inside a larger graph (a one-head block: the q, k, v
/// projections, attention, the output projection) is one fused launch
/// between the GEMM regions, the score and softmax kernels it replaces
/// gone.
#[test]
fn an_attention_inside_a_larger_graph_is_fused() {
    let src = "graph blk(x: f16[2, 40, 32], wq: f16[32, 32], wk: f16[32, 32], wv: f16[32, 32], wo: f16[32, 16]) -> (y: \
               f16[2, 40, 16]) {\n    q = reshape(matmul(x, wq), [2, 1, 40, 32])\n    k = reshape(matmul(x, wk), [2, 1, \
               40, 32])\n    v = reshape(matmul(x, wv), [2, 1, 40, 32])\n    a = reshape(attention(q, k, v, causal=true), \
               [2, 40, 32])\n    y = matmul(a, wo)\n    return y\n}\n";
    let (forms, notes) = regions(src, 4e-3);
    assert_eq!(forms, [Form::Gemm, Form::Gemm, Form::Gemm, Form::Attention, Form::Gemm], "{notes:?}");
}

/// Conv → ReLU → MaxPool in f16: the convolution is stored for the GPU
/// (Poly Core's compute-at fusion is the CPU's), so it runs as an implicit
/// GEMM on the template and the pool as a SIMT kernel after it.
#[test]
fn a_convolution_before_a_pool_runs_on_the_template() {
    let src = "graph crp(x: f16[2, 8, 10, 10], w: f16[16, 8, 3, 3], b: f16[16]) -> (y: f16[2, 16, 5, 5]) {\n    c = \
               relu(conv2d(x, w, bias=b, pad=[1, 1]))\n    y = maxpool2d(c, kernel=[2, 2], stride=[2, 2])\n    return \
               y\n}\n";
    let (forms, notes) = regions(src, 1e-3);
    assert_eq!(forms.first(), Some(&Form::Gemm), "{forms:?} {notes:?}");
    assert!(forms[1..].iter().all(|f| !f.tensor_cores()), "{forms:?}");
}

/// An attention whose softmax is also an output of the graph is not fused
/// (the fused kernel keeps the weights in registers): its regions stay.
#[test]
fn an_attention_whose_weights_escape_is_not_fused() {
    let src =
        "graph esc(q: f16[1, 1, 24, 16], k: f16[1, 1, 24, 16], v: f16[1, 1, 24, 16]) -> (o: f16[1, 1, 24, 16], p: \
               f32[1, 1, 24, 24]) {\n    kt = permute(k, [0, 1, 3, 2])\n    s = matmul(q, kt)\n    p = softmax(cast(s, \
               f32), -1)\n    o = matmul(cast(p, f16), v)\n    return o, p\n}\n";
    let (forms, _) = regions(src, 4e-3);
    assert!(!forms.contains(&Form::Attention), "{forms:?}");
}

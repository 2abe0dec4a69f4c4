//! Every error name the frontend emits, from source text, with the position
//! it is reported at.

use crate::diag::ErrorName::{self, *};
use crate::frontend::parser::parse;
use crate::frontend::to_tiny::lower;

/// Lowers `src` and checks that it fails with `name` at the first occurrence
/// of `at` in the source (1-based line and column); returns the message.
fn expect_err(src: &str, name: ErrorName, at: &str) -> String {
    let program = parse(src).unwrap_or_else(|e| panic!("parse: {e}"));
    let e = match lower(&program, None) {
        Ok(_) => panic!("expected {name} at `{at}`, but the program lowered"),
        Err(e) => e,
    };
    let off = src.find(at).unwrap_or_else(|| panic!("`{at}` is not in the source"));
    let line = src[..off].matches('\n').count() as u32 + 1;
    let col = src[..off].rsplit('\n').next().map_or(0, |l| l.chars().count()) as u32 + 1;
    let sp = e.span.unwrap_or_else(|| panic!("{e} has no span"));
    assert_eq!((e.name, sp.line, sp.col), (name, line, col), "{e}");
    e.message
}

#[test]
fn broadcast_mismatch_is_at_the_operator() {
    let src = "graph main(x: f32[4, 3], y: f32[4, 5]) -> (z: f32[4, 3]) {\n    z = x + y\n    return z\n}\n";
    expect_err(src, BroadcastMismatch, "+ y");
    let src = "graph<M, N> main(x: f32[M], y: f32[N]) -> (z: f32[M]) {\n    z = maximum(x, y)\n    return z\n}\n";
    expect_err(src, BroadcastMismatch, "maximum");
    let src = "graph main(x: f32[2, 3, 4]) -> (z: f32[2, 3, 4]) {\n    z = expand(x, [2, 5, 4])\n    return z\n}\n";
    expect_err(src, BroadcastMismatch, "expand");
}

#[test]
fn axis_size_mismatch_is_at_the_call_or_the_return() {
    let src = "graph main(x: f32[4, 3]) -> (z: f32[5, 2]) {\n    z = reshape(x, [5, 2])\n    return z\n}\n";
    expect_err(src, AxisSizeMismatch, "reshape");
    let src = "graph main(a: f32[2, 3], b: f32[4, 5]) -> (z: f32[2, 5]) {\n    z = matmul(a, b)\n    return z\n}\n";
    let m = expect_err(src, AxisSizeMismatch, "matmul");
    assert!(m.contains("inner"), "{m}");
    let src = "graph main(x: f32[1, 4, 8, 8], w: f32[2, 3, 3, 3]) -> (z: f32[1, 2, 6, 6]) {\n    z = conv2d(x, w)\n    return z\n}\n";
    expect_err(src, AxisSizeMismatch, "conv2d");
    let src = "graph main(x: f32[1, 6, 8, 8], w: f32[4, 2, 3, 3]) -> (z: f32[1, 4, 6, 6]) {\n    z = conv2d(x, w, groups=4)\n    return z\n}\n";
    expect_err(src, AxisSizeMismatch, "conv2d");
    let src = "graph main(x: f32[4, 3]) -> (z: f32[4, 4]) {\n    z = relu(x)\n    return z\n}\n";
    expect_err(src, AxisSizeMismatch, "z\n}");
    let src = "graph main(x: f32[4, 3]) -> (z: f32[4, 3]) {\n    z = squeeze(x, 0)\n    return z\n}\n";
    expect_err(src, AxisSizeMismatch, "squeeze");
    let src = "graph main(x: f32[0]) -> (z: f32[1]) {\n    return x\n}\n";
    expect_err(src, AxisSizeMismatch, "0]");
}

#[test]
fn invalid_permutation_is_at_the_call() {
    let src = "graph main(x: f32[4, 3]) -> (z: f32[3, 4]) {\n    z = permute(x, [1, 1])\n    return z\n}\n";
    expect_err(src, InvalidPermutation, "permute");
    let src = "graph main(x: f32[4, 3]) -> (z: f32[3, 4]) {\n    z = permute(x, [1, 0, 2])\n    return z\n}\n";
    expect_err(src, InvalidPermutation, "permute");
}

#[test]
fn dtype_mismatch_is_at_the_operator_literal_or_return() {
    let src = "graph main(x: f32[4], y: f16[4]) -> (z: f32[4]) {\n    z = x * y\n    return z\n}\n";
    expect_err(src, DTypeMismatch, "* y");
    let src = "graph main(x: i32[4]) -> (z: i32[4]) {\n    z = x + 0.5\n    return z\n}\n";
    let m = expect_err(src, DTypeMismatch, "0.5");
    assert!(m.contains("float literal"), "{m}");
    let src = "graph main(x: f32[4]) -> (z: f16[4]) {\n    z = relu(x)\n    return z\n}\n";
    expect_err(src, DTypeMismatch, "z\n}");
    let src = "graph main(x: i32[4]) -> (z: i32[4]) {\n    z = exp(x)\n    return z\n}\n";
    expect_err(src, DTypeMismatch, "exp");
    let src = "graph main(x: f32[4]) -> (z: f32[4]) {\n    z = where(x, x, x)\n    return z\n}\n";
    expect_err(src, DTypeMismatch, "where");
    let src = "graph main(x: i32[4]) -> (z: i32[4]) {\n    z = x / 2\n    return z\n}\n";
    expect_err(src, DTypeMismatch, "/ 2");
    let src = "graph f(a: f16[4]) -> (b: f16[4]) {\n    b = neg(a)\n    return b\n}\ngraph main(x: f32[4]) -> (z: f16[4]) {\n    z = f(x)\n    return z\n}\n";
    expect_err(src, DTypeMismatch, "x)\n");
}

#[test]
fn unknown_op_is_at_the_callee_with_a_suggestion() {
    let src = "graph main(x: f32[4]) -> (z: f32[4]) {\n    z = frobnicate(x)\n    return z\n}\n";
    expect_err(src, UnknownOp, "frobnicate");
    let src = "graph main(x: f32[4]) -> (z: f32[4]) {\n    z = softmaxx(x)\n    return z\n}\n";
    let m = expect_err(src, UnknownOp, "softmaxx");
    assert!(m.contains("did you mean `softmax`"), "{m}");
}

#[test]
fn unknown_name_is_at_the_name() {
    let src = "graph main(x: f32[4]) -> (z: f32[4]) {\n    z = relu(q)\n    return z\n}\n";
    expect_err(src, UnknownName, "q)");
    let src = "graph main(xs: f32[4]) -> (z: f32[4]) {\n    z = relu(x)\n    return z\n}\n";
    let m = expect_err(src, UnknownName, "x)");
    assert!(m.contains("did you mean `xs`"), "{m}");
    let src = "graph<M> main(x: f32[M, K]) -> (z: f32[M]) {\n    z = sum(x, axes=[1])\n    return z\n}\n";
    expect_err(src, UnknownName, "K]");
    let src = "graph main(x: f32[4]) -> (z: f32[4]) {\n    z = relu(x)\n    return w\n}\n";
    expect_err(src, UnknownName, "w\n");
    let src = "graph main(x: f32[4]) -> (z: f32[4]) {\n    z = reshape(x, [M])\n    return z\n}\n";
    expect_err(src, UnknownName, "M]");
}

#[test]
fn arity_mismatch_is_at_the_call_or_return() {
    let src = "graph main(x: f32[4]) -> (z: f32[4]) {\n    z = relu(x, x)\n    return z\n}\n";
    expect_err(src, ArityMismatch, "relu");
    let src = "graph main(x: f32[4]) -> (z: f32[4]) {\n    z = where(x > 0, x)\n    return z\n}\n";
    expect_err(src, ArityMismatch, "where");
    let two = "graph two(a: f32[4]) -> (b: f32[4], c: f32[4]) {\n    b = relu(a)\n    c = neg(a)\n    return b, c\n}\n";
    let src = format!("{two}graph main(x: f32[4]) -> (z: f32[4]) {{\n    (p, q, r) = two(x)\n    return p\n}}\n");
    expect_err(&src, ArityMismatch, "two(x)");
    let src = format!("{two}graph main(x: f32[4]) -> (z: f32[4]) {{\n    z = relu(two(x))\n    return z\n}}\n");
    expect_err(&src, ArityMismatch, "two(x)");
    let src = "graph main(x: f32[4]) -> (z: f32[4]) {\n    (a, b) = relu(x)\n    return a\n}\n";
    expect_err(src, ArityMismatch, "relu");
    let src = "graph main(x: f32[4]) -> (z: f32[4], y: f32[4]) {\n    z = relu(x)\n    return z\n}\n";
    expect_err(src, ArityMismatch, "return");
}

#[test]
fn negative_stride_is_at_the_step() {
    let src = "graph main(x: f32[4]) -> (z: f32[2]) {\n    z = slice(x, [[0, 4, 0]])\n    return z\n}\n";
    expect_err(src, NegativeStride, "0]]");
    let src = "graph main(x: f32[4]) -> (z: f32[2]) {\n    z = slice(x, [[3, 0, -1]])\n    return z\n}\n";
    expect_err(src, NegativeStride, "-1]]");
    let src = "graph main(x: f32[1, 1, 8, 8]) -> (z: f32[1, 1, 4, 4]) {\n    z = maxpool2d(x, kernel=2, stride=0)\n    return z\n}\n";
    expect_err(src, NegativeStride, "maxpool2d");
}

#[test]
fn recursion_without_a_base_case_stops_at_the_limit() {
    let src = "graph f(a: f32[4]) -> (b: f32[4]) {\n    b = f(a)\n    return b\n}\ngraph main(x: f32[4]) -> (z: f32[4]) {\n    z = f(x)\n    return z\n}\n";
    expect_err(src, RecursionLimit, "f(a)");
    let src = "graph f(a: f32[4]) -> (b: f32[4]) {\n    b = g(a) + g(a)\n    return b\n}\ngraph g(a: f32[4]) -> (b: f32[4]) {\n    b = f(a)\n    return b\n}\ngraph main(x: f32[4]) -> (z: f32[4]) {\n    z = f(x)\n    return z\n}\n";
    expect_err(src, RecursionLimit, "f(a)\n");
}

#[test]
fn other_names_have_positions_too() {
    let src = "graph main(x: f32[4, 3]) -> (z: f32[4, 3]) {\n    z = softmax(x, axis=2)\n    return z\n}\n";
    expect_err(src, InvalidAxis, "softmax");
    let src = "graph main(x: f32[4, 3]) -> (z: f32[4, 3]) {\n    z = softmax(x, axes=1)\n    return z\n}\n";
    let m = expect_err(src, SyntaxError, "axes");
    assert!(m.contains("did you mean `axis`"), "{m}");
    let src = "graph main(x: f32[4, 3]) -> (z: f32[4, 3]) {\n    z = cast(x, f64)\n    return z\n}\n";
    expect_err(src, SyntaxError, "f64");
    let src = "graph main(x: f32[4, 3]) -> (z: f32[4, 3]) {\n    z = transpose(x, [0], 1)\n    return z\n}\n";
    expect_err(src, SyntaxError, "[0]");
    let src = "graph<S> f(a: f32[4]) -> (b: f32[S]) {\n    b = reshape(a, [S])\n    return b\n}\ngraph main(x: f32[4]) -> (z: f32[4]) {\n    z = f(x)\n    return z\n}\n";
    expect_err(src, UnboundSymbol, "f(x)");
    let src = "graph<M> main(x: f32[M, M]) -> (z: f32[M]) {\n    z = sum(x, axes=[M])\n    return z\n}\n";
    expect_err(src, InvalidAxis, "sum");
}

#[test]
fn unsupported_constructs_are_reported() {
    let src = "graph<M> main(x: f32[M]) -> (z: f32[M]) {\n    z = x * M\n    return z\n}\n";
    expect_err(src, Unsupported, "M\n");
    let src = "graph main(x: f32[1, 1, 8, 8]) -> (z: f32[1, 1, 5, 5]) {\n    z = maxpool2d(x, kernel=2, pad=2)\n    return z\n}\n";
    expect_err(src, Unsupported, "maxpool2d");
}

/// A kernel size below 1 is named as such, not as a pad
/// "more than half the kernel size -1".
#[test]
fn a_pool_kernel_below_one_is_named() {
    for pool in ["maxpool2d", "avgpool2d"] {
        let src = format!(
            "graph main(x: f32[1, 1, 8, 8]) -> (z: f32[1, 1, 4, 4]) {{\n    z = {pool}(x, kernel=[-1, 2])\n    return z\n}}\n"
        );
        let m = expect_err(&src, AxisSizeMismatch, pool);
        assert_eq!(m, "kernel size -1 must be at least 1", "{pool}");
    }
}

#[test]
fn exponential_inlining_is_refused_before_it_starts() {
    let mut src = String::from("graph f9(a: f32[2]) -> (b: f32[2]) {\n    b = relu(a)\n    return b\n}\n");
    for k in (0..9).rev() {
        let c = format!("f{}(a)", k + 1);
        src.push_str(&format!(
            "graph f{k}(a: f32[2]) -> (b: f32[2]) {{\n    b = {c} + {c} + {c} + {c}\n    return b\n}}\n"
        ));
    }
    src.push_str("graph main(x: f32[2]) -> (z: f32[2]) {\n    z = f0(x)\n    return z\n}\n");
    expect_err(&src, Unsupported, "f0(x)");
}

/// The graph-layer ops of `004` §4 (`sign`, `clamp`, `pow`, `batch_norm`,
/// `instance_norm`): each bad argument is reported at the call.
#[test]
fn graph_layer_op_errors_are_at_the_call() {
    let unary = |body: &str, x: &str| {
        format!("graph main(x: {x}, i: i32[4, 3]) -> (z: f32[4, 3]) {{\n    z = {body}\n    return z\n}}\n")
    };
    let m = expect_err(&unary("clamp(x)", "f32[4, 3]"), ArityMismatch, "clamp");
    assert!(m.contains("min=") && m.contains("max="), "{m}");
    let m = expect_err(&unary("cast(clamp(i, min=0.5), f32)", "f32[4, 3]"), DTypeMismatch, "clamp");
    assert!(m.contains("0.5") && m.contains("i32"), "{m}");
    expect_err(&unary("cast(sign(x < 0), f32)", "f32[4, 3]"), DTypeMismatch, "sign");
    expect_err(&unary("cast(pow(i, i), f32)", "f32[4, 3]"), DTypeMismatch, "pow");
    expect_err(&unary("pow(x, cast(x, f16))", "f32[4, 3]"), DTypeMismatch, "pow");
    let wide = "graph main(x: f32[4, 3], y: f32[4, 5]) -> (z: f32[4, 3]) {\n    z = pow(x, y)\n    return z\n}\n";
    expect_err(wide, BroadcastMismatch, "pow");
}

#[test]
fn channel_norm_errors_are_at_the_call() {
    let norm = |call: &str, x: &str, c: &str| {
        format!(
            "graph main(x: f32{x}, s: f32{c}, b: f32{c}, h: f16{c}) -> (z: f32{x}) {{\n    z = {call}\n    return z\n}}\n"
        )
    };
    let m = expect_err(&norm("batch_norm(x, s, b, s, s)", "[2, 3, 4]", "[4]"), AxisSizeMismatch, "batch_norm");
    assert!(m.contains("scale") && m.contains("[3]"), "{m}");
    let m = expect_err(&norm("batch_norm(x, s, b, h, s)", "[2, 3, 4]", "[3]"), DTypeMismatch, "batch_norm");
    assert!(m.contains("mean"), "{m}");
    expect_err(&norm("batch_norm(x, s, b, s, s)", "[3]", "[3]"), AxisSizeMismatch, "batch_norm");
    let m = expect_err(&norm("instance_norm(x, s, b)", "[2, 3]", "[3]"), AxisSizeMismatch, "instance_norm");
    assert!(m.contains("rank 3"), "{m}");
    expect_err(&norm("instance_norm(x, s, h)", "[2, 3, 5]", "[3]"), DTypeMismatch, "instance_norm");
    expect_err(&norm("batch_norm(x, s, b, s)", "[2, 3, 4]", "[3]"), ArityMismatch, "batch_norm");
}

#[test]
fn tile_repeat_and_squeeze_errors_are_at_the_call() {
    let one =
        |body: &str| format!("graph main(x: f32[4, 1, 3]) -> (z: f32[4, 3]) {{\n    z = {body}\n    return z\n}}\n");
    let m = expect_err(&one("reshape(tile(x, [1, 0, 1]), [4, 3])"), AxisSizeMismatch, "tile");
    assert!(m.contains("at least 1"), "{m}");
    expect_err(&one("reshape(repeat_interleave(x, 2, 3), [8, 3])"), InvalidAxis, "repeat_interleave");
    expect_err(&one("reshape(repeat_interleave(x, -1, 0), [4, 3])"), AxisSizeMismatch, "repeat_interleave");
    let m = expect_err(&one("squeeze(x, [1, 2])"), AxisSizeMismatch, "squeeze");
    assert!(m.contains("axis 2"), "{m}");
    expect_err(&one("squeeze(unsqueeze(x, [0, -5]), [0, 2])"), InvalidAxis, "unsqueeze");
}

#[test]
fn concat_and_split_errors_are_at_the_call() {
    let g = |body: &str| {
        format!(
            "graph main(x: f32[4, 3], y: f32[4, 2], h: f16[4, 2]) -> (z: f32[4, 5]) {{\n    {body}\n    return z\n}}\n"
        )
    };
    let m = expect_err(&g("z = concat([x, y], axis=0)"), AxisSizeMismatch, "concat");
    assert!(m.contains("axis 0"), "{m}");
    expect_err(&g("z = concat([x, h], axis=1)"), DTypeMismatch, "concat");
    expect_err(&g("z = concat(x, axis=1)"), SyntaxError, "x, axis");
    expect_err(&g("z = concat([x, y], axis=2)"), InvalidAxis, "concat");
    let m = expect_err(
        &g("(a, b) = split(x, [2, 3], axis=0)\n    z = concat([a, b, x], axis=1)"),
        AxisSizeMismatch,
        "split",
    );
    assert!(m.contains("add up to 5"), "{m}");
    expect_err(&g("(a, b) = split(x, [4, 0], axis=0)\n    z = concat([a, b], axis=1)"), AxisSizeMismatch, "split");
    let m = expect_err(&g("z = split(x, [1, 2], axis=1)"), ArityMismatch, "split");
    assert!(m.contains("returns 2"), "{m}");
}

/// N-d sliding windows, transposed convolutions, border padding and
/// `chunk`: each bad argument is refused at the call (or at the attribute).
#[test]
fn nd_window_pad_and_chunk_errors_are_positioned() {
    let g = |body: &str| {
        format!(
            "graph main(x: f32[2, 4, 9], v: f32[1, 2, 4, 4, 4], w: f32[6, 2, 3], u: f32[4, 3, 2], h: f16[4, 3, 2], \
             r: f32[3, 5]) -> (z: f32[2, 6, 7]) {{\n    {body}\n    return z\n}}\n"
        )
    };
    let m = expect_err(&g("z = conv2d(x, w)"), AxisSizeMismatch, "conv2d");
    assert!(m.contains("rank 4"), "{m}");
    let m = expect_err(&g("z = conv1d(x, w, stride=[1, 2])"), SyntaxError, "[1, 2]");
    assert!(m.contains("one entry per spatial axis (1)"), "{m}");
    expect_err(&g("z = conv1d(x, w, pad=[1, 1, 1])"), SyntaxError, "[1, 1, 1]");
    expect_err(&g("z = conv1d(x, w, groups=3)"), AxisSizeMismatch, "conv1d");
    expect_err(&g("z = conv1d(x, w, dilation=0, groups=2)"), NegativeStride, "conv1d");
    expect_err(&g("z = conv3d(v, w)"), AxisSizeMismatch, "conv3d");
    expect_err(&g("z = conv_transpose1d(x, h)"), DTypeMismatch, "conv_transpose1d");
    let m = expect_err(&g("z = conv_transpose1d(x, w)"), AxisSizeMismatch, "conv_transpose1d");
    assert!(m.contains("4 input channels"), "{m}");
    let m =
        expect_err(&g("z = conv_transpose1d(x, u, stride=2, output_padding=2)"), AxisSizeMismatch, "conv_transpose1d");
    assert!(m.contains("output padding 2"), "{m}");
    let m = expect_err(&g("z = conv_transpose1d(x, u, pad=5)"), AxisSizeMismatch, "conv_transpose1d");
    assert!(m.contains("no output"), "{m}");
    expect_err(&g("z = maxpool3d(r, kernel=2)"), AxisSizeMismatch, "maxpool3d");
    expect_err(&g("z = avgpool1d(x, kernel=[2, 2])"), SyntaxError, "[2, 2]");
    let m = expect_err(&g("z = pad(r, [[0, 0], [5, 0]], mode=reflect)"), AxisSizeMismatch, "pad");
    assert!(m.contains("below the size 5"), "{m}");
    expect_err(&g("z = pad(r, [[0, 0], [-1, 0]], mode=edge)"), AxisSizeMismatch, "pad");
    expect_err(&g("z = pad(r, [[1, 1]], mode=edge)"), ArityMismatch, "pad");
    expect_err(&g("z = pad(r, [[0, 0], [1, 0]], value=1, mode=edge)"), ArityMismatch, "1, mode");
    let m = expect_err(&g("z = pad(r, [[0, 0], [1, 0]], mode=wrap)"), SyntaxError, "wrap");
    assert!(m.contains("reflect"), "{m}");
    let m = expect_err(&g("(a, b) = chunk(r, 2, axis=1)\n    z = a"), AxisSizeMismatch, "chunk");
    assert!(m.contains("not divisible into 2"), "{m}");
    expect_err(&g("(a, b) = chunk(r, 3)\n    z = a"), ArityMismatch, "chunk");
    expect_err(&g("(a, b) = chunk(r, 0)\n    z = a"), AxisSizeMismatch, "0)");
    let m = expect_err(&g("z = unfold(r, 1, 6, 1)"), AxisSizeMismatch, "unfold");
    assert!(m.contains("does not fit axis 1"), "{m}");
    expect_err(&g("z = unfold(r, 1, 2, 0)"), AxisSizeMismatch, "unfold");
    expect_err(&g("z = unfold(r, 2, 2, 1)"), InvalidAxis, "unfold");
    expect_err(&g("z = im2col(x, kernel=[2, 2])"), AxisSizeMismatch, "im2col");
    expect_err(&g("z = im2col(x, kernel=[])"), SyntaxError, "[])");
    let m = expect_err(&g("z = col2im(x, output=[9], kernel=[2])"), AxisSizeMismatch, "col2im");
    assert!(m.contains("positions"), "{m}");
    let m = expect_err(&g("z = col2im(x, output=[9], kernel=[5])"), AxisSizeMismatch, "col2im");
    assert!(m.contains("not divisible by ΠK = 5"), "{m}");
    expect_err(&g("z = col2im(x, output=[9, 9], kernel=[2])"), SyntaxError, "[9, 9]");
    // Sizes near i64's range are refused, not overflowed.
    expect_err(&g("z = conv_transpose1d(x, u, stride=4611686018427387904)"), Unsupported, "conv_transpose1d");
    expect_err(&g("z = col2im(x, output=[4611686018427387904], kernel=[2])"), ResourceExceeded, "col2im");
}

/// A reflect pad along a symbolic axis is refused (a mirror longer than the
/// axis would read outside it); an edge pad works at any size.
#[test]
fn reflect_padding_needs_a_known_axis() {
    let src = "graph<L> main(x: f32[2, L]) -> (z: f32[2, L]) {\n    z = shrink(pad(x, [[0, 0], [1, 1]], mode=reflect), [[0, 2], [1, L + 1]])\n    return z\n}\n";
    let m = expect_err(src, AxisSizeMismatch, "pad(");
    assert!(m.contains("below the size L"), "{m}");
    let ok = src.replace("reflect", "edge");
    lower(&parse(&ok).unwrap(), None).unwrap_or_else(|e| panic!("{e}"));
}

/// `gather` and `take`: an index that is not i32, of another rank or other
/// sizes, or a bad axis is refused at the call.
#[test]
fn gather_and_take_errors_are_at_the_call() {
    let g = |body: &str| {
        format!(
            "graph main(x: f32[3, 4], i: i32[3, 2], f: f32[3, 2], j: i32[2, 2], v: i32[5]) -> (z: f32[3, 2]) {{\n    {body}\n    return z\n}}\n"
        )
    };
    let m = expect_err(&g("z = gather(x, 1, f)"), DTypeMismatch, "gather");
    assert!(m.contains("i32 index"), "{m}");
    let m = expect_err(&g("z = gather(x, 1, j)"), AxisSizeMismatch, "gather");
    assert!(m.contains("axis 0"), "{m}");
    expect_err(&g("z = gather(x, 1, v)"), AxisSizeMismatch, "gather");
    expect_err(&g("z = gather(x, 2, i)"), InvalidAxis, "gather");
    expect_err(&g("z = take(x, f, 0)"), DTypeMismatch, "take");
    expect_err(&g("z = take(x, v, -3)"), InvalidAxis, "take");
    // The result's shape is checked at the return.
    expect_err(&g("z = take(x, v, 0)"), AxisSizeMismatch, "z\n}");
}

/// The cumulative ops: an axis out of range, a missing axis, a flag that is
/// not a boolean, and a result of the wrong shape are refused at the call.
#[test]
fn cumulative_op_errors_are_at_the_call() {
    let g = |body: &str| {
        format!("graph main(x: f32[3, 4], b: bool[3, 4]) -> (z: f32[3, 4]) {{\n    {body}\n    return z\n}}\n")
    };
    let m = expect_err(&g("z = cumsum(x, 2)"), InvalidAxis, "cumsum");
    assert!(m.contains("axis 2"), "{m}");
    expect_err(&g("z = cummax(x, -3)"), InvalidAxis, "cummax");
    expect_err(&g("z = cumprod(x)"), ArityMismatch, "cumprod");
    expect_err(&g("z = cummin(x, 0, exclusive=2)"), SyntaxError, "2)");
    // A bool input is counted in i32, which the f32 result does not hold.
    expect_err(&g("z = cumsum(b, 1)"), DTypeMismatch, "z\n}");
    expect_err(&g("z = prod(x, axes=[5])"), InvalidAxis, "prod");
}

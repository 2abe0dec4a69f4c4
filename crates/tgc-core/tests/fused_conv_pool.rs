//! Conv → ReLU → MaxPool fused into one region (`003`'s consumer-driven
//! nest): the pool's loops outermost, the conv re-run at each window read,
//! no buffer for the conv or ReLU values. Each configuration runs the
//! generated C against the reference interpreter ([`F32_TOL`]), and
//! the fusion is read from the Region Buffer SSA itself ([`assert_fused`]):
//! one region, one stored value (the pool, a graph output), the conv's
//! `REDUCE` computed at the pool's reads, every other value deferred.
#![cfg(feature = "poly")]

use tgc_core::index_book;
use tgc_core::pipeline::{self, Format};
use tgc_core::region::{self, Dest, How, Materialize};
use tgc_core::tiny::{Graph, Op};
use tgc_runtime::HostTensor;

/// One fused graph: `(x, w[, b]) -> y`, with the conv and pool attributes.
fn graph(name: &str, x: &str, w: &str, bias: Option<&str>, conv: &str, pool: &str, y: &str) -> String {
    let (b_param, b_arg) = match bias {
        Some(b) => (format!(", b: f32{b}"), ", bias=b"),
        None => (String::new(), ""),
    };
    format!(
        "graph {name}(x: f32{x}, w: f32{w}{b_param}) -> (y: f32{y}) {{\n    \
         c = conv2d(x, w{b_arg}{conv})\n    r = relu(c)\n    y = maxpool2d(r{pool})\n    return y\n}}\n"
    )
}

/// Asserts from the Region Buffer SSA that `g` (a `graph` above) is one
/// fused kernel with no intermediate buffer: exactly one region, whose one
/// output is the pool `y` stored to graph output 0 (`gmem`); the conv's
/// `REDUCE` is `deferred compute_at` with a local edge to the pool; the
/// ReLU `r` and every other let are `deferred`; no fusion was rejected.
///
/// With `allow_cost`, a graph the cost model declines to fuse (one `cost`
/// stop, two regions: the recompute of an overlapping window costs more
/// than the buffer saves, `000` §4.1 step 4) passes too; returns whether
/// the graph was fused.
fn assert_fused(g: &Graph, allow_cost: bool) -> bool {
    let book = index_book::build(g).unwrap();
    let rs = region::form(g, &book).unwrap();
    let text = region::dump(g, &rs);
    assert!(region::verify::verify(g, &rs).is_empty(), "{text}");
    if allow_cost && rs.regions.len() == 2 {
        let costed =
            |s: &region::Stop| matches!(s.reason, region::StopReason::Cost { recompute, .. } if recompute > 1.0);
        assert!(rs.stops.len() == 1 && costed(&rs.stops[0]), "not fused, and not for its cost:\n{text}");
        return false;
    }
    let [r] = rs.regions.as_slice() else { panic!("not one region:\n{text}") };
    let [out] = r.outputs.as_slice() else { panic!("not one output:\n{text}") };
    let y = g.outputs[0].node;
    assert!(out.node == y && out.dest == Dest::GraphOutput(0) && out.materialize == Materialize::Gmem, "{text}");
    let conv = g.ids().find(|&v| matches!(g.node(v).op, Op::Reduce { .. })).unwrap();
    let relu = g.ids().find(|&v| g.node(v).label == "r").unwrap();
    for l in &r.body {
        let want = if l.node == y { Materialize::Gmem } else { Materialize::Deferred };
        assert_eq!(l.materialize, want, "{}:\n{text}", g.node(l.node).label);
    }
    let how = |v| r.body.iter().find(|l| l.node == v).map(|l| l.how);
    assert_eq!(how(conv), Some(How::ComputeAt), "{text}");
    assert_eq!(how(relu), Some(How::Inline), "{text}");
    assert_eq!(how(y), Some(How::Accumulate), "{text}");
    assert!(r.local_edges.iter().any(|e| e.producer == conv && e.consumer == y), "{text}");
    assert!(rs.stops.is_empty(), "{text}");
    true
}

/// The tolerance of the f32 outputs against the interpreter, absolute and
/// relative: 1e-5, about 84 units in the last place (the emit harness's
/// `Tol::F32`, for the same reasons: the few-ulp bounds of
/// `docs/numerics.md` and a sum in another order, its floor that relative
/// error of the sample inputs' terms in [-1, 1)).
const F32_TOL: f64 = 1e-5;

/// Inputs of `g` from `pipeline::sample_inputs`.
fn inputs(g: &Graph) -> Vec<HostTensor> {
    pipeline::sample_inputs(g).unwrap()
}

/// Loads every graph, checks each is fused, runs them all as one C library
/// and compares each with the interpreter.
fn check_all(srcs: &[String], allow_cost: bool) -> usize {
    let graphs: Vec<Graph> = srcs
        .iter()
        .map(|src| {
            pipeline::load(src, Format::Dsl, None).unwrap_or_else(|d| panic!("{}\n{src}", d.render("graph"))).graph
        })
        .collect();
    let fused = graphs.iter().filter(|g| assert_fused(g, allow_cost)).count();
    compare_all(&graphs);
    fused
}

/// Runs every graph as one C library and compares each with the interpreter.
fn compare_all(graphs: &[Graph]) {
    let ins: Vec<Vec<HostTensor>> = graphs.iter().map(inputs).collect();
    let runs: Vec<(&Graph, &[HostTensor])> = graphs.iter().zip(&ins).map(|(g, i)| (g, i.as_slice())).collect();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("fused_conv_pool");
    std::fs::create_dir_all(&dir).unwrap();
    let got = pipeline::run_cpu_batch(&runs, &dir).unwrap_or_else(|e| panic!("{e:?}"));
    for ((g, i), got) in runs.iter().zip(&got) {
        let want = pipeline::run_interp(g, i).unwrap();
        for (w, o) in want.iter().zip(got) {
            assert_eq!(w.shape(), o.shape(), "{}", g.name);
            assert_eq!(w.dtype(), tgc_runtime::DType::F32, "{}: the graphs here are f32", g.name);
            for (k, (a, b)) in w.to_f64_vec().iter().zip(o.to_f64_vec()).enumerate() {
                let ok = (a - b).abs() <= F32_TOL + F32_TOL * a.abs();
                assert!(ok, "{} element {k}: interp {a}, cpu {b}", g.name);
            }
        }
    }
}

fn check(src: &str) {
    check_all(&[src.to_string()], false);
}

/// Output size of a window of `k` taps, dilation `d`, stride `s` over `n`
/// elements padded by `p` on both sides (`None` when no window fits).
fn windows(n: i64, p: i64, k: i64, d: i64, s: i64) -> Option<i64> {
    let span = n + 2 * p - d * (k - 1) - 1;
    (span >= 0).then(|| span / s + 1)
}

/// One conv pad of the grid of the issue: stride {1, 2} × dilation {1, 2} ×
/// pool window {2, 3} × pool stride {1, 2, 3} (24 graphs, a bias every
/// other one), a 3×3 conv on a 2-channel 11×10 image; every graph equal to
/// the interpreter, fused unless the cost model declines. One test per pad {0, 1, 2} (72 graphs in all),
/// so that the test harness runs them side by side.
fn grid(pad: i64) {
    let (h, w) = (11, 10);
    let mut srcs = Vec::new();
    for stride in [1, 2] {
        for dil in [1, 2] {
            for win in [2, 3] {
                for ps in [1, 2, 3] {
                    let conv = (windows(h, pad, 3, dil, stride), windows(w, pad, 3, dil, stride));
                    let (Some(ch), Some(cw)) = conv else { continue };
                    let (Some(ph), Some(pw)) = (windows(ch, 0, win, 1, ps), windows(cw, 0, win, 1, ps)) else {
                        continue;
                    };
                    let bias = (srcs.len() % 2 == 0).then_some("[3]");
                    srcs.push(graph(
                        &format!("g_p{pad}_s{stride}_d{dil}_k{win}_ps{ps}"),
                        &format!("[1, 2, {h}, {w}]"),
                        "[3, 2, 3, 3]",
                        bias,
                        &format!(", stride=[{stride}, {stride}], pad=[{pad}, {pad}], dilation=[{dil}, {dil}]"),
                        &format!(", kernel=[{win}, {win}], stride=[{ps}, {ps}]"),
                        &format!("[1, 3, {ph}, {pw}]"),
                    ));
                }
            }
        }
    }
    assert_eq!(srcs.len(), 24, "every combination is valid for an 11×10 image");
    // Non-overlapping pools (stride ≥ window) recompute nothing and always
    // fuse; overlapping ones fuse unless the cost model declines.
    let fused = check_all(&srcs, true);
    assert!(fused >= 8, "only {fused} of 24 fused");
}

#[test]
fn grid_conv_pad0() {
    grid(0);
}

#[test]
fn grid_conv_pad1() {
    grid(1);
}

#[test]
fn grid_conv_pad2() {
    grid(2);
}

#[test]
fn conv3x3_pad1_relu_maxpool2x2_stride2() {
    check(&graph(
        "p1",
        "[2, 3, 9, 11]",
        "[4, 3, 3, 3]",
        Some("[4]"),
        ", stride=[1, 1], pad=[1, 1]",
        ", kernel=[2, 2], stride=[2, 2]",
        "[2, 4, 4, 5]",
    ));
}

#[test]
fn strided_dilated_conv_then_overlapping_padded_pool() {
    check(&graph(
        "dil",
        "[1, 3, 13, 12]",
        "[5, 3, 3, 3]",
        None,
        ", stride=[2, 2], pad=[1, 1], dilation=[2, 2]",
        ", kernel=[3, 3], stride=[2, 2], pad=[1, 1]",
        "[1, 5, 3, 3]",
    ));
}

#[test]
fn grouped_conv_then_stride1_pool() {
    check(&graph(
        "grp",
        "[1, 4, 7, 7]",
        "[6, 2, 3, 3]",
        Some("[6]"),
        ", pad=[1, 1], groups=2",
        ", kernel=[2, 2], stride=[1, 1]",
        "[1, 6, 6, 6]",
    ));
}

#[test]
fn odd_sizes_asymmetric_padding_and_strides() {
    check(&graph(
        "odd",
        "[3, 1, 5, 7]",
        "[3, 1, 2, 3]",
        None,
        ", stride=[1, 2], pad=[0, 1, 1, 0]",
        ", kernel=[3, 2], stride=[2, 1], pad=[1, 0], dilation=[1, 2]",
        "[3, 3, 3, 1]",
    ));
}

/// conv → pool → conv → pool: the exact choice of region formation takes
/// both conv → pool fusions and leaves the middle pool stored (two
/// kernels, one buffer between them).
#[test]
fn two_fused_stages_with_a_stored_pool_between() {
    let src = "graph g(x: f32[1, 1, 16, 16], w1: f32[1, 1, 3, 3], w2: f32[1, 1, 3, 3]) -> (y: f32[1, 1, 4, 4]) {\n    \
               c1 = conv2d(x, w1, pad=[1, 1])\n    p1 = maxpool2d(c1, kernel=[2, 2], stride=[2, 2])\n    \
               c2 = conv2d(p1, w2, pad=[1, 1])\n    y = maxpool2d(c2, kernel=[2, 2], stride=[2, 2])\n    return y\n}\n";
    let g = pipeline::load(src, Format::Dsl, None).unwrap_or_else(|d| panic!("{}", d.render("graph"))).graph;
    let book = index_book::build(&g).unwrap();
    let rs = region::form(&g, &book).unwrap();
    let text = region::dump(&g, &rs);
    assert_eq!(rs.regions.len(), 2, "{text}");
    let compute_at = rs.regions.iter().flat_map(|r| &r.body).filter(|l| l.how == How::ComputeAt).count();
    assert_eq!(compute_at, 2, "{text}");
    compare_all(&[g]);
}

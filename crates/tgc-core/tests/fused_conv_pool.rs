//! Conv → ReLU → MaxPool fused into one region (`003`'s consumer-driven
//! nest): the pool's loops outermost, the conv re-run at each window read,
//! no buffer for the conv or ReLU values. Each configuration runs the
//! generated C against the reference interpreter (rtol = atol = 1e-3).
#![cfg(feature = "poly")]

use tgc_core::pipeline::{self, Format};
use tgc_runtime::tensor::sample_values;
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

/// Compiles `src`, checks the kernel is fused, runs it and the interpreter.
fn check(src: &str) {
    let loaded = pipeline::load(src, Format::Dsl, None).unwrap_or_else(|d| panic!("{}", d.render("graph")));
    let g = &loaded.graph;
    let regions = pipeline::regions(g).unwrap();
    assert!(regions.contains("compute_at"), "not fused:\n{regions}");
    let c = pipeline::compile_cpu(&loaded, g).unwrap().c_source;
    // One kernel, and no scratch buffer for the conv or ReLU values.
    assert!(!c.contains("malloc") && !c.contains("tmp0"), "a scratch buffer:\n{c}");
    assert!(c.contains("tgc_k0_") && !c.contains("tgc_k1_"), "more than one kernel:\n{c}");
    compare(g);
}

/// Runs the generated C and the interpreter on the same sample inputs.
fn compare(g: &tgc_core::tiny::Graph) {
    let inputs: Vec<HostTensor> = g
        .inputs()
        .into_iter()
        .enumerate()
        .map(|(k, id)| {
            let shape: Vec<usize> = g.shape(id).iter().map(|d| d.as_int().unwrap() as usize).collect();
            let n = shape.iter().product();
            HostTensor::from_f64(g.dtype(id), &shape, &sample_values(k as u64 + 1, n)).unwrap()
        })
        .collect();
    let want = pipeline::run_interp(g, &inputs).unwrap();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("fused_conv_pool");
    std::fs::create_dir_all(&dir).unwrap();
    let got = pipeline::run_cpu(g, &inputs, &dir).unwrap_or_else(|e| panic!("{e:?}"));
    for (w, o) in want.iter().zip(&got) {
        assert_eq!(w.shape(), o.shape());
        for (k, (a, b)) in w.to_f64_vec().iter().zip(o.to_f64_vec()).enumerate() {
            assert!((a - b).abs() <= 1e-3 + 1e-3 * a.abs(), "element {k}: interp {a}, cpu {b}");
        }
    }
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
    let regions = pipeline::regions(&g).unwrap();
    assert_eq!(regions.matches("compute_at").count(), 2, "{regions}");
    compare(&g);
}

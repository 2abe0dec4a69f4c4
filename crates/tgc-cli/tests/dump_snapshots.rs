//! Snapshots of `tgc compile --dump poly_view,region` on the spec's GEMM,
//! Conv2D and attention graphs and on the Conv → ReLU → MaxPool example, with
//! every symbol bound (`--dim`) so that every block is affine (`003`): the
//! domains and accesses in isl notation, the detected contraction patterns,
//! the dependences, the region grouping with each local edge's buffer and
//! halo, and the stop reason of every rejected fusion.
//!
//! Each snapshot is `tests/snapshots/<graph file>.poly_view_region`, the
//! command's standard output. When a change to a dump is intended,
//! regenerate them and review the diff:
//!
//! ```text
//! UPDATE_EXPECT=1 cargo test -p tgc-cli --test dump_snapshots
//! ```

use std::path::Path;
use std::process::Command;

use expect_test::expect_file;

/// Runs `tgc compile <graph> --dim … --dump poly_view,region` in the
/// repository root and checks its output against the graph's snapshot.
fn check(graph: &str, dims: &[&str]) {
    let mut args = vec!["compile", graph, "--dump", "poly_view,region"];
    for d in dims {
        args.extend(["--dim", d]);
    }
    let o = Command::new(env!("CARGO_BIN_EXE_tgc"))
        .args(&args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
        .output()
        .expect("the tgc binary runs");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "tgc {}: {stderr}", args.join(" "));
    let out = String::from_utf8(o.stdout).expect("UTF-8 output");
    assert!(!out.contains("not in the SCoP"), "a bound graph is affine:\n{out}");
    let name = Path::new(graph).file_name().unwrap().to_str().unwrap();
    expect_file![format!("snapshots/{name}.poly_view_region")].assert_eq(&out);
}

#[test]
fn spec_gemm() {
    check("tests/spec/002_gemm.json", &["M=64", "K=32", "N=48"]);
}

#[test]
fn spec_conv2d() {
    check(
        "tests/spec/002_conv2d.json",
        &[
            "N=2",
            "Cin_total=3",
            "Cin=3",
            "H=8",
            "W=8",
            "Cout=8",
            "Rcout=8",
            "G=1",
            "Kh=3",
            "Kw=3",
            "pt=1",
            "pb=1",
            "pl=1",
            "pr=1",
            "Sh=1",
            "Sw=1",
            "Dh=1",
            "Dw=1",
            "Oy=8",
            "Ox=8",
        ],
    );
}

#[test]
fn spec_attention() {
    check("tests/spec/002_attention.json", &["B=2", "H=4", "M=16", "N=16", "D=8"]);
}

#[test]
fn conv_relu_pool() {
    check("examples/graphs/conv_relu_pool.tgc", &["N=2"]);
}

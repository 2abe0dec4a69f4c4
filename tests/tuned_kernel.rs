//! `kernel!(…, tuning("DIR"))`: a ShapeSet point's packed kernels take
//! their block sizes from the committed tuning cache `tests/tuned/tgc-tune/`
//! (written by `tgc tune`, keyed under the host's C compiler, see
//! `tgc_core::emit::api::Backend::Rust`); a kernel without a record keeps
//! the analytic sizes and the build warns. That the records reach the
//! printed bodies is tested in `tgc-macros`; here a tuned module runs, and
//! the cache holds a record for every packed kernel of every point (when
//! it does not, tune again with the command in the message).

use std::collections::BTreeMap;
use std::path::Path;

use tgc_core::pipeline::{load, Format};
use tgc_core::tune::{self, Cache, Toolchain};

tgc::kernel!(gemm: "tests/tuned/gemm.tgc", shapes(M in [64, 200], N = 96, K = 80), tuning("tests/tuned/tgc-tune"));

const POINTS: [i64; 2] = [64, 200];

/// `relu(x · w + b)` in f64.
fn reference(x: &[f32], w: &[f32], b: &[f32], m: usize, n: usize, k: usize) -> Vec<f32> {
    let mut y = vec![0.0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            let s: f64 = (0..k).map(|p| x[i * k + p] as f64 * w[p * n + j] as f64).sum::<f64>() + b[j] as f64;
            y[i * n + j] = s.max(0.0) as f32;
        }
    }
    y
}

#[test]
fn a_tuned_module_computes_the_gemm_at_its_points_and_elsewhere() {
    let (n, k) = (96, 80);
    for m in [64, 200, 7] {
        let x: Vec<f32> = (0..m * k).map(|i| ((i * 37 % 101) as f32 - 50.0) / 64.0).collect();
        let w: Vec<f32> = (0..k * n).map(|i| ((i * 53 % 97) as f32 - 48.0) / 64.0).collect();
        let b: Vec<f32> = (0..n).map(|i| (i as f32 - 48.0) / 32.0).collect();
        let mut y = vec![f32::NAN; m * n];
        gemm::run(&x, &w, &b, &mut y, m, n, k).unwrap();
        let want = reference(&x, &w, &b, m, n, k);
        let worst = y.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        assert!(worst <= 1e-4, "M = {m}: max |d| {worst}");
    }
}

#[test]
fn every_point_of_the_tuned_module_has_a_record() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/tuned");
    let graph = load(&std::fs::read_to_string(dir.join("gemm.tgc")).unwrap(), Format::Dsl, None).unwrap().graph;
    let cache = Cache::open(&dir.join("tgc-tune")).unwrap_or_else(|e| panic!("{e}"));
    let tc = Toolchain::host().unwrap();
    for m in POINTS {
        let point = BTreeMap::from([("M".to_string(), m), ("N".to_string(), 96), ("K".to_string(), 80)]);
        let mut p = tgc_core::cpu::lower(&graph.bind(&point).unwrap()).unwrap();
        assert_eq!(tune::tunable(&p).count(), 1, "M = {m}: one packed GEMM");
        let missing = tune::apply(&mut p, &cache, &tc);
        assert!(
            missing.is_empty(),
            "M = {m}: no record for {missing:?} (C compiler {:?}): run `target/release/tgc tune tests/tuned/gemm.tgc \
             --point M=64,N=96,K=80 --point M=200,N=96,K=80 --cache tests/tuned/tgc-tune`",
            tc.compiler
        );
    }
}

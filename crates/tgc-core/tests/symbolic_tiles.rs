//! Symbolic tiling (`003`: tile sizes are run-time parameters, strip-mining
//! at code generation): one compiled kernel run with many tile sizes,
//! including ones that do not divide the extents, gives the untiled
//! kernel's outputs bit for bit, and the interpreter's within rounding; a
//! full tile's point loops carry no `min` and no guard.
#![cfg(feature = "poly")]

use tgc_core::affine::AffExpr;
use tgc_core::cpu::{self, Nest};
use tgc_core::pipeline::{self, CompiledCpu, Format, Options, TilePlan};
use tgc_core::sym::Dim;
use tgc_core::tiny::Graph;
use tgc_runtime::HostTensor;

const GEMM: &str = "graph gemm_tiles(x: f32[13, 7], w: f32[7, 11], bias: f32[11]) -> (y: f32[13, 11]) {\n    \
                    acc = matmul(x, w)\n    y = relu(acc + bias)\n    return y\n}\n";

const CONV_POOL: &str =
    "graph conv_pool_tiles(x: f32[2, 3, 13, 11], w: f32[4, 3, 3, 3], b: f32[4]) -> (y: f32[2, 4, 6, 5]) {\n    \
                         c = conv2d(x, w, bias=b, stride=[1, 1], pad=[1, 1])\n    r = relu(c)\n    \
                         y = maxpool2d(r, kernel=[2, 2], stride=[2, 2])\n    return y\n}\n";

const SOFTMAX: &str =
    "graph softmax_tiles(x: f32[13, 101]) -> (y: f32[13, 101]) {\n    y = softmax(x, axis=-1)\n    return y\n}\n";

fn load(src: &str) -> Graph {
    pipeline::load(src, Format::Dsl, None).unwrap_or_else(|d| panic!("{}", d.render("graph"))).graph
}

fn inputs(g: &Graph) -> Vec<HostTensor> {
    pipeline::sample_inputs(g).unwrap()
}

fn work_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("symbolic_tiles").join(tag);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Compiles `g` once untiled and once with `axes` strip-mined (extents
/// `extents`), then runs the tiled kernel with every tile size of the list
/// (per axis) and a few mixed pairs.
fn check(g: &Graph, axes: Vec<usize>, extents: &[i64], tag: &str) {
    let ins = inputs(g);
    let dir = work_dir(tag);
    let plain = CompiledCpu::new(g, &Options::default(), &dir).unwrap();
    assert_eq!(plain.tiles(), 0);
    let want = plain.run(&ins, &[]).unwrap();
    let interp = pipeline::run_interp(g, &ins).unwrap();
    for (a, b) in interp[0].to_f64_vec().iter().zip(want[0].to_f64_vec()) {
        // 1e-5 absolute and relative: the emit harness's `Tol::F32`.
        assert!((a - b).abs() <= 1e-5 + 1e-5 * a.abs(), "interp {a}, cpu {b}");
    }
    let opts = Options { tiles: TilePlan { axes }, ..Options::default() };
    let tiled = CompiledCpu::new(g, &opts, &dir).unwrap();
    assert_eq!(tiled.tiles(), extents.len());
    let mut sizes: Vec<Vec<i64>> = Vec::new();
    for t in [1, 2, 3, 5, 7, 16] {
        sizes.push(vec![t; extents.len()]);
    }
    sizes.push(extents.to_vec());
    sizes.push(extents.iter().map(|e| e + 3).collect());
    sizes.push(extents.iter().enumerate().map(|(j, e)| if j % 2 == 0 { 2 } else { e - 1 }).collect());
    sizes.push(extents.iter().enumerate().map(|(j, _)| if j % 2 == 0 { 5 } else { 1 }).collect());
    for ts in &sizes {
        let got = tiled.run(&ins, ts).unwrap();
        let bits = |t: &HostTensor| t.bytes().to_vec();
        assert_eq!(bits(&got[0]), bits(&want[0]), "tile sizes {ts:?} change the result");
    }
    // A tile size below 1 is refused at run time (status 2), nothing written.
    let err = tiled.run(&ins, &vec![0; extents.len()]).unwrap_err();
    assert!(format!("{err:?}").contains("status 2"), "{err:?}");
}

#[test]
fn gemm_bias_relu_any_tile_sizes() {
    check(&load(GEMM), vec![0, 1], &[13, 11], "gemm");
}

#[test]
fn a_weight_read_in_place_gives_the_plain_nests_bits() {
    // Five rows: the weight `w[37, 300]` is the micro-kernel's `a`, read in
    // place (`PackOrder::Direct`), over three K blocks; the tiled kernel is
    // the plain nest.
    let g = load(
        "graph lin_tiles(x: f32[5, 300], w: f32[37, 300], b: f32[37]) -> (y: f32[5, 37]) {\n    \
         y = relu(matmul(x, transpose(w, 0, 1)) + b)\n    return y\n}\n",
    );
    let p = cpu::lower(&g).unwrap();
    let pk = p.kernels[0].packed.as_ref().expect("packed");
    assert_eq!(pk.a_order, cpu::packed::PackOrder::Direct);
    check(&g, vec![0, 1], &[5, 37], "direct");
}

#[test]
fn fused_conv_relu_pool_any_tile_sizes() {
    let g = load(CONV_POOL);
    assert!(pipeline::regions(&g).unwrap().contains("compute_at"), "not fused");
    check(&g, TilePlan::spatial_nchw().axes, &[6, 5], "conv_pool");
}

#[test]
fn split_reductions_any_tile_sizes() {
    // The row max and row sum fold in split accumulators (`cpu::lanes`),
    // by a rule the strips do not change; rows of 101, longer than a
    // window (`cpu::lanes::MAX_WINDOW`), so they split, with a tail.
    let g = load(SOFTMAX);
    assert!(cpu::lower(&g).unwrap().kernels.iter().any(|k| k.lanes > 1));
    check(&g, vec![0], &[13], "softmax");
}

#[test]
fn unfused_conv_relu_pool_any_tile_sizes() {
    // Fusion off: the conv is its own kernel, stored; both kernels tiled.
    let g = load(CONV_POOL);
    let opts = Options { fuse: false, tiles: TilePlan::spatial_nchw(), ..Options::default() };
    let p = cpu::lower_with(&g, &opts).unwrap();
    assert!(p.kernels.len() >= 2 && p.kernels.iter().all(|k| k.strips.len() == 2));
    let dir = work_dir("unfused");
    let fused = CompiledCpu::new(&g, &Options::default(), &dir).unwrap().run(&inputs(&g), &[]).unwrap();
    let unfused = CompiledCpu::new(&g, &opts, &dir).unwrap();
    for ts in [[1, 1], [3, 2], [4, 7]] {
        assert_eq!(unfused.run(&inputs(&g), &ts).unwrap()[0].bytes(), fused[0].bytes());
    }
}

/// Walks `n`, with `tiles` the enclosing tile loops `(io, T)` (strip `j`'s
/// tile variable is `free + j`): a point loop of a strip-mined axis inside
/// its full tile must run exactly `io..io + T`.
fn full_tiles_unguarded(n: &Nest, tiles: &mut Vec<(u32, Dim)>, strip_axes: &[u32], free: u32, full_points: &mut usize) {
    match n {
        Nest::Loop(l, body) => {
            let is_tile_loop = !l.step.is_one();
            if is_tile_loop {
                assert_eq!(l.lo, AffExpr::int(0));
                tiles.push((l.var, l.step.clone()));
            } else if let Some(j) = strip_axes.iter().position(|&a| a == l.var) {
                if let Some((io, t)) = tiles.iter().find(|(io, _)| *io == free + j as u32) {
                    assert_eq!(l.lo, AffExpr::var(*io));
                    assert_eq!(l.hi, &AffExpr::var(*io) + &AffExpr::constant(t.clone()), "a guard on a full tile");
                    *full_points += 1;
                } else {
                    // The partial tile: floor(E/T)*T..E, bounds free of loop variables.
                    assert!(l.lo.as_constant().is_some() && l.hi.as_constant().is_some());
                }
            }
            full_tiles_unguarded(body, tiles, strip_axes, free, full_points);
            if is_tile_loop {
                tiles.pop();
            }
        }
        Nest::Seq(parts) => parts.iter().for_each(|p| full_tiles_unguarded(p, tiles, strip_axes, free, full_points)),
        Nest::Point => {}
    }
}

#[test]
fn full_tile_point_loops_have_no_min_or_guard() {
    for (src, axes) in [(GEMM, vec![0, 1]), (CONV_POOL, vec![2, 3])] {
        let g = load(src);
        let plain = cpu::lower(&g).unwrap();
        let p = cpu::lower_with(&g, &Options { tiles: TilePlan { axes: axes.clone() }, ..Options::default() }).unwrap();
        assert_eq!(p.tiles, ["tile0", "tile1"]);
        assert_eq!(p.kernels.len(), plain.kernels.len());
        for (k, k0) in p.kernels.iter().zip(&plain.kernels) {
            // Strip-mining changes the scan only: what a point computes is the same.
            assert_eq!((&k.value, &k.reduce, &k.store_index), (&k0.value, &k0.reduce, &k0.store_index));
            let strip_axes: Vec<u32> = k.strips.iter().map(|s| s.axis as u32).collect();
            assert_eq!(strip_axes, axes.iter().map(|&a| a as u32).collect::<Vec<_>>());
            let mut full_points = 0;
            full_tiles_unguarded(&k.nest(), &mut Vec::new(), &strip_axes, k.free_var(), &mut full_points);
            // Two strips: full×full has two full-tile point loops, full×partial and
            // partial×full one each.
            assert_eq!(full_points, 4, "kernel {}", k.name);
            let mut points = 0;
            count_points(&k.nest(), &mut points);
            assert_eq!(points, 4, "full/partial separation on two axes gives four point nests");
        }
    }
}

fn count_points(n: &Nest, out: &mut usize) {
    match n {
        Nest::Loop(_, body) => count_points(body, out),
        Nest::Seq(parts) => parts.iter().for_each(|p| count_points(p, out)),
        Nest::Point => *out += 1,
    }
}

//! The SIMT template on whole graphs: every kernel verified, run in the
//! emulator and compared with the reference interpreter, with symbolic and
//! odd sizes, in f32 and f16; each graph's kernels compiled to one sm_80
//! cubin with no spills (no GPU).

use std::collections::BTreeMap;

use super::rows::*;
use super::scan::*;
use super::*;
use crate::emit::cuda;
use crate::gpu::dialect::verify;
use crate::gpu::driver::{lower_program, lower_program_for, lower_regions};
use crate::gpu::emulate::{self, Arg};
use crate::gpu::program::{emulate, eval_launch, Form, GpuProgram, Launch, LaunchArg};
use crate::gpu::toolchain::Toolchain;
use crate::interp;
use crate::pipeline::{self, Format};
use crate::tiny::{Graph, NodeId};

fn load(src: &str) -> Graph {
    pipeline::load(src, Format::Dsl, None).unwrap_or_else(|e| panic!("{e}\n{src}")).graph
}

fn example(name: &str) -> Graph {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/graphs").join(name);
    load(&std::fs::read_to_string(&path).unwrap())
}

/// Lowers `g`, verifies every kernel, runs the program in the emulator with
/// `dims` and compares each output with the interpreter's within `tol`
/// (relative to max(1, |reference|)). Returns the program.
fn check(g: &Graph, dims: &[(&str, i64)], tol: f64) -> GpuProgram {
    let prog = lower_program(g).unwrap_or_else(|e| panic!("{e}"));
    check_program(g, prog, dims, tol)
}

/// [`check`] of a given program of `g`.
pub(crate) fn check_program(g: &Graph, prog: GpuProgram, dims: &[(&str, i64)], tol: f64) -> GpuProgram {
    for l in &prog.launches {
        if let Err(errs) = verify::verify(&l.kernel) {
            panic!("{}: {errs:?}\n{}", l.kernel.name, l.kernel);
        }
    }
    let bound: BTreeMap<String, i64> = dims.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let dim_values: Vec<i64> = prog.symbols.iter().map(|s| bound[s]).collect();
    let bg = g.bind(&bound).unwrap();
    let mut inputs = Vec::new();
    let mut tensors = Vec::new();
    for (k, id) in bg.inputs().into_iter().enumerate() {
        let shape: Vec<usize> = bg.shape(id).iter().map(|d| d.as_int().unwrap() as usize).collect();
        let n = shape.iter().product();
        let t = interp::Tensor::new(bg.dtype(id), &shape, tgc_runtime::tensor::sample_values(k as u64 + 7, n)).unwrap();
        inputs.push(t.data.clone());
        tensors.push(t);
    }
    let want = interp::run(&bg, &BTreeMap::new(), &tensors).unwrap();
    let got = emulate(&prog, &dim_values, &inputs).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got.len(), want.len());
    for (o, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g.len(), w.data.len(), "output {o}");
        for (i, (a, b)) in g.iter().zip(&w.data).enumerate() {
            let ok = a == b || (a - b).abs() <= tol * b.abs().max(1.0) || (a.is_nan() && b.is_nan());
            assert!(ok, "output {o}[{i}]: emulated {a}, interpreter {b}");
        }
    }
    prog
}

fn forms(p: &GpuProgram) -> Vec<Form> {
    p.launches.iter().map(|l| l.form).collect()
}

/// Compiles all kernels of `p` as one NVRTC unit for sm_80 and checks
/// ptxas reports no spills.
fn compiles(tc: &Toolchain, p: &GpuProgram) {
    let kernels = p.kernels();
    let (src, compiled) = cuda::compile(tc, &kernels, &p.name).unwrap_or_else(|e| panic!("{e}"));
    assert!(src.contains("/* s0 */"));
    assert!(!compiled.cubin.is_empty());
    let res = tc.ptxas_resources(&compiled.ptx, cuda::toolchain_arch(Arch::Sm80)).unwrap();
    assert_eq!(res.len(), kernels.len(), "{res:?}");
    for r in &res {
        assert_eq!((r.spill_stores, r.spill_loads, r.stack_frame), (0, 0, 0), "{r:?}");
    }
}

/// A concrete innermost extent (a multiple of 4): rows of whole groups,
/// 4-wide loads of `x` and `b` (not of the broadcast `s`), 4-wide stores.
#[test]
fn vector_loads_along_rows_of_whole_groups() {
    for (dt, tol) in [("f32", 1e-6), ("f16", 2e-3)] {
        let g = load(&format!(
            "graph<R=3> rows(x: {dt}[R, 12], b: {dt}[12], s: {dt}[R, 1]) -> (y: {dt}[R, 12]) {{\n\
             y = relu(x * 2 + b) - s\n    return y\n}}\n"
        ));
        let p = check(&g, &[("R", 5)], tol);
        let text = p.launches[0].kernel.to_string();
        assert_eq!(text.matches(&format!("ld.global.v4.{dt}")).count(), 2, "{text}");
        assert!(text.contains(&format!("st.global.v4.{dt}")), "{text}");
        check(&g, &[("R", 1)], tol);
    }
}

fn elementwise_src(dt: &str) -> String {
    format!(
        "graph<R=3, C=5> ew(x: {dt}[R, C], b: {dt}[C]) -> (y: {dt}[R, 4]) {{\n\
         t = maximum(x * 2 + b, x - 1)\n\
         p = pad(t, [[1, 0], [0, 2]], 0.5)\n\
         y = shrink(relu(p), [[1, R + 1], [1, 5]])\n    return y\n}}\n"
    )
}

#[test]
fn elementwise_with_broadcast_pad_and_shrink() {
    for (dt, tol) in [("f32", 1e-6), ("f16", 2e-3)] {
        let g = load(&elementwise_src(dt));
        let p = check(&g, &[("R", 3), ("C", 5)], tol);
        assert!(forms(&p).iter().all(|f| *f == Form::Elementwise), "{:?}", forms(&p));
        // Four elements per thread and one 4-wide store (16 bytes in f32, 8 in f16).
        let text = p.launches[0].kernel.to_string();
        assert!(text.contains(&format!("st.global.v4.{dt}")), "{text}");
        check(&g, &[("R", 37), ("C", 9)], tol);
    }
}

fn mixed_src() -> String {
    "graph<R=3, C=5> mixed(x: f32[R, C], k: i32[R, C], h: bf16[C]) -> (y: i32[R, C], z: f32[R, C], s: i32[R], b: bool[R, C], m: f32[R]) {\n\
     y = cast(x * 3, i32) + k * 2 - relu(k)\n\
     z = where(x < 0.5, cast(k, f32), cast(h, f32) * x) + sigmoid(x) + abs(x) + log(x + 2)\n\
     s = sum(k, axes=[1])\n    b = maximum(x < 0.25, k == 1)\n    m = min(x, axes=[1])\n\
     return y, z, s, b, m\n}\n"
        .into()
}

fn reductions_src(dt: &str) -> String {
    format!(
        "graph<R=3, C=5> red(x: {dt}[R, C], gm: {dt}[C], bt: {dt}[C]) -> (s: {dt}[R, C], l: {dt}[R, C], a: f32[R], m: {dt}[C], n: f32[R]) {{\n\
         s = softmax(x * 3)\n    l = layernorm(x, gm, bt, eps=1e-5)\n\
         a = sum(cast(x, f32), axes=[1])\n    m = max(x, axes=[0])\n    n = mean(cast(x, f32), axes=[1])\n\
         return s, l, a, m, n\n}}\n"
    )
}

#[test]
fn integers_bools_and_bf16() {
    let g = load(&mixed_src());
    check(&g, &[("R", 3), ("C", 5)], 1e-6);
    check(&g, &[("R", 2), ("C", 37)], 1e-6);
}

/// The graph-layer ops of `004` §4 (`sign`, `clamp`, `pow`, `batch_norm`,
/// `instance_norm`) in the emulator against the interpreter, at odd sizes
/// and sizes of one.
#[test]
fn graph_layer_ops_emulate() {
    let g = load(
        "graph<N, C, H, W> ops(x: f32[N, C, H, W], e: f32[N, C, H, W], s: f32[C], b: f32[C], m: f32[C], v: f32[C]) -> (a: f32[N, C, H, W], y: f32[N, C, H, W], q: f32[N, C, H, W], n: f32[N, C, H, W]) {\n\
         a = sign(x) + clamp(x, min=-0.5, max=0.25) + pow(abs(x) + 0.5, e)\n\
         y = pow(x, 3) - pow(x, -2)\n\
         q = batch_norm(x, s, b, m, abs(v) + 0.1, eps=1e-3)\n\
         n = instance_norm(x, s, b)\n    return a, y, q, n\n}\n",
    );
    for dims in [[2, 3, 5, 7], [1, 2, 1, 3]] {
        let named: Vec<(&str, i64)> = ["N", "C", "H", "W"].into_iter().zip(dims).collect();
        check(&g, &named, 1e-4);
    }
    let g = load(
        "graph<N> mv(x: f32[N, 4]) -> (a: f32[2, N, 12], b: f32[N, 8], c: f32[N, 4]) {\n\
         a = tile(x, [2, 1, 3]) + 1\n\
         b = repeat_interleave(x, 2, 1) * 2\n\
         c = squeeze(unsqueeze(x, [0, -1]), [0, 3])\n    return a, b, c\n}\n",
    );
    for n in [3, 1] {
        check(&g, &[("N", n)], 1e-6);
    }
    let g = load(
        "graph<N> cs(x: f32[N, 3], y: f32[N, 2]) -> (c: f32[N, 8], r: f32[N, 3]) {\n\
         c = concat([x, y, x], axis=1) * 2\n\
         (a, b) = split(x, [1, 2], axis=1)\n\
         r = concat([b, a + 1], axis=1)\n    return c, r\n}\n",
    );
    for n in [3, 1] {
        check(&g, &[("N", n)], 1e-6);
    }
}

/// The sliding-window ops in 1-D and 3-D, transposed convolutions, pools,
/// `im2col`/`col2im`/`unfold`, `reflect`/`edge` padding and `chunk` (`004`
/// §3–§4) in the emulator
/// against the interpreter, at a symbolic batch (odd and one).
#[test]
fn nd_windows_border_pads_and_chunks_emulate() {
    let g = load(
        "graph<N> nd(x: f32[N, 4, 9], v: f32[N, 2, 4, 5, 3], w: f32[6, 2, 3], u: f32[4, 3, 2], k: f32[2, 1, 2, 3, 2], r: f32[N, 3, 4]) -> (a: f32[N, 6, 5], t: f32[N, 6, 18], p: f32[N, 4, 5], q: f32[N, 2, 2, 3, 2], c: f32[N, 2, 3, 8, 4], e: f32[N, 7, 7], h: f32[N, 3, 2], f: f32[N, 4, 9], s: f32[N, 4, 4, 3]) {\n\
         a = maxpool1d(conv1d(x, w, pad=[1, 0], dilation=2, groups=2), kernel=2, stride=1)\n\
         t = conv_transpose1d(x, u, stride=2, pad=[1, 0], output_padding=1, groups=2)\n\
         p = avgpool1d(x, kernel=3, stride=2, pad=1)\n\
         q = maxpool3d(v, kernel=[2, 2, 2], pad=[0, 1, 1, 0, 0, 1]) + avgpool3d(v, kernel=[2, 2, 2], pad=[0, 1, 1, 0, 0, 1], count_include_pad=true)\n\
         c = conv_transpose3d(v, k, stride=[1, 2, 1], pad=[1, 1, 2, 1, 0, 0], groups=2)\n\
         e = pad(r, [[0, 0], [2, 2], [1, 2]], mode=reflect) + pad(r, [[0, 0], [1, 3], [2, 1]], mode=edge)\n\
         (h0, h1) = chunk(r, 2, axis=2)\n    h = h0 * h1\n\
         f = col2im(im2col(x, kernel=[3], stride=2, pad=1), output=[9], kernel=[3], stride=2, pad=1)\n\
         s = unfold(x, 2, 3, 2) * 2\n\
         return a, t, p, q, c, e, h, f, s\n}\n",
    );
    for n in [3, 1] {
        check(&g, &[("N", n)], 1e-5);
    }
}

/// `gather` and `take` (`GATHER`, a read at a data-dependent position) in
/// the emulator against the interpreter, at symbolic sizes, with indices
/// inside and outside the range: fused into element-wise consumers and a
/// row reduction, and feeding a matmul (an embedding lookup, then a
/// projection), and from a transposed table (copied to its own row-major
/// buffer first).
#[test]
fn gathers_emulate() {
    let g = load(
        "graph<V, N> gt(table: f32[V, 6], ids: i32[N], x: f32[N, 6], i: i32[N, 6], w: f32[6, 5]) -> (e: f32[N, 6], s: f32[N], g: f32[N, 6], p: f32[N, 5], c: f32[N, V]) {\n\
         e = take(table, ids, 0) + x\n\
         c = take(transpose(table, 0, 1), ids, 0)\n\
         s = sum(take(table, ids, 0) * x, axes=[1])\n\
         g = gather(x, 1, i) * 2\n\
         p = matmul(take(table, ids, 0), w)\n    return e, s, g, p, c\n}\n",
    );
    let mut last = None;
    for (v, n) in [(5, 7), (1, 1), (40, 3)] {
        last = Some(check(&g, &[("V", v), ("N", n)], 1e-5));
    }
    // The printed CUDA (`tgc_gather_at`) compiles to sm_80 without spills.
    let prog = last.unwrap();
    assert!(prog.launches.iter().any(|l| l.kernel.to_string().contains("gather.")), "no gather in the kernels");
    compiles(&Toolchain::locate().unwrap(), &prog);
}

/// The cumulative ops (`SCAN`, [`Form::Scan`], [`Builder::block_scan`])
/// in the emulator against the interpreter: every op, exclusive and
/// reverse, along the first, a middle and the last axis, with a fused
/// producer, in f32, f16 and i32. A symbolic row takes three passes (tile
/// totals, their scan, the tiles from their carries); with tiles of 128
/// points (two warps of 64) they are exercised at rows shorter than a
/// chunk, of several chunks, of one tile and of several tiles with a
/// partial last one, and with tiles of one warp of 32 at a row of 65 tiles,
/// whose totals the carry pass scans in three tiles. The real tiles
/// ([`SCAN_TILES`], 4096 points, too slow to emulate at that length) are
/// emulated on constant rows of one tile: several rows a block (40
/// points, a warp each) and two warps a row (1000 points), and compiled.
#[test]
fn cumulative_ops_emulate() {
    let g = load(
        "graph<M, N> cum(x: f32[M, N], h: f16[M, N], i: i32[M, 3, N]) -> (s: f32[M, N], p: f32[M, N], mx: f32[M, N], mn: f16[M, N], si: i32[M, 3, N]) {\n\
         s = cumsum(x * x, 1)\n\
         p = cumprod(x, 0, reverse=true)\n\
         mx = cummax(x, -1, exclusive=true)\n\
         mn = cummin(h, 1, reverse=true, exclusive=true)\n\
         si = cumsum(i, 1)\n    return s, p, mx, mn, si\n}\n",
    );
    let small = ScanTiles { warps: 2, segment: 64 };
    let prog = lower_regions(&g, None, small, &mut Vec::new()).unwrap_or_else(|e| panic!("{e}"));
    // Three passes for each of the four scans along a symbolic axis, one
    // for `si`'s along its axis of 3.
    assert_eq!(forms(&prog).iter().filter(|&&f| f == Form::Scan).count(), 4 * 3 + 1, "{:?}", forms(&prog));
    for (m, n) in [(3, 5), (1, 1), (2, 70), (1, small.tile()), (2, 2 * small.tile() + 37)] {
        check_program(&g, prog.clone(), &[("M", m), ("N", n)], 2e-3);
    }
    let tiny = ScanTiles { warps: 1, segment: 32 };
    let prog = lower_regions(&g, None, tiny, &mut Vec::new()).unwrap_or_else(|e| panic!("{e}"));
    check_program(&g, prog, &[("M", 1), ("N", 2 * tiny.tile() * tiny.tile() + 5)], 2e-3);
    compiles(&Toolchain::locate().unwrap(), &lower_program(&g).unwrap());
    let short = load(
        "graph short(x: f32[11, 40], y: f32[3, 1000]) -> (s: f32[11, 40], t: f32[3, 1000]) {\n\
         s = cumsum(x, -1, reverse=true)\n    t = cumsum(y, 1, exclusive=true)\n    return s, t\n}\n",
    );
    let prog = check(&short, &[], 1e-4);
    assert_eq!(forms(&prog), [Form::Scan, Form::Scan]);
    // The printed CUDA (`shfl.sync.up`, `shfl.sync.idx`, the warp totals in
    // shared memory) compiles to sm_80 without spills.
    compiles(&Toolchain::locate().unwrap(), &prog);
    // With the tensor-core templates: the GEMM's region on the MMA
    // template, the scan of its result on the warp scans.
    let mixed = load(
        "graph mixed(a: f16[64, 32], b: f16[32, 48]) -> (y: f32[64, 48]) {\n    y = cumsum(cast(matmul(a, b), f32), -1)\n    return y\n}\n",
    );
    let prog = lower_program_for(&mixed, Some(&crate::plan::target::SM80)).unwrap_or_else(|e| panic!("{e}"));
    assert!(forms(&prog).contains(&Form::Gemm) && forms(&prog).contains(&Form::Scan), "{:?}", forms(&prog));
    check_program(&mixed, prog, &[], 1e-2);
}

#[test]
fn softmax_layernorm_sum_max_mean() {
    for (dt, tol) in [("f32", 2e-5), ("f16", 3e-3)] {
        let g = load(&reductions_src(dt));
        // Rows longer than a warp (tails in the lane loop) and shorter.
        // 3 × 45 elements: the vectorised exp kernel of the softmax has a tail of 3.
        let p = check(&g, &[("R", 3), ("C", 45)], tol);
        // The softmax and the layernorm run in a row group, one kernel;
        // the column max (axis 0) is a warp per column.
        let f = forms(&p);
        assert!(f.contains(&Form::WarpReduce) && f.contains(&Form::Rows), "{f:?}");
        for l in p.launches.iter().filter(|l| l.form == Form::Rows) {
            assert!(l.outs.len() >= 3, "{}: {:?}", l.kernel.name, l.outs);
            assert_eq!(l.kernel.to_string().matches("bar.sync").count(), l.outs.len(), "{}", l.kernel);
        }
        check(&g, &[("R", 5), ("C", 7)], tol);
        check(&g, &[("R", 70), ("C", 33)], tol);
    }
}

/// With concrete sizes the row form holds its local rows in registers
/// (no temporary is a parameter, nothing in shared memory with one warp a
/// row) and matches the interpreter with rows shorter than a warp, with a
/// ragged last group of a lane's points (45, 300) and over several warps a
/// row (2100 points: four warps, their reduction totals in shared memory
/// between `bar.sync`s); on one block, the grid-stride loop visits every
/// row.
#[test]
fn the_row_form_keeps_local_rows_in_registers() {
    let softmax = load("graph<R, C> s(x: f16[R, C]) -> (y: f16[R, C]) {\n    y = softmax(x * 3)\n    return y\n}\n");
    let layernorm = load(
        "graph<R, C> l(x: bf16[R, C], g: bf16[C], b: bf16[C]) -> (y: bf16[R, C]) {\n    \
         y = layernorm(x, g, b, eps=1e-5)\n    return y\n}\n",
    );
    for ((r, c), g) in [(3, 45), (5, 7), (2, 300), (2, 2100)].into_iter().flat_map(|d| [(d, &softmax), (d, &layernorm)])
    {
        let bound = g.bind(&BTreeMap::from([("R".to_string(), r), ("C".to_string(), c)])).unwrap();
        let mut p = lower_program(&bound).unwrap();
        // One row kernel (a layernorm's element count is computed before
        // it), which writes no temporary to global memory; the program
        // keeps no row temporary for the runtime to allocate, only the
        // scalars a kernel before the rows computes.
        let rows: Vec<&Launch> = p.launches.iter().filter(|l| l.form == Form::Rows).collect();
        assert_eq!(rows.len(), 1, "{:?}", forms(&p));
        let temps: Vec<&Buffer> = p.buffers.iter().filter(|b| b.role == Role::Temp).collect();
        assert!(temps.iter().all(|b| b.shape.is_empty()), "{temps:?}");
        assert_eq!(p.steps(&[]).unwrap().temps, temps.iter().map(|b| b.dtype.size_bytes()).collect::<Vec<_>>());
        for l in &rows {
            let text = l.kernel.to_string();
            let warps = l.kernel.block[1];
            if c > 32 * ROWS_REG_POINTS {
                assert_eq!(warps, 4, "{text}");
                assert!(text.contains("bar.sync") && l.kernel.smem_bytes == 16, "{text}");
            } else {
                assert_eq!(warps, ROWS_REG_BLOCK, "{text}");
                assert!(l.kernel.smem.is_empty() && !text.contains("bar.sync"), "{text}");
            }
        }
        let tol = if r == 2 { 1e-2 } else { 3e-3 };
        p = check_program(&bound, p, &[], tol);
        for l in p.launches.iter_mut().filter(|l| l.form == Form::Rows) {
            l.kernel.grid[0] = Expr::c(1);
            let Some(Stmt::Let { value, .. }) = l.kernel.body.first_mut() else { panic!("no nblocks") };
            *value = Expr::c(1);
        }
        check_program(&bound, p, &[], tol);
    }
}

/// A row group whose local rows do not fit the registers
/// ([`ROWS_REG_SLOTS`]: here three rows of 1024 floats, 96 a lane) keeps
/// them in shared memory when they fit [`ROWS_SMEM_MAX`] (12 KiB), and
/// matches the interpreter.
#[test]
fn rows_past_the_registers_live_in_shared_memory() {
    let g = load(
        "graph t(x: f32[3, 1024]) -> (y: f32[3, 1024]) {\n    \
         a = softmax(x)\n    y = softmax(x * a)\n    return y\n}\n",
    );
    let p = check(&g, &[], 1e-5);
    let rows: Vec<&Launch> = p.launches.iter().filter(|l| l.form == Form::Rows).collect();
    assert_eq!(rows.len(), 1, "{:?}", forms(&p));
    let text = rows[0].kernel.to_string();
    assert!(rows[0].kernel.smem_bytes > 8 * 1024 && rows[0].kernel.smem_bytes <= ROWS_SMEM_MAX, "{text}");
    assert!(text.contains("st.shared.v4") && text.contains("ld.shared.v4"), "{text}");
}

/// A row group of element-wise steps only (GELU's, whose erf steps are
/// stored: several readers each) takes the row form with at least
/// `ROWS_MIN_ELEMENTWISE` rows; over fewer, long rows (MiniLM's
/// `[1, 128, 1536]` at batch 1: one row, one warp) its kernels run as
/// element-wise kernels over all their points. Both like the interpreter.
#[test]
fn few_long_rows_of_elementwise_steps_run_as_elementwise_kernels() {
    let gelu = |rows: usize| {
        format!("graph g(x: f32[{rows}, 4, 40]) -> (y: f32[{rows}, 4, 40]) {{\n    y = gelu(x)\n    return y\n}}\n")
    };
    let few = check(&load(&gelu(2)), &[], 1e-5);
    assert!(forms(&few).iter().all(|&f| f == Form::Elementwise), "{:?}", forms(&few));
    assert!(forms(&few).len() > 1, "{:?}", forms(&few));
    let many = check(&load(&gelu(ROWS_MIN_ELEMENTWISE as usize)), &[], 1e-5);
    assert_eq!(forms(&many), [Form::Rows]);
}

/// Rows whose length is a multiple of `VEC`: every member of the row form
/// reads and writes its row `VEC` elements at a time (`ld.global.v4`,
/// `st.global.v4`), its local rows in registers, equal to the
/// interpreter; over 8192 points a row is eight warps, their reductions'
/// totals meeting in shared memory. The kernels compile without spills.
#[test]
fn rows_of_a_multiple_of_vec_move_vec_elements_at_a_time() {
    let tc = Toolchain::locate().unwrap_or_else(|e| panic!("the CUDA toolchain of scripts/setup.sh: {e}"));
    let softmax = "graph s(x: f16[5, 72]) -> (y: f16[5, 72]) {\n    y = softmax(x * 3)\n    return y\n}\n";
    let layernorm = "graph l(x: bf16[3, 264], g: bf16[264], b: bf16[264]) -> (y: bf16[3, 264]) {\n    y = \
                     layernorm(x, g, b, eps=1e-5)\n    return y\n}\n";
    let long = "graph s(x: f32[2, 8192]) -> (y: f32[2, 8192]) {\n    y = softmax(x)\n    return y\n}\n";
    for (src, tol, warps) in [(softmax, 3e-3, 1), (layernorm, 1e-2, 1), (long, 1e-5, 8)] {
        let g = load(src);
        let p = check(&g, &[], tol);
        let rows: Vec<&Launch> = p.launches.iter().filter(|l| l.form == Form::Rows).collect();
        assert_eq!(rows.len(), 1, "{:?}", forms(&p));
        let text = rows[0].kernel.to_string();
        let wants: &[&str] = if warps > 1 {
            assert_eq!(rows[0].kernel.block[1], warps);
            &["ld.global.v4", "st.global.v4", "st.shared.v1", "ld.shared.v1", "bar.sync"]
        } else {
            assert!(!text.contains(".shared"), "{text}");
            &["ld.global.v4", "st.global.v4"]
        };
        for want in wants {
            assert!(text.contains(want), "no {want} in\n{text}");
        }
        // Scalar stores are the reductions' one value per row only.
        let scalar_row_store = text.lines().any(|l| l.contains("st.global.f") && l.contains(" + "));
        assert!(!scalar_row_store, "a scalar store of row elements in\n{text}");
        compiles(&tc, &p);
    }
}

#[test]
fn naive_attention_and_conv_relu_pool() {
    let att = example("attention.tgc");
    let p = check(&att, &[("B", 1), ("H", 2), ("M", 5), ("N", 33), ("D", 3)], 2e-5);
    assert!(forms(&p).contains(&Form::Serial) || forms(&p).contains(&Form::WarpReduce));
    let conv = example("conv_relu_pool.tgc");
    check(&conv, &[("N", 1)], 2e-5);
    let att16 = load(
        "graph<B=1, H=2, M=5, N=33, D=8> att(q: f16[B, H, M, D], k: f16[B, H, N, D], v: f16[B, H, N, D]) -> (o: f16[B, H, M, D]) {\n\
         o = attention(q, k, v, causal=true)\n    return o\n}\n",
    );
    check(&att16, &[("B", 1), ("H", 2), ("M", 5), ("N", 33), ("D", 8)], 4e-3);
}

fn ffn_src(dt: &str) -> String {
    format!(
        "graph<T=3, E=6, F=10> ffn(x: {dt}[T, E], w1: {dt}[E, F], b1: {dt}[F], w2: {dt}[F, E], b2: {dt}[E]) -> (y: {dt}[T, E]) {{\n\
         h = gelu(matmul(x, w1) + b1)\n    y = matmul(h, w2) + b2\n    return y\n}}\n"
    )
}

#[test]
fn transformer_ffn() {
    for (dt, tol) in [("f32", 2e-5), ("f16", 4e-3)] {
        let g = load(&ffn_src(dt));
        check(&g, &[("T", 3), ("E", 6), ("F", 10)], tol);
        check(&g, &[("T", 2), ("E", 5), ("F", 40)], tol);
    }
}

/// With a target, a bound GEMM + bias + ReLU graph is one sm80
/// tensor-core launch (emulated, equal to the interpreter on inputs that
/// make every result exact); unbound, or without a target, it is SIMT
/// kernels.
#[test]
fn a_gemm_graph_takes_the_sm80_template_when_asked() {
    let g = example("gemm_bias_relu.tgc");
    let bound: BTreeMap<String, i64> =
        [("M", 40), ("N", 24), ("K", 32)].iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let bg = g.bind(&bound).unwrap();
    let p = lower_program_for(&bg, Some(&crate::plan::target::SM80)).unwrap();
    assert_eq!(forms(&p), [Form::Gemm]);
    // Multiples of 1/8 in [-1/2, 1/2] for x and w, of 1/8 in [-1, 1] for the
    // bias: each product is a multiple of 1/64 of magnitude at most 1/4, so
    // every partial sum of the K = 32 steps, in any order, is a multiple of
    // 1/64 below 8 in magnitude and the biased sum one below 9: at most
    // 9 · 64 = 576 < 2^11 units of 1/64, exact in f16's 11-bit significand
    // (and in f32). The tensor cores' f32 accumulation, the f16 rounding of
    // the product and the epilogue then round nothing, and the emulated
    // kernel must give the interpreter's values exactly (stricter than
    // 1e-3: an f16 step at magnitude 1 is 2^-10, inside 1e-3).
    let eighths = |seed: usize, n: usize, span: usize| -> Vec<f64> {
        (0..n).map(|i| ((i * 7 + seed) % (2 * span + 1)) as f64 / 8.0 - span as f64 / 8.0).collect()
    };
    let mut inputs = Vec::new();
    let mut tensors = Vec::new();
    for (k, id) in bg.inputs().into_iter().enumerate() {
        let shape: Vec<usize> = bg.shape(id).iter().map(|d| d.as_int().unwrap() as usize).collect();
        let n = shape.iter().product();
        let span = if k == 2 { 8 } else { 4 };
        let t = interp::Tensor::new(bg.dtype(id), &shape, eighths(3 * k + 1, n, span)).unwrap();
        inputs.push(t.data.clone());
        tensors.push(t);
    }
    let want = interp::run(&bg, &BTreeMap::new(), &tensors).unwrap().remove(0);
    let got = emulate(&p, &[], &inputs).unwrap().remove(0);
    assert!(want.data.iter().any(|v| *v > 1.0), "the inputs give large sums: {:?}", &want.data[..8]);
    for (at, (a, b)) in got.iter().zip(&want.data).enumerate() {
        assert_eq!(a, b, "y[{at}]");
    }
    assert!(lower_program_for(&g, Some(&crate::plan::target::SM80))
        .unwrap()
        .launches
        .iter()
        .all(|l| l.form != Form::Gemm));
    assert!(forms(&lower_program_for(&bg, None).unwrap()).iter().all(|f| *f != Form::Gemm));
}

#[test]
fn warp_shuffles_under_lane_divergent_control_are_rejected() {
    let g = load(&reductions_src("f32"));
    let p = lower_program(&g).unwrap();
    let l = p.launches.iter().find(|l| l.form == Form::WarpReduce).unwrap();
    let mut k = l.kernel.clone();
    let shfl = Stmt::Simt(SimtStmt::ShflBfly {
        op: crate::tiny::ReduceOp::Sum,
        dtype: DType::F32,
        acc: RegRef { reg: RegId(0), index: Expr::c(0) },
        lane_mask: 1,
    });
    k.body = vec![Stmt::If { cond: Expr::ThreadIdx(Dim::X).lt(Expr::c(3)), then: vec![shfl], otherwise: Vec::new() }];
    let errs = verify::verify(&k).unwrap_err();
    assert!(errs.iter().any(|e| e.fault == Fault::Divergence), "{errs:?}");
    let mut args: Vec<Arg> = k
        .params
        .iter()
        .map(|p| match p.kind {
            ParamKind::Ptr { dtype, .. } => Arg::tensor(dtype, &[0.0; 64]),
            _ => Arg::Int(2),
        })
        .collect();
    let e = emulate::run(&k, &mut args).unwrap_err();
    assert_eq!(e.fault, Fault::Divergence, "{e}");
    // An f32 value into an i32 register is refused by both.
    let bad = Stmt::Simt(SimtStmt::Compute {
        dst: RegRef { reg: RegId(0), index: Expr::c(0) },
        value: ScalarExpr::Const { value: 1.0, dtype: DType::I32 },
    });
    k.body = vec![bad];
    let errs = verify::verify(&k).unwrap_err();
    assert!(errs.iter().any(|e| e.fault == Fault::FragmentShape && e.stmt == Some(0)), "{errs:?}");
    assert_eq!(emulate::run(&k, &mut args).unwrap_err().fault, Fault::FragmentShape);
}

/// The grid-stride loop: the element-wise kernels rewritten to one block
/// (as if `MAX_BLOCKS` were 1) visit every element exactly once over
/// several iterations.
#[test]
fn one_block_strides_over_the_whole_output() {
    let g = load(&elementwise_src("f32"));
    let mut p = lower_program(&g).unwrap();
    for l in &mut p.launches {
        l.kernel.grid[0] = Expr::c(1);
        let Some(Stmt::Let { value, .. }) = l.kernel.body.first_mut() else { panic!("no nblocks") };
        *value = Expr::c(1);
    }
    // 300 × 4 outputs: 300 groups of 4, two iterations of 256 threads.
    check_program(&g, p, &[("R", 300), ("C", 3)], 1e-6);
}

#[test]
fn launch_geometry_is_over_the_dims() {
    let g = load(&reductions_src("f32"));
    let p = lower_program(&g).unwrap();
    assert_eq!(p.symbols, ["R", "C"]);
    let dims = [1000, 45];
    for l in &p.launches {
        let grid = l.grid(&dims).unwrap();
        match l.form {
            Form::Rows => {
                // One warp per row, one block per row.
                assert_eq!((l.block(), grid[0]), ([32, 1, 1], 1000));
            }
            Form::WarpReduce => {
                assert_eq!(l.block(), [32, WARPS, 1]);
                // One warp per output element: 1000 rows (softmax, layernorm, sum, mean), 45 columns (max over
                // axis 0) or one (the element count of a mean).
                assert!([250, 12, 1].contains(&grid[0]), "{grid:?}");
            }
            _ => {
                assert_eq!(l.block(), [THREADS, 1, 1]);
                assert!(grid[0] >= 1 && grid[0] <= MAX_BLOCKS);
            }
        }
    }
    let text = p.launches[0].kernel.to_string();
    assert!(text.contains("st.global"), "{text}");
    p.check_dims(&dims).unwrap();
    assert!(p.check_dims(&[0, 45]).is_err(), "R = 0 breaks `R >= 1`");
}

#[test]
fn every_graph_compiles_to_sm80_without_spills() {
    let tc = Toolchain::locate().unwrap();
    let graphs = [
        load(&elementwise_src("f16")),
        load(&mixed_src()),
        load("graph<R=3> rows(x: f16[R, 12], b: f16[12]) -> (y: f16[R, 12]) {\n    y = relu(x * 2 + b)\n    return y\n}\n"),
        load(&reductions_src("f32")),
        load(&reductions_src("f16")),
        example("attention.tgc"),
        load(&ffn_src("f16")),
        example("conv_relu_pool.tgc"),
    ];
    for g in &graphs {
        compiles(&tc, &lower_program(g).unwrap());
    }
    let src = cuda::print_unit(&lower_program(&graphs[1]).unwrap().kernels()).unwrap();
    assert!(src.contains("shfl.sync.bfly.b32 %0, %1, 16, 0x1f, 0xffffffff;"), "{src}");
}

/// A reduction computed at its reads (`ComputeAt`, from Poly Core fusion,
/// feature `poly`) under a guard, built as loop-nest IR: `out[i0] = Σ_i1
/// (i1 ≥ 1 ? x[i0, i1] − max_i2 x[i0, i2] : 0)`, the max recomputed per
/// point where the guard holds. The serial form runs it; the result is
/// checked against the same sum in f64.
#[test]
fn a_computed_at_reduce_under_its_guard_runs_serially() {
    use crate::cpu::loop_ir::{Buffer, Expr as L, Kernel as LKernel, Program, Reduction};
    use crate::index_book::Constr;
    use crate::sym::Dim as D;
    use crate::tiny::ReduceOp;
    let c = D::sym("C");
    let at = |k: u32| &AffExpr::var(0).scale(&c) + &AffExpr::var(k);
    let load = |k: u32| L::Load { buf: BufId(0), index: at(k), dtype: DType::F32 };
    let guard = vec![Constr::ge0(&AffExpr::var(1) - &AffExpr::int(1))];
    let max = L::Reduce {
        id: 0,
        node: NodeId(1),
        op: ReduceOp::Max,
        dtype: DType::F32,
        first: 2,
        loops: vec![c.clone()],
        guard: guard.clone(),
        value: Box::new(load(2)),
    };
    let diff = L::Binary { op: crate::tiny::BinaryOp::Sub, a: Box::new(load(1)), b: Box::new(max) };
    let value = L::Select {
        valid: guard,
        then: Box::new(diff),
        otherwise: Box::new(L::Const { value: 0.0, dtype: DType::F32 }),
    };
    let k = LKernel {
        name: "k0".into(),
        nodes: vec![NodeId(2)],
        loops: vec![D::sym("R")],
        reduce: Some(Reduction {
            node: NodeId(2),
            op: ReduceOp::Sum,
            dtype: DType::F32,
            loops: vec![c.clone()],
            value,
        }),
        scan: None,
        out: BufId(1),
        store_index: AffExpr::var(0),
        value: L::Acc { dtype: DType::F32 },
        strips: Vec::new(),
        packed: None,
        lanes: 1,
    };
    let buf = |name: &str, shape: Vec<D>, role| Buffer {
        name: name.into(),
        label: name.into(),
        dtype: DType::F32,
        shape,
        role,
    };
    let p = Program {
        name: "computed_at".into(),
        symbols: vec!["R".into(), "C".into()],
        tiles: Vec::new(),
        checks: Vec::new(),
        buffers: vec![
            buf("in0", vec![D::sym("R"), c.clone()], Role::Input(0)),
            buf("out0", vec![D::sym("R")], Role::Output(0)),
        ],
        kernels: vec![k],
        rows: Vec::new(),
    };
    assert_eq!(form_of(&p.kernels[0]), Form::Serial);
    let launch = lower_kernel(&p, &p.kernels[0]).unwrap();
    verify::verify(&launch.kernel).unwrap_or_else(|e| panic!("{e:?}\n{}", launch.kernel));
    let text = launch.kernel.to_string();
    assert!(text.contains("r0[0] = max.f32(r0[0]"), "{text}");
    let prog = GpuProgram {
        name: p.name.clone(),
        symbols: p.symbols.clone(),
        checks: Vec::new(),
        buffers: p.buffers.clone(),
        launches: vec![launch],
    };
    let (r, cn) = (37usize, 9usize);
    let x = tgc_runtime::tensor::sample_values(3, r * cn).into_iter().map(|v| v as f32 as f64).collect::<Vec<_>>();
    let got = emulate(&prog, &[r as i64, cn as i64], std::slice::from_ref(&x)).unwrap().remove(0);
    for i in 0..r {
        let row = &x[i * cn..(i + 1) * cn];
        let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let want: f64 = row[1..].iter().map(|v| v - m).sum();
        assert!((got[i] - want).abs() <= 1e-5 * want.abs().max(1.0), "row {i}: {} vs {want}", got[i]);
    }
    compiles(&Toolchain::locate().unwrap(), &prog);
}

/// `LdGlobalVec` (not generated by the template yet) on a hand-built
/// kernel: 4-wide loads of f32, f16 and i32, doubled and stored, emulated,
/// refused when misaligned, and compiled to 128/64-bit SASS loads.
#[test]
fn vector_loads_emulate_and_compile() {
    let tc = Toolchain::locate().unwrap();
    for (dt, sass) in [(DType::F32, "LDG.E.128"), (DType::F16, "LDG.E.64"), (DType::I32, "LDG.E.128")] {
        let mut k = dialect::Kernel::empty(&format!("vec_{}", dt.dsl_name()), Arch::Sm80);
        k.params.push(Param { name: "x".into(), kind: ParamKind::Ptr { dtype: dt, writable: false } });
        k.params.push(Param { name: "y".into(), kind: ParamKind::Ptr { dtype: dt, writable: true } });
        k.params.push(Param { name: "shift".into(), kind: ParamKind::I64 });
        k.regs.push(RegArray { name: "v".into(), kind: compute_kind(dt), len: 4 });
        let r = |i: i64| RegRef { reg: RegId(0), index: Expr::c(i) };
        let tid = Expr::ThreadIdx(Dim::X);
        let live = tid.clone().lt(Expr::c(8));
        let mut body = vec![Stmt::Simt(SimtStmt::LdGlobalVec {
            dst: (0..4).map(r).collect(),
            src: GlobalRef { param: ParamId(0), offset: tid.clone() * Expr::c(4) + Expr::Param(ParamId(2)) },
            dtype: dt,
            pred: live.clone(),
        })];
        for i in 0..4 {
            let x = ScalarExpr::Reg { reg: r(i), dtype: dt };
            let two = ScalarExpr::Binary { op: crate::tiny::BinaryOp::Add, a: Box::new(x.clone()), b: Box::new(x) };
            body.push(Stmt::Simt(SimtStmt::Compute { dst: r(i), value: two }));
            body.push(Stmt::Simt(SimtStmt::StGlobal {
                dst: GlobalRef { param: ParamId(1), offset: tid.clone() * Expr::c(4) + Expr::c(i) },
                src: r(i),
                dtype: dt,
                pred: live.clone(),
            }));
        }
        k.body = body;
        verify::verify(&k).unwrap_or_else(|e| panic!("{e:?}"));
        let xs: Vec<f64> = (0..33).map(|i| i as f64 - 7.0).collect();
        let mut args = vec![Arg::tensor(dt, &xs), Arg::tensor(dt, &[0.0; 32]), Arg::Int(0)];
        emulate::run(&k, &mut args).unwrap();
        let want: Vec<f64> = xs[..32].iter().map(|v| 2.0 * v).collect();
        assert_eq!(args[1].values(dt), want);
        args[2] = Arg::Int(1);
        assert_eq!(emulate::run(&k, &mut args).unwrap_err().fault, Fault::Misaligned);
        let (_, compiled) = cuda::compile(&tc, std::slice::from_ref(&k), &k.name).unwrap();
        let ops = crate::gpu::toolchain::sass_opcodes(&tc.sass(&compiled.cubin).unwrap());
        assert!(ops.iter().any(|o| o.starts_with(sass)), "{dt}: no {sass} in {ops:?}");
    }
}

/// `GpuProgram::steps`: the runtime's launch list at concrete dims — the
/// graph's tensors numbered inputs then outputs, one zeroed temporary per
/// `Temp` buffer with its bytes, dims passed as `long long`, grids
/// evaluated — and the dims' checks first.
#[test]
fn steps_bind_tensors_temporaries_and_dims_at_the_given_sizes() {
    use tgc_runtime::launch::StepArg;
    let g = load("graph<R, C> sm(x: f32[R, C]) -> (y: f32[R, C]) {\n    y = softmax(x, axis=-1)\n    return y\n}");
    let p = lower_program(&g).unwrap();
    let dims = [5i64, 100];
    let s = p.steps(&dims).unwrap();
    let temps: Vec<usize> = p
        .buffers
        .iter()
        .enumerate()
        .filter(|(_, b)| b.role == Role::Temp)
        .map(|(k, b)| p.elements(BufId(k as u32), &dims).unwrap() as usize * b.dtype.size_bytes())
        .collect();
    assert!(!temps.is_empty(), "softmax keeps its row max and sum between kernels");
    assert_eq!(s.temps, temps);
    assert_eq!(s.steps.len(), p.launches.len());
    for (step, l) in s.steps.iter().zip(&p.launches) {
        assert_eq!(step.kernel, l.kernel.symbol());
        assert_eq!(step.launch.grid.map(i64::from), l.grid(&dims).unwrap());
        assert_eq!(step.launch.block, l.block());
        for (arg, a) in step.args.iter().zip(&l.args) {
            match (a, arg) {
                (LaunchArg::Buffer(b), StepArg::Tensor(0)) => assert_eq!(p.buffers[b.0 as usize].role, Role::Input(0)),
                (LaunchArg::Buffer(b), StepArg::Tensor(1)) => {
                    assert_eq!(p.buffers[b.0 as usize].role, Role::Output(0))
                }
                (LaunchArg::Buffer(b), StepArg::Temp(_)) => assert_eq!(p.buffers[b.0 as usize].role, Role::Temp),
                (LaunchArg::Dim(k), StepArg::I64(v)) => assert_eq!(*v, dims[*k]),
                other => panic!("{other:?}"),
            }
        }
    }
    let e = p.steps(&[5, 0]).unwrap_err();
    assert!(e.message.contains("does not hold"), "{e}");
}

/// Launch evaluation is [`Expr::eval`]: it takes `&` and shifts (which a
/// grid may use like any other expression), and `i64::MIN / -1` is an
/// error, not a panic.
#[test]
fn launch_evaluation_has_the_irs_meaning() {
    let args = [LaunchArg::Dim(0), LaunchArg::Int(3)];
    let (d, three) = (Expr::Param(ParamId(0)), Expr::Param(ParamId(1)));
    let e = Expr::bin(BinOp::And, Expr::bin(BinOp::Shr, d.clone(), three.clone()), Expr::c(7));
    assert_eq!(eval_launch(&e, &args, &[100]).unwrap(), (100 >> 3) & 7);
    assert_eq!(eval_launch(&(d.clone() / 2 + d.clone() % 2), &args, &[-7]).unwrap(), -3 + -1);
    let err = eval_launch(&(d.clone() / -1), &args, &[i64::MIN]).unwrap_err();
    assert_eq!(err.name, crate::ErrorName::Internal, "{err}");
    assert!(err.message.ends_with("`-9223372036854775808 / -1` overflows i64"), "{err}");
    assert!(eval_launch(&Expr::ThreadIdx(Dim::X), &args, &[1]).is_err());
}

//! Region formation on whole graphs (`000` §4.1 steps 3–5, §4.2): which
//! fusions the cost model, the thresholds and the selection take, and the
//! stop reason of each one they reject, as the `region` dump prints them.

use expect_test::{expect, Expect};

use super::{form, StopReason};
use crate::index_book;
use crate::pipeline::{self, Format};

/// Forms `src`'s regions; checks the fused pairs (`local_edge` lines) and
/// the stop lines of the dump.
fn check(src: &str, want: Expect) -> super::Regions {
    let g = pipeline::load(src, Format::Dsl, None).unwrap_or_else(|d| panic!("{}", d.render("graph"))).graph;
    let r = form(&g, &index_book::build(&g).unwrap()).unwrap();
    assert!(super::verify::verify(&g, &r).is_empty());
    let dump = super::dump(&g, &r);
    let lines: Vec<&str> = dump.lines().filter(|l| l.starts_with("stop") || l.contains("local_edge")).collect();
    want.assert_eq(&(lines.join("\n") + "\n"));
    r
}

fn conv_relu_pool(x: &str, w: &str, conv: &str, pool: &str, y: &str) -> String {
    format!(
        "graph g(x: f32{x}, w: f32{w}) -> (y: f32{y}) {{\n    c = conv2d(x, w{conv})\n    r = relu(c)\n    \
         y = maxpool2d(r{pool})\n    return y\n}}\n"
    )
}

/// A 64-channel 3×3 conv under a 3×3 stride-1 pool: each conv point would
/// be recomputed ~8 times at 1152 FLOPs each; the saved 2·4 bytes per point
/// do not pay for it (§4.1 STOP ③).
#[test]
fn recompute_that_does_not_pay_is_a_cost_stop() {
    let src = conv_relu_pool(
        "[1, 64, 32, 32]",
        "[64, 64, 3, 3]",
        ", pad=[1, 1]",
        ", kernel=[3, 3], stride=[1, 1]",
        "[1, 64, 30, 30]",
    );
    let r = check(
        &src,
        expect![[r#"
            stop n10 -> y: cost: Δtime +1.326e-2 s >= 0 (benefit 5.343e-5 s, cost 1.331e-2 s, recompute x7.91)
        "#]],
    );
    assert!(matches!(r.stops[0].reason, StopReason::Cost { delta, .. } if delta > 0.0));
}

/// A 128×128 pool window over a 1×1 conv: no recompute, but one consumer
/// point needs a 64 KiB box, over 80% of the CPU row's 32 KiB (§4.2).
#[test]
fn a_window_over_the_local_budget_is_a_threshold_stop() {
    let src = conv_relu_pool(
        "[1, 1, 128, 128]",
        "[1, 1, 1, 1]",
        "",
        ", kernel=[128, 128], stride=[128, 128]",
        "[1, 1, 1, 1]",
    );
    check(
        &src,
        expect![[r#"
            stop n9 -> y: threshold: local buffer 65536 bytes > 26214 (80% of cpu's per-kernel fast memory)
        "#]],
    );
}

/// conv → pool → conv → pool with one channel: all three edges pay, but
/// they form one conflict window (a chain: one compute-at level, one
/// producer per region). The exact choice takes the two outer fusions
/// (more saved than the middle one alone).
#[test]
fn the_exact_choice_takes_the_better_conflict_free_set() {
    let src = "graph g(x: f32[1, 1, 16, 16], w1: f32[1, 1, 3, 3], w2: f32[1, 1, 3, 3]) -> (y: f32[1, 1, 4, 4]) {\n    \
               c1 = conv2d(x, w1, pad=[1, 1])\n    p1 = maxpool2d(c1, kernel=[2, 2], stride=[2, 2])\n    \
               c2 = conv2d(p1, w2, pad=[1, 1])\n    y = maxpool2d(c2, kernel=[2, 2], stride=[2, 2])\n    return y\n}\n";
    check(
        src,
        expect![[r#"
              local_edge n11 -> p1: reg 16 bytes, halo [(0, 0), (0, 0), (0, 0), (0, 0), (0, 0)] box 16 bytes
              local_edge n23 -> y: reg 16 bytes, halo [(0, 0), (0, 0), (0, 0), (0, 0), (0, 0)] box 16 bytes
            stop p1 -> n23: not chosen: the exact choice over a window of 4 nodes
        "#]],
    );
}

/// A pool with a symbolic stride is outside the SCoP: a region boundary
/// (§4.1 step 1), whatever the cost.
#[test]
fn a_non_scop_block_is_a_region_boundary() {
    let src = "graph<S=2> g(x: f32[1, 1, 16, 16], w: f32[1, 1, 3, 3]) -> (y: f32[1, 1, 8, 8]) {\n    \
               c = conv2d(x, w, pad=[1, 1])\n    y = maxpool2d(c, kernel=[2, 2], stride=[S, S])\n    return y\n}\n";
    check(
        src,
        expect![[r#"
            stop n10 -> y: non_scop: block n12 is outside the SCoP (a region boundary)
        "#]],
    );
}

/// A `GATHER` of a view (`004`'s automatic contiguous copy): the
/// transposed table is stored by a region of its own, in the layout the
/// gather reads, and the gather's region reads that buffer.
#[test]
fn a_gathered_view_is_copied_to_its_own_buffer() {
    let src = "graph<N> t(table: f32[4, 10], ids: i32[N]) -> (y: f32[N, 4]) {\n    y = take(transpose(table, 0, 1), ids, 0) * 2\n    return y\n}";
    let g = crate::pipeline::load(src, crate::pipeline::Format::Dsl, None).unwrap().graph;
    let front = super::front(&g, true, super::Grouping::default()).unwrap();
    let regions = &front.regions.regions;
    assert_eq!(regions.len(), 2);
    let copy = &regions[0];
    assert!(copy.body.iter().all(|m| g.node(m.node).op.is_movement()), "{copy:?}");
    let gather = g.ids().find(|&id| matches!(g.node(id).op, crate::tiny::Op::Gather { .. })).unwrap();
    assert!(regions[1].body.iter().any(|m| m.node == gather));
    assert!(regions[1].inputs.iter().any(|i| i.node == g.node(gather).src[0]));
}

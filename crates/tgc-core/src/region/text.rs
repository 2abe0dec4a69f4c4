//! The `region` dump: the regions in execution order, then the fusions
//! region formation rejected. A local edge shows its buffer and, with
//! feature `poly`, Poly Core's `can_compute_at` answer for one consumer
//! point (the tile region formation asks about): the halo per producer axis
//! and the bytes of the needed box.
//!
//! ```text
//! regions conv_relu_pool (grouping + poly core)
//! region r0 -> y
//!   in  x: fp32[N, 3, 32, 32] strides=[3072, 1024, 32, 1] align=4 noalias
//!   let n11 = REDUCE(n10)  deferred compute_at
//!   let y = REDUCE(n17)  gmem accumulate
//!   yield y -> output 0 fp32[N, 8, 16, 16] strides=[2048, 256, 16, 1] align=4 noalias
//!   local_edge n11 -> y: reg 16 bytes, halo [(0, 0), (0, 0), (0, 0), (0, 0), (0, 0)] box 16 bytes
//! stop n11 -> y: can_compute_at: …
//! ```

use std::fmt::Write;

use crate::tiny::{infer::fmt_shape, Graph};

use super::{Dest, EdgeBuffer, Former, How, LocalEdge, Materialize, MemRef, Regions, StopReason};

/// Renders the regions as text (the `--dump region` stage).
pub fn dump(g: &Graph, rs: &Regions) -> String {
    let label = |v: crate::tiny::NodeId| g.node(v).label.clone();
    let memref = |m: &MemRef, v| {
        let strides: Vec<String> = m.strides.iter().map(|d| d.to_string()).collect();
        let alias = if m.noalias { " noalias" } else { "" };
        format!("{}{} strides=[{}] align={}{alias}", g.dtype(v), fmt_shape(&m.shape), strides.join(", "), m.alignment)
    };
    let mut s = String::new();
    let former = match rs.former {
        Former::Grouping => "grouping",
        Former::PolyCore => "grouping + poly core",
    };
    let _ = writeln!(s, "regions {} ({former})", rs.graph);
    for r in &rs.regions {
        let kind = if r.is_copy() { " copy" } else { "" };
        let _ = writeln!(s, "region {}{kind} -> {}", r.name, label(r.root()));
        for i in &r.inputs {
            let _ = writeln!(s, "  in  {}: {}", label(i.node), memref(&i.memref, i.node));
        }
        for l in &r.body {
            let n = g.node(l.node);
            let srcs: Vec<String> = n.src.iter().map(|&v| label(v)).collect();
            let m = match l.materialize {
                Materialize::Deferred => "deferred",
                Materialize::Gmem => "gmem",
            };
            let how = match l.how {
                How::Inline => "",
                How::Accumulate => " accumulate",
                How::ComputeAt => " compute_at",
                How::Scan => " scan",
            };
            let _ = writeln!(s, "  let {} = {}({})  {m}{how}", n.label, n.op.name(), srcs.join(", "));
        }
        for o in &r.outputs {
            let to = match o.dest {
                Dest::GraphOutput(k) => format!("output {k} \"{}\"", g.outputs[k].name),
                Dest::Temp => "temp".to_string(),
            };
            let _ = writeln!(s, "  yield {} -> {to} {}", label(o.node), memref(&o.memref, o.node));
        }
        for e in &r.local_edges {
            let b = match e.buffer {
                EdgeBuffer::Reg => "reg".to_string(),
                EdgeBuffer::SmemRing { depth } => format!("smem_ring depth {depth}"),
            };
            let bytes = e.bytes.map_or_else(|| "? bytes".to_string(), |b| format!("{b} bytes"));
            let _ =
                writeln!(s, "  local_edge {} -> {}: {b} {bytes}{}", label(e.producer), label(e.consumer), halo(g, e));
        }
    }
    for st in &rs.stops {
        let c = st.consumer.map_or_else(String::new, |c| format!(" -> {}", label(c)));
        let by = match st.reason {
            StopReason::Rollback(v) | StopReason::Conflict(v) | StopReason::SecondAccumulator(v) => {
                format!(" (by {})", label(v))
            }
            StopReason::EpilogueMovement(v) => format!(" ({} {})", g.node(v).op.name(), label(v)),
            _ => String::new(),
        };
        let _ = writeln!(s, "stop {}{c}: {}{by}", label(st.producer), st.reason);
    }
    s
}

/// `, halo [(lo, hi), …] box N bytes`: [`crate::poly::core::can_compute_at`]
/// for one point of the consumer (1 on every output axis, its reduce axes
/// whole), or why there is no answer.
#[cfg(feature = "poly")]
fn halo(g: &Graph, e: &LocalEdge) -> String {
    use crate::poly;
    let tile = vec![1; g.shape(e.consumer).len()];
    let ctx = poly::Ctx::new();
    let answer = crate::index_book::build(g).and_then(|book| {
        let view = poly::build(&ctx, g, &book)?;
        poly::core::can_compute_at(&view, e.producer, e.consumer, &tile)
    });
    match answer {
        Ok(Ok(at)) => format!(", halo {:?} box {} bytes", at.halo.per_axis, at.halo.bytes),
        Ok(Err(why)) => format!(", no halo: {why}"),
        Err(d) => format!(", no halo: {}", d.message),
    }
}

/// Without Poly Core there is no halo to show.
#[cfg(not(feature = "poly"))]
fn halo(_: &Graph, _: &LocalEdge) -> String {
    String::new()
}

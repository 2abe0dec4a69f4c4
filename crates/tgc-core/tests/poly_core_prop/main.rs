//! Property test: Poly-View and Poly Core answers against brute-force
//! enumeration (`brute.rs`) on the random concrete movement graphs of
//! `tgc_core::fuzz::gen` (with `movement_prop`'s naive index mapping,
//! shared by path). For every graph:
//!
//! - every block is in the SCoP and the Poly-View verifier passes;
//! - **reads**: the points of each block's read maps (isl, enumerated with
//!   `Set::points`) are exactly the `(statement point, source element)`
//!   pairs the op definitions give; `PAD`'s fill points read nothing;
//! - **dependences**: the edges are one per (consumer, distinct source),
//!   plus one self-edge per `REDUCE` with more than one reduce point; each
//!   edge's flow relation is exactly the brute-force set of (writer,
//!   reader) statement-point pairs, the self-edge exactly
//!   `(o, r) -> (o, r')` with `r <lex r'` (sets over [`MAX_PAIRS`] pairs are
//!   skipped and counted);
//! - **footprints and halos**: for [`PAIRS_PER_CASE`] random (producer,
//!   consumer) pairs on a path and a random tile of the consumer,
//!   `core::footprint` at the origin and at the interior tile is exactly
//!   the set of producer elements those tiles need, and `can_compute_at`
//!   answers what `poly::core`'s definition gives on the brute-force sets:
//!   a split reduction axis, no dependence when every read on the way
//!   lands in a `PAD`'s fill, `NothingNeeded` when a measured tile needs no
//!   element, or else the needed box of the interior tile, the
//!   step per producer axis, the halo per axis and
//!   `bytes = max(|box(origin)|, |box(interior)|) × element size`;
//! - **analysis**: `core::analyze`'s reduction and parallel axes per block
//!   and its barrier hints per edge (present exactly when the consumer
//!   element → producer element relation is not a bijection, with the
//!   one-to-many / many-to-one / many-to-many kind);
//! - **buffers**: where compute-at is legal, `min_buffer_for_edge` is
//!   `Gmem` for a leaf and otherwise `Reg` exactly when every producer
//!   element feeds at most one consumer element.
//!
//! Seeds as in `movement_prop`: `TGC_PROP_SEED`, `TGC_PROP_CASES`, and
//! `TGC_PROP_SEED=<seed> TGC_PROP_CASE=<index> cargo test -p tgc-core
//! --features poly --test poly_core_prop` replays one case.
#![cfg(feature = "poly")]

mod brute;
#[allow(dead_code)] // only the index mapping is used here
#[path = "../movement_prop/naive.rs"]
mod naive;

use std::collections::{BTreeMap, BTreeSet};

use tgc_core::fuzz::gen;

use proptest::prelude::RngExt;
use proptest::test_runner::{RngAlgorithm, TestRng};

use tgc_core::diag::ErrorName;
use tgc_core::index_book;
use tgc_core::poly::core::{self, Reason, WHOLE};
use tgc_core::poly::{self, Ctx, PolyView};
use tgc_core::tiny::text::dump;
use tgc_core::tiny::{Graph, NodeId, Op};

use brute::Point;

const DEFAULT_SEED: u64 = 0x706f_6c79_636f_7265;
const DEFAULT_CASES: u64 = 150;
/// Relations with more brute-force pairs than this are not compared.
const MAX_PAIRS: usize = 20_000;
/// Producer/consumer pairs whose footprint and halo are checked per graph.
const PAIRS_PER_CASE: usize = 3;
/// How many failing cases are printed in full.
const SHOWN_FAILURES: usize = 3;

#[test]
fn poly_view_and_poly_core_agree_with_brute_force_enumeration() {
    let (seed, cases) = gen::seed_and_cases(DEFAULT_SEED, DEFAULT_CASES);
    let mut failed = Vec::new();
    let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    for &i in &cases {
        let report = gen::affine_case(seed, i)
            .and_then(|c| check(&c.graph, seed, i, &mut counts).map_err(|e| format!("{e}\n{}", dump(&c.graph))));
        if let Err(report) = report {
            if failed.len() < SHOWN_FAILURES {
                eprintln!("---- seed {seed:#x}, case {i} ----\n{report}");
            }
            failed.push(i);
        }
    }
    eprintln!("{} cases (seed {seed:#x}): {counts:?}", cases.len());
    assert!(
        failed.is_empty(),
        "{} of {} cases failed (seed {seed:#x}): {failed:?}; the first {} are printed above. Replay one with \
         TGC_PROP_SEED={seed:#x} TGC_PROP_CASE={} cargo test -p tgc-core --features poly --test poly_core_prop",
        failed.len(),
        cases.len(),
        failed.len().min(SHOWN_FAILURES),
        failed[0]
    );
    if cases.len() >= 100 {
        for k in [
            "flow compared",
            "halo ok",
            "footprint compared",
            "splits reduction",
            "REDUCE self-edge compared",
            "axes compared",
            "barriers compared",
            "buffer reg compared",
            "buffer not reg compared",
            "part view agreed",
        ] {
            assert!(counts.get(k).copied().unwrap_or(0) > 0, "{} cases never had `{k}`: {counts:?}", cases.len());
        }
    }
}

/// Every check of the module doc on one graph.
fn check(g: &Graph, seed: u64, index: u64, counts: &mut BTreeMap<&'static str, usize>) -> Result<(), String> {
    let mut tally = |k: &'static str| *counts.entry(k).or_insert(0) += 1;
    let book = index_book::build(g).map_err(|d| format!("IndexBook: {}", d.message))?;
    let ctx = Ctx::new();
    let view = match poly::build(&ctx, g, &book) {
        Ok(v) => v,
        Err(d) if d.name == ErrorName::ExcessivePiecewise => {
            tally("skipped: too many pieces");
            return Ok(());
        }
        Err(d) => return Err(format!("poly::build: {}", d.message)),
    };
    if let Some(d) = poly::verify::verify(g, &book, &view, &Default::default()).first() {
        return Err(format!("Poly-View verifier: {}", d.message));
    }
    for b in &view.blocks {
        if b.scop().is_none() {
            return Err(format!("block {} of a concrete graph is not in the SCoP", b.name));
        }
        check_reads(g, &view, b.node)?;
    }
    tally("graphs");
    check_edges(g, &view, &mut tally)?;
    check_analysis(g, &view, &mut tally)?;
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8..16].copy_from_slice(&index.to_le_bytes());
    bytes[16] = 1; // another stream than the generator's
    let mut rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
    let consumers: Vec<NodeId> = g.ids().filter(|&v| !g.node(v).src.is_empty()).collect();
    let part_ctx = Ctx::new();
    let mut parts = poly::Parts::new(&part_ctx, g, &book, &Default::default()).map_err(|d| d.message)?;
    for _ in 0..PAIRS_PER_CASE {
        let c = consumers[rng.random_range(0..consumers.len())];
        let producers: Vec<NodeId> = g.ids().filter(|&p| p.index() < c.index() && brute::reaches(g, p, c)).collect();
        let p = producers[rng.random_range(0..producers.len())];
        let tile = random_tile(g, c, &mut rng);
        check_halo(g, &view, p, c, &tile, &mut tally)
            .and_then(|()| check_part(g, &view, &mut parts, p, c, &tile, &mut tally))
            .map_err(|e| format!("producer {} -> consumer {}, tile {tile:?}: {e}", label(g, p), label(g, c)))?;
    }
    Ok(())
}

fn label(g: &Graph, v: NodeId) -> &str {
    &g.node(v).label
}

/// The view of the part between `p` and `c` alone (`poly::Parts`): it
/// holds exactly the nodes on a path from `p` to `c`, and Poly Core gives
/// the same answers on it as on the whole graph's view (`can_compute_at`,
/// and `compute_at_with_buffer` as `can_compute_at` then
/// `min_buffer_for_edge`).
fn check_part(
    g: &Graph,
    view: &PolyView<'_>,
    parts: &mut poly::Parts<'_, '_>,
    p: NodeId,
    c: NodeId,
    tile: &[i64],
    tally: &mut impl FnMut(&'static str),
) -> Result<(), String> {
    let part = parts.between(p, c);
    let want: Vec<NodeId> = g.ids().filter(|&v| brute::reaches(g, p, v) && brute::reaches(g, v, c)).collect();
    if part != want {
        return Err(format!("the part between them is {part:?}, the paths' nodes {want:?}"));
    }
    let part_view = parts.view(&part).map_err(|d| format!("the part's view: {}", d.message))?;
    let at = |v: &PolyView<'_>| core::can_compute_at(v, p, c, tile).map_err(|d| d.message);
    let (whole, alone) = (at(view), at(&part_view));
    if whole != alone {
        return Err(format!("can_compute_at on the whole view {whole:?}, on the part's {alone:?}"));
    }
    // Both answers at once, on the part's view, as the two apart on the whole's.
    let both = core::compute_at_with_buffer(&part_view, p, c, tile).map_err(|d| d.message)?;
    let apart = match whole? {
        Ok(at) => Ok((at, core::min_buffer_for_edge(view, p, c, tile).map_err(|d| d.message)?)),
        Err(why) => Err(why),
    };
    if both != apart {
        return Err(format!("compute_at_with_buffer on the part's view {both:?}, apart on the whole's {apart:?}"));
    }
    tally("part view agreed");
    Ok(())
}

/// The reads of block `v` against the op definitions.
fn check_reads(g: &Graph, view: &PolyView<'_>, v: NodeId) -> Result<(), String> {
    let s = view.blocks[v.index()].scop().expect("checked by the caller");
    let mut isl: BTreeSet<(NodeId, Point, Point)> = BTreeSet::new();
    for r in &s.reads {
        for (p, e) in r.map.pairs(MAX_PAIRS).map_err(|e| format!("{}: {e}", label(g, v)))? {
            isl.insert((r.src, p, e));
        }
    }
    let mut want = BTreeSet::new();
    for p in brute::statement(g, v) {
        for (src, e) in brute::reads(g, v, &p) {
            want.insert((src, p.clone(), e));
        }
    }
    if isl != want {
        return Err(format!(
            "reads of {}: isl has {} pairs, the definition {}; only isl: {:?}; only the definition: {:?}",
            label(g, v),
            isl.len(),
            want.len(),
            isl.difference(&want).take(4).collect::<Vec<_>>(),
            want.difference(&isl).take(4).collect::<Vec<_>>()
        ));
    }
    Ok(())
}

/// The edge list and every edge's dependence relation.
fn check_edges(g: &Graph, view: &PolyView<'_>, tally: &mut impl FnMut(&'static str)) -> Result<(), String> {
    let got: BTreeSet<(NodeId, NodeId)> = view.edges.iter().map(|e| (e.from, e.to)).collect();
    let mut want = BTreeSet::new();
    for v in g.ids() {
        for &s in &g.node(v).src {
            want.insert((s, v));
        }
        if matches!(g.node(v).op, Op::Reduce { .. }) && brute::reduce_extents(g, v).iter().product::<usize>() > 1 {
            want.insert((v, v));
        }
    }
    // A REDUCE over unit axes may keep a self-edge with an empty relation.
    let got_nonempty: BTreeSet<(NodeId, NodeId)> = got
        .iter()
        .copied()
        .filter(|&(f, t)| f != t || brute::reduce_extents(g, t).iter().product::<usize>() > 1)
        .collect();
    if got_nonempty != want {
        return Err(format!("edges {got_nonempty:?}, the graph gives {want:?}"));
    }
    for e in &view.edges {
        let deps = e.deps.as_ref().ok_or_else(|| format!("edge {} -> {} has no dependence", e.from.0, e.to.0))?;
        let (want, what) = if e.from == e.to {
            if brute::statement(g, e.to).len() > 200 {
                tally("skipped: large self-edge");
                continue;
            }
            (brute::accumulator(g, e.to), "REDUCE self-edge compared")
        } else {
            (brute::flow(g, e.from, e.to), "flow compared")
        };
        if want.len() > MAX_PAIRS {
            tally("skipped: large flow");
            continue;
        }
        let mut got = BTreeSet::new();
        for m in &deps.flow {
            got.extend(m.pairs(MAX_PAIRS + 1).map_err(|err| format!("edge {} -> {}: {err}", e.from.0, e.to.0))?);
        }
        if got != want {
            return Err(format!(
                "flow {} -> {}: isl has {} pairs, brute force {}; only isl: {:?}; only brute force: {:?}",
                label(g, e.from),
                label(g, e.to),
                got.len(),
                want.len(),
                got.difference(&want).take(4).collect::<Vec<_>>(),
                want.difference(&got).take(4).collect::<Vec<_>>()
            ));
        }
        tally(what);
    }
    Ok(())
}

/// `core::analyze`: per block, the reduction axes are a `REDUCE`'s reduce
/// axes with more than one point (the only axes its accumulator pairs
/// differ on) and the parallel axes the others; per edge between distinct
/// blocks, a barrier hint exactly when the element relation (consumer
/// element → producer elements it reads) is not a bijection, with the kind
/// of `003`'s table.
fn check_analysis(g: &Graph, view: &PolyView<'_>, tally: &mut impl FnMut(&'static str)) -> Result<(), String> {
    let a = core::analyze(view, &[]).map_err(|d| d.message)?;
    for b in &a.blocks {
        let v = b.block;
        let out_rank = brute::shape(g, v).len();
        let red = brute::reduce_extents(g, v);
        let reduction: Vec<usize> = (0..red.len()).filter(|&k| red[k] > 1).map(|k| out_rank + k).collect();
        let parallel: Vec<usize> = (0..out_rank + red.len()).filter(|k| !reduction.contains(k)).collect();
        if (&b.reduction, &b.parallel) != (&reduction, &parallel) || !b.affine {
            return Err(format!(
                "analyze {}: (reduction, parallel, affine) = {:?}, brute force ({reduction:?}, {parallel:?}, true)",
                label(g, v),
                (&b.reduction, &b.parallel, b.affine)
            ));
        }
    }
    tally("axes compared");
    let mut want: BTreeMap<(NodeId, NodeId), core::Relation> = BTreeMap::new();
    for e in view.edges.iter().filter(|e| e.from != e.to) {
        let (p, c) = (e.from, e.to);
        let out_rank = brute::shape(g, c).len();
        let mut reads: BTreeMap<Point, BTreeSet<Point>> = BTreeMap::new();
        let mut readers: BTreeMap<Point, BTreeSet<Point>> = BTreeMap::new();
        for x in brute::statement(g, c) {
            for (s, elem) in brute::reads(g, c, &x) {
                if s == p {
                    reads.entry(x[..out_rank].to_vec()).or_default().insert(elem.clone());
                    readers.entry(elem).or_default().insert(x[..out_rank].to_vec());
                }
            }
        }
        let single = reads.values().all(|r| r.len() <= 1);
        let injective = readers.values().all(|r| r.len() <= 1);
        let relation = match (single, injective) {
            (true, true) => continue,
            (true, false) => core::Relation::OneToMany,
            (false, true) => core::Relation::ManyToOne,
            (false, false) => core::Relation::ManyToMany,
        };
        want.insert((p, c), relation);
    }
    let got: BTreeMap<(NodeId, NodeId), core::Relation> =
        a.barriers.iter().map(|h| ((h.from, h.to), h.relation)).collect();
    if got != want {
        return Err(format!("analyze barriers {got:?}, brute force {want:?}"));
    }
    tally("barriers compared");
    Ok(())
}

/// Per statement axis of `c`: [`WHOLE`] or a size up to the extent (reduce
/// axes more often whole, so that some tiles are legal).
fn random_tile(g: &Graph, c: NodeId, rng: &mut TestRng) -> Vec<i64> {
    let out = brute::shape(g, c);
    let ext: Vec<usize> = out.iter().copied().chain(brute::reduce_extents(g, c)).collect();
    (0..ext.len())
        .map(|k| {
            let whole = if k < out.len() { 0.25 } else { 0.7 };
            if rng.random_bool(whole) {
                WHOLE
            } else {
                rng.random_range(1..=ext[k].max(1)) as i64
            }
        })
        .collect()
}

/// Inclusive per-axis bounds of a non-empty set of points.
fn bounding_box(pts: &BTreeSet<Point>, rank: usize) -> Option<Vec<(i64, i64)>> {
    let first = pts.iter().next()?;
    let mut b: Vec<(i64, i64)> = first.iter().map(|&x| (x, x)).collect();
    for p in pts {
        for d in 0..rank {
            b[d] = (b[d].0.min(p[d]), b[d].1.max(p[d]));
        }
    }
    Some(b)
}

/// `can_compute_at` and `core::footprint` for one producer, consumer and
/// tile, against the definition of `poly::core` applied to brute-force
/// footprints.
fn check_halo(
    g: &Graph,
    view: &PolyView<'_>,
    p: NodeId,
    c: NodeId,
    tile: &[i64],
    tally: &mut impl FnMut(&'static str),
) -> Result<(), String> {
    let out_rank = brute::shape(g, c).len();
    let ext: Vec<i64> = brute::shape(g, c).into_iter().chain(brute::reduce_extents(g, c)).map(|x| x as i64).collect();
    let got = core::can_compute_at(view, p, c, tile).map_err(|d| d.message)?;
    // No consumer point reads the producer (every read lands in a PAD's
    // fill): no dependence.
    if brute::footprint(g, p, c, &brute::statement(g, c)).is_empty() {
        tally("no element dependence");
        return match got {
            Err(Reason::NoDependence) => Ok(()),
            other => Err(format!("no consumer point reads the producer; can_compute_at says {other:?}")),
        };
    }
    // A reduction axis (one with more than one point) cut by the tile.
    let split = (out_rank..ext.len()).find(|&k| ext[k] > 1 && tile[k] != WHOLE && tile[k] < ext[k]);
    if let Some(axis) = split {
        return match got {
            Err(Reason::SplitsReduction { axis: a, .. }) if a == axis => {
                tally("splits reduction");
                Ok(())
            }
            other => Err(format!("the tile splits reduction axis {axis}; can_compute_at says {other:?}")),
        };
    }
    let in_tile = |pos: &[i64]| -> Vec<Point> {
        brute::statement(g, c)
            .into_iter()
            .filter(|x| {
                (0..ext.len()).all(|k| tile[k] == WHOLE || (pos[k] * tile[k]..(pos[k] + 1) * tile[k]).contains(&x[k]))
            })
            .collect()
    };
    let need = |pos: &[i64]| brute::footprint(g, p, c, &in_tile(pos));
    let p_rank = brute::shape(g, p).len();
    let interior: Vec<i64> = (0..ext.len()).map(|k| i64::from(tile[k] != WHOLE && ext[k] >= 3 * tile[k])).collect();
    let origin = vec![0; ext.len()];
    let (inner_set, first_set) = (need(&interior), need(&origin));
    // The footprint sets themselves.
    for (pos, want) in [(&origin, &first_set), (&interior, &inner_set)] {
        let set = core::footprint(view, p, c, tile, pos).map_err(|d| d.message)?;
        let set = set.map_err(|r| format!("footprint at {pos:?}: {r}"))?;
        let got: BTreeSet<Point> = set.points(MAX_PAIRS).map_err(|e| e.to_string())?.into_iter().collect();
        if &got != want {
            return Err(format!(
                "footprint at {pos:?}: isl has {} elements, brute force {}; only isl: {:?}; only brute force: {:?}",
                got.len(),
                want.len(),
                got.difference(want).take(4).collect::<Vec<_>>(),
                want.difference(&got).take(4).collect::<Vec<_>>()
            ));
        }
    }
    tally("footprint compared");
    // A measured tile that needs nothing has no box.
    let empty = |tally: &mut dyn FnMut(&'static str), got: Result<core::ComputeAt, Reason>, at: &[i64]| {
        tally("tile needs nothing");
        match got {
            Err(Reason::NothingNeeded { position }) if position == at => Ok(()),
            other => Err(format!("the tile at {at:?} needs nothing; can_compute_at says {other:?}")),
        }
    };
    // Measured in can_compute_at's order: interior, origin, then each move.
    let Some(inner) = bounding_box(&inner_set, p_rank) else { return empty(tally, got, &interior) };
    let Some(first) = bounding_box(&first_set, p_rank) else { return empty(tally, got, &origin) };
    let mut step = vec![0; p_rank];
    let mut share_at = vec![0; p_rank];
    for k in (0..ext.len()).filter(|&k| interior[k] == 1) {
        let mut next = interior.clone();
        next[k] += 1;
        let Some(moved) = bounding_box(&need(&next), p_rank) else { return empty(tally, got, &next) };
        for d in 0..p_rank {
            let delta = moved[d].0 - inner[d].0;
            if step[d] == 0 && delta != 0 {
                step[d] = delta;
                share_at[d] = interior[k];
            }
        }
    }
    let per_axis: Vec<(i64, i64)> = (0..p_rank)
        .map(|d| match step[d] {
            0 => (0, 0),
            s => (share_at[d] * s - inner[d].0, inner[d].1 - ((share_at[d] + 1) * s - 1)),
        })
        .collect();
    let count = |b: &[(i64, i64)]| b.iter().map(|(lo, hi)| (hi - lo + 1) as u64).product::<u64>();
    let bytes = count(&inner).max(count(&first)) * brute::element_bytes(g.dtype(p));
    let at = got.map_err(|r| format!("can_compute_at says no ({r}); brute force needs the box {inner:?}"))?;
    let want = (inner, step, per_axis, bytes);
    let have = (at.needed.clone(), at.step.clone(), at.halo.per_axis.clone(), at.halo.bytes);
    if have != want {
        return Err(format!("(needed, step, halo, bytes): can_compute_at {have:?}, brute force {want:?}"));
    }
    tally("halo ok");
    check_buffer(g, view, p, c, tile, tally)
}

/// `core::min_buffer_for_edge` where compute-at is legal: `Gmem` for a
/// leaf (a graph input or a constant: kernel arguments), else `Reg` exactly when every producer element
/// feeds at most one consumer element (through every path of reads).
fn check_buffer(
    g: &Graph,
    view: &PolyView<'_>,
    p: NodeId,
    c: NodeId,
    tile: &[i64],
    tally: &mut impl FnMut(&'static str),
) -> Result<(), String> {
    let got = core::min_buffer_for_edge(view, p, c, tile).map_err(|d| d.message)?;
    if matches!(g.node(p).op, Op::Input { .. } | Op::Const { .. }) {
        return match got.kind {
            core::BufferKind::Gmem => Ok(()),
            k => Err(format!("min_buffer_for_edge of a leaf is {k:?}, not Gmem")),
        };
    }
    let points = brute::statement(g, c);
    if points.len() > 2_000 {
        tally("skipped: large buffer check");
        return Ok(());
    }
    let out_rank = brute::shape(g, c).len();
    let mut feeds: BTreeMap<Point, BTreeSet<Point>> = BTreeMap::new();
    for x in &points {
        for e in brute::footprint(g, p, c, std::slice::from_ref(x)) {
            feeds.entry(e).or_default().insert(x[..out_rank].to_vec());
        }
    }
    let reg = feeds.values().all(|f| f.len() <= 1);
    if reg != (got.kind == core::BufferKind::Reg) {
        return Err(format!(
            "min_buffer_for_edge is {:?}; brute force: one consumer element per producer element = {reg}",
            got.kind
        ));
    }
    tally(if reg { "buffer reg compared" } else { "buffer not reg compared" });
    Ok(())
}

//! The `poly_view` dump: every block's domain, write, reads and fills in isl
//! notation (`003`), then the edges with their dependences.
//!
//! ```text
//! poly_view gemm
//!   params [M, K, N]
//!   context [M, K, N] -> { : M > 0 and K > 0 and N > 0 }
//!   block n8 contraction_pattern
//!     domain [M, K, N] -> { S_n8[i0, i1, i2] : 0 <= i0 < M and 0 <= i1 < N and 0 <= i2 < K }
//!     write  [M, K, N] -> { S_n8[i0, i1, i2] -> n8[i0, i1] }
//!     read   [M, K, N] -> { S_n8[i0, i1, i2] -> n7[i0, i1, i2] }
//!     lhs A[i0, i2]  [M, K, N] -> { S_n8[i0, i1, i2] -> A[i0, i2] }
//!       no halo (one output point): the needed producer elements are unbounded along axis 1
//!     out [i0, i1] reduce [i2]
//!     pattern matmul  batch []
//!   edges
//!     n7 -> n8  true [M, K, N] -> { S_n7[i0, i1, i2] -> S_n8[i0' = i0, i1' = i1, i2' = i2] : … }
//!     n8 -> n8  true|anti|output [M, K, N] -> { S_n8[i0, i1, i2] -> S_n8[i0' = i0, i1' = i1, i2'] : … }
//! ```
//!
//! Each contraction operand shows its halo for one output point (with
//! concrete extents; a symbolic reduce extent leaves it unbounded).
//!
//! Writes, reads, fills and contraction maps are printed gisted against the
//! block's domain (they mean nothing outside it); domains and dependences in
//! full.

use std::collections::HashMap;
use std::fmt::Write;

use super::from_index_book::{ARRAY, STMT};
use super::isl::{IslResult, Map, Set};
use super::{Block, Body, PolyView};

/// Renders the view (the `--dump poly_view` stage).
pub fn dump(view: &PolyView<'_>) -> String {
    match render(view) {
        Ok(s) => s,
        Err(e) => format!("poly_view {}: cannot print: {e}\n", view.name),
    }
}

fn render<'c>(view: &PolyView<'c>) -> IslResult<String> {
    let mut s = String::new();
    let mut gists = Gists::default();
    let _ = writeln!(s, "poly_view {}", view.name);
    let params: Vec<&str> = view.params.iter().map(|(_, n)| n.as_str()).collect();
    let _ = writeln!(s, "  params [{}]", params.join(", "));
    let _ = writeln!(s, "  context {}", view.context);
    for b in &view.blocks {
        block(&mut s, view, b, &mut gists)?;
    }
    let _ = writeln!(s, "  edges");
    for e in &view.edges {
        let (from, to) = (name(view, e.from), name(view, e.to));
        let Some(d) = &e.deps else {
            let _ = writeln!(s, "    {from} -> {to}  (not in the SCoP)");
            continue;
        };
        // `000` §1.4 spells the flow dependence `true`; kinds with the same
        // relation (a reduction's accumulator) share one line.
        let mut lines: Vec<(Vec<&str>, String)> = Vec::new();
        for (kind, maps) in [("true", &d.flow), ("anti", &d.anti), ("output", &d.output)] {
            for m in maps.iter() {
                let text = m.to_isl()?;
                match lines.iter_mut().find(|(_, t)| *t == text) {
                    Some((kinds, _)) => kinds.push(kind),
                    None => lines.push((vec![kind], text)),
                }
            }
        }
        for (kinds, text) in lines {
            let _ = writeln!(s, "    {from} -> {to}  {} {text}", kinds.join("|"));
        }
    }
    Ok(s)
}

fn block<'c>(s: &mut String, view: &PolyView<'c>, b: &Block<'c>, gists: &mut Gists<'c>) -> IslResult<()> {
    let _ = writeln!(s, "  block {} {}", b.name, b.kind.name());
    let scop = match &b.body {
        Body::Scop(scop) => scop,
        Body::NonScop(why) => {
            let _ = writeln!(s, "    not in the SCoP: {why}");
            return Ok(());
        }
    };
    let _ = writeln!(s, "    domain {}", scop.domain);
    let _ = writeln!(s, "    write  {}", gists.on_domain(&scop.write, &scop.domain)?);
    for r in &scop.reads {
        let _ = writeln!(s, "    read   {}", gists.on_domain(&r.map, &scop.domain)?);
    }
    for f in &scop.fills {
        let _ = writeln!(s, "    fill {:?} {}", f.value, set_on_domain(&f.set, &scop.domain)?);
    }
    if let Some(c) = &b.contraction {
        for (side, op) in [("lhs", &c.lhs), ("rhs", &c.rhs)] {
            let idx: Vec<String> = op.idx.iter().map(|e| e.to_string()).collect();
            let map = gists.on_domain(&op.map, &scop.domain)?;
            let _ = writeln!(s, "    {side} {}[{}]  {map}", name(view, op.src), idx.join(", "));
            let _ = writeln!(s, "      {}", halo(view, op.src, b, c.out_idx.len()));
        }
        let _ = write!(s, "    out [{}] reduce [{}]", c.out_idx.join(", "), c.reduce_idx.join(", "));
        for (at, e) in &c.affine_offsets {
            let _ = write!(s, "  {at} = {e}");
        }
        let _ = writeln!(s);
        match &c.pattern {
            None => {
                let _ = writeln!(s, "    pattern none");
            }
            Some(p) => {
                let _ = write!(s, "    pattern {}  batch [{}]", p.kind.name(), p.batch_idx.join(", "));
                for w in &p.windows {
                    let role = if w.grouped { "group" } else { "window" };
                    let _ = write!(s, "  {role} {} = {}·i{} + {}·i{}", w.at, w.stride, w.out, w.dilation, w.reduce);
                }
                let _ = writeln!(s);
            }
        }
    }
    Ok(())
}

/// The operand's halo for one output point of the contraction (1 on every
/// output axis, the reduce axes whole; [`super::core::can_compute_at`]), or
/// why there is none.
fn halo(view: &PolyView<'_>, src: crate::tiny::NodeId, b: &Block<'_>, n_out: usize) -> String {
    match super::core::can_compute_at(view, src, b.node, &vec![1; n_out]) {
        Ok(Ok(at)) => format!("halo {:?} box {} bytes (one output point)", at.halo.per_axis, at.halo.bytes),
        Ok(Err(why)) => format!("no halo (one output point): {why}"),
        Err(d) => format!("no halo (one output point): {}", d.message),
    }
}

fn name<'a>(view: &'a PolyView<'_>, id: crate::tiny::NodeId) -> &'a str {
    view.block(id).map_or("?", |b| b.name.as_str())
}

/// `m` gisted against `domain`, as text.
pub(crate) fn on_domain(m: &Map<'_>, domain: &Set<'_>) -> IslResult<String> {
    m.gist_domain(domain)?.to_isl()
}

/// [`on_domain`] over the many blocks of one dump. The gist is the slow
/// part, and blocks of the same shape and access pattern differ only in
/// their tuple names, so each distinct pair (map, domain) is gisted once
/// with its tuples renamed to placeholders, and renamed back for the text
/// (a thousand-node chain gists a handful of maps).
#[derive(Default)]
pub(crate) struct Gists<'c> {
    done: HashMap<(String, String), Map<'c>>,
}

impl<'c> Gists<'c> {
    pub(crate) fn on_domain(&mut self, m: &Map<'c>, domain: &Set<'c>) -> IslResult<String> {
        let (stmt, array) = m.tuple_names()?;
        if stmt.is_empty() || array.is_empty() {
            return on_domain(m, domain);
        }
        let (m0, d0) = (m.with_tuple_names(STMT, ARRAY)?, domain.with_tuple_name(STMT)?);
        let key = (m0.to_isl()?, d0.to_isl()?);
        let gisted = match self.done.get(&key) {
            Some(g) => g.try_clone()?,
            None => {
                let g = m0.gist_domain(&d0)?;
                self.done.insert(key, g.try_clone()?);
                g
            }
        };
        gisted.with_tuple_names(&stmt, &array)?.to_isl()
    }
}

/// `set` gisted against `domain`, as text.
pub(crate) fn set_on_domain(set: &Set<'_>, domain: &Set<'_>) -> IslResult<String> {
    set.gist(domain)?.to_isl()
}

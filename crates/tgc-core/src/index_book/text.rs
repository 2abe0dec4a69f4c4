//! The `indexbook` dump: one line per value,
//!
//! ```text
//! n5: [i0:M iter, i1:N broadcast, i2:K iter]  n2[i0, 0, i2]
//! n8: [i0:M iter, i1:N iter] reduce [i2:K]  n7[i0, i1, i2]
//! n3: [i0:H + 2 iter]  n2[i0 - 1] if {i0 - 1 >= 0, H - i0 >= 0} else 0.0
//! ```
//!
//! axes with sizes and kinds, reduce axes, then each access as
//! `source[map]` with its guards, then (`where {…}`) the domain constraints
//! other than the bounds of the variables — the div guards.

use std::fmt::Write;

use crate::affine::AffExpr;
use crate::sym::Dim;
use crate::tiny::Graph;

use super::{Constr, IndexBook};

/// Renders the book as text (the `--dump indexbook` stage).
pub fn dump(g: &Graph, book: &IndexBook) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "indexbook {}", g.name);
    for id in g.ids() {
        let Some(info) = book.get(id) else {
            let _ = writeln!(s, "  {}: (missing)", g.node(id).label);
            continue;
        };
        let axes: Vec<String> = info.axes.iter().map(|a| format!("{}:{} {}", a.name, a.size, a.kind.name())).collect();
        let _ = write!(s, "  {}: [{}]", g.node(id).label, axes.join(", "));
        if !info.reduce_axes.is_empty() {
            let r: Vec<String> = info.reduce_axes.iter().map(|a| format!("{}:{}", a.name, a.size)).collect();
            let _ = write!(s, " reduce [{}]", r.join(", "));
        }
        for a in &info.inputs {
            let _ = write!(s, "  {}{}", g.node(a.src).label, list(&a.map));
            for p in &a.guard {
                let _ = write!(s, " if {} else {:?}", constraints(&p.valid), p.otherwise);
            }
        }
        let bounds: Vec<Constr> = info
            .axes
            .iter()
            .chain(&info.reduce_axes)
            .flat_map(|a| Constr::between(&AffExpr::var(a.id), &Dim::int(0), &(&a.size - &Dim::int(1))))
            .collect();
        let extra: Vec<Constr> = info.domain.constraints.iter().filter(|c| !bounds.contains(c)).cloned().collect();
        if !extra.is_empty() {
            let _ = write!(s, " where {}", constraints(&extra));
        }
        s.push('\n');
    }
    s
}

fn list(m: &[AffExpr]) -> String {
    let v: Vec<String> = m.iter().map(|e| e.to_string()).collect();
    format!("[{}]", v.join(", "))
}

fn constraints(cs: &[Constr]) -> String {
    let v: Vec<String> = cs.iter().map(|c| c.to_string()).collect();
    format!("{{{}}}", v.join(", "))
}

//! The verifier of [`Regions`]: checks exactly the invariants listed in the
//! module doc of [`super`], reporting every violation with the region and
//! node.

use crate::diag;
use crate::diag::Diagnostic;
use crate::tiny::{Graph, NodeId, Op};

use super::{Dest, How, Materialize, MemRef, Regions};

/// Every violation, in region order.
pub fn verify(g: &Graph, rs: &Regions) -> Vec<Diagnostic> {
    let mut errs = Vec::new();
    let n = g.len();
    let mut stored: Vec<Option<usize>> = vec![None; n];
    let mut output_of = vec![0usize; g.outputs.len()];
    let bad = |errs: &mut Vec<Diagnostic>, r: &str, v: Option<NodeId>, m: String| {
        let mut d = diag!(Internal, "region {r}: {m}");
        d.node = v.filter(|v| v.index() < n).map(|v| g.node(v).label.clone());
        errs.push(d);
    };
    for (k, r) in rs.regions.iter().enumerate() {
        let name = r.name.as_str();
        if r.outputs.len() != 1 {
            bad(&mut errs, name, None, format!("{} outputs, not one", r.outputs.len()));
            continue;
        }
        if r.outputs.iter().any(|o| o.node.index() >= n)
            || r.inputs.iter().any(|i| i.node.index() >= n)
            || r.body.iter().any(|l| l.node.index() >= n)
        {
            bad(&mut errs, name, None, "names a node outside the graph".into());
            continue;
        }
        for i in &r.inputs {
            let ok = matches!(g.node(i.node).op, Op::Input { .. }) || stored[i.node.index()].is_some_and(|s| s < k);
            if !ok {
                bad(&mut errs, name, Some(i.node), format!("input {} is not stored before it", g.node(i.node).label));
            }
            memref_ok(g, &mut errs, name, i.node, &i.memref);
        }
        let o = &r.outputs[0];
        memref_ok(g, &mut errs, name, o.node, &o.memref);
        if let Dest::GraphOutput(j) = o.dest {
            match g.outputs.get(j) {
                Some(go) if go.node == o.node => output_of[j] += 1,
                _ => bad(&mut errs, name, Some(o.node), format!("yields graph output {j}, which is another value")),
            }
        }
        if o.materialize != Materialize::Gmem {
            bad(&mut errs, name, Some(o.node), "its output is not gmem".into());
        }
        if r.is_copy() {
            if r.inputs.len() != 1 || r.inputs[0].node != o.node {
                bad(&mut errs, name, Some(o.node), "a copy region reads other than the value it copies".into());
            }
            continue;
        }
        if stored[o.node.index()].is_some() {
            bad(&mut errs, name, Some(o.node), "stores a value another region stores".into());
        }
        stored[o.node.index()] = Some(k);
        if !r.body.windows(2).all(|w| w[0].node < w[1].node) {
            bad(&mut errs, name, None, "lets are not in increasing node order".into());
        }
        let last = r.body.len() - 1;
        for (j, l) in r.body.iter().enumerate() {
            let want = if j == last { Materialize::Gmem } else { Materialize::Deferred };
            if l.materialize != want || (j == last && l.node != o.node) {
                bad(&mut errs, name, Some(l.node), "exactly the last let, its output, is gmem".into());
            }
            let node = g.node(l.node);
            if matches!(node.op, Op::Input { .. }) {
                bad(&mut errs, name, Some(l.node), "an INPUT is a let".into());
            }
            for s in &node.src {
                if !r.body.iter().any(|m| m.node == *s) && !r.inputs.iter().any(|i| i.node == *s) {
                    bad(
                        &mut errs,
                        name,
                        Some(l.node),
                        format!("reads {}, neither a let nor an input", g.node(*s).label),
                    );
                }
            }
            let is_reduce = matches!(node.op, Op::Reduce { .. });
            match l.how {
                How::Inline => {}
                How::Accumulate if !is_reduce => bad(&mut errs, name, Some(l.node), "accumulates a non-REDUCE".into()),
                How::Accumulate => {}
                How::Scan if !matches!(node.op, Op::Scan { .. }) || j != last => {
                    bad(&mut errs, name, Some(l.node), "a scan let that is not a SCAN root".into())
                }
                How::Scan => {}
                How::ComputeAt => {
                    let acc = r.accumulator();
                    let edge = r.local_edges.iter().any(|e| e.producer == l.node && Some(e.consumer) == acc);
                    if !is_reduce || j == last || acc.is_none() || !edge {
                        bad(
                            &mut errs,
                            name,
                            Some(l.node),
                            "a compute-at let needs a REDUCE, an accumulator and its edge".into(),
                        );
                    }
                }
            }
        }
        if r.body.iter().filter(|l| l.how == How::Accumulate).count() > 1 {
            bad(&mut errs, name, None, "more than one accumulator".into());
        }
    }
    for (j, &c) in output_of.iter().enumerate() {
        if c != 1 {
            let mut d = diag!(Internal, "graph output {j} is yielded by {c} regions, not one");
            d.node = g.outputs.get(j).map(|o| o.name.clone());
            errs.push(d);
        }
    }
    errs
}

fn memref_ok(g: &Graph, errs: &mut Vec<Diagnostic>, region: &str, v: NodeId, m: &MemRef) {
    let want = MemRef::of(g, v);
    let elem = g.dtype(v).size_bytes() as u32;
    let ok = m.shape == want.shape
        && m.strides == want.strides
        && m.alignment.is_power_of_two()
        && m.alignment >= elem
        && m.noalias;
    if !ok {
        let mut d =
            diag!(Internal, "region {region}: the memref of {} is not its row-major noalias layout", g.node(v).label);
        d.node = Some(g.node(v).label.clone());
        errs.push(d);
    }
}

//! The Tiny IR verifier: checks exactly the invariants listed in the module
//! doc of [`crate::tiny`] and reports every violation with its node.

use std::collections::HashSet;

use crate::diag;
use crate::diag::Diagnostic;

use super::graph::Graph;
use super::infer::{infer, TensorType};
use super::op::Op;

/// Returns every violated invariant (empty when the graph is well formed).
pub fn verify(g: &Graph) -> Vec<Diagnostic> {
    let mut errs = Vec::new();
    let mut labels = HashSet::new();
    for id in g.ids() {
        let n = g.node(id);
        let at = |e: Diagnostic| e.at_node(n);
        if !labels.insert(n.label.as_str()) {
            errs.push(at(diag!(Internal, "label `{}` is used twice", n.label)));
        }
        if let Some(s) = n.src.iter().find(|s| s.0 >= id.0) {
            errs.push(at(diag!(Internal, "source {} does not precede node {}", s.0, id.0)));
            continue;
        }
        let tys: Vec<&TensorType> = n.src.iter().map(|s| g.ty(*s)).collect();
        let shape_arg = matches!(n.op, Op::Input { .. } | Op::Reshape | Op::Expand | Op::View { .. });
        match infer(&n.op, &tys, Some(n.ty.dtype), shape_arg.then_some(n.ty.shape.as_slice())) {
            Ok((ty, _)) if ty != n.ty => {
                errs.push(at(diag!(Internal, "stored type {:?} differs from the inferred {:?}", n.ty, ty)))
            }
            Ok(_) => {}
            Err(e) => errs.push(at(e)),
        }
    }
    for o in &g.outputs {
        if o.node.index() >= g.len() {
            errs.push(diag!(Internal, "output `{}` names missing node {}", o.name, o.node.0));
        }
    }
    errs
}

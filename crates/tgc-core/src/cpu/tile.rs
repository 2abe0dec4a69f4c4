//! Symbolic tiling (`003`'s answer on run-time tile sizes): strip-mining
//! at loop-nest generation, not in the polyhedral model.
//!
//! A [`TilePlan`] names output loops; [`strip_mine`] gives each a run-time
//! tile size — a new entry of the `dims` array after the graph's symbols
//! ([`Program::tiles`]) — and a check `T ≥ 1` that the generated entry point
//! runs before anything else of the kernel (C: return 2; Rust: `Err`).
//! Printers scan a strip-mined loop as [`Kernel::nest`] says: full tiles
//! `io..io + T` with no `min` and no guard, then one partial tile.
//!
//! Invariants (checked by [`strip_mine`]'s construction):
//! - tile `j` is `dims[symbols.len() + j]`; its name is not a graph symbol;
//! - a kernel gets a strip for each planned axis it has (a copy or a
//!   lower-rank kernel gets fewer, possibly none), sharing the plan's tile
//!   size for that axis;
//! - strips change the visiting order of output points only, so results do
//!   not depend on the tile sizes (bit for bit).

use crate::sym::Dim;
use crate::tiny::{Constraint, Rel};

use super::loop_ir::{Program, Strip};

/// Which output loops to strip-mine, each by its own run-time tile size.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TilePlan {
    /// Output-loop indices (of each kernel's `i0, i1, …`), increasing; tile
    /// size `j` strip-mines loop `axes[j]`. Empty: no tiling.
    pub axes: Vec<usize>,
}

impl TilePlan {
    /// The outermost spatial loops of an NCHW result: `H` and `W` (axes 2, 3).
    pub fn spatial_nchw() -> TilePlan {
        TilePlan { axes: vec![2, 3] }
    }
}

/// Strip-mines the loops `plan` names in every kernel of `p`, adding one
/// tile size per planned axis to [`Program::tiles`] (named `tile<j>`, with
/// underscores prepended while that is a graph symbol) and its `≥ 1` check
/// to [`Program::checks`]. A plan whose axes are not increasing is applied
/// to its increasing prefix.
pub fn strip_mine(p: &mut Program, plan: &TilePlan) {
    let axes: Vec<usize> =
        plan.axes.iter().enumerate().take_while(|&(j, a)| j == 0 || plan.axes[j - 1] < *a).map(|(_, a)| *a).collect();
    for j in 0..axes.len() {
        let mut name = format!("tile{j}");
        while p.symbols.contains(&name) {
            name.insert(0, '_');
        }
        p.checks.insert(
            0,
            Constraint {
                lhs: Dim::int(1), rel: Rel::Le, rhs: Dim::sym(&name), what: format!("tile size {name} ≥ 1")
            },
        );
        p.tiles.push(name);
    }
    // The checks were inserted in reverse; keep them in tile order.
    p.checks[..axes.len()].reverse();
    // A scan's fold runs along its loop in order: never strip-mined.
    for k in p.kernels.iter_mut().filter(|k| k.scan.is_none()) {
        k.strips = axes
            .iter()
            .zip(&p.tiles)
            .filter(|(a, _)| **a < k.loops.len())
            .map(|(a, t)| Strip { axis: *a, tile: t.clone() })
            .collect();
    }
}

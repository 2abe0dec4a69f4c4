//! Which of the legal, beneficial fusions to take (`000` §4.1 step 5).
//!
//! Each candidate is an edge `producer → consumer` with its `Δtime < 0`
//! ([`super::cost`]). Two candidates *conflict* when taking both would nest
//! compute-ats or give a consumer two (one level, one producer per region
//! in v1): `a.consumer == b.producer`, `b.consumer == a.producer` or
//! `a.consumer == b.consumer`. A choice is a conflict-free set; its value is
//! the sum of its `Δtime` (lower is better).
//!
//! Candidates are cut into *windows*, the connected components of the
//! conflict graph (choices in different windows do not interact):
//! - a window of at most [`MAX_EXACT_NODES`] graph nodes is solved exactly
//!   (§4.1 "小窓（10–30ノード）: ILP/最大閉包で厳密") as the 0-1 ILP
//!   `min Σ Δ_e x_e  s.t.  x_a + x_b ≤ 1 for each conflict, x ∈ {0,1}`
//!   (a maximum-weight independent set: the conflicts are pairwise
//!   exclusions, not the precedence constraints a max-closure cut needs),
//!   by `microlp`'s branch and bound;
//! - a larger window goes to [`greedy`]: backward from the outputs (consumers
//!   in decreasing node order) with one-step rollback (§4.1 "出力起点の後ろ向き
//!   貪欲 + 直前1手ロールバック").

use crate::tiny::NodeId;

/// The largest window (distinct producer and consumer nodes) solved exactly.
pub const MAX_EXACT_NODES: usize = 30;

/// One legal, beneficial fusion.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    pub producer: NodeId,
    pub consumer: NodeId,
    /// `Δtime` in seconds, negative.
    pub delta: f64,
}

/// Why a candidate was left out by the selection.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Left {
    /// Greedy: a fusion already taken (its producer named) conflicts.
    Conflict(NodeId),
    /// Greedy: taken, then undone for the next step's better fusion (its
    /// producer named).
    RolledBack(NodeId),
    /// The exact choice over a window of this many nodes left it out.
    NotChosen(usize),
}

/// Per candidate: taken (`Ok`) or why not.
pub type Choice = Vec<Result<(), Left>>;

fn conflict(a: &Candidate, b: &Candidate) -> bool {
    a.consumer == b.producer || b.consumer == a.producer || a.consumer == b.consumer
}

/// The sum of `Δtime` over the taken candidates.
pub fn value(cands: &[Candidate], choice: &Choice) -> f64 {
    cands.iter().zip(choice).filter(|(_, c)| c.is_ok()).map(|(x, _)| x.delta).sum()
}

/// True when no two taken candidates conflict.
pub fn is_consistent(cands: &[Candidate], choice: &Choice) -> bool {
    let taken: Vec<&Candidate> = cands.iter().zip(choice).filter(|(_, c)| c.is_ok()).map(|(x, _)| x).collect();
    taken.iter().enumerate().all(|(i, a)| taken[i + 1..].iter().all(|b| !conflict(a, b)))
}

/// The selection of the module doc: exact on small windows, greedy on the rest.
pub fn select(cands: &[Candidate]) -> Choice {
    let mut choice: Choice = vec![Ok(()); cands.len()];
    for window in windows(cands) {
        let sub: Vec<Candidate> = window.iter().map(|&i| cands[i]).collect();
        let nodes = node_count(&sub);
        let picked = if nodes <= MAX_EXACT_NODES { exact(&sub).unwrap_or_else(|| greedy(&sub)) } else { greedy(&sub) };
        for (k, &i) in window.iter().enumerate() {
            choice[i] = picked[k];
        }
    }
    choice
}

/// Connected components of the conflict graph, each in candidate order.
fn windows(cands: &[Candidate]) -> Vec<Vec<usize>> {
    let mut comp: Vec<Option<usize>> = vec![None; cands.len()];
    let mut out: Vec<Vec<usize>> = Vec::new();
    for s in 0..cands.len() {
        if comp[s].is_some() {
            continue;
        }
        let id = out.len();
        let (mut members, mut stack) = (Vec::new(), vec![s]);
        comp[s] = Some(id);
        while let Some(i) = stack.pop() {
            members.push(i);
            for j in 0..cands.len() {
                if comp[j].is_none() && conflict(&cands[i], &cands[j]) {
                    comp[j] = Some(id);
                    stack.push(j);
                }
            }
        }
        members.sort_unstable();
        out.push(members);
    }
    out
}

fn node_count(cands: &[Candidate]) -> usize {
    let mut nodes: Vec<NodeId> = cands.iter().flat_map(|c| [c.producer, c.consumer]).collect();
    nodes.sort_unstable();
    nodes.dedup();
    nodes.len()
}

/// Backward greedy with one-step rollback (§4.1 step 5): visit candidates
/// by consumer, then producer, in decreasing node order (outputs first);
/// take one that conflicts with nothing taken; when it conflicts only with
/// the step just taken and is better (lower `Δtime`), undo that step and
/// take it instead; otherwise leave it out.
pub fn greedy(cands: &[Candidate]) -> Choice {
    let mut order: Vec<usize> = (0..cands.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse((cands[i].consumer, cands[i].producer)));
    let mut choice: Choice = vec![Err(Left::NotChosen(0)); cands.len()];
    let mut last: Option<usize> = None;
    for i in order {
        let blocking: Vec<usize> =
            (0..cands.len()).filter(|&j| choice[j].is_ok() && conflict(&cands[i], &cands[j])).collect();
        match blocking[..] {
            [] => {
                choice[i] = Ok(());
                last = Some(i);
            }
            [j] if Some(j) == last && cands[i].delta < cands[j].delta => {
                choice[j] = Err(Left::RolledBack(cands[i].producer));
                choice[i] = Ok(());
                last = Some(i);
            }
            [j, ..] => choice[i] = Err(Left::Conflict(cands[j].producer)),
        }
    }
    choice
}

/// The exact choice by 0-1 ILP (module doc); `None` when the solver fails
/// or does not prove optimality (then the caller falls back to [`greedy`]).
pub fn exact(cands: &[Candidate]) -> Option<Choice> {
    use microlp::{ComparisonOp, OptimizationDirection, Problem};
    let mut p = Problem::new(OptimizationDirection::Minimize);
    let x: Vec<_> = cands.iter().map(|c| p.add_binary_var(c.delta)).collect();
    for i in 0..cands.len() {
        for j in i + 1..cands.len() {
            if conflict(&cands[i], &cands[j]) {
                p.add_constraint([(x[i], 1.0), (x[j], 1.0)], ComparisonOp::Le, 1.0);
            }
        }
    }
    let outcome = p.solve().ok()?;
    if !outcome.is_optimal() {
        return None;
    }
    let solution = outcome.into_solution().ok()?;
    let nodes = node_count(cands);
    let choice: Choice =
        x.iter().map(|&v| if solution[v] > 0.5 { Ok(()) } else { Err(Left::NotChosen(nodes)) }).collect();
    is_consistent(cands, &choice).then_some(choice)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(p: u32, q: u32, delta: f64) -> Candidate {
        Candidate { producer: NodeId(p), consumer: NodeId(q), delta }
    }

    /// Every conflict-free subset; the best value.
    fn brute_force(cands: &[Candidate]) -> f64 {
        let n = cands.len();
        (0..1u32 << n)
            .map(|mask| (0..n).map(|i| if mask >> i & 1 == 1 { Ok(()) } else { Err(Left::NotChosen(0)) }).collect())
            .filter(|ch: &Choice| is_consistent(cands, ch))
            .map(|ch| value(cands, &ch))
            .fold(0.0, f64::min)
    }

    /// A chain a → b → c → d: greedy takes c→d, rolls it back for b→c,
    /// then cannot take a→b; the ILP takes a→b and c→d.
    #[test]
    fn rollback_and_exact_on_a_chain() {
        let cands = [c(0, 1, -2.0), c(1, 2, -3.0), c(2, 3, -2.0)];
        let g = greedy(&cands);
        assert_eq!(g[2], Err(Left::RolledBack(NodeId(1))));
        assert_eq!(g[1], Ok(()));
        assert_eq!(g[0], Err(Left::Conflict(NodeId(1))));
        let e = exact(&cands).unwrap();
        assert_eq!(e, vec![Ok(()), Err(Left::NotChosen(4)), Ok(())]);
        assert_eq!(value(&cands, &e), brute_force(&cands));
    }

    /// A chain of 31 fusions spans 32 nodes: past the exact window, the
    /// greedy decides, and its choice is conflict-free.
    #[test]
    fn a_window_past_30_nodes_goes_to_greedy() {
        let cands: Vec<Candidate> = (0..31).map(|k| c(k, k + 1, -1.0 - f64::from(k % 3))).collect();
        assert_eq!(node_count(&cands), 32);
        let chosen = select(&cands);
        assert_eq!(chosen, greedy(&cands));
        assert!(is_consistent(&cands, &chosen));
        let small = &cands[..29];
        assert_eq!(value(small, &select(small)), best_on_a_chain(small));
    }

    /// The best value of a chain by dynamic programming (no two adjacent).
    fn best_on_a_chain(cands: &[Candidate]) -> f64 {
        let (mut take, mut skip) = (0.0f64, 0.0f64);
        for x in cands {
            (take, skip) = (skip + x.delta.min(0.0), take.min(skip));
        }
        take.min(skip)
    }

    #[test]
    fn independent_windows_are_all_taken() {
        let cands = [c(0, 1, -1.0), c(5, 6, -1.0)];
        assert_eq!(windows(&cands).len(), 2);
        assert!(select(&cands).iter().all(Result::is_ok));
    }

    /// Seeded random windows: the exact choice equals brute force on tiny
    /// windows and is never worse than greedy.
    #[test]
    fn exact_matches_brute_force_and_beats_greedy() {
        let mut seed: u64 = 0x5eed;
        let mut next = move |m: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % m
        };
        for _ in 0..200 {
            let n = 1 + next(9) as usize;
            let nodes = 2 + next(8) as u32;
            let mut cands: Vec<Candidate> = Vec::new();
            for _ in 0..n {
                let q = 1 + next(u64::from(nodes) - 1) as u32;
                let p = next(u64::from(q)) as u32;
                if cands.iter().all(|x| x.producer != NodeId(p)) {
                    cands.push(c(p, q, -(1.0 + next(100) as f64)));
                }
            }
            let e = exact(&cands).unwrap();
            let g = greedy(&cands);
            assert!(is_consistent(&cands, &g));
            assert!((value(&cands, &e) - brute_force(&cands)).abs() < 1e-9, "{cands:?}");
            assert!(value(&cands, &e) <= value(&cands, &g) + 1e-9, "{cands:?}");
        }
    }
}

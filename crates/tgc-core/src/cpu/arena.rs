//! The memory arena of a program's temporaries: `000` §8's Memory Arena,
//! "reuse based on a liveness analysis" (生存区間解析に基づく再利用).
//!
//! **Liveness.** A temporary is live from the call that writes it to the
//! last call that reads it, counted in [`Program::calls`]: the kernels of a
//! row group run row by row, their accesses interleaved, so a buffer
//! touched anywhere in a call is live for the whole call. Inputs and
//! outputs are the caller's; a row group's local temporaries are held one
//! row a task ([`super::rows`]) and are not in the arena.
//!
//! **Placement.** [`plan`] walks the calls in order. Before a call, the
//! slots whose temporaries are all dead become free; each temporary the
//! call writes first takes a free slot — one already holding a temporary
//! of the same size, else (sizes known) the smallest free slot at least as
//! large, else the largest free slot, else (sizes symbolic) the first free
//! one — or a new slot. A slot's size is the largest of its temporaries'
//! (an expression of the symbols where they are symbolic, evaluated at run
//! time); the arena is the slots side by side, each rounded up to
//! [`SCRATCH_ALIGN`] bytes. Two temporaries share a slot only when their
//! live ranges are disjoint, so the arena never exceeds the sum of the
//! temporaries, and equals their peak of live bytes when the slots' sizes
//! match their tenants' (a stack of same-shaped activations, as in an
//! encoder layer).
//!
//! The C printer requests the slots from the runtime's scratch stack once
//! per call of the entry point (`tgc_runtime::cpu_rt`'s
//! `scratch_acquire`), which keeps its blocks between calls: after the
//! first call with the largest sizes, running the program allocates
//! nothing.

use std::collections::BTreeSet;

use tgc_runtime::scratch::SCRATCH_ALIGN;

use super::loop_ir::{BufId, Program, Role};
use crate::sym::Dim;

/// The live range of one temporary.
#[derive(Clone, Debug, PartialEq)]
pub struct Live {
    pub buf: BufId,
    /// Its size in bytes (elements × the dtype's storage size).
    pub bytes: Dim,
    /// The first call that touches it (a write), an index of
    /// [`Program::calls`].
    pub first: usize,
    /// The last call that touches it.
    pub last: usize,
}

/// The placement of a program's temporaries: each slot a list of
/// temporaries with pairwise disjoint live ranges, in placement order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Arena {
    pub slots: Vec<Vec<Live>>,
}

/// Binds a symbol to its value (`None`: unknown), as [`Dim::eval`] takes.
pub type Bind<'a> = &'a dyn Fn(&str) -> Option<i64>;

impl Arena {
    /// The slot holding temporary `b`, if the arena holds it.
    pub fn slot_of(&self, b: BufId) -> Option<usize> {
        self.slots.iter().position(|s| s.iter().any(|l| l.buf == b))
    }

    /// The distinct sizes of slot `k`'s temporaries, in bytes: the slot
    /// needs the largest.
    pub fn slot_sizes(&self, k: usize) -> Vec<&Dim> {
        let mut out: Vec<&Dim> = Vec::new();
        for l in &self.slots[k] {
            if !out.contains(&&l.bytes) {
                out.push(&l.bytes);
            }
        }
        out
    }

    /// The arena's size in bytes under `bind`: every slot's largest
    /// temporary, each rounded up to [`SCRATCH_ALIGN`].
    ///
    /// Errors: a size that names an unbound symbol or overflows `i64`.
    pub fn bytes(&self, bind: Bind<'_>) -> Result<i64, String> {
        let mut total = 0i64;
        for k in 0..self.slots.len() {
            let mut largest = 0;
            for d in self.slot_sizes(k) {
                largest = largest.max(d.eval(bind)?);
            }
            total = total.checked_add(aligned(largest)?).ok_or("the arena's size overflows i64")?;
        }
        Ok(total)
    }

    /// What the temporaries would take without sharing: the sum of their
    /// sizes, each rounded up to [`SCRATCH_ALIGN`].
    ///
    /// Errors: as [`Arena::bytes`].
    pub fn unshared_bytes(&self, bind: Bind<'_>) -> Result<i64, String> {
        let mut total = 0i64;
        for l in self.slots.iter().flatten() {
            total = total.checked_add(aligned(l.bytes.eval(bind)?)?).ok_or("the temporaries' sizes overflow i64")?;
        }
        Ok(total)
    }
}

/// `n` rounded up to a multiple of [`SCRATCH_ALIGN`].
fn aligned(n: i64) -> Result<i64, String> {
    let a = SCRATCH_ALIGN as i64;
    n.checked_add(a - 1).map(|m| m / a * a).ok_or_else(|| "a size overflows i64".to_string())
}

/// The live range of every temporary `p`'s calls touch (not a row group's
/// local ones), in buffer order.
pub fn live_ranges(p: &Program) -> Vec<Live> {
    let local: BTreeSet<BufId> = p.rows.iter().flat_map(|g| g.local.iter().copied()).collect();
    let mut ranges: Vec<Option<(usize, usize)>> = vec![None; p.buffers.len()];
    for (c, call) in p.calls().into_iter().enumerate() {
        for k in &p.kernels[call] {
            for b in k.reads().into_iter().chain([k.out]) {
                let r = &mut ranges[b.0 as usize];
                *r = Some(r.map_or((c, c), |(first, _)| (first, c)));
            }
        }
    }
    let mut out = Vec::new();
    for (i, (b, r)) in p.buffers.iter().zip(ranges).enumerate() {
        let id = BufId(i as u32);
        let Some((first, last)) = r else { continue };
        if b.role != Role::Temp || local.contains(&id) {
            continue;
        }
        let bytes = Dim::product(&[Dim::product(&b.shape), Dim::int(b.dtype.size_bytes() as i64)]);
        out.push(Live { buf: id, bytes, first, last });
    }
    out
}

/// Places `p`'s temporaries in slots (see the module doc).
pub fn plan(p: &Program) -> Arena {
    let mut lives = live_ranges(p);
    // Births in call order; within a call, larger (known) sizes first, so
    // they take the large free slots.
    lives.sort_by_key(|l| (l.first, std::cmp::Reverse(l.bytes.as_int()), l.buf));
    let mut arena = Arena::default();
    for l in lives {
        let free: Vec<usize> =
            (0..arena.slots.len()).filter(|&k| arena.slots[k].iter().all(|o| o.last < l.first)).collect();
        let slot = choose(&arena, &free, &l.bytes);
        match slot {
            Some(k) => arena.slots[k].push(l),
            None => arena.slots.push(vec![l]),
        }
    }
    arena
}

/// The free slot a temporary of `bytes` takes (module doc), `None` for a
/// new one.
fn choose(arena: &Arena, free: &[usize], bytes: &Dim) -> Option<usize> {
    if let Some(&k) = free.iter().find(|&&k| arena.slots[k].iter().any(|o| &o.bytes == bytes)) {
        return Some(k);
    }
    let largest = |k: usize| arena.slots[k].iter().map(|o| o.bytes.as_int()).try_fold(0, |m, b| Some(m.max(b?)));
    let known: Option<Vec<(i64, usize)>> = free.iter().map(|&k| Some((largest(k)?, k))).collect();
    match (bytes.as_int(), known) {
        (Some(n), Some(sizes)) => {
            let fits = sizes.iter().filter(|&&(s, _)| s >= n).min();
            fits.or_else(|| sizes.iter().max()).map(|&(_, k)| k)
        }
        _ => free.first().copied(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::{load, Format};

    /// The loop nests of graph-language `src` with its symbols bound to
    /// `dims` (none: symbolic).
    fn program(src: &str, dims: &[(&str, i64)]) -> Program {
        let mut g = load(src, Format::Dsl, None).expect("graph").graph;
        if !dims.is_empty() {
            g = g.bind(&dims.iter().map(|&(s, v)| (s.to_string(), v)).collect()).expect("binds");
        }
        crate::cpu::lower(&g).expect("lowers")
    }

    const M8_N16: &[(&str, i64)] = &[("M", 8), ("N", 16)];

    /// Four GEMMs in a chain: each temporary is read by the next call only.
    const CHAIN: &str = "graph<M, N> chain(x: f32[M, N], w: f32[N, N]) -> (y: f32[M, N]) {
        a = matmul(x, w)
        b = matmul(a, w)
        c = matmul(b, w)
        y = matmul(c, w)
        return y
    }";

    fn bind_none(_: &str) -> Option<i64> {
        None
    }

    #[test]
    fn a_chain_reuses_the_slot_of_a_dead_temporary() {
        let p = program(CHAIN, M8_N16);
        let lives = live_ranges(&p);
        let spans: Vec<(usize, usize)> = lives.iter().map(|l| (l.first, l.last)).collect();
        assert_eq!(spans, [(0, 1), (1, 2), (2, 3)], "{lives:?}");
        let arena = plan(&p);
        // `a` dies at call 1, where `b` is born: `c` (born at 2) takes `a`'s slot.
        assert_eq!(arena.slots.len(), 2, "{arena:?}");
        assert_eq!(arena.slot_of(lives[0].buf), arena.slot_of(lives[2].buf));
        assert_ne!(arena.slot_of(lives[0].buf), arena.slot_of(lives[1].buf));
        assert_eq!(arena.bytes(&bind_none), Ok(2 * 8 * 16 * 4));
        assert_eq!(arena.unshared_bytes(&bind_none), Ok(3 * 8 * 16 * 4));
    }

    #[test]
    fn symbolic_sizes_share_slots_and_evaluate_at_run_time() {
        let p = program(CHAIN, &[]);
        let arena = plan(&p);
        assert_eq!(arena.slots.len(), 2, "{arena:?}");
        let bind = |s: &str| match s {
            "M" => Some(3),
            "N" => Some(5),
            _ => None,
        };
        // 3·5 floats = 60 bytes, one aligned granule a slot.
        assert_eq!(arena.bytes(&bind), Ok(2 * SCRATCH_ALIGN as i64));
        assert!(arena.bytes(&bind_none).is_err(), "unbound symbols are an error, not a size");
    }

    #[test]
    fn temporaries_live_at_once_never_share() {
        // `a` and `b` are both read by the last call: three slots.
        let p = program(
            "graph<M, N> fan(x: f32[M, N], w: f32[N, N]) -> (y: f32[M, N]) {
                a = matmul(x, w)
                b = matmul(x, w * 2.0)
                c = matmul(a, w)
                y = matmul(c, w) + b
                return y
            }",
            M8_N16,
        );
        let arena = plan(&p);
        for (k, slot) in arena.slots.iter().enumerate() {
            for (i, x) in slot.iter().enumerate() {
                for y in &slot[i + 1..] {
                    assert!(x.last < y.first || y.last < x.first, "slot {k} holds overlapping {x:?} and {y:?}");
                }
            }
        }
        let all: usize = arena.slots.iter().map(Vec::len).sum();
        assert_eq!(all, live_ranges(&p).len(), "every temporary has a slot");
        assert!(arena.bytes(&bind_none).unwrap() <= arena.unshared_bytes(&bind_none).unwrap());
    }

    #[test]
    fn a_row_group_is_one_call() {
        // Softmax's max, exp, sum and division run as one row group: its
        // temporaries are held a row at a time, not in the arena.
        let p = program(
            "graph<R, C> sm(x: f32[R, C]) -> (y: f32[R, C]) {
                y = softmax(x, axis=-1)
                return y
            }",
            &[("R", 4), ("C", 64)],
        );
        assert_eq!(p.calls().len(), 1, "{:?}", p.calls());
        assert!(plan(&p).slots.is_empty());
    }
}

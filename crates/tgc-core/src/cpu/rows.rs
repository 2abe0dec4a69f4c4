//! Row groups: consecutive plain kernels that share their outermost output
//! loop run as one nest over it, kernel after kernel inside each of its
//! points, so that a softmax's max, exp, sum and division (or a
//! layernorm's mean, variance and normalisation) pass over one row while it
//! is in cache instead of each streaming the whole tensor.
//!
//! Fusion at the outermost loop is the classic legality rule of loop
//! fusion: it keeps every dependence of the sequence when each kernel reads
//! what an earlier kernel of the group wrote only at the same value of that
//! loop ([`in_row`]). A temporary written and read only inside its group,
//! each access in the same row, needs no more than one row per task: it is
//! *local* ([`RowGroup::local`]) and printers may hold it as one row
//! (array contraction) instead of allocating the whole tensor.
//!
//! A row group changes the order in which kernels visit points and nothing
//! a point computes, so its bits are the kernels' one after the other
//! ([`super::loop_ir`]'s invariant for schedules).

use std::collections::BTreeSet;

use crate::affine::{AffAtom, AffExpr};
use crate::sym::Dim;

use super::loop_ir::{BufId, Expr, Kernel, Program, Role, RowGroup};

/// Sets [`Program::rows`]: every maximal run of at least two kernels of
/// [`can_join`]'s form whose outermost loops have one extent and whose
/// reads of the run's own outputs stay in the current row, with the run's
/// local temporaries.
///
/// A kernel met inside a run that cannot join it but reads nothing the run
/// wrote (a layernorm's element count, a reduction of a constant) is moved
/// before the run: it depended on nothing the run computes, and the run's
/// later kernels still find its output written. Any other kernel ends the
/// run. The kernels keep their names; [`Program::kernels`] is their new
/// order.
pub fn plan(p: &mut Program) {
    let mut pending: std::collections::VecDeque<Kernel> = std::mem::take(&mut p.kernels).into();
    let mut order: Vec<Kernel> = Vec::new();
    let mut rows = Vec::new();
    while let Some(k) = pending.pop_front() {
        if !can_join(&k) {
            order.push(k);
            continue;
        }
        let mut run = vec![k];
        let mut written = BTreeSet::from([run[0].out]);
        while let Some(next) = pending.front() {
            let run_reads: Vec<(BufId, &AffExpr)> =
                next.loads().into_iter().filter(|(b, _)| written.contains(b)).collect();
            // A gathered read may land in any row: the run must be done.
            let gathers_run = next.gathers().iter().any(|b| written.contains(b));
            let fits = can_join(next)
                && !gathers_run
                && next.loops[0] == run[0].loops[0]
                && run_reads.iter().all(|&(b, index)| in_row(p, next, b, index));
            if fits {
                written.insert(next.out);
                run.extend(pending.pop_front());
            } else if run_reads.is_empty() && !gathers_run {
                order.extend(pending.pop_front());
            } else {
                break;
            }
        }
        let start = order.len();
        let n = run.len();
        order.extend(run);
        if n >= 2 {
            rows.push(RowGroup { kernels: start..start + n, local: Vec::new() });
        }
    }
    p.kernels = order;
    let loads: Vec<Vec<(BufId, &AffExpr)>> = p.kernels.iter().map(Kernel::loads).collect();
    let gathered: BTreeSet<BufId> = p.kernels.iter().flat_map(Kernel::gathers).collect();
    for g in &mut rows {
        g.local = local_temps(p, &loads, &gathered, g.kernels.clone());
    }
    p.rows = rows;
}

/// The rows a kernel alone on the pool (not in a row group) is cut into
/// parts across: its first `part_loops(k)` output loops, flattened — the
/// fewest leading loops whose points number at least [`MIN_PART_ROWS`]
/// (or have a symbolic count), never the innermost of two or more (the
/// one the vectoriser takes). A batch-1 NCHW kernel's `i0` has one point:
/// cut across it alone, a max pool of SqueezeNet ran on one thread.
pub fn part_loops(k: &Kernel) -> usize {
    let most = k.loops.len().saturating_sub(1).max(1);
    let mut points = 1i64;
    for (d, e) in k.loops.iter().enumerate().take(most) {
        match e.as_int() {
            Some(n) => points = points.saturating_mul(n),
            None => return d + 1,
        }
        if points >= MIN_PART_ROWS {
            return d + 1;
        }
    }
    most
}

/// The least number of rows [`part_loops`] cuts a kernel across: enough
/// for every core of a server to get several, so that parts of whole rows
/// balance.
pub const MIN_PART_ROWS: i64 = 256;

/// Whether a kernel can be part of a row group: a plain nest (neither
/// packed nor strip-mined, not a scan) with an outermost output loop.
pub fn can_join(k: &Kernel) -> bool {
    k.packed.is_none() && k.strips.is_empty() && k.scan.is_none() && !k.loops.is_empty()
}

/// Whether, in a row group, the split reduction `reduce` can run inside
/// the innermost loop of `elementwise`, the kernel just before it (a
/// softmax's `exp` and its sum; also two kernels that only share the row,
/// as a softmax's division and a layernorm's sum of the same `x`):
/// `elementwise` is a plain two-loop nest `(row, j)`; `reduce` has one
/// output loop (the same row), one reduce loop over `j`'s extent, split
/// lanes ([`super::lanes`]), no reduction computed at its reads, and reads
/// `elementwise`'s output, if at all, only in its reduced value and only
/// at the point `elementwise` just stored. Then the fused
/// loop stores point `j` and adds it to lane `j mod L` in the order the
/// two loops had, so every value and every lane's sum are the same bits;
/// what it saves is the second pass over the row. The C printer fuses
/// such pairs.
pub fn reduces_in_producer_loop(elementwise: &Kernel, reduce: &Kernel) -> bool {
    let Some(r) = &reduce.reduce else { return false };
    let shapes_fit = can_join(elementwise)
        && can_join(reduce)
        && elementwise.reduce.is_none()
        && elementwise.loops.len() == 2
        && reduce.loops.len() == 1
        && reduce.loops[0] == elementwise.loops[0]
        && reduce.lanes > 1
        && r.loops.len() == 1
        && r.loops[0] == elementwise.loops[1]
        && reduce.computed_at().is_empty();
    if !shapes_fit {
        return false;
    }
    let reads_it = |e: &Expr| matches!(e, Expr::Load { buf, .. } | Expr::Gather { buf, .. } if *buf == elementwise.out);
    let mut stored_value_reads_it = false;
    reduce.value.walk(&mut |e| stored_value_reads_it |= reads_it(e));
    let mut only_the_stored_point = true;
    r.value.walk(&mut |e| {
        let at_store = matches!(e, Expr::Load { index, .. } if *index == elementwise.store_index);
        only_the_stored_point &= !reads_it(e) || at_store;
    });
    !stored_value_reads_it && only_the_stored_point
}

/// Whether, in a row group `ks` (its kernels in order), the last kernel
/// can run one row late, inside the fused loop of the two kernels before
/// it ([`reduces_in_producer_loop`]: a softmax's division of row `i0 − 1`
/// inside the `exp` and sum loop of row `i0`), chunk by chunk, each chunk
/// of it before the same chunk of that loop. It must be a plain two-loop
/// nest over the same loops as the producer with nothing computed at its
/// reads; it may read the producer's output only at the point it stores
/// (the chunk reads the previous row's values there before the producer
/// overwrites them), the reduction's output anywhere (stored after the
/// loop), and nothing that an earlier kernel of the group writes; no
/// kernel of the group reads its output. Every value is computed from the
/// same operands as in the plain order, so the bits are the same; what it
/// gains is overlap: the division's long-latency operations run beside
/// the `exp` polynomial's instead of in a pass of their own (the printed
/// C through the runtime, one thread of an AVX-512 EPYC,
/// scratch driver, best of 40 or 100 calls: softmax 4096×1024 2.22–2.33 ms
/// before, 2.05–2.06 after; layernorm 4096×384 0.30 before, 0.25 after).
pub fn defers_into_producer_loop(ks: &[&Kernel]) -> bool {
    let [before @ .., producer, reduce, last] = ks else { return false };
    if !reduces_in_producer_loop(producer, reduce) {
        return false;
    }
    let shapes_fit =
        can_join(last) && last.reduce.is_none() && last.loops == producer.loops && last.computed_at().is_empty();
    if !shapes_fit || ks.iter().any(|k| k.reads().contains(&last.out)) {
        return false;
    }
    let earlier: Vec<BufId> = before.iter().map(|k| k.out).collect();
    let mut ok = true;
    last.value.walk(&mut |e| match e {
        Expr::Load { buf, index, .. } => {
            ok &= !earlier.contains(buf) && (*buf != producer.out || *index == producer.store_index);
        }
        Expr::Gather { buf, .. } => ok &= !earlier.contains(buf) && *buf != producer.out,
        _ => {}
    });
    ok
}

/// Whether `index`, a subscript of buffer `buf` in kernel `k`, addresses
/// row `i0` of `buf` and nothing outside it: `stride_0·i0 + Σ stride_j·v_j`
/// with `stride_j` the row-major stride of axis `j`, each `v_j` a loop of
/// `k` whose extent is `buf`'s axis `j`, on distinct axes `j ≥ 1` — so the
/// rest of the subscript lies in `[0, stride_0)` — where `i0`'s extent is
/// `buf`'s first axis.
pub fn in_row(p: &Program, k: &Kernel, buf: BufId, index: &AffExpr) -> bool {
    let shape = &p.buffer(buf).shape;
    if shape.is_empty() || k.loops.first() != shape.first() || index.constant_part().as_int() != Some(0) {
        return false;
    }
    let strides: Vec<Dim> = (0..shape.len()).map(|j| Dim::product(&shape[j + 1..])).collect();
    let mut used = vec![false; shape.len()];
    for (atom, c) in index.terms() {
        let AffAtom::Var(v) = atom else { return false };
        let v = *v as usize;
        let Some(extent) = k.extent(v) else { return false };
        let axis = if v == 0 {
            (*c == strides[0]).then_some(0)
        } else {
            (1..shape.len()).find(|&j| !used[j] && *c == strides[j] && *extent == shape[j])
        };
        match axis {
            Some(j) => used[j] = true,
            None => return false,
        }
    }
    used[0]
}

/// The temporaries of `kernels` that are written there and read only there,
/// every access in the current row, and gathered from nowhere; `loads[j]`
/// is kernel `j`'s [`Kernel::loads`], `gathered` every buffer a kernel
/// gathers from ([`Kernel::gathers`]).
fn local_temps(
    p: &Program,
    loads: &[Vec<(BufId, &AffExpr)>],
    gathered: &BTreeSet<BufId>,
    kernels: std::ops::Range<usize>,
) -> Vec<BufId> {
    let mut local = Vec::new();
    for k in &p.kernels[kernels.clone()] {
        let b = k.out;
        if p.buffer(b).role != Role::Temp || gathered.contains(&b) || !in_row(p, k, b, &k.store_index) {
            continue;
        }
        let only_here = p.kernels.iter().zip(loads).enumerate().all(|(j, (r, l))| {
            let mut reads = l.iter().filter(|(x, _)| *x == b).peekable();
            reads.peek().is_none() || (kernels.contains(&j) && reads.all(|&(_, index)| in_row(p, r, b, index)))
        });
        if only_here {
            local.push(b);
        }
    }
    local
}

/// `index` with the current row's part removed: its subscript in a local
/// temporary held as one row ([`in_row`] holds for it).
pub fn row_subscript(index: &AffExpr) -> AffExpr {
    let vals: Vec<AffExpr> =
        (0..index.arity()).map(|v| if v == 0 { AffExpr::int(0) } else { AffExpr::var(v) }).collect();
    index.substitute(&vals).expect("every variable of the subscript has a value")
}

/// The number of elements of one row of `buf` (its row-major stride of
/// axis 0).
pub fn row_len(p: &Program, buf: BufId) -> Dim {
    Dim::product(&p.buffer(buf).shape[1..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::lower;
    use crate::pipeline::{load, Format};

    fn program(src: &str) -> Program {
        let g = load(src, Format::Dsl, None).unwrap_or_else(|e| panic!("{e:?}")).graph;
        lower(&g).unwrap()
    }

    #[test]
    fn softmax_is_one_group_with_its_temporaries_local() {
        let p = program(
            "graph<R, C> main(x: f32[R, C]) -> (y: f32[R, C]) {
                y = softmax(x, axis=-1)
                return y
            }",
        );
        assert_eq!(p.rows.len(), 1, "{:?}", p.rows);
        let g = &p.rows[0];
        assert_eq!(g.kernels, 0..p.kernels.len());
        let temps: Vec<BufId> =
            (0..p.buffers.len() as u32).map(BufId).filter(|&b| p.buffer(b).role == Role::Temp).collect();
        assert!(!temps.is_empty());
        assert_eq!(g.local, temps);
    }

    #[test]
    fn a_transposed_read_ends_the_group() {
        // `t` is read at [j, i]: row i of the reader is column i of `t`.
        let p = program(
            "graph<N> main(x: f32[N, N]) -> (y: f32[N, N]) {
                t = exp2(x)
                y = t + transpose(t, 0, 1)
                return y
            }",
        );
        assert_eq!(p.kernels.len(), 2, "t is stored, then read transposed");
        assert!(p.rows.is_empty(), "{:?}", p.rows);
    }

    #[test]
    fn a_temporary_read_after_its_group_is_not_local() {
        let p = program(
            "graph<R, C> main(x: f32[R, C], w: f32[C, C]) -> (y: f32[R, C]) {
                s = softmax(x, axis=-1)
                y = matmul(s, w) + s
                return y
            }",
        );
        assert!(!p.rows.is_empty());
        for g in &p.rows {
            for &b in &g.local {
                let after = p.kernels[g.kernels.end..].iter().any(|k| k.reads().contains(&b));
                assert!(!after, "{} is read after its group", p.buffer(b).name);
            }
        }
    }

    /// Softmax's exp and its sum, its division and layernorm's sum of `x`
    /// (independent), and layernorm's centring and its sum of squares fuse;
    /// a sum reading a point of the row not yet stored, one not split into
    /// lanes, or the pair in the other order does not.
    #[test]
    fn a_split_reduction_runs_in_its_producers_loop_only_at_the_stored_point() {
        let p = program(
            "graph<R, C> main(x: f32[R, C], g: f32[C], b: f32[C]) -> (y: f32[R, C], z: f32[R, C]) {
                y = softmax(x, axis=-1)
                z = layernorm(x, g, b, axis=-1, eps=1e-5)
                return y, z
            }",
        );
        let pairs: Vec<(usize, usize)> = (1..p.kernels.len())
            .filter(|&j| reduces_in_producer_loop(&p.kernels[j - 1], &p.kernels[j]))
            .map(|j| (j - 1, j))
            .collect();
        assert_eq!(pairs.len(), 3, "exp + sum, division + sum of x, centring + sum of squares: {pairs:?}");
        let (e, r) = (&p.kernels[pairs[0].0], &p.kernels[pairs[0].1]);
        let mut other_point = r.clone();
        let red = other_point.reduce.as_mut().unwrap();
        // The sum's value is the load of the exp's row; read the next point
        // instead, which the fused loop has not stored yet.
        let Expr::Load { buf, index, .. } = &mut red.value else { panic!("{:?}", red.value) };
        assert_eq!(*buf, e.out);
        *index = index.substitute(&[AffExpr::var(0), AffExpr::parse("i1 + 1").unwrap()]).unwrap();
        assert!(!reduces_in_producer_loop(e, &other_point));
        assert!(!reduces_in_producer_loop(e, &Kernel { lanes: 1, ..r.clone() }));
        assert!(!reduces_in_producer_loop(r, e), "the order matters");
    }

    #[test]
    fn row_subscript_drops_the_row() {
        let e = AffExpr::parse("1024*i0 + i1").unwrap();
        assert_eq!(row_subscript(&e), AffExpr::var(1));
    }
}

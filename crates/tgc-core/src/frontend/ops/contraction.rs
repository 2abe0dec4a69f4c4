//! `matmul` with tinygrad's explicit-broadcast semantics (`spec/001` §0,
//! `spec/002` §5.1): no contraction op, only movement + `MUL` + `REDUCE SUM`.

use crate::diag;
use crate::diag::DResult;
use crate::sym::Dim;
use crate::tiny::infer::fmt_shape;
use crate::tiny::{BinaryOp, Graph, NodeId, ReduceOp};
use crate::DType;

use super::{broadcast_shape, broadcast_to, cast_to, fail};

/// `matmul(a, b)` as tinygrad's `dot`, then `CAST` back to the operands'
/// dtype (see [`matmul_acc`]). Exact products; the sum's error is that of
/// an f32 accumulation of K terms.
///
/// Shapes: `[..., M, K] · [..., K, N] → [..., M, N]` with broadcast batch
/// axes; `[K]·[K, N] → [N]`, `[M, K]·[K] → [M]`, `[K]·[K] → []`.
pub fn matmul(g: &mut Graph, a: NodeId, b: NodeId) -> DResult<NodeId> {
    let dt = g.dtype(a);
    let r = matmul_acc(g, a, b)?;
    cast_to(g, r, dt)
}

/// tinygrad's `dot` up to the accumulator, returned without the final cast
/// (f32 for float operands, i32 for i32):
///
/// 1. `axis_w = -min(b.ndim, 2)` (the K axis of `b`);
/// 2. `a.reshape(*a[:-1], *[1]*min(na-1, nb-1, 1), K)`;
/// 3. `b.reshape(*b[:-2], *[1]*min(na-1, nb-1, 1), *b[axis_w:])`, then
///    `transpose(-1, axis_w)` so K is last;
/// 4. right-aligned broadcast (`RESHAPE` + `EXPAND`), `MUL`,
///    `REDUCE SUM` over the last axis.
///
/// Errors: `AxisSizeMismatch` for a rank-0 operand or inner sizes that
/// differ, `BroadcastMismatch` for batch axes that do not broadcast,
/// `DTypeMismatch` for operands of different dtypes or bools.
pub fn matmul_acc(g: &mut Graph, a: NodeId, b: NodeId) -> DResult<NodeId> {
    let (sa, sb) = (g.shape(a).to_vec(), g.shape(b).to_vec());
    let (na, nb) = (sa.len(), sb.len());
    if na == 0 || nb == 0 {
        return Err(fail(
            g,
            diag!(AxisSizeMismatch, "matmul needs operands of rank ≥ 1, got {} and {}", fmt_shape(&sa), fmt_shape(&sb)),
        ));
    }
    let (da, db) = (g.dtype(a), g.dtype(b));
    if da != db || da == DType::Bool {
        return Err(fail(
            g,
            diag!(DTypeMismatch, "matmul operands have dtypes {da} and {db}; they must be the same numeric dtype"),
        ));
    }
    let kw = nb - nb.min(2);
    if sa[na - 1] != sb[kw] {
        return Err(fail(
            g,
            diag!(
                AxisSizeMismatch,
                "matmul inner sizes differ: {} has K = {} but {} has {}",
                fmt_shape(&sa),
                sa[na - 1],
                fmt_shape(&sb),
                sb[kw]
            ),
        ));
    }
    let ins = (na - 1).min(nb - 1).min(1);
    let mut xa: Vec<Dim> = sa[..na - 1].to_vec();
    xa.extend(std::iter::repeat_n(Dim::int(1), ins));
    xa.push(sa[na - 1].clone());
    let mut wb: Vec<Dim> = sb[..nb.saturating_sub(2)].to_vec();
    wb.extend(std::iter::repeat_n(Dim::int(1), ins));
    wb.extend(sb[kw..].iter().cloned());
    let x = if xa != sa { g.reshape(a, &xa)? } else { a };
    let mut w = if wb != sb { g.reshape(b, &wb)? } else { b };
    if nb >= 2 {
        let r = wb.len();
        let mut p: Vec<usize> = (0..r).collect();
        p.swap(r - 1, r - 2);
        w = g.permute(w, &p)?;
    }
    let shape = broadcast_shape(g, g.shape(x), g.shape(w))?;
    let x = broadcast_to(g, x, &shape)?;
    let w = broadcast_to(g, w, &shape)?;
    let p = g.binary(BinaryOp::Mul, x, w)?;
    let acc = if da.is_float() { DType::F32 } else { DType::I32 };
    g.reduce(ReduceOp::Sum, p, &[shape.len() - 1], acc)
}

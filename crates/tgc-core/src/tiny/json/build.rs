//! The loader's graph builder: labels, and the normalisations the JSON
//! formats leave implicit (immediates, float promotion, broadcasting, EXPAND
//! rank, POOL). The rules are listed in the module doc of [`super`].

use std::collections::HashSet;

use crate::affine::AffExpr;
use crate::diag;
use crate::diag::DResult;
use crate::sym::Dim;
use crate::DType;

use super::super::graph::{Graph, NodeId};
use super::super::infer::fmt_shape;
use super::super::op::{Op, ReduceOp};
use super::fields::AxisRef;

/// A source of an element-wise node: a node or a numeric immediate.
#[derive(Clone, Copy, Debug)]
pub(super) enum Operand {
    Node(NodeId),
    Imm(f64),
}

/// A [`Graph`] under construction whose nodes carry the labels of the text.
pub(super) struct Builder {
    pub(super) g: Graph,
    /// Labels in use or reserved for nodes of the text not built yet.
    taken: HashSet<String>,
}

impl Builder {
    /// An empty graph; `reserved` are the labels the text will give its nodes,
    /// which helper nodes must not take.
    pub(super) fn new(name: &str, reserved: impl IntoIterator<Item = String>) -> Builder {
        Builder { g: Graph::new(name), taken: reserved.into_iter().collect() }
    }

    /// Adds a node labelled `label`.
    pub(super) fn add(
        &mut self,
        label: &str,
        op: Op,
        src: Vec<NodeId>,
        dtype: Option<DType>,
        shape: Option<&[Dim]>,
    ) -> DResult<NodeId> {
        let id = self.g.push(op, src, dtype, shape)?;
        self.g.set_label(id, label)?;
        self.taken.insert(label.to_string());
        Ok(id)
    }

    /// Reserves a new label `{base}.{what}` (with a number appended if taken).
    pub(super) fn fresh(&mut self, base: &str, what: &str) -> String {
        let mut label = format!("{base}.{what}");
        let mut k = 2;
        while self.taken.contains(&label) {
            label = format!("{base}.{what}{k}");
            k += 1;
        }
        self.taken.insert(label.clone());
        label
    }

    /// Adds a helper node labelled `{base}.{what}` (made unique).
    fn helper(
        &mut self,
        base: &str,
        what: &str,
        op: Op,
        src: Vec<NodeId>,
        dtype: Option<DType>,
        shape: Option<&[Dim]>,
    ) -> DResult<NodeId> {
        let label = self.fresh(base, what);
        self.add(&label, op, src, dtype, shape)
    }

    fn shape(&self, x: NodeId) -> Vec<Dim> {
        self.g.shape(x).to_vec()
    }

    /// `x` reshaped to `rank` by leading 1s (right alignment).
    fn lift_rank(&mut self, base: &str, x: NodeId, rank: usize) -> DResult<NodeId> {
        let s = self.shape(x);
        if s.len() >= rank {
            return Ok(x);
        }
        let to: Vec<Dim> = std::iter::repeat_n(Dim::int(1), rank - s.len()).chain(s).collect();
        self.helper(base, "reshape", Op::Reshape, vec![x], None, Some(&to))
    }

    /// An element-wise node (unary, binary, `WHERE`) after the loader's
    /// normalisations: immediates become constants, float operands of
    /// different dtypes are cast to fp32, shapes are broadcast.
    pub(super) fn elementwise(&mut self, label: &str, op: Op, operands: &[Operand]) -> DResult<NodeId> {
        let is_where = matches!(op, Op::Where);
        let is_value = |k: usize| !is_where || k > 0;
        let dtypes: Vec<DType> = operands
            .iter()
            .enumerate()
            .filter_map(|(k, o)| match o {
                Operand::Node(n) if is_value(k) => Some(self.g.dtype(*n)),
                Operand::Node(_) | Operand::Imm(_) => None,
            })
            .collect();
        let common = promote(&dtypes);
        let mut ids = Vec::with_capacity(operands.len());
        for (k, o) in operands.iter().enumerate() {
            let id = match *o {
                Operand::Node(n) => match common {
                    Some(t) if is_value(k) && self.g.dtype(n) != t => {
                        self.helper(label, &format!("{k}.cast"), Op::Cast, vec![n], Some(t), None)?
                    }
                    _ => n,
                },
                Operand::Imm(v) => {
                    let dtype = if !is_value(k) {
                        DType::Bool
                    } else {
                        common.or(dtypes.first().copied()).ok_or_else(|| {
                            diag!(
                                SyntaxError,
                                "{} has only immediate operands: one must be a node to give the dtype",
                                op.name()
                            )
                        })?
                    };
                    self.helper(label, &format!("{k}.const"), Op::Const { value: v }, vec![], Some(dtype), None)?
                }
            };
            ids.push(id);
        }
        self.broadcast(label, &mut ids)?;
        self.add(label, op, ids, None, None)
    }

    /// Gives the operands one shape: the keepdim rule for reduce results, else
    /// right-aligned NumPy broadcasting; `BroadcastMismatch` otherwise.
    fn broadcast(&mut self, label: &str, ids: &mut [NodeId]) -> DResult<()> {
        let shapes: Vec<Vec<Dim>> = ids.iter().map(|&x| self.shape(x)).collect();
        if shapes.iter().all(|s| s == &shapes[0]) {
            return Ok(());
        }
        // (1) keepdim: an operand that is a reduce result of another's shape.
        for target in &shapes {
            let plan: Option<Vec<Option<Vec<usize>>>> = ids
                .iter()
                .zip(&shapes)
                .map(|(&x, s)| if s == target { Some(None) } else { self.reduced_from(x, target).map(Some) })
                .collect();
            if let Some(plan) = plan {
                for (k, axes) in plan.into_iter().enumerate() {
                    if let Some(axes) = axes {
                        let keep: Vec<Dim> = target
                            .iter()
                            .enumerate()
                            .map(|(a, d)| if axes.contains(&a) { Dim::int(1) } else { d.clone() })
                            .collect();
                        let r =
                            self.helper(label, &format!("{k}.keepdim"), Op::Reshape, vec![ids[k]], None, Some(&keep))?;
                        ids[k] = self.helper(label, &format!("{k}.expand"), Op::Expand, vec![r], None, Some(target))?;
                    }
                }
                return Ok(());
            }
        }
        // (2) right-aligned broadcasting.
        let out = numpy_broadcast(&shapes)?;
        for k in 0..ids.len() {
            if shapes[k] != out {
                let base = format!("{label}.{k}");
                let r = self.lift_rank(&base, ids[k], out.len())?;
                ids[k] = if self.g.shape(r) == out.as_slice() {
                    r
                } else {
                    self.helper(label, &format!("{k}.expand"), Op::Expand, vec![r], None, Some(&out))?
                };
            }
        }
        Ok(())
    }

    /// The axes a REDUCE removed when `x` is its result (possibly through
    /// element-wise nodes) and its input had shape `target`.
    fn reduced_from(&self, mut x: NodeId, target: &[Dim]) -> Option<Vec<usize>> {
        loop {
            let n = self.g.node(x);
            match &n.op {
                Op::Reduce { axes, .. } => return (self.g.shape(n.src[0]) == target).then(|| axes.clone()),
                op if op.is_elementwise() => x = *n.src.first()?,
                _ => return None,
            }
        }
    }

    /// `EXPAND` to `to`, right-aligning a lower-rank input; `bdims` (the output
    /// axes that are not broadcast) must agree with the shapes.
    pub(super) fn expand(&mut self, label: &str, x: NodeId, to: &[Dim], bdims: Option<&[i64]>) -> DResult<NodeId> {
        if self.g.shape(x).len() > to.len() {
            return Err(diag!(
                BroadcastMismatch,
                "EXPAND cannot lower the rank: {} to {}",
                fmt_shape(self.g.shape(x)),
                fmt_shape(to)
            ));
        }
        let x = self.lift_rank(label, x, to.len())?;
        if let Some(bd) = bdims {
            let from = self.shape(x);
            let listed = resolve_axes(
                &from,
                &bd.iter().map(|&i| AxisRef::Index(i)).collect::<Vec<_>>(),
                "broadcast_dimensions",
            )?;
            for (k, (a, b)) in from.iter().zip(to).enumerate() {
                let kept = listed.contains(&k);
                if kept && a != b {
                    return Err(diag!(
                        BroadcastMismatch,
                        "broadcast_dimensions lists axis {k}, but EXPAND {} to {} broadcasts it",
                        fmt_shape(&from),
                        fmt_shape(to)
                    ));
                }
                if !kept && !a.is_one() {
                    return Err(diag!(
                        BroadcastMismatch,
                        "broadcast_dimensions omits axis {k}, but it has size {a} in {}, not 1",
                        fmt_shape(&from)
                    ));
                }
            }
        }
        self.add(label, Op::Expand, vec![x], None, Some(to))
    }

    /// `REDUCE` with axes given by index or name.
    pub(super) fn reduce(
        &mut self,
        label: &str,
        op: ReduceOp,
        x: NodeId,
        axes: &[AxisRef],
        acc: Option<DType>,
    ) -> DResult<NodeId> {
        let axes = resolve_axes(self.g.shape(x), axes, "REDUCE")?;
        self.add(label, Op::Reduce { op, axes }, vec![x], acc, None)
    }

    /// `POOL` (decision 2): a sliding window over the last `kernel.len()`
    /// axes, lowered to a `VIEW` of shape `[.., O_1..O_n, K_1..K_n]` with
    /// `O_j = (D_j - dil_j*(K_j-1) - 1)/S_j + 1` reading `o_j*S_j + k_j*dil_j`.
    pub(super) fn pool(
        &mut self,
        label: &str,
        x: NodeId,
        kernel: &[Dim],
        stride: &[Dim],
        dilation: &[Dim],
    ) -> DResult<NodeId> {
        let s = self.shape(x);
        let (r, n) = (s.len(), kernel.len());
        if n == 0 || n > r {
            return Err(diag!(InvalidAxis, "POOL kernel has {n} entries for the {r} axes of {}", fmt_shape(&s)));
        }
        if stride.len() != n || dilation.len() != n {
            return Err(diag!(ArityMismatch, "POOL needs one stride and one dilation per kernel axis ({n})"));
        }
        for (what, v) in [("kernel", kernel), ("stride", stride), ("dilation", dilation)] {
            if let Some(d) = v.iter().find(|d| d.as_int().is_some_and(|i| i <= 0)) {
                return Err(diag!(NegativeStride, "POOL {what} {d} must be positive"));
            }
        }
        let mut shape: Vec<Dim> = s[..r - n].to_vec();
        let mut map: Vec<AffExpr> = (0..(r - n) as u32).map(AffExpr::var).collect();
        for j in 0..n {
            let span = &(&s[r - n + j] - &(&dilation[j] * &(&kernel[j] - &Dim::int(1)))) - &Dim::int(1);
            let o = span
                .floordiv(&stride[j])
                .ok_or_else(|| diag!(NegativeStride, "POOL stride {} must be positive", stride[j]))?;
            shape.push(&o + &Dim::int(1));
            let (oj, kj) = (AffExpr::var((r - n + j) as u32), AffExpr::var((r + j) as u32));
            map.push(&oj.scale(&stride[j]) + &kj.scale(&dilation[j]));
        }
        shape.extend(kernel.iter().cloned());
        self.add(label, Op::View { map }, vec![x], None, Some(&shape))
    }
}

/// The dtype float operands of different widths are promoted to: f32 (the
/// only float wider than f16 and bf16, and their common supertype). `None`
/// when the dtypes agree or are not all floats (then the rule of `infer`
/// reports the mismatch).
fn promote(dtypes: &[DType]) -> Option<DType> {
    let first = *dtypes.first()?;
    if dtypes.iter().all(|&d| d == first) {
        return Some(first);
    }
    dtypes.iter().all(|d| d.is_float()).then_some(DType::F32)
}

/// Right-aligned NumPy broadcasting of `shapes`.
fn numpy_broadcast(shapes: &[Vec<Dim>]) -> DResult<Vec<Dim>> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![Dim::int(1); rank];
    for s in shapes {
        for (k, d) in s.iter().enumerate() {
            let o = &mut out[rank - s.len() + k];
            if o.is_one() {
                *o = d.clone();
            } else if d != &*o && !d.is_one() {
                let all: Vec<String> = shapes.iter().map(|s| fmt_shape(s)).collect();
                return Err(diag!(BroadcastMismatch, "shapes {} do not broadcast: {d} against {o}", all.join(" and ")));
            }
        }
    }
    Ok(out)
}

/// Axis indices of `shape` for `axes` (spec/README decision 4): integers count
/// from the end when negative; a name must match exactly one axis whose size
/// is that symbol. Errors are `InvalidAxis`.
pub(super) fn resolve_axes(shape: &[Dim], axes: &[AxisRef], what: &str) -> DResult<Vec<usize>> {
    let r = shape.len() as i64;
    axes.iter()
        .map(|a| match a {
            AxisRef::Index(i) => {
                let k = if *i < 0 { i + r } else { *i };
                if (0..r).contains(&k) {
                    Ok(k as usize)
                } else {
                    Err(diag!(InvalidAxis, "{what} axis {i} is out of range for {}", fmt_shape(shape)))
                }
            }
            AxisRef::Name(name) => {
                let hits: Vec<usize> = (0..shape.len()).filter(|&k| shape[k].as_sym() == Some(name.as_str())).collect();
                match hits.as_slice() {
                    [k] => Ok(*k),
                    [] => Err(diag!(InvalidAxis, "{what} axis `{name}` names no axis of {}", fmt_shape(shape))),
                    _ => Err(diag!(
                        InvalidAxis,
                        "{what} axis `{name}` names axes {hits:?} of {}; use an index",
                        fmt_shape(shape)
                    )),
                }
            }
        })
        .collect()
}

//! ONNX `RotaryEmbedding` (opset 23) as slices, products and a concat,
//! in the steps of the reference (`onnx/reference/ops/op_rotary_embedding.py`):
//! the input as `[B, S, H, D]`; the first `rotary_embedding_dim` (`R`,
//! default `D`) features of each head rotated by the cos/sin caches
//! (`[B, S, R/2]`, or rows picked by `position_ids`): with `x1, x2` the
//! two halves (or, `interleaved`, the even and odd features), `real =
//! cos·x1 − sin·x2`, `imag = sin·x1 + cos·x2` put back in the same
//! places; the other features unchanged.

use crate::diag;
use crate::diag::DResult;
use crate::frontend::ir::*;
use crate::sym::Dim;

use super::super::Builder;
use super::{bin, val, N};

/// Features `[lo, hi)` every `step` of the last axis of `x`.
fn features(b: &mut Builder, x: ValueId, lo: &Dim, hi: &Dim, step: i64) -> DResult<ValueId> {
    let s = b.shape(x)?;
    let mut bounds: Vec<(Dim, Dim, Dim)> = s.iter().map(|d| (Dim::int(0), d.clone(), Dim::int(1))).collect();
    if let Some(last) = bounds.last_mut() {
        *last = (lo.clone(), hi.clone(), Dim::int(step));
    }
    b.emit(FOp::Movement(Movement::Slice { bounds }), vec![val(x)])
}

pub(super) fn rotary_embedding(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let x = b.run(n.required(0)?)?;
    let xs = b.shape(x)?;
    let mut v = match xs.len() {
        4 => b.emit(FOp::Movement(Movement::Permute { perm: vec![0, 2, 1, 3] }), vec![val(x)])?,
        3 => {
            let h =
                n.a.int("num_heads")?
                    .filter(|&h| h > 0)
                    .ok_or_else(|| diag!(SyntaxError, "RotaryEmbedding of a 3-D input needs a positive `num_heads`"))?;
            let d = xs[2].floordiv(&Dim::int(h)).ok_or_else(|| diag!(AxisSizeMismatch, "{h} heads"))?;
            let split = vec![xs[0].clone(), xs[1].clone(), Dim::int(h), d];
            b.emit(FOp::Movement(Movement::Reshape { shape: split }), vec![val(x)])?
        }
        r => return Err(diag!(AxisSizeMismatch, "RotaryEmbedding of a rank-{r} input (3 or 4)")),
    };
    let head = b.shape(v)?[3].clone();
    let rd = match n.a.int_or("rotary_embedding_dim", 0)? {
        0 => head.clone(),
        r => Dim::int(r),
    };
    let half = rd
        .floordiv(&Dim::int(2))
        .filter(|h| h * &Dim::int(2) == rd)
        .ok_or_else(|| diag!(AxisSizeMismatch, "RotaryEmbedding's rotary dimension {rd} is not even"))?;
    let mut caches = Vec::new();
    for k in [1, 2] {
        let mut c = b.run(n.required(k)?)?;
        if let Some(p) = n.input(3) {
            let p = b.run(p)?;
            c = b.emit(FOp::Take { axis: 0 }, vec![val(c), val(p)])?;
        }
        let cs = b.shape(c)?;
        if cs.len() != 3 || cs[2] != half {
            return Err(diag!(
                AxisSizeMismatch,
                "RotaryEmbedding's {} cache rows of {:?} do not hold {half} values (half the rotary dimension)",
                if k == 1 { "cos" } else { "sin" },
                cs
            ));
        }
        caches.push(b.emit(FOp::Movement(Movement::Unsqueeze { axes: vec![2] }), vec![val(c)])?);
    }
    let (cos, sin) = (caches[0], caches[1]);
    let interleaved = n.a.int_or("interleaved", 0)? != 0;
    let zero = Dim::int(0);
    let (x1, x2) = if interleaved {
        (features(b, v, &zero, &rd, 2)?, features(b, v, &Dim::int(1), &rd, 2)?)
    } else {
        (features(b, v, &zero, &half, 1)?, features(b, v, &half, &rd, 1)?)
    };
    let product = |b: &mut Builder, c: ValueId, x: ValueId| bin(b, BinaryFn::Mul, val(c), val(x));
    let (cx1, sx2) = (product(b, cos, x1)?, product(b, sin, x2)?);
    let real = bin(b, BinaryFn::Sub, val(cx1), val(sx2))?;
    let (sx1, cx2) = (product(b, sin, x1)?, product(b, cos, x2)?);
    let imag = bin(b, BinaryFn::Add, val(sx1), val(cx2))?;
    let mut rotated = if interleaved {
        let pair =
            |b: &mut Builder, t: ValueId| b.emit(FOp::Movement(Movement::Unsqueeze { axes: vec![-1] }), vec![val(t)]);
        let (r, i) = (pair(b, real)?, pair(b, imag)?);
        let joined = b.emit(FOp::Pieces(Pieces::Concat { axis: -1 }), vec![val(r), val(i)])?;
        let mut shape = b.shape(v)?;
        shape[3] = rd.clone();
        b.emit(FOp::Movement(Movement::Reshape { shape }), vec![val(joined)])?
    } else {
        b.emit(FOp::Pieces(Pieces::Concat { axis: -1 }), vec![val(real), val(imag)])?
    };
    if rd != head {
        let rest = features(b, v, &rd, &head, 1)?;
        rotated = b.emit(FOp::Pieces(Pieces::Concat { axis: -1 }), vec![val(rotated), val(rest)])?;
    }
    v = rotated;
    if xs.len() == 4 {
        return b.emit(FOp::Movement(Movement::Permute { perm: vec![0, 2, 1, 3] }), vec![val(v)]);
    }
    b.emit(FOp::Movement(Movement::Reshape { shape: xs }), vec![val(v)])
}

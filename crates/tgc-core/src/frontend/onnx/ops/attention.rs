//! ONNX `Attention` (opsets 23–25), step by step as the reference
//! implementation (`onnx/reference/ops/op_attention.py`) orders them:
//!
//! 1. 3-D operands `[B, S, H·D]` are split into heads (`q_num_heads`,
//!    `kv_num_heads`) as `[B, H, S, D]`;
//! 2. a key/value cache is joined before the new keys and values
//!    (`present = concat(past, new)` on the sequence axis, outputs 1 and 2);
//! 3. the additive bias `[.., Sq, Skv]`: the mask (a bool mask as `0` where
//!    true and `−inf` where false; a shorter mask padded with `−inf` or
//!    false to `Skv`), the causal bias `j ≤ i + offset` and the sliding
//!    window `i + offset − left ≤ j ≤ i + offset + right`, whose offset is
//!    the past length, or per batch `nonpad_kv_seqlen[b] − Sq`, and the
//!    padding bias `j < nonpad_kv_seqlen[b]`;
//! 4. fewer key/value heads than query heads are repeated in place
//!    (grouped-query attention);
//! 5. `scores = (Q·√scale)·(K·√scale)ᵀ` in the input type, `softcap·tanh(
//!    scores/softcap)` when `softcap > 0`, `+ bias`, softmax over the keys
//!    (in `softmax_precision`), zero for a row whose bias is all `−inf`
//!    (a fully masked row), then `·V`.
//!
//! Output 3 is the scores after softcap (`qk_matmul_output_mode` 0 and
//! 1, as the reference computes them), with the bias (2) or the
//! probabilities (3). The plain form (no cache, softcap, window, padding
//! lengths or output 3) is the fused [`FOp::Attention`] the backends'
//! attention templates recognise, with the fully-masked-row guard after it
//! when there is a mask.

use crate::diag;
use crate::diag::DResult;
use crate::frontend::ir::*;
use crate::sym::Dim;
use crate::DType;

use super::super::proto;
use super::super::{Builder, Val};
use super::{bin, iota, unary, val, N};

/// What the bias of step 3 is made of.
struct Bias {
    /// The mask padded to the key length (bool or float).
    mask: Option<ValueId>,
    causal: bool,
    /// `(left, right)` window sizes, `-1` for an unbounded side.
    window: (i64, i64),
    /// The past length (the causal and window offset without padding
    /// lengths).
    past: Dim,
    /// `nonpad_kv_seqlen` (i32 `[B]`).
    nonpad: Option<ValueId>,
    q_len: Dim,
    kv_len: Dim,
    /// The input type.
    dt: DType,
}

pub(super) fn attention(b: &mut Builder, n: &N) -> DResult<Vec<Val>> {
    let q_heads = n.a.int("q_num_heads")?;
    let kv_heads = n.a.int("kv_num_heads")?;
    let three = {
        let q = b.run(n.required(0)?)?;
        b.shape(q)?.len() == 3
    };
    let mut qkv = Vec::new();
    for (k, h) in [q_heads, kv_heads, kv_heads].into_iter().enumerate() {
        let mut v = b.run(n.required(k)?)?;
        let s = b.shape(v)?;
        if three {
            let h = h.ok_or_else(|| diag!(SyntaxError, "3-D Attention needs q_num_heads and kv_num_heads"))?;
            let d = s[2].floordiv(&Dim::int(h)).ok_or_else(|| diag!(AxisSizeMismatch, "{h} heads"))?;
            let split = vec![s[0].clone(), s[1].clone(), Dim::int(h), d];
            v = b.emit(FOp::Movement(Movement::Reshape { shape: split }), vec![val(v)])?;
            v = b.emit(FOp::Movement(Movement::Permute { perm: vec![0, 2, 1, 3] }), vec![val(v)])?;
        } else if s.len() != 4 {
            return Err(diag!(AxisSizeMismatch, "Attention operands of rank {}", s.len()));
        }
        qkv.push(v);
    }
    let (q, mut k, mut v) = (qkv[0], qkv[1], qkv[2]);
    let dt = b.dtype(q)?;
    let mut past = Dim::int(0);
    match (n.input(4), n.input(5)) {
        (None, None) => {}
        (Some(pk), Some(pv)) => {
            let (pk, pv) = (b.run(pk)?, b.run(pv)?);
            past = b.shape(pk)?.get(2).cloned().ok_or_else(|| diag!(AxisSizeMismatch, "past_key of rank below 3"))?;
            k = b.emit(FOp::Pieces(Pieces::Concat { axis: 2 }), vec![val(pk), val(k)])?;
            v = b.emit(FOp::Pieces(Pieces::Concat { axis: 2 }), vec![val(pv), val(v)])?;
        }
        _ => return Err(diag!(SyntaxError, "Attention's past_key and past_value must be given together")),
    }
    let nonpad = n.input(6).map(|s| b.run(s)).transpose()?;
    if nonpad.is_some() && n.input(4).is_some() {
        return Err(diag!(SyntaxError, "Attention's nonpad_kv_seqlen cannot be combined with a past key/value cache"));
    }
    let (present_k, present_v) = (k, v);
    let (qs, ks) = (b.shape(q)?, b.shape(k)?);
    let window = (n.a.int_or("left_window_size", -1)?, n.a.int_or("right_window_size", -1)?);
    if window.0 < -1 || window.1 < -1 {
        return Err(diag!(SyntaxError, "Attention window sizes must be -1 or at least 0, not {window:?}"));
    }
    let softcap = n.a.float_or("softcap", 0.0)?;
    let mode = n.a.int_or("qk_matmul_output_mode", 0)?;
    if !(0..=3).contains(&mode) {
        return Err(diag!(Unsupported, "Attention qk_matmul_output_mode={mode} (0 to 3 are defined)"));
    }
    let precision = softmax_precision(n, dt)?;
    let mask = n.input(3).map(|m| padded_mask(b, m, &ks[2])).transpose()?;
    let causal = n.a.int_or("is_causal", 0)? != 0;
    let bias = Bias { mask, causal, window, past, nonpad, q_len: qs[2].clone(), kv_len: ks[2].clone(), dt };

    // Grouped-query attention: each key/value head serves `rep` query heads.
    let (hq, hk) = (&qs[1], &ks[1]);
    if hq != hk {
        let rep = hq
            .floordiv(hk)
            .filter(|r| &(r * hk) == hq)
            .ok_or_else(|| diag!(AxisSizeMismatch, "{hq} query heads are not a multiple of {hk} key/value heads"))?;
        for t in [&mut k, &mut v] {
            *t = b.emit(FOp::Movement(Movement::RepeatInterleave { repeats: rep.clone(), axis: 1 }), vec![val(*t)])?;
        }
    }
    let plain = n.input(4).is_none()
        && bias.nonpad.is_none()
        && softcap <= 0.0
        && !n.wants(3)
        && window == (-1, -1)
        && precision == DType::F32;
    let mut out3 = None;
    let mut y = if plain {
        let scale = n.a.has("scale").then(|| n.a.float_or("scale", 1.0)).transpose()?;
        let mut args = vec![val(q), val(k), val(v)];
        args.extend(mask.map(val));
        let y = b.emit(FOp::Attention { mask: mask.is_some(), causal, scale }, args)?;
        // Only a mask can leave a row without keys (causal row `i` keeps key 0).
        match mask {
            Some(_) => {
                let full = bias_of(b, &bias)?.ok_or_else(|| diag!(Internal, "a mask without a bias"))?;
                zero_masked_rows(b, full, y)?
            }
            None => y,
        }
    } else {
        let scale = if n.a.has("scale") {
            n.a.float_or("scale", 1.0)?
        } else {
            let d = qs[3]
                .as_int()
                .ok_or_else(|| diag!(Unsupported, "Attention over a symbolic head size `{}` without `scale`", qs[3]))?;
            1.0 / (d as f64).sqrt()
        };
        let root = b.lit(scale.sqrt(), LitKind::Float);
        let qm = bin(b, BinaryFn::Mul, val(q), root)?;
        let km = bin(b, BinaryFn::Mul, val(k), root)?;
        let kt = b.emit(FOp::Movement(Movement::Transpose { a: -2, b: -1 }), vec![val(km)])?;
        let mut scores = b.emit(FOp::Matmul, vec![val(qm), val(kt)])?;
        if softcap > 0.0 {
            let cap = b.lit(softcap, LitKind::Float);
            let s = bin(b, BinaryFn::Div, val(scores), cap)?;
            let s = unary(b, UnaryFn::Tanh, s)?;
            scores = bin(b, BinaryFn::Mul, val(s), cap)?;
        }
        let full = bias_of(b, &bias)?;
        let biased = match full {
            Some(f) => bin(b, BinaryFn::Add, val(scores), val(f))?,
            None => scores,
        };
        if n.wants(3) {
            out3 = match mode {
                0 | 1 => Some(scores),
                2 => Some(biased),
                _ => None,
            };
        }
        let mut p = cast(b, biased, precision)?;
        p = b.emit(FOp::Softmax { axis: -1 }, vec![val(p)])?;
        if let Some(f) = full {
            p = zero_masked_rows(b, f, p)?;
        }
        p = cast(b, p, dt)?;
        if n.wants(3) && mode == 3 {
            out3 = Some(p);
        }
        b.emit(FOp::Matmul, vec![val(p), val(v)])?
    };
    if three {
        y = b.emit(FOp::Movement(Movement::Permute { perm: vec![0, 2, 1, 3] }), vec![val(y)])?;
        let s = b.shape(y)?;
        let joined = vec![s[0].clone(), s[1].clone(), &s[2] * &s[3]];
        y = b.emit(FOp::Movement(Movement::Reshape { shape: joined }), vec![val(y)])?;
    }
    let mut outs = vec![Val::Run(y), Val::Run(present_k), Val::Run(present_v)];
    if let Some(s) = out3 {
        outs.push(Val::Run(cast(b, s, dt)?));
    }
    Ok(outs)
}

/// The type the softmax runs in: `softmax_precision` when given (f32 for
/// FLOAT and DOUBLE: tgc's softmax computes in f32 whatever its operand),
/// else f32.
fn softmax_precision(n: &N, dt: DType) -> DResult<DType> {
    let Some(c) = n.a.int("softmax_precision")? else { return Ok(DType::F32) };
    let c = c as i32;
    match c {
        proto::code::FLOAT | proto::code::DOUBLE => Ok(DType::F32),
        proto::code::FLOAT16 | proto::code::BFLOAT16 => Ok(proto::runtime_dtype(c).unwrap_or(dt)),
        _ => Err(diag!(Unsupported, "Attention softmax_precision {} (a float type)", proto::type_name(c))),
    }
}

/// `x` as `to` (itself when it is already).
fn cast(b: &mut Builder, x: ValueId, to: DType) -> DResult<ValueId> {
    if b.dtype(x)? == to {
        return Ok(x);
    }
    b.emit(FOp::Cast { to }, vec![val(x)])
}

/// The mask `name` padded on its last axis to `kv` keys: with false (bool)
/// or `−inf` (float), as the reference pads it.
///
/// Errors: `AxisSizeMismatch` for a mask longer than the keys.
fn padded_mask(b: &mut Builder, name: &str, kv: &Dim) -> DResult<ValueId> {
    let m = b.run(name)?;
    let s = b.shape(m)?;
    let last = s.last().ok_or_else(|| diag!(AxisSizeMismatch, "Attention mask `{name}` of rank 0"))?;
    if last == kv {
        return Ok(m);
    }
    let extra = kv - last;
    if extra.as_int().is_some_and(|e| e < 0) {
        return Err(diag!(AxisSizeMismatch, "Attention mask `{name}` has {last} keys, more than the {kv} keys"));
    }
    let value = if b.dtype(m)? == DType::Bool { 0.0 } else { f64::NEG_INFINITY };
    let mut pads = vec![(Dim::int(0), Dim::int(0)); s.len() - 1];
    pads.push((Dim::int(0), extra));
    b.emit(FOp::Movement(Movement::Pad { pads, value, mode: PadMode::Constant }), vec![val(m)])
}

/// `0` where `allowed`, `−inf` elsewhere, in type `dt`.
fn additive(b: &mut Builder, allowed: ValueId, dt: DType) -> DResult<ValueId> {
    let zero = b.lit(0.0, LitKind::Float);
    let ninf = b.lit(f64::NEG_INFINITY, LitKind::Float);
    let f = b.emit(FOp::Where, vec![val(allowed), zero, ninf])?;
    cast(b, f, dt)
}

/// `i + offset − j` over query `i` and key `j` (i32): `[Sq, Skv]` for the
/// past length, `[B, 1, Sq, Skv]` for padding lengths.
fn distance(b: &mut Builder, c: &Bias) -> DResult<ValueId> {
    let i = iota(b, &c.q_len)?;
    let i = b.emit(FOp::Movement(Movement::Unsqueeze { axes: vec![1] }), vec![val(i)])?;
    let j = iota(b, &c.kv_len)?;
    let d = bin(b, BinaryFn::Sub, val(i), val(j))?;
    match c.nonpad {
        Some(lens) => {
            let q = c.q_len.as_int().ok_or_else(|| {
                diag!(Unsupported, "Attention with nonpad_kv_seqlen over a symbolic query length `{}`", c.q_len)
            })?;
            let off = bin(b, BinaryFn::Sub, val(lens), b.lit(q as f64, LitKind::Int))?;
            let off = b.emit(FOp::Movement(Movement::Unsqueeze { axes: vec![1, 2, 3] }), vec![val(off)])?;
            bin(b, BinaryFn::Add, val(d), val(off))
        }
        None => {
            let p = c.past.as_int().ok_or_else(|| {
                diag!(Unsupported, "causal or windowed Attention over a symbolic past length `{}`", c.past)
            })?;
            if p == 0 {
                return Ok(d);
            }
            bin(b, BinaryFn::Add, val(d), b.lit(p as f64, LitKind::Int))
        }
    }
}

/// The additive bias of step 3 (module doc) in the input type, `None`
/// when there is none (all zeros).
fn bias_of(b: &mut Builder, c: &Bias) -> DResult<Option<ValueId>> {
    let mut bias = match c.mask {
        Some(m) if b.dtype(m)? == DType::Bool => Some(additive(b, m, c.dt)?),
        Some(m) => Some(cast(b, m, c.dt)?),
        None => None,
    };
    let add = |b: &mut Builder, bias: Option<ValueId>, more: ValueId| -> DResult<Option<ValueId>> {
        Ok(Some(match bias {
            Some(x) => bin(b, BinaryFn::Add, val(x), val(more))?,
            None => more,
        }))
    };
    if c.causal || c.window != (-1, -1) {
        let d = distance(b, c)?;
        let mut allowed = None;
        let mut both = |b: &mut Builder, cond: ValueId| -> DResult<()> {
            allowed = Some(match allowed {
                Some(a) => b.emit(FOp::Where, vec![val(a), val(cond), b.lit(0.0, LitKind::Bool)])?,
                None => cond,
            });
            Ok(())
        };
        if c.causal {
            let keep = bin(b, BinaryFn::Ge, val(d), b.lit(0.0, LitKind::Int))?;
            both(b, keep)?;
        }
        let (left, right) = c.window;
        if left >= 0 {
            let keep = bin(b, BinaryFn::Le, val(d), b.lit(left as f64, LitKind::Int))?;
            both(b, keep)?;
        }
        if right >= 0 {
            let keep = bin(b, BinaryFn::Ge, val(d), b.lit(-right as f64, LitKind::Int))?;
            both(b, keep)?;
        }
        if let Some(a) = allowed {
            let f = additive(b, a, c.dt)?;
            bias = add(b, bias, f)?;
        }
    }
    if let Some(lens) = c.nonpad {
        let j = iota(b, &c.kv_len)?;
        let l = b.emit(FOp::Movement(Movement::Unsqueeze { axes: vec![1] }), vec![val(lens)])?;
        let keep = bin(b, BinaryFn::Lt, val(j), val(l))?;
        let keep = b.emit(FOp::Movement(Movement::Unsqueeze { axes: vec![1, 2] }), vec![val(keep)])?;
        let f = additive(b, keep, c.dt)?;
        bias = add(b, bias, f)?;
    }
    Ok(bias)
}

/// `x` with zero in each row (query) whose `bias` is `−inf` for every key:
/// a fully masked row attends nothing and gives 0 (the reference's guard).
fn zero_masked_rows(b: &mut Builder, bias: ValueId, x: ValueId) -> DResult<ValueId> {
    let axes = Some(vec![AxisRef::Index(-1)]);
    let top = b.emit(FOp::Reduce { op: ReduceFn::Max, axes, keepdim: true, acc: None }, vec![val(bias)])?;
    let none = bin(b, BinaryFn::Eq, val(top), b.lit(f64::NEG_INFINITY, LitKind::Float))?;
    b.emit(FOp::Where, vec![val(none), b.lit(0.0, LitKind::Float), val(x)])
}

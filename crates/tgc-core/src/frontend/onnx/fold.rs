//! Import-time evaluation of nodes whose inputs are all known
//! ([`super::known`]): the shape subgraphs of PyTorch and `optimum` exports.
//!
//! Integer arithmetic is on [`Dim`]s, so `Shape(x)[0] * 12` stays the
//! expression `batch * 12`; a comparison or a division that depends on a
//! symbol's value is not folded (the node then runs, or is refused).
//! Float results are rounded to their element type (f32, f16, bf16), as a
//! run-time kernel would round them.

use crate::diag;
use crate::diag::DResult;
use crate::sym::Dim;

use super::known::{self, broadcast_index, broadcast_shapes, strides, KData, Known};
use super::proto::{self, code, Attrs};
use super::Builder;

/// An element-wise function of known integers, as [`Dim`]s (`None` when
/// the result depends on a symbol's value); floats use [`float_of`].
enum Fun {
    Int(fn(&Dim, &Dim) -> Option<Dim>),
    /// A comparison: its result is bool.
    Cmp(fn(f64, f64) -> bool),
}

fn int_div(a: &Dim, b: &Dim) -> Option<Dim> {
    match (a.as_int(), b.as_int()) {
        (Some(x), Some(y)) if y != 0 => x.checked_div(y).map(Dim::int),
        (None, Some(y)) if y > 0 => a.floordiv(b),
        _ => None,
    }
}

/// A comparison of known integers; one of a symbolic dim and an integer
/// below its least value ([`Dim::lower_bound`]) is decided too — PyTorch's
/// `Where(Equal(shape, -1), 1, shape)` over a symbolic `batch` is `shape`.
fn int_cmp(f: fn(f64, f64) -> bool) -> impl Fn(&Dim, &Dim) -> Option<bool> {
    move |a, b| {
        if a == b {
            return Some(f(0.0, 0.0));
        }
        match (a.as_int(), b.as_int()) {
            (Some(x), Some(y)) => Some(f(x as f64, y as f64)),
            // Every value of the symbolic side lies above the integer, so
            // the comparison has one answer over [bound, ∞).
            (None, Some(y)) if a.lower_bound()? > y => Some(f(y as f64 + 1.0, y as f64)),
            (Some(x), None) if b.lower_bound()? > x => Some(f(x as f64, x as f64 + 1.0)),
            _ => None,
        }
    }
}

/// The element-wise function of op `op`, if it is one this module folds.
fn elementwise(op: &str) -> Option<Fun> {
    Some(match op {
        "Add" => Fun::Int(|a, b| Some(a + b)),
        "Sub" => Fun::Int(|a, b| Some(a - b)),
        "Mul" => Fun::Int(|a, b| Some(a * b)),
        "Div" => Fun::Int(int_div),
        "Equal" => Fun::Cmp(|a, b| a == b),
        "Less" => Fun::Cmp(|a, b| a < b),
        "LessOrEqual" => Fun::Cmp(|a, b| a <= b),
        "Greater" => Fun::Cmp(|a, b| a > b),
        "GreaterOrEqual" => Fun::Cmp(|a, b| a >= b),
        "Max" => Fun::Int(|a, b| Some(Dim::int(a.as_int()?.max(b.as_int()?)))),
        "Min" => Fun::Int(|a, b| Some(Dim::int(a.as_int()?.min(b.as_int()?)))),
        "And" => Fun::Int(|a, b| Some(Dim::int((a.as_int()? != 0 && b.as_int()? != 0) as i64))),
        "Or" => Fun::Int(|a, b| Some(Dim::int((a.as_int()? != 0 || b.as_int()? != 0) as i64))),
        "Xor" => Fun::Int(|a, b| Some(Dim::int(((a.as_int()? != 0) != (b.as_int()? != 0)) as i64))),
        "Pow" => Fun::Int(|a, b| Some(Dim::int(a.as_int()?.checked_pow(u32::try_from(b.as_int()?).ok()?)?))),
        _ => return None,
    })
}

fn float_of(op: &str) -> Option<fn(f64, f64) -> f64> {
    Some(match op {
        "Add" => |a, b| a + b,
        "Sub" => |a, b| a - b,
        "Mul" => |a, b| a * b,
        "Div" => |a, b| a / b,
        "Max" => f64::max,
        "Min" => f64::min,
        "Pow" => f64::powf,
        _ => return None,
    })
}

/// Rounds `v` to element type `c`.
fn round(c: i32, v: f64) -> f64 {
    match c {
        code::FLOAT => v as f32 as f64,
        code::FLOAT16 => half::f16::from_f64(v).to_f64(),
        code::BFLOAT16 => half::bf16::from_f64(v).to_f64(),
        _ => v,
    }
}

/// Evaluates `node` if every input is known and the op is one this module
/// folds; `Ok(None)` leaves it to the run-time conversion.
pub(super) fn try_fold(b: &mut Builder, node: &onnx_protobuf::NodeProto, a: &Attrs) -> DResult<Option<Vec<Known>>> {
    let op = node.op_type.as_str();
    // `Shape` and `Size` need only the input's shape.
    if op == "Shape" || op == "Size" {
        let x = node.input.first().ok_or_else(|| diag!(ArityMismatch, "{op} needs an input"))?;
        let shape: Vec<Dim> = match b.known(x)? {
            Some(k) => k.shape.iter().map(|&d| Dim::int(d as i64)).collect(),
            None => {
                let v = b.run(x)?;
                b.shape(v)?
            }
        };
        if op == "Size" {
            return Ok(Some(vec![Known {
                code: code::INT64,
                shape: Vec::new(),
                data: KData::Int(vec![Dim::product(&shape)]),
            }]));
        }
        let r = shape.len() as i64;
        let clampi = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
        let start = clampi(a.int_or("start", 0)?);
        let end = clampi(a.int_or("end", r)?).max(start);
        return Ok(Some(vec![Known::ints(shape[start..end].to_vec())]));
    }
    if op == "Constant" {
        return constant(b, a).map(|k| k.map(|k| vec![k]));
    }
    // `CastLike` needs only the type of its second input.
    if op == "CastLike" {
        let (Some(x), Some(like)) = (node.input.first(), node.input.get(1)) else {
            return Err(diag!(ArityMismatch, "CastLike needs two inputs"));
        };
        let Some(x) = b.known(x)? else { return Ok(None) };
        let to = match b.known(like)? {
            Some(k) => k.code,
            None => {
                let v = b.run(like)?;
                proto::code_of(b.dtype(v)?)
            }
        };
        return Ok(cast(&x, to)?.map(|k| vec![k]));
    }
    let mut ins = Vec::new();
    for name in &node.input {
        if name.is_empty() {
            ins.push(None);
            continue;
        }
        match b.known(name)? {
            Some(k) => ins.push(Some(k)),
            None => return Ok(None),
        }
    }
    let input = |k: usize| ins.get(k).and_then(|x| x.as_deref());
    let Some(x) = input(0) else { return Ok(None) };
    let out = match op {
        "Identity" | "Dropout" => Some(x.clone()),
        "Cast" => cast(x, a.int("to")?.ok_or_else(|| diag!(SyntaxError, "Cast needs attribute `to`"))? as i32)?,
        "Neg" => unary(x, |d| Some(&Dim::int(0) - d), |v| -v),
        "Abs" => unary(x, |d| d.as_int().map(|v| Dim::int(v.abs())), f64::abs),
        "Floor" => unary(x, |d| Some(d.clone()), f64::floor),
        "Ceil" => unary(x, |d| Some(d.clone()), f64::ceil),
        "Round" => unary(x, |d| Some(d.clone()), f64::round_ties_even),
        "Sqrt" if proto::is_float(x.code) => unary(x, |_| None, f64::sqrt),
        "Not" => unary(x, |d| d.as_int().map(|v| Dim::int((v == 0) as i64)), |v| (v == 0.0) as i64 as f64),
        "Squeeze" | "Unsqueeze" | "Reshape" | "Flatten" => {
            let shape = known_shape(op, x, input(1), a)?;
            shape.map(|s| x.clone().reshaped(s))
        }
        "Concat" => concat(&ins, a.int_or("axis", 0)?)?,
        "Gather" => match input(1) {
            Some(i) => Some(gather(x, i, a.int_or("axis", 0)?)?),
            None => None,
        },
        "Slice" => slice(x, &ins, a, b.opset)?,
        "Where" => match (input(1), input(2)) {
            (Some(p), Some(q)) => where_(x, p, q)?,
            _ => None,
        },
        "Expand" => match input(1) {
            Some(s) => {
                let shape = s.int_values("Expand's shape")?;
                let want: Vec<usize> = shape.iter().map(|&d| d.max(0) as usize).collect();
                let out = broadcast_shapes(&x.shape, &want)?;
                known::check_size(out.iter().product(), "Expand")?;
                Some(x.pick(&broadcast_index(&x.shape, &out), out))
            }
            None => None,
        },
        "ConstantOfShape" => constant_of_shape(b, x, a)?,
        "Range" => match (input(1), input(2)) {
            (Some(l), Some(d)) => range(x, l, d)?,
            _ => None,
        },
        "Sum" | "Mean" => None,
        "Mod" => match input(1) {
            Some(y) => modulo(x, y, a.int_or("fmod", 0)? != 0)?,
            None => None,
        },
        _ => match (input(1), elementwise(op)) {
            (Some(y), Some(f)) => binary(op, x, y, f)?,
            _ => None,
        },
    };
    Ok(out.map(|k| vec![k]))
}

fn unary(x: &Known, fi: impl Fn(&Dim) -> Option<Dim>, ff: impl Fn(f64) -> f64) -> Option<Known> {
    let data = match &x.data {
        KData::Int(v) => KData::Int(v.iter().map(&fi).collect::<Option<_>>()?),
        KData::Float(v) => KData::Float(v.iter().map(|&f| round(x.code, ff(f))).collect()),
    };
    Some(Known { code: x.code, shape: x.shape.clone(), data })
}

fn binary(op: &str, x: &Known, y: &Known, f: Fun) -> DResult<Option<Known>> {
    let shape = broadcast_shapes(&x.shape, &y.shape)?;
    known::check_size(shape.iter().product(), op)?;
    let (ix, iy) = (broadcast_index(&x.shape, &shape), broadcast_index(&y.shape, &shape));
    let float = proto::is_float(x.code) || proto::is_float(y.code);
    if float {
        let (xv, yv) = (x.float_values("an operand")?, y.float_values("an operand")?);
        let pairs = ix.iter().zip(&iy).map(|(&i, &j)| (xv[i], yv[j]));
        let data = match f {
            Fun::Cmp(c) => return Ok(Some(bools(pairs.map(|(p, q)| c(p, q)).collect(), shape))),
            _ => match float_of(op) {
                Some(g) => KData::Float(pairs.map(|(p, q)| round(x.code, g(p, q))).collect()),
                None => return Ok(None),
            },
        };
        return Ok(Some(Known { code: x.code, shape, data }));
    }
    let (xd, yd) = (x.dims("an operand")?, y.dims("an operand")?);
    let pairs = ix.iter().zip(&iy).map(|(&i, &j)| (&xd[i], &yd[j]));
    match f {
        Fun::Int(g) => {
            let Some(v) = pairs.map(|(p, q)| g(p, q)).collect::<Option<Vec<Dim>>>() else { return Ok(None) };
            Ok(Some(Known { code: x.code, shape, data: KData::Int(v) }))
        }
        Fun::Cmp(c) => {
            let cmp = int_cmp(c);
            let Some(v) = pairs.map(|(p, q)| cmp(p, q)).collect::<Option<Vec<bool>>>() else { return Ok(None) };
            Ok(Some(bools(v, shape)))
        }
    }
}

/// `Mod` as the reference computes it: with `fmod` the remainder of
/// truncated division (C's `fmod`, the sign of the dividend), without it
/// that of floored division (NumPy's `mod`, the sign of the divisor). A
/// zero integer divisor, or a symbolic dividend other than over a positive
/// divisor without `fmod`, is not folded.
fn modulo(x: &Known, y: &Known, fmod: bool) -> DResult<Option<Known>> {
    let float = proto::is_float(x.code) || proto::is_float(y.code);
    let shape = broadcast_shapes(&x.shape, &y.shape)?;
    known::check_size(shape.iter().product(), "Mod")?;
    let (ix, iy) = (broadcast_index(&x.shape, &shape), broadcast_index(&y.shape, &shape));
    if float {
        let (xv, yv) = (x.float_values("Mod's A")?, y.float_values("Mod's B")?);
        let floored = |p: f64, q: f64| {
            let r = p % q;
            if fmod {
                r
            } else if r == 0.0 {
                0f64.copysign(q)
            } else if (r < 0.0) != (q < 0.0) {
                r + q
            } else {
                r
            }
        };
        let data = ix.iter().zip(&iy).map(|(&i, &j)| round(x.code, floored(xv[i], yv[j]))).collect();
        return Ok(Some(Known { code: x.code, shape, data: KData::Float(data) }));
    }
    let (xd, yd) = (x.dims("Mod's A")?, y.dims("Mod's B")?);
    let one = |a: &Dim, d: &Dim| -> Option<Dim> {
        match (a.as_int(), d.as_int()) {
            (Some(p), Some(q)) if q != 0 => {
                let r = p.checked_rem(q)?;
                Some(Dim::int(if !fmod && r != 0 && (r < 0) != (q < 0) { r + q } else { r }))
            }
            (None, Some(q)) if q > 0 && !fmod => a.modulo(d),
            _ => None,
        }
    };
    let Some(v) = ix.iter().zip(&iy).map(|(&i, &j)| one(&xd[i], &yd[j])).collect::<Option<Vec<Dim>>>() else {
        return Ok(None);
    };
    Ok(Some(Known { code: x.code, shape, data: KData::Int(v) }))
}

fn bools(v: Vec<bool>, shape: Vec<usize>) -> Known {
    Known { code: code::BOOL, shape, data: KData::Int(v.into_iter().map(|b| Dim::int(b as i64)).collect()) }
}

fn cast(x: &Known, to: i32) -> DResult<Option<Known>> {
    let data = match (&x.data, proto::is_float(to)) {
        (KData::Int(v), false) if to == code::BOOL => KData::Int(
            v.iter().map(|d| d.as_int().map(|i| Dim::int((i != 0) as i64))).collect::<Option<_>>().unwrap_or_default(),
        ),
        (KData::Int(v), false) => KData::Int(v.clone()),
        (KData::Int(_), true) => {
            KData::Float(x.float_values("Cast's input")?.into_iter().map(|v| round(to, v)).collect())
        }
        (KData::Float(v), true) => KData::Float(v.iter().map(|&f| round(to, f)).collect()),
        (KData::Float(v), false) if to == code::BOOL => {
            KData::Int(v.iter().map(|&f| Dim::int((f != 0.0) as i64)).collect())
        }
        (KData::Float(v), false) => {
            if v.iter().any(|f| !f.is_finite()) {
                return Ok(None);
            }
            KData::Int(v.iter().map(|&f| Dim::int(f.trunc() as i64)).collect())
        }
    };
    if data.len() != x.len() {
        return Ok(None);
    }
    Ok(Some(Known { code: to, shape: x.shape.clone(), data }))
}

/// The output shape of a known `Squeeze`, `Unsqueeze`, `Reshape` or
/// `Flatten`.
fn known_shape(op: &str, x: &Known, second: Option<&Known>, a: &Attrs) -> DResult<Option<Vec<usize>>> {
    let r = x.shape.len() as i64;
    let axes = |n: i64| -> DResult<Option<Vec<usize>>> {
        let list = match second {
            Some(s) => Some(s.int_values("axes")?),
            None => a.ints("axes")?,
        };
        list.map(|l| {
            l.iter()
                .map(|&v| {
                    let v = if v < 0 { v + n } else { v };
                    usize::try_from(v)
                        .ok()
                        .filter(|&v| (v as i64) < n)
                        .ok_or_else(|| diag!(InvalidAxis, "axis {v} is out of range"))
                })
                .collect()
        })
        .transpose()
    };
    Ok(Some(match op {
        "Squeeze" => {
            let ax = axes(r)?.unwrap_or_else(|| (0..x.shape.len()).filter(|&k| x.shape[k] == 1).collect());
            x.shape.iter().enumerate().filter(|(k, _)| !ax.contains(k)).map(|(_, &d)| d).collect()
        }
        "Unsqueeze" => {
            let Some(list) = (match second {
                Some(s) => Some(s.int_values("axes")?),
                None => a.ints("axes")?,
            }) else {
                return Ok(None);
            };
            let n = r + list.len() as i64;
            let ax = axes(n)?.unwrap_or_default();
            let mut it = x.shape.iter();
            (0..n as usize).map(|k| if ax.contains(&k) { 1 } else { it.next().copied().unwrap_or(1) }).collect()
        }
        "Flatten" => {
            let axis = a.int_or("axis", 1)?;
            let axis = if axis < 0 { axis + r } else { axis }.clamp(0, r) as usize;
            vec![x.shape[..axis].iter().product(), x.shape[axis..].iter().product()]
        }
        _ => {
            let Some(s) = second else { return Ok(None) };
            let want = s.int_values("Reshape's shape")?;
            let allowzero = a.int_or("allowzero", 0)? != 0;
            let mut out: Vec<i64> = want
                .iter()
                .enumerate()
                .map(|(k, &d)| if d == 0 && !allowzero { x.shape.get(k).map_or(0, |&s| s as i64) } else { d })
                .collect();
            let known: i64 = out.iter().filter(|&&d| d != -1).product();
            if let Some(p) = out.iter().position(|&d| d == -1) {
                if known == 0 {
                    return Ok(None);
                }
                out[p] = x.len() as i64 / known;
            }
            if out.iter().any(|&d| d < 0) || out.iter().product::<i64>() != x.len() as i64 {
                return Err(diag!(AxisSizeMismatch, "cannot reshape {} elements to {want:?}", x.len()));
            }
            out.into_iter().map(|d| d as usize).collect()
        }
    }))
}

fn concat(ins: &[Option<std::rc::Rc<Known>>], axis: i64) -> DResult<Option<Known>> {
    let parts: Vec<&Known> = ins.iter().flatten().map(|k| k.as_ref()).collect();
    let Some(first) = parts.first() else { return Ok(None) };
    let r = first.shape.len() as i64;
    let ax = if axis < 0 { axis + r } else { axis };
    if !(0..r).contains(&ax) {
        return Err(diag!(InvalidAxis, "Concat axis {axis} is out of range for rank {r}"));
    }
    let ax = ax as usize;
    let mut shape = first.shape.clone();
    shape[ax] = parts.iter().map(|p| p.shape.get(ax).copied().unwrap_or(0)).sum();
    for p in &parts {
        if p.shape.len() != first.shape.len()
            || p.shape.iter().enumerate().any(|(k, &d)| k != ax && d != first.shape[k])
        {
            return Err(diag!(AxisSizeMismatch, "Concat of shapes {:?} and {:?}", first.shape, p.shape));
        }
    }
    known::check_size(shape.iter().product(), "Concat")?;
    let outer: usize = shape[..ax].iter().product();
    let float = parts.iter().any(|p| proto::is_float(p.code));
    let mut fv = Vec::new();
    let mut iv = Vec::new();
    for o in 0..outer {
        for p in &parts {
            let inner: usize = p.shape[ax..].iter().product();
            let range = o * inner..(o + 1) * inner;
            match &p.data {
                KData::Float(v) => fv.extend_from_slice(&v[range]),
                KData::Int(v) if float => fv.extend(v[range].iter().map(|d| d.as_int().unwrap_or(0) as f64)),
                KData::Int(v) => iv.extend_from_slice(&v[range]),
            }
        }
    }
    let data = if float { KData::Float(fv) } else { KData::Int(iv) };
    Ok(Some(Known { code: first.code, shape, data }))
}

/// `Gather` along `axis` with known indices.
pub(super) fn gather(x: &Known, idx: &Known, axis: i64) -> DResult<Known> {
    let r = x.shape.len() as i64;
    let ax = if axis < 0 { axis + r } else { axis };
    if !(0..r).contains(&ax) {
        return Err(diag!(InvalidAxis, "Gather axis {axis} is out of range for rank {r}"));
    }
    let ax = ax as usize;
    let n = x.shape[ax] as i64;
    let ids: Vec<usize> = idx
        .int_values("Gather's indices")?
        .into_iter()
        .map(|i| {
            let j = if i < 0 { i + n } else { i };
            usize::try_from(j)
                .ok()
                .filter(|&j| (j as i64) < n)
                .ok_or_else(|| diag!(InvalidAxis, "Gather index {i} is out of range for size {n}"))
        })
        .collect::<DResult<_>>()?;
    let mut shape = x.shape[..ax].to_vec();
    shape.extend_from_slice(&idx.shape);
    shape.extend_from_slice(&x.shape[ax + 1..]);
    known::check_size(shape.iter().product(), "Gather")?;
    let outer: usize = x.shape[..ax].iter().product();
    let inner: usize = x.shape[ax + 1..].iter().product();
    let mut flat = Vec::new();
    for o in 0..outer {
        for &i in &ids {
            flat.extend((0..inner).map(|k| (o * n as usize + i) * inner + k));
        }
    }
    Ok(x.pick(&flat, shape))
}

/// A known `Slice` (all of `starts`, `ends`, `axes`, `steps` known).
fn slice(x: &Known, ins: &[Option<std::rc::Rc<Known>>], a: &Attrs, opset: i64) -> DResult<Option<Known>> {
    let get = |k: usize, name: &str| -> DResult<Option<Vec<i64>>> {
        if opset < 10 {
            return a.ints(name);
        }
        match ins.get(k).and_then(|x| x.as_deref()) {
            // Bounds of symbols give a shape only known at run time.
            Some(v) if !v.is_concrete() => Ok(None),
            v => v.map(|v| v.int_values(name)).transpose(),
        }
    };
    let (Some(starts), Some(ends)) = (get(1, "starts")?, get(2, "ends")?) else { return Ok(None) };
    let r = x.shape.len();
    let axes = get(3, "axes")?.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = get(4, "steps")?.unwrap_or_else(|| vec![1; starts.len()]);
    let mut sel: Vec<Vec<usize>> = x.shape.iter().map(|&d| (0..d).collect()).collect();
    for (k, &start) in starts.iter().enumerate() {
        let ax = axes.get(k).copied().unwrap_or(k as i64);
        let ax = if ax < 0 { ax + r as i64 } else { ax };
        let ax = usize::try_from(ax)
            .ok()
            .filter(|&v| v < r)
            .ok_or_else(|| diag!(InvalidAxis, "Slice axis {ax} is out of range"))?;
        let d = x.shape[ax] as i64;
        let step = steps.get(k).copied().unwrap_or(1);
        if step == 0 {
            return Err(diag!(NegativeStride, "Slice step 0"));
        }
        let (s, e) = slice_bounds(start, ends.get(k).copied().unwrap_or(i64::MAX), step, d);
        let mut v = Vec::new();
        let mut i = s;
        while (step > 0 && i < e) || (step < 0 && i > e) {
            v.push(i as usize);
            i += step;
        }
        sel[ax] = v;
    }
    let shape: Vec<usize> = sel.iter().map(Vec::len).collect();
    known::check_size(shape.iter().product(), "Slice")?;
    let st = strides(&x.shape);
    let mut flat = vec![0usize];
    for (k, s) in sel.iter().enumerate() {
        let stride = st[k];
        flat = flat.iter().flat_map(|&base| s.iter().map(move |&i| base + i * stride)).collect();
    }
    Ok(Some(x.pick(&flat, shape)))
}

/// ONNX `Slice`'s clamped `[start, end)` on an axis of size `d` (negative
/// values count from the end; `Slice`'s operator doc).
pub(super) fn slice_bounds(start: i64, end: i64, step: i64, d: i64) -> (i64, i64) {
    let norm = |v: i64| if v < 0 { v.saturating_add(d) } else { v };
    let (s, e) = (norm(start), norm(end));
    if step > 0 {
        (s.clamp(0, d), e.clamp(0, d))
    } else {
        (s.clamp(0, d - 1), e.clamp(-1, d - 1))
    }
}

fn where_(c: &Known, p: &Known, q: &Known) -> DResult<Option<Known>> {
    let shape = broadcast_shapes(&broadcast_shapes(&c.shape, &p.shape)?, &q.shape)?;
    known::check_size(shape.iter().product(), "Where")?;
    let cv = c.int_values("Where's condition")?;
    let (ic, ip, iq) =
        (broadcast_index(&c.shape, &shape), broadcast_index(&p.shape, &shape), broadcast_index(&q.shape, &shape));
    let data = match (&p.data, &q.data) {
        (KData::Int(pv), KData::Int(qv)) => KData::Int(
            (0..ic.len()).map(|k| if cv[ic[k]] != 0 { pv[ip[k]].clone() } else { qv[iq[k]].clone() }).collect(),
        ),
        _ => {
            let (pv, qv) = (p.float_values("Where's X")?, q.float_values("Where's Y")?);
            KData::Float((0..ic.len()).map(|k| if cv[ic[k]] != 0 { pv[ip[k]] } else { qv[iq[k]] }).collect())
        }
    };
    Ok(Some(Known { code: p.code, shape, data }))
}

fn constant_of_shape(b: &Builder, shape: &Known, a: &Attrs) -> DResult<Option<Known>> {
    let Ok(dims) = shape.int_values("ConstantOfShape's shape") else { return Ok(None) };
    let out: Vec<usize> = dims.iter().map(|&d| d.max(0) as usize).collect();
    let n: usize = out.iter().product();
    if n > known::MAX_KNOWN_ELEMENTS {
        return Ok(None);
    }
    let (c, v) = fill_value(b, a)?;
    let data = if proto::is_float(c) { KData::Float(vec![v; n]) } else { KData::Int(vec![Dim::int(v as i64); n]) };
    Ok(Some(Known { code: c, shape: out, data }))
}

/// `ConstantOfShape`'s `value` attribute: its type and value (f32 0 when
/// absent).
pub(super) fn fill_value(b: &Builder, a: &Attrs) -> DResult<(i32, f64)> {
    match a.tensor("value")? {
        None => Ok((code::FLOAT, 0.0)),
        Some(t) => {
            let k = Known::from_values(proto::read_values(t, b.dir)?);
            Ok((k.code, k.scalar_value("ConstantOfShape's value")?))
        }
    }
}

fn range(start: &Known, limit: &Known, delta: &Known) -> DResult<Option<Known>> {
    if !(start.is_concrete() && limit.is_concrete() && delta.is_concrete()) {
        return Ok(None);
    }
    let (s, l, d) = (start.scalar_value("start")?, limit.scalar_value("limit")?, delta.scalar_value("delta")?);
    if d == 0.0 {
        return Err(diag!(NegativeStride, "Range with delta 0"));
    }
    let n = ((l - s) / d).ceil().max(0.0);
    if n > known::MAX_KNOWN_ELEMENTS as f64 {
        return Ok(None);
    }
    let values: Vec<f64> = (0..n as usize).map(|k| round(start.code, s + k as f64 * d)).collect();
    Ok(Some(Known { code: start.code, shape: vec![values.len()], data: super::kdata_of(start.code, values) }))
}

/// A `Constant` node's value; `None` for a tensor too large to know (it
/// becomes a weight, [`super::ops`]).
fn constant(b: &Builder, a: &Attrs) -> DResult<Option<Known>> {
    if let Some(t) = a.tensor("value")? {
        let (_, n) = proto::tensor_shape(t)?;
        if n > known::MAX_KNOWN_ELEMENTS {
            return Ok(None);
        }
        return Ok(Some(Known::from_values(proto::read_values(t, b.dir)?)));
    }
    if a.has("value_float") {
        return Ok(Some(Known::scalar(code::FLOAT, a.float_or("value_float", 0.0)?)));
    }
    if let Some(v) = a.int("value_int")? {
        return Ok(Some(Known::scalar(code::INT64, v as f64)));
    }
    if let Some(v) = a.floats("value_floats")? {
        return Ok(Some(Known { code: code::FLOAT, shape: vec![v.len()], data: KData::Float(v) }));
    }
    if let Some(v) = a.ints("value_ints")? {
        return Ok(Some(Known::ints(v.into_iter().map(Dim::int).collect())));
    }
    Err(diag!(
        Unsupported,
        "a Constant must hold a tensor, float(s) or int(s) (strings and sparse tensors are not taken)"
    ))
}

//! The recurrent operators `RNN`, `GRU`, `LSTM` and `Scan`, unrolled at
//! import time over their sequence axis (whose size must be known): one
//! step's statements per time step, with the state threaded from step to
//! step.
//!
//! `RNN`, `GRU` and `LSTM` follow ONNX's `Operators.md`: `X·Wᵀ` of every step is one
//! `matmul` over the whole sequence, the state's `H·Rᵀ` one per step;
//! `direction` forward, reverse or bidirectional (the reverse pass's
//! outputs are stored at the step they belong to), `layout` 0 or 1,
//! `activations` among `Sigmoid Tanh Relu`, `clip` on the input of every
//! activation, `linear_before_reset` for GRU, peepholes `P` for LSTM,
//! initial states, and `sequence_lens` as a run-time mask: past its
//! batch entry's length a step keeps the state and writes zeros to `Y`.

use crate::diag;
use crate::diag::DResult;
use crate::frontend::ir::*;
use crate::sym::Dim;
use crate::DType;

use super::super::known::{self, Known};
use super::super::proto;
use super::{bin, unary, val, Builder, Val, N};

/// Which recurrent operator.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cell {
    Rnn,
    Gru,
    Lstm,
}

impl Cell {
    /// Gates per hidden unit (the row blocks of `W` and `R`).
    fn gates(self) -> i64 {
        match self {
            Cell::Rnn => 1,
            Cell::Gru => 3,
            Cell::Lstm => 4,
        }
    }

    /// The default activations of one direction (`f`, `g`, `h`).
    fn defaults(self) -> &'static [&'static str] {
        match self {
            Cell::Rnn => &["Tanh"],
            Cell::Gru => &["Sigmoid", "Tanh"],
            Cell::Lstm => &["Sigmoid", "Tanh", "Tanh"],
        }
    }
}

/// The weights and options of one direction.
struct Direction {
    /// `Wᵀ`, `[I, gH]`, applied to the whole sequence.
    xw: ValueId,
    /// `Rᵀ`, `[H, gH]`.
    rt: ValueId,
    /// `Rb`, `[gH]`, added to `H·Rᵀ` (`Wb` is in `xw`).
    rb: Option<ValueId>,
    /// Peepholes `P` of LSTM, `[3H]` (i, o, f).
    p: Option<ValueId>,
    acts: Vec<UnaryFn>,
}

/// The options every step shares.
struct Options {
    hidden: i64,
    clip: Option<f64>,
    linear_before_reset: bool,
    /// `sequence_lens` as i32 `[B, 1]`.
    lens: Option<ValueId>,
}

pub(super) fn mv(b: &mut Builder, m: Movement, x: ValueId) -> DResult<ValueId> {
    b.emit(FOp::Movement(m), vec![val(x)])
}

/// `x[lo:hi]` along `axis`.
pub(super) fn cut(b: &mut Builder, x: ValueId, axis: usize, lo: i64, hi: i64) -> DResult<ValueId> {
    let mut bounds: Vec<(Dim, Dim)> = b.shape(x)?.into_iter().map(|d| (Dim::int(0), d)).collect();
    bounds[axis] = (Dim::int(lo), Dim::int(hi));
    mv(b, Movement::Shrink { bounds }, x)
}

/// `x[k]` along `axis` (the axis removed).
pub(super) fn at(b: &mut Builder, x: ValueId, axis: usize, k: i64) -> DResult<ValueId> {
    let c = cut(b, x, axis, k, k + 1)?;
    mv(b, Movement::Squeeze { axes: vec![axis as i64] }, c)
}

/// The values joined along a new axis `axis`.
pub(super) fn stack(b: &mut Builder, xs: &[ValueId], axis: i64) -> DResult<ValueId> {
    let mut parts = Vec::new();
    for &x in xs {
        parts.push(mv(b, Movement::Unsqueeze { axes: vec![axis] }, x)?);
    }
    if let [one] = parts[..] {
        return Ok(one);
    }
    b.emit(FOp::Pieces(Pieces::Concat { axis }), parts.into_iter().map(val).collect())
}

fn add(b: &mut Builder, x: ValueId, y: ValueId) -> DResult<ValueId> {
    bin(b, BinaryFn::Add, val(x), val(y))
}

fn mul(b: &mut Builder, x: ValueId, y: ValueId) -> DResult<ValueId> {
    bin(b, BinaryFn::Mul, val(x), val(y))
}

/// `f(clip(x))`.
fn act(b: &mut Builder, o: &Options, f: UnaryFn, x: ValueId) -> DResult<ValueId> {
    let x = match o.clip {
        Some(c) => b.emit(FOp::Clamp { min: Some(-c), max: Some(c) }, vec![val(x)])?,
        None => x,
    };
    unary(b, f, x)
}

/// `RNN`, `GRU` or `LSTM`: outputs `Y`, `Y_h` (and `Y_c` for LSTM).
///
/// Errors: `Unsupported` for a sequence length not known at import, an
/// activation other than `Sigmoid Tanh Relu`, `input_forget` set; and
/// `AxisSizeMismatch` for weights whose shapes do not match `hidden_size`.
pub(super) fn convert(b: &mut Builder, n: &N) -> DResult<Vec<Val>> {
    let cell = match n.node.op_type.as_str() {
        "RNN" => Cell::Rnn,
        "GRU" => Cell::Gru,
        _ => Cell::Lstm,
    };
    let op = n.node.op_type.as_str();
    if n.a.int_or("input_forget", 0)? != 0 {
        return Err(diag!(Unsupported, "LSTM input_forget=1"));
    }
    let layout = n.a.int_or("layout", 0)?;
    if !(0..=1).contains(&layout) {
        return Err(diag!(Unsupported, "{op} layout={layout} (0 or 1)"));
    }
    let dirs: &[bool] = match n.a.string("direction")?.as_deref() {
        None | Some("forward") => &[false],
        Some("reverse") => &[true],
        Some("bidirectional") => &[false, true],
        Some(s) => return Err(diag!(Unsupported, "{op} direction `{s}`")),
    };
    let mut x = b.run(n.required(0)?)?;
    if layout == 1 {
        x = mv(b, Movement::Transpose { a: 0, b: 1 }, x)?;
    }
    let xs = b.shape(x)?;
    if xs.len() != 3 {
        return Err(diag!(AxisSizeMismatch, "{op}'s X must have rank 3, not {}", xs.len()));
    }
    let steps = xs[0].as_int().ok_or_else(|| {
        diag!(Unsupported, "{op} over the symbolic sequence length `{}` (the importer unrolls it)", xs[0])
    })?;
    let w = b.run(n.required(1)?)?;
    let r = b.run(n.required(2)?)?;
    let rs = b.shape(r)?;
    let hidden = match n.a.int("hidden_size")? {
        Some(h) => h,
        None => rs.get(2).and_then(Dim::as_int).ok_or_else(|| diag!(Unsupported, "{op} without hidden_size"))?,
    };
    let gh = cell.gates() * hidden;
    let want = |v: &[Dim], s: &[i64]| v.len() == s.len() && v.iter().zip(s).all(|(d, &k)| d.as_int() == Some(k));
    let nd = dirs.len() as i64;
    let ws = b.shape(w)?;
    let input = ws.get(2).and_then(Dim::as_int).unwrap_or(-1);
    if !want(&ws, &[nd, gh, input]) || !want(&rs, &[nd, gh, hidden]) || xs[2].as_int() != Some(input) {
        let f = crate::tiny::infer::fmt_shape;
        return Err(diag!(
            AxisSizeMismatch,
            "{op} with {nd} direction(s) and hidden_size {hidden}: W is {}, R {}, X {} (W must be [{nd}, {gh}, I], R [{nd}, {gh}, {hidden}])",
            f(&ws),
            f(&rs),
            f(&xs)
        ));
    }
    let names = match n.a.strings("activations")? {
        Some(list) => list,
        None => dirs.iter().flat_map(|_| cell.defaults().iter().map(|s| s.to_string())).collect(),
    };
    let per = cell.defaults().len();
    if names.len() != per * dirs.len() {
        return Err(diag!(Unsupported, "{op} needs {} activations, got {}", per * dirs.len(), names.len()));
    }
    if n.a.has("activation_alpha") || n.a.has("activation_beta") {
        return Err(diag!(Unsupported, "{op} activation_alpha/activation_beta (Sigmoid, Tanh and Relu take none)"));
    }
    let mut acts = Vec::new();
    for s in &names {
        acts.push(match s.as_str() {
            "Sigmoid" => UnaryFn::Sigmoid,
            "Tanh" => UnaryFn::Tanh,
            "Relu" => UnaryFn::Relu,
            s => return Err(diag!(Unsupported, "{op} activation `{s}` (Sigmoid, Tanh and Relu are taken)")),
        });
    }
    let clip = n.a.has("clip").then(|| n.a.float_or("clip", 0.0)).transpose()?;
    let lens = match n.input(4) {
        None => None,
        Some(name) => {
            let l = b.run(name)?;
            let l = if b.dtype(l)? != DType::I32 { b.emit(FOp::Cast { to: DType::I32 }, vec![val(l)])? } else { l };
            Some(mv(b, Movement::Unsqueeze { axes: vec![1] }, l)?)
        }
    };
    let o = Options { hidden, clip, linear_before_reset: n.a.int_or("linear_before_reset", 0)? != 0, lens };
    // Initial states, `[nd, B, H]` (layout 1: `[B, nd, H]`).
    let state = |b: &mut Builder, k: usize| -> DResult<Option<ValueId>> {
        let Some(name) = n.input(k) else { return Ok(None) };
        let v = b.run(name)?;
        Ok(Some(if layout == 1 { mv(b, Movement::Transpose { a: 0, b: 1 }, v)? } else { v }))
    };
    let h0 = state(b, 5)?;
    let c0 = if cell == Cell::Lstm { state(b, 6)? } else { None };
    let bias = match n.input(3) {
        Some(name) => Some(b.run(name)?),
        None => None,
    };
    let peep = match (cell, n.input(7)) {
        (Cell::Lstm, Some(name)) => Some(b.run(name)?),
        _ => None,
    };
    let (batch, dtype) = (xs[1].clone(), b.dtype(x)?);
    let (mut ys, mut hs, mut cs) = (Vec::new(), Vec::new(), Vec::new());
    for (d, &reverse) in dirs.iter().enumerate() {
        let d = d as i64;
        let wd = at(b, w, 0, d)?;
        let wt = mv(b, Movement::Transpose { a: 0, b: 1 }, wd)?;
        let mut xw = b.emit(FOp::Matmul, vec![val(x), val(wt)])?;
        let mut rb = None;
        if let Some(bv) = bias {
            let bd = at(b, bv, 0, d)?;
            let wb = cut(b, bd, 0, 0, gh)?;
            xw = add(b, xw, wb)?;
            rb = Some(cut(b, bd, 0, gh, 2 * gh)?);
        }
        let rd = at(b, r, 0, d)?;
        let rt = mv(b, Movement::Transpose { a: 0, b: 1 }, rd)?;
        let p = match peep {
            Some(pv) => Some(at(b, pv, 0, d)?),
            None => None,
        };
        let dir = Direction { xw, rt, rb, p, acts: acts[d as usize * per..(d as usize + 1) * per].to_vec() };
        let start = |b: &mut Builder, s: Option<ValueId>| -> DResult<ValueId> {
            match s {
                Some(v) => at(b, v, 0, d),
                None => b.splat(0.0, dtype, &[batch.clone(), Dim::int(hidden)]),
            }
        };
        let mut h = start(b, h0)?;
        let mut c = if cell == Cell::Lstm { Some(start(b, c0)?) } else { None };
        let mut outs = vec![h; steps as usize];
        let order: Vec<i64> = if reverse { (0..steps).rev().collect() } else { (0..steps).collect() };
        for t in order {
            let (hn, cn) = step(b, cell, &o, &dir, t, h, c)?;
            let (hn, cn, y) = match o.lens {
                Some(l) => {
                    let live = bin(b, BinaryFn::Lt, b.lit(t as f64, LitKind::Int), val(l))?;
                    let keep_h = b.emit(FOp::Where, vec![val(live), val(hn), val(h)])?;
                    let keep_c = match (cn, c) {
                        (Some(cn), Some(c)) => Some(b.emit(FOp::Where, vec![val(live), val(cn), val(c)])?),
                        _ => None,
                    };
                    let y = b.emit(FOp::Where, vec![val(live), val(hn), b.lit(0.0, LitKind::Float)])?;
                    (keep_h, keep_c, y)
                }
                None => (hn, cn, hn),
            };
            outs[t as usize] = y;
            h = hn;
            c = cn;
        }
        ys.push(stack(b, &outs, 0)?);
        hs.push(h);
        cs.extend(c);
    }
    let mut out = Vec::new();
    // Y: [T, nd, B, H] (layout 1: [B, T, nd, H]).
    let mut y = stack(b, &ys, 1)?;
    if layout == 1 {
        y = mv(b, Movement::Permute { perm: vec![2, 0, 1, 3] }, y)?;
    }
    out.push(Val::Run(y));
    for finals in [hs, cs] {
        if finals.is_empty() {
            break;
        }
        let mut s = stack(b, &finals, 0)?;
        if layout == 1 {
            s = mv(b, Movement::Transpose { a: 0, b: 1 }, s)?;
        }
        out.push(Val::Run(s));
    }
    Ok(out)
}

/// One time step `t` from state `h` (and cell `c`): the new `(H, C)`.
fn step(
    b: &mut Builder,
    cell: Cell,
    o: &Options,
    d: &Direction,
    t: i64,
    h: ValueId,
    c: Option<ValueId>,
) -> DResult<(ValueId, Option<ValueId>)> {
    let hid = o.hidden;
    let xt = at(b, d.xw, 0, t)?;
    let hr = b.emit(FOp::Matmul, vec![val(h), val(d.rt)])?;
    let hr = match d.rb {
        Some(rb) => add(b, hr, rb)?,
        None => hr,
    };
    let gate = |b: &mut Builder, v: ValueId, k: i64| cut(b, v, 1, k * hid, (k + 1) * hid);
    match cell {
        Cell::Rnn => {
            let s = add(b, xt, hr)?;
            Ok((act(b, o, d.acts[0], s)?, None))
        }
        Cell::Gru => {
            let (xz, xr, xh) = (gate(b, xt, 0)?, gate(b, xt, 1)?, gate(b, xt, 2)?);
            let (hz, hrr) = (gate(b, hr, 0)?, gate(b, hr, 1)?);
            let sz = add(b, xz, hz)?;
            let z = act(b, o, d.acts[0], sz)?;
            let sr = add(b, xr, hrr)?;
            let rg = act(b, o, d.acts[0], sr)?;
            let hh = if o.linear_before_reset {
                let hh = gate(b, hr, 2)?;
                mul(b, rg, hh)?
            } else {
                // (r ⊙ H)·Rhᵀ + Rbh.
                let rh = mul(b, rg, h)?;
                let rth = cut(b, d.rt, 1, 2 * hid, 3 * hid)?;
                let m = b.emit(FOp::Matmul, vec![val(rh), val(rth)])?;
                match d.rb {
                    Some(rb) => {
                        let rbh = cut(b, rb, 0, 2 * hid, 3 * hid)?;
                        add(b, m, rbh)?
                    }
                    None => m,
                }
            };
            let sh = add(b, xh, hh)?;
            let cand = act(b, o, d.acts[1], sh)?;
            // (1 − z) ⊙ h̃ + z ⊙ H = h̃ + z ⊙ (H − h̃).
            let diff = bin(b, BinaryFn::Sub, val(h), val(cand))?;
            let zd = mul(b, z, diff)?;
            Ok((add(b, cand, zd)?, None))
        }
        Cell::Lstm => {
            let c = c.ok_or_else(|| diag!(Internal, "LSTM step without a cell state"))?;
            let s = add(b, xt, hr)?;
            let (mut si, so, mut sf, sc) = (gate(b, s, 0)?, gate(b, s, 1)?, gate(b, s, 2)?, gate(b, s, 3)?);
            let peep = |b: &mut Builder, k: i64| -> DResult<Option<ValueId>> {
                d.p.map(|p| cut(b, p, 0, k * hid, (k + 1) * hid)).transpose()
            };
            if let Some(pi) = peep(b, 0)? {
                let m = mul(b, pi, c)?;
                si = add(b, si, m)?;
            }
            if let Some(pf) = peep(b, 2)? {
                let m = mul(b, pf, c)?;
                sf = add(b, sf, m)?;
            }
            let i = act(b, o, d.acts[0], si)?;
            let f = act(b, o, d.acts[0], sf)?;
            let g = act(b, o, d.acts[1], sc)?;
            let fc = mul(b, f, c)?;
            let ig = mul(b, i, g)?;
            let cn = add(b, fc, ig)?;
            let mut so = so;
            if let Some(po) = peep(b, 1)? {
                let m = mul(b, po, cn)?;
                so = add(b, so, m)?;
            }
            let og = act(b, o, d.acts[0], so)?;
            let hc = act(b, o, d.acts[2], cn)?;
            Ok((mul(b, og, hc)?, Some(cn)))
        }
    }
}

/// The axis `a` of a rank-`rank` value (negative counts from the end).
fn axis_of(a: i64, rank: usize, what: &str) -> DResult<usize> {
    let r = rank as i64;
    if a < -r || a >= r {
        return Err(diag!(InvalidAxis, "Scan {what} {a} is out of range for rank {rank}"));
    }
    Ok(if a < 0 { (a + r) as usize } else { a as usize })
}

/// `Scan` (opset 9 on): the body graph imported once per step, its
/// inputs bound to the states and to slice `t` of each scan input, its
/// outputs giving the next states and slice `t` of each scan output.
///
/// The body's names live for one step: the model's value names are
/// restored after each, so a body imported again binds them afresh and
/// sees the enclosing graph's values wherever it does not shadow them.
///
/// Errors: `Unsupported` for opset 8's form (batch axis, `sequence_lens`)
/// and for a sequence length not known at import; `ArityMismatch` when
/// the body's inputs and outputs do not match the node's; `AxisSizeMismatch`
/// for scan inputs of different lengths.
pub(super) fn scan(b: &mut Builder, n: &N) -> DResult<Vec<Val>> {
    if n.opset < 9 {
        return Err(diag!(Unsupported, "Scan of opset {} (its batch axis and sequence_lens; opset 9 on)", n.opset));
    }
    let body = n.a.graph("body")?.ok_or_else(|| diag!(SyntaxError, "Scan needs the attribute `body`"))?;
    let m = n.a.int("num_scan_inputs")?.ok_or_else(|| diag!(SyntaxError, "Scan needs `num_scan_inputs`"))?;
    let inputs: Vec<&str> = n.node.input.iter().map(String::as_str).collect();
    if m < 1 || m as usize > inputs.len() || inputs.iter().any(|s| s.is_empty()) {
        return Err(diag!(ArityMismatch, "Scan with num_scan_inputs {m} and {} inputs", inputs.len()));
    }
    let (m, states) = (m as usize, inputs.len() - m as usize);
    let k = body.output.len().checked_sub(states).filter(|_| body.input.len() == inputs.len());
    let Some(k) = k else {
        return Err(diag!(
            ArityMismatch,
            "Scan's body has {} inputs and {} outputs for {states} states and {m} scan inputs",
            body.input.len(),
            body.output.len()
        ));
    };
    let list = |name: &str, len: usize| -> DResult<Vec<i64>> {
        let v = n.a.ints(name)?.unwrap_or_else(|| vec![0; len]);
        if v.len() != len {
            return Err(diag!(ArityMismatch, "Scan's {name} has {} entries for {len} values", v.len()));
        }
        Ok(v)
    };
    let (in_axes, in_dirs) = (list("scan_input_axes", m)?, list("scan_input_directions", m)?);
    let (out_axes, out_dirs) = (list("scan_output_axes", k)?, list("scan_output_directions", k)?);
    let mut xs = Vec::new();
    let mut steps = None;
    for (j, name) in inputs[states..].iter().enumerate() {
        let x = b.run(name)?;
        let shape = b.shape(x)?;
        let ax = axis_of(in_axes[j], shape.len(), "scan_input_axes entry")?;
        let len = shape[ax].as_int().ok_or_else(|| {
            diag!(Unsupported, "Scan over the symbolic length `{}` of `{name}` (the importer unrolls it)", shape[ax])
        })?;
        if steps.is_some_and(|s| s != len) {
            return Err(diag!(
                AxisSizeMismatch,
                "Scan's inputs have lengths {} and {len} (`{name}`)",
                steps.unwrap_or(0)
            ));
        }
        steps = Some(len);
        xs.push((x, ax, in_dirs[j] != 0));
    }
    let steps = steps.unwrap_or(0);
    let mut state: Vec<Val> = Vec::new();
    for name in &inputs[..states] {
        state.push(b.lookup(name)?);
    }
    // Every name the body binds: none may resolve to a value or an
    // initializer of the enclosing graph (or to an earlier step's value)
    // while the body is imported.
    let bound: Vec<&str> = body
        .input
        .iter()
        .map(|i| i.name.as_str())
        .chain(body.initializer.iter().map(|t| t.name.as_str()))
        .chain(body.node.iter().flat_map(|q| q.output.iter().map(String::as_str)))
        .collect();
    let mut slices: Vec<Vec<ValueId>> = vec![Vec::new(); k];
    for t in 0..steps {
        let (env, run_of, inits) = (b.env.clone(), b.run_of.clone(), b.inits.clone());
        for name in &bound {
            b.env.remove(*name);
            b.run_of.remove(*name);
            b.inits.remove(*name);
        }
        for (i, v) in state.iter().enumerate() {
            b.env.insert(body.input[i].name.clone(), v.clone());
        }
        for (j, &(x, ax, reverse)) in xs.iter().enumerate() {
            let at_t = if reverse { steps - 1 - t } else { t };
            let s = at(b, x, ax, at_t)?;
            b.env.insert(body.input[states + j].name.clone(), Val::Run(s));
        }
        for init in &body.initializer {
            let (_, len) = proto::tensor_shape(init)?;
            if len > known::MAX_KNOWN_ELEMENTS {
                return Err(diag!(
                    Unsupported,
                    "Scan's body initializer `{}` has {len} elements (at most {} are taken)",
                    init.name,
                    known::MAX_KNOWN_ELEMENTS
                ));
            }
            let k = Known::from_values(proto::read_values(init, b.dir)?);
            b.env.insert(init.name.clone(), Val::Known(std::rc::Rc::new(k)));
        }
        for (q, node) in body.node.iter().enumerate() {
            b.convert(node).map_err(|mut d| {
                d.message = format!("in Scan's body, node #{q} ({}): {}", node.op_type, d.message);
                d
            })?;
        }
        let mut next = Vec::new();
        for o in &body.output[..states] {
            next.push(b.lookup(&o.name)?);
        }
        for (j, o) in body.output[states..].iter().enumerate() {
            slices[j].push(b.run(&o.name)?);
        }
        (b.env, b.run_of, b.inits) = (env, run_of, inits);
        state = next;
    }
    let mut out = state;
    for (j, mut parts) in slices.into_iter().enumerate() {
        if out_dirs[j] != 0 {
            parts.reverse();
        }
        let rank = match parts.first() {
            Some(&p) => b.shape(p)?.len(),
            None => return Err(diag!(Unsupported, "Scan over a sequence of length 0")),
        };
        let ax = axis_of(out_axes[j], rank + 1, "scan_output_axes entry")?;
        out.push(Val::Run(stack(b, &parts, ax as i64)?));
    }
    Ok(out)
}

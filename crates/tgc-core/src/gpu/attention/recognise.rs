//! From a Tiny IR graph to one fused attention kernel (`000` §7.3,
//! `algo_choice.attention = online_softmax | streaming_softmax_2pass`): recognising a graph that is
//! the attention chain `matmul → softmax → matmul` ([`match_attention`])
//! and instantiating the SM80 FlashAttention-2 template
//! ([`super::kernel`]).
//!
//! Recognised (what the frontend's `attention(q, k, v, mask, causal,
//! scale)` builds, `spec/002` §5.3, and the same chain written by hand
//! with the f32 score):
//!
//! - `S = REDUCE SUM(MUL(q, kᵀ))` over the head dimension, `q` and `k`
//!   graph inputs (f16 or bf16) reached through movements, without
//!   padding; Poly-View's recogniser ([`contraction::trace`]) gives their
//!   index expressions, and `S`'s last two axes are `M` (read by `q`) and
//!   `N` (read by `k`), the others batch axes;
//! - then, each optional, a `MUL` by a constant scalar (the scale: any
//!   subgraph without inputs, evaluated by the interpreter), then `ADD`s of
//!   biases: a graph input (widened by a `CAST`) or a constant under `PAD`
//!   guards (the causal mask of `frontend::ops::nn::causal_bias`);
//! - the softmax over `N` as `frontend::ops::nn::softmax` builds it: `x −
//!   max(x)` (a `REDUCE MAX` of the last axis broadcast back), a `MUL` by a
//!   positive constant `c` (`log2 e`), `EXP2`, `FDIV` by the `REDUCE SUM`;
//! - `O = REDUCE SUM(MUL(P, v))` over `N`, `v` a graph input (through a
//!   widening `CAST` and movements), then the store's `CAST` and movements
//!   to the graph's only output.
//!
//! Every other node of the graph must be a movement, and every input `q`,
//! `k`, `v` or a bias. Sizes must be concrete (bound with `--dim`).
//!
//! The fused kernel computes `O = (Σ_n exp2((x − m)·c)·v) / Σ_n exp2((x −
//! m)·c)` with the running maximum `m` of online softmax (Milakov and
//! Gimelshein 2018; Dao, "FlashAttention-2", 2023) instead of the row's
//! maximum, and rounds `P` to the operands' dtype for the second `mma`
//! (the graph keeps it in f32): a relative error of about `2^-11` (f16) or
//! `2^-8` (bf16) of `|v|` per output, which the tests bound.

use std::collections::BTreeMap;

use crate::affine::AffExpr;
use crate::diag;
use crate::diag::DResult;
use crate::index_book::{self, contraction, IndexBook};
use crate::tiny::{BinaryOp, Graph, NodeId, Op, ReduceOp, UnaryOp};
use crate::DType;

use crate::gpu::mma::recognise::{self as gemm, flat_offset, input_name, strides};

/// An element offset or a guard expression, affine in the attention's
/// variables: the batch digits, the query row `m`, the key row `n` and the
/// feature column `c` (the head dimension of `q`/`k`, the value dimension
/// of `v` and the output).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Lin {
    /// One coefficient per batch digit (outermost first).
    pub batch: Vec<i64>,
    pub m: i64,
    pub n: i64,
    pub c: i64,
    pub constant: i64,
}

/// One step from the `Q·Kᵀ` sum (f32) to the softmax's input, in graph
/// order.
#[derive(Clone, Debug, PartialEq)]
pub enum ScoreOp {
    /// `x · c` (the scale).
    Scale(f32),
    /// `x + bias`.
    Add(Bias),
    /// Round `x` to f16 or bf16 (a `CAST`, or an op computed in that
    /// dtype), kept as an f32 value.
    Round(DType),
}

/// A term added to the scores.
#[derive(Clone, Debug, PartialEq)]
pub enum Bias {
    /// A graph input of `dtype` read at `at` (over `batch`, `m`, `n`),
    /// widened to f32: an additive mask.
    Tensor { dtype: DType, at: Lin },
    /// `value` where every `valid` expression is ≥ 0, else `otherwise` (a
    /// constant padded by `PAD`s: the causal mask's `0` or `−inf`).
    Guarded { value: f32, valid: Vec<Lin>, otherwise: f32 },
}

/// The attention a fused kernel computes, per batch point: `O[m, c] =
/// Σ_n softmax_n(x[m, n])·V[n, c]` with `x` the [`ScoreOp`]s applied to
/// `S = Q·Kᵀ` (`S·scale + bias`), the softmax as `exp2((x −
/// max)·exp_scale)` normalised by its sum.
#[derive(Clone, Debug, PartialEq)]
pub struct Attention {
    /// `q`, `k`, `v`'s dtype (f16 or bf16).
    pub ab: DType,
    /// The output's dtype.
    pub out: DType,
    /// The batch digits' extents, outermost first.
    pub batch: Vec<i64>,
    /// Query rows, key rows, head dimension, value dimension.
    pub m: i64,
    pub n: i64,
    pub d: i64,
    pub dv: i64,
    /// From `S` to the softmax's input.
    pub scores: Vec<ScoreOp>,
    /// The softmax's `c` in `exp2((x − max)·c)` (`log2 e`), > 0.
    pub exp_scale: f32,
    /// Element offsets: `q` over `(m, c = d)`, `k` over `(n, c = d)`, `v`
    /// over `(n, c = dv)`, the output over `(m, c = dv)`.
    pub q: Lin,
    pub k: Lin,
    pub v: Lin,
    pub o: Lin,
}

/// What a graph input is to the attention kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Q,
    K,
    V,
    /// The `i`-th [`Bias::Tensor`] of [`Attention::scores`].
    Bias(usize),
}

/// A graph recognised as one attention ([`match_attention`]).
#[derive(Clone, Debug)]
pub struct AttentionGraph {
    pub attention: Attention,
    /// Each operand's role and the index of its graph input (one input may
    /// be several operands: self-attention's `attention(x, x, x)`).
    pub inputs: Vec<(Role, usize)>,
    /// The graph output the kernel writes.
    pub output: String,
    /// The `Q·Kᵀ` contraction, where errors point.
    pub scores: NodeId,
}

/// The role of a contraction variable in the attention.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Var {
    Batch(usize),
    M,
    N,
    C,
}

/// Recognises `g` as one attention (module doc).
///
/// Errors: `Unsupported` at the node that breaks the pattern (not two
/// contractions, an operand that is not a graph input, a softmax over
/// another axis, an op the chain does not have); `UnboundSymbol` for a
/// symbolic size.
pub fn match_attention(g: &Graph) -> DResult<AttentionGraph> {
    let book = index_book::build(g)?;
    let users = g.consumers();
    let cs: Vec<NodeId> = g.ids().filter(|&id| contraction::is_contraction(g, id)).collect();
    let &[r1, r2] = cs.as_slice() else {
        let d = diag!(Unsupported, "graph `{}` has {} contractions; an attention has two", g.name, cs.len());
        return Err(match cs.first() {
            Some(&c) => d.at_node(g.node(c)),
            None => d,
        });
    };
    let unsupported = |id: NodeId, what: String| diag!(Unsupported, "{what}").at_node(g.node(id));
    let traced = |r: NodeId| -> DResult<(contraction::Traced, Vec<i64>)> {
        let t = contraction::trace(g, &book, r)?
            .ok_or_else(|| unsupported(r, "the operands of this sum do not fold into affine reads".into()))?;
        if t.reduce != 1 {
            return Err(unsupported(
                r,
                format!("an attention's products sum over one axis, this one over {}", t.reduce),
            ));
        }
        let info = book.get(r).ok_or_else(|| diag!(Internal, "the IndexBook lacks {}", g.node(r).label))?;
        let ext: Option<Vec<i64>> = info.extents().iter().map(|d| d.as_int().filter(|&v| v >= 1)).collect();
        let ext = ext.ok_or_else(|| {
            diag!(UnboundSymbol, "the attention template needs concrete sizes; give them with --dim").at_node(g.node(r))
        })?;
        Ok((t, ext))
    };
    let (t1, ext1) = traced(r1)?;
    let (t2, ext2) = traced(r2)?;
    let rank = t1.out;
    if rank < 2 {
        return Err(unsupported(r1, "the scores of an attention have at least two axes".into()));
    }
    let (mv, nv, dv1) = (rank - 2, rank - 1, rank);
    // q reads M and not N, k the reverse (a size-1 axis is read by none).
    let rows = |q: &contraction::Operand, k: &contraction::Operand| {
        (q.reads(mv) || ext1[mv] == 1) && !q.reads(nv) && (k.reads(nv) || ext1[nv] == 1) && !k.reads(mv)
    };
    let (q_op, k_op) = if rows(&t1.lhs, &t1.rhs) {
        (&t1.lhs, &t1.rhs)
    } else if rows(&t1.rhs, &t1.lhs) {
        (&t1.rhs, &t1.lhs)
    } else {
        return Err(unsupported(r1, "the scores' last two axes are not the rows of q and of k".into()));
    };
    let ab = g.dtype(q_op.src);
    for (op, name) in [(q_op, "q"), (k_op, "k")] {
        if !matches!(g.node(op.src).op, Op::Input { .. }) || !op.guard.is_empty() || g.dtype(op.src) != ab {
            return Err(unsupported(
                op.src,
                format!("the attention template reads {name} from an unpadded graph input of q's dtype"),
            ));
        }
    }
    if !matches!(ab, DType::F16 | DType::BF16) {
        return Err(unsupported(r1, format!("the attention template takes f16 or bf16 operands, not {ab}")));
    }
    let mut used: Vec<NodeId> = vec![t1.mul, r1];

    // The scores: scales, biases and roundings.
    let (mut cur, mut scores, mut bias_inputs) = (r1, Vec::new(), Vec::new());
    while let [next] = users[cur.index()].as_slice() {
        let n = g.node(*next);
        let dtype = g.dtype(*next);
        let other = if n.src.first() == Some(&cur) { n.src.get(1) } else { n.src.first() };
        match (&n.op, other, n.src.len()) {
            (Op::Cast, _, 1) if dtype == DType::F32 => {}
            (Op::Cast, _, 1) if matches!(dtype, DType::F16 | DType::BF16) => scores.push(RawScore::Round(dtype)),
            (Op::Binary(BinaryOp::Mul), Some(&other), 2) => {
                let (v, consts) = constant(g, &book, other)
                    .ok_or_else(|| unsupported(*next, "the scores are scaled by a tensor, not a constant".into()))?;
                scores.push(RawScore::Scale(v as f32));
                used.extend(consts);
            }
            (Op::Binary(BinaryOp::Add), Some(&other), 2) => {
                let (bias, nodes) = bias(g, &book, other)?;
                if let RawBias::Tensor { .. } = bias {
                    bias_inputs.push(nodes[0]);
                }
                used.extend(nodes);
                scores.push(RawScore::Add(bias));
            }
            _ => break,
        }
        // An op computed in f16/bf16 rounds its result.
        if n.op != Op::Cast && dtype != DType::F32 {
            scores.push(RawScore::Round(dtype));
        }
        used.push(*next);
        cur = *next;
    }

    // The softmax over N.
    let x = cur;
    let (sub, max) = two_users(g, &users, x, |n| matches!(n.op, Op::Binary(BinaryOp::Sub)))
        .ok_or_else(|| unsupported(x, "the scores are not the input of a softmax (max, sub, exp2, sum, div)".into()))?;
    if g.dtype(x) != DType::F32 {
        return Err(unsupported(x, "the softmax of the attention template takes f32 scores".into()));
    }
    check_row_reduce(g, max, ReduceOp::Max, rank)?;
    if g.node(sub).src != [x, g.node(sub).src[1]] || !broadcasts(g, &book, g.node(sub).src[1], max, rank) {
        return Err(unsupported(sub, "the softmax subtracts something other than its row maximum".into()));
    }
    let shifted = single_user(&users, sub)
        .filter(|&u| g.node(u).op == Op::Binary(BinaryOp::Mul))
        .ok_or_else(|| unsupported(sub, "the softmax's shifted scores are not scaled for EXP2".into()))?;
    let c_src = *g.node(shifted).src.iter().find(|&&s| s != sub).unwrap_or(&sub);
    let (exp_scale, consts) = constant(g, &book, c_src)
        .filter(|(c, _)| *c > 0.0)
        .ok_or_else(|| unsupported(shifted, "the softmax's exponent is not scaled by a positive constant".into()))?;
    used.extend(consts);
    let e = single_user(&users, shifted)
        .filter(|&u| g.node(u).op == Op::Unary(UnaryOp::Exp2))
        .ok_or_else(|| unsupported(shifted, "the softmax's exponential is not an EXP2".into()))?;
    let (div, sum) = two_users(g, &users, e, |n| matches!(n.op, Op::Binary(BinaryOp::Fdiv)))
        .ok_or_else(|| unsupported(e, "the softmax's exponentials are not divided by their row sum".into()))?;
    check_row_reduce(g, sum, ReduceOp::Sum, rank)?;
    if g.node(div).src.first() != Some(&e) || !broadcasts(g, &book, g.node(div).src[1], sum, rank) {
        return Err(unsupported(div, "the softmax divides by something other than its row sum".into()));
    }
    used.extend([x, max, sub, shifted, e, sum, div]);

    // O = P·V, P read as it is or rounded to the operands' dtype.
    let is_p =
        |src: NodeId| src == div || (g.node(src).op == Op::Cast && g.node(src).src == [div] && g.dtype(src) == ab);
    let (p_op, v_op) = if is_p(t2.lhs.src) {
        (&t2.lhs, &t2.rhs)
    } else if is_p(t2.rhs.src) {
        (&t2.rhs, &t2.lhs)
    } else {
        return Err(unsupported(r2, "the second contraction does not read the softmax".into()));
    };
    // P's axis j is r2's variable sigma[j] (`None`: a size-1 axis).
    let p_shape = g.shape(div).to_vec();
    let sigma: Option<Vec<Option<usize>>> = p_op
        .idx
        .iter()
        .zip(&p_shape)
        .map(|(e, d)| match e.var_coeffs().collect::<Vec<_>>().as_slice() {
            [(v, c)] if c.as_int() == Some(1) && e.constant_part().as_int() == Some(0) => Some(Some(*v as usize)),
            [] if d.is_one() && e.constant_part().as_int() == Some(0) => Some(None),
            _ => None,
        })
        .collect();
    let sigma = sigma
        .filter(|s| {
            s.len() == rank
                && s[nv].is_none_or(|v| v == t2.out)
                && s[..nv].iter().flatten().all(|&v| v < t2.out)
                && p_op.guard.is_empty()
        })
        .ok_or_else(|| unsupported(r2, "the second contraction does not sum the softmax over its last axis".into()))?;
    let dv_vars: Vec<usize> = (0..t2.out).filter(|v| !sigma.contains(&Some(*v)) && ext2[*v] > 1).collect();
    let &[c2] = dv_vars.as_slice() else {
        return Err(unsupported(r2, "the second contraction's output is not P's rows by V's columns".into()));
    };
    let v_read = index_book::Chased { src: v_op.src, index: v_op.idx.clone(), guard: v_op.guard.clone() };
    let (v_read, casts) = widened(g, &book, v_read, &ext2)
        .filter(|(c, _)| g.dtype(c.src) == ab && c.guard.is_empty())
        .ok_or_else(|| unsupported(v_op.src, format!("the attention template reads v from an unpadded {ab} input")))?;
    let v_src = v_read.src;
    let v_op = &contraction::Operand { src: v_src, idx: v_read.index, guard: Vec::new() };
    used.extend(casts);
    used.push(p_op.src);
    used.extend([t2.mul, r2]);
    let mut vars2: Vec<Option<Var>> = vec![None; t2.out + 1];
    for (j, s) in sigma.iter().enumerate() {
        if let Some(s) = s {
            vars2[*s] = Some(var_of(j, mv, nv, usize::MAX));
        }
    }
    vars2[t2.out] = Some(Var::N);
    vars2[c2] = Some(Var::C);
    let chain = gemm::epilogue_chain(g, &book, &t2, r2, &ext2)?;
    // A rounding of the sum to the operands' dtype is the store's when the
    // output has that dtype.
    let out = g.dtype(chain.end);
    if !chain.epilogue.is_empty() || (chain.round_sum && out != ab) || g.outputs.len() != 1 {
        return Err(unsupported(
            chain.end,
            "the attention's output must be stored as it is (one output, no epilogue)".into(),
        ));
    }
    used.extend(chain.nodes.iter().copied());
    let out_strides = chain.strides();
    let mut o_flat = (Vec::new(), 0);
    for (a, s) in chain.order.iter().zip(&out_strides) {
        if let Some(v) = a {
            o_flat.0.push((*v, *s));
        }
    }

    // Every other node is a movement; every input an operand.
    let operands = [q_op.src, k_op.src, v_src];
    for id in g.ids() {
        let n = g.node(id);
        let input = matches!(n.op, Op::Input { .. });
        if input && !operands.contains(&id) && !bias_inputs.contains(&id) {
            return Err(unsupported(
                id,
                format!("input `{}` is not q, k, v or a bias of the attention", input_name(g, id)),
            ));
        }
        if !input && !n.op.is_movement() && !used.contains(&id) {
            return Err(unsupported(
                id,
                format!("`{}` is outside the attention the fused template computes", n.op.name()),
            ));
        }
    }

    let batch = ext1[..mv].to_vec();
    let lin1 = |flat: Option<(Vec<(usize, i64)>, i64)>, at: NodeId| {
        flat.and_then(|f| to_lin(f, &vars_of_scores(rank), &ext1, batch.len()))
            .ok_or_else(|| unsupported(at, "an operand is addressed with a symbolic size or offset".into()))
    };
    let q = lin1(flat_offset(g, q_op), q_op.src)?;
    let k = lin1(flat_offset(g, k_op), k_op.src)?;
    let v = flat_offset(g, v_op)
        .and_then(|f| to_lin(f, &vars2, &ext2, batch.len()))
        .ok_or_else(|| unsupported(v_src, "v is addressed with a symbolic size or offset".into()))?;
    let o = to_lin(o_flat, &vars2, &ext2, batch.len())
        .ok_or_else(|| unsupported(chain.end, "the output is addressed through an axis the attention lacks".into()))?;
    let scores = scores
        .into_iter()
        .map(|op| match op {
            RawScore::Scale(c) => Some(ScoreOp::Scale(c)),
            RawScore::Round(d) => Some(ScoreOp::Round(d)),
            RawScore::Add(b) => finish_bias(b, &ext1, batch.len()).map(ScoreOp::Add),
        })
        .collect::<Option<Vec<ScoreOp>>>()
        .ok_or_else(|| unsupported(r1, "a bias is addressed with a symbolic size or offset".into()))?;
    let attention = Attention {
        ab,
        out,
        batch,
        m: ext1[mv],
        n: ext1[nv],
        d: ext1[dv1],
        dv: ext2[c2],
        scores,
        exp_scale: exp_scale as f32,
        q,
        k,
        v,
        o,
    };
    let graph_inputs = g.inputs();
    let index_of = |id: NodeId| {
        graph_inputs
            .iter()
            .position(|&x| x == id)
            .ok_or_else(|| diag!(Internal, "operand {} is no graph input", g.node(id).label))
    };
    let mut inputs = vec![(Role::Q, index_of(q_op.src)?), (Role::K, index_of(k_op.src)?), (Role::V, index_of(v_src)?)];
    for (j, &b) in bias_inputs.iter().enumerate() {
        inputs.push((Role::Bias(j), index_of(b)?));
    }
    Ok(AttentionGraph { attention, inputs, output: g.outputs[0].name.clone(), scores: r1 })
}

/// The role of score axis `j` (`m`, `n` the query and key axes; a `c`
/// axis only in a contraction's variables).
fn var_of(j: usize, m: usize, n: usize, c: usize) -> Var {
    match j {
        _ if j == m => Var::M,
        _ if j == n => Var::N,
        _ if j == c => Var::C,
        _ => Var::Batch(j),
    }
}

/// The roles of `Q·Kᵀ`'s variables: the score axes, then the head dimension.
fn vars_of_scores(rank: usize) -> Vec<Option<Var>> {
    (0..=rank).map(|j| Some(var_of(j, rank - 2, rank - 1, rank))).collect()
}

/// `(variable, coefficient)` pairs and a constant as a [`Lin`]; `None`
/// when a variable longer than 1 has no role.
fn to_lin(
    (vars, constant): (Vec<(usize, i64)>, i64),
    roles: &[Option<Var>],
    ext: &[i64],
    nbatch: usize,
) -> Option<Lin> {
    let mut l = Lin { batch: vec![0; nbatch], constant, ..Lin::default() };
    for (v, c) in vars {
        match roles.get(v).copied().flatten() {
            Some(Var::Batch(j)) => *l.batch.get_mut(j)? += c,
            Some(Var::M) => l.m += c,
            Some(Var::N) => l.n += c,
            Some(Var::C) => l.c += c,
            None if ext.get(v) == Some(&1) => {}
            None => return None,
        }
    }
    Some(l)
}

/// A [`ScoreOp`] before its expressions are [`Lin`]s.
enum RawScore {
    Scale(f32),
    Add(RawBias),
    Round(DType),
}

/// A bias before its expressions are [`Lin`]s: expressions over the score
/// variables.
enum RawBias {
    Tensor { dtype: DType, at: (Vec<(usize, i64)>, i64) },
    Guarded { value: f32, valid: Vec<(Vec<(usize, i64)>, i64)>, otherwise: f32 },
}

fn finish_bias(b: RawBias, ext: &[i64], nbatch: usize) -> Option<Bias> {
    let rank = ext.len() - 1;
    let roles = vars_of_scores(rank);
    Some(match b {
        RawBias::Tensor { dtype, at } => Bias::Tensor { dtype, at: to_lin(at, &roles, ext, nbatch)? },
        RawBias::Guarded { value, valid, otherwise } => Bias::Guarded {
            value,
            valid: valid.into_iter().map(|e| to_lin(e, &roles, ext, nbatch)).collect::<Option<_>>()?,
            otherwise,
        },
    })
}

/// The bias the score chain adds at `id` (a value of the scores' shape):
/// an input (through movements and a widening `CAST`) or a constant under
/// `PAD` guards, with the nodes it uses (the input first).
fn bias(g: &Graph, book: &IndexBook, id: NodeId) -> DResult<(RawBias, Vec<NodeId>)> {
    let unsupported = |what: &str| diag!(Unsupported, "{what}").at_node(g.node(id));
    let c = chase_identity(g, book, id).ok_or_else(|| unsupported("a bias of the scores whose reads do not fold"))?;
    let affine = |e: &AffExpr| gemm::linear(e, 1);
    match &g.node(c.src).op {
        Op::Const { value } => {
            let otherwise = c.guard.first().map_or(0.0, |p| p.otherwise);
            if c.guard.iter().any(|p| p.otherwise != otherwise) {
                return Err(unsupported("a constant bias padded with two different values"));
            }
            let valid: Option<Vec<_>> = c.guard.iter().flat_map(|p| &p.valid).map(|k| affine(&k.expr)).collect();
            let valid = valid.ok_or_else(|| unsupported("a bias guarded by a symbolic bound"))?;
            let bias = RawBias::Guarded { value: *value as f32, valid, otherwise: otherwise as f32 };
            Ok((bias, vec![c.src]))
        }
        _ => {
            let shape: Vec<i64> = g.shape(id).iter().map(|d| d.as_int().unwrap_or(0)).collect();
            let (c, casts) = widened(g, book, c, &shape).ok_or_else(|| {
                unsupported(
                    "a bias of the scores that is computed: the attention template reads an input or a constant",
                )
            })?;
            let input = c.src;
            if !c.guard.is_empty() {
                return Err(unsupported("a padded bias tensor"));
            }
            let mut at = (Vec::new(), 0);
            let st = strides(g, input).ok_or_else(|| unsupported("a bias of symbolic layout"))?;
            for (e, s) in c.index.iter().zip(st) {
                let (vs, k) = gemm::linear(e, s).ok_or_else(|| unsupported("a bias read at a symbolic offset"))?;
                at.0.extend(vs);
                at.1 += k;
            }
            let mut nodes = vec![input];
            nodes.extend(casts);
            Ok((RawBias::Tensor { dtype: g.dtype(input), at }, nodes))
        }
    }
}

/// Follows `c` (a traced read over variables of `extents`) through
/// widening `CAST`s to f32 (exact from f16/bf16) and the movements below
/// them down to a graph input; the read of that input and the casts.
fn widened(
    g: &Graph,
    book: &IndexBook,
    mut c: index_book::Chased,
    extents: &[i64],
) -> Option<(index_book::Chased, Vec<NodeId>)> {
    let dims: Vec<crate::sym::Dim> = extents.iter().map(|&x| crate::sym::Dim::int(x)).collect();
    let mut casts = Vec::new();
    loop {
        let n = g.node(c.src);
        match n.op {
            Op::Input { .. } => return Some((c, casts)),
            Op::Cast if g.dtype(c.src) == DType::F32 && g.dtype(n.src[0]).is_float() => {
                casts.push(c.src);
                let next = index_book::chase(g, book, n.src[0], c.index, &dims, &|_| false).ok()?;
                c.guard.extend(next.guard);
                c = index_book::Chased { src: next.src, index: next.index, guard: c.guard };
            }
            _ => return None,
        }
    }
}

/// [`index_book::chase`] from `id` read at its own indices (`i0, i1, …`
/// over its concrete shape); `None` for a symbolic shape or a chain that
/// does not fold.
fn chase_identity(g: &Graph, book: &IndexBook, id: NodeId) -> Option<index_book::Chased> {
    let shape = g.shape(id).to_vec();
    if shape.iter().any(|d| d.as_int().is_none()) {
        return None;
    }
    let index = (0..shape.len()).map(|k| AffExpr::var(k as u32)).collect();
    index_book::chase(g, book, id, index, &shape, &|_| false).ok()
}

/// Whether `id` (of the scores' shape, `rank` axes) reads the row
/// reduction `r` (its first `rank − 1` axes) at its own row.
fn broadcasts(g: &Graph, book: &IndexBook, id: NodeId, r: NodeId, rank: usize) -> bool {
    let zero = AffExpr::constant(crate::sym::Dim::int(0));
    chase_identity(g, book, id).is_some_and(|c| {
        c.src == r
            && c.guard.is_empty()
            && c.index.len() == rank - 1
            && c.index
                .iter()
                .enumerate()
                .all(|(j, e)| *e == AffExpr::var(j as u32) || (g.shape(r)[j].is_one() && *e == zero))
    })
}

/// Checks that `r` is a `REDUCE op` of the last of `rank` axes in f32.
fn check_row_reduce(g: &Graph, r: NodeId, op: ReduceOp, rank: usize) -> DResult<()> {
    match &g.node(r).op {
        Op::Reduce { op: o, axes } if *o == op && axes.as_slice() == [rank - 1] && g.dtype(r) == DType::F32 => Ok(()),
        _ => Err(diag!(
            Unsupported,
            "the softmax's {} is not an f32 reduction of the last axis",
            crate::gpu::dialect::reduce_name(op)
        )
        .at_node(g.node(r))),
    }
}

/// The only user of `id`.
fn single_user(users: &[Vec<NodeId>], id: NodeId) -> Option<NodeId> {
    match users[id.index()].as_slice() {
        [u] => Some(*u),
        _ => None,
    }
}

/// `id`'s two users: the one `is_first` picks, then the other (a reduction).
fn two_users(
    g: &Graph,
    users: &[Vec<NodeId>],
    id: NodeId,
    is_first: impl Fn(&crate::tiny::Node) -> bool,
) -> Option<(NodeId, NodeId)> {
    match users[id.index()].as_slice() {
        [a, b] if is_first(g.node(*a)) && matches!(g.node(*b).op, Op::Reduce { .. }) => Some((*a, *b)),
        [a, b] if is_first(g.node(*b)) && matches!(g.node(*a).op, Op::Reduce { .. }) => Some((*b, *a)),
        _ => None,
    }
}

/// The value of `id` when it is one constant broadcast (a subgraph with no
/// input reached through movements, of one element), evaluated by the
/// reference interpreter, with the nodes of that subgraph.
fn constant(g: &Graph, book: &IndexBook, id: NodeId) -> Option<(f64, Vec<NodeId>)> {
    let c = chase_identity(g, book, id)?;
    if !c.guard.is_empty() || g.shape(c.src).iter().any(|d| !d.is_one()) {
        return None;
    }
    // The ancestors of c.src, in arena (topological) order.
    let mut keep = vec![false; g.len()];
    keep[c.src.index()] = true;
    for i in (0..=c.src.index()).rev() {
        if keep[i] {
            for &s in &g.nodes()[i].src {
                keep[s.index()] = true;
            }
        }
    }
    let nodes: Vec<NodeId> = g.ids().filter(|i| keep[i.index()]).collect();
    // A scale is a few scalar ops; a subgraph with a large tensor in it is
    // not evaluated here.
    let small = |i: &NodeId| {
        g.shape(*i)
            .iter()
            .try_fold(1i64, |n, d| d.as_int().and_then(|d| n.checked_mul(d)))
            .is_some_and(|n| n <= 1 << 16)
    };
    if !nodes.iter().all(small) {
        return None;
    }
    let mut sub = Graph::new("constant");
    let mut map: BTreeMap<NodeId, NodeId> = BTreeMap::new();
    for &i in &nodes {
        let n = g.node(i);
        if matches!(n.op, Op::Input { .. }) {
            return None;
        }
        let src: Vec<NodeId> = n.src.iter().map(|s| map[s]).collect();
        let new = sub.push(n.op.clone(), src, Some(g.dtype(i)), Some(g.shape(i))).ok()?;
        map.insert(i, new);
    }
    sub.outputs.push(crate::tiny::Output { name: "c".into(), node: map[&c.src] });
    let out = crate::interp::run(&sub, &BTreeMap::new(), &[]).ok()?;
    Some((*out.first()?.data.first()?, nodes))
}

//! The numeric cases of the `graphs` fuzz targets: one op with a stated
//! error bound, built by the frontend's builders (`frontend::ops`, the
//! lowering a user's graph gets), on inputs of f32, f16 or bf16 whose
//! every mantissa bit is drawn:
//!
//! - `exp`, `log` (of `abs`, so that it meets zeros and not only NaN),
//!   `erf`, `tanh`, `sigmoid` or `softmax` of an operand chain of
//!   movement ops (the movement cases' [`Gen::operand`]), `exp` beyond its
//!   overflow threshold among them; the transcendentals sometimes followed
//!   by a movement tail;
//! - `layernorm` over the last axes of an input, with gamma and beta;
//! - `matmul` (batched or not, the right operand maybe transposed), maybe
//!   with `relu`;
//! - a grouped, strided, dilated, padded `conv1d`/`conv2d` (channels first,
//!   or channels last through `permute`), maybe with a bias;
//! - `attention` (batch and head axes, maybe causal).
//!
//! Each case carries the bound of its op ([`tolerance::bound`]) from the
//! magnitudes of its inputs; the tensor-core family is the contractions in
//! f16 and bf16, with the fused attention template's bound.

use super::{dims, Case, Entropy, Gen, SplitMix64, MAX_RANK};
use crate::frontend::ir::{UnaryFn, Window};
use crate::frontend::ops::{contraction, conv, elementwise, nn};
use crate::fuzz::tolerance::{self, Op};
use crate::sym::Dim;
use crate::tiny::{Graph, NodeId, Output};
use crate::DType;

/// Which cases a generator draws.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Family {
    /// Every op, in f32, f16 or bf16.
    Any,
    /// `matmul`, convolution and attention in f16 or bf16: what the
    /// tensor-core templates take.
    TensorCore,
}

/// The transcendentals, in the order of the first choices of [`Gen::numeric`].
const UNARY: [UnaryFn; 5] = [UnaryFn::Exp, UnaryFn::Log, UnaryFn::Erf, UnaryFn::Tanh, UnaryFn::Sigmoid];

/// A numeric case of `family` drawn from `src`.
///
/// Errors: a builder that rejects a graph valid by the op's definition (a
/// bug of the builder or of this generator), with the Tiny IR so far.
pub(super) fn generate<E: Entropy>(src: &mut E, name: &str, family: Family) -> Result<Case, String> {
    let dtypes: &[DType] = match family {
        Family::Any => &[DType::F32, DType::F16, DType::BF16],
        Family::TensorCore => &[DType::F16, DType::BF16],
    };
    let dtype = dtypes[src.below(dtypes.len())];
    let data = SplitMix64::new(src.below(1 << 16) as u64);
    let mut gen = Gen { src, data, dtype, inputs: Vec::new(), non_scop: true, gathers: 0, spread: Some(1.0) };
    let mut g = Graph::new(name);
    match gen.numeric(&mut g, family) {
        Ok(op) => {
            let bound = Some(tolerance::bound(op, dtype));
            Ok(Case { graph: g, dtype, inputs: gen.inputs, bound })
        }
        Err(e) => Err(format!("{e}\nTiny IR so far:\n{}", crate::tiny::text::dump(&g))),
    }
}

fn max_abs(xs: &[f64]) -> f64 {
    xs.iter().fold(0.0, |m, x| m.max(x.abs()))
}

impl<E: Entropy> Gen<'_, E> {
    /// Builds the case's graph; returns its op for the bound.
    fn numeric(&mut self, g: &mut Graph, family: Family) -> Result<Op, String> {
        let kind = match family {
            Family::Any => self.below(10),
            Family::TensorCore => 7 + self.below(3),
        };
        let built = |e: crate::Diagnostic| format!("a frontend builder rejects a valid graph: {e}");
        let (y, op) = match kind {
            0..=4 => {
                let f = UNARY[kind];
                self.spread = Some(self.pick(&[1.0, 4.0, 16.0, 100.0]));
                let t = self.target_shape();
                let x = self.operand(g, "a", &t)?;
                let x = if f == UnaryFn::Log { elementwise::abs(g, x).map_err(built)? } else { x };
                let mut y = elementwise::unary(g, f, x).map_err(built)?;
                if self.chance(0.3) {
                    let len = self.range(1, 2);
                    y = self.tail(g, y, len)?;
                }
                let op = [Op::Exp, Op::Log, Op::Erf, Op::Tanh, Op::Sigmoid][kind];
                (y, op)
            }
            5 => {
                let spread = self.pick(&[1.0, 8.0, 30.0]);
                self.spread = Some(spread);
                let t = self.target_shape();
                let x = self.operand(g, "a", &t)?;
                let axis = self.below(t.len());
                let y = nn::softmax(g, x, axis as i64).map_err(built)?;
                // The chain's pad values are at most 3.125 in magnitude.
                (y, Op::Softmax { n: t[axis], max_abs: spread.max(3.125) })
            }
            6 => self.layernorm(g)?,
            7 => self.matmul(g)?,
            8 => self.conv(g)?,
            _ => self.attention(g, family)?,
        };
        g.outputs.push(Output { name: "out".into(), node: y });
        Ok(op)
    }

    /// An `INPUT` of `shape` with drawn values; returns it and its largest
    /// magnitude.
    fn numeric_input(&mut self, g: &mut Graph, name: &str, shape: &[usize]) -> Result<(NodeId, f64), String> {
        let x = g.input(name, self.dtype, &dims(shape)).map_err(|e| format!("INPUT {shape:?}: {e}"))?;
        let data = self.data(shape.iter().product());
        let m = max_abs(&data);
        self.inputs.push(data);
        Ok((x, m))
    }

    /// `layernorm` of an input over its last 1 to rank axes.
    fn layernorm(&mut self, g: &mut Graph) -> Result<(NodeId, Op), String> {
        self.spread = Some(self.pick(&[1.0, 4.0, 16.0]));
        let t = self.target_shape();
        let r = t.len();
        let k = self.range(1, r);
        let n: usize = t[r - k..].iter().product();
        let (x, _) = self.numeric_input(g, "x", &t)?;
        let xs = self.inputs.last().cloned().unwrap_or_default();
        let (gamma, gm) = self.numeric_input(g, "gamma", &t[r - k..])?;
        let (beta, bm) = self.numeric_input(g, "beta", &t[r - k..])?;
        let eps = self.pick(&[1e-5, 1e-3, 0.1]);
        let axes: Vec<i64> = (r - k..r).map(|a| a as i64).collect();
        let y = nn::layernorm(g, x, gamma, beta, &axes, eps).map_err(|e| format!("layernorm: {e}"))?;
        let shift = xs.chunks(n).fold(0.0, |s: f64, row| {
            let mean = row.iter().sum::<f64>() / n as f64;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
            s.max((n as f64 * max_abs(row) + mean.abs()) / (var + eps).sqrt())
        });
        Ok((y, Op::LayerNorm { n, shift, gamma: gm, beta: bm }))
    }

    /// `matmul` `[B?, M, K]·[B?, K, N]`, the right operand maybe stored
    /// `[.., N, K]` and transposed, maybe followed by `relu`.
    fn matmul(&mut self, g: &mut Graph) -> Result<(NodeId, Op), String> {
        self.spread = Some(self.pick(&[1.0, 4.0]));
        let (m, k, n) = (self.range(1, 24), self.range(1, 24), self.range(1, 24));
        let batch: Vec<usize> = if self.chance(0.4) { vec![self.range(1, 3)] } else { Vec::new() };
        let b_batch = if self.chance(0.5) { batch.clone() } else { Vec::new() };
        let a_shape: Vec<usize> = batch.iter().copied().chain([m, k]).collect();
        let (a, am) = self.numeric_input(g, "a", &a_shape)?;
        let transposed = self.chance(0.3);
        let b_shape: Vec<usize> = b_batch.iter().copied().chain(if transposed { [n, k] } else { [k, n] }).collect();
        let (mut b, bm) = self.numeric_input(g, "b", &b_shape)?;
        let err = |e: crate::Diagnostic| format!("matmul {a_shape:?}·{b_shape:?}: {e}");
        if transposed {
            let r = b_shape.len();
            let mut perm: Vec<usize> = (0..r).collect();
            perm.swap(r - 1, r - 2);
            b = g.permute(b, &perm).map_err(err)?;
        }
        let mut y = contraction::matmul(g, a, b).map_err(err)?;
        if self.chance(0.3) {
            y = elementwise::unary(g, UnaryFn::Relu, y).map_err(err)?;
        }
        Ok((y, Op::Contraction { n: k, a: am, b: bm }))
    }

    /// A 1-d or 2-d convolution: groups, stride, dilation and asymmetric
    /// padding drawn, channels first or last, with or without a bias.
    fn conv(&mut self, g: &mut Graph) -> Result<(NodeId, Op), String> {
        self.spread = Some(self.pick(&[1.0, 4.0]));
        let spatial = self.range(1, 2);
        let groups = self.range(1, 2);
        let (cin_g, cout_g) = (self.range(1, 4), self.range(1, 4));
        let batch = self.range(1, 2);
        let (mut kernel, mut size) = (Vec::new(), Vec::new());
        let (mut stride, mut pad, mut dilation) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..spatial {
            let (r, s, d) = (self.range(1, 3), self.range(1, 2), self.range(1, 2));
            let (lo, hi) = (self.range(0, 2), self.range(0, 2));
            // The dilated kernel fits in the padded input.
            let span = d * (r - 1) + 1;
            size.push(self.range(1, 9).max(span.saturating_sub(lo + hi)).max(1));
            kernel.push(r);
            stride.push(Dim::int(s as i64));
            dilation.push(Dim::int(d as i64));
            pad.push((Dim::int(lo as i64), Dim::int(hi as i64)));
        }
        let (c, cout) = (groups * cin_g, groups * cout_g);
        let channels_last = self.chance(0.3);
        let x_shape: Vec<usize> = if channels_last {
            [batch].into_iter().chain(size.iter().copied()).chain([c]).collect()
        } else {
            [batch, c].into_iter().chain(size.iter().copied()).collect()
        };
        let (mut x, xm) = self.numeric_input(g, "x", &x_shape)?;
        let w_shape: Vec<usize> = [cout, cin_g].into_iter().chain(kernel.iter().copied()).collect();
        let (w, wm) = self.numeric_input(g, "w", &w_shape)?;
        let bias = if self.chance(0.5) { Some(self.numeric_input(g, "bias", &[cout])?.0) } else { None };
        let err = |e: crate::Diagnostic| format!("conv of {x_shape:?} by {w_shape:?}: {e}");
        if channels_last {
            let r = x_shape.len();
            let perm: Vec<usize> = [0, r - 1].into_iter().chain(1..r - 1).collect();
            x = g.permute(x, &perm).map_err(err)?;
        }
        let win = Window { stride, pad, dilation };
        let y = conv::conv(g, x, w, bias, &win, groups as i64).map_err(err)?;
        let n = cin_g * kernel.iter().product::<usize>();
        Ok((y, Op::Contraction { n, a: xm, b: wm }))
    }

    /// `attention(q, k, v)` with 0 to 2 batch axes, maybe causal; in the
    /// tensor-core family, head sizes the template's tiles fit more often.
    fn attention(&mut self, g: &mut Graph, family: Family) -> Result<(NodeId, Op), String> {
        self.spread = Some(self.pick(&[1.0, 2.0]));
        let lead: Vec<usize> = (0..self.below(MAX_RANK - 1)).map(|_| self.range(1, 2)).collect();
        let (m, n) = (self.range(1, 12), self.range(1, 12));
        let (d, dv) = match family {
            Family::TensorCore if self.chance(0.7) => {
                let d = self.pick(&[8, 16, 32, 64]);
                (d, if self.chance(0.7) { d } else { self.pick(&[8, 16, 32]) })
            }
            _ => (self.range(1, 16), self.range(1, 16)),
        };
        let shape = |rows: usize, cols: usize| -> Vec<usize> { lead.iter().copied().chain([rows, cols]).collect() };
        let (q, qm) = self.numeric_input(g, "q", &shape(m, d))?;
        let (k, km) = self.numeric_input(g, "k", &shape(n, d))?;
        let (v, vm) = self.numeric_input(g, "v", &shape(n, dv))?;
        let causal = self.chance(0.3);
        let y = nn::attention(g, q, k, v, None, causal, None).map_err(|e| format!("attention: {e}"))?;
        let op = Op::Attention {
            d,
            keys: n,
            q: qm,
            k: km,
            v: vm,
            scale: 1.0 / (d as f64).sqrt(),
            p_rounded: family == Family::TensorCore,
        };
        Ok((y, op))
    }
}

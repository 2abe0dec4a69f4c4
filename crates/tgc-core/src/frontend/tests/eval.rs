//! A naive f64 evaluator of Tiny graphs for the tests: every node is
//! computed over its whole index space. With `round` each float result is
//! rounded to its dtype (f32 emulation); without it floats stay exact f64,
//! which isolates the approximation error of a decomposition.

use std::collections::BTreeMap;

use crate::tiny::{BinaryOp, Graph, Op, ReduceOp, UnaryOp};
use crate::DType;

/// A dense row-major tensor.
#[derive(Clone, Debug)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub data: Vec<f64>,
}

impl Tensor {
    pub fn new(shape: &[usize], data: Vec<f64>) -> Tensor {
        assert_eq!(shape.iter().product::<usize>(), data.len());
        Tensor { shape: shape.to_vec(), data }
    }

    pub fn at(&self, idx: &[usize]) -> f64 {
        self.data[ravel(idx, &self.shape)]
    }
}

pub fn unravel(mut i: usize, shape: &[usize]) -> Vec<usize> {
    let mut out = vec![0; shape.len()];
    for k in (0..shape.len()).rev() {
        out[k] = i % shape[k];
        i /= shape[k];
    }
    out
}

pub fn ravel(idx: &[usize], shape: &[usize]) -> usize {
    idx.iter().zip(shape).fold(0, |acc, (i, d)| acc * d + i)
}

fn rnd(dt: DType, x: f64, round: bool) -> f64 {
    if round || !dt.is_float() {
        dt.round(x)
    } else {
        x
    }
}

/// Evaluates `g` with symbols `syms` and inputs by name; returns the outputs
/// in order.
pub fn eval(g: &Graph, syms: &[(&str, i64)], inputs: &[(&str, Tensor)], round: bool) -> Vec<Tensor> {
    let vals: BTreeMap<String, i64> = syms.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let b = g.bind(&vals).expect("bind");
    let mut out: Vec<Tensor> = Vec::new();
    for id in b.ids() {
        let n = b.node(id);
        let shape: Vec<usize> = n.ty.shape.iter().map(|d| d.as_int().expect("bound shape") as usize).collect();
        let total: usize = shape.iter().product();
        let dt = n.ty.dtype;
        let src: Vec<&Tensor> = n.src.iter().map(|s| &out[s.index()]).collect();
        let gather = |f: &dyn Fn(&[usize]) -> Option<usize>, fill: f64| -> Vec<f64> {
            (0..total).map(|i| f(&unravel(i, &shape)).map_or(fill, |j| src[0].data[j])).collect()
        };
        let data: Vec<f64> = match &n.op {
            Op::Input { name } => {
                let t = &inputs.iter().find(|(k, _)| k == name).unwrap_or_else(|| panic!("no input {name}")).1;
                assert_eq!(t.shape, shape, "input {name}");
                t.data.iter().map(|&x| rnd(dt, x, true)).collect()
            }
            Op::Const { value } => vec![rnd(dt, *value, round)],
            Op::Unary(u) => src[0]
                .data
                .iter()
                .map(|&x| {
                    let y = match u {
                        UnaryOp::Neg => -x,
                        UnaryOp::Relu => x.max(0.0),
                        UnaryOp::Exp2 => x.exp2(),
                        UnaryOp::Log2 => x.log2(),
                        UnaryOp::Sqrt => x.sqrt(),
                        UnaryOp::Rsqrt => 1.0 / x.sqrt(),
                        UnaryOp::Recip => 1.0 / x,
                    };
                    rnd(dt, y, round)
                })
                .collect(),
            Op::Cast => src[0].data.iter().map(|&x| rnd(dt, x, round)).collect(),
            Op::Binary(op) => src[0]
                .data
                .iter()
                .zip(&src[1].data)
                .map(|(&a, &b)| {
                    let y = match op {
                        BinaryOp::Add => a + b,
                        BinaryOp::Sub => a - b,
                        BinaryOp::Mul => a * b,
                        BinaryOp::Fdiv => a / b,
                        // NaN propagates, as in the interpreter.
                        BinaryOp::Max if a.is_nan() || b.is_nan() => f64::NAN,
                        BinaryOp::Min if a.is_nan() || b.is_nan() => f64::NAN,
                        BinaryOp::Max => a.max(b),
                        BinaryOp::Min => a.min(b),
                        BinaryOp::Cmplt => f64::from(u8::from(a < b)),
                        BinaryOp::Cmpeq => f64::from(u8::from(a == b)),
                    };
                    rnd(dt, y, round)
                })
                .collect(),
            Op::Where => {
                (0..total).map(|i| if src[0].data[i] != 0.0 { src[1].data[i] } else { src[2].data[i] }).collect()
            }
            Op::Reduce { op, axes } => {
                let mut acc = vec![op.identity(dt); total];
                for (i, &x) in src[0].data.iter().enumerate() {
                    let idx = unravel(i, &src[0].shape);
                    let kept: Vec<usize> =
                        idx.iter().enumerate().filter(|(k, _)| !axes.contains(k)).map(|(_, v)| *v).collect();
                    let j = ravel(&kept, &shape);
                    acc[j] = match op {
                        ReduceOp::Sum => acc[j] + x,
                        ReduceOp::Prod => acc[j] * x,
                        ReduceOp::Max => acc[j].max(x),
                        ReduceOp::Min => acc[j].min(x),
                    };
                }
                acc.into_iter().map(|x| rnd(dt, x, round)).collect()
            }
            // By definition, not as a running value: each point folds the
            // points of its axis before it in scan order, and itself unless
            // exclusive.
            Op::Scan { op, axis, exclusive, reverse } => (0..total)
                .map(|i| {
                    let mut idx = unravel(i, &shape);
                    let (at, d) = (idx[*axis], shape[*axis]);
                    let mut acc = op.identity(dt);
                    let folded = (0..d).filter(|&j| {
                        let before = if *reverse { j > at } else { j < at };
                        before || (j == at && !*exclusive)
                    });
                    for j in folded {
                        idx[*axis] = j;
                        let x = src[0].data[ravel(&idx, &shape)];
                        acc = match op {
                            ReduceOp::Sum => acc + x,
                            ReduceOp::Prod => acc * x,
                            ReduceOp::Max => acc.max(x),
                            ReduceOp::Min => acc.min(x),
                        };
                    }
                    rnd(dt, acc, round)
                })
                .collect(),
            Op::Reshape => src[0].data.clone(),
            Op::Permute { perm } => gather(
                &|o| {
                    let mut i = vec![0; perm.len()];
                    for (k, &p) in perm.iter().enumerate() {
                        i[p] = o[k];
                    }
                    Some(ravel(&i, &src[0].shape))
                },
                0.0,
            ),
            Op::Expand => gather(
                &|o| {
                    let i: Vec<usize> =
                        o.iter().zip(&src[0].shape).map(|(&v, &d)| if d == 1 { 0 } else { v }).collect();
                    Some(ravel(&i, &src[0].shape))
                },
                0.0,
            ),
            Op::Pad { pads, value } => gather(
                &|o| {
                    let mut i = Vec::new();
                    for (k, &v) in o.iter().enumerate() {
                        let lo = pads[k].0.as_int().unwrap() as usize;
                        if v < lo || v - lo >= src[0].shape[k] {
                            return None;
                        }
                        i.push(v - lo);
                    }
                    Some(ravel(&i, &src[0].shape))
                },
                rnd(dt, *value, round),
            ),
            Op::Shrink { lo, step, .. } => gather(
                &|o| {
                    let i: Vec<usize> = o
                        .iter()
                        .enumerate()
                        .map(|(k, &v)| (lo[k].as_int().unwrap() + v as i64 * step[k].as_int().unwrap()) as usize)
                        .collect();
                    Some(ravel(&i, &src[0].shape))
                },
                0.0,
            ),
            // Written out here, not through `tiny::op::gather_position`:
            // a negative index counts from the end, then it is clamped.
            Op::Gather { axis } => gather(
                &|o| {
                    let d = src[0].shape[*axis] as i64;
                    let v = src[1].data[ravel(o, &shape)] as i64;
                    let p = (if v < 0 { v + d } else { v }).max(0).min(d - 1);
                    let mut i = o.to_vec();
                    i[*axis] = p as usize;
                    Some(ravel(&i, &src[0].shape))
                },
                0.0,
            ),
            Op::Flip { axes } => gather(
                &|o| {
                    let i: Vec<usize> = o
                        .iter()
                        .enumerate()
                        .map(|(k, &v)| if axes.contains(&k) { src[0].shape[k] - 1 - v } else { v })
                        .collect();
                    Some(ravel(&i, &src[0].shape))
                },
                0.0,
            ),
            Op::View { map } => gather(
                &|o| {
                    let vars: Vec<i64> = o.iter().map(|&v| v as i64).collect();
                    let i: Vec<usize> = map.iter().map(|e| e.eval(&vars, &|_| None).unwrap() as usize).collect();
                    Some(ravel(&i, &src[0].shape))
                },
                0.0,
            ),
        };
        out.push(Tensor { shape, data });
    }
    b.outputs.iter().map(|o| out[o.node.index()].clone()).collect()
}

/// A deterministic pseudo-random tensor with f32-representable values in
/// `[lo, hi]` (so references see the values an f32 input holds).
pub fn random(shape: &[usize], seed: u64, lo: f64, hi: f64) -> Tensor {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let total: usize = shape.iter().product();
    let data = (0..total)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (lo + (hi - lo) * ((s >> 11) as f64 / (1u64 << 53) as f64)) as f32 as f64
        })
        .collect();
    Tensor::new(shape, data)
}

//! ONNX operators as Frontend IR statements ([`OPERATORS`] lists them).
//!
//! Each conversion follows the operator's definition in ONNX's
//! `Operators.md` at the model's opset; where an attribute moved to an
//! input between opsets (`Reshape`'s shape, `Slice`'s bounds, `Squeeze`'s
//! axes, `Clip`'s bounds, the reductions' axes, `Split`'s sizes), both
//! forms are read. A value the conversion needs at import time (a shape,
//! axes, pads) must be known ([`super::known`]); one that is not is
//! `Unsupported` naming the input.

use std::rc::Rc;

use onnx_protobuf::NodeProto;

use crate::diag;
use crate::diag::DResult;
use crate::frontend::ir::*;
use crate::sym::Dim;
use crate::DType;

use super::fold;
use super::known::Known;
use super::proto::{self, Attrs};
use super::{Builder, Val};

mod attention;
mod loss;
mod normalization;
mod one_hot;
mod pool;
mod recurrent;
mod resize;
mod rotary;
mod rounding;
mod sample;
mod scatter;
mod signal;
mod top_k;
mod trig;

/// An operator of the default domain the importer takes.
#[derive(Clone, Copy, Debug)]
pub struct Operator {
    /// The ONNX `op_type`.
    pub name: &'static str,
    /// The first opset that defines it (the importer takes it from
    /// `max(since, MIN_OPSET)` to [`super::MAX_OPSET`]).
    pub since: i64,
    /// What its conversion does not take, beyond what every operator does
    /// not (tensors with a zero-size axis, the types tgc does not compute
    /// in); empty when nothing.
    pub limits: &'static str,
}

/// Every operator the importer takes, in alphabetical order (the
/// operator-support table `docs/onnx_operators.md` is generated from it,
/// and a test holds the file to it).
pub const OPERATORS: &[Operator] = &[
    Operator { name: "Abs", since: 1, limits: "" },
    Operator { name: "Acos", since: 7, limits: "" },
    Operator { name: "Acosh", since: 9, limits: "" },
    Operator { name: "Add", since: 1, limits: "" },
    Operator { name: "AffineGrid", since: 20, limits: "size known at import (a constant, or computed from shapes)" },
    Operator { name: "And", since: 1, limits: "" },
    Operator { name: "ArgMax", since: 1, limits: "a NaN is not the extreme (ONNX leaves it unspecified)" },
    Operator { name: "ArgMin", since: 1, limits: "as ArgMax" },
    Operator { name: "Asin", since: 7, limits: "" },
    Operator { name: "Asinh", since: 9, limits: "" },
    Operator { name: "Atan", since: 7, limits: "" },
    Operator { name: "Atanh", since: 9, limits: "" },
    Operator { name: "Attention", since: 23, limits: "no key/value cache, `softcap`, windows or `qk_matmul_output_mode`; outputs 1–3 not computed; 3-D operands need `q_num_heads` and `kv_num_heads`" },
    Operator { name: "AveragePool", since: 1, limits: "`auto_pad` SAME with a stride > 1 over a symbolic size refused; pads over half the kernel, or `ceil_mode` with `count_include_pad` and a partial last window, need concrete sizes" },
    Operator { name: "BatchNormalization", since: 1, limits: "inference only (`training_mode=0`, `spatial=1`; outputs 1–4 not computed)" },
    Operator { name: "BlackmanWindow", since: 17, limits: "size known at import (computed there)" },
    Operator { name: "Cast", since: 1, limits: "to float, float16, bfloat16, int32, int64 (computed as int32) or bool" },
    Operator { name: "CastLike", since: 15, limits: "as Cast" },
    Operator { name: "Ceil", since: 1, limits: "" },
    Operator { name: "Celu", since: 12, limits: "" },
    Operator { name: "CenterCropPad", since: 18, limits: "the shape known at import (a constant, or computed from shapes); the cropped or padded sizes concrete" },
    Operator { name: "Clip", since: 1, limits: "" },
    Operator { name: "Col2Im", since: 18, limits: "image_shape and block_shape known at import (a constant, or computed from shapes) and concrete" },
    Operator { name: "Concat", since: 1, limits: "" },
    Operator { name: "Constant", since: 1, limits: "a tensor, float(s) or int(s) (no strings or sparse tensors)" },
    Operator { name: "ConstantOfShape", since: 9, limits: "the shape known at import (a constant, or computed from shapes)" },
    Operator { name: "Conv", since: 1, limits: "`auto_pad` SAME with a stride > 1 over a symbolic size refused" },
    Operator { name: "ConvTranspose", since: 1, limits: "`output_shape` over a symbolic size refused" },
    Operator { name: "Cos", since: 7, limits: "NaN for magnitudes above 65536" },
    Operator { name: "Cosh", since: 9, limits: "" },
    Operator { name: "CumProd", since: 26, limits: "the axis known at import (a constant, or computed from shapes)" },
    Operator { name: "CumSum", since: 11, limits: "the axis known at import (a constant, or computed from shapes)" },
    Operator { name: "DFT", since: 17, limits: "`axis` and `dft_length` known at import; matmuls against import-time cos/sin matrices of at most 2^20 elements (absolute error (2·n + 1)·2^-24·Σ\\|x\\| over n input points)" },
    Operator { name: "DeformConv", since: 19, limits: "2 spatial axes; sizes other than the batch concrete" },
    Operator { name: "DepthToSpace", since: 1, limits: "rank 4" },
    Operator { name: "Div", since: 1, limits: "" },
    Operator { name: "Dropout", since: 1, limits: "inference only (the mask output is all true)" },
    Operator { name: "Einsum", since: 12, limits: "one or two operands, an explicit `->`, no ellipsis, no letter repeated in one operand" },
    Operator { name: "Elu", since: 1, limits: "" },
    Operator { name: "Equal", since: 1, limits: "" },
    Operator { name: "Erf", since: 9, limits: "" },
    Operator { name: "Exp", since: 1, limits: "" },
    Operator { name: "Expand", since: 8, limits: "the shape known at import (a constant, or computed from shapes)" },
    Operator { name: "EyeLike", since: 9, limits: "" },
    Operator { name: "Flatten", since: 1, limits: "" },
    Operator { name: "Floor", since: 1, limits: "of values known at import (a constant, or computed from shapes) only" },
    Operator { name: "GRU", since: 7, limits: "the sequence length known at import (unrolled); activations Sigmoid, Tanh and Relu only; no `activation_alpha`/`activation_beta`" },
    Operator { name: "Gather", since: 1, limits: "indices int32 or int64" },
    Operator { name: "GatherElements", since: 11, limits: "indices int32 or int64" },
    Operator { name: "GatherND", since: 11, limits: "indices int32 or int64; the indexed sizes concrete" },
    Operator { name: "Gelu", since: 20, limits: "`approximate` none or tanh" },
    Operator { name: "Gemm", since: 1, limits: "" },
    Operator { name: "GlobalAveragePool", since: 1, limits: "" },
    Operator { name: "GlobalMaxPool", since: 1, limits: "" },
    Operator { name: "Greater", since: 1, limits: "" },
    Operator { name: "GreaterOrEqual", since: 12, limits: "" },
    Operator { name: "GridSample", since: 16, limits: "concrete input sizes; cubic over 2 spatial axes only" },
    Operator { name: "GroupNormalization", since: 18, limits: "" },
    Operator { name: "HammingWindow", since: 17, limits: "size known at import (computed there)" },
    Operator { name: "HannWindow", since: 17, limits: "size known at import (computed there)" },
    Operator { name: "HardSigmoid", since: 1, limits: "" },
    Operator { name: "HardSwish", since: 14, limits: "" },
    Operator { name: "Hardmax", since: 1, limits: "" },
    Operator { name: "Identity", since: 1, limits: "" },
    Operator { name: "InstanceNormalization", since: 1, limits: "" },
    Operator { name: "IsInf", since: 10, limits: "" },
    Operator { name: "IsNaN", since: 9, limits: "" },
    Operator { name: "LRN", since: 1, limits: "" },
    Operator { name: "LSTM", since: 7, limits: "the sequence length known at import (unrolled); activations Sigmoid, Tanh and Relu only; no `activation_alpha`/`activation_beta`; `input_forget` 0" },
    Operator { name: "LayerNormalization", since: 17, limits: "" },
    Operator { name: "LeakyRelu", since: 1, limits: "" },
    Operator { name: "Less", since: 1, limits: "" },
    Operator { name: "LessOrEqual", since: 12, limits: "" },
    Operator { name: "Log", since: 1, limits: "" },
    Operator { name: "LogSoftmax", since: 1, limits: "" },
    Operator { name: "LpNormalization", since: 1, limits: "" },
    Operator { name: "LpPool", since: 1, limits: "`auto_pad` SAME with a stride > 1 over a symbolic size refused" },
    Operator { name: "MatMul", since: 1, limits: "" },
    Operator { name: "Max", since: 1, limits: "" },
    Operator { name: "MaxPool", since: 1, limits: "as AveragePool; no Indices output, `storage_order=0`" },
    Operator { name: "MaxUnpool", since: 9, limits: "indices known at import (a constant, or computed from shapes); concrete sizes; outputs of at most 2^16 elements" },
    Operator { name: "Mean", since: 1, limits: "" },
    Operator { name: "MeanVarianceNormalization", since: 9, limits: "" },
    Operator { name: "Min", since: 1, limits: "" },
    Operator { name: "Mish", since: 18, limits: "" },
    Operator { name: "Mod", since: 10, limits: "of values known at import (a constant, or computed from shapes) only" },
    Operator { name: "Mul", since: 1, limits: "" },
    Operator { name: "Neg", since: 1, limits: "" },
    Operator { name: "NegativeLogLikelihoodLoss", since: 12, limits: "target int32 or int64" },
    Operator { name: "Not", since: 1, limits: "" },
    Operator { name: "OneHot", since: 9, limits: "depth known at import (a constant, or computed from shapes)" },
    Operator { name: "Or", since: 1, limits: "" },
    Operator { name: "PRelu", since: 1, limits: "" },
    Operator { name: "Pad", since: 1, limits: "pads, value and axes known at import (a constant, or computed from shapes); no negative pads; mode wrap over concrete sizes" },
    Operator { name: "Pow", since: 1, limits: "" },
    Operator { name: "RMSNormalization", since: 23, limits: "" },
    Operator { name: "RNN", since: 7, limits: "the sequence length known at import (unrolled); activations Sigmoid, Tanh and Relu only; no `activation_alpha`/`activation_beta`" },
    Operator { name: "Range", since: 11, limits: "start, limit, delta known at import (a constant, or computed from shapes); a symbolic limit needs a positive integer delta" },
    Operator { name: "Reciprocal", since: 1, limits: "" },
    Operator { name: "ReduceL1", since: 1, limits: "axes known at import (a constant, or computed from shapes)" },
    Operator { name: "ReduceL2", since: 1, limits: "axes known at import (a constant, or computed from shapes)" },
    Operator { name: "ReduceLogSum", since: 1, limits: "axes known at import (a constant, or computed from shapes)" },
    Operator { name: "ReduceLogSumExp", since: 1, limits: "axes known at import (a constant, or computed from shapes)" },
    Operator { name: "ReduceMax", since: 1, limits: "axes known at import (a constant, or computed from shapes)" },
    Operator { name: "ReduceMean", since: 1, limits: "axes known at import (a constant, or computed from shapes)" },
    Operator { name: "ReduceMin", since: 1, limits: "axes known at import (a constant, or computed from shapes)" },
    Operator { name: "ReduceProd", since: 1, limits: "axes known at import (a constant, or computed from shapes)" },
    Operator { name: "ReduceSum", since: 1, limits: "axes known at import (a constant, or computed from shapes)" },
    Operator { name: "ReduceSumSquare", since: 1, limits: "axes known at import (a constant, or computed from shapes)" },
    Operator { name: "Relu", since: 1, limits: "" },
    Operator { name: "Reshape", since: 1, limits: "the shape known at import (a constant, or computed from shapes)" },
    Operator {
        name: "Resize",
        since: 10,
        limits: "scales, sizes and roi known at import; a symbolic size only in a nearest repeat by a whole factor; interpolation of float tensors only; at most 2^16 taps (output size × filter width) per axis",
    },
    Operator { name: "RotaryEmbedding", since: 23, limits: "" },
    Operator { name: "Round", since: 11, limits: "" },
    Operator { name: "STFT", since: 17, limits: "`frame_step` and `frame_length` known at import; as DFT" },
    Operator { name: "Scan", since: 9, limits: "the sequence length known at import (unrolled); body initializers of at most 65536 elements" },
    Operator { name: "Scatter", since: 9, limits: "as ScatterElements (opsets 9–10; ONNX deprecates it from 11)" },
    Operator { name: "ScatterElements", since: 11, limits: "indices int32 or int64; the size along `axis` concrete" },
    Operator { name: "ScatterND", since: 11, limits: "indices int32 or int64; the indexed sizes concrete" },
    Operator { name: "Selu", since: 1, limits: "" },
    Operator { name: "Shape", since: 1, limits: "" },
    Operator { name: "Shrink", since: 9, limits: "of a float tensor" },
    Operator { name: "Sigmoid", since: 1, limits: "" },
    Operator { name: "Sign", since: 9, limits: "" },
    Operator { name: "Sin", since: 7, limits: "NaN for magnitudes above 65536" },
    Operator { name: "Sinh", since: 9, limits: "" },
    Operator { name: "Size", since: 1, limits: "" },
    Operator { name: "Slice", since: 1, limits: "starts, ends, axes, steps known at import (a constant, or computed from shapes) (bounds may be symbolic); a reversed slice needs a concrete size" },
    Operator { name: "Softmax", since: 1, limits: "" },
    Operator { name: "SoftmaxCrossEntropyLoss", since: 12, limits: "target int32 or int64" },
    Operator { name: "Softplus", since: 1, limits: "" },
    Operator { name: "Softsign", since: 1, limits: "" },
    Operator { name: "SpaceToDepth", since: 1, limits: "rank 4" },
    Operator { name: "Split", since: 1, limits: "sizes known at import (a constant, or computed from shapes)" },
    Operator { name: "Sqrt", since: 1, limits: "" },
    Operator { name: "Squeeze", since: 1, limits: "axes known at import (a constant, or computed from shapes)" },
    Operator { name: "Sub", since: 1, limits: "" },
    Operator { name: "Sum", since: 1, limits: "" },
    Operator { name: "Swish", since: 24, limits: "" },
    Operator { name: "Tan", since: 7, limits: "NaN for magnitudes above 65536" },
    Operator { name: "Tanh", since: 1, limits: "" },
    Operator { name: "ThresholdedRelu", since: 10, limits: "" },
    Operator { name: "Tile", since: 1, limits: "repeats known at import (a constant, or computed from shapes)" },
    Operator { name: "TopK", since: 1, limits: "k known at import (a constant, or computed from shapes); a NaN is not ordered (ONNX leaves it unspecified)" },
    Operator { name: "Transpose", since: 1, limits: "" },
    Operator { name: "Trilu", since: 14, limits: "k known at import (a constant, or computed from shapes)" },
    Operator { name: "Unsqueeze", since: 1, limits: "axes known at import (a constant, or computed from shapes)" },
    Operator { name: "Upsample", since: 7, limits: "as Resize (asymmetric coordinates)" },
    Operator { name: "Where", since: 9, limits: "" },
    Operator { name: "Xor", since: 1, limits: "" },
];

/// The attributes each operator's conversion reads, or that do not change
/// an inference result (`Dropout`'s `ratio`, `BatchNormalization`'s
/// `momentum`, a stash type tgc's f32 accumulation already meets); any
/// other attribute is refused rather than ignored.
fn attributes(op: &str) -> &'static [&'static str] {
    const POOL: &[&str] = &[
        "auto_pad",
        "ceil_mode",
        "count_include_pad",
        "dilations",
        "kernel_shape",
        "pads",
        "storage_order",
        "strides",
    ];
    const CONV: &[&str] =
        &["auto_pad", "dilations", "group", "kernel_shape", "output_padding", "output_shape", "pads", "strides"];
    const REDUCE: &[&str] = &["axes", "keepdims", "noop_with_empty_axes"];
    match op {
        "Attention" => &[
            "is_causal",
            "kv_num_heads",
            "left_window_size",
            "q_num_heads",
            "qk_matmul_output_mode",
            "right_window_size",
            "scale",
            "softcap",
            "softmax_precision",
        ],
        "AffineGrid" => &["align_corners"],
        "AveragePool" | "MaxPool" => POOL,
        "MaxUnpool" => &["kernel_shape", "pads", "strides"],
        "BatchNormalization" => &["epsilon", "is_test", "momentum", "spatial", "training_mode"],
        "Cast" => &["round_mode", "saturate", "to"],
        "CastLike" => &["round_mode", "saturate"],
        "Celu" | "Elu" | "LeakyRelu" | "ThresholdedRelu" => &["alpha"],
        "Clip" => &["max", "min"],
        "CenterCropPad" => &["axes"],
        "Col2Im" => &["dilations", "pads", "strides"],
        "Concat" | "Flatten" | "Gather" | "GatherElements" | "Hardmax" | "LogSoftmax" | "OneHot" | "Softmax" => {
            &["axis"]
        }
        "Constant" => &["value", "value_float", "value_floats", "value_int", "value_ints"],
        "ConstantOfShape" => &["value"],
        "Conv" | "ConvTranspose" => CONV,
        "CumProd" | "CumSum" => &["exclusive", "reverse"],
        "ArgMax" | "ArgMin" => &["axis", "keepdims", "select_last_index"],
        "Swish" => &["alpha"],
        "Resize" => &[
            "antialias",
            "axes",
            "coordinate_transformation_mode",
            "cubic_coeff_a",
            "exclude_outside",
            "extrapolation_value",
            "keep_aspect_ratio_policy",
            "mode",
            "nearest_mode",
        ],
        "Upsample" => &["mode", "scales"],
        "IsInf" => &["detect_negative", "detect_positive"],
        "DeformConv" => &["dilations", "group", "kernel_shape", "offset_group", "pads", "strides"],
        "DepthToSpace" | "SpaceToDepth" => &["blocksize", "mode"],
        "Dropout" => &["is_test", "ratio", "seed"],
        "Einsum" => &["equation"],
        "EyeLike" => &["dtype", "k"],
        "GatherND" => &["batch_dims"],
        "Gelu" => &["approximate"],
        "BlackmanWindow" | "HammingWindow" | "HannWindow" => &["output_datatype", "periodic"],
        "DFT" => &["axis", "inverse", "onesided"],
        "STFT" => &["onesided"],
        "GRU" => &[
            "activation_alpha",
            "activation_beta",
            "activations",
            "clip",
            "direction",
            "hidden_size",
            "layout",
            "linear_before_reset",
        ],
        "LSTM" => &[
            "activation_alpha",
            "activation_beta",
            "activations",
            "clip",
            "direction",
            "hidden_size",
            "input_forget",
            "layout",
        ],
        "RNN" => &["activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size", "layout"],
        // Opset 6's `broadcast` lets C broadcast, as it always may from 7 on.
        "Gemm" => &["alpha", "beta", "broadcast", "transA", "transB"],
        "GroupNormalization" => &["epsilon", "num_groups", "stash_type"],
        "GridSample" => &["align_corners", "mode", "padding_mode"],
        "HardSigmoid" => &["alpha", "beta"],
        "InstanceNormalization" => &["epsilon"],
        "LRN" => &["alpha", "beta", "bias", "size"],
        "LpNormalization" => &["axis", "p"],
        "LpPool" => &["auto_pad", "ceil_mode", "dilations", "kernel_shape", "p", "pads", "strides"],
        "MeanVarianceNormalization" => &["axes"],
        "NegativeLogLikelihoodLoss" | "SoftmaxCrossEntropyLoss" => &["ignore_index", "reduction"],
        "LayerNormalization" | "RMSNormalization" => &["axis", "epsilon", "stash_type"],
        "Mod" => &["fmod"],
        "Pad" => &["mode", "paddings", "pads", "value"],
        "Range" => &["stash_type"],
        "Reshape" => &["allowzero", "shape"],
        "Scatter" => &["axis"],
        "ScatterElements" => &["axis", "reduction"],
        "ScatterND" => &["reduction"],
        "Scan" => &[
            "body",
            "num_scan_inputs",
            "scan_input_axes",
            "scan_input_directions",
            "scan_output_axes",
            "scan_output_directions",
        ],
        "RotaryEmbedding" => &["interleaved", "num_heads", "rotary_embedding_dim"],
        "Selu" => &["alpha", "gamma"],
        "Shape" => &["end", "start"],
        "Shrink" => &["bias", "lambd"],
        "Slice" => &["axes", "ends", "starts"],
        "Split" => &["axis", "num_outputs", "split"],
        "Squeeze" | "Unsqueeze" => &["axes"],
        "TopK" => &["axis", "k", "largest", "sorted"],
        "Transpose" => &["perm"],
        "Trilu" => &["upper"],
        o if o.starts_with("Reduce") => REDUCE,
        // Before opset 7 a binary op broadcast its second operand only with
        // `broadcast=1`, aligned at `axis` when given: without `axis` that is
        // NumPy's right-aligned broadcast, so `broadcast` is taken and `axis`
        // refused.
        "Add" | "Sub" | "Mul" | "Div" | "Pow" | "And" | "Or" | "Xor" | "Equal" | "Less" | "Greater" => &["broadcast"],
        _ => &[],
    }
}

/// One node being converted.
struct N<'a> {
    node: &'a NodeProto,
    a: Attrs<'a>,
    opset: i64,
}

impl N<'_> {
    /// Input `k`'s name, `None` when absent or empty (an omitted optional).
    fn input(&self, k: usize) -> Option<&str> {
        self.node.input.get(k).map(String::as_str).filter(|s| !s.is_empty())
    }

    fn required(&self, k: usize) -> DResult<&str> {
        self.input(k).ok_or_else(|| diag!(ArityMismatch, "{} needs input {k}", self.node.op_type))
    }

    /// Whether output `k` is wanted.
    fn wants(&self, k: usize) -> bool {
        self.node.output.get(k).is_some_and(|s| !s.is_empty())
    }

    /// Refuses a wanted output `k` the conversion does not compute.
    fn no_output(&self, k: usize, what: &str) -> DResult<()> {
        if self.wants(k) {
            return Err(diag!(Unsupported, "output {k} of {} ({what}) is not computed", self.node.op_type));
        }
        Ok(())
    }
}

pub(super) fn convert(b: &mut Builder, node: &NodeProto) -> DResult<Vec<Val>> {
    let n = N { node, a: Attrs { list: &node.attribute }, opset: b.opset };
    let op = node.op_type.as_str();
    if OPERATORS.binary_search_by_key(&op, |o| o.name).is_err() {
        return Err(diag!(
            Unsupported,
            "operator {op} is not supported (docs/onnx_operators.md lists those the importer takes)"
        ));
    }
    if let Some(a) = n.a.names().find(|a| !attributes(op).contains(a)) {
        return Err(diag!(Unsupported, "attribute `{a}` of {op} is not taken"));
    }
    if let Some(ks) = fold::try_fold(b, node, &n.a)? {
        return Ok(ks.into_iter().map(|k| Val::Known(Rc::new(k))).collect());
    }
    let one = |v: DResult<ValueId>| v.map(|v| vec![Val::Run(v)]);
    match op {
        "Identity" => one(b.run(n.required(0)?)),
        "Dropout" => dropout(b, &n),
        "BlackmanWindow" | "HammingWindow" | "HannWindow" => signal::window(b, &n),
        "DFT" => signal::dft(b, &n),
        "STFT" => signal::stft(b, &n),
        "GRU" | "LSTM" | "RNN" => recurrent::convert(b, &n),
        "Scan" => recurrent::scan(b, &n),
        "Acos" | "Acosh" | "Asin" | "Asinh" | "Atan" | "Atanh" | "Cos" | "Cosh" | "Sin" | "Sinh" | "Tan" => {
            trig::convert(b, &n)
        }
        "Abs" | "Erf" | "Exp" | "Log" | "Neg" | "Reciprocal" | "Relu" | "Sigmoid" | "Sign" | "Sqrt" | "Tanh" => {
            let f = match op {
                "Abs" => UnaryFn::Abs,
                "Erf" => UnaryFn::Erf,
                "Exp" => UnaryFn::Exp,
                "Log" => UnaryFn::Log,
                "Neg" => UnaryFn::Neg,
                "Reciprocal" => UnaryFn::Recip,
                "Relu" => UnaryFn::Relu,
                "Sigmoid" => UnaryFn::Sigmoid,
                "Sign" => UnaryFn::Sign,
                "Sqrt" => UnaryFn::Sqrt,
                _ => UnaryFn::Tanh,
            };
            let x = b.run(n.required(0)?)?;
            one(unary(b, f, x))
        }
        "Gelu" => {
            let f = match n.a.string("approximate")?.as_deref() {
                None | Some("none") => UnaryFn::Gelu,
                Some("tanh") => UnaryFn::GeluTanh,
                Some(s) => return Err(diag!(Unsupported, "Gelu approximate=`{s}`")),
            };
            let x = b.run(n.required(0)?)?;
            one(unary(b, f, x))
        }
        "Add" | "Sub" | "Mul" | "Div" | "Pow" | "Equal" | "Less" | "LessOrEqual" | "Greater" | "GreaterOrEqual" => {
            let f = match op {
                "Add" => BinaryFn::Add,
                "Sub" => BinaryFn::Sub,
                "Mul" => BinaryFn::Mul,
                "Div" => BinaryFn::Div,
                "Pow" => BinaryFn::Pow,
                "Equal" => BinaryFn::Eq,
                "Less" => BinaryFn::Lt,
                "LessOrEqual" => BinaryFn::Le,
                "Greater" => BinaryFn::Gt,
                _ => BinaryFn::Ge,
            };
            one(binary_inputs(b, &n, f))
        }
        "Max" | "Min" | "Sum" | "Mean" => variadic(b, &n),
        "And" | "Or" | "Xor" => {
            let (x, y) = (b.run(n.required(0)?)?, b.run(n.required(1)?)?);
            let (vx, vy) = (Operand::Value(x), Operand::Value(y));
            one(match op {
                "And" => b.emit(FOp::Where, vec![vx, vy, b.lit(0.0, LitKind::Bool)]),
                "Or" => b.emit(FOp::Where, vec![vx, b.lit(1.0, LitKind::Bool), vy]),
                _ => b.emit(FOp::Binary(BinaryFn::Ne), vec![vx, vy]),
            })
        }
        "Not" => {
            let x = b.run(n.required(0)?)?;
            one(b.emit(FOp::Binary(BinaryFn::Eq), vec![Operand::Value(x), b.lit(0.0, LitKind::Bool)]))
        }
        "IsNaN" => {
            let x = b.run(n.required(0)?)?;
            one(b.emit(FOp::Binary(BinaryFn::Ne), vec![Operand::Value(x), Operand::Value(x)]))
        }
        "Where" => {
            let c = b.run(n.required(0)?)?;
            let rank = b.shape(c)?.len();
            let x = operand(b, n.required(1)?, rank)?;
            let y = operand(b, n.required(2)?, rank)?;
            one(b.emit(FOp::Where, vec![Operand::Value(c), x, y]))
        }
        "LeakyRelu" | "Elu" | "Selu" | "Celu" | "ThresholdedRelu" | "HardSigmoid" | "HardSwish" | "Softplus"
        | "Softsign" | "Mish" => one(activation(b, &n)),
        "PRelu" => {
            let x = b.run(n.required(0)?)?;
            let mut s = b.run(n.required(1)?)?;
            let (xr, ss) = (b.shape(x)?.len(), b.shape(s)?);
            if n.opset < 7 && ss.len() == 1 && !ss[0].is_one() && xr > 2 {
                // Before opset 7 a 1-D slope is one value per channel (axis 1).
                let axes = (1..xr as i64 - 1).collect();
                s = b.emit(FOp::Movement(Movement::Unsqueeze { axes }), vec![val(s)])?;
            }
            let neg = b.emit(FOp::Binary(BinaryFn::Lt), vec![Operand::Value(x), b.lit(0.0, LitKind::Float)])?;
            let scaled = b.emit(FOp::Binary(BinaryFn::Mul), vec![Operand::Value(x), Operand::Value(s)])?;
            one(b.emit(FOp::Where, vec![Operand::Value(neg), Operand::Value(scaled), Operand::Value(x)]))
        }
        "Clip" => one(clip(b, &n)),
        "Cast" | "CastLike" => {
            let x = b.run(n.required(0)?)?;
            let to = if op == "Cast" {
                let c = n.a.int("to")?.ok_or_else(|| diag!(SyntaxError, "Cast needs attribute `to`"))? as i32;
                proto::runtime_dtype(c).ok_or_else(|| {
                    diag!(Unsupported, "Cast to {}, a type tgc does not compute in", proto::type_name(c))
                })?
            } else {
                let like = b.run(n.required(1)?)?;
                b.dtype(like)?
            };
            if b.dtype(x)? == to {
                return one(Ok(x));
            }
            one(b.emit(FOp::Cast { to }, vec![Operand::Value(x)]))
        }
        "MatMul" => {
            let (x, y) = (b.run(n.required(0)?)?, b.run(n.required(1)?)?);
            one(b.emit(FOp::Matmul, vec![Operand::Value(x), Operand::Value(y)]))
        }
        "Gemm" => one(gemm(b, &n)),
        "Einsum" => one(einsum(b, &n)),
        "Conv" => one(conv(b, &n)),
        "ConvTranspose" => one(conv_transpose(b, &n)),
        "MaxPool" | "AveragePool" => {
            n.no_output(1, "the argmax indices")?;
            let x = b.run(n.required(0)?)?;
            one(pool(b, &n, x, op == "MaxPool"))
        }
        "LpPool" => one(normalization::lp_pool(b, &n)),
        "GlobalAveragePool" | "GlobalMaxPool" => {
            let x = b.run(n.required(0)?)?;
            let r = b.shape(x)?.len() as i64;
            let op = if op == "GlobalMaxPool" { ReduceFn::Max } else { ReduceFn::Mean };
            let axes = Some((2..r).map(AxisRef::Index).collect());
            one(b.emit(FOp::Reduce { op, axes, keepdim: true, acc: None }, vec![Operand::Value(x)]))
        }
        "BatchNormalization" => {
            if n.a.int_or("training_mode", 0)? != 0 || n.a.int_or("spatial", 1)? != 1 {
                return Err(diag!(Unsupported, "BatchNormalization in training mode or with spatial=0"));
            }
            for k in 1..5 {
                n.no_output(k, "running statistics")?;
            }
            let args = (0..5).map(|k| b.run(n.required(k)?).map(Operand::Value)).collect::<DResult<Vec<_>>>()?;
            one(b.emit(FOp::BatchNorm { eps: n.a.float_or("epsilon", 1e-5)? }, args))
        }
        "InstanceNormalization" => {
            let args = (0..3).map(|k| b.run(n.required(k)?).map(Operand::Value)).collect::<DResult<Vec<_>>>()?;
            one(b.emit(FOp::InstanceNorm { eps: n.a.float_or("epsilon", 1e-5)? }, args))
        }
        "LayerNormalization" => layer_norm(b, &n),
        "RMSNormalization" => one(rms_norm(b, &n)),
        "GroupNormalization" => one(normalization::group_norm(b, &n)),
        "LpNormalization" => one(normalization::lp_normalization(b, &n)),
        "MeanVarianceNormalization" => one(normalization::mean_variance(b, &n)),
        "LRN" => one(lrn(b, &n)),
        "Softmax" | "LogSoftmax" => one(softmax(b, &n)),
        "NegativeLogLikelihoodLoss" => loss::negative_log_likelihood(b, &n),
        "SoftmaxCrossEntropyLoss" => loss::softmax_cross_entropy(b, &n),
        "Hardmax" => one(one_hot::hardmax(b, &n)),
        "OneHot" => one(one_hot::one_hot(b, &n)),
        "EyeLike" => one(one_hot::eye_like(b, &n)),
        "Flatten" => {
            let x = b.run(n.required(0)?)?;
            let shape = b.shape(x)?;
            // `axis` is in [-r, r]: the number of leading axes of the rows.
            let r = shape.len() as i64;
            let axis = n.a.int_or("axis", 1)?;
            let axis = usize::try_from(if axis < 0 { axis + r } else { axis })
                .ok()
                .filter(|&a| a <= shape.len())
                .ok_or_else(|| diag!(InvalidAxis, "Flatten axis {axis} is out of range for rank {r}"))?;
            let shape = vec![Dim::product(&shape[..axis]), Dim::product(&shape[axis..])];
            one(b.emit(FOp::Movement(Movement::Reshape { shape }), vec![Operand::Value(x)]))
        }
        "Reshape" => one(reshape(b, &n)),
        "Transpose" => {
            let x = b.run(n.required(0)?)?;
            let r = b.shape(x)?.len() as i64;
            let perm = n.a.ints("perm")?.unwrap_or_else(|| (0..r).rev().collect());
            one(b.emit(FOp::Movement(Movement::Permute { perm }), vec![Operand::Value(x)]))
        }
        "Squeeze" => {
            let x = b.run(n.required(0)?)?;
            let axes = match axes_of(b, &n, 13)? {
                Some(a) => a,
                None => {
                    let shape = b.shape(x)?;
                    (0..shape.len() as i64).filter(|&k| shape[k as usize].is_one()).collect()
                }
            };
            one(b.emit(FOp::Movement(Movement::Squeeze { axes }), vec![Operand::Value(x)]))
        }
        "Unsqueeze" => {
            let x = b.run(n.required(0)?)?;
            let axes = axes_of(b, &n, 13)?.ok_or_else(|| diag!(SyntaxError, "Unsqueeze needs axes"))?;
            one(b.emit(FOp::Movement(Movement::Unsqueeze { axes }), vec![Operand::Value(x)]))
        }
        "Concat" => {
            let axis = n.a.int("axis")?.ok_or_else(|| diag!(SyntaxError, "Concat needs attribute `axis`"))?;
            let mut parts = Vec::new();
            for name in node.input.iter().filter(|s| !s.is_empty()) {
                parts.push(b.run(name)?);
            }
            if let [only] = parts[..] {
                return one(Ok(only));
            }
            one(b.emit(FOp::Pieces(Pieces::Concat { axis }), parts.into_iter().map(val).collect()))
        }
        "Split" => split(b, &n),
        "Slice" => one(slice(b, &n)),
        "Gather" => one(gather(b, &n)),
        "GatherElements" => {
            let x = b.run(n.required(0)?)?;
            let i = index_tensor(b, n.required(1)?, x, n.a.int_or("axis", 0)?)?;
            one(b.emit(FOp::Gather { axis: n.a.int_or("axis", 0)? }, vec![Operand::Value(x), Operand::Value(i)]))
        }
        "GatherND" => one(scatter::gather_nd(b, &n)),
        "Scatter" | "ScatterElements" => one(scatter::scatter_elements(b, &n)),
        "ScatterND" => one(scatter::scatter_nd(b, &n)),
        "TopK" => top_k::top_k(b, &n),
        "Expand" => one(expand(b, &n)),
        "Tile" => {
            let x = b.run(n.required(0)?)?;
            let reps = need_known(b, &n, 1, "repeats")?.dims("Tile's repeats")?.to_vec();
            one(b.emit(FOp::Movement(Movement::Tile { reps }), vec![Operand::Value(x)]))
        }
        "Pad" => one(pad(b, &n)),
        "ReduceMean" | "ReduceSum" | "ReduceMax" | "ReduceMin" | "ReduceProd" | "ReduceL1" | "ReduceL2"
        | "ReduceSumSquare" | "ReduceLogSum" | "ReduceLogSumExp" => one(reduce(b, &n)),
        "CumSum" | "CumProd" => {
            let x = b.run(n.required(0)?)?;
            let axis = need_known(b, &n, 1, "axis")?.int_values("the axis")?;
            let axis = *axis.first().ok_or_else(|| diag!(SyntaxError, "{op}'s axis is empty"))?;
            let scan = FOp::Scan {
                op: if op == "CumSum" { ReduceFn::Sum } else { ReduceFn::Prod },
                axis,
                exclusive: n.a.int_or("exclusive", 0)? != 0,
                reverse: n.a.int_or("reverse", 0)? != 0,
            };
            one(b.emit(scan, vec![Operand::Value(x)]))
        }
        "Trilu" => one(trilu(b, &n)),
        "Resize" | "Upsample" => one(resize::resize(b, &n)),
        "CenterCropPad" => one(resize::center_crop_pad(b, &n)),
        "Col2Im" => one(sample::col2im(b, &n)),
        "AffineGrid" => one(sample::affine_grid(b, &n)),
        "GridSample" => one(sample::grid_sample(b, &n)),
        "DeformConv" => one(sample::deform_conv(b, &n)),
        "MaxUnpool" => one(pool::max_unpool(b, &n)),
        "ArgMax" | "ArgMin" => one(arg_extreme(b, &n)),
        "Shrink" => {
            // `x + bias` below `-lambd`, `x - bias` above `lambd`, else 0.
            let x = b.run(n.required(0)?)?;
            if !b.dtype(x)?.is_float() {
                return Err(diag!(Unsupported, "Shrink of a {} tensor (float types only)", b.dtype(x)?));
            }
            let (lambd, bias) = (n.a.float_or("lambd", 0.5)?, n.a.float_or("bias", 0.0)?);
            let f = |v: f64| b.lit(v, LitKind::Float);
            let (lo, hi, bf, zero) = (f(-lambd), f(lambd), f(bias), f(0.0));
            let below = bin(b, BinaryFn::Lt, val(x), lo)?;
            let above = bin(b, BinaryFn::Gt, val(x), hi)?;
            let up = bin(b, BinaryFn::Add, val(x), bf)?;
            let down = bin(b, BinaryFn::Sub, val(x), bf)?;
            let y = b.emit(FOp::Where, vec![val(above), val(down), zero])?;
            one(b.emit(FOp::Where, vec![val(below), val(up), val(y)]))
        }
        "Swish" => {
            let x = b.run(n.required(0)?)?;
            let s = bin(b, BinaryFn::Mul, val(x), b.lit(n.a.float_or("alpha", 1.0)?, LitKind::Float))?;
            let s = unary(b, UnaryFn::Sigmoid, s)?;
            one(bin(b, BinaryFn::Mul, val(x), val(s)))
        }
        "IsInf" => {
            let x = b.run(n.required(0)?)?;
            let (pos, neg) = (n.a.int_or("detect_positive", 1)? != 0, n.a.int_or("detect_negative", 1)? != 0);
            let inf = |b: &Builder, v: f64| b.lit(v, LitKind::Float);
            one(match (pos, neg) {
                (true, true) => {
                    let a = unary(b, UnaryFn::Abs, x)?;
                    bin(b, BinaryFn::Eq, val(a), inf(b, f64::INFINITY))
                }
                (true, false) => bin(b, BinaryFn::Eq, val(x), inf(b, f64::INFINITY)),
                (false, true) => bin(b, BinaryFn::Eq, val(x), inf(b, f64::NEG_INFINITY)),
                (false, false) => {
                    let shape = b.shape(x)?;
                    b.splat(0.0, DType::Bool, &shape)
                }
            })
        }
        "Attention" => attention::attention(b, &n),
        "RotaryEmbedding" => one(rotary::rotary_embedding(b, &n)),
        "Range" => one(range(b, &n)),
        "ConstantOfShape" => {
            let shape = need_known(b, &n, 0, "shape")?.dims("ConstantOfShape's shape")?.to_vec();
            let (c, v) = fold::fill_value(b, &n.a)?;
            let dtype = proto::runtime_dtype(c).ok_or_else(|| {
                diag!(Unsupported, "ConstantOfShape of {}, a type tgc does not compute in", proto::type_name(c))
            })?;
            one(b.splat(v, dtype, &shape))
        }
        "Constant" => {
            // Too large to know at import time (fold::constant): a weight.
            let t = n.a.tensor("value")?.ok_or_else(|| diag!(Unsupported, "a Constant without a tensor value"))?;
            let host = super::host_tensor(t, b.dir)?;
            let name = node.output.first().cloned().unwrap_or_default();
            one(b.declare_weight(&name, host))
        }
        "DepthToSpace" | "SpaceToDepth" => one(depth_space(b, &n)),
        "Floor" | "Ceil" | "Round" => {
            let how = match op {
                "Floor" => rounding::Rounding::Floor,
                "Ceil" => rounding::Rounding::Ceil,
                _ => rounding::Rounding::HalfEven,
            };
            let x = b.run(n.required(0)?)?;
            one(rounding::round(b, x, how))
        }
        "Mod" => Err(diag!(Unsupported, "Mod of a tensor computed at run time (only of values known at import)")),
        _ => Err(diag!(Internal, "operator {op} is listed in OPERATORS but has no conversion")),
    }
}

/// `f(x)`.
fn unary(b: &mut Builder, f: UnaryFn, x: ValueId) -> DResult<ValueId> {
    b.emit(FOp::Unary(f), vec![Operand::Value(x)])
}

/// `f(x, y)` of two operands.
fn bin(b: &mut Builder, f: BinaryFn, x: Operand, y: Operand) -> DResult<ValueId> {
    b.emit(FOp::Binary(f), vec![x, y])
}

fn val(v: ValueId) -> Operand {
    Operand::Value(v)
}

/// The value of `name` as an operand beside a run-time tensor of rank
/// `rank`: a literal when it is a known single value of rank at most
/// `rank` (the broadcast then keeps the other operand's shape), else a
/// run-time value.
fn operand(b: &mut Builder, name: &str, rank: usize) -> DResult<Operand> {
    if let Some(k) = b.known(name)? {
        if k.len() == 1 && k.shape.len() <= rank && proto::runtime_dtype(k.code).is_some() {
            let v = k.float_values(&format!("`{name}`"))?[0];
            let kind = match proto::runtime_dtype(k.code) {
                Some(DType::Bool) => LitKind::Bool,
                Some(DType::I32) => {
                    proto::narrow(v as i64, &format!("`{name}`"))?;
                    LitKind::Int
                }
                _ => LitKind::Float,
            };
            return Ok(b.lit(v, kind));
        }
    }
    Ok(val(b.run(name)?))
}

/// A binary op of inputs 0 and 1 (a known scalar side becomes a literal).
fn binary_inputs(b: &mut Builder, n: &N, f: BinaryFn) -> DResult<ValueId> {
    let (x, y) = (n.required(0)?, n.required(1)?);
    let (xk, yk) = (b.known(x)?, b.known(y)?);
    if xk.is_some() && yk.is_none() {
        let yv = b.run(y)?;
        let r = b.shape(yv)?.len();
        let xo = operand(b, x, r)?;
        return bin(b, f, xo, val(yv));
    }
    let xv = b.run(x)?;
    let r = b.shape(xv)?.len();
    let yo = if f == BinaryFn::Pow { pow_exponent(b, y, xv, r)? } else { operand(b, y, r)? };
    bin(b, f, val(xv), yo)
}

/// `Pow`'s exponent: ONNX lets its type differ from the base's; a known
/// scalar becomes a literal of the base's kind, a tensor is cast to it.
fn pow_exponent(b: &mut Builder, y: &str, base: ValueId, rank: usize) -> DResult<Operand> {
    let want = b.dtype(base)?;
    if let Some(k) = b.known(y)? {
        if k.len() == 1 && k.shape.len() <= rank {
            return Ok(b.lit_for(k.float_values("Pow's exponent")?[0], want));
        }
    }
    let v = b.run(y)?;
    if b.dtype(v)? != want {
        return Ok(val(b.emit(FOp::Cast { to: want }, vec![val(v)])?));
    }
    Ok(val(v))
}

fn variadic(b: &mut Builder, n: &N) -> DResult<Vec<Val>> {
    let f = match n.node.op_type.as_str() {
        "Max" => BinaryFn::Maximum,
        "Min" => BinaryFn::Minimum,
        _ => BinaryFn::Add,
    };
    let names: Vec<&str> = n.node.input.iter().map(String::as_str).filter(|s| !s.is_empty()).collect();
    let first = names.first().ok_or_else(|| diag!(ArityMismatch, "{} needs an input", n.node.op_type))?;
    let mut acc = b.run(first)?;
    for name in &names[1..] {
        let r = b.shape(acc)?.len();
        let o = operand(b, name, r)?;
        acc = bin(b, f, val(acc), o)?;
    }
    if n.node.op_type == "Mean" && names.len() > 1 {
        acc = bin(b, BinaryFn::Div, val(acc), b.lit(names.len() as f64, LitKind::Float))?;
    }
    if names.len() == 1 {
        // One input: a copy, so the output is its own value.
        let shape = b.shape(acc)?;
        acc = b.emit(FOp::Movement(Movement::Reshape { shape }), vec![val(acc)])?;
    }
    Ok(vec![Val::Run(acc)])
}

fn dropout(b: &mut Builder, n: &N) -> DResult<Vec<Val>> {
    if let Some(t) = n.input(2) {
        let training = b.known(t)?.map(|k| k.scalar_value("training_mode")).transpose()?;
        if training != Some(0.0) {
            return Err(diag!(Unsupported, "Dropout in training mode (inference only)"));
        }
    }
    let x = b.run(n.required(0)?)?;
    let mut out = vec![Val::Run(x)];
    if n.wants(1) {
        // The mask of an inference dropout keeps every element.
        let shape = b.shape(x)?;
        out.push(Val::Run(b.splat(1.0, DType::Bool, &shape)?));
    }
    Ok(out)
}

fn activation(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let x = b.run(n.required(0)?)?;
    let a = &n.a;
    let span = b.span;
    let f = move |v: f64| Operand::Lit(Literal { value: v, kind: LitKind::Float, span });
    let xv = val(x);
    // `alpha * (exp(x) - 1)`.
    let expm1 = |b: &mut Builder, alpha: f64| -> DResult<ValueId> {
        let e = unary(b, UnaryFn::Exp, x)?;
        let e = bin(b, BinaryFn::Sub, val(e), f(1.0))?;
        bin(b, BinaryFn::Mul, val(e), f(alpha))
    };
    match n.node.op_type.as_str() {
        "LeakyRelu" => {
            let neg = bin(b, BinaryFn::Lt, xv, f(0.0))?;
            let s = bin(b, BinaryFn::Mul, xv, f(a.float_or("alpha", 0.01)?))?;
            b.emit(FOp::Where, vec![val(neg), val(s), xv])
        }
        "Elu" | "Selu" | "Celu" => {
            let (alpha, gamma) = match n.node.op_type.as_str() {
                "Elu" => (a.float_or("alpha", 1.0)?, 1.0),
                "Celu" => (a.float_or("alpha", 1.0)?, 1.0),
                _ => (a.float_or("alpha", 1.673_263_192_176_818_8)?, a.float_or("gamma", 1.050_701_022_148_132_3)?),
            };
            let neg = bin(b, BinaryFn::Le, xv, f(0.0))?;
            let m = if n.node.op_type == "Celu" {
                // alpha * (exp(x / alpha) - 1).
                let d = bin(b, BinaryFn::Div, xv, f(alpha))?;
                let e = unary(b, UnaryFn::Exp, d)?;
                let e = bin(b, BinaryFn::Sub, val(e), f(1.0))?;
                bin(b, BinaryFn::Mul, val(e), f(alpha))?
            } else {
                expm1(b, alpha)?
            };
            let y = b.emit(FOp::Where, vec![val(neg), val(m), xv])?;
            if gamma == 1.0 {
                return Ok(y);
            }
            bin(b, BinaryFn::Mul, val(y), f(gamma))
        }
        "ThresholdedRelu" => {
            let keep = bin(b, BinaryFn::Gt, xv, f(a.float_or("alpha", 1.0)?))?;
            b.emit(FOp::Where, vec![val(keep), xv, f(0.0)])
        }
        "HardSigmoid" | "HardSwish" => {
            let (alpha, beta) = if n.node.op_type == "HardSwish" {
                (1.0 / 6.0, 0.5)
            } else {
                (a.float_or("alpha", 0.2)?, a.float_or("beta", 0.5)?)
            };
            let s = bin(b, BinaryFn::Mul, xv, f(alpha))?;
            let s = bin(b, BinaryFn::Add, val(s), f(beta))?;
            let h = b.emit(FOp::Clamp { min: Some(0.0), max: Some(1.0) }, vec![val(s)])?;
            if n.node.op_type == "HardSigmoid" {
                return Ok(h);
            }
            bin(b, BinaryFn::Mul, xv, val(h))
        }
        "Softplus" | "Mish" => {
            let e = unary(b, UnaryFn::Exp, x)?;
            let e = bin(b, BinaryFn::Add, val(e), f(1.0))?;
            let sp = unary(b, UnaryFn::Log, e)?;
            if n.node.op_type == "Softplus" {
                return Ok(sp);
            }
            let t = unary(b, UnaryFn::Tanh, sp)?;
            bin(b, BinaryFn::Mul, xv, val(t))
        }
        _ => {
            // Softsign: x / (1 + |x|).
            let m = unary(b, UnaryFn::Abs, x)?;
            let d = bin(b, BinaryFn::Add, val(m), f(1.0))?;
            bin(b, BinaryFn::Div, xv, val(d))
        }
    }
}

fn clip(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let x = b.run(n.required(0)?)?;
    let (mut lo, mut hi) = (None, None);
    if n.opset < 11 {
        lo = n.a.has("min").then(|| n.a.float_or("min", 0.0)).transpose()?;
        hi = n.a.has("max").then(|| n.a.float_or("max", 0.0)).transpose()?;
    } else {
        let mut run_bounds = Vec::new();
        for (k, slot) in [(1, &mut lo), (2, &mut hi)] {
            let Some(name) = n.input(k) else { continue };
            match b.known(name)? {
                Some(v) => *slot = Some(v.scalar_value("Clip's bound")?),
                None => run_bounds.push((k, b.run(name)?)),
            }
        }
        let mut y = x;
        for (k, v) in run_bounds {
            let f = if k == 1 { BinaryFn::Maximum } else { BinaryFn::Minimum };
            y = bin(b, f, val(y), val(v))?;
        }
        if y != x && lo.is_none() && hi.is_none() {
            return Ok(y);
        }
        if lo.is_none() && hi.is_none() {
            let shape = b.shape(x)?;
            return b.emit(FOp::Movement(Movement::Reshape { shape }), vec![val(x)]);
        }
        return b.emit(FOp::Clamp { min: lo, max: hi }, vec![val(y)]);
    }
    if lo.is_none() && hi.is_none() {
        let shape = b.shape(x)?;
        return b.emit(FOp::Movement(Movement::Reshape { shape }), vec![val(x)]);
    }
    b.emit(FOp::Clamp { min: lo, max: hi }, vec![val(x)])
}

fn transpose_last(b: &mut Builder, x: ValueId) -> DResult<ValueId> {
    b.emit(FOp::Movement(Movement::Transpose { a: -2, b: -1 }), vec![val(x)])
}

fn gemm(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let mut x = b.run(n.required(0)?)?;
    let mut w = b.run(n.required(1)?)?;
    if n.a.int_or("transA", 0)? != 0 {
        x = transpose_last(b, x)?;
    }
    if n.a.int_or("transB", 0)? != 0 {
        w = transpose_last(b, w)?;
    }
    let mut y = b.emit(FOp::Matmul, vec![val(x), val(w)])?;
    let (alpha, beta) = (n.a.float_or("alpha", 1.0)?, n.a.float_or("beta", 1.0)?);
    if alpha != 1.0 {
        y = bin(b, BinaryFn::Mul, val(y), b.lit(alpha, LitKind::Float))?;
    }
    if let Some(c) = n.input(2) {
        if beta != 0.0 {
            let mut co = operand(b, c, 2)?;
            if beta != 1.0 {
                co = val(bin(b, BinaryFn::Mul, co, b.lit(beta, LitKind::Float))?);
            }
            y = bin(b, BinaryFn::Add, val(y), co)?;
        }
    }
    Ok(y)
}

/// A value needed at import time.
fn need_known(b: &mut Builder, n: &N, k: usize, what: &str) -> DResult<Rc<Known>> {
    let name = n.required(k)?;
    b.known(name)?.ok_or_else(|| {
        diag!(
            Unsupported,
            "{} input {k} ({what}, `{name}`) is computed at run time; the importer needs it at import time",
            n.node.op_type
        )
    })
}

/// An optional input known at import time.
fn opt_known(b: &mut Builder, n: &N, k: usize, what: &str) -> DResult<Option<Rc<Known>>> {
    match n.input(k) {
        None => Ok(None),
        Some(_) => need_known(b, n, k, what).map(Some),
    }
}

/// The `axes` of `Squeeze`/`Unsqueeze`/the reductions: an attribute
/// before opset `moved`, input 1 from then on.
fn axes_of(b: &mut Builder, n: &N, moved: i64) -> DResult<Option<Vec<i64>>> {
    if n.opset < moved {
        return n.a.ints("axes");
    }
    opt_known(b, n, 1, "axes")?.map(|k| k.int_values("axes")).transpose()
}

fn norm_axis(axis: i64, rank: usize) -> DResult<usize> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    usize::try_from(a).ok().filter(|&a| a < rank).ok_or_else(|| diag!(InvalidAxis, "axis {axis} is out of range"))
}

/// The largest stride, dilation, pad and kernel size the importer takes
/// (2^31 - 1: ONNX's ints are 64-bit, a window never needs more, and a
/// product of two stays far inside i64).
const WINDOW_MAX: i64 = i32::MAX as i64;

/// `values` when each is in `[lo, WINDOW_MAX]`.
///
/// Errors: `Unsupported` naming attribute `what` otherwise.
fn in_range(values: Vec<i64>, lo: i64, what: &str) -> DResult<Vec<i64>> {
    match values.iter().find(|v| !(lo..=WINDOW_MAX).contains(v)) {
        Some(v) => Err(diag!(Unsupported, "attribute `{what}` holds {v}; the importer takes {lo} to {WINDOW_MAX}")),
        None => Ok(values),
    }
}

/// The spatial window of a convolution or pool of `k` spatial axes over
/// input sizes `sizes`, with `kernel` extents (dilated by the window).
fn window(n: &N, sizes: &[Dim], kernel: &[Dim], transposed: bool) -> DResult<Window> {
    let k = kernel.len();
    let ints = |name: &str, default: i64| -> DResult<Vec<i64>> {
        let v = n.a.ints(name)?.unwrap_or_else(|| vec![default; k]);
        if v.len() != k {
            return Err(diag!(AxisSizeMismatch, "attribute `{name}` has {} entries for {k} spatial axes", v.len()));
        }
        Ok(v)
    };
    let stride = in_range(ints("strides", 1)?, 1, "strides")?;
    let dilation = in_range(ints("dilations", 1)?, 1, "dilations")?;
    let pads = in_range(n.a.ints("pads")?.unwrap_or_else(|| vec![0; 2 * k]), 0, "pads")?;
    if pads.len() != 2 * k {
        return Err(diag!(AxisSizeMismatch, "attribute `pads` has {} entries for {k} spatial axes", pads.len()));
    }
    // Kernel extents in range too, so the window arithmetic (products of
    // two such values) stays far inside i64.
    for (i, kd) in kernel.iter().enumerate() {
        if kd.as_int().is_some_and(|v| !(1..=WINDOW_MAX).contains(&v)) {
            return Err(diag!(
                Unsupported,
                "kernel size {kd} on spatial axis {i} (the importer takes 1 to {WINDOW_MAX})"
            ));
        }
    }
    let mut pad: Vec<(Dim, Dim)> = (0..k).map(|i| (Dim::int(pads[i]), Dim::int(pads[k + i]))).collect();
    let auto = n.a.string("auto_pad")?.unwrap_or_else(|| "NOTSET".into());
    match auto.as_str() {
        "NOTSET" | "" => {}
        "VALID" => pad = vec![(Dim::int(0), Dim::int(0)); k],
        "SAME_UPPER" | "SAME_LOWER" if !transposed => {
            for i in 0..k {
                let ext = (kernel[i].as_int().unwrap_or(1) - 1) * dilation[i] + 1;
                let total = if stride[i] == 1 {
                    ext - 1
                } else {
                    let d = sizes[i].as_int().ok_or_else(|| {
                        diag!(
                            Unsupported,
                            "auto_pad={auto} with stride {} over a symbolic size `{}`",
                            stride[i],
                            sizes[i]
                        )
                    })?;
                    (((d + stride[i] - 1) / stride[i] - 1) * stride[i] + ext - d).max(0)
                };
                let (small, big) = (total / 2, total - total / 2);
                pad[i] = if auto == "SAME_UPPER" {
                    (Dim::int(small), Dim::int(big))
                } else {
                    (Dim::int(big), Dim::int(small))
                };
            }
        }
        // A transposed convolution's SAME pads depend on its output padding:
        // its conversion sets them.
        "SAME_UPPER" | "SAME_LOWER" => {}
        _ => return Err(diag!(Unsupported, "auto_pad=`{auto}`")),
    }
    Ok(Window {
        stride: stride.into_iter().map(Dim::int).collect(),
        pad,
        dilation: dilation.into_iter().map(Dim::int).collect(),
    })
}

/// A convolution's operands `x, w[, bias]` and the shapes of `x` and `w`.
///
/// Errors: `AxisSizeMismatch` for an input of rank below 3 or a weight of
/// another rank.
fn conv_operands(b: &mut Builder, n: &N) -> DResult<(Vec<Operand>, Vec<Dim>, Vec<Dim>)> {
    let x = b.run(n.required(0)?)?;
    let w = b.run(n.required(1)?)?;
    let (xs, ws) = (b.shape(x)?, b.shape(w)?);
    if xs.len() < 3 || ws.len() != xs.len() {
        return Err(diag!(
            AxisSizeMismatch,
            "{} of an input of rank {} with a weight of rank {}",
            n.node.op_type,
            xs.len(),
            ws.len()
        ));
    }
    let mut args = vec![val(x), val(w)];
    if let Some(bias) = n.input(2) {
        args.push(val(b.run(bias)?));
    }
    Ok((args, xs, ws))
}

fn conv(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let (args, xs, ws) = conv_operands(b, n)?;
    let window = window(n, &xs[2..], &ws[2..], false)?;
    let bias = args.len() == 3;
    b.emit(FOp::Conv { window, groups: n.a.int_or("group", 1)?, bias }, args)
}

fn conv_transpose(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let (args, xs, ws) = conv_operands(b, n)?;
    let k = xs.len() - 2;
    let mut window = window(n, &xs[2..], &ws[2..], true)?;
    let mut out_pad: Vec<i64> =
        in_range(n.a.ints("output_padding")?.unwrap_or_else(|| vec![0; k]), 0, "output_padding")?;
    if out_pad.len() != k {
        return Err(diag!(
            AxisSizeMismatch,
            "attribute `output_padding` has {} entries for {k} spatial axes",
            out_pad.len()
        ));
    }
    let auto = n.a.string("auto_pad")?.unwrap_or_default();
    if let Some(out) = n.a.ints("output_shape")?.map(|o| in_range(o, 1, "output_shape")).transpose()? {
        if out.len() < k {
            return Err(diag!(
                AxisSizeMismatch,
                "attribute `output_shape` has {} entries for {k} spatial axes",
                out.len()
            ));
        }
        let out = &out[out.len() - k..];
        for i in 0..k {
            let ins = xs[2 + i]
                .as_int()
                .ok_or_else(|| diag!(Unsupported, "ConvTranspose output_shape over a symbolic size"))?;
            let kk = ws[2 + i].as_int().unwrap_or(1);
            let s = window.stride[i].as_int().unwrap_or(1);
            let d = window.dilation[i].as_int().unwrap_or(1);
            // In i128: the input size may be up to 2^48 and the stride 2^31.
            let total =
                s as i128 * (ins as i128 - 1) + out_pad[i] as i128 + (kk as i128 - 1) * d as i128 + 1 - out[i] as i128;
            let total = i64::try_from(total)
                .ok()
                .filter(|t| t.unsigned_abs() <= WINDOW_MAX as u64)
                .ok_or_else(|| diag!(Unsupported, "ConvTranspose pads of {total} on spatial axis {i}"))?;
            if total < 0 {
                // A larger output than the full one: the rest is output padding.
                out_pad[i] -= total;
                window.pad[i] = (Dim::int(0), Dim::int(0));
                continue;
            }
            let (small, big) = (total / 2, total - total / 2);
            window.pad[i] =
                if auto == "SAME_UPPER" { (Dim::int(small), Dim::int(big)) } else { (Dim::int(big), Dim::int(small)) };
        }
    } else if auto == "SAME_UPPER" || auto == "SAME_LOWER" {
        for i in 0..k {
            let kk = ws[2 + i].as_int().unwrap_or(1);
            let s = window.stride[i].as_int().unwrap_or(1);
            let d = window.dilation[i].as_int().unwrap_or(1);
            // Output size = input size * stride.
            let total = (kk - 1) * d + 1 + out_pad[i] - s;
            let total = total.max(0);
            let (small, big) = (total / 2, total - total / 2);
            window.pad[i] =
                if auto == "SAME_UPPER" { (Dim::int(small), Dim::int(big)) } else { (Dim::int(big), Dim::int(small)) };
        }
    }
    let bias = args.len() == 3;
    let output_padding = out_pad.into_iter().map(Dim::int).collect();
    b.emit(FOp::ConvTranspose { window, output_padding, groups: n.a.int_or("group", 1)?, bias }, args)
}

/// A pooling node's window over an input of shape `xs`: the kernel, the
/// window with `ceil_mode`'s extra end padding added, the model's own pads
/// (`real`), and whether `ceil_mode` made a last window partial.
struct PoolWindow {
    kernel: Vec<Dim>,
    window: Window,
    real: Vec<(Dim, Dim)>,
    partial: bool,
}

/// The window of pooling node `n` (its attributes) over an input of shape
/// `xs`.
fn pool_window(n: &N, xs: &[Dim]) -> DResult<PoolWindow> {
    if n.a.int_or("storage_order", 0)? != 0 {
        return Err(diag!(Unsupported, "MaxPool storage_order=1"));
    }
    let kernel: Vec<Dim> =
        n.a.ints("kernel_shape")?
            .ok_or_else(|| diag!(SyntaxError, "{} needs attribute `kernel_shape`", n.node.op_type))
            .and_then(|k| in_range(k, 1, "kernel_shape"))?
            .into_iter()
            .map(Dim::int)
            .collect();
    if xs.len() != kernel.len() + 2 {
        return Err(diag!(AxisSizeMismatch, "a {}-d kernel over an input of rank {}", kernel.len(), xs.len()));
    }
    let mut window = window(n, &xs[2..], &kernel, false)?;
    let real = window.pad.clone();
    let mut partial = false;
    if n.a.int_or("ceil_mode", 0)? != 0 {
        for i in 0..kernel.len() {
            let d = xs[2 + i]
                .as_int()
                .ok_or_else(|| diag!(Unsupported, "ceil_mode over a symbolic size `{}`", xs[2 + i]))?;
            let (s, dil, k) = (
                window.stride[i].as_int().unwrap_or(1),
                window.dilation[i].as_int().unwrap_or(1),
                kernel[i].as_int().unwrap_or(1),
            );
            let (pb, pe) = (window.pad[i].0.as_int().unwrap_or(0), window.pad[i].1.as_int().unwrap_or(0));
            let span = d + pb + pe - ((k - 1) * dil + 1);
            let mut out = (span + s - 1).div_euclid(s) + 1;
            // The last window must start inside the input or its left padding.
            if (out - 1) * s >= d + pb {
                out -= 1;
            }
            let extra = (out - 1) * s + (k - 1) * dil + 1 - (d + pb + pe);
            if extra > 0 {
                partial = true;
                window.pad[i].1 = Dim::int(pe + extra);
            }
        }
    }
    Ok(PoolWindow { kernel, window, real, partial })
}

/// `MaxPool` (`max`) or `AveragePool` of `x` under node `n`'s window: the
/// Frontend IR's pool where it takes the window as it is, else with the
/// pads made explicit ([`pool::padded`]).
fn pool(b: &mut Builder, n: &N, x: ValueId, max: bool) -> DResult<ValueId> {
    let count_include_pad = n.a.int_or("count_include_pad", 0)? != 0;
    let PoolWindow { kernel, window, real, partial } = pool_window(n, &b.shape(x)?)?;
    let over = real.iter().zip(&kernel).any(|((lo, hi), k)| {
        let k = k.as_int().unwrap_or(1);
        [lo, hi].iter().any(|p| p.as_int().is_some_and(|p| p > k / 2))
    });
    if over || (partial && !max && count_include_pad) {
        return pool::padded(b, x, kernel, window, &real, max, count_include_pad);
    }
    let op = if max { FOp::MaxPool { kernel, window } } else { FOp::AvgPool { kernel, window, count_include_pad } };
    b.emit(op, vec![val(x)])
}

/// `LayerNormalization`; its optional outputs Mean and InvStdDev (f32,
/// the normalised axes kept as size 1) are computed beside it when wanted.
fn layer_norm(b: &mut Builder, n: &N) -> DResult<Vec<Val>> {
    let x = b.run(n.required(0)?)?;
    let r = b.shape(x)?.len();
    let axis = norm_axis(n.a.int_or("axis", -1)?, r)?;
    let eps = n.a.float_or("epsilon", 1e-5)?;
    let gamma = b.run(n.required(1)?)?;
    let beta = match n.input(2) {
        Some(name) => b.run(name)?,
        None => {
            let (shape, dt) = (b.shape(gamma)?, b.dtype(gamma)?);
            b.splat(0.0, dt, &shape)?
        }
    };
    let axes: Vec<i64> = (axis as i64..r as i64).collect();
    let y = b.emit(FOp::LayerNorm { axes: axes.clone(), eps }, vec![val(x), val(gamma), val(beta)])?;
    let mut out = vec![Val::Run(y)];
    if n.wants(1) || n.wants(2) {
        let xf = if b.dtype(x)? == DType::F32 { x } else { b.emit(FOp::Cast { to: DType::F32 }, vec![val(x)])? };
        let mean_of = |b: &mut Builder, v: ValueId| {
            let axes = Some(axes.iter().map(|&a| AxisRef::Index(a)).collect());
            b.emit(FOp::Reduce { op: ReduceFn::Mean, axes, keepdim: true, acc: None }, vec![val(v)])
        };
        let mean = mean_of(b, xf)?;
        let c = bin(b, BinaryFn::Sub, val(xf), val(mean))?;
        let sq = bin(b, BinaryFn::Mul, val(c), val(c))?;
        let var = mean_of(b, sq)?;
        let var = bin(b, BinaryFn::Add, val(var), b.lit(eps, LitKind::Float))?;
        out.push(Val::Run(mean));
        out.push(Val::Run(unary(b, UnaryFn::Rsqrt, var)?));
    }
    Ok(out)
}

/// `LRN` (Krizhevsky et al.): `x / (bias + alpha/size · Σ x²)^beta`, the sum
/// over `size` neighbouring channels (`(size-1)/2` before, the rest after).
fn lrn(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let x = b.run(n.required(0)?)?;
    let size = n.a.int("size")?.ok_or_else(|| diag!(SyntaxError, "LRN needs attribute `size`"))?;
    let (alpha, beta, bias) = (n.a.float_or("alpha", 1e-4)?, n.a.float_or("beta", 0.75)?, n.a.float_or("bias", 1.0)?);
    let r = b.shape(x)?.len();
    if r < 3 || size < 1 {
        return Err(diag!(Unsupported, "LRN over rank {r} with size {size}"));
    }
    let sq = bin(b, BinaryFn::Mul, val(x), val(x))?;
    let before = (size - 1) / 2;
    let mut pads = vec![(Dim::int(0), Dim::int(0)); r];
    pads[1] = (Dim::int(before), Dim::int(size - 1 - before));
    let p = b.emit(FOp::Movement(Movement::Pad { pads, value: 0.0, mode: PadMode::Constant }), vec![val(sq)])?;
    let w =
        b.emit(FOp::Movement(Movement::Unfold { axis: 1, size: Dim::int(size), step: Dim::int(1) }), vec![val(p)])?;
    let s = b.emit(
        FOp::Reduce { op: ReduceFn::Sum, axes: Some(vec![AxisRef::Index(-1)]), keepdim: false, acc: None },
        vec![val(w)],
    )?;
    let t = bin(b, BinaryFn::Mul, val(s), b.lit(alpha / size as f64, LitKind::Float))?;
    let t = bin(b, BinaryFn::Add, val(t), b.lit(bias, LitKind::Float))?;
    let d = bin(b, BinaryFn::Pow, val(t), b.lit(beta, LitKind::Float))?;
    bin(b, BinaryFn::Div, val(x), val(d))
}

fn softmax(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let x = b.run(n.required(0)?)?;
    let shape = b.shape(x)?;
    let r = shape.len();
    let log = n.node.op_type == "LogSoftmax";
    let make = |axis: i64| if log { FOp::LogSoftmax { axis } } else { FOp::Softmax { axis } };
    if n.opset >= 13 {
        return b.emit(make(n.a.int_or("axis", -1)?), vec![val(x)]);
    }
    // Before opset 13 the input is seen as 2-D: [prod(:axis), prod(axis:)].
    let axis = norm_axis(n.a.int_or("axis", 1)?, r.max(1))?;
    if axis + 1 == r {
        return b.emit(make(-1), vec![val(x)]);
    }
    let flat = vec![Dim::product(&shape[..axis]), Dim::product(&shape[axis..])];
    let f = b.emit(FOp::Movement(Movement::Reshape { shape: flat }), vec![val(x)])?;
    let s = b.emit(make(-1), vec![val(f)])?;
    b.emit(FOp::Movement(Movement::Reshape { shape }), vec![val(s)])
}

fn reshape(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let x = b.run(n.required(0)?)?;
    let xs = b.shape(x)?;
    let want: Vec<Dim> = if n.opset < 5 {
        n.a.ints("shape")?.unwrap_or_default().into_iter().map(Dim::int).collect()
    } else {
        need_known(b, n, 1, "shape")?.dims("Reshape's shape")?.to_vec()
    };
    let allowzero = n.a.int_or("allowzero", 0)? != 0;
    let shape = want
        .iter()
        .enumerate()
        .map(|(k, d)| match d.as_int() {
            Some(0) if !allowzero => xs
                .get(k)
                .cloned()
                .ok_or_else(|| diag!(AxisSizeMismatch, "Reshape copies axis {k} of a rank-{} input", xs.len())),
            _ => Ok(d.clone()),
        })
        .collect::<DResult<Vec<_>>>()?;
    b.emit(FOp::Movement(Movement::Reshape { shape }), vec![val(x)])
}

fn split(b: &mut Builder, n: &N) -> DResult<Vec<Val>> {
    let x = b.run(n.required(0)?)?;
    let xs = b.shape(x)?;
    let axis = n.a.int_or("axis", 0)?;
    let ax = norm_axis(axis, xs.len())?;
    let outs = n.node.output.len();
    let sizes: Option<Vec<Dim>> = if n.opset < 13 {
        n.a.ints("split")?.map(|v| v.into_iter().map(Dim::int).collect())
    } else {
        opt_known(b, n, 1, "split")?.map(|k| k.dims("Split's sizes").map(<[Dim]>::to_vec)).transpose()?
    };
    let op = match sizes {
        Some(s) => Pieces::Split { sizes: s, axis },
        None => {
            let pieces = match n.a.int("num_outputs")? {
                None => outs,
                Some(v) if v >= 1 && v as u64 == outs as u64 => outs,
                Some(v) => return Err(diag!(AxisSizeMismatch, "Split into {v} pieces with {outs} outputs")),
            };
            if pieces == 0 {
                return Err(diag!(ArityMismatch, "Split without outputs"));
            }
            match xs[ax].as_int() {
                Some(d) if d % pieces as i64 != 0 => {
                    // ONNX 18: the last piece is smaller.
                    let each = (d + pieces as i64 - 1) / pieces as i64;
                    let mut s: Vec<Dim> = (0..pieces - 1).map(|_| Dim::int(each)).collect();
                    s.push(Dim::int(d - each * (pieces as i64 - 1)));
                    Pieces::Split { sizes: s, axis }
                }
                _ => Pieces::Chunk { chunks: pieces, axis },
            }
        }
    };
    let k = FOp::Pieces(op.clone()).results();
    let vs = b.emit_n(FOp::Pieces(op), vec![val(x)], k)?;
    Ok(vs.into_iter().map(Val::Run).collect())
}

fn slice(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let x = b.run(n.required(0)?)?;
    let xs = b.shape(x)?;
    let r = xs.len();
    // Starts and ends may be expressions of symbols (`sequence_length`);
    // axes and steps are integers.
    let get = |b: &mut Builder, k: usize, name: &str| -> DResult<Option<Vec<Dim>>> {
        if n.opset < 10 {
            return Ok(n.a.ints(name)?.map(|v| v.into_iter().map(Dim::int).collect()));
        }
        opt_known(b, n, k, name)?.map(|v| v.dims(name).map(<[Dim]>::to_vec)).transpose()
    };
    let ints = |v: Option<Vec<Dim>>, name: &str| -> DResult<Option<Vec<i64>>> {
        v.map(|v| {
            v.iter()
                .map(|d| {
                    d.as_int().ok_or_else(|| diag!(UnboundSymbol, "Slice {name} depends on `{d}`; bind it with --dim"))
                })
                .collect()
        })
        .transpose()
    };
    let starts = get(b, 1, "starts")?.ok_or_else(|| diag!(SyntaxError, "Slice needs starts"))?;
    let ends = get(b, 2, "ends")?.ok_or_else(|| diag!(SyntaxError, "Slice needs ends"))?;
    let axes = ints(get(b, 3, "axes")?, "axes")?.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = ints(get(b, 4, "steps")?, "steps")?.unwrap_or_else(|| vec![1; starts.len()]);
    let mut bounds: Vec<(Dim, Dim, Dim)> = xs.iter().map(|d| (Dim::int(0), d.clone(), Dim::int(1))).collect();
    let mut flips = Vec::new();
    for (k, start) in starts.iter().enumerate() {
        let ax = norm_axis(*axes.get(k).unwrap_or(&(k as i64)), r)?;
        let end = ends.get(k).cloned().unwrap_or(Dim::int(i64::MAX));
        let step = *steps.get(k).unwrap_or(&1);
        if step == 0 {
            return Err(diag!(NegativeStride, "Slice step 0 on axis {ax}"));
        }
        let (lo, hi) = match (xs[ax].as_int(), start.as_int(), end.as_int()) {
            (Some(d), Some(start), Some(end)) => {
                let (s, e) = fold::slice_bounds(start, end, step, d);
                if step > 0 {
                    (Dim::int(s), Dim::int(e.max(s)))
                } else {
                    // Reversed: the axis flipped, then [d-1-s, d-1-e).
                    flips.push(ax as i64);
                    (Dim::int(d - 1 - s), Dim::int((d - 1 - e).max(d - 1 - s)))
                }
            }
            _ if step > 0 => {
                // A symbolic size or bound: a concrete bound counts from the
                // end when negative and is the size past it; a symbolic one
                // is taken as it is (it lies in [0, size] for any shape the
                // model accepts).
                let d = &xs[ax];
                let at = |v: &Dim| match v.as_int() {
                    Some(v) if v >= i64::MAX / 2 => d.clone(),
                    Some(v) if v >= 0 => Dim::int(v),
                    Some(v) if v > -(1 << 40) => d - &Dim::int(-v),
                    Some(_) => Dim::int(0),
                    None => v.clone(),
                };
                (at(start), at(&end))
            }
            _ => return Err(diag!(Unsupported, "a reversed Slice over the symbolic size `{}`", xs[ax])),
        };
        bounds[ax] = (lo, hi, Dim::int(step.abs()));
    }
    let mut v = x;
    if !flips.is_empty() {
        v = b.emit(FOp::Movement(Movement::Flip { axes: flips }), vec![val(v)])?;
    }
    b.emit(FOp::Movement(Movement::Slice { bounds }), vec![val(v)])
}

/// A known or run-time index tensor for a gather along `axis` of `x`, as
/// i32 with negative known indices counted from the end.
fn index_tensor(b: &mut Builder, name: &str, x: ValueId, axis: i64) -> DResult<ValueId> {
    if let Some(k) = b.known(name)? {
        let xs = b.shape(x)?;
        let d = xs[norm_axis(axis, xs.len())?].as_int();
        let values: Vec<f64> = k
            .int_values("indices")?
            .into_iter()
            .map(|i| match d {
                Some(d) if i < 0 => (i + d) as f64,
                _ => i as f64,
            })
            .collect();
        let k = Known {
            code: proto::code::INT32,
            shape: k.shape.clone(),
            data: super::kdata_of(proto::code::INT32, values),
        };
        return b.materialize(&k, name);
    }
    let v = b.run(name)?;
    if b.dtype(v)? != DType::I32 {
        return Err(diag!(Unsupported, "indices of type {} (int32 or int64 only)", b.dtype(v)?));
    }
    Ok(v)
}

fn gather(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let x = b.run(n.required(0)?)?;
    let axis = n.a.int_or("axis", 0)?;
    let i = index_tensor(b, n.required(1)?, x, axis)?;
    b.emit(FOp::Take { axis }, vec![val(x), val(i)])
}

fn expand(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let x = b.run(n.required(0)?)?;
    let xs = b.shape(x)?;
    let want = need_known(b, n, 1, "shape")?.dims("Expand's shape")?.to_vec();
    // Bidirectional broadcast: a 1 in `want` keeps the input's size.
    let r = xs.len().max(want.len());
    let at = |s: &[Dim], k: usize| if k + s.len() < r { Dim::int(1) } else { s[k + s.len() - r].clone() };
    let shape: Vec<Dim> = (0..r)
        .map(|k| {
            let (a, w) = (at(&xs, k), at(&want, k));
            if w.is_one() {
                a
            } else {
                w
            }
        })
        .collect();
    b.emit(FOp::Movement(Movement::Expand { shape }), vec![val(x)])
}

fn pad(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let x = b.run(n.required(0)?)?;
    let r = b.shape(x)?.len();
    let mode = match n.a.string("mode")?.as_deref().unwrap_or("constant") {
        "constant" => Some(PadMode::Constant),
        "reflect" => Some(PadMode::Reflect),
        "edge" => Some(PadMode::Edge),
        "wrap" => None,
        m => return Err(diag!(Unsupported, "Pad mode `{m}`")),
    };
    let (pads, value, axes) = if n.opset < 11 {
        let p = n.a.ints("pads")?.or(n.a.ints("paddings")?).ok_or_else(|| diag!(SyntaxError, "Pad needs pads"))?;
        (p, n.a.float_or("value", 0.0)?, None)
    } else {
        let p = need_known(b, n, 1, "pads")?.int_values("pads")?;
        let v =
            opt_known(b, n, 2, "constant_value")?.map(|k| k.scalar_value("constant_value")).transpose()?.unwrap_or(0.0);
        let axes = opt_known(b, n, 3, "axes")?.map(|k| k.int_values("axes")).transpose()?;
        (p, v, axes)
    };
    let axes: Vec<usize> = match axes {
        Some(a) => a.iter().map(|&v| norm_axis(v, r)).collect::<DResult<_>>()?,
        None => (0..r).collect(),
    };
    let k = axes.len();
    if pads.len() != 2 * k {
        return Err(diag!(AxisSizeMismatch, "Pad has {} pads for {k} axes", pads.len()));
    }
    if pads.iter().any(|&p| p < 0) {
        return Err(diag!(Unsupported, "Pad with negative pads (a crop)"));
    }
    let mut all = vec![(Dim::int(0), Dim::int(0)); r];
    for (i, &ax) in axes.iter().enumerate() {
        all[ax] = (Dim::int(pads[i]), Dim::int(pads[k + i]));
    }
    match mode {
        Some(mode) => b.emit(FOp::Movement(Movement::Pad { pads: all, value, mode }), vec![val(x)]),
        None => wrap_pad(b, x, &all),
    }
}

/// `Pad` in mode wrap (the tensor continued periodically): a `tile` by
/// enough copies to cover both pads, then the window `[lo, size + hi)`
/// around the middle copy.
///
/// Errors: `Unsupported` for a symbolic size along a padded axis.
fn wrap_pad(b: &mut Builder, x: ValueId, pads: &[(Dim, Dim)]) -> DResult<ValueId> {
    let xs = b.shape(x)?;
    let (mut reps, mut bounds) = (Vec::new(), Vec::new());
    for (d, (lo, hi)) in xs.iter().zip(pads) {
        let (lo, hi) = (lo.as_int().unwrap_or(0), hi.as_int().unwrap_or(0));
        if lo == 0 && hi == 0 {
            reps.push(Dim::int(1));
            bounds.push((Dim::int(0), d.clone()));
            continue;
        }
        let d =
            d.as_int().filter(|&d| d > 0).ok_or_else(|| diag!(Unsupported, "Pad mode wrap along the size `{d}`"))?;
        let before = (lo + d - 1) / d;
        reps.push(Dim::int(before + 1 + (hi + d - 1) / d));
        bounds.push((Dim::int(before * d - lo), Dim::int(before * d + d + hi)));
    }
    let t = b.emit(FOp::Movement(Movement::Tile { reps }), vec![val(x)])?;
    b.emit(FOp::Movement(Movement::Shrink { bounds }), vec![val(t)])
}

fn reduce(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let op = n.node.op_type.as_str();
    let mut x = b.run(n.required(0)?)?;
    let moved = if op == "ReduceSum" { 13 } else { 18 };
    let axes = axes_of(b, n, moved)?;
    let keepdim = n.a.int_or("keepdims", 1)? != 0;
    let axes = match axes {
        Some(a) if a.is_empty() => None,
        a => a,
    };
    if axes.is_none() && n.a.int_or("noop_with_empty_axes", 0)? != 0 {
        let shape = b.shape(x)?;
        return b.emit(FOp::Movement(Movement::Reshape { shape }), vec![val(x)]);
    }
    let axes = axes.map(|a| a.into_iter().map(AxisRef::Index).collect());
    let f = match op {
        "ReduceMean" => ReduceFn::Mean,
        "ReduceMax" => ReduceFn::Max,
        "ReduceMin" => ReduceFn::Min,
        "ReduceProd" => ReduceFn::Prod,
        _ => ReduceFn::Sum,
    };
    match op {
        "ReduceL1" => x = unary(b, UnaryFn::Abs, x)?,
        "ReduceL2" | "ReduceSumSquare" => x = bin(b, BinaryFn::Mul, val(x), val(x))?,
        "ReduceLogSumExp" => x = unary(b, UnaryFn::Exp, x)?,
        _ => {}
    }
    let y = b.emit(FOp::Reduce { op: f, axes, keepdim, acc: None }, vec![val(x)])?;
    match op {
        "ReduceL2" => unary(b, UnaryFn::Sqrt, y),
        "ReduceLogSum" | "ReduceLogSumExp" => unary(b, UnaryFn::Log, y),
        _ => Ok(y),
    }
}

/// `0, 1, …, len-1` along a new axis, as i32: an exclusive running sum of
/// ones.
fn iota(b: &mut Builder, len: &Dim) -> DResult<ValueId> {
    let ones = b.splat(1.0, DType::I32, std::slice::from_ref(len))?;
    b.emit(FOp::Scan { op: ReduceFn::Sum, axis: 0, exclusive: true, reverse: false }, vec![val(ones)])
}

fn trilu(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let x = b.run(n.required(0)?)?;
    let xs = b.shape(x)?;
    if xs.len() < 2 {
        return Err(diag!(AxisSizeMismatch, "Trilu of a rank-{} tensor", xs.len()));
    }
    let k = opt_known(b, n, 1, "k")?.map(|v| v.scalar_value("k")).transpose()?.unwrap_or(0.0);
    let (rows, cols) = (&xs[xs.len() - 2], &xs[xs.len() - 1]);
    let r = iota(b, rows)?;
    let r = b.emit(FOp::Movement(Movement::Unsqueeze { axes: vec![1] }), vec![val(r)])?;
    let c = iota(b, cols)?;
    let diff = bin(b, BinaryFn::Sub, val(c), val(r))?;
    let upper = n.a.int_or("upper", 1)? != 0;
    let f = if upper { BinaryFn::Ge } else { BinaryFn::Le };
    let keep = bin(b, f, val(diff), b.lit(k, LitKind::Int))?;
    let zero = b.lit_for(0.0, b.dtype(x)?);
    b.emit(FOp::Where, vec![val(keep), val(x), zero])
}

/// `Range` whose length depends on a symbol: `start + delta · iota(n)`.
fn range(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let start = need_known(b, n, 0, "start")?;
    let limit = need_known(b, n, 1, "limit")?;
    let delta = need_known(b, n, 2, "delta")?;
    let one = |k: &Known, what: &str| -> DResult<Dim> {
        let d = k.dims(what)?;
        d.first()
            .cloned()
            .filter(|_| d.len() == 1)
            .ok_or_else(|| diag!(AxisSizeMismatch, "Range's {what} must be a scalar"))
    };
    let (s, l, d) = (one(&start, "start")?, one(&limit, "limit")?, one(&delta, "delta")?);
    let step = d
        .as_int()
        .filter(|&v| v > 0)
        .ok_or_else(|| diag!(Unsupported, "a Range over a symbolic limit needs a positive constant delta"))?;
    let len =
        (&(&l - &s) + &Dim::int(step - 1)).floordiv(&Dim::int(step)).ok_or_else(|| diag!(Internal, "Range length"))?;
    let mut v = iota(b, &len)?;
    if step != 1 {
        v = bin(b, BinaryFn::Mul, val(v), b.lit(step as f64, LitKind::Int))?;
    }
    if let Some(s0) = s.as_int().filter(|&s0| s0 != 0) {
        v = bin(b, BinaryFn::Add, val(v), b.lit(s0 as f64, LitKind::Int))?;
    }
    Ok(v)
}

fn depth_space(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let x = b.run(n.required(0)?)?;
    let xs = b.shape(x)?;
    if xs.len() != 4 {
        return Err(diag!(AxisSizeMismatch, "{} of a rank-{} tensor", n.node.op_type, xs.len()));
    }
    let bs = Dim::int(n.a.int("blocksize")?.ok_or_else(|| diag!(SyntaxError, "blocksize is required"))?);
    let (nn, c, h, w) = (&xs[0], &xs[1], &xs[2], &xs[3]);
    let div =
        |a: &Dim, d: &Dim| a.floordiv(d).ok_or_else(|| diag!(AxisSizeMismatch, "blocksize {d} does not divide {a}"));
    let (shape1, perm, shape2) = if n.node.op_type == "DepthToSpace" {
        let cb = div(c, &(&bs * &bs))?;
        let crd = n.a.string("mode")?.as_deref() == Some("CRD");
        if crd {
            (
                vec![nn.clone(), cb.clone(), bs.clone(), bs.clone(), h.clone(), w.clone()],
                vec![0, 1, 4, 2, 5, 3],
                vec![nn.clone(), cb, h * &bs, w * &bs],
            )
        } else {
            (
                vec![nn.clone(), bs.clone(), bs.clone(), cb.clone(), h.clone(), w.clone()],
                vec![0, 3, 4, 1, 5, 2],
                vec![nn.clone(), cb, h * &bs, w * &bs],
            )
        }
    } else {
        let (hb, wb) = (div(h, &bs)?, div(w, &bs)?);
        let crd = n.a.string("mode")?.as_deref() == Some("CRD");
        let perm = if crd { vec![0, 1, 3, 5, 2, 4] } else { vec![0, 3, 5, 1, 2, 4] };
        (
            vec![nn.clone(), c.clone(), hb.clone(), bs.clone(), wb.clone(), bs.clone()],
            perm,
            vec![nn.clone(), c * &(&bs * &bs), hb, wb],
        )
    };
    let v = b.emit(FOp::Movement(Movement::Reshape { shape: shape1 }), vec![val(x)])?;
    let v = b.emit(FOp::Movement(Movement::Permute { perm }), vec![val(v)])?;
    b.emit(FOp::Movement(Movement::Reshape { shape: shape2 }), vec![val(v)])
}

/// `Einsum` of one or two operands without repeated letters in one
/// operand: letters only in one operand and not in the output are summed
/// first; the product is a batched `matmul` over `[batch, free A,
/// contracted] × [batch, contracted, free B]`, permuted to the output.
fn einsum(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let eq: String =
        n.a.string("equation")?
            .ok_or_else(|| diag!(SyntaxError, "Einsum needs an equation"))?
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
    let (lhs, out) =
        eq.split_once("->").ok_or_else(|| diag!(Unsupported, "Einsum `{eq}` without an explicit output (`->`)"))?;
    let terms: Vec<&str> = lhs.split(',').collect();
    let bad = |why: &str| diag!(Unsupported, "Einsum `{eq}`: {why}");
    if eq.contains("...") {
        return Err(bad("ellipses are not taken"));
    }
    let distinct = |s: &str| s.chars().collect::<std::collections::BTreeSet<_>>().len() == s.len();
    if !terms.iter().all(|t| distinct(t)) || !distinct(out) {
        return Err(bad("a letter repeated in one operand (a trace or diagonal)"));
    }
    let mut vals = Vec::new();
    let mut letters = Vec::new();
    for (k, t) in terms.iter().enumerate() {
        let mut v = b.run(n.required(k)?)?;
        let mut l: Vec<char> = t.chars().collect();
        if b.shape(v)?.len() != l.len() {
            return Err(bad("an operand's rank differs from its letters"));
        }
        // Sum the letters no other operand and not the output has.
        let lonely: Vec<i64> = (0..l.len())
            .filter(|&i| !out.contains(l[i]) && !terms.iter().enumerate().any(|(j, o)| j != k && o.contains(l[i])))
            .map(|i| i as i64)
            .collect();
        if !lonely.is_empty() {
            let axes = Some(lonely.iter().map(|&i| AxisRef::Index(i)).collect());
            v = b.emit(FOp::Reduce { op: ReduceFn::Sum, axes, keepdim: false, acc: None }, vec![val(v)])?;
            l = l.iter().enumerate().filter(|(i, _)| !lonely.contains(&(*i as i64))).map(|(_, &c)| c).collect();
        }
        vals.push(v);
        letters.push(l);
    }
    let permute = |b: &mut Builder, v: ValueId, from: &[char], to: &[char]| -> DResult<ValueId> {
        let perm: Vec<i64> = to
            .iter()
            .map(|c| from.iter().position(|x| x == c).map(|p| p as i64))
            .collect::<Option<_>>()
            .ok_or_else(|| bad("letters"))?;
        if perm.iter().enumerate().all(|(i, &p)| i as i64 == p) {
            return Ok(v);
        }
        b.emit(FOp::Movement(Movement::Permute { perm }), vec![val(v)])
    };
    let outl: Vec<char> = out.chars().collect();
    match vals.len() {
        1 => permute(b, vals[0], &letters[0], &outl),
        2 => {
            let (la, lb) = (&letters[0], &letters[1]);
            let batch: Vec<char> = la.iter().copied().filter(|c| lb.contains(c) && outl.contains(c)).collect();
            let contr: Vec<char> = la.iter().copied().filter(|c| lb.contains(c) && !outl.contains(c)).collect();
            let fa: Vec<char> = la.iter().copied().filter(|c| !lb.contains(c)).collect();
            let fb: Vec<char> = lb.iter().copied().filter(|c| !la.contains(c)).collect();
            let (sa, sb) = (b.shape(vals[0])?, b.shape(vals[1])?);
            let size = |s: &[Dim], l: &[char], c: char| s[l.iter().position(|&x| x == c).unwrap_or(0)].clone();
            let prod = |s: &[Dim], l: &[char], cs: &[char]| {
                Dim::product(&cs.iter().map(|&c| size(s, l, c)).collect::<Vec<_>>())
            };
            let a_order: Vec<char> = batch.iter().chain(&fa).chain(&contr).copied().collect();
            let b_order: Vec<char> = batch.iter().chain(&contr).chain(&fb).copied().collect();
            let a = permute(b, vals[0], la, &a_order)?;
            let bb = permute(b, vals[1], lb, &b_order)?;
            let a3 = vec![prod(&sa, la, &batch), prod(&sa, la, &fa), prod(&sa, la, &contr)];
            let b3 = vec![prod(&sb, lb, &batch), prod(&sb, lb, &contr), prod(&sb, lb, &fb)];
            let a = b.emit(FOp::Movement(Movement::Reshape { shape: a3 }), vec![val(a)])?;
            let bb = b.emit(FOp::Movement(Movement::Reshape { shape: b3 }), vec![val(bb)])?;
            let m = b.emit(FOp::Matmul, vec![val(a), val(bb)])?;
            let mut full: Vec<Dim> = batch.iter().map(|&c| size(&sa, la, c)).collect();
            full.extend(fa.iter().map(|&c| size(&sa, la, c)));
            full.extend(fb.iter().map(|&c| size(&sb, lb, c)));
            let m = b.emit(FOp::Movement(Movement::Reshape { shape: full }), vec![val(m)])?;
            let got: Vec<char> = batch.iter().chain(&fa).chain(&fb).copied().collect();
            permute(b, m, &got, &outl)
        }
        k => Err(bad(&format!("{k} operands (one or two are taken)"))),
    }
}

/// `RMSNormalization` (opset 23): `x / sqrt(mean(x², axes) + epsilon) ·
/// scale` over the axes from `axis` on, computed in f32.
fn rms_norm(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let x = b.run(n.required(0)?)?;
    let scale = b.run(n.required(1)?)?;
    let r = b.shape(x)?.len();
    let axis = norm_axis(n.a.int_or("axis", -1)?, r)?;
    let dt = b.dtype(x)?;
    let xf = if dt == DType::F32 { x } else { b.emit(FOp::Cast { to: DType::F32 }, vec![val(x)])? };
    let sq = bin(b, BinaryFn::Mul, val(xf), val(xf))?;
    let axes = Some((axis as i64..r as i64).map(AxisRef::Index).collect());
    let m = b.emit(FOp::Reduce { op: ReduceFn::Mean, axes, keepdim: true, acc: None }, vec![val(sq)])?;
    let m = bin(b, BinaryFn::Add, val(m), b.lit(n.a.float_or("epsilon", 1e-5)?, LitKind::Float))?;
    let inv = unary(b, UnaryFn::Rsqrt, m)?;
    let mut y = bin(b, BinaryFn::Mul, val(xf), val(inv))?;
    if dt != DType::F32 {
        y = b.emit(FOp::Cast { to: dt }, vec![val(y)])?;
    }
    bin(b, BinaryFn::Mul, val(y), val(scale))
}

/// `ArgMax`/`ArgMin` along `axis`: the first (or, with
/// `select_last_index`, the last) index whose element equals the extreme,
/// as `where(x == extreme, index, sentinel)` reduced by min (max); the
/// indices are an exclusive running sum of ones along the axis. A NaN
/// never equals the extreme, so a row with a NaN gives the extreme of the
/// other elements' indices (ONNX leaves NaN unspecified).
fn arg_extreme(b: &mut Builder, n: &N) -> DResult<ValueId> {
    let x = b.run(n.required(0)?)?;
    let shape = b.shape(x)?;
    let axis = norm_axis(n.a.int_or("axis", 0)?, shape.len())?;
    let keepdim = n.a.int_or("keepdims", 1)? != 0;
    let last = n.a.int_or("select_last_index", 0)? != 0;
    let f = if n.node.op_type == "ArgMax" { ReduceFn::Max } else { ReduceFn::Min };
    Ok(extreme_index(b, x, axis, f, last, keepdim)?.1)
}

/// The positions along `axis` (i32, `x`'s shape) and the first (with
/// `last`, the last) position whose element of `x` equals the extreme `f`
/// along `axis` (the axis kept as size 1 when `keepdim`), as
/// [`arg_extreme`] describes.
fn extreme_index(
    b: &mut Builder,
    x: ValueId,
    axis: usize,
    f: ReduceFn,
    last: bool,
    keepdim: bool,
) -> DResult<(ValueId, ValueId)> {
    let shape = b.shape(x)?;
    let ax = Some(vec![AxisRef::Index(axis as i64)]);
    let m = b.emit(FOp::Reduce { op: f, axes: ax.clone(), keepdim: true, acc: None }, vec![val(x)])?;
    let hit = bin(b, BinaryFn::Eq, val(x), val(m))?;
    let ones = b.splat(1.0, DType::I32, &shape)?;
    let idx =
        b.emit(FOp::Scan { op: ReduceFn::Sum, axis: axis as i64, exclusive: true, reverse: false }, vec![val(ones)])?;
    let (sentinel, pick) = if last { (-1.0, ReduceFn::Max) } else { (i32::MAX as f64, ReduceFn::Min) };
    let cand = b.emit(FOp::Where, vec![val(hit), val(idx), b.lit(sentinel, LitKind::Int)])?;
    Ok((idx, b.emit(FOp::Reduce { op: pick, axes: ax, keepdim, acc: None }, vec![val(cand)])?))
}

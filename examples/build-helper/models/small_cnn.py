"""Writes small_cnn.onnx, the ONNX model of the build-helper example: what
`torch.onnx.export` gives for a small CNN (Conv → BatchNormalization → Relu
→ MaxPool → Flatten → Gemm), built here with `onnx.helper` so that no
PyTorch is needed. Weights are seeded random values; the batch is the
symbol `batch`.

    PYTHONPATH=.toolchain/onnx:.toolchain/py python3 examples/build-helper/models/small_cnn.py
"""

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(2026)


def weight(name, *shape, scale=0.3):
    return numpy_helper.from_array((scale * rng.standard_normal(shape)).astype(np.float32), name)


inits = [
    weight("conv.weight", 8, 3, 3, 3),
    weight("conv.bias", 8),
    weight("bn.weight", 8),
    weight("bn.bias", 8),
    weight("bn.running_mean", 8),
    numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype(np.float32), "bn.running_var"),
    weight("fc.weight", 10, 128),
    weight("fc.bias", 10),
]
nodes = [
    helper.make_node("Conv", ["input", "conv.weight", "conv.bias"], ["c"], name="/conv/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    helper.make_node(
        "BatchNormalization", ["c", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"], ["b"], name="/bn/BatchNormalization", epsilon=1e-5
    ),
    helper.make_node("Relu", ["b"], ["r"], name="/Relu"),
    helper.make_node("MaxPool", ["r"], ["p"], name="/pool/MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
    helper.make_node("Flatten", ["p"], ["f"], name="/Flatten", axis=1),
    helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"], name="/fc/Gemm", transB=1),
]
graph = helper.make_graph(
    nodes,
    "small_cnn",
    [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 8, 8])],
    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])],
    inits,
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="tgc examples")
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, os.path.join(os.path.dirname(os.path.abspath(__file__)), "small_cnn.onnx"))

"""Writes ONNX's operator test cases (the `onnx` wheel's
`onnx.backend.test.case.node`, about 1,900) as files the importer's test
reads: OUT/<case>/model.onnx and OUT/<case>/test_data_set_N/{input,output}_K.pb
(serialized TensorProtos). Cases whose inputs are sequences, maps or
optionals are skipped (tgc takes tensors only).

    python3 scripts/onnx_node_data.py OUT

Run by scripts/setup.sh, which installs `onnx` and its dependencies into
.toolchain/onnx first; the folder is regenerated only when the wheel changes.
"""

import os
import sys
import warnings

import onnx.backend.test.case.node as node
from onnx import TensorProto, numpy_helper


def main(out):
    warnings.simplefilter("ignore")
    os.makedirs(out, exist_ok=True)
    written = 0
    for case in node.collect_testcases(None):
        graph = case.model.graph
        if not all(v.type.HasField("tensor_type") for v in list(graph.input) + list(graph.output)):
            continue
        d = os.path.join(out, case.name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        for i, (inputs, outputs) in enumerate(case.data_sets):
            s = os.path.join(d, f"test_data_set_{i}")
            os.makedirs(s, exist_ok=True)
            for kind, values, decls in (("input", inputs, graph.input), ("output", outputs, graph.output)):
                for j, v in enumerate(values):
                    t = v if isinstance(v, TensorProto) else numpy_helper.from_array(v, decls[j].name)
                    with open(os.path.join(s, f"{kind}_{j}.pb"), "wb") as f:
                        f.write(t.SerializeToString())
        written += 1
    print(f"scripts/onnx_node_data.py: wrote {written} cases to {out}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1])

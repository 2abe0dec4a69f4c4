"""ONNX's PyTorch-exported operator tests, written in tgc's graph language
and run by `tgc run`: the "tried as a new user would" check of the graph
layer (`docs/dsl.md`).

For each test folder of `onnx/backend/test/data/pytorch-converted` and
`pytorch-operator` (the `onnx` wheel's copy), the model's nodes are
translated one by one into DSL statements, its inputs and initializers
written as `.npy`, and `tgc run --backend BACKEND` is compared with the
recorded outputs (relative and absolute tolerance 1e-4, NaNs equal). A test
whose model uses an operator or attribute the translation does not know is
reported as `unsupported: <why>`; one whose `tgc` run fails as `error`;
otherwise `pass` or `FAIL` with the largest difference.

    python3 scripts/onnx_conformance.py TGC [--backend cpu] [--only TEXT] [--keep DIR]

Prints one line per test and a summary per operator family; exits 1 when a
translated test fails or errors (unsupported ones do not fail the run).
Run through `scripts/onnx_conformance.sh`, which installs `onnx` and NumPy.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
SUITES = ["pytorch-converted", "pytorch-operator"]
DTYPES = {np.dtype("float32"): "f32", np.dtype("int32"): "i32", np.dtype("bool"): "bool"}
# The families (issue 17, "What it must show"), by the operators of
# a test's model; anything else is counted under "other".
FAMILIES = [
    ("Conv1d/2d/3d", {"Conv"}),
    ("ConvTranspose", {"ConvTranspose"}),
    ("MaxPool/AvgPool", {"MaxPool", "AveragePool"}),
    ("Gather", {"Gather", "GatherElements"}),
    ("Tile", {"Tile"}),
    ("Concat", {"Concat"}),
    ("Split", {"Split"}),
    ("Pad", {"Pad"}),
    ("Pow/Sign", {"Pow", "Sign"}),
]


class Unsupported(Exception):
    pass


def attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def ints(v):
    return "[" + ", ".join(str(int(x)) for x in v) + "]"


def as_array(a):
    """int64 tensors become int32 (the DSL has no i64), when they fit."""
    if a.dtype == np.int64:
        if a.size and (a.min() < -(2**31) or a.max() >= 2**31):
            raise Unsupported("int64 values beyond int32")
        return a.astype(np.int32)
    if a.dtype == np.float64:
        finite = a[np.isfinite(a)]
        if finite.size and np.abs(finite).max() > np.finfo(np.float32).max:
            raise Unsupported("float64 values beyond float32")
        return a.astype(np.float32)
    return a


class Translator:
    """One model's nodes as DSL statements; constants (initializers and
    `Constant` nodes) are known values, so shape-like inputs (pads, repeats,
    split sizes, axes) become attributes."""

    def __init__(self, model, inputs):
        self.consts = {}
        self.shapes = {}
        self.lines = []
        self.names = {}
        for init in model.graph.initializer:
            self.consts[init.name] = numpy_helper.to_array(init)
        self.params = []
        self.extra = {}
        self.opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=1)
        for name, value in inputs.items():
            self.shapes[name] = list(value.shape)
            self.params.append(name)

    def var(self, name):
        if name not in self.names:
            self.names[name] = "v%d" % len(self.names)
        return self.names[name]

    def emit(self, outs, expr, shapes):
        for o, s in zip(outs, shapes):
            self.shapes[o] = list(s)
        if len(outs) == 1:
            self.lines.append("    %s = %s" % (self.var(outs[0]), expr))
        else:
            self.lines.append("    (%s) = %s" % (", ".join(self.var(o) for o in outs), expr))

    def const(self, name, what):
        if name not in self.consts:
            raise Unsupported("%s is computed, not a constant" % what)
        return self.consts[name]

    def node(self, n, out_shapes):
        a = attrs(n)
        op = n.op_type
        x = [self.var(i) if i else None for i in n.input]
        if op == "Constant":
            self.consts[n.output[0]] = numpy_helper.to_array(a["value"])
            return
        if op == "Slice":
            if "starts" not in a:
                raise Unsupported("Slice with tensor bounds")
            shape = self.shapes[n.input[0]]
            axes = a.get("axes", list(range(len(a["starts"]))))
            bounds = [[0, d, 1] for d in shape]
            for ax, lo, hi in zip(axes, a["starts"], a["ends"]):
                d = shape[ax]
                bounds[ax][:2] = [max(0, min(d, lo + d if lo < 0 else lo)), max(0, min(d, hi + d if hi < 0 else hi))]
            self.emit(n.output, "slice(%s, [%s])" % (x[0], ", ".join(ints(b) for b in bounds)), out_shapes)
        elif op in ("ReduceMean", "ReduceSum"):
            axes = a.get("axes")
            if axes is None:
                raise Unsupported("%s over tensor axes" % op)
            keep = "true" if a.get("keepdims", 1) else "false"
            name = "mean" if op == "ReduceMean" else "sum"
            self.emit(n.output, "%s(%s, axes=%s, keepdim=%s)" % (name, x[0], ints(axes), keep), out_shapes)
        elif op == "LeakyRelu":
            self.emit(n.output, "where(%s < 0, %s * %r, %s)" % (x[0], x[0], float(a.get("alpha", 0.01)), x[0]),
                      out_shapes)
        elif op in ("Elu", "Selu"):
            alpha = float(a.get("alpha", 1.0 if op == "Elu" else 1.67326319217681884765625))
            gamma = float(a.get("gamma", 1.05070102214813232421875)) if op == "Selu" else 1.0
            expr = "where(%s > 0, %s, (exp(%s) - 1) * %r) * %r" % (x[0], x[0], x[0], alpha, gamma)
            self.emit(n.output, expr, out_shapes)
        elif op == "PRelu":
            slope, rank = x[1], len(self.shapes[n.input[0]])
            channels = self.shapes.get(n.input[1]) or list(self.consts[n.input[1]].shape)
            if self.opset < 7 and int(np.prod(channels)) > 1:
                # Opset 6 and before: one slope per channel (axis 1).
                slope = "reshape(%s, %s)" % (slope, ints([-1] + [1] * (rank - 2)))
            self.emit(n.output, "where(%s < 0, %s * %s, %s)" % (x[0], x[0], slope, x[0]), out_shapes)
        elif op == "Softplus":
            # log(1 + e^x) without overflow: max(x, 0) + log(1 + e^-|x|).
            self.emit(n.output, "maximum(%s, 0) + log(exp(-abs(%s)) + 1)" % (x[0], x[0]), out_shapes)
        elif op in ("Conv", "ConvTranspose"):
            rank = len(self.shapes.get(n.input[1]) or self.consts[n.input[1]].shape) - 2
            pads = a.get("pads", [0] * (2 * rank))
            kw = ["stride=%s" % ints(a.get("strides", [1] * rank)),
                  "pad=%s" % ints([p for k in range(rank) for p in (pads[k], pads[k + rank])]),
                  "dilation=%s" % ints(a.get("dilations", [1] * rank)),
                  "groups=%d" % a.get("group", 1)]
            if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
                raise Unsupported("auto_pad")
            if op == "ConvTranspose":
                if "output_shape" in a:
                    raise Unsupported("ConvTranspose output_shape")
                kw.append("output_padding=%s" % ints(a.get("output_padding", [0] * rank)))
            if len(x) > 2:
                kw.insert(0, "bias=%s" % x[2])
            name = "conv%dd" % rank if op == "Conv" else "conv_transpose%dd" % rank
            self.emit(n.output, "%s(%s, %s, %s)" % (name, x[0], x[1], ", ".join(kw)), out_shapes)
        elif op in ("MaxPool", "AveragePool"):
            k = a["kernel_shape"]
            rank = len(k)
            if a.get("ceil_mode", 0):
                raise Unsupported("ceil_mode")
            if len(n.output) > 1:
                raise Unsupported("MaxPool indices")
            pads = a.get("pads", [0] * (2 * rank))
            kw = ["kernel=%s" % ints(k), "stride=%s" % ints(a.get("strides", [1] * rank)),
                  "pad=%s" % ints([p for j in range(rank) for p in (pads[j], pads[j + rank])])]
            if op == "MaxPool":
                kw.append("dilation=%s" % ints(a.get("dilations", [1] * rank)))
                name = "maxpool%dd" % rank
            else:
                cip = bool(a.get("count_include_pad", 0))
                kw.append("count_include_pad=%s" % ("true" if cip else "false"))
                name = "avgpool%dd" % rank
            self.emit(n.output, "%s(%s, %s)" % (name, x[0], ", ".join(kw)), out_shapes)
        elif op == "Pad":
            mode = a.get("mode", b"constant")
            mode = mode.decode() if isinstance(mode, bytes) else mode
            pads = a.get("pads", a.get("paddings"))
            if pads is None:
                pads = self.const(n.input[1], "Pad's pads")
            value = a.get("value", 0.0)
            if len(n.input) > 2 and n.input[2]:
                value = float(self.const(n.input[2], "Pad's value"))
            r = len(pads) // 2
            pairs = "[" + ", ".join("[%d, %d]" % (pads[k], pads[k + r]) for k in range(r)) + "]"
            tail = {"constant": ", value=%r" % float(value), "reflect": ", mode=reflect", "edge": ", mode=edge"}
            if mode not in tail:
                raise Unsupported("Pad mode %s" % mode)
            self.emit(n.output, "pad(%s, %s%s)" % (x[0], pairs, tail[mode]), out_shapes)
        elif op == "Concat":
            self.emit(n.output, "concat([%s], axis=%d)" % (", ".join(x), a["axis"]), out_shapes)
        elif op == "Split":
            axis = a.get("axis", 0)
            sizes = a.get("split")
            if sizes is None and len(n.input) > 1 and n.input[1]:
                sizes = self.const(n.input[1], "Split's sizes")
            if sizes is None:
                self.emit(n.output, "chunk(%s, %d, axis=%d)" % (x[0], len(n.output), axis), out_shapes)
            else:
                self.emit(n.output, "split(%s, %s, axis=%d)" % (x[0], ints(sizes), axis), out_shapes)
        elif op == "Gather":
            self.emit(n.output, "take(%s, %s, %d)" % (x[0], x[1], a.get("axis", 0)), out_shapes)
        elif op == "GatherElements":
            self.emit(n.output, "gather(%s, %d, %s)" % (x[0], a.get("axis", 0), x[1]), out_shapes)
        elif op == "Tile":
            self.emit(n.output, "tile(%s, %s)" % (x[0], ints(self.const(n.input[1], "Tile's repeats"))), out_shapes)
        elif op in ("Unsqueeze", "Squeeze"):
            axes = a.get("axes")
            if axes is None and len(n.input) > 1:
                axes = self.const(n.input[1], op + "'s axes")
            if axes is None:
                raise Unsupported("Squeeze of every size-1 axis")
            self.emit(n.output, "%s(%s, %s)" % (op.lower(), x[0], ints(axes)), out_shapes)
        elif op == "Reshape":
            self.emit(n.output, "reshape(%s, %s)" % (x[0], ints(out_shapes[0])), out_shapes)
        elif op == "Flatten":
            self.emit(n.output, "reshape(%s, %s)" % (x[0], ints(out_shapes[0])), out_shapes)
        elif op == "Transpose":
            perm = a.get("perm", list(reversed(range(len(self.shapes[n.input[0]])))))
            self.emit(n.output, "permute(%s, %s)" % (x[0], ints(perm)), out_shapes)
        elif op in ("Add", "Sub", "Mul", "Div"):
            sym = {"Add": "+", "Sub": "-", "Mul": "*", "Div": "/"}[op]
            self.emit(n.output, "%s %s %s" % (self.operand(n.input[0]), sym, self.operand(n.input[1])), out_shapes)
        elif op in ("Max", "Min") and len(x) == 2:
            self.emit(n.output, "%s(%s, %s)" % ({"Max": "maximum", "Min": "minimum"}[op], x[0], x[1]), out_shapes)
        elif op == "Sum":
            self.emit(n.output, " + ".join(x), out_shapes)
        elif op == "Pow":
            self.emit(n.output, "pow(%s, %s)" % (x[0], self.operand(n.input[1])), out_shapes)
        elif op in ("Sign", "Relu", "Sigmoid", "Tanh", "Exp", "Sqrt", "Abs", "Neg"):
            fn = {"Neg": "-"}.get(op)
            expr = "-%s" % x[0] if fn else "%s(%s)" % (op.lower(), x[0])
            self.emit(n.output, expr, out_shapes)
        elif op in ("Softmax", "LogSoftmax"):
            axis = a.get("axis", -1)
            name = "softmax" if op == "Softmax" else "log_softmax"
            self.emit(n.output, "%s(%s, axis=%d)" % (name, x[0], axis), out_shapes)
        elif op == "Clip":
            lo, hi = a.get("min"), a.get("max")
            kw = ([("min=%r" % float(lo))] if lo is not None else []) + ([("max=%r" % float(hi))] if hi is not None else [])
            self.emit(n.output, "clamp(%s, %s)" % (x[0], ", ".join(kw)), out_shapes)
        elif op == "BatchNormalization":
            self.emit(n.output[:1], "batch_norm(%s, eps=%r)" % (", ".join(x[:5]), float(a.get("epsilon", 1e-5))),
                      out_shapes[:1])
        elif op == "InstanceNormalization":
            self.emit(n.output, "instance_norm(%s, eps=%r)" % (", ".join(x[:3]), float(a.get("epsilon", 1e-5))),
                      out_shapes)
        elif op in ("Gemm", "MatMul"):
            if op == "Gemm":
                alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
                lhs = "transpose(%s, 0, 1)" % self.operand(n.input[0]) if a.get("transA", 0) else self.operand(n.input[0])
                rhs = "transpose(%s, 0, 1)" % self.operand(n.input[1]) if a.get("transB", 0) else self.operand(n.input[1])
                expr = "matmul(%s, %s)" % (lhs, rhs) + (" * %r" % alpha if alpha != 1.0 else "")
                if len(x) > 2 and n.input[2]:
                    expr += " + %s" % self.operand(n.input[2]) + (" * %r" % beta if beta != 1.0 else "")
            else:
                expr = "matmul(%s, %s)" % (x[0], x[1])
            self.emit(n.output, expr, out_shapes)
        else:
            raise Unsupported("operator %s" % op)

    def operand(self, name):
        """A scalar constant as a literal, a `Constant` node's tensor as an
        extra graph input, anything else as its variable."""
        if name in self.consts and name not in self.params:
            value = self.consts[name]
            if value.size == 1:
                return repr(float(value.reshape(())))
            self.extra[name] = value
        return self.var(name)


def load_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def translate(folder):
    """(source, {input var: array}, [(output var, expected array)])."""
    model = onnx.load(os.path.join(folder, "model.onnx"))
    data = os.path.join(folder, "test_data_set_0")
    given = [load_pb(os.path.join(data, "input_%d.pb" % k)) for k in range(len(os.listdir(data))) if
             os.path.exists(os.path.join(data, "input_%d.pb" % k))]
    expected = [load_pb(os.path.join(data, "output_%d.pb" % k)) for k in range(len(model.graph.output))]
    inits = {i.name for i in model.graph.initializer}
    runtime = [i.name for i in model.graph.input if i.name not in inits]
    values = dict(zip(runtime, given))
    # Initializers are inputs too (the graph's weights), given as files.
    for init in model.graph.initializer:
        values[init.name] = numpy_helper.to_array(init)
    values = {k: as_array(v) for k, v in values.items()}
    for v in values.values():
        if v.dtype not in DTYPES:
            raise Unsupported("dtype %s" % v.dtype)
    t = Translator(model, values)
    # Shapes of every value: ONNX shape inference, then the recorded outputs.
    inferred = onnx.shape_inference.infer_shapes(model)
    known = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
        dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        if all(d > 0 for d in dims) or not dims:
            known[vi.name] = dims
    for o, e in zip(model.graph.output, expected):
        known[o.name] = list(e.shape)
    for n in model.graph.node:
        shapes = []
        for o in n.output:
            if o not in known and n.op_type != "Constant":
                raise Unsupported("no shape for %s" % o)
            shapes.append(known.get(o, []))
        t.node(n, shapes)
    values.update({k: as_array(v) for k, v in t.extra.items()})
    params = ", ".join("%s: %s%s" % (t.var(k), DTYPES[v.dtype], ints(v.shape)) for k, v in values.items())
    outs = []
    for o, e in zip(model.graph.output, expected):
        e = as_array(e)
        if e.dtype not in DTYPES:
            raise Unsupported("output dtype %s" % e.dtype)
        outs.append((t.var(o.name), e))
    decls = ", ".join("out%d: %s%s" % (k, DTYPES[e.dtype], ints(e.shape)) for k, (_, e) in enumerate(outs))
    body = t.lines + ["    out%d = %s" % (k, v) for k, (v, _) in enumerate(outs)]
    ret = ["out%d" % k for k in range(len(outs))]
    src = "graph main(%s) -> (%s) {\n%s\n    return %s\n}\n" % (params, decls, "\n".join(body), ", ".join(ret))
    return src, {t.var(k): v for k, v in values.items()}, [(r, e) for r, (_, e) in zip(ret, outs)]


def family(folder):
    ops = {n.op_type for n in onnx.load(os.path.join(folder, "model.onnx")).graph.node}
    for name, members in FAMILIES:
        if ops & members:
            return name
    return "other"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tgc", help="the tgc binary")
    ap.add_argument("--backend", default="cpu", choices=["cpu", "interp", "cuda"])
    ap.add_argument("--only", default="", help="run the tests whose folder name contains this text")
    ap.add_argument("--keep", help="keep each test's .tgc, inputs and outputs under this folder")
    args = ap.parse_args()
    work = args.keep or tempfile.mkdtemp(prefix="tgc-onnx-")
    tally = {}
    bad = 0
    for suite in SUITES:
        for name in sorted(os.listdir(os.path.join(DATA, suite))):
            if args.only not in name:
                continue
            folder = os.path.join(DATA, suite, name)
            fam = family(folder)
            here = os.path.join(work, suite, name)
            os.makedirs(here, exist_ok=True)
            try:
                src, inputs, outs = translate(folder)
            except Unsupported as e:
                verdict = "unsupported: %s" % e
            else:
                with open(os.path.join(here, "test.tgc"), "w") as f:
                    f.write(src)
                cmd = [args.tgc, "run", os.path.join(here, "test.tgc"), "--backend", args.backend,
                       "--output-dir", os.path.join(here, "out")]
                for k, v in inputs.items():
                    np.save(os.path.join(here, k + ".npy"), v)
                    cmd += ["--input", "%s=%s" % (k, os.path.join(here, k + ".npy"))]
                run = subprocess.run(cmd, capture_output=True, text=True)
                if run.returncode != 0:
                    verdict = "error: " + (run.stderr.strip().splitlines() or ["exit %d" % run.returncode])[0]
                else:
                    worst = 0.0
                    ok = True
                    for r, e in outs:
                        got = np.load(os.path.join(here, "out", r + ".npy"))
                        if got.shape != e.shape:
                            ok = False
                            continue
                        g64, e64 = got.astype(np.float64), e.astype(np.float64)
                        close = np.isclose(g64, e64, rtol=1e-4, atol=1e-4, equal_nan=True)
                        ok &= bool(close.all())
                        if e.size:
                            worst = max(worst, float(np.nanmax(np.abs(g64 - e64))))
                    verdict = "pass" if ok else "FAIL (largest difference %.3g)" % worst
            kind = verdict.split(":")[0].split(" ")[0]
            tally.setdefault(fam, {}).setdefault(kind, 0)
            tally[fam][kind] += 1
            bad += kind in ("error", "FAIL")
            print("%-18s %-46s %s" % (fam, suite[8:] + "/" + name, verdict), flush=True)
    print()
    total = {}
    for fam in [f for f, _ in FAMILIES] + ["other"]:
        if fam in tally:
            print("%-18s %s" % (fam, ", ".join("%s %d" % kv for kv in sorted(tally[fam].items()))))
            for k, v in tally[fam].items():
                total[k] = total.get(k, 0) + v
    print("%-18s %s" % ("all", ", ".join("%s %d" % kv for kv in sorted(total.items()))))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

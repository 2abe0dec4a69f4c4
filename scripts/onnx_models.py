"""Real networks through tgc's ONNX importer, against ONNX Runtime on the
same weights and input.

The `onnx` wheel ships the ONNX model zoo's architectures with their
weights made by `ConstantOfShape` (backend/test/data/light: ResNet-50,
DenseNet-121, Inception v1/v2, ShuffleNet, SqueezeNet, VGG-19, AlexNet,
ZFNet-512). For each, every such weight becomes a seeded random initializer
(scaled by 1/sqrt(fan-in), so activations stay in range through the depth;
a BatchNormalization variance is drawn positive), a final Softmax is cut so
the output is the logits, and the model is written to a scratch folder with
a random input. ONNX Runtime (one thread) computes the reference;
`tgc run --backend BACKEND` must match it within rtol 1e-3 + atol 1e-4.

    python3 scripts/onnx_models.py TGC [--backend cpu|interp] [--only TEXT] [--keep DIR]

Prints one line per model (time of `tgc run`, the largest difference) and
exits 1 when any model fails. Run through scripts/onnx_models.sh.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def randomize(model, seed):
    """Replaces each ConstantOfShape weight by a seeded random initializer
    and cuts a final Softmax; returns the model."""
    g = model.graph
    rng = np.random.default_rng(seed)
    inits = {t.name: t for t in g.initializer}
    bn_var = {n.input[4] for n in g.node if n.op_type == "BatchNormalization" and len(n.input) > 4}
    keep = []
    for n in g.node:
        if n.op_type == "ConstantOfShape" and n.input[0] in inits:
            shape = numpy_helper.to_array(inits[n.input[0]]).astype(np.int64).tolist()
            out = n.output[0]
            if out in bn_var:
                v = rng.uniform(0.5, 1.5, shape)
            else:
                fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
                v = rng.standard_normal(shape) / np.sqrt(fan_in) if len(shape) > 1 else 0.1 * rng.standard_normal(shape)
            g.initializer.append(numpy_helper.from_array(v.astype(np.float32), out))
        else:
            keep.append(n)
    del g.node[:]
    g.node.extend(keep)
    last = g.node[-1]
    if last.op_type == "Softmax" and last.output[0] == g.output[0].name:
        logits = last.input[0]
        g.node.pop()
        g.output[0].name = logits
    used = {i for n in g.node for i in n.input}
    live = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(live)
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tgc")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--only", default="")
    ap.add_argument("--keep")
    args = ap.parse_args()
    work = args.keep or tempfile.mkdtemp(prefix="tgc-onnx-models-")
    failed = 0
    for k, f in enumerate(sorted(x for x in os.listdir(LIGHT) if x.endswith(".onnx"))):
        name = f[len("light_"):-len(".onnx")]
        if args.only not in name:
            continue
        d = os.path.join(work, name)
        os.makedirs(d, exist_ok=True)
        model = randomize(onnx.load(os.path.join(LIGHT, f)), seed=k)
        path = os.path.join(d, "model.onnx")
        onnx.save(model, path)
        inp = model.graph.input[0]
        dims = [x.dim_value for x in inp.type.tensor_type.shape.dim]
        x = np.random.default_rng(100 + k).standard_normal(dims).astype(np.float32)
        np.save(os.path.join(d, "x.npy"), x)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        want = sess.run(None, {inp.name: x})[0]
        out = os.path.join(d, "out")
        t0 = time.time()
        r = subprocess.run(
            [args.tgc, "run", path, "--backend", args.backend, "--input", f"{inp.name}=" + os.path.join(d, "x.npy"), "--output-dir", out],
            capture_output=True,
            text=True,
        )
        secs = time.time() - t0
        if r.returncode != 0:
            print(f"{name:14} error ({secs:.1f} s): {r.stderr.strip()[:300]}")
            failed += 1
            continue
        files = [p for p in os.listdir(out) if p.endswith(".npy")]
        got = np.load(os.path.join(out, files[0]))
        diff = float(np.max(np.abs(got.astype(np.float64) - want)))
        ok = got.shape == want.shape and np.allclose(got, want, rtol=1e-3, atol=1e-4)
        failed += not ok
        print(f"{name:14} {'pass' if ok else 'FAIL'}  tgc run {secs:6.1f} s  max|d| {diff:.2e}  (|logits| up to {float(np.max(np.abs(want))):.2f})")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

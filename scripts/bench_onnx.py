"""Benchmark (not a test): whole ONNX models on the CPU, tgc against ONNX
Runtime with the same thread count, on the same inputs, outputs compared.

Models: ResNet-50 and SqueezeNet (the `onnx` wheel's model-zoo
architectures, their weights made seeded random as scripts/onnx_models.py
does), batch 1 at 224²; paraphrase-MiniLM-L3-v2 (an `optimum` export, its own
weights) at 1×128 and 8×128 tokens; all-MiniLM-L6-v2 (PyTorch's export,
scripts/onnx_export_minilm.py) at bench/'s buckets 1×16, 8×32 and 8×128.

    python3 scripts/bench_onnx.py BENCH_ONNX [--threads 1,2] [--runs 20] [--only TEXT]

BENCH_ONNX is the `bench_onnx` example (crates/tgc-cli/examples); run
through scripts/bench_onnx.sh. For each model it prints the time from
`.onnx` to a runnable program (import + C generation and compile), and per
thread count tgc's and ONNX Runtime's median ms over RUNS calls after one
warm-up, and ORT/tgc (≥ 1 means tgc is faster). ONNX Runtime's outputs (one
untimed run, before tgc's) are passed to BENCH_ONNX, which compares tgc's
with them under the whole-model bound of crates/tgc-cli/examples/common/
agreement.rs (normwise: max|tgc − ORT| ≤ 1e-3 · max|ORT|, per output) and
reports the worst output's agreement, printed in each row: `max|d|/relative
ok`, or FAIL. After the last row it prints how many models were compared
and failed, and exits 1 if one failed or did not run. TGC_BENCH_CORRUPT=1
makes tgc's outputs wrong before the comparison (every row must FAIL).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_models import LIGHT, input_flags, randomize  # noqa: E402


def session(path, threads):
    """An ONNX Runtime CPU session of the model at `path` with `threads` intra-op threads."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def ort_ms(path, feeds, threads, runs):
    """ONNX Runtime's median ms of `runs` calls after one warm-up call."""
    sess = session(path, threads)
    sess.run(None, feeds)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t) * 1e3)
    return float(np.median(times))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bench")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    work = tempfile.mkdtemp(prefix="tgc-bench-onnx-")
    cases = []
    for k, name in enumerate(["resnet50", "squeezenet"]):
        model = randomize(onnx.load(os.path.join(LIGHT, f"light_{name}.onnx")), seed=k)
        path = os.path.join(work, f"{name}.onnx")
        onnx.save(model, path)
        inp = model.graph.input[0].name
        x = np.random.default_rng(100 + k).standard_normal((1, 3, 224, 224)).astype(np.float32)
        cases.append((f"{name} 1×3×224²", path, {inp: x}))
    # The MiniLM exports at the batch × sequence buckets of bench/ (L6) and
    # two of them (L3), random token ids, no padding.
    for env, name, shapes in [
        ("TGC_MINILM_ONNX", "minilm_l3", [(1, 128), (8, 128)]),
        ("TGC_MINILM_L6_ONNX", "minilm_l6", [(1, 16), (8, 32), (8, 128)]),
    ]:
        path = os.environ.get(env)
        if not path:
            continue
        for b, s in shapes:
            rng = np.random.default_rng(b * s)
            ids = rng.integers(0, 30000, (b, s)).astype(np.int64)
            cases.append((f"{name} {b}×{s}", path, {"input_ids": ids, "attention_mask": np.ones((b, s), np.int64)}))
    failed = compared = 0
    print("| model | threads | .onnx → runnable s (import + C) | tgc ms | ORT ms | ORT/tgc | agreement (max|d|/rel) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for label, path, feeds in cases:
        if args.only not in label:
            continue
        d = tempfile.mkdtemp(dir=work)
        flags = input_flags(d, feeds)
        for k, want in enumerate(session(path, threads[0]).run(None, feeds)):
            np.save(os.path.join(d, f"ort_{k}.npy"), want)
            flags += ["--expect", os.path.join(d, f"ort_{k}.npy")]
        out = os.path.join(d, "out")
        r = subprocess.run(
            [args.bench, path, *flags, "--threads", args.threads, "--runs", str(args.runs), "--out", out],
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            print(f"| {label} | - | error: {r.stderr.strip()[:200]} | | | | |")
            failed += 1
            continue
        tgc = json.loads(r.stdout.strip().splitlines()[-1])
        agreement = tgc["agreement"] or {"cell": "no outputs FAIL", "ok": False}
        compared += 1
        failed += not agreement["ok"]
        setup = f"{tgc['import_s'] + tgc['compile_s']:.1f} ({tgc['import_s']:.1f} + {tgc['compile_s']:.1f})"
        for n in threads:
            time.sleep(1)
            peer = ort_ms(path, feeds, n, args.runs)
            t = tgc["ms"][str(n)]
            print(f"| {label} | {n} | {setup} | {t:.2f} | {peer:.2f} | {peer / t:.2f} | {agreement['cell']} |")
            setup = ""
    print(f"agreement: {compared} models compared, {failed} FAIL or not run")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

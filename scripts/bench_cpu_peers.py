#!/usr/bin/env python3
"""The peers of `bench_cpu` (crates/tgc-cli/examples/bench_cpu.rs): NumPy
and ONNX Runtime timed on the CPU with a given number of threads.

Usage: bench_cpu_peers.py [CASE_JSON]    (the case on stdin when no argument)

    bash scripts/bench_cpu.sh              # installs the peers, runs bench_cpu
    python3 scripts/bench_cpu_peers.py '{"op": "gemm", "shapes": [[512, 512], [512, 512]], "threads": 1}'

The case, a JSON object:
  op          "gemm" (y = x @ w), "softmax" (over the last axis),
              "layernorm" (over the last axis, with gamma and beta, eps
              below), "conv_relu_pool" (NCHW conv 3x3 stride 1 pad 1 with
              bias, ReLU, max pool 2x2 stride 2) or "cumsum" (over the last
              axis)
  shapes      the inputs' shapes, in order: gemm x [M, K], w [K, N];
              softmax x; cumsum x; layernorm x [R, C], gamma [C], beta [C];
              conv_relu_pool x [N, C, H, W], w [K, C, 3, 3], b [K]
  threads     threads for both peers (default 1): OPENBLAS_NUM_THREADS and
              OMP_NUM_THREADS, set here before NumPy is imported, so one
              process serves one thread count; ONNX Runtime's
              intra_op_num_threads (inter_op_num_threads = 1). NumPy's
              element-wise operations (softmax, layernorm, cumsum) are
              single-threaded whatever the count, and its reply says so.
  runs        timed runs (default 5), after one warm-up run
  inputs      optional .npy paths, one per shape (f32); without them the
              inputs are uniform in [-1, 1) from a fixed seed
  output_dir  optional: each peer writes its output there as PEER.npy

Prints one JSON object: {"versions": {...}, "peers": [{"name", "threads"
(those it ran with: NumPy's element-wise ops 1, its GEMM and its conv's
contraction the case's, ONNX Runtime the case's), "ms" (the median wall time
of one call), "output" (path, with output_dir)} or {"name", "error"}]}. Exits 2 on a malformed case and 3 when NumPy is missing (the
peers' own absence is an "error" entry).
"""
import json
import os
import sys
import time

LAYERNORM_EPS = 1e-5  # tgc's `layernorm` default (DSL.md)
ONNX_OPSET = 17  # the first with LayerNormalization
ONNX_IR_VERSION = 8  # the IR version of opset 17
INSTALL_HINT = "run scripts/bench_cpu.sh (installs numpy, onnx and onnxruntime into .toolchain/bench)"


def peer_threads(name, op, threads):
    """The threads peer `name` runs `op` with: OpenBLAS's count for NumPy's
    GEMM and conv (its contraction; the rest of the conv runs on one), one
    for NumPy's element-wise ops, the intra-op count for ONNX Runtime."""
    if name == "numpy" and op not in ("gemm", "conv_relu_pool"):
        return 1
    return threads


def median_ms(step, runs):
    """Median wall time of `runs` calls of `step`, in ms, after one warm-up call."""
    step()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        step()
        times.append((time.perf_counter() - t) * 1e3)
    times.sort()
    return times[len(times) // 2]


def numpy_step(np, op, xs):
    """NumPy's version of `op` on the inputs `xs`, written the usual way: a
    function computing the output."""
    if op == "gemm":
        x, w = xs
        y = np.empty((x.shape[0], w.shape[1]), np.float32)
        return lambda: np.matmul(x, w, out=y)
    if op == "softmax":
        (x,) = xs

        def softmax():
            e = np.exp(x - x.max(axis=-1, keepdims=True))
            return e / e.sum(axis=-1, keepdims=True)

        return softmax
    if op == "cumsum":
        (x,) = xs
        y = np.empty_like(x)
        return lambda: np.cumsum(x, axis=-1, out=y)
    if op == "layernorm":
        x, gamma, beta = xs

        def layernorm():
            d = x - x.mean(axis=-1, keepdims=True)
            var = (d * d).mean(axis=-1, keepdims=True)
            return d / np.sqrt(var + np.float32(LAYERNORM_EPS)) * gamma + beta

        return layernorm
    x, w, b = xs
    from numpy.lib.stride_tricks import sliding_window_view

    def conv_relu_pool():
        # im2col through a strided view; einsum contracts it with BLAS.
        cols = sliding_window_view(np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), axis=(2, 3))
        y = np.einsum("nchwij,kcij->nkhw", cols, w, optimize=True) + b[None, :, None, None]
        y = np.maximum(y, 0)
        n, k, h, wd = y.shape
        return y[:, :, : h // 2 * 2, : wd // 2 * 2].reshape(n, k, h // 2, 2, wd // 2, 2).max(axis=(3, 5))

    return conv_relu_pool


def onnx_model(op, shapes):
    """The ONNX model of `op` for inputs of `shapes`, built with onnx.helper."""
    from onnx import TensorProto, helper

    names = {"gemm": ["x", "w"], "softmax": ["x"], "cumsum": ["x"], "layernorm": ["x", "gamma", "beta"]}.get(
        op, ["x", "w", "b"]
    )
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in zip(names, shapes)]
    initializers = []
    if op == "gemm":
        nodes = [helper.make_node("MatMul", ["x", "w"], ["y"])]
    elif op == "softmax":
        nodes = [helper.make_node("Softmax", ["x"], ["y"], axis=-1)]
    elif op == "cumsum":
        initializers = [helper.make_tensor("axis", TensorProto.INT64, [], [-1])]
        nodes = [helper.make_node("CumSum", ["x", "axis"], ["y"])]
    elif op == "layernorm":
        nodes = [helper.make_node("LayerNormalization", names, ["y"], axis=-1, epsilon=LAYERNORM_EPS)]
    else:
        nodes = [
            helper.make_node("Conv", names, ["c"], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c"], ["r"]),
            helper.make_node("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], strides=[2, 2]),
        ]
    output = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, f"bench_{op}", inputs, [output], initializer=initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", ONNX_OPSET)])
    model.ir_version = ONNX_IR_VERSION
    return model, names


def onnxruntime_step(op, xs, threads, versions):
    """ONNX Runtime's version of `op`: a function computing the output on a
    CPU session with `threads` intra-op threads."""
    import onnxruntime as ort

    versions["onnxruntime"] = ort.__version__
    model, names = onnx_model(op, [list(x.shape) for x in xs])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    feeds = dict(zip(names, xs))
    return lambda: session.run(["y"], feeds)[0]


def blas_version(np):
    """NumPy's BLAS as "name version", or None when NumPy does not say."""
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{blas['name']} {blas['version']}"
    except Exception:
        return None


def main():
    try:
        case = json.loads(sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read())
        op, shapes = case["op"], case["shapes"]
        threads, runs = int(case.get("threads", 1)), int(case.get("runs", 5))
        if op not in ("gemm", "softmax", "layernorm", "conv_relu_pool", "cumsum") or threads < 1 or runs < 1:
            raise ValueError(f"bad op, threads or runs in {case}")
    except (ValueError, KeyError, TypeError) as e:
        print(f"bench_cpu_peers.py: malformed case: {e}", file=sys.stderr)
        sys.exit(2)
    # Before NumPy's OpenBLAS starts its threads.
    os.environ["OPENBLAS_NUM_THREADS"] = str(threads)
    os.environ["OMP_NUM_THREADS"] = str(threads)
    try:
        import numpy as np
    except ImportError as e:
        print(f"bench_cpu_peers.py: NumPy is not installed ({e}): {INSTALL_HINT}", file=sys.stderr)
        sys.exit(3)
    if "inputs" in case:
        xs = [np.ascontiguousarray(np.load(p), dtype=np.float32) for p in case["inputs"]]
    else:
        rng = np.random.default_rng(0)
        xs = [rng.uniform(-1, 1, s).astype(np.float32) for s in shapes]
    versions = {"python": sys.version.split()[0], "numpy": np.__version__, "blas": blas_version(np)}
    peers = []
    for name, make in [
        ("numpy", lambda: numpy_step(np, op, xs)),
        ("onnxruntime", lambda: onnxruntime_step(op, xs, threads, versions)),
    ]:
        try:
            step = make()
            result = {"name": name, "threads": peer_threads(name, op, threads), "ms": median_ms(step, runs)}
            if "output_dir" in case:
                result["output"] = os.path.join(case["output_dir"], f"{name}.npy")
                np.save(result["output"], np.asarray(step(), dtype=np.float32))
        except ImportError as e:
            result = {"name": name, "error": f"{e.name or name} is not installed ({e}): {INSTALL_HINT}"}
        except Exception as e:
            result = {"name": name, "error": f"{type(e).__name__}: {e}"}
        peers.append(result)
    print(json.dumps({"versions": versions, "peers": peers}))


if __name__ == "__main__":
    main()

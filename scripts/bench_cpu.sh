#!/usr/bin/env bash
# The CPU benchmark: tgc's generated CPU kernels against NumPy (OpenBLAS) and
# ONNX Runtime, measured in the same run with the same thread counts
# (crates/tgc-cli/examples/bench_cpu.rs; the peers: scripts/bench_cpu_peers.py).
#
#   bash scripts/bench_cpu.sh [RUNS] [--threads 1,2] [--only gemm|softmax|layernorm|conv] [--peak-gflops F]
#
# Installs the peers once with pip into .toolchain/bench (git-ignored),
# pinned with the packages they import (installed with --no-deps, so the list
# is the whole closure), stamped like scripts/setup.sh's pip_target: a re-run
# whose stamp matches installs nothing and works offline. Then runs the
# example with PYTHONPATH pointing there, passing the arguments through.
# $PYTHON (default python3) is the Python used for both. A benchmark, not a
# test: its numbers depend on what else the machine runs.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PEERS="numpy==2.2.6 onnx==1.23.2 onnxruntime==1.32.0 protobuf==7.36.2 ml_dtypes==0.6.0 typing_extensions==4.16.0 packaging==26.3 flatbuffers==25.12.19"
BENCH_PY="$ROOT/.toolchain/bench"
export PYTHON="${PYTHON:-python3}"
STAMP="$PEERS $("$PYTHON" -c 'import sys; print(sys.version_info[:2])' 2>/dev/null || echo no-python)"
if [ "$(cat "$BENCH_PY/.installed" 2>/dev/null)" != "$STAMP" ]; then
    echo "scripts/bench_cpu.sh: installing $PEERS into $BENCH_PY (about 190 MB, once)" >&2
    "$PYTHON" -m pip --version >/dev/null 2>&1 || { echo "scripts/bench_cpu.sh: $PYTHON with pip is required to install the peers (NumPy, ONNX Runtime)" >&2; exit 1; }
    rm -rf "$BENCH_PY"
    # --target installs are not the system environment; the variable only
    # silences pip's PEP 668 guard on distributions that set it.
    # shellcheck disable=SC2086
    PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore "$PYTHON" -m pip install --quiet --disable-pip-version-check \
        --no-deps --only-binary=:all: --target "$BENCH_PY" $PEERS
    echo "$STAMP" >"$BENCH_PY/.installed"
fi
cd "$ROOT"
PYTHONPATH="$BENCH_PY${PYTHONPATH:+:$PYTHONPATH}" cargo run --locked --release --quiet -p tgc-cli --example bench_cpu -- "$@"

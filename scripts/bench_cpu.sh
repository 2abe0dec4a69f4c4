#!/usr/bin/env bash
# The CPU benchmark: tgc's generated CPU kernels against NumPy (OpenBLAS) and
# ONNX Runtime, measured in the same run with the same thread counts
# (crates/tgc-cli/examples/bench_cpu.rs; the peers: scripts/bench_cpu_peers.py).
#
#   bash scripts/bench_cpu.sh [RUNS] [--threads 1,2] [--only gemm|softmax|layernorm|conv|cumsum] [--peak-gflops F]
#
# Installs the peers once into .toolchain/bench (scripts/bench_peers.sh),
# then runs the example with PYTHONPATH pointing there, passing the
# arguments through.
# $PYTHON (default python3) is the Python used for both. A benchmark, not a
# test: its numbers depend on what else the machine runs.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=scripts/bench_peers.sh
source "$ROOT/scripts/bench_peers.sh"
cd "$ROOT"
PYTHONPATH="$BENCH_PY${PYTHONPATH:+:$PYTHONPATH}" cargo run --locked --release --quiet -p tgc-cli --example bench_cpu -- "$@"

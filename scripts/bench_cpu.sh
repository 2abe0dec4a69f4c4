#!/usr/bin/env bash
# The CPU benchmark: tgc's generated CPU kernels against NumPy (OpenBLAS) and
# ONNX Runtime, measured in the same run with the same thread counts, on the
# same inputs
# (crates/tgc-cli/examples/bench_cpu.rs; the peers: scripts/bench_cpu_peers.py).
#
#   bash scripts/bench_cpu.sh [RUNS] [--threads 1,2] [--only gemm|softmax|layernorm|conv|cumsum] [--peak-gflops F]
#
# Installs the peers once into .toolchain/bench (scripts/bench_peers.sh),
# then runs the example with PYTHONPATH pointing there, passing the
# arguments through. Every row prints the threads each side ran with and
# each peer's agreement with tgc's output under the op's bound
# (crates/tgc-cli/examples/common/agreement.rs); the run exits 1 after the
# last row when one fails. TGC_BENCH_CORRUPT=1 makes tgc's outputs wrong
# before the comparison, so every row must fail.
# $PYTHON (default python3) is the Python used for both. A benchmark, not a
# test: its numbers depend on what else the machine runs.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=scripts/bench_peers.sh
source "$ROOT/scripts/bench_peers.sh"
cd "$ROOT"
PYTHONPATH="$BENCH_PY${PYTHONPATH:+:$PYTHONPATH}" cargo run --locked --release --quiet -p tgc-cli --example bench_cpu -- "$@"

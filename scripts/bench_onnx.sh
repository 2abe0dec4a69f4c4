#!/usr/bin/env bash
# Whole ONNX models on the CPU, tgc against ONNX Runtime at equal thread
# counts (scripts/bench_onnx.py says which models and how they are timed).
#
#   bash scripts/bench_onnx.sh [--threads 1,2] [--runs 20] [--only TEXT]
#
# Installs the peers once into .toolchain/bench (scripts/bench_peers.sh) and
# the MiniLM exports (scripts/onnx_minilm.sh's and onnx_minilm_l6.sh's),
# builds the release `bench_onnx` example, then
# runs the driver. A benchmark, not a test.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=scripts/bench_peers.sh
source "$ROOT/scripts/bench_peers.sh"
cd "$ROOT"
# shellcheck source=scripts/onnx_minilm.sh
source "$ROOT/scripts/onnx_minilm.sh"
# shellcheck source=scripts/onnx_minilm_l6.sh
source "$ROOT/scripts/onnx_minilm_l6.sh"
cargo build --locked --quiet --release -p tgc-cli --example bench_onnx
TGC_MINILM_ONNX="$MINILM_ONNX" TGC_MINILM_L6_ONNX="$MINILM_L6_ONNX" \
    PYTHONPATH="$BENCH_PY${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" scripts/bench_onnx.py target/release/examples/bench_onnx "$@"

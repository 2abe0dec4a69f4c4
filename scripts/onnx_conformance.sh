#!/usr/bin/env bash
# ONNX's PyTorch-exported operator tests written in the graph language and
# run by `tgc run` (scripts/onnx_conformance.py says how): the "tried as a
# new user would" check of docs/dsl.md's ops against recorded outputs.
#
#   bash scripts/onnx_conformance.sh [--backend cpu|interp|cuda] [--only TEXT] [--keep DIR]
#
# Installs ONNX and NumPy once into .toolchain/bench (scripts/bench_peers.sh),
# builds the `tgc` binary, then runs the Python driver with the arguments
# passed through. Not part of the test command: it needs the ONNX wheel's
# test data (about a minute on two cores).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=scripts/bench_peers.sh
source "$ROOT/scripts/bench_peers.sh"
cd "$ROOT"
cargo build --locked --quiet -p tgc-cli --bin tgc
PYTHONPATH="$BENCH_PY${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" scripts/onnx_conformance.py target/debug/tgc "$@"

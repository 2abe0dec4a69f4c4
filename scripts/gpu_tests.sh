#!/usr/bin/env bash
# The GPU test tier (DESIGN.md): for a machine with an NVIDIA GPU (sm_80 or
# newer) and its driver, not for CI. With TGC_GPU=1 every test that compares
# a backend with the interpreter also runs its GPU part, and a missing GPU
# fails instead of being skipped:
#   - tgc-runtime's `cuda` tests (a PTX kernel loaded and launched);
#   - tests/sm80_kernel.rs (kernel!'s run_on_gpu vs the CPU run: the GEMM's
#     tensor-core kernel in f16 and bf16, a whole attention graph's SIMT
#     kernels) and the build helper's sm80 modules (GEMM, softmax, the
#     mlp model's sm80::Model: ConstPool upload, CUDA Graph per cluster),
#     again with feature sm90, whose launches take the sm90 twins (TMA +
#     wgmma) on a 9.x device;
#   - the CLI tests (`tgc run --backend cuda` vs `--backend interp`, `tgc
#     tune --target` measuring a GEMM's plans on the device); a graph the
#     GPU lowering refuses fails them unless it is listed, with its reason,
#     in crates/tgc-cli/tests/gpu_refusals.txt.
# Each GPU comparison that ran and agreed is counted (one line in the file
# TGC_GPU_RAN_LOG names: tests/support/gpu_tier.rs), and each step fails
# below its minimum here — what every sm_80 or newer device runs; an sm_90
# device also runs tgc-runtime's TMA box load — so a comparison that stops
# running fails the tier instead of passing unseen. A line added to
# gpu_refusals.txt lowers the CLI's minimum by the cases of that graph.
# Then compute-sanitizer (memcheck, racecheck, synccheck, initcheck) runs
# the generated kernels: the sm80_kernel test binary and `tgc run --backend
# cuda` on examples/graphs/gemm_bias_relu.tgc. compute-sanitizer is the
# nvidia-cuda-sanitizer-api 13.0 wheel (bin/compute-sanitizer), installed
# into .toolchain/sanitizer with pip unless it is on PATH; when neither
# works the script says so and skips that part.
#
#   bash scripts/gpu_tests.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export TGC_GPU=1
WORK="$(mktemp -d)"
COMPARED=0
# counted MIN COMMAND...: runs COMMAND, then fails unless it counted at
# least MIN GPU comparisons.
counted() {
    local min="$1"
    shift
    export TGC_GPU_RAN_LOG="$WORK/compared.log"
    : >"$TGC_GPU_RAN_LOG"
    "$@"
    local n
    n="$(wc -l <"$TGC_GPU_RAN_LOG")"
    COMPARED=$((COMPARED + n))
    echo "scripts/gpu_tests.sh: GPU comparisons: ran $n (at least $min): $*"
    if [ "$n" -lt "$min" ]; then
        echo "scripts/gpu_tests.sh: $* ran $n GPU comparisons, fewer than its minimum $min; those that ran:" >&2
        cat "$TGC_GPU_RAN_LOG" >&2
        exit 1
    fi
}
counted 2 cargo test -p tgc-runtime --locked --features cuda
counted 4 cargo test -p tgc --locked --features sm80 --test sm80_kernel
counted 3 cargo test -p tgc-build-demo --locked --features sm80 --test sm80
# On a 9.x device, `launch` picks the sm90 twins (TMA + wgmma): the same
# tests through them.
counted 4 cargo test -p tgc --locked --features sm90 --test sm80_kernel
counted 4 cargo test -p tgc-build-demo --locked --features sm90 --test sm80 --test sm90
counted 28 cargo test -p tgc-cli --locked --test cli
# Every plan of the device's GEMM space (on sm90 the warp-specialised and
# persistent forms too) against a CPU reference, and every attention plan
# (algorithm × 64 or 128 query rows a CTA) against the interpreter.
counted 2 cargo test -p tgc-cli --locked --test gpu_plans
# `tgc tune --target` for the device: every plan of a GEMM measured, the
# fastest recorded and built from the record.
counted 1 cargo test -p tgc-cli --locked --test tune
unset TGC_GPU_RAN_LOG
echo "scripts/gpu_tests.sh: $COMPARED GPU comparisons ran"

SAN_DIR="$PWD/.toolchain/sanitizer"
SAN="$SAN_DIR/nvidia/cu13/bin/compute-sanitizer"
if [ ! -x "$SAN" ]; then
    if command -v compute-sanitizer >/dev/null; then
        SAN="$(command -v compute-sanitizer)"
    elif PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet \
        --disable-pip-version-check --no-deps --only-binary=:all: --target "$SAN_DIR" \
        "nvidia-cuda-sanitizer-api==13.0.85" && [ -x "$SAN" ]; then
        :
    else
        echo "scripts/gpu_tests.sh: compute-sanitizer is not on PATH and the nvidia-cuda-sanitizer-api==13.0.85 wheel could not be installed: the sanitizer runs are skipped" >&2
        exit 0
    fi
fi
echo "scripts/gpu_tests.sh: compute-sanitizer at $SAN"

# The sm80_kernel test binary (built above).
BIN="$(cargo test -p tgc --locked --features sm80 --test sm80_kernel --no-run --message-format=json 2>/dev/null \
    | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "sm80_kernel":
        print(m["executable"])')"
cargo build -p tgc-cli --locked --bin tgc
python3 scripts/gemm_inputs.py "$WORK"
for tool in memcheck racecheck synccheck initcheck; do
    echo "== compute-sanitizer --tool $tool: sm80_kernel tests"
    "$SAN" --tool "$tool" --error-exitcode 1 "$BIN" --test-threads 1 run_on_gpu
    echo "== compute-sanitizer --tool $tool: tgc run --backend cuda"
    "$SAN" --tool "$tool" --error-exitcode 1 target/debug/tgc run examples/graphs/gemm_bias_relu.tgc --backend cuda \
        --input "x=$WORK/x.npy" --input "w=$WORK/w.npy" --input "bias=$WORK/bias.npy" --output-dir "$WORK/out"
done
echo "scripts/gpu_tests.sh: the GPU tier and the sanitizer runs passed"

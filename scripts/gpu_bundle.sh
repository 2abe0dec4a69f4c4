#!/usr/bin/env bash
# The GPU tier for a GPU machine without a Rust toolchain (DESIGN.md's GPU
# tier; what scripts/gpu_tests.sh runs, built elsewhere): on a machine with
# the toolchain, builds the tier's test binaries (tgc-runtime's `cuda`
# tests, tests/sm80_kernel.rs, the build helper's sm80 test, the same two
# and the build helper's sm90 test with feature sm90, the CLI tests, the
# plan-space test tests/gpu_plans.rs, the CLI's tuning test (`tgc tune
# --target` measuring on the device)),
# the `tgc` binary (debug for the tests, release as `tgc-release` for
# BENCH=tune) and the `bench_gpu` example (release), strips their
# debug info and packs them, gzipped, with this script into DIR (under the
# 64 MiB a GPU call may carry):
#
#   bash scripts/gpu_bundle.sh DIR          # here: build and bundle
#
# On the GPU machine (x86-64 Linux, NVIDIA driver, CUDA 13.0 with nvcc on
# PATH or in /usr/local/cuda), from a copy of this repository holding DIR:
#
#   bash DIR/gpu_bundle.sh --run LOGDIR     # there: run
#
# runs each test binary with TGC_GPU=1 (a missing GPU fails; each must
# count at least its minimum of GPU comparisons, as in gpu_tests.sh), then
# compute-sanitizer (memcheck, racecheck, synccheck, initcheck) on the
# sm80_kernel GPU test and on `tgc run --backend cuda`, then `bench_gpu`
# and `bench_gpu --plans` (each row checked against PyTorch's output; a row
# that disagrees fails the run), each one's output in LOGDIR, and a summary on
# stdout. TGC_CUDA_ROOT is set to a folder of links to that CUDA's bin/,
# lib64/ and include/. The test binaries read files of the repository at
# the absolute path they were built in (`CARGO_MANIFEST_DIR`); where that
# path does not exist on the GPU machine, --run links it to this copy
# (which needs write access to its parent). BENCH_ITERS (default 20) and
# SWEEP_ITERS (default 10) set the iterations per case; BENCH=gemm runs
# only `bench_gpu --gemm` (the GEMM table: on a 9.x device the sm90 and
# sm80 branches against cuBLAS), BENCH=rows runs
# only `bench_gpu --rows` (softmax, layernorm and cumsum) after the tests,
# BENCH=conv only `bench_gpu --conv` (BENCH=attention `--attention`,
# BENCH=minilm `--minilm`; BENCH_ONLY=TEXT passes `--only TEXT`), BENCH=convplans only the plan sweep
# of the 3×3 convolutions, BENCH=bench `bench_gpu` without the plan sweep,
# BENCH=tune `tgc tune --target` (sm90 on a 9.x device, else sm80) on the
# f16 GEMM + bias + ReLU at 1024³, 4096³ and 4096×3072×768 (every plan
# measured, analytic against tuned; TUNE_REPS timed runs each, default
# 5), BENCH=none no benchmark; several words separated by commas run in turn
# (BENCH=conv,convplans). The default is BENCH=full.
set -uo pipefail

if [ "${1:-}" != "--run" ]; then
    set -e
    DIR="${1:?usage: gpu_bundle.sh DIR | gpu_bundle.sh --run LOGDIR}"
    cd "$(dirname "$0")/.."
    bash scripts/setup.sh
    mkdir -p "$DIR"
    # OUT TARGET CARGO-ARGS...: the test executable of cargo target TARGET.
    build() {
        local out="$1" target="$2"
        shift 2
        local exe
        exe="$(cargo "$@" --locked --message-format=json | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == sys.argv[1]:
        print(m["executable"])' "$target")"
        [ -n "$exe" ] || { echo "gpu_bundle.sh: cargo built no test executable for $target" >&2; exit 1; }
        strip --strip-debug -o "$DIR/$out" "$exe"
    }
    build runtime tgc_runtime test --no-run -p tgc-runtime --features cuda
    build sm80_kernel sm80_kernel test --no-run -p tgc --features sm80 --test sm80_kernel
    build build_sm80 sm80 test --no-run -p tgc-build-demo --features sm80 --test sm80
    # Feature sm90: on a 9.x device `launch` takes the sm90 twins (TMA + wgmma).
    build sm90_kernel sm80_kernel test --no-run -p tgc --features sm90 --test sm80_kernel
    build build_sm90_sm80 sm80 test --no-run -p tgc-build-demo --features sm90 --test sm80
    build build_sm90 sm90 test --no-run -p tgc-build-demo --features sm90 --test sm90
    build cli cli test --no-run -p tgc-cli --test cli
    build gpu_plans gpu_plans test --no-run -p tgc-cli --test gpu_plans
    build tune tune test --no-run -p tgc-cli --test tune
    cargo build -p tgc-cli --locked --bin tgc
    strip --strip-debug -o "$DIR/tgc" target/debug/tgc
    cargo build --release -p tgc-cli --locked --bin tgc
    strip --strip-debug -o "$DIR/tgc-release" target/release/tgc
    cargo build --release -p tgc-cli --locked --features cuda --example bench_gpu
    strip --strip-debug -o "$DIR/bench_gpu" target/release/examples/bench_gpu
    # Gzipped (about 34 of 113 MB in all): what travels to the GPU machine
    # is limited to 64 MiB with the repository; --run unpacks it.
    (cd "$DIR" && tar czf bin.tgz --remove-files runtime sm80_kernel build_sm80 sm90_kernel build_sm90_sm80 \
        build_sm90 cli gpu_plans tune tgc tgc-release bench_gpu)
    cp scripts/gpu_bundle.sh "$DIR/gpu_bundle.sh"
    pwd >"$DIR/built_in"
    du -sh "$DIR"
    exit 0
fi

# --run LOGDIR: on the GPU machine, from the repository root.
BUNDLE="$(cd "$(dirname "$0")" && pwd)"
if [ -e "$BUNDLE/bin.tgz" ]; then
    tar xzf "$BUNDLE/bin.tgz" -C "$BUNDLE" || { echo "cannot unpack $BUNDLE/bin.tgz"; exit 1; }
fi
LOGS="${2:?usage: gpu_bundle.sh --run LOGDIR}"
mkdir -p "$LOGS"
T0=$(date +%s)
say() { echo "[+$(($(date +%s) - T0))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
BUILT="$(cat "$BUNDLE/built_in")"
if [ "$BUILT" != "$PWD" ] && [ ! -e "$BUILT" ]; then
    mkdir -p "$(dirname "$BUILT")" && ln -s "$PWD" "$BUILT" && say "linked $BUILT -> $PWD"
fi
CUDA=""
NVCC="$(command -v nvcc || true)"
for c in ${NVCC:+"$(dirname "$(dirname "$NVCC")")"} /usr/local/cuda; do
    for l in lib64 lib; do
        if [ -e "$c/$l/libnvrtc.so.13" ] && [ -x "$c/bin/ptxas" ]; then
            CUDA="$c" LIB="$c/$l"
            break 2
        fi
    done
done
[ -n "$CUDA" ] || { say "no CUDA 13 with libnvrtc.so.13 and ptxas (nvcc on PATH or /usr/local/cuda)"; exit 1; }
ROOT="$(mktemp -d)"
ln -s "$CUDA/bin" "$ROOT/bin" && ln -s "$LIB" "$ROOT/lib" && ln -s "$CUDA/include" "$ROOT/include"
export TGC_CUDA_ROOT="$ROOT" LD_LIBRARY_PATH="$LIB:${LD_LIBRARY_PATH:-}" TGC_GPU=1
say "CUDA $CUDA ($("$CUDA/bin/nvcc" --version | tail -1))"
mkdir -p target/debug && cp "$BUNDLE/tgc" target/debug/tgc
failed=0
# Each binary with the least number of GPU comparisons it must count
# (TGC_GPU_RAN_LOG, tests/support/gpu_tier.rs; scripts/gpu_tests.sh's minima).
for tm in runtime:2 sm80_kernel:4 build_sm80:3 sm90_kernel:4 build_sm90_sm80:3 build_sm90:1 cli:28 gpu_plans:2 tune:1; do
    t="${tm%:*}" min="${tm#*:}"
    export TGC_GPU_RAN_LOG="$(cd "$LOGS" && pwd)/$t.compared"
    : >"$TGC_GPU_RAN_LOG"
    "$BUNDLE/$t" --test-threads 8 >"$LOGS/$t.txt" 2>&1
    rc=$?
    n="$(wc -l <"$TGC_GPU_RAN_LOG")"
    [ $rc -eq 0 ] && [ "$n" -ge "$min" ] || failed=1
    say "$t: exit $rc, $(grep '^test result' "$LOGS/$t.txt" | tail -1), GPU comparisons: ran $n (at least $min)"
    grep -E '^test .* FAILED$' "$LOGS/$t.txt"
done
unset TGC_GPU_RAN_LOG
SAN="$(command -v compute-sanitizer || echo "$CUDA/bin/compute-sanitizer")"
if [ -x "$SAN" ]; then
    WORK="$(mktemp -d)"
    python3 scripts/gemm_inputs.py "$WORK"
    for tool in memcheck racecheck synccheck initcheck; do
        "$SAN" --tool $tool --error-exitcode 1 "$BUNDLE/sm80_kernel" --test-threads 1 run_on_gpu >>"$LOGS/sanitizer.txt" 2>&1
        r1=$?
        "$SAN" --tool $tool --error-exitcode 1 "$BUNDLE/sm90_kernel" --test-threads 1 run_on_gpu >>"$LOGS/sanitizer.txt" 2>&1
        r1=$((r1 + $?))
        "$SAN" --tool $tool --error-exitcode 1 target/debug/tgc run examples/graphs/gemm_bias_relu.tgc --backend cuda \
            --input "x=$WORK/x.npy" --input "w=$WORK/w.npy" --input "bias=$WORK/bias.npy" --output-dir "$WORK/out" \
            >>"$LOGS/sanitizer.txt" 2>&1
        r2=$?
        [ $r1 -eq 0 ] && [ $r2 -eq 0 ] || failed=1
        say "compute-sanitizer --tool $tool: tests exit $r1, tgc run exit $r2"
    done
else
    say "no compute-sanitizer: its runs are skipped"
fi
# BENCH: one word of the header, or several separated by commas.
BENCH="${BENCH:-full}"
for bench in ${BENCH//,/ }; do
    case "$bench" in
    none) ;;
    gemm | rows | conv | attention | minilm)
        "$BUNDLE/bench_gpu" "--$bench" "${BENCH_ITERS:-20}" ${BENCH_ONLY:+--only "$BENCH_ONLY"} \
            >"$LOGS/bench-$bench.txt" 2>&1 || failed=1
        say "bench_gpu --$bench:"
        cat "$LOGS/bench-$bench.txt"
        ;;
    convplans)
        "$BUNDLE/bench_gpu" --plans --conv "${SWEEP_ITERS:-10}" >"$LOGS/sweep-conv.txt" 2>&1 || failed=1
        say "bench_gpu --plans --conv (per-plan rows in $LOGS/sweep-conv.txt):"
        grep -E "^conv|pick|Spearman|agreement" "$LOGS/sweep-conv.txt"
        ;;
    bench | full)
        "$BUNDLE/bench_gpu" "${BENCH_ITERS:-20}" >"$LOGS/bench.txt" 2>&1 || failed=1
        say "bench_gpu:"
        cat "$LOGS/bench.txt"
        ;;&
    full)
        "$BUNDLE/bench_gpu" --plans "${SWEEP_ITERS:-10}" >"$LOGS/sweep.txt" 2>&1 || failed=1
        say "bench_gpu --plans (per-plan rows in $LOGS/sweep.txt):"
        grep -E "^GEMM|^conv|pick|Spearman|agreement" "$LOGS/sweep.txt"
        ;;
    bench) ;;
    tune)
        case "$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1)" in
        9.*) TT=sm90 ;;
        *) TT=sm80 ;;
        esac
        "$BUNDLE/tgc-release" tune examples/graphs/gemm_bias_relu.tgc --target "$TT" --cache "$LOGS/tgc-tune" \
            --point M=1024,N=1024,K=1024 --point M=4096,N=4096,K=4096 --point M=4096,N=3072,K=768 \
            --repetitions "${TUNE_REPS:-5}" --report "$LOGS/tune.csv" >"$LOGS/tune.txt" 2>&1 || failed=1
        say "tgc tune --target $TT (records in $LOGS/tgc-tune/gpu):"
        cat "$LOGS/tune.txt"
        ;;
    *)
        say "unknown BENCH word \`$bench\`"
        failed=1
        ;;
    esac
done
exit $failed

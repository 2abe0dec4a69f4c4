#!/usr/bin/env bash
# Coverage-guided fuzzing of tgc's input formats with AFL++ (issue 18): not a
# test, a long run. The targets are tgc_core::fuzz::TARGETS (dsl, onnx, tiny_json,
# plan_dsl, plan_json, npy, safetensors, and the structure-aware graphs,
# whose bytes choose a valid graph that the interpreter and the SIMT emulator
# must compute alike, and graphs_mma, the same for matmuls, convolutions and
# attentions lowered through the sm80 tensor-core templates); the driver is fuzz/ (its own
# workspace). Why AFL++: through cargo-afl it instruments with rustc's stable
# sanitizer-coverage passes, so it runs on the stable toolchain this project
# builds with; cargo-fuzz (libFuzzer) needs nightly.
#
#   bash scripts/fuzz.sh [SECONDS] [TARGET ...]     (default: 60, every target)
#
# Installs cargo-afl once into .toolchain/afl (git-ignored) and builds AFL++
# with it, then runs each target for SECONDS from fuzz/corpus/TARGET, with
# its state in fuzz/out/TARGET (git-ignored). At the end of each run it prints
# the executions, the edge coverage and the crashes and hangs found, and
# copies the crashing inputs to fuzz/corpus/TARGET/crash-* so that the test
# command replays them (crates/tgc-core/tests/fuzz_corpus.rs): fix the bug,
# then commit the input with the fix. It also copies the queue entries that
# found a new edge (AFL++ marks them `+cov`) to fuzz/corpus/TARGET/cov-*, named
# by content: together they reach every edge the run reached, and committing
# them makes the test command replay that coverage. (Not `afl-cmin`: here it
# saw no coverage from this driver, every input timing out, since afl.rs's
# persistent loop stops the process with SIGSTOP after an input when it runs
# outside afl-fuzz.)
# After a graphs or graphs_mma run, every case of its queue also runs on the
# CPU backend (one C compiler run per batch, too slow for each execution) and
# must match the interpreter.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SECONDS_PER_TARGET="${1:-60}"
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(dsl onnx tiny_json plan_dsl plan_json npy safetensors graphs graphs_mma)
AFL_ROOT="$ROOT/.toolchain/afl"
export PATH="$AFL_ROOT/bin:$PATH"
if ! command -v cargo-afl >/dev/null; then
    echo "scripts/fuzz.sh: installing cargo-afl into $AFL_ROOT (once)" >&2
    cargo install cargo-afl --locked --root "$AFL_ROOT"
fi
# Builds AFL++ (afl-fuzz and its runtime) into cargo-afl's data folder once.
if ! out=$(cargo afl config --build 2>&1); then
    grep -q "already built" <<<"$out" || { echo "$out" >&2; exit 1; }
fi
cd "$ROOT/fuzz"
cargo afl build --release --quiet
# This sandbox has no core-dump handler to configure and no CPU governor.
export AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_SKIP_CPUFREQ=1 AFL_NO_UI=1 AFL_QUIET=1
for t in "${TARGETS[@]}"; do
    out="$ROOT/fuzz/out/$t"
    rm -rf "$out"
    mkdir -p "$out"
    echo "== $t: ${SECONDS_PER_TARGET}s" >&2
    cargo afl fuzz -V "$SECONDS_PER_TARGET" -t 10000 -i "$ROOT/fuzz/corpus/$t" -o "$out" \
        "$ROOT/fuzz/target/release/tgc-fuzz" "$t" >"$out/log.txt" 2>&1 || true
    stats="$out/default/fuzzer_stats"
    if [ ! -f "$stats" ]; then
        echo "$t: AFL++ did not start; see $out/log.txt" >&2
        tail -20 "$out/log.txt" >&2
        continue
    fi
    field() { sed -n "s/^$1 *: *//p" "$stats"; }
    printf '%-12s execs %s  (%s/s)  edges %s  crashes %s  hangs %s  run %ss\n' "$t" \
        "$(field execs_done)" "$(field execs_per_sec)" "$(field bitmap_cvg)" \
        "$(field saved_crashes)" "$(field saved_hangs)" "$(field run_time)"
    for c in "$out"/default/crashes/id:*; do
        [ -e "$c" ] || continue
        cp "$c" "$ROOT/fuzz/corpus/$t/crash-$(sha1sum "$c" | cut -c1-16)"
        echo "$t: crash saved as fuzz/corpus/$t/crash-$(sha1sum "$c" | cut -c1-16)" >&2
    done
    kept=0
    for c in "$out"/default/queue/id:*+cov*; do
        [ -e "$c" ] || continue
        name="cov-$(sha1sum "$c" | cut -c1-16)"
        [ -e "$ROOT/fuzz/corpus/$t/$name" ] || { cp "$c" "$ROOT/fuzz/corpus/$t/$name"; kept=$((kept + 1)); }
    done
    echo "$t: $kept new entries that found an edge copied to fuzz/corpus/$t/cov-*" >&2
    if [ "$t" = graphs ] || [ "$t" = graphs_mma ]; then
        echo "== $t: the queue on the CPU backend" >&2
        (cd "$ROOT" && TGC_FUZZ_QUEUE="$out/default/queue" TGC_FUZZ_TARGET="$t" cargo test -q --release -p tgc-core \
            --test fuzz_corpus graphs_corpus_runs_alike_on_the_cpu_backend -- --nocapture)
    fi
done

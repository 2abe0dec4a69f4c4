#!/usr/bin/env bash
# The main-job command of README.md: runs the examples, each of which checks
# its result against the reference interpreter, then runs the `tgc` CLI on a
# spec graph with the generated-C backend and the interpreter and compares.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
for ex in gemm_bias_relu conv_relu_pool attention; do
    echo "== example $ex"
    cargo run --locked --release --quiet --example "$ex"
done

#!/usr/bin/env bash
# The test command of README.md: builds the workspace and runs every test
# tier that needs no GPU (unit, snapshot, property, CLI, trybuild, examples).
# Needs only the Rust toolchain and a C compiler (cc/gcc), both on a fresh
# machine of this project's kind.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cc >/dev/null || { echo "scripts/test.sh: a C compiler (cc) is required" >&2; exit 1; }
cargo test --workspace --locked --all-targets
cargo test --workspace --locked --doc
# The examples check their own results against the reference interpreter.
for ex in gemm_bias_relu conv_relu_pool attention; do
    cargo run --locked --quiet --example "$ex"
done

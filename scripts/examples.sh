#!/usr/bin/env bash
# The main-job command of README.md: embeds sentences with all-MiniLM-L6-v2
# on tgc-compiled CPU kernels (examples/minilm; the model is installed by
# setup.sh) and prints their cosine similarities, then runs the kernel
# examples, each of which checks its result against the reference
# interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "== example minilm (all-MiniLM-L6-v2 sentence embeddings)"
cargo run --locked --release --quiet -p tgc-minilm --bin minilm -- \
    "A man is eating food." "A man is eating a piece of bread." "A man is riding a horse." "The new movie is awesome."
for ex in gemm_bias_relu conv_relu_pool attention; do
    echo "== example $ex"
    cargo run --locked --release --quiet --example "$ex"
done

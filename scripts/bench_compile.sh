#!/usr/bin/env bash
# The compile-time benchmark (issue 18): `tgc compile` (C for the CPU, with
# the Poly-View and region JSON it writes) on generated graphs of growing
# size, with wall time, peak memory and the growth factor between sizes,
# and under each graph its stages as `tgc compile --timings` prints them
# (seconds and peak resident MiB per stage).
#
#   bash scripts/bench_compile.sh [SIZE ...]      (default: 1000 10000)
#
# Families, each scaled to about SIZE Tiny IR nodes:
#   ewise      SIZE/2 statements `t = t * x + x`;
#   movement   SIZE/3 links `t = reshape(permute(reshape(t, [2, 2]), [1, 0]), [4])`;
#   conv       a conv2d followed by (SIZE - 13)/2 statements `t = t * c + c`;
#   layers     the MiniLM encoder layer of examples/minilm repeated until the
#              graph has about SIZE nodes (one layer is about 190 nodes).
# The node count printed is `tgc check`'s. A benchmark, not a test: times
# depend on what else the machine runs. Needs python3 (to write the graphs)
# and GNU time (/usr/bin/time) for the peak memory.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(1000 10000)
[ -x /usr/bin/time ] || { echo "scripts/bench_compile.sh: GNU time (/usr/bin/time) is required" >&2; exit 1; }
cargo build --release --locked --quiet -p tgc-cli --manifest-path "$ROOT/Cargo.toml"
TGC="$ROOT/target/release/tgc"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

python3 - "$WORK" "$ROOT/examples/minilm/graphs/minilm.tgc" "${SIZES[@]}" <<'EOF'
import sys
work, minilm, sizes = sys.argv[1], sys.argv[2], [int(s) for s in sys.argv[3:]]
layer_src = open(minilm).read()
layer_src = layer_src[layer_src.index("// One encoder layer"):]
weights = ("wq: f32[384, 384], bq: f32[384], wk: f32[384, 384], bk: f32[384], wv: f32[384, 384], bv: f32[384], "
           "wo: f32[384, 384], bo: f32[384], g1: f32[384], b1: f32[384], wi: f32[1536, 384], bi: f32[1536], "
           "wf: f32[384, 1536], bf: f32[384], g2: f32[384], b2: f32[384]")
names = "wq, bq, wk, bk, wv, bv, wo, bo, g1, b1, wi, bi, wf, bf, g2, b2"
for n in sizes:
    body = "".join("    t = t * x + x\n" for _ in range(max(1, n // 2)))
    open(f"{work}/ewise_{n}.tgc", "w").write(
        f"graph<N=4> main(x: f32[N]) -> (y: f32[N]) {{\n    t = x\n{body}    y = t\n    return y\n}}\n")
    body = "".join("    t = reshape(permute(reshape(t, [2, 2]), [1, 0]), [4])\n" for _ in range(max(1, n // 3)))
    open(f"{work}/movement_{n}.tgc", "w").write(
        f"graph main(x: f32[4]) -> (y: f32[4]) {{\n    t = x\n{body}    y = t\n    return y\n}}\n")
    body = "".join("    t = t * c + c\n" for _ in range(max(1, (n - 13) // 2)))
    open(f"{work}/conv_{n}.tgc", "w").write(
        "graph<N=2> main(x: f32[N, 3, 32, 32], w: f32[8, 3, 3, 3], b: f32[8]) -> (y: f32[N, 8, 32, 32]) {\n"
        f"    c = conv2d(x, w, bias=b, stride=[1, 1], pad=[1, 1])\n    t = c\n{body}    y = t\n    return y\n}}\n")
    layers = max(1, round(n / 190))
    calls = "".join(f"    h{i + 1} = layer(h{i}, mask, {names})\n" for i in range(layers))
    open(f"{work}/layers_{n}.tgc", "w").write(
        f"graph<B=1, S=16> main(h0: f32[B, S, 384], mask: f32[B, S], {weights}) -> (e: f32[B, 384]) {{\n"
        f"{calls}    e = pool(h{layers}, mask)\n    return e\n}}\n\n{layer_src}")
EOF

printf '%-9s %8s %8s %10s %10s %8s\n' family size nodes seconds peak_MiB growth
for family in ewise movement conv layers; do
    prev=""
    for n in "${SIZES[@]}"; do
        file="$WORK/${family}_$n.tgc"
        nodes=$("$TGC" check "$file" | sed -n 's/.*, \([0-9]*\) Tiny IR nodes$/\1/p')
        /usr/bin/time -f '%e %M' -o "$WORK/time" "$TGC" compile "$file" --timings >/dev/null 2>"$WORK/stages"
        read -r secs kib <"$WORK/time"
        growth=""
        [ -z "$prev" ] || growth=$(awk -v a="$prev" -v b="$secs" 'BEGIN { if (a > 0) printf "%.1fx", b / a }')
        printf '%-9s %8s %8s %10s %10s %8s\n' "$family" "$n" "$nodes" "$secs" "$((kib / 1024))" "$growth"
        sed -n '2,$ s/^/      /p' "$WORK/stages"
        prev="$secs"
    done
done

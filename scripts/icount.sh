#!/usr/bin/env bash
# Instructions and heap allocations per operation of the rewrite hot path, deterministic
# (valgrind), unlike wall-clock benches on a shared machine. Each case runs N and 2N times;
# the difference divided by N is the per-operation cost, start-up excluded.
# Usage: scripts/icount.sh [CASE...]   (default: all cases)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --profile bench -q -p autoprep-benches --example icount
bin=target/release/examples/icount
N=2000
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(normalize_150b normalize_1k normalize_150b_reused normalize_1k_reused encode_row hit_path)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
irs() { valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" "$bin" "$1" "$2" 2>&1 \
    | sed -n 's/.*Collected : *\([0-9]*\).*/\1/p'; }
allocs() { valgrind --tool=dhat --dhat-out-file=/dev/null "$bin" "$1" "$2" 2>&1 \
    | sed -n 's/.*Total: *[0-9,]* bytes in \([0-9,]*\) blocks.*/\1/p' | tr -d ,; }
printf '%-22s %14s %12s\n' case instructions allocations
for c in "${cases[@]}"; do
    i1=$(irs "$c" $N); i2=$(irs "$c" $((2 * N)))
    a1=$(allocs "$c" $N); a2=$(allocs "$c" $((2 * N)))
    printf '%-22s %14s %12s\n' "$c" $(((i2 - i1) / N)) \
        "$(awk -v a="$a1" -v b="$a2" -v n=$N 'BEGIN { printf "%.2f", (b - a) / n }')"
done

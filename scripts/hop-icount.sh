#!/usr/bin/env bash
# Instructions autoprep spends per request it forwards, deterministic (callgrind): a passed-through
# EXECUTE and a rewritten QUERY (see benches/examples/hop_icount.rs). For each kind the example
# runs N and 2N requests through autoprep and directly to its stand-in node; only the function
# `hop_icount::measured` is counted (--toggle-collect). Per request: (2N - N) / N; autoprep's own:
# through autoprep less directly.
# Usage: scripts/hop-icount.sh [KIND...]   (execute, query; default both)
#        N=6400 (a multiple of 64) sets the smaller run; VERBOSE=1 prints every run's count.
#        TRACING=RATIO turns request tracing on, sampling RATIO of the requests (0 to 1), spans
#        exported over http/protobuf to a port nobody listens on (the export, on its own
#        thread, is not counted: the requests' path is).
# With a target dir shared by several checkouts of the workspace, cargo may count another
# checkout's compiled crate as fresh (its artifacts are named by the path relative to the
# workspace): every source file the measured code ran is compared with this checkout's, and a
# difference stops the script.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v valgrind >/dev/null; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update && $sudo apt-get install -y valgrind
fi
target=${CARGO_TARGET_DIR:-target}
if [ -n "${TRACING:-}" ]; then
    export OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:9 OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf
    export OTEL_TRACES_SAMPLER=traceidratio OTEL_TRACES_SAMPLER_ARG=$TRACING
fi
start=$(date +%s)
cargo build --release -q -p autoprep-benches --example hop_icount
echo "build: $(($(date +%s) - start)) s" >&2
bin=$target/release/examples/hop_icount
N=${N:-6400}
kinds=("$@")
[ ${#kinds[@]} -gt 0 ] || kinds=(execute query)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The workspace's source files a callgrind output names that differ from this checkout's.
foreign_sources() {
    sed -n 's/^f[lie]=([0-9]*) //p' "$1" | sort -u |
        { grep -E '/(crates/(protocol|cache|routing|server-metrics|proxy)|benches)/' || true; } |
        while read -r f; do
            case $f in "$PWD"/*) continue ;; esac
            rel=$(sed -E 's#^.*/((crates/[a-z-]+|benches)/.*)$#\1#' <<<"$f")
            cmp -s "$f" "$rel" || echo "$f"
        done
}
# Instructions of the measured region of one run: KIND TARGET COUNT.
irs() {
    local out foreign
    out=$(valgrind --tool=callgrind --collect-atstart=no --toggle-collect='hop_icount::measured' \
        --callgrind-out-file="$tmp/cg" "$bin" "$@" 2>&1) || { echo "$out" >&2; exit 1; }
    foreign=$(foreign_sources "$tmp/cg")
    if [ -n "$foreign" ]; then
        printf 'built from sources of another checkout that differ from this one'"'"'s:\n%s\n' \
            "$foreign" >&2
        echo "rebuild with a target dir of this checkout's own: CARGO_TARGET_DIR=$PWD/.cache/target $0" >&2
        exit 1
    fi
    local ir
    ir=$(sed -n 's/.*Collected : *\([0-9]*\).*/\1/p' <<<"$out")
    [ -z "${VERBOSE:-}" ] || echo "  $*: $ir instructions" >&2
    echo "$ir"
}
# Instructions per request of KIND to TARGET, start-up and first-batch effects excluded.
per() {
    local a b
    a=$(irs "$1" "$2" "$N")
    b=$(irs "$1" "$2" $((2 * N)))
    awk -v a="$a" -v b="$b" -v n="$N" 'BEGIN { printf "%.1f", (b - a) / n }'
}
printf '%-8s %16s %12s %12s\n' kind through-autoprep direct autoprep
for k in "${kinds[@]}"; do
    p=$(per "$k" proxy)
    d=$(per "$k" direct)
    printf '%-8s %16s %12s %12s\n' "$k" "$p" "$d" "$(awk -v p="$p" -v d="$d" 'BEGIN { printf "%.1f", p - d }')"
done

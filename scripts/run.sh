#!/usr/bin/env bash
# Run autoprep for real.
#
#   scripts/run.sh                          start a local Cassandra (scripts/cassandra.sh) and
#                                           run autoprep in front of it on 127.0.0.1:9043
#   scripts/run.sh --upstream HOST:PORT     run autoprep in front of an existing node
#
# Every other argument goes to autoprep (see `autoprep --help`); AUTOPREP_* variables work too.
set -euo pipefail
REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_DIR"

have_upstream=0
for a in "$@"; do
    case "$a" in --upstream|--upstream=*) have_upstream=1 ;; esac
done
[[ -n "${AUTOPREP_UPSTREAM:-}" ]] && have_upstream=1

args=("$@")
if [[ $have_upstream == 0 ]]; then
    bash scripts/cassandra.sh start
    args+=(--upstream "${CASSANDRA_LISTEN:-127.0.0.1}:${CASSANDRA_NATIVE_PORT:-9042}")
fi
cargo build --release -p autoprep
exec "$REPO_DIR/target/release/autoprep" "${args[@]}"

#!/usr/bin/env bash
# Run autoprep for real.
#
#   scripts/run.sh                          start a local Cassandra (scripts/cassandra.sh) and
#                                           run autoprep in front of it on 127.0.0.1:9043, with
#                                           its admin endpoint on 127.0.0.1:9100
#   scripts/run.sh --upstream HOST:PORT     run autoprep in front of an existing node
#
# Every other argument goes to autoprep (see `autoprep --help`); AUTOPREP_* variables work too.
set -euo pipefail
REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_DIR"

have_upstream=0
have_admin=0
for a in "$@"; do
    case "$a" in
        --upstream|--upstream=*) have_upstream=1 ;;
        --admin|--admin=*) have_admin=1 ;;
    esac
done
[[ -n "${AUTOPREP_UPSTREAM:-}" ]] && have_upstream=1
[[ -n "${AUTOPREP_ADMIN:-}" ]] && have_admin=1

args=("$@")
if [[ $have_upstream == 0 ]]; then
    bash scripts/cassandra.sh start
    args+=(--upstream "${CASSANDRA_LISTEN:-127.0.0.1}:${CASSANDRA_NATIVE_PORT:-9042}")
fi
# The admin endpoint (/metrics, /ready, /shapes) on 127.0.0.1:9100 unless told otherwise.
[[ $have_admin == 0 ]] && args+=(--admin 127.0.0.1:9100)
cargo build --release -p autoprep
exec "$REPO_DIR/target/release/autoprep" "${args[@]}"

#!/usr/bin/env bash
# Run autoprep for real.
#
#   scripts/run.sh                          start a local Cassandra (scripts/cassandra.sh, with
#                                           its metrics endpoint on port 7070) and run autoprep
#                                           in front of it on 127.0.0.1:9043, with its admin
#                                           endpoint on 127.0.0.1:9100 and the estimate of
#                                           server CPU saved read from the node
#   scripts/run.sh --upstream HOST:PORT     run autoprep in front of an existing node
#
# Every other argument goes to autoprep (see `autoprep --help` and CONFIG.md); AUTOPREP_*
# variables and a --config file work too.
set -euo pipefail
REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_DIR"

cargo build --release -p autoprep
bin="$REPO_DIR/target/release/autoprep"
# Ask autoprep itself which options the arguments, AUTOPREP_* variables and a --config file
# leave at their defaults (a configuration error is reported here, exit code 64).
effective="$("$bin" --print-config "$@")"

args=("$@")
if grep -q '^upstream = .*# default$' <<<"$effective"; then
    export CASSANDRA_METRICS_PORT="${CASSANDRA_METRICS_PORT:-7070}"
    bash scripts/cassandra.sh start
    args+=(--upstream "${CASSANDRA_LISTEN:-127.0.0.1}:${CASSANDRA_NATIVE_PORT:-9042}")
    # The node's CPU, for autoprep_server_cpu_saved_seconds_total, unless told otherwise.
    grep -q '^# server_metrics_url is unset  (default)$' <<<"$effective" &&
        args+=(--server-metrics-url "http://{host}:$CASSANDRA_METRICS_PORT/metrics")
fi
# The admin endpoint (/metrics, /ready, /shapes) on 127.0.0.1:9100 unless told otherwise.
grep -q '^# admin is unset  (default)$' <<<"$effective" && args+=(--admin 127.0.0.1:9100)
exec "$bin" "${args[@]}"

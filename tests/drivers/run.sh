#!/usr/bin/env bash
# The driver matrix (issue 8): each driver's small legacy workload through one autoprep, with the
# same workload run directly against the server as a control.
#
#   tests/drivers/run.sh              every driver
#   tests/drivers/run.sh rust go      only these (drivers: rust go java node)
#
# Starts one autoprep (AUTOPREP_BIN, or target/debug/autoprep built by cargo) with --admin in
# front of AUTOPREP_TEST_UPSTREAM (host:port) or the node `scripts/cassandra.sh start` starts or
# reuses on 127.0.0.1:9042, and gives every driver program:
#   AUTOPREP_DRIVER_TARGET    autoprep's CQL address, host:port
#   AUTOPREP_DRIVER_ADMIN     autoprep's admin address (/metrics, /shapes), host:port
#   AUTOPREP_DRIVER_UPSTREAM  the server itself, host:port (the direct control; also exported
#                             as AUTOPREP_DRIVER_DIRECT, the name tests/drivers/lib uses)
#   AUTOPREP_DRIVER_LOG_DIR   where they may write transcripts and logs
# Drivers run one after another (each checks that autoprep's connection count is its own).
# autoprep's log goes to AUTOPREP_DRIVER_LOG_DIR [.cache/drivers].
#
# To add a driver: write driver_NAME (builds and runs its program, returns its status; it runs
# inside `if`, so `set -e` is off there: end each step with `|| return`) and add NAME to DRIVERS.
set -euo pipefail

REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO_DIR"
DRIVERS_DIR="$REPO_DIR/tests/drivers"

DRIVERS=(rust go java node)

# Go lives in /usr/local/go on these machines; a non-login shell may not have it on PATH.
command -v go >/dev/null || PATH="$PATH:/usr/local/go/bin"

log() { printf '[drivers] %s\n' "$*"; }

# --- drivers ---------------------------------------------------------------------------------

# Rust `scylla` crate: a Cargo project of its own (not in the main workspace), built into
# tests/drivers/rust/target.
driver_rust() {
    local cargo_args=(-q --manifest-path "$DRIVERS_DIR/rust/Cargo.toml" --target-dir "$DRIVERS_DIR/rust/target")
    cargo test "${cargo_args[@]}" || return
    cargo build "${cargo_args[@]}" || return
    "$DRIVERS_DIR/rust/target/debug/autoprep-driver-rust"
}

# gocql (github.com/apache/cassandra-gocql-driver/v2): a Go module of its own.
driver_go() {
    (cd "$DRIVERS_DIR/go" && go vet . && go test . && go build -o "$LOG_DIR/autoprep-driver-go" .) || return
    "$LOG_DIR/autoprep-driver-go"
}

# The Java driver 4.x and the Node.js cassandra-driver: their entry scripts build (Maven, npm ci)
# and run against the proxy started here (tests/drivers/lib/standalone.sh sees the target set).
driver_java() { bash "$DRIVERS_DIR/java/run.sh"; }
driver_node() { bash "$DRIVERS_DIR/node/run.sh"; }

# --- autoprep --------------------------------------------------------------------------------

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

AUTOPREP_PID=""
stop_autoprep() {
    if [[ -n "$AUTOPREP_PID" ]] && kill -0 "$AUTOPREP_PID" 2>/dev/null; then
        kill -TERM "$AUTOPREP_PID" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$AUTOPREP_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$AUTOPREP_PID" 2>/dev/null || true
        wait "$AUTOPREP_PID" 2>/dev/null || true
    fi
    AUTOPREP_PID=""
}
trap stop_autoprep EXIT

# --- main ------------------------------------------------------------------------------------

selected=("$@")
[[ ${#selected[@]} -gt 0 ]] || selected=("${DRIVERS[@]}")
for d in "${selected[@]}"; do
    declare -F "driver_$d" >/dev/null || { echo "run.sh: unknown driver '$d' (known: ${DRIVERS[*]})" >&2; exit 64; }
done

if [[ -n "${AUTOPREP_TEST_UPSTREAM:-}" ]]; then
    upstream="$AUTOPREP_TEST_UPSTREAM"
else
    bash scripts/cassandra.sh start
    upstream="127.0.0.1:9042"
fi

if [[ -z "${AUTOPREP_BIN:-}" ]]; then
    cargo build -q -p autoprep
    AUTOPREP_BIN="$REPO_DIR/target/debug/autoprep"
fi
LOG_DIR="${AUTOPREP_DRIVER_LOG_DIR:-$REPO_DIR/.cache/drivers}"
mkdir -p "$LOG_DIR"
autoprep_log="$LOG_DIR/autoprep.log"

cql_port="$(free_port)"
admin_port="$(free_port)"
export AUTOPREP_DRIVER_TARGET="127.0.0.1:$cql_port"
export AUTOPREP_DRIVER_ADMIN="127.0.0.1:$admin_port"
export AUTOPREP_DRIVER_UPSTREAM="$upstream"
export AUTOPREP_DRIVER_DIRECT="$upstream"
export AUTOPREP_DRIVER_LOG_DIR="$LOG_DIR"

NO_COLOR=1 RUST_BACKTRACE=1 "$AUTOPREP_BIN" --listen "$AUTOPREP_DRIVER_TARGET" \
    --upstream "$upstream" --admin "$AUTOPREP_DRIVER_ADMIN" --log "${AUTOPREP_TEST_LOG:-info}" \
    >"$autoprep_log" 2>&1 &
AUTOPREP_PID=$!
ready=""
for _ in $(seq 300); do
    kill -0 "$AUTOPREP_PID" 2>/dev/null || break
    if curl -fsS -o /dev/null "http://$AUTOPREP_DRIVER_ADMIN/ready" 2>/dev/null; then ready=1; break; fi
    sleep 0.1
done
if [[ -z "$ready" ]]; then
    log "autoprep did not become ready; its log:"
    tail -n 40 "$autoprep_log"
    exit 1
fi
log "autoprep pid $AUTOPREP_PID on $AUTOPREP_DRIVER_TARGET (admin $AUTOPREP_DRIVER_ADMIN) in front of $upstream; log $autoprep_log"

passed=()
failed=()
for d in "${selected[@]}"; do
    printf '\n[drivers] --- %s ---\n' "$d"
    t0=$SECONDS
    if "driver_$d"; then passed+=("$d"); else failed+=("$d"); fi
    log "$d: $((SECONDS - t0)) s"
done

alive=1
kill -0 "$AUTOPREP_PID" 2>/dev/null || alive=""
stop_autoprep
if [[ -z "$alive" ]]; then
    log "autoprep exited during the run; its log:"; tail -n 40 "$autoprep_log"
    failed+=("autoprep-exited")
fi
if grep -q panicked "$autoprep_log"; then
    log "autoprep panicked; its log:"; grep -n -A5 panicked "$autoprep_log" | head -40
    failed+=("autoprep-panicked")
fi

echo
log "passed: ${passed[*]:-none}; failed: ${failed[*]:-none}"
echo "drivers: ${#passed[@]} passed, ${#failed[@]} failed"
[[ ${#failed[@]} -eq 0 ]]

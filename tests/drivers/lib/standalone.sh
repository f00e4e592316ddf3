# shellcheck shell=bash
# Sourced by a driver's entry script (tests/drivers/<driver>/run.sh): makes sure an autoprep
# proxy is there to test through, and exports where it is.
#
# With AUTOPREP_DRIVER_TARGET set (the shared runner tests/drivers/run.sh started the proxy), it
# only fills in the defaults. Unset, it starts an autoprep of its own, in front of
# AUTOPREP_TEST_UPSTREAM or the local node (`scripts/cassandra.sh start`, which reuses a running
# one), on free loopback ports with its admin endpoint, and stops it when the script exits.
#
# Exports:
#   AUTOPREP_DRIVER_TARGET  host:port of autoprep's CQL listener
#   AUTOPREP_DRIVER_ADMIN   host:port of autoprep's admin HTTP server (/metrics)
#   AUTOPREP_DRIVER_DIRECT  host:port of the Cassandra node itself (the control runs there)
# Reads: AUTOPREP_BIN (the proxy binary; built with cargo when unset), AUTOPREP_TEST_LOG (its
# --log filter, default info).

drivers_free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

drivers_ensure_target() {
    local repo="$1"
    if [[ -z "${AUTOPREP_DRIVER_DIRECT:-}" ]]; then
        if [[ -n "${AUTOPREP_TEST_UPSTREAM:-}" ]]; then
            AUTOPREP_DRIVER_DIRECT="$AUTOPREP_TEST_UPSTREAM"
        else
            AUTOPREP_DRIVER_DIRECT="127.0.0.1:9042"
        fi
    fi
    export AUTOPREP_DRIVER_DIRECT
    if [[ -n "${AUTOPREP_DRIVER_TARGET:-}" ]]; then
        [[ -n "${AUTOPREP_DRIVER_ADMIN:-}" ]] ||
            echo "drivers: AUTOPREP_DRIVER_ADMIN is unset; the metrics check will fail" >&2
        return 0
    fi

    if [[ -z "${AUTOPREP_TEST_UPSTREAM:-}" ]]; then
        bash "$repo/scripts/cassandra.sh" start >&2
    fi
    if [[ -z "${AUTOPREP_BIN:-}" ]]; then
        (cd "$repo" && cargo build -q -p autoprep)
        AUTOPREP_BIN="$repo/target/debug/autoprep"
    fi
    local port admin log
    port="$(drivers_free_port)"
    admin="$(drivers_free_port)"
    log="$(mktemp -t autoprep-drivers.XXXXXX.log)"
    NO_COLOR=1 "$AUTOPREP_BIN" --listen "127.0.0.1:$port" --admin "127.0.0.1:$admin" \
        --upstream "$AUTOPREP_DRIVER_DIRECT" --log "${AUTOPREP_TEST_LOG:-info}" >"$log" 2>&1 &
    DRIVERS_PROXY_PID=$!
    DRIVERS_PROXY_LOG="$log"
    trap drivers_stop_proxy EXIT
    local i
    for ((i = 0; i < 300; i++)); do
        if ! kill -0 "$DRIVERS_PROXY_PID" 2>/dev/null; then
            echo "drivers: autoprep exited before it was ready:" >&2
            tail -20 "$log" >&2
            return 1
        fi
        if curl -fsS -o /dev/null "http://127.0.0.1:$admin/ready" 2>/dev/null; then
            export AUTOPREP_DRIVER_TARGET="127.0.0.1:$port" AUTOPREP_DRIVER_ADMIN="127.0.0.1:$admin"
            echo "drivers: autoprep (pid $DRIVERS_PROXY_PID) on $AUTOPREP_DRIVER_TARGET," \
                "admin $AUTOPREP_DRIVER_ADMIN, upstream $AUTOPREP_DRIVER_DIRECT, log $log" >&2
            return 0
        fi
        sleep 0.1
    done
    echo "drivers: autoprep was not ready within 30 s:" >&2
    tail -20 "$log" >&2
    return 1
}

# Stops the proxy drivers_ensure_target started (by its pid), and fails loudly if it panicked.
drivers_stop_proxy() {
    local rc=$?
    if [[ -n "${DRIVERS_PROXY_PID:-}" ]]; then
        if kill -0 "$DRIVERS_PROXY_PID" 2>/dev/null; then
            kill "$DRIVERS_PROXY_PID" 2>/dev/null || true
            wait "$DRIVERS_PROXY_PID" 2>/dev/null || true
        else
            echo "drivers: autoprep had exited early" >&2
            rc=1
        fi
        if grep -q panicked "$DRIVERS_PROXY_LOG"; then
            echo "drivers: autoprep panicked:" >&2
            tail -40 "$DRIVERS_PROXY_LOG" >&2
            rc=1
        fi
        if [[ $rc == 0 ]]; then
            rm -f "$DRIVERS_PROXY_LOG"
        else
            echo "drivers: autoprep's log is $DRIVERS_PROXY_LOG" >&2
        fi
        DRIVERS_PROXY_PID=""
    fi
    exit "$rc"
}

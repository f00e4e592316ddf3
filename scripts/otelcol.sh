#!/usr/bin/env bash
# A small OpenTelemetry Collector for autoprep's tracing tests: the OTLP receiver (gRPC and
# HTTP/protobuf) and the file exporter, built from the collector's Go modules (the Go module
# proxy) by scripts/otelcol/main.go, once, into .cache/otelcol/.
#
#   scripts/otelcol.sh build                 build it (a no-op once built)
#   scripts/otelcol.sh start DIR GRPC HTTP   run it on 127.0.0.1:GRPC and 127.0.0.1:HTTP, spans
#                                            written to DIR/spans.json (OTLP JSON, one request a
#                                            line), its log to DIR/otelcol.log, pid DIR/otelcol.pid
#   scripts/otelcol.sh stop DIR              stop the one started in DIR
#
# Loopback only; the collector's own telemetry is off (no port of its own).
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${AUTOPREP_CACHE_DIR:-$REPO/.cache}/otelcol"
BIN="$CACHE/autoprep-otelcol"

build() {
    local src="$REPO/scripts/otelcol"
    if [[ -x "$BIN" && "$BIN" -nt "$src/main.go" && "$BIN" -nt "$src/go.mod" ]]; then
        return 0
    fi
    command -v go >/dev/null || { echo "otelcol.sh: go is not installed" >&2; exit 1; }
    mkdir -p "$CACHE/src"
    cp "$src/main.go" "$src/go.mod" "$src/go.sum" "$CACHE/src/"
    echo "otelcol.sh: building the collector (first time: a few minutes)" >&2
    (cd "$CACHE/src" && nice -n 10 go build -mod=mod -o "$BIN.tmp" . && mv "$BIN.tmp" "$BIN")
}

start() {
    local dir="$1" grpc="$2" http="$3"
    build
    mkdir -p "$dir"
    cat > "$dir/config.yaml" <<YAML
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:$grpc
      http:
        endpoint: 127.0.0.1:$http
exporters:
  file:
    path: $dir/spans.json
    flush_interval: 100ms
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [file]
YAML
    "$BIN" --config "$dir/config.yaml" > "$dir/otelcol.log" 2>&1 &
    echo $! > "$dir/otelcol.pid"
    for _ in $(seq 1 200); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$grpc") 2>/dev/null && (exec 3<>"/dev/tcp/127.0.0.1/$http") 2>/dev/null; then
            return 0
        fi
        if ! kill -0 "$(cat "$dir/otelcol.pid")" 2>/dev/null; then
            echo "otelcol.sh: the collector exited:" >&2
            tail -20 "$dir/otelcol.log" >&2
            exit 1
        fi
        sleep 0.1
    done
    echo "otelcol.sh: the collector did not listen within 20 s" >&2
    exit 1
}

stop() {
    local dir="$1" pid
    pid="$(cat "$dir/otelcol.pid" 2>/dev/null || true)"
    [[ -n "$pid" ]] || return 0
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    rm -f "$dir/otelcol.pid"
}

case "${1:-}" in
    build) build ;;
    start) start "$2" "$3" "$4" ;;
    stop) stop "$2" ;;
    *) echo "usage: $0 build | start DIR GRPC_PORT HTTP_PORT | stop DIR" >&2; exit 64 ;;
esac

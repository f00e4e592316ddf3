#!/usr/bin/env bash
# A local three-node, two-datacenter Apache Cassandra cluster for autoprep's multi-node tests,
# without Docker. Each node is a scripts/cassandra.sh node of its own name, loopback address and
# JMX port (native port 9042 and storage port 7000 on every address), GossipingPropertyFileSnitch:
#
#   node 1  cluster-n1  127.0.0.41  dc1 r1  jmx 7441  (the seed)
#   node 2  cluster-n2  127.0.0.42  dc1 r2  jmx 7442
#   node 3  cluster-n3  127.0.0.43  dc2 r1  jmx 7443
#
#   scripts/cluster.sh start             install if needed, start every node that does not answer
#                                        CQL yet, one after another (each bootstraps and is UN on
#                                        the seed before the next starts), then wait until every
#                                        node answers CQL and sees all three UN in nodetool status;
#                                        running nodes are reused
#   scripts/cluster.sh stop              stop all nodes at once (SIGTERM, SIGKILL after
#                                        AUTOPREP_CLUSTER_STOP_TIMEOUT seconds)
#   scripts/cluster.sh status            each node's state and the seed's nodetool status;
#                                        exit 0 when all three answer CQL
#   scripts/cluster.sh info              print the nodes: number, name, address, dc, rack, ports,
#                                        pid, directory (one line each, tab-separated after a header)
#   scripts/cluster.sh nodetool <n> …    run nodetool against node n (1-3)
#   scripts/cluster.sh cqlsh <n> …       run cqlsh (<repo>/.venv, scripts/venv.sh) on node n
#   scripts/cluster.sh logs <n> [lines]  tail node n's system.log
#   scripts/cluster.sh kill <n>          SIGKILL node n (a crash); returns when the JVM is gone
#                                        (the others still see it UN for several seconds)
#   scripts/cluster.sh wait-down <n>     wait until every live node sees the dead node n DN
#   scripts/cluster.sh stop-node <n>     stop node n gracefully (SIGTERM, drains)
#   scripts/cluster.sh start-node <n>    start node n (after kill or stop-node, or a new node) and
#                                        wait until it answers CQL and every live node sees it UN
#   scripts/cluster.sh wipe              stop all nodes and delete their directories
#
# Measured on a 2-core machine with other work running (load 3-6): start from nothing 39-54 s
# (node 1 6-9 s, nodes 2 and 3 15-20 s each: bootstrap, then all-UN checks), start of a stopped
# cluster 30-37 s, of a running one 2-3 s; stop 14-15 s (each drain waits for the callbacks of
# requests to the peers stopping with it); kill 1.5-2 s; start-node 13-15 s; a killed node is
# DN on the others 15-20 s later; about 920 MiB RSS per node.
#
# Environment (defaults in brackets):
#   AUTOPREP_CLUSTER_NODES       [127.0.0.41,127.0.0.42,127.0.0.43]  listen/rpc addresses of
#                                                 nodes 1, 2, 3 (dc1 r1, dc1 r2, dc2 r1)
#   AUTOPREP_CLUSTER_JMX_PORTS   [7441,7442,7443] JMX binds 127.0.0.1: unique on the machine
#   AUTOPREP_CLUSTER_PREFIX      [cluster]        node directory names <prefix>-n1 … -n3
#   AUTOPREP_CLUSTER_NAME        [autoprep-cluster]
#   AUTOPREP_CLUSTER_NATIVE_PORT [9042]           AUTOPREP_CLUSTER_STORAGE_PORT [7000]
#   AUTOPREP_CLUSTER_DCS         [dc1,dc1,dc2]    the datacenters of nodes 1, 2, 3 (dc1,dc1,dc1: one
#                                                 datacenter); only a new (wiped) node takes a new one
#   AUTOPREP_CLUSTER_NUM_TOKENS  [16]             vnodes per node (random tokens); 1: one token per
#                                                 node, evenly spaced, node 1 at the minimum token
#                                                 (-2^63; then -2^63 + 2^64/3, -2^63 + 2*2^64/3);
#                                                 only a new (wiped) node takes a new value
#   AUTOPREP_CLUSTER_HEAP        [512M]
#   AUTOPREP_CLUSTER_JVM_OPTS    [-XX:TieredStopAtLevel=1]  CASSANDRA_JVM_OPTS of every node: C1
#                                                 only takes about 40% less CPU to start (steady
#                                                 state is slower; set it empty for C2)
#   AUTOPREP_CLUSTER_RING_DELAY_MS [3000]         a joining node must hear the seed within this,
#                                                 and sleeps it once while bootstrapping
#   AUTOPREP_CLUSTER_START_TIMEOUT [180]          seconds per node (CQL) and for the UN wait
#   AUTOPREP_CLUSTER_STOP_TIMEOUT  [30]           seconds
#   AUTOPREP_CACHE_DIR, CASSANDRA_VERSION, JAVA_HOME, CASSANDRA_AUTH, CASSANDRA_CLIENT_TLS_*,
#   CASSANDRA_PREPARED_CACHE, CASSANDRA_AUDIT,
#   CASSANDRA_METRICS_PORT                        passed on to scripts/cassandra.sh (every node: each
#                                                 serves its metrics on its own address)
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
NODE_SCRIPT="$SCRIPT_DIR/cassandra.sh"

CACHE_DIR="${AUTOPREP_CACHE_DIR:-$REPO_DIR/.cache}"
IFS=, read -r -a ADDRS <<<"${AUTOPREP_CLUSTER_NODES:-127.0.0.41,127.0.0.42,127.0.0.43}"
IFS=, read -r -a JMX_PORTS <<<"${AUTOPREP_CLUSTER_JMX_PORTS:-7441,7442,7443}"
PREFIX="${AUTOPREP_CLUSTER_PREFIX:-cluster}"
CLUSTER_NAME="${AUTOPREP_CLUSTER_NAME:-autoprep-cluster}"
NATIVE_PORT="${AUTOPREP_CLUSTER_NATIVE_PORT:-9042}"
STORAGE_PORT="${AUTOPREP_CLUSTER_STORAGE_PORT:-7000}"
NUM_TOKENS="${AUTOPREP_CLUSTER_NUM_TOKENS:-16}"
HEAP="${AUTOPREP_CLUSTER_HEAP:-512M}"
JVM_OPTS="${AUTOPREP_CLUSTER_JVM_OPTS--XX:TieredStopAtLevel=1}"
RING_DELAY_MS="${AUTOPREP_CLUSTER_RING_DELAY_MS:-3000}"
START_TIMEOUT="${AUTOPREP_CLUSTER_START_TIMEOUT:-180}"
STOP_TIMEOUT="${AUTOPREP_CLUSTER_STOP_TIMEOUT:-30}"

# The topology: node i is in DCS[i], RACKS[i]. Node 1 is the only seed; the others bootstrap.
IFS=, read -r -a DCS <<<"${AUTOPREP_CLUSTER_DCS:-dc1,dc1,dc2}"
RACKS=(r1 r2 r1)
N=3

log() { printf '[cluster.sh] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
((${#DCS[@]} == 3)) || die "AUTOPREP_CLUSTER_DCS must name three datacenters (one per node)"
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

ADDRS=("${ADDRS[@]// /}")
(( ${#ADDRS[@]} == N )) || die "AUTOPREP_CLUSTER_NODES must list $N addresses, not '${AUTOPREP_CLUSTER_NODES:-}'"
(( ${#JMX_PORTS[@]} == N )) || die "AUTOPREP_CLUSTER_JMX_PORTS must list $N ports"
SEED="${ADDRS[0]}:$STORAGE_PORT"
LOCK_FILE="$CACHE_DIR/cassandra-nodes/.$PREFIX.lock"

node_name() { echo "$PREFIX-n$1"; }
node_dir() { echo "$CACHE_DIR/cassandra-nodes/$(node_name "$1")"; }
check_n() {
    [[ "${1:-}" =~ ^[1-9][0-9]*$ ]] && (( $1 <= N )) || die "node number must be 1-$N, not '${1:-}'"
}

initial_token() {   # node n's token with one token per node: evenly spaced from the minimum
    [[ "$NUM_TOKENS" == 1 ]] || return 0
    python3 -c 'import sys; n = int(sys.argv[1]); print(-2**63 + (n - 1) * (2**64 // 3))' "$1"
}

node_sh() {   # node_sh <n> <cassandra.sh arguments…>: cassandra.sh with node n's settings
    local n="$1"; shift
    local i=$(( n - 1 ))
    CASSANDRA_NODE="$(node_name "$n")" \
    CASSANDRA_LISTEN="${ADDRS[i]}" \
    CASSANDRA_NATIVE_PORT="$NATIVE_PORT" \
    CASSANDRA_STORAGE_PORT="$STORAGE_PORT" \
    CASSANDRA_JMX_PORT="${JMX_PORTS[i]}" \
    CASSANDRA_SEEDS="$SEED" \
    CASSANDRA_CLUSTER_NAME="$CLUSTER_NAME" \
    CASSANDRA_DC="${DCS[i]}" \
    CASSANDRA_RACK="${RACKS[i]}" \
    CASSANDRA_NUM_TOKENS="$NUM_TOKENS" \
    CASSANDRA_INITIAL_TOKEN="$(initial_token "$n")" \
    CASSANDRA_HEAP="$HEAP" \
    CASSANDRA_JVM_OPTS="$JVM_OPTS" \
    CASSANDRA_RING_DELAY_MS="$RING_DELAY_MS" \
    CASSANDRA_START_TIMEOUT="$START_TIMEOUT" \
    CASSANDRA_STOP_TIMEOUT="$STOP_TIMEOUT" \
    "$NODE_SCRIPT" "$@" 7>&-    # 7>&-: a node's JVM must not inherit (and hold) the cluster lock
}

node_pid() {   # the pid of node n's JVM if alive (checked to be a Cassandra of its directory)
    local pid_file pid
    pid_file="$(node_dir "$1")/cassandra.pid"
    [[ -f "$pid_file" ]] || return 0
    pid="$(tr -dc '0-9' <"$pid_file")"
    [[ -n "$pid" && -r "/proc/$pid/cmdline" ]] || return 0
    if tr '\0' ' ' <"/proc/$pid/cmdline" \
            | grep -F -- "-Dcassandra.storagedir=$(node_dir "$1") " \
            | grep -q 'org.apache.cassandra.service.CassandraDaemon'; then
        echo "$pid"
    fi
}

answers() { node_sh "$1" status >/dev/null 2>&1; }   # node n answers a CQL OPTIONS request

lock() {
    mkdir -p "$(dirname "$LOCK_FILE")"
    exec 7>"$LOCK_FILE"
    flock -w 900 7 || die "another scripts/cluster.sh has held $LOCK_FILE for 15 minutes"
}

# --- ring membership ----------------------------------------------------------------------------
# in_view <observer> <state> <n…>: exit 0 when nodetool status on the observer shows every
# node n in state (UN: up and normal; DN: down).
in_view() {
    local observer="$1" state="$2"; shift 2
    local out n
    # C1 and the serial collector: a polling nodetool JVM starts about 0.5 s sooner.
    out="$(JAVA_TOOL_OPTIONS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC" \
        node_sh "$observer" nodetool status 2>/dev/null)" || return 1
    for n in "$@"; do
        grep -Eq "^$state +${ADDRS[n-1]//./\\.} " <<<"$out" || return 1
    done
}

# wait_state <"observers"> <state> <n…>: wait until every observer sees every node n in state
# (observers polled in parallel: each nodetool is a JVM of its own, 1-4 s).
wait_state() {
    local -a observers
    read -r -a observers <<<"$1"
    local state="$2"; shift 2
    local deadline=$(( $(date +%s) + START_TIMEOUT ))
    local i
    local -a pids pending
    while :; do
        pids=()
        for i in "${!observers[@]}"; do
            in_view "${observers[i]}" "$state" "$@" &
            pids[i]=$!
        done
        pending=()
        for i in "${!observers[@]}"; do
            wait "${pids[i]}" || pending+=("${observers[i]}")
        done
        (( ${#pending[@]} == 0 )) && return 0
        if (( $(date +%s) >= deadline )); then
            node_sh "${pending[0]}" nodetool status >&2 || true
            die "after ${START_TIMEOUT}s node(s) ${pending[*]} still do not see node(s) $* $state"
        fi
        observers=("${pending[@]}")
        sleep 1
    done
}

live_nodes() {   # the numbers of the nodes that answer CQL, space-separated
    local n out=()
    for n in $(seq 1 $N); do
        answers "$n" && out+=("$n")
    done
    echo "${out[*]}"
}

# --- commands -----------------------------------------------------------------------------------
cmd_start() {
    local t0 n started=0
    t0="$(now)"
    "$NODE_SCRIPT" install
    lock
    for n in $(seq 1 $N); do
        if answers "$n"; then
            log "node $n ($(node_name "$n"), ${ADDRS[n-1]}) already answers CQL; reusing it"
            continue
        fi
        local t1
        t1="$(now)"
        node_sh "$n" start
        started=$(( started + 1 ))
        # The next node must not bootstrap while the seed still sees this one joining.
        if (( n < N )) && (( n > 1 )); then
            wait_state 1 UN "$n"
        fi
        log "node $n (${ADDRS[n-1]} ${DCS[n-1]} ${RACKS[n-1]}) up in $(since "$t1") s"
    done
    wait_state "$(seq -s ' ' 1 $N)" UN $(seq 1 $N)
    log "cluster $CLUSTER_NAME up ($started node(s) started, all $N UN) in $(since "$t0") s"
}

cmd_start_node() {
    check_n "${1:-}"
    local n="$1" t0
    t0="$(now)"
    lock
    node_sh "$n" start
    local -a live
    read -r -a live <<<"$(live_nodes)"
    wait_state "${live[*]}" UN "$n"
    log "node $n (${ADDRS[n-1]}) up and UN on node(s) ${live[*]} in $(since "$t0") s"
}

cmd_stop() {
    local t0 n
    t0="$(now)"
    lock
    local -a pids=()
    for n in $(seq 1 $N); do
        node_sh "$n" stop &
        pids+=($!)
    done
    local rc=0
    for n in "${pids[@]}"; do
        wait "$n" || rc=1
    done
    (( rc == 0 )) || die "stopping a node failed"
    log "cluster stopped in $(since "$t0") s"
}

cmd_stop_node() {
    check_n "${1:-}"
    lock
    node_sh "$1" stop
}

cmd_kill() {
    check_n "${1:-}"
    local n="$1" pid
    pid="$(node_pid "$n")"
    if [[ -z "$pid" ]]; then
        log "node $n is not running"
        rm -f "$(node_dir "$n")/cassandra.pid"
        return 0
    fi
    kill -KILL "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
    rm -f "$(node_dir "$n")/cassandra.pid"
    log "node $n (${ADDRS[n-1]}, pid $pid) killed"
}

cmd_wait_down() {
    check_n "${1:-}"
    local n="$1" t0
    t0="$(now)"
    [[ -z "$(node_pid "$n")" ]] || die "node $n is running"
    local -a live
    read -r -a live <<<"$(live_nodes)"
    (( ${#live[@]} > 0 )) || die "no node answers CQL"
    wait_state "${live[*]}" DN "$n"
    log "node $n (${ADDRS[n-1]}) is DN on node(s) ${live[*]} after $(since "$t0") s"
}

cmd_status() {
    local n rc=0 first=""
    for n in $(seq 1 $N); do
        local state
        state="$(node_sh "$n" status 2>/dev/null)" || rc=1
        [[ -z "$first" && "$state" == running* ]] && first="$n"
        printf 'node %s  %-12s %-15s %s %s  %s\n' "$n" "$(node_name "$n")" "${ADDRS[n-1]}" \
            "${DCS[n-1]}" "${RACKS[n-1]}" "$state"
    done
    if [[ -n "$first" ]]; then
        echo "nodetool status on node $first:"
        node_sh "$first" nodetool status || true
    fi
    return $rc
}

cmd_info() {
    printf 'cluster_name\t%s\nseed\t%s\nnum_tokens\t%s\nheap\t%s\njvm_opts\t%s\nring_delay_ms\t%s\n' \
        "$CLUSTER_NAME" "$SEED" "$NUM_TOKENS" "$HEAP" "$JVM_OPTS" "$RING_DELAY_MS"
    printf 'node\tname\taddress\tdc\track\tnative_port\tstorage_port\tjmx_port\tpid\tdir\n'
    local n
    for n in $(seq 1 $N); do
        local pid
        pid="$(node_pid "$n")"
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$n" "$(node_name "$n")" \
            "${ADDRS[n-1]}" "${DCS[n-1]}" "${RACKS[n-1]}" "$NATIVE_PORT" "$STORAGE_PORT" \
            "${JMX_PORTS[n-1]}" "${pid:--}" "$(node_dir "$n")"
    done
}

cmd_wipe() {
    cmd_stop
    local n
    for n in $(seq 1 $N); do
        [[ -n "$(node_pid "$n")" ]] && die "node $n still running; not wiping"
        rm -rf "$(node_dir "$n")"
    done
    log "node directories removed"
}

usage() {
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
    exit 2
}

cmd="${1:-}"
[[ $# -gt 0 ]] && shift
case "$cmd" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    info) cmd_info ;;
    nodetool) check_n "${1:-}"; n="$1"; shift; node_sh "$n" nodetool "$@" ;;
    cqlsh) check_n "${1:-}"; n="$1"; shift; node_sh "$n" cqlsh "$@" ;;
    logs) check_n "${1:-}"; node_sh "$1" logs "${2:-100}" ;;
    kill) cmd_kill "${1:-}" ;;
    wait-down) cmd_wait_down "${1:-}" ;;
    start-node) cmd_start_node "${1:-}" ;;
    stop-node) cmd_stop_node "${1:-}" ;;
    wipe) cmd_wipe ;;
    *) usage ;;
esac

#!/usr/bin/env bash
# Run a real Apache Cassandra locally, without Docker, for autoprep's integration tests.
#
#   scripts/cassandra.sh install     fetch the server jars from Maven Central (once)
#   scripts/cassandra.sh start       install if needed, start a node, wait until CQL answers
#   scripts/cassandra.sh stop        SIGTERM, then SIGKILL after CASSANDRA_STOP_TIMEOUT seconds
#   scripts/cassandra.sh status      exit 0 when the native port answers a CQL OPTIONS request
#   scripts/cassandra.sh restart     stop, then start
#   scripts/cassandra.sh nodetool …  run nodetool against the node's JMX port
#   scripts/cassandra.sh cqlsh …     run cqlsh from <repo>/.venv (scripts/venv.sh) on the node
#   scripts/cassandra.sh logs        tail the node's system.log
#   scripts/cassandra.sh info        print the node's directories and settings
#
# Environment (defaults in brackets):
#   AUTOPREP_CACHE_DIR      [<repo>/.cache]   jars and node directories live here
#   CASSANDRA_VERSION       [5.0.6]
#   CASSANDRA_NODE          [node1]           one directory per node name (data, logs, pid)
#   CASSANDRA_LISTEN        [127.0.0.1]       listen_address and rpc_address
#   CASSANDRA_NATIVE_PORT   [9042]
#   CASSANDRA_STORAGE_PORT  [7000]
#   CASSANDRA_JMX_PORT      [7199]            JMX binds 127.0.0.1: every node needs its own
#   CASSANDRA_SEEDS         [$CASSANDRA_LISTEN:$CASSANDRA_STORAGE_PORT]
#   CASSANDRA_CLUSTER_NAME  [autoprep]        nodes join only a cluster of the same name
#   CASSANDRA_DC            []                set: GossipingPropertyFileSnitch instead of SimpleSnitch,
#                                             with a conf/cassandra-rackdc.properties of this dc
#   CASSANDRA_RACK          [r1]              the rack in that file (only with CASSANDRA_DC)
#   CASSANDRA_NUM_TOKENS    [1]               num_tokens (vnodes); fixed once the node has joined
#   CASSANDRA_INITIAL_TOKEN []                initial_token (with one token: where the node sits
#                                             on the ring); unset: random; fixed once joined
#   CASSANDRA_AUTH          [none]            none | password (PasswordAuthenticator +
#                                             CassandraAuthorizer, superuser cassandra/cassandra)
#   CASSANDRA_CLIENT_TLS_KEYSTORE []          PEM file with the node's private key (PKCS#8) and
#                                             certificate chain: turns on client_encryption_options
#                                             (PEMBasedSslContextFactory)
#   CASSANDRA_CLIENT_TLS_TRUSTSTORE []        PEM CA certificates that sign client certificates
#   CASSANDRA_CLIENT_TLS_OPTIONAL [true]      true: plain clients are served on the same port too
#   CASSANDRA_CLIENT_TLS_REQUIRE_CLIENT_AUTH [false]  true: TLS clients must present a
#                                             certificate signed by the truststore
#   CASSANDRA_PREPARED_CACHE []               prepared_statements_cache_size, e.g. 1MiB
#   CASSANDRA_AUDIT         []                audit log categories, e.g. PREPARE (logs/audit.log;
#                                             system keyspaces are excluded by default)
#   CASSANDRA_METRICS_PORT  []                set: the Prometheus jmx_exporter javaagent
#                                             (io.prometheus.jmx:jmx_prometheus_javaagent from Maven
#                                             Central) serves http://LISTEN:PORT/metrics with the
#                                             rules of deploy/grafana/cassandra-jmx-exporter.yaml
#                                             (the node's CPU and CQL counters), what autoprep's
#                                             --server-metrics-url reads
#   CASSANDRA_HEAP          [1G]
#   CASSANDRA_JVM_OPTS      []                more JVM options, separated by spaces (e.g.
#                                             -XX:TieredStopAtLevel=1: C1 only, starts faster)
#   CASSANDRA_RING_DELAY_MS [100]             a node joining a cluster needs its seed's gossip
#                                             answer within this (give it a few seconds)
#   CASSANDRA_START_TIMEOUT [120]  CASSANDRA_STOP_TIMEOUT [30]   seconds
#   JAVA_HOME               [/usr/lib/jvm/java-17-openjdk-amd64 when present]
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
CONF_SRC="$SCRIPT_DIR/cassandra"

CACHE_DIR="${AUTOPREP_CACHE_DIR:-$REPO_DIR/.cache}"
VERSION="${CASSANDRA_VERSION:-5.0.6}"
NODE="${CASSANDRA_NODE:-node1}"
LISTEN="${CASSANDRA_LISTEN:-127.0.0.1}"
NATIVE_PORT="${CASSANDRA_NATIVE_PORT:-9042}"
STORAGE_PORT="${CASSANDRA_STORAGE_PORT:-7000}"
JMX_PORT="${CASSANDRA_JMX_PORT:-7199}"
SEEDS="${CASSANDRA_SEEDS:-$LISTEN:$STORAGE_PORT}"
CLUSTER_NAME="${CASSANDRA_CLUSTER_NAME:-autoprep}"
DC="${CASSANDRA_DC:-}"
RACK="${CASSANDRA_RACK:-}"
NUM_TOKENS="${CASSANDRA_NUM_TOKENS:-}"
INITIAL_TOKEN="${CASSANDRA_INITIAL_TOKEN:-}"
AUTH="${CASSANDRA_AUTH:-none}"
TLS_KEYSTORE="${CASSANDRA_CLIENT_TLS_KEYSTORE:-}"
TLS_TRUSTSTORE="${CASSANDRA_CLIENT_TLS_TRUSTSTORE:-}"
TLS_OPTIONAL="${CASSANDRA_CLIENT_TLS_OPTIONAL:-true}"
TLS_CLIENT_AUTH="${CASSANDRA_CLIENT_TLS_REQUIRE_CLIENT_AUTH:-false}"
PREPARED_CACHE="${CASSANDRA_PREPARED_CACHE:-}"
AUDIT="${CASSANDRA_AUDIT:-}"
METRICS_PORT="${CASSANDRA_METRICS_PORT:-}"
JMX_EXPORTER_VERSION="${JMX_EXPORTER_VERSION:-1.0.1}"
HEAP="${CASSANDRA_HEAP:-1G}"
JVM_OPTS="${CASSANDRA_JVM_OPTS:-}"
RING_DELAY_MS="${CASSANDRA_RING_DELAY_MS:-100}"
START_TIMEOUT="${CASSANDRA_START_TIMEOUT:-120}"
STOP_TIMEOUT="${CASSANDRA_STOP_TIMEOUT:-30}"

INSTALL_DIR="$CACHE_DIR/cassandra-$VERSION"
LIB_DIR="$INSTALL_DIR/lib"
INSTALL_STAMP="$INSTALL_DIR/.installed"
NODE_DIR="$CACHE_DIR/cassandra-nodes/$NODE"
LOG_DIR="$NODE_DIR/logs"
PID_FILE="$NODE_DIR/cassandra.pid"
RACKDC_FILE="$NODE_DIR/conf/cassandra-rackdc.properties"

if [[ -z "${JAVA_HOME:-}" && -x /usr/lib/jvm/java-17-openjdk-amd64/bin/java ]]; then
    JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64
fi
JAVA="${JAVA_HOME:+$JAVA_HOME/bin/}java"

log() { printf '[cassandra.sh %s] %s\n' "$NODE" "$*" >&2; }
die() { log "error: $*"; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

case "$AUTH" in none|password) ;; *) die "CASSANDRA_AUTH must be none or password, not '$AUTH'" ;; esac
case "$TLS_OPTIONAL" in true|false) ;; *) die "CASSANDRA_CLIENT_TLS_OPTIONAL must be true or false" ;; esac
case "$TLS_CLIENT_AUTH" in true|false) ;; *) die "CASSANDRA_CLIENT_TLS_REQUIRE_CLIENT_AUTH must be true or false" ;; esac
[[ -z "$NUM_TOKENS" || "$NUM_TOKENS" =~ ^[1-9][0-9]*$ ]] || die "CASSANDRA_NUM_TOKENS must be a positive integer"
[[ -z "$INITIAL_TOKEN" || "$INITIAL_TOKEN" =~ ^-?[0-9]+$ ]] || die "CASSANDRA_INITIAL_TOKEN must be a Murmur3 token (an integer)"
[[ -z "$METRICS_PORT" || "$METRICS_PORT" =~ ^[1-9][0-9]*$ ]] || die "CASSANDRA_METRICS_PORT must be a port number"
[[ -z "$RACK" || -n "$DC" ]] || die "CASSANDRA_RACK needs CASSANDRA_DC"
[[ "$DC$RACK" =~ ^[A-Za-z0-9_.-]*$ ]] || die "CASSANDRA_DC and CASSANDRA_RACK: letters, digits, _ . - only"
if [[ -n "$DC" && -z "$RACK" ]]; then
    RACK=r1
fi
if [[ -n "$TLS_KEYSTORE" ]]; then
    [[ -r "$TLS_KEYSTORE" ]] || die "CASSANDRA_CLIENT_TLS_KEYSTORE $TLS_KEYSTORE is not readable"
    [[ -z "$TLS_TRUSTSTORE" || -r "$TLS_TRUSTSTORE" ]] \
        || die "CASSANDRA_CLIENT_TLS_TRUSTSTORE $TLS_TRUSTSTORE is not readable"
    [[ "$TLS_CLIENT_AUTH" == false || -n "$TLS_TRUSTSTORE" ]] \
        || die "CASSANDRA_CLIENT_TLS_REQUIRE_CLIENT_AUTH=true needs CASSANDRA_CLIENT_TLS_TRUSTSTORE"
fi
# The probe speaks TLS when the node accepts nothing else (presenting the node's own key and
# certificate when client certificates are required); it never verifies the node.
PROBE_TLS=none
if [[ -n "$TLS_KEYSTORE" && "$TLS_OPTIONAL" == false ]]; then
    PROBE_TLS=plain
    [[ "$TLS_CLIENT_AUTH" == true ]] && PROBE_TLS="$TLS_KEYSTORE"
fi

tls_summary() {
    if [[ -z "$TLS_KEYSTORE" ]]; then
        echo off
    else
        echo "on (optional $TLS_OPTIONAL, require_client_auth $TLS_CLIENT_AUTH)"
    fi
}

# --- readiness probe --------------------------------------------------------------------------
# Sends a v4 OPTIONS request and reads the whole SUPPORTED answer (closing after the header
# alone makes the server count a connection-reset error). With CASSANDRA_AUTH=password it also
# logs in as cassandra/cassandra when called as `probe login`, since the default superuser
# appears only after CQL is up.
probe() {   # probe [login]
    local auth=none
    [[ "${1:-}" == login ]] && auth="$AUTH"
    python3 - "$LISTEN" "$NATIVE_PORT" "$auth" "$PROBE_TLS" <<'PY'
import socket, ssl, struct, sys

host, port, auth, tls = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]

def connect():
    s = socket.create_connection((host, port), timeout=3)
    if tls == "none":
        return s
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if tls != "plain":
        ctx.load_cert_chain(tls)
    return ctx.wrap_socket(s)

def frame(opcode, body=b"", stream=0):
    return struct.pack(">BBhBi", 4, 0, stream, opcode, len(body)) + body

def read_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("connection closed")
        buf += chunk
    return buf

def read_frame(sock):
    header = read_exact(sock, 9)
    (length,) = struct.unpack(">i", header[5:9])
    return header[4], read_exact(sock, length)

def string_map(pairs):
    out = struct.pack(">H", len(pairs))
    for k, v in pairs.items():
        for s in (k, v):
            b = s.encode()
            out += struct.pack(">H", len(b)) + b
    return out

try:
    with connect() as s:
        s.settimeout(3)
        s.sendall(frame(0x05))
        opcode, _ = read_frame(s)
        if opcode != 0x06:
            sys.exit(1)
        if auth == "password":
            s.sendall(frame(0x01, string_map({"CQL_VERSION": "3.0.0"}), 1))
            opcode, _ = read_frame(s)
            if opcode == 0x03:
                token = b"\x00cassandra\x00cassandra"
                s.sendall(frame(0x0F, struct.pack(">i", len(token)) + token, 2))
                opcode, _ = read_frame(s)
                if opcode != 0x10:
                    sys.exit(1)
            elif opcode != 0x02:
                sys.exit(1)
except Exception:
    sys.exit(1)
PY
}

# --- install ------------------------------------------------------------------------------------
cmd_install() {
    if [[ -f "$INSTALL_STAMP" ]]; then
        log "Cassandra $VERSION already installed in $INSTALL_DIR"
        return 0
    fi
    command -v mvn >/dev/null || die "mvn not found (apt-get install maven)"
    mkdir -p "$CACHE_DIR"
    exec 8>"$CACHE_DIR/.cassandra-install.lock"
    flock 8
    if [[ -f "$INSTALL_STAMP" ]]; then   # another process finished while we waited
        exec 8>&-
        log "Cassandra $VERSION already installed in $INSTALL_DIR"
        return 0
    fi
    local t0 tmp
    t0="$(now)"
    tmp="$(mktemp -d "$CACHE_DIR/.cassandra-install.XXXXXX")"
    log "installing Cassandra $VERSION jars from Maven Central into $LIB_DIR"
    sed "s/@CASSANDRA_VERSION@/$VERSION/" "$CONF_SRC/pom.xml.in" >"$tmp/pom.xml"
    if ! (cd "$tmp" && mvn -q -B -f pom.xml dependency:copy-dependencies \
            -DoutputDirectory=lib -DincludeScope=runtime); then
        rm -rf "$tmp"
        die "mvn dependency:copy-dependencies failed"
    fi
    ls "$tmp"/lib/cassandra-all-"$VERSION".jar >/dev/null || die "cassandra-all jar missing"
    ls "$tmp"/lib/jamm-*.jar >/dev/null || die "jamm jar missing"
    rm -rf "$INSTALL_DIR"
    mkdir -p "$INSTALL_DIR"
    mv "$tmp/lib" "$LIB_DIR"
    rm -rf "$tmp"
    date -u +%FT%TZ >"$INSTALL_STAMP"
    exec 8>&-
    log "installed $(ls "$LIB_DIR" | wc -l) jars ($(du -sh "$LIB_DIR" | cut -f1)) in $(since "$t0") s"
}

# The jmx_exporter javaagent, fetched once into the cache (CASSANDRA_METRICS_PORT).
install_metrics_agent() {
    local jar="$CACHE_DIR/jmx_prometheus_javaagent-$JMX_EXPORTER_VERSION.jar"
    if [[ ! -f "$jar" ]]; then
        command -v mvn >/dev/null || die "mvn not found (needed for the jmx_exporter javaagent)"
        log "fetching io.prometheus.jmx:jmx_prometheus_javaagent:$JMX_EXPORTER_VERSION"
        mvn -q -B dependency:copy -Dartifact="io.prometheus.jmx:jmx_prometheus_javaagent:$JMX_EXPORTER_VERSION" \
            -DoutputDirectory="$CACHE_DIR" >&2 || die "mvn could not fetch the jmx_exporter javaagent"
    fi
    echo "$jar"
}

# --- configuration ------------------------------------------------------------------------------
write_config() {
    local conf="$NODE_DIR/conf/cassandra.yaml"
    mkdir -p "$NODE_DIR"/{conf,data,commitlog,saved_caches,hints,cdc_raw,triggers} "$LOG_DIR"
    sed -e "s|@SEEDS@|$SEEDS|" -e "s|@LISTEN@|$LISTEN|g" -e "s|@CLUSTER_NAME@|$CLUSTER_NAME|" \
        -e "s|@STORAGE_PORT@|$STORAGE_PORT|" -e "s|@NATIVE_PORT@|$NATIVE_PORT|" \
        -e "s|@NODE_DIR@|$NODE_DIR|g" "$CONF_SRC/cassandra.yaml.in" >"$conf.tmp"
    if [[ -n "$NUM_TOKENS" ]]; then
        sed -i "s|^num_tokens: .*|num_tokens: $NUM_TOKENS|" "$conf.tmp"
    fi
    if [[ -n "$DC" ]]; then
        sed -i "s|^endpoint_snitch: .*|endpoint_snitch: GossipingPropertyFileSnitch|" "$conf.tmp"
        printf 'dc=%s\nrack=%s\n' "$DC" "$RACK" >"$RACKDC_FILE"
    fi
    {
        echo
        echo "# Set by scripts/cassandra.sh from the environment."
        if [[ "$AUTH" == password ]]; then
            echo "authenticator: PasswordAuthenticator"
            echo "authorizer: CassandraAuthorizer"
            echo "role_manager: CassandraRoleManager"
        else
            echo "authenticator: AllowAllAuthenticator"
            echo "authorizer: AllowAllAuthorizer"
        fi
        if [[ -n "$PREPARED_CACHE" ]]; then
            echo "prepared_statements_cache_size: $PREPARED_CACHE"
        fi
        if [[ -n "$INITIAL_TOKEN" ]]; then
            echo "initial_token: $INITIAL_TOKEN"
        fi
        if [[ -n "$TLS_KEYSTORE" ]]; then
            echo "client_encryption_options:"
            echo "  enabled: true"
            echo "  optional: $TLS_OPTIONAL"
            echo "  ssl_context_factory:"
            echo "    class_name: org.apache.cassandra.security.PEMBasedSslContextFactory"
            echo "  keystore: $TLS_KEYSTORE"
            [[ -n "$TLS_TRUSTSTORE" ]] && echo "  truststore: $TLS_TRUSTSTORE"
            echo "  require_client_auth: $TLS_CLIENT_AUTH"
        fi
        if [[ -n "$AUDIT" ]]; then
            echo "audit_logging_options:"
            echo "  enabled: true"
            echo "  logger:"
            echo "    - class_name: FileAuditLogger"
            echo "  included_categories: $AUDIT"
        fi
    } >>"$conf.tmp"
    grep -v '^#' "$conf.tmp" | grep -q '@[A-Z_]*@' && die "unreplaced placeholder in $conf.tmp"
    mv "$conf.tmp" "$conf"
    echo "$conf"
}

jvm_options() {   # the non-comment lines of an options file
    grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' "$1"
}

# --- process helpers ----------------------------------------------------------------------------
node_pid() {   # prints the pid of this node's JVM if it is alive, else nothing
    [[ -f "$PID_FILE" ]] || return 0
    local pid
    pid="$(tr -dc '0-9' <"$PID_FILE")"
    [[ -n "$pid" && -r "/proc/$pid/cmdline" ]] || return 0
    if tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'org.apache.cassandra.service.CassandraDaemon'; then
        echo "$pid"
    fi
}

print_log_tail() {
    local f
    for f in "$LOG_DIR/system.log" "$LOG_DIR/stdout.log"; do
        if [[ -s "$f" ]]; then
            log "last lines of $f:"
            tail -n 40 "$f" >&2
        fi
    done
}

# --- start / stop / status ----------------------------------------------------------------------
cmd_start() {
    local t0
    t0="$(now)"
    if probe; then
        log "a node already answers on $LISTEN:$NATIVE_PORT; reusing it"
        return 0
    fi
    cmd_install
    mkdir -p "$NODE_DIR"
    exec 9>"$NODE_DIR/.start.lock"
    flock 9
    local pid
    pid="$(node_pid)"
    if [[ -n "$pid" ]]; then
        log "node already starting or running as pid $pid; waiting for CQL"
    else
        local conf
        conf="$(write_config)"
        local jamm
        jamm="$(ls "$LIB_DIR"/jamm-*.jar | head -n 1)"
        local -a opts
        mapfile -t opts < <(jvm_options "$CONF_SRC/jvm17-server.options")
        if [[ -n "$DC" ]]; then
            opts+=("-Dcassandra-rackdc.properties=file://$RACKDC_FILE")
        fi
        if [[ -n "$JVM_OPTS" ]]; then
            local -a extra
            read -r -a extra <<<"$JVM_OPTS"
            opts+=("${extra[@]}")
        fi
        local -a args=(
            "-Xms$HEAP" "-Xmx$HEAP"
            "${opts[@]}"
            "-XX:HeapDumpPath=$NODE_DIR"
            "-javaagent:$jamm"
            ${METRICS_PORT:+"-javaagent:$(install_metrics_agent)=$LISTEN:$METRICS_PORT:$REPO_DIR/deploy/grafana/cassandra-jmx-exporter.yaml"}
            "-Dcassandra.config=file://$conf"
            "-Dcassandra.storagedir=$NODE_DIR"
            "-Dcassandra.logdir=$LOG_DIR"
            "-Dcassandra.triggers_dir=$NODE_DIR/triggers"
            "-Dlogback.configurationFile=file://$CONF_SRC/logback.xml"
            "-Dcassandra-foreground=yes"
            "-Dcassandra-pidfile=$PID_FILE"
            "-Dcassandra.jmx.local.port=$JMX_PORT"
            "-Dcassandra.skip_wait_for_gossip_to_settle=0"
            "-Dcassandra.ring_delay_ms=$RING_DELAY_MS"
            "-Dcassandra.superuser_setup_delay_ms=0"
            "-Dcassandra.gossip_settle_min_wait_ms=0"
            -cp "$LIB_DIR/*"
            org.apache.cassandra.service.CassandraDaemon
        )
        log "starting Cassandra $VERSION on $LISTEN native=$NATIVE_PORT storage=$STORAGE_PORT jmx=$JMX_PORT${METRICS_PORT:+ metrics=http://$LISTEN:$METRICS_PORT/metrics}${DC:+ dc=$DC rack=$RACK}${NUM_TOKENS:+ num_tokens=$NUM_TOKENS} auth=$AUTH client_tls=$(tls_summary)"
        # setsid: the node outlives the shell (and its process group) that started it.
        # 9>&-: the JVM must not inherit the start lock.
        setsid nohup "$JAVA" "${args[@]}" >"$LOG_DIR/stdout.log" 2>&1 </dev/null 9>&- &
        pid=$!
        echo "$pid" >"$PID_FILE"
    fi
    exec 9>&-
    local deadline
    deadline=$(( $(date +%s) + START_TIMEOUT ))
    while ! probe login; do
        if ! kill -0 "$pid" 2>/dev/null; then
            print_log_tail
            die "Cassandra (pid $pid) exited before CQL was ready"
        fi
        if (( $(date +%s) >= deadline )); then
            print_log_tail
            die "CQL not ready on $LISTEN:$NATIVE_PORT after ${START_TIMEOUT}s (pid $pid left running)"
        fi
        sleep 0.25
    done
    log "CQL ready on $LISTEN:$NATIVE_PORT (pid $pid) after $(since "$t0") s"
}

cmd_stop() {
    local t0 pid
    t0="$(now)"
    pid="$(node_pid)"
    if [[ -z "$pid" ]]; then
        log "not running (no live pid in $PID_FILE)"
        rm -f "$PID_FILE"
        return 0
    fi
    log "stopping pid $pid (SIGTERM)"
    kill -TERM "$pid" 2>/dev/null || true
    local deadline
    deadline=$(( $(date +%s) + STOP_TIMEOUT ))
    while kill -0 "$pid" 2>/dev/null; do
        if (( $(date +%s) >= deadline )); then
            log "still alive after ${STOP_TIMEOUT}s; SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
            break
        fi
        sleep 0.2
    done
    rm -f "$PID_FILE"
    log "stopped after $(since "$t0") s"
}

cmd_status() {
    local pid
    pid="$(node_pid)"
    if probe; then
        echo "running: CQL answers on $LISTEN:$NATIVE_PORT${pid:+ (pid $pid)}"
        return 0
    fi
    if [[ -n "$pid" ]]; then
        echo "starting or unhealthy: pid $pid alive, CQL not answering on $LISTEN:$NATIVE_PORT"
    else
        echo "stopped"
    fi
    return 1
}

cmd_nodetool() {
    [[ -f "$INSTALL_STAMP" ]] || die "not installed; run: $0 install"
    local -a opts
    mapfile -t opts < <(jvm_options "$CONF_SRC/jvm17-clients.options")
    exec "$JAVA" -Xmx256m "${opts[@]}" \
        "-Dcassandra.storagedir=$NODE_DIR" "-Dcassandra.logdir=$LOG_DIR" \
        "-Dlogback.configurationFile=file://$CONF_SRC/logback-tools.xml" \
        -cp "$LIB_DIR/*" org.apache.cassandra.tools.NodeTool -h 127.0.0.1 -p "$JMX_PORT" "$@"
}

cmd_cqlsh() {
    local cqlsh="$REPO_DIR/.venv/bin/cqlsh"
    [[ -x "$cqlsh" ]] || die "$cqlsh missing; run scripts/venv.sh"
    local -a creds=()
    [[ "$AUTH" == password ]] && creds=(-u cassandra -p cassandra)
    exec "$cqlsh" "${creds[@]}" "$LISTEN" "$NATIVE_PORT" "$@"
}

cmd_info() {
    cat <<EOF
version      $VERSION
install_dir  $INSTALL_DIR
node         $NODE
node_dir     $NODE_DIR
logs         $LOG_DIR
pid_file     $PID_FILE
listen       $LISTEN
native_port  $NATIVE_PORT
storage_port $STORAGE_PORT
jmx_port     $JMX_PORT
seeds        $SEEDS
cluster_name $CLUSTER_NAME
${DC:+dc           $DC
rack         $RACK
}${NUM_TOKENS:+num_tokens   $NUM_TOKENS
}${JVM_OPTS:+jvm_opts     $JVM_OPTS
}auth         $AUTH
client_tls   $(tls_summary)
EOF
}

usage() {
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
    exit 2
}

cmd="${1:-}"
[[ $# -gt 0 ]] && shift
case "$cmd" in
    install) cmd_install ;;
    start) cmd_start ;;
    stop) cmd_stop ;;
    restart) cmd_stop; cmd_start ;;
    status) cmd_status ;;
    nodetool) cmd_nodetool "$@" ;;
    cqlsh) cmd_cqlsh "$@" ;;
    logs) tail -n "${1:-100}" "$LOG_DIR/system.log" ;;
    info) cmd_info ;;
    *) usage ;;
esac

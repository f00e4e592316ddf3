# Sourced by scripts/soak.sh and scripts/fleet.sh: the binary they run and the soak's own
# three-node cluster (started, or reused, for the run: soak_binary, soak_cluster), apart from
# the shared node (127.0.0.1) and the other tests' clusters (.41-.43 routing, .51-.53 benches,
# .61-.63 layouts). One datacenter, so that RF 3 at QUORUM survives any single node down. The
# audit log of PREPAREs is on for the fleet's count (also harmless for the soak). Every value
# can be overridden from the environment.
: "${AUTOPREP_CACHE_DIR:=/work/cache-soak}"
: "${AUTOPREP_CLUSTER_NODES:=127.0.0.71,127.0.0.72,127.0.0.73}"
: "${AUTOPREP_CLUSTER_JMX_PORTS:=7471,7472,7473}"
: "${AUTOPREP_CLUSTER_PREFIX:=soak}"
: "${AUTOPREP_CLUSTER_NAME:=autoprep-soak}"
: "${AUTOPREP_CLUSTER_DCS:=dc1,dc1,dc1}"
: "${CASSANDRA_AUDIT:=PREPARE}"
export AUTOPREP_CACHE_DIR AUTOPREP_CLUSTER_NODES AUTOPREP_CLUSTER_JMX_PORTS AUTOPREP_CLUSTER_PREFIX \
    AUTOPREP_CLUSTER_NAME AUTOPREP_CLUSTER_DCS CASSANDRA_AUDIT

# The release binary the run starts: AUTOPREP_BIN, else <target>/release/autoprep, built when
# missing (the repository at $1). Prints its path.
soak_binary() {
    local target="${CARGO_TARGET_DIR:-$1/target}" bin
    bin="${AUTOPREP_BIN:-$target/release/autoprep}"
    if [[ ! -x "$bin" ]]; then
        echo "building $bin" >&2
        (cd "$1" && CARGO_TARGET_DIR="$target" nice -n 10 cargo build --release -q -p autoprep) >&2
    fi
    echo "$bin"
}

# Starts the cluster with the scripts in $1, or reuses a running one; one started here is
# stopped when the calling script exits, unless KEEP=1 by then.
soak_cluster() {
    SOAK_SCRIPTS="$1"
    SOAK_STARTED_CLUSTER=0
    "$SOAK_SCRIPTS/cluster.sh" status >/dev/null 2>&1 || SOAK_STARTED_CLUSTER=1
    trap soak_cluster_stop EXIT
    echo "starting (or reusing) the cluster $AUTOPREP_CLUSTER_NODES" >&2
    nice -n 10 "$SOAK_SCRIPTS/cluster.sh" start
}

soak_cluster_stop() {
    if ((SOAK_STARTED_CLUSTER && !${KEEP:-0})); then
        echo "stopping the cluster" >&2
        "$SOAK_SCRIPTS/cluster.sh" stop || true
    fi
}

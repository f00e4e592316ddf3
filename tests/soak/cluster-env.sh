# Sourced by scripts/soak.sh and scripts/fleet.sh: the soak's own three-node cluster, apart from
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

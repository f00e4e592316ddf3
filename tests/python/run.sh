#!/usr/bin/env bash
# Run the Python driver and cqlsh integration tests through autoprep against a real Cassandra.
#
#   tests/python/run.sh [pytest args...]      e.g. -k paging, -x, -v
#
# Creates/updates the venv (scripts/venv.sh), builds the proxy unless AUTOPREP_BIN names one,
# and runs pytest; exits with pytest's status. The node is AUTOPREP_TEST_UPSTREAM (host:port)
# or the one `scripts/cassandra.sh start` starts or reuses on 127.0.0.1:9042.
# The auto-prepare acceptance tests (test_corpus.py, test_faults.py) also start a second,
# single-node cluster of their own on 127.0.0.23 (exact server counters, restarts, a 1 MiB
# prepared cache) and kill it at the end; AUTOPREP_TEST_OWN_NODE=0 does without it.
# The topology test (test_topology.py) starts a private two-node cluster on 127.0.0.32 and
# 127.0.0.33 (JMX 7432/7433) and kills it at the end; AUTOPREP_TEST_TWO_NODES=0 skips it.
set -euo pipefail

REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO_DIR"

VENV="$(scripts/venv.sh)"
if [[ -z "${AUTOPREP_BIN:-}" ]]; then
    cargo build -q -p autoprep
    export AUTOPREP_BIN="$REPO_DIR/target/debug/autoprep"
fi
[[ -x "$AUTOPREP_BIN" ]] || { echo "run.sh: $AUTOPREP_BIN is not executable" >&2; exit 1; }

# The soak's own unit tests (its drift, ledger, error classes and fault schedule) run here too.
exec "$VENV/bin/python" -m pytest tests/python tests/soak/test_soak_units.py -q "$@"

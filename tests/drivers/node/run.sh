#!/usr/bin/env bash
# The Node.js cassandra-driver (npm) through autoprep.
#
#   tests/drivers/node/run.sh
#
# Runs the legacy workload (workload.js) through autoprep at AUTOPREP_DRIVER_TARGET, and as a
# control directly against AUTOPREP_DRIVER_DIRECT; checks every answer, compares the two runs,
# and reads autoprep's /metrics at AUTOPREP_DRIVER_ADMIN. Standalone (AUTOPREP_DRIVER_TARGET
# unset) it starts an autoprep of its own first (tests/drivers/lib/standalone.sh). Installs the
# driver with `npm ci` from package-lock.json when node_modules is missing or older than the lock.
# Exits non-zero on any mismatch, with a summary.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$HERE/../../.." && pwd)"
# shellcheck source=../lib/standalone.sh
source "$HERE/../lib/standalone.sh"
drivers_ensure_target "$REPO_DIR"

cd "$HERE"
if [[ ! -f node_modules/.package-lock.json || package-lock.json -nt node_modules/.package-lock.json ]]; then
    npm ci --no-audit --no-fund --loglevel=error
fi
node main.js

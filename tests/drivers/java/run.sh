#!/usr/bin/env bash
# The Java driver 4.x (org.apache.cassandra:java-driver-core) through autoprep.
#
#   tests/drivers/java/run.sh
#
# Runs the legacy workload (src/main/java/autoprep/drivers) through autoprep at
# AUTOPREP_DRIVER_TARGET, and as a control directly against AUTOPREP_DRIVER_DIRECT; checks every
# answer, compares the two runs, and reads autoprep's /metrics at AUTOPREP_DRIVER_ADMIN.
# Standalone (AUTOPREP_DRIVER_TARGET unset) it starts an autoprep of its own first
# (tests/drivers/lib/standalone.sh). Maven downloads the driver from Maven Central into the
# local repository (~/.m2 unless MAVEN_OPTS/-Dmaven.repo.local says otherwise) and compiles.
# AUTOPREP_DRIVER_JAVA_PROTOCOL=V4 forces protocol v4 (default: negotiated, v5 on Cassandra 5;
# the Node.js driver covers v4). Exits non-zero on any mismatch, with a summary.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$HERE/../../.." && pwd)"
# shellcheck source=../lib/standalone.sh
source "$HERE/../lib/standalone.sh"
drivers_ensure_target "$REPO_DIR"

cd "$HERE"
mvn_log="$(mktemp)"
if ! mvn -q -B compile dependency:build-classpath -Dmdep.outputFile=target/classpath.txt \
    -Dmdep.includeScope=runtime >"$mvn_log" 2>&1; then
    cat "$mvn_log"
    echo "java: maven could not build the workload" >&2
    exit 1
fi
rm -f "$mvn_log"
java -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
    -cp "target/classes:$(cat target/classpath.txt)" autoprep.drivers.Main

#!/usr/bin/env bash
# Run the whole test suite on a fresh machine: installs what it needs (Cassandra from Maven
# Central, a Python venv from PyPI, the driver programs' crates, Go modules, Maven artifacts and
# npm packages, helm and kubeconform from the Go module proxy), starts a local Cassandra unless
# AUTOPREP_TEST_UPSTREAM names one, then runs format and lint checks, the Rust tests, the Python
# driver and cqlsh tests and the driver matrix (tests/drivers/run.sh), runs every fuzz target
# for a few seconds and every criterion benchmark for a second, and checks the deployment
# artifacts beside them. The ScyllaDB container test runs only where a Docker engine answers.
set -euo pipefail
REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_DIR"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
# A fresh clone builds once: incremental caches would only take disk (CI's is not large).
if [[ -n "${CI:-}" ]]; then export CARGO_INCREMENTAL=0; fi

step() { printf '\n==> %s\n' "$*"; }
start=$SECONDS

step "format and lint"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings

step "the book (mdBook build, tables fresh, links checked)"
bash scripts/book.sh

if [[ -z "${AUTOPREP_TEST_UPSTREAM:-}" ]]; then
    step "local Cassandra"
    # With its metrics endpoint (jmx_exporter javaagent): the estimate of server CPU saved is
    # tested against the node's own CPU.
    export CASSANDRA_METRICS_PORT="${CASSANDRA_METRICS_PORT:-7070}"
    bash scripts/cassandra.sh start
fi

# The deployment artifacts (scripts/deploy-check.sh: hadolint, helm, kubeconform, jmx_exporter)
# need no Rust build: they run beside the Rust tests, in a process group of their own so that an
# early exit stops them, and their output is printed in one piece afterwards.
step "deployment artifacts: started in the background (output after the Rust tests)"
mkdir -p .cache
deploy_log="$REPO_DIR/.cache/deploy-check.log"
setsid bash scripts/deploy-check.sh >"$deploy_log" 2>&1 &
deploy_pid=$!
trap 'kill -- -"$deploy_pid" 2>/dev/null && echo "scripts/deploy-check.sh stopped; its output so far: $deploy_log"' EXIT

step "Rust tests (unit, property, golden, integration against the real server)"
cargo test --workspace

# Every fuzz target for a few seconds from its committed seeds (fuzz/README.md): a parser
# that panics on an input the seeds reach fails the build.
step "fuzz smoke (scripts/fuzz.sh smoke)"
bash scripts/fuzz.sh smoke

# Every criterion benchmark, briefly but past its first iterations (--profile-time iterates each
# for a second without analysis; --test would run one iteration only and miss a benchmark that
# breaks later), so that a broken benchmark fails the build. Timings are not judged here.
step "criterion benchmarks, a second each (cargo bench -- --profile-time 1)"
cargo bench -p autoprep-benches --bench '*' -- --profile-time 1

if [[ -x tests/python/run.sh || -f tests/python/run.sh ]]; then
    step "Python driver and cqlsh tests through autoprep"
    bash tests/python/run.sh
fi

step "driver matrix through autoprep (tests/drivers: Rust scylla crate, gocql, Java driver 4, Node.js)"
bash tests/drivers/run.sh

# testcontainers is heavy to build: only where an engine answers (the CLI alone is not enough).
step "ScyllaDB in a container (testcontainers)"
docker_sock="${DOCKER_HOST:-unix:///var/run/docker.sock}"
docker_sock="${docker_sock#unix://}"
if [[ "${AUTOPREP_SKIP_CONTAINERS:-0}" != 1 && -S "$docker_sock" ]] &&
    curl -fsS --max-time 5 --unix-socket "$docker_sock" http://localhost/_ping >/dev/null 2>&1; then
    cargo test -p autoprep-tests --features containers --test scylla_container
else
    echo "scylla_container: SKIPPED: no Docker engine answers at $docker_sock (or AUTOPREP_SKIP_CONTAINERS=1)"
fi

step "deployment artifacts (scripts/deploy-check.sh)"
deploy_status=0
wait "$deploy_pid" || deploy_status=$?
trap - EXIT
sed 's/^/    /' "$deploy_log"
if ((deploy_status != 0)); then
    echo "scripts/deploy-check.sh failed (exit $deploy_status)" >&2
    exit "$deploy_status"
fi

step "all tests passed in $((SECONDS - start)) s"

#!/usr/bin/env bash
# Run the whole test suite on a fresh machine: installs what it needs (Cassandra from Maven
# Central, a Python venv from PyPI, the driver programs' crates, Go modules, Maven artifacts and
# npm packages), starts a local Cassandra unless AUTOPREP_TEST_UPSTREAM names one, then runs
# format and lint checks, the Rust tests, the Python driver and cqlsh tests and the driver
# matrix (tests/drivers/run.sh).
set -euo pipefail
REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_DIR"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

step() { printf '\n==> %s\n' "$*"; }
start=$SECONDS

step "format and lint"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings

if [[ -z "${AUTOPREP_TEST_UPSTREAM:-}" ]]; then
    step "local Cassandra"
    bash scripts/cassandra.sh start
fi

step "Rust tests (unit, property, golden, integration against the real server)"
cargo test --workspace

if [[ -x tests/python/run.sh || -f tests/python/run.sh ]]; then
    step "Python driver and cqlsh tests through autoprep"
    bash tests/python/run.sh
fi

step "driver matrix through autoprep (tests/drivers: Rust scylla crate, gocql, Java driver 4, Node.js)"
bash tests/drivers/run.sh

step "all tests passed in $((SECONDS - start)) s"

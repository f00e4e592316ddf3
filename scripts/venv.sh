#!/usr/bin/env bash
# Create or update <repo>/.venv from tests/python/requirements.txt.
#
# Idempotent and fast when nothing changed: the venv holds a stamp with the SHA-256 of the
# requirements file and the interpreter version, and the script returns at once when it matches.
#
# Environment: PYTHON [python3]  interpreter to build the venv from
#              AUTOPREP_VENV [<repo>/.venv]
# Prints the venv's path on stdout (for `source "$(scripts/venv.sh)/bin/activate"`).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
VENV="${AUTOPREP_VENV:-$REPO_DIR/.venv}"
REQS="$REPO_DIR/tests/python/requirements.txt"
PYTHON="${PYTHON:-python3}"
STAMP="$VENV/.autoprep-requirements.sha256"

log() { printf '[venv.sh] %s\n' "$*" >&2; }

command -v "$PYTHON" >/dev/null || { log "error: $PYTHON not found"; exit 1; }
want="$( { sha256sum <"$REQS" | cut -d' ' -f1; "$PYTHON" -c 'import sys; print(sys.version)'; } | sha256sum | cut -d' ' -f1)"

if [[ -x "$VENV/bin/python" && -f "$STAMP" && "$(cat "$STAMP")" == "$want" ]]; then
    echo "$VENV"
    exit 0
fi

t0="$(date +%s.%N)"
if [[ ! -x "$VENV/bin/python" ]]; then
    log "creating $VENV with $("$PYTHON" --version 2>&1)"
    "$PYTHON" -m venv "$VENV"
fi
rm -f "$STAMP"
log "installing $REQS"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-input -r "$REQS"
# Fail here, not in the first test, when a compression library or the driver does not import.
"$VENV/bin/python" - <<'PY'
import cassandra, lz4.block, snappy
from cassandra.cluster import Cluster  # noqa: F401
assert snappy.decompress(snappy.compress(b"autoprep" * 8)) == b"autoprep" * 8
PY
echo "$want" >"$STAMP"
log "ready in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
echo "$VENV"

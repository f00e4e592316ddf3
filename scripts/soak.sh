#!/usr/bin/env bash
# The soak (issue 30): a mixed legacy workload through autoprep with routing, in front of a
# three-node cluster, under a fault schedule, with a ledger of every acknowledged write read back
# at ALL; then the same workload and schedule directly against the nodes with a token-aware
# driver, for the same minutes; then the verdict.
#
#   scripts/soak.sh [--minutes N] [--keep-cluster] [--out DIR]
#
#   --minutes N      minutes of each side [30]; the whole run takes about 2N + 1 minutes
#                    (+1 to start the cluster). 5 is the documented quick check.
#   --keep-cluster   leave the cluster running at the end (it is stopped otherwise if this
#                    script started it; a cluster that was already running is left running)
#   --out DIR        where the runs go [<repo>/.cache/soak/<date>-<time>]: per side the ledger
#                    (ledger-*.jsonl), client results, autoprep's logs, RSS/fd samples, result.json
#
# What runs (tests/soak/*.py, each module documents its part):
#   workload.py  4 client processes (protocol v4 and v5, with and without LZ4) x 3 threads, 6
#                operations/s per thread: unprepared text with literals, literal PREPAREs,
#                client-prepared statements, logged and unlogged batches (text and BATCH
#                messages), LWT (IF NOT EXISTS, IF v = ...), paging reads; RF 3, QUORUM
#   faults.py    every 3 minutes: kill -9 of a node and its restart, a node paused (SIGSTOP) for
#                20 s, ALTER TABLE ADD + CREATE TABLE under load; once, a drain (SIGTERM) and
#                restart of autoprep; all along, a client that disconnects mid-request
#   ledger.py    every row write with its outcome; the rows read back at ALL must be what the
#                acknowledged writes left
#   errors.py    every error a client saw, as driver exception class + server error code
#   drift.py     autoprep's RSS and open descriptors every 2 s; drift over the last 3/4
# Fails (exit 1) when an acknowledged write is lost, autoprep's run has an error class the
# direct run does not, RSS or descriptors drift more than 5 %, a client or fault action failed,
# or autoprep panicked or did not exit 0 after a drain. The last line printed:
#   soak: N writes acknowledged, 0 lost through autoprep (direct: ...); error classes ...
#
# The cluster is tests/soak/cluster-env.sh's (127.0.0.71-73, one datacenter, node directories
# under AUTOPREP_CACHE_DIR [/work/cache-soak]); autoprep listens on 127.0.0.70:9043 (admin :9100,
# :9101 after its restart).
# Environment: AUTOPREP_BIN [<target>/release/autoprep, built when missing], the cluster's
# AUTOPREP_CLUSTER_* and AUTOPREP_CACHE_DIR (see tests/soak/cluster-env.sh), SOAK_ARGS (more
# arguments for `soak.py run`, e.g. "--rate 4").
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
# shellcheck source=../tests/soak/cluster-env.sh
source "$REPO_DIR/tests/soak/cluster-env.sh"

MINUTES=30
KEEP=0
OUT=""
while (($#)); do
    case "$1" in
        --minutes) MINUTES="${2:?--minutes needs a number}"; shift 2 ;;
        --minutes=*) MINUTES="${1#*=}"; shift ;;
        --keep-cluster) KEEP=1; shift ;;
        --out) OUT="${2:?--out needs a directory}"; shift 2 ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) echo "soak.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[[ "$MINUTES" =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "soak.sh: --minutes must be a number" >&2; exit 2; }

log() { printf '[soak.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

BIN="$(soak_binary "$REPO_DIR")"
VENV="$("$SCRIPT_DIR/venv.sh")"
OUT="${OUT:-$REPO_DIR/.cache/soak/$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"

soak_cluster "$SCRIPT_DIR"

RUNID="$(date +%H%M%S)"
PY=(nice -n 10 "$VENV/bin/python" "$REPO_DIR/tests/soak/soak.py")
# shellcheck disable=SC2086
"${PY[@]}" run --side proxy --minutes "$MINUTES" --run-dir "$OUT/proxy" --run-id "$RUNID" \
    --binary "$BIN" ${SOAK_ARGS:-}
# shellcheck disable=SC2086
"${PY[@]}" run --side direct --minutes "$MINUTES" --run-dir "$OUT/direct" --run-id "$RUNID" \
    ${SOAK_ARGS:-}
log "runs in $OUT"
"${PY[@]}" compare --proxy "$OUT/proxy" --direct "$OUT/direct" | tee "$OUT/verdict.txt"
exit "${PIPESTATUS[0]}"

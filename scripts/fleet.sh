#!/usr/bin/env bash
# The fleet (issue 30): N autoprep sidecars on this machine in front of the three-node cluster,
# one client each, a rolling restart of all of them, then the same clients directly; what it
# costs the cluster against the issue's targets (benches/fleet/fleet.py documents each figure).
#
#   scripts/fleet.sh [--sidecars N] [--keep-cluster] [--out DIR] [--results FILE] [fleet.py args]
#
#   --sidecars N     sidecars and clients [50]
#   --keep-cluster   leave the cluster running (stopped otherwise if this script started it)
#   --out DIR        logs and the full fleet.json [<repo>/.cache/fleet/<date>-<time>]
#   --results FILE   the small JSON of the figures [benches/results/fleet-<date>.json with 50
#                    sidecars, none otherwise]
#   other arguments go to fleet.py (--rate, --warmup, --steady, --after, --direct, --grace)
#
# The cluster is tests/soak/cluster-env.sh's (127.0.0.71-73, audit log of PREPAREs on); the
# sidecars listen on 127.0.0.69:9200+i (admin 9400+i, 9600+i after the restart).
# About 9 minutes with 50 sidecars (4 of them the roll: 5 s of drain grace each).
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
# shellcheck source=../tests/soak/cluster-env.sh
source "$REPO_DIR/tests/soak/cluster-env.sh"

SIDECARS=50
KEEP=0
OUT=""
RESULTS=""
EXTRA=()
while (($#)); do
    case "$1" in
        --sidecars) SIDECARS="${2:?}"; shift 2 ;;
        --keep-cluster) KEEP=1; shift ;;
        --out) OUT="${2:?}"; shift 2 ;;
        --results) RESULTS="${2:?}"; shift 2 ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) EXTRA+=("$1"); shift ;;
    esac
done

BIN="$(soak_binary "$REPO_DIR")"
VENV="$("$SCRIPT_DIR/venv.sh")"
OUT="${OUT:-$REPO_DIR/.cache/fleet/$(date +%Y%m%d-%H%M%S)}"
if [[ -z "$RESULTS" && "$SIDECARS" == 50 ]]; then
    RESULTS="$REPO_DIR/benches/results/fleet-$(date +%F).json"
fi
mkdir -p "$OUT"

soak_cluster "$SCRIPT_DIR"

ARGS=(--sidecars "$SIDECARS" --out "$OUT" --binary "$BIN")
[[ -n "$RESULTS" ]] && ARGS+=(--results "$RESULTS")
nice -n 10 "$VENV/bin/python" "$REPO_DIR/benches/fleet/fleet.py" "${ARGS[@]}" ${EXTRA[@]+"${EXTRA[@]}"}

#!/usr/bin/env bash
# The driver matrix through autoprep: each driver runs a small legacy workload through one
# autoprep proxy and checks its results exactly (see tests/drivers/<driver>/run.sh).
#
#   tests/drivers/run.sh [DRIVER...]     drivers: java node (default: all)
#
# Starts one autoprep (with its admin endpoint) in front of AUTOPREP_TEST_UPSTREAM or the local
# node, unless AUTOPREP_DRIVER_TARGET already names one, and exports AUTOPREP_DRIVER_TARGET,
# AUTOPREP_DRIVER_ADMIN and AUTOPREP_DRIVER_DIRECT for the drivers (tests/drivers/lib/standalone.sh).
# Runs every driver even when one fails; exits non-zero if any failed.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$HERE/../.." && pwd)"
# shellcheck source=lib/standalone.sh
source "$HERE/lib/standalone.sh"

drivers=("$@")
[[ ${#drivers[@]} -gt 0 ]] || drivers=(java node)
for d in "${drivers[@]}"; do
    [[ -f "$HERE/$d/run.sh" ]] || { echo "drivers: no driver '$d' (tests/drivers/$d/run.sh)" >&2; exit 2; }
done

drivers_ensure_target "$REPO_DIR"

passed=()
failed=()
for d in "${drivers[@]}"; do
    printf '\n--> driver %s\n' "$d"
    t0=$SECONDS
    if bash "$HERE/$d/run.sh"; then
        passed+=("$d ($((SECONDS - t0)) s)")
    else
        failed+=("$d ($((SECONDS - t0)) s)")
    fi
done

printf '\ndrivers passed: %s\n' "${passed[*]:-none}"
if [[ ${#failed[@]} -gt 0 ]]; then
    printf 'drivers FAILED: %s\n' "${failed[*]}"
    exit 1
fi

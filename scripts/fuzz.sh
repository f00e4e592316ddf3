#!/usr/bin/env bash
# The fuzz targets of fuzz/ (cargo-fuzz, libFuzzer) on the stable toolchain: RUSTC_BOOTSTRAP=1
# lets cargo-fuzz's -Z flags through. cargo-fuzz is installed, pinned, when missing.
#
#   scripts/fuzz.sh smoke [--seconds S] [TARGET...]
#       every target briefly (S seconds each, default 5: well under a minute in all once
#       built), from the committed seeds in fuzz/seeds/<target>, into a scratch corpus that
#       is thrown away. Exits non-zero on the first target that crashes. CI runs this.
#   scripts/fuzz.sh campaign [--runs N] [--sanitizer none|address] [TARGET...]
#       N executions per target (default 10,000,000), one target after another, under
#       `nice -n 19`; new coverage is kept in fuzz/corpus/<target> (git-ignored). Prints per
#       target: executions, seconds, libFuzzer's cov and ft at the end, crashes; the same
#       table goes to .cache/fuzz/campaign-<date>.tsv.
#   scripts/fuzz.sh seeds [--max-kb K] [TARGET...]
#       minimizes fuzz/seeds/<target> together with fuzz/corpus/<target> (`cargo fuzz cmin`)
#       back into fuzz/seeds/<target>, refusing to leave more than K KiB (default 128) for one
#       target or files over 8 KiB; the whole seed set must stay under 1 MiB.
#   scripts/fuzz.sh list
#
# Options for every command: --sanitizer none|address (default: none; see fuzz/README.md),
# --jobs J for the build. Environment: CARGO_TARGET_DIR (default the workspace's target/),
# AUTOPREP_FUZZ_TOOLS (where cargo-fuzz is installed, default .cache/fuzz-tools).
set -euo pipefail
REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FUZZ_DIR="$REPO_DIR/fuzz"
cd "$FUZZ_DIR"

CARGO_FUZZ_VERSION=0.13.2
TARGETS=(decode segment normalize literal edits rewrite routing config)

# The dictionary each target is run with (none for routing: its input is all structure).
dict_of() {
    case "$1" in
    decode | segment | edits) echo protocol.dict ;;
    normalize | rewrite) echo cql.dict ;;
    literal) echo literal.dict ;;
    config) echo config.dict ;;
    *) echo "" ;;
    esac
}

usage() {
    sed -n '2,24p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    exit "${1:-0}"
}

command="${1:-}"
[[ -n "$command" ]] || usage 2
shift
seconds=5
runs=10000000
sanitizer=none
max_kb=128
jobs=""
targets=()
while (($#)); do
    case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --sanitizer | -s) sanitizer="$2"; shift 2 ;;
    --max-kb) max_kb="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    -h | --help) usage 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; usage 2 ;;
    *) targets+=("$1"); shift ;;
    esac
done
((${#targets[@]})) || targets=("${TARGETS[@]}")
for t in "${targets[@]}"; do
    [[ " ${TARGETS[*]} " == *" $t "* ]] || { echo "fuzz.sh: no target $t (see: fuzz.sh list)" >&2; exit 2; }
done
case "$sanitizer" in none | address) ;; *) echo "fuzz.sh: --sanitizer none or address" >&2; exit 2 ;; esac

# The workspace's target directory: the instrumented builds go under the target triple's own
# subdirectory there, apart from the host builds.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$REPO_DIR/target}"
# Instrumented builds with and without the sanitizer differ in every crate: separate
# directories, so that switching does not rebuild everything.
if [[ "$sanitizer" == none ]]; then
    build_dir="$CARGO_TARGET_DIR"
else
    build_dir="$CARGO_TARGET_DIR/fuzz-$sanitizer"
fi
export RUSTC_BOOTSTRAP=1

ensure_cargo_fuzz() {
    local tools="${AUTOPREP_FUZZ_TOOLS:-$REPO_DIR/.cache/fuzz-tools}"
    export PATH="$tools/bin:$PATH"
    if cargo fuzz --version 2>/dev/null | grep -q " $CARGO_FUZZ_VERSION\$"; then
        return
    fi
    echo "fuzz.sh: installing cargo-fuzz $CARGO_FUZZ_VERSION into $tools" >&2
    nice -n 10 cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked --root "$tools" \
        --target-dir "$CARGO_TARGET_DIR/cargo-fuzz-install" >&2
}

build() {
    local args=(fuzz build -s "$sanitizer" --target-dir "$build_dir")
    [[ -z "$jobs" ]] || args+=(--jobs "$jobs")
    nice -n 10 cargo "${args[@]}" "$@" >&2
}

binary() {
    echo "$build_dir/x86_64-unknown-linux-gnu/release/$1"
}

# libFuzzer options common to every run.
run_args() {
    local t="$1" d
    d="$(dict_of "$t")"
    echo "-artifact_prefix=$FUZZ_DIR/artifacts/$t/ -print_final_stats=1 -max_len=4096${d:+ -dict=$FUZZ_DIR/$d}"
}

# From a libFuzzer log: executions, cov, ft (of the last status line).
stats() {
    local log="$1" execs cov ft
    execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
    # Status lines only (`#N ... cov: C ft: F ...`): a crash report may print "left: [..".
    cov="$(grep '^#[0-9]' "$log" | grep -o ' cov: [0-9][0-9]*' | tail -1 | cut -d' ' -f3)"
    ft="$(grep '^#[0-9]' "$log" | grep -o ' ft: [0-9][0-9]*' | tail -1 | cut -d' ' -f3)"
    echo "${execs:-?} ${cov:-?} ${ft:-?}"
}

count_crashes() {
    local t="$1"
    find "$FUZZ_DIR/artifacts/$t" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'oom-*' -o -name 'timeout-*' -o -name 'leak-*' \) -newer "$2" 2>/dev/null | wc -l
}

cmd_smoke() {
    ensure_cargo_fuzz
    build
    local log failed=0
    scratch="$(mktemp -d "${TMPDIR:-/tmp}/autoprep-fuzz-smoke.XXXXXX")"
    trap 'rm -rf "${scratch:-}"' EXIT
    printf '%-10s %10s %6s %6s %7s %s\n' target executions cov ft crashes seconds
    for t in "${targets[@]}"; do
        mkdir -p "$scratch/$t" "$FUZZ_DIR/seeds/$t" "$FUZZ_DIR/artifacts/$t"
        log="$scratch/$t.log"
        local start=$SECONDS status=0
        touch "$scratch/$t.start"
        # shellcheck disable=SC2046
        "$(binary "$t")" $(run_args "$t") -max_total_time="$seconds" -timeout=10 \
            "$scratch/$t" "$FUZZ_DIR/seeds/$t" >"$log" 2>&1 || status=$?
        read -r execs cov ft <<<"$(stats "$log")"
        printf '%-10s %10s %6s %6s %7s %s\n' "$t" "$execs" "$cov" "$ft" \
            "$(count_crashes "$t" "$scratch/$t.start")" "$((SECONDS - start))"
        if ((status != 0)); then
            echo "fuzz.sh: $t failed (exit $status); its log:" >&2
            tail -40 "$log" >&2
            failed=1
            break
        fi
    done
    return "$failed"
}

cmd_campaign() {
    ensure_cargo_fuzz
    build
    mkdir -p "$REPO_DIR/.cache/fuzz"
    local table log
    table="$REPO_DIR/.cache/fuzz/campaign-$(date -u +%Y%m%dT%H%M%SZ).tsv"
    printf 'target\tsanitizer\texecutions\tseconds\tcov\tft\tcrashes\tcorpus_files\n' >"$table"
    printf '%-10s %-9s %12s %8s %6s %6s %7s %7s\n' target sanitizer executions seconds cov ft crashes corpus
    local failed=0
    for t in "${targets[@]}"; do
        mkdir -p "$FUZZ_DIR/corpus/$t" "$FUZZ_DIR/seeds/$t" "$FUZZ_DIR/artifacts/$t"
        log="$REPO_DIR/.cache/fuzz/$t.log"
        local start=$SECONDS status=0 mark="$REPO_DIR/.cache/fuzz/$t.start"
        touch "$mark"
        # shellcheck disable=SC2046
        nice -n 19 "$(binary "$t")" $(run_args "$t") -runs="$runs" -timeout=30 \
            "$FUZZ_DIR/corpus/$t" "$FUZZ_DIR/seeds/$t" >"$log" 2>&1 || status=$?
        read -r execs cov ft <<<"$(stats "$log")"
        local crashes files
        crashes="$(count_crashes "$t" "$mark")"
        files="$(find "$FUZZ_DIR/corpus/$t" -type f | wc -l)"
        printf '%-10s %-9s %12s %8s %6s %6s %7s %7s\n' "$t" "$sanitizer" "$execs" "$((SECONDS - start))" "$cov" "$ft" "$crashes" "$files"
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$sanitizer" "$execs" "$((SECONDS - start))" "$cov" "$ft" "$crashes" "$files" >>"$table"
        if ((status != 0)); then
            echo "fuzz.sh: $t stopped (exit $status); artifacts in fuzz/artifacts/$t; log $log" >&2
            failed=1
        fi
    done
    echo "table: $table"
    return "$failed"
}

cmd_seeds() {
    ensure_cargo_fuzz
    build
    local t tmp
    for t in "${targets[@]}"; do
        mkdir -p "$FUZZ_DIR/corpus/$t" "$FUZZ_DIR/seeds/$t"
        tmp="$(mktemp -d "${TMPDIR:-/tmp}/autoprep-fuzz-seeds.XXXXXX")"
        # Files over 8 KiB never become seeds.
        # shellcheck disable=SC2046
        nice -n 19 "$(binary "$t")" -merge=1 -max_len=8192 $(run_args "$t") \
            "$tmp" "$FUZZ_DIR/seeds/$t" "$FUZZ_DIR/corpus/$t" >"$tmp.log" 2>&1 || {
            echo "fuzz.sh: merging $t failed; see $tmp.log" >&2
            return 1
        }
        local kb
        kb=$(($(find "$tmp" -type f -printf '%s\n' | awk '{s+=$1} END {print s+0}') / 1024))
        if ((kb > max_kb)); then
            echo "fuzz.sh: $t: the minimized seeds take $kb KiB, more than --max-kb $max_kb; kept the old ones" >&2
            rm -rf "$tmp"
            continue
        fi
        rm -rf "${FUZZ_DIR:?}/seeds/$t"
        mv "$tmp" "$FUZZ_DIR/seeds/$t"
        chmod 755 "$FUZZ_DIR/seeds/$t"
        rm -f "$tmp.log"
        echo "$t: $(find "$FUZZ_DIR/seeds/$t" -type f | wc -l) seeds, $kb KiB"
    done
    local total
    total=$(($(find "$FUZZ_DIR/seeds" -type f -printf '%s\n' | awk '{s+=$1} END {print s+0}') / 1024))
    echo "all seeds: $total KiB"
    if ((total >= 1024)); then
        echo "fuzz.sh: the seed set is over 1 MiB: lower --max-kb" >&2
        return 1
    fi
}

case "$command" in
smoke) cmd_smoke ;;
campaign) cmd_campaign ;;
seeds) cmd_seeds ;;
list) printf '%s\n' "${TARGETS[@]}" ;;
-h | --help | help) usage 0 ;;
*) echo "fuzz.sh: unknown command $command" >&2; usage 2 ;;
esac

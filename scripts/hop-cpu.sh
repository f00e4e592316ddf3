#!/usr/bin/env bash
# autoprep's CPU per request with request tracing off and at given sampling ratios, natively:
# benches/examples/hop_icount.rs with HOP_CPU set prints the process's CPU time per request
# (every thread, kernel time included) over its measured region; autoprep's own is the run
# through it less the same requests sent directly, measured in the same round. The settings
# run in an order shuffled by round (below); the comparison is paired by round (a slow moment
# of the machine weighs on every setting of its round), with a 95 % bootstrap interval of the
# mean ratio.
# Usage: scripts/hop-cpu.sh [ROUNDS] [RATIO...]   (default 15 rounds, ratios 0.01)
#        HOP_BATCH=1 sends each request on its own (see benches/examples/hop_icount.rs).
#        Every run has a second, sleeping thread standing for the admin server's of a deployed
#        autoprep (HOP_IDLE_THREAD=0: without it; see the example for why it matters).
#        N=1024000 requests per run (a multiple of 64): about half a second of them, so that
#        what a tracing run pays once (the export of the last, partial batch, the flush that
#        waits for it: about 0.6 ms at 9620eff) weighs as little as in a sidecar that runs for
#        days (0.6 ns a request; at N=256000, 2.3 ns, 0.7 % of the cheapest EXECUTE).
#        HOP_BATCH=1 wants fewer (N=32000). ENDPOINT=http://host:port sends the
#        spans to a collector over http/protobuf (scripts/otelcol.sh starts one); by default
#        to a port nobody listens on, where each export fails at once. BIN names another
#        build of the example. BASE=path runs that build of the example too, in the same
#        rounds (its settings shuffled among this build's), each build's ratios taken to its
#        own "off": two builds compared under the same moments of the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p autoprep-benches --example hop_icount
rounds=${1:-15}
shift || true
ratios=("$@")
[ ${#ratios[@]} -gt 0 ] || ratios=(0.01)
bin=${BIN:-${CARGO_TARGET_DIR:-target}/release/examples/hop_icount}
N=${N:-1024000}
export HOP_IDLE_THREAD=${HOP_IDLE_THREAD:-1}
builds=(this)
[ -z "${BASE:-}" ] || builds+=(base)
# One run: KIND TARGET RATIO ("off": tracing off) [BUILD] -> ns per request.
one() {
    local b=$bin
    [ "${4:-this}" = this ] || b=$BASE
    if [ "$3" = off ]; then
        env -u OTEL_EXPORTER_OTLP_ENDPOINT HOP_CPU=1 "$b" "$1" "$2" "$N" 2>/dev/null </dev/null
    else
        HOP_CPU=1 OTEL_EXPORTER_OTLP_ENDPOINT="${ENDPOINT:-http://127.0.0.1:9}" \
            OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf OTEL_TRACES_SAMPLER=traceidratio \
            OTEL_TRACES_SAMPLER_ARG="$3" "$b" "$1" "$2" "$N" 2>/dev/null </dev/null
    fi | sed -n 's/^cpu_ns_per_request //p'
}
# The runs of a round after its direct one, in an order shuffled by round: a run's place in
# the round (first after the direct run, or after a run that exported spans to a collector
# still writing them) then weighs on every setting alike, as noise, not on one as a bias.
shuffled() {
    python3 -c 'import random, sys; l = sys.argv[2:]; random.Random(sys.argv[1]).shuffle(l); print("\n".join(l))' "$@"
}
for r in $(seq "$rounds"); do
    for kind in execute query; do
        d=$(one "$kind" direct off)
        pairs=()
        for s in off "${ratios[@]}"; do
            for b in "${builds[@]}"; do pairs+=("$s:$b"); done
        done
        while IFS=: read -r s b; do
            echo "$r $kind $s $b $(one "$kind" proxy "$s" "$b") $d"
        done < <(shuffled "$r-$kind" "${pairs[@]}")
    done
done | python3 -c '
import random, statistics, sys
runs = {}
for line in sys.stdin:
    r, kind, s, b, p, d = line.split()
    runs.setdefault((kind, b, s), {})[r] = float(p) - float(d)
    print(f"round {r} {kind:7} {b:4} {s:>5}: {float(p) - float(d):7.1f} ns autoprep ({p} through, {d} direct)", flush=True)
rng = random.Random(29)
for (kind, b, s), by_round in sorted(runs.items()):
    base = runs[(kind, b, "off")]
    med = statistics.median(by_round.values())
    line = f"{kind:7} {b:4} {s:>5}: median {med:7.1f} ns per request"
    if s != "off":
        ratios = [by_round[r] / base[r] for r in by_round]
        means = sorted(statistics.fmean(rng.choices(ratios, k=len(ratios))) for _ in range(10000))
        line += (f", paired ratio to off: median {(statistics.median(ratios) - 1) * 100:+.1f} %, "
                 f"mean {(statistics.fmean(ratios) - 1) * 100:+.1f} % "
                 f"(95 % interval {(means[250] - 1) * 100:+.1f} to {(means[9749] - 1) * 100:+.1f} %)")
    print(line)
'

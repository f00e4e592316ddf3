"""autoprep's own CPU per request with request tracing off, at 1 % and at 100 % sampling.

For each setting, a fresh autoprep (AUTOPREP_BIN, a release build for figures worth quoting) in
front of the node, exporting to a real OpenTelemetry Collector (tests/python/otelcol.py) over
http/protobuf when tracing is on; a Python client keeps WINDOW requests in flight through it:
WARMUP requests, then N prepared EXECUTEs and N literal QUERYs (rewritten into EXECUTEs by the
proxy). autoprep's CPU is utime + stime of /proc/<pid>/stat (every thread, exited ones included)
read before and after each measured part (after a first export, whose one-time costs are
start-up); the settings alternate over ROUNDS rounds and the
median of the rounds is reported. Spans are sampled only by the ratio (the slow threshold is off).

  AUTOPREP_BIN=<release binary> AUTOPREP_TEST_UPSTREAM=127.0.0.1:9042 \\
    .venv/bin/python tests/python/bench_tracing_cost.py [N] [ROUNDS]

AUTOPREP_COST_SETTINGS (comma-separated, of off, 0%, 1%, 100%) picks settings; AUTOPREP_BIN_BASE
names another binary (the branch's base, say) run as one more setting, "base", tracing off.
"""

import os
import random
import statistics
import sys
import tempfile
import time
import urllib.request

from cassandra.concurrent import execute_concurrent_with_args

import otelcol
from conftest import _free_port, _split_hostport, make_cluster, run_proxy

WARMUP = 3000
WINDOW = 64


def cpu_seconds(pid):
    """Time on CPU of every thread of `pid` (its runtime's workers, the admin server's and the
    exporter's threads live as long as the process)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(open(f"/proc/{pid}/task/{task}/schedstat").read().split()[0])
        except OSError:
            pass
    return total / 1e9


def measure(session, pid, statement, args):
    t0, c0 = time.monotonic(), cpu_seconds(pid)
    execute_concurrent_with_args(session, statement, args, concurrency=WINDOW,
                                 raise_on_first_error=True)
    return cpu_seconds(pid) - c0, time.monotonic() - t0


def one(upstream, ks, collector, ratio, n, log_dir):
    args = ["--admin", f"127.0.0.1:{_free_port()}"]
    if ratio is not None:
        args += ["--tracing-endpoint", collector.http_url, "--tracing-sample-ratio", str(ratio),
                 "--tracing-slow-ms", "0"]
    with run_proxy(upstream, log_dir, *args) as proxy:
        cluster = make_cluster(proxy.host, proxy.port, 4, None)
        try:
            s = cluster.connect(ks)
            prepared = s.prepare("SELECT v FROM t WHERE k = ?")
            keys = [(random.randrange(1000),) for _ in range(n)]
            execute_concurrent_with_args(s, prepared, keys[:WARMUP], concurrency=WINDOW)
            # Past the first export (batches every 5 s): its one-time costs (the exporter's
            # connection, its resolver thread) are start-up, not per request.
            time.sleep(6)
            execute_cpu, execute_s = measure(s, proxy.proc.pid, prepared, keys)
            # Literal QUERYs: one shape, prepared by the proxy after its first sightings.
            query = "SELECT v FROM t WHERE k = %s"
            execute_concurrent_with_args(s, query, keys[:WARMUP], concurrency=WINDOW)
            query_cpu, query_s = measure(s, proxy.proc.pid, query, keys)
        finally:
            cluster.shutdown()
        time.sleep(5.5)  # the exporter's last batch (OTEL_BSP_SCHEDULE_DELAY, 5 s)
        with urllib.request.urlopen(f"http://{args[1]}/metrics", timeout=10) as r:
            spans = [l for l in r.read().decode().splitlines()
                     if l.startswith("autoprep_trace_spans_total")]
    return {"execute_us": execute_cpu / n * 1e6, "query_us": query_cpu / n * 1e6,
            "execute_rate": n / execute_s, "query_rate": n / query_s, "spans": spans}


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 30000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    upstream = _split_hostport(os.environ.get("AUTOPREP_TEST_UPSTREAM", "127.0.0.1:9042"))
    ks = f"autoprep_cost_{random.randrange(1 << 30):x}"
    setup = make_cluster(upstream[0], upstream[1], 4, None)
    s = setup.connect()
    s.execute(f"CREATE KEYSPACE {ks} WITH replication = "
              "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    s.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v text)")
    for k in range(1000):
        s.execute(f"INSERT INTO {ks}.t (k, v) VALUES (%s, %s)", (k, "v" * 20))
    # "0%": tracing on, no span sampled (the data path's part of the cost alone).
    settings = [("off", None), ("0%", 0.0), ("1%", 0.01), ("100%", 1.0)]
    pick = os.environ.get("AUTOPREP_COST_SETTINGS")
    if pick:
        settings = [x for x in settings if x[0] in pick.split(",")]
    binary = {name: os.environ.get("AUTOPREP_BIN") for name, _ in settings}
    if os.environ.get("AUTOPREP_BIN_BASE"):
        settings.insert(0, ("base", None))
        binary["base"] = os.environ["AUTOPREP_BIN_BASE"]
    results = {name: [] for name, _ in settings}
    try:
        with tempfile.TemporaryDirectory() as d, otelcol.running(d) as collector:
            for r in range(rounds):
                for name, ratio in settings:
                    if binary[name]:
                        os.environ["AUTOPREP_BIN"] = binary[name]
                    res = one(upstream, ks, collector, ratio, n, d)
                    results[name].append(res)
                    print(f"round {r} {name:>4}: EXECUTE {res['execute_us']:.1f} us CPU "
                          f"({res['execute_rate']:.0f}/s), QUERY {res['query_us']:.1f} us "
                          f"({res['query_rate']:.0f}/s); {' '.join(res['spans'])}", flush=True)
    finally:
        s.execute(f"DROP KEYSPACE {ks}")
        setup.shutdown()
    first = settings[0][0]
    base = {k: statistics.median(r[k] for r in results[first]) for k in ("execute_us", "query_us")}
    for name, _ in settings:
        line = []
        for k in ("execute_us", "query_us"):
            med = statistics.median(r[k] for r in results[name])
            line.append(f"{k.split('_')[0].upper()} {med:.1f} us ({(med / base[k] - 1) * 100:+.1f} %)")
        print(f"median of {rounds} rounds, {name:>4}: " + ", ".join(line))
    # Paired by round (the settings alternate within each round, so a slow phase of the
    # machine or the node weighs on both): the per-round ratio to the first setting, its
    # median, and a 95 % interval of its mean (bootstrap over the rounds, fixed seed).
    rng = random.Random(29)
    for name, _ in settings[1:]:
        line = []
        for k in ("execute_us", "query_us"):
            ratios = [r[k] / b[k] for r, b in zip(results[name], results[first])]
            means = sorted(statistics.fmean(rng.choices(ratios, k=len(ratios)))
                           for _ in range(10_000))
            lo, hi = means[250], means[9_749]
            line.append(f"{k.split('_')[0].upper()} {(statistics.median(ratios) - 1) * 100:+.1f} % "
                        f"(mean {(statistics.fmean(ratios) - 1) * 100:+.1f} %, 95 % interval "
                        f"{(lo - 1) * 100:+.1f} to {(hi - 1) * 100:+.1f} %)")
        print(f"paired by round, {name:>4} / {first}: " + ", ".join(line))


if __name__ == "__main__":
    main()

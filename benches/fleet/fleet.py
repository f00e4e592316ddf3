"""The fleet (issue 30, part 3): N autoprep sidecars on this machine in front of the three-node
cluster, one client each (client.py), then a rolling restart of all of them; then the same N
clients connected directly. What it costs the cluster, against the issue's targets:

  PREPAREs     each node's audit log (category PREPARE), each line attributed to the sidecar
               process whose connection it came on (observe.py): per (sidecar life, node,
               shape), target at most 1 (a life: one process; a restart starts a new one)
  connections  established connections to each node's 9042 owned by the sidecars, against
               those of the same clients connected directly (ss), target at most 2x
  cache        each node's prepared_statements_count (system_views.cql_metrics), before and
               after each phase
  latency      every request's latency at the client; p99 of the steady phase against the p99
               of each 10 s window of the roll, target at most 5x; errors by class

    fleet.py --sidecars 50 [--rate 3] [--warmup 30] [--steady 60] [--after 30]
             [--direct 60] [--grace 5] --out DIR [--results benches/results/fleet-DATE.json]

Phases: sidecars start; clients connect (warm-up); steady; rolling restart (for each sidecar in
turn: SIGTERM, a new process on the same address at once, wait until the old one has exited,
next); after-roll; clients stop; sidecars stop; the same clients directly against the nodes
(token-aware, default policy) for --direct seconds. The cluster must be running (scripts/fleet.sh).
"""

import argparse
import datetime
import json
import math
import multiprocessing
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))

import client as client_mod   # noqa: E402
import observe   # noqa: E402

LISTEN_HOST = "127.0.0.69"
LISTEN_BASE = 9200          # sidecar i listens on LISTEN_BASE + i
ADMIN_BASE = (9400, 9600)   # sidecar i's admin port, first and second process
CLIENTS_PER_PROCESS = 10
ROLL_TAIL = 10.0            # seconds after the last old sidecar exited still counted as the roll


def log(msg):
    print(f"[fleet {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def nodes():
    return os.environ.get("AUTOPREP_CLUSTER_NODES", "127.0.0.41,127.0.0.42,127.0.0.43").split(",")


def wait_closed(host, port, timeout=15):
    """Waits until nothing accepts on host:port (a draining process closes its listener at
    SIGTERM): the new process must not be taken for ready because the old one answered."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            time.sleep(0.02)
        except OSError:
            return True
    return False


def wait_listening(host, port, proc, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


class Sidecar:
    """Sidecar i: its processes over the run (a life each)."""

    def __init__(self, i, binary, upstream, grace, out, log_level):
        self.i, self.binary, self.upstream, self.grace, self.out = i, binary, upstream, grace, out
        self.log_level = log_level
        self.port = LISTEN_BASE + i
        self.lives = []        # [{pid, start, end, gen, admin}]
        self.proc = None

    def start(self):
        gen = len(self.lives)
        admin = f"{LISTEN_HOST}:{ADMIN_BASE[min(gen, 1)] + self.i}"
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("AUTOPREP_CLUSTER_", "AUTOPREP_CACHE_DIR"))}
        env["NO_COLOR"] = "1"
        logf = open(self.out / f"sidecar-{self.i}-{gen}.log", "wb")
        if not wait_closed(LISTEN_HOST, self.port):
            raise RuntimeError(f"sidecar {self.i}: the old process still listens")
        for _ in range(50):   # bounded retries
            proc = subprocess.Popen(
                [str(self.binary), "--listen", f"{LISTEN_HOST}:{self.port}",
                 "--upstream", self.upstream, "--admin", admin, "--log", self.log_level,
                 "--worker-threads", "1", "--drain-grace-seconds", str(self.grace)],
                stdout=logf, stderr=subprocess.STDOUT, env=env)
            if wait_listening(LISTEN_HOST, self.port, proc):
                time.sleep(0.2)
                if proc.poll() is None:
                    break
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            time.sleep(0.1)
        else:
            raise RuntimeError(f"sidecar {self.i} did not start")
        logf.close()
        self.proc = proc
        self.lives.append({"pid": proc.pid, "start": time.time(), "end": None, "gen": gen,
                           "admin": admin})
        return proc

    def metrics(self):
        """The serving process's autoprep_prepares_total and related counters."""
        life = self.lives[-1]
        try:
            with urllib.request.urlopen(f"http://{life['admin']}/metrics", timeout=5) as r:
                text = r.read().decode()
        except OSError:
            return
        want = ("autoprep_prepares_total", "autoprep_literal_server_prepares_total",
                "autoprep_routed_total", "autoprep_home_connections_total",
                "autoprep_cache_adopted_total", "autoprep_client_connections ")
        life["metrics"] = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
                           for line in text.splitlines()
                           if line.startswith(want) and not line.startswith("#")}

    def drain_restart(self):
        """SIGTERM, a new process at once, then wait until the old one has exited."""
        self.metrics()
        old, life = self.proc, self.lives[-1]
        t0 = time.time()
        old.send_signal(signal.SIGTERM)
        self.start()
        try:
            code = old.wait(self.grace + 30)
        except subprocess.TimeoutExpired:
            old.kill()
            code = old.wait()
        life.update(end=time.time(), exit=code, drained_in=round(time.time() - t0, 2))
        return code

    def stop(self):
        if self.proc is None:
            return
        self.metrics()
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(self.grace + 30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.lives[-1].update(end=time.time(), exit=code)
        self.proc = None


def start_clients(tag, targets, keyspace, rate, seconds, out):
    ctx = multiprocessing.get_context("spawn")
    stop, ready = ctx.Event(), ctx.Value("i", 0)
    procs = []
    for k in range(0, len(targets), CLIENTS_PER_PROCESS):
        p = ctx.Process(target=client_mod.run_process, name=f"clients-{k}",
                        args=(k // CLIENTS_PER_PROCESS, tag,
                              targets[k:k + CLIENTS_PER_PROCESS],
                              keyspace, rate, seconds, str(out), stop, ready))
        p.start()
        procs.append(p)
    return procs, stop, ready


def wait_ready(ready, n, timeout):
    deadline = time.monotonic() + timeout
    while ready.value < n and time.monotonic() < deadline:
        time.sleep(0.5)
    return ready.value


def stop_clients(procs, stop):
    stop.set()
    for p in procs:
        p.join(120)
        if p.is_alive():
            p.terminate()
            p.join(10)


def load_requests(out, tag):
    recs = []
    for path in sorted(out.glob(f"requests-{tag}-*.jsonl")):
        with open(path, encoding="utf-8") as f:
            recs.extend(json.loads(line) for line in f if line.strip())
    return recs


def pct(values, q):
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, max(0, math.ceil(q * len(v)) - 1))]


def latency_summary(recs, t0, t1):
    lat = [r[2] for r in recs if t0 <= r[1] < t1 and r[3] is None]
    errs = {}
    for r in recs:
        if t0 <= r[1] < t1 and r[3] is not None:
            errs[r[3]] = errs.get(r[3], 0) + 1
    return {"requests": len(lat) + sum(errs.values()), "ok": len(lat),
            "p50_ms": round(pct(lat, 0.5) * 1e3, 2) if lat else None,
            "p99_ms": round(pct(lat, 0.99) * 1e3, 2) if lat else None,
            "max_ms": round(max(lat) * 1e3, 2) if lat else None, "errors": errs}


def shape_of(text):
    """The workload shape a PREPARE's text is (client.SHAPES), or the text."""
    t = " ".join(text.split()).upper()
    if t.startswith("INSERT INTO KV"):
        return "insert-kv"
    if t.startswith("SELECT V FROM KV"):
        return "select-kv"
    if t.startswith("UPDATE KV"):
        return "update-kv"
    if t.startswith("INSERT INTO EV"):
        return "insert-ev"
    return text[:80]


def create_keyspace(keyspace):
    from cassandra.cluster import Cluster
    c = Cluster(contact_points=nodes(), protocol_version=4, connect_timeout=10,
                control_connection_timeout=10)
    try:
        s = c.connect()
        s.execute(f"CREATE KEYSPACE {keyspace} WITH replication = "
                  "{'class': 'SimpleStrategy', 'replication_factor': 3}", timeout=120)
        s.execute(f"CREATE TABLE {keyspace}.kv (k text PRIMARY KEY, v text)", timeout=120)
        s.execute(f"CREATE TABLE {keyspace}.ev (p text, c int, v text, PRIMARY KEY (p, c))",
                  timeout=120)
    finally:
        c.shutdown()


def conn_summary(series):
    """{node: {median, max}} of per-snapshot connection counts."""
    out = {}
    if not series:
        return out
    for node in series[0][1]:
        vals = [per[node] for _, per in series]
        out[node] = {"median": statistics.median(vals), "max": max(vals)}
    return out


def run(args):
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    addrs = nodes()
    keyspace = f"fleet_{time.strftime('%H%M%S')}"
    cache_dir = os.environ.get("AUTOPREP_CACHE_DIR", str(REPO / ".cache"))
    prefix = os.environ.get("AUTOPREP_CLUSTER_PREFIX", "cluster")
    audits = {a: observe.audit_path(cache_dir, prefix, n) for n, a in enumerate(addrs, 1)}
    if not any(p.exists() for p in audits.values()):
        raise SystemExit("no audit.log on the nodes: start them with CASSANDRA_AUDIT=PREPARE")
    create_keyspace(keyspace)
    upstream = ",".join(f"{a}:9042" for a in addrs)
    sidecars = [Sidecar(i, args.binary, upstream, args.grace, out, args.sidecar_log)
                for i in range(args.sidecars)]
    sampler = observe.ConnSampler(addrs, period=1.0)
    sampler.start()
    marks = {}
    cache = {"before": observe.prepared_counts(addrs)}
    offsets = {a: observe.audit_size(p) for a, p in audits.items()}

    # --- through the sidecars ------------------------------------------------------------
    t = time.time()
    for s in sidecars:
        s.start()
    log(f"{len(sidecars)} sidecars up in {time.time() - t:.1f} s; keyspace {keyspace}")
    roll_budget = args.sidecars * (args.grace + 12)
    seconds = args.warmup + args.steady + roll_budget + args.after + 60
    targets = [(i, [LISTEN_HOST], s.port) for i, s in enumerate(sidecars)]
    procs, stop, ready = start_clients("proxy", targets, keyspace, args.rate, seconds, out)
    got = wait_ready(ready, len(targets), 300)
    marks["clients_connected"] = time.time()
    log(f"{got} of {len(targets)} clients connected in {marks['clients_connected'] - t:.0f} s")
    time.sleep(args.warmup)
    marks["steady_start"] = time.time()
    time.sleep(args.steady)
    marks["roll_start"] = time.time()
    cache["steady"] = observe.prepared_counts(addrs)
    roll = []
    for s in sidecars:
        t0 = time.time()
        code = s.drain_restart()
        roll.append({"sidecar": s.i, "start": t0, "end": time.time(), "old_exit": code})
        if s.i % 10 == 9:
            log(f"rolled {s.i + 1} sidecars ({time.time() - marks['roll_start']:.0f} s)")
    marks["roll_end"] = time.time()
    # The last restarted client reconnects after its old sidecar closed its connections: the
    # roll's effects last a few seconds beyond roll_end.
    marks["roll_tail_end"] = marks["roll_end"] + ROLL_TAIL
    time.sleep(args.after + ROLL_TAIL)
    marks["after_end"] = time.time()
    stop_clients(procs, stop)
    for s in sidecars:
        s.stop()
    marks["proxy_end"] = time.time()
    cache["after_roll"] = observe.prepared_counts(addrs)
    recs = load_requests(out, "proxy")
    prepares = {a: observe.read_prepares(p, offsets[a], keyspace) for a, p in audits.items()}

    # --- the same clients directly --------------------------------------------------------
    offsets_direct = {a: observe.audit_size(p) for a, p in audits.items()}
    keyspace_d = keyspace + "_d"
    create_keyspace(keyspace_d)
    targets_d = [(i, addrs, 9042) for i in range(args.sidecars)]
    procs_d, stop_d, ready_d = start_clients("direct", targets_d, keyspace_d, args.rate,
                                             args.direct + 120, out)
    got_d = wait_ready(ready_d, len(targets_d), 300)
    marks["direct_connected"] = time.time()
    log(f"{got_d} of {len(targets_d)} direct clients connected")
    time.sleep(args.direct)
    marks["direct_end"] = time.time()
    stop_clients(procs_d, stop_d)
    sampler.stop()
    cache["after_direct"] = observe.prepared_counts(addrs)
    recs_d = load_requests(out, "direct")
    prepares_d = {a: observe.read_prepares(p, offsets_direct[a], keyspace_d)
                  for a, p in audits.items()}
    client_pids_d = {p.pid for p in procs_d}

    raw = {"sidecars": [{"i": sc.i, "lives": sc.lives} for sc in sidecars],
           "ports": sampler.ports, "snapshots": sampler.snapshots, "marks": marks,
           "cache": cache, "prepares": prepares, "prepares_d": prepares_d, "roll": roll,
           "client_pids_d": sorted(client_pids_d), "keyspace": keyspace, "nodes": addrs,
           "args": {k: v for k, v in vars(args).items() if k not in ("out", "results")}}
    (out / "raw.json").write_text(json.dumps(raw))
    return analyse(args, sidecars, sampler, marks, cache, recs, recs_d, prepares, prepares_d,
                   roll, client_pids_d, keyspace)


class _Loaded:
    """A sidecar as raw.json keeps it (for --reanalyse)."""

    def __init__(self, d):
        self.i, self.lives = d["i"], d["lives"]


def reanalyse(args):
    """The figures again from a run's raw.json and request files (no cluster needed)."""
    out = Path(args.reanalyse)
    raw = json.loads((out / "raw.json").read_text())
    os.environ.setdefault("AUTOPREP_CLUSTER_NODES", ",".join(raw["nodes"]))
    sampler = observe.ConnSampler(raw["nodes"])
    sampler.ports = {int(k): v for k, v in raw["ports"].items()}
    sampler.snapshots = [(t, {int(p): c for p, c in counts.items()})
                         for t, counts in raw["snapshots"]]
    for k, v in raw["args"].items():
        if k != "reanalyse":
            setattr(args, k, v)
    args.out = str(out)
    return analyse(args, [_Loaded(d) for d in raw["sidecars"]], sampler, raw["marks"],
                   raw["cache"], load_requests(out, "proxy"), load_requests(out, "direct"),
                   {n: [tuple(x) for x in v] for n, v in raw["prepares"].items()},
                   raw["prepares_d"], raw["roll"], set(raw["client_pids_d"]), raw["keyspace"])


def analyse(args, sidecars, sampler, marks, cache, recs, recs_d, prepares, prepares_d, roll,
            client_pids_d, keyspace):
    addrs = nodes()
    life_of, start_of = {}, {}
    for s in sidecars:
        for life in s.lives:
            life_of[life["pid"]] = (s.i, life["gen"])
            start_of[(s.i, life["gen"])] = life["start"]
    # PREPAREs per (life, node, shape), split into steady (before the roll began, or a
    # second life's after its start) and all.
    per = {}
    seen = {}      # (life, node, shape) -> [(source port, time)]: which connections prepared
    unattributed = 0
    by_node_shape = {}
    for node, lines in prepares.items():
        for port, ts, text in lines:
            shape = shape_of(text)
            by_node_shape.setdefault(node, {}).setdefault(shape, 0)
            by_node_shape[node][shape] += 1
            pid = sampler.owner(port, ts)
            if pid not in life_of:
                unattributed += 1
                continue
            key = (life_of[pid], node, shape)
            per[key] = per.get(key, 0) + 1
            seen.setdefault(key, []).append((port, ts))
    n_lives = sum(len(s.lives) for s in sidecars)
    shapes = sorted({k[2] for k in per} | set(client_mod.SHAPES))
    expected_keys = n_lives * len(addrs) * len(client_mod.SHAPES)
    counts = list(per.values())
    dist = {}
    for c in counts:
        dist[c] = dist.get(c, 0) + 1
    over = sorted(((k, v) for k, v in per.items() if v > 1), key=lambda kv: -kv[1])
    prepare_stats = {
        "lives": n_lives, "nodes": len(addrs), "shapes": len(client_mod.SHAPES),
        "total": sum(sum(v.values()) for v in by_node_shape.values()),
        "attributed": sum(counts), "unattributed": unattributed,
        "per_node_shape": by_node_shape,
        "triples_with_prepares": len(per), "triples_possible": expected_keys,
        "max_per_triple": max(counts) if counts else 0,
        "mean_per_triple_with_any": round(statistics.fmean(counts), 3) if counts else 0,
        "distribution": {str(k): v for k, v in sorted(dist.items())},
        "triples_over_1": len(over),
        "worst": [{"sidecar": k[0][0], "life": k[0][1], "node": k[1], "shape": k[2], "prepares": v,
                   "connections": sorted({p for p, _ in seen[k]}),
                   "seconds_into_life": [round(t - start_of[k[0]], 1) for _, t in seen[k]]}
                  for k, v in over[:12]],
        "direct_total": sum(len(v) for v in prepares_d.values()),
    }
    # Per life: PREPAREs it sent (its own counter) against the audit's.
    life_metrics = [{"sidecar": s.i, "gen": life["gen"], **life.get("metrics", {})}
                    for s in sidecars for life in s.lives]
    # Connections per node.
    proxy_pids = set(life_of)
    conn_proxy = sampler.per_node(proxy_pids, marks["steady_start"], marks["roll_start"])
    conn_roll = sampler.per_node(proxy_pids, marks["roll_start"], marks["roll_tail_end"])
    conn_direct = sampler.per_node(client_pids_d, marks["direct_connected"] + 5,
                                   marks["direct_end"])
    cs_p, cs_d, cs_r = conn_summary(conn_proxy), conn_summary(conn_direct), conn_summary(conn_roll)
    ratio = {n: round(cs_p[n]["median"] / cs_d[n]["median"], 2)
             if cs_d.get(n, {}).get("median") else None for n in cs_p}
    # Latency.
    steady = latency_summary(recs, marks["steady_start"], marks["roll_start"])
    rolling = latency_summary(recs, marks["roll_start"], marks["roll_tail_end"])
    after = latency_summary(recs, marks["roll_tail_end"], marks["after_end"])
    direct = latency_summary(recs_d, marks["direct_connected"] + 5, marks["direct_end"])
    # Windows of 10 s over the roll (the last one takes the remainder: no short window whose
    # p99 would be its maximum).
    windows = []
    w = 10.0
    n_win = max(1, int((marks["roll_tail_end"] - marks["roll_start"]) // w))
    for k in range(n_win):
        t0 = marks["roll_start"] + k * w
        t1 = marks["roll_tail_end"] if k == n_win - 1 else t0 + w
        windows.append({"start_s": round(t0 - marks["roll_start"], 1),
                        **latency_summary(recs, t0, t1)})
    timeline = []
    for phase, rs, a, b in (("proxy", recs, marks["clients_connected"], marks["after_end"]),
                            ("direct", recs_d, marks["direct_connected"], marks["direct_end"])):
        t0 = a
        while t0 + w <= b + 0.5 and len(timeline) < 1000:
            x = latency_summary(rs, t0, t0 + w)
            timeline.append({"phase": phase, "t_s": round(t0 - marks["clients_connected"], 1),
                             "p99_ms": x["p99_ms"], "requests": x["requests"],
                             "errors": sum(x["errors"].values())})
            t0 += w
    p99s = steady["p99_ms"]
    worst = max((x for x in windows if x["p99_ms"] is not None), key=lambda x: x["p99_ms"],
                default=None)
    # The restarted client itself, from 2 s before its sidecar's SIGTERM to 5 s after the old
    # process exited.
    own = [r for r in recs for x in roll
           if r[0] == x["sidecar"] and x["start"] - 2 <= r[1] < x["end"] + 5]
    own_lat = [r[2] for r in own if r[3] is None]
    own_err = {}
    for r in own:
        if r[3] is not None:
            own_err[r[3]] = own_err.get(r[3], 0) + 1
    # Cache growth: statements added = the count's growth + the evictions in between (a cache
    # at its bound evicts as it adds).
    def grow(a, b):
        out = {}
        for n in addrs:
            d_count = cache[b][n].get("prepared_statements_count", 0) \
                - cache[a][n].get("prepared_statements_count", 0)
            d_evicted = cache[b][n].get("prepared_statements_evicted", 0) \
                - cache[a][n].get("prepared_statements_evicted", 0)
            out[n] = {"count": round(d_count), "evicted": round(d_evicted),
                      "added": round(d_count + d_evicted)}
        return out
    result = {
        "date": datetime.date.today().isoformat(),
        "sidecars": args.sidecars, "rate_per_client": args.rate,
        "phases_s": {"warmup": args.warmup, "steady": args.steady,
                     "roll": round(marks["roll_end"] - marks["roll_start"], 1),
                     "after": args.after, "direct": args.direct},
        "drain_grace_s": args.grace, "keyspace": keyspace, "replication": "SimpleStrategy RF 3",
        "targets": {"prepares_per_triple_max": 1, "connections_ratio_max": 2.0,
                    "roll_p99_ratio_max": 5.0},
        "prepares": prepare_stats,
        "connections_per_node": {"proxy_steady": cs_p, "proxy_roll": cs_r, "direct": cs_d,
                                 "ratio_median": ratio},
        "prepared_cache_growth": {"steady": grow("before", "steady"),
                                  "roll": grow("steady", "after_roll"),
                                  "direct": grow("after_roll", "after_direct")},
        "latency": {"steady": steady, "roll": rolling, "after_roll": after, "direct": direct,
                    "roll_worst_10s_window": worst,
                    "timeline_10s": timeline,
                    "marks_s": {k: round(v - marks["clients_connected"], 1)
                                for k, v in marks.items()},
                    "roll_worst_ratio": round(worst["p99_ms"] / p99s, 2) if worst and p99s else None,
                    "restarted_client": {"requests": len(own), "ok": len(own_lat),
                                         "p99_ms": round(pct(own_lat, 0.99) * 1e3, 2)
                                         if own_lat else None, "errors": own_err}},
        "roll_exits": sorted({x["old_exit"] for x in roll}),
        "sidecar_lives": life_metrics,
    }
    verdict = {
        "prepares": prepare_stats["max_per_triple"] <= 1,
        "connections": all(r is not None and r <= 2.0 for r in ratio.values()),
        "latency": result["latency"]["roll_worst_ratio"] is not None
        and result["latency"]["roll_worst_ratio"] <= 5.0,
    }
    result["verdict"] = verdict
    Path(args.out, "fleet.json").write_text(json.dumps(result, indent=1, sort_keys=True))
    if args.results:
        small = {k: v for k, v in result.items() if k != "sidecar_lives"}
        small["latency"] = {k: v for k, v in result["latency"].items()}
        small["sidecar_prepares_counter"] = summarize_lives(life_metrics)
        Path(args.results).write_text(json.dumps(small, indent=1, sort_keys=True) + "\n")
    log(f"PREPAREs: max {prepare_stats['max_per_triple']} per (life, node, shape), "
        f"distribution {prepare_stats['distribution']}, {unattributed} unattributed; "
        f"connections per node (median) through sidecars {({n: v['median'] for n, v in cs_p.items()})}"
        f", direct {({n: v['median'] for n, v in cs_d.items()})}, ratio {ratio}; p99 steady "
        f"{p99s} ms, worst roll window {worst['p99_ms'] if worst else None} ms "
        f"(x{result['latency']['roll_worst_ratio']}); verdict {verdict}")
    return 0 if all(verdict.values()) else 1


def summarize_lives(lives):
    tot = {}
    for life in lives:
        for k, v in life.items():
            if k.startswith("autoprep_"):
                tot[k] = tot.get(k, 0) + v
    return {"lives": len(lives), "sums": tot}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sidecars", type=int, default=50)
    ap.add_argument("--rate", type=float, default=3.0, help="requests/s per client")
    ap.add_argument("--warmup", type=float, default=60)
    ap.add_argument("--steady", type=float, default=60)
    ap.add_argument("--after", type=float, default=30)
    ap.add_argument("--direct", type=float, default=60)
    ap.add_argument("--grace", type=int, default=5)
    ap.add_argument("--sidecar-log", default="info", help="the sidecars' --log filter")
    ap.add_argument("--out")
    ap.add_argument("--reanalyse", metavar="DIR", help="the figures again from a run's files")
    ap.add_argument("--results")
    ap.add_argument("--binary", default=os.environ.get("AUTOPREP_BIN",
                                                       "/work/target/release/autoprep"))
    args = ap.parse_args()
    if args.reanalyse:
        sys.exit(reanalyse(args))
    if not args.out:
        ap.error("--out is required")
    sys.exit(run(args))


if __name__ == "__main__":
    main()

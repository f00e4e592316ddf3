"""The soak (issue 30, part 2): one side of it per `run`, the verdict from `compare`.

    soak.py run --side proxy|direct --minutes N --run-dir DIR [--binary PATH] ...
    soak.py compare --proxy DIR --direct DIR [--max-drift 0.05]

`run` drives the mixed workload (workload.py) against autoprep with routing in front of the
three-node cluster (side proxy) or against the nodes with a token-aware driver (side direct),
for N minutes, while the fault schedule (faults.py) runs; then brings every node back, reads
every table the ledger names at consistency ALL directly from the nodes, checks the ledger
(ledger.py) and writes DIR/result.json. Side proxy also samples autoprep's RSS and descriptors
(drift.py). The cluster must be running (scripts/soak.sh starts it).

`compare` prints both sides' figures and, last, the line
    soak: N writes acknowledged, 0 lost, ...
and exits 1 when a side lost an acknowledged write, the proxy side has an error class the
direct side does not, autoprep drifted more than --max-drift, a workload process failed, or
autoprep panicked or did not exit 0 after a drain.
"""

import argparse
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import drift as drift_mod   # noqa: E402
import errors as errors_mod   # noqa: E402
import faults as faults_mod   # noqa: E402
import ledger as ledger_mod   # noqa: E402
import workload as workload_mod   # noqa: E402

LISTEN = "127.0.0.70:9043"          # autoprep in the soak: an address of its own
ADMIN_HOST, ADMIN_PORT = "127.0.0.70", 9100     # + 1 for each restart
CLIENT_SETTINGS = [(4, None), (5, None), (4, "lz4"), (5, "lz4")]   # per process, in turn


def log(msg):
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def node_addresses():
    return os.environ.get("AUTOPREP_CLUSTER_NODES",
                          "127.0.0.41,127.0.0.42,127.0.0.43").split(",")


def direct_session(consistency=None):
    from cassandra import ConsistencyLevel
    from cassandra.cluster import Cluster, EXEC_PROFILE_DEFAULT, ExecutionProfile
    from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy
    profile = ExecutionProfile(
        load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy(local_dc="dc1")),
        consistency_level=consistency or ConsistencyLevel.QUORUM, request_timeout=60)
    c = Cluster(contact_points=node_addresses(), protocol_version=4,
                execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                connect_timeout=10, control_connection_timeout=10)
    return c, c.connect()


def target_session(side, keyspace):
    """The schema changer's own session, on the side's target."""
    from cassandra.cluster import Cluster
    if side == "proxy":
        host, port = LISTEN.rsplit(":", 1)
        c = Cluster(contact_points=[host], port=int(port), protocol_version=4,
                    connect_timeout=10, control_connection_timeout=10)
    else:
        c = Cluster(contact_points=node_addresses(), protocol_version=4,
                    connect_timeout=10, control_connection_timeout=10)
    return c, c.connect(keyspace)


def read_back(keyspace, tables):
    """{table: {key: row dict}} of every row, read at ALL on the nodes (no autoprep)."""
    from cassandra import ConsistencyLevel
    from cassandra.query import SimpleStatement
    cluster, session = direct_session(ConsistencyLevel.ALL)
    out = {}
    try:
        for tb in tables:
            pk = ("p", "c") if tb == "ev" else ("k",)
            last = None
            for attempt in range(5):
                try:
                    rows = {}
                    for r in session.execute(SimpleStatement(
                            f"SELECT * FROM {keyspace}.{tb}", fetch_size=2000), timeout=120):
                        d = r._asdict()
                        key = "|".join(str(d.pop(c)) for c in pk)
                        rows[key] = d
                    out[tb] = rows
                    break
                except Exception as e:  # noqa: BLE001 - retried
                    last = e
                    log(f"read-back of {tb} at ALL failed ({errors_mod.classify(e)}), again")
                    time.sleep(5)
            else:
                raise RuntimeError(f"read-back of {tb} failed 5 times: {last!r}")
    finally:
        cluster.shutdown()
    return out


def create_schema(keyspace):
    cluster, session = direct_session()
    try:
        session.execute(f"CREATE KEYSPACE {keyspace} WITH replication = "
                        "{'class': 'SimpleStrategy', 'replication_factor': 3}", timeout=120)
        for cql in workload_mod.SCHEMA:
            session.execute(cql.replace("TABLE IF NOT EXISTS ",
                                        f"TABLE IF NOT EXISTS {keyspace}."), timeout=120)
    finally:
        cluster.shutdown()


def fault_windows(fault_log, settle, drain_exits):
    """[(start, end, label)] in seconds from the run's start: the time each fault action's
    effects can last (a kill until its node is back, plus `settle`; a drain until the old
    process has exited, plus `settle`)."""
    out = []
    for i, f in enumerate(fault_log):
        a = f["at"]
        label = f"{f['action']}{'' if f['node'] is None else ' node ' + str(f['node'])} @{a:.0f}s"
        if f["action"] == "kill":
            back = next((g for g in fault_log[i + 1:]
                         if g["action"] == "start" and g["node"] == f["node"]), None)
            end = back["at"] + back["took"] if back else float("inf")
            out.append((a, end + settle, "kill -9 " + label[5:]))
        elif f["action"] == "drain":
            took = drain_exits.pop(0)["drained_in"] if drain_exits else f["took"]
            out.append((a, a + took + settle, label))
        elif f["action"] != "start":
            out.append((a, a + f["took"] + settle, label))
    return out


def attribute(error_times, windows, t_start):
    """{class: {fault label or "no fault": count}}: each error with the latest fault whose
    window holds it."""
    out = {}
    for t, cls in error_times:
        rel = t - t_start
        inside = [w for w in windows if w[0] <= rel <= w[1]]
        label = max(inside)[2] if inside else "no fault"
        per = out.setdefault(cls, {})
        per[label] = per.get(label, 0) + 1
    return out


def run(args):
    run_dir = Path(args.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    seconds = args.minutes * 60
    runid = args.run_id or time.strftime("%H%M%S")
    keyspace = f"soak_{args.side}_{runid}"
    events = faults_mod.schedule(seconds)
    log(f"side {args.side}, {args.minutes} min, keyspace {keyspace}, schedule: "
        + ", ".join(f"{t:.0f}s {a}{'' if n is None else ' ' + str(n)}" for t, a, n in events))

    control = faults_mod.ClusterControl(log)
    control.ensure_all_up()
    create_schema(keyspace)
    state = faults_mod.FaultState(settle=args.settle)
    addresses = node_addresses()

    proxy = None
    if args.side == "proxy":
        # The drain hands client connections to the new process (design change 3): both
        # processes name the same socket.
        extra = ["--log", "info", "--literal-statements-bytes", str(args.literal_bytes),
                 "--drain-grace-seconds", str(args.drain_grace),
                 "--handover-socket", str(run_dir / "handover.sock")]
        proxy = faults_mod.ProxyProcess(args.binary, LISTEN, ADMIN_HOST, ADMIN_PORT,
                                        ",".join(f"{a}:9042" for a in addresses), run_dir,
                                        extra, log)
        proxy.start()
        log(f"autoprep {proxy.pid()} on {LISTEN}")
        host, port = LISTEN.rsplit(":", 1)
        hosts, port = [host], int(port)

        def targets():
            return [(host, port)]
    else:
        hosts, port = addresses, 9042

        def targets():
            broken = state.broken()
            return [(a, 9042) for i, a in enumerate(addresses, 1) if i not in broken]

    sampler = None
    if proxy is not None:
        sampler = drift_mod.Sampler(proxy.pid, state.steady, period=args.sample_period)

    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    schema_gen = ctx.Value("i", 0)
    procs = []
    for i in range(args.processes):
        pv, comp = CLIENT_SETTINGS[i % len(CLIENT_SETTINGS)]
        spec = {"index": i, "hosts": hosts, "port": port, "keyspace": keyspace,
                "protocol_version": pv, "compression": comp, "threads": args.threads,
                "rate": args.rate, "seconds": seconds, "seed": args.seed, "local_dc": "dc1",
                "run_dir": str(run_dir)}
        p = ctx.Process(target=workload_mod.run_process, args=(spec, stop, schema_gen),
                        name=f"client-{i}")
        p.start()
        procs.append(p)

    ddl = workload_mod.Counters()
    fault_log = []
    disconnector = faults_mod.Disconnector(targets, keyspace, seconds)
    t_start = time.time()
    if sampler is not None:
        sampler.start()
    disconnector.start()
    admin_cluster = None
    killed = {}
    try:
        admin_cluster, admin = target_session(args.side, keyspace)
        gen = 0
        for at, action, node in events:
            delay = t_start + at - time.time()
            if delay > 0:
                time.sleep(delay)
            t0 = time.time()
            entry = {"at": round(t0 - t_start, 1), "planned": at, "action": action,
                     "node": node}
            try:
                if action == "kill":
                    state.begin("down", node)
                    control.kill(node)
                    killed[node] = True
                elif action == "start":
                    control.start_node(node)
                    killed.pop(node, None)
                    state.end("down", node)
                elif action == "pause":
                    state.begin("paused", node)
                    pid = control.pause(node)
                    time.sleep(faults_mod.PAUSE_SECONDS)
                    control.resume(pid)
                    state.end("paused", node)
                elif action == "schema":
                    gen += 1
                    for cql in workload_mod.schema_change_statements(gen):
                        try:
                            admin.execute(cql, timeout=60)
                        except Exception as e:  # noqa: BLE001 - counted like the workload's
                            ddl.op("ddl")
                            ddl.error(errors_mod.classify(e), "ddl")
                            raise
                        ddl.op("ddl")
                    schema_gen.value = gen
                elif action == "drain":
                    if proxy is not None:
                        proxy.drain_restart()
                    else:
                        entry["note"] = "no autoprep in the direct run"
            except Exception as e:  # noqa: BLE001 - recorded; the schedule goes on
                entry["failed"] = repr(e)[:300]
                log(f"fault {action} failed: {e!r}"[:400])
            entry["took"] = round(time.time() - t0, 1)
            fault_log.append(entry)
            log(f"{entry['at']:7.1f}s {action}{'' if node is None else ' node ' + str(node)}"
                f" ({entry['took']} s){' FAILED' if 'failed' in entry else ''}")
        delay = t_start + seconds - time.time()
        if delay > 0:
            time.sleep(delay)
    finally:
        stop.set()
        t_end = time.time()
        for p in procs:
            p.join(180)
            if p.is_alive():
                log(f"client process {p.name} did not end: terminating it")
                p.terminate()
                p.join(10)
        disconnector.stop()
        if sampler is not None:
            sampler.stop()
        if admin_cluster is not None:
            admin_cluster.shutdown()
        control.ensure_all_up()
        if proxy is not None:
            proxy.stop()

    log(f"workload ended after {t_end - t_start:.0f} s; reading every row back at ALL")
    led = ledger_mod.Ledger.load(run_dir)
    t0 = time.time()
    rows = read_back(keyspace, led.tables())
    check = led.check(lambda tb: rows.get(tb, {}))
    log(f"ledger: {check.acknowledged} acknowledged row writes ({check.statements} statements), "
        f"{check.unknown} unknown, {check.keys_checked} keys checked, {check.lost} lost "
        f"(read back in {time.time() - t0:.0f} s)")

    ops, errs, notes, fatal, error_times = {}, {}, {}, [], []
    for i in range(args.processes):
        path = run_dir / f"result-p{i}.json"
        if not path.exists():
            fatal.append(f"client {i}: no result file")
            continue
        r = json.loads(path.read_text())
        if r.get("fatal"):
            fatal.append(f"client {i}: {r['fatal'][-500:]}")
        for k, v in r["ops"].items():
            ops[k] = ops.get(k, 0) + v
        for cls, per in r["errors"].items():
            for k, v in per.items():
                errs.setdefault(cls, {})[k] = errs.setdefault(cls, {}).get(k, 0) + v
        for k, v in r["notes"].items():
            notes[k] = notes.get(k, 0) + v
        error_times.extend(r.get("error_times", []))
    for cls, per in ddl.errors.items():
        for k, v in per.items():
            errs.setdefault(cls, {})[k] = errs.setdefault(cls, {}).get(k, 0) + v
    ops["ddl"] = ddl.ops.get("ddl", 0)

    result = {
        "side": args.side, "minutes": args.minutes, "keyspace": keyspace,
        "seconds_run": round(t_end - t_start, 1), "processes": args.processes,
        "threads": args.threads, "rate_per_thread": args.rate,
        "ops": ops, "ops_total": sum(ops.values()), "errors": errs,
        "error_total": sum(sum(v.values()) for v in errs.values()),
        "notes": notes, "fatal": fatal, "faults": fault_log,
        "errors_by_fault": attribute(
            error_times, fault_windows(fault_log, args.settle,
                                       [e for e in (proxy.exits if proxy else [])]), t_start),
        "disconnector": {"done": disconnector.done, "errors": disconnector.errors},
        "ledger": check.to_json(),
    }
    if proxy is not None:
        # 60 s windows from 10 minutes on; 15 s below, so that the quick check's few quiet
        # stretches between its faults hold two windows or more.
        window = 60.0 if args.minutes >= 10 else 15.0
        result["drift"] = {
            "definition": drift_mod.__doc__.split("Drift, precisely (drift()):")[1].strip(),
            "window_seconds": window, "settle_seconds": args.settle,
            "steady": drift_mod.drift(sampler.samples, t_start, t_end, proxy.serving, window,
                                      args.settle, steady_only=True),
            "all_samples": drift_mod.drift(sampler.samples, t_start, t_end, proxy.serving,
                                           window, args.settle, steady_only=False),
        }
        result["samples"] = len(sampler.samples)
        with open(run_dir / "samples.jsonl", "w", encoding="utf-8") as f:
            for s in sampler.samples:
                f.write(json.dumps({**s, "t": round(s["t"] - t_start, 1)}) + "\n")
        result["autoprep_exits"] = proxy.exits
        result["autoprep_processes"] = [
            {"pid": pid, "started_s": round(t - t_start, 1),
             "serving_alone_s": round(proxy.serving[pid] - t_start, 1)
             if pid in proxy.serving else None} for pid, t in proxy.starts.items()]
        logs = sorted(run_dir.glob("autoprep-*.log"))
        text = "".join(p.read_text(errors="replace") for p in logs)
        result["autoprep_log"] = {
            "panicked": "panicked" in text,
            "warn_lines": sum(" WARN " in line for line in text.splitlines()),
            "error_lines": sum(" ERROR " in line for line in text.splitlines()),
        }
        result["autoprep_metrics_note"] = "see autoprep-*.log; /metrics is not kept"
    (run_dir / "result.json").write_text(json.dumps(result, indent=1, sort_keys=True))
    log(f"side {args.side}: {result['ops_total']} operations, {result['error_total']} errors in "
        f"{len(errs)} classes; result in {run_dir / 'result.json'}")
    return 0


def fmt_classes(errs):
    return "; ".join(f"{cls} x{sum(per.values())}" for cls, per in sorted(errs.items())) or "none"


def compare(args):
    p = json.loads(Path(args.proxy, "result.json").read_text())
    d = json.loads(Path(args.direct, "result.json").read_text())
    problems = []
    for side, r in (("through autoprep", p), ("direct", d)):
        led = r["ledger"]
        print(f"{side}: {r['ops_total']} operations in {r['seconds_run']:.0f} s, "
              f"{led['acknowledged']} row writes acknowledged ({led['statements']} statements), "
              f"{led['unknown']} with an unknown outcome, {led['keys_checked']} keys read back "
              f"at ALL, {led['lost']} lost")
        print(f"  error classes: {fmt_classes(r['errors'])}")
        print(f"  faults: " + ", ".join(
            f"{f['at']:.0f}s {f['action']}{'' if f['node'] is None else ' ' + str(f['node'])}"
            f"{' FAILED' if 'failed' in f else ''}" for f in r["faults"]))
        if led["lost"]:
            problems.append(f"{led['lost']} lost {side}")
        if r["fatal"]:
            problems.append(f"client failure {side}: {r['fatal'][0][:200]}")
        if any("failed" in f for f in r["faults"]):
            problems.append(f"a fault action failed {side}")
    extra = errors_mod.extra_classes(p["errors"], d["errors"])
    if extra:
        problems.append("error classes only through autoprep: " + ", ".join(extra))
        for cls in extra:
            per = p.get("errors_by_fault", {}).get(cls, {})
            print(f"  only through autoprep: {cls} x{sum(p['errors'][cls].values())}, during: "
                  + ", ".join(f"{k} x{v}" for k, v in sorted(per.items(), key=lambda kv: -kv[1])))
    dr = p["drift"]["steady"]
    rss, fds = dr["rss_kib"]["drift"], dr["fds"]["drift"]
    measured = max((s["windows"] for s in dr["rss_kib"]["segments"]), default=0) >= 2
    if not measured:
        problems.append("drift not measured: no segment has two windows of steady samples")
    allr = p["drift"]["all_samples"]
    print(f"autoprep drift over the last three quarters, steady samples, "
          f"{p['drift']['window_seconds']:.0f} s windows: RSS {rss:.1%} "
          f"(windows per segment {[s['windows'] for s in dr['rss_kib']['segments']]}), "
          f"descriptors {fds:.1%}; all samples: RSS {allr['rss_kib']['drift']:.1%}, "
          f"descriptors {allr['fds']['drift']:.1%}")
    for seg in dr["fds"]["segments"]:
        if seg.get("kinds_low") != seg.get("kinds_high") and "kinds_low" in seg:
            print(f"  descriptors of process {seg['pid']}: lowest window {seg['kinds_low']}, "
                  f"highest {seg['kinds_high']}")
    if "rss_anon_kib" in dr:
        print(f"  of RSS, steady: anonymous (heap, stacks) {dr['rss_anon_kib']['drift']:.1%}, "
              f"file pages (the binary's code) {dr['rss_file_kib']['drift']:.1%}")
    if max(rss, fds) > args.max_drift:
        problems.append(f"drift above {args.max_drift:.0%}: RSS {rss:.1%}, descriptors {fds:.1%}")
    if p["autoprep_log"]["panicked"]:
        problems.append("autoprep panicked")
    bad_exits = [e for e in p["autoprep_exits"] if e["code"] != 0]
    if bad_exits:
        problems.append(f"autoprep exits not 0: {bad_exits}")
    print(f"autoprep exits: {p['autoprep_exits']}; log: {p['autoprep_log']}")
    if problems:
        print("FAILED: " + " | ".join(problems))
    lp, ld = p["ledger"], d["ledger"]
    print(f"soak: {lp['acknowledged']} writes acknowledged, {lp['lost']} lost through autoprep "
          f"(direct: {ld['acknowledged']}, {ld['lost']} lost); error classes "
          f"{len(p['errors'])} through autoprep, {len(d['errors'])} direct, "
          f"{len(extra)} only through autoprep{(': ' + ', '.join(extra)) if extra else ''}; "
          + (f"drift RSS {rss:.1%}, descriptors {fds:.1%} (limit {args.max_drift:.0%}); "
             if measured else "drift not measured (too few steady windows); ")
          + ("FAIL" if problems else "PASS"))
    return 1 if problems else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--side", choices=("proxy", "direct"), required=True)
    r.add_argument("--minutes", type=float, default=30)
    r.add_argument("--run-dir", required=True)
    r.add_argument("--run-id")
    r.add_argument("--binary", default=os.environ.get("AUTOPREP_BIN",
                                                      "/work/target/release/autoprep"))
    r.add_argument("--processes", type=int, default=4)
    r.add_argument("--threads", type=int, default=3)
    r.add_argument("--rate", type=float, default=6.0, help="operations/s per thread")
    r.add_argument("--seed", default="soak")
    r.add_argument("--settle", type=float, default=10.0)
    r.add_argument("--sample-period", type=float, default=2.0)
    # autoprep's map of statements prepared with literals inline: small, so that it reaches
    # its bound in the first minute and the drift sees it full (about 360 bytes a statement;
    # the default 16 MiB would fill for hours at this rate, and RSS with it).
    r.add_argument("--literal-bytes", type=int, default=64 << 10)
    r.add_argument("--drain-grace", type=int, default=20)
    c = sub.add_parser("compare")
    c.add_argument("--proxy", required=True)
    c.add_argument("--direct", required=True)
    c.add_argument("--max-drift", type=float, default=0.05)
    args = ap.parse_args()
    sys.exit(run(args) if args.cmd == "run" else compare(args))


if __name__ == "__main__":
    main()

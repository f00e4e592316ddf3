"""The fleet's clients: one Python-driver client (a Cluster, as one application pod has one)
per sidecar, several per process, each one thread at a fixed rate running the same small
legacy workload of unprepared statements with their literals inline, four shapes:

    INSERT INTO kv (k, v) VALUES ('<key>', '<value>')
    SELECT v FROM kv WHERE k = '<key>'
    UPDATE kv SET v = '<value>' WHERE k = '<key>'
    INSERT INTO ev (p, c, v) VALUES ('<part>', <n>, '<value>')

Every request's start time, latency and outcome (None, or the error class of
tests/soak/errors.py) are written at the end to <out>/requests-<tag>-<index>.jsonl as
[client, start (unix s), latency (s), error] arrays, per process and phase (tag).
"""

import json
import os
import random
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "soak"))

SHAPES = ("insert-kv", "select-kv", "update-kv", "insert-ev")
MAX_RECORDS = 400_000          # per process


def lit(s):
    return "'" + s.replace("'", "''") + "'"


def connect(hosts, port, keyspace, attempts=20):
    from cassandra import ConsistencyLevel
    from cassandra.cluster import Cluster, EXEC_PROFILE_DEFAULT, ExecutionProfile
    from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy
    profile = ExecutionProfile(
        load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy(local_dc="dc1")),
        consistency_level=ConsistencyLevel.QUORUM, request_timeout=10)
    last = None
    for _ in range(attempts):
        c = Cluster(contact_points=hosts, port=port, protocol_version=4,
                    execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                    connect_timeout=10, control_connection_timeout=10)
        try:
            return c, c.connect(keyspace)
        except Exception as e:  # noqa: BLE001 - retried
            last = e
            c.shutdown()
            time.sleep(2)
    raise RuntimeError(f"no connection to {hosts}:{port}: {last!r}")


def client_loop(cid, session, rate, stop, deadline, records, lock):
    from errors import classify
    rng = random.Random(cid)
    keys = []
    period = 1.0 / rate
    next_t = time.monotonic()
    n = 0
    max_ops = int(rate * (deadline - time.monotonic())) + 10
    while not stop.is_set() and time.monotonic() < deadline and n < max_ops:
        n += 1
        shape = SHAPES[n % len(SHAPES)]
        v = f"v{rng.randrange(1 << 30)}"
        if shape == "insert-kv" or not keys:
            k = f"c{cid}-{n}"
            keys.append(k)
            if len(keys) > 200:
                keys.pop(0)
            cql = f"INSERT INTO kv (k, v) VALUES ({lit(k)}, {lit(v)})"
        elif shape == "select-kv":
            cql = f"SELECT v FROM kv WHERE k = {lit(rng.choice(keys))}"
        elif shape == "update-kv":
            cql = f"UPDATE kv SET v = {lit(v)} WHERE k = {lit(rng.choice(keys))}"
        else:
            cql = (f"INSERT INTO ev (p, c, v) VALUES ({lit(f'c{cid}-p{n % 16}')}, {n}, "
                   f"{lit(v)})")
        t0 = time.time()
        p0 = time.perf_counter()
        err = None
        try:
            session.execute(cql)
        except Exception as e:  # noqa: BLE001 - classified
            err = classify(e)
        lat = time.perf_counter() - p0
        with lock:
            if len(records) < MAX_RECORDS:
                records.append([cid, round(t0, 4), round(lat, 6), err])
        next_t += period
        delay = next_t - time.monotonic()
        if delay > 0:
            stop.wait(delay)
        elif delay < -1.0:
            next_t = time.monotonic()


def run_process(index, tag, targets, keyspace, rate, seconds, out_dir, stop, ready):
    """targets: [(client id, [hosts], port)]; `stop` a multiprocessing Event; `ready` a
    multiprocessing Value incremented when a client is connected."""
    records, lock = [], threading.Lock()
    clusters, threads, fatal = [], [], []
    local_stop = threading.Event()
    deadline = time.monotonic() + seconds
    try:
        for cid, hosts, port in targets:
            c, s = connect(hosts, port, keyspace)
            clusters.append(c)
            with ready.get_lock():
                ready.value += 1
            th = threading.Thread(target=client_loop, daemon=True,
                                  args=(cid, s, rate, local_stop, deadline, records, lock))
            threads.append(th)
        for th in threads:
            th.start()
        while not stop.wait(0.5) and time.monotonic() < deadline:
            pass
    except Exception as e:  # noqa: BLE001 - reported
        fatal.append(repr(e))
    finally:
        local_stop.set()
        for th in threads:
            th.join(30)
        for c in clusters:
            try:
                c.shutdown()
            except Exception:  # noqa: BLE001
                pass
    with open(os.path.join(out_dir, f"requests-{tag}-{index}.jsonl"), "w",
              encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    if fatal:
        with open(os.path.join(out_dir, f"fatal-{tag}-{index}.txt"), "w",
                  encoding="utf-8") as f:
            f.write("\n".join(fatal))

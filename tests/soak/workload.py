"""The soak's mixed legacy workload: client processes of the Python driver, several threads
each, running at a fixed rate against one target (autoprep, or the nodes directly), writing
every row write to the ledger (ledger.py) and counting every error by class (errors.py).

Statement kinds (weights in KINDS), all at QUORUM (LWT: serial consistency SERIAL):

  text-insert      INSERT with literals inline, as a QUERY (a new key; after a schema change
                   also the added column)
  text-update      UPDATE ... SET v = '...' WHERE k = '...' of a key this thread wrote
  text-delete      DELETE of such a key
  text-select      SELECT v, n ... WHERE k = '...': must read what this thread wrote last
  text-select-star SELECT * of such a key (its columns change with ALTER TABLE)
  litprep-insert   the same INSERT through PREPARE, then EXECUTE (a statement prepared with its
                   literals inline, used once: gocql's and fmt-built legacy code's pattern)
  litprep-select   a SELECT prepared with its literal, executed once, checked
  prep-insert      INSERT prepared with markers once per process, executed with values
  prep-select      SELECT prepared with a marker, checked
  batch-unlogged   BATCH message, UNLOGGED, three client-prepared INSERTs of one partition of ev
  batch-logged-text  BEGIN BATCH INSERT kv; INSERT ev APPLY BATCH (text, logged, two tables)
  batch-logged-msg BATCH message, LOGGED, two INSERTs with literals as text children
  lwt-insert       INSERT ... IF NOT EXISTS (a new key of lwt)
  lwt-update       UPDATE lwt SET v = 'aN+1' ... IF v = 'aN'
  paging-read      SELECT c, v FROM ev WHERE p = '...' with 7 rows a page, every page: the rows
                   must be the ones this thread's acknowledged writes put there (and maybe some
                   of its unknown ones)
  extra-insert     INSERT into the table the last schema change created

A check that fails (a read that does not give what this thread's acknowledged writes left) is
counted as an error of class "check: <what>". An LWT that answers "not applied" with the value
it meant to write is counted as applied (the driver retried it on another host after a
connection error, and the first attempt had applied): "lwt applied by a retry" in the notes.

Run as a process per client (multiprocessing, spawn): run_process(spec, stop, schema_gen).
Each process writes ledger-p<i>t<j>.jsonl and, at the end, result-p<i>.json into the run
directory.
"""

import json
import os
import random
import threading
import time
import traceback

KINDS = {
    "text-insert": 14,
    "text-update": 6,
    "text-delete": 2,
    "text-select": 8,
    "text-select-star": 2,
    "litprep-insert": 8,
    "litprep-select": 4,
    "prep-insert": 10,
    "prep-select": 6,
    "batch-unlogged": 6,
    "batch-logged-text": 4,
    "batch-logged-msg": 3,
    "lwt-insert": 4,
    "lwt-update": 3,
    "paging-read": 4,
    "extra-insert": 3,
}

EV_PARTITIONS = 6          # ev partitions per thread (paging reads walk one of them)
RECENT_KEYS = 400          # keys a thread picks from for updates, deletes and reads
MAX_ERROR_TIMES = 50_000    # per process
CONNECT_ATTEMPTS = 20      # the first connection (the cluster may still be settling)

SCHEMA = [
    "CREATE TABLE IF NOT EXISTS kv (k text PRIMARY KEY, v text, n int)",
    "CREATE TABLE IF NOT EXISTS ev (p text, c int, v text, PRIMARY KEY (p, c))",
    "CREATE TABLE IF NOT EXISTS lwt (k text PRIMARY KEY, v text)",
]


def schema_change_statements(gen):
    """The schema change number `gen` (1, 2, ...): a column added to kv, a table created."""
    return [f"ALTER TABLE kv ADD x{gen} int",
            f"CREATE TABLE IF NOT EXISTS extra{gen} (k text PRIMARY KEY, v text)"]


def lit(s):
    """A CQL string literal."""
    return "'" + s.replace("'", "''") + "'"


def connect(spec):
    """A driver Cluster and Session on the target, in the run's keyspace, QUORUM by default."""
    from cassandra import ConsistencyLevel
    from cassandra.cluster import Cluster, EXEC_PROFILE_DEFAULT, ExecutionProfile
    from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy

    profile = ExecutionProfile(
        load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy(local_dc=spec["local_dc"])),
        consistency_level=ConsistencyLevel.QUORUM,
        serial_consistency_level=ConsistencyLevel.SERIAL,
        request_timeout=spec.get("request_timeout", 10))
    last = None
    for _ in range(CONNECT_ATTEMPTS):
        cluster = Cluster(contact_points=spec["hosts"], port=spec["port"],
                          protocol_version=spec["protocol_version"],
                          compression=spec.get("compression") or False,
                          execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                          connect_timeout=10, control_connection_timeout=10)
        try:
            return cluster, cluster.connect(spec["keyspace"])
        except Exception as e:  # noqa: BLE001 - retried, then raised
            last = e
            cluster.shutdown()
            time.sleep(3)
    raise RuntimeError(f"could not connect to {spec['hosts']}:{spec['port']}: {last!r}")


class Counters:
    """ops[kind], errors[class][kind], notes[name]: shared by a process's threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.ops = {}
        self.errors = {}
        self.notes = {}
        self.first_seen = {}
        self.error_times = []    # [(time, class)], bounded: which fault an error came with

    def op(self, kind):
        with self.lock:
            self.ops[kind] = self.ops.get(kind, 0) + 1

    def error(self, cls, kind):
        with self.lock:
            per = self.errors.setdefault(cls, {})
            per[kind] = per.get(kind, 0) + 1
            self.first_seen.setdefault(cls, time.time())
            if len(self.error_times) < MAX_ERROR_TIMES:
                self.error_times.append((round(time.time(), 3), cls))

    def note(self, name):
        with self.lock:
            self.notes[name] = self.notes.get(name, 0) + 1


class Worker:
    """One client thread: its own keys, ledger file and random stream."""

    def __init__(self, wid, session, prepared, counters, spec, schema_gen, ledger_path):
        self.wid = wid
        self.s = session
        self.p = prepared
        self.c = counters
        self.spec = spec
        self.schema_gen = schema_gen
        self.rng = random.Random(f"{spec['seed']}-{wid}")
        self.ledger = open(ledger_path, "w", encoding="utf-8")
        self.seq = 0             # keys made
        self.opn = 0             # operations sent (the ledger's statement ids)
        self.stmt = None
        self.kv = {}             # key -> row state (keys whose every write was acknowledged)
        self.kv_recent = []      # such keys, most recent last (bounded)
        self.lwt = {}            # key -> N of the value 'aN' (clean keys)
        self.lwt_recent = []
        self.ev_next = [0] * EV_PARTITIONS               # next clustering value per partition
        self.ev_acked = [set() for _ in range(EV_PARTITIONS)]
        self.ev_unknown = [set() for _ in range(EV_PARTITIONS)]
        self.kinds = list(KINDS)
        self.weights = [KINDS[k] for k in self.kinds]

    # --- ledger ------------------------------------------------------------------------------
    def record(self, table, key, status, op, row, kind):
        self.ledger.write(json.dumps({"tb": table, "k": key, "s": status, "op": op, "row": row,
                                      "kind": kind, "at": round(time.time(), 3),
                                      "stmt": self.stmt}, separators=(",", ":")) + "\n")

    def new_key(self, prefix=""):
        self.seq += 1
        return f"{self.wid}-{prefix}{self.seq}"

    def value(self):
        # Now and then a quote inside, which the literal must escape.
        word = self.rng.choice(["alpha", "beta", "gam'ma", "delta", "O'Brien", "zeta"])
        return f"{word}-{self.rng.randrange(1 << 30)}"

    def remember_kv(self, key, state):
        self.kv[key] = state
        self.kv_recent.append(key)
        if len(self.kv_recent) > RECENT_KEYS:
            old = self.kv_recent.pop(0)
            self.kv.pop(old, None)

    def retire_kv(self, key):
        self.kv.pop(key, None)

    def pick_kv(self):
        live = [k for k in self.kv_recent[-50:] if k in self.kv]
        return self.rng.choice(live) if live else None

    # --- one operation -----------------------------------------------------------------------
    def step(self):
        kind = self.rng.choices(self.kinds, self.weights)[0]
        gen = self.schema_gen.value
        if kind == "extra-insert" and gen == 0:
            kind = "text-insert"
        self.opn += 1
        self.stmt = f"{self.wid}#{self.opn}"
        self.c.op(kind)
        writes = []   # (table, key, op, row) this operation sends, for the ledger on failure
        try:
            getattr(self, "op_" + kind.replace("-", "_"))(kind, gen, writes)
        except Exception as e:  # noqa: BLE001 - every error is classified and counted
            from errors import classify
            self.c.error(classify(e), kind)
            for table, key, op, row in writes:
                self.record(table, key, "unk", op, row, kind)
                self.forget(table, key)

    def forget(self, table, key):
        if table == "kv":
            self.retire_kv(key)
        elif table == "lwt":
            self.lwt.pop(key, None)
        elif table == "ev":
            p, c = key.rsplit("|", 1)
            self.ev_unknown[int(p.rsplit("e", 1)[1])].add(int(c))

    def acked(self, kind, writes):
        for table, key, op, row in writes:
            self.record(table, key, "ack", op, row, kind)
            if table == "kv":
                if op == "del":
                    self.retire_kv(key)
                else:
                    state = dict(self.kv.get(key) or {})
                    state.update(row)
                    self.remember_kv(key, state)
            elif table == "ev":
                p, c = key.rsplit("|", 1)
                self.ev_acked[int(p.rsplit("e", 1)[1])].add(int(c))

    def check(self, what, ok):
        if not ok:
            self.c.error(f"check: {what}", what)

    def insert_row(self, gen):
        key = self.new_key()
        row = {"v": self.value(), "n": self.rng.randrange(1 << 20)}
        if gen > 0:
            row[f"x{gen}"] = self.rng.randrange(1000)
        cols = ", ".join(["k", *row])
        vals = ", ".join([lit(key), *(lit(v) if isinstance(v, str) else str(v)
                                      for v in row.values())])
        return key, row, f"INSERT INTO kv ({cols}) VALUES ({vals})"

    def op_text_insert(self, kind, gen, writes):
        key, row, cql = self.insert_row(gen)
        writes.append(("kv", key, "ins", row))
        self.s.execute(cql)
        self.acked(kind, writes)

    def op_litprep_insert(self, kind, gen, writes):
        key, row, cql = self.insert_row(gen)
        writes.append(("kv", key, "ins", row))
        ps = self.s.prepare(cql)
        self.s.execute(ps.bind(()))
        self.acked(kind, writes)

    def op_prep_insert(self, kind, gen, writes):
        key = self.new_key()
        row = {"v": self.value(), "n": self.rng.randrange(1 << 20)}
        writes.append(("kv", key, "ins", row))
        self.s.execute(self.p["kv_insert"], (key, row["v"], row["n"]))
        self.acked(kind, writes)

    def op_text_update(self, kind, gen, writes):
        key = self.pick_kv()
        if key is None:
            return self.op_text_insert(kind, gen, writes)
        row = {"v": self.value()}
        writes.append(("kv", key, "upd", row))
        self.s.execute(f"UPDATE kv SET v = {lit(row['v'])} WHERE k = {lit(key)}")
        self.acked(kind, writes)

    def op_text_delete(self, kind, gen, writes):
        key = self.pick_kv()
        if key is None:
            return self.op_text_insert(kind, gen, writes)
        writes.append(("kv", key, "del", None))
        self.s.execute(f"DELETE FROM kv WHERE k = {lit(key)}")
        self.acked(kind, writes)

    def expect(self, key, cols):
        state = self.kv.get(key)
        return tuple(state.get(c) for c in cols)

    def op_text_select(self, kind, gen, writes):
        key = self.pick_kv()
        if key is None:
            return
        want = self.expect(key, ("v", "n"))
        row = self.s.execute(f"SELECT v, n FROM kv WHERE k = {lit(key)}").one()
        self.check("text-select read", row is not None and (row.v, row.n) == want)

    def op_text_select_star(self, kind, gen, writes):
        key = self.pick_kv()
        if key is None:
            return
        state = dict(self.kv[key])
        row = self.s.execute(f"SELECT * FROM kv WHERE k = {lit(key)}").one()
        got = row._asdict() if row is not None else None
        self.check("text-select-star read", got is not None and all(
            got.get(c) == v for c, v in state.items()))

    def op_litprep_select(self, kind, gen, writes):
        key = self.pick_kv()
        if key is None:
            return
        want = self.expect(key, ("v", "n"))
        ps = self.s.prepare(f"SELECT v, n FROM kv WHERE k = {lit(key)}")
        row = self.s.execute(ps.bind(())).one()
        self.check("litprep-select read", row is not None and (row.v, row.n) == want)

    def op_prep_select(self, kind, gen, writes):
        key = self.pick_kv()
        if key is None:
            return
        want = self.expect(key, ("v", "n"))
        row = self.s.execute(self.p["kv_select"], (key,)).one()
        self.check("prep-select read", row is not None and (row.v, row.n) == want)

    def ev_key(self, part):
        c = self.ev_next[part]
        self.ev_next[part] += 1
        return f"{self.wid}-e{part}", c

    def op_batch_unlogged(self, kind, gen, writes):
        from cassandra.query import BatchStatement, BatchType
        part = self.rng.randrange(EV_PARTITIONS)
        batch = BatchStatement(batch_type=BatchType.UNLOGGED)
        for _ in range(3):
            p, c = self.ev_key(part)
            v = self.value()
            writes.append(("ev", f"{p}|{c}", "ins", {"v": v}))
            batch.add(self.p["ev_insert"], (p, c, v))
        self.s.execute(batch)
        self.acked(kind, writes)

    def op_batch_logged_text(self, kind, gen, writes):
        key, row, ins = self.insert_row(0)
        part = self.rng.randrange(EV_PARTITIONS)
        p, c = self.ev_key(part)
        v = self.value()
        writes.append(("kv", key, "ins", row))
        writes.append(("ev", f"{p}|{c}", "ins", {"v": v}))
        self.s.execute(f"BEGIN BATCH {ins}; INSERT INTO ev (p, c, v) VALUES "
                       f"({lit(p)}, {c}, {lit(v)}) APPLY BATCH")
        self.acked(kind, writes)

    def op_batch_logged_msg(self, kind, gen, writes):
        from cassandra.query import BatchStatement, BatchType, SimpleStatement
        batch = BatchStatement(batch_type=BatchType.LOGGED)
        for _ in range(2):
            key, row, ins = self.insert_row(0)
            writes.append(("kv", key, "ins", row))
            batch.add(SimpleStatement(ins))
        self.s.execute(batch)
        self.acked(kind, writes)

    def op_lwt_insert(self, kind, gen, writes):
        key = self.new_key("l")
        writes.append(("lwt", key, "ins", {"v": "a0"}))
        rs = self.s.execute(f"INSERT INTO lwt (k, v) VALUES ({lit(key)}, 'a0') IF NOT EXISTS")
        self.lwt_answer(kind, writes, rs, key, 0)

    def op_lwt_update(self, kind, gen, writes):
        live = [k for k in self.lwt_recent[-50:] if k in self.lwt]
        if not live:
            return self.op_lwt_insert(kind, gen, writes)
        key = self.rng.choice(live)
        n = self.lwt[key]
        writes.append(("lwt", key, "upd", {"v": f"a{n + 1}"}))
        rs = self.s.execute(f"UPDATE lwt SET v = 'a{n + 1}' WHERE k = {lit(key)} IF v = 'a{n}'")
        self.lwt_answer(kind, writes, rs, key, n + 1)

    def lwt_answer(self, kind, writes, rs, key, n):
        row = rs.one()
        applied = rs.was_applied
        if not applied and row is not None and getattr(row, "v", None) == f"a{n}":
            applied = True
            self.c.note("lwt applied by a retry")
        if not applied:
            # Nothing written, yet the row is not what this thread's acknowledged writes left:
            # an anomaly (the ledger check will see the row too). The key is not used again.
            self.check(f"{kind} not applied", False)
            self.lwt.pop(key, None)
            return
        self.acked(kind, writes)
        self.lwt[key] = n
        if n == 0:
            self.lwt_recent.append(key)
            if len(self.lwt_recent) > RECENT_KEYS:
                self.lwt.pop(self.lwt_recent.pop(0), None)

    def op_paging_read(self, kind, gen, writes):
        from cassandra.query import SimpleStatement
        part = self.rng.randrange(EV_PARTITIONS)
        acked = set(self.ev_acked[part])
        unknown = set(self.ev_unknown[part])
        p = f"{self.wid}-e{part}"
        rs = self.s.execute(SimpleStatement(f"SELECT c, v FROM ev WHERE p = {lit(p)}",
                                            fetch_size=7))
        got = {r.c for r in rs}   # iterating fetches every page
        self.check("paging-read rows", acked <= got <= acked | unknown)

    def op_extra_insert(self, kind, gen, writes):
        key = self.new_key("x")
        row = {"v": self.value()}
        writes.append((f"extra{gen}", key, "ins", row))
        self.s.execute(f"INSERT INTO extra{gen} (k, v) VALUES ({lit(key)}, {lit(row['v'])})")
        self.acked(kind, writes)

    # --- the loop ----------------------------------------------------------------------------
    def run(self, stop, deadline, max_ops):
        period = 1.0 / self.spec["rate"]
        next_t = time.monotonic()
        done = 0
        try:
            while not stop.is_set() and done < max_ops and time.monotonic() < deadline:
                self.step()
                done += 1
                next_t += period
                delay = next_t - time.monotonic()
                if delay > 0:
                    stop.wait(delay)
                elif delay < -1.0:
                    next_t = time.monotonic()   # behind (a timeout): no catching up in a burst
        finally:
            self.ledger.close()


def prepare_all(session):
    """The client-prepared statements, prepared once per process."""
    stmts = {
        "kv_insert": "INSERT INTO kv (k, v, n) VALUES (?, ?, ?)",
        "kv_select": "SELECT v, n FROM kv WHERE k = ?",
        "ev_insert": "INSERT INTO ev (p, c, v) VALUES (?, ?, ?)",
    }
    return {name: session.prepare(cql) for name, cql in stmts.items()}


def run_process(spec, stop, schema_gen):
    """A client process: `spec` = {index, hosts, port, keyspace, protocol_version, compression,
    threads, rate (per thread, ops/s), seconds, seed, local_dc, run_dir}; `stop` a
    multiprocessing Event; `schema_gen` a multiprocessing Value (the last schema change done)."""
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    out = os.path.join(spec["run_dir"], f"result-p{spec['index']}.json")
    counters = Counters()
    result = {"index": spec["index"], "protocol_version": spec["protocol_version"],
              "compression": spec.get("compression")}
    cluster = None
    try:
        cluster, session = connect(spec)
        prepared = prepare_all(session)
        deadline = time.monotonic() + spec["seconds"] + 60
        max_ops = int(spec["rate"] * (spec["seconds"] + 60)) + 10
        threads = []
        for t in range(spec["threads"]):
            wid = f"p{spec['index']}t{t}"
            w = Worker(wid, session, prepared, counters, spec, schema_gen,
                       os.path.join(spec["run_dir"], f"ledger-{wid}.jsonl"))
            th = threading.Thread(target=w.run, args=(stop, deadline, max_ops),
                                  name=wid, daemon=True)
            th.start()
            threads.append(th)
        for th in threads:
            th.join(spec["seconds"] + 120)
        result["alive_threads"] = sum(th.is_alive() for th in threads)
    except Exception:  # noqa: BLE001 - reported in the result file
        result["fatal"] = traceback.format_exc()
    finally:
        if cluster is not None:
            try:
                cluster.shutdown()
            except Exception:  # noqa: BLE001
                pass
    result.update(ops=counters.ops, errors=counters.errors, notes=counters.notes,
                  first_seen=counters.first_seen, error_times=counters.error_times)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1, sort_keys=True)

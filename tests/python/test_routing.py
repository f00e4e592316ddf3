"""Token-aware routing (issue 16) on a real three-node, two-datacenter cluster
(scripts/cluster.sh: 127.0.0.41 dc1, 127.0.0.42 dc1, 127.0.0.43 dc2).

autoprep is given node 1 only (drivers still see one node, autoprep itself). Each rewritten
INSERT, UPDATE, DELETE and SELECT of a partition, each EXECUTE of a statement the client
prepared itself (with markers, or with its literals inline: issue 17) and each single-partition
BATCH of those, must be coordinated by a replica of that
partition in the local datacenter (dc1) where it has one: proven from the servers' own per-node,
per-table coordinator counters (`cluster.Snapshot`), against the replicas the Python driver's
own token metadata computes (an independent Murmur3 and placement). Keyspaces: RF 1
SimpleStrategy (exactly one replica: the counts must match key by key), NetworkTopologyStrategy
{dc1: 1, dc2: 1} (the dc1 replica), and {dc1: 2, dc2: 1} (never the dc2 node). Then a node
killed under load and brought back: every answer stays what the direct run gives (reads), and
routing resumes. A `LOCAL_*` consistency is only ever coordinated in node 1's datacenter (its
replicas there are the ones it would wait for directly).

Environment: AUTOPREP_TEST_CLUSTER "a,b,c" (an existing cluster), AUTOPREP_TEST_CLUSTER=0
skips; AUTOPREP_TEST_CLUSTER_KEEP=1 leaves a cluster this test started running.
"""

import os
import random
import re
import struct
import time
import urllib.request

import pytest
from cassandra import ConsistencyLevel
from cassandra.cluster import Cluster
from cassandra.query import BatchStatement, BatchType, SimpleStatement

from cluster import module_cluster
from conftest import _free_port, run_proxy
from difftools import make_cluster

STRATEGIES = {
    "rf1": "{'class': 'SimpleStrategy', 'replication_factor': 1}",
    "nts11": "{'class': 'NetworkTopologyStrategy', 'dc1': 1, 'dc2': 1}",
    "nts21": "{'class': 'NetworkTopologyStrategy', 'dc1': 2, 'dc2': 1}",
}


cluster = pytest.fixture(scope="module", name="cluster")(module_cluster)


@pytest.fixture(scope="module")
def keyspaces(cluster, run_id):
    """The three keyspaces, each with a table `t (k int PRIMARY KEY, v text)` and a composite
    key table `c ((a int, b text), n int, v text)`; and a direct driver session with token
    metadata, for the expected replicas."""
    direct = Cluster(contact_points=[cluster.addresses[0]], protocol_version=4,
                     connect_timeout=10, control_connection_timeout=10)
    session = direct.connect()
    names = {}
    for tag, strategy in STRATEGIES.items():
        ks = f"route_{tag}_{run_id}"
        names[tag] = ks
        session.execute(f"CREATE KEYSPACE {ks} WITH replication = {strategy}", timeout=120)
        session.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v text)", timeout=120)
        session.execute(f"CREATE TABLE {ks}.c (a int, b text, n int, v text, "
                        "PRIMARY KEY ((a, b), n))", timeout=120)
    direct.refresh_schema_metadata()
    yield names, direct, session
    for ks in names.values():
        session.execute(f"DROP KEYSPACE IF EXISTS {ks}", timeout=120)
    direct.shutdown()


def replicas(direct, ks, table, *key):
    """The replicas' addresses of a partition, as the driver computes them."""
    meta = direct.metadata.keyspaces[ks].tables[table]
    types = [c.cql_type for c in meta.partition_key]
    return {str(h.address) for h in direct.metadata.get_replicas(ks, _routing_key(types, key))}


def _routing_key(types, key):
    """The routing key of int / text partition-key values (one: its bytes; several: each as
    length, bytes, 0)."""
    enc = []
    for t, v in zip(types, key):
        enc.append(struct.pack(">i", v) if t == "int" else v.encode())
    if len(enc) == 1:
        return enc[0]
    return b"".join(struct.pack(">H", len(e)) + e + b"\x00" for e in enc)


def routed_count(admin):
    with urllib.request.urlopen(f"http://{admin}/metrics", timeout=10) as r:
        text = r.read().decode()
    m = re.search(r'autoprep_routed_total\{to="replica",reason=""\} (\d+)', text)
    return int(m.group(1)) if m else 0, text


KINDS = ["insert", "update", "select", "delete", "c-insert", "c-select", "p-insert",
         "p-select", "p-c-select", "p-batch", "l-insert", "l-c-select"]

# The client's own prepared statements (the legacy application that prepares with markers).
PREPARED = {
    "p-insert": "INSERT INTO t (k, v) VALUES (?, ?)",
    "p-select": "SELECT v FROM t WHERE k = ?",
    "p-c-select": "SELECT n, v FROM c WHERE a = ? AND b = ?",
    # Three rows of one partition in a BATCH message (a single-partition batch).
    "p-batch": "INSERT INTO c (a, b, n, v) VALUES (?, ?, ?, ?)",
}


def routed_lines(admin):
    return [line for line in routed_count(admin)[1].splitlines()
            if line.startswith("autoprep_routed")]


def workload(rng, n):
    """n statements on random partitions: (kind, table, key, statement, values); the first
    ones are one of each kind. A statement is a text with its literals inline, or the name of
    one of PREPARED (executed with `values`)."""
    out = []
    for j in range(n):
        k = rng.randrange(10_000)
        a, b, i = rng.randrange(100), rng.choice(["x", "y", "zz", "é"]), rng.randrange(5)
        kind = KINDS[j] if j < len(KINDS) else rng.choice(KINDS)
        if kind == "p-insert":
            out.append(("write", "t", (k,), kind, (k, f"p{k}")))
        elif kind == "p-select":
            out.append(("read", "t", (k,), kind, (k,)))
        elif kind == "p-c-select":
            out.append(("read", "c", (a, b), kind, (a, b)))
        elif kind == "p-batch":
            out.append(("write", "c", (a, b), kind, (a, b)))
        elif kind == "insert":
            out.append(("write", "t", (k,), f"INSERT INTO t (k, v) VALUES ({k}, 'v{k}')"))
        elif kind == "update":
            out.append(("write", "t", (k,), f"UPDATE t SET v = 'u{k}' WHERE k = {k}"))
        elif kind == "delete":
            out.append(("write", "t", (k,), f"DELETE FROM t WHERE k = {k}"))
        elif kind == "select":
            out.append(("read", "t", (k,), f"SELECT v FROM t WHERE k = {k}"))
        elif kind == "l-insert":
            # Prepared with its literals inline (issue 17), then executed.
            out.append(("write", "t", (k,), kind, f"INSERT INTO t (k, v) VALUES ({k}, 'l{k}')"))
        elif kind == "l-c-select":
            out.append(("read", "c", (a, b), kind,
                        f"SELECT n, v FROM c WHERE a = {a} AND b = '{b}'"))
        elif kind == "c-insert":
            out.append(("write", "c", (a, b),
                        f"INSERT INTO c (a, b, n, v) VALUES ({a}, '{b}', {i}, 'c{a}')"))
        else:
            out.append(("read", "c", (a, b), f"SELECT n, v FROM c WHERE a = {a} AND b = '{b}'"))
    return [st if len(st) == 5 else st + (None,) for st in out]


@pytest.mark.timeout(900)
@pytest.mark.parametrize("pv", [4, 5])
def test_each_statement_is_coordinated_by_a_replica(cluster, keyspaces, pv, tmp_path):
    names, direct, _ = keyspaces
    admin = f"127.0.0.1:{_free_port()}"
    rng = random.Random(16 + pv)
    home = cluster.addresses[0]
    with run_proxy((home, 9042), tmp_path, "--admission-threshold", "1",
                   "--routing-local-dc", "dc1", "--admin", admin) as proxy:
        via = make_cluster(proxy.host, proxy.port, pv, None)
        session = via.connect()
        try:
            for tag, ks in names.items():
                # RF 1 at ONE (its only replica may be in dc2); the others at LOCAL_QUORUM,
                # which only a dc1 replica may coordinate (as node 1 would directly).
                via.profile_manager.default.consistency_level = (
                    ConsistencyLevel.ONE if tag == "rf1" else ConsistencyLevel.LOCAL_QUORUM)
                session.execute(f"USE {ks}")
                prepared = {name: session.prepare(text) for name, text in PREPARED.items()}

                def run(st):
                    if st[4] is None:
                        return session.execute(st[3])
                    if st[3].startswith("l-"):
                        return session.execute(session.prepare(st[4]))
                    if st[3] == "p-batch":
                        batch = BatchStatement(batch_type=BatchType.UNLOGGED)
                        for n in range(3):
                            batch.add(prepared["p-batch"], st[4] + (n, f"b{n}"))
                        return session.execute(batch)
                    return session.execute(prepared[st[3]], st[4])
                stmts = workload(rng, 150)
                # Warm-up: every shape seen, prepared at home, replica connections opened and
                # the shapes prepared on the replicas.
                for _ in range(3):
                    for st in stmts[:40]:
                        run(st)
                    time.sleep(0.5)
                before = {t: cluster.snapshot(ks, t) for t in ("t", "c")}
                expected = {t: {} for t in ("t", "c")}
                for st in stmts:
                    kind, table, key = st[:3]
                    run(st)
                    reps = replicas(direct, ks, table, *key)
                    local = {r for r in reps if cluster.node(r).dc == "dc1"} or reps
                    expected[table].setdefault(kind, []).append(local)
                for table in ("t", "c"):
                    delta = cluster.snapshot(ks, table) - before[table]
                    for kind in ("write", "read"):
                        got = delta.kind(kind)
                        allowed = set().union(*expected[table].get(kind, [set()]))
                        off = {a: n for a, n in got.items() if n and a not in allowed}
                        assert not off, (f"{tag} {table} {kind}: coordinated by non-replicas "
                                         f"{off}; replicas {allowed}; {delta}")
                        assert sum(got.values()) == len(expected[table].get(kind, [])), \
                            (tag, table, kind, delta)
                        if tag == "rf1":
                            want = {}
                            for s in expected[table].get(kind, []):
                                (a,) = s
                                want[a] = want.get(a, 0) + 1
                            assert {a: n for a, n in got.items() if n} == want, \
                                (tag, table, kind, delta, routed_lines(admin))
        finally:
            via.shutdown()
        n, text = routed_count(admin)
        assert n > 0, text


@pytest.mark.timeout(900)
def test_a_replica_killed_and_brought_back(cluster, keyspaces, tmp_path):
    """Reads of an RF 3 keyspace ({dc1: 2, dc2: 1}, ONE) through autoprep while node 2 (a dc1
    replica of every partition, reached over a replica connection) is killed and started
    again: every read answers as directly, and after the node is back routing resumes."""
    names, _, dsession = keyspaces
    ks = names["nts21"]
    for k in range(200):
        dsession.execute(f"INSERT INTO {ks}.t (k, v) VALUES ({k}, 'r{k}')")
    admin = f"127.0.0.1:{_free_port()}"
    home = cluster.addresses[0]
    with run_proxy((home, 9042), tmp_path, "--admission-threshold", "1",
                   "--routing-local-dc", "dc1", "--admin", admin) as proxy:
        via = make_cluster(proxy.host, proxy.port, 4, None)
        session = via.connect(ks)
        try:
            def rounds(n):
                for i in range(n):
                    k = i % 200
                    rows = list(session.execute(f"SELECT v FROM t WHERE k = {k}"))
                    assert [tuple(r) for r in rows] == [(f"r{k}",)], k
            rounds(300)
            first, _ = routed_count(admin)
            assert first > 0
            cluster.kill(2)
            rounds(300)
            cluster.start_node(2)
            rounds(300)
            time.sleep(6)   # the replica connection is tried again after 5 s
            before, _ = routed_count(admin)
            rounds(300)
            after, text = routed_count(admin)
            assert after > before, text
        finally:
            via.shutdown()


@pytest.mark.timeout(900)
def test_spans_name_the_replica_that_answered(cluster, keyspaces, collector, tmp_path):
    """Spans through routing, v4 and v5, RF 1 (exactly one replica): a rewritten QUERY, an
    EXECUTE of the client's prepared statement and a single-partition BATCH of those, each
    with a traceparent in its custom payload, and a PREPARE (which goes home) with one in a
    comment. Each span is the child of its traceparent, and its `server.address` is the
    partition's replica when `autoprep.routing` is `replica`, node 1 otherwise; once every
    shape is prepared on every node (the warm-up), every request whose replica is not node 1
    is routed."""
    names, direct, _ = keyspaces
    ks = names["rf1"]
    home = cluster.addresses[0]
    admin = f"127.0.0.1:{_free_port()}"
    expected = []  # (pv, trace id, parent id, operation, the replica or None)

    def traced(op, replica):
        t, p = os.urandom(16).hex(), os.urandom(8).hex()
        expected.append((pv, t, p, op, replica))
        return f"00-{t}-{p}-01"

    with run_proxy((home, 9042), tmp_path, "--admission-threshold", "1",
                   "--routing-local-dc", "dc1", "--admin", admin,
                   "--tracing-endpoint", collector.http_url,
                   "--tracing-sample-ratio", "1") as proxy:
        for pv in (4, 5):
            via = make_cluster(proxy.host, proxy.port, pv, None)
            try:
                session = via.connect()
                via.profile_manager.default.consistency_level = ConsistencyLevel.ONE
                session.execute(f"USE {ks}")
                insert = session.prepare(PREPARED["p-insert"])
                rows = session.prepare(PREPARED["p-batch"])
                rng = random.Random(29 + pv)

                def requests(trace):
                    k, a, b = rng.randrange(10_000), rng.randrange(100), rng.choice("xyz")
                    rt, rc = replicas(direct, ks, "t", k), replicas(direct, ks, "c", a, b)
                    payload = {"traceparent": trace("INSERT", rt).encode()}
                    session.execute(SimpleStatement(
                        f"INSERT INTO t (k, v) VALUES ({k}, 'q{k}')"), custom_payload=payload)
                    payload = {"traceparent": trace("SELECT", rt).encode()}
                    session.execute(SimpleStatement(f"SELECT v FROM t WHERE k = {k}"),
                                    custom_payload=payload)
                    payload = {"traceparent": trace("EXECUTE", rt).encode()}
                    session.execute(insert, (k, f"e{k}"), custom_payload=payload)
                    batch = BatchStatement(batch_type=BatchType.UNLOGGED)
                    for n in range(3):
                        batch.add(rows, (a, b, n, f"b{n}"))
                    payload = {"traceparent": trace("BATCH", rc).encode()}
                    session.execute(batch, custom_payload=payload)

                # Warm-up: the shapes prepared on every node, the replica connections open.
                for _ in range(3):
                    for _ in range(30):
                        requests(lambda op, r: f"00-{os.urandom(16).hex()}-{os.urandom(8).hex()}-00")
                    time.sleep(0.5)
                for _ in range(25):
                    requests(traced)
                tp = traced("PREPARE", None)
                session.prepare(f"SELECT v FROM t WHERE k = ? /*traceparent='{tp}'*/")
            finally:
                via.shutdown()
        spans = collector.wait_for([t for _, t, *_ in expected])
    by_trace = {}
    for sp in spans:
        by_trace.setdefault(sp["trace_id"], []).append(sp)
    routed = {}
    for pv, t, p, op, replica in expected:
        found = by_trace.get(t, [])
        assert len(found) == 1, f"v{pv} {op}: {len(found)} spans in trace {t}"
        sp = found[0]
        a, where = sp["attributes"], f"v{pv} {op} (replica {replica}): {sp}"
        assert sp["parent_span_id"] == p and a["db.operation.name"] == op, where
        route = a.get("autoprep.routing")
        if replica is None:
            assert a["server.address"] == home, where
            continue
        (replica,) = replica
        if route == "replica":
            assert a["server.address"] == replica != home, where
        else:
            assert a["server.address"] == home, where
            # Its replica is node 1, or (only then) the request had no reason to leave.
            assert replica == home, where
            assert route == "home is the replica", where
        routed[route] = routed.get(route, 0) + 1
    print(f"\n{len(expected)} spans through routing: {routed}")
    assert routed.get("replica", 0) > 0, routed

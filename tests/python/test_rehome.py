"""A client connection outlives its home node (design change 1 of the soak chapter): on a real
three-node, two-datacenter cluster (scripts/cluster.sh: 127.0.0.41 dc1, 127.0.0.42 dc1,
127.0.0.43 dc2), autoprep is given every node as a contact point; the Python driver knows only
autoprep. The node the driver's connection is homed on (the coordinator of a range scan, which
is never routed) is killed (SIGKILL) while requests are in flight. Then:

- the driver's connections to autoprep stay open: autoprep accepts no new client connection
  (the driver never reconnected) and /metrics counts the move to a new home;
- the requests in flight get an answer each: a result, or the `Overloaded` error autoprep gives
  for a request that may have run (the driver, which knows one host, reports it inside
  `NoHostAvailable`); nothing else; and never `Overloaded` for a write autoprep rewrote that is
  idempotent by its form (an INSERT with its literals inline): autoprep sends it again, to the
  new home or, from a replica connection to the killed node, to the home, as a driver sends it
  to its next host;
- every request after the kill succeeds: the connection's keyspace survived (unqualified
  statements, as sent and rewritten, and a new PREPARE), and the statements the client
  prepared before the kill still execute (the new home answers UNPREPARED, the driver prepares
  them again).

The node is started again at the end. Environment: AUTOPREP_TEST_CLUSTER "a,b,c" (an existing
cluster), AUTOPREP_TEST_CLUSTER=0 skips; AUTOPREP_TEST_CLUSTER_KEEP=1 leaves a cluster this
test started running.
"""

import os
import threading
import time

import pytest
from cassandra.cluster import NoHostAvailable

from cluster import module_cluster
from conftest import _free_port, metric, run_proxy
from difftools import make_cluster

# The answer autoprep gives to a request in flight on a connection that ended.
MAY_HAVE_RUN = "ended with this request in flight; it may have run"


cluster = pytest.fixture(scope="module", name="cluster")(module_cluster)


@pytest.fixture(scope="module")
def keyspace(cluster, run_id):
    """A keyspace replicated twice in dc1 (every partition on both dc1 nodes, so that either
    serves it alone at LOCAL_ONE) and once in dc2, with a table `t (k int PRIMARY KEY, v text)`."""
    ks = f"rehome_{run_id}"
    session = cluster.session(cluster.addresses[2])
    session.execute(f"CREATE KEYSPACE {ks} WITH replication = "
                    "{'class': 'NetworkTopologyStrategy', 'dc1': 2, 'dc2': 1}", timeout=120)
    session.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v text)", timeout=120)
    cluster.wait_schema_agreement()
    yield ks
    cluster.session(cluster.addresses[2]).execute(f"DROP KEYSPACE IF EXISTS {ks}", timeout=120)


def may_have_run(error):
    """True for autoprep's Overloaded answer to a request in flight on a connection that
    ended, as the driver reports it (it retries on the next host; there is none)."""
    if not isinstance(error, NoHostAvailable):
        return False
    if not error.errors:
        # The driver (3.30) hands the retry to another thread before it records the error in
        # the dict the exception holds: it appears there a moment later.
        time.sleep(0.2)
    return bool(error.errors) and all(MAY_HAVE_RUN in str(e) for e in error.errors.values())


class Load:
    """Requests kept in flight (40 at a time: prepared writes and reads, and reads and writes
    with their literals inline, which autoprep rewrites and, in flight on a node that fails,
    sends again) on a thread, each outcome recorded, until stopped."""

    def __init__(self, session, insert, select):
        self.session, self.insert, self.select = session, insert, select
        self.ok, self.overloaded, self.other = 0, 0, []
        # Rewritten writes idempotent by their form answered Overloaded (there must be none).
        self.text_writes_overloaded = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        n = 0
        while not self.stop.is_set():
            futures = []
            for _ in range(10):
                k = 50_000 + n % 500
                n += 1
                futures.append(self.session.execute_async(self.insert, (k, f"l{k}")))
                futures.append(self.session.execute_async(self.select, (k,)))
                futures.append(self.session.execute_async(f"SELECT v FROM t WHERE k = {k}"))
                futures.append(self.session.execute_async(
                    f"INSERT INTO t (k, v) VALUES ({k + 1000}, 'w{k}')"))
            for i, f in enumerate(futures):
                try:
                    f.result()
                    self.ok += 1
                except Exception as e:   # noqa: BLE001 - every outcome is recorded
                    if may_have_run(e):
                        self.overloaded += 1
                        self.text_writes_overloaded += i % 4 == 3
                    else:
                        self.other.append(repr(e))

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(60)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("pv", [4, 5])
def test_the_client_connection_outlives_its_home_node(cluster, keyspace, pv, tmp_path):
    admin = f"127.0.0.1:{_free_port()}"
    contact_points = ",".join(f"{a}:9042" for a in cluster.addresses)
    killed = None
    try:
        with run_proxy(contact_points, tmp_path, "--admission-threshold", "1",
                       "--routing-local-dc", "dc1", "--admin", admin) as proxy:
            via = make_cluster(proxy.host, proxy.port, pv, None)
            session = via.connect()
            try:
                session.execute(f"USE {keyspace}")
                insert = session.prepare("INSERT INTO t (k, v) VALUES (?, ?)")
                select = session.prepare("SELECT v FROM t WHERE k = ?")
                # Keys of this run's own (a node started again may still receive hints of
                # an earlier run's), read back only once a single dc1 replica is left (LOCAL_ONE
                # may read the replica the write has not reached yet).
                base = pv * 100_000
                for k in range(base, base + 50):
                    session.execute(insert, (k, f"a{k}"))
                    session.execute(f"INSERT INTO t (k, v) VALUES ({k + 1000}, 'q{k}')")
                    session.execute(select, (k,))
                # The node the driver's connection is homed on coordinates what is not routed.
                before = cluster.snapshot(keyspace, "t", kinds=("scan",))
                list(session.execute("SELECT k FROM t"))
                delta = cluster.snapshot(keyspace, "t", kinds=("scan",)) - before
                (home,) = delta.coordinators(kinds=("scan",))
                accepted = metric(admin, "autoprep_client_connections_total")
                with Load(session, insert, select) as load:
                    time.sleep(1)
                    cluster.kill(home)
                    killed = home
                    time.sleep(1)
                assert not load.other, load.other[:5]
                assert load.ok > 0
                assert load.text_writes_overloaded == 0, load.text_writes_overloaded
                print(f"\nkilled {home}: in flight and during the kill {load.ok} ok, "
                      f"{load.overloaded} Overloaded")
                # After the kill, every request succeeds.
                for k in range(base, base + 100):
                    session.execute(insert, (k, f"c{k}"))
                    assert session.execute(select, (k,)).one().v == f"c{k}"
                    # Unqualified, as sent and rewritten: the connection's keyspace survived.
                    session.execute(f"UPDATE t SET v = 'u{k}' WHERE k = {k + 1000}")
                    rows = list(session.execute(f"SELECT v FROM t WHERE k = {k + 1000}"))
                    assert [r.v for r in rows] == [f"u{k}"]
                fresh = session.prepare("SELECT k, v FROM t WHERE k = ?")
                assert session.execute(fresh, (base + 7,)).one().v == f"c{base + 7}"
                assert metric(admin, "autoprep_home_rehomed_total", outcome="rehomed") >= 1
                assert metric(admin, "autoprep_home_rehomed_total", outcome="closed") == 0
                # The driver never reconnected: no client connection was accepted since.
                assert metric(admin, "autoprep_client_connections_total") == accepted
                print("in flight on the failed home: overloaded",
                      metric(admin, "autoprep_home_in_flight_total", outcome="overloaded"),
                      "resent", metric(admin, "autoprep_home_in_flight_total", outcome="resent"),
                      "; on replica connections: overloaded",
                      metric(admin, "autoprep_replica_in_flight_total", outcome="overloaded"),
                      "resent", metric(admin, "autoprep_replica_in_flight_total", outcome="resent"))
            finally:
                via.shutdown()
            log = proxy.log_text()
            assert "the client connection moved to a new home" in log
            assert "closing the client connection" not in log, proxy.log_tail(30)
    finally:
        if killed:
            cluster.start_node(killed)

"""Routing reaches every replica (issue 27): a second local cluster of scripts/cluster.sh with
one token per node, evenly spaced, node 1 at the minimum token (127.0.0.61 dc1, .62 dc1, .63 dc2
by default; AUTOPREP_TEST_LAYOUT_DCS=dc1,dc1,dc1 runs the same tests on one datacenter).

autoprep is given all three contact points, as a new user would, so that client connections
are homed on several nodes; the statements carry a `LOCAL_SERIAL` serial consistency, as the
`scylla` crate sends with every request by default. Proven from the servers' own per-node
coordinator counters (`cluster.Snapshot`) against the replicas the Python driver's own token
metadata computes:

- at consistency ONE, at least 0.99 of the rewritten and client-prepared requests are
  coordinated by a replica of their partition, and every node receives routed requests (a node
  that was only ever some connection's home was once never prepared on, never routed to);
- every client connection is homed in the local datacenter (`--routing-local-dc dc1`);
- a conditional statement at `LOCAL_SERIAL` is coordinated in the local datacenter only; at
  `SERIAL` it may go to its replica anywhere.

Environment: AUTOPREP_TEST_CLUSTER=0 skips (as for test_routing); AUTOPREP_TEST_CLUSTER_KEEP=1
leaves the cluster running; AUTOPREP_TEST_LAYOUT_NODES, AUTOPREP_TEST_LAYOUT_DCS override.
"""

import json
import os
import random
import re
import socket
import subprocess
import time
from pathlib import Path

import pytest
from cassandra import ConsistencyLevel
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
from cassandra.policies import WhiteListRoundRobinPolicy
from cassandra.query import SimpleStatement

from cluster import LocalCluster
from conftest import _free_port, run_proxy
from test_routing import replicas, routed_count, routed_lines

NODES = os.environ.get("AUTOPREP_TEST_LAYOUT_NODES", "127.0.0.61,127.0.0.62,127.0.0.63")
DCS = os.environ.get("AUTOPREP_TEST_LAYOUT_DCS", "dc1,dc1,dc2")
CONNECTIONS = 4


@pytest.fixture(scope="module")
def cluster():
    if os.environ.get("AUTOPREP_TEST_CLUSTER", "") == "0":
        pytest.skip("AUTOPREP_TEST_CLUSTER=0")
    c = LocalCluster(env={
        "AUTOPREP_CLUSTER_NODES": NODES,
        "AUTOPREP_CLUSTER_JMX_PORTS": "7461,7462,7463",
        "AUTOPREP_CLUSTER_PREFIX": "tokencluster",
        "AUTOPREP_CLUSTER_NUM_TOKENS": "1",
        "AUTOPREP_CLUSTER_DCS": DCS,
    })
    yield c
    c.close()


@pytest.fixture(scope="module")
def keyspace(cluster, run_id):
    """An RF 1 SimpleStrategy keyspace with `t (k int PRIMARY KEY, v text)`; and a direct
    driver with token metadata, for the expected replicas."""
    direct = Cluster(contact_points=[cluster.addresses[0]], protocol_version=4,
                     connect_timeout=10, control_connection_timeout=10)
    session = direct.connect()
    ks = f"layout_{run_id}"
    session.execute(f"CREATE KEYSPACE {ks} WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 1}", timeout=120)
    session.execute(f"CREATE TABLE {ks}.t (k int PRIMARY KEY, v text)", timeout=120)
    direct.refresh_schema_metadata()
    yield ks, direct
    session.execute(f"DROP KEYSPACE IF EXISTS {ks}", timeout=120)
    direct.shutdown()


def by_node(text, name):
    return {m.group(1).rsplit(":", 1)[0]: int(m.group(2))
            for m in re.finditer(name + r'\{node="([^"]+)"\} (\d+)', text)}


def clients(proxy, ks, serial):
    """CONNECTIONS driver clusters through autoprep (one connection each, so that autoprep
    homes each on a node of its own choice), at ONE with the serial consistency `serial`.

    Each driver cluster opens two connections (its control connection, then its pool's), and
    autoprep homes new connections on the local contact points in turn: with two local nodes,
    every pool connection would land on the same node. A spare TCP connection after each
    (homed like any other, and held open) shifts the turn, so the pools' homes alternate."""
    out = []
    spare = []
    for _ in range(CONNECTIONS):
        profile = ExecutionProfile(
            load_balancing_policy=WhiteListRoundRobinPolicy([proxy.host]),
            consistency_level=ConsistencyLevel.ONE, serial_consistency_level=serial,
            request_timeout=30)
        c = Cluster(contact_points=[proxy.host], port=proxy.port, protocol_version=4,
                    execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                    schema_metadata_enabled=False, token_metadata_enabled=False,
                    connect_timeout=10, control_connection_timeout=10)
        out.append((c, c.connect(ks)))
        # The first connection reads the cluster view: from then on homes follow the local
        # datacenter's contact points in turn.
        time.sleep(0.3)
        spare.append(socket.create_connection((proxy.host, proxy.port), timeout=10))
        time.sleep(0.1)
    out.append((Spares(spare), None))
    return out


class Spares:
    """The spare connections of `clients`, closed with the driver clusters."""

    def __init__(self, socks):
        self.socks = socks

    def shutdown(self):
        for sock in self.socks:
            sock.close()


@pytest.mark.timeout(900)
def test_every_replica_is_reached_from_every_home(cluster, keyspace, tmp_path):
    ks, direct = keyspace
    admin = f"127.0.0.1:{_free_port()}"
    rng = random.Random(27)
    points = ",".join(f"{a}:9042" for a in cluster.addresses)
    local = {n.address for n in cluster.in_dc("dc1")}
    with run_proxy(points, tmp_path, "--admission-threshold", "1", "--routing-local-dc", "dc1",
                   "--admin", admin) as proxy:
        sessions = clients(proxy, ks, ConsistencyLevel.LOCAL_SERIAL)
        try:
            prepared = [(s, s.prepare("INSERT INTO t (k, v) VALUES (?, ?)"),
                         s.prepare("SELECT v FROM t WHERE k = ?")) for _, s in sessions if s]
            keys = list(range(3000))

            def run(j, k):
                s, ins, sel = prepared[j % len(prepared)]
                kind = j % 4
                if kind == 0:
                    s.execute(f"INSERT INTO t (k, v) VALUES ({k}, 'v{k}')")
                elif kind == 1:
                    s.execute(f"SELECT v FROM t WHERE k = {k}")
                elif kind == 2:
                    s.execute(ins, (k, f"p{k}"))
                else:
                    s.execute(sel, (k,))
                return "write" if kind in (0, 2) else "read"

            # Warm-up: every shape seen on every connection, replica connections opened, the
            # shapes prepared on the replicas.
            for _ in range(3):
                for j in range(64):
                    run(j, rng.choice(keys))
                time.sleep(0.5)
            before = cluster.snapshot(ks, "t")
            expected = {"write": {}, "read": {}}
            n = 800
            for j in range(n):
                k = rng.choice(keys)
                kind = run(j, k)
                (replica,) = replicas(direct, ks, "t", k)
                expected[kind][replica] = expected[kind].get(replica, 0) + 1
            delta = cluster.snapshot(ks, "t") - before
            on_replica = 0
            for kind in ("write", "read"):
                got = delta.kind(kind)
                on_replica += sum(min(got.get(a, 0), c) for a, c in expected[kind].items())
                assert sum(got.values()) == sum(expected[kind].values()), (kind, delta)
            text = routed_count(admin)[1]
            share = on_replica / n
            assert share >= 0.99, (share, delta, expected, routed_lines(admin))
            routed = by_node(text, "autoprep_routed_requests_total")
            homes = by_node(text, "autoprep_home_connections_total")
            # Every node that owns a partition in the run and is not every connection's home
            # received routed requests.
            # Every node that owns a partition of the run is routed to, or is a home (whose own
            # partitions go home: coordinated by their replica all the same).
            owners = {a for e in expected.values() for a in e}
            assert owners <= set(routed) | set(homes), (routed, homes, routed_lines(admin))
            assert len(homes) >= 2, homes
            assert all(a in local for a in homes), (homes, local)
            assert 'autoprep_routing_local_datacenter{dc="dc1",source="configured"} 1' in text
        finally:
            for c, _ in sessions:
                c.shutdown()


@pytest.mark.timeout(900)
@pytest.mark.parametrize("serial", [ConsistencyLevel.LOCAL_SERIAL, ConsistencyLevel.SERIAL],
                         ids=["LOCAL_SERIAL", "SERIAL"])
def test_a_conditional_statement_stays_where_its_serial_consistency_says(
        cluster, keyspace, serial, tmp_path):
    ks, direct = keyspace
    remote = [n.address for n in cluster.nodes if n.dc != "dc1"]
    if not remote:
        pytest.skip("one datacenter: nothing to stay out of")
    admin = f"127.0.0.1:{_free_port()}"
    points = ",".join(f"{a}:9042" for a in cluster.addresses)
    # Keys whose only replica is in the other datacenter.
    keys = [k for k in range(100_000, 101_000)
            if replicas(direct, ks, "t", k) <= set(remote)][:60]
    assert keys
    with run_proxy(points, tmp_path, "--admission-threshold", "1", "--routing-local-dc", "dc1",
                   "--admin", admin) as proxy:
        sessions = clients(proxy, ks, serial)
        spares, sessions = sessions[-1], sessions[:-1]
        try:
            ins = [s.prepare("INSERT INTO t (k, v) VALUES (?, ?) IF NOT EXISTS")
                   for _, s in sessions]

            def run(j, k):
                """A conditional INSERT of k, prepared or literal; the error if it failed."""
                s = sessions[j % len(sessions)][1]
                try:
                    if j % 2:
                        s.execute(ins[j % len(ins)], (k, "w"))
                    else:
                        s.execute(SimpleStatement(
                            f"INSERT INTO t (k, v) VALUES ({k}, 'w') IF NOT EXISTS",
                            serial_consistency_level=serial))
                    return None
                except Exception as e:  # noqa: BLE001 (the error is what is compared)
                    return str(e)

            # Warm-up: replica connections opened, the shapes prepared on the replicas.
            for _ in range(3):
                for j, k in enumerate(keys[:10]):
                    run(j, k)
                time.sleep(0.5)
            before = cluster.snapshot(ks, "t")
            errors = [run(j, k) for j, k in enumerate(keys[10:])]
            delta = cluster.snapshot(ks, "t") - before
            coordinators = {a: c for a, c in delta.kind("read").items() if c}
            away = sum(c for a, c in coordinators.items() if a in remote)
            if serial == ConsistencyLevel.LOCAL_SERIAL:
                # The Paxos round of LOCAL_SERIAL runs in the coordinator's datacenter, which
                # holds no replica of these keys: directly, a dc1 coordinator answers
                # Unavailable. Through autoprep too, never from a dc2 coordinator that would
                # have run it.
                pinned = Cluster(contact_points=[cluster.in_dc("dc1")[0].address],
                                 protocol_version=4, connect_timeout=10,
                                 execution_profiles={EXEC_PROFILE_DEFAULT: ExecutionProfile(
                                     load_balancing_policy=WhiteListRoundRobinPolicy(
                                         [cluster.in_dc("dc1")[0].address]),
                                     consistency_level=ConsistencyLevel.ONE,
                                     serial_consistency_level=serial)})
                try:
                    with pytest.raises(Exception, match="Cannot achieve consistency level "
                                                        "LOCAL_SERIAL"):
                        pinned.connect(ks).execute(
                            f"INSERT INTO t (k, v) VALUES ({keys[10]}, 'w') IF NOT EXISTS")
                finally:
                    pinned.shutdown()
                assert all(e and "Cannot achieve consistency level LOCAL_SERIAL" in e
                           for e in errors), errors
                assert away == 0, (coordinators, routed_lines(admin))
            else:
                assert errors == [None] * len(errors), errors
                # An LWT counts one read on its coordinator: the replica, routed to.
                assert sum(coordinators.values()) == len(keys) - 10, delta
                assert away >= 0.9 * (len(keys) - 10), (coordinators, routed_lines(admin))
        finally:
            for c, _ in sessions + [spares]:
                c.shutdown()


DRIVER_DIR = Path(__file__).resolve().parents[1] / "drivers" / "rust"


@pytest.fixture(scope="module")
def routing_share():
    """tests/drivers/rust's routing_share (the `scylla` crate at its defaults), built here
    (the driver matrix builds the same crate later, from the same target directory)."""
    subprocess.run(["cargo", "build", "-q", "--manifest-path", str(DRIVER_DIR / "Cargo.toml"),
                    "--target-dir", str(DRIVER_DIR / "target"), "--bin", "routing_share"],
                   check=True, timeout=1800)
    return DRIVER_DIR / "target" / "debug" / "routing_share"


@pytest.mark.timeout(2400)
def test_the_scylla_crate_at_its_defaults_is_coordinated_by_replicas(
        cluster, routing_share, tmp_path):
    """The issue's own measure: the `scylla` crate at its defaults (LOCAL_SERIAL with every
    request, its load balancing), consistency ONE, 4 connections, 256 in flight, literal and
    prepared inserts and point reads; every contact point given to autoprep, `--routing-local-dc
    dc1`. Exact per request: the workload runs one phase per owning node (see the program)."""
    admin = f"127.0.0.1:{_free_port()}"
    points = ",".join(f"{a}:9042" for a in cluster.addresses)
    out = tmp_path / "share.json"
    with run_proxy(points, tmp_path, "--routing-local-dc", "dc1", "--admin", admin) as proxy:
        args = [str(routing_share), "--target", f"{proxy.host}:{proxy.port}",
                "--nodes", ",".join(cluster.addresses), "--concurrency", "256",
                "--connections", "4", "--admin", admin, "--seed", "27"]
        # A warm-up over the same session first: shapes seen, replica connections opened and
        # prepared on (per client connection, so a new session starts cold).
        p = subprocess.run(args + ["--warmup", "8000", "--ops", "24000", "--json", str(out)],
                           capture_output=True, text=True, timeout=900)
        assert p.returncode == 0, p.stdout + p.stderr
    result = json.loads(out.read_text())
    print(p.stdout)
    assert result["errors"]["total"] == 0, p.stdout
    assert result["share"] >= 0.99, p.stdout
    homes = [line for line in result["admin_metrics"]
             if line.startswith("autoprep_home_connections_total")]
    local = {n.address for n in cluster.in_dc("dc1")}
    assert homes and all(re.search(r'node="([^"]+):\d+"', h).group(1) in local for h in homes), \
        homes

"""Drivers stay on autoprep: the Python driver, with its default (token-aware, DC-aware)
load-balancing policy, connected to autoprep in front of a two-node cluster.

The cluster is private to this module (scripts/cassandra.sh, two nodes of their own cluster
name on 127.0.0.32 and 127.0.0.33, JMX 7432/7433, seeded by the first), never the shared node
on 127.0.0.1: the shared node is a one-node cluster other tests and agents use, and a topology
test needs peers. autoprep gets both nodes as contact points.

  * The driver discovers no node but autoprep, builds its token map without a warning or an
    error (keyspaces of SimpleStrategy and NetworkTopologyStrategy, RF 2), and routes every
    key to autoprep.
  * `system_views.clients` on both nodes lists only autoprep's upstream connections (and this
    module's own direct inspection sessions): the driver's process opened none of its own.
    Client connections are spread over both nodes (round-robin).
  * One node is killed: the driver reconnects through autoprep, whose new upstream connections
    go to the live node, and the workload carries on.

Environment: AUTOPREP_TEST_TWO_NODES  "a,b" listen addresses [127.0.0.32,127.0.0.33], or 0 to
skip. Runtime: about 40-60 s for the two nodes to start (one after the other), 20 s of tests.
"""

import logging
import os
import time

import pytest
from cassandra import ConsistencyLevel
from cassandra.cluster import Cluster, EXEC_PROFILE_DEFAULT, ExecutionProfile
from cassandra.policies import (DCAwareRoundRobinPolicy, TokenAwarePolicy,
                                WhiteListRoundRobinPolicy)
from cassandra.query import SimpleStatement

from conftest import OwnNode, connections, log, run_proxy

CLUSTER_NAME = "autoprep-topology"


class ClusterNode(OwnNode):
    """One node of the module's two-node cluster: OwnNode's start/kill/wipe with a name, JMX
    port, seed and cluster name of its own."""

    START_TIMEOUT = 150

    def __init__(self, name, listen, jmx_port, seed, ring_delay_ms):
        super().__init__(listen)
        self.NAME, self.JMX_PORT = name, jmx_port
        self.seed, self.ring_delay_ms = seed, ring_delay_ms

    def _env(self):
        env = super()._env()
        env.update(CASSANDRA_SEEDS=f"{self.seed}:7000", CASSANDRA_CLUSTER_NAME=CLUSTER_NAME,
                   CASSANDRA_HEAP="512M", CASSANDRA_RING_DELAY_MS=str(self.ring_delay_ms))
        return env


@pytest.fixture(scope="module")
def nodes():
    spec = os.environ.get("AUTOPREP_TEST_TWO_NODES", "127.0.0.32,127.0.0.33")
    if spec == "0":
        pytest.skip("AUTOPREP_TEST_TWO_NODES=0")
    a, b = spec.split(",")
    # The joining node must hear its seed within the ring delay (the shadow round), on a
    # machine that may be busy: 3 s instead of the 0.1 s a lone node starts with.
    cluster = [ClusterNode("autoprep-topology-a", a, "7432", a, 100),
               ClusterNode("autoprep-topology-b", b, "7433", a, 3000)]
    for n in cluster:
        n.kill()   # a node of an interrupted earlier run, under these names only
        n.wipe()
    t0 = time.monotonic()
    try:
        for n in cluster:
            failure = n.start()
            if failure:
                pytest.fail(f"node {n.host} of the two-node cluster did not start: {failure}")
        wait_for_each_other(cluster)
        log.info("two-node cluster up in %.1f s", time.monotonic() - t0)
        yield cluster
    finally:
        for n in cluster:
            n.kill()


def wait_for_each_other(cluster, timeout=120):
    """Until each node lists the other among its peers with its tokens: before that, a keyspace
    of RF 2 created there draws the server's warning that RF exceeds the nodes it knows (seen
    on a busy machine, where gossip lags the second node's start)."""
    deadline = time.monotonic() + timeout
    for n in cluster:
        others = {o.host for o in cluster if o is not n}
        c, s = direct_session(n.host)
        try:
            while True:
                rows = s.execute("SELECT peer, tokens FROM system.peers")
                if others <= {str(r.peer) for r in rows if r.tokens}:
                    break
                if time.monotonic() > deadline:
                    pytest.fail(f"{n.host} does not see {others} as a peer with tokens")
                time.sleep(0.5)
        finally:
            c.shutdown()


def direct_session(host):
    """A session on `host` alone (for inspection): its connections are this process's own."""
    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([host]),
                               request_timeout=30)
    cluster = Cluster(contact_points=[host], execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                      connect_timeout=10, control_connection_timeout=10)
    return cluster, cluster.connect()


def local_addrs(session):
    """(ip, port) of this process's end of every connection of `session`."""
    return {c._socket.getsockname()[:2] for c in connections(session) if c._socket}


def _decode(hexaddr):
    ip, port = hexaddr.split(":")
    raw = bytes.fromhex(ip)
    # /proc/net/tcp[6] prints each 32-bit word in host (little-endian) order.
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    if len(words) == 16 and words[:12] == b"\0" * 10 + b"\xff\xff":
        words = words[12:]
    if len(words) == 4:
        return ".".join(str(b) for b in words), int(port, 16)
    return ":".join(words[i:i + 2].hex() for i in range(0, 16, 2)), int(port, 16)


def established(pid):
    """(local (ip, port), remote (ip, port)) of every established TCP socket process `pid`
    holds."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            next(f)
            for line in f:
                p = line.split()
                if p[3] == "01" and p[9] in inodes:
                    out.append((_decode(p[1]), _decode(p[2])))
    return out


def upstream_addrs(proxy, node_host):
    """(ip, port) of autoprep's end of its connections to `node_host`'s native port."""
    return {local for local, remote in established(proxy.proc.pid)
            if remote == (node_host, 9042)}


def clients(session):
    return {(r.address, r.port) for r in session.execute(
        "SELECT address, port FROM system_views.clients")}


def run_workload(session, ks, start, n, cl):
    """Writes and reads back `n` rows, as unprepared literal statements (autoprep rewrites
    them) and through a prepared statement."""
    ps = session.prepare(f"SELECT v FROM {ks}.kv WHERE k = ?")
    ps.consistency_level = cl
    for i in range(start, start + n):
        session.execute(SimpleStatement(
            f"INSERT INTO {ks}.kv (k, v) VALUES ({i}, 'v{i}')", consistency_level=cl))
        row = session.execute(SimpleStatement(
            f"SELECT v FROM {ks}.kv WHERE k = {i}", consistency_level=cl)).one()
        assert row.v == f"v{i}"
        assert session.execute(ps, [i]).one().v == f"v{i}"


class Collect(logging.Handler):
    """Keeps the driver's warnings and errors."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.records = []

    def emit(self, record):
        self.records.append(record)

    def messages(self):
        return [f"{r.name} {r.levelname}: {r.getMessage()}" for r in self.records]


@pytest.mark.timeout(420)
def test_the_driver_stays_on_autoprep_and_survives_a_node_stop(nodes, run_id, tmp_path):
    a, b = nodes
    driver_log = Collect()
    logging.getLogger("cassandra").addHandler(driver_log)
    inspect = {}
    try:
        # Without routing: this counts the proxy's upstream connections per node, which a
        # session's replica connections would add to (routing: test_routing.py).
        with run_proxy(f"{a.host}:9042,{b.host}:9042", tmp_path, "--routing", "false") as proxy:
            # The driver's default policy, spelled out (the driver warns when contact points
            # come without a policy), and the protocol version (it warns when it negotiates
            # one down from its own highest).
            profile = ExecutionProfile(
                load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy()),
                request_timeout=30)
            cluster = Cluster(contact_points=[proxy.host], port=proxy.port, protocol_version=5,
                              execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                              connect_timeout=10, control_connection_timeout=10)
            session = cluster.connect()
            try:
                ks_simple = f"topology_{run_id}_s"
                ks_nts = f"topology_{run_id}_n"
                session.execute(
                    f"CREATE KEYSPACE {ks_simple} WITH replication = "
                    "{'class': 'SimpleStrategy', 'replication_factor': 2}", timeout=60)
                session.execute(
                    f"CREATE KEYSPACE {ks_nts} WITH replication = "
                    "{'class': 'NetworkTopologyStrategy', 'datacenter1': 2}", timeout=60)
                for ks in (ks_simple, ks_nts):
                    session.execute(f"CREATE TABLE {ks}.kv (k int PRIMARY KEY, v text)",
                                    timeout=60)
                    run_workload(session, ks, 0, 20, ConsistencyLevel.ALL)
                cluster.refresh_schema_metadata()

                # One node, autoprep, owning the whole ring; every key routed to it.
                hosts = cluster.metadata.all_hosts()
                assert len(hosts) == 1, hosts
                host = hosts[0]
                assert (host.endpoint.address, host.endpoint.port) == (proxy.host, proxy.port)
                assert host.broadcast_rpc_address == proxy.host
                assert host.broadcast_rpc_port == proxy.port
                token_map = cluster.metadata.token_map
                assert token_map is not None and len(token_map.ring) == 1
                for ks in (ks_simple, ks_nts):
                    for key in (b"\x00\x00\x00\x01", b"\x00\x00\x00\x07", b"x" * 40):
                        assert cluster.metadata.get_replicas(ks, key) == [host], ks
                assert driver_log.messages() == [], "the driver warned while connecting"

                # The nodes see autoprep's connections and this module's inspection
                # sessions, nothing else: the driver went around autoprep nowhere.
                driver_addrs = local_addrs(session)
                for n in (a, b):
                    inspect[n.host] = direct_session(n.host)
                seen = {}
                for n in (a, b):
                    _, s = inspect[n.host]
                    # A connection that just closed may linger in the list for a moment:
                    # look again until the list holds only known connections.
                    for _ in range(20):
                        mine = local_addrs(s)
                        via_autoprep = upstream_addrs(proxy, n.host)
                        listed = {(str(addr), port) for addr, port in clients(s)}
                        unknown = listed - mine - via_autoprep
                        if not unknown and via_autoprep <= listed:
                            break
                        time.sleep(0.5)
                    assert not unknown, f"{n.host}: connections neither autoprep's nor ours: " \
                        f"{unknown} (autoprep {via_autoprep}, inspection {mine}, " \
                        f"driver {driver_addrs})"
                    assert via_autoprep <= listed, (n.host, via_autoprep, listed)
                    seen[n.host] = via_autoprep
                    log.info("%s: %d connections from autoprep, %d inspection", n.host,
                             len(via_autoprep), len(mine))
                assert all(seen.values()), f"client connections not spread over the nodes: {seen}"
                # And from this process's side: its only sockets to the nodes are the
                # inspection sessions'.
                inspection = set().union(*(local_addrs(s) for _, s in inspect.values()))
                direct = {local for local, remote in established(os.getpid())
                          if remote in {(a.host, 9042), (b.host, 9042)}}
                assert direct <= inspection, (direct, inspection)
                before = len(upstream_addrs(proxy, a.host)) + len(upstream_addrs(proxy, b.host))

                # Stop one node: the driver's connections through autoprep to it drop, the
                # driver reconnects through autoprep, which goes to the live node.
                b.kill()
                deadline = time.monotonic() + 120
                attempt = 0
                while True:
                    attempt += 1
                    try:
                        run_workload(session, ks_simple, 1000 + attempt, 1, ConsistencyLevel.ONE)
                        break
                    except Exception as e:  # noqa: BLE001 - any failure while reconnecting
                        if time.monotonic() > deadline:
                            raise AssertionError(f"no recovery after the node stopped: {e}")
                        time.sleep(0.5)
                log.info("workload back after %d attempts", attempt)
                for ks in (ks_simple, ks_nts):
                    run_workload(session, ks, 2000, 20, ConsistencyLevel.ONE)
                    rows = session.execute(SimpleStatement(
                        f"SELECT k, v FROM {ks}.kv WHERE k = 3",
                        consistency_level=ConsistencyLevel.ONE)).one()
                    assert rows.v == "v3", "a row written before the stop is still there"
                assert len(cluster.metadata.all_hosts()) == 1
                # The driver's connection that went to the stopped node came back through
                # autoprep, to the live node: as many upstream connections as before, all
                # on the live node.
                deadline = time.monotonic() + 60
                while len(upstream_addrs(proxy, a.host)) < before and time.monotonic() < deadline:
                    time.sleep(0.2)
                assert len(upstream_addrs(proxy, a.host)) >= before, (before, a.host)
                assert not upstream_addrs(proxy, b.host)
                direct = {local for local, remote in established(os.getpid())
                          if remote in {(a.host, 9042), (b.host, 9042)}}
                assert direct <= inspection, (direct, inspection)
            finally:
                cluster.shutdown()
    finally:
        logging.getLogger("cassandra").removeHandler(driver_log)
        for c, _ in inspect.values():
            c.shutdown()

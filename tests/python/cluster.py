"""A local three-node, two-datacenter Cassandra cluster for multi-node tests, and per-node
counters that prove which node coordinated a statement. A helper module: no tests in it.

The cluster is scripts/cluster.sh's (127.0.0.41 dc1/r1 seed, 127.0.0.42 dc1/r2,
127.0.0.43 dc2/r1; native port 9042 on each address; GossipingPropertyFileSnitch; 16 vnodes),
or an existing one named by AUTOPREP_TEST_CLUSTER="a,b,c" (listen addresses, in node order).

    from cluster import LocalCluster

    @pytest.fixture(scope="module")
    def cluster():
        c = LocalCluster.from_env()   # starts (or reuses) scripts/cluster.sh's cluster
        yield c
        c.close()                     # stops it only if this object started a node of it

    before = cluster.snapshot("ks", "t")
    ...                               # statements through autoprep, or a pinned session
    delta = cluster.snapshot("ks", "t") - before
    assert delta.coordinators() == {"127.0.0.42"}

Which node coordinated: Cassandra 5.0's per-table virtual tables (TableMetricTables.java)
    system_views.coordinator_write_latency   StorageProxy.mutate / mutateAtomically, on the
                                             coordinator: +1 per request (or batch) per table it
                                             writes (a batch of 5 rows of one table counts 1)
    system_views.coordinator_read_latency    StorageProxy.readRegular (+1 per partition read:
                                             `IN (a, b)` counts 2) and SERIAL reads
    system_views.coordinator_scan_latency    range reads (no partition key restriction, token
                                             ranges, secondary index scans): +1 per request/page
The `count` column of each is a Timer's count since the node started; only the coordinator
updates these (replicas update local_read/write/scan_latency instead). Read each node alone
over its own connection (WhiteListRoundRobinPolicy), then take differences: reading a virtual
table does not count, neither do the driver's queries of system tables at connect.
A lightweight transaction (INSERT/UPDATE ... IF, Paxos v1, 5.0's default) counts 1 `read` on
its coordinator (the read of the condition, StorageProxy.legacyCas -> readOne) and no `write`.
Measured on this cluster (one driver pinned to 127.0.0.42, NetworkTopologyStrategy
{dc1: 2, dc2: 1}): 10 INSERTs + 10 SELECTs at LOCAL_QUORUM gave write 10, read 10 on .42 and
no coordinator count elsewhere; `IN (1, 2, 3)` read 3; a full scan scan 1; a logged batch of 5
rows write 1; an LWT read 1; a SERIAL read read 1. `trace_coordinator` (query tracing) names
the coordinator of any single statement too.

Faults: kill(n) SIGKILLs node n (number, address or Node); the others see it DN only 10-20 s
later (wait_down(n)); start_node(n) brings it back (12-15 s). Its counters restart from 0
(Snapshot differences allow for that). Measured on this 2-core machine (load 3-6 from other
work): start from nothing 39-54 s, restart of a stopped cluster 30-37 s, reuse of a running
one 2-5 s; stop() 14-15 s, stop(kill=True) about 5 s; 900-950 MiB RSS per node.

Environment:
  AUTOPREP_TEST_CLUSTER       "a,b,c": use this running cluster (never started or stopped here)
  AUTOPREP_TEST_CLUSTER_KEEP  1: close() leaves a cluster it started running (development)
  AUTOPREP_CLUSTER_*          passed on to scripts/cluster.sh (see its header)
"""

import dataclasses
import logging
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from cassandra.cluster import Cluster, EXEC_PROFILE_DEFAULT, ExecutionProfile
from cassandra.policies import WhiteListRoundRobinPolicy

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "cluster.sh"
DEFAULT_NODES = ("127.0.0.41", "127.0.0.42", "127.0.0.43")

# kind -> system_views table. The first three are what a coordinator counts, the last three
# what a replica counts.
COORDINATOR_KINDS = ("write", "read", "scan")
REPLICA_KINDS = ("local_write", "local_read", "local_scan")
TABLES = {
    "write": "coordinator_write_latency",
    "read": "coordinator_read_latency",
    "scan": "coordinator_scan_latency",
    "local_write": "local_write_latency",
    "local_read": "local_read_latency",
    "local_scan": "local_scan_latency",
}

log = logging.getLogger("autoprep.tests.cluster")


@dataclasses.dataclass(frozen=True)
class Node:
    number: int          # 1-based, as scripts/cluster.sh numbers them
    address: str         # listen and rpc address
    port: int            # native transport port
    dc: str
    rack: str


class Snapshot:
    """Counters of one table on every node: counts[address][kind] (kinds of TABLES; a node
    that does not know the table has no row: 0). `later - earlier` gives a Snapshot of the
    differences. The counters start from 0 when a node starts: a count lower than before
    means the node restarted in between, and the difference is then the later count."""

    def __init__(self, keyspace, table, counts):
        self.keyspace, self.table, self.counts = keyspace, table, counts

    def __sub__(self, earlier):
        def d(later, before):
            return later - before if later >= before else later
        return Snapshot(self.keyspace, self.table, {
            addr: {k: d(v, earlier.counts.get(addr, {}).get(k, 0)) for k, v in kinds.items()}
            for addr, kinds in self.counts.items()})

    def diff(self, earlier):
        return self - earlier

    def total(self, kinds=COORDINATOR_KINDS):
        """{address: sum of the given kinds}."""
        return {addr: sum(c.get(k, 0) for k in kinds) for addr, c in self.counts.items()}

    def coordinators(self, kinds=COORDINATOR_KINDS):
        """The addresses whose coordinator counts are not zero (in a difference: the nodes
        that coordinated a request on this table in between)."""
        return {addr for addr, n in self.total(kinds).items() if n}

    def kind(self, kind):
        """{address: count} of one kind."""
        return {addr: c.get(kind, 0) for addr, c in self.counts.items()}

    def __repr__(self):
        rows = ", ".join(f"{a}: {dict((k, v) for k, v in c.items() if v)}"
                         for a, c in sorted(self.counts.items()))
        return f"Snapshot({self.keyspace}.{self.table}: {rows})"


def pinned_cluster(address, port=9042, **kwargs):
    """A driver Cluster that only ever talks to `address` (WhiteListRoundRobinPolicy, so no
    token awareness and no other node's pool), without schema or token metadata (fast
    connect). kwargs go to Cluster (protocol_version, compression, ...)."""
    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([address]),
                               request_timeout=kwargs.pop("request_timeout", 30))
    kwargs.setdefault("schema_metadata_enabled", False)
    kwargs.setdefault("token_metadata_enabled", False)
    kwargs.setdefault("connect_timeout", 10)
    kwargs.setdefault("control_connection_timeout", 10)
    return Cluster(contact_points=[address], port=port,
                   execution_profiles={EXEC_PROFILE_DEFAULT: profile}, **kwargs)


def trace_coordinator(result):
    """The coordinator's address of a statement executed with trace=True (its
    system_traces.sessions row). Works for every kind of statement, LWTs included, but costs
    a traced request and trace writes."""
    return str(result.get_query_trace(max_wait_sec=10).coordinator)


def module_cluster():
    """The body of a module-scoped `cluster` fixture (`cluster = pytest.fixture(scope="module",
    name="cluster")(module_cluster)`): the local cluster, started or reused, stopped at the end
    if this started it; AUTOPREP_TEST_CLUSTER=0 skips the module."""
    import pytest

    if os.environ.get("AUTOPREP_TEST_CLUSTER", "") == "0":
        pytest.skip("AUTOPREP_TEST_CLUSTER=0")
    c = LocalCluster.from_env()
    yield c
    c.close()


class LocalCluster:
    """The three nodes: started by scripts/cluster.sh (reusing running nodes) unless
    `addresses` name an existing cluster (then `managed` is False and start/stop are refused;
    kill/start_node still go through scripts/cluster.sh with AUTOPREP_CLUSTER_NODES set to
    these addresses, which works when the script started those nodes)."""

    START_TIMEOUT = 600    # the whole cluster from nothing: about 55 s on a busy 2-core machine

    def __init__(self, addresses=None, port=9042, start=True, env=None):
        # `env`: AUTOPREP_CLUSTER_* settings of this cluster's own (a second cluster beside the
        # default one: other addresses, JMX ports, prefix, layout), over the environment's.
        self.env = dict(env or {})
        self.managed = addresses is None
        spec = (self.env.get("AUTOPREP_CLUSTER_NODES")
                or os.environ.get("AUTOPREP_CLUSTER_NODES", ",".join(DEFAULT_NODES)))
        self.addresses = list(addresses or spec.split(","))
        if len(self.addresses) != 3:
            raise ValueError(f"three node addresses expected, not {self.addresses}")
        self.port = port
        self.started_here = False
        self._clusters = {}
        self._sessions = {}
        self.nodes = []
        if self.managed and start:
            self.start()
        self.refresh_topology()

    @classmethod
    def from_env(cls):
        spec = os.environ.get("AUTOPREP_TEST_CLUSTER")
        if spec:
            return cls([a.strip() for a in spec.split(",")])
        return cls()

    # --- scripts/cluster.sh ----------------------------------------------------------------
    def script(self, *args, timeout=300, check=True):
        env = {**os.environ, **self.env, "AUTOPREP_CLUSTER_NODES": ",".join(self.addresses)}
        # A process group of its own: a timeout ends the script and its helpers (nodetool,
        # flock), never the nodes (cassandra.sh starts them with setsid).
        with subprocess.Popen([str(SCRIPT), *map(str, args)], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              start_new_session=True) as proc:
            try:
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                out, err = proc.communicate()
                raise RuntimeError(f"scripts/cluster.sh {' '.join(map(str, args))} timed out "
                                   f"after {timeout} s:\n{err[-4000:]}")
        p = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
        if check and p.returncode != 0:
            raise RuntimeError(f"scripts/cluster.sh {' '.join(map(str, args))} failed "
                               f"({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-4000:]}")
        return p

    def running(self):
        """True when every node accepts connections on its native port (a quick check; `start`
        is what waits until all three are UN)."""
        for addr in self.addresses:
            try:
                socket.create_connection((addr, self.port), timeout=2).close()
            except OSError:
                return False
        return True

    def start(self):
        if not self.managed:
            raise RuntimeError("AUTOPREP_TEST_CLUSTER names a cluster this object does not run")
        was_running = self.running()
        t0 = time.monotonic()
        self.script("start", timeout=self.START_TIMEOUT)
        self.started_here = self.started_here or not was_running
        log.info("cluster %s in %.1f s", "reused" if was_running else "started",
                 time.monotonic() - t0)

    def stop(self, kill=False):
        """Stops all nodes: gracefully (SIGTERM in parallel, drains: 14-15 s) or, with kill,
        by SIGKILL one after another (about 1.5 s each; the next start replays the commit log)."""
        if not self.managed:
            raise RuntimeError("AUTOPREP_TEST_CLUSTER names a cluster this object does not run")
        self._close_sessions()
        if kill:
            for n in range(1, len(self.addresses) + 1):
                self.script("kill", n, timeout=60)
        else:
            self.script("stop", timeout=120)

    def kill(self, node):
        """SIGKILL one node (a crash). `node`: number, address or Node."""
        n = self.node(node)
        self._drop_session(n.address)
        self.script("kill", n.number, timeout=60)

    def wait_down(self, node):
        """Waits until every live node sees the (killed or stopped) node DN: 10-20 s after the
        kill. Until then the others still send it requests."""
        self.script("wait-down", self.node(node).number, timeout=self.START_TIMEOUT)

    def start_node(self, node):
        """Starts one node again and waits until it answers CQL and every live node sees it UN."""
        self.script("start-node", self.node(node).number, timeout=self.START_TIMEOUT)

    def nodetool(self, node, *args, timeout=120):
        return self.script("nodetool", self.node(node).number, *args, timeout=timeout).stdout

    def close(self, kill=True):
        """Closes the sessions; stops the cluster (SIGKILL unless kill=False) if this object
        started a node of it, unless AUTOPREP_TEST_CLUSTER_KEEP=1. A cluster that was already
        running when this object was made is left running."""
        self._close_sessions()
        if self.managed and self.started_here and os.environ.get("AUTOPREP_TEST_CLUSTER_KEEP") != "1":
            self.stop(kill=kill)
            self.started_here = False

    # --- nodes -----------------------------------------------------------------------------
    def refresh_topology(self):
        """Reads each node's dc and rack from its system.local."""
        nodes = []
        for i, addr in enumerate(self.addresses, 1):
            row = self.session(addr).execute(
                "SELECT data_center, rack FROM system.local").one()
            nodes.append(Node(i, addr, self.port, row.data_center, row.rack))
        self.nodes = nodes
        return nodes

    def node(self, key):
        """A Node by number (1-3), address or Node."""
        if isinstance(key, Node):
            return key
        for n in self.nodes:
            if key in (n.number, n.address):
                return n
        if isinstance(key, int) and 1 <= key <= len(self.addresses):   # before refresh_topology
            return Node(key, self.addresses[key - 1], self.port, "?", "?")
        if key in self.addresses:
            return self.node(self.addresses.index(key) + 1)
        raise KeyError(f"no node {key!r} in {self.addresses}")

    def in_dc(self, dc):
        return [n for n in self.nodes if n.dc == dc]

    def contact_points(self):
        return [(a, self.port) for a in self.addresses]

    # --- per-node sessions ------------------------------------------------------------------
    def session(self, node):
        """A session of this module's own, connected to that node only (for counters and
        inspection; cached). Tests that run statements should use their own pinned_cluster()
        or autoprep."""
        addr = self.node(node).address if not isinstance(node, str) else node
        s = self._sessions.get(addr)
        if s is None or s.is_shutdown:
            c = pinned_cluster(addr, self.port)
            s = c.connect()
            self._clusters[addr], self._sessions[addr] = c, s
        return s

    def _drop_session(self, addr):
        c = self._clusters.pop(addr, None)
        self._sessions.pop(addr, None)
        if c is not None:
            c.shutdown()

    def _close_sessions(self):
        for addr in list(self._clusters):
            self._drop_session(addr)

    def live(self, node):
        """True when the node answers a query on its own connection."""
        try:
            self.session(node).execute("SELECT release_version FROM system.local", timeout=5)
            return True
        except Exception:
            self._drop_session(self.node(node).address)
            return False

    # --- counters ---------------------------------------------------------------------------
    def _count(self, addr, kind, keyspace, table):
        row = self.session(addr).execute(
            f"SELECT count FROM system_views.{TABLES[kind]} "
            "WHERE keyspace_name = %s AND table_name = %s", (keyspace, table)).one()
        return row.count if row else 0

    def snapshot(self, keyspace, table, kinds=COORDINATOR_KINDS + REPLICA_KINDS, nodes=None):
        """Counters of keyspace.table on every node (or `nodes`; a node that does not answer is
        left out)."""
        counts = {}
        for n in (nodes or self.nodes):
            addr = self.node(n).address
            try:
                counts[addr] = {k: self._count(addr, k, keyspace, table) for k in kinds}
            except Exception as e:   # a killed node
                log.info("no counters from %s: %s", addr, e)
                self._drop_session(addr)
        return Snapshot(keyspace, table, counts)

    def coordinator_counts(self, keyspace, table, kinds=COORDINATOR_KINDS):
        """{node address: requests on keyspace.table it coordinated since it started}
        (writes + single-partition reads + range reads by default)."""
        return self.snapshot(keyspace, table, kinds).total(kinds)

    def replica_counts(self, keyspace, table, kinds=REPLICA_KINDS):
        """{node address: local reads/writes/scans of keyspace.table it served as a replica}."""
        return self.snapshot(keyspace, table, kinds).total(kinds)

    # --- schema -----------------------------------------------------------------------------
    def schema_versions(self):
        return {n.address: self.session(n).execute(
            "SELECT schema_version FROM system.local").one().schema_version for n in self.nodes}

    def wait_schema_agreement(self, timeout=30):
        """Waits until every node reports the same schema version (after DDL through one node)."""
        deadline = time.monotonic() + timeout
        while True:
            versions = self.schema_versions()
            if len(set(versions.values())) == 1:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"no schema agreement after {timeout} s: {versions}")
            time.sleep(0.2)

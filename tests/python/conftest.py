"""Fixtures for the Python-driver and cqlsh integration tests of autoprep.

Every test talks to a real Cassandra twice: through the proxy and directly. The proxy's point is
that a client cannot tell the difference, so most tests compare the two answers.

Environment:
  AUTOPREP_TEST_UPSTREAM  host:port of the node to use; otherwise `scripts/cassandra.sh start`
                          (reuses a running node) and 127.0.0.1:9042
  AUTOPREP_BIN            the proxy binary [<repo>/target/debug/autoprep, built when missing]
  AUTOPREP_TEST_LOG       the proxy's --log filter [info]
  AUTOPREP_TEST_OWN_NODE  0 to never start the tests' own second node (the corpus then runs on
                          the shared node, where server counters are only lower bounds, and the
                          fault tests are skipped); otherwise `listen address` of it [127.0.0.23]
  AUTOPREP_TEST_OWN_NODE_KEEP  1: reuse a running own node and leave it running (development)
  AUTOPREP_TEST_TWO_NODES "a,b" listen addresses of test_topology.py's private two-node cluster
                          [127.0.0.32,127.0.0.33], or 0 to skip that test
"""

import contextlib
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from cassandra.cluster import Cluster, EXEC_PROFILE_DEFAULT, ExecutionProfile
from cassandra.policies import WhiteListRoundRobinPolicy

REPO = Path(__file__).resolve().parents[2]

# (protocol version, compression). v5 supports only LZ4 (Snappy is not a v5 segment codec).
PARAMS = [(4, None), (4, "lz4"), (4, "snappy"), (5, None), (5, "lz4")]

log = logging.getLogger("autoprep.tests")


def _split_hostport(s, default_port=9042):
    host, _, port = s.rpartition(":")
    if not host:
        return s, default_port
    return host.strip("[]"), int(port)


def _wait_port(host, port, timeout, proc=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before listening")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"{host}:{port} did not accept connections within {timeout} s")


def _free_port(host="127.0.0.1"):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def upstream():
    """(host, port) of the real Cassandra node."""
    env = os.environ.get("AUTOPREP_TEST_UPSTREAM")
    if env:
        return _split_hostport(env)
    subprocess.run([str(REPO / "scripts" / "cassandra.sh"), "start"], check=True)
    return ("127.0.0.1", 9042)


class Proxy:
    def __init__(self, host, port, proc, log_path):
        self.host, self.port, self.proc, self.log_path = host, port, proc, log_path

    def log_text(self):
        return self.log_path.read_text(errors="replace")

    def log_tail(self, n=60):
        return "\n".join(self.log_text().splitlines()[-n:])


def _proxy_binary():
    env = os.environ.get("AUTOPREP_BIN")
    if env:
        return Path(env)
    path = REPO / "target" / "debug" / "autoprep"
    if not path.exists():
        subprocess.run(["cargo", "build", "-q", "-p", "autoprep"], cwd=REPO, check=True)
    return path


@contextlib.contextmanager
def run_proxy(upstream, log_dir, *extra_args):
    """Runs the autoprep binary on a free loopback port in front of `upstream` (host, port), or
    a "host:port,host:port" list of contact points, with `extra_args` (e.g.
    "--admission-threshold", "1"); stops it on exit and fails the test if it exited early or
    panicked."""
    binary = _proxy_binary()
    host, port = "127.0.0.1", _free_port()
    log_path = Path(log_dir) / f"autoprep-{port}.log"
    logf = open(log_path, "wb")
    env = dict(os.environ, NO_COLOR="1", RUST_BACKTRACE="1")
    proc = subprocess.Popen(
        [str(binary), "--listen", f"{host}:{port}", "--upstream",
         upstream if isinstance(upstream, str) else f"{upstream[0]}:{upstream[1]}",
         "--log", os.environ.get("AUTOPREP_TEST_LOG", "info"), *extra_args],
        stdout=logf, stderr=subprocess.STDOUT, env=env,
    )
    p = Proxy(host, port, proc, log_path)
    try:
        _wait_port(host, port, 30, proc)
    except Exception:
        proc.kill()
        proc.wait()
        logf.close()
        pytest.fail(f"autoprep did not start:\n{p.log_tail()}")
    try:
        yield p
    finally:
        still_running = proc.poll() is None
        if still_running:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        logf.close()
    text = p.log_text()
    print(f"\nautoprep log ({log_path}), last lines:\n{p.log_tail(15)}")
    assert still_running, f"autoprep exited early with {proc.returncode}:\n{p.log_tail()}"
    assert "panicked" not in text, f"autoprep panicked:\n{p.log_tail()}"


@pytest.fixture(scope="session")
def proxy(upstream, tmp_path_factory):
    """The autoprep binary, listening on a free loopback port in front of `upstream`."""
    with run_proxy(upstream, tmp_path_factory.mktemp("proxy")) as p:
        yield p


class OwnNode:
    """A second, single-node Cassandra cluster of the tests' own (scripts/cassandra.sh with its
    own node name, address and JMX port, seeded by itself): for server counters no other client
    touches, restarts and a small prepared-statement cache. Never the shared node."""

    NAME = "autoprep-difftests"
    JMX_PORT = "7423"
    START_TIMEOUT = 150

    def __init__(self, listen):
        self.host, self.port = listen, 9042
        self.prepared_cache = None
        self.running = False

    def _env(self):
        env = dict(os.environ, CASSANDRA_NODE=self.NAME, CASSANDRA_LISTEN=self.host,
                   CASSANDRA_JMX_PORT=self.JMX_PORT, CASSANDRA_NATIVE_PORT=str(self.port),
                   CASSANDRA_SEEDS=f"{self.host}:7000", CASSANDRA_START_TIMEOUT="120",
                   CASSANDRA_STOP_TIMEOUT="20")
        for k in ("CASSANDRA_AUTH", "CASSANDRA_AUDIT", "CASSANDRA_PREPARED_CACHE",
                  "CASSANDRA_STORAGE_PORT"):
            env.pop(k, None)
        if self.prepared_cache:
            env["CASSANDRA_PREPARED_CACHE"] = self.prepared_cache
        return env

    def _script(self, *args, timeout):
        return subprocess.run([str(REPO / "scripts" / "cassandra.sh"), *args], env=self._env(),
                              capture_output=True, text=True, timeout=timeout)

    def node_dir(self):
        cache = Path(os.environ.get("AUTOPREP_CACHE_DIR", REPO / ".cache"))
        return cache / "cassandra-nodes" / self.NAME

    def start(self, prepared_cache=None):
        """Starts the node with `prepared_cache` (None: Cassandra's default). Returns None, or
        why it could not start."""
        self.prepared_cache = prepared_cache
        t0 = time.monotonic()
        try:
            p = self._script("start", timeout=self.START_TIMEOUT + 90)
        except subprocess.TimeoutExpired:
            return "scripts/cassandra.sh start timed out"
        if p.returncode != 0:
            return f"scripts/cassandra.sh start failed:\n{p.stderr[-3000:]}"
        self.running = True
        log.info("own node up in %.1f s (prepared cache %s)", time.monotonic() - t0,
                 prepared_cache or "default")
        return None

    def stop(self):
        self._script("stop", timeout=60)
        self.running = False

    def kill(self):
        """SIGKILL to this node's JVM (a crash; also the quickest stop: 1-2 s instead of the
        6-10 s drain of SIGTERM). Only the pid of the node's own pid file, checked to be a
        Cassandra daemon of this node directory."""
        pid_file = self.node_dir() / "cassandra.pid"
        try:
            pid = int(pid_file.read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except (OSError, ValueError):
            self.running = False
            return
        if b"org.apache.cassandra.service.CassandraDaemon" in cmdline and \
                str(self.node_dir()).encode() in cmdline:
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 20
            while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        pid_file.unlink(missing_ok=True)
        self.running = False

    def restart(self, prepared_cache=None):
        self.kill()
        return self.start(prepared_cache)

    def wipe(self):
        """Removes the node's data (it must be stopped): every run starts from an empty node,
        with nothing in system.prepared_statements to preload."""
        d = self.node_dir()
        for sub in ("data", "commitlog", "saved_caches", "hints", "cdc_raw"):
            shutil.rmtree(d / sub, ignore_errors=True)


@pytest.fixture(scope="session")
def own_node():
    """The tests' own node, started once per session (Cassandra's default prepared cache) and
    stopped at the end. Tests that need it skip, with the reason, when it cannot start."""
    listen = os.environ.get("AUTOPREP_TEST_OWN_NODE", "127.0.0.23")
    if listen == "0":
        yield None
        return
    node = OwnNode(listen)
    keep = os.environ.get("AUTOPREP_TEST_OWN_NODE_KEEP") == "1"
    if not keep:
        node.kill()   # a node of an interrupted earlier run, under this name only
        node.wipe()
    node.failure = node.start()
    try:
        yield node
    finally:
        if not keep:
            node.kill()   # its data is wiped at the next start anyway


def require_own_node(own_node):
    if own_node is None:
        pytest.skip("AUTOPREP_TEST_OWN_NODE=0: no second Cassandra node for this test")
    if not own_node.running:
        pytest.skip(f"the tests' own Cassandra node could not start: {own_node.failure}")
    return own_node


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On a failed test, attach the tail of the proxy's log to the report."""
    outcome = yield
    rep = outcome.get_result()
    if rep.failed and "proxy" in getattr(item, "funcargs", {}):
        p = item.funcargs["proxy"]
        rep.sections.append(("autoprep log (tail)", p.log_tail()))


def make_cluster(host, port, protocol_version, compression):
    profile = ExecutionProfile(
        load_balancing_policy=WhiteListRoundRobinPolicy([host]), request_timeout=30)
    return Cluster(
        contact_points=[host], port=port, protocol_version=protocol_version,
        compression=compression if compression else False,
        execution_profiles={EXEC_PROFILE_DEFAULT: profile},
        connect_timeout=10, control_connection_timeout=10,
        # Schema events are debounced by this window; keep the event test short.
        schema_event_refresh_window=0.2,
    )


def connections(session):
    """Every connection the session uses: the control connection and the pools' (one each)."""
    conns = [session.cluster.control_connection._connection]
    conns.extend(pool._connection for pool in session.get_pools())
    return [c for c in conns if c is not None]


def check_negotiated(session, protocol_version, compression, endpoint_port):
    cluster = session.cluster
    assert cluster.protocol_version == protocol_version
    hosts = cluster.metadata.all_hosts()
    assert len(hosts) == 1, f"the driver sees more than one node: {hosts}"
    assert hosts[0].endpoint.port == endpoint_port, hosts[0].endpoint
    conns = connections(session)
    assert len(conns) >= 2
    for c in conns:
        assert c.endpoint.port == endpoint_port, c.endpoint
        assert c.protocol_version == protocol_version
        if compression:
            assert c._compression_type == compression
            assert c.compressor is not None and c.decompressor is not None
        else:
            assert c.compressor is None
        if protocol_version >= 5:
            assert c._is_checksumming_enabled, "v5 framing (segments) not in use"


class Target:
    """One side of the comparison: a connected cluster and session, proxy or direct."""

    def __init__(self, name, host, port, pv, compression):
        self.name, self.host, self.port = name, host, port
        self.cluster = make_cluster(host, port, pv, compression)
        self.session = self.cluster.connect()
        check_negotiated(self.session, pv, compression, port)

    def close(self):
        self.cluster.shutdown()


@pytest.fixture(scope="session", params=PARAMS, ids=lambda p: f"v{p[0]}-{p[1] or 'none'}")
def params(request):
    return request.param


@pytest.fixture(scope="session")
def collector(tmp_path_factory):
    """A real OpenTelemetry Collector (tests/python/otelcol.py) for every test that exports
    spans, built once and started once. The proxies batch their spans every 200 ms (the
    default is 5 s): the tests read them back, and the last batch is out before a proxy stops."""
    import otelcol
    why = otelcol.build()
    if why:
        pytest.fail(f"the OpenTelemetry Collector could not be built:\n{why}")
    with pytest.MonkeyPatch.context() as mp, \
            otelcol.running(tmp_path_factory.mktemp("otelcol")) as c:
        mp.setenv("OTEL_BSP_SCHEDULE_DELAY", "200")
        yield c


@pytest.fixture(scope="session")
def run_id():
    return uuid.uuid4().hex[:8]


@pytest.fixture(scope="session")
def ks(params, run_id):
    """A keyspace name of this run and parametrization (created by the first test)."""
    pv, comp = params
    return f"autoprep_py_{run_id}_v{pv}_{comp or 'none'}"


@pytest.fixture(scope="session")
def via_proxy(proxy, params, ks):
    t = Target("proxy", proxy.host, proxy.port, *params)
    yield t
    try:
        t.session.execute(f"DROP KEYSPACE IF EXISTS {ks}", timeout=60)
    finally:
        t.close()


@pytest.fixture(scope="session")
def direct(upstream, params):
    t = Target("direct", upstream[0], upstream[1], *params)
    yield t
    t.close()


@pytest.fixture(scope="session")
def keyspace(via_proxy, ks):
    """The keyspace, created through the proxy; tests that need it depend on this."""
    rs = via_proxy.session.execute(
        f"CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = "
        "{'class': 'SimpleStrategy', 'replication_factor': 1}")
    assert rs.response_future.is_schema_agreed
    return ks


def scrub(s, names):
    for n, placeholder in names.items():
        s = s.replace(n, placeholder)
    return re.sub(r"\x1b\[[0-9;]*m", "", s)


def metric(admin, name, **labels):
    """The value of one sample of autoprep's /metrics (0 when absent)."""
    with urllib.request.urlopen(f"http://{admin}/metrics", timeout=10) as r:
        text = r.read().decode()
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    series = f"{name}{{{want}}}" if want else name
    m = re.search(rf"^{re.escape(series)} (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0

"""Helpers of the differential tests (test_corpus.py, test_faults.py): driver clusters that send
nothing in the background, the server's CQL counters, one statement run as an unprepared
QUERY with everything a client can observe of it collected for comparison, and another client
that keeps the server busy (`Noise`)."""

import contextlib
import re
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from cassandra import cqltypes
from cassandra.cluster import Cluster, EXEC_PROFILE_DEFAULT, ExecutionProfile
from cassandra.policies import ConstantReconnectionPolicy, WhiteListRoundRobinPolicy
from cassandra.query import SimpleStatement, UNSET_VALUE

from conftest import check_negotiated


class Node:
    """Where a differential test runs, and whether the server's counters are its alone."""

    def __init__(self, host, port, exclusive):
        self.host, self.port, self.exclusive = host, port, exclusive


def own_or_shared(own_node, request):
    """The tests' own node when it runs (exact counters), otherwise the shared one."""
    if own_node is not None and own_node.running:
        return Node(own_node.host, own_node.port, True)
    upstream = request.getfixturevalue("upstream")
    return Node(upstream[0], upstream[1], False)


def make_cluster(host, port, pv, compression, **kw):
    """A driver cluster without schema or token metadata: nothing in the background sends
    statements (so the server's counters move only with the corpus). It reconnects every half
    second, for as long as it takes (a node restart)."""
    kw.setdefault("reconnection_policy", ConstantReconnectionPolicy(0.5, max_attempts=None))
    profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([host]),
                               request_timeout=30)
    return Cluster(contact_points=[host], port=port, protocol_version=pv,
                   compression=compression or False,
                   execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                   schema_metadata_enabled=False, token_metadata_enabled=False,
                   # No refresh queries in response to the schema events of the setup.
                   schema_event_refresh_window=-1, topology_event_refresh_window=-1,
                   status_event_refresh_window=-1,
                   connect_timeout=10, control_connection_timeout=10, **kw)


class Metrics:
    """Reads the server's CQL counters over a direct connection."""

    def __init__(self, node):
        self.cluster = make_cluster(node.host, node.port, 4, None)
        self.session = self.cluster.connect()

    def read_all(self):
        rows = self.session.execute("SELECT name, value FROM system_views.cql_metrics")
        return {r.name: int(r.value) for r in rows}

    def read(self):
        """(regular, prepared) statements executed; the read itself is one regular statement."""
        m = self.read_all()
        return m["regular_statements_executed"], m["prepared_statements_executed"]

    def settle(self, quiet=1.0, timeout=30):
        """Waits until no statement but these reads has run for `quiet` seconds."""
        deadline = time.monotonic() + timeout
        last, since = self.read(), time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.2)
            cur = self.read()
            if cur != (last[0] + 1, last[1]):
                since = time.monotonic()
            elif time.monotonic() - since >= quiet:
                return
            last = cur
        raise AssertionError(f"the server's counters did not settle within {timeout} s")

    def close(self):
        self.cluster.shutdown()


# --- running one statement ------------------------------------------------------------

def _cqltype(name):
    if name.startswith("list<"):
        return cqltypes.ListType.apply_parameters([_cqltype(name[5:-1])])
    return cqltypes._cqltypes[name]


def encode_values(values, pv):
    out = []
    for v in values:
        if v is None or v is UNSET_VALUE or isinstance(v, bytes):
            out.append(v)
        else:
            typ, val = v
            out.append(_cqltype(typ).serialize(val, pv))
    return out


def send(session, text, values, fetch, keyspace, pv, timestamp=None):
    """Sends one QUERY and returns its future and the result metadata ids of its Rows pages.
    The driver never sends a QUERY value list itself (it interpolates parameters into the text),
    so the values are put on the message it built."""
    st = SimpleStatement(text, fetch_size=fetch, keyspace=keyspace)
    rf = session._create_response_future(st, None, False, None, 30)
    if values is not None:
        rf.message.query_params = encode_values(values, pv)
    if timestamp is not None:
        rf.message.timestamp = timestamp
    meta_ids = []
    orig = rf._set_result

    def spy(host, connection, pool, response):
        meta_ids.append(getattr(response, "result_metadata_id", None))
        return orig(host, connection, pool, response)

    rf._set_result = spy
    rf._protocol_handler = session.client_protocol_handler
    session._on_request(rf)
    rf.send_request()
    return rf, meta_ids


class Scrub:
    def __init__(self, ks, ks2):
        self.pairs = [(ks2, "<ks2>"), (ks, "<ks>")]

    def text(self, s):
        for a, b in self.pairs:
            s = s.replace(a, b)
        # NoHostAvailable (how the driver reports a server error) names the host it talked to.
        return re.sub(r"<Host: [^>]*>", "<Host>", s)

    def bytes(self, b):
        if b is None:
            return None
        for a, r in self.pairs:
            b = b.replace(a.encode(), r.encode())
        return b


def run_statement(session, st, ks, ks2, pv):
    """What a client can observe of one statement, and how many requests it made."""
    text = st.text.replace("@ks2@", ks2).replace("@ks@", ks)
    if st.ksflag and pv < 5:
        return ("skipped (v5 keyspace field)",), 0
    keyspace = ks2 if st.ksflag else None
    sc = Scrub(ks, ks2)
    requests = 1
    try:
        rf, meta_ids = send(session, text, st.values, st.fetch, keyspace, pv, st.ts)
        rs = rf.result()
        pages = []
        while True:
            pages.append((sc.text(repr(rs.current_rows)), sc.bytes(rs.paging_state),
                          sc.text(repr(rf.warnings)), meta_ids[-1]))
            if not rs.has_more_pages:
                break
            rs.fetch_next_page()
            requests += 1
        types = [sc.text(t.cql_parameterized_type()) for t in rs.column_types or []]
        return ("ok", rs.column_names, types, pages), requests
    except Exception as e:  # the class and message are what the client sees
        return ("error", type(e).__name__, sc.text(str(e))), requests


def connect(host, port, pv, compression, ks, **kw):
    cluster = make_cluster(host, port, pv, compression, **kw)
    session = cluster.connect()
    check_negotiated(session, pv, compression, port)
    session.execute(f"USE {ks}")
    return cluster, session


NOISE_SCRIPT = r"""
import sys
sys.path.insert(0, sys.argv[1])
from cassandra.concurrent import execute_concurrent
from difftools import make_cluster
cluster = make_cluster(sys.argv[2], int(sys.argv[3]), 4, None)
session = cluster.connect()
print("ready", flush=True)
while True:
    execute_concurrent(session, [("SELECT count(*) FROM system_schema.columns", ())] * 100,
                       concurrency=int(sys.argv[4]), raise_on_first_error=False)
"""


class Noise:
    """Another client of the server, with `inflight` cheap reads of a system table always in
    flight, in a process of its own. A server is rarely used by one client alone, and a busy one
    is when Cassandra runs a connection's requests in parallel on its request threads (idle, it
    mostly takes them one after the other): only then can a PREPARE the proxy sent after a
    statement's first sighting still be running when the client's next request, a USE, is
    executed. Reads only: it changes no result."""

    def __init__(self, host, port, inflight):
        self.proc = None
        if inflight <= 0:
            return
        self.proc = subprocess.Popen(
            [sys.executable, "-c", NOISE_SCRIPT, str(Path(__file__).parent), host, str(port),
             str(inflight)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        if self.proc.stdout.readline().strip() != "ready":
            self.stop()
            raise RuntimeError("the noise client did not connect")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


class Relay:
    """A TCP relay that reads the v4 frames going through it (uncompressed): it logs (time,
    connection, what) for every PREPARE sent, the answer to it, and every QUERY `USE`, holds the
    answers to PREPAREs for `hold` seconds (as if the server took that long), and keeps every
    request frame's (connection, opcode, body) in `requests`."""

    def __init__(self, upstream, hold=0.0):
        self.upstream, self.hold = upstream, hold
        self.log, self.lock = [], threading.Lock()
        self.requests = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                down, _ = self.listener.accept()
            except OSError:
                return
            up = socket.create_connection(self.upstream)
            conn = (len(self.log), down.getpeername())
            prepares = set()
            wlock = threading.Lock()
            threading.Thread(target=self._pump, args=(conn, down, up, prepares, None, True),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(conn, up, down, prepares, wlock, False),
                             daemon=True).start()

    def _note(self, conn, what):
        with self.lock:
            self.log.append((time.monotonic(), conn, what))

    def _pump(self, conn, src, dst, prepares, wlock, requests):
        buf = b""
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                dst.close()
                return
            buf += data
            while len(buf) >= 9:
                length = struct.unpack(">i", buf[5:9])[0]
                if len(buf) < 9 + length:
                    break
                frame, buf = buf[:9 + length], buf[9 + length:]
                stream, opcode = struct.unpack(">h", frame[2:4])[0], frame[4]
                if requests:
                    with self.lock:
                        self.requests.append((conn, opcode, frame[9:]))
                    if opcode == 0x09:
                        prepares.add(stream)
                        self._note(conn, "PREPARE sent")
                    elif opcode == 0x07 and b"USE " in frame[13:20].upper():
                        self._note(conn, "USE sent")
                    if not self._send(dst, frame, None):
                        return
                elif stream in prepares and self.hold:
                    prepares.discard(stream)

                    def later(frame=frame):
                        time.sleep(self.hold)
                        self._note(conn, "PREPARE answered")
                        self._send(dst, frame, wlock)
                    threading.Thread(target=later, daemon=True).start()
                elif not self._send(dst, frame, wlock):
                    return

    @staticmethod
    def _send(dst, frame, wlock):
        """Writes a frame on; False once the other side is gone."""
        try:
            if wlock is None:
                dst.sendall(frame)
            else:
                with wlock:
                    dst.sendall(frame)
            return True
        except OSError:
            return False

    def close(self):
        self.listener.close()


def spied(rf):
    """The list every response the driver receives for the request future `rf` is appended to
    (call before the request is sent)."""
    responses = []
    orig = rf._set_result

    def spy(host, connection, pool, response):
        responses.append(response)
        return orig(host, connection, pool, response)

    rf._set_result = spy
    return responses


@contextlib.contextmanager
def scratch_keyspace(node, name, *ddl):
    """A keyspace `name` (RF 1) on `node` with the tables of `ddl` ({ks} is its name), dropped at
    the end; yields (name, a direct session)."""
    cluster = make_cluster(node.host, node.port, 4, None)
    session = cluster.connect()
    try:
        session.execute(f"CREATE KEYSPACE IF NOT EXISTS {name} WITH replication = "
                        "{'class': 'SimpleStrategy', 'replication_factor': 1}", timeout=60)
        for cql in ddl:
            session.execute(cql.format(ks=name), timeout=60)
        yield name, session
    finally:
        session.execute(f"DROP KEYSPACE IF EXISTS {name}", timeout=60)
        cluster.shutdown()

"""What the fleet measures on the cluster's side: the TCP connections to each node and whose
they are (ss), the PREPAREs each node received (its audit log), and each node's prepared
statement count (system_views.cql_metrics).

Which sidecar sent a PREPARE: every sidecar connects from 127.0.0.1, so the audit line's source
address does not say; its source port does. ConnSampler runs `ss -tnpH` every second and keeps,
for every connection to a node, the local port, the owning pid and when it was first and last
seen; a PREPARE is the pid's whose connection on that port was seen within SLACK seconds of the
PREPARE's timestamp (a connection is made, then prepares at once: the first sighting may come
up to a second after). A PREPARE no sighting explains is counted as unattributed.
"""

import re
import subprocess
import threading
import time
from pathlib import Path

SLACK = 3.0
SS_LINE = re.compile(r"^\d+\s+\d+\s+(\S+):(\d+)\s+(\S+):(\d+)\s+users:\(\(\"([^\"]*)\",pid=(\d+)")
# A BATCH's PREPARE line has no ks and scope fields.
AUDIT_LINE = re.compile(r"\|source:/([^|]+)\|port:(\d+)\|timestamp:(\d+)\|type:PREPARE_STATEMENT"
                        r"\|category:PREPARE(?:\|ks:([^|]*))?(?:\|scope:[^|]*)?\|operation:(.*)$")


class ConnSampler(threading.Thread):
    """Every `period` s: the established connections to `nodes` (addresses, port 9042) with
    their owning process, kept as sightings and as per-snapshot counts."""

    def __init__(self, nodes, period=1.0, max_snapshots=20_000):
        super().__init__(name="ss", daemon=True)
        self.nodes, self.period, self.max_snapshots = set(nodes), period, max_snapshots
        self.halt = threading.Event()
        self.lock = threading.Lock()
        self.ports = {}        # local port -> [[pid, first, last, node]] (a port may be reused)
        self.snapshots = []    # [(t, {pid: {node: count}})]

    def snapshot(self):
        out = subprocess.run(["ss", "-tnpH", "state", "established", "( dport = :9042 )"],
                             capture_output=True, text=True, timeout=20).stdout
        now = time.time()
        counts = {}
        with self.lock:
            for line in out.splitlines():
                m = SS_LINE.match(line.strip())
                if not m:
                    continue
                _, lport, raddr, _, _, pid = m.groups()
                if raddr not in self.nodes:
                    continue
                pid, lport = int(pid), int(lport)
                per = counts.setdefault(pid, {})
                per[raddr] = per.get(raddr, 0) + 1
                seen = self.ports.setdefault(lport, [])
                if seen and seen[-1][0] == pid and now - seen[-1][2] <= SLACK + self.period:
                    seen[-1][2] = now
                else:
                    seen.append([pid, now, now, raddr])
            if len(self.snapshots) < self.max_snapshots:
                self.snapshots.append((now, counts))

    def run(self):
        while not self.halt.is_set():
            try:
                self.snapshot()
            except (subprocess.SubprocessError, OSError):
                pass
            self.halt.wait(self.period)

    def stop(self):
        self.halt.set()
        self.join(30)

    def owner(self, port, t):
        """The pid whose connection used this local port around time t, or None."""
        with self.lock:
            for pid, first, last, _ in self.ports.get(port, []):
                if first - SLACK <= t <= last + SLACK:
                    return pid
        return None

    def per_node(self, pids, t0, t1):
        """[(t, {node: connections of these pids})] for the snapshots in [t0, t1]."""
        out = []
        with self.lock:
            for t, counts in self.snapshots:
                if t0 <= t <= t1:
                    per = {n: 0 for n in self.nodes}
                    for pid, c in counts.items():
                        if pid in pids:
                            for node, k in c.items():
                                per[node] += k
                    out.append((t, per))
        return out


def audit_path(cache_dir, prefix, n):
    return Path(cache_dir) / "cassandra-nodes" / f"{prefix}-n{n}" / "logs" / "audit.log"


def audit_size(path):
    try:
        return path.stat().st_size
    except OSError:
        return 0


def read_prepares(path, offset, keyspace):
    """[(source port, unix time s, statement text)] of the PREPARE_STATEMENT lines for
    `keyspace` written after byte `offset` (the log rolls at 100 MB: a smaller file than the
    offset is read from its start)."""
    out = []
    try:
        size = path.stat().st_size
    except OSError:
        return out
    with open(path, "rb") as f:
        f.seek(offset if size >= offset else 0)
        for raw in f:
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            m = AUDIT_LINE.search(line)
            if m and m.group(4) == keyspace:
                out.append((int(m.group(2)), int(m.group(3)) / 1000.0, m.group(5)))
    return out


def prepared_counts(addresses):
    """{node: {metric: value}} from system_views.cql_metrics, each node over its own
    connection."""
    from cassandra.cluster import Cluster, EXEC_PROFILE_DEFAULT, ExecutionProfile
    from cassandra.policies import WhiteListRoundRobinPolicy
    out = {}
    for a in addresses:
        profile = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([a]),
                                   request_timeout=30)
        c = Cluster(contact_points=[a], protocol_version=4, schema_metadata_enabled=False,
                    token_metadata_enabled=False,
                    execution_profiles={EXEC_PROFILE_DEFAULT: profile},
                    connect_timeout=10, control_connection_timeout=10)
        try:
            s = c.connect()
            out[a] = {r.name: r.value for r in s.execute(
                "SELECT name, value FROM system_views.cql_metrics")}
        finally:
            c.shutdown()
    return out

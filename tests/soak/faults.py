"""The soak's fault schedule and the pieces it acts on: the three nodes (scripts/cluster.sh),
autoprep's process, and a client that disconnects in the middle of its requests.

The schedule (schedule()) repeats a cycle of `cycle` seconds (180, or the run's length after
the warm-up when that is shorter), starting after `warmup` seconds; in cycle i, at these
fractions of it:

    0.00  kill -9 node (i mod 3) + 1                       (scripts/cluster.sh kill)
    0.22  start that node again; returns when every live node sees it UN
    0.47  SIGSTOP node ((i + 1) mod 3) + 1 for 20 s, then SIGCONT
    0.67  schema change: ALTER TABLE kv ADD x<g> int; CREATE TABLE extra<g>
    0.78  drain and restart of autoprep (SIGTERM; a new process on the same address at once),
          in the cycle that holds the middle of the run only; in the direct run a no-op

An action that does not fit before the end of the run is left out (a kill only with its
restart). Times are "not before": an action that overruns (a node slow to start) delays the
next. Beside it the disconnecting client (Disconnector) runs all along.
"""

import os
import random
import signal
import socket
import struct
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CLUSTER_SH = REPO / "scripts" / "cluster.sh"

PAUSE_SECONDS = 20.0
SLOTS = (("kill", 0.0), ("start", 0.22), ("pause", 0.47), ("schema", 0.67), ("drain", 0.78))


def schedule(seconds, cycle=180.0, warmup=20.0):
    """[(time from the start, action, node or None)] for a run of `seconds` (module doc)."""
    cycle = min(cycle, seconds - warmup)
    if cycle < 60:
        raise ValueError(f"a run of {seconds} s leaves no room for a fault cycle")
    middle = seconds / 2
    events = []
    i = 0
    while warmup + i * cycle < seconds and i < 1000:
        t0 = warmup + i * cycle
        kill_node = i % 3 + 1
        pause_node = (i + 1) % 3 + 1
        holds_middle = t0 <= middle < t0 + cycle
        for action, frac in SLOTS:
            t = t0 + frac * cycle
            if action == "kill" and t0 + SLOTS[1][1] * cycle + 30 > seconds:
                break                      # no room to start it again: no kill either
            if action == "pause" and t + PAUSE_SECONDS > seconds:
                continue
            if action == "drain" and not holds_middle:
                continue
            if t > seconds - 5:
                continue
            node = kill_node if action in ("kill", "start") else \
                pause_node if action == "pause" else None
            events.append((round(t, 1), action, node))
        i += 1
    return events


class FaultState:
    """What is broken now, for the sampler's notion of steady (drift.py)."""

    def __init__(self, settle):
        self.lock = threading.Lock()
        self.down = set()
        self.paused = set()
        self.last_end = 0.0
        self.settle = settle

    def begin(self, kind, node):
        with self.lock:
            (self.down if kind == "down" else self.paused).add(node)

    def end(self, kind, node):
        with self.lock:
            (self.down if kind == "down" else self.paused).discard(node)
            self.last_end = time.time()

    def steady(self):
        with self.lock:
            return not self.down and not self.paused and \
                time.time() - self.last_end >= self.settle

    def broken(self):
        with self.lock:
            return set(self.down) | set(self.paused)


class ClusterControl:
    """scripts/cluster.sh with the environment's AUTOPREP_CLUSTER_* settings."""

    def __init__(self, log):
        self.log = log
        self.addresses = os.environ.get("AUTOPREP_CLUSTER_NODES",
                                        "127.0.0.41,127.0.0.42,127.0.0.43").split(",")
        self.paused_pids = set()

    def script(self, *args, timeout=300):
        with subprocess.Popen([str(CLUSTER_SH), *map(str, args)], text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              start_new_session=True) as p:
            try:
                out, err = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)   # the script's group: never the nodes
                out, err = p.communicate()
                raise RuntimeError(f"cluster.sh {' '.join(map(str, args))} timed out:\n{err[-2000:]}")
        if p.returncode != 0:
            raise RuntimeError(f"cluster.sh {' '.join(map(str, args))} failed:\n{err[-2000:]}")
        return out

    def pids(self):
        """{node number: JVM pid} of the running nodes (cluster.sh info)."""
        out = {}
        for line in self.script("info", timeout=60).splitlines():
            f = line.split("\t")
            if len(f) >= 9 and f[0].isdigit() and f[8].isdigit():
                out[int(f[0])] = int(f[8])
        return out

    def kill(self, n):
        self.script("kill", n, timeout=60)

    def start_node(self, n):
        self.script("start-node", n, timeout=600)

    def pause(self, n):
        pid = self.pids()[n]
        os.kill(pid, signal.SIGSTOP)
        self.paused_pids.add(pid)
        return pid

    def resume(self, pid):
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
        self.paused_pids.discard(pid)

    def resume_all(self):
        for pid in list(self.paused_pids):
            self.resume(pid)

    def answers(self, n):
        try:
            socket.create_connection((self.addresses[n - 1], 9042), timeout=2).close()
            return True
        except OSError:
            return False

    def ensure_all_up(self):
        """SIGCONT to any node paused here; starts any node that does not answer."""
        self.resume_all()
        for n in (1, 2, 3):
            if not self.answers(n):
                self.log(f"node {n} does not answer: starting it")
                self.start_node(n)


class ProxyProcess:
    """autoprep on a fixed loopback address, restarted in place by drain_restart()."""

    def __init__(self, binary, listen, admin_host, admin_port, upstream, run_dir, extra, log):
        self.binary, self.listen, self.upstream = binary, listen, upstream
        # Each process its own admin port (the draining one still holds its own).
        self.admin_host, self.admin_port = admin_host, admin_port
        self.run_dir, self.extra, self.log = Path(run_dir), list(extra), log
        self.proc = None
        self.starts = {}        # pid -> time started
        self.serving = {}       # pid -> time it became the only process (its clients on it)
        self.exits = []         # [{pid, code, drained_in}] of the processes that ended
        self.generation = 0
        self._old = []

    def _spawn(self):
        self.generation += 1
        logf = open(self.run_dir / f"autoprep-{self.generation}.log", "wb")
        host, port = self.listen.rsplit(":", 1)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("AUTOPREP_CLUSTER_", "AUTOPREP_CACHE_DIR"))}
        env.update(NO_COLOR="1", RUST_BACKTRACE="1")
        self.admin = f"{self.admin_host}:{self.admin_port + self.generation - 1}"
        # A draining process closes its listener at SIGTERM: until then a connection would
        # reach it, and the new process would be taken for ready (bounded wait).
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                socket.create_connection((host, int(port)), timeout=0.5).close()
                time.sleep(0.02)
            except OSError:
                break
        for _ in range(100):   # bounded retries
            proc = subprocess.Popen(
                [str(self.binary), "--listen", self.listen, "--upstream", self.upstream,
                 "--admin", self.admin, *self.extra], stdout=logf, stderr=subprocess.STDOUT,
                env=env)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and proc.poll() is None:
                try:
                    socket.create_connection((host, int(port)), timeout=0.5).close()
                    time.sleep(0.2)
                    if proc.poll() is not None:
                        break
                    self.proc = proc
                    self.starts[proc.pid] = time.time()
                    if self.generation == 1:
                        self.serving[proc.pid] = time.time()
                    logf.close()
                    return proc
                except OSError:
                    time.sleep(0.05)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            time.sleep(0.1)
        logf.close()
        raise RuntimeError(f"autoprep did not start on {self.listen}")

    def start(self):
        return self._spawn()

    def pid(self):
        return self.proc.pid if self.proc is not None else None

    def save_metrics(self):
        """The serving process's /metrics into autoprep-<generation>.metrics.txt."""
        try:
            with urllib.request.urlopen(f"http://{self.admin}/metrics", timeout=5) as r:
                (self.run_dir / f"autoprep-{self.generation}.metrics.txt").write_bytes(r.read())
        except OSError as e:
            self.log(f"could not read autoprep's /metrics: {e!r}")

    def drain_restart(self):
        """SIGTERM to the serving process (it drains: its listener closes, open connections
        are served for the grace period), a new process on the same address at once."""
        self.save_metrics()
        old, t0 = self.proc, time.time()
        old.send_signal(signal.SIGTERM)
        new = self._spawn()
        self.log(f"autoprep {old.pid} draining, {self.proc.pid} serving "
                 f"({time.time() - t0:.2f} s to listen)")

        def reap():
            try:
                code = old.wait(120)
            except subprocess.TimeoutExpired:
                old.kill()
                code = old.wait()
            self.exits.append({"pid": old.pid, "code": code,
                               "drained_in": round(time.time() - t0, 1)})
            # The old process handed its client connections to the new one (--handover-socket)
            # or closed them at the end of its grace period: either way, from now on only the
            # new one serves.
            self.serving[new.pid] = time.time()
        th = threading.Thread(target=reap, daemon=True)
        th.start()
        self._old.append(th)

    def stop(self):
        for th in self._old:
            th.join(130)
        if self.proc is None:
            return
        self.save_metrics()
        t0 = time.time()
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.exits.append({"pid": self.proc.pid, "code": code,
                           "drained_in": round(time.time() - t0, 1)})
        self.proc = None


# --- a client that disconnects mid-request --------------------------------------------------
# Raw protocol v4 frames (also conn_cycles.py's).

def frame(stream, opcode, body):
    return struct.pack(">BBhBi", 0x04, 0, stream, opcode, len(body)) + body


def string_map(m):
    out = struct.pack(">H", len(m))
    for k, v in m.items():
        out += struct.pack(">H", len(k)) + k.encode() + struct.pack(">H", len(v)) + v.encode()
    return out


def query(cql, consistency=0x0004):
    b = cql.encode()
    return struct.pack(">i", len(b)) + b + struct.pack(">HB", consistency, 0)


def recv_frame(sock):
    head = b""
    while len(head) < 9:
        chunk = sock.recv(9 - len(head))
        if not chunk:
            raise ConnectionError("closed before an answer")
        head += chunk
    length = struct.unpack(">i", head[5:9])[0]
    body = b""
    while len(body) < length:
        chunk = sock.recv(min(65536, length - len(body)))
        if not chunk:
            raise ConnectionError("closed in an answer")
        body += chunk
    return head[4], body


class Disconnector(threading.Thread):
    """Every `period` seconds, a new connection (protocol v4) to one of `targets()` that says
    STARTUP, then, in turn: sends half a QUERY frame and closes; sends a whole INSERT and closes
    without waiting for the answer (the write's outcome is unknown: never in the ledger); sends
    a paged scan and closes before reading it. Its own connection errors are counted apart
    (they are not the workload's)."""

    MODES = ("half-frame", "write-then-close", "read-then-close")

    def __init__(self, targets, keyspace, seconds, period=7.0):
        super().__init__(name="disconnector", daemon=True)
        self.targets, self.keyspace, self.period = targets, keyspace, period
        self.max_rounds = int(seconds / period) + 5
        self.halt = threading.Event()
        self.done = {m: 0 for m in self.MODES}
        self.errors = {}
        self.rng = random.Random(7)

    def one(self, mode, host, port, n):
        with socket.create_connection((host, port), timeout=5) as s:
            s.settimeout(5)
            s.sendall(frame(0, 0x01, string_map({"CQL_VERSION": "3.0.0"})))
            opcode, _ = recv_frame(s)
            if opcode != 0x02:
                raise ConnectionError(f"STARTUP answered with opcode {opcode:#x}")
            if mode == "half-frame":
                q = frame(1, 0x07, query(f"SELECT * FROM {self.keyspace}.kv LIMIT 10"))
                s.sendall(q[: 9 + (len(q) - 9) // 2])
            elif mode == "write-then-close":
                s.sendall(frame(1, 0x07, query(
                    f"INSERT INTO {self.keyspace}.kv (k, v, n) VALUES ('dc-{n}', 'gone', {n})")))
            else:
                s.sendall(frame(1, 0x07, query(f"SELECT * FROM {self.keyspace}.ev")))
            # Closing here, with the request half sent or unanswered.

    def run(self):
        for n in range(self.max_rounds):
            if self.halt.wait(self.period):
                return
            mode = self.MODES[n % len(self.MODES)]
            choices = self.targets()
            if not choices:
                continue
            host, port = self.rng.choice(choices)
            try:
                self.one(mode, host, port, n)
                self.done[mode] += 1
            except OSError as e:
                k = type(e).__name__
                self.errors[k] = self.errors.get(k, 0) + 1

    def stop(self):
        self.halt.set()
        self.join(15)

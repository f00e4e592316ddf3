"""A drain the client does not see (design change 3 of the soak chapter): the Python driver,
which knows only autoprep, keeps its connections when autoprep is drained and a new process
takes its place on the same address, as the soak's `drain_restart` does (SIGTERM to the serving
process, a new one on the same address at once). Both name the same `--handover-socket`: the
draining process hands every client connection over, at a request boundary, to the new one.

Under load (v4, and v5 with LZ4):
- no request fails: no `NoHostAvailable`, nothing else;
- the driver never reconnected: every connection the new process served was handed over
  (`autoprep_client_connections_total` equals `autoprep_handover_adopted_total{outcome="adopted"}`);
- the old process exits 0 and logs `handed_over=N closed=0`;
- the connection's keyspace went with it (unqualified statements after the drain), and a
  statement the client prepared before it still executes.

Environment: AUTOPREP_TEST_UPSTREAM (host:port) as for every test here.
"""

import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from conftest import _free_port, _proxy_binary, metric
from difftools import make_cluster


def start(listen, upstream, sock, admin, log_path):
    logf = open(log_path, "wb")
    proc = subprocess.Popen(
        [str(_proxy_binary()), "--listen", listen, "--upstream", f"{upstream[0]}:{upstream[1]}",
         "--admin", admin, "--handover-socket", str(sock), "--drain-grace-seconds", "20",
         "--log", "info"],
        stdout=logf, stderr=subprocess.STDOUT, env={"NO_COLOR": "1", "RUST_BACKTRACE": "1"})
    return proc, logf


def wait_listening(host, port, proc, patience=30):
    import socket
    deadline = time.monotonic() + patience
    while time.monotonic() < deadline:
        assert proc.poll() is None, "autoprep exited early"
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    pytest.fail("autoprep did not listen")


@pytest.mark.parametrize("pv,compression", [(4, None), (5, "lz4")])
def test_the_driver_keeps_its_connections_across_a_drain(upstream, tmp_path, pv, compression):
    host, port = "127.0.0.1", _free_port()
    sock = tmp_path / "handover.sock"
    old_admin = f"127.0.0.1:{_free_port()}"
    new_admin = f"127.0.0.1:{_free_port()}"
    old, old_log = start(f"{host}:{port}", upstream, sock, old_admin, tmp_path / "old.log")
    new = None
    try:
        wait_listening(host, port, old)
        cluster = make_cluster(host, port, pv, compression)
        session = cluster.connect()
        session.execute("USE system")
        prepared = session.prepare("SELECT key FROM local WHERE key = ?")
        errors, done, count = [], threading.Event(), [0]

        def load():
            while not done.is_set():
                try:
                    assert session.execute("SELECT key FROM local").one() is not None
                    assert session.execute(prepared, ["local"]).one() is not None
                    count[0] += 1
                except Exception as e:  # every failure is the test's finding
                    errors.append(repr(e))
                time.sleep(0.005)

        threads = [threading.Thread(target=load) for _ in range(3)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        # The soak's drain_restart: SIGTERM, then a new process on the same address once the
        # old one's listener has closed.
        old.send_signal(signal.SIGTERM)
        wait_closed = time.monotonic() + 15
        import socket
        while time.monotonic() < wait_closed:
            try:
                socket.create_connection((host, port), timeout=0.5).close()
                time.sleep(0.02)
            except OSError:
                break
        new, new_log = start(f"{host}:{port}", upstream, sock, new_admin, tmp_path / "new.log")
        # Its log says it listens: a connection to see would count as one it accepted.
        deadline = time.monotonic() + 30
        while "autoprep listening" not in (tmp_path / "new.log").read_text():
            assert new.poll() is None and time.monotonic() < deadline, "the new process"
            time.sleep(0.02)
        code = old.wait(60)
        time.sleep(1.0)
        done.set()
        for t in threads:
            t.join(30)
        old_text = (tmp_path / "old.log").read_text()
        new_text = (tmp_path / "new.log").read_text()
        assert code == 0, old_text
        assert errors == [], f"{errors[:5]}\nold:\n{old_text}\nnew:\n{new_text}"
        m = re.search(r"drain over handed_over=(\d+) closed=(\d+)", old_text)
        assert m and int(m.group(1)) >= 1 and m.group(2) == "0", old_text
        adopted = metric(new_admin, "autoprep_handover_adopted_total", outcome="adopted")
        accepted = metric(new_admin, "autoprep_client_connections_total")
        assert adopted == int(m.group(1)), new_text
        assert accepted == adopted, f"the driver reconnected:\n{new_text}"
        # The keyspace went with the connections, and work goes on.
        before = count[0]
        assert session.execute("SELECT key FROM local").one() is not None
        assert session.execute(prepared, ["local"]).one() is not None
        assert before > 0
        cluster.shutdown()
        assert "panicked" not in old_text + new_text
    finally:
        for p in (old, new):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        old_log.close()

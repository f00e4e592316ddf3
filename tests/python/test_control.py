"""The control group (issues 18 and 26): in control windows (a share of time, switchback windows
of `--control-window-ms`) every rewritable QUERY goes to the server as the application's own
QUERY, so that the server CPU and response time can be compared with and without the rewrite.

Two relays read the v4 frames on both sides of autoprep (client → relay → autoprep → relay →
node). With every window a control one (`--control-fraction 1`), every QUERY the server receives
is byte for byte a QUERY the client sent (only the stream id is autoprep's), and no EXECUTE
reaches it for them. With half the windows (of 100 ms) control ones, each execution goes one way
or the other: the control ones byte for byte as sent, the others as EXECUTE, and `/shapes` and
`/metrics` count both and compare their response times.
"""

import json
import os
import re
import time
import urllib.request

import pytest

from conftest import _free_port, require_own_node, run_proxy
from difftools import Relay, connect, scratch_keyspace


@pytest.fixture(scope="module")
def node(own_node):
    return require_own_node(own_node)


@pytest.fixture()
def keyspace(node, run_id):
    with scratch_keyspace(node, f"ctl{run_id}",
                          "CREATE TABLE {ks}.kv (k int PRIMARY KEY, v text)") as (ks, _):
        yield ks


def run(node, ks, tmp_path, fraction, n, pause=0.0):
    """n INSERTs and n SELECTs with literals through autoprep between two relays; returns the
    QUERY bodies the client sent, the requests the node received (opcode, body), and
    `/shapes`."""
    admin = f"127.0.0.1:{_free_port()}"
    to_node = Relay((node.host, node.port))
    try:
        with run_proxy(("127.0.0.1", to_node.port), tmp_path, "--admission-threshold", "1",
                       "--admin", admin, "--control-fraction", str(fraction),
                       "--control-window-ms", "100", "--routing", "false") as proxy:
            to_proxy = Relay((proxy.host, proxy.port))
            try:
                cluster, session = connect("127.0.0.1", to_proxy.port, 4, None, ks)
                try:
                    for i in range(n):
                        session.execute(f"INSERT INTO kv (k, v) VALUES ({i}, 'v{i}')")
                        assert session.execute(f"SELECT v FROM kv WHERE k = {i}").one()[0] \
                            == f"v{i}"
                        time.sleep(pause)
                finally:
                    cluster.shutdown()
                with urllib.request.urlopen(f"http://{admin}/shapes", timeout=10) as r:
                    shapes = json.loads(r.read())["shapes"]
                with urllib.request.urlopen(f"http://{admin}/metrics", timeout=10) as r:
                    metrics = r.read().decode()
            finally:
                to_proxy.close()
    finally:
        to_node.close()
    dml = re.compile(rb"(INSERT INTO kv|SELECT v FROM kv)")
    sent = [body for _, op, body in to_proxy.requests if op == 0x07 and dml.search(body[:40])]
    received = [(op, body) for _, op, body in to_node.requests
                if op == 0x0A or op == 0x07 and dml.search(body[:40])]
    return sent, received, shapes, metrics


@pytest.mark.timeout(180)
def test_control_executions_are_the_clients_own_query(node, keyspace, tmp_path):
    sent, received, shapes, metrics = run(node, keyspace, tmp_path, 1, 12)
    assert len(sent) == 24
    # Every execution went as the client's QUERY, byte for byte; no EXECUTE stood in for one.
    assert [op for op, _ in received] == [0x07] * 24, [op for op, _ in received]
    assert [body for _, body in received] == sent
    kv = [s for s in shapes if "kv" in s["text"]]
    assert len(kv) == 2
    for s in kv:
        # The first sighting prepares the shape; the 11 later ones are control executions.
        assert s["passthrough"].get("control") == 11, s
        assert s["control_comparison"]["control"]["samples"] == 11, s
        assert s["rewritten"] == 0
    assert "autoprep_control_fraction 1\n" in metrics


@pytest.mark.timeout(180)
def test_half_the_windows_in_the_control_group(node, keyspace, tmp_path):
    # 100 executions of each shape over about 2 s: some 20 windows of 100 ms, half control.
    n = 100
    sent, received, shapes, metrics = run(node, keyspace, tmp_path, 0.5, n, pause=0.02)
    assert len(sent) == 2 * n
    kv = [s for s in shapes if "kv" in s["text"]]
    total_control = 0
    for s in kv:
        control = s["passthrough"].get("control", 0)
        total_control += control
        # The first sighting prepares the shape; every later one went one way or the other.
        assert control + s["rewritten"] == n - 1, s
        assert 0 < control < n - 1, s
        c = s["control_comparison"]
        assert c["control"]["samples"] == control and c["rewritten"]["samples"] == s["rewritten"]
        assert c["saved_seconds_per_execution"] is not None and c["ci95_seconds"] >= 0, c
    # The server got those control QUERYs as sent, and EXECUTEs for the rest.
    queries = [body for op, body in received if op == 0x07]
    assert all(q in sent for q in queries)
    rewritten = sum(s["rewritten"] for s in kv)
    assert sum(1 for op, _ in received if op == 0x0A) == rewritten
    count = re.search(r'^autoprep_server_response_seconds_count\{group="control"\} (\d+)$',
                      metrics, re.M)
    assert count and int(count.group(1)) == total_control, metrics
    arms = dict(re.findall(r'^autoprep_rewritable_queries_total\{arm="(\w+)"\} (\d+)$', metrics,
                           re.M))
    assert int(arms["control"]) == total_control and int(arms["rewritten"]) == rewritten, arms
    assert "autoprep_control_fraction 0.5\n" in metrics
    assert re.search(r"^autoprep_response_time_saved_seconds_total -?[0-9.e-]+$", metrics, re.M)
    # No --server-metrics-url: no CPU figure, and it says so rather than guess.
    assert re.search(r"^autoprep_server_cpu_saved_seconds_total NaN$", metrics, re.M), metrics
    assert "autoprep_server_metrics_endpoints 0\n" in metrics


def metrics_endpoint(node):
    """The node's jmx_exporter endpoint (scripts/test.sh starts the node with
    CASSANDRA_METRICS_PORT), or skip where the node has none (AUTOPREP_TEST_UPSTREAM)."""
    port = int(os.environ.get("CASSANDRA_METRICS_PORT", "7070"))
    try:
        with urllib.request.urlopen(f"http://{node.host}:{port}/metrics", timeout=5) as r:
            if b"process_cpu_seconds_total" not in r.read():
                pytest.skip("the node's metrics endpoint exports no CPU series")
    except OSError:
        pytest.skip(f"no metrics endpoint on {node.host}:{port} (CASSANDRA_METRICS_PORT)")
    return f"http://{{host}}:{port}/metrics"


def saving_run(node, ks, tmp_path, extra, prepared):
    """Four seconds of inserts through autoprep reading the node's CPU in 400 ms windows, half of
    them control ones; returns `/metrics` and `/saving`."""
    admin = f"127.0.0.1:{_free_port()}"
    with run_proxy((node.host, node.port), tmp_path, "--admission-threshold", "1",
                   "--admin", admin, "--control-fraction", "0.5", "--control-window-ms", "400",
                   "--server-metrics-url", metrics_endpoint(node), *extra) as proxy:
        cluster, session = connect(proxy.host, proxy.port, 4, None, ks)
        try:
            insert = session.prepare("INSERT INTO kv (k, v) VALUES (?, ?)") if prepared else None
            deadline = time.time() + 4
            i = 0
            while time.time() < deadline:
                if insert is not None:
                    session.execute(insert, (i, f"v{i}"))
                else:
                    session.execute(f"INSERT INTO kv (k, v) VALUES ({i}, 'v{i}')")
                i += 1
        finally:
            cluster.shutdown()
        with urllib.request.urlopen(f"http://{admin}/metrics", timeout=10) as r:
            metrics = r.read().decode()
        with urllib.request.urlopen(f"http://{admin}/saving", timeout=10) as r:
            saving = json.loads(r.read())
    return metrics, saving


@pytest.mark.timeout(180)
@pytest.mark.parametrize("case", ["rewrite off", "client prepares"])
def test_nothing_rewritten_reads_zero_within_zero(node, keyspace, tmp_path, case):
    extra, prepared = (("--rewrite", "false"), False) if case == "rewrite off" else ((), True)
    metrics, saving = saving_run(node, keyspace, tmp_path, extra, prepared)
    if case == "rewrite off":
        assert "autoprep_server_cpu_saved_seconds_total 0\n" in metrics, metrics
        assert 'autoprep_server_cpu_saved_interval_seconds{bound="low"} 0\n' in metrics
        assert 'autoprep_server_cpu_saved_interval_seconds{bound="high"} 0\n' in metrics
        assert saving["rewritten"] == 0 and saving["saved_seconds"] == 0, saving
    else:
        # The driver's own few system queries at connect may be rewritten; the application's
        # EXECUTEs never are: nothing, or next to nothing, is claimed.
        assert saving["rewritten"] <= 20, saving
        assert saving["saved_seconds"] is None or abs(saving["saved_seconds"]) < 0.01, saving
    # The node was read all the same; a reading later than a quarter window (100 ms, the cold
    # JVM's first scrapes) is dropped as a timeout, nothing else may fail.
    assert saving["readings"] > 0 and saving["endpoints"] == 1, saving
    assert set(saving["errors"]) <= {"timeout"}, saving


@pytest.mark.timeout(180)
def test_the_nodes_cpu_is_read_around_control_windows(node, keyspace, tmp_path):
    metrics, saving = saving_run(node, keyspace, tmp_path, ("--routing", "false"), False)
    assert saving["rewritten"] > 0 and saving["control"] > 0, saving
    assert saving["readings"] > 0 and set(saving["errors"]) <= {"timeout"}, saving
    used = saving["trials_used"]
    dropped = sum(saving["trials_dropped"].values())
    assert used + dropped > 0, saving
    # Either measured (a finite figure and its interval) or not yet (NaN): never a guess.
    m = re.search(r"^autoprep_server_cpu_saved_seconds_total (\S+)$", metrics, re.M)
    assert m, metrics
    if used >= 3:
        assert saving["saved_per_rewritten_seconds"] is not None
        low, high = saving["saved_interval_seconds"]
        assert low <= float(m.group(1)) <= high
    else:
        assert m.group(1) == "NaN"
    for t in saving["trials"]:
        # Trials carry shapes' counts and CPU, never a statement or a value.
        assert set(t) == {"at_unix_ms", "saved_per_request_seconds", "server_control",
                          "server_rewritten", "own_control", "own_rewritten",
                          "control_requests", "baseline_requests"}

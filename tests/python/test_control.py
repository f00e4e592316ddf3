"""The control group (issue 18): a share of each shape's rewritable executions goes to the server
as the application's own QUERY, so that `/shapes` and `/metrics` can compare response times.

Two relays read the v4 frames on both sides of autoprep (client → relay → autoprep → relay →
node). With every rewritable execution in the control group (`--control-fraction 1`), every QUERY
the server receives is byte for byte a QUERY the client sent (only the stream id is autoprep's),
and no EXECUTE reaches it for them. With a fraction of 1/4, exactly every 4th execution of a
shape is a control one (deterministic), the others run as EXECUTE, and `/shapes` reports both
groups' response times and the difference.
"""

import json
import re
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


def run(node, ks, tmp_path, fraction, n):
    """n INSERTs and n SELECTs with literals through autoprep between two relays; returns the
    QUERY bodies the client sent, the requests the node received (opcode, body), and
    `/shapes`."""
    admin = f"127.0.0.1:{_free_port()}"
    to_node = Relay((node.host, node.port))
    try:
        with run_proxy(("127.0.0.1", to_node.port), tmp_path, "--admission-threshold", "1",
                       "--admin", admin, "--control-fraction", str(fraction),
                       "--routing", "false") as proxy:
            to_proxy = Relay((proxy.host, proxy.port))
            try:
                cluster, session = connect("127.0.0.1", to_proxy.port, 4, None, ks)
                try:
                    for i in range(n):
                        session.execute(f"INSERT INTO kv (k, v) VALUES ({i}, 'v{i}')")
                        assert session.execute(f"SELECT v FROM kv WHERE k = {i}").one()[0] \
                            == f"v{i}"
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
def test_a_quarter_in_the_control_group(node, keyspace, tmp_path):
    n = 40
    sent, received, shapes, metrics = run(node, keyspace, tmp_path, 0.25, n)
    assert len(sent) == 2 * n
    kv = [s for s in shapes if "kv" in s["text"]]
    for s in kv:
        # Executions 4, 8, ..., 40 of each shape (the 1st prepares it, the others rewrite).
        assert s["passthrough"].get("control") == n // 4, s
        assert s["rewritten"] == n - 1 - n // 4, s
        c = s["control_comparison"]
        assert c["control"]["samples"] == n // 4 and c["rewritten"]["samples"] == s["rewritten"]
        assert c["saved_seconds_per_execution"] is not None and c["ci95_seconds"] >= 0, c
    # The server got those control QUERYs as sent, and EXECUTEs for the rest.
    queries = [body for op, body in received if op == 0x07]
    assert all(q in sent for q in queries)
    assert sum(1 for op, _ in received if op == 0x0A) == 2 * (n - 1 - n // 4)
    count = re.search(r'^autoprep_server_response_seconds_count\{group="control"\} (\d+)$',
                      metrics, re.M)
    assert count and int(count.group(1)) == 2 * (n // 4), metrics
    assert re.search(r"^autoprep_estimated_server_seconds_saved_total -?[0-9.e-]+$", metrics, re.M)

"""The other legacy pattern (issue 17): statements PREPAREd with their literals inline, on the
tests' own Cassandra node (conftest `own_node`: its prepared-statement count is ours alone).

  * the server's prepared cache grows by the shapes, not by the statements
    (`system_views.cql_metrics` prepared_statements_count), and `/shapes` and `/metrics` count
    the PREPAREs answered from their shape;
  * a statement the proxy no longer holds (a small `--literal-statements-bytes`) is answered
    UNPREPARED by the server when executed, with the id the client holds, and the driver's
    re-prepare through the proxy makes it run: every row is written;
The generative test (test_generative.py, `prepare-` ids) compares this pattern with direct
execution statement by statement, including shapes the server's prepared cache evicted under the
direct side's churn (the proxy then prepares the client's own text before its EXECUTE, and the
client sees no UNPREPARED); this file checks the server-side effects.
"""

import json
import re
import urllib.request

import pytest
from cassandra.query import tuple_factory

from conftest import _free_port, require_own_node, run_proxy
from difftools import Metrics, make_cluster, scratch_keyspace, spied


@pytest.fixture(scope="module")
def node(own_node):
    return require_own_node(own_node)


@pytest.fixture()
def keyspace(node, run_id):
    with scratch_keyspace(node, f"lit{run_id}",
                          "CREATE TABLE {ks}.kv (k int PRIMARY KEY, v text, n bigint)") as ks:
        yield ks


def metric(admin, name, **labels):
    with urllib.request.urlopen(f"http://{admin}/metrics", timeout=10) as r:
        text = r.read().decode()
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    pattern = re.escape(name) + (r"\{" + re.escape(want) + r"\}" if labels else "") + r" (\d+)"
    m = re.search("^" + pattern + "$", text, re.M)
    return int(m.group(1)) if m else 0


def prepared_count(metrics):
    return int(metrics.read_all()["prepared_statements_count"])


def spy_execute(session, statement):
    """Executes `statement`; returns its rows and the class names of every response the driver
    received for it (an UNPREPARED answer shows as PreparedQueryNotFound)."""
    rf = session._create_response_future(statement, None, False, None, 60)
    responses = spied(rf)
    session._on_request(rf)
    rf.send_request()
    rows = list(rf.result())
    return rows, [type(r).__name__ for r in responses]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("pv", [4, 5])
def test_server_prepares_shapes_not_statements(node, keyspace, pv, tmp_path):
    ks, setup = keyspace
    admin = f"127.0.0.1:{_free_port()}"
    metrics = Metrics(node)
    try:
        with run_proxy((node.host, node.port), tmp_path, "--admission-threshold", "1",
                       "--admin", admin) as proxy:
            cluster = make_cluster(proxy.host, proxy.port, pv, None)
            session = cluster.connect(ks)
            cluster.profile_manager.default.row_factory = tuple_factory
            try:
                n = 40
                before = prepared_count(metrics)
                for i in range(n):
                    ins = session.prepare(
                        f"INSERT INTO kv (k, v, n) VALUES ({i}, 'it''s {i}', {i * 1000})")
                    session.execute(ins)
                    sel = session.prepare(f"SELECT k, v, n FROM {ks}.kv WHERE k = {i}")
                    assert list(session.execute(sel)) == [(i, f"it's {i}", i * 1000)]
                grown = prepared_count(metrics) - before
                answered = metric(admin, "autoprep_literal_prepares_total",
                                  outcome="answered", reason="")
                executed = metric(admin, "autoprep_literal_executes_total",
                                  outcome="rewritten", reason="")
                with urllib.request.urlopen(f"http://{admin}/shapes", timeout=10) as r:
                    shapes = json.loads(r.read())
            finally:
                cluster.shutdown()
    finally:
        metrics.close()
    # Two shapes, each filed by the server under two ids (with and without the keyspace); the
    # driver's own statements add a few. Directly it would be 2 * n * 2.
    assert grown <= 8, f"the server's prepared cache grew by {grown} for {2 * n} statements"
    assert answered >= 2 * n - 2, answered
    assert executed >= 2 * n - 2, executed
    patterns = [s["prepared_with_literals"] for s in shapes["shapes"]
                if "kv" in s["text"] and s["prepared_with_literals"]["answered"]]
    assert len(patterns) == 2 and all(p["executions"] >= n - 1 for p in patterns), patterns
    rows = sorted(setup.execute(f"SELECT k, v FROM {ks}.kv"))
    assert len(rows) == n


@pytest.mark.timeout(180)
def test_statement_the_proxy_forgot_is_prepared_again(node, keyspace, tmp_path):
    ks, setup = keyspace
    admin = f"127.0.0.1:{_free_port()}"
    # Room for a handful of statements: most are forgotten before they are executed.
    with run_proxy((node.host, node.port), tmp_path, "--admission-threshold", "1",
                   "--admin", admin, "--literal-statements-bytes", "1500") as proxy:
        cluster = make_cluster(proxy.host, proxy.port, 4, None)
        session = cluster.connect(ks)
        try:
            n = 30
            prepared = [session.prepare(f"INSERT INTO kv (k, v) VALUES ({i}, 'v{i}')")
                        for i in range(n)]
            held = metric(admin, "autoprep_literal_statements")
            evicted = metric(admin, "autoprep_literal_statements_evicted_total")
            answers = [spy_execute(session, p)[1] for p in prepared]
        finally:
            cluster.shutdown()
    assert 0 < held < n and evicted >= n - held, (held, evicted)
    # The first ones were forgotten: the server answered UNPREPARED for the id the client held,
    # the driver prepared it again through the proxy, and it ran.
    unprepared = sum(1 for a in answers if a[0] == "PreparedQueryNotFound")
    assert unprepared >= n - held - 1, answers
    assert all(a[-1].endswith("ResultMessage") for a in answers), answers
    rows = sorted(setup.execute(f"SELECT k, v FROM {ks}.kv"))
    assert [tuple(r) for r in rows] == [(i, f"v{i}") for i in range(n)]

"""Acceptance of auto-prepare, point 3: faults, on the tests' own Cassandra node (conftest
`own_node`; skipped with the reason when it cannot start), through autoprep with admission
threshold 1 and directly.

  * ALTER TABLE ... ADD between executions of `SELECT * FROM t WHERE k = lit` (v4 and v5): the
    client sees the new column exactly as it would directly.
  * Cassandra killed and restarted in the middle of a run: drivers through autoprep and direct drivers see
    the same thing; every statement after the restart succeeds; no UNPREPARED reaches a client.
    The node comes back with `prepared_statements_cache_size: 1MiB` for the next test.
  * A 1 MiB server prepared cache and 5,000 distinct shapes, re-executed out of order so the
    server evicts them: no client sees UNPREPARED, every result is right, and the server's
    counters give exactly how many statements the proxy had to recover.

The server's counters (system_views.cql_metrics, read on a direct connection) say what ran as a
prepared execution; on this node nothing else talks to the server, so the counts are exact.
Runtime: about 40 s for the restart (SIGKILL and start of the node), 30 s for the eviction run.
"""

import random
import time
import urllib.request

import pytest

from conftest import _free_port, require_own_node, run_proxy
from corpus import S
from difftools import Metrics, connect, make_cluster, run_statement

# The server's counters are compared statement by statement: no routing, whose cluster-view
# reads (four QUERYs of system tables at the first routable request) would count against the
# statement that asked for them, and no control group (a control execution is a QUERY where the
# counters expect an EXECUTE). Both have their own tests (test_routing.py, test_control.py).
EXACT = ("--routing", "false", "--control-fraction", "0")


@pytest.fixture(scope="module")
def node(own_node):
    return require_own_node(own_node)


@pytest.fixture()
def admin(node):
    cluster = make_cluster(node.host, node.port, 4, None)
    session = cluster.connect()
    yield session
    cluster.shutdown()


def keyspaces(admin, run_id, name, *ddl):
    """One keyspace per side (direct, proxy) with the same tables; returns their names."""
    names = {"direct": f"f{name}{run_id}d", "proxy": f"f{name}{run_id}p"}
    for ks in names.values():
        admin.execute(f"CREATE KEYSPACE {ks} WITH replication = "
                      "{'class': 'SimpleStrategy', 'replication_factor': 1}", timeout=60)
        for cql in ddl:
            admin.execute(cql.format(ks=ks), timeout=60)
    return names


def drop(admin, names):
    for ks in names.values():
        admin.execute(f"DROP KEYSPACE IF EXISTS {ks}", timeout=60)


# --- ALTER TABLE between executions -----------------------------------------------------------

def prepares_answered(admin_addr, timeout=30):
    """Waits until every PREPARE the proxy sent on its own has been answered, by its /metrics:
    one went with each QUERY passed through for the reason "preparing" (no BATCH here, which
    may send several)."""
    deadline = time.monotonic() + timeout
    while True:
        text = urllib.request.urlopen(f"http://{admin_addr}/metrics", timeout=5).read().decode()
        samples = dict(line.rsplit(" ", 1) for line in text.splitlines()
                       if line and not line.startswith("#"))
        sent = float(samples.get(
            'autoprep_queries_total{outcome="passthrough",reason="preparing"}', 0))
        answered = sum(float(samples.get(f'autoprep_prepares_total{{result="{r}"}}', 0))
                       for r in ("ok", "failed", "unproven"))
        if answered >= sent:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"{sent - answered:.0f} PREPAREs of the proxy unanswered after {timeout} s")
        time.sleep(0.02)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("pv", [4, 5])
def test_alter_table_add_column(node, admin, run_id, pv, tmp_path):
    names = keyspaces(admin, run_id, f"alt{pv}",
                      "CREATE TABLE {ks}.t (k int PRIMARY KEY, a text)",
                      "INSERT INTO {ks}.t (k, a) VALUES (1, 'one')",
                      "INSERT INTO {ks}.t (k, a) VALUES (2, 'two')")
    metrics = Metrics(node)
    d_cluster = p_cluster = None
    try:
        admin_addr = f"127.0.0.1:{_free_port()}"
        with run_proxy((node.host, node.port), tmp_path, "--admission-threshold", "1",
                       *EXACT,
                       "--admin", admin_addr) as proxy:
            d_cluster, d = connect(node.host, node.port, pv, None, names["direct"])
            p_cluster, p = connect(proxy.host, proxy.port, pv, None, names["proxy"])
            log = []

            def both(text, k=1):
                st = S(text.format(k=k))
                want, _ = run_statement(d, st, names["direct"], names["direct"], pv)
                before = metrics.read()
                got, _ = run_statement(p, st, names["proxy"], names["proxy"], pv)
                # A PREPARE the statement made the proxy send is answered before the next step
                # (which would otherwise find the shape still being prepared on a slow machine).
                prepares_answered(admin_addr)
                after = metrics.read()
                counts = (after[0] - before[0] - 1, after[1] - before[1])
                assert got == want, f"{st.text}\n  direct: {want}\n  proxy:  {got}"
                assert want[0] == "ok", want
                log.append((st.text, counts, want[1]))
                return want, counts

            def alter(cql):
                for ks in names.values():
                    admin.execute(cql.format(ks=ks), timeout=60)

            def result_metadata_id():
                """The v5 result metadata id of the statement, prepared directly."""
                return d.prepare("SELECT * FROM t WHERE k = ?").result_metadata_id

            sel = "SELECT * FROM t WHERE k = {k}"
            both(sel, 1)                      # first sighting: a QUERY; the shape is prepared
            _, c = both(sel, 2)
            assert c == (0, 1), "the second execution is not a prepared execution"
            before_id = result_metadata_id() if pv >= 5 else None

            alter("ALTER TABLE {ks}.t ADD b int")
            want, c = both(sel, 1)
            assert want[1] == ["k", "a", "b"], want
            # Cassandra drops prepared statements of an altered table: the EXECUTE failed with
            # UNPREPARED, which the proxy answered by running the QUERY itself (one regular
            # statement, the EXECUTE counts nothing).
            assert c == (1, 0), log
            if pv >= 5:
                after_id = result_metadata_id()
                assert after_id != before_id, "the result metadata id did not change"
            both("UPDATE t SET b = 7 WHERE k = {k}", 1)
            both(sel, 2)                      # the shape's next sighting prepares it again
            want, c = both(sel, 1)
            assert want[1] == ["k", "a", "b"] and "b=7" in want[3][0][0], want
            assert c == (0, 1), f"not prepared again after the ALTER: {log}"

            alter("ALTER TABLE {ks}.t DROP a")
            alter("ALTER TABLE {ks}.t ADD c list<int>")
            both("UPDATE t SET c = [1, 2] WHERE k = {k}", 2)
            for k in (1, 2, 1, 2):
                want, c = both(sel, k)
                assert want[1] == ["k", "b", "c"], want
            assert c == (0, 1), f"not prepared again after the second ALTER: {log}"

            if pv >= 5:
                # A shape prepared over v4 has no result metadata id: an EXECUTE of it from a v5
                # client carries an empty one, the server answers with "metadata changed" and a
                # new id, and the client (which sent a QUERY) must get a QUERY's Rows.
                alter("ALTER TABLE {ks}.t ADD d int")
                v4_cluster, v4 = connect(proxy.host, proxy.port, 4, None, names["proxy"])
                try:
                    # Until the server shows a prepared execution: the v4 connection's own
                    # PREPARE has been answered (one lost with a closing connection would keep
                    # the shape "being prepared" for the cache's 10 s timeout).
                    for attempt in range(40):
                        before = metrics.read()
                        run_statement(v4, S(sel.format(k=1 + attempt % 2)), names["proxy"],
                                      names["proxy"], 4)
                        if metrics.read()[1] > before[1]:
                            break
                        time.sleep(0.05)
                    else:
                        pytest.fail("the shape was never prepared over v4")
                finally:
                    v4_cluster.shutdown()
                for k in (1, 2, 1):
                    want, c = both(sel, k)
                    assert want[1] == ["k", "b", "c", "d"], want
                    assert c == (0, 1), log
            print(f"\nALTER v{pv}, per statement (proxied regular, prepared): {log}")
    finally:
        for c in (d_cluster, p_cluster):
            if c is not None:
                c.shutdown()
        metrics.close()
        drop(admin, names)


# --- restart in the middle of a run ---------------------------------------------------------------

def _wait_up(session, what, timeout=90):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            session.execute("SELECT release_version FROM system.local", timeout=5)
            return
        except Exception as e:  # NoHostAvailable until the driver has reconnected
            last = e
            time.sleep(0.25)
    pytest.fail(f"{what} did not reconnect within {timeout} s: {last!r}")


def _wait_down(cluster, what, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(h.is_up for h in cluster.metadata.all_hosts()):
            return
        time.sleep(0.1)
    pytest.fail(f"{what}: the driver never saw the node go down")


@pytest.mark.timeout(400)
def test_restart_mid_run(node, own_node, admin, run_id, tmp_path):
    names = keyspaces(admin, run_id, "rst", "CREATE TABLE {ks}.t (k int PRIMARY KEY, v text)")
    shapes = 30
    # Distinct SELECT shapes (the alias is part of the shape), so that after the restart each
    # runs exactly once and the server's counters tell recovered statements from prepared ones.
    selects = [f"SELECT v AS r{i} FROM t WHERE k = {i}" for i in range(shapes)] + \
              [f"SELECT k, v AS s{i} FROM t WHERE k IN ({i}, {i + 1}, 999)" for i in range(shapes)]
    work = [f"INSERT INTO t (k, v) VALUES ({i}, 'v{i}')" for i in range(shapes)] + selects
    d_cluster = p_cluster = None
    metrics = None
    try:
        with run_proxy((node.host, node.port), tmp_path, "--admission-threshold", "1",
                       *EXACT) as proxy:
            d_cluster, d = connect(node.host, node.port, 5, "lz4", names["direct"])
            p_cluster, p = connect(proxy.host, proxy.port, 5, "lz4", names["proxy"])

            def run(label):
                for text in work:
                    want, _ = run_statement(d, S(text), names["direct"], names["direct"], 5)
                    got, _ = run_statement(p, S(text), names["proxy"], names["proxy"], 5)
                    assert got == want, f"{label}: {text}\n  direct: {want}\n  proxy:  {got}"
                    assert want[0] == "ok", f"{label}: {text}: {want}"

            run("before the restart, first sightings")
            run("before the restart, prepared")

            own_node.kill()   # a crash, in the middle of the run
            _wait_down(d_cluster, "direct")
            _wait_down(p_cluster, "through autoprep")
            # While the node is down, both clients see the same failure.
            down = [run_statement(s, S(work[0]), names[side], names[side], 5)[0]
                    for s, side in ((d, "direct"), (p, "proxy"))]
            assert down[0][0] == down[1][0] == "error" and down[0][1] == down[1][1], down

            failure = own_node.start(prepared_cache="1MiB")
            if failure:
                pytest.fail(f"the node did not come back: {failure}")
            _wait_up(d, "the direct driver")
            _wait_up(p, "the driver through autoprep")

            metrics = Metrics(node)
            # The drivers refresh their view of the node after reconnecting (through the proxy,
            # `... system.local WHERE key='local'` even runs prepared): let that pass first.
            metrics.settle()
            before = metrics.read()
            for text in selects:
                got, _ = run_statement(p, S(text), names["proxy"], names["proxy"], 5)
                want, _ = run_statement(d, S(text), names["direct"], names["direct"], 5)
                assert got == want, f"after the restart: {text}\n  direct: {want}\n  proxy:  {got}"
                assert want[0] == "ok", f"after the restart: {text}: {want}"
            after = metrics.read()
            # Every shape was in the proxy's cache: each ran either as a prepared execution of
            # the old id (Cassandra reloads system.prepared_statements at startup) or, after an
            # UNPREPARED, as the replayed QUERY. The direct side adds its regular statements.
            regular = after[0] - before[0] - 1 - len(selects)
            prepared = after[1] - before[1]
            assert regular + prepared == len(selects), (regular, prepared)
            print(f"\nafter the restart, {len(selects)} proxied statements of known shapes: "
                  f"{prepared} prepared executions of the pre-restart ids, {regular} recovered "
                  f"after UNPREPARED")
            run("after the restart, steady state")
    finally:
        for c in (d_cluster, p_cluster):
            if c is not None:
                c.shutdown()
        if metrics is not None:
            metrics.close()
        if own_node.running:
            _wait_up(admin, "the admin session")
            drop(admin, names)


# --- a small server prepared cache ---------------------------------------------------------------

@pytest.mark.timeout(400)
def test_small_server_prepared_cache(node, own_node, run_id, tmp_path):
    if own_node.prepared_cache != "1MiB":
        failure = own_node.restart(prepared_cache="1MiB")
        if failure:
            pytest.skip(f"the tests' own node could not restart with a 1 MiB cache: {failure}")
    cluster = make_cluster(node.host, node.port, 4, None)
    admin = cluster.connect()
    names = keyspaces(admin, run_id, "evict",
                      "CREATE TABLE {ks}.t (k int PRIMARY KEY, a int, b text)",
                      *[f"INSERT INTO {{ks}}.t (k, a, b) VALUES ({k}, {k * 10}, 'b{k}')"
                        for k in range(10)])
    ks = names["proxy"]
    shapes = 5000
    rnd = random.Random(20240101)

    def stmt(i, k):
        # 5000 distinct shapes: the alias is part of the statement text the server prepares.
        cols = ("a", "b", "k, a", "b, a")[i % 4]
        return f"SELECT {cols}, k AS x{i} FROM t WHERE k = {k}", cols, k

    # Every shape runs twice: its first sighting (a QUERY, after which the proxy prepares it)
    # and, later and out of order, a second time with another literal: an EXECUTE of a
    # statement the server may have evicted since. Second sightings follow the first by at
    # least 50 statements, so the background PREPARE has long been answered.
    order, pending = [], []
    for i in range(shapes):
        order.append((i, i % 10))
        pending.append(i)
        ready = [j for j in pending if j <= i - 50]
        if ready and rnd.random() < 0.9:
            j = rnd.choice(ready)
            pending.remove(j)
            order.append((j, (j + 3) % 10))
    rnd.shuffle(pending)
    order.extend((j, (j + 3) % 10) for j in pending)
    assert len(order) == 2 * shapes

    metrics = Metrics(node)
    p_cluster = None
    try:
        with run_proxy((node.host, node.port), tmp_path, "--admission-threshold", "1",
                       *EXACT) as proxy:
            p_cluster, p = connect(proxy.host, proxy.port, 4, "lz4", ks)
            before = metrics.read_all()
            t0 = time.monotonic()
            window, errors, checked = [], [], 0

            def check(fut, i, k):
                nonlocal checked
                text, cols, k = stmt(i, k)
                try:
                    rs = fut.result()
                except Exception as e:  # an UNPREPARED reaching the driver lands here
                    errors.append(f"{text}: {type(e).__name__}: {e}")
                    return
                names_ = [c.strip() for c in cols.split(",")] + [f"x{i}"]
                row = list(rs)
                want = {"a": k * 10, "b": f"b{k}", "k": k}
                if rs.column_names != names_ or len(row) != 1 or \
                        list(row[0]) != [want[c] for c in names_[:-1]] + [k]:
                    errors.append(f"{text}: {rs.column_names} {row}")
                checked += 1

            # Up to 32 requests in flight, checked in order of submission.
            for i, k in order:
                window.append((p.execute_async(stmt(i, k)[0]), i, k))
                if len(window) >= 32:
                    check(*window.pop(0))
            for w in window:
                check(*w)
            elapsed = time.monotonic() - t0
            after = metrics.read_all()
    finally:
        if p_cluster is not None:
            p_cluster.shutdown()
        metrics.close()
        drop(admin, names)
        cluster.shutdown()

    assert not errors, f"{len(errors)} wrong or failed results, e.g.:\n" + "\n".join(errors[:10])
    assert checked == 2 * shapes
    regular = after["regular_statements_executed"] - before["regular_statements_executed"] - 1
    prepared = after["prepared_statements_executed"] - before["prepared_statements_executed"]
    evicted = after["prepared_statements_evicted"] - before["prepared_statements_evicted"]
    # First sightings are QUERYs; each second sighting is an EXECUTE that either ran or got
    # UNPREPARED, in which case the proxy ran the original QUERY instead: a regular statement.
    recovered = regular - shapes
    summary = (f"{shapes} shapes x2 in {elapsed:.1f} s: server regular={regular} "
               f"prepared={prepared} evicted={evicted} (count now "
               f"{after['prepared_statements_count']}); recovered after UNPREPARED: {recovered}")
    print("\n" + summary)
    assert regular + prepared == 2 * shapes, summary
    assert evicted > 0, f"the server evicted nothing: {summary}"
    assert recovered > 0, f"no second sighting needed a recovery: {summary}"
    assert prepared > 0, summary

"""Regression tests of issue 14's three classes, on the tests' own Cassandra node (conftest
`own_node`), through autoprep (admission threshold 1) and directly, on v4 and v5:

  * a one-term `IN (x)` is `=` to the server, a bound `IN ?` is an IN whatever its length: the
    aggregation warning, paging with ORDER BY, LWT with IN on key columns, a conditional batch;
  * a multi-column relation with a tuple literal of the wrong arity gets the server's error
    (and a DELETE with one deletes nothing);
  * a `USE` sent right after a statement's first sighting (while the proxy's own PREPARE of
    its shape is in flight) never makes a later sighting run in the other keyspace, neither
    through the proxy's cache nor through the server's (a PREPARE that the server parses in
    one keyspace and files under the other's id when a USE lands in between).

Each statement runs a few times on each side, so that later sightings run as rewritten
EXECUTEs; every observation (rows, column metadata, pages, warnings, errors) must be the same,
and so must the tables afterwards.
"""

import contextlib

import pytest

from conftest import require_own_node, run_proxy
from corpus import S
from difftools import Relay, connect, make_cluster, run_statement


@pytest.fixture(scope="module")
def node(own_node):
    return require_own_node(own_node)


@pytest.fixture()
def admin(node):
    cluster = make_cluster(node.host, node.port, 4, None)
    session = cluster.connect()
    yield session
    cluster.shutdown()


SCHEMA = [
    "CREATE TABLE {ks}.t (p int, c int, v int, PRIMARY KEY (p, c))",
    "CREATE TABLE {ks}.s (p text, c int, v int, PRIMARY KEY (p, c))",
    "CREATE TABLE {ks}.l (k int, c int, v int, PRIMARY KEY (k, c))",
    "CREATE TABLE {ks}.m (p int, c1 int, c2 int, c3 int, v int, PRIMARY KEY (p, c1, c2, c3))",
    "CREATE TABLE {ks}.w (k int PRIMARY KEY, " + ", ".join(f"v{i} int" for i in range(20)) + ")",
]


def setup_side(admin, ks, ks2):
    for k in (ks, ks2):
        admin.execute(f"CREATE KEYSPACE {k} WITH replication = "
                      "{'class': 'SimpleStrategy', 'replication_factor': 1}", timeout=60)
    for cql in SCHEMA:
        admin.execute(cql.format(ks=ks), timeout=60)
    # Only in the second keyspace: the same name with other columns.
    admin.execute(f"CREATE TABLE {ks2}.t (p int PRIMARY KEY, w text)", timeout=60)
    for c in range(6):
        admin.execute(f"INSERT INTO {ks}.t (p, c, v) VALUES (5, {c}, {c * 10})")
        admin.execute(f"INSERT INTO {ks}.s (p, c, v) VALUES ('a', {c}, {c})")
        for c2 in range(3):
            admin.execute(f"INSERT INTO {ks}.m (p, c1, c2, c3, v) VALUES (0, {c}, {c2}, 0, 1)")
    admin.execute(f"INSERT INTO {ks}.l (k, c, v) VALUES (25, 3, 7)")


def dump(session, ks, tables):
    out = {}
    for t in tables:
        rows = session.execute(f"SELECT * FROM {ks}.{t}")
        out[t] = sorted(repr(tuple(r)) for r in rows)
    return out


@contextlib.contextmanager
def two_sides(node, admin, run_id, pv, tmp_path, tag):
    """Both sides' keyspaces (`setup_side`), a proxy (admission threshold 1), and a driver
    session on each side in its first keyspace: yields (keyspace names by side, direct session,
    proxy session); drops the keyspaces at the end."""
    sides = {"direct": (f"f{tag}{pv}{run_id}d", f"g{tag}{pv}{run_id}d"),
             "proxy": (f"f{tag}{pv}{run_id}p", f"g{tag}{pv}{run_id}p")}
    for ks, ks2 in sides.values():
        setup_side(admin, ks, ks2)
    clusters = []
    try:
        with run_proxy((node.host, node.port), tmp_path, "--admission-threshold", "1") as proxy:
            d_cluster, d = connect(node.host, node.port, pv, None, sides["direct"][0])
            clusters.append(d_cluster)
            p_cluster, p = connect(proxy.host, proxy.port, pv, None, sides["proxy"][0])
            clusters.append(p_cluster)
            yield sides, d, p
    finally:
        for c in clusters:
            c.shutdown()
        for ks, ks2 in sides.values():
            for k in (ks, ks2):
                admin.execute(f"DROP KEYSPACE IF EXISTS {k}", timeout=60)


STATEMENTS = [
    # 1. one-term IN lists: `=` to the server.
    S("SELECT p, count(*), max(v) FROM s WHERE p IN ('a') GROUP BY p"),
    S("SELECT p, c, v FROM t WHERE p IN (5) ORDER BY c DESC", fetch=2),
    S("SELECT p, c, v FROM t WHERE p IN (5) AND c IN (1) ORDER BY c DESC", fetch=2),
    S("SELECT p, c, v FROM t WHERE p IN (5, 6) ORDER BY c DESC", fetch=2),
    S("UPDATE l SET v = 1 WHERE k IN (25) AND c = 3 IF v = 7"),
    S("UPDATE l SET v = 7 WHERE k IN (25) AND c = 3 IF v = 1"),
    S("UPDATE l SET v = 8 WHERE k = 25 AND c IN (3) IF EXISTS"),
    S("DELETE FROM l WHERE k IN (2) AND c = 9 IF EXISTS"),
    S("INSERT INTO l (k, c, v) VALUES (26, 1, 1) IF NOT EXISTS"),
    S("BEGIN BATCH UPDATE l SET v = 2 WHERE k IN (25) AND c = 3 IF v = 8; "
      "UPDATE l SET v = 3 WHERE k = 25 AND c = 4 APPLY BATCH"),
    S("SELECT * FROM m WHERE p = 0 AND (c1, c2) IN ((1, 2))"),
    S("SELECT * FROM m WHERE p = 0 AND (c1, c2) IN ((1, 2), (3, 1))"),
    S("UPDATE m SET v = 5 WHERE p = 0 AND (c1, c2, c3) IN ((1, 1, 0)) IF EXISTS"),
    # 2. tuple literals of the wrong arity: the server's own error.
    S("SELECT * FROM m WHERE p = 0 AND (c1, c2) = (5)"),
    S("SELECT * FROM m WHERE p = 0 AND (c1, c2) IN ((5))"),
    S("SELECT * FROM m WHERE p = 0 AND (c1, c2, c3) > (1, 2)"),
    S("SELECT * FROM m WHERE p = 0 AND (c1, c2) IN ((1, 2), (3))"),
    S("SELECT * FROM m WHERE p = 0 AND (c1, c2) = (1, 2, 3)"),
    S("DELETE FROM m WHERE p = 0 AND (c1, c2) = (1)"),
    S("UPDATE m SET v = 9 WHERE p = 0 AND (c1, c2) = (2)"),
    S("SELECT * FROM m WHERE p = 0 AND (c1, c2) >= (1, 1) AND (c1) < (3)"),
]


@pytest.mark.timeout(240)
@pytest.mark.parametrize("pv", [4, 5])
def test_form_is_kept(node, admin, run_id, pv, tmp_path):
    with two_sides(node, admin, run_id, pv, tmp_path, "m") as (sides, d, p):
        differences = []
        for round_ in range(3):
            for st in STATEMENTS:
                want, _ = run_statement(d, st, *sides["direct"], pv)
                got, _ = run_statement(p, st, *sides["proxy"], pv)
                if want != got:
                    differences.append(f"round {round_}: {st.text}\n  direct: {want}\n"
                                       f"  proxy:  {got}")
        assert not differences, "\n".join(differences)
        tables = ["t", "s", "l", "m"]
        assert dump(d, sides["direct"][0], tables) == dump(p, sides["proxy"][0], tables)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("pv", [4, 5])
def test_use_right_after_a_first_sighting(node, admin, run_id, pv, tmp_path):
    """A statement on a table that exists only in keyspace A (`w`), or with other columns in B
    (`t`), seen in A for the first time (the proxy sends its PREPARE), then at once `USE B` and
    the statement again (directly: the server's error), then back to A; many times, since the
    PREPARE and the USE race. Every sighting must behave as directly, and B must stay empty."""
    with two_sides(node, admin, run_id, pv, tmp_path, "u") as (sides, d, p):
        differences = []
        for i in range(40):
            # Twenty shapes on `w` (only in A) and twenty on `t` (other columns in B), each
            # seen first right before a USE; selections differ by a literal kept inline.
            stmts = [
                S(f"INSERT INTO w (k, v{i % 20}) VALUES ({i}, {i}) USING TTL {100000 + i}"),
                S(f"UPDATE w SET v{i % 20} = {i + 1} WHERE k = {i}"),
                S(f"SELECT p, c, v, {i} FROM t WHERE p = 5 AND c = {i % 6} LIMIT 3"),
                S(f"UPDATE t SET v = {i} WHERE p = {1000 + i % 20} AND c IN ({i % 5})"),
            ]
            for st in stmts:
                for step in ("A", "USE B", "B", "USE A", "A"):
                    if step.startswith("USE"):
                        k = 1 if step.endswith("B") else 0
                        for side, sess in (("direct", d), ("proxy", p)):
                            sess.execute(f"USE {sides[side][k]}")
                        continue
                    want, _ = run_statement(d, st, *sides["direct"], pv)
                    got, _ = run_statement(p, st, *sides["proxy"], pv)
                    if want != got:
                        differences.append(f"#{i} {step}: {st.text}\n  direct: {want}\n"
                                           f"  proxy:  {got}")
        assert not differences, f"{len(differences)} differences:\n" + \
            "\n".join(differences[:20])
        for side, sess in (("direct", d), ("proxy", p)):
            sess.execute(f"USE {sides[side][0]}")
        assert dump(d, sides["direct"][0], ["t", "w"]) == dump(p, sides["proxy"][0], ["t", "w"])
        assert dump(d, sides["direct"][1], ["t"]) == dump(p, sides["proxy"][1], ["t"])


def test_use_waits_for_the_proxys_prepare(node, admin, run_id, tmp_path):
    """Protocol v4: Cassandra 5.0.6 reads a PREPARE's keyspace from the connection twice, to
    parse the statement (`parseAndPrepare` → `setKeyspace(clientState)`) and to file it
    (`storePreparedStatement(queryString, clientState.getRawKeyspace(), ...)`), and runs a
    connection's requests concurrently: a USE that lands between files the statement parsed in
    A under B's prepared id, and the proxy's later EXECUTEs in B write into A (issue 14, seen in
    the generative test). So a client's USE must not reach the server while a PREPARE of the
    proxy's own is unanswered. A relay between proxy and node makes the PREPARE slow (its
    answer held half a second) and shows the order the proxy keeps; the USE itself answers as
    directly."""
    ks, ks2 = f"fw4{run_id}a", f"fw4{run_id}b"
    for k in (ks, ks2):
        admin.execute(f"CREATE KEYSPACE {k} WITH replication = "
                      "{'class': 'SimpleStrategy', 'replication_factor': 1}", timeout=60)
        admin.execute(f"CREATE TABLE {k}.kv (k int PRIMARY KEY, v text)", timeout=60)
    relay = Relay((node.host, node.port), 0.5)
    try:
        with run_proxy(("127.0.0.1", relay.port), tmp_path, "--admission-threshold", "1") \
                as proxy:
            cluster, session = connect(proxy.host, proxy.port, 4, None, ks)
            try:
                for i in range(3):
                    session.execute(f"USE {ks}")
                    session.execute(f"INSERT INTO kv (k, v) VALUES ({i}, 'first {i}')")
                    assert session.execute(f"USE {ks2}").one() is None
                    session.execute(f"INSERT INTO kv (k, v) VALUES ({i}, 'second {i}')")
            finally:
                cluster.shutdown()
    finally:
        relay.close()
        for k in (ks, ks2):
            rows = admin.execute(f"SELECT k, v FROM {k}.kv")
            got = sorted(tuple(r) for r in rows)
            admin.execute(f"DROP KEYSPACE IF EXISTS {k}", timeout=60)
            want = "first" if k == ks else "second"
            assert got == [(i, f"{want} {i}") for i in range(3)], k
    log = sorted(relay.log)
    # On each connection, from a PREPARE sent to its answer, no USE.
    outstanding = {}
    for _, conn, what in log:
        n = outstanding.setdefault(conn, 0)
        if what == "PREPARE sent":
            outstanding[conn] = n + 1
        elif what == "PREPARE answered":
            outstanding[conn] = n - 1
        elif what == "USE sent":
            assert n == 0, [(c[1][1], w) for _, c, w in log]
    assert sum(1 for _, _, w in log if w == "USE sent") >= 6

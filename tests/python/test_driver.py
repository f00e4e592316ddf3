"""The DataStax Python driver through autoprep, against the same driver talking to the node
directly. Every test runs on every (protocol version, compression) of conftest.PARAMS; nothing a
client can observe (rows, column types, paging, errors, events) may differ."""

import datetime
import ipaddress
import math
import time
import uuid
from decimal import Decimal

import pytest
from cassandra import InvalidRequest
from cassandra.protocol import SyntaxException
from cassandra.query import BatchStatement, BatchType, SimpleStatement
from cassandra.util import Date, Duration, Time

SCHEMA_WAIT = 20.0


def ddl(target, cql):
    """Runs a schema change and insists the driver saw the schema agree."""
    rs = target.session.execute(cql, timeout=60)
    assert rs.response_future.is_schema_agreed, f"schema did not agree after: {cql}"
    return rs


def both(via_proxy, direct, stmt, params=None, **kw):
    """Runs `stmt` through the proxy and directly; checks rows and column metadata match."""
    a = via_proxy.session.execute(stmt, params, **kw)
    b = direct.session.execute(stmt, params, **kw)
    assert a.column_names == b.column_names
    assert [t.cql_parameterized_type() for t in a.column_types or []] == \
        [t.cql_parameterized_type() for t in b.column_types or []]
    ra, rb = list(a), list(b)
    assert repr(ra) == repr(rb)
    return ra


def test_create_keyspace_and_table(via_proxy, direct, keyspace):
    # The keyspace fixture already insisted on schema agreement for CREATE KEYSPACE.
    assert via_proxy.cluster.control_connection.wait_for_schema_agreement()
    rs = ddl(via_proxy, f"CREATE TABLE {keyspace}.created (k int PRIMARY KEY, v text)")
    # The driver refreshes its metadata from the SCHEMA_CHANGE result, through the proxy.
    assert "created" in via_proxy.cluster.metadata.keyspaces[keyspace].tables
    # The table is really there, seen from a direct connection.
    row = direct.session.execute(
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
        (keyspace, "created")).one()
    assert row is not None
    # Schema versions the driver read through the proxy match the direct ones.
    q = "SELECT schema_version FROM system.local"
    assert via_proxy.session.execute(q).one() == direct.session.execute(q).one()


@pytest.fixture(scope="session")
def kv(via_proxy, keyspace):
    ddl(via_proxy, f"CREATE TABLE IF NOT EXISTS {keyspace}.kv (k int PRIMARY KEY, v text, n bigint)")
    return f"{keyspace}.kv"


def test_unprepared_and_prepared(via_proxy, direct, keyspace, kv):
    s = via_proxy.session
    for i in range(5):
        s.execute(f"INSERT INTO {kv} (k, v, n) VALUES ({i}, 'text-{i}', {i * 1000})")
    ins = s.prepare(f"INSERT INTO {kv} (k, v, n) VALUES (?, ?, ?)")
    for i in range(5, 10):
        s.execute(ins, (i, f"text-{i}", i * 1000))
    s.execute(SimpleStatement(f"INSERT INTO {kv} (k, v, n) VALUES (%s, %s, %s)"), (10, "it's", -1))

    rows = both(via_proxy, direct, f"SELECT k, v, n FROM {kv} WHERE k IN (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)")
    assert sorted((r.k, r.v, r.n) for r in rows) == \
        [(i, f"text-{i}", i * 1000) for i in range(10)] + [(10, "it's", -1)]

    sel_p = s.prepare(f"SELECT k, v, n FROM {kv} WHERE k = ?")
    sel_d = direct.session.prepare(f"SELECT k, v, n FROM {kv} WHERE k = ?")
    # Same text, same keyspace, same node: the same prepared id.
    assert sel_p.query_id == sel_d.query_id
    for i in range(11):
        a = s.execute(sel_p, (i,)).one()
        assert a == direct.session.execute(sel_d, (i,)).one()
        assert a.k == i
    assert s.execute(sel_p, (999,)).one() is None

    # An update and a delete, prepared and unprepared, then the table as a whole.
    s.execute(f"UPDATE {kv} SET v = 'updated' WHERE k = 0")
    s.execute(s.prepare(f"DELETE FROM {kv} WHERE k = ?"), (1,))
    assert s.execute(sel_p, (0,)).one().v == "updated"
    assert s.execute(sel_p, (1,)).one() is None
    both(via_proxy, direct, f"SELECT * FROM {kv}")
    assert s.execute(f"SELECT count(*) FROM {kv}").one().count == 10

    # USE (set_keyspace) on a second session, then unqualified names.
    s2 = via_proxy.cluster.connect(keyspace)
    try:
        assert s2.execute("SELECT v FROM kv WHERE k = 2").one().v == "text-2"
        p = s2.prepare("SELECT v FROM kv WHERE k = ?")
        assert s2.execute(p, (3,)).one().v == "text-3"
    finally:
        s2.shutdown()

    if via_proxy.cluster.protocol_version >= 5:
        # v5 carries the keyspace in the QUERY/PREPARE frame instead of a USE.
        st = SimpleStatement("SELECT v FROM kv WHERE k = 4", keyspace=keyspace)
        assert s.execute(st).one().v == "text-4"


def test_pipelined_answers_reach_their_requests(via_proxy, keyspace):
    """Hundreds of prepared EXECUTEs in flight on one connection, some answered with an ERROR:
    the proxy passes such batches through as runs (stream ids patched in place, in both
    directions; under v5 within each segment), and every answer must reach its own request."""
    s = via_proxy.session
    ddl(via_proxy, f"CREATE TABLE IF NOT EXISTS {keyspace}.pipe (k int PRIMARY KEY, v text)")
    ins = s.prepare(f"INSERT INTO {keyspace}.pipe (k, v) VALUES (?, ?)")
    sel = s.prepare(f"SELECT k, v FROM {keyspace}.pipe WHERE k = ? LIMIT ?")
    n = 1500
    for f in [s.execute_async(ins, (i, f"v{i}")) for i in range(n)]:
        f.result()
    for window in range(3):
        # A LIMIT of 0 is refused by the server: an ERROR among the RESULTs.
        futures = [(i, s.execute_async(sel, (i, 0 if i % 7 == window else 1))) for i in range(n)]
        for i, f in futures:
            if i % 7 == window:
                with pytest.raises(InvalidRequest, match="LIMIT must be strictly positive"):
                    f.result()
            else:
                assert [tuple(r) for r in f.result()] == [(i, f"v{i}")]


def pages(session, stmt, params=None, paging_state=None):
    rs = session.execute(stmt, params, paging_state=paging_state)
    out = []
    while True:
        out.append((list(rs.current_rows), rs.paging_state))
        if not rs.has_more_pages:
            return out
        rs.fetch_next_page()


def test_paging(via_proxy, direct, keyspace):
    t = f"{keyspace}.paged"
    ddl(via_proxy, f"CREATE TABLE {t} (p int, c int, v text, PRIMARY KEY (p, c))")
    ins = via_proxy.session.prepare(f"INSERT INTO {t} (p, c, v) VALUES (?, ?, ?)")
    for p in range(10):
        for c in range(10):
            via_proxy.session.execute(ins, (p, c, f"{p}/{c}"))

    for make in (lambda s: SimpleStatement(f"SELECT p, c, v FROM {t}", fetch_size=10),
                 lambda s: _fetch(s.prepare(f"SELECT p, c, v FROM {t}"), 10)):
        got = pages(via_proxy.session, make(via_proxy.session))
        want = pages(direct.session, make(direct.session))
        # Ten full pages; the server may add an empty last page when the tenth one ended
        # exactly at the end of the data (it does here, directly too).
        sizes = [len(rows) for rows, _ in got]
        assert sizes[:10] == [10] * 10 and all(n == 0 for n in sizes[10:]), sizes
        rows = [r for page, _ in got for r in page]
        assert len(rows) == 100 and len(set((r.p, r.c) for r in rows)) == 100
        # Same rows, same page boundaries, same paging-state bytes as directly.
        assert got == want
        # A paging state handed out through the proxy resumes directly, and vice versa.
        state = got[3][1]
        assert pages(direct.session, make(direct.session), paging_state=state) == want[4:]
        assert pages(via_proxy.session, make(via_proxy.session), paging_state=want[6][1]) == got[7:]


def _fetch(stmt, n):
    stmt.fetch_size = n
    return stmt


def test_batches(via_proxy, direct, keyspace):
    t = f"{keyspace}.batched"
    ddl(via_proxy, f"CREATE TABLE {t} (k int, c int, v text, PRIMARY KEY (k, c))")
    s = via_proxy.session
    ins = s.prepare(f"INSERT INTO {t} (k, c, v) VALUES (?, ?, ?)")
    b = BatchStatement(batch_type=BatchType.LOGGED)
    for c in range(4):
        b.add(ins, (1, c, f"prepared-{c}"))
    b.add(SimpleStatement(f"INSERT INTO {t} (k, c, v) VALUES (%s, %s, %s)"), (1, 4, "simple"))
    b.add(f"INSERT INTO {t} (k, c, v) VALUES (1, 5, 'literal')")
    b.add(s.prepare(f"UPDATE {t} SET v = ? WHERE k = ? AND c = ?"), ("updated", 1, 0))
    s.execute(b)

    s.execute(f"""BEGIN BATCH
        INSERT INTO {t} (k, c, v) VALUES (2, 0, 'text-0');
        INSERT INTO {t} (k, c, v) VALUES (2, 1, 'text-1');
        UPDATE {t} SET v = 'text-2' WHERE k = 2 AND c = 2;
        DELETE FROM {t} WHERE k = 1 AND c = 3;
    APPLY BATCH""")

    ub = BatchStatement(batch_type=BatchType.UNLOGGED)
    ub.add(ins, (3, 0, "unlogged"))
    s.execute(ub)

    rows = both(via_proxy, direct, f"SELECT k, c, v FROM {t} WHERE k IN (1, 2, 3)")
    assert [(r.k, r.c, r.v) for r in rows] == [
        (1, 0, "updated"), (1, 1, "prepared-1"), (1, 2, "prepared-2"), (1, 4, "simple"),
        (1, 5, "literal"), (2, 0, "text-0"), (2, 1, "text-1"), (2, 2, "text-2"), (3, 0, "unlogged"),
    ]


def test_schema_change_event(via_proxy, direct, keyspace):
    """A schema change made on another connection reaches the driver only as an EVENT frame
    (stream -1) on its control connection, through the proxy."""
    cc = via_proxy.cluster.control_connection
    events = []
    original = cc._handle_schema_change

    def spy(event):
        events.append(dict(event))
        return original(event)

    # The driver looks the handler up by name on every event (see cluster._watch_callback).
    cc._handle_schema_change = spy
    try:
        meta = via_proxy.cluster.metadata
        name = "evt"
        ddl(direct, f"CREATE TABLE {keyspace}.{name} (k int PRIMARY KEY)")
        _wait(lambda: name in meta.keyspaces[keyspace].tables,
              f"table {name} in the proxy session's metadata")
        assert {"target_type": "TABLE", "change_type": "CREATED", "keyspace": keyspace,
                "table": name} in events, events

        ddl(direct, f"ALTER TABLE {keyspace}.{name} ADD extra text")
        _wait(lambda: "extra" in meta.keyspaces[keyspace].tables[name].columns,
              "the new column in the proxy session's metadata")
        ddl(direct, f"DROP TABLE {keyspace}.{name}")
        _wait(lambda: name not in meta.keyspaces[keyspace].tables,
              f"table {name} gone from the proxy session's metadata")
        kinds = [(e["change_type"], e.get("table")) for e in events if e.get("table") == name]
        assert ("UPDATED", name) in kinds and ("DROPPED", name) in kinds, events
    finally:
        del cc._handle_schema_change


def _wait(cond, what, timeout=SCHEMA_WAIT):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


TYPES = [
    ("a_ascii", "ascii", "'abc'", "abc"),
    ("a_bigint", "bigint", "-9223372036854775808", -9223372036854775808),
    ("a_blob", "blob", "0xcafebabe00", b"\xca\xfe\xba\xbe\x00"),
    ("a_boolean", "boolean", "true", True),
    ("a_date", "date", "'2024-02-29'", Date(datetime.date(2024, 2, 29))),
    ("a_decimal", "decimal", "-123.4560", Decimal("-123.4560")),
    ("a_double", "double", "3.141592653589793", 3.141592653589793),
    ("a_duration", "duration", "1mo2d3h4m5s6ms7us8ns",
     Duration(1, 2, ((3 * 60 + 4) * 60 + 5) * 10**9 + 6 * 10**6 + 7 * 10**3 + 8)),
    ("a_float", "float", "1.5", 1.5),
    ("a_inet", "inet", "'2001:db8::1'", "2001:db8::1"),
    ("a_int", "int", "-2147483648", -2147483648),
    ("a_smallint", "smallint", "-32768", -32768),
    ("a_text", "text", "'héllo ☃ ''quoted'''", "héllo ☃ 'quoted'"),
    ("a_time", "time", "'12:34:56.123456789'", Time(45296123456789)),
    ("a_timestamp", "timestamp", "'2024-01-02 03:04:05.678+0000'",
     datetime.datetime(2024, 1, 2, 3, 4, 5, 678000)),
    ("a_timeuuid", "timeuuid", "d2177dd0-eaa2-11de-a572-001b779c76e3",
     uuid.UUID("d2177dd0-eaa2-11de-a572-001b779c76e3")),
    ("a_tinyint", "tinyint", "-128", -128),
    ("a_uuid", "uuid", "550e8400-e29b-41d4-a716-446655440000",
     uuid.UUID("550e8400-e29b-41d4-a716-446655440000")),
    ("a_varchar", "varchar", "'varchar ✓'", "varchar ✓"),
    ("a_varint", "varint", "-123456789012345678901234567890", -123456789012345678901234567890),
    ("a_list", "list<int>", "[3, 1, 2]", [3, 1, 2]),
    ("a_set", "set<text>", "{'b', 'a'}", {"a", "b"}),
    ("a_map", "map<text, int>", "{'x': 1, 'y': -2}", {"x": 1, "y": -2}),
    ("a_tuple", "tuple<int, text, boolean>", "(7, 'seven', false)", (7, "seven", False)),
    ("a_udt", "frozen<addr>", "{street: 'Main St', zip: 12345, tags: ['a', 'b']}", None),
    ("a_vector", "vector<float, 3>", "[1.0, 2.5, -3.25]", [1.0, 2.5, -3.25]),
    ("a_nested", "map<int, frozen<list<frozen<set<bigint>>>>>", "{1: [{2, 3}, {}]}",
     {1: [{2, 3}, set()]}),
]


def test_every_native_type(via_proxy, direct, keyspace):
    s = via_proxy.session
    ddl(via_proxy, f"CREATE TYPE {keyspace}.addr (street text, zip int, tags list<text>)")
    cols = ", ".join(f"{name} {typ}" for name, typ, _, _ in TYPES)
    t = f"{keyspace}.all_types"
    ddl(via_proxy, f"CREATE TABLE {t} (k int PRIMARY KEY, {cols})")

    names = [name for name, _, _, _ in TYPES]
    # Row 1: bound values through a prepared INSERT (an unregistered UDT binds as a tuple).
    values = [v for _, _, _, v in TYPES]
    values[names.index("a_udt")] = ("Main St", 12345, ["a", "b"])
    ins = s.prepare(f"INSERT INTO {t} (k, {', '.join(names)}) VALUES (?, {', '.join('?' * len(names))})")
    s.execute(ins, [1] + values)
    # Row 2: the same values as CQL literals in an unprepared INSERT.
    s.execute(f"INSERT INTO {t} (k, {', '.join(names)}) VALUES "
              f"(2, {', '.join(lit for _, _, lit, _ in TYPES)})")
    # Row 3: only the key; every other column null. Row 4: the float edge cases.
    s.execute(ins, [3] + [None] * len(names))
    s.execute(f"INSERT INTO {t} (k, a_double, a_float, a_decimal, a_varint, a_blob, a_text) "
              "VALUES (4, -Infinity, NaN, 0.000000000000000000001, 0, 0x, '')")

    sel = f"SELECT k, {', '.join(names)} FROM {t} WHERE k = %s"
    rows = {}
    for k in (1, 2, 3, 4):
        got = both(via_proxy, direct, sel, (k,))
        assert len(got) == 1
        rows[k] = got[0]
        # And through a prepared SELECT, on both sides.
        pq = f"SELECT k, {', '.join(names)} FROM {t} WHERE k = ?"
        pa = s.execute(s.prepare(pq), (k,)).one()
        pb = direct.session.execute(direct.session.prepare(pq), (k,)).one()
        assert repr(pa) == repr(pb) == repr(rows[k])

    r1, r2 = rows[1], rows[2]
    for name, typ, _, want in TYPES:
        a, b = getattr(r1, name), getattr(r2, name)
        if name == "a_udt":
            assert (a.street, a.zip, list(a.tags)) == ("Main St", 12345, ["a", "b"])
            assert tuple(a) == tuple(b)
            continue
        if name == "a_inet":
            assert ipaddress.ip_address(a) == ipaddress.ip_address(want)
        elif name == "a_set":
            assert set(a) == want
        elif name == "a_map":
            assert dict(a) == want
        elif name == "a_nested":
            assert {k: [set(x) for x in v] for k, v in a.items()} == want
        else:
            assert a == want, (name, a, want)
        assert a == b, (name, "prepared row differs from the literal row", a, b)

    r3 = rows[3]
    assert all(getattr(r3, n) is None for n in names)
    r4 = rows[4]
    assert r4.a_double == -math.inf and math.isnan(r4.a_float)
    assert r4.a_decimal == Decimal("1E-21") and r4.a_varint == 0
    assert r4.a_blob == b"" and r4.a_text == ""

    # Counters live in their own table.
    c = f"{keyspace}.counters"
    ddl(via_proxy, f"CREATE TABLE {c} (k int PRIMARY KEY, n counter)")
    s.execute(f"UPDATE {c} SET n = n + 5 WHERE k = 1")
    s.execute(s.prepare(f"UPDATE {c} SET n = n + ? WHERE k = ?"), (-7, 1))
    cb = BatchStatement(batch_type=BatchType.COUNTER)
    cb.add(f"UPDATE {c} SET n = n + 100 WHERE k = 2")
    s.execute(cb)
    got = both(via_proxy, direct, f"SELECT k, n FROM {c}")
    assert sorted((r.k, r.n) for r in got) == [(1, -2), (2, 100)]


ERRORS = [
    # (how, statement)
    ("execute", "SELEC * FROM system.local"),
    ("execute", "SELECT * FROM system.local WHERE nonexistent_column = 1"),
    ("execute", "SELECT * FROM {ks}.no_such_table"),
    ("execute", "INSERT INTO {ks}.kv (k, v) VALUES ('not an int', 'x')"),
    ("execute", "SELECT * FROM {ks}.kv WHERE v = 'needs filtering'"),
    ("prepare", "SELECT * FROM {ks}.kv WHERE nope = ?"),
    ("prepare", "SELECT * FROM {ks}.kv WHERE"),
]


def _error(session, how, stmt):
    with pytest.raises(Exception) as ei:
        if how == "prepare":
            session.prepare(stmt)
        else:
            session.execute(stmt)
    return ei.value


def test_errors(via_proxy, direct, keyspace, kv):
    seen = set()
    for how, stmt in ERRORS:
        stmt = stmt.format(ks=keyspace)
        a = _error(via_proxy.session, how, stmt)
        b = _error(direct.session, how, stmt)
        assert type(a) is type(b), (stmt, a, b)
        assert str(a) == str(b), stmt
        seen.add(type(a))
    assert seen == {SyntaxException, InvalidRequest}

    # An error at EXECUTE time (not at PREPARE): a null partition key.
    pa = via_proxy.session.prepare(f"SELECT * FROM {kv} WHERE k = ?")
    pb = direct.session.prepare(f"SELECT * FROM {kv} WHERE k = ?")
    with pytest.raises(InvalidRequest) as ea:
        via_proxy.session.execute(pa, (None,))
    with pytest.raises(InvalidRequest) as eb:
        direct.session.execute(pb, (None,))
    assert str(ea.value) == str(eb.value)

    # The connection is still usable after the errors.
    assert via_proxy.session.execute("SELECT release_version FROM system.local").one()


def test_protocol_negotiation(proxy, upstream):
    """With no protocol_version the driver starts above what the server speaks (DSE_V2) and
    downgrades on each protocol error; through the proxy it must end where it does directly."""
    from cassandra.cluster import Cluster

    got = {}
    for side, (host, port) in (("proxy", (proxy.host, proxy.port)), ("direct", upstream)):
        cluster = Cluster(contact_points=[host], port=port, connect_timeout=10)
        try:
            session = cluster.connect()
            got[side] = (cluster.protocol_version,
                         session.execute("SELECT release_version FROM system.local").one())
        finally:
            cluster.shutdown()
    assert got["proxy"] == got["direct"]
    assert got["proxy"][0] == 5

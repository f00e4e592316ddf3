"""The differential corpus of the auto-prepare acceptance tests (test_corpus.py).

Each statement runs as an unprepared QUERY from the Python driver, once directly and once through
autoprep, against two copies of one schema: `@ks@` / `@ks2@` name the side's own keyspaces
(separate keyspaces per side, so non-idempotent writes and the order of writes never make false
differences: both copies see the same sequence). Unqualified names resolve in `@ks@` (the
sessions `USE` it); a few statements switch keyspace with USE and back.

Non-deterministic values (now(), uuid(), the server clock) are only written where nothing reads
them back but counts; writetime() is read only where USING TIMESTAMP fixed it; ttl() is never read.

`S(...)` fields:
  text     the CQL, with @ks@ / @ks2@
  fetch    page size (fetch_size); every page is compared
  values   the client's own values for its `?` markers, sent in the QUERY's value list:
           (cql type, python value) pairs or raw bytes (b"" is an empty value, None a null)
  ksflag   v5 only: the QUERY carries @ks2@ in its keyspace field (the session USEs @ks@)
  ts       the QUERY's default timestamp (the driver's client-side timestamp, made fixed)
  pt       the statement is expected NOT to run as a prepared execution in steady state, and why;
           every other statement must (checked on the server, statement by statement)
"""

from dataclasses import dataclass, field

from cassandra.query import UNSET_VALUE as UNSET
from typing import Optional


@dataclass
class S:
    text: str
    fetch: Optional[int] = None
    values: Optional[list] = None
    ksflag: bool = False
    ts: Optional[int] = None
    pt: Optional[str] = None
    tag: str = field(default="")


# Why a statement stays an unprepared QUERY in steady state (the `pt` values).
NO_LIT = "no literal to bind"
ERR_PREP = "fails at PREPARE (syntax, unknown name, invalid): never prepared, never counted"
REFUSED = "the encoder refuses the literal: the server's own error or conversion decides"
USE = "USE: not DML"
SERVER_TZ = "timestamp without a zone: depends on the server's time zone"
SELECTION = "literals only in the selection clause / function arguments stay inline"
VALUES = "client value count differs from its markers: the server answers"
KS_FIELD = ("a v5 keyspace field other than the connection's keyspace: an EXECUTE would draw "
            "the server's warning about USE with prepared statements")
PREPARE_FAILS = "the server fails to PREPARE the shape (here a NullPointerException for a second TTL ?)"


def schema(ks, ks2):
    """DDL for one side, in order."""
    return [
        f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}",
        f"CREATE KEYSPACE {ks2} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}",
        f"CREATE TYPE {ks}.addr (street text, zip int, tags frozen<list<text>>)",
        f"CREATE TYPE {ks}.pt (x double, y double)",
        f"CREATE TABLE {ks}.kv (k int PRIMARY KEY, v text, n bigint)",
        f"CREATE TABLE {ks2}.kv (k int PRIMARY KEY, v text, n bigint)",
        f"""CREATE TABLE {ks}.types (k int PRIMARY KEY, a_ascii ascii, a_bigint bigint, a_blob blob,
            a_boolean boolean, a_date date, a_decimal decimal, a_double double, a_duration duration,
            a_float float, a_inet inet, a_int int, a_smallint smallint, a_text text, a_time time,
            a_timestamp timestamp, a_timeuuid timeuuid, a_tinyint tinyint, a_uuid uuid,
            a_varchar varchar, a_varint varint)""",
        f"CREATE TABLE {ks}.clus (p int, c int, v text, PRIMARY KEY (p, c))",
        f"""CREATE TABLE {ks}.comp (a int, b text, c int, d int, v text, PRIMARY KEY ((a, b), c, d))
            WITH CLUSTERING ORDER BY (c DESC, d ASC)""",
        f"""CREATE TABLE {ks}.coll (k int PRIMARY KEY, l list<int>, s set<text>, m map<text, int>,
            fl frozen<list<int>>, fm frozen<map<int, text>>,
            nested map<int, frozen<list<frozen<set<bigint>>>>>)""",
        f"CREATE INDEX coll_s ON {ks}.coll (s)",
        f"CREATE INDEX coll_mk ON {ks}.coll (KEYS(m))",
        f"CREATE TABLE {ks}.udts (k int PRIMARY KEY, a frozen<addr>, b addr, p frozen<pt>)",
        f"""CREATE TABLE {ks}.tups (k int PRIMARY KEY, t tuple<int, text, boolean>,
            nt frozen<tuple<int, tuple<text, bigint>>>)""",
        f"CREATE TABLE {ks}.vecs (k int PRIMARY KEY, v vector<float, 3>, label text)",
        f"CREATE CUSTOM INDEX vecs_v ON {ks}.vecs (v) USING 'StorageAttachedIndex'",
        f"CREATE TABLE {ks}.cnt (k int PRIMARY KEY, n counter, m counter)",
        f"CREATE TABLE {ks}.lwt (k int PRIMARY KEY, v text, n int)",
        f"CREATE TABLE {ks}.ttl (k int PRIMARY KEY, v text)",
        f'CREATE TABLE {ks}."MixedCase" ("Key" int PRIMARY KEY, "Val" text, "select" int, '
        f'"with space" text, "ünï" int)',
        f'CREATE TABLE {ks}.words (key int PRIMARY KEY, type text, ttl int, writetime int, "limit" int)',
        f"CREATE TABLE {ks}.events (k int, id timeuuid, v text, PRIMARY KEY (k, id))",
        f"CREATE TABLE {ks}.ts (p int, t timestamp, v double, PRIMARY KEY (p, t))",
    ]


TYPES_ROW = (
    "INSERT INTO types (k, a_ascii, a_bigint, a_blob, a_boolean, a_date, a_decimal, a_double, "
    "a_duration, a_float, a_inet, a_int, a_smallint, a_text, a_time, a_timestamp, a_timeuuid, "
    "a_tinyint, a_uuid, a_varchar, a_varint) VALUES (1, 'abc', -9223372036854775808, 0xcafebabe, "
    "true, '2024-02-29', -123.4560, 3.141592653589793, 1mo2d3h4m5s6ms7us8ns, 1.5, '2001:db8::1', "
    "-2147483648, -32768, 'héllo ☃ ''quoted''', '12:34:56.123456789', "
    "'2024-01-02 03:04:05.678+0000', d2177dd0-eaa2-11de-a572-001b779c76e3, -128, "
    "550e8400-e29b-41d4-a716-446655440000, 'varchar ✓', -123456789012345678901234567890)"
)


def _typed(k, col, lit, **kw):
    return S(f"INSERT INTO types (k, {col}) VALUES ({k}, {lit})", tag="types", **kw)


CORPUS = [
    # --- kv: plain DML, lexical forms --------------------------------------------------------
    S("INSERT INTO kv (k, v, n) VALUES (1, 'one', 100)"),
    S("INSERT INTO kv (k, v, n) VALUES (2, 'two', -200)"),
    S("INSERT INTO kv (k, v, n) VALUES (3, 'it''s three', 9223372036854775807)"),
    S("INSERT INTO kv (k, v) VALUES (4, $$dollar 'quoted' $ text$$)"),
    S("insert into KV (K, V, N) values (5, 'lower-case keywords', 5)"),
    S("InSeRt InTo kv (k, v, n) VaLuEs (6, 'MiXeD', 6)"),
    S("INSERT INTO @ks@.kv (k, v, n) VALUES (7, 'qualified', 7)"),
    S("INSERT INTO kv (k, v, n) VALUES (8, 'line comment', 8) -- trailing comment\n"),
    S("/* block */ INSERT INTO kv (k, v, n) VALUES (9, /* inline */ 'nine', 9) // c++ style\n"),
    S("INSERT INTO kv (k, v, n) VALUES (10, 'semicolons', 10);;"),
    S("INSERT INTO kv (k, v, n) VALUES (11, 'unicode ☃ é 日本 \U0001F600', 11)"),
    S("INSERT INTO kv (k, v, n) VALUES (12, '', 0)"),
    S("INSERT INTO kv (k, v, n) VALUES (13, null, null)"),
    S("INSERT INTO kv (k, v, n) VALUES (-14, 'negative key', -0)"),
    S("INSERT INTO kv (k, v, n) VALUES (15, 'line1\nline2\ttab', 015)"),
    S("INSERT\n\tINTO   kv(k,v,n)VALUES(16,'no spaces',16)"),
    S("INSERT INTO kv (k, v, n) VALUES (17, $$$$, 17)"),
    S("INSERT INTO kv (k, v) VALUES (18, 0x41424344)"),
    S("UPDATE kv SET v = 'updated' WHERE k = 2"),
    S("UPDATE kv SET v = null WHERE k = 5"),
    S("UPDATE kv SET n = 42, v = 'both' WHERE k = 6"),
    S("UPDATE kv SET v = 'in list' WHERE k IN (60, 61)"),
    S("DELETE n FROM kv WHERE k = 7"),
    S("DELETE FROM kv WHERE k = 8"),
    S("DELETE FROM kv WHERE k IN (60, 61, 62)"),
    S("SELECT * FROM kv WHERE k = 1"),
    S("SELECT * FROM kv WHERE k = 4"),
    S("SELECT * FROM kv WHERE k = 18"),
    S("select K, v, N from KV where K = 11"),
    S("SELECT k, v, n FROM kv WHERE k IN (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, -14, 15, 16, 17)"),
    S("SELECT k, v FROM kv WHERE k IN (3)"),
    S("SELECT k, v FROM kv WHERE k IN (2, 2, 1, 1)"),
    S("SELECT k, v FROM kv WHERE k IN (9, 99, 999)", fetch=1),
    S('SELECT v AS value, n AS "Num" FROM kv WHERE k = 3'),
    S("SELECT * FROM kv WHERE token(k) > -9223372036854775808", fetch=4),
    S("SELECT k, token(k) FROM kv WHERE token(k) >= 0 AND token(k) < 4611686018427387904", fetch=3),
    S("SELECT * FROM kv LIMIT 3", fetch=2),
    S("SELECT count(*) FROM kv WHERE k IN (1, 2, 3)"),
    S("SELECT count(*) AS c, max(n) FROM kv WHERE k IN (1, 2, 3, 4, 5)"),
    S("SELECT k, v FROM kv WHERE v = 'one' ALLOW FILTERING"),
    S("SELECT k FROM kv WHERE n > 0 AND n < 1000 ALLOW FILTERING", fetch=2),
    S("SELECT k, v FROM kv WHERE k = 1 AND v = 'one' ALLOW FILTERING"),
    S("SELECT JSON k, v FROM kv WHERE k = 1"),
    S("SELECT DISTINCT k FROM kv WHERE k IN (1, 20, 21)"),
    S("SELECT k, blobAsText(0x41) AS a FROM kv WHERE k = 1"),
    S("SELECT k FROM kv WHERE k = blobAsInt(0x00000001)", pt=SELECTION),
    S("SELECT k, n + 1 AS n1, n * 2 AS n2 FROM kv WHERE k = 1"),
    S("SELECT CAST(n AS text) AS t, toJson(v) FROM kv WHERE k = 1"),
    S("SELECT k FROM kv WHERE k = 01"),
    S("SELECT k FROM kv WHERE k = -0"),
    S("SELECT * FROM kv WHERE k = 0x00000001"),
    S("INSERT INTO kv JSON '{\"k\": 20, \"v\": \"json\", \"n\": 20}'"),
    S("INSERT INTO kv JSON '{\"k\": 21, \"v\": \"json, unset default\"}' DEFAULT UNSET"),
    S("INSERT INTO kv JSON '{\"k\": 22}' DEFAULT NULL"),
    S("SELECT * FROM kv WHERE k IN (20, 21, 22)"),
    S("SELECT cluster_name, release_version FROM system.local WHERE key = 'local'"),
    S("SELECT keyspace_name, table_name FROM system_schema.tables WHERE keyspace_name = '@ks@'"),
    S("SELECT table_name, column_name, kind, type FROM system_schema.columns "
      "WHERE keyspace_name = '@ks@' AND table_name = 'types'", fetch=7),
    S("SELECT * FROM kv", fetch=5, pt=NO_LIT),
    S("SELECT k, v FROM kv WHERE k = 10 ; "),

    # --- every native type ---------------------------------------------------------------------
    S(TYPES_ROW),
    S("SELECT * FROM types WHERE k = 1"),
    _typed(2, "a_bigint", "9223372036854775807"),
    _typed(3, "a_bigint", "007"),
    _typed(4, "a_int", "2147483647"),
    _typed(5, "a_smallint", "32767"),
    _typed(6, "a_tinyint", "127"),
    _typed(7, "a_varint", "0"),
    _typed(8, "a_varint", "18446744073709551616"),
    _typed(9, "a_varint", "-1"),
    _typed(10, "a_decimal", "1.50"),
    _typed(11, "a_decimal", "1e3"),
    _typed(12, "a_decimal", "-0.0"),
    _typed(13, "a_decimal", "1E-21"),
    _typed(14, "a_decimal", "12345678901234567890.123456789"),
    _typed(15, "a_decimal", "42"),
    _typed(16, "a_double", "NaN"),
    _typed(17, "a_double", "-Infinity"),
    _typed(18, "a_double", "1.7976931348623157E308"),
    _typed(19, "a_double", "4.9e-324"),
    _typed(20, "a_double", "-0.0"),
    _typed(21, "a_double", "9007199254740993"),
    _typed(22, "a_double", "0.1"),
    _typed(23, "a_float", "3.4028235e38"),
    _typed(24, "a_float", "1.4e-45"),
    _typed(25, "a_float", "16777217"),
    _typed(26, "a_float", "Infinity"),
    _typed(27, "a_float", "0.1"),
    _typed(28, "a_boolean", "FALSE"),
    _typed(29, "a_boolean", "True"),
    _typed(30, "a_blob", "0x"),
    _typed(31, "a_blob", "0X00FFab"),
    _typed(32, "a_text", "''"),
    _typed(33, "a_ascii", "'plain ascii ~!'"),
    _typed(34, "a_date", "'1970-01-01'"),
    _typed(35, "a_date", "'2147483648'"),
    _typed(36, "a_date", "2147483000"),
    _typed(37, "a_date", "'-0001-01-01'"),
    _typed(38, "a_time", "'00:00:00'"),
    _typed(39, "a_time", "'23:59:59.999999999'"),
    _typed(40, "a_time", "'12:00:00.5'"),
    _typed(41, "a_time", "'1'"),
    _typed(42, "a_time", "86399999999999"),
    _typed(43, "a_timestamp", "'2024-01-02T03:04:05Z'"),
    _typed(44, "a_timestamp", "'2024-01-02 03:04:05+02:00'"),
    _typed(45, "a_timestamp", "'2024-01-02 03:04:05.1-0130'"),
    _typed(46, "a_timestamp", "1700000000000"),
    _typed(47, "a_timestamp", "'1700000000000'"),
    _typed(48, "a_timestamp", "'2024-01-02'", pt=SERVER_TZ),
    _typed(49, "a_timestamp", "'2024-01-02 03:04'", pt=SERVER_TZ),
    _typed(50, "a_timestamp", "''"),
    _typed(51, "a_timestamp", "-1"),
    _typed(52, "a_inet", "'127.0.0.1'"),
    _typed(53, "a_inet", "'::1'"),
    _typed(54, "a_inet", "'::ffff:10.0.0.1'"),
    _typed(55, "a_inet", "''"),
    _typed(56, "a_uuid", "550E8400-E29B-41D4-A716-446655440000"),
    _typed(57, "a_timeuuid", "D2177DD0-EAA2-11DE-A572-001B779C76E3"),
    _typed(58, "a_duration", "P1Y2M3DT4H5M6S"),
    _typed(59, "a_duration", "P2W"),
    _typed(60, "a_duration", "P0001-02-03T04:05:06"),
    _typed(61, "a_duration", "-1d12h"),
    _typed(62, "a_duration", "1h30m"),
    _typed(63, "a_duration", "3us500ns"),
    _typed(64, "a_varchar", "'vär''char'"),
    _typed(65, "a_text", "0x6869"),
    _typed(66, "a_int", "null"),
    S("SELECT * FROM types WHERE k IN (2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)", fetch=4),
    S("SELECT * FROM types WHERE k IN (16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27)", fetch=5),
    S("SELECT * FROM types WHERE k IN (28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42)"),
    S("SELECT * FROM types WHERE k IN (43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55)"),
    S("SELECT * FROM types WHERE k IN (56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66)", fetch=3),
    S("SELECT k FROM types WHERE a_double = 3.141592653589793 ALLOW FILTERING"),
    S("SELECT k FROM types WHERE a_decimal = 1.5 ALLOW FILTERING"),
    S("SELECT k FROM types WHERE a_blob = 0xcafebabe ALLOW FILTERING"),
    S("SELECT k FROM types WHERE a_uuid = 550e8400-e29b-41d4-a716-446655440000 ALLOW FILTERING"),
    S("SELECT k FROM types WHERE a_inet = '::1' ALLOW FILTERING"),
    S("SELECT k FROM types WHERE a_date > '2000-01-01' ALLOW FILTERING"),
    S("SELECT k FROM types WHERE a_timestamp < 1700000000001 ALLOW FILTERING"),
    S("SELECT k FROM types WHERE a_varint > 10 ALLOW FILTERING"),
    S("SELECT k FROM types WHERE a_duration = 1h30m ALLOW FILTERING"),
    S("SELECT k FROM types WHERE a_boolean = false ALLOW FILTERING"),
    S("SELECT k FROM types WHERE a_time >= '12:00:00' ALLOW FILTERING"),
    S("SELECT k FROM types WHERE a_float = 0.1 ALLOW FILTERING"),
    S("SELECT k FROM types WHERE a_tinyint = -128 ALLOW FILTERING"),

    # --- literal forms where the server's own parsers are lenient or surprising ---------------------
    _typed(70, "a_inet", "'1.2.3'", pt=REFUSED),
    _typed(71, "a_inet", "'1'", pt=REFUSED),
    _typed(72, "a_inet", "'4294967295'", pt=REFUSED),
    _typed(73, "a_inet", "'010.0.0.1'", pt=REFUSED),
    _typed(74, "a_inet", "'fe80::1%1'", pt=REFUSED),
    _typed(75, "a_inet", "'[::1]'", pt=REFUSED),
    _typed(76, "a_inet", "'::ffff:1.2.3.4'"),
    _typed(77, "a_inet", "'1.2.3.256'"),
    _typed(78, "a_timestamp", "'2024-01-02 03:04:05 UTC'"),
    _typed(79, "a_timestamp", "'2024-01-02 03:04:05 +0000'"),
    _typed(80, "a_timestamp", "'2024-01-02T03:04:05z'"),
    _typed(81, "a_timestamp", "'2024-01-02 03:04:05-08'"),
    _typed(82, "a_timestamp", "'2024-01-02T03:04:05.123456789Z'"),
    _typed(83, "a_timestamp", "'2024-01-02 03:04:05 GMT'"),
    _typed(84, "a_timestamp", "'2024-01-02 03:04:05 Europe/Paris'", pt=REFUSED),
    _typed(85, "a_timestamp", "'2024-01-02 03:04:05.1234+0000'"),
    _typed(86, "a_timestamp", "'1969-12-31T23:59:59.999Z'"),
    _typed(87, "a_date", "'2024-1-1'"),
    _typed(88, "a_date", "'+2024-01-01'"),
    _typed(89, "a_date", "'1900-01-01'"),
    _typed(90, "a_date", "'9999-12-31'"),
    _typed(91, "a_date", "'0'"),
    _typed(92, "a_time", "'1:2:3'"),
    _typed(93, "a_time", "'01:02:03.'"),
    _typed(94, "a_duration", "1Y"),
    _typed(95, "a_duration", "1µs"),
    _typed(96, "a_duration", "PT0S"),
    _typed(97, "a_duration", "-P1D"),
    _typed(98, "a_duration", "1y1Y"),
    _typed(99, "a_duration", "P1Y2M3W"),
    _typed(130, "a_double", "1e400"),
    _typed(131, "a_double", "-1e-400"),
    _typed(132, "a_double", "1."),
    _typed(133, "a_float", "3.5e38"),
    _typed(134, "a_float", "1e-50"),
    _typed(135, "a_float", "1e400"),
    _typed(136, "a_decimal", "1e400"),
    _typed(137, "a_decimal", "-1.5E-3"),
    _typed(138, "a_decimal", "0.000"),
    _typed(139, "a_varint", "-007"),
    _typed(140, "a_bigint", "0x0000000000000001"),
    _typed(141, "a_text", "'what? :x -- not a comment /* nor this */ $$ ;'"),
    _typed(142, "a_text", "$$it's a \"raw\" string -- with ? marks and 'quotes'$$"),
    _typed(143, "a_text", "'" + "long text " * 2000 + "'"),
    _typed(144, "a_ascii", "''''"),
    _typed(145, "a_double", "1e308"),
    _typed(146, "a_smallint", "-0"),
    _typed(147, "a_int", "0x"),
    _typed(148, "a_uuid", "0x"),
    _typed(149, "a_boolean", "0x01"),
    # Larger than a v5 frame's payload (128 KiB) both as QUERY text and as EXECUTE values.
    _typed(150, "a_blob", "0x" + "ab01" * 75000),
    S("SELECT k, a_blob FROM types WHERE k = 150"),
    S("SELECT * FROM types WHERE k IN (70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86)"),
    S("SELECT * FROM types WHERE k IN (87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99)"),
    S("SELECT * FROM types WHERE k IN (130, 131, 132, 133, 134, 135, 136, 137, 138, 139, 140)"),
    S("SELECT * FROM types WHERE k IN (141, 142, 143, 144, 145, 146, 147, 148, 149)", fetch=2),

    # --- literal errors: type mismatches, out of range, bad formats ------------------------------
    _typed(100, "a_int", "2147483648"),
    _typed(101, "a_int", "-2147483649"),
    _typed(102, "a_smallint", "32768"),
    _typed(103, "a_tinyint", "-129"),
    _typed(104, "a_bigint", "9223372036854775808"),
    _typed(105, "a_int", "'12'"),
    _typed(106, "a_int", "1.5"),
    _typed(107, "a_int", "true"),
    _typed(108, "a_boolean", "'true'"),
    _typed(109, "a_uuid", "'550e8400-e29b-41d4-a716-446655440000'"),
    _typed(110, "a_timeuuid", "550e8400-e29b-41d4-a716-446655440000"),
    _typed(111, "a_blob", "0xabc"),
    _typed(112, "a_blob", "'cafe'"),
    _typed(113, "a_ascii", "'é'"),
    _typed(114, "a_date", "'2024-13-01'"),
    _typed(115, "a_date", "''"),
    _typed(116, "a_time", "'24:00:00'"),
    _typed(117, "a_time", "'12:34'"),
    _typed(118, "a_timestamp", "'not a timestamp'"),
    _typed(119, "a_decimal", "NaN"),
    _typed(120, "a_duration", "12"),
    _typed(121, "a_duration", "1d2y"),
    _typed(122, "a_double", "'1.5'"),
    _typed(123, "a_int", "0xff"),
    _typed(124, "a_text", "0xff"),
    _typed(125, "a_varint", "1.0"),
    _typed(126, "a_float", "1d"),
    _typed(127, "a_inet", "'1.2.3.4.5.6.7.8.9.0.1.2.3.4.5.6.7'"),
    S("SELECT k FROM types WHERE k = 1e2"),
    S("SELECT k FROM types WHERE k = 5ms"),
    S("SELECT k FROM types WHERE k = 550e8400-e29b-41d4-a716-446655440000"),
    S("SELECT k FROM types WHERE k = NaN"),
    S("SELECT k FROM types WHERE k IN (1, 'x')"),

    # --- statement errors ------------------------------------------------------------------------
    S("SELEC * FROM kv WHERE k = 1"),
    S("SELECT * FROM kv WHERE k = 1 AND"),
    S("SELECT * FROM kv WHERE k = 'one'"),
    S("SELECT * FROM kv WHERE nope = 1"),
    S("SELECT nope FROM kv WHERE k = 1"),
    S("SELECT * FROM nope_table WHERE k = 1"),
    S("SELECT * FROM kv WHERE v = 'needs filtering'"),
    S("INSERT INTO kv (k, v) VALUES (1)"),
    S("INSERT INTO kv (v) VALUES ('no key')"),
    S("UPDATE kv SET k = 2 WHERE k = 1"),
    S("DELETE FROM kv WHERE v = 'x'"),
    S("INSERT INTO kv (k, v) VALUES (1, 'a' 'b')"),
    S("SELECT * FROM kv WHERE k = 1 LIMIT 0"),
    S("SELECT * FROM kv WHERE k = 1 LIMIT -1"),
    S("SELECT * FROM kv LIMIT 2147483648"),
    S("SELECT * FROM kv WHERE k = 1 AND k = 2"),
    S("UPDATE kv SET n = 'x' WHERE k = 1"),
    S("INSERT INTO kv (k, n) VALUES (1, 1.5)"),
    S("SELECT * FROM kv WHERE k = 1 -- comment at the very end"),
    S("SELECT * FROM kv WHERE k = 1; SELECT * FROM kv WHERE k = 2"),
    S("SELECT * FROM kv WHERE k = 1 BYPASS CACHE"),
    S("SELECT * FROM kv WHERE k = .5"),
    S("SELECT * FROM kv WHERE k = null", pt=NO_LIT),
    S("SELECT * FROM kv WHERE k > 1"),
    S("SELECT * FROM kv WHERE k = 1 ORDER BY v"),
    S("INSERT INTO kv (k, k) VALUES (1, 2)"),
    S("UPDATE kv SET v = 'x' WHERE k = 1 AND n = 2"),
    S("DELETE v FROM kv WHERE k = 1 AND k = 2"),
    S("INSERT INTO kv (k, v, n) VALUES (70, 'x', 1) USING TTL 10 AND TTL 20", pt=PREPARE_FAILS),
    S("SELECT * FROM kv WHERE k = 1 ALLOW"),
    S("SELECT * FROM kv WHERE k = :k"),
    S("SELECT * FROM kv WHERE k IN ()", pt=NO_LIT),
    S("SELECT * FROM kv WHERE k IN (1) AND k IN (2)"),
    S("SELECT * FROM kv WHERE token(k) > -9223372036854775809"),
    S("SELECT * FROM kv WHERE n != 5 ALLOW FILTERING"),
    S("SELECT * FROM clus WHERE p = 1 PER PARTITION LIMIT 0"),
    S("UPDATE cnt SET n = n + 9223372036854775808 WHERE k = 1"),
    S("SELECT * FROM kv WHERE k = 1\r\n-- a comment with its newline\r\n"),
    S("SELECT k FROM kv WHERE k IN (" + ", ".join(str(i) for i in range(-250, 250)) + ")", fetch=7),

    # --- clustering, ranges, paging --------------------------------------------------------------
    S("BEGIN UNLOGGED BATCH " + " ".join(
        f"INSERT INTO clus (p, c, v) VALUES (1, {c}, 'r{c}');" for c in range(1, 13))
      + " APPLY BATCH"),
    S("BEGIN BATCH " + " ".join(
        f"INSERT INTO clus (p, c, v) VALUES (2, {c}, 's{c}');" for c in range(1, 6))
      + " APPLY BATCH"),
    S("SELECT * FROM clus WHERE p = 1", fetch=5),
    S("SELECT * FROM clus WHERE p = 1 AND c > 3 AND c <= 9", fetch=2),
    S("SELECT c, v FROM clus WHERE p = 1 ORDER BY c DESC LIMIT 7", fetch=3),
    S("SELECT * FROM clus WHERE p IN (1, 2) AND c IN (1, 2, 3)"),
    S("SELECT * FROM clus WHERE p = 1 AND c IN (5, 3, 1) ORDER BY c DESC"),
    S("SELECT * FROM clus PER PARTITION LIMIT 2", fetch=3),
    S("SELECT * FROM clus WHERE p IN (1, 2) PER PARTITION LIMIT 1 LIMIT 5"),
    S("SELECT * FROM clus WHERE p = 1 AND (c) > (4) AND (c) < (7)"),
    S("SELECT * FROM clus WHERE p = 1 AND (c) IN ((1), (2))"),
    S("SELECT p, count(*) FROM clus GROUP BY p", pt=NO_LIT),
    S("SELECT p, max(c) AS m, min(v) FROM clus WHERE p IN (1, 2) GROUP BY p"),
    S("SELECT * FROM clus WHERE token(p) = token(1)", pt=SELECTION),
    S("SELECT * FROM clus WHERE p = 1 LIMIT 100", fetch=4),
    S("SELECT count(*) FROM clus WHERE p = 1 AND c > 2", fetch=2),
    S("SELECT * FROM clus WHERE c = 3 ALLOW FILTERING", fetch=1),
    S("SELECT * FROM clus WHERE p = 1 AND c >= 2 AND c < 2"),
    S("SELECT * FROM clus WHERE p = 1 AND c > 100"),
    S("UPDATE clus SET v = 'upd' WHERE p = 1 AND c IN (1, 2)"),
    S("DELETE FROM clus WHERE p = 2 AND c > 3"),
    S("DELETE FROM clus WHERE p = 2 AND c = 1"),
    S("SELECT * FROM clus WHERE p = 2"),
    S("SELECT * FROM clus WHERE p = 1 AND c > 3 ORDER BY v"),
    S("SELECT * FROM clus WHERE c = 3"),

    # --- composite partition key, multi-column relations -----------------------------------------
    S("BEGIN UNLOGGED BATCH "
      "INSERT INTO comp (a, b, c, d, v) VALUES (1, 'x', 1, 1, 'v11'); "
      "INSERT INTO comp (a, b, c, d, v) VALUES (1, 'x', 1, 2, 'v12'); "
      "INSERT INTO comp (a, b, c, d, v) VALUES (1, 'x', 2, 1, 'v21'); "
      "INSERT INTO comp (a, b, c, d, v) VALUES (1, 'x', 2, 2, 'v22'); "
      "INSERT INTO comp (a, b, c, d, v) VALUES (1, 'x', 3, 1, 'v31'); "
      "APPLY BATCH"),
    S("INSERT INTO comp (a, b, c, d, v) VALUES (1, 'y', 1, 1, 'y11')"),
    S("INSERT INTO comp (a, b, c, d, v) VALUES (2, 'x', 5, 5, 'x55')"),
    S("SELECT * FROM comp WHERE a = 1 AND b = 'x'", fetch=2),
    S("SELECT * FROM comp WHERE a = 1 AND b = 'x' AND (c, d) > (1, 1)"),
    S("SELECT * FROM comp WHERE a = 1 AND b = 'x' AND (c, d) IN ((1, 1), (2, 2))"),
    S("SELECT * FROM comp WHERE a = 1 AND b = 'x' AND c = 2 AND d IN (1, 2)"),
    S("SELECT * FROM comp WHERE a IN (1, 2) AND b IN ('x', 'y')"),
    S("SELECT * FROM comp WHERE a = 1 AND b = 'x' ORDER BY c ASC, d DESC"),
    S("SELECT * FROM comp WHERE a = 1 AND b = 'x' AND (c) >= (2) AND (c, d) < (3, 0)"),
    S("SELECT * FROM comp WHERE token(a, b) > token(1, 'x')", pt=SELECTION),
    S("UPDATE comp SET v = 'u' WHERE a = 1 AND b = 'x' AND c = 1 AND d = 1"),
    S("DELETE FROM comp WHERE a = 1 AND b = 'y' AND c = 1"),
    S("SELECT * FROM comp WHERE a = 1"),
    S("SELECT * FROM comp WHERE a = 1 AND b = 'x' AND d = 1"),

    # --- collections, CONTAINS ---------------------------------------------------------------------
    S("INSERT INTO coll (k, l, s, m, fl, fm) VALUES "
      "(1, [1, 2, 3], {'a', 'b'}, {'x': 1, 'y': 2}, [9, 8], {1: 'one', 2: 'two'})"),
    S("INSERT INTO coll (k, l, s, m) VALUES (2, [], {}, {})"),
    S("INSERT INTO coll (k, s, m) VALUES (3, {'c', 'z'}, {'z': 26})"),
    S("INSERT INTO coll (k, s) VALUES (6, {'dup', 'dup'})"),
    # (Not {'dup': 1, 'dup': 2}: which value Cassandra keeps varies from one execution to the
    # next, directly too.)
    S("INSERT INTO coll (k, m) VALUES (7, {'dup': 1, 'dup': 1, 'e': 5})"),
    S("UPDATE coll SET l = l + [4] WHERE k = 1"),
    S("UPDATE coll SET l = [0] + l WHERE k = 1"),
    S("UPDATE coll SET l = l - [2] WHERE k = 1"),
    S("UPDATE coll SET l[0] = 42 WHERE k = 1"),
    S("UPDATE coll SET s = s + {'c'} WHERE k = 1"),
    S("UPDATE coll SET s = s - {'a'} WHERE k = 1"),
    S("UPDATE coll SET s += {'d'} WHERE k = 1"),
    S("UPDATE coll SET m['z'] = 26 WHERE k = 1"),
    S("UPDATE coll SET m = m + {'w': 23} WHERE k = 1"),
    S("UPDATE coll SET m = m - {'x'} WHERE k = 1"),
    S("UPDATE coll SET m -= {'nope'} WHERE k = 1"),
    S("DELETE m['y'] FROM coll WHERE k = 1"),
    S("DELETE l[1] FROM coll WHERE k = 1"),
    S("UPDATE coll SET fl = [1, 2], fm = {3: 'three'} WHERE k = 4"),
    S("UPDATE coll SET nested = {1: [{2, 3}, {}], -1: []} WHERE k = 4"),
    S("UPDATE coll SET nested[7] = [{-9223372036854775808}] WHERE k = 4"),
    S("SELECT nested FROM coll WHERE k = 4"),
    S("SELECT * FROM coll WHERE k = 1"),
    S("SELECT l, s, m, fl, fm FROM coll WHERE k IN (1, 2, 3, 4, 6, 7)"),
    S("SELECT k FROM coll WHERE s CONTAINS 'c'"),
    S("SELECT k FROM coll WHERE m CONTAINS KEY 'z'"),
    S("SELECT k FROM coll WHERE m CONTAINS 26 ALLOW FILTERING"),
    S("SELECT k FROM coll WHERE l CONTAINS 42 ALLOW FILTERING"),
    S("SELECT k FROM coll WHERE m['z'] = 26 ALLOW FILTERING"),
    S("SELECT k, m['z'] AS z, s['c'] AS c FROM coll WHERE k = 1"),
    S("SELECT k FROM coll WHERE fl = [1, 2] ALLOW FILTERING"),
    S("SELECT k FROM coll WHERE fm = {3: 'three'} ALLOW FILTERING"),
    S("SELECT k FROM coll WHERE s CONTAINS 'c' AND k = 1"),
    S("INSERT INTO coll (k, l) VALUES (5, [1, null])"),
    S("INSERT INTO coll (k, m) VALUES (5, {'a': 'not an int'})"),
    S("UPDATE coll SET l[99] = 1 WHERE k = 1"),
    S("UPDATE coll SET s = s + ['list for a set'] WHERE k = 1"),
    S("SELECT k FROM coll WHERE l CONTAINS 'x' ALLOW FILTERING"),
    S("SELECT k FROM coll WHERE s CONTAINS KEY 'c'"),

    # --- user-defined types -----------------------------------------------------------------------
    S("INSERT INTO udts (k, a, b, p) VALUES (1, {street: 'Main St', zip: 12345, tags: ['a', 'b']}, "
      "{street: 'B', zip: 1, tags: []}, {x: 1.5, y: -2})"),
    S("INSERT INTO udts (k, a) VALUES (2, {street: 'partial'})"),
    S("INSERT INTO udts (k, a) VALUES (3, {street: null, zip: 3})"),
    S("UPDATE udts SET b.zip = 99999 WHERE k = 1"),
    S("UPDATE udts SET b.street = 'new street' WHERE k = 1"),
    S("UPDATE udts SET b = {street: 'whole', zip: 7, tags: ['t']} WHERE k = 2"),
    S("DELETE b.tags FROM udts WHERE k = 1"),
    S("SELECT * FROM udts WHERE k IN (1, 2, 3)"),
    S("SELECT a.street, b.zip, p.x FROM udts WHERE k = 1"),
    S("SELECT k FROM udts WHERE p = {x: 1.5, y: -2} ALLOW FILTERING"),
    S("SELECT k FROM udts WHERE a = {street: 'partial'} ALLOW FILTERING"),
    S("INSERT INTO udts (k, a) VALUES (4, {nope: 1})"),
    S("INSERT INTO udts (k, a) VALUES (4, {zip: 'not an int'})"),
    S("INSERT INTO udts (k, p) VALUES (5, (1.0, 2.0))", pt=REFUSED),
    S("UPDATE udts SET a.zip = 1 WHERE k = 1"),

    # --- tuples -------------------------------------------------------------------------------------
    S("INSERT INTO tups (k, t, nt) VALUES (1, (7, 'seven', false), (1, ('x', 2)))"),
    S("INSERT INTO tups (k, t) VALUES (2, (1, null, true))"),
    S("INSERT INTO tups (k, t) VALUES (3, (1, 'short'))"),
    S("SELECT * FROM tups WHERE k IN (1, 2, 3)"),
    S("SELECT k FROM tups WHERE t = (7, 'seven', false) ALLOW FILTERING"),
    S("SELECT k FROM tups WHERE nt = (1, ('x', 2)) ALLOW FILTERING"),
    S("INSERT INTO tups (k, t) VALUES (4, (1, 'a', true, 5))"),
    S("INSERT INTO tups (k, t) VALUES (4, ('a', 'a', true))"),

    # --- vectors ------------------------------------------------------------------------------------
    S("INSERT INTO vecs (k, v, label) VALUES (1, [1.0, 2.0, 3.0], 'a')"),
    S("INSERT INTO vecs (k, v, label) VALUES (2, [0.5, -1, 1e2], 'b')"),
    S("INSERT INTO vecs (k, v, label) VALUES (3, [3, 2, 1], 'c')"),
    S("SELECT * FROM vecs WHERE k IN (1, 2, 3)"),
    S("SELECT k, label FROM vecs ORDER BY v ANN OF [1.0, 2.0, 3.0] LIMIT 2"),
    S("SELECT k, similarity_cosine(v, [1.0, 0.0, 0.0]) AS sim FROM vecs WHERE k = 1"),
    S("SELECT k FROM vecs WHERE v = [1.0, 2.0, 3.0] ALLOW FILTERING"),
    S("INSERT INTO vecs (k, v) VALUES (4, [1.0, 2.0])"),
    S("INSERT INTO vecs (k, v) VALUES (5, [1.0, 'x', 2.0])"),

    # --- counters -----------------------------------------------------------------------------------
    S("UPDATE cnt SET n = n + 5 WHERE k = 1"),
    S("UPDATE cnt SET n = n - 3 WHERE k = 1"),
    S("UPDATE cnt SET n = n -1 WHERE k = 1"),
    S("UPDATE cnt SET n = n + -2, m = m + 10 WHERE k = 1"),
    S("UPDATE cnt SET n += 7 WHERE k = 2"),
    S("UPDATE cnt SET m -= 1 WHERE k = 2"),
    S("UPDATE cnt SET m = m - -5 WHERE k = 2"),
    S("UPDATE cnt SET m = m + 0 WHERE k = 4"),
    S("UPDATE cnt SET n = n + 9223372036854775807 WHERE k = 3"),
    S("BEGIN COUNTER BATCH UPDATE cnt SET n = n + 1 WHERE k = 1; "
      "UPDATE cnt SET m = m + 1 WHERE k = 2; APPLY BATCH"),
    S("SELECT * FROM cnt WHERE k IN (1, 2, 3)"),
    S("UPDATE cnt SET n = 5 WHERE k = 1"),
    S("INSERT INTO cnt (k, n) VALUES (1, 1)"),
    S("UPDATE cnt SET n = n + 1.5 WHERE k = 1"),

    # --- lightweight transactions ---------------------------------------------------------------------
    S("INSERT INTO lwt (k, v, n) VALUES (1, 'first', 1) IF NOT EXISTS"),
    S("INSERT INTO lwt (k, v, n) VALUES (1, 'second', 2) IF NOT EXISTS"),
    S("UPDATE lwt SET v = 'cas' WHERE k = 1 IF v = 'first'"),
    S("UPDATE lwt SET n = 10 WHERE k = 1 IF n = 1 AND v = 'cas'"),
    S("UPDATE lwt SET n = 11 WHERE k = 1 IF n IN (10, 11)"),
    S("UPDATE lwt SET v = 'x' WHERE k = 1 IF n > 100"),
    S("UPDATE lwt SET v = 'x' WHERE k = 2 IF EXISTS"),
    S("DELETE FROM lwt WHERE k = 3 IF EXISTS"),
    S("DELETE FROM lwt WHERE k = 1 IF v = 'nope'"),
    S("UPDATE lwt SET v = 'neq' WHERE k = 1 IF v != 'cas'"),
    S("INSERT INTO lwt (k, v) VALUES (5, 'ttl lwt') IF NOT EXISTS USING TTL 86400"),
    S("BEGIN BATCH INSERT INTO lwt (k, v) VALUES (6, 'batch') IF NOT EXISTS; "
      "UPDATE lwt SET n = 6 WHERE k = 6; APPLY BATCH"),
    S("SELECT * FROM lwt WHERE k IN (1, 2, 3, 5, 6)"),
    S("UPDATE lwt SET v = 'x' WHERE k = 1 IF n = 'not an int'"),
    S("UPDATE lwt SET v = 'x' WHERE k IN (1, 2) IF v = 'a'"),

    # --- TTL and TIMESTAMP ----------------------------------------------------------------------------
    S("INSERT INTO ttl (k, v) VALUES (1, 'ttl') USING TTL 86400"),
    S("INSERT INTO ttl (k, v) VALUES (2, 'ts') USING TIMESTAMP 1000000"),
    S("INSERT INTO ttl (k, v) VALUES (3, 'both') USING TTL 86400 AND TIMESTAMP 2000000"),
    S("UPDATE ttl USING TTL 0 SET v = 'zero' WHERE k = 4"),
    S("UPDATE ttl USING TIMESTAMP 3000000 AND TTL 500 SET v = 'upd' WHERE k = 5"),
    S("DELETE FROM ttl USING TIMESTAMP 1500000 WHERE k = 2"),
    S("INSERT INTO ttl (k, v) VALUES (8, 'neg ts') USING TIMESTAMP -5"),
    S("SELECT k, v, writetime(v) FROM ttl WHERE k IN (2, 3, 5, 8)"),
    S("SELECT k, v FROM ttl WHERE k IN (1, 4)"),
    S("INSERT INTO ttl (k, v) VALUES (6, 'neg') USING TTL -1"),
    S("INSERT INTO ttl (k, v) VALUES (7, 'too big') USING TTL 999999999"),
    S("INSERT INTO ttl (k, v) VALUES (9, 'x') USING TTL 'abc'"),
    S("INSERT INTO ttl (k, v) VALUES (9, 'x') USING TIMESTAMP 1.5"),
    S("INSERT INTO ttl (k, v) VALUES (30, 'client timestamp')", ts=1111111),
    S("UPDATE ttl SET v = 'client timestamp 2' WHERE k = 31", ts=2222222),
    S("DELETE FROM ttl WHERE k = 31", ts=2222221),
    S("UPDATE ttl USING TIMESTAMP 3333333 SET v = 'literal wins' WHERE k = 32", ts=4444444),
    S("BEGIN BATCH INSERT INTO ttl (k, v) VALUES (33, 'b'); DELETE FROM ttl WHERE k = 34; "
      "APPLY BATCH", ts=5555555),
    S("SELECT k, v, writetime(v) FROM ttl WHERE k IN (30, 31, 32, 33, 34)"),

    # --- quoted identifiers ---------------------------------------------------------------------------
    S('INSERT INTO "MixedCase" ("Key", "Val", "select") VALUES (1, \'quoted\', 2)'),
    S('UPDATE "MixedCase" SET "Val" = \'q2\', "select" = 3 WHERE "Key" = 2'),
    S('SELECT "Key", "Val", "select" FROM "MixedCase" WHERE "Key" = 1'),
    S('SELECT * FROM "MixedCase" WHERE "Key" IN (1, 2)'),
    S('SELECT "Val" AS "A ""b""", "select" FROM @ks@."MixedCase" WHERE "Key" = 1'),
    S('SELECT * FROM MixedCase WHERE "Key" = 1'),
    S('SELECT "key" FROM "MixedCase" WHERE "Key" = 1'),
    S('UPDATE "MixedCase" SET "with space" = \'sp\', "ünï" = -1 WHERE "Key" = 3'),
    S('SELECT "with space", "ünï" FROM "MixedCase" WHERE "Key" IN (1, 3)'),
    S("INSERT INTO words (key, type, ttl, writetime, \"limit\") VALUES (1, 'kw', 2, 3, 4) USING TTL 86400"),
    S("SELECT key, type, ttl, writetime, \"limit\" FROM words WHERE key = 1 LIMIT 1"),
    S("UPDATE words SET type = 'x', \"limit\" = 5 WHERE key = 2"),
    S("SELECT * FROM words WHERE key IN (1, 2)"),

    # --- text batches -------------------------------------------------------------------------------
    S("BEGIN BATCH INSERT INTO kv (k, v) VALUES (40, 'b1'); INSERT INTO kv (k, v) VALUES (41, 'b2'); "
      "UPDATE kv SET n = 41 WHERE k = 41; DELETE FROM kv WHERE k = 9; APPLY BATCH"),
    S("BEGIN UNLOGGED BATCH INSERT INTO clus (p, c, v) VALUES (3, 1, 'u') "
      "INSERT INTO clus (p, c, v) VALUES (3, 2, 'u') APPLY BATCH"),
    S("BEGIN BATCH USING TIMESTAMP 5000000 INSERT INTO ttl (k, v) VALUES (20, 'batch ts'); "
      "UPDATE ttl SET v = 'batch ts 2' WHERE k = 21; APPLY BATCH"),
    S("begin batch insert into kv (k, v) values (42, 'lower batch'); apply batch;"),
    S("BEGIN BATCH\n  -- a comment\n  INSERT INTO kv (k, v) VALUES (43, 'multi\nline');\n"
      "  /* another */ UPDATE kv SET n = 43 WHERE k = 43;\nAPPLY BATCH"),
    S("SELECT k, v, n FROM kv WHERE k IN (40, 41, 42, 43)"),
    S("SELECT k, v, writetime(v) FROM ttl WHERE k IN (20, 21)"),
    S("BEGIN BATCH SELECT * FROM kv WHERE k = 1; APPLY BATCH"),
    S("BEGIN BATCH INSERT INTO kv (k, v) VALUES (44, 'x'); UPDATE cnt SET n = n + 1 WHERE k = 1; "
      "APPLY BATCH"),
    S("BEGIN BATCH INSERT INTO kv (k, v) VALUES ('bad', 'x'); APPLY BATCH"),
    S("BEGIN BATCH INSERT INTO kv (k, v) VALUES (45, 'x') USING TIMESTAMP 10; APPLY BATCH"),
    S("BEGIN BATCH INSERT INTO kv (k, v) VALUES (46, 'x') APPLY"),

    # --- time series, server-side functions -------------------------------------------------------------
    S("INSERT INTO ts (p, t, v) VALUES (1, '2024-01-01 00:00:00+0000', 1.5)"),
    S("INSERT INTO ts (p, t, v) VALUES (1, '2024-01-01T06:00:00.250Z', -2.25)"),
    S("INSERT INTO ts (p, t, v) VALUES (1, 1704096000000, 1e10)"),
    S("INSERT INTO ts (p, t, v) VALUES (1, '2024-01-03 00:00:00', 3)", pt=SERVER_TZ),
    S("SELECT * FROM ts WHERE p = 1 AND t >= '2024-01-01 00:00:00+0000' AND t < '2024-01-02T00:00:00Z'"),
    S("SELECT * FROM ts WHERE p = 1 AND t > 1704067200000"),
    S("SELECT avg(v), min(v), max(v), sum(v), count(v) FROM ts WHERE p = 1"),
    S("SELECT * FROM ts WHERE p = 1 AND t = '2024-01-03 00:00:00'", pt=SERVER_TZ),
    S("INSERT INTO events (k, id, v) VALUES (1, now(), 'now')"),
    S("INSERT INTO events (k, id, v) VALUES (1, minTimeuuid('2024-01-01 00:00:00+0000'), 'min')"),
    S("SELECT count(*) FROM events WHERE k = 1"),
    S("SELECT v FROM events WHERE k = 1 LIMIT 1"),
    S("SELECT v FROM events WHERE k = 1 AND id < maxTimeuuid('2025-01-01 00:00:00+0000')"),

    # --- the client's own markers, with values, mixed with literals ---------------------------------------
    S("SELECT * FROM kv WHERE k = ?", values=[("int", 1)], pt=NO_LIT),
    S("SELECT k, v FROM kv WHERE k IN (1, 2, 3) AND v = ? ALLOW FILTERING", values=[("text", "one")]),
    S("INSERT INTO kv (k, v, n) VALUES (?, 'marker mix', ?)", values=[("int", 50), ("bigint", 5)]),
    S("UPDATE kv SET v = ? WHERE k = 51", values=[("text", "bound text")]),
    S("UPDATE kv USING TTL ? SET v = 'ttl marker' WHERE k = 52", values=[("int", 86400)]),
    S("SELECT k, v, n FROM kv WHERE k IN (50, 51, 52)"),
    S("SELECT * FROM clus WHERE p = 1 AND c > ? LIMIT 3", values=[("int", 2)], fetch=2),
    S("SELECT * FROM clus WHERE p = ? AND c IN (1, 2, 3)", values=[("int", 1)]),
    S("SELECT * FROM clus WHERE p = 1 AND c IN ?", values=[("list<int>", [4, 5])]),
    S("INSERT INTO types (k, a_bigint, a_text, a_blob) VALUES (200, ?, 'lit', ?)",
      values=[("bigint", -5), ("blob", b"\x00\x01")]),
    S("SELECT k, a_bigint, a_text, a_blob FROM types WHERE k = ?", values=[("int", 200)], pt=NO_LIT),
    S("BEGIN BATCH INSERT INTO kv (k, v) VALUES (53, ?); INSERT INTO kv (k, v) VALUES (?, 'b'); "
      "APPLY BATCH", values=[("text", "batch marker"), ("int", 54)]),
    S("SELECT k, v FROM kv WHERE k IN (53, 54)"),
    S("SELECT * FROM kv WHERE k = ? AND v = 'x' ALLOW FILTERING", pt=VALUES),
    S("SELECT * FROM kv WHERE k = 1", values=[("int", 1)], pt=VALUES),
    S("SELECT * FROM kv WHERE k = ? AND n = 1 ALLOW FILTERING", values=[("bigint", 1)]),
    S("SELECT * FROM kv WHERE k = ? AND n = 1 ALLOW FILTERING", values=[None]),
    S("SELECT * FROM kv WHERE k = ? AND n = 1 ALLOW FILTERING", values=[b""]),
    S("INSERT INTO kv (k, v, n) VALUES (55, ?, 5)", values=[b"\xff\xfe"]),
    S("UPDATE kv SET v = ?, n = 56 WHERE k = 56", values=[UNSET]),
    S("UPDATE kv SET v = 'unset key' WHERE k = ?", values=[UNSET]),
    S("SELECT k, n FROM kv WHERE k IN (55, 56)"),
    S("SELECT * FROM clus WHERE p = 1 LIMIT ?", values=[("int", 2)]),
    S("SELECT * FROM kv WHERE k = ? LIMIT 1", values=[("int", 1), ("int", 2)], pt=VALUES),

    # --- USE, the v5 keyspace field ------------------------------------------------------------------
    S("USE @ks2@", pt=USE),
    S("INSERT INTO kv (k, v, n) VALUES (1, 'other keyspace', -1)"),
    S("SELECT * FROM kv WHERE k = 1"),
    S("SELECT * FROM kv WHERE k IN (1, 2)"),
    S("USE \"@ks@\"", pt=USE),
    S("SELECT * FROM kv WHERE k = 1"),
    S("SELECT * FROM kv WHERE k IN (1, 2)"),
    S("USE no_such_keyspace", pt=USE),
    S("SELECT * FROM kv WHERE k = 2"),
    S("SELECT * FROM kv WHERE k = 1", ksflag=True, pt=KS_FIELD),
    S("INSERT INTO kv (k, v) VALUES (2, 'keyspace field')", ksflag=True, pt=KS_FIELD),
    S("SELECT k, v FROM kv WHERE k IN (1, 2)", ksflag=True, pt=KS_FIELD),
    S("SELECT k, v FROM @ks@.kv WHERE k IN (1, 2)", ksflag=True, pt=KS_FIELD),
    S("SELECT k, v FROM kv WHERE k IN (1, 2)"),
]

"""Seeded random CQL statements for the generative differential test (test_generative.py).

A `Generator` models a schema of two keyspaces, `@A@` and `@B@` (each side of the comparison
substitutes its own names), and produces a sequence of `Step`s, the statements of one client
session in order. Literals are never written by the generator: every value goes into a `%s` of
the statement's text and the Python driver's client-side interpolation renders it
(`cassandra.encoder.Encoder`, as `session.execute(SimpleStatement(text), params)` does), the way
a legacy application puts literals inline. Values are random Python values of the column's type,
with edge values (integer limits, NaN / Infinity, big varints, decimals of many scales, empty
strings and blobs, quotes and comment markers in strings, far dates, datetimes with and without
microseconds, Duration, inet v4 / v6, uuid / timeuuid, None, nested collections, tuples
(ValueSequence), UDTs, vectors), and now and then a value the server refuses (out of range, wrong
kind, wrong vector length): the proxy must let the server answer exactly as it would.

The proxy rewrites a shape from its second sighting on (admission threshold 1), so statements come
from *templates*: a template is one text with fixed form (columns, operators, IN, tuple arity as
written) whose values are drawn again at every use, and each template is used several times.
Between uses the generator switches keyspace with USE (the same unqualified names exist in one or
both keyspaces, with other rows or other column types), drops and re-creates a table (sometimes
with another column type) and adds / drops columns. "Race" episodes run a new shape for the first
time and switch keyspace right after it, repeatedly, since the proxy prepares a shape in the
background after its first sighting; some of them use a text batch of many statements whose first
sighting the server refuses at once while its PREPARE takes milliseconds (a wide window).

Nothing depends on the clocks or on when the server flushes: no now() / uuid() / writetime(),
TTLs long enough never to expire during a run, write timestamps far from now and positive where
they can make a deletion time (Cassandra 5.0.6 cannot read back an sstable with a negative one).

Everything is deterministic for a seed: the same `Generator(seed)` gives the same steps.
"""

import datetime
import ipaddress
import math
import random
import struct
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Callable, List, Optional

from cassandra.encoder import Encoder
from cassandra.query import ValueSequence
from cassandra.util import Date, Duration, Time

# --- UDTs: values render with the driver's own UDT format (Session.user_type_registered) ------

UDTS = {
    "addr": [("street", "text"), ("zip", "int"), ("tags", "frozen<list<text>>")],
    "pt": [("x", "double"), ("y", "double")],
}


class Addr:
    fields = [f for f, _ in UDTS["addr"]]

    def __init__(self, street=None, zip=None, tags=None):
        self.street, self.zip, self.tags = street, zip, tags

    def __repr__(self):
        return f"Addr({self.street!r}, {self.zip!r}, {self.tags!r})"


class Pt:
    fields = [f for f, _ in UDTS["pt"]]

    def __init__(self, x=None, y=None):
        self.x, self.y = x, y

    def __repr__(self):
        return f"Pt({self.x!r}, {self.y!r})"


UDT_CLASSES = {"addr": Addr, "pt": Pt}


def install_encoders(encoder):
    """Registers the UDT classes on a driver Encoder the way `Cluster.register_user_type` does
    for non-prepared statements (that needs schema metadata, which the test's clusters do not
    load): `{ field : value , ... }` with every field of the type."""
    for klass in UDT_CLASSES.values():
        def encode(val, _fields=klass.fields):
            return "{ %s }" % " , ".join(
                "%s : %s" % (f, encoder.cql_encode_all_types(getattr(val, f, None)))
                for f in _fields)
        encoder.mapping[klass] = encode
    return encoder


_render_encoder = install_encoders(Encoder())


def render(text, params):
    """The CQL text the driver sends for `text` % `params` (for reports)."""
    if not params:
        return text
    return text % tuple(_render_encoder.cql_encode_all_types(v) for v in params)


# --- types -------------------------------------------------------------------------------

def parse_type(s):
    """'frozen<map<int, frozen<list<text>>>>' -> nested tuples: (name, *args); frozen is kept
    as ('frozen', inner)."""
    s = s.replace(" ", "")
    t, rest = _parse(s, 0)
    assert rest == len(s), s
    return t


def _parse(s, i):
    j = i
    while j < len(s) and (s[j].isalnum() or s[j] == "_"):
        j += 1
    name = s[i:j]
    if j < len(s) and s[j] == "<":
        args, j = [], j + 1
        while True:
            if name == "vector" and len(args) == 1:
                k = j
                while s[k].isdigit():
                    k += 1
                args.append(int(s[j:k]))
                j = k
            else:
                a, j = _parse(s, j)
                args.append(a)
            if s[j] == ",":
                j += 1
                continue
            assert s[j] == ">", s
            return (name, *args), j + 1
    return (name,), j


def unfrozen(t):
    return t[1] if t[0] == "frozen" else t


SCALARS = ["ascii", "bigint", "blob", "boolean", "date", "decimal", "double", "duration", "float",
           "inet", "int", "smallint", "text", "time", "timestamp", "timeuuid", "tinyint", "uuid",
           "varchar", "varint"]

INT_BITS = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64, "counter": 64}

TEXT_PIECES = ["a", "Z", "q", "0", "7", " ", "'", "''", '"', "$$", "$", "?", ":n", ";", "--", "//",
               "/*", "*/", "\n", "\t", "\r", "\\", "%", ",", "(", ")", "[", "{", "NULL", "true",
               "0x00", "1e5", "-1", "P1Y", "é", "☃", "日本", "\U0001F600", "\u00a0", "ß"]
ASCII_PIECES = [p for p in TEXT_PIECES if p.isascii()]

F32_SPECIALS = [math.nan, math.inf, -math.inf, 0.0, -0.0, 3.4028234663852886e38,
                -3.4028234663852886e38, 1.401298464324817e-45, 1.1754943508222875e-38, 0.1,
                16777217.0, 1.5, -2.5, 1e-7, 3.4028235e38]
F64_SPECIALS = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1.7976931348623157e308,
                -1.7976931348623157e308, 5e-324, 2.2250738585072014e-308, 0.1, 1e300, -1e-300,
                9007199254740993.0, 1.0, 123456.789]


class Values:
    """Random Python values of a CQL type. `bad_p`: how often a value the server refuses."""

    def __init__(self, rng, bad_p=0.015):
        self.rng, self.bad_p = rng, bad_p

    def bad(self):
        return self.rng.random() < self.bad_p

    # scalars
    def int_of(self, bits):
        r, lo, hi = self.rng, -2 ** (bits - 1), 2 ** (bits - 1) - 1
        if self.bad():
            return r.choice([lo - 1, hi + 1, "12", b"\x00\x01"])
        x = r.random()
        if x < 0.25:
            return r.choice([0, -1, 1, lo, hi, lo + 1, hi - 1])
        if x < 0.3:   # a hex blob of the type's width is a valid literal of any type
            return r.randint(lo, hi).to_bytes(bits // 8, "big", signed=True)
        if x < 0.65:
            return r.randint(-100, 100)
        return r.randint(lo, hi)

    def varint(self):
        r = self.rng
        x = r.random()
        if x < 0.3:
            return r.choice([0, -1, 1, 127, 128, -128, -129, 255, 256, 2 ** 63, -2 ** 63 - 1,
                             2 ** 64, -2 ** 64, 2 ** 127 - 1])
        if self.bad():
            return r.choice([1.5, "1"])
        return r.getrandbits(r.randint(1, 300)) * r.choice([1, -1])

    def f32(self):
        r = self.rng
        x = r.random()
        if x < 0.3:
            return r.choice(F32_SPECIALS)
        if x < 0.33:
            return r.choice([1e39, -1e39, 1e-46])   # beyond float: Infinity / 0 on the server
        if x < 0.65:
            while True:
                f = struct.unpack(">f", struct.pack(">I", r.getrandbits(32)))[0]
                if math.isfinite(f):
                    return f
        if self.bad():
            return "1.5"
        return round(r.uniform(-1e6, 1e6), r.randint(0, 6))

    def f64(self):
        r = self.rng
        x = r.random()
        if x < 0.3:
            return r.choice(F64_SPECIALS)
        if x < 0.6:
            while True:
                f = struct.unpack(">d", struct.pack(">Q", r.getrandbits(64)))[0]
                if math.isfinite(f):
                    return f
        if self.bad():
            return r.choice(["2.5", True])
        if x < 0.8:
            return r.randint(-10 ** 6, 10 ** 6)      # an integer literal for a double
        return round(r.uniform(-1e9, 1e9), r.randint(0, 9))

    def decimal(self):
        r = self.rng
        x = r.random()
        if self.bad():
            return r.choice([math.nan, math.inf, Decimal("NaN"), "1.5"])
        if x < 0.2:   # Decimal renders through float(): repr of the nearest double
            return Decimal(r.choice(["0", "-0", "1.50", "0.001", "-123.4560", "1e-10", "1E+20",
                                     "12345678901234567890.123", "3.14159265358979323846"]))
        if x < 0.4:
            return r.getrandbits(r.randint(1, 200)) * r.choice([1, -1])   # integer: scale 0
        if x < 0.6:
            return r.choice([-0.0, 0.5, 1e300, 1e-300, 5e-324, 1.7976931348623157e308,
                             123.456, -1e-5, 2.5e-7])
        if x < 0.8:
            return Decimal(r.randint(-10 ** 9, 10 ** 9)).scaleb(-r.randint(-20, 20))
        return round(r.uniform(-1e5, 1e5), r.randint(0, 8))

    def text(self, ascii_only=False):
        r = self.rng
        pieces = ASCII_PIECES if ascii_only else TEXT_PIECES
        x = r.random()
        if x < 0.1:
            return ""
        if ascii_only and self.bad():
            return "caf\u00e9"
        if x < 0.13:
            return "".join(r.choice(pieces) for _ in range(r.randint(200, 600)))
        if x < 0.4:
            return r.choice(["a", "b", "it's", "x y", "ü", "0"])
        return "".join(r.choice(pieces) for _ in range(r.randint(1, 8)))

    def blob(self):
        r = self.rng
        n = r.choice([0, 0, 1, 2, 4, 8, 16, r.randint(0, 64)])
        b = bytes(r.getrandbits(8) for _ in range(n))
        return bytearray(b) if r.random() < 0.2 else b

    def date(self):
        r = self.rng
        x = r.random()
        if self.bad():
            return r.choice(["2024-13-01", "2024-02-30", 2 ** 32, -1])
        if x < 0.35:
            return datetime.date(r.randint(1000, 9999), r.randint(1, 12), r.randint(1, 28))
        if x < 0.45:
            return datetime.date(r.choice([1, 9, 99, 999]), 1, r.randint(1, 28))  # '1-01-05'
        if x < 0.75:
            return Date(r.choice([0, -1, 1, -2 ** 31, 2 ** 31 - 1, 19000, -719162, 2932896,
                                  r.randint(-2 ** 31, 2 ** 31 - 1)]))
        if x < 0.9:
            return r.choice(["1970-01-01", "2024-02-29", "0001-01-01", "9999-12-31",
                             "-0001-01-01", "+10000-01-01"])
        return r.randint(0, 2 ** 32 - 1)   # an integer literal: the raw day count

    def time(self):
        r = self.rng
        x = r.random()
        if self.bad():
            return r.choice([86400000000000, -1, "24:00:00", "12:00"])
        if x < 0.3:
            us = r.choice([0, r.randint(0, 999999)])
            return datetime.time(r.randint(0, 23), r.randint(0, 59), r.randint(0, 59), us)
        if x < 0.6:
            return Time(r.choice([0, 1, 86399999999999, r.randint(0, 86399999999999)]))
        if x < 0.8:
            return r.choice(["00:00:00", "23:59:59.999999999", "12:34:56.1", "01:02:03.123456"])
        return r.randint(0, 86399999999999)   # integer: nanoseconds since midnight

    def timestamp(self):
        r = self.rng
        x = r.random()
        if self.bad():
            return r.choice(["2024-01-02 25:00:00+0000", "yesterday", 2 ** 63])
        if x < 0.45:
            dt = datetime.datetime(r.choice([1, 1900, 1969, 1970, 2024, 2038, 9999,
                                             r.randint(1, 9999)]),
                                   r.randint(1, 12), r.randint(1, 28), r.randint(0, 23),
                                   r.randint(0, 59), r.randint(0, 59),
                                   r.choice([0, 0, r.randint(0, 999) * 1000,
                                             r.randint(0, 999999)]))
            if r.random() < 0.2:
                dt = dt.replace(year=max(dt.year, 2), tzinfo=datetime.timezone(
                    datetime.timedelta(minutes=r.choice([-600, -90, 0, 60, 330]))))
            return dt
        if x < 0.7:
            return r.choice([0, -1, 1, 2 ** 63 - 1, -2 ** 63, 1700000000000,
                             r.randint(-2 ** 50, 2 ** 50)])
        return r.choice(["2024-01-02 03:04:05+0000", "2024-01-02T03:04:05.678Z",
                         "2024-01-02 03:04:05.1+05:30", "1969-12-31 23:59:59.999-0100",
                         "2024-01-02 03:04", "2024-01-02", "2024-01-02 03:04:05.123456789+0000",
                         "2024-01-02 03:04:05 UTC"])

    def uuid(self, version=None):
        r = self.rng
        if version == 1:
            if self.bad():
                return uuid.UUID(int=r.getrandbits(128), version=4)
            return uuid.UUID(int=r.getrandbits(128), version=1)
        x = r.random()
        if x < 0.15:
            return r.choice([uuid.UUID(int=0), uuid.UUID(int=2 ** 128 - 1)])
        if x < 0.5:
            return uuid.UUID(int=r.getrandbits(128), version=r.choice([1, 4]))
        return uuid.UUID(int=r.getrandbits(128))

    def inet(self):
        r = self.rng
        x = r.random()
        if x < 0.35:
            return ipaddress.IPv4Address(r.getrandbits(32))
        if x < 0.7:
            return ipaddress.IPv6Address(r.getrandbits(128))
        return r.choice(["127.0.0.1", "0.0.0.0", "255.255.255.255", "::", "::1",
                         "::ffff:10.1.2.3", "2001:db8::1", "FE80::0202:B3FF:FE1E:8329",
                         "1:2:3:4:5:6:7:8"])

    def duration(self):
        r = self.rng
        if self.bad():
            return r.choice(["1d", 5, "P1Y"])
        x = r.random()
        if x < 0.2:
            return Duration(0, 0, 0)
        sign = r.choice([1, -1])
        if x < 0.4:
            return Duration(sign * (2 ** 31 - 1), sign * (2 ** 31 - 1), sign * (2 ** 63 - 1))
        return Duration(sign * r.randint(0, 500), sign * r.randint(0, 40),
                        sign * r.choice([0, r.randint(0, 10 ** 14), r.randint(0, 2 ** 63 - 1)]))

    def scalar(self, name):
        if name in INT_BITS:
            return self.int_of(INT_BITS[name])
        if name == "varint":
            return self.varint()
        if name == "float":
            return self.f32()
        if name == "double":
            return self.f64()
        if name == "decimal":
            return self.decimal()
        if name in ("text", "varchar"):
            return self.text()
        if name == "ascii":
            return self.text(ascii_only=True)
        if name == "boolean":
            return self.rng.choice([True, False]) if not self.bad() else "true"
        if name == "blob":
            return self.blob() if not self.bad() else "00ff"
        if name == "date":
            return self.date()
        if name == "time":
            return self.time()
        if name == "timestamp":
            return self.timestamp()
        if name == "uuid":
            return self.uuid()
        if name == "timeuuid":
            return self.uuid(version=1)
        if name == "inet":
            return self.inet()
        if name == "duration":
            return self.duration()
        raise ValueError(name)

    # any type
    def of(self, t, hashable=False, nullable=True):
        r = self.rng
        frozen = t[0] == "frozen"
        t = unfrozen(t)
        kind = t[0]
        if nullable and r.random() < 0.04:
            return None
        if kind == "list":
            n = r.choice([0, 1, 1, 2, 3, 4])
            if self.bad():   # null inside a collection
                items = [self.of(t[1], hashable=hashable, nullable=False) for _ in range(n)]
                return tuple(items + [None]) if hashable else items + [None]
            items = [self.of(t[1], hashable=hashable, nullable=False) for _ in range(n)]
            return tuple(items) if hashable or r.random() < 0.1 else items  # tuple renders [..]
        if kind == "set":
            n = r.choice([0, 1, 1, 2, 3, 4])
            items = {self.of(t[1], hashable=True, nullable=False) for _ in range(n)}
            return frozenset(items) if hashable or frozen and r.random() < 0.5 else items
        if kind == "map":
            n = r.choice([0, 1, 1, 2, 3])
            return {self.of(t[1], hashable=True, nullable=False):
                    self.of(t[2], nullable=False) for _ in range(n)}
        if kind == "tuple":
            items = [self.of(x) for x in t[1:]]
            if self.bad():
                items = items[:-1] if r.random() < 0.5 else items + [1]
            return ValueSequence(items)
        if kind in UDT_CLASSES:
            return UDT_CLASSES[kind](*[self.of(parse_type(ft)) for _, ft in UDTS[kind]])
        if kind == "vector":
            n = t[2] + (r.choice([-1, 1]) if self.bad() else 0)
            return [self.of(t[1], nullable=False) for _ in range(n)]
        v = self.scalar(kind)
        if hashable and isinstance(v, (list, dict, set, bytearray)):
            return bytes(v) if isinstance(v, bytearray) else self.scalar(kind)
        return v


# --- the schema model -----------------------------------------------------------------------

@dataclass
class Table:
    cols: dict                 # name -> type string, in order
    pk: list
    ck: list = field(default_factory=list)
    options: str = ""

    def ddl(self, ks, name):
        cols = ", ".join(f"{c} {t}" for c, t in self.cols.items())
        pk = ", ".join(self.pk)
        key = f"(({pk})" + "".join(f", {c}" for c in self.ck) + ")" if len(self.pk) > 1 \
            else "(" + ", ".join(self.pk + self.ck) + ")"
        return f"CREATE TABLE {ks}.{name} ({cols}, PRIMARY KEY {key}){self.options}"

    def regular(self):
        return [c for c in self.cols if c not in self.pk and c not in self.ck]


def _t(spec, pk, ck=(), options=""):
    cols = {}
    for part in _split_top(spec):
        name, typ = part.strip().split(" ", 1)
        cols[name] = typ.strip()
    return Table(cols, list(pk), list(ck), options)


def _split_top(s):
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out


ALL_COLS = ", ".join(f"c_{t} {t}" for t in SCALARS) + (
    ", l list<int>, s set<text>, m map<text, int>, fl frozen<list<double>>,"
    " fs frozen<set<timestamp>>, fm frozen<map<uuid, blob>>,"
    " nested map<int, frozen<list<frozen<set<bigint>>>>>, lt list<frozen<tuple<int, text>>>,"
    " ms map<frozen<list<int>>, frozen<set<text>>>, tup tuple<int, text, boolean>,"
    " ntup frozen<tuple<int, tuple<date, bigint>>>, u frozen<addr>, unf addr, lu list<frozen<pt>>,"
    " vec vector<float, 3>, vtx vector<text, 2>")

KT_CK = ["c_ts", "c_date", "c_tu", "c_dec", "c_inet", "c_blob", "c_time", "c_dbl", "c_bool"]

CHURN_VARIANTS = [
    "k int, v int", "k int, v text", "k bigint, v int", "k int, v int, w text", "k int, v varint",
    "k text, v int",
]

ALT_TYPES = ["int", "text", "bigint", "double", "timestamp", "list<int>", "map<text, int>",
             "frozen<set<int>>", "uuid", "blob", "date"]


def initial_schema():
    """{slot: {table: Table}} of both keyspaces."""
    a = {
        "t_all": _t("k int, " + ALL_COLS, ["k"]),
        "t_clus": _t("p int, c1 int, c2 text, c3 bigint, v text, n int, st int static",
                     ["p"], ["c1", "c2", "c3"],
                     " WITH CLUSTERING ORDER BY (c1 ASC, c2 DESC, c3 ASC)"),
        "t_ktypes": _t("p text, c_ts timestamp, c_date date, c_tu timeuuid, c_dec decimal, "
                       "c_inet inet, c_blob blob, c_time time, c_dbl double, c_bool boolean, "
                       "v varint", ["p"], KT_CK),
        "t_comp": _t("a int, b text, d timestamp, c int, v text", ["a", "b", "d"], ["c"]),
        "t_cnt": _t("k int, c text, n counter, m counter", ["k"], ["c"]),
        "kv": _t("k int, v text, n bigint", ["k"]),
        "kv2": _t("k int, v text", ["k"]),
        "only_a": _t("k int, v text", ["k"]),
        "churn": _t(CHURN_VARIANTS[0], ["k"]),
        "alt": _t("k int, a int, b text", ["k"]),
    }
    b = {
        "kv": _t("k int, v text, n bigint", ["k"]),
        "kv2": _t("k int, v int", ["k"]),          # same name, another type of v
        "only_b": _t("k int, v text", ["k"]),
    }
    return {"A": a, "B": b}


def schema_ddl(schema):
    """The setup DDL of one side, with @A@ / @B@."""
    out = [f"CREATE KEYSPACE @{s}@ WITH replication = "
           "{'class': 'SimpleStrategy', 'replication_factor': 1}" for s in ("A", "B")]
    for name, fields in UDTS.items():
        out.append(f"CREATE TYPE @A@.{name} (" + ", ".join(f"{f} {t}" for f, t in fields) + ")")
    for slot, tables in schema.items():
        for name, t in tables.items():
            out.append(t.ddl(f"@{slot}@", name))
    return out


# --- steps and templates ----------------------------------------------------------------------

@dataclass
class Step:
    text: str                       # CQL with %s markers and @A@ / @B@
    params: Optional[tuple] = None  # Python values, rendered by the driver's encoder
    fetch: Optional[int] = None     # page size; every page is compared
    tag: str = ""                   # the template family, for reports
    kind: str = "query"             # query | use | ddl | batch (a driver BatchStatement)
    children: Optional[list] = None  # batch: [(text, params)]
    batch_type: str = "LOGGED"

    def rendered(self):
        if self.kind == "batch":
            return f"<driver {self.batch_type} BATCH> " + " ; ".join(
                render(t, p) for t, p in self.children)
        return render(self.text, self.params)


@dataclass
class Template:
    tag: str
    text: str
    gen: Callable                   # () -> tuple of params (or a list of them for a batch)
    uses: int
    fetch: Optional[Callable] = None
    kind: str = "query"
    batch_type: str = "LOGGED"
    texts: Optional[list] = None    # batch children

    def step(self):
        fetch = self.fetch() if self.fetch else None
        if self.kind == "batch":
            return Step("", None, fetch, self.tag, "batch",
                        list(zip(self.texts, self.gen())), self.batch_type)
        return Step(self.text, tuple(self.gen()), fetch, self.tag)


def seq(items):
    return ValueSequence(list(items))


class Generator:
    """Produces the steps of one run. `count`: how many steps (statements, USEs, DDL)."""

    def __init__(self, seed, count):
        self.rng = random.Random(seed)
        self.count = count
        self.v = Values(self.rng)
        self.schema = initial_schema()
        self.cur = "A"            # the keyspace the session USEs
        self.pool: List[Template] = []
        self.alias = 0
        self.alt_next = 0
        # Small key pools so that reads find rows and relations match.
        self.kt_pools = {c: [self.v.of(parse_type(t), nullable=False) for _ in range(3)]
                         for c, t in self.schema["A"]["t_ktypes"].cols.items() if c in KT_CK}
        for c, pool in self.kt_pools.items():   # keep clustering values valid
            self.kt_pools[c] = [x for x in pool if self._valid_key(c, x)] or \
                [self._fallback_key(c)]
        self.comp_d = [datetime.datetime(2024, 1, 2, 3, 4, 5), 0,
                       datetime.datetime(1969, 7, 20, 20, 17, 40, 123000)]
        self.c2_pool = ["", "a", "b", "it's", "ü"]
        self.c3_pool = [-2 ** 63, -1, 0, 1, 7, 2 ** 63 - 1]
        self.families = [
            (12, self.f_ins_all), (9, self.f_upd_all), (4, self.f_del_all), (12, self.f_sel_all),
            (8, self.f_ins_clus), (4, self.f_upd_clus), (3, self.f_del_clus),
            (12, self.f_sel_clus), (5, self.f_agg), (4, self.f_page),
            (4, self.f_ins_kt), (5, self.f_sel_kt), (3, self.f_comp), (4, self.f_cnt),
            (5, self.f_kvish), (3, self.f_churn), (3, self.f_alt), (3, self.f_batch_text),
            (2, self.f_batch_driver), (4, self.f_lwt), (2, self.f_misc),
        ]
        self._weights = [w for w, _ in self.families]

    # keys ---------------------------------------------------------------------------------
    def _valid_key(self, col, x):
        if x is None or isinstance(x, str) and col not in ("c_ts", "c_date", "c_time", "c_inet"):
            return False
        if col == "c_dec" and isinstance(x, float) and not math.isfinite(x):
            return False
        if col == "c_date" and isinstance(x, int) and not 0 <= x < 2 ** 32:
            return False
        if col == "c_date" and isinstance(x, str) and x not in ("1970-01-01", "2024-02-29",
                                                              "9999-12-31"):
            return False
        if col == "c_date" and isinstance(x, datetime.date) and x.year < 1000:
            return False
        if col == "c_time" and isinstance(x, int) and not 0 <= x < 86400000000000:
            return False
        if col == "c_time" and isinstance(x, str) and x in ("24:00:00", "12:00"):
            return False
        if col == "c_ts" and (isinstance(x, str) and ("25:" in x or x == "yesterday")
                              or isinstance(x, int) and not -2 ** 63 <= x < 2 ** 63):
            return False
        if col == "c_tu" and x.version != 1:
            return False
        if col == "c_dec" and isinstance(x, (Decimal, float)) and not math.isfinite(float(x)):
            return False
        if isinstance(x, str) and col in ("c_dec", "c_dbl", "c_bool", "c_blob"):
            return False
        return not (col == "c_dbl" and isinstance(x, (str, bool)))

    def _fallback_key(self, col):
        return {"c_ts": 0, "c_date": "2024-02-29", "c_tu": uuid.UUID(int=1, version=1),
                "c_dec": 1, "c_inet": "::1", "c_blob": b"", "c_time": 0, "c_dbl": 0.5,
                "c_bool": True}[col]

    def k_all(self):
        r = self.rng
        return r.choice([2 ** 31 - 1, -2 ** 31, 0]) if r.random() < 0.05 else r.randint(-2, 20)

    def p(self):
        return self.rng.randint(0, 4)

    def c1(self):
        return self.rng.randint(-1, 4)

    def c2(self):
        return self.rng.choice(self.c2_pool)

    def c3(self):
        return self.rng.choice(self.c3_pool)

    def small_k(self):
        return self.rng.randint(0, 9)

    def in_list(self, f, multi=None):
        """A ValueSequence for `IN %s`: one element about half of the time (the form `IN (x)`
        is an equality to the server), sometimes empty."""
        r = self.rng
        if multi is None:
            n = r.choice([0, 1, 1, 1, 1, 2, 2, 3, 5]) if r.random() < 0.9 else 0
        else:
            n = r.choice([2, 3]) if multi else 1
        return seq(f() for _ in range(n))

    def using(self, ttl=True, ts=True):
        """(text, value generators) of an optional USING clause."""
        r = self.rng
        opts = [("", [])]
        if ttl:
            opts.append((" USING TTL %s", [self.ttl]))
        if ts:
            opts.append((" USING TIMESTAMP %s", [self.tstamp]))
        if ttl and ts:
            opts.append((" USING TTL %s AND TIMESTAMP %s", [self.ttl, self.tstamp]))
            opts.append((" USING TIMESTAMP %s AND TTL %s", [self.tstamp, self.ttl]))
        return r.choice(opts)

    def ttl(self):
        """TTLs long enough that nothing expires during a run (or 0: none)."""
        r = self.rng
        if self.v.bad():
            return r.choice([-1, 630720001, 2 ** 31, "10"])
        return r.choice([0, 3600, 86400, 630720000, r.randint(10000, 10 ** 8)])

    def tstamp(self):
        """Write timestamps far from now (the server's and client's clocks never decide), and
        positive: Cassandra 5.0.6 writes a deletion time below zero (a deletion, or the
        tombstone at timestamp - 1 of a collection overwrite) into an sstable it then cannot
        read ("Invalid flags found deserializing DeletionTime"), so results would depend on
        when the server flushes."""
        r = self.rng
        return r.choice([1, 2, r.randint(1, 10 ** 12), r.randint(4 * 10 ** 15, 5 * 10 ** 15)])

    def tstamp_edge(self):
        """Any bigint, for writes that make no deletion time (kv: no collections, no deletes
        with a timestamp)."""
        r = self.rng
        return r.choice([0, -1, 2 ** 63 - 1, -2 ** 63 + 1, self.tstamp()])

    def fetch_small(self):
        return self.rng.choice([1, 2, 3, 5, 100])

    def new_alias(self):
        self.alias += 1
        return f"r{self.alias}"

    def tmpl(self, tag, text, gens, uses=None, fetch=None, **kw):
        r = self.rng
        gens = list(gens)
        uses = uses if uses is not None else r.choice([4, 5, 6, 8, 10])
        return Template(tag, text, lambda: [g() for g in gens], uses, fetch, **kw)

    def col_val(self, table, col, slot="A"):
        t = self.schema[slot][table].cols[col]
        return lambda: self.v.of(parse_type(t))

    # families ------------------------------------------------------------------------------
    def f_ins_all(self):
        r = self.rng
        t = self.schema["A"]["t_all"]
        cols = r.sample(t.regular(), r.randint(1, 7))
        lwt = r.random() < 0.12
        use, ugens = self.using(ts=not lwt)
        text = (f"INSERT INTO t_all (k, {', '.join(cols)}) VALUES "
                f"({', '.join(['%s'] * (len(cols) + 1))}){use}" + (" IF NOT EXISTS" if lwt else ""))
        return self.tmpl("ins_all" + ("/lwt" if lwt else ""), text,
                         [self.k_all] + [self.col_val("t_all", c) for c in cols] + ugens)

    def assignment(self):
        """(text, generators) of one SET assignment of t_all."""
        r = self.rng
        t = self.schema["A"]["t_all"]
        v = self.v
        pick = r.random()
        if pick < 0.45:
            c = r.choice(t.regular())
            return f"{c} = %s", [self.col_val("t_all", c)]
        opts = [
            ("l = l + %s", [lambda: v.of(parse_type("list<int>"))]),
            ("l = %s + l", [lambda: v.of(parse_type("list<int>"))]),
            ("l = l - %s", [lambda: v.of(parse_type("list<int>"))]),
            ("l += %s", [lambda: v.of(parse_type("list<int>"))]),
            ("l[%s] = %s", [lambda: r.choice([0, 1, 2, -1, 5]), lambda: v.int_of(32)]),
            ("s = s + %s", [lambda: v.of(parse_type("set<text>"))]),
            ("s = s - %s", [lambda: v.of(parse_type("set<text>"))]),
            ("s -= %s", [lambda: v.of(parse_type("set<text>"))]),
            ("m = m + %s", [lambda: v.of(parse_type("map<text, int>"))]),
            ("m[%s] = %s", [lambda: v.text(), lambda: v.int_of(32)]),
            ("m = m - %s", [lambda: v.of(parse_type("set<text>"))]),
            ("unf.zip = %s", [lambda: v.int_of(32)]),
            ("unf.street = %s", [lambda: v.text()]),
            ("unf.tags = %s", [lambda: v.of(parse_type("frozen<list<text>>"))]),
            ("nested[%s] = %s", [lambda: v.int_of(32),
                                 lambda: v.of(parse_type("frozen<list<frozen<set<bigint>>>>"))]),
            ("lt = lt + %s", [lambda: v.of(parse_type("list<frozen<tuple<int, text>>>"))]),
            ("ms[%s] = %s", [lambda: v.of(parse_type("frozen<list<int>>"), hashable=True),
                             lambda: v.of(parse_type("frozen<set<text>>"))]),
            ("lu = %s + lu", [lambda: v.of(parse_type("list<frozen<pt>>"))]),
            ("vec = %s", [lambda: v.of(parse_type("vector<float, 3>"))]),
        ]
        return r.choice(opts)

    def key_where_all(self, lwt=False):
        r = self.rng
        if r.random() < 0.3:
            if lwt:   # `k IN (x)` is `k = x`; a longer list is refused with a condition
                return "k IN %s", [lambda: self.in_list(self.k_all, multi=r.random() < 0.15)]
            single = r.random() < 0.5
            return "k IN %s", [lambda: self.in_list(self.k_all, multi=False if single else None)]
        return "k = %s", [self.k_all]

    def condition(self):
        r = self.rng
        v = self.v
        t = self.schema["A"]["t_all"]
        c = r.choice([x for x in t.regular() if x.startswith("c_")])
        opts = [
            (" IF EXISTS", []),
            (f" IF {c} = %s", [self.col_val("t_all", c)]),
            (f" IF {c} != %s", [self.col_val("t_all", c)]),
            (f" IF {c} > %s", [self.col_val("t_all", c)]),
            (f" IF {c} IN %s", [lambda: self.in_list(self.col_val("t_all", c))]),
            (" IF c_int IN %s", [lambda: self.in_list(lambda: r.randint(-3, 3))]),
            (" IF c_int = %s AND c_text = %s", [lambda: r.randint(-3, 3), lambda: v.text()]),
            (" IF l[%s] = %s", [lambda: r.randint(0, 2), lambda: v.int_of(32)]),
            (" IF m[%s] = %s", [lambda: v.text(), lambda: v.int_of(32)]),
            (" IF unf.zip = %s", [lambda: v.int_of(32)]),
            (" IF c_int = %s", [lambda: None]),
        ]
        return r.choice(opts)

    def f_upd_all(self):
        r = self.rng
        lwt = r.random() < 0.25
        sets = [self.assignment() for _ in range(r.randint(1, 3))]
        use, ugens = self.using(ts=not lwt)
        where, wgens = self.key_where_all(lwt)
        cond, cgens = self.condition() if lwt else ("", [])
        text = (f"UPDATE t_all{use} SET " + ", ".join(s for s, _ in sets) + f" WHERE {where}{cond}")
        gens = ugens + [g for _, gs in sets for g in gs] + wgens + cgens
        return self.tmpl("upd_all" + ("/lwt" if lwt else ""), text, gens)

    def f_del_all(self):
        r = self.rng
        v = self.v
        lwt = r.random() < 0.25
        what_opts = [("", []), ("c_int, c_text", []), ("l[%s]", [lambda: r.randint(-1, 3)]),
                     ("m[%s]", [lambda: v.text()]), ("unf.zip", []), ("s, vec", []),
                     ("m[%s], c_blob", [lambda: v.text()])]
        what, wg = r.choice(what_opts)
        use, ugens = ("", []) if lwt else r.choice([("", []), (" USING TIMESTAMP %s", [self.tstamp])])
        where, kg = self.key_where_all(lwt)
        cond, cg = self.condition() if lwt else ("", [])
        text = f"DELETE {what + ' ' if what else ''}FROM t_all{use} WHERE {where}{cond}"
        return self.tmpl("del_all" + ("/lwt" if lwt else ""), text, wg + ugens + kg + cg)

    def filter_rel(self):
        """A relation on a regular column of t_all (ALLOW FILTERING)."""
        r = self.rng
        v = self.v
        t = self.schema["A"]["t_all"]
        eq_cols = [c for c in t.regular() if not c in ("l", "s", "m", "nested", "lt", "ms", "unf",
                                                       "lu")]
        c = r.choice(eq_cols)
        x = r.random()
        if x < 0.35:
            return f"{c} = %s", [self.col_val("t_all", c)]
        if x < 0.6:
            return f"{c} IN %s", [lambda: self.in_list(self.col_val("t_all", c))]
        if x < 0.75:
            op = r.choice([">", ">=", "<", "<=", "!="])
            return f"{c} {op} %s", [self.col_val("t_all", c)]
        return r.choice([
            ("s CONTAINS %s", [lambda: v.text()]),
            ("m CONTAINS KEY %s", [lambda: v.text()]),
            ("m CONTAINS %s", [lambda: v.int_of(32)]),
            ("l CONTAINS %s", [lambda: r.randint(-3, 3)]),
            ("m[%s] = %s", [lambda: v.text(), lambda: r.randint(-3, 3)]),
            ("c_int IN %s", [lambda: self.in_list(lambda: r.randint(-3, 3))]),
            ("c_text IN %s", [lambda: self.in_list(lambda: r.choice(["a", "b", "it's", ""]))]),
        ])

    def selection(self, table):
        r = self.rng
        t = self.schema["A"][table]
        x = r.random()
        if x < 0.35:
            return "*"
        if x < 0.45:
            return "JSON *"
        if x < 0.55:
            c = r.choice(list(t.cols))
            return f"{c} AS {self.new_alias()}, k" if "k" in t.cols else f"{c} AS {self.new_alias()}"
        return ", ".join(r.sample(list(t.cols), r.randint(1, min(6, len(t.cols)))))

    def limit(self):
        r = self.rng
        x = r.random()
        if x < 0.7:
            return "", []
        if x < 0.85:
            return " LIMIT %s", [lambda: r.choice([1, 2, 3, 100, 2 ** 31 - 1] +
                                                  ([0, -1, 2 ** 31] if self.v.bad() else []))]
        return " PER PARTITION LIMIT %s", [lambda: r.choice([1, 2, 5])]

    def f_sel_all(self):
        r = self.rng
        sel = self.selection("t_all")
        x = r.random()
        if x < 0.35:
            where, gens = self.key_where_all()
            allow = ""
        elif x < 0.45:
            where, gens = "token(k) > %s AND token(k) <= %s", [
                lambda: r.choice([-2 ** 63, r.randint(-2 ** 63, 0)]),
                lambda: r.choice([2 ** 63 - 1, r.randint(0, 2 ** 63 - 1)])]
            allow = ""
        elif x < 0.6:
            kw, kg = self.key_where_all()
            fw, fg = self.filter_rel()
            where, gens, allow = f"{kw} AND {fw}", kg + fg, " ALLOW FILTERING"
        else:
            where, gens = self.filter_rel()
            allow = " ALLOW FILTERING"
        lim, lg = self.limit()
        text = f"SELECT {sel} FROM t_all WHERE {where}{lim}{allow}"
        fetch = self.fetch_small if r.random() < 0.3 else None
        return self.tmpl("sel_all", text, gens + lg, fetch=fetch)

    def f_ins_clus(self):
        r = self.rng
        v = self.v
        lwt = r.random() < 0.1
        st = r.random() < 0.3
        use, ug = self.using(ts=not lwt)
        cols = "p, c1, c2, c3, v, n" + (", st" if st else "")
        text = (f"INSERT INTO t_clus ({cols}) VALUES ({', '.join(['%s'] * (7 if st else 6))})"
                f"{use}" + (" IF NOT EXISTS" if lwt else ""))
        gens = [self.p, self.c1, self.c2, self.c3, lambda: v.text(), lambda: v.int_of(32)] + \
            ([lambda: r.randint(-5, 5)] if st else []) + ug
        return self.tmpl("ins_clus" + ("/lwt" if lwt else ""), text, gens)

    def clus_key_where(self, lwt):
        r = self.rng
        if lwt:
            return r.choice([
                ("p = %s AND c1 = %s AND c2 = %s AND c3 = %s", [self.p, self.c1, self.c2, self.c3]),
                ("p IN %s AND c1 = %s AND c2 = %s AND c3 IN %s",
                 [lambda: self.in_list(self.p, multi=False), self.c1, self.c2,
                  lambda: self.in_list(self.c3, multi=r.random() < 0.15)]),
            ])
        return r.choice([
            ("p = %s AND c1 = %s AND c2 = %s AND c3 = %s", [self.p, self.c1, self.c2, self.c3]),
            ("p IN %s AND c1 = %s AND c2 IN %s AND c3 = %s",
             [lambda: self.in_list(self.p), self.c1, lambda: self.in_list(self.c2), self.c3]),
            ("p = %s AND c1 IN %s AND c2 = %s AND c3 IN %s",
             [self.p, lambda: self.in_list(self.c1), self.c2, lambda: self.in_list(self.c3)]),
            ("p = %s AND (c1, c2, c3) = %s", [self.p, lambda: self.tuple_of(["c1", "c2", "c3"])]),
        ])

    def f_upd_clus(self):
        r = self.rng
        v = self.v
        lwt = r.random() < 0.3
        use, ug = ("", []) if lwt else self.using()
        if r.random() < 0.3:   # the static column: the partition key only
            pw, pg = self.part_rel()
            cond, cg = r.choice([(" IF st = %s", [lambda: r.choice([None, r.randint(-5, 5)])]),
                                 (" IF EXISTS", [])]) if lwt else ("", [])
            text = f"UPDATE t_clus{use} SET st = %s WHERE {pw}{cond}"
            return self.tmpl("upd_clus" + ("/lwt" if lwt else ""), text,
                             ug + [lambda: r.randint(-5, 5)] + pg + cg)
        sets, sg = r.choice([("v = %s", [lambda: v.text()]), ("n = %s", [lambda: v.int_of(32)]),
                             ("v = %s, n = %s", [lambda: v.text(), lambda: r.randint(0, 3)])])
        kw, kg = self.clus_key_where(lwt)
        cond, cg = r.choice([(" IF EXISTS", []), (" IF v = %s", [lambda: r.choice(["a", "b"])]),
                             (" IF n IN %s", [lambda: self.in_list(lambda: r.randint(0, 3))]),
                             (" IF n > %s", [lambda: r.randint(-1, 3)]),
                             (" IF st = %s", [lambda: r.randint(-5, 5)])]) if lwt else ("", [])
        text = f"UPDATE t_clus{use} SET {sets} WHERE {kw}{cond}"
        return self.tmpl("upd_clus" + ("/lwt" if lwt else ""), text, ug + sg + kg + cg)

    def del_using(self):
        """Deletes mostly at the client's time; with a timestamp, one in the past (a delete far
        in the future would empty a range for the rest of the run)."""
        r = self.rng
        if r.random() < 0.25:
            return " USING TIMESTAMP %s", [lambda: r.choice([1, r.randint(1, 10 ** 12)])]
        return "", []

    def f_del_clus(self):
        r = self.rng
        lwt = r.random() < 0.2
        what = r.choice(["", "", "v ", "v, n ", "st "])
        use, ug = ("", []) if lwt else self.del_using()
        if lwt:
            kw, kg = self.clus_key_where(True)
            cond, cg = r.choice([(" IF EXISTS", []), (" IF v = %s", [lambda: r.choice(["a", "b"])])])
        else:
            kw, kg = r.choice([
                ("p = %s", [self.p]), ("p IN %s", [lambda: self.in_list(self.p)]),
                ("p = %s AND c1 = %s", [self.p, self.c1]),
                ("p = %s AND c1 > %s", [self.p, self.c1]),
                ("p = %s AND c1 >= %s AND c1 < %s", [self.p, self.c1, self.c1]),
                ("p = %s AND c1 IN %s", [self.p, lambda: self.in_list(self.c1)]),
                ("p = %s AND (c1, c2) >= %s", [self.p, lambda: self.tuple_of(["c1", "c2"])]),
                ("p = %s AND c1 = %s AND c2 = %s AND c3 = %s", [self.p, self.c1, self.c2, self.c3]),
            ])
            cond, cg = "", []
        text = f"DELETE {what}FROM t_clus{use} WHERE {kw}{cond}"
        return self.tmpl("del_clus" + ("/lwt" if lwt else ""), text, ug + kg + cg)

    def tuple_of(self, cols, arity=None):
        """A tuple value for `(cols...)`: the right arity mostly, sometimes one fewer or more."""
        gens = {"c1": self.c1, "c2": self.c2, "c3": self.c3}
        n = len(cols) if arity is None else arity
        vals = [gens[c]() for c in cols[:n]]
        while len(vals) < n:
            vals.append(self.rng.randint(0, 3))
        return seq(vals)

    def clus_rel(self):
        """A clustering restriction of t_clus (text, generators), or none."""
        r = self.rng
        x = r.random()
        if x < 0.15:
            return "", []
        if x < 0.25:
            return " AND c1 = %s", [self.c1]
        if x < 0.4:
            return " AND c1 IN %s", [lambda: self.in_list(self.c1)]
        if x < 0.47:
            return " AND c1 > %s AND c1 <= %s", [self.c1, self.c1]
        if x < 0.52:
            return " AND c1 = %s AND c2 IN %s", [self.c1, lambda: self.in_list(self.c2)]
        # tuple relations, of every arity, sometimes the wrong one
        n = r.randint(1, 3)
        cols = ["c1", "c2", "c3"][:n]
        names = "(" + ", ".join(cols) + ")"

        def arity():
            y = r.random()
            return n if y < 0.75 else r.choice([max(1, n - 1), n + 1, n + 2]) if y < 0.95 else 0

        op = r.choice(["=", ">", ">=", "<", "<=", "IN", "IN", "IN", "slice"])
        if op == "IN":
            single = r.random() < 0.4
            return f" AND {names} IN %s", [
                lambda: seq(self.tuple_of(cols, arity()) for _ in range(1 if single else
                                                                         r.choice([0, 2, 3])))]
        if op == "slice":
            return f" AND {names} > %s AND {names} < %s", [
                lambda: self.tuple_of(cols, arity()), lambda: self.tuple_of(cols, arity())]
        if r.random() < 0.5:
            # literal tuple written in the text: (%s, %s) with one value per element
            m = arity() if r.random() < 0.3 else n
            m = max(m, 1)
            gens = {"c1": self.c1, "c2": self.c2, "c3": self.c3}
            vg = [gens.get(c, lambda: r.randint(0, 3)) for c in (cols + ["c1", "c1"])[:m]]
            return f" AND {names} {op} (" + ", ".join(["%s"] * m) + ")", vg
        return f" AND {names} {op} %s", [lambda: self.tuple_of(cols, arity())]

    def part_rel(self):
        r = self.rng
        if r.random() < 0.45:
            single = r.random() < 0.6
            return "p IN %s", [lambda: self.in_list(self.p, multi=None if not single else False)]
        return "p = %s", [self.p]

    def f_sel_clus(self):
        r = self.rng
        sel = r.choice(["*", "p, c1, c2, c3, v", "v, n, st", "c1, c2", "JSON p, c1, v",
                        f"n AS {self.new_alias()}", "DISTINCT p, st"])
        pw, pg = self.part_rel()
        cw, cg = ("", []) if sel.startswith("DISTINCT") else self.clus_rel()
        order = " ORDER BY c1 DESC" if r.random() < 0.25 and not sel.startswith("DISTINCT") else ""
        lim, lg = self.limit()
        allow = " ALLOW FILTERING" if r.random() < 0.1 else ""
        text = f"SELECT {sel} FROM t_clus WHERE {pw}{cw}{order}{lim}{allow}"
        fetch = self.fetch_small if r.random() < 0.4 else None
        return self.tmpl("sel_clus", text, pg + cg + lg, fetch=fetch)

    def f_agg(self):
        r = self.rng
        aggs = r.choice(["count(*)", "count(*), max(n), min(v), sum(n), avg(n)", "max(c3), min(c2)",
                         "p, count(n)", "p, c1, sum(n), avg(c3)", "count(1)"])
        x = r.random()
        if x < 0.5:
            where, g = "WHERE p IN %s", [lambda: self.in_list(self.p)]
        elif x < 0.8:
            where, g = "WHERE p = %s", [self.p]
        else:
            where, g = "WHERE c1 = %s ALLOW FILTERING", [self.c1]
        group = r.choice(["", "", " GROUP BY p", " GROUP BY p, c1"])
        if "ALLOW" in where and group:
            where = where.replace(" ALLOW FILTERING", "")
            group += " ALLOW FILTERING"
        text = f"SELECT {aggs} FROM t_clus {where}{group}"
        if r.random() < 0.25:   # aggregates of every type over t_all
            col = r.choice([c for c in self.schema["A"]["t_all"].regular() if c.startswith("c_")
                            and c not in ("c_duration", "c_blob", "c_boolean", "c_inet")])
            fn = r.choice(["max", "min", "sum", "avg", "count"])
            kw, kg = r.choice([("k IN %s", [lambda: self.in_list(self.k_all)]),
                               ("k = %s", [self.k_all])])
            text, g = f"SELECT {fn}({col}), count(*) FROM t_all WHERE {kw}", kg
        fetch = self.fetch_small if r.random() < 0.3 else None
        return self.tmpl("agg", text, g, fetch=fetch)

    def f_page(self):
        """Paging with ORDER BY DESC and `p IN (x)`: one partition is an equality."""
        r = self.rng
        order = r.choice([" ORDER BY c1 DESC", " ORDER BY c1 DESC, c2 ASC", " ORDER BY c1 ASC"])
        single = r.random() < 0.8
        cw, cg = r.choice([("", []), (" AND c1 >= %s", [self.c1]),
                           (" AND (c1, c2) < %s", [lambda: self.tuple_of(["c1", "c2"])])])
        text = f"SELECT p, c1, c2, c3, v FROM t_clus WHERE p IN %s{cw}{order}"
        return self.tmpl("page", text, [lambda: self.in_list(self.p, multi=not single)] + cg,
                         fetch=lambda: r.choice([1, 2, 3]))

    def kt_val(self, col):
        return lambda: self.rng.choice(self.kt_pools[col])

    def f_ins_kt(self):
        r = self.rng
        text = (f"INSERT INTO t_ktypes (p, {', '.join(KT_CK)}, v) VALUES "
                f"({', '.join(['%s'] * (len(KT_CK) + 2))})")
        return self.tmpl("ins_kt", text, [lambda: r.choice(["p0", "p1", "p2"])] +
                         [self.kt_val(c) for c in KT_CK] + [self.v.varint])

    def f_sel_kt(self):
        r = self.rng
        n = r.randint(1, len(KT_CK))
        cols = KT_CK[:n]
        names = "(" + ", ".join(cols) + ")"

        def tup():
            y = r.random()
            m = n if y < 0.8 else max(0, n + r.choice([-1, 1, 2]))
            vals = [self.kt_val(c)() for c in cols[:m]]
            while len(vals) < m:
                vals.append(0)
            return seq(vals)

        op = r.choice(["=", "IN", "IN", ">", "<=", "eqs"])
        if op == "IN":
            rel, g = f"{names} IN %s", [lambda: seq(tup() for _ in range(r.choice([1, 1, 2, 3])))]
        elif op == "eqs":
            rel = " AND ".join(f"{c} = %s" for c in cols[:-1]) + \
                (" AND " if n > 1 else "") + f"{cols[-1]} IN %s"
            g = [self.kt_val(c) for c in cols[:-1]] + [
                lambda: self.in_list(self.kt_val(cols[-1]))]
        else:
            rel, g = f"{names} {op} %s", [tup]
        pw, pg = r.choice([("p = %s", [lambda: r.choice(["p0", "p1", "p2"])]),
                           ("p IN %s", [lambda: self.in_list(lambda: r.choice(["p0", "p1"]))])])
        text = f"SELECT * FROM t_ktypes WHERE {pw} AND {rel}"
        return self.tmpl("sel_kt", text, pg + g)

    def f_comp(self):
        r = self.rng
        v = self.v
        a = lambda: r.randint(0, 2)
        b = lambda: r.choice(["x", "y", ""])
        d = lambda: r.choice(self.comp_d)
        if r.random() < 0.4:
            text = "INSERT INTO t_comp (a, b, d, c, v) VALUES (%s, %s, %s, %s, %s)"
            return self.tmpl("comp", text, [a, b, d, lambda: r.randint(0, 3), lambda: v.text()])
        parts = []
        gens = []
        for name, g in (("a", a), ("b", b), ("d", d)):
            if r.random() < 0.4:
                parts.append(f"{name} IN %s")
                gens.append(lambda g=g: self.in_list(g))
            else:
                parts.append(f"{name} = %s")
                gens.append(g)
        if r.random() < 0.4:
            parts.append("c IN %s")
            gens.append(lambda: self.in_list(lambda: r.randint(0, 3)))
        kind = r.choice(["SELECT * FROM", "SELECT count(*) FROM", "DELETE FROM"])
        text = f"{kind} t_comp WHERE " + " AND ".join(parts)
        if kind.startswith("SELECT") and r.random() < 0.3:
            text += " ORDER BY c DESC"
        return self.tmpl("comp", text, gens)

    def f_cnt(self):
        r = self.rng
        v = self.v
        k = lambda: r.randint(0, 4)
        c = lambda: r.choice(["a", "b", "c"])
        x = r.random()
        if x < 0.6:
            sets = r.choice([("n = n + %s", 1), ("n = n - %s", 1), ("n = n -%s", 1),
                             ("n += %s, m -= %s", 2), ("n = n + %s, m = m + %s", 2),
                             ("m = %s + m", 1)])
            where = r.choice(["k = %s AND c = %s", "k IN %s AND c = %s", "k = %s AND c IN %s"])
            wg = [lambda: self.in_list(k, multi=r.random() < 0.3) if "k IN" in where else k(),
                  lambda: self.in_list(c, multi=r.random() < 0.3) if "c IN" in where else c()]

            def amount():
                if "-%s" in sets[0] and r.random() < 0.8:
                    return r.randint(0, 50)   # `n = n -5`: INTEGER(-5) after a column
                return v.int_of(64) if r.random() < 0.3 else r.randint(-20, 20)

            return self.tmpl("cnt", f"UPDATE t_cnt SET {sets[0]} WHERE {where}",
                             [amount] * sets[1] + wg)
        if x < 0.95:
            where, g = r.choice([("k = %s", [k]), ("k IN %s", [lambda: self.in_list(k)]),
                                 ("k = %s AND c = %s", [k, c])])
            return self.tmpl("cnt", f"SELECT c, n, m FROM t_cnt WHERE {where}", g)
        return self.tmpl("cnt", "DELETE FROM t_cnt WHERE k = %s AND c = %s", [k, c], uses=2)

    def kv_template(self, table=None, unique=True):
        """A statement on one of the tables of USE switches (kv and kv2 in both keyspaces with
        other rows / types, only_a, only_b). `unique`: a shape never seen before."""
        r = self.rng
        table = table or r.choice(["kv", "kv", "kv2", "only_a", "only_b"])
        v = self.v
        val = {"kv": lambda: v.text(), "kv2": lambda: r.choice([v.text(), v.int_of(32)]),
               "only_a": lambda: v.text(), "only_b": lambda: v.text()}[table]
        x = r.random()
        if x < 0.6:
            a = self.new_alias() if unique else "v"
            w, g = r.choice([("k = %s", [self.small_k]),
                             ("k IN %s", [lambda: self.in_list(self.small_k)])])
            return self.tmpl("kv-sel", f"SELECT k, v AS {a} FROM {table} WHERE {w}", g)
        # Writes have no alias: a fresh shape is a fresh combination of quoted identifiers,
        # column order and USING clause.
        n = self.new_variant() if unique else r.randrange(64)
        tname = f'"{table}"' if n & 1 else table
        kname = '"k"' if n & 2 else "k"
        vname = '"v"' if n & 4 else "v"
        use, ug = [("", []), (" USING TTL %s", [self.ttl]),
                   (" USING TIMESTAMP %s", [self.tstamp_edge])][(n >> 4) % 3]
        if x < 0.85:
            if n & 8:
                text = f"INSERT INTO {tname} ({vname}, {kname}) VALUES (%s, %s){use}"
                gens = [val, self.small_k]
            else:
                text = f"INSERT INTO {tname} ({kname}, {vname}) VALUES (%s, %s){use}"
                gens = [self.small_k, val]
            return self.tmpl("kv-ins", text, gens + ug)
        text = f"UPDATE {tname}{use} SET {vname} = %s WHERE {kname} = %s"
        return self.tmpl("kv-upd", text, ug + [val, self.small_k])

    def new_variant(self):
        self.variant = getattr(self, "variant", -1) + 1
        return self.variant

    def f_kvish(self):
        r = self.rng
        if r.random() < 0.25:   # qualified names, the other keyspace, and JSON
            v = self.v
            return r.choice([
                self.tmpl("kv-q", "INSERT INTO @B@.kv (k, v, n) VALUES (%s, %s, %s)",
                          [self.small_k, lambda: v.text(), lambda: v.int_of(64)]),
                self.tmpl("kv-q", "SELECT * FROM @B@.kv WHERE k IN %s",
                          [lambda: self.in_list(self.small_k)]),
                self.tmpl("kv-q", "SELECT * FROM @A@.kv WHERE k = %s", [self.small_k]),
                self.tmpl("kv-q", "INSERT INTO @B@.kv2 (k, v) VALUES (%s, %s)",
                          [self.small_k, lambda: v.int_of(32)]),
                self.tmpl("kv-json", "INSERT INTO kv JSON %s",
                          [lambda: '{"k": %d, "v": %s, "n": %d}' % (
                              self.small_k(), r.choice(['"j"', 'null', '"\\u00e9 \'q\'"']),
                              r.randint(-5, 5))]),
                self.tmpl("kv-json", "INSERT INTO kv JSON %s DEFAULT UNSET",
                          [lambda: '{"k": %d, "n": %d}' % (self.small_k(), r.randint(-5, 5))]),
            ])
        return self.kv_template(unique=False)

    def churn_val(self, col):
        t = self.schema["A"]["churn"].cols.get(col, "int")
        return lambda: self.v.of(parse_type(t), nullable=col != "k")

    def f_churn(self):
        r = self.rng
        x = r.random()
        kg = self.churn_k
        if x < 0.35:
            return self.tmpl("churn", "INSERT INTO churn (k, v) VALUES (%s, %s)",
                             [kg, lambda: self.churn_val("v")()])
        if x < 0.45:
            return self.tmpl("churn", "INSERT INTO churn (k, v, w) VALUES (%s, %s, %s)",
                             [kg, lambda: self.churn_val("v")(), lambda: self.v.text()])
        if x < 0.6:
            return self.tmpl("churn", "UPDATE churn SET v = %s WHERE k = %s",
                             [lambda: self.churn_val("v")(), kg])
        if x < 0.8:
            return self.tmpl("churn", "SELECT * FROM churn WHERE k = %s", [kg])
        return self.tmpl("churn", "SELECT v, k FROM churn WHERE k IN %s",
                         [lambda: self.in_list(kg)])

    def churn_k(self):
        t = self.schema["A"]["churn"].cols["k"]
        if t == "text":
            return self.rng.choice(["a", "b", "c"])
        return self.rng.randint(0, 5)

    def f_alt(self):
        r = self.rng
        t = self.schema["A"]["alt"]
        x = r.random()
        k = lambda: r.randint(0, 5)
        if x < 0.4 and t.regular():
            cols = r.sample(t.regular(), r.randint(1, len(t.regular())))
            types = [t.cols[c] for c in cols]
            text = f"INSERT INTO alt (k, {', '.join(cols)}) VALUES (%s{', %s' * len(cols)})"
            return self.tmpl("alt", text, [k] + [lambda ty=ty: self.v.of(parse_type(ty))
                                                 for ty in types])
        if x < 0.8:
            w, g = r.choice([("k = %s", [k]), ("k IN %s", [lambda: self.in_list(k)])])
            return self.tmpl("alt", f"SELECT * FROM alt WHERE {w}", g)
        c = r.choice(list(t.cols))
        return self.tmpl("alt", f"SELECT k, {c} FROM alt WHERE k = %s", [k])

    def batch_children(self):
        r = self.rng
        v = self.v
        p = self.p()
        kinds = [
            ("INSERT INTO t_clus (p, c1, c2, c3, v, n) VALUES (%s, %s, %s, %s, %s, %s)",
             lambda: [p, self.c1(), self.c2(), self.c3(), v.text(), v.int_of(32)]),
            ("UPDATE t_clus SET v = %s WHERE p = %s AND c1 = %s AND c2 = %s AND c3 = %s",
             lambda: [v.text(), p, self.c1(), self.c2(), self.c3()]),
            ("DELETE FROM t_clus WHERE p = %s AND c1 = %s",
             lambda: [p, self.c1()]),
            ("INSERT INTO kv (k, v, n) VALUES (%s, %s, %s)",
             lambda: [self.small_k(), v.text(), v.int_of(64)]),
            ("UPDATE t_all SET c_int = %s, l = l + %s WHERE k = %s",
             lambda: [v.int_of(32), v.of(parse_type("list<int>")), self.k_all()]),
            ("INSERT INTO t_all (k, c_decimal, c_timestamp, u) VALUES (%s, %s, %s, %s)",
             lambda: [self.k_all(), v.decimal(), v.timestamp(), v.of(parse_type("frozen<addr>"))]),
        ]
        return [r.choice(kinds) for _ in range(r.randint(1, 4))]

    def f_batch_text(self):
        r = self.rng
        x = r.random()
        if x < 0.2:   # counter batch
            text = ("BEGIN COUNTER BATCH UPDATE t_cnt SET n = n + %s WHERE k = %s AND c = %s; "
                    "UPDATE t_cnt SET m = m - %s WHERE k = %s AND c = %s; APPLY BATCH")
            g = [lambda: r.randint(-5, 5), lambda: r.randint(0, 4), lambda: r.choice("abc")] * 2
            return self.tmpl("batch-text", text, g)
        if x < 0.35:  # conditional batch on one partition
            text = ("BEGIN BATCH INSERT INTO t_clus (p, c1, c2, c3, v) VALUES (%s, %s, %s, %s, %s) "
                    "IF NOT EXISTS; UPDATE t_clus SET n = %s WHERE p = %s AND c1 = %s AND c2 = %s "
                    "AND c3 = %s IF v = %s; APPLY BATCH")
            p = lambda: 3
            g = [p, self.c1, self.c2, self.c3, lambda: self.v.text(), lambda: r.randint(0, 9),
                 p, self.c1, self.c2, self.c3, lambda: r.choice(["a", "b", None])]
            return self.tmpl("batch-text/lwt", text, g)
        children = self.batch_children()
        head = r.choice(["BEGIN BATCH", "BEGIN UNLOGGED BATCH", "BEGIN BATCH USING TIMESTAMP %s",
                         "BEGIN UNLOGGED BATCH USING TIMESTAMP %s"])
        text = head + " " + " ".join(t + ";" for t, _ in children) + " APPLY BATCH"
        gens = [self.tstamp] if "%s" in head else []

        def values():
            out = [g() for g in gens]
            for _, cg in children:
                out.extend(cg())
            return out

        return Template("batch-text", text, values, r.choice([3, 4, 5]))

    def f_batch_driver(self):
        r = self.rng
        children = self.batch_children()
        bt = r.choice(["LOGGED", "UNLOGGED"])
        return Template("batch-driver", "", lambda: [cg() for _, cg in children],
                        r.choice([3, 4, 5]), kind="batch", batch_type=bt,
                        texts=[t for t, _ in children])

    def f_lwt(self):
        """LWT forms with the key written as a single-element IN."""
        r = self.rng
        v = self.v
        opts = [
            ("UPDATE t_all SET c_text = %s WHERE k IN %s IF EXISTS",
             [lambda: v.text(), lambda: self.in_list(self.k_all, multi=r.random() < 0.15)]),
            ("UPDATE t_all SET c_int = %s WHERE k IN %s IF c_int = %s",
             [lambda: r.randint(-3, 3), lambda: self.in_list(self.k_all, multi=False),
              lambda: r.randint(-3, 3)]),
            ("DELETE FROM t_all WHERE k IN %s IF EXISTS",
             [lambda: self.in_list(self.k_all, multi=False)]),
            ("UPDATE t_clus SET v = %s WHERE p = %s AND c1 IN %s AND c2 = %s AND c3 = %s IF EXISTS",
             [lambda: v.text(), self.p, lambda: self.in_list(self.c1, multi=r.random() < 0.15),
              self.c2, self.c3]),
            ("UPDATE t_clus SET st = %s WHERE p IN %s IF st = %s",
             [lambda: r.randint(-5, 5), lambda: self.in_list(self.p, multi=False),
              lambda: r.choice([None, r.randint(-5, 5)])]),
            ("UPDATE t_clus SET n = %s WHERE p = %s AND c1 = %s AND c2 = %s AND c3 = %s IF n IN %s",
             [lambda: r.randint(0, 3), self.p, self.c1, self.c2, self.c3,
              lambda: self.in_list(lambda: r.randint(0, 3))]),
            ("INSERT INTO t_all (k, c_text) VALUES (%s, %s) IF NOT EXISTS",
             [self.k_all, lambda: v.text()]),
            ("UPDATE t_all SET c_int = %s WHERE k = %s IF c_int IN %s AND c_text != %s",
             [lambda: r.randint(-3, 3), self.k_all, lambda: self.in_list(lambda: r.randint(-3, 3)),
              lambda: v.text()]),
        ]
        text, g = r.choice(opts)
        return self.tmpl("lwt", text, g)

    def f_misc(self):
        r = self.rng
        v = self.v
        opts = [
            # literals in the selection clause stay literals
            ("SELECT k, %s FROM kv WHERE k = %s", [lambda: r.choice([1, "x", 2.5]), self.small_k]),
            ("SELECT k, c_int + %s AS s FROM t_all WHERE k = %s", [lambda: r.randint(-3, 3),
                                                                    self.k_all]),
            ("SELECT k FROM t_all WHERE k = %s AND c_int = %s - 1 ALLOW FILTERING",
             [self.k_all, lambda: r.randint(-3, 3)]),
            ("UPDATE t_all SET c_bigint = %s WHERE k = %s AND k = %s",
             [lambda: v.int_of(64), self.k_all, self.k_all]),
            ("SELECT * FROM t_all WHERE k IN %s AND k IN %s", [lambda: self.in_list(self.k_all),
                                                               lambda: self.in_list(self.k_all)]),
            ("SELECT c_blob, c_text FROM t_all WHERE k = %s AND c_blob = %s ALLOW FILTERING",
             [self.k_all, lambda: r.choice([b"", b"\x00", v.blob()])]),
            ("SELECT * FROM t_clus WHERE p = %s AND (c1, c2) IN ((%s, %s), (%s))",
             [self.p, self.c1, self.c2, self.c1]),
            ("SELECT * FROM t_clus WHERE p = %s AND (c1, c2) = (%s, %s, %s)",
             [self.p, self.c1, self.c2, self.c3]),
            ("SELECT * FROM t_clus WHERE p = %s AND (c1, c2, c3) > (%s)",
             [self.p, self.c1]),
        ]
        text, g = r.choice(opts)
        return self.tmpl("misc", text, g)

    # episodes ------------------------------------------------------------------------------
    def use(self, slot):
        self.cur = slot
        return Step(f"USE @{slot}@", None, None, "use", "use")

    def use_episode(self):
        """USE B, a few statements on tables of both / one keyspace, USE A."""
        r = self.rng
        out = [self.use("B")]
        kvs = [t for t in self.pool if t.tag.startswith("kv-")]
        for _ in range(r.randint(2, 6)):
            if kvs and r.random() < 0.6:
                t = r.choice(kvs)
            elif r.random() < 0.15 and self.pool:
                t = r.choice(self.pool)        # anything: A's tables do not exist in B
            else:
                t = self.kv_template(unique=False)
                self.pool.append(t)
            out.append(self._use_template(t))
        out.append(self.use("A"))
        return out

    def race_episode(self):
        """A chain of keyspace switches, each right after a new shape's first sighting (the
        proxy prepares a shape in the background after its first sighting, on the client's
        connection: the PREPARE may run after the USE, in the other keyspace), on tables that
        exist in the other keyspace (so that a PREPARE run there succeeds); then every shape
        again in the keyspace of its first sighting (where such a PREPARE would be used), half
        of them in the other one too, and back to A."""
        r = self.rng
        firsts = []
        out = []
        for _ in range(r.randint(3, 8)):
            slot = self.cur
            table = r.choice(["kv", "kv2", "only_b"] if slot == "A" else ["kv", "kv2", "only_a"])
            t = self.kv_template(table, unique=True)
            out.append(t.step())
            firsts.append((t, slot))
            out.append(self.use("B" if slot == "A" else "A"))
        here = self.cur
        for slot in (here, "B" if here == "A" else "A"):
            if self.cur != slot:
                out.append(self.use(slot))
            for t, s in firsts:
                if s == slot or r.random() < 0.5:
                    out.append(t.step())
        if self.cur != "A":
            out.append(self.use("A"))
        for t, _ in firsts:   # some of them recur later
            if r.random() < 0.25:
                t.uses = r.randint(2, 4)
                self.pool.append(t)
        return out

    def race_batch_episode(self):
        """A race with a slow PREPARE: a text batch of many statements on a table of both
        keyspaces, seen first with a bad first value (the server refuses the QUERY at once, while
        preparing the shape takes milliseconds), then `USE B` right away; the same shape in B
        (its first sighting there), again in B, back in A. Reads of both keyspaces show where
        the writes went."""
        r = self.rng
        n = self.new_variant()
        table = "kv" if n % 2 else "kv2"
        count = 16 + (n // 2) % 40
        kinds = [("UPDATE {t} SET v = %s WHERE k = %s;", False),
                 ("INSERT INTO {t} (k, v) VALUES (%s, %s);", True)]
        children = [kinds[(n >> (j % 5)) & 1] for j in range(count)]
        text = ("BEGIN UNLOGGED BATCH " + " ".join(c.format(t=table) for c, _ in children)
                + " APPLY BATCH")
        tag = n

        def values(bad):
            out = []
            for j, (_, key_first) in enumerate(children):
                k = (tag + j) % 10
                v = r.choice([0, -1]) if bad and j == 0 else f"b{tag}.{j}.{r.randint(0, 99)}"
                out.extend([k, v] if key_first else [v, k])
            return tuple(out)

        check = Step(f"SELECT k, v FROM {table} WHERE k IN %s", (seq(range(10)),), None, "race")
        out = [Step(text, values(r.random() < 0.8), None, "race-batch"), self.use("B")]
        out += [Step(text, values(False), None, "race-batch") for _ in range(3)] + [check]
        out.append(self.use("A"))
        out += [Step(text, values(False), None, "race-batch") for _ in range(2)] + [check]
        return out

    def ddl_episode(self, which):
        r = self.rng
        a = self.schema["A"]
        if which == "churn":
            variant = r.choice(CHURN_VARIANTS)
            a["churn"] = _t(variant, ["k"])
            return [Step("DROP TABLE churn", None, None, "ddl", "ddl"),
                    Step(a["churn"].ddl("@A@", "churn"), None, None, "ddl", "ddl")]
        t = a["alt"]
        if len(t.regular()) >= 2 and r.random() < 0.45:
            c = r.choice(t.regular())
            del t.cols[c]
            return [Step(f"ALTER TABLE alt DROP {c}", None, None, "ddl", "ddl")]
        self.alt_next += 1
        name, typ = f"x{self.alt_next}", r.choice(ALT_TYPES)
        t.cols[name] = typ
        return [Step(f"ALTER TABLE alt ADD {name} {typ}", None, None, "ddl", "ddl")]

    def _use_template(self, t):
        t.uses -= 1
        if t.uses <= 0 and t in self.pool:
            self.pool.remove(t)
        return t.step()

    def steps(self):
        r = self.rng
        out: List[Step] = []
        n_ddl = max(2, min(8, self.count // 150))
        ddl_at = sorted({int(self.count * (i + 1) / (n_ddl + 1)) for i in range(n_ddl)})
        ddl_kinds = ["churn", "alt"] * n_ddl
        while len(out) < self.count:
            if ddl_at and len(out) >= ddl_at[0]:
                ddl_at.pop(0)
                out.extend(self.ddl_episode(ddl_kinds.pop(0)))
                continue
            x = r.random()
            if x < 0.045:
                out.extend(self.race_episode())
                continue
            if x < 0.05:
                out.extend(self.race_batch_episode())
                continue
            if x < 0.065:
                out.extend(self.use_episode())
                continue
            # a new template now and then, otherwise one of the pool: shapes recur
            if not self.pool or r.random() < 0.12 or len(self.pool) < 6:
                fam = r.choices(self.families, weights=self._weights)[0][1]
                self.pool.append(fam())
            out.append(self._use_template(r.choice(self.pool)))
        return out

    def final_tables(self):
        """(slot, table) of every table at the end, for the full comparison."""
        return [(s, t) for s, tables in self.schema.items() for t in tables]

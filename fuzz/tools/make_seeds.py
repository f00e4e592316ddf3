#!/usr/bin/env python3
"""Writes the hand-made seed corpora under fuzz/seeds/<target>/ (committed, small).

- decode: the golden protocol captures of crates/protocol/tests/golden under 4 KiB.
- literal: one seed per distinct (type, literal) of the server's literal table
  (crates/protocol/src/types/encode/testdata/cassandra-5.0.6-literals.tsv), the type written
  as a Cassandra class name, as the target reads it: `<class>\\n<time zone>\\n<literal>`.
- normalize: CQL statements of every kind the normalizer knows, with literals of every form.
- rewrite: the same statements, each followed by NUL and a few bytes of choices.
- config: the configuration examples of CONFIG.md and a few wrong ones.

The structure-aware targets (segment, edits, routing) take their seeds from a
campaign's corpus instead: `scripts/fuzz.sh seeds` minimizes it into fuzz/seeds/<target>/.
Run from the repository root: `python3 fuzz/tools/make_seeds.py`.
"""
import hashlib
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEEDS = os.path.join(ROOT, "fuzz", "seeds")


def write(target, data):
    d = os.path.join(SEEDS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    name = hashlib.sha1(data).hexdigest()[:16]
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


SIMPLE = {
    "ascii": "AsciiType", "bigint": "LongType", "blob": "BytesType", "boolean": "BooleanType",
    "counter": "CounterColumnType", "decimal": "DecimalType", "double": "DoubleType",
    "float": "FloatType", "int": "Int32Type", "timestamp": "TimestampType", "uuid": "UUIDType",
    "text": "UTF8Type", "varchar": "UTF8Type", "varint": "IntegerType",
    "timeuuid": "TimeUUIDType", "inet": "InetAddressType", "date": "SimpleDateType",
    "time": "TimeType", "smallint": "ShortType", "tinyint": "ByteType",
    "duration": "DurationType",
}


def hexname(s):
    return s.encode().hex()


U = "UserType(ks,%s,%s:Int32Type,%s:UTF8Type,%s:ListType(Int32Type))" % (
    hexname("u"), hexname("a"), hexname("b"), hexname("c"))
P = "UserType(ks,%s,%s:DoubleType,%s:%s)" % (hexname("p"), hexname("x"), hexname("Y"), U)


class TypeParser:
    """CQL type text (`map<text, frozen<list<int>>>`) to a class name."""

    def __init__(self, s):
        self.s, self.i = s, 0

    def ws(self):
        while self.i < len(self.s) and self.s[self.i] == " ":
            self.i += 1

    def word(self):
        self.ws()
        m = re.compile(r"[A-Za-z_0-9]+").match(self.s, self.i)
        self.i = m.end()
        return m.group(0)

    def eat(self, c):
        self.ws()
        assert self.s[self.i] == c, (self.s, self.i, c)
        self.i += 1

    def peek(self, c):
        self.ws()
        return self.i < len(self.s) and self.s[self.i] == c

    def type(self):
        name = self.word()
        if name in SIMPLE:
            return SIMPLE[name]
        if name == "u":
            return U
        if name == "p":
            return P
        self.eat("<")
        if name == "frozen":
            t = self.type()
        elif name in ("list", "set"):
            t = "%sType(%s)" % ("List" if name == "list" else "Set", self.type())
        elif name == "map":
            k = self.type()
            self.eat(",")
            t = "MapType(%s,%s)" % (k, self.type())
        elif name == "tuple":
            items = [self.type()]
            while self.peek(","):
                self.eat(",")
                items.append(self.type())
            t = "TupleType(%s)" % ",".join(items)
        elif name == "vector":
            e = self.type()
            self.eat(",")
            t = "VectorType(%s,%s)" % (e, self.word())
        else:
            raise ValueError(name)
        self.eat(">")
        return t


def literal_seeds():
    path = os.path.join(ROOT, "crates/protocol/src/types/encode/testdata/cassandra-5.0.6-literals.tsv")
    seen = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 2:
                continue
            ty, lit = parts[0], parts[1]
            cls = TypeParser(ty).type()
            # Timestamps without a zone need the server's: give some of them one.
            zone = "+02:00" if ty == "timestamp" and len(seen) % 3 == 0 else ""
            seed = "%s\n%s\n%s" % (cls, zone, lit)
            if seed not in seen:
                seen.add(seed)
                write("literal", seed)


def decode_seeds():
    d = os.path.join(ROOT, "crates/protocol/tests/golden")
    for name in sorted(os.listdir(d)):
        p = os.path.join(d, name)
        if name.endswith(".bin") and 0 < os.path.getsize(p) <= 4096:
            with open(p, "rb") as f:
                write("decode", f.read())


STATEMENTS = [
    "SELECT * FROM ks.t WHERE k = 1",
    "SELECT a, b FROM t WHERE k = 'x' AND c > 3.5 LIMIT 10",
    "select * from \"Ks\".\"T\" where k in (1, 2, 3) allow filtering",
    "SELECT * FROM t WHERE k = ? AND c = :name",
    "SELECT * FROM t WHERE token(k) > -9223372036854775808",
    "SELECT json * FROM t WHERE k = 0x00ff",
    "SELECT count(*) FROM t WHERE k = 6a3c1b0e-2f6d-4c5e-9b1a-0123456789ab",
    "INSERT INTO t (k, v) VALUES (1, 'a''b')",
    "INSERT INTO ks.t (k, l, s, m) VALUES (1, [1, 2], {'a'}, {'k': 1.5e10}) USING TTL 86400",
    "INSERT INTO t (k, tup, u) VALUES (-0, (1, 'x'), {a: 1, \"B\": null}) IF NOT EXISTS",
    "INSERT INTO t JSON '{\"k\": 1}'",
    "UPDATE t USING TIMESTAMP 1234 SET v = v + 1, d = 1h30m WHERE k = $$dollar$$",
    "UPDATE ks.t SET m['a'] = 2 WHERE k = 1 IF v = NaN",
    "DELETE FROM t WHERE k = -Infinity",
    "DELETE v FROM t WHERE k = true IF EXISTS",
    "BEGIN BATCH INSERT INTO t (k) VALUES (1); UPDATE t SET v = 2 WHERE k = 3; APPLY BATCH",
    "BEGIN UNLOGGED BATCH USING TIMESTAMP 5 DELETE FROM t WHERE k = 1 APPLY BATCH",
    "USE ks",
    "USE \"Quoted\"",
    "CREATE TABLE t (k int PRIMARY KEY)",
    "-- comment\nSELECT /* inline */ * FROM t WHERE k = 1 // end",
    "SELECT * FROM t WHERE k = P1Y2M3DT4H5M6S AND d = 2024-01-02",
    "SELECT * FROM t WHERE (a, b) > (1, 2) PER PARTITION LIMIT 2",
    "SELECT * FROM system.local WHERE key = 'local'",
    "SELECT peer, rpc_address FROM system.peers",
]


def normalize_seeds():
    for s in STATEMENTS:
        write("normalize", s)


CONFIGS = [
    'upstream = "cassandra.db.svc.cluster.local:9042"\nadmin = "0.0.0.0:9100"\n',
    'listen = "127.0.0.1:9043"\nupstream = "10.0.0.1:9042,10.0.0.2:9042"\nrewrite = true\n'
    'admission_threshold = 2\ncontrol_window_ms = 1000\ncache_entries = 10000\n'
    'exclude = ["system.", "FROM audit_log"]\nrouting = true\nlog = "info"\n',
    'server_time_zone = "+02:00"\ncontrol_fraction = 0.05\n'
    'server_metrics_url = "http://{host}:7070/metrics"\n',
    'routing_local_dc = "dc1"\nworker_threads = 2\nmax_frame_bytes = 268435456\n',
    'tls_cert = "/etc/autoprep/tls/tls.crt"\ntls_key = "/etc/autoprep/tls/tls.key"\n',
    'lisen = "x"\ncache_entries = -1\n[nested]\nkey = 1\n',
    'advertise_address = "10.1.2.3"\nupstream_tls = true\n',
]


def rewrite_seeds():
    # The statement, NUL, then the fuzzer's choices (version, keyspace, flags, types, ...):
    # a few fixed patterns, the rest is the fuzzer's to find.
    tails = [b"", b"\x01\x01\x00\x00\x00\x00\x01\x00", b"\x02\x01\x01\x00\x01\x00\x01\x00\x08\x09"]
    for i, st in enumerate(STATEMENTS):
        write("rewrite", st.encode() + b"\0" + tails[i % len(tails)])


def config_seeds():
    for c in CONFIGS:
        write("config", c)


if __name__ == "__main__":
    decode_seeds()
    literal_seeds()
    normalize_seeds()
    rewrite_seeds()
    config_seeds()
    total = 0
    for dirpath, _, files in os.walk(SEEDS):
        for f in files:
            total += os.path.getsize(os.path.join(dirpath, f))
    print("seeds: %d bytes" % total, file=sys.stderr)

#!/usr/bin/env python3
"""Capture golden CQL native protocol byte vectors from a real server.

Talks to the server over raw sockets (no driver) and writes one file per captured frame into
crates/protocol/tests/golden/: the exact bytes that went over the wire, a whole envelope
(v3/v4, and v5 before framing starts) or a whole v5 segment (header, payload, trailer). A
README.md beside them lists every file with the request that produced it.

    python3 tests/golden/capture.py --host 127.0.0.1 --port 9042

Needs the `lz4` package (and `cramjam` for Snappy); when they are missing from the running
interpreter it re-runs itself with <repo>/.venv/bin/python (scripts/venv.sh builds it).
The schema it uses lives in the keyspace `autoprep_golden`, which it drops and recreates.
File names are fixed; contents are deterministic except where the server puts its own state
(host ids, tracing session ids, prepared ids of fully qualified statements are stable).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import os
import socket
import struct
import sys
import time
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

try:
    import lz4.block as lz4_block
except ImportError:  # re-run under the project's venv, which has lz4
    venv_python = REPO / ".venv" / "bin" / "python"
    if venv_python.exists() and Path(sys.prefix).resolve() != (REPO / ".venv").resolve():
        os.execv(str(venv_python), [str(venv_python), __file__, *sys.argv[1:]])
    sys.exit("capture.py needs the lz4 package: run scripts/venv.sh, or pip install lz4")

try:
    import cramjam
except ImportError:
    cramjam = None

OUT_DIR = REPO / "crates" / "protocol" / "tests" / "golden"
KS = "autoprep_golden"

# ---------------------------------------------------------------------------------------------
# Protocol constants (cql-facts.md section 5)

OPCODES = {
    0x00: "ERROR", 0x01: "STARTUP", 0x02: "READY", 0x03: "AUTHENTICATE", 0x05: "OPTIONS",
    0x06: "SUPPORTED", 0x07: "QUERY", 0x08: "RESULT", 0x09: "PREPARE", 0x0A: "EXECUTE",
    0x0B: "REGISTER", 0x0C: "EVENT", 0x0D: "BATCH", 0x0E: "AUTH_CHALLENGE",
    0x0F: "AUTH_RESPONSE", 0x10: "AUTH_SUCCESS",
}
OP = {name: code for code, name in OPCODES.items()}
RESULT_KINDS = {1: "Void", 2: "Rows", 3: "Set_keyspace", 4: "Prepared", 5: "Schema_change"}
ONE = 0x0001
FLAG_COMPRESSED, FLAG_TRACING, FLAG_CUSTOM_PAYLOAD, FLAG_WARNING, FLAG_BETA = 1, 2, 4, 8, 16

MAX_SEGMENT_PAYLOAD = (1 << 17) - 1

# ---------------------------------------------------------------------------------------------
# Primitive encoders


def u8(n: int) -> bytes:
    return struct.pack(">B", n)


def short(n: int) -> bytes:
    return struct.pack(">H", n)


def int32(n: int) -> bytes:
    return struct.pack(">i", n)


def int64(n: int) -> bytes:
    return struct.pack(">q", n)


def string(s: str) -> bytes:
    b = s.encode()
    return short(len(b)) + b


def long_string(s: str) -> bytes:
    b = s.encode()
    return int32(len(b)) + b


def short_bytes(b: bytes) -> bytes:
    return short(len(b)) + b


def bytes_(b: bytes | None) -> bytes:
    return int32(-1) if b is None else int32(len(b)) + b


def string_list(items: list[str]) -> bytes:
    return short(len(items)) + b"".join(string(s) for s in items)


def string_map(pairs: dict[str, str]) -> bytes:
    return short(len(pairs)) + b"".join(string(k) + string(v) for k, v in pairs.items())


# CQL value encoders for bound values
def v_text(s: str) -> bytes:
    return s.encode()


def v_int(n: int) -> bytes:
    return int32(n)


def v_bigint(n: int) -> bytes:
    return int64(n)


def v_double(x: float) -> bytes:
    return struct.pack(">d", x)


def v_timestamp(ms: int) -> bytes:
    return int64(ms)


def v_date(days_since_epoch: int) -> bytes:
    return struct.pack(">I", days_since_epoch + (1 << 31))


def v_set_text(items: list[str]) -> bytes:
    return int32(len(items)) + b"".join(bytes_(v_text(s)) for s in items)


def query_params(version: int, *, consistency: int = ONE, values: list[bytes] | None = None,
                 page_size: int | None = None, paging_state: bytes | None = None,
                 skip_metadata: bool = False, timestamp: int | None = None) -> bytes:
    flags, tail = 0, b""
    if values is not None:
        flags |= 0x01
        tail += short(len(values)) + b"".join(bytes_(v) for v in values)
    if skip_metadata:
        flags |= 0x02
    if page_size is not None:
        flags |= 0x04
        tail += int32(page_size)
    if paging_state is not None:
        flags |= 0x08
        tail += bytes_(paging_state)
    if timestamp is not None:
        flags |= 0x20
        tail += int64(timestamp)
    flag_bytes = u8(flags) if version < 5 else int32(flags)
    return short(consistency) + flag_bytes + tail


def query_body(version: int, cql: str, **params) -> bytes:
    return long_string(cql) + query_params(version, **params)


def prepare_body(version: int, cql: str) -> bytes:
    return long_string(cql) + (int32(0) if version >= 5 else b"")


def execute_body(version: int, prepared, **params) -> bytes:
    body = short_bytes(prepared.id)
    if version >= 5:
        body += short_bytes(prepared.result_metadata_id)
    return body + query_params(version, **params)


def envelope(version: int, flags: int, stream: int, opcode: int, body: bytes) -> bytes:
    return struct.pack(">BBhBi", version, flags, stream, opcode, len(body)) + body


# ---------------------------------------------------------------------------------------------
# Compression and v5 framing


def lz4_v4_compress(body: bytes) -> bytes:
    """v4 LZ4 body: 4-byte big-endian uncompressed length, then one LZ4 block."""
    return struct.pack(">I", len(body)) + lz4_block.compress(body, store_size=False)


def lz4_v4_decompress(data: bytes) -> bytes:
    (n,) = struct.unpack(">I", data[:4])
    return lz4_block.decompress(data[4:], uncompressed_size=n) if n else b""


def snappy_compress(body: bytes) -> bytes:
    return bytes(cramjam.snappy.compress_raw(body))


def snappy_decompress(data: bytes) -> bytes:
    return bytes(cramjam.snappy.decompress_raw(data))


CRC24_INIT = 0x875060
CRC24_POLY = 0x1974F0B
CRC32_PREFIX = bytes([0xFA, 0x2D, 0x55, 0xCA])
CRC32_INIT = zlib.crc32(CRC32_PREFIX)


def crc24(data: bytes) -> int:
    """CRC24 of a segment header. The header is little-endian, so feeding its bytes in order
    is feeding the header value least-significant byte first."""
    crc = CRC24_INIT
    for b in data:
        crc ^= b << 16
        for _ in range(8):
            crc <<= 1
            if crc & 0x1000000:
                crc ^= CRC24_POLY
    return crc & 0xFFFFFF


def crc32(data: bytes) -> int:
    return zlib.crc32(data, CRC32_INIT)


def encode_segment(payload: bytes, *, self_contained: bool = True, lz4: bool = False) -> bytes:
    if not lz4:
        assert len(payload) <= MAX_SEGMENT_PAYLOAD
        header = (len(payload) | (int(self_contained) << 17)).to_bytes(3, "little")
        body = payload
    else:
        compressed = lz4_block.compress(payload, store_size=False)
        if len(compressed) >= len(payload):
            body, uncompressed_len = payload, 0  # stored uncompressed
        else:
            body, uncompressed_len = compressed, len(payload)
        header = (len(body) | (uncompressed_len << 17) | (int(self_contained) << 34)).to_bytes(5, "little")
    return header + crc24(header).to_bytes(3, "little") + body + crc32(body).to_bytes(4, "little")


class Segment:
    """One received v5 segment: raw bytes plus the decoded payload, CRCs checked."""

    def __init__(self, raw: bytes, payload: bytes, self_contained: bool, compressed_len: int,
                 uncompressed_len: int, lz4: bool):
        self.raw = raw
        self.lz4 = lz4
        self.payload = payload
        self.self_contained = self_contained
        self.compressed_len = compressed_len
        self.uncompressed_len = uncompressed_len


class ProtocolError(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# Connection


class Conn:
    """A blocking client connection that keeps every byte it sends and receives."""

    def __init__(self, host: str, port: int, version: int, timeout: float = 20.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.version = version
        self.compression: str | None = None   # v4 body compression once READY is received
        self.framed = False                     # v5 segments once READY is received
        self.segment_lz4 = False
        self.next_stream = 1
        self.pending = b""                      # v5: payload bytes of a partial envelope
        self.pending_segments: list[Segment] = []  # v5: the segments those bytes came from

    def close(self):
        self.sock.close()

    def read_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise EOFError(f"connection closed after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def stream(self) -> int:
        s = self.next_stream
        self.next_stream += 1
        return s

    # -- sending ---------------------------------------------------------------------------
    def encode_request(self, opcode: int, body: bytes, stream: int, flags: int = 0) -> bytes:
        if self.compression and opcode != OP["STARTUP"] and not self.framed:
            body = lz4_v4_compress(body) if self.compression == "lz4" else snappy_compress(body)
            flags |= FLAG_COMPRESSED
        env = envelope(self.version, flags, stream, opcode, body)
        if self.framed:
            return encode_segment(env, lz4=self.segment_lz4)
        return env

    def send(self, opcode: int, body: bytes, stream: int | None = None, flags: int = 0):
        """Send one request; returns (stream, raw bytes sent)."""
        stream = self.stream() if stream is None else stream
        raw = self.encode_request(opcode, body, stream, flags)
        self.sock.sendall(raw)
        return stream, raw

    # -- receiving -------------------------------------------------------------------------
    def read_segment(self) -> Segment:
        header_len = 5 if self.segment_lz4 else 3
        header = self.read_exact(header_len)
        crc_bytes = self.read_exact(3)
        if crc24(header) != int.from_bytes(crc_bytes, "little"):
            raise ProtocolError(f"segment header CRC24 mismatch: {header.hex()} {crc_bytes.hex()}")
        value = int.from_bytes(header, "little")
        payload_len = value & MAX_SEGMENT_PAYLOAD
        if self.segment_lz4:
            uncompressed_len = (value >> 17) & MAX_SEGMENT_PAYLOAD
            self_contained = bool((value >> 34) & 1)
        else:
            uncompressed_len = 0
            self_contained = bool((value >> 17) & 1)
        body = self.read_exact(payload_len)
        trailer = self.read_exact(4)
        if crc32(body) != int.from_bytes(trailer, "little"):
            raise ProtocolError("segment payload CRC32 mismatch")
        payload = body
        if self.segment_lz4 and uncompressed_len:
            payload = lz4_block.decompress(body, uncompressed_size=uncompressed_len)
        return Segment(header + crc_bytes + body + trailer, payload, self_contained,
                       payload_len, uncompressed_len, self.segment_lz4)

    def read_response(self):
        """Read one response. Returns (raw, header tuple, decoded body, segments).

        Unframed: raw is the envelope as received. Framed: raw is b"" and segments lists
        every segment that carried a byte of this envelope (a self-contained segment may
        carry several envelopes; it is then listed for each)."""
        if not self.framed:
            header = self.read_exact(9)
            version, flags, stream, opcode, length = struct.unpack(">BBhBi", header)
            body = self.read_exact(length)
            raw = header + body
            if flags & FLAG_COMPRESSED:
                if self.compression == "lz4":
                    body = lz4_v4_decompress(body)
                elif self.compression == "snappy":
                    body = snappy_decompress(body)
            return raw, (version, flags, stream, opcode, length), body, []
        while True:
            if len(self.pending) >= 9:
                length = struct.unpack(">i", self.pending[5:9])[0]
                if len(self.pending) >= 9 + length:
                    env, self.pending = self.pending[: 9 + length], self.pending[9 + length:]
                    segments = self.pending_segments
                    # a segment that still holds bytes of the next envelope is listed for it too
                    self.pending_segments = segments[-1:] if self.pending else []
                    version, flags, stream, opcode, length = struct.unpack(">BBhBi", env[:9])
                    return b"", (version, flags, stream, opcode, length), env[9:], segments
            seg = self.read_segment()
            self.pending_segments.append(seg)
            self.pending += seg.payload

    def request(self, opcode: int, body: bytes, flags: int = 0):
        stream, sent = self.send(opcode, body, flags=flags)
        raw, hdr, rbody, segs = self.read_response()
        if hdr[2] != stream:
            raise ProtocolError(f"expected stream {stream}, got {hdr[2]}")
        return sent, raw, hdr, rbody, segs

    def startup(self, options: dict[str, str] | None = None):
        opts = {"CQL_VERSION": "3.0.0"}
        opts.update(options or {})
        sent, raw, hdr, body, _ = self.request(OP["STARTUP"], string_map(opts))
        if hdr[3] != OP["READY"]:
            raise ProtocolError(f"STARTUP answered with {describe_header(hdr)}: {body[:200]!r}")
        self.compression = opts.get("COMPRESSION") if self.version < 5 else None
        if self.version >= 5:
            self.framed = True
            self.segment_lz4 = opts.get("COMPRESSION") == "lz4"
        return sent, raw

    def query(self, cql: str, **params):
        sent, raw, hdr, body, segs = self.request(OP["QUERY"], query_body(self.version, cql, **params))
        return sent, raw, hdr, body, segs


# ---------------------------------------------------------------------------------------------
# Response decoding (just enough for the README and for follow-up requests)


class Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ProtocolError("short body")
        b = self.data[self.pos: self.pos + n]
        self.pos += n
        return b

    def int(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def short(self) -> int:
        return struct.unpack(">H", self.take(2))[0]

    def string(self) -> str:
        return self.take(self.short()).decode()

    def short_bytes(self) -> bytes:
        return self.take(self.short())

    def bytes(self) -> bytes | None:
        n = self.int()
        return None if n < 0 else self.take(n)

    def string_list(self) -> list[str]:
        return [self.string() for _ in range(self.short())]

    def string_multimap(self) -> dict[str, list[str]]:
        return {self.string(): self.string_list() for _ in range(self.short())}


def describe_header(hdr) -> str:
    version, flags, stream, opcode, length = hdr
    names = [n for bit, n in ((1, "compression"), (2, "tracing"), (4, "custom_payload"),
                              (8, "warning"), (16, "beta")) if flags & bit]
    return (f"version 0x{version:02x}, flags 0x{flags:02x}{' (' + ','.join(names) + ')' if names else ''}, "
            f"stream {stream}, {OPCODES.get(opcode, f'opcode 0x{opcode:02x}')}, length {length}")


def strip_prefixes(flags: int, body: bytes):
    """Return (tracing id, warnings, rest of body) for a response body."""
    r = Reader(body)
    tracing = r.take(16) if flags & FLAG_TRACING else None
    warnings = r.string_list() if flags & FLAG_WARNING else []
    if flags & FLAG_CUSTOM_PAYLOAD:
        for _ in range(r.short()):
            r.string()
            r.bytes()
    return tracing, warnings, body[r.pos:]


class Prepared:
    def __init__(self, id: bytes, result_metadata_id: bytes | None):
        self.id, self.result_metadata_id = id, result_metadata_id


def parse_result(version: int, hdr, body: bytes) -> dict:
    tracing, warnings, rest = strip_prefixes(hdr[1], body)
    info: dict = {"tracing": tracing, "warnings": warnings}
    r = Reader(rest)
    if hdr[3] == OP["ERROR"]:
        info["code"] = r.int()
        info["message"] = r.string()
    elif hdr[3] == OP["RESULT"]:
        kind = r.int()
        info["kind"] = RESULT_KINDS.get(kind, str(kind))
        if kind == 2:
            flags = r.int()
            cols = r.int()
            info["rows_flags"] = flags
            info["columns"] = cols
            if flags & 0x2:
                info["paging_state"] = r.bytes()
            if flags & 0x8:
                info["new_metadata_id"] = r.short_bytes()
            # skip column specs to reach the row count
            if not flags & 0x4:
                if flags & 0x1:
                    r.string(), r.string()
                for _ in range(cols):
                    if not flags & 0x1:
                        r.string(), r.string()
                    r.string()
                    skip_type(r)
            info["row_count"] = r.int()
        elif kind == 3:
            info["keyspace"] = r.string()
        elif kind == 4:
            info["id"] = r.short_bytes()
            info["result_metadata_id"] = r.short_bytes() if version >= 5 else None
        elif kind == 5:
            info["change"] = read_schema_change(r)
    elif hdr[3] == OP["SUPPORTED"]:
        info["options"] = r.string_multimap()
    elif hdr[3] == OP["EVENT"]:
        info["event"] = r.string()
        if info["event"] == "SCHEMA_CHANGE":
            info["change"] = read_schema_change(r)
    return info


def read_schema_change(r: Reader) -> tuple[str, ...]:
    change, target, keyspace = r.string(), r.string(), r.string()
    if target == "KEYSPACE":
        return change, target, keyspace
    name = r.string()
    if target in ("FUNCTION", "AGGREGATE"):
        return change, target, keyspace, name, "(" + ", ".join(r.string_list()) + ")"
    return change, target, keyspace, name


def skip_type(r: Reader):
    t = r.short()
    if t == 0x00:
        r.string()
    elif t in (0x20, 0x22):
        skip_type(r)
    elif t == 0x21:
        skip_type(r)
        skip_type(r)
    elif t == 0x30:
        r.string(), r.string()
        for _ in range(r.short()):
            r.string()
            skip_type(r)
    elif t == 0x31:
        for _ in range(r.short()):
            skip_type(r)


# ---------------------------------------------------------------------------------------------
# The capture


class Capture:
    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.files: dict[str, bytes] = {}
        self.notes: dict[str, str] = {}
        self.order: list[str] = []

    def save(self, name: str, raw: bytes, note: str):
        assert name not in self.files, name
        self.files[name] = raw
        self.notes[name] = note
        self.order.append(name)

    def conn(self, version: int = 4, **kw) -> Conn:
        return Conn(self.host, self.port, version, **kw)

    def check(self, cond: bool, what: str):
        if not cond:
            raise ProtocolError(what)

    # -- helpers that record a request/response pair ---------------------------------------
    def pair(self, c: Conn, prefix: str, opcode: int, body: bytes, req_note: str, resp_name: str,
             expect: str | None = None, flags: int = 0):
        sent, raw, hdr, rbody, segs = c.request(opcode, body, flags=flags)
        info = parse_result(c.version, hdr, rbody)
        if expect:
            got = OPCODES[hdr[3]] if hdr[3] != OP["RESULT"] else f"RESULT {info['kind']}"
            if hdr[3] == OP["ERROR"]:
                got = f"ERROR 0x{info['code']:04x}"
            self.check(got == expect, f"{req_note}: expected {expect}, got {got} {info}")
        self.save(f"{prefix}_request.bin", sent, req_note)
        self.save(resp_name, raw, summarize(hdr, info))
        return hdr, info

    def run(self):
        self.setup_schema()
        self.v4_plain()
        self.v4_events()
        self.v4_compressed("lz4")
        if self.snappy_supported and cramjam is not None:
            self.v4_compressed("snappy")
        self.v5("none")
        self.v5("lz4")
        self.bad_inputs()

    # -- schema and data -------------------------------------------------------------------
    def setup_schema(self):
        c = self.conn(4)
        _, _, hdr, body, _ = c.request(OP["OPTIONS"], b"")
        supported = parse_result(4, hdr, body)["options"]
        self.supported = supported
        self.snappy_supported = "snappy" in supported.get("COMPRESSION", [])
        c.startup()
        _, _, hdr, body, _ = c.query("SELECT release_version FROM system.local")
        self.server_version = decode_single_text(body)
        ddl = [
            f"DROP KEYSPACE IF EXISTS {KS}",
            f"CREATE KEYSPACE {KS} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}",
            f"CREATE TYPE {KS}.address (street text, zip int)",
            f"""CREATE TABLE {KS}.all_types (
                id int PRIMARY KEY, c_ascii ascii, c_bigint bigint, c_blob blob, c_boolean boolean,
                c_date date, c_decimal decimal, c_double double, c_duration duration, c_float float,
                c_inet inet, c_int int, c_smallint smallint, c_text text, c_time time,
                c_timestamp timestamp, c_timeuuid timeuuid, c_tinyint tinyint, c_uuid uuid,
                c_varchar varchar, c_varint varint, c_list list<int>, c_set set<text>,
                c_map map<text, int>, c_tuple tuple<int, text>, c_vector vector<float, 3>,
                c_udt frozen<address>)""",
            f"CREATE TABLE {KS}.counters (id int PRIMARY KEY, hits counter)",
            f"CREATE TABLE {KS}.hundred (id int PRIMARY KEY, v text)",
            f"CREATE TABLE {KS}.big (id int PRIMARY KEY, v text)",
            f"CREATE TABLE {KS}.batch_target (id int PRIMARY KEY, v text)",
            f"""CREATE TABLE {KS}.ts (sensor text, day date, at timestamp, value double, tags set<text>,
                PRIMARY KEY ((sensor, day), at))""",
        ]
        for stmt in ddl:
            _, _, hdr, body, _ = c.query(stmt)
            self.check(hdr[3] == OP["RESULT"], f"{stmt[:40]}: {parse_result(4, hdr, body)}")
        rows = [
            f"""INSERT INTO {KS}.all_types (id, c_ascii, c_bigint, c_blob, c_boolean, c_date, c_decimal,
                c_double, c_duration, c_float, c_inet, c_int, c_smallint, c_text, c_time, c_timestamp,
                c_timeuuid, c_tinyint, c_uuid, c_varchar, c_varint, c_list, c_set, c_map, c_tuple,
                c_vector, c_udt) VALUES (2, '', -9223372036854775808, 0x, false, '1970-01-01', -0.001,
                -Infinity, -1d, NaN, '::1', -2147483648, -32768, '', '00:00:00', '1970-01-01 00:00:00+0000',
                00000000-0000-1000-8080-808080808080, -128, 00000000-0000-0000-0000-000000000000, '',
                -1, [], {{}}, {{}}, (0, ''), [0.0, -0.0, 1e-45], {{street: '', zip: 0}})""",
            f"INSERT INTO {KS}.all_types (id) VALUES (3)",
            f"UPDATE {KS}.counters SET hits = hits + 5 WHERE id = 1",
            f"UPDATE {KS}.counters SET hits = hits - 3 WHERE id = 2",
        ]
        for stmt in rows:
            _, _, hdr, body, _ = c.query(stmt)
            self.check(hdr[3] == OP["RESULT"], f"{stmt[:40]}: {parse_result(4, hdr, body)}")
        self.fill(c, "hundred", 100, lambda i: f"row {i:03d}")
        self.fill(c, "big", 2000, big_text)
        c.close()

    def fill(self, c: Conn, table: str, n: int, text_of):
        _, _, hdr, body, _ = c.request(OP["PREPARE"], prepare_body(4, f"INSERT INTO {KS}.{table} (id, v) VALUES (?, ?)"))
        info = parse_result(4, hdr, body)
        prepared = Prepared(info["id"], None)
        for start in range(0, n, 100):   # 100 requests in flight at a time
            streams = set()
            for i in range(start, min(n, start + 100)):
                s, _ = c.send(OP["EXECUTE"], execute_body(4, prepared, values=[v_int(i), v_text(text_of(i))]))
                streams.add(s)
            while streams:
                _, hdr, body, _ = c.read_response()
                self.check(hdr[3] == OP["RESULT"], f"fill {table}: {parse_result(4, hdr, body)}")
                streams.discard(hdr[2])
            c.next_stream = 1

    # -- v4, no compression ----------------------------------------------------------------
    def v4_plain(self):
        c = self.conn(4)
        self.pair(c, "v4_options", OP["OPTIONS"], b"", "v4 OPTIONS, stream 1",
                  "v4_supported.bin", "SUPPORTED")
        self.pair(c, "v4_startup", OP["STARTUP"], string_map({"CQL_VERSION": "3.0.0"}),
                  "v4 STARTUP {CQL_VERSION: 3.0.0}", "v4_ready.bin", "READY")
        ins = (f"INSERT INTO {KS}.all_types (id, c_ascii, c_bigint, c_blob, c_boolean, c_date, c_decimal, "
               "c_double, c_duration, c_float, c_inet, c_int, c_smallint, c_text, c_time, c_timestamp, "
               "c_timeuuid, c_tinyint, c_uuid, c_varchar, c_varint, c_list, c_set, c_map, c_tuple, c_vector, "
               "c_udt) VALUES (1, 'ascii', 9223372036854775807, 0xcafebabe, true, '2026-01-02', 12345.678, "
               "3.141592653589793, 1mo2d3h4m5s6ms7us8ns, 1.5, '127.0.0.1', 2147483647, 32767, "
               "'h\u00e9llo w\u00f6rld \u2713', '03:04:05.123456789', '2026-01-02 03:04:05.678+0000', "
               "50554d6e-29bb-11e5-b345-feff819cdc9f, 127, 123e4567-e89b-12d3-a456-426614174000, 'varchar', "
               "123456789012345678901234567890, [1, 2, 3], {'a', 'b'}, {'k1': 1, 'k2': 2}, (1, 'one'), "
               "[1.0, 2.5, -3.0], {street: '1 Main St', zip: 12345})")
        self.pair(c, "v4_query_insert", OP["QUERY"], query_body(4, ins),
                  "v4 QUERY: INSERT of row 1 of all_types (every native type, inline literals), ONE",
                  "v4_result_void_insert.bin", "RESULT Void")
        self.pair(c, "v4_query_select_system_local", OP["QUERY"],
                  query_body(4, "SELECT key, cluster_name, release_version, cql_version, "
                                "native_protocol_version, partitioner FROM system.local"),
                  "v4 QUERY: SELECT key, cluster_name, release_version, cql_version, "
                  "native_protocol_version, partitioner FROM system.local",
                  "v4_result_rows_system_local.bin", "RESULT Rows")
        self.pair(c, "v4_query_select_all_types", OP["QUERY"],
                  query_body(4, f"SELECT * FROM {KS}.all_types"),
                  f"v4 QUERY: SELECT * FROM {KS}.all_types (3 rows: full, edge values, all null)",
                  "v4_result_rows_all_types.bin", "RESULT Rows")
        self.pair(c, "v4_query_select_counters", OP["QUERY"],
                  query_body(4, f"SELECT id, hits FROM {KS}.counters"),
                  f"v4 QUERY: SELECT id, hits FROM {KS}.counters (counter column)",
                  "v4_result_rows_counters.bin", "RESULT Rows")
        self.pair(c, "v4_query_select_hundred", OP["QUERY"],
                  query_body(4, f"SELECT id, v FROM {KS}.hundred"),
                  f"v4 QUERY: SELECT id, v FROM {KS}.hundred, no paging (100 rows)",
                  "v4_result_rows_hundred.bin", "RESULT Rows")
        self.pair(c, "v4_query_use", OP["QUERY"], query_body(4, f"USE {KS}"),
                  f"v4 QUERY: USE {KS}", "v4_result_set_keyspace.bin", "RESULT Set_keyspace")
        self.pair(c, "v4_query_create_table", OP["QUERY"],
                  query_body(4, "CREATE TABLE created_by_capture (id int PRIMARY KEY, v text)"),
                  "v4 QUERY: CREATE TABLE created_by_capture (id int PRIMARY KEY, v text) "
                  f"(connection keyspace {KS})",
                  "v4_result_schema_change_created_table.bin", "RESULT Schema_change")
        ins_cql = f"INSERT INTO {KS}.ts (sensor, day, at, value, tags) VALUES (?, ?, ?, ?, ?)"
        _, info = self.pair(c, "v4_prepare_insert", OP["PREPARE"], prepare_body(4, ins_cql),
                            f"v4 PREPARE: {ins_cql} (partition key sensor, day)",
                            "v4_result_prepared_insert.bin", "RESULT Prepared")
        p_insert = Prepared(info["id"], None)
        sel_cql = f"SELECT sensor, day, at, value, tags FROM {KS}.ts WHERE sensor = ? AND day = ? AND at >= ? LIMIT ?"
        _, info = self.pair(c, "v4_prepare_select", OP["PREPARE"], prepare_body(4, sel_cql),
                            f"v4 PREPARE: {sel_cql}",
                            "v4_result_prepared_select.bin", "RESULT Prepared")
        p_select = Prepared(info["id"], None)
        day = 20455  # 2026-01-02
        at0 = 1767323045000  # 2026-01-02 03:04:05 UTC in ms
        ins_values = [v_text("s-17"), v_date(day), v_timestamp(at0), v_double(21.5), v_set_text(["a", "b"])]
        self.pair(c, "v4_execute_insert", OP["EXECUTE"], execute_body(4, p_insert, values=ins_values),
                  "v4 EXECUTE of the prepared INSERT: ('s-17', 2026-01-02, 2026-01-02 03:04:05Z, 21.5, {'a','b'})",
                  "v4_result_void_execute_insert.bin", "RESULT Void")
        batch = (u8(0) + short(2)
                 + u8(0) + long_string(f"INSERT INTO {KS}.ts (sensor, day, at, value) VALUES ('s-17', '2026-01-02', "
                                       "'2026-01-02 03:04:06+0000', 22.0)") + short(0)
                 + u8(1) + short_bytes(p_insert.id) + short(5)
                 + b"".join(bytes_(v) for v in [v_text("s-17"), v_date(day), v_timestamp(at0 + 2000),
                                                  v_double(22.5), v_set_text(["c"])])
                 + short(ONE) + u8(0))
        self.pair(c, "v4_batch_logged", OP["BATCH"], batch,
                  "v4 BATCH, logged, 2 children: a text INSERT and the prepared INSERT with 5 values, ONE",
                  "v4_result_void_batch.bin", "RESULT Void")
        sel_values = [v_text("s-17"), v_date(day), v_timestamp(at0), v_int(10)]
        self.pair(c, "v4_execute_select", OP["EXECUTE"], execute_body(4, p_select, values=sel_values),
                  "v4 EXECUTE of the prepared SELECT: ('s-17', 2026-01-02, 2026-01-02 03:04:05Z, 10) -> 3 rows",
                  "v4_result_rows_execute_select.bin", "RESULT Rows")
        self.pair(c, "v4_execute_select_skip_metadata", OP["EXECUTE"],
                  execute_body(4, p_select, values=sel_values, skip_metadata=True),
                  "v4 EXECUTE of the prepared SELECT with skip_metadata (flag 0x02)",
                  "v4_result_rows_execute_select_no_metadata.bin", "RESULT Rows")
        self.pair(c, "v4_query_bind_values", OP["QUERY"],
                  query_body(4, f"SELECT id, v FROM {KS}.hundred WHERE id = ?", values=[v_int(42)]),
                  f"v4 QUERY with one positional value: SELECT id, v FROM {KS}.hundred WHERE id = ? (42)",
                  "v4_result_rows_bind_values.bin", "RESULT Rows")
        self.pair(c, "v4_query_syntax_error", OP["QUERY"], query_body(4, "SELEC * FROM system.local"),
                  "v4 QUERY: SELEC * FROM system.local", "v4_error_syntax.bin", "ERROR 0x2000")
        self.pair(c, "v4_query_invalid", OP["QUERY"], query_body(4, f"SELECT * FROM {KS}.no_such_table"),
                  f"v4 QUERY: SELECT * FROM {KS}.no_such_table", "v4_error_invalid.bin", "ERROR 0x2200")
        self.pair(c, "v4_query_already_exists", OP["QUERY"],
                  query_body(4, "CREATE TABLE created_by_capture (id int PRIMARY KEY, v text)"),
                  "v4 QUERY: the same CREATE TABLE again", "v4_error_already_exists.bin", "ERROR 0x2400")
        unknown = Prepared(bytes(range(0xA0, 0xB0)), None)
        self.pair(c, "v4_execute_unknown_id", OP["EXECUTE"], execute_body(4, unknown, values=[]),
                  "v4 EXECUTE of the unknown id a0a1...af (16 bytes), no values",
                  "v4_error_unprepared.bin", "ERROR 0x2500")
        # paging
        page_cql = f"SELECT id, v FROM {KS}.hundred"
        _, info = self.pair(c, "v4_query_paged_page1", OP["QUERY"], query_body(4, page_cql, page_size=10),
                            f"v4 QUERY: {page_cql}, page_size 10", "v4_result_rows_paged_page1.bin", "RESULT Rows")
        self.check(info.get("paging_state") is not None, "page 1 has no paging_state")
        self.pair(c, "v4_query_paged_page2", OP["QUERY"],
                  query_body(4, page_cql, page_size=10, paging_state=info["paging_state"]),
                  "v4 QUERY: same, page_size 10, with the paging_state of page 1",
                  "v4_result_rows_paged_page2.bin", "RESULT Rows")
        # warnings: an unlogged batch over more partitions than unlogged_batch_across_partitions_warn_threshold
        children = b"".join(u8(0) + long_string(f"INSERT INTO {KS}.batch_target (id, v) VALUES ({i}, 'w')") + short(0)
                            for i in range(12))
        batch = u8(1) + short(12) + children + short(ONE) + u8(0)
        hdr, info = self.pair(c, "v4_batch_unlogged_warning", OP["BATCH"], batch,
                              f"v4 BATCH, unlogged, 12 text INSERTs into {KS}.batch_target, 12 partitions",
                              "v4_result_void_warning.bin", "RESULT Void")
        self.check(bool(hdr[1] & FLAG_WARNING), "unlogged batch gave no warning")
        hdr, info = self.pair(c, "v4_query_tracing", OP["QUERY"],
                              query_body(4, "SELECT key FROM system.local"),
                              "v4 QUERY with the tracing flag 0x02: SELECT key FROM system.local",
                              "v4_result_rows_tracing.bin", "RESULT Rows", flags=FLAG_TRACING)
        self.check(bool(hdr[1] & FLAG_TRACING), "tracing flag not echoed")
        c.close()

    def v4_events(self):
        listener = self.conn(4)
        listener.startup()
        self.pair(listener, "v4_register_schema_change", OP["REGISTER"], string_list(["SCHEMA_CHANGE"]),
                  "v4 REGISTER [SCHEMA_CHANGE]", "v4_ready_register.bin", "READY")
        other = self.conn(4)
        other.startup()
        _, _, hdr, body, _ = other.query(f"CREATE TABLE {KS}.event_probe (id int PRIMARY KEY)")
        self.check(hdr[3] == OP["RESULT"], f"event_probe: {parse_result(4, hdr, body)}")
        other.close()
        deadline = time.time() + 20
        while time.time() < deadline:
            raw, hdr, body, _ = listener.read_response()
            info = parse_result(4, hdr, body)
            if hdr[3] == OP["EVENT"] and "event_probe" in info.get("change", ()):
                self.save("v4_event_schema_change.bin", raw,
                          summarize(hdr, info) + f"; after another connection ran CREATE TABLE {KS}.event_probe")
                break
        else:
            raise ProtocolError("no SCHEMA_CHANGE event for event_probe")
        listener.close()

    # -- v4 with body compression ----------------------------------------------------------
    def v4_compressed(self, algo: str):
        p = f"v4{algo}"
        c = self.conn(4)
        sent, raw, hdr, body, _ = c.request(OP["STARTUP"], string_map({"CQL_VERSION": "3.0.0", "COMPRESSION": algo}))
        self.check(hdr[3] == OP["READY"], f"{algo} STARTUP: {parse_result(4, hdr, body)}")
        self.save(f"{p}_startup_request.bin", sent, f"v4 STARTUP {{CQL_VERSION: 3.0.0, COMPRESSION: {algo}}}")
        self.save(f"{p}_ready.bin", raw, summarize(hdr, {}))
        c.compression = algo
        self.pair(c, f"{p}_query_select_all_types", OP["QUERY"], query_body(4, f"SELECT * FROM {KS}.all_types"),
                  f"v4 QUERY, {algo}-compressed body: SELECT * FROM {KS}.all_types",
                  f"{p}_result_rows_all_types.bin", "RESULT Rows")
        self.pair(c, f"{p}_query_select_hundred", OP["QUERY"], query_body(4, f"SELECT id, v FROM {KS}.hundred"),
                  f"v4 QUERY, {algo}-compressed body: SELECT id, v FROM {KS}.hundred",
                  f"{p}_result_rows_hundred.bin", "RESULT Rows")
        self.pair(c, f"{p}_query_syntax_error", OP["QUERY"], query_body(4, "SELEC * FROM system.local"),
                  f"v4 QUERY, {algo}-compressed body: SELEC * FROM system.local",
                  f"{p}_error_syntax.bin", "ERROR 0x2000")
        c.close()

    # -- v5 --------------------------------------------------------------------------------
    def v5(self, algo: str):
        p = "v5" if algo == "none" else f"v5{algo}"
        c = self.conn(5)
        if algo == "none":
            self.pair(c, "v5_options", OP["OPTIONS"], b"", "v5 OPTIONS (unframed, before STARTUP)",
                      "v5_supported.bin", "SUPPORTED")
        opts = {"CQL_VERSION": "3.0.0"}
        if algo != "none":
            opts["COMPRESSION"] = algo
        sent, raw = c.startup(opts)
        self.save(f"{p}_startup_request.bin", sent, f"v5 STARTUP {opts} (unframed)")
        self.save(f"{p}_ready.bin", raw, "READY (unframed; framing starts after it)")

        def framed(name: str, opcode: int, body: bytes, note: str, expect: str) -> dict:
            sent, _, hdr, rbody, segs = c.request(opcode, body)
            info = parse_result(5, hdr, rbody)
            got = OPCODES[hdr[3]] if hdr[3] != OP["RESULT"] else f"RESULT {info['kind']}"
            if hdr[3] == OP["ERROR"]:
                got = f"ERROR 0x{info['code']:04x}"
            self.check(got == expect, f"{note}: expected {expect}, got {got}")
            self.save(f"{p}_segment_{name}_request.bin", sent, f"one self-contained segment: {note}")
            desc = summarize(hdr, info)
            if len(segs) == 1:
                self.save(f"{p}_segment_{name}_response.bin", segs[0].raw, f"{seg_desc(segs[0])}: {desc}")
            else:
                for i, seg in enumerate(segs):
                    self.save(f"{p}_segment_{name}_response_{i:02d}.bin", seg.raw,
                              f"segment {i + 1} of {len(segs)}, {seg_desc(seg)}: {desc}")
            return info

        framed("query_select_system_local", OP["QUERY"],
               query_body(5, "SELECT key, cluster_name, release_version, cql_version, native_protocol_version, "
                             "partitioner FROM system.local"),
               "v5 QUERY: SELECT key, cluster_name, release_version, cql_version, native_protocol_version, "
               "partitioner FROM system.local", "RESULT Rows")
        info = framed("prepare_select", OP["PREPARE"],
                      prepare_body(5, f"SELECT id, v FROM {KS}.hundred WHERE id = ?"),
                      f"v5 PREPARE: SELECT id, v FROM {KS}.hundred WHERE id = ? (flags 0)", "RESULT Prepared")
        prepared = Prepared(info["id"], info["result_metadata_id"])
        framed("execute_select", OP["EXECUTE"], execute_body(5, prepared, values=[v_int(7)]),
               "v5 EXECUTE of it with result_metadata_id, value 7", "RESULT Rows")
        framed("query_syntax_error", OP["QUERY"], query_body(5, "SELEC * FROM system.local"),
               "v5 QUERY: SELEC * FROM system.local", "ERROR 0x2000")
        info = framed("query_select_big", OP["QUERY"], query_body(5, f"SELECT id, v FROM {KS}.big"),
                      f"v5 QUERY: SELECT id, v FROM {KS}.big (2000 rows of 100-character text, no paging)",
                      "RESULT Rows")
        self.check(info["row_count"] == 2000, f"big: {info['row_count']} rows")
        big = [n for n in self.order if n.startswith(f"{p}_segment_query_select_big_response_")]
        self.check(len(big) >= 2, "the large result was not split into several segments")
        c.close()

    # -- bad input -------------------------------------------------------------------------
    def bad_inputs(self):
        cases = [
            ("bad_version_02", struct.pack(">BBhBi", 0x02, 0, 7, OP["OPTIONS"], 0),
             "OPTIONS header with version byte 0x02 (v2 no longer supported), stream 7"),
            ("bad_version_06_no_beta", struct.pack(">BBhBi", 0x06, 0, 7, OP["OPTIONS"], 0),
             "OPTIONS header with version byte 0x06 (v6 beta) without the beta flag, stream 7"),
            ("bad_version_06_beta", struct.pack(">BBhBi", 0x06, FLAG_BETA, 7, OP["OPTIONS"], 0),
             "OPTIONS header with version byte 0x06 and the beta flag 0x10, stream 7"),
            ("bad_version_45", struct.pack(">BBhBi", 0x45, 0, 7, OP["OPTIONS"], 0),
             "OPTIONS header with version byte 0x45 (garbage), stream 7"),
            ("bad_version_84_response_bit", struct.pack(">BBhBi", 0x84, 0, 7, OP["OPTIONS"], 0),
             "OPTIONS header with version byte 0x84 (response direction bit set), stream 7"),
            ("bad_length_7fffffff", struct.pack(">BBhBi", 0x04, 0, 7, OP["OPTIONS"], 0x7FFFFFFF),
             "v4 OPTIONS header with body length 0x7fffffff (no body follows), stream 7"),
            ("bad_length_negative", struct.pack(">BBhBi", 0x04, 0, 7, OP["OPTIONS"], -1),
             "v4 OPTIONS header with body length -1, stream 7"),
            ("bad_opcode_ff", struct.pack(">BBhBi", 0x04, 0, 7, 0xFF, 0),
             "v4 header with unknown opcode 0xff, empty body, stream 7"),
            ("bad_query_before_startup", envelope(4, 0, 7, OP["QUERY"], query_body(4, "SELECT key FROM system.local")),
             "v4 QUERY before STARTUP, stream 7"),
        ]
        for name, raw, note in cases:
            self.bad(name, raw, note)
        c = self.conn(4, timeout=5)
        c.startup()
        self.bad("bad_length_7fffffff_after_startup", struct.pack(">BBhBi", 0x04, 0, 7, OP["OPTIONS"], 0x7FFFFFFF),
                 "v4 after READY: OPTIONS header with body length 0x7fffffff (no body follows), stream 7", conn=c)
        c = self.conn(4, timeout=5)
        c.startup()
        self.bad("bad_opcode_ff_after_startup", struct.pack(">BBhBi", 0x04, 0, 7, 0xFF, 0),
                 "v4 after READY: header with unknown opcode 0xff, empty body, stream 7", conn=c)
        c = self.conn(4, timeout=5)
        c.startup()
        self.bad("bad_version_05_on_v4_connection", envelope(5, 0, 7, OP["OPTIONS"], b""),
                 "v4 after READY: an OPTIONS envelope with version byte 0x05, stream 7", conn=c)
        c = self.conn(5, timeout=5)
        c.startup()
        self.bad("bad_v5_envelope_length_7fffffff",
                 encode_segment(struct.pack(">BBhBi", 0x05, 0, 7, OP["OPTIONS"], 0x7FFFFFFF)),
                 "v5 after READY: a self-contained segment holding only an OPTIONS header with body length "
                 "0x7fffffff, stream 7", conn=c)
        # v5: a segment whose header CRC24 is wrong, sent after a good STARTUP
        c = self.conn(5, timeout=5)
        c.startup()
        seg = bytearray(encode_segment(envelope(5, 0, 7, OP["OPTIONS"], b"")))
        seg[3] ^= 0xFF
        self.bad("bad_v5_segment_header_crc", bytes(seg), "v5 after READY: an OPTIONS segment whose header CRC24 is wrong, stream 7", conn=c)
        c = self.conn(5, timeout=5)
        c.startup()
        seg = bytearray(encode_segment(envelope(5, 0, 7, OP["OPTIONS"], b"")))
        seg[-1] ^= 0xFF
        self.bad("bad_v5_segment_payload_crc", bytes(seg), "v5 after READY: an OPTIONS segment whose payload CRC32 is wrong, stream 7", conn=c)
        c = self.conn(5, timeout=5)
        c.startup()
        self.bad("bad_v5_unframed_after_ready", envelope(5, 0, 7, OP["OPTIONS"], b""),
                 "v5 after READY: a bare (unframed) OPTIONS envelope, stream 7", conn=c)

    def bad(self, name: str, raw: bytes, note: str, conn: Conn | None = None):
        c = conn or self.conn(4, timeout=5)
        c.sock.sendall(raw)
        received = bytearray()
        outcome = "still open after 3 s"
        c.sock.settimeout(3)
        try:
            while True:
                chunk = c.sock.recv(65536)
                if not chunk:
                    outcome = "then the server closed the connection"
                    break
                received += chunk
        except socket.timeout:
            pass
        except ConnectionResetError:
            outcome = "then the server reset the connection"
        c.close()
        self.save(f"{name}_request.bin", raw, note)
        if conn is not None and conn.framed and received:
            desc = describe_framed_bytes(bytes(received), conn.segment_lz4)
        else:
            desc = describe_envelopes(bytes(received))
        self.save(f"{name}_response.bin", bytes(received),
                  f"{desc or 'no bytes'}; {outcome}")

    # -- output ----------------------------------------------------------------------------
    def write(self):
        OUT_DIR.mkdir(parents=True, exist_ok=True)
        for old in OUT_DIR.glob("*.bin"):
            old.unlink()
        for name in self.order:
            (OUT_DIR / name).write_bytes(self.files[name])
        today = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d")
        lines = [
            "# Golden protocol vectors",
            "",
            f"Captured {today} from Apache Cassandra {self.server_version} (single node, "
            "`scripts/cassandra.sh start`) by `tests/golden/capture.py`. Regenerate with:",
            "",
            "    scripts/cassandra.sh start && scripts/venv.sh",
            "    python3 tests/golden/capture.py --host 127.0.0.1 --port 9042",
            "",
            "Each `.bin` file holds bytes exactly as they went over the wire: one whole envelope "
            "(9-byte header + body; for v4 compression the compressed body) or, for v5 after READY, "
            "one whole segment (header, header CRC24, payload, payload CRC32). `*_request.bin` is "
            "what the client sent; the file after it is what the server answered. Requests use "
            "stream ids counting up from 1 per connection and consistency ONE. The schema lives in "
            f"the keyspace `{KS}` (dropped and recreated by every run): `all_types` (one column of "
            "every native type plus list, set, map, tuple, vector<float, 3> and a UDT; rows 1 = "
            "typical values, 2 = edge values, 3 = all null), `counters`, `hundred` (100 rows), "
            "`big` (2000 rows of 100-character text) and `ts` (partition key (sensor, day)).",
            "",
            f"SUPPORTED (v4) advertised: `{format_supported(self.supported)}`.",
            "",
            "Re-running against the same server version reproduces every file byte for byte except "
            "`v4_result_rows_tracing.bin` (the tracing session id) and the `bad_v5_segment_*` / "
            "`bad_v5_unframed_*` answers (their messages start with a random hex id). Prepared ids "
            "are stable: every statement prepared here is fully qualified, and its id is the MD5 of "
            "the query text alone even on the connection that ran USE.",
            "",
            "Server behaviour these files show (Cassandra 5.0.6):",
            "",
            "- With v4 compression negotiated, READY is already compressed (flags 0x01; LZ4 body "
            "`00 00 00 00 00`, Snappy body `00`). Everything after it is compressed, errors included.",
            "- A v5 envelope larger than one segment (2^17 - 1 bytes) is split across segments that "
            "are not self-contained; the bytes of the first one are filled to just under the limit.",
            "- The LZ4 v5 segment carrying a short error is stored uncompressed (uncompressed length 0).",
            "- Errors about the header itself (unsupported version, beta without the flag, unknown "
            "opcode, message before STARTUP, bad v5 CRC or length) use stream 0, not the request's "
            "stream (the direction-bit and version-change errors do echo stream 7); a "
            "version error answers in the highest version (0x85) unless the request's version is "
            "one the server can still encode (0x02 gets an 8-byte v2 header, 0x06 gets 0x86 + beta).",
            "- The connection stays open after version and opcode errors; only CRC errors in v5 "
            "segments make the server close (reset) it. A body length of 0x7fffffff (or -1) on v4 "
            "gets no answer at all: the server waits.",
            "",
            "| file | bytes | what |",
            "| --- | ---: | --- |",
        ]
        for name in self.order:
            note = self.notes[name].replace("|", "\\|")
            lines.append(f"| `{name}` | {len(self.files[name])} | {note} |")
        lines.append("")
        (OUT_DIR / "README.md").write_text("\n".join(lines))


# ---------------------------------------------------------------------------------------------
# Description helpers


def big_text(i: int) -> str:
    h = hashlib.sha256(str(i).encode()).hexdigest()
    return (h + h)[:100]


def decode_single_text(body: bytes) -> str:
    r = Reader(body)
    assert r.int() == 2
    flags, cols = r.int(), r.int()
    if flags & 0x1:
        r.string(), r.string()
    for _ in range(cols):
        if not flags & 0x1:
            r.string(), r.string()
        r.string()
        skip_type(r)
    assert r.int() >= 1
    return r.bytes().decode()


def summarize(hdr, info: dict) -> str:
    version, flags, stream, opcode, length = hdr
    parts = [describe_header(hdr)]
    if opcode == OP["ERROR"]:
        parts.append(f"code 0x{info['code']:04x}, message \"{info['message']}\"")
    elif opcode == OP["RESULT"]:
        s = f"kind {info['kind']}"
        if info["kind"] == "Rows":
            s += f", {info['columns']} columns, {info['row_count']} rows, metadata flags 0x{info['rows_flags']:x}"
            if info.get("paging_state") is not None:
                s += f", paging_state {len(info['paging_state'])} bytes"
        elif info["kind"] == "Set_keyspace":
            s += f" \"{info['keyspace']}\""
        elif info["kind"] == "Prepared":
            s += f", id {info['id'].hex()}"
            if info.get("result_metadata_id"):
                s += f", result_metadata_id {info['result_metadata_id'].hex()}"
        elif info["kind"] == "Schema_change":
            s += " " + " ".join(info["change"])
        parts.append(s)
    elif opcode == OP["EVENT"]:
        parts.append(f"{info['event']} {' '.join(info.get('change', ()))}")
    if info.get("warnings"):
        parts.append("warnings: " + "; ".join(f"\"{w}\"" for w in info["warnings"]))
    if info.get("tracing"):
        parts.append(f"tracing id {info['tracing'].hex()}")
    return "; ".join(parts)


def seg_desc(seg: Segment) -> str:
    sc = "self-contained" if seg.self_contained else "not self-contained"
    if not seg.lz4:
        return f"segment, {sc}, payload {seg.compressed_len} bytes"
    if seg.uncompressed_len:
        return (f"LZ4 segment, {sc}, payload {seg.compressed_len} bytes compressed, "
                f"{seg.uncompressed_len} uncompressed")
    return f"LZ4 segment, {sc}, payload {seg.compressed_len} bytes stored uncompressed"


def describe_envelopes(data: bytes) -> str:
    out = []
    while len(data) >= 8 and data[0] & 0x7F <= 2:   # v1/v2 header: 8 bytes, 1-byte stream
        version, flags, stream, opcode, length = struct.unpack(">BBbBi", data[:8])
        body = data[8: 8 + length]
        hdr = (version, flags, stream, opcode, length)
        try:
            info = parse_result(version & 0x7F, hdr, body)
            out.append("v1/v2-style 8-byte header: " + summarize(hdr, info))
        except Exception:
            out.append("v1/v2-style 8-byte header: " + describe_header(hdr) + " (body not decoded)")
        data = data[8 + length:]
    while len(data) >= 9:
        version, flags, stream, opcode, length = struct.unpack(">BBhBi", data[:9])
        body = data[9: 9 + length]
        hdr = (version, flags, stream, opcode, length)
        try:
            info = parse_result(version & 0x7F, hdr, body)
            out.append(summarize(hdr, info))
        except Exception:
            out.append(describe_header(hdr) + " (body not decoded)")
        data = data[9 + length:]
    if data:
        out.append(f"{len(data)} trailing bytes {data.hex()}")
    return " + ".join(out)


def describe_framed_bytes(data: bytes, lz4: bool) -> str:
    header_len = 5 if lz4 else 3
    if len(data) < header_len + 3:
        return f"{len(data)} bytes {data.hex()}"
    header = data[:header_len]
    value = int.from_bytes(header, "little")
    length = value & MAX_SEGMENT_PAYLOAD
    payload = data[header_len + 3: header_len + 3 + length]
    ok = crc24(header) == int.from_bytes(data[header_len: header_len + 3], "little")
    return f"a segment (header CRC {'ok' if ok else 'BAD'}) holding: " + describe_envelopes(payload)


def format_supported(opts: dict[str, list[str]]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(opts.items()))


# ---------------------------------------------------------------------------------------------
# Self-checks of the framing helpers (run before talking to the server)


def self_test():
    # CRC24 must be 24 bits and change with every input byte; the real check is that the
    # server accepts our segments and that every segment it sends passes read_segment().
    assert crc24(b"") == CRC24_INIT
    assert crc32(b"") == zlib.crc32(CRC32_PREFIX)
    seg = encode_segment(b"x" * 10)
    assert seg[:3] == (10 | 1 << 17).to_bytes(3, "little") and len(seg) == 3 + 3 + 10 + 4
    body = b"abc" * 100
    assert lz4_v4_decompress(lz4_v4_compress(body)) == body
    if cramjam is not None:
        assert snappy_decompress(snappy_compress(body)) == body


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=9042)
    args = ap.parse_args()
    self_test()
    cap = Capture(args.host, args.port)
    cap.run()
    cap.write()
    print(f"wrote {len(cap.order)} files and README.md to {OUT_DIR.relative_to(REPO)}")


if __name__ == "__main__":
    main()

"""Request spans exported to a real OpenTelemetry Collector (tests/python/otelcol.py), read back
from its file exporter and checked; and nothing of the statements' values anywhere.

One autoprep per OTLP transport (grpc, http/protobuf), sampling everything, in front of the node
under test. Through it, on protocol v4 and v5: QUERYs with literals inline (a traceparent in the
custom payload, and one in a SQLCommenter comment), a PREPARE and EXECUTEs of it, a BATCH of
literal statements, and a QUERY the server refuses. Each request's traceparent names a trace and
a parent span of the test's own: its span must be in that trace, a child of that parent, of kind
CLIENT, with the OpenTelemetry database attributes of the request and the node that answered.

The values of every statement are random strings of 12 characters and random integers of 9
digits: none may appear in any exported span (attributes, names, the whole file), the proxy's
JSON log, /metrics or /shapes.

  .venv/bin/python -m pytest tests/python/test_tracing.py -q
"""

import json
import random
import secrets
import string
import time
import urllib.request

import pytest
from cassandra import InvalidRequest
from cassandra.query import BatchStatement, SimpleStatement

import otelcol
from conftest import _free_port, make_cluster, run_proxy

SPAN_KIND_CLIENT = 3
STATUS_ERROR = 2


def traceparent():
    """(header, trace id, parent id) of a new sampled parent."""
    t, p = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{t}-{p}-01", t, p


class Run:
    """The requests of one protocol version, and what their spans must say."""

    def __init__(self, session, ks):
        self.s, self.ks = session, ks
        self.expected = []   # (trace id, parent id, operation, what else to check)
        self.values = []     # every literal / bound value used

    def value_int(self):
        v = str(random.randrange(100_000_000, 999_999_999))
        self.values.append(v)
        return v

    def value_text(self):
        v = "".join(random.choices(string.ascii_letters, k=12))
        self.values.append(v)
        return v

    def expect(self, op, **check):
        header, t, p = traceparent()
        self.expected.append((t, p, op, check))
        return header

    def run(self):
        s, ks = self.s, self.ks
        for _ in range(3):
            k, v = self.value_int(), self.value_text()
            tp = self.expect("INSERT", text=True)
            s.execute(SimpleStatement(f"INSERT INTO {ks}.t (k, v) VALUES ({k}, '{v}')"),
                      custom_payload={"traceparent": tp.encode()})
            tp = self.expect("SELECT", text=True, page=True)
            s.execute(f"SELECT v FROM {ks}.t WHERE k = {k} /*traceparent='{tp}'*/")
        # The driver sends no custom payload with a PREPARE (it drops the argument): a comment.
        tp = self.expect("PREPARE")
        prepared = s.prepare(f"SELECT v FROM {ks}.t WHERE k = ? /*traceparent='{tp}'*/")
        for _ in range(2):
            tp = self.expect("EXECUTE", page=True)
            s.execute(prepared, [int(self.value_int())],
                      custom_payload={"traceparent": tp.encode()})
        for _ in range(2):
            b = BatchStatement()
            for _ in range(2):
                b.add(SimpleStatement(
                    f"INSERT INTO {ks}.t (k, v) VALUES ({self.value_int()}, '{self.value_text()}')"))
            tp = self.expect("BATCH", batch=2)
            s.execute(b, custom_payload={"traceparent": tp.encode()})
        # Refused by the server, whose message quotes the value: the span has the code only.
        tp = self.expect("SELECT", error="0x2200", text=True)
        with pytest.raises(InvalidRequest):
            s.execute(SimpleStatement(f"SELECT v FROM {ks}.t WHERE k = '{self.value_text()}'"),
                      custom_payload={"traceparent": tp.encode()})


def check_span(span, t, p, op, check, ks, upstream, pv):
    a = span["attributes"]
    where = f"v{pv} {op} {check}: {span}"
    assert span["parent_span_id"] == p, where
    assert span["kind"] == SPAN_KIND_CLIENT, where
    assert a["db.system.name"] == "cassandra", where
    assert a["db.operation.name"] == op, where
    assert a["server.address"] == upstream[0] and a["server.port"] == upstream[1], where
    assert a["autoprep.sampled_by"] in ("head", "error", "slow"), where
    if op != "PREPARE":
        assert a["cassandra.consistency.level"] == "local_one", where
    if check.get("text"):
        assert a["db.namespace"] == ks and a["db.collection.name"] == "t", where
        assert "?" in a["db.query.text"] or "<literal>" in a["db.query.text"], where
        assert a["db.query.summary"] == f"{op} t" and span["name"] == a["db.query.summary"]
        assert "autoprep.shape.id" in a and "autoprep.rewrite" in a, where
    if check.get("page"):
        assert a["cassandra.page.size"] == 5000, where
    if check.get("batch"):
        assert a["db.operation.batch.size"] == check["batch"], where
        assert "autoprep.rewrite" in a, where
    if check.get("error"):
        assert a["db.response.status_code"] == check["error"], where
        assert a["error.type"] == check["error"] and span["status"] == STATUS_ERROR, where
    else:
        assert "error.type" not in a, where


def fetch(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_spans_parented_attributed_and_without_values(upstream, collector, tmp_path, protocol,
                                                     monkeypatch):
    # The line each traced request logs (with its trace and span ids) is at debug.
    monkeypatch.setenv("AUTOPREP_TEST_LOG", "info,autoprep::otel=debug")
    endpoint = collector.grpc_url if protocol == "grpc" else collector.http_url
    admin = f"127.0.0.1:{_free_port()}"
    runs = []
    began = time.time_ns()
    with run_proxy(upstream, tmp_path, "--tracing-endpoint", endpoint,
                   "--tracing-protocol", protocol, "--tracing-sample-ratio", "1",
                   "--admission-threshold", "1", "--admin", admin,
                   "--log-format", "json") as proxy:
        for pv in (4, 5):
            cluster = make_cluster(proxy.host, proxy.port, pv, None)
            try:
                s = cluster.connect()
                ks = f"autoprep_tr_{secrets.token_hex(4)}_v{pv}"
                s.execute(f"CREATE KEYSPACE {ks} WITH replication = "
                          "{'class': 'SimpleStrategy', 'replication_factor': 1}")
                s.execute(f"CREATE TABLE {ks}.t (k bigint PRIMARY KEY, v text)")
                run = Run(s, ks)
                run.run()
                runs.append((pv, run))
                s.execute(f"DROP KEYSPACE {ks}")
            finally:
                cluster.shutdown()
        trace_ids = [t for _, r in runs for t, *_ in r.expected]
        spans = collector.wait_for(trace_ids)
        metrics = fetch(f"http://{admin}/metrics")
        shapes = fetch(f"http://{admin}/shapes")
    ended = time.time_ns()
    by_trace = {}
    for sp in spans:
        by_trace.setdefault(sp["trace_id"], []).append(sp)
    for pv, run in runs:
        for t, p, op, check in run.expected:
            found = by_trace.get(t, [])
            assert len(found) == 1, f"v{pv} {op}: {len(found)} spans in trace {t}"
            check_span(found[0], t, p, op, check, run.ks, upstream, pv)
    ours = [sp for t in trace_ids for sp in by_trace.get(t, [])]
    assert ours[0]["resource"].get("service.name") == "autoprep"
    # Times taken on the monotonic clock and placed on the wall clock by the exporter: each
    # span within the test's run, as the test's own clock reads it.
    for sp in ours:
        assert began <= sp["start"] <= sp["end"] <= ended, (began, sp["start"], sp["end"], ended)

    # Every log line is one JSON object; a traced request's line carries its ids.
    log_lines = [json.loads(line) for line in proxy.log_text().splitlines() if line.strip()]
    assert all({"timestamp", "level", "target", "message"} <= set(l) for l in log_lines)
    traced = {l.get("trace_id") for l in log_lines if l.get("message") == "request traced"}
    assert set(trace_ids) <= traced

    # The leak check: no value of any statement anywhere.
    values = [v for _, r in runs for v in r.values]
    texts = {"spans": collector.exported_text(), "autoprep log": proxy.log_text(),
             "/metrics": metrics, "/shapes": shapes}
    for i, sp in enumerate(ours):
        texts[f"span {i} ({sp['name']})"] = json.dumps(sp)
    leaks = otelcol.literals_in(texts, values)
    print(f"\n{protocol}: {len(ours)} spans checked, {len(values)} values searched in "
          f"{len(texts)} texts ({sum(len(t) for t in texts.values())} bytes): {len(leaks)} leaks")
    assert not leaks, leaks
    # The percentiles of /shapes and the per-shape histogram of /metrics are there.
    top = json.loads(shapes)["shapes"]
    assert any(sh.get("latency") and sh["latency"]["p99"] > 0 for sh in top)
    assert 'autoprep_shape_request_duration_seconds_count{shape="other"}' in metrics
    assert 'autoprep_trace_spans_total{outcome="dropped"} 0' in metrics

"""A real OpenTelemetry Collector for the tracing tests (scripts/otelcol.sh: the OTLP receiver and
the file exporter, built from the collector's Go modules), and readers of what it wrote.

`running(dir)` builds it once (into the cache directory), starts it on two free loopback ports
and stops it at the end; `Collector.spans()` reads every span of the file exporter's OTLP JSON
lines as flat dicts; `literals_in(texts, values)` is the leak check."""

import contextlib
import json
import re
import subprocess
import time
from pathlib import Path

from conftest import REPO, _free_port

SCRIPT = REPO / "scripts" / "otelcol.sh"


class Collector:
    def __init__(self, directory, grpc, http):
        self.dir, self.grpc, self.http = Path(directory), grpc, http

    @property
    def grpc_url(self):
        return f"http://127.0.0.1:{self.grpc}"

    @property
    def http_url(self):
        return f"http://127.0.0.1:{self.http}"

    def text(self):
        p = self.dir / "spans.json"
        return p.read_text(errors="replace") if p.exists() else ""

    def spans(self):
        """Every span written so far: name, kind, ids (hex), start and end (nanoseconds since
        the Unix epoch), status code, attributes as a dict, and the resource's attributes."""
        out = []
        for line in self.text().splitlines():
            if not line.strip():
                continue
            req = json.loads(line)
            for rs in req.get("resourceSpans", []):
                resource = attributes(rs.get("resource", {}).get("attributes", []))
                for ss in rs.get("scopeSpans", []):
                    for s in ss.get("spans", []):
                        out.append({
                            "name": s.get("name"),
                            "kind": s.get("kind"),
                            "trace_id": s.get("traceId", "").lower(),
                            "span_id": s.get("spanId", "").lower(),
                            "parent_span_id": s.get("parentSpanId", "").lower(),
                            "start": int(s.get("startTimeUnixNano", 0)),
                            "end": int(s.get("endTimeUnixNano", 0)),
                            "status": s.get("status", {}).get("code", 0),
                            "attributes": attributes(s.get("attributes", [])),
                            "resource": resource,
                        })
        return out

    def exported_text(self):
        """What the spans say, for the leak check: every span's name and attribute values and
        every resource attribute, one per line (not the ids and timestamps, whose digits any
        number of 7 digits may happen to match: `autoprep.shape.id` is the shape's MD5 in hex,
        and `7509d2f43825807c…` holds a standalone `43825807`)."""
        lines = []
        for s in self.spans():
            lines.append(s["name"] or "")
            lines.extend(str(v) for k, v in s["attributes"].items() if k != "autoprep.shape.id")
            lines.extend(str(v) for v in s["resource"].values())
        return "\n".join(lines)

    def wait_for(self, trace_ids, timeout=20):
        """The spans, once every one of `trace_ids` has one (or the timeout)."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans()
            seen = {s["trace_id"] for s in spans}
            if set(trace_ids) <= seen or time.monotonic() > deadline:
                return spans
            time.sleep(0.2)


def attributes(kvs):
    out = {}
    for kv in kvs:
        v = kv.get("value", {})
        if "stringValue" in v:
            out[kv["key"]] = v["stringValue"]
        elif "intValue" in v:
            out[kv["key"]] = int(v["intValue"])
        elif "boolValue" in v:
            out[kv["key"]] = v["boolValue"]
        elif "doubleValue" in v:
            out[kv["key"]] = v["doubleValue"]
        else:
            out[kv["key"]] = json.dumps(v)
    return out


def build():
    """Builds the collector; returns None or why it could not be built."""
    p = subprocess.run([str(SCRIPT), "build"], capture_output=True, text=True, timeout=1800)
    return None if p.returncode == 0 else (p.stderr or p.stdout)[-3000:]


@contextlib.contextmanager
def running(directory):
    directory = Path(directory)
    grpc, http = _free_port(), _free_port()
    subprocess.run([str(SCRIPT), "start", str(directory), str(grpc), str(http)], check=True,
                   timeout=1800)
    try:
        yield Collector(directory, grpc, http)
    finally:
        subprocess.run([str(SCRIPT), "stop", str(directory)], timeout=60)


def literals_in(texts, values):
    """[(value, where)] for every value found in any of `texts` ({where: text}). A number counts
    only standing alone (not as a part of a longer run of digits, a timestamp, a counter, nor
    of a word: a hex id such as a shape's MD5 holds runs of digits between its letters)."""
    found = []
    for v in values:
        number = v.lstrip("-").isdigit()
        pattern = (re.compile(rf"(?<![0-9A-Za-z]){re.escape(v)}(?![0-9A-Za-z])")
                   if number else None)
        for where, t in texts.items():
            if v in t and (pattern is None or pattern.search(t)):
                found.append((v, where))
    return found

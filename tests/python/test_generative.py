"""Generative differential test: seeded random statements (gen_statements.py), run directly against
Cassandra and through autoprep (admission threshold 1), must be indistinguishable.

The statements are what a legacy application sends: literals inline, rendered by the Python
driver's own client-side interpolation (`SimpleStatement` + parameters, `cassandra.encoder`), with
random values of every CQL type and their edge values, in every statement form (INSERT / UPDATE /
DELETE / SELECT, IN of one and of several elements in every position, tuple relations of every
arity including wrong ones, LWT, paging with ORDER BY, aggregates, LIMIT, text and driver
BATCHes), each shape several times with other values, with USE switches between two keyspaces,
DROP + CREATE of a table and ALTER TABLE ADD / DROP between sightings.

Each side has its own pair of keyspaces (names of equal length, scrubbed in comparisons) and runs
the identical sequence: first the whole sequence directly, then through the proxy (so nothing
slows the proxy side between a first sighting and the next statement). Per statement, compared:
every page's rows as raw cell bytes, column names, types and the keyspace / table of each column,
paging state, warnings, custom payload and v5 result metadata id, the kind of result (rows, void,
set keyspace, schema change and its target), and errors (exception class and message). At the
end every table of both keyspaces of both sides is read directly and compared in full (rows
sorted: order-independent).

While the proxy side runs, another client keeps a few cheap reads in flight on the server (see
`Noise`): on an otherwise idle server Cassandra mostly runs one connection's requests one after
the other, and a PREPARE the proxy sends after a first sighting can race the client's next
request (a USE) only when the server runs them in parallel.

The prepare pattern (issue 17; `prepare-` in the test ids, v4 and v5 LZ4 by default): every DML
statement is rendered with its literals inline and PREPAREd (as gocql does with every statement it
is given, and applications that call prepare() on each formatted statement), every third one
keeping its last value as a marker of the client's own, then EXECUTEd (a batch: a BATCH of those).
Also compared: each PREPARED answer as bytes (its id replaced by the rule it follows: MD5 of the
text, or of a keyspace and the text; the v5 result metadata id, an MD5 over keyspace names, by a
placeholder) and its warnings. It asserts that at least ANSWERED_FLOOR of those PREPAREs were
answered from their shape.

Combinations: protocol v4 / v5, without compression and with LZ4; each starts a fresh proxy with
`--admission-threshold 1 --admin 127.0.0.1:<port>` and reads its /metrics at the end: one summary
line per combination gives the statements, the differences (by class), the share of QUERYs
rewritten and the pass-through reasons. All differences of a combination are written to
`differences.txt` in its pytest tmp_path (named in the summary). The test asserts no difference and
that the proxy rewrote at least REWRITTEN_FLOOR of the literal-bearing QUERYs that were not the
first sighting of their shape.

The leak check: the proxy logs JSON (`--log-format json`) and exports a span of every request
(sampling ratio 1) to a real OpenTelemetry Collector (tests/python/otelcol.py); at the end no
literal value of the statements (quoted strings of 8+ characters, integers of 7+ digits, as
rendered) may appear in any exported span's name or attributes, log line, /metrics or /shapes.

Environment:
  AUTOPREP_GEN_TRACING  0: no collector and no spans (the log and /metrics are still searched)
  AUTOPREP_GEN_SEED   seed(s) of the generator [20240611]; a comma-separated list or a range
                      `a..b` (inclusive) runs every seed over the four combinations
  AUTOPREP_GEN_COUNT  steps (statements, USEs, DDL) per seed and combination [2500]
  AUTOPREP_GEN_NOISE  reads the other client keeps in flight during the proxy side [4]; 0: none
  AUTOPREP_GEN_PROXY_ARGS  more proxy arguments; `--rewrite false` checks the test itself (then
                      nothing may differ whatever the proxy's rewriting does)
  AUTOPREP_GEN_SHOW   how many classes of differences the failure message shows [60]
and those of conftest.py (AUTOPREP_BIN, AUTOPREP_TEST_OWN_NODE, AUTOPREP_TEST_OWN_NODE_KEEP...).

Default run (about 25 s per combination on 2 shared cores, plus the own node's start):
  cd <repo> && .venv/bin/python -m pytest tests/python/test_generative.py -q
A longer run with other seeds, one command (about 2 minutes per seed and 10000 steps):
  AUTOPREP_GEN_SEED=1..10 AUTOPREP_GEN_COUNT=10000 .venv/bin/python -m pytest tests/python/test_generative.py -q
"""

import hashlib
import os
import re
import time
import urllib.request
import zlib

import pytest
from cassandra.cluster import NoHostAvailable, ResponseFuture
from cassandra.protocol import PrepareMessage, ResultMessage, _ProtocolHandler, read_int
from cassandra.query import (BatchStatement, BatchType, PreparedStatement, SimpleStatement,
                             tuple_factory)

import gen_statements as gen
import otelcol
from conftest import _free_port, run_proxy
from difftools import Noise, own_or_shared, make_cluster, spied

COMBOS = [(4, None), (4, "lz4"), (5, None), (5, "lz4")]
# The other legacy pattern (issue 17): every DML statement rendered with its literals inline
# and PREPAREd, then EXECUTEd (as gocql does with every statement it is given); every third one
# keeps its last value as a marker of the client's own. Two combinations by default.
PREPARE_COMBOS = [(4, None), (5, "lz4")]
RUNS = ([("query", pv, c) for pv, c in COMBOS]
        + [("prepare", pv, c) for pv, c in PREPARE_COMBOS])
DML = ("SELECT", "INSERT", "UPDATE", "DELETE", "BEGIN")


def _seeds():
    s = os.environ.get("AUTOPREP_GEN_SEED", "20240611").strip()
    if ".." in s:
        a, b = s.split("..")
        return list(range(int(a), int(b) + 1))
    return [int(x) for x in s.split(",") if x.strip()]


SEEDS = _seeds()
# Requests kept in flight on the server by another client during the proxy's run (0: none).
NOISE = int(os.environ.get("AUTOPREP_GEN_NOISE", "4"))
# More arguments for the proxy; `--rewrite false` checks the test itself (nothing may differ).
PROXY_ARGS = os.environ.get("AUTOPREP_GEN_PROXY_ARGS", "").split()
COUNT = int(os.environ.get("AUTOPREP_GEN_COUNT", "2500"))
SHOW = int(os.environ.get("AUTOPREP_GEN_SHOW", "60"))
# Share of the literal-bearing DML QUERYs that are not a first sighting of their shape (and
# keyspace) that the proxy must rewrite. The rest are statements the server refuses (their shapes
# never prepare), values the encoder leaves to the server, and timestamps without a zone.
REWRITTEN_FLOOR = 0.70
# The prepare pattern: share of the PREPAREs of DML with literals inline answered from their
# shape (the rest: literals the encoder leaves to the server, statements the server refuses).
ANSWERED_FLOOR = 0.70


# --- raw results: the cells' bytes, as the server sent them --------------------------------------

class RawResultMessage(ResultMessage):
    """A RESULT whose rows keep each cell's raw bytes (None for null) instead of decoding them,
    and whose Prepared result keeps its bytes as the server wrote them (`raw_prepared`)."""

    def recv_results_prepared(self, f, protocol_version, user_type_map):
        start = f.tell()
        super().recv_results_prepared(f, protocol_version, user_type_map)
        self.raw_prepared = f.getvalue()[start:f.tell()]

    def recv_results_rows(self, f, protocol_version, user_type_map, result_metadata,
                          column_encryption_policy):
        self.recv_results_metadata(f, user_type_map)
        column_metadata = self.column_metadata or result_metadata
        rowcount = read_int(f)
        self.parsed_rows = [tuple(self.recv_row(f, len(column_metadata))) for _ in range(rowcount)]
        self.column_names = [c[2] for c in column_metadata]
        self.column_types = [c[3] for c in column_metadata]


class RawProtocolHandler(_ProtocolHandler):
    message_types_by_opcode = dict(_ProtocolHandler.message_types_by_opcode)
    message_types_by_opcode[RawResultMessage.opcode] = RawResultMessage


# --- one side ------------------------------------------------------------------------------------

class Scrub:
    def __init__(self, names):
        self.pairs = [(names["@A@"], "<A>"), (names["@B@"], "<B>")]

    def text(self, s):
        if s is None:
            return None
        for a, b in self.pairs:
            s = s.replace(a, b)
        s = re.sub(r"<Host: [^>]*>", "<Host>", s)
        return re.sub(r"127\.0\.0\.\d+:\d+", "<host:port>", s)

    def bytes(self, b):
        if b is None:
            return None
        for a, r in self.pairs:
            b = b.replace(a.encode(), r.encode())
        return b


def subst(text, names):
    for k, v in names.items():
        text = text.replace(k, v)
    return text


class Side:
    """A driver session on one side (direct or proxy) with its keyspace names."""

    def __init__(self, name, host, port, pv, compression, names):
        self.name, self.names, self.pv = name, names, pv
        self.unprepared = 0
        self.scrub = Scrub(names)
        self.cluster = make_cluster(host, port, pv, compression)
        self.cluster.profile_manager.default.row_factory = tuple_factory
        self.session = self.cluster.connect()
        self.session.client_protocol_handler = RawProtocolHandler
        gen.install_encoders(self.session.encoder)

    def close(self):
        self.cluster.shutdown()

    def send(self, statement, params):
        s = self.session
        rf = s._create_response_future(statement, params, False, None, 60)
        rf._protocol_handler = s.client_protocol_handler
        responses = spied(rf)
        s._on_request(rf)
        rf.send_request()
        return rf, responses

    def pages(self, responses):
        """What the application observes of a request's responses. An UNPREPARED answer
        (PreparedQueryNotFound) is the driver's business: it prepares the statement again and
        retries, and the application sees only the retry's answer. In the prepare pattern the
        server's prepared cache evicts (or, its admission policy, never keeps) some of the
        direct side's thousands of one-off statements, and the proxy side meets the same cache:
        such answers come at different times on both sides, so they are counted
        (`self.unprepared`), not compared."""
        kept = []
        for m in responses:
            if type(m).__name__ == "PreparedQueryNotFound":
                self.unprepared += 1
            else:
                kept.append(self.page(m))
        return tuple(kept)

    def page(self, m):
        sc = self.scrub
        if not isinstance(m, ResultMessage):   # an ERROR: its warnings and payload
            return ("ERROR", type(m).__name__, tuple(sc.text(w) for w in m.warnings or ()),
                    repr(getattr(m, "custom_payload", None)))
        kind = m.kind
        meta = None
        if m.column_metadata:
            meta = tuple((sc.text(ks), sc.text(cf), name, sc.text(t.cql_parameterized_type()))
                         for ks, cf, name, t in m.column_metadata)
        extra = None
        if getattr(m, "new_keyspace", None):
            extra = sc.text(m.new_keyspace)
        if getattr(m, "schema_change_event", None):
            extra = sc.text(repr(sorted(m.schema_change_event.items())))
        return (kind, meta, tuple(m.parsed_rows) if m.parsed_rows is not None else None,
                sc.bytes(m.paging_state), tuple(sc.text(w) for w in m.warnings or ()),
                repr(m.custom_payload), getattr(m, "result_metadata_id", None), extra)

    def label_id(self, qid, text):
        """Which rule a prepared id follows (`Cassandra's QueryProcessor.computeId`): MD5 of the
        text, or of a keyspace of this side and the text; ids differ between sides (their
        keyspace names do), the rule must not."""
        for label, prefix in (("text", ""), ("A+text", self.names["@A@"]),
                              ("B+text", self.names["@B@"])):
            if hashlib.md5((prefix + text).encode()).digest() == qid:
                return label
        return "other id " + qid.hex()

    def prepare(self, text):
        """PREPAREs `text` as Session.prepare does; returns the statement and what the client
        observes of the answer: the Prepared message's bytes (the id replaced by the rule it
        follows, keyspace names scrubbed) and the warnings."""
        s = self.session
        rf = ResponseFuture(s, PrepareMessage(query=text, keyspace=None), query=None, timeout=60)
        rf._protocol_handler = s.client_protocol_handler
        responses = spied(rf)
        rf.send_request()
        m = rf.result().one()
        ps = PreparedStatement.from_message(
            m.query_id, m.bind_metadata, m.pk_indexes, self.cluster.metadata, text, None, self.pv,
            m.column_metadata, m.result_metadata_id, self.cluster.column_encryption_policy)
        self.cluster.add_prepared(m.query_id, ps)
        r = responses[-1]
        label = self.label_id(m.query_id, text)
        raw = r.raw_prepared.replace(m.query_id, label.encode())
        if m.result_metadata_id:
            # An MD5 of the result metadata, whose keyspace names differ between sides (the
            # metadata itself is compared, scrubbed).
            raw = raw.replace(m.result_metadata_id, b"<result metadata id>")
        warnings = tuple(self.scrub.text(w.replace(m.query_id.hex(), label))
                         for w in r.warnings or ())
        return ps, ("PREPARED", label, self.scrub.bytes(raw), warnings)

    def run(self, step, pattern="query"):
        """What a client can observe of one step; `pattern` "prepare": DML is rendered with its
        literals inline and prepared, then executed."""
        if pattern == "prepare" and (step.kind == "batch" or step.kind == "query" and
                                     step.text.lstrip().upper().startswith(DML)):
            return self.run_prepared(step)
        names = self.names
        if step.kind == "batch":
            st = BatchStatement(batch_type=getattr(BatchType, step.batch_type),
                                session=self.session)
            for text, params in step.children:
                st.add(SimpleStatement(subst(text, names)), params)
            params = None
        else:
            st = SimpleStatement(subst(step.text, names), fetch_size=step.fetch)
            params = step.params or None
        responses = []
        try:
            rf, responses = self.send(st, params)
            rs = rf.result()
            while rs.has_more_pages:
                rs.fetch_next_page()
            return ("ok", self.pages(responses))
        except NoHostAvailable as e:
            # The driver retried on the next host (there is none) after the server's error,
            # which `responses` holds. Its per-host error map is filled by the thread that
            # got the answer while another runs the retry, so whether it lists the host is
            # a race inside the driver (seen on a busy 2-core machine): not compared.
            return ("error", self.pages(responses), type(e).__name__,
                    e.args[0] if e.args else "")
        except Exception as e:  # the class and message are what the client sees
            return ("error", self.pages(responses), type(e).__name__,
                    self.scrub.text(str(e)))

    def run_prepared(self, step):
        """A step of the prepare pattern: each statement's text rendered with its literals,
        PREPAREd, and EXECUTEd (a batch: a BATCH of those). Every third statement keeps its
        last value as a marker of the client's own."""
        names = self.names
        texts = ([(t, p) for t, p in step.children] if step.kind == "batch"
                 else [(step.text, step.params)])
        prepared, observed = [], []
        responses = []
        try:
            for text, params in texts:
                # Chosen from the text before the keyspace names: the same on both sides.
                keep_marker = zlib.crc32(text.encode()) % 3 == 0
                text, params = subst(text, names), tuple(params or ())
                bound = ()
                if params and keep_marker:
                    head, _, tail = text.rpartition("%s")
                    text, params, bound = head + "?" + tail, params[:-1], params[-1:]
                ps, obs = self.prepare(gen.render(text, params) if params else text)
                prepared.append((ps, bound))
                observed.append(obs)
            if step.kind == "batch":
                st = BatchStatement(batch_type=getattr(BatchType, step.batch_type),
                                    session=self.session)
                for ps, bound in prepared:
                    st.add(ps, bound)
            else:
                ps, bound = prepared[0]
                st = ps.bind(bound)
                st.fetch_size = step.fetch
            rf, responses = self.send(st, None)
            rs = rf.result()
            while rs.has_more_pages:
                rs.fetch_next_page()
            return ("ok", self.pages(responses), ("PREPARES", *observed))
        except NoHostAvailable as e:
            return ("error", self.pages(responses), type(e).__name__,
                    e.args[0] if e.args else "", ("PREPARES", *observed))
        except Exception as e:
            return ("error", self.pages(responses), type(e).__name__,
                    self.scrub.text(str(e)), ("PREPARES", *observed))

    def table(self, names, slot, table):
        """Every row of a table of `names` (order-independent), its columns, or the error."""
        ks = names[f"@{slot}@"]
        sc = Scrub(names)
        st = SimpleStatement(f"SELECT * FROM {ks}.{table}", fetch_size=1000)
        try:
            rf, responses = self.send(st, None)
            rs = rf.result()
            while rs.has_more_pages:
                rs.fetch_next_page()
            meta = [(sc.text(ks), sc.text(cf), name, sc.text(t.cql_parameterized_type()))
                    for ks, cf, name, t in responses[0].column_metadata]
            rows = sorted((r for m in responses for r in m.parsed_rows),
                          key=lambda row: [(c is None, c or b"") for c in row])
            return ("ok", meta, rows)
        except Exception as e:
            return ("error", type(e).__name__, sc.text(str(e)))


# --- another client of the server ------------------------------------------------------------

# --- fixtures ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def node(own_node, request):
    return own_or_shared(own_node, request)


def read_metrics(admin):
    with urllib.request.urlopen(f"http://{admin}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r'autoprep_queries_total\{outcome="(\w+)",reason="([^"]*)"\} (\d+)', line)
        if m:
            out[(m.group(1), m.group(2))] = int(m.group(3))
        m = re.match(r'autoprep_literal_(prepares|executes)_total'
                     r'\{outcome="(\w+)",reason="([^"]*)"\} (\d+)', line)
        if m:
            out[(m.group(1), m.group(2), m.group(3))] = int(m.group(4))
    return out


def setup_schema(session, names, ddl):
    for cql in ddl:
        session.execute(subst(cql, names), timeout=120)


def drop_keyspaces(session, names):
    for ks in names.values():
        try:
            session.execute(f"DROP KEYSPACE IF EXISTS {ks}", timeout=120)
        except Exception as e:  # best effort; the next run uses other names
            print(f"could not drop {ks}: {e}")


def _message(obs):
    """The server's message of an error observation, values blurred (for grouping)."""
    m = re.search(r'message="(.*)"', obs[3], re.S)
    text = m.group(1) if m else f"{obs[2]}: {obs[3]}"
    text = re.sub(r"'(?:[^']|'')*'", "'…'", text, flags=re.S)
    text = re.sub(r"\(.*\)|\[.*\]|\{.*\}", "(…)", text, flags=re.S)
    return re.sub(r"-?\d+", "N", text)[:110]


def classify(do, po, diverged):
    """A short label of how a direct observation `do` and a proxy one `po` differ. `diverged`:
    an earlier write already differed, so differing rows may be its consequence."""
    prepares = lambda obs: obs[-1] if obs[-1][:1] == ("PREPARES",) else None
    if prepares(do) != prepares(po):
        return f"other PREPARED answer: direct {prepares(do)} / proxy {prepares(po)}"[:300]
    if do[0] != po[0]:
        if do[0] == "ok":
            return f"direct OK, proxy error: {_message(po)}"
        return f"direct error, proxy OK: {_message(do)}"
    if do[0] == "error":
        if (do[2], _message(do)) != (po[2], _message(po)):
            return f"other error: direct {_message(do)} / proxy {_message(po)}"
        if do[2:] != po[2:]:
            return "error message differs in its values"
    dp, pp = do[1], po[1]
    rows = lambda pages: [r for p in pages if p[0] != "ERROR" for r in (p[2] or ())]
    for a, b in zip(dp, pp):
        if a[0] != b[0]:
            return f"another result kind ({a[0]} / {b[0]})"
        if a[0] == "ERROR":
            continue
        if a[1] != b[1]:
            if a[1] and b[1] and len(a[1]) == len(b[1]) and \
                    [c[0] for c in a[1]] != [c[0] for c in b[1]]:
                return "result of the other keyspace's table"
            return "other columns" + (" (an earlier write already differed)" if diverged else "")
        if a[4] != b[4]:
            return f"other warnings: direct {list(a[4])} / proxy {list(b[4])}"
    if rows(dp) != rows(pp):
        return "other rows" + (" (an earlier write already differed)" if diverged else "")
    if len(dp) != len(pp) or [a[3] for a in dp] != [b[3] for b in pp]:
        return "other paging"
    if [a[6:] for a in dp] != [b[6:] for b in pp]:
        return "other result metadata id / result"
    if [a[5] for a in dp] != [b[5] for b in pp]:
        return "other custom payload"
    return "other"


WRITES = ("INSERT", "UPDATE", "DELETE", "BEGIN", "<DRIVER")


def short(obs, limit=int(os.environ.get("AUTOPREP_GEN_SHORT", "700"))):
    s = repr(obs)
    return s if len(s) <= limit else s[:limit] + f"... ({len(s)} chars)"


# --- the leak check --------------------------------------------------------------------------------

LEAK_STRING = re.compile(r"'((?:[^']|'')*)'")
# Not the digit groups of a UUID (dashes around them) or of a decimal.
LEAK_INTEGER = re.compile(r"(?<![\w.-])-?(\d{7,})(?![\w.-])")


def literal_values(steps):
    """The values a leak check looks for: quoted strings of 8+ characters and integers of 7+
    digits, as the statements render them (DDL left out: its strings are options), each with at
    least 4 distinct characters (`00000000` or `1000000` is nobody's data)."""
    out = set()
    for st in steps:
        if st.kind in ("ddl", "use"):
            continue
        text = st.rendered()
        out.update(m.replace("''", "'") for m in LEAK_STRING.findall(text) if len(m) >= 8)
        out.update(LEAK_INTEGER.findall(text))
    return sorted(v for v in out if len(set(v)) >= 4)


@pytest.fixture(scope="module")
def gen_collector(request):
    """The collector the proxies export their spans to (conftest's), or None when
    AUTOPREP_GEN_TRACING=0."""
    if os.environ.get("AUTOPREP_GEN_TRACING", "1") == "0":
        return None
    return request.getfixturevalue("collector")


def fetch_text(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


# --- the test ------------------------------------------------------------------------------------

@pytest.mark.timeout(240 + int(COUNT * 0.4))
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("pattern,pv,compression", RUNS,
                         ids=[("" if p == "query" else "prepare-") + f"v{v}-{c or 'none'}"
                              for p, v, c in RUNS])
def test_generative_differential(node, run_id, seed, pattern, pv, compression, tmp_path,
                                 record_property, capsys, gen_collector):
    combo = f"v{pv}-{compression or 'none'}"
    generator = gen.Generator(f"{seed}/{combo}", COUNT)
    if pattern == "prepare":
        combo = "prepare-" + combo
    steps = generator.steps()
    tag = f"{run_id}{pv}{(compression or 'n')[0]}{pattern[0]}"
    names = {side: {"@A@": f"gen{tag}{side[0]}a", "@B@": f"gen{tag}{side[0]}b"}
             for side in ("direct", "proxy")}
    ddl = gen.schema_ddl(gen.initial_schema())

    admin = f"127.0.0.1:{_free_port()}"
    t0 = time.monotonic()
    setup = make_cluster(node.host, node.port, 4, None)
    setup_session = setup.connect()
    try:
        for side in names.values():
            setup_schema(setup_session, side, ddl)
        t_schema = time.monotonic() - t0
        tracing = () if gen_collector is None else (
            "--tracing-endpoint", gen_collector.http_url, "--tracing-sample-ratio", "1")
        with run_proxy((node.host, node.port), tmp_path, "--admission-threshold", "1",
                       "--admin", admin, "--log-format", "json", *tracing,
                       *PROXY_ARGS) as proxy:
            direct = Side("direct", node.host, node.port, pv, compression, names["direct"])
            via = Side("proxy", proxy.host, proxy.port, pv, compression, names["proxy"])
            try:
                for s in (direct, via):
                    s.session.execute(f"USE {s.names['@A@']}")
                t1 = time.monotonic()
                d_obs = [direct.run(st, pattern) for st in steps]
                t_direct = time.monotonic() - t1
                noise = Noise(node.host, node.port, NOISE)
                try:
                    t1 = time.monotonic()
                    p_obs = [via.run(st, pattern) for st in steps]
                    t_proxy = time.monotonic() - t1
                finally:
                    noise.stop()
                metrics = read_metrics(admin)
                exposed = {"/metrics": fetch_text(f"http://{admin}/metrics"),
                           "/shapes": fetch_text(f"http://{admin}/shapes?limit=1000")}
                unprepared = (direct.unprepared, via.unprepared)
                # Both sides' tables are read directly.
                tables = [(slot, t, direct.table(names["direct"], slot, t),
                           direct.table(names["proxy"], slot, t))
                          for slot, t in generator.final_tables()]
            finally:
                direct.close()
                via.close()
    finally:
        for side in names.values():
            drop_keyspaces(setup_session, side)
        setup.shutdown()
    elapsed = time.monotonic() - t0
    # The leak check, once the proxy has stopped (its last spans flushed).
    # An inet value equal to the node's or the proxy's own address shows as where it is.
    values = [v for v in literal_values(steps) if v not in (node.host, proxy.host)]
    exposed["autoprep log"] = proxy.log_text()
    if gen_collector is not None:
        exposed["spans"] = gen_collector.exported_text()
    leaks = otelcol.literals_in(exposed, values)

    differences = []
    classes = {}      # label -> [count, first example]
    diverged = False
    first_write = None
    for i, (st, do, po) in enumerate(zip(steps, d_obs, p_obs)):
        if do == po:
            continue
        label = classify(do, po, diverged)
        text = Scrub(names["direct"]).text(subst(st.rendered(), names["direct"]))
        if text.lstrip().upper().startswith(WRITES) and not diverged:
            diverged, first_write = True, i
        entry = (f"#{i} [{st.tag}] {text[:400]}" + (f" (fetch {st.fetch})" if st.fetch else "")
                 + f"\n    {label}\n    direct: {short(do)}\n    proxy:  {short(po)}")
        differences.append(entry)
        classes.setdefault(label, [0, entry])[0] += 1
    table_diffs = [f"table <{slot}>.{t}:\n    direct: {short(d, 1500)}\n    proxy:  {short(p, 1500)}"
                   for slot, t, d, p in tables if d != p]

    rewritten = metrics.get(("rewritten", ""), 0)
    passthrough = {k[1]: n for k, n in metrics.items()
                   if len(k) == 2 and k[0] == "passthrough" and n}
    # The prepare pattern: PREPAREs with literals answered from their shape, and EXECUTEs (and
    # batch children) of them run as the shape.
    answered = metrics.get(("prepares", "answered", ""), 0)
    prepares_passed = {k[2]: n for k, n in metrics.items()
                       if k[:2] == ("prepares", "passed") and n}
    executes = metrics.get(("executes", "rewritten", ""), 0)
    executes_passed = {k[2]: n for k, n in metrics.items()
                       if k[:2] == ("executes", "passed") and n}
    literal_prepares = answered + sum(prepares_passed.values())
    answered_share = answered / literal_prepares if literal_prepares else 0.0
    total = rewritten + sum(passthrough.values())
    # Literal-bearing DML: everything but USE, DDL and statements without literals.
    not_candidates = {"use", "not dml", "no literals"}
    candidates = rewritten + sum(n for r, n in passthrough.items() if r not in not_candidates)
    # First sightings cannot be rewritten (the shape is prepared in the background then).
    repeats = candidates - passthrough.get("preparing", 0)
    share = rewritten / candidates if candidates else 0.0
    repeat_share = rewritten / repeats if repeats else 0.0
    errors = sum(1 for o in d_obs if o[0] == "error")
    summary = (f"{combo} seed {seed}: {len(steps)} statements ({errors} errors directly), "
               f"{len(differences)} differences + {len(table_diffs)} table differences; "
               f"UNPREPARED answers the driver retried: direct {unprepared[0]}, "
               f"proxy {unprepared[1]}; "
               f"rewritten {rewritten}/{candidates} literal-bearing QUERYs = {share:.1%}, "
               f"{repeat_share:.1%} of those not seen for the first time "
               f"({rewritten}/{total} of all QUERYs); pass-through: "
               + ", ".join(f"{r or '?'}={n}" for r, n in sorted(passthrough.items(),
                                                                  key=lambda x: -x[1]))
               + (f"; literal PREPAREs answered from their shape {answered}/{literal_prepares} = "
                  f"{answered_share:.1%} (passed: "
                  + ", ".join(f"{r}={n}" for r, n in sorted(prepares_passed.items(),
                                                            key=lambda x: -x[1]))
                  + f"), their EXECUTEs run as the shape {executes} (passed: "
                  + ", ".join(f"{r}={n}" for r, n in executes_passed.items()) + ")"
                  if pattern == "prepare" else "")
               + f"; leak check: {len(values)} values in "
                 + ", ".join(f"{k} ({len(v)} bytes)" for k, v in exposed.items())
                 + f": {len(leaks)} found"
               + f"; schema {t_schema:.0f} s, direct {t_direct:.0f} s, proxy {t_proxy:.0f} s, "
                 f"total {elapsed:.0f} s")
    report = tmp_path / "differences.txt"
    by_class = "".join(f"\n  {n} x {label}" for label, (n, _) in
                       sorted(classes.items(), key=lambda x: -x[1][0]))
    report.write_text(summary + "\n\nClasses (count, label):" + by_class +
                      "\n\nFirst example of each class:\n" +
                      "\n".join(e for _, e in classes.values()) +
                      "\n\nAll differences:\n" + "\n".join(differences) + "\n" +
                      "\n".join(table_diffs) + "\n")
    if classes:
        summary += f"; {len(classes)} classes of differences (all in {report})" + (
            f", the first write that differed is #{first_write} (data read later may differ "
            "because of it)" if first_write is not None else "") + ":" + by_class
    with capsys.disabled():
        print("\n" + summary)
    record_property("generative", summary)
    assert not differences and not table_diffs, (
        summary + "\n\nFirst example of each class:\n" +
        "\n".join(e for _, e in list(classes.values())[:SHOW]) + ("\n" if table_diffs else "")
        + "\n".join(table_diffs[:SHOW]))
    assert not leaks, f"literal values exposed: {leaks[:20]}"
    if "--rewrite" not in PROXY_ARGS and pattern == "query":
        assert repeat_share >= REWRITTEN_FLOOR, summary
    if "--rewrite" not in PROXY_ARGS and pattern == "prepare":
        assert answered_share >= ANSWERED_FLOOR and executes > 0, summary

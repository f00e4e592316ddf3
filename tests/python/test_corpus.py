"""Acceptance of auto-prepare, points 1 and 2: the differential corpus (corpus.py) through autoprep
(admission threshold 1) and directly, on protocol v4 and v5, with and without LZ4.

Every statement is an unprepared QUERY from the Python driver (SimpleStatement; the client's own
`?` values go in the QUERY's value list). Each combination starts a fresh proxy and runs the
corpus twice on each side: run 1 holds the first sightings, run 2 is the steady state. Rows,
column names and types, every page (rows, paging state, warnings, v5 result metadata id) and
errors (exception class and message) must be identical, modulo the side's keyspace names.

That rewriting really happened is read from the server: `system_views.cql_metrics`
(`regular_statements_executed` counts QUERYs, `prepared_statements_executed` EXECUTEs) before and
after every single statement, on a connection of its own that bypasses the proxy. The proxy's
own counters are not reachable from Python, and a server-side count is the stronger evidence: it
is what the server did, not what the proxy believes it did. On the tests' own node nothing else
talks to the server, so each statement's deltas are exact (the read itself counts one regular
statement and is subtracted):
  * directly, a statement shows only regular executions (one per request, i.e. per page), or
    none when it fails before execution (syntax, unknown names, a bad literal);
  * through autoprep, per statement, regular + prepared equals the direct regular count, in
    both runs (nothing runs twice or is lost);
  * in run 2, a statement without a `pt` annotation in the corpus runs only as prepared
    executions, one with `pt` only as regular ones.
When the own node cannot start, the corpus runs on the shared node and only lower bounds hold.
"""

import pytest

import corpus
from conftest import run_proxy
from difftools import own_or_shared, Metrics, connect, make_cluster, run_statement

COMBOS = [(4, None), (4, "lz4"), (5, None), (5, "lz4")]

# The server's counters are compared statement by statement: no routing, whose cluster-view
# reads (four QUERYs of system tables at the first routable request) would count against the
# statement that asked for them, and no control group (a control execution is a QUERY where the
# counters expect an EXECUTE). Both have their own tests (test_routing.py, test_control.py).
EXACT = ("--routing", "false", "--control-fraction", "0")


@pytest.fixture(scope="module")
def node(own_node, request):
    return own_or_shared(own_node, request)


@pytest.fixture(scope="module")
def metrics(node):
    m = Metrics(node)
    yield m
    m.close()


@pytest.fixture(scope="module")
def sides(node, run_id):
    """Keyspace names of both sides (all of equal length, so paging states can be compared
    byte for byte after scrubbing), with the schema created directly."""
    names = {"direct": (f"dt{run_id}d", f"du{run_id}d"),
             "proxy": (f"dt{run_id}p", f"du{run_id}p")}
    cluster = make_cluster(node.host, node.port, 4, None)
    session = cluster.connect()
    try:
        for ks, ks2 in names.values():
            for cql in corpus.schema(ks, ks2):
                # One node: a schema change is applied before it is answered.
                session.execute(cql, timeout=120)
        yield names
    finally:
        for ks, ks2 in names.values():
            for k in (ks, ks2):
                session.execute(f"DROP KEYSPACE IF EXISTS {k}", timeout=120)
        cluster.shutdown()


def run_pass(session, names, pv, metrics):
    """Runs the whole corpus once; per statement: (observed, requests, regular, prepared)."""
    ks, ks2 = names
    out = []
    before = metrics.read()
    for st in corpus.CORPUS:
        observed, requests = run_statement(session, st, ks, ks2, pv)
        after = metrics.read()
        # The read of the counters is itself one regular statement.
        out.append((observed, requests, after[0] - before[0] - 1, after[1] - before[1]))
        before = after
    return out


# --- the test ------------------------------------------------------------------------------------

def describe(i, st):
    return f"#{i} {st.text[:110]!r}" + (f" values={st.values}" if st.values else "")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("pv,compression", COMBOS, ids=[f"v{p}-{c or 'none'}" for p, c in COMBOS])
def test_corpus_differential(node, sides, metrics, pv, compression, tmp_path, record_property):
    assert len(corpus.CORPUS) >= 200
    with run_proxy((node.host, node.port), tmp_path, "--admission-threshold", "1",
                   *EXACT) as proxy:
        d_cluster, d_session = connect(node.host, node.port, pv, compression, sides["direct"][0])
        p_cluster, p_session = connect(proxy.host, proxy.port, pv, compression, sides["proxy"][0])
        try:
            runs = []
            for _ in (1, 2):
                d = run_pass(d_session, sides["direct"], pv, metrics)
                p = run_pass(p_session, sides["proxy"], pv, metrics)
                runs.append((d, p))
        finally:
            d_cluster.shutdown()
            p_cluster.shutdown()

    differences, counting = [], []
    totals = []
    for run, (d, p) in enumerate(runs, 1):
        t = {"direct_regular": 0, "proxy_regular": 0, "proxy_prepared": 0}
        for i, (st, (do, dn, dreg, dprep), (po, pn, preg, pprep)) in enumerate(
                zip(corpus.CORPUS, d, p)):
            if do != po:
                differences.append(f"run {run} {describe(i, st)}\n    direct: {do}\n    proxy:  {po}")
            t["direct_regular"] += dreg
            t["proxy_regular"] += preg
            t["proxy_prepared"] += pprep
            if not node.exclusive:
                continue
            what = f"run {run} {describe(i, st)}: direct regular={dreg} prepared={dprep}; " \
                   f"proxy regular={preg} prepared={pprep}; requests={dn}"
            # A USE counts twice: the driver repeats it on its pool connection.
            executions = (0, dn, 2 * dn) if st.pt == corpus.USE else (0, dn)
            if dprep != 0 or dreg not in executions or preg + pprep != dreg:
                counting.append(what)
            elif run == 2 and st.pt is None and preg != 0:
                counting.append(what + " (expected prepared executions only)")
            elif run == 2 and st.pt is not None and pprep != 0:
                counting.append(what + f" (annotated as not rewritten: {st.pt})")
        totals.append(t)

    errors = sum(1 for do, _, _, _ in runs[1][0] if do[0] == "error")
    summary = (f"v{pv}/{compression or 'none'} on {'own' if node.exclusive else 'shared'} node, "
               f"{len(corpus.CORPUS)} statements ({errors} errors): " +
               "; ".join(f"run {r}: {t}" for r, t in enumerate(totals, 1)))
    print("\n" + summary)
    record_property("cql_metrics", summary)
    assert not differences, f"{len(differences)} differences:\n" + "\n".join(differences[:40])
    assert not counting, f"{len(counting)} counting mismatches:\n" + "\n".join(counting[:60])
    # Rewriting happened, and in steady state it is the rule.
    steady = totals[1]
    expected_prepared = sum(
        dn for st, (do, dn, dreg, _) in zip(corpus.CORPUS, runs[1][0]) if st.pt is None and dreg)
    assert expected_prepared > 300
    if node.exclusive:
        assert steady["proxy_prepared"] == expected_prepared, summary
        assert steady["proxy_regular"] == steady["direct_regular"] - expected_prepared, summary
    else:
        assert steady["proxy_prepared"] >= expected_prepared, summary

"""Unit tests of the soak's pure parts (no cluster): the schedule, the ledger check, the drift
and the error classes. Run: .venv/bin/python -m pytest tests/soak -q"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import drift   # noqa: E402
import errors   # noqa: E402
import faults   # noqa: E402
import ledger   # noqa: E402


def test_schedule_five_minutes():
    ev = faults.schedule(300)
    actions = [a for _, a, _ in ev]
    assert actions.count("drain") == 1
    assert actions.count("kill") == actions.count("start") == 2
    # every kill is followed by the start of the same node
    kills = [(t, n) for t, a, n in ev if a == "kill"]
    starts = [(t, n) for t, a, n in ev if a == "start"]
    assert [n for _, n in kills] == [n for _, n in starts] == [1, 2]
    assert all(s > k for (k, _), (s, _) in zip(kills, starts))
    assert all(t + (faults.PAUSE_SECONDS if a == "pause" else 0) <= 300 for t, a, _ in ev)
    drain = next(t for t, a, _ in ev if a == "drain")
    assert drain < 300


def test_schedule_thirty_minutes_and_short():
    ev = faults.schedule(1800)
    assert [a for _, a, _ in ev].count("kill") == 10
    assert [a for _, a, _ in ev].count("drain") == 1
    short = faults.schedule(120)
    assert {a for _, a, _ in short} == {"kill", "start", "pause", "schema", "drain"}
    assert [t for t, _, _ in short] == sorted(t for t, _, _ in short)


def e(s, op, row=None, k="a"):
    return {"tb": "kv", "k": k, "s": s, "op": op, "row": row, "kind": "x", "at": 0, "stmt": k}


def test_possible_states():
    assert ledger.possible_states([e("ack", "ins", {"v": 1})]) == [{"v": 1}]
    st = ledger.possible_states([e("ack", "ins", {"v": 1, "n": 2}), e("unk", "upd", {"v": 3})])
    assert {"v": 1, "n": 2} in st and {"v": 3, "n": 2} in st and len(st) == 2
    assert ledger.possible_states([e("ack", "ins", {"v": 1}), e("ack", "del")]) == [None]


def test_check_counts_lost():
    led = ledger.Ledger({
        ("kv", "a"): [e("ack", "ins", {"v": 1}, "a")],
        ("kv", "b"): [e("ack", "ins", {"v": 2}, "b"), e("ack", "del", None, "b")],
        ("kv", "c"): [e("ack", "ins", {"v": 3}, "c")],
        ("kv", "d"): [e("unk", "ins", {"v": 4}, "d")],
    })
    rows = {"a": {"v": 1, "n": None}, "c": {"v": 99}}
    r = led.check(lambda tb: rows)
    assert (r.acknowledged, r.unknown, r.keys_checked, r.lost) == (4, 1, 3, 1)
    assert r.samples[0]["key"] == "c"


def test_drift_segments_and_steady():
    samples = []
    # process 1 from 0 to 200 s, flat at 100; process 2 from 200 s, flat at 50; a non-steady
    # dip in process 1 must not count.
    for t in range(0, 400, 2):
        pid = 1 if t < 200 else 2
        rss = 100 if pid == 1 else 50
        steady = not (110 <= t < 170)
        samples.append({"t": t, "pid": pid, "rss_kib": rss if steady else 10, "fds": 20,
                        "steady": steady})
    d = drift.drift(samples, 0, 400, {1: 0, 2: 200}, window=30, settle=10)
    assert d["rss_kib"]["drift"] == 0.0 and len(d["rss_kib"]["segments"]) == 2
    d_all = drift.drift(samples, 0, 400, {1: 0, 2: 200}, window=30, settle=10,
                        steady_only=False)
    assert d_all["rss_kib"]["drift"] > 0.5
    # growth from 100 to 110 within one process: (110 - 100) / mean
    grow = [{"t": t, "pid": 1, "rss_kib": 100 + t // 40, "fds": 20, "steady": True}
            for t in range(0, 400, 2)]
    g = drift.drift(grow, 0, 400, {1: 0}, window=30, settle=0)["rss_kib"]
    assert 0.05 < g["drift"] < 0.1


def test_classify():
    from cassandra import WriteTimeout
    from cassandra.cluster import NoHostAvailable
    from cassandra.connection import ConnectionShutdown
    from cassandra.protocol import OverloadedErrorMessage
    assert errors.classify(WriteTimeout("m", write_type=0)) == "WriteTimeout 0x1100 SIMPLE"
    assert errors.classify(NoHostAvailable("m", {
        "a": OverloadedErrorMessage(0x1001, "m", None), "b": ConnectionShutdown("x")})) == \
        "NoHostAvailable[ConnectionShutdown; Overloaded 0x1001]"
    assert errors.extra_classes({"a": 1, "b": 1}, {"a": 2}) == ["b"]


def test_drift_compares_like_with_like():
    # RSS follows the connection count (40 or 30 connections), not time: no drift at an equal
    # count; the modal count (40) is the one compared.
    samples = [{"t": t, "pid": 1, "conns": 40 if (t // 50) % 3 else 30,
                "rss_kib": 1000 if (t // 50) % 3 else 900, "fds": 50, "steady": True}
               for t in range(0, 600, 2)]
    d = drift.drift(samples, 0, 600, {1: 0}, window=30, settle=0)["rss_kib"]
    assert d["drift"] == 0.0 and d["segments"][0]["conns"] == 40
    assert d["segments"][0]["windows"] >= 10
    leak = [{**s, "rss_kib": s["rss_kib"] + s["t"] // 6} for s in samples]
    assert drift.drift(leak, 0, 600, {1: 0}, window=30, settle=0)["rss_kib"]["drift"] > 0.05


def test_drift_says_which_descriptors_changed():
    # Three closed sockets held from t=300 on, at the same 32 established connections.
    samples = [{"t": t, "pid": 1, "conns": 32, "rss_kib": 1000, "rss_anon_kib": 300,
                "rss_file_kib": 700, "fds": 52 + (3 if t >= 300 else 0), "steady": True,
                "fd_kinds": {"tcp_established": 32, "socket_other": 3 if t >= 300 else 0}}
               for t in range(0, 600, 2)]
    d = drift.drift(samples, 0, 600, {1: 0}, window=30, settle=0)
    seg = d["fds"]["segments"][0]
    assert d["fds"]["drift"] > 0.05 and d["rss_anon_kib"]["drift"] == 0.0
    assert seg["kinds_low"]["socket_other"] == 0 and seg["kinds_high"]["socket_other"] == 3


def test_read_proc_splits_rss_and_descriptors():
    got = drift.read_proc(os.getpid())
    rss, fds, _, extra = got
    assert rss >= extra["rss_anon_kib"] and extra["rss_file_kib"] is not None
    assert fds >= sum(extra["fd_kinds"].values()) > 0

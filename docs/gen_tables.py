#!/usr/bin/env python3
"""The book's measurement tables, generated from the benchmarks' stored results.

    python3 docs/gen_tables.py            rewrite every generated table in docs/src
    python3 docs/gen_tables.py --check    exit 1, naming each stale table, if any differs
    python3 docs/gen_tables.py --list     the tables and the result files each reads

A generated table sits in a page between two marker comments:

    <!-- table:NAME begin -->
    ...
    <!-- table:NAME end -->

and everything between them is replaced by TABLES[NAME]() (see below), built from the JSON
files in benches/results that the savings and footprint benchmarks wrote. A table whose figures
are in no JSON file (criterion's console output, the e2e load generator's) stays hand-written in
its page, with a comment that says why.

Rounding: every figure is the stored value rounded half up at the digit shown (the stored
decimal, not its binary approximation: 28.45 shows as 28.5), so a figure reads the same
whichever tool formats it. Python 3 standard library only.
"""

import argparse
import json
import pathlib
import re
import statistics
import sys
from decimal import ROUND_HALF_UP, Decimal

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benches" / "results"
SRC = ROOT / "docs" / "src"

MARKER = re.compile(
    r"(<!-- table:(?P<name>[a-z0-9-]+) begin -->\n)(?P<body>.*?)(<!-- table:(?P=name) end -->)",
    re.S,
)
MINUS = "\u2212"  # the tables print negative figures with a minus sign, not a hyphen
DASH = "\u2013"  # an en dash: "no figure" in a cell, and ranges


def load(name):
    """A stored result, by its file name in benches/results."""
    with open(RESULTS / name, encoding="utf-8") as f:
        return json.load(f)


def fixed(x, digits):
    """x rounded half up to `digits` decimals, with a minus sign for negative figures."""
    q = Decimal(1).scaleb(-digits)
    s = str(Decimal(repr(float(x))).quantize(q, rounding=ROUND_HALF_UP))
    if s.startswith("-"):
        s = MINUS + s[1:]
    return s


def signed(x, digits):
    """fixed(), with a plus sign on positive figures."""
    s = fixed(x, digits)
    return s if s.startswith(MINUS) else "+" + s


def count(x):
    """A whole number with thousands separators: 13,247."""
    return f"{int(Decimal(repr(float(x))).quantize(Decimal(1), rounding=ROUND_HALF_UP)):,}"


def trim(x, digits=2):
    """At most `digits` decimals, trailing zeros dropped: 2.14, 2, 0."""
    s = fixed(x, digits)
    if "." in s:
        s = s.rstrip("0").rstrip(".")
    return "0" if s in ("-0", MINUS + "0") else s


def ms(us):
    """Microseconds as milliseconds: one decimal below 100 ms, none above."""
    v = us / 1000
    return f"{fixed(v, 1 if v < 100 else 0)} ms"


def us(v, digits=None):
    """Microseconds: one decimal below 100, none above (unless `digits` says)."""
    if v is None:
        return DASH
    return f"{fixed(v, digits if digits is not None else (1 if v < 100 else 0))} µs"


def modes(result):
    """A savings result's per-mode medians, by mode name."""
    return {m["mode"]: m for m in result["modes"]}


def ratios(result):
    """A savings result's ratios (median and per-round values), by name."""
    return {r["name"]: r for r in result["ratios"]}


def table(header, align, rows):
    """A Markdown table; `align` is one of "l", "r" per column."""
    def line(cells):
        return "|" + "|".join(f" {c} " if c else " " for c in cells) + "|"

    out = [line(header), "|" + "|".join("---" if a == "l" else "---:" for a in align) + "|"]
    out += [line(r) for r in rows]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# One function per table. Each names its files in FILES so that --list can say what it reads.

FILES = {}


def reads(*names):
    def mark(f):
        FILES[f.__name__.replace("_", "-")] = names
        return f
    return mark


@reads("insert-pinned-2026-11-22.json")
def insert_pinned():
    """The single node's insert workload, pinned, 12 rounds (results: savings)."""
    m = modes(load("insert-pinned-2026-11-22.json"))
    labels = [("direct-unprepared", "directly unprepared"), ("autoprep", "through autoprep"),
              ("direct-prepared", "directly prepared"),
              ("proxied-prepared", "prepared, through autoprep")]
    rows = []
    for mode, label in labels:
        r = m[mode]
        rows.append([label, count(r["ops_per_sec"]), ms(r["p50_us"]), ms(r["p99_us"]),
                     us(r["server_us_per_op"]), us(r["autoprep_us_per_op"], 1),
                     f"{trim(r['regular_statements_per_op'], 0)} / "
                     f"{trim(r['prepared_statements_per_op'], 0)}"])
    return table(["mode", "op/s", "p50", "p99", "server CPU / op", "autoprep CPU / op",
                  "regular / prepared executions per op"], "lrrrrrl", rows)


@reads("prepare-each-4modes-2026-11-25.json")
def prepare_each():
    """Applications that prepare each statement, four modes, 6 rounds (results: savings)."""
    m = modes(load("prepare-each-4modes-2026-11-25.json"))
    labels = [("direct-prepared", "directly prepared, markers"),
              ("autoprep", "through autoprep, QUERY text"),
              ("direct-prepare-each", "directly, prepare each"),
              ("autoprep-prepare-each", "through autoprep, prepare each")]
    rows = []
    for mode, label in labels:
        r = m[mode]
        rows.append([label, count(r["ops_per_sec"]), ms(r["p50_us"]), ms(r["p99_us"]),
                     us(r["server_us_per_op"]), us(r["autoprep_us_per_op"], 1),
                     trim(r["requests_per_op"]), trim(r["prepared_cache_evictions_per_op"])])
    return table(["mode", "op/s", "p50", "p99", "server CPU / op", "autoprep CPU / op",
                  "requests / op", "server prepared-cache evictions / op"], "lrrrrrrr", rows)


CLUSTER_MODES = [("direct-unprepared", "directly unprepared"),
                 ("autoprep-unrouted", "autoprep, `--routing false`"),
                 ("autoprep", "autoprep, routing"),
                 ("direct-token-aware", "directly prepared, token-aware")]


def cluster_cpu(r):
    """Cluster CPU per operation and each node's part: 382 µs (210 + 92 + 86)."""
    total = r["server_us_per_op"]
    digits = 1 if total < 100 else 0
    parts = " + ".join(fixed(n, digits) for n in r["node_us_per_op"])
    return f"{us(total, digits)} ({parts})"


def messages(x):
    """Internode messages per operation: two decimals, three below 0.1."""
    return fixed(x, 2 if x >= 0.1 else 3)


@reads("cluster-rf1-2026-11-25.json")
def cluster_rf1():
    """The three-node cluster at RF 1, 12 rounds (results: cluster)."""
    m = modes(load("cluster-rf1-2026-11-25.json"))
    rows = [[label, count(m[k]["ops_per_sec"]), ms(m[k]["p50_us"]), ms(m[k]["p99_us"]),
             cluster_cpu(m[k]), messages(m[k]["internode_messages_per_op"]),
             us(m[k]["autoprep_us_per_op"], 1)] for k, label in CLUSTER_MODES]
    return table(["mode", "op/s", "p50", "p99", "cluster CPU / op (node 1 + 2 + 3)",
                  "internode messages / op", "autoprep CPU / op"], "lrrrrrr", rows)


@reads("cluster-rf3-2026-11-25.json")
def cluster_rf3():
    """The three-node cluster at RF 3, 8 rounds (results: cluster)."""
    m = modes(load("cluster-rf3-2026-11-25.json"))
    rows = [[label, count(m[k]["ops_per_sec"]), cluster_cpu(m[k]),
             messages(m[k]["internode_messages_per_op"]), us(m[k]["autoprep_us_per_op"], 1)]
            for k, label in CLUSTER_MODES]
    return table(["mode", "op/s", "cluster CPU / op (node 1 + 2 + 3)",
                  "internode messages / op", "autoprep CPU / op"], "lrrrr", rows)


REMOTE_RUNS = [("remote-metrics-run1-2026-11-25.json", "1 (its first round still warming the JIT)"),
               ("remote-metrics-run2-2026-11-25.json", "2"),
               ("remote-metrics-run3-2026-11-25.json", "3 (the committed code, a quieter machine)")]
REMOTE_RATIOS = ["autoprep / direct-unprepared", "autoprep / direct-prepared",
                 "direct-prepared / direct-unprepared"]


def remote_pair(result, name):
    """The /proc ratio and the metrics endpoint's of one run (the latter's name changed)."""
    rs = ratios(result)
    proc = rs["server CPU/op: " + name]
    metrics = next(r for k, r in rs.items()
                   if k.endswith("CPU/op: " + name) and not k.startswith("server"))
    return proc, metrics


@reads(*(f for f, _ in REMOTE_RUNS))
def remote_metrics():
    """/proc against the metrics endpoint, three runs and their 9 rounds (results: any cluster)."""
    rows, pooled = [], {n: ([], []) for n in REMOTE_RATIOS}
    for f, label in REMOTE_RUNS:
        result, cells = load(f), []
        for n in REMOTE_RATIOS:
            proc, metrics = remote_pair(result, n)
            cells.append(f"{fixed(proc['median'], 3)} / {fixed(metrics['median'], 3)}")
            pooled[n][0].extend(proc["rounds"])
            pooled[n][1].extend(metrics["rounds"])
        rows.append([label] + cells)
    cells = []
    for n in REMOTE_RATIOS:
        proc, metrics = pooled[n]
        spread = [f"{fixed(min(v), 3)}{DASH}{fixed(max(v), 3)}" for v in (proc, metrics)]
        # One range when both sources give the same; otherwise /proc's, then the endpoint's.
        spread = spread[0] if spread[0] == spread[1] else " / ".join(spread)
        cells.append(f"{fixed(statistics.median(proc), 3)} / "
                     f"{fixed(statistics.median(metrics), 3)} ({spread})")
    rounds = len(pooled[REMOTE_RATIOS[0]][0])
    rows.append([f"all {rounds} rounds"] + cells)
    return table(["run", "autoprep / directly unprepared", "autoprep / directly prepared",
                  "prepared / unprepared"], "lrrr", rows)


# Each cell: (file, ratio name, bold, words after the ratio).
FORWARDER_ROWS = [
    ("forwarder CPU per passed-through EXECUTE", "≤ 1.30×",
     ("forwarder-4x16-15rounds-2026-11-26.json",
      "forwarder CPU/op: proxied-prepared / splice-prepared", True, ""),
     ("forwarder-1x64-15rounds-2026-11-26.json",
      "forwarder CPU/op: proxied-prepared / splice-prepared", True, "")),
    ("forwarder CPU per rewritten QUERY (splice passes the text)", "≤ 1.75×",
     ("forwarder-4x16-runs-2026-11-26.json",
      "forwarder CPU/op: autoprep / splice-unprepared", True, ""),
     ("forwarder-1x64-runs-2026-11-26.json",
      "forwarder CPU/op: autoprep / splice-unprepared", True, "")),
    ("passed-through throughput", "≥ 0.97×",
     ("forwarder-4x16-15rounds-2026-11-26.json",
      "op/s: proxied-prepared / splice-prepared", True, " the splice's"),
     ("forwarder-1x64-15rounds-2026-11-26.json",
      "op/s: proxied-prepared / splice-prepared", True, "")),
    ("server CPU per op, through autoprep / directly prepared", "≤ 1.05×",
     ("forwarder-4x16-15rounds-2026-11-26.json",
      "server CPU/op: proxied-prepared / direct-prepared", False, ""),
     None),
]


def forwarder_cell(cell):
    if cell is None:
        return DASH
    f, name, bold, words = cell
    r = ratios(load(f))[name]
    figure = f"{fixed(r['median'], 2)}×"
    if bold:
        figure = f"**{figure}**"
    lo, hi = min(r["rounds"]), max(r["rounds"])
    return (f"{figure}{words} ({fixed(lo, 2)}{DASH}{fixed(hi, 2)}; "
            f"{len(r['rounds'])} rounds)")


@reads(*sorted({c[0] for row in FORWARDER_ROWS for c in row[2:] if c}))
def forwarder():
    """autoprep against a byte splice (results: overheads). The targets are issue 15's."""
    rows = [[label, forwarder_cell(a), forwarder_cell(b), target]
            for label, target, a, b in FORWARDER_ROWS]
    return table(["", "4 connections × 16 in flight", "1 connection × 64 in flight", "target"],
                 "lrrr", rows)


FOOTPRINT_ROWS = [("per idle connection (STARTUP only)", "idle_kib_per_connection"),
                  ("per connection, one request in flight on each", "used_kib_per_connection"),
                  ("per connection after each read a 1 MB result",
                   "large_result_kib_per_connection")]


@reads("footprint-jemalloc-300-2026-11-26.json", "footprint-jemalloc-2000-2026-11-26.json")
def footprint():
    """Resident memory per connection, autoprep and the splice (results: footprint)."""
    runs = {}
    for n in (300, 2000):
        for r in load(f"footprint-jemalloc-{n}-2026-11-26.json"):
            runs[(r["forwarder"], n)] = r
    order = [("autoprep", 300), ("splice", 300), ("autoprep", 2000), ("splice", 2000)]
    rows = [[label] + [f"{fixed(runs[k][key], 1)} KiB" for k in order]
            for label, key in FOOTPRINT_ROWS]

    def left(kib):
        mib = kib / 1024
        return f"+{fixed(mib, 1 if mib < 10 else 0)} MiB"

    rows.append(["left above the start after all closed"]
                + [left(runs[k]["after_close_above_base_kib"]) for k in order])
    return table(["", "autoprep, 300 conns", "splice, 300", "autoprep, 2,000 conns",
                  "splice, 2,000"], "lrrrr", rows)


ESTIMATE_RUNS = [
    ("one node, insert, 6,000 op/s", "server-cpu-estimate-6000-2026-11-28.json"),
    ("one node, insert, closed loop 4 × 16", "server-cpu-estimate-closed-loop-2026-11-28.json"),
    ("one node, mixed 8:1:1, 5,000 op/s", "server-cpu-estimate-mixed-5000-2026-11-28.json"),
    ("one node, mixed 8:1:1, closed loop",
     "server-cpu-estimate-mixed-closed-loop-no-compaction-2026-11-28.json"),
    ("one node, mixed 8:1:1, closed loop (compaction on)",
     "server-cpu-estimate-mixed-closed-loop-2026-11-28.json"),
    ("three nodes, routing, insert, closed loop",
     "server-cpu-estimate-cluster-insert-2026-11-28.json"),
    ("three nodes, routing, mixed 8:1:1, closed loop (compaction on)",
     "server-cpu-estimate-cluster-mixed-2026-11-28.json"),
]


@reads(*(f for _, f in ESTIMATE_RUNS))
def server_cpu_estimate():
    """The lab check of the estimate of server CPU saved (results: the estimate). The same
    figures as benches/results/estimate_chart.py prints, without the file column."""
    rows = []
    for label, f in ESTIMATE_RUNS:
        e = load(f)["server_cpu_estimate"]
        p, m = e["proc"], e.get("metrics_endpoints")
        lo, hi = p["interval_us_at_end"]
        ratio = f"**{fixed(p['estimate_over_measured'], 2)}**"
        if m:
            ratio += f"; {fixed(m['estimate_over_measured'], 2)}"
        rows.append([label, us(p["measured_us_per_rewritten"], 1),
                     f"{us(p['estimate_us_per_rewritten'], 1)} ({fixed(lo, 1)} to {fixed(hi, 1)})",
                     ratio, us(p["autoprep_own_us_per_op"], 1),
                     f"{signed(p['net_saved_us_per_op'], 1)} µs"])
    return table(["run", "measured saving", "estimate (95 % interval at the end)",
                  "estimate / measured (/proc; metrics endpoints)", "autoprep's own CPU", "net"],
                 "lrrrrr", rows)


TABLES = {name.replace("_", "-"): f for name, f in list(globals().items())
          if callable(f) and name.replace("_", "-") in FILES}


# ---------------------------------------------------------------------------------------------

def pages():
    return sorted(SRC.rglob("*.md"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if any generated table is stale")
    parser.add_argument("--list", action="store_true", help="the tables and their files")
    args = parser.parse_args()

    if args.list:
        for name in sorted(TABLES):
            print(f"{name}: {', '.join(FILES[name])}")
        return 0

    problems, stale, used = [], [], set()
    for page in pages():
        text = page.read_text(encoding="utf-8")
        rel = page.relative_to(ROOT)

        def fill(m):
            name = m.group("name")
            used.add(name)
            if name not in TABLES:
                problems.append(f"{rel}: no generator for table '{name}'")
                return m.group(0)
            # Blank lines around the table, so that every Markdown reader ends it before the
            # end marker.
            body = "\n" + TABLES[name]() + "\n"
            if body != m.group("body"):
                stale.append(f"{rel}: table '{name}'")
            return m.group(1) + body + m.group(4)

        new = MARKER.sub(fill, text)
        opened = len(re.findall(r"<!-- table:[a-z0-9-]+ begin -->", text))
        closed = len(MARKER.findall(text))
        if opened != closed:
            problems.append(f"{rel}: a table marker without its matching end")
        if new != text and not args.check:
            page.write_text(new, encoding="utf-8")
    for name in sorted(set(TABLES) - used):
        problems.append(f"table '{name}' is in no page")

    for p in problems:
        print(f"gen_tables: {p}", file=sys.stderr)
    if args.check:
        for s in stale:
            print(f"gen_tables: stale: {s} (run python3 docs/gen_tables.py)", file=sys.stderr)
        if problems or stale:
            return 1
        print(f"gen_tables: {len(used)} generated tables fresh")
        return 0
    if problems:
        return 1
    print(f"gen_tables: {len(used)} generated tables written ({len(stale)} changed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The lab check of autoprep's estimate of server CPU saved, from the savings benchmark's JSON
results (`server_cpu_estimate`): a Markdown table on standard output and an SVG chart.

    python3 benches/results/estimate_chart.py OUT.svg "LABEL=RESULT.json" ...

Each result is one `savings ... --autoprep-arg=--server-metrics-url=...` run; its measured
saving (node CPU from /proc), the estimate with its 95 % interval at the end, their ratio,
autoprep's own CPU and the net are read as the benchmark stored them, never typed by hand.
"""

import json
import sys
from html import escape


def row(label, path):
    d = json.load(open(path))
    e = d["server_cpu_estimate"]["proc"]
    m = d["server_cpu_estimate"].get("metrics_endpoints")
    return {
        "label": label,
        "file": path.rsplit("/", 1)[-1],
        "measured": e["measured_us_per_rewritten"],
        "estimate": e["estimate_us_per_rewritten"],
        "interval": e["interval_us_at_end"],
        "ratio": e["estimate_over_measured"],
        "ratio_metrics": m and m["estimate_over_measured"],
        "own": e["autoprep_own_us_per_op"],
        "net": e["net_saved_us_per_op"],
    }


def table(rows):
    out = ["| run | measured saving | estimate (95 % interval at the end) | estimate / measured "
           "(/proc; metrics endpoints) | autoprep's own CPU | net |",
           "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lo, hi = r["interval"] or (float("nan"), float("nan"))
        metrics = f"; {r['ratio_metrics']:.2f}" if r["ratio_metrics"] else ""
        out.append(f"| {r['label']} (`{r['file']}`) | {r['measured']:.1f} µs | "
                   f"{r['estimate']:.1f} µs ({lo:.1f} to {hi:.1f}) | **{r['ratio']:.2f}**{metrics} | "
                   f"{r['own']:.1f} µs | {r['net']:+.1f} µs |")
    return "\n".join(out)


def svg(rows):
    top, bar, gap = 60, 22, 26
    height = top + len(rows) * (2 * bar + gap) + 10
    scale = 480 / max(max(r["measured"], r["estimate"], (r["interval"] or [0, 0])[1])
                      for r in rows)
    x0 = 250
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="900" height="{height}" '
             'font-family="sans-serif" font-size="12">',
             '<text x="10" y="22" font-size="14" font-weight="bold">Server CPU saved per '
             "rewritten QUERY: autoprep's estimate vs the nodes' /proc (µs)</text>",
             '<text x="10" y="40" fill="#555">Cassandra 5.0.6, default settings but '
             "--server-metrics-url; whiskers: the estimate's 95 % interval at the end</text>"]
    y = top
    for r in rows:
        parts.append(f'<text x="10" y="{y + bar + 6}">{escape(r["label"])}</text>')
        w = r["measured"] * scale
        parts.append(f'<rect x="{x0}" y="{y}" width="{w:.1f}" height="{bar}" fill="#888"/>')
        parts.append(f'<text x="{x0 + w + 4:.1f}" y="{y + 15}">measured {r["measured"]:.1f}</text>')
        y += bar + 4
        w = r["estimate"] * scale
        parts.append(f'<rect x="{x0}" y="{y}" width="{w:.1f}" height="{bar}" fill="#2a7ab8"/>')
        end = w
        if r["interval"]:
            lo, hi = (max(v, 0) * scale for v in r["interval"])
            parts.append(f'<line x1="{x0 + lo:.1f}" x2="{x0 + hi:.1f}" y1="{y + bar / 2:.1f}" '
                         f'y2="{y + bar / 2:.1f}" stroke="#000"/>')
            end = max(end, hi)
        parts.append(f'<text x="{x0 + end + 6:.1f}" y="{y + 15}">estimate {r["estimate"]:.1f} '
                     f'({r["ratio"]:.2f}x)</text>')
        y += bar + gap
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    rows = [row(*a.split("=", 1)) for a in argv[2:]]
    open(argv[1], "w").write(svg(rows))
    print(table(rows))


if __name__ == "__main__":
    main(sys.argv)

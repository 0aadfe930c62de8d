#!/usr/bin/env python3
"""scripts/bench --auto's plot: the runs' per-second series as one SVG (standard library only).

    python3 scripts/lib/plot-auto.py DIR        writes DIR/report.svg

Reads every DIR/*.csv the runs wrote (second,max_active,active,complete) and draws two panels
over time: the effective max_active and the sessions active (auto runs: the value it steered
to, and what the room held), and the pages fully loaded each second (every run), so a
cold start, a cut and the collapse of a value far too high can be seen side by side.
"""

import csv
import html
import os
import sys

WIDTH, PANEL, MARGIN = 900, 260, 60
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#7f7f7f"]


def read(path):
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            try:
                rows.append({k: float(v) for k, v in r.items()})
            except (TypeError, ValueError):
                continue
    return rows


def panel(out, top, title, series, y_label):
    """Draws `series` [(label, [(x, y)], colour, dashed)] in the panel starting at `top`."""
    xs = [x for _, pts, _, _ in series for x, _ in pts] or [0, 1]
    ys = [y for _, pts, _, _ in series for _, y in pts] or [0, 1]
    x_max, y_max = max(max(xs), 1), max(max(ys), 1)
    left, right, bottom = MARGIN, WIDTH - 170, top + PANEL

    def px(x):
        return left + (right - left) * x / x_max

    def py(y):
        return bottom - (PANEL - 30) * y / y_max

    out.append(f'<text x="{left}" y="{top + 14}" font-weight="bold">{html.escape(title)}</text>')
    out.append(f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#000"/>')
    out.append(f'<line x1="{left}" y1="{bottom}" x2="{left}" y2="{top + 25}" stroke="#000"/>')
    for i in range(5):
        y = y_max * i / 4
        out.append(f'<text x="{left - 6}" y="{py(y) + 4}" text-anchor="end">{y:.0f}</text>')
        out.append(f'<line x1="{left}" y1="{py(y)}" x2="{right}" y2="{py(y)}" stroke="#eee"/>')
    for i in range(7):
        x = x_max * i / 6
        out.append(f'<text x="{px(x)}" y="{bottom + 16}" text-anchor="middle">{x:.0f} s</text>')
    out.append(f'<text x="14" y="{top + PANEL / 2}" transform="rotate(-90 14 {top + PANEL / 2})"'
               f' text-anchor="middle">{html.escape(y_label)}</text>')
    for n, (label, pts, colour, dashed) in enumerate(series):
        if not pts:
            continue
        d = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        dash = ' stroke-dasharray="5,3"' if dashed else ""
        out.append(f'<polyline points="{d}" fill="none" stroke="{colour}" stroke-width="1.5"{dash}/>')
        ly = top + 30 + 16 * n
        out.append(f'<line x1="{right + 10}" y1="{ly - 4}" x2="{right + 30}" y2="{ly - 4}"'
                   f' stroke="{colour}" stroke-width="2"{dash}/>')
        out.append(f'<text x="{right + 35}" y="{ly}">{html.escape(label)}</text>')


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    folder = sys.argv[1]
    runs = sorted(f[:-4] for f in os.listdir(folder) if f.endswith(".csv"))
    if not runs:
        print(f"plot-auto: no CSV in {folder}", file=sys.stderr)
        return 1
    data = {r: read(os.path.join(folder, r + ".csv")) for r in runs}
    colour = {r: COLOURS[i % len(COLOURS)] for i, r in enumerate(runs)}
    steered = []
    for r in (r for r in runs if r.startswith("auto")):
        rows = data[r]
        steered.append((f"{r} max_active", [(x["second"], x["max_active"]) for x in rows], colour[r], False))
        steered.append((f"{r} active", [(x["second"], x["active"]) for x in rows], colour[r], True))
    pages = [(r, [(x["second"], x["complete"]) for x in data[r]], colour[r], False) for r in runs]
    height = 2 * PANEL + 3 * 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}"'
           f' font-family="sans-serif" font-size="11">',
           f'<rect width="{WIDTH}" height="{height}" fill="#fff"/>']
    panel(out, 10, "max_active=auto: the value in force (solid) and the sessions active (dashed)",
          steered, "sessions")
    panel(out, PANEL + 50, "pages fully loaded each second", pages, "pages/s")
    out.append("</svg>")
    target = os.path.join(folder, "report.svg")
    with open(target, "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"plot: {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

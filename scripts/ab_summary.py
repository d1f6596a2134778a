#!/usr/bin/env python3
"""Summarises a gpu_check.sh switch A/B from its bench receipts.

switch_ab names each receipt DAY-bench-MODEL-NAME-WAY-ROUND.json (NAME and WAY without hyphens).
For every model this prints each way's decode figure (tok/s), the median over its rounds, and its
ratio to the first way given (or the first found); then each way's geometric mean ratio over the
models. With --best it prints only the label of the way with the highest geometric mean, for a
script to export that way's switches (a way must beat the first by --margin to be picked over it).

  scripts/ab_summary.py DIR NAME [--ways a,b,c] [--best] [--margin 0.002]
"""

import argparse
import glob
import json
import math
import os
import re
import statistics
import sys


def decode_figure(path):
    with open(path, encoding="utf-8") as f:
        receipt = json.load(f)
    for fig in receipt.get("figures", []):
        if "decode" in fig.get("name", ""):
            return float(fig["median"])
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("name")
    ap.add_argument("--ways", help="comma-separated labels, the first the baseline")
    ap.add_argument("--best", action="store_true")
    ap.add_argument("--margin", type=float, default=0.002)
    args = ap.parse_args()

    pattern = re.compile(
        r"bench-(?P<model>.+)-" + re.escape(args.name) + r"-(?P<way>[a-z0-9]+)-(?P<round>\d+)\.json$"
    )
    figures = {}  # model -> way -> [tok/s]
    order = []
    for path in sorted(glob.glob(os.path.join(args.dir, "*.json"))):
        m = pattern.search(os.path.basename(path))
        if not m:
            continue
        value = decode_figure(path)
        if value is None:
            continue
        figures.setdefault(m["model"], {}).setdefault(m["way"], []).append(value)
        if m["way"] not in order:
            order.append(m["way"])
    ways = args.ways.split(",") if args.ways else order
    if not figures or not ways:
        print(f"ab_summary: no receipts of {args.name} in {args.dir}", file=sys.stderr)
        return 1

    base = ways[0]
    log_ratios = {w: [] for w in ways}
    lines = []
    for model in sorted(figures):
        by_way = figures[model]
        if base not in by_way:
            continue
        b = statistics.median(by_way[base])
        cells = []
        for w in ways:
            if w not in by_way:
                cells.append(f"{w} -")
                continue
            v = statistics.median(by_way[w])
            log_ratios[w].append(math.log(v / b))
            cells.append(f"{w} {v:,.1f} ({100 * (v / b - 1):+.1f}%)")
        lines.append(f"{model:32s} " + "  ".join(cells))
    geo = {w: math.exp(sum(r) / len(r)) for w, r in log_ratios.items() if r}
    best = max(geo, key=lambda w: geo[w] if w == base else geo[w] - args.margin)
    if args.best:
        print(best)
        return 0
    print("\n".join(lines))
    print("geometric mean against " + base + ": " +
          "  ".join(f"{w} {100 * (g - 1):+.2f}%" for w, g in geo.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

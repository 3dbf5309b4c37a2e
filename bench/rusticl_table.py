#!/usr/bin/env python3
"""The rusticl table of docs/BENCHMARKS.md: forward time per net and data type on Mesa's rusticl
(llvmpipe) beside PoCL on the same CPU, from `mpcaffe bench net --json` files that ran both
devices in one process (so the ratio is of one run).

  python3 bench/rusticl_table.py alexnet.json resnet50.json --markdown out.md
"""
import argparse
import json
import os
import sys


def impl_of(row):
    """'rusticl' or 'pocl' (or the platform's name) for a result row."""
    platform = row.get("platform", "")
    if "rusticl" in platform.lower():
        return "rusticl"
    if "Portable Computing Language" in platform:
        return "pocl"
    return platform


def rows_of(path):
    with open(path) as f:
        doc = json.load(f)
    if "results" not in doc or "model" not in doc:
        raise ValueError(f"{path}: not a `mpcaffe bench net --json` file (no model / results)")
    net = os.path.basename(doc["model"])
    if net == "deploy.prototxt":
        net = os.path.basename(os.path.dirname(doc["model"]))
    net = net.replace("_deploy.prototxt", "").replace(".prototxt", "")
    times = {}
    for r in doc["results"]:
        times[(impl_of(r), r["dtype"], r["batch"])] = r["forward_ms_median"]
    out = []
    for (impl, dtype, batch), ms in times.items():
        if impl != "rusticl":
            continue
        pocl = times.get(("pocl", dtype, batch))
        out.append((net, dtype, batch, pocl, ms, doc.get("iterations")))
    if not out:
        raise ValueError(f"{path}: no rusticl rows (run with --devices <pocl>,<rusticl>)")
    return out


def markdown(rows):
    lines = ["| net | data type | batch | PoCL ms | rusticl ms | rusticl / PoCL |",
             "|---|---|---:|---:|---:|---:|"]
    for net, dtype, batch, pocl, ms, _ in rows:
        ratio = f"{ms / pocl:.0f}×" if pocl else "–"
        pocl_text = f"{pocl:.1f}" if pocl else "–"
        lines.append(f"| {net} | {dtype} | {batch} | {pocl_text} | {ms:,.0f} | {ratio} |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", nargs="+", help="mpcaffe bench net --json files")
    ap.add_argument("--markdown", required=True, help="where to write the table")
    args = ap.parse_args()
    rows = []
    try:
        for path in args.json:
            rows += rows_of(path)
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as e:
        sys.exit(f"rusticl_table.py: {e}")
    with open(args.markdown, "w") as f:
        f.write(markdown(rows))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""bench/peers_plot.py — one chart of bench/peers.py results over several nets: mpcaffe's
forward time divided by ONNX Runtime's (same net, batch and dtype, measured back to back), a bar
per net × batch × dtype and one colour per mpcaffe device, with lines at 1 (parity) and 1.5.
int8w4 rows are divided by ONNX Runtime's int8. Several files of one net (repeated runs) give
the median of their ratios, and the chart says how many runs each bar is. Prints the geometric
mean of the fp32 batch-1 ratios per device (the figure held to) and writes the PNG.

    python3 bench/peers_plot.py peers-*.json --output docs/img/bench/zoo_peers.png
"""
import argparse
import json
import os
import statistics
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import geomean, net_key  # noqa: E402  (bench/report.py, beside this file)


def load(paths):
    """{(net, batch, dtype): {device label: [ratio per run]}} from the peers files' ONNX Runtime
    rows."""
    ratios = defaultdict(lambda: defaultdict(list))
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        if doc.get("kind") not in (None, "peers") or "results" not in doc:
            raise SystemExit(f"peers_plot.py: {path} is not a bench/peers.py file")
        net = net_key(doc["model"])
        for r in doc["results"]:
            if r.get("engine") != "onnxruntime" or not r.get("forward_ms_median"):
                continue
            device = f"{r.get('platform', r.get('backend', '?'))} ({r.get('device_index', '?')})"
            ratios[(net, r["batch"], r["dtype"])][device].append(
                r["ours_ms_median"] / r["forward_ms_median"])
    if not ratios:
        raise SystemExit("peers_plot.py: no ONNX Runtime rows in " + ", ".join(paths))
    return ratios


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+", help="bench/peers.py --json files")
    ap.add_argument("--output", required=True, help="the PNG to write")
    args = ap.parse_args(argv)
    runs = load(args.inputs)
    ratios = {k: {d: statistics.median(v) for d, v in per.items()} for k, per in runs.items()}
    count = {k: max(len(v) for v in per.values()) for k, per in runs.items()}
    keys = sorted(ratios, key=lambda k: (k[0], k[1], ["fp32", "int8", "int8w4"].index(k[2])
                                         if k[2] in ("fp32", "int8", "int8w4") else 9))
    devices = sorted({d for v in ratios.values() for d in v})
    for d in devices:
        fp32 = [ratios[k][d] for k in keys if k[1] == 1 and k[2] == "fp32" and d in ratios[k]]
        if fp32:
            g = geomean(fp32)
            print(f"{d}: fp32 batch 1 geometric mean of mpcaffe / ONNX Runtime over "
                  f"{len(fp32)} nets: {g:.2f} (worst {max(fp32):.2f})")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    width = 0.8 / len(devices)
    fig, ax = plt.subplots(figsize=(max(8, 0.7 * len(keys) + 2), 4.5))
    for i, d in enumerate(devices):
        xs = [j + (i - (len(devices) - 1) / 2) * width for j in range(len(keys))]
        ax.bar(xs, [ratios[k].get(d, float("nan")) for k in keys], width, label=f"mpcaffe on {d}")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.axhline(1.5, color="grey", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([f"{n}\nb{b} {t}" + (f"\n({count[(n, b, t)]} runs)" if count[(n, b, t)] > 1
                                                else "") for n, b, t in keys], fontsize=7)
    ax.set_yscale("log")
    from matplotlib.ticker import FuncFormatter
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if v in (0.5, 2, 3, 5) else ""))
    ax.set_ylabel("mpcaffe time / ONNX Runtime time (log)")
    ax.set_title("Forward time against ONNX Runtime (int8w4 against its int8; below 1: mpcaffe faster)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    fig.savefig(args.output, dpi=110)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()

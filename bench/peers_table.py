#!/usr/bin/env python3
"""bench/peers_table.py — the zoo nets' table from bench/peers.py files: per CPU level, one row per
net and batch with mpcaffe's fp32 and int8 (and int8w4 where measured, beside the peers' int8)
times per device beside every peer's (ONNX Runtime, OpenVINO, OpenCV DNN), mpcaffe's time over
the faster of ONNX Runtime and OpenVINO in the same data type, and the geometric mean of those
ratios over the nets per level, data type and device (the figure held to: ≤ 1.2, no net above
1.5). Several files of one net, level and batch (repeated runs) give the median of their figures.

    python3 bench/peers_table.py peers-*.json [--markdown table.md] [--statistic median|min]
"""
import argparse
import json
import os
import statistics
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import emit, geomean, net_key, short_device, table  # noqa: E402

PEERS = [("onnxruntime", "ORT"), ("openvino", "OpenVINO"), ("opencv", "OpenCV DNN")]
# mpcaffe's data types in the table, each beside the peers' same type; int8w4 (4-bit weights,
# 8-bit activations) beside the peers' int8, which bench/peers.py times again after it.
DTYPES = ("fp32", "int8", "int8w4")
PEER_DTYPE = {"int8w4": "int8 (beside int8w4)"}
# The engines the ratio is taken against (the best CPU engines); OpenCV DNN's column
# is for orientation.
BEST_OF = ("onnxruntime", "openvino")
STATISTIC = {"median": "medians of each engine's iterations",
             "min": "the best of each engine's iterations (on a loaded machine the least "
                    "disturbed pass)"}
NET_NAME = {"resnet50": "ResNet-50", "mobilenet_v1": "MobileNet v1", "bvlc_alexnet": "AlexNet",
            "imagenet_caffenet": "AlexNet (paper's)", "mobilenet_v2": "MobileNet v2",
            "squeezenet11": "SqueezeNet 1.1", "googlenet": "GoogLeNet",
            "densenet121": "DenseNet-121"}


def load(paths, statistic="median"):
    """`statistic` (median or min) of each engine's iterations in every file, by level:
    {level: {"cpu": ..., "caps": ..., "load": [..], "ms": {(net, batch, dtype, who): [ms]},
    "levels": {engine: cpu_level}}}; `who` is ("mpcaffe", device) or (engine, None)."""
    levels = {}
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        if doc.get("kind") != "peers":
            raise SystemExit(f"peers_table.py: {path} is not a bench/peers.py file")
        level = doc.get("level", "native")
        lv = levels.setdefault(level, {"cpu": doc.get("cpu", "?"), "caps": doc.get("cpu_caps", {}),
                                       "load": [], "ms": defaultdict(list), "levels": {}})
        if doc.get("load_average") is not None:
            lv["load"].append(doc["load_average"])
        net = net_key(doc["model"])
        seen = set()
        peer_key, ours_key = f"forward_ms_{statistic}", f"ours_ms_{statistic}"
        for r in doc["results"]:
            if r["engine"] not in dict(PEERS) or r["dtype"] not in DTYPES:
                continue
            key = (net, r["batch"], r["dtype"])
            if (key, r["engine"]) not in seen:  # a peer's figure repeats on every device's row
                seen.add((key, r["engine"]))
                lv["ms"][key + ((r["engine"], None),)].append(r[peer_key])
            device = short_device(r)
            if (key, device) not in seen:
                if r.get(ours_key) is None:
                    raise SystemExit(f"peers_table.py: {path} has no {ours_key} (an older "
                                     "bench/peers.py wrote it)")
                seen.add((key, device))
                lv["ms"][key + (("mpcaffe", device),)].append(r[ours_key])
            lv["levels"][r["engine"]] = r.get("cpu_level", lv["cpu"])
            lv["levels"]["mpcaffe"] = r.get("ours_cpu_level", lv["cpu"])
    if not levels:
        raise SystemExit("peers_table.py: no inputs")
    return levels


def level_table(name, lv, statistic="median"):
    ms = {k: statistics.median(v) for k, v in lv["ms"].items()}
    rows = sorted({k[:2] for k in ms}, key=lambda nb: (list(NET_NAME).index(nb[0])
                                                      if nb[0] in NET_NAME else 99, nb))
    devices = sorted({k[3][1] for k in ms if k[3][0] == "mpcaffe"})
    peers = [(e, label) for e, label in PEERS if any(k[3][0] == e for k in ms)]
    # At a capped level an engine that could not be capped ran at the CPU's own level: shown,
    # marked, and not one the ratio is taken against.
    uncapped = {e for e, level in lv["levels"].items() if "no ISA cap" in level}
    best_of = [e for e in BEST_OF if e not in uncapped]
    names = [label for e, label in PEERS if e in best_of]
    best_names = "best of " + " and ".join(names) if len(names) > 1 else names[0]
    peers = [(e, label + (f" ({lv['cpu']}, no cap)" if e in uncapped else ""))
             for e, label in peers]
    # fp32 and int8 always (n/a where not measured), int8w4 where measured.
    dtypes = [d for d in DTYPES if d != "int8w4" or any(k[2] == d for k in ms)]
    header = ["net", "batch"]
    for dtype in dtypes:
        header.append(f"mpcaffe {dtype} " + " / ".join(devices))
        header += [f"{label} {PEER_DTYPE.get(dtype, dtype)}" for e, label in peers
                   if any(k[3] == (e, None) and k[2] == dtype for k in ms)]
        header.append(f"{dtype}: mpcaffe / {best_names}")
    body, ratios = [], defaultdict(list)
    for net, batch in rows:
        line = [NET_NAME.get(net, net), batch]
        for dtype in dtypes:
            mine = [ms.get((net, batch, dtype, ("mpcaffe", d))) for d in devices]
            line.append(" / ".join(f"{v:.1f}" if v else "n/a" for v in mine))
            theirs = {e: ms.get((net, batch, dtype, (e, None))) for e, _ in peers}
            best = min((v for e, v in theirs.items() if v and e in best_of), default=None)
            for e, _ in peers:
                if any(k[3] == (e, None) and k[2] == dtype for k in ms):
                    v = theirs[e]
                    line.append(("**{:.1f}**" if v and v == best else "{:.1f}").format(v)
                                if v else "n/a")
            cells = []
            for d, v in zip(devices, mine):
                if v and best:
                    cells.append(f"{v / best:.2f}")
                    ratios[(dtype, batch, d)].append(v / best)
                else:
                    cells.append("n/a")
            line.append(" / ".join(cells))
        body.append(line)
    caps = ", ".join(f"`{k}={v}`" for k, v in lv["caps"].items()) or "none"
    load = (f"load average {min(lv['load']):.1f}–{max(lv['load']):.1f} at the runs' ends"
            if lv["load"] else "load not recorded")
    who = "; ".join(f"{e}: {lv['levels'][e]}" for e in ["mpcaffe"] + [e for e, _ in peers]
                    if e in lv["levels"])
    out = [f"**Level {name}** (CPU: {lv['cpu']}; caps: {caps}; {load}). Each engine ran at: "
           f"{who}. ms, {STATISTIC[statistic]}; the ratio's peer ({best_names}) in bold; devices "
           f"{' / '.join(devices)}.", "",
           table(header, body, ["---", "---:"] + ["---:"] * (len(header) - 2)), ""]
    for (dtype, batch, d), v in sorted(ratios.items()):
        if len(v) > 1:
            out.append(f"- {dtype}, batch {batch}, {d}: mpcaffe / {best_names}, "
                       f"geometric mean over "
                       f"{len(v)} nets **{geomean(v):.2f}** (worst {max(v):.2f})")
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+", help="bench/peers.py --json files")
    ap.add_argument("--markdown", help="write the table here (default: stdout)")
    ap.add_argument("--statistic", default="median", choices=sorted(STATISTIC),
                    help="each engine's figure per run: the median (default) or the minimum of "
                    "its iterations")
    args = ap.parse_args(argv)
    levels = load(args.inputs, args.statistic)
    text = "\n".join(level_table(name, levels[name], args.statistic)
                     for name in sorted(levels, key=lambda n: n != "native"))
    emit(text, args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())

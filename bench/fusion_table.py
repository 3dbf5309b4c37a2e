#!/usr/bin/env python3
"""bench/fusion_table.py — docs/BENCHMARKS.md's "Layers, launches and fusion" tables, for
scripts/bench.sh's fusion step: per zoo net (batch 1) and data type, how many layers the
inference optimizer fused into their producers, how many run, the kernel launches and host
synchronisations of one pass (`mpcaffe time --json`; int8 nets from `mpcaffe convert --dtype
int8`), each device's whole pass and its depthwise layers (those running `conv_dw` kernels); and
the fixed cost of a kernel launch per device (`mpcaffe_launch_bench 1000 5 <device>`).

    bench/fusion_table.py --mpcaffe M --devices 0,1 --models a.prototxt,b.prototxt --work DIR
                          --json out.json [--markdown out.md]
    bench/fusion_table.py --from out.json --markdown out.md   (tables only)
"""

import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import (measured_table, mpcaffe_device_label, net_key,  # noqa: E402
                    parse_table_args, table_parser)

NET_NAME = {"resnet50": "ResNet-50", "mobilenet_v1": "MobileNet v1"}
LAUNCH_LINE = re.compile(r"^(.*?)\s+1 work-item:\s+([0-9.]+) us/launch,\s+([0-9.]+) us with Finish "
                         r"each \| 64x64 grid:\s+([0-9.]+) us/launch,\s+([0-9.]+) us with Finish")


def time_json(mpcaffe, model, device):
    out = subprocess.run([mpcaffe, "time", "--model", model, "--synthetic", "--iterations", "10",
                          "--device", device, "--json", "--explain"], capture_output=True,
                         text=True)
    if out.returncode != 0:
        raise RuntimeError(f"mpcaffe time --model {model} --device {device} failed:\n"
                           + out.stderr[-2000:])
    return json.loads(out.stdout)


def measure(args):
    os.makedirs(args.work, exist_ok=True)
    runs = []
    for model in args.models.split(","):
        net = net_key(model)
        typed = os.path.join(args.work, f"{net}_int8.prototxt")
        subprocess.run([args.mpcaffe, "convert", "--model", model, "--dtype", "int8", "--output",
                        typed], check=True, stdout=sys.stderr)
        for dtype, path in (("fp32", model), ("int8", typed)):
            for device in args.devices.split(","):
                t = time_json(args.mpcaffe, path, device)
                dw = [l for l in t["layers"]
                      if any(k["family"] == "conv_dw" for k in l.get("kernels", []))]
                runs.append({"net": net, "dtype": dtype, "device": device,
                             "device_name": mpcaffe_device_label(args.mpcaffe, device),
                             **{k: t[k] for k in ("fused_layers", "fusion_chains",
                                                  "launched_layers", "launches_per_forward",
                                                  "host_syncs_per_forward",
                                                  "whole_forward_ms_median")},
                             "depthwise_layers": len(dw),
                             "depthwise_ms": sum(l["forward_ms"] for l in dw)})
                print(f"fusion {net} {dtype} {device}: {runs[-1]}", file=sys.stderr)
    launches = []
    for device in args.devices.split(","):
        launch = subprocess.run([os.path.join(os.path.dirname(args.mpcaffe),
                                              "mpcaffe_launch_bench"), "1000", "5", device],
                                capture_output=True, text=True, check=True).stdout
        lines = [LAUNCH_LINE.match(line.strip()) for line in launch.splitlines()]
        lines = [m for m in lines if m]
        if not lines:
            raise RuntimeError(f"mpcaffe_launch_bench on {device} printed no device line:\n"
                               + launch[-2000:])
        launches.append({"device": mpcaffe_device_label(args.mpcaffe, device),
                         **dict(zip(("one", "one_finish", "grid", "grid_finish"),
                                    map(float, lines[0].groups()[1:])))})
    return {"runs": runs, "launches": launches}


def markdown(data):
    runs = data["runs"]
    first = runs[0]["device"]
    lines = ["| net, batch 1 | data type | layers | fused into producers | run | launches | "
             "host syncs |", "|---|---|---:|---|---:|---:|---:|"]
    for r in (r for r in runs if r["device"] == first):
        total = r["fused_layers"] + r["launched_layers"]
        lines.append(f"| {NET_NAME.get(r['net'], r['net'])} | {r['dtype']} | {total} | "
                     f"{r['fused_layers']} into {r['fusion_chains']} | {r['launched_layers']} | "
                     f"{r['launches_per_forward']} | {r['host_syncs_per_forward']} |")
    lines += ["", f"(Counted on {runs[0]['device_name']}.) Whole pass and, where the net has "
              "them, its depthwise layers (`conv_dw` kernels, each timed with a Finish), "
              "median ms:", "",
              "| net | data type | device | whole pass | depthwise layers |",
              "|---|---|---|---:|---:|"]
    for r in runs:
        dw = f"{r['depthwise_ms']:.2f} ({r['depthwise_layers']})" if r["depthwise_layers"] else "-"
        lines.append(f"| {NET_NAME.get(r['net'], r['net'])} | {r['dtype']} | {r['device_name']} | "
                     f"{r['whole_forward_ms_median']:.2f} | {dw} |")
    lines += ["", "Launch cost (`mpcaffe_launch_bench 1000 5 <device>`: an empty kernel, median "
              "of 5 batches of 1000 launches), µs per launch:", "",
              "| device | 1 work-item | with a Finish after each | 64 groups of 64 | with a Finish "
              "after each |", "|---|---:|---:|---:|---:|"]
    for l in data["launches"]:
        lines.append(f"| {l['device']} | {l['one']:.2f} | {l['one_finish']:.2f} | "
                     f"{l['grid']:.2f} | {l['grid_finish']:.2f} |")
    return "\n".join(lines) + "\n"


def main():
    ap = table_parser(__doc__, work="build/bench/fusion")
    ap.add_argument("--models", help="comma-separated fp32 prototxts")
    args = parse_table_args(ap)
    if not args.source and not args.models:
        ap.error("--models is needed to measure (or --from to tabulate)")
    measured_table(args, measure, markdown)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""bench/train_step.py — docs/BENCHMARKS.md's training-step table, for scripts/bench.sh's train
step: BVLC's LeNet and CIFAR-10 quick TRAIN-phase nets (--synthetic inputs) through `mpcaffe time
--phase TRAIN` on each device, `--runs` whole processes each, the medians over the runs of each
run's median forward, backward and forward-backward ms.

    bench/train_step.py --mpcaffe M --devices 0,1 --shared DIR --json out.json [--markdown out.md]
                        [--runs 3] [--iterations 20]
    bench/train_step.py --from out.json --markdown out.md   (table only)
"""

import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from report import (measured_table, mpcaffe_device_label, parse_table_args,  # noqa: E402
                    table_parser)

# (what the table calls it, the prototxt under models/bvlc, its TRAIN batch)
NETS = [("LeNet", "mnist/lenet_train_test.prototxt", 64),
        ("CIFAR-10 quick", "cifar10/cifar10_quick_train_test.prototxt", 100)]
FIELDS = ["whole_forward_ms_median", "backward_ms_median", "forward_backward_ms_median"]


def measure(args):
    rows = []
    for name, path, batch in NETS:
        model = os.path.join(args.shared, "models", "bvlc", path)
        for device in args.devices.split(","):
            runs = []
            for _ in range(args.runs):
                out = subprocess.run([args.mpcaffe, "time", "--model", model, "--phase", "TRAIN",
                                      "--synthetic", "--iterations", str(args.iterations),
                                      "--device", device, "--json"],
                                     check=True, stdout=subprocess.PIPE, text=True).stdout
                runs.append(json.loads(out))
            row = {"net": name, "prototxt": path, "batch": batch,
                   "device": mpcaffe_device_label(args.mpcaffe, device)}
            for field in FIELDS:
                row[field] = statistics.median(r[field] for r in runs)
            rows.append(row)
    return {"runs": args.runs, "iterations": args.iterations, "rows": rows}


def markdown(data):
    lines = [f"ms, medians over {data['runs']} runs of each run's median of "
             f"{data['iterations']} iterations.", "",
             "| net (TRAIN batch) | device | forward | backward | forward-backward |",
             "|---|---|---:|---:|---:|"]
    for r in data["rows"]:
        cells = " | ".join(f"{r[f]:.1f}" for f in FIELDS)
        lines.append(f"| {r['net']} ({r['batch']}) | {r['device'].split(' (')[0]} | {cells} |")
    return "\n".join(lines) + "\n"


def main():
    ap = table_parser(__doc__)
    ap.add_argument("--shared", default=os.environ.get("MPCAFFE_SHARED_DIR", "../shared"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=20)
    args = parse_table_args(ap)
    measured_table(args, measure, markdown)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""bench/small_net.py — docs/BENCHMARKS.md's small-net table, for scripts/bench.sh's smallnet
step: the demo's 784-30-10 net (examples/fashion_mnist's make_net, fp32, written as a prototxt at
--batch) through `mpcaffe bench net` in every data type, one process per device (two devices in
one process slow Intel's runtime), median forward ms and each type's speed against fp32.

    bench/small_net.py --mpcaffe M --devices 0,1 --work DIR --json out.json [--markdown out.md]
                       [--batch 10000] [--iterations 10]
    bench/small_net.py --from out.json --markdown out.md   (table only)
"""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from report import measured_table, parse_table_args, short_device, table_parser  # noqa: E402

TYPES = ["fp32", "fp16", "int16", "int8", "int8w4"]


def write_net(work, batch):
    """The demo's fp32 net at `batch`, as examples/fashion_mnist builds it."""
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples", "fashion_mnist"))
    import fashion_mnist  # noqa: E402  (imports mpcaffe: the installed package)
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, f"fashion_mnist_b{batch}.prototxt")
    with open(path, "w") as f:
        f.write(str(fashion_mnist.make_net(fashion_mnist.DT.CAFFE_FLOAT, batch)))
    return path


def measure(args):
    model = write_net(args.work, args.batch)
    rows = []
    for device in args.devices.split(","):
        out = os.path.join(args.work, f"small_net_{device}.json")
        subprocess.run([args.mpcaffe, "bench", "net", "--model", model, "--dtypes",
                        ",".join(TYPES), "--batch", str(args.batch), "--device", device,
                        "--reduced-memory", "on", "--iterations", str(args.iterations),
                        "--no-setup", "--no-progress", "--json", out],
                       check=True, stdout=sys.stderr)
        with open(out) as f:
            rows += json.load(f)["results"]
    return {"batch": args.batch, "iterations": args.iterations, "rows": rows}


def markdown(data):
    devices = []
    for r in data["rows"]:
        if r["device_index"] not in [d["device_index"] for d in devices]:
            devices.append(r)
    lines = [f"784-30-10 at batch {data['batch']}, median forward ms of {data['iterations']} "
             "passes (× = fp32's time / this time).", "",
             "| device | " + " | ".join(TYPES) + " |", "|---|" + "---:|" * len(TYPES)]
    for dev in devices:
        ms = {r["dtype"]: r["forward_ms_median"] for r in data["rows"]
              if r["device_index"] == dev["device_index"]}
        cells = []
        for t in TYPES:
            v = ms.get(t)
            cells.append("n/a" if v is None else f"{v:.1f}" if t == "fp32" or not ms.get("fp32")
                         else f"{v:.1f} ({ms['fp32'] / v:.2f}×)")
        lines.append(f"| {short_device(dev)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main():
    ap = table_parser(__doc__, work="build/bench/small_net")
    ap.add_argument("--batch", type=int, default=10000)
    ap.add_argument("--iterations", type=int, default=10)
    args = parse_table_args(ap)
    measured_table(args, measure, markdown)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""bench/accuracy_tables.py — the accuracy tables of docs/BENCHMARKS.md ("Accuracy per data
type"), measured and written as Markdown for scripts/bench.sh's `accuracy` and `perchannel`
steps.

    bench/accuracy_tables.py lenet --mpcaffe M --devices 0,1 --work DIR --json out.json
                                   [--markdown out.md]
    bench/accuracy_tables.py acc16 --mpcaffe M --work DIR --model alexnet_fp32.prototxt
                                   --json out.json [--markdown out.md]
    bench/accuracy_tables.py perchannel --mpcaffe M --devices pocl --json out.json
                                   [--markdown out.md]
    bench/accuracy_tables.py perchannelspeed --mpcaffe M --devices 0,1 --model alexnet_fp32.prototxt
                                   --json out.json [--markdown out.md] [--rounds 3]
    bench/accuracy_tables.py lenet|acc16|perchannel|perchannelspeed --from out.json
                                   --markdown out.md   (tables only)

lenet: per device, scripts/calibrate-lenet.sh in DIR/<device> (BVLC's LeNet trained on
Fashion-MNIST with `mpcaffe train`, then `mpcaffe calibrate` and `mpcaffe test` over the 10 000
test images per data type): the test accuracy per data type. The first device's LMDBs and
trained weights are reused by the others (hard links), so every device scores the same net.
acc16: `mpcaffe test --acc16-overflow` (how often a 16-bit accumulator of uint8 × 4-bit products
would overflow) on the int8w4 LeNet of the lenet step and on the AlexNet --model converted to
int8w4 (one synthetic image).
perchannel: the int8 weight scales per tensor, per depthwise channel and per channel of every
Convolution and InnerProduct, against fp32 on the logits of AlexNet, ResNet-50 and MobileNet v1
with equal-size and spread channels: test_net's PerChannelWeights.DISABLED_* measurements
(tests/net/per_channel_weights_test.cc; test_net beside --mpcaffe) on the first of --devices.
perchannelspeed: what the scales per channel cost in speed: `mpcaffe bench net` of --model in
int8 at batch 1 with MPCAFFE_PER_CHANNEL_WEIGHTS unset (per channel) and 0 (per layer),
alternated, --rounds rounds per device.
"""

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import (measured_table, mpcaffe_device_label, parse_table_args,  # noqa: E402
                    table_parser)

TYPES = ["fp32", "fp16", "int16", "int8", "int8w4"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def accuracy(log):
    """BVLC's `accuracy = X` line of a `mpcaffe test` log, as a float."""
    for line in open(log):
        m = re.match(r"accuracy = ([0-9.]+)", line)
        if m:
            return float(m.group(1))
    raise RuntimeError(f"{log}: no 'accuracy = ' line")


def measure_lenet(args):
    os.makedirs(args.work, exist_ok=True)
    rows, first = [], None
    for device in args.devices.split(","):
        work = os.path.join(args.work, f"lenet_{device}")
        if first and not os.path.exists(work):
            # The same LMDBs and trained weights: the devices differ only in calibrate and test.
            shutil.copytree(first, work, copy_function=os.link,
                            ignore=shutil.ignore_patterns("lenet_int*", "lenet_fp16*", "*.log"))
        env = dict(os.environ, MPCAFFE=args.mpcaffe, MPCAFFE_DEVICE=device)
        subprocess.run([os.path.join(ROOT, "scripts", "calibrate-lenet.sh"), work], env=env,
                       check=True, stdout=sys.stderr)
        first = first or work
        rows.append({"device": device, "name": mpcaffe_device_label(args.mpcaffe, device),
                     "accuracy": {t: accuracy(os.path.join(work, f"test_{t}.log")) for t in TYPES},
                     "work": work})
        print(f"lenet on {device}: {rows[-1]['accuracy']}", file=sys.stderr)
    return {"iterations": int(os.environ.get("LENET_ITERATIONS", "2000")), "rows": rows}


def parse_acc16(text):
    """The per-layer rows and the 'all' row of `mpcaffe test --acc16-overflow`'s table."""
    layers, total = [], None
    for line in text.splitlines():
        cols = line.split()
        if len(cols) != 6 or not cols[1].isdigit():
            continue
        row = {"layer": cols[0], "steps": int(cols[1]), "step_percent": float(cols[3]),
               "output_percent": float(cols[5])}
        if cols[0] == "all":
            total = row
        else:
            layers.append(row)
    if total is None:
        raise RuntimeError("no 16-bit accumulator table in the output:\n" + text[-2000:])
    return {"layers": layers, "all": total}


def measure_acc16(args):
    os.makedirs(args.work, exist_ok=True)
    nets = []
    lenet = os.path.join(args.work, f"lenet_{args.devices.split(',')[0]}")
    if os.path.exists(os.path.join(lenet, "lenet_int8w4.prototxt")):
        out = subprocess.run([args.mpcaffe, "test", "--model", "lenet_int8w4.prototxt", "--weights",
                              "lenet_int8w4.caffemodel", "--iterations", "100", "--acc16-overflow"],
                             cwd=lenet, capture_output=True, text=True, check=True).stdout
        nets.append({"net": "LeNet, Fashion-MNIST test set (100 × 100 images)", **parse_acc16(out)})
    if args.model:
        typed = os.path.join(args.work, "alexnet_int8w4.prototxt")
        subprocess.run([args.mpcaffe, "convert", "--model", args.model, "--dtype", "int8w4",
                        "--output", typed], check=True, stdout=sys.stderr)
        out = subprocess.run([args.mpcaffe, "test", "--model", typed, "--synthetic", "--iterations",
                              "1", "--acc16-overflow"], capture_output=True, text=True,
                             check=True).stdout
        nets.append({"net": "AlexNet (the paper's imagenet_caffenet, filler weights, one synthetic "
                            "image)", **parse_acc16(out)})
    return {"nets": nets}


# The nets PerChannelWeights.DISABLED_* measures, by the file name its lines print.
PER_CHANNEL_NETS = {"deploy.prototxt": "AlexNet (BVLC deploy)",
                    "resnet50_deploy.prototxt": "ResNet-50 (zoo)",
                    "mobilenet_v1_deploy.prototxt": "MobileNet v1 (zoo)"}
PER_CHANNEL_MODES = ["per tensor", "depthwise per channel",
                     "every conv and IP per channel (default)"]
PER_CHANNEL_LINE = re.compile(
    r"^(\S+) int8, (equal-size|spread) channels, ([^:]+): top-1 (\d+)/(\d+) agree with fp32; "
    r"\|logit diff\| / spread: max ([0-9.]+), mean ([0-9.]+)$")


def parse_per_channel(text):
    """The measurement lines of PerChannelWeights.DISABLED_*, as rows."""
    rows = []
    for line in text.splitlines():
        m = PER_CHANNEL_LINE.match(line.strip())
        if m:
            rows.append({"file": m.group(1), "channels": m.group(2), "mode": m.group(3),
                         "agree": int(m.group(4)), "inputs": int(m.group(5)),
                         "max": float(m.group(6)), "mean": float(m.group(7))})
    missing = {f for f in PER_CHANNEL_NETS} - {r["file"] for r in rows}
    if missing:
        raise RuntimeError(f"no per-channel measurement of {', '.join(sorted(missing))} in the "
                           "test_net output (a zoo prototxt not found?):\n" + text[-2000:])
    return rows


def measure_per_channel(args):
    test_net = os.path.join(os.path.dirname(args.mpcaffe) or ".", "test_net")
    if not os.path.exists(test_net):
        raise RuntimeError(f"{test_net} not found: build the tests (cmake --build build)")
    device = args.devices.split(",")[0]
    command = [test_net, "--gtest_also_run_disabled_tests",
               "--gtest_filter=PerChannelWeights.DISABLED_*"]
    run = subprocess.run(command, env=dict(os.environ, MPCAFFE_DEVICE=device),
                         capture_output=True, text=True)
    sys.stderr.write(run.stdout[-4000:])
    if run.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed on {device}:\n{run.stdout[-3000:]}"
                           f"{run.stderr[-2000:]}")
    return {"device": device, "name": mpcaffe_device_label(args.mpcaffe, device),
            "rows": parse_per_channel(run.stdout)}


def per_channel_markdown(data):
    lines = [f"Device {data['name']}. Each cell: top-1 agreement with fp32 of the 4 inputs; the "
             "largest and the mean |logit difference| over the sample's fp32 logit spread.", "",
             "| net, channels | " + " | ".join(PER_CHANNEL_MODES) + " |",
             "|---|" + "---|" * len(PER_CHANNEL_MODES)]
    for file, net in PER_CHANNEL_NETS.items():
        for channels in ("equal-size", "spread"):
            cells = {r["mode"]: r for r in data["rows"]
                     if r["file"] == file and r["channels"] == channels}
            out = []
            for mode in PER_CHANNEL_MODES:
                r = cells.get(mode)
                # The depthwise mode is measured only for nets with depthwise convolutions.
                out.append(f"{r['agree']}/{r['inputs']}; {r['max']:.3g}, {r['mean']:.3g}" if r
                           else "= per tensor" if mode == PER_CHANNEL_MODES[1] else "not measured")
            lines.append(f"| {net}, {channels.replace('-size', '')} | " + " | ".join(out) + " |")
    return "\n".join(lines) + "\n"


def measure_per_channel_speed(args):
    rows = []
    for device in args.devices.split(","):
        ms = {"per channel": [], "per layer": []}
        for _ in range(args.rounds):
            for mode, value in (("per channel", ""), ("per layer", "0")):
                with tempfile.NamedTemporaryFile(suffix=".json") as out:
                    subprocess.run([args.mpcaffe, "bench", "net", "--model", args.model,
                                    "--dtypes", "int8", "--batch", "1", "--reduced-memory", "off",
                                    "--iterations", "20", "--no-setup", "--no-progress",
                                    "--device", device, "--json", out.name],
                                   env=dict(os.environ, MPCAFFE_PER_CHANNEL_WEIGHTS=value),
                                   check=True, stdout=sys.stderr)
                    ms[mode].append(json.load(open(out.name))["results"][0]["forward_ms_median"])
        rows.append({"device": device, "name": mpcaffe_device_label(args.mpcaffe, device), "ms": ms,
                     "ratio": statistics.median(ms["per channel"])
                     / statistics.median(ms["per layer"])})
        print(f"per-channel speed on {device}: {ms}", file=sys.stderr)
    return {"model": args.model, "rounds": args.rounds, "rows": rows}


def per_channel_speed_markdown(data):
    lines = ["| device | per channel (ms) | per layer (ms) | per channel / per layer, medians |",
             "|---|---|---|---:|"]
    for r in data["rows"]:
        lines.append(f"| {r['name']} | " + " | ".join(", ".join(f"{v:.2f}" for v in r["ms"][m])
                                                    for m in ("per channel", "per layer"))
                     + f" | {r['ratio']:.2f} |")
    return "\n".join(lines) + "\n"


def lenet_markdown(data):
    lines = [f"| LeNet, Fashion-MNIST ({data['iterations']} training steps), device | "
             + " | ".join(TYPES) + " |", "|---|" + "---:|" * len(TYPES)]
    for r in data["rows"]:
        lines.append(f"| {r['name']} | " + " | ".join(f"{r['accuracy'][t]:.4f}" for t in TYPES)
                     + " |")
    return "\n".join(lines) + "\n"


def acc16_markdown(data):
    lines = ["| net (int8w4) | layer: % steps, % outputs | whole net |", "|---|---|---|"]
    for n in data["nets"]:
        per_layer = " · ".join(f"{l['layer']}: {l['step_percent']:.4g}, {l['output_percent']:.3g}"
                               for l in n["layers"])
        a = n["all"]
        lines.append(f"| {n['net']} | {per_layer} | {a['step_percent']:.4g} % of steps, "
                     f"{a['output_percent']:.3g} % of outputs |")
    return "\n".join(lines) + "\n"


def main():
    ap = table_parser(__doc__, work="build/bench/accuracy")
    ap.add_argument("table", choices=["lenet", "acc16", "perchannel", "perchannelspeed"])
    ap.add_argument("--rounds", type=int, default=3, help="perchannelspeed: alternated rounds")
    ap.add_argument("--model", help="acc16, perchannelspeed: the fp32 AlexNet prototxt")
    args = parse_table_args(ap)
    measure, markdown = {"lenet": (measure_lenet, lenet_markdown),
                         "acc16": (measure_acc16, acc16_markdown),
                         "perchannel": (measure_per_channel, per_channel_markdown),
                         "perchannelspeed": (measure_per_channel_speed,
                                             per_channel_speed_markdown)}[args.table]
    measured_table(args, measure, markdown)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""bench/demo_rows.py — the time column of make demo's Fashion-MNIST table as the demo measures
it (examples/fashion_mnist's `evaluate`: `Net.forward(mnist_image=x)` from NumPy on the whole
test set, so each pass also writes its input on the host), with the data types' passes
interleaved and repeated so that a loaded machine's noise hits them alike: median ms and the
median of each process's fp32 time / this time.

    bench/demo_rows.py [--device D] [--processes 5] [--passes 7] [--train 200] [--work DIR]

The net is trained briefly (--train Adam steps) and calibrated once per device, as the demo does;
each process then loads it in every type and times --passes rounds of one pass per type.
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "examples" / "fashion_mnist"))


def weights(work, device, steps):
    """The demo's trained and calibrated weights on `device` (made once in `work`)."""
    import fashion_mnist as f
    import mpcaffe as caffe
    path = pathlib.Path(work) / f"fashion_d{device}_s{steps}.caffemodel"
    if not path.exists():
        caffe.set_device(device)
        images, labels = f.load("train")
        solver = f.train(images[:-1000], labels[:-1000], steps, 32, 0, work)
        f.calibrate(solver, images[-1000:], path)
    return path


def one_process(device, passes, path):
    """One process's medians: {precision: ms}."""
    import fashion_mnist as f
    import mpcaffe as caffe
    caffe.set_device(device)
    images, _ = f.load("t10k")
    x = images.reshape(len(images), 1, 1, 784)
    nets = {p: caffe.Net(f.make_net(t, len(images), f.WEIGHT_BITS.get(p, 8)), caffe.TEST,
                         weights=str(path)) for p, t in f.DATA_TYPES.items()}
    times = {p: [] for p in nets}
    for net in nets.values():
        net.forward(mnist_image=x)  # builds and warm-up
    for _ in range(passes):
        for p, net in nets.items():
            start = time.perf_counter()
            net.forward(mnist_image=x)
            times[p].append((time.perf_counter() - start) * 1e3)
    return {p: statistics.median(v) for p, v in times.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--processes", type=int, default=5)
    ap.add_argument("--passes", type=int, default=7)
    ap.add_argument("--train", type=int, default=200, help="Adam steps before calibration")
    ap.add_argument("--work", default="build/bench/demo_rows")
    ap.add_argument("--child", help=argparse.SUPPRESS)  # one measuring process: its weights
    args = ap.parse_args()
    if args.child:
        print(json.dumps(one_process(args.device, args.passes, args.child)))
        return 0
    os.makedirs(args.work, exist_ok=True)
    path = weights(args.work, args.device, args.train)
    runs = []
    for _ in range(args.processes):
        out = subprocess.run([sys.executable, __file__, "--device", str(args.device), "--passes",
                              str(args.passes), "--child", str(path)],
                             check=True, capture_output=True, text=True).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
    print(f"device {args.device}, {args.processes} processes of {args.passes} passes per type "
          "(median ms; x = fp32's time / this time, median over the processes):")
    for p in runs[0]:
        ms = statistics.median(r[p] for r in runs)
        ratio = statistics.median(r["float"] / r[p] for r in runs)
        print(f"  {p:7s} {ms:8.1f} ms {ratio:6.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

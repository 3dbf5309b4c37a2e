#!/usr/bin/env python3
"""lenet_python_layer.py — BVLC's LeNet (shared/models/bvlc/mnist/lenet_train_test.prototxt) on
Fashion-MNIST trained by caffe.SGDSolver twice: once fed by its LMDB Data layer (the images
written by `mpcaffe convert_mnist`), once by a Python data layer (FashionFeed below) that serves
the same images and labels, in the same order and scaling, from NumPy. Each feed trains in a
process of its own, the feeds alternating --repeats times; prints the loss curves, their largest
difference and the time per iteration of every run (the fastest of each feed compared).

    python3 examples/fashion_mnist_python_layer/lenet_python_layer.py \\
        [--iterations 200] [--device N] [--repeats 2] [--out DIR] [--mpcaffe build/bin/mpcaffe]

Needs the mpcaffe package (scripts/python-test.sh --install-only), the `mpcaffe` command line
(for convert_mnist), Debian's dataset-fashion-mnist and the shared BVLC models
(MPCAFFE_SHARED_DIR, default ../shared next to the repository).
"""

import argparse
import gzip
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

import mpcaffe as caffe

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
DATA_DIR = pathlib.Path(os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist"))
SHARED = pathlib.Path(os.environ.get("MPCAFFE_SHARED_DIR", REPO.parent / "shared"))


def read_idx(path):
    """An IDX file (gzip-compressed) of unsigned bytes as an array of its stored shape."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(shape)


class FashionFeed(caffe.Layer):
    """Python data layer: tops data (batch×1×28×28, pixels·scale) and label (batch) from the
    Fashion-MNIST IDX files, in file order, wrapping around — what the LMDB Data layer reads.
    param_str: JSON {"dir": IDX folder, "split": "train", "batch": 64, "scale": 1/256}."""

    def setup(self, bottom, top):
        if bottom or len(top) != 2:
            raise ValueError("FashionFeed takes no bottoms and two tops (data, label)")
        p = json.loads(self.param_str)
        folder, split = pathlib.Path(p["dir"]), p.get("split", "train")
        self.images = read_idx(folder / f"{split}-images-idx3-ubyte.gz")
        self.labels = read_idx(folder / f"{split}-labels-idx1-ubyte.gz").astype(np.float32)
        self.batch, self.scale = int(p["batch"]), np.float32(p["scale"])
        self.position = 0
        self.seconds = 0.0  # time spent in forward()

    def reshape(self, bottom, top):
        top[0].reshape(self.batch, 1, *self.images.shape[1:])
        top[1].reshape(self.batch)

    def forward(self, bottom, top):
        start = time.perf_counter()
        index = (self.position + np.arange(self.batch)) % len(self.images)
        self.position = (self.position + self.batch) % len(self.images)
        top[0].data[...] = self.images[index][:, None] * self.scale
        top[1].data[...] = self.labels[index]
        self.seconds += time.perf_counter() - start

    def backward(self, top, propagate_down, bottom):
        pass  # a data layer has no gradient


def lenet_train_net(feed, lmdb=None):
    """The TRAIN half of BVLC's lenet_train_test.prototxt, fed by its Data layer (reading
    `lmdb`) or by FashionFeed."""
    from google.protobuf import text_format
    param = caffe.caffe_pb2.NetParameter()
    text_format.Merge((SHARED / "models/bvlc/mnist/lenet_train_test.prototxt").read_text(), param)
    kept = []
    for layer in param.layer:
        if any(rule.phase == caffe.TEST for rule in layer.include):
            continue  # the test Data layer and the accuracy
        if layer.type == "Data":
            batch, scale = layer.data_param.batch_size, layer.transform_param.scale
            if feed == "python":
                layer.type = "Python"
                layer.ClearField("data_param")
                layer.ClearField("transform_param")
                layer.python_param.module = "lenet_python_layer"
                layer.python_param.layer = "FashionFeed"
                layer.python_param.param_str = json.dumps(
                    {"dir": str(DATA_DIR), "split": "train", "batch": batch, "scale": scale})
            else:
                layer.data_param.source = str(lmdb)
        kept.append(layer)
    del param.layer[:]
    param.layer.extend(kept)
    return param


def solver_parameter(net, iterations):
    """lenet_solver.prototxt's settings (SGD, momentum 0.9, weight decay 5e-4, inv policy)."""
    from google.protobuf import text_format
    sp = caffe.caffe_pb2.SolverParameter()
    text_format.Merge((SHARED / "models/bvlc/mnist/lenet_solver.prototxt").read_text(), sp)
    sp.ClearField("net")
    sp.ClearField("test_iter")
    sp.ClearField("test_interval")
    sp.train_net_param.CopyFrom(net)
    sp.max_iter, sp.snapshot, sp.display = iterations, 0, 0
    sp.snapshot_prefix = str(pathlib.Path(tempfile.gettempdir()) / "lenet_python_layer")
    return sp


def train(feed, iterations, lmdb):
    """Trains the LeNet fed by `feed` ("lmdb" or "python"); returns the loss of every
    iteration, the milliseconds per iteration (the first iteration, with kernel builds and cache
    loads, untimed) and, for the Python feed, the milliseconds its forward() took per
    iteration."""
    solver = caffe.SGDSolver(solver_parameter(lenet_train_net(feed, lmdb), iterations))
    solver.quiet()
    solver.step(1)
    losses = [float(solver.net.blobs["loss"].data)]
    layer = solver.net.layers[0]
    layer.seconds = 0.0
    start = time.perf_counter()
    for _ in range(iterations - 1):
        solver.step(1)
        losses.append(float(solver.net.blobs["loss"].data))
    ms = 1e3 * (time.perf_counter() - start) / (iterations - 1)
    return losses, ms, 1e3 * layer.seconds / (iterations - 1) if feed == "python" else None


def train_in_processes(args, lmdb):
    """Each feed trained in a process of its own (an LMDB Data layer's prefetch thread would
    otherwise compete with the other run), alternating feeds `args.repeats` times so the load
    of a shared machine weighs on both; per feed the run with the least time per iteration."""
    runs = {"lmdb": [], "python": []}
    for _ in range(args.repeats):
        for feed in runs:
            command = [sys.executable, __file__, "--feed", feed, "--iterations",
                       str(args.iterations), "--lmdb", str(lmdb)]
            if args.device is not None:
                command += ["--device", str(args.device)]
            out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            runs[feed].append(json.loads(out.splitlines()[-1]))
    return {feed: min(results, key=lambda r: r["ms"]) for feed, results in runs.items()}, runs


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--device", type=int, default=None)
    parser.add_argument("--out", default=None, help="folder for losses.json and loss.png")
    parser.add_argument("--mpcaffe", default=str(REPO / "build/bin/mpcaffe"),
                        help="the mpcaffe command line (writes the LMDB with convert_mnist)")
    parser.add_argument("--repeats", type=int, default=2,
                        help="runs per feed, alternating (the fastest of each is reported)")
    parser.add_argument("--feed", choices=("lmdb", "python"), help=argparse.SUPPRESS)
    parser.add_argument("--lmdb", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.device is not None:
        caffe.set_device(args.device)
    sys.path.insert(0, str(HERE))  # python_param module "lenet_python_layer" is this file
    if args.feed:  # one run, in a process of its own: its results as one JSON line
        losses, ms, forward_ms = train(args.feed, args.iterations, args.lmdb)
        print(json.dumps({"losses": losses, "ms": ms, "forward_ms": forward_ms}))
        return
    out = pathlib.Path(args.out or tempfile.mkdtemp(prefix="lenet_python_layer_"))
    out.mkdir(parents=True, exist_ok=True)
    lmdb = out / "fashion_train_lmdb"
    if not lmdb.exists():
        subprocess.run([args.mpcaffe, "convert_mnist", str(DATA_DIR / "train-images-idx3-ubyte.gz"),
                        str(DATA_DIR / "train-labels-idx1-ubyte.gz"), str(lmdb)], check=True,
                       stdout=subprocess.DEVNULL)
    device = caffe.devices()[caffe.device_index()]
    print(f"device {device['index']}: {device['description']}; {args.iterations} SGD iterations, "
          f"batch 64, {args.repeats} alternating runs per feed")
    best, runs = train_in_processes(args, lmdb)
    lmdb_losses, py_losses = best["lmdb"]["losses"], best["python"]["losses"]
    diff = max(abs(a - b) for r in runs["lmdb"] + runs["python"]
               for a, b in zip(r["losses"], lmdb_losses))
    print(f"{'iter':>5} {'loss LMDB':>10} {'loss Python':>12}")
    for i in sorted({1, 10, 25, 50, 100, 150, args.iterations} & set(range(1, args.iterations + 1))):
        print(f"{i:>5} {lmdb_losses[i - 1]:>10.4f} {py_losses[i - 1]:>12.4f}")
    print(f"largest |loss difference| from the LMDB curve over every run: {diff:.3g}")
    ms = {feed: [round(r["ms"], 1) for r in results] for feed, results in runs.items()}
    print(f"ms per iteration, each run: LMDB {ms['lmdb']}, Python {ms['python']}; fastest: "
          f"LMDB {best['lmdb']['ms']:.1f}, Python {best['python']['ms']:.1f} (difference "
          f"{best['python']['ms'] - best['lmdb']['ms']:+.1f} ms); the Python layer's forward() "
          f"itself {best['python']['forward_ms']:.2f} ms per iteration")
    (out / "losses.json").write_text(json.dumps(
        {"device": device["description"], "lmdb": lmdb_losses, "python": py_losses,
         "ms_per_iteration_runs": ms, "python_forward_ms": best["python"]["forward_ms"]}))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot(range(1, args.iterations + 1), lmdb_losses, label="LMDB Data layer")
        ax.plot(range(1, args.iterations + 1), py_losses, "--", label="Python data layer")
        ax.set_xlabel("iteration")
        ax.set_ylabel("training loss")
        ax.set_title("LeNet on Fashion-MNIST, SGDSolver")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "loss.png", dpi=120)
    except ImportError:
        pass
    print(f"curves in {out / 'losses.json'}" + (f" and {out / 'loss.png'}"
                                                if (out / "loss.png").exists() else ""))


if __name__ == "__main__":
    main()

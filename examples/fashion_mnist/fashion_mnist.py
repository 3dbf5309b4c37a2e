#!/usr/bin/env python3
"""fashion_mnist.py — the paper's second workflow (section 2.2) on Fashion-MNIST: the two-layer
784-30-10 network written with NetSpec in fp32, fp16, int16, int8 and int8w4 (8-bit activations,
4-bit weights: `blobs_quantizer { weight_bits: 4 }` on the InnerProduct layers), trained in fp32 with
Adam, calibrated with OBSERVE on held-out training images, saved, and evaluated on the test set
in each data type (accuracy, time per forward, device memory; Table 4.7 of the paper).

    python3 examples/fashion_mnist/fashion_mnist.py [--iterations N] [--limit N] [--out DIR]

Data: the IDX files of Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist;
FASHION_MNIST_DIR overrides). The functions are what tests/python/test_examples.py runs.
"""

import argparse
import gzip
import os
import pathlib
import sys
import tempfile
import time

import numpy as np

import mpcaffe as caffe
from mpcaffe import layers as L

DT = caffe.data_type
DATA_TYPES = {"float": DT.CAFFE_FLOAT, "half": DT.CAFFE_HALF,
              "int16": DT.CAFFE_INT16_QUANTIZED, "int8": DT.CAFFE_INT8_QUANTIZED,
              "int8w4": DT.CAFFE_INT8_QUANTIZED}
WEIGHT_BITS = {"int8w4": 4}  # the others: the data type's own
DATA_DIR = pathlib.Path(os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist"))
CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
           "Bag", "Ankle boot"]


def read_idx(path):
    """An IDX file (optionally gzip-compressed) as a NumPy array of its stored shape."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        raise ValueError(f"{path}: not an IDX file (bad magic {data[:4].hex()})")
    types = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
    if data[2] not in types:
        raise ValueError(f"{path}: unknown IDX element type 0x{data[2]:02x}")
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    values = np.frombuffer(data, dtype=types[data[2]], offset=4 + 4 * ndim)
    if values.size != int(np.prod(shape)):
        raise ValueError(f"{path}: {values.size} values for shape {shape}")
    return values.reshape(shape)


def load(split, limit=None, folder=DATA_DIR):
    """(images float32 [n, 784] in 0…1, labels int64 [n]) of 'train' or 't10k'."""
    images = read_idx(folder / f"{split}-images-idx3-ubyte.gz")
    labels = read_idx(folder / f"{split}-labels-idx1-ubyte.gz")
    if limit:
        images, labels = images[:limit], labels[:limit]
    return images.reshape(len(images), -1).astype(np.float32) / 255.0, labels.astype(np.int64)


def make_net(data_type, batch=1, weight_bits=8):
    """Listing 2.4: mnist_image → hidden_layer (30) → output_layer (10) in `data_type`, the
    loss in TRAIN, the softmax `pred` in TEST. The output layer's top is fp32 (a Quantizer
    converts it) so the softmax and loss run in full precision, as the paper's inputs do.
    weight_bits=4 (int8 only) gives the InnerProduct layers 4-bit weights."""
    n = caffe.NetSpec()
    n.mnist_image = L.Input(input_param=dict(shape=dict(dim=[batch, 1, 1, 784])), ntop=1)
    n.label = L.Input(input_param=dict(shape=dict(dim=[batch, 1, 1, 1])), ntop=1,
                      include=dict(phase=caffe.TRAIN))
    typed = dict(bottom_data_type=data_type, compute_data_type=data_type,
                 top_data_type=data_type)
    if weight_bits == 4:
        typed["blobs_quantizer"] = [dict(weight_bits=4)]
    n.hidden_layer = L.InnerProduct(n.mnist_image, **typed, inner_product_param=dict(
        num_output=30, weight_filler=dict(type="xavier"),
        bias_filler=dict(type="constant", value=0.0)))
    n.output_layer = L.InnerProduct(n.hidden_layer, **typed, inner_product_param=dict(
        num_output=10, weight_filler=dict(type="xavier"),
        bias_filler=dict(type="constant", value=0.0)))
    n.logits = L.Quantizer(n.output_layer, bottom_data_type=data_type,
                           compute_data_type=data_type, top_data_type=DT.CAFFE_FLOAT)
    n.loss = L.SoftmaxWithLoss(n.logits, n.label, include=dict(phase=caffe.TRAIN))
    n.pred = L.Softmax(n.logits, include=dict(phase=caffe.TEST))
    proto = n.to_proto()
    proto.name = "net"
    return proto


def write_nets(folder, batch=1):
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, data_type in DATA_TYPES.items():
        paths[name] = folder / f"net_{name}.prototxt"
        paths[name].write_text(str(make_net(data_type, batch, WEIGHT_BITS.get(name, 8))))
    return paths


def solver_parameter(train_net, iterations, prefix):
    """Listing 2.5's Adam settings (base_lr 0.01, momentum 0.99, inv policy)."""
    sp = caffe.SolverParameter()
    sp.train_net_param.CopyFrom(train_net)
    sp.base_lr = 0.01
    sp.momentum = 0.99
    sp.weight_decay = 0.0001
    sp.lr_policy = "inv"
    sp.gamma = 0.0001
    sp.power = 0.75
    sp.max_iter = iterations
    sp.type = "Adam"
    sp.snapshot_prefix = str(prefix)
    return sp


def train(images, labels, iterations=2000, batch=32, seed=0, folder=None, losses=None):
    """fp32 training with Adam on random mini-batches (the paper used batches of one)."""
    folder = pathlib.Path(folder or tempfile.mkdtemp(prefix="fashion_"))
    solver = caffe.get_solver(solver_parameter(make_net(DT.CAFFE_FLOAT, batch), iterations,
                                               folder / "net"))
    solver.quiet()
    rng = np.random.default_rng(seed)
    blobs = solver.net.blobs
    for i in range(iterations):
        k = rng.integers(0, len(images), batch)
        # A fresh .data view per write: taking it marks the host copy as the newest.
        blobs["mnist_image"].data[...] = images[k].reshape(batch, 1, 1, 784)
        blobs["label"].data[...] = labels[k].reshape(batch, 1, 1, 1)
        loss = solver.step(1)
        if losses is not None and i % 100 == 0:
            losses.append(loss)
    return solver


def calibrate(solver, held_out_images, path):
    """Listing 2.5, lines 57-70: OBSERVE over held-out images in fp32, saved with the ranges."""
    weights = pathlib.Path(path).with_suffix(".fp32.caffemodel")
    solver.net.save(str(weights))
    net = caffe.Net(make_net(DT.CAFFE_FLOAT, len(held_out_images)), caffe.TEST,
                    weights=str(weights))
    net.quant_mode = caffe.quantizer_mode.CAFFE_QUANT_OBSERVE
    net.forward(mnist_image=held_out_images.reshape(len(held_out_images), 1, 1, 784))
    net.save(str(path))
    return path


def evaluate(precision, weights, images, labels, repeats=3):
    """Listing 2.6 on the whole test set as one batch: (accuracy %, ms per forward, peak
    device MiB of the net, net)."""
    net = caffe.Net(make_net(DATA_TYPES[precision], len(images), WEIGHT_BITS.get(precision, 8)),
                    caffe.TEST,
                    weights=str(weights))
    x = images.reshape(len(images), 1, 1, 784)
    pred = net.forward(mnist_image=x)["pred"].reshape(len(images), 10)
    accuracy = 100.0 * float(np.mean(pred.argmax(1) == labels))
    start = time.perf_counter()
    for _ in range(repeats):
        net.forward(mnist_image=x)
    ms = (time.perf_counter() - start) * 1000 / repeats if repeats else float("nan")
    return accuracy, ms, net.peak_device_bytes / 2**20, net


def run(iterations=2000, limit=None, batch=32, calibration=1000, seed=0, folder=None, plot=None,
        log=print):
    """The whole workflow. Training uses the first 60000 − `calibration` training images (or
    `limit` of them), calibration the last `calibration` ones, evaluation the test set (its
    first `limit` images). Returns {precision: (accuracy %, ms per forward, MiB)}."""
    folder = pathlib.Path(folder or tempfile.mkdtemp(prefix="fashion_"))
    write_nets(folder)
    images, labels = load("train")
    held_out = images[-calibration:]
    train_images, train_labels = images[:-calibration], labels[:-calibration]
    if limit:
        train_images, train_labels = train_images[:limit], train_labels[:limit]
    test_images, test_labels = load("t10k", limit)
    losses = []
    start = time.perf_counter()
    solver = train(train_images, train_labels, iterations, batch, seed, folder, losses)
    log(f"trained {iterations} Adam steps (batch {batch}, {len(train_images)} images) in "
        f"{time.perf_counter() - start:.1f} s, last loss {losses[-1] if losses else float('nan'):.3f}")
    weights = calibrate(solver, held_out, folder / "net_trained.caffemodel")
    results = {}
    for precision in DATA_TYPES:
        accuracy, ms, mib, _ = evaluate(precision, weights, test_images, test_labels)
        results[precision] = (accuracy, ms, mib)
    if plot:
        save_loss_plot(losses, plot)
        log(f"loss curve: {plot}")
    return results


def save_loss_plot(losses, path):
    """The training loss every 100 steps as a PNG (matplotlib's Agg backend: no window)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot(np.arange(len(losses)) * 100, losses)
    ax.set_xlabel("iteration")
    ax.set_ylabel("softmax loss")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


PAPER_TABLE_4_7 = {"float": 85.26, "half": 85.30, "int16": 85.27, "int8": 85.36,
                   "int8w4": float("nan")}  # the paper has no 4-bit weights


def format_table(results, samples):
    base_ms = results["float"][1]
    lines = [f"{'dtype':8}{'accuracy %':>12}{'paper MNIST %':>15}{'ms/forward':>12}"
             f"{'vs fp32':>9}{'peak MiB':>10}"]
    for precision, (accuracy, ms, mib) in results.items():
        lines.append(f"{precision:8}{accuracy:12.2f}{PAPER_TABLE_4_7[precision]:15.2f}{ms:12.2f}"
                     f"{base_ms / ms:8.2f}x{mib:10.2f}")
    device = caffe.devices()[caffe.device_index()]["description"]
    lines.append(f"(test set: {samples} Fashion-MNIST images in one batch on device {device}; "
                 "the paper's column is digit MNIST)")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=2000, help="Adam steps (default 2000)")
    parser.add_argument("--limit", type=int, default=None,
                        help="use only this many training and test images (short runs)")
    parser.add_argument("--batch", type=int, default=32, help="training batch size (default 32)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="folder for the prototxts, weights and plot "
                                      "(default: a temporary folder)")
    parser.add_argument("--plot", action="store_true", help="write loss.png into --out")
    args = parser.parse_args(argv)
    folder = pathlib.Path(args.out or tempfile.mkdtemp(prefix="fashion_"))
    results = run(args.iterations, args.limit, args.batch, seed=args.seed, folder=folder,
                  plot=folder / "loss.png" if args.plot else None)
    print(format_table(results, args.limit or 10000))
    return 0


if __name__ == "__main__":
    sys.exit(main())

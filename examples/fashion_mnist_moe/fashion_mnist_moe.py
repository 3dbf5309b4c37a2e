#!/usr/bin/env python3
"""fashion_mnist_moe.py — a small mixture-of-experts net (section 1.5 of the paper) trained on
Fashion-MNIST in fp32: a gating net with the paper's noisy gating (eqs. 1.9-1.10: w_a·x, plus
w_b·x times N(0, 1) through a Noise layer, plus w_c times N(0, 10) from DummyData through a
grouped 1×1 convolution), four instances of one expert net (784-64-10), top-2 selection, and
the load-balancing loss of eq. 1.11 (EuclideanLoss between the MOE layer's observed and
expected expert counts). Reports test accuracy (fp32, and int8 after calibration) and how
often each class used each expert.

    python3 examples/fashion_mnist_moe/fashion_mnist_moe.py [--iterations N] [--limit N]

Data: the IDX files of Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist;
FASHION_MNIST_DIR overrides).
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
DATA_DIR = pathlib.Path(os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist"))
CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
           "Bag", "Ankle boot"]
EXPERTS = 4
SELECT = 2


def read_idx(path):
    """An uncompressed or gzip-compressed IDX file of unsigned bytes as a NumPy array."""
    with (gzip.open if str(path).endswith(".gz") else open)(path, "rb") as f:
        data = f.read()
    if data[:3] != b"\x00\x00\x08":
        raise ValueError(f"{path}: not an IDX file of unsigned bytes")
    ndim = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(shape)


def load(split, limit=None):
    """(images float32 [n, 784] in 0…1, labels int64 [n]) of 'train' or 't10k'."""
    images = read_idx(DATA_DIR / f"{split}-images-idx3-ubyte.gz")[:limit]
    labels = read_idx(DATA_DIR / f"{split}-labels-idx1-ubyte.gz")[:limit]
    return images.reshape(len(images), -1).astype(np.float32) / 255.0, labels.astype(np.int64)


def typed(data_type):
    return dict(bottom_data_type=data_type, compute_data_type=data_type, top_data_type=data_type)


def gating_net(batch, data_type):
    """The gating net: its output is the probability of each expert (Softmax in fp32)."""
    n = caffe.NetSpec()
    fill = dict(weight_filler=dict(type="xavier"), bias_filler=dict(type="constant", value=0))
    n.g_in = L.Input(input_param=dict(shape=dict(dim=[batch, 784])), **typed(data_type))
    n.g_fc1 = L.InnerProduct(n.g_in, inner_product_param=dict(num_output=32, **fill), **typed(data_type))
    n.g_relu1 = L.ReLU(n.g_fc1, in_place=True, **typed(data_type))
    fp32 = typed(DT.CAFFE_FLOAT)
    n.g_logits = L.InnerProduct(n.g_fc1, inner_product_param=dict(num_output=EXPERTS, **fill), **fp32)
    # Multiplicative noise w_b·x · N(0, 1).
    n.g_noise_scale = L.InnerProduct(n.g_fc1, inner_product_param=dict(num_output=EXPERTS, **fill),
                                     **fp32)
    n.g_noise_relu = L.ReLU(n.g_noise_scale, in_place=True, **fp32)
    n.g_noise = L.Noise(n.g_noise_scale, noise_param=dict(mu=0.0, sigma=1.0), **fp32)
    n.g_sum1 = L.Eltwise(n.g_logits, n.g_noise, **fp32)
    # Additive noise w_c · N(0, 10).
    n.g_dummy = L.DummyData(dummy_data_param=dict(
        data_filler=[dict(type="gaussian", std=10.0)], shape=[dict(dim=[batch, EXPERTS, 1, 1])]),
        **fp32)
    n.g_dummy_conv = L.Convolution(n.g_dummy, convolution_param=dict(
        num_output=EXPERTS, kernel_size=1, group=EXPERTS, bias_term=False,
        weight_filler=dict(type="constant", value=0.1)), **fp32)
    n.g_dummy_flat = L.Reshape(n.g_dummy_conv, reshape_param=dict(shape=dict(dim=[batch, EXPERTS])),
                               **fp32)
    n.g_sum2 = L.Eltwise(n.g_sum1, n.g_dummy_flat, **fp32)
    n.g_prob = L.Softmax(n.g_sum2, **fp32)
    return n.to_proto()


def expert_net(batch, data_type):
    """One expert: 784 → 64 → ReLU → 10 logits (fp32 out, so mixing and loss run in fp32)."""
    n = caffe.NetSpec()
    fill = dict(weight_filler=dict(type="xavier"), bias_filler=dict(type="constant", value=0))
    n.e_in = L.Input(input_param=dict(shape=dict(dim=[batch, 784])), **typed(data_type))
    n.e_fc1 = L.InnerProduct(n.e_in, inner_product_param=dict(num_output=64, **fill), **typed(data_type))
    n.e_relu1 = L.ReLU(n.e_fc1, in_place=True, **typed(data_type))
    n.e_fc2 = L.InnerProduct(n.e_fc1, inner_product_param=dict(num_output=10, **fill),
                             bottom_data_type=data_type, compute_data_type=data_type,
                             top_data_type=DT.CAFFE_FLOAT)
    return n.to_proto()


def make_net(batch, data_type=DT.CAFFE_FLOAT, full_forward=False, balance_weight=1.0):
    """Input → MOE (top-2 of 4 experts) → loss (TRAIN) / softmax `pred` (TEST)."""
    n = caffe.NetSpec()
    n.data = L.Input(input_param=dict(shape=dict(dim=[batch, 784])))
    n.label = L.Input(input_param=dict(shape=dict(dim=[batch])), include=dict(phase=caffe.TRAIN))
    n.moe, n.observed, n.expected = L.MOE(
        n.data, ntop=3, bottom_data_type=data_type, compute_data_type=data_type,
        top_data_type=DT.CAFFE_FLOAT,
        moe_param=dict(select_experts=SELECT, full_forward=full_forward))
    n.loss = L.SoftmaxWithLoss(n.moe, n.label, include=dict(phase=caffe.TRAIN))
    n.balance = L.EuclideanLoss(n.observed, n.expected, loss_weight=balance_weight,
                                include=dict(phase=caffe.TRAIN))
    n.pred = L.Softmax(n.moe, include=dict(phase=caffe.TEST))
    proto = n.to_proto()
    proto.name = "fashion_mnist_moe"
    silence = proto.layer.add()  # a layer without tops: added to the message directly
    silence.name, silence.type = "silence", "Silence"
    silence.bottom.extend(["observed", "expected"])
    silence.include.add().phase = caffe.TEST
    moe = next(layer for layer in proto.layer if layer.type == "MOE")
    moe.moe_param.gating_net.CopyFrom(gating_net(batch, data_type))
    moe.moe_param.expert_net.add().CopyFrom(expert_net(batch, data_type))
    moe.moe_param.expert_instances.append(EXPERTS)
    return proto


def train(images, labels, iterations, batch, folder, seed=0, log=print):
    sp = caffe.SolverParameter()
    sp.train_net_param.CopyFrom(make_net(batch))
    sp.type = "Adam"
    sp.base_lr = 0.002
    sp.momentum = 0.9
    sp.momentum2 = 0.999
    sp.lr_policy = "fixed"
    sp.max_iter = iterations
    sp.snapshot_prefix = str(folder / "moe")
    solver = caffe.get_solver(sp)
    solver.quiet()
    rng = np.random.default_rng(seed)
    blobs = solver.net.blobs
    for i in range(iterations):
        k = rng.integers(0, len(images), batch)
        blobs["data"].data[...] = images[k]
        blobs["label"].data[...] = labels[k]
        solver.step(1)
        if (i + 1) % max(1, iterations // 5) == 0:
            log(f"  iteration {i + 1}: loss {float(blobs['loss'].data):.3f}, "
                f"balance {float(blobs['balance'].data):.4f}, "
                f"expert use {[round(float(v), 2) for v in blobs['observed'].data]}")
    weights = folder / "moe.caffemodel"
    solver.net.save(str(weights))
    return weights


def evaluate(net, images, labels, batch):
    """Accuracy % and the per-class expert usage (fraction of the class's samples that went to
    each expert), from batches of one class each (the MOE layer's observed counts)."""
    correct = 0
    usage = np.zeros((10, EXPERTS))
    for c in range(10):
        idx = np.flatnonzero(labels == c)
        batches = len(idx) // batch
        for b in range(batches):
            sel = idx[b * batch:(b + 1) * batch]
            out = net.forward(data=images[sel])
            correct += int(np.sum(out["pred"].argmax(1) == c))
            usage[c] += net.blobs["observed"].data
        usage[c] /= max(batches, 1)
    total = sum((np.sum(labels == c) // batch) * batch for c in range(10))
    return 100.0 * correct / total, usage, total


def run(iterations=1500, limit=None, batch=50, folder=None, log=print):
    folder = pathlib.Path(folder or tempfile.mkdtemp(prefix="fashion_moe_"))
    folder.mkdir(parents=True, exist_ok=True)
    images, labels = load("train", limit)
    test_images, test_labels = load("t10k", limit)
    start = time.perf_counter()
    weights = train(images[:-1000], labels[:-1000], iterations, batch, folder, log=log)
    log(f"trained {iterations} Adam steps (batch {batch}) in {time.perf_counter() - start:.1f} s")
    results = {}
    fp32 = caffe.Net(make_net(batch), caffe.TEST, weights=str(weights))
    results["float"] = evaluate(fp32, test_images, test_labels, batch)
    # int8: calibrate (OBSERVE over held-out training images, nested quantizers included).
    fp32.quant_mode = caffe.quantizer_mode.CAFFE_QUANT_OBSERVE
    held_out = images[-1000:]
    for b in range(len(held_out) // batch):
        fp32.forward(data=held_out[b * batch:(b + 1) * batch])
    calibrated = folder / "moe_calibrated.caffemodel"
    fp32.save(str(calibrated))
    int8 = caffe.Net(make_net(batch, DT.CAFFE_INT8_QUANTIZED), caffe.TEST, weights=str(calibrated))
    results["int8"] = evaluate(int8, test_images, test_labels, batch)
    return results


def format_usage(usage):
    lines = [f"{'class':14}" + "".join(f"{'expert ' + str(e):>10}" for e in range(EXPERTS))]
    for c in range(10):
        lines.append(f"{CLASSES[c]:14}" + "".join(f"{u:10.2f}" for u in usage[c]))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=1500)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--limit", type=int, default=None, help="use only this many images")
    parser.add_argument("--out", help="folder for the weights (default: a temporary folder)")
    args = parser.parse_args(argv)
    results = run(args.iterations, args.limit, args.batch, args.out)
    for precision, (accuracy, usage, samples) in results.items():
        print(f"\n{precision}: test accuracy {accuracy:.2f} % on {samples} images; "
              f"expert use per class (fraction of samples, top-{SELECT} of {EXPERTS}, "
              f"rows sum to {SELECT}):")
        print(format_usage(usage))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""celsius_fahrenheit.py — the paper's first workflow (section 2.1) on mpcaffe: one neuron learns
F = 1.8·C + 32 in fp32 with Adam, is calibrated with OBSERVE on held-out values, saved, and run
in fp32, fp16, int16 and int8 from the same calibrated weights, and in int8w4 (int8 with the
weight in 4 bits: `blobs_quantizer { weight_bits: 4 }`); prints the mean absolute error and the
time per data type (Table 4.6 of the paper).

    python3 examples/celsius_fahrenheit/celsius_fahrenheit.py [--iterations N] [--out DIR]

The functions are what tests/python/test_examples.py runs.
"""

import argparse
import pathlib
import sys
import tempfile
import time

import numpy as np

import mpcaffe as caffe
from mpcaffe import layers as L

DT = caffe.data_type
# The four typed networks of Listing 2.1, by file suffix.
DATA_TYPES = {"float": DT.CAFFE_FLOAT, "half": DT.CAFFE_HALF,
              "int16": DT.CAFFE_INT16_QUANTIZED, "int8": DT.CAFFE_INT8_QUANTIZED}
# Evaluated too, beyond the paper's four files: int8 activations with 4-bit weights.
PRECISIONS = list(DATA_TYPES) + ["int8w4"]


def typed_net(precision, batch=1):
    """make_net for a name of PRECISIONS."""
    if precision == "int8w4":
        return make_net(DT.CAFFE_INT8_QUANTIZED, batch, weight_bits=4)
    return make_net(DATA_TYPES[precision], batch)


def make_net(data_type, batch=1, weight_bits=8):
    """Listing 2.1: celsius → neuron (in `data_type`) → Quantizer to fp32 → output, with the
    fahrenheit label and the Euclidean loss in the TRAIN phase only (weight_bits=4: the
    neuron's weight in 4 bits)."""
    extra = dict(blobs_quantizer=[dict(weight_bits=4)]) if weight_bits == 4 else {}
    n = caffe.NetSpec()
    n.celsius = L.Input(input_param=dict(shape=dict(dim=[batch, 1, 1, 1])), ntop=1)
    n.fahrenheit = L.Input(input_param=dict(shape=dict(dim=[batch, 1, 1, 1])), ntop=1,
                           include=dict(phase=caffe.TRAIN))
    n.neuron = L.InnerProduct(n.celsius, bottom_data_type=data_type,
                              compute_data_type=data_type, top_data_type=data_type, **extra,
                              inner_product_param=dict(num_output=1,
                                                       weight_filler=dict(type="constant"),
                                                       bias_filler=dict(type="constant")))
    n.output = L.Quantizer(n.neuron, bottom_data_type=data_type, compute_data_type=data_type,
                           top_data_type=DT.CAFFE_FLOAT)
    n.euclidean = L.EuclideanLoss(n.output, n.fahrenheit, include=dict(phase=caffe.TRAIN))
    proto = n.to_proto()
    proto.name = "net"
    return proto


def write_nets(folder, batch=1):
    """net_<type>.prototxt for the four types in `folder` (what Listing 2.1 writes)."""
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, data_type in DATA_TYPES.items():
        paths[name] = folder / f"net_{name}.prototxt"
        paths[name].write_text(str(make_net(data_type, batch)))
    return paths


def dataset(seed=0):
    """Every integer °C in −273…999 and its °F, split 90 % training / 10 % test at random."""
    celsius = np.arange(-273, 1000, dtype=np.float32)
    fahrenheit = (celsius.astype(np.float64) * 1.8 + 32.0).astype(np.float32)
    order = np.random.default_rng(seed).permutation(celsius.size)
    cut = int(0.9 * celsius.size)
    return (celsius[order[:cut]], fahrenheit[order[:cut]]), (celsius[order[cut:]],
                                                              fahrenheit[order[cut:]])


def solver_parameter(train_net, iterations, prefix):
    """Listing 2.2's Adam settings (base_lr 1, momentum 0.99, inv policy)."""
    sp = caffe.SolverParameter()
    sp.train_net_param.CopyFrom(train_net)
    sp.base_lr = 1.0
    sp.momentum = 0.99
    sp.weight_decay = 0.00005
    sp.lr_policy = "inv"
    sp.gamma = 0.01
    sp.power = 0.75
    sp.max_iter = iterations
    sp.type = "Adam"
    sp.snapshot_prefix = str(prefix)
    return sp


def train(train_set, iterations=3000, batch=16, seed=0, folder=None, losses=None):
    """Trains the fp32 net with Adam on random mini-batches of the training split (the paper
    used batches of one; a few samples per step give a steadier fit). Returns the solver;
    `losses` (a list) collects the loss of every 100th step."""
    celsius, fahrenheit = train_set
    folder = pathlib.Path(folder or tempfile.mkdtemp(prefix="celsius_"))
    solver = caffe.get_solver(solver_parameter(make_net(DT.CAFFE_FLOAT, batch), iterations,
                                               folder / "net"))
    solver.quiet()
    rng = np.random.default_rng(seed)
    blobs = solver.net.blobs
    for i in range(iterations):
        k = rng.integers(0, celsius.size, batch)
        # A fresh .data view per write: taking it marks the host copy as the newest.
        blobs["celsius"].data[:, 0, 0, 0] = celsius[k]
        blobs["fahrenheit"].data[:, 0, 0, 0] = fahrenheit[k]
        loss = solver.step(1)
        if losses is not None and i % 100 == 0:
            losses.append(loss)
    return solver


def calibrate(solver, held_out_celsius, path):
    """Listing 2.2, lines 66-82: the trained fp32 net in OBSERVE mode over held-out values,
    saved with the observed ranges to `path`."""
    weights = pathlib.Path(path).with_suffix(".fp32.caffemodel")
    solver.net.save(str(weights))
    net = caffe.Net(make_net(DT.CAFFE_FLOAT, held_out_celsius.size), caffe.TEST,
                    weights=str(weights))
    net.quant_mode = caffe.quantizer_mode.CAFFE_QUANT_OBSERVE
    net.forward(celsius=held_out_celsius.reshape(-1, 1, 1, 1))
    net.save(str(path))
    return path


def evaluate(precision, weights, test_set, repeats=5):
    """Listing 2.3: loads net_<precision> with the calibrated weights, predicts the test split
    (one batch); returns (mean absolute error in °F, ms per forward of the batch — the mean of
    `repeats` timed passes after a first one, NaN for 0 —, net)."""
    celsius, fahrenheit = test_set
    net = caffe.Net(typed_net(precision, celsius.size), caffe.TEST,
                    weights=str(weights))
    x = celsius.reshape(-1, 1, 1, 1)
    predicted = net.forward(celsius=x)["output"].reshape(-1).astype(np.float64)
    start = time.perf_counter()
    for _ in range(repeats):
        net.forward(celsius=x)
    ms = (time.perf_counter() - start) * 1000 / repeats if repeats else float("nan")
    return float(np.abs(predicted - fahrenheit).mean()), ms, net


def run(iterations=3000, batch=16, seed=0, folder=None, plot=None, log=print):
    """The whole workflow; returns {precision: (MAE °F, ms per forward)}."""
    folder = pathlib.Path(folder or tempfile.mkdtemp(prefix="celsius_"))
    write_nets(folder)
    train_set, test_set = dataset(seed)
    losses = []
    start = time.perf_counter()
    solver = train(train_set, iterations, batch, seed, folder, losses)
    w, b = (float(p.data.ravel()[0]) for p in solver.net.params["neuron"])
    log(f"trained {iterations} Adam steps (batch {batch}) in {time.perf_counter() - start:.1f} s: "
        f"F = {w:.5f}·C + {b:.4f}")
    weights = calibrate(solver, test_set[0], folder / "net_trained.caffemodel")
    results = {}
    for precision in PRECISIONS:
        mae, ms, _ = evaluate(precision, weights, test_set)
        results[precision] = (mae, ms)
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
    ax.semilogy(np.arange(len(losses)) * 100, losses)
    ax.set_xlabel("iteration")
    ax.set_ylabel("Euclidean loss")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def device_description():
    return "device " + caffe.devices()[caffe.device_index()]["description"]


PAPER_TABLE_4_6 = {"float": 2.51804, "half": 2.26494, "int16": 2.42341, "int8": 6.93617,
                   "int8w4": float("nan")}  # the paper has no 4-bit weights


def format_table(results):
    lines = [f"{'dtype':8}{'MAE °F':>10}{'paper':>10}{'ms/forward':>12}"]
    for precision, (mae, ms) in results.items():
        lines.append(f"{precision:8}{mae:10.4f}{PAPER_TABLE_4_6[precision]:10.4f}{ms:12.3f}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=3000, help="Adam steps (default 3000)")
    parser.add_argument("--batch", type=int, default=16, help="training batch size (default 16)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="folder for the prototxts, weights and plot "
                                      "(default: a temporary folder)")
    parser.add_argument("--plot", action="store_true", help="write loss.png into --out")
    args = parser.parse_args(argv)
    folder = pathlib.Path(args.out or tempfile.mkdtemp(prefix="celsius_"))
    results = run(args.iterations, args.batch, args.seed, folder,
                  plot=folder / "loss.png" if args.plot else None)
    print(f"test split: {dataset(args.seed)[1][0].size} values; {device_description()}")
    print(format_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())

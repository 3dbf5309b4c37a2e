"""test_examples.py — the paper's workflows through the example modules: Celsius → Fahrenheit
(mean absolute error per data type) and Fashion-MNIST 784-30-10 (accuracy of fp16, int16 and
int8 within 0.5 percentage points of fp32), with short training runs."""

import importlib.util
import pathlib

import numpy as np
import pytest

import mpcaffe as caffe

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def _example(folder, module):
    spec = importlib.util.spec_from_file_location(module, EXAMPLES / folder / f"{module}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def celsius():
    return _example("celsius_fahrenheit", "celsius_fahrenheit")


@pytest.fixture(scope="module")
def fashion():
    mod = _example("fashion_mnist", "fashion_mnist")
    if not (mod.DATA_DIR / "t10k-images-idx3-ubyte.gz").exists():
        pytest.skip(f"Fashion-MNIST not found in {mod.DATA_DIR} (Debian dataset-fashion-mnist; "
                    "FASHION_MNIST_DIR overrides)")
    return mod


def test_celsius_listing_matches_the_shared_prototxts(celsius, paper_models):
    from google.protobuf import text_format
    for name, dtype in celsius.DATA_TYPES.items():
        expected = caffe.NetParameter()
        text_format.Parse((paper_models / "celsius_farenheit" / f"net_{name}.prototxt").read_text(),
                          expected)
        ours = celsius.make_net(dtype)
        # The shared files spell the label 'farenheit'; everything else is Listing 2.1.
        for layer in expected.layer:
            layer.top[:] = ["fahrenheit" if t == "farenheit" else t for t in layer.top]
            layer.bottom[:] = ["fahrenheit" if b == "farenheit" else b for b in layer.bottom]
            if layer.name == "farenheit":
                layer.name = "fahrenheit"
        assert ours == expected, name


# Mean absolute error bounds in °F (issue 8; the paper's Table 4.6: 2.52 / 2.26 / 2.42 / 6.94).
CELSIUS_MAE = {"float": 2.6, "half": 2.6, "int16": 0.5, "int8": 5.0, "int8w4": 5.0}


def test_celsius_fahrenheit_workflow(celsius, tmp_path):
    celsius.write_nets(tmp_path)
    assert sorted(p.name for p in tmp_path.glob("net_*.prototxt")) == [
        "net_float.prototxt", "net_half.prototxt", "net_int16.prototxt", "net_int8.prototxt"]
    train_set, test_set = celsius.dataset(seed=0)
    assert train_set[0].size == 1145 and test_set[0].size == 128
    assert not set(train_set[0]) & set(test_set[0])
    solver = celsius.train(train_set, iterations=3000, batch=16, seed=0, folder=tmp_path)
    weights = celsius.calibrate(solver, test_set[0], tmp_path / "net_trained.caffemodel")
    errors = {}
    for precision in celsius.PRECISIONS:
        mae, ms, net = celsius.evaluate(precision, weights, test_set, repeats=1)
        errors[precision] = mae
        assert net.blobs["neuron"].data.dtype == {"float": np.float32, "half": np.float16,
                                                  "int16": np.uint16, "int8": np.uint8,
                                                  "int8w4": np.uint8}[precision]
        assert ms > 0
    print("Celsius -> Fahrenheit MAE per dtype:", errors)
    for precision, bound in CELSIUS_MAE.items():
        assert errors[precision] <= bound, f"{precision}: MAE {errors[precision]:.3f} °F > {bound}"
    # Quantization must show: int8 is coarser than int16.
    assert errors["int8"] > errors["int16"]


def test_fashion_mnist_reader(fashion):
    images, labels = fashion.load("t10k", limit=100)
    assert images.shape == (100, 784) and images.dtype == np.float32
    assert 0.0 <= images.min() and images.max() <= 1.0 and images.max() > 0.9
    assert labels.shape == (100,) and set(labels) <= set(range(10)) and len(set(labels)) == 10


def test_fashion_mnist_types_follow_fp32(fashion, tmp_path):
    images, labels = fashion.load("train")
    held_out = images[-1000:]
    solver = fashion.train(images[:-1000], labels[:-1000], iterations=500, batch=32, seed=0,
                           folder=tmp_path)
    weights = fashion.calibrate(solver, held_out, tmp_path / "net_trained.caffemodel")
    test_images, test_labels = fashion.load("t10k", limit=5000)
    accuracy = {}
    for precision in fashion.DATA_TYPES:
        accuracy[precision], _, _, _ = fashion.evaluate(precision, weights, test_images,
                                                        test_labels, repeats=0)
    print("Fashion-MNIST accuracy % per dtype:", accuracy)
    assert accuracy["float"] > 70.0, "500 Adam steps should reach well above 70 %"
    for precision in ("half", "int16", "int8"):
        assert abs(accuracy[precision] - accuracy["float"]) <= 0.5, (precision, accuracy)
    # 4-bit weights (per-channel min-MSE scales) on this short run: within 1.5 points of fp32
    # (measured −0.86 on Intel's runtime; the 1-point bound is for the trained LeNet).
    assert accuracy["float"] - accuracy["int8w4"] <= 1.5, accuracy

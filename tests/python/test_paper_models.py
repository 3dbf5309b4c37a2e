"""test_paper_models.py — the paper's celsius and mnist_simple prototxts (shared/models) in all
four data types: fp32 weights, OBSERVE calibration, save, reload per type, NumPy comparisons."""

import numpy as np
import pytest

import mpcaffe as caffe

TYPES = ["float", "half", "int16", "int8"]
NUMPY_TYPE = {"float": np.float32, "half": np.float16, "int16": np.uint16, "int8": np.uint8}


@pytest.fixture(scope="module")
def celsius_weights(paper_models, tmp_path_factory):
    """The exact solution F = 1.8 C + 32 in the fp32 net, calibrated over −273…999 °C."""
    net = caffe.Net(str(paper_models / "celsius_farenheit" / "net_float.prototxt"), caffe.TEST)
    net.params["neuron"][0].data[...] = 1.8
    net.params["neuron"][1].data[...] = 32.0
    net.quant_mode = caffe.quantizer_mode.CAFFE_QUANT_OBSERVE
    for c in (-273.0, 999.0, 0.0, 400.0):
        net.blobs["celsius"].data[0] = c
        net.forward()
    path = tmp_path_factory.mktemp("celsius") / "net_trained.caffemodel"
    net.save(str(path))
    return path


# Mean absolute error bounds of the exact solution in each type: quantization of the input and
# output ranges (−273…999 °C, −459…1830 °F) gives half a step on average at most.
CELSIUS_MAE = {"float": 1e-4, "half": 0.3, "int16": 0.02, "int8": 5.0}


@pytest.mark.parametrize("precision", TYPES)
def test_celsius_each_type(paper_models, celsius_weights, precision):
    net = caffe.Net(str(paper_models / "celsius_farenheit" / f"net_{precision}.prototxt"),
                    caffe.TEST, weights=str(celsius_weights))
    assert net.blobs["neuron"].data.dtype == NUMPY_TYPE[precision]
    assert net.blobs["output"].data.dtype == np.float32
    celsius = np.arange(-273, 1000, 3, dtype=np.float32)
    predicted = []
    for c in celsius:
        net.blobs["celsius"].data[0] = c
        net.forward()
        predicted.append(float(net.blobs["output"].data[0, 0]))
    errors = np.abs(np.array(predicted) - (1.8 * celsius + 32.0))
    assert errors.mean() <= CELSIUS_MAE[precision], f"{precision}: MAE {errors.mean():.4f} °F"
    if precision != "float":
        assert errors.mean() > 0, "a reduced-precision net cannot be exact everywhere"


@pytest.fixture(scope="module")
def mnist_setup(paper_models, tmp_path_factory):
    """fp32 mnist_simple with its xavier weights, calibrated on 64 images; reference outputs."""
    folder = paper_models / "mnist_simple"
    net = caffe.Net(str(folder / "net_float.prototxt"), caffe.TEST)
    rng = np.random.default_rng(7)
    images = (rng.uniform(0, 1, (64, 1, 1, 784)) * (rng.uniform(0, 1, (64, 1, 1, 784)) > 0.6))
    images = images.astype(np.float32)
    net.quant_mode = caffe.quantizer_mode.CAFFE_QUANT_OBSERVE
    probs = net.forward(mnist_image=images, blobs=["output_layer"])
    path = tmp_path_factory.mktemp("mnist") / "mnist_simple.caffemodel"
    net.save(str(path))
    (w1, b1), (w2, b2) = ([p.data.copy() for p in net.params[name]]
                          for name in ("hidden_layer", "output_layer"))
    return folder, path, images, probs["pred"].copy(), probs["output_layer"].copy(), (w1, b1, w2, b2)


def test_mnist_fp32_matches_numpy(mnist_setup):
    _, _, images, pred, logits, (w1, b1, w2, b2) = mnist_setup
    x = images.reshape(64, 784)
    expected = (x @ w1.T + b1) @ w2.T + b2
    np.testing.assert_allclose(logits.reshape(64, 10), expected, rtol=1e-4, atol=1e-4)
    e = np.exp(expected - expected.max(1, keepdims=True))
    np.testing.assert_allclose(pred.reshape(64, 10), e / e.sum(1, keepdims=True), atol=1e-5)


# Largest softmax-probability difference from fp32, and agreement of the predicted class.
MNIST_TOLERANCE = {"half": (1e-3, 1.0), "int16": (1e-3, 1.0), "int8": (0.02, 0.95)}


@pytest.mark.parametrize("precision", ["half", "int16", "int8"])
def test_mnist_reduced_types_follow_fp32(mnist_setup, precision):
    folder, path, images, pred, _, _ = mnist_setup
    net = caffe.Net(str(folder / f"net_{precision}.prototxt"), caffe.TEST, weights=str(path))
    assert net.params["hidden_layer"][0].data.dtype == NUMPY_TYPE[precision]
    out = net.forward(mnist_image=images)["pred"].reshape(64, 10).astype(np.float32)
    reference = pred.reshape(64, 10)
    max_diff, agreement = MNIST_TOLERANCE[precision]
    assert np.abs(out - reference).max() <= max_diff
    assert np.mean(out.argmax(1) == reference.argmax(1)) >= agreement

"""test_example_python_layer.py — examples/fashion_mnist_python_layer keeps working: its LeNet
fed by the Python data layer trains a few SGD iterations, reading the images in file order."""

import pathlib
import sys

import numpy as np
import pytest

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "fashion_mnist_python_layer"


@pytest.fixture()
def example(monkeypatch, bvlc_models):
    monkeypatch.syspath_prepend(str(EXAMPLE))  # python_param names the module lenet_python_layer
    monkeypatch.setenv("MPCAFFE_SHARED_DIR", str(bvlc_models.parents[1]))
    sys.modules.pop("lenet_python_layer", None)
    import lenet_python_layer as module
    if not (module.DATA_DIR / "train-images-idx3-ubyte.gz").exists():
        pytest.skip(f"Fashion-MNIST not found in {module.DATA_DIR} (Debian dataset-fashion-mnist;"
                    " scripts/install-deps.sh installs it)")
    yield module
    sys.modules.pop("lenet_python_layer", None)


def test_python_fed_lenet_trains(example):
    net = example.lenet_train_net("python")
    feed = [layer for layer in net.layer if layer.type == "Python"]
    assert len(feed) == 1 and feed[0].python_param.layer == "FashionFeed"
    assert not any(layer.type == "Data" for layer in net.layer)
    losses, ms, forward_ms = example.train("python", 4, None)
    assert len(losses) == 4 and np.isfinite(losses).all() and ms > 0 and forward_ms > 0
    # Ten classes, Xavier-initialised LeNet: the first loss is about ln(10).
    assert abs(losses[0] - np.log(10)) < 0.5

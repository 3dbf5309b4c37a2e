"""test_fashion_mnist_moe.py — the mixture-of-experts example on a short run: the MOE net trains
(loss falls), fp32 and int8 (calibrated nested quantizers) agree, and every class's expert use
sums to select_experts."""

import importlib.util
import pathlib

import numpy as np
import pytest

EXAMPLE = (pathlib.Path(__file__).resolve().parents[2] / "examples" / "fashion_mnist_moe" /
           "fashion_mnist_moe.py")


@pytest.fixture(scope="module")
def moe_example():
    spec = importlib.util.spec_from_file_location("fashion_mnist_moe", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if not (mod.DATA_DIR / "t10k-images-idx3-ubyte.gz").exists():
        pytest.skip(f"Fashion-MNIST not found in {mod.DATA_DIR} (Debian dataset-fashion-mnist; "
                    "FASHION_MNIST_DIR overrides)")
    return mod


def test_moe_example_trains_and_int8_agrees(moe_example, tmp_path):
    lines = []
    results = moe_example.run(iterations=60, limit=2000, batch=50, folder=tmp_path, log=lines.append)
    fp32_accuracy, fp32_usage, samples = results["float"]
    int8_accuracy, int8_usage, _ = results["int8"]
    assert samples >= 1000
    assert fp32_accuracy > 55.0, lines
    assert abs(int8_accuracy - fp32_accuracy) < 3.0
    for usage in (fp32_usage, int8_usage):
        np.testing.assert_allclose(usage.sum(axis=1), moe_example.SELECT, atol=1e-5)

"""test_net.py — caffe.Net from Python: NumPy views per data type, write-through, forward against
NumPy, weights saved and loaded, quant_mode, and C++ errors as Python exceptions."""

import numpy as np
import pytest

import mpcaffe as caffe
from mpcaffe import layers as L

DT = caffe.data_type


def _fc_net(dtype=DT.CAFFE_FLOAT, batch=2, inputs=5, outputs=3):
    n = caffe.NetSpec()
    n.data = L.Input(shape=dict(dim=[batch, inputs]))
    n.ip = L.InnerProduct(n.data, num_output=outputs,
                          weight_filler=dict(type="gaussian", std=0.5),
                          bias_filler=dict(type="gaussian", std=0.5),
                          bottom_data_type=dtype, compute_data_type=dtype, top_data_type=dtype)
    n.out = L.Quantizer(n.ip, bottom_data_type=dtype, compute_data_type=dtype,
                        top_data_type=DT.CAFFE_FLOAT)
    return n.to_proto()


def test_devices_and_device_choice():
    devices = caffe.devices()
    assert devices, "no device: the tests need at least PoCL"
    caffe.set_mode_gpu()
    caffe.set_device(devices[0]["index"])
    assert caffe.device_index() == devices[0]["index"]
    with pytest.raises(caffe.Error, match="device"):
        caffe.set_device(len(devices) + 5)
    cpus = [d for d in devices if not d["is_gpu"]]
    if cpus:
        caffe.set_mode_cpu()
        assert caffe.device_index() == cpus[0]["index"]
        assert caffe.Net(_fc_net(), caffe.TEST).device_index == cpus[0]["index"]
    else:
        with pytest.raises(caffe.DeviceError, match="set_mode_cpu"):
            caffe.set_mode_cpu()
    caffe.set_mode_gpu()  # back to the set_device choice
    assert caffe.device_index() == devices[0]["index"]


def test_set_device_by_implementation_name():
    devices = caffe.devices()
    for d in devices:
        caffe.set_device(d["implementation"])
        chosen = caffe.device_index()
        assert devices[chosen]["implementation"] == d["implementation"]
        assert chosen <= d["index"]  # the first device of that implementation
    with pytest.raises(caffe.Error, match="no-such-device"):
        caffe.set_device("no-such-device")
    caffe.set_device(devices[0]["index"])


def test_inner_product_forward_matches_numpy():
    net = caffe.Net(_fc_net(), caffe.TEST)
    assert net.inputs == ["data"] and net.outputs == ["out"]
    assert list(net.params) == ["ip"]
    w, b = (p.data for p in net.params["ip"])
    assert w.shape == (3, 5) and b.shape == (3,) and w.dtype == np.float32
    assert np.std(w) > 0.1, "gaussian filler values expected"
    x = np.random.default_rng(1).standard_normal((2, 5)).astype(np.float32)
    out = net.forward(data=x)["out"]
    np.testing.assert_allclose(out, x @ w.T + b, rtol=1e-5, atol=1e-5)


def test_writes_to_views_reach_the_next_forward():
    net = caffe.Net(_fc_net(), caffe.TEST)
    weights = np.arange(15, dtype=np.float32).reshape(3, 5) / 10
    net.params["ip"][0].data[...] = weights
    net.params["ip"][1].data[...] = [1, 2, 3]
    net.blobs["data"].data[...] = 1.0
    net.forward()
    np.testing.assert_allclose(net.blobs["out"].data, np.tile(weights.sum(1) + [1, 2, 3], (2, 1)),
                               rtol=1e-6)
    net.blobs["data"].data[1] = 0.0  # a second write through a fresh view
    net.forward()
    np.testing.assert_allclose(net.blobs["out"].data[1], [1, 2, 3], rtol=1e-6)
    held = net.blobs["data"].data  # an input view kept across forward passes
    for value in (2.0, 3.0):
        held[...] = value
        net.forward()
        np.testing.assert_allclose(net.blobs["out"].data[0], weights.sum(1) * value + [1, 2, 3],
                                   rtol=1e-6)
    diff = net.blobs["out"].diff
    assert diff.shape == (2, 3) and diff.dtype == np.float32
    diff[...] = 7
    assert np.all(net.blobs["out"].diff == 7) and not np.all(net.blobs["out"].data == 7)


def test_forward_inputs_and_held_views_of_them_agree():
    """forward(data=x) writes the input without a view (Blob.write_data): converted to the
    storage type, seen by a view of the input held across it, wrong sizes refused."""
    net = caffe.Net(_fc_net(), caffe.TEST)
    w, b = (p.data.copy() for p in net.params["ip"])
    held = net.blobs["data"].data
    x = np.random.default_rng(3).standard_normal((2, 5))  # float64: converted
    out = net.forward(data=x)["out"].copy()
    np.testing.assert_allclose(out, x @ w.T + b, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(held, x.astype(np.float32))
    held[...] = 0  # the held view written after write_data: its bytes win
    np.testing.assert_allclose(net.forward()["out"], np.tile(b, (2, 1)), rtol=1e-6)
    net.forward(data=2 * x)
    np.testing.assert_array_equal(held, (2 * x).astype(np.float32))
    with pytest.raises(Exception, match="an array of 3 values for a blob of 10"):
        net.blobs["data"].write_data(np.zeros(3, np.float32))


def test_forward_reshapes_inputs_for_a_new_batch():
    net = caffe.Net(_fc_net(), caffe.TEST)
    w, b = (p.data.copy() for p in net.params["ip"])
    x = np.random.default_rng(2).standard_normal((7, 5)).astype(np.float32)
    out = net.forward(data=x)["out"]
    assert out.shape == (7, 3)
    np.testing.assert_allclose(out, x @ w.T + b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype, numpy_type", [
    (DT.CAFFE_FLOAT, np.float32), (DT.CAFFE_HALF, np.float16),
    (DT.CAFFE_INT16_QUANTIZED, np.uint16), (DT.CAFFE_INT8_QUANTIZED, np.uint8)])
def test_numpy_type_of_each_data_type(dtype, numpy_type):
    net = caffe.Net(_fc_net(dtype), caffe.TEST)
    assert net.blobs["ip"].data.dtype == numpy_type
    assert net.blobs["ip"].data_type == dtype and net.blobs["out"].data_type == DT.CAFFE_FLOAT
    layer = net.layer_dict["ip"]
    assert layer.type == "InnerProduct" and layer.tops == ["ip"] and not layer.inserted
    # Reduced types read an inserted conversion of the fp32 input.
    converter = net.layers[[l.name for l in net.layers].index("ip") - 1]
    if dtype == DT.CAFFE_FLOAT:
        assert layer.bottoms == ["data"]
    else:
        assert converter.inserted and converter.type == "Quantizer"
        assert converter.bottoms == ["data"] and layer.bottoms == converter.tops
    assert all(p.data.dtype == numpy_type or dtype in (DT.CAFFE_INT8_QUANTIZED,
                                                       DT.CAFFE_INT16_QUANTIZED)
               for p in net.params["ip"])
    assert net.params["ip"][0].data.dtype == numpy_type
    assert net.blobs["data"].data.dtype == np.float32
    assert net.blobs["out"].data.dtype == np.float32


def test_fp16_forward_close_to_fp32(tmp_path):
    ref = caffe.Net(_fc_net(), caffe.TEST)
    ref.save(tmp_path / "w.caffemodel")
    half = caffe.Net(_fc_net(DT.CAFFE_HALF), caffe.TEST, weights=str(tmp_path / "w.caffemodel"))
    np.testing.assert_allclose(half.params["ip"][0].data.astype(np.float32),
                               ref.params["ip"][0].data, rtol=1e-3)
    x = np.random.default_rng(3).uniform(-1, 1, (2, 5)).astype(np.float32)
    np.testing.assert_allclose(half.forward(data=x)["out"], ref.forward(data=x)["out"],
                               rtol=1e-2, atol=1e-2)


def test_save_and_load_weights_both_call_forms(tmp_path):
    proto_path = tmp_path / "net.prototxt"
    proto_path.write_text(str(_fc_net()))
    net = caffe.Net(str(proto_path), caffe.TEST)
    net.params["ip"][0].data[...] = np.random.default_rng(4).standard_normal((3, 5))
    model = tmp_path / "net.caffemodel"
    net.save(str(model))
    for loaded in (caffe.Net(str(proto_path), caffe.TEST, weights=str(model)),
                   caffe.Net(str(proto_path), str(model), caffe.TEST)):
        for mine, theirs in zip(net.params["ip"], loaded.params["ip"]):
            np.testing.assert_array_equal(mine.data, theirs.data)
    saved = net.to_proto()
    assert [layer.name for layer in saved.layer if layer.blobs] == ["ip"]
    again = caffe.Net(_fc_net(), caffe.TEST)
    again.copy_from(saved)
    np.testing.assert_array_equal(again.params["ip"][0].data, net.params["ip"][0].data)


def test_quant_mode_and_phase():
    net = caffe.Net(_fc_net(), caffe.TEST)
    assert net.quant_mode == caffe.quantizer_mode.CAFFE_QUANT_PASSIVE
    net.quant_mode = caffe.quantizer_mode.CAFFE_QUANT_OBSERVE
    assert net.quant_mode == caffe.quantizer_mode.CAFFE_QUANT_OBSERVE
    with pytest.raises(caffe.Error, match="quantizer mode"):
        net.quant_mode = 9
    assert net.phase == caffe.TEST
    n = caffe.NetSpec()
    n.data = L.Input(shape=dict(dim=[1, 2]))
    n.train_only = L.ReLU(n.data, include=dict(phase=caffe.TRAIN))
    assert [layer.name for layer in caffe.Net(n.to_proto(), caffe.TRAIN).layers] == ["data", "train_only"]
    assert [layer.name for layer in caffe.Net(n.to_proto(), caffe.TEST).layers] == ["data"]
    with pytest.raises(caffe.Error, match="phase"):
        caffe.Net(n.to_proto(), 5)


def test_cpp_errors_arrive_as_python_exceptions(tmp_path):
    with pytest.raises(caffe.Error, match="no_such.prototxt"):
        caffe.Net(str(tmp_path / "no_such.prototxt"), caffe.TEST)
    n = caffe.NetSpec()
    n.data = L.Input(shape=dict(dim=[1, 2]))
    proto = n.to_proto()
    proto.layer.add(name="bad", type="ReLU", bottom=["missing"], top=["bad"])
    with pytest.raises(caffe.NetError, match="missing"):
        caffe.Net(proto, caffe.TEST)
    n = caffe.NetSpec()
    n.data = L.Input(shape=dict(dim=[1, 2, 3]))
    n.pool = L.Pooling(n.data, kernel_size=2)
    with pytest.raises(caffe.LayerError, match="pool.*4-d") as info:
        caffe.Net(n.to_proto(), caffe.TEST)
    assert isinstance(info.value, caffe.Error) and isinstance(info.value, RuntimeError)
    net = caffe.Net(_fc_net(), caffe.TEST)
    with pytest.raises(caffe.Error, match="absent.caffemodel"):
        net.copy_from(str(tmp_path / "absent.caffemodel"))


def test_views_held_across_runs_stay_live(tmp_path):
    """Views kept across forward passes work both ways: writes to held parameter views reach the
    next forward (fp32, and int8 where the weight sums feed the input zero point's correction),
    and held output views show each new forward's results."""
    net = caffe.Net(_fc_net(batch=4), caffe.TEST)
    w, b = (p.data for p in net.params["ip"])
    out = net.blobs["out"].data
    x = np.random.default_rng(2).uniform(-1, 1, (4, 5)).astype(np.float32)
    net.forward(data=x)
    first = out.copy()
    np.testing.assert_allclose(first, x @ w.T + b, rtol=1e-5, atol=1e-5)
    w *= 2
    b[...] = 0
    net.forward(data=x)
    np.testing.assert_allclose(out, x @ w.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out, net.blobs["out"].data)
    net.forward(data=-x)
    np.testing.assert_allclose(out, -x @ w.T, rtol=1e-5, atol=1e-5)

    # int8: inputs in [-1, 1] give a non-zero input zero point, so stale weight sums would show.
    f = caffe.Net(_fc_net(batch=4), caffe.TEST)
    f.quant_mode = caffe.quantizer_mode.CAFFE_QUANT_OBSERVE
    f.forward(data=x)
    weights = str(tmp_path / "calibrated.caffemodel")
    f.save(weights)
    q = caffe.Net(_fc_net(DT.CAFFE_INT8_QUANTIZED, batch=4), caffe.TEST, weights=weights)
    held = q.params["ip"][0].data
    assert held.dtype == np.uint8
    before = q.forward(data=x)["out"].copy()
    flipped = held[::-1].copy()
    held[...] = flipped
    after = q.forward(data=x)["out"].copy()
    assert not np.array_equal(before, after)
    fresh = caffe.Net(_fc_net(DT.CAFFE_INT8_QUANTIZED, batch=4), caffe.TEST, weights=weights)
    fresh.params["ip"][0].data[...] = flipped
    np.testing.assert_array_equal(fresh.forward(data=x)["out"], after)
    held[...] = flipped[::-1]
    np.testing.assert_array_equal(q.forward(data=x)["out"], before)


def test_int8_weight_writes_reach_the_next_forward(paper_models, tmp_path):
    """Writing int8 weights through a fresh .data view (pycaffe's way: `.data` is taken at each
    access) refreshes everything derived from them (packed weights, weight sums): the output
    equals that of a net loaded with the same weights, and writing the old ones back restores it."""
    folder = paper_models / "mnist_simple"
    f = caffe.Net(str(folder / "net_float.prototxt"), caffe.TEST)
    rng = np.random.default_rng(0)
    inputs = {k: rng.random(f.blobs[k].data.shape).astype(np.float32) for k in f.inputs}
    f.quant_mode = caffe.quantizer_mode.CAFFE_QUANT_OBSERVE
    f.forward(**inputs)
    weights = str(tmp_path / "calibrated.caffemodel")
    f.save(weights)

    def forward(net):
        return {k: v.copy() for k, v in net.forward(**inputs).items()}

    net = caffe.Net(str(folder / "net_int8.prototxt"), caffe.TEST, weights=weights)
    before = forward(net)
    assert net.params["hidden_layer"][0].data.dtype == np.uint8
    net.params["hidden_layer"][0].data[...] = net.params["hidden_layer"][0].data[::-1].copy()
    after = forward(net)
    assert not np.array_equal(before["pred"], after["pred"])

    fresh = caffe.Net(str(folder / "net_int8.prototxt"), caffe.TEST, weights=weights)
    fresh.params["hidden_layer"][0].data[...] = fresh.params["hidden_layer"][0].data[::-1].copy()
    np.testing.assert_array_equal(forward(fresh)["pred"], after["pred"])

    net.params["hidden_layer"][0].data[...] = net.params["hidden_layer"][0].data[::-1].copy()
    np.testing.assert_array_equal(forward(net)["pred"], before["pred"])

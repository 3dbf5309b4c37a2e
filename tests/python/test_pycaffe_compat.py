"""test_pycaffe_compat.py — names pycaffe scripts rely on: `from caffe.proto import caffe_pb2`,
layer_type_list, the OpenCL fork's enumerate_devices / set_devices / select_device, NetSpec
layers without tops (ntop=0) and pycaffe's NetSpec error message."""

import importlib

import numpy as np
import pytest

import mpcaffe as caffe
from mpcaffe import layers as L


def test_proto_package_holds_caffe_pb2():
    from mpcaffe.proto import caffe_pb2
    module = importlib.import_module("mpcaffe.proto.caffe_pb2")
    assert caffe_pb2 is caffe.caffe_pb2 is module is caffe.proto.caffe_pb2
    assert caffe.proto.NetParameter is caffe_pb2.NetParameter
    assert caffe_pb2.LayerParameter().python_param.param_str == ""


def test_enumerate_devices_prints_the_fork_listing(capsys):
    found = caffe.devices()
    assert caffe.enumerate_devices(True) == len(found)
    assert capsys.readouterr().out == ""
    assert caffe.enumerate_devices(False) == len(found)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"Total devices: {len(found)}"
    assert lines[1].startswith("CUDA devices: ") and lines[2].startswith("OpenCL devices: ")
    ids = [line.split(":", 1)[1].strip() for line in lines if line.startswith("Device id:")]
    assert ids == [str(d["index"]) for d in found]
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("Name:")]
    assert names == [d["name"] for d in found]


def test_set_devices_and_select_device():
    ids = [d["index"] for d in caffe.devices()]
    chosen = list(reversed(ids))
    try:
        caffe.set_devices(chosen)
        assert caffe.device_index() == chosen[0]
        caffe.select_device(len(chosen) - 1, True)  # a position in the list
        assert caffe.device_index() == chosen[-1]
        caffe.select_device(-1, True)  # keeps the current one
        assert caffe.device_index() == chosen[-1]
        caffe.select_device(chosen[0], False)  # a device id
        assert caffe.device_index() == chosen[0]
        with pytest.raises(caffe.DeviceError, match="there is no device 99"):
            caffe.set_devices([99])
        caffe.set_devices(chosen[:1])
        if len(ids) > 1:
            with pytest.raises(caffe.DeviceError, match="not among the devices given"):
                caffe.select_device(chosen[1], False)
        net = caffe.Net(_silence_spec().to_proto(), caffe.TEST)
        assert net.device_index == chosen[0]
    finally:
        caffe.set_devices(ids)


def _silence_spec():
    n = caffe.NetSpec()
    n.x = L.Input(shape=dict(dim=[2, 3]))
    n.y = L.ReLU(n.x)
    n.silence = L.Silence(n.x, ntop=0)
    return n


def test_netspec_layer_without_tops():
    proto = _silence_spec().to_proto()
    silence = [layer for layer in proto.layer if layer.type == "Silence"]
    assert len(silence) == 1
    assert silence[0].name == "silence" and list(silence[0].bottom) == ["x"]
    assert list(silence[0].top) == []
    net = caffe.Net(proto, caffe.TEST)
    out = net.forward(x=np.array([[-1, 2, -3], [4, -5, 6]], np.float32))
    assert out["y"].tolist() == [[0, 2, 0], [4, 0, 6]]
    # An unnamed layer without tops is named after its type.
    proto = caffe.to_proto(L.Silence(L.Input(shape=dict(dim=[1])), ntop=0))
    assert [layer.name for layer in proto.layer] == ["Input1", "Silence1"]


def test_netspec_error_message_is_pycaffe_s():
    n = caffe.NetSpec()
    n.x = L.Input(shape=dict(dim=[2, 3]))
    with pytest.raises(TypeError) as error:
        L.Silence((n.x,), ntop=0)
    assert str(error.value) == "Silence input 0 is not a Top (type is <class 'tuple'>)"


def test_layer_type_list():
    types = caffe.layer_type_list()
    assert {"Python", "Silence", "MOE", "Convolution", "Data"} <= set(types)
    assert types == sorted(types)

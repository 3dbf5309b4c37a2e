"""test_python_layer.py — Python layers (type "Python", python_param): setup/reshape/forward/
backward over NumPy views on every device, param_str and phase, parameter blobs trained by the
solver, reduced-precision neighbours, data layers changing the batch, and Python exceptions
arriving from net.forward() with the layer's name."""

import textwrap

import numpy as np
import pytest

import mpcaffe as caffe
from mpcaffe import layers as L

LAYERS = textwrap.dedent('''
    import json
    import numpy as np
    import mpcaffe as caffe

    class Scale(caffe.Layer):
        """top = scale * bottom; param_str is JSON {"scale": s}."""
        def setup(self, bottom, top):
            if len(bottom) != 1:
                raise ValueError("Scale takes one bottom")
            self.scale = json.loads(self.param_str)["scale"]
            self.calls = []
        def reshape(self, bottom, top):
            top[0].reshape(*bottom[0].data.shape)
        def forward(self, bottom, top):
            self.calls.append("forward")
            top[0].data[...] = self.scale * bottom[0].data
        def backward(self, top, propagate_down, bottom):
            self.calls.append(("backward", list(propagate_down)))
            if propagate_down[0]:
                bottom[0].diff[...] = self.scale * top[0].diff

    class LearnedBias(caffe.Layer):
        """top = bottom + b with b a parameter blob (one value per column)."""
        def setup(self, bottom, top):
            self.blobs.add_blob(bottom[0].data.shape[1])
            self.blobs[0].data[...] = 0.5
        def reshape(self, bottom, top):
            top[0].reshape(*bottom[0].data.shape)
        def forward(self, bottom, top):
            top[0].data[...] = bottom[0].data + self.blobs[0].data
        def backward(self, top, propagate_down, bottom):
            self.blobs[0].diff[...] += top[0].diff.sum(0)
            if propagate_down[0]:
                bottom[0].diff[...] = top[0].diff

    class Feed(caffe.Layer):
        """A data layer: tops x (N x 4) and label (N) from NumPy, N from param_str; the batch
        size can be changed between passes through self.batch."""
        def setup(self, bottom, top):
            self.batch = int(self.param_str)
            self.rng = np.random.default_rng(0)
            self.w = np.array([[1.0, -2.0, 0.5, 3.0], [-1.0, 1.0, 2.0, -0.5]], np.float32)
        def reshape(self, bottom, top):
            top[0].reshape(self.batch, 4)
            top[1].reshape(self.batch)
        def forward(self, bottom, top):
            x = self.rng.standard_normal((self.batch, 4)).astype(np.float32)
            top[0].data[...] = x
            top[1].data[...] = (x @ self.w.T).argmax(1)

    class Broken(caffe.Layer):
        def reshape(self, bottom, top):
            top[0].reshape(*bottom[0].data.shape)
        def forward(self, bottom, top):
            if self.param_str == "raise":
                raise ValueError("bad value in the batch")
            if self.param_str == "bare":
                raise KeyError
            top[0].data[...] = bottom[0].data

    class NotALayer:
        pass
''')


@pytest.fixture()
def layer_module(tmp_path, monkeypatch):
    """The module `pylayers` holding the test layers, importable by the nets."""
    (tmp_path / "pylayers.py").write_text(LAYERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "pylayers"


def _scale_net(module, scale=3.0, **layer_fields):
    n = caffe.NetSpec()
    n.x = L.Input(shape=dict(dim=[2, 3]))
    n.y = L.Input(shape=dict(dim=[2, 3]))
    n.scaled = L.Python(n.x, python_param=dict(module=module, layer="Scale",
                                               param_str=f'{{"scale": {scale}}}'), **layer_fields)
    n.loss = L.EuclideanLoss(n.scaled, n.y)
    return n.to_proto()


@pytest.mark.parametrize("device", [d["index"] for d in caffe.devices()])
def test_forward_and_backward_on_every_device(layer_module, device):
    caffe.set_device(device)
    try:
        param = _scale_net(layer_module)
        param.force_backward = True  # the input x gets a gradient
        net = caffe.Net(param, caffe.TRAIN)
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        y = np.ones((2, 3), np.float32)
        loss = net.forward(x=x, y=y)["loss"]
        np.testing.assert_allclose(net.blobs["scaled"].data, 3 * x)
        np.testing.assert_allclose(loss, ((3 * x - y) ** 2).sum() / 4, rtol=1e-6)
        net.backward()
        # EuclideanLoss: d/d(scaled) = (scaled - y) / N; the Python layer multiplies by 3.
        np.testing.assert_allclose(net.blobs["x"].diff, 3 * (3 * x - y) / 2, rtol=1e-6)
        layer = net.layers[list(net._layer_names).index("scaled")]
        assert isinstance(layer, caffe.Layer) and layer.scale == 3.0
        assert layer.param_str == '{"scale": 3.0}' and layer.phase == caffe.TRAIN
        assert layer.calls == ["forward", ("backward", [True])]
    finally:
        caffe.set_device(caffe.devices()[0]["index"])


def test_without_force_backward_inputs_get_no_gradient(layer_module):
    net = caffe.Net(_scale_net(layer_module, scale=2.0), caffe.TRAIN)
    x = np.full((2, 3), 2.0, np.float32)
    net.forward(x=x, y=np.zeros((2, 3), np.float32))
    net.backward()
    # As in BVLC: nothing below the Python layer needs a gradient, so it is not asked for one.
    assert net.layers[2].calls == ["forward"]


def test_reduced_precision_neighbours_get_conversions(layer_module):
    param = _scale_net(layer_module, scale=0.5)
    param.data_type = caffe.data_type.CAFFE_HALF
    net = caffe.Net(param, caffe.TEST)
    built = net.built_proto()
    python_layer = [l for l in built.layer if l.type == "Python"][0]
    assert python_layer.compute_data_type == caffe.data_type.CAFFE_FLOAT
    assert any(l.type == "Quantizer" for l in built.layer)
    x = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
    net.forward(x=x, y=np.zeros((2, 3), np.float32))
    assert net.blobs["x"].data.dtype == np.float16
    assert net.blobs[python_layer.top[0]].data.dtype == np.float32
    np.testing.assert_allclose(net.blobs[python_layer.top[0]].data, 0.5 * x, rtol=1e-3)


def test_int8_net_with_a_python_layer_in_the_middle(layer_module, tmp_path):
    DT = caffe.data_type

    def spec(data_type):
        n = caffe.NetSpec()
        n.x = L.Input(shape=dict(dim=[4, 8]), top_data_type=DT.CAFFE_FLOAT)
        n.a = L.InnerProduct(n.x, num_output=16, weight_filler=dict(type="gaussian", std=0.3))
        n.b = L.Python(n.a, python_param=dict(module=layer_module, layer="Scale",
                                              param_str='{"scale": 2.0}'))
        n.c = L.InnerProduct(n.b, num_output=3, weight_filler=dict(type="gaussian", std=0.3),
                             top_data_type=DT.CAFFE_FLOAT)
        param = n.to_proto()
        param.data_type = data_type
        return param

    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    fp32 = caffe.Net(spec(DT.CAFFE_FLOAT), caffe.TEST)
    fp32.quant_mode = caffe.quantizer_mode.CAFFE_QUANT_OBSERVE
    expected = fp32.forward(x=x)["c"].copy()
    fp32.save(tmp_path / "calibrated.caffemodel")
    int8 = caffe.Net(spec(DT.CAFFE_INT8_QUANTIZED), caffe.TEST,
                     weights=str(tmp_path / "calibrated.caffemodel"))
    types = [l.type for l in int8.built_proto().layer]
    python = types.index("Python")
    assert types[python - 1] == types[python + 1] == "Quantizer"  # uint8 -> fp32 -> uint8
    got = int8.forward(x=x)["c"]
    assert np.abs(got - expected).max() < 0.03 * np.abs(expected).max()


def test_parameter_blobs_of_a_python_layer_are_trained_and_saved(layer_module, tmp_path):
    n = caffe.NetSpec()
    n.x = L.Input(shape=dict(dim=[4, 2]))
    n.y = L.Input(shape=dict(dim=[4, 2]))
    n.biased = L.Python(n.x, python_param=dict(module=layer_module, layer="LearnedBias"))
    n.loss = L.EuclideanLoss(n.biased, n.y)
    sp = caffe.SolverParameter()
    sp.train_net_param.CopyFrom(n.to_proto())
    sp.base_lr, sp.lr_policy, sp.max_iter = 0.5, "fixed", 100
    sp.snapshot_prefix = str(tmp_path / "bias")
    solver = caffe.SGDSolver(sp)
    solver.quiet()
    assert list(solver.net.params) == ["biased"]
    assert solver.net.params["biased"][0].data.tolist() == [0.5, 0.5]
    x = np.zeros((4, 2), np.float32)
    y = np.tile(np.array([2.0, -1.0], np.float32), (4, 1))
    solver.net.blobs["x"].data[...] = x
    solver.net.blobs["y"].data[...] = y
    solver.step(60)
    np.testing.assert_allclose(solver.net.params["biased"][0].data, [2.0, -1.0], atol=1e-3)
    path = tmp_path / "bias.caffemodel"
    solver.net.save(path)
    again = caffe.Net(n.to_proto(), caffe.TEST, weights=str(path))
    np.testing.assert_allclose(again.params["biased"][0].data, [2.0, -1.0], atol=1e-3)
    # The layer object may outlive its net; its blobs then refuse access, never crash.
    layer = again.layers[2]
    assert len(layer.blobs) == 1
    del again
    import gc
    gc.collect()
    with pytest.raises(ValueError, match="the net holding this Python layer no longer exists"):
        len(layer.blobs)


def test_data_layer_trains_a_classifier_and_changes_the_batch(layer_module):
    n = caffe.NetSpec()
    n.x, n.label = L.Python(python_param=dict(module=layer_module, layer="Feed", param_str="16"),
                            ntop=2)
    n.ip = L.InnerProduct(n.x, num_output=2, weight_filler=dict(type="xavier"))
    n.loss = L.SoftmaxWithLoss(n.ip, n.label)
    sp = caffe.SolverParameter()
    sp.train_net_param.CopyFrom(n.to_proto())
    sp.base_lr, sp.momentum, sp.lr_policy, sp.max_iter = 0.1, 0.9, "fixed", 100
    solver = caffe.get_solver(sp)
    solver.quiet()
    assert isinstance(solver, caffe.SGDSolver)
    first = float(solver.net.forward()["loss"])
    solver.step(100)
    assert float(solver.net.forward()["loss"]) < 0.5 * first
    # The data layer reshapes before every pass; the layers after it follow.
    feed = solver.net.layers[0]
    feed.batch = 5
    solver.net.forward()
    assert solver.net.blobs["x"].data.shape == (5, 4)
    assert solver.net.blobs["ip"].data.shape == (5, 2)


def test_exception_in_forward_names_the_layer_and_the_net_survives(layer_module):
    n = caffe.NetSpec()
    n.x = L.Input(shape=dict(dim=[1, 2]))
    n.out = L.Python(n.x, python_param=dict(module=layer_module, layer="Broken",
                                            param_str="raise"))
    net = caffe.Net(n.to_proto(), caffe.TEST)
    with pytest.raises(ValueError, match=r"Python layer 'out' \(pylayers.Broken\) forward\(\): "
                                         r"bad value in the batch"):
        net.forward(x=np.ones((1, 2), np.float32))
    net.layers[1].param_str = "bare"
    with pytest.raises(KeyError, match=r"Python layer 'out' \(pylayers.Broken\) forward\(\)"):
        net.forward(x=np.ones((1, 2), np.float32))
    net.layers[1].param_str = "ok"
    out = net.forward(x=np.full((1, 2), 7.0, np.float32))["out"]
    assert out.tolist() == [[7.0, 7.0]]


def test_exception_in_a_solver_step_names_the_layer(layer_module):
    n = caffe.NetSpec()
    n.x = L.Input(shape=dict(dim=[2, 2]))
    n.y = L.Input(shape=dict(dim=[2, 2]))
    n.out = L.Python(n.x, python_param=dict(module=layer_module, layer="Broken",
                                            param_str="raise"))
    n.ip = L.InnerProduct(n.out, num_output=2)
    n.loss = L.EuclideanLoss(n.ip, n.y)
    sp = caffe.SolverParameter()
    sp.train_net_param.CopyFrom(n.to_proto())
    sp.base_lr, sp.lr_policy, sp.max_iter = 0.1, "fixed", 10
    solver = caffe.SGDSolver(sp)
    solver.quiet()
    with pytest.raises(ValueError, match=r"Python layer 'out' .* bad value in the batch"):
        solver.step(3)
    assert solver.iter == 0
    solver.net.layers[2].param_str = "ok"
    solver.step(2)
    assert solver.iter == 2


@pytest.mark.parametrize("python_param, error, message", [
    (dict(module="no_such_module_24", layer="X"), ImportError,
     r"Python layer 'out' \(no_such_module_24.X\) import of no_such_module_24.X: "),
    (dict(module="pylayers", layer="Missing"), AttributeError,
     r"Python layer 'out' \(pylayers.Missing\) import of pylayers.Missing: .*Missing"),
    (dict(module="pylayers", layer="NotALayer"), caffe.LayerError,
     r"layer 'out' \(Python\): pylayers.NotALayer is not a class deriving from caffe.Layer"),
    (dict(layer="Scale"), caffe.LayerError, r"python_param needs both 'module' and 'layer'"),
])
def test_bad_python_param_is_a_clear_error(layer_module, python_param, error, message):
    n = caffe.NetSpec()
    n.x = L.Input(shape=dict(dim=[1, 2]))
    n.out = L.Python(n.x, python_param=python_param)
    with pytest.raises(error, match=message):
        caffe.Net(n.to_proto(), caffe.TEST)


def test_layer_type_list_has_python():
    types = caffe.layer_type_list()
    assert "Python" in types and "Convolution" in types and types == sorted(types)

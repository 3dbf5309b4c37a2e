"""test_solver.py — training from Python: net.backward() gradients against NumPy, and
caffe.get_solver / step / snapshot / restore fitting Celsius → Fahrenheit with Adam."""

import numpy as np

import mpcaffe as caffe
from mpcaffe import layers as L


def _celsius_net():
    n = caffe.NetSpec()
    n.celsius = L.Input(input_param=dict(shape=dict(dim=[1, 1, 1, 1])))
    n.fahrenheit = L.Input(input_param=dict(shape=dict(dim=[1, 1, 1, 1])))
    n.output = L.InnerProduct(n.celsius, num_output=1, weight_filler=dict(type="constant"),
                              bias_filler=dict(type="constant"))
    n.loss = L.EuclideanLoss(n.output, n.fahrenheit)
    return n.to_proto()


def test_backward_gradients_match_numpy():
    n = caffe.NetSpec()
    n.x = L.Input(shape=dict(dim=[4, 3]))
    n.y = L.Input(shape=dict(dim=[4, 2]))
    n.ip = L.InnerProduct(n.x, num_output=2, weight_filler=dict(type="gaussian", std=1.0),
                          bias_filler=dict(type="gaussian", std=1.0))
    n.loss = L.EuclideanLoss(n.ip, n.y)
    net = caffe.Net(n.to_proto(), caffe.TRAIN)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    y = rng.standard_normal((4, 2)).astype(np.float32)
    loss = net.forward(x=x, y=y)["loss"]
    w, b = (p.data.copy() for p in net.params["ip"])
    residual = x @ w.T + b - y
    np.testing.assert_allclose(loss, (residual ** 2).sum() / 8, rtol=1e-5)
    net.backward()
    np.testing.assert_allclose(net.params["ip"][0].diff, residual.T @ x / 4, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(net.params["ip"][1].diff, residual.sum(0) / 4, rtol=1e-4, atol=1e-5)


def _solver_param(tmp_path, max_iter):
    sp = caffe.SolverParameter()
    sp.train_net_param.CopyFrom(_celsius_net())
    # The paper's Listing 2.2 settings.
    sp.base_lr = 1.0
    sp.momentum = 0.99
    sp.weight_decay = 0.00005
    sp.lr_policy = "inv"
    sp.gamma = 0.01
    sp.power = 0.75
    sp.max_iter = max_iter
    sp.type = "Adam"
    sp.snapshot_prefix = str(tmp_path / "celsius")
    return sp


def test_adam_fits_celsius_to_fahrenheit(tmp_path):
    solver = caffe.get_solver(_solver_param(tmp_path, 1500))
    solver.quiet()
    assert solver.type == "Adam" and solver.iter == 0 and solver.test_nets == []
    rng = np.random.default_rng(0)
    celsius = rng.uniform(-273, 999, 1500).astype(np.float32)
    losses = []
    for c in celsius:
        solver.net.blobs["celsius"].data[0] = c
        solver.net.blobs["fahrenheit"].data[0] = 1.8 * c + 32
        losses.append(solver.step(1))
    assert solver.iter == 1500
    assert np.mean(losses[-100:]) < np.mean(losses[:100]) / 100
    w, b = (float(p.data.ravel()[0]) for p in solver.net.params["output"])
    assert abs(w - 1.8) < 0.05, w
    test = np.arange(-273, 1000, 7, dtype=np.float32)
    mae = np.abs(w * test + b - (1.8 * test + 32)).mean()
    assert mae < 10.0, f"MAE {mae:.2f} °F after 1500 Adam steps (w={w:.4f}, b={b:.2f})"

    state = solver.snapshot()
    assert state.endswith("celsius_iter_1500.solverstate")
    assert (tmp_path / "celsius_iter_1500.caffemodel").exists()
    again = caffe.get_solver(_solver_param(tmp_path, 1500))
    again.restore(state)
    assert again.iter == 1500
    np.testing.assert_array_equal(again.net.params["output"][0].data,
                                  solver.net.params["output"][0].data)
    inference = caffe.Net(_celsius_net(), caffe.TEST,
                          weights=str(tmp_path / "celsius_iter_1500.caffemodel"))
    out = inference.forward(blobs=["output"], celsius=np.full((1, 1, 1, 1), 100, np.float32),
                            fahrenheit=np.zeros((1, 1, 1, 1), np.float32))["output"]
    np.testing.assert_allclose(out.ravel()[0], 100 * w + b, rtol=1e-5)


def test_test_nets_and_solve(tmp_path):
    """solver.test_nets from test_net_param, solver.test() and solve() to max_iter."""
    sp = _solver_param(tmp_path, 200)
    sp.test_net_param.add().CopyFrom(_celsius_net())
    sp.test_iter.append(1)
    sp.test_interval = 1000
    sp.snapshot_after_train = False
    solver = caffe.get_solver(sp)
    solver.quiet()
    assert len(solver.test_nets) == 1 and solver.test_nets[0].phase == caffe.TEST
    test_net = solver.test_nets[0]
    assert test_net.inputs == ["celsius", "fahrenheit"] and test_net.outputs == ["loss"]
    # Constant data: the fit is w·10 + b = 50 (any line through that point).
    for net in (solver.net, test_net):
        net.blobs["celsius"].data[...] = 10.0
        net.blobs["fahrenheit"].data[...] = 50.0
    before = solver.test(0)["loss"]
    solver.solve()
    assert solver.iter == 200
    after = solver.test(0)["loss"]
    assert after < before / 10, (before, after)
    # The test net shares the trained weights.
    np.testing.assert_array_equal(test_net.params["output"][0].data,
                                  solver.net.params["output"][0].data)

"""test_pycaffe_api.py — pycaffe's Net and Solver surface: top_names / bottom_names, layer and
blob order, forward(start, end), backward(start, end, **diffs), clear_param_diffs, HDF5 weights
(save_hdf5 / load_hdf5 / Net(weights=.h5)), and the solver classes with apply_update."""

import numpy as np
import pytest

import mpcaffe as caffe
from mpcaffe import layers as L


def _two_layer_net(loss=True):
    n = caffe.NetSpec()
    n.x = L.Input(shape=dict(dim=[3, 4]))
    n.ip1 = L.InnerProduct(n.x, num_output=5, weight_filler=dict(type="gaussian", std=0.5),
                           bias_filler=dict(type="gaussian", std=0.5))
    n.relu1 = L.ReLU(n.ip1, in_place=True)
    n.ip2 = L.InnerProduct(n.ip1, num_output=2, weight_filler=dict(type="gaussian", std=0.5))
    if loss:
        n.y = L.Input(shape=dict(dim=[3, 2]))
        n.loss = L.EuclideanLoss(n.ip2, n.y)
    return n.to_proto()


def _reference(net, x):
    w1, b1 = (p.data for p in net.params["ip1"])
    w2, b2 = (p.data for p in net.params["ip2"])
    h = np.maximum(x @ w1.T + b1, 0)
    return h, h @ w2.T + b2


def test_names_and_orders_follow_pycaffe():
    n = caffe.NetSpec()
    n.x = L.Input(shape=dict(dim=[2, 3]))
    n.a = L.InnerProduct(n.x, num_output=2)
    n.b = L.InnerProduct(n.x, num_output=2)  # x feeds two layers: the net inserts a Split
    net = caffe.Net(n.to_proto(), caffe.TEST)
    names = net._layer_names
    assert names[0] == "x" and names[1].endswith("_split") and names[2:] == ["a", "b"]
    split = names[1]
    assert list(net.top_names) == names and list(net.bottom_names) == names
    assert net.bottom_names["x"] == [] and net.top_names["x"] == ["x"]
    assert net.bottom_names[split] == ["x"] and len(net.top_names[split]) == 2
    assert net.bottom_names["a"] == [net.top_names[split][0]]
    assert net.bottom_names["b"] == [net.top_names[split][1]]
    assert list(net.blobs) == ["x"] + net.top_names[split] + ["a", "b"]
    assert list(net.params) == ["a", "b"] and len(net.layers) == len(names)
    assert [layer.type for layer in net.layers] == ["Input", "Split", "InnerProduct",
                                                    "InnerProduct"]


def test_blobs_of_layers_run_as_views_hold_their_values():
    # At inference a Split's tops share x's data, a Dropout's top shares its bottom's, and the
    # Concat's inputs are written straight into their slices of its output (net/net_memory.cc):
    # net.blobs still shows every one of them with the values the layers would have copied,
    # also through views of .data kept across passes.
    n = caffe.NetSpec()
    n.x = L.Input(shape=dict(dim=[1, 3, 4, 4]))
    filler = dict(type="gaussian", std=1)
    n.a = L.Convolution(n.x, num_output=2, kernel_size=1, weight_filler=filler)
    n.b = L.Convolution(n.x, num_output=4, kernel_size=1, weight_filler=filler)
    n.cat = L.Concat(n.a, n.b)
    n.drop = L.Dropout(n.cat, dropout_ratio=0.3)
    net = caffe.Net(n.to_proto(), caffe.TEST)
    split = net._layer_names[1]
    assert net._layer_names[1].endswith("_split")
    kept = {name: net.blobs[name].data for name in net.blobs}
    rng = np.random.default_rng(3)
    for _ in range(2):
        x = rng.standard_normal((1, 3, 4, 4)).astype(np.float32)
        net.blobs["x"].data[...] = x
        net.forward()
        conv = {k: np.einsum("oc,chw->ohw", net.params[k][0].data.reshape(-1, 3), x[0])
                + net.params[k][1].data[:, None, None] for k in ("a", "b")}
        cat = np.concatenate([conv["a"], conv["b"]])[None]
        for name in net.top_names[split]:
            np.testing.assert_array_equal(net.blobs[name].data, x)
            np.testing.assert_array_equal(kept[name], x)
        for name, want in (("a", conv["a"][None]), ("b", conv["b"][None]), ("cat", cat),
                           ("drop", cat)):
            np.testing.assert_allclose(net.blobs[name].data, want, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(kept[name], want, rtol=1e-5, atol=1e-5)


def test_forward_and_backward_between_layers():
    net = caffe.Net(_two_layer_net(), caffe.TRAIN)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    y = rng.standard_normal((3, 2)).astype(np.float32)
    net.blobs["x"].data[...] = x
    net.blobs["y"].data[...] = y
    out = net.forward(end="relu1")
    h, o = _reference(net, x)
    assert list(out) == ["ip1"]
    np.testing.assert_allclose(out["ip1"], h, rtol=1e-5, atol=1e-6)
    out = net.forward(start="ip2", blobs=["ip1"])
    np.testing.assert_allclose(out["loss"], ((o - y) ** 2).sum() / 6, rtol=1e-5)
    assert set(out) == {"loss", "ip1"}
    # Backward over the loss and ip2 only: ip2's gradients, ip1's untouched.
    net.clear_param_diffs()
    diffs = net.backward(start="loss", end="ip2")
    np.testing.assert_allclose(net.params["ip2"][0].diff, ((o - y) / 3).T @ h, rtol=1e-4,
                               atol=1e-6)
    assert not net.params["ip1"][0].diff.any()
    assert list(diffs) == ["ip1"]  # the end layer's bottoms
    np.testing.assert_allclose(diffs["ip1"], ((o - y) / 3) @ net.params["ip2"][0].data,
                               rtol=1e-4, atol=1e-6)
    net.backward()
    assert net.params["ip1"][0].diff.any()
    net.clear_param_diffs()
    assert not any(p.diff.any() for blobs in net.params.values() for p in blobs)
    with pytest.raises(ValueError, match="start layer 'ip1' comes before end layer 'ip2'"):
        net.backward(start="ip1", end="ip2")
    with pytest.raises(KeyError, match="start layer 'nope' is not in the net"):
        net.forward(start="nope")


def test_backward_with_output_diffs_given():
    param = _two_layer_net(loss=False)
    param.force_backward = True
    net = caffe.Net(param, caffe.TRAIN)
    x = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    net.forward(x=x)
    h, _ = _reference(net, x)
    top = np.ones((3, 2), np.float32)
    diffs = net.backward(ip2=top)
    assert list(diffs) == ["x"]
    np.testing.assert_allclose(net.params["ip2"][0].diff, top.T @ h, rtol=1e-5, atol=1e-6)
    w1, w2 = net.params["ip1"][0].data, net.params["ip2"][0].data
    np.testing.assert_allclose(diffs["x"], ((top @ w2) * (h > 0)) @ w1, rtol=1e-4, atol=1e-6)
    with pytest.raises(KeyError, match="'x' is not an output blob"):
        net.backward(x=np.zeros((3, 4), np.float32))


def test_hdf5_weights_round_trip(tmp_path):
    h5py = pytest.importorskip("h5py", reason="HDF5 weights need h5py (scripts/python-test.sh "
                                              "installs it)")
    net = caffe.Net(_two_layer_net(), caffe.TRAIN)
    x = np.random.default_rng(3).standard_normal((3, 4)).astype(np.float32)
    net.forward(x=x, y=np.zeros((3, 2), np.float32))
    net.backward()
    path = tmp_path / "w.caffemodel.h5"
    net.save_hdf5(str(path), write_diff=True)
    with h5py.File(path, "r") as f:
        assert f["data/ip1/0"].shape == (5, 4) and f["data/ip1/1"].shape == (5,)
        assert "0" not in f["data/relu1"] and f["data/ip2/0"].shape == (2, 5)
        np.testing.assert_array_equal(f["diff/ip2/0"][...], net.params["ip2"][0].diff)
    other = caffe.Net(_two_layer_net(), caffe.TEST)
    for blobs in other.params.values():
        for blob in blobs:
            blob.data[...] = 0
    other.load_hdf5(str(path))
    for name in ("ip1", "ip2"):
        for a, b in zip(other.params[name], net.params[name]):
            np.testing.assert_array_equal(a.data, b.data)
    # The weights argument recognises HDF5 files by their signature, whatever the name says.
    renamed = tmp_path / "weights.bin"
    renamed.write_bytes(path.read_bytes())
    loaded = caffe.Net(_two_layer_net(), caffe.TEST, weights=str(renamed))
    np.testing.assert_array_equal(loaded.params["ip1"][0].data, net.params["ip1"][0].data)
    # A shape that does not fit is refused with the layer's name.
    with h5py.File(path, "r+") as f:
        del f["data/ip2/0"]
        f["data/ip2/0"] = np.zeros((3, 5), np.float32)
    with pytest.raises(ValueError, match=r"layer 'ip2' parameter 0 has shape \(2, 5\), .* "
                                         r"holds \(3, 5\)"):
        other.load_hdf5(str(path))


def _solver_file(tmp_path, type_line, net_param, max_iter=20):
    net_path = tmp_path / "net.prototxt"
    net_path.write_text(str(net_param))
    path = tmp_path / "solver.prototxt"
    path.write_text(f'net: "{net_path}"\nbase_lr: 0.05\nlr_policy: "fixed"\nmomentum: 0.9\n'
                    f'max_iter: {max_iter}\nsnapshot_prefix: "{tmp_path / "snap"}"\n'
                    f'display: 0\n{type_line}\n')
    return str(path)


@pytest.mark.parametrize("cls, name", [
    (caffe.SGDSolver, "SGD"), (caffe.NesterovSolver, "Nesterov"),
    (caffe.AdaGradSolver, "AdaGrad"), (caffe.RMSPropSolver, "RMSProp"),
    (caffe.AdaDeltaSolver, "AdaDelta"), (caffe.AdamSolver, "Adam")])
def test_solver_classes_use_their_own_rule(tmp_path, cls, name):
    path = _solver_file(tmp_path, 'type: "SGD"', _two_layer_net())
    solver = cls(path)
    solver.quiet()
    assert solver.type == name and isinstance(solver, caffe.SGDSolver)
    assert isinstance(solver, caffe.Solver) and solver.param.type == name
    rng = np.random.default_rng(4)
    solver.net.blobs["x"].data[...] = rng.standard_normal((3, 4))
    solver.net.blobs["y"].data[...] = rng.standard_normal((3, 2))
    before = float(solver.net.forward()["loss"])
    solver.step(20)
    assert solver.iter == 20
    assert float(solver.net.forward()["loss"]) < before


def test_get_solver_picks_the_class_of_the_type(tmp_path):
    assert type(caffe.get_solver(_solver_file(tmp_path, 'type: "Adam"', _two_layer_net()))) \
        is caffe.AdamSolver
    assert type(caffe.get_solver(_solver_file(tmp_path, "solver_type: NESTEROV",
                                              _two_layer_net()))) is caffe.NesterovSolver
    assert type(caffe.get_solver(_solver_file(tmp_path, "", _two_layer_net()))) \
        is caffe.SGDSolver
    with pytest.raises(caffe.SolverError, match="solver type 'Fancy' is unknown"):
        caffe.get_solver(_solver_file(tmp_path, 'type: "Fancy"', _two_layer_net()))
    with pytest.raises(caffe.SolverError, match="cannot read solver file"):
        caffe.SGDSolver(str(tmp_path / "missing.prototxt"))


def test_apply_update_equals_a_step(tmp_path):
    path = _solver_file(tmp_path, 'type: "Nesterov"', _two_layer_net())
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    y = rng.standard_normal((3, 2)).astype(np.float32)
    stepped, manual = caffe.get_solver(path), caffe.get_solver(path)
    for s in (stepped, manual):
        s.quiet()
        s.net.blobs["x"].data[...] = x
        s.net.blobs["y"].data[...] = y
    stepped.step(1)
    manual.net.clear_param_diffs()
    manual.net.forward()
    manual.net.backward()
    manual.apply_update()
    assert manual.iter == 0 and stepped.iter == 1
    for name in ("ip1", "ip2"):
        for a, b in zip(manual.net.params[name], stepped.net.params[name]):
            np.testing.assert_allclose(a.data, b.data, rtol=1e-6, atol=1e-7)


def test_snapshot_restore_and_solve(tmp_path):
    path = _solver_file(tmp_path, 'type: "Adam"', _two_layer_net(), max_iter=10)
    solver = caffe.AdamSolver(path)
    solver.quiet()
    solver.step(4)
    state = solver.snapshot()
    weights = [p.data.copy() for p in solver.net.params["ip1"]]
    solver.step(3)
    solver.restore(state)
    assert solver.iter == 4
    np.testing.assert_array_equal(solver.net.params["ip1"][0].data, weights[0])
    solver.solve()
    assert solver.iter == 10


def test_share_with_uses_the_other_net_s_parameters():
    train = caffe.Net(_two_layer_net(), caffe.TRAIN)
    test = caffe.Net(_two_layer_net(loss=False), caffe.TEST)
    train.params["ip1"][0].data[...] = 0.25
    assert not np.allclose(test.params["ip1"][0].data, 0.25)
    test.share_with(train)
    np.testing.assert_array_equal(test.params["ip1"][0].data, 0.25)
    train.params["ip2"][1].data[...] = -1.0  # shared blobs: later writes show in both
    out = test.forward(x=np.zeros((3, 4), np.float32))["ip2"]
    h = np.maximum(train.params["ip1"][1].data, 0)
    np.testing.assert_allclose(out[0], train.params["ip2"][0].data @ h - 1.0, rtol=1e-5)


def test_forward_all_and_forward_backward_all_batch_and_trim():
    param = _two_layer_net(loss=False)
    param.force_backward = True
    net = caffe.Net(param, caffe.TRAIN)
    x = np.random.default_rng(6).standard_normal((7, 4)).astype(np.float32)  # 3 + 3 + 1 rows
    out = net.forward_all(x=x)
    assert list(out) == ["ip2"] and out["ip2"].shape == (7, 2)
    np.testing.assert_allclose(out["ip2"], _reference(net, x)[1], rtol=1e-5, atol=1e-6)
    forward, backward = net.forward_backward_all(x=x, ip2=np.ones((7, 2), np.float32))
    np.testing.assert_allclose(forward["ip2"], out["ip2"], rtol=1e-6)
    h, _ = _reference(net, x)
    w1, w2 = net.params["ip1"][0].data, net.params["ip2"][0].data
    expected = ((np.ones((7, 2)) @ w2) * (h > 0)) @ w1
    assert backward["x"].shape == (7, 4)
    np.testing.assert_allclose(backward["x"], expected, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="different numbers of rows"):
        net.forward_backward_all(x=x, ip2=np.ones((5, 2), np.float32))

"""test_recurrent.py — BVLC's recurrent layers from Python: NetSpec routes RNN / LSTM keywords to
recurrent_param, layer_type_list() and caffe.draw know them, net.params holds BVLC's blobs, and
the ONNX export of LSTM (static input, exposed states), RNN and LSTMUnit agrees with ONNX
Runtime on sequences without restarts after the first step."""

import numpy as np
import pytest

import mpcaffe as caffe
from mpcaffe import layers as L

T, N, D, H = 4, 2, 3, 5
FILLERS = dict(weight_filler=dict(type="uniform", min=-0.5, max=0.5),
               bias_filler=dict(type="uniform", min=-0.5, max=0.5))


def _sequence_net(kind, static=False, exposed=False):
    n = caffe.NetSpec()
    n.x = L.Input(shape=dict(dim=[T, N, D]))
    n.cont = L.Input(shape=dict(dim=[T, N]))
    bottoms = [n.x, n.cont]
    if static:
        n.xs = L.Input(shape=dict(dim=[N, 2]))
        bottoms.append(n.xs)
    if exposed:
        n.h0 = L.Input(shape=dict(dim=[1, N, H]))
        bottoms.append(n.h0)
        if kind == "LSTM":
            n.c0 = L.Input(shape=dict(dim=[1, N, H]))
            bottoms.append(n.c0)
    tops = (3 if kind == "LSTM" else 2) if exposed else 1
    outs = getattr(L, kind)(*bottoms, num_output=H, expose_hidden=exposed, ntop=tops, **FILLERS)
    if tops == 1:
        n.seq = outs
    else:
        n.seq, n.hT = outs[0], outs[1]
        if tops == 3:
            n.cT = outs[2]
    return n


def _feeds(net, seed):
    rng = np.random.default_rng(seed)
    feeds = {name: rng.uniform(-1, 1, net.blobs[name].shape).astype(np.float32)
             for name in net.inputs}
    cont = np.ones((T, N), np.float32)
    cont[0, 1] = 0  # stream 1 starts afresh; stream 0 goes on from the (exposed) initial state
    feeds["cont"] = cont
    return feeds


def test_netspec_types_and_bvlc_parameter_blobs():
    n = _sequence_net("LSTM", static=True)
    layer = [l for l in n.to_proto().layer if l.type == "LSTM"][0]
    assert layer.recurrent_param.num_output == H
    assert {"RNN", "LSTM", "LSTMUnit"} <= set(caffe.layer_type_list())
    net = caffe.Net(n.to_proto(), caffe.TEST)
    assert [p.data.shape for p in net.params[layer.name]] == [(4 * H, D), (4 * H,), (4 * H, 2),
                                                              (4 * H, H)]
    assert net.blobs["seq"].data.shape == (T, N, H)
    rnn = caffe.Net(_sequence_net("RNN").to_proto(), caffe.TEST)
    assert [p.data.shape for p in list(rnn.params.values())[0]] == [(H, D), (H,), (H, H), (H, H),
                                                                   (H,)]


def test_draw_labels_recurrent_layers():
    pytest.importorskip("pydot", reason="caffe.draw needs pydot")
    graph = caffe.draw.get_pydot_graph(_sequence_net("LSTM", exposed=True).to_proto(), "TB")
    labels = [node.get_label().strip('"') for node in graph.get_nodes()]
    assert any("(LSTM)" in label and f"out {H} exposed states" in label for label in labels), labels


onnx = pytest.importorskip("onnx", reason="pip install onnx to test the ONNX export")
ort = pytest.importorskip("onnxruntime", reason="pip install onnxruntime to test the export")
import mpcaffe.onnx as mponnx  # noqa: E402  (after the skips)


def _agree(net, feeds, ops, rtol=1e-4):
    ours = {k: v.copy() for k, v in net.forward(**feeds).items()}
    model = mponnx.export(net)
    assert ops <= {node.op_type for node in model.graph.node}
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    wanted = {i.name for i in session.get_inputs()}
    theirs = dict(zip(names, session.run(None, {k: v for k, v in feeds.items() if k in wanted})))
    assert set(theirs) == set(ours)
    for name, value in ours.items():
        err = np.abs(theirs[name] - value).max()
        assert err <= rtol * np.abs(value).max(), (name, err)


@pytest.mark.parametrize("kind,static,exposed", [("LSTM", True, False), ("LSTM", False, True),
                                                 ("RNN", True, True)])
def test_onnx_export_matches_onnxruntime(kind, static, exposed):
    net = caffe.Net(_sequence_net(kind, static, exposed).to_proto(), caffe.TEST)
    _agree(net, _feeds(net, 3), {kind})


def test_onnx_export_of_lstm_unit():
    n = caffe.NetSpec()
    n.c_prev = L.Input(shape=dict(dim=[1, N, H]))
    n.gates = L.Input(shape=dict(dim=[1, N, 4 * H]))
    n.cont = L.Input(shape=dict(dim=[1, N]))
    n.c, n.h = L.LSTMUnit(n.c_prev, n.gates, n.cont, ntop=2)
    net = caffe.Net(n.to_proto(), caffe.TEST)
    feeds = {name: np.random.default_rng(5).uniform(-2, 2, net.blobs[name].shape).astype(np.float32)
             for name in net.inputs}
    feeds["cont"] = np.array([[1, 0]], np.float32)
    _agree(net, feeds, {"Split", "Sigmoid", "Tanh"})

"""test_index_data_layers.py — BVLC's Filter, BatchReindex, Embed, MemoryData and WindowData from
Python: layer_type_list, NetSpec, Net.set_input_arrays with pycaffe's checks, the ONNX export
(Embed and BatchReindex as Gather, checked against ONNX Runtime; Filter refused) and caffe.draw."""

import numpy as np
import pytest

import mpcaffe as caffe
from mpcaffe import layers as L
from mpcaffe import params as P

NEW_TYPES = {"Filter", "BatchReindex", "Embed", "MemoryData", "WindowData"}


def test_layer_type_list_has_the_new_types():
    assert NEW_TYPES <= set(caffe.layer_type_list())


def _memory_net(tmp_path, batch=2):
    n = caffe.NetSpec()
    n.data, n.label = L.MemoryData(memory_data_param=dict(batch_size=batch, channels=1, height=2,
                                                          width=3), ntop=2)
    n.ip = L.InnerProduct(n.data, num_output=2, weight_filler=dict(type="xavier"))
    n.loss = L.SoftmaxWithLoss(n.ip, n.label)
    path = tmp_path / "memory.prototxt"
    path.write_text(str(n.to_proto()))
    return caffe.Net(str(path), caffe.TRAIN)


def test_set_input_arrays_serves_batches(tmp_path):
    net = _memory_net(tmp_path)
    data = np.arange(4 * 6, dtype=np.float32).reshape(4, 1, 2, 3)
    labels = np.array([0, 1, 1, 0], np.float32)
    net.set_input_arrays(data, labels)
    net.forward()
    np.testing.assert_array_equal(net.blobs["data"].data, data[:2])
    np.testing.assert_array_equal(net.blobs["label"].data, labels[:2])
    net.forward()
    np.testing.assert_array_equal(net.blobs["data"].data, data[2:])
    net.backward()
    net.forward()  # wraps around
    np.testing.assert_array_equal(net.blobs["label"].data, labels[:2])


@pytest.mark.parametrize("data, labels, message", [
    (np.zeros((2, 1, 2, 3), np.float64), np.zeros(2, np.float32), "must be float32"),
    (np.zeros((2, 1, 3, 2), np.float32).transpose(0, 1, 3, 2), np.zeros(2, np.float32),
     "C contiguous"),
    (np.zeros((2, 6), np.float32), np.zeros(2, np.float32), "4-d"),
    (np.zeros((2, 2, 2, 3), np.float32), np.zeros(2, np.float32), "channels"),
    (np.zeros((2, 1, 2, 3), np.float32), np.zeros(4, np.float32), "same first dimension"),
    (np.zeros((3, 1, 2, 3), np.float32), np.zeros(3, np.float32), "multiple of batch size"),
])
def test_set_input_arrays_checks(tmp_path, data, labels, message):
    net = _memory_net(tmp_path)
    with pytest.raises(RuntimeError, match=message):
        net.set_input_arrays(data, labels)


def test_set_input_arrays_needs_memory_data_first(tmp_path):
    n = caffe.NetSpec()
    n.data = L.Input(shape=dict(dim=[2, 3]))
    n.ip = L.InnerProduct(n.data, num_output=2)
    path = tmp_path / "input.prototxt"
    path.write_text(str(n.to_proto()))
    net = caffe.Net(str(path), caffe.TEST)
    with pytest.raises(RuntimeError, match="first layer is a MemoryDataLayer"):
        net.set_input_arrays(np.zeros((2, 1, 1, 3), np.float32), np.zeros(2, np.float32))


def _index_net(tmp_path):
    n = caffe.NetSpec()
    n.words, n.order = L.Input(shape=[dict(dim=[2, 3]), dict(dim=[4])], ntop=2)
    n.vec = L.Embed(n.words, num_output=4, input_dim=7, weight_filler=dict(type="gaussian"),
                    bias_filler=dict(type="gaussian"))
    n.picked = L.BatchReindex(n.vec, n.order)
    path = tmp_path / "index.prototxt"
    path.write_text(str(n.to_proto()))
    assert 'type: "Embed"' in path.read_text() and "embed_param" in path.read_text()
    return caffe.Net(str(path), caffe.TEST)


def test_embed_and_batch_reindex_forward(tmp_path):
    net = _index_net(tmp_path)
    words = np.array([[6, 0, 2], [2, 2, 5]], np.float32)
    order = np.array([1, 1, 0, 1], np.float32)
    out = net.forward(words=words, order=order)["picked"]
    w, b = net.params["vec"][0].data, net.params["vec"][1].data
    assert w.shape == (7, 4)
    vec = w[words.astype(int)] + b
    np.testing.assert_allclose(out, vec[order.astype(int)], rtol=1e-6)


def test_onnx_export_gathers(tmp_path):
    pytest.importorskip("onnx", reason="pip install onnx to test the ONNX export")
    ort = pytest.importorskip("onnxruntime", reason="pip install onnxruntime to test the export")
    import mpcaffe.onnx as mponnx
    net = _index_net(tmp_path)
    feeds = {"words": np.array([[6, 0, 2], [2, 2, 5]], np.float32),
             "order": np.array([1, 0, 0, 1], np.float32)}
    ours = net.forward(**feeds)["picked"].copy()
    model = mponnx.export(net)
    assert [n.op_type for n in model.graph.node].count("Gather") == 2
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    theirs = session.run(["picked"], feeds)[0]
    np.testing.assert_allclose(theirs, ours, rtol=1e-6)


def test_onnx_refuses_filter(tmp_path):
    pytest.importorskip("onnx", reason="pip install onnx to test the ONNX export")
    import mpcaffe.onnx as mponnx
    n = caffe.NetSpec()
    n.x, n.keep = L.Input(shape=[dict(dim=[3, 2]), dict(dim=[3, 1])], ntop=2)
    n.y = L.Filter(n.x, n.keep)
    path = tmp_path / "filter.prototxt"
    path.write_text(str(n.to_proto()))
    net = caffe.Net(str(path), caffe.TEST)
    out = net.forward(x=np.arange(6, dtype=np.float32).reshape(3, 2),
                      keep=np.array([[1], [0], [1]], np.float32))["y"]
    np.testing.assert_array_equal(out, [[0, 1], [4, 5]])
    with pytest.raises(mponnx.ExportError, match=r"layer 'y' \(Filter\).*static shape"):
        mponnx.export(net)


def test_draw_labels_embed():
    pytest.importorskip("pydot", reason="pip install pydot to test caffe.draw")
    import mpcaffe.draw
    n = caffe.NetSpec()
    n.words = L.Input(shape=dict(dim=[2]))
    n.vec = L.Embed(n.words, num_output=4, input_dim=7)
    graph = mpcaffe.draw.get_pydot_graph(n.to_proto(), "LR")
    text = graph.to_string()
    assert "in 7 out 4" in text

"""test_io_draw_coord_map.py — caffe.io (BlobProto / Datum conversions, load_image,
resize_image, oversample, Transformer), caffe.draw (pydot graph, rendering through Graphviz)
and caffe.coord_map (maps through convolution / pooling / deconvolution, crop), checked against
what BVLC's pycaffe documents."""

import shutil

import numpy as np
import pytest

import mpcaffe as caffe
from mpcaffe import layers as L, params as P
from mpcaffe import io as cio


# --- caffe.io --------------------------------------------------------------------------------

def test_blobproto_round_trips():
    arr = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    diff = -arr
    blob = cio.array_to_blobproto(arr, diff)
    assert list(blob.shape.dim) == [2, 3, 4]
    np.testing.assert_array_equal(cio.blobproto_to_array(blob), arr)
    np.testing.assert_array_equal(cio.blobproto_to_array(blob, return_diff=True), diff)
    legacy = caffe.caffe_pb2.BlobProto(num=1, channels=2, height=1, width=3,
                                       data=[1, 2, 3, 4, 5, 6])
    assert cio.blobproto_to_array(legacy).shape == (1, 2, 1, 3)
    packed = caffe.caffe_pb2.BlobProto(data_type=caffe.data_type.CAFFE_HALF,
                                       packed_data=np.array([1.5, -2], np.float16).tobytes())
    packed.shape.dim.append(2)
    out = cio.blobproto_to_array(packed)
    assert out.dtype == np.float16 and out.tolist() == [1.5, -2.0]
    # 4-bit weights: 2 channels of K = 3 in 2 bytes each, low nibble first, signed.
    w4 = caffe.caffe_pb2.BlobProto(data_type=caffe.data_type.CAFFE_INT8_QUANTIZED, packed_bits=4,
                                   packed_data=bytes([0x8F, 0x07, 0x21, 0x0E]))
    w4.shape.dim.extend([2, 3])
    out = cio.blobproto_to_array(w4)
    assert out.dtype == np.int8 and out.tolist() == [[-1, -8, 7], [1, 2, -2]]
    w4.packed_data = bytes([1, 2, 3])
    with pytest.raises(ValueError, match="3 bytes of 4-bit weights"):
        cio.blobproto_to_array(w4)
    bad = caffe.caffe_pb2.BlobProto(data=[1, 2, 3])
    bad.shape.dim.extend([2, 2])
    with pytest.raises(ValueError, match=r"holds 3 data values for shape \(2, 2\)"):
        cio.blobproto_to_array(bad)
    arrays = [arr, np.ones((5,), np.float32)]
    back = cio.blobprotovector_str_to_arraylist(cio.arraylist_to_blobprotovector_str(arrays))
    assert len(back) == 2 and all(np.array_equal(a, b) for a, b in zip(arrays, back))


def test_datum_round_trips():
    pixels = np.arange(12, dtype=np.uint8).reshape(3, 2, 2)
    datum = cio.array_to_datum(pixels, label=7)
    assert datum.data == pixels.tobytes() and datum.label == 7 and not datum.float_data
    out = cio.datum_to_array(datum)
    assert out.dtype == np.uint8 and np.array_equal(out, pixels)
    values = np.linspace(0, 1, 8).reshape(2, 2, 2)
    datum = cio.array_to_datum(values)
    assert len(datum.float_data) == 8 and not datum.HasField("label")
    np.testing.assert_allclose(cio.datum_to_array(datum), values, rtol=1e-6)
    with pytest.raises(ValueError, match="C×H×W"):
        cio.array_to_datum(np.zeros((2, 2)))


def test_load_image(tmp_path):
    from PIL import Image
    rgb = np.zeros((4, 5, 3), np.uint8)
    rgb[..., 0], rgb[1, 2] = 255, (10, 20, 30)
    Image.fromarray(rgb).save(tmp_path / "c.png")
    Image.fromarray(rgb[..., 1]).save(tmp_path / "g.png")
    Image.fromarray(np.dstack([rgb, np.full((4, 5), 9, np.uint8)])).save(tmp_path / "a.png")
    img = cio.load_image(str(tmp_path / "c.png"))
    assert img.shape == (4, 5, 3) and img.dtype == np.float32
    np.testing.assert_allclose(img, rgb / 255.0, rtol=1e-6)
    grey = cio.load_image(str(tmp_path / "c.png"), color=False)
    assert grey.shape == (4, 5, 1)
    np.testing.assert_allclose(grey[1, 2, 0], (0.2125 * 10 + 0.7154 * 20 + 0.0721 * 30) / 255,
                               rtol=1e-5)
    tiled = cio.load_image(str(tmp_path / "g.png"))
    assert tiled.shape == (4, 5, 3) and np.array_equal(tiled[..., 0], tiled[..., 2])
    assert cio.load_image(str(tmp_path / "a.png")).shape == (4, 5, 3)


def test_resize_image():
    im = np.arange(16, dtype=np.float32).reshape(4, 4, 1)
    same = cio.resize_image(im, (4, 4))
    np.testing.assert_array_equal(same, im)
    half = cio.resize_image(im, (2, 2))  # bilinear at pixel centres: means of 2×2 blocks
    np.testing.assert_allclose(half[..., 0], [[2.5, 4.5], [10.5, 12.5]])
    nearest = cio.resize_image(np.array([[[1.0], [2.0]]], np.float32), (1, 4), interp_order=0)
    assert nearest[..., 0].tolist() == [[1, 1, 2, 2]]
    big = cio.resize_image(np.random.default_rng(0).random((5, 7, 3)), (11, 3))
    assert big.shape == (11, 3, 3) and big.dtype == np.float32
    with pytest.raises(ValueError, match="interp_order 3 is not supported"):
        cio.resize_image(im, (2, 2), interp_order=3)


def test_oversample_order():
    im = np.arange(4 * 6, dtype=np.float32).reshape(4, 6, 1)
    crops = cio.oversample([im, im + 100], (2, 2))
    assert crops.shape == (20, 2, 2, 1)
    expected = [im[:2, :2], im[:2, 4:], im[2:, :2], im[2:, 4:], im[1:3, 2:4]]
    for k, crop in enumerate(expected):
        np.testing.assert_array_equal(crops[k], crop)
        np.testing.assert_array_equal(crops[5 + k], crop[:, ::-1])
        np.testing.assert_array_equal(crops[10 + k], crop + 100)


def test_transformer_preprocess_and_deprocess():
    t = cio.Transformer({"data": (1, 3, 4, 6)})
    t.set_transpose("data", (2, 0, 1))
    t.set_channel_swap("data", (2, 1, 0))
    t.set_raw_scale("data", 255)
    t.set_mean("data", np.array([10.0, 20.0, 30.0]))
    t.set_input_scale("data", 0.5)
    img = np.random.default_rng(1).random((4, 6, 3)).astype(np.float32)
    x = t.preprocess("data", img)
    assert x.shape == (3, 4, 6)
    expected = (img.transpose(2, 0, 1)[[2, 1, 0]] * 255 - np.array([10, 20, 30])[:, None, None])
    np.testing.assert_allclose(x, expected * 0.5, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(t.deprocess("data", x[None]), img, rtol=1e-5, atol=1e-6)
    # Images of another size are resized to the input's height and width first.
    assert t.preprocess("data", np.zeros((8, 12, 3), np.float32)).shape == (3, 4, 6)
    with pytest.raises(ValueError, match="label is not one of the net inputs"):
        t.set_raw_scale("label", 1)
    with pytest.raises(ValueError, match="Transpose order needs"):
        t.set_transpose("data", (1, 0))
    with pytest.raises(ValueError, match="Channel swap needs"):
        t.set_channel_swap("data", (1, 0))
    with pytest.raises(ValueError, match="Mean channels incompatible"):
        t.set_mean("data", np.zeros(4))
    with pytest.raises(ValueError, match="Mean shape incompatible"):
        t.set_mean("data", np.zeros((3, 5, 6)))
    t.set_mean("data", np.ones((3, 4, 6)))
    assert t.mean["data"].shape == (3, 4, 6)


# --- caffe.draw ------------------------------------------------------------------------------

def _lenet_like():
    n = caffe.NetSpec()
    n.data, n.label = L.Python(python_param=dict(module="m", layer="Feed"), ntop=2)
    n.conv1 = L.Convolution(n.data, kernel_size=5, num_output=20, stride=1)
    n.pool1 = L.Pooling(n.conv1, kernel_size=2, stride=2, pool=P.Pooling.MAX)
    n.ip1 = L.InnerProduct(n.pool1, num_output=10)
    n.relu1 = L.ReLU(n.ip1, in_place=True)
    n.loss = L.SoftmaxWithLoss(n.ip1, n.label)
    n.acc = L.Accuracy(n.ip1, n.label, include=dict(phase=caffe.TEST))
    proto = n.to_proto()
    proto.name = "lenet"
    return proto


def test_pydot_graph_structure():
    pytest.importorskip("pydot", reason="caffe.draw needs pydot (scripts/install-deps.sh and "
                                        "scripts/python-test.sh install it)")
    graph = caffe.draw.get_pydot_graph(_lenet_like(), "TB")
    labels = {n.get_name(): n.get_label().strip('"') for n in graph.get_nodes()}
    assert "conv1\\n(Convolution)\\nkernel 5 stride 1 pad 0 out 20" in labels.values()
    assert "pool1\\n(Pooling)\\nMAX kernel 2 stride 2 pad 0" in labels.values()
    edges = {(labels[e.get_source()], labels[e.get_destination()]) for e in graph.get_edges()}
    assert ("data", "conv1\\n(Convolution)\\nkernel 5 stride 1 pad 0 out 20") in edges
    relu = "relu1\\n(ReLU)"
    assert ("ip1", relu) in edges and (relu, "ip1") in edges  # in place: back to its blob
    assert any(label.startswith("acc") for label in labels.values())
    train = caffe.draw.get_pydot_graph(_lenet_like(), "LR", phase=caffe.TRAIN)
    train_labels = [n.get_label() for n in train.get_nodes()]
    assert not any(label.strip('"').startswith("acc ") for label in train_labels)
    assert any("conv1 (Convolution)" in label for label in train_labels)


@pytest.mark.skipif(shutil.which("dot") is None,
                    reason="Graphviz's dot is not installed (scripts/install-deps.sh installs it)")
def test_draw_net_renders_with_graphviz(tmp_path):
    pytest.importorskip("pydot", reason="caffe.draw needs pydot")
    png = caffe.draw.draw_net(_lenet_like(), "LR")  # pycaffe: rankdir second, png default
    assert png.startswith(b"\x89PNG")
    path = tmp_path / "lenet.svg"
    caffe.draw.draw_net_to_file(_lenet_like(), str(path), rankdir="TB", phase=caffe.TEST)
    svg = path.read_text()
    assert "<svg" in svg and "conv1" in svg and "acc" in svg


# --- caffe.coord_map -------------------------------------------------------------------------

def _fcn_like():
    n = caffe.NetSpec()
    n.data = L.Input(shape=dict(dim=[1, 3, 100, 100]))
    n.conv1 = L.Convolution(n.data, kernel_size=3, pad=100, num_output=4)
    n.relu1 = L.ReLU(n.conv1, in_place=True)
    n.pool1 = L.Pooling(n.relu1, kernel_size=2, stride=2, pool=P.Pooling.MAX)
    n.score = L.Convolution(n.pool1, kernel_size=1, num_output=2)
    n.up = L.Deconvolution(n.score, convolution_param=dict(kernel_size=4, stride=2,
                                                            num_output=2))
    return n


def test_coord_map_through_layers():
    n = _fcn_like()
    axis, a, b = caffe.coord_map.coord_map_from_to(n.pool1, n.data)
    # pool1 x -> conv1 2x + 0.5 -> data (2x + 0.5) + 1 - 100
    assert axis == 1
    np.testing.assert_allclose(a, [2]) and np.testing.assert_allclose(b, [-98.5])
    # data -> conv1 d + 99 -> pool1 (d + 99) / 2 - 0.25 -> up 2 pool1 + 1.5 = d + 100
    axis, a, b = caffe.coord_map.coord_map_from_to(n.up, n.data)
    np.testing.assert_allclose(a, [1])
    np.testing.assert_allclose(b, [-100])
    crop = caffe.coord_map.crop(n.up, n.data)
    n.crop = crop
    layer = [l for l in n.to_proto().layer if l.type == "Crop"][0]
    assert list(layer.bottom) == ["up", "data"]
    assert layer.crop_param.axis == 2 and list(layer.crop_param.offset) == [100]
    with pytest.raises(AssertionError, match="scale mismatch"):  # what pycaffe raises
        caffe.coord_map.crop(n.pool1, n.data)
    n.shifted = L.Deconvolution(n.score, convolution_param=dict(kernel_size=4, stride=2, pad=101,
                                                                 num_output=2))
    with pytest.raises(ValueError, match="cannot crop negative offset"):
        caffe.coord_map.crop(n.shifted, n.data)
    other = L.Input(shape=dict(dim=[1, 1, 4, 4]))
    with pytest.raises(RuntimeError, match="Could not compute map between tops"):
        caffe.coord_map.coord_map_from_to(n.conv1, other)


def test_coord_map_compose_and_inverse():
    cm = caffe.coord_map
    m = cm.compose((1, np.array([2.0]), np.array([1.0])), (None, 1, 0))
    assert m[0] == 1
    axis, a, b = cm.inverse(m)
    np.testing.assert_allclose(a, [0.5]) and np.testing.assert_allclose(b, [-0.5])
    with pytest.raises(cm.AxisMismatchException):
        cm.compose((1, 1, 0), (2, 1, 0))
    with pytest.raises(cm.UndefinedMapException):
        cm.coord_map(L.InnerProduct(L.Input(shape=dict(dim=[1])), num_output=1).fn)

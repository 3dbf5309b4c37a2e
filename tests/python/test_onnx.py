"""test_onnx.py — mpcaffe.onnx.export against ONNX Runtime: LeNet, CIFAR10-quick and AlexNet in
fp32 (random weights, outputs within 1e-4 relative), int8 InnerProduct and Convolution layers
within one quantization step of ONNX Runtime's QLinear operators, and the Quantizer layer's
QuantizeLinear / DequantizeLinear."""

import numpy as np
import pytest
from google.protobuf import text_format

import mpcaffe as caffe
from mpcaffe import layers as L

onnx = pytest.importorskip("onnx", reason="pip install onnx to test the ONNX export")
ort = pytest.importorskip("onnxruntime", reason="pip install onnxruntime to test the export")
import mpcaffe.onnx as mponnx  # noqa: E402  (after the skips)

DT = caffe.data_type


def _run_onnx(model, feeds, outputs=None):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return dict(zip(outputs or [o.name for o in session.get_outputs()],
                    session.run(outputs, feeds)))


def _assert_relative(actual, expected, rtol=1e-4):
    actual = np.asarray(actual, np.float64)
    expected = np.asarray(expected, np.float64)
    assert actual.shape == expected.shape
    scale = np.abs(expected).max()
    assert scale > 0, "an all-zero output proves nothing"
    err = np.abs(actual - expected).max()
    assert err <= rtol * scale, f"max |diff| {err:.3g} > {rtol} x max |ref| {scale:.3g}"


def _fp32_agreement(net, tmp_path, seed, save=True):
    rng = np.random.default_rng(seed)
    feeds = {name: rng.uniform(-1, 1, net.blobs[name].shape).astype(np.float32)
             for name in net.inputs}
    ours = {k: v.copy() for k, v in net.forward(**feeds).items()}
    # (AlexNet's 240 MB of weights: the checker and the file each cost a second or two.)
    model = mponnx.export(net, tmp_path / "net.onnx" if save else None, check=save)
    assert not save or (tmp_path / "net.onnx").stat().st_size > 0
    theirs = _run_onnx(model, feeds)
    assert set(theirs) == set(ours), (set(theirs), set(ours))
    for name in ours:
        _assert_relative(theirs[name], ours[name])
    return model


def test_lenet_fp32(tmp_path, bvlc_models):
    net = caffe.Net(str(bvlc_models / "mnist" / "lenet.prototxt"), caffe.TEST)
    model = _fp32_agreement(net, tmp_path, 1)
    ops = {n.op_type for n in model.graph.node}
    assert {"Conv", "MaxPool", "Gemm", "Relu", "Softmax"} <= ops, ops
    assert "Identity" not in ops, "float layers write their tops directly"
    assert caffe.onnx is mponnx  # mpcaffe.onnx also loads on attribute access


def test_cifar10_quick_fp32(tmp_path, bvlc_models):
    net = caffe.Net(str(bvlc_models / "cifar10" / "cifar10_quick.prototxt"), caffe.TEST)
    model = _fp32_agreement(net, tmp_path, 2)
    assert {"AveragePool", "MaxPool"} <= {n.op_type for n in model.graph.node}


def _deploy(path, shape):
    """A train_val prototxt for inference: Data layers become one Input, label users go."""
    param = caffe.NetParameter()
    text_format.Parse(path.read_text(), param)
    deploy = caffe.NetParameter()
    deploy.CopyFrom(param)
    del deploy.layer[:]
    deploy.layer.add(name="data", type="Input", top=["data"]).input_param.shape.add(dim=shape)
    for layer in param.layer:
        if layer.type == "Data" or "label" in layer.bottom:
            continue
        deploy.layer.append(layer)
    return deploy


def test_alexnet_fp32_batch1(tmp_path, paper_models):
    proto = _deploy(paper_models / "imagenet_caffenet" / "net_float_1.prototxt", [1, 3, 227, 227])
    # The prototxt's gaussian fillers (std 0.005–0.01) shrink activations layer by layer and
    # drawing 60 M values costs seconds: constant fillers, then He-scaled random weights
    # (a 1 M-value random block repeated) keep every layer's output away from zero.
    for layer in proto.layer:
        for field in ("convolution_param", "inner_product_param"):
            if layer.HasField(field):
                getattr(layer, field).weight_filler.type = "constant"
    net = caffe.Net(proto, caffe.TEST)
    rng = np.random.default_rng(3)
    block = rng.standard_normal(1 << 20, dtype=np.float32)
    for name, blobs in net.params.items():
        fan_in = int(np.prod(blobs[0].shape[1:]))
        start = int(rng.integers(0, 1 << 19))
        w = np.resize(np.roll(block, start), blobs[0].shape) * np.float32(np.sqrt(2.0 / fan_in))
        blobs[0].data[...] = w
        if len(blobs) > 1:
            blobs[1].data[...] = rng.uniform(0, 0.1, blobs[1].shape)
    model = _fp32_agreement(net, tmp_path, 3, save=False)
    ops = {n.op_type for n in model.graph.node}
    assert {"Conv", "LRN", "MaxPool", "Gemm", "Relu"} <= ops, ops
    assert "Dropout" not in ops


def _zoo_nets():
    """bench/zoo_nets.py, the architectures no kernel or default was tuned on."""
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[2] / "bench" / "zoo_nets.py"
    spec = importlib.util.spec_from_file_location("zoo_nets", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["squeezenet11", "googlenet", "mobilenet_v2", "densenet121"])
def test_untuned_architectures_fp32(tmp_path, name):
    # Fire modules, inception modules, inverted residuals and dense blocks (Split, Concat in
    # place, Concats of Concats, depthwise, BatchNorm / Scale folding and pre-activation
    # BatchNorm kernels, Eltwise sums) at 64 pixels; BatchNorm statistics of a trained net
    # (mean ≈ 0, variance ≈ 1) instead of the fillers' zeros.
    text = _zoo_nets().NETS[name](64)
    proto = caffe.NetParameter()
    text_format.Parse(text, proto)
    net = caffe.Net(proto, caffe.TEST)
    rng = np.random.default_rng(11)
    for layer_name, blobs in net.params.items():
        if len(blobs) == 3:  # BatchNorm: mean, variance, moving-average factor
            blobs[0].data[...] = rng.normal(0, 0.1, blobs[0].shape)
            blobs[1].data[...] = rng.uniform(0.5, 1.5, blobs[1].shape)
            blobs[2].data[...] = 1.0
        elif layer_name.endswith("/scale"):
            blobs[0].data[...] = rng.uniform(0.8, 1.2, blobs[0].shape)
            blobs[1].data[...] = rng.normal(0, 0.1, blobs[1].shape)
    model = _fp32_agreement(net, tmp_path, 5, save=False)
    ops = {n.op_type for n in model.graph.node}
    assert {"Conv", "Concat" if name != "mobilenet_v2" else "Add", "Softmax"} <= ops, ops


def test_eltwise_batchnorm_scale_concat_fp32(tmp_path):
    n = caffe.NetSpec()
    n.data = L.Input(shape=dict(dim=[2, 3, 6, 6]))
    n.conv = L.Convolution(n.data, num_output=4, kernel_size=3, pad=1, group=1,
                           weight_filler=dict(type="gaussian", std=0.3),
                           bias_filler=dict(type="gaussian", std=0.3))
    n.bn = L.BatchNorm(n.conv, use_global_stats=True)
    n.scaled = L.Scale(n.bn, bias_term=True, filler=dict(type="gaussian", std=1.0),
                       bias_filler=dict(type="gaussian", std=1.0))
    n.sig = L.Sigmoid(n.scaled)
    n.tanh = L.TanH(n.conv)
    n.sum = L.Eltwise(n.sig, n.tanh, coeff=[2.0, -1.0])
    n.prod = L.Eltwise(n.sig, n.tanh, operation=caffe.params.Eltwise.PROD)
    n.max = L.Eltwise(n.sig, n.tanh, operation=caffe.params.Eltwise.MAX)
    n.cat = L.Concat(n.sum, n.prod, n.max, axis=1)
    n.flat = L.Flatten(n.cat)
    n.drop = L.Dropout(n.flat, dropout_ratio=0.5)
    n.ip = L.InnerProduct(n.drop, num_output=5, weight_filler=dict(type="xavier"))
    n.prob = L.Softmax(n.ip)
    net = caffe.Net(n.to_proto(), caffe.TEST)
    rng = np.random.default_rng(4)
    mean, var, factor = net.params["bn"]
    mean.data[...] = rng.standard_normal(4) * 2
    var.data[...] = rng.uniform(1, 4, 4) * 2
    factor.data[...] = 2.0
    model = _fp32_agreement(net, tmp_path, 4)
    ops = {node.op_type for node in model.graph.node}
    assert {"BatchNormalization", "Mul", "Add", "Sum", "Max", "Concat", "Sigmoid", "Tanh"} <= ops


def test_activation_family_fp32(tmp_path):
    """BVLC's element-wise layers (issue 43) export to the matching ONNX operators."""
    n = caffe.NetSpec()
    n.data = L.Input(shape=dict(dim=[2, 3, 4, 4]))
    n.absval = L.AbsVal(n.data)
    n.bnll = L.BNLL(n.data)
    n.clip = L.Clip(n.data, min=-0.5, max=0.25)
    n.elu = L.ELU(n.data, alpha=0.5)
    n.exp = L.Exp(n.data, base=2.0, scale=0.7, shift=0.3)
    n.log = L.Log(n.data, scale=0.5, shift=3.0)
    n.power = L.Power(n.data, power=2.0, scale=-1.5, shift=0.25)
    n.swish = L.Swish(n.data, beta=1.5)
    n.threshold = L.Threshold(n.data, threshold=0.1)
    n.prelu = L.PReLU(n.data, filler=dict(type="uniform", min=-1, max=1))
    n.prelu_shared = L.PReLU(n.data, channel_shared=True)
    n.bias = L.Bias(n.data, axis=1, num_axes=2, filler=dict(type="gaussian", std=1.0))
    n.bias2 = L.Bias(n.data, n.absval, axis=0)
    n.s1, n.s2 = L.Slice(n.elu, ntop=2, slice_point=[1], axis=1)
    net = caffe.Net(n.to_proto(), caffe.TEST)
    model = _fp32_agreement(net, tmp_path, 9)
    ops = {node.op_type for node in model.graph.node}
    assert {"Abs", "Softplus", "Clip", "Elu", "Exp", "Log", "Pow", "Sigmoid", "Greater", "PRelu",
            "Add", "Split"} <= ops, ops
    assert {"AbsVal", "BNLL", "Clip", "ELU", "Exp", "Log", "Power", "PReLU", "Swish", "Threshold",
            "Bias", "Slice", "SigmoidCrossEntropyLoss"} <= set(caffe.layer_type_list())


def test_crop_tile_reduction_argmax_mvn_fp32(tmp_path):
    """Crop, Tile, Reduction, ArgMax and MVN (issue 43) export to Slice, Tile, the Reduce
    operators, TopK and MVN's primitives."""
    n = caffe.NetSpec()
    n.data = L.Input(shape=dict(dim=[2, 3, 5, 4]))
    n.ref = L.Input(shape=dict(dim=[2, 2, 3, 2]))
    n.crop = L.Crop(n.data, n.ref, axis=1, offset=[1, 2, 1])
    n.crop2 = L.Crop(n.data, n.ref, offset=[1])
    n.tile = L.Tile(n.crop, axis=-1, tiles=3)
    P = caffe.params.Reduction
    n.sum = L.Reduction(n.data, axis=1)
    n.asum = L.Reduction(n.data, operation=P.ASUM, axis=2, coeff=-2.0)
    n.sumsq = L.Reduction(n.data, operation=P.SUMSQ, axis=-1)
    n.mean = L.Reduction(n.data, operation=P.MEAN, coeff=0.5)
    n.argmax = L.ArgMax(n.data, axis=1, top_k=2, out_max_val=True)
    n.argmax_index = L.ArgMax(n.data, axis=-1)
    n.argmax_item = L.ArgMax(n.data, top_k=3, out_max_val=True)
    n.mvn = L.MVN(n.data)
    n.mvn_across = L.MVN(n.data, across_channels=True, eps=0.01)
    n.mvn_mean = L.MVN(n.data, normalize_variance=False)
    net = caffe.Net(n.to_proto(), caffe.TEST)
    model = _fp32_agreement(net, tmp_path, 11)
    ops = {node.op_type for node in model.graph.node}
    assert {"Slice", "Tile", "ReduceSum", "ReduceL1", "ReduceSumSquare", "ReduceMean",
            "TopK", "Div"} <= ops, ops
    assert {"Crop", "Tile", "Reduction", "ArgMax", "MVN"} <= set(caffe.layer_type_list())


def test_deconvolution_fp32(tmp_path):
    """Deconvolution (issue 43) exports to ConvTranspose: stride, pad, _h/_w, dilation, group."""
    n = caffe.NetSpec()
    n.data = L.Input(shape=dict(dim=[2, 4, 5, 4]))
    n.up = L.Deconvolution(n.data, convolution_param=dict(
        num_output=6, kernel_size=4, stride=2, pad=1, group=2,
        weight_filler=dict(type="gaussian", std=0.3), bias_filler=dict(type="gaussian", std=0.3)))
    n.up2 = L.Deconvolution(n.data, convolution_param=dict(
        num_output=3, kernel_h=3, kernel_w=2, stride_h=1, stride_w=3, pad_h=1, dilation=2,
        bias_term=False, weight_filler=dict(type="gaussian", std=0.3)))
    net = caffe.Net(n.to_proto(), caffe.TEST)
    assert list(net.blobs["up"].shape) == [2, 6, 10, 8]
    model = _fp32_agreement(net, tmp_path, 13)
    assert {node.op_type for node in model.graph.node} == {"ConvTranspose"}
    assert "Deconvolution" in caffe.layer_type_list()


def test_nd_convolution_fp32(tmp_path):
    """N-d Convolution and Deconvolution (issue 43) export to Conv / ConvTranspose with one value
    per spatial axis: a small 3-D net (stride, pad, dilation, group, per-axis kernel) and a 1-D
    one, against ONNX Runtime; a channel axis other than 1 is refused with the field named."""
    n = caffe.NetSpec()
    n.data = L.Input(shape=dict(dim=[2, 4, 5, 6, 4]))
    n.conv = L.Convolution(n.data, convolution_param=dict(
        num_output=6, kernel_size=[3, 2, 3], stride=[1, 2, 1], pad=[1, 0, 1], group=2,
        weight_filler=dict(type="gaussian", std=0.3), bias_filler=dict(type="gaussian", std=0.3)))
    n.relu = L.ReLU(n.conv)
    n.dil = L.Convolution(n.relu, convolution_param=dict(
        num_output=3, kernel_size=2, dilation=2, bias_term=False,
        weight_filler=dict(type="gaussian", std=0.3)))
    n.up = L.Deconvolution(n.dil, convolution_param=dict(
        num_output=2, kernel_size=2, stride=2, pad=[0, 0, 1],
        weight_filler=dict(type="gaussian", std=0.3), bias_filler=dict(type="gaussian", std=0.3)))
    net = caffe.Net(n.to_proto(), caffe.TEST)
    assert list(net.blobs["conv"].shape) == [2, 6, 5, 3, 4]
    assert list(net.blobs["up"].shape) == [2, 2, 6, 2, 2]
    model = _fp32_agreement(net, tmp_path, 17)
    ops = [node.op_type for node in model.graph.node]
    assert sorted(set(ops)) == ["Conv", "ConvTranspose", "Relu"], ops
    conv = next(node for node in model.graph.node if node.op_type == "Conv")
    attrs = {a.name: list(a.ints) for a in conv.attribute if a.ints}
    assert attrs["kernel_shape"] == [3, 2, 3] and attrs["pads"] == [1, 0, 1, 1, 0, 1], attrs

    n = caffe.NetSpec()
    n.data = L.Input(shape=dict(dim=[3, 2, 9]))
    n.conv = L.Convolution(n.data, convolution_param=dict(
        num_output=4, kernel_size=3, stride=2, pad=1,
        weight_filler=dict(type="gaussian", std=0.3), bias_filler=dict(type="gaussian", std=0.3)))
    n.up = L.Deconvolution(n.conv, convolution_param=dict(
        num_output=2, kernel_size=3, stride=2, weight_filler=dict(type="gaussian", std=0.3)))
    _fp32_agreement(caffe.Net(n.to_proto(), caffe.TEST), tmp_path, 18)

    n = caffe.NetSpec()
    n.data = L.Input(shape=dict(dim=[1, 2, 2, 3, 3]))
    n.conv5d = L.Convolution(n.data, convolution_param=dict(
        num_output=2, kernel_size=3, pad=1, axis=2, weight_filler=dict(type="gaussian", std=0.3)))
    with pytest.raises(mponnx.ExportError, match="'conv5d' \\(Convolution\\).*axis 2"):
        mponnx.export(caffe.Net(n.to_proto(), caffe.TEST))


def test_in_place_layers_and_intermediate_outputs(tmp_path):
    """In-place layers rewrite a blob: the graph stays in SSA form and an intermediate output
    is the blob's last value."""
    n = caffe.NetSpec()
    n.data = L.Input(shape=dict(dim=[3, 6]))
    n.ip = L.InnerProduct(n.data, num_output=5, weight_filler=dict(type="gaussian", std=1.0))
    n.relu = L.ReLU(n.ip, in_place=True)
    n.drop = L.Dropout(n.ip, in_place=True)
    n.ip2 = L.InnerProduct(n.ip, num_output=4, weight_filler=dict(type="gaussian", std=1.0))
    net = caffe.Net(n.to_proto(), caffe.TEST)
    x = np.random.default_rng(8).standard_normal((3, 6)).astype(np.float32)
    ours = {k: v.copy() for k, v in net.forward(data=x, blobs=["ip"]).items()}
    assert (ours["ip"] >= 0).all() and (ours["ip"] == 0).any()
    model = mponnx.export(net, outputs=["ip", "ip2"])
    theirs = _run_onnx(model, {"data": x})
    for name in ("ip", "ip2"):
        _assert_relative(theirs[name], ours[name])


def _calibrated_int8(tmp_path, make, inputs, seed):
    """(fp32 net, int8 net with the fp32 net's weights and ranges observed over `inputs`)."""
    fp32 = caffe.Net(make(DT.CAFFE_FLOAT), caffe.TEST)
    fp32.quant_mode = caffe.quantizer_mode.CAFFE_QUANT_OBSERVE
    fp32.forward(**inputs)
    fp32.save(tmp_path / "calibrated.caffemodel")
    int8 = caffe.Net(make(DT.CAFFE_INT8_QUANTIZED), caffe.TEST,
                     weights=str(tmp_path / "calibrated.caffemodel"))
    return fp32, int8


def _int8_agreement(int8, feeds, layer, tmp_path):
    out = int8.forward(**feeds)
    ours = int8.blobs[layer].data.copy()
    assert ours.dtype == np.uint8
    model = mponnx.export(int8, tmp_path / "int8.onnx", outputs=[layer] + list(out))
    theirs = _run_onnx(model, feeds)
    assert theirs[layer].dtype == np.uint8
    diff = np.abs(theirs[layer].astype(np.int32) - ours.astype(np.int32))
    assert diff.max() <= 1, f"{layer}: {int(diff.max())} quantization steps apart"
    assert np.unique(ours).size > 20, "the test needs a spread of quantized values"
    return model, diff


# int8 InnerProduct weights have a scale per output channel (the default), except a transposed
# one's: only one scale and no bias is QLinearMatMul, the others go through QLinearConv.
@pytest.mark.parametrize("bias,transpose", [(True, False), (False, False), (False, True)])
def test_int8_inner_product_matches_qlinear(tmp_path, bias, transpose):
    def make(dtype):
        n = caffe.NetSpec()
        n.data = L.Input(shape=dict(dim=[8, 40]))
        n.ip = L.InnerProduct(n.data, num_output=24, bias_term=bias, transpose=transpose,
                              weight_filler=dict(type="gaussian", std=0.2),
                              bias_filler=dict(type="gaussian", std=0.5),
                              bottom_data_type=dtype, compute_data_type=dtype, top_data_type=dtype)
        n.out = L.Quantizer(n.ip, bottom_data_type=dtype, compute_data_type=dtype,
                            top_data_type=DT.CAFFE_FLOAT)
        return n.to_proto()
    x = np.random.default_rng(5).uniform(-1, 2, (8, 40)).astype(np.float32)
    _, int8 = _calibrated_int8(tmp_path, make, {"data": x}, 5)
    model, _ = _int8_agreement(int8, {"data": x}, "ip", tmp_path)
    ops = [node.op_type for node in model.graph.node]
    assert ("QLinearMatMul" if transpose and not bias else "QLinearConv") in ops, ops
    assert "QuantizeLinear" in ops and "DequantizeLinear" in ops


def test_int8_convolution_matches_qlinear_conv(tmp_path):
    def make(dtype):
        n = caffe.NetSpec()
        n.data = L.Input(shape=dict(dim=[2, 3, 10, 10]))
        n.conv = L.Convolution(n.data, num_output=6, kernel_size=3, stride=2, pad=1,
                               weight_filler=dict(type="gaussian", std=0.3),
                               bias_filler=dict(type="gaussian", std=0.3),
                               bottom_data_type=dtype, compute_data_type=dtype,
                               top_data_type=dtype)
        n.relu = L.ReLU(n.conv, bottom_data_type=dtype, compute_data_type=dtype,
                        top_data_type=dtype)
        n.pool = L.Pooling(n.relu, pool=caffe.params.Pooling.MAX, kernel_size=2, stride=2,
                           bottom_data_type=dtype, compute_data_type=dtype, top_data_type=dtype)
        n.out = L.Quantizer(n.pool, bottom_data_type=dtype, compute_data_type=dtype,
                            top_data_type=DT.CAFFE_FLOAT)
        return n.to_proto()
    x = np.random.default_rng(6).uniform(-1, 1, (2, 3, 10, 10)).astype(np.float32)
    fp32, int8 = _calibrated_int8(tmp_path, make, {"data": x}, 6)
    model, _ = _int8_agreement(int8, {"data": x}, "conv", tmp_path)
    assert "QLinearConv" in [node.op_type for node in model.graph.node]
    # The whole int8 net (ReLU and pooling as dequantize → float op → quantize) stays within
    # a step or two of the output's scale.
    theirs = _run_onnx(model, {"data": x}, ["out"])["out"]
    ours = int8.forward(data=x)["out"]
    step = float(np.ptp(fp32.forward(data=x)["out"])) / 255
    assert np.abs(theirs - ours).max() <= 2 * step + 1e-6


def test_quantizer_layers_and_half(tmp_path):
    def make(dtype):
        n = caffe.NetSpec()
        n.data = L.Input(shape=dict(dim=[4, 16]))
        n.ip = L.InnerProduct(n.data, num_output=8, weight_filler=dict(type="xavier"),
                              bottom_data_type=dtype, compute_data_type=dtype, top_data_type=dtype)
        n.out = L.Quantizer(n.ip, bottom_data_type=dtype, compute_data_type=dtype,
                            top_data_type=DT.CAFFE_FLOAT)
        return n.to_proto()
    x = np.random.default_rng(7).uniform(-1, 1, (4, 16)).astype(np.float32)
    fp32 = caffe.Net(make(DT.CAFFE_FLOAT), caffe.TEST)
    fp32.quant_mode = caffe.quantizer_mode.CAFFE_QUANT_OBSERVE
    fp32.forward(data=x)
    fp32.save(tmp_path / "w.caffemodel")
    for dtype, storage, tolerance in [(DT.CAFFE_HALF, np.float16, 2e-3),
                                      (DT.CAFFE_INT16_QUANTIZED, np.uint16, 1e-3)]:
        net = caffe.Net(make(dtype), caffe.TEST, weights=str(tmp_path / "w.caffemodel"))
        ours = net.forward(data=x)["out"].copy()
        model = mponnx.export(net, outputs=["ip", "out"])
        theirs = _run_onnx(model, {"data": x})
        assert theirs["ip"].dtype == storage
        scale = np.abs(ours).max()
        assert np.abs(theirs["out"] - ours).max() <= tolerance * scale, caffe.data_type.Name(dtype)


def test_unsupported_layer_is_named():
    n = caffe.NetSpec()
    n.noise = L.DummyData(shape=dict(dim=[1, 2, 4, 4]))
    n.relu = L.ReLU(n.noise)
    net = caffe.Net(n.to_proto(), caffe.TEST)
    with pytest.raises(mponnx.ExportError, match="'noise' \\(DummyData\\)"):
        mponnx.export(net)
    with pytest.raises(mponnx.ExportError, match="nothing"):
        n = caffe.NetSpec()
        n.data = L.Input(shape=dict(dim=[1, 2]))
        n.relu = L.ReLU(n.data)
        mponnx.export(caffe.Net(n.to_proto(), caffe.TEST), outputs=["nothing"])

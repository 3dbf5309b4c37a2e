"""test_net_spec.py — NetSpec / layers / params produce the NetParameter fields pycaffe would."""

import pytest

import mpcaffe as caffe
from mpcaffe import layers as L, params as P


def test_enums_match_caffe_proto():
    assert caffe.data_type.CAFFE_FLOAT == caffe.caffe_pb2.CAFFE_FLOAT == 0
    assert caffe.data_type.CAFFE_HALF == caffe.caffe_pb2.CAFFE_HALF
    assert caffe.data_type.CAFFE_INT8_QUANTIZED == caffe.caffe_pb2.CAFFE_INT8_QUANTIZED
    assert caffe.data_type.CAFFE_INT16_QUANTIZED == caffe.caffe_pb2.CAFFE_INT16_QUANTIZED
    modes = caffe.quantizer_mode
    assert (modes.CAFFE_QUANT_PASSIVE, modes.CAFFE_QUANT_OBSERVE, modes.CAFFE_QUANT_PSEUDO) == (0, 1, 2)
    assert (caffe.TRAIN, caffe.TEST) == (0, 1)
    assert P.Pooling.MAX == caffe.caffe_pb2.PoolingParameter.MAX
    assert P.Pooling.AVE == caffe.caffe_pb2.PoolingParameter.AVE


def _paper_celsius(dtype):
    """Listing 2.1 of the paper, as written there."""
    n = caffe.NetSpec()
    n.celsius = L.Input(input_param=dict(shape=dict(dim=[1, 1, 1, 1])), ntop=1)
    n.farenheit = L.Input(input_param=dict(shape=dict(dim=[1, 1, 1, 1])), ntop=1,
                          include=dict(phase=0))
    n.neuron = L.InnerProduct(n.celsius, num_output=1,
                              weight_filler=dict(type="constant"),
                              bias_filler=dict(type="constant"),
                              bottom_data_type=dtype, compute_data_type=dtype,
                              top_data_type=dtype)
    n.output = L.Quantizer(n.neuron, bottom_data_type=dtype, compute_data_type=dtype,
                           top_data_type=caffe.data_type.CAFFE_FLOAT)
    n.euclidean = L.EuclideanLoss(n.output, n.farenheit, include=dict(phase=0))
    proto = n.to_proto()
    proto.name = "net"
    return proto


def test_paper_listing_equals_shared_prototxt(paper_models):
    from google.protobuf import text_format
    for dtype, suffix in [(caffe.data_type.CAFFE_FLOAT, "float"),
                          (caffe.data_type.CAFFE_HALF, "half"),
                          (caffe.data_type.CAFFE_INT16_QUANTIZED, "int16"),
                          (caffe.data_type.CAFFE_INT8_QUANTIZED, "int8")]:
        expected = caffe.NetParameter()
        text_format.Parse((paper_models / "celsius_farenheit" / f"net_{suffix}.prototxt").read_text(),
                          expected)
        assert _paper_celsius(dtype) == expected, suffix


def test_layer_fields_param_routing_and_names():
    n = caffe.NetSpec()
    n.data = L.Input(shape=dict(dim=[2, 3, 8, 8]))
    n.conv = L.Convolution(n.data, num_output=4, kernel_size=3, pad=1,
                           param=[dict(lr_mult=1), dict(lr_mult=2)],
                           weight_filler=dict(type="xavier"), engine="LIBDNN")
    n.relu = L.ReLU(n.conv, in_place=True)
    n.pool = L.Pooling(n.relu, pool=P.Pooling.MAX, kernel_size=2, stride=2)
    n.a, n.b = L.Slice(n.pool, ntop=2, slice_point=[2])
    n.loss = L.EuclideanLoss(n.a, n.b, loss_weight=0.5, include=dict(phase="TRAIN"))
    net = n.to_proto()
    layers = {layer.name: layer for layer in net.layer}
    assert [layer.name for layer in net.layer] == ["data", "conv", "relu", "pool", "a", "loss"]
    assert list(layers["data"].input_param.shape[0].dim) == [2, 3, 8, 8]
    conv = layers["conv"]
    assert conv.convolution_param.num_output == 4
    assert list(conv.convolution_param.kernel_size) == [3]
    assert conv.convolution_param.engine == caffe.caffe_pb2.ConvolutionParameter.LIBDNN
    assert [p.lr_mult for p in conv.param] == [1, 2]
    assert list(layers["relu"].bottom) == ["conv"] and list(layers["relu"].top) == ["conv"]
    assert list(layers["pool"].bottom) == ["conv"]
    assert list(layers["a"].top) == ["a", "b"]
    assert list(layers["loss"].loss_weight) == [0.5]
    assert layers["loss"].include[0].phase == caffe.TRAIN
    assert 'pool: MAX' in str(net)


def test_types_sharing_convolution_param():
    """Deconvolution and Im2col take ConvolutionParameter, as in Caffe."""
    n = caffe.NetSpec()
    n.data = L.Input(shape=dict(dim=[1, 2, 5, 5]))
    n.up = L.Deconvolution(n.data, num_output=3, kernel_size=4, stride=2)
    n.cols = L.Im2col(n.data, kernel_size=3, pad=1)
    layers = {layer.name: layer for layer in n.to_proto().layer}
    assert layers["up"].convolution_param.num_output == 3
    assert list(layers["cols"].convolution_param.kernel_size) == [3]
    assert list(layers["cols"].convolution_param.pad) == [1]
    net = caffe.Net(n.to_proto(), caffe.TEST)
    assert net.blobs["up"].data.shape == (1, 3, 12, 12)
    assert net.blobs["cols"].data.shape == (1, 18, 5, 5)


def test_unnamed_tops_get_automatic_names():
    data = L.Input(shape=dict(dim=[1, 4]))
    ip = L.InnerProduct(data, num_output=2)
    net = caffe.to_proto(L.Softmax(ip))
    assert [layer.type for layer in net.layer] == ["Input", "InnerProduct", "Softmax"]
    assert len({layer.name for layer in net.layer}) == 3
    assert net.layer[1].bottom[0] == net.layer[0].top[0]


def test_moe_param_takes_nested_netspecs():
    expert = caffe.NetSpec()
    expert.x = L.Input(shape=dict(dim=[1, 4]))
    expert.y = L.InnerProduct(expert.x, num_output=3)
    n = caffe.NetSpec()
    n.data = L.Input(shape=dict(dim=[1, 4]))
    n.moe = L.MOE(n.data, moe_param=dict(gating_net=expert, expert_net=[expert, expert.to_proto()],
                                         select_experts=1))
    moe = n.to_proto().layer[1].moe_param
    assert len(moe.expert_net) == 2 and moe.expert_net[0] == moe.expert_net[1] == moe.gating_net
    assert moe.gating_net.layer[1].inner_product_param.num_output == 3


def test_mistakes_are_reported_with_the_layer_and_field():
    n = caffe.NetSpec()
    n.data = L.Input(shape=dict(dim=[1, 4]))
    n.ip = L.InnerProduct(n.data, num_outputs=2)
    with pytest.raises(AttributeError, match="ip.*num_outputs"):
        n.to_proto()
    n = caffe.NetSpec()
    n.data = L.Input(shape=dict(dim=[1, 4]))
    n.pool = L.Pooling(n.data, pool="MAXIMUM")
    with pytest.raises(ValueError, match="MAXIMUM"):
        n.to_proto()
    with pytest.raises(TypeError):
        L.ReLU("data")
    with pytest.raises(TypeError):
        n.x = 3

"""onnx.py — mpcaffe.onnx.export(net, path): a built mpcaffe Net as an ONNX model (opset 21).

fp32 layers become the matching ONNX operators (Conv and ConvTranspose for Convolution and
Deconvolution over any number of spatial axes, Gemm, MaxPool, AveragePool, LRN, Relu,
LeakyRelu, Sigmoid, Tanh, Abs, Softplus (BNLL), Clip, Elu, PRelu, Exp / Log / Pow with their
scale and shift, x·Sigmoid(βx) for Swish, Greater+Cast for Threshold, Add for Bias, Split for
Slice, Slice for Crop, Tile, ReduceSum / ReduceL1 / ReduceSumSquare / ReduceMean (times coeff)
for Reduction, TopK (+ Cast, Concat) for ArgMax, ReduceMean / Sub / Sqrt / Div for MVN, Gather
(+ Add) for Embed and BatchReindex (indices rounded and cast to int64; Filter, whose row count
follows its selector, is refused), Softmax, Concat, Sum/Mul/Max for Eltwise, BatchNormalization,
Mul+Add for Scale, Reshape for Flatten/Reshape, LSTM / RNN for BVLC's LSTM / RNN and element-wise
operators for LSTMUnit (_onnx_recurrent.py: gate order, static input, and the cont input ONNX
cannot read); Dropout and Split are dropped). Blobs keep their storage
type in the graph: int8q tensors are uint8, int16q uint16, fp16 float16. Quantized layers use the
net's own quantization parameters (the ones its kernels use): int8 Convolution becomes
QLinearConv, int8 InnerProduct QLinearMatMul (QLinearConv over a 1x1 view when it has a bias,
so the bias is added in the int32 accumulator as mpcaffe does), Quantizer layers become
QuantizeLinear / DequantizeLinear / Cast; every other reduced-precision layer is exported as
"decode the bottoms to float, the float operator, encode the tops" with DequantizeLinear /
QuantizeLinear (or Cast for fp16) around it. Loss and Accuracy layers (training outputs) are
left out. Shapes are the net's current static shapes (batch included).

    import mpcaffe, mpcaffe.onnx
    net = mpcaffe.Net("lenet.prototxt", mpcaffe.TEST, weights="lenet.caffemodel")
    mpcaffe.onnx.export(net, "lenet.onnx")

Needs the `onnx` package (pip install onnx); onnxruntime runs the result. For results that
follow mpcaffe's, run quantized exports with onnxruntime's graph optimizations off
(SessionOptions.graph_optimization_level = ORT_DISABLE_ALL): its QDQ fusion turns the
"DequantizeLinear → float Conv/Gemm → QuantizeLinear" of int16 layers into its own quantized
kernels and so changes their values (measured: 150 int16 steps on LeNet's conv1).
"""

import numpy as np

from . import caffe_pb2
from ._onnx_recurrent import export_recurrent

try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as _error:  # pragma: no cover - depends on the environment
    raise ImportError("mpcaffe.onnx needs the 'onnx' package: pip install onnx") from _error

OPSET = 21

_ELEM_TYPE = {
    caffe_pb2.CAFFE_FLOAT: TensorProto.FLOAT,
    caffe_pb2.CAFFE_HALF: TensorProto.FLOAT16,
    caffe_pb2.CAFFE_INT8_QUANTIZED: TensorProto.UINT8,
    caffe_pb2.CAFFE_INT16_QUANTIZED: TensorProto.UINT16,
}
_ZERO_POINT_NUMPY = {caffe_pb2.CAFFE_INT8_QUANTIZED: np.uint8,
                     caffe_pb2.CAFFE_INT16_QUANTIZED: np.uint16}
_QUANTIZED = (caffe_pb2.CAFFE_INT8_QUANTIZED, caffe_pb2.CAFFE_INT16_QUANTIZED)
# Layers whose tops are training outputs (losses, accuracies): not exported.
_SKIPPED = {"SoftmaxWithLoss", "EuclideanLoss", "Accuracy", "SigmoidCrossEntropyLoss",
            "HingeLoss", "InfogainLoss", "ContrastiveLoss", "MultinomialLogisticLoss",
            "Silence"}
# Layers whose top is the bottom's value.
_ALIASES = {"Dropout", "Split"}


class ExportError(ValueError):
    """A layer or setting ONNX (or this exporter) cannot express; the message names the layer."""


def _spatial(param, name, default, count=2):
    """Caffe's per-dimension convolution/pooling values: <name>_h/_w (kernel_h/_w for
    kernel_size), else repeated <name>."""
    base = "kernel" if name == "kernel_size" else name
    h, w = base + "_h", base + "_w"
    fields = param.DESCRIPTOR.fields_by_name
    if h in fields and param.HasField(h):
        return [getattr(param, h), getattr(param, w)]
    value = getattr(param, name)
    if hasattr(value, "__len__"):
        values = list(value)
        if not values:
            return [default] * count
        return values * count if len(values) == 1 else values
    if param.HasField(name):
        return [value] * count
    return [default] * count


class _Builder:
    """Collects nodes and initializers, naming tensors so each is written once (SSA)."""

    def __init__(self, net):
        self.net = net
        self.nodes = []
        self.initializers = []
        self.used_names = set()
        self.reserved = set()  # caffe blob names: internal tensors never take them
        self.current = {}      # caffe blob name -> ONNX tensor holding its newest value
        self.tensor_type = {}  # ONNX tensor -> caffe DataType of its values
        self.producer = {}     # ONNX tensor -> (node, output index) that writes it
        self.writes_left = {}  # caffe blob name -> writes still to come (the last one keeps the name)

    def unique(self, base):
        name, k = base, 0
        while name in self.used_names or name in self.reserved:
            k += 1
            name = f"{base}_{k}"
        self.used_names.add(name)
        return name

    def constant(self, base, array):
        name = self.unique(base)
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(self, op, inputs, outputs=None, base=None, **attrs):
        if outputs is None:
            outputs = [self.unique(base or op)]
        node = helper.make_node(op, inputs, outputs, name=self.unique("node_" + outputs[0]), **attrs)
        self.nodes.append(node)
        for k, out in enumerate(outputs):
            self.producer[out] = (node, k)
        return outputs[0] if len(outputs) == 1 else outputs

    def rename(self, tensor, name):
        """Makes the node that produced `tensor` (an internal result) write `name` instead."""
        node, k = self.producer.pop(tensor)
        node.output[k] = name
        self.producer[name] = (node, k)
        return name

    def top_name(self, blob):
        """ONNX name for the next value of caffe blob `blob` (its last value keeps the name)."""
        self.writes_left[blob] -= 1
        if self.writes_left[blob] == 0 and blob not in self.used_names:
            self.used_names.add(blob)
            return blob
        return self.unique(f"{blob}__v")

    # --- data type conversions around float operators ---------------------------------------
    def quant_constants(self, base, q):
        scale = np.array(q["scale"] if len(q["scale"]) > 1 else q["scale"][0], np.float32)
        zp_type = _ZERO_POINT_NUMPY[q["type"]]
        zero = np.array(q["zero_point"] if len(q["zero_point"]) > 1 else q["zero_point"][0], zp_type)
        return self.constant(base + "_scale", scale), self.constant(base + "_zero_point", zero)

    def to_float(self, tensor, dtype, q, base):
        if dtype == caffe_pb2.CAFFE_FLOAT:
            return tensor
        if dtype == caffe_pb2.CAFFE_HALF:
            return self.node("Cast", [tensor], base=base + "_f32", to=TensorProto.FLOAT)
        scale, zero = self.quant_constants(base, q)
        attrs = {"axis": q["axis"]} if q["axis"] >= 0 and len(q["scale"]) > 1 else {}
        return self.node("DequantizeLinear", [tensor, scale, zero], base=base + "_f32", **attrs)

    def from_float(self, tensor, dtype, q, base, output=None):
        outputs = None if output is None else [output]
        if dtype == caffe_pb2.CAFFE_FLOAT:
            if output is None:
                return tensor
            if tensor in self.producer and tensor not in self.tensor_type:
                return self.rename(tensor, output)  # a fresh float result: no Identity needed
            return self.node("Identity", [tensor], outputs)
        if dtype == caffe_pb2.CAFFE_HALF:
            return self.node("Cast", [tensor], outputs, base=base, to=TensorProto.FLOAT16)
        scale, zero = self.quant_constants(base, q)
        return self.node("QuantizeLinear", [tensor, scale, zero], outputs, base=base)


class _LayerView:
    """What the exporter needs of layer i of the C++ net."""

    def __init__(self, net, i):
        cpp = net._net
        self.index = i
        self.param = caffe_pb2.LayerParameter()
        self.param.ParseFromString(cpp.layer_param_message(i))
        self.type = cpp.layer_type(i)
        self.name = cpp.layer_names[i]
        self.bottoms = list(cpp.layer_bottoms(i))
        self.tops = list(cpp.layer_tops(i))
        self.compute_type, self.bottom_types, self.top_types = cpp.layer_types(i)
        self._cpp = cpp

    def where(self):
        return f"layer '{self.name}' ({self.type})"

    def quant(self, side, j):
        return self._cpp.layer_quant_params(self.index, side, j)

    def side_params(self, side, j, dtype):
        return self.quant(side, j) if dtype in _QUANTIZED else None

    def param_float(self, j):
        blob = self._cpp.layer_params(self.index)[j]
        if blob.data_type == caffe_pb2.CAFFE_FLOAT:
            return blob.data  # a view: from_array copies it into the model
        return np.asarray(self._cpp.layer_param_float(self.index, j), np.float32)

    def param_raw(self, j):
        blob = self._cpp.layer_params(self.index)[j]
        return np.array(blob.data, copy=True)

    def num_params(self):
        return len(self._cpp.layer_params(self.index))


def _float_op(b, layer, inputs, shapes):
    """Emits the float ONNX operators of `layer` on float tensors `inputs`; returns the float
    results, one per top. `shapes` are the caffe top shapes."""
    t = layer.type
    name = layer.name
    where = layer.where()
    if t in ("Convolution", "Deconvolution"):
        # Any number of spatial axes (1-D, 2-D, 3-D, ...): Conv and ConvTranspose take
        # [N][C][spatial...] with one kernel/stride/pad/dilation value per spatial axis. Caffe's
        # deconvolution weights [C_in][C_out/group][k...] are ConvTranspose's layout, and its
        # output size stride·(in − 1) + dilated kernel − 2·pad is ConvTranspose's default.
        p = layer.param.convolution_param
        ndim = len(shapes[0])
        if p.axis % ndim != 1:
            raise ExportError(f"{where}: convolution_param.axis {p.axis}: ONNX convolutions take "
                              "the channels on axis 1 after one batch axis; only axis 1 is "
                              "exported")
        if ndim < 3:
            raise ExportError(f"{where}: a {ndim}-axis top has no spatial axis to convolve")
        spatial = ndim - 2
        args = [inputs[0], b.constant(name + "_W", layer.param_float(0))]
        if p.bias_term:
            args.append(b.constant(name + "_B", layer.param_float(1)))
        pads = _spatial(p, "pad", 0, spatial)
        return [b.node("Conv" if t == "Convolution" else "ConvTranspose", args, base=name,
                       kernel_shape=_spatial(p, "kernel_size", 1, spatial),
                       strides=_spatial(p, "stride", 1, spatial), pads=pads + pads,
                       dilations=_spatial(p, "dilation", 1, spatial), group=p.group)]
    if t in ("LSTM", "RNN", "LSTMUnit"):
        return export_recurrent(b, layer, inputs, shapes)
    if t == "InnerProduct":
        p = layer.param.inner_product_param
        axis = p.axis % len(layer.net_bottom_shapes[0])
        x = b.node("Flatten", [inputs[0]], base=name + "_flat", axis=axis)
        args = [x, b.constant(name + "_W", layer.param_float(0))]
        if p.bias_term:
            args.append(b.constant(name + "_B", layer.param_float(1)))
        y = b.node("Gemm", args, base=name, transB=0 if p.transpose else 1)
        if len(shapes[0]) != 2:
            y = b.node("Reshape", [y, b.constant(name + "_shape", np.array(shapes[0], np.int64))],
                       base=name + "_reshaped")
        return [y]
    if t == "Pooling":
        p = layer.param.pooling_param
        if p.pool not in (caffe_pb2.PoolingParameter.MAX, caffe_pb2.PoolingParameter.AVE):
            raise ExportError(f"{where}: only MAX and AVE pooling are exported")
        is_max = p.pool == caffe_pb2.PoolingParameter.MAX
        if p.global_pooling:
            return [b.node("GlobalMaxPool" if is_max else "GlobalAveragePool", inputs[:1], base=name)]
        pads = _spatial(p, "pad", 0)
        attrs = dict(kernel_shape=_spatial(p, "kernel_size", 1), strides=_spatial(p, "stride", 1),
                     pads=pads + pads, ceil_mode=1)
        if not is_max:
            # Caffe divides by the window clipped to the padded input: padding counts, the
            # part of a ceil-mode window beyond the padding does not.
            attrs["count_include_pad"] = 1 if any(pads) else 0
        return [b.node("MaxPool" if is_max else "AveragePool", inputs[:1], base=name, **attrs)]
    if t == "LRN":
        p = layer.param.lrn_param
        if p.norm_region != caffe_pb2.LRNParameter.ACROSS_CHANNELS:
            raise ExportError(f"{where}: only ACROSS_CHANNELS LRN has an ONNX operator")
        return [b.node("LRN", inputs[:1], base=name, size=p.local_size, alpha=p.alpha,
                       beta=p.beta, bias=p.k)]
    if t == "ReLU":
        slope = layer.param.relu_param.negative_slope
        if slope:
            return [b.node("LeakyRelu", inputs[:1], base=name, alpha=slope)]
        return [b.node("Relu", inputs[:1], base=name)]
    if t == "Slice":
        p = layer.param.slice_param
        ndim = len(shapes[0])
        axis = (p.slice_dim if p.HasField("slice_dim") else p.axis) % ndim
        sizes = np.array([shape[axis] for shape in shapes], np.int64)
        outs = [b.unique(f"{name}_{k}") for k in range(len(shapes))]
        y = b.node("Split", [inputs[0], b.constant(name + "_split", sizes)], outs, base=name, axis=axis)
        return y if isinstance(y, list) else [y]
    if t == "Crop":
        p = layer.param.crop_param
        ndim = len(shapes[0])
        axis = p.axis % ndim
        axes = list(range(axis, ndim))
        offsets = [0 if not p.offset else p.offset[0 if len(p.offset) == 1 else k - axis]
                   for k in axes]
        i64 = lambda tag, v: b.constant(f"{name}_{tag}", np.array(v, np.int64))
        return [b.node("Slice", [inputs[0], i64("starts", offsets),
                                 i64("ends", [o + shapes[0][k] for o, k in zip(offsets, axes)]),
                                 i64("axes", axes)], base=name)]
    if t == "Tile":
        p = layer.param.tile_param
        repeats = [1] * len(shapes[0])
        repeats[p.axis % len(shapes[0])] = p.tiles
        return [b.node("Tile", [inputs[0], b.constant(name + "_repeats", np.array(repeats, np.int64))],
                       base=name)]
    if t == "Reduction":
        p = layer.param.reduction_param
        ndim = len(layer.net_bottom_shapes[0])
        op = caffe_pb2.ReductionParameter
        onnx_op = {op.SUM: "ReduceSum", op.ASUM: "ReduceL1", op.SUMSQ: "ReduceSumSquare",
                   op.MEAN: "ReduceMean"}[p.operation]
        axes = b.constant(name + "_axes", np.arange(p.axis % ndim, ndim, dtype=np.int64))
        y = b.node(onnx_op, [inputs[0], axes], base=name + ("_sum" if p.coeff != 1 else ""),
                   keepdims=0)
        if p.coeff != 1:
            y = b.node("Mul", [y, b.constant(name + "_coeff", np.array(p.coeff, np.float32))],
                       base=name)
        return [y]
    if t in _UNARY:
        return [b.node(_UNARY[t], inputs[:1], base=name)]
    f32 = lambda tag, v: b.constant(f"{name}_{tag}", np.array(v, np.float32))
    if t == "ArgMax":
        p = layer.param.argmax_param
        x, axis = inputs[0], None
        if p.HasField("axis"):
            axis = p.axis % len(layer.net_bottom_shapes[0])
        else:
            x, axis = b.node("Flatten", [x], base=name + "_flat", axis=1), 1
        values, indices = b.node("TopK", [x, b.constant(name + "_k", np.array([p.top_k], np.int64))],
                                 [b.unique(name + "_values"), b.unique(name + "_indices")],
                                 axis=axis, largest=1, sorted=1)
        if p.HasField("axis") and p.out_max_val:
            return [values]
        y = b.node("Cast", [indices], base=name + "_index", to=TensorProto.FLOAT)
        if not p.HasField("axis"):
            if p.out_max_val:
                y = b.node("Concat", [y, values], base=name + "_cat", axis=1)
            y = b.node("Reshape", [y, b.constant(name + "_shape", np.array(shapes[0], np.int64))],
                       base=name)
        return [y]
    if t == "MVN":
        # BVLC divides by σ + eps (ONNX's MeanVarianceNormalization by √(σ² + ε)): primitives.
        p = layer.param.mvn_param
        ndim = len(layer.net_bottom_shapes[0])
        first = 1 if p.across_channels or ndim < 2 else 2
        if first >= ndim:
            raise ExportError(f"{where}: MVN of single values (a {ndim}-axis bottom) is not exported")
        axes = b.constant(name + "_axes", np.arange(first, ndim, dtype=np.int64))
        mean = b.node("ReduceMean", [inputs[0], axes], base=name + "_mean", keepdims=1)
        d = b.node("Sub", [inputs[0], mean], base=name + ("_centred" if p.normalize_variance else ""))
        if not p.normalize_variance:
            return [d]
        var = b.node("ReduceMean", [b.node("Mul", [d, d], base=name + "_sq"), axes],
                     base=name + "_var", keepdims=1)
        sigma = b.node("Add", [b.node("Sqrt", [var], base=name + "_sigma"), f32("eps", p.eps)],
                       base=name + "_sigma_eps")
        return [b.node("Div", [d, sigma], base=name)]
    if t == "Clip":
        p = layer.param.clip_param
        return [b.node("Clip", [inputs[0], f32("min", p.min), f32("max", p.max)], base=name)]
    if t == "ELU":
        return [b.node("Elu", inputs[:1], base=name, alpha=layer.param.elu_param.alpha)]
    if t in ("Exp", "Log", "Power"):
        return [_power_family(b, layer, inputs[0], name, f32)]
    if t == "Swish":
        beta = layer.param.swish_param.beta
        z = inputs[0] if beta == 1 else b.node("Mul", [inputs[0], f32("beta", beta)], base=name + "_bx")
        return [b.node("Mul", [inputs[0], b.node("Sigmoid", [z], base=name + "_sig")], base=name)]
    if t == "Threshold":
        above = b.node("Greater", [inputs[0], f32("threshold", layer.param.threshold_param.threshold)],
                       base=name + "_gt")
        return [b.node("Cast", [above], base=name, to=TensorProto.FLOAT)]
    if t == "PReLU":
        slope = layer.param_float(0).ravel()
        ndim = len(layer.net_bottom_shapes[0])
        if not layer.param.prelu_param.channel_shared:
            slope = slope.reshape((slope.size,) + (1,) * (ndim - 2))
        return [b.node("PRelu", [inputs[0], b.constant(name + "_slope", slope.astype(np.float32))],
                       base=name)]
    if t == "Bias":
        p = layer.param.bias_param
        ndim = len(layer.net_bottom_shapes[0])
        if len(inputs) > 1:
            shape = list(layer.net_bottom_shapes[1])
            axis = p.axis % ndim if shape else ndim
            bias = b.node("Reshape", [inputs[1], b.constant(
                name + "_bias_shape", np.array(shape + [1] * (ndim - axis - len(shape)), np.int64))],
                base=name + "_bias")
        else:
            value = layer.param_float(0)
            axis = p.axis % ndim if value.ndim else ndim
            bias = b.constant(name + "_bias", value.reshape(value.shape + (1,) * (ndim - axis - value.ndim)))
        return [b.node("Add", [inputs[0], bias], base=name)]
    if t == "Softmax":
        return [b.node("Softmax", inputs[:1], base=name, axis=layer.param.softmax_param.axis)]
    if t == "Concat":
        p = layer.param.concat_param
        axis = p.concat_dim if p.HasField("concat_dim") else p.axis
        return [b.node("Concat", inputs, base=name, axis=axis)]
    if t == "Eltwise":
        p = layer.param.eltwise_param
        op = caffe_pb2.EltwiseParameter
        if p.operation == op.PROD:
            return [b.node("Mul", inputs, base=name)] if len(inputs) == 2 else [_fold(b, "Mul", inputs, name)]
        if p.operation == op.MAX:
            return [b.node("Max", inputs, base=name)]
        terms = list(inputs)
        if p.coeff:
            terms = [x if c == 1 else b.node("Mul", [x, b.constant(f"{name}_coeff{k}",
                                                                    np.array(c, np.float32))],
                                               base=f"{name}_term{k}")
                     for k, (x, c) in enumerate(zip(inputs, p.coeff))]
        return [b.node("Sum", terms, base=name)]
    if t == "BatchNorm":
        p = layer.param.batch_norm_param
        mean, var, factor = (layer.param_float(k) for k in range(3))
        s = 0.0 if factor.ravel()[0] == 0 else 1.0 / factor.ravel()[0]
        channels = mean.size
        return [b.node("BatchNormalization",
                       [inputs[0], b.constant(name + "_gamma", np.ones(channels, np.float32)),
                        b.constant(name + "_beta", np.zeros(channels, np.float32)),
                        b.constant(name + "_mean", (mean * s).astype(np.float32)),
                        b.constant(name + "_var", (var * s).astype(np.float32))],
                       base=name, epsilon=p.eps)]
    if t == "Scale":
        p = layer.param.scale_param
        ndim = len(layer.net_bottom_shapes[0])
        axis = p.axis % ndim
        trailing = lambda arr: arr.reshape(arr.shape + (1,) * (ndim - axis - arr.ndim))
        k = 0
        if len(inputs) > 1:
            factor_shape = layer.net_bottom_shapes[1]
            factor = b.node("Reshape", [inputs[1], b.constant(
                name + "_factor_shape",
                np.array(list(factor_shape) + [1] * (ndim - axis - len(factor_shape)), np.int64))],
                base=name + "_factor")
        else:
            factor = b.constant(name + "_scale", trailing(layer.param_float(0)))
            k = 1
        y = b.node("Mul", [inputs[0], factor], base=name + ("_mul" if p.bias_term else ""))
        if p.bias_term:
            y = b.node("Add", [y, b.constant(name + "_bias", trailing(layer.param_float(k)))],
                       base=name)
        return [y]
    if t in ("Embed", "BatchReindex"):
        # Indices arrive as float tensors (decoded when quantized): rounded, then int64.
        idx = b.node("Cast", [b.node("Round", [inputs[0 if t == "Embed" else 1]],
                                     base=name + "_round")], base=name + "_index",
                     to=TensorProto.INT64)
        if t == "BatchReindex":
            return [b.node("Gather", [inputs[0], idx], base=name, axis=0)]
        p = layer.param.embed_param
        table = b.constant(name + "_weights", layer.param_float(0).reshape(
            p.input_dim, p.num_output).astype(np.float32))
        y = b.node("Gather", [table, idx], base=name + ("_gather" if p.bias_term else ""), axis=0)
        if p.bias_term:
            y = b.node("Add", [y, b.constant(name + "_bias",
                                             layer.param_float(1).astype(np.float32))], base=name)
        return [y]
    if t == "Filter":
        raise ExportError(f"{where}: its tops' row count follows the selector's values, so they "
                          "have no static shape, and the export writes static shapes (run the "
                          "net up to the Filter's bottoms and filter outside the model)")
    if t in ("Flatten", "Reshape"):
        return [b.node("Reshape", [inputs[0], b.constant(name + "_shape",
                                                        np.array(shapes[0], np.int64))], base=name)]
    raise ExportError(f"{where}: no ONNX export for layer type '{t}'")


# Caffe layers that are one ONNX operator without attributes.
_UNARY = {"AbsVal": "Abs", "BNLL": "Softplus", "Sigmoid": "Sigmoid", "TanH": "Tanh"}


def _power_family(b, layer, x, name, f32):
    """Exp: base^(shift + scale·x); Log: log_base(shift + scale·x); Power: (shift + scale·x)^power
    — an affine step (left out where it is the identity), the operator, a constant factor."""
    t = layer.type
    p = {"Exp": layer.param.exp_param, "Log": layer.param.log_param,
         "Power": layer.param.power_param}[t]
    ln_base = 1.0 if t == "Power" or p.base == -1 else float(np.log(p.base))
    scale, shift = p.scale, p.shift
    if t == "Exp":  # base^(shift + scale·x) = base^shift · e^(ln(base)·scale·x)
        scale, shift = scale * ln_base, 0.0
    y = x if scale == 1 else b.node("Mul", [x, f32("scale", scale)], base=name + "_scaled")
    if shift != 0:
        y = b.node("Add", [y, f32("shift", shift)], base=name + "_shifted")
    if t == "Power":
        return b.node("Pow", [y, f32("power", p.power)], base=name)
    # The constant factor after the operator: Exp's base^shift, Log's 1/ln(base).
    factor = float(np.exp(ln_base * p.shift)) if t == "Exp" else 1.0 / ln_base
    if factor == 1.0:
        return b.node(t, [y], base=name)
    return b.node("Mul", [b.node(t, [y], base=name + "_op"), f32("factor", factor)], base=name)


def _fold(b, op, inputs, name):
    y = inputs[0]
    for k, x in enumerate(inputs[1:]):
        y = b.node(op, [y, x], base=f"{name}_{k}")
    return y


def _quantized_conv(b, layer, x, out_name):
    """int8 Convolution as QLinearConv with the layer's parameters (bias in int32 at s_x·s_w)."""
    p = layer.param.convolution_param
    qx, qw, qy = layer.quant("bottom", 0), layer.quant("blob", 0), layer.quant("top", 0)
    name = layer.name
    w = layer.param_raw(0).astype(np.uint8)
    args = [x, *b.quant_constants(name + "_x", qx), b.constant(name + "_W", w),
            *b.quant_constants(name + "_w", qw), *b.quant_constants(name + "_y", qy)]
    if p.bias_term:
        args.append(b.constant(name + "_B", _accumulator_bias(layer, 1, qx, qw)))
    pads = _spatial(p, "pad", 0)
    y = b.node("QLinearConv", args, [out_name] if out_name else None, base=name,
               kernel_shape=_spatial(p, "kernel_size", 1), strides=_spatial(p, "stride", 1),
               pads=pads + pads, dilations=_spatial(p, "dilation", 1), group=p.group)
    return y


def _accumulator_bias(layer, j, qx, qw):
    """The bias as mpcaffe's kernels add it: round(b / (s_x·s_w[c])) in int32 (ties away)."""
    bias = layer.param_float(j).astype(np.float64)
    unit = float(qx["scale"][0]) * np.asarray(qw["scale"], np.float64).astype(np.float32).astype(np.float64)
    r = np.trunc(bias / unit + np.copysign(0.5, bias / unit))
    return np.clip(r, -2**31, 2**31 - 1).astype(np.int32)


def _quantized_inner_product(b, layer, x, out_name, bottom_shape, top_shape):
    """int8 InnerProduct: QLinearMatMul without bias, QLinearConv on a 1x1 view with bias."""
    p = layer.param.inner_product_param
    qx, qw, qy = layer.quant("bottom", 0), layer.quant("blob", 0), layer.quant("top", 0)
    name = layer.name
    axis = p.axis % len(bottom_shape)
    rows = int(np.prod(bottom_shape[:axis], dtype=np.int64))
    k = int(np.prod(bottom_shape[axis:], dtype=np.int64))
    w = layer.param_raw(0).astype(np.uint8)  # [N, K] (or [K, N] with transpose)
    w_nk = w.T if p.transpose else w
    outputs = [out_name] if out_name else None
    if not p.bias_term and len(qw["scale"]) == 1:
        x2 = b.node("Reshape", [x, b.constant(name + "_in_shape", np.array([rows, k], np.int64))],
                    base=name + "_flat")
        y = b.node("QLinearMatMul", [x2, *b.quant_constants(name + "_x", qx),
                                     b.constant(name + "_W", np.ascontiguousarray(w_nk.T)),
                                     *b.quant_constants(name + "_w", qw),
                                     *b.quant_constants(name + "_y", qy)],
                   None if len(top_shape) != 2 else outputs, base=name)
    else:
        x4 = b.node("Reshape", [x, b.constant(name + "_in_shape",
                                              np.array([rows, k, 1, 1], np.int64))],
                    base=name + "_as_conv_input")
        args = [x4, *b.quant_constants(name + "_x", qx),
                b.constant(name + "_W", np.ascontiguousarray(w_nk).reshape(w_nk.shape[0], k, 1, 1)),
                *b.quant_constants(name + "_w", qw), *b.quant_constants(name + "_y", qy)]
        if p.bias_term:
            args.append(b.constant(name + "_B", _accumulator_bias(layer, 1, qx, qw)))
        y = b.node("QLinearConv", args, base=name + "_as_conv", kernel_shape=[1, 1])
        return b.node("Reshape", [y, b.constant(name + "_out_shape",
                                                np.array(list(top_shape), np.int64))],
                      outputs, base=name)
    if len(top_shape) != 2:
        y = b.node("Reshape", [y, b.constant(name + "_out_shape", np.array(top_shape, np.int64))],
                   outputs, base=name)
    return y


def export(net, path=None, *, outputs=None, check=True, producer="mpcaffe"):
    """Writes `net` (an mpcaffe.Net, with its current weights and quantization parameters) as
    an ONNX model to `path` (when given) and returns the onnx.ModelProto. `outputs` names the
    blobs that become graph outputs (default: the net's outputs without loss / accuracy tops);
    an intermediate blob is given as its last value. Raises ExportError naming the layer for a
    layer or setting that has no ONNX form. `check` runs onnx.checker on the result (it
    serializes the model once more: a second or two for AlexNet's 240 MB)."""
    cpp = net._net
    b = _Builder(net)
    layers = [_LayerView(net, i) for i in range(len(cpp.layer_names))]
    blob_shapes = {name: tuple(net.blobs[name].shape) for name in net.blobs}
    for layer in layers:
        layer.net_bottom_shapes = [blob_shapes[n] for n in layer.bottoms]
    exported = [l for l in layers if l.type not in _SKIPPED and l.type != "Input"]
    for layer in exported:
        b.reserved.update(layer.tops)
        if layer.type in _ALIASES:
            continue
        for top in layer.tops:
            b.writes_left[top] = b.writes_left.get(top, 0) + 1

    graph_inputs = []
    for layer in layers:
        if layer.type != "Input":
            continue
        for top, dtype in zip(layer.tops, layer.top_types):
            b.used_names.add(top)
            b.current[top] = top
            b.tensor_type[top] = dtype
            graph_inputs.append(helper.make_tensor_value_info(top, _ELEM_TYPE[dtype],
                                                              list(blob_shapes[top])))
    consumed = set()
    for layer in exported:
        inputs = []
        for blob in layer.bottoms:
            if blob not in b.current:
                raise ExportError(f"{layer.where()}: bottom '{blob}' comes from a layer that is "
                                  "not exported (a data or loss layer); give the net Input layers")
            inputs.append(b.current[blob])
            consumed.add(b.current[blob])
        if layer.type in _ALIASES:
            for top in layer.tops:
                b.current[top] = inputs[0]
            continue
        top_shapes = [blob_shapes[t] for t in layer.tops]
        out_names = [b.top_name(t) for t in layer.tops]
        ct = layer.compute_type
        if layer.type == "Quantizer":
            q_in = layer.side_params("bottom", 0, layer.bottom_types[0])
            q_out = layer.side_params("top", 0, layer.top_types[0])
            f = b.to_float(inputs[0], layer.bottom_types[0], q_in, layer.name + "_in")
            b.from_float(f, layer.top_types[0], q_out, layer.name, output=out_names[0])
        elif ct == caffe_pb2.CAFFE_INT8_QUANTIZED and layer.type == "Convolution" and \
                len(top_shapes[0]) == 4:
            _quantized_conv(b, layer, inputs[0], out_names[0])
        elif ct == caffe_pb2.CAFFE_INT8_QUANTIZED and layer.type == "InnerProduct":
            _quantized_inner_product(b, layer, inputs[0], out_names[0],
                                     layer.net_bottom_shapes[0], top_shapes[0])
        else:
            floats = [b.to_float(x, dt, layer.side_params("bottom", j, dt),
                                 f"{layer.name}_bottom{j}")
                      for j, (x, dt) in enumerate(zip(inputs, layer.bottom_types))]
            results = _float_op(b, layer, floats, top_shapes)
            for j, (y, dt) in enumerate(zip(results, layer.top_types)):
                b.from_float(y, dt, layer.side_params("top", j, dt), f"{layer.name}_top{j}",
                             output=out_names[j])
        for top, out, dt in zip(layer.tops, out_names, layer.top_types):
            b.current[top] = out
            b.tensor_type[out] = dt

    graph_outputs = []
    for name in outputs if outputs is not None else net.outputs:
        if name not in b.current or name in (i.name for i in graph_inputs):
            if outputs is not None:
                raise ExportError(f"export: '{name}' is not a blob computed by an exported layer")
            continue  # a loss / accuracy output, or an input nothing consumes
        tensor = b.current[name]
        if tensor != name:  # an aliased output (Dropout / Split top): give it its own name
            b.node("Identity", [tensor], [name])
            b.used_names.add(name)
        graph_outputs.append(helper.make_tensor_value_info(
            name, _ELEM_TYPE[b.tensor_type[tensor]], list(blob_shapes[name])))
    if not graph_outputs:
        raise ExportError(f"net '{net.name}': no exportable output (only loss or accuracy tops)")
    graph_inputs = [i for i in graph_inputs if i.name in consumed]
    graph = helper.make_graph(b.nodes, net.name or "mpcaffe_net", graph_inputs, graph_outputs,
                              initializer=b.initializers)
    model = helper.make_model(graph, producer_name=producer,
                              opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = min(model.ir_version, 10)  # what current onnxruntime releases accept
    if check:
        onnx.checker.check_model(model)
    if path is not None:
        onnx.save(model, str(path))
    return model


__all__ = ["export", "ExportError", "OPSET"]

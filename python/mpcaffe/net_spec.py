"""net_spec.py — NetSpec, `layers` and `params`: networks written as Python expressions and turned
into caffe_pb2.NetParameter messages (the pycaffe way of defining a net).

    n = NetSpec()
    n.data = layers.Input(input_param=dict(shape=dict(dim=[1, 1, 1, 1])))
    n.ip = layers.InnerProduct(n.data, num_output=1, compute_data_type=data_type.CAFFE_HALF)
    print(n.to_proto())

A keyword argument that names a LayerParameter field (``include``, ``loss_weight``,
``bottom_data_type``, ``input_param``, ``moe_param``, ...) sets that field; any other keyword
goes to the layer's own ``<type>_param`` message (``num_output`` of InnerProduct lands in
``inner_product_param``). ``ntop`` sets the number of tops, ``in_place=True`` writes the top
over the first bottom. Dicts become sub-messages, lists repeated fields, NetSpec objects and
protobuf messages are copied, and enum fields accept the enum's name as a string.
"""

from collections import OrderedDict

from google.protobuf import descriptor as _descriptor
from google.protobuf.message import Message as _Message

from . import caffe_pb2

_LAYER_FIELDS = caffe_pb2.LayerParameter.DESCRIPTOR.fields_by_name


def _param_field_by_type():
    """Layer type -> LayerParameter field holding its parameters ('Pooling' -> 'pooling_param')."""
    table = {}
    for field in caffe_pb2.LayerParameter.DESCRIPTOR.fields:
        if field.name.endswith("_param") and field.message_type is not None:
            message = field.message_type.name
            if message.endswith("Parameter"):
                table[message[: -len("Parameter")]] = field.name
    # Types sharing another type's parameter message, as in Caffe.
    table.setdefault("Deconvolution", "convolution_param")
    table.setdefault("Im2col", "convolution_param")
    table.setdefault("RNN", "recurrent_param")
    table.setdefault("LSTM", "recurrent_param")
    return table


_PARAM_FIELD = _param_field_by_type()


def _is_repeated(field):
    if hasattr(field, "is_repeated"):  # protobuf >= 5.29 (label was removed later)
        return field.is_repeated
    return field.label == _descriptor.FieldDescriptor.LABEL_REPEATED


def _scalar(field, value, where):
    """Converts `value` for a scalar field: enum names to numbers, everything else unchanged."""
    if field.enum_type is not None and isinstance(value, str):
        try:
            return field.enum_type.values_by_name[value].number
        except KeyError:
            names = ", ".join(field.enum_type.values_by_name)
            raise ValueError(f"{where}: '{value}' is not a value of {field.enum_type.name} "
                             f"({names})") from None
    return value


def _fill_message(message, value, where):
    """Writes `value` (dict, protobuf message or NetSpec) into the sub-message `message`."""
    if isinstance(value, NetSpec):
        value = value.to_proto()
    if isinstance(value, _Message):
        message.CopyFrom(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            _assign(message, key, item, f"{where}.{key}")
    else:
        raise TypeError(f"{where}: expected a dict or a {message.DESCRIPTOR.name}, "
                        f"got {type(value).__name__}")


def _assign(message, name, value, where):
    """Sets field `name` of `message` from a Python value (recursing into dicts and lists)."""
    field = message.DESCRIPTOR.fields_by_name.get(name)
    if field is None:
        raise AttributeError(f"{where}: {message.DESCRIPTOR.name} has no field '{name}'")
    if _is_repeated(field):
        items = value if isinstance(value, (list, tuple)) else [value]
        container = getattr(message, name)
        for item in items:
            if field.message_type is not None:
                _fill_message(container.add(), item, where)
            else:
                container.append(_scalar(field, item, where))
    elif field.message_type is not None:
        _fill_message(getattr(message, name), value, where)
    else:
        setattr(message, name, _scalar(field, value, where))


class Top:
    """One output of a layer function; NetSpec attributes hold these."""

    def __init__(self, fn, n):
        self.fn = fn
        self.n = n

    def to_proto(self):
        """A NetParameter with every layer this top depends on."""
        return to_proto(self)


class Function:
    """A layer call: type, bottoms, keyword parameters and its tops."""

    def __init__(self, type_name, inputs, params):
        self.type_name = type_name
        for i, bottom in enumerate(inputs):
            if not isinstance(bottom, Top):  # pycaffe's message, which scripts match on
                raise TypeError(f"{type_name} input {i} is not a Top (type is {type(bottom)})")
        self.inputs = list(inputs)
        self.params = dict(params)
        self.ntop = self.params.pop("ntop", 1)
        self.in_place = self.params.pop("in_place", False)
        if self.in_place and not self.inputs:
            raise ValueError(f"layers.{type_name}: in_place=True needs a bottom")
        self.tops = tuple(Top(self, i) for i in range(self.ntop))

    def _top_name(self, top, names, autonames):
        if top not in names:
            autonames[top.fn.type_name] += 1
            names[top] = f"{top.fn.type_name}{autonames[top.fn.type_name]}"
        return names[top]

    def to_layer(self, names, autonames):
        layer = caffe_pb2.LayerParameter()
        layer.type = self.type_name
        layer.bottom.extend(self._top_name(b, names, autonames) for b in self.inputs)
        if self.in_place:
            layer.top.extend(layer.bottom[: max(1, self.ntop)])
            for top in self.tops:
                names[top] = layer.top[0]
        else:
            layer.top.extend(self._top_name(t, names, autonames) for t in self.tops)
        layer.name = layer.top[0] if (self.tops and not self.in_place) else (
            self._layer_name(names, autonames))
        where = f"layer '{layer.name}' ({self.type_name})"
        param_field = _PARAM_FIELD.get(self.type_name)
        for key, value in self.params.items():
            if key in _LAYER_FIELDS:
                _assign(layer, key, value, f"{where}: {key}")
            elif param_field is not None:
                _assign(getattr(layer, param_field), key, value, f"{where}: {param_field}.{key}")
            else:
                raise AttributeError(f"{where}: '{key}' is no LayerParameter field and the type "
                                     "has no parameter message")
        return layer

    def _layer_name(self, names, autonames):
        if self in names:
            return names[self]
        if self.tops and self.tops[0] in names and not self.in_place:
            names[self] = names[self.tops[0]]
        else:
            autonames[self.type_name] += 1
            names[self] = f"{self.type_name}{autonames[self.type_name]}"
        return names[self]


class _AutoCount(dict):
    def __missing__(self, key):
        return 0


def to_proto(*tops, names=None):
    """NetParameter with the layers producing `tops` and everything they depend on, in order."""
    names = dict(names or {})
    autonames = _AutoCount()
    layers = OrderedDict()

    def visit(fn):
        if fn in layers:
            return
        for bottom in fn.inputs:
            visit(bottom.fn)
        layers[fn] = None

    for top in tops:  # a Top, or the Function of a layer without tops (ntop=0)
        visit(top if isinstance(top, Function) else top.fn)
    # In-place layers are named after the attribute they were assigned to when there is one.
    for fn in layers:
        if fn.in_place and fn.tops and fn.tops[0] in names:
            names[fn] = names[fn.tops[0]]
    net = caffe_pb2.NetParameter()
    for fn in layers:
        layer = fn.to_layer(names, autonames)
        net.layer.append(layer)
    return net


class NetSpec:
    """Tops assigned as attributes (n.conv1 = layers.Convolution(...)) become named blobs and
    layers; a layer without tops (layers.Silence(n.x, ntop=0)) assigned so is named after the
    attribute. to_proto() returns the NetParameter."""

    def __init__(self):
        super().__setattr__("tops", OrderedDict())

    def __setattr__(self, name, value):
        if not isinstance(value, (Top, Function)):
            raise TypeError(f"NetSpec.{name}: assign a layer output (layers.X(...)), "
                            f"not a {type(value).__name__}")
        self.tops[name] = value

    def __getattr__(self, name):
        try:
            return self.tops[name]
        except KeyError:
            raise AttributeError(f"NetSpec has no top '{name}'") from None

    def __setitem__(self, name, value):
        self.__setattr__(name, value)

    def __getitem__(self, name):
        return self.__getattr__(name)

    def __delattr__(self, name):
        del self.tops[name]

    def to_proto(self):
        names = {top: name for name, top in self.tops.items()}
        return to_proto(*self.tops.values(), names=names)


class _Layers:
    """layers.Type(*bottoms, **params) -> Top (or a tuple of ntop Tops)."""

    def __getattr__(self, type_name):
        if type_name.startswith("__"):
            raise AttributeError(type_name)

        def layer_fn(*bottoms, **params):
            fn = Function(type_name, bottoms, params)
            if fn.ntop == 0:
                return fn
            return fn.tops[0] if fn.ntop == 1 else fn.tops
        layer_fn.__name__ = type_name
        return layer_fn


class _Params:
    """params.Pooling.MAX -> the enum value MAX of PoolingParameter (and so on)."""

    def __getattr__(self, type_name):
        if type_name.startswith("__"):
            raise AttributeError(type_name)
        message = getattr(caffe_pb2, type_name + "Parameter", None)
        if message is None:
            raise AttributeError(f"params.{type_name}: caffe.proto has no {type_name}Parameter")
        return _EnumValues(message)


class _EnumValues:
    def __init__(self, message):
        self._message = message

    def __getattr__(self, name):
        for enum in self._message.DESCRIPTOR.enum_types:
            if name in enum.values_by_name:
                return enum.values_by_name[name].number
        raise AttributeError(f"{self._message.DESCRIPTOR.name} has no enum value '{name}'")


layers = _Layers()
params = _Params()

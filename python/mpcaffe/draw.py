"""draw.py — pycaffe's caffe.draw: a NetParameter as a Graphviz graph through pydot (layers as
boxes labelled with name, type and main parameters; blobs as octagons; an edge from each bottom
blob to its layer and from the layer to each top), rendered by Graphviz's `dot`.

    caffe.draw.draw_net_to_file(net_param, "net.png", rankdir="LR", phase=caffe.TEST)
"""

from . import caffe_pb2

# Fill colours by layer type; other layers get _DEFAULT_COLOR, in-place layers _INPLACE_COLOR.
_TYPE_COLORS = {
    "Convolution": "#E8743B", "Deconvolution": "#E8743B", "Pooling": "#F2C14E",
    "InnerProduct": "#9B5DE5", "Embed": "#9B5DE5", "Python": "#2EC4B6", "Quantizer": "#B8B8B8",
    "MOE": "#F15BB5", "RNN": "#00BBF9", "LSTM": "#00BBF9", "LSTMUnit": "#00BBF9",
}
_TYPE_COLORS.update({t: "#5BC0EB" for t in ("Data", "Input", "ImageData", "MemoryData",
                                             "WindowData", "HDF5Data", "DummyData")})
_DEFAULT_COLOR = "#7AA6E8"
_INPLACE_COLOR = "#9BD17A"
_BLOB_COLOR = "#E6E6E6"


def _pydot():
    try:
        import pydot
    except ImportError:
        raise ImportError("caffe.draw needs pydot and Graphviz (scripts/install-deps.sh installs "
                          "them; or pip install pydot and apt-get install graphviz)") from None
    return pydot


def _quoted(text):
    """A DOT string literal (quotes escaped)."""
    return '"' + str(text).replace('"', '\\"') + '"'


def _in_phase(layer, phase):
    """BVLC's include/exclude rules, by phase only (what drawing a phase means)."""
    if phase is None:
        return True
    if layer.include:
        return any(not rule.HasField("phase") or rule.phase == phase for rule in layer.include)
    return not any(rule.HasField("phase") and rule.phase == phase for rule in layer.exclude)


def _repeated_or_single(message, name):
    values = list(getattr(message, name))
    return values[0] if len(values) == 1 else values


def get_layer_label(layer, rankdir):
    """The label of a layer's box: name, type, and kernel/stride/pad of convolutions and
    pooling (one line each when the graph runs top to bottom, else separated by spaces)."""
    sep = "\\n" if rankdir in ("TB", "BT") else " "
    lines = [layer.name, f"({layer.type})"]
    if layer.type in ("Convolution", "Deconvolution"):
        p = layer.convolution_param
        kernel = _repeated_or_single(p, "kernel_size") if len(p.kernel_size) else (
            [p.kernel_h, p.kernel_w])
        stride = _repeated_or_single(p, "stride") if len(p.stride) else 1
        pad = _repeated_or_single(p, "pad") if len(p.pad) else 0
        lines.append(f"kernel {kernel} stride {stride} pad {pad} out {p.num_output}")
    elif layer.type == "Pooling":
        p = layer.pooling_param
        method = caffe_pb2.PoolingParameter.PoolMethod.Name(p.pool)
        kernel = p.kernel_size if p.HasField("kernel_size") else [p.kernel_h, p.kernel_w]
        lines.append(f"{method} kernel {kernel} stride {p.stride} pad {p.pad}")
    elif layer.type == "InnerProduct":
        lines.append(f"out {layer.inner_product_param.num_output}")
    elif layer.type in ("RNN", "LSTM"):
        p = layer.recurrent_param
        lines.append(f"out {p.num_output}" + (" exposed states" if p.expose_hidden else ""))
    elif layer.type == "Embed":
        p = layer.embed_param
        lines.append(f"in {p.input_dim} out {p.num_output}")
    if layer.HasField("compute_data_type") and layer.compute_data_type != caffe_pb2.CAFFE_FLOAT:
        lines.append(caffe_pb2.DataType.Name(layer.compute_data_type))
    return sep.join(lines)


def get_pydot_graph(caffe_net, rankdir, label_edges=True, phase=None):
    """A pydot.Dot of the NetParameter `caffe_net` (layers of `phase` only when given); edges
    into and out of layers are labelled with the blob name when label_edges."""
    pydot = _pydot()
    graph = pydot.Dot(caffe_net.name or "net", graph_type="digraph", rankdir=rankdir)
    blob_ids = {}

    def blob_node(name):
        if name not in blob_ids:
            blob_ids[name] = f"blob{len(blob_ids)}"
            graph.add_node(pydot.Node(blob_ids[name], label=_quoted(name), shape="octagon",
                                      style="filled", fillcolor=_BLOB_COLOR))
        return blob_ids[name]

    for index, layer in enumerate(caffe_net.layer):
        if not _in_phase(layer, phase):
            continue
        in_place = len(layer.bottom) == 1 and list(layer.bottom) == list(layer.top)
        color = _INPLACE_COLOR if in_place else _TYPE_COLORS.get(layer.type, _DEFAULT_COLOR)
        node = f"layer{index}"
        graph.add_node(pydot.Node(node, label=_quoted(get_layer_label(layer, rankdir)),
                                  shape="box", style="filled", fillcolor=color))
        for bottom in layer.bottom:
            label = _quoted(bottom) if label_edges else '""'
            graph.add_edge(pydot.Edge(blob_node(bottom), node, label=label))
        for top in layer.top:
            label = _quoted(top) if label_edges else '""'
            graph.add_edge(pydot.Edge(node, blob_node(top), label=label))
    return graph


def draw_net(caffe_net, rankdir, ext="png", phase=None):
    """The rendered graph as bytes in format `ext` (png, pdf, svg, dot, ...); rankdir is
    Graphviz's ("LR", "TB", "BT", "RL")."""
    return get_pydot_graph(caffe_net, rankdir, phase=phase).create(format=ext)


def draw_net_to_file(caffe_net, filename, rankdir="LR", phase=None):
    """Writes the rendered graph to `filename`; the format is its extension."""
    ext = filename[filename.rfind(".") + 1:] if "." in filename else "png"
    with open(filename, "wb") as f:
        f.write(draw_net(caffe_net, rankdir, ext, phase))

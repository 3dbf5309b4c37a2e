"""coord_map.py — pycaffe's caffe.coord_map: the affine map between the spatial coordinates of
two NetSpec tops (through convolution, pooling, deconvolution, crop and shape-preserving
layers), and crop(), which aligns one top to another with a Crop layer (as FCNs do).

A map is (axis, a, b): a coordinate x of one top is a·x + b in the other, per spatial axis
from `axis` on (a and b are arrays, one value per axis; axis None: no spatial layer seen).
"""

import numpy as np

from .net_spec import layers as L

# Layers whose output coordinates are their input coordinates.
PASS_THROUGH_LAYERS = {
    "AbsVal", "BatchNorm", "Bias", "BNLL", "Dropout", "Eltwise", "ELU", "Log", "LRN", "Exp",
    "MVN", "Power", "ReLU", "PReLU", "Scale", "Sigmoid", "Split", "TanH", "Threshold",
    "Quantizer", "Noise", "Clip", "Swish",
}


class UndefinedMapException(Exception):
    """The layer's coordinate map is unknown (it does not keep a spatial layout)."""


class AxisMismatchException(Exception):
    """Two maps work on different first spatial axes."""


class CropError(ValueError, AssertionError):
    """crop() cannot align the tops (scale mismatch, negative or fractional offset); an
    AssertionError too, which is what pycaffe raises and scripts catch."""


def _message_params(fn, field):
    """The layer parameters of a NetSpec function: the `field` dict when given so, else the
    keyword arguments themselves (NetSpec accepts both)."""
    params = fn.params.get(field, fn.params)
    if not isinstance(params, dict):  # a protobuf message
        from google.protobuf.json_format import MessageToDict
        params = MessageToDict(params, preserving_proto_field_name=True)
    return params


def conv_params(fn):
    """(axis, stride, effective kernel size, pad) of a Convolution / Deconvolution / Pooling
    function, as arrays (one value per spatial axis or one for all)."""
    field = "pooling_param" if fn.type_name == "Pooling" else "convolution_param"
    params = _message_params(fn, field)
    legacy = {"pad_h", "pad_w", "kernel_h", "kernel_w", "stride_h", "stride_w"} & set(params)
    if legacy:
        raise ValueError(f"coord_map: layer {fn.type_name} uses {sorted(legacy)}; cropping "
                         "needs kernel_size / stride / pad")
    if "kernel_size" not in params:
        raise ValueError(f"coord_map: layer {fn.type_name} has no kernel_size")
    kernel = np.array(params["kernel_size"], ndmin=1)
    dilation = np.array(params.get("dilation", 1), ndmin=1)
    return (params.get("axis", 1), np.array(params.get("stride", 1), ndmin=1),
            (kernel - 1) * dilation + 1, np.array(params.get("pad", 0), ndmin=1))


def crop_params(fn):
    """(axis, offset) of a Crop function."""
    params = _message_params(fn, "crop_param")
    return params.get("axis", 2), np.array(params.get("offset", 0), ndmin=1)


def coord_map(fn):
    """The map from a layer's input coordinates to its output coordinates."""
    if fn.type_name in ("Convolution", "Pooling", "Im2col"):
        axis, stride, kernel, pad = conv_params(fn)
        return axis, 1 / stride, (pad - (kernel - 1) / 2) / stride
    if fn.type_name == "Deconvolution":
        axis, stride, kernel, pad = conv_params(fn)
        return axis, stride, (kernel - 1) / 2 - pad
    if fn.type_name in PASS_THROUGH_LAYERS:
        return None, 1, 0
    if fn.type_name == "Crop":
        axis, offset = crop_params(fn)
        return axis - 1, 1, -offset  # the map's axis counts from the first non-batch axis
    raise UndefinedMapException(fn.type_name)


def compose(base_map, next_map):
    """The map applying next_map, then base_map."""
    ax1, a1, b1 = base_map
    ax2, a2, b2 = next_map
    if ax1 is None:
        axis = ax2
    elif ax2 is None or ax1 == ax2:
        axis = ax1
    else:
        raise AxisMismatchException(f"coordinate maps on axes {ax1} and {ax2}")
    return axis, a1 * a2, a1 * b2 + b1


def inverse(coord_map):
    axis, a, b = coord_map
    return axis, 1 / a, -b / a


def _bottoms(top):
    """The tops a top's coordinates derive from (a Crop's reference input does not count)."""
    inputs = top.fn.inputs
    return inputs[:1] if top.fn.type_name == "Crop" else inputs


def _maps_to(top, stop=None):
    """Map from each ancestor's coordinates to `top`'s, walking up through layers with known
    maps; returns early with the first ancestor in `stop` when given."""
    maps = {top: (None, 1, 0)}
    pending = [top]
    while pending:
        current = pending.pop()
        if stop is not None and current in stop:
            return maps, current
        try:
            step = coord_map(current.fn)
        except UndefinedMapException:
            continue
        for bottom in _bottoms(current):
            maps[bottom] = compose(maps[current], step)
            pending.append(bottom)
    return maps, None


def coord_map_from_to(top_from, top_to):
    """The map taking coordinates of top_from to coordinates of top_to, through their nearest
    common ancestor. Raises RuntimeError when they share none through spatial layers."""
    from_maps, _ = _maps_to(top_from)
    to_maps, common = _maps_to(top_to, stop=from_maps)
    if common is None:
        raise RuntimeError("Could not compute map between tops; are they connected by spatial "
                           "layers?")
    return compose(to_maps[common], inverse(from_maps[common]))


def crop(top_from, top_to):
    """A Crop layer cropping top_from to the extent and alignment of top_to (same scale, top_to
    lying inside top_from at an integer offset)."""
    axis, a, b = coord_map_from_to(top_from, top_to)
    if not np.all(a == 1):
        raise CropError(f"crop: scale mismatch on crop (a = {a})")
    if not np.all(b <= 0):
        raise CropError(f"crop: cannot crop negative offset (b = {b})")
    if not np.all(np.round(b) == b):
        raise CropError(f"crop: cannot crop noninteger offset (b = {b})")
    return L.Crop(top_from, top_to,
                  crop_param=dict(axis=axis + 1, offset=[int(v) for v in -np.round(b)]))

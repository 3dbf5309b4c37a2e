"""io.py — pycaffe's caffe.io: BlobProto / Datum <-> NumPy conversions, image loading, resizing
and 10-crop oversampling, and the Transformer that turns H×W×K images into a net's C×H×W input
(resize, transpose, channel swap, raw scale, mean, input scale) and back.

Images are float32 NumPy arrays H×W×K with values in [0, 1] (as pycaffe's load_image gives).
Resizing is done here in NumPy (nearest or bilinear with pixel-centre alignment), so neither
scikit-image nor SciPy is needed; load_image reads files through Pillow.
"""

import numpy as np

from . import caffe_pb2

# --- BlobProto ------------------------------------------------------------------------------

_PACKED_DTYPES = {caffe_pb2.CAFFE_HALF: np.float16, caffe_pb2.CAFFE_INT16_QUANTIZED: np.uint16,
                  caffe_pb2.CAFFE_INT8_QUANTIZED: np.uint8}


def _blob_shape(blob):
    if any(blob.HasField(f) for f in ("num", "channels", "height", "width")):
        return (blob.num, blob.channels, blob.height, blob.width)  # the legacy 4-d fields
    return tuple(blob.shape.dim)


def blobproto_to_array(blob, return_diff=False):
    """The data (or diff) of a caffe_pb2.BlobProto as an array of its shape: float32/float64
    values from data/double_data, or the stored type's values (float16, uint16, uint8) from
    mpcaffe's packed_data; 4-bit weights (packed_bits 4) as their signed values (int8, -8..7)."""
    shape = _blob_shape(blob)
    if return_diff:
        if len(blob.double_diff):
            values = np.array(blob.double_diff, dtype=np.float64)
        elif blob.packed_diff:
            values = np.frombuffer(blob.packed_diff, dtype=_packed_dtype(blob)).copy()
        else:
            values = np.array(blob.diff, dtype=np.float32)
    elif len(blob.double_data):
        values = np.array(blob.double_data, dtype=np.float64)
    elif blob.packed_data and blob.packed_bits == 4:
        values = _unpack_int4(blob, shape)
    elif blob.packed_data:
        values = np.frombuffer(blob.packed_data, dtype=_packed_dtype(blob)).copy()
    else:
        values = np.array(blob.data, dtype=np.float32)
    if values.size != int(np.prod(shape, dtype=np.int64)):
        what = "diff" if return_diff else "data"
        raise ValueError(f"blobproto_to_array: the blob holds {values.size} {what} values for "
                         f"shape {shape}")
    return values.reshape(shape)


def _unpack_int4(blob, shape):
    """The signed 4-bit weights (int8 values in [-8, 7]) of a blob with packed_bits 4: each output
    channel (axis 0) in ceil(K/2) bytes, value k in byte k/2, low nibble for even k."""
    channels = shape[0] if len(shape) else 0
    k = int(np.prod(shape[1:], dtype=np.int64)) if channels else 0
    row = (k + 1) // 2
    raw = np.frombuffer(blob.packed_data, dtype=np.uint8)
    if raw.size != channels * row:
        raise ValueError(f"blobproto_to_array: {raw.size} bytes of 4-bit weights for shape {shape} "
                         f"(needs {channels} channels of {row} bytes)")
    raw = raw.reshape(channels, row)
    nibbles = np.empty((channels, 2 * row), dtype=np.int8)
    nibbles[:, 0::2] = (raw & 0x0F).astype(np.int8)
    nibbles[:, 1::2] = (raw >> 4).astype(np.int8)
    nibbles[nibbles > 7] -= 16
    return nibbles[:, :k].reshape(-1)


def _packed_dtype(blob):
    try:
        return _PACKED_DTYPES[blob.data_type]
    except KeyError:
        raise ValueError(f"blobproto_to_array: packed values of data type "
                         f"{caffe_pb2.DataType.Name(blob.data_type)} cannot be read") from None


def array_to_blobproto(arr, diff=None):
    """A caffe_pb2.BlobProto with shape = arr.shape and the values as float data (and diff)."""
    arr = np.asarray(arr)
    blob = caffe_pb2.BlobProto()
    blob.shape.dim.extend(arr.shape)
    blob.data.extend(arr.astype(np.float32).ravel().tolist())
    if diff is not None:
        diff = np.asarray(diff)
        if diff.shape != arr.shape:
            raise ValueError(f"array_to_blobproto: diff shape {diff.shape} differs from the "
                             f"data's {arr.shape}")
        blob.diff.extend(diff.astype(np.float32).ravel().tolist())
    return blob


def arraylist_to_blobprotovector_str(arraylist):
    """Serialized caffe_pb2.BlobProtoVector of the arrays."""
    vector = caffe_pb2.BlobProtoVector()
    vector.blobs.extend(array_to_blobproto(a) for a in arraylist)
    return vector.SerializeToString()


def blobprotovector_str_to_arraylist(text):
    """The arrays of a serialized caffe_pb2.BlobProtoVector."""
    vector = caffe_pb2.BlobProtoVector()
    vector.ParseFromString(text)
    return [blobproto_to_array(blob) for blob in vector.blobs]


# --- Datum ----------------------------------------------------------------------------------

def array_to_datum(arr, label=None):
    """A caffe_pb2.Datum of a C×H×W array: uint8 arrays as bytes in `data`, others as
    float_data; `label` when given."""
    arr = np.asarray(arr)
    if arr.ndim != 3:
        raise ValueError(f"array_to_datum: the array must be C×H×W (3-d), got shape {arr.shape}")
    datum = caffe_pb2.Datum()
    datum.channels, datum.height, datum.width = arr.shape
    if arr.dtype == np.uint8:
        datum.data = arr.tobytes()
    else:
        datum.float_data.extend(arr.astype(np.float32).ravel().tolist())
    if label is not None:
        datum.label = int(label)
    return datum


def datum_to_array(datum):
    """The C×H×W array of a caffe_pb2.Datum: uint8 from `data`, else float from float_data
    (the label is datum.label)."""
    shape = (datum.channels, datum.height, datum.width)
    if len(datum.data):
        return np.frombuffer(datum.data, dtype=np.uint8).reshape(shape).copy()
    return np.array(datum.float_data, dtype=float).reshape(shape)


# --- images ---------------------------------------------------------------------------------

# Luminance weights of a colour image's grey value (ITU-R BT.709, as scikit-image's rgb2gray).
_GREY_WEIGHTS = np.array([0.2125, 0.7154, 0.0721], np.float32)


def load_image(filename, color=True):
    """An image file as float32 H×W×3 (color) or H×W×1 (grey) with values in [0, 1]; a grey
    file loaded in colour is repeated over three channels, an alpha channel is dropped."""
    try:
        from PIL import Image
    except ImportError:
        raise ImportError("caffe.io.load_image needs Pillow (pip install pillow)") from None
    with Image.open(filename) as image:
        if image.mode in ("I;16", "I;16B", "I;16L", "I"):
            img = np.asarray(image, dtype=np.float32) / 65535.0
        elif image.mode == "F":
            img = np.asarray(image, dtype=np.float32)
        else:
            if image.mode not in ("L", "RGB", "RGBA"):
                image = image.convert("RGBA" if "A" in image.mode else "RGB")
            img = np.asarray(image, dtype=np.float32) / 255.0
    if img.ndim == 2:
        img = img[:, :, np.newaxis]
    if img.shape[2] == 4:
        img = img[:, :, :3]
    if color:
        return np.ascontiguousarray(np.tile(img, (1, 1, 3)) if img.shape[2] == 1 else img)
    if img.shape[2] == 3:
        img = (img @ _GREY_WEIGHTS)[:, :, np.newaxis]
    return img.astype(np.float32)


def _sample_positions(out_size, in_size):
    """Source coordinates of the output pixel centres (pixel-centre alignment)."""
    scale = in_size / out_size
    return (np.arange(out_size, dtype=np.float64) + 0.5) * scale - 0.5


def resize_image(im, new_dims, interp_order=1):
    """Resizes an H×W×K image to new_dims (height, width): interp_order 0 nearest neighbour, 1
    bilinear (pixel centres aligned, edges clamped). Returns float32."""
    im = np.asarray(im)
    if im.ndim != 3:
        raise ValueError(f"resize_image: expected an H×W×K image, got shape {im.shape}")
    height, width = (int(d) for d in new_dims)
    if height <= 0 or width <= 0:
        raise ValueError(f"resize_image: new dimensions must be positive, got {tuple(new_dims)}")
    src = im.astype(np.float32)
    ys = _sample_positions(height, im.shape[0])
    xs = _sample_positions(width, im.shape[1])
    if interp_order == 0:
        yi = np.clip(np.floor(ys + 0.5).astype(int), 0, im.shape[0] - 1)
        xi = np.clip(np.floor(xs + 0.5).astype(int), 0, im.shape[1] - 1)
        return src[yi][:, xi]
    if interp_order != 1:
        raise ValueError(f"resize_image: interp_order {interp_order} is not supported "
                         "(0 nearest, 1 bilinear)")
    ys = np.clip(ys, 0, im.shape[0] - 1)
    xs = np.clip(xs, 0, im.shape[1] - 1)
    y0 = np.floor(ys).astype(int)
    x0 = np.floor(xs).astype(int)
    y1 = np.minimum(y0 + 1, im.shape[0] - 1)
    x1 = np.minimum(x0 + 1, im.shape[1] - 1)
    wy = (ys - y0).astype(np.float32)[:, None, None]
    wx = (xs - x0).astype(np.float32)[None, :, None]
    top = src[y0][:, x0] * (1 - wx) + src[y0][:, x1] * wx
    bottom = src[y1][:, x0] * (1 - wx) + src[y1][:, x1] * wx
    return (top * (1 - wy) + bottom * wy).astype(np.float32)


def oversample(images, crop_dims):
    """Ten crops of crop_dims (height, width) per H×W×K image, as pycaffe orders them: the
    top-left, top-right, bottom-left, bottom-right and centre crops, then the same five
    mirrored left-right. Returns float32 (10·N)×h×w×K."""
    images = [np.asarray(im) for im in images]
    if not images:
        raise ValueError("oversample: no images given")
    h, w = (int(d) for d in crop_dims)
    H, W, K = images[0].shape
    if h > H or w > W:
        raise ValueError(f"oversample: crop {h}×{w} is larger than the image {H}×{W}")
    centre_y, centre_x = int(H / 2.0 - h / 2.0), int(W / 2.0 - w / 2.0)
    corners = [(0, 0), (0, W - w), (H - h, 0), (H - h, W - w), (centre_y, centre_x)]
    crops = np.empty((10 * len(images), h, w, K), dtype=np.float32)
    for n, im in enumerate(images):
        if im.shape != (H, W, K):
            raise ValueError(f"oversample: image {n} has shape {im.shape}, image 0 {(H, W, K)}")
        for c, (y, x) in enumerate(corners):
            crop = im[y:y + h, x:x + w, :]
            crops[10 * n + c] = crop
            crops[10 * n + 5 + c] = crop[:, ::-1, :]
    return crops


# --- Transformer ----------------------------------------------------------------------------

class Transformer:
    """Turns images into a net's inputs and back, per input blob name.

    Transformer({'data': net.blobs['data'].data.shape}); then set_transpose('data', (2, 0, 1)),
    set_channel_swap('data', (2, 1, 0)), set_raw_scale('data', 255), set_mean('data', mean),
    set_input_scale('data', s). preprocess applies, in this order: resize to the input's H×W,
    transpose, channel swap, raw scale, mean subtraction, input scale; deprocess undoes them in
    reverse (without the resize).
    """

    def __init__(self, inputs):
        self.inputs = dict(inputs)
        self.transpose = {}
        self.channel_swap = {}
        self.raw_scale = {}
        self.mean = {}
        self.input_scale = {}

    def _check_input(self, in_):
        if in_ not in self.inputs:
            raise ValueError(f"{in_} is not one of the net inputs: {self.inputs}")

    def preprocess(self, in_, data):
        """An image (H×W×K) as input `in_` needs it (K'×H'×W' float32)."""
        self._check_input(in_)
        x = np.asarray(data).astype(np.float32, copy=True)
        size = tuple(self.inputs[in_][2:])
        if tuple(x.shape[:2]) != size:
            x = resize_image(x, size)
        if in_ in self.transpose:
            x = x.transpose(self.transpose[in_])
        if in_ in self.channel_swap:
            x = x[list(self.channel_swap[in_]), :, :]
        if in_ in self.raw_scale:
            x *= self.raw_scale[in_]
        if in_ in self.mean:
            x -= self.mean[in_]
        if in_ in self.input_scale:
            x *= self.input_scale[in_]
        return x

    def deprocess(self, in_, data):
        """Input `in_`'s values back as an image (the inverse of preprocess, without resizing)."""
        self._check_input(in_)
        x = np.array(data, dtype=np.float32).squeeze()
        if in_ in self.input_scale:
            x /= self.input_scale[in_]
        if in_ in self.mean:
            x += self.mean[in_]
        if in_ in self.raw_scale:
            x /= self.raw_scale[in_]
        if in_ in self.channel_swap:
            x = x[np.argsort(self.channel_swap[in_]), :, :]
        if in_ in self.transpose:
            x = x.transpose(np.argsort(self.transpose[in_]))
        return x

    def set_transpose(self, in_, order):
        """Axis order taking the image to the input (e.g. (2, 0, 1): H×W×K to K×H×W)."""
        self._check_input(in_)
        if len(order) != len(self.inputs[in_]) - 1:
            raise ValueError("Transpose order needs to have the same number of dimensions as "
                             "the input.")
        self.transpose[in_] = tuple(order)

    def set_channel_swap(self, in_, order):
        """Channel order of the input (e.g. (2, 1, 0): RGB to BGR), applied after transpose."""
        self._check_input(in_)
        if len(order) != self.inputs[in_][1]:
            raise ValueError("Channel swap needs to have the same number of dimensions as the "
                             "input channels.")
        self.channel_swap[in_] = tuple(order)

    def set_raw_scale(self, in_, scale):
        """Factor taking the image's [0, 1] values to the model's range (e.g. 255)."""
        self._check_input(in_)
        self.raw_scale[in_] = scale

    def set_mean(self, in_, mean):
        """Mean to subtract: one value per channel (K,) or one per element (K×H×W or H×W)."""
        self._check_input(in_)
        mean = np.asarray(mean, dtype=np.float32)
        if mean.ndim == 1:
            if mean.shape[0] != self.inputs[in_][1]:
                raise ValueError("Mean channels incompatible with input.")
            mean = mean[:, np.newaxis, np.newaxis]
        else:
            shape = mean.shape if mean.ndim != 2 else (1,) + mean.shape
            if len(shape) != 3:
                raise ValueError("Mean shape invalid")
            if tuple(shape) != tuple(self.inputs[in_][1:]):
                raise ValueError("Mean shape incompatible with input shape.")
            mean = mean.reshape(shape)
        self.mean[in_] = mean

    def set_input_scale(self, in_, scale):
        """Factor applied after the mean is subtracted (e.g. 0.017 for a normalised model)."""
        self._check_input(in_)
        self.input_scale[in_] = scale

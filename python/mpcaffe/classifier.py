"""classifier.py — caffe.Classifier: a Net that classifies H×W×K images the way pycaffe's does
(resize to image_dims, ten crops averaged or the centre crop, the Transformer's preprocessing),
in any data type and on any device."""

import numpy as np

from . import _mpcaffe
from . import caffe_pb2
from . import io as caffe_io
from .pycaffe import Net, TEST, _model_source


def _typed_model(model_file, dtype, device):
    """The NetParameter of model_file converted to `dtype` as `mpcaffe convert` converts it for
    the device (in process)."""
    kind, value = _model_source(model_file)
    return caffe_pb2.NetParameter.FromString(
        _mpcaffe._typed_variant(value, kind == "file", str(dtype), int(device)))


def build_net(net, model_file, pretrained_file, dtype=None, device=None, level=0, stages=(),
              optimize=None):
    """Runs Net.__init__ on `net` for the TEST phase with mpcaffe's extras: dtype ("fp16",
    "int16", "int8", "int8w4": the fp32 model_file converted as `mpcaffe convert` does, so the
    weights of `mpcaffe calibrate --output` fit it; None: model_file's own types), device (an
    index or a selector as caffe.set_device takes; this net only: the device later nets are built
    on stays as it was; None: the one set_device chose, else the one `mpcaffe classify` takes for
    the net — the fastest recorded pass of it, else the profile rule for its data types) and
    optimize (Net's; None: 2 for a dtype, whose converted BatchNorm and Scale fold into the
    convolutions only there — 5x ResNet-50's int8 pass at level 1 —, else Net's default)."""
    if optimize is None and dtype is not None:
        optimize = 2
    pinned = _mpcaffe._pinned_device()
    try:
        if device is not None:
            _mpcaffe.set_device(device)
        elif pinned < 0:  # chosen before converting: the net is converted for where it runs
            kind, value = _model_source(model_file)
            _mpcaffe.set_device(
                _mpcaffe._device_for_net(value, kind == "file", "" if dtype is None else dtype)[0])
        model = model_file
        if dtype is not None:
            model = _typed_model(model_file, dtype, _mpcaffe.device_index())
        Net.__init__(net, model, TEST, weights=pretrained_file, level=level, stages=stages,
                     optimize=optimize)
    finally:
        _mpcaffe._set_pinned_device(pinned)


def configure_transformer(net, mean, input_scale, raw_scale, channel_swap):
    """net.transformer for the net's first input: H×W×K to K×H×W, then the options given."""
    in_ = net.inputs[0]
    net.transformer = caffe_io.Transformer({in_: net.blobs[in_].data.shape})
    net.transformer.set_transpose(in_, (2, 0, 1))
    if mean is not None:
        net.transformer.set_mean(in_, mean)
    if input_scale is not None:
        net.transformer.set_input_scale(in_, input_scale)
    if raw_scale is not None:
        net.transformer.set_raw_scale(in_, raw_scale)
    if channel_swap is not None:
        net.transformer.set_channel_swap(in_, channel_swap)


class Classifier(Net):
    """Classifier(model_file, pretrained_file, image_dims=None, mean=None, input_scale=None,
    raw_scale=None, channel_swap=None, *, dtype=None, device=None, level=0, stages=(),
    optimize=None).

    A TEST-phase Net with a Transformer for its first input (self.transformer): mean (per channel
    (K,) or K×H×W, subtracted after raw_scale), input_scale, raw_scale (e.g. 255 for images in
    [0, 1]), channel_swap (e.g. (2, 1, 0): RGB to BGR). image_dims (height, width) is the size
    images are resized to before cropping (default: the input's own H×W, no crop). dtype, device,
    level, stages and optimize are mpcaffe's: see build_net; a calibrated int8 net classifies
    through the same calls.
    """

    def __init__(self, model_file, pretrained_file, image_dims=None, mean=None, input_scale=None,
                 raw_scale=None, channel_swap=None, *, dtype=None, device=None, level=0,
                 stages=(), optimize=None):
        build_net(self, model_file, pretrained_file, dtype=dtype, device=device, level=level,
                  stages=stages, optimize=optimize)
        configure_transformer(self, mean, input_scale, raw_scale, channel_swap)
        self.crop_dims = np.array(self.blobs[self.inputs[0]].data.shape[2:])
        if image_dims is None or len(image_dims) == 0:
            image_dims = self.crop_dims
        self.image_dims = image_dims

    def predict(self, inputs, oversample=True):
        """Class scores of H×W×K images (a list or an N×H×W×K array): each resized to image_dims,
        then with `oversample` the ten crops of caffe.io.oversample (corners, centre and their
        mirrors) with their outputs averaged, else the centre crop. Returns the first output's
        values, N×C (with oversample; without, the output's own N×C[×1×1] shape)."""
        if len(inputs) == 0:
            raise ValueError("Classifier.predict: no images given")
        height, width = (int(d) for d in self.image_dims)
        crop_h, crop_w = (int(d) for d in self.crop_dims)
        if crop_h > height or crop_w > width:
            raise ValueError(f"Classifier.predict: the net's input {crop_h}×{crop_w} is larger "
                             f"than image_dims {height}×{width}")
        channels = np.asarray(inputs[0]).shape[2]
        images = np.zeros((len(inputs), height, width, channels), dtype=np.float32)
        for i, image in enumerate(inputs):
            images[i] = caffe_io.resize_image(image, (height, width))
        if oversample:
            crops = caffe_io.oversample(images, (crop_h, crop_w))
        else:
            y, x = int(height / 2.0 - crop_h / 2.0), int(width / 2.0 - crop_w / 2.0)
            crops = images[:, y:y + crop_h, x:x + crop_w, :]
        in_ = self.inputs[0]
        caffe_in = np.zeros((len(crops), channels, crop_h, crop_w), dtype=np.float32)
        for i, crop in enumerate(crops):
            caffe_in[i] = self.transformer.preprocess(in_, crop)
        predictions = self.forward_all(**{in_: caffe_in})[self.outputs[0]]
        if oversample:
            predictions = predictions.reshape((len(predictions) // 10, 10, -1)).mean(axis=1)
        return predictions

"""detector.py — caffe.Detector: a Net that classifies windows of images (R-CNN style: each window,
optionally with a border of context, warped to the net's input), as pycaffe's does."""

import os

import numpy as np

from . import io as caffe_io
from .classifier import build_net, configure_transformer
from .pycaffe import Net


class Detector(Net):
    """Detector(model_file, pretrained_file, mean=None, input_scale=None, raw_scale=None,
    channel_swap=None, context_pad=None, *, dtype=None, device=None, level=0, stages=(),
    optimize=None).

    Preprocessing as caffe.Classifier's (self.transformer). context_pad: a border of this many
    pixels of the net's input shows the context around each window (R-CNN's feature
    extraction); where the context runs off the image it is filled with the mean. dtype, device,
    level, stages and optimize: see mpcaffe.classifier.build_net.
    """

    def __init__(self, model_file, pretrained_file, mean=None, input_scale=None, raw_scale=None,
                 channel_swap=None, context_pad=None, *, dtype=None, device=None, level=0,
                 stages=(), optimize=None):
        build_net(self, model_file, pretrained_file, dtype=dtype, device=device, level=level,
                  stages=stages, optimize=optimize)
        configure_transformer(self, mean, input_scale, raw_scale, channel_swap)
        self.configure_crop(context_pad)

    def detect_windows(self, images_windows):
        """Scores of windows: images_windows is an iterable of (image file name, windows), a
        window (ymin, xmin, ymax, xmax) in pixels (max exclusive). Returns a list of dicts
        {'window', 'prediction' (the first output's values), 'filename'}, image by image, window
        by window."""
        images_windows = [(name, list(windows)) for name, windows in images_windows]
        window_inputs = []
        for filename, windows in images_windows:
            image = caffe_io.load_image(filename).astype(np.float32)
            for window in windows:
                window_inputs.append(self.crop(image, window))
        if not window_inputs:
            return []
        in_ = self.inputs[0]
        caffe_in = np.zeros((len(window_inputs), window_inputs[0].shape[2])
                            + tuple(self.blobs[in_].data.shape[2:]), dtype=np.float32)
        for i, window_input in enumerate(window_inputs):
            caffe_in[i] = self.transformer.preprocess(in_, window_input)
        predictions = self.forward_all(**{in_: caffe_in})[self.outputs[0]]
        detections = []
        i = 0
        for filename, windows in images_windows:
            for window in windows:
                detections.append({"window": window, "prediction": predictions[i],
                                   "filename": filename})
                i += 1
        return detections

    def detect_selective_search(self, image_fnames):
        """detect_windows over Selective Search proposals, which need the
        selective_search_ijcv_with_python package (and MATLAB) as in pycaffe."""
        try:
            import selective_search_ijcv_with_python as selective_search
        except ImportError:
            raise ImportError(
                "Detector.detect_selective_search needs the selective_search_ijcv_with_python "
                "package (github.com/sergeyk/selective_search_ijcv_with_python, which runs "
                "MATLAB); it is not installed. Compute window proposals another way and pass "
                "them to detect_windows([(filename, [(ymin, xmin, ymax, xmax), ...]), ...])."
            ) from None
        image_fnames = [os.path.abspath(f) for f in image_fnames]
        windows_list = selective_search.get_windows(image_fnames, cmd="selective_search_rcnn")
        return self.detect_windows(zip(image_fnames, windows_list))

    def crop(self, im, window):
        """The window (ymin, xmin, ymax, xmax) of an H×W×K image; with context_pad, the window
        grown so that context_pad pixels of the (square) net input are context around it, placed
        on a crop_dims canvas of the mean where it runs off the image."""
        window = np.asarray(window)
        if not self.context_pad:
            return im[int(window[0]):int(window[2]), int(window[1]):int(window[3])]
        crop_size = self.blobs[self.inputs[0]].data.shape[3]  # assumes a square input
        scale = crop_size / (1.0 * crop_size - self.context_pad * 2)
        half_h = (window[2] - window[0] + 1) / 2.0
        half_w = (window[3] - window[1] + 1) / 2.0
        center = (window[0] + half_h, window[1] + half_w)
        box = np.round(np.tile(center, 2) + scale * np.array((-half_h, -half_w, half_h, half_w)))
        scale_h = crop_size / (box[2] - box[0] + 1)
        scale_w = crop_size / (box[3] - box[1] + 1)
        pad_y = int(round(max(0, -box[0]) * scale_h))  # the part of the box above the image
        pad_x = int(round(max(0, -box[1]) * scale_w))
        im_h, im_w = im.shape[:2]
        box = np.clip(box, 0.0, [im_h, im_w, im_h, im_w]).astype(int)
        clip_h = box[2] - box[0] + 1
        clip_w = box[3] - box[1] + 1
        if clip_h <= 0 or clip_w <= 0:
            raise ValueError(f"Detector.crop: window {tuple(window)} lies outside the "
                             f"{im_h}×{im_w} image")
        crop_h = min(int(round(clip_h * scale_h)), crop_size - pad_y)
        crop_w = min(int(round(clip_w * scale_w)), crop_size - pad_x)
        context = caffe_io.resize_image(im[box[0]:box[2], box[1]:box[3]], (crop_h, crop_w))
        crop = np.ones(self.crop_dims, dtype=np.float32) * self.crop_mean
        crop[pad_y:pad_y + crop_h, pad_x:pad_x + crop_w] = context
        return crop

    def configure_crop(self, context_pad):
        """Sets crop_dims (the input's H×W×K) and context_pad; with context, crop_mean is the
        transformer's mean taken back to image space (H×W×K order, channel order and scale of
        the images), which fills the context beyond the image's edges."""
        in_ = self.inputs[0]
        transpose = self.transformer.transpose[in_]
        to_image = np.argsort(transpose)  # the axis order taking the input back to H×W×K
        self.crop_dims = np.array(self.blobs[in_].data.shape[1:])[to_image]
        self.context_pad = context_pad
        if not self.context_pad:
            return
        mean = self.transformer.mean.get(in_)
        if mean is None:
            self.crop_mean = np.zeros(self.crop_dims, dtype=np.float32)
            return
        crop_mean = mean.copy().transpose(to_image)
        channel_swap = self.transformer.channel_swap.get(in_)
        if channel_swap is not None:
            crop_mean = crop_mean[:, :, np.argsort(channel_swap)]
        raw_scale = self.transformer.raw_scale.get(in_)
        if raw_scale is not None:
            crop_mean = crop_mean / raw_scale
        self.crop_mean = crop_mean

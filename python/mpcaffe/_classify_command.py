"""_classify_command.py — `python -m mpcaffe classify`: BVLC's python/classify.py on mpcaffe (an
image, a folder of images or an .npy through caffe.Classifier into an .npy of scores), with the
top-k classes printed per image, and mpcaffe's data types and devices."""

import argparse
import glob
import os
import sys
import time

import numpy as np

USAGE_EPILOG = """\
input_file is an image, a folder (its *.EXT files, in name order) or an .npy of N×H×W×K images.
Scores go to output_file (.npy, N×classes). With --labels FILE (one label a line, line i for
class i), --top K or --print_results, the K best classes of every image are printed (K: 5)."""


def _parser():
    parser = argparse.ArgumentParser(
        prog="mpcaffe classify", epilog=USAGE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Classify images with a trained Caffe model (caffe.Classifier).")
    parser.add_argument("input_file", help="input image, folder of images, or .npy")
    parser.add_argument("output_file", help="output .npy of the scores")
    parser.add_argument("--model_def", required=True, help="deploy .prototxt of the model")
    parser.add_argument("--pretrained_model", default=None,
                        help="trained weights (.caffemodel or HDF5; without: the fillers')")
    parser.add_argument("--gpu", action="store_true",
                        help="run on a GPU (caffe.set_mode_gpu(): set_device's choice, else "
                             "the first GPU, else the default device)")
    parser.add_argument("--center_only", action="store_true",
                        help="classify the centre crop only instead of averaging ten crops")
    parser.add_argument("--images_dim", default="256,256",
                        help="'height,width' images are resized to before cropping "
                             "(default 256,256)")
    parser.add_argument("--mean_file", default="",
                        help="mean image, K×H×W .npy or mean.binaryproto, subtracted per "
                             "channel ('' for none)")
    parser.add_argument("--input_scale", type=float, default=None,
                        help="multiply the input by this after the mean is subtracted")
    parser.add_argument("--raw_scale", type=float, default=255.0,
                        help="multiply the [0, 1] images by this first (default 255)")
    parser.add_argument("--channel_swap", default="2,1,0",
                        help="channel order of the input (default 2,1,0: RGB to BGR; '' keeps)")
    parser.add_argument("--ext", default="jpg",
                        help="extension of the images taken from a folder (default jpg)")
    parser.add_argument("--labels", "--labels_file", dest="labels", default=None,
                        help="label file: line i names class i")
    parser.add_argument("--top", type=int, default=None, help="print the K best classes")
    parser.add_argument("--print_results", action="store_true", help="print the 5 best classes")
    parser.add_argument("--dtype", default=None,
                        help="fp16, int16, int8 or int8w4: the model converted to this type "
                             "(weights from mpcaffe calibrate)")
    parser.add_argument("--device", default=None,
                        help="device index or selector (pocl, intel, cuda, gpu, cpu)")
    return parser


def load_mean(path):
    """The per-channel mean (K,) of a K×H×W mean image: an .npy (as BVLC's classify.py reads
    it) or a mean.binaryproto (as compute_image_mean writes it)."""
    if path.endswith(".npy"):
        mean = np.load(path)
    else:
        from . import caffe_pb2
        from .io import blobproto_to_array
        blob = caffe_pb2.BlobProto()
        with open(path, "rb") as f:
            blob.ParseFromString(f.read())
        mean = blobproto_to_array(blob)
        if mean.ndim == 4:
            if mean.shape[0] != 1:
                raise ValueError(f"{path}: a mean image holds 1 image, this one {mean.shape[0]}")
            mean = mean[0]
    if mean.ndim != 3:
        raise ValueError(f"{path}: expected a K×H×W mean image, got shape {mean.shape}")
    return mean.mean(1).mean(1)


def _load_inputs(path, ext):
    """(names, images) of an .npy, a folder's *.ext files or one image file."""
    from .io import load_image
    path = os.path.expanduser(path)
    if path.endswith("npy"):
        images = np.load(path)
        return [f"{path}[{i}]" for i in range(len(images))], images
    if os.path.isdir(path):
        names = sorted(glob.glob(os.path.join(glob.escape(path), "*." + ext)))
        if not names:
            raise FileNotFoundError(f"{path}: no *.{ext} files (--ext names the extension)")
        return names, [load_image(name) for name in names]
    return [path], [load_image(path)]


def _read_labels(path):
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]


def print_top(names, predictions, k, labels=None, out=None):
    """For every image its name, then its k best classes as `score - "label"` (the class index
    when there are no labels), best first."""
    out = sys.stdout if out is None else out
    scores = predictions.reshape(len(predictions), -1)
    if labels is not None and len(labels) < scores.shape[1]:
        raise ValueError(f"the labels file has {len(labels)} labels for {scores.shape[1]} "
                         "classes")
    for name, row in zip(names, scores):
        print(name, file=out)
        for index in np.argsort(-row, kind="stable")[:k]:
            label = labels[index] if labels is not None else str(index)
            print(f'{row[index]:.4f} - "{label}"', file=out)


def main(argv=None):
    """Runs the command; returns its exit status (usage errors exit 2 through argparse)."""
    parser = _parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.top is not None and args.top < 1:
        parser.error(f"--top wants a positive count, got {args.top}")
    import mpcaffe
    try:
        image_dims = [int(s) for s in args.images_dim.split(",")]
        channel_swap = [int(s) for s in args.channel_swap.split(",")] if args.channel_swap else None
        if len(image_dims) != 2:
            raise ValueError(f"--images_dim wants 'height,width', got '{args.images_dim}'")
        mean = load_mean(args.mean_file) if args.mean_file else None
        labels = _read_labels(args.labels) if args.labels else None
        if args.gpu:
            mpcaffe.set_mode_gpu()
        classifier = mpcaffe.Classifier(
            args.model_def, args.pretrained_model, image_dims=image_dims, mean=mean,
            input_scale=args.input_scale, raw_scale=args.raw_scale, channel_swap=channel_swap,
            dtype=args.dtype, device=args.device)
        names, inputs = _load_inputs(args.input_file, args.ext)
        print(f"Classifying {len(inputs)} inputs on device {classifier.device_index}.",
              file=sys.stderr)
        start = time.time()
        predictions = classifier.predict(inputs, not args.center_only)
        print(f"Done in {time.time() - start:.2f} s.", file=sys.stderr)
        if labels is not None or args.top is not None or args.print_results:
            print_top(names, predictions, args.top if args.top is not None else 5, labels)
        np.save(args.output_file, predictions)
        print(f"Saved the scores in {args.output_file}.", file=sys.stderr)
    except (OSError, ValueError, mpcaffe.Error) as e:
        print(f"mpcaffe classify: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

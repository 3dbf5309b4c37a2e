"""Classifies photographs with mpcaffe.Classifier (pycaffe's API), in fp32 or a calibrated type.

Usage: python3 classify.py DEPLOY.prototxt WEIGHTS.caffemodel MEAN.binaryproto LABELS.txt
                           LIST.txt [--dtype int8] [--compare classify.json]

LIST.txt names the images (one path per line, relative to the list's folder). Prints the top-1
class of each image; with --compare, the JSON of `mpcaffe classify --json` for the same images,
checks that each top-1 is the command's and exits with status 1 when one is not.
"""
import argparse
import json
import os
import sys

import numpy as np
import mpcaffe as caffe


def main():
    parser = argparse.ArgumentParser()
    for name in ["model", "weights", "mean_file", "labels", "images"]:
        parser.add_argument(name)
    parser.add_argument("--dtype", default=None)
    parser.add_argument("--compare", default=None)
    args = parser.parse_args()

    blob = caffe.io.caffe_pb2.BlobProto()
    with open(args.mean_file, "rb") as f:
        blob.ParseFromString(f.read())
    mean = caffe.io.blobproto_to_array(blob)[0]  # 3 x 32 x 32, BGR, 0..255
    labels = open(args.labels).read().split()
    root = os.path.dirname(os.path.abspath(args.images))
    paths = [line.split()[0] for line in open(args.images) if line.strip()]

    # The Data layer's preprocessing: BGR, 0..255, minus the per-pixel mean.
    classifier = caffe.Classifier(args.model, args.weights, image_dims=mean.shape[1:], mean=mean,
                                  raw_scale=255, channel_swap=(2, 1, 0), dtype=args.dtype)
    images = [caffe.io.load_image(os.path.join(root, p)) for p in paths]
    scores = classifier.predict(images, oversample=False)
    top1 = scores.argmax(axis=1)

    command = None
    if args.compare:
        command = [image["top"][0]["class"] for image in json.load(open(args.compare))["images"]]
    disagree = 0
    for i, path in enumerate(paths):
        line = f"{path}: {scores[i, top1[i]]:.4f} {labels[top1[i]]}"
        if command is not None:
            same = command[i] == top1[i]
            disagree += not same
            line += "" if same else f"  (mpcaffe classify: {labels[command[i]]})"
        print(line)
    if command is not None:
        print(f"Python top-1 agrees with mpcaffe classify on {len(paths) - disagree} of {len(paths)}")
        if disagree:
            sys.exit(1)


if __name__ == "__main__":
    main()

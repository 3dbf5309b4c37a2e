"""Cuts labelled random crops from scikit-image's bundled photographs (class = photograph).

Usage: python3 make_crops.py OUT_DIR

Writes OUT_DIR/{train,calib,holdout}/<class>/NNNN.jpg, the list files train.txt, calib.txt and
holdout.txt ("relative/path label" lines, paths relative to OUT_DIR) and labels.txt (class i on
line i + 1). Each crop takes a random square of 25-60 % of the photograph's shorter side at a
random position, rotates it by up to 15 degrees and flips it left-right half of the time. The
three sets use different seeds; holdout's crops are never used for training or calibration.
"""
import os
import sys

import numpy as np
from PIL import Image
import skimage.data

# Eight visually distinct photographs; the grey ones are stored as RGB like the others.
PHOTOS = ["astronaut", "chelsea", "coffee", "rocket", "camera", "coins", "brick", "moon"]
SETS = [("train", 150, 1), ("calib", 20, 2), ("holdout", 30, 3)]  # name, crops per class, seed


def random_crop(photo, rng):
    w, h = photo.size
    side = int(min(w, h) * rng.uniform(0.25, 0.60))
    x = int(rng.integers(0, w - side + 1))
    y = int(rng.integers(0, h - side + 1))
    crop = photo.crop((x, y, x + side, y + side))
    crop = crop.rotate(float(rng.uniform(-15, 15)), resample=Image.BILINEAR)
    if rng.random() < 0.5:
        crop = crop.transpose(Image.FLIP_LEFT_RIGHT)
    return crop.resize((64, 64), Image.BILINEAR)


def main(out):
    folder = os.path.dirname(skimage.data.__file__)
    photos = []
    for name in PHOTOS:
        files = [f for f in os.listdir(folder) if os.path.splitext(f)[0] == name]
        photos.append(Image.open(os.path.join(folder, files[0])).convert("RGB"))
    with open(os.path.join(out, "labels.txt"), "w") as f:
        f.write("".join(name + "\n" for name in PHOTOS))
    for subset, count, seed in SETS:
        rng = np.random.default_rng(seed)
        lines = []
        for label, (name, photo) in enumerate(zip(PHOTOS, photos)):
            os.makedirs(os.path.join(out, subset, name), exist_ok=True)
            for i in range(count):
                path = f"{subset}/{name}/{i:04d}.jpg"
                random_crop(photo, rng).save(os.path.join(out, path), quality=90)
                lines.append(f"{path} {label}\n")
        with open(os.path.join(out, subset + ".txt"), "w") as f:
            f.writelines(lines)
        print(f"{subset}: {len(lines)} crops of {len(PHOTOS)} photographs")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])

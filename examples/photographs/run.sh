#!/usr/bin/env bash
# From scikit-image's bundled photographs to a calibrated int8 classifier, with mpcaffe's commands.
#
# Usage: examples/photographs/run.sh [WORK_DIR]   (default: a new mktemp -d folder)
# MPCAFFE names the mpcaffe command (default: mpcaffe on PATH); python3 needs numpy, Pillow,
# scikit-image and the mpcaffe package. Exits with status 1 when int8's top-1 agrees with fp32's on
# fewer than 95 % of the held-out photographs, or when Python's top-1 differs from the command's.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
MPCAFFE="${MPCAFFE:-mpcaffe}"
WORK="${1:-$(mktemp -d)}"
mkdir -p "$WORK"
cd "$WORK"
echo "work directory: $WORK"

declare -A SECONDS_OF
step() {  # step NAME COMMAND...: runs the command and records its wall time
  local name="$1" start end
  shift
  echo "== $name: $*"
  start=$(date +%s.%N)
  "$@"
  end=$(date +%s.%N)
  SECONDS_OF[$name]=$(python3 -c "print(f'{$end - $start:.1f}')")
}

# 1. Labelled crops of eight photographs: train/ (150 per class), calib/ (20), holdout/ (30).
step crops python3 "$HERE/make_crops.py" .
cp "$HERE/train_val.prototxt" "$HERE/deploy.prototxt" "$HERE/solver.prototxt" .

# 2. An LMDB of 32x32 BGR crops and its per-pixel mean.
rm -rf train_lmdb
step convert_imageset "$MPCAFFE" convert_imageset --resize_height=32 --resize_width=32 --shuffle \
  ./ train.txt train_lmdb
step compute_image_mean "$MPCAFFE" compute_image_mean train_lmdb mean.binaryproto

# 3. Train the small convnet (500 SGD steps of 32 crops).
step train "$MPCAFFE" train --solver solver.prototxt --no-progress
WEIGHTS=photographs_iter_500.caffemodel

# 4. Calibrate int8 on calib/ and report fp32 against int8 on holdout/. The --images path
#    preprocesses as the Data layer does: BGR, 0..255, minus mean.binaryproto.
step calibrate "$MPCAFFE" calibrate --model deploy.prototxt --weights "$WEIGHTS" --dtype int8 \
  --images calib.txt --mean-file mean.binaryproto --report-images holdout.txt --report report.json \
  --output int8.caffemodel --output-model int8.prototxt --no-progress

# 5. Classify the first held-out crop of each photograph with the command and with
#    mpcaffe.Classifier, fp32 and int8; Python's top-1 must be the command's.
while read -r name; do echo "holdout/$name/0000.jpg"; done < labels.txt > few.txt
step classify_fp32 "$MPCAFFE" classify --model deploy.prototxt --weights "$WEIGHTS" \
  --images few.txt --mean-file mean.binaryproto --labels labels.txt --top 1 --json fp32.json
step classify_int8 "$MPCAFFE" classify --model int8.prototxt --weights int8.caffemodel \
  --images few.txt --mean-file mean.binaryproto --labels labels.txt --top 1 --json int8.json
step python_fp32 python3 "$HERE/classify.py" deploy.prototxt "$WEIGHTS" mean.binaryproto \
  labels.txt few.txt --compare fp32.json
step python_int8 python3 "$HERE/classify.py" int8.prototxt int8.caffemodel mean.binaryproto \
  labels.txt few.txt --compare int8.json

echo "== figures"
for name in crops convert_imageset compute_image_mean train calibrate classify_fp32 \
            classify_int8 python_fp32 python_int8; do
  printf '%-20s %6s s\n' "$name" "${SECONDS_OF[$name]}"
done
python3 - <<'PY'
import json, sys
r = json.load(open("report.json"))
print(f"held-out photographs: {r['count']}")
print(f"fp32 top-1 accuracy:  {100 * r['fp32_top1_accuracy']:.1f} %")
print(f"int8 top-1 accuracy:  {100 * r['calibrated_top1_accuracy']:.1f} %")
print(f"int8/fp32 top-1 agreement: {100 * r['top1_agreement']:.1f} % ({r['changed']} changed)")
if r["top1_agreement"] < 0.95:
    sys.exit("agreement below 95 %")
PY

#!/usr/bin/env bash
# scripts/calibrate-lenet.sh [workdir] — the deployment workflow on the command line, end to end:
# BVLC's LeNet trained on Fashion-MNIST with `mpcaffe train` (lenet_solver_adam.prototxt,
# LENET_ITERATIONS steps, default 2000), then for int8, int8w4, int16 and fp16 `mpcaffe calibrate` (on
# the training LMDB, CALIBRATE_ITERATIONS batches, default 20) and `mpcaffe test` on the 10 000
# test images; prints the accuracy per data type against fp32. MPCAFFE names the command
# (default build/bin/mpcaffe), MPCAFFE_DEVICE the device, FASHION_MNIST_DIR the IDX files
# (default: Debian's dataset-fashion-mnist), MPCAFFE_SHARED_DIR the shared models.
set -euo pipefail
cd "$(dirname "$0")/.."
MPCAFFE=$(realpath "${MPCAFFE:-build/bin/mpcaffe}")
SHARED=$(realpath "${MPCAFFE_SHARED_DIR:-../shared}")
DATA=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
WORK=${1:-build/calibrate-lenet}
ITERATIONS=${LENET_ITERATIONS:-2000}
CALIBRATE=${CALIBRATE_ITERATIONS:-20}
for f in "$SHARED/models/bvlc/mnist/lenet_train_test.prototxt" "$DATA/train-images-idx3-ubyte.gz"; do
  [ -e "$f" ] || { echo "calibrate-lenet: $f is missing" >&2; exit 1; }
done

# BVLC's layout: the prototxts name examples/mnist/... relative to the working directory.
mkdir -p "$WORK/examples/mnist"
cd "$WORK"
N=examples/mnist
for split in train t10k; do
  lmdb=$N/mnist_${split/t10k/test}_lmdb
  [ -d "$lmdb" ] || "$MPCAFFE" convert_mnist "$DATA/$split-images-idx3-ubyte.gz" \
    "$DATA/$split-labels-idx1-ubyte.gz" "$lmdb"
done
cp "$SHARED"/models/bvlc/mnist/lenet_train_test.prototxt $N/
chmod u+w $N/lenet_train_test.prototxt
sed -e "s/^max_iter: .*/max_iter: $ITERATIONS/" -e "s/^snapshot: .*/snapshot: $ITERATIONS/" \
  -e "s/^test_interval: .*/test_interval: $ITERATIONS/" \
  "$SHARED/models/bvlc/mnist/lenet_solver_adam.prototxt" > $N/lenet_solver_adam.prototxt
WEIGHTS=$N/lenet_iter_$ITERATIONS.caffemodel
[ -e "$WEIGHTS" ] || "$MPCAFFE" train --solver $N/lenet_solver_adam.prototxt > train.log 2>&1 || {
  tail -20 train.log
  exit 1
}

accuracy() { sed -n 's/^accuracy = //p' "$1"; }
set -x
"$MPCAFFE" test --model $N/lenet_train_test.prototxt --weights "$WEIGHTS" --iterations 100 > test_fp32.log
for t in int8 int8w4 int16 fp16; do
  "$MPCAFFE" calibrate --model $N/lenet_train_test.prototxt --weights "$WEIGHTS" --dtype $t \
    --phase TRAIN --iterations "$CALIBRATE" --output lenet_$t.caffemodel \
    --output-model lenet_$t.prototxt --no-progress > calibrate_$t.log
  "$MPCAFFE" test --model lenet_$t.prototxt --weights lenet_$t.caffemodel --iterations 100 > test_$t.log
done
set +x
echo "LeNet on Fashion-MNIST ($ITERATIONS training steps), test accuracy per data type:"
fp32=$(accuracy test_fp32.log)
for t in fp32 int8 int8w4 int16 fp16; do
  a=$(accuracy test_$t.log)
  awk -v t=$t -v a="$a" -v f="$fp32" 'BEGIN { printf "  %-5s %s (%+.2f points vs fp32)\n", t, a, (a - f) * 100 }'
done

#!/usr/bin/env bash
# tests/dist/cli_test.sh <mpirun> <mpcaffe> — the command line under `mpirun -np 2` on LeNet and
# Fashion-MNIST's 10 000 test images (Debian's dataset-fashion-mnist): `calibrate` over two
# ranks writes the same bytes as one process, `test` over two ranks prints the same scores, and
# `train --snapshot` resumes a one-process snapshot under two ranks to max_iter.
set -u
MPIRUN=$1
MPCAFFE=$2
DATA=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
SHARED=${MPCAFFE_SHARED_DIR:-}
if [ ! -e "$DATA/t10k-images-idx3-ubyte.gz" ] || [ ! -e "$SHARED/models/bvlc/mnist/lenet_train_test.prototxt" ]; then
  echo "skipped: needs $DATA/t10k-*.gz (dataset-fashion-mnist) and MPCAFFE_SHARED_DIR/models/bvlc/mnist"
  exit 77
fi
dir=$(mktemp -d /tmp/mpcaffe_dist_cli_XXXXXX)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
fail=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAILED: $1"; fail=1; fi; }

"$MPCAFFE" convert_mnist "$DATA/t10k-images-idx3-ubyte.gz" "$DATA/t10k-labels-idx1-ubyte.gz" db > /dev/null
sed -e "s#source: \".*\"#source: \"$dir/db\"#" "$SHARED/models/bvlc/mnist/lenet_train_test.prototxt" > net.prototxt
cat > solver.prototxt <<SOLVER
net: "net.prototxt"
base_lr: 0.01 momentum: 0.9 lr_policy: "fixed" display: 0 max_iter: 4 snapshot: 4
snapshot_prefix: "lenet" random_seed: 1701 test_iter: 2 test_interval: 1000
SOLVER
"$MPCAFFE" train --solver solver.prototxt --no-progress > train1.log 2>&1 || { tail train1.log; exit 1; }

for ranks in 1 2; do
  "$MPIRUN" -np $ranks "$MPCAFFE" calibrate --model net.prototxt --weights lenet_iter_4.caffemodel \
    --dtype int8 --iterations 4 --output int8_$ranks.caffemodel --no-progress > calibrate$ranks.log 2>&1
  "$MPIRUN" -np $ranks "$MPCAFFE" test --model net.prototxt --weights lenet_iter_4.caffemodel \
    --iterations 4 > test$ranks.log 2>&1
done
check "calibrate over 2 ranks writes the bytes of 1 process" "cmp -s int8_1.caffemodel int8_2.caffemodel"
check "calibrate says it shared the passes over 2 ranks" "grep -q 'shared by 2 ranks' calibrate2.log"
check "test over 2 ranks prints the scores of 1 process" \
  "diff <(grep -E '^(Loss|accuracy|loss)' test1.log) <(grep -E '^(Loss|accuracy|loss)' test2.log)"
check "test printed its scores" "grep -q '^accuracy = ' test2.log"

sed -i 's/max_iter: 4/max_iter: 8/' solver.prototxt
"$MPIRUN" -np 2 "$MPCAFFE" train --solver solver.prototxt --snapshot lenet_iter_4.solverstate \
  --no-progress > resume.log 2>&1
check "a 1-process snapshot resumes under 2 ranks" \
  "grep -q 'Restoring previous solver status from lenet_iter_4.solverstate' resume.log && [ -e lenet_iter_8.solverstate ]"
[ $fail -eq 0 ] || tail -20 calibrate2.log test2.log resume.log
exit $fail

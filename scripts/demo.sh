#!/usr/bin/env bash
# scripts/demo.sh — the main job on the default device (MPCAFFE_DEVICE chooses another): the
# devices, the element-wise self-check, the paper's workflow on Fashion-MNIST from Python (a
# short fp32 training with Adam, OBSERVE calibration, then fp32 / fp16 / int16 / int8 / int8w4
# (4-bit weights) accuracy, time and memory in one table), and `mpcaffe bench net` of the paper's
# AlexNet at batch 1 in those types (quantized nets calibrated on the fp32 net): time, memory,
# storage.
# DEMO_FASHION_ITERATIONS (default 1000) sets the training steps, DEMO_ITERATIONS the AlexNet
# timing passes.
set -euo pipefail
cd "$(dirname "$0")/.."
MPCAFFE=${MPCAFFE:-build/bin/mpcaffe}
SHARED=${MPCAFFE_SHARED_DIR:-$(cd .. && pwd)/shared}
ITERATIONS=${DEMO_ITERATIONS:-5}

"$MPCAFFE" devices
echo
"$MPCAFFE" selfcheck
echo

# The Python package (pip install . into the Python that python3 runs; incremental build).
scripts/python-test.sh --install-only
echo
echo "Fashion-MNIST, the paper's two-layer 784-30-10 net (examples/fashion_mnist):"
python3 examples/fashion_mnist/fashion_mnist.py --iterations "${DEMO_FASHION_ITERATIONS:-1000}"
echo
echo "AlexNet (paper's imagenet_caffenet, batch 1, synthetic input, random weights: accuracy per"
echo "dtype is the Fashion-MNIST table above), $ITERATIONS timed forward passes per dtype:"
"$MPCAFFE" bench net --model "$SHARED/models/paper_examples/imagenet_caffenet/net_float_1.prototxt" \
  --dtypes fp32,fp16,int16,int8,int8w4 --batch 1 --reduced-memory both --iterations "$ITERATIONS" --no-setup

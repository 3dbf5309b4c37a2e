#!/usr/bin/env bash
# scripts/demo.sh — the main job on the default device (MPCAFFE_DEVICE chooses another): the
# devices, the element-wise self-check, the paper's workflow on Fashion-MNIST from Python (a
# short fp32 training with Adam, OBSERVE calibration, then fp32 / fp16 / int16 / int8 accuracy,
# time and memory in one table), and the paper's AlexNet at batch 1 in the four types
# (quantized nets calibrated on the fp32 net) with forward time and peak memory.
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
echo "AlexNet (paper's imagenet_caffenet, batch 1, synthetic input), $ITERATIONS iterations per dtype:"
out=$(mktemp -d)
for dtype in float half int16 int8; do
  "$MPCAFFE" time --model "$SHARED/models/paper_examples/imagenet_caffenet/net_${dtype}_1.prototxt" \
    --synthetic --iterations "$ITERATIONS" --json > "$out/$dtype.json" 2> "$out/$dtype.err" ||
    { cat "$out/$dtype.err"; exit 1; }
done
python3 - "$out" <<'PY'
import json, sys, os
rows = []
for dtype, name in [("float", "fp32"), ("half", "fp16"), ("int16", "int16q"), ("int8", "int8q")]:
    with open(os.path.join(sys.argv[1], dtype + ".json")) as f:
        r = json.load(f)
    rows.append((name, r["forward_ms_median"], r["peak_device_bytes"] / 2**20))
base_ms, base_mib = rows[0][1], rows[0][2]
print(f"{'dtype':8}{'forward ms':>12}{'vs fp32':>9}{'peak MiB':>11}{'vs fp32':>9}")
for name, ms, mib in rows:
    print(f"{name:8}{ms:12.1f}{base_ms / ms:8.2f}x{mib:11.1f}{base_mib / mib:8.2f}x")
print("(random weights: accuracy per dtype is the Fashion-MNIST table above)")
PY
rm -rf "$out"

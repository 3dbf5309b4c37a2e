#!/usr/bin/env bash
# scripts/demo.sh — the main job on the default device (MPCAFFE_DEVICE chooses another): the
# devices, the element-wise self-check, and the paper's AlexNet at batch 1 in fp32, fp16, int16
# and int8 (quantized nets calibrated on the fp32 net) with forward time and peak memory.
set -euo pipefail
cd "$(dirname "$0")/.."
MPCAFFE=${MPCAFFE:-build/bin/mpcaffe}
SHARED=${MPCAFFE_SHARED_DIR:-$(cd .. && pwd)/shared}
ITERATIONS=${DEMO_ITERATIONS:-5}

"$MPCAFFE" devices
echo
"$MPCAFFE" selfcheck
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
print("(accuracy per dtype joins this table once training lands: issue 7)")
PY
rm -rf "$out"

#!/usr/bin/env python3
"""bench/ort_node_profile.py — ONNX Runtime's own time per node on the net bench/peers.py times:
the same export, weights and input (batch 1), in fp32 or as its static-QDQ int8 net, run
`--iterations` times with SessionOptions.enable_profiling; per node the minimum and the median of
its kernel time over the runs, and the whole run's. The counterpart of mpcaffe's per-layer times
(`mpcaffe time --explain`, or the kernel benchmarks' 20 forwards per host synchronization) where
bench/layer_gap.py's OpenVINO profile is not the best peer (MobileNet v1 int8: ONNX Runtime).

    python3 bench/ort_node_profile.py --model mobilenet_v1_deploy.prototxt [--dtype int8|fp32]
        [--iterations 300] [--threads 0] [--json nodes.json]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="the fp32 net (.prototxt)")
    ap.add_argument("--dtype", default="int8", choices=["int8", "fp32"])
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--threads", type=int, default=0, help="intra-op threads (0: every core)")
    ap.add_argument("--json", help="write [{node, op, min_us, median_us}] and the run's times")
    args = ap.parse_args(argv)

    import mpcaffe
    import mpcaffe.onnx
    import onnxruntime as ort
    from onnxruntime import quantization as q

    with tempfile.TemporaryDirectory() as tmp:
        _, _, fp32_path = peers.export(args, mpcaffe, 1, tmp)
        options = ort.SessionOptions()
        if args.threads:
            options.intra_op_num_threads = args.threads
        plain = ort.InferenceSession(fp32_path, options, providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(1701)  # bench/peers.py's input
        feeds = {i.name: rng.uniform(-1, 1, size=i.shape).astype(np.float32)
                 for i in plain.get_inputs()}
        path = fp32_path if args.dtype == "fp32" else peers.quantize_qdq(ort, q, fp32_path,
                                                                        feeds, tmp)
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(tmp, "profile")
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        for _ in range(5):  # warm-up
            session.run(None, feeds)
        runs = []
        for _ in range(args.iterations):
            t0 = time.perf_counter()
            session.run(None, feeds)
            runs.append((time.perf_counter() - t0) * 1e3)
        with open(session.end_profiling()) as f:
            events = json.load(f)
    per_node, ops = defaultdict(list), {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            name = e["name"][: -len("_kernel_time")]
            per_node[name].append(e["dur"])
            ops[name] = e["args"].get("op_name", "")
    # The warm-up runs are in the trace too; the minimum and median hardly notice them.
    rows = [{"node": n, "op": ops[n], "min_us": min(d), "median_us": statistics.median(d)}
            for n, d in per_node.items()]
    for r in rows:
        print(f"{r['node']:<44} {r['op']:<26} min {r['min_us']:6d} us  median "
              f"{r['median_us']:8.1f} us")
    print(f"sum of minima {sum(r['min_us'] for r in rows) / 1e3:.3f} ms; whole run min "
          f"{min(runs):.3f} ms, median {statistics.median(runs):.3f} ms "
          f"({args.iterations} runs, load average {os.getloadavg()[0]:.1f})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.model, "dtype": args.dtype, "nodes": rows,
                       "run_ms": runs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

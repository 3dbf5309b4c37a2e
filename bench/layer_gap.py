#!/usr/bin/env python3
"""bench/layer_gap.py — where mpcaffe loses time against OpenVINO, layer by layer: the net at
batch 1 with bench/peers.py's weights, `mpcaffe time --json --explain` on one device (each
launched layer timed with a Finish; the layers fused into it listed with it) beside OpenVINO's
per-node profile (PERF_COUNT, get_profiling_info(): the median per node over the iterations) on
the same ONNX export — its int8 net the same QDQ net bench/peers.py times. OpenVINO's nodes are
matched to mpcaffe's launched layers by the Caffe layer or blob their name, or the name of an
ONNX node they fused, carries (the ONNX export names nodes after layers and values after blobs);
layout reorders and nodes of no layer of ours are summed apart. Prints the layers with the
largest gap, their kernel family and configuration, the convolutions' GFLOP/s (G ops/s in
int8), and OpenVINO's kernels per layer.

    python3 bench/layer_gap.py --model resnet50_deploy.prototxt --device 0 --dtype fp32|int8
        [--level native|avx2] [--iterations 20] [--top 5] [--json gaps.json]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict

from google.protobuf import text_format

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_engines as pe  # noqa: E402
import peers  # noqa: E402

CONV_KEY = re.compile(r"n(\d+) c(\d+) h(\d+) w(\d+) o(\d+) k(\d+)x(\d+) s(\d+)x(\d+) "
                      r"p(\d+)x(\d+) d(\d+)x(\d+) g(\d+)")


def conv_ops(key):
    """2·multiply-adds of the convolution a kernel's "for" signature describes, or None."""
    m = CONV_KEY.search(key or "")
    if not m:
        return None
    n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, g = map(int, m.groups())
    oh = (h + 2 * ph - (dh * (kh - 1) + 1)) // sh + 1
    ow = (w + 2 * pw - (dw * (kw - 1) + 1)) // sw + 1
    return 2.0 * n * o * oh * ow * (c // g) * kh * kw


def kind(group):
    """What a launched layer is, for the summary by kind: family, kernel size and stride
    ("conv k3 s1", "conv_pw k1 s2"), else the family or the layer type."""
    k = group["kernels"][0] if group["kernels"] else None
    if not k:
        return group["type"]
    m = CONV_KEY.search(k.get("for", ""))
    return f"{k['family']} k{m.group(6)} s{m.group(8)}" if m else k["family"]


def by_kind(groups, dtype, peak):
    """Lines summing the layers of each kind: mpcaffe's and OpenVINO's time, the median and
    range of the per-layer ratios and mpcaffe's rates. Layers where OpenVINO's time implies more
    than `peak` G ops/s (a profile entry that cannot be right) are left out, and counted."""
    kinds, dropped = {}, 0
    for g in groups:
        if not g["ops"] or g["ov_ms"] <= 0:
            continue
        if peak and g["ops"] / g["ov_ms"] / 1e6 > peak:
            dropped += 1
            continue
        a = kinds.setdefault(kind(g), {"ours": 0.0, "ov": 0.0, "ratios": [], "rates": []})
        a["ours"] += g["ms"]
        a["ov"] += g["ov_ms"]
        a["ratios"].append(g["ms"] / g["ov_ms"])
        a["rates"].append(g["gops"])
    unit = "G ops/s" if dtype == "int8" else "GFLOP/s"
    lines = []
    for name, a in sorted(kinds.items(), key=lambda kv: -kv[1]["ours"]):
        r = sorted(a["ratios"])
        lines.append(f"  {name}: {len(r)} layers, mpcaffe {a['ours']:.2f} ms, OpenVINO "
                     f"{a['ov']:.2f} ms; per layer mpcaffe / OpenVINO median "
                     f"{statistics.median(r):.1f} ({r[0]:.1f}-{r[-1]:.1f}); mpcaffe "
                     f"{min(a['rates']):.0f}-{max(a['rates']):.0f} {unit}")
    if dropped:
        lines.append(f"  ({dropped} layers left out: OpenVINO's time implies over {peak:.0f} "
                     f"{unit})")
    return lines


def mpcaffe_groups(report):
    """[{name, type, ms, layers, kernels}] per launched layer, the layers fused into it included;
    and {blob: group index} from the first layer writing each blob."""
    groups, index = [], {}
    for layer in report["layers"]:
        if layer.get("fused_into"):
            continue
        index[layer["name"]] = len(groups)
        groups.append({"name": layer["name"], "type": layer["type"], "ms": layer["forward_ms"],
                       "layers": [layer["name"]], "kernels": layer.get("kernels", [])})
    for layer in report["layers"]:
        if layer.get("fused_into") in index:
            groups[index[layer["fused_into"]]]["layers"].append(layer["name"])
    return groups, index


def name_groups(param, groups):
    """{layer or blob name: group index}: a layer's group, and each blob the group of the first
    layer that writes it (the ONNX export names nodes after layers, values after blobs)."""
    names = {}
    for g, group in enumerate(groups):
        for name in group["layers"]:
            names[name] = g
    for layer in param.layer:
        for top in layer.top:
            if top not in names and layer.name in names:
                names[top] = names[layer.name]
    return names


def match(node_name, names):
    """The longest layer or blob name the OpenVINO node's name starts with, followed by an end
    or a separator (the exporter's `_1` and `__v`, the quantizer's `_QuantizeLinear`), else
    None (a node OpenVINO made: a folded `Multiply_123` convolution, a reorder)."""
    name = node_name[len("node_"):] if node_name.startswith("node_") else node_name
    best = None
    for n in names:
        if name.startswith(n) and (len(name) == len(n) or not name[len(n)].isalnum()):
            if best is None or len(n) > len(best):
                best = n
    return best


def openvino_profile(path, feeds, iterations):
    """{node name: (median ms, exec type, node type, [the names of the ONNX nodes it fused])}
    over `iterations` inferences, in execution order."""
    run = pe.openvino_runner(path, feeds, perf_count=True)
    run()
    fused = {}
    for op in run.compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()
        if "originalLayersNames" in info:
            names = info["originalLayersNames"].astype(str)
            fused[op.get_friendly_name()] = [n for n in names.split(",") if n]
    times = defaultdict(list)
    kinds = {}
    for _ in range(iterations):
        run()
        for p in run.request.get_profiling_info():
            times[p.node_name].append(p.real_time.total_seconds() * 1e3)
            kinds[p.node_name] = (p.exec_type, p.node_type)
    return {n: (statistics.median(v),) + kinds[n] + (fused.get(n, []),)
            for n, v in times.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--device", default="0", help="mpcaffe device index")
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "int8"])
    ap.add_argument("--level", default="native", choices=sorted(pe.LEVEL_ENV))
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--mpcaffe", default=os.path.join(os.path.dirname(__file__), "..", "build",
                                                      "bin", "mpcaffe"))
    ap.add_argument("--peak", type=float, default=0,
                    help="the CPU's peak in GFLOP/s (G ops/s for --dtype int8): layers where "
                    "OpenVINO's time implies more are left out of the summary by kind")
    ap.add_argument("--json", help="write every group's figures here")
    args = ap.parse_args(argv)
    pe.apply_level(args.level)
    import mpcaffe
    import mpcaffe.onnx
    import onnxruntime as ort
    from onnxruntime import quantization as q

    with tempfile.TemporaryDirectory() as tmp:
        prototxt, weights, fp32_path = peers.export(args, mpcaffe, 1, tmp)
        session = ort.InferenceSession(fp32_path, providers=["CPUExecutionProvider"])
        rng = __import__("numpy").random.default_rng(1701)
        feeds = {i.name: rng.uniform(-1, 1, size=i.shape).astype("float32")
                 for i in session.get_inputs()}
        onnx_path = fp32_path
        model = prototxt
        if args.dtype == "int8":
            onnx_path = peers.quantize_qdq(ort, q, fp32_path, feeds, tmp)
            model = os.path.join(tmp, "int8.prototxt")
            convert = subprocess.run([args.mpcaffe, "convert", "--model", prototxt, "--dtype",
                                      "int8", "--output", model, "--device", args.device],
                                     capture_output=True, text=True)
            if convert.returncode:
                raise SystemExit(f"layer_gap.py: mpcaffe convert failed:\n{convert.stderr}")
        out = subprocess.run([args.mpcaffe, "time", "--model", model, "--weights", weights,
                              "--device", args.device, "--iterations", str(args.iterations),
                              "--json", "--explain"], check=True, capture_output=True, text=True)
        report = json.loads(out.stdout)
        ov = openvino_profile(onnx_path, feeds, args.iterations)
        param = mpcaffe.NetParameter()
        with open(model) as f:
            text_format.Parse(f.read(), param)

    groups, _ = mpcaffe_groups(report)
    names = name_groups(param, groups)
    for g in groups:
        g.update(ov_ms=0.0, ov_nodes=[])
    # A node OpenVINO named itself (the convolution it folded a BatchNorm into is `Multiply_N`)
    # goes by the first ONNX node it fused that names a layer (`node_scale2a_branch1`); layout
    # reorders, and nodes OpenVINO made of none of ours (the strided MaxPool it puts before a
    # 1×1 stride-2 convolution), are counted apart.
    unmatched, reorders = defaultdict(float), 0.0
    for node, (ms, exec_type, node_type, fused) in ov.items():
        if node_type in ("Parameter", "Result", "Constant"):
            continue
        if node_type == "Reorder":
            reorders += ms
            continue
        found = next((m for m in (match(n, names) for n in [node] + fused) if m), None)
        if found is None:
            unmatched[f"{node_type}:{exec_type}"] += ms
            continue
        g = groups[names[found]]
        g["ov_ms"] += ms
        if ms > 0:
            g["ov_nodes"].append(f"{node_type}:{exec_type}")
    other = ", ".join(f"{k} {v:.2f}" for k, v in unmatched.items() if v > 0.005) or "none"
    unmatched = sum(unmatched.values())
    for g in groups:
        ops = sum(conv_ops(k.get("for")) or 0 for k in g["kernels"])
        g["ops"] = ops
        g["gops"] = ops / g["ms"] / 1e6 if ops and g["ms"] else None
        g["gap_ms"] = g["ms"] - g["ov_ms"]
    ours = sum(g["ms"] for g in groups)
    theirs = sum(g["ov_ms"] for g in groups) + unmatched + reorders
    print(f"{os.path.basename(args.model)} {args.dtype} level {args.level}, mpcaffe device "
          f"{report['device']}: whole pass {report['whole_forward_ms_median']:.2f} ms (sum of "
          f"layers {ours:.2f}, {report.get('launches_per_forward')} launches); OpenVINO sum of "
          f"nodes {theirs:.2f} ms (reorders {reorders:.2f}; in no layer of ours: {other})")
    for g in sorted(groups, key=lambda g: -g["gap_ms"])[:args.top]:
        k = g["kernels"][0] if g["kernels"] else {}
        rate = f", {g['gops']:.0f} G{'ops' if args.dtype == 'int8' else 'FLOP'}/s" \
            if g["gops"] else ""
        print(f"  {g['name']} ({g['type']}, +{len(g['layers']) - 1} fused): mpcaffe "
              f"{g['ms']:.3f} ms [{k.get('family', '-')} {k.get('config', '')} "
              f"({k.get('source', '')}){rate}] vs OpenVINO {g['ov_ms']:.3f} ms "
              f"[{', '.join(sorted(set(g['ov_nodes']))) or '-'}]: gap {g['gap_ms']:+.3f} ms")
    print("By kind:")
    for line in by_kind(groups, args.dtype, args.peak):
        print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.model, "dtype": args.dtype, "level": args.level,
                       "device": report["device"], "whole_forward_ms": report[
                           "whole_forward_ms_median"], "openvino_unmatched_ms": unmatched,
                       "openvino_reorders_ms": reorders,
                       "groups": groups}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""bench/report.py — Markdown tables and PNG bar charts from `mpcaffe bench net --json` files
(and bench/peers.py files), laid out like the paper's Tables 4.2 (storage), 4.3 (memory with and
without reduced memory), 4.4 / 4.5 (forward time per data type and backend) and Figures 4.1–4.5,
with the paper's own figures beside ours for orientation, one row per device; and from
`mpcaffe bench gemm --json` files the GEMM table per device (LibDNN in every dtype against
CLBlast) with its geometric means, and the 4-bit weights table (LibDNN fp32, int8 and int8w4).

    bench/report.py out.json [more.json ...] [peers.json ...] [gemm.json] [--markdown out.md]
                    [--gemm-markdown gemm.md] [--gemm-w4-markdown w4.md] [--plots dir]

Without --markdown the tables go to stdout (the GEMM tables too, without --gemm-markdown). Plots
need matplotlib (Agg backend, no display).
"""

import argparse
import json
import math
import os
import re
import subprocess
import sys

DTYPES = ["fp32", "fp16", "int16", "int8"]
DTYPE_LABEL = {"fp32": "FP32", "fp16": "FP16", "int16": "INT16", "int8": "INT8"}
MIB = 1024.0 * 1024.0

# The paper's figures (Tschopp 2018, chapter 4), for orientation only: other hardware, batch
# 512 for memory, GPU batch sizes for time.
PAPER_STORAGE_MIB = {
    "imagenet_caffenet": {"fp32": 243.9, "fp16": 121.9, "int16": 121.9, "int8": 61.0},
    "imagenet_caffenet_moe": {"fp32": 309.9, "fp16": 155.0, "int16": 155.0, "int8": 77.5},
}
# Table 4.3, OpenCL rows, batch 512: (no reduced memory, reduced memory) in MiB.
PAPER_MEMORY_OPENCL_MIB = {
    "imagenet_caffenet": {"fp32": (3275, 2047), "fp16": (2341, 1379), "int16": (2343, 1361),
                          "int8": (1771, 1165)},
    "imagenet_caffenet_moe": {"fp32": (6211, 3449), "fp16": (4329, 2432),
                              "int16": (4361, 2457), "int8": (3187, 1887)},
}
PAPER_MEMORY_CLAIM = 3.29  # "up to 3.29x less memory" (low precision + reduced memory)
# Tables 4.4 / 4.5: (GPU, backend, batch, fp32, fp16, int16, int8) in ms; None = n/a.
PAPER_TIME_MS = {
    "imagenet_caffenet": [
        ("nVidia GTX 1080", "CUDA", 512, 510, 22333, 2350, 565),
        ("nVidia GTX 1080", "OpenCL", 512, 728, None, 1425, 715),
        ("nVidia GT 1030", "CUDA", 64, 353, 18014, 1595, 437),
        ("nVidia GT 1030", "OpenCL", 64, 542, None, 1258, 594),
        ("AMD Vega FE", "OpenCL", 512, 863, 380, 828, 931),
        ("AMD RX 480", "OpenCL", 512, 1675, 1014, 1863, 2038),
        ("Intel Iris Pro 540", "OpenCL", 64, 1209, None, 24737, 9926),
        ("ARM Mali T764", "OpenCL", 4, 4321, 2461, 4045, 3606),
    ],
    "imagenet_caffenet_moe": [
        ("nVidia GTX 1080", "CUDA", 512, 587, 79770, 7743, 1626),
        ("nVidia GTX 1080", "OpenCL", 512, 1541, None, 4776, 2342),
        ("nVidia GT 1030", "CUDA", 64, 385, 63934, 5136, 1267),
        ("nVidia GT 1030", "OpenCL", 64, 1124, None, 3884, 1824),
        ("AMD Vega FE", "OpenCL", 512, 1353, 1017, 2433, 2797),
        ("AMD RX 480", "OpenCL", 512, 2453, 2373, 5002, 5881),
        ("Intel Iris Pro 540", "OpenCL", 64, 3600, None, 41403, 14789),
        ("ARM Mali T764", "OpenCL", 4, 2422, 1435, 5837, 6096),
    ],
}
# The paper's OpenCL Caffe built from its 2018 sources, run on PoCL on this machine kind
# (measured once; not rebuilt by make bench): AlexNet, ms; its fp16 path does not compile on PoCL.
PAPER_CODE_ON_POCL_MS = {
    ("imagenet_caffenet", 1): {"fp32": 1405, "fp16": None, "int16": 2268, "int8": 2615},
    ("imagenet_caffenet", 16): {"fp32": 19700, "fp16": None, "int16": 5400, "int8": 10300},
}
NET_TITLE = {"imagenet_caffenet": "AlexNet (paper's ImageNet)",
             "imagenet_caffenet_moe": "AlexNet-MOE (paper's ImageNet-MOE)"}


def net_key(model_path):
    """imagenet_caffenet for .../imagenet_caffenet/net_float_1.prototxt, bvlc_alexnet for
    .../bvlc_alexnet/deploy.prototxt, resnet50 for .../resnet50_deploy.prototxt; lenet for
    lenet.prototxt."""
    base = os.path.basename(model_path)
    stem = os.path.splitext(base)[0]
    if stem.startswith("net_") or stem == "deploy":
        return os.path.basename(os.path.dirname(os.path.abspath(model_path)))
    return stem[:-len("_deploy")] if stem.endswith("_deploy") else stem


def title(key):
    return NET_TITLE.get(key, key)


DEVICE_KEYS = ("device", "device_index", "backend", "platform", "platform_version",
               "driver_version", "fp16")


def load(paths):
    """Splits the inputs into bench-net rows, peer rows (each tagged with its net key) and
    `bench gemm` rows (each tagged with its device's identity keys)."""
    rows, peers, gemm = [], [], []
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        objects = doc["devices"] if "devices" in doc else [doc]
        if all("impl" in r for o in objects for r in o["results"]) and "model" not in doc:
            for o in objects:
                ident = {k: o[k] for k in DEVICE_KEYS if k in o}
                gemm += [dict(r, **ident) for r in o["results"]]
            continue
        key = net_key(doc.get("model", path))
        if doc.get("kind") == "peers":
            for r in doc["results"]:
                peers.append(dict(r, net=key))
        else:
            for r in doc["results"]:
                rows.append(dict(r, net=key))
    return rows, peers, gemm


def fmt(v, digits=1, unit=""):
    if v is None:
        return "n/a"
    if isinstance(v, float) and v >= 1000 and digits <= 1:
        return f"{v:,.0f}".replace(",", "\u202f") + unit
    return f"{v:.{digits}f}{unit}"


def table(header, body, align=None):
    align = align or ["---"] + ["---:"] * (len(header) - 1)
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in body]
    return "\n".join(out)


def nets_in(rows):
    seen = []
    for r in rows:
        if r["net"] not in seen:
            seen.append(r["net"])
    return seen


def pick(rows, **want):
    return [r for r in rows if all(r.get(k) == v for k, v in want.items())]


def first(rows, **want):
    found = pick(rows, **want)
    return found[0] if found else None


def short_device(r):
    """"PoCL", "Intel OpenCL", "CUDA <name>" or the device's name: what a row's device is called
    in tables and plots (the full name, platform and driver are listed once, under devices_note)."""
    name, platform = r.get("device", "?"), r.get("platform", "")
    if r.get("backend") == "cuda":
        return f"CUDA {name}"
    if "Portable Computing Language" in platform or name.startswith(("pthread-", "cpu-")):
        return "PoCL"
    if "Intel" in platform:
        return "Intel OpenCL"
    return name


def dev_id(r):
    """What tells devices apart in the inputs (older files lack the index)."""
    return (r.get("device_index"), r.get("device"))


def devices_in(rows):
    seen = []
    for r in rows:
        if dev_id(r) not in [dev_id(x) for x in seen]:
            seen.append(r)
    return seen


def devices_note(rows):
    lines = []
    for r in devices_in(rows):
        extra = ", ".join(x for x in (r.get("platform_version"),
                                      f"driver {r['driver_version']}"
                                      if r.get("driver_version") else None) if x)
        lines.append(f"**{short_device(r)}** = device {r.get('device_index', '?')}, "
                     f"`{r['device']}` ({r.get('backend', 'opencl')}"
                     f"{', ' + extra if extra else ''})")
    return "Devices: " + "; ".join(lines) + "." if lines else ""


def device_label(r):
    return f"{short_device(r)} ({r['backend']})"


def storage_section(rows):
    nets = nets_in(rows)
    header = ["Data type"]
    for n in nets:
        header.append(f"{title(n)}: ours")
        if n in PAPER_STORAGE_MIB:
            header.append(f"{title(n)}: paper")
    body = []
    for d in DTYPES:
        line = [DTYPE_LABEL[d]]
        present = False
        for n in nets:
            r = first(rows, net=n, dtype=d)
            present |= r is not None and r.get("storage_bytes") is not None
            line.append(f"{r['storage_bytes'] / MIB:.1f} MiB ({r['storage_bytes'] / 1e6:.1f} MB)"
                        if r and r.get("storage_bytes") else "n/a")
            if n in PAPER_STORAGE_MIB:
                line.append(fmt(PAPER_STORAGE_MIB[n][d], 1, " MiB"))
        if present:
            body.append(line)
    text = ["### Parameter storage (Table 4.2)", "",
            "Size of the caffemodel saved in each data type (weights in that type plus the "
            "quantizer ranges). The paper's figures match 10^6-byte megabytes (AlexNet's "
            "60.97 M parameters × 4 bytes = 243.9 MB = 232.6 MiB), so ours are given in both "
            "units.", "", table(header, body)]
    return "\n".join(text)


def memory_section(rows):
    out = ["### Peak device memory (Table 4.3)", "",
           "Peak device memory of the net (weights, blobs, workspaces) over one forward pass, "
           "without and with reduced memory (RM: blobs share memory by lifetime). The paper "
           "measured at batch 512 on GPUs; its OpenCL column is beside ours."]
    for n in nets_in(rows):
        nrows = pick(rows, net=n)
        batches = sorted({r["batch"] for r in nrows})
        devices = []
        for r in nrows:
            if (r["device_index"] if "device_index" in r else r["device"], r["backend"]) not in [
                    (d[0], d[1]) for d in devices]:
                devices.append((r.get("device_index", r["device"]), r["backend"], r))
        header = ["Device / data type"]
        for b in batches:
            header += [f"batch {b}: no RM", f"batch {b}: RM"]
        paper = PAPER_MEMORY_OPENCL_MIB.get(n)
        if paper:
            header += ["paper OpenCL b512: no RM", "paper: RM"]
        body = []
        for dev_id, backend, sample in devices:
            for d in DTYPES:
                line = [f"{short_device(sample)} {DTYPE_LABEL[d]}"]
                have = False
                for b in batches:
                    r = next((x for x in nrows if x.get("device_index", x["device"]) == dev_id
                              and x["batch"] == b and x["dtype"] == d), None)
                    for k in ("peak_device_bytes", "peak_device_bytes_reduced"):
                        v = r.get(k) if r else None
                        have |= v is not None
                        line.append(fmt(v / MIB, 1, " MiB") if v is not None else "n/a")
                if paper:
                    line += [f"{paper[d][0]} MiB", f"{paper[d][1]} MiB"]
                if have:
                    body.append(line)
        out += ["", f"**{title(n)}**", "", table(header, body)]
        for dev_id, backend, sample in devices:
            for b in batches:
                f32 = next((x for x in nrows if x.get("device_index", x["device"]) == dev_id
                            and x["batch"] == b and x["dtype"] == "fp32"), None)
                i8 = next((x for x in nrows if x.get("device_index", x["device"]) == dev_id
                           and x["batch"] == b and x["dtype"] == "int8"), None)
                if f32 and i8 and f32.get("peak_device_bytes") and i8.get(
                        "peak_device_bytes_reduced"):
                    ratio = f32["peak_device_bytes"] / i8["peak_device_bytes_reduced"]
                    out.append("")
                    out.append(f"{device_label(sample)}, batch {b}: fp32 without RM / int8 with "
                               f"RM = **{ratio:.2f}×** less memory (the paper claims "
                               f"{PAPER_MEMORY_CLAIM}×).")
    return "\n".join(out)


def time_section(rows, peers):
    out = ["### Forward time (Tables 4.4 / 4.5)", "",
           "Median wall time of one forward pass (min–max over the iterations in brackets), "
           "synthetic input, after a warm-up pass."]
    for n in nets_in(rows):
        nrows = pick(rows, net=n)
        header = ["Device", "Backend", "Batch"] + [DTYPE_LABEL[d] for d in DTYPES] + [
            "INT8 vs FP32"]
        body = []
        keys = []
        for r in nrows:
            k = (r.get("device_index", r["device"]), r["batch"])
            if k not in keys:
                keys.append(k)
        for dev_id, b in keys:
            sample = next(x for x in nrows if x.get("device_index", x["device"]) == dev_id
                          and x["batch"] == b)
            line = [short_device(sample), sample["backend"], b]
            ms = {}
            for d in DTYPES:
                r = next((x for x in nrows if x.get("device_index", x["device"]) == dev_id
                          and x["batch"] == b and x["dtype"] == d), None)
                if r:
                    ms[d] = r["forward_ms_median"]
                    line.append(f"{r['forward_ms_median']:.1f} ms ({r['forward_ms_min']:.1f}–"
                                f"{r['forward_ms_max']:.1f})")
                else:
                    line.append("n/a")
            line.append(f"{ms['fp32'] / ms['int8']:.2f}×" if "fp32" in ms and "int8" in ms
                        else "n/a")
            body.append(line)
        out += ["", f"**{title(n)}** — mpcaffe on this machine", "",
                table(header, body, ["---", "---", "---:"] + ["---:"] * 5)]
        pocl = [(b, v) for (k, b), v in PAPER_CODE_ON_POCL_MS.items() if k == n]
        if pocl:
            body = [["paper's OpenCL Caffe (2018 sources) on PoCL, this machine kind", b] +
                    [fmt(v[d] / 1.0, 0, " ms") if v[d] else "does not compile" for d in DTYPES]
                    for b, v in sorted(pocl)]
            out += ["", "For orientation, the paper's own code (its OpenCL implementation) on "
                        "this machine kind:",
                    "", table(["Code", "Batch"] + [DTYPE_LABEL[d] for d in DTYPES], body,
                              ["---", "---:"] + ["---:"] * 4)]
            speedups = []
            pocl_rows = [r for r in nrows if short_device(r) == "PoCL"]
            for b, v in sorted(pocl):
                for d in DTYPES:
                    r = first(pocl_rows, batch=b, dtype=d)
                    if r and v[d]:
                        speedups.append(f"{DTYPE_LABEL[d]} b{b} {v[d] / r['forward_ms_median']:.1f}×")
            if speedups:
                out += ["", "mpcaffe on PoCL vs the paper's code on PoCL: " + ", ".join(speedups)
                        + "."]
        if n in PAPER_TIME_MS:
            body = [[g, be, b] + [fmt(float(x), 0, " ms") if x else "n/a" for x in t]
                    for g, be, b, *t in PAPER_TIME_MS[n]]
            out += ["", f"The paper's Table {'4.4' if n == 'imagenet_caffenet' else '4.5'} "
                    "(GPUs, for orientation):", "",
                    table(["GPU", "Backend", "Batch"] + [DTYPE_LABEL[d] for d in DTYPES], body,
                          ["---", "---", "---:"] + ["---:"] * 4)]
        npeers = pick(peers, net=n)
        if npeers:
            out += ["", peers_table(n, npeers)]
    return "\n".join(out)


def peers_table(n, npeers):
    header = ["Engine", "mpcaffe device", "Data type", "Batch", "CPU level (peer / mpcaffe)",
              "Peer ms (min–max)", "mpcaffe ms", "mpcaffe / peer"]
    body = []
    for r in npeers:
        peer = r["engine"] if "clblast" not in r["engine"] else \
            f"{r['engine']} on {short_device(r)}" if r.get("device") else r["engine"]
        body.append([peer, short_device(r) if r.get("device") else "default",
                     DTYPE_LABEL.get(r["dtype"], r["dtype"]), r["batch"],
                     f"{r.get('cpu_level', 'n/a')} / {r.get('ours_cpu_level', 'n/a')}",
                     f"{r['forward_ms_median']:.1f} ({r['forward_ms_min']:.1f}–"
                     f"{r['forward_ms_max']:.1f})",
                     fmt(r.get("ours_ms_median"), 1),
                     f"{r['ours_ms_median'] / r['forward_ms_median']:.2f}×"
                     if r.get("ours_ms_median") else "n/a"])
    return "\n".join([f"Peers measured back to back with mpcaffe (bench/peers.py), {title(n)}; "
                      "a ratio below 1 means mpcaffe is faster:", "",
                      table(header, body, ["---", "---", "---", "---:", "---", "---:", "---:",
                                           "---:"])])


def setup_section(rows):
    header = ["Net", "Device", "Batch", "Data type", "cold cache", "warm cache", "cold / warm"]
    body = []
    for r in rows:
        c, w = r.get("setup_cold_s"), r.get("setup_warm_s")
        if c is None or w is None:
            continue
        body.append([title(r["net"]), short_device(r), r["batch"], DTYPE_LABEL[r["dtype"]],
                     f"{c:.2f} s", f"{w:.2f} s", f"{c / w:.1f}×"])
    if not body:
        return ""
    return "\n".join(["### Set-up time, cold vs warm kernel cache", "",
                      "A fresh process builds the net from its prototxt and caffemodel and runs "
                      "one forward pass: first with empty kernel caches (mpcaffe's and PoCL's; "
                      "Intel's CPU runtime keeps none of its own), then again with both warm. Both include reading and converting the "
                      "caffemodel (233 MiB in fp32), which is most of the warm time.", "",
                      table(header, body, ["---", "---", "---:", "---", "---:", "---:", "---:"])])


# ---- GEMM (`mpcaffe bench gemm --json`) ----

ALEXNET_GEMMS = [(96, 3025, 363), (256, 729, 1200), (384, 169, 2304), (4096, 64, 9216),
                 (4096, 1, 9216)]


def geomean(values):
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def gemm_ratios(gemm, device):
    """Per AlexNet shape: {column: GFLOP/s} of one device, and the geometric means."""
    drows = [r for r in gemm if dev_id(r) == dev_id(device)]

    def gf(impl, dtype, shape):
        r = first(drows, impl=impl, dtype=dtype, M=shape[0], N=shape[1], K=shape[2])
        return r["gflops"] if r else None

    shapes = []
    for s in ALEXNET_GEMMS:
        v = {f"{impl} {d}": gf(impl, d, s) for impl in ("libdnn", "clblast") for d in DTYPES}
        shapes.append((s, v))

    def ratio(num, den):
        return geomean([v[num] / v[den] for _, v in shapes if v[num] and v[den]])

    means = {"fp32/clblast": ratio("libdnn fp32", "clblast fp32"),
             "fp16/clblast fp16": ratio("libdnn fp16", "clblast fp16"),
             "int8/fp32": ratio("libdnn int8", "libdnn fp32"),
             "int16/fp32": ratio("libdnn int16", "libdnn fp32"),
             "fp16/fp32": ratio("libdnn fp16", "libdnn fp32")}
    return shapes, means


def gemm_section(gemm):
    """The GEMM table, one row per device × AlexNet shape, and the geometric means per device."""
    devices = devices_in(gemm)
    header = ["Device", "Shape (M×N×K)", "LibDNN FP32", "LibDNN FP16", "LibDNN INT16",
              "LibDNN INT8", "CLBlast FP32", "CLBlast FP16", "FP32 / CLBlast", "INT8 / FP32"]
    body, summary = [], []
    for dev in devices:
        shapes, means = gemm_ratios(gemm, dev)
        for (m, n, k), v in shapes:
            f32, c32, i8 = v["libdnn fp32"], v["clblast fp32"], v["libdnn int8"]
            body.append([short_device(dev), f"{m}×{n}×{k}"] +
                        [fmt(v[f"libdnn {d}"]) for d in ("fp32", "fp16", "int16", "int8")] +
                        [fmt(c32), fmt(v["clblast fp16"]) if v["clblast fp16"] else "n/a" +
                         ("" if dev.get("fp16", True) else " (no cl_khr_fp16)"),
                         f"{f32 / c32:.2f}×" if f32 and c32 else "n/a",
                         f"{i8 / f32:.2f}×" if f32 and i8 else "n/a"])
        body.append([f"**{short_device(dev)}**", "geometric mean", "", "", "", "", "", "",
                     f"**{fmt(means['fp32/clblast'], 2)}×**", f"**{fmt(means['int8/fp32'], 2)}×**"])
        summary.append(
            f"- {short_device(dev)}: LibDNN fp32 / CLBlast fp32 = **{fmt(means['fp32/clblast'], 2)}×**"
            f", LibDNN int8 / LibDNN fp32 = **{fmt(means['int8/fp32'], 2)}×**, int16 / fp32 = "
            f"{fmt(means['int16/fp32'], 2)}×, fp16 / fp32 = {fmt(means['fp16/fp32'], 2)}×"
            + (f", LibDNN fp16 / CLBlast fp16 = {fmt(means['fp16/clblast fp16'], 2)}×"
               if means["fp16/clblast fp16"] else ", no CLBlast fp16 (the device lacks "
               "cl_khr_fp16)" if not dev.get("fp16", True) else "")
            + " (geometric means over the five AlexNet GEMM shapes).")
    text = ["GFLOP/s (GOP/s for the integer types) per device on the five AlexNet GEMM shapes, "
            "each device's figures measured side by side in one `mpcaffe bench gemm --device "
            "all` run; CLBlast runs on every OpenCL device as the BLAS peer.", "",
            table(header, body, ["---", "---"] + ["---:"] * 8), "", *summary]
    note = devices_note(gemm)
    if note:
        text += ["", note]
    return "\n".join(text)


def gemm_w4_section(gemm):
    """The 4-bit weights table: ms of LibDNN fp32, int8 and int8w4 per device on the AlexNet
    shapes, and int8's time over int8w4's (above 1: the 4-bit weights are faster); "" when the
    inputs hold no int8w4 rows (files written before `bench gemm` measured them)."""
    if not any(r.get("dtype") == "int8w4" for r in gemm):
        return ""
    devices = [d for d in devices_in(gemm)
               if any(r.get("dtype") == "int8w4" and dev_id(r) == dev_id(d) for r in gemm)]
    header = ["shape (M × N × K)"]
    for dev in devices:
        header += [f"{short_device(dev)} fp32 / int8 / int8w4 (ms)", "int8 / int8w4"]
    body, ratios = [], {dev_id(d): [] for d in devices}
    for m, n, k in ALEXNET_GEMMS:
        line = [f"{m} × {n} × {k}"]
        for dev in devices:
            drows = [r for r in gemm if dev_id(r) == dev_id(dev) and r.get("impl") == "libdnn"]
            ms = {d: (first(drows, dtype=d, M=m, N=n, K=k) or {}).get("ms")
                  for d in ("fp32", "int8", "int8w4")}
            line.append(" / ".join(fmt(ms[d], 2 if ms[d] < 10 else 1) if ms[d] else "n/a"
                                   for d in ms))
            if ms["int8"] and ms["int8w4"]:
                ratios[dev_id(dev)].append(ms["int8"] / ms["int8w4"])
                line.append(f"{ms['int8'] / ms['int8w4']:.2f}")
            else:
                line.append("n/a")
        body.append(line)
    body.append(["geometric mean"] + [x for d in devices
                                      for x in ("", f"**{fmt(geomean(ratios[dev_id(d)]), 2)}**")])
    return ("Wall ms of one GEMM (best of the `bench gemm` repeats) with LibDNN's fp32, int8 and "
            "int8w4 (int8 activations, symmetric 4-bit weights packed two per byte) kernels, "
            "measured side by side in the same run as the GEMM table.\n\n"
            + table(header, body, ["---"] + ["---:"] * (2 * len(devices))))


# ---- Plots ----

# The CPU engines drawn beside mpcaffe: their label and bar colour.
PLOT_PEERS = {"onnxruntime": ("ONNX Runtime", "0.6"), "openvino": ("OpenVINO", "0.35")}

def plots(rows, peers, outdir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(outdir, exist_ok=True)
    written = []
    nets = nets_in(rows)

    # Figure 4.1: storage per data type, ours (and the paper's, hatched).
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.8 / max(1, len(nets) * 2)
    for i, n in enumerate(nets):
        vals = [(first(rows, net=n, dtype=d) or {}).get("storage_bytes") for d in DTYPES]
        xs = [j + (2 * i) * width for j in range(len(DTYPES))]
        ax.bar(xs, [v / MIB if v else 0 for v in vals], width, label=f"{title(n)}: mpcaffe")
        if n in PAPER_STORAGE_MIB:
            ax.bar([x + width for x in xs], [PAPER_STORAGE_MIB[n][d] for d in DTYPES], width,
                   hatch="//", fill=False, label=f"{title(n)}: paper")
    ax.set_xticks([j + width * (len(nets) - 0.5) for j in range(len(DTYPES))])
    ax.set_xticklabels([DTYPE_LABEL[d] for d in DTYPES])
    ax.set_ylabel("MiB")
    ax.set_title("Network parameter storage (cf. paper Fig. 4.1)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(outdir, "storage.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)

    # Figures 4.2 / 4.3: memory without / with reduced memory, per net and batch.
    for n in nets:
        nrows = pick(rows, net=n)
        batches = sorted({r["batch"] for r in nrows})
        fig, ax = plt.subplots(figsize=(7, 4))
        series = [(b, k) for b in batches for k in ("peak_device_bytes",
                                                     "peak_device_bytes_reduced")]
        width = 0.8 / len(series)
        for i, (b, k) in enumerate(series):
            vals = [(first(nrows, batch=b, dtype=d) or {}).get(k) for d in DTYPES]
            ax.bar([j + i * width for j in range(len(DTYPES))],
                   [v / MIB if v else 0 for v in vals], width,
                   label=f"batch {b}" + (", RM" if k.endswith("reduced") else ""),
                   hatch="//" if k.endswith("reduced") else None)
        ax.set_xticks([j + width * (len(series) - 1) / 2 for j in range(len(DTYPES))])
        ax.set_xticklabels([DTYPE_LABEL[d] for d in DTYPES])
        ax.set_ylabel("peak device memory (MiB)")
        ax.set_title(f"{title(n)}: memory, {short_device(nrows[0])} (cf. paper Fig. 4.2/4.3)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(outdir, f"memory_{n}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    # Figures 4.4 / 4.5 (and 4.6): throughput per data type, linear and log scale, with the
    # ONNX Runtime and OpenVINO peers as extra bars when present.
    for n in nets:
        nrows = pick(rows, net=n)
        npeers = [p for p in pick(peers, net=n) if p["engine"] in PLOT_PEERS]
        groups = []
        for r in nrows:
            k = (r.get("device_index", r["device"]), r["batch"])
            if k not in [g[0] for g in groups]:
                groups.append((k, f"{short_device(r)} b{r['batch']}"))
        for log in (False, True):
            fig, ax = plt.subplots(figsize=(8, 4.5))
            series = [("mpcaffe", d) for d in DTYPES] + [
                (e, d) for e in PLOT_PEERS for d in ("fp32", "int8")
                if pick(npeers, engine=e, dtype=d)]
            width = 0.8 / len(series)
            for i, (engine, d) in enumerate(series):
                vals = []
                for (dev_id, b), _ in groups:
                    if engine == "mpcaffe":
                        r = next((x for x in nrows if x.get("device_index", x["device"]) == dev_id
                                  and x["batch"] == b and x["dtype"] == d), None)
                        vals.append(r["images_per_s"] if r else 0)
                    else:
                        p = first(npeers, engine=engine, batch=b, dtype=d)
                        vals.append(b * 1000.0 / p["forward_ms_median"] if p else 0)
                ax.bar([j + i * width for j in range(len(groups))], vals, width,
                       label=f"{engine} {DTYPE_LABEL[d]}",
                       hatch="//" if engine != "mpcaffe" else None)
            ax.set_xticks([j + width * (len(series) - 1) / 2 for j in range(len(groups))])
            ax.set_xticklabels([g[1] for g in groups], fontsize=8)
            ax.set_ylabel("images / s" + (" (log scale)" if log else ""))
            if log:
                ax.set_yscale("log")
            ax.set_title(f"{title(n)}: throughput (cf. paper Fig. "
                         f"{'4.5' if log else '4.4'})")
            ax.legend(fontsize=7)
            fig.tight_layout()
            path = os.path.join(outdir, f"throughput_{n}{'_log' if log else ''}.png")
            fig.savefig(path, dpi=110)
            plt.close(fig)
            written.append(path)

    written.append(device_plot(plt, rows, peers, outdir))
    return written


def device_plot(plt, rows, peers, outdir):
    """images/s per device × dtype: one panel per net, dtype groups on x, one bar per device and
    batch (batch 16 hatched), ONNX Runtime and OpenVINO on the same CPU in greys where they run
    the net."""
    nets = nets_in(rows)
    fig, axes = plt.subplots(1, len(nets), figsize=(6.2 * len(nets), 4.6), squeeze=False)
    colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"]
    for ax, n in zip(axes[0], nets):
        nrows = pick(rows, net=n)
        batches = sorted({r["batch"] for r in nrows})
        devices = devices_in(nrows)
        npeers = pick(peers, net=n)
        series = [(dev, b) for dev in devices for b in batches]
        ort = [(e, b) for e in PLOT_PEERS for b in batches if pick(npeers, engine=e, batch=b)]
        width = 0.84 / (len(series) + len(ort))
        for i, (dev, b) in enumerate(series):
            vals = []
            for d in DTYPES:
                r = next((x for x in nrows if dev_id(x) == dev_id(dev) and x["batch"] == b
                          and x["dtype"] == d), None)
                vals.append(r["images_per_s"] if r else 0)
            bars = ax.bar([j + i * width for j in range(len(DTYPES))], vals, width,
                          color=colors[devices.index(dev) % len(colors)],
                          hatch="//" if b != batches[0] else None, edgecolor="white",
                          label=f"{short_device(dev)}, batch {b}")
            ax.bar_label(bars, fmt="%.0f", fontsize=6, padding=1)
        for i, (e, b) in enumerate(ort):
            vals = []
            for d in DTYPES:
                p = first(npeers, engine=e, batch=b, dtype=d)
                vals.append(b * 1000.0 / p["forward_ms_median"] if p else 0)
            bars = ax.bar([j + (len(series) + i) * width for j in range(len(DTYPES))], vals,
                          width, color=PLOT_PEERS[e][1], hatch="//" if b != batches[0] else None,
                          edgecolor="white", label=f"{PLOT_PEERS[e][0]} (CPU), batch {b}")
            ax.bar_label(bars, labels=[f"{v:.0f}" if v else "" for v in vals], fontsize=6,
                         padding=1)
        total = len(series) + len(ort)
        ax.set_xticks([j + width * (total - 1) / 2 for j in range(len(DTYPES))])
        ax.set_xticklabels([DTYPE_LABEL[d] for d in DTYPES])
        ax.set_ylabel("images / s")
        ax.set_title(f"{title(n)}", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
        ax.legend(fontsize=7)
    fig.suptitle("Forward throughput per device and data type (mpcaffe bench net)", fontsize=11)
    fig.tight_layout()
    path = os.path.join(outdir, "images_per_s_by_device.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def emit(text, path):
    """Writes `text` to the file `path`, or to standard output when `path` is empty."""
    if path:
        with open(path, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


def table_parser(doc, work=None):
    """The command line the table scripts of `make bench` share (setup_tables.py,
    accuracy_tables.py, small_net.py, fusion_table.py): --mpcaffe, --devices, --work (when the
    script has a work folder, default `work`), --json, --from and --markdown; the script adds its
    own. Parse with parse_table_args."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--mpcaffe", default="build/bin/mpcaffe")
    ap.add_argument("--devices", default="0,1")
    if work:
        ap.add_argument("--work", default=work)
    ap.add_argument("--json", help="write the measurements here")
    ap.add_argument("--from", dest="source", help="the tables from an earlier --json file")
    ap.add_argument("--markdown", help="write the tables here (default: stdout)")
    return ap


def parse_table_args(ap):
    """table_parser's arguments, the mpcaffe binary and the work folder made absolute (the
    scripts run commands in other folders)."""
    args = ap.parse_args()
    args.mpcaffe = os.path.abspath(args.mpcaffe) if os.sep in args.mpcaffe else args.mpcaffe
    if getattr(args, "work", None):
        args.work = os.path.abspath(args.work)
    return args


def mpcaffe_device_label(mpcaffe, device):
    """'<implementation> (<name>)' from `mpcaffe devices`' row of the device (by index or
    selector), else the device as given."""
    out = subprocess.run([mpcaffe, "devices"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        cols = re.split(r"\s{2,}", line.strip())
        if len(cols) > 3 and (cols[0] == str(device) or cols[2] == str(device)):
            return f"{cols[2]} ({cols[3]})"
    return str(device)


def measured_table(args, measure, markdown):
    """The table scripts of `make bench` (setup_tables.py, accuracy_tables.py): the measurements
    of --from's JSON file, else `measure(args)`'s (saved to --json when given), written by
    `markdown(data)` to --markdown or standard output."""
    if args.source:
        with open(args.source) as f:
            data = json.load(f)
    else:
        data = measure(args)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(data, f, indent=1)
    emit(markdown(data), args.markdown)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+", help="bench net --json files and bench/peers.py files")
    ap.add_argument("--markdown", help="write the tables here (default: stdout)")
    ap.add_argument("--gemm-markdown",
                    help="write the GEMM tables here (default: with the others)")
    ap.add_argument("--gemm-w4-markdown",
                    help="write the 4-bit weights GEMM table here (default: with the others)")
    ap.add_argument("--plots", help="directory for the PNG charts")
    ap.add_argument("--plot-prefix", default="",
                    help="how the Markdown refers to the plot directory (default: --plots)")
    args = ap.parse_args(argv)
    rows, peers, gemm = load(args.inputs)
    if not rows and not gemm:
        ap.error("no bench net or bench gemm results in the inputs")
    gemm_text = gemm_section(gemm) + "\n" if gemm else ""
    w4_text = gemm_w4_section(gemm) + "\n" if gemm_w4_section(gemm) else ""
    if args.gemm_markdown:
        with open(args.gemm_markdown, "w") as f:
            f.write(gemm_text)
    elif gemm_text:
        sys.stdout.write(gemm_text + "\n")
    if args.gemm_w4_markdown:
        with open(args.gemm_w4_markdown, "w") as f:
            f.write(w4_text)
    elif w4_text:
        sys.stdout.write(w4_text + "\n")
    if not rows:
        return 0
    parts = [devices_note(rows), storage_section(rows), memory_section(rows),
             time_section(rows, peers), setup_section(rows)]
    if args.plots:
        written = plots(rows, peers, args.plots)
        prefix = args.plot_prefix or args.plots
        parts.append("### Plots\n\n" + "\n".join(
            f"![{os.path.basename(p)}]({os.path.join(prefix, os.path.basename(p))})"
            for p in written))
    emit("\n\n".join(p for p in parts if p) + "\n", args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())

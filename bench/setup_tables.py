#!/usr/bin/env python3
"""bench/setup_tables.py — the start-up and memory tables of docs/BENCHMARKS.md ("Net start-up,
cold and warm" and "Peak memory and parameter storage"), measured and written as Markdown for
scripts/bench.sh's `startup` and `memory` steps.

    bench/setup_tables.py startup --mpcaffe M --model int8.prototxt --devices 0,1 --json out.json
                                  [--cold 2] [--warm 7] [--markdown out.md]
    bench/setup_tables.py memory --mpcaffe M --model fp32.prototxt --devices 0,1 --json out.json
                                 [--markdown out.md]
    bench/setup_tables.py binaries --mpcaffe M --model int8.prototxt --devices pocl --json out.json
                                   [--markdown out.md]
    bench/setup_tables.py startup|memory|binaries --from out.json --markdown out.md   (tables only)

startup: per device, `mpcaffe time --model M --synthetic --iterations 1` as whole processes,
timed from outside: `--cold` runs each with an empty kernel cache and PoCL's own cache off and
empty (the first time a user runs the net), then one run that fills PoCL's cache (not counted)
and `--warm` runs with both caches warm; the cold runs, the median of the warm ones and their
ratio. memory: `mpcaffe bench net --dtypes fp32,int8,int8w4 --batch 1 --reduced-memory both
--iterations 1 --no-setup` per device: caffemodel size and peak device memory with and without
reduced memory per data type. binaries: on the first of --devices (PoCL: the runtime whose
binaries cost compiles), four `mpcaffe time` processes in a row from empty caches with PoCL's own
cache on, for each `MPCAFFE_BINARIES` mode (auto: a program's binary stored at its text's second
build; always: at the first).
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import (measured_table, mpcaffe_device_label, parse_table_args,  # noqa: E402
                    table_parser)

MIB = 1024.0 * 1024.0


def run_timed(cmd, env):
    """Wall seconds of one process (its output discarded); raises when it fails."""
    start = time.monotonic()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.monotonic() - start


def measure_startup(args):
    rows = []
    for device in args.devices.split(","):
        cmd = [args.mpcaffe, "time", "--model", args.model, "--synthetic", "--iterations", "1",
               "--device", device]
        work = tempfile.mkdtemp(prefix="mpcaffe_startup_")
        try:
            env = dict(os.environ, MPCAFFE_CACHE=os.path.join(work, "kernels.sqlite"),
                       POCL_CACHE_DIR=os.path.join(work, "pocl"))
            cold = []
            for _ in range(args.cold):
                for name in os.listdir(work):
                    path = os.path.join(work, name)
                    shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
                cold.append(run_timed(cmd, dict(env, POCL_KERNEL_CACHE="0")))
            run_timed(cmd, env)  # fills PoCL's own cache (the cold runs had it off)
            warm = [run_timed(cmd, env) for _ in range(args.warm)]
        finally:
            shutil.rmtree(work, ignore_errors=True)
        rows.append({"device": device, "name": mpcaffe_device_label(args.mpcaffe, device),
                     "cold_s": cold, "warm_s": warm})
        print(f"startup {device}: cold {cold}, warm median {statistics.median(warm):.3f} s",
              file=sys.stderr)
    return {"model": args.model, "rows": rows}


def measure_binaries(args):
    device = args.devices.split(",")[0]
    cmd = [args.mpcaffe, "time", "--model", args.model, "--synthetic", "--iterations", "1",
           "--device", device]
    rows = []
    for mode in ("auto", "always"):
        work = tempfile.mkdtemp(prefix="mpcaffe_binaries_")
        try:
            env = dict(os.environ, MPCAFFE_BINARIES=mode, POCL_KERNEL_CACHE="1",
                       MPCAFFE_CACHE=os.path.join(work, "kernels.sqlite"),
                       POCL_CACHE_DIR=os.path.join(work, "pocl"))
            runs = [run_timed(cmd, env) for _ in range(4)]
        finally:
            shutil.rmtree(work, ignore_errors=True)
        rows.append({"mode": mode, "runs_s": runs})
        print(f"binaries {mode} on {device}: {runs}", file=sys.stderr)
    return {"model": args.model, "device": device,
            "name": mpcaffe_device_label(args.mpcaffe, device), "rows": rows}


def binaries_markdown(data):
    what = {"auto": "`auto` (default): stored at a text's second build",
            "always": "`always`: stored at the first build"}
    lines = [f"Device {data['name']}, PoCL's own cache on, every cache empty before run 1.", "",
             "| `MPCAFFE_BINARIES` | run 1 (cold) | run 2 | runs 3, 4 | runs 1 + 2 |",
             "|---|---:|---:|---:|---:|"]
    for r in data["rows"]:
        t = r["runs_s"]
        lines.append(f"| {what.get(r['mode'], r['mode'])} | {t[0]:.1f} s | {t[1]:.1f} s | "
                     f"{t[2]:.2f}, {t[3]:.2f} s | {t[0] + t[1]:.1f} s |")
    return "\n".join(lines) + "\n"


def measure_memory(args):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([args.mpcaffe, "bench", "net", "--model", args.model, "--dtypes",
                        "fp32,int8,int8w4", "--batch", "1", "--reduced-memory", "both",
                        "--iterations", "1", "--no-setup", "--no-progress", "--device",
                        args.devices, "--json", out.name], check=True, stdout=sys.stderr)
        report = json.load(open(out.name))
    return {"model": args.model, "rows": report["results"]}


def startup_markdown(data):
    lines = ["| device | cold (s) | warm (s) | cold / warm |", "|---|---|---|---:|"]
    for r in data["rows"]:
        warm = statistics.median(r["warm_s"])
        cold = ", ".join(f"{c:.2f}" for c in r["cold_s"])
        lo, hi = min(r["cold_s"]) / warm, max(r["cold_s"]) / warm
        ratio = f"{lo:.1f}×" if abs(hi - lo) < 0.05 else f"{lo:.1f}–{hi:.1f}×"
        lines.append(f"| {r['name']} | {cold} | {min(r['warm_s']):.2f}–{max(r['warm_s']):.2f}, "
                     f"median {warm:.2f} | **{ratio}** |")
    return "\n".join(lines) + "\n"


def memory_markdown(data):
    dtypes = ["fp32", "int8", "int8w4"]
    devices = []
    for r in data["rows"]:
        if r["device_index"] not in [d for d, _ in devices]:
            devices.append((r["device_index"], f"{r['platform']}: {r['device']}"))
    lines = []
    for index, name in devices:
        rows = {r["dtype"]: r for r in data["rows"] if r["device_index"] == index}
        mib = lambda r, k: f"{r[k] / MIB:.1f} MiB" if r and r.get(k) else "n/a"
        lines += [f"Device {index} ({name}):", "", "| | " + " | ".join(dtypes) + " |",
                  "|---|" + "---:|" * len(dtypes)]
        for label, key in (("caffemodel", "storage_bytes"),
                           ("peak, no reduced memory", "peak_device_bytes"),
                           ("peak, reduced memory", "peak_device_bytes_reduced")):
            lines.append(f"| {label} | " + " | ".join(mib(rows.get(d), key) for d in dtypes) + " |")
        f32, w4 = rows.get("fp32"), rows.get("int8w4")
        if f32 and w4 and f32.get("storage_bytes") and w4.get("storage_bytes"):
            lines += ["", f"int8w4's caffemodel is {f32['storage_bytes'] / w4['storage_bytes']:.1f}× "
                      "smaller than fp32's."]
        lines.append("")
    return "\n".join(lines)


def main():
    ap = table_parser(__doc__)
    ap.add_argument("table", choices=["startup", "memory", "binaries"])
    ap.add_argument("--model")
    ap.add_argument("--cold", type=int, default=2)
    ap.add_argument("--warm", type=int, default=7)
    args = parse_table_args(ap)
    if not args.source and not args.model:
        ap.error("--model is needed to measure (or --from to tabulate)")
    measure, markdown = {"startup": (measure_startup, startup_markdown),
                         "memory": (measure_memory, memory_markdown),
                         "binaries": (measure_binaries, binaries_markdown)}[args.table]
    measured_table(args, measure, markdown)


if __name__ == "__main__":
    main()

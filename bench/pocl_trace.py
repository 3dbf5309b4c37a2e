#!/usr/bin/env python3
"""bench/pocl_trace.py — each kernel's time inside a whole pass on PoCL, with no Finish between
layers: `mpcaffe bench net` runs the net with PoCL's event trace on (POCL_TRACING=text, which
PoCL writes to pocl_trace_events.log in the working folder), and the trace's last passes give,
per kernel of the pass, the median of its running → complete time and of the gap since the
kernel before it completed (PoCL's own cost between two commands). `mpcaffe time`'s per-layer
figures end each layer in a Finish (about 30 µs on PoCL); these do not.

The trace is written by the host thread, so the kernels that run while the host still enqueues
the pass run beside it and read slower than the later ones; compare binaries or settings in
the same run, not with figures from elsewhere.

  python3 bench/pocl_trace.py --model <prototxt> [--dtype int8] [--device <PoCL's index>]
      [--iterations 30] [--passes 15] [--mpcaffe build/bin/mpcaffe] [--reduced-memory on|off]
      [--by-name] [--json F]
"""
import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile


def read_trace(path):
    """The trace's kernel commands in order: [(name, running ns, complete ns, queued ns,
    submitted ns)]."""
    events = {}
    with open(path) as f:
        for line in f:
            parts = [p.strip() for p in line.split("|")]
            if len(parts) < 6 or not parts[0].isdigit() or parts[4] != "ndrange_kernel":
                continue
            event = events.setdefault(int(parts[1].split()[2]), {})
            event[parts[5]] = int(parts[0])
            for p in parts[6:]:
                if p.startswith("name="):
                    event["name"] = p[5:]
    return [(e["name"], e["running"], e["complete"], e.get("queued", e["running"]),
             e.get("submitted", e["running"]))
            for _, e in sorted(events.items()) if "name" in e and "running" in e and "complete" in e]


def pass_length(names):
    """The shortest L whose last three blocks of L kernel names are the same sequence."""
    for length in range(1, len(names) // 3 + 1):
        if names[-length:] == names[-2 * length:-length] == names[-3 * length:-2 * length]:
            return length
    raise SystemExit("pocl_trace: no repeating pass in the trace (too few --iterations?)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--dtype", default="int8")
    ap.add_argument("--device", default="1", help="mpcaffe's index of the PoCL device")
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--passes", type=int, default=15, help="the last passes taken")
    ap.add_argument("--mpcaffe", default=os.path.join(os.path.dirname(__file__), "..", "build",
                                                      "bin", "mpcaffe"))
    ap.add_argument("--reduced-memory", choices=["on", "off"], default="on",
                    help="bench net's --reduced-memory (on, as bench/peers.py times the nets)")
    ap.add_argument("--by-name", action="store_true", help="sum the kernels of each name")
    ap.add_argument("--json", help="write the per-kernel figures here")
    args = ap.parse_args()

    binary = os.path.abspath(args.mpcaffe)
    model = os.path.abspath(args.model)
    with tempfile.TemporaryDirectory(prefix="pocl-trace-") as work:
        env = dict(os.environ, POCL_TRACING="text")
        run = subprocess.run([binary, "bench", "net", "--model", model, "--dtypes", args.dtype,
                              "--batch", "1", "--device", args.device,
                              "--reduced-memory", args.reduced_memory,
                              "--iterations", str(args.iterations), "--no-setup", "--no-progress"],
                             cwd=work, env=env, capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit("pocl_trace: mpcaffe bench net failed:\n" + run.stderr)
        trace = os.path.join(work, "pocl_trace_events.log")
        if not os.path.exists(trace):
            sys.exit("pocl_trace: no pocl_trace_events.log: is device %s PoCL?" % args.device)
        kernels = read_trace(trace)
    names = [k[0] for k in kernels]
    length = pass_length(names)
    passes = min(args.passes, len(kernels) // length - 1)  # the first pass builds and warms
    blocks = [kernels[len(kernels) - (p + 1) * length:len(kernels) - p * length]
              for p in range(passes)]
    rows = []
    for i in range(length):
        run_us = statistics.median((b[i][2] - b[i][1]) / 1e3 for b in blocks)
        gap_us = statistics.median((b[i][1] - b[i - 1][2]) / 1e3 for b in blocks) if i else 0.0
        rows.append({"index": i, "kernel": blocks[0][i][0], "us": run_us, "gap_us": gap_us})
    span = statistics.median((b[-1][2] - b[0][1]) / 1e3 for b in blocks)
    # The host's enqueue of the pass: its first command queued to its last.
    enqueue = statistics.median((b[-1][3] - b[0][3]) / 1e3 for b in blocks)
    # What each pass pays before its first kernel runs: the host's turn-around from the pass
    # before (its last kernel complete, bench net's Finish returning, this pass's first command
    # queued) and PoCL's start of that command (submitted -> running: its threads, idle since
    # the pass before, wake up). The kernels' table has neither.
    starts = [len(kernels) - (p + 1) * length for p in range(passes)]
    turnaround = statistics.median((kernels[i][3] - kernels[i - 1][2]) / 1e3 for i in starts)
    wake = statistics.median((kernels[i][1] - kernels[i][4]) / 1e3 for i in starts)
    print("%s %s, device %s: %d kernels a pass, medians of the last %d passes: kernels %.0f us, "
          "gaps %.0f us, first start to last end %.0f us; the host enqueued the pass in %.0f us" %
          (os.path.basename(model), args.dtype, args.device, length, passes,
           sum(r["us"] for r in rows), sum(r["gap_us"] for r in rows), span, enqueue))
    print("before each pass's first kernel: %.0f us from the last kernel of the pass before to "
          "its first command queued (the host), %.0f us from submitted to running (PoCL)" %
          (turnaround, wake))
    if args.by_name:
        by = collections.OrderedDict()
        for r in rows:
            s = by.setdefault(r["kernel"], [0, 0.0, 0.0])
            s[0] += 1
            s[1] += r["us"]
            s[2] += r["gap_us"]
        for name, (n, us, gap) in sorted(by.items(), key=lambda kv: -kv[1][1]):
            print("  %-34s %3d launches %9.1f us  gaps %7.1f us" % (name, n, us, gap))
    else:
        for r in rows:
            print("  %3d %-34s %8.1f us  gap %6.1f us" % (r["index"], r["kernel"], r["us"],
                                                          r["gap_us"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": model, "dtype": args.dtype, "device": args.device,
                       "passes": passes, "span_us": span, "enqueue_us": enqueue,
                       "turnaround_us": turnaround, "first_start_us": wake,
                       "kernels": rows}, f, indent=1)


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:  # the listing piped into head: what was read is enough
        sys.stderr.close()

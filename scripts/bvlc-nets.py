#!/usr/bin/env python3
"""scripts/bvlc-nets.py FOLDER — runs every net prototxt in FOLDER the way issue 43 counts BVLC
Caffe's models/ and examples/ nets, and prints a table:

  fp32 fwd   `mpcaffe time --synthetic` (TEST phase: forward; `--stage` the first stage its TEST
             layers name, when they name one)
  fp32 train `mpcaffe time --synthetic --phase TRAIN` (forward and backward), for nets with a loss
  int8 fwd   `mpcaffe convert --dtype int8`, then `mpcaffe time --synthetic` on the typed net

Solver files (a `net:` or `base_lr:` field and no layer) are skipped. A cell says ok, FAIL (the
first line of the error follows the table) or - (not applicable). MPCAFFE names the command
(default build/bin/mpcaffe; `python -m mpcaffe` runs nets with Python layers, whose modules must be
importable: PYTHONPATH), MPCAFFE_DEVICE the device, TIMEOUT the seconds per command (default 900),
BATCH (when set) the largest batch: every batch_size, Input shape's and input_dim's first
dimension above it is lowered to it in a copy of the net (what fails at load or in a layer fails
at any batch; ImageNet nets at BVLC's batches take minutes each on a CPU).
Exit status 0 when every applicable cell is ok, 1 otherwise."""

import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path


def command():
    """The mpcaffe command as an argument list."""
    given = os.environ.get("MPCAFFE")
    if given:
        return shlex.split(given)
    return [str(Path(__file__).resolve().parent.parent / "build" / "bin" / "mpcaffe")]


def is_solver(text):
    return not re.search(r"^\s*layers?\s*\{", text, re.M) and re.search(r"^\s*(net|base_lr)\s*:", text, re.M)


def trains(text):
    """A net with a loss trains: a *Loss layer type (V1 or V2 spelling) or a loss_weight."""
    return bool(re.search(r'type:\s*"?\w*(Loss|LOSS)\b|loss_weight', text))


def test_stage(text):
    """`--stage S` for a net whose TEST-phase layers are chosen by stage (mnist_autoencoder's
    test-on-train / test-on-test), as `caffe time -phase TEST -stage S`; [] otherwise."""
    m = re.search(r'include\s*:?\s*\{[^}]*phase:\s*TEST[^}]*stage:\s*[\'"]([^\'"]+)', text)
    return ["--stage", m.group(1)] if m else []


def reduce_batch(text, batch):
    """`text` with every batch (batch_size, an Input shape's first dim, the first input_dim of
    each input) lowered to `batch` where larger."""
    low = lambda m: m.group(1) + str(min(int(m.group(2)), batch))
    text = re.sub(r"(batch_size\s*:\s*)(\d+)", low, text)
    text = re.sub(r"(shape\s*:?\s*\{\s*dim\s*:\s*)(\d+)", low, text)
    return re.sub(r"(input\s*:\s*\"[^\"]*\"\s*input_dim\s*:\s*)(\d+)", low, text)


def run(args, timeout):
    try:
        p = subprocess.run(command() + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout} s"
    if p.returncode == 0:
        return None
    lines = [l for l in (p.stderr or p.stdout).splitlines() if l.strip()]
    errors = [l for l in lines if "error" in l.lower()]
    return (errors or lines or [f"exit status {p.returncode}"])[-1].strip()


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    folder = Path(sys.argv[1])
    timeout = int(os.environ.get("TIMEOUT", "900"))
    batch = int(os.environ["BATCH"]) if os.environ.get("BATCH") else None
    rows, failures = [], []
    with tempfile.TemporaryDirectory(prefix="bvlc-nets-") as tmp:
        for path in sorted(folder.glob("*.prototxt")):
            text = path.read_text(errors="replace")
            if is_solver(text):
                continue
            if batch:
                path = Path(tmp) / path.name
                path.write_text(reduce_batch(text, batch))
            cells = {}
            stage = test_stage(text)
            cells["fp32 fwd"] = run(["time", "--model", str(path), "--synthetic", "--iterations", "1"] + stage,
                                    timeout)
            if trains(text):
                cells["fp32 train"] = run(["time", "--model", str(path), "--synthetic", "--iterations", "1",
                                           "--phase", "TRAIN"], timeout)
            typed = Path(tmp) / (path.stem + "_int8.prototxt")
            why = run(["convert", "--model", str(path), "--dtype", "int8", "--output", str(typed)], timeout)
            if why is None:
                why = run(["time", "--model", str(typed), "--synthetic", "--iterations", "1"] + stage, timeout)
            else:
                why = "convert: " + why
            cells["int8 fwd"] = why
            rows.append((path.stem, cells))
            for k, v in cells.items():
                if v is not None:
                    failures.append((path.stem, k, v))
            mark = lambda k: "-" if k not in cells else ("ok" if cells[k] is None else "FAIL")
            print(f"{path.stem:45s} {mark('fp32 fwd'):5s} {mark('fp32 train'):5s} {mark('int8 fwd'):5s}", flush=True)
    cols = ["fp32 fwd", "fp32 train", "int8 fwd"]
    print("\n| net | " + " | ".join(cols) + " |\n|---|" + "---|" * len(cols))
    for name, cells in rows:
        print(f"| {name} | " + " | ".join("-" if c not in cells else ("ok" if cells[c] is None else "FAIL")
                                          for c in cols) + " |")
    whole = sum(1 for _, cells in rows if all(v is None for v in cells.values()))
    print(f"\n{whole} of {len(rows)} nets run in every applicable column; per column: " + ", ".join(
        f"{c} {sum(1 for _, cells in rows if c in cells and cells[c] is None)}/"
        f"{sum(1 for _, cells in rows if c in cells)}" for c in cols))
    for name, col, why in failures:
        print(f"  {name} [{col}]: {why}")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""scripts/test-budget.py — make test's closing table: per CTest entry (and the Python suite),
the wall time, the programs it compiled, the programs it took from the kernel cache (hits), and
the seconds spent compiling; then each entry's slowest tests. Exits 1 when an entry compiled a
program whose text it had already compiled earlier in the run (a later compile of the same
device, options and text, begun after the first one ended: the kernel cache should have served
it).

Reads what `make test` leaves in <build>/test-cache: compiles/<entry>.log (one line per program
event, device/device.h LogProgramEvent), reports/<entry>.xml (GoogleTest's per-test times),
python.seconds (the Python suite's wall time), and CTest's Testing/Temporary/LastTest.log.

A repeat fails the run when a device built the program (Device::BuildProgram, which the run's
kernel cache serves), in any entry but those that build without the run's cache on purpose
(EXEMPT below). NVRTC compile-only checks (a target architecture, no device) have no cache: their
repeats are counted in the table, not failed.

It also keeps its table as reports/budget.json in <build>/test-cache (until the next make test),
with the machine, the date, the load average at the end, and the wall times make test wrote
(make.seconds: the whole run from make's start, install, configure and build included;
ctest.seconds: the C++ suites; <build>/install.seconds, kept outside test-cache: make's deps step): scripts/bench.sh's testcost step renders it into docs/BENCHMARKS.md.

Usage: scripts/test-budget.py [build-dir]"""
import collections
import datetime
import glob
import json
import os
import platform
import re
import sys
import xml.etree.ElementTree as ET


def entry_times(build):
    """{entry: (seconds, status)} from CTest's LastTest.log."""
    times = {}
    log = os.path.join(build, "Testing", "Temporary", "LastTest.log")
    if not os.path.exists(log):
        return times
    name = None
    with open(log, errors="replace") as f:
        for line in f:
            m = re.match(r"^\d+/\d+ Testing: (\S+)", line)
            if m:
                name = m.group(1)
                continue
            m = re.match(r"^Test time =\s*([0-9.]+) sec", line)
            if m and name:
                times[name] = [float(m.group(1)), "?"]
                continue
            if name in times and times[name][1] == "?":
                if line.startswith("Test Passed"):
                    times[name][1] = "passed"
                elif line.startswith("Test Failed"):
                    times[name][1] = "FAILED"
                elif "Skipped" in line or line.startswith("Test Skipped"):
                    times[name][1] = "skipped"
                elif line.startswith("Test "):
                    times[name][1] = line.split(":")[0].replace("Test ", "").strip() or "?"
    return {k: tuple(v) for k, v in times.items()}


# Entries whose programs are built without the run's kernel cache by design.
EXEMPT = {
    "cache": "the cache suite builds through caches of its own (and none) on purpose",
    "oclgrind": "MPCAFFE_CACHE=off: Oclgrind's program binaries are its own",
    "cuda": "the fake CUDA driver's tests build through binary stores of their own",
    "tools": "runs the command line cold and warm, with kernel caches of its own",
    "cpp_package": "the installed package's examples run with a kernel cache of their own",
}


def device_build(e):
    """Whether the event is a device's build (not an NVRTC compile-only check)."""
    return not re.match(r"^(sm|compute)_\d+$", e.target)


Event = collections.namedtuple("Event", "kind backend target hash end seconds pid kernel")


def read_events(path):
    events = []
    with open(path, errors="replace") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 8:
                continue
            kind, backend, target, h, end, seconds, pid, kernel = parts
            events.append(Event(kind, backend, target, h, float(end), float(seconds), pid, kernel))
    return events


def is_compile(e):
    """A compile from text: "compile" (its binary stored, or no store), or "compile-unstored"
    (the first build of a text on a driver whose binary costs compiles: the binary is stored at
    the text's next build, device/device.h DeviceInfo::binary_costs_compiles)."""
    return e.kind in ("compile", "compile-unstored")


def twice(events):
    """Compiles of a text already compiled, finished and stored earlier in the same entry (the
    build after an unstored one compiles again on purpose: it stores the binary)."""
    first_end = {}
    repeated = []
    for e in sorted((e for e in events if is_compile(e)), key=lambda e: e.end - e.seconds):
        start = e.end - e.seconds
        if e.hash in first_end and start >= first_end[e.hash]:
            repeated.append(e)
        elif e.kind == "compile":
            first_end[e.hash] = min(first_end.get(e.hash, e.end), e.end)
    return repeated


def test_cases(xml_path):
    """[(start, seconds, name)] of GoogleTest's XML report (its local-time timestamps)."""
    try:
        root = ET.parse(xml_path).getroot()
    except (ET.ParseError, OSError):
        return []
    cases = []
    for case in root.iter("testcase"):
        try:
            start = datetime.datetime.fromisoformat(case.get("timestamp", "")).timestamp()
            cases.append((start, float(case.get("time", "0")),
                          case.get("classname", "") + "." + case.get("name", "")))
        except ValueError:
            pass
    return cases


def compiles_per_test(cases, events):
    """{test name: programs compiled while it ran}."""
    spans = sorted(cases)
    count = collections.Counter()
    for e in events:
        if not is_compile(e):
            continue
        for start, seconds, name in spans:
            if start - 0.01 <= e.end <= start + seconds + 0.01:
                count[name] += 1
                break
    return count


def machine():
    """'<cores>-core <CPU model> (<vector level>)' of this machine."""
    model, flags = platform.processor() or "?", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    model = value.strip()
                elif key.strip() == "flags":
                    flags = set(value.split())
    except OSError:
        pass
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    return f"{os.cpu_count()}-core {model} ({isa})"


def save_report(cache, rows, python_seconds):
    """reports/budget.json: the table above, for scripts/bench.sh's testcost step."""
    def seconds(name):
        try:
            with open(os.path.join(cache, name)) as f:
                return float(f.read().strip())
        except (OSError, ValueError):
            return None

    report = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "machine": machine(), "load_average_at_end": os.getloadavg()[0],
              "make_seconds": seconds("make.seconds"), "ctest_seconds": seconds("ctest.seconds"),
              "install_seconds": seconds(os.path.join(os.pardir, "install.seconds")),
              "python_seconds": python_seconds,
              "entries": [{"entry": name, "status": status, "seconds": seconds, "compiled": c,
                           "cache_hits": l, "compile_seconds": round(cs, 1), "twice": rep}
                          for name, status, seconds, c, l, cs, rep in rows]}
    os.makedirs(os.path.join(cache, "reports"), exist_ok=True)
    with open(os.path.join(cache, "reports", "budget.json"), "w") as f:
        json.dump(report, f, indent=1)


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    cache = os.path.join(build, "test-cache")
    times = entry_times(build)
    logs = {os.path.basename(p)[:-4]: read_events(p)
            for p in glob.glob(os.path.join(cache, "compiles", "*.log"))}
    python_seconds = None
    try:
        with open(os.path.join(cache, "python.seconds")) as f:
            python_seconds = float(f.read().strip())
    except (OSError, ValueError):
        pass

    names = list(times)
    for name in sorted(logs):
        if name not in times:
            names.append(name)
    rows = []
    failures = []
    for name in names:
        events = logs.get(name, [])
        compiles = [e for e in events if is_compile(e)]
        loads = [e for e in events if e.kind == "load"]
        repeated = twice(events)
        seconds, status = times.get(name, (None, ""))
        if name == "python" and python_seconds is not None:
            seconds, status = python_seconds, "ran"
        rows.append((name, status, seconds, len(compiles), len(loads),
                     sum(e.seconds for e in compiles), len(repeated)))
        for e in repeated:
            if name in EXEMPT or not device_build(e):
                continue
            failures.append(f"{name}: compiled {e.kernel} ({e.backend}, {e.target}, text "
                            f"{e.hash}) again after compiling it earlier in the entry")

    print("Test budget (wall seconds per entry; programs compiled from text; programs taken from "
          "the kernel cache; seconds compiling; programs compiled twice):")
    print(f"  {'entry':<22} {'status':<8} {'seconds':>8} {'compiled':>9} {'cache hits':>10} "
          f"{'compile s':>10} {'twice':>6}")
    total = [0.0, 0, 0, 0.0, 0]
    for name, status, seconds, c, l, cs, rep in rows:
        s = f"{seconds:8.1f}" if seconds is not None else f"{'-':>8}"
        print(f"  {name:<22} {status:<8} {s} {c:9d} {l:10d} {cs:10.1f} {rep:6d}")
        total[0] += seconds or 0
        total[1] += c
        total[2] += l
        total[3] += cs
        total[4] += rep
    print(f"  {'total':<22} {'':<8} {total[0]:8.1f} {total[1]:9d} {total[2]:10d} {total[3]:10.1f} "
          f"{total[4]:6d}")

    save_report(cache, rows, python_seconds)

    slow = []
    for name in names:
        cases = test_cases(os.path.join(cache, "reports", name + ".xml"))
        compiled = compiles_per_test(cases, logs.get(name, []))
        for start, t, test in cases:
            slow.append((t, name, test, compiled[test]))
    slow.sort(reverse=True)
    if slow:
        print("Slowest tests (seconds, entry, programs compiled, test):")
        for t, name, test, c in slow[:12]:
            print(f"  {t:7.1f} s  {name:<22} {c:4d}  {test}")

    if failures:
        print(f"test-budget: FAILED: {len(failures)} program(s) compiled twice in one entry "
              "(share the program: Device::GetProgram, or the kernel cache):")
        for line in failures[:40]:
            print("  " + line)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

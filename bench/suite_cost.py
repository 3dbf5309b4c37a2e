#!/usr/bin/env python3
"""bench/suite_cost.py — docs/BENCHMARKS.md's "Test-suite cost" table, for scripts/bench.sh's
testcost step: what the last `make test` cost, from the report scripts/test-budget.py kept
(<build>/test-cache/reports/budget.json; bench/results/test_budget.json holds a copy).

    bench/suite_cost.py budget.json [--markdown out.md] [--header out.txt]

--header writes the line naming the run (its date, machine and load average at its end), which
the step puts in the table's header in place of the machine the bench itself runs on.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import emit, table  # noqa: E402


def minutes(seconds):
    if seconds is None:
        return "n/a"
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def markdown(report):
    entries = [e for e in report["entries"] if e.get("seconds") is not None]
    if not entries:
        raise RuntimeError("the report holds no entry with a time: was make test interrupted?")
    ctest = [e for e in entries if e["entry"] != "python"]
    longest = max(ctest, key=lambda e: e["seconds"]) if ctest else None
    whole, cpp, python = (report.get("make_seconds"), report.get("ctest_seconds"),
                          report.get("python_seconds"))
    install = report.get("install_seconds")
    # What is not the suites is make's install step (scripts/install-deps.sh: on a machine that
    # has the packages, only its check), configure and build.
    build = whole - cpp - python if None not in (whole, cpp, python) else None
    if build is not None and install is not None:
        build -= install
    summary = [["whole `make test`", minutes(whole)],
               ["install (scripts/install-deps.sh)", minutes(install)],
               ["configure and build", minutes(build)],
               ["C++ suites (CTest, two jobs)", minutes(cpp)]]
    if longest:
        summary.append([f"longest entry, {longest['entry']}", minutes(longest["seconds"])])
    summary.append(["Python suite", minutes(python)])
    rows = [[e["entry"], e["status"] or "-", f"{e['seconds']:.1f}", str(e["compiled"]),
             str(e["cache_hits"]), f"{e['compile_seconds']:.1f}"] for e in entries]
    failed = [e["entry"] for e in entries if e["status"] not in ("passed", "ran", "skipped", "-")]
    note = (f"\nNot passed in that run: {', '.join(failed)}.\n" if failed else "")
    return (table(["what", "wall time"], summary) + "\n\nPer entry (`make test`'s closing table, "
            "scripts/test-budget.py): wall seconds, programs compiled from text, programs taken "
            "from the kernel cache, seconds compiling.\n\n"
            + table(["entry", "status", "seconds", "compiled", "cache hits", "compile s"], rows,
                    ["---", "---"] + ["---:"] * 4) + "\n" + note)


def header(report):
    load = report.get("load_average_at_end")
    loaded = " (loaded)" if load is not None and load >= 2 else ""
    return (f"`make test` of {report['date']} on {report['machine']}, load average "
            f"{load:.2f} at its end{loaded}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report", help="scripts/test-budget.py's budget.json")
    ap.add_argument("--markdown", help="write the tables here (default: stdout)")
    ap.add_argument("--header", help="write the line naming the run here")
    args = ap.parse_args()
    with open(args.report) as f:
        report = json.load(f)
    emit(markdown(report), args.markdown)
    if args.header:
        emit(header(report), args.header)


if __name__ == "__main__":
    main()

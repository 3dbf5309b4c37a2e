#!/usr/bin/env bash
# scripts/ctest-devices.sh — after `ctest`, says for every per-device entry which device it ran
# on, and for every skipped entry why it did not run (CTest itself prints only "Skipped"); then
# lists every test skipped inside a suite with its reason (the "[ skipped  ]" lines of
# tests/testing/test_main.cc; gtest's brief mode hides them), so a green run shows what did not run.
# Reads <build>/Testing/Temporary/LastTest.log; usage: scripts/ctest-devices.sh [build-dir].
set -euo pipefail
log="${1:-build}/Testing/Temporary/LastTest.log"
[ -f "$log" ] || { echo "ctest-devices: no $log (run ctest first)"; exit 1; }
echo "Devices of the test run:"
awk '
  /^[0-9]+\/[0-9]+ Testing: / { name = $3; next }
  /^\[ device   \] / { sub(/^\[ device   \] /, ""); printf "  %-22s ran on %s\n", name, $0; next }
  /^SKIPPED: / { sub(/^SKIPPED: /, ""); printf "  %-22s SKIPPED: %s\n", name, $0; skipped = name; next }
  /^<end of output>/ { skipped = ""; next }
  skipped != "" { printf "  %-22s   %s\n", "", $0; next }
' "$log"
awk '
  /^[0-9]+\/[0-9]+ Testing: / { name = $3; next }
  /^\[ skipped  \] / { sub(/^\[ skipped  \] /, ""); lines[++n] = sprintf("  %-22s %s", name, $0) }
  END {
    if (n == 0) { print "Tests skipped inside the suites: none"; exit }
    print "Tests skipped inside the suites (" n "):"
    for (i = 1; i <= n; ++i) print lines[i]
  }
' "$log"

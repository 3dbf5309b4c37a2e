#!/usr/bin/env bash
# scripts/ctest-devices.sh — after `ctest`, says for every per-device entry which device it ran
# on, and for every skipped entry why it did not run (CTest itself prints only "Skipped").
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

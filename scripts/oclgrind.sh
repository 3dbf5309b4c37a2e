#!/usr/bin/env bash
# scripts/oclgrind.sh — runs every generated kernel family in every data type on small shapes
# under `oclgrind --data-races --check-api` (out-of-bounds accesses are always checked) and fails
# on any Oclgrind report, on a failed test, or when a family ran no test (`make test-oclgrind`,
# CTest entry `oclgrind`).
#
# Families: the sweep suite (tests/oclgrind: GEMM with every candidate configuration of a CPU,
# GPU and CUDA device class including the local-memory tiles and 4-bit weights, convolution with
# every candidate tile and input path plus fp32 backward, element-wise ops and conversions, the
# quantizer), and the small tests of the ordinary suites for pooling (stochastic too), LRN, the
# layers' kernels (softmax, loss, accuracy, concat, eltwise, batch norm, dropout, ...),
# gradients, MOE, and the kernel writer's helpers (local memory, barrier, float atomic add; the
# pair and byte-pair products in each form of their x86 branches).
#
# Environment: BUILD (the build folder, default build), OCLGRIND (the binary, default oclgrind),
# OCLGRIND_FAMILIES (a regex over the family names below: run some), OCLGRIND_JOBS (families
# run at once, default 2), OCLGRIND_LOGS (where reports and test output are kept, default a
# temporary folder). Exits 77 ("skipped") when Oclgrind is not installed.
set -u

BUILD=${BUILD:-build}
OCLGRIND=${OCLGRIND:-oclgrind}
FAMILIES=${OCLGRIND_FAMILIES:-.}
JOBS=${OCLGRIND_JOBS:-2}

if ! command -v "$OCLGRIND" >/dev/null 2>&1; then
  echo "skipped: oclgrind not installed (Debian/Ubuntu: apt-get install oclgrind)"
  exit 77
fi

# name | test binary | GoogleTest filter | libdnn kernel families the tests generate. Every dtype
# is in each filter's tests (parametrised suites over the four types, or loops over them inside
# the test). The last column covers libdnn's registry (libdnn/kernel_families.cc) row by row:
# KernelFamilies.EveryLibdnnFamilyRunsUnderOclgrind (tests/cuda) fails when a registered family
# is named in no row, and a row fails here when its tests generated no program of a family it
# names (the programs' "kernel family" header lines, from MPCAFFE_DUMP_KERNELS).
FAMILY_TABLE="
gemm            | test_oclgrind | *GemmSweep*   | gemm gemm_int4
conv_int4       | test_libdnn   | ConvInt4.ExtremeValuesAreExact | int4_unpack
conv            | test_oclgrind | *ConvSweep*   | conv_forward conv_depthwise conv_pointwise im2col conv_backward
elementwise     | test_oclgrind | *ElementwiseSweep* |
quantizer       | test_oclgrind | QuantizerSweep.* |
pool            | test_libdnn   | *PoolForward.*:*PoolBackward.* | pool_forward pool_backward
pool_stochastic | test_layers   | StochasticPoolKernels.*:StochasticPooling.* | pool_stochastic
eltwise_prod    | test_layers   | EltwiseProd.* |
lrn             | test_libdnn   | *LrnForward.*:*LrnBackward.* | lrn_forward lrn_backward
conv_nd         | test_layers   | ConvolutionNd.DeconvolutionMatchesTheReference | conv_nd
winograd        | test_libdnn   | ConvWinograd.F2*:ConvWinograd.F4* | conv_winograd
layers          | test_layers   | Layers.* | im2col_rq
gradients       | test_layers   | Gradient.* |
moe             | test_layers   | Moe.*:-Moe.PaperImagenetMoeNetsForwardInAllFourDtypes |
helpers         | test_device   | Kernel.LocalMemoryBarrierAndAtomics:Kernel.DeviceChoosesALocalSizeWhenNoneIsGiven |
helper_forms    | test_codegen  | Forms/HelperFormsTest.* |
"
# Left out on purpose: Moe.PaperImagenetMoeNetsForwardInAllFourDtypes (ImageNet-sized nets: hours
# under the simulator; the same kernels run in the other Moe tests on small shapes) and
# Kernel.MissingArgumentsNameTheKernel (launches without arguments on purpose: an API error).

LOGS=${OCLGRIND_LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/mpcaffe-oclgrind.XXXXXX")}
mkdir -p "$LOGS"
# Cached binaries would be Oclgrind's own: no kernel cache.
export MPCAFFE_CACHE=off
# Oclgrind is the only OpenCL device the program sees.
export MPCAFFE_DEVICE=0

# The programs must see Oclgrind's device as device 0 (else they would run on another driver and
# pass without being checked).
if [ ! -x "$BUILD/bin/mpcaffe" ]; then
  echo "oclgrind: $BUILD/bin/mpcaffe is missing (build it first: make build)" >&2
  exit 1
fi
if ! "$OCLGRIND" "$BUILD/bin/mpcaffe" devices 2>&1 | grep -q '^0 .*Oclgrind'; then
  echo "oclgrind: device 0 under $OCLGRIND is not the Oclgrind simulator:" >&2
  "$OCLGRIND" "$BUILD/bin/mpcaffe" devices >&2
  exit 1
fi

run_family() {
  local name=$1 binary=$2 filter=$3
  local log="$LOGS/$name.oclgrind" out="$LOGS/$name.out"
  local start=$SECONDS
  MPCAFFE_DUMP_KERNELS="$LOGS/$name.kernels" \
    "$OCLGRIND" --data-races --check-api --log "$log" "$BUILD/bin/$binary" \
    --gtest_filter="$filter" --gtest_color=no </dev/null >"$out" 2>&1
  echo "$? $((SECONDS - start))" >"$LOGS/$name.status"
}

names=()
declare -A claimed
while IFS='|' read -r name binary filter families; do
  name=$(echo "$name" | xargs)
  [ -n "$name" ] || continue
  [[ "$name" =~ $FAMILIES ]] || continue
  binary=$(echo "$binary" | xargs)
  filter=$(echo "$filter" | xargs)
  if [ ! -x "$BUILD/bin/$binary" ]; then
    echo "oclgrind: $BUILD/bin/$binary is missing (build it first: make build)" >&2
    exit 1
  fi
  names+=("$name")
  claimed[$name]=$(echo "$families" | xargs)
  run_family "$name" "$binary" "$filter" &
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
done <<<"$FAMILY_TABLE"
wait

if [ ${#names[@]} -eq 0 ]; then
  echo "oclgrind: no family matches OCLGRIND_FAMILIES='$FAMILIES'" >&2
  exit 1
fi

failed=0
total_reports=0
printf '%-12s %6s %8s %8s  %s\n' family tests reports seconds "reports per kernel"
for name in "${names[@]}"; do
  read -r rc seconds <"$LOGS/$name.status"
  out="$LOGS/$name.out"
  log="$LOGS/$name.oclgrind"
  # GoogleTest's summary: "[==========] N tests from M test suites ran."
  ran=$(sed -n 's/^\[==========\] \([0-9]*\) tests\? from .* ran\..*/\1/p' "$out" | tail -1)
  ran=${ran:-0}
  # Every Oclgrind message is a block whose first line starts in column 1 ("Invalid read of
  # size 4 ...", "Read-write data race at ...", "Work-group divergence detected (barrier)",
  # "Oclgrind - OpenCL runtime error detected", ...) followed by tab-indented details naming
  # the kernel ("Kernel: name"); anything Oclgrind writes to its log is a report.
  reports=0
  per_kernel=""
  if [ -s "$log" ]; then
    reports=$(grep -c '^[^[:space:]]' "$log")
    [ "$reports" -gt 0 ] || reports=1
    per_kernel=$(awk '/^[^[:space:]]/ { kind = $0; sub(/ at .*/, "", kind); kernel = "(API)" }
                      /^\tKernel:/ { kernel = $2 }
                      /^$/ && kind != "" { count[kernel ": " kind]++; kind = "" }
                      END { if (kind != "") count[kernel ": " kind]++;
                            for (k in count) printf "%s x%d; ", k, count[k] }' "$log")
  fi
  printf '%-12s %6s %8s %8s  %s\n' "$name" "$ran" "$reports" "$seconds" "$per_kernel"
  total_reports=$((total_reports + reports))
  if [ "$reports" -gt 0 ]; then
    failed=1
    echo "---- $name: Oclgrind reports (first 60 lines of $log)"
    head -60 "$log"
  fi
  if [ "$rc" -ne 0 ]; then
    failed=1
    echo "---- $name: tests failed (exit $rc); the failures from $out:"
    grep -E '^\[  FAILED  \]|Failure|error' "$out" | head -40
  fi
  if [ "$ran" -eq 0 ]; then
    failed=1
    echo "---- $name: no test ran (filter matched nothing?)"
  fi
  for family in ${claimed[$name]}; do
    if ! grep -qs "kernel family $family\.\$" "$LOGS/$name.kernels"/*; then
      failed=1
      echo "---- $name: its tests generated no program of kernel family $family (FAMILY_TABLE)"
    fi
  done
done
echo "oclgrind: $total_reports report(s); logs in $LOGS"
exit $failed

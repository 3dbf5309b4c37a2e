#!/usr/bin/env bash
# scripts/fuzz.sh — builds the libFuzzer targets (clang, ASan + UBSan) in build-fuzz, seeds their
# corpora from ../shared/models and a real kernel-cache file, and runs each for FUZZ_SECONDS.
# FUZZ_TARGETS (default: all five) chooses targets, FUZZ_JOBS (default 1) how many run at once,
# FUZZ_NO_BUILD=1 skips the build. Findings (crash-*, leak-*, timeout-*, oom-*) land in
# fuzz/findings/<target>/; corpora and logs in build-fuzz. Exit 1 when any target found something.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${FUZZ_SECONDS:-60}
TARGETS=${FUZZ_TARGETS:-prototxt caffemodel solverstate cache_file image}
JOBS=${FUZZ_JOBS:-1}
SHARED=${MPCAFFE_SHARED_DIR:-$(cd .. && pwd)/shared}
BUILD=build-fuzz

if [ "${FUZZ_NO_BUILD:-0}" != 1 ]; then
  CC=clang CXX=clang++ cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DMPCAFFE_FUZZ=ON -DMPCAFFE_BUILD_TESTS=OFF > "$BUILD.configure.log" 2>&1 ||
    { cat "$BUILD.configure.log"; exit 1; }
  cmake --build "$BUILD" -j"$(nproc)" --target $(for t in $TARGETS; do echo "fuzz_$t"; done)
fi

corpus=$BUILD/corpus
mkdir -p "$corpus"/{prototxt,caffemodel,solverstate,cache_file,image}
# Image seeds: the kept edge cases and the tests' tiny pictures (a CMYK JPEG among them).
cp tests/reliability/fuzz_cases/image/* "$corpus/image/"
# Seeds: every shared prototxt as text, and encoded as a binary NetParameter.
find "$SHARED/models" -name '*.prototxt' | while read -r f; do
  name=$(echo "$f" | md5sum | cut -c1-16)
  cp "$f" "$corpus/prototxt/$name"
  protoc --proto_path=proto --encode=caffe.NetParameter proto/caffe.proto < "$f" \
    > "$corpus/caffemodel/$name" 2>/dev/null || rm -f "$corpus/caffemodel/$name"
done
printf 'iter: 100\ncurrent_step: 2\nhistory { shape { dim: 2 } data: 1 data: 2 }\n' |
  protoc --proto_path=proto --encode=caffe.SolverState proto/caffe.proto > "$corpus/solverstate/seed"
printf 'num: 1 channels: 1 height: 2 width: 2 data: 1 data: 2 data: 3 data: 4\n' |
  protoc --proto_path=proto --encode=caffe.BlobProto proto/caffe.proto > "$corpus/solverstate/mean"
if [ -x build/bin/mpcaffe ] && [ ! -s "$corpus/cache_file/seed" ]; then
  MPCAFFE_CACHE="$corpus/cache_file/seed" build/bin/mpcaffe selfcheck --size 16 > /dev/null || true
  rm -f "$corpus/cache_file/seed-wal" "$corpus/cache_file/seed-shm"
fi

run_target() {
  local target=$1 findings=fuzz/findings/$1
  mkdir -p "$findings"
  # The prototxt target builds nets on the OpenCL device: give it room for PoCL's compiler.
  LSAN_OPTIONS=suppressions=tests/sanitizers/lsan.supp \
    "$BUILD/bin/fuzz_$target" -max_total_time="$SECONDS_EACH" -rss_limit_mb=4096 -max_len=65536 \
    -timeout=30 -artifact_prefix="$findings/" -print_final_stats=1 "$corpus/$target" \
    > "$BUILD/fuzz_$target.out" 2> "$BUILD/fuzz_$target.log"
}

status=0
pids=()
names=()
for target in $TARGETS; do
  echo "== fuzz_$target for ${SECONDS_EACH}s"
  run_target "$target" &
  pids+=($!)
  names+=("$target")
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do sleep 1; done
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || status=1
  echo "== fuzz_${names[$i]}"
  grep -E "^stat::number_of_executed_units|^Done|ERROR" "$BUILD/fuzz_${names[$i]}.log" || true
done
exit $status

#!/usr/bin/env bash
# scripts/bench.sh — regenerates the benchmarks of docs/BENCHMARKS.md (`make bench`) on every
# device: `mpcaffe bench gemm` (LibDNN in every dtype against CLBlast per device), `mpcaffe
# bench net` on the paper's AlexNet (and AlexNet-MOE once its layer builds) at batch 1 and 16 in
# every data type, bench/peers.py (ONNX Runtime, OpenVINO and OpenCV DNN fp32/int8 on the same CPU
# and CLBlast on the net's GEMMs, back to back), then bench/report.py's tables and plots spliced into
# docs/BENCHMARKS.md between its "bench.sh:gemm:begin" / "bench.sh:gemm:end" (GEMM) and
# "bench.sh:begin" / "bench.sh:end" (networks) markers.
#
# Environment: MPCAFFE (the binary, default build/bin/mpcaffe), MPCAFFE_SHARED_DIR (models),
# BENCH_OUT (JSON files, default bench/results), BENCH_BATCHES (default 1,16),
# BENCH_ITERATIONS (default 10), BENCH_DEVICES (default "all": every device, one row each;
# "i,j" some; "" the default device), BENCH_PEERS=0 (skip the peers), BENCH_MOE=auto|1|0,
# BENCH_DOC (default docs/BENCHMARKS.md; "-" leaves it alone and prints the tables),
# BENCH_STEPS (default "gemm,net,peers,zoo,scaleout,peak,cache,rusticl,startup,memory,accuracy,report"; e.g.
# "report" rebuilds the tables from the JSON files of an earlier run). The scaleout step:
# scripts/bench-scale-out.sh's training throughput with 1 and 2 MPI ranks (BENCH_SCALE_OUT_STEPS,
# default "lenet,alexnet"; its MPCAFFE_DEVICE defaults to pocl), BENCH_SCALE_OUT_RUNS runs
# (default 3), the table spliced between the "bench.sh:scaleout:begin" / "bench.sh:scaleout:end"
# markers. The startup and memory steps (bench/setup_tables.py; BENCH_SETUP_DEVICES, default the
# OpenCL CPU devices but rusticl) splice theirs between "bench.sh:startup:…" and
# "bench.sh:memory:…"; the accuracy step (bench/accuracy_tables.py, the same devices) between
# "bench.sh:accuracy:…" and "bench.sh:acc16:…"; the cache step (mpcaffe_cache_bench on PoCL)
# between "bench.sh:cache:…", the peak step (mpcaffe_cpu_peak) between "bench.sh:peak:…", the
# rusticl step (AlexNet and ResNet-50 at batch 1 in every data type on rusticl beside PoCL,
# bench/rusticl_table.py; skipped where either device is absent) between "bench.sh:rusticl:…". The
# zoo step: bench/peers.py on ResNet-50, MobileNet v1 and BVLC AlexNet at batch 1 on devices
# BENCH_ZOO_DEVICES (default 0,1) at each CPU level of BENCH_LEVELS (default native, plus avx2 on
# an AVX-512 CPU; see bench/peer_engines.py), bench/peers_table.py's table between
# "bench.sh:zoo:…". OpenVINO is a bench-only peer: the peers steps pip-install it
# when missing (BENCH_INSTALL_PEERS=0: never).
set -euo pipefail
cd "$(dirname "$0")/.."
MPCAFFE=${MPCAFFE:-build/bin/mpcaffe}
SHARED=${MPCAFFE_SHARED_DIR:-$(cd .. && pwd)/shared}
OUT=${BENCH_OUT:-bench/results}
BATCHES=${BENCH_BATCHES:-1,16}
ITERATIONS=${BENCH_ITERATIONS:-10}
DEVICES=${BENCH_DEVICES-all}
DOC=${BENCH_DOC:-docs/BENCHMARKS.md}
STEPS=",${BENCH_STEPS:-gemm,net,peers,zoo,scaleout,peak,cache,rusticl,startup,memory,accuracy,report},"
LEVELS=${BENCH_LEVELS:-native$(grep -qw avx512f /proc/cpuinfo && echo ,avx2)}
if [ "${BENCH_PEERS:-1}" != 0 ] && [[ $STEPS == *,peers,* || $STEPS == *,zoo,* ]] &&
   ! python3 -c 'import openvino' 2>/dev/null; then
  if [ "${BENCH_INSTALL_PEERS:-1}" = 0 ]; then
    echo "bench.sh: OpenVINO is not installed (pip install openvino): no OpenVINO columns" >&2
  else
    echo "bench.sh: OpenVINO is not installed: pip installing openvino (bench only)" >&2
    python3 -m pip install --quiet openvino ||
      echo "bench.sh: pip install openvino failed: no OpenVINO columns" >&2
  fi
fi
PLOTS=docs/img/bench
mkdir -p "$OUT" "$PLOTS"

nets=(imagenet_caffenet)
# HOOK(AlexNet-MOE): the paper's ImageNet-MOE joins the run as soon as its MOE layer builds
# (issue 9). BENCH_MOE=auto checks that with one quick fp32 forward pass; 1 forces it, 0 skips.
moe_model="$SHARED/models/paper_examples/imagenet_caffenet_moe/net_float_1.prototxt"
case "${BENCH_MOE:-auto}" in
  1) nets+=(imagenet_caffenet_moe) ;;
  auto)
    if "$MPCAFFE" time --model "$moe_model" --synthetic --iterations 1 >/dev/null 2>&1; then
      nets+=(imagenet_caffenet_moe)
    else
      echo "bench.sh: AlexNet-MOE does not build yet (MOE layer, issue 9): skipped" >&2
    fi ;;
esac

device_flag=()
[ -n "$DEVICES" ] && device_flag=(--device "$DEVICES")
inputs=()
if [[ $STEPS == *,gemm,* ]]; then
  echo "== mpcaffe bench gemm, devices: ${DEVICES:-default}" >&2
  "$MPCAFFE" bench gemm "${device_flag[@]}" --json "$OUT/gemm.json"
fi
[ -f "$OUT/gemm.json" ] && inputs+=("$OUT/gemm.json")
for net in "${nets[@]}"; do
  model="$SHARED/models/paper_examples/$net/net_float_1.prototxt"
  if [[ $STEPS == *,net,* ]]; then
    echo "== mpcaffe bench net: $net, batch $BATCHES, $ITERATIONS iterations" >&2
    "$MPCAFFE" bench net --model "$model" --dtypes fp32,fp16,int16,int8 --batch "$BATCHES" \
      --reduced-memory both --iterations "$ITERATIONS" "${device_flag[@]}" --json "$OUT/$net.json"
  fi
  inputs+=("$OUT/$net.json")
  if [ "${BENCH_PEERS:-1}" != 0 ]; then
    if [[ $STEPS == *,peers,* ]]; then
      echo "== bench/peers.py: $net" >&2
      peer_device=()
      [ -n "$DEVICES" ] && peer_device=(--device "$DEVICES")
      # A failing peer (e.g. no ONNX Runtime) leaves the peer columns out, not the whole report.
      python3 bench/peers.py --model "$model" --batch "$BATCHES" --iterations "$ITERATIONS" \
        --mpcaffe "$MPCAFFE" "${peer_device[@]}" --json "$OUT/${net}_peers.json" ||
        echo "bench.sh: bench/peers.py failed for $net: no peer columns" >&2
    fi
    [ -f "$OUT/${net}_peers.json" ] && inputs+=("$OUT/${net}_peers.json")
  fi
done
if [[ $STEPS == *,scaleout,* ]]; then
  runs=${BENCH_SCALE_OUT_RUNS:-3} scale_nets=${BENCH_SCALE_OUT_STEPS:-lenet,alexnet}
  echo "== scripts/bench-scale-out.sh: $scale_nets, $runs runs" >&2
  rm -f "$OUT/scale_out.md"
  SCALE_OUT_TABLE="$OUT/scale_out.md" RUNS=$runs STEPS=$scale_nets MPCAFFE="$MPCAFFE" \
    MPCAFFE_SHARED_DIR="$SHARED" scripts/bench-scale-out.sh "$OUT/scale-out"
  machine="$(nproc)-core $(lscpu | sed -n 's/^Model name: *//p'), ${MPCAFFE_DEVICE:-pocl}"
  if [ "$DOC" = "-" ]; then
    cat "$OUT/scale_out.md"
  else
    python3 - "$DOC" "$OUT/scale_out.md" "$(date -u +%Y-%m-%d)" "$machine" "$runs" "$scale_nets" <<'PY'
import sys
doc, rows, day, machine, runs, scale_nets = sys.argv[1:]
text = open(doc).read()
begin, end = "<!-- bench.sh:scaleout:begin -->", "<!-- bench.sh:scaleout:end -->"
if begin not in text or end not in text:
    sys.exit(f"bench.sh: {doc} lacks the {begin} / {end} markers")
body = (f"{begin}\n_Generated by `make bench` (scripts/bench.sh) on {day}: {machine}; "
        f"`RUNS={runs} STEPS={scale_nets} scripts/bench-scale-out.sh`, medians._\n\n"
        + open(rows).read() + end)
head, rest = text.split(begin, 1)
open(doc, "w").write(head + body + rest.split(end, 1)[1])
print(f"updated {doc}: scale-out")
PY
  fi
fi
# Splices file $2 into $DOC between the "bench.sh:$1:begin" / "bench.sh:$1:end" markers, under a
# header naming the machine (cores, CPU, its vector level, the load average $4 the step started
# with: other work on the cores slows cold starts most), the date and the command $3.
splice_table() {
  local isa=AVX2
  grep -qw avx512f /proc/cpuinfo && isa=AVX-512
  grep -qw avx2 /proc/cpuinfo || isa="no AVX2"
  local machine="$(nproc)-core $(lscpu | sed -n 's/^Model name: *//p') ($isa), load average $4 \
before the step"
  if [ "$DOC" = "-" ]; then cat "$2"; return; fi
  python3 - "$DOC" "$1" "$2" "$(date -u +%Y-%m-%d)" "$machine" "$3" <<'PY'
import sys
doc, name, rows, day, machine, command = sys.argv[1:]
text = open(doc).read()
begin, end = f"<!-- bench.sh:{name}:begin -->", f"<!-- bench.sh:{name}:end -->"
if begin not in text or end not in text:
    sys.exit(f"bench.sh: {doc} lacks the {begin} / {end} markers")
body = (f"{begin}\n_Generated by `make bench` (scripts/bench.sh) on {day}: {machine}; "
        f"{command}._\n\n" + open(rows).read() + end)
head, rest = text.split(begin, 1)
open(doc, "w").write(head + body + rest.split(end, 1)[1])
print(f"updated {doc}: {name}")
PY
}
# Issue 44's table: the zoo nets against the best CPU engines at each CPU level.
if [[ $STEPS == *,zoo,* ]] && [ "${BENCH_PEERS:-1}" != 0 ]; then
  load=$(cut -d' ' -f1 /proc/loadavg)
  zoo=()
  for level in ${LEVELS//,/ }; do
    for net in zoo/resnet50_deploy zoo/mobilenet_v1_deploy bvlc/bvlc_alexnet/deploy; do
      model="$SHARED/models/$net.prototxt"
      out="$OUT/zoo_${level}_${net//\//_}.json"
      rm -f "$out"
      echo "== bench/peers.py: $model, level $level" >&2
      python3 bench/peers.py --model "$model" --batch 1 --device "${BENCH_ZOO_DEVICES:-0,1}" \
        --no-clblast --iterations "$ITERATIONS" --level "$level" --mpcaffe "$MPCAFFE" \
        --json "$out" || echo "bench.sh: bench/peers.py failed for $model at $level" >&2
      [ -f "$out" ] && zoo+=("$out")
    done
  done
  if [ ${#zoo[@]} -gt 0 ]; then
    python3 bench/peers_table.py "${zoo[@]}" --markdown "$OUT/zoo.md"
    splice_table zoo "$OUT/zoo.md" "\`python3 bench/peers.py --model <net> --batch 1 --device \
${BENCH_ZOO_DEVICES:-0,1} --no-clblast --iterations $ITERATIONS --level <level>\` per net and level \
(levels $LEVELS), then \`python3 bench/peers_table.py\`" "$load"
  fi
fi
# The start-up and memory tables: the paper's AlexNet in int8 started cold and warm per device,
# and its caffemodel and peak memory in fp32, int8 and int8w4 (bench/setup_tables.py).
setup_devices=${BENCH_SETUP_DEVICES:-$DEVICES}
[ "$setup_devices" = all ] && setup_devices=$("$MPCAFFE" devices 2>/dev/null |
  awk '$1 ~ /^[0-9]+$/ && $3 != "rusticl" {printf "%s%s", sep, $1; sep=","}')
alexnet="$SHARED/models/paper_examples/imagenet_caffenet"
if [[ $STEPS == *,startup,* ]]; then
  echo "== bench/setup_tables.py startup, devices $setup_devices" >&2
  load=$(cut -d' ' -f1 /proc/loadavg)
  python3 bench/setup_tables.py startup --mpcaffe "$MPCAFFE" --model "$alexnet/net_int8_1.prototxt" \
    --devices "$setup_devices" --json "$OUT/startup.json" --markdown "$OUT/startup.md"
  splice_table startup "$OUT/startup.md" "AlexNet int8 (\`net_int8_1.prototxt\`), \`mpcaffe time \
--synthetic --iterations 1\` as a whole process: 2 runs with empty caches (the kernel cache and \
PoCL's, which is off), then 7 with both warm (\`bench/setup_tables.py startup\`)" "$load"
fi
if [[ $STEPS == *,memory,* ]]; then
  echo "== bench/setup_tables.py memory, devices $setup_devices" >&2
  load=$(cut -d' ' -f1 /proc/loadavg)
  python3 bench/setup_tables.py memory --mpcaffe "$MPCAFFE" --model "$alexnet/net_float_1.prototxt" \
    --devices "$setup_devices" --json "$OUT/memory.json" --markdown "$OUT/memory.md"
  splice_table memory "$OUT/memory.md" "\`mpcaffe bench net --model net_float_1.prototxt \
--dtypes fp32,int8,int8w4 --batch 1 --reduced-memory both --iterations 1 --no-setup\` \
(\`bench/setup_tables.py memory\`)" "$load"
fi
# The CPU's own peaks, the yardstick of the GEMM table: fp32 FMAs on 1 and every thread, and the
# pointwise kernel's inner loop in fp32 and in int8 pairs of 256 and 512 bits (bench/cpu_peak.cc).
if [[ $STEPS == *,peak,* ]]; then
  echo "== mpcaffe_cpu_peak --markdown" >&2
  load=$(cut -d' ' -f1 /proc/loadavg)
  "$(dirname "$MPCAFFE")/mpcaffe_cpu_peak" --markdown > "$OUT/cpu_peak.md"
  splice_table peak "$OUT/cpu_peak.md" "\`build/bin/mpcaffe_cpu_peak --markdown\` (12 independent \
8-wide FMA chains per thread; the int8 pointwise loop as the OpenCL compilers emit it)" "$load"
fi
# The kernel cache table: element-wise programs built cold and warm in fresh processes, with PoCL's
# own cache off and on (bench/cache_bench.cc; PoCL, whose cache it sets per process).
if [[ $STEPS == *,cache,* ]]; then
  echo "== mpcaffe_cache_bench --markdown (pocl)" >&2
  load=$(cut -d' ' -f1 /proc/loadavg)
  MPCAFFE_DEVICE=pocl "$(dirname "$MPCAFFE")/mpcaffe_cache_bench" --markdown --repeat 1 \
    > "$OUT/cache.md"
  splice_table cache "$OUT/cache.md" "\`MPCAFFE_DEVICE=pocl build/bin/mpcaffe_cache_bench \
--markdown --repeat 1\` (\`cmake --build build --target mpcaffe_cache_bench\`)" "$load"
fi
# rusticl beside PoCL: BVLC AlexNet and ResNet-50, batch 1, every data type, one process per net
# running both devices (so each ratio is of one run); 2 iterations, rusticl's passes take seconds.
if [[ $STEPS == *,rusticl,* ]]; then
  pocl_index=$("$MPCAFFE" devices 2>/dev/null | awk '$3 == "pocl" {print $1; exit}')
  rusticl_index=$("$MPCAFFE" devices 2>/dev/null | awk '$3 == "rusticl" {print $1; exit}')
  if [ -z "$pocl_index" ] || [ -z "$rusticl_index" ]; then
    echo "bench.sh: rusticl step skipped: PoCL or rusticl is not listed by mpcaffe devices" >&2
  else
    load=$(cut -d' ' -f1 /proc/loadavg)
    rusticl_json=()
    for net in bvlc/bvlc_alexnet/deploy zoo/resnet50_deploy; do
      out="$OUT/rusticl_${net//\//_}.json"
      echo "== mpcaffe bench net: $net on PoCL and rusticl" >&2
      "$MPCAFFE" bench net --model "$SHARED/models/$net.prototxt" --dtypes fp32,fp16,int16,int8 \
        --batch 1 --devices "$pocl_index,$rusticl_index" --reduced-memory on --iterations 2 \
        --no-setup --no-progress --json "$out"
      rusticl_json+=("$out")
    done
    python3 bench/rusticl_table.py "${rusticl_json[@]}" --markdown "$OUT/rusticl.md"
    splice_table rusticl "$OUT/rusticl.md" "\`mpcaffe bench net --model <net> --dtypes \
fp32,fp16,int16,int8 --batch 1 --devices <pocl>,<rusticl> --reduced-memory on --iterations 2 \
--no-setup\` per net, then \`python3 bench/rusticl_table.py\`; medians, ms" "$load"
  fi
fi
# The accuracy tables: LeNet trained on Fashion-MNIST, calibrated and tested per data type on each
# device, and the 16-bit accumulator's overflows with 4-bit weights (bench/accuracy_tables.py).
if [[ $STEPS == *,accuracy,* ]]; then
  echo "== bench/accuracy_tables.py, devices $setup_devices" >&2
  load=$(cut -d' ' -f1 /proc/loadavg)
  python3 bench/accuracy_tables.py lenet --mpcaffe "$MPCAFFE" --devices "$setup_devices" \
    --work "$OUT/accuracy" --json "$OUT/accuracy_lenet.json" --markdown "$OUT/accuracy_lenet.md"
  splice_table accuracy "$OUT/accuracy_lenet.md" "\`scripts/calibrate-lenet.sh\` per device \
(LMDBs from \`mpcaffe convert_mnist\` of Fashion-MNIST, \`mpcaffe train\` with \
\`lenet_solver_adam.prototxt\`, \`mpcaffe calibrate --phase TRAIN --iterations 20\` per type, \
\`mpcaffe test --iterations 100\` over the 10 000 test images; \`bench/accuracy_tables.py lenet\`)" \
    "$load"
  python3 bench/accuracy_tables.py acc16 --mpcaffe "$MPCAFFE" --devices "$setup_devices" \
    --work "$OUT/accuracy" --model "$alexnet/net_float_1.prototxt" --json "$OUT/accuracy_acc16.json" \
    --markdown "$OUT/accuracy_acc16.md"
  splice_table acc16 "$OUT/accuracy_acc16.md" "\`mpcaffe test --acc16-overflow\` on the int8w4 \
LeNet above (100 batches) and on \`mpcaffe convert --dtype int8w4\` of \`net_float_1.prototxt\` \
(\`--synthetic --iterations 1\`; \`bench/accuracy_tables.py acc16\`); % of accumulation steps \
that overflow, % of outputs hit" "$load"
fi
[[ $STEPS == *,report,* ]] || exit 0

tables=$(mktemp)
gemm_tables=$(mktemp)
trap 'rm -f "$tables" "$gemm_tables"' EXIT
python3 bench/report.py "${inputs[@]}" --plots "$PLOTS" --plot-prefix img/bench \
  --markdown "$tables" --gemm-markdown "$gemm_tables"
if [ "$DOC" = "-" ]; then
  cat "$gemm_tables" "$tables"
  exit 0
fi
python3 - "$DOC" "$tables" "$gemm_tables" "$(date -u +%Y-%m-%d)" "$BATCHES" "$ITERATIONS" <<'PY'
import sys
doc, tables, gemm_tables, day, batches, iterations = sys.argv[1:]
text = open(doc).read()


def splice(text, name, generated, what):
    begin, end = f"<!-- bench.sh:{name}begin -->", f"<!-- bench.sh:{name}end -->"
    if begin not in text or end not in text:
        sys.exit(f"bench.sh: {doc} lacks the {begin} / {end} markers")
    body = (f"{begin}\n_Generated by `make bench` (scripts/bench.sh) on {day}: {what}._\n\n"
            + generated + end)
    head, rest = text.split(begin, 1)
    return head + body + rest.split(end, 1)[1]


gemm = open(gemm_tables).read()
if gemm:
    text = splice(text, "gemm:", gemm, "`mpcaffe bench gemm --device all`")
text = splice(text, "", open(tables).read(),
              f"batch {batches}, {iterations} iterations per row, every device")
open(doc, "w").write(text)
print(f"updated {doc}")
PY

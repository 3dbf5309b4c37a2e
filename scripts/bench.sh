#!/usr/bin/env bash
# scripts/bench.sh — regenerates every table of docs/BENCHMARKS.md (`make bench`). Each step
# measures (or, testcost, renders what make test kept) and splices its table between the doc's
# "<!-- bench.sh:<name>:begin -->" / "end" markers under a line naming the machine, the load
# average the step started with, the date and the command. Steps, in order, and their markers:
#   gemm      `mpcaffe bench gemm` per device (LibDNN in every dtype against CLBlast); tables
#             written by the report step: gemm, gemmw4 (4-bit weights)
#   net       `mpcaffe bench net` on the paper's AlexNet (and AlexNet-MOE once its layer builds)
#             at BENCH_BATCHES in every data type; tables and plots by the report step: "" (the
#             unnamed bench.sh:begin / end pair)
#   peers     bench/peers.py on the same nets (ONNX Runtime, OpenVINO, OpenCV DNN, CLBlast on the
#             net's GEMMs), back to back; into the report step's tables
#   zoo       bench/peers.py on ResNet-50, MobileNet v1 and BVLC AlexNet at batch 1 on
#             BENCH_ZOO_DEVICES (0,1) at each CPU level of BENCH_LEVELS (native, plus avx2 on an
#             AVX-512 CPU; bench/peer_engines.py) in BENCH_ZOO_ROUNDS (3) alternating rounds,
#             bench/peers_table.py: zoo
#   zoomore   the same nets at batch 16 (native level) and bench/zoo_nets.py's at batch 1 (each
#             level of BENCH_LEVELS): zoomore
#   scaleout  scripts/bench-scale-out.sh (BENCH_SCALE_OUT_STEPS "lenet,alexnet,allreduce,fp16",
#             BENCH_SCALE_OUT_RUNS 3; PoCL): training throughput with 1 and 2 MPI ranks, the
#             allreduce alone, fp16 gradients, the scaling model: scaleout, allreduce,
#             fp16allreduce, scalemodel
#   peak      mpcaffe_cpu_peak: peak;  cache: mpcaffe_cache_bench on PoCL: cache
#   rusticl   `mpcaffe bench net` of BVLC AlexNet and ResNet-50 at batch 1 in every data type on
#             rusticl beside PoCL in one process, bench/rusticl_table.py; skipped where either
#             device is absent: rusticl
#   startup, binaries, memory   bench/setup_tables.py on BENCH_SETUP_DEVICES (the OpenCL CPU
#             devices but rusticl; binaries on BENCH_BINARIES_DEVICE, pocl): startup, binaries,
#             memory
#   smallnet  bench/small_net.py, the setup devices: smallnet
#   train     bench/train_step.py (BVLC's LeNet and CIFAR-10 quick, one fp32 training step), the
#             setup devices: train
#   fusion    bench/fusion_table.py (layers fused and launched per zoo net, launch cost), the
#             setup devices: fusion
#   accuracy  bench/accuracy_tables.py lenet and acc16, the setup devices: accuracy, acc16
#   perchannel  bench/accuracy_tables.py perchannel on BENCH_PERCHANNEL_DEVICE (pocl), and
#             perchannelspeed on the setup devices: perchannel, perchannelspeed
#   testcost  bench/suite_cost.py on the last make test's report (BENCH_TEST_BUDGET, default
#             build/test-cache/reports/budget.json, kept as bench/results/test_budget.json)
#   defaults  mpcaffe_defaults --markdown, the kernel families' defaults tables (no device run):
#             defaults
#   report    bench/report.py's tables and plots from the JSON files of the gemm, net and peers
#             steps (alone: rebuilds them from an earlier run's files)
#
# Environment: MPCAFFE (the binary, default build/bin/mpcaffe), MPCAFFE_SHARED_DIR (models),
# BENCH_OUT (JSON files, default bench/results), BENCH_BATCHES (default 1,16),
# BENCH_ITERATIONS (default 10), BENCH_DEVICES (default "all": every device, one row each;
# "i,j" some; "" the default device), BENCH_PEERS=0 (skip the peers), BENCH_MOE=auto|1|0,
# BENCH_DOC (default docs/BENCHMARKS.md; "-" leaves it alone and prints the tables),
# BENCH_STEPS (default every step above; e.g. BENCH_STEPS=perchannel runs that step alone).
# OpenVINO is a bench-only peer: the peers steps pip-install it when missing
# (BENCH_INSTALL_PEERS=0: never).
set -euo pipefail
cd "$(dirname "$0")/.."
MPCAFFE=${MPCAFFE:-build/bin/mpcaffe}
SHARED=${MPCAFFE_SHARED_DIR:-$(cd .. && pwd)/shared}
OUT=${BENCH_OUT:-bench/results}
BATCHES=${BENCH_BATCHES:-1,16}
ITERATIONS=${BENCH_ITERATIONS:-10}
DEVICES=${BENCH_DEVICES-all}
DOC=${BENCH_DOC:-docs/BENCHMARKS.md}
ALL_STEPS=gemm,net,peers,zoo,zoomore,scaleout,peak,cache,rusticl,startup,binaries,memory,smallnet
ALL_STEPS+=,train,fusion,accuracy,perchannel,testcost,defaults,report
STEPS=",${BENCH_STEPS:-$ALL_STEPS},"
LEVELS=${BENCH_LEVELS:-native$(grep -qw avx512f /proc/cpuinfo && echo ,avx2)}
if [ "${BENCH_PEERS:-1}" != 0 ] &&
   [[ $STEPS == *,peers,* || $STEPS == *,zoo,* || $STEPS == *,zoomore,* ]] &&
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

# The machine a table was measured on: cores, CPU, its vector level, and the load average $1 its
# step started with (other work on the two cores slows cold starts and multi-threaded peers most;
# 2 or more is marked "loaded").
machine_line() {
  local isa=AVX2
  grep -qw avx512f /proc/cpuinfo && isa=AVX-512
  grep -qw avx2 /proc/cpuinfo || isa="no AVX2"
  local loaded=""
  awk -v l="$1" 'BEGIN { exit !(l >= 2) }' && loaded=" (loaded)"
  echo "$(nproc)-core $(lscpu | sed -n 's/^Model name: *//p') ($isa), load average $1 before \
the step$loaded"
}
device_flag=()
[ -n "$DEVICES" ] && device_flag=(--device "$DEVICES")
inputs=()
if [[ $STEPS == *,gemm,* ]]; then
  echo "== mpcaffe bench gemm, devices: ${DEVICES:-default}" >&2
  machine_line "$(cut -d' ' -f1 /proc/loadavg)" > "$OUT/gemm.machine"
  date -u +%Y-%m-%d > "$OUT/gemm.day"
  "$MPCAFFE" bench gemm "${device_flag[@]}" --json "$OUT/gemm.json"
fi
[ -f "$OUT/gemm.json" ] && inputs+=("$OUT/gemm.json")
for net in "${nets[@]}"; do
  model="$SHARED/models/paper_examples/$net/net_float_1.prototxt"
  if [[ $STEPS == *,net,* ]]; then
    echo "== mpcaffe bench net: $net, batch $BATCHES, $ITERATIONS iterations" >&2
    if [ "$net" = "${nets[0]}" ]; then
      machine_line "$(cut -d' ' -f1 /proc/loadavg)" > "$OUT/net.machine"
      date -u +%Y-%m-%d > "$OUT/net.day"
    fi
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
# Splices file $2 into $DOC between the "bench.sh:$1:begin" / "bench.sh:$1:end" markers, under a
# header naming the machine and the load average $4 the step started with (machine_line; or $5,
# the machine and run a table renders when it measured nothing itself), the date and the command $3.
splice_table() {
  if [ "$DOC" = "-" ]; then cat "$2"; return; fi
  python3 - "$DOC" "$1" "$2" "$(date -u +%Y-%m-%d)" "${5:-$(machine_line "$4")}" "$3" <<'PY'
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
# Scale-out (scripts/bench-scale-out.sh; PoCL unless MPCAFFE_DEVICE says otherwise, one device
# thread per rank): training throughput with 1 and 2 MPI ranks, the allreduce alone, and the
# accuracy with fp16 gradients on the wire.
if [[ $STEPS == *,scaleout,* ]]; then
  runs=${BENCH_SCALE_OUT_RUNS:-3} scale_steps=${BENCH_SCALE_OUT_STEPS:-lenet,alexnet,allreduce,fp16}
  echo "== scripts/bench-scale-out.sh: $scale_steps, $runs runs" >&2
  load=$(cut -d' ' -f1 /proc/loadavg)
  rm -f "$OUT/scale_out.md" "$OUT/allreduce.md" "$OUT/fp16_allreduce.md" "$OUT/scale_model.md"
  SCALE_OUT_TABLE="$OUT/scale_out.md" ALLREDUCE_TABLE="$OUT/allreduce.md" \
    SCALE_MODEL_TABLE="$OUT/scale_model.md" \
    FP16_TABLE="$OUT/fp16_allreduce.md" RUNS=$runs STEPS=$scale_steps MPCAFFE="$MPCAFFE" \
    MPCAFFE_SHARED_DIR="$SHARED" scripts/bench-scale-out.sh build/bench/scale-out
  what="\`RUNS=$runs STEPS=$scale_steps scripts/bench-scale-out.sh\` on ${MPCAFFE_DEVICE:-pocl}"
  if [ -s "$OUT/scale_out.md" ]; then
    splice_table scaleout "$OUT/scale_out.md" "$what, medians" "$load"
  fi
  if [ -s "$OUT/scale_model.md" ]; then
    splice_table scalemodel "$OUT/scale_model.md" "a model from the AlexNet row above (its \
gradient and buckets; compute per step = 1 / its 1-rank it/s), written by $what" "$load"
  fi
  if [ -s "$OUT/allreduce.md" ]; then
    splice_table allreduce "$OUT/allreduce.md" "$what: \`mpirun -np 2 mpcaffe_allreduce_bench \
$runs\`, median of $runs" "$load"
  fi
  if [ -s "$OUT/fp16_allreduce.md" ]; then
    splice_table fp16allreduce "$OUT/fp16_allreduce.md" "$what: LeNet, Fashion-MNIST, 2 ranks \
× batch 64, Adam, ${FP16_ITERS:-500} iterations, 10 000 test images, one run each" "$load"
  fi
fi
# The zoo nets against the best CPU engines at each CPU level.
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
        --no-clblast --iterations "$ITERATIONS" --rounds "${BENCH_ZOO_ROUNDS:-3}" \
        --level "$level" --mpcaffe "$MPCAFFE" --json "$out" \
        || echo "bench.sh: bench/peers.py failed for $model at $level" >&2
      [ -f "$out" ] && zoo+=("$out")
    done
  done
  if [ ${#zoo[@]} -gt 0 ]; then
    python3 bench/peers_table.py "${zoo[@]}" --markdown "$OUT/zoo.md"
    splice_table zoo "$OUT/zoo.md" "\`python3 bench/peers.py --model <net> --batch 1 --device \
${BENCH_ZOO_DEVICES:-0,1} --no-clblast --iterations $ITERATIONS --rounds ${BENCH_ZOO_ROUNDS:-3} \
--level <level>\` per net and level \
(levels $LEVELS), then \`python3 bench/peers_table.py\`" "$load"
  fi
fi
# Batch 16 of the zoo step's nets, and at batch 1 the nets bench/zoo_nets.py writes from their
# papers (mpcaffe was not tuned on them), against the same engines at the native level, the
# latter also at the AVX2 level (on an AVX-512 machine: the issue's "nets you have not seen" on
# both levels); the plot of mpcaffe / ONNX Runtime over every native-level net of both steps.
if [[ $STEPS == *,zoomore,* ]] && [ "${BENCH_PEERS:-1}" != 0 ]; then
  load=$(cut -d' ' -f1 /proc/loadavg)
  python3 bench/zoo_nets.py --output-dir build/bench/zoo_nets >&2
  more=() more_native=()
  # batch:net[:dtypes[:level[:rounds]]]; AlexNet also with 4-bit weights (int8w4, beside the
  # peers' int8). The unseen nets take the zoo step's alternating rounds: a single round let
  # one slow process (a whole process 30% slower now and then on the 2-vCPU VM) decide a ratio.
  # The batch-16 runs stay single rounds: each iteration is already long.
  alex=$SHARED/models/bvlc/bvlc_alexnet/deploy
  unseen=()
  for level in ${LEVELS//,/ }; do
    for net in mobilenet_v2 squeezenet11 googlenet densenet121; do
      unseen+=("1:build/bench/zoo_nets/${net}_deploy:fp32,int8:$level:${BENCH_ZOO_ROUNDS:-3}")
    done
  done
  for spec in 16:$SHARED/models/zoo/resnet50_deploy 16:$SHARED/models/zoo/mobilenet_v1_deploy \
      1:$alex:fp32,int8,int8w4 16:$alex:fp32,int8,int8w4 "${unseen[@]}"; do
    IFS=: read -r batch model dtypes level rounds <<< "$spec"
    model=$model.prototxt dtypes=${dtypes:-fp32,int8} level=${level:-native} rounds=${rounds:-1}
    name=$(basename "$(dirname "$model")")_$(basename "$model" .prototxt)
    out="$OUT/zoomore_${level}_b${batch}_$name.json"
    rm -f "$out"
    echo "== bench/peers.py: $model, batch $batch, $dtypes, level $level" >&2
    python3 bench/peers.py --model "$model" --batch "$batch" --device "${BENCH_ZOO_DEVICES:-0,1}" \
      --no-clblast --iterations "$ITERATIONS" --rounds "$rounds" --level "$level" \
      --dtypes "$dtypes" \
      --mpcaffe "$MPCAFFE" --json "$out" ||
      echo "bench.sh: bench/peers.py failed for $model at batch $batch, level $level" >&2
    [ -f "$out" ] || continue
    more+=("$out")
    [ "$level" = native ] && more_native+=("$out")
  done
  if [ ${#more[@]} -gt 0 ]; then
    python3 bench/peers_table.py "${more[@]}" --markdown "$OUT/zoomore.md"
    zoo_b1=("$OUT"/zoo_native_*.json)
    [ -f "${zoo_b1[0]}" ] || zoo_b1=()
    if python3 bench/peers_plot.py "${zoo_b1[@]}" "${more_native[@]}" \
        --output "$PLOTS/zoo_peers.png" >&2
    then
      printf '\n![mpcaffe / ONNX Runtime, every zoo net](img/bench/zoo_peers.png)\n' \
        >> "$OUT/zoomore.md"
    fi
    splice_table zoomore "$OUT/zoomore.md" "\`python3 bench/zoo_nets.py\`, then \`python3 \
bench/peers.py --model <net> --batch <16 for the zoo step's nets, 1 for zoo_nets.py's, AlexNet \
both> --device ${BENCH_ZOO_DEVICES:-0,1} --no-clblast --iterations $ITERATIONS --level <native; \
zoo_nets.py's nets also at each of $LEVELS> --rounds <${BENCH_ZOO_ROUNDS:-3} for zoo_nets.py's \
nets, else 1> [--dtypes fp32,int8,int8w4 for AlexNet]\` per net, \
\`python3 bench/peers_table.py\` and \`bench/peers_plot.py\`" "$load"
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
# When PoCL's binaries are stored (MPCAFFE_BINARIES auto / always): four runs in a row each.
if [[ $STEPS == *,binaries,* ]]; then
  bin_device=${BENCH_BINARIES_DEVICE:-pocl}
  echo "== bench/setup_tables.py binaries, device $bin_device" >&2
  load=$(cut -d' ' -f1 /proc/loadavg)
  python3 bench/setup_tables.py binaries --mpcaffe "$MPCAFFE" \
    --model "$alexnet/net_int8_1.prototxt" --devices "$bin_device" --json "$OUT/binaries.json" \
    --markdown "$OUT/binaries.md"
  splice_table binaries "$OUT/binaries.md" "AlexNet int8 (\`net_int8_1.prototxt\`), \
\`MPCAFFE_BINARIES=auto|always mpcaffe time --synthetic --iterations 1\` as a whole process, four \
runs in a row per mode from empty caches (\`bench/setup_tables.py binaries\`)" "$load"
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
# The small net in every data type (bench/small_net.py) on the setup devices.
if [[ $STEPS == *,smallnet,* ]]; then
  echo "== bench/small_net.py, devices $setup_devices" >&2
  load=$(cut -d' ' -f1 /proc/loadavg)
  python3 bench/small_net.py --mpcaffe "$MPCAFFE" --devices "$setup_devices" \
    --work build/bench/small_net --iterations "$ITERATIONS" --json "$OUT/small_net.json" \
    --markdown "$OUT/small_net.md"
  splice_table smallnet "$OUT/small_net.md" "the demo's 784-30-10 (examples/fashion_mnist \
\`make_net\`) at batch 10000, \`mpcaffe bench net --dtypes fp32,fp16,int16,int8,int8w4 --batch \
10000 --device <d> --reduced-memory on --iterations $ITERATIONS --no-setup\` per device \
(\`bench/small_net.py\`)" "$load"
fi
# One fp32 training step of BVLC's LeNet and CIFAR-10 quick (bench/train_step.py).
if [[ $STEPS == *,train,* ]]; then
  echo "== bench/train_step.py, devices $setup_devices" >&2
  load=$(cut -d' ' -f1 /proc/loadavg)
  python3 bench/train_step.py --mpcaffe "$MPCAFFE" --devices "$setup_devices" --shared "$SHARED" \
    --json "$OUT/train_step.json" --markdown "$OUT/train_step.md"
  splice_table train "$OUT/train_step.md" "\`mpcaffe time --model <train_test prototxt> --phase \
TRAIN --synthetic --iterations 20 --device <d> --json\`, 3 runs per net and device \
(\`bench/train_step.py\`)" "$load"
fi
# Layers fused, run and launched per zoo net and data type, and the launch cost per device
# (bench/fusion_table.py, the setup devices).
if [[ $STEPS == *,fusion,* ]]; then
  echo "== bench/fusion_table.py, devices $setup_devices" >&2
  load=$(cut -d' ' -f1 /proc/loadavg)
  zoo_dir=$SHARED/models/zoo
  python3 bench/fusion_table.py --mpcaffe "$MPCAFFE" --devices "$setup_devices" \
    --models "$zoo_dir/resnet50_deploy.prototxt,$zoo_dir/mobilenet_v1_deploy.prototxt" \
    --work build/bench/fusion --json "$OUT/fusion.json" --markdown "$OUT/fusion.md"
  splice_table fusion "$OUT/fusion.md" "\`mpcaffe time --model <net> --synthetic --iterations 10 \
--device <d> --json --explain\` per zoo net, fp32 and \`mpcaffe convert --dtype int8\`'s int8; \
\`mpcaffe_launch_bench 1000 5 <d>\` (\`bench/fusion_table.py\`)" "$load"
fi
# The CPU's own peaks, the yardstick of the GEMM table: fp32 FMAs on 1 and every thread, and the
# pointwise kernel's inner loop in fp32 and in int8 pairs of 256 and 512 bits, the direct
# convolution's in byte quads (bench/cpu_peak.cc).
if [[ $STEPS == *,peak,* ]]; then
  echo "== mpcaffe_cpu_peak --markdown" >&2
  load=$(cut -d' ' -f1 /proc/loadavg)
  "$(dirname "$MPCAFFE")/mpcaffe_cpu_peak" --markdown > "$OUT/cpu_peak.md"
  splice_table peak "$OUT/cpu_peak.md" "\`build/bin/mpcaffe_cpu_peak --markdown\` (12 independent \
FMA chains per thread, 8 wide and, with AVX-512, 16 wide; the pointwise loops as the OpenCL compilers emit them on register \
tiles that fit the level, the direct convolution's byte-quad loop)" "$load"
fi
# Every kernel family's defaults table, printed from the library's rows (bench/defaults_table.cc).
if [[ $STEPS == *,defaults,* ]]; then
  echo "== mpcaffe_defaults --markdown" >&2
  "$(dirname "$MPCAFFE")/mpcaffe_defaults" --markdown > "$OUT/defaults.md"
  splice_table defaults "$OUT/defaults.md" "\`build/bin/mpcaffe_defaults --markdown\` (the rows \
of the defaults tables in libdnn/; no device is run)" "$(cut -d' ' -f1 /proc/loadavg)"
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
# The per-channel weight scales' accuracy on three zoo nets (test_net's
# PerChannelWeights.DISABLED_* measurements on BENCH_PERCHANNEL_DEVICE, default pocl).
if [[ $STEPS == *,perchannel,* ]]; then
  pc_device=${BENCH_PERCHANNEL_DEVICE:-pocl}
  echo "== bench/accuracy_tables.py perchannel, device $pc_device" >&2
  load=$(cut -d' ' -f1 /proc/loadavg)
  python3 bench/accuracy_tables.py perchannel --mpcaffe "$MPCAFFE" --devices "$pc_device" \
    --json "$OUT/accuracy_perchannel.json" --markdown "$OUT/accuracy_perchannel.md"
  splice_table perchannel "$OUT/accuracy_perchannel.md" "\`MPCAFFE_DEVICE=$pc_device \
build/bin/test_net --gtest_also_run_disabled_tests --gtest_filter='PerChannelWeights.DISABLED_*'\` \
(tests/net/per_channel_weights_test.cc; \`bench/accuracy_tables.py perchannel\`)" "$load"
  echo "== bench/accuracy_tables.py perchannelspeed, devices $setup_devices" >&2
  load=$(cut -d' ' -f1 /proc/loadavg)
  python3 bench/accuracy_tables.py perchannelspeed --mpcaffe "$MPCAFFE" --devices "$setup_devices" \
    --model "$alexnet/net_float_1.prototxt" --json "$OUT/perchannel_speed.json" \
    --markdown "$OUT/perchannel_speed.md"
  splice_table perchannelspeed "$OUT/perchannel_speed.md" "\`MPCAFFE_PER_CHANNEL_WEIGHTS=|0 \
mpcaffe bench net --model net_float_1.prototxt --dtypes int8 --batch 1 --reduced-memory off \
--iterations 20 --no-setup --device <d>\`, the two settings alternated, 3 rounds, each run's \
median (\`bench/accuracy_tables.py perchannelspeed\`)" "$load"
fi
# The test suite's cost: the report the last `make test` kept (scripts/test-budget.py), copied to
# $OUT/test_budget.json when newer; the step measures nothing itself (make test takes half an hour).
if [[ $STEPS == *,testcost,* ]]; then
  budget=${BENCH_TEST_BUDGET:-build/test-cache/reports/budget.json}
  if [ -f "$budget" ] && [ "$budget" -nt "$OUT/test_budget.json" ]; then
    cp "$budget" "$OUT/test_budget.json"
  fi
  if [ -f "$OUT/test_budget.json" ]; then
    echo "== bench/suite_cost.py $OUT/test_budget.json" >&2
    python3 bench/suite_cost.py "$OUT/test_budget.json" --markdown "$OUT/suite_cost.md" \
      --header "$OUT/suite_cost.header"
    splice_table testcost "$OUT/suite_cost.md" "\`make test\` (every cache empty; its closing \
table: \`scripts/test-budget.py\`, kept in \`build/test-cache/reports/budget.json\`; \
\`bench/suite_cost.py\`)" "" "$(cat "$OUT/suite_cost.header")"
  else
    echo "bench.sh: no make test report ($budget): run make test first; testcost skipped" >&2
  fi
fi
[[ $STEPS == *,report,* ]] || exit 0

tables=$(mktemp)
gemm_tables=$(mktemp)
w4_table=$(mktemp)
trap 'rm -f "$tables" "$gemm_tables" "$w4_table"' EXIT
python3 bench/report.py "${inputs[@]}" --plots "$PLOTS" --plot-prefix img/bench \
  --markdown "$tables" --gemm-markdown "$gemm_tables" --gemm-w4-markdown "$w4_table"
if [ "$DOC" = "-" ]; then
  cat "$gemm_tables" "$w4_table" "$tables"
  exit 0
fi
# The machine lines and dates the gemm and net steps recorded (runs before they did: none, and
# today), so that `BENCH_STEPS=report` alone keeps the measurements' dates.
day_of() { cat "$1" 2>/dev/null || date -u +%Y-%m-%d; }
python3 - "$DOC" "$tables" "$gemm_tables" "$w4_table" "$(day_of "$OUT/gemm.day")" \
  "$(day_of "$OUT/net.day")" "$BATCHES" "$ITERATIONS" \
  "$(cat "$OUT/gemm.machine" 2>/dev/null || true)" \
  "$(cat "$OUT/net.machine" 2>/dev/null || true)" <<'PY'
import sys
(doc, tables, gemm_tables, w4_table, gemm_day, net_day, batches, iterations, gemm_machine,
 net_machine) = sys.argv[1:]
text = open(doc).read()


def splice(text, name, generated, what, day):
    begin, end = f"<!-- bench.sh:{name}begin -->", f"<!-- bench.sh:{name}end -->"
    if begin not in text or end not in text:
        sys.exit(f"bench.sh: {doc} lacks the {begin} / {end} markers")
    body = (f"{begin}\n_Generated by `make bench` (scripts/bench.sh) on {day}: {what}._\n\n"
            + generated + end)
    head, rest = text.split(begin, 1)
    return head + body + rest.split(end, 1)[1]


gemm = open(gemm_tables).read()
gemm_what = (f"{gemm_machine}; " if gemm_machine else "") + "`mpcaffe bench gemm --device all`"
if gemm:
    text = splice(text, "gemm:", gemm, gemm_what, gemm_day)
w4 = open(w4_table).read()
if w4:
    text = splice(text, "gemmw4:", w4, gemm_what, gemm_day)
text = splice(text, "", open(tables).read(),
              (f"{net_machine}; " if net_machine else "")
              + f"batch {batches}, {iterations} iterations per row, every device", net_day)
open(doc, "w").write(text)
print(f"updated {doc}")
PY

#!/usr/bin/env bash
# scripts/bench-scale-out.sh [workdir] — the measurements of docs/BENCHMARKS.md "Scale-out":
# LeNet / Fashion-MNIST and AlexNet (synthetic data) training throughput as one process and as
# `mpirun -np 2` (one device thread per rank), the time each step waits for its gradient
# allreduce, the allreduce alone against the gradient bytes (bench/allreduce_bench.cc), and the
# final Fashion-MNIST accuracy with fp32 and fp16 gradient allreduce. Runs alternate 1 and 2
# ranks so both see the same machine load; every figure is a median.
# Environment: MPCAFFE (default build/bin/mpcaffe), MPCAFFE_DEVICE (default pocl),
# MPCAFFE_SHARED_DIR, FASHION_MNIST_DIR, RUNS (default 3), STEPS (default
# "lenet,alexnet,allreduce,fp16"), ALEXNET_BATCH (per rank, default 4), FP16_ITERS (500),
# SCALE_OUT_TABLE (a file for the training-throughput rows as a Markdown table, header and a row
# per net measured), ALLREDUCE_TABLE and FP16_TABLE (the same for the allreduce alone and the
# fp16 gradients' accuracy), SCALE_MODEL_TABLE (the model of where AlexNet's data parallelism
# stops scaling, from its measured gradient and compute per step); scripts/bench.sh splices them
# into docs/BENCHMARKS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
MPCAFFE=$(realpath "${MPCAFFE:-build/bin/mpcaffe}")
BENCH=$(dirname "$MPCAFFE")/mpcaffe_allreduce_bench
SHARED=$(realpath "${MPCAFFE_SHARED_DIR:-../shared}")
DATA=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
WORK=${1:-build/scale-out}
TABLE=${SCALE_OUT_TABLE:+$(realpath -m "$SCALE_OUT_TABLE")}
ALLREDUCE_MD=${ALLREDUCE_TABLE:+$(realpath -m "$ALLREDUCE_TABLE")}
FP16_MD=${FP16_TABLE:+$(realpath -m "$FP16_TABLE")}
MODEL_MD=${SCALE_MODEL_TABLE:+$(realpath -m "$SCALE_MODEL_TABLE")}
RUNS=${RUNS:-3}
STEPS=${STEPS:-lenet,alexnet,allreduce,fp16}
export MPCAFFE_DEVICE=${MPCAFFE_DEVICE:-pocl}
# Open MPI refuses root without these; one OpenCL worker thread per rank (PoCL's pthread
# device and Intel's TBB pool), so two ranks use the machine's two cores as one process with
# two threads would.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export POCL_MAX_PTHREAD_COUNT=${POCL_MAX_PTHREAD_COUNT:-1}
export CL_CONFIG_CPU_TBB_NUM_WORKERS=${CL_CONFIG_CPU_TBB_NUM_WORKERS:-1}
MPIRUN=(mpirun --oversubscribe --bind-to none)
mkdir -p "$WORK/examples/mnist"
cd "$WORK"
N=examples/mnist

median() { sort -g | awk '{a[NR] = $1} END { if (NR) print a[int((NR + 1) / 2)]; else print "n/a" }'; }
# The iter/s of a log's display lines after the first (which includes the kernel builds).
rate() { grep -o '([0-9.e+-]* iter/s' "$1" | tr -d '(' | awk '{print $1}' | tail -n +2 | median; }
waited() { sed -n 's/.* MB per step, \([0-9.e+-]*\) ms per step waiting.*/\1/p' "$1"; }
# The gradient of a 2-rank log's "Data-parallel over 2 ranks ... gradients X MB per step in B
# allreduce bucket(s)" line, as "X B".
gradient() { sed -n 's/.*gradients \([0-9.e+-]*\) MB per step in \([0-9]*\) allreduce.*/\1 \2/p' "$1" | head -1; }
# table_row <net> <batch per rank> <2-rank log> <1-rank it/s> <2-rank it/s> <wait ms>
table_row() {
  [ -n "$TABLE" ] || return 0
  [ -s "$TABLE" ] || printf '%s\n%s\n' \
    "| net | gradient | 1 rank it/s | 2 ranks it/s | samples/s 1 → 2 ranks | 2-rank wait after backward |" \
    "| --- | --- | --- | --- | --- | --- |" > "$TABLE"
  awk -v n="$1" -v g="$(gradient "$3")" -v B="$2" -v a="$4" -v b="$5" -v w="$6" 'BEGIN {
    split(g, mb, " ")
    printf "| %s | %.4g MB, %d bucket(s) | %.3g | %.3g | %.3g → %.3g (×%.2f) | %.0f ms/step |\n",
      n, mb[1], mb[2], a, b, B * a, 2 * B * b, 2 * b / a, w }' >> "$TABLE"
}
run() {  # run <ranks> <log> <mpcaffe args...>
  local ranks=$1 log=$2
  shift 2
  if [ "$ranks" = 1 ]; then "$MPCAFFE" "$@" > "$log" 2>&1; else "${MPIRUN[@]}" -np "$ranks" "$MPCAFFE" "$@" > "$log" 2>&1; fi ||
    { tail -20 "$log"; exit 1; }
}

if [[ $STEPS == *lenet* || $STEPS == *fp16* ]]; then
  for split in train t10k; do
    lmdb=$N/mnist_${split/t10k/test}_lmdb
    [ -d "$lmdb" ] || "$MPCAFFE" convert_mnist "$DATA/$split-images-idx3-ubyte.gz" \
      "$DATA/$split-labels-idx1-ubyte.gz" "$lmdb" > /dev/null
  done
  cp "$SHARED/models/bvlc/mnist/lenet_train_test.prototxt" $N/
  chmod u+w $N/lenet_train_test.prototxt
fi

if [[ $STEPS == *lenet* ]]; then
  sed -e 's/^max_iter: .*/max_iter: 120/' -e 's/^snapshot: .*/snapshot: 0/' \
    -e 's/^test_interval: .*/test_interval: 1000000/' -e 's/^display: .*/display: 20/' \
    -e 's/^snapshot_prefix: .*//' \
    "$SHARED/models/bvlc/mnist/lenet_solver_adam.prototxt" > $N/lenet_bench.prototxt
  echo "snapshot_after_train: false test_initialization: false" >> $N/lenet_bench.prototxt
  r1=() r2=() w2=()
  for i in $(seq "$RUNS"); do
    run 1 lenet1_$i.log train --solver $N/lenet_bench.prototxt --no-progress
    run 2 lenet2_$i.log train --solver $N/lenet_bench.prototxt --no-progress
    r1+=("$(rate lenet1_$i.log)") r2+=("$(rate lenet2_$i.log)") w2+=("$(waited lenet2_$i.log)")
  done
  a=$(printf '%s\n' "${r1[@]}" | median) b=$(printf '%s\n' "${r2[@]}" | median)
  w=$(printf '%s\n' "${w2[@]}" | median)
  echo "lenet: batch 64 per rank, $MPCAFFE_DEVICE; 1 rank ${r1[*]} it/s (median $a); 2 ranks ${r2[*]} it/s (median $b), allreduce wait ${w2[*]} ms/step (median $w)"
  awk -v a="$a" -v b="$b" 'BEGIN { printf "lenet: samples/s 1 rank %.0f, 2 ranks %.0f: x%.2f\n", 64 * a, 128 * b, 2 * b / a }'
  table_row LeNet 64 lenet2_1.log "$a" "$b" "$w"
fi

if [[ $STEPS == *alexnet* ]]; then
  B=${ALEXNET_BATCH:-4}
  mkdir -p alexnet
  sed -e "s/batch_size: 256/batch_size: $B/" "$SHARED/models/bvlc/bvlc_alexnet/train_val.prototxt" \
    > alexnet/train_val.prototxt
  cat > alexnet/solver.prototxt <<SOLVER
net: "alexnet/train_val.prototxt"
base_lr: 0.01 lr_policy: "fixed" momentum: 0.9 weight_decay: 0.0005
display: 1 max_iter: 5 snapshot_after_train: false
SOLVER
  r1=() r2=() w2=()
  for i in $(seq "$RUNS"); do
    run 1 alexnet1_$i.log train --solver alexnet/solver.prototxt --synthetic --no-progress
    run 2 alexnet2_$i.log train --solver alexnet/solver.prototxt --synthetic --no-progress
    r1+=("$(rate alexnet1_$i.log)") r2+=("$(rate alexnet2_$i.log)") w2+=("$(waited alexnet2_$i.log)")
  done
  a=$(printf '%s\n' "${r1[@]}" | median) b=$(printf '%s\n' "${r2[@]}" | median)
  w=$(printf '%s\n' "${w2[@]}" | median)
  echo "alexnet: batch $B per rank, synthetic, $MPCAFFE_DEVICE; 1 rank ${r1[*]} it/s (median $a); 2 ranks ${r2[*]} it/s (median $b), allreduce wait ${w2[*]} ms/step (median $w)"
  grep -h "^Data-parallel" alexnet2_1.log || true
  table_row AlexNet "$B" alexnet2_1.log "$a" "$b" "$w"
  # The model: AlexNet's gradient over 100 Gbit/s (12.5 GB/s), a ring allreduce's
  # 2(N−1)/N · bytes / bandwidth plus 2(N−1) latency steps of 5 µs per bucket, no overlap;
  # efficiency = compute / (compute + allreduce + latency) at the compute per step measured here
  # (one rank: 1 / its it/s) and at 100 and 20 ms.
  [ -z "$MODEL_MD" ] || awk -v g="$(gradient alexnet2_1.log)" -v a="$a" 'BEGIN {
    split(g, mb, " "); bytes = mb[1] * 1e6; buckets = mb[2]; compute = 1 / a
    printf "| devices N | ring allreduce fp32 | fp16 | latency | efficiency at %.2f s compute |",
      compute
    print " at 100 ms compute (fp32 / fp16) | at 20 ms compute (fp32 / fp16) |"
    print "| --- | --- | --- | --- | --- | --- | --- |"
    split("8 64 512", ns, " ")
    for (i = 1; i <= 3; ++i) {
      n = ns[i]; ring = 2 * (n - 1) / n * bytes / 12.5e9; lat = 2 * (n - 1) * 5e-6 * buckets
      printf "| %d | %.1f ms | %.1f ms | %.1f ms | %.1f %% |", n, 1e3 * ring, 5e2 * ring, 1e3 * lat,
        100 * compute / (compute + ring + lat)
      for (c = 0.1; c > 0.01; c = c / 5)
        printf " %.0f %% / %.0f %% |", 100 * c / (c + ring + lat), 100 * c / (c + ring / 2 + lat)
      printf "\n"
    } }' > "$MODEL_MD"
fi

if [[ $STEPS == *allreduce* ]]; then
  "${MPIRUN[@]}" -np 2 "$BENCH" "$RUNS" | tee allreduce.log
  # Rank 0's rows: grad MB, fp32 ms, fp32 GB/s, fp16 ms, fp16 GB/s.
  [ -z "$ALLREDUCE_MD" ] || awk 'BEGIN {
      print "| gradient | fp32 ms | fp32 GB/s | fp16 on the wire ms | fp16 GB/s |"
      print "| --- | --- | --- | --- | --- |" }
    function ms(x) { return sprintf(x < 10 ? "%.2f" : x < 100 ? "%.1f" : "%.0f", x) }
    NF == 5 && $1 ~ /^[0-9.]+$/ {
      printf "| %g MB | %s | %.2f | %s | %.2f |\n", $1, ms($2), $3, ms($4), $5 }' \
    allreduce.log > "$ALLREDUCE_MD"
fi

if [[ $STEPS == *fp16* ]]; then
  I=${FP16_ITERS:-500}
  sed -e "s/^max_iter: .*/max_iter: $I/" -e 's/^snapshot: .*/snapshot: 0/' \
    -e "s/^test_interval: .*/test_interval: $I/" -e "s/^display: .*/display: 100/" \
    -e 's/^snapshot_prefix: .*//' \
    "$SHARED/models/bvlc/mnist/lenet_solver_adam.prototxt" > $N/lenet_fp16.prototxt
  echo "snapshot_after_train: false test_initialization: false" >> $N/lenet_fp16.prototxt
  run 2 fp32_allreduce.log train --solver $N/lenet_fp16.prototxt --no-progress
  run 2 fp16_allreduce.log train --solver $N/lenet_fp16.prototxt --no-progress --fp16-allreduce
  [ -z "$FP16_MD" ] || printf '%s\n%s\n' \
    "| allreduce | bytes per step | test accuracy | test loss | wait after backward |" \
    "| --- | --- | --- | --- | --- |" > "$FP16_MD"
  for t in fp32 fp16; do
    acc=$(grep "Test net output #0: accuracy" ${t}_allreduce.log | tail -1 | sed 's/.*= //')
    loss=$(grep "Test net output #1: loss" ${t}_allreduce.log | tail -1 | sed 's/.*= //')
    echo "fp16: $t allreduce, 2 ranks x batch 64, $I iterations: test accuracy $acc, loss $loss, $(grep -h '^Allreduce' ${t}_allreduce.log)"
    re='^Allreduce: .* bucket(s), \([0-9.e+-]*\) MB per step, \([0-9.e+-]*\) ms per step waiting'
    [ -z "$FP16_MD" ] || sed -n "s/$re.*/\1 \2/p" ${t}_allreduce.log | awk -v t="$t" -v acc="$acc" -v loss="$loss" \
      '{ printf "| %s | %.3g MB | %s | %s | %.1f ms |\n", t, $1, acc, loss, $2 }' >> "$FP16_MD"
  done
fi

#!/usr/bin/env bash
# tests/dist/failure_test.sh <mpirun> <mpcaffe> — a data-parallel job whose rank stops must end
# with a clear error, never hang: (1) rank 1 runs fewer iterations than rank 0 (it leaves while
# rank 0 waits in the gradient allreduce): rank 0's collective times out (MPCAFFE_MPI_TIMEOUT)
# and aborts the job naming the wait; (2) rank 1 is killed (SIGKILL) while training: mpirun
# ends the job and says a process died. Each run is bounded by `timeout`; a hang fails.
set -u
MPIRUN=$1
MPCAFFE=$2
dir=$(mktemp -d /tmp/mpcaffe_dist_failure_XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail=0

# A small net on synthetic MNIST-shaped data (--synthetic: no database needed).
cat > "$dir/net.prototxt" <<'NET'
name: "failure"
layer { name: "data" type: "Data" top: "data" top: "label"
        data_param { source: "synthetic_mnist_lmdb" batch_size: 8 backend: LMDB } }
layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
        inner_product_param { num_output: 16 weight_filler { type: "xavier" } } }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
        inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }
NET
for iters in 5 1000000; do
  cat > "$dir/solver$iters.prototxt" <<SOLVER
net: "$dir/net.prototxt"
base_lr: 0.01 lr_policy: "fixed" max_iter: $iters display: 0 snapshot_after_train: false
SOLVER
done

# (1) Rank 1 stops after 5 iterations, rank 0 would run on: rank 0 must time out and abort.
start=$(date +%s)
out=$(MPCAFFE_MPI_TIMEOUT=5 timeout 120 "$MPIRUN" \
  -np 1 "$MPCAFFE" train --solver "$dir/solver1000000.prototxt" --synthetic --no-progress : \
  -np 1 "$MPCAFFE" train --solver "$dir/solver5.prototxt" --synthetic --no-progress 2>&1)
rc=$?
secs=$(( $(date +%s) - start ))
if [ $rc -eq 0 ] || [ $rc -eq 124 ]; then
  echo "FAILED: a rank leaving early: mpirun exit $rc after ${secs}s (0: no error, 124: hung)"; fail=1
elif ! grep -q "rank 0 of 2: .*waited more than 5 s for the other ranks" <<<"$out"; then
  echo "FAILED: a rank leaving early: no timeout message from rank 0"; fail=1
else
  echo "ok: a rank leaving early: rank 0 aborted the job after ${secs}s (mpirun exit $rc):"
  grep "waited more than" <<<"$out" | head -1
fi
[ $fail -eq 0 ] || echo "$out" | tail -20

# (2) Rank 1 is killed (SIGKILL) after 4 s of training: mpirun must end rank 0 too.
start=$(date +%s)
out=$(timeout 120 "$MPIRUN" -np 2 sh -c '
  if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then
    exec timeout -s KILL 4 "$0" train --solver "$1" --synthetic --no-progress
  else
    exec "$0" train --solver "$1" --synthetic --no-progress
  fi' "$MPCAFFE" "$dir/solver1000000.prototxt" 2>&1)
rc=$?
secs=$(( $(date +%s) - start ))
if [ $rc -eq 0 ] || [ $rc -eq 124 ]; then
  echo "FAILED: a killed rank: mpirun exit $rc after ${secs}s (0: no error, 124: hung)"; fail=1
  echo "$out" | tail -20
elif ! grep -qiE "non-zero (exit|status)|signal 9|killed" <<<"$out"; then
  echo "FAILED: a killed rank: mpirun's output does not say a process died"; fail=1
  echo "$out" | tail -20
else
  echo "ok: a killed rank: the job ended after ${secs}s (mpirun exit $rc):"
  grep -iE "non-zero (exit|status)|signal 9|killed" <<<"$out" | head -2
fi
exit $fail

# tests/python/test_distributed.py — caffe.Solver under `mpirun -np 2 python3 script.py`: each
# rank feeds its half of every batch, solver.step(1) sums the gradients over the ranks, and the
# losses and weights follow one process stepping on the whole batch.
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import mpcaffe as caffe

MPIRUN = shutil.which("mpirun")
pytestmark = pytest.mark.skipif(
    not caffe.mpi_built() or MPIRUN is None,
    reason="mpcaffe was built without MPI, or mpirun is missing (scripts/install-deps.sh "
           "installs Open MPI)")

SCRIPT = r'''
import json, sys
import numpy as np
from google.protobuf import text_format
import mpcaffe as caffe

n, r = caffe.solver_count(), caffe.solver_rank()
B = 8 // n  # each rank's share of a batch of 8
rng = np.random.RandomState(3)
X = rng.rand(20, 8, 1, 5, 5).astype(np.float32)
Y = rng.randint(0, 3, size=(20, 8)).astype(np.float32)
for it in range(20):  # a brighter row per class: learnable
    for b in range(8):
        X[it, b, 0, int(Y[it, b])] += 1.0
net = """name: "py"
layer { name: "data" type: "Input" top: "data" top: "label"
        input_param { shape { dim: %d dim: 1 dim: 5 dim: 5 } shape { dim: %d } } }
layer { name: "ip1" type: "InnerProduct" bottom: "data" top: "ip1"
        inner_product_param { num_output: 6 weight_filler { type: "xavier" } } }
layer { name: "relu" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
        inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }
""" % (B, B)
param = caffe.SolverParameter()
text_format.Merge("net_param {" + net + "} base_lr: 0.2 momentum: 0.9 lr_policy: 'fixed' "
                  "display: 0 random_seed: 1701 average_loss: 1", param)
solver = caffe.SGDSolver(param)
solver.quiet()
losses = []
for it in range(20):
    solver.net.blobs["data"].data[...] = X[it, r::n]   # rank r: samples r, r + n, ...
    solver.net.blobs["label"].data[...] = Y[it, r::n]
    losses.append(float(solver.step(1)))
out = {"ranks": n, "losses": losses,
       "weights": [float(x) for x in solver.net.params["ip1"][0].data.ravel()]}
with open(sys.argv[1] + ".%d" % r, "w") as f:
    json.dump(out, f)
'''


def test_solver_step_under_mpirun_follows_one_process(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", MPCAFFE_MPI_TIMEOUT="120")
    one = str(tmp_path / "one.json")
    two = str(tmp_path / "two.json")
    subprocess.run([sys.executable, str(script), one], env=env, check=True, timeout=300)
    run = subprocess.run([MPIRUN, "-np", "2", "--oversubscribe", sys.executable, str(script), two],
                         env=env, timeout=300, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    ref = json.load(open(one + ".0"))
    ranks = [json.load(open(two + ".%d" % r)) for r in range(2)]
    assert ref["ranks"] == 1 and all(x["ranks"] == 2 for x in ranks)
    assert ref["losses"][0] - ref["losses"][-1] > 0.05, "the net did not learn: a weak test"
    for x in ranks:
        np.testing.assert_allclose(x["losses"], ref["losses"], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(x["weights"], ref["weights"], rtol=1e-5, atol=1e-5)
    # The ranks hold the same weights (the update ran identically everywhere).
    assert ranks[0]["weights"] == ranks[1]["weights"]


MPI4PY_SCRIPT = r'''
import sys
from mpi4py import MPI  # initialises MPI first, as scripts that use it do
import mpcaffe as caffe
from google.protobuf import text_format

comm = MPI.COMM_WORLD
assert caffe.solver_count() == comm.Get_size() == 2, (caffe.solver_count(), comm.Get_size())
assert caffe.solver_rank() == comm.Get_rank()
param = caffe.SolverParameter()
text_format.Merge("""net_param { name: "m"
  layer { name: "data" type: "Input" top: "data" top: "label"
          input_param { shape { dim: 2 dim: 3 } shape { dim: 2 } } }
  layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
          inner_product_param { num_output: 2 weight_filler { type: "xavier" } } }
  layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" } }
  base_lr: 0.1 lr_policy: 'fixed' display: 0 average_loss: 1""", param)
solver = caffe.SGDSolver(param)
solver.quiet()
solver.net.blobs["data"].data[...] = comm.Get_rank() + 1.0  # different data per rank
solver.net.blobs["label"].data[...] = comm.Get_rank()
loss = solver.step(3)
# The solver's loss is the mean over the ranks, and the weights agree: mpi4py checks both.
losses = comm.allgather(loss)
weights = comm.allgather(solver.net.params["ip"][0].data.tobytes())
assert losses[0] == losses[1], losses
assert weights[0] == weights[1]
print("mpi4py ok rank", comm.Get_rank())
'''


def test_solver_under_mpirun_beside_mpi4py(tmp_path):
    pytest.importorskip("mpi4py", reason="mpi4py is not installed (scripts/install-deps.sh "
                                         "installs it from PyPI)")
    script = tmp_path / "mpi4py_train.py"
    script.write_text(MPI4PY_SCRIPT)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", MPCAFFE_MPI_TIMEOUT="120")
    run = subprocess.run([MPIRUN, "-np", "2", "--oversubscribe", sys.executable, str(script)],
                         env=env, timeout=300, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count("mpi4py ok rank") == 2, run.stdout

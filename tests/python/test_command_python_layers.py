"""test_command_python_layers.py — `python -m mpcaffe time|train|test` runs nets with Python
layers in its own interpreter, as BVLC's caffe tool built WITH_PYTHON_LAYER does (the layer module
found in the working directory), while the bare `mpcaffe` program refuses them with a message
pointing there. The net is BVLC's examples/pycaffe/linreg.prototxt shape: two InnerProducts into a
Euclidean loss written in Python."""

import subprocess
import sys
import textwrap

import numpy as np

from mpcaffe import _command

LOSS_MODULE = textwrap.dedent('''
    import numpy as np
    import mpcaffe as caffe

    class HalfSquaredDistance(caffe.Layer):
        """loss = Σ (a − b)² / (2 N); every call is appended to the file param_str names."""
        def setup(self, bottom, top):
            self.log = self.param_str
        def reshape(self, bottom, top):
            self.diff = np.zeros_like(bottom[0].data, dtype=np.float32)
            top[0].reshape(1)
        def forward(self, bottom, top):
            self.diff[...] = bottom[0].data - bottom[1].data
            loss = float(np.sum(self.diff ** 2) / bottom[0].num / 2.0)
            top[0].data[...] = loss
            with open(self.log, "a") as f:
                f.write(f"forward {loss!r}\\n")
        def backward(self, top, propagate_down, bottom):
            for i, sign in ((0, 1), (1, -1)):
                if propagate_down[i]:
                    bottom[i].diff[...] = sign * self.diff / bottom[i].num
            with open(self.log, "a") as f:
                f.write("backward\\n")
''')

NET = """name: "LinearRegressionExample"
layer { type: "DummyData" name: "x" top: "x"
        dummy_data_param { shape { dim: 10 dim: 3 dim: 2 } data_filler { type: "gaussian" } } }
layer { type: "DummyData" name: "y" top: "y"
        dummy_data_param { shape { dim: 10 dim: 3 dim: 2 } data_filler { type: "gaussian" } } }
layer { type: "InnerProduct" name: "ipx" bottom: "x" top: "ipx"
        inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
layer { type: "InnerProduct" name: "ipy" bottom: "y" top: "ipy"
        inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
layer { type: "Python" name: "loss" bottom: "ipx" bottom: "ipy" top: "loss"
        python_param { module: "pyloss" layer: "HalfSquaredDistance" param_str: "calls.txt" }
        loss_weight: 1 }
"""


def workdir(tmp_path):
    (tmp_path / "pyloss.py").write_text(LOSS_MODULE)
    (tmp_path / "linreg.prototxt").write_text(NET)
    return tmp_path


def python_m(args, cwd):
    return subprocess.run([sys.executable, "-m", "mpcaffe"] + args, cwd=cwd, capture_output=True,
                          text=True, timeout=600)


def calls(cwd):
    path = cwd / "calls.txt"
    return path.read_text().split("\n")[:-1] if path.exists() else []


def test_time_runs_the_python_layer_forward_and_backward(tmp_path):
    cwd = workdir(tmp_path)
    run = python_m(["time", "--model", "linreg.prototxt", "--phase", "TRAIN", "--iterations", "3"], cwd)
    assert run.returncode == 0, run.stderr
    assert "loss" in run.stdout and "Python" in run.stdout, run.stdout
    log = calls(cwd)
    assert sum(l.startswith("forward") for l in log) >= 3, log
    assert log.count("backward") >= 3, log


def test_train_steps_the_solver_through_the_python_loss(tmp_path):
    cwd = workdir(tmp_path)
    (cwd / "solver.prototxt").write_text('net: "linreg.prototxt"\nbase_lr: 0.05\nlr_policy: "fixed"\n'
                                         'max_iter: 40\ndisplay: 0\nsnapshot_after_train: false\n')
    run = python_m(["train", "--solver", "solver.prototxt"], cwd)
    assert run.returncode == 0, run.stderr
    log = calls(cwd)
    losses = [float(l.split()[1]) for l in log if l.startswith("forward")]
    assert len(losses) >= 40 and log.count("backward") >= 40, log[:5]
    # The solver learned through the gradient the Python layer gave: the two projections move
    # together (towards zero, for DummyData's independent inputs), so the loss falls.
    assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5]), (losses[:5], losses[-5:])


def test_the_bare_program_refuses_python_layers_and_says_where_they_run(tmp_path):
    cwd = workdir(tmp_path)
    run = subprocess.run([_command.executable(), "time", "--model", "linreg.prototxt"], cwd=cwd,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode != 0
    assert "layer 'loss': Python layers run only with a Python interpreter" in run.stderr, run.stderr
    assert "python -m mpcaffe" in run.stderr, run.stderr
    assert calls(cwd) == []


def test_other_commands_still_reach_the_program(tmp_path):
    run = python_m(["convert", "--model", str(workdir(tmp_path) / "linreg.prototxt"), "--dtype", "int8"],
                   tmp_path)
    assert run.returncode == 0, run.stderr
    assert 'type: "Python"' in run.stdout

"""test_package.py — the package as a user gets it: one version (the CMake project version),
`python -m mpcaffe` reaching the command line, `mpcaffe.calibrate()` writing a typed net that
computes what the fp32 net computes (and failing with the command's message on bad input), and
scripts/build-wheel.sh giving a manylinux wheel (auditwheel-repaired; the OpenCL ICD loader not
bundled) that installs and imports in a fresh virtual environment."""

import os
import pathlib
import re
import subprocess
import sys
import venv
import zipfile

import numpy as np
import pytest

import mpcaffe

REPO = pathlib.Path(__file__).resolve().parents[2]

TINY = """name: "tiny"
layer { name: "input" type: "Input" top: "data" input_param { shape { dim: 4 dim: 1 dim: 6 dim: 6 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 4 kernel_size: 3
    weight_filler { type: "gaussian" std: 0.5 } bias_filler { type: "constant" value: 0.1 } } }
layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
layer { name: "ip" type: "InnerProduct" bottom: "conv" top: "ip"
  inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.3 } } }
layer { name: "prob" type: "Softmax" bottom: "ip" top: "prob" }
"""


def project_version():
    text = (REPO / "CMakeLists.txt").read_text()
    match = re.search(r"project\(mpcaffe VERSION ([0-9.]+)", text)
    assert match, "CMakeLists.txt has no project(mpcaffe VERSION ...)"
    return match.group(1)


def test_version_is_the_cmake_project_version():
    assert mpcaffe.__version__ == project_version()


def test_python_m_mpcaffe_reaches_the_command_line(tmp_path):
    run = subprocess.run([sys.executable, "-m", "mpcaffe", "--version"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == f"mpcaffe {project_version()}"
    run = subprocess.run([sys.executable, "-m", "mpcaffe", "--help"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert run.returncode == 0 and "calibrate" in run.stdout and "convert" in run.stdout
    run = subprocess.run([sys.executable, "-m", "mpcaffe", "no-such-command"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert run.returncode == 2 and "unknown command 'no-such-command'" in run.stderr


def test_every_python_m_mpcaffe_command_refuses_an_unknown_flag_with_its_usage(tmp_path):
    # The verbs `python -m mpcaffe` runs three ways (in this interpreter: train, test, time,
    # calibrate; in Python: classify; the package's program: the others) all refuse a flag they
    # do not know, before any work: status 2, the flag named, the usage, nothing on stdout. The
    # processes run side by side (each imports the package: about 0.3 s of CPU).
    def start(*args):
        return subprocess.Popen([sys.executable, "-m", "mpcaffe", *args], cwd=tmp_path,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=dict(os.environ, MPCAFFE_CACHE="off"))
    listing = start("--commands")
    listed, err = listing.communicate()
    assert listing.returncode == 0, err
    names = [n for n in listed.splitlines() if n]
    groups = {n.split()[0] for n in names if " " in n} - set(names)  # "bench", "cache"
    assert {"train", "test", "time", "calibrate", "classify", "convert", "bench"} <= \
        set(names) | groups
    runs = {}
    for name in names + sorted(groups):
        # classify is argparse's: its required operands first, or it names those instead.
        operands = ["in.png", "out.npy", "--model_def", "m.prototxt"] if name == "classify" else []
        runs[name] = start(*name.split(), *operands, "--no-such-flag")
    for name, run in runs.items():
        out, err = run.communicate()
        assert run.returncode == 2, (name, err)
        assert "--no-such-flag" in err, (name, err)
        assert f"usage: mpcaffe {name}" in err, (name, err)
        assert out == "", (name, out)


@pytest.fixture
def tiny(tmp_path):
    model = tmp_path / "tiny.prototxt"
    model.write_text(TINY)
    weights = tmp_path / "fp32.caffemodel"
    mpcaffe.Net(str(model), mpcaffe.TEST).save(str(weights))
    samples = np.random.RandomState(3).uniform(-2, 3, (12, 1, 6, 6)).astype(np.float32)
    return model, weights, samples


def probabilities(model, weights, x):
    net = mpcaffe.Net(str(model), mpcaffe.TEST, weights=str(weights))
    return np.array(net.forward(data=x)["prob"], copy=True)


def test_calibrate_writes_a_typed_net_close_to_fp32(tiny, tmp_path):
    model, weights, samples = tiny
    out, typed = tmp_path / "int8.caffemodel", tmp_path / "int8.prototxt"
    report = mpcaffe.calibrate(model, weights, out, dtype="int8", output_model=typed,
                               input=samples)
    assert "conv/bottom0" in report and "3 forward passes" in report  # 12 samples, batch 4
    x = samples[:4]
    fp32 = probabilities(model, weights, x)
    int8 = probabilities(typed, out, x)
    assert np.abs(int8 - fp32).max() < 0.06, (int8, fp32)
    # The typed prototxt computes in int8.
    net = mpcaffe.NetParameter()
    from google.protobuf import text_format
    text_format.Parse(typed.read_text(), net)
    conv = [l for l in net.layer if l.name == "conv"][0]
    assert conv.compute_data_type == mpcaffe.data_type.CAFFE_INT8_QUANTIZED


def test_calibrate_bad_input_raises_with_the_command_message(tiny, tmp_path):
    model, weights, samples = tiny
    f64 = tmp_path / "x64.npy"
    np.save(f64, samples.astype(np.float64))
    with pytest.raises(mpcaffe.Error, match=r"x64\.npy.*'<f8'"):
        mpcaffe.calibrate(model, weights, tmp_path / "c.caffemodel", dtype="int8", input=f64)
    with pytest.raises(mpcaffe.Error, match=r"input 'data'"):
        mpcaffe.calibrate(model, weights, tmp_path / "c.caffemodel", dtype="int8",
                          input=samples[:, :, :5, :5])
    with pytest.raises(mpcaffe.Error, match=r"missing\.caffemodel"):
        mpcaffe.calibrate(model, tmp_path / "missing.caffemodel", tmp_path / "c.caffemodel",
                          dtype="int8", input=samples)
    assert not (tmp_path / "c.caffemodel").exists()


def pip_unusable():
    """Why `pip wheel` / `python -m venv` cannot be used here, or None."""
    run = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True)
    if run.returncode != 0:
        return f"{sys.executable} -m pip does not run: {run.stderr.strip()[-200:]}"
    try:
        import ensurepip  # noqa: F401  (venv needs it to put pip into the environment)
    except ImportError:
        return "the ensurepip module is missing (Debian: apt-get install python3-venv)"
    return None


def auditwheel_missing():
    """Why scripts/build-wheel.sh cannot repair a wheel here, or None."""
    run = subprocess.run([sys.executable, "-m", "auditwheel", "--version"], capture_output=True,
                         text=True)
    if run.returncode != 0:
        return f"auditwheel is not installed for {sys.executable} (scripts/python-test.sh installs it)"
    return None


def test_wheel_installs_and_imports_in_a_fresh_venv(tmp_path):
    why = pip_unusable() or auditwheel_missing()
    if why:
        pytest.skip(why)
    wheels = tmp_path / "wheels"
    # scripts/build-wheel.sh: `pip wheel .` on the same persistent build tree as `pip install .`
    # (build/python/<tag>, so the wheel is built incrementally), repaired by auditwheel to a
    # manylinux tag with the libraries it needs bundled, but not the OpenCL ICD loader.
    run = subprocess.run(["bash", str(REPO / "scripts" / "build-wheel.sh"), "-o", str(wheels)],
                         env=dict(os.environ, PYTHON=sys.executable), capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    built = list(wheels.glob("mpcaffe-*.whl"))
    assert len(built) == 1, list(wheels.iterdir())
    assert f"mpcaffe-{project_version()}-" in built[0].name
    assert re.search(r"-manylinux_2_[0-9]+_x86_64\.whl$", built[0].name), built[0].name
    with zipfile.ZipFile(built[0]) as wheel:
        wheel_names = wheel.namelist()
        bundled = [n for n in wheel_names if n.startswith("mpcaffe.libs/")]
    assert any("libprotobuf" in n for n in bundled), bundled
    assert not any("libOpenCL" in n or "libnvrtc" in n or "libopencv" in n for n in bundled), bundled
    # The image codec plugin (OpenCV, opened at the first image) is in the package, not OpenCV.
    assert any(n == "mpcaffe/lib/libmpcaffe_image_codec.so" for n in wheel_names), wheel_names
    # A fresh environment; numpy and protobuf (the wheel's dependencies) come from the system
    # site-packages so the test needs no network (--ignore-installed: an mpcaffe installed there
    # must not stand in for the wheel).
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=True).create(env_dir)
    python = env_dir / "bin" / "python"
    run = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--ignore-installed",
                          str(built[0])], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    check = ("import mpcaffe, sys; print(mpcaffe.__file__); print(mpcaffe.__version__); "
             "print(len(mpcaffe.devices()))")
    run = subprocess.run([str(python), "-c", check], cwd=tmp_path, env=env, capture_output=True,
                         text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    where, version, devices = run.stdout.split()
    assert pathlib.Path(where).resolve().is_relative_to(env_dir.resolve()), where
    assert version == project_version()
    assert int(devices) >= 1
    run = subprocess.run([str(python), "-m", "mpcaffe", "--version"], cwd=tmp_path, env=env,
                         capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.strip() == f"mpcaffe {project_version()}", run
    # The installed command finds the plugin in the package and, having loaded it before the
    # drivers, still lists every device the extension (no OpenCV in it) lists.
    check = "import mpcaffe; print('\\n'.join(d['name'][:34] for d in mpcaffe.devices()))"
    names = subprocess.run([str(python), "-c", check], cwd=tmp_path, env=env, capture_output=True,
                           text=True).stdout.split("\n")
    run = subprocess.run([str(python), "-m", "mpcaffe", "devices", "--verbose"], cwd=tmp_path,
                         env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "images: OpenCV " in run.stdout and str(env_dir.resolve()) in run.stdout, run.stdout
    for name in filter(None, names):
        assert name in run.stdout, (name, run.stdout)

"""mpcaffe._command — the `mpcaffe` command line shipped inside the package (mpcaffe/bin/mpcaffe,
built with the extension module): `python -m mpcaffe ...` runs it (its `classify` verb is
mpcaffe.classify's, in Python), and `mpcaffe.calibrate()` / `convert()` are `mpcaffe calibrate` /
`mpcaffe convert` as functions, so the two share one implementation."""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def executable():
    """Path of the `mpcaffe` command: the package's own copy, else one on PATH."""
    own = Path(__file__).resolve().parent / "bin" / "mpcaffe"
    if own.is_file() and os.access(own, os.X_OK):
        return str(own)
    found = shutil.which("mpcaffe")
    if found:
        return found
    from ._mpcaffe import Error
    raise Error(f"the mpcaffe command is not installed: neither {own} nor `mpcaffe` on PATH "
                "(reinstall the package with `pip install .`)")


def main(argv=None):
    """Runs `mpcaffe <argv>` in this process's place (the exit status is the command's)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    exe = executable()
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(exe, [exe] + argv)


def _run(args, progress=False):
    """Runs `mpcaffe <args>`; returns its standard output, or raises mpcaffe.Error with its
    message when it fails."""
    run = subprocess.run([executable()] + args, stdout=subprocess.PIPE,
                         stderr=None if progress else subprocess.PIPE, text=True)
    if run.returncode != 0:
        from ._mpcaffe import Error
        message = (run.stderr or "").strip() or run.stdout.strip()
        raise Error(message or f"mpcaffe {args[0]} failed with status {run.returncode}")
    return run.stdout


def convert(model, dtype, device=None):
    """The typed variant of an fp32 net (`mpcaffe convert`): model is a .prototxt path, dtype
    "fp16", "int16", "int8" or "int8w4", device an index or selector (the layers that compute in
    the type depend on what the device can do). Returns the typed prototxt as text; raises
    mpcaffe.Error with the command's message."""
    args = ["convert", "--model", os.fspath(model), "--dtype", str(dtype)]
    if device is not None:
        args += ["--device", str(device)]
    return _run(args)


def calibrate(model, weights, output, dtype=None, output_model=None, input=None,
              iterations=None, device=None, progress=False, images=None, resize=None,
              mean_file=None, mean_values=None, raw_scale=None, scale=None, channel_swap=None,
              transform_from=None, report=None, report_images=None):
    """Calibrates a trained net for a reduced-precision data type (`mpcaffe calibrate`).

    model: the fp32 .prototxt (with `dtype`) or a typed one (its own types when dtype is None);
    weights: the fp32 .caffemodel; output: the calibrated .caffemodel to write; dtype: "int8",
    "int16" or "fp16"; output_model: where to write the typed .prototxt; input: a .npy path or a
    float32 NumPy array (N, C, H, W) of samples for the net's Input layer (None: the net's Data
    layers); iterations: forward passes (default: the samples once, or 20 over Data layers);
    device: an index or a selector ("pocl", "intel", "gpu").

    images: photographs instead of `input` (a folder, a list file, or one image), read and
    preprocessed as `mpcaffe calibrate --images` does: resize (H, W) before the centre crop to the
    net's input, mean_file (a mean.binaryproto) or mean_values (one per channel, or one), raw_scale
    and scale, channel_swap (pycaffe's order, e.g. (2, 1, 0)), or transform_from (a train_val
    prototxt whose transform_param gives them). report: a JSON file for the report of what the type
    changed (fp32 against calibrated, per image and over the set); report_images: the images that
    report classifies (e.g. held out; default: the calibration images).

    Returns the command's report (the quantizer ranges table) as text. Raises mpcaffe.Error with
    the command's message (naming the file or layer at fault) when it fails.
    """
    args = ["calibrate", "--model", str(model), "--weights", str(weights), "--output", str(output)]
    if dtype is not None:
        args += ["--dtype", str(dtype)]
    if output_model is not None:
        args += ["--output-model", str(output_model)]
    if iterations is not None:
        args += ["--iterations", str(int(iterations))]
    if device is not None:
        args += ["--device", str(device)]
    if not progress:
        args.append("--no-progress")

    def numbers(values):
        return ",".join(str(v) for v in (values if hasattr(values, "__iter__") else [values]))

    for flag, value in (("--images", images), ("--mean-file", mean_file),
                        ("--transform-from", transform_from), ("--report", report),
                        ("--report-images", report_images)):
        if value is not None:
            args += [flag, os.fspath(value)]
    for flag, value in (("--resize", resize), ("--mean-values", mean_values),
                        ("--raw-scale", raw_scale), ("--scale", scale),
                        ("--channel-swap", channel_swap)):
        if value is not None:
            args += [flag, numbers(value)]
    with tempfile.TemporaryDirectory(prefix="mpcaffe-calibrate-") as tmp:
        if input is not None:
            if isinstance(input, (str, os.PathLike)):
                args += ["--input", str(input)]
            else:
                import numpy
                path = os.path.join(tmp, "input.npy")
                numpy.save(path, numpy.ascontiguousarray(input, dtype=numpy.float32))
                args += ["--input", path]
        return _run(args, progress)

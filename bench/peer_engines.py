"""bench/peer_engines.py — the CPU engines bench/peers.py measures mpcaffe against (ONNX Runtime,
OpenVINO, OpenCV DNN) and the CPU instruction-set level each one runs at.

A level is what the CPU has (`native`, read from /proc/cpuinfo) or `avx2`: every engine that has
a knob is held to AVX2 on an AVX-512 machine, so one machine measures both levels:

- mpcaffe on Intel's CPU runtime: `CL_CONFIG_CPU_TARGET_ARCH=core-avx2` (its compiler then
  targets AVX2; the kernels' `__AVX512BW__` paths drop out);
- mpcaffe on PoCL: `POCL_KERNELLIB_NAME=avx2` (Debian's distro build: the kernel-library
  variant decides the CPU it compiles for, and POCL_LLVM_CPU_NAME is ignored there) and
  `POCL_LLVM_CPU_NAME=haswell` (a PoCL built for one host); the device becomes `pthread-haswell`,
  which check_device_level() asks of every mpcaffe row (mpcaffe sets these itself under
  MPCAFFE_ISA=avx2 unless they are set);
- mpcaffe's host loops (quantization, fillers): `MPCAFFE_ISA=avx2`;
- OpenVINO's CPU plugin (oneDNN inside): `ONEDNN_MAX_CPU_ISA=AVX2` (its profile then names
  `brgconv_avx2_*` kernels instead of `brgconv_avx512_*`);
- OpenCV DNN: `OPENCV_CPU_DISABLE=AVX512-SKX` (its AVX-512 dispatch off, AVX2 kept);
- ONNX Runtime: none. MLAS picks its kernels from CPUID and has no setting to lower them, so
  its rows at the `avx2` level are still measured at the CPU's own level, and say so.

The environment has to be set before any of these libraries loads (each reads it once), so
bench/peers.py calls apply_level() first thing.
"""
import os

LEVEL_ENV = {
    "native": {},
    "avx2": {"CL_CONFIG_CPU_TARGET_ARCH": "core-avx2", "POCL_KERNELLIB_NAME": "avx2",
             "POCL_LLVM_CPU_NAME": "haswell",
             "MPCAFFE_ISA": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
             "OPENCV_CPU_DISABLE": "AVX512-SKX"},
}
# The engines that cannot be held to a level, and why.
NO_CAP = {"onnxruntime": "ONNX Runtime's MLAS has no ISA cap"}
ENGINES = ("onnxruntime", "openvino", "opencv")
PIP_NAME = {"onnxruntime": "onnxruntime", "openvino": "openvino",
            "opencv": "opencv-python-headless"}
MODULE = {"onnxruntime": "onnxruntime", "openvino": "openvino", "opencv": "cv2"}


def cpu_isa(cpuinfo="/proc/cpuinfo"):
    """The CPU's own vector level: "AVX-512 VNNI", "AVX-512", "AVX2" or "no AVX2"."""
    flags = set()
    try:
        with open(cpuinfo) as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        return "unknown"
    if "avx512f" in flags:
        return "AVX-512 VNNI" if "avx512_vnni" in flags else "AVX-512"
    return "AVX2" if "avx2" in flags else "no AVX2"


def apply_level(level):
    """Sets the level's caps in os.environ (before the engines load); a CPU lacking AVX2 cannot
    run the `avx2` level."""
    if level not in LEVEL_ENV:
        raise SystemExit(f"peers.py: --level {level!r}: expected {' or '.join(LEVEL_ENV)}")
    if level == "avx2" and cpu_isa() == "no AVX2":
        raise SystemExit("peers.py: --level avx2: this CPU has no AVX2")
    os.environ.update(LEVEL_ENV[level])


def check_device_level(level, device_name):
    """Stops the run when an mpcaffe device did not take the level's cap: at `avx2`, a PoCL
    device still named for an AVX-512 CPU (`pthread-skylake-avx512-…`) compiles AVX-512 code."""
    if level == "avx2" and "avx512" in device_name:
        raise SystemExit(f"peers.py: --level avx2: device {device_name!r} still compiles for "
                         "AVX-512 (the caps in LEVEL_ENV did not take on this OpenCL runtime)")


def engine_level(engine, level, isa=None):
    """What a row's engine ran at: the CPU's level, or "AVX2 (cap)" — or the CPU's level with the
    reason where the engine has no cap."""
    isa = isa or cpu_isa()
    if level == "native" or isa in ("AVX2", "no AVX2"):
        return isa
    if engine in NO_CAP:
        return f"{isa} ({NO_CAP[engine]})"
    return "AVX2 (capped)"


def available(engines):
    """(the engines of `engines` that import, a note per missing one)."""
    import importlib.util
    found, notes = [], []
    for e in engines:
        if e not in MODULE:
            raise SystemExit(f"peers.py: --peers: unknown engine {e!r} (known: "
                             f"{', '.join(ENGINES)})")
        if importlib.util.find_spec(MODULE[e]) is None:
            notes.append(f"{e}: not installed (pip install {PIP_NAME[e]}): no {e} rows")
        else:
            found.append(e)
    return found, notes


def version(engine):
    import importlib
    return importlib.import_module(MODULE[engine]).__version__


def openvino_config(threads=0, perf_count=False):
    """The CPU plugin's settings for every compile here (fp32 asked for: see openvino_runner)."""
    config = {"INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY",
              "PERF_COUNT": bool(perf_count)}
    if threads:
        config["INFERENCE_NUM_THREADS"] = threads
    return config


def child_compile_failure(code, path, python=None):
    """Why `code` (Python text compiling the model at sys.argv[1]) failed in a child process,
    or None where it exited cleanly. A segmentation fault inside an engine's compile takes the
    process with it (OpenVINO 2026.4's compile_model on DenseNet-121's ONNX export): tried in a
    child first, a peer that cannot compile a net drops out of its rows instead of the run."""
    import subprocess
    import sys
    r = subprocess.run([python or sys.executable, "-c", code, path], capture_output=True,
                       text=True)
    if r.returncode == 0:
        return None
    why = (f"killed by signal {-r.returncode}" if r.returncode < 0
           else f"exit status {r.returncode}")
    last = r.stderr.strip().splitlines()[-1:] if r.stderr.strip() else []
    return why + (f": {last[0]}" if last else "")


def openvino_compile_failure(path, threads=0):
    """child_compile_failure of OpenVINO's CPU plugin on the ONNX file `path`."""
    code = ("import sys, openvino as ov; ov.Core().compile_model(sys.argv[1], 'CPU', "
            + repr(openvino_config(threads)) + ")")
    return child_compile_failure(code, path)


def openvino_runner(path, feeds, threads=0, perf_count=False):
    """OpenVINO's CPU plugin on an ONNX file: a callable running one synchronous inference (its
    .request the infer request, for get_profiling_info(); .compiled the compiled model). fp32 is
    asked for explicitly: on a CPU with AVX-512 BF16 the plugin's default precision hint is bf16. A QDQ net runs in int8
    (OpenVINO turns its QuantizeLinear / DequantizeLinear pairs into FakeQuantize and its
    low-precision transformations move the convolutions and matrix products to u8 × i8)."""
    import openvino as ov
    core = ov.Core()
    compiled = core.compile_model(path, "CPU", openvino_config(threads, perf_count))
    request = compiled.create_infer_request()
    inputs = {compiled.input(name): x for name, x in feeds.items()}

    def run():
        return request.infer(inputs)
    run.request = request
    run.compiled = compiled
    return run


def opencv_runner(prototxt, weights, feeds):
    """OpenCV's DNN module on the Caffe files themselves (fp32 only: it has no int8 path for
    them)."""
    import cv2
    net = cv2.dnn.readNetFromCaffe(prototxt, weights)
    (x,) = feeds.values()

    def run():
        net.setInput(x)
        return net.forward()
    return run

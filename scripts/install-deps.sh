#!/usr/bin/env bash
# scripts/install-deps.sh — installs what mpcaffe needs to build and test, only what is missing
# (Debian packages; Python packages once the Python side exists). Safe to run repeatedly.
set -euo pipefail

DEBIAN_PACKAGES=(
  cmake g++ make pkg-config
  pocl-opencl-icd ocl-icd-opencl-dev opencl-headers clinfo oclgrind
  mesa-opencl-icd
  libclblast-dev libsqlite3-dev sqlite3
  libprotobuf-dev protobuf-compiler
  libgtest-dev libbenchmark-dev libgemmlowp-dev
  liblmdb-dev libhdf5-dev zlib1g-dev dataset-fashion-mnist
  libopencv-core-dev libopencv-imgproc-dev libopencv-imgcodecs-dev
  python3-dev python3-venv graphviz
  libopenmpi-dev openmpi-bin
)

missing=()
for p in "${DEBIAN_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all Debian packages present"
fi

# Python packages the tests use (the caffemodel check reads our files with Python protobuf).
PYTHON=${PYTHON:-python3}
# pydot (caffe.draw, with Graphviz above), h5py (HDF5 weights), pillow (caffe.io.load_image),
# mpi4py (scripts that use MPI beside mpcaffe's own under mpirun; built against Open MPI above),
# opencv-python-headless < 5 (cv2.dnn, the independent Caffe reader test_classify.py checks
# caffe.Classifier's scores against).
PIP_PACKAGES=(protobuf numpy pytest pybind11 scikit-build-core onnx onnxruntime matplotlib pydot h5py pillow mpi4py
              "opencv-python-headless<5")
PIP_MODULES=(google.protobuf numpy pytest pybind11 scikit_build_core onnx onnxruntime matplotlib pydot h5py PIL mpi4py cv2)
# One interpreter looks for every module (found, not imported: importing onnxruntime, cv2 and
# matplotlib one process each costs more than the rest of a warm `make test`'s set-up).
pip_missing=()
absent=$("$PYTHON" -c 'import importlib.util, sys
def found(m):
    try:
        return importlib.util.find_spec(m) is not None
    except (ImportError, ValueError):
        return False
print(" ".join(str(i) for i, m in enumerate(sys.argv[1:]) if not found(m)))' "${PIP_MODULES[@]}") ||
  absent="${!PIP_MODULES[*]}"
for i in $absent; do pip_missing+=("${PIP_PACKAGES[$i]}"); done
if [ ${#pip_missing[@]} -gt 0 ]; then
  echo "install-deps: pip installing ${pip_missing[*]}"
  "$PYTHON" -m pip install --quiet "${pip_missing[@]}"
else
  echo "install-deps: all Python packages present"
fi

# Intel's OpenCL CPU runtime (PyPI intel-opencl-rt; intel-cmplr-lib-rt brings libimf.so): a
# second OpenCL implementation beside PoCL, with native fp16 and the integer dot product. It
# goes into a virtual environment of its own under /opt/mpcaffe and is registered with the ICD
# loader by one .icd file naming its libintelocl.so (RUNPATH $ORIGIN: nothing else is needed).
# A failure is recorded in /opt/mpcaffe/vendors.txt, which the per-device tests print when they
# skip a vendor, and the script goes on: PoCL alone still runs everything.
PREFIX=${MPCAFFE_VENDOR_PREFIX:-/opt/mpcaffe}
INTEL_VENV="$PREFIX/intel-opencl"
INTEL_LIB="$INTEL_VENV/lib/libintelocl.so"
INTEL_ICD=/etc/OpenCL/vendors/mpcaffe-intel-opencl.icd
STATUS="$PREFIX/vendors.txt"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO mkdir -p "$PREFIX"
record() { echo "$1" | $SUDO tee -a "$STATUS.new" >/dev/null; echo "install-deps: $1"; }
$SUDO rm -f "$STATUS.new"

# The OpenCL platforms the ICD loader lists, asked once (after Intel's runtime is registered
# below); rusticl's CPU device is listed only with RUSTICL_ENABLE=llvmpipe, which mpcaffe sets for
# itself unless RUSTICL_ENABLE is set (device/opencl/opencl_device.cc).
PLATFORMS=""
list_platforms() {
  [ -n "$PLATFORMS" ] || PLATFORMS=$(RUSTICL_ENABLE=llvmpipe clinfo -l 2>/dev/null || echo none)
}
intel_reason=""
if [ ! -e "$INTEL_LIB" ]; then
  echo "install-deps: installing Intel's OpenCL CPU runtime into $INTEL_VENV"
  if ! out=$($SUDO "$PYTHON" -m venv "$INTEL_VENV" 2>&1); then
    intel_reason="python3 -m venv $INTEL_VENV failed: $(echo "$out" | tail -1)"
  elif ! out=$($SUDO "$INTEL_VENV/bin/pip" install --quiet intel-opencl-rt intel-cmplr-lib-rt 2>&1); then
    intel_reason="pip install intel-opencl-rt intel-cmplr-lib-rt failed: $(echo "$out" | tail -1)"
  elif [ ! -e "$INTEL_LIB" ]; then
    intel_reason="the intel-opencl-rt wheel has no lib/libintelocl.so"
  fi
fi
if [ -z "$intel_reason" ]; then
  missing_libs=$(ldd "$INTEL_LIB" 2>&1 | grep "not found" || true)
  if [ -n "$missing_libs" ]; then
    intel_reason="libintelocl.so cannot load: $(echo $missing_libs)"
  else
    [ "$(cat "$INTEL_ICD" 2>/dev/null)" = "$INTEL_LIB" ] ||
      { $SUDO mkdir -p /etc/OpenCL/vendors && echo "$INTEL_LIB" | $SUDO tee "$INTEL_ICD" >/dev/null; }
    list_platforms
    if grep -q "Intel(R) OpenCL" <<<"$PLATFORMS"; then
      version=$("$INTEL_VENV/bin/pip" show intel-opencl-rt 2>/dev/null | sed -n 's/^Version: //p')
      record "intel: installed intel-opencl-rt $version ($INTEL_LIB, ICD $INTEL_ICD)"
    else
      intel_reason="registered $INTEL_ICD, but clinfo lists no Intel(R) OpenCL platform"
    fi
  fi
fi
[ -z "$intel_reason" ] || record "intel: NOT installed: $intel_reason"
list_platforms
if grep -q "Portable Computing Language" <<<"$PLATFORMS"; then
  record "pocl: installed $(dpkg-query -W -f='${Version}' pocl-opencl-icd)"
else
  record "pocl: NOT available: clinfo lists no Portable Computing Language platform"
fi
# Mesa's rusticl (its llvmpipe device).
if grep -q "rusticl" <<<"$PLATFORMS"; then
  record "rusticl: installed mesa-opencl-icd $(dpkg-query -W -f='${Version}' mesa-opencl-icd)"
else
  record "rusticl: NOT available: clinfo (RUSTICL_ENABLE=llvmpipe) lists no rusticl platform"
fi
if command -v oclgrind >/dev/null; then
  record "oclgrind: installed $(dpkg-query -W -f='${Version}' oclgrind 2>/dev/null)"
else
  record "oclgrind: NOT installed (Debian package oclgrind)"
fi
# NVRTC and the CUDA headers (cuda.h, cuda_fp16.h) where no CUDA toolkit is installed: PyPI's
# nvidia-cuda-nvrtc (nvrtc.h, libnvrtc.so.13 and its builtins) and nvidia-cuda-runtime (the
# runtime and driver API headers) in a virtual environment of their own, linked as
# $PREFIX/cuda (include/, lib/), which CMake takes when find_package(CUDAToolkit) finds
# nothing. The CUDA backend and its NVRTC tests then build on any machine; no GPU driver comes
# with them (libcuda.so.1 is opened at run time). MPCAFFE_CUDA_FROM_PYPI=1 installs them even
# beside a toolkit.
CUDA_VENV="$PREFIX/cuda-pypi"
CUDA_ROOT="$PREFIX/cuda"
cuda_reason=""
if [ -e /usr/local/cuda/include/nvrtc.h ] && [ "${MPCAFFE_CUDA_FROM_PYPI:-0}" != 1 ]; then
  record "cuda: toolkit at /usr/local/cuda ($(ls /usr/local/cuda/lib64/libnvrtc.so.* 2>/dev/null | head -1))"
else
  if [ ! -e "$CUDA_ROOT/include/nvrtc.h" ] || [ ! -e "$CUDA_ROOT/include/cuda_fp16.h" ]; then
    echo "install-deps: installing NVRTC and the CUDA headers from PyPI into $CUDA_VENV"
    if ! out=$($SUDO "$PYTHON" -m venv "$CUDA_VENV" 2>&1); then
      cuda_reason="python3 -m venv $CUDA_VENV failed: $(echo "$out" | tail -1)"
    elif ! out=$($SUDO "$CUDA_VENV/bin/pip" install --quiet nvidia-cuda-nvrtc nvidia-cuda-runtime 2>&1); then
      cuda_reason="pip install nvidia-cuda-nvrtc nvidia-cuda-runtime failed: $(echo "$out" | tail -1)"
    else
      nvrtc_h=$(find "$CUDA_VENV" -path '*/nvidia/*/include/nvrtc.h' | head -1)
      if [ -z "$nvrtc_h" ]; then
        cuda_reason="the nvidia-cuda-nvrtc wheel has no include/nvrtc.h"
      else
        $SUDO ln -sfn "$(dirname "$(dirname "$nvrtc_h")")" "$CUDA_ROOT"
      fi
    fi
  fi
  if [ -z "$cuda_reason" ]; then
    for f in include/nvrtc.h include/cuda.h include/cuda_fp16.h; do
      [ -e "$CUDA_ROOT/$f" ] || cuda_reason="${cuda_reason:+$cuda_reason; }$CUDA_ROOT/$f missing"
    done
    ls "$CUDA_ROOT"/lib/libnvrtc.so.* >/dev/null 2>&1 || cuda_reason="${cuda_reason:+$cuda_reason; }no $CUDA_ROOT/lib/libnvrtc.so.*"
  fi
  if [ -z "$cuda_reason" ]; then
    version=$("$CUDA_VENV/bin/pip" show nvidia-cuda-nvrtc 2>/dev/null | sed -n 's/^Version: //p')
    record "cuda: NVRTC $version and the CUDA headers from PyPI ($CUDA_ROOT); no toolkit, no driver"
  else
    record "cuda: NOT installed: $cuda_reason"
  fi
fi
$SUDO mv "$STATUS.new" "$STATUS"

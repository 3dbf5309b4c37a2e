#!/usr/bin/env bash
# scripts/install-deps.sh — installs what mpcaffe needs to build and test, only what is missing
# (Debian packages; Python packages once the Python side exists). Safe to run repeatedly.
set -euo pipefail

DEBIAN_PACKAGES=(
  cmake g++ make pkg-config
  pocl-opencl-icd ocl-icd-opencl-dev opencl-headers clinfo oclgrind
  libclblast-dev libsqlite3-dev sqlite3
  libprotobuf-dev protobuf-compiler
  libgtest-dev libbenchmark-dev libgemmlowp-dev
  liblmdb-dev zlib1g-dev dataset-fashion-mnist
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
# mpi4py (scripts that use MPI beside mpcaffe's own under mpirun; built against Open MPI above).
PIP_PACKAGES=(protobuf numpy pytest pybind11 scikit-build-core onnx onnxruntime matplotlib pydot h5py pillow mpi4py)
PIP_MODULES=(google.protobuf numpy pytest pybind11 scikit_build_core onnx onnxruntime matplotlib pydot h5py PIL mpi4py)
pip_missing=()
for i in "${!PIP_PACKAGES[@]}"; do
  "$PYTHON" -c "import ${PIP_MODULES[$i]}" 2>/dev/null || pip_missing+=("${PIP_PACKAGES[$i]}")
done
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
    if clinfo -l 2>/dev/null | grep "Intel(R) OpenCL" >/dev/null; then
      version=$("$INTEL_VENV/bin/pip" show intel-opencl-rt 2>/dev/null | sed -n 's/^Version: //p')
      record "intel: installed intel-opencl-rt $version ($INTEL_LIB, ICD $INTEL_ICD)"
    else
      intel_reason="registered $INTEL_ICD, but clinfo lists no Intel(R) OpenCL platform"
    fi
  fi
fi
[ -z "$intel_reason" ] || record "intel: NOT installed: $intel_reason"
# (grep reads to the end: with pipefail, `grep -q` closing the pipe early fails clinfo.)
if clinfo -l 2>/dev/null | grep "Portable Computing Language" >/dev/null; then
  record "pocl: installed $(dpkg-query -W -f='${Version}' pocl-opencl-icd)"
else
  record "pocl: NOT available: clinfo lists no Portable Computing Language platform"
fi
if command -v oclgrind >/dev/null; then
  record "oclgrind: installed $(dpkg-query -W -f='${Version}' oclgrind 2>/dev/null)"
else
  record "oclgrind: NOT installed (Debian package oclgrind)"
fi
$SUDO mv "$STATUS.new" "$STATUS"

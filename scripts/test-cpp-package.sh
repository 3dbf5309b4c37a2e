#!/usr/bin/env bash
# scripts/test-cpp-package.sh <build-dir> — the C++ package as a consumer sees it (CTest entry
# `cpp_package`): installs the build into a temporary prefix, compiles each installed header
# alone against it, checks that the CMake and pkg-config files name no path of this machine,
# moves the prefix to another folder, checks the version everywhere it is reported, builds
# examples/cpp against the moved prefix with find_package(mpcaffe) (and the same file with
# pkg-config), then runs the installed command and the example on a tiny net trained for a few
# steps to answer class 2: calibrated to int8 and run on the default device, the example must
# still answer class 2 for every image.
set -euo pipefail
CMAKE=${CMAKE:-cmake}
BUILD=$(cd "${1:?usage: $0 <build-dir>}" && pwd)
SRC=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/mpcaffe-cpp-package-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
fail() { echo "cpp_package: FAILED: $*" >&2; exit 1; }

VERSION=$(sed -n 's/^project(mpcaffe VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
[ -n "$VERSION" ] || fail "no project(mpcaffe VERSION ...) in $SRC/CMakeLists.txt"

echo "cpp_package: cmake --install $BUILD --prefix $WORK/prefix"
"$CMAKE" --install "$BUILD" --prefix "$WORK/prefix" > "$WORK/install.log" || {
  cat "$WORK/install.log"
  fail "cmake --install"
}
P=$WORK/prefix
for f in bin/mpcaffe include/mpcaffe/mpcaffe.h include/mpcaffe/version.h \
  lib/cmake/mpcaffe/mpcaffeConfig.cmake lib/cmake/mpcaffe/mpcaffeConfigVersion.cmake \
  lib/pkgconfig/mpcaffe.pc; do
  [ -e "$P/$f" ] || fail "$f is not installed"
done
ls "$P"/lib/libmpcaffe_net.* > /dev/null 2>&1 || fail "libmpcaffe_net is not installed"
[ -e "$P/lib/libmpcaffe_image_codec.so" ] || fail "the image codec plugin is not installed"
# Internals stay private: no kernel generators, backends, layers or quantizers.
for f in libdnn cache device/opencl layers/layer.h layers/layer_registry.h quant/quantizer.h \
  codegen/kernel_writer.h tools; do
  [ ! -e "$P/include/mpcaffe/$f" ] || fail "internal header(s) $f installed"
done

# The installed headers stand on their own: each compiles alone with only the prefix's include
# folders (a header that includes one that is not installed fails here), and together they are
# exactly what mpcaffe/mpcaffe.h includes, nothing more.
HEADER_FLAGS=(-std=c++17 -fsyntax-only -I"$P/include" -I"$P/include/mpcaffe")
(cd "$P/include" && find mpcaffe -name '*.h' | sort) > "$WORK/installed-headers.txt"
while read -r header; do
  echo "#include <$header>" | c++ "${HEADER_FLAGS[@]}" -x c++ - 2> "$WORK/header.log" || {
    cat "$WORK/header.log"
    fail "the installed $header does not compile alone against the prefix"
  }
done < "$WORK/installed-headers.txt"
echo "#include <mpcaffe/mpcaffe.h>" |
  c++ "${HEADER_FLAGS[@]}" -x c++ - -M -MF "$WORK/closure.d" > /dev/null || fail "mpcaffe.h -M"
tr ' \\' '\n\n' < "$WORK/closure.d" | sed -n "s|^$P/include/||p" | sort -u |
  grep -v '^$' > "$WORK/closure.txt"
diff "$WORK/closure.txt" "$WORK/installed-headers.txt" > "$WORK/closure.diff" || {
  cat "$WORK/closure.diff"
  fail "the installed headers (>) are not mpcaffe/mpcaffe.h's closure (<)"
}
echo "cpp_package: $(wc -l < "$WORK/installed-headers.txt") installed headers, each compiles alone"

# Relocatable: the CMake and pkg-config files name no path of this machine (dependencies are
# imported targets found again by mpcaffeConfig.cmake, the prefix is relative to the files): no
# absolute path in a CMake string or list, none in the .pc file's flags (only its cuda_libdir
# variable, where the CUDA toolkit was, names one).
{
  grep -Hn -E -e "$P|$SRC|$BUILD/" -e '[";]/[^"]' "$P"/lib/cmake/mpcaffe/*.cmake || true
  grep -Hn -E -e "$P|$SRC|$BUILD/" -e ' /' "$P/lib/pkgconfig/mpcaffe.pc" || true
} | { grep -v '^[^:]*:[0-9]*:#' || true; } > "$WORK/paths.txt"
if [ -s "$WORK/paths.txt" ]; then
  cat "$WORK/paths.txt"
  fail "the installed package names the paths above"
fi
# The rest of the test uses a copy of the prefix in another folder, the original removed.
cp -a "$P" "$WORK/moved"
rm -rf "$P"
P=$WORK/moved

[ "$("$P/bin/mpcaffe" --version)" = "mpcaffe $VERSION" ] || fail "mpcaffe --version is not $VERSION"
grep -q "MPCAFFE_VERSION \"$VERSION\"" "$P/include/mpcaffe/version.h" || fail "version.h"
grep -q "PACKAGE_VERSION \"$VERSION\"" "$P/lib/cmake/mpcaffe/mpcaffeConfigVersion.cmake" ||
  fail "mpcaffeConfigVersion.cmake does not say $VERSION"

echo "cpp_package: examples/cpp against the moved prefix (find_package(mpcaffe CONFIG))"
# Only the prefix: the source and build trees' headers must not be needed.
"$CMAKE" -S "$SRC/examples/cpp" -B "$WORK/example" -DCMAKE_PREFIX_PATH="$P" \
  -DCMAKE_BUILD_TYPE=Release > "$WORK/example.log" 2>&1 &&
  "$CMAKE" --build "$WORK/example" >> "$WORK/example.log" 2>&1 || {
  cat "$WORK/example.log"
  fail "building examples/cpp against the installed package"
}
if grep -q -e "$SRC" -e "$BUILD/" "$WORK/example/CMakeFiles/classify.dir/flags.make"; then
  fail "the example's flags point into the source or build tree"
fi

if command -v pkg-config > /dev/null; then
  export PKG_CONFIG_PATH=$P/lib/pkgconfig
  [ "$(pkg-config --modversion mpcaffe)" = "$VERSION" ] || fail "pkg-config --modversion"
  echo "cpp_package: examples/cpp/classify.cc with pkg-config --cflags --libs mpcaffe"
  # shellcheck disable=SC2046
  c++ -std=c++17 -o "$WORK/classify-pc" "$SRC/examples/cpp/classify.cc" \
    $(pkg-config --cflags --libs mpcaffe) || fail "compiling with pkg-config's flags"
else
  echo "cpp_package: pkg-config is not installed; the .pc file was checked for presence only"
fi

echo "cpp_package: train a tiny net, calibrate it to int8, classify with the example"
cd "$WORK"
BODY='
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 4 kernel_size: 3
    weight_filler { type: "gaussian" std: 0.3 } bias_filler { type: "constant" value: 0.1 } } }
layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
layer { name: "ip" type: "InnerProduct" bottom: "conv" top: "ip"
  inner_product_param { num_output: 3
    weight_filler { type: "gaussian" std: 0.1 } bias_filler { type: "constant" value: 0 } } }'
cat > train.prototxt <<EOF
name: "tiny"
layer { name: "data" type: "DummyData" top: "data" top: "label"
  dummy_data_param { data_filler { type: "uniform" min: -1 max: 1 }
                     data_filler { type: "constant" value: 2 }
                     shape { dim: 8 dim: 1 dim: 6 dim: 6 } shape { dim: 8 } } }
$BODY
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
EOF
cat > deploy.prototxt <<EOF
name: "tiny"
layer { name: "input" type: "Input" top: "data" input_param { shape { dim: 4 dim: 1 dim: 6 dim: 6 } } }
$BODY
layer { name: "prob" type: "Softmax" bottom: "ip" top: "prob" }
EOF
cat > solver.prototxt <<EOF
net: "train.prototxt"
base_lr: 0.05
lr_policy: "fixed"
max_iter: 30
display: 0
snapshot: 30
snapshot_prefix: "tiny"
EOF
"$P/bin/mpcaffe" train --solver solver.prototxt --no-progress > train.log 2>&1 || {
  cat train.log
  fail "mpcaffe train"
}
# Four samples in [-1, 1] (the same values as x.npy for calibrate and raw x.f32 for classify).
python3 - <<'EOF'
import math, struct
values = [math.sin(0.7 * i) for i in range(4 * 36)]
raw = struct.pack("<%df" % len(values), *values)
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 1, 6, 6), }"
header += " " * (63 - (10 + len(header)) % 64) + "\n"
with open("x.npy", "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + raw)
with open("x.f32", "wb") as f:
    f.write(raw)
EOF
"$P/bin/mpcaffe" calibrate --model deploy.prototxt --weights tiny_iter_30.caffemodel --dtype int8 \
  --input x.npy --output int8.caffemodel --output-model int8.prototxt --no-progress \
  > calibrate.log 2>&1 || {
  cat calibrate.log
  fail "mpcaffe calibrate"
}
DEVICE=$("$P/bin/mpcaffe" devices | sed -n 's/^default device: //p')
# The moved prefix's command finds its own image codec plugin (beside bin/, in lib/).
"$P/bin/mpcaffe" devices --verbose > devices.log 2>&1 || { cat devices.log; fail "mpcaffe devices"; }
grep -q "^images: OpenCV .*($(realpath "$P")/lib/libmpcaffe_image_codec.so)" devices.log ||
  { cat devices.log; fail "the installed command does not load the prefix's image codec plugin"; }
runs="fp32:deploy.prototxt:tiny_iter_30.caffemodel:classify int8:int8.prototxt:int8.caffemodel:classify"
[ -x "$WORK/classify-pc" ] && runs="$runs int8-pkg-config:int8.prototxt:int8.caffemodel:classify-pc"
for run in $runs; do
  IFS=: read -r name model weights program <<< "$run"
  [ "$program" = classify ] && program=$WORK/example/classify || program=$WORK/$program
  "$program" "$model" "$weights" --device "$DEVICE" --input x.f32 --top 2 \
    > "classify_$name.log" 2>&1 || {
    cat "classify_$name.log"
    fail "classify $name"
  }
  cat "classify_$name.log"
  [ "$(grep -c '^image [0-3]: class 2 ' "classify_$name.log")" = 4 ] ||
    fail "classify $name: class 2 is not the top class of all four images"
done
# The same four inputs as gray 6×6 PGM photographs (pixel 128 + 127·value, read back as
# (pixel − 128) / 128): the example's --image path (OpenCV through the prefix's plugin) gives the
# scores its --input path gives for those values.
python3 - <<'EOF'
import math, struct
values = []
for i in range(4):
    pixels = bytes(round(128 + 127 * math.sin(0.7 * (36 * i + k))) for k in range(36))
    with open("p%d.pgm" % i, "wb") as f:
        f.write(b"P5 6 6 255\n" + pixels)
    values += [(p - 128) / 128 for p in pixels]
with open("pgm.f32", "wb") as f:
    f.write(struct.pack("<%df" % len(values), *values))
EOF
"$WORK/example/classify" int8.prototxt int8.caffemodel --device "$DEVICE" --input pgm.f32 \
  --top 2 > classify_values.log 2>&1 || { cat classify_values.log; fail "classify pgm.f32"; }
"$WORK/example/classify" int8.prototxt int8.caffemodel --device "$DEVICE" --image p0.pgm \
  --image p1.pgm --image p2.pgm --image p3.pgm --mean-value 128 --scale 0.0078125 --top 2 \
  > classify_images.log 2>&1 || { cat classify_images.log; fail "classify --image"; }
cat classify_images.log
diff classify_values.log classify_images.log ||
  fail "classify --image scores differ from the same values given with --input"
grep -q ": [1-9][0-9]* of [0-9]* layers compute in int8" classify_int8.log ||
  fail "the calibrated net has no int8 layer"
grep -q ": 0 of [0-9]* layers compute in int8" classify_fp32.log || fail "fp32 net with int8 layers"
echo "cpp_package: passed"

// tests/libdnn/pool_test.cc — the pooling kernels against the plain C++ references: max and
// average forward on 22 shapes (LeNet's and AlexNet's pools scaled down, Caffe's ceil-mode
// edges, padding, global, 1×1) in every data type, and fp32 backward.
#include "libdnn/pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "codegen/datatype.h"
#include "device/device.h"
#include "device/settings.h"
#include "libdnn/kernel_config.h"
#include "tests/testing/random_storage.h"

namespace mpcaffe::libdnn {
namespace {

using test_inputs::RealsOf;

using Bytes = std::vector<uint8_t>;

struct Shape {
  int n, c, h, w, kh, kw, sh, sw, ph, pw;
  bool global;
};

// clang-format off
const Shape kShapes[] = {
    {2, 20, 24, 24, 2, 2, 2, 2, 0, 0, false},  // LeNet pool1
    {2, 50, 8, 8, 2, 2, 2, 2, 0, 0, false},    // LeNet pool2
    {1, 16, 27, 27, 3, 3, 2, 2, 0, 0, false},  // AlexNet pool1, scaled
    {1, 24, 13, 13, 3, 3, 2, 2, 0, 0, false},  // AlexNet pool2, scaled
    {1, 24, 7, 7, 3, 3, 2, 2, 0, 0, false},    // AlexNet pool5, scaled
    {1, 3, 5, 7, 3, 3, 2, 2, 1, 1, false},     // odd, padded
    {2, 2, 9, 9, 3, 3, 3, 3, 1, 1, false},     // padded, stride = kernel
    {1, 4, 1, 1, 1, 1, 1, 1, 0, 0, false},     // 1×1
    {1, 5, 6, 4, 2, 3, 1, 2, 0, 0, false},     // rectangular kernel and stride
    {1, 3, 7, 7, 3, 3, 2, 2, 1, 1, false},     // padded ceil mode
    {1, 2, 10, 10, 3, 3, 3, 3, 2, 2, false},   // last window dropped (starts in the padding)
    {1, 3, 8, 8, 3, 3, 2, 2, 0, 0, false},     // ceil mode: clipped last window
    {2, 3, 13, 13, 0, 0, 0, 0, 0, 0, true},    // global 13×13
    {1, 7, 6, 6, 0, 0, 0, 0, 0, 0, true},      // global 6×6
    {3, 2, 1, 1, 0, 0, 0, 0, 0, 0, true},      // global 1×1
    {1, 4, 3, 5, 0, 0, 0, 0, 0, 0, true},      // global 3×5
    {2, 75, 7, 7, 0, 0, 0, 0, 0, 0, true},     // global 7×7, 150 planes: many work-items
    {1, 9, 23, 17, 23, 17, 1, 1, 0, 0, false}, // kernel = input, a plane of 391 (a tail of 7)
    {1, 3, 11, 11, 5, 5, 1, 1, 2, 2, false},   // 5×5 window, stride 1, padded
    {3, 5, 9, 6, 2, 2, 2, 2, 1, 1, false},     // batch 3, padded 2×2
    {1, 1, 17, 3, 4, 2, 3, 1, 0, 1, false},    // tall input
    {1, 6, 12, 12, 2, 2, 1, 1, 0, 0, false},   // overlapping 2×2, stride 1
    {1, 2, 5, 5, 5, 5, 1, 1, 0, 0, false},     // kernel = input
    {2, 3, 15, 15, 3, 3, 2, 2, 0, 0, false},   // AlexNet pool geometry, odd input
    {2, 4, 14, 14, 3, 3, 1, 1, 1, 1, false},   // GoogLeNet's inception pools, scaled
    {2, 5, 7, 7, 3, 3, 1, 1, 1, 1, false},     // GoogLeNet's 7×7 inception pools: rows under 8
    {1, 3, 20, 33, 3, 3, 2, 2, 1, 1, false},   // stride 2, padded, 17 columns
    // Rows of several vectors of the vector max kernel (8 lanes, 16 for int8q): 40 columns at
    // stride 1 (the last vector overlapping), 34 at stride 2 unpadded (windows inside the row),
    // 25 of 2×2 windows.
    {1, 3, 40, 40, 3, 3, 1, 1, 1, 1, false},
    {1, 2, 69, 69, 3, 3, 2, 2, 0, 0, false},
    {2, 3, 18, 50, 2, 2, 2, 2, 0, 0, false},
};
// clang-format on

PoolDesc DescOf(const Shape& s, DataType t, PoolMethod m) {
  PoolDesc d;
  d.type = t, d.method = m;
  d.batch = s.n, d.channels = s.c, d.height = s.h, d.width = s.w;
  d.kernel_h = s.kh, d.kernel_w = s.kw, d.stride_h = s.sh, d.stride_w = s.sw;
  d.pad_h = s.ph, d.pad_w = s.pw, d.global = s.global;
  return d;
}

Bytes RandomData(DataType t, size_t n, std::mt19937& rng) {
  Bytes b(n * SizeOf(t));
  std::uniform_real_distribution<float> u(-2, 2);
  std::uniform_int_distribution<int> q(0, t == DataType::kInt16Q ? 65535 : 255);
  for (size_t i = 0; i < n; ++i) {
    if (t == DataType::kFloat32) {
      const float v = u(rng);
      std::memcpy(b.data() + 4 * i, &v, 4);
    } else if (t == DataType::kFloat16) {
      const uint16_t h = FloatToHalf(u(rng));
      std::memcpy(b.data() + 2 * i, &h, 2);
    } else if (t == DataType::kInt16Q) {
      const uint16_t v = uint16_t(q(rng));
      std::memcpy(b.data() + 2 * i, &v, 2);
    } else {
      b[i] = uint8_t(q(rng));
    }
  }
  return b;
}

/// Random max pooling input of `n` elements of `t`; fp32 with NaNs first in some windows and later
/// in others (a lane keeps a NaN it starts from and never takes a later one, `v > best`), placed
/// by `index`.
Bytes MaxPoolInput(DataType t, size_t n, int index, std::mt19937& rng) {
  Bytes x = RandomData(t, n, rng);
  if (t == DataType::kFloat32) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (size_t i = size_t(index) * 5 + 3; i < n; i += 13) std::memcpy(x.data() + 4 * i, &nan, 4);
  }
  return x;
}

std::shared_ptr<DeviceMemory> Upload(Device& dev, const Bytes& b) {
  auto m = dev.Allocate(std::max<size_t>(b.size(), 4));
  dev.CopyToDevice(b.data(), m.get(), 0, b.size());
  return m;
}
Bytes Download(Device& dev, const std::shared_ptr<DeviceMemory>& m, size_t bytes) {
  Bytes b(bytes);
  dev.CopyToHost(m.get(), 0, b.data(), bytes);
  return b;
}

/// Quantization parameters: shared by input and output for even shape indices (max pooling
/// then copies stored integers), different otherwise.
PoolQuant QuantFor(DataType t, int index) {
  PoolQuant q;
  if (!IsQuantized(t)) return q;
  const bool wide = t == DataType::kInt16Q;
  q.x_scale = 0.0123f, q.x_zero = wide ? 31000 : 120;
  if (index % 2 == 0) {
    q.y_scale = q.x_scale, q.y_zero = q.x_zero;
  } else {
    q.y_scale = 0.0171f, q.y_zero = wide ? 33000 : 135;
  }
  return q;
}

/// Runs `d` (no mask) on the input `xm` into an output followed by guard bytes, under the current
/// settings; checks that the guard is untouched and the output is `want` (codes bit for bit,
/// floats value for value, a NaN where `want` has one), failures naming `what`. Returns the
/// family the pooling chose.
std::string RunGuarded(Device& dev, const PoolDesc& d, const PoolQuant& q,
                       const std::shared_ptr<DeviceMemory>& xm, const Bytes& want,
                       const std::string& what) {
  KernelChoiceLog log;
  Pooling pool(dev, d, q);
  Bytes filled(want.size(), 0);
  const Bytes guard(64, 0x5a);
  filled.insert(filled.end(), guard.begin(), guard.end());
  auto ym = Upload(dev, filled);
  pool.Forward(BufferRef(xm.get(), 0), BufferRef(ym.get(), 0));
  const Bytes got = Download(dev, ym, filled.size());
  const Bytes out(got.begin(), got.begin() + ptrdiff_t(want.size()));
  if (IsQuantized(d.type)) {
    EXPECT_EQ(out, want) << what;
  } else {
    const auto g = RealsOf(d.type, out), r = RealsOf(d.type, want);
    for (size_t i = 0; i < r.size(); ++i)
      if (std::isnan(r[i]) ? !std::isnan(g[i]) : !(g[i] == r[i])) {
        ADD_FAILURE() << what << ": output " << i << " is " << g[i] << ", want " << r[i];
        break;
      }
  }
  EXPECT_EQ(Bytes(got.begin() + ptrdiff_t(want.size()), got.end()), guard)
      << what << ": written past the output";
  const std::vector<KernelChoice> choices = log.Take();
  EXPECT_EQ(choices.size(), 1u) << what;
  return choices.empty() ? std::string() : choices[0].family;
}

using Param = std::tuple<DataType, PoolMethod>;
class PoolForward : public testing::TestWithParam<Param> {};

TEST_P(PoolForward, MatchesReferenceOnEveryShape) {
  const auto [t, method] = GetParam();
  Device& dev = DefaultDevice();
  std::mt19937 rng(42 + int(t) * 2 + int(method));
  int index = 0;
  for (const Shape& s : kShapes) {
    const PoolDesc d = DescOf(s, t, method);
    SCOPED_TRACE(d.ToString());
    const PoolQuant q = QuantFor(t, index++);
    Bytes x = RandomData(t, d.input_count(), rng);
    if (!IsQuantized(t) && method == PoolMethod::kMax) {
      // NaNs first in some windows and later in others: a lane keeps a NaN it starts from and
      // never takes a later one (`v > best`), the reference's order in every kernel form.
      for (size_t i = size_t(index) % 7; i < d.input_count(); i += 11) {
        if (t == DataType::kFloat32) {
          const float nan = std::numeric_limits<float>::quiet_NaN();
          std::memcpy(x.data() + 4 * i, &nan, 4);
        } else {
          const uint16_t nan = 0x7e00;
          std::memcpy(x.data() + 2 * i, &nan, 2);
        }
      }
    }
    Bytes want(d.output_count() * SizeOf(t));
    std::vector<int32_t> want_mask(d.output_count());
    PoolForwardReference(d, q, x.data(), want.data(), want_mask.data());

    Pooling pool(dev, d, q);
    auto xm = Upload(dev, x);
    auto ym = dev.Allocate(want.size());
    auto mm = dev.Allocate(d.output_count() * 4);
    const bool with_mask = method == PoolMethod::kMax;
    pool.Forward(BufferRef(xm.get(), 0), BufferRef(ym.get(), 0),
                 with_mask ? BufferRef(mm.get(), 0) : BufferRef());
    const Bytes got = Download(dev, ym, want.size());
    // Float maxima: the same values, a NaN where the reference has one (its bits are the
    // runtime's: PoCL's half conversions make fp16 NaNs 0x7fff).
    auto same_maxima = [&](const Bytes& g_bytes, const char* what) {
      const auto g = RealsOf(t, g_bytes), w = RealsOf(t, want);
      for (size_t i = 0; i < w.size(); ++i)
        if (std::isnan(w[i]) ? !std::isnan(g[i]) : !(g[i] == w[i])) {
          ADD_FAILURE() << what << ": output " << i << " is " << g[i] << ", want " << w[i];
          return;
        }
    };
    if (IsQuantized(t)) {
      EXPECT_EQ(got, want);  // integers are exact
    } else if (method == PoolMethod::kMax) {
      same_maxima(got, "with a mask");
    } else {
      const auto g = RealsOf(t, got), w = RealsOf(t, want);
      for (size_t i = 0; i < w.size(); ++i)
        ASSERT_NEAR(g[i], w[i], 1e-6 * std::max(1.0f, std::fabs(w[i]))) << i;
    }
    if (with_mask) {
      std::vector<int32_t> mask(d.output_count());
      dev.CopyToHost(mm.get(), 0, mask.data(), mask.size() * 4);
      EXPECT_EQ(mask, want_mask);
      // Inference asks for no mask: the vector kernel where it applies, which must not write
      // past the output (rows narrower than its lanes, 16 for int8q and 8 for the others:
      // checked on guard bytes after it).
      const Bytes guard(64, 0xa5);
      Bytes filled(want.size(), 0);
      filled.insert(filled.end(), guard.begin(), guard.end());
      auto y2 = Upload(dev, filled);
      pool.Forward(BufferRef(xm.get(), 0), BufferRef(y2.get(), 0));
      const Bytes got2 = Download(dev, y2, filled.size());
      const Bytes out2(got2.begin(), got2.begin() + ptrdiff_t(want.size()));
      if (IsQuantized(t))
        EXPECT_EQ(out2, want) << "without a mask";
      else
        same_maxima(out2, "without a mask");
      EXPECT_EQ(Bytes(got2.begin() + ptrdiff_t(want.size()), got2.end()), guard)
          << "written past the output";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, PoolForward,
                         testing::Combine(testing::Values(DataType::kFloat32, DataType::kFloat16,
                                                          DataType::kInt16Q, DataType::kInt8Q),
                                          testing::Values(PoolMethod::kMax, PoolMethod::kAverage)),
                         [](const testing::TestParamInfo<Param>& i) {
                           return std::string(Name(std::get<0>(i.param))) +
                                  (std::get<1>(i.param) == PoolMethod::kMax ? "_max" : "_ave");
                         });

// The plane form of 3×3 stride-1 max pooling (pool_internal::DeclarePlaneMax) on planes of 16
// to 1600 elements, the first and last plane's edge vectors (gathered) included: codes with
// input and output sharing their quantization (copied) and not (requantized), fp32 with NaNs
// first in some windows and later in others. The choice log names it where the device has
// vector built-ins, and it, the form it replaces (MPCAFFE_KERNEL_CONFIG "pool_plane_max:off": the
// row form, int8q's column walk) and the reference agree on every bit.
TEST(PoolForward, PlaneFormIsChosenAndMatchesTheRowFormAndTheReference) {
  Device& dev = DefaultDevice();
  const auto& families = PoolForwardFamilies();
  std::mt19937 rng(11);
  const int shapes[][4] = {
      {2, 3, 4, 4}, {1, 5, 7, 7}, {2, 4, 14, 14}, {1, 3, 9, 23}, {1, 2, 40, 40}};
  for (DataType t : {DataType::kInt8Q, DataType::kInt16Q, DataType::kFloat32})
    for (const auto& s : shapes)
      for (int index : {0, 1}) {  // QuantFor: shared parameters, then different ones
        PoolDesc d;
        d.type = t, d.method = PoolMethod::kMax;
        d.batch = s[0], d.channels = s[1], d.height = s[2], d.width = s[3];
        d.kernel_h = d.kernel_w = 3, d.stride_h = d.stride_w = d.pad_h = d.pad_w = 1;
        SCOPED_TRACE(d.ToString() + (index ? " requantized" : " codes copied"));
        const PoolQuant q = QuantFor(t, index);
        const Bytes x = MaxPoolInput(t, d.input_count(), index, rng);
        Bytes want(d.output_count() * SizeOf(t));
        PoolForwardReference(d, q, x.data(), want.data(), nullptr);
        auto xm = Upload(dev, x);
        for (const char* config : {"", "pool_plane_max:off"}) {
          ScopedSettings env;
          env->kernel_config = config;
          KernelChoiceLog log;
          Pooling pool(dev, d, q);
          auto ym = dev.Allocate(want.size());
          pool.Forward(BufferRef(xm.get(), 0), BufferRef(ym.get(), 0));
          EXPECT_EQ(Download(dev, ym, want.size()), want) << "'" << config << "'";
          const std::vector<KernelChoice> choices = log.Take();
          ASSERT_EQ(choices.size(), 1u);
          if (!KernelTarget::Of(dev).vector_builtins) continue;  // the scalar kernel
          // int8q's column walk where its rule takes the pool first (rows of 16 outputs and
          // more, the next test); else the plane form unless off or inapplicable, then the row
          // form.
          const bool walk = std::find_if(families.begin(), families.end(), [](const auto& f) {
                              return std::string(f.name) == "pool_walk_max";
                            })->applies(d, TargetProfile::Of(dev.info()));
          EXPECT_EQ(choices[0].family, walk ? "pool_walk_max"
                                       : *config || d.height * d.width < 16 ? "pool_vector_max"
                                                                             : "pool_plane_max")
              << "'" << config << "'";
        }
      }
}

// The column walk of int8 and fp32 max pooling (pool_internal::DeclareWalkMax): 2×2 and 3×3
// windows at stride 1 and 2, padded and not, Caffe's clipped last window (odd and even planes),
// rows narrower than a vector (its dead lanes not stored: guard bytes after the output), of one
// vector and of several (the last overlapping), one plane and batches of many (the first and
// last plane's edge rows gathered), GoogLeNet's inception pools scaled. Codes copied (shared
// parameters) and requantized; floats with NaNs first in some windows and later in others. The
// choice log names it where its rule holds (vector built-ins; at stride 1 rows of a vector and
// more, or shapes the plane form does not take), and it, the form it replaces
// (MPCAFFE_KERNEL_CONFIG "pool_walk_max:off") and the reference agree (codes bit for bit, floats
// value for value); GoogLeNet's 28x28 int8 inception pools take it, its 14x14 ones the plane
// form.
TEST(PoolForward, ColumnWalkIsChosenAndMatchesTheOtherFormsAndTheReference) {
  Device& dev = DefaultDevice();
  std::mt19937 rng(17);
  // n, c, h, w, k, s, p
  const int shapes[][7] = {
      {1, 1, 5, 5, 3, 2, 0},   {2, 3, 14, 14, 3, 2, 0}, {1, 4, 15, 13, 3, 2, 1},
      {1, 2, 33, 33, 3, 2, 0}, {2, 2, 34, 31, 3, 2, 1}, {1, 3, 112, 40, 3, 2, 0},
      {3, 5, 9, 6, 2, 2, 1},   {1, 2, 18, 50, 2, 2, 0}, {2, 7, 7, 7, 3, 2, 1},
      {1, 2, 69, 69, 3, 2, 0}, {1, 1, 3, 3, 3, 2, 1},   {1, 3, 4, 35, 2, 2, 1},
      {2, 4, 14, 14, 3, 1, 1}, {2, 5, 7, 7, 3, 1, 1},   {1, 3, 28, 28, 3, 1, 1},
      {1, 2, 9, 23, 3, 1, 1},  {1, 3, 12, 40, 3, 1, 0}, {2, 3, 6, 17, 2, 1, 0},
      {1, 2, 5, 33, 2, 1, 1},  {1, 1, 1, 1, 3, 1, 1},   {3, 2, 4, 4, 3, 1, 2}};
  const auto& families = PoolForwardFamilies();
  const auto walk = std::find_if(families.begin(), families.end(), [](const auto& f) {
    return std::string(f.name) == "pool_walk_max";
  });
  ASSERT_NE(walk, families.end());
  for (DataType t : {DataType::kInt8Q, DataType::kFloat32})
  for (const auto& s : shapes)
    for (int index : {0, 1}) {  // QuantFor: shared parameters, then different ones
      PoolDesc d;
      d.type = t, d.method = PoolMethod::kMax;
      d.batch = s[0], d.channels = s[1], d.height = s[2], d.width = s[3];
      d.kernel_h = d.kernel_w = s[4], d.stride_h = d.stride_w = s[5], d.pad_h = d.pad_w = s[6];
      SCOPED_TRACE(d.ToString() + (index ? " requantized" : " codes copied"));
      const PoolQuant q = QuantFor(d.type, index);
      const Bytes x = MaxPoolInput(t, d.input_count(), index, rng);
      Bytes want(d.output_count() * SizeOf(t));
      PoolForwardReference(d, q, x.data(), want.data(), nullptr);
      auto xm = Upload(dev, x);
      for (const char* config : {"", "pool_walk_max:off"}) {
        ScopedSettings env;
        env->kernel_config = config;
        const std::string family = RunGuarded(dev, d, q, xm, want, "'" + std::string(config) + "'");
        EXPECT_EQ(family == "pool_walk_max",
                  walk->applies(d, TargetProfile::Of(dev.info())) && !*config);
      }
    }
  if (!KernelTarget::Of(dev).vector_builtins) return;
  for (int hw : {28, 14}) {  // GoogLeNet's inception pools: the walk at 28x28, the plane form below
    PoolDesc d;
    d.type = DataType::kInt8Q, d.method = PoolMethod::kMax;
    d.channels = 192, d.height = d.width = hw;
    d.kernel_h = d.kernel_w = 3, d.stride_h = d.stride_w = d.pad_h = d.pad_w = 1;
    EXPECT_EQ(PoolForwardFamilyFor(d, TargetProfile::Of(dev.info())).name,
              std::string(hw == 28 ? "pool_walk_max" : "pool_plane_max"));
  }
}

// The column walk against the reference on 300 random 2×2 and 3×3 max pools at stride 1 and 2
// (planes of 1-40 × 1-70, any padding Caffe allows, batches up to 3), int8 with shared and
// different quantization, fp32 with NaNs; guard bytes after each output. Every shape whose
// family is the walk is counted: at least 250 of them must be.
TEST(PoolForward, ColumnWalkMatchesTheReferenceOnRandomShapes) {
  Device& dev = DefaultDevice();
  std::mt19937 rng(123);
  int runs = 0;
  for (int it = 0; it < 300; ++it) {
    PoolDesc d;
    d.type = (it % 2) ? DataType::kFloat32 : DataType::kInt8Q;
    d.method = PoolMethod::kMax;
    d.batch = 1 + rng() % 3, d.channels = 1 + rng() % 9;
    d.height = 1 + rng() % 40, d.width = 1 + rng() % 70;
    d.kernel_h = d.kernel_w = 2 + rng() % 2;
    d.stride_h = d.stride_w = 1 + rng() % 2;
    d.pad_h = rng() % d.kernel_h, d.pad_w = rng() % d.kernel_w;
    if (d.height + 2 * d.pad_h < d.kernel_h || d.width + 2 * d.pad_w < d.kernel_w) continue;
    SCOPED_TRACE(d.ToString());
    const PoolQuant q = QuantFor(d.type, it / 2);
    const Bytes x = MaxPoolInput(d.type, d.input_count(), it % 3, rng);
    Bytes want(d.output_count() * SizeOf(d.type));
    PoolForwardReference(d, q, x.data(), want.data(), nullptr);
    if (RunGuarded(dev, d, q, Upload(dev, x), want, "random") == "pool_walk_max") ++runs;
    if (HasFailure()) return;
  }
  if (KernelTarget::Of(dev).vector_builtins) EXPECT_GE(runs, 250);
}

// The quantized average divides with one round-to-nearest: check the reference itself on a
// hand-computed case (x_scale = y_scale: out = zero + round(Σ(q − zero) / count)).
TEST(PoolForward, QuantizedAverageRoundsToNearest) {
  PoolDesc d;
  d.type = DataType::kInt8Q, d.method = PoolMethod::kAverage;
  d.height = 1, d.width = 4, d.kernel_h = 1, d.kernel_w = 4;
  PoolQuant q;
  q.x_scale = q.y_scale = 0.5f, q.x_zero = q.y_zero = 10;
  const uint8_t cases[][4] = {{10, 10, 10, 12}, {10, 10, 10, 11}, {9, 9, 10, 10}, {13, 13, 13, 10}};
  // Σ(q − 10) / 4 = 0.5 → 1, 0.25 → 0, −0.5 → −1 (ties away from zero), 2.25 → 2.
  const uint8_t want[] = {11, 10, 9, 12};
  Device& dev = DefaultDevice();
  Pooling pool(dev, d, q);
  for (int c = 0; c < 4; ++c) {
    uint8_t ref = 0;
    PoolForwardReference(d, q, cases[c], &ref, nullptr);
    EXPECT_EQ(ref, want[c]) << "case " << c;
    auto xm = dev.Allocate(4);
    dev.CopyToDevice(cases[c], xm.get(), 0, 4);
    auto ym = dev.Allocate(4);
    pool.Forward(BufferRef(xm.get(), 0), BufferRef(ym.get(), 0));
    uint8_t got = 0;
    dev.CopyToHost(ym.get(), 0, &got, 1);
    EXPECT_EQ(got, want[c]) << "case " << c;
  }
}

TEST(PoolForward, CaffeGeometry) {
  PoolDesc d;
  d.height = d.width = 13, d.kernel_h = d.kernel_w = 3, d.stride_h = d.stride_w = 2;
  EXPECT_EQ(d.out_h(), 6);  // AlexNet pool5
  d.height = d.width = 55;
  EXPECT_EQ(d.out_w(), 27);  // AlexNet pool1
  d.height = d.width = 8;
  EXPECT_EQ(d.out_h(), 4);  // ceil((8 − 3)/2) + 1: the last window is clipped
  d.height = d.width = 10, d.pad_h = d.pad_w = 2, d.stride_h = d.stride_w = 3;
  EXPECT_EQ(d.out_h(), 4);  // the 5th window would start in the padding: dropped
  d.pad_h = 3;
  EXPECT_THROW(d.Validate(), Error);  // pad ≥ kernel
}

TEST(PoolBackward, MatchesReferenceOnEveryShape) {
  Device& dev = DefaultDevice();
  std::mt19937 rng(3);
  for (PoolMethod method : {PoolMethod::kMax, PoolMethod::kAverage}) {
    for (const Shape& s : kShapes) {
      const PoolDesc d = DescOf(s, DataType::kFloat32, method);
      SCOPED_TRACE(d.ToString());
      const Bytes x = RandomData(d.type, d.input_count(), rng);
      const Bytes top = RandomData(d.type, d.output_count(), rng);
      std::vector<float> y(d.output_count());
      std::vector<int32_t> mask(d.output_count());
      PoolForwardReference(d, {}, x.data(), y.data(), mask.data());
      std::vector<float> want(d.input_count());
      PoolBackwardReference(d, RealsOf(d.type, top).data(), mask.data(), want.data());

      Pooling pool(dev, d);
      auto xm = Upload(dev, x), tm = Upload(dev, top);
      auto ym = dev.Allocate(d.output_count() * 4), mm = dev.Allocate(d.output_count() * 4);
      auto bm = dev.Allocate(d.input_count() * 4);
      const bool max = method == PoolMethod::kMax;
      pool.Forward(BufferRef(xm.get(), 0), BufferRef(ym.get(), 0),
                   max ? BufferRef(mm.get(), 0) : BufferRef());
      pool.Backward(BufferRef(tm.get(), 0), max ? BufferRef(mm.get(), 0) : BufferRef(),
                    BufferRef(bm.get(), 0));
      const auto got = RealsOf(d.type, Download(dev, bm, d.input_count() * 4));
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(got[i], want[i], 1e-5 * std::max(1.0f, std::fabs(want[i]))) << i;
    }
  }
}

TEST(PoolBackward, RejectsNonFloat32AndMissingMask) {
  Device& dev = DefaultDevice();
  PoolDesc d;
  d.height = d.width = 4, d.kernel_h = d.kernel_w = 2, d.stride_h = d.stride_w = 2;
  auto m = dev.Allocate(256);
  Pooling max(dev, d);
  EXPECT_THROW(max.Backward(BufferRef(m.get(), 0), {}, BufferRef(m.get(), 0)), Error);
  d.type = DataType::kInt8Q;
  Pooling q(dev, d);
  EXPECT_THROW(q.Backward(BufferRef(m.get(), 0), BufferRef(m.get(), 0), BufferRef(m.get(), 0)),
               Error);
}

// Not a test: the max pools of GoogLeNet (its inception pools, 3×3 stride 1, and the stride-2
// pools between stages), ResNet-50's and SqueezeNet's (batch 1, no mask: inference), each
// forward enqueued 20 times per host synchronization, in µs per forward, the median of 15 such
// batches, int8 and fp32. Run with
// --gtest_also_run_disabled_tests --gtest_filter='*DISABLED_ZooMaxPools*'.
TEST(PoolBench, DISABLED_ZooMaxPools) {
  Device& dev = DefaultDevice();
  // c, h, w, k, s, p (Caffe's ceil-mode geometry)
  const int pools[][6] = {{64, 112, 112, 3, 2, 0}, {192, 56, 56, 3, 2, 0},  {192, 28, 28, 3, 1, 1},
                          {256, 28, 28, 3, 1, 1},  {480, 28, 28, 3, 2, 0},  {480, 14, 14, 3, 1, 1},
                          {528, 14, 14, 3, 1, 1},  {832, 14, 14, 3, 2, 0},  {832, 7, 7, 3, 1, 1},
                          {64, 112, 112, 3, 2, 1}, {64, 111, 111, 3, 2, 0}, {256, 27, 27, 3, 2, 0}};
  std::mt19937 rng(3);
  for (DataType t : {DataType::kInt8Q, DataType::kFloat32}) {
    double total = 0;
    for (const auto& s : pools) {
      PoolDesc d;
      d.type = t, d.method = PoolMethod::kMax;
      d.channels = s[0], d.height = s[1], d.width = s[2];
      d.kernel_h = d.kernel_w = s[3], d.stride_h = d.stride_w = s[4], d.pad_h = d.pad_w = s[5];
      PoolQuant q;
      if (IsQuantized(t)) q.x_scale = q.y_scale = 0.02f, q.x_zero = q.y_zero = 7;
      Pooling pool(dev, d, q);
      auto xm = Upload(dev, RandomData(t, d.input_count(), rng));
      auto ym = dev.Allocate(d.output_count() * SizeOf(t));
      pool.Forward(BufferRef(xm.get(), 0), BufferRef(ym.get(), 0));
      dev.Finish();
      std::vector<double> us;
      for (int round = 0; round < 15; ++round) {
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < 20; ++i) pool.Forward(BufferRef(xm.get(), 0), BufferRef(ym.get(), 0));
        dev.Finish();
        us.push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                .count() /
            20);
      }
      std::sort(us.begin(), us.end());
      total += us[7];
      std::printf("%-70s %8.1f us\n", d.ToString().c_str(), us[7]);
    }
    std::printf("%s: sum %.1f us\n", Name(t), total);
  }
}

}  // namespace
}  // namespace mpcaffe::libdnn

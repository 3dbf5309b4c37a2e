// tests/quant/quant_params_test.cc — host tests of quantization parameter choice and of the
// quantize / dequantize / fp16 / conversion reference functions (quant/quant_params.h).
#include "quant/quant_params.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "device/error.h"
#include "tests/testing/host_isa_levels.h"

namespace mpcaffe::quant {
namespace {

/// Independent quantize reference: the float quotient is obtained as the double quotient
/// rounded to float (exact for division: double has more than 2·24+2 bits), ties to even
/// by hand, saturation in double.
int32_t QuantizeByHand(float x, float scale, int32_t zp, int32_t qmin, int32_t qmax) {
  if (std::isnan(x)) return zp;
  const float quotient = static_cast<float>(static_cast<double>(x) / scale);
  double r = std::floor(static_cast<double>(quotient));
  const double frac = static_cast<double>(quotient) - r;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(r, 2.0) != 0.0)) r += 1.0;
  const double v = r + zp;
  return v <= qmin ? qmin : v >= qmax ? qmax : static_cast<int32_t>(v);
}

TEST(QuantParams, ZeroIsExactAndTheRangeIsCovered) {
  std::mt19937_64 rng(1);
  for (DataType type : {DataType::kInt8Q, DataType::kInt16Q}) {
    for (int i = 0; i < 20000; ++i) {
      const double a = std::ldexp(std::uniform_real_distribution<double>(-1, 1)(rng),
                                  static_cast<int>(rng() % 60) - 30);
      const double b = std::ldexp(std::uniform_real_distribution<double>(-1, 1)(rng),
                                  static_cast<int>(rng() % 60) - 30);
      const double lo = std::min(a, b), hi = std::max(a, b);
      const QuantParams p = ChooseQuantParams(lo, hi, type);
      ASSERT_NO_THROW(p.Validate());
      EXPECT_EQ(QuantizeValue(0.0f, p.scale[0], p.zero_point[0], p.qmin, p.qmax), p.zero_point[0]);
      EXPECT_EQ(DequantizeValue(p.zero_point[0], p.scale[0], p.zero_point[0]), 0.0f);
      // The grid reaches the widened range's ends to within half a step (the zero point
      // nudge) plus float rounding of the scale.
      const double wlo = std::min(lo, 0.0), whi = std::max(hi, 0.0);
      const double slack = 0.5 * p.scale[0] + 1e-6 * (whi - wlo);
      EXPECT_LE(p.RepresentableMin(), wlo + slack) << lo << " " << hi;
      EXPECT_GE(p.RepresentableMax(), whi - slack) << lo << " " << hi;
      EXPECT_NEAR(p.scale[0], (whi - wlo) / (p.qmax - p.qmin), 1e-6 * p.scale[0]);
    }
  }
}

TEST(QuantParams, KnownRanges) {
  QuantParams p = ChooseQuantParams(-1.0, 1.0, DataType::kInt8Q);
  EXPECT_FLOAT_EQ(p.scale[0], 2.0f / 255.0f);
  // 1 / float(2/255) is 127.499999…: the zero point follows the scale actually used.
  EXPECT_EQ(p.zero_point[0], 127);
  EXPECT_EQ(p.qmin, 0);
  EXPECT_EQ(p.qmax, 255);

  p = ChooseQuantParams(2.0, 5.0, DataType::kInt8Q);  // widened to [0, 5]
  EXPECT_FLOAT_EQ(p.scale[0], 5.0f / 255.0f);
  EXPECT_EQ(p.zero_point[0], 0);

  p = ChooseQuantParams(-6.0, -3.0, DataType::kInt16Q);  // widened to [-6, 0]
  EXPECT_FLOAT_EQ(p.scale[0], 6.0f / 65535.0f);
  EXPECT_EQ(p.zero_point[0], 65535);
  EXPECT_EQ(p.qmax, 65535);
}

TEST(QuantParams, DegenerateRanges) {
  // Empty after widening: scale 1, zero point at qmin (asymmetric) or the middle.
  QuantParams p = ChooseQuantParams(0.0, 0.0, DataType::kInt8Q);
  EXPECT_EQ(p.scale[0], 1.0f);
  EXPECT_EQ(p.zero_point[0], 0);
  p = ChooseQuantParams(0.0, 0.0, DataType::kInt16Q, /*symmetric=*/true);
  EXPECT_EQ(p.scale[0], 1.0f);
  EXPECT_EQ(p.zero_point[0], 32768);
  // min == max != 0 widens to a real range.
  p = ChooseQuantParams(3.0, 3.0, DataType::kInt8Q);
  EXPECT_FLOAT_EQ(p.scale[0], 3.0f / 255.0f);
  EXPECT_EQ(p.zero_point[0], 0);
  EXPECT_EQ(QuantizeValue(3.0f, p.scale[0], p.zero_point[0], p.qmin, p.qmax), 255);
  p = ChooseQuantParams(-2.0, -2.0, DataType::kInt8Q);
  EXPECT_EQ(p.zero_point[0], 255);
  // A range too small for a normal float scale gets FLT_MIN.
  p = ChooseQuantParams(0.0, 1e-40, DataType::kInt8Q);
  EXPECT_EQ(p.scale[0], FLT_MIN);
  EXPECT_NO_THROW(p.Validate());

  EXPECT_THROW(ChooseQuantParams(1.0, -1.0, DataType::kInt8Q), Error);
  EXPECT_THROW(ChooseQuantParams(std::nan(""), 1.0, DataType::kInt8Q), Error);
  EXPECT_THROW(ChooseQuantParams(0.0, INFINITY, DataType::kInt8Q), Error);
  EXPECT_THROW(ChooseQuantParams(0.0, 1e300, DataType::kInt8Q), Error);
  EXPECT_THROW(ChooseQuantParams(0.0, 1.0, DataType::kFloat16), Error);
}

TEST(QuantParams, Symmetric) {
  const QuantParams p = ChooseQuantParams(-0.5, 2.0, DataType::kInt8Q, /*symmetric=*/true);
  EXPECT_EQ(p.zero_point[0], 128);
  EXPECT_FLOAT_EQ(p.scale[0], 2.0f / 127.0f);
  EXPECT_EQ(QuantizeValue(2.0f, p.scale[0], 128, p.qmin, p.qmax), 255);
  EXPECT_EQ(QuantizeValue(-2.0f, p.scale[0], 128, p.qmin, p.qmax), 1);
  EXPECT_EQ(QuantizeValue(0.0f, p.scale[0], 128, p.qmin, p.qmax), 128);
  const QuantParams p16 = ChooseQuantParams(-3.0, 1.0, DataType::kInt16Q, true);
  EXPECT_EQ(p16.zero_point[0], 32768);
  EXPECT_FLOAT_EQ(p16.scale[0], 3.0f / 32767.0f);
}

TEST(QuantParams, PerChannel) {
  const QuantParams p =
      ChoosePerChannelQuantParams({-1.0, 0.0, -4.0}, {1.0, 2.0, 0.5}, 0, DataType::kInt8Q);
  ASSERT_EQ(p.channels(), 3u);
  ASSERT_TRUE(p.per_channel());
  for (size_t c = 0; c < 3; ++c) {
    const double mins[] = {-1.0, 0.0, -4.0}, maxs[] = {1.0, 2.0, 0.5};
    const QuantParams one = ChooseQuantParams(mins[c], maxs[c], DataType::kInt8Q);
    EXPECT_EQ(p.scale_of(c), one.scale[0]);
    EXPECT_EQ(p.zero_point_of(c), one.zero_point[0]);
  }
  // Layout [3 channels][2 elements]: element i belongs to channel i / 2.
  const std::vector<float> x = {1.0f, -1.0f, 2.0f, 1.0f, -4.0f, 0.5f};
  std::vector<uint8_t> q(x.size());
  QuantizeTensor(x.data(), x.size(), p, q.data(), /*inner=*/2);
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_EQ(q[i], QuantizeValue(x[i], p.scale_of(i / 2), p.zero_point_of(i / 2), 0, 255));
  std::vector<float> back(x.size());
  DequantizeTensor(q.data(), q.size(), p, back.data(), 2);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(back[i], x[i], p.scale_of(i / 2) / 2);
  EXPECT_THROW(ChoosePerChannelQuantParams({0.0}, {1.0, 2.0}, 0, DataType::kInt8Q), Error);
}

// QuantizeTensor / DequantizeTensor take a vectorizable form of the per-value reference: the
// same integers and floats for halves, saturation, ±inf, NaN, huge quotients and every zero
// point, per tensor and per channel, in both quantized types, at every host ISA level the CPU
// has (generic: SSE2 blocks, and int8 runs of 1024 or more dequantized through the 256-entry
// table; avx2; avx512); the levels it lacks are reported skipped.
class QuantTensorTest : public testing::TestWithParam<HostIsa> {};

TEST_P(QuantTensorTest, MatchesValueReference) {
  MPCAFFE_RUN_AT_HOST_ISA(GetParam());
  std::vector<float> x = {0.5f,     1.5f,     2.5f,      -0.5f,    -1.5f,     -2.5f,    0.0f,
                          -0.0f,    127.5f,   128.5f,    255.5f,   -255.5f,   1e30f,    -1e30f,
                          4194303.5f, 4194304.5f, -4194303.5f, 8388607.0f, 16777216.0f,
                          65535.5f, -65535.5f, 1e-40f,   -1e-40f,
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> wide(-70000.0f, 70000.0f), narrow(-3.0f, 3.0f);
  for (int i = 0; i < 2000; ++i) x.push_back(i % 2 ? wide(rng) : narrow(rng));
  for (int i = 0; i < 200; ++i) x.push_back(std::nearbyint(narrow(rng) * 100.0f) / 8.0f + 0.5f);
  for (DataType type : {DataType::kInt8Q, DataType::kInt16Q}) {
    const int32_t qmax = type == DataType::kInt8Q ? 255 : 65535;
    for (float scale : {1.0f, 0.5f, 0.013f, 3.7f}) {
      for (int32_t zero : {0, 1, qmax / 2 + 1, qmax}) {
        QuantParams p;
        p.type = type;
        p.qmax = qmax;
        p.scale = {scale};
        p.zero_point = {zero};
        std::vector<uint16_t> q16(x.size());
        std::vector<uint8_t> q8(x.size());
        void* q = type == DataType::kInt8Q ? static_cast<void*>(q8.data()) : q16.data();
        QuantizeTensor(x.data(), x.size(), p, q);
        std::vector<float> back(x.size());
        DequantizeTensor(q, x.size(), p, back.data());
        for (size_t i = 0; i < x.size(); ++i) {
          const int32_t got = type == DataType::kInt8Q ? q8[i] : q16[i];
          ASSERT_EQ(got, QuantizeValue(x[i], scale, zero, 0, qmax))
              << Name(type) << " x " << x[i] << " scale " << scale << " zero " << zero;
          ASSERT_EQ(back[i], DequantizeValue(got, scale, zero));
        }
      }
    }
  }
  // Per channel, runs that do not start at a channel boundary's multiple of the length.
  const QuantParams pc = ChoosePerChannelQuantParams({-1.0, -50.0, 0.0}, {1.0, 3.0, 1e4}, 0,
                                                     DataType::kInt8Q);
  const size_t n = 3 * 7;
  std::vector<uint8_t> q(n);
  QuantizeTensor(x.data(), n, pc, q.data(), /*inner=*/7);
  std::vector<float> back(n);
  DequantizeTensor(q.data(), n, pc, back.data(), 7);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(q[i], QuantizeValue(x[i], pc.scale_of(i / 7), pc.zero_point_of(i / 7), 0, 255));
    EXPECT_EQ(back[i], DequantizeValue(q[i], pc.scale_of(i / 7), pc.zero_point_of(i / 7)));
  }
}

// ConvertTensor's fp32 → fp16 (the F16C path at avx2 and up) gives FloatToHalf's bits for every
// class of float: random bit patterns (NaNs, subnormals, infinities), ties, and an odd tail.
TEST_P(QuantTensorTest, FloatsToHalvesMatchFloatToHalf) {
  MPCAFFE_RUN_AT_HOST_ISA(GetParam());
  std::mt19937 rng(5);
  std::vector<float> x(100003);
  for (size_t i = 0; i < x.size(); ++i) {
    // Every third: a run of patterns over ties and half's subnormals.
    const uint32_t bits =
        i % 3 ? static_cast<uint32_t>(rng()) : 0x38000000u + (static_cast<uint32_t>(i) << 12);
    std::memcpy(&x[i], &bits, 4);
  }
  std::vector<uint16_t> h(x.size());
  ConvertTensor(DataType::kFloat32, {}, x.data(), DataType::kFloat16, {}, h.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(h[i], FloatToHalf(x[i])) << i << " " << x[i];
}

INSTANTIATE_TEST_SUITE_P(Isa, QuantTensorTest, testing::ValuesIn(test_support::HostIsaLevels()),
                         test_support::HostIsaParamName);

TEST(QuantParams, QuantizeValueEdgeCases) {
  // Exact halves round to even (after the zero point is added, which is an integer).
  EXPECT_EQ(QuantizeValue(0.5f, 1.0f, 0, 0, 255), 0);
  EXPECT_EQ(QuantizeValue(1.5f, 1.0f, 0, 0, 255), 2);
  EXPECT_EQ(QuantizeValue(2.5f, 1.0f, 0, 0, 255), 2);
  EXPECT_EQ(QuantizeValue(-0.5f, 1.0f, 10, 0, 255), 10);
  EXPECT_EQ(QuantizeValue(-1.5f, 1.0f, 10, 0, 255), 8);
  EXPECT_EQ(QuantizeValue(0.75f, 0.5f, 3, 0, 255), 5);  // 1.5 → 2
  // Range ends and saturation.
  EXPECT_EQ(QuantizeValue(255.0f, 1.0f, 0, 0, 255), 255);
  EXPECT_EQ(QuantizeValue(255.5f, 1.0f, 0, 0, 255), 255);
  EXPECT_EQ(QuantizeValue(1e30f, 1.0f, 0, 0, 255), 255);
  EXPECT_EQ(QuantizeValue(-1e30f, 1.0f, 0, 0, 255), 0);
  EXPECT_EQ(QuantizeValue(65535.4f, 1.0f, 0, 0, 65535), 65535);
  EXPECT_EQ(QuantizeValue(-0.4f, 1.0f, 0, 0, 65535), 0);
  EXPECT_EQ(QuantizeValue(1e38f, 1e-30f, 7, 0, 255), 255);  // quotient overflows to +Inf
  // NaN → zero point; ±Inf saturate.
  EXPECT_EQ(QuantizeValue(std::numeric_limits<float>::quiet_NaN(), 0.1f, 42, 0, 255), 42);
  EXPECT_EQ(QuantizeValue(INFINITY, 0.1f, 42, 0, 255), 255);
  EXPECT_EQ(QuantizeValue(-INFINITY, 0.1f, 42, 0, 65535), 0);
  // Denormals are tiny against any normal scale.
  EXPECT_EQ(QuantizeValue(1e-40f, 0.01f, 9, 0, 255), 9);
  EXPECT_EQ(QuantizeValue(-1e-45f, 0.01f, 9, 0, 255), 9);
  EXPECT_EQ(DequantizeValue(200, 0.5f, 100), 50.0f);
  EXPECT_EQ(DequantizeValue(0, 0.5f, 100), -50.0f);
  EXPECT_EQ(SnapValue(0.3f, 0.25f, 0, 0, 255), 0.25f);
  EXPECT_EQ(SnapValue(std::nanf(""), 0.25f, 4, 0, 255), 0.0f);
}

TEST(QuantParams, QuantizeValueMatchesIndependentReference) {
  std::mt19937_64 rng(2);
  long reciprocal_differs = 0, halves = 0;
  constexpr int kCases = 1000000;
  for (int i = 0; i < kCases; ++i) {
    const float scale =
        static_cast<float>(std::pow(10.0, std::uniform_real_distribution<double>(-6, 6)(rng)));
    const int32_t qmax = rng() & 1 ? 255 : 65535;
    const int32_t zp = static_cast<int32_t>(rng() % (qmax + 1));
    float x;
    if (rng() % 4 == 0) {
      // An exact (or nearly exact) half step: the hard case for rounding.
      x = scale * (static_cast<float>(static_cast<int32_t>(rng() % (qmax + 1)) - zp) + 0.5f);
      ++halves;
    } else {
      x = scale * std::uniform_real_distribution<float>(-zp - 3.0f, qmax - zp + 3.0f)(rng);
    }
    const int32_t q = QuantizeValue(x, scale, zp, 0, qmax);
    ASSERT_EQ(q, QuantizeByHand(x, scale, zp, 0, qmax)) << x << " / " << scale << " + " << zp;
    const float by_reciprocal = std::nearbyint(x * (1.0f / scale)) + static_cast<float>(zp);
    const int32_t q_reciprocal = static_cast<int32_t>(
        std::min<float>(std::max<float>(by_reciprocal, 0.0f), static_cast<float>(qmax)));
    if (q_reciprocal != q) ++reciprocal_differs;
  }
  std::printf(
      "[ quantize ] x·(1/scale) would differ from x/scale in %ld of %d cases "
      "(%ld near-half cases)\n",
      reciprocal_differs, kCases, halves);
}

TEST(QuantParams, HalfConversionsMatchTheCompiler) {
  // Every half → float, and float → half on all edge classes plus random bit patterns,
  // against GCC's _Float16 (IEEE binary16, round to nearest even).
  for (uint32_t h = 0; h < 65536; ++h) {
    _Float16 ref;
    const uint16_t bits = static_cast<uint16_t>(h);
    std::memcpy(&ref, &bits, 2);
    const float want = static_cast<float>(ref), got = HalfToFloat(bits);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << h;
    } else {
      ASSERT_EQ(std::memcmp(&want, &got, 4), 0) << h;
    }
  }
  std::mt19937_64 rng(3);
  const float edges[] = {0.0f,
                         -0.0f,
                         65504.0f,
                         65519.99f,
                         65520.0f,
                         -65520.0f,
                         1e-8f,
                         std::ldexp(1.0f, -24),
                         std::ldexp(1.0f, -25),
                         std::ldexp(3.0f, -26),
                         std::ldexp(1.0f, -14),
                         std::ldexp(1023.5f, -24),
                         1e-40f,
                         -1e-45f,
                         INFINITY,
                         -INFINITY,
                         1.00048828125f,
                         2049.0f,
                         2051.0f};
  for (int i = 0; i < 2000000 + static_cast<int>(sizeof edges / sizeof edges[0]); ++i) {
    float x;
    if (i < static_cast<int>(sizeof edges / sizeof edges[0])) {
      x = edges[i];
    } else {
      const uint32_t bits = static_cast<uint32_t>(rng());
      std::memcpy(&x, &bits, 4);
    }
    const _Float16 ref = static_cast<_Float16>(x);
    uint16_t want;
    std::memcpy(&want, &ref, 2);
    const uint16_t got = FloatToHalf(x);
    if (std::isnan(x)) {
      ASSERT_EQ(got & 0x7e00, 0x7e00) << x;
    } else {
      ASSERT_EQ(got, want) << x;
    }
  }
}

TEST(QuantParams, ConvertTensorReference) {
  const QuantParams p8 = ChooseQuantParams(-1.0, 3.0, DataType::kInt8Q);
  const QuantParams p16 = ChooseQuantParams(-2.0, 2.0, DataType::kInt16Q);
  std::vector<uint8_t> q8(256);
  for (int i = 0; i < 256; ++i) q8[i] = static_cast<uint8_t>(i);
  // int8q → fp32 → int8q with the same parameters is the identity.
  std::vector<float> f(256);
  ConvertTensor(DataType::kInt8Q, p8, q8.data(), DataType::kFloat32, {}, f.data(), 256);
  std::vector<uint8_t> back(256);
  ConvertTensor(DataType::kFloat32, {}, f.data(), DataType::kInt8Q, p8, back.data(), 256);
  EXPECT_EQ(back, q8);
  // int8q → int16q through the fixed-point path is within one step of the float path.
  std::vector<uint16_t> q16(256);
  ConvertTensor(DataType::kInt8Q, p8, q8.data(), DataType::kInt16Q, p16, q16.data(), 256);
  for (int i = 0; i < 256; ++i) {
    const int32_t via_float = QuantizeValue(f[i], p16.scale[0], p16.zero_point[0], 0, 65535);
    EXPECT_LE(std::abs(static_cast<int32_t>(q16[i]) - via_float), 1) << i;
  }
  // fp32 → fp16 → fp32.
  std::vector<uint16_t> h(256);
  std::vector<float> f2(256);
  ConvertTensor(DataType::kFloat32, {}, f.data(), DataType::kFloat16, {}, h.data(), 256);
  ConvertTensor(DataType::kFloat16, {}, h.data(), DataType::kFloat32, {}, f2.data(), 256);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(f2[i], HalfToFloat(FloatToHalf(f[i])));
  // Mismatched parameters are refused.
  EXPECT_THROW(
      ConvertTensor(DataType::kInt8Q, p16, q8.data(), DataType::kFloat32, {}, f.data(), 256),
      Error);
}

TEST(QuantParams, RequantizationMultiplier) {
  const FixedPointMultiplier m = RequantizationMultiplier(0.02, 0.005, 0.05);
  EXPECT_NEAR(std::ldexp(static_cast<double>(m.multiplier), m.shift - 31), 0.002, 1e-12);
  EXPECT_THROW(RequantizationMultiplier(1e6, 1e6, 1e-6), Error);
  EXPECT_THROW(RescaleMultiplier(0.0, 1.0), Error);
}

}  // namespace
}  // namespace mpcaffe::quant

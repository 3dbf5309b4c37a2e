// tests/quant/weight_int4_test.cc — 4-bit weight scales and quantization (round-to-nearest and
// the min-MSE clipping search) and the exact 16-bit accumulator simulation.
#include "quant/weight_int4.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "device/error.h"

namespace mpcaffe::quant {
namespace {

TEST(Int4Weights, AbsMaxScaleRepresentsTheLargestWeightExactly) {
  const std::vector<float> w = {0.7f, -0.35f, 0.1f, 0.0f,    // channel 0: max 0.7
                                -1.4f, 0.2f, 0.6f, -0.05f};  // channel 1: max 1.4
  const auto s = ChooseInt4Scales(w.data(), 2, 4, Int4ScaleMethod::kAbsMax);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_FLOAT_EQ(s[0], 0.1f);
  EXPECT_FLOAT_EQ(s[1], 0.2f);
  std::vector<int8_t> q(8);
  QuantizeInt4Weights(w.data(), 2, 4, s, q.data());
  EXPECT_EQ(q, (std::vector<int8_t>{7, -4, 1, 0, -7, 1, 3, 0}));  // -3.5 → -4, 0.5 → 0 (even)
}

TEST(Int4Weights, ValuesClampToTheSignedNibbleAndNanIsZero) {
  EXPECT_EQ(QuantizeInt4Value(100.0f, 1.0f), 7);
  EXPECT_EQ(QuantizeInt4Value(-100.0f, 1.0f), -8);
  EXPECT_EQ(QuantizeInt4Value(-8.4f, 1.0f), -8);
  EXPECT_EQ(QuantizeInt4Value(NAN, 1.0f), 0);
  EXPECT_EQ(QuantizeInt4Value(2.5f, 1.0f), 2);  // half to even
}

TEST(Int4Weights, MinMseNeverWorseThanAbsMaxAndClipsOutliers) {
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 0.1f);
  const size_t channels = 16, k = 75;
  std::vector<float> w(channels * k);
  for (auto& v : w) v = g(rng);
  w[5] = 1.0f;  // an outlier in channel 0
  const auto a = ChooseInt4Scales(w.data(), channels, k, Int4ScaleMethod::kAbsMax);
  const auto m = ChooseInt4Scales(w.data(), channels, k, Int4ScaleMethod::kMinMse);
  for (size_t c = 0; c < channels; ++c) {
    EXPECT_LE(Int4WeightMse(w.data() + c * k, 1, k, {m[c]}), Int4WeightMse(w.data() + c * k, 1, k, {a[c]}));
    EXPECT_LE(m[c], a[c]);  // ratios ≤ 1
  }
  EXPECT_LT(Int4WeightMse(w.data(), channels, k, m), Int4WeightMse(w.data(), channels, k, a));
}

TEST(Int4Weights, ZeroChannelAndInfiniteWeight) {
  const std::vector<float> zeros(6, 0.0f);
  EXPECT_EQ(ChooseInt4Scales(zeros.data(), 2, 3, Int4ScaleMethod::kMinMse), (std::vector<float>{1, 1}));
  const std::vector<float> bad = {0.0f, 1.0f, INFINITY};
  try {
    ChooseInt4Scales(bad.data(), 1, 3, Int4ScaleMethod::kAbsMax);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("channel 0"), std::string::npos) << e.what();
  }
  const QuantParams p = Int4StorageParams({0.5f, 0.25f});
  EXPECT_EQ(p.axis, 0);
  EXPECT_EQ(p.zero_point, (std::vector<int32_t>{128, 128}));
}

TEST(Acc16, OverflowIsCountedOnceAndSticks) {
  // 255·7 = 1785 per step: 18 steps reach 32130, the 19th (33915) overflows.
  std::vector<uint8_t> x(40, 255);
  std::vector<int8_t> w(40, 7);
  Acc16Overflow c;
  Acc16Dot(x.data(), 1, w.data(), 18, &c);
  EXPECT_EQ(c.overflow_steps, 0u);
  Acc16Dot(x.data(), 1, w.data(), 40, &c);
  EXPECT_EQ(c.steps, 58u);
  EXPECT_EQ(c.overflow_steps, 1u);
  EXPECT_EQ(c.outputs, 2u);
  EXPECT_EQ(c.overflowed_outputs, 1u);
  // Negative: 255·(−8) = −2040; 16 steps = −32640 fit, the 17th does not.
  std::vector<int8_t> n(17, -8);
  Acc16Overflow d;
  Acc16Dot(x.data(), 1, n.data(), 16, &d);
  EXPECT_EQ(d.overflow_steps, 0u);
  Acc16Dot(x.data(), 1, n.data(), 17, &d);
  EXPECT_EQ(d.overflow_steps, 1u);
  // Alternating signs never overflow however long.
  std::vector<int8_t> alt(40);
  for (size_t i = 0; i < alt.size(); ++i) alt[i] = i % 2 ? -8 : 7;
  Acc16Overflow e;
  Acc16Dot(x.data(), 1, alt.data(), 40, &e);
  EXPECT_EQ(e.overflow_steps, 0u);
  EXPECT_DOUBLE_EQ(c.step_percent(), 100.0 / 58);
}

TEST(Acc16, ConvolutionPadsWithTheZeroPointAndMatchesInnerProductForOneByOne) {
  // A 1×1 convolution is an inner product per pixel.
  Acc16ConvShape s;
  s.channels = 40, s.height = 1, s.width = 2, s.out_channels = 2;
  std::vector<uint8_t> x(80);
  for (int c = 0; c < 40; ++c) x[c * 2] = 255, x[c * 2 + 1] = 10;  // pixel 0 saturates, pixel 1 not
  std::vector<int8_t> w(80, 7);
  const Acc16Overflow conv = Acc16Convolution(x.data(), 0, w.data(), s);
  EXPECT_EQ(conv.outputs, 4u);
  EXPECT_EQ(conv.overflowed_outputs, 2u);
  // Padding: a 3×3 kernel over a 1×1 image with pad 1 sees 8 padded positions of x_zero.
  Acc16ConvShape p;
  p.channels = 2, p.out_channels = 1, p.kernel_h = p.kernel_w = 3, p.pad_h = p.pad_w = 1;
  const std::vector<uint8_t> one = {0, 0};
  const std::vector<int8_t> w18(18, 7);
  EXPECT_EQ(Acc16Convolution(one.data(), 255, w18.data(), p).overflow_steps, 0u);  // 16·1785 fits
  Acc16ConvShape p3 = p;
  p3.channels = 3;
  std::vector<int8_t> w27(27, -8);
  const std::vector<uint8_t> three = {0, 0, 0};
  EXPECT_EQ(Acc16Convolution(three.data(), 255, w27.data(), p3).overflow_steps, 1u);  // 24·(−2040)
}

}  // namespace
}  // namespace mpcaffe::quant

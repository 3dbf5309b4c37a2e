// tests/libdnn/conv_winograd_test.cc — the Winograd family (libdnn/conv_winograd.h) against the
// plain C++ reference convolution in fp32: odd sizes, uneven padding, channel counts past the
// register tiles and vector widths, batch, the fused bias, residual and ReLU; F(4×4)'s error
// measured against F(2×2)'s; the family chosen through MPCAFFE_KERNEL_CONFIG; and a disabled
// benchmark on ResNet-50's 3×3 layers against the direct kernel.
#include "libdnn/conv_winograd.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "device/device.h"
#include "device/settings.h"
#include "libdnn/conv_families.h"
#include "libdnn/tuner.h"
#include "tests/testing/close_to_reference.h"
#include "tests/testing/random_storage.h"

namespace mpcaffe::libdnn {
namespace {

using Floats = std::vector<float>;
using test_support::RelativeError;

Floats Random(size_t n, std::mt19937& rng) {
  const std::vector<uint8_t> b = test_inputs::RandomRealStorage(DataType::kFloat32, n, -1, 1, rng);
  Floats f(n);
  std::memcpy(f.data(), b.data(), n * 4);
  return f;
}

std::shared_ptr<DeviceMemory> Upload(Device& dev, const Floats& f) {
  auto m = dev.Allocate(std::max<size_t>(f.size(), 1) * 4);
  dev.CopyToDevice(f.data(), m.get(), 0, f.size() * 4);
  return m;
}

ConvDesc Desc(int n, int c, int h, int w, int o, int ph, int pw) {
  ConvDesc d;
  d.batch = n, d.channels = c, d.height = h, d.width = w, d.out_channels = o;
  d.kernel_h = d.kernel_w = 3;
  d.pad_h = ph, d.pad_w = pw;
  return d;
}

/// The error of `conv` (built for `d`) on random data in [−1, 1] against ConvForwardReference.
double ErrorOf(const ConvDesc& d, Convolution conv) {
  std::mt19937 rng(7);
  const Floats x = Random(d.input_count(), rng), w = Random(d.weight_count(), rng),
               b = Random(size_t(d.out_channels), rng), r = Random(d.output_count(), rng);
  Floats want(d.output_count());
  ConvForwardReference(d, {}, x.data(), w.data(), d.bias ? b.data() : nullptr, want.data(),
                       r.data());
  Device& dev = DefaultDevice();
  auto xm = Upload(dev, x), wm = Upload(dev, w), bm = Upload(dev, b), rm = Upload(dev, r);
  auto ym = dev.Allocate(want.size() * 4);
  conv.SetWeights(BufferRef(wm.get(), 0));
  conv.Forward(BufferRef(xm.get(), 0), BufferRef(bm.get(), 0), BufferRef(ym.get(), 0), nullptr,
               BufferRef(rm.get(), 0));
  Floats got(want.size());
  dev.CopyToHost(ym.get(), 0, got.data(), got.size() * 4);
  return RelativeError(got, want);
}

// F(2×2): two images of 5 channels, 9×11 with uneven padding (9×13 outputs: partial tiles in
// both directions), 13 output channels (past a tile of 8), 70 tiles (past two blocks of two
// vectors of 16), the whole epilogue. Within the direct kernel's fp32 tolerance (1e-5 of the
// output's scale).
TEST(ConvWinograd, F2MatchesTheReferenceWithTheFusedEpilogue) {
  ConvDesc d = Desc(2, 5, 9, 11, 13, 1, 2);
  d.bias = d.relu = d.residual = true;
  ASSERT_TRUE(WinogradApplies(d));
  Convolution conv = Convolution::Winograd(DefaultDevice(), d, {2, 8, 2, 16});
  EXPECT_TRUE(conv.forward_winograd());
  EXPECT_STREQ(conv.forward_path(), "winograd");
  EXPECT_LE(ErrorOf(d, std::move(conv)), 1e-5) << d.ToString();
  // Grouped (AlexNet's conv4 and conv5: two groups), group by group on the whole images: two
  // images, each group's output channels past the tile.
  ConvDesc g = Desc(2, 32, 9, 11, 38, 1, 2);
  g.groups = 2, g.bias = g.relu = g.residual = true;
  ASSERT_TRUE(WinogradApplies(g));
  EXPECT_LE(ErrorOf(g, Convolution::Winograd(DefaultDevice(), g, {2, 6, 1, 16})), 1e-5)
      << g.ToString();
}

// The input kernel's chunks of 8 tiles of a row (OpenCL): wide rows whose middle chunks lie
// inside the plane (two vector loads per window row), chunks at the edges and past the row's
// last tile (a vector of 4 per lane), rows narrower than a window row (value by value), no
// padding and a padding of 2; a mutation of any of them fails it.
TEST(ConvWinograd, F2InputChunksMatchTheReference) {
  for (const auto& [h, w, pad] : {std::array<int, 3>{5, 40, 1}, {6, 37, 0}, {3, 45, 2},
                                  {6, 3, 1}, {4, 2, 1}}) {
    ConvDesc d = Desc(2, 3, h, w, 9, pad, pad);
    d.bias = true;
    ASSERT_TRUE(WinogradApplies(d));
    EXPECT_LE(ErrorOf(d, Convolution::Winograd(DefaultDevice(), d, {2, 8, 1, 16})), 1e-5)
        << d.ToString();
  }
}

// F(4×4) on an unpadded 14×11 input (12×9 outputs: a partial column of tiles), 24 input and
// 20 output channels, bias, no ReLU (the sign of every output kept). Its interpolation points
// (0, ±1, ±2) amplify rounding: measured and printed, held to 1e-4 of the output's scale, ten
// times the direct kernel's fp32 tolerance — why it is opt-in only (conv_winograd.h).
TEST(ConvWinograd, F4MatchesTheReferenceWithinItsLargerRounding) {
  ConvDesc d = Desc(1, 24, 14, 11, 20, 0, 0);
  d.bias = true;
  const double err = ErrorOf(d, Convolution::Winograd(DefaultDevice(), d, {4, 4, 1, 8}));
  std::printf("F(4x4, 3x3) on %s: largest error over the output's scale %.2e\n",
              d.ToString().c_str(), err);
  EXPECT_LE(err, 1e-4) << d.ToString();
}

// MPCAFFE_KERNEL_CONFIG names the family and its configuration; "off" gives the direct kernel;
// descriptions outside the family (stride 2, int8 past its channel bound per group) never take
// it, grouped ones do (group by group), nor int8 from a configuration that does not fit it
// (v16: int8's tiles are vectors of 8).
TEST(ConvWinograd, ChosenThroughTheOverrideOnlyWhereItApplies) {
  Device& dev = DefaultDevice();
  ConvDesc d = Desc(2, 5, 9, 11, 13, 1, 2);
  d.bias = d.relu = d.residual = true;
  {
    ScopedSettings env;
    env->kernel_config = "conv_wino:m2 oc8 px1 v16";
    EXPECT_STREQ(Convolution::ForwardPathOf(dev, d), "winograd");
    ConvDesc strided = d;
    strided.stride_h = strided.stride_w = 2;
    ConvDesc grouped = Desc(1, 32, 8, 8, 32, 1, 1);
    grouped.groups = 2;
    EXPECT_TRUE(WinogradApplies(grouped));
    EXPECT_STREQ(Convolution::ForwardPathOf(dev, grouped), "winograd");
    ConvDesc narrow = grouped, many = grouped;  // groups of 8 channels; 8 groups
    narrow.channels = narrow.out_channels = 16;
    many.channels = many.out_channels = 128, many.groups = 8;
    ConvDesc q = d, wide = d, wide_groups = d;
    q.type = wide.type = wide_groups.type = DataType::kInt8Q;
    wide.channels = kWinogradInt8MaxChannels + 1;
    wide_groups.channels = 2 * kWinogradInt8MaxChannels, wide_groups.out_channels = 32;
    wide_groups.groups = 2;  // at the bound per group
    EXPECT_TRUE(WinogradApplies(wide_groups));
    for (const ConvDesc& other : {strided, wide, narrow, many}) {
      EXPECT_FALSE(WinogradApplies(other)) << other.ToString();
      EXPECT_STRNE(Convolution::ForwardPathOf(dev, other), "winograd") << other.ToString();
    }
    EXPECT_TRUE(WinogradApplies(q));
    EXPECT_FALSE(WinogradConfigFits(q, *ChooseWinograd(dev, d).config));
    env->kernel_config = "conv_wino:m2 oc6 px2 v8";
    EXPECT_STREQ(Convolution::ForwardPathOf(dev, q), "winograd");
  }
  {
    ScopedSettings env;
    env->kernel_config = "conv_wino:off";
    EXPECT_STREQ(Convolution::ForwardPathOf(dev, d), "direct");
  }
  ScopedSettings env;
  env->kernel_config = "conv_wino:m3 oc8 px1 v16";
  try {
    ChooseWinograd(dev, d);
    ADD_FAILURE() << "no error for m3";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("conv_wino"), std::string::npos) << e.what();
  }
  EXPECT_THROW(WinogradSource(KernelTarget::Of(dev), Desc(1, 4, 8, 8, 4, 1, 1), {2, 16, 2, 16}),
               Error);
}

// ResNet-50's 3×3 stride-1 layers at batch 1: the direct kernel's default and each Winograd
// configuration (the tuner's and F(4×4)'s), rounds alternating between them, the median of the
// rounds' minima of 3 runs. A benchmark, not a check; nothing is stored.
//   MPCAFFE_DEVICE=pocl build/bin/test_libdnn --gtest_also_run_disabled_tests
//       --gtest_filter='ConvWinograd.DISABLED_ResNet3x3'
TEST(ConvWinograd, DISABLED_ResNet3x3) {
  Device& dev = DefaultDevice();
  std::vector<WinogradChoice> choices{std::nullopt};
  for (const WinogradConfig& c : WinogradCandidates({2, 8, 1, 16})) choices.push_back(c);
  for (WinogradConfig c : {WinogradConfig{4, 8, 1, 16}, {4, 8, 2, 16}, {4, 4, 2, 16}}) choices.push_back(c);
  for (auto [c, hw] : {std::pair<int, int>{64, 56}, {128, 28}, {256, 14}, {512, 7}}) {
    ConvDesc d = Desc(1, c, hw, hw, c, 1, 1);
    d.bias = d.relu = true;
    const ConvOperands ops(dev, d);
    std::vector<std::shared_ptr<Convolution>> convs;
    for (const WinogradChoice& w : choices) {
      convs.push_back(std::make_shared<Convolution>(
          w ? Convolution::Winograd(dev, d, *w)
            : Convolution(dev, d, {}, DefaultConvConfig(dev.info(), d.type))));
      convs.back()->SetWeights(BufferRef(ops.weights.get(), 0));
    }
    std::vector<std::vector<double>> ms(choices.size());
    for (int round = 0; round < 5; ++round)
      for (size_t i = 0; i < choices.size(); ++i)
        ms[i].push_back(TimeMs(
            [&] {
              return convs[i]->Forward(BufferRef(ops.input.get(), 0), BufferRef(ops.bias.get(), 0),
                                       BufferRef(ops.output.get(), 0));
            },
            3));
    for (size_t i = 0; i < choices.size(); ++i) {
      std::sort(ms[i].begin(), ms[i].end());
      std::printf("%-44s %-22s %8.3f ms\n", d.ToString().c_str(),
                  choices[i] ? choices[i]->ToString().c_str() : "direct", ms[i][ms[i].size() / 2]);
    }
  }
}

}  // namespace
}  // namespace mpcaffe::libdnn

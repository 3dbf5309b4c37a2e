// tests/libdnn/conv_test.cc — the convolution kernels against the plain C++ references: forward
// on 22 shapes (LeNet's and AlexNet's layers scaled down, odd sizes, 1×1, groups, stride,
// padding, dilation) in every data type, the depthwise, pointwise and tile variants, fp32
// backward, references checked by finite differences, and a disabled AlexNet benchmark
// (conv_pairs_test.cc: the exact integer paths on their edge cases).
#include "libdnn/conv.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "cache/program_cache.h"
#include "codegen/datatype.h"
#include "device/device.h"
#include "tests/testing/random_storage.h"
#include "tests/testing/sweep.h"
#include "libdnn/conv_internal.h"
#include "libdnn/conv_winograd.h"
#include "tests/libdnn/conv_check.h"
#include "libdnn/tuner.h"
#include "quant/fixed_point.h"
#include "device/settings.h"

namespace mpcaffe::libdnn {
namespace {

using namespace conv_check;  // NOLINT: the convolution tests' shared vocabulary


class ConvForward : public testing::TestWithParam<DataType> {};

TEST_P(ConvForward, MatchesReferenceOnEveryShape) {
  const DataType t = GetParam();
  Device& dev = DefaultDevice();
  std::mt19937 rng(1234 + int(t));
  int index = 0;
  Saturation sat;
  for (const Shape& s : kShapes) {
    ConvDesc d = DescOf(s, t, index);
    d.residual = index % 3 == 2;  // a fused residual input (the optimizer's Eltwise SUM)
    SCOPED_TRACE(d.ToString());
    const ConvQuant quant = TestQuant(d, (index / 2) % 2 == 1, rng);
    CheckForward(
        d, quant, rng, [&](const ConvDesc& dd, const ConvQuant& qq) { return Convolution(dev, dd, qq); },
        &sat);
    ++index;
  }
  if (IsQuantized(t)) {
    // The data exercise the requantization, not only the clamps.
    EXPECT_LT(sat.low + sat.high, sat.total / 3) << sat.low << " low, " << sat.high << " high";
  }
}

// The depthwise kernel with every number of rows per work-item the tuner may pick (and odd
// ones), on MobileNet-like shapes scaled down — stride 1 and 2, output heights that leave a
// partial last block, a rectangular dilated window — in every type with bias, ReLU and the
// fused residual varied: the same results as the reference.
TEST_P(ConvForward, DepthwiseRowsMatchReference) {
  const DataType t = GetParam();
  Device& dev = DefaultDevice();
  std::mt19937 rng(99 + int(t));
  // clang-format off
  const Shape shapes[] = {
      {1, 16, 17, 17, 16, 3, 3, 1, 1, 1, 1, 1, 1, 16},  // 3×3 s1, 17 rows (no divisor in 4..16)
      {2, 8, 17, 17, 8, 3, 3, 2, 2, 1, 1, 1, 1, 8},     // 3×3 s2, 9 output rows
      {1, 4, 12, 70, 4, 3, 3, 2, 2, 0, 1, 1, 1, 4},     // s2 no vertical padding, 35 > 32 columns
      {1, 3, 9, 10, 3, 2, 3, 1, 2, 1, 0, 2, 1, 3},      // 2×3 window, dilation 2 rows
  };
  // clang-format on
  // Every shape with every row count under the exhaustive sweep (blocks taller than the output
  // included); else each shape with two of them that its output is at least as tall as (as the
  // tuner's candidates are, DepthwiseRowCandidates), so that the four shapes take all five.
  const int row_counts[] = {1, 3, 7, 8, 16};
  const int sampled[4][2] = {{4, 1}, {3, 0}, {0, 1}, {2, 3}};
  int index = 0, shape = 0;
  for (const Shape& s : shapes) {
    for (int k = 0; k < 5; ++k) {
      if (!test_support::ExhaustiveSweep() && k != sampled[shape][0] && k != sampled[shape][1])
        continue;
      const int rows = row_counts[k];
      ConvDesc d = DescOf(s, t, index);
      d.residual = index % 3 == 0;
      SCOPED_TRACE(d.ToString() + " rows " + std::to_string(rows));
      ConvQuant quant = TestQuant(d, index % 2 == 0, rng);
      // int8 accumulates in float when z_x is in the stored range; every fifth case has one
      // beyond it (the int32 window).
      if (t == DataType::kInt8Q && index % 5 == 4) quant.x_zero = 300;
      // Columns per work-item where vectors apply (OpenCL fp32 / int8q): 1, 8 and 16 in turn
      // (16 only at stride 1), so the cases meet each; partial last vectors, masked edge
      // columns and the lane-by-lane loads at the buffer's ends included.
      int vx = 1;
      const int turn = (index + index / 3) % 3;  // every shape and residual or not meets each
      if (Convolution::DepthwiseVectorWidth(d, KernelTarget::Of(dev), quant.x_zero) > 1)
        vx = turn == 0 ? 1 : turn == 1 || d.stride_w > 1 ? 8 : 16;
      SCOPED_TRACE("vx " + std::to_string(vx));
      CheckForward(d, quant, rng, [&](const ConvDesc& dd, const ConvQuant& qq) {
        Convolution c = Convolution::Depthwise(dev, dd, qq, rows, vx);
        EXPECT_TRUE(c.forward_depthwise());
        EXPECT_EQ(c.depthwise_rows(), rows);
        EXPECT_EQ(c.depthwise_vx(), vx);
        return c;
      });
      ++index;
    }
    ++shape;
  }
}

// Pointwise convolutions (1×1, stride 1, no padding, one group) through the GEMM without
// im2col (MPCAFFE_CONV_GEMM=1 takes the GEMM wherever it applies): the same results.
TEST_P(ConvForward, PointwiseGemmMatchesReference) {
  const DataType t = GetParam();
  Device& dev = DefaultDevice();
  if (dev.backend() != Backend::kOpenCL || (t != DataType::kFloat32 && t != DataType::kInt8Q))
    GTEST_SKIP() << "the convolution's GEMM path is OpenCL's, fp32 and int8q only";
  std::mt19937 rng(7 + int(t));
  ScopedSettings env;
  env->conv_gemm = "1";
  // clang-format off
  const Shape shapes[] = {
      {2, 7, 5, 5, 9, 1, 1, 1, 1, 0, 0, 1, 1, 1},
      {1, 32, 14, 14, 40, 1, 1, 1, 1, 0, 0, 1, 1, 1},
      {3, 13, 1, 1, 5, 1, 1, 1, 1, 0, 0, 1, 1, 1},
  };
  // clang-format on
  int index = 0;
  for (const Shape& s : shapes) {
    ConvDesc d = DescOf(s, t, index);
    SCOPED_TRACE(d.ToString());
    ASSERT_TRUE(Convolution::IsPointwise(d));
    ConvQuant quant = TestQuant(d, false, rng);  // the GEMM takes one weight zero point
    CheckForward(d, quant, rng, [&](const ConvDesc& dd, const ConvQuant& qq) {
      Convolution c(dev, dd, qq);
      EXPECT_TRUE(c.forward_gemm());
      return c;
    });
    ++index;
  }
}

// The pointwise kernel (fp32 1×1 unpadded one-group convolutions: vectors along the
// planes' pixels) with tiles the default and the tuner may pick and odd ones: planes that are
// and are not multiples of a block (the last block shifted back), output channels that do and do
// not fill the last channel block, bias, ReLU and the residual varied, batches of 1 to 3.
TEST_P(ConvForward, PointwiseTilesMatchReference) {
  const DataType t = GetParam();
  if (t != DataType::kFloat32 && t != DataType::kInt8Q)
    GTEST_SKIP() << "the pointwise kernel is fp32's and int8q's";
  Device& dev = DefaultDevice();
  if (t == DataType::kInt8Q && dev.backend() != Backend::kOpenCL)
    GTEST_SKIP() << "the int8q pointwise kernel is OpenCL text";
  std::mt19937 rng(17);
  // clang-format off
  const Shape shapes[] = {
      {1, 16, 8, 8, 24, 1, 1, 1, 1, 0, 0, 1, 1, 1},   // 64 pixels: whole blocks
      {2, 5, 7, 7, 7, 1, 1, 1, 1, 0, 0, 1, 1, 1},     // 49 pixels, 7 channels
      {3, 24, 5, 6, 13, 1, 1, 1, 1, 0, 0, 1, 1, 1},   // 30 pixels
      {1, 3, 2, 3, 4, 1, 1, 1, 1, 0, 0, 1, 1, 1},     // 6 pixels: 4-lane vectors only
      // The row form (few input channels, OpenCL): first layers scaled down.
      {1, 3, 17, 19, 10, 3, 3, 2, 2, 1, 1, 1, 1, 1},  // 3×3 stride 2, padded, 10 columns
      {2, 3, 20, 37, 8, 7, 7, 2, 2, 3, 3, 1, 1, 1},   // 7×7 stride 2 (ResNet, GoogLeNet)
      {1, 4, 9, 30, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1},    // stride 1, padded
      {1, 2, 5, 40, 5, 3, 2, 1, 1, 0, 0, 1, 1, 1},    // rectangular window, unpadded
      // fp32 1×1 stride 2: the plane form on the subsampled input, image by image.
      {2, 12, 9, 11, 10, 1, 1, 2, 2, 0, 0, 1, 1, 1},  // 30 output pixels
      // fp32: 1.15 MB of input, more than a core's L2 (conv.cc's groups of pixels first).
      {1, 96, 60, 50, 40, 1, 1, 1, 1, 0, 0, 1, 1, 1},
  };
  // clang-format on
  // The last fetches its input 4 channels ahead (fp32's plane form: pf).
  const Convolution::PointwiseTile tiles[] = {{4, 2, 8}, {1, 1, 4}, {3, 3, 4}, {6, 1, 16},
                                              {8, 2, 8}, {2, 4, 8}, {8, 1, 8}, {5, 1, 4},
                                              {8, 2, 8, 2, 1, 1, 4}};
  constexpr int kTiles = int(std::size(tiles));
  // Every shape with every tile under the exhaustive sweep; else each shape with two of the
  // tiles that apply to it and have not met its form yet (from tile 2j on for shape j), so
  // that every tile meets the plane form and the row form wherever it applies.
  auto is_row_form = [](const ConvDesc& d) {
    return !Convolution::IsPointwise(d) && !Convolution::IsStridedPointwise(d);
  };
  // Which tiles apply to some shape in each form (plane 0, row 1), and which ran.
  bool applies[2][kTiles] = {}, ran[2][kTiles] = {};
  for (const Shape& s : shapes)
    for (int k = 0; k < kTiles; ++k) {
      const ConvDesc d = DescOf(s, t, 0);
      if (Convolution::PointwiseApplies(d, tiles[k])) applies[is_row_form(d)][k] = true;
    }
  int index = 0, shape = -1;
  for (const Shape& s : shapes) {
    ++shape;
    const bool row_form = is_row_form(DescOf(s, t, 0));
    if (row_form && dev.backend() != Backend::kOpenCL) continue;
    // The tiles that apply, from tile 2j on; the sample takes two of them that have not run in
    // this form yet, or the first when all have.
    std::vector<int> order, fresh;
    for (int i = 0; i < kTiles; ++i) {
      const int k = (2 * shape + i) % kTiles;
      if (!Convolution::PointwiseApplies(DescOf(s, t, 0), tiles[k])) continue;
      order.push_back(k);
      if (!ran[row_form][k] && fresh.size() < 2) fresh.push_back(k);
    }
    if (!test_support::ExhaustiveSweep())
      order = !fresh.empty() || order.empty() ? fresh : std::vector<int>{order[0]};
    for (int k : order) {
      const Convolution::PointwiseTile& tile = tiles[k];
      ConvDesc d = DescOf(s, t, index);
      d.residual = index % 3 == 0;
      ASSERT_TRUE(Convolution::PointwiseApplies(d, tile)) << d.ToString();
      ran[row_form][k] = true;
      SCOPED_TRACE(d.ToString() + " tile " + tile.ToString());
      // int8q: per-channel or per-tensor weights, signed (DescOf: odd indices) or with zero
      // points; exact against the reference.
      const ConvQuant quant = TestQuant(d, index % 4 < 2, rng);
      CheckForward(d, quant, rng, [&](const ConvDesc& dd, const ConvQuant& qq) {
        Convolution c = Convolution::Pointwise(dev, dd, tile, qq);
        EXPECT_TRUE(c.forward_pointwise());
        EXPECT_TRUE(c.pointwise_tile() == tile);
        return c;
      });
      ++index;
    }
  }
  // The plane form with vectors of 8 or 16 pixels, and the row form (OpenCL).
  if (test_support::ExhaustiveSweep()) {
    if (t == DataType::kInt8Q)
      EXPECT_GE(index, 28);
    else
      EXPECT_GE(index, dev.backend() == Backend::kOpenCL ? 34 : 24);
  }
  // Every tile ran in each form that it applies to (the row form on OpenCL).
  for (int form : {0, 1}) {
    if (form == 1 && dev.backend() != Backend::kOpenCL) continue;
    for (int k = 0; k < kTiles; ++k)
      EXPECT_EQ(ran[form][k], applies[form][k])
          << "tile " << tiles[k].ToString() << (form ? " in the row form" : " in the plane form");
  }
}

// Depthwise descriptions (one input and output channel per group) take the depthwise kernel
// (MatchesReferenceOnEveryShape checks its results), others do not; MPCAFFE_CONV_DEPTHWISE=0
// turns it off. The choice is checked on every shape without building a program
// (ForwardPathOf); one depthwise and one other shape per type are built to see the constructor
// run what the plan says.
TEST(ConvForward, DepthwiseShapesTakeTheDepthwiseKernel) {
  Device& dev = DefaultDevice();
  std::mt19937 rng(5);
  int depthwise = 0;
  for (DataType t : {DataType::kFloat32, DataType::kInt8Q}) {
    bool built_depthwise = false, built_other = false;
    for (const Shape& s : kShapes) {
      const ConvDesc d = DescOf(s, t, 0);
      const ConvQuant quant = IsQuantized(t) ? MakeQuant(d, true, rng) : ConvQuant{};
      const bool want = s.g > 1 && s.c == s.g && s.o == s.g;
      EXPECT_EQ(Convolution::IsDepthwise(d), want) << d.ToString();
      const std::string path = Convolution::ForwardPathOf(dev, d, quant);
      EXPECT_EQ(path == "depthwise", want) << d.ToString();
      bool& built = want ? built_depthwise : built_other;
      if (!built) {
        const Convolution conv(dev, d, quant);
        EXPECT_EQ(conv.forward_path(), path) << d.ToString();
        EXPECT_EQ(conv.forward_depthwise(), want) << d.ToString();
        built = true;
      }
      depthwise += want;
      if (want) {
        ScopedSettings env;
        env->conv_depthwise = "0";
        EXPECT_NE(std::string(Convolution::ForwardPathOf(dev, d, quant)), "depthwise")
            << d.ToString();
      }
    }
  }
  EXPECT_EQ(depthwise, 6);  // three shapes, two types
}

// The int8q pointwise, depthwise and Winograd output kernels hold only the requantization paths
// their ConvQuant takes (libdnn::RequantKnown, checked on the host): every channel's right shift in
// 34 … 62 and the residual's in 17 … 47 (the zoo nets' calibrations: the int32 lanes alone), one
// channel at 20 (the long lanes for the output), the residual at 50 (the long lanes for it);
// each against the reference, in the pointwise tiles of the AVX2 defaults (those of 7×7 planes
// too), the depthwise vector forms of 8 and 16 columns and F(2×2) in integers. Treating either
// check as always true fails this.
TEST(ConvInt8Requant, PointwiseDepthwiseAndWinogradKernelsTakeEveryPath) {
  Device& dev = DefaultDevice();
  if (dev.backend() != Backend::kOpenCL) GTEST_SKIP() << "the int8q vector kernels are OpenCL C";
  std::mt19937 rng(47);
  // clang-format off
  const Shape pointwise = {1, 24, 6, 6, 20, 1, 1, 1, 1, 0, 0, 1, 1, 1};
  const Shape depthwise = {1, 12, 11, 19, 12, 3, 3, 1, 1, 1, 1, 1, 1, 12};
  const Shape winograd = {2, 6, 7, 9, 10, 3, 3, 1, 1, 1, 1, 1, 1, 1};  // partial tiles
  // clang-format on
  // Each variant's tile, and for the first two also the AVX2 defaults of 7×7 planes.
  const Convolution::PointwiseTile tiles[] = {{8, 1, 16}, {6, 2, 8}, {6, 2, 8, 2, 64}};
  const Convolution::PointwiseTile small_plane_tiles[] = {{8, 1, 8, 2, 64}, {10, 1, 8}};
  int index = 0;
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant == 0   ? "every path known"
                 : variant == 1 ? "one channel's right shift 20"
                                : "the residual's right shift 50");
    auto make_quant = [&](const ConvDesc& d) {
      ConvQuant q = MakeQuant(d, true, rng);
      q.res_zero = q.c_zero / 2;
      q.res_multiplier = quant::QuantizeMultiplier(0.4);
      if (variant == 1) q.multiplier[q.multiplier.size() / 2] = {1 << 30, 31 - 20};
      if (variant == 2) q.res_multiplier = quant::QuantizeMultiplier(std::ldexp(0.7, -19));
      return q;
    };
    ConvDesc p = DescOf(pointwise, DataType::kInt8Q, index++);
    p.residual = true, p.relu = variant % 2 == 1;
    for (int t = 0; t < (variant < 2 ? 2 : 1); ++t) {
      const Convolution::PointwiseTile& tile = t == 0 ? tiles[variant] : small_plane_tiles[variant];
      SCOPED_TRACE(p.ToString() + " tile " + tile.ToString());
      CheckForward(p, make_quant(p), rng, [&](const ConvDesc& dd, const ConvQuant& qq) {
        return Convolution::Pointwise(dev, dd, tile, qq);
      });
    }
    ConvDesc d = DescOf(depthwise, DataType::kInt8Q, index++);
    d.residual = true, d.relu = variant % 2 == 0;
    const int vx = variant % 2 ? 8 : 16;
    SCOPED_TRACE(d.ToString() + " vx " + std::to_string(vx));
    CheckForward(d, make_quant(d), rng, [&](const ConvDesc& dd, const ConvQuant& qq) {
      return Convolution::Depthwise(dev, dd, qq, 4, vx);
    });
    ConvDesc g = DescOf(winograd, DataType::kInt8Q, index++);
    g.residual = true, g.relu = variant != 1;
    SCOPED_TRACE(g.ToString() + " Winograd");
    CheckForward(g, make_quant(g), rng, [&](const ConvDesc& dd, const ConvQuant& qq) {
      return Convolution::Winograd(dev, dd, {2, 6, 2, 8}, qq);
    });
  }
}

// A zipped tile's blocks of output channels shared among work-items (PointwiseZipBlocks): on a
// 7×7 plane 10 blocks of 8 channels in groups of 3 and a last of 1 on two compute units, and 70
// blocks (the last partial) in even groups; with a residual, exact against the reference.
TEST(ConvInt8Requant, ZippedTilesShareTheirChannelBlocks) {
  Device& dev = DefaultDevice();
  if (dev.backend() != Backend::kOpenCL) GTEST_SKIP() << "the int8q pointwise kernel is OpenCL C";
  std::mt19937 rng(61);
  const Convolution::PointwiseTile tile{8, 1, 16, 2, 64};
  int index = 0;
  for (int out : {76, 557}) {
    ConvDesc d = DescOf({1, 24, 7, 7, out, 1, 1, 1, 1, 0, 0, 1, 1, 1}, DataType::kInt8Q, index++);
    d.residual = true;
    const int blocks = conv_internal::PointwiseZipBlocks(d, tile, dev.info());
    SCOPED_TRACE(d.ToString() + " ob " + std::to_string(blocks));
    if (out == 557) EXPECT_LE(blocks, 35);  // 70 blocks: 64 and 6 no more
    CheckForward(d, TestQuant(d, index % 2 == 0, rng), rng,
                 [&](const ConvDesc& dd, const ConvQuant& qq) {
                   Convolution c = Convolution::Pointwise(dev, dd, tile, qq);
                   EXPECT_EQ(c.pointwise_tile().ob, blocks);
                   return c;
                 });
  }
}

// Right shifts below 34 (a first layer's: MobileNet v1's conv1 has 27 … 29) take the int32
// lanes after a left shift where quant::RequantPreShift's check holds: half the channels at
// right shifts about 29 (mostly saturated outputs), half with MakeQuant's spread eight times
// wider (about 36: outputs across the range). Each kernel form against the reference: the
// pointwise plane and row forms (MobileNet's conv1 shape, scaled), the depthwise vector forms,
// F(2×2) in integers and the direct kernel's vector epilogue (the rq_mode argument).
TEST(ConvInt8Requant, LowRightShiftsTakeTheInt32LanesAfterALeftShift) {
  Device& dev = DefaultDevice();
  if (dev.backend() != Backend::kOpenCL) GTEST_SKIP() << "the int8q vector kernels are OpenCL C";
  std::mt19937 rng(53);
  auto make_quant = [&](const ConvDesc& d) {
    ConvQuant q = MakeQuant(d, true, rng);
    for (size_t c = 0; c < q.multiplier.size(); ++c) {
      const auto& m = q.multiplier[c];
      q.multiplier[c] = c % 2 ? quant::FixedPointMultiplier{m.multiplier, m.shift + 3}
                              : quant::QuantizeMultiplier(1.5 + 0.1 * double(c % 5));
    }
    EXPECT_GT(quant::RequantPreShift(q.multiplier, 1 << 17), 0) << d.ToString();
    return q;
  };
  // clang-format off
  const Shape pointwise = {1, 24, 6, 6, 20, 1, 1, 1, 1, 0, 0, 1, 1, 1};
  const Shape rows = {1, 3, 30, 30, 32, 3, 3, 2, 2, 1, 1, 1, 1, 1};
  const Shape depthwise = {1, 12, 11, 19, 12, 3, 3, 1, 1, 1, 1, 1, 1, 12};
  const Shape winograd = {2, 6, 7, 9, 10, 3, 3, 1, 1, 1, 1, 1, 1, 1};
  const Shape direct = {1, 20, 9, 9, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1};
  // clang-format on
  int index = 0;
  for (const auto& [shape, tile] : {std::pair{pointwise, Convolution::PointwiseTile{8, 1, 16}},
                                    std::pair{pointwise, Convolution::PointwiseTile{6, 2, 8}},
                                    std::pair{rows, Convolution::PointwiseTile{16, 1, 8, 2, 1,
                                                                               2}}}) {
    ConvDesc d = DescOf(shape, DataType::kInt8Q, index++);
    SCOPED_TRACE(d.ToString() + " tile " + tile.ToString());
    CheckForward(d, make_quant(d), rng, [&](const ConvDesc& dd, const ConvQuant& qq) {
      return Convolution::Pointwise(dev, dd, tile, qq);
    });
  }
  for (int vx : {8, 16}) {
    ConvDesc d = DescOf(depthwise, DataType::kInt8Q, index++);
    SCOPED_TRACE(d.ToString() + " vx " + std::to_string(vx));
    CheckForward(d, make_quant(d), rng, [&](const ConvDesc& dd, const ConvQuant& qq) {
      return Convolution::Depthwise(dev, dd, qq, 4, vx);
    });
  }
  ConvDesc g = DescOf(winograd, DataType::kInt8Q, index++);
  SCOPED_TRACE(g.ToString() + " Winograd");
  CheckForward(g, make_quant(g), rng, [&](const ConvDesc& dd, const ConvQuant& qq) {
    return Convolution::Winograd(dev, dd, {2, 6, 2, 8}, qq);
  });
  for (const ConvConfig& c : {ConvConfig{1, 2, 3, 8}, ConvConfig{1, 1, 4, 4}}) {
    ConvDesc d = DescOf(direct, DataType::kInt8Q, index++);
    SCOPED_TRACE(d.ToString() + " direct " + c.ToString());
    CheckForward(d, make_quant(d), rng, [&](const ConvDesc& dd, const ConvQuant& qq) {
      return Convolution(dev, dd, qq, c);
    });
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ConvForward,
                         testing::Values(DataType::kFloat32, DataType::kFloat16, DataType::kInt16Q,
                                         DataType::kInt8Q),
                         [](const testing::TestParamInfo<DataType>& i) {
                           return std::string(Name(i.param));
                         });

TEST(ConvForward, TileConfigurationsGiveTheSameResults) {
  Device& dev = DefaultDevice();
  std::mt19937 rng(77);
  for (DataType t : {DataType::kFloat32, DataType::kInt8Q}) {
    const ConvDesc d = DescOf(kShapes[13], t, 0);  // groups 4, odd sizes, stride
    const ConvQuant quant = IsQuantized(t) ? MakeQuant(d, true, rng) : ConvQuant{};
    const Bytes x = IsQuantized(t) ? RandomQ(t, d.input_count(), false, rng)
                                   : RandomFloats(t, d.input_count(), -1, 1, rng);
    const Bytes w = IsQuantized(t) ? RandomQ(t, d.weight_count(), false, rng)
                                   : RandomFloats(t, d.weight_count(), -1, 1, rng);
    const Bytes bias = RandomBias(d, rng);
    Bytes want(d.output_count() * SizeOf(t));
    ConvForwardReference(d, quant, x.data(), w.data(), bias.data(), want.data());
    auto xm = Upload(dev, x), wm = Upload(dev, w), bm = Upload(dev, bias);
    // Beyond the default (every other test): a narrower vector, and scalar lanes in a
    // work-group (the GPU/CUDA shape).
    for (const ConvConfig& c : {ConvConfig{1, 4, 3, 4}, ConvConfig{16, 2, 3, 1}}) {
      SCOPED_TRACE(c.ToString() + " " + d.ToString());
      Convolution conv(dev, d, quant, c);
      auto ym = dev.Allocate(want.size());
      conv.SetWeights(BufferRef(wm.get(), 0));
      conv.Forward(BufferRef(xm.get(), 0), BufferRef(bm.get(), 0), BufferRef(ym.get(), 0));
      const Bytes got = Download(dev, ym, want.size());
      if (IsQuantized(t))
        EXPECT_EQ(got, want);
      else
        ExpectCloseToReference(RealsOf(t, got), RealsOf(t, want), 1e-5, c.ToString());
    }
  }
}

// ------------------------------------------------------------------------------------------
// Backward (fp32)

TEST(ConvBackward, MatchesReferenceOnEveryShape) {
  Device& dev = DefaultDevice();
  std::mt19937 rng(99);
  int index = 0;
  for (const Shape& s : kShapes) {
    ConvDesc d = DescOf(s, DataType::kFloat32, index++);
    d.relu = false;
    SCOPED_TRACE(d.ToString());
    const Bytes x = RandomFloats(d.type, d.input_count(), -1, 1, rng);
    const Bytes w = RandomFloats(d.type, d.weight_count(), -1, 1, rng);
    const Bytes top = RandomFloats(d.type, d.output_count(), -1, 1, rng);
    const Bytes wdiff0 = RandomFloats(d.type, d.weight_count(), -1, 1, rng);
    const Bytes bdiff0 = RandomFloats(d.type, size_t(d.out_channels), -1, 1, rng);
    std::vector<float> want_dx(d.input_count()), want_dw = RealsOf(d.type, wdiff0),
                                                 want_db = RealsOf(d.type, bdiff0);
    ConvBackwardDataReference(d, RealsOf(d.type, top).data(), RealsOf(d.type, w).data(),
                              want_dx.data());
    ConvBackwardWeightsReference(d, RealsOf(d.type, top).data(), RealsOf(d.type, x).data(),
                                 want_dw.data(), want_db.data());

    Convolution conv(dev, d);
    auto xm = Upload(dev, x), wm = Upload(dev, w), tm = Upload(dev, top);
    auto dwm = Upload(dev, wdiff0), dbm = Upload(dev, bdiff0);
    auto dxm = dev.Allocate(d.input_count() * 4);
    conv.BackwardData(BufferRef(tm.get(), 0), BufferRef(wm.get(), 0), BufferRef(dxm.get(), 0));
    conv.BackwardWeights(BufferRef(tm.get(), 0), BufferRef(xm.get(), 0), BufferRef(dwm.get(), 0),
                         BufferRef(dbm.get(), 0));
    ExpectCloseToReference(RealsOf(d.type, Download(dev, dxm, d.input_count() * 4)), want_dx,
                           1e-5, "bottom_diff");
    ExpectCloseToReference(RealsOf(d.type, Download(dev, dwm, d.weight_count() * 4)), want_dw,
                           1e-5, "weight_diff");
    ExpectCloseToReference(RealsOf(d.type, Download(dev, dbm, size_t(d.out_channels) * 4)),
                           want_db, 1e-5, "bias_diff");
  }
}

// The backward references agree with finite differences of the forward reference
// (L = Σ top·y, so ∂L/∂x = BackwardData(top), ∂L/∂w = BackwardWeights(top)).
TEST(ConvBackward, ReferencesMatchFiniteDifferences) {
  std::mt19937 rng(5);
  for (int which : {11, 13}) {  // dilation + stride; groups
    ConvDesc d = DescOf(kShapes[which], DataType::kFloat32, 0);
    d.bias = false, d.relu = false;
    std::vector<float> x = RealsOf(d.type, RandomFloats(d.type, d.input_count(), -1, 1, rng));
    std::vector<float> w = RealsOf(d.type, RandomFloats(d.type, d.weight_count(), -1, 1, rng));
    const std::vector<float> top =
        RealsOf(d.type, RandomFloats(d.type, d.output_count(), -1, 1, rng));
    auto loss = [&]() {
      std::vector<float> y(d.output_count());
      ConvForwardReference(d, {}, x.data(), w.data(), nullptr, y.data());
      double l = 0;
      for (size_t i = 0; i < y.size(); ++i) l += double(top[i]) * y[i];
      return l;
    };
    std::vector<float> dx(d.input_count()), dw(d.weight_count(), 0.0f);
    ConvBackwardDataReference(d, top.data(), w.data(), dx.data());
    ConvBackwardWeightsReference(d, top.data(), x.data(), dw.data(), nullptr);
    const float eps = 1e-2f;
    for (auto [v, g] : {std::pair<std::vector<float>*, std::vector<float>*>{&x, &dx}, {&w, &dw}}) {
      for (size_t i = 0; i < v->size(); i += 7) {
        const float keep = (*v)[i];
        (*v)[i] = keep + eps;
        const double up = loss();
        (*v)[i] = keep - eps;
        const double down = loss();
        (*v)[i] = keep;
        EXPECT_NEAR((up - down) / (2 * eps), (*g)[i], 2e-3) << d.ToString() << " index " << i;
      }
    }
  }
}

// ------------------------------------------------------------------------------------------
// Benchmark (not run by default): AlexNet's five convolutions at batch 1, each type with its
// DefaultConvConfig.
//   build-conv/bin/test_libdnn --gtest_also_run_disabled_tests
//     --gtest_filter='ConvBench.DISABLED_AlexNetBatch1'
// Environment: MPCAFFE_CONV_TYPES="fp32,int8q,int16q" (default fp32,int8q);
// MPCAFFE_CONV_TILES="l1 oc4 px3 v8;l1 oc2 px4 v8" times these configurations for every type;
// MPCAFFE_CONV_BATCH=16; MPCAFFE_CONV_REPS=6 (best of); MPCAFFE_CONV_SHAPES="n,c,h,w,o,kh,kw,
// sh,sw,ph,pw,dh,dw,g;..." replaces the layers. All variants of a layer run in the same rounds,
// one run each per round, so a shared machine's load hits them alike.

std::vector<ConvConfig> BenchConfigs(const char* env) {
  std::vector<ConvConfig> out;
  std::string s = env;
  size_t start = 0;
  while (start < s.size()) {
    size_t end = s.find(';', start);
    if (end == std::string::npos) end = s.size();
    std::string one = s.substr(start, end - start);
    one.erase(0, one.find_first_not_of(' '));
    if (const auto c = ParseConvConfig(one)) out.push_back(*c);  // "l32 oc2 px4 v1 k4" too
    start = end + 1;
  }
  return out;
}

TEST(ConvBench, DISABLED_AlexNetBatch1) {
  Device& dev = DefaultDevice();
  // clang-format off
  std::vector<Shape> layers = {
      {1, 3, 227, 227, 96, 11, 11, 4, 4, 0, 0, 1, 1, 1},
      {1, 96, 27, 27, 256, 5, 5, 1, 1, 2, 2, 1, 1, 2},
      {1, 256, 13, 13, 384, 3, 3, 1, 1, 1, 1, 1, 1, 1},
      {1, 384, 13, 13, 384, 3, 3, 1, 1, 1, 1, 1, 1, 2},
      {1, 384, 13, 13, 256, 3, 3, 1, 1, 1, 1, 1, 1, 2},
  };
  // clang-format on
  if (const char* shapes = std::getenv("MPCAFFE_CONV_SHAPES")) {
    layers.clear();
    std::string text = shapes;
    for (size_t a = 0; a < text.size();) {
      size_t b = text.find(';', a);
      if (b == std::string::npos) b = text.size();
      Shape sh;
      if (std::sscanf(text.substr(a, b - a).c_str(), "%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d",
                      &sh.n, &sh.c, &sh.h, &sh.w, &sh.o, &sh.kh, &sh.kw, &sh.sh, &sh.sw, &sh.ph,
                      &sh.pw, &sh.dh, &sh.dw, &sh.g) == 14)
        layers.push_back(sh);
      a = b + 1;
    }
  }
  const char* types = std::getenv("MPCAFFE_CONV_TYPES");
  std::vector<std::string> list = {"fp32", "int8q"};
  if (types) {
    list.clear();
    std::string s = types;
    for (size_t a = 0; a < s.size();) {
      size_t b = s.find(',', a);
      if (b == std::string::npos) b = s.size();
      list.push_back(s.substr(a, b - a));
      a = b + 1;
    }
  }
  const char* reps_env = std::getenv("MPCAFFE_CONV_REPS");
  const int reps = reps_env ? std::max(1, std::atoi(reps_env)) : 6;
  const char* batch_env = std::getenv("MPCAFFE_CONV_BATCH");
  const int batch = batch_env ? std::max(1, std::atoi(batch_env)) : 1;
  std::printf("device: %s\n", dev.info().name.c_str());
  std::mt19937 rng(1);
  struct Variant {
    ConvConfig cfg;
    std::string type;
    std::vector<double> best;
  };
  std::vector<Variant> variants;
  if (const char* tiles = std::getenv("MPCAFFE_CONV_TILES")) {
    for (const ConvConfig& cfg : BenchConfigs(tiles))
      for (const std::string& t : list) variants.push_back({cfg, t, {}});
  } else {
    for (const std::string& t : list)
      variants.push_back({DefaultConvConfig(dev.info(), ParseDataType(t)), t, {}});
  }
  for (const Shape& s : layers) {
    struct Run {
      std::unique_ptr<Convolution> conv;
      std::shared_ptr<DeviceMemory> x, w, b, y;
      double best = 1e30;
    };
    std::vector<Run> runs;
    for (const Variant& v : variants) {
      const DataType t = ParseDataType(v.type);
      ConvDesc d = DescOf(s, t, 0);
      d.batch = batch, d.bias = true, d.relu = true, d.weights_signed = false;
      const ConvQuant quant = IsQuantized(t) ? MakeQuant(d, false, rng) : ConvQuant{};
      Run r;
      r.x = Upload(dev, IsQuantized(t) ? RandomQ(t, d.input_count(), false, rng)
                                       : RandomFloats(t, d.input_count(), -1, 1, rng));
      r.w = Upload(dev, IsQuantized(t) ? RandomQ(t, d.weight_count(), false, rng)
                                       : RandomFloats(t, d.weight_count(), -1, 1, rng));
      r.b = Upload(dev, RandomBias(d, rng));
      r.y = dev.Allocate(d.output_count() * SizeOf(t));
      r.conv = std::make_unique<Convolution>(dev, d, quant, v.cfg);
      r.conv->SetWeights(BufferRef(r.w.get(), 0));
      runs.push_back(std::move(r));
    }
    dev.Finish();
    for (int rep = 0; rep < reps; ++rep) {
      for (Run& r : runs) {
        const auto start = std::chrono::steady_clock::now();
        r.conv->Forward(BufferRef(r.x.get(), 0), BufferRef(r.b.get(), 0), BufferRef(r.y.get(), 0));
        dev.Finish();
        r.best = std::min(
            r.best,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
    }
    for (size_t i = 0; i < runs.size(); ++i) variants[i].best.push_back(runs[i].best);
  }
  for (const Variant& v : variants) {
    double log_sum = 0;
    for (size_t li = 0; li < v.best.size(); ++li) {
      ConvDesc d = DescOf(layers[li], DataType::kFloat32, 0);
      d.batch = batch;
      const double gflops = d.Flops() / v.best[li] * 1e-9;
      log_sum += std::log(gflops);
      std::printf("%-10s %-12s conv%zu %8.3f ms %8.1f GFLOP/s\n", v.type.c_str(),
                  v.cfg.ToString().c_str(), li + 1, v.best[li] * 1e3, gflops);
    }
    std::printf("%-10s %-12s geometric mean %.1f GFLOP/s\n", v.type.c_str(),
                v.cfg.ToString().c_str(), std::exp(log_sum / double(layers.size())));
  }
}

}  // namespace
}  // namespace mpcaffe::libdnn

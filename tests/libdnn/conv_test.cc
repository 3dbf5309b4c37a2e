// tests/libdnn/conv_test.cc — the convolution kernels against the plain C++ references: forward
// on 22 shapes (LeNet's and AlexNet's layers scaled down, odd sizes, 1×1, groups, stride,
// padding, dilation) in every data type, the int8/int16 channel-pair paths on their edge cases,
// fp32 backward, references checked by finite differences, and a disabled AlexNet benchmark.
#include "libdnn/conv.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "cache/program_cache.h"
#include "codegen/datatype.h"
#include "device/device.h"
#include "tests/testing/random_storage.h"
#include "tests/testing/sweep.h"
#include "libdnn/conv_winograd.h"
#include "libdnn/tuner.h"
#include "quant/fixed_point.h"
#include "device/settings.h"

namespace mpcaffe::libdnn {
namespace {

using Bytes = std::vector<uint8_t>;

struct Shape {
  int n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw, g;
};

// clang-format off
const Shape kShapes[] = {
    {2, 1, 28, 28, 20, 5, 5, 1, 1, 0, 0, 1, 1, 1},   // LeNet conv1
    {2, 20, 12, 12, 50, 5, 5, 1, 1, 0, 0, 1, 1, 1},  // LeNet conv2
    {1, 3, 35, 35, 16, 11, 11, 4, 4, 0, 0, 1, 1, 1}, // AlexNet conv1, scaled
    {1, 16, 13, 13, 24, 5, 5, 1, 1, 2, 2, 1, 1, 2},  // AlexNet conv2, scaled (groups 2)
    {1, 24, 7, 7, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1},    // AlexNet conv3, scaled
    {1, 32, 7, 7, 32, 3, 3, 1, 1, 1, 1, 1, 1, 2},    // AlexNet conv4, scaled
    {1, 32, 7, 7, 24, 3, 3, 1, 1, 1, 1, 1, 1, 2},    // AlexNet conv5, scaled
    {2, 7, 5, 5, 9, 1, 1, 1, 1, 0, 0, 1, 1, 1},      // 1×1
    {3, 13, 1, 1, 5, 1, 1, 1, 1, 0, 0, 1, 1, 1},     // 1×1 on a 1×1 input
    {1, 3, 9, 11, 5, 3, 2, 2, 1, 1, 0, 1, 1, 1},     // odd sizes, rectangular kernel, stride
    {1, 4, 10, 10, 6, 3, 3, 1, 1, 2, 2, 2, 2, 1},    // dilation
    {2, 5, 13, 9, 3, 3, 3, 2, 2, 1, 3, 2, 2, 1},     // dilation + stride + uneven padding
    {1, 8, 6, 6, 8, 3, 3, 1, 1, 1, 1, 1, 1, 8},      // depthwise
    {2, 6, 9, 11, 6, 3, 3, 2, 2, 1, 1, 1, 1, 6},     // depthwise, stride 2, odd sizes
    {1, 5, 6, 13, 5, 5, 5, 1, 1, 4, 2, 2, 1, 5},     // depthwise 5×5, dilation, uneven padding
    {1, 12, 7, 5, 20, 3, 3, 2, 2, 1, 1, 1, 1, 4},    // groups 4, odd
    {1, 3, 8, 8, 1, 3, 3, 1, 1, 0, 0, 1, 1, 1},      // one output channel
    {1, 1, 9, 9, 37, 3, 3, 1, 1, 1, 1, 1, 1, 1},     // one input channel, channels past a tile
    {1, 40, 6, 6, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1},    // channels past two tiles
    {2, 6, 5, 5, 10, 5, 5, 1, 1, 0, 0, 1, 1, 1},     // kernel = input: 1×1 output
    {1, 2, 3, 3, 4, 3, 3, 1, 1, 2, 2, 1, 1, 1},      // padding larger than the output gain
    {1, 3, 12, 7, 8, 2, 3, 3, 1, 0, 1, 1, 1, 1},     // asymmetric stride
    {1, 6, 4, 9, 5, 1, 7, 1, 1, 0, 3, 1, 1, 1},      // 1×7 kernel
    {4, 5, 6, 6, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1},      // batch 4
};
// clang-format on

ConvDesc DescOf(const Shape& s, DataType t, int index) {
  ConvDesc d;
  d.type = t;
  d.batch = s.n, d.channels = s.c, d.height = s.h, d.width = s.w, d.out_channels = s.o;
  d.kernel_h = s.kh, d.kernel_w = s.kw, d.stride_h = s.sh, d.stride_w = s.sw;
  d.pad_h = s.ph, d.pad_w = s.pw, d.dilation_h = s.dh, d.dilation_w = s.dw, d.groups = s.g;
  d.bias = index % 4 != 3;
  d.relu = index % 3 == 1;
  d.weights_signed = IsQuantized(t) && index % 2 == 1;
  return d;
}

Bytes RandomFloats(DataType t, size_t n, float lo, float hi, std::mt19937& rng) {
  return test_inputs::RandomRealStorage(t, n, lo, hi, rng);
}

/// Quantized storage: uniform over the type's range (signed: the signed range).
Bytes RandomQ(DataType t, size_t n, bool is_signed, std::mt19937& rng) {
  const bool wide = t == DataType::kInt16Q;
  Bytes b(n * (wide ? 2 : 1));
  std::uniform_int_distribution<int> u(0, wide ? 65535 : 255);
  for (size_t i = 0; i < n; ++i) {
    const int v = u(rng);
    if (wide) {
      const uint16_t h = uint16_t(v);
      std::memcpy(b.data() + 2 * i, &h, 2);
    } else {
      b[i] = uint8_t(v);
    }
  }
  (void)is_signed;  // the same bits, read as signed by the kernel when weights_signed
  return b;
}

std::shared_ptr<DeviceMemory> Upload(Device& dev, const Bytes& b) {
  auto m = dev.Allocate(std::max<size_t>(b.size(), 4));
  if (!b.empty()) dev.CopyToDevice(b.data(), m.get(), 0, b.size());
  return m;
}
Bytes Download(Device& dev, const std::shared_ptr<DeviceMemory>& m, size_t bytes) {
  Bytes b(bytes);
  dev.CopyToHost(m.get(), 0, b.data(), bytes);
  return b;
}
std::vector<float> AsFloats(DataType t, const Bytes& b) {
  const size_t n = b.size() / SizeOf(t);
  std::vector<float> f(n);
  for (size_t i = 0; i < n; ++i) {
    if (t == DataType::kFloat32) {
      std::memcpy(&f[i], b.data() + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, b.data() + 2 * i, 2);
      f[i] = HalfToFloat(h);
    }
  }
  return f;
}

/// Element-wise |got − want| ≤ tol · max(|want|, rms(want)) (the rms guards outputs that are
/// small only by cancellation). Returns the number of failures, reporting the first few.
int CompareFloats(const std::vector<float>& got, const std::vector<float>& want, double tol,
                  const std::string& what) {
  double rms = 0;
  for (float v : want) rms += double(v) * v;
  rms = std::sqrt(rms / std::max<size_t>(want.size(), 1));
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double scale = std::max(std::fabs(double(want[i])), rms);
    if (!(std::fabs(double(got[i]) - want[i]) <= tol * scale + 1e-30)) {
      if (bad++ < 5)
        ADD_FAILURE() << what << ": element " << i << " got " << got[i] << " want " << want[i];
    }
  }
  return bad;
}

/// Quantization parameters that keep outputs mostly inside the range: M ≈ spread / σ(acc).
ConvQuant MakeQuant(const ConvDesc& d, bool per_channel, std::mt19937& rng) {
  const bool wide = d.type == DataType::kInt16Q;
  const double sigma = wide ? 18918.0 : 73.9;  // σ of a uniform integer over the range
  const double k = double(d.channels / d.groups) * d.kernel_h * d.kernel_w;
  const double spread = wide ? 12000.0 : 45.0;
  ConvQuant q;
  std::uniform_int_distribution<int> zx(wide ? 30000 : 110, wide ? 36000 : 150);
  q.x_zero = zx(rng);
  q.c_zero = zx(rng);
  const size_t n = per_channel ? size_t(d.out_channels) : 1;
  std::uniform_real_distribution<double> f(0.5, 1.5);
  q.w_zero.assign(n, 0);
  q.multiplier.assign(n, {});
  for (size_t c = 0; c < n; ++c) {
    q.w_zero[c] = d.weights_signed ? 0 : zx(rng);
    q.multiplier[c] = quant::QuantizeMultiplier(f(rng) * spread / (std::sqrt(k) * sigma * sigma));
  }
  return q;
}

Bytes RandomBias(const ConvDesc& d, std::mt19937& rng) {
  const size_t o = size_t(d.out_channels);
  if (!IsQuantized(d.type)) return RandomFloats(DataType::kFloat32, o, -0.5f, 0.5f, rng);
  const bool wide = d.type == DataType::kInt16Q;
  const double k = double(d.channels / d.groups) * d.kernel_h * d.kernel_w;
  const double sigma = std::sqrt(k) * (wide ? 18918.0 * 18918.0 : 73.9 * 73.9);
  std::uniform_real_distribution<double> u(-sigma, sigma);
  Bytes b(o * (wide ? 8 : 4));
  for (size_t i = 0; i < o; ++i) {
    if (wide) {
      const int64_t v = int64_t(u(rng));
      std::memcpy(b.data() + 8 * i, &v, 8);
    } else {
      const int32_t v = int32_t(u(rng));
      std::memcpy(b.data() + 4 * i, &v, 4);
    }
  }
  return b;
}

/// Output counts of a quantized comparison: outputs at the type's low and high ends, all.
struct Saturation {
  int low = 0, high = 0, total = 0;
};

/// `conv`'s output (`bytes` of it) on the operands, uploaded to the default device.
Bytes RunForward(Convolution& conv, const Bytes& x, const Bytes& w, const Bytes& bias,
                 const Bytes& res, size_t bytes) {
  Device& dev = DefaultDevice();
  auto xm = Upload(dev, x), wm = Upload(dev, w), bm = Upload(dev, bias), rm = Upload(dev, res);
  auto ym = dev.Allocate(bytes);
  conv.SetWeights(BufferRef(wm.get(), 0));
  conv.Forward(BufferRef(xm.get(), 0), BufferRef(bm.get(), 0), BufferRef(ym.get(), 0), nullptr,
               BufferRef(rm.get(), 0));
  return Download(dev, ym, bytes);
}

/// Random inputs, weights, bias and residual for `d`; `make(d, quant)` builds the convolution,
/// whose Forward must match ConvForwardReference (quantized bit-exact, fp32 within 1e-5, fp16
/// within 1e-3).
template <typename Make>
void CheckForward(const ConvDesc& d, const ConvQuant& quant, std::mt19937& rng, Make&& make,
                  Saturation* sat = nullptr) {
  const DataType t = d.type;
  const bool q = IsQuantized(t);
  const Bytes x =
      q ? RandomQ(t, d.input_count(), false, rng) : RandomFloats(t, d.input_count(), -1, 1, rng);
  const Bytes w = q ? RandomQ(t, d.weight_count(), d.weights_signed, rng)
                    : RandomFloats(t, d.weight_count(), -1, 1, rng);
  const Bytes bias = RandomBias(d, rng);
  const Bytes res = q ? RandomQ(t, d.output_count(), false, rng)
                      : RandomFloats(t, d.output_count(), -1, 1, rng);
  Bytes want(d.output_count() * SizeOf(t));
  ConvForwardReference(d, quant, x.data(), w.data(), d.bias ? bias.data() : nullptr, want.data(),
                       res.data());

  Convolution conv = make(d, quant);
  const Bytes got = RunForward(conv, x, w, bias, res, want.size());
  if (!q) {
    CompareFloats(AsFloats(t, got), AsFloats(t, want), t == DataType::kFloat32 ? 1e-5 : 1e-3,
                  d.ToString());
    return;
  }
  const bool wide = t == DataType::kInt16Q;
  size_t mismatches = 0;
  for (size_t i = 0; i < d.output_count(); ++i) {
    int gv, wv;
    if (wide) {
      uint16_t a, b;
      std::memcpy(&a, got.data() + 2 * i, 2);
      std::memcpy(&b, want.data() + 2 * i, 2);
      gv = a, wv = b;
    } else {
      gv = got[i], wv = want[i];
    }
    if (gv != wv && mismatches++ < 5)
      ADD_FAILURE() << "output " << i << ": got " << gv << " want " << wv;
    if (sat) {
      sat->low += wv == 0;
      sat->high += wv == (wide ? 65535 : 255);
      ++sat->total;
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

/// A quantized description's parameters for CheckForward (a residual's own requantization when
/// d.residual); ConvQuant{} for float types.
ConvQuant TestQuant(const ConvDesc& d, bool per_channel, std::mt19937& rng) {
  if (!IsQuantized(d.type)) return ConvQuant{};
  ConvQuant quant = MakeQuant(d, per_channel, rng);
  if (d.residual) {
    quant.res_zero = quant.c_zero / 2;
    quant.res_multiplier =
        quant::QuantizeMultiplier(std::uniform_real_distribution<double>(0.2, 0.6)(rng));
  }
  return quant;
}

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
  const Convolution::PointwiseTile tiles[] = {{4, 2, 8}, {1, 1, 4}, {3, 3, 4}, {6, 1, 16},
                                              {8, 2, 8}, {2, 4, 8}, {8, 1, 8}, {5, 1, 4}};
  // Every shape with every tile under the exhaustive sweep; else each shape with two of the
  // tiles that apply to it and have not met its form yet (from tile 2j on for shape j), so
  // that every tile meets the plane form and the row form wherever it applies.
  auto is_row_form = [](const ConvDesc& d) {
    return !Convolution::IsPointwise(d) && !Convolution::IsStridedPointwise(d);
  };
  // Which tiles apply to some shape in each form (plane 0, row 1), and which ran.
  bool applies[2][8] = {}, ran[2][8] = {};
  for (const Shape& s : shapes)
    for (int k = 0; k < 8; ++k) {
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
    for (int i = 0; i < 8; ++i) {
      const int k = (2 * shape + i) % 8;
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
    for (int k = 0; k < 8; ++k)
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
// each against the reference, in the pointwise tiles of the AVX2 defaults, the depthwise
// vector forms of 8 and 16 columns and F(2×2) in integers. Treating either check as always true
// fails this.
TEST(ConvInt8Requant, PointwiseDepthwiseAndWinogradKernelsTakeEveryPath) {
  Device& dev = DefaultDevice();
  if (dev.backend() != Backend::kOpenCL) GTEST_SKIP() << "the int8q vector kernels are OpenCL C";
  std::mt19937 rng(47);
  // clang-format off
  const Shape pointwise = {1, 24, 6, 6, 20, 1, 1, 1, 1, 0, 0, 1, 1, 1};
  const Shape depthwise = {1, 12, 11, 19, 12, 3, 3, 1, 1, 1, 1, 1, 1, 12};
  const Shape winograd = {2, 6, 7, 9, 10, 3, 3, 1, 1, 1, 1, 1, 1, 1};  // partial tiles
  // clang-format on
  const Convolution::PointwiseTile tiles[] = {{8, 1, 16}, {6, 2, 8}, {6, 2, 8, 2, 64}};
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
    const Convolution::PointwiseTile& tile = tiles[variant];
    SCOPED_TRACE(p.ToString() + " tile " + tile.ToString());
    CheckForward(p, make_quant(p), rng, [&](const ConvDesc& dd, const ConvQuant& qq) {
      return Convolution::Pointwise(dev, dd, tile, qq);
    });
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
        CompareFloats(AsFloats(t, got), AsFloats(t, want), 1e-5, c.ToString());
    }
  }
}

/// Whether ExpectExact checks the input form (ConvInput) a configuration takes: OpenCL's
/// vectors of 8 and the 4-channel dot products choose it from the shape.
bool ChecksInput(const ConvConfig& c, Backend backend) {
  return (backend == Backend::kOpenCL && c.vw == 8) || c.kp == 4;
}

/// Runs `d` on the device with the configs in `configs` that the backend supports and expects
/// the reference's bytes; `want_input` is the ConvInput expected where ChecksInput. Every config
/// under the exhaustive sweep; else, for a test's case number `turn` (≥ 0), the supported
/// configs in turn — config `turn` mod n, and the first that checks the input form when that one
/// does not — so that a test's cases meet every config and each case's input form is checked,
/// at one or two compiles a case instead of n (each config is a program of its own).
void ExpectExact(const ConvDesc& d, const ConvQuant& quant, const Bytes& x, const Bytes& w,
                 const Bytes& bias, const std::vector<ConvConfig>& configs, ConvInput want_input,
                 int turn = -1) {
  Device& dev = DefaultDevice();
  Bytes want(d.output_count() * SizeOf(d.type));
  ConvForwardReference(d, quant, x.data(), w.data(), d.bias ? bias.data() : nullptr, want.data());
  auto xm = Upload(dev, x), wm = Upload(dev, w), bm = Upload(dev, bias);
  std::vector<ConvConfig> run;
  for (const ConvConfig& c : configs)
    if (c.Supports(dev.backend())) run.push_back(c);
  if (turn >= 0 && !test_support::ExhaustiveSweep() && run.size() > 1) {
    const ConvConfig chosen = run[size_t(turn) % run.size()];
    std::vector<ConvConfig> sample = {chosen};
    if (!ChecksInput(chosen, dev.backend()))
      for (const ConvConfig& c : run)
        if (ChecksInput(c, dev.backend())) {
          sample.push_back(c);
          break;
        }
    run = sample;
  }
  int runs = 0;
  for (const ConvConfig& c : run) {
    ++runs;
    SCOPED_TRACE(c.ToString() + " " + d.ToString());
    Convolution conv(dev, d, quant, c);
    if (dev.backend() == Backend::kOpenCL && c.vw == 8) {
      EXPECT_EQ(conv.input(), want_input);
    }
    if (c.kp == 4) {
      EXPECT_EQ(conv.input(), want_input);
    }
    auto ym = dev.Allocate(want.size());
    conv.SetWeights(BufferRef(wm.get(), 0));
    conv.Forward(BufferRef(xm.get(), 0), BufferRef(bm.get(), 0), BufferRef(ym.get(), 0));
    const Bytes got = Download(dev, ym, want.size());
    size_t mismatches = 0;
    for (size_t i = 0; i < got.size(); ++i)
      if (got[i] != want[i] && mismatches++ < 5)
        ADD_FAILURE() << "output byte " << i << ": got " << int(got[i]) << " want " << int(want[i]);
    EXPECT_EQ(mismatches, 0u);
  }
  EXPECT_GT(runs, 0) << d.ToString() << ": the backend supports none of the configurations";
}

struct PairCase {
  int n, c, h, w, oc, k, stride, pad, dilation, groups;
  bool is_signed;
  int x_zero;  // -1: MakeQuant's
};

ConvDesc PairDesc(DataType t, const PairCase& cs) {
  ConvDesc d;
  d.type = t;
  d.batch = cs.n;
  d.channels = cs.c;
  d.height = cs.h;
  d.width = cs.w;
  d.out_channels = cs.oc;
  d.kernel_h = d.kernel_w = cs.k;
  d.stride_h = d.stride_w = cs.stride;
  d.pad_h = d.pad_w = cs.pad;
  d.dilation_h = d.dilation_w = cs.dilation;
  d.groups = cs.groups;
  d.bias = true;
  d.relu = cs.is_signed;
  d.weights_signed = cs.is_signed;
  return d;
}

TEST(ConvForward, Int8ChannelPairsMatchTheReference) {
  // int8 with vectors of 8 takes input channels in pairs (16-bit pair products), packed into
  // planes first where the input is read often (3×3 and larger windows), formed from byte
  // loads elsewhere (1×1 windows with few channel blocks): odd and even channels per group,
  // signed weights, padding, stride, dilation, batches over several pack chunks (256 KiB of
  // planes each), two vw = 8 tiles, and an input zero point beyond uint8 (x − z_x no longer
  // fits 16 bits: the one-channel loop instead).
  std::mt19937 rng(2026);
  const ConvInput packed = ConvInput::kPackedPairs, loads = ConvInput::kPairs;
  int turn = 0;
  for (const auto& [cs, want] :
       {std::pair{PairCase{2, 3, 11, 13, 20, 3, 2, 1, 1, 1, false, -1}, packed},
        {PairCase{2, 10, 9, 8, 12, 3, 1, 1, 1, 2, true, -1}, packed},
        {PairCase{2, 8, 7, 7, 9, 1, 1, 0, 1, 1, false, -1}, loads},
        {PairCase{3, 7, 12, 11, 40, 1, 2, 0, 1, 1, true, -1}, loads},
        {PairCase{2, 1, 6, 5, 8, 2, 1, 0, 1, 1, false, -1}, packed},
        {PairCase{2, 15, 10, 9, 21, 3, 2, 2, 2, 3, true, -1}, packed},  // dilation, groups of 5
        {PairCase{4, 9, 60, 60, 8, 3, 1, 1, 1, 1, false, -1}, packed},  // 3 images per chunk
        {PairCase{2, 5, 8, 9, 16, 3, 1, 1, 1, 1, false, 40000}, ConvInput::kDirect}}) {
    const ConvDesc d = PairDesc(DataType::kInt8Q, cs);
    ConvQuant quant = MakeQuant(d, cs.is_signed, rng);
    if (cs.x_zero >= 0) quant.x_zero = cs.x_zero;
    const Bytes x = RandomQ(d.type, d.input_count(), false, rng);
    const Bytes w = RandomQ(d.type, d.weight_count(), d.weights_signed, rng);
    const Bytes bias = RandomBias(d, rng);
    ExpectExact(d, quant, x, w, bias, {DefaultConvConfig(DefaultDevice().info()), {1, 2, 4, 8}},
                want, turn++);
  }
}

/// int8q Winograd F(2×2) (libdnn/conv_winograd.h) on the given operands against the reference,
/// bit-exact; returns the outputs inside (0, 255) (so a test knows it is not all saturation).
size_t ExpectWinogradExact(const ConvDesc& d, const ConvQuant& quant, const Bytes& x,
                           const Bytes& w, const Bytes& bias, const Bytes& res,
                           const WinogradConfig& config) {
  Bytes want(d.output_count());
  ConvForwardReference(d, quant, x.data(), w.data(), d.bias ? bias.data() : nullptr, want.data(),
                       res.data());
  Convolution conv = Convolution::Winograd(DefaultDevice(), d, config, quant);
  EXPECT_TRUE(conv.forward_winograd());
  const Bytes got = RunForward(conv, x, w, bias, res, want.size());
  size_t bad = 0, inside = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    inside += want[i] > 0 && want[i] < 255;
    if (got[i] != want[i] && bad++ < 5)
      ADD_FAILURE() << d.ToString() << " " << config.ToString() << ": output " << i << " got "
                    << int(got[i]) << " want " << int(want[i]);
  }
  EXPECT_EQ(bad, 0u) << d.ToString();
  return inside;
}

TEST(ConvForward, Int8WinogradMatchesTheReferenceExactly) {
  // F(2×2) in integers (2G, 16-bit pair products, the sums shifted right by 2): two images, an
  // odd channel count (the last pair half empty), uneven padding (partial tiles both ways),
  // output channels past the tile, per-layer and per-channel weights, signed weights, with and
  // without the fused bias, residual and ReLU, two groups; two tiles.
  std::mt19937 rng(2027);
  ConvDesc d;
  d.type = DataType::kInt8Q;
  d.batch = 2, d.channels = 5, d.height = 9, d.width = 11, d.out_channels = 13;
  d.kernel_h = d.kernel_w = 3, d.pad_h = 1, d.pad_w = 2;
  for (int variant = 0; variant < 4; ++variant) {
    ConvDesc v = d;
    v.bias = v.relu = v.residual = variant != 1;
    v.weights_signed = variant == 2;
    if (variant == 3) v.channels = 34, v.out_channels = 38, v.groups = 2;  // group by group
    const ConvQuant quant = TestQuant(v, variant != 0, rng);
    const Bytes x = RandomQ(v.type, v.input_count(), false, rng);
    const Bytes w = RandomQ(v.type, v.weight_count(), v.weights_signed, rng);
    const Bytes bias = RandomBias(v, rng), res = RandomQ(v.type, v.output_count(), false, rng);
    EXPECT_GT(ExpectWinogradExact(v, quant, x, w, bias, res,
                                  variant == 1 ? WinogradConfig{2, 8, 1, 8}
                                               : WinogradConfig{2, 6, 2, 8}),
              v.output_count() / 4);
  }
  // The input kernel's chunks of 8 tiles of a row (OpenCL): wide rows whose middle chunks lie
  // inside the plane (two 16-byte loads per window row), chunks at the edges and past the row's
  // last tile (a word per lane), rows narrower than a window row (byte by byte), no padding.
  for (const auto& [h, w, pad] : {std::array<int, 3>{5, 40, 1}, {6, 37, 0}, {3, 45, 2},
                                  {6, 3, 1}, {4, 2, 1}}) {
    ConvDesc v = d;
    v.height = h, v.width = w, v.pad_h = v.pad_w = pad;
    v.bias = v.relu = true;
    const ConvQuant quant = TestQuant(v, true, rng);
    const Bytes x = RandomQ(v.type, v.input_count(), false, rng);
    const Bytes wt = RandomQ(v.type, v.weight_count(), false, rng);
    const Bytes bias = RandomBias(v, rng), res = RandomQ(v.type, v.output_count(), false, rng);
    EXPECT_GT(ExpectWinogradExact(v, quant, x, wt, bias, res, {2, 6, 2, 8}), 0u);
  }
  // The channel bound at its worst: every product (255 − 0)·(0 − 255) over 900 channels, so the
  // output transform's sums reach 4·9·900·255² (just under 2^31).
  ConvDesc big = d;
  big.batch = 1, big.channels = kWinogradInt8MaxChannels, big.height = big.width = 4;
  big.out_channels = 2, big.pad_h = big.pad_w = 1;
  ASSERT_TRUE(WinogradApplies(big));
  big.channels += 1;
  EXPECT_FALSE(WinogradApplies(big));
  big.channels -= 1;
  ConvQuant q;
  q.x_zero = 0, q.c_zero = 128;
  q.w_zero = {255};
  q.multiplier = {quant::QuantizeMultiplier(1.0 / (9.0 * 900 * 255 * 255 / 100))};
  const Bytes x(big.input_count(), 255), w(big.weight_count(), 0);
  EXPECT_GT(ExpectWinogradExact(big, q, x, w, Bytes(8, 0), Bytes(big.output_count(), 0),
                                {2, 6, 2, 8}),
            0u);
}

TEST(ConvForward, Int8FourChannelDotProductsMatchTheReference) {
  // kp = 4 (int8, scalar lanes): four input channels per step as packed bytes through the
  // 4-way dot product, zero points applied after the window (Σx beside the products, Σw per
  // channel from SetWeights): Cg mod 4 = 0, 1, 2, 3 (the tail step reads x_zero past the
  // group's channels), groups, padding (x_zero words), stride, dilation, signed and unsigned
  // weights with per-channel zero points, several work-group shapes. Native dot products on a
  // device that has them (asserted in the text), portable shifts elsewhere; an input zero point
  // beyond uint8 takes the one-channel loop.
  Device& dev = DefaultDevice();
  const KernelTarget target = KernelTarget::Of(dev);
  std::mt19937 rng(44);
  const std::vector<ConvConfig> configs = {{32, 2, 4, 1, 4}, {1, 1, 1, 1, 4}, {4, 3, 2, 1, 4}};
  int turn = 0;
  for (const auto& [cs, want] :
       {std::pair{PairCase{2, 3, 11, 13, 20, 3, 2, 1, 1, 1, false, -1}, ConvInput::kDot4},
        {PairCase{2, 8, 9, 8, 12, 3, 1, 1, 1, 2, true, -1}, ConvInput::kDot4},     // Cg = 4
        {PairCase{2, 10, 7, 7, 9, 1, 1, 0, 1, 1, false, -1}, ConvInput::kDot4},    // Cg = 10
        {PairCase{1, 5, 6, 5, 8, 2, 1, 0, 1, 1, true, -1}, ConvInput::kDot4},      // Cg = 5
        {PairCase{2, 15, 10, 9, 21, 3, 2, 2, 2, 3, false, -1}, ConvInput::kDot4},  // dilation
        {PairCase{1, 32, 8, 8, 40, 3, 1, 1, 1, 1, true, -1}, ConvInput::kDot4},
        {PairCase{2, 5, 8, 9, 16, 3, 1, 1, 1, 1, false, 40000}, ConvInput::kDirect}}) {
    const ConvDesc d = PairDesc(DataType::kInt8Q, cs);
    ConvQuant quant = MakeQuant(d, cs.is_signed, rng);
    if (cs.x_zero >= 0) quant.x_zero = cs.x_zero;
    const Bytes x = RandomQ(d.type, d.input_count(), false, rng);
    const Bytes w = RandomQ(d.type, d.weight_count(), d.weights_signed, rng);
    const Bytes bias = RandomBias(d, rng);
    ExpectExact(d, quant, x, w, bias, configs, want, turn++);
    if (want != ConvInput::kDot4) continue;
    const std::string text = Convolution::ForwardSource(target, d, configs[0]);
    EXPECT_NE(text.find("mp_dot4_u8"), std::string::npos);
    EXPECT_EQ(text.find("dot_4x8packed_") != std::string::npos,
              target.dot_product && target.backend == Backend::kOpenCL)
        << dev.info().name;
  }
}

TEST(ConvForward, Int16SplitPairsMatchTheReference) {
  // int16 with vectors of 8 multiplies pairs of v = x − z_x split into lo = v & 255 and
  // hi = v >> 8 against w − 32768 (unsigned storage) / w (signed), partial sums in int32
  // flushed to int64 at most every 127 pair steps. Extreme data make each pair product as
  // large as it gets (2·32768·256 = 2^24: 128 unflushed steps would overflow): weights
  // −32768/32767 or 0/65535 with zero points at the ends, inputs 0/65535 with x_zero 0 or
  // 65535; Cg = 300 flushes inside a window, Cg = 20 across windows. Random data cover odd Cg,
  // groups, stride, padding, dilation and several pack chunks.
  std::mt19937 rng(16);
  const std::vector<ConvConfig> configs = {
      DefaultConvConfig(DefaultDevice().info(), DataType::kInt16Q), {1, 4, 3, 8}, {1, 1, 4, 8}};
  int turn = 0;
  struct Extreme {
    PairCase shape;
    int32_t w_zero;
    bool all_max;  // every product at its largest magnitude (else random extremes)
  };
  for (const Extreme& e : {Extreme{{1, 300, 5, 5, 16, 3, 1, 1, 1, 1, true, 65535}, 0, true},
                           Extreme{{1, 300, 5, 5, 16, 3, 1, 1, 1, 1, true, 65535}, 0, false},
                           Extreme{{2, 20, 7, 7, 8, 5, 1, 2, 1, 1, true, 65535}, 0, true},
                           Extreme{{1, 301, 4, 4, 9, 3, 1, 1, 1, 1, false, 0}, 65535, false},
                           Extreme{{1, 300, 4, 4, 8, 3, 1, 0, 1, 1, false, 65535}, 0, true}}) {
    const ConvDesc d = PairDesc(DataType::kInt16Q, e.shape);
    ConvQuant quant;
    quant.x_zero = e.shape.x_zero;
    quant.w_zero = {e.w_zero};
    quant.c_zero = 32768;
    // x − z_x = ±65535 (hi = −256 for x_zero = 65535) and w − 32768 or w = −32768.
    const double k = double(d.channels / d.groups) * d.kernel_h * d.kernel_w;
    quant.multiplier = {
        quant::QuantizeMultiplier(20000.0 / (k * 65535.0 * 32768.0) * (e.all_max ? 1.0 : 8.0))};
    std::bernoulli_distribution coin(0.5);
    Bytes x(d.input_count() * 2), w(d.weight_count() * 2);
    for (size_t i = 0; i < d.input_count(); ++i) {
      const uint16_t v =
          e.all_max || coin(rng) ? uint16_t(65535 - quant.x_zero) : uint16_t(quant.x_zero);
      std::memcpy(x.data() + 2 * i, &v, 2);
    }
    for (size_t i = 0; i < d.weight_count(); ++i) {
      // Signed: −32768 (times hi = −256 the largest pair product); unsigned: the end away from
      // the zero point.
      const bool far = e.all_max || coin(rng);
      const uint16_t v = d.weights_signed ? uint16_t(far ? 0x8000 : 0x7fff)
                                          : uint16_t(far ? 65535 - e.w_zero : e.w_zero);
      std::memcpy(w.data() + 2 * i, &v, 2);
    }
    Bytes bias(size_t(d.out_channels) * 8, 0);
    SCOPED_TRACE(e.all_max ? "all products at the maximum" : "random extremes");
    ExpectExact(d, quant, x, w, bias, configs, ConvInput::kPackedSplit, turn++);
  }
  for (const PairCase& cs :
       {PairCase{2, 3, 11, 13, 20, 3, 2, 1, 1, 1, false, -1},
        PairCase{2, 10, 9, 8, 12, 3, 1, 1, 1, 2, true, -1},
        PairCase{2, 15, 10, 9, 21, 3, 2, 2, 2, 3, false, -1},
        PairCase{5, 16, 40, 40, 8, 3, 1, 1, 1, 1, false, -1},    // 2 images per chunk
        PairCase{2, 7, 6, 6, 9, 3, 1, 1, 1, 1, true, 65536}}) {  // zero point past uint16
    const ConvDesc d = PairDesc(DataType::kInt16Q, cs);
    ConvQuant quant = MakeQuant(d, !cs.is_signed, rng);
    if (cs.x_zero >= 0) quant.x_zero = cs.x_zero;
    const Bytes x = RandomQ(d.type, d.input_count(), false, rng);
    const Bytes w = RandomQ(d.type, d.weight_count(), d.weights_signed, rng);
    const Bytes bias = RandomBias(d, rng);
    ExpectExact(d, quant, x, w, bias, configs,
                cs.x_zero > 65535 ? ConvInput::kDirect : ConvInput::kPackedSplit, turn++);
  }
}

TEST(ConvForward, FewChannelsRunAsIm2colGemm) {
  // Few input channels and a window of 9 or more (AlexNet's conv1): MPCAFFE_CONV_GEMM=1 runs the
  // forward pass as im2col + LibDNN GEMM on OpenCL, with the same integers as the reference
  // (padding reads the input zero point) and fp32 within rounding; by default (ConvGemmDefaults)
  // and with =0 another family runs.
  Device& dev = DefaultDevice();
  if (dev.backend() != Backend::kOpenCL) GTEST_SKIP() << "the GEMM forward is OpenCL only";
  std::mt19937 rng(77);
  for (const PairCase& cs : {PairCase{2, 3, 27, 27, 16, 11, 4, 0, 1, 1, false, -1},
                             PairCase{2, 1, 12, 12, 8, 5, 1, 2, 2, 1, true, -1},
                             PairCase{3, 4, 9, 10, 13, 3, 2, 1, 1, 1, false, -1},
                             PairCase{1, 3, 15, 14, 20, 5, 2, 2, 1, 1, true, -1}}) {
    for (DataType t : {DataType::kFloat32, DataType::kInt8Q}) {
      const bool q = IsQuantized(t);
      ConvDesc d = PairDesc(t, cs);
      d.weights_signed = q && cs.is_signed;
      SCOPED_TRACE(d.ToString());
      ConvQuant quant;
      if (q) {
        quant = MakeQuant(d, cs.is_signed, rng);
        quant.w_zero = {quant.w_zero[0]};  // the GEMM takes one weight zero point
      }
      const Bytes x = q ? RandomQ(t, d.input_count(), false, rng)
                        : RandomFloats(t, d.input_count(), -1, 1, rng);
      const Bytes w = q ? RandomQ(t, d.weight_count(), d.weights_signed, rng)
                        : RandomFloats(t, d.weight_count(), -1, 1, rng);
      const Bytes bias = RandomBias(d, rng);
      Bytes want(d.output_count() * SizeOf(t));
      ConvForwardReference(d, quant, x.data(), w.data(), bias.data(), want.data());
      auto xm = Upload(dev, x), wm = Upload(dev, w), bm = Upload(dev, bias);
      for (const char* env : {"", "1", "0"}) {
        std::optional<ScopedSettings> forced;
        forced.emplace([env](Settings& s) { s.conv_gemm = env; });
        Convolution conv(dev, d, quant);
        forced.reset();
        const bool gemm = *env == '1';
        EXPECT_EQ(conv.forward_gemm(), gemm) << "MPCAFFE_CONV_GEMM=" << env;
        auto ym = dev.Allocate(want.size());
        conv.SetWeights(BufferRef(wm.get(), 0));
        conv.Forward(BufferRef(xm.get(), 0), BufferRef(bm.get(), 0), BufferRef(ym.get(), 0));
        const Bytes got = Download(dev, ym, want.size());
        if (q)
          EXPECT_EQ(got, want);
        else
          CompareFloats(AsFloats(t, got), AsFloats(t, want), 1e-5, d.ToString());
      }
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
    std::vector<float> want_dx(d.input_count()), want_dw = AsFloats(d.type, wdiff0),
                                                 want_db = AsFloats(d.type, bdiff0);
    ConvBackwardDataReference(d, AsFloats(d.type, top).data(), AsFloats(d.type, w).data(),
                              want_dx.data());
    ConvBackwardWeightsReference(d, AsFloats(d.type, top).data(), AsFloats(d.type, x).data(),
                                 want_dw.data(), want_db.data());

    Convolution conv(dev, d);
    auto xm = Upload(dev, x), wm = Upload(dev, w), tm = Upload(dev, top);
    auto dwm = Upload(dev, wdiff0), dbm = Upload(dev, bdiff0);
    auto dxm = dev.Allocate(d.input_count() * 4);
    conv.BackwardData(BufferRef(tm.get(), 0), BufferRef(wm.get(), 0), BufferRef(dxm.get(), 0));
    conv.BackwardWeights(BufferRef(tm.get(), 0), BufferRef(xm.get(), 0), BufferRef(dwm.get(), 0),
                         BufferRef(dbm.get(), 0));
    CompareFloats(AsFloats(d.type, Download(dev, dxm, d.input_count() * 4)), want_dx, 1e-5,
                  "bottom_diff");
    CompareFloats(AsFloats(d.type, Download(dev, dwm, d.weight_count() * 4)), want_dw, 1e-5,
                  "weight_diff");
    CompareFloats(AsFloats(d.type, Download(dev, dbm, size_t(d.out_channels) * 4)), want_db, 1e-5,
                  "bias_diff");
  }
}

// The backward references agree with finite differences of the forward reference
// (L = Σ top·y, so ∂L/∂x = BackwardData(top), ∂L/∂w = BackwardWeights(top)).
TEST(ConvBackward, ReferencesMatchFiniteDifferences) {
  std::mt19937 rng(5);
  for (int which : {11, 13}) {  // dilation + stride; groups
    ConvDesc d = DescOf(kShapes[which], DataType::kFloat32, 0);
    d.bias = false, d.relu = false;
    std::vector<float> x = AsFloats(d.type, RandomFloats(d.type, d.input_count(), -1, 1, rng));
    std::vector<float> w = AsFloats(d.type, RandomFloats(d.type, d.weight_count(), -1, 1, rng));
    const std::vector<float> top =
        AsFloats(d.type, RandomFloats(d.type, d.output_count(), -1, 1, rng));
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

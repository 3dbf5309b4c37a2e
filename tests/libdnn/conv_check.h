// tests/libdnn/conv_check.h — the convolution tests' shapes, data and checks against the plain
// C++ reference (libdnn/conv.h's ConvForwardReference), shared by conv_test.cc and
// conv_pairs_test.cc.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "codegen/datatype.h"
#include "device/device.h"
#include "libdnn/conv.h"
#include "quant/fixed_point.h"
#include "tests/testing/close_to_reference.h"
#include "tests/testing/random_storage.h"

namespace mpcaffe::libdnn::conv_check {

using test_inputs::RealsOf;
using test_support::ExpectCloseToReference;

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

inline ConvDesc DescOf(const Shape& s, DataType t, int index) {
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

inline Bytes RandomFloats(DataType t, size_t n, float lo, float hi, std::mt19937& rng) {
  return test_inputs::RandomRealStorage(t, n, lo, hi, rng);
}

/// Quantized storage: uniform over the type's range (signed: the signed range).
inline Bytes RandomQ(DataType t, size_t n, bool is_signed, std::mt19937& rng) {
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

inline std::shared_ptr<DeviceMemory> Upload(Device& dev, const Bytes& b) {
  auto m = dev.Allocate(std::max<size_t>(b.size(), 4));
  if (!b.empty()) dev.CopyToDevice(b.data(), m.get(), 0, b.size());
  return m;
}
inline Bytes Download(Device& dev, const std::shared_ptr<DeviceMemory>& m, size_t bytes) {
  Bytes b(bytes);
  dev.CopyToHost(m.get(), 0, b.data(), bytes);
  return b;
}

/// Quantization parameters that keep outputs mostly inside the range: M ≈ spread / σ(acc).
inline ConvQuant MakeQuant(const ConvDesc& d, bool per_channel, std::mt19937& rng) {
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

inline Bytes RandomBias(const ConvDesc& d, std::mt19937& rng) {
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
inline Bytes RunForward(Convolution& conv, const Bytes& x, const Bytes& w, const Bytes& bias,
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
    ExpectCloseToReference(RealsOf(t, got), RealsOf(t, want), t == DataType::kFloat32 ? 1e-5 : 1e-3,
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
inline ConvQuant TestQuant(const ConvDesc& d, bool per_channel, std::mt19937& rng) {
  if (!IsQuantized(d.type)) return ConvQuant{};
  ConvQuant quant = MakeQuant(d, per_channel, rng);
  if (d.residual) {
    quant.res_zero = quant.c_zero / 2;
    quant.res_multiplier =
        quant::QuantizeMultiplier(std::uniform_real_distribution<double>(0.2, 0.6)(rng));
  }
  return quant;
}

}  // namespace mpcaffe::libdnn::conv_check

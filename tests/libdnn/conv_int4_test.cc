// tests/libdnn/conv_int4_test.cc — convolutions with 4-bit weights (ConvDesc::weight_bits = 4):
// every forward path (direct kernel with its default and dot-product configurations, groups,
// depthwise, im2col + GEMM) bit-exact against the host reference and the int8 convolution on
// the unpacked weights, extreme values included; the description and zero-point checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "device/error.h"
#include "libdnn/conv.h"
#include "quant/fixed_point.h"
#include "quant/int4.h"

namespace mpcaffe::libdnn {
namespace {

using Bytes = std::vector<uint8_t>;

struct Case {
  int n, c, h, w, o, k, stride, pad, groups;
};

ConvDesc Desc4(const Case& s, int variant) {
  ConvDesc d;
  d.type = DataType::kInt8Q;
  d.batch = s.n, d.channels = s.c, d.height = s.h, d.width = s.w, d.out_channels = s.o;
  d.kernel_h = d.kernel_w = s.k;
  d.stride_h = d.stride_w = s.stride;
  d.pad_h = d.pad_w = s.pad;
  d.groups = s.groups;
  d.bias = variant % 3 != 2;
  d.relu = variant % 2 == 1;
  d.weights_signed = true;
  d.weight_bits = 4;
  return d;
}

struct Data {
  Bytes x, bias, w4;
  std::vector<int8_t> w8;
  ConvQuant quant;
};

Data Make(const ConvDesc& d, uint32_t seed, bool extreme) {
  std::mt19937 rng(seed);
  Data p;
  std::uniform_int_distribution<int> u8(0, 255), w4(-8, 7), coin(0, 1);
  p.x.resize(d.input_count());
  for (auto& v : p.x) v = uint8_t(extreme ? 255 : u8(rng));
  p.w8.resize(d.weight_count());
  for (auto& v : p.w8) v = int8_t(extreme ? (coin(rng) ? 7 : -8) : w4(rng));
  const size_t k = d.weight_count() / size_t(d.out_channels);
  p.w4.resize(d.weight_bytes());
  quant::PackInt4(p.w8.data(), size_t(d.out_channels), k, p.w4.data());
  p.quant.x_zero = extreme ? 0 : 120 + u8(rng) % 20;
  p.quant.c_zero = 100;
  const double typical = std::sqrt(double(k)) * 74.0 * 4.6 + 1.0;
  p.quant.multiplier.clear();
  for (int o = 0; o < d.out_channels; ++o)
    p.quant.multiplier.push_back(quant::QuantizeMultiplier((0.5 + o % 3 * 0.4) * 50.0 / typical));
  p.quant.w_zero.assign(1, 0);
  p.bias.resize(size_t(d.out_channels) * 4);
  for (int o = 0; o < d.out_channels; ++o) {
    const int32_t v = int32_t((o % 7 - 3) * typical / 3);
    std::memcpy(p.bias.data() + 4 * o, &v, 4);
  }
  return p;
}

Bytes RunConv(Device& dev, Convolution& conv, const Data& p, bool packed) {
  const ConvDesc& d = conv.desc();
  auto upload = [&](const void* data, size_t bytes) {
    auto m = dev.Allocate(std::max<size_t>(bytes, 4));
    dev.CopyToDevice(data, m.get(), 0, bytes);
    return m;
  };
  auto x = upload(p.x.data(), p.x.size());
  auto w = packed ? upload(p.w4.data(), p.w4.size()) : upload(p.w8.data(), p.w8.size());
  auto b = upload(p.bias.data(), p.bias.size());
  auto y = dev.Allocate(d.output_count());
  conv.SetWeights(BufferRef(w.get(), 0));
  w.reset();  // SetWeights's result must not depend on the caller's copy
  conv.Forward(BufferRef(x.get(), 0), BufferRef(b.get(), 0), BufferRef(y.get(), 0)).Wait();
  Bytes out(d.output_count());
  dev.CopyToHost(y.get(), 0, out.data(), out.size());
  return out;
}

size_t Mismatches(const Bytes& got, const Bytes& want) {
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) bad += got[i] != want[i];
  return bad;
}

void CheckAllPaths(Device& dev, const ConvDesc& d, const Data& p, const std::string& what) {
  SCOPED_TRACE(what + ": " + d.ToString());
  Bytes ref(d.output_count()), ref8(d.output_count());
  ConvForwardReference(d, p.quant, p.x.data(), p.w4.data(), p.bias.data(), ref.data());
  ConvDesc d8 = d;
  d8.weight_bits = 8;
  ConvForwardReference(d8, p.quant, p.x.data(), p.w8.data(), p.bias.data(), ref8.data());
  EXPECT_EQ(Mismatches(ref8, ref), 0u) << "references of packed and unpacked weights";
  Convolution conv4(dev, d, p.quant);  // the path the constructor chooses
  EXPECT_EQ(Mismatches(RunConv(dev, conv4, p, true), ref), 0u)
      << "default path (gemm " << conv4.forward_gemm() << ", depthwise "
      << conv4.forward_depthwise() << ")";
  Convolution conv8(dev, d8, p.quant);
  EXPECT_EQ(Mismatches(RunConv(dev, conv8, p, false), ref), 0u) << "int8 convolution";
  // The direct kernel with the default and the 4-channel dot-product tiles.
  ConvConfig dot;
  dot.lanes = 16, dot.oc_per_item = 2, dot.px_per_item = 2, dot.vw = 1, dot.kp = 4;
  for (const ConvConfig& c : {DefaultConvConfig(dev.info(), d.type), dot}) {
    Convolution direct(dev, d, p.quant, c);
    EXPECT_EQ(Mismatches(RunConv(dev, direct, p, true), ref), 0u) << "config " << c.ToString();
  }
}

TEST(ConvInt4, EveryForwardPathMatchesTheReference) {
  Device& dev = DefaultDevice();
  const std::vector<Case> cases = {
      {2, 8, 9, 9, 12, 3, 1, 1, 1},    // direct kernel, K = 72
      {1, 3, 15, 15, 10, 5, 2, 0, 1},  // few channels: im2col + GEMM on CPUs, K = 75 (odd)
      {1, 6, 7, 7, 8, 3, 1, 1, 2},     // groups
      {1, 5, 8, 8, 5, 3, 1, 1, 5},     // depthwise, K = 9
      {1, 7, 6, 6, 9, 1, 1, 0, 1},     // 1×1, K = 7
  };
  int variant = 0;
  for (const Case& c : cases) {
    const ConvDesc d = Desc4(c, variant);
    CheckAllPaths(dev, d, Make(d, 11 + variant, false), "random");
    ++variant;
  }
}

TEST(ConvInt4, ExtremeValuesAreExact) {
  Device& dev = DefaultDevice();
  // Activations 255, weights −8 / 7, x_zero 0, K = 64·9 = 576 and 3·11·11 = 363.
  for (const Case& c : {Case{1, 64, 6, 6, 16, 3, 1, 1, 1}, Case{1, 3, 23, 23, 8, 11, 4, 0, 1}}) {
    const ConvDesc d = Desc4(c, 0);
    CheckAllPaths(dev, d, Make(d, 5, true), "extreme");
  }
}

TEST(ConvInt4, RejectsWhatTheFormatCannotServe) {
  ConvDesc d = Desc4({1, 4, 5, 5, 3, 3, 1, 1, 1}, 0);
  EXPECT_NO_THROW(d.Validate());
  EXPECT_EQ(d.weight_bytes(), 3u * 18u);  // K = 36 → 18 bytes per channel
  d.weights_signed = false;
  EXPECT_THROW(d.Validate(), Error);
  d = Desc4({1, 4, 5, 5, 3, 3, 1, 1, 1}, 0);
  d.type = DataType::kInt16Q;
  EXPECT_THROW(d.Validate(), Error);
  d = Desc4({1, 4, 5, 5, 3, 3, 1, 1, 1}, 0);
  d.weight_bits = 3;
  EXPECT_THROW(d.Validate(), Error);
  d = Desc4({1, 4, 5, 5, 3, 3, 1, 1, 1}, 0);
  ConvQuant q;
  q.w_zero = {1};
  try {
    Convolution conv(DefaultDevice(), d, q);
    ADD_FAILURE() << "a weight zero point of 1 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("symmetric"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mpcaffe::libdnn

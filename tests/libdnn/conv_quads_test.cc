// tests/libdnn/conv_quads_test.cc — the int8 pointwise kernel in byte quads (PointwiseTile::k 4:
// MP_DPBUSD16 over 4 input channels per step) bit-exact against ConvForwardReference, in the
// form the device compiles (vpdpbusd in a noinline AVX-512 VNNI helper on PoCL with avx512vnni)
// and forced into the portable form; weight zero points a signed byte cannot hold falling back
// to the pair products; and the profile rule that picks byte quads by default.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "codegen/kernel_writer.h"
#include "codegen/target_profile.h"
#include "device/host_isa.h"
#include "device/settings.h"
#include "libdnn/conv.h"
#include "quant/fixed_point.h"
#include "tests/testing/host_isa_levels.h"

namespace mpcaffe::libdnn {
namespace {

using Bytes = std::vector<uint8_t>;

struct Case {
  int n, c, h, w, o;
  Convolution::PointwiseTile tile;
};

// Whole quads, then 1, 2 or 3 channels in the last one; planes of one block, of several and of
// a shifted last block; output channels past the last full channel block. Few programs: each
// case compiles one (seconds on a CPU runtime).
// clang-format off
const Case kCases[] = {
    {2, 13, 5, 6, 10, {3, 1, 16, 4}},
    {1, 7, 6, 6, 9, {5, 2, 16, 4}},
    {1, 6, 4, 5, 16, {16, 1, 16, 4}},
};
// clang-format on

ConvDesc DescOf(const Case& c, int variant) {
  ConvDesc d;
  d.type = DataType::kInt8Q;
  d.batch = c.n, d.channels = c.c, d.height = c.h, d.width = c.w, d.out_channels = c.o;
  d.bias = variant % 4 != 3;
  d.relu = variant % 2 == 1;
  d.residual = variant % 3 == 0;
  d.weights_signed = variant % 2 == 0;
  return d;
}

/// Runs `d` with `tile` on random data (every fourth input and weight at the ends of their
/// ranges) and compares with the reference; `w_zero` −1: the symmetric zero point (128, or 0
/// for signed storage). Returns the tile the convolution ran.
Convolution::PointwiseTile CheckQuads(const ConvDesc& d, const Convolution::PointwiseTile& tile,
                                      uint32_t seed, int w_zero = -1) {
  Device& dev = DefaultDevice();
  std::mt19937 rng(seed);
  auto bytes = [&](size_t n, bool extremes) {
    Bytes b(n);
    for (size_t i = 0; i < n; ++i)
      b[i] = extremes && i % 4 == 0 ? uint8_t(i % 8 ? 255 : 0) : uint8_t(rng());
    return b;
  };
  const Bytes x = bytes(d.input_count(), true), w = bytes(d.weight_count(), true);
  const Bytes res = bytes(d.output_count(), false);
  ConvQuant q;
  q.x_zero = 118;
  q.c_zero = 131;
  q.res_zero = 120;
  q.res_multiplier = quant::QuantizeMultiplier(0.4);
  q.w_zero.assign(size_t(d.out_channels), w_zero >= 0 ? w_zero : d.weights_signed ? 0 : 128);
  // Outputs spread over about ±45 around c_zero (σ of a sum of C products of uniform bytes:
  // √C · 74²), so the requantization, not the clamps, decides most of them.
  const double sigma = std::sqrt(double(d.channels)) * 74.0 * 74.0;
  q.multiplier.clear();
  for (int o = 0; o < d.out_channels; ++o)
    q.multiplier.push_back(quant::QuantizeMultiplier((0.5 + 0.05 * o) * 45.0 / sigma));
  std::vector<int32_t> bias(size_t(d.out_channels));
  for (int32_t& b : bias) b = int32_t(int(rng() % 2001) - 1000) * int32_t(sigma) / 1000;
  Bytes want(d.output_count());
  ConvForwardReference(d, q, x.data(), w.data(), d.bias ? bias.data() : nullptr, want.data(),
                       res.data());

  Convolution conv = Convolution::Pointwise(dev, d, tile, q);
  EXPECT_TRUE(conv.forward_pointwise());
  auto upload = [&](const void* p, size_t n) {
    auto m = dev.Allocate(std::max<size_t>(n, 4));
    dev.CopyToDevice(p, m.get(), 0, n);
    return m;
  };
  auto xm = upload(x.data(), x.size()), wm = upload(w.data(), w.size());
  auto bm = upload(bias.data(), bias.size() * 4), rm = upload(res.data(), res.size());
  auto ym = dev.Allocate(want.size());
  conv.SetWeights(BufferRef(wm.get(), 0));
  conv.Forward(BufferRef(xm.get(), 0), BufferRef(bm.get(), 0), BufferRef(ym.get(), 0), nullptr,
               BufferRef(rm.get(), 0));
  Bytes got(want.size());
  dev.CopyToHost(ym.get(), 0, got.data(), got.size());
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (got[i] != want[i] && bad++ < 5)
      ADD_FAILURE() << "output " << i << ": got " << int(got[i]) << " want " << int(want[i]);
  EXPECT_EQ(bad, 0);
  return conv.pointwise_tile();
}

void SkipUnlessOpenCL(Device& dev) {
  if (dev.backend() != Backend::kOpenCL) GTEST_SKIP() << "the int8q pointwise kernel is OpenCL text";
}

const char* FormOf(Device& dev) {
  return KernelTarget::Of(dev).byte_quads_in_helper ? "vpdpbusd in a noinline AVX-512 VNNI helper"
                                                    : "portable byte quad products";
}

TEST(ConvByteQuads, MatchReference) {
  Device& dev = DefaultDevice();
  SkipUnlessOpenCL(dev);
  int variant = 0;
  for (const Case& c : kCases) {
    const ConvDesc d = DescOf(c, variant);
    SCOPED_TRACE(d.ToString() + " tile " + c.tile.ToString());
    EXPECT_EQ(CheckQuads(d, c.tile, 71 + variant).k, 4);
    ++variant;
  }
  std::printf("[ quads    ] %s: %s\n", dev.Describe().c_str(), FormOf(dev));
}

// The same integers in the portable form (MPCAFFE_ISA=generic), whatever this device compiles.
TEST(ConvByteQuads, PortableFormMatchesReference) {
  Device& dev = DefaultDevice();
  SkipUnlessOpenCL(dev);
  MPCAFFE_RUN_IN_PORTABLE_FORMS(dev);
  ASSERT_FALSE(KernelTarget::Of(dev).byte_quads_in_helper);
  const ConvDesc d = DescOf(kCases[1], 2);
  SCOPED_TRACE(d.ToString() + " tile " + kCases[1].tile.ToString());
  EXPECT_EQ(CheckQuads(d, kCases[1].tile, 91).k, 4);
}

// w − z_w outside a signed byte (an asymmetric per-tensor zero point): the pair products run.
TEST(ConvByteQuads, OtherWeightZeroPointsTakePairs) {
  Device& dev = DefaultDevice();
  SkipUnlessOpenCL(dev);
  ConvDesc d = DescOf(kCases[0], 1);
  d.weights_signed = false;
  const Convolution::PointwiseTile ran = CheckQuads(d, kCases[0].tile, 5, 100);
  EXPECT_EQ(ran.k, 2);
  EXPECT_EQ(ran.ToString(), "oc3 px1 v16");
}

// The default tile takes byte quads exactly where the profile has them, and MPCAFFE_ISA below
// the CPU's level (avx2, generic) turns them off; fp32 and the row form never take them.
TEST(ConvByteQuads, DefaultTileFollowsTheProfile) {
  ConvDesc d = DescOf(kCases[0], 1);
  d.height = d.width = 8;  // 64 pixels
  TargetProfile p;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(d, p).k, 2);
  p.byte_quad_products = true;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(d, p).ToString(), "oc8 px1 v16 k4");
  ConvDesc f = d;
  f.type = DataType::kFloat32;
  EXPECT_EQ(Convolution::DefaultPointwiseTile(f, p).k, 2);
  EXPECT_FALSE(Convolution::PointwiseApplies(f, {8, 1, 16, 4}));
  EXPECT_FALSE(Convolution::PointwiseApplies(d, {8, 2, 8, 4}));  // quads need vx 16

  DeviceInfo info;
  info.byte_quad_products_in_helper = true;
  EXPECT_EQ(TargetProfile::Of(info).byte_quad_products, true);
  for (HostIsa isa : {HostIsa::kAvx2, HostIsa::kGeneric}) {
    if (!(isa < CpuHostIsa())) continue;
    test_support::ScopedHostIsa lowered(isa);
    EXPECT_FALSE(TargetProfile::Of(info).byte_quad_products) << Name(isa);
  }
  info.byte_quad_products_in_helper = false;
  EXPECT_FALSE(TargetProfile::Of(info).byte_quad_products);
  // What device/ said of the default device, and why.
  Device& dev = DefaultDevice();
  const DeviceInfo& di = dev.info();
  const bool expected = di.backend == Backend::kOpenCL && di.implementation == "pocl" &&
                        !di.is_gpu && CpuHasAvx512Vnni();
  EXPECT_EQ(di.byte_quad_products_in_helper, expected) << dev.Describe();
}

}  // namespace
}  // namespace mpcaffe::libdnn

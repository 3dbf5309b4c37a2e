// tests/libdnn/conv_int4_test.cc — convolutions with 4-bit weights (ConvDesc::weight_bits = 4):
// every forward path (direct kernel with its default and dot-product configurations, groups,
// depthwise, im2col + GEMM, grouped im2col + GEMM, Winograd) bit-exact against the host
// reference and the int8 convolution on the unpacked weights, extreme values included; the
// description and zero-point checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "codegen/kernel_writer.h"
#include "device/error.h"
#include "device/settings.h"
#include "libdnn/conv.h"
#include "libdnn/conv_winograd.h"
#include "libdnn/tuner.h"  // TimeMs
#include "quant/fixed_point.h"
#include "quant/int4.h"
#include "tests/testing/host_isa_levels.h"

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
  // Winograd's integer F(2×2) on the unpacked weights, where it applies.
  if (WinogradApplies(d)) {
    Convolution wino = Convolution::Winograd(dev, d, {2, 6, 2, 8}, p.quant);
    EXPECT_EQ(Mismatches(RunConv(dev, wino, p, true), ref), 0u) << "Winograd";
  }
}

TEST(ConvInt4, EveryForwardPathMatchesTheReference) {
  Device& dev = DefaultDevice();
  const std::vector<Case> cases = {
      {2, 8, 9, 9, 12, 3, 1, 1, 1},    // direct kernel, K = 72
      {1, 3, 15, 15, 10, 5, 2, 0, 1},  // few channels (row form), K = 75 (odd)
      {1, 6, 7, 7, 8, 3, 1, 1, 2},     // groups
      {1, 5, 8, 8, 5, 3, 1, 1, 5},     // depthwise, K = 9
      {1, 7, 6, 6, 9, 1, 1, 0, 1},     // 1×1, K = 7
      {1, 32, 7, 9, 34, 3, 1, 1, 2},   // Winograd's two groups of 16 and 17, ragged tiles
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

// The x86 helper branches of the convolution kernels in their portable forms (MPCAFFE_ISA=generic:
// KernelTarget::helper_forms kPortable), on this device whatever its compiler targets: the int4
// direct kernel's byte pair products (MP_MADDUBS) at the extreme values, and the int8 pointwise
// kernel with 16-pixel vectors, whose portable MP_MADD32 takes the 512-bit lane layout (two
// 8-pixel accumulators per vector) that otherwise runs only where the compiler targets AVX-512.
TEST(ConvInt4, PortableHelperFormsMatchTheReference) {
  Device& dev = DefaultDevice();
  MPCAFFE_RUN_IN_PORTABLE_FORMS(dev);
  const ConvDesc d = Desc4(Case{1, 16, 6, 6, 8, 3, 1, 1, 1}, 0);
  const Data p = Make(d, 23, true);
  Bytes ref(d.output_count());
  ConvForwardReference(d, p.quant, p.x.data(), p.w4.data(), p.bias.data(), ref.data());
  Convolution direct(dev, d, p.quant, DefaultConvConfig(dev.info(), d.type));
  EXPECT_EQ(Mismatches(RunConv(dev, direct, p, true), ref), 0u) << "int4 direct kernel";

  ConvDesc pw = Desc4(Case{1, 16, 8, 8, 8, 1, 1, 0, 1}, 1);
  pw.weight_bits = 8;
  const Data q = Make(pw, 29, false);
  const Convolution::PointwiseTile tile{4, 1, 16};
  ASSERT_TRUE(Convolution::PointwiseApplies(pw, tile)) << pw.ToString();
  Bytes ref8(pw.output_count());
  ConvForwardReference(pw, q.quant, q.x.data(), q.w8.data(), q.bias.data(), ref8.data());
  Convolution pointwise = Convolution::Pointwise(dev, pw, tile, q.quant);
  ASSERT_TRUE(pointwise.forward_pointwise());
  EXPECT_EQ(Mismatches(RunConv(dev, pointwise, q, false), ref8), 0u) << "int8 pointwise, vx 16";
}

TEST(ConvInt4, GroupedIm2colGemmMatchesTheReference) {
  // The im2col + GEMM forward per group (forced with MPCAFFE_CONV_GEMM=1): groups 2 and 3 with
  // odd K per group (27; 45, whose 23-byte rows put group 1 at an odd byte offset; a grouped
  // pointwise convolution, K 5, which reads its channels without im2col), per-channel
  // multipliers (a GEMM per group) and one multiplier (one GEMM for every group), random and
  // extreme data, again after ReleaseScratch; the int8 weights of the same groups through the
  // same path; fp32 too.
  Device& dev = DefaultDevice();
  if (dev.backend() != Backend::kOpenCL) GTEST_SKIP() << "the GEMM forward is OpenCL only";
  const Case cases[] = {{2, 6, 9, 9, 10, 3, 2, 1, 2},
                        {1, 15, 7, 7, 9, 3, 1, 1, 3},
                        {2, 10, 5, 5, 6, 1, 1, 0, 2}};
  auto forced_gemm = [&](const ConvDesc& d, const ConvQuant& q) {
    std::optional<ScopedSettings> forced;
    forced.emplace([](Settings& s) { s.conv_gemm = "1"; });
    auto conv = std::make_unique<Convolution>(dev, d, q);
    forced.reset();
    EXPECT_TRUE(conv->forward_gemm()) << d.ToString();
    return conv;
  };
  int variant = 0;
  for (const Case& c : cases) {
    for (int mode = 0; mode < 3; ++mode) {  // per-channel, one multiplier, extreme
      const ConvDesc d = Desc4(c, variant);
      Data p = Make(d, 31 + variant++, mode == 2);
      if (mode == 1) p.quant.multiplier.resize(1);
      SCOPED_TRACE(d.ToString() + " mode " + std::to_string(mode));
      Bytes ref(d.output_count());
      ConvForwardReference(d, p.quant, p.x.data(), p.w4.data(), p.bias.data(), ref.data());
      ConvDesc d8 = d;
      d8.weight_bits = 8;
      for (const ConvDesc& dd : {d, d8}) {
        auto conv = forced_gemm(dd, p.quant);
        EXPECT_EQ(Mismatches(RunConv(dev, *conv, p, dd.weight_bits == 4), ref), 0u)
            << "weight_bits " << dd.weight_bits;
        conv->ReleaseScratch();  // reduced memory: the GEMMs allocate their scratch again
        EXPECT_EQ(Mismatches(RunConv(dev, *conv, p, dd.weight_bits == 4), ref), 0u)
            << "weight_bits " << dd.weight_bits << " after ReleaseScratch";
      }
    }
    // fp32 through the same per-group path, within fp32 rounding of the reference.
    ConvDesc f = Desc4(c, variant++);
    f.type = DataType::kFloat32;
    f.weights_signed = false;
    f.weight_bits = 8;
    SCOPED_TRACE(f.ToString());
    std::mt19937 rng(variant);
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> x(f.input_count()), w(f.weight_count()), b(size_t(f.out_channels));
    for (auto* v : {&x, &w, &b})
      for (float& e : *v) e = u(rng);
    std::vector<float> want(f.output_count()), got(want.size());
    ConvForwardReference(f, {}, x.data(), w.data(), b.data(), want.data());
    auto conv = forced_gemm(f, {});
    auto upload = [&](const std::vector<float>& v) {
      auto m = dev.Allocate(v.size() * 4);
      dev.CopyToDevice(v.data(), m.get(), 0, v.size() * 4);
      return m;
    };
    auto xm = upload(x), wm = upload(w), bm = upload(b), ym = upload(got);
    conv->SetWeights(BufferRef(wm.get(), 0));
    conv->Forward(BufferRef(xm.get(), 0), BufferRef(bm.get(), 0), BufferRef(ym.get(), 0)).Wait();
    dev.CopyToHost(ym.get(), 0, got.data(), got.size() * 4);
    size_t bad = 0;
    for (size_t i = 0; i < got.size(); ++i)
      bad += !(std::fabs(got[i] - want[i]) <= 1e-5f * (1 + std::fabs(want[i])));
    EXPECT_EQ(bad, 0u) << "fp32";
  }
}

/// Side-by-side timing of AlexNet's grouped convolutions (conv2, conv4, conv5; 2 groups; and
/// conv3, one group, for comparison):
/// int8w4 through the direct kernel (weights unpacked to int8 at SetWeights) against int8w4
/// through im2col + GEMM per group, with int8 direct beside them; alternating, medians of
/// CONV_INT4_ROUNDS (default 5) rounds, batch CONV_INT4_BATCH (default 1). Run by hand:
///   MPCAFFE_DEVICE=1 build/bin/test_libdnn --gtest_also_run_disabled_tests
///     --gtest_filter=ConvInt4Bench.DISABLED_AlexNetGroupedConvs
TEST(ConvInt4Bench, DISABLED_AlexNetGroupedConvs) {
  Device& dev = DefaultDevice();
  auto env = [](const char* name, int fallback) {
    return std::getenv(name) ? std::atoi(std::getenv(name)) : fallback;
  };
  const int rounds = env("CONV_INT4_ROUNDS", 5), batch = env("CONV_INT4_BATCH", 1);
  const std::vector<std::pair<const char*, Case>> layers = {
      {"conv2", {batch, 96, 27, 27, 256, 5, 1, 2, 2}},
      {"conv3", {batch, 256, 13, 13, 384, 3, 1, 1, 1}},
      {"conv4", {batch, 384, 13, 13, 384, 3, 1, 1, 2}},
      {"conv5", {batch, 384, 13, 13, 256, 3, 1, 1, 2}}};
  for (const auto& [name, c] : layers) {
    const ConvDesc d4 = Desc4(c, 0);
    ConvDesc d8 = d4;
    d8.weight_bits = 8;
    const Data p = Make(d4, 3, false);
    auto upload = [&](const void* data, size_t bytes) {
      auto m = dev.Allocate(bytes);
      dev.CopyToDevice(data, m.get(), 0, bytes);
      return m;
    };
    auto x = upload(p.x.data(), p.x.size()), b = upload(p.bias.data(), p.bias.size());
    auto w4 = upload(p.w4.data(), p.w4.size()), w8 = upload(p.w8.data(), p.w8.size());
    auto y = dev.Allocate(d4.output_count());
    auto make = [&](const ConvDesc& d, const char* gemm) {
      ScopedSettings forced([gemm](Settings& s) { s.conv_gemm = gemm; });
      auto conv = std::make_unique<Convolution>(dev, d, p.quant);
      EXPECT_EQ(conv->forward_gemm(), *gemm == '1');
      conv->SetWeights(BufferRef((d.weight_bits == 4 ? w4 : w8).get(), 0)).Wait();
      return conv;
    };
    std::unique_ptr<Convolution> convs[3] = {make(d8, "0"), make(d4, "0"), make(d4, "1")};
    std::vector<double> t[3];
    auto run = [&](Convolution& conv) {
      return conv.Forward(BufferRef(x.get(), 0), BufferRef(b.get(), 0), BufferRef(y.get(), 0));
    };
    for (auto& conv : convs) TimeMs([&] { return run(*conv); }, 1);
    for (int r = 0; r < rounds; ++r)
      for (int i = 0; i < 3; ++i) t[i].push_back(TimeMs([&] { return run(*convs[i]); }, 1));
    double m[3];
    for (int i = 0; i < 3; ++i) {
      std::sort(t[i].begin(), t[i].end());
      m[i] = t[i][t[i].size() / 2];
    }
    std::printf("%s batch %d  int8 direct %8.3f ms  int8w4 direct %8.3f ms  int8w4 gemm %8.3f ms"
                "  direct/gemm %.2f\n",
                name, batch, m[0], m[1], m[2], m[1] / m[2]);
  }
  std::printf("(%d rounds, %s)\n", rounds, dev.Describe().c_str());
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

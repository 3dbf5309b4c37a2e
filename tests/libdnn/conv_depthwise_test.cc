// tests/libdnn/conv_depthwise_test.cc — the depthwise kernel's byte-quad form against the plain
// C++ reference (bit-exact), and a disabled benchmark of MobileNet v1's and v2's depthwise layers
// timed without a host synchronization per launch.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "codegen/kernel_writer.h"
#include "device/device.h"
#include "libdnn/conv.h"
#include "quant/fixed_point.h"
#include "tests/libdnn/conv_run.h"

namespace mpcaffe::libdnn {
namespace {

using Bytes = std::vector<uint8_t>;

/// A 3×3 depthwise description of `c` channels on an h×h plane, bias and ReLU fused.
ConvDesc Dw3x3(DataType t, int c, int h, int stride) {
  ConvDesc d;
  d.type = t;
  d.channels = d.out_channels = d.groups = c;
  d.height = d.width = h;
  d.kernel_h = d.kernel_w = 3;
  d.stride_h = d.stride_w = stride;
  d.pad_h = d.pad_w = 1;
  d.bias = d.relu = true;
  d.weights_signed = IsQuantized(t);
  return d;
}

using test_conv::Upload;

/// One case of the byte-quad form: a depthwise description and its block of rows.
struct QuadCase {
  int n, c, h, w, kh, kw, sh, sw, ph, pw, dh, rows;
  bool weights_signed, residual, relu;
};

// The byte-quad form (16 columns, int32 sums from MP_DPBUSD16) against ConvForwardReference,
// bit for bit: strides 1 and 2, partial last vectors and blocks, a 5×5 window (two quads per
// row), a dilated 2×3 one, signed weights (z_w 0) and unsigned ones (z_w 128), per-channel
// multipliers, bias, ReLU and the fused residual. Every shape's last plane has rows whose
// 64-byte loads would leave the buffer, so the scalar fallback runs too. Skipped where the
// VNNI helper does not run (KernelTarget::byte_quads_in_helper: PoCL on an AVX-512 VNNI host).
TEST(ConvDepthwiseQuads, MatchTheReferenceBitForBit) {
  Device& dev = DefaultDevice();
  // clang-format off
  const QuadCase cases[] = {
      {1, 16, 17, 17, 3, 3, 1, 1, 1, 1, 1, 3, true, true, true},    // s1, 17 columns, rows 3
      {2, 8, 17, 17, 3, 3, 2, 2, 1, 1, 1, 8, false, false, true},   // s2, 9 rows and columns
      {1, 6, 11, 40, 5, 5, 1, 1, 2, 2, 1, 4, true, false, false},   // 5×5: two quads per row
      {1, 5, 12, 70, 2, 3, 2, 2, 0, 1, 2, 5, false, true, false},   // s2, 35 columns, dilated rows
  };
  // clang-format on
  std::mt19937 rng(17);
  int ran = 0;
  for (const QuadCase& cs : cases) {
    ConvDesc d;
    d.type = DataType::kInt8Q;
    d.batch = cs.n, d.channels = d.out_channels = d.groups = cs.c;
    d.height = cs.h, d.width = cs.w, d.kernel_h = cs.kh, d.kernel_w = cs.kw;
    d.stride_h = cs.sh, d.stride_w = cs.sw, d.pad_h = cs.ph, d.pad_w = cs.pw;
    d.dilation_h = cs.dh;
    d.bias = true, d.relu = cs.relu, d.residual = cs.residual;
    d.weights_signed = cs.weights_signed;
    SCOPED_TRACE(d.ToString() + " rows " + std::to_string(cs.rows));
    ConvQuant quant;
    std::uniform_int_distribution<int> zx(0, 255), zc(90, 160);
    quant.x_zero = ran == 0 ? 255 : zx(rng);  // the largest zero point once
    quant.c_zero = zc(rng);
    quant.w_zero = {cs.weights_signed ? 0 : 128};
    const double k = double(cs.kh) * cs.kw, sigma = 73.9;
    std::uniform_real_distribution<double> f(0.5, 1.5);
    quant.multiplier.clear();
    for (int o = 0; o < cs.c; ++o)
      quant.multiplier.push_back(
          quant::QuantizeMultiplier(f(rng) * 45.0 / (std::sqrt(k) * sigma * sigma)));
    if (d.residual) {
      quant.res_zero = quant.c_zero / 2;
      quant.res_multiplier = quant::QuantizeMultiplier(0.4);
    }
    if (!Convolution::DepthwiseQuadsApply(d, KernelTarget::Of(dev), quant))
      GTEST_SKIP() << "no byte-quad depthwise form on " << dev.Describe()
                   << " (AVX-512 VNNI in a helper: PoCL on such a host)";
    std::uniform_int_distribution<int> byte(0, 255);
    Bytes x(d.input_count()), w(d.weight_count()), res(d.output_count());
    for (auto* v : {&x, &w, &res})
      std::generate(v->begin(), v->end(), [&] { return uint8_t(byte(rng)); });
    std::vector<int32_t> bias(size_t(d.out_channels));
    std::uniform_int_distribution<int> b(-int(std::sqrt(k) * sigma * sigma),
                                         int(std::sqrt(k) * sigma * sigma));
    for (auto& v : bias) v = b(rng);
    Bytes want(d.output_count());
    ConvForwardReference(d, quant, x.data(), w.data(), bias.data(), want.data(), res.data());

    Convolution conv = Convolution::Depthwise(dev, d, quant, cs.rows, 16, true);
    EXPECT_TRUE(conv.depthwise_quads());
    EXPECT_EQ(conv.depthwise_vx(), 16);
    const Bytes got = test_conv::RunForward(dev, conv, x, w, bias, res, want.size());
    size_t bad = 0, clamped = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      clamped += want[i] == 0 || want[i] == 255;
      if (got[i] != want[i] && bad++ < 5)
        ADD_FAILURE() << "output " << i << ": got " << int(got[i]) << " want " << int(want[i]);
    }
    EXPECT_EQ(bad, 0u);
    EXPECT_LT(clamped, want.size() / 2) << "the data should exercise the requantization";
    ++ran;
  }
}

// Not a test: MobileNet v1's and v2's depthwise layers (batch 1), each forward enqueued 20 times
// per host synchronization (the net's per-layer --explain timing adds a Finish to every layer),
// in µs per forward, the median of 15 such batches; int8 in the default plan and, where the
// byte-quad form is the default, beside the float / pair form of the same rows, the two timed
// in alternation. MPCAFFE_DW_BENCH_TYPES ("int8", "fp32" or both, the default) chooses the
// types; MPCAFFE_DW_BENCH_LAYER=<index> times one layer of the list, MPCAFFE_DW_BENCH_ROUNDS
// sets the number of batches. Run with
// --gtest_also_run_disabled_tests --gtest_filter='*MobileNetDepthwiseLayers*'.
TEST(ConvDepthwiseBench, DISABLED_MobileNetDepthwiseLayers) {
  Device& dev = DefaultDevice();
  const int layers[][3] = {// MobileNet v1
                           {32, 112, 1},
                           {64, 112, 2},
                           {128, 56, 1},
                           {128, 56, 2},
                           {256, 28, 1},
                           {256, 28, 2},
                           {512, 14, 1},
                           {512, 14, 2},
                           {1024, 7, 1},
                           // MobileNet v2 (its other layers repeat these shapes)
                           {96, 112, 2},
                           {144, 56, 1},
                           {144, 56, 2},
                           {192, 28, 1},
                           {192, 28, 2},
                           {384, 14, 1},
                           {576, 14, 1},
                           {576, 14, 2},
                           {960, 7, 1}};
  const char* types_env = std::getenv("MPCAFFE_DW_BENCH_TYPES");
  const std::string types = types_env ? types_env : "int8,fp32";
  const char* only_env = std::getenv("MPCAFFE_DW_BENCH_LAYER");  // one layer's index
  const int only = only_env ? std::atoi(only_env) : -1;
  std::mt19937 rng(5);
  for (DataType t : {DataType::kInt8Q, DataType::kFloat32}) {
    if (types.find(t == DataType::kInt8Q ? "int8" : "fp32") == std::string::npos) continue;
    double total = 0, total_other = 0;
    int index = -1;
    for (const auto& l : layers) {
      if (++index != only && only >= 0) continue;
      const ConvDesc d = Dw3x3(t, l[0], l[1], l[2]);
      ConvQuant quant;
      if (IsQuantized(t)) {
        quant.x_zero = 3, quant.c_zero = 0;
        quant.multiplier = {quant::QuantizeMultiplier(0.0021)};
      }
      const size_t es = SizeOf(t);
      Bytes x(d.input_count() * es), w(d.weight_count() * es), b(size_t(d.out_channels) * 4);
      std::uniform_int_distribution<int> u(0, 255);
      for (auto* v : {&x, &w})
        std::generate(v->begin(), v->end(), [&] { return uint8_t(u(rng) & 0x3f); });
      auto xm = Upload(dev, x), wm = Upload(dev, w), bm = Upload(dev, b);
      auto ym = dev.Allocate(d.output_count() * es);
      std::vector<std::unique_ptr<Convolution>> convs;
      convs.push_back(std::make_unique<Convolution>(dev, d, quant));
      if (convs[0]->depthwise_quads())
        convs.push_back(std::make_unique<Convolution>(Convolution::Depthwise(
            dev, d, quant, convs[0]->depthwise_rows(),
            Convolution::DepthwiseVectorWidth(d, KernelTarget::Of(dev), quant.x_zero))));
      const char* rounds_env = std::getenv("MPCAFFE_DW_BENCH_ROUNDS");
      const int kRounds = rounds_env ? std::max(1, std::atoi(rounds_env)) : 15;
      std::vector<std::vector<double>> us(convs.size());
      for (auto& conv : convs) {
        conv->SetWeights(BufferRef(wm.get(), 0));
        conv->Forward(BufferRef(xm.get(), 0), BufferRef(bm.get(), 0), BufferRef(ym.get(), 0));
      }
      dev.Finish();
      for (int round = 0; round < kRounds; ++round)
        for (size_t c = 0; c < convs.size(); ++c) {
          const auto start = std::chrono::steady_clock::now();
          for (int i = 0; i < 20; ++i)
            convs[c]->Forward(BufferRef(xm.get(), 0), BufferRef(bm.get(), 0),
                              BufferRef(ym.get(), 0));
          dev.Finish();
          us[c].push_back(
              std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                  .count() /
              20);
        }
      for (auto& v : us) std::sort(v.begin(), v.end());
      total += us[0][kRounds / 2];
      std::printf("%-60s rows %2d vx %2d%s %8.1f us", d.ToString().c_str(),
                  convs[0]->depthwise_rows(), convs[0]->depthwise_vx(),
                  convs[0]->depthwise_quads() ? " quads" : "", us[0][kRounds / 2]);
      if (convs.size() > 1) {
        total_other += us[1][kRounds / 2];
        std::printf("   vx %2d %8.1f us (%.2fx)", convs[1]->depthwise_vx(), us[1][kRounds / 2],
                    us[1][kRounds / 2] / us[0][kRounds / 2]);
      } else {
        total_other += us[0][kRounds / 2];
      }
      std::printf("\n");
    }
    std::printf("%s: sum %.1f us (without the byte-quad form: %.1f us)\n", Name(t), total,
                total_other);
  }
}

}  // namespace
}  // namespace mpcaffe::libdnn

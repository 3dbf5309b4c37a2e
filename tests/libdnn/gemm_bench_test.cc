// tests/libdnn/gemm_bench_test.cc — GEMM measurements run by hand (disabled tests): the default
// tiles against local-memory tiles, four-K dot products and byte quads on AlexNet's shapes,
// configurations alternating each round; medians printed. Not part of `make test`.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <tuple>
#include <vector>

#include "libdnn/gemm.h"
#include "libdnn/tuner.h"
#include "tests/libdnn/gemm_check.h"

namespace mpcaffe::libdnn {
namespace {

using namespace gemm_check;  // NOLINT: the GEMM tests' shared vocabulary

// Run by hand (--gtest_also_run_disabled_tests --gtest_filter='*LocalMemoryVersusDefault*'):
// the device default against lm = 1 tiles on AlexNet's conv1 and conv3 GEMMs (weights A,
// batch 1), fp32 and int8, alternating the configurations each round so load on the machine
// hits them alike; prints median milliseconds and GOP/s.

/// The benchmarks' timing of `d` in each of `configs` (placeholder quantization): one warm-up
/// run of each GEMM (PoCL specializes at launch), then `rounds` rounds running each in turn (so
/// load changes hit all alike); ms per run, per configuration, and in `native_dot4` (when given)
/// whether each GEMM takes the device's dot product.
std::vector<std::vector<double>> TimeRounds(Device& dev, const GemmDesc& d,
                                            const std::vector<GemmConfig>& configs, int rounds,
                                            std::vector<bool>* native_dot4 = nullptr) {
  GemmOperands ops(dev, d);
  const GemmQuant quant = PlaceholderQuant(d);
  std::vector<Gemm> gemms;
  for (const GemmConfig& c : configs) gemms.emplace_back(dev, d, quant, c);
  std::vector<std::vector<double>> ms(gemms.size());
  for (Gemm& g : gemms) {
    ops.PrepareWeights(g);
    g.Run(ops.args()).Wait();
    if (native_dot4) native_dot4->push_back(g.native_dot4());
  }
  for (int r = 0; r < rounds; ++r)
    for (size_t i = 0; i < gemms.size(); ++i) {
      const auto start = std::chrono::steady_clock::now();
      gemms[i].Run(ops.args()).Wait();
      ms[i].push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count());
    }
  return ms;
}

TEST(GemmBenchmark, DISABLED_LocalMemoryVersusDefault) {
  Device& dev = DefaultDevice();
  const char* rounds_env = std::getenv("GEMM_BENCH_ROUNDS");
  const int rounds = rounds_env ? std::max(1, std::atoi(rounds_env)) : 9;
  for (DataType t : {DataType::kFloat32, DataType::kInt8Q})
    for (const Shape& s : {Shape{96, 3025, 363}, Shape{384, 169, 2304}}) {
      GemmDesc d;
      d.type = d.out_type = t;
      d.M = s.M;
      d.N = s.N;
      d.K = s.K;
      d.weights = WeightOperand::kA;
      d.bias = true;
      d.relu = true;
      const GemmConfig base = DefaultGemmConfig(dev.info(), d);
      std::vector<GemmConfig> configs = {base};
      if (base.kp == 2) {  // lm = 1 has the one-k loop: show that one too
        configs.push_back(base);
        configs.back().kp = 1;
      }
      for (int wg : {1, 4}) {
        GemmConfig c = base;
        c.kp = 1;
        c.lm = 1;
        c.wg = wg;
        configs.push_back(c);
      }
      std::vector<std::vector<double>> ms = TimeRounds(dev, d, configs, rounds);
      const double gop = 2.0 * d.M * d.N * d.K * 1e-6;
      std::printf("%s M=%d N=%d K=%d on %s\n", Name(t), d.M, d.N, d.K, dev.Describe().c_str());
      for (size_t i = 0; i < configs.size(); ++i) {
        std::sort(ms[i].begin(), ms[i].end());
        const double med = ms[i][ms[i].size() / 2];
        std::printf("  %-48s median %8.3f ms  min %8.3f ms  %7.1f GOP/s\n",
                    configs[i].ToString().c_str(), med, ms[i].front(), gop / med);
      }
    }
}

// Run by hand (--gtest_also_run_disabled_tests --gtest_filter='*Dot4VersusPairs*'): on
// AlexNet's five GEMM shapes (int8, weights A as `mpcaffe bench gemm` runs them), the default
// of a CPU without a native dot product (kp = 2 pair products) against kp = 4 / kDot vw = 1
// tiles (the 4-way dot product), configurations alternating each round; median milliseconds.
TEST(GemmBenchmark, DISABLED_Dot4VersusPairs) {
  Device& dev = DefaultDevice();
  const char* rounds_env = std::getenv("GEMM_BENCH_ROUNDS");
  const int rounds = rounds_env ? std::max(1, std::atoi(rounds_env)) : 7;
  DeviceInfo no_dot = dev.info();
  no_dot.dot_product = false;
  for (const Shape& s : {Shape{96, 3025, 363}, Shape{256, 729, 1200}, Shape{384, 169, 2304},
                         Shape{4096, 64, 9216}, Shape{4096, 1, 9216}}) {
    GemmDesc d;
    d.type = d.out_type = DataType::kInt8Q;
    d.M = s.M;
    d.N = s.N;
    d.K = s.K;
    d.weights = WeightOperand::kA;
    std::vector<GemmConfig> configs = {DefaultGemmConfig(no_dot, d)};
    const GemmConfig now = DefaultGemmConfig(dev.info(), d);
    if (!(now == configs[0])) configs.push_back(now);
    for (auto [alg, tm, tn, wg, mf] : {std::tuple{GemmConfig::Algorithm::kOuter, 4, 1, 16, 0},
                                       std::tuple{GemmConfig::Algorithm::kOuter, 8, 1, 16, 0},
                                       std::tuple{GemmConfig::Algorithm::kOuter, 4, 2, 16, 0},
                                       std::tuple{GemmConfig::Algorithm::kOuter, 8, 1, 32, 0},
                                       std::tuple{GemmConfig::Algorithm::kOuter, 6, 2, 1, 0},
                                       std::tuple{GemmConfig::Algorithm::kDot, 4, 1, 16, 1},
                                       std::tuple{GemmConfig::Algorithm::kDot, 1, 1, 16, 1}}) {
      GemmConfig c;
      c.algorithm = alg;
      c.tm = tm;
      c.tn = tn;
      c.vw = 1;
      c.wg = wg;
      c.mf = mf;
      c.kp = alg == GemmConfig::Algorithm::kOuter ? 4 : 1;
      if (c.Supports(d, dev.backend()) && !(c == now)) configs.push_back(c);
    }
    std::vector<bool> dot4;
    std::vector<std::vector<double>> ms = TimeRounds(dev, d, configs, rounds, &dot4);
    const double gop = 2.0 * d.M * d.N * d.K * 1e-6;
    std::printf("int8 M=%d N=%d K=%d on %s\n", d.M, d.N, d.K, dev.Describe().c_str());
    for (size_t i = 0; i < configs.size(); ++i) {
      std::sort(ms[i].begin(), ms[i].end());
      const double med = ms[i][ms[i].size() / 2];
      std::printf("  %-48s %s median %8.3f ms  %7.1f GOP/s\n", configs[i].ToString().c_str(),
                  dot4[i] ? "dot4" : "    ", med, gop / med);
    }
  }
}

// Run by hand (--gtest_also_run_disabled_tests --gtest_filter='*QuadsVersusPairs*'): AlexNet's
// inner products at batch 1 (int8, unsigned weights B with a zero point, as `mpcaffe convert`
// writes them), the default against one-row tiles of pair products (kp = 2) and byte quads
// (kp = 4, vw = 16), and conv1's and conv2's GEMMs against outer quad tiles, configurations
// alternating each round; median and minimum milliseconds and the weights' GB/s.
TEST(GemmBenchmark, DISABLED_QuadsVersusPairs) {
  Device& dev = DefaultDevice();
  const char* rounds_env = std::getenv("GEMM_BENCH_ROUNDS");
  const int rounds = rounds_env ? std::max(1, std::atoi(rounds_env)) : 9;
  // The last two: conv1 and one group of conv2 as GEMMs (weights A), against outer quad tiles.
  for (const Shape& s : {Shape{1, 4096, 9216}, Shape{1, 4096, 4096}, Shape{1, 1000, 4096},
                         Shape{96, 3025, 363}, Shape{128, 729, 1200}}) {
    const bool inner = s.M == 1;
    GemmDesc d;
    d.type = d.out_type = DataType::kInt8Q;
    d.M = s.M;
    d.N = s.N;
    d.K = s.K;
    d.trans_b = inner;
    d.weights = inner ? WeightOperand::kB : WeightOperand::kA;
    d.bias = d.relu = d.per_channel = true;
    std::vector<GemmConfig> configs = {DefaultGemmConfig(dev.info(), d)};
    for (auto [tn, vw, kp, ku] : {std::tuple{4, 8, 2, 1}, std::tuple{8, 8, 2, 1},
                                  std::tuple{1, 16, 4, 1}, std::tuple{2, 16, 4, 1},
                                  std::tuple{4, 16, 4, 1}, std::tuple{8, 16, 4, 1},
                                  std::tuple{4, 16, 4, 2}}) {
      GemmConfig c = Int8Tile(GemmConfig::Algorithm::kDot, 1, tn, ku, kp);
      c.vw = vw;
      if (c.Supports(d, dev.backend()) && !(c == configs[0])) configs.push_back(c);
    }
    for (auto [tm, tn, mf] : {std::tuple{6, 2, 1}, std::tuple{4, 2, 1}, std::tuple{8, 1, 1},
                              std::tuple{4, 3, 1}, std::tuple{6, 2, 0}}) {
      GemmConfig c = Int8Tile(GemmConfig::Algorithm::kOuter, tm, tn, 1, GemmConfig::kDot4);
      c.vw = 16;
      c.mf = mf;
      if (c.Supports(d, dev.backend()) && !(c == configs[0])) configs.push_back(c);
    }
    std::vector<std::vector<double>> ms = TimeRounds(dev, d, configs, rounds);
    std::printf("int8 %s M=%d N=%d K=%d on %s\n", inner ? "inner product" : "convolution GEMM",
                d.M, d.N, d.K, dev.Describe().c_str());
    for (size_t i = 0; i < configs.size(); ++i) {
      std::sort(ms[i].begin(), ms[i].end());
      const double med = ms[i][ms[i].size() / 2];
      std::printf("  %-48s median %8.3f ms  min %8.3f ms  %6.1f GB/s of weights (median)\n",
                  configs[i].ToString().c_str(), med, ms[i].front(),
                  double(d.N) * d.K * 1e-6 / med);
    }
  }
}

}  // namespace
}  // namespace mpcaffe::libdnn

// tests/libdnn/gemm_test.cc — the generated GEMM against its host reference on the default
// device: every data type on 24 shapes (LeNet/AlexNet layer shapes scaled down, odd sizes,
// M/N/K = 1) with transposes, bias, ReLU, per-channel and signed weights varied; both kernel
// algorithms and several tile configurations, local-memory tiles in every layout; tuned vs
// default parameters. The exact integer forms are in gemm_exact_test.cc.
#include "libdnn/gemm.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <tuple>
#include <vector>

#include "libdnn/tuner.h"
#include "tests/libdnn/gemm_check.h"

namespace mpcaffe::libdnn {
namespace {

using namespace gemm_check;  // NOLINT: the GEMM tests' shared vocabulary

class GemmTest : public ::testing::TestWithParam<DataType> {};

TEST_P(GemmTest, MatchesReferenceOnEveryShape) {
  Device& dev = DefaultDevice();
  int i = 0;
  for (const Shape& s : Shapes()) {
    Problem p = MakeProblem(Varied(GetParam(), s, OptionIndex(i)), 1000 + i);
    if (!IsQuantized(GetParam()) && i % 3 == 2) {
      p.alpha = 0.5f;
      p.beta = 0.25f;
    }
    if (std::getenv("GEMM_TEST_VERBOSE")) std::fprintf(stderr, "%s\n", p.desc.ToString().c_str());
    ExpectSame(p, RunOnDevice(dev, p, nullptr), RunReference(p), "default config");
    ++i;
  }
}

TEST_P(GemmTest, InnerProductsMatchTheReferenceInTheirDefaultTiles) {
  // Inner products (activations A, weights B transposed) in this device's default tiles: K
  // below 64 at a batch (the 784-30-10 net's 10000 × 10 × 30 output layer at 40 rows: the
  // short-K outer tiles), one activation row and a batch of 16 (the one-row and batch dot
  // tiles, fp16's 16-lane ones where the device computes in half).
  Device& dev = DefaultDevice();
  int seed = 77;
  for (const Shape& s : {Shape{40, 10, 30}, Shape{1, 24, 96}, Shape{16, 24, 96}}) {
    const Problem p = MakeProblem(Varied(GetParam(), s, 2), seed++);
    ASSERT_TRUE(p.desc.trans_b && p.desc.weights == WeightOperand::kB);
    ExpectSame(p, RunOnDevice(dev, p, nullptr), RunReference(p), p.desc.ToString());
  }
}

TEST_P(GemmTest, EveryAlgorithmAndTileGivesTheReferenceResult) {
  Device& dev = DefaultDevice();
  const std::vector<Shape> shapes = {{1, 1, 9}, {17, 1, 130}, {23, 37, 45}, {40, 3, 64}};
  // Kernel text depends on the flags and the configuration, not on M, N, K: one description
  // per type (bias, ReLU, per-channel, asymmetric weights) and five configurations keep the
  // number of compiles small.
  std::vector<GemmConfig> configs;
  for (auto [algorithm, tm, tn, vw, ku] :
       {std::tuple{GemmConfig::Algorithm::kOuter, 1, 1, 1, 1},
        std::tuple{GemmConfig::Algorithm::kOuter, 3, 2, 4, 2},
        std::tuple{GemmConfig::Algorithm::kDot, 1, 2, 1, 2},  // int8: the 4-way dot product
        std::tuple{GemmConfig::Algorithm::kDot, 4, 1, 8, 1},
        std::tuple{GemmConfig::Algorithm::kDot, 2, 3, 16, 4}}) {
    GemmConfig c;
    c.algorithm = algorithm;
    c.tm = tm;
    c.tn = tn;
    c.vw = vw;
    c.ku = ku;
    c.wg = vw == 1 ? 4 : 1;
    configs.push_back(c);
  }
  // Every shape runs under at least one configuration of each algorithm (a Supports() that
  // refused everything would otherwise pass having run nothing).
  int i = 0;
  for (const Shape& s : shapes) {
    GemmDesc d = Varied(GetParam(), s, 0);
    d.relu = true;
    d.trans_a = false;  // the dot algorithm's layout: A rows and B columns contiguous in K
    d.trans_b = true;
    Problem p = MakeProblem(d, 77 + i);
    const std::vector<uint8_t> want = RunReference(p);
    std::map<GemmConfig::Algorithm, int> ran;
    for (const GemmConfig& c : configs) {
      if (!c.Supports(d, dev.backend())) continue;
      ExpectSame(p, RunOnDevice(dev, p, &c), want, c.ToString());
      ++ran[c.algorithm];
    }
    EXPECT_GT(ran[GemmConfig::Algorithm::kOuter], 0) << d.ToString() << ": no outer-product tile ran";
    EXPECT_GT(ran[GemmConfig::Algorithm::kDot], 0) << d.ToString() << ": no dot-product tile ran";
    ++i;
  }
}

/// 0..3 for fp32, fp16, int16q, int8q: which part of a shared sweep a type's test takes.
int TypeIndex(DataType t) {
  switch (t) {
    case DataType::kFloat32: return 0;
    case DataType::kFloat16: return 1;
    case DataType::kInt16Q: return 2;
    default: return 3;
  }
}

/// lm = 1 configurations: one work-item (staging only), 2-D work-groups of 2 × 2, 4 × 2 and
/// 8 × 8 (every work-item loading several elements per slab; rows and vectors strided across
/// the group), vectors of 4, 8 (int8: the vector epilogue) and 16, both work-group orders and
/// the three K unrolls.
std::vector<GemmConfig> LocalMemoryConfigs() {
  std::vector<GemmConfig> out;
  for (auto [tm, tn, vw, wg, ku, mf] :
       {std::tuple{1, 1, 1, 1, 1, 0}, std::tuple{3, 2, 1, 4, 2, 1}, std::tuple{2, 2, 4, 8, 2, 0},
        std::tuple{6, 2, 8, 1, 1, 1}, std::tuple{4, 4, 1, 64, 4, 0}, std::tuple{2, 1, 16, 2, 1, 0},
        std::tuple{5, 3, 8, 4, 4, 1}}) {
    GemmConfig c;
    c.algorithm = GemmConfig::Algorithm::kOuter;
    c.tm = tm;
    c.tn = tn;
    c.vw = vw;
    c.wg = wg;
    c.ku = ku;
    c.mf = mf;
    c.lm = 1;
    out.push_back(c);
  }
  return out;
}

TEST_P(GemmTest, LocalMemoryTilesGiveTheReferenceResult) {
  // A quarter of the shapes of the list per data type, the four types together covering all
  // (odd sizes, M/N/K = 1, K beyond one slab and not a multiple of it), with the varied
  // options (transposes, bias, ReLU, padded C, signed and per-channel weights, requantized or
  // fp32 output, α/β), each under one of the lm = 1 configurations in turn. (PoCL compiles
  // each kernel text, which dominates the run time: all shapes in every type took 15 minutes
  // with a cold kernel cache.)
  Device& dev = DefaultDevice();
  const std::vector<GemmConfig> configs = LocalMemoryConfigs();
  const int part = TypeIndex(GetParam());
  int i = 0, runs = 0;
  for (const Shape& s : Shapes()) {
    if (i % 4 != part) {
      ++i;
      continue;
    }
    Problem p = MakeProblem(Varied(GetParam(), s, i), 3000 + i);
    if (!IsQuantized(GetParam()) && i % 3 == 2) {
      p.alpha = 0.5f;
      p.beta = 0.25f;
    }
    const std::vector<uint8_t> want = RunReference(p);
    const GemmConfig& c = configs[i % configs.size()];
    if (c.Supports(p.desc, dev.backend())) {
      ExpectSame(p, RunOnDevice(dev, p, &c), want, c.ToString());
      ++runs;
    }
    ++i;
  }
  EXPECT_GE(runs, 5);
}

TEST_P(GemmTest, LocalMemoryTilesGiveTheReferenceResultInEveryLayout) {
  // One odd shape (2 slabs and a partial one, edge tiles in M and N of every configuration),
  // every transpose and weight side, each epilogue option on, one configuration per layout
  // (the data types rotate through all of them).
  Device& dev = DefaultDevice();
  GemmDesc d = Varied(GetParam(), {37, 45, 41}, 0);
  d.relu = true;
  int runs = 0;
  for (int layout = 0; layout < 4; ++layout) {
    d.trans_a = layout % 2 == 1;
    d.trans_b = layout / 2 == 1;
    d.weights = layout == 1 ? WeightOperand::kB : WeightOperand::kA;
    if (IsQuantized(d.type)) {
      d.weights_signed = layout == 2;
      d.weight_zero = !d.weights_signed;
      d.out_type = layout == 3 ? DataType::kFloat32 : d.type;
    }
    Problem p = MakeProblem(d, 4100 + layout);
    const std::vector<uint8_t> want = RunReference(p);
    const std::vector<GemmConfig> configs = LocalMemoryConfigs();
    const GemmConfig& c = configs[(layout * 2 + TypeIndex(d.type)) % configs.size()];
    if (!c.Supports(d, dev.backend())) continue;
    ExpectSame(p, RunOnDevice(dev, p, &c), want, c.ToString());
    ++runs;
  }
  EXPECT_GT(runs, 0) << "no local-memory tile ran";
}

TEST_P(GemmTest, WorkItemPerOutputCandidatesGiveTheReferenceResult) {
  // Every scalar work-item candidate (vw = 1, work-groups of 8–64 along N, lm = 0) the Tuner
  // times on an OpenCL CPU, on a shape with edge tiles in M and N and a last work-group only
  // partly inside N (Kernel::Launch rounds the grid up to whole work-groups; the items outside
  // return). Each data type takes one layout, the four together covering B read as rows and
  // gathered, A plain and transposed.
  Device& dev = DefaultDevice();
  DeviceInfo cpu = dev.info();
  if (cpu.backend != Backend::kOpenCL || UsesLaneDefaults(cpu)) {
    cpu = DeviceInfo{};  // the candidates an OpenCL CPU would time, run on this device
    cpu.backend = dev.backend();
  }
  const int layout = TypeIndex(GetParam());
  GemmDesc d = Varied(GetParam(), {13, 70, 45}, layout);
  d.trans_a = layout % 2 == 1;
  d.trans_b = layout / 2 == 1;
  Problem p = MakeProblem(d, 5200 + layout);
  const std::vector<uint8_t> want = RunReference(p);
  std::vector<GemmConfig> scalar;
  for (const GemmConfig& c : GemmCandidates(cpu, d)) {
    // (kp = 4, the int8 dot-product tiles of devices that have one, are GemmDot4Test's.)
    if (c.vw != 1 || c.wg < 8 || c.lm != 0 || c.kp != 1 || !c.Supports(d, dev.backend()))
      continue;
    scalar.push_back(c);
  }
  EXPECT_EQ(scalar.size(), 20u);  // work-groups of 8, 16, 32, 64 × five tiles (N = 70)
  // Each a compile: a covering sample (every work-group size, every tile's rows and columns),
  // all of them under make test-sweep.
  int runs = 0;
  for (const GemmConfig& c : test_support::SampleOf(GemmConfig::Schema(), scalar)) {
    ExpectSame(p, RunOnDevice(dev, p, &c), want, c.ToString());
    ++runs;
  }
  EXPECT_GE(runs, test_support::ExhaustiveSweep() ? 20 : 4);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, GemmTest,
                         ::testing::Values(DataType::kFloat32, DataType::kFloat16,
                                           DataType::kInt16Q, DataType::kInt8Q),
                         [](const auto& info) { return std::string(Name(info.param)); });


/// An int8 GEMM of layout 0–3 (bit 0: A transposed, bit 1: B transposed; layout 3 writes
/// fp32) with weights w: 0 unsigned A without bias, 1 B (signed where A is not transposed),
/// 2 signed A; per-channel requantization except layout 1, ReLU in layout 2.

}  // namespace
}  // namespace mpcaffe::libdnn

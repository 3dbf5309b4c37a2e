// tests/libdnn/gemm_test.cc — the generated GEMM against its host reference on the default
// device: every data type on 24 shapes (LeNet/AlexNet layer shapes scaled down, odd sizes,
// M/N/K = 1) with transposes, bias, ReLU, per-channel and signed weights varied; both kernel
// algorithms and several tile configurations; tuned vs default parameters.
#include "libdnn/gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "codegen/kernel_writer.h"
#include "codegen/vector_words.h"
#include "libdnn/gemm_internal.h"
#include "libdnn/tuner.h"
#include "quant/fixed_point.h"
#include "tests/testing/sweep.h"

namespace mpcaffe::libdnn {
namespace {

struct Shape {
  int M, N, K;
};

/// 24 shapes: LeNet (conv1 20×576×25, conv2 50×64×500, ip1 scaled), AlexNet's conv/FC GEMMs
/// scaled down, odd sizes, and every dimension at 1.
const std::vector<Shape>& Shapes() {
  static const std::vector<Shape> shapes = {
      {1, 1, 1},    {1, 7, 3},     {5, 1, 9},     {7, 13, 1},    {17, 33, 65},   {32, 32, 32},
      {3, 100, 5},  {20, 576, 25}, {50, 64, 125}, {10, 1, 500},  {24, 379, 121}, {64, 91, 300},
      {96, 43, 96}, {48, 16, 288}, {256, 1, 576}, {33, 17, 129}, {9, 8, 31},     {6, 16, 40},
      {12, 200, 7}, {1, 300, 64},  {70, 3, 1000}, {13, 31, 17},  {128, 64, 72},  {2, 2, 2}};
  return shapes;
}

/// Host buffers of one problem, in the element types of GemmArgs.
struct Problem {
  GemmDesc desc;
  GemmQuant quant;
  std::vector<uint8_t> a, b, c, bias;
  float alpha = 1.0f, beta = 0.0f;
};

size_t StoredRows(int rows, int cols, bool trans) { return trans ? cols : rows; }

template <typename T>
void Fill(std::vector<uint8_t>& bytes, size_t n, std::mt19937& rng, T lo, T hi) {
  bytes.resize(n * sizeof(T));
  std::uniform_int_distribution<int64_t> dist(lo, hi);
  for (size_t i = 0; i < n; ++i) {
    const T v = static_cast<T>(dist(rng));
    std::memcpy(bytes.data() + i * sizeof(T), &v, sizeof(T));
  }
}

/// Floats k/8, k in [-8, 8]: every product and partial sum is exact in fp32 and the inputs
/// are exact in fp16, so any summation order gives the reference's value.
void FillFloat(std::vector<uint8_t>& bytes, size_t n, std::mt19937& rng, DataType t) {
  std::uniform_int_distribution<int> dist(-8, 8);
  bytes.resize(n * SizeOf(t));
  for (size_t i = 0; i < n; ++i) {
    const float v = dist(rng) / 8.0f;
    if (t == DataType::kFloat16) {
      const uint16_t h = FloatToHalf(v);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    } else {
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    }
  }
}

Problem MakeProblem(const GemmDesc& d, uint32_t seed) {
  std::mt19937 rng(seed);
  Problem p;
  p.desc = d;
  const size_t na = StoredRows(d.M, d.K, d.trans_a) * d.lda_or_packed();
  const size_t nb = StoredRows(d.K, d.N, d.trans_b) * d.ldb_or_packed();
  const size_t nc = static_cast<size_t>(d.M) * d.ldc_or_packed();
  const int ch = d.channels();
  if (!IsQuantized(d.type)) {
    FillFloat(p.a, na, rng, d.type);
    FillFloat(p.b, nb, rng, d.type);
    FillFloat(p.c, nc, rng, d.type);
    if (d.bias) FillFloat(p.bias, ch, rng, DataType::kFloat32);
    return p;
  }
  const bool i8 = d.type == DataType::kInt8Q;
  const bool wa = d.weights == WeightOperand::kA;
  const int64_t qmax = i8 ? 255 : 65535;
  auto fill_operand = [&](std::vector<uint8_t>& bytes, size_t n, bool weights) {
    if (weights && d.weights_signed) {
      if (i8)
        Fill<int8_t>(bytes, n, rng, -128, 127);
      else
        Fill<int16_t>(bytes, n, rng, -32768, 32767);
    } else {
      if (i8)
        Fill<uint8_t>(bytes, n, rng, 0, 255);
      else
        Fill<uint16_t>(bytes, n, rng, 0, 65535);
    }
  };
  fill_operand(p.a, na, wa);
  fill_operand(p.b, nb, !wa);
  p.c.assign(nc * SizeOf(d.out_type), 0);
  std::uniform_int_distribution<int64_t> zero(0, qmax);
  p.quant.x_zero = static_cast<int32_t>(zero(rng));
  p.quant.w_zero = d.weights_signed || !d.weight_zero ? 0 : static_cast<int32_t>(zero(rng));
  p.quant.c_zero = static_cast<int32_t>(zero(rng));
  // Scale the accumulator's typical size (√K·σ²) onto a quarter of the output range.
  const double sigma = (qmax + 1) / std::sqrt(12.0);
  const double typical = std::sqrt(static_cast<double>(d.K)) * sigma * sigma;
  std::uniform_real_distribution<double> jitter(0.5, 2.0);
  const int n = d.per_channel ? ch : 1;
  for (int i = 0; i < n; ++i) {
    const double m = (qmax / 4.0) / typical * jitter(rng);
    p.quant.multiplier.push_back(quant::QuantizeMultiplier(m));
    p.quant.scale.push_back(static_cast<float>(m * jitter(rng)));
  }
  if (d.bias) {
    const int64_t range = static_cast<int64_t>(typical);
    if (i8)
      Fill<int32_t>(p.bias, ch, rng, static_cast<int32_t>(-range), static_cast<int32_t>(range));
    else
      Fill<int64_t>(p.bias, ch, rng, -range, range);
  }
  return p;
}

/// Runs the problem on the device; returns C's bytes.
std::vector<uint8_t> RunOnDevice(Device& dev, const Problem& p, const GemmConfig* config) {
  const GemmDesc& d = p.desc;
  auto upload = [&](const std::vector<uint8_t>& bytes) {
    vptr<uint8_t> buf = dev.Alloc<uint8_t>(std::max<size_t>(bytes.size(), 1));
    dev.Write(buf, bytes.data(), bytes.size());
    return buf;
  };
  vptr<uint8_t> a = upload(p.a), b = upload(p.b), c = upload(p.c), bias = upload(p.bias);
  Gemm gemm = config ? Gemm(dev, d, p.quant, *config) : Gemm(dev, d, p.quant);
  GemmArgs args;
  args.a = a;
  args.b = b;
  args.c = c;
  args.alpha = p.alpha;
  args.beta = p.beta;
  if (d.bias) args.bias = bias;
  vptr<uint8_t> sums;
  if (IsQuantized(d.type)) {
    sums = dev.Alloc<uint8_t>(d.channels() * 8);
    gemm.ComputeWeightSums(d.weights == WeightOperand::kA ? BufferRef(a) : BufferRef(b), sums);
    args.weight_sums = sums;
    // The device's weight sums equal the reference's.
    std::vector<uint8_t> want(d.channels() * 8), got(d.channels() * 8);
    WeightSumsReference(d, d.weights == WeightOperand::kA ? p.a.data() : p.b.data(), want.data());
    dev.Read(sums, got.data(), got.size());
    const size_t used = d.channels() * (d.type == DataType::kInt8Q ? 4 : 8);
    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), used)) << "weight sums of " << d.ToString();
  }
  gemm.Run(args).Wait();
  std::vector<uint8_t> out(p.c.size());
  dev.Read(c, out.data(), out.size());
  return out;
}

std::vector<uint8_t> RunReference(const Problem& p) {
  std::vector<uint8_t> out = p.c;
  GemmReference(p.desc, p.quant, p.a.data(), p.b.data(), out.data(), p.alpha, p.beta,
                p.bias.empty() ? nullptr : p.bias.data());
  return out;
}

/// Compares C: quantized and fp32/fp16 (exact test data) must match exactly, except that
/// fp32 allows 1e-5 relative for the dot algorithm's reordered sums (none occur with this data,
/// but the contract is 1e-5). fp16 compares values, so −0 equals +0: Mesa 22.3's rusticl folds
/// fma(a, b, +0.0) into a·b, which is −0 where IEEE 754's fma gives +0 (docs/BENCHMARKS.md,
/// "rusticl"), the same number.
void ExpectSame(const Problem& p, const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
                const std::string& what) {
  const GemmDesc& d = p.desc;
  size_t bad = 0, first = SIZE_MAX;
  const size_t ldc = d.ldc_or_packed();
  for (int m = 0; m < d.M; ++m)
    for (int n = 0; n < d.N; ++n) {
      const size_t i = m * ldc + n;
      bool same;
      if (d.out_type == DataType::kFloat32) {
        float g, w;
        std::memcpy(&g, got.data() + 4 * i, 4);
        std::memcpy(&w, want.data() + 4 * i, 4);
        same = IsQuantized(d.type) ? std::memcmp(&g, &w, 4) == 0
                                   : std::fabs(g - w) <= 1e-5f * std::max(1.0f, std::fabs(w));
      } else if (d.out_type == DataType::kFloat16) {
        uint16_t g, w;
        std::memcpy(&g, got.data() + 2 * i, 2);
        std::memcpy(&w, want.data() + 2 * i, 2);
        same = HalfToFloat(g) == HalfToFloat(w);
      } else {
        const size_t e = SizeOf(d.out_type);
        same = std::memcmp(got.data() + e * i, want.data() + e * i, e) == 0;
      }
      if (!same && bad++ == 0) first = i;
    }
  EXPECT_EQ(bad, 0u) << what << ": " << d.ToString() << " (first mismatch at element " << first
                     << ")";
}

/// The description of shape `i` of the list for `type`, with the options varied by index.
GemmDesc Varied(DataType type, const Shape& s, int i) {
  GemmDesc d;
  d.type = type;
  d.out_type = type;
  d.M = s.M;
  d.N = s.N;
  d.K = s.K;
  d.trans_a = i % 2 == 1;
  d.trans_b = (i / 2) % 2 == 1;
  d.weights = i % 3 == 0 ? WeightOperand::kA : WeightOperand::kB;
  d.bias = i % 2 == 0;
  d.relu = i % 4 == 1;
  if (i % 7 == 3) d.ldc = s.N + 3;  // a padded C
  if (IsQuantized(type)) {
    d.weights_signed = i % 3 == 1;
    d.per_channel = i % 2 == 0;
    if (i % 5 == 4) d.out_type = DataType::kFloat32;
    d.weight_zero = !d.weights_signed;
  }
  return d;
}

/// The option index Varied gets for shape `i` of a list: every shape its own under the
/// exhaustive sweep; else six, which give every option both of its values (transposes, weight
/// side, bias, ReLU, padded C, signed and per-channel weights, fp32 output) — each a branch of
/// the generator — and a program each, while every shape still runs.
int OptionIndex(int i) { return test_support::ExhaustiveSweep() ? i : i % 6; }

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
GemmDesc Int8Variant(int layout, int w) {
  GemmDesc d;
  d.type = d.out_type = DataType::kInt8Q;
  d.trans_a = layout % 2 == 1;
  d.trans_b = layout / 2 == 1;
  d.weights = w == 1 ? WeightOperand::kB : WeightOperand::kA;
  d.weights_signed = w == 2 || (w == 1 && layout % 2 == 0);
  d.weight_zero = !d.weights_signed;
  d.per_channel = layout != 1;
  d.bias = w != 0;
  d.relu = layout == 2;
  if (layout == 3) d.out_type = DataType::kFloat32;
  return d;
}

/// Whether the int8 variant (layout, w) is compiled: all twelve under the exhaustive sweep;
/// else six, which take every layout, every weight operand (unsigned A, B, signed A) and
/// signed B (w = 1 with A not transposed: layout 2).
bool CoveringVariant(int layout, int w) {
  return test_support::ExhaustiveSweep() || w == layout % 3 || (layout == 2 && w == 1) ||
         (layout == 3 && w == 2);
}

/// The configurations variant (layout, w) runs: all under the exhaustive sweep; else one, in
/// turn, so that the covering variants take each configuration at least once.
std::vector<GemmConfig> VariantConfigs(const std::vector<GemmConfig>& configs, int layout, int w) {
  if (test_support::ExhaustiveSweep()) return configs;
  return {configs[static_cast<size_t>(layout + w) % configs.size()]};
}

/// `d` with the dimensions of `s`; padded: row strides 5 (A) and 3 (B) elements longer.
void SetShape(GemmDesc& d, const Shape& s, bool padded) {
  d.M = s.M;
  d.N = s.N;
  d.K = s.K;
  if (padded) {
    d.lda = (d.trans_a ? s.M : s.K) + 5;
    d.ldb = (d.trans_b ? s.K : s.N) + 3;
  }
}

/// A vw = 8 tile of `algorithm` with the given register tile, K unroll and K mode.
GemmConfig Int8Tile(GemmConfig::Algorithm algorithm, int tm, int tn, int ku, int kp) {
  GemmConfig c;
  c.algorithm = algorithm;
  c.tm = tm;
  c.tn = tn;
  c.vw = 8;
  c.ku = ku;
  c.kp = kp;
  return c;
}

TEST(GemmPairTest, KPairProductsMatchTheReferenceExactly) {
  // kp = 2 (int8q pair products, OpenCL vw = 8): odd K and K = 1, 2, 3 (the one-k tail, the
  // unrolled and plain two-k loops), edge tiles in M and N, every transpose, weights as A
  // (packed pairs) or B, signed and unsigned weights, per-channel requantization and fp32
  // output.
  Device& dev = DefaultDevice();
  // Also kp = 1 with vw = 8: the int8 vector epilogue with in-kernel activation sums.
  std::vector<GemmConfig> configs;
  for (auto [tm, tn, ku, kp] :
       {std::tuple{6, 2, 1, 2}, std::tuple{3, 1, 2, 2}, std::tuple{6, 2, 1, 1}})
    configs.push_back(Int8Tile(GemmConfig::Algorithm::kOuter, tm, tn, ku, kp));
  // N ≥ 128 (8 column tiles of 16): weights A are packed into pairs first (PacksA).
  const std::vector<Shape> shapes = {{1, 1, 1},     {7, 19, 2},   {13, 16, 3}, {6, 33, 9},
                                     {9, 8, 4},     {17, 40, 65}, {2, 1, 130}, {5, 131, 7},
                                     {12, 150, 34}, {1, 129, 2}};
  int seed = 0;
  for (int layout = 0; layout < 4; ++layout)
    for (int w = 0; w < 3; ++w) {
      if (!CoveringVariant(layout, w)) continue;
      GemmDesc d = Int8Variant(layout, w);
      for (const GemmConfig& c : VariantConfigs(configs, layout, w)) {
        if (!c.Supports(d, dev.backend())) GTEST_SKIP() << "kp = 2 needs an OpenCL device";
        for (const Shape& s : shapes) {
          SetShape(d, s, /*padded=*/layout == 1);
          Problem p = MakeProblem(d, 500 + seed++);
          ExpectSame(p, RunOnDevice(dev, p, &c), RunReference(p), c.ToString());
        }
      }
    }
}

/// Checks descs[v] on `shapes` against the reference, bit for bit: with configs[v], or (`sweep`
/// under the exhaustive sweep) with every configuration. Row strides padded for v = 1; with
/// `matrix_vector`, N = 1 where the weights are A.
void ExpectDescsExact(Device& dev, const std::vector<GemmDesc>& descs,
                      const std::vector<GemmConfig>& configs, const std::vector<Shape>& shapes,
                      int seed, bool sweep, bool matrix_vector) {
  for (size_t v = 0; v < descs.size(); ++v)
    for (size_t ci = 0; ci < configs.size(); ++ci) {
      if (ci != v && !(sweep && test_support::ExhaustiveSweep())) continue;
      GemmDesc d = descs[v];
      const GemmConfig& c = configs[ci];
      for (Shape s : shapes) {
        if (matrix_vector && d.weights == WeightOperand::kA) s.N = 1;
        SetShape(d, s, /*padded=*/v == 1);
        ASSERT_TRUE(c.Supports(d, dev.backend())) << c.ToString() << " " << d.ToString();
        Problem p = MakeProblem(d, seed++);
        ExpectSame(p, RunOnDevice(dev, p, &c), RunReference(p), c.ToString());
      }
    }
}

/// The dot tile's kp = 2 configurations the pair tests run: a 4 × 2 tile, an unrolled 2 × 3
/// and a 1 × 1.
std::vector<GemmConfig> DotPairConfigs() {
  std::vector<GemmConfig> configs;
  for (auto [tm, tn, ku] : {std::tuple{4, 2, 1}, std::tuple{2, 3, 2}, std::tuple{1, 1, 1}})
    configs.push_back(Int8Tile(GemmConfig::Algorithm::kDot, tm, tn, ku, GemmConfig::kPairs));
  return configs;
}

/// Three layouts of type t for the dot tile's pair tests: the inner product's (unsigned weights
/// B with a zero point, per channel, bias), signed weights B without a zero point (4-bit weights
/// unpacked, for int8) with fp32 output and ReLU, and matrix × vector (weights A).
std::vector<GemmDesc> DotPairDescs(DataType t) {
  std::vector<GemmDesc> descs(3);
  for (GemmDesc& d : descs) d.type = d.out_type = t;
  descs[0].trans_b = true;
  descs[0].per_channel = descs[0].bias = true;
  descs[1].trans_b = true;
  descs[1].weights_signed = true;
  descs[1].weight_zero = false;
  descs[1].out_type = DataType::kFloat32;
  descs[1].relu = true;
  descs[2].weights = WeightOperand::kA;
  return descs;
}

TEST(GemmPairTest, DotPairProductsMatchTheReferenceExactly) {
  // kp = 2 in the dot tile (int8q, vw = 8: 16 k per step as 16-bit pairs, z_w folded into the
  // weights): K below, at and past one step and its unrolled pair (the scalar tail), edge tiles
  // in M and N, the inner product's layout (weights B: unsigned with a zero point, signed
  // without), and matrix × vector (weights A, one column of B).
  Device& dev = DefaultDevice();
  const std::vector<GemmConfig> configs = DotPairConfigs();
  const std::vector<GemmDesc> descs = DotPairDescs(DataType::kInt8Q);
  const std::vector<Shape> shapes = {{1, 1, 1},  {7, 19, 15}, {13, 16, 16},
                                     {6, 33, 17}, {9, 8, 33},  {5, 30, 47}};
  ExpectDescsExact(dev, descs, configs, shapes, 1300, /*sweep=*/false, /*matrix_vector=*/true);
}

TEST(GemmPairTest, Int16SplitPairsMatchTheReferenceExactly) {
  // kp = 2 in the int16q dot tile (activations split into bytes, weights held as w − 32768 or
  // signed): K below, at and past one 16-k step, its unrolled pair and the 127-step flush of
  // the int32 partial sums (K = 2032, 2033, 4100), edge tiles in M and N, the inner product's
  // layout (unsigned weights B with a zero point; signed weights without), matrix × vector
  // (weights A), then every operand at the extremes of its range, where a partial sum one step
  // longer than the flush would overflow.
  Device& dev = DefaultDevice();
  const std::vector<GemmConfig> configs = DotPairConfigs();
  const std::vector<GemmDesc> descs = DotPairDescs(DataType::kInt16Q);
  for (const GemmConfig& c : configs)
    if (!c.Supports(descs[0], dev.backend())) GTEST_SKIP() << "kp = 2 needs vectors of 8";
  const std::vector<Shape> shapes = {{1, 1, 1},   {7, 19, 15},   {13, 16, 16},  {6, 33, 17},
                                     {9, 8, 33},  {5, 30, 47},   {3, 5, 2032},  {2, 3, 2033},
                                     {3, 2, 4100}};
  ExpectDescsExact(dev, descs, configs, shapes, 2100, /*sweep=*/true, /*matrix_vector=*/true);
  for (size_t v = 0; v < descs.size(); ++v)
    for (uint16_t wv : {uint16_t{0}, uint16_t{0xffff}, uint16_t{0x8000}, uint16_t{0x7fff}}) {
      GemmDesc d = descs[v];
      SetShape(d, {3, 2, 4100}, /*padded=*/false);
      if (d.weights == WeightOperand::kA) d.N = 1;
      Problem p = MakeProblem(d, 2200);
      const bool wa = d.weights == WeightOperand::kA;
      std::vector<uint8_t>& x = wa ? p.b : p.a;
      std::vector<uint8_t>& w = wa ? p.a : p.b;
      for (size_t i = 0; i + 1 < x.size(); i += 2) x[i] = x[i + 1] = 0xff;
      for (size_t i = 0; i + 1 < w.size(); i += 2) std::memcpy(&w[i], &wv, 2);
      ExpectSame(p, RunOnDevice(dev, p, &configs[v]), RunReference(p),
                 configs[v].ToString() + " extremes");
    }
}

TEST(GemmQuadTest, DotQuadsMatchTheReferenceExactly) {
  // kp = 4 with vw = 16 in the dot tile (int8q byte quads, 64 k per step in a helper function):
  // K below, at and past one step and its unrolled pair (the scalar tail), edge tiles in M and
  // N, the inner product's layout (weights B: unsigned with a zero point, flipped to signed
  // bytes; signed without), and matrix × vector (weights A, unsigned, one column of B). VNNI's
  // vpdpbusd where the device compiles it in a helper (asserted from the text), the portable
  // form elsewhere: the same integers.
  Device& dev = DefaultDevice();
  const bool vnni = KernelTarget::Of(dev).byte_quads_in_helper && dev.backend() == Backend::kOpenCL;
  std::vector<GemmConfig> configs;
  for (auto [tm, tn, ku] : {std::tuple{1, 2, 1}, std::tuple{2, 3, 2}, std::tuple{4, 1, 1}}) {
    GemmConfig c = Int8Tile(GemmConfig::Algorithm::kDot, tm, tn, ku, GemmConfig::kDot4);
    c.vw = 16;
    configs.push_back(c);
  }
  std::vector<GemmDesc> descs(3);
  for (GemmDesc& d : descs) d.type = d.out_type = DataType::kInt8Q;
  descs[0].trans_b = true;  // InnerProduct: unsigned weights B with a zero point, per channel
  descs[0].per_channel = descs[0].bias = descs[0].relu = true;
  descs[1].trans_b = true;  // signed weights B without a zero point, fp32 out
  descs[1].weights_signed = true;
  descs[1].weight_zero = false;
  descs[1].out_type = DataType::kFloat32;
  descs[2].weights = WeightOperand::kA;  // matrix × vector
  const std::vector<Shape> shapes = {{1, 1, 1},   {7, 19, 63},  {13, 16, 64},
                                     {6, 33, 65}, {9, 8, 129}, {2, 30, 300}};
  // The covering sample: configs[v] for descs[v]; all pairs under the exhaustive sweep.
  ExpectDescsExact(dev, descs, configs, shapes, 1700, /*sweep=*/true, /*matrix_vector=*/true);
  GemmDesc d = descs[0];
  SetShape(d, shapes.back(), false);
  const Gemm g(dev, d, MakeProblem(d, 1).quant, configs[0]);
  EXPECT_EQ(g.source().find("#define MP_BYTE_QUADS_VNNI") != std::string::npos, vnni);
}

TEST(GemmQuadTest, OuterQuadsMatchTheReferenceExactly) {
  // kp = 4 with vw = 16 in the outer tile (int8q byte quads, the convolution's GEMM: weights A,
  // neither operand transposed): K = 1 … 9 and longer (each K mod 4 tail, the unrolled loop),
  // edge tiles in M and N (N from 16: the last vectors shift left inside B), unsigned weights
  // with a zero point (flipped) and signed weights, per-channel requantization, fp32 output.
  Device& dev = DefaultDevice();
  std::vector<GemmConfig> configs;
  for (auto [tm, tn, ku, mf] : {std::tuple{6, 2, 1, 1}, std::tuple{3, 1, 2, 0},
                                std::tuple{4, 3, 1, 0}}) {
    GemmConfig c = Int8Tile(GemmConfig::Algorithm::kOuter, tm, tn, ku, GemmConfig::kDot4);
    c.vw = 16;
    c.mf = mf;
    configs.push_back(c);
  }
  std::vector<GemmDesc> descs(3);
  for (GemmDesc& d : descs) {
    d.type = d.out_type = DataType::kInt8Q;
    d.weights = WeightOperand::kA;
  }
  descs[0].per_channel = descs[0].bias = descs[0].relu = true;  // unsigned weights, z_w
  descs[1].weights_signed = true;  // signed weights without a zero point, fp32 out
  descs[1].weight_zero = false;
  descs[1].out_type = DataType::kFloat32;
  descs[2].weights_signed = true;  // signed weights with a zero point
  descs[2].bias = true;
  const std::vector<Shape> shapes = {{1, 16, 1},  {7, 19, 2},  {13, 33, 3},  {6, 40, 9},
                                     {9, 16, 4},  {17, 50, 65}, {5, 131, 7}, {12, 150, 34}};
  ExpectDescsExact(dev, descs, configs, shapes, 2100, /*sweep=*/true, /*matrix_vector=*/false);
  GemmDesc narrow = descs[0];
  narrow.N = 15, narrow.M = 4, narrow.K = 8;
  EXPECT_FALSE(configs[0].Supports(narrow, dev.backend()));
}

TEST(GemmDot4Test, FourKDotProductsMatchTheReferenceExactly) {
  // kp = 4 (int8q 4-way byte dot products, vw = 1): K = 1 … 9 and odd K (no four-k step, the
  // unrolled and plain four-k loops, each K mod 4 tail), edge tiles in M and N, every transpose
  // and weight side, signed and unsigned weights with zero points, per-channel requantization
  // and fp32 output. Native dot products on a device with dot_product (asserted), portable
  // shifts elsewhere: the same integers either way.
  Device& dev = DefaultDevice();
  const bool native = KernelTarget::Of(dev).dot_product;
  std::vector<GemmConfig> configs;
  for (auto [tm, tn, ku, wg, mf] :
       {std::tuple{4, 2, 1, 16, 0}, std::tuple{3, 3, 2, 1, 1}, std::tuple{1, 1, 4, 4, 0}}) {
    GemmConfig c;
    c.algorithm = GemmConfig::Algorithm::kOuter;
    c.tm = tm;
    c.tn = tn;
    c.vw = 1;
    c.wg = wg;
    c.ku = ku;
    c.mf = mf;
    c.kp = 4;
    configs.push_back(c);
  }
  const std::vector<Shape> shapes = {{1, 1, 1},    {7, 19, 2},   {13, 16, 3}, {6, 33, 9},
                                     {9, 8, 4},    {17, 40, 65}, {2, 1, 130}, {5, 31, 7},
                                     {12, 50, 34}, {3, 5, 5},    {4, 4, 8},   {1, 29, 6}};
  int seed = 0;
  for (int layout = 0; layout < 4; ++layout)
    for (int w = 0; w < 3; ++w) {
      if (!CoveringVariant(layout, w)) continue;
      GemmDesc d = Int8Variant(layout, w);
      for (const GemmConfig& c : VariantConfigs(configs, layout, w)) {
        ASSERT_TRUE(c.Supports(d, dev.backend())) << c.ToString();
        for (const Shape& s : shapes) {
          SetShape(d, s, /*padded=*/layout == 1);
          Problem p = MakeProblem(d, 900 + seed++);
          ExpectSame(p, RunOnDevice(dev, p, &c), RunReference(p), c.ToString());
        }
        d.lda = d.ldb = 0;
        const Gemm g(dev, d, MakeProblem(d, 1).quant, c);
        EXPECT_EQ(g.native_dot4(), native) << c.ToString();
        EXPECT_EQ(g.source().find("dot_4x8packed_") != std::string::npos,
                  native && dev.backend() == Backend::kOpenCL);
      }
    }
}

TEST(GemmDot4Test, DefaultsTakeTheDotProductOnGpusNotOnCpus) {
  // kp = 4 is the int8 default on GPUs with a native dot product; on OpenCL CPUs the pair
  // products stay (measured on Intel's CPU runtime: see DefaultGemmConfig), and without the
  // dot product GPUs keep the one-k loop. kDot with vw = 1 (GPUs) multiplies through it too.
  GemmDesc conv;  // convolution as GEMM: W (M × K) · columns (K × N)
  conv.type = conv.out_type = DataType::kInt8Q;
  conv.M = 64;
  conv.N = 169;
  conv.K = 75;
  conv.weights = WeightOperand::kA;
  GemmDesc fc = conv;  // InnerProduct: x (M × K) · Wᵀ
  fc.M = 4;
  fc.N = 100;
  fc.K = 300;
  fc.weights = WeightOperand::kB;
  fc.trans_b = true;
  DeviceInfo gpu;
  gpu.backend = Backend::kOpenCL;
  gpu.is_gpu = true;
  gpu.dot_product = true;
  DeviceInfo cpu = gpu;
  cpu.is_gpu = false;
  DeviceInfo old_gpu = gpu;
  old_gpu.dot_product = false;
  DeviceInfo cuda = gpu;
  cuda.backend = Backend::kCuda;
  for (const DeviceInfo* dev : {&gpu, &cuda}) {
    const GemmConfig c = DefaultGemmConfig(*dev, conv);
    EXPECT_EQ(c.kp, 4) << c.ToString();
    EXPECT_TRUE(c.Supports(conv, dev->backend)) << c.ToString();
    const GemmConfig f = DefaultGemmConfig(*dev, fc);
    EXPECT_EQ(f.algorithm, GemmConfig::Algorithm::kDot);
    EXPECT_EQ(f.vw, 1);
  }
  EXPECT_EQ(DefaultGemmConfig(cpu, conv).kp, 2);
  EXPECT_EQ(DefaultGemmConfig(old_gpu, conv).kp, 1);
  GemmDesc f32 = conv;
  f32.type = f32.out_type = DataType::kFloat32;
  EXPECT_EQ(DefaultGemmConfig(gpu, f32).kp, 1);
  // The Tuner times kp = 4 where the device has the dot product, and not elsewhere.
  auto has_kp4 = [&](const DeviceInfo& d) {
    for (const GemmConfig& c : GemmCandidates(d, conv))
      if (c.kp == 4) return true;
    return false;
  };
  EXPECT_TRUE(has_kp4(cpu));
  EXPECT_FALSE(has_kp4(old_gpu));
}

TEST(GemmDot4Test, NativeDotProductRunsWhereTheDeviceHasIt) {
  // On a device with a native 4-way byte dot product, kp = 4 (weights A as in convolution as
  // GEMM, unsigned and signed) and kDot with scalar lanes (matrix × vector) multiply through
  // it (OpenCL: the dot_4x8packed_* built-ins in the program text), bit-exact.
  Device& dev = DefaultDevice();
  if (!KernelTarget::Of(dev).dot_product)
    GTEST_SKIP() << dev.info().name << " has no native 4-way int8 dot product "
                 << "(cl_khr_integer_dot_product with packed inputs on OpenCL 3.x, or CUDA "
                 << "sm_61+): the portable form ran (PortableDeviceHasNoNativeText)";
  GemmConfig four;
  four.tm = 4;
  four.tn = 2;
  four.vw = 1;
  four.wg = 16;
  four.kp = 4;
  GemmConfig dot = four;
  dot.algorithm = GemmConfig::Algorithm::kDot;
  dot.kp = 1;
  GemmDesc conv;
  conv.type = conv.out_type = DataType::kInt8Q;
  conv.M = 40;
  conv.N = 77;
  conv.K = 75;
  conv.weights = WeightOperand::kA;
  GemmDesc conv_signed = conv;
  conv_signed.weights_signed = true;
  conv_signed.weight_zero = false;
  GemmDesc mv = conv;
  mv.N = 1;
  mv.K = 301;
  for (const auto& [d, c, builtin] :
       {std::tuple{conv, four, "dot_4x8packed_uu_uint"},
        std::tuple{conv_signed, four, "dot_4x8packed_us_int"},
        std::tuple{mv, dot, "dot_4x8packed_uu_uint"}}) {
    Problem p = MakeProblem(d, 8080);
    const Gemm g(dev, d, p.quant, c);
    EXPECT_TRUE(g.native_dot4()) << d.ToString() << " " << c.ToString();
    if (dev.backend() == Backend::kOpenCL) {
      EXPECT_NE(g.source().find(builtin), std::string::npos) << d.ToString();
    }
    ExpectSame(p, RunOnDevice(dev, p, &c), RunReference(p), c.ToString());
  }
}

TEST(GemmDot4Test, PortableDeviceHasNoNativeText) {
  // Without a native dot product the same kp = 4 kernel takes the portable helper.
  Device& dev = DefaultDevice();
  if (KernelTarget::Of(dev).dot_product)
    GTEST_SKIP() << dev.info().name << " has a native 4-way int8 dot product";
  GemmConfig c;
  c.tm = 4;
  c.tn = 1;
  c.vw = 1;
  c.kp = 4;
  GemmDesc d;
  d.type = d.out_type = DataType::kInt8Q;
  d.M = 9;
  d.N = 17;
  d.K = 23;
  const Gemm g(dev, d, MakeProblem(d, 1).quant, c);
  EXPECT_FALSE(g.native_dot4());
  EXPECT_EQ(g.source().find("dot_4x8packed_"), std::string::npos);
  EXPECT_NE(g.source().find("mp_dot4_u8u8"), std::string::npos);
}

TEST(GemmPairTest, WeightZeroPointOutsideTheStorageRangeStaysExact) {
  // kp = 2 keeps w − z_w in 16 bits; a zero point beyond uint8 falls back to the one-k loop.
  Device& dev = DefaultDevice();
  GemmConfig c;
  c.kp = 2;
  GemmDesc d;
  d.type = d.out_type = DataType::kInt8Q;
  d.M = 7;
  d.N = 21;
  d.K = 37;
  if (!c.Supports(d, dev.backend())) GTEST_SKIP() << "kp = 2 needs an OpenCL device";
  Problem p = MakeProblem(d, 4242);
  p.quant.w_zero = 40000;  // w − z_w does not fit 16 bits
  ExpectSame(p, RunOnDevice(dev, p, &c), RunReference(p), "w_zero 40000");
}

TEST(GemmPairTest, PortableFormsGiveTheSameIntegers) {
  // Compilers without AVX2 take the portable MP_MADD16 / MP_APAIR_P: here the text is built in
  // its portable forms (KernelTarget::helper_forms) whatever this device's compiler targets and
  // run by hand (weights A, packed pairs), and the other layouts' portable texts are compiled.
  Device& dev = DefaultDevice();
  if (dev.backend() != Backend::kOpenCL) GTEST_SKIP() << "kp = 2 needs an OpenCL device";
  GemmConfig c;
  c.kp = 2;
  KernelTarget target = KernelTarget::Of(dev);
  target.helper_forms = KernelTarget::HelperForms::kPortable;
  auto portable = [&](const GemmDesc& d) {
    const std::string src = Gemm::Source(target, d, c);
    EXPECT_NE(src.find("#define MP_PORTABLE_FORMS"), std::string::npos);
    ProgramHints hints;
    hints.local_sizes = {{1, 1, 1}};
    return dev.GetProgram(src, "", hints);
  };
  GemmDesc d;
  d.type = d.out_type = DataType::kInt8Q;
  d.M = 13;
  d.N = 130;  // 9 column tiles: A packed into pairs
  d.K = 29;
  d.weights = WeightOperand::kA;
  for (bool wb : {false, true}) {  // compile only: weights B (A's pairs from bytes), signed
    GemmDesc o = d;
    o.weights = wb ? WeightOperand::kB : WeightOperand::kA;
    o.trans_a = !wb;
    o.weights_signed = true;
    o.weight_zero = false;
    EXPECT_NO_THROW(portable(o)->GetKernel(Gemm::KernelName(o))) << o.ToString();
  }
  Problem p = MakeProblem(d, 99);
  const std::vector<uint8_t> want = RunReference(p);
  auto program = portable(d);
  auto upload = [&](const void* data, size_t bytes) {
    vptr<uint8_t> buf = dev.Alloc<uint8_t>(std::max<size_t>(bytes, 1));
    dev.Write(buf, static_cast<const uint8_t*>(data), bytes);
    return buf;
  };
  std::vector<int32_t> wsum(d.M);
  WeightSumsReference(d, p.a.data(), wsum.data());
  const int32_t mult = p.quant.multiplier[0].multiplier, shift = p.quant.multiplier[0].shift;
  vptr<uint8_t> a = upload(p.a.data(), p.a.size()), b = upload(p.b.data(), p.b.size()),
                cbuf = upload(p.c.data(), p.c.size()), sums = upload(wsum.data(), 4 * d.M),
                mb = upload(&mult, 4), sb = upload(&shift, 4),
                apk = dev.Alloc<uint8_t>(4 * d.M * (d.K / 2));
  Kernel pack = program->GetKernel(Gemm::KernelName(d) + "_apack");
  pack.Arg(int32_t(d.M)).Arg(int32_t(d.K)).Arg(a).Arg(int32_t(d.K)).Arg(p.quant.w_zero).Arg(apk);
  pack.Launch1D(size_t(d.M) * (d.K / 2));
  Kernel k = program->GetKernel(Gemm::KernelName(d));
  k.Arg(int32_t(d.M)).Arg(int32_t(d.N)).Arg(int32_t(d.K)).Arg(a).Arg(int32_t(d.K)).Arg(b);
  k.Arg(int32_t(d.N)).Arg(cbuf).Arg(int32_t(d.N)).Arg(sums).Arg(mb).Arg(sb);
  k.Arg(p.quant.x_zero).Arg(p.quant.w_zero).Arg(p.quant.c_zero).Arg(apk);
  const size_t n_tiles = (d.N + c.cols_per_item() - 1) / c.cols_per_item();
  const size_t m_tiles = (d.M + c.tm - 1) / c.tm;
  k.Launch({n_tiles, m_tiles, 1}, {1, 1, 1}).Wait();
  std::vector<uint8_t> got(p.c.size());
  dev.Read(cbuf, got.data(), got.size());
  ExpectSame(p, got, want, "portable pair forms");
}

TEST(GemmPairTest, SupportedOnlyForInt8WithVectorsOf8OnEitherBackend) {
  GemmDesc d;
  d.type = d.out_type = DataType::kInt8Q;
  d.M = d.N = d.K = 8;
  GemmConfig c;
  c.kp = 2;
  c.vw = 8;
  EXPECT_TRUE(c.Supports(d, Backend::kOpenCL));
  EXPECT_TRUE(c.Supports(d, Backend::kCuda));  // KernelHelper::kPairProduct16's CUDA row
  c.vw = 4;
  EXPECT_FALSE(c.Supports(d, Backend::kOpenCL));
  EXPECT_FALSE(c.Supports(d, Backend::kCuda));
  c.vw = 8;
  // The dot tile's 16 k per step (DotPairProductsMatchTheReferenceExactly), without a local tile.
  c.algorithm = GemmConfig::Algorithm::kDot;
  d.trans_b = true;
  EXPECT_TRUE(c.Supports(d, Backend::kOpenCL));
  EXPECT_TRUE(c.Supports(d, Backend::kCuda));
  c.lm = 1;
  EXPECT_FALSE(c.Supports(d, Backend::kOpenCL));
  c.lm = 0;
  c.algorithm = GemmConfig::Algorithm::kOuter;
  d.type = d.out_type = DataType::kInt16Q;
  EXPECT_FALSE(c.Supports(d, Backend::kOpenCL));
}

}  // namespace
}  // namespace mpcaffe::libdnn

namespace mpcaffe::libdnn {
namespace {

// Run by hand (--gtest_also_run_disabled_tests --gtest_filter='*LocalMemoryVersusDefault*'):
// the device default against lm = 1 tiles on AlexNet's conv1 and conv3 GEMMs (weights A,
// batch 1), fp32 and int8, alternating the configurations each round so load on the machine
// hits them alike; prints median milliseconds and GOP/s.

/// The benchmarks' timing: one warm-up run of each GEMM (PoCL specializes at launch), then
/// `rounds` rounds running each in turn (so load changes hit all alike); ms per run, per GEMM.
std::vector<std::vector<double>> TimeRounds(std::vector<Gemm>& gemms, GemmOperands& ops,
                                            int rounds) {
  std::vector<std::vector<double>> ms(gemms.size());
  for (Gemm& g : gemms) g.Run(ops.args()).Wait();
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
      GemmOperands ops(dev, d);
      const GemmQuant quant = PlaceholderQuant(d);
      std::vector<Gemm> gemms;
      for (const GemmConfig& c : configs) gemms.emplace_back(dev, d, quant, c);
      std::vector<std::vector<double>> ms = TimeRounds(gemms, ops, rounds);
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
    GemmOperands ops(dev, d);
    const GemmQuant quant = PlaceholderQuant(d);
    std::vector<Gemm> gemms;
    for (const GemmConfig& c : configs) gemms.emplace_back(dev, d, quant, c);
    std::vector<std::vector<double>> ms = TimeRounds(gemms, ops, rounds);
    const double gop = 2.0 * d.M * d.N * d.K * 1e-6;
    std::printf("int8 M=%d N=%d K=%d on %s\n", d.M, d.N, d.K, dev.Describe().c_str());
    for (size_t i = 0; i < configs.size(); ++i) {
      std::sort(ms[i].begin(), ms[i].end());
      const double med = ms[i][ms[i].size() / 2];
      std::printf("  %-48s %s median %8.3f ms  %7.1f GOP/s\n", configs[i].ToString().c_str(),
                  gemms[i].native_dot4() ? "dot4" : "    ", med, gop / med);
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
    GemmOperands ops(dev, d);
    const GemmQuant quant = PlaceholderQuant(d);
    std::vector<Gemm> gemms;
    for (const GemmConfig& c : configs) gemms.emplace_back(dev, d, quant, c);
    std::vector<std::vector<double>> ms = TimeRounds(gemms, ops, rounds);
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

// tests/libdnn/gemm_int4_test.cc — GEMMs with 4-bit weights (GemmDesc::weight_bits = 4, int8w4)
// on the default device: bit-exact against the host reference of the packed weights and against
// the int8 GEMM on the unpacked weights, in both layouts the layers use (weights A, convolution;
// weights B transposed, inner product incl. the batch-1 matrix × vector), at the extreme values
// (activations 255, weights −8 and 7, long K), every tuner candidate, and the description checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "codegen/kernel_writer.h"
#include "device/error.h"
#include "libdnn/gemm.h"
#include "libdnn/tuner.h"
#include "quant/fixed_point.h"
#include "quant/int4.h"
#include "tests/testing/host_isa_levels.h"
#include "tests/testing/sweep.h"

namespace mpcaffe::libdnn {
namespace {

using Bytes = std::vector<uint8_t>;

/// One int8w4 problem: activations, the weights both unpacked (int8) and packed, and its
/// quantization.
struct Problem4 {
  GemmDesc desc;  // weight_bits 4
  GemmQuant quant;
  Bytes act;                 // uint8 activations as stored
  std::vector<int8_t> w8;    // channels × K
  Bytes w4;                  // channels × Int4RowBytes(K)
  Bytes bias;                // int32 per channel
};

GemmDesc Desc4(int M, int N, int K, WeightOperand w, int variant) {
  GemmDesc d;
  d.type = DataType::kInt8Q;
  d.out_type = variant % 3 == 2 ? DataType::kFloat32 : DataType::kInt8Q;
  d.M = M, d.N = N, d.K = K;
  d.weights = w;
  d.trans_a = false;
  d.trans_b = w == WeightOperand::kB;  // K contiguous per channel
  d.weights_signed = true;
  d.weight_zero = false;
  d.per_channel = variant % 2 == 0;
  d.bias = variant % 4 != 1;
  d.relu = variant % 4 == 2;
  d.weight_bits = 4;
  return d;
}

/// Random data; `extreme` makes every activation 255 and every weight −8 or 7.
Problem4 Make(const GemmDesc& d, uint32_t seed, bool extreme = false) {
  std::mt19937 rng(seed);
  Problem4 p;
  p.desc = d;
  const size_t ch = size_t(d.channels()), k = size_t(d.K);
  const size_t acts = size_t(d.weights == WeightOperand::kA ? d.N : d.M) * k;
  std::uniform_int_distribution<int> u8(0, 255), w4(quant::kInt4Min, quant::kInt4Max), b(0, 1);
  p.act.resize(acts);
  for (auto& v : p.act) v = uint8_t(extreme ? 255 : u8(rng));
  p.w8.resize(ch * k);
  for (auto& v : p.w8) v = int8_t(extreme ? (b(rng) ? quant::kInt4Max : quant::kInt4Min) : w4(rng));
  p.w4.resize(ch * quant::Int4RowBytes(k));
  quant::PackInt4(p.w8.data(), ch, k, p.w4.data());
  p.quant.x_zero = extreme ? 0 : u8(rng);
  p.quant.c_zero = u8(rng);
  // Map the accumulator's typical size onto a fraction of the output range.
  const double typical = std::sqrt(double(k)) * 74.0 * 4.6 + 1.0;
  const int n = d.per_channel ? int(ch) : 1;
  std::uniform_real_distribution<double> jitter(0.5, 2.0);
  for (int i = 0; i < n; ++i) {
    const double m = 60.0 / typical * jitter(rng);
    p.quant.multiplier.push_back(quant::QuantizeMultiplier(m));
    p.quant.scale.push_back(extreme ? 1.0f : float(m));
  }
  if (d.bias) {
    p.bias.resize(ch * 4);
    std::uniform_int_distribution<int32_t> bb(-int32_t(typical), int32_t(typical));
    for (size_t i = 0; i < ch; ++i) {
      const int32_t v = bb(rng);
      std::memcpy(p.bias.data() + 4 * i, &v, 4);
    }
  }
  return p;
}

Bytes OutputBytes(const GemmDesc& d) { return Bytes(size_t(d.M) * d.N * SizeOf(d.out_type), 0); }

/// The int8 description of the same GEMM (weights as int8 bytes).
GemmDesc As8(GemmDesc d) {
  d.weight_bits = 8;
  return d;
}

Bytes Reference(const Problem4& p, bool packed) {
  Bytes out = OutputBytes(p.desc);
  const bool wa = p.desc.weights == WeightOperand::kA;
  const void* w = packed ? static_cast<const void*>(p.w4.data()) : p.w8.data();
  const GemmDesc d = packed ? p.desc : As8(p.desc);
  GemmReference(d, p.quant, wa ? w : p.act.data(), wa ? p.act.data() : w, out.data(), 1.0f, 0.0f,
                p.bias.empty() ? nullptr : p.bias.data());
  return out;
}

/// Runs the GEMM on the device (the weights packed when d.weight_bits is 4); checks its weight
/// sums against the reference's; returns C.
Bytes RunGemm(Device& dev, const GemmDesc& d, const Problem4& p, const GemmConfig* config) {
  auto upload = [&](const void* data, size_t bytes) {
    vptr<uint8_t> buf = dev.Alloc<uint8_t>(std::max<size_t>(bytes, 4));
    dev.Write(buf, static_cast<const uint8_t*>(data), bytes);
    return buf;
  };
  const bool wa = d.weights == WeightOperand::kA;
  const bool packed = d.weight_bits == 4;
  vptr<uint8_t> w = packed ? upload(p.w4.data(), p.w4.size()) : upload(p.w8.data(), p.w8.size());
  vptr<uint8_t> x = upload(p.act.data(), p.act.size());
  Bytes out = OutputBytes(d);
  vptr<uint8_t> c = upload(out.data(), out.size());
  vptr<uint8_t> bias = upload(p.bias.data(), p.bias.size());
  vptr<uint8_t> sums = dev.Alloc<uint8_t>(size_t(d.channels()) * 4);
  Gemm gemm = config ? Gemm(dev, d, p.quant, *config) : Gemm(dev, d, p.quant);
  gemm.ComputeWeightSums(w, sums);
  std::vector<int32_t> want(d.channels()), got(d.channels());
  WeightSumsReference(d, packed ? static_cast<const void*>(p.w4.data()) : p.w8.data(), want.data());
  dev.Read(sums, reinterpret_cast<uint8_t*>(got.data()), got.size() * 4);
  EXPECT_EQ(got, want) << "weight sums of " << d.ToString();
  GemmArgs args;
  args.a = wa ? w : x;
  args.b = wa ? x : w;
  args.c = c;
  if (d.bias) args.bias = bias;
  args.weight_sums = sums;
  gemm.Run(args).Wait();
  dev.Read(c, out.data(), out.size());
  return out;
}

size_t Mismatches(const Bytes& got, const Bytes& want) {
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) bad += got[i] != want[i];
  return bad;
}

struct Shape {
  int M, N, K;
};

TEST(GemmInt4, MatchesTheReferenceAndTheInt8GemmInBothLayouts) {
  Device& dev = DefaultDevice();
  // Convolution-like (weights A: out_channels × K, columns K × pixels) and inner-product-like
  // (weights B transposed: N × K) shapes, odd K, the batch-1 matrix × vector.
  const std::vector<Shape> shapes = {{1, 1, 1},     {7, 13, 3},    {20, 64, 25},  {33, 17, 129},
                                     {1, 300, 257}, {16, 100, 96}, {96, 45, 363}, {4, 3, 1000}};
  // The int8 GEMM on the same weights (a program per shape and layout) for every other shape,
  // every shape under the exhaustive sweep.
  int variant = 0;
  for (const Shape& s : shapes)
    for (WeightOperand w : {WeightOperand::kA, WeightOperand::kB}) {
      const GemmDesc d = Desc4(s.M, s.N, s.K, w, variant % 4);
      SCOPED_TRACE(d.ToString());
      const bool with_int8 = test_support::ExhaustiveSweep() || (variant / 2) % 2 == 0;
      const Problem4 p = Make(d, 40 + variant++);
      const Bytes ref = Reference(p, true);
      EXPECT_EQ(Mismatches(Reference(p, false), ref), 0u) << "references of packed and unpacked";
      EXPECT_EQ(Mismatches(RunGemm(dev, d, p, nullptr), ref), 0u) << "int8w4 GEMM";
      if (with_int8) {
        EXPECT_EQ(Mismatches(RunGemm(dev, As8(d), p, nullptr), ref), 0u)
            << "int8 GEMM, same weights";
      }
    }
}

TEST(GemmInt4, ExtremeValuesAreExactOverLongK) {
  Device& dev = DefaultDevice();
  // Activations 255 and weights −8 / 7 (x_zero 0): |acc| up to 255·8·K. Dequantized with scale
  // 1 the fp32 output is the accumulator itself (exact below 2^24: K ≤ 8224); the int8 output
  // checks the requantization of the same sums.
  for (const Shape& s : {Shape{3, 5, 8191}, Shape{1, 9, 4096}, Shape{64, 1, 4097}}) {
    for (WeightOperand w : {WeightOperand::kA, WeightOperand::kB}) {
      for (int variant : {2, 0}) {  // fp32 out (scale 1), int8 out
        GemmDesc d = Desc4(s.M, s.N, s.K, w, variant);
        d.bias = false;
        d.relu = false;
        SCOPED_TRACE(d.ToString());
        Problem4 p = Make(d, 7 + s.K, true);
        const Bytes ref = Reference(p, true);
        EXPECT_EQ(Mismatches(RunGemm(dev, d, p, nullptr), ref), 0u);
        if (d.out_type == DataType::kFloat32) {
          // The first output is Σ 255·w exactly.
          int64_t want = 0;
          for (int k = 0; k < d.K; ++k) want += 255 * p.w8[k];
          float got;
          std::memcpy(&got, ref.data(), 4);
          EXPECT_EQ(int64_t(got), want);
        }
      }
    }
  }
}

TEST(GemmInt4, EveryTunerCandidateMatchesTheReference) {
  Device& dev = DefaultDevice();
  for (WeightOperand w : {WeightOperand::kA, WeightOperand::kB}) {
    const GemmDesc d = Desc4(w == WeightOperand::kA ? 24 : 5, 37, 301, w, 0);
    const Problem4 p = Make(d, 99);
    const Bytes ref = Reference(p, true);
    // Each candidate is a compile of its own and the list has dozens: a covering sample of
    // them (every value of every field, the default first), all under make test-sweep.
    const std::vector<GemmConfig> all =
        test_support::SampleOf(GemmConfig::Schema(), GemmCandidates(dev.info(), d));
    int runs = 0;
    for (const GemmConfig& c : all) {
      if (!c.Supports(d, dev.backend())) continue;
      SCOPED_TRACE(d.ToString() + " config " + c.ToString());
      EXPECT_EQ(Mismatches(RunGemm(dev, d, p, &c), ref), 0u);
      ++runs;
    }
    EXPECT_GT(runs, 0) << d.ToString() << ": no candidate ran";
  }
}

// The byte-pair (kU8S4) candidates for `d`: the device's own where its tuner times them (CPU
// runtimes, CUDA), else those an OpenCL CPU runtime's profile gives (a device with lane defaults,
// e.g. llvmpipe, does not time them, but its compiler must still run every kernel the format
// has: MPCAFFE_KERNEL_CONFIG can ask for one).
std::vector<GemmConfig> BytePairCandidates(const Device& dev, const GemmDesc& d) {
  auto byte_pairs = [&d](const DeviceInfo& info) {
    std::vector<GemmConfig> out;
    for (const GemmConfig& c : GemmCandidates(info, d))
      if (c.kp == GemmConfig::kU8S4) out.push_back(c);
    return out;
  };
  std::vector<GemmConfig> own = byte_pairs(dev.info());
  if (!own.empty() || TimesPairProductTiles(dev.info())) return own;
  DeviceInfo cpu_runtime = dev.info();
  cpu_runtime.is_gpu = cpu_runtime.work_items_in_simd_lanes = false;
  return byte_pairs(cpu_runtime);
}

TEST(GemmInt4, WeightsAWithTransposedActivations) {
  // Weights A and B given as N × K (trans_b): the outer kernel packs its activation words from
  // B's rows; the dot product along K serves only a matrix × vector (one activation row).
  Device& dev = DefaultDevice();
  for (int n : {45, 1}) {
    GemmDesc d = Desc4(24, n, 301, WeightOperand::kA, 0);
    d.trans_b = true;
    SCOPED_TRACE(d.ToString());
    const Problem4 p = Make(d, 5 + n);
    const Bytes ref = Reference(p, true);
    std::vector<GemmConfig::Algorithm> algorithms;
    for (const GemmConfig& c : BytePairCandidates(dev, d)) {
      if (std::find(algorithms.begin(), algorithms.end(), c.algorithm) != algorithms.end())
        continue;
      algorithms.push_back(c.algorithm);
      SCOPED_TRACE("config " + c.ToString());
      EXPECT_EQ(Mismatches(RunGemm(dev, d, p, &c), ref), 0u);
    }
    EXPECT_EQ(algorithms.size(), n == 1 ? 2u : 1u) << "byte-pair algorithms among the candidates";
  }
}

// The int8 kernels on 4-bit weights: ComputeWeightSums unpacks its weights once and the runs on
// that buffer take the kept bytes; a run on other weights unpacks those (both exact).
TEST(GemmInt4, Int8KernelsKeepTheUnpackedWeightsOfTheirBuffer) {
  Device& dev = DefaultDevice();
  const GemmDesc d = Desc4(5, 37, 301, WeightOperand::kB, 0);
  GemmConfig int8_tile;
  int8_tile.algorithm = GemmConfig::Algorithm::kDot;
  int8_tile.tm = 4, int8_tile.tn = 2, int8_tile.vw = 8, int8_tile.wg = 1;
  int8_tile.kp = GemmConfig::kPairs;
  ASSERT_TRUE(int8_tile.Supports(d, dev.backend()));
  const Problem4 p1 = Make(d, 41), p2 = Make(d, 43);
  auto upload = [&](const std::vector<uint8_t>& bytes) {
    vptr<uint8_t> buf = dev.Alloc<uint8_t>(std::max<size_t>(bytes.size(), 4));
    dev.Write(buf, bytes.data(), bytes.size());
    return buf;
  };
  auto as_bytes = [](const auto& v) {
    const auto* b = reinterpret_cast<const uint8_t*>(v.data());
    return std::vector<uint8_t>(b, b + v.size() * sizeof(v[0]));
  };
  Gemm gemm(dev, d, p1.quant, int8_tile);
  const vptr<uint8_t> w1 = upload(as_bytes(p1.w4)), w2 = upload(as_bytes(p2.w4));
  const vptr<uint8_t> s1 = dev.Alloc<uint8_t>(size_t(d.N) * 4);
  gemm.ComputeWeightSums(w1, s1);
  std::vector<int32_t> sums2(d.N);
  WeightSumsReference(d, p2.w4.data(), sums2.data());
  const vptr<uint8_t> s2 = upload(as_bytes(sums2));
  const vptr<uint8_t> x = upload(as_bytes(p1.act)), bias = upload(as_bytes(p1.bias));
  for (const auto& [w, sums, p] : {std::tuple{w1, s1, &p1}, {w2, s2, &p2}, {w1, s1, &p1}}) {
    Bytes out = OutputBytes(d);
    const vptr<uint8_t> c = upload(out);
    GemmArgs args;
    args.a = x, args.b = w, args.c = c, args.bias = bias, args.weight_sums = sums;
    gemm.Run(args).Wait();
    dev.Read(c, out.data(), out.size());
    Problem4 q = p1;  // these weights with p1's activations, bias and quantization
    q.w4 = p->w4, q.w8 = p->w8;
    EXPECT_EQ(Mismatches(out, Reference(q, true)), 0u);
  }
}

// The quad dot tiles (vw = 16: 64 k per byte quad product, the weights' 32 bytes of a block
// unpacked in registers) against the reference on this device, in the form its compiler takes
// (vpdpbusd where it runs VNNI in a helper, else the portable quads) and in the portable form:
// K of whole blocks, of a short last block and odd, extreme and random values, weights B with
// one and several activation rows (edge tiles in M and N) and weights A with one column.
void CheckQuadDotTiles(Device& dev) {
  struct Case {
    int M, N, K;
    WeightOperand w;
    int variant, tm, tn;
  };
  const std::vector<Case> cases = {{1, 7, 301, WeightOperand::kB, 0, 1, 4},
                                   {1, 6, 333, WeightOperand::kB, 1, 1, 1},  // one-row default
                                   {6, 5, 128, WeightOperand::kB, 2, 4, 2},
                                   {3, 9, 77, WeightOperand::kB, 1, 4, 2},
                                   {5, 9, 200, WeightOperand::kB, 0, 4, 4},
                                   {9, 1, 301, WeightOperand::kA, 0, 4, 1}};
  for (const Case& t : cases) {
    const GemmDesc d = Desc4(t.M, t.N, t.K, t.w, t.variant);
    GemmConfig c;
    c.algorithm = GemmConfig::Algorithm::kDot;
    c.tm = t.tm, c.tn = t.tn, c.vw = 16, c.wg = 1, c.kp = GemmConfig::kU8S4;
    ASSERT_TRUE(c.Supports(d, dev.backend())) << d.ToString() << " " << c.ToString();
    SCOPED_TRACE(d.ToString() + " config " + c.ToString());
    for (bool extreme : {false, true}) {
      const Problem4 p = Make(d, 31 + t.K, extreme);
      EXPECT_EQ(Mismatches(RunGemm(dev, d, p, &c), Reference(p, true)), 0u);
    }
  }
}

TEST(GemmInt4, QuadDotTilesMatchTheReference) { CheckQuadDotTiles(DefaultDevice()); }

TEST(GemmInt4, PortableQuadDotTilesMatchTheReference) {
  Device& dev = DefaultDevice();
  MPCAFFE_RUN_IN_PORTABLE_FORMS(dev);
  CheckQuadDotTiles(dev);
}

// The byte pair products in their portable form (MPCAFFE_ISA=generic: KernelTarget::helper_forms
// kPortable, the form of every compiler that targets no x86), on this device whatever its
// compiler targets: both layouts, each byte-pair algorithm, extreme values over a K of many
// 16-bit steps.
TEST(GemmInt4, PortableBytePairFormsMatchTheReference) {
  Device& dev = DefaultDevice();
  MPCAFFE_RUN_IN_PORTABLE_FORMS(dev);
  int ran = 0;
  for (WeightOperand w : {WeightOperand::kA, WeightOperand::kB}) {
    const GemmDesc d = Desc4(w == WeightOperand::kA ? 9 : 1, w == WeightOperand::kA ? 1 : 7, 301,
                             w, 2);
    SCOPED_TRACE(d.ToString());
    const Problem4 p = Make(d, 11, true);
    const Bytes ref = Reference(p, true);
    std::vector<GemmConfig::Algorithm> algorithms;
    for (const GemmConfig& c : BytePairCandidates(dev, d)) {
      if (!c.Supports(d, dev.backend()) ||
          std::find(algorithms.begin(), algorithms.end(), c.algorithm) != algorithms.end())
        continue;
      algorithms.push_back(c.algorithm);
      const std::string text = Gemm::Source(KernelTarget::Of(dev), d, c);
      ASSERT_NE(text.find("#define MP_PORTABLE_FORMS"), std::string::npos);
      ASSERT_NE(text.find("MP_MADDUBS("), std::string::npos) << c.ToString();
      SCOPED_TRACE("config " + c.ToString());
      EXPECT_EQ(Mismatches(RunGemm(dev, d, p, &c), ref), 0u);
      ++ran;
    }
  }
  EXPECT_GE(ran, 2) << "byte-pair configurations run in the portable form";
}

TEST(GemmInt4, DescriptionsTheFormatCannotServeAreRejected) {
  auto expect_error = [](GemmDesc d, const std::string& words) {
    try {
      d.Validate();
      ADD_FAILURE() << "accepted: " << d.ToString();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  const GemmDesc ok = Desc4(8, 9, 10, WeightOperand::kB, 0);
  EXPECT_NO_THROW(ok.Validate());
  EXPECT_NO_THROW(Desc4(8, 9, 10, WeightOperand::kA, 0).Validate());
  GemmDesc d = ok;
  d.weight_bits = 2;
  expect_error(d, "weight_bits must be 8 or 4");
  d = ok;
  d.type = d.out_type = DataType::kInt16Q;
  expect_error(d, "need type int8q");
  d = ok;
  d.weights_signed = false;
  d.weight_zero = true;
  expect_error(d, "signed");
  d = ok;
  d.weight_zero = true;
  expect_error(d, "symmetric");
  d = ok;
  d.trans_b = false;
  expect_error(d, "weights B not transposed");
  d = Desc4(8, 9, 10, WeightOperand::kA, 0);
  d.trans_a = true;
  expect_error(d, "weights A transposed");
  d = ok;
  d.ldb = 12;
  expect_error(d, "ldb of packed 4-bit weights");
  EXPECT_EQ(ok.weight_bytes(), 9u * 5u);
  EXPECT_EQ(Desc4(8, 9, 11, WeightOperand::kA, 0).weight_bytes(), 8u * 6u);
}

}  // namespace
}  // namespace mpcaffe::libdnn

namespace mpcaffe::libdnn {
namespace {

/// Side-by-side timing on AlexNet's shapes (`mpcaffe bench gemm`'s five, weights A, B K×N; then
/// its inner products): int8 (unsigned weights with a zero point, the bench's int8) against
/// int8w4, alternating,
/// medians of GEMM_INT4_ROUNDS (default 5) rounds; GEMM_INT4_SHAPES=i,j (0-9) times only those
/// shapes. Run by hand:
///   MPCAFFE_DEVICE=1 build/bin/test_libdnn --gtest_also_run_disabled_tests
///     --gtest_filter=GemmInt4Bench.DISABLED_AlexNetShapes  (one command line)
TEST(GemmInt4Bench, DISABLED_AlexNetShapes) {
  Device& dev = DefaultDevice();
  const int rounds = std::getenv("GEMM_INT4_ROUNDS") ? std::atoi(std::getenv("GEMM_INT4_ROUNDS")) : 5;
  // 5-7: AlexNet's inner products at batch 1 as the net runs them (weights B, transposed);
  // 8-9: fc6 at batch 10 and fc7 at batch 4.
  const std::vector<Shape> shapes = {{96, 3025, 363}, {256, 729, 1200}, {384, 169, 2304},
                                     {4096, 64, 9216}, {4096, 1, 9216}, {1, 4096, 9216},
                                     {1, 4096, 4096},  {1, 1000, 4096}, {10, 4096, 9216},
                                     {4, 4096, 4096}};
  std::vector<bool> wanted(shapes.size(), !std::getenv("GEMM_INT4_SHAPES"));
  if (const char* only = std::getenv("GEMM_INT4_SHAPES"))
    for (const char* p = only; *p; ++p)
      if (*p >= '0' && *p < char('0' + shapes.size())) wanted[size_t(*p - '0')] = true;
  double log_sum = 0;
  int timed = 0;
  for (size_t si = 0; si < shapes.size(); ++si) {
    if (!wanted[si]) continue;
    ++timed;
    const Shape& s = shapes[si];
    GemmDesc d8;
    d8.type = d8.out_type = DataType::kInt8Q;
    d8.M = s.M, d8.N = s.N, d8.K = s.K;
    d8.weights = si >= 5 ? WeightOperand::kB : WeightOperand::kA;
    d8.trans_b = si >= 5;
    GemmDesc d4 = d8;
    d4.weights_signed = true;
    d4.weight_zero = false;
    d4.weight_bits = 4;
    GemmOperands o8(dev, d8), o4(dev, d4);
    Gemm g8(dev, d8, PlaceholderQuant(d8)), g4(dev, d4, PlaceholderQuant(d4));
    o8.PrepareWeights(g8);
    o4.PrepareWeights(g4);
    std::vector<double> t8, t4;
    TimeMs([&] { return g8.Run(o8.args()); }, 1);
    TimeMs([&] { return g4.Run(o4.args()); }, 1);
    for (int r = 0; r < rounds; ++r) {
      t8.push_back(TimeMs([&] { return g8.Run(o8.args()); }, 1));
      t4.push_back(TimeMs([&] { return g4.Run(o4.args()); }, 1));
    }
    std::sort(t8.begin(), t8.end());
    std::sort(t4.begin(), t4.end());
    const double m8 = t8[t8.size() / 2], m4 = t4[t4.size() / 2];
    log_sum += std::log(m8 / m4);
    std::printf("%5d x %5d x %5d  int8 %8.3f ms (min %.3f, %s)  int8w4 %8.3f ms (min %.3f, %s)"
                "  int8/int8w4 %.2f\n",
                s.M, s.N, s.K, m8, t8.front(), g8.config().ToString().c_str(), m4, t4.front(),
                g4.config().ToString().c_str(), m8 / m4);
    // GEMM_INT4_CANDIDATES=1: every byte-pair candidate of the shape, all timed once per round
    // in turn (so load changes hit them alike), the medians of `rounds` rounds.
    if (std::getenv("GEMM_INT4_CANDIDATES")) {
      std::vector<GemmConfig> configs;
      std::vector<std::unique_ptr<Gemm>> gemms;
      for (const GemmConfig& c : GemmCandidates(dev.info(), d4)) {
        if (c.kp != GemmConfig::kU8S4) continue;
        configs.push_back(c);
        gemms.push_back(std::make_unique<Gemm>(dev, d4, PlaceholderQuant(d4), c));
        o4.PrepareWeights(*gemms.back());
        TimeMs([&] { return gemms.back()->Run(o4.args()); }, 1);
      }
      std::vector<std::vector<double>> times(gemms.size());
      for (int r = 0; r < rounds; ++r)
        for (size_t i = 0; i < gemms.size(); ++i)
          times[i].push_back(TimeMs([&] { return gemms[i]->Run(o4.args()); }, 1));
      for (size_t i = 0; i < gemms.size(); ++i) {
        std::sort(times[i].begin(), times[i].end());
        std::printf("    %-50s %8.3f ms\n", configs[i].ToString().c_str(),
                    times[i][times[i].size() / 2]);
      }
    }
  }
  std::printf("geometric mean int8 time / int8w4 time: %.2f (%d shapes, %d rounds, %s)\n",
              std::exp(log_sum / std::max(timed, 1)), timed, rounds, dev.Describe().c_str());
}

}  // namespace
}  // namespace mpcaffe::libdnn

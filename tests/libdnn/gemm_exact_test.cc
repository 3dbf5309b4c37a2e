// tests/libdnn/gemm_exact_test.cc — the GEMM's exact integer forms against the host reference,
// byte for byte: int8 pair products along K (packed pairs, odd K, every transpose and weight
// operand), dot pairs, int16 split pairs, byte quads (dot and outer tiles), four-K dot products
// (native where the device has them, portable forms otherwise), weight zero points outside the
// storage range, and which configurations each backend supports.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "codegen/kernel_writer.h"
#include "codegen/vector_words.h"
#include "libdnn/gemm.h"
#include "libdnn/gemm_internal.h"
#include "libdnn/tuner.h"
#include "tests/libdnn/gemm_check.h"

namespace mpcaffe::libdnn {
namespace {

using namespace gemm_check;  // NOLINT: the GEMM tests' shared vocabulary

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

/// `d` with configuration `c` on every shape (row strides padded when `padded`), bit for bit
/// against the reference; the problems' seeds are seed_base + (*count)++. `d` keeps the last
/// shape.
void ExpectShapesExact(Device& dev, GemmDesc& d, const GemmConfig& c,
                       const std::vector<Shape>& shapes, bool padded, uint32_t seed_base,
                       int* count) {
  for (const Shape& s : shapes) {
    SetShape(d, s, padded);
    Problem p = MakeProblem(d, seed_base + (*count)++);
    ExpectSame(p, RunOnDevice(dev, p, &c), RunReference(p), c.ToString());
  }
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
        ExpectShapesExact(dev, d, c, shapes, /*padded=*/layout == 1, 500, &seed);
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

/// The int16q split pairs in the dot tile on `configs` (kp = 2) against the reference: `shapes`,
/// then every operand at the extremes of its range on {3, 2, extreme_k}, where a partial sum one
/// step longer than the flush would overflow.
void ExpectInt16SplitExact(Device& dev, const std::vector<GemmConfig>& configs,
                           const std::vector<Shape>& shapes, int extreme_k) {
  const std::vector<GemmDesc> descs = DotPairDescs(DataType::kInt16Q);
  ExpectDescsExact(dev, descs, configs, shapes, 2100, /*sweep=*/true, /*matrix_vector=*/true);
  for (size_t v = 0; v < descs.size(); ++v)
    for (uint16_t wv : {uint16_t{0}, uint16_t{0xffff}, uint16_t{0x8000}, uint16_t{0x7fff}}) {
      GemmDesc d = descs[v];
      SetShape(d, {3, 2, extreme_k}, /*padded=*/false);
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

TEST(GemmPairTest, Int16SplitPairsMatchTheReferenceExactly) {
  // kp = 2 in the int16q dot tile (activations split into bytes, weights held as w − 32768 or
  // signed), 8 lanes: K below, at and past one 16-k step, its unrolled pair and the 127-step
  // flush of the int32 partial sums (K = 2032, 2033, 4100), edge tiles in M and N, the inner
  // product's layout (unsigned weights B with a zero point; signed weights without), matrix ×
  // vector (weights A), then every operand at the extremes of its range.
  Device& dev = DefaultDevice();
  const std::vector<GemmConfig> configs = DotPairConfigs();
  for (const GemmConfig& c : configs)
    if (!c.Supports(DotPairDescs(DataType::kInt16Q)[0], dev.backend()))
      GTEST_SKIP() << "kp = 2 needs vectors of 8";
  ExpectInt16SplitExact(dev, configs,
                        {{1, 1, 1},
                         {7, 19, 15},
                         {13, 16, 16},
                         {6, 33, 17},
                         {9, 8, 33},
                         {5, 30, 47},
                         {3, 5, 2032},
                         {2, 3, 2033},
                         {3, 2, 4100}},
                        4100);
}

TEST(GemmPairTest, Int16SplitPairsInSixteenLanesMatchTheReferenceExactly) {
  // The same in 16 lanes (vw = 16: 32 k per step in the byte quads' helper function, VNNI's
  // vpdpwssd where the device compiles it there, the portable form elsewhere): K below, at and
  // past a step, a last half step of 16 k (K mod 32 from 16), the unrolled pair, the flush
  // after 127 steps (K = 4064) and the half step at its end (4080: the largest partial sum),
  // and the extremes at K = 4080 and 4100.
  Device& dev = DefaultDevice();
  std::vector<GemmConfig> configs = DotPairConfigs();
  for (GemmConfig& c : configs) c.vw = 16;
  ExpectInt16SplitExact(dev, configs,
                        {{1, 1, 1},
                         {7, 19, 15},
                         {13, 16, 16},
                         {6, 33, 31},
                         {9, 8, 32},
                         {5, 30, 47},
                         {4, 7, 48},
                         {3, 5, 79},
                         {2, 3, 4064},
                         {3, 2, 4080},
                         {2, 2, 4100}},
                        4080);
  ExpectInt16SplitExact(dev, {configs[0], configs[0], configs[0]}, {{3, 5, 784}}, 4100);
  const bool vnni = KernelTarget::Of(dev).byte_quads_in_helper && dev.backend() == Backend::kOpenCL;
  GemmDesc d = DotPairDescs(DataType::kInt16Q)[0];
  SetShape(d, {3, 2, 64}, false);
  const Gemm g(dev, d, MakeProblem(d, 1).quant, configs[0]);
  EXPECT_EQ(g.source().find("#define MP_BYTE_QUADS_VNNI") != std::string::npos, vnni);
  EXPECT_NE(g.source().find("MP_DPWSSD16("), std::string::npos);
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
  // The first: the batch-1 inner product's default where the quads run in a helper.
  for (auto [tm, tn, ku] : {std::tuple{1, 1, 2}, std::tuple{2, 3, 2}, std::tuple{4, 1, 1}}) {
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
        ExpectShapesExact(dev, d, c, shapes, /*padded=*/layout == 1, 900, &seed);
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

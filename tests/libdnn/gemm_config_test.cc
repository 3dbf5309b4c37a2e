// tests/libdnn/gemm_config_test.cc — GemmConfig and GemmDesc on the host: the text form,
// local-memory support and work-group shape, the candidates, and descriptions rejected with
// their shape (the kernels themselves: gemm_test.cc).
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
#include "libdnn/gemm_config.h"
#include "libdnn/gemm_internal.h"
#include "libdnn/tuner.h"
#include "quant/fixed_point.h"
#include "tests/testing/sweep.h"

namespace mpcaffe::libdnn {
namespace {

TEST(GemmConfigTest, TextFormRoundTripsAndRejectsNonsense) {
  GemmConfig c;
  c.algorithm = GemmConfig::Algorithm::kDot;
  c.tm = 3;
  c.tn = 5;
  c.vw = 16;
  c.wg = 2;
  c.ku = 4;
  auto back = GemmConfig::Parse(c.ToString());
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(*back == c);
  EXPECT_FALSE(GemmConfig::Parse("outer tm=6 tn=2 vw=3 wg=1 ku=1"));
  EXPECT_FALSE(GemmConfig::Parse("outer tm=6 tn=2"));
  EXPECT_FALSE(GemmConfig::Parse("inner tm=6 tn=2 vw=8 wg=1 ku=1"));
  EXPECT_FALSE(GemmConfig::Parse("outer tm=0 tn=2 vw=8 wg=1 ku=1"));
  c.algorithm = GemmConfig::Algorithm::kOuter;
  c.vw = 8;
  c.kp = 2;
  back = GemmConfig::Parse(c.ToString());
  ASSERT_TRUE(back.has_value()) << c.ToString();
  EXPECT_TRUE(*back == c);
  EXPECT_NE(c.ToString().find("kp=2"), std::string::npos);
  // Tables written before kp existed still parse, as kp = 1.
  auto old = GemmConfig::Parse("outer tm=6 tn=2 vw=8 wg=1 ku=1 mf=0");
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->kp, 1);
  EXPECT_FALSE(GemmConfig::Parse("outer tm=6 tn=2 vw=8 wg=1 ku=1 mf=0 kp=3"));
  auto four = GemmConfig::Parse("outer tm=4 tn=1 vw=1 wg=16 ku=1 mf=0 kp=4 lm=0");
  ASSERT_TRUE(four);
  EXPECT_EQ(four->kp, 4);
  EXPECT_EQ(four->ToString(), "outer tm=4 tn=1 vw=1 wg=16 ku=1 mf=0 kp=4 lm=0");
  EXPECT_FALSE(GemmConfig::Parse("outer tm=6 tn=2 vw=8 wg=1 ku=1 mf=0 kp=2 kp=2"));
  // lm: printed, round-tripped, optional in old tables (0), only 0 or 1, once.
  EXPECT_EQ(old->lm, 0);
  auto no_lm = GemmConfig::Parse("outer tm=6 tn=2 vw=8 wg=1 ku=1 mf=0 kp=2");
  ASSERT_TRUE(no_lm.has_value());
  EXPECT_EQ(no_lm->lm, 0);
  EXPECT_EQ(no_lm->kp, 2);
  c = GemmConfig();
  c.wg = 64;
  c.vw = 1;
  c.lm = 1;
  EXPECT_EQ(c.ToString(), "outer tm=6 tn=2 vw=1 wg=64 ku=1 mf=0 kp=1 lm=1");
  back = GemmConfig::Parse(c.ToString());
  ASSERT_TRUE(back.has_value());
  EXPECT_TRUE(*back == c);
  c.lm = 0;
  EXPECT_FALSE(*back == c);
  EXPECT_NE(GemmConfig().ToString().find(" lm=0"), std::string::npos);
  back = GemmConfig::Parse("outer tm=4 tn=4 vw=1 wg=64 ku=1 mf=1 lm=1");  // lm without kp
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->lm, 1);
  EXPECT_EQ(back->kp, 1);
  EXPECT_FALSE(GemmConfig::Parse("outer tm=6 tn=2 vw=8 wg=1 ku=1 mf=0 kp=1 lm=2"));
  EXPECT_FALSE(GemmConfig::Parse("outer tm=6 tn=2 vw=8 wg=1 ku=1 mf=0 kp=1 lm=-1"));
  EXPECT_FALSE(GemmConfig::Parse("outer tm=6 tn=2 vw=8 wg=1 ku=1 mf=0 kp=1 lm=x"));
  EXPECT_FALSE(GemmConfig::Parse("outer tm=6 tn=2 vw=8 wg=1 ku=1 mf=0 lm=1 lm=1"));
}

TEST(GemmConfigTest, LocalMemorySupportAndWorkGroupShape) {
  GemmDesc d;
  d.M = d.N = d.K = 64;
  GemmConfig c;
  c.vw = 1;
  c.tm = c.tn = 4;
  c.wg = 64;
  c.lm = 1;
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kInt16Q, DataType::kInt8Q}) {
    d.type = d.out_type = t;
    EXPECT_TRUE(c.Supports(d, Backend::kOpenCL)) << Name(t);
    EXPECT_TRUE(c.Supports(d, Backend::kCuda)) << Name(t);
  }
  EXPECT_EQ(c.group_n(), 8);
  EXPECT_EQ(c.group_m(), 8);
  // fp32: 16 rows of K × (8·4 rows + 1 of padding + 8·4 columns) floats; int16q in 64 bits.
  d.type = d.out_type = DataType::kFloat32;
  EXPECT_EQ(c.LocalBytes(d), 16u * 65 * 4);
  d.type = d.out_type = DataType::kInt16Q;
  EXPECT_EQ(c.LocalBytes(d), 16u * 65 * 8);
  d.type = d.out_type = DataType::kFloat32;
  c.wg = 32;
  EXPECT_EQ(c.group_n(), 8);
  EXPECT_EQ(c.group_m(), 4);
  c.wg = 2;
  EXPECT_EQ(c.group_n(), 2);
  EXPECT_EQ(c.group_m(), 1);
  c.wg = 48;  // no 2-D split
  EXPECT_FALSE(c.Supports(d, Backend::kOpenCL));
  c.wg = 1024;  // 16 rows of K × (32·4 + 1 + 32·4) floats, 16 KiB: fits
  EXPECT_TRUE(c.Supports(d, Backend::kOpenCL));
  c.tm = c.tn = 16;  // 64 KiB: does not
  EXPECT_FALSE(c.Supports(d, Backend::kOpenCL));
  c.tm = c.tn = 4;
  c.wg = 64;
  c.algorithm = GemmConfig::Algorithm::kDot;
  d.trans_b = true;
  EXPECT_FALSE(c.Supports(d, Backend::kOpenCL));
  c.algorithm = GemmConfig::Algorithm::kOuter;
  d.type = d.out_type = DataType::kInt8Q;
  c.vw = 8;
  c.kp = 2;  // pairs read k, k + 1 from global memory: lm = 0 only
  EXPECT_FALSE(c.Supports(d, Backend::kOpenCL));
  c.lm = 0;
  EXPECT_TRUE(c.Supports(d, Backend::kOpenCL));
  // The work-group shape follows lm (and the kernel text, hence the cache key).
  c.kp = 1;
  c.lm = 1;
  const std::string staged = Gemm::Source(KernelTarget{}, d, c);
  c.lm = 0;
  const std::string direct = Gemm::Source(KernelTarget{}, d, c);
  EXPECT_NE(staged, direct);
  EXPECT_NE(staged.find("barrier(CLK_LOCAL_MEM_FENCE)"), std::string::npos);
  EXPECT_EQ(direct.find("barrier("), std::string::npos);
}

TEST(GemmConfigTest, CandidatesIncludeLocalMemoryTiles) {
  GemmDesc d;
  d.M = 96;
  d.N = 729;
  d.K = 363;
  d.weights = WeightOperand::kA;
  for (DataType t : {DataType::kFloat32, DataType::kInt8Q}) {
    d.type = d.out_type = t;
    auto count = [&](const DeviceInfo& info) {
      int n = 0;
      for (const GemmConfig& c : GemmCandidates(info, d)) {
        EXPECT_TRUE(c.Supports(d, info.backend)) << c.ToString();
        n += c.lm;
      }
      return n;
    };
    DeviceInfo cpu, gpu, cuda;
    gpu.is_gpu = true;
    cuda.backend = Backend::kCuda;
    cuda.is_gpu = true;
    EXPECT_EQ(count(cpu), 1) << Name(t);
    EXPECT_GE(count(gpu), 8) << Name(t);
    EXPECT_GE(count(cuda), 8) << Name(t);
    // Defaults are unchanged: global-memory tiles.
    EXPECT_EQ(DefaultGemmConfig(cpu, d).lm, 0);
    EXPECT_EQ(DefaultGemmConfig(cuda, d).lm, 0);
  }
}

TEST(GemmConfigTest, FourBitWeightsKeepTheirKernelWhereWeightsDominateTheBytes) {
  // DefaultGemmConfig's Int4KernelPays on CPUs: the 4-bit kernels (kp = 8) where the weights
  // are most of the bytes, else the int8 kernels on the unpacked weights; the outer tile keeps
  // 4 bits up to 4 × more activation columns than weight rows on a compiler without byte pair
  // products, and for any shape on one with them; the dot tile only on a compiler with byte
  // pair products (vw 8) or byte quads (vw 16).
  DeviceInfo pairs, no_pairs;
  no_pairs.byte_pair_products = false;
  TargetProfile quads = TargetProfile::Of(pairs);  // VNNI in a helper, whatever this host has
  quads.byte_quad_products = true;
  auto quad_default = [&quads](const GemmDesc& d) {
    return DefaultRowFor(GemmDefaults(), "gemm", quads, d).config;
  };
  auto desc = [](int m, int n, int k, WeightOperand w) {
    GemmDesc d;
    d.type = d.out_type = DataType::kInt8Q;
    d.M = m, d.N = n, d.K = k;
    d.weights = w;
    d.trans_b = w == WeightOperand::kB;  // the inner product's layout
    d.weights_signed = true;
    d.weight_zero = false;
    d.weight_bits = 4;
    return d;
  };
  const GemmDesc fc_b1 = desc(1, 4096, 9216, WeightOperand::kB);    // AlexNet fc6, batch 1
  const GemmDesc hidden = desc(10000, 30, 784, WeightOperand::kB);  // the 784-30-10 net
  const GemmDesc conv1 = desc(96, 3025, 363, WeightOperand::kA);
  const GemmDesc conv2 = desc(256, 729, 1200, WeightOperand::kA);
  EXPECT_EQ(DefaultGemmConfig(pairs, fc_b1).ToString(),
            "dot tm=1 tn=8 vw=8 wg=1 ku=1 mf=0 kp=8 lm=0");
  // Batch 1 in byte quads: one weight row per work-item, 4-bit and 8-bit alike.
  EXPECT_EQ(quad_default(fc_b1).ToString(),
            "dot tm=1 tn=1 vw=16 wg=1 ku=1 mf=0 kp=8 lm=0");
  GemmDesc fc_b1_int8 = fc_b1;
  fc_b1_int8.weight_bits = 8;
  EXPECT_EQ(quad_default(fc_b1_int8).ToString(),
            "dot tm=1 tn=1 vw=16 wg=1 ku=2 mf=0 kp=4 lm=0");
  EXPECT_EQ(DefaultGemmConfig(no_pairs, fc_b1).kp, GemmConfig::kPairs);
  GemmDesc fc_b10 = fc_b1;
  fc_b10.M = 10;
  EXPECT_EQ(DefaultGemmConfig(pairs, fc_b10).ToString(),
            "dot tm=4 tn=2 vw=8 wg=1 ku=1 mf=0 kp=8 lm=0");
  EXPECT_EQ(quad_default(fc_b10).ToString(),
            "dot tm=4 tn=4 vw=16 wg=1 ku=1 mf=0 kp=8 lm=0");
  for (const DeviceInfo* info : {&pairs, &no_pairs}) {
    EXPECT_EQ(DefaultGemmConfig(*info, conv2).kp, GemmConfig::kU8S4);
    const GemmConfig h = DefaultGemmConfig(*info, hidden);
    EXPECT_EQ(h.kp, GemmConfig::kPairs) << h.ToString();
    EXPECT_EQ(h.algorithm, GemmConfig::Algorithm::kDot) << h.ToString();
  }
  EXPECT_EQ(quad_default(conv2).kp, GemmConfig::kU8S4);
  EXPECT_EQ(quad_default(hidden).ToString(), "dot tm=4 tn=4 vw=16 wg=1 ku=1 mf=0 kp=4 lm=0")
      << "the int8 quad tile";
  EXPECT_EQ(DefaultGemmConfig(pairs, conv1).kp, GemmConfig::kU8S4);
  EXPECT_EQ(DefaultGemmConfig(no_pairs, conv1).kp, GemmConfig::kPairs);
}

TEST(GemmConfigTest, ShortKAtABatchTakesTheOuterTile) {
  // An inner product whose K is below 64 at a batch (the 784-30-10 net's output layer,
  // 10000 × 10 × 30): the outer tile on OpenCL CPUs in fp32, and in int8 where the device has no
  // byte quads; with them int8 keeps its quad dot tile, and a K of 64 the dot form.
  DeviceInfo cpu;
  GemmDesc out;
  out.type = out.out_type = DataType::kFloat32;
  out.M = 10000, out.N = 10, out.K = 30;
  out.trans_b = true;
  EXPECT_EQ(DefaultGemmConfig(cpu, out).ToString(),
            "outer tm=6 tn=2 vw=8 wg=1 ku=1 mf=0 kp=1 lm=0");
  GemmDesc out8 = out;
  out8.type = out8.out_type = DataType::kInt8Q;
  EXPECT_EQ(DefaultGemmConfig(cpu, out8).ToString(),
            "outer tm=6 tn=2 vw=8 wg=1 ku=1 mf=0 kp=2 lm=0");
  TargetProfile quads = TargetProfile::Of(cpu);
  quads.byte_quad_products = true;
  EXPECT_EQ(DefaultRowFor(GemmDefaults(), "gemm", quads, out8).config.algorithm,
            GemmConfig::Algorithm::kDot);
  GemmDesc k64 = out;
  k64.K = 64;
  EXPECT_EQ(DefaultGemmConfig(cpu, k64).algorithm, GemmConfig::Algorithm::kDot);
  GemmDesc one_row = out;
  one_row.M = 1;
  EXPECT_EQ(DefaultGemmConfig(cpu, one_row).algorithm, GemmConfig::Algorithm::kDot);
  // fp16: the outer tile where the device computes in half (cl_khr_fp16), 8 rows; half
  // storage alone (PoCL) keeps the dot tile.
  GemmDesc out16 = out;
  out16.type = out16.out_type = DataType::kFloat16;
  DeviceInfo half_cpu = cpu;
  half_cpu.fp16 = true;
  EXPECT_EQ(DefaultGemmConfig(half_cpu, out16).ToString(),
            "outer tm=8 tn=2 vw=8 wg=1 ku=1 mf=0 kp=1 lm=0");
  EXPECT_EQ(DefaultGemmConfig(cpu, out16).algorithm, GemmConfig::Algorithm::kDot);
  // At K = 64 and more, at the AVX-512 level (no half-register tiles), fp32 and fp16 in half
  // take 4 × 4 dot tiles of 16 lanes at a batch, fp16 in half 1 × 4 for one activation row;
  // half storage alone and the AVX2 level keep the 4 × 2 tile of 8 lanes.
  GemmDesc fc16 = out16;
  fc16.N = 1000, fc16.K = 4096, fc16.M = 16;
  TargetProfile wide = TargetProfile::Of(half_cpu);
  wide.half_register_tiles = false;
  TargetProfile narrow = wide;
  narrow.half_register_tiles = true;
  auto config = [](const TargetProfile& p, const GemmDesc& d) {
    return DefaultRowFor(GemmDefaults(), "gemm", p, d).config.ToString();
  };
  EXPECT_EQ(config(wide, fc16), "dot tm=4 tn=4 vw=16 wg=1 ku=1 mf=0 kp=1 lm=0");
  EXPECT_EQ(config(narrow, fc16), "dot tm=4 tn=2 vw=8 wg=1 ku=1 mf=0 kp=1 lm=0");
  GemmDesc fc32 = fc16;
  fc32.type = fc32.out_type = DataType::kFloat32;
  EXPECT_EQ(config(wide, fc32), "dot tm=4 tn=4 vw=16 wg=1 ku=1 mf=0 kp=1 lm=0");
  EXPECT_EQ(config(narrow, fc32), "dot tm=4 tn=2 vw=8 wg=1 ku=1 mf=0 kp=1 lm=0");
  // int8 pairs (no byte quads): 4 × 4 tiles of 8 pair lanes at AVX-512, 4 × 2 at AVX2.
  GemmDesc fc8 = fc32;
  fc8.type = fc8.out_type = DataType::kInt8Q;
  EXPECT_EQ(config(wide, fc8), "dot tm=4 tn=4 vw=8 wg=1 ku=1 mf=0 kp=2 lm=0");
  EXPECT_EQ(config(narrow, fc8), "dot tm=4 tn=2 vw=8 wg=1 ku=1 mf=0 kp=2 lm=0");
  TargetProfile storage = wide;
  storage.half_arithmetic = false;
  EXPECT_EQ(config(storage, fc16), "dot tm=4 tn=2 vw=8 wg=1 ku=1 mf=0 kp=1 lm=0");
  fc16.M = 1;
  EXPECT_EQ(config(wide, fc16), "dot tm=1 tn=4 vw=16 wg=1 ku=1 mf=0 kp=1 lm=0");
  EXPECT_EQ(config(narrow, fc16), "dot tm=1 tn=4 vw=16 wg=1 ku=1 mf=0 kp=1 lm=0");
  for (const GemmDesc& d : {out, out8, out16})
    EXPECT_TRUE(DefaultGemmConfig(half_cpu, d).Supports(d, Backend::kOpenCL)) << d.ToString();
  // Not the other layouts: a convolution's GEMM with a K of 27 (weights A, M < N) keeps its
  // outer tile walking M tiles first.
  GemmDesc conv;
  conv.M = 64, conv.N = 50176, conv.K = 27;
  EXPECT_EQ(DefaultGemmConfig(cpu, conv).ToString(),
            "outer tm=6 tn=2 vw=8 wg=1 ku=1 mf=1 kp=1 lm=0");
}

TEST(GemmConfigTest, OneActivationRowTakesOneRowTiles) {
  // A batch-1 int8 inner product on an OpenCL CPU: one activation row against 4 weight rows in
  // byte quads where the profile has them (VNNI in a helper), else 8 in pair products; a batch
  // keeps the 4-row tiles (quads there too), and matrix × vector (weights A) its tile of weight
  // rows; fp32 takes one row against 8 too.
  DeviceInfo plain, vnni;
  vnni.byte_quad_products_in_helper = true;
  GemmDesc fc;
  fc.type = fc.out_type = DataType::kInt8Q;
  fc.M = 1, fc.N = 4096, fc.K = 9216;
  fc.trans_b = true;
  const GemmConfig p = DefaultGemmConfig(plain, fc);
  EXPECT_EQ(p.algorithm, GemmConfig::Algorithm::kDot) << p.ToString();
  EXPECT_EQ(p.tm, 1) << p.ToString();
  EXPECT_EQ(p.kp, GemmConfig::kPairs) << p.ToString();
  const GemmConfig q = DefaultGemmConfig(vnni, fc);
  EXPECT_EQ(q.tm, 1) << q.ToString();
  if (TargetProfile::Of(vnni).byte_quad_products) {  // MPCAFFE_ISA at this CPU's level
    EXPECT_EQ(q.kp, GemmConfig::kDot4) << q.ToString();
    EXPECT_EQ(q.vw, 16) << q.ToString();
  } else {
    EXPECT_EQ(q, p) << q.ToString();
  }
  EXPECT_TRUE(q.Supports(fc, Backend::kOpenCL)) << q.ToString();
  GemmDesc batch = fc;
  batch.M = 16;
  // A batch: 4 activation rows × 2 weight rows in pairs, × 4 in byte quads where the profile
  // has them; 16 rows against 4096 weight rows walk the activation rows first (mf = 1).
  const GemmConfig pb = DefaultGemmConfig(plain, batch), qb = DefaultGemmConfig(vnni, batch);
  EXPECT_EQ(qb.tm, 4);
  EXPECT_EQ(pb.kp, GemmConfig::kPairs) << pb.ToString();
  if (TargetProfile::Of(vnni).byte_quad_products)
    EXPECT_EQ(qb.ToString(), "dot tm=4 tn=4 vw=16 wg=1 ku=1 mf=1 kp=4 lm=0");
  else
    EXPECT_EQ(qb, pb) << qb.ToString();
  EXPECT_TRUE(qb.Supports(batch, Backend::kOpenCL)) << qb.ToString();
  GemmDesc mv = fc;  // weights A times one column
  mv.weights = WeightOperand::kA;
  mv.trans_b = false;
  mv.M = 4096, mv.N = 1;
  EXPECT_EQ(DefaultGemmConfig(vnni, mv).tm, 4);
  GemmDesc f32 = fc;
  f32.type = f32.out_type = DataType::kFloat32;
  EXPECT_EQ(DefaultGemmConfig(vnni, f32).tm, 1);
  EXPECT_EQ(DefaultGemmConfig(vnni, f32).kp, GemmConfig::kOneK);
}

TEST(GemmConfigTest, CpuCandidatesIncludeScalarWorkItemsAlongN) {
  // OpenCL CPUs get vw = 1 tiles in work-groups of 8–64 along N (for compilers that vectorise
  // across work-items), no wider than N, and so does CUDA (every candidate OpenCL gets); OpenCL
  // GPUs keep their own list.
  GemmDesc d;
  d.M = 256;
  d.N = 729;
  d.K = 1200;
  d.weights = WeightOperand::kA;
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kInt16Q, DataType::kInt8Q}) {
    d.type = d.out_type = t;
    DeviceInfo cpu, gpu, cuda;
    gpu.is_gpu = true;
    cuda.backend = Backend::kCuda;
    cuda.is_gpu = true;
    auto scalar_groups = [&](const DeviceInfo& info) {
      std::vector<int> wgs;
      for (const GemmConfig& c : GemmCandidates(info, d))
        if (c.vw == 1 && c.lm == 0 && c.algorithm == GemmConfig::Algorithm::kOuter && c.wg < 32)
          wgs.push_back(c.wg);
      return wgs;
    };
    const std::vector<int> wgs = scalar_groups(cpu);
    EXPECT_EQ(std::count(wgs.begin(), wgs.end(), 8), 5) << Name(t);
    EXPECT_EQ(std::count(wgs.begin(), wgs.end(), 16), 5) << Name(t);
    EXPECT_TRUE(scalar_groups(gpu).empty()) << Name(t);
    const std::vector<int> cuda_wgs = scalar_groups(cuda);
    EXPECT_EQ(std::count(cuda_wgs.begin(), cuda_wgs.end(), 8), 5) << Name(t);
    for (const GemmConfig& c : GemmCandidates(cpu, d))
      EXPECT_TRUE(c.vw != 1 || c.wg == 1 || c.mf == 0) << c.ToString();
    // The default stays first and unchanged.
    EXPECT_TRUE(GemmCandidates(cpu, d).front() == DefaultGemmConfig(cpu, d));
  }
  d.type = d.out_type = DataType::kFloat32;
  d.N = 20;  // work-groups of 32 and 64 would idle most of their work-items
  for (const GemmConfig& c : GemmCandidates(DeviceInfo{}, d)) EXPECT_LE(c.wg, 16) << c.ToString();
  d.N = 1;
  for (const GemmConfig& c : GemmCandidates(DeviceInfo{}, d))
    EXPECT_FALSE(c.vw == 1 && c.wg >= 8) << c.ToString();
}

TEST(GemmDescTest, InconsistentDescriptionsAreRejectedWithTheirShape) {
  GemmDesc d;
  d.M = 4;
  d.N = 0;
  d.K = 2;
  try {
    d.Validate();
    FAIL() << "N = 0 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("M=4 N=0 K=2"), std::string::npos) << e.what();
  }
  d.N = 3;
  d.lda = 1;
  EXPECT_THROW(d.Validate(), Error);
  d.lda = 0;
  d.per_channel = true;  // float GEMM
  EXPECT_THROW(d.Validate(), Error);
}

TEST(GemmDescTest, QuantizedRunChecksItsArguments) {
  Device& dev = DefaultDevice();
  GemmDesc d;
  d.type = d.out_type = DataType::kInt8Q;
  d.M = d.N = d.K = 4;
  GemmQuant q;  // no multiplier
  EXPECT_THROW(Gemm(dev, d, q), Error);
  q.multiplier.push_back(quant::QuantizeMultiplier(0.01));
  Gemm g(dev, d, q);
  auto buf = dev.Alloc<uint8_t>(64);
  GemmArgs args;
  args.a = args.b = args.c = buf;
  EXPECT_THROW(g.Run(args), Error);  // no weight sums
}

}  // namespace
}  // namespace mpcaffe::libdnn

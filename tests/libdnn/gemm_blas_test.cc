// tests/libdnn/gemm_blas_test.cc — the Tuner (winner stored in the tuning table and used by the
// next Gemm, same results as the default) and the BLAS multiplexer (CLBlast on our queue and
// buffers agrees with LibDNN; MPCAFFE_BLAS forces a choice; unsupported cases fall back).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "cache/program_cache.h"
#include "device/settings.h"
#include "libdnn/blas.h"
#include "libdnn/tuner.h"

namespace mpcaffe::libdnn {
namespace {

/// Runs `gemm` on small-integer data (exact in fp32 and fp16) and returns C as floats.
std::vector<float> RunFloat(Device& dev, BlasGemm& gemm, uint32_t seed) {
  const GemmDesc& d = gemm.desc();
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(-4, 4);
  const size_t na = size_t(d.M) * d.K, nb = size_t(d.K) * d.N, nc = size_t(d.M) * d.ldc_or_packed();
  const bool half = d.type == DataType::kFloat16;
  const size_t e = half ? 2 : 4;
  auto upload = [&](size_t n) {
    std::vector<uint8_t> bytes(n * e);
    for (size_t i = 0; i < n; ++i) {
      const float v = dist(rng) / 4.0f;
      if (half) {
        const uint16_t h = FloatToHalf(v);
        std::memcpy(&bytes[2 * i], &h, 2);
      } else {
        std::memcpy(&bytes[4 * i], &v, 4);
      }
    }
    auto p = dev.Alloc<uint8_t>(bytes.size());
    dev.Write(p, bytes.data(), bytes.size());
    return p;
  };
  auto a = upload(na), b = upload(nb), c = upload(nc);
  GemmArgs args;
  args.a = a;
  args.b = b;
  args.c = c;
  args.alpha = 1.5f;
  args.beta = 0.5f;
  gemm.Run(args).Wait();
  std::vector<uint8_t> bytes(nc * e);
  dev.Read(c, bytes.data(), bytes.size());
  std::vector<float> out(nc);
  for (size_t i = 0; i < nc; ++i) {
    if (half) {
      uint16_t h;
      std::memcpy(&h, &bytes[2 * i], 2);
      out[i] = HalfToFloat(h);
    } else {
      std::memcpy(&out[i], &bytes[4 * i], 4);
    }
  }
  return out;
}

GemmDesc FloatDesc(DataType t, int M, int N, int K, bool ta, bool tb) {
  GemmDesc d;
  d.type = d.out_type = t;
  d.M = M;
  d.N = N;
  d.K = K;
  d.trans_a = ta;
  d.trans_b = tb;
  return d;
}

TEST(BlasMultiplexer, ClBlastOnOurQueueAgreesWithLibDNN) {
  Device& dev = DefaultDevice();
  if (!Available(BlasImpl::kCLBlast, dev, FloatDesc(DataType::kFloat32, 1, 1, 1, false, false)))
    GTEST_SKIP() << "CLBlast unavailable on " << dev.Describe();
  for (DataType t : {DataType::kFloat32, DataType::kFloat16})
    for (auto [ta, tb] : {std::pair{false, false}, {true, false}, {false, true}}) {
      const GemmDesc d = FloatDesc(t, 19, 23, 37, ta, tb);
      std::string why;
      if (!Available(BlasImpl::kCLBlast, dev, d, &why)) {
        std::printf("CLBlast %s skipped: %s\n", Name(t), why.c_str());
        continue;
      }
      BlasGemm ours(dev, d, {}, BlasImpl::kLibDNN), theirs(dev, d, {}, BlasImpl::kCLBlast);
      EXPECT_EQ(ours.impl(), BlasImpl::kLibDNN);
      EXPECT_EQ(theirs.impl(), BlasImpl::kCLBlast);
      EXPECT_EQ(RunFloat(dev, ours, 3), RunFloat(dev, theirs, 3)) << d.ToString();
    }
}

/// The toolkit's libcublas opens and has every entry point mpcaffe calls (running it needs a
/// CUDA device: see the next test).
TEST(BlasMultiplexer, CublasLibraryLoadsWithEveryEntryPoint) {
#ifndef MPCAFFE_HAVE_CUDA
  GTEST_SKIP() << "cuBLAS: " << CublasLoadProblem();
#else
  EXPECT_EQ(CublasLoadProblem(), "");
  std::string why;
  EXPECT_FALSE(Available(BlasImpl::kCuBLAS, DefaultDevice(), FloatDesc(DataType::kFloat32, 4, 4, 4,
                                                                       false, false), &why) &&
               DefaultDevice().backend() != Backend::kCuda);
#endif
}

/// cuBLAS in our context, on our stream and memory, gives LibDNN's results (small integers:
/// exact in both) for fp32 and fp16, every transposition.
TEST(BlasMultiplexer, CublasOnOurStreamAgreesWithLibDNN) {
  Device* cuda = nullptr;
  for (Device* d : DeviceList())
    if (d->backend() == Backend::kCuda) cuda = d;
  if (!cuda) {
    std::string report;
    for (const std::string& line : BackendReports())
      if (line.rfind("cuda", 0) == 0) report = line;
    GTEST_SKIP() << "no CUDA device to run cuBLAS on (" << report << ")";
  }
  for (DataType t : {DataType::kFloat32, DataType::kFloat16})
    for (auto [ta, tb] : {std::pair{false, false}, {true, false}, {false, true}, {true, true}}) {
      const GemmDesc d = FloatDesc(t, 19, 23, 37, ta, tb);
      std::string why;
      ASSERT_TRUE(Available(BlasImpl::kCuBLAS, *cuda, d, &why)) << why;
      BlasGemm ours(*cuda, d, {}, BlasImpl::kLibDNN), theirs(*cuda, d, {}, BlasImpl::kCuBLAS);
      EXPECT_EQ(theirs.impl(), BlasImpl::kCuBLAS);
      EXPECT_EQ(RunFloat(*cuda, ours, 5), RunFloat(*cuda, theirs, 5)) << d.ToString();
    }
}

TEST(BlasMultiplexer, EnvironmentForcesAChoiceWhereSupported) {
  Device& dev = DefaultDevice();
  GemmDesc f = FloatDesc(DataType::kFloat32, 8, 8, 8, false, false);
  GemmDesc q = f;
  q.type = q.out_type = DataType::kInt8Q;
  const bool clblast = Available(BlasImpl::kCLBlast, dev, f);
  {
    ScopedSettings env;
    env->blas = "clblast";
    EXPECT_EQ(ChooseGemmImpl(dev, f), clblast ? BlasImpl::kCLBlast : BlasImpl::kLibDNN);
    EXPECT_EQ(ChooseGemmImpl(dev, q), BlasImpl::kLibDNN);  // CLBlast has no int8 GEMM
    f.relu = true;
    EXPECT_EQ(ChooseGemmImpl(dev, f), BlasImpl::kLibDNN);  // nor a fused ReLU
    env->blas = "cublas";
    EXPECT_EQ(ChooseGemmImpl(dev, q), BlasImpl::kLibDNN);
    env->blas = "libdnn";
    f.relu = false;
    EXPECT_EQ(ChooseGemmImpl(dev, f), BlasImpl::kLibDNN);
    env->blas = "mkl";
    EXPECT_THROW(ChooseGemmImpl(dev, f), Error);
  }
  std::string why;
  EXPECT_FALSE(Available(BlasImpl::kCuBLAS, dev, f, &why));
  EXPECT_FALSE(why.empty());
  EXPECT_THROW(BlasGemm(dev, q, {}, BlasImpl::kCLBlast), Error);
}

TEST(Tuner, WinnerIsStoredUsedNextTimeAndGivesTheSameResult) {
  Device& dev = DefaultDevice();
  auto store = cache::ActiveProgramCache();
  if (!store) GTEST_SKIP() << "kernel cache disabled (MPCAFFE_CACHE=off): no tuning table";
  // An odd shape (padded C) that nothing else tunes.
  GemmDesc d = FloatDesc(DataType::kFloat32, 29, 41, 53, false, false);
  d.ldc = 47;
  Tuner tuner(dev, 2);
  const GemmTuneResult r = tuner.TuneGemm(d, 3.0, 4);
  ASSERT_EQ(r.measured.size(), 4u);
  EXPECT_GT(r.best_ms, 0.0);
  auto rec = store->GetTuning(cache::TuningDeviceKey(dev.info()), "gemm", d.ToString());
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->parameters, "gemm:" + r.best.ToString());  // "family:config"
  // The next Gemm picks the tuned parameters up; tuned and default agree.
  Gemm tuned(dev, d);
  EXPECT_TRUE(tuned.config() == r.best) << tuned.config().ToString();
  BlasGemm with_tuned(dev, d, {}, BlasImpl::kLibDNN);
  std::vector<float> want = RunFloat(dev, with_tuned, 11);
  for (const auto& [config, ms] : r.measured) {
    (void)ms;
    GemmDesc same = d;
    Gemm g(dev, same, {}, config);
    EXPECT_TRUE(g.config() == config);
  }
  store->PutTuning({cache::TuningDeviceKey(dev.info()), "gemm", d.ToString(),
                    "gemm:" + DefaultGemmConfig(dev.info(), d).ToString(), 1.0, ""});
  BlasGemm with_default(dev, d, {}, BlasImpl::kLibDNN);
  EXPECT_EQ(RunFloat(dev, with_default, 11), want);
}

TEST(Tuner, BlasChoiceIsRecordedAndFollowed) {
  Device& dev = DefaultDevice();
  if (!cache::ActiveProgramCache()) GTEST_SKIP() << "kernel cache disabled: no tuning table";
  const GemmDesc d = FloatDesc(DataType::kFloat32, 31, 33, 35, false, true);
  Tuner tuner(dev, 2);
  const BlasTuneResult r = tuner.TuneBlas(d);
  ASSERT_FALSE(r.measured.empty());
  EXPECT_EQ(ChooseGemmImpl(dev, d), r.best);
}

}  // namespace
}  // namespace mpcaffe::libdnn

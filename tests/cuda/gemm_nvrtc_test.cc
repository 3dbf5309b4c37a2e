// tests/libdnn/gemm_cuda_test.cc — CUDA honesty for the GEMM generator: every data type,
// both algorithms, shared-memory tiles (lm = 1) and the fused-pipeline variants compile with
// NVRTC (no GPU needed), and the int8 dot-product kernel for sm_80 contains the dp4a
// instruction in its PTX.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "libdnn/conv.h"
#include "libdnn/gemm.h"
#ifdef MPCAFFE_HAVE_CUDA
#include "device/cuda/nvrtc.h"
#include "tests/testing/nvrtc_once.h"
#endif

namespace mpcaffe::libdnn {
namespace {

DeviceInfo CudaInfo() {
  DeviceInfo info;
  info.backend = Backend::kCuda;
  return info;
}

#ifdef MPCAFFE_HAVE_CUDA

/// Descriptions covering every generator branch: types, output types, transposes, weight side,
/// bias, ReLU, signed and per-channel weights.
std::vector<GemmDesc> Variants() {
  std::vector<GemmDesc> out;
  for (DataType t : kAllDataTypes)
    for (int v = 0; v < 4; ++v) {
      GemmDesc d;
      d.type = d.out_type = t;
      d.M = 64;
      d.N = v == 3 ? 1 : 48;
      d.K = 100;
      d.trans_a = false;
      d.trans_b = v % 2 == 1;
      d.weights = v == 2 ? WeightOperand::kA : WeightOperand::kB;
      d.bias = v != 1;
      d.relu = v == 2;
      if (IsQuantized(t)) {
        d.weights_signed = v == 1;
        d.weight_zero = v != 1;
        d.per_channel = v % 2 == 0;
        if (v == 3) d.out_type = DataType::kFloat32;
      }
      out.push_back(d);
    }
  return out;
}

std::vector<GemmConfig> CudaConfigs() {
  GemmConfig outer, dot;
  outer.algorithm = GemmConfig::Algorithm::kOuter;
  outer.vw = 1;
  outer.tm = outer.tn = 4;
  outer.wg = 64;
  dot = outer;
  dot.algorithm = GemmConfig::Algorithm::kDot;
  dot.tn = 2;
  GemmConfig four = outer;  // int8: four k per dp4a
  four.kp = 4;
  return {outer, dot, four};
}

TEST(GemmNvrtc, EveryVariantCompilesForOldestPtxAndSm80) {
  int compiles = 0;
  for (const std::string& arch : {cuda::OldestPtxArch(), std::string("sm_80")}) {
    const int cc = std::stoi(arch.substr(arch.find('_') + 1));
    const KernelTarget target = KernelTarget::Cuda(cc);
    for (const GemmDesc& d : Variants())
      for (const GemmConfig& c : CudaConfigs()) {
        if (!c.Supports(d, Backend::kCuda)) continue;
        const std::string source = Gemm::Source(target, d, c);
        try {
          const cuda::NvrtcOutput& out = test_support::CompileCudaOnce(source, arch, "gemm.cu");
          ++compiles;
          if (arch.rfind("compute_", 0) == 0) {
            EXPECT_NE(out.ptx.find(".entry " + Gemm::KernelName(d)), std::string::npos);
          }
        } catch (const std::exception& e) {
          ADD_FAILURE() << d.ToString() << " " << c.ToString() << " for " << arch << ":\n"
                        << e.what();
        }
      }
  }
  EXPECT_GT(compiles, 20);
}

TEST(GemmNvrtc, LocalMemoryTilesCompileForOldestPtxAndSm80) {
  // lm = 1 (shared-memory slabs, __syncthreads) for every variant: an 8 × 8 block with the
  // K loop unrolled, and a 16 × 8 block walking M tiles first.
  std::vector<GemmConfig> configs;
  for (auto [tm, tn, wg, ku, mf] : {std::tuple{4, 4, 64, 2, 0}, std::tuple{8, 2, 128, 1, 1}}) {
    GemmConfig c;
    c.algorithm = GemmConfig::Algorithm::kOuter;
    c.vw = 1;
    c.tm = tm;
    c.tn = tn;
    c.wg = wg;
    c.ku = ku;
    c.mf = mf;
    c.lm = 1;
    configs.push_back(c);
  }
  int compiles = 0;
  for (const std::string& arch : {cuda::OldestPtxArch(), std::string("sm_80")}) {
    const int cc = std::stoi(arch.substr(arch.find('_') + 1));
    const KernelTarget target = KernelTarget::Cuda(cc);
    for (const GemmDesc& d : Variants())
      for (const GemmConfig& c : configs) {
        ASSERT_TRUE(c.Supports(d, Backend::kCuda)) << d.ToString() << " " << c.ToString();
        const std::string source = Gemm::Source(target, d, c);
        EXPECT_NE(source.find("__shared__"), std::string::npos);
        EXPECT_NE(source.find("__syncthreads()"), std::string::npos);
        try {
          const cuda::NvrtcOutput& out = test_support::CompileCudaOnce(source, arch, "gemm_lm.cu");
          ++compiles;
          if (arch.rfind("compute_", 0) == 0) {
            EXPECT_NE(out.ptx.find(".entry " + Gemm::KernelName(d)), std::string::npos);
            EXPECT_NE(out.ptx.find(".shared"), std::string::npos) << d.ToString();
            EXPECT_NE(out.ptx.find("bar.sync"), std::string::npos) << d.ToString();
          }
        } catch (const std::exception& e) {
          ADD_FAILURE() << d.ToString() << " " << c.ToString() << " for " << arch << ":\n"
                        << e.what();
        }
      }
  }
  EXPECT_EQ(compiles, 2 * 2 * static_cast<int>(Variants().size()));
}

TEST(GemmNvrtc, Int8GemmUsesDp4aOnSm80) {
  for (bool signed_weights : {false, true}) {
    GemmDesc d;
    d.type = d.out_type = DataType::kInt8Q;
    d.M = 256;
    d.N = 1;
    d.K = 1024;
    d.weights = WeightOperand::kA;
    d.weights_signed = signed_weights;
    d.weight_zero = !signed_weights;
    // The default CUDA configuration for this layout (matrix × vector).
    const GemmConfig c = DefaultGemmConfig(CudaInfo(), d);
    ASSERT_EQ(c.algorithm, GemmConfig::Algorithm::kDot);
    const std::string source = Gemm::Source(KernelTarget::Cuda(80), d, c);
    const cuda::NvrtcOutput& out = test_support::CompileCudaOnce(source, "compute_80", "gemm_int8.cu");
    // u8×s8 needs the inline-PTX form (no __dp4a overload); u8×u8 __dp4a(unsigned...).
    const std::string want = signed_weights ? "dp4a.u32.s32" : "dp4a.u32.u32";
    EXPECT_NE(out.ptx.find(want), std::string::npos)
        << want << " not in the PTX of " << d.ToString();
  }
}

TEST(GemmNvrtc, Int8FourKGemmAndConvolutionUseDp4aOnSm80) {
  // The sm_61+ int8 defaults: kOuter kp = 4 for convolution as GEMM, and the direct
  // convolution's four-channel steps (ConvInput::kDot4).
  DeviceInfo info;
  info.backend = Backend::kCuda;
  info.dot_product = true;
  GemmDesc d;
  d.type = d.out_type = DataType::kInt8Q;
  d.M = 96;
  d.N = 3025;
  d.K = 363;
  d.weights = WeightOperand::kA;
  const GemmConfig c = DefaultGemmConfig(info, d);
  ASSERT_EQ(c.kp, 4) << c.ToString();
  const cuda::NvrtcOutput& gemm =
      test_support::CompileCudaOnce(Gemm::Source(KernelTarget::Cuda(80), d, c), "compute_80", "gemm4.cu");
  EXPECT_NE(gemm.ptx.find("dp4a.u32.u32"), std::string::npos);
  ConvDesc cd;
  cd.type = DataType::kInt8Q;
  cd.channels = 96;
  cd.height = cd.width = 27;
  cd.out_channels = 256;
  cd.kernel_h = cd.kernel_w = 5;
  cd.pad_h = cd.pad_w = 2;
  cd.weights_signed = true;
  const ConvConfig cc = DefaultConvConfig(info, cd.type);
  ASSERT_EQ(cc.kp, 4) << cc.ToString();
  const cuda::NvrtcOutput& conv = test_support::CompileCudaOnce(
      Convolution::ForwardSource(KernelTarget::Cuda(80), cd, cc), "compute_80", "conv4.cu");
  EXPECT_NE(conv.ptx.find("dp4a.u32.s32"), std::string::npos);
}

TEST(GemmNvrtc, Int8GemmSassHasIdp4a) {
  // A disassembler from the toolkit, if it ships one.
  std::string tool;
  for (const char* name : {"nvdisasm", "cuobjdump"}) {
    const std::string path = std::string("/usr/local/cuda/bin/") + name;
    if (std::FILE* f = std::fopen(path.c_str(), "r")) {
      std::fclose(f);
      tool = path + (std::string(name) == "cuobjdump" ? " -sass" : "");
      break;
    }
  }
  if (tool.empty())
    GTEST_SKIP() << "SASS check (IDP.4A) skipped: this CUDA toolkit ships neither cuobjdump nor "
                    "nvdisasm to disassemble the cubin; the PTX dp4a check ran instead";
  GemmDesc d;
  d.type = d.out_type = DataType::kInt8Q;
  d.M = 256;
  d.N = 1;
  d.K = 1024;
  d.weights = WeightOperand::kA;
  const GemmConfig c = DefaultGemmConfig(CudaInfo(), d);
  const cuda::NvrtcOutput& out =
      test_support::CompileCudaOnce(Gemm::Source(KernelTarget::Cuda(80), d, c), "sm_80", "gemm_int8.cu");
  const std::string file = ::testing::TempDir() + "gemm_int8_sm80.cubin";
  std::FILE* f = std::fopen(file.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite(out.cubin.data(), 1, out.cubin.size(), f);
  std::fclose(f);
  std::string sass;
  if (std::FILE* p = popen((tool + " " + file).c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) sass.append(buf, n);
    pclose(p);
  }
  EXPECT_NE(sass.find("IDP.4A"), std::string::npos) << sass.substr(0, 2000);
}

#else
TEST(GemmNvrtc, Skipped) { GTEST_SKIP() << "CUDA toolkit not found at build time: no NVRTC"; }
#endif

}  // namespace
}  // namespace mpcaffe::libdnn

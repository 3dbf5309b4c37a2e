// tests/cuda/int8w4_test.cc — GEMMs with 4-bit weights (int8w4) on CUDA: the CUDA default
// unpacks the nibbles to int8 (the program's int4_unpack kernel) and multiplies with the int8
// kernels; on a dp4a GPU it compiles with NVRTC to PTX containing dp4a, and the unpack kernel is
// in the same program. The candidates also hold the byte-pair kernels. No GPU needed.
#include <gtest/gtest.h>

#include <string>

#include "libdnn/gemm.h"
#ifdef MPCAFFE_HAVE_CUDA
#include "device/cuda/nvrtc.h"
#include "tests/testing/nvrtc_once.h"
#endif

namespace mpcaffe::libdnn {
namespace {

#ifdef MPCAFFE_HAVE_CUDA

TEST(CudaInt8w4, DefaultGemmUnpacksAndMultipliesWithDp4a) {
  DeviceInfo gpu;
  gpu.backend = Backend::kCuda;
  gpu.is_gpu = true;
  gpu.dot_product = true;
  for (WeightOperand w : {WeightOperand::kA, WeightOperand::kB}) {
    GemmDesc d;
    d.type = d.out_type = DataType::kInt8Q;
    d.M = 64, d.N = 48, d.K = 301, d.bias = true, d.per_channel = true;
    d.weights = w;
    d.trans_b = w == WeightOperand::kB;
    d.weights_signed = true;
    d.weight_zero = false;
    d.weight_bits = 4;
    const GemmConfig c = DefaultGemmConfig(gpu, d);
    ASSERT_TRUE(c.Supports(d, Backend::kCuda)) << c.ToString();
    EXPECT_NE(c.kp, GemmConfig::kU8S4) << "a GPU's default unpacks to int8 for dp4a";
    const std::string src = Gemm::Source(KernelTarget::Cuda(80), d, c);
    const cuda::NvrtcOutput& out = test_support::CompileCudaOnce(src, "compute_80", "int8w4.cu");
    EXPECT_NE(out.ptx.find(".entry int4_unpack"), std::string::npos) << d.ToString();
    EXPECT_NE(out.ptx.find(".entry " + Gemm::KernelName(d)), std::string::npos);
    EXPECT_NE(out.ptx.find("dp4a"), std::string::npos) << d.ToString() << " " << c.ToString();
    // The tuner also times the byte-pair kernels (kp = kU8S4, compiled in candidates_test.cc).
    int native = 0;
    for (const GemmConfig& other : GemmCandidates(gpu, d)) {
      EXPECT_TRUE(other.Supports(d, Backend::kCuda)) << other.ToString();
      native += other.kp == GemmConfig::kU8S4;
    }
    EXPECT_GT(native, 0) << d.ToString();
  }
}

#else

TEST(CudaInt8w4, Skipped) { GTEST_SKIP() << "CUDA toolkit not found at build time: no NVRTC"; }

#endif

}  // namespace
}  // namespace mpcaffe::libdnn

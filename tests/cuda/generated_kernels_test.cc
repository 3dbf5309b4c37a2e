// tests/cuda/generated_kernels_test.cc — CUDA honesty: the CUDA text of every generated kernel,
// every data type, compiles with NVRTC to PTX (oldest supported virtual arch) and to cubin
// for sm_80 and sm_90, with no GPU needed. Prints the compile count and time.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include "codegen/elementwise.h"
#include "codegen/kernel_writer.h"
#ifdef MPCAFFE_HAVE_CUDA
#include "device/cuda/nvrtc.h"
#endif
#include "quant/quantizer.h"

namespace mpcaffe {
namespace {

#ifdef MPCAFFE_HAVE_CUDA

struct Generated {
  std::string name;
  std::function<std::string(const KernelTarget&)> make;
};

/// Every kernel text the library generates so far, for every data type.
std::vector<Generated> AllGenerated() {
  std::vector<Generated> all;
  for (DataType t : kAllDataTypes) {
    all.push_back({ElementwiseKernelName("relu", t), [t](const KernelTarget& k) { return ReluSource(k, t); }});
    all.push_back({ElementwiseKernelName("scale", t), [t](const KernelTarget& k) { return ScaleSource(k, t); }});
    all.push_back({ElementwiseKernelName("axpby", t), [t](const KernelTarget& k) { return AxpbySource(k, t); }});
    for (DataType to : kAllDataTypes)
      all.push_back({ConvertKernelName(t, to),
                     [t, to](const KernelTarget& k) { return ConvertSource(k, t, to); }});
    all.push_back({quant::PseudoKernelName(t),
                   [t](const KernelTarget& k) { return quant::PseudoSource(k, t); }});
  }
  all.push_back({quant::kObserveRangeKernel, [](const KernelTarget& k) { return quant::ObserveRangeSource(k); }});
  return all;
}

/// "compute_75" → 75.
int ComputeCapability(const std::string& arch) { return std::stoi(arch.substr(arch.find('_') + 1)); }

TEST(NvrtcAllKernels, EveryGeneratedKernelCompilesForEveryArch) {
  const std::vector<std::string> archs = {cuda::OldestPtxArch(), "sm_80", "sm_90"};
  const auto start = std::chrono::steady_clock::now();
  int compiles = 0;
  for (const auto& arch : archs) {
    const KernelTarget target = KernelTarget::Cuda(ComputeCapability(arch));
    for (const auto& g : AllGenerated()) {
      const std::string source = g.make(target);
      try {
        cuda::NvrtcOutput out = cuda::CompileCuda(source, arch, {}, g.name + ".cu");
        ++compiles;
        if (arch.rfind("compute_", 0) == 0) {
          EXPECT_NE(out.ptx.find(".entry " + g.name), std::string::npos) << g.name << " " << arch;
        } else {
          EXPECT_FALSE(out.cubin.empty()) << g.name << " " << arch;
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << g.name << " for " << arch << " failed:\n" << e.what();
      }
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("NVRTC: %d compiles (%zu kernels x %zu archs: %s, sm_80, sm_90) in %.1f s\n", compiles,
              AllGenerated().size(), archs.size(), archs[0].c_str(), seconds);
}

TEST(NvrtcAllKernels, Dot4UsesTheDp4aInstructionOnSm61AndLater) {
  KernelWriter w(KernelTarget::Cuda(80));
  w.UseHelper(KernelHelper::kDot4);
  w.Kernel("dot4").In("mp_u32", "a").In("mp_u32", "b").Out("int", "c").Body(R"(  int i = $global_id(0);
  c[i] = mp_dot4_u8s8(a[i], b[i], mp_dot4_s8s8(a[i], b[i], mp_dot4_u8u8(a[i], b[i], 0)));
)");
  cuda::NvrtcOutput out = cuda::CompileCuda(w.Source(), "compute_80");
  EXPECT_NE(out.ptx.find("dp4a.u32.s32"), std::string::npos) << out.ptx;
  EXPECT_NE(out.ptx.find("dp4a.s32.s32"), std::string::npos) << out.ptx;
  EXPECT_NE(out.ptx.find("dp4a.u32.u32"), std::string::npos) << out.ptx;
}

#else
TEST(NvrtcAllKernels, Skipped) { GTEST_SKIP() << "CUDA toolkit not found at build time: no NVRTC"; }
#endif

}  // namespace
}  // namespace mpcaffe

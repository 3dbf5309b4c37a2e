// tests/cuda/generated_kernels_test.cc — CUDA honesty: the CUDA text of every registered kernel
// family (tests/testing/kernel_families.h: every data type, every distinct path) compiles with
// NVRTC to PTX (oldest supported virtual arch) and to cubin for sm_80, with no GPU needed. For
// sm_90 it compiles the texts that differ from sm_80's and the first sample of each family (the
// same text again would only repeat ptxas on the same PTX). Prints the compile count and time.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "codegen/kernel_writer.h"
#ifdef MPCAFFE_HAVE_CUDA
#include "device/cuda/nvrtc.h"
#include "tests/testing/nvrtc_once.h"
#endif
#include "tests/testing/kernel_families.h"

namespace mpcaffe {
namespace {

#ifdef MPCAFFE_HAVE_CUDA

using testing_families::KernelFamilies;
using testing_families::KernelFamily;
using testing_families::Sample;

/// "compute_75" → 75.
int ComputeCapability(const std::string& arch) { return std::stoi(arch.substr(arch.find('_') + 1)); }

TEST(NvrtcAllKernels, EveryGeneratedKernelCompilesForEveryArch) {
  const std::vector<std::string> archs = {cuda::OldestPtxArch(), "sm_80", "sm_90"};
  const auto start = std::chrono::steady_clock::now();
  int compiles = 0, sm90_as_sm80 = 0;
  size_t programs = 0;
  std::set<std::string> sm80_texts;
  for (const auto& arch : archs) {
    const KernelTarget target = KernelTarget::Cuda(ComputeCapability(arch));
    programs = 0;
    for (const KernelFamily& family : KernelFamilies()) {
      const std::vector<Sample> samples = family.samples(target);
      EXPECT_FALSE(samples.empty()) << "kernel family " << family.name << " enumerates no program";
      for (size_t i = 0; i < samples.size(); ++i) {
        const Sample& g = samples[i];
        ++programs;
        EXPECT_EQ(KernelWriter::FamilyOf(g.source), family.name) << g.kernel;
        if (arch == "sm_80") sm80_texts.insert(g.source);
        if (arch == "sm_90" && i > 0 && sm80_texts.count(g.source)) {
          ++sm90_as_sm80;
          continue;
        }
        try {
          const cuda::NvrtcOutput& out =
              test_support::CompileCudaOnce(g.source, arch, g.kernel + ".cu");
          ++compiles;
          if (arch.rfind("compute_", 0) == 0) {
            EXPECT_NE(out.ptx.find(".entry " + g.kernel), std::string::npos)
                << g.kernel << " " << arch;
          } else {
            EXPECT_FALSE(out.cubin.empty()) << g.kernel << " " << arch;
          }
        } catch (const std::exception& e) {
          ADD_FAILURE() << family.name << ": " << g.kernel << " for " << arch << " failed:\n"
                        << e.what();
        }
      }
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "NVRTC: %d compiles (%zu programs of %zu kernel families x %zu archs: %s, sm_80, sm_90; "
      "%d sm_90 texts equal to sm_80's not compiled again) in %.1f s\n",
      compiles, programs, KernelFamilies().size(), archs.size(), archs[0].c_str(), sm90_as_sm80,
      seconds);
}

TEST(NvrtcAllKernels, Dot4UsesTheDp4aInstructionOnSm61AndLater) {
  KernelWriter w(KernelTarget::Cuda(80), "test_dot4");
  w.UseHelper(KernelHelper::kDot4);
  w.Kernel("dot4").In("mp_u32", "a").In("mp_u32", "b").Out("int", "c").Body(R"(  int i = $global_id(0);
  c[i] = mp_dot4_u8s8(a[i], b[i], mp_dot4_s8s8(a[i], b[i], mp_dot4_u8u8(a[i], b[i], 0)));
)");
  cuda::NvrtcOutput out = cuda::CompileCuda(w.Source(), "compute_80");
  EXPECT_NE(out.ptx.find("dp4a.u32.s32"), std::string::npos) << out.ptx;
  EXPECT_NE(out.ptx.find("dp4a.s32.s32"), std::string::npos) << out.ptx;
  EXPECT_NE(out.ptx.find("dp4a.u32.u32"), std::string::npos) << out.ptx;
}

// KernelHelper::kByteQuadProduct16's CUDA row (never executed: no NVIDIA GPU here; its
// arithmetic runs on the host in tests/cuda/byte_pairs_host_test.cc): dp4a per lane from sm_61
// (every architecture this NVRTC compiles for), plain integer arithmetic before.
TEST(NvrtcAllKernels, ByteQuadsUseTheDp4aInstructionOnSm61AndLater) {
  KernelWriter w(KernelTarget::Cuda(80), "test_byte_quads");
  w.UseHelper(KernelHelper::kByteQuadProduct16);
  w.Function(R"(MP_QUAD_FN void quads(const $global mp_u8* x, const $global int* wt, mp_i32x16* acc) {
  acc[0] = MP_DPBUSD16(acc[0], MP_ZIP4X16(x, x + 16, x + 32, x + 48), MP_QUAD_WORD(wt[0]));
}
)");
  w.Kernel("byte_quads").In("mp_u8", "x").In("int", "wt").Out("int", "y").Body(R"(  mp_i32x16 acc[1];
  acc[0] = mp_i32x16(0);
  quads(x, wt, acc);
  for (int l = 0; l < 16; ++l) y[l] = acc[0].s[l];
)");
  cuda::NvrtcOutput out = cuda::CompileCuda(w.Source(), "compute_80");
  EXPECT_NE(out.ptx.find("dp4a.u32.s32"), std::string::npos) << out.ptx;
}

#else
TEST(NvrtcAllKernels, Skipped) { GTEST_SKIP() << "CUDA toolkit not found at build time: no NVRTC"; }
#endif

}  // namespace
}  // namespace mpcaffe

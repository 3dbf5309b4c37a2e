// tests/device/bandwidth_test.cc — how fast the selected device moves global memory: a copy of
// 64 MiB, one float per work-item and 1,024 floats per work-item, each checked. A benchmark, so
// DISABLED_ (run with --gtest_also_run_disabled_tests): it is the floor under every kernel that
// streams its weights (a batch-1 InnerProduct reads each weight once), and the evidence for a
// device whose kernels are slow whatever their configuration (docs/BENCHMARKS.md, "Device
// memory bandwidth").
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "codegen/kernel_writer.h"
#include "device/device.h"

namespace mpcaffe {
namespace {

TEST(DeviceBandwidth, DISABLED_CopyRate) {
  Device& d = DefaultDevice();
  constexpr size_t kN = size_t{64} << 18;  // floats: 64 MiB
  constexpr int kChunk = 1024;
  KernelWriter w(KernelTarget::Of(d), "test_device");
  w.Kernel("copy_each").In("float", "x").Out("float", "y").Body(R"(
  const int i = $global_id(0);
  y[i] = x[i];
)");
  w.Kernel("copy_chunk").Value("int", "chunk").In("float", "x").Out("float", "y").Body(R"(
  const int base = $global_id(0) * chunk;
  for (int j = 0; j < chunk; ++j) y[base + j] = x[base + j];
)");
  auto program = d.BuildProgram(w.Source());
  std::vector<float> host(kN);
  for (size_t i = 0; i < kN; ++i) host[i] = static_cast<float>(i % 8191);
  auto x = d.Alloc<float>(kN);
  auto y = d.Alloc<float>(kN);
  d.Write(x, host.data(), kN);
  std::printf("%s\n", d.Describe().c_str());
  for (const char* name : {"copy_each", "copy_chunk"}) {
    const bool chunked = std::string(name) == "copy_chunk";
    auto launch = [&] {
      Kernel k = program->GetKernel(name);
      if (chunked) k.Arg(int32_t{kChunk});
      k.Arg(x).Arg(y).Launch(chunked ? Dim3{kN / kChunk, 1, 1} : Dim3{kN, 1, 1});
      d.Finish();
    };
    const std::vector<float> zeros(kN, 0.0f);
    d.Write(y, zeros.data(), kN);
    launch();  // first launch: compilation of the work-group function, first touch of pages
    std::vector<double> seconds;
    for (int r = 0; r < 5; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      launch();
      seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(seconds.begin(), seconds.end());
    std::vector<float> got(kN);
    d.Read(y, got.data(), kN);
    ASSERT_EQ(got, host) << name;
    std::printf("  %-10s %6.2f GB/s (read + write, median of 5, %.1f ms)\n", name,
                2.0 * kN * sizeof(float) / seconds[2] / 1e9, seconds[2] * 1e3);
  }
}

}  // namespace
}  // namespace mpcaffe

// tests/cuda/cuda_device_test.cc — the CUDA backend on a real NVIDIA device: enumeration
// report, allocation, copies, launches, shared memory, events and errors. Skipped, with the
// enumeration report as the reason, where no CUDA device exists.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "device/device.h"

#ifdef MPCAFFE_HAVE_CUDA
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "device/cuda/nvrtc.h"
#endif

namespace mpcaffe {
namespace {

std::string CudaReport() {
  for (const std::string& line : BackendReports())
    if (line.rfind("cuda:", 0) == 0) return line;
  return "(no cuda line in BackendReports())";
}

Device* FirstCudaDevice() {
  for (Device* d : DeviceList())
    if (d->backend() == Backend::kCuda) return d;
  return nullptr;
}

#define REQUIRE_CUDA_DEVICE(device)   \
  Device* device = FirstCudaDevice(); \
  if (!device) GTEST_SKIP() << "no CUDA device: " << CudaReport()

TEST(CudaEnumeration, ReportsWhatItFoundOrWhyNot) {
  const std::string report = CudaReport();
  ASSERT_EQ(report.rfind("cuda: ", 0), 0u) << report;
  int cuda_devices = 0;
  for (Device* d : DeviceList()) cuda_devices += d->backend() == Backend::kCuda;
#ifdef MPCAFFE_HAVE_CUDA
  if (cuda_devices == 0) {
    EXPECT_NE(report.find("no CUDA devices"), std::string::npos) << report;
  } else {
    EXPECT_EQ(report.rfind("cuda: " + std::to_string(cuda_devices) + " device", 0), 0u) << report;
  }
#else
  EXPECT_EQ(cuda_devices, 0);
  EXPECT_EQ(report, "cuda: not built (no CUDA toolkit found at build time)");
#endif
  std::printf("%s\n", report.c_str());
}

#ifdef MPCAFFE_HAVE_CUDA
// Runs this test binary again with the toolkit's stub libcuda.so as libcuda.so.1: the real
// dlopen/dlsym loader must resolve every entry point and report cuInit's refusal.
TEST(CudaEnumeration, StubDriverIsLoadedAndExplained) {
  std::string stub;
  for (const char* rel : {"/../lib64/stubs/libcuda.so", "/../lib/stubs/libcuda.so"}) {
    std::string path = cuda::CudaIncludeDir() + rel;
    if (FILE* f = std::fopen(path.c_str(), "rb")) {
      std::fclose(f);
      stub = path;
      break;
    }
  }
  if (stub.empty()) GTEST_SKIP() << "no stubs/libcuda.so next to " << cuda::CudaIncludeDir();
  char dir_template[] = "/tmp/mpcaffe_stub_XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  ASSERT_EQ(symlink(stub.c_str(), (dir + "/libcuda.so.1").c_str()), 0);
  const std::string command = "LD_LIBRARY_PATH=" + dir + " /proc/" + std::to_string(getpid()) +
                              "/exe --gtest_filter=CudaEnumeration.ReportsWhatItFoundOrWhyNot 2>&1";
  std::string output;
  if (FILE* p = popen(command.c_str(), "r")) {
    char buffer[4096];
    for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, p)) > 0;) output.append(buffer, n);
    EXPECT_EQ(pclose(p), 0) << output;
  }
  unlink((dir + "/libcuda.so.1").c_str());
  rmdir(dir.c_str());
  EXPECT_NE(output.find("cuda: cuInit: CUDA_ERROR_STUB_LIBRARY"), std::string::npos) << output;
  EXPECT_NE(output.find("no CUDA devices"), std::string::npos) << output;
}
#endif

TEST(CudaDevice, InfoIsConsistent) {
  REQUIRE_CUDA_DEVICE(device);
  const DeviceInfo& info = device->info();
  EXPECT_EQ(info.vendor, "NVIDIA");
  ASSERT_EQ(info.arch.rfind("sm_", 0), 0u);
  const int cc = std::stoi(info.arch.substr(3));
  EXPECT_EQ(info.fp16, cc >= 53);
  EXPECT_EQ(info.dot_product, cc >= 61);
  EXPECT_TRUE(info.int64);
  EXPECT_GT(info.global_mem_bytes, 0u);
  EXPECT_GT(info.compute_units, 0);
  EXPECT_TRUE(info.is_gpu);
}

TEST(CudaDevice, CopyRoundTripWithOffsets) {
  REQUIRE_CUDA_DEVICE(device);
  const size_t n = 1000;
  auto a = device->Alloc<int32_t>(n);
  auto b = device->Alloc<int32_t>(n);
  std::vector<int32_t> host(n);
  std::iota(host.begin(), host.end(), 7);
  device->Zero(a.mem.get(), 0, n * 4);
  device->Write(a + 100, host.data(), 500);
  device->Copy(a + 100, b, 500);
  device->Zero(b.mem.get(), 4 * 10, 4 * 3);
  std::vector<int32_t> back(500, -1);
  device->Read(b, back.data(), 500);
  for (size_t i = 0; i < 500; ++i) ASSERT_EQ(back[i], (i >= 10 && i < 13) ? 0 : host[i]) << i;
  device->Read(a, back.data(), 100);
  for (size_t i = 0; i < 100; ++i) ASSERT_EQ(back[i], 0) << i;
}

TEST(CudaDevice, AxpyLaunchWithOffsetsAndEvents) {
  REQUIRE_CUDA_DEVICE(device);
  auto program = device->BuildProgram(R"(
extern "C" __global__ void axpy(float* y, const float* x, float a, unsigned int n) {
  for (unsigned int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    y[i] += a * x[i];
})");
  const unsigned n = 100003;
  std::vector<float> hx(n + 5), hy(n);
  for (size_t i = 0; i < hx.size(); ++i) hx[i] = float(i % 97);
  for (size_t i = 0; i < hy.size(); ++i) hy[i] = float(i % 13);
  auto x = device->Alloc<float>(hx.size());
  auto y = device->Alloc<float>(hy.size());
  device->Write(x, hx.data(), hx.size());
  device->Write(y, hy.data(), hy.size());
  Event e = program->GetKernel("axpy").Arg(y).Arg(x + 5).Arg(3.0f).Arg(n).Launch1D(n);
  EXPECT_GE(e.ElapsedMs(), 0.0);
  std::vector<float> out(n);
  device->Read(y, out.data(), n);
  for (unsigned i = 0; i < n; ++i) ASSERT_EQ(out[i], hy[i] + 3.0f * hx[i + 5]) << i;
}

TEST(CudaDevice, LocalBlocksAreSharedMemoryOffsets) {
  REQUIRE_CUDA_DEVICE(device);
  auto program = device->BuildProgram(R"(
extern "C" __global__ void reverse(float* y, const float* x, unsigned int a_off,
                                   unsigned int b_off) {
  extern __shared__ __align__(16) unsigned char smem[];
  float* a = (float*)(smem + a_off);
  int* b = (int*)(smem + b_off);
  unsigned int t = threadIdx.x, base = blockIdx.x * blockDim.x;
  a[t] = x[base + t];
  if (t == 0) b[0] = 1000;
  __syncthreads();
  y[base + t] = a[blockDim.x - 1 - t] + b[0];
})");
  const unsigned group = 64, groups = 3;
  std::vector<float> hx(group * groups);
  std::iota(hx.begin(), hx.end(), 0.0f);
  auto x = device->Alloc<float>(hx.size());
  auto y = device->Alloc<float>(hx.size());
  device->Write(x, hx.data(), hx.size());
  program->GetKernel("reverse")
      .Arg(y)
      .Arg(x)
      .Local(group * sizeof(float))
      .Local(sizeof(int))
      .Launch({group * groups, 1, 1}, {group, 1, 1});
  std::vector<float> out(hx.size());
  device->Read(y, out.data(), out.size());
  for (unsigned g = 0; g < groups; ++g)
    for (unsigned t = 0; t < group; ++t)
      ASSERT_EQ(out[g * group + t], hx[g * group + group - 1 - t] + 1000.0f);
}

TEST(CudaDevice, Fp16KernelRuns) {
  REQUIRE_CUDA_DEVICE(device);
  if (!device->info().fp16) GTEST_SKIP() << device->Describe() << " has no fp16 arithmetic";
  auto program = device->BuildProgram(R"(#include <cuda_fp16.h>
extern "C" __global__ void twice(float* y, const float* x, unsigned int n) {
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { __half h = __float2half(x[i]); y[i] = __half2float(__hadd(h, h)); }
})");
  std::vector<float> hx = {0.5f, -1.25f, 3.0f, 1024.0f, 0.0f};
  auto x = device->Alloc<float>(hx.size());
  auto y = device->Alloc<float>(hx.size());
  device->Write(x, hx.data(), hx.size());
  program->GetKernel("twice").Arg(y).Arg(x).Arg(uint32_t(hx.size())).Launch({hx.size(), 1, 1});
  std::vector<float> out(hx.size());
  device->Read(y, out.data(), out.size());
  for (size_t i = 0; i < hx.size(); ++i) EXPECT_EQ(out[i], 2.0f * hx[i]);
}

TEST(CudaDevice, QueuesRunIndependently) {
  REQUIRE_CUDA_DEVICE(device);
  std::unique_ptr<Queue> queue = device->CreateQueue();
  auto a = device->Alloc<uint8_t>(4096);
  std::vector<uint8_t> ones(4096, 1), back(4096, 7);
  device->Write(a, ones.data(), ones.size(), queue.get());
  device->Zero(a.mem.get(), 0, 4096, queue.get());
  queue->Finish();
  device->Read(a, back.data(), back.size());
  for (uint8_t v : back) ASSERT_EQ(v, 0);
}

TEST(CudaDevice, ErrorsAreDiagnosable) {
  REQUIRE_CUDA_DEVICE(device);
  try {
    device->BuildProgram("extern \"C\" __global__ void k() { nope(); }\n");
    FAIL() << "compiled";
  } catch (const BuildError& e) {
    EXPECT_NE(std::string(e.what()).find(device->info().name), std::string::npos) << e.what();
  }
  auto program = device->BuildProgram("extern \"C\" __global__ void k() {}\n");
  EXPECT_THROW(program->GetKernel("absent"), DeviceError);
  try {
    device->Allocate(device->info().global_mem_bytes * 4);
    FAIL() << "allocated four times the device memory";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("requested"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mpcaffe

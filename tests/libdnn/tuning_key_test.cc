// tests/libdnn/tuning_key_test.cc — tuning records are per device: the tuning table's device key
// (cache::TuningDeviceKey) tells apart two devices of one CPU, two platforms, two driver
// versions and two compile targets of one runtime, and each installed device finds its own
// winner for the same GEMM shape.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "cache/program_cache.h"
#include "libdnn/tuner.h"

namespace mpcaffe::libdnn {
namespace {

/// The two OpenCL CPU runtimes of the development machine as they describe themselves (one
/// AMD EPYC under PoCL and under Intel's CPU runtime), and variants that differ in one field.
std::vector<DeviceInfo> LookAlikeDevices() {
  DeviceInfo pocl;
  pocl.backend = Backend::kOpenCL;
  pocl.platform_name = "Portable Computing Language";
  pocl.platform_version = "OpenCL 3.0 PoCL 3.1+debian  Linux, None+Asserts, RELOC, LLVM 15.0.6";
  pocl.name = "pthread-haswell-AMD EPYC 7B13 64-Core Processor";
  pocl.driver_version = "3.1";
  DeviceInfo intel = pocl;
  intel.platform_name = "Intel(R) OpenCL";
  intel.platform_version = "OpenCL 3.0 LINUX";
  intel.name = "AMD EPYC 7B13 64-Core Processor";
  intel.driver_version = "2024.18.6.0.02_160000";
  DeviceInfo same_name = intel;  // another platform naming the device the same way
  same_name.platform_name = "Another OpenCL";
  DeviceInfo new_driver = intel;  // the same device after a driver update
  new_driver.driver_version = "2025.19.2.0.10_160000";
  DeviceInfo new_platform = pocl;  // the same PoCL device under a newer PoCL
  new_platform.platform_version = "OpenCL 3.0 PoCL 6.0  Linux, Release, RELOC, LLVM 18.1.8";
  DeviceInfo cuda;
  cuda.backend = Backend::kCuda;
  cuda.platform_name = "CUDA";
  cuda.platform_version = "12.4";
  cuda.name = "NVIDIA A100";
  cuda.driver_version = "550.54";
  cuda.arch = "sm_80";
  DeviceInfo cuda_arch = cuda;
  cuda_arch.arch = "sm_86";
  DeviceInfo intel_avx2 = intel;  // Intel's runtime told to compile for AVX2 (same name)
  intel_avx2.compile_target = "core-avx2";
  return {pocl, intel, same_name, new_driver, new_platform, cuda, cuda_arch, intel_avx2};
}

TEST(TuningKey, TellsApartPlatformDeviceDriverAndArchitecture) {
  std::set<std::string> keys;
  for (const DeviceInfo& info : LookAlikeDevices()) {
    const std::string key = cache::TuningDeviceKey(info);
    EXPECT_NE(key.find(info.platform_name), std::string::npos) << key;
    EXPECT_NE(key.find(info.name), std::string::npos) << key;
    EXPECT_NE(key.find(info.driver_version), std::string::npos) << key;
    EXPECT_TRUE(keys.insert(key).second) << "two devices share the key " << key;
  }
}

TEST(TuningKey, RecordsOfLookAlikeDevicesDoNotCollide) {
  // One table (in memory), the same operation and signature for every device, a different
  // winner each: every device reads back its own.
  cache::ProgramCache table(cache::CacheOptions{""});
  const std::vector<DeviceInfo> devices = LookAlikeDevices();
  const std::string signature = "fp32->fp32 M=96 N=3025 K=363";
  for (size_t i = 0; i < devices.size(); ++i)
    table.PutTuning({cache::TuningDeviceKey(devices[i]), "gemm", signature,
                     "winner " + std::to_string(i), double(i + 1), ""});
  for (size_t i = 0; i < devices.size(); ++i) {
    auto r = table.GetTuning(cache::TuningDeviceKey(devices[i]), "gemm", signature);
    ASSERT_TRUE(r) << devices[i].name;
    EXPECT_EQ(r->parameters, "winner " + std::to_string(i)) << devices[i].name;
  }
  EXPECT_EQ(table.ListTuning().size(), devices.size());
}

TEST(TuningKey, EachInstalledDeviceUsesItsOwnWinner) {
  // Through the path the layers take (TunedGemmConfig): a different supported configuration
  // stored for every installed device under one signature; each device gets its own. With one
  // device this checks the lookup only; the key test above covers the rest.
  auto store = cache::ActiveProgramCache();
  if (!store) GTEST_SKIP() << "kernel cache disabled (MPCAFFE_CACHE=off): no tuning table";
  GemmDesc d;  // an odd shape nothing else tunes
  d.M = 19;
  d.N = 83;
  d.K = 29;
  d.ldc = 89;
  d.weights = WeightOperand::kA;
  std::set<std::string> keys;
  std::vector<GemmConfig> stored;
  for (Device* dev : DeviceList()) {
    EXPECT_TRUE(keys.insert(cache::TuningDeviceKey(dev->info())).second)
        << "devices " << dev->index() << " and an earlier one share a tuning key";
    GemmConfig c;  // vw = 1 runs on every backend; wg tells the devices apart
    c.tm = 2;
    c.tn = 1;
    c.vw = 1;
    c.wg = 8 << dev->index();
    ASSERT_TRUE(c.Supports(d, dev->backend()));
    store->PutTuning({cache::TuningDeviceKey(dev->info()), "gemm", d.ToString(),
                      "gemm:" + c.ToString(), 1.0, ""});
    stored.push_back(c);
  }
  for (Device* dev : DeviceList())
    EXPECT_TRUE(TunedGemmConfig(*dev, d) == stored[dev->index()])
        << dev->Describe() << ": " << TunedGemmConfig(*dev, d).ToString();
}

}  // namespace
}  // namespace mpcaffe::libdnn

// tests/testing/test_main.cc — GoogleTest entry point shared by every suite. When
// MPCAFFE_DEVICE names a device (the per-device CTest entries set it), the suite says which
// device it runs on, or, when no such device is present, why not, and exits with
// kSkipReturnCode so CTest reports the entry as skipped instead of passing silently.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "device/device.h"

namespace {

constexpr int kSkipReturnCode = 77;  // CTest's SKIP_RETURN_CODE for the per-device entries

/// What scripts/install-deps.sh recorded about the OpenCL implementations it tried to install.
std::string VendorStatus() {
  const char* path = std::getenv("MPCAFFE_VENDOR_STATUS");
  std::ifstream in(path && *path ? path : "/opt/mpcaffe/vendors.txt");
  std::ostringstream os;
  os << in.rdbuf();
  return in ? os.str() : std::string();
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (const char* selector = std::getenv("MPCAFFE_DEVICE"); selector && *selector) {
    mpcaffe::Device* device = nullptr;
    try {
      device = mpcaffe::FindDevice(selector);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "device enumeration failed: %s\n", e.what());
      return 1;
    }
    if (!device) {
      std::printf("SKIPPED: no device matches MPCAFFE_DEVICE=%s on this machine; devices present:\n%s",
                  selector, mpcaffe::DeviceListText().c_str());
      const std::string status = VendorStatus();
      if (!status.empty())
        std::printf("scripts/install-deps.sh recorded:\n%s", status.c_str());
      else
        std::printf("(scripts/install-deps.sh installs PoCL and Intel's OpenCL CPU runtime)\n");
      return kSkipReturnCode;
    }
    const mpcaffe::DeviceInfo& info = device->info();
    std::printf("[ device   ] MPCAFFE_DEVICE=%s -> %s (%s, %s; fp16 %s, integer dot product %s)\n",
                selector, device->Describe().c_str(), info.platform_name.c_str(),
                info.driver_version.c_str(), info.fp16 ? "yes" : "no",
                info.dot_product ? "yes" : "no");
    std::fflush(stdout);
  }
  return RUN_ALL_TESTS();
}

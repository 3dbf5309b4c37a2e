// tests/testing/test_main.cc — GoogleTest entry point shared by every suite. When
// MPCAFFE_DEVICE names a device (the per-device CTest entries set it), the suite says which
// device it runs on, or, when no such device is present, why not, and exits with
// kSkipReturnCode so CTest reports the entry as skipped instead of passing silently. Every test
// skipped inside a suite (GTEST_SKIP) is listed with its reason at the end of the run, one
// "[ skipped  ] Suite.Test: reason" line each (gtest's brief mode hides them), which
// scripts/ctest-devices.sh gathers into make test's closing summary.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

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

/// Collects the tests skipped in this run with their reasons and prints them at the end.
class SkipReporter : public testing::EmptyTestEventListener {
 public:
  void OnTestEnd(const testing::TestInfo& info) override {
    if (!info.result()->Skipped()) return;
    std::string reason;
    const testing::TestResult& r = *info.result();
    for (int i = 0; i < r.total_part_count(); ++i)
      if (r.GetTestPartResult(i).skipped()) {
        reason = r.GetTestPartResult(i).message();
        break;
      }
    for (char& c : reason)
      if (c == '\n') c = ' ';
    if (reason.empty()) reason = "(no reason given)";
    skipped_.push_back(std::string(info.test_suite_name()) + "." + info.name() + ": " + reason);
  }
  void OnTestProgramEnd(const testing::UnitTest&) override {
    for (const std::string& line : skipped_) std::printf("[ skipped  ] %s\n", line.c_str());
    std::fflush(stdout);
  }

 private:
  std::vector<std::string> skipped_;
};

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  testing::UnitTest::GetInstance()->listeners().Append(new SkipReporter);
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
        std::printf("(scripts/install-deps.sh installs PoCL, Intel's OpenCL CPU runtime and "
                    "Mesa's rusticl)\n");
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

// tests/libdnn/registry_build_test.cc — every program text of the kernel-family registry
// (tests/testing/kernel_families.h: libdnn's families and those of codegen/, quant/, layers/ and
// net/) built by this device's compiler. The CUDA suite does the same with NVRTC; here it is the
// OpenCL implementation's compiler, whose front end and code generator differ per runtime
// (PoCL's LLVM, Intel's, Mesa's NIR). Compiling every family costs minutes on a cold cache, so
// the test is part of `make test-sweep` (MPCAFFE_TEST_SWEEP=1) only; what the driver prints
// while building a program (warnings such as Mesa's) is reported per family.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>

#include "device/device.h"
#include "tests/testing/kernel_families.h"
#include "tests/testing/sweep.h"

namespace mpcaffe {
namespace {

using testing_families::KernelFamilies;
using testing_families::KernelFamily;
using testing_families::Sample;

/// What the process writes to stderr while `fn` runs (the driver's own messages), restored
/// afterwards.
template <typename Fn>
std::string CaptureStderr(Fn fn) {
  std::fflush(stderr);
  char path[] = "/tmp/mpcaffe_build_stderr_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) {
    fn();
    return "";
  }
  const int saved = dup(2);
  dup2(fd, 2);
  try {
    fn();
  } catch (...) {
    std::fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd);
    unlink(path);
    throw;
  }
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::string text;
  if (FILE* f = std::fopen(path, "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
    std::fclose(f);
  }
  close(fd);
  unlink(path);
  return text;
}

TEST(RegistryBuild, EveryFamilysProgramsBuildOnThisDevice) {
  if (!test_support::ExhaustiveSweep())
    GTEST_SKIP() << "builds every registered family's programs (minutes cold): make test-sweep";
  Device& dev = DefaultDevice();
  const KernelTarget target = KernelTarget::Of(dev);
  int built = 0;
  std::map<std::string, std::string> driver_messages;
  for (const KernelFamily& family : KernelFamilies()) {
    const std::vector<Sample> samples = family.samples(target);
    EXPECT_FALSE(samples.empty()) << family.name << " enumerates no program";
    for (const Sample& s : samples) {
      std::string said;
      try {
        said = CaptureStderr([&] { dev.GetProgram(s.source); });
        ++built;
      } catch (const std::exception& e) {
        ADD_FAILURE() << family.name << ": " << s.kernel << " does not build on "
                      << dev.info().name << ":\n"
                      << e.what();
      }
      if (!said.empty() && !driver_messages.count(family.name))
        driver_messages[family.name] = s.kernel + ": " + said;
    }
  }
  EXPECT_GT(built, 0);
  std::printf("%d programs of %zu families built on %s\n", built, KernelFamilies().size(),
              dev.info().name.c_str());
  for (const auto& [family, said] : driver_messages)
    std::printf("the driver said while building %s (first program): %s\n", family.c_str(),
                said.c_str());
}

}  // namespace
}  // namespace mpcaffe

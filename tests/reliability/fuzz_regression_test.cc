// tests/reliability/fuzz_regression_test.cc — replays every kept fuzzing input
// (tests/reliability/fuzz_cases/<target>/*: findings of `make fuzz` and hand-written edge cases)
// through the same code the libFuzzer targets run (fuzz/fuzz_inputs.h). Each must end in an
// mpcaffe::Error or succeed; a crash, a sanitizer report or another exception fails the suite.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#define MPCAFFE_FUZZ_WITH_NET
#define MPCAFFE_FUZZ_WITH_CACHE
#define MPCAFFE_FUZZ_WITH_IMAGES
#include "fuzz/fuzz_inputs.h"
#include "tests/testing/paths.h"

namespace mpcaffe {
namespace fs = std::filesystem;
namespace {

fs::path CasesDir(const std::string& target) {
  return mpcaffe::test_support::SourceDir() / "tests/reliability/fuzz_cases" / target;
}

std::vector<std::pair<std::string, std::string>> Cases(const std::string& target) {
  std::vector<std::pair<std::string, std::string>> cases;
  for (const auto& e : fs::directory_iterator(CasesDir(target))) {
    if (!e.is_regular_file() || e.path().filename() == "README") continue;
    std::ifstream in(e.path(), std::ios::binary);
    cases.emplace_back(e.path().filename().string(),
                       std::string(std::istreambuf_iterator<char>(in), {}));
  }
  return cases;
}

const uint8_t* Bytes(const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); }

TEST(FuzzRegression, Prototxt) {
  Device& device = DefaultDevice();
  const uint64_t previous = device.byte_limit();
  device.set_byte_limit(device.bytes_in_use() + fuzz::kFuzzDeviceBytes);
  const auto cases = Cases("prototxt");
  EXPECT_FALSE(cases.empty());
  for (const auto& [name, text] : cases) {
    SCOPED_TRACE(name);
    const uint64_t before = device.bytes_in_use();
    fuzz::RunPrototxtInput(Bytes(text), text.size(), &device);
    EXPECT_EQ(device.bytes_in_use(), before) << "device memory leaked by " << name;
  }
  device.set_byte_limit(previous);
}

TEST(FuzzRegression, Caffemodel) {
  for (const auto& [name, bytes] : Cases("caffemodel")) {
    SCOPED_TRACE(name);
    fuzz::RunCaffemodelInput(Bytes(bytes), bytes.size());
  }
}

TEST(FuzzRegression, Solverstate) {
  for (const auto& [name, bytes] : Cases("solverstate")) {
    SCOPED_TRACE(name);
    fuzz::RunSolverstateInput(Bytes(bytes), bytes.size());
  }
}

TEST(FuzzRegression, Image) {
  for (const auto& [name, bytes] : Cases("image")) {
    SCOPED_TRACE(name);
    fuzz::RunImageInput(Bytes(bytes), bytes.size());
  }
}

TEST(FuzzRegression, CacheFile) {
  for (const auto& [name, bytes] : Cases("cache_file")) {
    SCOPED_TRACE(name);
    fuzz::RunCacheFileInput(Bytes(bytes), bytes.size());
  }
}

}  // namespace
}  // namespace mpcaffe

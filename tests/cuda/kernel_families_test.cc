// tests/cuda/kernel_families_test.cc — the kernel-family registry is complete and honest:
// every KernelWriter the library source constructs names a registered family (so its CUDA text
// is compiled by generated_kernels_test.cc), every registered family's programs say they are
// of that family on both dialects, and the end-of-suite check names an unregistered family.
#include "tests/testing/kernel_families.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/kernel_writer.h"
#include "tests/testing/paths.h"

namespace mpcaffe {
namespace {

using test_support::SourceDir;
using testing_families::FindKernelFamily;
using testing_families::KernelFamilies;
using testing_families::KernelFamily;

std::string ReadAll(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

TEST(KernelFamilies, EveryFamilyTheLibraryConstructsIsRegistered) {
  // A KernelWriter variable `KernelWriter w(<target>, "<family>")`, the train kernels'
  // `Writer(target, "<family>")` (which forwards its `family` parameter) and the convolution
  // generator's member `w(target, "<family>")`.
  const std::regex construction(R"re(KernelWriter\s+\w+\s*\(([^;{}]*)\)\s*;)re");
  const std::regex literal(R"re(^[^,]+,\s*"([a-z0-9_]+)"\s*$)re");
  const std::regex forwarded(R"re(^\s*target\s*,\s*family\s*$)re");
  const std::regex helper(R"re(\b(?:w|Writer)\(\s*target\s*,\s*"([a-z0-9_]+)"\s*\))re");
  std::set<std::string> found;
  int files = 0;
  for (const char* folder :
       {"codegen", "libdnn", "layers", "quant", "net", "device", "cache", "tools", "python"}) {
    const std::filesystem::path dir = SourceDir() / folder;
    if (!std::filesystem::exists(dir)) continue;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".cc" && ext != ".h") continue;
      ++files;
      const std::string text = ReadAll(entry.path());
      const std::string where = std::filesystem::relative(entry.path(), SourceDir()).string();
      for (std::sregex_iterator it(text.begin(), text.end(), construction), end; it != end; ++it) {
        std::smatch m;
        const std::string args = (*it)[1];
        if (std::regex_match(args, m, literal))
          found.insert(m[1]);
        else if (!std::regex_match(args, forwarded))
          ADD_FAILURE() << where << ": `" << it->str()
                        << "` — construct a KernelWriter with its family as a string literal";
      }
      for (std::sregex_iterator it(text.begin(), text.end(), helper), end; it != end; ++it)
        found.insert((*it)[1]);
    }
  }
  ASSERT_GT(files, 20) << "library sources not found under " << SourceDir();
  EXPECT_GE(found.size(), 30u) << "fewer KernelWriter families found than the library has";
  for (const std::string& family : found)
    EXPECT_NE(FindKernelFamily(family), nullptr)
        << "kernel family \"" << family << "\" is constructed in the library but not registered: "
        << "add its CUDA enumerator to tests/testing/kernel_families.cc";
}

TEST(KernelFamilies, EveryRegisteredFamilyNamesItsProgramsInBothDialects) {
  std::set<std::string> names;
  for (const KernelFamily& family : KernelFamilies()) {
    EXPECT_TRUE(names.insert(family.name).second) << family.name << " registered twice";
    for (const KernelTarget& target : {KernelTarget{Backend::kOpenCL}, KernelTarget::Cuda(80)}) {
      const auto samples = family.samples(target);
      EXPECT_FALSE(samples.empty()) << family.name;
      for (const auto& s : samples) {
        EXPECT_EQ(KernelWriter::FamilyOf(s.source), family.name) << s.kernel;
        EXPECT_NE(s.source.find(" " + s.kernel + "("), std::string::npos)
            << family.name << ": no kernel " << s.kernel << " in its sample";
      }
    }
  }
}

TEST(KernelFamilies, EndOfSuiteCheckNamesAnUnregisteredFamily) {
  EXPECT_EQ(testing_families::UnregisteredFamilies({"gemm", "no_such_family", "test_mine", "relu"}),
            std::vector<std::string>{"no_such_family"});
  KernelWriter w(KernelTarget{Backend::kOpenCL}, "test_families");
  w.Kernel("k").Body("");
  EXPECT_EQ(KernelWriter::FamilyOf(w.Source()), "test_families");
  const auto generated = KernelWriter::GeneratedFamilies();
  EXPECT_NE(std::find(generated.begin(), generated.end(), "test_families"), generated.end());
  EXPECT_THROW(KernelWriter(KernelTarget{Backend::kOpenCL}, ""), std::invalid_argument);
  EXPECT_THROW(KernelWriter(KernelTarget{Backend::kOpenCL}, "Gemm int4"), std::invalid_argument);
}

}  // namespace
}  // namespace mpcaffe

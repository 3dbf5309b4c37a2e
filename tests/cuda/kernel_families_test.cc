// tests/cuda/kernel_families_test.cc — the kernel-family registry is complete and honest:
// every KernelWriter the library source constructs names a registered family (so its CUDA text
// is compiled by generated_kernels_test.cc), every registered family's programs say they are
// of that family on both dialects, the Oclgrind sweep's table covers libdnn's registry, and the
// end-of-suite check names an unregistered family.
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
#include "libdnn/kernel_families.h"
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

// The Oclgrind sweep's table (scripts/oclgrind.sh) names, per row, the libdnn families its tests
// generate; together the rows cover the library's registry, and name registered families only.
TEST(KernelFamilies, EveryLibdnnFamilyRunsUnderOclgrind) {
  const std::string script = ReadAll(SourceDir() / "scripts" / "oclgrind.sh");
  const size_t begin = script.find("FAMILY_TABLE=\"");
  ASSERT_NE(begin, std::string::npos) << "no FAMILY_TABLE in scripts/oclgrind.sh";
  const size_t end = script.find('"', begin + 14);
  ASSERT_NE(end, std::string::npos);
  std::istringstream table(script.substr(begin + 14, end - begin - 14));
  std::set<std::string> covered;
  int rows = 0;
  for (std::string line; std::getline(table, line);) {
    if (line.find('|') == std::string::npos) continue;
    ++rows;
    ASSERT_EQ(std::count(line.begin(), line.end(), '|'), 3)
        << "scripts/oclgrind.sh: a row of name | binary | filter | families expected: " << line;
    std::istringstream words(line.substr(line.rfind('|') + 1));
    for (std::string family; words >> family;) {
      EXPECT_NE(FindKernelFamily(family), nullptr)
          << "scripts/oclgrind.sh names kernel family " << family << ", which is not registered";
      covered.insert(family);
    }
  }
  EXPECT_GE(rows, 10) << "scripts/oclgrind.sh's FAMILY_TABLE not read";
  for (const libdnn::KernelFamilyEntry& entry : libdnn::KernelFamilyRegistry())
    EXPECT_TRUE(covered.count(entry.name))
        << "libdnn kernel family " << entry.name << " runs in no row of scripts/oclgrind.sh's "
        << "FAMILY_TABLE: add its tests' filter and name it in the last column";
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

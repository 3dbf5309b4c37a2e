// tests/tools/settings_doc_test.cc — README.md's settings table names every MPCAFFE_* variable
// the library reads (device/settings.cc, the one reader of the environment) and every one the
// Python package reads (python/mpcaffe/*.py), so a new setting cannot stay undocumented.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "tests/testing/paths.h"

namespace {

namespace fs = std::filesystem;

std::string ReadText(const fs::path& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << "cannot read " << path;
  std::stringstream text;
  text << f.rdbuf();
  return text.str();
}

/// Every first capture group of `pattern` in `text`.
std::set<std::string> Matches(const std::string& text, const std::regex& pattern) {
  std::set<std::string> out;
  for (std::sregex_iterator it(text.begin(), text.end(), pattern), end; it != end; ++it)
    out.insert((*it)[1].str());
  return out;
}

/// The variable names of the table rows ("| `MPCAFFE_X=...` | ...") of README.md's section
/// "## Settings", up to its next heading.
std::set<std::string> DocumentedSettings(const std::string& readme) {
  std::set<std::string> names;
  std::istringstream lines(readme);
  bool inside = false;
  const std::regex row(R"(^\|\s*`(MPCAFFE_[A-Z0-9_]+))");
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("#", 0) == 0) {
      if (inside) break;
      inside = line.rfind("## Settings", 0) == 0;
      continue;
    }
    std::smatch m;
    if (inside && std::regex_search(line, m, row)) names.insert(m[1].str());
  }
  return names;
}

TEST(SettingsDoc, ReadmeTableNamesEveryVariableTheCodeReads) {
  const fs::path source = mpcaffe::test_support::SourceDir();
  const std::set<std::string> documented = DocumentedSettings(ReadText(source / "README.md"));
  ASSERT_FALSE(documented.empty()) << "README.md has no \"## Settings\" section with a table";

  // device/settings.cc reads each variable by its name as a string literal.
  std::set<std::string> read = Matches(ReadText(source / "device" / "settings.cc"),
                                       std::regex(R"#("(MPCAFFE_[A-Z0-9_]+)")#"));
  ASSERT_FALSE(read.empty()) << "no MPCAFFE_ name found in device/settings.cc";
  // The Python package: os.environ["X"], os.environ.get("X"), os.getenv("X"), ...
  const std::regex python(
      R"#((?:environ\s*(?:\.\s*(?:get|setdefault|pop))?\s*[\[(]|getenv\s*\()\s*["'](MPCAFFE_[A-Z0-9_]+)["'])#");
  for (const auto& entry : fs::recursive_directory_iterator(source / "python" / "mpcaffe"))
    if (entry.path().extension() == ".py")
      for (const std::string& name : Matches(ReadText(entry.path()), python)) read.insert(name);

  for (const std::string& name : read)
    EXPECT_TRUE(documented.count(name))
        << name << " is read by the code but missing from README.md's settings table";
}

}  // namespace

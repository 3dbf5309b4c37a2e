// tests/tools/docs_test.cc — the reference documents stay references: README.md's settings table
// names every MPCAFFE_* variable the library reads (device/settings.cc, the one reader of the
// environment) and every one the Python package reads (python/mpcaffe/*.py), so a new setting
// cannot stay undocumented; README.md carries no dates (no timing history); docs/BENCHMARKS.md's
// headings name no issue, branch, date or time, each of its tables lies between the markers of
// the scripts/bench.sh step that writes it (or in a notes section).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

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

/// The variable names of the table rows of README.md's section "## Settings", up to its next
/// heading: every `MPCAFFE_X` of a row's first cell ("| `MPCAFFE_X=...`, `MPCAFFE_Y` | ...").
std::set<std::string> DocumentedSettings(const std::string& readme) {
  std::set<std::string> names;
  std::istringstream lines(readme);
  bool inside = false;
  const std::regex name("`(MPCAFFE_[A-Z0-9_]+)");
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("#", 0) == 0) {
      if (inside) break;
      inside = line.rfind("## Settings", 0) == 0;
      continue;
    }
    if (!inside || line.rfind("|", 0) != 0) continue;
    size_t end = 1;  // the first cell ends at the first '|' not escaped as "\|"
    while (end < line.size() && (line[end] != '|' || line[end - 1] == '\\')) ++end;
    for (const std::string& n : Matches(line.substr(0, end), name)) names.insert(n);
  }
  return names;
}

/// Every MPCAFFE_* variable the project's own code reads from the environment, outside tests/
/// (whose variables pass values between a test and its child processes): C++ by the name as a
/// string literal (device/settings.cc, the library's one reader, and the bench programs), Python
/// through os.environ / os.getenv, shell scripts and the Makefile by expansion, CMake by $ENV{}.
std::set<std::string> VariablesTheCodeReads(const fs::path& source) {
  const std::regex cpp(R"#("(MPCAFFE_[A-Z0-9_]+)")#");
  const std::regex python(
      R"#((?:environ\s*(?:\.\s*(?:get|setdefault|pop))?\s*[\[(]|getenv\s*\()\s*["'](MPCAFFE_[A-Z0-9_]+)["'])#");
  const std::regex shell(R"(\$[{(]?(MPCAFFE_[A-Z0-9_]+))");
  const std::regex cmake(R"(\$ENV\{(MPCAFFE_[A-Z0-9_]+))");  // ${X} is CMake's own variable
  std::set<std::string> read;
  auto scan = [&](const fs::path& file) {
    const std::string ext = file.extension().string(), name = file.filename().string();
    const std::regex* pattern = ext == ".cc" || ext == ".h"                   ? &cpp
                                : ext == ".py"                                ? &python
                                : ext == ".sh" || name == "Makefile"          ? &shell
                                : ext == ".cmake" || name == "CMakeLists.txt" ? &cmake
                                                                              : nullptr;
    if (pattern)
      for (const std::string& v : Matches(ReadText(file), *pattern)) read.insert(v);
  };
  for (const auto& top : fs::directory_iterator(source)) {
    const std::string name = top.path().filename().string();
    if (name == "tests" || name == "build" || name[0] == '.') continue;
    if (top.is_regular_file()) {
      scan(top.path());
      continue;
    }
    if (!top.is_directory()) continue;
    for (auto it = fs::recursive_directory_iterator(top.path()); it != fs::end(it); ++it) {
      const std::string part = it->path().filename().string();
      if (it->is_directory() && (part[0] == '.' || part == "build" || part == "__pycache__"))
        it.disable_recursion_pending();
      else if (it->is_regular_file())
        scan(it->path());
    }
  }
  return read;
}

TEST(SettingsDoc, ReadmeTableNamesEveryVariableTheCodeReads) {
  const fs::path source = mpcaffe::test_support::SourceDir();
  const std::set<std::string> documented = DocumentedSettings(ReadText(source / "README.md"));
  ASSERT_FALSE(documented.empty()) << "README.md has no \"## Settings\" section with a table";
  const std::set<std::string> read = VariablesTheCodeReads(source);
  // A guard on the scan itself: the library's own reader and the Python package are in it.
  for (const char* known : {"MPCAFFE_DEVICE", "MPCAFFE_CACHE", "MPCAFFE_SHARED_DIR"})
    EXPECT_TRUE(read.count(known)) << known << " was not found by the scan";
  for (const std::string& name : read)
    EXPECT_TRUE(documented.count(name))
        << name << " is read by the code but missing from README.md's settings table";
}

/// The lines of `text` outside ``` code blocks.
std::vector<std::string> ProseLines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream lines(text);
  bool code = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("```", 0) == 0)
      code = !code;
    else if (!code)
      out.push_back(line);
  }
  return out;
}

// What makes a heading or a README line a diary entry: an issue number, a work branch, a date
// (ISO, a year, a month's name) or a time of day.
const std::regex kDiary(
    R"((\bissue\b|#[0-9]+|\bbranch\b|\b20[0-9]{2}\b|\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.? [0-9]{1,2}\b|\b[0-9]{1,2}:[0-5][0-9]\b))",
    std::regex::icase);

TEST(BenchmarksDoc, NoHeadingNamesAnIssueABranchADateOrATime) {
  const fs::path source = mpcaffe::test_support::SourceDir();
  int headings = 0;
  for (const std::string& line : ProseLines(ReadText(source / "docs" / "BENCHMARKS.md"))) {
    if (line.rfind("#", 0) != 0) continue;
    ++headings;
    EXPECT_FALSE(std::regex_search(line, kDiary))
        << "docs/BENCHMARKS.md: a heading names an issue, a branch, a date or a time (the "
           "history belongs in git log): "
        << line;
  }
  EXPECT_GT(headings, 5) << "docs/BENCHMARKS.md has almost no headings: was it read?";
}

TEST(ReadmeDoc, NoDatesInTheReadme) {
  // Figures in README.md are current values with the command that gives them; a date means a
  // timing history, which belongs in git log.
  const std::regex date(R"(\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b)");
  const std::vector<std::string> lines =
      ProseLines(ReadText(mpcaffe::test_support::SourceDir() / "README.md"));
  ASSERT_GT(lines.size(), 50u);
  for (const std::string& line : lines)
    EXPECT_FALSE(std::regex_search(line, date)) << "README.md has a dated line: " << line;
}

TEST(BenchmarksDoc, EveryGeneratedTableHasTheBenchStepThatWritesIt) {
  // Each "<!-- bench.sh:<step>:begin -->" / "end" pair of docs/BENCHMARKS.md is written by
  // scripts/bench.sh (its splice_table call for the step, or the marker spelled out there), so a
  // table between markers is never left without a generator.
  const fs::path source = mpcaffe::test_support::SourceDir();
  const std::string doc = ReadText(source / "docs" / "BENCHMARKS.md");
  const std::string bench = ReadText(source / "scripts" / "bench.sh");
  const std::set<std::string> begins =
      Matches(doc, std::regex(R"(<!-- bench\.sh:([a-z0-9]*:?)begin -->)"));
  const std::set<std::string> ends =
      Matches(doc, std::regex(R"(<!-- bench\.sh:([a-z0-9]*:?)end -->)"));
  EXPECT_EQ(begins, ends) << "docs/BENCHMARKS.md: a bench.sh begin marker without its end, or "
                             "the other way round";
  EXPECT_GE(begins.size(), 10u);
  for (std::string step : begins) {
    if (!step.empty()) step.pop_back();  // "gemm:" → "gemm"; "" is the network tables' step
    const bool written = step.empty()
                             ? bench.find("splice(text, \"\", ") != std::string::npos
                             : bench.find("splice_table " + step + " ") != std::string::npos ||
                                   bench.find("\"" + step + ":\"") != std::string::npos ||
                                   bench.find("bench.sh:" + step + ":begin") != std::string::npos;
    EXPECT_TRUE(written) << "docs/BENCHMARKS.md has markers of a bench.sh step '" << step
                         << "' that scripts/bench.sh does not write";
  }
}

TEST(BenchmarksDoc, EveryTableIsWrittenByMakeBenchOrIsANote) {
  // docs/BENCHMARKS.md is regenerated by `make bench`: a table lies between a step's markers,
  // or in a notes section (a heading naming notes: what was learned about a runtime), or in the
  // defaults' provenance table, which the defaults tables of libdnn/ generate.
  const std::string doc = ReadText(mpcaffe::test_support::SourceDir() / "docs" / "BENCHMARKS.md");
  std::string h2, h3, step;
  bool generated = false;
  int tables = 0;
  const std::regex marker(R"(^<!-- bench\.sh:([a-z0-9]*:?)(begin|end) -->)");
  const std::regex notes("notes", std::regex::icase);
  for (const std::string& line : ProseLines(doc)) {
    std::smatch m;
    if (std::regex_search(line, m, marker)) {
      generated = m[2] == "begin";
      continue;
    }
    if (line.rfind("## ", 0) == 0) h2 = line, h3.clear();
    if (line.rfind("### ", 0) == 0) h3 = line;
    if (line.rfind("|", 0) != 0) continue;
    ++tables;
    if (generated) continue;
    const bool allowed = std::regex_search(h2, notes) || std::regex_search(h3, notes) ||
                         h3 == "### Default configurations and the measurements behind them";
    EXPECT_TRUE(allowed) << "docs/BENCHMARKS.md: a table under \"" << h2 << "\" / \"" << h3
                         << "\" is outside every bench.sh step's markers (make bench cannot "
                            "regenerate it): "
                         << line.substr(0, 80);
  }
  EXPECT_FALSE(generated) << "docs/BENCHMARKS.md ends inside a bench.sh marker pair";
  EXPECT_GT(tables, 50) << "docs/BENCHMARKS.md has almost no table rows: was it read?";
}

}  // namespace

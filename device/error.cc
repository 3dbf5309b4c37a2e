// device/error.cc — formatting of build failures with the numbered source lines around the
// first error the driver's log points at.
#include "device/error.h"

#include <algorithm>
#include <regex>
#include <sstream>
#include <vector>

namespace mpcaffe {

namespace {

/// First source line number the log names: "<source>:12:5: error" (clang/PoCL, NVRTC
/// "kernel.cu(12): error") — 0 when none.
int FirstErrorLine(const std::string& log) {
  static const std::regex clang_style(R"(:(\d+):\d+: (?:fatal )?error)");
  static const std::regex nvrtc_style(R"(\((\d+)\): (?:catastrophic )?error)");
  std::smatch m;
  if (std::regex_search(log, m, clang_style)) return std::stoi(m[1]);
  if (std::regex_search(log, m, nvrtc_style)) return std::stoi(m[1]);
  static const std::regex any_line(R"(:(\d+):\d+:)");
  if (std::regex_search(log, m, any_line)) return std::stoi(m[1]);
  return 0;
}

}  // namespace

std::string FormatBuildFailure(const std::string& what, const std::string& device,
                               const std::string& options, const std::string& log,
                               const std::string& source) {
  std::vector<std::string> lines;
  std::istringstream in(source);
  for (std::string line; std::getline(in, line);) lines.push_back(line);

  std::ostringstream os;
  os << what << "\n  device:  " << device << "\n  options: " << (options.empty() ? "(none)" : options)
     << "\n  driver log:\n";
  std::istringstream log_in(log);
  for (std::string line; std::getline(log_in, line);) os << "    " << line << "\n";

  const int error_line = FirstErrorLine(log);
  const int n = static_cast<int>(lines.size());
  int first = 1, last = std::min(n, 10);
  if (error_line > 0 && error_line <= n) {
    first = std::max(1, error_line - 4);
    last = std::min(n, error_line + 4);
    os << "  source around line " << error_line << ":\n";
  } else {
    os << "  source (first lines):\n";
  }
  for (int i = first; i <= last; ++i) {
    char prefix[32];
    std::snprintf(prefix, sizeof prefix, "%s%5d| ", i == error_line ? "  >>" : "    ", i);
    os << prefix << lines[i - 1] << "\n";
  }
  return os.str();
}

}  // namespace mpcaffe

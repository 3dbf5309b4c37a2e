// bench/defaults_table.cc — prints every kernel family's defaults table (device class,
// configuration, the measurement behind it) from the library's own rows: the "Default
// configurations" table of docs/BENCHMARKS.md that scripts/bench.sh's defaults step writes.
// `mpcaffe_defaults --markdown`; no device is opened.
#include <cstdio>
#include <string>

#include "libdnn/defaults_listing.h"

int main(int argc, char** argv) {
  const char* usage = "usage: mpcaffe_defaults --markdown\n";
  if (argc != 2 || std::string(argv[1]) != "--markdown") {
    if (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
      std::fputs(usage, stdout);
      return 0;
    }
    std::fprintf(
        stderr, "mpcaffe_defaults: %s\n%s",
        argc < 2 ? "no argument" : ("unknown argument '" + std::string(argv[1]) + "'").c_str(),
        usage);
    return 2;
  }
  std::fputs(mpcaffe::libdnn::DefaultsMarkdown().c_str(), stdout);
  return 0;
}

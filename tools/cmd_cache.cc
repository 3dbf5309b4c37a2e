// tools/cmd_cache.cc — `mpcaffe cache stats [--json] | path | clear | tuning`: inspect and
// empty the kernel cache file (four subcommands, each registered on its own).
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "cache/program_cache.h"
#include "tools/command.h"

namespace mpcaffe::tools {
namespace {

std::string HumanBytes(uint64_t bytes) {
  char text[32];
  if (bytes >= (1u << 20))
    std::snprintf(text, sizeof text, "%.1f MiB", bytes / 1048576.0);
  else if (bytes >= 1024)
    std::snprintf(text, sizeof text, "%.1f KiB", bytes / 1024.0);
  else
    std::snprintf(text, sizeof text, "%" PRIu64 " B", bytes);
  return text;
}

cache::CacheOptions ExistingFile(const std::string& path) {
  cache::CacheOptions options;
  options.path = path;
  options.busy_timeout_ms = 3000;
  options.create = false;  // inspecting a cache never creates one
  return options;
}

int Stats(bool json) {
  std::string why;
  const std::string path = cache::DefaultCachePath(&why);
  if (path.empty()) {
    if (json)
      std::printf(
          "{\"path\": \"\", \"enabled\": false, \"programs\": 0, \"tuning_records\": 0, "
          "\"bytes\": 0, \"hits\": 0, \"misses\": 0}\n");
    else
      std::printf("kernel cache disabled (%s)\n",
                  why == "MPCAFFE_CACHE" ? "MPCAFFE_CACHE=off" : "no HOME or XDG_CACHE_HOME");
    return 0;
  }
  cache::ProgramCache store(ExistingFile(path));
  const cache::CacheFileStats s = store.FileStats();
  if (json) {
    std::printf(
        "{\"path\": \"%s\", \"enabled\": true, \"state\": \"%s\", \"file_exists\": %s, "
        "\"programs\": %" PRIu64 ", \"tuning_records\": %" PRIu64 ", \"bytes\": %" PRIu64
        ", \"file_bytes\": %" PRIu64 ", \"hits\": %" PRIu64 ", \"misses\": %" PRIu64
        ", \"compiles\": %" PRIu64 ", \"compile_seconds\": %.6f, \"loads\": %" PRIu64
        ", \"load_seconds\": %.6f}\n",
        JsonEscape(s.path).c_str(), s.file_exists ? cache::CacheStateName(s.state) : "absent",
        s.file_exists ? "true" : "false", s.programs, s.tuning_records, s.bytes, s.file_bytes,
        s.hits, s.misses, s.compiles, s.compile_seconds, s.loads, s.load_seconds);
    return 0;
  }
  std::printf("path            %s (from %s)\n", s.path.c_str(), why.c_str());
  if (!s.file_exists) {
    std::printf("state           no file yet (created by the first program build)\n");
    return 0;
  }
  std::printf("state           %s\n", cache::CacheStateName(s.state));
  std::printf("programs        %" PRIu64 " (%s of binaries)\n", s.programs,
              HumanBytes(s.bytes).c_str());
  std::printf("tuning records  %" PRIu64 "\n", s.tuning_records);
  std::printf("file size       %s\n", HumanBytes(s.file_bytes).c_str());
  std::printf("hits / misses   %" PRIu64 " / %" PRIu64 " (all processes so far)\n", s.hits,
              s.misses);
  std::printf("compiled        %" PRIu64 " programs in %.3f s\n", s.compiles, s.compile_seconds);
  std::printf("loaded          %" PRIu64 " programs in %.3f s\n", s.loads, s.load_seconds);
  return 0;
}

int Path() {
  std::string why;
  const std::string path = cache::DefaultCachePath(&why);
  if (path.empty()) {
    std::printf("off\n");
    return 0;
  }
  std::printf("%s\n", path.c_str());
  return 0;
}

int Clear() {
  const std::string path = cache::DefaultCachePath();
  if (path.empty()) {
    std::printf("kernel cache disabled; nothing to clear\n");
    return 0;
  }
  cache::ProgramCache store(ExistingFile(path));
  const cache::CacheFileStats before = store.FileStats();
  if (!before.file_exists) {
    std::printf("%s does not exist; nothing to clear\n", path.c_str());
    return 0;
  }
  if (!store.Clear()) {
    std::fprintf(stderr, "mpcaffe cache clear: %s could not be written (%s)\n", path.c_str(),
                 store.last_problem().c_str());
    return 1;
  }
  std::printf("cleared %" PRIu64 " programs and %" PRIu64 " tuning records from %s\n",
              before.programs, before.tuning_records, path.c_str());
  return 0;
}

int Tuning(const std::vector<std::string>& args) {
  const std::string path = cache::DefaultCachePath();
  if (path.empty()) {
    std::printf("kernel cache disabled\n");
    return 0;
  }
  cache::ProgramCache store(ExistingFile(path));
  const auto records =
      store.ListTuning(FlagValue(args, "--device"), FlagValue(args, "--operation"));
  if (HasFlag(args, "--json")) {
    std::printf("[");
    for (size_t i = 0; i < records.size(); ++i) {
      const auto& r = records[i];
      std::printf(
          "%s\n {\"device\": \"%s\", \"operation\": \"%s\", \"signature\": \"%s\", "
          "\"parameters\": \"%s\", \"time_ms\": %.6f, \"date\": \"%s\"}",
          i ? "," : "", JsonEscape(r.device).c_str(), JsonEscape(r.operation).c_str(),
          JsonEscape(r.signature).c_str(), JsonEscape(r.parameters).c_str(), r.time_ms,
          JsonEscape(r.date).c_str());
    }
    std::printf("%s]\n", records.empty() ? "" : "\n");
    return 0;
  }
  for (const auto& r : records)
    std::printf("%s  %s  %s  [%s]  %.4f ms  %s\n", r.device.c_str(), r.operation.c_str(),
                r.signature.c_str(), r.parameters.c_str(), r.time_ms, r.date.c_str());
  std::printf("%zu tuning record(s)\n", records.size());
  return 0;
}

// The four subcommands: `mpcaffe cache` alone lists them (tools/mpcaffe.cc).
const RegisterCommand stats_command(
    "cache stats", "kernel cache: programs, tuning records, bytes, hits and misses (--json)",
    "usage: mpcaffe cache stats [--json]   counts, bytes, hits and misses\n", {{}, {"--json"}},
    [](const std::vector<std::string>& args) { return Stats(HasFlag(args, "--json")); });
const RegisterCommand path_command(
    "cache path", "kernel cache: the file's path (or \"off\")",
    "usage: mpcaffe cache path             the cache file: MPCAFFE_CACHE (a path, or \"off\"),\n"
    "                                      else $XDG_CACHE_HOME/mpcaffe/kernels.sqlite, else\n"
    "                                      ~/.cache/mpcaffe/kernels.sqlite\n",
    {}, [](const std::vector<std::string>&) { return Path(); });
const RegisterCommand clear_command(
    "cache clear", "kernel cache: delete every stored program and tuning record",
    "usage: mpcaffe cache clear            delete every stored program and tuning record\n", {},
    [](const std::vector<std::string>&) { return Clear(); });
const RegisterCommand tuning_command(
    "cache tuning", "kernel cache: list the tuning records (--device D, --operation OP, --json)",
    "usage: mpcaffe cache tuning [--device D] [--operation OP] [--json]\n"
    "                                      the tuning records; --device and --operation keep\n"
    "                                      those whose key has exactly that device or operation\n",
    {{"--device", "--operation"}, {"--json"}}, Tuning);

}  // namespace
}  // namespace mpcaffe::tools

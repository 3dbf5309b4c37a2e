// tools/mpcaffe.cc — the `mpcaffe` command line: dispatches to the registered commands.
#include <cstdio>
#include <exception>

#include "cache/program_cache.h"
#include "mpcaffe/version.h"
#include "tools/command.h"

namespace mpcaffe::tools {

std::map<std::string, Command>& Commands() {
  static std::map<std::string, Command> commands;
  return commands;
}

bool HasFlag(const std::vector<std::string>& args, const std::string& flag) {
  for (const auto& a : args)
    if (a == flag) return true;
  return false;
}

std::string FlagValue(const std::vector<std::string>& args, const std::string& flag,
                      const std::string& fallback) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == flag && i + 1 < args.size()) return args[i + 1];
    if (args[i].rfind(flag + "=", 0) == 0) return args[i].substr(flag.size() + 1);
  }
  return fallback;
}

const char* DtypeLabel(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return "fp32";
    case DataType::kFloat16:
      return "fp16";
    case DataType::kInt16Q:
      return "int16";
    case DataType::kInt8Q:
      return "int8";
  }
  return "?";
}

std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

static int Usage(FILE* out) {
  std::fprintf(out, "usage: mpcaffe <command> [options]   (mpcaffe --version: the version)\n\n"
                   "commands:\n");
  for (const auto& [name, cmd] : Commands())
    std::fprintf(out, "  %-10s %s\n", name.c_str(), cmd.summary.c_str());
  return out == stderr ? 2 : 0;
}

}  // namespace mpcaffe::tools

int main(int argc, char** argv) {
  using namespace mpcaffe::tools;
  if (argc < 2) return Usage(stderr);
  std::string name = argv[1];
  if (name == "-h" || name == "--help" || name == "help") return Usage(stdout);
  if (name == "--version" || name == "version") {
    std::printf("mpcaffe %s\n", MPCAFFE_VERSION);
    return 0;
  }
  auto it = Commands().find(name);
  if (it == Commands().end()) {
    std::fprintf(stderr, "mpcaffe: unknown command '%s'\n\n", name.c_str());
    return Usage(stderr);
  }
  try {
    // Every program the command builds goes through the kernel cache (MPCAFFE_CACHE=off
    // disables it).
    mpcaffe::cache::EnableProgramCache();
    return it->second.run(std::vector<std::string>(argv + 2, argv + argc));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpcaffe %s: error: %s\n", name.c_str(), e.what());
    return 1;
  }
}

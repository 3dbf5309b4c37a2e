// tools/mpcaffe.cc — the `mpcaffe` command line: checks a command's arguments against its flag
// table and dispatches to it (RunCommandLine: the program's main and, in the Python package,
// `python -m mpcaffe`).
#include <algorithm>
#include <cctype>
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

namespace {

/// Whether an argument is a flag: '-' and more, not a negative number.
bool IsFlag(const std::string& a) {
  return a.size() > 1 && a[0] == '-' && !std::isdigit(static_cast<unsigned char>(a[1])) &&
         a[1] != '.';
}

bool Contains(const std::vector<std::string>& list, const std::string& s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

/// Whether `word` is the first word of subcommands ("bench", "cache").
bool IsGroup(const std::string& word) {
  const auto it = Commands().lower_bound(word + " ");
  return it != Commands().end() && it->first.rfind(word + " ", 0) == 0;
}

/// The listed subcommands of a group, "gemm, net".
std::string Subcommands(const std::string& group) {
  std::string list;
  for (const auto& [name, cmd] : Commands())
    if (name.rfind(group + " ", 0) == 0 && !cmd.summary.empty())
      list += (list.empty() ? "" : ", ") + name.substr(group.size() + 1);
  return list;
}

}  // namespace

std::vector<std::string> GflagsArguments(const CommandFlags& flags,
                                         const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (std::string a : args) {
    if (IsFlag(a) && a[1] != '-' && a != "-h") a = "-" + a;
    const size_t eq = a.find('=');
    if (IsFlag(a) && eq != std::string::npos && Contains(flags.switches, a.substr(0, eq))) {
      std::string v = a.substr(eq + 1);
      for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (v == "true" || v == "1" || v == "yes" || v == "t" || v == "y") {
        out.push_back(a.substr(0, eq));
        continue;
      }
      if (v == "false" || v == "0" || v == "no" || v == "f" || v == "n") continue;
    }
    out.push_back(a);
  }
  return out;
}

ParsedArguments ParseArguments(const CommandFlags& flags,
                               const std::vector<std::string>& given_args) {
  const std::vector<std::string> args =
      flags.gflags ? GflagsArguments(flags, given_args) : given_args;
  ParsedArguments parsed;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (!IsFlag(a)) {
      if (static_cast<int>(parsed.operands.size()) >= flags.max_operands) {
        parsed.error = "unexpected argument '" + a + "'";
        break;
      }
      parsed.operands.push_back(a);
      continue;
    }
    if (a == "--help" || a == "-h") {
      parsed.help = true;
      continue;
    }
    const size_t eq = a.find('=');
    const std::string name = a.substr(0, eq);
    if (Contains(flags.values, name)) {
      if (eq == std::string::npos && ++i >= args.size()) {
        parsed.error = "no value after '" + name + "'";
        break;
      }
      continue;
    }
    if (Contains(flags.switches, name)) {
      if (eq != std::string::npos) {
        parsed.error = "'" + name + "' takes no value" + (flags.gflags ? " but true or false" : "");
        break;
      }
      continue;
    }
    parsed.error = "unknown flag '" + name + "'";
    break;
  }
  return parsed;
}

std::string CommandUsage(const std::string& name) {
  std::string text;
  if (const auto it = Commands().find(name); it != Commands().end()) text = it->second.usage;
  for (const auto& [other, cmd] : Commands())
    if (other.rfind(name + " ", 0) == 0 && !cmd.summary.empty()) text += cmd.usage;
  return text;
}

int UsageError(const std::string& name, const std::string& why) {
  std::fprintf(stderr, "mpcaffe %s: %s\n%s", name.c_str(), why.c_str(), CommandUsage(name).c_str());
  return 2;
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
  std::fprintf(out,
               "usage: mpcaffe <command> [options]   (mpcaffe <command> --help: its options;\n"
               "       mpcaffe --version: the version; mpcaffe --commands: every command)\n\n"
               "commands:\n");
  for (const auto& [name, cmd] : Commands())
    if (!cmd.summary.empty()) std::fprintf(out, "  %-14s %s\n", name.c_str(), cmd.summary.c_str());
  return out == stderr ? 2 : 0;
}

int RunCommandLine(int argc, char** argv) {
  if (argc < 2) return Usage(stderr);
  std::string name = argv[1];
  if (name == "-h" || name == "--help" || name == "help") return Usage(stdout);
  if (name == "--version" || name == "version") {
    std::printf("mpcaffe %s\n", MPCAFFE_VERSION);
    return 0;
  }
  if (name == "--commands") {  // one per line, internal ones too (shell completion, the tests)
    for (const auto& entry : Commands()) std::printf("%s\n", entry.first.c_str());
    return 0;
  }
  // A subcommand ("bench net") before a command of the first word alone ("tune").
  int first = 2;
  if (argc > 2 && Commands().count(name + " " + argv[2])) {
    name += std::string(" ") + argv[2];
    first = 3;
  }
  const std::vector<std::string> args(argv + first, argv + argc);
  const auto it = Commands().find(name);
  if (it == Commands().end()) {
    if (!IsGroup(name)) {
      std::fprintf(stderr, "mpcaffe: unknown command '%s'\n\n", name.c_str());
      return Usage(stderr);
    }
    if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
      std::fputs(CommandUsage(name).c_str(), stdout);
      return 0;
    }
    if (args.empty()) return UsageError(name, "which one? " + Subcommands(name));
    return UsageError(
        name, std::string(IsFlag(args[0]) ? "unknown flag '" : "unknown subcommand '") +
                  args[0].substr(0, args[0].find('=')) + "' (subcommands: " + Subcommands(name) +
                  ")");
  }
  const ParsedArguments parsed = ParseArguments(it->second.flags, args);
  if (parsed.help) {
    std::fputs(CommandUsage(name).c_str(), stdout);
    return 0;
  }
  if (!parsed.error.empty()) return UsageError(name, parsed.error);
  try {
    // Every program the command builds goes through the kernel cache (MPCAFFE_CACHE=off
    // disables it).
    mpcaffe::cache::EnableProgramCache();
    return it->second.run(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpcaffe %s: error: %s\n", name.c_str(), e.what());
    return 1;
  }
}

}  // namespace mpcaffe::tools

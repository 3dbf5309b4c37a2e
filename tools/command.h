// tools/command.h — how each `mpcaffe <command>` registers itself with the command line.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "codegen/datatype.h"

namespace mpcaffe::tools {

/// A subcommand: receives the arguments after its name; returns the process exit code.
struct Command {
  std::string summary;
  std::function<int(const std::vector<std::string>& args)> run;
};

std::map<std::string, Command>& Commands();

/// Defined at namespace scope in a tools/cmd_*.cc file: registers a command before main().
struct RegisterCommand {
  RegisterCommand(const std::string& name, std::string summary,
                  std::function<int(const std::vector<std::string>&)> run) {
    Commands()[name] = Command{std::move(summary), std::move(run)};
  }
};

/// Small argument helpers shared by the commands.
bool HasFlag(const std::vector<std::string>& args, const std::string& flag);
/// Value of "--flag value" or "--flag=value", or `fallback`.
std::string FlagValue(const std::vector<std::string>& args, const std::string& flag,
                      const std::string& fallback = "");
/// Escapes a string for a JSON string literal (without the quotes).
std::string JsonEscape(const std::string& s);

/// "fp32", "fp16", "int16", "int8": the data type as the benchmarks' JSON and tables name it.
const char* DtypeLabel(DataType t);

}  // namespace mpcaffe::tools

// tools/command.h — how each `mpcaffe <command>` registers itself with the command line: its
// name, summary, usage and flag table, from which the dispatcher (tools/mpcaffe.cc) rejects an
// argument the command does not know before the command runs.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "codegen/datatype.h"

namespace mpcaffe::tools {

/// The arguments a command accepts: flags followed by a value ("--model m" or "--model=m"),
/// flags that stand alone ("--json"), and how many operands (arguments that are not flags:
/// convert_mnist's three files, tune gemm's M N K) may follow. "--help" and "-h" are every
/// command's. An argument starting with '-' (and not a number) is a flag.
struct CommandFlags {
  std::vector<std::string> values;
  std::vector<std::string> switches;
  int max_operands = 0;
  /// Also accept gflags' spellings, for the commands BVLC Caffe's tools have (convert_imageset,
  /// compute_image_mean): one dash ("-gray", "-backend=lmdb") and a switch given a truth value
  /// ("--gray=true", "--shuffle=0"). The command reads GflagsArguments(flags, args).
  bool gflags = false;
};

/// `args` in the spelling HasFlag and FlagValue read: "-flag…" becomes "--flag…", a switch
/// given true/1/yes/t/y stands alone and one given false/0/no/f/n is dropped. Any other value
/// is left for ParseArguments to refuse.
std::vector<std::string> GflagsArguments(const CommandFlags& flags,
                                         const std::vector<std::string>& args);

/// A command's arguments split by its flag table.
struct ParsedArguments {
  std::vector<std::string> operands;  ///< in order
  bool help = false;                  ///< "--help" or "-h" was given
  std::string error;                  ///< why the arguments are refused ("" when they are not)
};

/// Splits `args` by `flags`: an unknown flag, a value flag without its value, a switch given a
/// value ("--json=x") or more operands than `flags.max_operands` set `error` (naming the argument).
ParsedArguments ParseArguments(const CommandFlags& flags, const std::vector<std::string>& args);

/// A command, or a subcommand ("bench net", "cache stats": registered under the two words).
struct Command {
  /// One line for `mpcaffe --help`; empty for an internal command (`bench net-setup`), which
  /// `mpcaffe --commands` still lists.
  std::string summary;
  /// "usage: mpcaffe <name> ..." lines (each ending in '\n'): printed by --help, and after the
  /// error of every argument the command refuses.
  std::string usage;
  CommandFlags flags;
  /// Receives the arguments after the command's name (already checked against `flags`);
  /// returns the process exit code.
  std::function<int(const std::vector<std::string>& args)> run;
};

/// The command line `argv[1..argc)` (argv[0] is the program): dispatches to the command and
/// returns its exit status. The `mpcaffe` program's main, and `python -m mpcaffe`'s for the
/// commands that run nets, so that Python layers run where an interpreter is present.
int RunCommandLine(int argc, char** argv);

/// Every command by name ("devices", "bench net", ...).
std::map<std::string, Command>& Commands();

/// Defined at namespace scope in a tools/cmd_*.cc file: registers a command before main().
struct RegisterCommand {
  RegisterCommand(const std::string& name, std::string summary, std::string usage,
                  CommandFlags flags, std::function<int(const std::vector<std::string>&)> run) {
    Commands()[name] =
        Command{std::move(summary), std::move(usage), std::move(flags), std::move(run)};
  }
};

/// The usage of `name` (a command, or the first word of subcommands such as "bench") and of
/// every listed subcommand under it ("tune" also shows "tune gemm").
std::string CommandUsage(const std::string& name);

/// The exit code of a usage error (2): prints "mpcaffe <name>: <why>" and the command's usage
/// on stderr.
int UsageError(const std::string& name, const std::string& why);

/// Small argument helpers shared by the commands (on arguments ParseArguments accepted).
bool HasFlag(const std::vector<std::string>& args, const std::string& flag);
/// Value of "--flag value" or "--flag=value", or `fallback`.
std::string FlagValue(const std::vector<std::string>& args, const std::string& flag,
                      const std::string& fallback = "");
/// Escapes a string for a JSON string literal (without the quotes).
std::string JsonEscape(const std::string& s);

/// "fp32", "fp16", "int16", "int8": the data type as the benchmarks' JSON and tables name it.
const char* DtypeLabel(DataType t);

}  // namespace mpcaffe::tools

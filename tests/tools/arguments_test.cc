// tests/tools/arguments_test.cc — every `mpcaffe` command refuses an argument it does not know:
// exit code 2, an error on stderr naming the argument, then the command's usage, before it does
// any work; --help prints the usage and exits 0. The commands are the ones the program lists
// (`mpcaffe --commands`), so a command is covered the day it is registered; so do the bench/
// programs built beside it.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/tools/run_mpcaffe.h"

namespace {

using mpcaffe::test_support::CommandResult;
using mpcaffe::test_support::RunMpcaffe;
using mpcaffe::test_support::RunProgram;

// The kernel cache off: no run here may touch the user's cache file (none gets that far).
const char kEnv[] = "MPCAFFE_CACHE=off";

/// Every command name the program registers, "bench net" and internal ones included.
std::vector<std::string> Commands() {
  const CommandResult r = RunMpcaffe("--commands", kEnv);
  EXPECT_EQ(r.status, 0) << r.out;
  std::vector<std::string> names;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) names.push_back(line);
  return names;
}

/// The first words of subcommands that are no command themselves ("bench", "cache").
std::vector<std::string> Groups(const std::vector<std::string>& names) {
  std::set<std::string> groups;
  for (const std::string& n : names)
    if (const size_t space = n.find(' '); space != std::string::npos)
      groups.insert(n.substr(0, space));
  std::vector<std::string> out;
  for (const std::string& g : groups)
    if (std::find(names.begin(), names.end(), g) == names.end()) out.push_back(g);
  return out;
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Arguments, TheCommandListHasEveryVerb) {
  // A guard on the list itself: were --commands to print nothing, the tests below would pass
  // vacuously.
  const std::vector<std::string> names = Commands();
  for (const char* verb :
       {"devices", "selfcheck", "time", "test", "train", "calibrate", "classify", "convert",
        "convert_mnist", "convert_imageset", "compute_image_mean", "tune", "tune gemm",
        "bench gemm", "bench net", "cache stats", "cache path", "cache clear", "cache tuning"})
    EXPECT_NE(std::find(names.begin(), names.end(), verb), names.end())
        << verb << " is missing from `mpcaffe --commands`";
}

TEST(Arguments, EveryCommandRefusesAnUnknownFlagWithItsUsage) {
  std::vector<std::string> names = Commands();
  ASSERT_FALSE(names.empty());
  for (const std::string& g : Groups(names)) names.push_back(g);
  for (const std::string& name : names) {
    SCOPED_TRACE("mpcaffe " + name);
    const CommandResult both = RunMpcaffe(name + " --no-such-flag 2>&1", kEnv);
    EXPECT_EQ(both.status, 2) << both.out;
    EXPECT_TRUE(Contains(both.out, "mpcaffe " + name + ": unknown flag '--no-such-flag'"))
        << both.out;
    EXPECT_TRUE(Contains(both.out, "usage: mpcaffe " + name)) << both.out;
    // All of it on stderr: standard output stays empty (scripts parse it).
    const CommandResult out = RunMpcaffe(name + " --no-such-flag 2>/dev/null", kEnv);
    EXPECT_EQ(out.status, 2);
    EXPECT_EQ(out.out, "");
    // A flag with a value ("--no-such-flag=1") is named without it.
    const CommandResult with_value = RunMpcaffe(name + " --no-such-flag=1 2>&1", kEnv);
    EXPECT_EQ(with_value.status, 2) << with_value.out;
    EXPECT_TRUE(Contains(with_value.out, "unknown flag '--no-such-flag'")) << with_value.out;
  }
}

TEST(Arguments, EveryCommandAnswersHelpWithItsUsage) {
  std::vector<std::string> names = Commands();
  for (const std::string& g : Groups(names)) names.push_back(g);
  for (const std::string& name : names) {
    SCOPED_TRACE("mpcaffe " + name);
    for (const char* help : {" --help", " -h"}) {
      const CommandResult r = RunMpcaffe(name + help + " 2>/dev/null", kEnv);
      EXPECT_EQ(r.status, 0) << r.out;
      EXPECT_TRUE(Contains(r.out, "usage: mpcaffe " + name)) << r.out;
    }
  }
}

TEST(Arguments, AnUnknownFlagAmongValidOnesIsStillRefused) {
  // The example: before, `time` ran as if an unknown flag were not there (its example,
  // --explain, has become a flag of `time`).
  const CommandResult time = RunMpcaffe("time --explane --model m.prototxt 2>&1", kEnv);
  EXPECT_EQ(time.status, 2) << time.out;
  EXPECT_TRUE(Contains(time.out, "mpcaffe time: unknown flag '--explane'")) << time.out;
  const CommandResult convert =
      RunMpcaffe("convert --model m.prototxt --dtype int8 --no-such-flag 2>&1", kEnv);
  EXPECT_EQ(convert.status, 2) << convert.out;
  EXPECT_TRUE(Contains(convert.out, "unknown flag '--no-such-flag'")) << convert.out;
}

TEST(Arguments, ValuesSwitchesAndOperandsAreChecked) {
  // Each: the arguments, and what the message (exit 2) must say.
  const std::vector<std::pair<const char*, std::vector<const char*>>> cases = {
      {"time --model", {"no value after '--model'"}},       // a value flag without value
      {"devices --json=yes", {"'--json' takes no value"}},  // a switch given a value
      {"time --model m.prototxt extra", {"unexpected argument 'extra'"}},  // a stray operand
      {"convert_mnist a b c d", {"unexpected argument 'd'"}},              // one operand too many
      {"convert_imageset -gray=maybe a/ b c",                              // gflags: a truth value
       {"'--gray' takes no value but true or false"}},
      {"convert_imageset -no_such_flag=1 a/ b c", {"unknown flag '--no_such_flag'"}},
      {"cache sizes",  // a group's unknown subcommand
       {"mpcaffe cache: unknown subcommand 'sizes'", "usage: mpcaffe cache stats"}},
      {"bench", {"usage: mpcaffe bench net"}},  // a group without one
  };
  for (const auto& [args, messages] : cases) {
    const CommandResult r = RunMpcaffe(std::string(args) + " 2>&1", kEnv);
    EXPECT_EQ(r.status, 2) << args << ": " << r.out;
    for (const char* m : messages) EXPECT_TRUE(Contains(r.out, m)) << args << ": " << r.out;
  }
}

TEST(Arguments, EveryBenchProgramRefusesAnUnknownFlagWithItsUsage) {
  // The bench/ programs `make bench` and docs/BENCHMARKS.md run, built beside mpcaffe: an unknown
  // flag gives status 2, the flag and the usage on stderr, before any device is opened or MPI
  // started; --help prints the usage. The CPU peak (x86-64) and the allreduce bench (MPI) are
  // built only where they can run.
  const std::filesystem::path dir =
      std::filesystem::path(mpcaffe::test_support::MpcaffeExe()).parent_path();
  for (const char* name : {"mpcaffe_cache_bench", "mpcaffe_launch_bench", "mpcaffe_cpu_peak",
                           "mpcaffe_allreduce_bench"}) {
    SCOPED_TRACE(name);
    const std::filesystem::path exe = dir / name;
    if (!std::filesystem::exists(exe)) {
      EXPECT_TRUE(std::string(name) == "mpcaffe_cpu_peak" ||
                  std::string(name) == "mpcaffe_allreduce_bench")
          << exe << " is not built";
      continue;
    }
    auto run = [&](const std::string& args) { return RunProgram(exe.string(), args, kEnv); };
    const CommandResult bogus = run("--no-such-flag 2>&1");
    EXPECT_EQ(bogus.status, 2) << bogus.out;
    EXPECT_TRUE(Contains(bogus.out, "'--no-such-flag'")) << bogus.out;
    EXPECT_TRUE(Contains(bogus.out, std::string("usage: ")) && Contains(bogus.out, name))
        << bogus.out;
    EXPECT_EQ(run("--no-such-flag 2>/dev/null").out, "");
    const CommandResult help = run("--help 2>/dev/null");
    EXPECT_EQ(help.status, 0) << help.out;
    EXPECT_TRUE(Contains(help.out, "usage: ")) << help.out;
  }
}

}  // namespace

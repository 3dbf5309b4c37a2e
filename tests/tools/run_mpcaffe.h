// tests/tools/run_mpcaffe.h — running the mpcaffe command the suite was built beside, for the
// command-line tests.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace mpcaffe::test_support {

/// The mpcaffe executable next to this test program (both are built into build/bin).
inline std::string MpcaffeExe() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "mpcaffe";
  return (std::filesystem::path(std::string(buf, size_t(n))).parent_path() / "mpcaffe").string();
}

struct CommandResult {
  int status = -1;
  std::string out;
};

/// Runs `<exe> <args>` with `env` prepended ("NAME=value ..."), its standard output captured
/// (append " 2>&1" to `args` to capture the errors too).
inline CommandResult RunProgram(const std::string& exe, const std::string& args,
                                const std::string& env = "") {
  CommandResult r;
  const std::string cmd = env + " '" + exe + "' " + args;
  std::FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[1024];
  while (std::fgets(buf, sizeof buf, p)) r.out += buf;
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

/// Runs `mpcaffe <args>` (RunProgram on the mpcaffe beside this test program).
inline CommandResult RunMpcaffe(const std::string& args, const std::string& env = "") {
  return RunProgram(MpcaffeExe(), args, env);
}

}  // namespace mpcaffe::test_support

// tools/bench_net.h — entry points of `mpcaffe bench net` (tools/cmd_bench_net.cc) for the
// `bench` command's dispatcher in tools/cmd_bench.cc.
#pragma once

#include <string>
#include <vector>

namespace mpcaffe::tools {

/// `mpcaffe bench net --model <prototxt> ...`; returns the exit code.
int BenchNet(const std::vector<std::string>& args);
/// The child process `bench net` starts to time a net's set-up with given kernel caches.
int BenchNetSetupCommand(const std::vector<std::string>& args);

}  // namespace mpcaffe::tools

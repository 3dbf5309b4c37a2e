// tools/cmd_train.cc — `mpcaffe train --solver <prototxt> [--weights a.caffemodel[,b...]] |
// [--snapshot <solverstate>] [--device i] [--synthetic]`: trains a net as BVLC's `caffe train`
// does (fp32), printing the loss and test scores in BVLC's format.
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "net/solver.h"
#include "proto/model_io.h"
#include "tools/command.h"

namespace mpcaffe::tools {
namespace {

int Usage(const char* why) {
  std::fprintf(stderr,
               "mpcaffe train: %s\n"
               "usage: mpcaffe train --solver <solver.prototxt> [--weights <a.caffemodel>[,<b>...]]\n"
               "                     [--snapshot <x.solverstate>] [--device i] [--synthetic]\n"
               "  --weights   initialise from trained weights (fine-tuning)\n"
               "  --snapshot  resume from a solver state (with the .caffemodel it names)\n"
               "  --synthetic replace Data layers by seeded random inputs (timing runs)\n",
               why);
  return 2;
}

int RunTrain(const std::vector<std::string>& args) {
  const std::string solver_path = FlagValue(args, "--solver");
  if (solver_path.empty()) return Usage("--solver is required");
  const std::string weights = FlagValue(args, "--weights");
  const std::string snapshot = FlagValue(args, "--snapshot");
  if (!weights.empty() && !snapshot.empty())
    return Usage("give --weights or --snapshot, not both");
  try {
    const std::string device_flag = FlagValue(args, "--device");
    Device& device = device_flag.empty() ? DefaultDevice() : GetDevice(std::stoi(device_flag));
    std::cout << "Using device: " << device.Describe() << "\n";
    NetOptions base;
    base.synthetic_data = HasFlag(args, "--synthetic");
    auto solver = Solver::FromFile(solver_path, device, base);
    if (!weights.empty()) {
      std::stringstream list(weights);
      std::string file;
      while (std::getline(list, file, ',')) {
        std::cout << "Finetuning from " << file << "\n";
        solver->net().CopyTrainedLayersFrom(file);
        solver->net().ParamsUpdated();
      }
    }
    std::cout << "Starting Optimization\n";
    solver->Solve(snapshot);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "mpcaffe train: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpcaffe train: %s\n", e.what());
    return 1;
  }
}

RegisterCommand train_command("train", "train a net with a solver (fp32): --solver s.prototxt",
                              RunTrain);

}  // namespace
}  // namespace mpcaffe::tools

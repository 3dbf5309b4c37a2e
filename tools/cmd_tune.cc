// tools/cmd_tune.cc — `mpcaffe tune gemm M N K [--dtype t] [--ta] [--tb] [--weights A|B]
// [--device i] [--max n]`: times the GEMM kernel candidates (and, for float types, LibDNN
// against CLBlast) for one shape and stores the winners in the kernel cache's tuning table.
#include <cstdio>
#include <string>
#include <vector>

#include "cache/program_cache.h"
#include "libdnn/tuner.h"
#include "tools/command.h"

namespace mpcaffe::tools {
namespace {

int Usage() {
  std::fprintf(stderr,
               "usage: mpcaffe tune gemm M N K [--dtype fp32|fp16|int16|int8] [--ta] [--tb]\n"
               "                             [--weights A|B] [--device i] [--max n]\n");
  return 2;
}

int TuneGemm(const std::vector<std::string>& args) {
  std::vector<std::string> dims;
  for (const auto& a : args)
    if (!a.empty() && a[0] != '-') dims.push_back(a);
  if (dims.size() < 3) return Usage();
  libdnn::GemmDesc d;
  try {
    d.M = std::stoi(dims[0]);
    d.N = std::stoi(dims[1]);
    d.K = std::stoi(dims[2]);
    d.type = d.out_type = ParseDataType(FlagValue(args, "--dtype", "fp32"));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tune: %s\n", e.what());
    return Usage();
  }
  d.trans_a = HasFlag(args, "--ta");
  d.trans_b = HasFlag(args, "--tb");
  d.weights = FlagValue(args, "--weights", "A") == "B" ? libdnn::WeightOperand::kB
                                                       : libdnn::WeightOperand::kA;
  const std::string dev_flag = FlagValue(args, "--device");
  Device& dev = dev_flag.empty() ? DefaultDevice() : GetDevice(std::stoi(dev_flag));
  if (!cache::ActiveProgramCache())
    std::printf("note: the kernel cache is off (MPCAFFE_CACHE=off): results are not kept\n");
  const size_t max = std::stoul(FlagValue(args, "--max", "0"));
  std::printf("tuning %s on %s\n", d.ToString().c_str(), dev.Describe().c_str());
  libdnn::Tuner tuner(dev, 3);
  const libdnn::GemmTuneResult r = tuner.TuneGemm(d, 3.0, max);
  const double gop = 2.0 * d.M * d.N * d.K * 1e-6;
  for (const auto& [config, ms] : r.measured)
    std::printf("  %-44s %9.3f ms %8.1f GFLOP/s%s\n", config.ToString().c_str(), ms, gop / ms,
                config == r.best ? "  <- best" : "");
  std::printf("best %s: %.3f ms (default %.3f ms, %.2fx)%s\n", r.best.ToString().c_str(), r.best_ms,
              r.default_ms, r.default_ms / r.best_ms,
              r.stored ? ", stored in the tuning table" : ", not stored");
  if (!IsQuantized(d.type)) {
    const libdnn::BlasTuneResult b = tuner.TuneBlas(d);
    for (const auto& [impl, ms] : b.measured)
      std::printf("  %-8s %9.3f ms %8.1f GFLOP/s\n", libdnn::BlasImplName(impl), ms, gop / ms);
    std::printf("BLAS choice: %s%s\n", libdnn::BlasImplName(b.best),
                b.stored ? " (stored)" : " (not stored)");
  }
  return 0;
}

int TuneCommand(const std::vector<std::string>& args) {
  if (args.empty() || args[0] != "gemm") return Usage();
  return TuneGemm(std::vector<std::string>(args.begin() + 1, args.end()));
}

const RegisterCommand kRegister("tune", "tune GEMM kernels for a shape (tuning table)",
                                TuneCommand);

}  // namespace
}  // namespace mpcaffe::tools

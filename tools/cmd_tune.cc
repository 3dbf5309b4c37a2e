// tools/cmd_tune.cc — `mpcaffe tune gemm M N K [--dtype t] [--ta] [--tb] [--weights A|B]
// [--device i] [--max n]`: times the GEMM kernel candidates (and, for float types, LibDNN
// against CLBlast) for one shape; `mpcaffe tune --model <prototxt> [--device all|i,j]` tunes
// every GEMM and convolution shape a net prepares, on each device in turn (by default the one
// `time` chooses for the net), at the timing tools' optimizer level and pycaffe's. Winners go
// to the kernel cache's tuning table under the device's key, where the layers find them.
#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "cache/program_cache.h"
#include "device/settings.h"
#include "libdnn/tuner.h"
#include "net/device_choice.h"
#include "net/net.h"
#include "proto/model_io.h"
#include "tools/bench_net.h"
#include "tools/command.h"
#include "tools/net_variants.h"
#include "tools/progress_bar.h"

namespace mpcaffe::tools {
namespace {

const CommandFlags kGemmFlags{{"--dtype", "--weights", "--device", "--max"}, {"--ta", "--tb"}, 3};

int TuneGemm(const std::vector<std::string>& args) {
  const std::vector<std::string> dims = ParseArguments(kGemmFlags, args).operands;
  if (dims.size() < 3) return UsageError("tune gemm", "needs the shape: M N K");
  libdnn::GemmDesc d;
  try {
    d.M = std::stoi(dims[0]);
    d.N = std::stoi(dims[1]);
    d.K = std::stoi(dims[2]);
    d.type = d.out_type = ParseDataType(FlagValue(args, "--dtype", "fp32"));
  } catch (const std::exception& e) {
    return UsageError("tune gemm", e.what());
  }
  d.trans_a = HasFlag(args, "--ta");
  d.trans_b = HasFlag(args, "--tb");
  const std::string weights = FlagValue(args, "--weights", "A");
  if (weights != "A" && weights != "B") return UsageError("tune gemm", "--weights is A or B");
  d.weights = weights == "B" ? libdnn::WeightOperand::kB : libdnn::WeightOperand::kA;
  const std::string dev_flag = FlagValue(args, "--device");
  Device& dev = DeviceOrDefault(dev_flag);
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

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

/// `tune --model`: builds the net (or its typed variants, --dtypes, at each --batch) with
/// synthetic inputs, calibrated when quantized, records the GEMM and convolution descriptions
/// its first forward pass prepares, and tunes each one on `dev`.
/// A tuning winner as printed: its configuration's text (the record's config).
template <typename Config>
std::string BestText(const Config& c) {
  return c.ToString();
}
/// Appends the descriptions of `recorded` that `shapes` does not hold yet (by their text);
/// returns how many.
template <typename Desc>
size_t AppendNew(const std::vector<Desc>& recorded, std::vector<Desc>* shapes) {
  size_t added = 0;
  for (const Desc& r : recorded) {
    const std::string text = r.ToString();
    if (std::none_of(shapes->begin(), shapes->end(),
                     [&](const Desc& s) { return s.ToString() == text; }))
      shapes->push_back(r), ++added;
  }
  return added;
}

std::string BestText(int depthwise_rows) {
  return libdnn::DepthwiseConfig{depthwise_rows}.ToString();
}
std::string BestText(const libdnn::PointwiseChoice& c) { return c ? c->ToString() : "off"; }
std::string BestText(const libdnn::WinogradChoice& c) { return c ? c->ToString() : "off"; }

/// Whether a convolution shape takes the pointwise kernel's tuner (its candidates include the
/// direct kernel).
bool TunesPointwise(const libdnn::ConvDesc& c) {
  const auto forced = libdnn::KernelConfigOverride("conv_pw");
  return !(forced && forced->off()) && GetSettings().conv_gemm != "1" &&
         libdnn::Convolution::PointwiseApplies(c, libdnn::Convolution::DefaultPointwiseTile(c));
}

void TuneModelOn(Device& dev, const std::vector<std::string>& args) {
  const std::string model = FlagValue(args, "--model");
  const size_t max = std::stoul(FlagValue(args, "--max", "0"));
  if (!cache::ActiveProgramCache())
    std::printf("note: the kernel cache is off (MPCAFFE_CACHE=off): results are not kept\n");
  const caffe::NetParameter param = ReadNetParameterText(model);
  // The variants: the net as written, or its typed variants (as `bench net` builds them).
  std::vector<std::pair<std::string, caffe::NetParameter>> variants;
  const std::vector<std::string> batches = SplitList(FlagValue(args, "--batch"));
  std::vector<caffe::NetParameter> batched;
  if (batches.empty()) batched.push_back(param);
  for (const auto& b : batches) batched.push_back(WithBatch(param, std::stoi(b), model));
  for (size_t i = 0; i < batched.size(); ++i) {
    const std::string b = batches.empty() ? "" : " batch " + batches[i];
    const std::string dtypes = FlagValue(args, "--dtypes");
    if (dtypes.empty()) variants.emplace_back("as written" + b, batched[i]);
    for (const auto& t : SplitList(dtypes))
      variants.emplace_back(t + b, TypedVariant(batched[i], ParseNetDtype(t), dev));
  }
  // Shapes first (each once over all variants), then the timing.
  std::vector<libdnn::GemmDesc> gemms;
  std::vector<libdnn::ConvDesc> convs;
  // The shapes at the optimizer level the timing tools run (`time`, `bench net`: fused
  // epilogues) and at pycaffe's (level 1), whose layers' descriptions differ (an int8 net's
  // convolutions fuse their BatchNorm, Scale and ReLU at level 2 only).
  std::vector<int> levels{ToolOptimizeLevel()};
  if (levels[0] == 2) levels.push_back(1);
  for (const auto& [what, p] : variants)
    for (int level : levels) {
      NetOptions options;
      options.synthetic_data = true;
      options.optimize = level;
      auto net = BuildCalibratedNet(p, dev, options);
      libdnn::ShapeRecorder recorder;
      net->Forward();  // layers prepare their GEMMs and convolutions here
      const size_t new_gemms = AppendNew(recorder.gemms(), &gemms);
      const size_t new_convs = AppendNew(recorder.convs(), &convs);
      std::printf("%s (%s, optimizer level %d): %zu GEMM and %zu convolution shapes\n",
                  model.c_str(), what.c_str(), level, new_gemms, new_convs);
    }
  if (HasFlag(args, "--show")) {
    // What the layers use now for each shape ("family:config"): the tuning table's winner or
    // the default.
    for (const auto& g : gemms)
      std::printf("gemm %s -> gemm:%s\n", g.ToString().c_str(),
                  libdnn::TunedGemmConfig(dev, g).ToString().c_str());
    for (const auto& c : convs) {
      const libdnn::WinogradChoice wino = libdnn::WinogradApplies(c) && !TunesPointwise(c)
                                              ? libdnn::ChooseWinograd(dev, c).config
                                              : std::nullopt;
      const std::string chosen =
          libdnn::Convolution::IsDepthwise(c) && GetSettings().conv_depthwise != "0"
              ? "conv_dw:" + BestText(libdnn::TunedDepthwiseRows(dev, c))
          : TunesPointwise(c) ? "conv_pw:" + BestText(libdnn::TunedPointwise(dev, c))
          : wino              ? "conv_wino:" + BestText(wino)
                              : "conv:" + libdnn::TunedConvConfig(dev, c).ToString();
      std::printf("conv %s -> %s\n", c.ToString().c_str(), chosen.c_str());
    }
    return;
  }
  std::printf("tuning %zu GEMM and %zu convolution shapes on %s\n", gemms.size(), convs.size(),
              dev.Describe().c_str());
  libdnn::Tuner tuner(dev, 3);
  ProgressBar bar("tune", static_cast<long>(gemms.size() + convs.size()),
                  !HasFlag(args, "--no-progress"));
  std::vector<std::string> lines;
  int stored = 0;
  size_t extra = 0;  // shapes tuned twice (the direct kernel, then Winograd against it)
  // One shape: time its candidates (TuneGemm / TuneConv), keep the line to print.
  auto tune = [&](const char* what, const std::string& shape, const auto& run) {
    bar.Describe(std::string(what) + " " + shape);
    const auto r = run();
    bar.Advance();
    stored += r.stored;
    char buf[512];
    std::snprintf(buf, sizeof buf, "  %s %-58s best %-36s %9.3f ms (default %9.3f ms, %.2fx)", what,
                  shape.c_str(), BestText(r.best).c_str(), r.best_ms, r.default_ms,
                  r.default_ms / r.best_ms);
    lines.push_back(buf);
  };
  for (const auto& g : gemms)
    tune("gemm", g.ToString(), [&] { return tuner.TuneGemm(g, 3.0, max); });
  for (const auto& c : convs) {
    // Depthwise shapes run their own kernel, whose parameter is its rows per work-item.
    if (libdnn::Convolution::IsDepthwise(c) && GetSettings().conv_depthwise != "0")
      tune("conv_dw", c.ToString(), [&] { return tuner.TuneDepthwise(c, 3.0); });
    else if (TunesPointwise(c))  // pointwise tiles and the direct kernel (its tuned config)
      tune("conv_pw", c.ToString(), [&] { return tuner.TunePointwise(c, 3.0); });
    else
      tune("conv", c.ToString(), [&] { return tuner.TuneConv(c, 3.0, max); });
    // Winograd against the direct kernel in its just-tuned configuration.
    if (libdnn::WinogradApplies(c) && !TunesPointwise(c) && GetSettings().conv_gemm != "1") {
      tune("conv_wino", c.ToString(), [&] { return tuner.TuneWinograd(c, 3.0); });
      ++extra;
    }
  }
  bar.Close();
  for (const auto& l : lines) std::printf("%s\n", l.c_str());
  std::printf("%d of %zu winners stored in the tuning table%s\n", stored,
              gemms.size() + convs.size() + extra,
              cache::ActiveProgramCache()
                  ? (" (" + cache::ActiveProgramCache()->path() + ")").c_str()
                  : "");
}

int TuneModel(const std::vector<std::string>& args) {
  const std::string model = FlagValue(args, "--model");
  try {
    const std::string flag = FlagValue(args, "--device");
    if (!flag.empty()) {
      for (Device* dev : BenchDevices(flag)) TuneModelOn(*dev, args);
      return 0;
    }
    // The device `time` and `test` run the net on when they are given none, so the layers
    // find the winners there.
    const DeviceChoice choice = ChooseDeviceForNet("", ReadNetParameterText(model));
    std::printf("device %s (%s)\n", choice.device->Describe().c_str(), choice.why.c_str());
    TuneModelOn(*choice.device, args);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpcaffe tune --model %s: %s\n", model.c_str(), e.what());
    return 1;
  }
}

int TuneCommand(const std::vector<std::string>& args) {
  if (FlagValue(args, "--model").empty())
    return UsageError("tune", "--model is required (one GEMM shape: mpcaffe tune gemm M N K)");
  return TuneModel(args);
}

const RegisterCommand kRegister(
    "tune", "tune every GEMM and convolution shape of a net (--model) into the tuning table",
    "usage: mpcaffe tune --model <prototxt> [--dtypes fp32,fp16,int16,int8,int8w4]\n"
    "                    [--batch 1,16] [--device i|i,j|all] [--max n] [--no-progress] [--show]\n"
    "  --dtypes  tune these typed variants of the net (else the net as written)\n"
    "  --max     time at most n candidates per shape (0: all)\n"
    "  --show    list the net's shapes and the configuration each uses now; tune nothing\n",
    {{"--model", "--dtypes", "--batch", "--device", "--max"}, {"--no-progress", "--show"}},
    TuneCommand);
const RegisterCommand kRegisterGemm(
    "tune gemm", "tune one GEMM shape into the tuning table (and LibDNN against CLBlast)",
    "usage: mpcaffe tune gemm M N K [--dtype fp32|fp16|int16|int8] [--ta] [--tb]\n"
    "                               [--weights A|B] [--device i] [--max n]\n"
    "  --ta, --tb   A or B transposed; --weights  which operand holds the weights (A)\n",
    kGemmFlags, TuneGemm);

}  // namespace
}  // namespace mpcaffe::tools

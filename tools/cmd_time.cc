// tools/cmd_time.cc — `mpcaffe time --model <prototxt> [--weights w] [--iterations N]
// [--phase TEST] [--device i] [--synthetic] [--json] [--explain]`: per-layer forward times and
// the median total, like BVLC's `caffe time`; with --phase TRAIN also each layer's backward time
// and the median forward-backward iteration (the training step without the solver update); with
// --explain each layer's kernel families, their configurations and where those came from.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "layers/layer.h"
#include "libdnn/kernel_config.h"
#include "net/device_choice.h"
#include "net/net.h"
#include "proto/model_io.h"
#include "tools/command.h"
#include "tools/net_variants.h"

namespace mpcaffe::tools {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string LayerDtype(const Layer& l) {
  if (std::string(l.type()) == "Quantizer")
    return std::string(Name(l.bottom_type(0))) + "->" + Name(l.top_type(0));
  // int8 layers with 4-bit weights: "int8q w4".
  return std::string(Name(l.compute_type())) + (l.Int4Weights(0) ? " w4" : "");
}

/// Wall milliseconds of consecutive start-up phases: Mark(name) ends the phase begun at the
/// previous Mark (the first at construction).
struct StartupPhases {
  std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();
  std::vector<std::pair<std::string, double>> phases;
  void Mark(const std::string& name) {
    const auto now = std::chrono::steady_clock::now();
    phases.emplace_back(name, std::chrono::duration<double, std::milli>(now - last).count());
    last = now;
  }
};

constexpr char kUsage[] =
    "usage: mpcaffe time --model <prototxt> [--weights <caffemodel>] [--iterations N]\n"
    "                    [--phase TEST|TRAIN] [--stage s[,s...]] [--device i] [--synthetic] [--json]\n"
    "                    [--explain]\n"
    "  --iterations   timed passes (10)\n"
    "  --phase TRAIN  also each layer's backward time and the forward-backward iteration\n"
    "  --synthetic    synthetic Data layers, Input layers filled with seeded values\n"
    "  --json         the report as one JSON object on standard output\n"
    "  --explain      per layer, the kernel family it runs, its configuration and where that\n"
    "                 came from (tuned: the tuning table; default; override: MPCAFFE_KERNEL_CONFIG)\n";

int Usage(const std::string& why) { return UsageError("time", why); }

int RunTime(const std::vector<std::string>& args) {
  const std::string model = FlagValue(args, "--model");
  if (model.empty()) return Usage("--model is required");
  const std::string weights = FlagValue(args, "--weights");
  const std::string phase = FlagValue(args, "--phase", "TEST");
  const bool json = HasFlag(args, "--json");
  const bool explain = HasFlag(args, "--explain");
  int iterations = 0;
  try {
    iterations = std::stoi(FlagValue(args, "--iterations", "10"));
  } catch (const std::exception&) {
    return Usage("--iterations needs a number");
  }
  if (iterations < 1) return Usage("--iterations must be at least 1");
  if (phase != "TEST" && phase != "TRAIN") return Usage("--phase is TEST or TRAIN");
  try {
    using Clock = std::chrono::steady_clock;
    // Start-up by phase (wall ms), as a warm process spends it.
    StartupPhases startup;
    const std::string device_flag = FlagValue(args, "--device");
    const caffe::NetParameter param = ReadNetParameterText(model);
    startup.Mark("parse");
    const DeviceChoice choice = ChooseDeviceForNet(device_flag, param);
    Device& device = *choice.device;
    startup.Mark("devices");
    NetOptions options;
    options.phase = phase == "TEST" ? caffe::TEST : caffe::TRAIN;
    // BVLC's -stage: the NetState stages include/exclude rules test (comma-separated).
    for (std::string rest = FlagValue(args, "--stage"); !rest.empty();) {
      const size_t comma = rest.find(',');
      if (comma) options.stages.push_back(rest.substr(0, comma));
      rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    }
    options.synthetic_data = HasFlag(args, "--synthetic");
    options.optimize = ToolOptimizeLevel();
    Net net(param, device, options);
    startup.Mark("build");
    if (!weights.empty()) net.CopyTrainedLayersFrom(weights);
    startup.Mark("weights");
    // Filler values are drawn lazily (at first use); drawn here, their time is a phase of its own,
    // unless the net is calibrated: the calibration draws the quantized parameters' values
    // through the fp32 variant's parameters (Layer::CopyParamValuesFrom: once instead of twice),
    // and the phase is "fill_calibrate".
    const bool calibrate = !net.QuantizersWithoutRange().empty();
    if (!calibrate) {
      for (const auto& l : net.layers()) l->blobs();
      startup.Mark("fill");
    }
    if (weights.empty()) NeutralEmptyBatchNorms(net);
    if (options.synthetic_data) FillInputLayers(net);  // Input layers too, as bench net does
    if (calibrate) {
      std::fprintf(stderr,
                   "mpcaffe time: %zu quantizers have no range; calibrating on the fp32 variant of "
                   "the net with its current inputs\n",
                   net.QuantizersWithoutRange().size());
      CalibrateWithFloatVariant(net, param, options);
      net.ResetPeakMemory();  // the fp32 calibration net is gone; count this net only
    }
    startup.Mark(calibrate ? "fill_calibrate" : "calibrate");
    const int n = static_cast<int>(net.layers().size());
    // Warm-up: kernel builds, weight uploads. With --explain layer by layer (as timed below)
    // under a KernelChoiceLog: layers choose their kernels as they first run, so the choices
    // noted while layer i runs are layer i's.
    std::vector<std::vector<libdnn::KernelChoice>> choices(n);
    if (explain) {
      libdnn::KernelChoiceLog log;
      for (int i = 0; i < n; ++i) {
        const int last = net.fusion_end(i);
        net.ForwardFromTo(i, last);
        choices[i] = log.Take();
        i = last;
      }
    } else {
      net.Forward();
    }
    device.Finish();
    startup.Mark("first_forward");
    // TRAIN: backward too (after a warm-up backward pass: its kernel builds).
    const bool train = options.phase == caffe::TRAIN;
    if (train) {
      net.Backward();
      device.Finish();
    }
    std::vector<std::vector<double>> layer_ms(n), layer_back_ms(n);
    std::vector<double> total_ms, back_total_ms;
    for (int it = 0; it < iterations; ++it) {
      double total = 0;
      for (int i = 0; i < n; ++i) {
        // A chain fused into its producer runs inside it: it is timed as the producer.
        const int last = net.fusion_end(i);
        const auto t0 = Clock::now();
        net.ForwardFromTo(i, last);
        device.Finish();
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        layer_ms[i].push_back(ms);
        for (int j = i + 1; j <= last; ++j) layer_ms[j].push_back(0.0);
        total += ms;
        i = last;
      }
      total_ms.push_back(total);
      if (!train) continue;
      net.ClearParamDiffs();
      device.Finish();
      double back = 0;
      for (int i = n - 1; i >= 0; --i) {
        if (!net.layer_need_backward(i)) {
          layer_back_ms[i].push_back(0.0);
          continue;
        }
        const auto t0 = Clock::now();
        net.BackwardFromTo(i, i);
        device.Finish();
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        layer_back_ms[i].push_back(ms);
        back += ms;
      }
      back_total_ms.push_back(back);
    }
    const double median = Median(total_ms);
    // Whole passes, one Finish at the end (the per-layer times above each end in a Finish):
    // their time, and the kernel launches and host synchronisations inside one Net::Forward
    // (counted in the first: reading the counters takes no time worth timing).
    uint64_t launches = 0, host_syncs = 0;
    std::vector<double> whole_ms, enqueue_ms;
    for (int it = 0; it < iterations; ++it) {
      const auto t0 = Clock::now();
      const DeviceCounters before = GetDeviceCounters();
      net.Forward();
      const DeviceCounters after = GetDeviceCounters();
      // The host's share: Net::Forward returns once its kernels are enqueued. On a CPU device
      // that time is taken from the cores the kernels run on.
      enqueue_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      device.Finish();
      whole_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      if (it == 0) {
        launches = after.launches - before.launches;
        host_syncs = after.host_syncs - before.host_syncs;
      }
    }
    // The whole pass of this net on this device, for the next run that names no device.
    if (!train) RecordNetForward(device, param, Median(whole_ms));
    // What the inference optimizer fused: layers running inside another, and the producers.
    int fused_layers = 0, chains = 0;
    for (int i = 0; i < n; ++i) {
      fused_layers += net.fused_into(i) >= 0;
      chains += net.fusion_end(i) > i;
    }
    std::vector<double> step_ms(back_total_ms.size());
    for (size_t it = 0; it < step_ms.size(); ++it) step_ms[it] = total_ms[it] + back_total_ms[it];
    if (json) {
      std::ostringstream os;
      os << "{\"model\": \"" << JsonEscape(model) << "\", \"device\": \""
         << JsonEscape(device.Describe()) << "\", \"device_chosen_by\": \""
         << JsonEscape(choice.why) << "\", \"iterations\": " << iterations
         << ", \"forward_ms_median\": " << median << ", \"optimizer_level\": "
         << net.optimize_level() << ", \"fused_layers\": " << fused_layers
         << ", \"fusion_chains\": " << chains << ", \"launched_layers\": " << n - fused_layers
         << ", \"launches_per_forward\": " << launches
         << ", \"forward_host_ms\": " << Median(enqueue_ms)
         << ", \"host_syncs_per_forward\": " << host_syncs
         << ", \"whole_forward_ms_median\": " << Median(whole_ms);
      os << ", \"startup_ms\": {";
      for (size_t k = 0; k < startup.phases.size(); ++k)
        os << (k ? ", " : "") << "\"" << startup.phases[k].first << "\": " << startup.phases[k].second;
      os << "}";
      if (train)
        os << ", \"backward_ms_median\": " << Median(back_total_ms)
           << ", \"forward_backward_ms_median\": " << Median(step_ms);
      os
         << ", \"peak_device_bytes\": " << net.peak_device_bytes()
         << ", \"reduced_memory\": " << (net.reduced_memory() ? "true" : "false") << ", \"layers\": [";
      for (int i = 0; i < n; ++i) {
        const Layer& l = *net.layers()[i];
        os << (i ? ",\n  " : "\n  ") << "{\"name\": \"" << JsonEscape(l.name()) << "\", \"type\": \""
           << l.type() << "\", \"dtype\": \"" << LayerDtype(l) << "\", \"forward_ms\": "
           << Median(layer_ms[i]);
        if (train) os << ", \"backward_ms\": " << Median(layer_back_ms[i]);
        if (net.fused_into(i) >= 0)
          os << ", \"fused_into\": \"" << JsonEscape(net.layer_names()[net.fused_into(i)]) << "\"";
        if (explain) {
          os << ", \"kernels\": [";
          for (size_t k = 0; k < choices[i].size(); ++k) {
            const libdnn::KernelChoice& c = choices[i][k];
            os << (k ? ", " : "") << "{\"family\": \"" << c.family << "\", \"config\": \""
               << JsonEscape(c.config) << "\", \"source\": \"" << libdnn::ConfigSourceName(c.source)
               << "\", \"for\": \"" << JsonEscape(c.description) << "\"}";
          }
          os << "]";
        }
        os << "}";
      }
      os << "\n]}\n";
      std::fputs(os.str().c_str(), stdout);
      return 0;
    }
    std::printf("model %s on %s (%s), %d iterations (median per layer, ms)\n", model.c_str(),
                device.Describe().c_str(), choice.why.c_str(), iterations);
    for (int i = 0; i < n; ++i) {
      const Layer& l = *net.layers()[i];
      if (net.fused_into(i) >= 0) {
        std::printf("%24s %-16s %-12s fused into %s\n", l.name().c_str(), l.type(),
                    LayerDtype(l).c_str(), net.layer_names()[net.fused_into(i)].c_str());
        continue;
      }
      std::printf("%24s %-16s %-12s forward: %9.3f ms", l.name().c_str(), l.type(),
                  LayerDtype(l).c_str(), Median(layer_ms[i]));
      if (train) std::printf("   backward: %9.3f ms", Median(layer_back_ms[i]));
      std::printf("\n");
      for (const libdnn::KernelChoice& c : choices[i])
        std::printf("%24s   kernel %s (%s) for %s\n", "",
                    (c.family + (c.config.empty() ? "" : ":" + c.config)).c_str(),
                    libdnn::ConfigSourceName(c.source), c.description.c_str());
    }
    std::printf("Graph optimizer level %d%s: %d of %d layers fused into %d producers (%d layers run)\n",
                net.optimize_level(), net.optimized() ? "" : " (off)", fused_layers, n, chains,
                n - fused_layers);
    std::printf("Median forward pass: %.3f ms (sum of the layers, each ending in a Finish)\n",
                median);
    std::printf("Median whole forward pass: %.3f ms (one Finish at the end); %llu kernel "
                "launches and %llu host synchronisations inside Net::Forward, which returns "
                "after %.3f ms (median)\n",
                Median(whole_ms), static_cast<unsigned long long>(launches),
                static_cast<unsigned long long>(host_syncs), Median(enqueue_ms));
    if (train) {
      std::printf("Median backward pass: %.3f ms\n", Median(back_total_ms));
      std::printf("Median forward-backward: %.3f ms (%.2f iterations/s)\n", Median(step_ms),
                  1000.0 / Median(step_ms));
    }
    std::printf("Start-up (ms):");
    for (const auto& [phase_name, ms] : startup.phases) std::printf(" %s %.1f", phase_name.c_str(), ms);
    std::printf("\n");
    std::printf("Peak device memory: %.1f MiB%s\n", net.peak_device_bytes() / 1048576.0,
                net.reduced_memory() ? " (reduced memory)" : "");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpcaffe time: %s\n", e.what());
    return 1;
  }
}

RegisterCommand time_command("time", "per-layer forward times of a net (like `caffe time`)", kUsage,
                             {{"--model", "--weights", "--iterations", "--phase", "--stage", "--device"},
                              {"--synthetic", "--json", "--explain"}},
                             RunTime);

}  // namespace
}  // namespace mpcaffe::tools

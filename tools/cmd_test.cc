// tools/cmd_test.cc — `mpcaffe test --model <prototxt> --weights <caffemodel> [--iterations N]
// [--device i] [--synthetic] [--acc16-overflow]`: scores a trained net in the TEST phase as BVLC's `caffe test`
// does (each batch's outputs, then their means, loss outputs with their weights). Under
// `mpirun -np N` the iterations are shared by the ranks (rank r runs r, r + N, … on its shard
// of the Data layers' records), the sums are reduced over the ranks and rank 0 prints.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "layers/layer.h"
#include "net/device_choice.h"
#include "net/distributed.h"
#include "net/net.h"
#include "proto/model_io.h"
#include "tools/command.h"
#include "tools/net_variants.h"

namespace mpcaffe::tools {
namespace {

constexpr char kUsage[] =
    "usage: mpcaffe test --model <prototxt> [--weights <caffemodel>] [--iterations N]\n"
    "                    [--device i] [--synthetic] [--acc16-overflow]\n"
    "  --synthetic: synthetic Data layers, Input layers filled with seeded uniform\n"
    "               values in [-1, 1], missing quantizer ranges calibrated on them\n"
    "  --acc16-overflow: per layer with 4-bit weights, how often a 16-bit accumulator\n"
    "               (the Arm 8x4-bit paper's) would overflow on these activations\n";

int Usage(const std::string& why) { return UsageError("test", why); }

/// The 16-bit accumulator's overflows per layer with 4-bit weights (this rank's passes).
void PrintAcc16(Net& net) {
  std::printf("16-bit accumulator (sticky overflow; Σ x·w of uint8 activations and 4-bit weights "
              "in the order of k):\n%-24s %14s %12s %10s %12s %10s\n", "layer", "steps", "overflows",
              "% steps", "outputs hit", "% outputs");
  quant::Acc16Overflow all;
  int layers = 0;
  for (size_t i = 0; i < net.layers().size(); ++i) {
    Layer& l = *net.layers()[i];
    if (!l.Int4Weights(0) || l.acc16_overflow().steps == 0) continue;
    const quant::Acc16Overflow& c = l.acc16_overflow();
    std::printf("%-24s %14llu %12llu %10.4f %12llu %10.4f\n", net.layer_names()[i].c_str(),
                (unsigned long long)c.steps, (unsigned long long)c.overflow_steps, c.step_percent(),
                (unsigned long long)c.overflowed_outputs, c.output_percent());
    all += c;
    ++layers;
  }
  if (layers == 0) {
    std::printf("(no layer with 4-bit weights ran: give an int8w4 net, e.g. from `mpcaffe convert "
                "--dtype int8w4`)\n");
    return;
  }
  std::printf("%-24s %14llu %12llu %10.4f %12llu %10.4f\n", "all", (unsigned long long)all.steps,
              (unsigned long long)all.overflow_steps, all.step_percent(),
              (unsigned long long)all.overflowed_outputs, all.output_percent());
}

int RunTest(const std::vector<std::string>& args) {
  const std::string model = FlagValue(args, "--model");
  if (model.empty()) return Usage("--model is required");
  const std::string weights = FlagValue(args, "--weights");
  int iterations = 0;
  try {
    iterations = std::stoi(FlagValue(args, "--iterations", "50"));
  } catch (const std::exception&) {
    return Usage("--iterations needs a number");
  }
  if (iterations < 1) return Usage("--iterations must be at least 1");
  try {
    // The job first: the Data layers built below read the rank's shard.
    Communicator& comm = Communicator::World();
    const bool root = comm.root();
    const std::string device_flag = FlagValue(args, "--device");
    const caffe::NetParameter param = ReadNetParameterText(model);
    const DeviceChoice choice = ChooseDeviceForNet(device_flag, param);
    Device& device = *choice.device;
    if (root) std::cout << "Using device: " << device.Describe() << " (" << choice.why << ")\n";
    NetOptions options;
    options.phase = caffe::TEST;
    options.synthetic_data = HasFlag(args, "--synthetic");
    options.optimize = ToolOptimizeLevel();
    Net net(param, device, options);
    if (weights.empty() && root)
      std::cout << "Warning: no --weights, testing the fillers' initial values\n";
    else if (!weights.empty())
      net.CopyTrainedLayersFrom(weights);
    if (options.synthetic_data) {
      FillInputLayers(net);
      if (!net.QuantizersWithoutRange().empty()) {
        const int n = CalibrateWithFloatVariant(net, param, options);
        if (root) std::cout << "Calibrated " << n << " quantizer ranges on the synthetic inputs\n";
      }
    }
    const bool acc16 = HasFlag(args, "--acc16-overflow");
    if (acc16)
      for (const auto& l : net.layers()) l->set_simulate_acc16(true);
    // Loss weight of each output blob (from the layer that produced it).
    std::vector<float> out_weight;
    for (Blob* out : net.output_blobs()) {
      float w = 0;
      for (size_t i = 0; i < net.layers().size(); ++i)
        for (size_t t = 0; t < net.top_vecs()[i].size(); ++t)
          if (net.top_vecs()[i][t] == out) {
            const auto& lp = net.built_param().layer(static_cast<int>(i));
            w = static_cast<int>(t) < lp.loss_weight_size() ? lp.loss_weight(static_cast<int>(t))
                                                            : net.layers()[i]->DefaultLossWeight(static_cast<int>(t));
          }
      out_weight.push_back(w);
    }
    if (root) {
      std::cout << "Running for " << iterations << " iterations";
      if (comm.size() > 1) std::cout << " shared by " << comm.size() << " ranks (MPI)";
      std::cout << ".\n";
    }
    // Every output value, named, with its loss weight; the last entry sums the loss.
    std::vector<std::string> names;
    std::vector<float> weight_of;
    for (size_t o = 0; o < net.output_blobs().size(); ++o)
      for (int i = 0; i < net.output_blobs()[o]->count(); ++i) {
        names.push_back(net.output_blobs()[o]->name());
        weight_of.push_back(out_weight[o]);
      }
    std::vector<double> score(names.size() + 1, 0.0);
    // Rank r of N runs iterations r, r + N, … (a job of one: all of them).
    for (int it = comm.rank(); it < iterations; it += comm.size()) {
      score.back() += net.Forward();
      size_t k = 0;
      for (size_t o = 0; o < net.output_blobs().size(); ++o) {
        Blob* out = net.output_blobs()[o];
        const std::vector<float> v = out->ToFloat();
        for (float x : v) {
          if (k < names.size()) score[k++] += x;
          if (root) std::cout << "Batch " << it << ", " << out->name() << " = " << x << "\n";
        }
      }
    }
    comm.Allreduce(score.data(), score.size(), Communicator::Op::kSum, "allreduce of the scores");
    if (!root) return 0;
    const double loss = score.back();
    score.pop_back();
    std::cout << "Loss: " << loss / iterations << "\n";
    for (size_t k = 0; k < score.size(); ++k) {
      const double mean = score[k] / iterations;
      std::cout << names[k] << " = " << mean;
      if (weight_of[k] != 0.0f)
        std::cout << " (* " << weight_of[k] << " = " << weight_of[k] * mean << " loss)";
      std::cout << "\n";
    }
    if (acc16) PrintAcc16(net);
    return 0;
  } catch (const std::exception& e) {
    AbortJobOnError(std::string("mpcaffe test: ") + e.what());
    std::fprintf(stderr, "mpcaffe test: %s\n", e.what());
    return 1;
  }
}

RegisterCommand test_command(
    "test", "score a trained net: --model m.prototxt --weights w.caffemodel", kUsage,
    {{"--model", "--weights", "--iterations", "--device"}, {"--synthetic", "--acc16-overflow"}},
    RunTest);

}  // namespace
}  // namespace mpcaffe::tools

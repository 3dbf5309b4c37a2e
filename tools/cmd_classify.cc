// tools/cmd_classify.cc — `mpcaffe classify`: a trained classification net on photographs, as
// BVLC's examples/cpp_classification and python/classify.py use one (a deploy prototxt, its
// caffemodel, a mean, a label file, images → the top classes of each image), in any data type
// on any device. Images are read and preprocessed by tools/image_samples.h (OpenCV decoding,
// resize, centre crop, channel order, raw scale, mean, scale). A typed net whose caffemodel has
// no quantizer ranges (plain fp32 weights) observes them on the given images first, and says so:
// `mpcaffe calibrate --images` calibrates on a set of its own.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "net/device_choice.h"
#include "net/net.h"
#include "proto/model_io.h"
#include "tools/command.h"
#include "tools/image_samples.h"
#include "tools/image_scores.h"
#include "tools/net_variants.h"

namespace mpcaffe::tools {
namespace {

constexpr char kUsage[] =
    "usage: mpcaffe classify --model deploy.prototxt --weights net.caffemodel\n"
    "         --images IMAGE|DIR|list.txt [--labels synset_words.txt] [--top K (5)]\n"
    "         [--dtype fp32|fp16|int16|int8|int8w4] [--device i]\n"
    "         [--resize H,W] [--mean-file mean.binaryproto] [--mean-values B,G,R]\n"
    "         [--raw-scale R (255)] [--scale S] [--channel-swap 2,1,0]\n"
    "         [--transform-from train_val.prototxt] [--json scores.json]\n"
    "  (--model_def, --pretrained_model, --mean_file, --raw_scale and --channel_swap are\n"
    "   classify.py's spellings of the same flags)\n";

int Usage(const std::string& why) { return UsageError("classify", why); }

int RunClassify(const std::vector<std::string>& args) {
  auto either = [&](const char* flag, const char* alias) {
    const std::string v = FlagValue(args, flag);
    return v.empty() ? FlagValue(args, alias) : v;
  };
  const std::string model = either("--model", "--model_def");
  const std::string weights = either("--weights", "--pretrained_model");
  const std::string images = FlagValue(args, "--images");
  const std::string dtype_flag = FlagValue(args, "--dtype");
  if (model.empty()) return Usage("--model is required (the deploy prototxt)");
  if (weights.empty()) return Usage("--weights is required (the trained caffemodel)");
  if (images.empty()) return Usage("--images is required (an image, a folder or a list file)");
  int top = 5;
  if (const std::string t = FlagValue(args, "--top"); !t.empty()) {
    try {
      top = std::stoi(t);
    } catch (const std::exception&) {
      top = 0;
    }
    if (top < 1) return Usage("--top needs a positive number, got '" + t + "'");
  }
  ImagePreprocessing preprocessing;
  NetDtype dtype;
  try {
    preprocessing = PreprocessingFlags(args);
    if (!dtype_flag.empty()) dtype = ParseNetDtype(dtype_flag);
  } catch (const std::invalid_argument& e) {
    return Usage(e.what());
  }

  const caffe::NetParameter file = ReadNetParameterText(model);
  Device& device = *ChooseDeviceForNet(FlagValue(args, "--device"), file).device;
  const caffe::NetParameter param =
      dtype_flag.empty() || dtype.type == DataType::kFloat32 ? file
                                                              : TypedVariant(file, dtype, device);
  NetOptions options;
  options.optimize = ToolOptimizeLevel();  // only the output is read: fused chains unwritten
  Net net(param, device, options);
  net.CopyTrainedLayersFrom(weights);
  if (net.input_blobs().size() != 1 || net.input_blobs()[0]->num_axes() != 4)
    throw Error(model + ": classify needs a deploy net with one N×C×H×W Input layer");
  const Blob& in = *net.input_blobs()[0];
  const std::vector<std::string> paths = ListImages(images);
  const NpyArray samples =
      ImagesToSamples(paths, in.shape(1), in.shape(2), in.shape(3), preprocessing);
  const std::vector<std::string> labels =
      FlagValue(args, "--labels").empty() ? std::vector<std::string>{}
                                          : ReadLabels(FlagValue(args, "--labels"));

  if (!net.QuantizersWithoutRange().empty()) {
    // Plain fp32 weights for a typed net: its ranges from these images (one pass per batch).
    const int batch = std::max(1, in.shape(0));
    const int passes = static_cast<int>((paths.size() + batch - 1) / batch);
    std::printf("%s has no quantizer ranges: observing them on the %zu image(s) given "
                "(mpcaffe calibrate --images calibrates on a set of its own)\n",
                weights.c_str(), paths.size());
    CalibrateWithFloatVariant(net, param, options, passes, [&](Net& fp32, int pass) {
      Blob& x = *fp32.input_blobs()[0];
      const size_t sample = static_cast<size_t>(x.count() / x.shape(0));
      std::vector<float> v(x.count());
      for (int b = 0; b < x.shape(0); ++b) {
        const size_t s = (static_cast<size_t>(pass) * x.shape(0) + b) % paths.size();
        std::copy_n(samples.values.begin() + s * sample, sample, v.begin() + b * sample);
      }
      x.FromFloat(v);
    });
  }
  const ClassScores scores = ScoreImages(net, samples, model, [](int) {});
  if (!labels.empty() && static_cast<int>(labels.size()) != scores.classes)
    throw Error("--labels '" + FlagValue(args, "--labels") + "' has " +
                std::to_string(labels.size()) + " lines; the net's output '" + scores.output +
                "' has " + std::to_string(scores.classes) + " classes");
  auto name = [&](int c) { return labels.empty() ? "class " + std::to_string(c) : labels[c]; };

  std::printf("%s (%s) on %s: %zu image(s), top %d of %d classes from '%s'\n", model.c_str(),
              dtype_flag.empty() ? "its own types" : NetDtypeLabel(dtype).c_str(),
              device.Describe().c_str(), paths.size(), std::min(top, scores.classes),
              scores.classes, scores.output.c_str());
  std::string json = "{\"model\": \"" + JsonEscape(model) + "\", \"weights\": \"" +
                     JsonEscape(weights) + "\", \"dtype\": \"" +
                     JsonEscape(dtype_flag.empty() ? "model" : NetDtypeLabel(dtype)) +
                     "\", \"device\": \"" + JsonEscape(device.Describe()) + "\", \"images\": [";
  for (size_t i = 0; i < paths.size(); ++i) {
    const std::vector<int> best = TopClasses(scores.row(i), scores.classes, top);
    std::printf("---------- %s ----------\n", paths[i].c_str());
    json += std::string(i ? ", " : "") + "{\"path\": \"" + JsonEscape(paths[i]) + "\", \"top\": [";
    for (size_t k = 0; k < best.size(); ++k) {
      const float p = scores.row(i)[best[k]];
      std::printf("%.4f - \"%s\"\n", p, name(best[k]).c_str());
      char score[32];
      std::snprintf(score, sizeof score, "%.9g", p);
      json += std::string(k ? ", " : "") + "{\"class\": " + std::to_string(best[k]) +
              ", \"label\": \"" + JsonEscape(name(best[k])) + "\", \"score\": " + score + "}";
    }
    json += "]}";
  }
  json += "]}\n";
  if (const std::string out = FlagValue(args, "--json"); !out.empty()) {
    std::ofstream f(out);
    if (!(f << json)) throw Error("--json '" + out + "': cannot write the file");
    std::printf("Wrote %s\n", out.c_str());
  }
  return 0;
}

int Classify(const std::vector<std::string>& args) {
  try {
    return RunClassify(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpcaffe classify: %s\n", e.what());
    return 1;
  }
}

RegisterCommand classify_command(
    "classify",
    "the top classes of photographs: --model deploy --weights w --images DIR [--labels l]",
    kUsage,
    {{"--model", "--model_def", "--weights", "--pretrained_model", "--images", "--labels", "--top",
      "--dtype", "--device", "--resize", "--mean-file", "--mean_file", "--mean-values",
      "--raw-scale", "--raw_scale", "--scale", "--channel-swap", "--channel_swap",
      "--transform-from", "--json"},
     {}},
    Classify);

}  // namespace
}  // namespace mpcaffe::tools

// tools/cmd_calibrate.cc — `mpcaffe calibrate`: the paper's deployment step on the command line.
// The typed net (an fp32 prototxt rewritten to --dtype, or a typed prototxt as it is) gets the
// fp32 weights; its fp32 variant runs with every quantizer in OBSERVE mode over the inputs (the
// net's Data layers, or --input x.npy), and the typed net with the observed ranges and its
// weights is written as a caffemodel (and the typed prototxt beside it) that `mpcaffe test` and
// `mpcaffe time` load as they are. --phase TRAIN builds the nets in the TRAIN phase, so a
// train_test prototxt calibrates on its training Data layer rather than on the test set (the
// TRAIN-phase net also runs its Dropout layers, which widens the ranges observed after them).
// Under `mpirun -np N` the passes are shared by the ranks (rank r runs passes r, r + N, …, on
// its shard of the Data layers' records or of --input), the observed ranges are reduced over
// the ranks (min of the minima, max of the maxima: the ranges of one process running every
// pass, bit for bit) and rank 0 writes the files.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "net/distributed.h"
#include "net/net.h"
#include "proto/model_io.h"
#include "tools/command.h"
#include "tools/net_variants.h"
#include "tools/calibration_report.h"
#include "tools/image_samples.h"
#include "tools/image_scores.h"
#include "tools/npy_file.h"
#include "tools/progress_bar.h"

namespace mpcaffe::tools {
namespace {

constexpr char kUsage[] =
    "usage: mpcaffe calibrate --model net.prototxt --weights fp32.caffemodel\n"
    "         [--dtype int8|int8w4|int16|fp16] (else the typed prototxt's own types)\n"
    "         [--input x.npy] (NCHW float32; else the net's Data layers)\n"
    "         [--images DIR|list.txt [--resize H,W] [--mean-file mean.binaryproto]\n"
    "          [--mean-values B,G,R] [--raw-scale R] [--scale S] [--channel-swap 2,1,0]\n"
    "          [--transform-from train_val.prototxt]] (photographs for the net's Input layer)\n"
    "         [--report report.json] [--report-images DIR|list.txt] (with images: the fp32\n"
    "          and calibrated nets' classes compared, on held-out images if given)\n"
    "         [--iterations N] --output calibrated.caffemodel\n"
    "         [--output-model typed.prototxt] [--phase TEST|TRAIN] [--device i]\n"
    "         [--no-progress]\n";

int Usage(const std::string& why) { return UsageError("calibrate", why); }

/// Whether any layer of `param` (or the net itself) names a data type other than fp32.
bool IsTyped(const caffe::NetParameter& param) {
  const caffe::DataType fp32 = DataTypeToProto(DataType::kFloat32);
  if (param.has_data_type() && param.data_type() != fp32) return true;
  for (const auto& l : param.layer())
    if ((l.has_bottom_data_type() && l.bottom_data_type() != fp32) ||
        (l.has_compute_data_type() && l.compute_data_type() != fp32) ||
        (l.has_top_data_type() && l.top_data_type() != fp32))
      return true;
  return false;
}

/// The samples of an NCHW float32 array, handed out a batch at a time to an input blob (wrapping
/// around at the end of the array).
class NpyBatches {
 public:
  NpyBatches(NpyArray array, std::string path) : array_(std::move(array)), path_(std::move(path)) {
    if (array_.shape.size() < 2)
      throw Error("'" + path_ + "': an array of samples (N, C, H, W) is needed, its shape has " +
                  std::to_string(array_.shape.size()) + " dimension(s)");
    if (array_.shape[0] < 1) throw Error("'" + path_ + "' holds no samples (N = 0)");
    sample_ = array_.values.size() / static_cast<size_t>(array_.shape[0]);
  }
  int64_t samples() const { return array_.shape[0]; }
  std::string ShapeText() const {
    std::string s = "(";
    for (size_t i = 0; i < array_.shape.size(); ++i)
      s += (i ? ", " : "") + std::to_string(array_.shape[i]);
    return s + ")";
  }
  /// Checks that one sample has the size of one item of `blob` (named `name`).
  void CheckFits(const Blob& blob, const std::string& name) const {
    const size_t item = blob.num_axes() > 0 ? blob.count() / blob.shape(0) : blob.count();
    if (item != sample_)
      throw Error("'" + path_ + "' has samples of shape " + ShapeText() + ", " +
                  std::to_string(sample_) + " values each; the net's input '" + name + "' (" +
                  blob.shape_string() + ") takes " + std::to_string(item) + " per sample");
  }
  /// Fills `blob` with the samples of batch `pass` (batch size = the blob's dimension 0).
  void Fill(Blob& blob, int pass) const {
    const size_t batch = blob.num_axes() > 0 ? blob.shape(0) : 1;
    std::vector<float> v(batch * sample_);
    for (size_t b = 0; b < batch; ++b) {
      const size_t s = (static_cast<size_t>(pass) * batch + b) % array_.shape[0];
      std::copy_n(array_.values.begin() + s * sample_, sample_, v.begin() + b * sample_);
    }
    blob.FromFloat(v);
  }

 private:
  NpyArray array_;
  std::string path_;
  size_t sample_ = 0;
};

/// The range summary: one line per quantizer of the typed net that has a range (each name once,
/// in layer order) with the types it converts between.
void PrintRanges(Net& net) {
  std::printf("%-32s %-12s %14s %14s\n", "quantizer", "type", "min", "max");
  std::set<std::string> seen;
  for (const auto& layer : net.layers())
    for (quant::Quantizer* q : layer->quantizers()) {
      if (!seen.insert(q->name()).second) continue;
      const std::string types =
          q->input_type() == q->output_type()
              ? std::string(DtypeLabel(q->input_type()))
              : std::string(DtypeLabel(q->input_type())) + ">" + DtypeLabel(q->output_type());
      if (q->has_observed())
        std::printf("%-32s %-12s %14.6g %14.6g\n", q->name().c_str(), types.c_str(),
                    q->observed_min() + 0.0, q->observed_max() + 0.0);
      else if (q->has_input_range() || q->has_output_range())
        std::printf("%-32s %-12s %14.6g %14.6g (given)\n", q->name().c_str(), types.c_str(),
                    q->min_in() + 0.0, q->max_in() + 0.0);
    }
  int nested = 0;
  for (size_t i = 0; i < net.layers().size(); ++i) nested += !net.nested_nets(static_cast<int>(i)).empty();
  if (nested > 0)
    std::printf("(+ the ranges of the nets nested in %d layer(s), saved with them)\n", nested);
}

int RunCalibrate(const std::vector<std::string>& args) {
  const std::string model = FlagValue(args, "--model");
  const std::string weights = FlagValue(args, "--weights");
  const std::string output = FlagValue(args, "--output");
  const std::string output_model = FlagValue(args, "--output-model");
  const std::string input = FlagValue(args, "--input");
  const std::string images = FlagValue(args, "--images");
  const std::string dtype_flag = FlagValue(args, "--dtype");
  const std::string report = FlagValue(args, "--report");
  const std::string report_images = FlagValue(args, "--report-images");
  if (model.empty()) return Usage("--model is required");
  if (weights.empty()) return Usage("--weights is required (the trained fp32 caffemodel)");
  if (output.empty()) return Usage("--output is required (the calibrated caffemodel to write)");
  if (!input.empty() && !images.empty()) return Usage("give --input or --images, not both");
  if (!report.empty() && images.empty() && report_images.empty())
    return Usage("--report compares the nets on images: give --images or --report-images");
  ImagePreprocessing preprocessing;
  try {
    preprocessing = PreprocessingFlags(args);
  } catch (const std::invalid_argument& e) {
    return Usage(e.what());
  }
  NetDtype dtype;
  if (!dtype_flag.empty()) {
    try {
      dtype = ParseNetDtype(dtype_flag);
    } catch (const std::exception& e) {
      return Usage(e.what());
    }
    if (dtype.type == DataType::kFloat32)
      return Usage("--dtype fp32 needs no calibration; give int8, int16 or fp16");
  }
  const std::string phase = FlagValue(args, "--phase", "TEST");
  if (phase != "TEST" && phase != "TRAIN")
    return Usage("--phase is TEST or TRAIN (which phase's Data layers give the samples)");
  int iterations = 0;  // 0: the default below
  if (!FlagValue(args, "--iterations").empty()) {
    try {
      iterations = std::stoi(FlagValue(args, "--iterations"));
    } catch (const std::exception&) {
      return Usage("--iterations needs a number");
    }
    if (iterations < 1) return Usage("--iterations must be at least 1");
  }

  // The job first: the Data layers built below read the rank's shard.
  Communicator& comm = Communicator::World();
  const bool root = comm.root();
  Device& device = DeviceOrDefault(FlagValue(args, "--device"));
  const caffe::NetParameter file = ReadNetParameterText(model);
  if (dtype_flag.empty() && !IsTyped(file))
    throw Error(model + ": every layer computes in fp32; give --dtype int8, int16 or fp16 (or a "
                        "typed prototxt, e.g. one `mpcaffe convert` wrote)");
  const caffe::NetParameter typed = dtype_flag.empty() ? file : TypedVariant(file, dtype, device);

  NetOptions options;
  options.phase = phase == "TRAIN" ? caffe::TRAIN : caffe::TEST;
  Net net(typed, device, options);
  net.CopyTrainedLayersFrom(weights);

  // The inputs: --input fills the net's one Input layer; else the Data layers read themselves.
  std::unique_ptr<NpyBatches> batches;
  std::string input_name;
  if (!input.empty() || !images.empty()) {
    if (net.input_blobs().size() != 1) {
      std::string names;
      for (Blob* b : net.input_blobs()) names += (names.empty() ? "" : ", ") + b->name();
      throw Error(model + ": " + (images.empty() ? "--input" : "--images") +
                  " fills the net's one Input layer, the net has " +
                  std::to_string(net.input_blobs().size()) + " Input tops" +
                  (names.empty() ? " (its data comes from Data layers: leave out --input)"
                                 : " (" + names + ")"));
    }
    input_name = net.input_blobs()[0]->name();
    if (images.empty()) {
      batches = std::make_unique<NpyBatches>(ReadNpyFloat32(input), input);
    } else {
      const Blob& in = *net.input_blobs()[0];
      if (in.num_axes() != 4)
        throw Error(model + ": --images needs an N×C×H×W input, '" + input_name + "' is " +
                    in.shape_string());
      batches = std::make_unique<NpyBatches>(
          ImagesToSamples(ListImages(images), in.shape(1), in.shape(2), in.shape(3), preprocessing),
          images);
    }
    batches->CheckFits(*net.input_blobs()[0], input_name);
    if (iterations == 0) {
      const int64_t batch = std::max(1, net.input_blobs()[0]->shape(0));
      iterations = static_cast<int>((batches->samples() + batch - 1) / batch);
    }
  } else if (!net.input_blobs().empty()) {
    throw Error(model + ": the net takes its data from Input layers ('" +
                net.input_blobs()[0]->name() +
                "'); give the calibration samples with --input x.npy (NCHW float32) or "
                "--images DIR|list.txt");
  }
  if (iterations == 0) iterations = 20;

  const std::vector<std::string> missing = net.QuantizersWithoutRange();
  if (root) std::printf("Calibrating %s (%s) on %s: %zu quantizers to observe, %d forward passes of the fp32 "
              "net over %s\n",
              model.c_str(), dtype_flag.empty() ? "its own types" : NetDtypeLabel(dtype).c_str(),
              device.Describe().c_str(), missing.size(), iterations,
              !images.empty() ? ("the images of '" + images + "'").c_str()
              : input.empty() ? "the Data layers"
                              : ("'" + input + "'").c_str());
  if (root && comm.size() > 1)
    std::printf("The passes are shared by %d ranks (MPI), each on its shard of the samples; the "
                "ranges are reduced over the ranks\n", comm.size());
  std::fflush(stdout);
  if (missing.empty()) {
    if (root) std::printf("Every quantizer already has a range (from the model or the weights, or none is "
                "needed: fp16 computes without ranges); writing the net as it is\n");
  } else {
    // Rank r of N runs passes r, r + N, … (a job of one: all of them).
    const int size = comm.size(), mine = (iterations - comm.rank() + size - 1) / size;
    ProgressBar bar("calibrate", mine, root && !HasFlag(args, "--no-progress"));
    CalibrateWithFloatVariant(
        net, typed, options, mine,
        [&](Net& fp32, int pass) {
          if (batches) batches->Fill(fp32.blob(input_name), pass * size + comm.rank());
          if (pass > 0) bar.Advance();
        },
        [&](Net& fp32) { ReduceObservedRanges(fp32, comm); });
    if (mine > 0) bar.Advance();
  }
  const std::vector<std::string> still = net.QuantizersWithoutRange();
  if (!still.empty())
    throw Error(model + ": after calibration quantizer '" + still[0] +
                "' still has no range (the fp32 net never ran through it)");

  if (!root) return 0;  // rank 0 writes for the job
  PrintRanges(net);
  net.Save(output);
  std::printf("Wrote %s\n", output.c_str());
  if (!images.empty() || !report_images.empty()) {
    // What calibration changed: the fp32 net and the calibrated one on the same photographs.
    const std::string source = report_images.empty() ? images : report_images;
    std::vector<int> labels;
    const std::vector<std::string> paths = ListImages(source, &labels);
    const Blob& in = *net.input_blobs().at(0);
    const NpyArray samples =
        ImagesToSamples(paths, in.shape(1), in.shape(2), in.shape(3), preprocessing);
    Net fp32(WithDataType(file, DataType::kFloat32), device, options);
    fp32.CopyTrainedLayersFrom(weights);
    ProgressBar bar("report", 2 * static_cast<int>(paths.size()), !HasFlag(args, "--no-progress"));
    int done = 0, offset = 0;  // the second net's images come after the first's
    auto advance = [&](int images_done) {
      for (; done < offset + images_done; ++done) bar.Advance();
    };
    const ClassScores reference = ScoreImages(fp32, samples, model, advance);
    offset = static_cast<int>(paths.size());
    const ClassScores calibrated = ScoreImages(net, samples, model, advance);
    ReportCalibration(reference, calibrated, paths, labels,
                      dtype_flag.empty() ? "calibrated" : NetDtypeLabel(dtype), source, report);
  }
  if (!output_model.empty()) {
    WriteProtoToTextFile(typed, output_model);
    std::printf("Wrote %s\n", output_model.c_str());
  }
  if (output_model.empty() && !dtype_flag.empty())
    std::printf("Score it with the typed prototxt (--output-model writes it; so does `mpcaffe "
                "convert --model %s --dtype %s --output typed.prototxt`):\n"
                "  mpcaffe test --model typed.prototxt --weights %s\n",
                model.c_str(), NetDtypeLabel(dtype).c_str(), output.c_str());
  else
    std::printf("Score it: mpcaffe test --model %s --weights %s\n",
                output_model.empty() ? model.c_str() : output_model.c_str(), output.c_str());
  return 0;
}

int Calibrate(const std::vector<std::string>& args) {
  try {
    return RunCalibrate(args);
  } catch (const std::exception& e) {
    // In a job of several ranks the others would wait for this one: end them all.
    AbortJobOnError(std::string("mpcaffe calibrate: ") + e.what());
    std::fprintf(stderr, "mpcaffe calibrate: %s\n", e.what());
    return 1;
  }
}

RegisterCommand calibrate_command(
    "calibrate",
    "observe a trained net's ranges and write it typed: --model m --weights w --dtype int8 "
    "--output c.caffemodel",
    kUsage,
    {{"--model", "--weights", "--dtype", "--input", "--iterations", "--output", "--output-model",
      "--phase", "--device", "--images", "--resize", "--mean-file", "--mean-values", "--raw-scale",
      "--scale", "--channel-swap", "--transform-from", "--report", "--report-images"},
     {"--no-progress"}},
    Calibrate);

}  // namespace
}  // namespace mpcaffe::tools

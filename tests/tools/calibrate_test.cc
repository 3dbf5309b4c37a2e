// tests/tools/calibrate_test.cc — the deployment verbs of the command line on a tiny net:
// `mpcaffe calibrate` (from --input x.npy, from photographs with --images and from a Data
// layer's LMDB) observes the ranges the
// inputs really have and writes a typed net that `mpcaffe test` scores and that computes what the
// fp32 net computes within int8's error; `mpcaffe convert` writes the typed prototxt; bad input
// is refused naming the file and what is wrong. Also the .npy reader and the progress bar's two
// outputs (terminal: redrawn; log: plain lines).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>


#include "layers/image_io.h"
#include "net/net.h"
#include "proto/model_io.h"
#include "tools/npy_file.h"
#include "tools/progress_bar.h"
#include "tests/tools/run_mpcaffe.h"

namespace mpcaffe {
namespace {

namespace fs = std::filesystem;

using mpcaffe::test_support::CommandResult;
using mpcaffe::test_support::MpcaffeExe;

/// `mpcaffe <args>`, standard output and errors captured.
CommandResult Mpcaffe(const std::string& args) {
  return mpcaffe::test_support::RunMpcaffe(args + " 2>&1");
}

/// Writes a .npy file: `descr` ('<f4' for float32) and the raw bytes of `data`.
void WriteNpy(const fs::path& path, const std::vector<int>& shape, const void* data, size_t bytes,
              const std::string& descr = "<f4") {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (";
  for (int d : shape) dict += std::to_string(d) + ", ";
  dict += "), }";
  while ((10 + dict.size() + 1) % 64) dict += ' ';
  dict += '\n';
  std::ofstream f(path, std::ios::binary);
  f.write("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(dict.size());
  f.put(static_cast<char>(len & 0xff)).put(static_cast<char>(len >> 8));
  f << dict;
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
}

// A small classifier on 1×6×6 inputs: convolution, ReLU, pooling, inner product, softmax.
const char* kBody = R"(
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 4 kernel_size: 3
    weight_filler { type: "gaussian" std: 0.5 } bias_filler { type: "constant" value: 0.1 } } }
layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
layer { name: "pool" type: "Pooling" bottom: "conv" top: "pool"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "ip" type: "InnerProduct" bottom: "pool" top: "ip"
  inner_product_param { num_output: 3
    weight_filler { type: "gaussian" std: 0.5 } bias_filler { type: "constant" value: 0.0 } } }
)";

const char* kDeploy = R"(name: "tiny"
layer { name: "input" type: "Input" top: "data" input_param { shape { dim: 4 dim: 1 dim: 6 dim: 6 } } }
)";

class CalibrateTest : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(MpcaffeExe())) << MpcaffeExe();
    std::string templ = (fs::temp_directory_path() / "mpcaffe-calibrate-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    dir_ = templ;
    model_ = (dir_ / "tiny.prototxt").string();
    std::ofstream(model_) << kDeploy << kBody
                          << "layer { name: \"prob\" type: \"Softmax\" bottom: \"ip\" top: \"prob\" }\n";
    // fp32 weights from the fillers, saved as `mpcaffe train` would.
    weights_ = (dir_ / "fp32.caffemodel").string();
    Net net(ReadNetParameterText(model_), DefaultDevice());
    net.Save(weights_);
    // Eight samples in [-2, 3]: the input range calibration must find.
    samples_.resize(8 * 36);
    for (size_t i = 0; i < samples_.size(); ++i)
      samples_[i] = -2.0f + 5.0f * static_cast<float>((i * 37) % samples_.size()) / (samples_.size() - 1);
    npy_ = (dir_ / "x.npy").string();
    WriteNpy(npy_, {8, 1, 6, 6}, samples_.data(), samples_.size() * 4);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  /// The softmax of the first batch of samples through `model` with `weights`.
  std::vector<float> Probabilities(const std::string& model, const std::string& weights) {
    Net net(ReadNetParameterText(model), DefaultDevice());
    net.CopyTrainedLayersFrom(weights);
    EXPECT_TRUE(net.QuantizersWithoutRange().empty());
    net.blob("data").FromFloat(std::vector<float>(samples_.begin(), samples_.begin() + 4 * 36));
    net.Forward();
    return net.blob("prob").ToFloat();
  }

  /// Three gray 8×8 pictures photos/p<i>.png and photos/list.txt naming them with labels 0, 1,
  /// 2; the net takes 1×6×6, so with --resize 8,8 its input is the centre crop. [lo, hi]: the
  /// crops' range after (pixel - 100) · 0.02.
  void WriteGrayPhotos(float* lo, float* hi) {
    fs::create_directory(dir_ / "photos");
    *lo = 1e9f, *hi = -1e9f;
    std::ofstream list(Path("photos/list.txt"));
    for (int i = 0; i < 3; ++i) {
      Image m(8, 8, 1);
      for (int y = 0; y < 8; ++y)
        for (int x = 0; x < 8; ++x) {
          m.at(y, x, 0) = static_cast<uint8_t>(60 * i + 7 * y + 11 * x);
          if (y >= 1 && y < 7 && x >= 1 && x < 7) {
            const float v = (m.at(y, x, 0) - 100.0f) * 0.02f;
            *lo = std::min(*lo, v), *hi = std::max(*hi, v);
          }
        }
      WriteImage(Path("photos/p" + std::to_string(i) + ".png"), m);
      list << "p" << i << ".png " << i << "\n";
    }
  }

  fs::path dir_;
  std::string model_, weights_, npy_;
  std::vector<float> samples_;
};

TEST_F(CalibrateTest, Int8FromNpyObservesTheInputRangeAndScoresLikeFp32) {
  const std::string out = Path("int8.caffemodel"), typed = Path("int8.prototxt");
  const CommandResult r = Mpcaffe("calibrate --model '" + model_ + "' --weights '" + weights_ +
                        "' --dtype int8 --input '" + npy_ + "' --output '" + out +
                        "' --output-model '" + typed + "' --no-progress");
  ASSERT_EQ(r.status, 0) << r.out;
  // Two passes of batch 4 cover the eight samples (the default: the file once).
  EXPECT_NE(r.out.find("2 forward passes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("quantizer"), std::string::npos) << r.out;

  // The typed prototxt: the convolution computes in int8, the input layer stays fp32.
  const caffe::NetParameter t = ReadNetParameterText(typed);
  for (const auto& l : t.layer()) {
    if (l.name() == "conv") {
      EXPECT_EQ(l.compute_data_type(), caffe::CAFFE_INT8_QUANTIZED);
    }
    if (l.name() == "input") {
      EXPECT_EQ(l.top_data_type(), caffe::CAFFE_FLOAT);
    }
  }
  // The saved ranges: the one on the net's input saw exactly the samples' range.
  const caffe::NetParameter saved = ReadNetParameterBinary(out);
  ASSERT_GT(saved.quantizer_size(), 0);
  const float lo = *std::min_element(samples_.begin(), samples_.end());
  const float hi = *std::max_element(samples_.begin(), samples_.end());
  bool input_seen = false;
  for (const auto& q : saved.quantizer()) {
    EXPECT_TRUE(q.has_observed_min() && q.has_observed_max()) << q.name();
    if (q.observed_min() == lo && q.observed_max() == hi) input_seen = true;
  }
  EXPECT_TRUE(input_seen) << "no quantizer observed the input range [" << lo << ", " << hi << "]";
  // The summary names every saved quantizer.
  for (const auto& q : saved.quantizer()) EXPECT_NE(r.out.find(q.name()), std::string::npos) << q.name();

  // The typed net with the calibrated weights computes the fp32 net's probabilities.
  const std::vector<float> fp32 = Probabilities(model_, weights_);
  const std::vector<float> int8 = Probabilities(typed, out);
  ASSERT_EQ(fp32.size(), int8.size());
  for (size_t i = 0; i < fp32.size(); ++i) EXPECT_NEAR(int8[i], fp32[i], 0.06) << i;

  const CommandResult scored = Mpcaffe("test --model '" + typed + "' --weights '" + out + "' --iterations 2");
  EXPECT_EQ(scored.status, 0) << scored.out;
  EXPECT_NE(scored.out.find("prob ="), std::string::npos) << scored.out;
}

TEST_F(CalibrateTest, Int8FromImagesObservesThePreprocessedRange) {
  float lo = 0, hi = 0;
  WriteGrayPhotos(&lo, &hi);
  std::ofstream(Path("train_val.prototxt"))
      << "layer { name: 'd' type: 'Data' top: 'data' include { phase: TEST } "
         "transform_param { mean_value: 100 scale: 0.02 } data_param { source: 'x' } }\n";
  const std::string base = "calibrate --model '" + model_ + "' --weights '" + weights_ +
                           "' --dtype int8 --no-progress --resize 8,8 ";
  for (const std::string& how :
       {"--images '" + Path("photos") + "' --mean-values 100 --scale 0.02",
        "--images '" + Path("photos/list.txt") + "' --transform-from '" +
            Path("train_val.prototxt") + "'"}) {
    SCOPED_TRACE(how);
    const std::string out = Path("img.caffemodel");
    const CommandResult r = Mpcaffe(base + how + " --output '" + out + "'");
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_NE(r.out.find("1 forward passes"), std::string::npos) << r.out;  // 3 images, batch 4
    const caffe::NetParameter saved = ReadNetParameterBinary(out);
    bool input_seen = false;
    for (const auto& q : saved.quantizer())
      input_seen |= std::fabs(q.observed_min() - lo) < 1e-5 && std::fabs(q.observed_max() - hi) < 1e-5;
    EXPECT_TRUE(input_seen) << "no quantizer observed the images' range [" << lo << ", " << hi
                            << "]\n" << r.out;
  }
  // The report: both nets on the three labelled pictures, summary printed and JSON written.
  const CommandResult reported =
      Mpcaffe(base + "--images '" + Path("photos/list.txt") + "' --mean-values 100 --scale 0.02" +
              " --output '" + Path("img.caffemodel") + "' --report '" + Path("report.json") + "'");
  ASSERT_EQ(reported.status, 0) << reported.out;
  EXPECT_NE(reported.out.find("Report on the 3 image(s)"), std::string::npos) << reported.out;
  EXPECT_NE(reported.out.find("Against the list's labels (3 image(s))"), std::string::npos)
      << reported.out;
  std::ifstream report_file(Path("report.json"));
  const std::string report((std::istreambuf_iterator<char>(report_file)), {});
  for (const char* key : {"\"top1_agreement\": ", "\"mean_abs_score_difference\": ",
                          "\"fp32_top1_accuracy\": ", "\"calibrated_top5\": ", "p2.png"})
    EXPECT_NE(report.find(key), std::string::npos) << key << "\n" << report;
  EXPECT_NE(report.find("\"count\": 3"), std::string::npos) << report;
  // A damaged picture is named; a net input of 1 channel takes gray pictures only as is.
  std::ofstream(Path("photos/p1.png")) << "not a picture";
  const CommandResult bad = Mpcaffe(base + "--images '" + Path("photos") + "' --output '" +
                                    Path("x.caffemodel") + "'");
  EXPECT_EQ(bad.status, 1) << bad.out;
  EXPECT_NE(bad.out.find("p1.png': not an image"), std::string::npos) << bad.out;
  const CommandResult both = Mpcaffe(base + "--images '" + Path("photos") + "' --input '" + npy_ +
                                     "' --output '" + Path("x.caffemodel") + "'");
  EXPECT_EQ(both.status, 2) << both.out;
  EXPECT_NE(both.out.find("give --input or --images, not both"), std::string::npos) << both.out;
}

// `mpcaffe classify`: the top classes of each picture are the net's own scores for the
// preprocessed picture (a batch of 4 over 3 pictures: the input is reshaped), with labels, as
// JSON, in int8 from the calibrated weights; a label file of the wrong length is refused.
TEST_F(CalibrateTest, ClassifyPrintsEachPicturesTopClasses) {
  float lo = 0, hi = 0;
  WriteGrayPhotos(&lo, &hi);
  std::ofstream(Path("labels.txt")) << "n0 zero\nn1 one\nn2 two\n";
  const std::string common = " --images '" + Path("photos") +
                             "' --resize 8,8 --mean-values 100 --scale 0.02 --labels '" +
                             Path("labels.txt") + "' --top 2";
  const CommandResult r = Mpcaffe("classify --model '" + model_ + "' --weights '" + weights_ +
                                  "'" + common + " --json '" + Path("scores.json") + "'");
  ASSERT_EQ(r.status, 0) << r.out;
  // The same pictures through the net by hand: centre 6×6 of each, (pixel - 100) · 0.02.
  Net net(ReadNetParameterText(model_), DefaultDevice());
  net.CopyTrainedLayersFrom(weights_);
  net.blob("data").Reshape({3, 1, 6, 6});
  std::vector<float> x;
  for (int i = 0; i < 3; ++i) {
    const Image m = ReadImage(Path("photos/p" + std::to_string(i) + ".png"), 0, 0, false);
    for (int y = 1; y < 7; ++y)
      for (int xx = 1; xx < 7; ++xx) x.push_back((m.at(y, xx, 0) - 100.0f) * 0.02f);
  }
  net.blob("data").FromFloat(x);
  net.Forward();
  const std::vector<float> prob = net.blob("prob").ToFloat();
  const char* labels[] = {"n0 zero", "n1 one", "n2 two"};
  for (int i = 0; i < 3; ++i) {
    const float* row = prob.data() + 3 * i;
    const int best = static_cast<int>(std::max_element(row, row + 3) - row);
    char line[96];
    std::snprintf(line, sizeof line, "%.4f - \"%s\"", row[best], labels[best]);
    const size_t at = r.out.find("p" + std::to_string(i) + ".png ----------");
    ASSERT_NE(at, std::string::npos) << r.out;
    EXPECT_EQ(r.out.find(line, at), r.out.find('\n', at) + 1) << line << "\n" << r.out;
  }
  std::ifstream json_file(Path("scores.json"));
  const std::string json((std::istreambuf_iterator<char>(json_file)), {});
  EXPECT_NE(json.find("p1.png"), std::string::npos) << json;
  EXPECT_NE(json.find("\"label\": \"n"), std::string::npos) << json;
  // int8: calibrated on the pictures, then classified with the calibrated weights.
  const CommandResult c = Mpcaffe("calibrate --model '" + model_ + "' --weights '" + weights_ +
                                  "' --dtype int8 --no-progress --images '" + Path("photos") +
                                  "' --resize 8,8 --mean-values 100 --scale 0.02 --output '" +
                                  Path("int8.caffemodel") + "'");
  ASSERT_EQ(c.status, 0) << c.out;
  const CommandResult q = Mpcaffe("classify --model '" + model_ + "' --weights '" +
                                  Path("int8.caffemodel") + "' --dtype int8" + common);
  ASSERT_EQ(q.status, 0) << q.out;
  EXPECT_EQ(q.out.find("has no quantizer ranges"), std::string::npos) << q.out;
  EXPECT_NE(q.out.find("(int8)"), std::string::npos) << q.out;
  std::ofstream(Path("labels.txt")) << "only one\n";
  const CommandResult wrong = Mpcaffe("classify --model '" + model_ + "' --weights '" +
                                      weights_ + "'" + common);
  EXPECT_EQ(wrong.status, 1) << wrong.out;
  EXPECT_NE(wrong.out.find("has 1 lines; the net's output 'prob' has 3 classes"),
            std::string::npos) << wrong.out;
}

TEST_F(CalibrateTest, TypedPrototxtFromConvertCalibratesWithItsOwnTypes) {
  const std::string typed = Path("int16.prototxt");
  const CommandResult c = Mpcaffe("convert --model '" + model_ + "' --dtype int16 --output '" + typed + "'");
  ASSERT_EQ(c.status, 0) << c.out;
  const caffe::NetParameter t = ReadNetParameterText(typed);
  int int16_layers = 0;
  for (const auto& l : t.layer()) int16_layers += l.compute_data_type() == caffe::CAFFE_INT16_QUANTIZED;
  EXPECT_GE(int16_layers, 3) << c.out;  // conv, relu, pool, ip can all compute in int16

  // No --dtype: the prototxt's own types; no --output-model needed.
  const std::string out = Path("int16.caffemodel");
  const CommandResult r = Mpcaffe("calibrate --model '" + typed + "' --weights '" + weights_ + "' --input '" +
                        npy_ + "' --iterations 1 --output '" + out + "' --no-progress");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("its own types"), std::string::npos) << r.out;
  const std::vector<float> fp32 = Probabilities(model_, weights_);
  const std::vector<float> int16 = Probabilities(typed, out);
  for (size_t i = 0; i < fp32.size(); ++i) EXPECT_NEAR(int16[i], fp32[i], 2e-3) << i;

  // To standard output without --output.
  const CommandResult printed = Mpcaffe("convert --model '" + model_ + "' --dtype fp16");
  ASSERT_EQ(printed.status, 0) << printed.out;
  EXPECT_NE(printed.out.find("compute_data_type: CAFFE_HALF"), std::string::npos) << printed.out;
}

TEST_F(CalibrateTest, Fp16NeedsNoRangesAndIsWrittenAsItIs) {
  const std::string out = Path("fp16.caffemodel"), typed = Path("fp16.prototxt");
  const CommandResult r = Mpcaffe("calibrate --model '" + model_ + "' --weights '" + weights_ +
                        "' --dtype fp16 --input '" + npy_ + "' --output '" + out +
                        "' --output-model '" + typed + "' --no-progress");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("none is needed"), std::string::npos) << r.out;
  const std::vector<float> fp32 = Probabilities(model_, weights_);
  const std::vector<float> fp16 = Probabilities(typed, out);
  for (size_t i = 0; i < fp32.size(); ++i) EXPECT_NEAR(fp16[i], fp32[i], 5e-3) << i;
}

/// Writes IDX image and label files (the MNIST format) of `n` 6×6 images with pixels
/// lo..lo+199 (every value present when n >= 6).
void WriteIdx(const fs::path& images, const fs::path& labels, int n, int lo) {
  auto be32 = [](std::ofstream& f, uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) f.put(static_cast<char>((v >> s) & 0xff));
  };
  std::ofstream im(images, std::ios::binary), lb(labels, std::ios::binary);
  be32(im, 0x803), be32(im, n), be32(im, 6), be32(im, 6);
  be32(lb, 0x801), be32(lb, n);
  for (int i = 0; i < n; ++i) {
    for (int p = 0; p < 36; ++p) im.put(static_cast<char>((i * 36 + p) * 7 % 200 + lo));
    lb.put(static_cast<char>(i % 3));
  }
}

/// Whether a quantizer of the caffemodel observed exactly [lo, hi] (pixels scaled by 1/256).
bool ObservedPixelRange(const std::string& caffemodel, int lo, int hi) {
  const caffe::NetParameter saved = ReadNetParameterBinary(caffemodel);
  for (const auto& q : saved.quantizer())
    if (std::fabs(q.observed_min() - lo / 256.0) < 1e-6 &&
        std::fabs(q.observed_max() - hi / 256.0) < 1e-6)
      return true;
  return false;
}

TEST_F(CalibrateTest, DataLayerNetCalibratesFromItsLmdb) {
  // Training images with pixels 20..219, test images 40..239.
  for (const auto& [name, lo] : {std::pair<std::string, int>{"train", 20}, {"test", 40}}) {
    WriteIdx(dir_ / (name + "-images.idx"), dir_ / (name + "-labels.idx"), 8, lo);
    const CommandResult converted =
        Mpcaffe("convert_mnist '" + Path(name + "-images.idx") + "' '" +
                Path(name + "-labels.idx") + "' '" + Path(name + "_lmdb") + "'");
    ASSERT_EQ(converted.status, 0) << converted.out;
  }
  const std::string model = Path("train_test.prototxt");
  std::ofstream f(model);
  f << "name: \"tiny\"\n";
  for (const char* phase : {"TRAIN", "TEST"})
    f << "layer { name: \"d\" type: \"Data\" top: \"data\" top: \"label\"\n"
      << "  include { phase: " << phase << " } transform_param { scale: 0.00390625 }\n"
      << "  data_param { source: \"" << Path(phase == std::string("TRAIN") ? "train_lmdb" : "test_lmdb")
      << "\" batch_size: 4 backend: LMDB } }\n";
  f << kBody
    << "layer { name: \"accuracy\" type: \"Accuracy\" bottom: \"ip\" bottom: \"label\" top: "
       "\"accuracy\" include { phase: TEST } }\n";
  f.close();
  const std::string out = Path("int8.caffemodel"), typed = Path("int8.prototxt");
  const CommandResult r = Mpcaffe("calibrate --model '" + model + "' --weights '" + weights_ +
                               "' --dtype int8 --iterations 2 --output '" + out +
                               "' --output-model '" + typed + "' --no-progress");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(ObservedPixelRange(out, 40, 239)) << r.out;  // the TEST phase's Data layer
  const CommandResult scored = Mpcaffe("test --model '" + typed + "' --weights '" + out + "' --iterations 2");
  EXPECT_EQ(scored.status, 0) << scored.out;
  EXPECT_NE(scored.out.find("accuracy ="), std::string::npos) << scored.out;

  const std::string train_out = Path("int8_train.caffemodel");
  const CommandResult t = Mpcaffe("calibrate --model '" + model + "' --weights '" + weights_ +
                               "' --dtype int8 --iterations 2 --phase TRAIN --output '" +
                               train_out + "' --no-progress");
  ASSERT_EQ(t.status, 0) << t.out;
  EXPECT_TRUE(ObservedPixelRange(train_out, 20, 219)) << t.out;
  const CommandResult train_scored =
      Mpcaffe("test --model '" + typed + "' --weights '" + train_out + "' --iterations 2");
  EXPECT_EQ(train_scored.status, 0) << train_scored.out;
}

TEST_F(CalibrateTest, BadInputIsRefusedNamingTheFileAndTheProblem) {
  const std::string base = "calibrate --model '" + model_ + "' --weights '" + weights_ +
                           "' --output '" + Path("c.caffemodel") + "' --no-progress ";
  // float64 samples.
  std::vector<double> doubles(8 * 36, 0.5);
  const std::string f64 = Path("x64.npy");
  WriteNpy(f64, {8, 1, 6, 6}, doubles.data(), doubles.size() * 8, "<f8");
  CommandResult r = Mpcaffe(base + "--dtype int8 --input '" + f64 + "'");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find(f64), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("'<f8'"), std::string::npos) << r.out;
  // Samples of the wrong size.
  const std::string wrong = Path("x5.npy");
  WriteNpy(wrong, {8, 1, 5, 5}, samples_.data(), 8 * 25 * 4);
  r = Mpcaffe(base + "--dtype int8 --input '" + wrong + "'");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find(wrong), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("input 'data'"), std::string::npos) << r.out;
  // Truncated data.
  const std::string cut = Path("cut.npy");
  WriteNpy(cut, {8, 1, 6, 6}, samples_.data(), 100);
  r = Mpcaffe(base + "--dtype int8 --input '" + cut + "'");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("fewer than"), std::string::npos) << r.out;
  // Not a .npy file at all.
  r = Mpcaffe(base + "--dtype int8 --input '" + model_ + "'");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("magic"), std::string::npos) << r.out;
  // An Input-layer net without --input.
  r = Mpcaffe(base + "--dtype int8");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("--input"), std::string::npos) << r.out;
  // An fp32 prototxt without --dtype.
  r = Mpcaffe(base + "--input '" + npy_ + "'");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("--dtype"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(model_), std::string::npos) << r.out;
  // Missing weights.
  r = Mpcaffe("calibrate --model '" + model_ + "' --weights '" + Path("none.caffemodel") +
              "' --dtype int8 --input '" + npy_ + "' --output '" + Path("c.caffemodel") + "'");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("none.caffemodel"), std::string::npos) << r.out;
  // Usage errors: exit status 2.
  EXPECT_EQ(Mpcaffe(base + "--dtype int4 --input '" + npy_ + "'").status, 2);
  EXPECT_EQ(Mpcaffe(base + "--dtype int8 --iterations 0 --input '" + npy_ + "'").status, 2);
  EXPECT_EQ(Mpcaffe(base + "--dtype int8 --phase DEPLOY --input '" + npy_ + "'").status, 2);
  EXPECT_EQ(Mpcaffe("calibrate --model '" + model_ + "' --dtype int8").status, 2);
  EXPECT_FALSE(fs::exists(Path("c.caffemodel")));
  // convert.
  r = Mpcaffe("convert --model '" + Path("none.prototxt") + "' --dtype int8");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("none.prototxt"), std::string::npos) << r.out;
  EXPECT_EQ(Mpcaffe("convert --model '" + model_ + "' --dtype fp64").status, 2);
  EXPECT_EQ(Mpcaffe("convert --model '" + model_ + "'").status, 2);
}

TEST(NpyFile, ReadsShapeAndValues) {
  const fs::path p = fs::temp_directory_path() / ("mpcaffe-npy-" + std::to_string(getpid()) + ".npy");
  const std::vector<float> v = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -8.5f};
  WriteNpy(p, {2, 3}, v.data(), v.size() * 4);
  const tools::NpyArray a = tools::ReadNpyFloat32(p.string());
  fs::remove(p);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.values, v);
  EXPECT_THROW(tools::ReadNpyFloat32("/nonexistent/x.npy"), Error);
}

/// Everything a ProgressBar writes for 30 steps, on a terminal or to a log.
std::string BarOutput(bool terminal, double interval) {
  std::FILE* f = std::tmpfile();
  {
    tools::ProgressBar bar("work", 30, true, terminal, interval, f);
    for (int i = 0; i < 30; ++i) {
      bar.Describe("step " + std::to_string(i));
      bar.Advance();
    }
  }
  std::rewind(f);
  std::string out;
  char buf[512];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fclose(f);
  return out;
}

TEST(ProgressBar, RedrawsOnATerminalAndWritesPlainLinesToALog) {
  const std::string tty = BarOutput(true, 5.0);
  EXPECT_NE(tty.find('\r'), std::string::npos);
  // A log: no carriage returns; with a long interval only the final line.
  const std::string log = BarOutput(false, 3600.0);
  EXPECT_EQ(log.find('\r'), std::string::npos) << log;
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
  EXPECT_NE(log.find("work 100% 30/30"), std::string::npos) << log;
  // With no interval, a line per update, each ending in a newline.
  const std::string every = BarOutput(false, 0.0);
  EXPECT_EQ(every.find('\r'), std::string::npos);
  EXPECT_GE(std::count(every.begin(), every.end(), '\n'), 30) << every;
}

}  // namespace
}  // namespace mpcaffe

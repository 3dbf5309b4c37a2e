// tests/proto/model_io_test.cc — model-file I/O: every shared prototxt parses, text errors name
// file:line:column, caffemodels round-trip byte-exactly, writes are atomic, and the paper's typed
// nets keep their data types and quantizer fields.
#include "proto/model_io.h"
#include "tests/testing/paths.h"

#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <regex>
#include <string>
#include <vector>

namespace mpcaffe {
namespace {

namespace fs = std::filesystem;
using google::protobuf::util::MessageDifferencer;

fs::path SharedDir() { return mpcaffe::test_support::SharedDir(); }

fs::path ModelsDir() { return SharedDir() / "models"; }

// A fresh directory, removed with everything in it at the end of the test.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base ? base : "/tmp") + "/mpcaffe_proto_test.XXXXXX";
    std::vector<char> name(pattern.begin(), pattern.end());
    name.push_back('\0');
    if (::mkdtemp(name.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = name.data();
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  fs::path operator/(const std::string& name) const { return path_ / name; }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string FileBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteBytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

std::vector<fs::path> PrototxtsUnder(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().extension() == ".prototxt") {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

bool IsSolverFile(const fs::path& path) {
  return path.filename().string().find("solver") != std::string::npos;
}

// Message of the exception `fn` throws; fails the test when it throws nothing.
template <typename Fn>
std::string ErrorOf(Fn fn) {
  try {
    fn();
  } catch (const ModelFileError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ModelFileError";
  return "";
}

// A small trained-looking net: fp32 weights in `data`, an int8 blob in `packed_data`, observed
// quantizer ranges.
caffe::NetParameter SampleWeights() {
  caffe::NetParameter net;
  net.set_name("sample");
  net.set_data_type(caffe::CAFFE_INT8_QUANTIZED);
  caffe::LayerParameter* ip = net.add_layer();
  ip->set_name("ip1");
  ip->set_type("InnerProduct");
  ip->add_bottom("data");
  ip->add_top("ip1");
  ip->set_compute_data_type(caffe::CAFFE_INT8_QUANTIZED);
  ip->mutable_inner_product_param()->set_num_output(3);
  caffe::BlobProto* w = ip->add_blobs();
  for (int64_t d : {3, 4}) w->mutable_shape()->add_dim(d);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (int i = 0; i < 12; ++i) w->add_data(normal(rng));
  caffe::BlobProto* b = ip->add_blobs();
  b->mutable_shape()->add_dim(3);
  b->set_data_type(caffe::CAFFE_INT8_QUANTIZED);
  b->set_packed_data(std::string("\x00\x7f\xff", 3));
  caffe::QuantizerParameter* q = ip->add_blobs_quantizer();
  q->set_name("ip1_w");
  q->set_zone(0);
  q->set_observed_min(-2.25);
  q->set_observed_max(3.5);
  q->set_mode(caffe::CAFFE_QUANT_OBSERVE);
  caffe::QuantizerParameter* saved = net.add_quantizer();
  *saved = *q;
  saved->set_zone(1);
  return net;
}

TEST(ModelIo, EverySharedPrototxtParses) {
  const fs::path models = ModelsDir();
  ASSERT_TRUE(fs::is_directory(models)) << models << " missing; set MPCAFFE_SHARED_DIR";
  std::vector<fs::path> files = PrototxtsUnder(models);
  ASSERT_GE(files.size(), 30u) << "expected the BVLC and paper example models under " << models;
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.string());
    if (IsSolverFile(file)) {
      caffe::SolverParameter solver = ReadSolverText(file);
      EXPECT_TRUE(solver.has_net() || solver.has_net_param() || solver.has_train_net());
      EXPECT_FALSE(solver.has_solver_type());
    } else {
      caffe::NetParameter net = ReadNetParameterText(file);
      EXPECT_GT(net.layer_size(), 0);
      EXPECT_EQ(net.layers_size(), 0);
      EXPECT_EQ(net.input_size(), 0);
      for (const caffe::LayerParameter& layer : net.layer()) {
        EXPECT_FALSE(layer.type().empty()) << layer.name();
      }
    }
  }
}

TEST(ModelIo, AlexNetDeployHasExpectedLayers) {
  caffe::NetParameter net = ReadNetParameterText(ModelsDir() / "bvlc/bvlc_alexnet/deploy.prototxt");
  ASSERT_GT(net.layer_size(), 2);
  const caffe::LayerParameter& data = net.layer(0);
  EXPECT_EQ(data.type(), "Input");
  ASSERT_EQ(data.input_param().shape_size(), 1);
  EXPECT_EQ(data.input_param().shape(0).dim_size(), 4);
  EXPECT_EQ(data.input_param().shape(0).dim(2), 227);
  const caffe::LayerParameter& conv1 = net.layer(1);
  EXPECT_EQ(conv1.name(), "conv1");
  EXPECT_EQ(conv1.convolution_param().num_output(), 96u);
  ASSERT_EQ(conv1.convolution_param().kernel_size_size(), 1);
  EXPECT_EQ(conv1.convolution_param().kernel_size(0), 11u);
  ASSERT_EQ(conv1.param_size(), 2);
  EXPECT_EQ(conv1.param(1).lr_mult(), 2.f);
  EXPECT_EQ(conv1.param(1).decay_mult(), 0.f);
}

TEST(ModelIo, MalformedTextNamesFileLineAndColumn) {
  TempDir dir;
  const fs::path path = dir / "broken.prototxt";
  WriteBytes(path,
             "name: \"x\"\n"
             "layer {\n"
             "  name: \"a\"\n"
             "    bogus_field: 3\n"
             "}\n");
  std::string what = ErrorOf([&] { ReadNetParameterText(path); });
  // The parser points just past the offending field name.
  EXPECT_TRUE(std::regex_search(what, std::regex(path.string() + ":4:(5|16): "))) << what;
  EXPECT_NE(what.find("bogus_field"), std::string::npos) << what;

  WriteBytes(path, "layer {\n  name: \"a\"\n");  // unterminated
  what = ErrorOf([&] { ReadNetParameterText(path); });
  EXPECT_TRUE(std::regex_search(what, std::regex(path.string() + ":[23]:[0-9]+: "))) << what;

  WriteBytes(path, "layer { convolution_param { kernel_size: -3 } }\n");
  what = ErrorOf([&] { ReadNetParameterText(path); });
  EXPECT_NE(what.find(path.string() + ":1:"), std::string::npos) << what;
}

TEST(ModelIo, MissingFileNamesPath) {
  TempDir dir;
  const fs::path path = dir / "nope.prototxt";
  std::string what = ErrorOf([&] { ReadNetParameterText(path); });
  EXPECT_NE(what.find(path.string()), std::string::npos) << what;
  EXPECT_NE(what.find("No such file"), std::string::npos) << what;
  what = ErrorOf([&] { ReadNetParameterBinary(dir / "nope.caffemodel"); });
  EXPECT_NE(what.find("nope.caffemodel"), std::string::npos) << what;
  what = ErrorOf([&] { ReadNetParameterText(dir.path()); });
  EXPECT_NE(what.find("directory"), std::string::npos) << what;
}

TEST(ModelIo, CaffemodelRoundTripIsByteIdentical) {
  TempDir dir;
  const caffe::NetParameter original = SampleWeights();
  const fs::path first = dir / "a.caffemodel", second = dir / "b.caffemodel";
  WriteProtoToBinaryFile(original, first);
  caffe::NetParameter loaded = ReadNetParameterBinary(first);
  EXPECT_TRUE(MessageDifferencer::Equals(original, loaded));
  WriteProtoToBinaryFile(loaded, second);
  const std::string bytes = FileBytes(first);
  EXPECT_FALSE(bytes.empty());
  EXPECT_EQ(bytes, FileBytes(second));
  // The int8 values survive as raw bytes, the fp32 ones as BVLC floats.
  EXPECT_EQ(loaded.layer(0).blobs(1).packed_data(), std::string("\x00\x7f\xff", 3));
  EXPECT_EQ(loaded.layer(0).blobs(0).data(5), original.layer(0).blobs(0).data(5));
  EXPECT_EQ(loaded.quantizer(0).observed_min(), -2.25);
}

TEST(ModelIo, LargeCaffemodelBeyondOldDefaultLimit) {
  // 72 MiB of floats: above protobuf's historical 64 MiB default total-bytes limit.
  TempDir dir;
  caffe::NetParameter net;
  caffe::BlobProto* blob = net.add_layer()->add_blobs();
  const int count = 18 * 1024 * 1024;
  blob->mutable_data()->Resize(count, 0.f);
  for (int i = 0; i < count; i += 4099) blob->set_data(i, static_cast<float>(i));
  const fs::path path = dir / "large.caffemodel";
  WriteProtoToBinaryFile(net, path);
  EXPECT_GT(fs::file_size(path), 72u * 1024 * 1024);
  caffe::NetParameter loaded = ReadNetParameterBinary(path);
  ASSERT_EQ(loaded.layer(0).blobs(0).data_size(), count);
  EXPECT_EQ(loaded.layer(0).blobs(0).data(4099 * 1000), 4099.f * 1000);
}

TEST(ModelIo, MalformedBinaryNamesFile) {
  TempDir dir;
  const fs::path path = dir / "bad.caffemodel";
  WriteProtoToBinaryFile(SampleWeights(), path);
  std::string bytes = FileBytes(path);
  WriteBytes(path, bytes.substr(0, bytes.size() / 2));  // truncated
  std::string what = ErrorOf([&] { ReadNetParameterBinary(path); });
  EXPECT_NE(what.find(path.string()), std::string::npos) << what;
  EXPECT_NE(what.find("caffe.NetParameter"), std::string::npos) << what;

  WriteBytes(path, "name: \"this is a prototxt\"\nlayer { }\n");  // text where binary is expected
  what = ErrorOf([&] { ReadNetParameterBinary(path); });
  EXPECT_NE(what.find(path.string()), std::string::npos) << what;

  WriteBytes(path, "");
  what = ErrorOf([&] { ReadNetParameterBinary(path); });
  EXPECT_NE(what.find("empty"), std::string::npos) << what;
}

// Only the target file may be in `dir`.
void ExpectOnlyFile(const fs::path& dir, const std::string& name) {
  int entries = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    ++entries;
    EXPECT_EQ(entry.path().filename(), name);
  }
  EXPECT_EQ(entries, 1);
}

TEST(ModelIo, FailedWriteLeavesPreviousFileAndNoTemporaries) {
  TempDir dir;
  const fs::path path = dir / "model.caffemodel";
  WriteProtoToBinaryFile(SampleWeights(), path);
  const std::string before = FileBytes(path);

  // A write that fails half-way (the file-size limit stops it at 4 KiB) leaves the old file.
  caffe::NetParameter big;
  big.add_layer()->add_blobs()->mutable_data()->Resize(100000, 1.f);
  struct rlimit saved;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string what = ErrorOf([&] { WriteProtoToBinaryFile(big, path); });
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(what.find(path.string()), std::string::npos) << what;
  EXPECT_NE(what.find("write"), std::string::npos) << what;
  EXPECT_EQ(FileBytes(path), before);
  ExpectOnlyFile(dir.path(), "model.caffemodel");

  // ClipParameter has required fields: a net missing them is refused before anything is written.
  caffe::NetParameter invalid;
  invalid.add_layer()->mutable_clip_param()->set_min(0.f);
  what = ErrorOf([&] { WriteProtoToBinaryFile(invalid, path); });
  EXPECT_NE(what.find(path.string()), std::string::npos) << what;
  EXPECT_NE(what.find("clip_param.max"), std::string::npos) << what;
  EXPECT_EQ(FileBytes(path), before);
  ExpectOnlyFile(dir.path(), "model.caffemodel");

  // Writing into a directory that does not exist names the target.
  what = ErrorOf([&] { WriteProtoToBinaryFile(SampleWeights(), dir / "no/such/dir.caffemodel"); });
  EXPECT_NE(what.find("no/such/dir.caffemodel"), std::string::npos) << what;
}

TEST(ModelIo, TextWriteReadRoundTrip) {
  TempDir dir;
  const fs::path path = dir / "net.prototxt";
  const caffe::NetParameter original = SampleWeights();
  WriteProtoToTextFile(original, path);
  caffe::NetParameter loaded = ReadNetParameterText(path);
  EXPECT_TRUE(MessageDifferencer::Equals(original, loaded));
  EXPECT_NE(FileBytes(path).find("data_type: CAFFE_INT8_QUANTIZED"), std::string::npos);
}

TEST(ModelIo, BinaryprotoMeanFile) {
  TempDir dir;
  caffe::BlobProto mean;
  mean.set_num(1);
  mean.set_channels(3);
  mean.set_height(2);
  mean.set_width(2);
  for (int i = 0; i < 12; ++i) mean.add_data(100.f + i);
  const fs::path path = dir / "mean.binaryproto";
  WriteProtoToBinaryFile(mean, path);
  caffe::BlobProto loaded = ReadBlobProtoBinary(path);
  EXPECT_EQ(loaded.channels(), 3);
  ASSERT_EQ(loaded.data_size(), 12);
  EXPECT_EQ(loaded.data(11), 111.f);
}

// The paper's typed prototxts keep data types, quantizer fields and MOE sub-nets through a text
// and a binary round trip.
TEST(ModelIo, PaperTypedPrototxtsKeepTypesThroughRoundTrips) {
  TempDir dir;
  const std::vector<fs::path> files = PrototxtsUnder(ModelsDir() / "paper_examples");
  ASSERT_FALSE(files.empty());
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.string());
    const caffe::NetParameter net = ReadNetParameterText(file);
    WriteProtoToTextFile(net, dir / "t.prototxt");
    EXPECT_TRUE(MessageDifferencer::Equals(net, ReadNetParameterText(dir / "t.prototxt")));
    WriteProtoToBinaryFile(net, dir / "b.caffemodel");
    EXPECT_TRUE(MessageDifferencer::Equals(net, ReadNetParameterBinary(dir / "b.caffemodel")));
  }

  const caffe::NetParameter celsius =
      ReadNetParameterText(ModelsDir() / "paper_examples/celsius_farenheit/net_int8.prototxt");
  WriteProtoToBinaryFile(celsius, dir / "c.caffemodel");
  const caffe::NetParameter back = ReadNetParameterBinary(dir / "c.caffemodel");
  const caffe::LayerParameter* neuron = nullptr;
  const caffe::LayerParameter* output = nullptr;
  for (const caffe::LayerParameter& layer : back.layer()) {
    if (layer.name() == "neuron") neuron = &layer;
    if (layer.name() == "output") output = &layer;
  }
  ASSERT_NE(neuron, nullptr);
  ASSERT_NE(output, nullptr);
  EXPECT_EQ(neuron->bottom_data_type(), caffe::CAFFE_INT8_QUANTIZED);
  EXPECT_EQ(neuron->compute_data_type(), caffe::CAFFE_INT8_QUANTIZED);
  EXPECT_EQ(neuron->top_data_type(), caffe::CAFFE_INT8_QUANTIZED);
  EXPECT_EQ(output->type(), "Quantizer");
  EXPECT_EQ(output->top_data_type(), caffe::CAFFE_FLOAT);
  EXPECT_TRUE(output->has_top_data_type());

  const caffe::NetParameter moe = ReadNetParameterText(
      ModelsDir() / "paper_examples/imagenet_caffenet_moe/net_int16_1.prototxt");
  EXPECT_TRUE(moe.reduced_memory_inference());
  int moe_layers = 0;
  for (const caffe::LayerParameter& layer : moe.layer()) {
    if (!layer.has_moe_param()) continue;
    ++moe_layers;
    EXPECT_GT(layer.moe_param().gating_net().layer_size(), 0);
    EXPECT_GT(layer.moe_param().expert_net_size(), 1);
    EXPECT_GT(layer.moe_param().select_experts(), 0);
  }
  EXPECT_GE(moe_layers, 1);
}

// Quantizer parameters written in text keep every field, including observed ranges.
TEST(ModelIo, QuantizerFieldsRoundTrip) {
  caffe::NetParameter net;
  ParseProtoFromText(
      "name: \"q\"\n"
      "state { phase: TEST quantizer_mode: CAFFE_QUANT_OBSERVE }\n"
      "autotune: CAFFE_AUTOTUNE_FUNCTION\n"
      "quantizer { name: \"conv1_top\" zone: 2 input_data_type: CAFFE_FLOAT\n"
      "  output_data_type: CAFFE_INT16_QUANTIZED observed_max: 6.5 observed_min: -0.125\n"
      "  max_in: 6.5 min_in: -0.125 max_out: 1 min_out: -1 mode: CAFFE_QUANT_PSEUDO\n"
      "  device: 0 pseudo_target_type: CAFFE_INT16_QUANTIZED pseudo_reset_observed: true }\n"
      "layer { name: \"conv1\" type: \"Convolution\" device: 1 autotune: "
      "CAFFE_AUTOTUNE_FUNCTION_PARAMETER\n"
      "  bottom_shared_index: 0 top_shared_index: 1\n"
      "  top_quantizer { name: \"conv1_top\" mode: CAFFE_QUANT_OBSERVE }\n"
      "  net_quantizer { name: \"net\" }\n"
      "  noise_param { mu: 0.5 sigma: 2 }\n"
      "  convolution_param { engine: LIBDNN } }\n"
      "layer { name: \"pool\" type: \"Pooling\" pooling_param { engine: LIBDNN } }\n",
      "<inline>", &net);
  TempDir dir;
  WriteProtoToBinaryFile(net, dir / "q.caffemodel");
  caffe::NetParameter back = ReadNetParameterBinary(dir / "q.caffemodel");
  EXPECT_TRUE(MessageDifferencer::Equals(net, back));
  const caffe::QuantizerParameter& q = back.quantizer(0);
  EXPECT_EQ(q.output_data_type(), caffe::CAFFE_INT16_QUANTIZED);
  EXPECT_EQ(q.observed_min(), -0.125);
  EXPECT_EQ(q.mode(), caffe::CAFFE_QUANT_PSEUDO);
  EXPECT_EQ(q.device(), 0);
  EXPECT_TRUE(q.pseudo_reset_observed());
  EXPECT_EQ(back.state().quantizer_mode(), caffe::CAFFE_QUANT_OBSERVE);
  EXPECT_EQ(back.layer(0).convolution_param().engine(), caffe::ConvolutionParameter::LIBDNN);
  EXPECT_EQ(back.layer(1).pooling_param().engine(), caffe::PoolingParameter::LIBDNN);
  EXPECT_EQ(back.layer(0).noise_param().sigma(), 2.f);
  EXPECT_EQ(back.layer(1).device(), -1);  // default
}

}  // namespace
}  // namespace mpcaffe

// tests/proto/caffe_proto_test.cc — caffe.proto keeps BVLC's and the paper's field names and
// numbers, and a caffemodel written here is readable by Python protobuf with our caffe.proto.
#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "proto/caffe.pb.h"
#include "proto/model_io.h"
#include "tests/testing/paths.h"

namespace mpcaffe {
namespace {

namespace fs = std::filesystem;
namespace pb = google::protobuf;

const pb::FieldDescriptor* Field(const std::string& message, const std::string& field) {
  const pb::Descriptor* d = pb::DescriptorPool::generated_pool()->FindMessageTypeByName(message);
  if (d == nullptr) return nullptr;
  return d->FindFieldByName(field);
}

struct FieldSpec {
  const char* message;
  const char* field;
  int number;
};

// The extension fields of ../shared/PROTO_COMPAT.md: the paper's typed prototxts depend on them.
const FieldSpec kExtensionFields[] = {
    {"caffe.QuantizerParameter", "name", 1},
    {"caffe.QuantizerParameter", "zone", 2},
    {"caffe.QuantizerParameter", "input_data_type", 3},
    {"caffe.QuantizerParameter", "output_data_type", 4},
    {"caffe.QuantizerParameter", "observed_max", 5},
    {"caffe.QuantizerParameter", "observed_min", 6},
    {"caffe.QuantizerParameter", "max_in", 7},
    {"caffe.QuantizerParameter", "min_in", 8},
    {"caffe.QuantizerParameter", "max_out", 9},
    {"caffe.QuantizerParameter", "min_out", 10},
    {"caffe.QuantizerParameter", "mode", 11},
    {"caffe.QuantizerParameter", "device", 12},
    {"caffe.QuantizerParameter", "pseudo_target_type", 13},
    {"caffe.QuantizerParameter", "pseudo_reset_observed", 14},
    {"caffe.LayerParameter", "bottom_data_type", 12},
    {"caffe.LayerParameter", "compute_data_type", 13},
    {"caffe.LayerParameter", "top_data_type", 14},
    {"caffe.LayerParameter", "bottom_quantizer", 16},
    {"caffe.LayerParameter", "top_quantizer", 17},
    {"caffe.LayerParameter", "net_quantizer", 18},
    {"caffe.LayerParameter", "blobs_quantizer", 19},
    {"caffe.LayerParameter", "autotune", 20},
    {"caffe.LayerParameter", "device", 95},
    {"caffe.LayerParameter", "bottom_shared_index", 96},
    {"caffe.LayerParameter", "top_shared_index", 97},
    {"caffe.LayerParameter", "moe_param", 150},
    {"caffe.LayerParameter", "noise_param", 151},
    {"caffe.NetParameter", "data_type", 42},
    {"caffe.NetParameter", "quantizer", 80},
    {"caffe.NetParameter", "reduced_memory_inference", 81},
    {"caffe.NetParameter", "autotune", 82},
    {"caffe.NetState", "quantizer_mode", 4},
    {"caffe.SolverParameter", "data_type", 43},
    {"caffe.BlobProto", "packed_data", 11},
    {"caffe.BlobProto", "packed_diff", 12},
    {"caffe.BlobProto", "data_type", 13},
    {"caffe.MOEParameter", "gating_net", 1},
    {"caffe.MOEParameter", "expert_net", 2},
    {"caffe.MOEParameter", "expert_instances", 3},
    {"caffe.MOEParameter", "select_experts", 4},
    {"caffe.MOEParameter", "map_bottom", 5},
    {"caffe.MOEParameter", "full_forward", 6},
    {"caffe.NoiseParameter", "mu", 1},
    {"caffe.NoiseParameter", "sigma", 2},
};

TEST(CaffeProto, ExtensionFieldNumbers) {
  for (const FieldSpec& spec : kExtensionFields) {
    const pb::FieldDescriptor* field = Field(spec.message, spec.field);
    ASSERT_NE(field, nullptr) << spec.message << "." << spec.field;
    EXPECT_EQ(field->number(), spec.number) << spec.message << "." << spec.field;
  }
  EXPECT_EQ(Field("caffe.QuantizerParameter", "device")->default_value_int64(), -1);
  EXPECT_EQ(Field("caffe.LayerParameter", "device")->default_value_int64(), -1);
  EXPECT_EQ(Field("caffe.QuantizerParameter", "pseudo_target_type")->default_value_enum()->name(),
            "CAFFE_INT8_QUANTIZED");
  EXPECT_EQ(Field("caffe.NoiseParameter", "sigma")->default_value_float(), 1.f);
  EXPECT_FALSE(Field("caffe.MOEParameter", "full_forward")->default_value_bool());
}

TEST(CaffeProto, ExtensionEnums) {
  EXPECT_EQ(caffe::CAFFE_FLOAT, 0);
  EXPECT_EQ(caffe::CAFFE_HALF, 1);
  EXPECT_EQ(caffe::CAFFE_DOUBLE, 2);
  EXPECT_EQ(caffe::CAFFE_INT8_QUANTIZED, 3);
  EXPECT_EQ(caffe::CAFFE_INT16_QUANTIZED, 4);
  EXPECT_EQ(caffe::CAFFE_INT32_QUANTIZED, 5);
  EXPECT_EQ(caffe::CAFFE_INT64_QUANTIZED, 6);
  EXPECT_EQ(caffe::CAFFE_PACKED_BINARY, 7);
  EXPECT_EQ(caffe::CAFFE_QUANT_PASSIVE, 0);
  EXPECT_EQ(caffe::CAFFE_QUANT_OBSERVE, 1);
  EXPECT_EQ(caffe::CAFFE_QUANT_PSEUDO, 2);
  EXPECT_EQ(caffe::CAFFE_AUTOTUNE_DISABLED, 0);
  EXPECT_EQ(caffe::CAFFE_AUTOTUNE_FUNCTION, 1);
  EXPECT_EQ(caffe::CAFFE_AUTOTUNE_FUNCTION_PARAMETER, 2);
  EXPECT_EQ(caffe::MOEParameter::GATING, 1);
  EXPECT_EQ(caffe::MOEParameter::EXPERT, 2);
  EXPECT_EQ(caffe::MOEParameter::GATING_AND_EXPERT, 3);
  EXPECT_EQ(caffe::ConvolutionParameter::LIBDNN, 3);
  EXPECT_EQ(caffe::PoolingParameter::LIBDNN, 3);
}

// A sample of BVLC's numbers across the file (those most files on disk use).
const FieldSpec kBvlcFields[] = {
    {"caffe.BlobProto", "shape", 7},
    {"caffe.BlobProto", "data", 5},
    {"caffe.BlobProto", "num", 1},
    {"caffe.BlobProto", "double_data", 8},
    {"caffe.NetParameter", "input_dim", 4},
    {"caffe.NetParameter", "input_shape", 8},
    {"caffe.NetParameter", "layer", 100},
    {"caffe.NetParameter", "layers", 2},
    {"caffe.LayerParameter", "blobs", 7},
    {"caffe.LayerParameter", "include", 8},
    {"caffe.LayerParameter", "transform_param", 100},
    {"caffe.LayerParameter", "convolution_param", 106},
    {"caffe.LayerParameter", "inner_product_param", 117},
    {"caffe.LayerParameter", "input_param", 143},
    {"caffe.LayerParameter", "batch_norm_param", 139},
    {"caffe.LayerParameter", "recurrent_param", 146},
    {"caffe.LayerParameter", "clip_param", 148},
    {"caffe.ConvolutionParameter", "dilation", 18},
    {"caffe.PoolingParameter", "global_pooling", 12},
    {"caffe.SolverParameter", "type", 40},
    {"caffe.SolverParameter", "weights", 42},
    {"caffe.SolverParameter", "device_id", 18},
    {"caffe.V1LayerParameter", "layer", 1},
    {"caffe.V1LayerParameter", "blobs_lr", 7},
    {"caffe.V1LayerParameter", "param", 1001},
    {"caffe.V1LayerParameter", "loss_param", 42},
    {"caffe.V0LayerParameter", "hdf5_output_param", 1001},
    {"caffe.V0LayerParameter", "concat_dim", 65},
};

TEST(CaffeProto, BvlcFieldNumbers) {
  for (const FieldSpec& spec : kBvlcFields) {
    const pb::FieldDescriptor* field = Field(spec.message, spec.field);
    ASSERT_NE(field, nullptr) << spec.message << "." << spec.field;
    EXPECT_EQ(field->number(), spec.number) << spec.message << "." << spec.field;
  }
  EXPECT_TRUE(Field("caffe.BlobProto", "data")->is_packed());
  EXPECT_EQ(caffe::V1LayerParameter::SOFTMAX_LOSS, 21);
  EXPECT_EQ(caffe::V1LayerParameter::DECONVOLUTION, 39);
}

TEST(CaffeProto, EveryLayerParameterHasItsParamMessage) {
  const char* params[] = {"accuracy",      "argmax",      "batch_norm",
                          "bias",          "concat",      "contrastive_loss",
                          "convolution",   "crop",        "data",
                          "dropout",       "dummy_data",  "eltwise",
                          "elu",           "embed",       "exp",
                          "flatten",       "hdf5_data",   "hdf5_output",
                          "hinge_loss",    "image_data",  "infogain_loss",
                          "inner_product", "input",       "log",
                          "lrn",           "memory_data", "mvn",
                          "parameter",     "pooling",     "power",
                          "prelu",         "python",      "recurrent",
                          "reduction",     "relu",        "reshape",
                          "scale",         "sigmoid",     "softmax",
                          "spp",           "slice",       "tanh",
                          "threshold",     "tile",        "window_data",
                          "loss",          "transform"};
  for (const char* param : params) {
    const pb::FieldDescriptor* field = Field("caffe.LayerParameter", std::string(param) + "_param");
    ASSERT_NE(field, nullptr) << param;
    EXPECT_EQ(field->type(), pb::FieldDescriptor::TYPE_MESSAGE) << param;
  }
  // No two LayerParameter fields share a number (the extensions fit between BVLC's).
  const pb::Descriptor* layer = caffe::LayerParameter::descriptor();
  for (int i = 0; i < layer->field_count(); ++i) {
    EXPECT_EQ(layer->FindFieldByNumber(layer->field(i)->number()), layer->field(i));
  }
}

// ---- Python protobuf reads our caffemodels ---------------------------------------------------

fs::path SourceDir() { return mpcaffe::test_support::SourceDir(); }

// Runs a shell command with output captured into `output`; returns its exit status.
int RunShell(const std::string& command, const fs::path& log, std::string* output) {
  int status = std::system((command + " > '" + log.string() + "' 2>&1").c_str());
  std::ifstream in(log);
  output->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return status;
}

TEST(CaffeProto, PythonProtobufReadsOurCaffemodel) {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base ? base : "/tmp") + "/mpcaffe_pb2_test.XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  ASSERT_NE(::mkdtemp(name.data()), nullptr);
  const fs::path dir = name.data();
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ignored;
      fs::remove_all(dir, ignored);
    }
  } cleanup{dir};

  std::string output;
  if (RunShell("python3 -c 'import google.protobuf'", dir / "log", &output) != 0) {
    GTEST_SKIP() << "python3 with the protobuf package is not available (pip install protobuf): "
                 << output;
  }
  const fs::path proto_dir = SourceDir() / "proto";
  ASSERT_EQ(RunShell("protoc --python_out='" + dir.string() + "' -I '" + proto_dir.string() +
                         "' '" + (proto_dir / "caffe.proto").string() + "'",
                     dir / "log", &output),
            0)
      << "protoc --python_out failed: " << output;

  caffe::NetParameter net;
  net.set_name("python_check");
  caffe::LayerParameter* input = net.add_layer();
  input->set_name("data");
  input->set_type("Input");
  caffe::BlobShape* shape = input->mutable_input_param()->add_shape();
  for (int64_t d : {1, 3}) shape->add_dim(d);
  caffe::LayerParameter* ip = net.add_layer();
  ip->set_name("ip1");
  ip->set_type("InnerProduct");
  ip->set_compute_data_type(caffe::CAFFE_INT8_QUANTIZED);
  caffe::BlobProto* weights = ip->add_blobs();
  weights->mutable_shape()->add_dim(2);
  weights->mutable_shape()->add_dim(3);
  for (int i = 0; i < 6; ++i) weights->add_data(0.5f * i - 1.25f);
  caffe::BlobProto* packed = ip->add_blobs();
  packed->set_data_type(caffe::CAFFE_INT8_QUANTIZED);
  packed->set_packed_data(std::string("\x00\x01\x7f\x80\xff", 5));
  caffe::QuantizerParameter* q = net.add_quantizer();
  q->set_name("ip1_top");
  q->set_observed_min(-1.5);
  q->set_observed_max(2.75);
  q->set_mode(caffe::CAFFE_QUANT_OBSERVE);
  WriteProtoToBinaryFile(net, dir / "in.caffemodel");

  const fs::path script = SourceDir() / "tests/proto/caffemodel_pb2_check.py";
  ASSERT_EQ(RunShell("python3 '" + script.string() + "' '" + dir.string() + "' '" +
                         (dir / "in.caffemodel").string() + "' '" +
                         (dir / "out.caffemodel").string() + "'",
                     dir / "log", &output),
            0)
      << output;
  std::cout << "  " << output;
  // Python re-serializes the same bytes, and C++ reads them back.
  auto bytes = [](const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  EXPECT_EQ(bytes(dir / "in.caffemodel"), bytes(dir / "out.caffemodel"));
  caffe::NetParameter back = ReadNetParameterBinary(dir / "out.caffemodel");
  EXPECT_EQ(back.layer(1).blobs(1).packed_data(), packed->packed_data());
}

}  // namespace
}  // namespace mpcaffe

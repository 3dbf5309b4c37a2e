// tests/net/net_test.cc — Net construction (rules, in-place, automatic splits and conversions),
// every shared model building, fp32/int8 forward of the paper's nets, caffemodel round trips,
// weight-shape errors and reduced-memory inference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "device/settings.h"
#include "layers/layer_registry.h"
#include "net/memory_planner.h"
#include "net/net.h"
#include "proto/model_io.h"
#include "tests/testing/logit_agreement.h"
#include "tests/testing/net_support.h"
#include "tests/testing/paths.h"

namespace mpcaffe {
namespace {

namespace fs = std::filesystem;

Device& Dev() { return DefaultDevice(); }

std::string SharedDir() { return mpcaffe::test_support::SharedDir().string(); }
std::string Paper(const std::string& rel) { return SharedDir() + "/models/paper_examples/" + rel; }

using test_support::NetText;

std::string ReadBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

fs::path TempDir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("mpcaffe_net_test_" + name + "_" + std::to_string(getpid()));
  fs::create_directories(d);
  return d;
}

// ---- Construction rules -------------------------------------------------------------------------

const char* kRulesNet = R"(
name: "rules"
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 } } }
layer { name: "train_only" type: "ReLU" bottom: "x" top: "t" include { phase: TRAIN } }
layer { name: "test_only" type: "ReLU" bottom: "x" top: "t" include { phase: TEST } }
layer { name: "level2" type: "Sigmoid" bottom: "x" top: "l" include { min_level: 2 } }
layer { name: "staged" type: "TanH" bottom: "x" top: "s" include { stage: "deploy" } }
layer { name: "not_staged" type: "TanH" bottom: "x" top: "ns" exclude { stage: "deploy" } }
)";

TEST(Net, PhaseLevelStageRules) {
  Net test(NetText(kRulesNet), Dev());
  EXPECT_NO_THROW(test.layer_index("test_only"));
  EXPECT_THROW(test.layer_index("train_only"), NetError);
  EXPECT_THROW(test.layer_index("level2"), NetError);
  EXPECT_THROW(test.layer_index("staged"), NetError);
  EXPECT_NO_THROW(test.layer_index("not_staged"));
  NetOptions o;
  o.phase = caffe::TRAIN;
  o.level = 3;
  o.stages = {"deploy"};
  Net train(NetText(kRulesNet), Dev(), o);
  EXPECT_NO_THROW(train.layer_index("train_only"));
  EXPECT_NO_THROW(train.layer_index("level2"));
  EXPECT_NO_THROW(train.layer_index("staged"));
  EXPECT_THROW(train.layer_index("not_staged"), NetError);
}

const char* kSplitNet = R"(
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 1 dim: 4 } } }
layer { name: "r" type: "ReLU" bottom: "x" top: "x" }
layer { name: "a" type: "Sigmoid" bottom: "x" top: "a" }
layer { name: "b" type: "TanH" bottom: "x" top: "b" }
layer { name: "sum" type: "Eltwise" bottom: "a" bottom: "b" top: "y" }
)";

TEST(Net, InPlaceLayersAndAutomaticSplits) {
  NetOptions unoptimized;  // the inference optimizer leaves float splits out (below)
  unoptimized.optimize = 0;
  Net net(NetText(kSplitNet), Dev(), unoptimized);
  // A split after the in-place ReLU feeds a and b one copy each.
  const int split = net.layer_index("x_r_0_split");
  EXPECT_TRUE(net.inserted(split));
  EXPECT_EQ(net.layers()[split]->type(), std::string("Split"));
  EXPECT_EQ(net.bottom_vecs()[net.layer_index("a")][0]->name(), "x_r_0_split_0");
  EXPECT_EQ(net.bottom_vecs()[net.layer_index("b")][0]->name(), "x_r_0_split_1");
  EXPECT_EQ(net.top_vecs()[net.layer_index("r")][0], net.bottom_vecs()[net.layer_index("r")][0]);
  net.blob("x").FromFloat({-1, 0.5f, 2, -3});
  net.Forward();
  const auto y = net.blob("y").ToFloat();
  const float x[] = {0, 0.5f, 2, 0};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], 1 / (1 + std::exp(-x[i])) + std::tanh(x[i]), 1e-5);
  EXPECT_EQ(net.output_blobs().size(), 1u);
  EXPECT_EQ(net.output_blobs()[0]->name(), "y");
}

// At inference the optimizer's level 2 inserts no float Split: both consumers read x itself, with
// the same result; a consumer writing x in place keeps the split (it would change the other's
// input). Level 1, the default, keeps BVLC's split layers (pycaffe shows them).
TEST(Net, OptimizerLeavesFloatSplitsOut) {
  NetOptions level2;
  level2.optimize = 2;
  Net net(NetText(kSplitNet), Dev(), level2);
  EXPECT_TRUE(net.optimized());
  EXPECT_FALSE(net.has_layer("x_r_0_split"));
  EXPECT_EQ(net.bottom_vecs()[net.layer_index("a")][0]->name(), "x");
  EXPECT_EQ(net.bottom_vecs()[net.layer_index("b")][0]->name(), "x");
  net.blob("x").FromFloat({-1, 0.5f, 2, -3});
  net.Forward();
  const auto y = net.blob("y").ToFloat();
  const float x[] = {0, 0.5f, 2, 0};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], 1 / (1 + std::exp(-x[i])) + std::tanh(x[i]), 1e-5);

  Net in_place(NetText(R"(
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 1 dim: 4 } } }
layer { name: "a" type: "Sigmoid" bottom: "x" top: "a" }
layer { name: "b" type: "TanH" bottom: "x" top: "x" }
)"), Dev(), level2);
  EXPECT_TRUE(in_place.has_layer("x_in_0_split"));
  EXPECT_TRUE(Net(NetText(kSplitNet), Dev()).has_layer("x_r_0_split"));
  in_place.blob("x").FromFloat({-1, 0.5f, 2, -3});
  in_place.Forward();
  const auto a = in_place.blob("a").ToFloat();
  const float v[] = {-1, 0.5f, 2, -3};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(a[i], 1 / (1 + std::exp(-v[i])), 1e-6);
}

// A blob whose last writer is an in-place layer is an output when nothing reads it afterwards
// (and the reduced-memory planner keeps it readable); one read after an in-place layer is not.
TEST(Net, OutputBlobsIncludeBlobsLastWrittenInPlace) {
  const char* text = R"(
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 8 } } }
layer { name: "fc" type: "InnerProduct" bottom: "x" top: "y"
        inner_product_param { num_output: 8 weight_filler { type: "gaussian" std: 1 } } }
layer { name: "relu" type: "ReLU" bottom: "y" top: "y" }
layer { name: "fc2" type: "InnerProduct" bottom: "x" top: "z"
        inner_product_param { num_output: 8 weight_filler { type: "gaussian" std: 1 } } }
layer { name: "tanh" type: "TanH" bottom: "z" top: "z" }
layer { name: "sig" type: "Sigmoid" bottom: "z" top: "s" }
layer { name: "fc3" type: "InnerProduct" bottom: "s" top: "t"
        inner_product_param { num_output: 8 weight_filler { type: "gaussian" std: 1 } } }
)";
  std::vector<float> y_plain;
  for (int reduced : {0, 1}) {
    NetOptions o;
    o.reduced_memory = reduced;
    Net net(NetText(text), Dev(), o);
    std::vector<std::string> outputs;
    for (Blob* b : net.output_blobs()) outputs.push_back(b->name());
    EXPECT_EQ(outputs, (std::vector<std::string>{"y", "t"})) << "reduced " << reduced;
    std::vector<float> x(16);
    for (int i = 0; i < 16; ++i) x[i] = std::sin(1.0f + i);
    net.blob("x").FromFloat(x);
    net.Forward();
    const std::vector<float> y = net.blob("y").ToFloat();
    if (!reduced) {
      y_plain = y;
      continue;
    }
    // z, s and t must not have reused y's memory.
    EXPECT_EQ(y, y_plain);
  }
}

TEST(Net, UnknownBottomAndDuplicateTopAreErrors) {
  try {
    Net net(NetText(R"(layer { name: "r" type: "ReLU" bottom: "nothing" top: "y" })"), Dev());
    FAIL();
  } catch (const NetError& e) {
    EXPECT_NE(std::string(e.what()).find("'nothing'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Net(NetText(R"(
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 1 } } }
layer { name: "in2" type: "Input" top: "x" input_param { shape { dim: 1 } } })"), Dev()), NetError);
}

// ---- Every shared model ---------------------------------------------------------------------

TEST(Net, EverySharedModelBuilds) {
  int built = 0;
  for (const auto& entry : fs::recursive_directory_iterator(SharedDir() + "/models")) {
    const std::string path = entry.path().string();
    if (entry.path().extension() != ".prototxt" || path.find("solver") != std::string::npos) continue;
    const caffe::NetParameter p = ReadNetParameterText(path);
    for (caffe::Phase phase : {caffe::TRAIN, caffe::TEST}) {
      NetOptions o;
      o.phase = phase;
      o.synthetic_data = true;
      try {
        Net net(p, Dev(), o);
        EXPECT_GT(net.layers().size(), 0u) << path;
        ++built;
      } catch (const std::exception& e) {
        ADD_FAILURE() << path << " (" << (phase == caffe::TRAIN ? "TRAIN" : "TEST") << "): " << e.what();
      }
    }
  }
  EXPECT_GE(built, 2 * 20);
}

TEST(Net, MissingDataSourceNamesLayerAndPath) {
  const caffe::NetParameter p = ReadNetParameterText(Paper("imagenet_caffenet/net_float_1.prototxt"));
  try {
    Net net(p, Dev());
    FAIL();
  } catch (const LayerError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'data'"), std::string::npos) << m;
    EXPECT_NE(m.find("ilsvrc12_val_lmdb"), std::string::npos) << m;
    EXPECT_NE(m.find("--synthetic"), std::string::npos) << m;
  }
}

// ---- Conversions and forward of the paper's nets --------------------------------------------

TEST(Net, CelsiusInt8InsertsTheConversionAndMatchesFloat) {
  const auto fp = ReadNetParameterText(Paper("celsius_farenheit/net_float.prototxt"));
  const auto q8 = ReadNetParameterText(Paper("celsius_farenheit/net_int8.prototxt"));
  // The "trained" neuron: F = 1.8·C + 32.
  caffe::NetParameter weights;
  auto* l = weights.add_layer();
  l->set_name("neuron");
  auto* w = l->add_blobs();
  w->mutable_shape()->add_dim(1), w->mutable_shape()->add_dim(1), w->add_data(1.8f);
  auto* b = l->add_blobs();
  b->mutable_shape()->add_dim(1), b->add_data(32.0f);

  Net f(fp, Dev());
  f.CopyTrainedLayersFrom(weights);
  f.SetQuantMode(quant::QuantizerMode::kObserve);
  for (float c : {-100.0f, 0.0f, 37.0f, 250.0f}) {
    f.blob("celsius").FromFloat({c});
    f.Forward();
    EXPECT_NEAR(f.blob("output").ToFloat()[0], 1.8f * c + 32, 1e-3);
  }
  caffe::NetParameter calibrated;
  f.ToProto(&calibrated);

  Net n8(q8, Dev());
  // Input (fp32) → neuron (int8): a Quantizer layer was inserted in front of the neuron.
  const int conv = n8.layer_index("neuron_celsius_to_int8q");
  EXPECT_TRUE(n8.inserted(conv));
  EXPECT_EQ(n8.layers()[conv]->type(), std::string("Quantizer"));
  EXPECT_EQ(n8.blob("neuron").type(), DataType::kInt8Q);
  EXPECT_EQ(n8.blob("output").type(), DataType::kFloat32);
  EXPECT_FALSE(n8.QuantizersWithoutRange().empty());
  n8.CopyTrainedLayersFrom(calibrated);
  EXPECT_TRUE(n8.QuantizersWithoutRange().empty());
  for (float c : {-100.0f, 0.0f, 37.0f, 250.0f}) {
    n8.blob("celsius").FromFloat({c});
    n8.Forward();
    // int8 over [-148, 482] °F: a step is about 2.5 °F; input, weight and output rounding.
    EXPECT_NEAR(n8.blob("output").ToFloat()[0], 1.8f * c + 32, 8.0f) << c;
  }
}

/// Forward of a paper net in fp32 and int8 at batch 1: the int8 net calibrated from the fp32
/// net on the same input; the logits compared (LogitsAgree): within `fraction` of the fp32
/// logits' spread, with the same top class. `logits`: the fp32 net's blob; `int8_logits`: the
/// int8 net's fp32 copy of it (the conversion inserted before its fp32 consumers).
void ForwardFloatAndInt8(const std::string& float_file, const std::string& int8_file,
                         const std::string& logits, const std::string& int8_logits,
                         double fraction) {
  NetOptions o;
  o.synthetic_data = true;
  o.keep_blobs = {logits};
  const auto fp = ReadNetParameterText(Paper(float_file));
  const auto q8 = ReadNetParameterText(Paper(int8_file));
  Net f(fp, Dev(), o);
  // Inputs the synthetic data leave at zero (Input layers) get values: all-zero inputs give
  // equal logits in both nets, and so a comparison that shows nothing.
  for (Blob* in : f.input_blobs()) {
    const std::vector<float> v = in->ToFloat();
    if (std::all_of(v.begin(), v.end(), [](float x) { return x == 0.0f; }))
      in->FromFloat(test_support::SineInput(*in));
  }
  f.SetQuantMode(quant::QuantizerMode::kObserve);
  f.Forward();
  const std::vector<float> want = f.blob(logits).ToFloat();
  o.keep_blobs = {int8_logits};
  Net n8(q8, Dev(), o);
  for (Blob* in : n8.input_blobs()) in->FromFloat(f.blob(in->name()).ToFloat());
  caffe::NetParameter calibrated;
  f.ToProto(&calibrated);
  n8.CopyTrainedLayersFrom(calibrated);
  ASSERT_TRUE(n8.QuantizersWithoutRange().empty());
  n8.Forward();
  Blob& out = n8.blob(int8_logits);
  ASSERT_EQ(out.type(), DataType::kFloat32) << int8_logits;
  const std::vector<float> got = out.ToFloat();
  EXPECT_TRUE(test_support::LogitsAgree(want, got, f.blob(logits).shape(0), fraction)) << int8_file;
}

TEST(Net, MnistSimpleForwardFloatAndInt8) {
  ForwardFloatAndInt8("mnist_simple/net_float.prototxt", "mnist_simple/net_int8.prototxt",
                      "output_layer", "output_layer_fp32", 0.05);
}

TEST(Net, ImagenetCaffenetForwardFloatAndInt8Batch1) {
  ForwardFloatAndInt8("imagenet_caffenet/net_float_1.prototxt",
                      "imagenet_caffenet/net_int8_1.prototxt", "fc8", "fc8_fp32", 0.05);
}

// ---- Weights --------------------------------------------------------------------------------

const char* kSmallNet = R"(
name: "small"
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 dim: 5 dim: 5 } } }
layer { name: "conv" type: "Convolution" bottom: "x" top: "c"
        convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: "xavier" }
                            bias_filler { type: "constant" value: 0.1 } } }
layer { name: "relu" type: "ReLU" bottom: "c" top: "c" }
layer { name: "fc" type: "InnerProduct" bottom: "c" top: "y"
        inner_product_param { num_output: 3 weight_filler { type: "gaussian" std: 0.1 } } }
)";

TEST(Net, CaffemodelRoundTripGivesIdenticalBytes) {
  const fs::path dir = TempDir("roundtrip");
  for (DataType t : kAllDataTypes) {
    caffe::NetParameter p = WithDataType(NetText(kSmallNet), t);
    p.mutable_layer(0)->set_top_data_type(caffe::CAFFE_FLOAT);  // inputs stay fp32
    // Ranges for the quantized activations come from an fp32 calibration.
    Net f(WithDataType(p, DataType::kFloat32), Dev());
    f.SetQuantMode(quant::QuantizerMode::kObserve);
    f.Forward();
    caffe::NetParameter calibrated;
    f.ToProto(&calibrated);
    Net a(p, Dev());
    a.CopyTrainedLayersFrom(calibrated);
    const std::string first = (dir / (std::string(Name(t)) + "_1.caffemodel")).string();
    const std::string second = (dir / (std::string(Name(t)) + "_2.caffemodel")).string();
    a.Save(first);
    Net b(p, Dev());
    b.CopyTrainedLayersFrom(first);
    b.Save(second);
    EXPECT_EQ(ReadBytes(first), ReadBytes(second)) << Name(t);
    // fp32 blobs as BVLC floats; others packed in their type.
    const caffe::NetParameter saved = ReadNetParameterBinary(first);
    const caffe::BlobProto& w = saved.layer(1).blobs(0);
    if (t == DataType::kFloat32) {
      EXPECT_EQ(w.data_size(), 4 * 3 * 3 * 3);
      EXPECT_FALSE(w.has_packed_data());
    } else {
      EXPECT_EQ(w.data_size(), 0);
      EXPECT_EQ(w.packed_data().size(), 4 * 3 * 3 * 3 * SizeOf(t));
      EXPECT_EQ(w.data_type(), DataTypeToProto(t));
    }
    EXPECT_GT(saved.quantizer_size(), 0);
    // Same outputs from both nets.
    for (Net* n : {&a, &b}) n->blob("x").FromFloat(f.blob("x").ToFloat());
    a.Forward();
    b.Forward();
    EXPECT_EQ(a.blob("y").ToFloat(), b.blob("y").ToFloat()) << Name(t);
  }
  // Readable by the Python protobuf package with our caffe.proto.
  const std::string source_dir = mpcaffe::test_support::SourceDir().string();
  const std::string log = (dir / "py.log").string();
  if (std::system(("python3 -c 'import google.protobuf' > '" + log + "' 2>&1").c_str()) != 0) {
    GTEST_SKIP() << "python3 with protobuf not available";
  }
  ASSERT_EQ(0, std::system(("cd '" + source_dir + "' && protoc --python_out='" + dir.string() +
                            "' proto/caffe.proto > '" + log + "' 2>&1").c_str()))
      << ReadBytes(log);
  const std::string py = "import sys; sys.path.insert(0, '" + dir.string() + "/proto'); import caffe_pb2; "
                         "n = caffe_pb2.NetParameter(); n.ParseFromString(open('" +
                         (dir / "int8q_1.caffemodel").string() +
                         "', 'rb').read()); "
                         "assert n.layer[1].blobs[0].data_type == caffe_pb2.CAFFE_INT8_QUANTIZED; "
                         "assert len(n.layer[1].blobs[0].packed_data) == 108; "
                         "assert len(n.quantizer) > 0; print(len(n.layer), len(n.quantizer))";
  EXPECT_EQ(0, std::system(("python3 -c \"" + py + "\" > '" + log + "' 2>&1").c_str())) << ReadBytes(log);
  fs::remove_all(dir);
}

// int8 with 4-bit weights: the caffemodel keeps them packed (two per byte, packed_bits 4) with
// the per-channel scales beside the ranges; saving what was loaded gives the same bytes and the
// same outputs; an fp32 net reads the 4-bit grid values; a wrong packed size names layer and blob.
TEST(Net, Int4WeightsCaffemodelRoundTrip) {
  const fs::path dir = TempDir("int4");
  caffe::NetParameter p = WithDataType(NetText(kSmallNet), DataType::kInt8Q);
  p.mutable_layer(0)->set_top_data_type(caffe::CAFFE_FLOAT);
  for (int l : {1, 3}) p.mutable_layer(l)->add_blobs_quantizer()->set_weight_bits(4);
  Net f(WithDataType(p, DataType::kFloat32), Dev());
  f.SetQuantMode(quant::QuantizerMode::kObserve);
  f.Forward();
  caffe::NetParameter calibrated;
  f.ToProto(&calibrated);
  Net a(p, Dev());
  a.CopyTrainedLayersFrom(calibrated);
  const std::string first = (dir / "w4_1.caffemodel").string(), second = (dir / "w4_2.caffemodel").string();
  a.Save(first);
  Net b(p, Dev());
  b.CopyTrainedLayersFrom(first);
  b.Save(second);
  EXPECT_EQ(ReadBytes(first), ReadBytes(second));
  const caffe::NetParameter saved = ReadNetParameterBinary(first);
  const caffe::BlobProto& cw = saved.layer(1).blobs(0);  // 4 channels × 27 → 14 bytes each
  EXPECT_EQ(cw.packed_bits(), 4u);
  EXPECT_EQ(cw.data_type(), caffe::CAFFE_INT8_QUANTIZED);
  EXPECT_EQ(cw.packed_data().size(), 4u * 14);
  EXPECT_EQ(saved.layer(3).blobs(0).packed_data().size(), 3u * 18);  // 3 × 36
  EXPECT_EQ(saved.layer(1).blobs(1).data_type(), caffe::CAFFE_INT8_QUANTIZED);  // bias as before
  int scales = 0;
  for (const auto& q : saved.quantizer()) {
    if (q.name() == "conv/blob0" || q.name() == "fc/blob0") {
      EXPECT_EQ(q.channel_scale_size(), q.name() == "conv/blob0" ? 4 : 3);
      EXPECT_EQ(q.weight_bits(), 4u);
      ++scales;
    }
  }
  EXPECT_EQ(scales, 2);
  for (Net* n : {&a, &b}) n->blob("x").FromFloat(f.blob("x").ToFloat());
  a.Forward();
  b.Forward();
  EXPECT_EQ(a.blob("y").ToFloat(), b.blob("y").ToFloat());
  // The int8w4 outputs (dequantized) stay close to fp32 (loose: 4-bit weights).
  f.Forward();
  const auto y = a.blob("y").ToFloat(), yf = f.blob("y").ToFloat();
  const quant::QuantParams yq = a.layer("fc").TopParams(0);
  for (size_t i = 0; i < y.size(); ++i)
    EXPECT_NEAR(yq.scale[0] * (y[i] - yq.zero_point[0]), yf[i], 0.05f) << i;
  // fp32 net from the 4-bit caffemodel: scale · w.
  Net g(WithDataType(p, DataType::kFloat32), Dev());
  g.CopyTrainedLayersFrom(first);
  const auto real = g.layer("conv").ParamAsFloat(0);
  const auto want = a.layer("conv").ParamAsFloat(0);
  EXPECT_EQ(real, want);
  // A truncated packed blob names the layer and the blob.
  caffe::NetParameter broken = saved;
  broken.mutable_layer(3)->mutable_blobs(0)->mutable_packed_data()->pop_back();
  try {
    Net c(p, Dev());
    c.CopyTrainedLayersFrom(broken);
    FAIL();
  } catch (const NetError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'fc', parameter blob 0"), std::string::npos) << m;
    EXPECT_NE(m.find("53 bytes"), std::string::npos) << m;
  }
  fs::remove_all(dir);
}

// int8 depthwise convolutions keep one symmetric weight scale per channel (chosen from the fp32
// weights, saved as channel_scale beside the ranges): channels 100× apart in size each keep
// their own 8 bits, where one scale for the layer rounds the small channel's weights to a few
// steps (MPCAFFE_DEPTHWISE_PER_CHANNEL=0). Saving and loading gives the same bytes and outputs;
// an fp32 net reads the same real weights. The other convolutions have scales per channel too
// unless MPCAFFE_PER_CHANNEL_WEIGHTS=0, which leaves the depthwise ones theirs.
TEST(Net, Int8DepthwiseWeightsHaveAScalePerChannel) {
  const fs::path dir = TempDir("dwpc");
  const char* text = R"(
name: "dw"
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 1 dim: 4 dim: 6 dim: 6 } } }
layer { name: "dw" type: "Convolution" bottom: "x" top: "d"
        convolution_param { num_output: 4 group: 4 kernel_size: 3 pad: 1
                            weight_filler { type: "gaussian" std: 1 } } }
layer { name: "pw" type: "Convolution" bottom: "d" top: "y"
        convolution_param { num_output: 2 kernel_size: 1
                            weight_filler { type: "gaussian" std: 1 } } }
)";
  caffe::NetParameter p = WithDataType(NetText(text), DataType::kInt8Q);
  p.mutable_layer(0)->set_top_data_type(caffe::CAFFE_FLOAT);
  Net f(WithDataType(p, DataType::kFloat32), Dev());
  std::vector<float> w = f.layer("dw").ParamAsFloat(0);
  const float size[4] = {1.0f, 0.3f, 0.1f, 0.01f};
  for (size_t i = 0; i < w.size(); ++i) w[i] *= size[i / 9];
  f.layer("dw").SetParamFromFloat(0, w);
  f.SetQuantMode(quant::QuantizerMode::kObserve);
  f.Forward();
  caffe::NetParameter calibrated;
  f.ToProto(&calibrated);

  // The largest relative error of each channel's int8 weights.
  auto channel_errors = [&](Net& n) {
    const std::vector<float> got = n.layer("dw").ParamAsFloat(0);
    std::vector<double> err(4, 0.0);
    for (int c = 0; c < 4; ++c) {
      double big = 0;
      for (int k = 0; k < 9; ++k) big = std::max(big, double(std::fabs(w[c * 9 + k])));
      for (int k = 0; k < 9; ++k)
        err[c] = std::max(err[c], std::fabs(double(got[c * 9 + k]) - w[c * 9 + k]) / big);
    }
    return err;
  };
  Net a(p, Dev());
  a.CopyTrainedLayersFrom(calibrated);
  const quant::QuantParams wq = a.layer("dw").BlobParams(0);
  ASSERT_TRUE(wq.per_channel());
  ASSERT_EQ(wq.channels(), 4u);
  EXPECT_TRUE(a.layer("pw").BlobParams(0).per_channel());
  for (double e : channel_errors(a)) EXPECT_LE(e, 0.5 / 127 + 1e-6);
  {
    ScopedSettings env;
    env->depthwise_per_channel = "0";
    Net t(p, Dev());
    t.CopyTrainedLayersFrom(calibrated);
    EXPECT_FALSE(t.layer("dw").BlobParams(0).per_channel());
    EXPECT_TRUE(t.layer("pw").BlobParams(0).per_channel());
    EXPECT_GT(channel_errors(t)[3], 0.1);  // 1% of the largest weight: steps of ~8%
  }
  {
    ScopedSettings env;
    env->per_channel_weights = "0";
    Net t(p, Dev());
    t.CopyTrainedLayersFrom(calibrated);
    EXPECT_TRUE(t.layer("dw").BlobParams(0).per_channel());
    EXPECT_FALSE(t.layer("pw").BlobParams(0).per_channel());
    for (double e : channel_errors(t)) EXPECT_LE(e, 0.5 / 127 + 1e-6);
  }

  const std::string first = (dir / "dw_1.caffemodel").string();
  const std::string second = (dir / "dw_2.caffemodel").string();
  a.Save(first);
  Net b(p, Dev());
  b.CopyTrainedLayersFrom(first);
  b.Save(second);
  EXPECT_EQ(ReadBytes(first), ReadBytes(second));
  int scales = 0;
  const caffe::NetParameter saved = ReadNetParameterBinary(first);
  for (const auto& q : saved.quantizer())
    if (q.name() == "dw/blob0" || q.name() == "pw/blob0") scales += q.channel_scale_size();
  EXPECT_EQ(scales, 4 + 2);
  for (Net* n : {&a, &b}) n->blob("x").FromFloat(f.blob("x").ToFloat());
  a.Forward();
  b.Forward();
  EXPECT_EQ(a.blob("y").ToFloat(), b.blob("y").ToFloat());
  Net g(WithDataType(p, DataType::kFloat32), Dev());
  g.CopyTrainedLayersFrom(first);
  EXPECT_EQ(g.layer("dw").ParamAsFloat(0), a.layer("dw").ParamAsFloat(0));
  fs::remove_all(dir);
}

// Calibrating a net whose quantized parameters still wait for their filler values draws them
// through the fp32 variant's parameters (Layer::CopyParamValuesFrom: drawn once, quantized from
// there, dequantized in place): the ranges, the stored parameters and the outputs are those of
// drawing the values first and calibrating after, bit for bit. ip1 has 401 408 weights (drawn
// by two threads), ip2 a range given in the file (the values are quantized with it).
TEST(Net, CalibratingBeforeTheFillersAreDrawnGivesWhatDrawingFirstGives) {
  const caffe::NetParameter p = NetText(R"(
name: "fill_calibrate"
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 1 dim: 3 dim: 16 dim: 16 } } }
layer { name: "conv1" type: "Convolution" bottom: "x" top: "c"
  bottom_data_type: CAFFE_INT8_QUANTIZED compute_data_type: CAFFE_INT8_QUANTIZED top_data_type: CAFFE_INT8_QUANTIZED
  convolution_param { num_output: 8 kernel_size: 3
    weight_filler { type: "gaussian" std: 0.1 } bias_filler { type: "constant" value: 0.05 } } }
layer { name: "relu1" type: "ReLU" bottom: "c" top: "c"
  bottom_data_type: CAFFE_INT8_QUANTIZED compute_data_type: CAFFE_INT8_QUANTIZED top_data_type: CAFFE_INT8_QUANTIZED }
layer { name: "ip1" type: "InnerProduct" bottom: "c" top: "h"
  bottom_data_type: CAFFE_INT8_QUANTIZED compute_data_type: CAFFE_INT8_QUANTIZED top_data_type: CAFFE_INT8_QUANTIZED
  inner_product_param { num_output: 256
    weight_filler { type: "gaussian" mean: 0.001 std: 0.02 } bias_filler { type: "uniform" min: -0.1 max: 0.2 } } }
layer { name: "ip2" type: "InnerProduct" bottom: "h" top: "y"
  bottom_data_type: CAFFE_INT8_QUANTIZED compute_data_type: CAFFE_INT8_QUANTIZED top_data_type: CAFFE_FLOAT
  blobs_quantizer { observed_min: -0.1 observed_max: 0.1 }
  inner_product_param { num_output: 10 weight_filler { type: "xavier" } } }
)");
  struct Result {
    std::string ranges;
    std::vector<std::string> params;
    std::vector<float> output;
  };
  auto calibrate = [&](bool draw_first) {
    Net n(p, Dev(), NetOptions{});
    if (draw_first)
      for (const auto& l : n.layers()) l->blobs();
    Blob& x = *n.input_blobs()[0];
    x.FromFloat(test_support::SineInput(x));
    EXPECT_FALSE(n.QuantizersWithoutRange().empty());
    CalibrateWithFloatVariant(n, p, NetOptions{});
    Result r;
    caffe::NetParameter ranges;
    n.RangesToProto(&ranges);
    r.ranges = ranges.DebugString();
    for (const auto& l : n.layers())
      for (const auto& b : l->blobs()) {
        const auto* bytes = static_cast<const char*>(b->host_data());
        r.params.emplace_back(bytes, bytes + b->bytes());
      }
    n.Forward();
    r.output = n.blob("y").ToFloat();
    return r;
  };
  const Result first = calibrate(true), through = calibrate(false);
  EXPECT_EQ(through.ranges, first.ranges);
  ASSERT_EQ(through.params.size(), first.params.size());
  for (size_t k = 0; k < first.params.size(); ++k)
    EXPECT_TRUE(through.params[k] == first.params[k]) << "parameter blob " << k << " differs";
  EXPECT_EQ(through.output, first.output);
  EXPECT_NE(first.ranges.find("observed_min"), std::string::npos);
}

TEST(Net, ShapeMismatchNamesLayerBlobAndShapes) {
  Net net(NetText(kSmallNet), Dev());
  caffe::NetParameter w;
  auto* l = w.add_layer();
  l->set_name("fc");
  auto* b = l->add_blobs();
  b->mutable_shape()->add_dim(3), b->mutable_shape()->add_dim(99);
  for (int i = 0; i < 297; ++i) b->add_data(0);
  l->add_blobs()->mutable_shape()->add_dim(3);
  try {
    net.CopyTrainedLayersFrom(w);
    FAIL();
  } catch (const NetError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'fc'"), std::string::npos) << m;
    EXPECT_NE(m.find("blob 0"), std::string::npos) << m;
    EXPECT_NE(m.find("3 99"), std::string::npos) << m;
    EXPECT_NE(m.find("3 36"), std::string::npos) << m;
  }
}

TEST(Net, QuantModeReachesEveryFloatQuantizer) {
  caffe::NetParameter p = NetText(kSmallNet);
  p.mutable_state()->set_quantizer_mode(caffe::CAFFE_QUANT_OBSERVE);
  Net net(p, Dev());
  EXPECT_EQ(net.quant_mode(), quant::QuantizerMode::kObserve);
  net.Forward();
  for (const auto& l : net.layers())
    for (quant::Quantizer* q : l->quantizers()) EXPECT_TRUE(q->has_observed()) << q->name();
}

// ---- Reduced memory -------------------------------------------------------------------------

TEST(MemoryPlanner, OverlappingLifetimesNeverShare) {
  const std::vector<BlobLifetime> lives = {{100, -1, 1}, {200, 0, 2}, {50, 1, 3}, {300, 2, 4}, {10, 3, 5}};
  const MemoryPlan plan = PlanSharedMemory(lives);
  for (size_t i = 0; i < lives.size(); ++i)
    for (size_t j = i + 1; j < lives.size(); ++j)
      if (plan.slot_of[i] == plan.slot_of[j]) {
        EXPECT_TRUE(lives[i].last < lives[j].first || lives[j].last < lives[i].first) << i << " " << j;
      }
  for (size_t i = 0; i < lives.size(); ++i) EXPECT_GE(plan.slot_bytes[plan.slot_of[i]], lives[i].bytes);
  EXPECT_LT(plan.total_bytes(), 660u);
}

TEST(Net, ReducedMemoryAlexNetUsesLessPeakMemoryWithIdenticalOutputs) {
  const auto p = ReadNetParameterText(Paper("imagenet_caffenet/net_float_1.prototxt"));
  std::vector<float> outputs[2];
  uint64_t peak[2];
  for (int rm = 0; rm < 2; ++rm) {
    NetOptions o;
    o.synthetic_data = true;
    o.reduced_memory = rm;
    o.keep_blobs = {"fc8"};
    Net net(p, Dev(), o);
    EXPECT_EQ(net.reduced_memory(), rm == 1);
    net.Forward();
    Dev().Finish();
    outputs[rm] = net.blob("fc8").ToFloat();
    peak[rm] = net.peak_device_bytes();
    std::printf("AlexNet fp32 batch 1, reduced memory %s: peak %.1f MiB, blobs+params %.1f MiB\n",
                rm ? "on " : "off", peak[rm] / 1048576.0, net.blob_device_bytes() / 1048576.0);
  }
  EXPECT_LT(peak[1], peak[0]);
  EXPECT_EQ(outputs[0], outputs[1]);
}

/// Under reduced memory the convolution keeps only its repacked weights on the device: the
/// weight blob's own device copy is freed after packing, the output is unchanged, and weights
/// written later (host side) are packed again for the next forward.
TEST(Net, ReducedMemoryFreesRepackedConvolutionWeights) {
  const std::string text = R"(
    layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 9 dim: 9 } } }
    layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
            convolution_param { num_output: 5 kernel_size: 3 pad: 1
              weight_filler { type: "gaussian" std: 0.3 } bias_filler { type: "constant" value: 0.1 } } }
    layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" })";
  std::vector<float> input(2 * 3 * 9 * 9);
  for (size_t i = 0; i < input.size(); ++i) input[i] = std::sin(0.37f * static_cast<float>(i));
  std::vector<float> out[2], changed[2];
  for (int rm = 0; rm < 2; ++rm) {
    NetOptions o;
    o.reduced_memory = rm;
    Net net(NetText(text), Dev(), o);
    Blob& w = net.layer("conv").param_blob(0);
    net.blob("data").FromFloat(input);
    net.Forward();
    out[rm] = net.blob("conv").ToFloat();
    EXPECT_EQ(w.device_bytes(), rm ? 0u : w.bytes());
    std::vector<float> values = w.ToFloat();
    for (float& v : values) v = -v;
    net.layer("conv").SetParamFromFloat(0, values);
    net.Forward();
    changed[rm] = net.blob("conv").ToFloat();
    EXPECT_EQ(w.device_bytes(), rm ? 0u : w.bytes());
  }
  EXPECT_EQ(out[0], out[1]);
  EXPECT_EQ(changed[0], changed[1]);
  EXPECT_NE(out[0], changed[0]);
}

/// A ReLU that alone consumes a Convolution's or InnerProduct's top runs inside it at inference:
/// in place always, writing a new blob only under reduced memory (whose intermediate blobs are
/// not kept); never while quantizers observe. Outputs match the unfused net (fp32 exactly, int8
/// within the one rounding the fused pipeline saves).
TEST(Net, ReluFusedIntoItsProducerGivesTheSameOutputs) {
  const std::string text = R"(
    layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 9 dim: 9 } } }
    layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
            convolution_param { num_output: 6 kernel_size: 3 pad: 1
              weight_filler { type: "gaussian" std: 0.3 } bias_filler { type: "constant" value: -0.1 } } }
    layer { name: "relu1" type: "ReLU" bottom: "conv" top: "relu1" }
    layer { name: "ip" type: "InnerProduct" bottom: "relu1" top: "ip"
            inner_product_param { num_output: 7
              weight_filler { type: "gaussian" std: 0.1 } bias_filler { type: "constant" value: -0.05 } } }
    layer { name: "relu2" type: "ReLU" bottom: "ip" top: "ip" })";
  std::vector<float> input(2 * 3 * 9 * 9);
  for (size_t i = 0; i < input.size(); ++i) input[i] = std::sin(0.37f * static_cast<float>(i));
  auto run = [&](const caffe::NetParameter& p, int fuse, int rm, const caffe::NetParameter* from,
                 std::vector<int>* fused, quant::QuantParams* out_q = nullptr) {
    NetOptions o;
    o.fuse_relu = fuse;
    o.reduced_memory = rm;
    o.optimize = 0;  // the ReLU fusion alone (the optimizer's chains: optimizer_test.cc)
    Net net(p, Dev(), o);
    if (from) net.CopyTrainedLayersFrom(*from);
    fused->clear();
    for (size_t i = 0; i < net.layers().size(); ++i)
      if (net.fused_relu_of(static_cast<int>(i)) >= 0)
        fused->push_back(static_cast<int>(i));
    net.blob("data").FromFloat(input);
    net.Forward();
    if (out_q) *out_q = net.layer("relu2").TopParams(0);
    return net.blob("ip").ToFloat();
  };
  // Trained fp32 weights, and the ranges an observing (hence unfused) fp32 pass records.
  caffe::NetParameter trained;
  {
    NetOptions o;
    o.fuse_relu = 1;
    o.reduced_memory = 1;
    Net f(NetText(text), Dev(), o);
    f.SetQuantMode(quant::QuantizerMode::kObserve);
    f.blob("data").FromFloat(input);
    f.Forward();
    // Observed: the conv's top and the ReLU's bottom would go unseen in a fused pass.
    EXPECT_TRUE(f.layer("conv").top_quantizer(0).has_observed());
    EXPECT_TRUE(f.layer("relu1").bottom_quantizer(0).has_observed());
    f.ToProto(&trained);
  }
  const caffe::NetParameter fp = NetText(text);
  std::vector<int> fused;
  const std::vector<float> plain = run(fp, 0, 1, &trained, &fused);
  EXPECT_TRUE(fused.empty());
  EXPECT_EQ(run(fp, 1, 1, &trained, &fused), plain);
  EXPECT_EQ(fused, (std::vector<int>{1, 3}));  // conv (+relu1), ip (+relu2)
  EXPECT_EQ(run(fp, 1, 0, &trained, &fused), plain);
  EXPECT_EQ(fused, (std::vector<int>{3}));  // without reduced memory only the in-place one

  caffe::NetParameter q8 = WithDataType(fp, DataType::kInt8Q);
  auto* data = q8.mutable_layer(0);  // fp32 input; the net quantizes it
  data->set_bottom_data_type(caffe::CAFFE_FLOAT);
  data->set_compute_data_type(caffe::CAFFE_FLOAT);
  data->set_top_data_type(caffe::CAFFE_FLOAT);
  quant::QuantParams q;
  const std::vector<float> unfused8 = run(q8, 0, 1, &trained, &fused);  // stored uint8 values
  const std::vector<float> fused8 = run(q8, 1, 1, &trained, &fused, &q);
  EXPECT_EQ(fused, (std::vector<int>{2, 4}));  // after the inserted input Quantizer
  ASSERT_EQ(fused8.size(), unfused8.size());
  double max_out = 0;
  for (float v : plain) max_out = std::max<double>(max_out, v);
  int differ = 0;
  for (size_t i = 0; i < fused8.size(); ++i) {
    // One rounding fewer before the InnerProduct: a few output steps at most.
    EXPECT_NEAR(fused8[i], unfused8[i], 3) << i;
    EXPECT_NEAR(q.scale[0] * (fused8[i] - q.zero_point[0]), plain[i], 0.08 * max_out) << i;
    differ += fused8[i] != unfused8[i];
  }
  std::printf("int8 fused vs unfused: %d of %zu outputs differ\n", differ, fused8.size());
}

// ---- Layers reshaping before every pass, force_backward, Python layers ----------------------

/// A source layer whose top has `g_source_rows` rows, changed by the test between passes (as
/// a Python data layer changes its batch): it asks to be reshaped before every Forward.
int g_source_rows = 2;

class RowsSourceLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "TestRowsSource"; }
  bool SupportsType(DataType t) const override { return t == DataType::kFloat32; }
  bool ReshapesEachPass() const override { return true; }
  int ExactNumBottomBlobs() const override { return 0; }
  int ExactNumTopBlobs() const override { return 1; }
  void Reshape(const std::vector<Blob*>&, const std::vector<Blob*>& top) override {
    top[0]->Reshape({g_source_rows, 3});
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>&, const std::vector<Blob*>& top) override {
    top[0]->FromFloat(std::vector<float>(top[0]->count(), 1.0f));
  }
};

TEST(Net, LayerReshapingEachPassReshapesTheLayersAfterIt) {
  static const bool registered = (RegisterLayerType<RowsSourceLayer>("TestRowsSource"), true);
  ASSERT_TRUE(registered);
  g_source_rows = 2;
  Net net(NetText(R"(
    layer { name: "src" type: "TestRowsSource" top: "x" }
    layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y"
            inner_product_param { num_output: 4 weight_filler { type: "constant" value: 0.5 } } }
  )"), Dev());
  net.Forward();
  EXPECT_EQ(net.blob("y").shape(), (std::vector<int>{2, 4}));
  g_source_rows = 5;
  net.Forward();
  EXPECT_EQ(net.blob("y").shape(), (std::vector<int>{5, 4}));
  const std::vector<float> y = net.blob("y").ToFloat();
  ASSERT_EQ(y.size(), 20u);
  for (float v : y) EXPECT_FLOAT_EQ(v, 1.5f);  // three inputs of 1 times weights of 0.5
}

TEST(Net, ForceBackwardRunsLayersThatFeedNoLoss) {
  const char* text = R"(
    layer { name: "x" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 } } }
    layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y"
            inner_product_param { num_output: 2 weight_filler { type: "constant" value: 2 } } }
  )";
  NetOptions o;
  o.phase = caffe::TRAIN;
  EXPECT_FALSE(Net(NetText(text), Dev(), o).layer_need_backward(1));  // no loss: nothing to do
  // force_backward (BVLC): gradients set on an output reach the input (pycaffe's
  // net.backward(y=...) on a deploy net).
  Net net(NetText(std::string("force_backward: true\n") + text), Dev(), o);
  EXPECT_TRUE(net.layer_need_backward(1));
  net.blob("x").FromFloat(std::vector<float>(6, 1.0f));
  net.Forward();
  Blob& y = net.blob("y");
  std::fill_n(static_cast<float*>(y.mutable_host_diff()), y.count(), 1.0f);
  net.Backward();
  const float* dx = static_cast<const float*>(net.blob("x").host_diff());
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(dx[i], 4.0f) << i;  // two outputs, weight 2
}

TEST(Net, PythonLayersNeedThePythonPackage) {
  try {
    Net net(NetText(R"(layer { name: "feed" type: "Python" top: "x"
                            python_param { module: "m" layer: "L" } })"), Dev());
    FAIL() << "a Python layer was built without an interpreter";
  } catch (const LayerError& e) {
    EXPECT_NE(std::string(e.what()).find("layer 'feed': Python layers run only with a Python "
                                         "interpreter"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mpcaffe

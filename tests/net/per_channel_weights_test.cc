// tests/net/per_channel_weights_test.cc — int8 weight scales per output channel for every
// Convolution and InnerProduct (the default; MPCAFFE_PER_CHANNEL_WEIGHTS=0 keeps one per layer):
// what the setting changes in a small net, caffemodels saved with either loading as they were
// saved, and a measurement, run by hand, of what it does to whole nets' logits against fp32
// (docs/BENCHMARKS.md, "Accuracy per data type").
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "device/settings.h"
#include "net/net.h"
#include "proto/model_io.h"
#include "tests/testing/net_support.h"
#include "tests/testing/paths.h"
#include "tools/net_variants.h"

namespace mpcaffe {
namespace {

Device& Dev() { return DefaultDevice(); }
using test_support::NetText;

/// Blob `blob` (written by layer `writer`) as real values: quantized data dequantized.
std::vector<float> Real(Net& net, const std::string& blob, const std::string& writer) {
  std::vector<float> v = net.blob(blob).ToFloat();
  if (!IsQuantized(net.blob(blob).type())) return v;
  const quant::QuantParams t = net.layer(writer).TopParams(0);
  for (float& x : v) x = t.scale[0] * (x - float(t.zero_point[0]));
  return v;
}

/// The largest |a − b| over the spread (max − min) of `a`: LogitsAgree's measure
/// (tests/testing/logit_agreement.h).
double ErrorOverSpread(const std::vector<float>& a, const std::vector<float>& b) {
  const auto [lo, hi] = std::minmax_element(a.begin(), a.end());
  double err = 0;
  for (size_t i = 0; i < a.size(); ++i) err = std::max(err, std::fabs(double(a[i]) - b[i]));
  return err / (double(*hi) - *lo);
}

/// A 3×3 convolution of 4 channels and an InnerProduct of 4 outputs, both with gaussian fillers.
caffe::NetParameter ConvAndInnerProduct() {
  return NetText(R"(
name: "pc"
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 dim: 6 dim: 6 } } }
layer { name: "conv" type: "Convolution" bottom: "x" top: "c"
        convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: "gaussian" std: 1 } } }
layer { name: "ip" type: "InnerProduct" bottom: "c" top: "y"
        inner_product_param { num_output: 4 weight_filler { type: "gaussian" std: 1 } } }
)");
}

// A convolution and an InnerProduct whose output channels are 100× apart in size: by default each
// channel keeps its own scale (its weights within half a step of 1/127 of its largest), where
// one scale per layer (MPCAFFE_PER_CHANNEL_WEIGHTS=0) rounds the small channels' weights to a
// few steps. Either way the int8 net computes the fp32 function within its activations' steps.
TEST(PerChannelWeights, EveryConvolutionAndInnerProductHasAScalePerChannelUnlessTurnedOff) {
  const caffe::NetParameter p = ConvAndInnerProduct();
  const float size[4] = {1.0f, 0.3f, 0.1f, 0.01f};
  Net f(p, Dev());
  for (const char* name : {"conv", "ip"}) {
    std::vector<float> w = f.layer(name).ParamAsFloat(0);
    const size_t per = w.size() / 4;
    for (size_t i = 0; i < w.size(); ++i) w[i] *= size[i / per];
    f.layer(name).SetParamFromFloat(0, w);
  }
  std::vector<float> x(2 * 3 * 6 * 6);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& v : x) v = u(rng);
  f.blob("x").FromFloat(x);
  f.SetQuantMode(quant::QuantizerMode::kObserve);
  f.Forward();
  const std::vector<float> want = f.blob("y").ToFloat();
  caffe::NetParameter calibrated;
  f.ToProto(&calibrated);
  const caffe::NetParameter typed = tools::TypedVariant(p, DataType::kInt8Q, Dev());

  // The largest error of channel 3 (the smallest) of a layer's int8 weights, over its largest.
  auto smallest_channel_error = [&](Net& n, const char* name) {
    const std::vector<float> real = f.layer(name).ParamAsFloat(0);
    const std::vector<float> got = n.layer(name).ParamAsFloat(0);
    const size_t per = real.size() / 4;
    double big = 0, err = 0;
    for (size_t k = 3 * per; k < 4 * per; ++k) big = std::max(big, double(std::fabs(real[k])));
    for (size_t k = 3 * per; k < 4 * per; ++k) err = std::max(err, std::fabs(double(got[k]) - real[k]));
    return err / big;
  };
  std::vector<double> output_error;
  for (const char* mode : {"0", "", "1"}) {
    ScopedSettings env;
    env->per_channel_weights = mode;
    Net q(typed, Dev());
    q.CopyTrainedLayersFrom(calibrated);
    const bool per_channel = std::string(mode) != "0";
    for (const char* name : {"conv", "ip"}) {
      SCOPED_TRACE(std::string(name) + ", MPCAFFE_PER_CHANNEL_WEIGHTS=" + mode);
      const quant::QuantParams w = q.layer(name).BlobParams(0);
      EXPECT_EQ(w.per_channel(), per_channel);
      if (per_channel) {
        EXPECT_EQ(w.channels(), 4u);
        EXPECT_LE(smallest_channel_error(q, name), 0.5 / 127 + 1e-6);
      } else {
        EXPECT_GT(smallest_channel_error(q, name), 0.1);  // steps of ~8 % of its largest weight
      }
    }
    q.blob("x").FromFloat(x);
    q.Forward();
    output_error.push_back(ErrorOverSpread(want, Real(q, "y", "ip")));
  }
  // Both nets compute the function: the output's own int8 steps (one scale for its 4 channels)
  // and the activations' rounding dominate what is left here.
  std::printf("int8 output: largest error / fp32 spread %.4g per tensor, %.4g per channel\n",
              output_error[0], output_error[1]);
  EXPECT_EQ(output_error[1], output_error[2]);  // "1" asks for the default
  for (double e : output_error) EXPECT_LT(e, 0.05);
}

std::string ReadBytes(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// int8 caffemodels hold the weights as stored values with their scales: one saved with one
// scale per layer (before scales per channel were the default, or with the setting 0) loads with
// that scale — the same outputs and, saved again, the same bytes, even when filler values had
// drawn scales per channel first — where quantizing the stored values again per channel would
// round them twice. One saved per channel loads per channel; with the setting 0 its weights are
// quantized again with one scale per layer, as asked.
TEST(PerChannelWeights, CaffemodelsLoadWithTheScalesTheyWereSavedWith) {
  const caffe::NetParameter p = ConvAndInnerProduct();
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("mpcaffe_pc_file_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  Net f(p, Dev());
  std::vector<float> x(2 * 3 * 6 * 6);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& v : x) v = u(rng);
  f.blob("x").FromFloat(x);
  f.SetQuantMode(quant::QuantizerMode::kObserve);
  f.Forward();
  caffe::NetParameter calibrated;
  f.ToProto(&calibrated);
  const caffe::NetParameter typed = tools::TypedVariant(p, DataType::kInt8Q, Dev());
  auto output = [&](Net& n) {
    n.blob("x").FromFloat(x);
    n.Forward();
    return n.blob("y").ToFloat();
  };
  auto per_channel = [](Net& n, const char* layer) {
    return n.layer(layer).BlobParams(0).per_channel();
  };

  const std::filesystem::path tensor_file = dir / "per_tensor.caffemodel";
  std::vector<float> tensor_out;
  {
    ScopedSettings env;
    env->per_channel_weights = "0";
    Net old(typed, Dev());
    old.CopyTrainedLayersFrom(calibrated);
    tensor_out = output(old);
    old.Save(tensor_file.string());
  }
  Net a(typed, Dev());
  a.layer("conv").ParamAsFloat(0);  // filler values and their scales per channel
  a.CopyTrainedLayersFrom(tensor_file.string());
  for (const char* layer : {"conv", "ip"}) EXPECT_FALSE(per_channel(a, layer)) << layer;
  EXPECT_EQ(output(a), tensor_out);
  a.Save((dir / "again.caffemodel").string());
  EXPECT_EQ(ReadBytes(dir / "again.caffemodel"), ReadBytes(tensor_file));

  const std::filesystem::path channel_file = dir / "per_channel.caffemodel";
  Net c(typed, Dev());
  c.CopyTrainedLayersFrom(calibrated);
  const std::vector<float> channel_out = output(c);
  c.Save(channel_file.string());
  int scales = 0;
  const caffe::NetParameter saved = ReadNetParameterBinary(channel_file.string());
  for (const auto& q : saved.quantizer())
    if (q.name() == "conv/blob0" || q.name() == "ip/blob0") scales += q.channel_scale_size();
  EXPECT_EQ(scales, 8);
  Net b(typed, Dev());
  b.CopyTrainedLayersFrom(channel_file.string());
  for (const char* layer : {"conv", "ip"}) EXPECT_TRUE(per_channel(b, layer)) << layer;
  EXPECT_EQ(output(b), channel_out);
  {
    ScopedSettings env;
    env->per_channel_weights = "0";
    Net t(typed, Dev());
    t.CopyTrainedLayersFrom(channel_file.string());
    for (const char* layer : {"conv", "ip"}) EXPECT_FALSE(per_channel(t, layer)) << layer;
    output(t);
    const std::vector<float> want = f.blob("y").ToFloat();
    EXPECT_LT(ErrorOverSpread(want, Real(t, "y", "ip")), 0.05);
  }
  std::filesystem::remove_all(dir);
}

/// A zoo net with weights drawn per layer (He: N(0, 2 / fan-in)), each output channel of every
/// Convolution and InnerProduct multiplied by a factor: 1 (`spread` false: every channel the
/// same size, as random fillers give), or 10^U(−1.5, 0) normalised to a root mean square of 1
/// (`spread`: trained layers' channels differ in size). A BatchNorm right after such a layer
/// gets statistics that follow its channels (mean · f, variance · f²), so it normalises them
/// again, as in a trained net; Scale layers random.
caffe::NetParameter ZooWeights(const caffe::NetParameter& p, bool spread, uint32_t seed) {
  caffe::NetParameter w;
  {
    Net source(p, Dev());
    source.ToProto(&w);
  }
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> exponent(-1.5, 0.0);
  std::uniform_real_distribution<float> mean(-0.3f, 0.3f), var(0.4f, 1.6f), gamma(0.6f, 1.4f),
      beta(-0.2f, 0.2f), bias(-0.05f, 0.05f);
  std::map<std::string, std::vector<double>> factor;  // per top blob of a weighted layer
  for (auto& l : *w.mutable_layer()) {
    if ((l.type() == "Convolution" || l.type() == "InnerProduct") && l.blobs_size() > 0) {
      const bool transposed = l.type() == "InnerProduct" && l.inner_product_param().transpose();
      auto* data = l.mutable_blobs(0)->mutable_data();
      const int out = l.type() == "Convolution" ? int(l.convolution_param().num_output())
                                                : int(l.inner_product_param().num_output());
      const int per = data->size() / out;
      std::vector<double> f(out, 1.0);
      if (spread && !transposed) {
        double ms = 0;
        for (double& v : f) {
          v = std::pow(10.0, exponent(rng));
          ms += v * v;
        }
        for (double& v : f) v /= std::sqrt(ms / out);
      }
      std::normal_distribution<float> he(0.0f, float(std::sqrt(2.0 / per)));
      for (int i = 0; i < data->size(); ++i) data->Set(i, float(he(rng) * f[i / per]));
      if (l.blobs_size() > 1)
        for (int i = 0; i < l.blobs(1).data_size(); ++i) l.mutable_blobs(1)->set_data(i, bias(rng));
      factor[l.top(0)] = f;
    } else if (l.type() == "BatchNorm") {
      const auto it = factor.find(l.bottom(0));
      for (int c = 0; c < l.blobs(0).data_size(); ++c) {
        const double f = it == factor.end() ? 1.0 : it->second[c];
        l.mutable_blobs(0)->set_data(c, float(mean(rng) * f));
        l.mutable_blobs(1)->set_data(c, float(var(rng) * f * f));
      }
      l.mutable_blobs(2)->set_data(0, 1.0f);
    } else if (l.type() == "Scale") {
      for (int c = 0; c < l.blobs(0).data_size(); ++c) l.mutable_blobs(0)->set_data(c, gamma(rng));
      if (l.blobs_size() > 1)
        for (int c = 0; c < l.blobs(1).data_size(); ++c) l.mutable_blobs(1)->set_data(c, beta(rng));
    }
  }
  return w;
}

/// The net of `file` with a batch of one (deploy files carry 10 for BVLC's oversampling).
caffe::NetParameter BatchOne(const std::filesystem::path& file) {
  caffe::NetParameter p = ReadNetParameterText(file.string());
  for (auto& s : *p.mutable_input_shape()) s.set_dim(0, 1);
  if (p.input_dim_size() > 0) p.set_input_dim(0, 1);
  for (auto& l : *p.mutable_layer())
    if (l.type() == "Input")
      for (auto& s : *l.mutable_input_param()->mutable_shape()) s.set_dim(0, 1);
  return p;
}

/// int8 against fp32 on the logits (the Softmax's bottom) of a zoo net, 4 synthetic inputs
/// (uniform in [−2, 2]), ranges from an fp32 pass over them, with the weight scales per tensor,
/// per channel of depthwise convolutions only and per channel everywhere (the default): top-1
/// agreement and the largest and mean |logit difference| over each sample's fp32 logit spread.
/// A measurement (prints), run by hand:
///   test_net --gtest_also_run_disabled_tests --gtest_filter='PerChannelWeights.DISABLED_*'
void MeasureZooNet(const std::filesystem::path& file) {
  if (!std::filesystem::exists(file)) GTEST_SKIP() << file << " not found";
  const caffe::NetParameter p = BatchOne(file);
  std::string logits, writer;
  bool depthwise = false;
  for (const auto& l : p.layer()) {
    if (l.type() == "Softmax") logits = l.bottom(0);
    const auto& c = l.convolution_param();
    depthwise |= l.type() == "Convolution" && c.group() > 1 && c.group() == c.num_output();
  }
  ASSERT_FALSE(logits.empty()) << file << " has no Softmax";
  for (const auto& l : p.layer())
    for (const auto& t : l.top())
      if (t == logits && l.type() != "Softmax") writer = l.name();
  const caffe::NetParameter typed = tools::TypedVariant(p, DataType::kInt8Q, Dev());
  for (bool spread : {false, true}) {
    const caffe::NetParameter weights = ZooWeights(p, spread, 11);
    Net f(p, Dev());
    f.CopyTrainedLayersFrom(weights);
    f.SetQuantMode(quant::QuantizerMode::kObserve);
    const Blob& in = *f.input_blobs()[0];
    std::mt19937 rng(19);
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    std::vector<std::vector<float>> inputs(4), want;
    for (auto& x : inputs) {
      x.resize(in.count());
      for (float& v : x) v = u(rng);
      f.input_blobs()[0]->FromFloat(x);
      f.Forward();
      want.push_back(f.blob(logits).ToFloat());
    }
    caffe::NetParameter calibrated;
    f.ToProto(&calibrated);
    struct Mode {
      const char* name;
      const char* depthwise;
      const char* all;
    };
    std::vector<Mode> modes = {{"per tensor", "0", "0"}};
    if (depthwise) modes.push_back({"depthwise per channel", "", "0"});
    modes.push_back({"every conv and IP per channel (default)", "", ""});
    for (const Mode& m : modes) {
      ScopedSettings env;
      env->depthwise_per_channel = m.depthwise;
      env->per_channel_weights = m.all;
      NetOptions keep;
      keep.keep_blobs = {logits};
      Net q(typed, Dev(), keep);
      q.CopyTrainedLayersFrom(calibrated);
      int agree = 0;
      double worst = 0, sum = 0;
      for (size_t i = 0; i < inputs.size(); ++i) {
        q.input_blobs()[0]->FromFloat(inputs[i]);
        q.Forward();
        const std::vector<float> got = Real(q, logits, writer);
        agree += std::max_element(got.begin(), got.end()) - got.begin() ==
                 std::max_element(want[i].begin(), want[i].end()) - want[i].begin();
        const double e = ErrorOverSpread(want[i], got);
        worst = std::max(worst, e);
        sum += e;
      }
      std::printf("%s int8, %s channels, %s: top-1 %d/%zu agree with fp32; |logit diff| / "
                  "spread: max %.4f, mean %.4f\n",
                  file.filename().c_str(), spread ? "spread" : "equal-size", m.name, agree,
                  inputs.size(), worst, sum / inputs.size());
      std::fflush(stdout);
    }
  }
}

TEST(PerChannelWeights, DISABLED_AlexNet) {
  MeasureZooNet(test_support::SharedDir() / "models" / "bvlc" / "bvlc_alexnet" / "deploy.prototxt");
}
TEST(PerChannelWeights, DISABLED_ResNet50) {
  MeasureZooNet(test_support::SharedDir() / "models" / "zoo" / "resnet50_deploy.prototxt");
}
TEST(PerChannelWeights, DISABLED_MobileNetV1) {
  MeasureZooNet(test_support::SharedDir() / "models" / "zoo" / "mobilenet_v1_deploy.prototxt");
}

}  // namespace
}  // namespace mpcaffe

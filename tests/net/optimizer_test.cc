// tests/net/optimizer_test.cc — the inference graph optimizer: which chains fuse (BatchNorm and
// Scale folded into a Convolution or InnerProduct, a residual Eltwise SUM and a ReLU in the
// convolution's epilogue), and that every optimized net computes what the unoptimized one does:
// fp32 within 1e-5 relative, fp16 and int8 within the rounding steps fusion removes. The user's
// parameter blobs keep the unfused weights, and folding redoes itself when they change.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <random>

#include "device/settings.h"
#include "net/net.h"
#include "proto/model_io.h"
#include "tests/testing/net_support.h"
#include "tests/testing/paths.h"
#include "tests/testing/sweep.h"
#include "tools/net_variants.h"

namespace mpcaffe {
namespace {

Device& Dev() { return DefaultDevice(); }

using test_support::NetText;
using test_support::RelativeDifference;
using test_support::SineInput;

// Two residual blocks (a full 3×3 convolution, a depthwise one, a 1×1 one whose sum with the
// block input goes through a ReLU), then an InnerProduct with a BatchNorm and Scale of its own.
const char* kBlocks = R"(
name: "blocks"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 10 dim: 9 } } }
layer { name: "c1" type: "Convolution" bottom: "data" top: "c1"
        convolution_param { num_output: 8 kernel_size: 3 pad: 1 weight_filler { type: "msra" }
                            bias_filler { type: "gaussian" std: 0.1 } } }
layer { name: "c1/bn" type: "BatchNorm" bottom: "c1" top: "c1" }
layer { name: "c1/scale" type: "Scale" bottom: "c1" top: "c1" scale_param { bias_term: true } }
layer { name: "c1/relu" type: "ReLU" bottom: "c1" top: "c1" }
layer { name: "dw" type: "Convolution" bottom: "c1" top: "dw"
        convolution_param { num_output: 8 group: 8 kernel_size: 3 pad: 1 bias_term: false
                            weight_filler { type: "msra" } } }
layer { name: "dw/bn" type: "BatchNorm" bottom: "dw" top: "dw" }
layer { name: "dw/scale" type: "Scale" bottom: "dw" top: "dw" scale_param { bias_term: true } }
layer { name: "dw/relu" type: "ReLU" bottom: "dw" top: "dw" }
layer { name: "pw" type: "Convolution" bottom: "dw" top: "pw"
        convolution_param { num_output: 8 kernel_size: 1 bias_term: false weight_filler { type: "msra" } } }
layer { name: "pw/bn" type: "BatchNorm" bottom: "pw" top: "pw" }
layer { name: "pw/scale" type: "Scale" bottom: "pw" top: "pw" scale_param { bias_term: true } }
layer { name: "sum" type: "Eltwise" bottom: "pw" bottom: "c1" top: "sum" }
layer { name: "sum/relu" type: "ReLU" bottom: "sum" top: "sum" }
layer { name: "pool" type: "Pooling" bottom: "sum" top: "pool"
        pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "c2" type: "Convolution" bottom: "sum" top: "c2"
        convolution_param { num_output: 8 kernel_size: 3 pad: 1 stride: 2 weight_filler { type: "msra" } } }
layer { name: "c2/bn" type: "BatchNorm" bottom: "c2" top: "c2/bn" }
layer { name: "c2/scale" type: "Scale" bottom: "c2/bn" top: "c2/scale" scale_param { bias_term: true } }
layer { name: "sum2" type: "Eltwise" bottom: "c2/scale" bottom: "pool" top: "sum2" }
layer { name: "fc" type: "InnerProduct" bottom: "sum2" top: "fc"
        inner_product_param { num_output: 5 weight_filler { type: "msra" } } }
layer { name: "fc/bn" type: "BatchNorm" bottom: "fc" top: "fc" }
layer { name: "fc/scale" type: "Scale" bottom: "fc" top: "fc" scale_param { bias_term: true } }
)";

caffe::NetParameter Blocks() { return NetText(kBlocks); }

/// Gives every BatchNorm and Scale of `net` random statistics and parameters (seeded; positive
/// scales so integer layers fold them), returns them as a caffemodel.
caffe::NetParameter RandomStatistics(Net& net, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mean(-0.3f, 0.3f), var(0.4f, 1.6f), gamma(0.6f, 1.4f),
      beta(-0.2f, 0.2f);
  for (const auto& l : net.layers()) {
    const std::string type = l->type();
    if (type == "BatchNorm") {
      const int c = l->param_blob(0).count();
      std::vector<float> m(c), v(c);
      for (auto& x : m) x = mean(rng);
      for (auto& x : v) x = var(rng);
      l->SetParamFromFloat(0, m);
      l->SetParamFromFloat(1, v);
      l->SetParamFromFloat(2, {1.0f});
    } else if (type == "Scale") {
      std::vector<float> g(l->param_blob(0).count()), b(l->param_blob(1).count());
      for (auto& x : g) x = gamma(rng);
      for (auto& x : b) x = beta(rng);
      l->SetParamFromFloat(0, g);
      l->SetParamFromFloat(1, b);
    }
    l->ParamsChanged();
  }
  caffe::NetParameter trained;
  net.ToProto(&trained);
  return trained;
}

/// The values of blob `output` ("" for the net's first output blob) after a forward pass at
/// optimizer level `optimize`.
std::vector<float> RunNet(const caffe::NetParameter& param, int optimize,
                       const caffe::NetParameter& trained, const std::string& output,
                       std::unique_ptr<Net>* keep = nullptr) {
  NetOptions o;
  o.optimize = optimize;
  auto net = std::make_unique<Net>(param, Dev(), o);
  net->CopyTrainedLayersFrom(trained);
  Blob& in = *net->input_blobs()[0];
  in.FromFloat(SineInput(in));
  net->Forward();
  Blob& b = output.empty() ? *net->output_blobs()[0] : net->blob(output);
  std::vector<float> out = b.ToFloat();
  if (IsQuantized(b.type())) {
    // Real values by the quantization of the blob's last writer (a quantized BatchNorm or
    // Scale at the end of an int8 net writes its output in int8).
    int writer = -1;
    for (size_t i = 0; i < net->layers().size(); ++i)
      for (const Blob* t : net->top_vecs()[i])
        if (t == &b) writer = static_cast<int>(i);
    const Affine a = AffineOf(net->layers()[writer]->TopParams(0));
    for (float& v : out) v = a.scale * (v - a.zero_point);
  }
  if (keep) *keep = std::move(net);
  return out;
}

TEST(Optimizer, PlansChainsIntoEachProducer) {
  // Level 1 (the default): chains through in-place layers; every named blob stays written.
  Net net(Blocks(), Dev());
  ASSERT_EQ(net.optimize_level(), 1);
  auto end = [](Net& n, const std::string& l) {
    return n.layer_names()[n.fusion_end(n.layer_index(l))];
  };
  EXPECT_EQ(end(net, "c1"), "c1/relu");
  EXPECT_EQ(end(net, "dw"), "dw/relu");
  EXPECT_EQ(end(net, "pw"), "pw/scale");  // the sum writes a new blob: pw stays readable
  EXPECT_EQ(end(net, "c2"), "c2");        // c2/bn is a new blob
  EXPECT_EQ(end(net, "fc"), "fc/scale");  // an InnerProduct folds; it adds no residual
  bool split = false;
  for (const auto& l : net.layers()) split |= std::string(l->type()) == "Split";
  EXPECT_TRUE(split);  // c1 feeds dw and the sum, as in BVLC

  // Level 2: also through new blobs read once, and no float Split.
  NetOptions o2;
  o2.optimize = 2;
  Net full(Blocks(), Dev(), o2);
  EXPECT_EQ(end(full, "pw"), "sum/relu");  // BatchNorm, Scale, the residual sum and its ReLU
  EXPECT_EQ(end(full, "c2"), "sum2");
  EXPECT_EQ(full.fused_into(full.layer_index("sum")), full.layer_index("pw"));
  EXPECT_EQ(full.fused_relu_of(full.layer_index("pw")), full.layer_index("sum/relu"));
  for (const auto& l : full.layers()) EXPECT_STRNE(l->type(), "Split");

  NetOptions off;
  off.optimize = 0;
  Net plain(Blocks(), Dev(), off);
  EXPECT_FALSE(plain.optimized());
  for (size_t i = 0; i < plain.layers().size(); ++i) EXPECT_EQ(plain.fused_into(int(i)), -1);

  // A blob asked to be kept is written.
  NetOptions keep = o2;
  keep.keep_blobs = {"c2/bn"};
  Net kept(Blocks(), Dev(), keep);
  EXPECT_EQ(end(kept, "c2"), "c2/bn");
}

TEST(Optimizer, Fp32MatchesTheUnoptimizedNetWithinOneInTenThousandthOfAPercent) {
  NetOptions off;
  off.optimize = 0;
  Net source(Blocks(), Dev(), off);
  const caffe::NetParameter trained = RandomStatistics(source, 7);
  std::unique_ptr<Net> fused;
  const std::vector<float> want = RunNet(Blocks(), 0, trained, "fc");
  const std::vector<float> got = RunNet(Blocks(), 2, trained, "fc", &fused);
  const double rel = RelativeDifference(got, want);
  std::printf("fp32 optimized vs unoptimized: max relative difference %.3g\n", rel);
  EXPECT_LT(rel, 1e-5);

  // The parameter blobs stay the user's: the conv's weights are the trained ones.
  const std::vector<float> w = fused->layer("c1").ParamAsFloat(0);
  const auto& saved = trained.layer(1).blobs(0).data();
  ASSERT_EQ(trained.layer(1).name(), "c1");
  ASSERT_EQ(w.size(), size_t(saved.size()));
  for (int i = 0; i < saved.size(); ++i) ASSERT_EQ(w[i], saved.Get(i));

  // The folded factors are read once: a later forward pass waits for the device nowhere
  // (a fold re-read from the device at every pass once cost MobileNet v1 270 synchronisations).
  const DeviceCounters before = GetDeviceCounters();
  fused->Forward();
  EXPECT_EQ(GetDeviceCounters().host_syncs - before.host_syncs, 0u);

  // A changed statistic re-folds: the optimized net follows the unoptimized one.
  caffe::NetParameter changed = trained;
  for (auto& l : *changed.mutable_layer())
    if (l.name() == "pw/bn")
      for (float& v : *l.mutable_blobs(1)->mutable_data()) v *= 2.5f;
  fused->CopyTrainedLayersFrom(changed);
  fused->Forward();
  const std::vector<float> again = fused->blob("fc").ToFloat();
  const std::vector<float> want_changed = RunNet(Blocks(), 0, changed, "fc");
  EXPECT_LT(RelativeDifference(again, want_changed), 1e-5);
  EXPECT_GT(RelativeDifference(again, want), 1e-3);  // the change mattered
}

TEST(Optimizer, Fp16AndInt8MatchWithinTheRoundingStepsFusionRemoves) {
  NetOptions off;
  off.optimize = 0;
  Net source(Blocks(), Dev(), off);
  caffe::NetParameter trained = RandomStatistics(source, 11);
  // Ranges for int8: an observing fp32 pass (unfused while it observes).
  {
    Net observe(Blocks(), Dev(), off);
    observe.CopyTrainedLayersFrom(trained);
    observe.SetQuantMode(quant::QuantizerMode::kObserve);
    Blob& in = *observe.input_blobs()[0];
    in.FromFloat(SineInput(in));
    observe.Forward();
    trained.Clear();
    observe.ToProto(&trained);
  }
  const std::vector<float> fp32 = RunNet(Blocks(), 0, trained, "fc");
  double scale = 0;
  for (float v : fp32) scale = std::max(scale, std::abs(double(v)));

  for (DataType t : {DataType::kFloat16, DataType::kInt8Q}) {
    if (t == DataType::kFloat16 && !Dev().info().fp16) {
      std::printf("fp16 part skipped: %s has no cl_khr_fp16\n", Dev().Describe().c_str());
      continue;
    }
    // As `mpcaffe convert` writes it (BatchNorm and Scale in int8 too).
    const caffe::NetParameter typed = tools::TypedVariant(Blocks(), t, Dev());
    std::unique_ptr<Net> net;
    const std::vector<float> unfused = RunNet(typed, 0, trained, "");
    const std::vector<float> fused = RunNet(typed, 2, trained, "", &net);
    int chains = 0;
    for (size_t i = 0; i < net->layers().size(); ++i) chains += net->fusion_end(int(i)) > int(i);
    EXPECT_GE(chains, 4) << Name(t);
    const double rel = RelativeDifference(fused, unfused), vs_fp32 = RelativeDifference(fused, fp32);
    std::printf("%s optimized vs unoptimized: %.3g of the output range (vs fp32: %.3g); %d chains\n",
                Name(t), rel, vs_fp32, chains);
    // fp16: the folded weights round once where the unfused net rounds each layer's output;
    // int8: the conv writes the chain's output directly (no int8 rounding before BatchNorm).
    EXPECT_LT(rel, t == DataType::kFloat16 ? 1e-2 : 0.05) << Name(t);
    // And both track fp32 (int8 of an 8-channel random net: a few percent of the range each
    // layer).
    EXPECT_LT(vs_fp32, t == DataType::kFloat16 ? 1e-2 : 0.25) << Name(t);
    EXPECT_LT(RelativeDifference(unfused, fp32), t == DataType::kFloat16 ? 1e-2 : 0.25) << Name(t);
  }
}

// Pre-activation blocks (DenseNet, ResNet v2): a BatchNorm that no Convolution precedes (its
// input a Concat's) takes the Scale and ReLU after it into its own kernel, in fp32 at every
// optimizer level and in the int8 net (all three in int8: one quantized kernel); the same
// values as the unfused layers, and a changed Scale composes again.
TEST(Optimizer, PreActivationBatchNormTakesItsScaleAndRelu) {
  const char* text = R"(
name: "preact"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 4 dim: 7 dim: 9 } } }
layer { name: "c0" type: "Convolution" bottom: "data" top: "c0"
        convolution_param { num_output: 6 kernel_size: 3 pad: 1 weight_filler { type: "msra" } } }
layer { name: "cat" type: "Concat" bottom: "data" bottom: "c0" top: "cat" }
layer { name: "bn" type: "BatchNorm" bottom: "cat" top: "bn" }
layer { name: "sc" type: "Scale" bottom: "bn" top: "bn" scale_param { bias_term: true } }
layer { name: "relu" type: "ReLU" bottom: "bn" top: "bn" }
layer { name: "c1" type: "Convolution" bottom: "bn" top: "c1"
        convolution_param { num_output: 5 kernel_size: 1 weight_filler { type: "msra" } } }
)";
  const caffe::NetParameter param = NetText(text);
  NetOptions off;
  off.optimize = 0;
  Net source(param, Dev(), off);
  const caffe::NetParameter trained = RandomStatistics(source, 5);
  for (int level : {1, 2}) {
    std::unique_ptr<Net> net;
    const std::vector<float> want = RunNet(param, 0, trained, "c1");
    const std::vector<float> got = RunNet(param, level, trained, "c1", &net);
    EXPECT_EQ(net->fusion_end(net->layer_index("bn")), net->layer_index("relu")) << level;
    EXPECT_LT(RelativeDifference(got, want), 1e-5) << level;
    // The ReLU ran: the fused output has no negative value (a random Scale gives some).
    const std::vector<float> bn = net->blob("bn").ToFloat();
    EXPECT_GE(*std::min_element(bn.begin(), bn.end()), 0.0f) << level;
    const std::vector<float> plain = RunNet(param, 0, trained, "bn");
    EXPECT_LT(RelativeDifference(bn, plain), 1e-5) << level;

    caffe::NetParameter changed = trained;
    for (auto& l : *changed.mutable_layer())
      if (l.name() == "sc")
        for (float& v : *l.mutable_blobs(0)->mutable_data()) v *= -0.5f;
    net->CopyTrainedLayersFrom(changed);
    net->Forward();
    EXPECT_LT(RelativeDifference(net->blob("c1").ToFloat(), RunNet(param, 0, changed, "c1")),
              1e-5)
        << level;
  }
  // int8 as `mpcaffe convert` writes it: BatchNorm, Scale and ReLU in int8, the chain runs
  // whole in the BatchNorm's quantized kernel.
  caffe::NetParameter calibrated;
  {
    Net observe(param, Dev(), off);
    observe.CopyTrainedLayersFrom(trained);
    observe.SetQuantMode(quant::QuantizerMode::kObserve);
    Blob& in = *observe.input_blobs()[0];
    in.FromFloat(SineInput(in));
    observe.Forward();
    observe.ToProto(&calibrated);
  }
  const caffe::NetParameter typed = tools::TypedVariant(param, DataType::kInt8Q, Dev());
  std::unique_ptr<Net> net;
  const std::vector<float> unfused = RunNet(typed, 0, calibrated, "");
  const std::vector<float> fused = RunNet(typed, 2, calibrated, "", &net);
  EXPECT_EQ(net->fusion_end(net->layer_index("bn")), net->layer_index("relu"));
  for (const char* l : {"bn", "sc", "relu"})
    EXPECT_EQ(net->layer(l).compute_type(), DataType::kInt8Q) << l;
  EXPECT_LT(RelativeDifference(fused, unfused), 0.05);
}

// ResNet's projection block in int8: the shortcut's BatchNorm and Scale (converted back to int8
// only for the sum, several layers later) and the last convolution's BatchNorm, Scale, sum and
// ReLU run inside the two convolutions (the conversions follow their blob's writer); the output
// matches the unfused net within the rounding steps the fusion removes.
TEST(Optimizer, Int8ProjectionShortcutFusesWhole) {
  const char* text = R"(
name: "projection"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 4 dim: 6 dim: 6 } } }
layer { name: "b1" type: "Convolution" bottom: "data" top: "b1"
        convolution_param { num_output: 8 kernel_size: 1 bias_term: false weight_filler { type: "msra" } } }
layer { name: "b1/bn" type: "BatchNorm" bottom: "b1" top: "b1" }
layer { name: "b1/scale" type: "Scale" bottom: "b1" top: "b1" scale_param { bias_term: true } }
layer { name: "b2a" type: "Convolution" bottom: "data" top: "b2a"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "msra" } } }
layer { name: "b2a/relu" type: "ReLU" bottom: "b2a" top: "b2a" }
layer { name: "b2b" type: "Convolution" bottom: "b2a" top: "b2b"
        convolution_param { num_output: 8 kernel_size: 1 bias_term: false weight_filler { type: "msra" } } }
layer { name: "b2b/bn" type: "BatchNorm" bottom: "b2b" top: "b2b" }
layer { name: "b2b/scale" type: "Scale" bottom: "b2b" top: "b2b" scale_param { bias_term: true } }
layer { name: "sum" type: "Eltwise" bottom: "b1" bottom: "b2b" top: "sum" }
layer { name: "sum/relu" type: "ReLU" bottom: "sum" top: "sum" }
)";
  NetOptions off;
  off.optimize = 0;
  Net source(NetText(text), Dev(), off);
  caffe::NetParameter trained = RandomStatistics(source, 5);
  {
    Net observe(NetText(text), Dev(), off);
    observe.CopyTrainedLayersFrom(trained);
    observe.SetQuantMode(quant::QuantizerMode::kObserve);
    Blob& in = *observe.input_blobs()[0];
    in.FromFloat(SineInput(in));
    observe.Forward();
    trained.Clear();
    observe.ToProto(&trained);
  }
  const caffe::NetParameter typed = tools::TypedVariant(NetText(text), DataType::kInt8Q, Dev());
  std::unique_ptr<Net> net;
  const std::vector<float> unfused = RunNet(typed, 0, trained, "sum");
  const std::vector<float> fused = RunNet(typed, 2, trained, "sum", &net);
  std::vector<std::string> unfused_layers;
  for (size_t i = 0; i < net->layers().size(); ++i) {
    const Layer& l = *net->layers()[i];
    const std::string type = l.type();
    if (net->fusion_end(int(i)) > int(i)) i = net->fusion_end(int(i));  // the chain runs here
    else if (type != "Convolution" && type != "Input" && type != "Quantizer" && type != "Split")
      unfused_layers.push_back(l.name());
  }
  EXPECT_TRUE(unfused_layers.empty()) << unfused_layers.size() << " layers outside the chains, "
                                      << "the first '" << unfused_layers[0] << "'";
  for (const char* name : {"b1", "b2b"})
    EXPECT_GT(net->fusion_end(net->layer_index(name)), net->layer_index(name)) << name;
  EXPECT_LT(RelativeDifference(fused, unfused), 0.05);
}

/// The model zoo's deploy nets (smaller input, random statistics): the optimized nets match.
/// MobileNet v1 (depthwise and pointwise chains); ResNet-50 too under the exhaustive sweep (its
/// residual sums are fused in the small nets above, and its 53 convolutions of distinct shapes
/// are programs of their own, compiled twice: unoptimized and fused).
TEST(Optimizer, ZooNetsMatchTheUnoptimizedNets) {
  std::vector<const char*> files = {"mobilenet_v1_deploy.prototxt"};
  if (test_support::ExhaustiveSweep()) files.push_back("resnet50_deploy.prototxt");
  for (const char* file : files) {
    const auto path = test_support::SharedDir() / "models" / "zoo" / file;
    if (!std::filesystem::exists(path)) {
      std::printf("%s skipped: %s not found\n", file, path.c_str());
      continue;
    }
    caffe::NetParameter p = ReadNetParameterText(path.string());
    if (p.input_dim_size() == 4) {
      p.set_input_dim(2, 64);
      p.set_input_dim(3, 64);
    }
    // ResNet's final 7×7 average pooling becomes the global pooling it is at 224×224; weights
    // without a filler (zero) get MSRA's.
    for (auto& l : *p.mutable_layer()) {
      if (l.type() == "Pooling" && l.pooling_param().kernel_size() == 7) {
        l.mutable_pooling_param()->clear_kernel_size();
        l.mutable_pooling_param()->set_global_pooling(true);
      }
      if (l.type() == "Convolution" && !l.convolution_param().has_weight_filler())
        l.mutable_convolution_param()->mutable_weight_filler()->set_type("msra");
      if (l.type() == "InnerProduct" && !l.inner_product_param().has_weight_filler())
        l.mutable_inner_product_param()->mutable_weight_filler()->set_type("msra");
    }
    // The logits (a softmax of random-weight logits saturates and would hide differences).
    const auto& last = p.layer(p.layer_size() - 1);
    const std::string output = last.type() == "Softmax" ? last.bottom(0) : last.top(0);
    NetOptions off;
    off.optimize = 0;
    caffe::NetParameter trained;
    {
      Net source(p, Dev(), off);
      trained = RandomStatistics(source, 3);
    }
    std::unique_ptr<Net> net;
    const std::vector<float> want = RunNet(p, 0, trained, output);
    const std::vector<float> got = RunNet(p, 2, trained, output, &net);
    int fused = 0;
    for (size_t i = 0; i < net->layers().size(); ++i) fused += net->fused_into(int(i)) >= 0;
    const double rel = RelativeDifference(got, want);
    std::printf("%s: %d of %zu layers fused; max relative difference %.3g (%s[0] = %g)\n", file,
                fused, net->layers().size(), rel, output.c_str(), got[0]);
    EXPECT_GT(fused, int(net->layers().size()) / 2) << file;
    EXPECT_LT(rel, 1e-5) << file;
  }
}

/// MobileNet v1 (the zoo's deploy net, random weights and statistics) in int8 against fp32, with
/// one int8 weight scale per depthwise layer and with one per channel: top-1 agreement, the
/// largest difference of the probabilities and of the logits (over the largest logit) on 4
/// synthetic inputs. Random fillers give every channel the same size; trained depthwise layers
/// do not, so a second variant multiplies each depthwise channel by 10^U(−1.5, 0) (its
/// BatchNorm's mean and variance follow, the fp32 net computes the same function). A
/// measurement (prints), run by hand:
///   test_net --gtest_also_run_disabled_tests --gtest_filter='*MobileNetInt8Depthwise*'
TEST(Optimizer, DISABLED_MobileNetInt8DepthwiseScales) {
  const auto path = test_support::SharedDir() / "models" / "zoo" / "mobilenet_v1_deploy.prototxt";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not found";
  const caffe::NetParameter p = ReadNetParameterText(path.string());
  caffe::NetParameter trained;
  {
    Net source(p, Dev());
    trained = RandomStatistics(source, 5);
  }
  std::mt19937 rng(19);
  std::vector<std::vector<float>> inputs(4);
  for (auto& x : inputs) {
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    x.resize(3 * 224 * 224);
    for (float& v : x) v = u(rng);
  }
  for (bool spread : {false, true}) {
    caffe::NetParameter w = trained;
    if (spread) {
      std::uniform_real_distribution<double> e(-1.5, 0.0);
      std::map<std::string, std::vector<double>> factor;  // per depthwise layer
      for (auto& l : *w.mutable_layer()) {
        const std::string& n = l.name();
        if (l.type() == "Convolution" && n.size() > 3 && n.substr(n.size() - 3) == "/dw") {
          auto* data = l.mutable_blobs(0)->mutable_data();
          std::vector<double>& f = factor[n];
          const int k = 9;
          f.resize(data->size() / k);
          for (double& v : f) v = std::pow(10.0, e(rng));
          for (int i = 0; i < data->size(); ++i) data->Set(i, float(data->Get(i) * f[i / k]));
        } else if (l.type() == "BatchNorm" && factor.count(l.bottom(0))) {
          const std::vector<double>& f = factor[l.bottom(0)];
          for (size_t c = 0; c < f.size(); ++c) {
            l.mutable_blobs(0)->set_data(int(c), float(l.blobs(0).data(int(c)) * f[c]));
            l.mutable_blobs(1)->set_data(int(c), float(l.blobs(1).data(int(c)) * f[c] * f[c]));
          }
        }
      }
    }
    // Ranges: an fp32 pass observing all 4 inputs.
    Net f(p, Dev());
    f.CopyTrainedLayersFrom(w);
    f.SetQuantMode(quant::QuantizerMode::kObserve);
    std::vector<std::vector<float>> prob, logits;
    for (const auto& x : inputs) {
      f.input_blobs()[0]->FromFloat(x);
      f.Forward();
      prob.push_back(f.blob("prob").ToFloat());
      logits.push_back(f.blob("fc7").ToFloat());
    }
    caffe::NetParameter calibrated;
    f.ToProto(&calibrated);
    const caffe::NetParameter typed = tools::TypedVariant(p, DataType::kInt8Q, Dev());
    for (const char* mode : {"0", "1"}) {
      ScopedSettings env;
      env->depthwise_per_channel = mode;
      NetOptions keep;
      keep.keep_blobs = {"fc7"};
      Net q(typed, Dev(), keep);
      q.CopyTrainedLayersFrom(calibrated);
      int agree = 0;
      double dprob = 0, dlogit = 0;
      for (size_t i = 0; i < inputs.size(); ++i) {
        q.input_blobs()[0]->FromFloat(inputs[i]);
        q.Forward();
        const std::vector<float> qp = test_support::RealValues(q, "prob"),
                                 ql = test_support::RealValues(q, "fc7");
        agree += std::max_element(qp.begin(), qp.end()) - qp.begin() ==
                 std::max_element(prob[i].begin(), prob[i].end()) - prob[i].begin();
        for (size_t k = 0; k < qp.size(); ++k)
          dprob = std::max(dprob, std::abs(double(qp[k]) - prob[i][k]));
        dlogit = std::max(dlogit, RelativeDifference(ql, logits[i]));
      }
      std::printf("MobileNet v1 int8, %s depthwise channels, depthwise weights %s: top-1 %d/%zu "
                  "agree with fp32; max |prob diff| %.4g; max |logit diff| / max |logit| %.4g\n",
                  spread ? "spread" : "equal-size", mode[0] == '0' ? "per tensor" : "per channel",
                  agree, inputs.size(), dprob, dlogit);
    }
  }
}

}  // namespace
}  // namespace mpcaffe

// tests/layers/layer_params_test.cc — BVLC parameters of existing layers with BVLC's semantics:
// Pooling STOCHASTIC (train samples, test weights by probability) and global pooling's checks,
// Eltwise PROD with stable_prod_grad false, Convolution / Deconvolution on another channel axis,
// engine ignored, loss_weight on a non-loss top and propagate_down in a net.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "layers/blob.h"
#include "layers/layer_registry.h"
#include "net/net.h"
#include "tests/testing/gradient_checker.h"
#include "tests/testing/net_support.h"

namespace mpcaffe {
namespace {

using test_support::Checker;
using test_support::ErrorOf;
using test_support::LayerText;
using test_support::NetText;

Device& Dev() { return DefaultDevice(); }

/// One fp32 layer with its blobs, set up in `phase` on a bottom of `shape` holding `x`.
struct OneLayer {
  std::unique_ptr<Layer> layer;
  Blob bottom, top;
  std::vector<Blob*> b{&bottom}, t{&top};
  OneLayer(const std::string& text, const std::vector<int>& shape, const std::vector<float>& x,
           caffe::Phase phase)
      : bottom(Dev(), DataType::kFloat32, shape, "x"), top(Dev(), DataType::kFloat32, {}, "y") {
    caffe::LayerParameter p = LayerText(text, DataType::kFloat32);
    p.set_phase(phase);
    layer = CreateLayer(p, Dev());
    bottom.FromFloat(x);
    layer->SetUp(b, t);
  }
};

constexpr char kStochastic[] =
    R"(type: "Pooling" pooling_param { pool: STOCHASTIC kernel_size: 2 stride: 2 })";

TEST(StochasticPooling, TestPhaseIsTheProbabilityWeightedAverage) {
  // Two 2x2 windows per row of a 2x4 plane, one of them all zero (BVLC's output: 0).
  const std::vector<float> x = {1, 2, 0, 0, 3, 4, 0, 0, 0.5f, 0, 2, 6, 0, 0.5f, 1, 1};
  OneLayer l(kStochastic, {1, 1, 4, 4}, x, caffe::TEST);
  l.layer->Forward(l.b, l.t);
  ASSERT_EQ(l.top.shape(), (std::vector<int>{1, 1, 2, 2}));
  const std::vector<float> y = l.top.ToFloat();
  auto weighted = [](std::vector<float> w) {
    float s = 0, q = 0;
    for (float v : w) s += v, q += v * v;
    return s > 0 ? q / s : 0.0f;
  };
  EXPECT_FLOAT_EQ(y[0], weighted({1, 2, 3, 4}));
  EXPECT_FLOAT_EQ(y[1], 0.0f);
  EXPECT_FLOAT_EQ(y[2], weighted({0.5f, 0, 0, 0.5f}));
  EXPECT_FLOAT_EQ(y[3], weighted({2, 6, 1, 1}));
}

TEST(StochasticPooling, TrainingSamplesByValueAndRoutesTheGradientToTheSample) {
  // 600 windows [1, 3] (3x1 each: 1, 3, 0): the 3 is taken with probability 3/4, never the 0.
  const int windows = 600;
  std::vector<float> x;
  for (int i = 0; i < windows; ++i) x.insert(x.end(), {1, 3, 0});
  OneLayer l(R"(type: "Pooling" pooling_param { pool: STOCHASTIC kernel_h: 3 kernel_w: 1 stride_h: 3 stride_w: 1 })",
             {1, 1, 3 * windows, 1}, x, caffe::TRAIN);
  l.layer->Forward(l.b, l.t);
  const std::vector<float> y = l.top.ToFloat();
  ASSERT_EQ(static_cast<int>(y.size()), windows);
  int threes = 0;
  for (float v : y) {
    ASSERT_TRUE(v == 1.0f || v == 3.0f) << v;
    threes += v == 3.0f;
  }
  EXPECT_NEAR(threes / double(windows), 0.75, 0.06);
  // Backward: each output's diff lands on the element it sampled, nowhere else.
  std::vector<float> dy(windows);
  for (int i = 0; i < windows; ++i) dy[i] = 0.5f + i;
  std::copy(dy.begin(), dy.end(), static_cast<float*>(l.top.mutable_host_diff()));
  l.layer->Backward(l.t, {true}, l.b);
  const float* dx = static_cast<const float*>(l.bottom.host_diff());
  for (int i = 0; i < windows; ++i) {
    const int picked = y[i] == 3.0f ? 1 : 0;
    for (int k = 0; k < 3; ++k)
      ASSERT_EQ(dx[3 * i + k], k == picked ? dy[i] : 0.0f) << "window " << i << " element " << k;
  }
  // A second pass samples anew (the layer does not replay one draw forever).
  l.layer->Forward(l.b, l.t);
  EXPECT_NE(l.top.ToFloat(), y);
}

TEST(StochasticPooling, ComputesInFloatTypesOnlyAndRefusesPadding) {
  EXPECT_FALSE(CreateLayer(LayerText(kStochastic, DataType::kInt8Q), Dev())->SupportsType(DataType::kInt8Q));
  EXPECT_FALSE(CreateLayer(LayerText(kStochastic, DataType::kInt16Q), Dev())->SupportsType(DataType::kInt16Q));
  EXPECT_TRUE(CreateLayer(LayerText(kStochastic, DataType::kFloat16), Dev())->SupportsType(DataType::kFloat16));
  EXPECT_TRUE(CreateLayer(LayerText(kStochastic, DataType::kFloat32), Dev())->SupportsType(DataType::kFloat32));
  const std::string why = ErrorOf([] {
    OneLayer(R"(name: "sp" type: "Pooling" pooling_param { pool: STOCHASTIC kernel_size: 3 pad: 1 })",
             {1, 1, 4, 4}, std::vector<float>(16, 1.0f), caffe::TEST);
  });
  EXPECT_NE(why.find("layer 'sp' (Pooling)"), std::string::npos) << why;
  EXPECT_NE(why.find("pooling_param.pad"), std::string::npos) << why;
}

TEST(GlobalPooling, RefusesPadStrideAndKernelAsBVLCDoes) {
  const std::vector<float> x(2 * 3 * 3, 1.0f);
  for (const char* bad : {"pad: 1", "stride: 2", "kernel_size: 3"}) {
    const std::string why = ErrorOf([&] {
      OneLayer(std::string(R"(name: "gp" type: "Pooling" pooling_param { pool: AVE global_pooling: true )") +
                   bad + " }",
               {1, 2, 3, 3}, x, caffe::TEST);
    });
    EXPECT_NE(why.find("layer 'gp' (Pooling)"), std::string::npos) << bad << ": " << why;
    EXPECT_NE(why.find("global_pooling"), std::string::npos) << bad << ": " << why;
  }
  OneLayer ok(R"(type: "Pooling" pooling_param { pool: MAX global_pooling: true })", {1, 2, 3, 3}, x,
              caffe::TEST);
  ok.layer->Forward(ok.b, ok.t);
  EXPECT_EQ(ok.top.shape(), (std::vector<int>{1, 2, 1, 1}));
}

TEST(Gradient, EltwiseProdUnstableGradient) {
  // stable_prod_grad false: dy·y / x_i, the same gradient away from zero inputs.
  Checker prod(R"(name: "prod" type: "Eltwise" eltwise_param { operation: PROD stable_prod_grad: false })",
               {{2, 5}, {2, 5}, {2, 5}}, 1, 11);
  prod.Check();
}

TEST(EltwiseProd, UnstableBackwardIsDyTimesTopOverBottomOnTheDevice) {
  // Against dy·y / x_i on the host, a zero input included (0/0: NaN, as BVLC's). Within 2 ulp:
  // OpenCL's division may be 2.5 ulp from the correctly rounded quotient.
  const int n = 64;
  std::vector<float> a(n), b(n);
  for (int k = 0; k < n; ++k) a[k] = 0.25f + 0.37f * k, b[k] = 1.5f - 0.11f * k;
  a[5] = 0.0f;
  Blob x0(Dev(), DataType::kFloat32, {n}, "a"), x1(Dev(), DataType::kFloat32, {n}, "b");
  Blob y(Dev(), DataType::kFloat32, {}, "y");
  x0.FromFloat(a);
  x1.FromFloat(b);
  std::vector<Blob*> bottom{&x0, &x1}, top{&y};
  auto l = CreateLayer(LayerText(R"(type: "Eltwise" eltwise_param { operation: PROD stable_prod_grad: false })",
                                 DataType::kFloat32), Dev());
  l->SetUp(bottom, top);
  l->Forward(bottom, top);
  std::vector<float> dy(n);
  for (int k = 0; k < n; ++k) dy[k] = 0.5f - 0.03f * k;
  std::copy(dy.begin(), dy.end(), static_cast<float*>(y.mutable_host_diff()));
  l->Backward(top, {true, true}, bottom);
  const std::vector<float> prod = y.ToFloat();
  for (int i = 0; i < 2; ++i) {
    const std::vector<float>& x = i ? b : a;
    const float* dx = static_cast<const float*>(bottom[i]->host_diff());
    for (int k = 0; k < n; ++k) {
      const float want = dy[k] * prod[k] / x[k];
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(dx[k])) << "bottom " << i << " element " << k;
      } else {
        EXPECT_NEAR(dx[k], want, 2 * std::abs(want) * 1.2e-7f) << "bottom " << i << " element " << k;
      }
    }
  }
}

TEST(Gradient, ConvolutionAndDeconvolutionOnChannelAxisTwo) {
  // [1][2][2][3][3]: two batch axes, channels at axis 2 (small: the Oclgrind entry runs it too).
  Checker conv(R"(name: "conv5d" type: "Convolution" convolution_param { num_output: 2
               kernel_size: 3 pad: 1 axis: 2 weight_filler { type: "gaussian" std: 0.3 }
               bias_filler { type: "gaussian" std: 0.3 } })",
               {{1, 2, 2, 3, 3}}, 1);
  EXPECT_EQ(conv.tops[0]->shape(), (std::vector<int>{1, 2, 2, 3, 3}));
  conv.Check();
  Checker deconv(R"(name: "deconv5d" type: "Deconvolution" convolution_param { num_output: 2
                 kernel_size: 2 stride: 2 axis: -3 weight_filler { type: "gaussian" std: 0.3 }
                 bias_filler { type: "gaussian" std: 0.3 } })",
                 {{2, 1, 2, 2, 2}}, 1);
  EXPECT_EQ(deconv.tops[0]->shape(), (std::vector<int>{2, 1, 2, 4, 4}));
  deconv.Check();
}

TEST(ConvolutionAxis, BatchAxesAreFlattenedAsBVLCDoes) {
  // The same weights on [2][3][2][5][5] with axis 2 and on [6][2][5][5] with axis 1.
  std::vector<float> x(2 * 3 * 2 * 5 * 5);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.3f * i);
  const std::string conv = R"(type: "Convolution" convolution_param { num_output: 3 kernel_size: 3 stride: 2
      weight_filler { type: "gaussian" std: 0.5 } bias_filler { type: "constant" value: 0.25 } )";
  OneLayer five(conv + "axis: 2 }", {2, 3, 2, 5, 5}, x, caffe::TEST);
  OneLayer four(conv + "}", {6, 2, 5, 5}, x, caffe::TEST);
  four.layer->SetParamFromFloat(0, five.layer->ParamAsFloat(0));
  five.layer->Forward(five.b, five.t);
  four.layer->Forward(four.b, four.t);
  EXPECT_EQ(five.top.shape(), (std::vector<int>{2, 3, 3, 2, 2}));
  EXPECT_EQ(five.top.ToFloat(), four.top.ToFloat());
  // Axis 1 of the same blob leaves three spatial axes: BVLC's N-d convolution (conv_nd_test.cc).
  OneLayer three(conv + "axis: 1 }", {2, 3, 2, 5, 5}, x, caffe::TEST);
  EXPECT_EQ(three.top.shape(), (std::vector<int>{2, 3, 1, 2, 2}));
  const std::string why = ErrorOf([&] { OneLayer(conv + "axis: 4 }", {2, 3, 2, 5, 5}, x, caffe::TEST); });
  EXPECT_NE(why.find("convolution_param.axis 4"), std::string::npos) << why;
}

TEST(Gradient, SoftmaxConcatSliceOnAnyAxis) {
  Checker softmax(R"(name: "sm2" type: "Softmax" softmax_param { axis: 2 })", {{2, 3, 4}}, 1);
  softmax.Check();
  Checker last(R"(name: "smlast" type: "Softmax" softmax_param { axis: -1 })", {{3, 2, 5}}, 1);
  last.Check();
  Checker cat0(R"(name: "cat0" type: "Concat" concat_param { axis: 0 })", {{1, 2, 3}, {2, 2, 3}}, 1);
  EXPECT_EQ(cat0.tops[0]->shape(), (std::vector<int>{3, 2, 3}));
  cat0.Check();
  Checker catlast(R"(name: "catlast" type: "Concat" concat_param { axis: -1 })", {{2, 2, 1}, {2, 2, 3}}, 1);
  EXPECT_EQ(catlast.tops[0]->shape(), (std::vector<int>{2, 2, 4}));
  catlast.Check();
  Checker slice0(R"(name: "slice0" type: "Slice" slice_param { axis: 0 slice_point: 1 slice_point: 3 })",
                 {{4, 2, 2}}, 3);
  EXPECT_EQ(slice0.tops[2]->shape(), (std::vector<int>{1, 2, 2}));
  slice0.Check();
}

TEST(LayerParams, AnAxisOutOfRangeNamesTheLayerAndTheField) {
  const std::vector<float> x(24, 0.5f);
  for (auto [text, field] : {std::pair{R"(name: "bad" type: "Softmax" softmax_param { axis: 3 })", "softmax_param.axis"},
                             std::pair{R"(name: "bad" type: "InnerProduct" inner_product_param { num_output: 2 axis: -4 })",
                                       "inner_product_param.axis"},
                             std::pair{R"(name: "bad" type: "Slice" slice_param { axis: 5 })", "slice_param.axis"}}) {
    const std::string why = ErrorOf([&] { OneLayer(text, {2, 3, 4}, x, caffe::TEST); });
    EXPECT_NE(why.find("layer 'bad'"), std::string::npos) << why;
    EXPECT_NE(why.find(field), std::string::npos) << why;
  }
}

TEST(LayerParams, EngineIsIgnored) {
  std::vector<float> x(2 * 3 * 6 * 6);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.2f * i);
  for (const char* layer : {R"(type: "Pooling" pooling_param { pool: MAX kernel_size: 2 stride: 2 )",
                            R"(type: "Convolution" convolution_param { num_output: 2 kernel_size: 3
                               weight_filler { type: "xavier" } )"}) {
    OneLayer plain(std::string(layer) + "}", {2, 3, 6, 6}, x, caffe::TEST);
    OneLayer cudnn(std::string(layer) + "engine: CUDNN }", {2, 3, 6, 6}, x, caffe::TEST);
    plain.layer->Forward(plain.b, plain.t);
    cudnn.layer->Forward(cudnn.b, cudnn.t);
    EXPECT_EQ(plain.top.ToFloat(), cudnn.top.ToFloat()) << layer;
  }
}

TEST(LayerParams, LossWeightOnAnyTopAndPropagateDown) {
  // loss = 2·Σ y for y = W·x + b (a plain InnerProduct top); d loss / dx_k = 2·Σ_j W_jk. The
  // Eltwise's propagate_down keeps the gradient off its first bottom.
  Net net(NetText(R"(
    layer { name: "in" type: "Input" top: "x" top: "z" input_param { shape { dim: 2 dim: 3 } shape { dim: 2 dim: 3 } } }
    layer { name: "sum" type: "Eltwise" bottom: "z" bottom: "x" top: "s" propagate_down: false propagate_down: true }
    layer { name: "ip" type: "InnerProduct" bottom: "s" top: "y" loss_weight: 2
            inner_product_param { num_output: 4 weight_filler { type: "gaussian" std: 1 }
                                  bias_filler { type: "constant" value: 0.5 } } }
    force_backward: true)"), Dev());
  const std::vector<float> x = {0.1f, -0.2f, 0.3f, 0.4f, -0.5f, 0.6f};
  net.blob("x").FromFloat(x);
  net.blob("z").FromFloat(x);
  std::fill_n(static_cast<float*>(net.blob("z").mutable_host_diff()), 6, -7.0f);
  const float loss = net.Forward();
  double expected = 0;
  for (float y : net.blob("y").ToFloat()) expected += 2.0 * y;
  EXPECT_NEAR(loss, expected, 1e-4 * std::max(1.0, std::abs(expected)));
  net.Backward();
  Layer* ip = nullptr;
  for (const auto& l : net.layers())
    if (l->name() == "ip") ip = l.get();
  ASSERT_NE(ip, nullptr);
  const std::vector<float> w = ip->ParamAsFloat(0);  // [4][3]
  const float* dx = static_cast<const float*>(net.blob("x").host_diff());
  for (int n = 0; n < 2; ++n)
    for (int k = 0; k < 3; ++k) {
      float col = 0;
      for (int j = 0; j < 4; ++j) col += w[j * 3 + k];
      EXPECT_NEAR(dx[n * 3 + k], 2.0f * col, 1e-4f) << n << "," << k;
    }
  const float* dz = static_cast<const float*>(net.blob("z").host_diff());
  // Left as it was (or cleared by the net), never the Eltwise's gradient, which equals dx.
  for (int i = 0; i < 6; ++i) {
    EXPECT_TRUE(dz[i] == -7.0f || dz[i] == 0.0f) << i << ": " << dz[i];
    EXPECT_NE(dz[i], dx[i]) << "propagate_down false: bottom 0 got the gradient";
  }
}

TEST(LayerParams, ANameTwiceIsAcceptedAsBVLCDoesUnlessWeightsAreMatchedByIt) {
  // BVLC's examples/mnist/mnist_autoencoder.prototxt names two loss layers "loss".
  Net net(NetText(R"(
    layer { name: "in" type: "Input" top: "a" top: "b" input_param { shape { dim: 2 dim: 3 } shape { dim: 2 dim: 3 } } }
    layer { name: "loss" type: "EuclideanLoss" bottom: "a" bottom: "b" top: "l2" }
    layer { name: "loss" type: "EuclideanLoss" bottom: "b" bottom: "a" top: "l2b" loss_weight: 0 })"), Dev());
  net.blob("a").FromFloat({1, 2, 3, 4, 5, 6});
  net.blob("b").FromFloat({1, 2, 3, 4, 5, 8});
  EXPECT_FLOAT_EQ(net.Forward(), 1.0f);  // Σ (a − b)² / (2 N) = 4 / 4
  const std::string why = ErrorOf([] {
    Net twice(NetText(R"(
      layer { name: "in" type: "Input" top: "a" input_param { shape { dim: 2 dim: 3 } } }
      layer { name: "ip" type: "InnerProduct" bottom: "a" top: "b" inner_product_param { num_output: 2 } }
      layer { name: "ip" type: "InnerProduct" bottom: "b" top: "c" inner_product_param { num_output: 2 } })"), Dev());
  });
  EXPECT_NE(why.find("layer name 'ip' is used twice"), std::string::npos) << why;
}

}  // namespace
}  // namespace mpcaffe

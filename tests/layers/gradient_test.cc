// tests/layers/gradient_test.cc — finite-difference gradient checks of every fp32 layer backward
// (BVLC's checker: objective Σ c·top with fixed random c, central differences with step 1e-2,
// |analytic − numeric| ≤ threshold · max(|analytic|, |numeric|, 1)), BatchNorm's statistics and
// the Quantizer's straight-through gradient.
#include <gtest/gtest.h>
#include <google/protobuf/text_format.h>

#include <cmath>
#include <memory>
#include <random>

#include "layers/blob.h"
#include "layers/layer_registry.h"
#include "tests/testing/gradient_checker.h"

namespace mpcaffe {
namespace {

using test_support::Checker;
using test_support::Parse;
Device& Dev() { return DefaultDevice(); }

TEST(Gradient, InnerProduct) {
  Checker c(R"(name: "ip" type: "InnerProduct" inner_product_param { num_output: 3
            weight_filler { type: "gaussian" std: 0.5 } bias_filler { type: "uniform" min: -1 max: 1 } })",
            {{2, 2, 2, 1}}, 1);
  c.Check();
}

TEST(Gradient, InnerProductTransposed) {
  Checker c(R"(name: "ipt" type: "InnerProduct" inner_product_param { num_output: 2 transpose: true
            weight_filler { type: "xavier" } bias_filler { type: "constant" value: 0.5 } })",
            {{3, 4}}, 1);
  c.Check();
}

TEST(Gradient, ConvolutionStridePadGroupsDilation) {
  Checker c(R"(name: "conv" type: "Convolution" convolution_param { num_output: 4 kernel_size: 3
            stride: 2 pad: 1 group: 2 weight_filler { type: "gaussian" std: 0.3 }
            bias_filler { type: "gaussian" std: 0.3 } })",
            {{2, 2, 5, 5}}, 1);
  c.Check();
  Checker d(R"(name: "dil" type: "Convolution" convolution_param { num_output: 2 kernel_size: 2
            dilation: 2 weight_filler { type: "msra" } bias_term: false })",
            {{1, 3, 5, 4}}, 1);
  d.Check();
}

TEST(Gradient, DeconvolutionStridePadGroupsDilation) {
  Checker c(R"(name: "deconv" type: "Deconvolution" convolution_param { num_output: 4
            kernel_size: 3 stride: 2 pad: 1 group: 2 weight_filler { type: "gaussian" std: 0.3 }
            bias_filler { type: "gaussian" std: 0.3 } })",
            {{2, 2, 3, 3}}, 1);
  c.Check();
  Checker d(R"(name: "updil" type: "Deconvolution" convolution_param { num_output: 2
            kernel_h: 2 kernel_w: 3 stride_w: 2 dilation: 2 weight_filler { type: "msra" }
            bias_term: false })",
            {{1, 3, 3, 2}}, 1);
  d.Check();
}

TEST(Gradient, Im2col) {
  Checker c(R"(name: "cols" type: "Im2col" convolution_param { kernel_size: 3 stride: 2 pad: 1 })",
            {{2, 2, 4, 5}}, 1);
  c.Check();
  Checker d(R"(name: "dcols" type: "Im2col" convolution_param { kernel_h: 2 kernel_w: 1
            dilation: 2 pad_w: 1 })",
            {{1, 3, 4, 3}}, 1);
  d.Check();
}

TEST(Gradient, PoolingMaxAndAverage) {
  Checker m(R"(name: "pmax" type: "Pooling" pooling_param { pool: MAX kernel_size: 3 stride: 2 })",
            {{2, 2, 5, 5}}, 1);
  // Distinct values 0.05 apart, so no window's maximum changes within a finite-difference step.
  std::vector<float> v(100);
  for (int i = 0; i < 100; ++i) v[i] = 0.05f * ((i * 37) % 100) - 2.5f;
  m.SetBottom(0, v);
  m.Check();
  Checker a(R"(name: "pave" type: "Pooling" pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 })",
            {{1, 2, 5, 5}}, 1);
  a.Check();
  // A TEST-phase layer keeps no argmax (its forward is the maskless vector kernel for rows of
  // 8 or more outputs); its Backward runs the forward again with the mask.
  Checker t(R"(name: "ptest" type: "Pooling" pooling_param { pool: MAX kernel_size: 2 stride: 1 })",
            {{1, 2, 4, 10}}, 1, 5, caffe::TEST);
  std::vector<float> w(80);
  for (int i = 0; i < 80; ++i) w[i] = 0.05f * ((i * 37) % 80) - 2.0f;
  t.SetBottom(0, w);
  t.Check();
}

TEST(Gradient, SPP) {
  // Three levels (1, 2 and 4 bins a side) over 6×7: the split's diffs add up at the bottom.
  Checker m(R"(name: "sppmax" type: "SPP" spp_param { pyramid_height: 3 pool: MAX })",
            {{2, 2, 6, 7}}, 1);
  std::vector<float> v(168);
  for (int i = 0; i < 168; ++i) v[i] = 0.05f * ((i * 37) % 168) - 4.0f;
  m.SetBottom(0, v);
  m.Check();
  Checker a(R"(name: "sppave" type: "SPP" spp_param { pyramid_height: 2 pool: AVE })",
            {{1, 3, 5, 4}}, 1);
  a.Check();
  Checker t(R"(name: "spptest" type: "SPP" spp_param { pyramid_height: 2 })", {{1, 2, 4, 4}}, 1, 5,
            caffe::TEST);
  std::vector<float> w(32);
  for (int i = 0; i < 32; ++i) w[i] = 0.05f * ((i * 13) % 32) - 1.0f;
  t.SetBottom(0, w);
  t.Check();
}

TEST(Gradient, Activations) {
  Checker relu(R"(name: "relu" type: "ReLU" relu_param { negative_slope: 0.1 })", {{2, 3, 4}}, 1);
  relu.Check();
  Checker sig(R"(name: "sig" type: "Sigmoid")", {{2, 3, 4}}, 1);
  sig.Check();
  Checker tanh(R"(name: "tanh" type: "TanH")", {{2, 3, 4}}, 1);
  tanh.Check();
}

/// Values in ±[0.15, 1]: at least 0.15 from the kinks at 0 (AbsVal, ELU, PReLU) and, for Clip's
/// bounds ±0.5, the values closer than 0.05 to them are moved away.
std::vector<float> AwayFromKinks(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.15f, 1.0f);
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) {
    float x = u(rng) * (i % 2 ? -1.0f : 1.0f);
    if (std::fabs(std::fabs(x) - 0.5f) < 0.05f) x *= 1.25f;
    v[i] = x;
  }
  return v;
}

TEST(Gradient, ActivationFamily) {
  for (const char* proto : {
           R"(name: "abs" type: "AbsVal")",
           R"(name: "bnll" type: "BNLL")",
           R"(name: "clip" type: "Clip" clip_param { min: -0.5 max: 0.5 })",
           R"(name: "elu" type: "ELU" elu_param { alpha: 0.5 })",
           R"(name: "exp" type: "Exp" exp_param { base: 2 scale: 0.7 shift: 0.3 })",
           R"(name: "log" type: "Log" log_param { scale: 0.5 shift: 2 })",
           R"(name: "pow" type: "Power" power_param { power: 1.7 scale: 0.5 shift: 2 })",
           R"(name: "sq" type: "Power" power_param { power: 2 scale: -1 shift: 0.2 })",
           R"(name: "swish" type: "Swish" swish_param { beta: 1.5 })"}) {
    Checker c(proto, {{2, 3, 4}}, 1);
    c.SetBottom(0, AwayFromKinks(24, 3));
    c.Check();
  }
  // Threshold is a step: like BVLC, no backward pass.
  EXPECT_FALSE(CreateLayer(Parse(R"(name: "th" type: "Threshold")"), Dev())->HasBackward());
}

TEST(Gradient, PReLUSlopesAndBias) {
  Checker pc(R"(name: "prelu" type: "PReLU" prelu_param { filler { type: "uniform" min: -0.5 max: 0.5 } })",
             {{2, 3, 2, 2}}, 1);
  pc.SetBottom(0, AwayFromKinks(24, 4));
  pc.Check();
  Checker ps(R"(name: "prelu_s" type: "PReLU" prelu_param { channel_shared: true })", {{2, 3, 4}}, 1);
  ps.SetBottom(0, AwayFromKinks(24, 5));
  ps.Check();
  Checker b(R"(name: "bias" type: "Bias" bias_param { axis: 1 num_axes: -1
            filler { type: "gaussian" std: 1 } })", {{2, 3, 2}}, 1);
  b.Check();
  Checker b2(R"(name: "bias2" type: "Bias" bias_param { axis: 0 })", {{2, 3, 2}, {2, 3}}, 1);
  b2.Check();
}

// In place (top = bottom) an fp32 layer whose gradient reads x keeps x: the same bottom gradient
// and slope gradient as out of place.
TEST(Gradient, ActivationsInPlaceMatchOutOfPlace) {
  for (const char* proto : {R"(name: "abs" type: "AbsVal")", R"(name: "elu" type: "ELU")",
                            R"(name: "prelu" type: "PReLU")"}) {
    const std::vector<float> x = AwayFromKinks(12, 6), dy = AwayFromKinks(12, 7);
    std::vector<std::vector<float>> grads;
    for (bool in_place : {false, true}) {
      caffe::LayerParameter p = Parse(proto);
      p.set_phase(caffe::TRAIN);
      auto layer = CreateLayer(p, Dev());
      Blob bottom(Dev(), DataType::kFloat32, {2, 3, 2}, "x"), top(Dev(), DataType::kFloat32, {}, "y");
      bottom.FromFloat(x);
      Blob* t = in_place ? &bottom : &top;
      layer->SetUp({&bottom}, {t});
      layer->Forward({&bottom}, {t});
      std::copy(dy.begin(), dy.end(), static_cast<float*>(t->mutable_host_diff()));
      if (layer->num_params()) std::fill_n(static_cast<float*>(layer->blobs()[0]->mutable_host_diff()), 3, 0.0f);
      layer->Backward({t}, {true}, {&bottom});
      const float* d = static_cast<const float*>(bottom.host_diff());
      grads.emplace_back(d, d + 12);
      if (layer->num_params()) {
        const float* s = static_cast<const float*>(layer->blobs()[0]->host_diff());
        grads.back().insert(grads.back().end(), s, s + 3);
      }
    }
    ASSERT_EQ(grads[0].size(), grads[1].size()) << proto;
    for (size_t i = 0; i < grads[0].size(); ++i)
      EXPECT_NEAR(grads[0][i], grads[1][i], 1e-6f) << proto << " [" << i << "]";
  }
  // In place without a Forward there is no x to differentiate at: an error, not a crash.
  auto layer = CreateLayer(Parse(R"(name: "abs" type: "AbsVal")"), Dev());
  Blob x(Dev(), DataType::kFloat32, {2, 3}, "x");
  layer->SetUp({&x}, {&x});
  EXPECT_THROW(layer->Backward({&x}, {true}, {&x}), LayerError);
}

TEST(Gradient, Softmax) {
  Checker c(R"(name: "sm" type: "Softmax")", {{2, 4, 2, 1}}, 1);
  c.Check();
}

TEST(Gradient, SoftmaxWithLoss) {
  Checker c(R"(name: "loss" type: "SoftmaxWithLoss")", {{3, 5}, {3}}, 1);
  c.SetBottom(1, {0, 4, 2});
  c.check_bottom[1] = false;
  c.Check();
  Checker ig(R"(name: "loss_ig" type: "SoftmaxWithLoss" loss_param { ignore_label: 1 normalization: VALID })",
             {{2, 3, 2, 2}, {2, 1, 2, 2}}, 1);
  ig.SetBottom(1, {0, 1, 2, 1, 1, 0, 2, 2});
  ig.check_bottom[1] = false;
  ig.Check();
}

TEST(Gradient, SigmoidCrossEntropyLoss) {
  Checker c(R"(name: "sce" type: "SigmoidCrossEntropyLoss" loss_param { ignore_label: 2 })",
            {{2, 3, 2}, {2, 3, 2}}, 1);
  std::vector<float> targets(12);
  for (int i = 0; i < 12; ++i) targets[i] = i % 4 == 3 ? 2.0f : (i % 3) * 0.5f;
  c.SetBottom(1, targets);
  c.check_bottom[1] = false;
  c.Check();
}

TEST(Gradient, EuclideanLoss) {
  Checker c(R"(name: "l2" type: "EuclideanLoss")", {{3, 4}, {3, 4}}, 1);
  c.Check();
}

// Scores in (−0.9, 0.9) keep 1 ± x off the hinge's kink at 0 by more than the step.
TEST(Gradient, HingeLossL1AndL2) {
  for (const char* proto : {R"(name: "hinge" type: "HingeLoss")",
                            R"(name: "hinge" type: "HingeLoss" hinge_loss_param { norm: L2 })"}) {
    Checker c(proto, {{3, 5}, {3}}, 1);
    std::vector<float> x(15);
    for (int i = 0; i < 15; ++i) x[i] = -0.85f + 0.12f * ((i * 7) % 15);
    c.SetBottom(0, x);
    c.SetBottom(1, {4, 0, 2});
    c.check_bottom[1] = false;
    c.Check();
  }
}

TEST(Gradient, MultinomialLogisticLoss) {
  Checker c(R"(name: "mll" type: "MultinomialLogisticLoss")", {{3, 4}, {3}}, 1);
  std::vector<float> p(12);
  for (int i = 0; i < 12; ++i) p[i] = 0.3f + 0.05f * ((i * 5) % 12);
  c.SetBottom(0, p);
  c.SetBottom(1, {1, 3, 0});
  c.check_bottom[1] = false;
  c.Check();
}

TEST(Gradient, ContrastiveLossBothVersions) {
  for (
      const char* proto :
      {R"(name: "contrastive" type: "ContrastiveLoss" contrastive_loss_param { margin: 1.5 })",
       R"(name: "contrastive" type: "ContrastiveLoss" contrastive_loss_param { margin: 2 legacy_version: true })"}) {
    Checker c(proto, {{6, 3, 1, 1}, {6, 3, 1, 1}, {6, 1, 1, 1}}, 1);
    c.SetBottom(2, {1, 0, 0, 1, 0, 0});
    c.check_bottom[2] = false;
    c.Check();
  }
}

TEST(Gradient, InfogainLoss) {
  Checker c(R"(name: "ig" type: "InfogainLoss" loss_param { ignore_label: 2 })",
            {{2, 3, 2, 2}, {2, 1, 2, 2}, {3, 3}}, 1);
  c.SetBottom(1, {0, 1, 2, 1, 2, 0, 0, 1});
  c.SetBottom(2, {1.0f, 0.5f, 0.25f, 0.0f, 2.0f, 0.25f, 0.75f, 0.5f, 1.5f});
  c.check_bottom[1] = false;
  c.check_bottom[2] = false;
  c.Check();
  Checker s(
      R"(name: "ig" type: "InfogainLoss" infogain_loss_param { axis: 2 } loss_param { normalization: FULL })",
      {{2, 1, 3, 2}, {2, 2}, {3, 3}}, 1);
  s.SetBottom(1, {2, 0, 1, 1});
  s.check_bottom[1] = false;
  s.check_bottom[2] = false;
  s.Check();
}

TEST(Gradient, ParameterAccumulatesTheTopDiff) {
  Checker c(R"(name: "p" type: "Parameter" parameter_param { shape { dim: 2 dim: 3 } })", {}, 1);
  c.layer->blobs()[0]->FromFloat({0.5f, -1.0f, 0.25f, 2.0f, -0.5f, 1.5f});
  c.Check();
}

TEST(Gradient, DropoutTrainUsesTheForwardMask) {
  Checker c(R"(name: "drop" type: "Dropout" dropout_param { dropout_ratio: 0.4 })", {{4, 25}}, 1);
  c.layer->Forward(c.bvec, c.tvec);
  const std::vector<float> x = c.bvec[0]->ToFloat(), y = c.tvec[0]->ToFloat();
  std::vector<float> dy(y.size());
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = 0.5f + i;
  std::copy(dy.begin(), dy.end(), static_cast<float*>(c.tvec[0]->mutable_host_diff()));
  c.layer->Backward(c.tvec, {true}, c.bvec);
  const float* dx = static_cast<const float*>(c.bvec[0]->host_diff());
  int dropped = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    if (y[i] == 0.0f) {
      ++dropped;
      EXPECT_EQ(dx[i], 0.0f) << i;
    } else {
      EXPECT_NEAR(y[i], x[i] / 0.6f, 1e-5);
      EXPECT_NEAR(dx[i], dy[i] / 0.6f, 1e-4) << i;
    }
  }
  EXPECT_GT(dropped, 20);
  EXPECT_LT(dropped, 60);
  Checker test(R"(name: "dropt" type: "Dropout")", {{2, 3}}, 1, 5, caffe::TEST);
  test.Check();
}

TEST(Gradient, StructureLayers) {
  Checker cat(R"(name: "cat" type: "Concat" concat_param { axis: 1 })", {{2, 2, 3}, {2, 3, 3}}, 1);
  cat.Check();
  Checker slice(R"(name: "slice" type: "Slice" slice_param { axis: -1 slice_point: 1 })", {{2, 3, 3}}, 2);
  slice.Check();
  Checker split(R"(name: "split" type: "Split")", {{2, 3}}, 3);
  split.Check();
  Checker flat(R"(name: "flat" type: "Flatten")", {{2, 3, 2}}, 1);
  flat.Check();
  Checker re(R"(name: "re" type: "Reshape" reshape_param { shape { dim: 3 dim: -1 } })", {{2, 3, 2}}, 1);
  re.Check();
}

// Crop: bottom 1 only gives the shape (no gradient, as in BVLC's test); Tile; Reduction.
TEST(Gradient, CropTileReduction) {
  Checker crop(R"(name: "crop" type: "Crop" crop_param { axis: 1 offset: 1 offset: 0 })",
               {{2, 3, 4}, {2, 2, 2}}, 1);
  crop.check_bottom[1] = false;
  crop.Check();
  Checker tile(R"(name: "tile" type: "Tile" tile_param { axis: 1 tiles: 3 })", {{2, 2, 2}}, 1);
  tile.Check();
  for (const char* op : {"SUM", "ASUM", "SUMSQ", "MEAN"}) {
    Checker r(std::string(R"(name: "red" type: "Reduction" reduction_param {
                axis: 1 coeff: 0.5 operation: )") + op + " }",
              {{3, 2, 3}}, 1);
    r.Check();
  }
}

// Filter (a selection set before the check: rows 1 and 2 of 4 pass, the others get zero
// diffs), BatchReindex (a repeated row and a row left out: summed and zero diffs) and Embed
// (weights and bias; repeated indices sum into one weight row). Indices get no gradient (BVLC).
TEST(Gradient, FilterBatchReindexEmbed) {
  Checker filter(R"(name: "filter" type: "Filter")", {{4, 3}, {4, 2, 1}, {4, 1}}, 2);
  filter.SetBottom(2, {0, 1, 0.5f, 0});
  filter.layer->Reshape(filter.bvec, filter.tvec);
  filter.check_bottom[2] = false;
  filter.Check();
  EXPECT_EQ(filter.tvec[0]->shape(0), 2);
  Checker reindex(R"(name: "reindex" type: "BatchReindex")", {{3, 2, 2}, {4}}, 1);
  reindex.SetBottom(1, {2, 0, 2, 2});
  reindex.check_bottom[1] = false;
  reindex.Check();
  Checker embed(R"(name: "embed" type: "Embed" embed_param { num_output: 3 input_dim: 4
                weight_filler { type: "gaussian" std: 1 } bias_filler { type: "gaussian" std: 1 } })",
                {{2, 3}}, 1);
  embed.SetBottom(0, {3, 1, 1, 0, 3, 3});
  embed.check_bottom[0] = false;
  embed.Check();
}

// MVN per channel with the variance, across channels without it.
TEST(Gradient, MVN) {
  Checker c(R"(name: "mvn" type: "MVN")", {{2, 2, 6}}, 1);
  c.Check();
  Checker a(R"(name: "mvn_a" type: "MVN"
                mvn_param { across_channels: true normalize_variance: false })",
            {{2, 2, 3}}, 1);
  a.Check();
}

TEST(Gradient, Eltwise) {
  Checker sum(R"(name: "sum" type: "Eltwise" eltwise_param { operation: SUM coeff: 2 coeff: -0.5 })",
              {{2, 5}, {2, 5}}, 1);
  sum.Check();
  Checker prod(R"(name: "prod" type: "Eltwise" eltwise_param { operation: PROD })",
               {{2, 5}, {2, 5}, {2, 5}}, 1);
  prod.Check();
  Checker max(R"(name: "max" type: "Eltwise" eltwise_param { operation: MAX })", {{2, 5}, {2, 5}}, 1, 7);
  max.Check();
}

TEST(Gradient, LRN) {
  Checker c(R"(name: "lrn" type: "LRN" lrn_param { local_size: 3 alpha: 0.5 beta: 0.75 })",
            {{2, 5, 2, 2}}, 1);
  c.Check();
  Checker w(R"(name: "lrn_w" type: "LRN" lrn_param { local_size: 3 alpha: 0.5 beta: 0.75
            norm_region: WITHIN_CHANNEL })", {{1, 2, 3, 4}}, 1);
  w.Check();
}

TEST(Gradient, Scale) {
  Checker p(R"(name: "scale" type: "Scale" scale_param { axis: 1 num_axes: 1 bias_term: true
            filler { type: "uniform" min: 0.5 max: 1.5 } bias_filler { type: "gaussian" std: 1 } })",
            {{2, 3, 2}}, 1);
  p.Check();
  Checker two(R"(name: "scale2" type: "Scale" scale_param { axis: 0 })", {{2, 3, 2}, {2, 3}}, 1);
  two.Check();
}

TEST(Gradient, BatchNormTrainBatchStatistics) {
  Checker c(R"(name: "bn" type: "BatchNorm")", {{3, 2, 2, 2}}, 1);
  c.Check();
  Checker flat(R"(name: "bn2" type: "BatchNorm" batch_norm_param { eps: 0.001 })", {{5, 3}}, 1, 11);
  flat.Check();
}

// BVLC's moving averages in TRAIN and the global statistics they give in TEST, against host
// arithmetic (mean, biased variance per channel over num × spatial).
TEST(Gradient, BatchNormMovingAveragesAndGlobalStatistics) {
  const int num = 4, channels = 3, inner = 2, m = num * inner;
  const float maf = 0.9f, eps = 1e-5f;
  Checker c(R"(name: "bn" type: "BatchNorm" batch_norm_param { moving_average_fraction: 0.9 eps: 1e-5 })",
            {{num, channels, inner}}, 1, 21);
  const std::vector<float> x = c.bvec[0]->ToFloat();
  std::vector<double> mean(channels, 0), var(channels, 0);
  auto at = [&](int n, int ch, int i) { return (n * channels + ch) * inner + i; };
  for (int ch = 0; ch < channels; ++ch) {
    for (int n = 0; n < num; ++n)
      for (int i = 0; i < inner; ++i) mean[ch] += x[at(n, ch, i)] / m;
    for (int n = 0; n < num; ++n)
      for (int i = 0; i < inner; ++i) var[ch] += std::pow(x[at(n, ch, i)] - mean[ch], 2) / m;
  }
  c.layer->Forward(c.bvec, c.tvec);
  c.layer->Forward(c.bvec, c.tvec);
  const std::vector<float> y = c.tvec[0]->ToFloat();
  for (int n = 0; n < num; ++n)
    for (int ch = 0; ch < channels; ++ch)
      for (int i = 0; i < inner; ++i)
        EXPECT_NEAR(y[at(n, ch, i)], (x[at(n, ch, i)] - mean[ch]) / std::sqrt(var[ch] + eps), 1e-4);
  const float sf = maf * 1.0f + 1.0f;  // two forwards from 0: (0·maf + 1)·maf + 1
  const std::vector<float> b0 = c.layer->ParamAsFloat(0), b1 = c.layer->ParamAsFloat(1),
                           b2 = c.layer->ParamAsFloat(2);
  EXPECT_NEAR(b2[0], sf, 1e-6);
  for (int ch = 0; ch < channels; ++ch) {
    EXPECT_NEAR(b0[ch], mean[ch] * sf, 1e-5) << ch;
    EXPECT_NEAR(b1[ch], var[ch] * m / (m - 1) * sf, 1e-5) << ch;
  }
  // TEST phase (use_global_stats by default) with those blobs: y = (x − b0/b2)/√(b1/b2 + eps),
  // dx = dy/√(b1/b2 + eps).
  Checker t(R"(name: "bn" type: "BatchNorm" batch_norm_param { eps: 1e-5 })", {{num, channels, inner}},
            1, 21, caffe::TEST);
  for (int j = 0; j < 3; ++j) t.layer->blobs()[j]->FromFloat(c.layer->ParamAsFloat(j));
  t.layer->ParamsChanged();
  t.layer->Forward(t.bvec, t.tvec);
  const std::vector<float> yt = t.tvec[0]->ToFloat();
  std::vector<float> dy(yt.size());
  for (size_t k = 0; k < dy.size(); ++k) dy[k] = 0.25f * k - 1.0f;
  std::copy(dy.begin(), dy.end(), static_cast<float*>(t.tvec[0]->mutable_host_diff()));
  t.layer->Backward(t.tvec, {true}, t.bvec);
  const float* dx = static_cast<const float*>(t.bvec[0]->host_diff());
  for (int n = 0; n < num; ++n)
    for (int ch = 0; ch < channels; ++ch)
      for (int i = 0; i < inner; ++i) {
        const double a = 1.0 / std::sqrt(b1[ch] / b2[0] + eps);
        EXPECT_NEAR(yt[at(n, ch, i)], (x[at(n, ch, i)] - b0[ch] / b2[0]) * a, 1e-4);
        EXPECT_NEAR(dx[at(n, ch, i)], dy[at(n, ch, i)] * a, 1e-4);
      }
}

/// Sequence-continuation flags of T steps × N streams: 0 at the first step of every stream and
/// at step `restart` of stream 0 (a second sequence), else 1.
std::vector<float> ContFlags(int T, int N, int restart) {
  std::vector<float> cont(T * N, 1.0f);
  for (int n = 0; n < N; ++n) cont[n] = 0.0f;
  if (restart > 0 && restart < T) cont[restart * N] = 0.0f;
  return cont;
}

TEST(Gradient, LSTMUnit) {
  // c_prev 1 × 3 × 2, gate inputs 1 × 3 × 8, cont 1 × 3 (one stream restarts: f = 0).
  Checker c(R"(name: "unit" type: "LSTMUnit")", {{1, 3, 2}, {1, 3, 8}, {1, 3}}, 2);
  c.SetBottom(2, {1.0f, 0.0f, 1.0f});
  c.check_bottom[2] = false;
  c.Check();
}

// BVLC's recurrent tests, smaller: T = 3 steps of N = 2 streams, cont 0 at each stream's first step
// and a second sequence in stream 0 from step 2, x_static as the third bottom.
TEST(Gradient, LSTM) {
  const char* proto = R"(name: "lstm" type: "LSTM" recurrent_param { num_output: 2
      weight_filler { type: "uniform" min: -0.5 max: 0.5 }
      bias_filler { type: "uniform" min: -0.5 max: 0.5 } })";
  Checker c(proto, {{3, 2, 2}, {3, 2}, {2, 2}}, 1, 7);
  c.SetBottom(1, ContFlags(3, 2, 2));
  c.check_bottom[1] = false;
  c.Check();
}

TEST(Gradient, LSTMExposedHidden) {
  // Bottoms x, cont, h_0, c_0; tops h, h_T, c_T: gradients from the final states and to the
  // initial ones (cont 1 throughout, so the initial states count).
  Checker c(R"(name: "lstmh" type: "LSTM" recurrent_param { num_output: 2 expose_hidden: true
      weight_filler { type: "uniform" min: -0.5 max: 0.5 }
      bias_filler { type: "uniform" min: -0.5 max: 0.5 } })",
            {{2, 2, 2}, {2, 2}, {1, 2, 2}, {1, 2, 2}}, 3);
  c.SetBottom(1, std::vector<float>(4, 1.0f));
  c.check_bottom[1] = false;
  c.Check();
}

TEST(Gradient, RNN) {
  const char* proto = R"(name: "rnn" type: "RNN" recurrent_param { num_output: 2
      weight_filler { type: "uniform" min: -0.5 max: 0.5 }
      bias_filler { type: "uniform" min: -0.5 max: 0.5 } })";
  Checker c(proto, {{3, 2, 2}, {3, 2}}, 1);
  c.SetBottom(1, ContFlags(3, 2, 2));
  c.check_bottom[1] = false;
  c.Check();
  Checker h(R"(name: "rnnh" type: "RNN" recurrent_param { num_output: 2 expose_hidden: true
      weight_filler { type: "uniform" min: -0.5 max: 0.5 }
      bias_filler { type: "uniform" min: -0.5 max: 0.5 } })",
            {{2, 2, 2}, {2, 2}, {2, 2}, {1, 2, 2}}, 2, 11);  // with x_static
  h.SetBottom(1, std::vector<float>(4, 1.0f));
  h.check_bottom[1] = false;
  h.Check();
}

TEST(Gradient, QuantizerFloatToFloatIsStraightThrough) {
  Checker c(R"(name: "q" type: "Quantizer" bottom_data_type: CAFFE_FLOAT top_data_type: CAFFE_FLOAT)",
            {{2, 3}}, 1);
  c.Check();
  // Training runs in fp32: a converting Quantizer has no backward pass.
  EXPECT_FALSE(CreateLayer(Parse(R"(name: "qh" type: "Quantizer" bottom_data_type: CAFFE_FLOAT
                                    top_data_type: CAFFE_HALF)"), Dev())->HasBackward());
}

TEST(Gradient, ErrorsNameTheLayer) {
  Checker c(R"(name: "acc" type: "Accuracy")", {{2, 3}, {2}}, 1);
  c.SetBottom(1, {0, 2});
  c.layer->Forward(c.bvec, c.tvec);
  try {
    c.layer->Backward(c.tvec, {true, false}, c.bvec);
    FAIL();
  } catch (const LayerError& e) {
    EXPECT_NE(std::string(e.what()).find("acc"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mpcaffe

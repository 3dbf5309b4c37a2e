// tests/layers/index_layers_test.cc — Filter, BatchReindex and Embed (layers/index_layers.cc) in
// each of their data types against plain C++ references (quantized: exact stored values, tops
// with the bottoms' ranges), their parameter and index errors, and a small net of the family.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "layers/blob.h"
#include "layers/layer_registry.h"
#include "net/net.h"
#include "proto/model_io.h"
#include "tests/testing/net_support.h"

namespace mpcaffe {
namespace {

Device& Dev() { return DefaultDevice(); }

caffe::LayerParameter Param(const std::string& text, DataType t) {
  return test_support::LayerText(text, t);
}

void SetRange(caffe::LayerParameter* p, bool bottom, int i, double lo, double hi) {
  auto* list = bottom ? p->mutable_bottom_quantizer() : p->mutable_top_quantizer();
  while (list->size() <= i) list->Add();
  list->Mutable(i)->set_observed_min(lo);
  list->Mutable(i)->set_observed_max(hi);
}

/// A layer with owned bottoms (of the given shapes, filled by the caller) and tops.
struct IndexRun {
  std::unique_ptr<Layer> layer;
  std::vector<std::unique_ptr<Blob>> store;
  std::vector<Blob*> bottom, top;
  IndexRun(const caffe::LayerParameter& p, const std::vector<std::vector<int>>& shapes, int tops) {
    layer = CreateLayer(p, Dev());
    for (size_t i = 0; i < shapes.size(); ++i) {
      store.push_back(std::make_unique<Blob>(Dev(), layer->bottom_type(int(i)), shapes[i]));
      bottom.push_back(store.back().get());
    }
    for (int i = 0; i < tops; ++i) {
      store.push_back(std::make_unique<Blob>(Dev(), layer->top_type(i), std::vector<int>{}));
      top.push_back(store.back().get());
    }
  }
  void SetUp() { layer->SetUp(bottom, top); }
};

/// Values a bottom of type `t` can hold exactly: stored integers for quantized types, small
/// multiples of 1/8 for float types.
std::vector<float> Values(DataType t, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = IsQuantized(t) ? float(rng() % 200 + 20) : (int(rng() % 33) - 16) / 8.0f;
  return v;
}

/// The stored value of the real `v` under the bottom quantizer `i` (float types: v).
float Stored(Layer& l, int i, float v) {
  if (!IsQuantized(l.compute_type())) return v;
  const Affine a = l.BottomAffine(i);
  return std::nearbyint(v / a.scale) + float(a.zero_point);
}

using test_support::ErrorOf;

// Filter: two bottoms and a (N, 1) selector; the selection changes between passes.
TEST(IndexLayers, FilterEveryType) {
  for (DataType t : kAllDataTypes) {
    SCOPED_TRACE(Name(t));
    auto p = Param("type: 'Filter'", t);
    for (int i = 0; i < 3; ++i) SetRange(&p, true, i, -2, 2);
    for (int i = 0; i < 2; ++i) SetRange(&p, false, i, -2, 2);
    IndexRun r(p, {{4, 3, 2}, {4, 5}, {4, 1}}, 2);
    const auto a = Values(t, 24, 1), b = Values(t, 20, 2);
    r.bottom[0]->FromFloat(a);
    r.bottom[1]->FromFloat(b);
    r.SetUp();
    EXPECT_EQ(r.top[0]->shape(), (std::vector<int>{4, 3, 2})) << "first reshape keeps every row";
    for (const std::vector<int>& sel : {std::vector<int>{0, 1, 0, 1}, {1, 1, 1, 0}, {0, 0, 0, 0}}) {
      std::vector<float> s;
      for (int x : sel) s.push_back(Stored(*r.layer, 2, x ? 1.5f : 0.0f));
      r.bottom[2]->FromFloat(s);
      r.layer->Reshape(r.bottom, r.top);
      r.layer->Forward(r.bottom, r.top);
      std::vector<float> want0, want1;
      for (int n = 0; n < 4; ++n) {
        if (!sel[n]) continue;
        want0.insert(want0.end(), a.begin() + n * 6, a.begin() + n * 6 + 6);
        want1.insert(want1.end(), b.begin() + n * 5, b.begin() + n * 5 + 5);
      }
      ASSERT_EQ(r.top[0]->shape(0), int(want0.size() / 6));
      EXPECT_EQ(r.top[0]->ToFloat(), want0);
      EXPECT_EQ(r.top[1]->ToFloat(), want1);
    }
  }
  const auto f = DataType::kFloat32;
  IndexRun bad(Param("name: 'f' type: 'Filter'", f), {{4, 3}, {4, 2}}, 1);
  EXPECT_NE(ErrorOf([&] { bad.SetUp(); }).find("singleton"), std::string::npos);
  IndexRun rows(Param("name: 'f' type: 'Filter'", f), {{3, 3}, {4}}, 1);
  EXPECT_NE(ErrorOf([&] { rows.SetUp(); }).find("layer 'f' (Filter)"), std::string::npos);
}

// BatchReindex: rows repeated and left out; quantized indices go through their quantizer.
TEST(IndexLayers, BatchReindexEveryType) {
  for (DataType t : kAllDataTypes) {
    SCOPED_TRACE(Name(t));
    auto p = Param("type: 'BatchReindex'", t);
    SetRange(&p, true, 0, -2, 2);
    SetRange(&p, true, 1, 0, 3);
    SetRange(&p, false, 0, -2, 2);
    IndexRun r(p, {{4, 2, 3}, {5}}, 1);
    const auto x = Values(t, 24, 3);
    r.bottom[0]->FromFloat(x);
    const std::vector<int> idx{3, 0, 0, 2, 1};
    r.SetUp();
    std::vector<float> s;
    for (int i : idx) s.push_back(Stored(*r.layer, 1, float(i)));
    r.bottom[1]->FromFloat(s);
    r.layer->Forward(r.bottom, r.top);
    ASSERT_EQ(r.top[0]->shape(), (std::vector<int>{5, 2, 3}));
    std::vector<float> want;
    for (int i : idx) want.insert(want.end(), x.begin() + i * 6, x.begin() + i * 6 + 6);
    EXPECT_EQ(r.top[0]->ToFloat(), want);
  }
  const auto f = DataType::kFloat32;
  IndexRun r(Param("name: 'br' type: 'BatchReindex'", f), {{2, 3}, {2}}, 1);
  r.bottom[0]->FromFloat(std::vector<float>(6, 1.0f));
  r.SetUp();
  for (const auto& [v, what] : {std::pair<std::vector<float>, const char*>{{0, 2}, "outside [0, 2)"},
                                {{0, 0.5f}, "not an integer"},
                                {{-1, 0}, "outside"}}) {
    r.bottom[1]->FromFloat(v);
    const std::string m = ErrorOf([&] { r.layer->Forward(r.bottom, r.top); });
    EXPECT_NE(m.find("layer 'br' (BatchReindex)"), std::string::npos) << m;
    EXPECT_NE(m.find(what), std::string::npos) << m;
  }
  // int8 indices over a range wider than 255 lose integers: refused.
  auto coarse = Param("name: 'br' type: 'BatchReindex'", DataType::kInt8Q);
  SetRange(&coarse, true, 0, -2, 2);
  SetRange(&coarse, true, 1, 0, 400);
  SetRange(&coarse, false, 0, -2, 2);
  IndexRun q(coarse, {{2, 3}, {2}}, 1);
  q.SetUp();
  EXPECT_NE(ErrorOf([&] { q.layer->Forward(q.bottom, q.top); }).find("too coarse"),
            std::string::npos);
  IndexRun two_d(Param("name: 'br' type: 'BatchReindex'", f), {{2, 3}, {2, 1}}, 1);
  EXPECT_NE(ErrorOf([&] { two_d.SetUp(); }).find("1-D"), std::string::npos);
}

// Embed: BVLC's input_dim × num_output weights, with and without the bias; fp32 and fp16,
// quantized types refused (the net runs it in fp32).
TEST(IndexLayers, EmbedFloatTypes) {
  for (DataType t : {DataType::kFloat32, DataType::kFloat16}) {
    for (bool bias : {true, false}) {
      SCOPED_TRACE(std::string(Name(t)) + (bias ? " bias" : ""));
      auto p = Param(std::string("type: 'Embed' embed_param { num_output: 3 input_dim: 5 "
                                 "weight_filler { type: 'uniform' min: -1 max: 1 } "
                                 "bias_filler { type: 'uniform' min: -1 max: 1 } bias_term: ") +
                         (bias ? "true }" : "false }"),
                     t);
      IndexRun r(p, {{2, 2}}, 1);
      r.bottom[0]->FromFloat({4, 0, 2, 4});
      r.SetUp();
      ASSERT_EQ(r.layer->num_params(), bias ? 2 : 1);
      EXPECT_EQ(r.layer->param_blob(0).shape(), (std::vector<int>{5, 3}));
      r.layer->Forward(r.bottom, r.top);
      ASSERT_EQ(r.top[0]->shape(), (std::vector<int>{2, 2, 3}));
      const auto w = r.layer->ParamAsFloat(0);
      const auto b = bias ? r.layer->ParamAsFloat(1) : std::vector<float>(3, 0.0f);
      const auto y = r.top[0]->ToFloat();
      const int idx[] = {4, 0, 2, 4};
      for (int m = 0; m < 4; ++m)
        for (int n = 0; n < 3; ++n) {
          float want = w[idx[m] * 3 + n] + b[n];
          if (t == DataType::kFloat16) want = HalfToFloat(FloatToHalf(want));
          EXPECT_NEAR(y[m * 3 + n], want, t == DataType::kFloat32 ? 1e-6 : 2e-3) << m << "," << n;
        }
    }
  }
  EXPECT_FALSE(CreateLayer(Param("type: 'Embed' embed_param { num_output: 2 input_dim: 2 }",
                                 DataType::kInt8Q), Dev())->SupportsType(DataType::kInt8Q));
  const auto f = DataType::kFloat32;
  IndexRun none(Param("name: 'e' type: 'Embed' embed_param { input_dim: 2 }", f), {{2}}, 1);
  EXPECT_NE(ErrorOf([&] { none.SetUp(); }).find("embed_param.num_output"), std::string::npos);
  IndexRun r(Param("name: 'e' type: 'Embed' embed_param { num_output: 2 input_dim: 3 }", f), {{2}}, 1);
  r.bottom[0]->FromFloat({1, 3});
  r.SetUp();
  const std::string m = ErrorOf([&] { r.layer->Forward(r.bottom, r.top); });
  EXPECT_NE(m.find("layer 'e' (Embed)"), std::string::npos) << m;
  EXPECT_NE(m.find("embed_param.input_dim"), std::string::npos) << m;
}

// The family in a net that trains: Embed → BatchReindex → Filter (of the rows and their targets,
// which the net reshapes after it every pass) → loss, forward and backward.
TEST(IndexLayers, SmallNetTrains) {
  const char* text = R"(
    layer { name: "in" type: "Input" top: "words" top: "order" top: "keep" top: "target"
            input_param { shape { dim: 4 } shape { dim: 4 } shape { dim: 4 dim: 1 }
                          shape { dim: 4 dim: 3 } } }
    layer { name: "embed" type: "Embed" bottom: "words" top: "vec"
            embed_param { num_output: 3 input_dim: 6 weight_filler { type: "gaussian" std: 1 } } }
    layer { name: "reindex" type: "BatchReindex" bottom: "vec" bottom: "order" top: "shuffled" }
    layer { name: "filter" type: "Filter" bottom: "shuffled" bottom: "target" bottom: "keep"
            top: "kept" top: "kept_target" }
    layer { name: "loss" type: "EuclideanLoss" bottom: "kept" bottom: "kept_target" top: "loss" })";
  caffe::NetParameter param;
  ParseProtoFromText(text, "<test>", &param);
  param.mutable_state()->set_phase(caffe::TRAIN);
  Net net(param, Dev());
  net.blob("words").FromFloat({5, 1, 1, 0});
  net.blob("order").FromFloat({3, 2, 1, 0});
  net.blob("keep").FromFloat({1, 0, 0, 1});
  net.blob("target").FromFloat(std::vector<float>(12, 0.0f));
  const float before = net.Forward();
  EXPECT_EQ(net.blob("kept").shape(), (std::vector<int>{2, 3}));
  net.Backward();
  // kept = rows 0 and 3 of shuffled = vec rows 3, 0 = embeddings of words 0 and 5.
  const auto w = net.layer("embed").ParamAsFloat(0);
  const auto kept = net.blob("kept").ToFloat();
  for (int n = 0; n < 3; ++n) {
    EXPECT_NEAR(kept[n], w[0 * 3 + n] + net.layer("embed").ParamAsFloat(1)[n], 1e-5);
    EXPECT_NEAR(kept[3 + n], w[5 * 3 + n] + net.layer("embed").ParamAsFloat(1)[n], 1e-5);
  }
  const Blob& dw = net.layer("embed").param_blob(0);
  const float* g = static_cast<const float*>(dw.host_diff());
  for (int n = 0; n < 3; ++n) {
    // Euclidean loss Σ(kept − 0)² / (2·2): the diff of a kept row is kept / 2.
    EXPECT_NEAR(g[0 * 3 + n], kept[n] / 2, 1e-5) << "dW of word 0";
    EXPECT_EQ(g[1 * 3 + n], 0.0f) << "word 1 was filtered out";
  }
  EXPECT_GT(before, 0.0f);
}

}  // namespace
}  // namespace mpcaffe

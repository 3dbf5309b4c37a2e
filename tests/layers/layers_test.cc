// tests/layers/layers_test.cc — Blob, the registry, and every layer in each of its data types
// against plain C++ references (fp32 1e-5 relative, fp16 within half precision, quantized
// types exactly equal to the reference integer arithmetic).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>

#include "layers/blob.h"
#include "layers/image_io.h"
#include "layers/layer_registry.h"
#include "libdnn/lrn.h"
#include "libdnn/pool.h"
#include "proto/model_io.h"
#include "tests/testing/net_support.h"
#include "quant/fixed_point.h"
#include "quant/quant_params.h"

namespace mpcaffe {
namespace {

Device& Dev() { return DefaultDevice(); }

// ---- Blob -----------------------------------------------------------------------------------

TEST(Blob, ReshapeFollowsCaffeRules) {
  Blob b(Dev(), DataType::kFloat32, {2, 3, 4}, "b");
  EXPECT_EQ(b.count(), 24);
  EXPECT_EQ(b.count(1), 12);
  EXPECT_EQ(b.shape(-1), 4);
  EXPECT_EQ(b.num(), 2);
  EXPECT_EQ(b.channels(), 3);
  EXPECT_EQ(b.height(), 4);
  EXPECT_EQ(b.width(), 1);
  EXPECT_EQ(b.shape_string(), "2 3 4 (24)");
  b.mutable_host_data();  // memory in use (never-used memory follows the shape down too)
  const size_t cap = b.capacity_bytes();
  b.Reshape({2, 2});  // smaller: memory kept
  EXPECT_EQ(b.capacity_bytes(), cap);
  b.Reshape({10, 10});  // larger: grows
  EXPECT_EQ(b.capacity_bytes(), 400u);
  EXPECT_THROW(b.Reshape({2, -1}), BlobError);
  EXPECT_THROW(b.shape(5), BlobError);
  try {
    b.Reshape({1 << 16, 1 << 16});
    FAIL();
  } catch (const BlobError& e) {
    EXPECT_NE(std::string(e.what()).find("'b'"), std::string::npos) << e.what();
  }
}

TEST(Blob, HostAndDeviceStayInSync) {
  for (DataType t : kAllDataTypes) {
    Blob b(Dev(), t, {5, 7}, "b");
    std::vector<float> v(35);
    for (int i = 0; i < 35; ++i) v[i] = IsQuantized(t) ? i * 3 : 0.25f * i - 2;
    b.FromFloat(v);
    EXPECT_EQ(b.device_bytes(), 0u) << "no device copy before device use";
    b.device_data();
    EXPECT_GE(b.device_bytes(), b.bytes());
    // Device-side write: zero the memory, then the host view must follow.
    Dev().Zero(b.mutable_device_data(), 0, b.bytes());
    for (float x : b.ToFloat()) ASSERT_EQ(x, 0.0f);
    b.FromFloat(v);  // host newest again
    std::vector<uint8_t> back(b.bytes());
    Dev().CopyToHost(b.device_data(), 0, back.data(), b.bytes());
    EXPECT_EQ(0, std::memcmp(back.data(), b.host_data(), b.bytes())) << Name(t);
  }
}

// OverwriteData writes the device side through a view and makes no host copy; ReadData reads
// the newest side without making one; the host side follows on request, in its old array.
TEST(Blob, OverwriteAndReadThroughViewsKeepNoHostCopy) {
  Blob b(Dev(), DataType::kFloat32, {3, 1000}, "b");
  b.FromFloat(std::vector<float>(3000, 1.0f));  // a host copy that the overwrite makes stale
  const void* host_array = b.host_data();
  const uint64_t version = b.data_version();
  {
    std::unique_ptr<HostView> view = b.OverwriteData();
    ASSERT_EQ(view->bytes(), b.bytes());
    auto* p = static_cast<float*>(view->data());
    for (int i = 0; i < 3000; ++i) p[i] = 0.5f * i;
  }
  EXPECT_GT(b.data_version(), version);
  {
    std::unique_ptr<HostView> view;
    const auto* p = static_cast<const float*>(b.ReadData(&view));
    ASSERT_NE(view, nullptr);  // the device side is the newest
    for (int i = 0; i < 3000; ++i) ASSERT_EQ(p[i], 0.5f * i) << i;
  }
  std::vector<float> device(3000);
  Dev().CopyToHost(b.device_data(), 0, device.data(), b.bytes());
  EXPECT_EQ(device[2999], 0.5f * 2999);
  // The host array of before is refreshed in place (pointers into it, e.g. NumPy views, stay
  // valid).
  EXPECT_EQ(b.ToFloat()[1234], 0.5f * 1234);
  EXPECT_EQ(b.host_data(), host_array);
  Blob fresh(Dev(), DataType::kFloat32, {3, 1000}, "fresh");  // never on the host: none made
  { std::memset(fresh.OverwriteData()->data(), 0, fresh.bytes()); }
  EXPECT_EQ(fresh.host_bytes(), 0u);
  std::unique_ptr<HostView> none;
  EXPECT_EQ(b.ReadData(&none), b.host_data());  // in sync: the host side, no view
  EXPECT_EQ(none, nullptr);
}

TEST(Registry, UnknownTypeNamesLayerAndListsKnownTypes) {
  caffe::LayerParameter p;
  p.set_name("mystery");
  p.set_type("Frobnicate");
  try {
    CreateLayer(p, Dev());
    FAIL();
  } catch (const LayerError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("mystery"), std::string::npos) << m;
    EXPECT_NE(m.find("Frobnicate"), std::string::npos) << m;
    EXPECT_NE(m.find("Convolution"), std::string::npos) << m;
    EXPECT_NE(m.find("ReLU"), std::string::npos) << m;
  }
  for (const char* t : {"Input", "Data", "ImageData", "InnerProduct", "Convolution", "Pooling", "ReLU", "Sigmoid",
                        "TanH", "LRN", "Dropout", "Softmax", "SoftmaxWithLoss", "EuclideanLoss",
                        "Accuracy", "Concat", "Split", "Flatten", "Reshape", "Eltwise", "BatchNorm",
                        "Scale", "Quantizer"}) {
    const auto types = LayerTypes();
    EXPECT_NE(std::find(types.begin(), types.end(), t), types.end()) << t;
  }
}

// ---- Harness --------------------------------------------------------------------------------

/// A layer with its own bottoms and tops. Bottoms hold random reals (float types) or random
/// stored integers (quantized types).
struct LayerRun {
  std::unique_ptr<Layer> layer;
  std::vector<std::unique_ptr<Blob>> bottom_store, top_store;
  std::vector<Blob*> bottom, top;
  void Forward() { layer->Forward(bottom, top); }
};

caffe::LayerParameter Param(const std::string& text, DataType t) {
  return test_support::LayerText(text, t);
}

/// Gives bottom/top quantizer i the range [lo, hi] (quantized tests).
void SetRange(caffe::LayerParameter* p, const std::string& side, int i, double lo, double hi) {
  auto* list = side == "bottom" ? p->mutable_bottom_quantizer() : p->mutable_top_quantizer();
  while (list->size() <= i) list->Add();
  list->Mutable(i)->set_observed_min(lo);
  list->Mutable(i)->set_observed_max(hi);
}

std::vector<float> RandomReals(size_t n, std::mt19937& rng, float lo = -2, float hi = 2) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

LayerRun Make(const caffe::LayerParameter& p, const std::vector<std::vector<int>>& shapes, int tops,
         uint32_t seed = 7) {
  LayerRun r;
  r.layer = CreateLayer(p, Dev());
  std::mt19937 rng(seed);
  for (size_t i = 0; i < shapes.size(); ++i) {
    const DataType t = r.layer->bottom_type(static_cast<int>(i));
    r.bottom_store.push_back(std::make_unique<Blob>(Dev(), t, shapes[i], "bottom" + std::to_string(i)));
    Blob& b = *r.bottom_store.back();
    const auto& tr = TraitsOf(t);
    r.bottom.push_back(&b);
    b.FromFloat(IsQuantized(t) ? RandomReals(b.count(), rng, float(tr.qmin), float(tr.qmax))
                               : RandomReals(b.count(), rng));
  }
  for (int i = 0; i < tops; ++i) {
    r.top_store.push_back(std::make_unique<Blob>(Dev(), r.layer->top_type(i), std::vector<int>{}, "top" + std::to_string(i)));
    r.top.push_back(r.top_store.back().get());
  }
  r.layer->SetUp(r.bottom, r.top);
  return r;
}

/// fp32: 1e-5 relative; fp16: half precision (2^-10 relative plus a small absolute term for
/// inputs rounded to half); quantized: exact stored integers.
void ExpectMatch(DataType t, const std::vector<float>& got, const std::vector<float>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i) {
    const float tol = IsQuantized(t) ? 0.0f
                      : t == DataType::kFloat32 ? 1e-5f * std::max(1.0f, std::fabs(want[i]))
                                                : 2e-3f * std::max(1.0f, std::fabs(want[i]));
    if (!(std::fabs(got[i] - want[i]) <= tol)) {
      ADD_FAILURE() << what << " " << Name(t) << " [" << i << "]: got " << got[i] << " want " << want[i];
      ++bad;
    }
  }
}

/// Float reference inputs as the layer sees them (fp16 rounded).
std::vector<float> Seen(const Blob& b) { return b.ToFloat(); }

/// Stores reals as `t` does (fp16 rounding), for float references.
float AsType(DataType t, float v) { return t == DataType::kFloat16 ? HalfToFloat(FloatToHalf(v)) : v; }

const DataType kFloats[] = {DataType::kFloat32, DataType::kFloat16};

// ---- Element-wise and structural layers -----------------------------------------------------

TEST(Layers, ReLUEveryType) {
  for (DataType t : kAllDataTypes) {
    auto p = Param("type: 'ReLU' relu_param { negative_slope: 0.125 }", t);
    SetRange(&p, "bottom", 0, -3, 5);
    SetRange(&p, "top", 0, -0.5, 5);
    LayerRun r = Make(p, {{2, 3, 4, 5}}, 1);
    r.Forward();
    std::vector<uint8_t> want(r.top[0]->bytes());
    reference::Relu(t, r.bottom[0]->count(), r.bottom[0]->host_data(), want.data(), 0.125f,
                    r.layer->BottomAffine(0), r.layer->TopAffine(0));
    Blob w(Dev(), t, r.top[0]->shape());
    std::memcpy(w.mutable_host_data(), want.data(), want.size());
    ExpectMatch(t, r.top[0]->ToFloat(), w.ToFloat(), "ReLU");
  }
}

TEST(Layers, SigmoidTanHSoftmaxFloatTypes) {
  for (DataType t : kFloats) {
    for (const char* type : {"Sigmoid", "TanH"}) {
      LayerRun r = Make(Param(std::string("type: '") + type + "'", t), {{3, 17}}, 1);
      r.Forward();
      std::vector<float> want;
      for (float x : Seen(*r.bottom[0]))
        want.push_back(AsType(t, std::string(type) == "TanH" ? std::tanh(x) : 1 / (1 + std::exp(-x))));
      ExpectMatch(t, r.top[0]->ToFloat(), want, type);
    }
    LayerRun r = Make(Param("type: 'Softmax'", t), {{2, 5, 3}}, 1);
    r.Forward();
    const auto x = Seen(*r.bottom[0]);
    std::vector<float> want(x.size());
    for (int n = 0; n < 2; ++n)
      for (int i = 0; i < 3; ++i) {
        double m = -1e30, s = 0;
        for (int c = 0; c < 5; ++c) m = std::max<double>(m, x[(n * 5 + c) * 3 + i]);
        for (int c = 0; c < 5; ++c) s += std::exp(x[(n * 5 + c) * 3 + i] - m);
        for (int c = 0; c < 5; ++c)
          want[(n * 5 + c) * 3 + i] = AsType(t, static_cast<float>(std::exp(x[(n * 5 + c) * 3 + i] - m) / s));
      }
    ExpectMatch(t, r.top[0]->ToFloat(), want, "Softmax");
  }
}

// BVLC's neuron layers on the activation family, each against its formula in double.
TEST(Layers, ActivationFamilyFloatTypes) {
  struct Case {
    const char* proto;
    std::function<double(double)> f;
  };
  const double ln2 = std::log(2.0);
  const std::vector<Case> cases = {
      {"type: 'AbsVal'", [](double x) { return std::fabs(x); }},
      {"type: 'BNLL'", [](double x) { return std::log1p(std::exp(x)); }},
      {"type: 'Clip' clip_param { min: -0.5 max: 1.25 }",
       [](double x) { return std::min(1.25, std::max(-0.5, x)); }},
      {"type: 'ELU' elu_param { alpha: 0.5 }",
       [](double x) { return x > 0 ? x : 0.5 * (std::exp(x) - 1); }},
      {"type: 'Exp'", [](double x) { return std::exp(x); }},
      {"type: 'Exp' exp_param { base: 2 scale: 0.7 shift: 0.3 }",
       [](double x) { return std::pow(2.0, 0.3 + 0.7 * x); }},
      {"type: 'Log' log_param { base: 2 scale: 0.5 shift: 3 }",
       [ln2](double x) { return std::log(3 + 0.5 * x) / ln2; }},
      {"type: 'Power' power_param { power: 2 scale: -1.5 shift: 0.25 }",
       [](double x) { return std::pow(0.25 - 1.5 * x, 2.0); }},
      {"type: 'Power' power_param { power: 0.5 scale: 0.5 shift: 1.5 }",
       [](double x) { return std::sqrt(1.5 + 0.5 * x); }},
      {"type: 'Swish' swish_param { beta: 1.5 }",
       [](double x) { return x / (1 + std::exp(-1.5 * x)); }},
      {"type: 'Threshold' threshold_param { threshold: 0.25 }",
       [](double x) { return x > 0.25 ? 1.0 : 0.0; }},
  };
  for (DataType t : kFloats) {
    for (const Case& c : cases) {
      LayerRun r = Make(Param(c.proto, t), {{2, 3, 5}}, 1);
      r.Forward();
      std::vector<float> want;
      for (float x : Seen(*r.bottom[0])) want.push_back(AsType(t, static_cast<float>(c.f(x))));
      ExpectMatch(t, r.top[0]->ToFloat(), want, c.proto);
    }
    // PReLU per channel (axis 1) and shared.
    LayerRun pc = Make(Param("type: 'PReLU'", t), {{2, 3, 2, 2}}, 1);
    pc.layer->SetParamFromFloat(0, {0.25f, -0.5f, 2.0f});
    pc.Forward();
    const auto x = Seen(*pc.bottom[0]);
    std::vector<float> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const float a = pc.layer->ParamAsFloat(0)[(i / 4) % 3];
      want[i] = AsType(t, x[i] > 0 ? x[i] : a * x[i]);
    }
    ExpectMatch(t, pc.top[0]->ToFloat(), want, "PReLU");
    LayerRun ps = Make(Param("type: 'PReLU' prelu_param { channel_shared: true }", t), {{2, 3, 2, 2}}, 1);
    EXPECT_EQ(ps.layer->param_blob(0).count(), 1);
    ps.Forward();
    for (size_t i = 0; i < x.size(); ++i) want[i] = AsType(t, x[i] > 0 ? x[i] : 0.25f * x[i]);
    ExpectMatch(t, ps.top[0]->ToFloat(), want, "PReLU shared (filler 0.25)");
    // Bias: a learned {3, 2} over axes 1..2, and a second bottom of shape {2} from axis -1.
    LayerRun b = Make(Param("type: 'Bias' bias_param { axis: 1 num_axes: 2 }", t), {{2, 3, 2, 2}}, 1);
    ASSERT_EQ(b.layer->param_blob(0).shape(), (std::vector<int>{3, 2}));
    b.layer->SetParamFromFloat(0, {0.5f, -1.0f, 2.0f, 0.25f, -3.0f, 1.5f});
    b.Forward();
    const auto bias = b.layer->ParamAsFloat(0);
    for (size_t i = 0; i < x.size(); ++i) want[i] = AsType(t, x[i] + bias[(i / 2) % 6]);
    ExpectMatch(t, b.top[0]->ToFloat(), want, "Bias learned");
    LayerRun b2 = Make(Param("type: 'Bias' bias_param { axis: -1 }", t), {{2, 3, 2, 2}, {2}}, 1);
    b2.Forward();
    const auto x2 = Seen(*b2.bottom[0]), bb = Seen(*b2.bottom[1]);
    for (size_t i = 0; i < x2.size(); ++i) want[i] = AsType(t, x2[i] + bb[i % 2]);
    ExpectMatch(t, b2.top[0]->ToFloat(), want, "Bias second bottom");
  }
}

// Bad parameters name the layer and the field; quantized compute types are refused by name.
TEST(Layers, ActivationFamilyErrorsNameLayerAndField) {
  const std::pair<const char*, const char*> bad[] = {
      {"name: 'c' type: 'Clip'", "clip_param.min"},
      {"name: 'c' type: 'Clip' clip_param { min: 2 max: 1 }", "clip_param.max"},
      {"name: 'e' type: 'Exp' exp_param { base: -2 }", "exp_param.base"},
      {"name: 'l' type: 'Log' log_param { base: 0 }", "log_param.base"},
      {"name: 'b' type: 'Bias' bias_param { axis: 4 }", "bias_param.axis"},
      {"name: 'b' type: 'Bias' bias_param { num_axes: 5 }", "bias_param.num_axes"},
      {"name: 'b' type: 'Bias' bias_param { axis: 1 }", "bias_param.axis"},  // second bottom {4}
  };
  for (const auto& [proto, field] : bad) {
    const bool two = std::string(proto).find("axis: 1") != std::string::npos;
    try {
      Make(Param(proto, DataType::kFloat32), two ? std::vector<std::vector<int>>{{2, 3}, {4}}
                                                 : std::vector<std::vector<int>>{{2, 3}}, 1);
      ADD_FAILURE() << proto << " was accepted";
    } catch (const LayerError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(std::string("'") + proto[7] + "'"), std::string::npos) << m;
      EXPECT_NE(m.find(field), std::string::npos) << m;
    }
  }
  for (DataType q : {DataType::kInt8Q, DataType::kInt16Q})
    for (const char* type : {"AbsVal", "ELU", "PReLU", "Bias", "Threshold"}) {
      try {
        Make(Param(std::string("name: 'q' type: '") + type + "'", q), {{2, 3}}, 1);
        ADD_FAILURE() << type << " accepted " << Name(q);
      } catch (const LayerError& e) {
        EXPECT_NE(std::string(e.what()).find("'q' (" + std::string(type) + "): does not compute in"),
                  std::string::npos) << e.what();
      }
    }
}

TEST(Layers, ConcatEveryTypeRequantizesEachBottom) {
  // inner 40: int8's 16-element steps (HasVectorConcat) both inside one run of the top and
  // across the end of a bottom's block; multipliers 1/3 and 1.
  for (DataType t : kAllDataTypes) {
    for (int inner : {4, 40}) {
      SCOPED_TRACE(std::string(Name(t)) + " inner " + std::to_string(inner));
      auto p = Param("type: 'Concat' concat_param { axis: 1 }", t);
      SetRange(&p, "bottom", 0, -1, 1);
      SetRange(&p, "bottom", 1, -4, 2);
      SetRange(&p, "top", 0, -4, 2);
      LayerRun r = Make(p, {{2, 3, inner}, {2, 2, inner}}, 1);
      r.Forward();
      ASSERT_EQ(r.top[0]->shape(), (std::vector<int>{2, 5, inner}));
      std::vector<float> want(10 * inner);
      const auto a = r.bottom[0]->ToFloat(), b = r.bottom[1]->ToFloat();
      for (int n = 0; n < 2; ++n)
        for (int c = 0; c < 5; ++c)
          for (int i = 0; i < inner; ++i) {
            const bool first = c < 3;
            const float v = first ? a[(n * 3 + c) * inner + i] : b[(n * 2 + c - 3) * inner + i];
            float out = v;
            if (IsQuantized(t)) {
              const Affine x = r.layer->BottomAffine(first ? 0 : 1), y = r.layer->TopAffine(0);
              const auto m = quant::RescaleMultiplier(x.scale, y.scale);
              const int64_t d = static_cast<int64_t>(v) - x.zero_point;
              int64_t q = y.zero_point + (t == DataType::kInt8Q ? quant::Requantize32(static_cast<int32_t>(d), m)
                                                                : quant::Requantize64(d, m));
              q = std::min<int64_t>(std::max<int64_t>(q, TraitsOf(t).qmin), TraitsOf(t).qmax);
              out = static_cast<float>(q);
            }
            want[(n * 5 + c) * inner + i] = out;
          }
      ExpectMatch(t, r.top[0]->ToFloat(), want, "Concat");
    }
  }
}

// Slice at slice_point along axis 1, and into equal parts along the last axis, in every dtype
// (quantized tops with the bottom's range: the stored values are copied exactly).
TEST(Layers, SliceEveryType) {
  for (DataType t : kAllDataTypes) {
    for (const char* proto : {"type: 'Slice' slice_param { axis: 1 slice_point: 1 slice_point: 4 }",
                              "type: 'Slice' slice_param { axis: -1 }"}) {
      auto p = Param(proto, t);
      SetRange(&p, "bottom", 0, -2, 2);
      for (int i = 0; i < 3; ++i) SetRange(&p, "top", i, -2, 2);
      const bool last = std::string(proto).find("-1") != std::string::npos;
      LayerRun r = Make(p, {{2, 5, 2, 3}}, 3);
      r.Forward();
      const auto x = r.bottom[0]->ToFloat();
      const int starts[] = {0, 1, 4, 5};
      for (int k = 0; k < 3; ++k) {
        std::vector<float> want;
        for (int n = 0; n < 2; ++n)
          for (int c = 0; c < 5; ++c)
            for (int h = 0; h < 2; ++h)
              for (int w = 0; w < 3; ++w)
                if (last ? w == k : (c >= starts[k] && c < starts[k + 1]))
                  want.push_back(x[((n * 5 + c) * 2 + h) * 3 + w]);
        ExpectMatch(t, r.top[k]->ToFloat(), want, std::string(proto) + " top " + std::to_string(k));
      }
    }
  }
  try {
    Make(Param("name: 's' type: 'Slice' slice_param { slice_point: 3 slice_point: 2 }",
               DataType::kFloat32), {{2, 5}}, 3);
    ADD_FAILURE() << "decreasing slice points accepted";
  } catch (const LayerError& e) {
    EXPECT_NE(std::string(e.what()).find("slice_param.slice_point"), std::string::npos) << e.what();
  }
}

// Crop (axis 1, one offset per axis; axis 2 by default with one offset for both) and Tile (axis
// 1 and the last axis) in every dtype, quantized tops with the bottom's range (exact copies).
// Both run on the gather program of their type.
TEST(Layers, CropAndTileEveryType) {
  for (DataType t : kAllDataTypes) {
    SCOPED_TRACE(Name(t));
    const int B[4] = {2, 4, 5, 3};
    struct CropCase {
      const char* proto;
      std::vector<int> shape;  // bottom 1's, the top's
      int off[4];
    };
    const CropCase crops[] = {
        {"type: 'Crop' crop_param { axis: 1 offset: 1 offset: 2 offset: 0 }", {2, 2, 3, 2},
         {0, 1, 2, 0}},
        {"type: 'Crop' crop_param { offset: 1 }", {2, 4, 3, 2}, {0, 0, 1, 1}},
        {"type: 'Crop' crop_param { axis: 0 offset: 1 offset: 0 offset: 2 offset: 1 }",
         {1, 4, 3, 2}, {1, 0, 2, 1}}};
    for (const auto& [proto, shape, off] : crops) {
      auto p = Param(proto, t);
      SetRange(&p, "bottom", 0, -2, 2);
      SetRange(&p, "top", 0, -2, 2);
      LayerRun r = Make(p, {{2, 4, 5, 3}, shape}, 1);
      r.Forward();
      const auto x = r.bottom[0]->ToFloat();
      ASSERT_EQ(r.top[0]->shape(), shape);
      std::vector<float> want;
      for (int n = 0; n < shape[0]; ++n)
        for (int c = 0; c < shape[1]; ++c)
          for (int h = 0; h < shape[2]; ++h)
            for (int w = 0; w < shape[3]; ++w)
              want.push_back(x[(((n + off[0]) * B[1] + c + off[1]) * B[2] + h + off[2]) * B[3] +
                               w + off[3]]);
      ExpectMatch(t, r.top[0]->ToFloat(), want, proto);
    }
    for (int axis : {1, -1}) {
      auto p = Param("type: 'Tile' tile_param { tiles: 3 axis: " + std::to_string(axis) + " }", t);
      SetRange(&p, "bottom", 0, -2, 2);
      SetRange(&p, "top", 0, -2, 2);
      LayerRun r = Make(p, {{2, 3, 2}}, 1);
      r.Forward();
      const auto x = r.bottom[0]->ToFloat();
      const int a = axis == 1 ? 1 : 2;
      std::vector<int> shape{2, 3, 2};
      shape[a] *= 3;
      ASSERT_EQ(r.top[0]->shape(), shape);
      std::vector<float> want;
      for (int n = 0; n < shape[0]; ++n)
        for (int c = 0; c < shape[1]; ++c)
          for (int w = 0; w < shape[2]; ++w)
            want.push_back(x[(n * 3 + (a == 1 ? c % 3 : c)) * 2 + (a == 2 ? w % 2 : w)]);
      ExpectMatch(t, r.top[0]->ToFloat(), want, "Tile axis " + std::to_string(axis));
    }
  }
  const std::pair<const char*, const char*> bad[] = {
      {"name: 'c' type: 'Crop' crop_param { axis: 4 }", "crop_param.axis"},
      {"name: 'c' type: 'Crop' crop_param { axis: 1 offset: 1 offset: 1 }", "crop_param.offset"},
      {"name: 'c' type: 'Crop' crop_param { offset: 3 }", "crop_param.offset"},
      {"name: 't' type: 'Tile'", "tile_param.tiles"},
      {"name: 't' type: 'Tile' tile_param { tiles: 2 axis: 4 }", "tile_param.axis"},
  };
  for (const auto& [proto, field] : bad) {
    const bool crop = std::string(proto).find("Crop") != std::string::npos;
    try {
      Make(Param(proto, DataType::kFloat32),
           crop ? std::vector<std::vector<int>>{{2, 4, 5, 3}, {2, 2, 3, 2}}
                : std::vector<std::vector<int>>{{2, 4, 5, 3}}, 1);
      ADD_FAILURE() << proto << " was accepted";
    } catch (const LayerError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(std::string("'") + proto[7] + "'"), std::string::npos) << m;
      EXPECT_NE(m.find(field), std::string::npos) << m;
    }
  }
}

// Reduction of the tail axes from axis 1 (and of everything, axis 0) for each operation, in the
// float types; quantized types are refused naming the layer.
TEST(Layers, ReductionFloatTypes) {
  const char* ops[] = {"SUM", "ASUM", "SUMSQ", "MEAN"};
  for (DataType t : kFloats)
    for (int op = 0; op < 4; ++op)
      for (int axis : {1, 0}) {
        const std::string proto = std::string("type: 'Reduction' reduction_param { operation: ") +
                                  ops[op] + " axis: " + std::to_string(axis) + " coeff: -1.5 }";
        LayerRun r = Make(Param(proto, t), {{3, 2, 5}}, 1);
        r.Forward();
        const auto x = r.bottom[0]->ToFloat();
        const int outer = axis == 1 ? 3 : 1, inner = 30 / outer;
        ASSERT_EQ(r.top[0]->count(), outer) << proto;
        std::vector<float> want(outer);
        for (int o = 0; o < outer; ++o) {
          double sum = 0;
          for (int k = 0; k < inner; ++k) {
            const double v = x[o * inner + k];
            sum += op == 1 ? std::fabs(v) : op == 2 ? v * v : v;
          }
          want[o] = AsType(t, static_cast<float>(-1.5 * sum / (op == 3 ? inner : 1)));
        }
        ExpectMatch(t, r.top[0]->ToFloat(), want, proto);
      }
  for (const char* proto : {"name: 'r' type: 'Reduction' reduction_param { axis: 3 }"}) {
    try {
      Make(Param(proto, DataType::kFloat32), {{3, 2, 5}}, 1);
      ADD_FAILURE() << proto << " was accepted";
    } catch (const LayerError& e) {
      EXPECT_NE(std::string(e.what()).find("reduction_param.axis"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("'r'"), std::string::npos) << e.what();
    }
  }
  for (DataType q : {DataType::kInt8Q, DataType::kInt16Q}) {
    try {
      Make(Param("name: 'q' type: 'Reduction'", q), {{2, 3}}, 1);
      ADD_FAILURE() << "Reduction accepted " << Name(q);
    } catch (const LayerError& e) {
      EXPECT_NE(std::string(e.what()).find("'q' (Reduction): does not compute in"),
                std::string::npos) << e.what();
    }
  }
}

// ArgMax along an axis (values) and over each item (indices, and indices then values), top 2,
// in the float types: the reference sorts (value, index) pairs as BVLC does.
TEST(Layers, ArgMaxFloatTypes) {
  for (DataType t : kFloats)
    for (const char* proto : {"type: 'ArgMax' argmax_param { axis: 1 top_k: 2 out_max_val: true }",
                              "type: 'ArgMax' argmax_param { top_k: 2 }",
                              "type: 'ArgMax' argmax_param { top_k: 2 out_max_val: true }"}) {
      LayerRun r = Make(Param(proto, t), {{2, 5, 3}}, 1);
      r.Forward();
      const auto x = r.bottom[0]->ToFloat();
      const bool axis = std::string(proto).find("axis") != std::string::npos;
      const bool values = std::string(proto).find("true") != std::string::npos;
      const int outer = 2, channels = axis ? 5 : 15, inner = axis ? 3 : 1;
      std::vector<float> want;
      std::vector<std::vector<std::pair<float, int>>> best(outer * inner);
      for (int o = 0; o < outer; ++o)
        for (int i = 0; i < inner; ++i) {
          auto& v = best[o * inner + i];
          for (int c = 0; c < channels; ++c) v.push_back({x[(o * channels + c) * inner + i], c});
          std::sort(v.begin(), v.end(), std::greater<std::pair<float, int>>());
        }
      if (axis) {
        ASSERT_EQ(r.top[0]->shape(), (std::vector<int>{2, 2, 3}));
        for (int o = 0; o < outer; ++o)
          for (int j = 0; j < 2; ++j)
            for (int i = 0; i < inner; ++i) want.push_back(best[o * inner + i][j].first);
      } else {
        ASSERT_EQ(r.top[0]->shape(), (std::vector<int>{2, values ? 2 : 1, 2}));
        for (int o = 0; o < outer; ++o) {
          for (int j = 0; j < 2; ++j) want.push_back(static_cast<float>(best[o][j].second));
          if (values)
            for (int j = 0; j < 2; ++j) want.push_back(best[o][j].first);
        }
      }
      ExpectMatch(t, r.top[0]->ToFloat(), want, proto);
    }
  try {
    Make(Param("name: 'a' type: 'ArgMax' argmax_param { axis: 1 top_k: 6 }", DataType::kFloat32),
         {{2, 5, 3}}, 1);
    ADD_FAILURE() << "top_k 6 of 5 accepted";
  } catch (const LayerError& e) {
    EXPECT_NE(std::string(e.what()).find("argmax_param.top_k"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'a'"), std::string::npos) << e.what();
  }
}

// MVN per channel and across channels, with and without the variance, in the float types.
TEST(Layers, MVNFloatTypes) {
  for (DataType t : kFloats)
    for (const char* proto : {"type: 'MVN'",
                              "type: 'MVN' mvn_param { across_channels: true eps: 0.01 }",
                              "type: 'MVN' mvn_param { normalize_variance: false }"}) {
      LayerRun r = Make(Param(proto, t), {{2, 3, 2, 4}}, 1);
      r.Forward();
      const auto x = r.bottom[0]->ToFloat();
      const bool across = std::string(proto).find("across") != std::string::npos;
      const bool variance = std::string(proto).find("false") == std::string::npos;
      const double eps = across ? 0.01 : 1e-9;
      const int dim = across ? 24 : 8;
      std::vector<float> want(x.size());
      for (size_t g = 0; g < x.size() / dim; ++g) {
        double mean = 0, sq = 0;
        for (int k = 0; k < dim; ++k) mean += x[g * dim + k] / double(dim);
        for (int k = 0; k < dim; ++k) sq += std::pow(x[g * dim + k] - mean, 2) / dim;
        const double scale = variance ? 1 / (std::sqrt(sq) + eps) : 1;
        for (int k = 0; k < dim; ++k)
          want[g * dim + k] = AsType(t, static_cast<float>((x[g * dim + k] - mean) * scale));
      }
      ExpectMatch(t, r.top[0]->ToFloat(), want, proto);
    }
  for (DataType q : {DataType::kInt8Q, DataType::kInt16Q})
    for (const char* type : {"ArgMax", "MVN"}) {
      try {
        Make(Param(std::string("name: 'q' type: '") + type + "'", q), {{2, 3}}, 1);
        ADD_FAILURE() << type << " accepted " << Name(q);
      } catch (const LayerError& e) {
        const std::string refusal = "'q' (" + std::string(type) + "): does not compute in";
        EXPECT_NE(std::string(e.what()).find(refusal), std::string::npos) << e.what();
      }
    }
}

// BVLC's sigmoid cross-entropy, normalized over the valid (not ignored) elements by default and
// over the batch with normalization: BATCH_SIZE.
TEST(Layers, SigmoidCrossEntropyLossFloatTypes) {
  for (DataType t : kFloats) {
    for (const char* proto :
         {"type: 'SigmoidCrossEntropyLoss' loss_param { ignore_label: -1 }",
          "type: 'SigmoidCrossEntropyLoss' loss_param { normalization: BATCH_SIZE }"}) {
      const bool ignore = std::string(proto).find("ignore") != std::string::npos;
      LayerRun r = Make(Param(proto, t), {{3, 4}, {3, 4}}, 1);
      std::vector<float> targets(12);
      for (int i = 0; i < 12; ++i) targets[i] = ignore && i % 5 == 0 ? -1.0f : (i % 3) * 0.5f;
      r.bottom[1]->FromFloat(targets);
      r.Forward();
      const auto x = Seen(*r.bottom[0]);
      double sum = 0;
      int valid = 0;
      for (int i = 0; i < 12; ++i) {
        if (ignore && targets[i] == -1.0f) continue;
        const double s = 1 / (1 + std::exp(-double(x[i])));
        sum -= targets[i] * std::log(s) + (1 - targets[i]) * std::log(1 - s);
        ++valid;
      }
      const float want = AsType(t, static_cast<float>(sum / (ignore ? valid : 3)));
      ExpectMatch(t, r.top[0]->ToFloat(), {want}, proto);
    }
  }
}

TEST(Layers, SplitFlattenReshapeDropoutCopyEveryType) {
  for (DataType t : kAllDataTypes) {
    for (const char* text : {"type: 'Split'", "type: 'Flatten'", "type: 'Dropout'",
                             "type: 'Reshape' reshape_param { shape { dim: 0 dim: -1 dim: 2 } }"}) {
      auto p = Param(text, t);
      SetRange(&p, "bottom", 0, -1, 3);
      SetRange(&p, "top", 0, -1, 3);
      LayerRun r = Make(p, {{2, 3, 2, 2}}, 1);
      r.Forward();
      EXPECT_EQ(r.top[0]->count(), 24);
      ExpectMatch(t, r.top[0]->ToFloat(), r.bottom[0]->ToFloat(), text);
    }
  }
  LayerRun f = Make(Param("type: 'Flatten'", DataType::kFloat32), {{2, 3, 2, 2}}, 1);
  EXPECT_EQ(f.top[0]->shape(), (std::vector<int>{2, 12}));
  LayerRun s = Make(Param("type: 'Reshape' reshape_param { shape { dim: 0 dim: -1 dim: 2 } }", DataType::kFloat32),
               {{2, 3, 2, 2}}, 1);
  EXPECT_EQ(s.top[0]->shape(), (std::vector<int>{2, 6, 2}));
}

TEST(Layers, EltwiseSumEveryTypeProdMaxFloat) {
  for (DataType t : kAllDataTypes) {
    auto p = Param("type: 'Eltwise' eltwise_param { operation: SUM coeff: 0.5 coeff: -1 }", t);
    SetRange(&p, "bottom", 0, -2, 2);
    SetRange(&p, "bottom", 1, -1, 3);
    SetRange(&p, "top", 0, -4, 3);
    LayerRun r = Make(p, {{4, 9}, {4, 9}}, 1);
    r.Forward();
    const int n = 36;
    std::vector<uint8_t> want(r.top[0]->bytes());
    if (!IsQuantized(t)) {
      reference::Scale(t, n, 0.5f, r.bottom[0]->host_data(), want.data(), r.layer->BottomAffine(0), r.layer->TopAffine(0));
      reference::Axpby(t, n, -1.0f, r.bottom[1]->host_data(), 1.0f, want.data(), r.layer->BottomAffine(1),
                       r.layer->TopAffine(0));
    } else {  // the sum in fp32, rounded once into the top's range
      const DataType f = DataType::kFloat32;
      std::vector<float> sum(n), term(n);
      reference::Convert(t, f, n, r.bottom[0]->host_data(), sum.data(), r.layer->BottomAffine(0), {});
      reference::Scale(f, n, 0.5f, sum.data(), sum.data(), {}, {});
      reference::Convert(t, f, n, r.bottom[1]->host_data(), term.data(), r.layer->BottomAffine(1), {});
      reference::Axpby(f, n, -1.0f, term.data(), 1.0f, sum.data(), {}, {});
      reference::Convert(f, t, n, sum.data(), want.data(), {}, r.layer->TopAffine(0));
    }
    Blob w(Dev(), t, {n});
    std::memcpy(w.mutable_host_data(), want.data(), want.size());
    ExpectMatch(t, r.top[0]->ToFloat(), w.ToFloat(), "Eltwise SUM");
  }
  // A partial sum outside the top's range must not saturate before a later term cancels it
  // (a residual branch): 2.0 − 1.9 into [−0.5, 0.5] is 0.1, not −0.5.
  for (DataType t : {DataType::kInt8Q, DataType::kInt16Q}) {
    auto p = Param("type: 'Eltwise' eltwise_param { operation: SUM }", t);
    SetRange(&p, "bottom", 0, 0, 2.5);
    SetRange(&p, "bottom", 1, -2.5, 0);
    SetRange(&p, "top", 0, -0.5, 0.5);
    LayerRun r = Make(p, {{1, 4}, {1, 4}}, 1);
    r.bottom[0]->FromFloat(std::vector<float>(4, float(r.layer->BottomParams(0).zero_point[0] +
                                                       std::round(2.0 / r.layer->BottomParams(0).scale[0]))));
    r.bottom[1]->FromFloat(std::vector<float>(4, float(r.layer->BottomParams(1).zero_point[0] +
                                                       std::round(-1.9 / r.layer->BottomParams(1).scale[0]))));
    r.Forward();
    const quant::QuantParams y = r.layer->TopParams(0);
    for (float v : r.top[0]->ToFloat())
      EXPECT_NEAR(y.scale[0] * (v - y.zero_point[0]), 0.1, 2.5 * y.scale[0] + 0.02) << Name(t);
  }
  for (DataType t : kFloats)
    for (const char* op : {"PROD", "MAX"}) {
      LayerRun r = Make(Param(std::string("type: 'Eltwise' eltwise_param { operation: ") + op + " }", t),
                   {{3, 5}, {3, 5}, {3, 5}}, 1);
      r.Forward();
      const auto a = Seen(*r.bottom[0]), b = Seen(*r.bottom[1]), c = Seen(*r.bottom[2]);
      std::vector<float> want(15);
      for (int i = 0; i < 15; ++i)
        want[i] = std::string(op) == "PROD" ? AsType(t, AsType(t, a[i] * b[i]) * c[i])
                                            : std::max(a[i], std::max(b[i], c[i]));
      ExpectMatch(t, r.top[0]->ToFloat(), want, op);
    }
}

TEST(Layers, BatchNormAndScaleFloatTypes) {
  for (DataType t : kFloats) {
    LayerRun r = Make(Param("type: 'BatchNorm' batch_norm_param { eps: 0.001 }", t), {{2, 3, 2, 2}}, 1);
    r.layer->SetParamFromFloat(0, {2.0f, -1.0f, 0.5f});  // mean sums
    r.layer->SetParamFromFloat(1, {8.0f, 2.0f, 1.0f});   // variance sums
    r.layer->SetParamFromFloat(2, {2.0f});               // scale factor
    r.Forward();
    const auto x = Seen(*r.bottom[0]);
    const auto mean = r.layer->ParamAsFloat(0), var = r.layer->ParamAsFloat(1);
    std::vector<float> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const int c = (i / 4) % 3;
      want[i] = AsType(t, (x[i] - mean[c] / 2) / std::sqrt(var[c] / 2 + 0.001f));
    }
    ExpectMatch(t, r.top[0]->ToFloat(), want, "BatchNorm");

    LayerRun s = Make(Param("type: 'Scale' scale_param { bias_term: true }", t), {{2, 3, 2, 2}}, 1);
    s.layer->SetParamFromFloat(0, {2.0f, -1.0f, 0.5f});
    s.layer->SetParamFromFloat(1, {0.25f, 1.0f, -3.0f});
    s.Forward();
    const auto sx = Seen(*s.bottom[0]);
    for (size_t i = 0; i < sx.size(); ++i) {
      const int c = (i / 4) % 3;
      const float sc[] = {2.0f, -1.0f, 0.5f}, bi[] = {0.25f, 1.0f, -3.0f};
      want[i] = AsType(t, sx[i] * sc[c] + bi[c]);
    }
    ExpectMatch(t, s.top[0]->ToFloat(), want, "Scale");
  }
}

TEST(Layers, QuantizerLayerConvertsEveryPair) {
  for (DataType from : kAllDataTypes)
    for (DataType to : kAllDataTypes) {
      auto p = Param("type: 'Quantizer'", from);
      p.set_top_data_type(DataTypeToProto(to));
      SetRange(&p, "bottom", 0, -2, 2);
      SetRange(&p, "top", 0, -3, 1);
      LayerRun r = Make(p, {{5, 11}}, 1);
      r.Forward();
      std::vector<uint8_t> want(r.top[0]->bytes());
      reference::Convert(from, to, 55, r.bottom[0]->host_data(), want.data(), r.layer->BottomAffine(0),
                         r.layer->TopAffine(0));
      Blob w(Dev(), to, {55});
      std::memcpy(w.mutable_host_data(), want.data(), want.size());
      ExpectMatch(to, r.top[0]->ToFloat(), w.ToFloat(), std::string("Quantizer from ") + Name(from));
    }
}

TEST(Layers, LossAndAccuracyFloatTypes) {
  for (DataType t : kFloats) {
    auto p = Param("type: 'SoftmaxWithLoss'", t);
    LayerRun r = Make(p, {{4, 5}, {4}}, 1);
    r.bottom[1]->FromFloat({0, 3, 4, 1});
    r.Forward();
    const auto x = Seen(*r.bottom[0]);
    double loss = 0;
    const int labels[] = {0, 3, 4, 1};
    for (int n = 0; n < 4; ++n) {
      double m = -1e30, s = 0;
      for (int c = 0; c < 5; ++c) m = std::max<double>(m, x[n * 5 + c]);
      for (int c = 0; c < 5; ++c) s += std::exp(x[n * 5 + c] - m);
      loss -= std::log(AsType(t, static_cast<float>(std::exp(x[n * 5 + labels[n]] - m) / s)));
    }
    ExpectMatch(t, r.top[0]->ToFloat(), {AsType(t, static_cast<float>(loss / 4))}, "SoftmaxWithLoss");

    LayerRun a = Make(Param("type: 'Accuracy' accuracy_param { top_k: 2 }", t), {{4, 5}, {4}}, 1);
    a.bottom[1]->FromFloat({0, 3, 4, 1});
    a.Forward();
    const auto ax = Seen(*a.bottom[0]);
    int correct = 0;
    for (int n = 0; n < 4; ++n) {
      int higher = 0;
      for (int c = 0; c < 5; ++c) higher += ax[n * 5 + c] > ax[n * 5 + labels[n]];
      correct += higher < 2;
    }
    ExpectMatch(t, a.top[0]->ToFloat(), {AsType(t, correct / 4.0f)}, "Accuracy");

    LayerRun e = Make(Param("type: 'EuclideanLoss'", t), {{3, 4}, {3, 4}}, 1);
    e.Forward();
    const auto e0 = Seen(*e.bottom[0]), e1 = Seen(*e.bottom[1]);
    double sum = 0;
    for (int i = 0; i < 12; ++i) sum += double(e0[i] - e1[i]) * (e0[i] - e1[i]);
    ExpectMatch(t, e.top[0]->ToFloat(), {AsType(t, static_cast<float>(sum / 3 / 2))}, "EuclideanLoss");
  }
}

// ---- libdnn-backed layers -------------------------------------------------------------------

/// Quantized output of an accumulator: clamp(z + requant(acc)).
float Requantized(DataType t, int64_t acc, quant::FixedPointMultiplier m, int32_t zero) {
  int64_t q = zero + (t == DataType::kInt8Q ? quant::Requantize32(static_cast<int32_t>(acc), m)
                                            : quant::Requantize64(acc, m));
  return static_cast<float>(std::min<int64_t>(std::max<int64_t>(q, TraitsOf(t).qmin), TraitsOf(t).qmax));
}

/// Bias in accumulator units as the layers compute it.
int64_t BiasUnits(float bias, double unit) { return static_cast<int64_t>(std::round(double(bias) / unit)); }

TEST(Layers, InnerProductEveryType) {
  for (DataType t : kAllDataTypes) {
    auto p = Param("type: 'InnerProduct' inner_product_param { num_output: 7 "
                   "weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'uniform' min: -1 max: 1 } }", t);
    SetRange(&p, "bottom", 0, -2, 2);
    SetRange(&p, "top", 0, -6, 6);
    LayerRun r = Make(p, {{3, 2, 5}}, 1);
    r.Forward();
    ASSERT_EQ(r.top[0]->shape(), (std::vector<int>{3, 7}));
    const auto x = r.bottom[0]->ToFloat(), w = r.layer->blobs()[0]->ToFloat();
    const auto b = r.layer->ParamAsFloat(1);
    std::vector<float> want(21);
    for (int m = 0; m < 3; ++m)
      for (int n = 0; n < 7; ++n) {
        if (IsQuantized(t)) {
          const auto xp = r.layer->BottomParams(0), wp = r.layer->BlobParams(0), cp = r.layer->TopParams(0);
          int64_t acc = BiasUnits(b[n], double(xp.scale[0]) * wp.scale[0]);
          for (int k = 0; k < 10; ++k)
            acc += int64_t(x[m * 10 + k] - xp.zero_point[0]) * int64_t(w[n * 10 + k] - wp.zero_point[0]);
          want[m * 7 + n] = Requantized(t, acc, quant::RequantizationMultiplier(xp.scale[0], wp.scale[0], cp.scale[0]),
                                        cp.zero_point[0]);
        } else {
          double acc = b[n];
          for (int k = 0; k < 10; ++k) acc += double(x[m * 10 + k]) * w[n * 10 + k];
          want[m * 7 + n] = AsType(t, static_cast<float>(acc));
        }
      }
    ExpectMatch(t, r.top[0]->ToFloat(), want, "InnerProduct");
  }
}

TEST(Layers, ConvolutionEveryTypeGroupsStridePadDilation) {
  for (DataType t : kAllDataTypes) {
    auto p = Param("type: 'Convolution' convolution_param { num_output: 4 kernel_size: 3 stride: 2 pad: 1 "
                   "dilation: 1 group: 2 weight_filler { type: 'gaussian' std: 0.3 } "
                   "bias_filler { type: 'uniform' min: -1 max: 1 } }", t);
    SetRange(&p, "bottom", 0, -2, 2);
    SetRange(&p, "top", 0, -5, 5);
    LayerRun r = Make(p, {{2, 4, 7, 6}}, 1);
    r.Forward();
    const int N = 2, C = 4, H = 7, W = 6, O = 4, G = 2, K = 3, S = 2, P = 1;
    const int OH = (H + 2 * P - K) / S + 1, OW = (W + 2 * P - K) / S + 1;
    ASSERT_EQ(r.top[0]->shape(), (std::vector<int>{N, O, OH, OW}));
    const auto x = r.bottom[0]->ToFloat(), w = r.layer->blobs()[0]->ToFloat();
    const auto b = r.layer->ParamAsFloat(1);
    quant::QuantParams xp, wp, cp;
    if (IsQuantized(t)) xp = r.layer->BottomParams(0), wp = r.layer->BlobParams(0), cp = r.layer->TopParams(0);
    std::vector<float> want(r.top[0]->count());
    const int cg = C / G, og = O / G;
    for (int n = 0; n < N; ++n)
      for (int o = 0; o < O; ++o)
        for (int oh = 0; oh < OH; ++oh)
          for (int ow = 0; ow < OW; ++ow) {
            double facc = 0;
            int64_t qacc = 0;
            const int g = o / og;
            for (int c = 0; c < cg; ++c)
              for (int kh = 0; kh < K; ++kh)
                for (int kw = 0; kw < K; ++kw) {
                  const int ih = oh * S - P + kh, iw = ow * S - P + kw;
                  if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                  const float xv = x[((n * C + g * cg + c) * H + ih) * W + iw];
                  const float wv = w[((o * cg + c) * K + kh) * K + kw];
                  facc += double(xv) * wv;
                  if (IsQuantized(t)) qacc += int64_t(xv - xp.zero_point[0]) * int64_t(wv - wp.zero_point[0]);
                }
            const size_t idx = ((n * O + o) * OH + oh) * OW + ow;
            if (IsQuantized(t)) {
              qacc += BiasUnits(b[o], double(xp.scale[0]) * wp.scale[0]);
              want[idx] = Requantized(t, qacc, quant::RequantizationMultiplier(xp.scale[0], wp.scale[0], cp.scale[0]),
                                      cp.zero_point[0]);
            } else {
              want[idx] = AsType(t, static_cast<float>(facc + b[o]));
            }
          }
    ExpectMatch(t, r.top[0]->ToFloat(), want, "Convolution");
  }
}

/// BVLC's deconvolution on the host: every bottom pixel scatters x·w[c][o][ky][kx] (Caffe's
/// weight layout [channels][num_output/group][kh][kw]) to top (y·s − p + ky·d, x·s − p + kx·d).
std::vector<float> DeconvReference(const std::vector<float>& x, const std::vector<float>& w,
                                   const std::vector<float>& b, int N, int C, int H, int W, int O,
                                   int G, int KH, int KW, int SH, int SW, int PH, int PW, int DH,
                                   int DW) {
  const int OH = SH * (H - 1) + DH * (KH - 1) + 1 - 2 * PH;
  const int OW = SW * (W - 1) + DW * (KW - 1) + 1 - 2 * PW;
  std::vector<double> y(size_t(N) * O * OH * OW, 0.0);
  const int cg = C / G, og = O / G;
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int iy = 0; iy < H; ++iy)
        for (int ix = 0; ix < W; ++ix) {
          const double xv = x[((size_t(n) * C + c) * H + iy) * W + ix];
          for (int o = 0; o < og; ++o)
            for (int ky = 0; ky < KH; ++ky)
              for (int kx = 0; kx < KW; ++kx) {
                const int oy = iy * SH - PH + ky * DH, ox = ix * SW - PW + kx * DW;
                if (oy < 0 || oy >= OH || ox < 0 || ox >= OW) continue;
                const int oc = c / cg * og + o;
                y[((size_t(n) * O + oc) * OH + oy) * OW + ox] +=
                    xv * w[((size_t(c) * og + o) * KH + ky) * KW + kx];
              }
        }
  std::vector<float> out(y.size());
  for (size_t i = 0; i < y.size(); ++i)
    out[i] = static_cast<float>(y[i] + (b.empty() ? 0.0 : b[i / (OH * OW) % O]));
  return out;
}

// Deconvolution in fp32 (the other types run in fp32 between conversions and are refused).
TEST(Layers, DeconvolutionMatchesTheReference) {
  struct Case {
    const char* proto;
    int C, H, W, O, G, KH, KW, SH, SW, PH, PW, DH, DW;
    bool bias;
  };
  const Case cases[] = {
      {"num_output: 3 kernel_size: 4 stride: 2 pad: 1", 2, 5, 4, 3, 1, 4, 4, 2, 2, 1, 1, 1, 1, true},
      {"num_output: 4 kernel_size: 3 stride: 2 group: 2", 6, 3, 5, 4, 2, 3, 3, 2, 2, 0, 0, 1, 1, true},
      {"num_output: 2 kernel_h: 3 kernel_w: 2 stride_h: 1 stride_w: 3 pad_h: 1 pad_w: 0 "
       "bias_term: false", 3, 4, 3, 2, 1, 3, 2, 1, 3, 1, 0, 1, 1, false},
      {"num_output: 2 kernel_size: 3 dilation: 2 stride: 3", 2, 3, 3, 2, 1, 3, 3, 3, 3, 0, 0, 2, 2, true},
      {"num_output: 1 kernel_size: 1", 3, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, true},
  };
  for (const Case& c : cases) {
    const std::string proto = std::string("name: 'up' type: 'Deconvolution' convolution_param { ") +
                              c.proto + " weight_filler { type: 'gaussian' std: 0.5 } "
                              "bias_filler { type: 'uniform' min: -1 max: 1 } }";
    LayerRun r = Make(Param(proto, DataType::kFloat32), {{2, c.C, c.H, c.W}}, 1);
    ASSERT_EQ(r.layer->blobs()[0]->shape(), (std::vector<int>{c.C, c.O / c.G, c.KH, c.KW})) << c.proto;
    r.Forward();
    const int OH = c.SH * (c.H - 1) + c.DH * (c.KH - 1) + 1 - 2 * c.PH;
    const int OW = c.SW * (c.W - 1) + c.DW * (c.KW - 1) + 1 - 2 * c.PW;
    ASSERT_EQ(r.top[0]->shape(), (std::vector<int>{2, c.O, OH, OW})) << c.proto;
    const auto want = DeconvReference(r.bottom[0]->ToFloat(), r.layer->ParamAsFloat(0),
                                      c.bias ? r.layer->ParamAsFloat(1) : std::vector<float>{}, 2,
                                      c.C, c.H, c.W, c.O, c.G, c.KH, c.KW, c.SH, c.SW, c.PH, c.PW,
                                      c.DH, c.DW);
    ExpectMatch(DataType::kFloat32, r.top[0]->ToFloat(), want, c.proto);
    // A second, larger bottom reshapes the top and the convolution behind it.
    r.bottom[0]->Reshape({1, c.C, c.H + 1, c.W + 2});
    r.bottom[0]->FromFloat(std::vector<float>(r.bottom[0]->count(), 0.5f));
    r.layer->Reshape(r.bottom, r.top);
    r.Forward();
    ExpectMatch(DataType::kFloat32, r.top[0]->ToFloat(),
                DeconvReference(r.bottom[0]->ToFloat(), r.layer->ParamAsFloat(0),
                                c.bias ? r.layer->ParamAsFloat(1) : std::vector<float>{}, 1, c.C,
                                c.H + 1, c.W + 2, c.O, c.G, c.KH, c.KW, c.SH, c.SW, c.PH, c.PW,
                                c.DH, c.DW),
                std::string(c.proto) + " reshaped");
  }
  for (DataType t : {DataType::kFloat16, DataType::kInt8Q, DataType::kInt16Q}) {
    try {
      Make(Param("name: 'q' type: 'Deconvolution' convolution_param { num_output: 2 kernel_size: 2 }", t),
           {{1, 2, 3, 3}}, 1);
      ADD_FAILURE() << "Deconvolution accepted " << Name(t);
    } catch (const LayerError& e) {
      EXPECT_NE(std::string(e.what()).find("'q' (Deconvolution): does not compute in"),
                std::string::npos) << e.what();
    }
  }
  for (const char* bad : {"num_output: 2 kernel_size: 2 group: 2",   // 3 channels
                          "num_output: 2",                           // no kernel
                          "num_output: 2 kernel_size: 4 pad: 3"}) {  // empty output
    try {
      Make(Param(std::string("name: 'bad' type: 'Deconvolution' convolution_param { ") + bad + " }",
                 DataType::kFloat32), {{1, 3, 1, 1}}, 1);
      ADD_FAILURE() << bad;
    } catch (const LayerError& e) {
      EXPECT_NE(std::string(e.what()).find("'bad' (Deconvolution)"), std::string::npos) << e.what();
    }
  }
}

// Im2col in the float types: row (c·kh + ky)·kw + kx of an image's columns holds channel c at
// window offset (ky, kx), 0 outside the padded input.
TEST(Layers, Im2colFloatTypes) {
  struct Case {
    const char* proto;
    int C, H, W, KH, KW, SH, SW, PH, PW, DH, DW;
  };
  const Case cases[] = {
      {"kernel_size: 3 stride: 2 pad: 1", 2, 5, 6, 3, 3, 2, 2, 1, 1, 1, 1},
      {"kernel_h: 2 kernel_w: 3 stride_h: 1 stride_w: 2 pad_h: 0 pad_w: 2 dilation: 2", 3, 4, 5, 2, 3,
       1, 2, 0, 2, 2, 2},
  };
  for (DataType t : kFloats)
    for (const Case& c : cases) {
      LayerRun r = Make(Param(std::string("type: 'Im2col' convolution_param { ") + c.proto + " }", t),
                        {{2, c.C, c.H, c.W}}, 1);
      r.Forward();
      const int OH = (c.H + 2 * c.PH - (c.DH * (c.KH - 1) + 1)) / c.SH + 1;
      const int OW = (c.W + 2 * c.PW - (c.DW * (c.KW - 1) + 1)) / c.SW + 1;
      ASSERT_EQ(r.top[0]->shape(), (std::vector<int>{2, c.C * c.KH * c.KW, OH, OW})) << c.proto;
      const auto x = r.bottom[0]->ToFloat();
      std::vector<float> want(r.top[0]->count());
      size_t i = 0;
      for (int n = 0; n < 2; ++n)
        for (int ch = 0; ch < c.C; ++ch)
          for (int ky = 0; ky < c.KH; ++ky)
            for (int kx = 0; kx < c.KW; ++kx)
              for (int oy = 0; oy < OH; ++oy)
                for (int ox = 0; ox < OW; ++ox, ++i) {
                  const int iy = oy * c.SH - c.PH + ky * c.DH, ix = ox * c.SW - c.PW + kx * c.DW;
                  want[i] = iy < 0 || iy >= c.H || ix < 0 || ix >= c.W
                                ? 0.0f
                                : x[((n * c.C + ch) * c.H + iy) * c.W + ix];
                }
      ExpectMatch(t, r.top[0]->ToFloat(), want, c.proto);
    }
  try {
    Make(Param("name: 'q' type: 'Im2col' convolution_param { kernel_size: 2 }", DataType::kInt8Q),
         {{1, 2, 3, 3}}, 1);
    ADD_FAILURE() << "Im2col accepted int8";
  } catch (const LayerError& e) {
    EXPECT_NE(std::string(e.what()).find("'q' (Im2col): does not compute in"), std::string::npos)
        << e.what();
  }
  try {
    Make(Param("name: 'big' type: 'Im2col' convolution_param { kernel_size: 5 }", DataType::kFloat32),
         {{1, 2, 3, 3}}, 1);
    ADD_FAILURE() << "a 5x5 window on 3x3";
  } catch (const LayerError& e) {
    EXPECT_NE(std::string(e.what()).find("'big' (Im2col)"), std::string::npos) << e.what();
  }
}

/// The 4-bit weights of parameter blob 0 as signed values (the blob stores w + 128).
std::vector<int> Int4Values(Layer& l) {
  const auto stored = l.blobs()[0]->ToFloat();
  std::vector<int> w(stored.size());
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int>(stored[i]) - 128;
  return w;
}

caffe::LayerParameter Int4Param(const std::string& text) {
  auto p = Param(text, DataType::kInt8Q);
  p.add_blobs_quantizer()->set_weight_bits(4);
  return p;
}

// int8 activations × 4-bit weights, per-channel scales: bit-exact against the integer pipeline
// acc = Σ (x − z_x)·w + bias, out = clamp(z_c + Requantize32(acc, M[o])). An odd K (15) packs a
// half-empty last byte per channel.
TEST(Layers, InnerProductInt4WeightsMatchTheIntegerReference) {
  auto p = Int4Param("type: 'InnerProduct' inner_product_param { num_output: 6 "
                     "weight_filler { type: 'gaussian' std: 0.5 } bias_filler { type: 'uniform' min: -1 max: 1 } }");
  SetRange(&p, "bottom", 0, -1, 3);
  SetRange(&p, "top", 0, -6, 6);
  for (int m : {1, 4}) {
    LayerRun r = Make(p, {{m, 3, 5}}, 1);
    r.Forward();
    const auto x = r.bottom[0]->ToFloat();
    const auto w = Int4Values(*r.layer);
    const auto b = r.layer->ParamAsFloat(1);
    const auto xp = r.layer->BottomParams(0), wp = r.layer->BlobParams(0), cp = r.layer->TopParams(0);
    ASSERT_EQ(wp.scale.size(), 6u);
    for (int v : w) ASSERT_TRUE(v >= -8 && v <= 7) << v;
    std::vector<float> want(m * 6);
    for (int i = 0; i < m; ++i)
      for (int n = 0; n < 6; ++n) {
        int64_t acc = BiasUnits(b[n], double(xp.scale[0]) * wp.scale[n]);
        for (int k = 0; k < 15; ++k) acc += int64_t(x[i * 15 + k] - xp.zero_point[0]) * w[n * 15 + k];
        want[i * 6 + n] = Requantized(DataType::kInt8Q, acc,
                                      quant::RequantizationMultiplier(xp.scale[0], wp.scale[n], cp.scale[0]),
                                      cp.zero_point[0]);
      }
    ExpectMatch(DataType::kInt8Q, r.top[0]->ToFloat(), want, "InnerProduct int8w4 m=" + std::to_string(m));
    // The dequantized weights are the 4-bit grid of each channel.
    const auto real = r.layer->ParamAsFloat(0);
    for (size_t i = 0; i < real.size(); ++i) ASSERT_FLOAT_EQ(real[i], wp.scale[i / 15] * w[i]);
    // New values (trained weights after drawn filler values) bring their own scales.
    std::vector<float> trained(real.size());
    for (size_t i = 0; i < trained.size(); ++i) trained[i] = 3.0f * real[i] + 0.01f * float(i % 7);
    r.layer->SetParamFromFloat(0, trained);
    EXPECT_EQ(r.layer->BlobParams(0).scale,
              quant::ChooseInt4Scales(trained.data(), 6, 15, quant::Int4ScaleMethod::kMinMse));
  }
}

TEST(Layers, ConvolutionInt4WeightsMatchTheIntegerReference) {
  auto p = Int4Param("type: 'Convolution' convolution_param { num_output: 4 kernel_size: 3 stride: 2 pad: 1 "
                     "group: 2 weight_filler { type: 'gaussian' std: 0.3 } "
                     "bias_filler { type: 'uniform' min: -1 max: 1 } }");
  SetRange(&p, "bottom", 0, -2, 2);
  SetRange(&p, "top", 0, -5, 5);
  LayerRun r = Make(p, {{2, 6, 7, 6}}, 1);  // K = 3·3·3 = 27 per channel (odd)
  r.Forward();
  const int N = 2, C = 6, H = 7, W = 6, O = 4, G = 2, K = 3, S = 2, P = 1;
  const int OH = (H + 2 * P - K) / S + 1, OW = (W + 2 * P - K) / S + 1;
  const auto x = r.bottom[0]->ToFloat();
  const auto w = Int4Values(*r.layer);
  const auto b = r.layer->ParamAsFloat(1);
  const auto xp = r.layer->BottomParams(0), wp = r.layer->BlobParams(0), cp = r.layer->TopParams(0);
  std::vector<float> want(r.top[0]->count());
  const int cg = C / G, og = O / G;
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < O; ++o)
      for (int oh = 0; oh < OH; ++oh)
        for (int ow = 0; ow < OW; ++ow) {
          int64_t acc = BiasUnits(b[o], double(xp.scale[0]) * wp.scale[o]);
          const int g = o / og;
          for (int c = 0; c < cg; ++c)
            for (int kh = 0; kh < K; ++kh)
              for (int kw = 0; kw < K; ++kw) {
                const int ih = oh * S - P + kh, iw = ow * S - P + kw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc += int64_t(x[((n * C + g * cg + c) * H + ih) * W + iw] - xp.zero_point[0]) *
                       w[((o * cg + c) * K + kh) * K + kw];
              }
          want[((n * O + o) * OH + oh) * OW + ow] = Requantized(
              DataType::kInt8Q, acc, quant::RequantizationMultiplier(xp.scale[0], wp.scale[o], cp.scale[0]),
              cp.zero_point[0]);
        }
  ExpectMatch(DataType::kInt8Q, r.top[0]->ToFloat(), want, "Convolution int8w4");
  // The 16-bit accumulator option counts every product of the pass.
  r.layer->set_simulate_acc16(true);
  r.Forward();
  EXPECT_EQ(r.layer->acc16_overflow().outputs, uint64_t(N) * O * OH * OW);
  EXPECT_EQ(r.layer->acc16_overflow().steps, uint64_t(N) * O * OH * OW * cg * K * K);
}

TEST(Layers, Int4WeightsAreRefusedWhereTheyCannotApply) {
  auto expect_error = [](caffe::LayerParameter p, const std::vector<int>& shape, const std::string& part) {
    try {
      Make(p, {shape}, 1);
      ADD_FAILURE() << "no error for " << p.ShortDebugString();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("'L'"), std::string::npos) << e.what();
    }
  };
  const std::string ip = "type: 'InnerProduct' inner_product_param { num_output: 2 }";
  auto int16 = Param(ip, DataType::kInt16Q);
  int16.add_blobs_quantizer()->set_weight_bits(4);
  expect_error(int16, {1, 4}, "int16");
  auto bias = Param(ip, DataType::kInt8Q);
  bias.add_blobs_quantizer();
  bias.add_blobs_quantizer()->set_weight_bits(4);
  expect_error(bias, {1, 4}, "parameter blob 1");
  auto transposed = Int4Param("type: 'InnerProduct' inner_product_param { num_output: 2 transpose: true }");
  expect_error(transposed, {1, 4}, "transpose");
  auto bits = Param(ip, DataType::kInt8Q);
  bits.add_blobs_quantizer()->set_weight_bits(3);
  expect_error(bits, {1, 4}, "weight_bits");
}

TEST(Layers, PoolingEveryTypeMatchesTheReference) {
  for (DataType t : kAllDataTypes)
    for (const char* text : {"pool: MAX kernel_size: 3 stride: 2", "pool: AVE kernel_size: 3 stride: 2 pad: 1",
                             "pool: AVE global_pooling: true"}) {
      auto p = Param(std::string("type: 'Pooling' pooling_param { ") + text + " }", t);
      SetRange(&p, "bottom", 0, -2, 2);
      SetRange(&p, "top", 0, -1, 2);
      LayerRun r = Make(p, {{2, 3, 7, 7}}, 1);
      r.Forward();
      libdnn::PoolDesc d;
      d.type = t;
      const std::string s = text;
      d.method = s.find("MAX") != std::string::npos ? libdnn::PoolMethod::kMax : libdnn::PoolMethod::kAverage;
      d.batch = 2, d.channels = 3, d.height = 7, d.width = 7;
      d.global = s.find("global") != std::string::npos;
      d.kernel_h = d.kernel_w = 3;
      d.stride_h = d.stride_w = 2;
      d.pad_h = d.pad_w = s.find("pad") != std::string::npos ? 1 : 0;
      libdnn::PoolQuant q;
      if (IsQuantized(t)) {
        const Affine x = r.layer->BottomAffine(0), y = r.layer->TopAffine(0);
        q = {x.scale, x.zero_point, y.scale, y.zero_point};
      }
      Blob want(Dev(), t, {2, 3, d.out_h(), d.out_w()});
      ASSERT_EQ(r.top[0]->shape(), want.shape()) << text;
      libdnn::PoolForwardReference(d, q, r.bottom[0]->host_data(), want.mutable_host_data(), nullptr);
      ExpectMatch(t, r.top[0]->ToFloat(), want.ToFloat(), text);
    }
}

/// Caffe's pooling of one (C, H, W) image plane set: window [h·s − p, h·s − p + k) clipped to
/// the input, average divided by the window clipped to the padded input.
std::vector<float> CaffePool(const std::vector<float>& x, size_t base, int C, int H, int W, int k_h,
                             int k_w, int p_h, int p_w, bool max, int* oh_out, int* ow_out) {
  auto extent = [](int size, int k, int p) {
    int o = static_cast<int>(std::ceil(float(size + 2 * p - k) / k)) + 1;
    if (p > 0 && (o - 1) * k >= size + p) --o;
    return o;
  };
  const int OH = extent(H, k_h, p_h), OW = extent(W, k_w, p_w);
  *oh_out = OH, *ow_out = OW;
  std::vector<float> y;
  for (int c = 0; c < C; ++c)
    for (int oy = 0; oy < OH; ++oy)
      for (int ox = 0; ox < OW; ++ox) {
        int hs = oy * k_h - p_h, ws = ox * k_w - p_w;
        int he = std::min(hs + k_h, H + p_h), we = std::min(ws + k_w, W + p_w);
        const int size = (he - hs) * (we - ws);
        hs = std::max(hs, 0), ws = std::max(ws, 0), he = std::min(he, H), we = std::min(we, W);
        double acc = max ? -1e30 : 0.0;
        for (int iy = hs; iy < he; ++iy)
          for (int ix = ws; ix < we; ++ix) {
            const float v = x[base + (size_t(c) * H + iy) * W + ix];
            acc = max ? std::max(acc, double(v)) : acc + v;
          }
        y.push_back(static_cast<float>(max ? acc : acc / size));
      }
  return y;
}

// SPP in the float types against BVLC's pyramid: level l pools into 2^l × 2^l bins, levels
// flattened and concatenated per image (the quantized types: spp_quantized_test.cc).
TEST(Layers, SPPFloatTypes) {
  for (DataType t : kFloats)
    for (const char* pool : {"MAX", "AVE"})
      for (int height : {1, 3}) {
        const std::string proto = "type: 'SPP' spp_param { pyramid_height: " + std::to_string(height) +
                                  " pool: " + pool + " }";
        const int N = 2, C = 3, H = 7, W = 6;
        LayerRun r = Make(Param(proto, t), {{N, C, H, W}}, 1);
        r.Forward();
        const auto x = r.bottom[0]->ToFloat();
        std::vector<float> want;
        for (int n = 0; n < N; ++n)
          for (int l = 0; l < height; ++l) {
            const int bins = 1 << l, kh = (H + bins - 1) / bins, kw = (W + bins - 1) / bins;
            int oh = 0, ow = 0;
            const auto y = CaffePool(x, size_t(n) * C * H * W, C, H, W, kh, kw,
                                     (kh * bins - H + 1) / 2, (kw * bins - W + 1) / 2,
                                     std::string(pool) == "MAX", &oh, &ow);
            EXPECT_EQ(oh, bins) << proto;
            for (float v : y) want.push_back(AsType(t, v));
          }
        const std::vector<int> shape = height == 1 ? std::vector<int>{N, C, 1, 1}
                                                   : std::vector<int>{N, C * (1 + 4 + 16)};
        EXPECT_EQ(r.top[0]->shape(), shape) << proto;
        ExpectMatch(t, r.top[0]->ToFloat(), want, proto);
      }
  try {
    Make(Param("name: 'tiny' type: 'SPP' spp_param { pyramid_height: 3 }", DataType::kFloat32),
         {{1, 1, 2, 2}}, 1);
    ADD_FAILURE() << "4x4 bins of a 2x2 bottom";
  } catch (const LayerError& e) {
    EXPECT_NE(std::string(e.what()).find("'tiny' (SPP): pyramid level 2"), std::string::npos) << e.what();
  }
}

TEST(Layers, LRNFloatTypes) {
  for (DataType t : kFloats) {
    LayerRun r = Make(Param("type: 'LRN' lrn_param { local_size: 5 alpha: 0.0001 beta: 0.75 }", t), {{2, 7, 3, 3}}, 1);
    r.Forward();
    libdnn::LrnDesc d;
    d.type = t;
    d.batch = 2, d.channels = 7, d.height = 3, d.width = 3;
    d.local_size = 5, d.alpha = 0.0001f, d.beta = 0.75f, d.k = 1.0f;
    Blob want(Dev(), t, {2, 7, 3, 3});
    libdnn::LrnForwardReference(d, r.bottom[0]->host_data(), want.mutable_host_data(), nullptr);
    ExpectMatch(t, r.top[0]->ToFloat(), want.ToFloat(), "LRN");
  }
}

// WITHIN_CHANNEL as BVLC composes it: y = x·(1 + alpha·avg(x²))^−beta, the average over the
// size × size window with pad (size − 1)/2 divided by size² (padding counts); k is not used.
TEST(Layers, LRNWithinChannelFloatTypes) {
  for (DataType t : kFloats) {
    LayerRun r = Make(Param("type: 'LRN' lrn_param { local_size: 3 alpha: 0.5 beta: 0.75 k: 7 "
                            "norm_region: WITHIN_CHANNEL }", t), {{2, 2, 4, 5}}, 1);
    r.Forward();
    const auto x = Seen(*r.bottom[0]);
    std::vector<float> want(x.size());
    for (int p = 0; p < 4; ++p)
      for (int h = 0; h < 4; ++h)
        for (int w = 0; w < 5; ++w) {
          double sum = 0;
          for (int dh = -1; dh <= 1; ++dh)
            for (int dw = -1; dw <= 1; ++dw)
              if (h + dh >= 0 && h + dh < 4 && w + dw >= 0 && w + dw < 5)
                sum += double(x[p * 20 + (h + dh) * 5 + w + dw]) * x[p * 20 + (h + dh) * 5 + w + dw];
          const int i = p * 20 + h * 5 + w;
          want[i] = AsType(t, static_cast<float>(x[i] * std::pow(1 + 0.5 * sum / 9, -0.75)));
        }
    ExpectMatch(t, r.top[0]->ToFloat(), want, "LRN WITHIN_CHANNEL");
  }
}

// ---- BVLC's other losses -----------------------------------------------------------------------

/// Labels 0..classes−1 cycling over `n` positions (stored as the layer's float type).
std::vector<float> CyclicLabels(int n, int classes, int offset = 0) {
  std::vector<float> l(n);
  for (int i = 0; i < n; ++i) l[i] = static_cast<float>((i + offset) % classes);
  return l;
}

/// The message of the LayerError a layer of `text` on `shapes` gives (empty when it gives none).
std::string LossRefusal(const std::string& text, const std::vector<std::vector<int>>& shapes,
                        DataType t = DataType::kFloat32) {
  try {
    LayerRun r = Make(Param(text, t), shapes, 1);
    r.Forward();
  } catch (const LayerError& e) {
    return e.what();
  }
  return "";
}

// BVLC's one-vs-all hinge loss, L1 and L2: Σ max(0, 1 ± x)^p / num (− at the label).
TEST(Layers, HingeLossFloatTypes) {
  for (DataType t : kFloats)
    for (const char* proto :
         {"type: 'HingeLoss'", "type: 'HingeLoss' hinge_loss_param { norm: L2 }"}) {
      const bool l2 = std::string(proto).find("L2") != std::string::npos;
      LayerRun r = Make(Param(proto, t), {{4, 5}, {4}}, 1);
      r.bottom[1]->FromFloat(CyclicLabels(4, 5, 2));
      r.Forward();
      const auto x = Seen(*r.bottom[0]);
      double sum = 0;
      for (int i = 0; i < 4; ++i)
        for (int c = 0; c < 5; ++c) {
          const double m = std::max(0.0, 1.0 + (c == (i + 2) % 5 ? -1 : 1) * double(x[i * 5 + c]));
          sum += l2 ? m * m : m;
        }
      ExpectMatch(t, r.top[0]->ToFloat(), {AsType(t, static_cast<float>(sum / 4))}, proto);
    }
}

// −Σ log(max(p[label], 1e-20)) / num over probabilities.
TEST(Layers, MultinomialLogisticLossFloatTypes) {
  for (DataType t : kFloats) {
    LayerRun r = Make(Param("type: 'MultinomialLogisticLoss'", t), {{3, 4, 1, 1}, {3, 1, 1, 1}}, 1);
    std::vector<float> p(12);
    for (int i = 0; i < 12; ++i) p[i] = 0.05f + 0.07f * i;
    p[6] = 0.0f;  // clamped to 1e-20
    r.bottom[0]->FromFloat(p);
    r.bottom[1]->FromFloat({1, 3, 2});
    r.Forward();
    const auto seen = Seen(*r.bottom[0]);
    double sum = 0;
    const int label[3] = {1, 3, 2};
    for (int i = 0; i < 3; ++i) sum -= std::log(std::max(double(seen[i * 4 + label[i]]), 1e-20));
    ExpectMatch(t, r.top[0]->ToFloat(), {AsType(t, static_cast<float>(sum / 3))},
                "MultinomialLogisticLoss");
  }
}

// Σ [y ? d² : max(0, margin − d)²] / 2num (legacy_version: max(0, margin − d²)).
TEST(Layers, ContrastiveLossFloatTypes) {
  for (DataType t : kFloats)
    for (const char* proto :
         {"type: 'ContrastiveLoss' contrastive_loss_param { margin: 3 }",
          "type: 'ContrastiveLoss' contrastive_loss_param { margin: 4 legacy_version: true }"}) {
      const bool legacy = std::string(proto).find("legacy") != std::string::npos;
      const double margin = legacy ? 4 : 3;
      LayerRun r = Make(Param(proto, t), {{5, 3, 1, 1}, {5, 3, 1, 1}, {5, 1, 1, 1}}, 1);
      const std::vector<float> y = {1, 0, 0, 1, 0};
      r.bottom[2]->FromFloat(y);
      r.Forward();
      const auto a = Seen(*r.bottom[0]), b = Seen(*r.bottom[1]);
      double sum = 0;
      for (int i = 0; i < 5; ++i) {
        double d2 = 0;
        for (int c = 0; c < 3; ++c) d2 += std::pow(double(a[i * 3 + c]) - b[i * 3 + c], 2);
        if (y[i] != 0)
          sum += d2;
        else if (legacy)
          sum += std::max(margin - d2, 0.0);
        else
          sum += std::pow(std::max(margin - std::sqrt(d2), 0.0), 2);
      }
      ExpectMatch(t, r.top[0]->ToFloat(), {AsType(t, static_cast<float>(sum / 10))}, proto);
    }
}

/// BVLC's InfogainLoss reference: softmax along axis 1 of (outer, channels, inner), then
/// −Σ_c H[l, c]·log(max(p_c, 1e-20)) per position, over the valid positions (or `norm`).
double InfogainReference(const std::vector<float>& x, const std::vector<float>& labels,
                         const std::vector<float>& h, int outer, int channels, int inner,
                         int ignore, double norm) {
  double sum = 0;
  int valid = 0;
  for (int o = 0; o < outer; ++o)
    for (int j = 0; j < inner; ++j) {
      const int l = static_cast<int>(labels[o * inner + j]);
      if (l == ignore) continue;
      ++valid;
      double m = -1e30, z = 0;
      for (int c = 0; c < channels; ++c) m = std::max(m, double(x[(o * channels + c) * inner + j]));
      for (int c = 0; c < channels; ++c) z += std::exp(x[(o * channels + c) * inner + j] - m);
      for (int c = 0; c < channels; ++c) {
        const double p = std::exp(x[(o * channels + c) * inner + j] - m) / z;
        sum -= h[l * channels + c] * std::log(std::max(p, 1e-20));
      }
    }
  return sum / (norm > 0 ? norm : std::max(valid, 1));
}

// The infogain matrix from a third bottom (here with negative entries, ignore_label, VALID) and
// from infogain_loss_param.source (BATCH_SIZE, a spatial axis), with the probabilities top.
TEST(Layers, InfogainLossFloatTypes) {
  const std::vector<float> h = {1.0f, 0.5f, -0.25f, 0.0f, 2.0f, 0.25f, 0.75f, -0.5f, 1.5f};
  char dir[] = "/tmp/infogain_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string source = std::string(dir) + "/H.binaryproto";
  WriteBlobProtoBinary(source, MeanBlobProto(1, 3, 3, h));
  for (DataType t : kFloats) {
    LayerRun r = Make(Param("type: 'InfogainLoss' loss_param { ignore_label: 2 }", t),
                      {{2, 3, 2, 2}, {2, 1, 2, 2}, {1, 1, 3, 3}}, 2);
    const std::vector<float> labels = {0, 1, 2, 1, 2, 0, 0, 1};
    r.bottom[1]->FromFloat(labels);
    r.bottom[2]->FromFloat(h);
    r.Forward();
    const double want =
        InfogainReference(Seen(*r.bottom[0]), labels, Seen(*r.bottom[2]), 2, 3, 4, 2, 0);
    ExpectMatch(t, r.top[0]->ToFloat(), {AsType(t, static_cast<float>(want))},
                "InfogainLoss bottom H");
    EXPECT_EQ(r.top[1]->shape(), r.bottom[0]->shape());

    // axis 2 of (2, 1, 3, 2): outer 2, inner 2.
    LayerRun s = Make(Param("type: 'InfogainLoss' infogain_loss_param { source: '" + source +
                                "' axis: 2 } loss_param { normalization: BATCH_SIZE }",
                            t),
                      {{2, 1, 3, 2}, {2, 2}}, 1);
    s.bottom[1]->FromFloat({2, 0, 1, 1});
    s.Forward();
    const double want_s = InfogainReference(Seen(*s.bottom[0]), {2, 0, 1, 1}, h, 2, 3, 2, -1, 2);
    ExpectMatch(t, s.top[0]->ToFloat(), {AsType(t, static_cast<float>(want_s))},
                "InfogainLoss source H");
  }
  std::remove(source.c_str());
  rmdir(dir);
}

// Wrong shapes, a missing matrix and quantized types: errors naming the layer and what is wrong.
TEST(Layers, OtherLossesRefuseBadInput) {
  const std::vector<std::pair<std::string, std::vector<std::vector<int>>>> cases = {
      {"name: 'h' type: 'HingeLoss'", {{4, 5}, {3}}},
      {"name: 'h' type: 'MultinomialLogisticLoss'", {{4, 5}, {4, 2}}},
      {"name: 'h' type: 'ContrastiveLoss'", {{4, 5}, {4, 4}, {4}}},
      {"name: 'h' type: 'ContrastiveLoss'", {{4, 5}, {4, 5}, {2}}},
      {"name: 'h' type: 'InfogainLoss'", {{4, 5}, {4}}},
      {"name: 'h' type: 'InfogainLoss'", {{4, 5}, {4}, {4, 4}}},
      {"name: 'h' type: 'InfogainLoss'", {{4, 5}, {5}, {5, 5}}},
      {"name: 'h' type: 'InfogainLoss' infogain_loss_param { source: '/nonexistent/H.binaryproto' "
       "}",
       {{4, 5}, {4}}}};
  for (const auto& c : cases) {
    const std::string m = LossRefusal(c.first, c.second);
    EXPECT_NE(m.find("'h'"), std::string::npos) << c.first << ": " << m;
  }
  EXPECT_NE(LossRefusal("name: 'h' type: 'InfogainLoss'", {{4, 5}, {4}}).find("source"),
            std::string::npos);
  EXPECT_NE(LossRefusal("name: 'h' type: 'InfogainLoss'", {{4, 5}, {4}, {4, 4}}).find("16 values"),
            std::string::npos);
  const std::vector<std::pair<std::string, std::vector<std::vector<int>>>> typed = {
      {"HingeLoss", {{2, 3}, {2}}},
      {"MultinomialLogisticLoss", {{2, 3}, {2}}},
      {"ContrastiveLoss", {{2, 3}, {2, 3}, {2}}},
      {"InfogainLoss", {{2, 3}, {2}, {3, 3}}}};
  for (DataType q : {DataType::kInt8Q, DataType::kInt16Q})
    for (const auto& c : typed) {
      const std::string m = LossRefusal("name: 'q' type: '" + c.first + "'", c.second, q);
      EXPECT_NE(m.find("'q' (" + c.first + "): does not compute in"), std::string::npos) << m;
    }
}

// Parameter: its blob of parameter_param.shape (zeros, or the model's values) as its top.
TEST(Layers, ParameterFloatTypes) {
  for (DataType t : kFloats) {
    LayerRun r =
        Make(Param("type: 'Parameter' parameter_param { shape { dim: 2 dim: 3 } }", t), {}, 1);
    EXPECT_EQ(r.top[0]->shape(), (std::vector<int>{2, 3}));
    r.Forward();
    ExpectMatch(t, r.top[0]->ToFloat(), std::vector<float>(6, 0.0f), "Parameter zeros");
    const std::vector<float> v = {0.5f, -1.25f, 2.0f, 3.5f, -0.75f, 0.125f};
    r.layer->blobs()[0]->FromFloat(v);
    r.Forward();
    ExpectMatch(t, r.top[0]->ToFloat(), v, "Parameter values");
  }
  EXPECT_NE(
      LossRefusal("name: 'h' type: 'Parameter'", {}).find("'h' (Parameter): parameter_param.shape"),
      std::string::npos);
}

TEST(Layers, ErrorsNameTheLayer) {
  auto p = Param("name: 'act' type: 'Sigmoid'", DataType::kInt8Q);
  try {
    Make(p, {{2, 2}}, 1);
    FAIL();
  } catch (const LayerError& e) {
    EXPECT_NE(std::string(e.what()).find("'act'"), std::string::npos) << e.what();
  }
  auto q = Param("name: 'r' type: 'ReLU'", DataType::kInt8Q);  // no ranges: a clear error
  LayerRun r = Make(q, {{2, 2}}, 1);
  try {
    r.Forward();
    FAIL();
  } catch (const LayerError& e) {
    EXPECT_NE(std::string(e.what()).find("calibrate"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mpcaffe

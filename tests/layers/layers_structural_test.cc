// tests/layers/layers_structural_test.cc — the element-wise and structural layers in each of their
// data types against plain C++ references (fp32 1e-5 relative, fp16 within half precision,
// quantized types exactly equal to the reference integer arithmetic).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <random>

#include "layers/blob.h"
#include "layers/image_io.h"
#include "layers/layer_registry.h"
#include "libdnn/lrn.h"
#include "libdnn/pool.h"
#include "proto/model_io.h"
#include "tests/layers/layer_harness.h"
#include "tests/testing/net_support.h"
#include "quant/fixed_point.h"
#include "quant/quant_params.h"

namespace mpcaffe {
namespace {

using namespace layer_harness;  // NOLINT: the shared harness of the layer tests

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
    // Positions along an inner axis, and a classifier's rows of 1000, 70, 21 and 10 channels
    // (fp32 on a CPU runtime: in vectors of 8 and a tail from 16 channels on); rows fewer than
    // their channels (256 and more) run a work-group each where groups reduce: along an inner
    // axis too, and rows no multiple of the group.
    for (const std::vector<int>& shape :
         {std::vector<int>{2, 5, 3}, std::vector<int>{3, 1000}, std::vector<int>{2, 70},
          std::vector<int>{40, 21}, std::vector<int>{4, 10}, std::vector<int>{2, 300, 3},
          std::vector<int>{1, 4099}}) {
      LayerRun r = Make(Param("type: 'Softmax'", t), {shape}, 1);
      r.Forward();
      const auto x = Seen(*r.bottom[0]);
      const int outer = shape[0], channels = shape[1], inner = shape.size() > 2 ? shape[2] : 1;
      std::vector<float> want(x.size());
      for (int n = 0; n < outer; ++n)
        for (int i = 0; i < inner; ++i) {
          auto at = [&](int c) { return (n * channels + c) * inner + i; };
          double m = -1e30, s = 0;
          for (int c = 0; c < channels; ++c) m = std::max<double>(m, x[at(c)]);
          for (int c = 0; c < channels; ++c) s += std::exp(x[at(c)] - m);
          for (int c = 0; c < channels; ++c)
            want[at(c)] = AsType(t, static_cast<float>(std::exp(x[at(c)] - m) / s));
        }
      ExpectMatch(t, r.top[0]->ToFloat(), want, "Softmax " + std::to_string(channels));
    }
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
    // 30 values (3 vectors of 8 and a tail of 6), and 2751 (343 vectors over many work-items of
    // the vector form, a tail of 7).
    for (const Case& c : cases)
      for (const std::vector<int>& shape : {std::vector<int>{2, 3, 5}, std::vector<int>{3, 7, 131}}) {
        LayerRun r = Make(Param(c.proto, t), {shape}, 1);
        r.Forward();
        std::vector<float> want;
        for (float x : Seen(*r.bottom[0])) want.push_back(AsType(t, static_cast<float>(c.f(x))));
        ExpectMatch(t, r.top[0]->ToFloat(), want, c.proto);
      }
    // PReLU and Bias over planes of 143 (vectors of 8 and a tail) in many work-items.
    {
      LayerRun pl = Make(Param("type: 'PReLU'", t), {{2, 5, 13, 11}}, 1);
      const std::vector<float> slopes{0.25f, -0.5f, 2.0f, 0.0f, 1.5f};
      pl.layer->SetParamFromFloat(0, slopes);
      pl.Forward();
      LayerRun bl = Make(Param("type: 'Bias'", t), {{2, 5, 13, 11}}, 1);
      bl.layer->SetParamFromFloat(0, slopes);
      bl.Forward();
      const auto xl = Seen(*pl.bottom[0]), xb = Seen(*bl.bottom[0]);
      std::vector<float> wp(xl.size()), wb(xb.size());
      for (size_t i = 0; i < xl.size(); ++i) {
        const float a = slopes[(i / 143) % 5];
        wp[i] = AsType(t, xl[i] > 0 ? xl[i] : a * xl[i]);
        wb[i] = AsType(t, xb[i] + a);
      }
      ExpectMatch(t, pl.top[0]->ToFloat(), wp, "PReLU, planes of 143");
      ExpectMatch(t, bl.top[0]->ToFloat(), wb, "Bias, planes of 143");
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

// The channel-affine launch over planes of every size: one value each past the launch's
// cap on planes (a 2-D blob: 140 000 planes), more values than the groups along a plane
// (56 × 56), a plane between (10 × 10), and planes whose 8-value vectors leave a tail (13 × 11,
// 57 × 57: the vector form's work-items' ranges start and end inside planes).
TEST(Layers, ScaleCoversEveryPlaneShape) {
  const std::vector<std::vector<int>> shapes{{70000, 2},     {2, 3, 56, 56},  {1, 5, 10, 10},
                                             {3, 7, 13, 11}, {1, 64, 57, 57}};
  for (const auto& shape : shapes) {
    const int channels = shape[1];
    int inner = 1;
    for (size_t a = 2; a < shape.size(); ++a) inner *= shape[a];
    LayerRun s = Make(Param("type: 'Scale' scale_param { bias_term: true }", DataType::kFloat32),
                      {shape}, 1);
    std::vector<float> sc(channels), bi(channels);
    for (int c = 0; c < channels; ++c) sc[c] = 0.5f + c, bi[c] = 0.25f * c - 1.0f;
    s.layer->SetParamFromFloat(0, sc);
    s.layer->SetParamFromFloat(1, bi);
    s.Forward();
    const auto x = Seen(*s.bottom[0]);
    std::vector<float> want(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const int c = int(i / inner) % channels;
      want[i] = x[i] * sc[c] + bi[c];
    }
    ExpectMatch(DataType::kFloat32, s.top[0]->ToFloat(), want, "Scale");
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

// An fp32 bottom written on the host is converted there (QuantizerLayer::ConvertOnHost), one
// already on the device by the conversion kernel: the same bits, at a size that splits the host
// conversion over two threads, with every special value among random ones.
TEST(Layers, QuantizerLayerConvertsHostInputsAsTheKernelDoes) {
  const int n = 600001;  // ParallelChunks' threads, and an odd tail for the 8-lane loops
  std::vector<float> x(n);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  for (float& v : x) v = u(rng);
  const float step = 4.0f / 255.0f;  // int8 top over [-3, 1]: ties at half steps
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const float special[] = {nan,         -inf,         inf,      1e30f, -1e30f, 0.0f,
                           -0.0f,       65504.0f,     65520.0f, 1e-8f, 6e-8f,  0.5f * step,
                           1.5f * step, -2.5f * step, 3.0f,     -3.0f};
  for (size_t i = 0; i < sizeof special / sizeof special[0]; ++i) x[i * 7919] = special[i];
  for (DataType to : {DataType::kFloat16, DataType::kInt16Q, DataType::kInt8Q}) {
    auto p = Param("type: 'Quantizer'", DataType::kFloat32);
    p.set_top_data_type(DataTypeToProto(to));
    SetRange(&p, "top", 0, -3, 1);
    LayerRun r = Make(p, {{n}}, 1);
    std::memcpy(r.bottom[0]->mutable_host_data(), x.data(), n * sizeof(float));
    r.Forward();
    ASSERT_TRUE(r.bottom[0]->host_newest()) << "the host conversion uploads no fp32 values";
    std::vector<uint8_t> host(r.top[0]->bytes());
    std::memcpy(host.data(), r.top[0]->host_data(), host.size());
    r.bottom[0]->device_data();  // now on the device as well: the kernel converts
    r.Forward();
    ASSERT_FALSE(r.bottom[0]->host_newest());
    const auto* dev = static_cast<const uint8_t*>(r.top[0]->host_data());
    int bad = 0;
    for (int i = 0; i < n && bad < 5; ++i) {
      const size_t es = SizeOf(to);
      if (std::memcmp(host.data() + i * es, dev + i * es, es) == 0) continue;
      // A NaN's payload is the runtime's choice; both must be NaN.
      if (to == DataType::kFloat16 && std::isnan(x[i])) {
        uint16_t h, d;
        std::memcpy(&h, host.data() + i * es, 2), std::memcpy(&d, dev + i * es, 2);
        if (std::isnan(HalfToFloat(h)) && std::isnan(HalfToFloat(d))) continue;
      }
      ++bad;
      ADD_FAILURE() << Name(to) << " element " << i << " (" << x[i] << ") differs";
    }
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

}  // namespace
}  // namespace mpcaffe

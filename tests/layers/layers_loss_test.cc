// tests/layers/layers_loss_test.cc — BVLC's other losses (Hinge, MultinomialLogistic, Contrastive,
// Infogain) and Parameter in their data types against plain C++ references, and their refusals.
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
#include "tests/layers/layer_harness.h"
#include "tests/testing/net_support.h"
#include "quant/fixed_point.h"
#include "quant/quant_params.h"

namespace mpcaffe {
namespace {

using namespace layer_harness;  // NOLINT: the shared harness of the layer tests

// ---- BVLC's other losses -----------------------------------------------------------------------
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

}  // namespace
}  // namespace mpcaffe

// tests/testing/gradient_checker.h — BVLC's GradientChecker for one fp32 layer: objective
// Σ c·top with fixed random c, central differences with step 1e-2, |analytic − numeric| ≤
// threshold · max(|analytic|, |numeric|, 1), over every bottom and parameter blob.
#pragma once

#include <gtest/gtest.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "layers/blob.h"
#include "layers/layer_registry.h"

namespace mpcaffe::test_support {

inline Device& GradientDevice() { return DefaultDevice(); }

inline caffe::LayerParameter Parse(const std::string& text) {
  caffe::LayerParameter p;
  if (!google::protobuf::TextFormat::ParseFromString(text, &p)) throw Error("bad test proto: " + text);
  return p;
}

/// A layer under test with owned bottoms and tops and the fixed objective weights.
struct Checker {
  std::unique_ptr<Layer> layer;
  std::vector<std::unique_ptr<Blob>> bottoms, tops;
  std::vector<Blob*> bvec, tvec;
  std::vector<std::vector<float>> coeff;  // objective weights per top
  float step = 1e-2f, threshold = 1e-3f;
  std::vector<bool> check_bottom;         // which bottoms to check (labels: no)

  Checker(const std::string& proto, const std::vector<std::vector<int>>& shapes, int tops_n,
          uint64_t seed = 5, caffe::Phase phase = caffe::TRAIN) {
    caffe::LayerParameter p = Parse(proto);
    p.set_phase(phase);
    layer = CreateLayer(p, GradientDevice());
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (size_t i = 0; i < shapes.size(); ++i) {
      bottoms.push_back(std::make_unique<Blob>(GradientDevice(), DataType::kFloat32, shapes[i], "b" + std::to_string(i)));
      std::vector<float> v(bottoms.back()->count());
      for (auto& x : v) x = u(rng);
      bottoms.back()->FromFloat(v);
      bvec.push_back(bottoms.back().get());
      check_bottom.push_back(true);
    }
    for (int t = 0; t < tops_n; ++t) {
      tops.push_back(std::make_unique<Blob>(GradientDevice(), DataType::kFloat32, std::vector<int>{}, "t" + std::to_string(t)));
      tvec.push_back(tops.back().get());
    }
    layer->SetUp(bvec, tvec);
  }

  void SetBottom(int i, const std::vector<float>& v) { bottoms[i]->FromFloat(v); }

  double Objective() {
    layer->Forward(bvec, tvec);
    double l = 0;
    for (size_t t = 0; t < tvec.size(); ++t) {
      const std::vector<float> y = tvec[t]->ToFloat();
      for (size_t k = 0; k < y.size(); ++k) l += coeff[t][k] * y[k];
    }
    return l;
  }

  void Check() {
    layer->Forward(bvec, tvec);
    std::mt19937 rng(99);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    coeff.assign(tvec.size(), {});
    for (size_t t = 0; t < tvec.size(); ++t) {
      coeff[t].resize(tvec[t]->count());
      for (auto& c : coeff[t]) c = u(rng);
    }
    // Analytic gradients.
    for (int j = 0; j < layer->num_params(); ++j) {
      Blob& b = *layer->blobs()[j];
      b.FromFloat(b.ToFloat());  // keep the data; then zero the diff
      std::fill_n(static_cast<float*>(b.mutable_host_diff()), b.count(), 0.0f);
    }
    for (size_t t = 0; t < tvec.size(); ++t)
      std::copy(coeff[t].begin(), coeff[t].end(), static_cast<float*>(tvec[t]->mutable_host_diff()));
    layer->Backward(tvec, check_bottom, bvec);
    std::vector<std::vector<float>> bottom_grad, param_grad;
    for (size_t i = 0; i < bvec.size(); ++i) {
      const float* d = static_cast<const float*>(bvec[i]->host_diff());
      bottom_grad.emplace_back(d, d + bvec[i]->count());
    }
    for (int j = 0; j < layer->num_params(); ++j) {
      Blob& b = *layer->blobs()[j];
      const float* d = static_cast<const float*>(b.host_diff());
      param_grad.emplace_back(d, d + b.count());
    }
    // Numeric gradients.
    auto compare = [&](double analytic, double numeric, const std::string& what) {
      const double scale = std::max({std::fabs(analytic), std::fabs(numeric), 1.0});
      EXPECT_NEAR(analytic, numeric, threshold * scale)
          << layer->Describe() << " " << what;
    };
    for (size_t i = 0; i < bvec.size(); ++i) {
      if (!check_bottom[i]) continue;
      std::vector<float> v = bvec[i]->ToFloat();
      for (size_t k = 0; k < v.size(); ++k) {
        const float orig = v[k];
        v[k] = orig + step;
        bvec[i]->FromFloat(v);
        const double plus = Objective();
        v[k] = orig - step;
        bvec[i]->FromFloat(v);
        const double minus = Objective();
        v[k] = orig;
        bvec[i]->FromFloat(v);
        compare(bottom_grad[i][k], (plus - minus) / (2 * step),
                "bottom " + std::to_string(i) + "[" + std::to_string(k) + "]");
      }
    }
    for (int j = 0; j < layer->num_params(); ++j) {
      std::vector<float> v = layer->ParamAsFloat(j);
      for (size_t k = 0; k < v.size(); ++k) {
        const float orig = v[k];
        auto set = [&](float x) {
          v[k] = x;
          layer->blobs()[j]->FromFloat(v);
          layer->ParamsChanged();
        };
        set(orig + step);
        const double plus = Objective();
        set(orig - step);
        const double minus = Objective();
        set(orig);
        compare(param_grad[j][k], (plus - minus) / (2 * step),
                "param " + std::to_string(j) + "[" + std::to_string(k) + "]");
      }
    }
  }
};

}  // namespace mpcaffe::test_support

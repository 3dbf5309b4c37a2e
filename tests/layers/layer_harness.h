// tests/layers/layer_harness.h — what the layer tests of tests/layers/layers_*_test.cc share: a
// layer with its own random bottoms (LayerRun, Make), the prototxt and quantizer-range helpers,
// the per-type tolerance of ExpectMatch and the integer references' requantization.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "layers/blob.h"
#include "layers/layer_registry.h"
#include "quant/fixed_point.h"
#include "quant/quant_params.h"
#include "tests/testing/net_support.h"

namespace mpcaffe::layer_harness {

inline Device& Dev() { return DefaultDevice(); }

/// A layer with its own bottoms and tops. Bottoms hold random reals (float types) or random
/// stored integers (quantized types).
struct LayerRun {
  std::unique_ptr<Layer> layer;
  std::vector<std::unique_ptr<Blob>> bottom_store, top_store;
  std::vector<Blob*> bottom, top;
  void Forward() { layer->Forward(bottom, top); }
};

inline caffe::LayerParameter Param(const std::string& text, DataType t) {
  return test_support::LayerText(text, t);
}

/// Gives bottom/top quantizer i the range [lo, hi] (quantized tests).
inline void SetRange(caffe::LayerParameter* p, const std::string& side, int i, double lo, double hi) {
  auto* list = side == "bottom" ? p->mutable_bottom_quantizer() : p->mutable_top_quantizer();
  while (list->size() <= i) list->Add();
  list->Mutable(i)->set_observed_min(lo);
  list->Mutable(i)->set_observed_max(hi);
}

inline std::vector<float> RandomReals(size_t n, std::mt19937& rng, float lo = -2, float hi = 2) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

inline LayerRun Make(const caffe::LayerParameter& p, const std::vector<std::vector<int>>& shapes, int tops,
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
inline void ExpectMatch(DataType t, const std::vector<float>& got, const std::vector<float>& want,
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
inline std::vector<float> Seen(const Blob& b) { return b.ToFloat(); }

/// Stores reals as `t` does (fp16 rounding), for float references.
inline float AsType(DataType t, float v) { return t == DataType::kFloat16 ? HalfToFloat(FloatToHalf(v)) : v; }

inline constexpr DataType kFloats[] = {DataType::kFloat32, DataType::kFloat16};

/// Quantized output of an accumulator: clamp(z + requant(acc)).
inline float Requantized(DataType t, int64_t acc, quant::FixedPointMultiplier m, int32_t zero) {
  int64_t q = zero + (t == DataType::kInt8Q ? quant::Requantize32(static_cast<int32_t>(acc), m)
                                            : quant::Requantize64(acc, m));
  return static_cast<float>(std::min<int64_t>(std::max<int64_t>(q, TraitsOf(t).qmin), TraitsOf(t).qmax));
}

/// Bias in accumulator units as the layers compute it.
inline int64_t BiasUnits(float bias, double unit) { return static_cast<int64_t>(std::round(double(bias) / unit)); }

/// An Im2col window over images of C × H × W (convolution_param's numbers).
struct Im2colWindow {
  int C, H, W, KH, KW, SH, SW, PH, PW, DH, DW;
  int OH() const { return (H + 2 * PH - (DH * (KH - 1) + 1)) / SH + 1; }
  int OW() const { return (W + 2 * PW - (DW * (KW - 1) + 1)) / SW + 1; }
};

/// The Im2col layer's columns of `images` images x: row (c·KH + ky)·KW + kx, column oy·OW + ox of
/// image n holds x[n][c][oy·SH − PH + ky·DH][ox·SW − PW + kx·DW], or `pad` outside the input;
/// `*padded` (when given) counts those.
inline std::vector<float> Im2colReference(const Im2colWindow& w, int images,
                                          const std::vector<float>& x, float pad,
                                          int* padded = nullptr) {
  const int OH = w.OH(), OW = w.OW();
  std::vector<float> cols;
  cols.reserve(size_t(images) * w.C * w.KH * w.KW * OH * OW);
  int outside = 0;
  for (int n = 0; n < images; ++n)
    for (int c = 0; c < w.C; ++c)
      for (int ky = 0; ky < w.KH; ++ky)
        for (int kx = 0; kx < w.KW; ++kx)
          for (int oy = 0; oy < OH; ++oy)
            for (int ox = 0; ox < OW; ++ox) {
              const int iy = oy * w.SH - w.PH + ky * w.DH, ix = ox * w.SW - w.PW + kx * w.DW;
              const bool out = iy < 0 || iy >= w.H || ix < 0 || ix >= w.W;
              outside += out;
              cols.push_back(out ? pad : x[((size_t(n) * w.C + c) * w.H + iy) * w.W + ix]);
            }
  if (padded) *padded = outside;
  return cols;
}

/// Labels 0..classes−1 cycling over `n` positions (stored as the layer's float type).
inline std::vector<float> CyclicLabels(int n, int classes, int offset = 0) {
  std::vector<float> l(n);
  for (int i = 0; i < n; ++i) l[i] = static_cast<float>((i + offset) % classes);
  return l;
}

/// The message of the LayerError a layer of `text` on `shapes` gives (empty when it gives none).
inline std::string LossRefusal(const std::string& text, const std::vector<std::vector<int>>& shapes,
                        DataType t = DataType::kFloat32) {
  try {
    LayerRun r = Make(Param(text, t), shapes, 1);
    r.Forward();
  } catch (const LayerError& e) {
    return e.what();
  }
  return "";
}

}  // namespace mpcaffe::layer_harness

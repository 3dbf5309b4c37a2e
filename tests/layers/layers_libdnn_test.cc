// tests/layers/layers_libdnn_test.cc — the libdnn-backed layers (InnerProduct, Convolution,
// Deconvolution, Im2col, int4 weights, Pooling, SPP, LRN) in each of their data types against
// plain C++ references (fp32 1e-5 relative, fp16 within half precision, quantized types exactly
// equal to the reference integer arithmetic).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>

#include "codegen/target_profile.h"
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

// ---- libdnn-backed layers -------------------------------------------------------------------
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
          // int8 weights have a scale per output channel (the default), int16 one per tensor.
          int64_t acc = BiasUnits(b[n], double(xp.scale[0]) * wp.scale_of(n));
          for (int k = 0; k < 10; ++k)
            acc += int64_t(x[m * 10 + k] - xp.zero_point[0]) * int64_t(w[n * 10 + k] - wp.zero_point_of(n));
          want[m * 7 + n] = Requantized(t, acc, quant::RequantizationMultiplier(xp.scale[0], wp.scale_of(n), cp.scale[0]),
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
                  if (IsQuantized(t)) qacc += int64_t(xv - xp.zero_point[0]) * int64_t(wv - wp.zero_point_of(o));
                }
            const size_t idx = ((n * O + o) * OH + oh) * OW + ow;
            if (IsQuantized(t)) {
              // int8 weights: a scale per output channel (the default); int16: one per tensor.
              qacc += BiasUnits(b[o], double(xp.scale[0]) * wp.scale_of(o));
              want[idx] = Requantized(t, qacc, quant::RequantizationMultiplier(xp.scale[0], wp.scale_of(o), cp.scale[0]),
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

/// Im2col's test windows: padding, stride, dilation, unequal kernel sides.
struct Im2colCase {
  const char* proto;
  Im2colWindow w;
};
const Im2colCase kIm2colCases[] = {
    {"kernel_size: 3 stride: 2 pad: 1", {2, 5, 6, 3, 3, 2, 2, 1, 1, 1, 1}},
    {"kernel_h: 2 kernel_w: 3 stride_h: 1 stride_w: 2 pad_h: 1 pad_w: 2 dilation: 2",
     {3, 4, 5, 2, 3, 1, 2, 1, 2, 2, 2}},
};

// Im2col in the float types: row (c·kh + ky)·kw + kx of an image's columns holds channel c at
// window offset (ky, kx), 0 outside the padded input.
TEST(Layers, Im2colFloatTypes) {
  for (DataType t : kFloats)
    for (const Im2colCase& c : kIm2colCases) {
      const Im2colWindow& w = c.w;
      LayerRun r = Make(Param(std::string("type: 'Im2col' convolution_param { ") + c.proto + " }", t),
                        {{2, w.C, w.H, w.W}}, 1);
      r.Forward();
      ASSERT_EQ(r.top[0]->shape(), (std::vector<int>{2, w.C * w.KH * w.KW, w.OH(), w.OW()})) << c.proto;
      ExpectMatch(t, r.top[0]->ToFloat(), Im2colReference(w, 2, r.bottom[0]->ToFloat(), 0.0f), c.proto);
    }
  try {
    Make(Param("name: 'big' type: 'Im2col' convolution_param { kernel_size: 5 }", DataType::kFloat32),
         {{1, 2, 3, 3}}, 1);
    ADD_FAILURE() << "a 5x5 window on 3x3";
  } catch (const LayerError& e) {
    EXPECT_NE(std::string(e.what()).find("'big' (Im2col)"), std::string::npos) << e.what();
  }
}

// Im2col in int8 and int16: the bottom's codes, its zero point in the padding; with a top range
// of its own, each code requantized (quant::Requant of v − z_x by s_x / s_y) and the padding y's
// zero point. Bit-exact against that host arithmetic, with padding, stride and dilation.
TEST(Layers, Im2colQuantizedTypes) {
  struct Ranges {
    double x_lo, x_hi, y_lo, y_hi;  // y equal to x: the codes copied
  };
  for (DataType t : {DataType::kInt8Q, DataType::kInt16Q})
    for (const Im2colCase& c : kIm2colCases)
      for (const Ranges& g : {Ranges{-1.5, 3, -1.5, 3}, Ranges{-1.5, 3, -0.5, 1.2}}) {
        const std::string what = std::string(Name(t)) + " " + c.proto + (g.y_hi == g.x_hi ? "" : ", requantized");
        const Im2colWindow& w = c.w;
        auto p = Param(std::string("type: 'Im2col' convolution_param { ") + c.proto + " }", t);
        SetRange(&p, "bottom", 0, g.x_lo, g.x_hi);
        SetRange(&p, "top", 0, g.y_lo, g.y_hi);
        LayerRun r = Make(p, {{2, w.C, w.H, w.W}}, 1);
        r.Forward();
        ASSERT_EQ(r.top[0]->shape(), (std::vector<int>{2, w.C * w.KH * w.KW, w.OH(), w.OW()})) << what;
        const quant::QuantParams xp = r.layer->BottomParams(0), yp = r.layer->TopParams(0);
        const int xz = xp.zero_point[0], yz = yp.zero_point[0];
        const bool copy = xp.scale[0] == yp.scale[0] && xz == yz;
        EXPECT_EQ(copy, g.y_hi == g.x_hi) << what;
        const quant::FixedPointMultiplier m = quant::RescaleMultiplier(xp.scale[0], yp.scale[0]);
        int padded = 0;
        std::vector<float> want = Im2colReference(w, 2, r.bottom[0]->ToFloat(), float(xz), &padded);
        ASSERT_GT(padded, 0) << what;
        if (!copy)
          for (float& v : want) {
            const int64_t q = yz + quant::Requant(t, int(v) - xz, m);
            v = float(std::min<int64_t>(std::max<int64_t>(q, yp.qmin), yp.qmax));
          }
        ExpectMatch(t, r.top[0]->ToFloat(), want, what);
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
  // The 4-bit kernel runs where the compiler makes byte pair or quad products one instruction
  // (a CPU runtime's profile; GemmDefaults): only the packed copy lives on the device there.
  // Elsewhere the int8 kernel runs on the blob's own bytes, which the pass uploads.
  const TargetProfile profile = TargetProfile::Of(Dev().info());
  const bool own_kernel =
      profile.cpu_vectors && (profile.byte_pair_products || profile.byte_quad_products);
  for (int m : {1, 4}) {
    LayerRun r = Make(p, {{m, 3, 5}}, 1);
    // Values set before the first pass (a loaded caffemodel's) are written on the host side.
    {
      const Blob& w = *r.layer->blobs()[0];
      const auto* at = static_cast<const uint8_t*>(w.host_data());
      r.layer->SetParamStorage(0, std::vector<uint8_t>(at, at + w.bytes()).data());
    }
    EXPECT_EQ(r.layer->blobs()[0]->device_bytes(), 0u);
    r.Forward();
    EXPECT_EQ(r.layer->blobs()[0]->device_bytes(), own_kernel ? 0u : r.layer->blobs()[0]->bytes())
        << Dev().Describe();
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

// Quantized across channels: the bottom's codes in, the top's out, within one code of the
// reference on the dequantized codes (libdnn's LrnQuantized: the fp32 kernel's codes exactly).
TEST(Layers, LRNQuantizedTypes) {
  for (DataType t : {DataType::kInt8Q, DataType::kInt16Q}) {
    auto p = Param("type: 'LRN' lrn_param { local_size: 5 alpha: 0.5 beta: 0.75 }", t);
    SetRange(&p, "bottom", 0, -2, 3);
    SetRange(&p, "top", 0, -1.5, 2);
    LayerRun r = Make(p, {{2, 7, 3, 5}}, 1);
    r.Forward();
    const quant::QuantParams xq = r.layer->BottomParams(0), yq = r.layer->TopParams(0);
    libdnn::LrnDesc d;
    d.type = t;
    d.batch = 2, d.channels = 7, d.height = 3, d.width = 5;
    d.local_size = 5, d.alpha = 0.5f, d.beta = 0.75f, d.k = 1.0f;
    d.quant = {xq.scale[0], xq.zero_point[0], yq.scale[0], yq.zero_point[0]};
    Blob want(Dev(), t, {2, 7, 3, 5});
    libdnn::LrnForwardReference(d, r.bottom[0]->host_data(), want.mutable_host_data(), nullptr);
    const auto got = r.top[0]->ToFloat(), codes = want.ToFloat();
    int equal = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_LE(std::fabs(got[i] - codes[i]), 1.0f) << Name(t) << " element " << i;
      equal += got[i] == codes[i];
    }
    EXPECT_GE(equal, int(got.size()) * 95 / 100) << Name(t);
  }
}

// An inference (TEST-phase) LRN keeps no scale; its Backward computes it again first and gives
// the training layer's gradient.
TEST(Layers, LRNTestPhaseBackwardMatchesTraining) {
  std::vector<std::vector<float>> diffs;
  for (caffe::Phase phase : {caffe::TRAIN, caffe::TEST}) {
    auto p = Param("type: 'LRN' lrn_param { local_size: 3 alpha: 0.5 beta: 0.75 }",
                   DataType::kFloat32);
    p.set_phase(phase);
    LayerRun r = Make(p, {{1, 6, 3, 4}}, 1);
    r.Forward();
    std::mt19937 rng(3);
    const auto top_diff = RandomReals(r.top[0]->count(), rng);
    std::copy(top_diff.begin(), top_diff.end(),
              static_cast<float*>(r.top[0]->mutable_host_diff()));
    r.layer->Backward(r.top, {true}, r.bottom);
    const float* g = static_cast<const float*>(r.bottom[0]->host_diff());
    diffs.emplace_back(g, g + r.bottom[0]->count());
  }
  EXPECT_EQ(diffs[0], diffs[1]);
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

}  // namespace
}  // namespace mpcaffe

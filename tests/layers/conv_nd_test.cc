// tests/layers/conv_nd_test.cc — Convolution and Deconvolution over other than two spatial axes
// (BVLC's num_spatial_axes: 3-d volumes, 1-d signals; fp32, libdnn/conv_nd.h): forward against
// plain C++ references, BVLC's gradient check, and the errors for what is refused.
#include "libdnn/conv_nd.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/layers/layer_harness.h"
#include "tests/testing/gradient_checker.h"

namespace mpcaffe {
namespace {

using namespace layer_harness;  // NOLINT: the shared harness of the layer tests

/// The dual convolution `d` (the Deconvolution's top → bottom) run backwards on the host: each
/// of x's positions (d's output) scatters w·x into y (d's input), plus the bias per y channel.
std::vector<float> DeconvNdReference(const libdnn::ConvNdDesc& d, const std::vector<float>& x,
                                     const std::vector<float>& w, const std::vector<float>& bias) {
  const int D = d.axes(), cg = d.channels / d.groups, ocg = d.out_channels / d.groups;
  const int64_t ip = d.in_size(), kp = d.kernel_size(), op = d.out_size();
  std::vector<double> y(d.input_count(), 0.0);
  std::vector<int> o(D), k(D);
  for (int n = 0; n < d.batch; ++n)
    for (int oc = 0; oc < d.out_channels; ++oc)
      for (int64_t q = 0; q < op; ++q) {
        for (int64_t r = q, a = D - 1; a >= 0; --a)
          o[a] = int(r % d.out(int(a))), r /= d.out(int(a));
        for (int c = 0; c < cg; ++c)
          for (int64_t kk = 0; kk < kp; ++kk) {
            for (int64_t r = kk, a = D - 1; a >= 0; --a)
              k[a] = int(r % d.kernel[a]), r /= d.kernel[a];
            int64_t off = 0;
            bool inside = true;
            for (int a = 0; a < D && inside; ++a) {
              const int64_t xi =
                  int64_t{o[a]} * d.stride[a] - d.pad[a] + int64_t{k[a]} * d.dilation[a];
              inside = xi >= 0 && xi < d.in[a];
              off = off * d.in[a] + xi;
            }
            if (!inside) continue;
            const int ch = oc / ocg * cg + c;
            y[(size_t(n) * d.channels + ch) * ip + off] +=
                double(w[(size_t(oc) * cg + c) * kp + kk]) *
                x[(size_t(n) * d.out_channels + oc) * op + q];
          }
      }
  std::vector<float> out(y.size());
  for (size_t i = 0; i < y.size(); ++i)
    out[i] = float(y[i] + (bias.empty() ? 0.0 : bias[(i / ip) % d.channels]));
  return out;
}

libdnn::ConvNdDesc Desc(int batch, int channels, int out, int groups, std::vector<int> in,
                        std::vector<int> k, std::vector<int> s, std::vector<int> p,
                        std::vector<int> dil) {
  libdnn::ConvNdDesc d;
  d.batch = batch, d.channels = channels, d.out_channels = out, d.groups = groups;
  d.in = in, d.kernel = k, d.stride = s, d.pad = p, d.dilation = dil;
  return d;
}

// A 3-d convolution with groups and per-axis stride, pad and dilation, and a 1-d one (a single
// spatial axis), against the host reference; then a second bottom shape (other extents, the
// same 32 output positions: the same GEMM, no second compilation).
TEST(ConvolutionNd, ForwardMatchesTheReference) {
  {
    LayerRun r = Make(Param("name: 'c3' type: 'Convolution' convolution_param { num_output: 4 "
                            "group: 2 kernel_size: 2 kernel_size: 3 kernel_size: 2 stride: 1 "
                            "stride: 2 stride: 1 pad: 1 pad: 0 pad: 1 dilation: 1 dilation: 1 "
                            "dilation: 2 weight_filler { type: 'gaussian' std: 0.5 } "
                            "bias_filler { type: 'uniform' min: -1 max: 1 } }",
                            DataType::kFloat32),
                      {{2, 2, 3, 5, 4}}, 1);
    const auto d = Desc(2, 2, 4, 2, {3, 5, 4}, {2, 3, 2}, {1, 2, 1}, {1, 0, 1}, {1, 1, 2});
    ASSERT_EQ(r.layer->blobs()[0]->shape(), (std::vector<int>{4, 1, 2, 3, 2}));
    ASSERT_EQ(r.top[0]->shape(), (std::vector<int>{2, 4, d.out(0), d.out(1), d.out(2)}));
    r.Forward();
    std::vector<float> want(d.output_count());
    const auto x = r.bottom[0]->ToFloat(), w = r.layer->ParamAsFloat(0),
               b = r.layer->ParamAsFloat(1);
    libdnn::ConvNdForwardReference(d, x.data(), w.data(), b.data(), want.data());
    ExpectMatch(DataType::kFloat32, r.top[0]->ToFloat(), want, "3-d");
    r.bottom[0]->Reshape({1, 2, 1, 5, 8});
    std::mt19937 rng(3);
    r.bottom[0]->FromFloat(RandomReals(r.bottom[0]->count(), rng));
    r.layer->Reshape(r.bottom, r.top);
    r.Forward();
    ASSERT_EQ(r.top[0]->shape(), (std::vector<int>{1, 4, 2, 2, 8}));
    const auto e = Desc(1, 2, 4, 2, {1, 5, 8}, {2, 3, 2}, {1, 2, 1}, {1, 0, 1}, {1, 1, 2});
    want.assign(e.output_count(), 0.0f);
    const auto x2 = r.bottom[0]->ToFloat();
    libdnn::ConvNdForwardReference(e, x2.data(), w.data(), b.data(), want.data());
    ExpectMatch(DataType::kFloat32, r.top[0]->ToFloat(), want, "3-d reshaped");
  }
  {
    LayerRun r = Make(Param("name: 'c1' type: 'Convolution' convolution_param { num_output: 3 "
                            "kernel_size: 3 stride: 2 pad: 1 bias_term: false "
                            "weight_filler { type: 'gaussian' std: 0.5 } }",
                            DataType::kFloat32),
                      {{2, 2, 9}}, 1);
    const auto d = Desc(2, 2, 3, 1, {9}, {3}, {2}, {1}, {1});
    ASSERT_EQ(r.top[0]->shape(), (std::vector<int>{2, 3, 5}));
    r.Forward();
    std::vector<float> want(d.output_count());
    const auto x = r.bottom[0]->ToFloat(), w = r.layer->ParamAsFloat(0);
    libdnn::ConvNdForwardReference(d, x.data(), w.data(), nullptr, want.data());
    ExpectMatch(DataType::kFloat32, r.top[0]->ToFloat(), want, "1-d");
  }
}

// Deconvolution over 3 spatial axes: the scatter of its dual convolution, plus the bias.
TEST(ConvolutionNd, DeconvolutionMatchesTheReference) {
  LayerRun r = Make(Param("name: 'up3' type: 'Deconvolution' convolution_param { num_output: 2 "
                          "kernel_size: 2 kernel_size: 3 kernel_size: 2 stride: 2 stride: 1 "
                          "stride: 2 pad: 0 pad: 1 pad: 0 weight_filler { type: 'gaussian' "
                          "std: 0.5 } bias_filler { type: 'uniform' min: -1 max: 1 } }",
                          DataType::kFloat32),
                    {{2, 3, 2, 3, 2}}, 1);
  // The dual maps the top (2 channels, 4x3x4) back to the bottom (3 channels, 2x3x2).
  const auto dual = Desc(2, 2, 3, 1, {4, 3, 4}, {2, 3, 2}, {2, 1, 2}, {0, 1, 0}, {1, 1, 1});
  ASSERT_EQ(r.layer->blobs()[0]->shape(), (std::vector<int>{3, 2, 2, 3, 2}));
  ASSERT_EQ(r.top[0]->shape(), (std::vector<int>{2, 2, 4, 3, 4}));
  r.Forward();
  ExpectMatch(DataType::kFloat32, r.top[0]->ToFloat(),
              DeconvNdReference(dual, r.bottom[0]->ToFloat(), r.layer->ParamAsFloat(0),
                                r.layer->ParamAsFloat(1)),
              "3-d deconvolution");
}

// BVLC's gradient check (every bottom, weight and bias element) of both layers over 3 axes.
TEST(ConvolutionNd, GradientsCheck) {
  test_support::Checker c(R"(name: "c3" type: "Convolution" convolution_param { num_output: 2
      group: 2 kernel_size: 2 stride: 1 stride: 2 stride: 1 pad: 1 pad: 0 pad: 0 dilation: 1
      dilation: 1 dilation: 2 weight_filler { type: "gaussian" std: 0.3 }
      bias_filler { type: "gaussian" std: 0.3 } })",
                          {{2, 2, 2, 3, 3}}, 1);
  c.Check();
  test_support::Checker d(R"(name: "up3" type: "Deconvolution" convolution_param { num_output: 2
      kernel_size: 2 stride: 2 stride: 1 stride: 1 pad: 0 pad: 1 pad: 0
      weight_filler { type: "gaussian" std: 0.3 } bias_filler { type: "gaussian" std: 0.3 } })",
                          {{1, 2, 2, 2, 2}}, 1);
  d.Check();
}

// What the N-d path refuses, each naming the layer and the field or the type.
TEST(ConvolutionNd, RefusalsNameTheLayerAndField) {
  auto error = [](const std::string& conv, DataType t, const std::vector<int>& shape) {
    try {
      Make(Param("name: 'v' type: 'Convolution' convolution_param { num_output: 2 " + conv + " }",
                 t),
           {shape}, 1);
    } catch (const LayerError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  for (DataType t : {DataType::kInt8Q, DataType::kInt16Q, DataType::kFloat16}) {
    const std::string m = error("kernel_size: 2", t, {1, 2, 3, 3, 3});
    EXPECT_NE(
        m.find("'v' (Convolution): 3 spatial axes: the N-d convolution computes in fp32 only"),
        std::string::npos)
        << m;
  }
  std::string m = error("kernel_size: 2 kernel_size: 2", DataType::kFloat32, {1, 2, 3, 3, 3});
  EXPECT_NE(
      m.find("'v' (Convolution): convolution_param.kernel_size has 2 values for 3 spatial axes"),
      std::string::npos)
      << m;
  m = error("kernel_h: 2 kernel_w: 2", DataType::kFloat32, {1, 2, 3, 3, 3});
  EXPECT_NE(m.find("'v' (Convolution): convolution_param: kernel_h/_w"), std::string::npos) << m;
  m = error("kernel_size: 4", DataType::kFloat32, {1, 2, 3, 3, 3});
  EXPECT_NE(m.find("'v' (Convolution): convolution b1 c2 o2 g1 in 3x3x3 k 4x4x4"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("does not fit"), std::string::npos) << m;
  m = error("kernel_size: 1 axis: 2", DataType::kFloat32, {1, 2, 3});
  EXPECT_NE(m.find("'v' (Convolution): convolution_param.axis 2"), std::string::npos) << m;
  EXPECT_NE(m.find("must have a spatial axis after the channel axis, has 0"), std::string::npos)
      << m;
}

}  // namespace
}  // namespace mpcaffe

// tests/net/im2col_quantized_test.cc — Im2col in an int8 net computes natively: the typed variant
// keeps it int8 with no conversion around it, calibration gives its top the bottom's scale and
// zero point, so its columns are the producer's codes with the zero point as padding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "net/net.h"
#include "tests/testing/net_support.h"
#include "tools/net_variants.h"

namespace mpcaffe {
namespace {

Device& Dev() { return DefaultDevice(); }

TEST(Im2colQuantized, AnInt8NetRunsItWithoutConversionsAndCopiesTheCodes) {
  const caffe::NetParameter p = test_support::NetText(R"(
name: "cols"
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 dim: 6 dim: 6 } } }
layer { name: "conv" type: "Convolution" bottom: "x" top: "c"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 weight_filler { type: "gaussian" std: 0.5 } } }
layer { name: "cols" type: "Im2col" bottom: "c" top: "k"
        convolution_param { kernel_size: 3 pad: 2 dilation: 2 } }
layer { name: "ip" type: "InnerProduct" bottom: "k" top: "y"
        inner_product_param { num_output: 5 weight_filler { type: "gaussian" std: 0.1 } } }
)");
  std::vector<float> x(2 * 3 * 6 * 6);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& v : x) v = u(rng);
  Net f(p, Dev());
  f.blob("x").FromFloat(x);
  f.SetQuantMode(quant::QuantizerMode::kObserve);
  f.Forward();
  const std::vector<float> want = f.blob("y").ToFloat();
  caffe::NetParameter calibrated;
  f.ToProto(&calibrated);

  Net q(tools::TypedVariant(p, DataType::kInt8Q, Dev()), Dev());
  q.CopyTrainedLayersFrom(calibrated);
  EXPECT_EQ(q.layer("cols").compute_type(), DataType::kInt8Q);
  std::vector<std::string> conversions;
  for (const auto& l : q.layers())
    if (std::string(l->type()) == "Quantizer") conversions.push_back(l->name());
  EXPECT_EQ(conversions.size(), 1u) << "only the input's fp32 → int8, got " << ::testing::PrintToString(conversions);
  q.blob(q.input_blobs()[0]->name()).FromFloat(x);
  q.Forward();

  // The windows reach every value of c (a dilated 5×5 window with pad 2 on 6×6, stride 1),
  // and the padding's 0 is in every calibrated range: the top's quantization is the bottom's.
  Layer& cols = q.layer("cols");
  const quant::QuantParams cp = cols.BottomParams(0), kp = cols.TopParams(0);
  EXPECT_EQ(cp.scale, kp.scale);
  EXPECT_EQ(cp.zero_point, kp.zero_point);
  const std::vector<float> c = q.blob("c").ToFloat(), k = q.blob("k").ToFloat();
  const int C = 4, H = 6, W = 6, K = 3, P = 2, D = 2, S = 1;
  const int O = (H + 2 * P - (D * (K - 1) + 1)) / S + 1;
  ASSERT_EQ(k.size(), size_t(2 * C * K * K * O * O));
  size_t i = 0;
  int padded = 0;
  for (int n = 0; n < 2; ++n)
    for (int ch = 0; ch < C; ++ch)
      for (int ky = 0; ky < K; ++ky)
        for (int kx = 0; kx < K; ++kx)
          for (int oy = 0; oy < O; ++oy)
            for (int ox = 0; ox < O; ++ox, ++i) {
              const int iy = oy * S - P + ky * D, ix = ox * S - P + kx * D;
              const bool out = iy < 0 || iy >= H || ix < 0 || ix >= W;
              padded += out;
              const float code = out ? float(cp.zero_point[0]) : c[((n * C + ch) * H + iy) * W + ix];
              ASSERT_EQ(k[i], code) << "column value " << i;
            }
  EXPECT_GT(padded, 0);

  // And the int8 net computes the fp32 net's function within a few of its output's steps.
  const quant::QuantParams yp = q.layer("ip").TopParams(0);
  const std::vector<float> y = q.blob("y").ToFloat();
  ASSERT_EQ(y.size(), want.size());
  double err = 0;
  for (size_t j = 0; j < y.size(); ++j)
    err = std::max(err, std::fabs(yp.scale[0] * (y[j] - yp.zero_point[0]) - double(want[j])));
  EXPECT_LE(err, 4 * yp.scale[0]);
}

}  // namespace
}  // namespace mpcaffe

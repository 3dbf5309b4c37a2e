// tests/net/im2col_quantized_test.cc — Im2col in an int8 net computes natively: the typed variant
// keeps it int8 with no conversion around it, calibration through the fp32 twin gives its top the
// bottom's scale and zero point, so its columns are the producer's codes with the zero point as
// padding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "net/net.h"
#include "tests/layers/layer_harness.h"
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
  const caffe::NetParameter typed = tools::TypedVariant(p, DataType::kInt8Q, Dev());
  Net q(typed, Dev());
  EXPECT_EQ(q.layer("cols").compute_type(), DataType::kInt8Q);
  std::vector<std::string> conversions;
  for (const auto& l : q.layers())
    if (std::string(l->type()) == "Quantizer") conversions.push_back(l->name());
  EXPECT_EQ(conversions.size(), 1u) << "only the input's fp32 → int8, got " << ::testing::PrintToString(conversions);
  q.blob("x").FromFloat(test_support::SineInput(q.blob("x")));
  std::vector<float> want;  // the fp32 twin's output, from the same (dequantized) weights
  CalibrateWithFloatVariant(q, typed, NetOptions{}, 1, {},
                            [&](Net& fp32) { want = fp32.blob("y").ToFloat(); });
  q.Forward();

  // The windows reach every value of c (a dilated 5×5 window with pad 2 on 6×6, stride 1),
  // and the padding's 0 is in every calibrated range: the top's quantization is the bottom's.
  Layer& cols = q.layer("cols");
  const quant::QuantParams cp = cols.BottomParams(0), kp = cols.TopParams(0);
  EXPECT_EQ(cp.scale, kp.scale);
  EXPECT_EQ(cp.zero_point, kp.zero_point);
  const layer_harness::Im2colWindow w{4, 6, 6, 3, 3, 1, 1, 2, 2, 2, 2};
  int padded = 0;
  const std::vector<float> want_cols =
      layer_harness::Im2colReference(w, 2, q.blob("c").ToFloat(), float(cp.zero_point[0]), &padded);
  EXPECT_GT(padded, 0);
  EXPECT_TRUE(q.blob("k").ToFloat() == want_cols) << "the columns are not c's codes";

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

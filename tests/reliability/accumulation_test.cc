// tests/reliability/accumulation_test.cc — quantized dot products too long for their
// accumulator are refused when InnerProduct / Convolution are set up, naming the layer and K.
#include <gtest/gtest.h>

#include <climits>
#include <string>

#include "net/net.h"
#include "proto/model_io.h"
#include "quant/accumulation.h"

namespace mpcaffe {
namespace {

TEST(Accumulation, DepthLimitsPerType) {
  EXPECT_EQ(quant::MaxAccumulationDepth(DataType::kInt8Q), 33025);  // (2^31 - 1) / 255²
  EXPECT_EQ(quant::MaxAccumulationDepth(DataType::kInt16Q), 2147549185);  // (2^63 - 1) / 65535²
  EXPECT_GT(quant::MaxAccumulationDepth(DataType::kInt16Q), INT32_MAX);  // any int K is safe
  EXPECT_EQ(quant::MaxAccumulationDepth(DataType::kFloat32), INT64_MAX);
  EXPECT_EQ(quant::MaxAccumulationDepth(DataType::kFloat16), INT64_MAX);
  EXPECT_NO_THROW(quant::CheckAccumulationDepth("x", DataType::kInt8Q, 33025));
  EXPECT_THROW(quant::CheckAccumulationDepth("x", DataType::kInt8Q, 33026),
               quant::AccumulationOverflowError);
  EXPECT_NO_THROW(quant::CheckAccumulationDepth("x", DataType::kInt16Q, INT32_MAX));
  EXPECT_NO_THROW(quant::CheckAccumulationDepth("x", DataType::kFloat32, INT64_MAX));
}

std::string InnerProductNet(int k, const char* type) {
  return std::string(R"(
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: )") +
         std::to_string(k) + R"( } } }
layer { name: "fc_long" type: "InnerProduct" bottom: "data" top: "fc" compute_data_type: )" +
         type + R"( inner_product_param { num_output: 2 } })";
}

std::string ConvolutionNet(int channels, const char* type) {
  return std::string(R"(
layer { name: "data" type: "Input" top: "data"
        input_param { shape { dim: 1 dim: )") +
         std::to_string(channels) + R"( dim: 3 dim: 3 } } }
layer { name: "conv_deep" type: "Convolution" bottom: "data" top: "conv" compute_data_type: )" +
         type + R"( convolution_param { num_output: 2 kernel_size: 3 } })";
}

std::unique_ptr<Net> Build(const std::string& text) {
  caffe::NetParameter p;
  ParseProtoFromText(text, "<accumulation>", &p);
  return std::make_unique<Net>(p, DefaultDevice());
}

TEST(Accumulation, InnerProductRefusesInt8PastTheBound) {
  EXPECT_NO_THROW(Build(InnerProductNet(33025, "CAFFE_INT8_QUANTIZED")));
  try {
    Build(InnerProductNet(33026, "CAFFE_INT8_QUANTIZED"));
    FAIL() << "expected AccumulationOverflowError";
  } catch (const quant::AccumulationOverflowError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("layer 'fc_long' (InnerProduct)"), std::string::npos) << m;
    EXPECT_NE(m.find("K = 33026"), std::string::npos) << m;
    EXPECT_NE(m.find("int32"), std::string::npos) << m;
  }
  EXPECT_NO_THROW(Build(InnerProductNet(33026, "CAFFE_INT16_QUANTIZED")));
  EXPECT_NO_THROW(Build(InnerProductNet(33026, "CAFFE_FLOAT")));
}

TEST(Accumulation, ConvolutionCountsChannelsTimesKernel) {
  // K = C·kh·kw: 3669·9 = 33021 fits, 3670·9 = 33030 does not.
  EXPECT_NO_THROW(Build(ConvolutionNet(3669, "CAFFE_INT8_QUANTIZED")));
  try {
    Build(ConvolutionNet(3670, "CAFFE_INT8_QUANTIZED"));
    FAIL() << "expected AccumulationOverflowError";
  } catch (const quant::AccumulationOverflowError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("layer 'conv_deep' (Convolution)"), std::string::npos) << m;
    EXPECT_NE(m.find("K = 33030"), std::string::npos) << m;
  }
  EXPECT_NO_THROW(Build(ConvolutionNet(3670, "CAFFE_INT16_QUANTIZED")));
}

}  // namespace
}  // namespace mpcaffe

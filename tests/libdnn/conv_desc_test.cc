// tests/libdnn/conv_desc_test.cc — convolution descriptions, configurations and quantization
// parameters on the host: defaults per device class, the text form, impossible descriptions and
// misuse rejected (the kernels themselves: conv_test.cc).
#include "libdnn/conv.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "cache/program_cache.h"
#include "codegen/datatype.h"
#include "device/device.h"
#include "tests/testing/random_storage.h"
#include "tests/testing/sweep.h"
#include "libdnn/tuner.h"
#include "quant/fixed_point.h"
#include "device/settings.h"

namespace mpcaffe::libdnn {
namespace {

TEST(ConvForward, Int8DefaultsTakeTheDotProductOnGpusNotOnCpus) {
  DeviceInfo gpu;
  gpu.backend = Backend::kOpenCL;
  gpu.is_gpu = true;
  gpu.dot_product = true;
  DeviceInfo cpu = gpu;
  cpu.is_gpu = false;
  DeviceInfo old_gpu = gpu;
  old_gpu.dot_product = false;
  EXPECT_EQ(DefaultConvConfig(gpu, DataType::kInt8Q).kp, 4);
  EXPECT_EQ(DefaultConvConfig(gpu, DataType::kFloat32).kp, 1);
  EXPECT_EQ(DefaultConvConfig(cpu, DataType::kInt8Q).kp, 1);  // measured: see DefaultGemmConfig
  EXPECT_EQ(DefaultConvConfig(old_gpu, DataType::kInt8Q).kp, 1);
  bool kp4 = false;
  for (const ConvConfig& c : ConvConfig::Candidates(cpu, DataType::kInt8Q)) kp4 |= c.kp == 4;
  EXPECT_TRUE(kp4);
  const ConvConfig c = DefaultConvConfig(gpu, DataType::kInt8Q);
  EXPECT_EQ(c.ToString(), "l32 oc2 px4 v1 k4");
  const auto back = ParseConvConfig(c.ToString());
  ASSERT_TRUE(back);
  EXPECT_TRUE(*back == c);
  EXPECT_TRUE(ParseConvConfig("l1 oc4 px3 v8"));
  EXPECT_FALSE(ParseConvConfig("l1 oc4 px3 v8 k4"));  // kp = 4 needs vw = 1
  EXPECT_FALSE(ParseConvConfig("l1 oc4 px3 v1 k2"));
  EXPECT_FALSE(ParseConvConfig("l1 oc4 px3 v8x"));
}

TEST(ConvForward, RejectsImpossibleDescriptions) {
  ConvDesc d;
  d.channels = 6, d.groups = 4;
  EXPECT_THROW(d.Validate(), Error);
  d.groups = 1, d.kernel_h = 5, d.height = 3;
  EXPECT_THROW(d.Validate(), Error);
  d.height = 8, d.stride_w = 0;
  EXPECT_THROW(d.Validate(), Error);
  ConvConfig c;
  c.oc_per_item = 0;
  EXPECT_THROW(c.Validate(), Error);
  // A quantized convolution with the wrong number of per-channel parameters.
  ConvDesc q;
  q.type = DataType::kInt8Q, q.out_channels = 4;
  ConvQuant bad;
  bad.w_zero = {0, 0};
  EXPECT_THROW(Convolution(DefaultDevice(), q, bad), Error);
  // Forward before SetWeights names the mistake.
  Convolution conv(DefaultDevice(), ConvDesc{});
  auto m = DefaultDevice().Allocate(16);
  try {
    conv.Forward(BufferRef(m.get(), 0), {}, BufferRef(m.get(), 0));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SetWeights"), std::string::npos) << e.what();
  }
}

TEST(ConvForward, QuantFromTensorParameters) {
  quant::QuantParams x = quant::ChooseQuantParams(-1.0, 3.0, DataType::kInt8Q);
  quant::QuantParams y = quant::ChooseQuantParams(-2.0, 6.0, DataType::kInt8Q);
  quant::QuantParams w =
      quant::ChoosePerChannelQuantParams({-1, -0.5}, {1, 0.25}, 0, DataType::kInt8Q, true);
  const ConvQuant q = ConvQuant::From(x, w, y);
  EXPECT_EQ(q.x_zero, x.zero_point[0]);
  EXPECT_EQ(q.c_zero, y.zero_point[0]);
  ASSERT_EQ(q.w_zero.size(), 2u);
  EXPECT_EQ(q.w_zero[1], w.zero_point[1]);
  const auto m = quant::RequantizationMultiplier(x.scale[0], w.scale[1], y.scale[0]);
  EXPECT_EQ(q.multiplier[1].multiplier, m.multiplier);
  EXPECT_EQ(q.multiplier[1].shift, m.shift);
}

TEST(ConvBackward, RejectsNonFloat32) {
  ConvDesc d;
  d.type = DataType::kFloat16;
  Convolution conv(DefaultDevice(), d);
  auto m = DefaultDevice().Allocate(64);
  EXPECT_THROW(
      conv.BackwardData(BufferRef(m.get(), 0), BufferRef(m.get(), 0), BufferRef(m.get(), 0)),
      Error);
}

}  // namespace
}  // namespace mpcaffe::libdnn

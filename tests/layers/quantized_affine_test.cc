// tests/layers/quantized_affine_test.cc — BatchNorm (global statistics) and Scale computing in
// int8 and int16: the quantized channel_affine kernel from the bottom's quantization into the
// top's, bit-exact with its C++ reference on the device under test, and within one step of the
// real-valued affine (rounded once) everywhere.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "layers/blob.h"
#include "layers/layer_kernels.h"
#include "layers/layer_registry.h"
#include "tests/testing/net_support.h"

namespace mpcaffe {
namespace {

using test_support::LayerText;

Device& Dev() { return DefaultDevice(); }

struct Case {
  const char* text;
  std::vector<int> shape;
};

TEST(QuantizedChannelAffine, BatchNormAndScaleMatchTheReferenceAndTheRealAffine) {
  const char* ranges =
      " bottom_quantizer { observed_min: -2 observed_max: 3 }"
      " top_quantizer { observed_min: -1.5 observed_max: 2.5 }";
  const Case cases[] = {
      {"name: 'bn' type: 'BatchNorm' batch_norm_param { use_global_stats: true eps: 1e-5 }",
       {2, 5, 7, 9}},  // planes under 64 values
      {"name: 'bn' type: 'BatchNorm' batch_norm_param { use_global_stats: true }", {1, 3, 20, 21}},
      {"name: 'sc' type: 'Scale' bottom: 'x' top: 'y' scale_param { bias_term: true }", {2, 6, 11, 13}},
      {"name: 'sc' type: 'Scale' bottom: 'x' top: 'y' scale_param { bias_term: false }", {3, 4, 1, 1}},
      // Many work-items of the vector form, their ranges starting and ending inside planes
      // whose vectors of 8 leave a tail.
      {"name: 'bn' type: 'BatchNorm' batch_norm_param { use_global_stats: true }", {2, 48, 29, 31}},
  };
  const bool exact = !Dev().info().fma_in_software;
  for (DataType t : {DataType::kInt8Q, DataType::kInt16Q})
    for (const Case& c : cases) {
      const std::string what = std::string(c.text) + " " + Name(t);
      Blob x(Dev(), t, c.shape, "x"), y(Dev(), t, {}, "y");
      std::vector<Blob*> bottom{&x}, top{&y};
      std::mt19937 rng(5);
      const auto& tr = TraitsOf(t);
      std::uniform_int_distribution<int64_t> code(tr.qmin, tr.qmax);
      std::vector<float> codes(x.count());
      for (auto& v : codes) v = static_cast<float>(code(rng));
      x.FromFloat(codes);
      auto layer = CreateLayer(LayerText(std::string(c.text) + ranges, t), Dev());
      layer->SetUp(bottom, top);
      const int channels = c.shape[1];
      std::uniform_real_distribution<float> mean(-0.5f, 0.5f), var(0.2f, 2.0f), g(-1.5f, 1.5f);
      if (layer->type() == std::string("BatchNorm")) {
        std::vector<float> m(channels), v(channels);
        for (auto& e : m) e = mean(rng);
        for (auto& e : v) e = var(rng);
        layer->SetParamFromFloat(0, m);
        layer->SetParamFromFloat(1, v);
        layer->SetParamFromFloat(2, {1.0f});
      } else {
        for (int i = 0; i < layer->num_params(); ++i) {
          std::vector<float> p(channels);
          for (auto& e : p) e = g(rng);
          layer->SetParamFromFloat(i, p);
        }
      }
      layer->ParamsChanged();
      for (int i = 0; i < layer->num_params(); ++i)
        EXPECT_EQ(layer->param_blob(i).type(), DataType::kFloat32) << what << ": factors in fp32";
      layer->Forward(bottom, top);
      const std::vector<float> got = y.ToFloat();

      std::vector<float> a, b;
      ASSERT_TRUE(layer->ChannelAffine(channels, &a, &b)) << what;
      const Affine xa = layer->BottomAffine(0), ya = layer->TopAffine(0);
      const QuantizedChannelFactors f =
          QuantizedChannelAffineFactors(t, a, b, xa.scale, ya.scale, ya.zero_point, false);
      Blob want(Dev(), t, c.shape, "want");
      QuantizedChannelAffineReference(t, x.count(), channels, x.count(2), x.host_data(),
                                      want.mutable_host_data(), f, xa.zero_point);
      const std::vector<float> ref = want.ToFloat();
      const int inner = x.count(2);
      int differ = 0, off_real = 0, saturated = 0;
      for (int i = 0; i < x.count(); ++i) {
        differ += got[i] != ref[i];
        const int ch = (i / inner) % channels;
        const double real = a[ch] * xa.scale * (codes[i] - xa.zero_point) + b[ch];
        const double q = std::nearbyint(real / ya.scale) + ya.zero_point;
        const double clamped = std::fmin(std::fmax(q, double(tr.qmin)), double(tr.qmax));
        saturated += clamped != q;
        off_real += std::abs(ref[i] - clamped) > 1.0;
      }
      if (exact)
        EXPECT_EQ(differ, 0) << what << ": the device against its reference, bit for bit";
      else
        EXPECT_LE(differ, x.count() / 100) << what << " (mad() where fma() is in software)";
      EXPECT_EQ(off_real, 0) << what << ": more than one step from the real-valued affine";
      EXPECT_LT(saturated, x.count()) << what << ": the ranges leave values inside the type";
    }
}

// Batch statistics stay fp32: a BatchNorm told use_global_stats: false is not offered the
// quantized types (mpcaffe convert keeps it fp32), and one left to its phase in TRAIN fails at
// setup naming the layer.
TEST(QuantizedChannelAffine, BatchStatisticsStayFloat) {
  auto explicit_batch = CreateLayer(
      LayerText("name: 'bn' type: 'BatchNorm' batch_norm_param { use_global_stats: false }",
                DataType::kFloat32),
      Dev());
  EXPECT_FALSE(explicit_batch->SupportsType(DataType::kInt8Q));
  EXPECT_TRUE(explicit_batch->SupportsType(DataType::kFloat32));
  caffe::LayerParameter p = LayerText("name: 'bn' type: 'BatchNorm'", DataType::kInt8Q);
  p.set_phase(caffe::TRAIN);
  auto layer = CreateLayer(p, Dev());
  Blob x(Dev(), DataType::kInt8Q, {1, 2, 3, 3}, "x"), y(Dev(), DataType::kInt8Q, {}, "y");
  std::vector<Blob*> bottom{&x}, top{&y};
  try {
    layer->SetUp(bottom, top);
    ADD_FAILURE() << "a TRAIN-phase BatchNorm set up in int8";
  } catch (const LayerError& e) {
    EXPECT_NE(std::string(e.what()).find("'bn'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("batch statistics"), std::string::npos) << e.what();
  }
}

// A fused ReLU raises the floor to the top's zero point: no stored value below it.
TEST(QuantizedChannelAffine, ReluFloorIsTheZeroPoint) {
  const QuantizedChannelFactors f = QuantizedChannelAffineFactors(
      DataType::kInt8Q, {1.0f, -2.0f}, {0.5f, -0.25f}, 0.02f, 0.01f, 37, true);
  EXPECT_EQ(f.lo, 37.0f);
  EXPECT_EQ(f.hi, float(TraitsOf(DataType::kInt8Q).qmax));
  std::vector<uint8_t> x(8), y(8);
  for (int i = 0; i < 8; ++i) x[i] = static_cast<uint8_t>(i * 30);
  QuantizedChannelAffineReference(DataType::kInt8Q, 8, 2, 4, x.data(), y.data(), f, 100);
  for (int i = 0; i < 8; ++i) EXPECT_GE(y[i], 37) << i;
  EXPECT_THROW(QuantizedChannelAffineFactors(DataType::kFloat32, {1}, {0}, 1, 1, 0, false),
               std::invalid_argument);
}

}  // namespace
}  // namespace mpcaffe

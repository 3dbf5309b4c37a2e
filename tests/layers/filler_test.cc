// tests/layers/filler_test.cc — the fillers' random values (layers/layer.h FillValues): the
// normal generator's distribution, values independent of how a large blob is split over threads,
// seeds giving different streams, and parameter blobs drawn in blocks straight into device memory
// holding exactly FillValues' values (converted, quantized with their range, per channel in one
// pass) on every device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "device/settings.h"
#include "layers/layer.h"
#include "layers/layer_registry.h"
#include "layers/random_values.h"
#include "proto/model_io.h"
#include "quant/quant_params.h"
#include "quant/quantizer.h"
#include "tests/testing/host_isa_levels.h"

namespace mpcaffe {
namespace {

caffe::FillerParameter Gaussian(float mean, float std) {
  caffe::FillerParameter f;
  f.set_type("gaussian");
  f.set_mean(mean);
  f.set_std(std);
  return f;
}

// Moments and tail mass of 2^21 standard normal draws (the ziggurat's tail beyond 3.44 included):
// each within about five standard errors of the normal's.
TEST(Filler, GaussianDistribution) {
  const size_t n = size_t{1} << 21;
  const std::vector<float> v = FillValues(Gaussian(0.0f, 1.0f), {int(n)}, 42, "test");
  double sum = 0, sum2 = 0, sum4 = 0;
  size_t beyond1 = 0, beyond3 = 0, beyond344 = 0;
  for (float x : v) {
    ASSERT_TRUE(std::isfinite(x));
    sum += x;
    sum2 += double(x) * x;
    sum4 += double(x) * x * x * x;
    beyond1 += std::fabs(x) > 1.0f;
    beyond3 += std::fabs(x) > 3.0f;
    beyond344 += std::fabs(x) > 3.442619855899f;
  }
  const double mean = sum / n, var = sum2 / n - mean * mean, kurt = sum4 / n;
  EXPECT_NEAR(mean, 0.0, 5.0 / std::sqrt(double(n)));
  EXPECT_NEAR(var, 1.0, 5.0 * std::sqrt(2.0 / n));
  EXPECT_NEAR(kurt, 3.0, 5.0 * std::sqrt(96.0 / n));
  // P(|x| > 1) = 0.31731, P(|x| > 3) = 0.0026998, P(|x| > 3.4426) = 0.00057601.
  auto expect_mass = [&](size_t count, double p) {
    EXPECT_NEAR(double(count) / n, p, 5.0 * std::sqrt(p * (1 - p) / n)) << "P = " << p;
  };
  expect_mass(beyond1, 0.31731);
  expect_mass(beyond3, 0.0026998);
  expect_mass(beyond344, 0.00057601);
  // Mean and standard deviation applied.
  const std::vector<float> w = FillValues(Gaussian(2.0f, 0.5f), {int(n)}, 42, "test");
  for (size_t i = 0; i < 1000; ++i) EXPECT_FLOAT_EQ(w[i], 2.0f + 0.5f * v[i]);
}

// A value depends on (seed, index) only: a short blob is the prefix of a long one (drawn in
// parallel chunks), and another seed gives other values.
TEST(Filler, CounterBased) {
  const std::vector<float> big = FillValues(Gaussian(0.0f, 1.0f), {3, 1 << 20}, 9, "test");
  const std::vector<float> small = FillValues(Gaussian(0.0f, 1.0f), {1000}, 9, "test");
  for (size_t i = 0; i < small.size(); ++i) ASSERT_EQ(small[i], big[i]) << i;
  const std::vector<float> other = FillValues(Gaussian(0.0f, 1.0f), {1000}, 10, "test");
  size_t same = 0;
  for (size_t i = 0; i < other.size(); ++i) same += other[i] == small[i];
  EXPECT_LT(same, 5u);
  caffe::FillerParameter u;
  u.set_type("uniform");
  u.set_min(-1.0f);
  u.set_max(1.0f);
  const std::vector<float> ub = FillValues(u, {1 << 21}, 9, "test");
  const std::vector<float> us = FillValues(u, {1000}, 9, "test");
  for (size_t i = 0; i < us.size(); ++i) ASSERT_EQ(us[i], ub[i]) << i;
  EXPECT_GE(*std::min_element(ub.begin(), ub.end()), -1.0f);
  EXPECT_LT(*std::max_element(ub.begin(), ub.end()), 1.0f);
}

/// FNV-1a of the bytes of `v`.
uint64_t Fingerprint(const std::vector<float>& v) {
  uint64_t h = 1469598103934665603ull;
  const auto* b = reinterpret_cast<const unsigned char*>(v.data());
  for (size_t k = 0; k < v.size() * sizeof(float); ++k) h = (h ^ b[k]) * 1099511628211ull;
  return h;
}

// The vectorised uniform and normal values (AVX-512, run at MPCAFFE_ISA=avx512) are the plain
// code's bit for bit: 2^20 values (the ziggurat's wedges and tail included) from ranges that
// start and end off the vector width, for several seeds, means and deviations. Skipped, with the
// reason, on a CPU without AVX-512: the plain code would be compared with itself.
TEST(Filler, VectorisedValuesEqualPlainValues) {
  MPCAFFE_RUN_AT_HOST_ISA(HostIsa::kAvx512);
  ASSERT_TRUE(RandomValuesVectorized());
  const size_t n = size_t{1} << 20;
  std::vector<float> fast(n + 64), plain(n + 64);
  for (const uint64_t seed : {uint64_t{9}, StableHash("conv1#0", 1701), ~uint64_t{0}}) {
    for (const auto& [begin, end] : {std::pair<size_t, size_t>{0, n}, {3, n - 5}, {17, 30}}) {
      for (const auto& [mean, sd] : {std::pair<float, float>{0.0f, 1.0f}, {0.5f, 0.02f}, {-3.0f, 7.0f}}) {
        NormalValues(seed, begin, end, mean, sd, fast.data(), true);
        NormalValues(seed, begin, end, mean, sd, plain.data(), false);
        ASSERT_EQ(std::memcmp(fast.data(), plain.data(), (end - begin) * sizeof(float)), 0)
            << "normal seed " << seed << " [" << begin << ", " << end << ") " << mean << " " << sd;
      }
      UniformValues(seed, begin, end, -0.25, 3.0, fast.data(), true);
      UniformValues(seed, begin, end, -0.25, 3.0, plain.data(), false);
      ASSERT_EQ(std::memcmp(fast.data(), plain.data(), (end - begin) * sizeof(float)), 0)
          << "uniform seed " << seed << " [" << begin << ", " << end << ")";
    }
  }
}

// At every host ISA level the CPU has, the fillers draw the streams they have always drawn:
// fingerprints of 2^20 values from the plain code before it was vectorised (main at 5c812ed), so
// saved nets made from fillers keep their weights whichever path a machine takes.
class FillerIsaTest : public testing::TestWithParam<HostIsa> {};

TEST_P(FillerIsaTest, ValuesKeepTheirFingerprints) {
  MPCAFFE_RUN_AT_HOST_ISA(GetParam());
  EXPECT_EQ(RandomValuesVectorized(), GetParam() >= HostIsa::kAvx512);
  const size_t n = size_t{1} << 20;
  caffe::FillerParameter u;
  u.set_type("uniform");
  u.set_min(-1.0f);
  u.set_max(1.0f);
  EXPECT_EQ(Fingerprint(FillValues(Gaussian(0.0f, 1.0f), {int(n)}, 9, "test")), 0x854f35ba83f7efafull);
  EXPECT_EQ(Fingerprint(FillValues(Gaussian(0.5f, 0.02f), {int(n)}, 1701, "test")), 0x6e4fc1a02fd5e5adull);
  EXPECT_EQ(Fingerprint(FillValues(u, {int(n)}, 9, "test")), 0x425680b219c17642ull);
}

INSTANTIATE_TEST_SUITE_P(Isa, FillerIsaTest, testing::ValuesIn(test_support::HostIsaLevels()),
                         test_support::HostIsaParamName);

/// The fillers of the parameter tests: gaussian, sparse gaussian, xavier, uniform, constant.
std::vector<caffe::FillerParameter> ParameterFillers() {
  caffe::FillerParameter sparse = Gaussian(0.0f, 1.0f), xavier, uniform, constant;
  sparse.set_sparse(100);
  xavier.set_type("xavier");
  uniform.set_type("uniform");
  uniform.set_min(-3.0f);
  uniform.set_max(0.25f);
  constant.set_type("constant");
  constant.set_value(0.75f);
  return {Gaussian(0.5f, 0.02f), sparse, xavier, uniform, constant};
}

/// An InnerProduct layer of `type` on `device` with `outputs` × `inputs` weights from `filler`
/// (lazily drawn) and its bottom and top blobs. int8 weights get one scale per layer
/// (MPCAFFE_PER_CHANNEL_WEIGHTS=0) unless `per_channel`.
struct FilledLayer {
  std::unique_ptr<Blob> bottom, top;
  std::unique_ptr<Layer> layer;
  FilledLayer(Device& device, DataType type, const caffe::FillerParameter& filler, int outputs,
              int inputs, bool per_channel = false) {
    ScopedSettings env;
    env->per_channel_weights = per_channel ? "1" : "0";
    caffe::LayerParameter p;
    ParseProtoFromText("name: 'ip' type: 'InnerProduct' inner_product_param { bias_term: false }",
                       "<test>", &p);
    p.mutable_inner_product_param()->set_num_output(outputs);
    *p.mutable_inner_product_param()->mutable_weight_filler() = filler;
    for (auto set : {&caffe::LayerParameter::set_bottom_data_type,
                     &caffe::LayerParameter::set_compute_data_type,
                     &caffe::LayerParameter::set_top_data_type})
      (p.*set)(DataTypeToProto(type));
    p.set_phase(caffe::TEST);
    bottom = std::make_unique<Blob>(device, type, std::vector<int>{1, inputs}, "x");
    top = std::make_unique<Blob>(device, type, std::vector<int>{}, "y");
    layer = CreateLayer(p, device);
    layer->SetUp({bottom.get()}, {top.get()});
  }
};

// Parameter blobs are drawn in blocks on every core straight into their device memory (no host
// copy); the stored values are FillValues' values of the same seed, converted to the blob's type
// (quantized types: with the range of all the values, as SetParamFromFloat gives) — the same bytes
// on every device. 2^20 weights: several threads and many blocks.
TEST(Filler, ParametersDrawnInBlocksHoldFillValues) {
  const int outputs = 512, inputs = 2048;
  const uint64_t seed = StableHash("ip#0", RandomSeed());  // Layer's seed of blob 0
  for (const caffe::FillerParameter& filler : ParameterFillers()) {
    const std::vector<float> values = FillValues(filler, {outputs, inputs}, seed, "test");
    const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
    for (DataType type : kAllDataTypes) {
      std::vector<uint8_t> first;
      for (Device* device : DeviceList()) {
        const std::string what = filler.type() + " " + Name(type) + " on " + device->Describe();
        FilledLayer f(*device, type, filler, outputs, inputs);
        Layer& l = *f.layer;
        const Blob& w = *l.blobs()[0];  // drawn now
        ASSERT_EQ(w.count(), outputs * inputs);
        // Nothing on the host until asked: the values went to the device side.
        EXPECT_EQ(w.host_bytes(), 0u) << what;
        std::vector<uint8_t> expected(w.bytes());
        if (IsQuantized(type)) {
          quant::Quantizer& q = l.blob_quantizer(0);
          ASSERT_TRUE(q.has_observed()) << what;
          EXPECT_EQ(q.observed_min(), double(*lo)) << what;
          EXPECT_EQ(q.observed_max(), double(*hi)) << what;
          quant::QuantizeTensor(values.data(), values.size(), l.BlobParams(0), expected.data());
        } else {
          Blob host(*device, type, w.shape(), "reference");
          host.FromFloat(values);
          std::memcpy(expected.data(), host.host_data(), host.bytes());
        }
        std::vector<uint8_t> stored(w.bytes());
        std::memcpy(stored.data(), w.host_data(), w.bytes());
        ASSERT_EQ(stored, expected) << what;
        if (first.empty()) first = stored;
        EXPECT_EQ(stored, first) << what << ": other bytes than on the first device";
      }
    }
  }
}

// Per-channel int8 weights are drawn, given their channel's scale and quantized one row at a time
// (rows on every core): the bytes, the channel scales and the observed range are those of drawing
// all the values first and quantizing them per channel (SetParamFromFloat), bit for bit; drawn
// through an fp32 layer's copy (calibration) the fp32 layer gets their dequantized values.
TEST(Filler, PerChannelWeightsDrawnInOnePassEqualDrawingThenQuantizing) {
  const int outputs = 512, inputs = 2048;
  const uint64_t seed = StableHash("ip#0", RandomSeed());
  Device& device = DefaultDevice();
  for (const caffe::FillerParameter& filler : ParameterFillers()) {
    SCOPED_TRACE(filler.type());
    const std::vector<float> values = FillValues(filler, {outputs, inputs}, seed, "test");
    FilledLayer whole(device, DataType::kInt8Q, filler, outputs, inputs, true);
    whole.layer->SetParamFromFloat(0, values);
    FilledLayer rows(device, DataType::kInt8Q, filler, outputs, inputs, true);
    FilledLayer copy(device, DataType::kFloat32, filler, outputs, inputs);
    FilledLayer source(device, DataType::kInt8Q, filler, outputs, inputs, true);
    copy.layer->CopyParamValuesFrom(0, *source.layer);
    const quant::QuantParams want = whole.layer->BlobParams(0);
    ASSERT_TRUE(want.per_channel());
    auto bytes = [](Layer& l) {
      const Blob& w = *l.blobs()[0];
      const auto* b = static_cast<const uint8_t*>(w.host_data());
      return std::vector<uint8_t>(b, b + w.bytes());
    };
    const std::vector<uint8_t> expected = bytes(*whole.layer);
    for (Layer* l : {rows.layer.get(), source.layer.get()}) {
      EXPECT_TRUE(bytes(*l) == expected);  // `rows` drawn now
      quant::Quantizer &q = l->blob_quantizer(0), &w = whole.layer->blob_quantizer(0);
      EXPECT_EQ(q.channel_scales(), w.channel_scales());
      EXPECT_EQ(q.observed_min(), w.observed_min());
      EXPECT_EQ(q.observed_max(), w.observed_max());
    }
    std::vector<float> real(values.size());
    quant::DequantizeTensor(expected.data(), expected.size(), want, real.data(), inputs);
    EXPECT_TRUE(copy.layer->ParamAsFloat(0) == real);
  }
}

// A quantized parameter the file gives a range keeps it: the values are drawn once, quantized
// with that range (saturating outside it).
TEST(Filler, QuantizedParameterWithAGivenRangeKeepsIt) {
  ScopedSettings env;  // one scale per layer: the range is the weights' (FilledLayer)
  env->per_channel_weights = "0";
  caffe::FillerParameter f = Gaussian(0.0f, 1.0f);
  FilledLayer plain(DefaultDevice(), DataType::kInt8Q, f, 64, 4096);
  caffe::LayerParameter p = plain.layer->layer_param();
  auto* q = p.add_blobs_quantizer();
  q->set_observed_min(-0.5);
  q->set_observed_max(0.5);
  Blob bottom(DefaultDevice(), DataType::kInt8Q, {1, 4096}, "x"), top(DefaultDevice(), DataType::kInt8Q, {}, "y");
  std::unique_ptr<Layer> l = CreateLayer(p, DefaultDevice());
  l->SetUp({&bottom}, {&top});
  const Blob& w = *l->blobs()[0];
  EXPECT_EQ(l->blob_quantizer(0).observed_min(), -0.5);
  EXPECT_EQ(l->blob_quantizer(0).observed_max(), 0.5);
  const std::vector<float> values = FillValues(f, w.shape(), StableHash("ip#0", RandomSeed()), "t");
  std::vector<uint8_t> expected(w.bytes());
  quant::QuantizeTensor(values.data(), values.size(), l->BlobParams(0), expected.data());
  const auto* stored = static_cast<const uint8_t*>(w.host_data());
  EXPECT_EQ(std::vector<uint8_t>(stored, stored + w.bytes()), expected);
}

}  // namespace
}  // namespace mpcaffe

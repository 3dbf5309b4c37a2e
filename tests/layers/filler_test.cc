// tests/layers/filler_test.cc — the fillers' random values (layers/layer.h FillValues): the
// normal generator's distribution, values independent of how a large blob is split over threads,
// and seeds giving different streams.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "layers/layer.h"

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

}  // namespace
}  // namespace mpcaffe

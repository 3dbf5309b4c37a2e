// tests/testing/close_to_reference.h — float results against a plain C++ reference, each value
// within a relative tolerance of max(|want|, rms(want)): the rms guards values that are small
// only by cancellation, where a purely relative bound would ask for more than fp32 sums give.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace mpcaffe::test_support {

/// The root mean square of `v` (0 for none).
inline double RmsOf(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += double(x) * x;
  return std::sqrt(s / std::max<size_t>(v.size(), 1));
}

/// The largest |got − want| / max(|want|, rms(want)).
inline double RelativeError(const std::vector<float>& got, const std::vector<float>& want) {
  const double rms = RmsOf(want);
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, std::fabs(double(got[i]) - want[i]) /
                                std::max(std::fabs(double(want[i])), rms));
  return worst;
}

/// Expects |got − want| ≤ tol · max(|want|, rms(want)) for every element (NaN fails), reports
/// the first five that are not, and returns how many are not.
inline int ExpectCloseToReference(const std::vector<float>& got, const std::vector<float>& want,
                                  double tol, const std::string& what) {
  EXPECT_EQ(got.size(), want.size()) << what;
  const double rms = RmsOf(want);
  int bad = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    const double scale = std::max(std::fabs(double(want[i])), rms);
    if (!(std::fabs(double(got[i]) - want[i]) <= tol * scale + 1e-30) && bad++ < 5)
      ADD_FAILURE() << what << ": element " << i << " got " << got[i] << " want " << want[i];
  }
  return bad;
}

}  // namespace mpcaffe::test_support

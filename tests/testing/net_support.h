// tests/testing/net_support.h — what the net suites share: a NetParameter from prototxt text
// written in a test, a deterministic input, and the relative difference of two outputs.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "layers/blob.h"
#include "proto/model_io.h"

namespace mpcaffe::test_support {

/// Parses `text`; a malformed text throws with `source` and the line in the message.
inline caffe::NetParameter NetText(const std::string& text, const std::string& source = "<test>") {
  caffe::NetParameter p;
  ParseProtoFromText(text, source, &p);
  return p;
}

/// sin(0.37 i + 0.2) for every element of `b`: the same input for every variant of a net.
inline std::vector<float> SineInput(const Blob& b) {
  std::vector<float> x(b.count());
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i) + 0.2f);
  return x;
}

/// Largest |a − b| over the largest |b|; infinite where either holds a NaN or an infinity.
inline double RelativeDifference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return INFINITY;
    diff = std::max(diff, std::abs(double(a[i]) - b[i]));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return diff / std::max(scale, 1e-30);
}

}  // namespace mpcaffe::test_support

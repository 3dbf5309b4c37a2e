// tests/testing/net_support.h — what the net and layer suites share: a NetParameter or one
// layer's parameters from prototxt text written in a test, a deterministic input, the relative
// difference of two outputs, and a net blob's real values.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "layers/blob.h"
#include "layers/layer.h"
#include "net/net.h"
#include "quant/quant_params.h"
#include "proto/model_io.h"

namespace mpcaffe::test_support {

/// Parses `text`; a malformed text throws with `source` and the line in the message.
inline caffe::NetParameter NetText(const std::string& text, const std::string& source = "<test>") {
  caffe::NetParameter p;
  ParseProtoFromText(text, source, &p);
  return p;
}

/// One layer from prototxt text (named "L" unless it names itself) whose bottoms, computation
/// and tops are all in `t`, in the TEST phase: a layer suite's single-layer fixture.
inline caffe::LayerParameter LayerText(const std::string& text, DataType t) {
  caffe::LayerParameter p;
  ParseProtoFromText(text, "<test>", &p);
  if (p.name().empty()) p.set_name("L");
  p.set_bottom_data_type(DataTypeToProto(t));
  p.set_compute_data_type(DataTypeToProto(t));
  p.set_top_data_type(DataTypeToProto(t));
  p.set_phase(caffe::TEST);
  return p;
}

/// The message of the mpcaffe::Error `f` throws ("" when it throws none).
inline std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
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

/// Real values of a net blob (quantized ones dequantized with the producing layer's top
/// parameters).
inline std::vector<float> RealValues(Net& net, const std::string& blob) {
  Blob& b = net.blob(blob);
  if (!IsQuantized(b.type())) return b.ToFloat();
  for (size_t i = net.layers().size(); i-- > 0;)
    for (size_t t = 0; t < net.top_vecs()[i].size(); ++t)
      if (net.top_vecs()[i][t] == &b) {
        std::vector<float> out(b.count());
        quant::DequantizeTensor(b.host_data(), b.count(),
                                net.layers()[i]->TopParams(static_cast<int>(t)), out.data());
        return out;
      }
  throw Error("no producer of " + blob);
}

}  // namespace mpcaffe::test_support

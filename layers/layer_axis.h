// layers/layer_axis.h — a layer parameter's axis made non-negative as BVLC's CanonicalAxisIndex,
// with an out-of-range axis reported through the layer (its name and the parameter's field).
#pragma once

#include <string>

#include "layers/blob.h"

namespace mpcaffe {

/// `axis` of `blob` (negative: from the end); out of range, `fail` gets a message naming `field`
/// ("softmax_param.axis") and the blob's shape.
template <typename FailFn>
int AxisOfField(const Blob& blob, int axis, const char* field, FailFn fail) {
  const int n = blob.num_axes();
  if (axis < -n || axis >= n)
    fail(std::string(field) + " " + std::to_string(axis) + " is out of range for bottom " + blob.shape_string());
  return axis < 0 ? axis + n : axis;
}

}  // namespace mpcaffe

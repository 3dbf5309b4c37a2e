// quant/accumulation.h — whether a quantized dot product over K terms can overflow its
// accumulator type (int8q: int32, int16q: int64), checked once when a layer is set up.
#pragma once

#include <cstdint>
#include <string>

#include "codegen/datatype.h"
#include "device/error.h"

namespace mpcaffe::quant {

/// A quantized layer's dot products are too long for the accumulator: the result could wrap.
class AccumulationOverflowError : public Error {
 public:
  using Error::Error;
};

/// Largest K for which K products of two stored values of `type` (each as large in magnitude as
/// the type's range allows, as the GEMM/convolution kernels multiply stored values before the
/// zero-point corrections) always fit in the type's accumulator. int8q: 255·255 per product in
/// int32 → 33 025; int16q: 65 535² per product in int64 → 2 147 549 185 (more than any int K).
/// Floating-point types: INT64_MAX (they round, they do not wrap).
int64_t MaxAccumulationDepth(DataType type);

/// Throws AccumulationOverflowError when a `k`-term dot product in `type` can overflow its
/// accumulator. `who` names the layer in the message, e.g. "layer 'fc6' (InnerProduct)".
void CheckAccumulationDepth(const std::string& who, DataType type, int64_t k);

}  // namespace mpcaffe::quant

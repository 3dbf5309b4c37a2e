// quant/accumulation.cc — the accumulator-overflow bound of quantized dot products.
#include "quant/accumulation.h"

#include <algorithm>
#include <cstdlib>

namespace mpcaffe::quant {
namespace {

/// Largest value the accumulator scalar holds (0 for floating-point accumulators).
int64_t AccumulatorMax(Scalar acc) {
  const ScalarTraits& t = TraitsOf(acc);
  if (t.is_float) return 0;
  const int value_bits = t.bits - (t.is_signed ? 1 : 0);
  return value_bits >= 63 ? INT64_MAX : (int64_t{1} << value_bits) - 1;
}

}  // namespace

int64_t MaxAccumulationDepth(DataType type) {
  const DataTypeTraits& t = TraitsOf(type);
  const int64_t acc_max = AccumulatorMax(t.acctype);
  if (!t.quantized || acc_max == 0) return INT64_MAX;
  const int64_t magnitude = std::max(std::llabs(t.qmin), std::llabs(t.qmax));
  const int64_t product = magnitude * magnitude;  // ≤ 65 535², no overflow
  return product == 0 ? INT64_MAX : acc_max / product;
}

void CheckAccumulationDepth(const std::string& who, DataType type, int64_t k) {
  const int64_t limit = MaxAccumulationDepth(type);
  if (k <= limit) return;
  const DataTypeTraits& t = TraitsOf(type);
  const int64_t magnitude = std::max(std::llabs(t.qmin), std::llabs(t.qmax));
  throw AccumulationOverflowError(
      who + ": " + Name(type) + " dot products over K = " + std::to_string(k) +
      " terms can overflow the int" + std::to_string(TraitsOf(t.acctype).bits) + " accumulator (at most " +
      std::to_string(limit) + " terms of up to " + std::to_string(magnitude) + "·" +
      std::to_string(magnitude) + " are safe); compute this layer in int16q or a float type, or "
      "split it");
}

}  // namespace mpcaffe::quant

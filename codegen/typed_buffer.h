// codegen/typed_buffer.h — host access to element i of a buffer stored in one of the data
// types: the one accessor every host reference, blob view and quantization routine uses.
// The storage of each type is the trait table's (codegen/datatype.cc); fp16 goes through the
// one half converter (HalfToFloat / FloatToHalf).
#pragma once

#include <cstddef>
#include <cstdint>

#include "codegen/datatype.h"

namespace mpcaffe {

/// Float types (fp32, fp16): element i widened to float (exact).
inline float LoadF(DataType t, const void* p, size_t i) {
  if (t == DataType::kFloat32) return static_cast<const float*>(p)[i];
  return HalfToFloat(static_cast<const uint16_t*>(p)[i]);
}

/// Float types: stores `v` as element i (fp16 rounds to nearest even).
inline void StoreF(DataType t, void* p, size_t i, float v) {
  if (t == DataType::kFloat32)
    static_cast<float*>(p)[i] = v;
  else
    static_cast<uint16_t*>(p)[i] = FloatToHalf(v);
}

/// Quantized types (int8q, int16q): the stored integer of element i — uint8 / uint16, or
/// int8 / int16 when `is_signed` (signed weights).
inline int32_t LoadQ(DataType t, const void* p, size_t i, bool is_signed = false) {
  if (t == DataType::kInt8Q)
    return is_signed ? static_cast<const int8_t*>(p)[i] : static_cast<const uint8_t*>(p)[i];
  return is_signed ? static_cast<const int16_t*>(p)[i] : static_cast<const uint16_t*>(p)[i];
}

/// Quantized types: stores `v` saturated to [max(lo, qmin), qmax] as element i.
inline void StoreQ(DataType t, void* p, size_t i, int64_t v, int64_t lo = INT64_MIN) {
  const DataTypeTraits& tr = TraitsOf(t);
  if (lo < tr.qmin) lo = tr.qmin;
  v = v < lo ? lo : (v > tr.qmax ? tr.qmax : v);
  if (t == DataType::kInt8Q)
    static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v);
  else
    static_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(v);
}

/// Any type: element i as float — the value for float types, the stored integer (not
/// dequantized) for quantized ones.
inline float LoadAsFloat(DataType t, const void* p, size_t i) {
  return IsQuantized(t) ? static_cast<float>(LoadQ(t, p, i)) : LoadF(t, p, i);
}

}  // namespace mpcaffe

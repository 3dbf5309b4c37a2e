// libdnn/typed_host.h — private helpers shared by the convolution, pooling and LRN sources:
// host access to typed storage for the references, the requantization a type's accumulator
// uses, and the kernel-text macro of the same requantization.
#pragma once

#include <cstdint>
#include <string>

#include "codegen/datatype.h"
#include "codegen/kernel_writer.h"
#include "quant/fixed_point.h"

namespace mpcaffe::libdnn::host {

/// Float types: the stored value widened to float.
inline float LoadF(DataType t, const void* p, size_t i) {
  if (t == DataType::kFloat32) return static_cast<const float*>(p)[i];
  return HalfToFloat(static_cast<const uint16_t*>(p)[i]);
}
/// Float types: stores `v` (fp16 rounds to nearest even).
inline void StoreF(DataType t, void* p, size_t i, float v) {
  if (t == DataType::kFloat32)
    static_cast<float*>(p)[i] = v;
  else
    static_cast<uint16_t*>(p)[i] = FloatToHalf(v);
}
/// Quantized types: the stored integer (uint8 / uint16; int8 / int16 when `is_signed`).
inline int32_t LoadQ(DataType t, const void* p, size_t i, bool is_signed = false) {
  if (t == DataType::kInt8Q)
    return is_signed ? static_cast<const int8_t*>(p)[i] : static_cast<const uint8_t*>(p)[i];
  return is_signed ? static_cast<const int16_t*>(p)[i] : static_cast<const uint16_t*>(p)[i];
}
/// Quantized types: stores `v` saturated to [lo, qmax] (lo defaults to qmin).
inline void StoreQ(DataType t, void* p, size_t i, int64_t v, int64_t lo = INT64_MIN) {
  const auto& tr = TraitsOf(t);
  if (lo < tr.qmin) lo = tr.qmin;
  v = v < lo ? lo : (v > tr.qmax ? tr.qmax : v);
  if (t == DataType::kInt8Q)
    static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v);
  else
    static_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(v);
}
/// The requantization of a type's accumulator: Requantize32 (int8q, `acc` wrapped to int32
/// first, as the kernels' int arithmetic does) or Requantize64 (int16q).
inline int64_t Requant(DataType t, int64_t acc, quant::FixedPointMultiplier m) {
  if (TraitsOf(t).acctype == Scalar::kI64) return quant::Requantize64(acc, m);
  return quant::Requantize32(static_cast<int32_t>(static_cast<uint32_t>(acc)), m);
}

/// Declares MP_REQUANT(acc, m, s) for `type`'s accumulator (mp_requant32 / mp_requant64)
/// returning mp_i64.
inline void UseRequant(KernelWriter& w, DataType type) {
  w.UseHelper(KernelHelper::kRequantize);
  w.Define("MP_REQUANT(acc, m, s)", TraitsOf(type).acctype == Scalar::kI64
                                        ? "mp_requant64((mp_i64)(acc), m, s)"
                                        : "(mp_i64)mp_requant32((int)(acc), m, s)");
}

/// "what: field = value must be ..." error text helper.
inline std::string Field(const std::string& name, long long value) {
  return name + " = " + std::to_string(value);
}

}  // namespace mpcaffe::libdnn::host

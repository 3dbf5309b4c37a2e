// quant/fixed_point.h — the host reference of fixed-point requantization: a real multiplier
// as a 32-bit multiplier and a power-of-two shift, applied with round-to-nearest. Every
// quantized kernel must match these functions bit for bit.
#pragma once

#include <cstdint>

namespace mpcaffe::quant {

/// A positive real multiplier M ≈ multiplier · 2^(shift − 31), multiplier in [2^30, 2^31).
/// M == 0 (or too small to matter, below 2^-62) is {0, 0}.
struct FixedPointMultiplier {
  int32_t multiplier = 0;
  int32_t shift = 0;
};

/// Splits a real multiplier (M >= 0, M < 2^31) into a fixed-point multiplier and shift,
/// rounding the mantissa to nearest. Throws std::invalid_argument outside that range.
FixedPointMultiplier QuantizeMultiplier(double real_multiplier);

/// gemmlowp's SaturatingRoundingDoublingHighMul: round(a·b / 2^31), ties away from zero,
/// saturating the single overflow case (INT32_MIN · INT32_MIN).
int32_t SaturatingRoundingDoublingHighMul(int32_t a, int32_t b);

/// gemmlowp's RoundingDivideByPOT: round(x / 2^exponent), ties away from zero;
/// exponent in [0, 31].
int32_t RoundingDivideByPOT(int32_t x, int exponent);

/// Requantizes an int32 accumulator (int8q path), as gemmlowp / TFLite do: a saturating left
/// shift for M >= 1, the rounding doubling high multiply, then a rounding right shift.
/// Right shifts beyond 31 give the result of shifting by 31.
int32_t Requantize32(int32_t acc, FixedPointMultiplier m);

/// Requantizes an int64 accumulator (int16q path) with the full 31-bit multiplier and a
/// single rounding: round(acc · multiplier / 2^(31 − shift)), ties away from zero, saturated
/// to int64.
int64_t Requantize64(int64_t acc, FixedPointMultiplier m);

}  // namespace mpcaffe::quant

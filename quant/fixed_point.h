// quant/fixed_point.h — the host reference of fixed-point requantization: a real multiplier
// as a 32-bit multiplier and a power-of-two shift, applied with round-to-nearest. Every
// quantized kernel must match these functions bit for bit.
#pragma once

#include <cstdint>
#include <vector>

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

/// gemmlowp's SaturatingRoundingDoublingHighMul: a·b / 2^31 rounded to nearest (positive ties
/// away from zero, negative ties toward +inf, as gemmlowp does), saturating the single overflow
/// case (INT32_MIN · INT32_MIN). Kept bit-for-bit with gemmlowp as a reference primitive.
int32_t SaturatingRoundingDoublingHighMul(int32_t a, int32_t b);

/// gemmlowp's RoundingDivideByPOT: round(x / 2^exponent), ties away from zero;
/// exponent in [0, 31].
int32_t RoundingDivideByPOT(int32_t x, int exponent);

/// Requantizes an int32 accumulator (int8q path): the 64-bit product acc · multiplier shifted
/// right by 31 − shift with ONE rounding (ties away from zero), saturated to int32. Unlike the
/// gemmlowp composition RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(·)), which
/// rounds twice and misses the exactly rounded result in ~2^-(right+1) of cases, this is the
/// exactly rounded value for every multiplier, including those below 2^-32 (result 0).
int32_t Requantize32(int32_t acc, FixedPointMultiplier m);

/// Requantizes an int64 accumulator (int16q path) with the full 31-bit multiplier and a
/// single rounding: round(acc · multiplier / 2^(31 − shift)), ties away from zero, saturated
/// to int64.
int64_t Requantize64(int64_t acc, FixedPointMultiplier m);

/// The left shift pre (1 … 30) that brings every right shift 31 − shift of `m` into 34 … 62
/// — an int32 accumulator's requantization in int32 lanes (VectorWords::RequantHigh) — where
/// some are below 34 (a first layer's large scale ratio), provided every value past
/// ±2^(31 − pre), which such lanes clamp before the shift, saturates: Requantize32 of
/// 2^(31 − pre) − 1 is at least `saturating` for every nonzero multiplier. Below the clamp
/// Requantize32(acc · 2^pre, {multiplier, shift − pre}) equals Requantize32(acc, m) exactly.
/// 0 where no shift is needed (all of 34 … 62) or none applies.
int RequantPreShift(const std::vector<FixedPointMultiplier>& m, int32_t saturating);

}  // namespace mpcaffe::quant

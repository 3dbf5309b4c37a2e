// quant/fixed_point.cc — host reference of fixed-point requantization (see fixed_point.h).
#include "quant/fixed_point.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace mpcaffe::quant {

FixedPointMultiplier QuantizeMultiplier(double real) {
  if (!(real >= 0.0) || !(real < 2147483648.0))
    throw std::invalid_argument("QuantizeMultiplier: multiplier " + std::to_string(real) +
                                " is outside [0, 2^31)");
  if (real == 0.0) return {};
  int exponent = 0;
  double mantissa = std::frexp(real, &exponent);  // real = mantissa · 2^exponent, [0.5, 1)
  int64_t q = std::llround(mantissa * 2147483648.0);
  if (q == (int64_t{1} << 31)) {  // the mantissa rounded up to 1.0
    q /= 2;
    ++exponent;
  }
  if (exponent < -62) return {};  // below every accumulator's resolution
  return {static_cast<int32_t>(q), exponent};
}

int32_t SaturatingRoundingDoublingHighMul(int32_t a, int32_t b) {
  if (a == b && a == std::numeric_limits<int32_t>::min())
    return std::numeric_limits<int32_t>::max();
  int64_t ab = static_cast<int64_t>(a) * b;
  int64_t nudge = ab >= 0 ? (int64_t{1} << 30) : (1 - (int64_t{1} << 30));
  return static_cast<int32_t>((ab + nudge) / (int64_t{1} << 31));
}

int32_t RoundingDivideByPOT(int32_t x, int exponent) {
  const int32_t mask = static_cast<int32_t>((int64_t{1} << exponent) - 1);
  const int32_t remainder = x & mask;
  const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

int32_t Requantize32(int32_t acc, FixedPointMultiplier m) {
  const int64_t r = Requantize64(acc, m);
  if (r > std::numeric_limits<int32_t>::max()) return std::numeric_limits<int32_t>::max();
  if (r < std::numeric_limits<int32_t>::min()) return std::numeric_limits<int32_t>::min();
  return static_cast<int32_t>(r);
}

int RequantPreShift(const std::vector<FixedPointMultiplier>& m, int32_t saturating) {
  if (m.empty()) return 0;
  int low = 62, high = 0;
  for (const FixedPointMultiplier& x : m) {
    low = std::min(low, 31 - x.shift);
    high = std::max(high, 31 - x.shift);
  }
  const int pre = 34 - low;
  if (pre <= 0 || pre > 30 || high + pre > 62) return 0;
  const int32_t top = int32_t(0x7fffffffu >> pre);
  for (const FixedPointMultiplier& x : m)
    if (x.multiplier != 0 && Requantize32(top, x) < saturating) return 0;
  return pre;
}

int64_t Requantize64(int64_t acc, FixedPointMultiplier m) {
  const int right = 31 - m.shift;  // >= 1 because multiplier < 2^31 and M < 2^31
  const bool negative = acc < 0;
  unsigned __int128 magnitude =
      static_cast<unsigned __int128>(negative ? -static_cast<__int128>(acc) : acc) *
      static_cast<uint32_t>(m.multiplier);
  unsigned __int128 rounded;
  if (right >= 128) {
    rounded = 0;
  } else if (right <= 0) {
    rounded = magnitude << (-right);
  } else {
    rounded = (magnitude + (static_cast<unsigned __int128>(1) << (right - 1))) >> right;
  }
  const unsigned __int128 limit = static_cast<unsigned __int128>(std::numeric_limits<int64_t>::max());
  if (rounded > limit) rounded = limit;
  return negative ? -static_cast<int64_t>(rounded) : static_cast<int64_t>(rounded);
}

}  // namespace mpcaffe::quant

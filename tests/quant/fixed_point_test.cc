// tests/quant/fixed_point_test.cc — property tests of the fixed-point requantization reference
// (quant/fixed_point.h): exactness against the rounded rational result, full-width int16q
// multipliers, and bit-for-bit agreement with gemmlowp's primitives.
#include "quant/fixed_point.h"

#include <gemmlowp/fixedpoint/fixedpoint.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

namespace mpcaffe::quant {
namespace {

constexpr double kTwo31 = 2147483648.0;

/// round(acc · m), ties away from zero, computed exactly for a double m (m = mant · 2^e with
/// a 53-bit integer mantissa); magnitudes beyond 2^100 are reported as ±2^100.
__int128 ExactRound(int64_t acc, double m) {
  if (m == 0.0 || acc == 0) return 0;
  int e = 0;
  const double f = std::frexp(m, &e);
  const int64_t mant = static_cast<int64_t>(std::ldexp(f, 53));
  const int sh = e - 53;
  const unsigned __int128 mag =
      static_cast<unsigned __int128>(acc < 0 ? -static_cast<__int128>(acc) : acc) *
      static_cast<uint64_t>(mant);
  unsigned __int128 r;
  if (sh >= 0) {
    r = sh > 15 ? (static_cast<unsigned __int128>(1) << 100) : mag << sh;
  } else {
    const int s = -sh;
    r = s >= 120 ? 0 : (mag + (static_cast<unsigned __int128>(1) << (s - 1))) >> s;
  }
  return acc < 0 ? -static_cast<__int128>(r) : static_cast<__int128>(r);
}

double LogUniformScale(std::mt19937_64& rng) {
  return std::pow(10.0, std::uniform_real_distribution<double>(-6.0, 6.0)(rng));
}

int32_t RandomInt32(std::mt19937_64& rng) {
  // Half uniform over int32, half log-uniform magnitudes (small values matter most), with the
  // extremes mixed in.
  switch (rng() % 8) {
    case 0: {
      static const int32_t kEdges[] = {0,
                                       1,
                                       -1,
                                       2,
                                       -2,
                                       std::numeric_limits<int32_t>::max(),
                                       std::numeric_limits<int32_t>::min(),
                                       std::numeric_limits<int32_t>::min() + 1,
                                       1 << 30,
                                       -(1 << 30),
                                       (1 << 30) - 1,
                                       1 << 15,
                                       -(1 << 15)};
      return kEdges[rng() % (sizeof kEdges / sizeof kEdges[0])];
    }
    case 1:
    case 2:
    case 3: {
      const int bits = static_cast<int>(rng() % 32);
      const int64_t mag = static_cast<int64_t>(rng() & ((uint64_t{1} << bits) - 1));
      return static_cast<int32_t>(rng() & 1 ? -mag : mag);
    }
    default:
      return static_cast<int32_t>(static_cast<uint32_t>(rng()));
  }
}

/// TFLite's MultiplyByQuantizedMultiplier written with gemmlowp's primitives: saturating left
/// shift by a compile-time exponent, rounding doubling high multiply, rounding right shift.
template <int... kLeft>
int32_t GemmlowpLeftShift(int32_t x, int left, std::integer_sequence<int, kLeft...>) {
  int32_t result = 0;
  ((left == kLeft ? (result = gemmlowp::SaturatingRoundingMultiplyByPOT<kLeft>(x), 0) : 0), ...);
  return result;
}

int32_t GemmlowpRequantize(int32_t acc, FixedPointMultiplier m) {
  const int left = m.shift > 0 ? m.shift : 0;
  const int right = m.shift > 0 ? 0 : (-m.shift > 31 ? 31 : -m.shift);
  const int32_t shifted = GemmlowpLeftShift(acc, left, std::make_integer_sequence<int, 32>());
  return gemmlowp::RoundingDivideByPOT(
      gemmlowp::SaturatingRoundingDoublingHighMul(shifted, m.multiplier), right);
}

/// Mismatch statistics of a requantization function against the exactly rounded result.
struct PipelineStats {
  long cases = 0, mismatches = 0, max_steps_off = 0, skipped = 0;
  double rate() const { return cases ? static_cast<double>(mismatches) / cases : 0.0; }
};

/// Random layers: scales s_a, s_b, s_c log-uniform in 1e-6 … 1e6 give M = s_a·s_b/s_c; the
/// accumulator is drawn so that |acc·M| stays within twice the output range [qmin, qmax]
/// (larger results are clamped by every pipeline) and within ±acc_limit. Multipliers at or
/// beyond 2^31, and ones that leave no accumulator in range, are skipped and counted.
template <typename Fn>
PipelineStats RunPipeline(int64_t qmin, int64_t qmax, int64_t acc_limit, int cases, int seed,
                          Fn requantize) {
  std::mt19937_64 rng(seed);
  PipelineStats s;
  while (s.cases < cases) {
    const double m = LogUniformScale(rng) * LogUniformScale(rng) / LogUniformScale(rng);
    const double reach = 2.0 * static_cast<double>(qmax - qmin) / m;
    const double limit = std::min(static_cast<double>(acc_limit), reach);
    if (m >= kTwo31 || limit < 1.0) {
      ++s.skipped;
      continue;
    }
    const double mag = std::pow(limit, std::uniform_real_distribution<double>(0.0, 1.0)(rng));
    const int64_t acc = static_cast<int64_t>(mag) * (rng() & 1 ? -1 : 1);
    const int64_t want = static_cast<int64_t>(ExactRound(acc, m));
    const int64_t got = requantize(acc, QuantizeMultiplier(m));
    ++s.cases;
    const long off = static_cast<long>(got > want ? got - want : want - got);
    if (off) ++s.mismatches;
    s.max_steps_off = std::max(s.max_steps_off, off);
  }
  return s;
}

TEST(FixedPoint, QuantizeMultiplierRepresentsTheRealMultiplier) {
  EXPECT_EQ(QuantizeMultiplier(0.0).multiplier, 0);
  EXPECT_EQ(QuantizeMultiplier(0.0).shift, 0);
  EXPECT_EQ(QuantizeMultiplier(1e-30).multiplier, 0);  // below 2^-62
  EXPECT_THROW(QuantizeMultiplier(-1.0), std::invalid_argument);
  EXPECT_THROW(QuantizeMultiplier(kTwo31), std::invalid_argument);
  EXPECT_THROW(QuantizeMultiplier(std::nan("")), std::invalid_argument);
  EXPECT_THROW(QuantizeMultiplier(INFINITY), std::invalid_argument);
  // A mantissa that rounds up to 1.0 moves to the next exponent.
  const FixedPointMultiplier up = QuantizeMultiplier(std::nextafter(1.0, 0.0));
  EXPECT_EQ(up.multiplier, 1 << 30);
  EXPECT_EQ(up.shift, 1);
  const FixedPointMultiplier one = QuantizeMultiplier(1.0);
  EXPECT_EQ(one.multiplier, 1 << 30);
  EXPECT_EQ(one.shift, 1);

  std::mt19937_64 rng(7);
  for (int i = 0; i < 100000; ++i) {
    const double real = std::pow(2.0, std::uniform_real_distribution<double>(-60, 30.99)(rng));
    const FixedPointMultiplier m = QuantizeMultiplier(real);
    ASSERT_GE(m.multiplier, 1 << 30) << real;
    const double represented = std::ldexp(static_cast<double>(m.multiplier), m.shift - 31);
    // Rounded to nearest: within half a unit of the multiplier's last place.
    ASSERT_LE(std::fabs(represented - real), std::ldexp(0.5, m.shift - 31)) << real;
  }
}

TEST(FixedPoint, BitForBitWithGemmlowpPrimitives) {
  constexpr int kCases = 1200000;
  std::mt19937_64 rng(11);
  long srdhm_mismatch = 0, rdbpot_mismatch = 0;
  for (int i = 0; i < kCases; ++i) {
    const int32_t a = RandomInt32(rng), b = RandomInt32(rng);
    if (SaturatingRoundingDoublingHighMul(a, b) !=
        gemmlowp::SaturatingRoundingDoublingHighMul(a, b)) {
      if (++srdhm_mismatch <= 5) ADD_FAILURE() << "SRDHM(" << a << ", " << b << ")";
    }
    const int exponent = static_cast<int>(rng() % 32);
    if (RoundingDivideByPOT(a, exponent) != gemmlowp::RoundingDivideByPOT(a, exponent)) {
      if (++rdbpot_mismatch <= 5) ADD_FAILURE() << "RDBPOT(" << a << ", " << exponent << ")";
    }
  }
  std::printf(
      "[ gemmlowp ] %d cases each: SaturatingRoundingDoublingHighMul %ld mismatches, "
      "RoundingDivideByPOT %ld\n",
      kCases, srdhm_mismatch, rdbpot_mismatch);
  EXPECT_EQ(srdhm_mismatch, 0);
  EXPECT_EQ(rdbpot_mismatch, 0);
}

// Requantize32 rounds once; the gemmlowp composition (GemmlowpRequantize) rounds twice, which
// is reported for comparison.
TEST(FixedPoint, Int8qRequantizationMatchesExactRounding) {
  const PipelineStats s = RunPipeline(0, 255, std::numeric_limits<int32_t>::max(), 1000000, 21,
                                      [](int64_t acc, FixedPointMultiplier m) {
                                        return Requantize32(static_cast<int32_t>(acc), m);
                                      });
  std::printf(
      "[ int8q ] Requantize32 vs exact: %ld / %ld mismatches (%.4f%%), max %ld step(s) "
      "off, %ld unreachable cases skipped\n",
      s.mismatches, s.cases, 100.0 * s.rate(), s.max_steps_off, s.skipped);
  EXPECT_LE(s.max_steps_off, 1);
  EXPECT_LE(s.rate(), 0.001);
  const PipelineStats g = RunPipeline(0, 255, std::numeric_limits<int32_t>::max(), 1000000, 21,
                                      [](int64_t acc, FixedPointMultiplier m) {
                                        return GemmlowpRequantize(static_cast<int32_t>(acc), m);
                                      });
  std::printf("[ int8q ] gemmlowp double-rounding composition vs exact: %ld / %ld (%.4f%%)\n",
              g.mismatches, g.cases, 100.0 * g.rate());
}

TEST(FixedPoint, Int16qRequantizationMatchesExactRounding) {
  const PipelineStats s =
      RunPipeline(0, 65535, int64_t{1} << 46, 1000000, 22,
                  [](int64_t acc, FixedPointMultiplier m) { return Requantize64(acc, m); });
  std::printf(
      "[ int16q ] Requantize64 vs exact: %ld / %ld mismatches (%.4f%%), max %ld step(s) "
      "off, %ld unreachable cases skipped\n",
      s.mismatches, s.cases, 100.0 * s.rate(), s.max_steps_off, s.skipped);
  EXPECT_LE(s.max_steps_off, 1);
  EXPECT_LE(s.rate(), 0.001);
}

TEST(FixedPoint, Int16qHonoursMultiplierBeyond15Bits) {
  // 0.5 + 2^-20 needs 21 significant bits: a 15-bit multiplier would drop the 2^-20 term.
  const double real = 0.5 + std::ldexp(1.0, -20);
  const FixedPointMultiplier m = QuantizeMultiplier(real);
  ASSERT_NE(m.multiplier & 0xFFFF, 0) << "the multiplier must use its low 16 bits";
  const int64_t acc = int64_t{3} << 30;  // an int16q accumulator beyond int32
  EXPECT_EQ(Requantize64(acc, m), (int64_t{3} << 29) + (int64_t{3} << 10));
  EXPECT_EQ(Requantize64(-acc, m), -((int64_t{3} << 29) + (int64_t{3} << 10)));

  // Random multipliers: the full-width result is exact to within one step and almost always
  // exact, where the same multiplier cut to 15 bits is visibly wrong.
  std::mt19937_64 rng(5);
  long full_off = 0, short_off = 0;
  constexpr int kCases = 100000;
  for (int i = 0; i < kCases; ++i) {
    const double r = std::pow(2.0, std::uniform_real_distribution<double>(-20, 4)(rng));
    const FixedPointMultiplier fm = QuantizeMultiplier(r);
    const int64_t a = static_cast<int64_t>(rng() % (uint64_t{1} << 40)) - (int64_t{1} << 39);
    const __int128 want = ExactRound(a, r);
    if (std::fabs(static_cast<double>(want)) > 65535.0 * 64) continue;
    const int64_t got = Requantize64(a, fm);
    const __int128 diff = got - want;
    ASSERT_LE(diff < 0 ? -diff : diff, 1) << a << " · " << r;
    if (diff != 0) ++full_off;
    FixedPointMultiplier cut = fm;
    cut.multiplier &= ~0xFFFF;  // the predecessor's 15-bit multiplier
    if (Requantize64(a, cut) != want) ++short_off;
  }
  std::printf("[ int16q ] full-width multiplier off in %ld of %d cases; cut to 15 bits: %ld\n",
              full_off, kCases, short_off);
  EXPECT_GT(short_off, 100 * (full_off + 1));
}

TEST(FixedPoint, RequantizeEdgeCases) {
  const FixedPointMultiplier half = QuantizeMultiplier(0.5);
  EXPECT_EQ(Requantize32(3, half), 2);  // 1.5 → 2
  EXPECT_EQ(Requantize32(5, half), 3);
  EXPECT_EQ(Requantize64(3, half), 2);
  EXPECT_EQ(Requantize64(-3, half), -2);
  EXPECT_EQ(Requantize32(123456, FixedPointMultiplier{}), 0);
  EXPECT_EQ(Requantize64(123456, FixedPointMultiplier{}), 0);
  const FixedPointMultiplier tiny = QuantizeMultiplier(std::ldexp(1.0, -50));
  EXPECT_EQ(Requantize64(int64_t{1} << 49, tiny), 1);  // exactly 0.5 → 1
  const FixedPointMultiplier big = QuantizeMultiplier(1e9);
  EXPECT_EQ(Requantize64(std::numeric_limits<int64_t>::max(), big),
            std::numeric_limits<int64_t>::max());
  EXPECT_EQ(Requantize64(-std::numeric_limits<int64_t>::max(), big),
            -std::numeric_limits<int64_t>::max());
  EXPECT_EQ(Requantize32(7, QuantizeMultiplier(1.0)), 7);
  EXPECT_EQ(Requantize32(-7, QuantizeMultiplier(3.0)), -21);
}

// A multiplier below 2^-32 scales every int32 accumulator to less than half a step: the
// result must be 0, not the result of a right shift capped at 31 (which rounds 2^30 / 2^31
// up to 1).
TEST(FixedPoint, Requantize32TinyMultiplierGivesZero) {
  std::mt19937_64 rng(3);
  long nonzero = 0;
  for (int i = 0; i < 10000; ++i) {
    const double real = std::pow(2.0, std::uniform_real_distribution<double>(-62, -33)(rng));
    const int32_t acc = RandomInt32(rng);
    const int32_t got = Requantize32(acc, QuantizeMultiplier(real));
    ASSERT_EQ(ExactRound(acc, real), 0);
    if (got != 0 && ++nonzero <= 3)
      ADD_FAILURE() << "Requantize32(" << acc << ", QuantizeMultiplier(" << real << ")) = " << got;
  }
  EXPECT_EQ(nonzero, 0);
}

// RequantPreShift: for random sets of multipliers whose right shifts start below 34, the shift
// it returns keeps every right shift + pre in 34 … 62, and for every accumulator (edges and all
// magnitudes) Requantize32 of the value clamped into ±2^(31 − pre) and shifted left, with shift
// − pre, clamps into [c_zero − 2^16, c_zero + 2^16]-wide ranges exactly as Requantize32 of the
// value itself (an int8/int16 output's clamp after a zero point below 2^16). Sets it refuses:
// right shifts already 34 … 62, one beyond 62 − pre, one that does not saturate at the clamp.
TEST(FixedPoint, RequantPreShiftKeepsEveryClampedOutput) {
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int32_t> mant(1 << 30, std::numeric_limits<int32_t>::max());
  int taken = 0;
  for (int set = 0; set < 400; ++set) {
    const int low = 4 + int(rng() % 30), width = int(rng() % 12);
    std::vector<FixedPointMultiplier> m;
    for (int c = 0; c < 8; ++c) m.push_back({mant(rng), 31 - (low + int(rng() % (width + 1)))});
    if (set % 7 == 0) m[3] = {0, 0};
    const int pre = RequantPreShift(m, 1 << 17);
    if (pre == 0) continue;
    ++taken;
    const int32_t top = int32_t(0x7fffffffu >> pre);
    for (const FixedPointMultiplier& x : m) {
      if (x.multiplier == 0) continue;
      ASSERT_GE(31 - x.shift + pre, 34);
      ASSERT_LE(31 - x.shift + pre, 62);
      for (int i = 0; i < 200; ++i) {
        const int32_t acc = i < 4 ? (i % 2 ? top + 1 : -top - 2) : RandomInt32(rng) >> (rng() % 31);
        const int64_t shifted = int64_t(std::clamp<int32_t>(acc, -top - 1, top)) << pre;
        const auto clamp = [](int64_t v) { return std::clamp<int64_t>(v, -32768, 65535); };
        ASSERT_EQ(clamp(Requantize32(int32_t(shifted), {x.multiplier, x.shift - pre})),
                  clamp(Requantize32(acc, x)))
            << "acc " << acc << " multiplier " << x.multiplier << " shift " << x.shift;
      }
    }
  }
  EXPECT_GT(taken, 50);
  const std::vector<FixedPointMultiplier> high = {{1 << 30, 31 - 34}, {1 << 30, 31 - 62}};
  EXPECT_EQ(RequantPreShift(high, 1 << 17), 0);
  EXPECT_EQ(RequantPreShift({{1 << 30, 31 - 27}, {1 << 30, 31 - 29}}, 1 << 17), 7);
  EXPECT_EQ(RequantPreShift({{1 << 30, 31 - 27}, {1 << 30, 31 - 56}}, 1 << 17), 0);  // > 62
  EXPECT_EQ(RequantPreShift({{1 << 30, 31 - 27}, {1 << 30, 31 - 40}}, 1 << 17), 0);  // 2^24 → 2^14
}

}  // namespace
}  // namespace mpcaffe::quant

// layers/random_values.cc — uniform and normal filler values from (seed, i), plain and
// vectorised (see random_values.h). The vectorised paths use the same operations in the same
// order on each lane (this file is compiled with -ffp-contract=off, so no multiply-add is fused
// into one rounding), and hand the ziggurat's rare rejections to the plain code.
#include "layers/random_values.h"

#include <algorithm>
#include <cmath>

#include "device/host_isa.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// GCC 12 warns of "uninitialized" placeholders inside its own AVX-512 headers (GCC bug 105593).
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#define MPCAFFE_RANDOM_AVX512 1
#endif

namespace mpcaffe {

namespace {

/// The tables of Marsaglia and Tsang's ziggurat for the standard normal (128 layers; "The
/// Ziggurat Method for Generating Random Variables", J. Stat. Software 5(8), 2000): a draw
/// takes layer j and a signed 32-bit h, and is h·w[j] whenever |h| < k[j] (about 99% of draws).
struct NormalZiggurat {
  static constexpr double kR = 3.442619855899;  // start of the tail
  uint32_t k[128];
  float w[128], f[128];
  NormalZiggurat() {
    const double m1 = 2147483648.0, v = 9.91256303526217e-3;
    double dn = kR, tn = dn;
    const double q = v / std::exp(-0.5 * dn * dn);
    k[0] = static_cast<uint32_t>(dn / q * m1);
    k[1] = 0;
    w[0] = static_cast<float>(q / m1);
    w[127] = static_cast<float>(dn / m1);
    f[0] = 1.0f;
    f[127] = static_cast<float>(std::exp(-0.5 * dn * dn));
    for (int i = 126; i >= 1; --i) {
      dn = std::sqrt(-2.0 * std::log(v / dn + std::exp(-0.5 * dn * dn)));
      k[i + 1] = static_cast<uint32_t>(dn / tn * m1);
      tn = dn;
      f[i] = static_cast<float>(std::exp(-0.5 * dn * dn));
      w[i] = static_cast<float>(dn / m1);
    }
  }
};

const NormalZiggurat& Ziggurat() {
  static const NormalZiggurat z;
  return z;
}

/// The ziggurat's rare rejections (the wedges and the tail) after the draw `bits` fell outside
/// layer j's rectangle: further words from a SplitMix64 sequence seeded by `bits`.
float NormalRejected(const NormalZiggurat& z, uint64_t bits) {
  int32_t h = static_cast<int32_t>(static_cast<uint32_t>(bits >> 32));
  int j = static_cast<int>(bits & 127);
  uint64_t state = bits;
  auto next = [&state]() { return Mix64(state += kCounterStep); };
  auto uniform = [&]() {  // (0, 1]
    return (static_cast<double>(next() >> 11) + 1.0) * 0x1.0p-53;
  };
  for (;;) {
    const double x = static_cast<double>(h) * z.w[j];
    if (j == 0) {  // the tail beyond kR
      double t, y;
      do {
        t = -std::log(uniform()) / NormalZiggurat::kR;
        y = -std::log(uniform());
      } while (y + y < t * t);
      return static_cast<float>(h > 0 ? NormalZiggurat::kR + t : -NormalZiggurat::kR - t);
    }
    if (z.f[j] + uniform() * (z.f[j - 1] - z.f[j]) < std::exp(-0.5 * x * x))
      return static_cast<float>(x);
    bits = next();
    h = static_cast<int32_t>(static_cast<uint32_t>(bits >> 32));
    j = static_cast<int>(bits & 127);
    const uint32_t m = h < 0 ? 0u - static_cast<uint32_t>(h) : static_cast<uint32_t>(h);
    if (m < z.k[j]) return static_cast<float>(h) * z.w[j];
  }
}

/// Standard normal value from the 64 bits of (seed, i): 32 for h, 7 for the layer, and further
/// words seeded by them when the ziggurat rejects (NormalRejected).
inline float NormalOf(const NormalZiggurat& z, uint64_t bits) {
  const int32_t h = static_cast<int32_t>(static_cast<uint32_t>(bits >> 32));
  const int j = static_cast<int>(bits & 127);
  const uint32_t mag = h < 0 ? 0u - static_cast<uint32_t>(h) : static_cast<uint32_t>(h);
  if (mag < z.k[j]) return static_cast<float>(h) * z.w[j];
  return NormalRejected(z, bits);
}

#ifdef MPCAFFE_RANDOM_AVX512
#define MPCAFFE_AVX512 __attribute__((target("avx512f,avx512dq")))

/// Mix64 on eight counters.
MPCAFFE_AVX512 inline __m512i Mix64x8(__m512i z) {
  const __m512i c1 = _mm512_set1_epi64(static_cast<long long>(0xbf58476d1ce4e5b9ULL));
  const __m512i c2 = _mm512_set1_epi64(static_cast<long long>(0x94d049bb133111ebULL));
  z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)), c1);
  z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)), c2);
  return _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
}

/// seed + (i + 1)·step for the eight counters i = first .. first + 7.
MPCAFFE_AVX512 inline __m512i Counters(uint64_t seed, uint64_t first) {
  const __m512i lane = _mm512_setr_epi64(1, 2, 3, 4, 5, 6, 7, 8);
  const __m512i i = _mm512_add_epi64(_mm512_set1_epi64(static_cast<long long>(first)), lane);
  return _mm512_add_epi64(_mm512_set1_epi64(static_cast<long long>(seed)),
                          _mm512_mullo_epi64(i, _mm512_set1_epi64(static_cast<long long>(kCounterStep))));
}

MPCAFFE_AVX512 size_t UniformValuesAvx512(uint64_t seed, size_t begin, size_t end, double lo,
                                          double hi, float* out) {
  const __m512d vlo = _mm512_set1_pd(lo), range = _mm512_set1_pd(hi - lo);
  const __m512d unit = _mm512_set1_pd(0x1.0p-53);
  size_t i = begin;
  for (; i + 8 <= end; i += 8) {
    const __m512i bits = _mm512_srli_epi64(Mix64x8(Counters(seed, i)), 11);
    const __m512d u = _mm512_mul_pd(_mm512_cvtepu64_pd(bits), unit);
    const __m512d v = _mm512_add_pd(vlo, _mm512_mul_pd(range, u));
    _mm256_storeu_ps(out + (i - begin), _mm512_cvtpd_ps(v));
  }
  return i;
}

/// t[j] of a 128-entry table held in eight registers, for the 16 indices j (0..127): four
/// two-register permutes and three blends (faster than the gathers, 2026-11-25 on the AMD EPYC
/// here: the normal values took 2.5 ns each with gathers).
MPCAFFE_AVX512 inline __m512i Lookup128(const __m512i t[8], __m512i j) {
  const __mmask16 bit5 = _mm512_test_epi32_mask(j, _mm512_set1_epi32(32));
  const __mmask16 bit6 = _mm512_test_epi32_mask(j, _mm512_set1_epi32(64));
  const __m512i low = _mm512_mask_blend_epi32(bit5, _mm512_permutex2var_epi32(t[0], j, t[1]),
                                              _mm512_permutex2var_epi32(t[2], j, t[3]));
  const __m512i high = _mm512_mask_blend_epi32(bit5, _mm512_permutex2var_epi32(t[4], j, t[5]),
                                               _mm512_permutex2var_epi32(t[6], j, t[7]));
  return _mm512_mask_blend_epi32(bit6, low, high);
}

constexpr size_t kNormalBlock = 4096;

/// Normal values [begin, end) of a block of a multiple of 16 values, at most kNormalBlock.
MPCAFFE_AVX512 void NormalBlockAvx512(const NormalZiggurat& z, uint64_t seed, size_t begin,
                                      size_t end, float mean, float sd, float* out) {
  const __m512 vmean = _mm512_set1_ps(mean), vsd = _mm512_set1_ps(sd);
  const __m512i high = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const __m512i low = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i layer_mask = _mm512_set1_epi32(127);
  __m512i k_table[8], w_table[8];
  for (int r = 0; r < 8; ++r) {
    k_table[r] = _mm512_loadu_si512(z.k + 16 * r);
    w_table[r] = _mm512_loadu_si512(z.w + 16 * r);
  }
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  uint32_t rejected[kNormalBlock + 16], count = 0;  // offsets of the values the ziggurat rejected
  for (size_t i = begin; i < end; i += 16) {
    const __m512i a = Mix64x8(Counters(seed, i)), b = Mix64x8(Counters(seed, i + 8));
    const __m512i h = _mm512_permutex2var_epi32(a, high, b);  // bits >> 32 of the 16 values
    const __m512i j = _mm512_and_si512(_mm512_permutex2var_epi32(a, low, b), layer_mask);
    const __mmask16 inside = _mm512_cmplt_epu32_mask(_mm512_abs_epi32(h), Lookup128(k_table, j));
    const __m512 w = _mm512_castsi512_ps(Lookup128(w_table, j));
    const __m512 x = _mm512_mul_ps(_mm512_cvtepi32_ps(h), w);
    _mm512_storeu_ps(out + (i - begin), _mm512_add_ps(vmean, _mm512_mul_ps(vsd, x)));
    // The rejected lanes' offsets, handed to the plain code once the block is done (handling
    // them here would spill the tables at every third block).
    const __m512i offset = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(i - begin)), lanes);
    // (A compressing store to memory is slow on AMD's Zen 4: compress in the register, store all.)
    _mm512_storeu_si512(rejected + count,
                        _mm512_maskz_compress_epi32(static_cast<__mmask16>(~inside), offset));
    count += static_cast<uint32_t>(__builtin_popcount(static_cast<uint16_t>(~inside)));
  }
  for (uint32_t r = 0; r < count; ++r)
    out[rejected[r]] = mean + sd * NormalRejected(z, RandomBits(seed, begin + rejected[r]));
}

/// The values [begin, end) up to a multiple of 16 (returns where it stopped) in blocks of at most
/// kNormalBlock, each block's rejected values after it.
MPCAFFE_AVX512 size_t NormalValuesAvx512(const NormalZiggurat& z, uint64_t seed, size_t begin,
                                         size_t end, float mean, float sd, float* out) {
  size_t i = begin;
  while (end - i >= 16) {
    const size_t stop = i + std::min(kNormalBlock, (end - i) & ~size_t{15});
    NormalBlockAvx512(z, seed, i, stop, mean, sd, out + (i - begin));
    i = stop;
  }
  return i;
}

#endif

/// Whether the AVX-512 paths run now (the CPU has them and MPCAFFE_ISA does not lower the level).
bool UseAvx512() {
#ifdef MPCAFFE_RANDOM_AVX512
  return ActiveHostIsa() >= HostIsa::kAvx512;
#else
  return false;
#endif
}

}  // namespace

bool RandomValuesVectorized() { return UseAvx512(); }

void UniformValues(uint64_t seed, size_t begin, size_t end, double lo, double hi, float* out,
                   bool vectorized) {
  size_t i = begin;
#ifdef MPCAFFE_RANDOM_AVX512
  if (vectorized && UseAvx512()) i = UniformValuesAvx512(seed, begin, end, lo, hi, out);
#endif
  for (; i < end; ++i) out[i - begin] = static_cast<float>(lo + (hi - lo) * Uniform01(seed, i));
}

void NormalValues(uint64_t seed, size_t begin, size_t end, float mean, float sd, float* out,
                  bool vectorized) {
  const NormalZiggurat& z = Ziggurat();
  size_t i = begin;
#ifdef MPCAFFE_RANDOM_AVX512
  if (vectorized && UseAvx512()) i = NormalValuesAvx512(z, seed, begin, end, mean, sd, out);
#endif
  for (; i < end; ++i) out[i - begin] = mean + sd * NormalOf(z, RandomBits(seed, i));
}

}  // namespace mpcaffe

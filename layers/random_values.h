// layers/random_values.h — the counter-based random values of the fillers: value i of a stream
// depends on (seed, i) alone, so a blob is drawn in parallel blocks and holds the same values on
// every machine and for every thread count. Uniform and normal values have a vectorised path
// (AVX-512, chosen at run time within MPCAFFE_ISA) that gives the same bits as the plain one.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mpcaffe {

/// SplitMix64's finalizer: the 64 random bits of a counter.
inline uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// The step between the counters of a stream (the golden ratio in 64 bits).
constexpr uint64_t kCounterStep = 0x9e3779b97f4a7c15ULL;

/// The 64 random bits of element i of stream `seed`.
inline uint64_t RandomBits(uint64_t seed, uint64_t i) { return Mix64(seed + (i + 1) * kCounterStep); }

/// Uniform in [0, 1) with 53 random bits: element i of stream `seed`.
inline double Uniform01(uint64_t seed, uint64_t i) {
  return double(RandomBits(seed, i) >> 11) * 0x1.0p-53;
}

/// out[k] = float(lo + (hi - lo) · Uniform01(seed, begin + k)) (in double) for k in
/// [0, end - begin).
void UniformValues(uint64_t seed, size_t begin, size_t end, double lo, double hi, float* out,
                   bool vectorized = true);

/// out[k] = mean + sd · N(seed, begin + k) (in float) for k in [0, end - begin), where N is a
/// standard normal value: Marsaglia and Tsang's ziggurat on Mix64 of the counter.
void NormalValues(uint64_t seed, size_t begin, size_t end, float mean, float sd, float* out,
                  bool vectorized = true);

/// Whether UniformValues and NormalValues take their vectorised paths now: ActiveHostIsa()
/// (device/host_isa.h) is avx512. The plain ones are taken below it and when `vectorized` is
/// false.
bool RandomValuesVectorized();

}  // namespace mpcaffe

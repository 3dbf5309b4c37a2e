// tests/testing/random_storage.h — random inputs shared by the suites: reals drawn uniformly
// from an interval, stored in a float data type's bytes (fp32, or fp16 rounded to nearest), and
// such bytes read back as reals.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "codegen/datatype.h"

namespace mpcaffe::test_inputs {

/// `v` written as element i of storage of `t` (kFloat32, or kFloat16 rounded to nearest).
inline void StoreReal(DataType t, float v, std::vector<uint8_t>& b, size_t i) {
  if (t == DataType::kFloat32) {
    std::memcpy(b.data() + 4 * i, &v, 4);
  } else {
    const uint16_t h = FloatToHalf(v);
    std::memcpy(b.data() + 2 * i, &h, 2);
  }
}

/// The values of storage `b` of `t` (kFloat32, or kFloat16 widened exactly).
inline std::vector<float> RealsOf(DataType t, const std::vector<uint8_t>& b) {
  std::vector<float> f(b.size() / SizeOf(t));
  for (size_t i = 0; i < f.size(); ++i) {
    if (t == DataType::kFloat32) {
      std::memcpy(&f[i], b.data() + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, b.data() + 2 * i, 2);
      f[i] = HalfToFloat(h);
    }
  }
  return f;
}

/// n values uniform in [lo, hi) as the storage of `t` (kFloat32 or kFloat16).
inline std::vector<uint8_t> RandomRealStorage(DataType t, size_t n, float lo, float hi,
                                              std::mt19937& rng) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<uint8_t> b(n * SizeOf(t));
  for (size_t i = 0; i < n; ++i) StoreReal(t, u(rng), b, i);
  return b;
}

}  // namespace mpcaffe::test_inputs

// tests/cache/test_kernels.h — the small distinct OpenCL kernels the cache's end-to-end and
// concurrency tests build (shared by the tests and the worker process).
#pragma once

#include <string>

namespace mpcaffe::cache::testing {

/// Source of the i-th distinct small OpenCL test kernel "scale_<i>": y = x * (i + 1) + i % 7
/// over n elements, bound-checked. Pointers are (buffer, element offset) pairs, as the
/// OpenCL backend passes a vptr.
inline std::string TestKernelSource(int i) {
  const std::string n = std::to_string(i);
  return "kernel void scale_" + n +
         "(global float* y, const ulong y_off, global const float* x, const ulong x_off,\n"
         "    const uint n) {\n"
         "  const uint i = get_global_id(0);\n"
         "  if (i < n) y[y_off + i] = x[x_off + i] * " +
         std::to_string(i + 1) + ".0f + " + std::to_string(i % 7) +
         ".0f;\n"
         "}\n";
}
inline std::string TestKernelName(int i) { return "scale_" + std::to_string(i); }
inline float TestKernelExpected(int i, float x) { return x * (i + 1) + (i % 7); }

}  // namespace mpcaffe::cache::testing

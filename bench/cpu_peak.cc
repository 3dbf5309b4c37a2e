// bench/cpu_peak.cc — this CPU's fp32 FMA peak, the yardstick docs/BENCHMARKS.md measures LibDNN's
// GEMM against: 12 independent 8-wide FMA chains per thread (enough to cover the FMA latency on
// two pipes), one thread per core, 2 flops per lane and FMA.
//   build/bin/mpcaffe_cpu_peak [threads]     (default: every hardware thread, and 1 for comparison)
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

constexpr int kChains = 12;

float Chains(long iterations) {
  __m256 a[kChains];
  for (int i = 0; i < kChains; ++i) a[i] = _mm256_set1_ps(1.0f + static_cast<float>(i) * 1e-7f);
  const __m256 m = _mm256_set1_ps(0.9999999f), c = _mm256_set1_ps(1e-7f);
  for (long k = 0; k < iterations; ++k)
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) a[i] = _mm256_fmadd_ps(a[i], m, c);
  float sum = 0, lanes[8];
  for (int i = 0; i < kChains; ++i) {
    _mm256_storeu_ps(lanes, a[i]);
    sum += lanes[0];
  }
  return sum;  // returned so the chains are not optimized away
}

double GflopsWith(int threads, long iterations) {
  std::vector<std::thread> pool;
  std::vector<float> sink(threads);
  const auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t) pool.emplace_back([&, t] { sink[t] = Chains(iterations); });
  for (auto& t : pool) t.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return threads * static_cast<double>(iterations) * kChains * 8 * 2 / s * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  const int all = argc > 1 ? std::atoi(argv[1]) : static_cast<int>(std::thread::hardware_concurrency());
  const long iterations = 200000000;
  for (int threads : {1, all > 0 ? all : 1}) {
    double best = 0;
    for (int r = 0; r < 3; ++r) best = std::max(best, GflopsWith(threads, iterations));
    std::printf("fp32 FMA peak, %d thread(s): %.1f GFLOP/s (best of 3)\n", threads, best);
  }
}

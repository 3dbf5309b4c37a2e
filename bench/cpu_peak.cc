// bench/cpu_peak.cc — this CPU's fp32 FMA peak, the yardstick docs/BENCHMARKS.md measures LibDNN's
// GEMM against: 12 independent 8-wide FMA chains per thread (enough to cover the FMA latency on
// two pipes), one thread per core, 2 flops per lane and FMA. Then, on one thread, the int8
// pointwise kernel's inner loop as the OpenCL compilers emit it (16 pixels × 8 output channels
// per pair of input channels: zipped byte pairs widened to 16 bits, one broadcast word of weight
// pairs per channel, vpmaddwd + vpaddd into int32 lanes) with 256-bit vectors and, where the CPU
// has AVX-512 BW, 512-bit ones; the fp32 kernel's (16 pixels × 8 channels, FMAs with the
// weight broadcast); and, where the CPU has AVX-512 VNNI, the int8 direct convolution's byte-quad
// loop (3 pixels × 4 vectors of 16 channels per 4 input channels: a broadcast word of input bytes
// per pixel, one 64-byte row of weight quads per vector, vpdpbusd): multiply-adds per second.
// Last, the same loop at 256 bits in AVX2's saturating form (vpmaddubsw, vpmaddwd with ones,
// vpaddd: what OpenVINO's AVX2 int8 kernels run): u8 × s8 pair sums saturate at 16 bits, so its
// results are exact only when the pair sums stay within ±32767 (7-bit weights or inputs); the
// library's int8 kernels are exact and run the pairs loop above at that level.
//   build/bin/mpcaffe_cpu_peak [threads] [--markdown]  (default: every hardware thread, and 1
//   for comparison; --markdown: docs/BENCHMARKS.md's table)
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "device/host_isa.h"

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

// Products per iteration of each loop below: 16 pixels × 8 channels × 2 input channels.
constexpr double kLoopProducts = 256;

// Inputs the loops stream over (L1-resident: the loops' cost, not the memory's).
struct LoopData {
  std::vector<int> words = std::vector<int>(256 * 8, 0x00030002);
  std::vector<int> quads = std::vector<int>(256 * 16 + 64, 0x01fe0302);
  std::vector<unsigned char> x = std::vector<unsigned char>(256 * 32 + 32, 5);
  std::vector<float> wf = std::vector<float>(256 * 16, 0.5f),
                     xf = std::vector<float>(256 * 32, 1.0f);
};

int PairLoop256(const LoopData& d, long iterations) {
  __m256i a[16];
  for (auto& v : a) v = _mm256_setzero_si256();
  for (long it = 0; it < iterations; ++it) {
    const int* wc = d.words.data() + (it & 255) * 8;
    const unsigned char* xc = d.x.data() + (it & 255) * 32;
    const __m128i x0 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(xc));
    const __m128i x1 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(xc + 8));
    const __m128i x2 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(xc + 16));
    const __m128i x3 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(xc + 24));
    const __m256i v0 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(x0, x2));
    const __m256i v1 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(x1, x3));
#pragma GCC unroll 8
    for (int o = 0; o < 8; ++o) {
      const __m256i w = _mm256_set1_epi32(wc[o]);
      a[2 * o] = _mm256_add_epi32(a[2 * o], _mm256_madd_epi16(v0, w));
      a[2 * o + 1] = _mm256_add_epi32(a[2 * o + 1], _mm256_madd_epi16(v1, w));
    }
  }
  int sum = 0;
  for (auto& v : a) sum += _mm256_extract_epi32(v, 0);
  return sum;
}

// The sum of the first lanes of n accumulators: returned so the loops are not optimized away.
__attribute__((target("avx512f"))) int FirstLanes(const __m512i* a, int n) {
  alignas(64) int lanes[16];
  int sum = 0;
  for (int i = 0; i < n; ++i) {
    _mm512_store_si512(lanes, a[i]);
    sum += lanes[0];
  }
  return sum;
}

__attribute__((target("avx512f,avx512bw"))) int PairLoop512(const LoopData& d, long iterations) {
  __m512i a[8];
  for (auto& v : a) v = _mm512_setzero_si512();
  for (long it = 0; it < iterations; ++it) {
    const int* wc = d.words.data() + (it & 255) * 8;
    const unsigned char* xc = d.x.data() + (it & 255) * 32;
    const __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(xc));
    const __m128i x1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(xc + 16));
    const __m256i zip = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi8(x0, x1)),
                                                _mm_unpackhi_epi8(x0, x1), 1);
    const __m512i v = _mm512_cvtepu8_epi16(zip);
#pragma GCC unroll 8
    for (int o = 0; o < 8; ++o)
      a[o] = _mm512_add_epi32(a[o], _mm512_madd_epi16(v, _mm512_set1_epi32(wc[o])));
  }
  return FirstLanes(a, 8);
}

float FmaLoop(const LoopData& d, long iterations) {
  __m256 a[16];
  for (auto& v : a) v = _mm256_setzero_ps();
  for (long it = 0; it < iterations; ++it) {
    const float* wc = d.wf.data() + (it & 255) * 16;
    const float* xc = d.xf.data() + (it & 255) * 32;
    // Two input channels, as in the int8 loop: 256 products.
    for (int c = 0; c < 2; ++c) {
      const __m256 v0 = _mm256_loadu_ps(xc + 16 * c), v1 = _mm256_loadu_ps(xc + 16 * c + 8);
#pragma GCC unroll 8
      for (int o = 0; o < 8; ++o) {
        const __m256 w = _mm256_broadcast_ss(wc + 8 * c + o);
        a[2 * o] = _mm256_fmadd_ps(v0, w, a[2 * o]);
        a[2 * o + 1] = _mm256_fmadd_ps(v1, w, a[2 * o + 1]);
      }
    }
  }
  float sum = 0;
  for (auto& v : a) sum += _mm256_cvtss_f32(v);
  return sum;
}

// Products per iteration of QuadLoop512: 3 pixels × 64 channels × 4 input channels.
constexpr double kQuadLoopProducts = 768;

__attribute__((target("avx512f,avx512vnni"))) int QuadLoop512(const LoopData& d, long iterations) {
  __m512i a[12];
  for (auto& v : a) v = _mm512_setzero_si512();
  for (long it = 0; it < iterations; ++it) {
    const int* xc = d.words.data() + (it & 255) * 8;
    const int* wc = d.quads.data() + (it & 255) * 16;
    __m512i w[4];
    for (int j = 0; j < 4; ++j) w[j] = _mm512_loadu_si512(wc + 16 * j);
#pragma GCC unroll 3
    for (int t = 0; t < 3; ++t) {
      const __m512i x = _mm512_set1_epi32(xc[t]);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) a[4 * t + j] = _mm512_dpbusd_epi32(a[4 * t + j], x, w[j]);
    }
  }
  return FirstLanes(a, 12);
}

// Products per iteration of SaturatingQuadLoop256: 3 pixels × 32 channels × 4 input channels.
constexpr double kSaturatingQuadLoopProducts = 384;

int SaturatingQuadLoop256(const LoopData& d, long iterations) {
  __m256i a[12];
  for (auto& v : a) v = _mm256_setzero_si256();
  const __m256i ones = _mm256_set1_epi16(1);
  for (long it = 0; it < iterations; ++it) {
    const int* xc = d.words.data() + (it & 255) * 8;
    const int* wc = d.quads.data() + (it & 255) * 16;
    __m256i w[4];
    for (int j = 0; j < 4; ++j)
      w[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wc + 8 * j));
#pragma GCC unroll 3
    for (int t = 0; t < 3; ++t) {
      const __m256i x = _mm256_set1_epi32(xc[t]);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j)
        a[4 * t + j] = _mm256_add_epi32(
            a[4 * t + j], _mm256_madd_epi16(_mm256_maddubs_epi16(x, w[j]), ones));
    }
  }
  int sum = 0;
  for (auto& v : a) sum += _mm256_extract_epi32(v, 0);
  return sum;
}

template <typename F>
double ProductsPerSecond(F&& loop, long iterations, double products = kLoopProducts) {
  double best = 0;
  for (int r = 0; r < 3; ++r) {
    const auto start = std::chrono::steady_clock::now();
    volatile auto sink = loop(iterations);
    (void)sink;
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, iterations * products / s * 1e-9);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int all = static_cast<int>(std::thread::hardware_concurrency());
  bool markdown = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf("usage: mpcaffe_cpu_peak [threads] [--markdown]\n");
      return 0;
    } else if (arg == "--markdown") {
      markdown = true;
    } else if (!arg.empty() && arg.find_first_not_of("0123456789") == std::string::npos) {
      all = std::atoi(arg.c_str());
    } else {
      std::fprintf(stderr,
                   "mpcaffe_cpu_peak: unknown argument '%s'\n"
                   "usage: mpcaffe_cpu_peak [threads] [--markdown]\n",
                   arg.c_str());
      return 2;
    }
  }
  const long iterations = 200000000;
  std::vector<std::pair<int, double>> peaks;
  for (int threads : {1, all > 0 ? all : 1}) {
    double best = 0;
    for (int r = 0; r < 3; ++r) best = std::max(best, GflopsWith(threads, iterations));
    peaks.emplace_back(threads, best);
    if (!markdown)
      std::printf("fp32 FMA peak, %d thread(s): %.1f GFLOP/s (best of 3)\n", threads, best);
  }
  const LoopData d;
  const long loops = 20000000;
  const double fma = ProductsPerSecond([&](long n) { return FmaLoop(d, n); }, loops);
  const double pair256 = ProductsPerSecond([&](long n) { return PairLoop256(d, n); }, loops);
  const double saturating256 = ProductsPerSecond(
      [&](long n) { return SaturatingQuadLoop256(d, n); }, loops, kSaturatingQuadLoopProducts);
  // The host levels the library itself detects (device/host_isa.h), so this table and the
  // paths it explains agree on what this CPU has.
  const bool bw = mpcaffe::CpuHostIsa() >= mpcaffe::HostIsa::kAvx512;
  const double pair512 =
      bw ? ProductsPerSecond([&](long n) { return PairLoop512(d, n); }, loops) : 0;
  const bool vnni = bw && mpcaffe::CpuHasAvx512Vnni();
  const double quad512 =
      vnni ? ProductsPerSecond([&](long n) { return QuadLoop512(d, n); }, loops, kQuadLoopProducts)
           : 0;
  if (markdown) {
    // docs/BENCHMARKS.md's "CPU peak" table (scripts/bench.sh's peak step splices it in).
    std::printf("| measure | best of 3 |\n|---|---:|\n");
    for (const auto& [threads, gflops] : peaks)
      std::printf("| fp32 FMA peak, %d thread%s | %.1f GFLOP/s |\n", threads,
                  threads == 1 ? "" : "s", gflops);
    std::printf("| pointwise inner loop, 1 thread: fp32 FMAs | %.1f G multiply-adds/s |\n", fma);
    std::printf(
        "| pointwise inner loop, 1 thread: int8 pairs, 256-bit | %.1f G multiply-adds/s |\n",
        pair256);
    if (bw)
      std::printf(
          "| pointwise inner loop, 1 thread: int8 pairs, 512-bit | %.1f G multiply-adds/s |\n",
          pair512);
    else
      std::printf("| pointwise inner loop, 1 thread: int8 pairs, 512-bit | no AVX-512 BW |\n");
    if (vnni)
      std::printf(
          "| direct convolution loop, 1 thread: int8 byte quads (vpdpbusd) | %.1f G multiply-adds/s "
          "|\n",
          quad512);
    else
      std::printf("| direct convolution loop, 1 thread: int8 byte quads (vpdpbusd) | no AVX-512 VNNI |\n");
    std::printf(
        "| the same loop at 256 bits, saturating (vpmaddubsw + vpmaddwd; inexact past 16-bit "
        "pair sums, not used by the library) | %.1f G multiply-adds/s |\n",
        saturating256);
    return 0;
  }
  std::printf(
      "pointwise loops, 1 thread (G multiply-adds/s, best of 3): fp32 FMA %.1f, int8 "
      "pairs 256-bit %.1f",
      fma, pair256);
  if (bw)
    std::printf(", int8 pairs 512-bit %.1f", pair512);
  else
    std::printf(" (no AVX-512 BW: no 512-bit row)");
  if (vnni)
    std::printf("; direct convolution loop: int8 byte quads %.1f", quad512);
  else
    std::printf(" (no AVX-512 VNNI: no byte-quad row)");
  std::printf("; saturating byte quads 256-bit %.1f (inexact past 16-bit pair sums)\n",
              saturating256);
}

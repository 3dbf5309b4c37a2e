// bench/cpu_peak.cc — this CPU's fp32 FMA peak, the yardstick docs/BENCHMARKS.md measures LibDNN's
// GEMM against: 12 independent 8-wide FMA chains per thread (enough to cover the FMA latency on
// two pipes), one thread per core, 2 flops per lane and FMA; where the CPU has AVX-512, the same
// chains 16 wide (the peak of the kernels' 16-lane tiles). Then, on one thread, the pointwise
// kernels' inner loops as the OpenCL compilers emit them, with register tiles that fit the
// level's registers (the 256-bit loops 16 ymm: a tile of 16 accumulators and its operands would
// spill, and the loop would measure the spills): int8 in 16-bit pairs (16 pixels × 6 output
// channels per pair of input channels at 256 bits, the AVX2 tile `oc6 px2 v8`; 16 × 16 at 512
// bits where the CPU has AVX-512 BW: zipped byte pairs widened to 16 bits, one broadcast word
// of weight pairs per channel, vpmaddwd + vpaddd into int32 lanes), fp32 FMAs on the same tile;
// where the CPU has AVX-512 VNNI, the int8 direct convolution's byte-quad loop (3 pixels × 4
// vectors of 16 channels per 4 input channels: a broadcast word of input bytes per pixel, one
// 64-byte row of weight quads per vector, vpdpbusd): multiply-adds per second. Last, AVX2's
// saturating byte-quad form (4 pixels × 2 vectors of 8 channels per 4 input channels:
// vpmaddubsw, vpmaddwd with ones, vpaddd: what OpenVINO's AVX2 int8 kernels run): u8 × s8 pair
// sums saturate at 16 bits, so its results are exact only when the pair sums stay within
// ±32767 (7-bit weights or inputs); the library's int8 kernels are exact and run the pairs loop
// at that level.
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

// The same chains 16 floats wide: a core of two 512-bit FMA pipes (Sapphire Rapids) does twice
// the 256-bit figure's work per cycle, a core that splits 512-bit work into 256-bit halves (Zen
// 4) the same; the kernels' 16-lane tiles are measured against this one where the CPU has it.
__attribute__((target("avx512f"))) float Chains512(long iterations) {
  __m512 a[kChains];
  for (int i = 0; i < kChains; ++i) a[i] = _mm512_set1_ps(1.0f + static_cast<float>(i) * 1e-7f);
  const __m512 m = _mm512_set1_ps(0.9999999f), c = _mm512_set1_ps(1e-7f);
  for (long k = 0; k < iterations; ++k)
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) a[i] = _mm512_fmadd_ps(a[i], m, c);
  float sum = 0, lanes[16];
  for (int i = 0; i < kChains; ++i) {
    _mm512_storeu_ps(lanes, a[i]);
    sum += lanes[0];
  }
  return sum;  // returned so the chains are not optimized away
}

/// GFLOP/s of `threads` threads running the chains `lanes` (8 or 16) floats wide.
double GflopsWith(int threads, long iterations, int lanes) {
  std::vector<std::thread> pool;
  std::vector<float> sink(threads);
  const auto start = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t)
    pool.emplace_back(
        [&, t] { sink[t] = lanes == 16 ? Chains512(iterations) : Chains(iterations); });
  for (auto& t : pool) t.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return threads * static_cast<double>(iterations) * kChains * lanes * 2 / s * 1e-9;
}

// Products per iteration of the 256-bit pairs and FMA loops: 16 pixels × 6 channels × 2 input
// channels (12 accumulators, 2 pixel vectors and a broadcast: 15 of the 16 ymm registers).
constexpr double kLoopProducts = 192;
// ... and of the 512-bit pairs loop: 32 pixels × 16 channels × 2 input channels (16 of 32).
constexpr double kLoop512Products = 1024;

// Inputs the loops stream over (L1-resident: the loops' cost, not the memory's).
struct LoopData {
  std::vector<int> words = std::vector<int>(256 * 8, 0x00030002);
  std::vector<short> pairs = std::vector<short>(256 * 32, 3);
  std::vector<int> quads = std::vector<int>(256 * 16 + 64, 0x01fe0302);
  std::vector<unsigned char> x = std::vector<unsigned char>(256 * 32 + 32, 5);
  std::vector<float> wf = std::vector<float>(256 * 16, 0.5f),
                     xf = std::vector<float>(256 * 32, 1.0f);
};

// The 256-bit loops are written in assembly: a compiler schedules the broadcasts ahead of
// their products and spills accumulators, and the loop would measure the spills (GCC 12 did).
// Each runs over 256 steps of L1-resident operands per pass of the outer loop.

// 16 pixels (two vectors of 16-bit pairs, pre-widened as the pointwise kernel's packed columns
// are) × 6 output channels (a broadcast word of weight pairs each), vpmaddwd + vpaddd into 12
// int32 accumulators (ymm0-11).
// Zeroes the accumulators ymm1 … ymm7 (each loop's own ymm0 carries the sum across passes).
#define MP_ZERO_YMM1_TO_7                                                         \
  "vpxor %%ymm1, %%ymm1, %%ymm1\n"                                                  \
  "vmovdqa %%ymm1, %%ymm2\n vmovdqa %%ymm1, %%ymm3\n vmovdqa %%ymm1, %%ymm4\n"      \
  "vmovdqa %%ymm1, %%ymm5\n vmovdqa %%ymm1, %%ymm6\n vmovdqa %%ymm1, %%ymm7\n"

// Runs `steps(x, w, n)` (an assembly loop of n steps over the operands from x and w, its sums
// left in ymm0) over `iterations` steps, 256 a pass, and returns a lane of ymm0.
template <typename X, typename W, typename Steps>
int AsmPasses(const X* x0, const W* w0, long iterations, Steps steps) {
  alignas(32) int out[8];
  asm volatile("vpxor %%ymm0, %%ymm0, %%ymm0\n" ::: "xmm0");
  for (long done = 0; done < iterations; done += 256)
    steps(x0, w0, std::min(256L, iterations - done));
  asm volatile("vmovdqa %%ymm0, %0\n" : "=m"(out) : : "memory");
  return out[0];
}

int PairLoop256(const LoopData& d, long iterations) {
  return AsmPasses(d.pairs.data(), d.words.data(), iterations, [](const short* x, const int* w,
                                                                   long steps) {
    asm volatile(
        MP_ZERO_YMM1_TO_7
        "vmovdqa %%ymm1, %%ymm8\n vmovdqa %%ymm1, %%ymm9\n vmovdqa %%ymm1, %%ymm10\n"
        "vmovdqa %%ymm1, %%ymm11\n"
        "1:\n"
        "vmovdqu (%[x]), %%ymm12\n vmovdqu 32(%[x]), %%ymm13\n"
#define MP_PAIR_STEP(off, a, b)                                                          \
  "vpbroadcastd " #off "(%[w]), %%ymm14\n"                                               \
  "vpmaddwd %%ymm12, %%ymm14, %%ymm15\n vpaddd %%ymm15, %%ymm" #a ", %%ymm" #a "\n"       \
  "vpmaddwd %%ymm13, %%ymm14, %%ymm14\n vpaddd %%ymm14, %%ymm" #b ", %%ymm" #b "\n"
        MP_PAIR_STEP(0, 0, 1) MP_PAIR_STEP(4, 2, 3) MP_PAIR_STEP(8, 4, 5)
        MP_PAIR_STEP(12, 6, 7) MP_PAIR_STEP(16, 8, 9) MP_PAIR_STEP(20, 10, 11)
#undef MP_PAIR_STEP
        "add $64, %[x]\n add $32, %[w]\n dec %[n]\n jnz 1b\n"
        "vpaddd %%ymm1, %%ymm0, %%ymm0\n vpaddd %%ymm11, %%ymm0, %%ymm0\n"
        : [x] "+r"(x), [w] "+r"(w), [n] "+r"(steps)
        :
        : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
          "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "memory", "cc");
  });
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
  __m512i a[16];
  for (auto& v : a) v = _mm512_setzero_si512();
  for (long it = 0; it < iterations; ++it) {
    const int* wc = d.words.data() + (it & 255) * 8;
    const unsigned char* xc = d.x.data() + (it & 255) * 32;
    __m512i v[2];
    for (int h = 0; h < 2; ++h) {
      const __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(xc + 16 * h));
      const __m128i x1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(xc + 16 * h + 8));
      const __m256i zip = _mm256_inserti128_si256(
          _mm256_castsi128_si256(_mm_unpacklo_epi8(x0, x1)), _mm_unpackhi_epi8(x0, x1), 1);
      v[h] = _mm512_cvtepu8_epi16(zip);
    }
#pragma GCC unroll 8
    for (int o = 0; o < 8; ++o) {
      const __m512i w = _mm512_set1_epi32(wc[o]);
      a[2 * o] = _mm512_add_epi32(a[2 * o], _mm512_madd_epi16(v[0], w));
      a[2 * o + 1] = _mm512_add_epi32(a[2 * o + 1], _mm512_madd_epi16(v[1], w));
    }
  }
  return FirstLanes(a, 16);
}

float FmaLoop(const LoopData& d, long iterations) {
  __m256 a[12];
  for (auto& v : a) v = _mm256_setzero_ps();
  for (long it = 0; it < iterations; ++it) {
    const float* wc = d.wf.data() + (it & 255) * 16;
    const float* xc = d.xf.data() + (it & 255) * 32;
    // Two input channels, as in the int8 loop: 192 products.
    for (int c = 0; c < 2; ++c) {
      const __m256 v0 = _mm256_loadu_ps(xc + 16 * c), v1 = _mm256_loadu_ps(xc + 16 * c + 8);
#pragma GCC unroll 6
      for (int o = 0; o < 6; ++o) {
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

// Products per iteration of SaturatingQuadLoop256: 4 pixels × 16 channels × 4 input channels
// (8 accumulators, 2 weight vectors, a broadcast, the ones and a product: 13 ymm registers).
constexpr double kSaturatingQuadLoopProducts = 256;

int SaturatingQuadLoop256(const LoopData& d, long iterations) {
  return AsmPasses(d.words.data(), d.quads.data(), iterations, [](const int* x, const int* w,
                                                                   long steps) {
    asm volatile(
        MP_ZERO_YMM1_TO_7
        "vpcmpeqw %%ymm13, %%ymm13, %%ymm13\n vpsrlw $15, %%ymm13, %%ymm13\n"  // 16-bit ones
        "1:\n"
        "vmovdqu (%[w]), %%ymm8\n vmovdqu 32(%[w]), %%ymm9\n"
#define MP_QUAD_STEP(off, a, b)                                                              \
  "vpbroadcastd " #off "(%[x]), %%ymm10\n"                                                   \
  "vpmaddubsw %%ymm8, %%ymm10, %%ymm11\n vpmaddwd %%ymm13, %%ymm11, %%ymm11\n"               \
  "vpaddd %%ymm11, %%ymm" #a ", %%ymm" #a "\n"                                               \
  "vpmaddubsw %%ymm9, %%ymm10, %%ymm12\n vpmaddwd %%ymm13, %%ymm12, %%ymm12\n"               \
  "vpaddd %%ymm12, %%ymm" #b ", %%ymm" #b "\n"
        MP_QUAD_STEP(0, 0, 1) MP_QUAD_STEP(4, 2, 3) MP_QUAD_STEP(8, 4, 5)
        MP_QUAD_STEP(12, 6, 7)
#undef MP_QUAD_STEP
        "add $16, %[x]\n add $64, %[w]\n dec %[n]\n jnz 1b\n"
        "vpaddd %%ymm1, %%ymm0, %%ymm0\n vpaddd %%ymm7, %%ymm0, %%ymm0\n"
        : [x] "+r"(x), [w] "+r"(w), [n] "+r"(steps)
        :
        : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
          "xmm10", "xmm11", "xmm12", "xmm13", "memory", "cc");
  });
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
  // The host levels the library itself detects (device/host_isa.h), so this table and the
  // paths it explains agree on what this CPU has.
  const bool bw = mpcaffe::CpuHostIsa() >= mpcaffe::HostIsa::kAvx512;
  struct Peak {
    int threads, lanes;
    double gflops;
  };
  std::vector<Peak> peaks;
  for (int lanes : {8, 16}) {
    if (lanes == 16 && !bw) continue;
    for (int threads : {1, all > 0 ? all : 1}) {
      double best = 0;
      for (int r = 0; r < 3; ++r)
        best = std::max(best, GflopsWith(threads, iterations / (lanes / 8), lanes));
      peaks.push_back({threads, lanes, best});
      if (!markdown)
        std::printf("fp32 FMA peak%s, %d thread(s): %.1f GFLOP/s (best of 3)\n",
                    lanes == 16 ? " at 512 bits" : "", threads, best);
    }
  }
  const LoopData d;
  const long loops = 20000000;
  const double fma = ProductsPerSecond([&](long n) { return FmaLoop(d, n); }, loops);
  const double pair256 = ProductsPerSecond([&](long n) { return PairLoop256(d, n); }, loops);
  const double saturating256 = ProductsPerSecond(
      [&](long n) { return SaturatingQuadLoop256(d, n); }, loops, kSaturatingQuadLoopProducts);
  const double pair512 =
      bw ? ProductsPerSecond([&](long n) { return PairLoop512(d, n); }, loops, kLoop512Products)
         : 0;
  const bool vnni = bw && mpcaffe::CpuHasAvx512Vnni();
  const double quad512 =
      vnni ? ProductsPerSecond([&](long n) { return QuadLoop512(d, n); }, loops, kQuadLoopProducts)
           : 0;
  if (markdown) {
    // docs/BENCHMARKS.md's "CPU peak" table (scripts/bench.sh's peak step splices it in).
    std::printf("| measure | best of 3 |\n|---|---:|\n");
    for (const Peak& p : peaks)
      std::printf("| fp32 FMA peak%s, %d thread%s | %.1f GFLOP/s |\n",
                  p.lanes == 16 ? " at 512 bits" : "", p.threads, p.threads == 1 ? "" : "s",
                  p.gflops);
    if (!bw) std::printf("| fp32 FMA peak at 512 bits | no AVX-512 |\n");
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
        "| saturating byte quads at 256 bits (vpmaddubsw + vpmaddwd, OpenVINO's AVX2 form; "
        "inexact past 16-bit pair sums, not used by the library) | %.1f G multiply-adds/s |\n",
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

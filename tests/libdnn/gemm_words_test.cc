// tests/libdnn/gemm_words_test.cc — the vector words the GEMM and pointwise epilogues
// use (VectorWords::Requant and its clamp, KernelHelper::kPairProduct16's 512-bit row) run on
// the device against the host reference.
#include "libdnn/gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "codegen/kernel_writer.h"
#include "codegen/vector_words.h"
#include "libdnn/gemm_internal.h"
#include "libdnn/tuner.h"
#include "quant/fixed_point.h"
#include "tests/testing/sweep.h"

namespace mpcaffe::libdnn {
namespace {

/// Runs (value, multiplier, shift) triples through a kernel of `lanes` lanes per work-item
/// whose `body` follows `const int i = <work-item> * lanes;` (inputs xv, xm, xs, output y) and
/// compares each result with `want(value, multiplier, shift)`, reporting up to 10 mismatches.
/// With `shared`, a vector's lanes take its first lane's multiplier and shift (scalar ones).
void CheckTriples(Device& dev, const std::vector<int32_t>& v, const std::vector<int32_t>& m,
                  const std::vector<int32_t>& s, int lanes, const std::string& body, bool shared,
                  const std::function<int32_t(int32_t, int32_t, int32_t)>& want) {
  KernelWriter w(KernelTarget::Of(dev), "test_triples");
  w.Kernel("triples")
      .In("int", "xv")
      .In("int", "xm")
      .In("int", "xs")
      .Out("int", "y")
      .Body("  const int i = $global_id(0) * " + std::to_string(lanes) + ";\n" + body);
  Kernel k = dev.BuildProgram(w.Source())->GetKernel("triples");
  const size_t n = v.size();
  auto dv = dev.Alloc<int32_t>(n), dm = dev.Alloc<int32_t>(n), ds = dev.Alloc<int32_t>(n),
       dy = dev.Alloc<int32_t>(n);
  dev.Write(dv, v.data(), n), dev.Write(dm, m.data(), n), dev.Write(ds, s.data(), n);
  k.Arg(dv).Arg(dm).Arg(ds).Arg(dy).Launch({n / size_t(lanes), 1, 1});
  std::vector<int32_t> got(n);
  dev.Read(dy, got.data(), n);
  int bad = 0;
  for (size_t i = 0; i < n && bad < 10; ++i) {
    const size_t at = shared ? i / size_t(lanes) * size_t(lanes) : i;
    const int32_t expected = want(v[i], m[at], s[at]);
    if (got[i] != expected) {
      ++bad;
      ADD_FAILURE() << "value " << v[i] << " multiplier " << m[at] << " shift " << s[at]
                    << ": got " << got[i] << ", want " << expected;
    }
  }
}

// VectorWords::Requant (the int8 vector epilogues' requantization, in 64-bit lanes) against
// the host reference quant::Requantize32 on every combination of edge values (0, ±1, rounding
// ties, INT32_MIN/MAX), multipliers (0, 1, 2^30, 2^31 − 1) and shifts (right shift 31 − shift
// from 0, where the product saturates, through 32 and 63 to 93, the smallest multiplier
// QuantizeMultiplier makes), then random triples; 16 lanes with different multipliers and shifts.
TEST(VectorRequant, MatchesTheHostReferenceLaneByLane) {
  Device& dev = DefaultDevice();
  if (dev.backend() != Backend::kOpenCL) GTEST_SKIP() << "VectorRequant is OpenCL C";
  const int32_t kMin = INT32_MIN, kMax = INT32_MAX;
  const std::vector<int32_t> vals = {0,    1,    -1,    2,      -2,     3,      -3,        511,
                                     512,  -512, 1536,  -1536,  65535,  -65537, kMax,      kMin,
                                     kMin + 1,   kMax - 1,  1 << 30, -(1 << 30), 12345678, -987654};
  const std::vector<int32_t> mults = {0, 1, 3, 1 << 30, (1 << 30) + 1, kMax, 1518500250};
  const std::vector<int32_t> shifts = {31, 30, 29, 1, 0, -1, -2, -9, -30, -31, -32, -33, -62};
  std::vector<int32_t> v, m, s;
  for (int32_t a : vals)
    for (int32_t b : mults)
      for (int32_t c : shifts) v.push_back(a), m.push_back(b), s.push_back(c);
  std::mt19937 rng(19);
  std::uniform_int_distribution<int32_t> any(kMin, kMax), mant(1 << 30, kMax), sh(-62, 31);
  while (v.size() % 16 != 0 || v.size() < 8192) {
    const int32_t small = any(rng) >> (rng() % 31);  // accumulators of every magnitude
    v.push_back(rng() % 2 ? small : any(rng)), m.push_back(mant(rng)), s.push_back(sh(rng));
  }
  const VectorWords words(KernelTarget::Of(dev));
  CheckTriples(dev, v, m, s, 16,
               "  const int16 val = vload16(0, xv + i);\n" +
                   words.Requant(16, "r", "val", "vload16(0, xm + i)", "vload16(0, xs + i)", 2) +
                   "  vstore16(convert_int16(r), 0, y + i);\n",
               false, [](int32_t a, int32_t b, int32_t c) {
                 return quant::Requantize32(a, {b, c});
               });
}

// VectorWords::RequantClamp (the depthwise and pointwise int8 epilogues: one multiplier
// and shift per vector, the zero point, the requantized residual, the clamp) against the host
// reference clamp(Requantize32(v) + zero + Requantize32(residual), lo, hi), with and without a
// residual: right shifts 31 − shift on both sides of its int32 fast path (34 … 62) and at its
// ends, accumulators and residuals of every magnitude, ReLU-like and int16-like clamp ranges.
// Mutating the fast path's rounding, its bounds or the residual's clamp fails this test.
TEST(VectorRequantClamp, MatchesTheHostReferenceWithAndWithoutResidual) {
  Device& dev = DefaultDevice();
  if (dev.backend() != Backend::kOpenCL) GTEST_SKIP() << "VectorRequantClamp is OpenCL C";
  const int32_t kMin = INT32_MIN, kMax = INT32_MAX;
  const std::vector<int32_t> edge = {0, 1, -1, 2, -2, 3, -3, 255, -255, 1 << 20, -(1 << 20),
                                     kMax, kMin, kMin + 1, kMax - 1, 1 << 30, -(1 << 30)};
  const std::vector<int32_t> mults = {0, 1, 1 << 30, (1 << 30) + 1, kMax, 1518500250, -1};
  // right = 31 − shift: 0, 30 … 35, 45, 61 … 64, 93.
  const std::vector<int32_t> shifts = {31, 1, 0, -1, -2, -3, -4, -14, -30, -31, -32, -33, -62};
  struct Range { int32_t lo, hi; };
  const std::vector<Range> ranges = {{0, 255}, {-128, 127}, {-32768, 32767}, {7, 255}};
  std::mt19937 rng(23);
  std::uniform_int_distribution<int32_t> any(kMin, kMax), mant(1 << 30, kMax), sh(-40, 31);
  // Per group of 16 lanes: multiplier, shift, zero, residual multiplier and shift, lo, hi.
  std::vector<int32_t> v, rv, g;
  auto lane = [&]() { return rng() % 3 ? any(rng) >> (rng() % 31) : edge[rng() % edge.size()]; };
  auto group = [&](int32_t m, int32_t s) {
    const Range r = ranges[rng() % ranges.size()];
    const int32_t zero = rng() % 4 == 0 ? 65535 : int32_t(rng() % 256);
    const int32_t rm = rng() % 2 ? mults[rng() % mults.size()] : mant(rng);
    const int32_t rs = rng() % 2 ? shifts[rng() % shifts.size()] : sh(rng);
    for (int32_t x : {m, s, zero, rm, rs, r.lo, r.hi, 0}) g.push_back(x);
    for (int j = 0; j < 16; ++j) v.push_back(lane()), rv.push_back(lane());
  };
  for (int32_t m : mults)
    for (int32_t s : shifts)
      for (int rep = 0; rep < 4; ++rep) group(m, s);
  while (g.size() / 8 < 2048) group(mant(rng), sh(rng));
  const size_t groups = g.size() / 8, n = v.size();
  // The third pass: residuals x − z of 16-bit storage (|x − z| < 2^16), where the int32 path
  // takes RequantResidual's 32-bit form.
  std::vector<int32_t> small(rv);
  for (int32_t& x : small) x %= 65536;
  // The fourth pass: the text the host's checks allow (Convolution's RequantKnown): the int32
  // path alone (high_known) and the residual's 32-bit form alone (split_known), on groups whose
  // right shifts are 34 … 62 and whose residual right shifts are 17 … 47 with multipliers ≥ 0.
  std::vector<int32_t> known_g(g);
  std::uniform_int_distribution<int32_t> high_right(34, 62), res_right(17, 47), res_mult(0, kMax);
  for (size_t i = 0; i < known_g.size(); i += 8) {
    known_g[i + 1] = 31 - high_right(rng);
    known_g[i + 3] = i % 64 == 0 ? (i % 128 ? 0 : kMax) : res_mult(rng);
    known_g[i + 4] = 31 - (i % 48 == 8 ? (i % 96 ? 17 : 47) : res_right(rng));
    if (i % 80 == 16) known_g[i + 1] = 31 - (i % 160 ? 34 : 62);
  }
  // The fifth pass: the int32 path after a left shift by 9 (quant::RequantPreShift's check
  // holds for every group: right shifts 25 … 35, multipliers ≥ 2^30 or 0), no residual.
  const int pre = 9;
  std::vector<int32_t> pre_g(g);
  std::vector<quant::FixedPointMultiplier> pre_m;
  std::uniform_int_distribution<int32_t> low_right(25, 35);
  for (size_t i = 0; i < pre_g.size(); i += 8) {
    pre_g[i] = i % 72 == 0 ? 0 : mant(rng);
    pre_g[i + 1] = 31 - (i % 40 == 0 ? 25 : low_right(rng));
    pre_m.push_back({pre_g[i], pre_g[i + 1]});
  }
  ASSERT_EQ(quant::RequantPreShift(pre_m, 1 << 17), pre);
  // The sixth and seventh: clamped below at the zero point (a fused ReLU's range, the text's
  // max(v, 0) form), the paths chosen per vector and then known.
  const std::vector<int32_t> any_g = g;
  for (int pass = 0; pass < 7; ++pass) {
    const bool with_residual = pass > 0 && pass < 4, known = pass == 3 || pass == 4 || pass == 6;
    const bool relu = pass >= 5;
    SCOPED_TRACE(pass == 0   ? "without a residual"
                 : pass == 1 ? "with a residual"
                 : pass == 2 ? "with x - z"
                 : pass == 3 ? "with x - z, the paths known"
                 : pass == 4 ? "the int32 path after a left shift"
                 : pass == 5 ? "clamped at the zero point"
                             : "clamped at the zero point, the path known");
    VectorResidual res{"vload16(0, xr + i)", "p[3]", "p[4]", pass >= 2 ? "1" : "", known};
    const std::vector<int32_t>& rv_pass = pass >= 2 ? small : rv;
    if (pass == 3) g = known_g;
    if (pass == 4) g = pre_g;
    if (relu) {  // a range from the zero point up (the kernels' zero ≤ their type's maximum)
      g = pass == 5 ? any_g : known_g;
      for (size_t i = 0; i < g.size(); i += 8) g[i + 6] = std::max(g[i + 6], g[i + 2]);
    }
    KernelWriter w(KernelTarget::Of(dev), "test_requant_clamp");
    w.Kernel("vector_requant_clamp")
        .In("int", "xv")
        .In("int", "xr")
        .In("int", "xg")
        .Out("int", "y")
        .Body(
            "  const int i = $global_id(0) * 16;\n"
            "  const $global int* p = xg + $global_id(0) * 8;\n" +
            VectorWords(w.target())
                .RequantClamp(16, "r", "vload16(0, xv + i)", "p[0]", "p[1]", "p[2]",
                              with_residual ? &res : nullptr, relu ? "p[2]" : "p[5]", "p[6]", 2, "",
                              known, pass == 4 ? pre : 0) +
            "  vstore16(r, 0, y + i);\n");
    Kernel k = dev.BuildProgram(w.Source())->GetKernel("vector_requant_clamp");
    auto dv = dev.Alloc<int32_t>(n), dr = dev.Alloc<int32_t>(n), dg = dev.Alloc<int32_t>(g.size()),
         dy = dev.Alloc<int32_t>(n);
    dev.Write(dv, v.data(), n), dev.Write(dr, rv_pass.data(), n), dev.Write(dg, g.data(), g.size());
    k.Arg(dv).Arg(dr).Arg(dg).Arg(dy).Launch({groups, 1, 1});
    std::vector<int32_t> got(n);
    dev.Read(dy, got.data(), n);
    int bad = 0;
    for (size_t i = 0; i < n && bad < 10; ++i) {
      const int32_t* p = &g[i / 16 * 8];
      int64_t want = int64_t(quant::Requantize32(v[i], {p[0], p[1]})) + p[2];
      if (with_residual) want += quant::Requantize32(rv_pass[i], {p[3], p[4]});
      want = std::min<int64_t>(std::max<int64_t>(want, relu ? p[2] : p[5]), p[6]);
      if (got[i] != want) {
        ++bad;
        ADD_FAILURE() << "acc " << v[i] << " multiplier " << p[0] << " shift " << p[1] << " zero "
                      << p[2] << " residual " << rv_pass[i] << " (" << p[3] << ", " << p[4]
                      << ") range [" << p[5] << ", " << p[6] << "]: got " << got[i] << ", want "
                      << want;
      }
    }
  }
}

// VectorWords::RequantHigh and RequantWide (the int8 direct convolution's vector epilogue: a
// multiplier and shift per lane) against the host reference Requantize32 over their domains,
// every right shift 31 − shift in 34 … 62 (High) and 1 … 62 (Wide, the reference clamped to
// ±2^30), edge and random accumulators and multipliers, in 8, 4 and 2 lanes (under 4 lanes both
// widen to 64-bit lanes instead).
TEST(VectorRequantHigh, MatchesTheHostReferenceLaneByLane) {
  Device& dev = DefaultDevice();
  if (dev.backend() != Backend::kOpenCL) GTEST_SKIP() << "VectorRequantHigh is OpenCL C";
  const int32_t kMin = INT32_MIN, kMax = INT32_MAX;
  const std::vector<int32_t> edge = {0,    1,        -1,       2,       -2,         3,
                                     -3,   255,      -255,     1 << 20, -(1 << 20), kMax,
                                     kMin, kMin + 1, kMax - 1, 1 << 30, -(1 << 30)};
  const std::vector<int32_t> mults = {0, 1, 1 << 30, (1 << 30) + 1, kMax, 1518500250};
  std::mt19937 rng(29);
  for (const bool wide : {false, true}) {
    SCOPED_TRACE(wide ? "RequantWide" : "RequantHigh");
    const int32_t least = wide ? 1 : 34;
    std::uniform_int_distribution<int32_t> any(kMin, kMax), mant(1 << 30, kMax), right(least, 62);
    std::vector<int32_t> v, m, s;
    for (int32_t a : edge)
      for (int32_t b : mults)
        for (int32_t r = least; r <= 62; ++r) v.push_back(a), m.push_back(b), s.push_back(31 - r);
    while (v.size() % 8 != 0 || v.size() < 16384) {
      v.push_back(rng() % 2 ? any(rng) >> (rng() % 31) : any(rng));
      m.push_back(rng() % 8 ? mant(rng) : mults[rng() % mults.size()]);
      s.push_back(31 - right(rng));
    }
    const VectorWords words(KernelTarget::Of(dev));
    for (int lanes : {8, 4, 2}) {
      SCOPED_TRACE(std::to_string(lanes) + " lanes");
      const std::string x = words.Load(lanes, "xv + i"), mult = words.Load(lanes, "xm + i"),
                        shift = words.Load(lanes, "xs + i");
      CheckTriples(dev, v, m, s, lanes,
                   (wide ? words.RequantWide(lanes, "r", x, mult, shift, 2)
                         : words.RequantHigh(lanes, "r", x, mult, shift, 2)) +
                       "  " + words.Store(lanes, "r", "y + i") + ";\n",
                   false, [&](int32_t a, int32_t b, int32_t c) {
                     const int32_t r = quant::Requantize32(a, {b, c});
                     return wide ? std::clamp(r, -(1 << 30), 1 << 30) : r;
                   });
    }
  }
}

// VectorWords::RequantResidual (a fused residual's term in the int8 epilogues' int32 path)
// against the host reference Requantize32 clamped to ±2^30: every right shift 31 − shift from 0
// to 64 (its 32-bit form at 17 … 47, the long lanes on both sides), residuals x − z over the
// whole ±65535 (edges and random), multipliers at the 16-bit split's edges and negative ones (the
// long lanes), and the condition off (the long lanes on the same values); 16, 8 and 4 lanes.
TEST(VectorRequantResidual, MatchesTheHostReferenceOverEveryShift) {
  Device& dev = DefaultDevice();
  if (dev.backend() != Backend::kOpenCL) GTEST_SKIP() << "VectorRequantResidual is OpenCL C";
  const int32_t kMax = INT32_MAX;
  const std::vector<int32_t> edge = {0,   1,    -1,    2,     -2,   127,    -128,  255,
                                     -255, 256, -256, 32767, -32768, 65535, -65535, 40000};
  const std::vector<int32_t> mults = {0,          1,       65535,      65536,  (1 << 30) + 65535,
                                      1 << 30,    kMax,    1518500250, -1,     INT32_MIN};
  std::mt19937 rng(31);
  std::uniform_int_distribution<int32_t> res(-65535, 65535), mant(1 << 30, kMax), right(0, 64);
  std::vector<int32_t> v, m, s;
  for (int32_t a : edge)
    for (int32_t b : mults)
      for (int32_t r = 0; r <= 64; ++r) v.push_back(a), m.push_back(b), s.push_back(31 - r);
  while (v.size() % 16 != 0 || v.size() < 32768) {
    v.push_back(rng() % 2 ? res(rng) : res(rng) >> (rng() % 16));
    m.push_back(rng() % 8 ? mant(rng) : mults[rng() % mults.size()]);
    s.push_back(31 - right(rng));
  }
  // The 32-bit form alone (split_known: the caller checked its conditions), on the vectors
  // whose first lane's multiplier and shift are in its domain.
  std::vector<int32_t> kv, km, ks;
  for (size_t i = 0; i < v.size(); i += 16)
    if (m[i] >= 0 && 31 - s[i] >= 17 && 31 - s[i] <= 47) {
      kv.insert(kv.end(), v.begin() + i, v.begin() + i + 16);
      km.insert(km.end(), 16, m[i]);  // every 4-, 8- and 16-lane vector takes these
      ks.insert(ks.end(), 16, s[i]);
    }
  // Whole launches of the work-group sizes the runtimes choose (the kernel has no bounds check).
  const size_t whole = kv.size() / 4096 * 4096;
  ASSERT_GE(whole, 4096u);
  for (auto* x : {&kv, &km, &ks}) x->resize(whole);
  const VectorWords words(KernelTarget::Of(dev));
  for (int lanes : {16, 8, 4}) {
    for (const char* cond : {"1", "0", "known"}) {
      SCOPED_TRACE(std::to_string(lanes) + " lanes, condition " + cond);
      const bool known = std::string(cond) == "known";
      // One multiplier and shift per vector (the scalar arguments): each vector's lanes take
      // its first lane's.
      CheckTriples(dev, known ? kv : v, known ? km : m, known ? ks : s, lanes,
                   "  const int mult = xm[i], sh = xs[i];\n" +
                       words.RequantResidual(lanes, "r", words.Load(lanes, "xv + i"), "mult",
                                             "sh", known ? "" : cond, 2, known) +
                       "  " + words.Store(lanes, "r", "y + i") + ";\n",
                   true, [](int32_t a, int32_t b, int32_t c) {
                     return std::clamp(quant::Requantize32(a, {b, c}), -(1 << 30), 1 << 30);
                   });
    }
  }
}

// KernelHelper::kPairProduct16's 512-bit row (MP_ZIP32, MP_PAIR32_WORD, MP_MADD32: the int8
// pointwise kernel's loop where OpenCL's compiler targets AVX-512 BW) against the host: 16 int32
// lanes x0[j]·lo + x1[j]·hi for unsigned bytes x0, x1 and the signed 16-bit halves of a word,
// over the whole ranges (255 · -32768 pairs included). Compilers without AVX-512 BW (Intel's
// runtime: a SPIR target; PoCL on AVX2 machines; Oclgrind) leave it undefined: skipped, named.
TEST(PairProduct32, MatchesTheHostWhereTheCompilerTargetsAvx512Bw) {
  Device& dev = DefaultDevice();
  if (dev.backend() != Backend::kOpenCL) GTEST_SKIP() << "MP_MADD32 is OpenCL text";
  std::mt19937 rng(29);
  const int groups = 512;
  std::vector<uint8_t> x0(groups * 16), x1(groups * 16);
  std::vector<int32_t> words(groups);
  for (auto* x : {&x0, &x1})
    for (auto& v : *x) v = uint8_t(rng() & 255);
  for (int g = 0; g < groups; ++g) {
    const uint32_t r = rng();
    // every fourth word takes the extremes of its halves
    words[g] = g % 4 == 0 ? int32_t((g % 8 ? 0x8000u : 0x7fffu) | (g % 16 ? 0x80000000u : 0x7fff0000u))
                          : int32_t(r);
  }
  KernelWriter w(KernelTarget::Of(dev), "test_pair_product32");
  w.UseHelper(KernelHelper::kPairProduct16);
  w.Kernel("pair_product32")
      .In("uchar", "xa")
      .In("uchar", "xb")
      .In("int", "wp")
      .Out("int", "y")
      .Body("  const int g = $global_id(0);\n"
            "#if defined(MP_MADD32)\n"
            "  int16 acc = (int16)(g);\n"
            "  acc += MP_MADD32(MP_ZIP32(xa + g * 16, xb + g * 16), MP_PAIR32_WORD(wp[g]));\n"
            "  vstore16(acc, 0, y + g * 16);\n"
            "  if (g == 0) y[" + std::to_string(groups * 16) + "] = 1;\n"
            "#else\n"
            "  if (g == 0) y[" + std::to_string(groups * 16) + "] = 0;\n"
            "#endif\n");
  Kernel k = dev.BuildProgram(w.Source())->GetKernel("pair_product32");
  auto da = dev.Alloc<uint8_t>(x0.size()), db = dev.Alloc<uint8_t>(x1.size());
  auto dw = dev.Alloc<int32_t>(groups), dy = dev.Alloc<int32_t>(groups * 16 + 1);
  dev.Write(da, x0.data(), x0.size()), dev.Write(db, x1.data(), x1.size());
  dev.Write(dw, words.data(), words.size());
  k.Arg(da).Arg(db).Arg(dw).Arg(dy).Launch({size_t(groups), 1, 1});
  std::vector<int32_t> got(groups * 16 + 1);
  dev.Read(dy, got.data(), got.size());
  if (got.back() != 1)
    GTEST_SKIP() << "OpenCL's compiler on " << dev.Describe()
                 << " does not target AVX-512 BW (MP_MADD32 undefined): the int8 pointwise "
                    "kernel takes its 256-bit / portable loop, which PointwiseTilesMatchReference "
                    "checks";
  int bad = 0;
  for (int g = 0; g < groups && bad < 10; ++g)
    for (int j = 0; j < 16; ++j) {
      const int32_t lo = int16_t(uint32_t(words[g]) & 0xffff), hi = int16_t(uint32_t(words[g]) >> 16);
      const int32_t want = g + x0[g * 16 + j] * lo + x1[g * 16 + j] * hi;
      if (got[g * 16 + j] != want && ++bad)
        ADD_FAILURE() << "group " << g << " lane " << j << ": " << int(x0[g * 16 + j]) << "·" << lo
                      << " + " << int(x1[g * 16 + j]) << "·" << hi << " + " << g << " = " << want
                      << ", got " << got[g * 16 + j];
    }
  std::printf("MP_MADD32 (512-bit vpmaddwd) checked on %s\n", dev.Describe().c_str());
}

}  // namespace
}  // namespace mpcaffe::libdnn

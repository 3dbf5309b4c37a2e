// tests/libdnn/gemm_check.h — what the GEMM tests share: the 24 test shapes, a problem's random
// operands in the element types of GemmArgs, a run on the device and on the host reference, the
// comparison of their results, and the varied descriptions the per-type tests sweep.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "libdnn/gemm.h"
#include "quant/fixed_point.h"
#include "tests/testing/sweep.h"

namespace mpcaffe::libdnn::gemm_check {

struct Shape {
  int M, N, K;
};

/// 24 shapes: LeNet (conv1 20×576×25, conv2 50×64×500, ip1 scaled), AlexNet's conv/FC GEMMs
/// scaled down, odd sizes, and every dimension at 1.
inline const std::vector<Shape>& Shapes() {
  static const std::vector<Shape> shapes = {
      {1, 1, 1},    {1, 7, 3},     {5, 1, 9},     {7, 13, 1},    {17, 33, 65},   {32, 32, 32},
      {3, 100, 5},  {20, 576, 25}, {50, 64, 125}, {10, 1, 500},  {24, 379, 121}, {64, 91, 300},
      {96, 43, 96}, {48, 16, 288}, {256, 1, 576}, {33, 17, 129}, {9, 8, 31},     {6, 16, 40},
      {12, 200, 7}, {1, 300, 64},  {70, 3, 1000}, {13, 31, 17},  {128, 64, 72},  {2, 2, 2}};
  return shapes;
}

/// Host buffers of one problem, in the element types of GemmArgs.
struct Problem {
  GemmDesc desc;
  GemmQuant quant;
  std::vector<uint8_t> a, b, c, bias;
  float alpha = 1.0f, beta = 0.0f;
};

inline size_t StoredRows(int rows, int cols, bool trans) { return trans ? cols : rows; }

template <typename T>
inline void Fill(std::vector<uint8_t>& bytes, size_t n, std::mt19937& rng, T lo, T hi) {
  bytes.resize(n * sizeof(T));
  std::uniform_int_distribution<int64_t> dist(lo, hi);
  for (size_t i = 0; i < n; ++i) {
    const T v = static_cast<T>(dist(rng));
    std::memcpy(bytes.data() + i * sizeof(T), &v, sizeof(T));
  }
}

/// Floats k/8, k in [-8, 8]: every product and partial sum is exact in fp32 and the inputs
/// are exact in fp16, so any summation order gives the reference's value.
inline void FillFloat(std::vector<uint8_t>& bytes, size_t n, std::mt19937& rng, DataType t) {
  std::uniform_int_distribution<int> dist(-8, 8);
  bytes.resize(n * SizeOf(t));
  for (size_t i = 0; i < n; ++i) {
    const float v = dist(rng) / 8.0f;
    if (t == DataType::kFloat16) {
      const uint16_t h = FloatToHalf(v);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    } else {
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    }
  }
}

inline Problem MakeProblem(const GemmDesc& d, uint32_t seed) {
  std::mt19937 rng(seed);
  Problem p;
  p.desc = d;
  const size_t na = StoredRows(d.M, d.K, d.trans_a) * d.lda_or_packed();
  const size_t nb = StoredRows(d.K, d.N, d.trans_b) * d.ldb_or_packed();
  const size_t nc = static_cast<size_t>(d.M) * d.ldc_or_packed();
  const int ch = d.channels();
  if (!IsQuantized(d.type)) {
    FillFloat(p.a, na, rng, d.type);
    FillFloat(p.b, nb, rng, d.type);
    FillFloat(p.c, nc, rng, d.type);
    if (d.bias) FillFloat(p.bias, ch, rng, DataType::kFloat32);
    return p;
  }
  const bool i8 = d.type == DataType::kInt8Q;
  const bool wa = d.weights == WeightOperand::kA;
  const int64_t qmax = i8 ? 255 : 65535;
  auto fill_operand = [&](std::vector<uint8_t>& bytes, size_t n, bool weights) {
    if (weights && d.weights_signed) {
      if (i8)
        Fill<int8_t>(bytes, n, rng, -128, 127);
      else
        Fill<int16_t>(bytes, n, rng, -32768, 32767);
    } else {
      if (i8)
        Fill<uint8_t>(bytes, n, rng, 0, 255);
      else
        Fill<uint16_t>(bytes, n, rng, 0, 65535);
    }
  };
  fill_operand(p.a, na, wa);
  fill_operand(p.b, nb, !wa);
  p.c.assign(nc * SizeOf(d.out_type), 0);
  std::uniform_int_distribution<int64_t> zero(0, qmax);
  p.quant.x_zero = static_cast<int32_t>(zero(rng));
  p.quant.w_zero = d.weights_signed || !d.weight_zero ? 0 : static_cast<int32_t>(zero(rng));
  p.quant.c_zero = static_cast<int32_t>(zero(rng));
  // Scale the accumulator's typical size (√K·σ²) onto a quarter of the output range.
  const double sigma = (qmax + 1) / std::sqrt(12.0);
  const double typical = std::sqrt(static_cast<double>(d.K)) * sigma * sigma;
  std::uniform_real_distribution<double> jitter(0.5, 2.0);
  const int n = d.per_channel ? ch : 1;
  for (int i = 0; i < n; ++i) {
    const double m = (qmax / 4.0) / typical * jitter(rng);
    p.quant.multiplier.push_back(quant::QuantizeMultiplier(m));
    p.quant.scale.push_back(static_cast<float>(m * jitter(rng)));
  }
  if (d.bias) {
    const int64_t range = static_cast<int64_t>(typical);
    if (i8)
      Fill<int32_t>(p.bias, ch, rng, static_cast<int32_t>(-range), static_cast<int32_t>(range));
    else
      Fill<int64_t>(p.bias, ch, rng, -range, range);
  }
  return p;
}

/// Runs the problem on the device; returns C's bytes.
inline std::vector<uint8_t> RunOnDevice(Device& dev, const Problem& p, const GemmConfig* config) {
  const GemmDesc& d = p.desc;
  auto upload = [&](const std::vector<uint8_t>& bytes) {
    vptr<uint8_t> buf = dev.Alloc<uint8_t>(std::max<size_t>(bytes.size(), 1));
    dev.Write(buf, bytes.data(), bytes.size());
    return buf;
  };
  vptr<uint8_t> a = upload(p.a), b = upload(p.b), c = upload(p.c), bias = upload(p.bias);
  Gemm gemm = config ? Gemm(dev, d, p.quant, *config) : Gemm(dev, d, p.quant);
  GemmArgs args;
  args.a = a;
  args.b = b;
  args.c = c;
  args.alpha = p.alpha;
  args.beta = p.beta;
  if (d.bias) args.bias = bias;
  vptr<uint8_t> sums;
  if (IsQuantized(d.type)) {
    sums = dev.Alloc<uint8_t>(d.channels() * 8);
    gemm.ComputeWeightSums(d.weights == WeightOperand::kA ? BufferRef(a) : BufferRef(b), sums);
    args.weight_sums = sums;
    // The device's weight sums equal the reference's.
    std::vector<uint8_t> want(d.channels() * 8), got(d.channels() * 8);
    WeightSumsReference(d, d.weights == WeightOperand::kA ? p.a.data() : p.b.data(), want.data());
    dev.Read(sums, got.data(), got.size());
    const size_t used = d.channels() * (d.type == DataType::kInt8Q ? 4 : 8);
    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), used)) << "weight sums of " << d.ToString();
  }
  gemm.Run(args).Wait();
  std::vector<uint8_t> out(p.c.size());
  dev.Read(c, out.data(), out.size());
  return out;
}

inline std::vector<uint8_t> RunReference(const Problem& p) {
  std::vector<uint8_t> out = p.c;
  GemmReference(p.desc, p.quant, p.a.data(), p.b.data(), out.data(), p.alpha, p.beta,
                p.bias.empty() ? nullptr : p.bias.data());
  return out;
}

/// Compares C: quantized and fp32/fp16 (exact test data) must match exactly, except that
/// fp32 allows 1e-5 relative for the dot algorithm's reordered sums (none occur with this data,
/// but the contract is 1e-5). fp16 compares values, so −0 equals +0: Mesa 22.3's rusticl folds
/// fma(a, b, +0.0) into a·b, which is −0 where IEEE 754's fma gives +0 (docs/BENCHMARKS.md,
/// "rusticl"), the same number.
inline void ExpectSame(const Problem& p, const std::vector<uint8_t>& got,
                       const std::vector<uint8_t>& want, const std::string& what) {
  const GemmDesc& d = p.desc;
  size_t bad = 0, first = SIZE_MAX;
  const size_t ldc = d.ldc_or_packed();
  for (int m = 0; m < d.M; ++m)
    for (int n = 0; n < d.N; ++n) {
      const size_t i = m * ldc + n;
      bool same;
      if (d.out_type == DataType::kFloat32) {
        float g, w;
        std::memcpy(&g, got.data() + 4 * i, 4);
        std::memcpy(&w, want.data() + 4 * i, 4);
        same = IsQuantized(d.type) ? std::memcmp(&g, &w, 4) == 0
                                   : std::fabs(g - w) <= 1e-5f * std::max(1.0f, std::fabs(w));
      } else if (d.out_type == DataType::kFloat16) {
        uint16_t g, w;
        std::memcpy(&g, got.data() + 2 * i, 2);
        std::memcpy(&w, want.data() + 2 * i, 2);
        same = HalfToFloat(g) == HalfToFloat(w);
      } else {
        const size_t e = SizeOf(d.out_type);
        same = std::memcmp(got.data() + e * i, want.data() + e * i, e) == 0;
      }
      if (!same && bad++ == 0) first = i;
    }
  EXPECT_EQ(bad, 0u) << what << ": " << d.ToString() << " (first mismatch at element " << first
                     << ")";
}

/// The description of shape `i` of the list for `type`, with the options varied by index.
inline GemmDesc Varied(DataType type, const Shape& s, int i) {
  GemmDesc d;
  d.type = type;
  d.out_type = type;
  d.M = s.M;
  d.N = s.N;
  d.K = s.K;
  d.trans_a = i % 2 == 1;
  d.trans_b = (i / 2) % 2 == 1;
  d.weights = i % 3 == 0 ? WeightOperand::kA : WeightOperand::kB;
  d.bias = i % 2 == 0;
  d.relu = i % 4 == 1;
  if (i % 7 == 3) d.ldc = s.N + 3;  // a padded C
  if (IsQuantized(type)) {
    d.weights_signed = i % 3 == 1;
    d.per_channel = i % 2 == 0;
    if (i % 5 == 4) d.out_type = DataType::kFloat32;
    d.weight_zero = !d.weights_signed;
  }
  return d;
}

/// The option index Varied gets for shape `i` of a list: every shape its own under the
/// exhaustive sweep; else six, which give every option both of its values (transposes, weight
/// side, bias, ReLU, padded C, signed and per-channel weights, fp32 output) — each a branch of
/// the generator — and a program each, while every shape still runs.
inline int OptionIndex(int i) { return test_support::ExhaustiveSweep() ? i : i % 6; }

/// A vw = 8 tile of `algorithm` with the given register tile, K unroll and K mode.
inline GemmConfig Int8Tile(GemmConfig::Algorithm algorithm, int tm, int tn, int ku, int kp) {
  GemmConfig c;
  c.algorithm = algorithm;
  c.tm = tm;
  c.tn = tn;
  c.vw = 8;
  c.ku = ku;
  c.kp = kp;
  return c;
}

}  // namespace mpcaffe::libdnn::gemm_check

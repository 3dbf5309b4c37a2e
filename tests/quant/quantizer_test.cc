// tests/quant/quantizer_test.cc — device tests of quantization: every conversion kernel against
// the host reference on edge values, OBSERVE against a host scan, PSEUDO against SnapValue,
// ACTIVE parameters and conversions, and NVRTC compiles of the quantizer's kernel texts.
#include "quant/quantizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "codegen/elementwise.h"
#include "device/device.h"
#include "device/error.h"
#include "quant/quant_params.h"

#ifdef MPCAFFE_HAVE_CUDA
#include "device/cuda/nvrtc.h"
#endif

namespace mpcaffe::quant {
namespace {

/// Host data of one data type in storage layout, as bytes.
struct HostTensor {
  DataType type;
  std::vector<uint8_t> bytes;
  size_t size() const { return bytes.size() / SizeOf(type); }
};

/// Edge values of float input for a destination grid (scale, zero point, range): exact
/// halves, range ends and just beyond, NaN, ±Inf, denormals, huge values, fp16 boundaries,
/// and random values around the range.
std::vector<float> FloatEdges(const QuantParams& p, std::mt19937_64& rng) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> v = {0.0f,
                          -0.0f,
                          nan,
                          -nan,
                          INFINITY,
                          -INFINITY,
                          FLT_MAX,
                          -FLT_MAX,
                          FLT_MIN,
                          -FLT_MIN,
                          1e-40f,
                          -1e-40f,
                          1e-45f,
                          -1e-45f,
                          65504.0f,
                          65519.99f,
                          65520.0f,
                          -65520.0f,
                          std::ldexp(1.0f, -24),
                          std::ldexp(1.0f, -25),
                          std::ldexp(3.0f, -26),
                          std::ldexp(1.0f, -14),
                          1.00048828125f,
                          2049.0f,
                          0.5f,
                          1.5f,
                          2.5f,
                          -0.5f,
                          -1.5f};
  const float s = p.scale[0];
  const int32_t z = p.zero_point[0];
  for (int32_t k : {p.qmin - z - 2, p.qmin - z - 1, p.qmin - z, p.qmin - z + 1, -1, 0, 1,
                    p.qmax - z - 1, p.qmax - z, p.qmax - z + 1}) {
    for (float frac : {-0.5f, -0.25f, 0.0f, 0.25f, 0.5f, 0.49999997f}) {
      const float x = s * (static_cast<float>(k) + frac);
      v.push_back(x);
      v.push_back(std::nextafter(x, INFINITY));
      v.push_back(std::nextafter(x, -INFINITY));
    }
  }
  std::uniform_real_distribution<float> around(static_cast<float>(p.qmin - z) - 4.0f,
                                               static_cast<float>(p.qmax - z) + 4.0f);
  for (int i = 0; i < 3000; ++i) v.push_back(s * around(rng));
  for (int i = 0; i < 1000; ++i) v.push_back(s * (std::round(around(rng)) + 0.5f));
  return v;
}

HostTensor MakeInput(DataType type, const QuantParams& to_params, std::mt19937_64& rng) {
  HostTensor t{type, {}};
  if (type == DataType::kFloat32) {
    const std::vector<float> v = FloatEdges(to_params, rng);
    t.bytes.resize(v.size() * 4);
    std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  } else if (type == DataType::kFloat16) {
    // Every half bit pattern.
    t.bytes.resize(65536 * 2);
    for (uint32_t h = 0; h < 65536; ++h) {
      const uint16_t bits = static_cast<uint16_t>(h);
      std::memcpy(&t.bytes[h * 2], &bits, 2);
    }
  } else if (type == DataType::kInt16Q) {
    t.bytes.resize(65536 * 2);
    for (uint32_t q = 0; q < 65536; ++q) {
      const uint16_t bits = static_cast<uint16_t>(q);
      std::memcpy(&t.bytes[q * 2], &bits, 2);
    }
  } else {
    for (int q = 0; q < 256; ++q) t.bytes.push_back(static_cast<uint8_t>(q));
  }
  return t;
}

/// Runs convert_<from>_<to> on the device (`vector`: its _v8 form, as ElementwiseOps::Convert
/// launches it).
HostTensor RunConvert(Device& d, const HostTensor& x, DataType to, const QuantParams& xp,
                      const QuantParams& yp, bool vector = false) {
  const size_t n = x.size();
  static std::map<std::string, std::shared_ptr<Program>> programs;  // one build per pair
  const std::string source = ConvertSource(KernelTarget::Of(d), x.type, to);
  auto& program = programs[source];
  if (!program) program = d.BuildProgram(source);
  Kernel k = program->GetKernel(ConvertKernelName(x.type, to) + (vector ? "_v8" : ""));
  auto dx = d.Alloc<uint8_t>(x.bytes.size());
  auto dy = d.Alloc<uint8_t>(n * SizeOf(to));
  d.Write(dx, x.bytes.data(), x.bytes.size());
  const bool qx = IsQuantized(x.type), qy = IsQuantized(to);
  FixedPointMultiplier m;
  if (qx && qy) m = RescaleMultiplier(xp.scale[0], yp.scale[0]);
  k.Arg(static_cast<int32_t>(n)).Arg(dx).Arg(dy);
  k.Arg(qx ? xp.scale[0] : 1.0f).Arg(qx ? xp.zero_point[0] : 0);
  k.Arg(qy ? yp.scale[0] : 1.0f).Arg(qy ? yp.zero_point[0] : 0);
  k.Arg(m.multiplier).Arg(m.shift);
  k.Launch1D(vector ? std::max(n / 8, n % 8) : n);
  HostTensor y{to, std::vector<uint8_t>(n * SizeOf(to))};
  d.Read(dy, y.bytes.data(), y.bytes.size());
  return y;
}

/// Index of the first element where device and reference differ (NaN matches any NaN), or -1.
long FirstMismatch(const HostTensor& got, const HostTensor& want) {
  const size_t n = want.size();
  for (size_t i = 0; i < n; ++i) {
    if (want.type == DataType::kFloat32) {
      float a, b;
      std::memcpy(&a, &got.bytes[i * 4], 4);
      std::memcpy(&b, &want.bytes[i * 4], 4);
      if (std::isnan(a) && std::isnan(b)) continue;
      if (std::memcmp(&a, &b, 4) != 0) return static_cast<long>(i);
    } else if (want.type == DataType::kFloat16) {
      uint16_t a, b;
      std::memcpy(&a, &got.bytes[i * 2], 2);
      std::memcpy(&b, &want.bytes[i * 2], 2);
      const bool nan_a = (a & 0x7c00) == 0x7c00 && (a & 0x3ff),
                 nan_b = (b & 0x7c00) == 0x7c00 && (b & 0x3ff);
      if (nan_a && nan_b) continue;
      if (a != b) return static_cast<long>(i);
    } else {
      const size_t w = SizeOf(want.type);
      if (std::memcmp(&got.bytes[i * w], &want.bytes[i * w], w) != 0) return static_cast<long>(i);
    }
  }
  return -1;
}

std::string Describe(const HostTensor& t, size_t i) {
  if (t.type == DataType::kFloat32) {
    float f;
    std::memcpy(&f, &t.bytes[i * 4], 4);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", f);
    return buf;
  }
  if (t.type == DataType::kInt8Q) return std::to_string(t.bytes[i]);
  uint16_t h;
  std::memcpy(&h, &t.bytes[i * 2], 2);
  if (t.type == DataType::kFloat16) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "half 0x%04x (%.9g)", h, HalfToFloat(h));
    return buf;
  }
  return std::to_string(h);
}

QuantParams Manual(DataType type, float scale, int32_t zero_point) {
  QuantParams p = ChooseQuantParams(0.0, 1.0, type);
  p.scale = {scale};
  p.zero_point = {zero_point};
  p.Validate();
  return p;
}

TEST(ConvertKernels, EveryPairMatchesTheHostReferenceBitForBit) {
  Device& d = DefaultDevice();
  std::mt19937_64 rng(17);
  // Parameter sets per quantized type: chosen from ranges (non-power-of-two scales) and
  // power-of-two scales where exact halves are exactly representable.
  const std::vector<QuantParams> p8 = {ChooseQuantParams(-1.3, 2.7, DataType::kInt8Q),
                                       Manual(DataType::kInt8Q, 0.25f, 100),
                                       ChooseQuantParams(-1e-3, 0.0, DataType::kInt8Q)};
  const std::vector<QuantParams> p16 = {ChooseQuantParams(-50.0, 20.0, DataType::kInt16Q),
                                        Manual(DataType::kInt16Q, 0.125f, 30000),
                                        ChooseQuantParams(0.0, 7e4, DataType::kInt16Q)};
  auto params_for = [&](DataType t) -> std::vector<QuantParams> {
    if (t == DataType::kInt8Q) return p8;
    if (t == DataType::kInt16Q) return p16;
    return {Manual(DataType::kInt8Q, 1.0f, 0)};  // unused placeholder for float sides
  };
  int runs = 0;
  for (DataType from : kAllDataTypes) {
    for (DataType to : kAllDataTypes) {
      for (const QuantParams& xp : params_for(from)) {
        for (const QuantParams& yp : params_for(to)) {
          const HostTensor x = MakeInput(from, IsQuantized(to) ? yp : p8[1], rng);
          HostTensor want{to, std::vector<uint8_t>(x.size() * SizeOf(to))};
          ConvertTensor(from, xp, x.bytes.data(), to, yp, want.bytes.data(), x.size());
          ++runs;
          for (bool vector : {false, true}) {
            if (vector && !HasVectorConvert(KernelTarget::Of(d), from, to)) continue;
            const HostTensor got = RunConvert(d, x, to, xp, yp, vector);
            const long bad = FirstMismatch(got, want);
            EXPECT_EQ(bad, -1) << ConvertKernelName(from, to) << (vector ? "_v8" : "") << " on "
                               << d.Describe() << ": x = " << (bad >= 0 ? Describe(x, bad) : "")
                               << " gives " << (bad >= 0 ? Describe(got, bad) : "")
                               << ", reference " << (bad >= 0 ? Describe(want, bad) : "")
                               << " (x scale " << xp.scale[0] << " zero " << xp.zero_point[0]
                               << ", y scale " << yp.scale[0] << " zero " << yp.zero_point[0]
                               << ")";
          }
        }
      }
    }
  }
  EXPECT_EQ(runs, 1 + 1 + 3 + 3 + 1 + 1 + 3 + 3 + 3 + 3 + 9 + 9 + 3 + 3 + 9 + 9);
}

/// Host scan of the observable values (NaN skipped).
void HostScan(const std::vector<float>& v, double* lo, double* hi) {
  for (float x : v) {
    if (std::isnan(x)) continue;
    *lo = std::min<double>(*lo, x);
    *hi = std::max<double>(*hi, x);
  }
}

TEST(Quantizer, ObserveOverSeveralBatchesEqualsAHostScan) {
  Device& d = DefaultDevice();
  Quantizer q(d, "conv1_top");
  q.set_mode(QuantizerMode::kObserve);
  EXPECT_FALSE(q.has_observed());
  EXPECT_THROW(q.observed_min(), Error);
  std::mt19937_64 rng(4);
  double lo = INFINITY, hi = -INFINITY;
  const size_t sizes[] = {1, 63, 64, 65, 1000, 100003, 7};
  auto buffer = d.Alloc<float>(100003);
  for (size_t b = 0; b < sizeof sizes / sizeof sizes[0]; ++b) {
    std::vector<float> v(sizes[b]);
    std::normal_distribution<float> dist(static_cast<float>(b) - 3.0f, 1.0f + b);
    for (auto& x : v) x = dist(rng);
    if (v.size() > 10) v[v.size() / 2] = std::numeric_limits<float>::quiet_NaN();
    d.Write(buffer, v.data(), v.size());
    q.Forward(buffer, v.size());
    HostScan(v, &lo, &hi);
  }
  EXPECT_TRUE(q.has_observed());
  EXPECT_EQ(q.observed_min(), lo);
  EXPECT_EQ(q.observed_max(), hi);
  // Data is left unchanged by observing.
  std::vector<float> back(7);
  d.Read(buffer, back.data(), 7);

  // A loaded range merges with what the device observes afterwards.
  q.SetObserved(-1000.0, 0.5);
  std::vector<float> v = {3.0f, -2.0f, std::numeric_limits<float>::quiet_NaN()};
  d.Write(buffer, v.data(), v.size());
  q.Observe(buffer, v.size());
  EXPECT_EQ(q.observed_min(), -1000.0);
  EXPECT_EQ(q.observed_max(), 3.0);

  // All-NaN batches observe nothing; a reset forgets everything.
  q.ResetObserved();
  v = {std::numeric_limits<float>::quiet_NaN()};
  d.Write(buffer, v.data(), 1);
  q.Observe(buffer, 1);
  EXPECT_FALSE(q.has_observed());

  // PASSIVE and ACTIVE do not observe.
  q.set_mode(QuantizerMode::kPassive);
  v = {5.0f};
  d.Write(buffer, v.data(), 1);
  q.Forward(buffer, 1);
  EXPECT_FALSE(q.has_observed());
}

TEST(Quantizer, ObservedRangeIsNotForcedToIncludeZero) {
  Device& d = DefaultDevice();
  Quantizer q(d, "positive");
  std::vector<float> v = {2.0f, 3.5f, 5.0f};
  auto buffer = d.Alloc<float>(3);
  d.Write(buffer, v.data(), 3);
  q.Observe(buffer, 3);
  const QuantParams p = q.ObservedParams(DataType::kInt8Q);  // widened to [0, 5]
  EXPECT_EQ(p.zero_point[0], 0);
  EXPECT_FLOAT_EQ(p.scale[0], 5.0f / 255.0f);
  EXPECT_EQ(q.observed_min(), 2.0);  // the observation itself is untouched
  EXPECT_EQ(q.observed_max(), 5.0);
}

TEST(Quantizer, PseudoSnapsInPlaceToTheTargetGrid) {
  Device& d = DefaultDevice();
  std::mt19937_64 rng(9);
  for (DataType target : kAllDataTypes) {
    Quantizer q(d, std::string("pseudo_") + Name(target));
    q.set_mode(QuantizerMode::kPseudo);
    q.set_pseudo_target_type(target);
    std::vector<float> v(5000);
    std::uniform_real_distribution<float> dist(-3.0f, 7.0f);
    for (auto& x : v) x = dist(rng);
    v[0] = std::numeric_limits<float>::quiet_NaN();
    v[1] = 1e-40f;
    v[2] = 65519.0f;  // rounds to the largest half, 65504
    v[3] = 65520.0f;  // rounds to +Inf in fp16
    auto buffer = d.Alloc<float>(v.size());
    d.Write(buffer, v.data(), v.size());
    q.Forward(buffer, v.size());
    std::vector<float> got(v.size());
    d.Read(buffer, got.data(), got.size());
    double lo = INFINITY, hi = -INFINITY;
    HostScan(v, &lo, &hi);
    EXPECT_EQ(q.observed_min(), lo);  // the observed range is that of the unsnapped data
    EXPECT_EQ(q.observed_max(), hi);
    for (size_t i = 0; i < v.size(); ++i) {
      float want = v[i];
      if (IsQuantized(target)) {
        const QuantParams p = ChooseQuantParams(lo, hi, target);
        want = SnapValue(v[i], p.scale[0], p.zero_point[0], p.qmin, p.qmax);
      } else if (target == DataType::kFloat16) {
        want = HalfToFloat(FloatToHalf(v[i]));
      }
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(got[i])) << Name(target) << " element " << i;
      } else {
        ASSERT_EQ(got[i], want) << Name(target) << " element " << i << " x = " << v[i];
      }
    }
  }
}

TEST(Quantizer, ActiveModeHandsParametersAndConverts) {
  Device& d = DefaultDevice();
  Quantizer q(d, "ip1_bottom");
  q.set_mode(QuantizerMode::kActive);
  q.set_types(DataType::kFloat32, DataType::kInt8Q);
  EXPECT_THROW(q.InputParams(), Error);   // fp32 has no parameters
  EXPECT_THROW(q.OutputParams(), Error);  // no range known yet
  q.SetOutputRange(-2.0, 6.0);
  const QuantParams out = q.OutputParams();
  EXPECT_EQ(out.scale[0], ChooseQuantParams(-2.0, 6.0, DataType::kInt8Q).scale[0]);

  std::vector<float> x = {
      -3.0f, -2.0f, 0.0f, 0.1f, 5.99f, 100.0f, std::numeric_limits<float>::quiet_NaN()};
  auto dx = d.Alloc<float>(x.size());
  auto dq = d.Alloc<uint8_t>(x.size());
  d.Write(dx, x.data(), x.size());
  q.Convert(dx, dq, x.size());
  std::vector<uint8_t> got(x.size()), want(x.size());
  d.Read(dq, got.data(), got.size());
  ConvertTensor(DataType::kFloat32, out, x.data(), DataType::kInt8Q, out, want.data(), x.size());
  EXPECT_EQ(got, want);
  EXPECT_THROW(q.Convert(dq, dx, x.size()), Error);  // element sizes do not match the types

  // int8q → int16q with the fixed-point multiplier, parameters from both sides' ranges.
  Quantizer r(d, "requant");
  r.set_mode(QuantizerMode::kActive);
  r.set_types(DataType::kInt8Q, DataType::kInt16Q);
  r.SetInputRange(-2.0, 6.0);
  r.SetOutputRange(-10.0, 10.0);
  auto d16 = d.Alloc<uint16_t>(x.size());
  r.Convert(dq, d16, x.size());
  std::vector<uint16_t> got16(x.size()), want16(x.size());
  d.Read(d16, got16.data(), got16.size());
  ConvertTensor(DataType::kInt8Q, r.InputParams(), got.data(), DataType::kInt16Q, r.OutputParams(),
                want16.data(), x.size());
  EXPECT_EQ(got16, want16);
}

TEST(QuantizerKernels, TextsAreDeterministicAndDialectClean) {
  for (Backend backend : {Backend::kOpenCL, Backend::kCuda}) {
    KernelTarget t;
    t.backend = backend;
    EXPECT_EQ(ObserveRangeSource(t), ObserveRangeSource(t));
    for (DataType type : kAllDataTypes) {
      const std::string s = PseudoSource(t, type);
      EXPECT_NE(s.find(PseudoKernelName(type)), std::string::npos);
      EXPECT_EQ(s.find(backend == Backend::kCuda ? "__kernel" : "__global__"), std::string::npos);
    }
  }
}

#ifdef MPCAFFE_HAVE_CUDA
TEST(QuantizerKernels, Fp16WithoutHalfArithmeticCompilesWithNvrtc) {
  // (Every quantizer kernel of every type in its default CUDA form is NVRTC-compiled by
  // tests/cuda through the kernel-family registry; this is the fp16-in-float branch it lacks.)
  KernelTarget no_fp16 = KernelTarget::Cuda(80);
  no_fp16.fp16_arith = false;
  EXPECT_NO_THROW(
      cuda::CompileCuda(PseudoSource(no_fp16, DataType::kFloat16), cuda::OldestPtxArch()));
}
#endif

}  // namespace
}  // namespace mpcaffe::quant

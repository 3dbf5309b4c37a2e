// quant/quant_params.cc — choice of quantization parameters and the host reference of
// quantize, dequantize and data-type conversion (see quant_params.h).
#include "quant/quant_params.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <sstream>
#include <string>

#include "device/error.h"
#include "device/host_isa.h"

namespace mpcaffe::quant {

namespace {

void RequireQuantized(DataType type, const char* where) {
  if (!IsQuantized(type))
    throw Error(std::string(where) + ": data type " + Name(type) +
                " is not a quantized type (expected int8q or int16q)");
}

/// One channel's (scale, zero point) from an observed range; see ChooseQuantParams.
void ChooseChannel(double observed_min, double observed_max, const QuantParams& p, float* scale,
                   int32_t* zero_point, const char* where, size_t channel) {
  auto fail = [&](const std::string& what) {
    std::ostringstream msg;
    msg << where << ": channel " << channel << ": observed range [" << observed_min << ", "
        << observed_max << "] " << what;
    throw Error(msg.str());
  };
  if (std::isnan(observed_min) || std::isnan(observed_max)) fail("contains NaN");
  if (observed_min > observed_max) fail("is empty (min > max): nothing was observed");
  if (!(std::fabs(observed_min) <= FLT_MAX) || !(std::fabs(observed_max) <= FLT_MAX))
    fail("exceeds the float range");
  // Widen to include 0 for the parameters only; the observed values stay as they are.
  const double lo = std::min(observed_min, 0.0);
  const double hi = std::max(observed_max, 0.0);
  if (p.symmetric) {
    const int32_t mid = (p.qmin + p.qmax + 1) / 2;
    const int32_t half_steps = std::min(mid - p.qmin, p.qmax - mid);
    const double absmax = std::max(-lo, hi);
    float s = absmax > 0.0 ? static_cast<float>(absmax / half_steps) : 1.0f;
    *scale = std::max(s, FLT_MIN);
    *zero_point = mid;
    return;
  }
  if (hi == lo) {  // both 0: any grid containing 0 will do
    *scale = 1.0f;
    *zero_point = p.qmin;
    return;
  }
  float s = static_cast<float>((hi - lo) / (static_cast<double>(p.qmax) - p.qmin));
  s = std::max(s, FLT_MIN);
  const double zp = std::round(static_cast<double>(p.qmin) - lo / static_cast<double>(s));
  *scale = s;
  *zero_point = static_cast<int32_t>(std::min<double>(std::max<double>(zp, p.qmin), p.qmax));
}

QuantParams EmptyParams(DataType type, bool symmetric, const char* where) {
  RequireQuantized(type, where);
  QuantParams p;
  p.type = type;
  p.qmin = static_cast<int32_t>(TraitsOf(type).qmin);
  p.qmax = static_cast<int32_t>(TraitsOf(type).qmax);
  p.symmetric = symmetric;
  return p;
}

/// Calls run(begin, end, channel) over [0, n) in runs of one channel (the whole range for
/// per-tensor parameters).
template <typename Run>
void ForEachChannelRun(size_t n, const QuantParams& p, size_t inner, Run run) {
  if (!p.per_channel()) {
    run(size_t{0}, n, size_t{0});
    return;
  }
  const size_t channels = p.channels();
  for (size_t b = 0; b < n;) {
    const size_t e = std::min(n, (b / inner + 1) * inner);
    run(b, e, ChannelOf(b, inner, channels));
    b = e;
  }
}

/// QuantizeValue over x[b, e) with one scale and zero point, in a form compilers vectorize
/// (AlexNet's 61 M weights are quantized at every start): the quotient is clamped to ±2^22 first
/// (beyond it every result saturates anyway, as |zero_point| < 2^17), where adding and
/// subtracting 1.5·2^23 rounds half to even exactly as nearbyint does; NaN gives the zero point.
/// Bit-exact with QuantizeValue (tests/quant: QuantizeTensorMatchesQuantizeValue).
template <typename Storage, int kBlock = 8>
__attribute__((always_inline)) inline void QuantizeRun(const float* x, size_t b, size_t e,
                                                       float scale, float zero, float lo, float hi,
                                                       Storage* out) {
  auto value = [&](float v) {
    const float magic = 0x1.8p23f, limit = 0x1.0p22f;
    float q = v / scale;
    q = q < -limit ? -limit : q;
    q = q > limit ? limit : q;
    float r = ((q + magic) - magic) + zero;
    r = r < lo ? lo : r;
    r = r > hi ? hi : r;
    return static_cast<int32_t>(v != v ? zero : r);
  };
  size_t i = b;
  for (; i + kBlock <= e; i += kBlock) {  // blocks of a fixed length: GCC -O2 vectorizes these
    int32_t block[kBlock];
    for (int k = 0; k < kBlock; ++k) block[k] = value(x[i + k]);
    for (int k = 0; k < kBlock; ++k) out[i + k] = static_cast<Storage>(block[k]);
  }
  for (; i < e; ++i) out[i] = static_cast<Storage>(value(x[i]));
}

#if defined(__x86_64__) && defined(__GNUC__)
// QuantizeRun in explicit vectors, where the CPU has them: the quotient clamped to
// [lo − zero, hi − zero] (integers, so clamping before rounding gives what clamping after gives),
// rounded half to even by adding 1.5·2^23 and subtracting 1.5·2^23 − zero, NaN lanes set to the
// zero point, then narrowed to the storage by saturating packs. The same values as QuantizeValue
// (tests/quant: QuantTensorTest at every level). The compiler's vectorization of QuantizeRun
// kept its narrowing stores lane by lane: a net's input converted on the host on every pass
// (the Quantizer layer's ConvertOnHost) waited on them.

/// Each lane of x[0, 8) quantized, as int32.
__attribute__((target("avx2"), always_inline)) inline __m256i QuantizeLanesAvx2(
    const float* x, __m256 scale, __m256 qlo, __m256 qhi, __m256 unmagic, __m256 zero) {
  const __m256 v = _mm256_loadu_ps(x);
  // min/max return their second operand for a NaN lane; the blend below replaces it.
  const __m256 q = _mm256_max_ps(_mm256_min_ps(_mm256_div_ps(v, scale), qhi), qlo);
  const __m256 r = _mm256_sub_ps(_mm256_add_ps(q, _mm256_set1_ps(0x1.8p23f)), unmagic);
  return _mm256_cvttps_epi32(_mm256_blendv_ps(r, zero, _mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
}

template <typename Storage>
__attribute__((target("avx2"))) void QuantizeRunAvx2(const float* x, size_t b, size_t e,
                                                     float scale, float zero, float lo, float hi,
                                                     Storage* out) {
  const __m256 s = _mm256_set1_ps(scale), z = _mm256_set1_ps(zero);
  const __m256 qlo = _mm256_set1_ps(lo - zero), qhi = _mm256_set1_ps(hi - zero);
  const __m256 unmagic = _mm256_set1_ps(0x1.8p23f - zero);
#define MP_QUANTIZE_LANES(i) QuantizeLanesAvx2(x + (i), s, qlo, qhi, unmagic, z)
  size_t i = b;
  if constexpr (sizeof(Storage) == 1) {
    // The packs interleave 32-bit groups per 128-bit half; the permutation puts them in order.
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (; i + 32 <= e; i += 32) {
      const __m256i ab = _mm256_packus_epi32(MP_QUANTIZE_LANES(i), MP_QUANTIZE_LANES(i + 8));
      const __m256i cd = _mm256_packus_epi32(MP_QUANTIZE_LANES(i + 16), MP_QUANTIZE_LANES(i + 24));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                          _mm256_permutevar8x32_epi32(_mm256_packus_epi16(ab, cd), order));
    }
  } else {
    for (; i + 16 <= e; i += 16)
      _mm256_storeu_si256(
          reinterpret_cast<__m256i*>(out + i),
          _mm256_permute4x64_epi64(
              _mm256_packus_epi32(MP_QUANTIZE_LANES(i), MP_QUANTIZE_LANES(i + 8)), 0xD8));
  }
#undef MP_QUANTIZE_LANES
  QuantizeRun(x, i, e, scale, zero, lo, hi, out);
}

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_* as the unused merge operand, which its
// -Wmaybe-uninitialized reports once inlined here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
template <typename Storage>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void QuantizeRunAvx512(
    const float* x, size_t b, size_t e, float scale, float zero, float lo, float hi,
    Storage* out) {
  const __m512 s = _mm512_set1_ps(scale), z = _mm512_set1_ps(zero);
  const __m512 qlo = _mm512_set1_ps(lo - zero), qhi = _mm512_set1_ps(hi - zero);
  const __m512 magic = _mm512_set1_ps(0x1.8p23f), unmagic = _mm512_set1_ps(0x1.8p23f - zero);
  size_t i = b;
  for (; i + 16 <= e; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    const __m512 q = _mm512_max_ps(_mm512_min_ps(_mm512_div_ps(v, s), qhi), qlo);
    const __m512 r = _mm512_sub_ps(_mm512_add_ps(q, magic), unmagic);
    const __m512i n =
        _mm512_cvttps_epi32(_mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), z));
    if constexpr (sizeof(Storage) == 1)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm512_cvtepi32_epi8(n));
    else
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm512_cvtepi32_epi16(n));
  }
  QuantizeRun<Storage, 16>(x, i, e, scale, zero, lo, hi, out);
}
#pragma GCC diagnostic pop

#endif

template <typename Storage>
void QuantizeInto(const float* x, size_t n, const QuantParams& p, Storage* out, size_t inner) {
  const HostIsa isa = ActiveHostIsa();
  ForEachChannelRun(n, p, inner, [&](size_t b, size_t e, size_t c) {
    const float scale = p.scale_of(c), zero = static_cast<float>(p.zero_point_of(c));
    const float lo = static_cast<float>(p.qmin), hi = static_cast<float>(p.qmax);
#if defined(__x86_64__) && defined(__GNUC__)
    if (isa >= HostIsa::kAvx512) return QuantizeRunAvx512(x, b, e, scale, zero, lo, hi, out);
    if (isa >= HostIsa::kAvx2) return QuantizeRunAvx2(x, b, e, scale, zero, lo, hi, out);
#endif
    QuantizeRun(x, b, e, scale, zero, lo, hi, out);
  });
}

#if defined(__x86_64__) && defined(__GNUC__)
/// DequantizeValue over q[b, e) with one scale and zero point in 8-wide AVX2 vectors: widen,
/// subtract the zero point, convert, multiply — the same two operations on every lane as
/// DequantizeValue, so the same bits (4-5× the 256-entry table's lookups; calibration runs it
/// over every int8 weight of the net).
template <typename Storage>
__attribute__((target("avx2"))) void DequantizeRunAvx2(const Storage* q, size_t b, size_t e,
                                                       float scale, int32_t zero, float* out) {
  const __m256i z = _mm256_set1_epi32(zero);
  const __m256 s = _mm256_set1_ps(scale);
  size_t i = b;
  for (; i + 8 <= e; i += 8) {
    __m256i v;
    if constexpr (sizeof(Storage) == 1)
      v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + i)));
    else
      v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + i)));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(s, _mm256_cvtepi32_ps(_mm256_sub_epi32(v, z))));
  }
  for (; i < e; ++i) out[i] = DequantizeValue(q[i], scale, zero);
}
#endif

/// x[0, n) to binary16 bits, FloatToHalf on every element: 8 lanes per F16C instruction where
/// the CPU has them (round to nearest even from the immediate, and NaN kept with its payload's
/// top bits and the quiet bit, as FloatToHalf), else one at a time.
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,f16c"))) void FloatsToHalvesF16c(const float* x, size_t n,
                                                             uint16_t* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(
        reinterpret_cast<__m128i*>(out + i),
        _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) out[i] = FloatToHalf(x[i]);
}
#endif

void FloatsToHalves(const float* x, size_t n, uint16_t* out) {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool f16c = __builtin_cpu_supports("f16c");
  if (f16c && ActiveHostIsa() >= HostIsa::kAvx2) return FloatsToHalvesF16c(x, n, out);
#endif
  for (size_t i = 0; i < n; ++i) out[i] = FloatToHalf(x[i]);
}

template <typename Storage>
void DequantizeFrom(const Storage* q, size_t n, const QuantParams& p, float* out, size_t inner) {
  const HostIsa isa = ActiveHostIsa();
  ForEachChannelRun(n, p, inner, [&](size_t b, size_t e, size_t c) {
    const float scale = p.scale_of(c);
    const int32_t zero = p.zero_point_of(c);
#if defined(__x86_64__) && defined(__GNUC__)
    if (isa >= HostIsa::kAvx2) return DequantizeRunAvx2(q, b, e, scale, zero, out);
#endif
    if (sizeof(Storage) == 1 && e - b >= 1024) {  // int8q: a table of the 256 values
      float table[256];
      for (int32_t v = 0; v < 256; ++v) table[v] = DequantizeValue(v, scale, zero);
      for (size_t i = b; i < e; ++i) out[i] = table[q[i]];
      return;
    }
    for (size_t i = b; i < e; ++i) out[i] = DequantizeValue(q[i], scale, zero);
  });
}

}  // namespace

float QuantParams::RepresentableMin(size_t c) const {
  return DequantizeValue(qmin, scale_of(c), zero_point_of(c));
}

float QuantParams::RepresentableMax(size_t c) const {
  return DequantizeValue(qmax, scale_of(c), zero_point_of(c));
}

void QuantParams::Validate() const {
  auto fail = [](const std::string& what) { throw Error("QuantParams: " + what); };
  if (!IsQuantized(type)) fail(std::string("data type ") + Name(type) + " is not quantized");
  if (qmin != TraitsOf(type).qmin || qmax != TraitsOf(type).qmax)
    fail("range [" + std::to_string(qmin) + ", " + std::to_string(qmax) +
         "] is not the full range of " + Name(type));
  if (scale.empty() || scale.size() != zero_point.size())
    fail(std::to_string(scale.size()) + " scales but " + std::to_string(zero_point.size()) +
         " zero points");
  if (!per_channel() && scale.size() != 1)
    fail("per-tensor parameters with " + std::to_string(scale.size()) + " scales");
  for (size_t c = 0; c < scale.size(); ++c) {
    if (!(scale[c] >= FLT_MIN) || !(scale[c] <= FLT_MAX))
      fail("scale[" + std::to_string(c) + "] = " + std::to_string(scale[c]) +
           " is not a positive normal float");
    if (zero_point[c] < qmin || zero_point[c] > qmax)
      fail("zero_point[" + std::to_string(c) + "] = " + std::to_string(zero_point[c]) +
           " is outside [" + std::to_string(qmin) + ", " + std::to_string(qmax) + "]");
  }
}

QuantParams ChooseQuantParams(double observed_min, double observed_max, DataType type,
                              bool symmetric) {
  QuantParams p = EmptyParams(type, symmetric, "ChooseQuantParams");
  ChooseChannel(observed_min, observed_max, p, &p.scale[0], &p.zero_point[0], "ChooseQuantParams",
                0);
  return p;
}

QuantParams ChoosePerChannelQuantParams(const std::vector<double>& mins,
                                        const std::vector<double>& maxs, int axis, DataType type,
                                        bool symmetric) {
  QuantParams p = EmptyParams(type, symmetric, "ChoosePerChannelQuantParams");
  if (axis < 0)
    throw Error("ChoosePerChannelQuantParams: axis " + std::to_string(axis) + " is negative");
  if (mins.empty() || mins.size() != maxs.size())
    throw Error("ChoosePerChannelQuantParams: " + std::to_string(mins.size()) + " minima and " +
                std::to_string(maxs.size()) + " maxima (need one of each per channel)");
  p.axis = axis;
  p.scale.assign(mins.size(), 1.0f);
  p.zero_point.assign(mins.size(), 0);
  for (size_t c = 0; c < mins.size(); ++c)
    ChooseChannel(mins[c], maxs[c], p, &p.scale[c], &p.zero_point[c], "ChoosePerChannelQuantParams",
                  c);
  return p;
}

QuantParams SymmetricChannelParams(const std::vector<float>& scales, DataType type) {
  QuantParams p = EmptyParams(type, true, "SymmetricChannelParams");
  p.axis = 0;
  p.scale = scales;
  p.zero_point.assign(scales.size(), (p.qmin + p.qmax + 1) / 2);  // ChooseChannel's `mid`
  p.Validate();
  return p;
}

QuantParams ChooseWeightChannelParams(const float* w, size_t channels, size_t k, DataType type) {
  std::vector<double> mins(channels, 0.0), maxs(channels, 0.0);
  for (size_t c = 0; c < channels; ++c)
    for (size_t i = 0; i < k; ++i) {
      const float v = w[c * k + i];
      if (std::isnan(v)) continue;
      mins[c] = std::min<double>(mins[c], v);
      maxs[c] = std::max<double>(maxs[c], v);
    }
  return ChoosePerChannelQuantParams(mins, maxs, 0, type, true);
}

int32_t QuantizeValue(float x, float scale, int32_t zero_point, int32_t qmin, int32_t qmax) {
  if (std::isnan(x)) return zero_point;
  // nearbyint rounds half to even in the default floating-point environment, like OpenCL rint
  // and CUDA rintf. The division must stay a division (no reciprocal multiply).
  const float r = std::nearbyint(x / scale) + static_cast<float>(zero_point);
  if (r <= static_cast<float>(qmin)) return qmin;
  if (r >= static_cast<float>(qmax)) return qmax;
  return static_cast<int32_t>(r);
}

float DequantizeValue(int32_t q, float scale, int32_t zero_point) {
  return scale * static_cast<float>(q - zero_point);
}

float SnapValue(float x, float scale, int32_t zero_point, int32_t qmin, int32_t qmax) {
  return DequantizeValue(QuantizeValue(x, scale, zero_point, qmin, qmax), scale, zero_point);
}

int64_t Requant(DataType type, int64_t acc, FixedPointMultiplier m) {
  if (TraitsOf(type).acctype == Scalar::kI64) return Requantize64(acc, m);
  return Requantize32(static_cast<int32_t>(static_cast<uint32_t>(acc)), m);
}

void QuantizeTensor(const float* x, size_t n, const QuantParams& p, void* out, size_t inner) {
  p.Validate();
  if (p.type == DataType::kInt8Q)
    QuantizeInto(x, n, p, static_cast<uint8_t*>(out), inner);
  else
    QuantizeInto(x, n, p, static_cast<uint16_t*>(out), inner);
}

void DequantizeTensor(const void* q, size_t n, const QuantParams& p, float* out, size_t inner) {
  p.Validate();
  if (p.type == DataType::kInt8Q)
    DequantizeFrom(static_cast<const uint8_t*>(q), n, p, out, inner);
  else
    DequantizeFrom(static_cast<const uint16_t*>(q), n, p, out, inner);
}

FixedPointMultiplier RequantizationMultiplier(double s_a, double s_b, double s_c) {
  const double real = s_a * s_b / s_c;
  if (!(s_a > 0.0) || !(s_b > 0.0) || !(s_c > 0.0) || !(real < 2147483648.0)) {
    std::ostringstream msg;
    msg << "RequantizationMultiplier: scales " << s_a << " · " << s_b << " / " << s_c
        << " give a multiplier outside (0, 2^31)";
    throw Error(msg.str());
  }
  return QuantizeMultiplier(real);
}

FixedPointMultiplier RescaleMultiplier(double s_in, double s_out) {
  return RequantizationMultiplier(s_in, 1.0, s_out);
}

void ConvertTensor(DataType from, const QuantParams& from_params, const void* x, DataType to,
                   const QuantParams& to_params, void* y, size_t n) {
  const bool qx = IsQuantized(from), qy = IsQuantized(to);
  for (const auto* side : {qx ? &from_params : nullptr, qy ? &to_params : nullptr}) {
    if (!side) continue;
    side->Validate();
    if (side->per_channel())
      throw Error("ConvertTensor: per-channel parameters are not supported by conversions");
  }
  if (qx && from_params.type != from)
    throw Error(std::string("ConvertTensor: source parameters are for ") + Name(from_params.type) +
                ", data is " + Name(from));
  if (qy && to_params.type != to)
    throw Error(std::string("ConvertTensor: destination parameters are for ") +
                Name(to_params.type) + ", data is " + Name(to));
  if (qx && qy) {
    const FixedPointMultiplier m = RescaleMultiplier(from_params.scale[0], to_params.scale[0]);
    const int32_t xz = from_params.zero_point[0], yz = to_params.zero_point[0];
    for (size_t i = 0; i < n; ++i) {
      const int32_t d = LoadQ(from, x, i) - xz;
      StoreQ(to, y, i, yz + Requant(from, d, m));
    }
  } else if (qx) {
    for (size_t i = 0; i < n; ++i)
      StoreF(to, y, i,
             DequantizeValue(LoadQ(from, x, i), from_params.scale[0], from_params.zero_point[0]));
  } else if (qy && from == DataType::kFloat32) {
    QuantizeTensor(static_cast<const float*>(x), n, to_params, y);  // QuantizeValue's bits
  } else if (qy) {
    for (size_t i = 0; i < n; ++i)
      StoreQ(to, y, i,
             QuantizeValue(LoadF(from, x, i), to_params.scale[0], to_params.zero_point[0],
                           to_params.qmin, to_params.qmax));
  } else if (from == DataType::kFloat32 && to == DataType::kFloat16) {
    FloatsToHalves(static_cast<const float*>(x), n, static_cast<uint16_t*>(y));
  } else {
    for (size_t i = 0; i < n; ++i) StoreF(to, y, i, LoadF(from, x, i));
  }
}

}  // namespace mpcaffe::quant

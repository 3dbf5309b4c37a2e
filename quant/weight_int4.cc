// quant/weight_int4.cc — per-channel 4-bit weight scales and quantization, and the exact
// simulation of a 16-bit accumulator (see weight_int4.h).
#include "quant/weight_int4.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>

#include "device/error.h"

namespace mpcaffe::quant {

int8_t QuantizeInt4Value(float x, float scale) {
  return static_cast<int8_t>(QuantizeValue(x, scale, 0, kInt4Min, kInt4Max));
}

namespace {

double ChannelSquaredError(const float* w, size_t k, float scale) {
  double err = 0.0;
  for (size_t i = 0; i < k; ++i) {
    if (std::isnan(w[i])) continue;
    const double d = double(w[i]) - double(scale) * QuantizeInt4Value(w[i], scale);
    err += d * d;
  }
  return err;
}

float ValidScale(double s) {
  if (!(s > 0.0)) return 1.0f;
  return std::max(static_cast<float>(s), FLT_MIN);
}

}  // namespace

std::vector<float> ChooseInt4Scales(const float* w, size_t channels, size_t k,
                                    Int4ScaleMethod method) {
  std::vector<float> scales(channels, 1.0f);
  for (size_t c = 0; c < channels; ++c) {
    const float* row = w + c * k;
    double absmax = 0.0;
    for (size_t i = 0; i < k; ++i) {
      if (std::isinf(row[i]))
        throw Error("4-bit weight quantization: output channel " + std::to_string(c) +
                    " has an infinite weight at index " + std::to_string(i));
      if (!std::isnan(row[i])) absmax = std::max(absmax, std::fabs(double(row[i])));
    }
    if (absmax == 0.0) continue;  // all zero: any scale; 1 keeps it a normal float
    float best = ValidScale(absmax / kInt4Max);
    if (method == Int4ScaleMethod::kMinMse) {
      double best_err = ChannelSquaredError(row, k, best);
      for (float r : kInt4ClipRatios) {
        const float s = ValidScale(double(r) * absmax / kInt4Max);
        const double err = ChannelSquaredError(row, k, s);
        if (err < best_err) best = s, best_err = err;
      }
    }
    scales[c] = best;
  }
  return scales;
}

void QuantizeInt4Weights(const float* w, size_t channels, size_t k,
                         const std::vector<float>& scales, int8_t* out) {
  if (scales.size() != channels)
    throw Error("4-bit weight quantization: " + std::to_string(scales.size()) + " scales for " +
                std::to_string(channels) + " output channels");
  for (size_t c = 0; c < channels; ++c)
    for (size_t i = 0; i < k; ++i) out[c * k + i] = QuantizeInt4Value(w[c * k + i], scales[c]);
}

double Int4WeightMse(const float* w, size_t channels, size_t k, const std::vector<float>& scales) {
  if (channels * k == 0) return 0.0;
  double err = 0.0;
  for (size_t c = 0; c < channels; ++c) err += ChannelSquaredError(w + c * k, k, scales[c]);
  return err / double(channels * k);
}

QuantParams Int4StorageParams(const std::vector<float>& scales) {
  static_assert(kInt4StorageZero == 128, "the symmetric int8q zero point");
  return SymmetricChannelParams(scales, DataType::kInt8Q);
}

// ---- 16-bit accumulator ------------------------------------------------------------------

Acc16Overflow& Acc16Overflow::operator+=(const Acc16Overflow& o) {
  steps += o.steps;
  overflow_steps += o.overflow_steps;
  outputs += o.outputs;
  overflowed_outputs += o.overflowed_outputs;
  return *this;
}

void Acc16Dot(const uint8_t* x, size_t x_stride, const int8_t* w, size_t k, Acc16Overflow* count) {
  int32_t acc = 0;  // always within int16 (sticky at a bound once overflowed)
  bool stuck = false;
  for (size_t i = 0; i < k; ++i) {
    if (stuck) continue;
    const int32_t sum = acc + int32_t(x[i * x_stride]) * int32_t(w[i]);
    if (sum > INT16_MAX || sum < INT16_MIN) {
      ++count->overflow_steps;
      stuck = true;
      acc = sum > INT16_MAX ? INT16_MAX : INT16_MIN;
    } else {
      acc = sum;
    }
  }
  count->steps += k;
  ++count->outputs;
  if (stuck) ++count->overflowed_outputs;
}

Acc16Overflow Acc16InnerProduct(const uint8_t* x, size_t m, const int8_t* w, size_t n, size_t k) {
  Acc16Overflow c;
  for (size_t r = 0; r < m; ++r)
    for (size_t o = 0; o < n; ++o) Acc16Dot(x + r * k, 1, w + o * k, k, &c);
  return c;
}

Acc16Overflow Acc16Convolution(const uint8_t* x, uint8_t x_zero, const int8_t* w,
                               const Acc16ConvShape& s) {
  Acc16Overflow c;
  const int cin = s.channels / s.groups, cout = s.out_channels / s.groups;
  const size_t k = size_t(cin) * s.kernel_h * s.kernel_w;
  const int oh = s.out_h(), ow = s.out_w();
  std::vector<uint8_t> col(k);
  for (int b = 0; b < s.batch; ++b)
    for (int g = 0; g < s.groups; ++g)
      for (int y = 0; y < oh; ++y)
        for (int xo = 0; xo < ow; ++xo) {
          size_t i = 0;  // the column in the weights' (c, kh, kw) order
          for (int ci = 0; ci < cin; ++ci)
            for (int ky = 0; ky < s.kernel_h; ++ky)
              for (int kx = 0; kx < s.kernel_w; ++kx) {
                const int iy = y * s.stride_h - s.pad_h + ky * s.dilation_h;
                const int ix = xo * s.stride_w - s.pad_w + kx * s.dilation_w;
                const bool inside = iy >= 0 && iy < s.height && ix >= 0 && ix < s.width;
                col[i++] = inside ? x[((size_t(b) * s.channels + g * cin + ci) * s.height + iy) *
                                          s.width + ix]
                                  : x_zero;
              }
          for (int o = 0; o < cout; ++o) Acc16Dot(col.data(), 1, w + (size_t(g) * cout + o) * k, k, &c);
        }
  return c;
}

}  // namespace mpcaffe::quant

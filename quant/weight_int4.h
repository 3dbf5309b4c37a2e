// quant/weight_int4.h — 4-bit weights of int8 nets (the 8×4-bit scheme): per-output-channel
// symmetric scales chosen from the fp32 weights, the host reference of their quantization, the
// storage parameters of the unpacked values inside an int8 blob, and an exact simulation of the
// 16-bit accumulator the Arm paper proposes (overflow counting).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "quant/int4.h"  // kInt4Min / kInt4Max, packing
#include "quant/quant_params.h"

namespace mpcaffe::quant {

/// An int8 (uint8-stored) parameter blob holds a 4-bit weight w as w + 128 (so the blob reads
/// like any symmetric int8 blob: zero point 128, values 120..135); the device and the
/// caffemodel hold the packed signed nibbles.
inline constexpr int32_t kInt4StorageZero = 128;

/// How the scale of each output channel is chosen.
///   kAbsMax: round-to-nearest with s = max|w| / 7 (nothing clipped; −8 unused).
///   kMinMse: s = r · max|w| / 7 for the clipping ratio r in kInt4ClipRatios with the least
///            squared error Σ (w − s·q(w))² over the channel (values beyond the grid clip to
///            −8 / 7); ties keep the larger r.
enum class Int4ScaleMethod { kMinMse, kAbsMax };
inline constexpr float kInt4ClipRatios[] = {1.0f,  0.95f, 0.9f, 0.85f, 0.8f, 0.75f,
                                            0.7f,  0.65f, 0.6f, 0.55f, 0.5f};

/// The 4-bit value of x at `scale`: round-half-to-even(x / scale) (true division, as
/// QuantizeValue), clamped to [−8, 7]; NaN gives 0.
int8_t QuantizeInt4Value(float x, float scale);

/// One scale per channel for `channels` rows of `k` consecutive weights. A channel of zeros gets
/// scale 1, a scale below FLT_MIN is raised to FLT_MIN (as QuantParams requires); NaN weights
/// are ignored. Throws mpcaffe::Error naming the channel for an infinite weight.
std::vector<float> ChooseInt4Scales(const float* w, size_t channels, size_t k,
                                    Int4ScaleMethod method);

/// out[c·k + i] = QuantizeInt4Value(w[c·k + i], scales[c]).
void QuantizeInt4Weights(const float* w, size_t channels, size_t k,
                         const std::vector<float>& scales, int8_t* out);

/// Σ (w − s·q(w))² / count: the mean squared weight error of the 4-bit grid.
double Int4WeightMse(const float* w, size_t channels, size_t k, const std::vector<float>& scales);

/// Storage parameters of 4-bit weights inside an int8 blob: kInt8Q, symmetric, per channel along
/// axis 0, scale = scales[c], zero point kInt4StorageZero. Dequantizing the blob with these gives
/// the 4-bit grid values; the kernels' w_zero is 0 on the packed signed values.
QuantParams Int4StorageParams(const std::vector<float>& scales);

/// The Arm paper's 16-bit accumulator, simulated exactly on the host: each product x·w
/// (x uint8 as stored, w a signed 4-bit weight; the kernels' Σ x·w term) is added in order of
/// k to a 16-bit accumulator; a step whose exact sum leaves [−32768, 32767] is an overflow, and
/// the accumulator then sticks at that bound (the paper's sticky overflow), so later steps of the
/// same output are not counted again.
struct Acc16Overflow {
  uint64_t steps = 0;            // accumulation steps (products added)
  uint64_t overflow_steps = 0;   // steps that overflowed
  uint64_t outputs = 0;          // dot products
  uint64_t overflowed_outputs = 0;
  Acc16Overflow& operator+=(const Acc16Overflow& o);
  double step_percent() const { return steps ? 100.0 * double(overflow_steps) / double(steps) : 0.0; }
  double output_percent() const {
    return outputs ? 100.0 * double(overflowed_outputs) / double(outputs) : 0.0;
  }
};

/// One dot product of x[i·x_stride] and w[i] for i < k, folded into `count`.
void Acc16Dot(const uint8_t* x, size_t x_stride, const int8_t* w, size_t k, Acc16Overflow* count);

/// InnerProduct: rows of x (m × k, uint8) times channels of w (n × k, 4-bit values).
Acc16Overflow Acc16InnerProduct(const uint8_t* x, size_t m, const int8_t* w, size_t n, size_t k);

/// Convolution (NCHW uint8 input, OIHW 4-bit weights, groups); padded positions hold x_zero (the
/// stored value of 0.0), as the Σ x·w term of the kernels sees them.
struct Acc16ConvShape {
  int batch = 1, channels = 1, height = 1, width = 1, out_channels = 1, groups = 1;
  int kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
  int dilation_h = 1, dilation_w = 1;
  int out_h() const { return (height + 2 * pad_h - (dilation_h * (kernel_h - 1) + 1)) / stride_h + 1; }
  int out_w() const { return (width + 2 * pad_w - (dilation_w * (kernel_w - 1) + 1)) / stride_w + 1; }
};
Acc16Overflow Acc16Convolution(const uint8_t* x, uint8_t x_zero, const int8_t* w,
                               const Acc16ConvShape& s);

}  // namespace mpcaffe::quant

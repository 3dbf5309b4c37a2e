// quant/quant_params.h — affine quantization parameters (real = scale · (q − zero_point)),
// their choice from an observed range, and the host reference of quantize / dequantize that
// every conversion kernel must match bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "codegen/datatype.h"
#include "codegen/typed_buffer.h"
#include "quant/fixed_point.h"

namespace mpcaffe::quant {

/// Parameters of one quantized tensor: per tensor (one scale and zero point) or per channel
/// along `axis` (one per index of that axis). `qmin`/`qmax` is the stored integer range, always
/// the data type's full range (int8q 0..255, int16q 0..65535): kernels saturate to it.
/// `symmetric` parameters have the zero point in the middle of the range (128, 32768) and a
/// scale that represents ±max|x| exactly (q − zero_point spans −127..127 for int8q).
struct QuantParams {
  DataType type = DataType::kInt8Q;
  int32_t qmin = 0;
  int32_t qmax = 255;
  bool symmetric = false;
  int axis = -1;  // channel axis; -1 for per-tensor parameters
  std::vector<float> scale{1.0f};
  std::vector<int32_t> zero_point{0};

  bool per_channel() const { return axis >= 0; }
  size_t channels() const { return scale.size(); }
  /// Scale / zero point of channel `c` (per-tensor parameters ignore `c`).
  float scale_of(size_t c = 0) const { return scale[per_channel() ? c : 0]; }
  int32_t zero_point_of(size_t c = 0) const { return zero_point[per_channel() ? c : 0]; }
  /// The real values of qmin and qmax for channel `c`: the range representable without
  /// saturation.
  float RepresentableMin(size_t c = 0) const;
  float RepresentableMax(size_t c = 0) const;
  /// Throws mpcaffe::Error naming the field when the parameters are inconsistent (type not
  /// quantized, scale not a positive normal float, zero point outside [qmin, qmax], channel
  /// counts differing, ...).
  void Validate() const;
};

/// Chooses per-tensor parameters for `type` (kInt8Q or kInt16Q) from an observed range.
///
/// The range is first widened to include 0 — [min(observed_min, 0), max(observed_max, 0)] —
/// without changing the observed values themselves. Asymmetric: scale = (hi − lo)/(qmax − qmin)
/// rounded to float, zero point = round(qmin − lo/scale) (half away from zero) clamped to
/// [qmin, qmax], so 0.0 is exactly representable (it quantizes to the zero point) and the
/// grid covers [lo, hi] up to half a step at each end. Symmetric: zero point 128 (int8q) /
/// 32768 (int16q), scale = max(|lo|, |hi|)/127 (/32767).
///
/// Degenerate ranges: a range that is empty after widening (observed_min == observed_max == 0)
/// gives scale 1 with the zero point at qmin (asymmetric) or the middle (symmetric); a
/// scale smaller than the smallest normal float (FLT_MIN) is raised to FLT_MIN so devices
/// that flush denormals divide by the same value as the host. A range with min > max, a NaN
/// or infinite bound, or a bound beyond the float range throws mpcaffe::Error.
QuantParams ChooseQuantParams(double observed_min, double observed_max, DataType type,
                              bool symmetric = false);

/// Per-channel parameters along `axis`: channel c uses (mins[c], maxs[c]) as above.
QuantParams ChoosePerChannelQuantParams(const std::vector<double>& mins,
                                        const std::vector<double>& maxs, int axis, DataType type,
                                        bool symmetric = false);

/// Symmetric per-channel parameters of `type` along axis 0 with the given scales and the zero
/// point in the middle of the range (128, 32768): the storage parameters of per-output-channel
/// weights (int8 depthwise convolutions; 4-bit weights inside an int8 blob).
QuantParams SymmetricChannelParams(const std::vector<float>& scales, DataType type);

/// Symmetric per-channel parameters of `type` for `channels` rows of `k` weights (row c is
/// channel c): ChoosePerChannelQuantParams of each row's range (NaN skipped), symmetric, so the
/// scale of row c is max|w_c| / 127 for int8q. They equal SymmetricChannelParams of their scales.
QuantParams ChooseWeightChannelParams(const float* w, size_t channels, size_t k, DataType type);

/// The reference quantization of one value (all conversion kernels do exactly this, in float):
///   NaN → zero_point; otherwise r = round-half-to-even(x / scale) (a true IEEE division,
///   not x · (1/scale)), v = r + (float)zero_point, saturated to [qmin, qmax]. ±Inf and
///   out-of-range values saturate. r + zero_point is exact whenever it lies in range.
int32_t QuantizeValue(float x, float scale, int32_t zero_point, int32_t qmin, int32_t qmax);

/// The reference dequantization: scale · (float)(q − zero_point), one float multiply.
float DequantizeValue(int32_t q, float scale, int32_t zero_point);

/// Quantize then dequantize: `x` snapped to the grid (PSEUDO mode). NaN gives 0.0.
float SnapValue(float x, float scale, int32_t zero_point, int32_t qmin, int32_t qmax);

/// The requantization of a data type's accumulator (what the kernels' MP_REQUANT computes):
/// Requantize64 for an int64 accumulator (int16q), else Requantize32 of `acc` wrapped to
/// int32 first, as the kernels' int arithmetic wraps. fp16 conversions are HalfToFloat /
/// FloatToHalf of codegen/datatype.h, element access LoadF/LoadQ/StoreF/StoreQ of
/// codegen/typed_buffer.h.
int64_t Requant(DataType type, int64_t acc, FixedPointMultiplier m);

/// Channel of flat element `i` of a tensor whose channel axis is followed by `inner` elements
/// per channel (inner = product of the dimensions after the axis).
inline size_t ChannelOf(size_t i, size_t inner, size_t channels) { return (i / inner) % channels; }

/// Tensor reference quantization: `n` floats to `params.type` storage (uint8 or uint16 in
/// `out`). `inner` as in ChannelOf (ignored for per-tensor parameters). Both tensor functions
/// run the vector width of ActiveHostIsa() (device/host_isa.h), bit-exact with QuantizeValue
/// and DequantizeValue at every level.
void QuantizeTensor(const float* x, size_t n, const QuantParams& params, void* out,
                    size_t inner = 1);
/// Tensor reference dequantization from `params.type` storage.
void DequantizeTensor(const void* q, size_t n, const QuantParams& params, float* out,
                      size_t inner = 1);

/// Fixed-point multiplier for rescaling an accumulator of products of tensors with scales
/// s_a and s_b into a tensor of scale s_c: QuantizeMultiplier(s_a·s_b/s_c) computed in
/// double. Throws mpcaffe::Error when the ratio is not below 2^31.
FixedPointMultiplier RequantizationMultiplier(double s_a, double s_b, double s_c);
/// Fixed-point multiplier of a plain rescale from scale s_in to scale s_out (s_in/s_out).
FixedPointMultiplier RescaleMultiplier(double s_in, double s_out);

/// Reference of the conversion kernels convert_<from>_<to> (codegen/elementwise.h) on `n`
/// elements in storage layout (float, uint16 half bits, uint16, uint8):
///   float → float: fp16 → fp32 exact, fp32 → fp16 FloatToHalf;
///   quantized → float: DequantizeValue in float, then FloatToHalf for fp16;
///   float → quantized: (fp16 widened exactly) QuantizeValue;
///   quantized → quantized: clamp(y_zero + requant(q − x_zero)) with
///   RescaleMultiplier(s_x, s_y), Requantize32 for an int8q source, Requantize64 for int16q.
/// Per-tensor parameters only; `from_params` / `to_params` are ignored for float sides. An fp32
/// source runs the vector paths of ActiveHostIsa() (QuantizeTensor; F16C for fp16), the same bits.
/// Layers convert inputs written on the host with it (a Quantizer whose bottom is newest there).
void ConvertTensor(DataType from, const QuantParams& from_params, const void* x, DataType to,
                   const QuantParams& to_params, void* y, size_t n);

}  // namespace mpcaffe::quant

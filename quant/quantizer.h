// quant/quantizer.h — Quantizer: the per-blob object that observes value ranges on the device,
// snaps fp32 data to a quantization grid (fake quantization), and hands quantization
// parameters and fixed-point multipliers to low-precision kernels.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "codegen/datatype.h"
#include "codegen/kernel_writer.h"
#include "device/device.h"
#include "quant/fixed_point.h"
#include "quant/quant_params.h"
#include "quant/quantizer_mode.h"
#include "quant/weight_int4.h"

namespace mpcaffe::quant {

/// Kernel text of observe_range(int n, In float x, Out mp_u32 range): folds the minimum and
/// maximum of x[0..n) (NaN skipped) into range[0] / range[1] (float bits) with atomic
/// compare-and-swap; launched with local size kObserveLocalSize. No device needed.
std::string ObserveRangeSource(const KernelTarget& target);
inline constexpr size_t kObserveLocalSize = 64;
inline constexpr const char* kObserveRangeKernel = "observe_range";

/// Kernel text of pseudo_<dt>(int n, Out float x, float scale, int zero_point) snapping x in
/// place to the grid of `type`: quantized types exactly as SnapValue (QuantizeValue then
/// DequantizeValue, NaN → 0); fp16 as HalfToFloat(FloatToHalf(x)) (scale/zero point unused);
/// fp32 leaves x unchanged. No device needed.
std::string PseudoSource(const KernelTarget& target, DataType type);
std::string PseudoKernelName(DataType type);

/// A count that advances with every change of any quantizer's mode, types, ranges or weight
/// settings in the process (a new quantizer too). What is derived from quantizers alone —
/// whether a Net's views still apply (Net::UpdateViews) — holds while it stands still.
uint64_t QuantizerStateGeneration();

/// A quantizer on one blob. Not thread-safe; one per blob and layer side.
///
/// OBSERVE: Observe() reduces min/max on the device into a two-float device buffer; no data
/// comes back to the host until observed_min()/observed_max() are asked. PSEUDO: Pseudo()
/// observes the batch, then reads the range (8 bytes) and snaps the data in place to the
/// grid of pseudo_target_type() chosen from the observed range. ACTIVE: InputParams() /
/// OutputParams() give the parameters of the input and output sides (from min_in/max_in and
/// min_out/max_out when set, else from the observed range), Convert() runs the conversion
/// kernel between input_type() and output_type().
class Quantizer {
 public:
  explicit Quantizer(Device& device, std::string name = "", int64_t zone = 0);

  const std::string& name() const { return name_; }
  int64_t zone() const { return zone_; }
  Device& device() const { return *device_; }

  QuantizerMode mode() const { return mode_; }
  void set_mode(QuantizerMode mode) {
    mode_ = mode;
    Changed();
  }
  /// Whether the mode observes or snaps the fp32 data passing it (OBSERVE, PSEUDO): a pass
  /// must then show it the values at its place in the net.
  bool watches_data() const {
    return mode_ == QuantizerMode::kObserve || mode_ == QuantizerMode::kPseudo;
  }
  DataType input_type() const { return input_type_; }
  DataType output_type() const { return output_type_; }
  void set_types(DataType input, DataType output) {
    input_type_ = input;
    output_type_ = output;
    Changed();
  }
  DataType pseudo_target_type() const { return pseudo_target_type_; }
  void set_pseudo_target_type(DataType type) {
    pseudo_target_type_ = type;
    Changed();
  }
  /// Reset the observed range before each Pseudo() batch (proto pseudo_reset_observed).
  bool pseudo_reset_observed() const { return pseudo_reset_observed_; }
  void set_pseudo_reset_observed(bool reset) {
    pseudo_reset_observed_ = reset;
    Changed();
  }
  /// Symmetric parameters (weights) instead of asymmetric ones.
  bool symmetric() const { return symmetric_; }
  void set_symmetric(bool symmetric) {
    symmetric_ = symmetric;
    Changed();
  }

  /// Bits of the weights of a Convolution / InnerProduct weight blob in an int8 layer
  /// (QuantizerParameter.weight_bits): 8, or 4 for per-channel symmetric 4-bit weights whose
  /// scales are channel_scales() (empty until the weights are quantized or loaded).
  int weight_bits() const { return weight_bits_; }
  void set_weight_bits(int bits) {
    weight_bits_ = bits;
    Changed();
  }
  const std::vector<float>& channel_scales() const { return channel_scales_; }
  void set_channel_scales(std::vector<float> scales) {
    channel_scales_ = std::move(scales);
    Changed();
  }
  /// Per-output-channel symmetric weights of the blob's own type (int8 depthwise convolutions):
  /// one scale per output channel, channel_scales() (chosen from the fp32 weights with
  /// ChooseWeightChannelParams, or loaded), the zero point the middle of the range.
  bool per_channel_weights() const { return per_channel_weights_; }
  void set_per_channel_weights(bool on) {
    per_channel_weights_ = on;
    Changed();
  }
  Int4ScaleMethod weight_scale_method() const { return weight_scale_method_; }
  void set_weight_scale_method(Int4ScaleMethod m) {
    weight_scale_method_ = m;
    Changed();
  }

  /// The forward hook of the modes that act on fp32 data: OBSERVE observes, PSEUDO snaps,
  /// PASSIVE and ACTIVE do nothing. Asynchronous except PSEUDO's 8-byte range read.
  void Forward(const vptr<float>& data, size_t n);
  /// Folds min/max of data[0..n) into the device-side range (NaN skipped). Asynchronous.
  void Observe(const vptr<float>& data, size_t n);
  /// Observes, then snaps data[0..n) in place to the grid of pseudo_target_type().
  void Pseudo(const vptr<float>& data, size_t n);

  /// True once any value (or a loaded range) has been observed.
  bool has_observed();
  /// The observed range (device reduction merged with any loaded range); reads the device.
  /// Throws mpcaffe::Error when nothing has been observed.
  double observed_min();
  double observed_max();
  /// Forgets every observation, device-side and loaded.
  void ResetObserved();
  /// Replaces the observed range (e.g. loaded from a caffemodel); min > max means none.
  void SetObserved(double min, double max);

  /// Explicit input/output ranges (proto min_in/max_in, min_out/max_out). Unset sides use the
  /// observed range.
  void SetInputRange(double min, double max);
  void SetOutputRange(double min, double max);
  bool has_input_range() const { return has_in_; }
  bool has_output_range() const { return has_out_; }
  double min_in() const { return min_in_; }
  double max_in() const { return max_in_; }
  double min_out() const { return min_out_; }
  double max_out() const { return max_out_; }

  /// Parameters of the input / output side for its data type (throws mpcaffe::Error for a
  /// float side or when no range is known).
  QuantParams InputParams();
  QuantParams OutputParams();
  /// Parameters for `type` chosen from the observed range.
  QuantParams ObservedParams(DataType type);

  /// Converts n elements from input_type() to output_type() with convert_<in>_<out>
  /// (codegen/elementwise.h), passing this quantizer's parameters and the fixed-point
  /// multiplier s_in/s_out. `x` and `y` must have the element sizes of the two types.
  template <typename TX, typename TY>
  void Convert(const vptr<TX>& x, const vptr<TY>& y, size_t n) {
    CheckConvertTypes(sizeof(TX), sizeof(TY));
    Kernel k = ConvertKernel();
    k.Arg(static_cast<int32_t>(n)).Arg(x).Arg(y);
    SetConvertArgs(k);
    k.Launch1D(n);
  }

 private:
  /// Advances QuantizerStateGeneration(): every change of a quantizer's mode, types, ranges
  /// (set, loaded, observed or reset) or weight settings calls it.
  static void Changed();
  void EnsureRangeBuffer();
  void ReadRange(double* min, double* max);
  void CheckConvertTypes(size_t x_bytes, size_t y_bytes) const;
  Kernel ConvertKernel();
  void SetConvertArgs(Kernel& k);
  Kernel GetKernel(const std::string& source, const std::string& name);

  Device* device_;
  std::string name_;
  int64_t zone_;
  QuantizerMode mode_ = QuantizerMode::kPassive;
  DataType input_type_ = DataType::kFloat32;
  DataType output_type_ = DataType::kFloat32;
  DataType pseudo_target_type_ = DataType::kInt8Q;
  bool pseudo_reset_observed_ = false;
  bool symmetric_ = false;
  int weight_bits_ = 8;
  std::vector<float> channel_scales_;
  bool per_channel_weights_ = false;
  Int4ScaleMethod weight_scale_method_ = Int4ScaleMethod::kMinMse;

  vptr<uint32_t> range_;                         // device: float bits of {min, max}
  bool device_observed_ = false;                 // Observe() ran since the last reset
  double loaded_min_ = 0.0, loaded_max_ = -1.0;  // min > max: none
  bool has_in_ = false, has_out_ = false;
  double min_in_ = 0.0, max_in_ = 0.0, min_out_ = 0.0, max_out_ = 0.0;
};

}  // namespace mpcaffe::quant

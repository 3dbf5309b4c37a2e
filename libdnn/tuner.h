// libdnn/tuner.h — the Tuner: times GEMM and convolution kernel configurations (and BLAS
// libraries) on the device and stores the winners in the kernel cache's tuning table, where
// Gemm, Convolution and the BLAS multiplexer find them next time (TunedGemmConfig,
// TunedConvConfig); ShapeRecorder lists the shapes a net prepares, for `mpcaffe tune --model`.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "libdnn/blas.h"
#include "libdnn/conv.h"
#include "libdnn/conv_winograd.h"
#include "libdnn/gemm.h"
#include "libdnn/kernel_config.h"

namespace mpcaffe::libdnn {

/// What one tuning run of a kernel's configurations (GemmConfig, ConvConfig) found.
template <typename Config>
struct TuneResult {
  Config best;
  double best_ms = 0;
  double default_ms = 0;                            // the default configuration's time
  std::vector<std::pair<Config, double>> measured;  // every candidate that ran
  bool stored = false;                              // the record reached the cache file
};
using GemmTuneResult = TuneResult<GemmConfig>;
using ConvTuneResult = TuneResult<ConvConfig>;
/// The depthwise kernel's one parameter: output rows per work-item.
using DepthwiseTuneResult = TuneResult<int>;
/// The pointwise forward: a tile of the pointwise kernel, or nothing for the direct kernel.
using PointwiseChoice = std::optional<Convolution::PointwiseTile>;
using PointwiseTuneResult = TuneResult<PointwiseChoice>;
/// The Winograd forward: a configuration, or nothing for the family after it (the direct kernel).
using WinogradChoice = std::optional<WinogradConfig>;
using WinogradTuneResult = TuneResult<WinogradChoice>;

struct BlasTuneResult {
  BlasImpl best = BlasImpl::kLibDNN;
  std::vector<std::pair<BlasImpl, double>> measured;  // ms per available implementation
  bool stored = false;
};

/// Zero-filled tensors for timing a convolution described by `desc`.
struct ConvOperands {
  ConvOperands(Device& device, const ConvDesc& desc);
  /// residual: the output's size where the description adds one (desc.residual), else null.
  std::shared_ptr<DeviceMemory> input, weights, output, bias, residual;
};

class Tuner {
 public:
  /// `repeats`: timed runs per candidate after one warm-up (the minimum counts).
  explicit Tuner(Device& device, int repeats = 3);

  /// Times every GemmCandidates() configuration on `desc` (zero-filled operands), records the
  /// fastest under operation "gemm", signature desc.ToString(). Candidates slower than
  /// `give_up` × the best so far after their warm-up are not repeated. `max_candidates` > 0
  /// times only the first that many candidates (the default is always first).
  GemmTuneResult TuneGemm(const GemmDesc& desc, double give_up = 3.0, size_t max_candidates = 0);
  /// Times every ConvConfig::Candidates() configuration of the forward kernel on `desc`
  /// (zero-filled tensors), records the fastest under operation "conv", signature
  /// desc.ToString(). `give_up` and `max_candidates` as for TuneGemm.
  ConvTuneResult TuneConv(const ConvDesc& desc, double give_up = 3.0, size_t max_candidates = 0);
  /// Times the depthwise kernel (Convolution::forward_depthwise) of a depthwise `desc` with each
  /// of DepthwiseRowCandidates() output rows per work-item, records the fastest under
  /// operation "conv_dw", signature desc.ToString(). `give_up` as for TuneGemm.
  DepthwiseTuneResult TuneDepthwise(const ConvDesc& desc, double give_up = 3.0);
  /// Times the pointwise kernel of a `desc` where it applies (Convolution::PointwiseApplies)
  /// with each of PointwiseCandidates(), and Convolution::WithoutPointwise (the direct kernel
  /// with its tuned or default configuration, or int8 first layers' im2col + GEMM on CPUs);
  /// records the fastest under operation "conv_pw", signature desc.ToString(), parameters
  /// "conv_pw:" + PointwiseTile::ToString() or "conv_pw:off" (the direct kernel).
  PointwiseTuneResult TunePointwise(const ConvDesc& desc, double give_up = 3.0);
  /// Times the Winograd family of a `desc` where it applies (WinogradApplies) with each of
  /// WinogradCandidates() and Convolution::WithoutWinograd (the direct kernel with its tuned or
  /// default configuration); records the fastest under operation "conv_wino", signature
  /// desc.ToString(), parameters "conv_wino:" + WinogradConfig::ToString() or "conv_wino:off".
  WinogradTuneResult TuneWinograd(const ConvDesc& desc, double give_up = 3.0);
  /// Times LibDNN (with its current, possibly tuned, configuration) against every other
  /// available library and records the winner under "blas_gemm".
  BlasTuneResult TuneBlas(const GemmDesc& desc);

  /// Milliseconds of one forward pass of the convolution `desc` with `config` on `ops`
  /// (minimum over `repeats`, default the tuner's, after a warm-up).
  double TimeConv(const ConvDesc& desc, const ConvConfig& config, const ConvOperands& ops,
                  int repeats = 0);
  /// Milliseconds of one run of `gemm` (minimum over `repeats` after a warm-up).
  double Time(BlasGemm& gemm, const GemmArgs& args);

 private:
  Device& device_;
  int repeats_;
};

/// Minimum over `repeats` device-timed runs of `run` after one warm-up run, in milliseconds.
double TimeMs(const std::function<Event()>& run, int repeats);

/// The depthwise kernel's configuration ("rows4": output rows per work-item), the text of the
/// tuning table's conv_dw records and of MPCAFFE_KERNEL_CONFIG's conv_dw entry.
struct DepthwiseConfig {
  int rows = 8;
  static const ConfigSchema<DepthwiseConfig>& Schema();
  std::string ToString() const;
};

/// A configuration and where it came from.
template <typename Config>
struct Chosen {
  Config config;
  ConfigSource source;
};

/// The configuration Gemm uses for `desc` on `device`: MPCAFFE_KERNEL_CONFIG's gemm entry when it
/// supports `desc`, else the tuning table's record ("gemm", desc.ToString(), "gemm:<config>")
/// when one exists and is supported, else DefaultGemmConfig. Reports `desc` to the active
/// ShapeRecorder. A malformed override throws an Error naming the setting and the field.
Chosen<GemmConfig> ChooseGemmConfig(const Device& device, const GemmDesc& desc);
GemmConfig TunedGemmConfig(const Device& device, const GemmDesc& desc);
/// The same for the convolution forward kernel (MPCAFFE_KERNEL_CONFIG's conv entry; "conv",
/// desc.ToString(); else DefaultConvConfig).
Chosen<ConvConfig> ChooseConvConfig(const Device& device, const ConvDesc& desc);
ConvConfig TunedConvConfig(const Device& device, const ConvDesc& desc);
/// The depthwise kernel's rows per work-item for a depthwise `desc`: MPCAFFE_KERNEL_CONFIG's
/// conv_dw entry, else the tuning table's record ("conv_dw", desc.ToString(), parameters
/// "conv_dw:rows<N>") when one exists, else Convolution::DefaultDepthwiseRows. Reports `desc` to
/// the active ShapeRecorder.
Chosen<int> ChooseDepthwiseRows(const Device& device, const ConvDesc& desc);
int TunedDepthwiseRows(const Device& device, const ConvDesc& desc);
/// Whether MPCAFFE_KERNEL_CONFIG says "conv_dw:off" (depthwise descriptions take the direct
/// kernel).
bool DepthwiseOff();
/// The tuner's candidates for the depthwise kernel's rows per work-item (the default first):
/// 1, 2, 4, 7, 8, 14 and 16 rows, those above the output height left out; the default is
/// `profile`'s (Convolution::DefaultDepthwiseRows).
std::vector<int> DepthwiseRowCandidates(const ConvDesc& desc, const TargetProfile& profile = {});
/// The forward of a pointwise fp32 `desc` (Convolution::PointwiseApplies with its default
/// tile): MPCAFFE_KERNEL_CONFIG's conv_pw entry where it applies, else the tuning table's record
/// ("conv_pw", desc.ToString()) when one exists, else the default tile. Nothing ("conv_pw:off"
/// in the override or the record): the direct kernel.
Chosen<PointwiseChoice> ChoosePointwise(const Device& device, const ConvDesc& desc);
PointwiseChoice TunedPointwise(const Device& device, const ConvDesc& desc);
/// The tuner's candidates (the default tile first, then the direct kernel, then other tiles of
/// at most 16 accumulators, with `profile`'s byte_quad_products also int8q's byte-quad tiles,
/// those the plane is too small for left out).
std::vector<PointwiseChoice> PointwiseCandidates(const ConvDesc& desc,
                                                 const TargetProfile& profile = {});
/// Parses PointwiseTile::ToString()'s form ("oc4 px2 v8"); nothing when malformed.
std::optional<Convolution::PointwiseTile> ParsePointwiseTile(const std::string& text);
/// The Winograd forward of an fp32 `desc` where WinogradApplies: MPCAFFE_KERNEL_CONFIG's
/// conv_wino entry, else the tuning table's record ("conv_wino", desc.ToString()), else the
/// family's defaults table (WinogradDefaults in conv_families.h). Nothing ("conv_wino:off"): the
/// direct kernel.
Chosen<WinogradChoice> ChooseWinograd(const Device& device, const ConvDesc& desc);

/// Parses ConvConfig::ToString()'s form ("l1 oc4 px3 v8"); nothing when malformed or invalid.
std::optional<ConvConfig> ParseConvConfig(const std::string& text);

/// While alive, collects (process-wide) every GEMM and convolution description whose
/// configuration is looked up, each once in first-seen order: building a net under a recorder
/// lists exactly the shapes its layers prepared. One recorder at a time.
class ShapeRecorder {
 public:
  ShapeRecorder();
  ~ShapeRecorder();
  ShapeRecorder(const ShapeRecorder&) = delete;
  ShapeRecorder& operator=(const ShapeRecorder&) = delete;
  std::vector<GemmDesc> gemms() const;
  std::vector<ConvDesc> convs() const;
};

/// Operands for timing: zero-filled A, B, C, bias and weight sums sized for `desc`.
struct GemmOperands {
  GemmOperands(Device& device, const GemmDesc& desc);
  GemmArgs args() const;
  /// What a layer does once per weight tensor before its runs: the weight sums of a quantized
  /// GEMM (and the 4-bit weights unpacked, where its configuration takes the int8 kernels), so
  /// that a timing measures the runs a layer makes. Nothing for float types or another library.
  void PrepareWeights(BlasGemm& gemm) const;
  void PrepareWeights(Gemm& gemm) const;
  vptr<uint8_t> a, b, c, bias, sums;
};

/// Quantization parameters that make a quantized `desc` runnable (benchmarks, tuning).
GemmQuant PlaceholderQuant(const GemmDesc& desc);

}  // namespace mpcaffe::libdnn

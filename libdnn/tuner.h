// libdnn/tuner.h — the Tuner: times GEMM kernel configurations (and BLAS libraries) on the
// device and stores the winners in the kernel cache's tuning table, where Gemm and the BLAS
// multiplexer find them next time.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "libdnn/blas.h"
#include "libdnn/gemm.h"

namespace mpcaffe::libdnn {

/// What one tuning run found.
struct GemmTuneResult {
  GemmConfig best;
  double best_ms = 0;
  double default_ms = 0;                                // the default configuration's time
  std::vector<std::pair<GemmConfig, double>> measured;  // every candidate that ran
  bool stored = false;                                  // the record reached the cache file
};

struct BlasTuneResult {
  BlasImpl best = BlasImpl::kLibDNN;
  std::vector<std::pair<BlasImpl, double>> measured;  // ms per available implementation
  bool stored = false;
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
  /// Times LibDNN (with its current, possibly tuned, configuration) against every other
  /// available library and records the winner under "blas_gemm".
  BlasTuneResult TuneBlas(const GemmDesc& desc);

  /// Milliseconds of one run of `gemm` (minimum over `repeats` after a warm-up).
  double Time(BlasGemm& gemm, const GemmArgs& args);

 private:
  Device& device_;
  int repeats_;
};

/// Minimum over `repeats` device-timed runs of `run` after one warm-up run, in milliseconds.
double TimeMs(const std::function<Event()>& run, int repeats);

/// Operands for timing: zero-filled A, B, C, bias and weight sums sized for `desc`.
struct GemmOperands {
  GemmOperands(Device& device, const GemmDesc& desc);
  GemmArgs args() const;
  vptr<uint8_t> a, b, c, bias, sums;
};

/// Quantization parameters that make a quantized `desc` runnable (benchmarks, tuning).
GemmQuant PlaceholderQuant(const GemmDesc& desc);

}  // namespace mpcaffe::libdnn

// layers/filler_values.h — the fillers' values drawn in blocks on every core, shared by the
// Layer base's parameter code (layer_params.cc) and FillValues (filler_values.cc); internal to
// layers/.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "layers/layer.h"
#include "layers/random_values.h"

namespace mpcaffe {

/// Runs body(begin, end) over [0, n) in up to hardware_concurrency() chunks (large n only).
template <typename Body>
void ParallelChunks(size_t n, Body body) {
  // Asked once: glibc reads the CPU count from /sys at every call (an open, a read and a
  // close), which a Quantizer layer converting each forward pass's input on the host paid per
  // pass.
  static const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::min<size_t>(cores, std::max<size_t>(1, n / (1 << 18)));
  if (threads <= 1) {
    body(size_t{0}, n);
    return;
  }
  std::vector<std::thread> pool;
  const size_t step = (n + threads - 1) / threads;
  for (size_t t = 1; t < threads; ++t)
    pool.emplace_back(body, std::min(n, t * step), std::min(n, (t + 1) * step));
  body(size_t{0}, std::min(n, step));
  for (auto& th : pool) th.join();
}

/// Maps the pages wholly inside [p, p + bytes) for writing before they are written, in one call
/// (Linux MADV_POPULATE_WRITE) instead of a page fault per 4 KiB page on first touch: a warm
/// AlexNet int8 start-up writes 305 MB of fresh buffers (the calibration net's fp32 weights and
/// the int8 ones). Where the kernel or the memory does not take it, the pages fault as before.
void PrefaultForWrite(void* p, size_t bytes);

/// The values of one filler at any index range: value i depends on (seed, i) and the shape
/// only (positive_unitball's rows are normalised by their sums: FillValues draws those whole).
class ElementFiller {
 public:
  ElementFiller(const caffe::FillerParameter& f, const std::vector<int>& shape, uint64_t seed,
                const std::string& where)
      : f_(f), seed_(seed) {
    count_ = 1;
    for (int d : shape) count_ *= d;
    const int num = shape.empty() ? 1 : shape[0];
    const int channels = shape.size() > 1 ? shape[1] : 1;
    const int fan_in = num ? static_cast<int>(count_ / num) : 0;
    const int fan_out = channels ? static_cast<int>(count_ / channels) : 0;
    const double fan = f.variance_norm() == caffe::FillerParameter::FAN_OUT ? double(fan_out)
                       : f.variance_norm() == caffe::FillerParameter::AVERAGE
                           ? (fan_in + fan_out) / 2.0
                           : double(fan_in);
    const std::string& type = f.type();
    if (type == "constant") {
      kind_ = kConstant;
    } else if (type == "uniform") {
      kind_ = kUniform, lo_ = f.min(), hi_ = f.max();
    } else if (type == "gaussian") {
      kind_ = kNormal, mean_ = f.mean(), std_ = f.std();
      if (f.sparse() >= 0 && num > 0) {  // keep each weight with probability sparse / num_outputs
        keep_ = std::min(1.0, double(f.sparse()) / num);
        mask_seed_ = Mix64(seed ^ 0x5eed5eed5eed5eedULL);
        sparse_ = true;
      }
    } else if (type == "xavier") {
      const double scale = std::sqrt(3.0 / std::max(1.0, fan));
      kind_ = kUniform, lo_ = -scale, hi_ = scale;
    } else if (type == "msra") {
      kind_ = kNormal, mean_ = 0.0, std_ = std::sqrt(2.0 / std::max(1.0, fan));
    } else if (type == "positive_unitball") {
      kind_ = kUniform, lo_ = 0.0, hi_ = 1.0, unitball_ = true;
    } else if (type == "bilinear") {
      if (shape.size() != 4 || shape[2] != shape[3])
        throw LayerError(where + ": bilinear filler needs a 4-d blob with square kernels, got " +
                         ShapeString(shape));
      kind_ = kBilinear;
      k_ = shape[3];
    } else {
      throw LayerError(where + ": unknown filler type '" + type +
                       "' (known: constant, uniform, gaussian, xavier, msra, positive_unitball, "
                       "bilinear)");
    }
  }

  /// False for positive_unitball (its values need their row's sum).
  bool elementwise() const { return !unitball_; }
  size_t count() const { return count_; }

  /// out[i - begin] = value i, for i in [begin, end) (one thread; callers split large ranges).
  void Fill(size_t begin, size_t end, float* out) const {
    switch (kind_) {
      case kConstant:
        std::fill(out, out + (end - begin), f_.value());
        break;
      case kUniform:
        UniformValues(seed_, begin, end, lo_, hi_, out);
        break;
      case kNormal: {
        // The ziggurat: a few integer operations per value (Box–Muller's logarithm and sine
        // were half of AlexNet's start-up), 16 values at a time where the CPU can.
        NormalValues(seed_, begin, end, static_cast<float>(mean_), static_cast<float>(std_), out);
        if (sparse_)
          for (size_t i = begin; i < end; ++i)
            if (!(Uniform01(mask_seed_, i) < keep_)) out[i - begin] = 0.0f;
        break;
      }
      case kBilinear: {
        const float f = std::ceil(k_ / 2.0f);
        const float c = (k_ - 1) / (2.0f * f);
        for (size_t i = begin; i < end; ++i) {
          const float x = static_cast<float>(i % k_), y = static_cast<float>((i / k_) % k_);
          out[i - begin] = (1 - std::fabs(x / f - c)) * (1 - std::fabs(y / f - c));
        }
        break;
      }
    }
  }

 private:
  enum Kind { kConstant, kUniform, kNormal, kBilinear };
  const caffe::FillerParameter& f_;
  uint64_t seed_;
  size_t count_ = 0;
  Kind kind_ = kConstant;
  double lo_ = 0, hi_ = 0, mean_ = 0, std_ = 0, keep_ = 1;
  uint64_t mask_seed_ = 0;
  bool sparse_ = false, unitball_ = false;
  int k_ = 1;
};

/// Values per block in ForEachFilledBlock: 64 KiB of floats, which stay in the core's cache
/// between being drawn and being stored.
constexpr size_t kFillBlock = 16384;

/// Draws values [0, n) of `filler` in blocks on every core (ParallelChunks) and calls
/// block(begin, end, values) on each: no array of all the values exists at any time.
template <typename Block>
void ForEachFilledBlock(const ElementFiller& filler, size_t n, Block block) {
  ParallelChunks(n, [&](size_t b, size_t e) {
    std::unique_ptr<float[]> values(new float[kFillBlock]);
    for (size_t i = b; i < e; i += kFillBlock) {
      const size_t end = std::min(e, i + kFillBlock);
      filler.Fill(i, end, values.get());
      block(i, end, values.get());
    }
  });
}

/// Draws values [0, n) of `filler` on every core, into out[0, n) (or, when out is null, a block at
/// a time into scratch space), and returns the range SetParamFromFloat would observe: from value
/// 0, then every value but NaN (in float: the same extremes as its double comparisons), each
/// block's while the block is in the cache.
std::pair<float, float> DrawnRange(const ElementFiller& filler, size_t n, float* out);

/// Per-output-channel symmetric weights of quantized `type` drawn and quantized in one pass: row
/// c of `channels` rows of `k` values (values [c·k, (c + 1)·k) of `filler`) is drawn into
/// real + c·k (scratch space when `real` is null), given the scale quant::ChooseWeightChannelParams
/// chooses for its range, quantized into row c of `out` (storage of `type`) and, with `real`,
/// dequantized back in place, all while the row is in the cache; rows run on every core. Returns
/// the scales and the range of all the values from 0 (NaN left out): what SetParamFromFloat sets
/// from the same values, whose quantized bytes these are.
std::vector<float> DrawChannelsQuantized(const ElementFiller& filler, size_t channels, size_t k,
                                         DataType type, void* out, float* real,
                                         std::pair<float, float>* range);

}  // namespace mpcaffe

// layers/loss_normalization.h — what the loss layers share: Caffe's normalization modes of
// LossParameter and the device reduction of per-position loss values to the scalar top.
#pragma once

#include "layers/blob.h"
#include "layers/train_kernels.h"
#include "proto/caffe.pb.h"

namespace mpcaffe {

/// Reduces the `n` per-position values in `values` (those below `ignore_below` are ignored) to
/// top's single value: Σ / max(1, use_count ? #counted : fixed_norm), the normalizer left in
/// norm[0]. On the device; `k` is masked_mean of MaskedMeanSource for top's type.
inline void MaskedMean(Kernel k, int n, const vptr<float>& values, Blob& top,
                       const vptr<float>& norm, float fixed_norm, bool use_count,
                       float ignore_below = 0.0f) {
  k.Arg(int32_t{n}).Arg(values).ArgBuffer(top.mutable_device_data(), 0, SizeOf(top.type()))
      .Arg(norm).Arg(fixed_norm).Arg(int32_t{use_count ? 1 : 0}).Arg(ignore_below);
  k.Launch({static_cast<size_t>(kReduceLocalSize), 1, 1},
           {static_cast<size_t>(kReduceLocalSize), 1, 1});
}

/// Caffe's normalization mode of a loss (the legacy `normalize` flag mapped).
inline caffe::LossParameter::NormalizationMode NormalizationOf(const caffe::LossParameter& p) {
  if (!p.has_normalization() && p.has_normalize())
    return p.normalize() ? caffe::LossParameter::VALID : caffe::LossParameter::BATCH_SIZE;
  return p.normalization();
}

/// The normalizer of a loss over `outer`·`inner` positions for the modes that do not count the
/// valid positions (VALID counts them on the device).
inline float FixedNormalizer(caffe::LossParameter::NormalizationMode mode, int outer, int inner) {
  switch (mode) {
    case caffe::LossParameter::FULL:
      return static_cast<float>(outer * inner);
    case caffe::LossParameter::BATCH_SIZE:
      return static_cast<float>(outer);
    default:
      return 1.0f;
  }
}

}  // namespace mpcaffe

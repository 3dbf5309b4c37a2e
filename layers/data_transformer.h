// layers/data_transformer.h — transform_param applied to one record (BVLC's DataTransformer):
// subtract the mean (mean_file, a mean.binaryproto, or mean_value per channel), crop (random in
// TRAIN, centered otherwise), mirror (random in TRAIN), scale. Shared by the Data and ImageData
// layers.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "proto/caffe.pb.h"

namespace mpcaffe {

class DataTransformer {
 public:
  /// transform_param for records of channels×height×width; `legacy` (data_param, may be null)
  /// supplies the old scale / mean_file / crop_size / mirror fields where transform_param has
  /// none. Throws Error on a bad mean file or crop size (the message names them).
  DataTransformer(const caffe::TransformationParameter& tp, const caffe::DataParameter* legacy,
                  int channels, int height, int width, caffe::Phase phase);

  int channels() const { return channels_; }
  int out_height() const { return crop_ ? crop_ : height_; }
  int out_width() const { return crop_ ? crop_ : width_; }
  /// Values one transformed record writes (channels × out_height × out_width).
  size_t out_count() const { return static_cast<size_t>(channels_) * out_height() * out_width(); }

  /// Transforms one channels×height×width record (CHW; `bytes` when not null, else `floats`)
  /// into `out` (out_count() values); `rng` draws the TRAIN-phase crop and mirror.
  void Transform(const uint8_t* bytes, const float* floats, float* out, std::mt19937& rng) const;

 private:
  int channels_, height_, width_, crop_ = 0;
  float scale_ = 1.0f;
  bool mirror_ = false, train_ = false;
  std::vector<float> mean_;  // channels×height×width, or empty
};

}  // namespace mpcaffe

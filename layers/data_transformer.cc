// layers/data_transformer.cc — transform_param on one record (layers/data_transformer.h).
#include "layers/data_transformer.h"

#include "device/error.h"
#include "proto/model_io.h"

namespace mpcaffe {

DataTransformer::DataTransformer(const caffe::TransformationParameter& tp,
                                 const caffe::DataParameter* legacy, int channels, int height,
                                 int width, caffe::Phase phase)
    : channels_(channels), height_(height), width_(width), train_(phase == caffe::TRAIN) {
  const caffe::DataParameter none;
  const caffe::DataParameter& dp = legacy ? *legacy : none;
  scale_ = tp.has_scale() ? tp.scale() : dp.scale();
  crop_ = static_cast<int>(tp.crop_size() ? tp.crop_size() : dp.crop_size());
  mirror_ = tp.mirror() || dp.mirror();
  if (crop_ > height_ || crop_ > width_)
    throw Error("crop_size " + std::to_string(crop_) + " exceeds the records' " +
                std::to_string(height_) + "x" + std::to_string(width_));
  const std::string mean_file = tp.has_mean_file() ? tp.mean_file() : dp.mean_file();
  const size_t plane = static_cast<size_t>(channels_) * height_ * width_;
  if (!mean_file.empty()) {
    if (tp.mean_value_size()) throw Error("give mean_file or mean_value, not both");
    const caffe::BlobProto mean = ReadBlobProtoBinary(mean_file);
    if (static_cast<size_t>(mean.data_size()) != plane)
      throw Error("mean file '" + mean_file + "' has " + std::to_string(mean.data_size()) +
                  " values, the records " + std::to_string(plane) + " (" +
                  std::to_string(channels_) + "x" + std::to_string(height_) + "x" +
                  std::to_string(width_) + ")");
    mean_.assign(mean.data().begin(), mean.data().end());
  } else if (tp.mean_value_size()) {
    if (tp.mean_value_size() != 1 && tp.mean_value_size() != channels_)
      throw Error("mean_value needs 1 or " + std::to_string(channels_) + " values");
    mean_.resize(plane);
    for (int c = 0; c < channels_; ++c)
      for (int i = 0; i < height_ * width_; ++i)
        mean_[static_cast<size_t>(c) * height_ * width_ + i] =
            tp.mean_value(tp.mean_value_size() == 1 ? 0 : c);
  }
}

void DataTransformer::Transform(const uint8_t* bytes, const float* floats, float* out,
                                std::mt19937& rng) const {
  const int h = out_height(), w = out_width();
  int off_h = 0, off_w = 0;
  if (crop_) {
    if (train_) {
      off_h = std::uniform_int_distribution<int>(0, height_ - crop_)(rng);
      off_w = std::uniform_int_distribution<int>(0, width_ - crop_)(rng);
    } else {
      off_h = (height_ - crop_) / 2, off_w = (width_ - crop_) / 2;
    }
  }
  const bool flip = mirror_ && train_ ? (rng() & 1) != 0 : false;
  for (int c = 0; c < channels_; ++c)
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        const size_t src = (static_cast<size_t>(c) * height_ + y + off_h) * width_ + x + off_w;
        float v = bytes ? static_cast<float>(bytes[src]) : floats[src];
        if (!mean_.empty()) v -= mean_[src];
        out[(static_cast<size_t>(c) * h + y) * w + (flip ? w - 1 - x : x)] = v * scale_;
      }
}

}  // namespace mpcaffe

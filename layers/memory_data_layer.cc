// layers/memory_data_layer.cc — the MemoryData layer (layers/memory_data_layer.h): arrays given by
// the program, served batch by batch.
#include "layers/memory_data_layer.h"

#include <algorithm>

#include "layers/data_transformer.h"
#include "layers/image_io.h"

namespace mpcaffe {

MemoryDataLayer::MemoryDataLayer(const caffe::LayerParameter& param, Device& device)
    : Layer(param, device) {}

MemoryDataLayer::~MemoryDataLayer() = default;

void MemoryDataLayer::LayerSetUp(const std::vector<Blob*>&, const std::vector<Blob*>&) {
  const auto& p = param_.memory_data_param();
  const char* fields[] = {"batch_size", "channels", "height", "width"};
  const uint32_t values[] = {p.batch_size(), p.channels(), p.height(), p.width()};
  for (int i = 0; i < 4; ++i)
    if (values[i] == 0 || values[i] > (1u << 30))
      Fail(std::string("memory_data_param.") + fields[i] + " must be given and positive (got " +
           std::to_string(values[i]) + ")");
  batch_ = static_cast<int>(p.batch_size());
  channels_ = static_cast<int>(p.channels());
  height_ = static_cast<int>(p.height());
  width_ = static_cast<int>(p.width());
  rng_.seed(static_cast<uint32_t>(StableHash(name() + "#transform", RandomSeed())));
}

void MemoryDataLayer::Reshape(const std::vector<Blob*>&, const std::vector<Blob*>& top) {
  top[0]->Reshape({batch_, channels_, height_, width_});
  top[1]->Reshape({batch_});
}

void MemoryDataLayer::Reset(const float* data, const float* labels, int n) {
  if (!data || !labels) Fail("Reset needs data and labels");
  if (n <= 0 || n % batch_ != 0)
    Fail("Reset with " + std::to_string(n) + " items: it must be a positive multiple of the "
         "batch size " + std::to_string(batch_));
  const size_t item = static_cast<size_t>(channels_) * height_ * width_;
  data_.assign(data, data + item * n);
  labels_.assign(labels, labels + n);
  n_ = n;
  pos_ = 0;
}

void MemoryDataLayer::AddDatumVector(const std::vector<caffe::Datum>& records) {
  if (has_new_data_) Fail("cannot add data until the records added before have been served");
  const int n = static_cast<int>(records.size());
  if (n == 0) Fail("AddDatumVector got no records");
  if (n % batch_ != 0)
    Fail("AddDatumVector got " + std::to_string(n) + " records: the added data must be a "
         "multiple of the batch size " + std::to_string(batch_));
  const auto& tp = param_.transform_param();
  const size_t item = static_cast<size_t>(channels_) * height_ * width_;
  std::vector<float> data(item * n), labels(n);
  for (int i = 0; i < n; ++i) {
    caffe::Datum d = records[i];
    const std::string what = "record " + std::to_string(i);
    try {
      DecodeDatumInPlace(&d, what, tp.force_color(), tp.force_gray());
      // One transformer per record shape (it reads the mean file when it is built).
      const std::vector<int> shape{d.channels(), d.height(), d.width()};
      if (!transformer_ || shape != transformer_shape_) {
        transformer_ = std::make_unique<DataTransformer>(tp, nullptr, d.channels(), d.height(),
                                                         d.width(), phase());
        transformer_shape_ = shape;
      }
      const DataTransformer& tr = *transformer_;
      if (d.channels() != channels_ || tr.out_height() != height_ || tr.out_width() != width_)
        Fail(what + " is " + std::to_string(d.channels()) + "x" + std::to_string(d.height()) +
             "x" + std::to_string(d.width()) + ", transformed " + std::to_string(d.channels()) +
             "x" + std::to_string(tr.out_height()) + "x" + std::to_string(tr.out_width()) +
             "; memory_data_param wants " + std::to_string(channels_) + "x" +
             std::to_string(height_) + "x" + std::to_string(width_));
      const size_t plane = static_cast<size_t>(d.channels()) * d.height() * d.width();
      const std::string& bytes = d.data();
      if (bytes.empty() ? static_cast<size_t>(d.float_data_size()) != plane : bytes.size() != plane)
        Fail(what + " holds " +
             std::to_string(bytes.empty() ? d.float_data_size() : bytes.size()) +
             " values for its shape's " + std::to_string(plane));
      tr.Transform(bytes.empty() ? nullptr : reinterpret_cast<const uint8_t*>(bytes.data()),
                   bytes.empty() ? d.float_data().data() : nullptr, data.data() + i * item, rng_);
    } catch (const LayerError&) {
      throw;
    } catch (const Error& e) {
      Fail(e.what());
    }
    labels[i] = static_cast<float>(d.label());
  }
  Reset(data.data(), labels.data(), n);
  has_new_data_ = true;
}

void MemoryDataLayer::set_batch_size(int batch) {
  if (has_new_data_) Fail("cannot change the batch size until the added records have been served");
  if (batch <= 0) Fail("batch size must be positive, got " + std::to_string(batch));
  batch_ = batch;
}

void MemoryDataLayer::ForwardImpl(const std::vector<Blob*>&, const std::vector<Blob*>& top) {
  if (n_ == 0)
    Fail("has no data: give it arrays first (Net.set_input_arrays in Python, "
         "MemoryDataLayer::Reset or AddDatumVector in C++)");
  if (n_ % batch_ != 0)
    Fail("holds " + std::to_string(n_) + " items, not a multiple of the batch size " +
         std::to_string(batch_));
  const size_t item = static_cast<size_t>(channels_) * height_ * width_;
  top[0]->FromFloat(std::vector<float>(data_.begin() + pos_ * item,
                                       data_.begin() + (pos_ + batch_) * item));
  top[1]->FromFloat(std::vector<float>(labels_.begin() + pos_, labels_.begin() + pos_ + batch_));
  pos_ = (pos_ + batch_) % n_;
  if (pos_ == 0) has_new_data_ = false;
}

}  // namespace mpcaffe

// layers/memory_data_layer.h — BVLC's MemoryData layer: batches served from arrays the program
// hands it (pycaffe's Net.set_input_arrays, or C++ through this class), tops data
// (batch_size × channels × height × width) and label (batch_size).
#pragma once

#include <memory>
#include <random>
#include <vector>

#include "layers/layer.h"

namespace mpcaffe {

class DataTransformer;

/// memory_data_param gives the batch size and the shape of one item. Each Forward serves the next
/// batch_size items of the arrays last given, wrapping around at their end (BVLC). Float types;
/// quantized nets keep it in fp32 like every input layer.
class MemoryDataLayer : public Layer {
 public:
  MemoryDataLayer(const caffe::LayerParameter& param, Device& device);
  ~MemoryDataLayer() override;
  const char* type() const override { return "MemoryData"; }
  bool SupportsType(DataType t) const override { return !IsQuantized(t); }
  int ExactNumBottomBlobs() const override { return 0; }
  int ExactNumTopBlobs() const override { return 2; }
  bool ReshapesEachPass() const override { return true; }
  void LayerSetUp(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

  /// BVLC's Reset: `n` items (a multiple of batch_size) of channels·height·width values each,
  /// and their n labels, copied into the layer. As in BVLC the values are served as given:
  /// transform_param does not apply to arrays (AddDatumVector applies it). Serving restarts at
  /// item 0. Throws LayerError naming the layer when a pointer is null or n does not fit.
  void Reset(const float* data, const float* labels, int n);
  /// BVLC's AddDatumVector: records (raw or encoded, of any size transform_param's crop turns
  /// into the layer's height × width) transformed as transform_param says (mean, crop, mirror,
  /// scale), with their labels. Throws LayerError when the layer still serves unconsumed added
  /// records, when the count is not a positive multiple of batch_size, or a record does not fit.
  void AddDatumVector(const std::vector<caffe::Datum>& records);
  /// BVLC's set_batch_size: later passes serve `batch` items (refused while added records are
  /// being consumed, as BVLC).
  void set_batch_size(int batch);

  int batch_size() const { return batch_; }
  int channels() const { return channels_; }
  int height() const { return height_; }
  int width() const { return width_; }
  /// Items held (0 before Reset / AddDatumVector).
  int items() const { return n_; }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>& top) override;

 private:
  int batch_ = 0, channels_ = 0, height_ = 0, width_ = 0;
  int n_ = 0, pos_ = 0;
  bool has_new_data_ = false;  // AddDatumVector's records not yet served once
  std::vector<float> data_, labels_;
  std::unique_ptr<DataTransformer> transformer_;
  std::vector<int> transformer_shape_;  // the records transformer_ is built for
  std::mt19937 rng_;
};

}  // namespace mpcaffe

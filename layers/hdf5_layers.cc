// layers/hdf5_layers.cc — BVLC's HDF5Data (batches of rows from the HDF5 files listed in
// hdf5_data_param.source, a dataset per top named as the top) and HDF5Output (its two bottoms
// written to hdf5_output_param.file_name as datasets "data" and "label").
#include <algorithm>
#include <fstream>
#include <memory>
#include <numeric>
#include <random>

#include "layers/hdf5_file.h"
#include "layers/layer_registry.h"

namespace mpcaffe {
namespace {

/// HDF5Data: the files of `source` (one name per whitespace-separated token, as BVLC reads it)
/// are read one at a time, whole; each Forward fills batch_size rows of every top from the
/// current file's datasets (the top's name), moving to the next file (round the list) after a
/// file's last row. shuffle: the file order is shuffled at start and at each pass round the
/// list, the row order at each file load and each pass through a file (BVLC's). Values are
/// converted to float by HDF5; tops are [batch_size, dims 1..] of the datasets. Float types.
class HDF5DataLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "HDF5Data"; }
  bool SupportsType(DataType t) const override { return !IsQuantized(t); }
  int ExactNumBottomBlobs() const override { return 0; }
  int MinTopBlobs() const override { return 1; }

  void LayerSetUp(const std::vector<Blob*>&, const std::vector<Blob*>& top) override {
    const auto& p = param_.hdf5_data_param();
    if (p.batch_size() == 0) Fail("hdf5_data_param.batch_size must be positive");
    if (p.source().empty()) Fail("hdf5_data_param.source (a list of HDF5 files) is not given");
    std::ifstream list(p.source());
    if (!list) Fail("hdf5_data_param.source '" + p.source() + "' cannot be opened");
    for (std::string name; list >> name;) files_.push_back(name);
    if (files_.empty()) Fail("hdf5_data_param.source '" + p.source() + "' lists no HDF5 file");
    if (param_.top_size() != static_cast<int>(top.size()))
      Fail("needs its tops named in the layer (each names its dataset)");
    order_.resize(files_.size());
    std::iota(order_.begin(), order_.end(), size_t{0});
    rng_.seed(static_cast<uint32_t>(StableHash(name() + "#shuffle", RandomSeed())));
    if (p.shuffle()) std::shuffle(order_.begin(), order_.end(), rng_);
    Load(order_[0]);
  }
  void Reshape(const std::vector<Blob*>&, const std::vector<Blob*>& top) override {
    const int batch = static_cast<int>(param_.hdf5_data_param().batch_size());
    for (size_t j = 0; j < top.size(); ++j) {
      std::vector<int> shape{batch};
      for (size_t d = 1; d < data_[j].dims.size(); ++d) shape.push_back(static_cast<int>(data_[j].dims[d]));
      top[j]->Reshape(shape);
    }
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>&, const std::vector<Blob*>& top) override {
    const int batch = static_cast<int>(param_.hdf5_data_param().batch_size());
    std::vector<std::vector<float>> out(top.size());
    for (size_t j = 0; j < top.size(); ++j) out[j].resize(top[j]->count());
    for (int i = 0; i < batch; ++i) {
      for (size_t j = 0; j < top.size(); ++j) {
        const size_t dim = out[j].size() / batch;
        if (data_[j].values.size() / rows_ != dim)
          Fail("dataset '" + param_.top(static_cast<int>(j)) + "' of '" + files_[order_[file_]] +
               "' has rows of " + std::to_string(data_[j].values.size() / rows_) +
               " values, the first file's had " + std::to_string(dim));
        const float* row = data_[j].values.data() + rows_order_[row_] * dim;
        std::copy(row, row + dim, out[j].begin() + i * dim);
      }
      Next();
    }
    for (size_t j = 0; j < top.size(); ++j) top[j]->FromFloat(out[j]);
  }

 private:
  /// Reads every top's dataset of file `index` (BVLC's LoadHDF5FileData).
  void Load(size_t index) {
    const std::string& path = files_[index];
    data_.clear();
    for (int j = 0; j < param_.top_size(); ++j) {
      try {
        data_.push_back(ReadHdf5Dataset(path, param_.top(j)));
      } catch (const Error& e) {
        Fail(e.what());
      }
      if (data_[j].dims[0] != data_[0].dims[0])
        Fail("HDF5 file '" + path + "': dataset '" + param_.top(j) + "' has " +
             std::to_string(data_[j].dims[0]) + " rows, '" + param_.top(0) + "' " +
             std::to_string(data_[0].dims[0]));
    }
    rows_ = static_cast<size_t>(data_[0].dims[0]);
    if (rows_ == 0) Fail("HDF5 file '" + path + "': dataset '" + param_.top(0) + "' has no rows");
    rows_order_.resize(rows_);
    std::iota(rows_order_.begin(), rows_order_.end(), size_t{0});
    if (param_.hdf5_data_param().shuffle()) std::shuffle(rows_order_.begin(), rows_order_.end(), rng_);
    row_ = 0;
  }
  /// BVLC's Next: the next row, else the next file (round the list), else the same file again.
  void Next() {
    if (++row_ < rows_) return;
    const bool shuffle = param_.hdf5_data_param().shuffle();
    if (files_.size() > 1) {
      if (++file_ == files_.size()) {
        file_ = 0;
        if (shuffle) std::shuffle(order_.begin(), order_.end(), rng_);
      }
      Load(order_[file_]);
    }
    row_ = 0;
    if (shuffle) std::shuffle(rows_order_.begin(), rows_order_.end(), rng_);
  }

  std::vector<std::string> files_;
  std::vector<size_t> order_;       // file order (shuffled with shuffle)
  size_t file_ = 0;                 // position in order_
  std::vector<Hdf5Array> data_;     // the current file's dataset per top
  size_t rows_ = 0, row_ = 0;       // rows of the current file; position in rows_order_
  std::vector<size_t> rows_order_;  // row order (shuffled with shuffle)
  std::mt19937 rng_;
};

/// HDF5Output: the file hdf5_output_param.file_name is created (truncated) at set-up; each
/// Forward appends bottom 0 to dataset "data" and bottom 1 to "label", as 4-d float arrays of
/// BVLC's legacy shape (num, channels, height, width; missing axes 1), and flushes the file.
/// (BVLC writes the datasets once and fails at a second Forward; here later batches append rows.)
/// No tops, no backward. Float types.
class HDF5OutputLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "HDF5Output"; }
  bool SupportsType(DataType t) const override { return !IsQuantized(t); }
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 0; }

  void LayerSetUp(const std::vector<Blob*>&, const std::vector<Blob*>&) override {
    const std::string& path = param_.hdf5_output_param().file_name();
    if (path.empty()) Fail("hdf5_output_param.file_name is not given");
    try {
      writer_ = std::make_unique<Hdf5Writer>(path);
    } catch (const Error& e) {
      Fail(e.what());
    }
  }
  void Reshape(const std::vector<Blob*>& bottom, const std::vector<Blob*>&) override {
    for (const Blob* b : bottom)
      if (b->num_axes() > 4 || b->num_axes() < 1)
        Fail("bottom " + b->shape_string() + ": 1 to 4 axes expected (written as num, channels, height, width)");
    if (bottom[0]->shape(0) != bottom[1]->shape(0))
      Fail("data " + bottom[0]->shape_string() + " and label " + bottom[1]->shape_string() +
           " must have the same number of rows");
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>& bottom, const std::vector<Blob*>&) override {
    const char* names[] = {"data", "label"};
    for (int i = 0; i < 2; ++i) {
      const Blob& b = *bottom[i];
      std::vector<int64_t> dims(4, 1);
      for (int a = 0; a < b.num_axes(); ++a) dims[a] = b.shape(a);
      const std::vector<float> v = b.ToFloat();
      try {
        writer_->Append(names[i], dims, v.data());
      } catch (const Error& e) {
        Fail(e.what());
      }
    }
  }

 private:
  std::unique_ptr<Hdf5Writer> writer_;
};

}  // namespace

void RegisterHdf5Layers() {
  RegisterLayerType<HDF5DataLayer>("HDF5Data");
  RegisterLayerType<HDF5OutputLayer>("HDF5Output");
}

}  // namespace mpcaffe

// layers/data_layer.cc — the Data layer: batches of caffe.Datum records from an LMDB database
// (raw, or encoded JPEG/PNG decoded with OpenCV), transformed as transform_param says
// (layers/data_transformer.h: scale, mean_file / mean_value, crop_size, mirror) by a
// background prefetch thread that keeps `prefetch` batches ready. In a data-parallel job each
// process reads its shard of the records (GetDataShard: rank r of N takes r, r + N, …).
#include <sys/stat.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <random>
#include <thread>

#include "layers/data_transformer.h"
#include "layers/image_io.h"
#include "layers/layer_registry.h"
#include "layers/lmdb_io.h"

namespace mpcaffe {
namespace {

struct Batch {
  std::vector<float> data, label;
  std::string error;  // set when the prefetch thread failed
};

class DataLayer : public Layer {
 public:
  DataLayer(const caffe::LayerParameter& p, Device& d) : Layer(p, d) {
    const std::string& source = param_.data_param().source();
    struct stat st;
    if (source.empty() || stat(source.c_str(), &st) != 0)
      Fail("data source '" + source +
           "' does not exist (to run without it, replace Data layers by random Inputs: "
           "`--synthetic` on the command line, NetOptions::synthetic_data in C++)");
    if (param_.data_param().backend() == caffe::DataParameter::LEVELDB && !S_ISDIR(st.st_mode))
      Fail("data source '" + source + "': only LMDB databases are read (backend: LMDB)");
    try {
      reader_ = std::make_unique<LmdbReader>(source, shard_);
    } catch (const DbError& e) {
      Fail(e.what());
    }
  }
  ~DataLayer() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  const char* type() const override { return "Data"; }
  bool SupportsType(DataType t) const override { return !IsQuantized(t); }
  int ExactNumBottomBlobs() const override { return 0; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }

  void LayerSetUp(const std::vector<Blob*>&, const std::vector<Blob*>& top) override {
    const auto& dp = param_.data_param();
    const auto& tp = param_.transform_param();
    batch_ = static_cast<int>(dp.batch_size());
    if (batch_ <= 0) Fail("data_param.batch_size must be positive");
    caffe::Datum first;
    if (!first.ParseFromString(reader_->Next()))
      Fail("the first record of '" + dp.source() + "' is not a caffe.Datum");
    try {
      DecodeDatumInPlace(&first, "the first record of '" + dp.source() + "'", tp.force_color(),
                         tp.force_gray());
      channels_ = first.channels(), height_ = first.height(), width_ = first.width();
      transformer_ = std::make_unique<DataTransformer>(tp, &dp, channels_, height_, width_, phase());
    } catch (const Error& e) {
      Fail(e.what());
    }
    reader_ = std::make_unique<LmdbReader>(dp.source(), shard_);  // start over at the first record
    rng_.seed(static_cast<uint32_t>(StableHash(name() + "#transform", RandomSeed())));
    top[0]->Reshape({batch_, channels_, transformer_->out_height(), transformer_->out_width()});
    if (top.size() == 2) top[1]->Reshape({batch_});
    depth_ = std::max<int>(1, static_cast<int>(dp.prefetch()));
    thread_ = std::thread([this] { Prefetch(); });
  }
  void Reshape(const std::vector<Blob*>&, const std::vector<Blob*>& top) override {}

 protected:
  void ForwardImpl(const std::vector<Blob*>&, const std::vector<Blob*>& top) override {
    Batch b;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [this] { return !ready_.empty(); });
      b = std::move(ready_.front());
      ready_.pop_front();
    }
    cv_.notify_all();
    if (!b.error.empty()) Fail(b.error);
    top[0]->FromFloat(b.data);
    if (top.size() == 2) top[1]->FromFloat(b.label);
  }

 private:
  /// One transformed batch from the reader (the prefetch thread owns reader_ and rng_).
  Batch Load() {
    Batch b;
    const size_t count = transformer_->out_count();
    b.data.resize(static_cast<size_t>(batch_) * count);
    b.label.resize(batch_);
    caffe::Datum datum;
    const auto& tp = param_.transform_param();
    for (int n = 0; n < batch_; ++n) {
      if (!datum.ParseFromString(reader_->Next())) throw Error("a record is not a caffe.Datum");
      DecodeDatumInPlace(&datum, "an encoded record", tp.force_color(), tp.force_gray());
      if (datum.channels() != channels_ || datum.height() != height_ || datum.width() != width_)
        throw Error("a record of shape " + std::to_string(datum.channels()) + "x" +
                    std::to_string(datum.height()) + "x" + std::to_string(datum.width()) +
                    " differs from the first record's");
      const std::string& bytes = datum.data();
      const size_t plane = static_cast<size_t>(channels_) * height_ * width_;
      if (bytes.empty() ? static_cast<size_t>(datum.float_data_size()) != plane
                        : bytes.size() != plane)
        throw Error("a record of " + std::to_string(channels_) + "x" + std::to_string(height_) +
                    "x" + std::to_string(width_) + " holds " +
                    std::to_string(bytes.empty() ? datum.float_data_size() : bytes.size()) +
                    " values");
      transformer_->Transform(
          bytes.empty() ? nullptr : reinterpret_cast<const uint8_t*>(bytes.data()),
          bytes.empty() ? datum.float_data().data() : nullptr, b.data.data() + n * count, rng_);
      b.label[n] = static_cast<float>(datum.label());
    }
    return b;
  }

  void Prefetch() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [this] { return stop_ || static_cast<int>(ready_.size()) < depth_; });
        if (stop_) return;
      }
      Batch b;
      try {
        b = Load();
      } catch (const std::exception& e) {
        b.error = std::string("reading '") + param_.data_param().source() + "': " + e.what();
      }
      const bool failed = !b.error.empty();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ready_.push_back(std::move(b));
      }
      cv_.notify_all();
      if (failed) return;
    }
  }

  const DataShard shard_ = GetDataShard();
  std::unique_ptr<LmdbReader> reader_;
  int batch_ = 0, channels_ = 0, height_ = 0, width_ = 0, depth_ = 4;
  std::unique_ptr<DataTransformer> transformer_;
  std::mt19937 rng_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Batch> ready_;
  bool stop_ = false;
};

}  // namespace

std::unique_ptr<Layer> CreateDataLayer(const caffe::LayerParameter& param, Device& device) {
  return std::make_unique<DataLayer>(param, device);
}

}  // namespace mpcaffe

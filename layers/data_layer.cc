// layers/data_layer.cc — the Data layer: batches of caffe.Datum records from an LMDB database,
// transformed as transform_param says (scale, mean_file / mean_value, crop_size, mirror) by a
// background prefetch thread that keeps `prefetch` batches ready. In a data-parallel job each
// process reads its shard of the records (GetDataShard: rank r of N takes r, r + N, …).
#include <sys/stat.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <random>
#include <thread>

#include "layers/layer_registry.h"
#include "layers/lmdb_io.h"
#include "proto/model_io.h"

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
    if (first.encoded()) Fail("encoded (JPEG/PNG) Datum records are not supported");
    channels_ = first.channels(), height_ = first.height(), width_ = first.width();
    reader_ = std::make_unique<LmdbReader>(dp.source(), shard_);  // start over at the first record
    scale_ = tp.has_scale() ? tp.scale() : dp.scale();
    crop_ = static_cast<int>(tp.crop_size() ? tp.crop_size() : dp.crop_size());
    mirror_ = tp.mirror() || dp.mirror();
    if (crop_ > height_ || crop_ > width_)
      Fail("crop_size " + std::to_string(crop_) + " exceeds the records' " +
           std::to_string(height_) + "x" + std::to_string(width_));
    const std::string mean_file = tp.has_mean_file() ? tp.mean_file() : dp.mean_file();
    const size_t plane = static_cast<size_t>(channels_) * height_ * width_;
    if (!mean_file.empty()) {
      if (tp.mean_value_size()) Fail("give mean_file or mean_value, not both");
      const caffe::BlobProto mean = ReadBlobProtoBinary(mean_file);
      if (static_cast<size_t>(mean.data_size()) != plane)
        Fail("mean file '" + mean_file + "' has " + std::to_string(mean.data_size()) +
             " values, the records " + std::to_string(plane));
      mean_.assign(mean.data().begin(), mean.data().end());
    } else if (tp.mean_value_size()) {
      if (tp.mean_value_size() != 1 && tp.mean_value_size() != channels_)
        Fail("mean_value needs 1 or " + std::to_string(channels_) + " values");
      mean_.resize(plane);
      for (int c = 0; c < channels_; ++c)
        for (int i = 0; i < height_ * width_; ++i)
          mean_[static_cast<size_t>(c) * height_ * width_ + i] =
              tp.mean_value(tp.mean_value_size() == 1 ? 0 : c);
    }
    rng_.seed(static_cast<uint32_t>(StableHash(name() + "#transform", RandomSeed())));
    const int h = crop_ ? crop_ : height_, w = crop_ ? crop_ : width_;
    top[0]->Reshape({batch_, channels_, h, w});
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
    const int h = crop_ ? crop_ : height_, w = crop_ ? crop_ : width_;
    b.data.resize(static_cast<size_t>(batch_) * channels_ * h * w);
    b.label.resize(batch_);
    caffe::Datum datum;
    for (int n = 0; n < batch_; ++n) {
      if (!datum.ParseFromString(reader_->Next())) throw Error("a record is not a caffe.Datum");
      if (datum.channels() != channels_ || datum.height() != height_ || datum.width() != width_)
        throw Error("a record of shape " + std::to_string(datum.channels()) + "x" +
                    std::to_string(datum.height()) + "x" + std::to_string(datum.width()) +
                    " differs from the first record's");
      const std::string& bytes = datum.data();
      const bool use_bytes = !bytes.empty();
      int off_h = 0, off_w = 0;
      if (crop_) {
        if (phase() == caffe::TRAIN) {
          off_h = std::uniform_int_distribution<int>(0, height_ - crop_)(rng_);
          off_w = std::uniform_int_distribution<int>(0, width_ - crop_)(rng_);
        } else {
          off_h = (height_ - crop_) / 2, off_w = (width_ - crop_) / 2;
        }
      }
      const bool flip = mirror_ && phase() == caffe::TRAIN ? (rng_() & 1) != 0 : false;
      float* out = b.data.data() + static_cast<size_t>(n) * channels_ * h * w;
      for (int c = 0; c < channels_; ++c)
        for (int y = 0; y < h; ++y)
          for (int x = 0; x < w; ++x) {
            const size_t src = (static_cast<size_t>(c) * height_ + y + off_h) * width_ + x + off_w;
            float v = use_bytes ? static_cast<float>(static_cast<uint8_t>(bytes[src]))
                                : datum.float_data(static_cast<int>(src));
            if (!mean_.empty()) v -= mean_[src];
            out[(static_cast<size_t>(c) * h + y) * w + (flip ? w - 1 - x : x)] = v * scale_;
          }
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
  int batch_ = 0, channels_ = 0, height_ = 0, width_ = 0, crop_ = 0, depth_ = 4;
  float scale_ = 1.0f;
  bool mirror_ = false;
  std::vector<float> mean_;
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

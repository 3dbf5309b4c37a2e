// layers/image_data_layer.cc — the ImageData layer (BVLC's): batches of images read straight from
// disk, listed in image_data_param.source ("path label" per line, paths under root_folder),
// decoded and resized with OpenCV (layers/image_io.h) and transformed as transform_param says
// (layers/data_transformer.h). Tops: data (N×C×H×W) and, optionally, label (N).
#include <fstream>
#include <random>

#include "layers/data_transformer.h"
#include "layers/image_io.h"
#include "layers/layer_registry.h"

namespace mpcaffe {
namespace {

struct ListedImage {
  std::string path;  // as the list gives it
  int label = 0;
  int line = 0;  // 1-based line of the list file
};

class ImageDataLayer : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "ImageData"; }
  bool SupportsType(DataType t) const override { return !IsQuantized(t); }
  int ExactNumBottomBlobs() const override { return 0; }
  int MinTopBlobs() const override { return 1; }
  int MaxTopBlobs() const override { return 2; }

  void LayerSetUp(const std::vector<Blob*>&, const std::vector<Blob*>& top) override {
    const auto& p = param_.image_data_param();
    ReadList(p.source());
    batch_ = static_cast<int>(p.batch_size());
    if (batch_ <= 0) Fail("image_data_param.batch_size must be positive");
    if ((p.new_height() == 0) != (p.new_width() == 0))
      Fail("image_data_param: give both new_height and new_width, or neither");
    shuffle_rng_.seed(static_cast<uint32_t>(StableHash(name() + "#shuffle", RandomSeed())));
    rng_.seed(static_cast<uint32_t>(StableHash(name() + "#transform", RandomSeed())));
    if (p.shuffle()) Shuffle();
    // BVLC: start at a random line in [0, rand_skip) so that parallel readers differ.
    if (p.rand_skip()) {
      next_ = static_cast<size_t>(shuffle_rng_() % p.rand_skip());
      if (next_ >= lines_.size())
        Fail("rand_skip " + std::to_string(p.rand_skip()) + " skips past the " +
             std::to_string(lines_.size()) + " images of '" + p.source() + "'");
    }
    // The first image gives the shape (every image must share it unless batch_size is 1).
    pending_ = Read(lines_[next_]);
    SetShape(pending_, top);
  }
  /// With batch_size 1 the images may differ in size (BVLC): the net reshapes the layers after
  /// this one before a pass whose image has another shape.
  bool ReshapesEachPass() const override { return batch_ == 1; }
  void Reshape(const std::vector<Blob*>&, const std::vector<Blob*>& top) override {
    if (batch_ != 1 || lines_.empty()) return;
    if (pending_.empty()) pending_ = Read(lines_[next_]);
    if (pending_.channels() != channels_ || pending_.rows != height_ || pending_.cols != width_)
      SetShape(pending_, top);
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>&, const std::vector<Blob*>& top) override {
    std::vector<float> data, label(batch_);
    for (int n = 0; n < batch_; ++n) {
      const ListedImage& item = lines_[next_];
      cv::Mat image;
      std::swap(image, pending_);  // read by Reshape (or LayerSetUp) for this pass
      if (image.empty()) image = Read(item);
      if (image.channels() != channels_ || image.rows != height_ || image.cols != width_) {
        if (batch_ != 1)
          Fail(Where(item) + ": " + std::to_string(image.cols) + "x" + std::to_string(image.rows) +
               " pixels, the first image " + std::to_string(width_) + "x" +
               std::to_string(height_) +
               " (images of different sizes need new_height and new_width, or batch_size 1)");
        SetShape(image, top);
      }
      if (data.empty()) data.resize(static_cast<size_t>(batch_) * transformer_->out_count());
      caffe::Datum datum;
      MatToDatum(image, &datum);
      transformer_->Transform(reinterpret_cast<const uint8_t*>(datum.data().data()), nullptr,
                              data.data() + n * transformer_->out_count(), rng_);
      label[n] = static_cast<float>(item.label);
      if (++next_ >= lines_.size()) {
        next_ = 0;
        if (param_.image_data_param().shuffle()) Shuffle();
      }
    }
    top[0]->FromFloat(data);
    if (top.size() == 2) top[1]->FromFloat(label);
  }

 private:
  void ReadList(const std::string& source) {
    if (source.empty()) Fail("image_data_param.source (the image list file) is not set");
    std::ifstream in(source);
    if (!in) Fail("image list '" + source + "' cannot be opened (missing or unreadable)");
    std::string text;
    for (int line = 1; std::getline(in, text); ++line) {
      while (!text.empty() && (text.back() == '\r' || text.back() == ' ' || text.back() == '\t'))
        text.pop_back();
      if (text.empty()) continue;
      // BVLC: the label follows the last space, so paths may contain spaces.
      const size_t space = text.find_last_of(" \t");
      ListedImage item;
      item.line = line;
      size_t used = 0;
      try {
        if (space == std::string::npos) throw std::invalid_argument("no label");
        item.label = std::stoi(text.substr(space + 1), &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (space == std::string::npos || used != text.size() - space - 1)
        Fail("image list '" + source + "' line " + std::to_string(line) + ": '" + text +
             "' is not \"<path> <integer label>\"");
      item.path = text.substr(0, text.find_last_not_of(" \t", space) + 1);
      lines_.push_back(item);
    }
    if (lines_.empty()) Fail("image list '" + source + "' lists no image");
  }

  std::string Where(const ListedImage& item) const {
    return "image list '" + param_.image_data_param().source() + "' line " +
           std::to_string(item.line);
  }

  cv::Mat Read(const ListedImage& item) const {
    const auto& p = param_.image_data_param();
    try {
      return ReadImage(p.root_folder() + item.path, static_cast<int>(p.new_height()),
                       static_cast<int>(p.new_width()), p.is_color());
    } catch (const Error& e) {
      Fail(Where(item) + ": " + e.what());
    }
  }

  void SetShape(const cv::Mat& image, const std::vector<Blob*>& top) {
    const auto& p = param_.image_data_param();
    channels_ = image.channels(), height_ = image.rows, width_ = image.cols;
    caffe::DataParameter legacy;  // image_data_param's deprecated copies of transform_param's
    legacy.set_scale(p.scale());
    legacy.set_mean_file(p.mean_file());
    legacy.set_crop_size(p.crop_size());
    legacy.set_mirror(p.mirror());
    try {
      transformer_ = std::make_unique<DataTransformer>(param_.transform_param(), &legacy, channels_,
                                                       height_, width_, phase());
    } catch (const Error& e) {
      Fail(e.what());
    }
    top[0]->Reshape({batch_, channels_, transformer_->out_height(), transformer_->out_width()});
    if (top.size() == 2) top[1]->Reshape({batch_});
  }

  void Shuffle() { std::shuffle(lines_.begin(), lines_.end(), shuffle_rng_); }

  std::vector<ListedImage> lines_;
  size_t next_ = 0;
  cv::Mat pending_;  // the image lines_[next_], read ahead to learn its shape
  int batch_ = 0, channels_ = 0, height_ = 0, width_ = 0;
  std::unique_ptr<DataTransformer> transformer_;
  std::mt19937 shuffle_rng_, rng_;
};

}  // namespace

std::unique_ptr<Layer> CreateImageDataLayer(const caffe::LayerParameter& param, Device& device) {
  return std::make_unique<ImageDataLayer>(param, device);
}

}  // namespace mpcaffe

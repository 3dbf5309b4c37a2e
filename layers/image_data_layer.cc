// layers/image_data_layer.cc — the ImageData layer (BVLC's): batches of images read straight from
// disk, listed in image_data_param.source ("path label" per line, paths under root_folder),
// decoded and resized by OpenCV (layers/image_io.h) and transformed as transform_param says
// (layers/data_transformer.h). Tops: data (N×C×H×W) and, optionally, label (N).
#include <fstream>
#include <random>

#include "layers/data_transformer.h"
#include "layers/image_io.h"
#include "layers/layer_registry.h"

namespace mpcaffe {
namespace {


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
    if (pending_.channels != channels_ || pending_.height != height_ || pending_.width != width_)
      SetShape(pending_, top);
  }

 protected:
  void ForwardImpl(const std::vector<Blob*>&, const std::vector<Blob*>& top) override {
    std::vector<float> data, label(batch_);
    for (int n = 0; n < batch_; ++n) {
      const ListedImage& item = lines_[next_];
      Image image;
      std::swap(image, pending_);  // read by Reshape (or LayerSetUp) for this pass
      if (image.empty()) image = Read(item);
      if (image.channels != channels_ || image.height != height_ || image.width != width_) {
        if (batch_ != 1)
          Fail(Where(item) + ": " + std::to_string(image.width) + "x" + std::to_string(image.height) +
               " pixels, the first image " + std::to_string(width_) + "x" +
               std::to_string(height_) +
               " (images of different sizes need new_height and new_width, or batch_size 1)");
        SetShape(image, top);
      }
      if (data.empty()) data.resize(static_cast<size_t>(batch_) * transformer_->out_count());
      caffe::Datum datum;
      ImageToDatum(image, &datum);
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
    try {
      lines_ = ReadImageList(source, true);
    } catch (const ImageError& e) {
      Fail(e.what());
    }
    if (lines_.empty()) Fail("image list '" + source + "' lists no image");
  }

  std::string Where(const ListedImage& item) const {
    return "image list '" + param_.image_data_param().source() + "' line " +
           std::to_string(item.line);
  }

  Image Read(const ListedImage& item) const {
    const auto& p = param_.image_data_param();
    try {
      return ReadImage(p.root_folder() + item.path, static_cast<int>(p.new_height()),
                       static_cast<int>(p.new_width()), p.is_color());
    } catch (const Error& e) {
      Fail(Where(item) + ": " + e.what());
    }
  }

  void SetShape(const Image& image, const std::vector<Blob*>& top) {
    const auto& p = param_.image_data_param();
    channels_ = image.channels, height_ = image.height, width_ = image.width;
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
  Image pending_;  // the image lines_[next_], read ahead to learn its shape
  int batch_ = 0, channels_ = 0, height_ = 0, width_ = 0;
  std::unique_ptr<DataTransformer> transformer_;
  std::mt19937 shuffle_rng_, rng_;
};

}  // namespace

std::unique_ptr<Layer> CreateImageDataLayer(const caffe::LayerParameter& param, Device& device) {
  return std::make_unique<ImageDataLayer>(param, device);
}

}  // namespace mpcaffe
